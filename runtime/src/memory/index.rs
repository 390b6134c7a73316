//! Stage 1 of recall: a tantivy index of every hot engram's hash keys (LESS spec §9.1).
//!
//! Each engram is one document whose `keys` field holds its hash keys as words; a query's keys become an OR of term
//! queries, filtered by visibility (one `vis` term per engram: its scope with its project and run, see [`vis_key`]),
//! readers' roles, tier and optionally kind, all as term queries under MUST, scored by BM25 so rare keys weigh more
//! than common ones. Cold engrams stay in the index, marked by tier, so an explicit cold query finds them too.
//! The index is derived: it is rebuilt from the SQLite store when it is missing, damaged or of another layout, and
//! caught up with the store's change log (rows whose `changed` generation is past the one the index records in its
//! last commit's payload) when it is behind; a rebuilt index gives the same results.
//!
//! # Several processes
//!
//! Many processes may open one store (a CLI beside a server, several MCP hosts). Readers open the index read-only and
//! never take a lock: they reload from the last commit (retrying when a writer's merge removed a file between reading
//! the commit and opening it). Every write — a catch-up, a rebuild, a repair — runs under the store's write lock
//! (`recall/.lessrt-write.lock`, an OS file lock that dies with its process), waited for up to [`WRITE_WAIT`], and
//! holds tantivy's writer only inside it: acquire, apply, commit (the payload records the store generation), wait for
//! merges, release. So writers queue instead of failing, and a reader takes the lock only when it finds the index
//! behind the store and catches it up itself.
//!
//! Useful for: fast candidate recall by shared keys (about 5 µs per term at 100k documents).
//! Not for: the source of truth (the store is), or meaning beyond shared words (the embedding rerank is).

use std::path::{Path, PathBuf};

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TantivyDocument, TextFieldIndexing, TextOptions,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Term};

use crate::memory::keys;
use crate::memory::policy::role_tags;
use crate::memory::store::{Stored, Tier};
use less_contract::Scope;

/// Longest wait for the store's write lock before a write gives up with [`IndexError::Busy`].
pub const WRITE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Errors of the index (always recoverable by a rebuild from the store).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// tantivy failed.
    #[error("recall index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// Another process held the index's write lock for longer than [`WRITE_WAIT`].
    #[error(
        "recall index {path}: another process held its write lock for over {} s; retry when it is done",
        WRITE_WAIT.as_secs()
    )]
    Busy {
        /// The index directory.
        path: PathBuf,
    },
    /// The index directory could not be prepared.
    #[error("recall index directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One candidate of stage 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The engram id.
    pub id: String,
    /// The project it is stored in (org and global engrams are recalled from other projects too).
    pub project: String,
    /// BM25 over shared keys.
    pub score: f32,
}

/// The stage-1 index: a read-only view, and writes in short sessions under the store's write lock.
pub struct RecallIndex {
    dir: PathBuf,
    reader: IndexReader,
    fields: Fields,
    /// The store generation the reader's view reflects (from its commit's payload); none: unknown, rebuild.
    generation: Option<u64>,
    /// Opened to read ([`RecallIndex::open_read_only`]): the directory is never written.
    read_only: bool,
    /// An index of a reader's own, in memory: what a read-only index is written to when the files are missing,
    /// damaged or behind the store (it is rebuilt from the store there, and dropped with the index).
    in_memory: Option<Index>,
}

/// One write session: the store's write lock and tantivy's writer, released together when dropped.
pub struct IndexWrite<'a> {
    index: &'a mut RecallIndex,
    writer: IndexWriter,
    /// The store generation the last commit recorded (read under the lock).
    committed: Option<u64>,
    /// None for an index in memory, which no other process sees.
    _lock: Option<WriteLock>,
}

/// What a recall may return, as index terms (built by the access rules of `policy.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecallFilter {
    /// Visibility terms the reader holds ([`vis_key`]); an engram is returned only if its term is among them.
    pub visible: Vec<String>,
    /// The reader's role and agent id: engrams restricted to roles (`role:<r>` tags) are returned only to those
    /// roles or to their creator. None: every role (the project's trusted view and operators).
    pub reader: Option<(String, String)>,
    /// Only engrams of this kind.
    pub kind: Option<String>,
    /// Cold engrams too.
    pub include_cold: bool,
    /// The time of the query (unix seconds): a hot engram whose TTL ran out by then counts as cold, before the
    /// sweep moves it. None: no TTL check (callers that store with synthetic times).
    pub now: Option<i64>,
}

