//! Memory: the durable engram store, the keys recall works on, and stage-1 recall (LESS spec §8, §9, §13).
//!
//! [`Memory`] puts the pieces together: SQLite as the source of truth (`store.rs`), deterministic hash keys
//! (`keys.rs`) and the derived tantivy index (`index.rs`), rebuilt from the store whenever it is missing, unreadable
//! or behind. The embedding rerank, scopes and promotion, rate limits and the `MemoryActor` build on this.

pub mod index;
pub mod keys;
pub mod store;

use std::path::Path;

pub use index::{Candidate, IndexError, RecallIndex};
pub use store::{PutOutcome, Store, StoreError, StoreStats, Stored, Tier, content_hash};

use crate::engram::Engram;
use crate::valid::Valid;

/// Errors of the memory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The derived index failed (`lessrt memory reindex` rebuilds it).
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// One recalled engram.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The engram and its place in the store.
    pub stored: Stored,
    /// Stage-1 score (BM25 over shared keys).
    pub score: f32,
}

/// The answer to a query, saying which stages produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recall {
    /// Stages that ran, in order (`hash`; `rerank` once the embedding model is wired in).
    pub stages: Vec<&'static str>,
    /// Best first.
    pub hits: Vec<Hit>,
}

/// The store and its recall index, kept in step.
///
/// A put is acknowledged after the store's commit; the index takes the engram at once but commits lazily, before the
/// next query (an index commit costs about ten times a store commit). A crash in between leaves the index behind the
/// store's generation, and the next open rebuilds it, so nothing acknowledged is ever missing from recall.
pub struct Memory {
    store: Store,
    index: RecallIndex,
    /// The index holds changes not yet committed.
    index_dirty: bool,
}

impl Memory {
    /// Opens the memory in `dir` (`memory.sqlite3` and `recall/`), rebuilding the index if it is behind the store.
    pub fn open(dir: &Path) -> Result<Memory, MemoryError> {
        let store = Store::open(dir)?;
        let index = RecallIndex::open(&dir.join("recall"))?;
        let mut memory = Memory { store, index, index_dirty: false };
        if memory.index.generation() != memory.store.generation()? {
            memory.reindex()?;
        }
        Ok(memory)
    }

    /// Rebuilds the recall index from the store.
    pub fn reindex(&mut self) -> Result<usize, MemoryError> {
        let hot = self.store.all(Tier::Hot)?;
        self.index.rebuild(&hot, self.store.generation()?)?;
        self.index_dirty = false;
        Ok(hot.len())
    }

    /// Stores an engram and makes it recallable; acknowledged after the store's commit.
    pub fn put(&mut self, engram: &Valid<Engram>, project: &str, now: i64) -> Result<PutOutcome, MemoryError> {
        let outcome = self.store.put(engram, project, now)?;
        if !matches!(outcome, PutOutcome::Duplicate { .. })
            && let Some(stored) = self.store.get(project, outcome.id())?
        {
            self.index.add(&stored)?;
            self.index_dirty = true;
        }
        Ok(outcome)
    }

    /// Stores many engrams in one transaction and indexes them with one commit (bulk loads, evaluations).
    pub fn put_many(
        &mut self,
        engrams: &[Valid<Engram>],
        project: &str,
        now: i64,
    ) -> Result<Vec<PutOutcome>, MemoryError> {
        let outcomes = self.store.put_many(engrams, project, now)?;
        for outcome in outcomes.iter().filter(|o| !matches!(o, PutOutcome::Duplicate { .. })) {
            if let Some(stored) = self.store.get(project, outcome.id())? {
                self.index.add(&stored)?;
                self.index_dirty = true;
            }
        }
        Ok(outcomes)
    }

    /// The `k` best hot engrams of `project` for `text` (optionally of one `kind`).
    pub fn query(&mut self, text: &str, project: &str, kind: Option<&str>, k: usize) -> Result<Recall, MemoryError> {
        self.flush()?;
        let candidates = self.index.recall(&keys::query_keys(text), project, kind, k)?;
        let mut hits = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            // The index is derived: an id it still holds but the store moved to cold is skipped, not returned.
            if let Some(stored) = self.store.get(project, &candidate.id)?
                && stored.tier == Tier::Hot
            {
                hits.push(Hit { stored, score: candidate.score });
            }
        }
        Ok(Recall { stages: vec!["hash"], hits })
    }

    /// Commits pending index changes (queries do this first; call it before handing the index to another process).
    pub fn flush(&mut self) -> Result<(), MemoryError> {
        if self.index_dirty {
            self.index.commit(self.store.generation()?)?;
            self.index_dirty = false;
        }
        Ok(())
    }

    /// The engram `id` of `project`, hot or cold.
    pub fn get(&self, project: &str, id: &str) -> Result<Option<Stored>, MemoryError> {
        Ok(self.store.get(project, id)?)
    }

    /// Moves expired engrams to the cold tier and out of recall; returns how many moved.
    pub fn evict_expired(&mut self, now: i64) -> Result<usize, MemoryError> {
        let moved = self.store.evict_expired(now)?;
        for (project, id) in &moved {
            self.index.remove(project, id);
        }
        self.index_dirty |= !moved.is_empty();
        Ok(moved.len())
    }

    /// `new` supersedes `old` in `project`: both linked, `old` out of recall.
    pub fn supersede(&mut self, project: &str, old: &str, new: &str) -> Result<bool, MemoryError> {
        let done = self.store.supersede(project, old, new)?;
        if done {
            self.index.remove(project, old);
            self.index_dirty = true;
        }
        Ok(done)
    }

    /// Counts by tier and kind.
    pub fn stats(&self) -> Result<StoreStats, MemoryError> {
        Ok(self.store.stats()?)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // Best effort: a failed commit here only means the next open rebuilds the index from the store.
        if let Err(err) = self.flush() {
            tracing::warn!("recall index left behind the store, rebuilt on next open: {err}");
        }
    }
}

#[cfg(test)]
mod tests;
