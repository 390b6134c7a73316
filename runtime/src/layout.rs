//! The names of what a store directory holds, in one place: every module that opens one of these files or
//! directories, and the binary that looks for them, names it by these constants.
//!
//! A store directory (`.lessrt` by default; a run's is [`RUN_STORE_DIR`] in its output directory) holds the memory's
//! SQLite file and its derived indexes, the DAG's message index, and, for the desk, its own database, key and
//! workspace index; a run's also holds its `sam:` index and, once an agent claims, its coordination ledger. A
//! workspace index lives apart, one per workspace ([`crate::workspace::WorkspaceIndex::default_dir`]). A run's output
//! directory keeps its ledger and audit log beside its store.

/// The memory's SQLite file: engrams, vectors, the DAG archive's tables, the desk's shared tables.
pub const MEMORY_DB: &str = "memory.sqlite3";
/// The recall index (tantivy), derived from [`MEMORY_DB`].
pub const RECALL_DIR: &str = "recall";
/// The claim vectors' index (usearch), derived from [`MEMORY_DB`].
pub const VECTORS_DIR: &str = "vectors";
/// The DAG's message index, a memory of its own inside the store.
pub const ARCHIVE_INDEX_DIR: &str = "archive-index";
/// The desk's workspace index, beside its store.
pub const DESK_WORKSPACE_INDEX_DIR: &str = "workspace-index";
/// The desk's database: its ledger, grants, coordination ledger.
pub const DESK_DB: &str = "desk.sqlite";
/// The key the desk signs grants with.
pub const DESK_KEY: &str = "desk.key";
/// A run's store, in its output directory.
pub const RUN_STORE_DIR: &str = "memory";
/// A run's `sam:` index of delivered and refused documents, in its store.
pub const SAM_DB: &str = "sam.sqlite";
/// A run's coordination ledger, in its store.
pub const COORD_DB: &str = "coord.sqlite";
/// A workspace index's SQLite file (files, chunks, vectors): the truth of the index.
pub const WORKSPACE_DB: &str = "index.sqlite3";
/// A workspace index's tantivy directory, derived from [`WORKSPACE_DB`].
pub const WORKSPACE_TANTIVY_DIR: &str = "tantivy";
/// A run's ledger, one JSON event per line, in its output directory.
pub const LEDGER_FILE: &str = "ledger.jsonl";
/// A run's audit log, the ledger's tab-separated twin, in its output directory.
pub const AUDIT_FILE: &str = "audit.log";
