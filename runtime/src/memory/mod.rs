//! Memory: the durable engram store and the keys that recall works on (LESS spec §8, §9, §13).
//!
//! This is the first layer of the memory actor: SQLite as the source of truth (`store.rs`) and deterministic hash
//! keys (`keys.rs`). The recall indexes (tantivy for stage 1, fastembed + usearch for the rerank), scopes and
//! permissions, rate limits and the `MemoryActor` build on these.

pub mod keys;
pub mod store;

pub use store::{PutOutcome, Store, StoreError, StoreStats, Stored, Tier, content_hash};