impl RecallFilter {
    /// Everything a member of `project` sees outside any run, in every role, hot only, optionally of one kind: the
    /// view of [`crate::memory::Memory::query`].
    pub fn project(project: &str, kind: Option<&str>) -> RecallFilter {
        RecallFilter {
            visible: vec![
                vis_key(Scope::Run, project, ""),
                vis_key(Scope::Project, project, ""),
                vis_key(Scope::Org, project, ""),
                vis_key(Scope::Global, project, ""),
            ],
            reader: None,
            kind: kind.map(str::to_owned),
            include_cold: false,
            now: None,
        }
    }
}

impl RecallFilter {
    /// Whether the filter lets `stored` through: the same rules as the index query, applied to the store's row.
    pub fn admits(&self, stored: &Stored) -> bool {
        let vis = vis_key(stored.engram.scope, &stored.project, &stored.run);
        let role_ok = match &self.reader {
            None => true,
            Some((role, agent)) => {
                let roles = role_tags(&stored.engram);
                roles.is_empty() || roles.contains(role) || stored.engram.provenance.created_by == *agent
            }
        };
        let live = stored.tier == Tier::Hot && self.now.is_none_or(|now| stored.expires_at > now);
        self.visible.contains(&vis)
            && role_ok
            && (self.include_cold || live)
            && self.kind.as_deref().is_none_or(|kind| kind == stored.engram.kind.as_str())
    }
}

/// The visibility term of an engram of `scope` stored in `project` during `run`: run-scoped engrams are seen in
/// their project and run, project-scoped ones in their project, org and global ones from every project.
pub fn vis_key(scope: Scope, project: &str, run: &str) -> String {
    match scope {
        Scope::Run => format!("r:{project}\u{1f}{run}"),
        Scope::Project => format!("p:{project}"),
        Scope::Org => "org".to_owned(),
        Scope::Global => "global".to_owned(),
    }
}

/// The `roles` term of an engram readable by every role.
const ALL_ROLES: &str = "*";

#[derive(Clone, Copy)]
struct Fields {
    /// `project \u{1f} id`: the unique term, for deletes.
    uid: Field,
    id: Field,
    project: Field,
    kind: Field,
    keys: Field,
    /// [`vis_key`] of the engram.
    vis: Field,
    /// The roles that may read it (`role:<r>` tags), or [`ALL_ROLES`].
    roles: Field,
    /// Its creator (who always reads it).
    creator: Field,
    /// `hot` or `cold`.
    tier: Field,
}

/// The store's write lock: an exclusive OS lock on a file in the index directory, waited for with backoff.
struct WriteLock {
    _file: std::fs::File,
}

const LOCK_FILE: &str = ".lessrt-write.lock";

impl WriteLock {
    fn acquire(dir: &Path) -> Result<WriteLock, IndexError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| IndexError::Io { path: path.clone(), source };
        let file = crate::files::open_or_create(&path).map_err(io)?;
        let deadline = std::time::Instant::now() + WRITE_WAIT;
        let mut pause = std::time::Duration::from_millis(2);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(WriteLock { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(50));
                }
                Err(std::fs::TryLockError::WouldBlock) => return Err(IndexError::Busy { path: dir.to_owned() }),
                Err(std::fs::TryLockError::Error(err)) => return Err(io(err)),
            }
        }
    }
}

/// Why an index directory could not be used as it is.
enum Unusable {
    /// No index there yet, or one of another layout.
    Missing,
    /// Files of the index are damaged (garbage, truncated): reported, then rebuilt.
    Damaged(tantivy::TantivyError),
}

/// The store generation a commit recorded in its payload.
fn payload_generation(index: &Index) -> Result<Option<u64>, tantivy::TantivyError> {
    Ok(index.load_metas()?.payload.and_then(|p| p.trim().parse().ok()))
}

