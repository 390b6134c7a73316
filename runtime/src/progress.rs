//! Progress of long operations (embedding a backlog, building the DAG, rebuilding an index), reported through
//! [`Progress`] so the library never prints: the command line draws bars on a terminal, a server could send
//! events, a test can count them. The default, [`Silent`], reports nothing.

use std::sync::Arc;

/// Receives progress: `done` of `total` units of `phase` are finished (`total` 0: not known in advance).
///
/// A phase is reported at least at its start (`done` 0) and its end (`done == total`); a new `phase` text starts a
/// new phase. Calls come from whichever thread does the work, so implementations are `Send + Sync` and cheap.
pub trait Progress: Send + Sync {
    /// `done` of `total` units of `phase` are finished.
    fn update(&self, phase: &str, done: u64, total: u64);
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn update(&self, _phase: &str, _done: u64, _total: u64) {}
}

/// A shared [`Silent`].
pub fn silent() -> Arc<dyn Progress> {
    Arc::new(Silent)
}
