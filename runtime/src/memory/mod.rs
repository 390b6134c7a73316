//! Memory: the durable engram store and two-stage recall (LESS spec §8, §9, §13).
//!
//! [`Memory`] puts the pieces together: SQLite as the source of truth (`store.rs`), deterministic hash keys
//! (`keys.rs`) and the derived tantivy index for stage 1 (`index.rs`), the local embedding model (`embed.rs`, its
//! int8 products by `int8.rs`) and the derived usearch index of claim vectors for stage 2 (`vectors.rs`), and the
//! ranking rules (`rank.rs`). Derived indexes are rebuilt from the store whenever they are missing, unreadable or
//! behind. Access control and hygiene (`policy.rs`: scopes, roles, promotion, rate limits, supersession by subject
//! key, contradictions) wrap these operations for callers acting as a [`Principal`]; `actor.rs` serves them to a run
//! as the `MemoryActor`.

pub(crate) mod actor;
pub(crate) mod embed;
pub(crate) mod index;
pub(crate) mod int8;
pub(crate) mod keys;
pub(crate) mod policy;
pub(crate) mod rank;
pub(crate) mod store;
pub(crate) mod vectors;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Engrams embedded and stored per step of [`Memory::flush`].
const EMBED_CHUNK: usize = 256;

/// Most engrams kept in memory waiting for their vector; past it they are found again in the store (see
/// [`Memory::spill_pending`]).
const MAX_PENDING: usize = 4096;

pub use actor::{
    Clock, DEFAULT_SWEEP_SECS, EngramRef, MemoryActor, MemoryArgs, MemoryMsg, PromoteRequest, PutRequest, QueryRequest,
    SupersedeRequest, system_clock,
};
pub use embed::{EmbedError, Embedder, MODEL_FILES, MODEL_ID, ModelPaths, QueryArithmetic};
pub use index::{Candidate, IndexError, RecallFilter, RecallIndex, vis_key};
pub use policy::{
    CORRECTION_TAG, DEFAULT_PUTS_PER_WINDOW, DEFAULT_RATE_WINDOW_SECS, MemoryPolicy, PROMOTION_CONFIDENCE_FLOOR,
    Principal, PutReport, QueryOptions, ROLE_TAG_PREFIX, SUBJECT_TAG_PREFIX, role_tags, subject_key,
};
pub use rank::{Fusion, Ranked, TieContext};
pub use store::{
    Placement, PutOutcome, Store, StoreError, StoreStats, Stored, Tier, WriteCap, content_hash, run_copy_id,
};
pub use vectors::{VectorError, VectorIndex};

use less_contract::Valid;
use less_contract::{Engram, Scope};
use less_contract::{ErrorCode, Violation};

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
    /// The derived vector index failed (`lessrt memory reindex` rebuilds it).
    #[error(transparent)]
    Vectors(#[from] VectorError),
    /// The query asked for the rerank stage alone and the model is not available.
    #[error("{0}")]
    StageUnavailable(String),
    /// The caller may not do this (`LESS_SCOPE_DENIED`) or not now (`LESS_RATE_LIMITED`); nothing changed.
    #[error("{}: {}", .0.code, .0.message)]
    Refused(Violation),
    /// The memory actor did not answer (it failed; the run reports why).
    #[error("memory unavailable: {0}")]
    Unavailable(String),
}

impl MemoryError {
    /// The stable code: a refusal's own; `LESS_ID_CONFLICT` for a taken id; `LESS_STORE_FAILED` for a store or an
    /// index that failed; `LESS_ARGUMENT_INVALID` for a stage that cannot run here; `LESS_RUN_FAILED` when the
    /// memory actor is gone.
    pub fn code(&self) -> ErrorCode {
        match self {
            MemoryError::Refused(violation) => violation.code,
            MemoryError::Store(StoreError::IdConflict { .. }) => ErrorCode::IdConflict,
            MemoryError::Store(_) | MemoryError::Index(_) | MemoryError::Vectors(_) => ErrorCode::StoreFailed,
            MemoryError::StageUnavailable(_) => ErrorCode::ArgumentInvalid,
            MemoryError::Unavailable(_) => ErrorCode::RunFailed,
        }
    }

