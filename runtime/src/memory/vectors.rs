//! Claim vectors for stage-2 recall: kept in SQLite (table `embeddings`, the source of truth, so a rebuild never
//! re-runs the model) and in a usearch HNSW index (cosine, f32) derived from it.
//!
//! The index file records the store generation it reflects, like the tantivy index; a missing, unreadable or stale
//! file is rebuilt from the table. Every engram keeps its vector when it goes cold, so a revived engram is searchable
//! again without embedding it twice.
//!
//! Useful for: the vector of an engram by (project, id); nearest neighbours of a query within visible projects.
//! Not for: computing vectors (`embed.rs`) or fusing scores (`Memory::recall`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::params;
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::embed::DIMENSIONS;
use super::index::vis_key;
use super::store::{Store, StoreError};
use less_contract::Scope;

/// Errors of the vector index (the table's errors are [`StoreError`]s).
#[derive(Debug, thiserror::Error)]
#[error("vector index {path}: {message}; `lessrt memory reindex` rebuilds it from the store")]
pub struct VectorError {
    path: PathBuf,
    message: String,
}

/// The usearch key of an engram: the first 8 bytes of blake3(project, id). Stable across rebuilds and machines.
pub fn key_of(project: &str, id: &str) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(project.as_bytes());
    hasher.update(&[0]);
    hasher.update(id.as_bytes());
    let bytes = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(blob: &[u8]) -> Option<Vec<f32>> {
    (blob.len() == DIMENSIONS * 4)
        .then(|| blob.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<f32>>())
}

/// One engram whose vector is wanted: where it is, who sees it, and the text to embed.
#[derive(Debug, Clone)]
pub struct Wanted {
    /// Its project.
    pub project: String,
    /// Its id.
    pub id: String,
    /// Its visibility term ([`vis_key`]).
    pub vis: String,
    /// The text the vector is computed from.
    pub text: String,
}

/// A hot engram's stored vector.
#[derive(Debug, Clone)]
pub struct StoredVector {
    /// Its project.
    pub project: String,
    /// Its id.
    pub id: String,
    /// Its visibility term ([`vis_key`]).
    pub vis: String,
    /// The vector.
    pub vector: Vec<f32>,
}

/// The visibility term of a row's scope, project and run.
fn row_vis(scope: &str, project: &str, run: &str) -> String {
    let scope = match scope {
        "run" => Scope::Run,
        "org" => Scope::Org,
        "global" => Scope::Global,
        _ => Scope::Project,
    };
    vis_key(scope, project, run)
}

impl Store {
    /// Creates the `embeddings` table if this store has none yet.
    pub(super) fn ensure_embeddings(&self) -> Result<(), StoreError> {
        self.conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS embeddings (
                 project TEXT NOT NULL,
                 id TEXT NOT NULL,
                 model TEXT NOT NULL,
                 vector BLOB NOT NULL,
                 PRIMARY KEY (project, id)
             );",
        )?;
        Ok(())
    }

    /// Hot engrams without a vector of `model` (engrams put while the model was absent, or under another model).
    pub(super) fn unembedded(&self, model: &str) -> Result<Vec<Wanted>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT e.project, e.id, json_extract(e.doc, '$.claim'), e.scope, e.run FROM engrams e
             LEFT JOIN embeddings v ON v.project = e.project AND v.id = e.id AND v.model = ?1
             WHERE e.tier = 'hot' AND v.id IS NULL ORDER BY e.stored_at, e.id",
        )?;
        let rows = stmt.query_map([model], |r| {
            let (project, scope, run): (String, String, String) = (r.get(0)?, r.get(3)?, r.get(4)?);
            Ok(Wanted {
                vis: row_vis(&scope, &project, &run),
                project,
                id: r.get(1)?,
                text: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many hot engrams have no vector of `model`.
    pub(super) fn unembedded_count(&self, model: &str) -> Result<usize, StoreError> {
        let n: i64 = self.conn.query_row(
            "SELECT count(*) FROM engrams e
             LEFT JOIN embeddings v ON v.project = e.project AND v.id = e.id AND v.model = ?1
             WHERE e.tier = 'hot' AND v.id IS NULL",
            [model],
            |r| r.get(0),
        )?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Stores vectors of `model`, in one transaction.
    pub(super) fn put_vectors(&mut self, model: &str, items: &[(&Wanted, &[f32])]) -> Result<(), StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO embeddings (project, id, model, vector) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (project, id) DO UPDATE SET model = excluded.model, vector = excluded.vector",
            )?;
            for (wanted, vector) in items {
                stmt.execute(params![wanted.project, wanted.id, model, to_blob(vector)])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The stored vector of one engram under `model`.
    pub(super) fn vector(&self, model: &str, project: &str, id: &str) -> Result<Option<Vec<f32>>, StoreError> {
        let mut stmt =
            self.conn.prepare_cached("SELECT vector FROM embeddings WHERE project = ?1 AND id = ?2 AND model = ?3")?;
        let mut rows = stmt.query(params![project, id, model])?;
        Ok(match rows.next()? {
            Some(row) => from_blob(&row.get::<_, Vec<u8>>(0)?),
            None => None,
        })
    }

    /// Every hot engram's vector under `model`, as (project, id, vector).
    pub(super) fn hot_vectors(&self, model: &str) -> Result<Vec<StoredVector>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT v.project, v.id, v.vector, e.scope, e.run FROM embeddings v
             JOIN engrams e ON e.project = v.project AND e.id = v.id
             WHERE e.tier = 'hot' AND v.model = ?1 ORDER BY e.stored_at, e.id",
        )?;
        let rows = stmt.query_map([model], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get(1)?,
                r.get::<_, Vec<u8>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (project, id, blob, scope, run) = row?;
            if let Some(vector) = from_blob(&blob) {
                out.push(StoredVector { vis: row_vis(&scope, &project, &run), project, id, vector });
            }
        }
        Ok(out)
    }
}

/// Where an indexed vector belongs.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its project.
    pub project: Arc<str>,
    /// Its id.
    pub id: Arc<str>,
    /// Its visibility term ([`vis_key`]).
    pub vis: Arc<str>,
}

/// The HNSW index over hot engrams' vectors.
pub struct VectorIndex {
    dir: PathBuf,
    index: Index,
    entries: HashMap<u64, Entry>,
    /// The store generation the saved file reflects (`None`: nothing trustworthy on disk).
    generation: Option<u64>,
    dirty: bool,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex").field("dir", &self.dir).field("size", &self.entries.len()).finish()
    }
}

