//! The engram store: SQLite (bundled, WAL, `synchronous = FULL`) as the source of truth.
//!
//! A put is acknowledged only after its transaction committed, so an acknowledged engram survives a crash. Nothing
//! is deleted: expired, evicted and superseded engrams move to the cold tier, out of normal recall but still readable
//! by id. Indexes for recall (tantivy, usearch) are derived from this store and can always be rebuilt from it.
//!
//! Write transactions begin `IMMEDIATE`: the file is shared with the lossless archive (`dag/`), and a deferred
//! transaction that read before another connection's commit could not upgrade to a write (SQLite answers "database
//! is locked" at once rather than wait, as waiting could deadlock); taking the write lock first makes it wait instead.
//!
//! Useful for: durable, transactional state and lookups by id, project, tier and expiry.
//! Not for: ranking by relevance (the derived indexes do that).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::memory::keys;
use crate::memory::policy::subject_key;
use less_contract::Pointer;
use less_contract::Valid;
use less_contract::{Engram, Scope};

/// Version of the table layout. A store of version 1 or 2 is migrated in place on open (columns added, subject keys
/// filled in from the stored documents); a store written by any other version is refused, never silently rewritten.
const SCHEMA_VERSION: i64 = 3;

/// How long a statement waits for another connection's write transaction (in this process or another) before
/// failing with "database is locked".
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The generation the current write transaction brings the store to (the generation is bumped at its end when
/// something changed): every row a transaction changes records it in `changed`.
const NEXT_GENERATION: &str = "(SELECT CAST(value AS INTEGER) + 1 FROM meta WHERE key = 'generation')";

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite failed (disk full, locked, corrupt file…).
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The store directory could not be created.
    #[error("store directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A row does not hold a valid engram (the file was edited by hand, or is damaged).
    #[error("store: engram {id} is damaged: {message}")]
    Corrupt {
        /// The row's id.
        id: String,
        /// What is wrong.
        message: String,
    },
    /// The id already names another claim in the project; nothing was stored.
    #[error("engram id {id} already names a different claim in project {project:?}; nothing was stored")]
    IdConflict {
        /// The project.
        project: String,
        /// The id.
        id: String,
    },
    /// The store was written with another layout version.
    #[error("store: layout version {found}, this build reads version {SCHEMA_VERSION}; use a matching lessrt")]
    Version {
        /// The version found.
        found: i64,
    },
}

/// Where an engram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// In normal recall.
    Hot,
    /// Out of normal recall (expired, evicted or superseded); readable by id and by an explicit cold query.
    Cold,
}

impl Tier {
    fn as_str(self) -> &'static str {
        match self {
            Tier::Hot => "hot",
            Tier::Cold => "cold",
        }
    }
}

/// An engram as stored, with its place in the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The engram.
    pub engram: Engram,
    /// The project it belongs to (empty: none).
    pub project: String,
    /// The run it was written in (empty: outside any run); run-scoped engrams are visible only there.
    pub run: String,
    /// The principal that wrote it (rate limits count per writer).
    pub written_by: String,
    /// Who promoted it to its current scope, if it was promoted.
    pub promoted_by: Option<String>,
    /// Hot or cold.
    pub tier: Tier,
    /// Why it is cold: `expired`, `evicted` or `superseded`.
    pub cold_reason: Option<String>,
    /// When it was stored (unix seconds).
    pub stored_at: i64,
    /// When its TTL runs out (unix seconds).
    pub expires_at: i64,
    /// The engram that replaced it.
    pub superseded_by: Option<String>,
    /// The engram it replaced.
    pub supersedes: Option<String>,
}

/// What a put did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    /// A new engram was stored.
    Stored {
        /// Its id.
        id: String,
    },
    /// The same content was already stored in this project (hot): nothing changed.
    Duplicate {
        /// The id already stored.
        id: String,
    },
    /// The same content was cold (expired or evicted): it is hot again, in this run, with a fresh TTL. (A claim that
    /// another run holds privately is never revived: this run gets its own copy, see [`run_copy_id`].)
    Revived {
        /// Its id.
        id: String,
    },
}

impl PutOutcome {
    /// The id the engram has in the store.
    pub fn id(&self) -> &str {
        match self {
            PutOutcome::Stored { id } | PutOutcome::Duplicate { id } | PutOutcome::Revived { id } => id,
        }
    }
}

/// Counts for `lessrt memory stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Engrams in normal recall.
    pub hot: u64,
    /// Engrams in the cold tier.
    pub cold: u64,
    /// Hot engrams by kind.
    pub hot_by_kind: std::collections::BTreeMap<String, u64>,
}

/// A cap on one writer's puts ([`Store::put_capped`]): at most `puts` engrams stored after `since` (unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteCap {
    /// Engrams the writer may have stored in the window.
    pub puts: u32,
    /// Where the window starts (exclusive).
    pub since: i64,
}

/// Where a put goes: the project, the run and the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The project the engram belongs to.
    pub project: String,
    /// The run it is written in (empty: outside any run).
    pub run: String,
    /// The writer (empty: the engram's `created_by`).
    pub written_by: String,
}