    /// The code when the caller was refused (a rule said no, nothing failed): a refusal's, or a taken id's.
    pub fn refusal_code(&self) -> Option<ErrorCode> {
        match self {
            MemoryError::Refused(_) | MemoryError::Store(StoreError::IdConflict { .. }) => Some(self.code()),
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
    /// The score the order is by (fused when both stages ran; the stage-1 score otherwise).
    pub score: f32,
    /// Stage-1 score (BM25 over shared keys), when stage 1 found it.
    pub hash_score: Option<f32>,
    /// Cosine with the query, when stage 2 ran.
    pub cosine: Option<f32>,
}

/// The stages a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stages {
    /// Stage 1 alone: hash-key recall (BM25), deterministic, no model.
    Hash,
    /// Stage 1 candidates and nearest claim vectors, fused (the default; stage 1 alone when the model is missing).
    #[default]
    HashRerank,
    /// Nearest claim vectors alone (needs the model).
    Rerank,
}

impl Stages {
    /// Parses `hash`, `hash+rerank` or `rerank`.
    pub fn parse(text: &str) -> Option<Stages> {
        match text {
            "hash" => Some(Stages::Hash),
            "hash+rerank" => Some(Stages::HashRerank),
            "rerank" => Some(Stages::Rerank),
            _ => None,
        }
    }

    /// The name `parse` reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Stages::Hash => "hash",
            Stages::HashRerank => "hash+rerank",
            Stages::Rerank => "rerank",
        }
    }
}

/// A query.
#[derive(Debug, Clone)]
pub struct RecallRequest<'a> {
    /// The question, in words (may name pointers).
    pub text: &'a str,
    /// What may be returned (projects, runs, roles, kind, tier).
    pub filter: RecallFilter,
    /// The scope asked for: an engram of this scope wins ties.
    pub scope: Option<Scope>,
    /// How many hits at most.
    pub k: usize,
    /// The stages wanted.
    pub stages: Stages,
}

impl<'a> RecallRequest<'a> {
    /// The `k` best for `text` among what `filter` lets through, by both stages when the model is there.
    pub fn new(text: &'a str, filter: RecallFilter, k: usize) -> RecallRequest<'a> {
        RecallRequest { text, filter, scope: None, k, stages: Stages::default() }
    }

    /// The `k` best of `project` (its trusted view, see [`RecallFilter::project`]) for `text`.
    pub fn in_project(text: &'a str, project: &str, k: usize) -> RecallRequest<'a> {
        RecallRequest::new(text, RecallFilter::project(project, None), k)
    }

    /// The same request with other stages.
    pub fn stages(self, stages: Stages) -> RecallRequest<'a> {
        RecallRequest { stages, ..self }
    }
}

/// The answer to a query, saying which stages produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recall {
    /// Stages that ran, in order: `hash`, `rerank`.
    pub stages: Vec<&'static str>,
    /// Why a stage that was asked for did not run (the model is missing, with the fix).
    pub degraded: Option<String>,
    /// Best first.
    pub hits: Vec<Hit>,
}

/// Most hits a query returns: a larger `k` is refused by [`Memory::query_as`] (`LESS_ARGUMENT_INVALID`) and capped
/// here by [`Memory::recall`], so no request sizes an allocation by an untrusted number.
pub const MAX_K: usize = 1000;

/// Candidates each stage contributes before fusion, whatever `k` is asked (more when `k` is larger). The pool, and so
/// every fusion term computed over it (the best stage-1 score, adjacent turns, the best of a source), is the same for
/// every `k` up to it: the top `k` of a query is a prefix of its top `K` for `k < K ≤ RECALL_POOL`. Chosen on the
/// LoCoMo development split (docs/performance.md): a pool that grew with `k` ranked a small `k` worse.
pub const RECALL_POOL: usize = 250;

/// The embedding model of this process, loaded once from [`ModelPaths::from_env`]; the error says what is missing.
pub fn shared_embedder() -> Result<Arc<Embedder>, String> {
    static SHARED: OnceLock<Result<Arc<Embedder>, String>> = OnceLock::new();
    SHARED.get_or_init(|| Embedder::load(&ModelPaths::from_env()).map(Arc::new).map_err(|e| e.to_string())).clone()
}

/// Stage 2's parts, present when the model is installed. The model itself is loaded on first need (a query, or an
/// engram without a vector), so commands that only read or move rows never pay for it.
struct Semantic {
    embedder: Option<Arc<Embedder>>,
    vectors: VectorIndex,
    /// Engrams put or changed since the last embedding pass, to embed (or re-enter) in one batch.
    pending: std::collections::BTreeMap<(String, String), vectors::Wanted>,
    /// The store may hold hot engrams without a vector that `pending` does not list (set on open): the next
    /// embedding pass asks the store for them.
    backlog: bool,
    /// Most entries in `pending` ([`MAX_PENDING`]).
    max_pending: usize,
}