/// Removes the half-written index files of saves that a killed process left behind (`vectors.usearch.partial-<pid>`
/// whose process is gone): nothing reads them, and each is as large as the index. A live process's file is left to
/// it. Where there is no `/proc` to ask, none is removed.
fn remove_abandoned_partials(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("vectors.usearch.partial-")) else { continue };
        let gone = pid.parse::<u32>().is_ok_and(|pid| !Path::new("/proc").join(pid.to_string()).exists());
        if gone && std::fs::remove_file(entry.path()).is_ok() {
            tracing::info!("removed {}, left by a save that did not finish", entry.path().display());
        }
    }
}

fn new_index(path: &Path) -> Result<Index, VectorError> {
    let options = IndexOptions {
        dimensions: DIMENSIONS,
        metric: MetricKind::Cos,
        // Exact cosines: the default (bf16) would blur the scores the fusion compares.
        quantization: ScalarKind::F32,
        ..IndexOptions::default()
    };
    Index::new(&options).map_err(|e| VectorError { path: path.to_owned(), message: e.to_string() })
}

impl VectorIndex {
    const FILE: &'static str = "vectors.usearch";
    const GENERATION: &'static str = "vectors.generation";

    /// Opens the index in `dir`; what it reflects is checked by [`VectorIndex::generation`].
    pub fn open(dir: &Path) -> Result<VectorIndex, VectorError> {
        std::fs::create_dir_all(dir).map_err(|e| VectorError { path: dir.to_owned(), message: e.to_string() })?;
        remove_abandoned_partials(dir);
        let file = dir.join(Self::FILE);
        let mut index = new_index(&file)?;
        let generation = std::fs::read_to_string(dir.join(Self::GENERATION)).ok().and_then(|s| s.trim().parse().ok());
        let generation = match (generation, file.to_str()) {
            (Some(generation), Some(path)) if file.is_file() => match index.load(path) {
                Ok(()) => Some(generation),
                Err(err) => {
                    tracing::warn!("vector index {} unreadable, rebuilding it: {err}", file.display());
                    index = new_index(&file)?;
                    None
                }
            },
            _ => None,
        };
        Ok(VectorIndex { dir: dir.to_owned(), index, entries: HashMap::new(), generation, dirty: false })
    }

    fn fail(&self, err: impl std::fmt::Display) -> VectorError {
        VectorError { path: self.dir.clone(), message: err.to_string() }
    }

    /// The store generation the file on disk reflects, if any.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// Takes where every indexed key belongs, read from the store, when the file on disk was current. Returns false
    /// when the file and the store disagree (the caller rebuilds).
    pub fn adopt(&mut self, hot: &[StoredVector]) -> bool {
        if hot.len() != self.index.size() {
            return false;
        }
        self.entries = hot
            .iter()
            .map(|v| {
                let entry =
                    Entry { project: v.project.as_str().into(), id: v.id.as_str().into(), vis: v.vis.as_str().into() };
                (key_of(&v.project, &v.id), entry)
            })
            .collect();
        self.entries.keys().all(|key| self.index.contains(*key))
    }