/// Opens the index in `dir` read-only: its reader (every segment opened, so damaged files show now) and the
/// generation it reflects.
fn open_readable(dir: &Path, schema: &Schema) -> Result<(IndexReader, Option<u64>), Unusable> {
    // A writer of another process may commit and merge between reading the commit and opening its files: the files
    // of the older commit are then gone. Reading the newer commit succeeds.
    let mut attempts = 0;
    loop {
        let index = match Index::open_in_dir(dir) {
            Ok(index) if index.schema() == *schema => index,
            Ok(_) => return Err(Unusable::Missing),
            Err(tantivy::TantivyError::OpenDirectoryError(_)) => return Err(Unusable::Missing),
            Err(tantivy::TantivyError::OpenReadError(tantivy::directory::error::OpenReadError::FileDoesNotExist(
                path,
            ))) if path.ends_with("meta.json") => return Err(Unusable::Missing),
            Err(err) if attempts < 20 && vanished(&err) => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            }
            Err(err) => return Err(Unusable::Damaged(err)),
        };
        let opened = payload_generation(&index).and_then(|generation| {
            let reader: IndexReader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
            Ok((reader, generation))
        });
        match opened {
            Ok(opened) => return Ok(opened),
            Err(err) if attempts < 20 && vanished(&err) => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(err) => return Err(Unusable::Damaged(err)),
        }
    }
}

/// A file of the commit just read is gone: another process committed since (retry with its commit).
fn vanished(err: &tantivy::TantivyError) -> bool {
    use tantivy::directory::error::OpenReadError;
    matches!(err, tantivy::TantivyError::OpenReadError(OpenReadError::FileDoesNotExist(_)))
}

impl RecallIndex {
    /// Opens the index in `dir` read-only, taking no lock. A missing index is created empty and a damaged one is
    /// cleared (both under the write lock); [`RecallIndex::generation`] is then none and the caller rebuilds it
    /// from the store.
    pub fn open(dir: &Path) -> Result<RecallIndex, IndexError> {
        std::fs::create_dir_all(dir).map_err(|source| IndexError::Io { path: dir.to_owned(), source })?;
        crate::files::check_index_locks(dir).map_err(|source| IndexError::Io { path: dir.to_owned(), source })?;
        let (schema, fields) = schema();
        let index = |reader, generation| RecallIndex {
            dir: dir.to_owned(),
            reader,
            fields,
            generation,
            read_only: false,
            in_memory: None,
        };
        match open_readable(dir, &schema) {
            Ok((reader, generation)) => return Ok(index(reader, generation)),
            Err(Unusable::Missing) => {}
            Err(Unusable::Damaged(err)) => {
                tracing::warn!(target: "less.memory", "recall index {} is damaged ({err}); rebuilding it from the store", dir.display());
            }
        }
        let _lock = WriteLock::acquire(dir)?;
        // Another process may have created or repaired it while this one waited.
        if let Ok((reader, generation)) = open_readable(dir, &schema) {
            return Ok(index(reader, generation));
        }
        let reader = create_empty(dir, schema)?;
        Ok(index(reader, None))
    }

    /// Opens the index in `dir` to read only: the files are never written and no lock is taken. Files that are
    /// missing, damaged or behind the store are left as they are; the catch-up or rebuild they need happens in an
    /// index in memory, of this reader alone (see [`RecallIndex::write`]).
    pub fn open_read_only(dir: &Path) -> Result<RecallIndex, IndexError> {
        crate::files::check_index_locks(dir).map_err(|source| IndexError::Io { path: dir.to_owned(), source })?;
        let (schema, fields) = schema();
        let mut index = match open_readable(dir, &schema) {
            Ok((reader, generation)) => {
                RecallIndex { dir: dir.to_owned(), reader, fields, generation, read_only: true, in_memory: None }
            }
            Err(unusable) => {
                if let Unusable::Damaged(err) = unusable {
                    tracing::warn!(target: "less.memory", "recall index {} is damaged ({err}); reading from the store", dir.display());
                }
                let in_memory = Index::create_in_ram(schema);
                let reader = in_memory.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
                let in_memory = Some(in_memory);
                RecallIndex { dir: dir.to_owned(), reader, fields, generation: None, read_only: true, in_memory }
            }
        };
        // Files that record no generation are rebuilt, here in memory.
        if index.generation.is_none() && index.in_memory.is_none() {
            index.start_in_memory()?;
        }
        Ok(index)
    }