/// Rows recall has read, by `(project, id)`, for the store generation they were read at. Recall reads a few hundred
/// rows a query, most of them the same from one query to the next; a write anywhere moves the generation on and
/// empties the cache, so a row here is never older than the store's.
#[derive(Default)]
struct RowCache {
    generation: Option<u64>,
    rows: HashMap<(String, String), Arc<Stored>>,
}

/// Most rows [`RowCache`] keeps (it is emptied when full).
const MAX_CACHED_ROWS: usize = 50_000;

impl RowCache {
    /// Empties the cache unless it holds rows of `generation`.
    fn at_generation(&mut self, generation: u64) {
        if self.generation != Some(generation) {
            self.rows.clear();
            self.generation = Some(generation);
        }
    }

    /// The stored rows of `keys` that exist, in the order of `keys`, from the cache or the store.
    fn get_many(&mut self, store: &Store, keys: &[(String, String)]) -> Result<Vec<Arc<Stored>>, MemoryError> {
        let missing: Vec<(String, String)> = keys.iter().filter(|k| !self.rows.contains_key(*k)).cloned().collect();
        let read = store.get_many(&missing)?;
        if self.rows.len() + read.len() > MAX_CACHED_ROWS {
            self.rows.clear();
        }
        for stored in read {
            self.rows.insert((stored.project.clone(), stored.engram.id.clone()), Arc::new(stored));
        }
        Ok(keys.iter().filter_map(|k| self.rows.get(k).cloned()).collect())
    }
}

/// The store and its recall indexes, kept in step.
///
/// A put is acknowledged after the store's commit; the indexes take the engram lazily (an index commit costs about
/// ten times a store commit, and embedding in batches is several times faster). The hash index is committed before
/// the next query and by [`Memory::commit`]; claims are embedded only before a query that reranks, or by an explicit
/// [`Memory::flush`], never on the way to an acknowledgement and never when the memory is dropped, so writers and
/// read-only commands never wait for the model. A crash in between leaves an index behind the store's generation,
/// and the next open rebuilds it (the vectors are kept in the store), so nothing acknowledged is ever missing from
/// recall.
pub struct Memory {
    store: Store,
    index: RecallIndex,
    /// The index holds changes not yet committed.
    index_dirty: bool,
    semantic: Result<Semantic, String>,
    fusion: Fusion,
    /// Candidates each stage contributes ([`RECALL_POOL`] unless an evaluation sets it).
    pool: usize,
    /// Rows recall has read, valid for one store generation (any write, by any process, moves it on).
    rows: RowCache,
    /// Limits of the access rules and hygiene (`policy.rs`).
    policy: MemoryPolicy,
    /// Told `(done, total)` as an embedding pass makes durable progress.
    progress: Option<Box<dyn FnMut(usize, usize) + Send>>,
    /// Saved by [`Memory::close`]: nothing is left for `Drop`.
    closed: bool,
}

impl Semantic {
    /// The model, loading it now if needed.
    fn embedder(&mut self) -> Result<Arc<Embedder>, String> {
        if let Some(embedder) = &self.embedder {
            return Ok(embedder.clone());
        }
        let embedder = shared_embedder()?;
        self.embedder = Some(embedder.clone());
        Ok(embedder)
    }
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory").field("store", &self.store).field("semantic", &self.semantic.is_ok()).finish()
    }
}

impl Memory {
    /// Opens the memory in `dir` (`memory.sqlite3`, `recall/`, `vectors/`) with the process's embedding model when its
    /// files are installed (see [`ModelPaths::from_env`]; loaded on first need), rebuilding derived indexes that are
    /// behind the store.
    pub fn open(dir: &Path) -> Result<Memory, MemoryError> {
        let paths = ModelPaths::from_env();
        let missing = paths.missing();
        if missing.is_empty() {
            Memory::open_semantic(dir, Ok(None))
        } else {
            let missing: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
            Memory::open_semantic(
                dir,
                Err(format!(
                    "the embedding model is not installed (missing {}); run scripts/provision-model.sh or set \
                     LESSRT_MODEL_DIR and LESSRT_ORT_LIB",
                    missing.join(", ")
                )),
            )
        }
    }