impl Placement {
    /// In `project`, outside any run, written by each engram's creator.
    pub fn project(project: &str) -> Placement {
        Placement { project: project.to_owned(), run: String::new(), written_by: String::new() }
    }
}

/// The store.
pub struct Store {
    pub(super) conn: Connection,
    /// Engrams already decoded and validated, by their exact stored text: validation depends on the text alone, so
    /// a row read again with the same text is not validated again (recall reads the same rows over and over). A
    /// changed or damaged row has another text and is validated afresh.
    decoded: std::cell::RefCell<std::collections::HashMap<Box<str>, Engram>>,
}

/// Most decoded engrams kept (about 1 KB each); the cache starts over when full.
const DECODED_CAPACITY: usize = 50_000;

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.conn.path()).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the store in `dir` (`dir/memory.sqlite3`).
    ///
    /// Several processes may open one store at once: a store of the current layout is opened without writing, and
    /// creating or migrating one happens in one `IMMEDIATE` transaction that checks the layout again, so only the
    /// first process migrates.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io { path: dir.to_owned(), source })?;
        let conn = crate::files::open_sqlite(&dir.join(crate::layout::MEMORY_DB))?;
        // Wait for other connections to the same file (the archive and the engrams share it, and other processes
        // may hold it) instead of failing.
        conn.busy_timeout(BUSY_WAIT)?;
        // WAL lets readers run beside the writer; FULL syncs the WAL at every commit, so an acknowledged put is on
        // disk before the acknowledgement.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        let mut store = Store { conn, decoded: Default::default() };
        if store.layout()? != Some(SCHEMA_VERSION) {
            store.set_up()?;
        }
        Ok(store)
    }

    /// Opens the store in `dir` to read only (a viewer: `lessrt serve`): nothing is created, migrated or written,
    /// and a missing file or one of another layout is an error.
    pub fn open_read_only(dir: &Path) -> Result<Store, StoreError> {
        let path = dir.join(crate::layout::MEMORY_DB);
        if !path.is_file() {
            let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no store here");
            return Err(StoreError::Io { path, source: missing });
        }
        let conn = crate::dag::archive::open_sqlite_read_only(&path)?;
        conn.busy_timeout(BUSY_WAIT)?;
        let store = Store { conn, decoded: Default::default() };
        match store.layout()? {
            Some(SCHEMA_VERSION) => Ok(store),
            found => Err(StoreError::Version { found: found.unwrap_or(1) }),
        }
    }

    /// The layout version recorded in the file (none: a new file, or version 1).
    fn layout(&self) -> Result<Option<i64>, StoreError> {
        let meta: bool = self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')",
            [],
            |r| r.get(0),
        )?;
        if !meta {
            return Ok(None);
        }
        let found: Option<String> =
            self.conn.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).optional()?;
        Ok(found.map(|v| v.parse::<i64>().unwrap_or(-1)))
    }

    /// Creates the tables or migrates them to [`SCHEMA_VERSION`], in one transaction.
    fn set_up(&mut self) -> Result<(), StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS engrams (
                 id TEXT NOT NULL,
                 content_hash TEXT NOT NULL,
                 project TEXT NOT NULL,
                 scope TEXT NOT NULL,
                 kind TEXT NOT NULL,
                 created_by TEXT NOT NULL,
                 stored_at INTEGER NOT NULL,
                 expires_at INTEGER NOT NULL,
                 confidence REAL NOT NULL,
                 tier TEXT NOT NULL CHECK (tier IN ('hot', 'cold')),
                 cold_reason TEXT,
                 superseded_by TEXT,
                 supersedes TEXT,
                 doc TEXT NOT NULL,
                 PRIMARY KEY (project, id)
             );
             CREATE UNIQUE INDEX IF NOT EXISTS engrams_content ON engrams (project, content_hash);
             CREATE INDEX IF NOT EXISTS engrams_tier ON engrams (tier, expires_at);
             INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', '0');",
        )?;
        // Read again inside the transaction: another process may have set the store up meanwhile.
        let found: Option<String> =
            tx.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).optional()?;
        let mut version = match found.map(|v| v.parse::<i64>().unwrap_or(-1)) {
            None => 1,
            Some(v @ 1..=SCHEMA_VERSION) => v,
            Some(found) => return Err(StoreError::Version { found }),
        };
        if version == 1 {
            migrate_from_1(&tx)?;
            version = 2;
        }
        if version == 2 {
            migrate_from_2(&tx)?;
        }
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [SCHEMA_VERSION.to_string()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Stores `engram` in `project` at `now` (unix seconds). Same content in the same project is stored once.
    pub fn put(&mut self, engram: &Valid<Engram>, project: &str, now: i64) -> Result<PutOutcome, StoreError> {
        self.put_placed(engram, &Placement::project(project), now)
    }

    /// Stores `engram` where `placement` says (project, run, writer).
    pub fn put_placed(
        &mut self,
        engram: &Valid<Engram>,
        placement: &Placement,
        now: i64,
    ) -> Result<PutOutcome, StoreError> {
        let mut outcomes = self.put_many_placed(std::slice::from_ref(engram), placement, now)?;
        Ok(outcomes.remove(0))
    }

    /// Stores many engrams in one transaction (one sync for all): a bulk load acknowledged as a whole.
    pub fn put_many(
        &mut self,
        engrams: &[Valid<Engram>],
        project: &str,
        now: i64,
    ) -> Result<Vec<PutOutcome>, StoreError> {
        self.put_many_placed(engrams, &Placement::project(project), now)
    }

    /// [`Store::put_placed`] unless the placement's writer already stored `cap.puts` engrams after `cap.since`:
    /// then nothing is stored (`None`). The count and the put are one write transaction, so writers in several
    /// processes never pass the cap together.
    pub fn put_capped(
        &mut self,
        engram: &Valid<Engram>,
        placement: &Placement,
        now: i64,
        cap: WriteCap,
    ) -> Result<Option<PutOutcome>, StoreError> {
        let outcomes = self.put_in_transaction(std::slice::from_ref(engram), placement, now, Some(cap))?;
        Ok(outcomes.map(|mut outcomes| outcomes.remove(0)))
    }

    /// [`Store::put_many`] with a placement.
    pub fn put_many_placed(
        &mut self,
        engrams: &[Valid<Engram>],
        placement: &Placement,
        now: i64,
    ) -> Result<Vec<PutOutcome>, StoreError> {
        let outcomes = self.put_in_transaction(engrams, placement, now, None)?;
        Ok(outcomes.unwrap_or_default())
    }

    /// Stores `engrams` in one write transaction, or nothing (`None`) when the writer is at its `cap`.
    fn put_in_transaction(
        &mut self,
        engrams: &[Valid<Engram>],
        placement: &Placement,
        now: i64,
        cap: Option<WriteCap>,
    ) -> Result<Option<Vec<PutOutcome>>, StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if let Some(WriteCap { puts, since }) = cap
            && let Some(engram) = engrams.first()
        {
            let n: i64 = tx.query_row(
                "SELECT COUNT(*) FROM engrams WHERE written_by = ?1 AND stored_at > ?2",
                params![writer(engram, placement), since],
                |r| r.get(0),
            )?;
            if n >= i64::from(puts) {
                // Dropping the transaction ends it; nothing was written.
                return Ok(None);
            }
        }
        let mut outcomes = Vec::with_capacity(engrams.len());
        for engram in engrams {
            outcomes.push(put_in(&tx, &keys::with_stored_keys(engram), placement, now)?);
        }
        if outcomes.iter().any(|o| !matches!(o, PutOutcome::Duplicate { .. })) {
            bump_generation(&tx)?;
        }
        tx.commit()?;
        Ok(Some(outcomes))
    }

    /// Counts every change of the hot tier; derived indexes record the generation they reflect, so a stale index
    /// is noticed and rebuilt.
    pub fn generation(&self) -> Result<u64, StoreError> {
        let value: String = self.conn.query_row("SELECT value FROM meta WHERE key = 'generation'", [], |r| r.get(0))?;
        Ok(value.parse().unwrap_or(0))
    }

    /// The store generation, and every engram changed after generation `since` (all of them when none) handed to
    /// `each` one at a time, read in one snapshot: a derived index that applies them reflects exactly that
    /// generation. Rows are decoded as they are read, so catching up a large backlog holds one row at a time.
    pub fn changes_since<E: From<StoreError>>(
        &self,
        since: Option<u64>,
        mut each: impl FnMut(Stored) -> Result<(), E>,
    ) -> Result<u64, E> {
        let tx = self.conn.unchecked_transaction().map_err(StoreError::from)?;
        let generation = self.generation()?;
        let since = since.map_or(-1, |g| i64::try_from(g).unwrap_or(i64::MAX));
        {
            let mut stmt = self
                .conn
                .prepare_cached(&format!("{SELECT_STORED} WHERE changed > ?1 ORDER BY changed, stored_at, id"))
                .map_err(StoreError::from)?;
            let rows = stmt.query_map([since], raw_row).map_err(StoreError::from)?;
            for row in rows {
                // Read once to catch an index up: not worth a place in the decode cache.
                each(self.decode_row_once(row.map_err(StoreError::from)?)?)?;
            }
        }
        tx.commit().map_err(StoreError::from)?;
        Ok(generation)
    }

    /// The engram with `id` in `project`, hot or cold. Projects never see each other's engrams.
    pub fn get(&self, project: &str, id: &str) -> Result<Option<Stored>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!("{SELECT_STORED} WHERE project = ?1 AND id = ?2"))?;
        let row = stmt.query_row([project, id], raw_row).optional()?;
        row.map(|row| self.decode_row(row)).transpose()
    }

    /// [`Store::get`] for a row read once (re-indexing what was just written): the decode cache is not filled with
    /// it, so a bulk load does not grow the cache with rows no query reads.
    pub fn get_once(&self, project: &str, id: &str) -> Result<Option<Stored>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!("{SELECT_STORED} WHERE project = ?1 AND id = ?2"))?;
        let row = stmt.query_row([project, id], raw_row).optional()?;
        row.map(|row| self.decode_row_once(row)).transpose()
    }

    /// Many engrams by (project, id) in one statement, hot or cold; missing ones are absent from the answer.
    pub fn get_many(&self, keys: &[(String, String)]) -> Result<Vec<Stored>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let wanted = serde_json::to_string(keys)
            .map_err(|err| StoreError::Corrupt { id: String::new(), message: err.to_string() })?;
        let mut stmt = self.conn.prepare_cached(&format!(
            "{SELECT_STORED} WHERE (project, id) IN
                 (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1))"
        ))?;
        let rows = stmt.query_map([wanted], raw_row)?;
        rows.map(|row| self.decode_row(row?)).collect()
    }

    /// Every copy of engram `id`, in any project and tier (a caller's rights decide which it may read).
    pub fn get_any(&self, id: &str) -> Result<Vec<Stored>, StoreError> {
        let mut stmt = self.conn.prepare(&format!("{SELECT_STORED} WHERE id = ?1 ORDER BY project"))?;
        let rows = stmt.query_map([id], raw_row)?;
        rows.map(|row| self.decode_row(row?)).collect()
    }

    /// The projects that hold engrams (hot or cold), sorted.
    pub fn projects(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare_cached("SELECT DISTINCT project FROM engrams ORDER BY project")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The hot engrams of `project` with subject key `subject`, newest first.
    pub fn hot_by_subject(&self, project: &str, subject: &str) -> Result<Vec<Stored>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "{SELECT_STORED} WHERE project = ?1 AND subject = ?2 AND tier = 'hot' ORDER BY stored_at DESC, id"
        ))?;
        let rows = stmt.query_map([project, subject], raw_row)?;
        rows.map(|row| self.decode_row(row?)).collect()
    }

    /// How many engrams `writer` stored after `since` (unix seconds), and when the oldest of them was stored.
    pub fn writes_since(&self, writer: &str, since: i64) -> Result<(u64, Option<i64>), StoreError> {
        let (n, oldest): (i64, Option<i64>) = self.conn.query_row(
            "SELECT COUNT(*), MIN(stored_at) FROM engrams WHERE written_by = ?1 AND stored_at > ?2",
            params![writer, since],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((u64::try_from(n).unwrap_or(0), oldest))
    }

    /// Widens the scope of engram `id` of `project` to `to`, recording `by`; false when it is missing.
    ///
    /// The row keeps its content hash, so putting the engram again as first written is a duplicate of the promoted
    /// one rather than a second copy.
    pub fn promote(&mut self, project: &str, id: &str, to: Scope, by: &str) -> Result<bool, StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let doc: Option<String> = tx
            .query_row("SELECT doc FROM engrams WHERE project = ?1 AND id = ?2", [project, id], |r| r.get(0))
            .optional()?;
        let Some(doc) = doc else { return Ok(false) };
        let mut engram: Engram = serde_json::from_str(&doc)
            .map_err(|err| StoreError::Corrupt { id: id.to_owned(), message: err.to_string() })?;
        engram.scope = to;
        let doc = serde_json::to_string(&engram)
            .map_err(|err| StoreError::Corrupt { id: id.to_owned(), message: err.to_string() })?;
        tx.execute(
            &format!(
                "UPDATE engrams SET scope = ?3, doc = ?4, promoted_by = ?5, changed = {NEXT_GENERATION}
                 WHERE project = ?1 AND id = ?2"
            ),
            params![project, id, to.as_str(), doc, by],
        )?;
        bump_generation(&tx)?;
        tx.commit()?;
        Ok(true)
    }

    /// Every engram of `tier`, oldest first (the derived indexes are rebuilt from the hot tier).
    pub fn all(&self, tier: Tier) -> Result<Vec<Stored>, StoreError> {
        let mut stmt = self.conn.prepare(&format!("{SELECT_STORED} WHERE tier = ?1 ORDER BY stored_at, id"))?;
        let rows = stmt.query_map([tier.as_str()], raw_row)?;
        rows.map(|row| self.decode_row(row?)).collect()
    }

    /// Moves every hot engram whose TTL ran out by `now` to the cold tier; returns the (project, id) of each.
    pub fn evict_expired(&mut self, now: i64) -> Result<Vec<(String, String)>, StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let moved: Vec<(String, String)> = {
            let mut stmt = tx.prepare("SELECT project, id FROM engrams WHERE tier = 'hot' AND expires_at <= ?1")?;
            let rows = stmt.query_map([now], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        tx.execute(
            &format!(
                "UPDATE engrams SET tier = 'cold', cold_reason = 'expired', changed = {NEXT_GENERATION}
                 WHERE tier = 'hot' AND expires_at <= ?1"
            ),
            [now],
        )?;
        if !moved.is_empty() {
            bump_generation(&tx)?;
        }
        tx.commit()?;
        Ok(moved)
    }

    /// Moves one engram to the cold tier; false when it was not hot.
    pub fn evict(&mut self, project: &str, id: &str) -> Result<bool, StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let n = tx.execute(
            &format!(
                "UPDATE engrams SET tier = 'cold', cold_reason = 'evicted', changed = {NEXT_GENERATION}
                 WHERE project = ?1 AND id = ?2 AND tier = 'hot'"
            ),
            [project, id],
        )?;
        if n == 1 {
            bump_generation(&tx)?;
        }
        tx.commit()?;
        Ok(n == 1)
    }

    /// Records that `new` supersedes `old`: linked both ways, `old` leaves normal recall. False if either is missing.
    pub fn supersede(&mut self, project: &str, old: &str, new: &str) -> Result<bool, StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let n_old = tx.execute(
            &format!(
                "UPDATE engrams SET tier = 'cold', cold_reason = 'superseded', superseded_by = ?3,
                                    changed = {NEXT_GENERATION}
                 WHERE project = ?1 AND id = ?2"
            ),
            params![project, old, new],
        )?;
        let n_new = tx.execute(
            &format!("UPDATE engrams SET supersedes = ?3, changed = {NEXT_GENERATION} WHERE project = ?1 AND id = ?2"),
            params![project, new, old],
        )?;
        if n_old == 1 && n_new == 1 {
            bump_generation(&tx)?;
            tx.commit()?;
            Ok(true)
        } else {
            // Dropping the transaction rolls both updates back.
            Ok(false)
        }
    }

    /// Counts by tier and kind.
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        self.stats_at(None)
    }

    /// Counts by tier and kind at `now`: a hot engram whose TTL ran out by then counts as cold, whether or not the
    /// sweep moved it yet (none: by the stored tier alone).
    pub fn stats_at(&self, now: Option<i64>) -> Result<StoreStats, StoreError> {
        let mut stats = StoreStats::default();
        let mut stmt = self.conn.prepare(
            "SELECT CASE WHEN tier = 'hot' AND (?1 IS NULL OR expires_at > ?1) THEN 'hot' ELSE 'cold' END, kind,
                    COUNT(*)
             FROM engrams GROUP BY 1, kind",
        )?;
        let rows =
            stmt.query_map([now], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))?;
        for row in rows {
            let (tier, kind, n) = row?;
            let n = u64::try_from(n).unwrap_or(0);
            if tier == "hot" {
                stats.hot += n;
                *stats.hot_by_kind.entry(kind).or_default() += n;
            } else {
                stats.cold += n;
            }
        }
        Ok(stats)
    }
}