    /// Replaces a read-only index's view by an empty index in memory (to be filled from the store).
    fn start_in_memory(&mut self) -> Result<Index, IndexError> {
        let in_memory = Index::create_in_ram(schema().0);
        self.reader = in_memory.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        self.in_memory = Some(in_memory.clone());
        self.generation = None;
        Ok(in_memory)
    }

    /// Clears the directory and starts an empty index under the write lock (`lessrt memory reindex`: whatever the
    /// files hold, damaged or not, is replaced by a rebuild from the store).
    pub fn reset(&mut self) -> Result<(), IndexError> {
        if self.read_only {
            return self.start_in_memory().map(drop);
        }
        let _lock = WriteLock::acquire(&self.dir)?;
        self.reader = create_empty(&self.dir, schema().0)?;
        self.generation = None;
        Ok(())
    }

    /// The store generation this index reflects as this process last read it (none: unknown, to be rebuilt).
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// Reads the last commit without a lock: another process may have caught the index up. Returns the generation
    /// it reflects.
    pub fn refresh(&mut self) -> Result<Option<u64>, IndexError> {
        if let Some(in_memory) = &self.in_memory {
            // Nobody else writes it: its last commit is the one this reader made.
            self.reader.reload()?;
            self.generation = payload_generation(in_memory)?;
            return Ok(self.generation);
        }
        let (schema, _) = schema();
        match open_readable(&self.dir, &schema) {
            Ok((reader, generation)) => {
                self.reader = reader;
                self.generation = generation;
                Ok(generation)
            }
            // Cleared or damaged under this process: the next write session repairs it.
            Err(_) => {
                self.generation = None;
                Ok(None)
            }
        }
    }