    /// Opens the memory with stage 1 only; every query result says so.
    pub fn open_without_model(dir: &Path) -> Result<Memory, MemoryError> {
        Memory::open_with(dir, Err("the memory was opened without the embedding model".into()))
    }

    /// Opens the memory in `dir` to read it where it is, with stage 1 only (a viewer: `lessrt serve`): the store
    /// through a read-only connection, the hash index's files read-only. Nothing in `dir` is created or written,
    /// and nothing is copied: an index that is missing, damaged or behind the store is caught up in memory, for
    /// this reader alone. A put fails (the store is read-only).
    pub fn open_to_read(dir: &Path) -> Result<Memory, MemoryError> {
        let store = Store::open_read_only(dir)?;
        let index = RecallIndex::open_read_only(&dir.join(crate::layout::RECALL_DIR))?;
        Ok(Memory {
            store,
            index,
            index_dirty: false,
            semantic: Err("the memory was opened to read, without the embedding model".into()),
            fusion: Fusion::default(),
            pool: RECALL_POOL,
            rows: RowCache::default(),
            policy: MemoryPolicy::default(),
            progress: None,
            closed: false,
        })
    }

    /// Opens the memory with the given model (or the reason there is none).
    pub fn open_with(dir: &Path, embedder: Result<Arc<Embedder>, String>) -> Result<Memory, MemoryError> {
        Memory::open_semantic(dir, embedder.map(Some))
    }

    fn open_semantic(dir: &Path, embedder: Result<Option<Arc<Embedder>>, String>) -> Result<Memory, MemoryError> {
        let store = Store::open(dir)?;
        store.ensure_embeddings()?;
        let index = RecallIndex::open(&dir.join(crate::layout::RECALL_DIR))?;
        let semantic = match embedder {
            Ok(embedder) => Ok(Semantic {
                embedder,
                vectors: VectorIndex::open(&dir.join(crate::layout::VECTORS_DIR))?,
                pending: Default::default(),
                max_pending: MAX_PENDING,
                backlog: true,
            }),
            Err(reason) => Err(reason),
        };
        let mut memory = Memory {
            store,
            index,
            index_dirty: false,
            semantic,
            fusion: Fusion::default(),
            pool: RECALL_POOL,
            rows: RowCache::default(),
            policy: MemoryPolicy::default(),
            progress: None,
            closed: false,
        };
        // The hash index is caught up lazily (before a query, and after this process's writes): a command that only
        // reads rows never writes the index, and never waits for another process's write lock.
        let generation = memory.store.generation()?;
        memory.sync_vectors(generation)?;
        Ok(memory)
    }

    /// Replaces the fusion weights (evaluations tune them; the defaults are the tuned ones).
    pub fn set_fusion(&mut self, fusion: Fusion) {
        self.fusion = fusion;
    }

    /// Replaces the candidate pool of each stage ([`RECALL_POOL`]; evaluations and tests set it).
    pub fn set_recall_pool(&mut self, pool: usize) {
        self.pool = pool.clamp(1, MAX_K);
    }

    /// Why stage 2 is not available, if it is not (loads the model to find out).
    pub fn rerank_unavailable(&mut self) -> Option<String> {
        match &mut self.semantic {
            Ok(semantic) => semantic.embedder().err(),
            Err(reason) => Some(reason.clone()),
        }
    }

    /// Reports `(done, total)` of each embedding pass to `progress` (a progress bar; the runtime prints nothing).
    pub fn on_embed_progress(&mut self, progress: impl FnMut(usize, usize) + Send + 'static) {
        self.progress = Some(Box::new(progress));
    }

    /// Brings the vector index in line with the store: adopts the saved file when it reflects `generation`,
    /// rebuilds it from stored vectors otherwise. Hot engrams without a vector are embedded by the next pass.
    fn sync_vectors(&mut self, generation: u64) -> Result<(), MemoryError> {
        let Ok(semantic) = &mut self.semantic else { return Ok(()) };
        let stored = self.store.hot_vectors(MODEL_ID)?;
        let current = semantic.vectors.generation() == Some(generation) && semantic.vectors.adopt(&stored);
        if !current {
            semantic.vectors.rebuild(&stored)?;
        }
        semantic.backlog = true;
        Ok(())
    }