/// Version 2 adds the run, the writer, the subject key and the promoter; rows of version 1 were written outside any
/// run by their creators, and their subject keys are read from their tags.
fn migrate_from_1(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(
        "ALTER TABLE engrams ADD COLUMN run TEXT NOT NULL DEFAULT '';
         ALTER TABLE engrams ADD COLUMN written_by TEXT NOT NULL DEFAULT '';
         ALTER TABLE engrams ADD COLUMN subject TEXT;
         ALTER TABLE engrams ADD COLUMN promoted_by TEXT;
         UPDATE engrams SET written_by = created_by;
         CREATE INDEX IF NOT EXISTS engrams_writes ON engrams (written_by, stored_at);
         CREATE INDEX IF NOT EXISTS engrams_subject ON engrams (project, subject, tier);",
    )?;
    let rows: Vec<(String, String, String)> = {
        let mut stmt = tx.prepare("SELECT project, id, doc FROM engrams")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    for (project, id, doc) in rows {
        let subject = serde_json::from_str::<Engram>(&doc).ok().and_then(|e| subject_key(&e));
        if subject.is_some() {
            tx.execute(
                "UPDATE engrams SET subject = ?3 WHERE project = ?1 AND id = ?2",
                params![project, id, subject],
            )?;
        }
    }
    Ok(())
}

/// Version 3 adds the change log: `changed`, the store generation of each row's last change, so a derived index
/// catches up with the rows changed since the generation it reflects (rows of version 2 count as changed at 0: an
/// index of theirs records no generation in its commit and is rebuilt whole).
fn migrate_from_2(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(
        "ALTER TABLE engrams ADD COLUMN changed INTEGER NOT NULL DEFAULT 0;
         CREATE INDEX IF NOT EXISTS engrams_changed ON engrams (changed);",
    )?;
    Ok(())
}

fn put_in(
    tx: &rusqlite::Transaction<'_>,
    engram: &Valid<Engram>,
    placement: &Placement,
    now: i64,
) -> Result<PutOutcome, StoreError> {
    let project = placement.project.as_str();
    let hash = content_hash(engram);
    // Statements are prepared once per connection: a bulk load runs them thousands of times.
    let same_content = || {
        tx.prepare_cached("SELECT id, tier, scope, run, doc FROM engrams WHERE project = ?1 AND content_hash = ?2")?
            .query_row(params![project, hash], existing_row)
            .optional()
    };
    // Ids are derived from kind, claim and sources: the same id with another scope, TTL or tags (a promoted copy,
    // say) is the same claim, and is not stored twice.
    let same_id = || {
        tx.prepare_cached("SELECT id, tier, scope, run, doc FROM engrams WHERE project = ?1 AND id = ?2")?
            .query_row(params![project, engram.id], existing_row)
            .optional()
    };
    let existing = match same_content()? {
        Some(found) => Some(found),
        None => same_id()?,
    };
    match existing {
        None => insert(tx, engram, &hash, placement, now),
        // Another run's private claim is never revived, moved or shared: this run gets a copy of its own.
        Some(row) if row.scope == "run" && row.run != placement.run => put_run_copy(tx, engram, &hash, placement, now),
        Some(row) if !row.same_claim(engram)? => {
            Err(StoreError::IdConflict { project: project.to_owned(), id: row.id })
        }
        Some(row) => settle_existing(tx, engram, row, placement, now),
    }
}

/// An engram row met by a put: its id, tier, scope, run and stored document.
struct ExistingRow {
    id: String,
    tier: String,
    scope: String,
    run: String,
    doc: String,
}

fn existing_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExistingRow> {
    Ok(ExistingRow { id: r.get(0)?, tier: r.get(1)?, scope: r.get(2)?, run: r.get(3)?, doc: r.get(4)? })
}

impl ExistingRow {
    /// Whether the row holds the claim of `engram` (kind, claim and sources; at any scope, with any id).
    fn same_claim(&self, engram: &Engram) -> Result<bool, StoreError> {
        let stored: Engram = serde_json::from_str(&self.doc)
            .map_err(|err| StoreError::Corrupt { id: self.id.clone(), message: err.to_string() })?;
        Ok(content_hash_at(&stored, "") == content_hash_at(engram, ""))
    }
}

/// A put of the claim `row` already holds (at any scope): hot, it is a duplicate; cold, it is revived in this run
/// with a fresh TTL (unless superseded). The caller checked it is the same claim: another claim under the same id is
/// refused, never dropped silently.
fn settle_existing(
    tx: &rusqlite::Transaction<'_>,
    engram: &Valid<Engram>,
    row: ExistingRow,
    placement: &Placement,
    now: i64,
) -> Result<PutOutcome, StoreError> {
    if row.tier == "hot" {
        return Ok(PutOutcome::Duplicate { id: row.id });
    }
    let written_by = writer(engram, placement);
    let n = tx.execute(
        &format!(
            "UPDATE engrams SET tier = 'hot', cold_reason = NULL, stored_at = ?3, expires_at = ?4, run = ?5,
                                written_by = ?6, changed = {NEXT_GENERATION}
             WHERE project = ?1 AND id = ?2 AND superseded_by IS NULL"
        ),
        params![placement.project, row.id, now, expires_at(engram, now), placement.run, written_by],
    )?;
    Ok(if n == 1 {
        PutOutcome::Revived { id: row.id }
    } else {
        // Superseded engrams stay cold: their replacement is what recall should find.
        PutOutcome::Duplicate { id: row.id }
    })
}

/// The id under which run `run` keeps its own copy of a claim that another run already holds privately (scope
/// `run`): `<id>~r<12 hex of blake3(run)>`. Deterministic, so the same run putting the claim again finds its copy,
/// and [`crate::memory::Memory::get_as`] finds it from the plain id.
pub fn run_copy_id(id: &str, run: &str) -> String {
    let hex = blake3::hash(run.as_bytes()).to_hex();
    format!("{id}~r{}", &hex[..12])
}

/// Stores this run's own copy of a claim another run holds privately: under [`run_copy_id`], with a content hash
/// of its own (so the project's dedup keeps both), leaving the other run's row exactly as it was.
fn put_run_copy(
    tx: &rusqlite::Transaction<'_>,
    engram: &Valid<Engram>,
    hash: &str,
    placement: &Placement,
    now: i64,
) -> Result<PutOutcome, StoreError> {
    let copy_id = run_copy_id(&engram.id, &placement.run);
    let copy_hash = blake3::hash(format!("{hash}\n{}", placement.run).as_bytes()).to_hex().to_string();
    let existing = tx
        .prepare_cached("SELECT id, tier, scope, run, doc FROM engrams WHERE project = ?1 AND id = ?2")?
        .query_row(params![placement.project, copy_id], existing_row)
        .optional()?;
    let copy = Valid::new(Engram { id: copy_id.clone(), ..(**engram).clone() })
        .map_err(|v| StoreError::Corrupt { id: copy_id.clone(), message: v.to_string() })?;
    match existing {
        None => insert(tx, &copy, &copy_hash, placement, now),
        Some(row) if !row.same_claim(engram)? => {
            Err(StoreError::IdConflict { project: placement.project.clone(), id: engram.id.clone() })
        }
        Some(row) => settle_existing(tx, &copy, row, placement, now),
    }
}

fn insert(
    tx: &rusqlite::Transaction<'_>,
    engram: &Valid<Engram>,
    hash: &str,
    placement: &Placement,
    now: i64,
) -> Result<PutOutcome, StoreError> {
    let doc = serde_json::to_string(&**engram)
        .map_err(|err| StoreError::Corrupt { id: engram.id.clone(), message: err.to_string() })?;
    tx.prepare_cached(&format!(
        "INSERT INTO engrams (id, content_hash, project, scope, kind, created_by, stored_at, expires_at,
                                  confidence, tier, doc, run, written_by, subject, changed)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'hot', ?10, ?11, ?12, ?13, {NEXT_GENERATION})"
    ))?
    .execute(params![
        engram.id,
        hash,
        placement.project,
        engram.scope.as_str(),
        engram.kind.as_str(),
        engram.provenance.created_by,
        now,
        expires_at(engram, now),
        engram.confidence,
        doc,
        placement.run,
        writer(engram, placement),
        subject_key(engram),
    ])?;
    Ok(PutOutcome::Stored { id: engram.id.clone() })
}