    /// Starts a write session: waits (up to [`WRITE_WAIT`]) for the store's write lock, then takes tantivy's writer
    /// on a freshly opened index (so the files other processes committed are known).
    ///
    /// A read-only index writes to its index in memory instead, started empty the first time (so the caller
    /// rebuilds it whole from the store), without a lock.
    pub fn write(&mut self) -> Result<IndexWrite<'_>, IndexError> {
        if self.read_only {
            let in_memory = match &self.in_memory {
                Some(in_memory) => in_memory.clone(),
                None => self.start_in_memory()?,
            };
            let committed = payload_generation(&in_memory)?;
            let writer = in_memory.writer_with_num_threads(1, 15_000_000)?;
            return Ok(IndexWrite { index: self, writer, committed, _lock: None });
        }
        let lock = WriteLock::acquire(&self.dir)?;
        crate::files::check_index_locks(&self.dir)
            .map_err(|source| IndexError::Io { path: self.dir.clone(), source })?;
        let (schema, _) = schema();
        let index = match Index::open_in_dir(&self.dir) {
            Ok(index) if index.schema() == schema => index,
            _ => {
                // Missing, damaged or of another layout: under the lock, it is safe to start over.
                create_empty(&self.dir, schema.clone())?;
                Index::open_in_dir(&self.dir)?
            }
        };
        let committed = match index.load_metas() {
            Ok(metas) => metas.payload.and_then(|p| p.trim().parse().ok()),
            Err(_) => None,
        };
        let writer = index.writer_with_num_threads(1, 15_000_000)?;
        Ok(IndexWrite { index: self, writer, committed, _lock: Some(lock) })
    }

    /// The best `limit` engrams that `filter` lets through sharing keys with `query_keys`, best first; ties keep
    /// index order.
    pub fn recall_filtered(
        &self,
        query_keys: &[String],
        filter: &RecallFilter,
        limit: usize,
    ) -> Result<Vec<Candidate>, IndexError> {
        let f = self.fields;
        if query_keys.is_empty() || limit == 0 || filter.visible.is_empty() {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let any_key: Vec<(Occur, Box<dyn Query>)> = selective_keys(&searcher, f.keys, query_keys)?
            .into_iter()
            .map(|term| (Occur::Should, Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)) as Box<dyn Query>))
            .collect();
        if any_key.is_empty() {
            return Ok(Vec::new());
        }
        // Filters match or not: a constant score of zero, so they add nothing to the BM25 score of the keys.
        let any_of = |terms: Vec<Term>| -> Box<dyn Query> {
            let each: Vec<(Occur, Box<dyn Query>)> = terms
                .into_iter()
                .map(|t| (Occur::Should, Box::new(TermQuery::new(t, IndexRecordOption::Basic)) as Box<dyn Query>))
                .collect();
            Box::new(ConstScoreQuery::new(Box::new(BooleanQuery::new(each)), 0.0))
        };
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, Box::new(BooleanQuery::new(any_key))),
            (Occur::Must, any_of(filter.visible.iter().map(|v| Term::from_field_text(f.vis, v)).collect())),
        ];
        if let Some((role, agent)) = &filter.reader {
            clauses.push((
                Occur::Must,
                Box::new(BooleanQuery::new(vec![
                    (Occur::Should, any_of(vec![Term::from_field_text(f.roles, ALL_ROLES)])),
                    (Occur::Should, any_of(vec![Term::from_field_text(f.roles, role)])),
                    (Occur::Should, any_of(vec![Term::from_field_text(f.creator, agent)])),
                ])),
            ));
        }
        if !filter.include_cold {
            clauses.push((Occur::Must, any_of(vec![Term::from_field_text(f.tier, "hot")])));
        }
        if let Some(kind) = &filter.kind {
            clauses.push((Occur::Must, any_of(vec![Term::from_field_text(f.kind, kind)])));
        }
        let hits = searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(limit).order_by_score())?;
        let mut columns = std::collections::HashMap::new();
        let mut out = Vec::with_capacity(hits.len());
        let mut text = String::new();
        for (score, address) in hits {
            let column = match columns.entry(address.segment_ord) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(searcher.segment_reader(address.segment_ord).fast_fields().str("uid")?)
                }
            };
            let Some(column) = column else { continue };
            let Some(ord) = column.term_ords(address.doc_id).next() else { continue };
            if column.ord_to_str(ord, &mut text).map_err(|source| IndexError::Io { path: self.dir.clone(), source })?
                && let Some((project, id)) = text.split_once('\u{1f}')
            {
                out.push(Candidate { id: id.to_owned(), project: project.to_owned(), score });
            }
        }
        Ok(out)
    }

    /// Documents in the index.
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl IndexWrite<'_> {
    /// The store generation the last commit recorded (none: a new or cleared index, to be rebuilt whole).
    pub fn committed(&self) -> Option<u64> {
        self.committed
    }

    /// Deletes every document (a rebuild follows).
    pub fn clear(&mut self) -> Result<(), IndexError> {
        self.writer.delete_all_documents()?;
        Ok(())
    }

    /// Adds (or replaces) one engram.
    pub fn add(&mut self, stored: &Stored) -> Result<(), IndexError> {
        let f = self.index.fields;
        self.writer.delete_term(Term::from_field_text(f.uid, &uid(&stored.project, &stored.engram.id)));
        let mut doc = TantivyDocument::default();
        doc.add_text(f.uid, uid(&stored.project, &stored.engram.id));
        doc.add_text(f.id, &stored.engram.id);
        doc.add_text(f.project, &stored.project);
        doc.add_text(f.kind, stored.engram.kind.as_str());
        doc.add_text(f.keys, keys::engram_keys(&stored.engram).join(" "));
        doc.add_text(f.vis, vis_key(stored.engram.scope, &stored.project, &stored.run));
        let roles = role_tags(&stored.engram);
        if roles.is_empty() {
            doc.add_text(f.roles, ALL_ROLES);
        }
        for role in roles {
            doc.add_text(f.roles, role);
        }
        doc.add_text(f.creator, &stored.engram.provenance.created_by);
        doc.add_text(f.tier, if stored.tier == Tier::Hot { "hot" } else { "cold" });
        self.writer.add_document(doc)?;
        Ok(())
    }

    /// Commits with the store generation the changes bring the index to, waits for the merges the commit started
    /// (so segments stay few however many small commits come), and makes the result visible to this process.
    pub fn commit(self, generation: u64) -> Result<(), IndexError> {
        let IndexWrite { index, mut writer, _lock: lock, .. } = self;
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&generation.to_string());
        prepared.commit()?;
        writer.wait_merging_threads()?;
        index.refresh()?;
        // The lock is released last: the next writer starts from this commit, merges done.
        drop(lock);
        Ok(())
    }
}

