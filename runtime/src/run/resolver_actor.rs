//! The resolver actor: owns the run's [`Resolver`] (workspace + pinned digests) and the episodic index behind
//! `sam:` pointers (every delivered message and engram of the run).
//!
//! The index lives in a SQLite file of the run's store (`sam.sqlite`), written in batches, so it does not grow the
//! process with every delivery; a resolution first writes what is pending, so it sees every earlier delivery.
//!
//! Restart: the resolver, its index and the documents waiting to be indexed are a [`ResolverBook`] the run
//! supervisor keeps, not the actor's state. Gateways put documents in the book's intake without a message, so
//! none waits in a mailbox a failure could take down; an actor started after a failed one takes the same book,
//! with its pinned digests, its open index and its pending batch, and writes the batch out first.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;

use crate::blocking;
use crate::resolver::{Resolved, Resolver, SamSource};
use less_contract::Pointer;
use less_contract::Violation;

/// The actor.
pub struct ResolverActor;

/// Messages to the resolver.
pub enum ResolverMsg {
    /// Resolve every pointer (all or nothing: digests are pinned only when every pointer resolved).
    Resolve(Vec<Pointer>, RpcReplyPort<Result<Vec<Resolved>, Violation>>),
    /// Read what a pointer addresses without pinning its digest (the verbatim baseline pastes this way; not
    /// metered).
    ReadUnpinned(Pointer, RpcReplyPort<Result<String, Violation>>),
    /// Remember a delivered (or refused) document for `sam:` pointers (what a worker node sends; on the head a
    /// gateway puts it in the book's intake, [`ResolverBook::remember`]).
    Remember(String, Arc<Value>),
    /// Index what the intake holds (a gateway asks when it holds a batch).
    Take,
    /// Write every document remembered so far to `sam.sqlite` (a run's stop asks, after the last delivery).
    Flush(RpcReplyPort<()>),
    /// Answers at once: every document a node asked to remember before it is remembered.
    Ack(RpcReplyPort<()>),
    /// Fails the resolver on purpose (tests of its restart).
    #[cfg(any(test, feature = "faults"))]
    Fail,
}

/// What the resolver holds across its restarts (the run supervisor keeps it): the resolver and its pinned digests,
/// the `sam:` index with its pending batch, and the documents not yet indexed.
pub struct ResolverBook {
    /// Opened by the first actor from `args`; locked on the blocking pool for each piece of work. A panic there
    /// leaves it as whole as SQLite does: a batch is cleared only once its transaction committed.
    held: Mutex<Option<Held>>,
    args: Mutex<Option<ResolverArgs>>,
    /// Documents to remember, in delivery order, not yet in the index.
    intake: Mutex<Vec<(String, Arc<Value>)>>,
}

/// The resolver and the episodic index, used on the blocking pool (a resolution reads files).
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
    /// The run's coordination ledger beside the index (`coord.sqlite`), where `sam:decision:<id>` reads.
    coord: Option<PathBuf>,
}

impl SamIndex {
    /// An index in `path` (created afresh: a run's index holds that run's documents; with `keep`, a resumed run's,
    /// the index its head left, unless it does not pass SQLite's check), or in memory.
    fn open(path: Option<PathBuf>, keep: bool) -> Result<SamIndex, rusqlite::Error> {
        let coord = path.as_deref().and_then(Path::parent).map(|dir| dir.join(crate::coord::RUN_FILE));
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
                // Without a journal, a head killed mid-write can leave a damaged index: a resumed run starts a new
                // one then (every kept delivery is indexed again; refused documents it had are lost).
                let intact = keep && path.is_file() && {
                    let checked = crate::files::open_sqlite(&path)
                        .and_then(|db| db.query_row("PRAGMA quick_check", [], |row| row.get::<_, String>(0)));
                    matches!(checked.as_deref(), Ok("ok"))
                };
                if !intact {
                    let _ = std::fs::remove_file(&path);
                }
                let db = crate::files::open_sqlite(&path)?;
                // A run's own index: rebuilt by the next run, so no journal and no fsync.
                db.execute_batch(
                    "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
                     CREATE TABLE IF NOT EXISTS sam (namespace TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL,
                                       PRIMARY KEY (namespace, key)) WITHOUT ROWID;",
                )?;
                Some(db)
            }
            None => None,
        };
        Ok(SamIndex { db, memory: HashMap::new(), pending: Vec::new(), coord })
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

