//! The resolver actor: owns the run's [`Resolver`] (workspace + pinned digests) and the episodic index behind
//! `sam:` pointers (every delivered message and engram of the run).
//!
//! The index lives in a SQLite file of the run's store (`sam.sqlite`), written in batches, so it does not grow the
//! process with every delivery; a resolution first writes what is pending, so it sees every earlier delivery.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;

use crate::blocking;
use crate::resolver::{Resolved, Resolver, SamSource};
use less_contract::Pointer;
use less_contract::Violation;

/// The actor.
pub struct ResolverActor;

/// What the blocking helper calls the resolver.
const RESOLVER: &str = "the resolver";
/// The error when a panic in a resolution took the resolver with it.
const LOST: &str = "the resolver was lost by an earlier failed task";

/// Messages to the resolver.
pub enum ResolverMsg {
    /// Resolve every pointer (all or nothing: digests are pinned only when every pointer resolved).
    Resolve(Vec<Pointer>, RpcReplyPort<Result<Vec<Resolved>, Violation>>),
    /// Read what a pointer addresses without pinning its digest (the verbatim baseline pastes this way; not
    /// metered).
    ReadUnpinned(Pointer, RpcReplyPort<Result<String, Violation>>),
    /// Remember a delivered (or refused) document for `sam:` pointers.
    Remember(String, std::sync::Arc<Value>),
    /// Write every document remembered so far to `sam.sqlite` (a run's stop asks, after the last delivery).
    Flush(RpcReplyPort<()>),
    /// Answers at once: every document a node asked to remember before it is remembered.
    Ack(RpcReplyPort<()>),
}

/// State: the resolver and the episodic index, moved onto the blocking pool to resolve (a resolution reads files).
pub struct ResolverState {
    held: Option<Held>,
}

struct Held {
    resolver: Resolver,
    sam: SamIndex,
}

/// Entries written in one batch.
const SAM_BATCH: usize = 512;

/// The `sam:` index: `(namespace, key) → text`, the latest write of a key winning.
struct SamIndex {
    /// On disk; `None`: in memory (`memory`).
    db: Option<rusqlite::Connection>,
    memory: HashMap<(String, String), String>,
    /// Written to `db` by the next [`SamIndex::flush`].
    pending: Vec<(String, String, String)>,
}

impl SamIndex {
    /// An index in `path` (created afresh: a run's index holds that run's documents), or in memory.
    fn open(path: Option<PathBuf>) -> Result<SamIndex, rusqlite::Error> {
        let db = match path {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|err| {
                        rusqlite::Error::SqliteFailure(
                            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                            Some(format!("{}: {err}", dir.display())),
                        )
                    })?;
                }
                let _ = std::fs::remove_file(&path);
                let db = crate::files::open_sqlite(&path)?;
                // A run's own index: rebuilt by the next run, so no journal and no fsync.
                db.execute_batch(
                    "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
                     CREATE TABLE sam (namespace TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL,
                                       PRIMARY KEY (namespace, key)) WITHOUT ROWID;",
                )?;
                Some(db)
            }
            None => None,
        };
        Ok(SamIndex { db, memory: HashMap::new(), pending: Vec::new() })
    }

    fn insert(&mut self, namespace: String, key: String, text: String) {
        match self.db {
            Some(_) => self.pending.push((namespace, key, text)),
            None => {
                self.memory.insert((namespace, key), text);
            }
        }
    }

    /// Writes what is pending, in one transaction.
    fn flush(&mut self) -> Result<(), rusqlite::Error> {
        let Some(db) = &mut self.db else { return Ok(()) };
        if self.pending.is_empty() {
            return Ok(());
        }
        let tx = db.transaction()?;
        {
            let mut insert =
                tx.prepare_cached("INSERT OR REPLACE INTO sam (namespace, key, text) VALUES (?1, ?2, ?3)")?;
            for (namespace, key, text) in &self.pending {
                insert.execute(rusqlite::params![namespace, key, text])?;
            }
        }
        tx.commit()?;
        self.pending.clear();
        Ok(())
    }
}

impl SamIndex {
    /// [`SamIndex::flush`]; a failing disk (full, say) keeps the entries pending, where lookups still find them, and
    /// the next flush tries again: the run goes on.
    fn flush_or_keep(&mut self) {
        if let Err(err) = self.flush() {
            tracing::warn!("sam index not written, {} entries kept in memory: {err}", self.pending.len());
        }
    }
}

impl SamSource for SamIndex {
    fn lookup(&self, namespace: &str, key: &str) -> Option<String> {
        let Some(db) = &self.db else { return self.memory.get(&(namespace.to_owned(), key.to_owned())).cloned() };
        if let Some((_, _, text)) = self.pending.iter().rev().find(|(n, k, _)| n == namespace && k == key) {
            return Some(text.clone());
        }
        let mut select = db.prepare_cached("SELECT text FROM sam WHERE namespace = ?1 AND key = ?2").ok()?;
        select.query_row(rusqlite::params![namespace, key], |row| row.get(0)).ok()
    }
}