/// Clears `dir` (but the write lock's file) and creates an empty index in it; returns its reader.
fn create_empty(dir: &Path, schema: Schema) -> Result<IndexReader, IndexError> {
    clear_dir(dir)?;
    let index = Index::create_in_dir(dir, schema)?;
    Ok(index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?)
}

/// Keys rarer than this share of the documents are always kept; commoner ones only when too few rare ones remain.
const COMMON_SHARE: u64 = 5;
/// The rarest keys always kept.
const MIN_KEYS: usize = 4;
/// Most keys a query searches.
const MAX_KEYS: usize = 24;
/// Below this many documents every key is kept (trimming only pays off on large indexes).
const TRIM_FROM_DOCS: u64 = 1_000;

/// The query's keys worth searching, rarest first: keys no document has are dropped, and in a large index so are
/// keys in more than a fifth of the documents beyond the [`MIN_KEYS`] rarest. Such keys add almost nothing to BM25
/// (their idf is near zero) yet cost the most, since every document holding them must be visited.
fn selective_keys(searcher: &tantivy::Searcher, field: Field, query_keys: &[String]) -> Result<Vec<Term>, IndexError> {
    let n_docs = searcher.num_docs();
    let mut keyed = Vec::with_capacity(query_keys.len());
    for key in query_keys {
        let term = Term::from_field_text(field, key);
        let df = searcher.doc_freq(&term)?;
        if df > 0 {
            keyed.push((df, term));
        }
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    if n_docs >= TRIM_FROM_DOCS {
        let common = n_docs / COMMON_SHARE;
        let mut kept = 0;
        keyed.retain(|(df, _)| {
            kept += 1;
            kept <= MIN_KEYS || *df <= common
        });
        keyed.truncate(MAX_KEYS);
    }
    Ok(keyed.into_iter().map(|(_, term)| term).collect())
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    // A fast column too: hits are resolved to (project, id) from it, without reading stored documents.
    let uid = builder.add_text_field("uid", STRING | FAST);
    let id = builder.add_text_field("id", STRING | STORED);
    let project = builder.add_text_field("project", STRING | STORED);
    let kind = builder.add_text_field("kind", STRING);
    // Keys are lowercase hex words: the default tokenizer keeps them whole; frequencies and norms feed BM25.
    let keys_options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default().set_tokenizer("default").set_index_option(IndexRecordOption::WithFreqs),
    );
    // Named for the key set: an index of the keys before stems (issue 19) is of another layout, so it is rebuilt.
    let keys = builder.add_text_field("keys_stemmed", keys_options);
    let vis = builder.add_text_field("vis", STRING);
    let roles = builder.add_text_field("roles", STRING);
    let creator = builder.add_text_field("creator", STRING);
    let tier = builder.add_text_field("tier", STRING);
    (builder.build(), Fields { uid, id, project, kind, keys, vis, roles, creator, tier })
}

fn uid(project: &str, id: &str) -> String {
    format!("{project}\u{1f}{id}")
}

fn clear_dir(dir: &Path) -> Result<(), IndexError> {
    let io = |source| IndexError::Io { path: dir.to_owned(), source };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        // The lock file stays: a process waiting on it must wait on the same file as the holder.
        if path.file_name().is_some_and(|name| name == LOCK_FILE) {
            continue;
        }
        if path.is_dir() {
            std::fs::remove_dir_all(&path).map_err(io)?;
        } else {
            std::fs::remove_file(&path).map_err(io)?;
        }
    }
    Ok(())
}