/// Who is recorded as writing: the placement's writer, else the engram's creator.
fn writer<'a>(engram: &'a Engram, placement: &'a Placement) -> &'a str {
    if placement.written_by.is_empty() { &engram.provenance.created_by } else { &placement.written_by }
}

fn expires_at(engram: &Engram, now: i64) -> i64 {
    now.saturating_add(i64::try_from(engram.ttl.duration().as_secs()).unwrap_or(i64::MAX))
}

fn bump_generation(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<usize> {
    tx.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'", [])
}

const SELECT_STORED: &str = "SELECT id, doc, project, tier, cold_reason, stored_at, expires_at, superseded_by, \
     supersedes, run, written_by, promoted_by FROM engrams";

struct RawRow {
    id: String,
    doc: String,
    project: String,
    tier: String,
    cold_reason: Option<String>,
    stored_at: i64,
    expires_at: i64,
    superseded_by: Option<String>,
    supersedes: Option<String>,
    run: String,
    written_by: String,
    promoted_by: Option<String>,
}

fn raw_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        id: r.get(0)?,
        doc: r.get(1)?,
        project: r.get(2)?,
        tier: r.get(3)?,
        cold_reason: r.get(4)?,
        stored_at: r.get(5)?,
        expires_at: r.get(6)?,
        superseded_by: r.get(7)?,
        supersedes: r.get(8)?,
        run: r.get(9)?,
        written_by: r.get(10)?,
        promoted_by: r.get(11)?,
    })
}