    /// Replaces everything with `vectors`.
    pub fn rebuild(&mut self, vectors: &[StoredVector]) -> Result<(), VectorError> {
        self.index = new_index(&self.dir.join(Self::FILE))?;
        self.entries.clear();
        self.generation = None;
        self.index.reserve(vectors.len().max(1024)).map_err(|e| self.fail(e))?;
        for v in vectors {
            self.add(&v.project, &v.id, &v.vis, &v.vector)?;
        }
        self.dirty = true;
        Ok(())
    }

    /// Adds (or replaces) one engram's vector.
    pub fn add(&mut self, project: &str, id: &str, vis: &str, vector: &[f32]) -> Result<(), VectorError> {
        let key = key_of(project, id);
        if self.index.contains(key) {
            self.index.remove(key).map_err(|e| self.fail(e))?;
        }
        if self.index.size() + 1 > self.index.capacity() {
            let grown = (self.index.capacity() * 2).max(1024);
            self.index.reserve(grown).map_err(|e| self.fail(e))?;
        }
        self.index.add(key, vector).map_err(|e| self.fail(e))?;
        self.entries.insert(key, Entry { project: project.into(), id: id.into(), vis: vis.into() });
        self.dirty = true;
        Ok(())
    }

    /// Takes one engram out (it went cold); its vector stays in the store.
    pub fn remove(&mut self, project: &str, id: &str) {
        let key = key_of(project, id);
        if self.entries.remove(&key).is_some() {
            let _ = self.index.remove(key);
            self.dirty = true;
        }
    }

    /// The indexed vector of one engram.
    pub fn vector(&self, project: &str, id: &str) -> Option<Vec<f32>> {
        let key = key_of(project, id);
        if !self.entries.contains_key(&key) {
            return None;
        }
        let mut out = vec![0f32; DIMENSIONS];
        matches!(self.index.get(key, &mut out), Ok(1)).then_some(out)
    }

    /// The `count` nearest hot engrams to `query` among those `visible`, with their cosine similarity, best first.
    pub fn search(
        &self,
        query: &[f32],
        count: usize,
        visible: impl Fn(&Entry) -> bool,
    ) -> Result<Vec<(Entry, f32)>, VectorError> {
        if self.entries.is_empty() || count == 0 {
            return Ok(Vec::new());
        }
        let matches = self
            .index
            .filtered_search(query, count, |key| self.entries.get(&key).is_some_and(&visible))
            .map_err(|e| self.fail(e))?;
        Ok(matches
            .keys
            .iter()
            .zip(&matches.distances)
            .filter_map(|(key, distance)| self.entries.get(key).map(|e| (e.clone(), 1.0 - distance)))
            .collect())
    }

    /// Writes the index and the generation it reflects (only when something changed).
    pub fn save(&mut self, generation: u64) -> Result<(), VectorError> {
        if !self.dirty && self.generation == Some(generation) {
            return Ok(());
        }
        let file = self.dir.join(Self::FILE);
        let error = |message: String| VectorError { path: file.clone(), message };
        // A name of this process's own: two processes saving at once each rename a whole file.
        let tmp = self.dir.join(format!("vectors.usearch.partial-{}", std::process::id()));
        let tmp_str = tmp.to_str().ok_or_else(|| error("path is not UTF-8".into()))?;
        // The generation goes first as "unknown", then the file, then the generation: a crash in between leaves a
        // file that is rebuilt, never one trusted while stale.
        let _ = std::fs::remove_file(self.dir.join(Self::GENERATION));
        // The index writes the file itself, following links: one left under this name goes first.
        let _ = std::fs::remove_file(&tmp);
        self.index.save(tmp_str).map_err(|e| error(e.to_string()))?;
        std::fs::rename(&tmp, &file).map_err(|e| error(e.to_string()))?;
        crate::files::write_whole(&self.dir.join(Self::GENERATION), generation.to_string().as_bytes())
            .map_err(|e| error(e.to_string()))?;
        self.generation = Some(generation);
        self.dirty = false;
        Ok(())
    }

    /// Vectors indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opening the index removes what a killed save left (its process is gone) and leaves a live process's file.
    #[test]
    fn abandoned_partial_saves_are_removed_on_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path()).expect("dir");
        // Process ids wrap far below u32::MAX: no process has this one.
        let abandoned = dir.path().join(format!("vectors.usearch.partial-{}", u32::MAX - 1));
        let live = dir.path().join(format!("vectors.usearch.partial-{}", std::process::id()));
        let other = dir.path().join("vectors.usearch.partial-notapid");
        for file in [&abandoned, &live, &other] {
            std::fs::write(file, b"half an index").expect("write");
        }
        VectorIndex::open(dir.path()).expect("open");
        assert!(!abandoned.exists(), "the abandoned save is removed");
        assert!(live.exists(), "a live process's save is left to it");
        assert!(other.exists(), "a file that is not a save is left alone");
    }
}
