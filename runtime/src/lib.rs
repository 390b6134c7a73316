//! less-runtime: the LESS contract and, in later layers, the actors that enforce it.
//!
//! This crate owns the wire types every agent exchanges — [`Engram`], [`Pointer`], [`SharedBriefMicro`],
//! [`Grant`], [`DerefRequest`] and the six [`TypedMessage`] types — their JSON Schemas (embedded from `schemas/`),
//! validation of untrusted documents ([`validate`]), the closed set of [`ErrorCode`]s, and token counting with a real
//! tokenizer ([`TokenCounter`]).
//! [`context`] compacts long conversations into a deterministic ledger ([`compact`]).
//!
//! # Design notes
//!
//! * Validation is two layers: the JSON Schema (shape, lengths, counts, enums, formats) and semantic rules the
//!   schema cannot say (a ttl is an ISO-8601 duration, a pointer's ref follows the grammar of its type, decision and
//!   risk engrams cite a resolvable source, a brief fits 30 lines). Both report every problem as a [`Violation`].
//! * [`Valid<T>`] is the proof that a value passed both layers; it can only be made by validating.
//!   [`Pointer`] is always valid on its own: its fields are private and every constructor checks the grammar.
//! * Expected failures are values, never panics: the gateway that later enforces budgets replies with violations.
//! * This crate knows no LLM provider and no concrete agent; those live in `less-agents`.

pub mod bench;
mod blocking;
mod brief;
mod budget;
pub mod context;
pub mod dag;
mod deref;
mod digest;
mod engram;
mod error;
mod grant;
mod json;
pub mod memory;
mod message;
mod pointer;
mod progress;
mod resolver;
pub mod run;
mod scenario;
mod schema;
mod tokens;
mod ttl;
mod valid;
mod validate;

pub use brief::{PointerText, SharedBriefMicro};
pub use budget::Budget;
pub use context::{ChatMessage, CompactConfig, Compaction, Engine, compact, compact_report};
pub use deref::DerefRequest;
pub use digest::{DIGEST_PREFIX, Digest};
pub use engram::{Engram, EngramBuilder, EngramKind, MAX_CLAIM_CHARS, MAX_POINTERS, Provenance, Scope, Source};
pub use error::{Error, ErrorCode, Result, Violation, Violations};
pub use grant::{Grant, GrantTerms};
pub use json::{parse_document, parse_strict};
pub use message::{GateStatus, Payload, Severity, TaskStatus, TypedMessage, WaveState};
pub use pointer::{MAX_REF_CHARS, MAX_SPAN_CHARS, Pointer, PointerType};
pub use progress::{Progress, Silent, silent};
pub use resolver::{MAX_ABOUT_CHARS, Resolved, Resolver, SamSource, about};
pub use scenario::{
    AgentKind, AgentSpec, Budgets, Check, EngramSpec, Expect, Gold, GrantSpec, LlmSpec, Misbehaviour, OneOf, Plan,
    ReportKind, ReportStep, Scenario, Step, Task, TaskKind, WireMode, scenario_document,
};
pub use schema::{DocKind, SCHEMA_BASE, SCHEMA_FILES, schema_document};
pub use tokens::{CacheStats, Encoding, TokenCounter};
pub use ttl::Ttl;
pub use valid::{Contract, Valid};
pub use validate::{MAX_BRIEF_LINES, validate, validate_inferred};

/// The current time in RFC 3339, UTC, whole seconds (`2026-01-08T10:00:00Z`).
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0).unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    now.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}