impl SamIndex {
    /// Indexes a delivered (or refused) document: the message, and each of its engrams by id, by kind and by tag.
    fn remember(&mut self, msg_id: String, doc: &Value) {
        self.insert("msg".into(), msg_id, doc.to_string());
        for engram in doc.get("engrams").and_then(Value::as_array).into_iter().flatten() {
            let text = engram.to_string();
            let id = engram.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            let kind = engram.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
            self.insert("engram".into(), id.clone(), text.clone());
            self.insert(kind.clone(), id, text.clone());
            for tag in engram.get("tags").and_then(Value::as_array).into_iter().flatten() {
                if let Some(tag) = tag.as_str() {
                    self.insert(kind.clone(), tag.to_owned(), text.clone());
                }
            }
        }
    }

    /// Writes the pending entries once they make a batch.
    fn flush_if_full(&mut self) {
        if self.pending.len() >= SAM_BATCH {
            self.flush_or_keep();
        }
    }
}

impl SamSource for SamIndex {
    fn lookup(&self, namespace: &str, key: &str) -> Option<String> {
        if namespace == "decision" {
            return self.coord.as_deref().and_then(|path| crate::coord::read_decision(path, key));
        }
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
    /// Keep the index found at `sam_path` (a resumed run) instead of starting a new one.
    pub keep: bool,
}

impl ResolverBook {
    /// A book for `args`, opened by the first actor that starts with it.
    pub fn new(args: ResolverArgs) -> Arc<ResolverBook> {
        Arc::new(ResolverBook { held: Mutex::new(None), args: Mutex::new(Some(args)), intake: Mutex::new(Vec::new()) })
    }

    /// Puts a delivered (or refused) document in the intake; whether the intake holds a batch (then the actor
    /// should be told to take it, [`ResolverMsg::Take`]).
    pub(crate) fn remember(&self, msg_id: String, doc: Arc<Value>) -> bool {
        let mut intake = lock(&self.intake);
        intake.push((msg_id, doc));
        intake.len() >= SAM_BATCH
    }

    /// Opens the index, unless an earlier actor did.
    async fn open(self: &Arc<Self>) -> Result<(), ActorProcessingErr> {
        let book = self.clone();
        blocking::run(move || -> Result<(), ActorProcessingErr> {
            let mut held = lock(&book.held);
            if held.is_none() {
                let ResolverArgs { resolver, sam_path, keep } = lock(&book.args).take().ok_or(LOST)?;
                *held = Some(Held { resolver, sam: SamIndex::open(sam_path, keep)? });
            }
            Ok(())
        })
        .await?
    }

    /// Runs `work` on the blocking pool with the index holding every document remembered so far.
    async fn with_held<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&mut Held) -> T + Send + 'static,
    ) -> Result<T, ActorProcessingErr> {
        let book = self.clone();
        blocking::run(move || -> Result<T, ActorProcessingErr> {
            let taken = std::mem::take(&mut *lock(&book.intake));
            let mut held = lock(&book.held);
            let held = held.as_mut().ok_or(LOST)?;
            for (msg_id, doc) in taken {
                held.sam.remember(msg_id, &doc);
            }
            Ok(work(held))
        })
        .await?
    }
}

/// `mutex`, whether or not a panic poisoned it (see [`ResolverBook::held`]).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The error when the book has neither an index nor the arguments to open one.
const LOST: &str = "the resolver's index was never opened";

impl Actor for ResolverActor {
    type Msg = ResolverMsg;
    type State = Arc<ResolverBook>;
    type Arguments = Arc<ResolverBook>;