impl Store {
    /// Rows are re-validated on the way out (once per distinct text): a hand-edited or damaged row is an error, never
    /// an invalid engram.
    fn decode_row(&self, row: RawRow) -> Result<Stored, StoreError> {
        self.decode(row, true)
    }

    /// [`Store::decode_row`] without keeping the row in the cache.
    fn decode_row_once(&self, row: RawRow) -> Result<Stored, StoreError> {
        self.decode(row, false)
    }

    fn decode(&self, row: RawRow, keep: bool) -> Result<Stored, StoreError> {
        let cached = self.decoded.borrow().get(row.doc.as_str()).cloned();
        let engram = match cached {
            Some(engram) => engram,
            None => {
                let engram = Valid::<Engram>::from_json(&row.doc)
                    .map_err(|err| StoreError::Corrupt { id: row.id.clone(), message: err.to_string() })?
                    .into_inner();
                if keep {
                    let mut decoded = self.decoded.borrow_mut();
                    if decoded.len() >= DECODED_CAPACITY {
                        decoded.clear();
                    }
                    decoded.insert(row.doc.as_str().into(), engram.clone());
                }
                engram
            }
        };
        Ok(Stored {
            engram,
            project: row.project,
            run: row.run,
            written_by: row.written_by,
            promoted_by: row.promoted_by,
            tier: if row.tier == "hot" { Tier::Hot } else { Tier::Cold },
            cold_reason: row.cold_reason,
            stored_at: row.stored_at,
            expires_at: row.expires_at,
            superseded_by: row.superseded_by,
            supersedes: row.supersedes,
        })
    }
}