    /// Rebuilds every derived index from the store; returns how many hot engrams they hold (cold ones are in the
    /// hash index too, for explicit cold queries).
    pub fn reindex(&mut self) -> Result<usize, MemoryError> {
        let n = self.reindex_hash()?;
        if let Ok(semantic) = &mut self.semantic {
            let stored = self.store.hot_vectors(MODEL_ID)?;
            semantic.vectors.rebuild(&stored)?;
            semantic.pending.clear();
            semantic.backlog = true;
        }
        self.flush()?;
        Ok(n)
    }

    /// Replaces the hash index's files, damaged or not, by a rebuild from the store; returns the hot engrams.
    fn reindex_hash(&mut self) -> Result<usize, MemoryError> {
        self.index.reset()?;
        self.sync_hash()?;
        Ok(usize::try_from(self.store.stats()?.hot).unwrap_or(usize::MAX))
    }

    /// Brings the hash index up to the store. Nothing to do when it reflects the store's generation; otherwise it
    /// reads the last commit (another process may have caught it up), and if still behind applies, under the
    /// store's write lock, the rows changed since the generation that commit recorded (every row when it recorded
    /// none, or one ahead of the store: a store restored from an older copy).
    fn sync_hash(&mut self) -> Result<u64, MemoryError> {
        let generation = self.store.generation()?;
        self.index_dirty = false;
        if self.index.generation() == Some(generation) || self.index.refresh()? == Some(generation) {
            return Ok(generation);
        }
        let mut write = self.index.write()?;
        let since = match write.committed() {
            Some(since) if since <= generation => Some(since),
            _ => {
                write.clear()?;
                None
            }
        };
        let generation = self.store.changes_since(since, |stored| write.add(&stored).map_err(MemoryError::from))?;
        write.commit(generation)?;
        Ok(generation)
    }