/// The keys of `namespace` in the `sam:` index a finished run left at `path` (`msg`: the ids of every message
/// delivered or refused), for checks that every `sam:msg:` pointer a run handed out reads back.
pub fn sam_keys(path: &Path, namespace: &str) -> Result<HashSet<String>, String> {
    let fail = |err: rusqlite::Error| format!("{}: {err}", path.display());
    let db = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(fail)?;
    let mut select = db.prepare("SELECT key FROM sam WHERE namespace = ?1").map_err(fail)?;
    let keys = select.query_map([namespace], |row| row.get(0)).map_err(fail)?;
    keys.collect::<Result<_, _>>().map_err(fail)
}

/// How to start the resolver actor.
pub struct ResolverArgs {
    /// The run's resolver.
    pub resolver: Resolver,
    /// Where the `sam:` index lives (`None`: in memory).
    pub sam_path: Option<PathBuf>,
}

impl Actor for ResolverActor {
    type Msg = ResolverMsg;
    type State = ResolverState;
    type Arguments = ResolverArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ResolverMsg>,
        args: ResolverArgs,
    ) -> Result<ResolverState, ActorProcessingErr> {
        let ResolverArgs { resolver, sam_path } = args;
        let sam = blocking::run(move || SamIndex::open(sam_path)).await??;
        Ok(ResolverState { held: Some(Held { resolver, sam }) })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ResolverMsg>,
        msg: ResolverMsg,
        state: &mut ResolverState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ResolverMsg::Resolve(pointers, reply) => {
                let resolved = blocking::with_taken(&mut state.held, RESOLVER, move |h| {
                    h.sam.flush_or_keep();
                    h.resolver.resolve_all(&pointers, &h.sam)
                });
                let _ = reply.send(resolved.await?);
            }
            ResolverMsg::ReadUnpinned(pointer, reply) => {
                let read = blocking::with_taken(&mut state.held, RESOLVER, move |h| {
                    h.sam.flush_or_keep();
                    h.resolver.read_unpinned(&pointer, &h.sam)
                });
                let _ = reply.send(read.await?);
            }
            ResolverMsg::Ack(reply) => {
                let _ = reply.send(());
            }
            ResolverMsg::Remember(msg_id, doc) => {
                let sam = &mut state.held.as_mut().ok_or(LOST)?.sam;
                sam.insert("msg".into(), msg_id, doc.to_string());
                for engram in doc.get("engrams").and_then(Value::as_array).into_iter().flatten() {
                    let text = engram.to_string();
                    let id = engram.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let kind = engram.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
                    sam.insert("engram".into(), id.clone(), text.clone());
                    sam.insert(kind.clone(), id, text.clone());
                    for tag in engram.get("tags").and_then(Value::as_array).into_iter().flatten() {
                        if let Some(tag) = tag.as_str() {
                            sam.insert(kind.clone(), tag.to_owned(), text.clone());
                        }
                    }
                }
                if sam.pending.len() >= SAM_BATCH {
                    blocking::with_taken(&mut state.held, RESOLVER, |h| h.sam.flush_or_keep()).await?;
                }
            }
            ResolverMsg::Flush(reply) => {
                blocking::with_taken(&mut state.held, RESOLVER, |h| h.sam.flush_or_keep()).await?;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ResolverMsg>,
        state: &mut ResolverState,
    ) -> Result<(), ActorProcessingErr> {
        // What a stop without a flush left pending (a failed run, say) still reaches the file.
        if state.held.is_some() {
            blocking::with_taken(&mut state.held, RESOLVER, |h| h.sam.flush_or_keep()).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index on disk answers what was remembered, the latest write of a key winning, whether the entry is
    /// pending or written; what it holds in memory is at most one batch.
    #[test]
    fn the_sam_index_lives_on_disk_and_answers_the_latest_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut sam = SamIndex::open(Some(dir.path().join("run/sam.sqlite"))).expect("open");
        for i in 0..(3 * SAM_BATCH + 7) {
            sam.insert("msg".into(), format!("m{i}"), format!("doc {i}"));
            if sam.pending.len() >= SAM_BATCH {
                sam.flush().expect("flush");
            }
        }
        assert!(sam.pending.len() < SAM_BATCH && sam.memory.is_empty(), "at most a batch in memory");
        sam.insert("msg".into(), "m3".into(), "doc 3, again".into());
        assert_eq!(sam.lookup("msg", "m3").as_deref(), Some("doc 3, again"), "pending, newest first");
        sam.flush().expect("flush");
        assert_eq!(sam.lookup("msg", "m3").as_deref(), Some("doc 3, again"), "written, replaced");
        let last = 3 * SAM_BATCH + 6;
        assert_eq!(sam.lookup("msg", &format!("m{last}")), Some(format!("doc {last}")));
        assert_eq!(sam.lookup("msg", "nowhere"), None);
        assert_eq!(sam.lookup("engram", "m1"), None, "namespaces are apart");
    }
}
