//! Memory: the durable engram store, the keys recall works on, and stage-1 recall (LESS spec §8, §9, §13).
//!
//! [`Memory`] puts the pieces together: SQLite as the source of truth (`store.rs`), deterministic hash keys
//! (`keys.rs`) and the derived tantivy index (`index.rs`), rebuilt from the store whenever it is missing, unreadable
//! or behind. Access control and hygiene (`policy.rs`: scopes, roles, promotion, rate limits, supersession by
//! subject key, contradictions) wrap these operations for callers acting as a [`Principal`]; `actor.rs` serves them
//! to a run as the `MemoryActor`. The embedding rerank builds on this.

pub mod actor;
pub mod index;
pub mod keys;
pub mod policy;
pub mod store;

use std::path::Path;

pub use actor::{
    Clock, EngramRef, MemoryActor, MemoryArgs, MemoryMsg, PromoteRequest, PutRequest, QueryRequest, SupersedeRequest,
    system_clock,
};
pub use index::{Candidate, IndexError, RecallFilter, RecallIndex, vis_key};
pub use policy::{
    CORRECTION_TAG, DEFAULT_PUTS_PER_WINDOW, DEFAULT_RATE_WINDOW_SECS, MemoryPolicy, PROMOTION_CONFIDENCE_FLOOR,
    Principal, PutReport, QueryOptions, ROLE_TAG_PREFIX, SUBJECT_TAG_PREFIX, role_tags, subject_key,
};
pub use store::{Placement, PutOutcome, Store, StoreError, StoreStats, Stored, Tier, content_hash};

use crate::engram::Engram;
use crate::error::{ErrorCode, Violation};
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
    /// The caller may not do this (`LESS_SCOPE_DENIED`) or not now (`LESS_RATE_LIMITED`); nothing changed.
    #[error("{}: {}", .0.code, .0.message)]
    Refused(Violation),
    /// The memory actor did not answer (it failed; the run reports why).
    #[error("memory unavailable: {0}")]
    Unavailable(String),
}

impl MemoryError {
    /// The stable code of a refusal (none for a failure of the store or the index).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            MemoryError::Refused(violation) => Some(violation.code),
            _ => None,
        }
    }

    /// What went wrong, without the code (a refusal's message; the whole error otherwise).
    pub fn message(&self) -> String {
        match self {
            MemoryError::Refused(violation) => violation.message.clone(),
            other => other.to_string(),
        }
    }
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
    /// Limits of the access rules and hygiene (`policy.rs`).
    policy: MemoryPolicy,
}

impl Memory {
    /// Opens the memory in `dir` (`memory.sqlite3` and `recall/`), rebuilding the index if it is behind the store.
    pub fn open(dir: &Path) -> Result<Memory, MemoryError> {
        let store = Store::open(dir)?;
        let index = RecallIndex::open(&dir.join("recall"))?;
        let mut memory = Memory { store, index, index_dirty: false, policy: MemoryPolicy::default() };
        if memory.index.generation() != memory.store.generation()? {
            memory.reindex()?;
        }
        Ok(memory)
    }

    /// Rebuilds the recall index from the store.
    /// Returns how many hot engrams it holds (cold ones are indexed too, for explicit cold queries).
    pub fn reindex(&mut self) -> Result<usize, MemoryError> {
        let hot = self.store.all(Tier::Hot)?;
        let cold = self.store.all(Tier::Cold)?;
        self.index.rebuild(hot.iter().chain(&cold), self.store.generation()?)?;
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

    /// The `k` best hot engrams of `project` for `text` (optionally of one `kind`): the project's trusted view
    /// (its run-less, project, org and global engrams, every role). Callers acting for an agent use
    /// [`Memory::query_as`].
    pub fn query(&mut self, text: &str, project: &str, kind: Option<&str>, k: usize) -> Result<Recall, MemoryError> {
        self.query_filtered(text, &RecallFilter::project(project, kind), k)
    }

    /// The `k` best engrams for `text` among those `filter` lets through.
    pub fn query_filtered(&mut self, text: &str, filter: &RecallFilter, k: usize) -> Result<Recall, MemoryError> {
        self.flush()?;
        let candidates = self.index.recall_filtered(&keys::query_keys(text), filter, k)?;
        let mut hits = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            // The index is derived: an id it still holds but the store moved to cold is skipped, not returned.
            if let Some(stored) = self.store.get(&candidate.project, &candidate.id)?
                && (stored.tier == Tier::Hot || filter.include_cold)
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
            self.reindex_one(project, id)?;
        }
        Ok(moved.len())
    }

    /// Moves engram `id` of `project` to the cold tier; false when it was not hot.
    pub fn evict(&mut self, project: &str, id: &str) -> Result<bool, MemoryError> {
        let done = self.store.evict(project, id)?;
        if done {
            self.reindex_one(project, id)?;
        }
        Ok(done)
    }

    /// Brings the index entry of one engram in line with the store (it changed tier, scope or links).
    fn reindex_one(&mut self, project: &str, id: &str) -> Result<(), MemoryError> {
        match self.store.get(project, id)? {
            Some(stored) => self.index.add(&stored)?,
            None => self.index.remove(project, id),
        }
        self.index_dirty = true;
        Ok(())
    }

    /// `new` supersedes `old` in `project`: both linked, `old` out of recall.
    pub fn supersede(&mut self, project: &str, old: &str, new: &str) -> Result<bool, MemoryError> {
        let done = self.store.supersede(project, old, new)?;
        if done {
            self.reindex_one(project, old)?;
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
