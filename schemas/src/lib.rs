//! less-contract: the LESS contract, and nothing that stores, indexes, embeds or runs.
//!
//! This crate owns the documents every agent exchanges — [`Engram`], [`Pointer`], [`SharedBriefMicro`],
//! [`Grant`], [`DerefRequest`], [`Budget`] and the six [`TypedMessage`] types — and the PAS [`Scenario`];
//! their JSON Schemas (the `*.v0.1.json` files beside this crate, embedded at build time);
//! validation of untrusted documents ([`validate`]); the closed set of [`ErrorCode`]s;
//! and token counting with a real tokenizer ([`TokenCounter`]).
//! A program that only validates documents or counts tokens links this crate alone:
//! no SQLite, tantivy, usearch or ONNX Runtime.
//!
//! # Design notes
//!
//! * Validation is two layers: the JSON Schema (shape, lengths, counts, enums, formats) and semantic rules the
//!   schema cannot say (a ttl is an ISO-8601 duration, a pointer's ref follows the grammar of its type, decision and
//!   risk engrams cite a resolvable source, a brief fits 30 lines). Both report every problem as a [`Violation`].
//! * [`Valid<T>`] is the proof that a value passed both layers; it can only be made by validating.
//!   [`Pointer`] is always valid on its own: its fields are private and every constructor checks the grammar.
//! * Expected failures are values, never panics: the gateway that enforces budgets replies with violations.
//! * Modules are private; everything public is re-exported at the crate root.

mod adjudication;
mod brief;
mod budget;
mod capsule;
mod deref;
mod digest;
mod engram;
mod error;
#[cfg(test)]
mod fuzz;
mod grant;
mod hierarchy;
mod json;
mod message;
mod pointer;
mod scenario;
mod schema;
mod tokens;
mod ttl;
mod valid;
mod validate;

pub use adjudication::{Adjudication, Judged, Verdict};
pub use brief::{PointerText, SharedBriefMicro};
pub use budget::Budget;
pub use capsule::{
    Capsule, MAX_CAPSULE_CHARS, MAX_CAPSULE_DEPENDS, MAX_CAPSULE_LINE_CHARS, MAX_CAPSULE_LINES, MAX_SYMBOL_CHARS,
    NewCapsule, check_shared_id, check_symbol_value, closure,
};
pub use deref::DerefRequest;
pub use digest::{DIGEST_PREFIX, Digest};
pub use engram::{Engram, EngramBuilder, EngramKind, MAX_CLAIM_CHARS, MAX_POINTERS, Provenance, Scope, Source};
pub use error::{Error, ErrorCode, Result, Violation, Violations};
pub use grant::{Grant, GrantTerms, leaves_workspace, pattern_within, pattern_within_any, patterns_intersect};
pub use hierarchy::{Ancestors, ancestors, is_ancestor, lineage};
pub use json::{parse_document, parse_strict};
pub use message::{GateStatus, Payload, Severity, TaskStatus, TypedMessage, WaveState};
pub use pointer::{MAX_REF_CHARS, MAX_SPAN_CHARS, Pointer, PointerType};
pub use scenario::{
    AgentKind, AgentSpec, Budgets, Check, ClusterNode, EngramSpec, Expect, Gold, GrantSpec, HEAD_NODE, LlmSpec,
    MemorySettings, Misbehaviour, OneOf, Plan, ReportKind, ReportStep, Scenario, Step, Task, TaskKind, WireMode,
    memory_violations, placement_violations, scenario_document, toml_string,
};
pub use schema::{DocKind, SCHEMA_BASE, SCHEMA_FILES, schema_document};
pub use tokens::{CacheStats, Encoding, TokenCounter};
pub use ttl::{MAX_TTL_YEARS, Ttl};
pub use valid::{Contract, Valid};
pub use validate::{MAX_BRIEF_LINES, scenario_pointer_texts, validate, validate_inferred};

/// The current time in RFC 3339, UTC, whole seconds (`2026-01-08T10:00:00Z`).
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0).unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    now.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}