    async fn pre_start(
        &self,
        _myself: ActorRef<ResolverMsg>,
        book: Arc<ResolverBook>,
    ) -> Result<Arc<ResolverBook>, ActorProcessingErr> {
        book.open().await?;
        // A batch a failed actor left pending is written before anything else.
        book.with_held(|h| h.sam.flush_or_keep()).await?;
        Ok(book)
    }

    async fn handle(
        &self,
        _myself: ActorRef<ResolverMsg>,
        msg: ResolverMsg,
        book: &mut Arc<ResolverBook>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ResolverMsg::Resolve(pointers, reply) => {
                let resolved = book.with_held(move |h| {
                    h.sam.flush_or_keep();
                    h.resolver.resolve_all(&pointers, &h.sam)
                });
                let _ = reply.send(resolved.await?);
            }
            ResolverMsg::ReadUnpinned(pointer, reply) => {
                let read = book.with_held(move |h| {
                    h.sam.flush_or_keep();
                    h.resolver.read_unpinned(&pointer, &h.sam)
                });
                let _ = reply.send(read.await?);
            }
            ResolverMsg::Ack(reply) => {
                let _ = reply.send(());
            }
            ResolverMsg::Remember(msg_id, doc) => {
                if book.remember(msg_id, doc) {
                    book.with_held(|h| h.sam.flush_if_full()).await?;
                }
            }
            ResolverMsg::Take => book.with_held(|h| h.sam.flush_if_full()).await?,
            ResolverMsg::Flush(reply) => {
                book.with_held(|h| h.sam.flush_or_keep()).await?;
                let _ = reply.send(());
            }
            #[cfg(any(test, feature = "faults"))]
            ResolverMsg::Fail => panic!("the resolver failed on purpose"),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ResolverMsg>,
        book: &mut Arc<ResolverBook>,
    ) -> Result<(), ActorProcessingErr> {
        // What a stop without a flush left pending (a failed run, say) still reaches the file.
        book.with_held(|h| h.sam.flush_or_keep()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The resolver fails with documents in its intake and its pending batch: the actor started in its place with
    /// the same book writes them all, and a `sam:` pointer to each reads back.
    #[tokio::test]
    async fn a_resolver_started_after_a_failed_one_keeps_every_document_remembered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sam.sqlite");
        let resolver = Resolver::new(dir.path()).expect("resolver");
        let book = ResolverBook::new(ResolverArgs { resolver, sam_path: Some(path.clone()), keep: false });
        let (first, handle) = Actor::spawn(None, ResolverActor, book.clone()).await.expect("resolver");
        let doc = |i: usize| Arc::new(serde_json::json!({ "n": i }));
        for i in 0..(SAM_BATCH + 10) {
            book.remember(format!("m{i}"), doc(i));
        }
        // The first batch taken and written; the rest pending or in the intake when the actor fails.
        ractor::call!(first, ResolverMsg::Ack).expect("ack");
        first.send_message(ResolverMsg::Take).expect("send");
        book.remember("last".into(), doc(0));
        first.send_message(ResolverMsg::Fail).expect("send");
        assert!(handle.await.is_ok(), "the failed actor's task ends");
        let (second, handle) = Actor::spawn(None, ResolverActor, book.clone()).await.expect("resolver");
        let pointer = Pointer::parse("sam:msg:last").expect("pointer");
        let resolved = ractor::call!(second, ResolverMsg::Resolve, vec![pointer]).expect("call");
        assert!(resolved.is_ok(), "{resolved:?}");
        second.stop(None);
        handle.await.expect("stopped");
        let keys = sam_keys(&path, "msg").expect("keys");
        assert_eq!(keys.len(), SAM_BATCH + 11, "every document remembered is in sam.sqlite");
    }

    /// The index on disk answers what was remembered, the latest write of a key winning, whether the entry is
    /// pending or written; what it holds in memory is at most one batch.
    #[test]
    fn the_sam_index_lives_on_disk_and_answers_the_latest_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut sam = SamIndex::open(Some(dir.path().join("run/sam.sqlite")), false).expect("open");
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