    /// Stage 1: candidates from the hash index. A search that fails on the index's files (damaged after it was
    /// opened) rebuilds it from the store and searches again.
    fn stage_one(
        &mut self,
        keys: &[String],
        filter: &RecallFilter,
        pool: usize,
    ) -> Result<Vec<Candidate>, MemoryError> {
        match self.index.recall_filtered(keys, filter, pool) {
            Ok(found) => Ok(found),
            Err(IndexError::Tantivy(err)) => {
                tracing::warn!(target: "less.memory", "recall index failed ({err}); rebuilding it from the store");
                self.reindex_hash()?;
                Ok(self.index.recall_filtered(keys, filter, pool)?)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Stores an engram and makes it recallable; acknowledged after the store's commit.
    pub fn put(&mut self, engram: &Valid<Engram>, project: &str, now: i64) -> Result<PutOutcome, MemoryError> {
        Ok(self.put_many(std::slice::from_ref(engram), project, now)?.remove(0))
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
            self.reindex_one(project, outcome.id())?;
        }
        Ok(outcomes)
    }

    /// The `k` best hot engrams of `project` for `text` (optionally of one `kind`), by both stages when available:
    /// the project's trusted view (its run-less, project, org and global engrams, every role). Callers acting for an
    /// agent use [`Memory::query_as`].
    pub fn query(&mut self, text: &str, project: &str, kind: Option<&str>, k: usize) -> Result<Recall, MemoryError> {
        self.recall(&RecallRequest::new(text, RecallFilter::project(project, kind), k))
    }

    /// The `k` best engrams for `text` among those `filter` lets through, by both stages when available.
    pub fn query_filtered(&mut self, text: &str, filter: &RecallFilter, k: usize) -> Result<Recall, MemoryError> {
        self.recall(&RecallRequest::new(text, filter.clone(), k))
    }

    /// Answers a query: stage-1 candidates and nearest vectors, fused and ordered by [`rank::rank`].
    pub fn recall(&mut self, request: &RecallRequest<'_>) -> Result<Recall, MemoryError> {
        // A question, not a text: as a workspace search (an unbounded one costs time and memory in every stage).
        let max = crate::workspace::MAX_QUERY_CHARS;
        if request.text.chars().nth(max).is_some() {
            return Err(MemoryError::Refused(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/text",
                format!(
                    "the question has {} characters; a question has at most {max}: ask for what you need in a few \
                     words, not a whole text",
                    request.text.chars().count()
                ),
            )));
        }
        // Always: other processes may have changed the store since this one last looked.
        let generation = self.sync_hash()?;
        self.rows.at_generation(generation);
        if request.stages != Stages::Hash && self.rerank_unavailable().is_none() {
            self.embed_pending()?;
        }
        let started = std::time::Instant::now();
        let mut phases = [std::time::Duration::ZERO; 4];
        let filter = &request.filter;
        let k = request.k.min(MAX_K);
        let pool = self.pool.max(k);
        let mut stages = Vec::new();
        let mut degraded = None;
        // (project, id) → (stage-1 score, cosine), in the order first found.
        let mut found: HashMap<(String, String), (Option<f32>, Option<f32>)> = HashMap::new();
        let mut order: Vec<(String, String)> = Vec::new();
        let embedder = match request.stages {
            Stages::Hash => None,
            _ => match self.semantic.as_mut().map_err(|reason| reason.clone()).and_then(Semantic::embedder) {
                Ok(embedder) => Some(embedder),
                Err(reason) if request.stages == Stages::Rerank => return Err(MemoryError::StageUnavailable(reason)),
                Err(reason) => {
                    degraded = Some(format!("rerank skipped: {reason}"));
                    None
                }
            },
        };
        let features = keys::query_features(request.text);
        if request.stages != Stages::Rerank {
            stages.push("hash");
            for candidate in self.stage_one(&keys::keys_of(&features), filter, pool)? {
                let at = (candidate.project, candidate.id);
                order.push(at.clone());
                found.insert(at, (Some(candidate.score), None));
            }
        }
        phases[0] = started.elapsed();
        let semantic = embedder.and_then(|embedder| self.semantic.as_ref().ok().map(|semantic| (semantic, embedder)));
        let mut query_vector = None;
        // Vectors read to take a cosine, kept for the turn-context cosine below.
        let mut read_vectors: HashMap<(String, String), Vec<f32>> = HashMap::new();
        if let Some((semantic, embedder)) = semantic {
            stages.push("rerank");
            let query = embedder.embed_one(request.text).map_err(|e| MemoryError::StageUnavailable(e.to_string()))?;
            phases[1] = started.elapsed();
            let visible = |e: &vectors::Entry| filter.visible.iter().any(|v| **v == *e.vis);
            for (entry, cosine) in semantic.vectors.search(&query, pool, visible)? {
                let at = (entry.project.to_string(), entry.id.to_string());
                let slot = found.entry(at.clone()).or_insert_with(|| {
                    order.push(at);
                    (None, None)
                });
                slot.1 = Some(cosine);
            }
            for at in &order {
                if let Some(slot) = found.get_mut(at)
                    && slot.1.is_none()
                    && let Some(vector) = semantic.vectors.vector(&at.0, &at.1)
                {
                    slot.1 = Some(embed::cosine(&query, &vector));
                    read_vectors.insert(at.clone(), vector);
                }
            }
            query_vector = Some(query);
        }
        phases[2] = started.elapsed();
        // Found by stage 2 alone and below the floor: ranking would drop it, so its row is not read.
        let wanted: Vec<(String, String)> = order
            .iter()
            .filter(|at| {
                let (hash, cosine) = found.get(*at).copied().unwrap_or_default();
                hash.is_some() || cosine.is_some_and(|c| c >= self.fusion.floor)
            })
            .cloned()
            .collect();
        let mut candidates = Vec::with_capacity(wanted.len());
        // The indexes are derived: the store's row decides (tier, scope, roles may have changed since).
        for stored in self.rows.get_many(&self.store, &wanted)? {
            if !filter.admits(&stored) {
                continue;
            }
            let at = (stored.project.clone(), stored.engram.id.clone());
            let (hash, cosine) = found.get(&at).copied().unwrap_or_default();
            // The vectors of the candidates, for the turn-context cosine (when stage 2 ran and weighs it).
            let vector = match (&self.semantic, &query_vector) {
                (Ok(semantic), Some(_)) if self.fusion.context > 0.0 && cosine.is_some() => {
                    read_vectors.remove(&at).or_else(|| semantic.vectors.vector(&at.0, &at.1))
                }
                _ => None,
            };
            candidates.push(rank::Candidate { stored, hash, cosine, vector });
        }
        phases[3] = started.elapsed();
        let ties = TieContext {
            scope: request.scope,
            query_features: features,
            query_vector,
            asks_time: keys::asks_time(request.text),
            asks_list: keys::asks_list(request.text),
        };
        let fusion = if stages == ["hash"] { Fusion { cosine: 0.0, ..self.fusion } } else { self.fusion };
        let hits = rank::rank(candidates, &fusion, &ties)
            .into_iter()
            .take(k)
            .map(|r| Hit {
                score: r.score,
                hash_score: r.candidate.hash,
                cosine: r.candidate.cosine,
                stored: Arc::unwrap_or_clone(r.candidate.stored),
            })
            .collect();
        tracing::debug!(
            target: "less.memory.recall",
            candidates = order.len(),
            stage1_us = phases[0].as_micros() as u64,
            embed_us = phases[1].saturating_sub(phases[0]).as_micros() as u64,
            vectors_us = phases[2].saturating_sub(phases[1].max(phases[0])).as_micros() as u64,
            rows_us = phases[3].saturating_sub(phases[2]).as_micros() as u64,
            total_us = started.elapsed().as_micros() as u64,
            "recall"
        );
        Ok(Recall { stages, degraded, hits })
    }

    /// Commits the hash index's pending changes (cheap; no model). Queries do this first.
    pub fn commit(&mut self) -> Result<(), MemoryError> {
        if self.index_dirty {
            self.sync_hash()?;
        }
        Ok(())
    }

    /// Commits the hash index and embeds every hot engram without a vector (a query that reranks does this first;
    /// bulk loads and benches call it to pay for the model up front).
    pub fn flush(&mut self) -> Result<(), MemoryError> {
        self.commit()?;
        self.embed_pending()
    }

    /// How many hot engrams wait for their vector (counted in the store; no model).
    pub fn unembedded(&self) -> Result<usize, MemoryError> {
        Ok(self.store.unembedded_count(MODEL_ID)?)
    }

    /// Re-enters pending engrams that already have a vector (revived, or their scope changed) into the vector index;
    /// no model. The ones without a vector stay pending.
    fn enter_stored_vectors(&mut self) -> Result<(), MemoryError> {
        let Ok(semantic) = &mut self.semantic else { return Ok(()) };
        let mut entered = Vec::new();
        for (place, wanted) in &semantic.pending {
            if let Some(vector) = self.store.vector(MODEL_ID, &wanted.project, &wanted.id)? {
                semantic.vectors.add(&wanted.project, &wanted.id, &wanted.vis, &vector)?;
                entered.push(place.clone());
            }
        }
        for place in entered {
            semantic.pending.remove(&place);
        }
        Ok(())
    }

    /// Embeds pending engrams and re-enters changed ones into the vector index.
    fn embed_pending(&mut self) -> Result<(), MemoryError> {
        let Ok(semantic) = &mut self.semantic else { return Ok(()) };
        if semantic.backlog {
            for wanted in self.store.unembedded(MODEL_ID)? {
                semantic.pending.entry((wanted.project.clone(), wanted.id.clone())).or_insert(wanted);
            }
            semantic.backlog = false;
        }
        if semantic.pending.is_empty() {
            return Ok(());
        }
        let pending: Vec<vectors::Wanted> = std::mem::take(&mut semantic.pending).into_values().collect();
        // A revived engram kept its vector: only the ones without one are embedded.
        let mut missing = Vec::new();
        for wanted in &pending {
            match self.store.vector(MODEL_ID, &wanted.project, &wanted.id)? {
                Some(vector) => semantic.vectors.add(&wanted.project, &wanted.id, &wanted.vis, &vector)?,
                None => missing.push(wanted),
            }
        }
        // In chunks, each stored durably before the next: memory stays bounded, and a large backlog (an archive
        // indexed before the model was needed) makes progress that survives an interrupted process.
        let total = missing.len();
        if let Some(progress) = &mut self.progress {
            progress(0, total);
        }
        for (n, chunk) in missing.chunks(EMBED_CHUNK).enumerate() {
            let texts: Vec<&str> = chunk.iter().map(|w| w.text.as_str()).collect();
            match semantic.embedder().map_err(EmbedError::Model).and_then(|embedder| embedder.embed(&texts)) {
                Ok(computed) => {
                    let items: Vec<(&vectors::Wanted, &[f32])> =
                        chunk.iter().copied().zip(computed.iter().map(Vec::as_slice)).collect();
                    self.store.put_vectors(MODEL_ID, &items)?;
                    for (wanted, vector) in items {
                        semantic.vectors.add(&wanted.project, &wanted.id, &wanted.vis, vector)?;
                    }
                    let done = (n * EMBED_CHUNK + chunk.len()).min(total);
                    if total > EMBED_CHUNK {
                        tracing::info!(target: "less.memory", done, total, "embedded");
                    }
                    if let Some(progress) = &mut self.progress {
                        progress(done, total);
                    }
                }
                // The engrams are stored and recallable by stage 1; the next pass embeds them.
                Err(err) => {
                    tracing::warn!(target: "less.memory", "embedding {} engrams failed: {err}", total - n * EMBED_CHUNK);
                    semantic.backlog = true;
                    break;
                }
            }
        }
        Ok(())
    }

    /// The engram `id` of `project`, hot or cold.
    pub fn get(&self, project: &str, id: &str) -> Result<Option<Stored>, MemoryError> {
        Ok(self.store.get(project, id)?)
    }

    /// The projects that hold engrams, sorted (an operator choosing where to act).
    pub fn projects(&self) -> Result<Vec<String>, MemoryError> {
        Ok(self.store.projects()?)
    }

    /// The projects that hold a copy of engram `id` (an operator finding out why a read was refused).
    pub fn owners(&self, id: &str) -> Result<Vec<String>, MemoryError> {
        Ok(self.store.get_any(id)?.into_iter().map(|s| s.project).collect())
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
        // The hash index takes the change from the store's change log at the next sync.
        self.index_dirty = true;
        if self.semantic.is_err() {
            return Ok(());
        }
        let stored = self.store.get_once(project, id)?;
        if let Ok(semantic) = &mut self.semantic {
            // Stage 2 holds hot engrams only; a hot one is (re)entered at the next flush, with its kept vector when
            // it has one, so a changed scope or a revival is seen by the vector search too.
            let place = (project.to_owned(), id.to_owned());
            match stored {
                Some(stored) if stored.tier == Tier::Hot => {
                    let wanted = vectors::Wanted {
                        vis: vis_key(stored.engram.scope, project, &stored.run),
                        project: project.to_owned(),
                        id: id.to_owned(),
                        text: stored.engram.claim,
                    };
                    semantic.pending.insert(place, wanted);
                }
                _ => {
                    semantic.pending.remove(&place);
                    semantic.vectors.remove(project, id);
                }
            }
            if semantic.pending.len() > semantic.max_pending {
                self.spill_pending()?;
            }
        }
        Ok(())
    }

    /// How many engrams wait in memory for their vector (tests of the bound).
    #[cfg(all(test, feature = "provisioned-tests"))]
    fn n_pending(&self) -> usize {
        self.semantic.as_ref().map_or(0, |s| s.pending.len())
    }

    #[cfg(all(test, feature = "provisioned-tests"))]
    fn set_max_pending(&mut self, max: usize) {
        if let Ok(semantic) = &mut self.semantic {
            semantic.max_pending = max;
        }
    }

    /// Bounds what waits for the model in memory: pending engrams that have a vector are entered now (no model), and
    /// the others are left to the store, which the next embedding pass asks for every hot engram without a vector.
    /// A memory that is written and never queried (a run's message index) so holds no growing list of claims.
    fn spill_pending(&mut self) -> Result<(), MemoryError> {
        self.enter_stored_vectors()?;
        if let Ok(semantic) = &mut self.semantic {
            semantic.pending.clear();
            semantic.backlog = true;
        }
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

    /// Counts by tier and kind at `now`: engrams whose TTL ran out count as cold, moved yet or not.
    pub fn stats_at(&self, now: i64) -> Result<StoreStats, MemoryError> {
        Ok(self.store.stats_at(Some(now))?)
    }

    /// Commits the hash index and saves the vector index without embedding anything (done on drop; call it to hand
    /// the directory to another process). Engrams still without a vector are embedded by the next pass, in whichever
    /// process needs them.
    pub fn save(&mut self) -> Result<(), MemoryError> {
        self.commit()?;
        self.enter_stored_vectors()?;
        let generation = self.store.generation()?;
        if let Ok(semantic) = &mut self.semantic {
            semantic.vectors.save(generation)?;
        }
        Ok(())
    }
}

impl Memory {
    /// Saves what the indexes hold ([`Memory::save`]: a commit and the vectors already computed; never the model)
    /// and closes the memory, saying whether that worked. Owners that can report a failure close explicitly; a
    /// memory merely dropped saves best-effort.
    pub fn close(mut self) -> Result<(), MemoryError> {
        let saved = self.save();
        self.closed = true;
        saved
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // Best effort, and never the model: a failed commit here only means the next open rebuilds the index from
        // the store.
        if let Err(err) = self.save() {
            tracing::warn!("recall indexes left behind the store, rebuilt on next open: {err}");
        }
    }
}

#[cfg(test)]
mod tests;