/// Identity of an engram's content for dedup: kind, scope, claim and the sources it cites (without digests, in any
/// order).
pub fn content_hash(engram: &Engram) -> String {
    content_hash_at(engram, engram.scope.as_str())
}

/// [`content_hash`] of the engram as if it had scope `scope` (a row of the same claim at another scope).
fn content_hash_at(engram: &Engram, scope: &str) -> String {
    let mut pointers: Vec<String> = engram
        .pointers
        .iter()
        .map(|p| Pointer::new(p.ty(), p.reference(), p.span()).map_or_else(|_| p.to_string(), |p| p.to_string()))
        .collect();
    pointers.sort();
    let mut hasher = blake3::Hasher::new();
    for part in [engram.kind.as_str(), scope, engram.claim.trim()] {
        hasher.update(part.as_bytes());
        hasher.update(b"\n");
    }
    for pointer in pointers {
        hasher.update(pointer.as_bytes());
        hasher.update(b"\n");
    }
    hasher.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use less_contract::Ttl;
    use less_contract::{EngramKind, Scope};

    fn engram(claim: &str, ttl: Ttl) -> Valid<Engram> {
        Engram::builder(EngramKind::Fact, claim, "agent")
            .pointer(Pointer::parse("repo:src/config.rs#L13-L14").expect("pointer"))
            .scope(Scope::Project)
            .ttl(ttl)
            .created_at("2026-01-01T00:00:00Z")
            .build()
            .expect("engram")
    }

    #[test]
    fn a_put_is_readable_after_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = engram("The dev server listens on 5173.", Ttl::days(7));
        {
            let mut store = Store::open(dir.path()).expect("open");
            assert_eq!(store.put(&e, "kelp", 1000).expect("put"), PutOutcome::Stored { id: e.id.clone() });
        }
        let store = Store::open(dir.path()).expect("reopen");
        let stored = store.get("kelp", &e.id).expect("get").expect("present");
        assert!(store.get("other", &e.id).expect("get").is_none(), "another project does not see it");
        assert_eq!(stored.engram, *keys::with_stored_keys(&e), "stored with the hash keys of its content");
        assert!(stored.engram.hash_keys.as_ref().is_some_and(|k| !k.is_empty()));
        assert_eq!((stored.project.as_str(), stored.tier, stored.expires_at), ("kelp", Tier::Hot, 1000 + 7 * 86400));
    }

    #[test]
    fn same_content_is_stored_once_per_project() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(dir.path()).expect("open");
        let e = engram("Migrations run before seeding.", Ttl::days(1));
        store.put(&e, "kelp", 0).expect("put");
        assert_eq!(store.put(&e, "kelp", 5).expect("again"), PutOutcome::Duplicate { id: e.id.clone() });
        assert!(matches!(store.put(&e, "other", 5).expect("other project"), PutOutcome::Stored { .. }));
        assert_eq!(store.stats().expect("stats").hot, 2);
    }

    #[test]
    fn expired_engrams_go_cold_stay_readable_and_revive_on_a_new_put() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(dir.path()).expect("open");
        let short = engram("Cache TTL is 300 s.", Ttl::hours(1));
        let long = engram("Port is 5173.", Ttl::days(7));
        store.put(&short, "", 0).expect("put");
        store.put(&long, "", 0).expect("put");
        let generation = store.generation().expect("generation");
        assert_eq!(store.evict_expired(3600).expect("evict"), vec![(String::new(), short.id.clone())]);
        assert_eq!(store.generation().expect("generation"), generation + 1, "changes of the hot tier are counted");
        let cold = store.get("", &short.id).expect("get").expect("still there");
        assert_eq!((cold.tier, cold.cold_reason.as_deref()), (Tier::Cold, Some("expired")));
        assert_eq!(store.all(Tier::Hot).expect("hot").len(), 1);
        assert_eq!(store.put(&short, "", 4000).expect("revive"), PutOutcome::Revived { id: short.id.clone() });
        assert_eq!(store.get("", &short.id).expect("get").expect("there").tier, Tier::Hot);
        assert!(store.evict("", &long.id).expect("evict"));
        assert!(!store.evict("", &long.id).expect("already cold"));
    }

    #[test]
    fn supersession_links_both_ways_and_leaves_recall() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(dir.path()).expect("open");
        let old = engram("The deploy target is alpha-01.", Ttl::days(7));
        let new = engram("The deploy target is now beta-02.", Ttl::days(7));
        store.put(&old, "", 0).expect("put");
        store.put(&new, "", 1).expect("put");
        assert!(store.supersede("", &old.id, &new.id).expect("supersede"));
        let old_row = store.get("", &old.id).expect("get").expect("old");
        let new_row = store.get("", &new.id).expect("get").expect("new");
        assert_eq!((old_row.tier, old_row.superseded_by.as_deref()), (Tier::Cold, Some(new.id.as_str())));
        assert_eq!(new_row.supersedes.as_deref(), Some(old.id.as_str()));
        assert!(
            !store.supersede("", &old.id, "eg_missing").expect("missing"),
            "nothing changes when one side is missing"
        );
        assert_eq!(store.get("", &old.id).expect("get").expect("old").superseded_by.as_deref(), Some(new.id.as_str()));
    }

    #[test]
    fn a_damaged_row_is_an_error_not_an_engram() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(dir.path()).expect("open");
        let e = engram("Port is 5173.", Ttl::days(7));
        store.put(&e, "", 0).expect("put");
        assert_eq!(
            store.get("", &e.id).expect("get").expect("there").engram,
            *keys::with_stored_keys(&e),
            "read once: decoded and cached"
        );
        store.conn.execute("UPDATE engrams SET doc = '{\"claim\": 1}'", []).expect("damage");
        assert!(matches!(store.get("", &e.id), Err(StoreError::Corrupt { .. })), "a changed text is validated again");
        // A hand edit that still parses but breaks a rule (a claim over 500 characters) is refused too.
        let long = serde_json::to_string(&Engram { claim: "x".repeat(501), ..(*e).clone() }).expect("json");
        store.conn.execute("UPDATE engrams SET doc = ?1", [long]).expect("edit");
        assert!(matches!(store.get("", &e.id), Err(StoreError::Corrupt { .. })));
    }
}
