//! less-runtime: the actors that enforce the LESS contract, and the memories they keep.
//!
//! The contract itself (documents, schemas, validation, error codes, token counting) is the `less-contract` crate,
//! re-exported here so that an agent implementation needs one dependency.
//! This crate adds what stores, indexes, embeds and runs: the [`run`] actor tree (gateways, grants, the resolver,
//! the token ledger), the [`enforce`] core of rules that run's gateways and the MCP [`desk`] both apply, durable
//! [`memory`] with two-stage recall, the lossless [`dag`] memory, and the [`context`] ledger that compacts
//! conversations.
//!
//! # Design notes
//!
//! * Expected failures are values, never panics: a gateway replies with violations, a run records them.
//! * This crate knows no LLM provider and no concrete agent; those live in `less-agents`.

mod blocking;
pub mod cluster;
pub mod context;
pub mod coord;
pub mod dag;
pub mod desk;
pub mod enforce;
pub mod files;
#[cfg(test)]
mod fuzz;
mod gate;
pub mod inline_code;
mod layout;
mod load;
pub mod memory;
mod progress;
mod resolver;
pub mod run;
mod shared;
pub mod supervision;
pub mod view;
pub mod workspace;

pub use layout::{
    ARCHIVE_INDEX_DIR, AUDIT_FILE, COORD_DB, DESK_DB, DESK_KEY, DESK_WORKSPACE_INDEX_DIR, LEDGER_FILE, MEMORY_DB,
    RECALL_DIR, RUN_STORE_DIR, SAM_DB, VECTORS_DIR, WORKSPACE_DB, WORKSPACE_TANTIVY_DIR,
};
pub use less_contract::*;
pub use load::{load_scenario, pointer_problems};
pub use progress::{Progress, Silent, silent};
pub use resolver::{MAX_ABOUT_CHARS, Resolved, Resolver, SamSource, about};
