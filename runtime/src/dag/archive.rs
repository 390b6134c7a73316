//! The archive: raw messages (immutable) and the summary DAG over them, in the memory's SQLite file.
//!
//! Raw messages are written once and never changed: triggers make SQLite itself refuse an `UPDATE` or `DELETE` on
//! them. Everything else here is derived from them and may be rebuilt: summary nodes, their edges (ordered children,
//! source messages), the segments that say which part of which session became which node (or was skipped by the
//! significance gate), and an event log (skips, escalations, backfills).
//!
//! Useful for: durable storage and lookups by id, session, node and time.
//! Not for: deciding what to summarize (`dag/mod.rs`) or how (`dag/summarize.rs`).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::Serialize;

use crate::memory::StoreError;

/// Version of the archive's tables (kept in the memory store's `meta` table as `archive_version`).
const ARCHIVE_VERSION: i64 = 1;

/// Per-message framing a chat prompt pays beside the content (role, separators): a message's token count is its
/// content's tokens plus this, so that even an empty message has a cost and a summary can be smaller than it.
pub const MESSAGE_FRAMING_TOKENS: u32 = 4;

/// A message to archive.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, Serialize)]
pub struct NewMessage {
    /// `user`, `assistant`, `system`, `tool`, or an agent's role.
    pub role: String,
    /// The text, verbatim.
    pub content: String,
    /// Who spoke (an agent id, a user name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When (unix seconds); the archive's clock when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
}

/// A stored raw message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RawMessage {
    /// Order of arrival in the whole archive.
    pub seq: i64,
    /// `m-` and 12 hex digits of the dedup key: what `sam:msg:<id>` pointers name.
    pub id: String,
    /// The project.
    pub project: String,
    /// The session.
    pub session: String,
    /// Position in the session, from 0.
    pub turn: i64,
    /// The role.
    pub role: String,
    /// Who spoke.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When (unix seconds).
    pub at: i64,
    /// The text, verbatim.
    pub content: String,
    /// Content tokens plus [`MESSAGE_FRAMING_TOKENS`].
    pub tokens: u32,
}

/// The level of a summary node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Depth 0: one session (or a later part of one).
    Session,
    /// Depth 1: consecutive sessions of a project.
    Arc,
    /// Depth 2: consecutive arcs of a project.
    Epoch,
}

impl NodeKind {
    /// The depth.
    pub fn depth(self) -> u32 {
        match self {
            NodeKind::Session => 0,
            NodeKind::Arc => 1,
            NodeKind::Epoch => 2,
        }
    }

    /// `session`, `arc`, `epoch`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Session => "session",
            NodeKind::Arc => "arc",
            NodeKind::Epoch => "epoch",
        }
    }

    fn parse(text: &str) -> Option<NodeKind> {
        match text {
            "session" => Some(NodeKind::Session),
            "arc" => Some(NodeKind::Arc),
            "epoch" => Some(NodeKind::Epoch),
            _ => None,
        }
    }

    /// The id prefix (`S-`, `A-`, `E-`).
    fn prefix(self) -> &'static str {
        match self {
            NodeKind::Session => "S-",
            NodeKind::Arc => "A-",
            NodeKind::Epoch => "E-",
        }
    }
}

/// A summary node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// `S-`/`A-`/`E-` and 12 hex digits derived from what it covers (the same cover gets the same id).
    pub id: String,
    /// The project.
    pub project: String,
    /// Session, arc or epoch.
    pub kind: NodeKind,
    /// 0, 1, 2.
    pub depth: u32,
    /// The session (session nodes only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The summary text.
    pub content: String,
    /// Tokens of `content`.
    pub token_count: u32,
    /// Tokens of what it summarizes (its messages' or child nodes' token counts).
    pub input_tokens: u32,
    /// Earliest time covered (unix seconds).
    pub earliest_at: i64,
    /// Latest time covered.
    pub latest_at: i64,
    /// Escalation level that produced it (1 normal, 2 aggressive, 3 deterministic truncation).
    pub level: u8,
    /// 0.7, 0.5 or 0.3 by level.
    pub confidence: f64,
    /// Which summarizer wrote it.
    pub summarizer: String,
    /// First archive sequence number covered (orders nodes of a project).
    pub first_seq: i64,
}

/// A node to insert: its fields and what it covers.
#[derive(Debug, Clone)]
pub(crate) struct NewNode {
    pub node: Node,
    /// Child node ids in order (arcs, epochs).
    pub children: Vec<String>,
    /// Source messages in order (sessions).
    pub messages: Vec<i64>,
}

/// A processed part of a session: which turns, and what became of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    /// The project.
    pub project: String,
    /// The session.
    pub session: String,
    /// First turn covered.
    pub first_turn: i64,
    /// Last turn covered.
    pub last_turn: i64,
    /// `summarized`, `skipped` or `backfilled`.
    pub outcome: String,
    /// The session node (summarized, backfilled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The significance gate's findings (JSON).
    pub gate: serde_json::Value,
}

/// The kinds of event the archive logs (`lessrt dag log --kind`).
pub const EVENT_KINDS: [&str; 7] = [
    "session_skipped",
    "session_summarized",
    "arc_built",
    "epoch_built",
    "escalated",
    "backfilled",
    "summarize_failed",
];

/// One entry of the archive's event log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DagEvent {
    /// When (unix seconds).
    pub at: i64,
    /// One of [`EVENT_KINDS`].
    pub kind: String,
    /// Details.
    pub detail: serde_json::Value,
}

/// Counts for `lessrt dag show` and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ArchiveStats {
    /// Raw messages.
    pub messages: u64,
    /// Sessions seen.
    pub sessions: u64,
    /// Session nodes.
    pub session_nodes: u64,
    /// Arc nodes.
    pub arcs: u64,
    /// Epoch nodes.
    pub epochs: u64,
    /// Session parts the gate skipped and no backfill summarized yet.
    pub skipped: u64,
    /// Messages of ended sessions not yet in a node or a skipped segment.
    pub pending_messages: u64,
}

/// The archive over one SQLite file (the memory store's).
pub struct Archive {
    conn: Connection,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive").field("path", &self.conn.path()).finish()
    }
}

/// The id a node covering `cover` (message or child ids, in order) gets.
pub(crate) fn node_id(kind: NodeKind, project: &str, cover: &[String]) -> String {
    let mut parts: Vec<&str> = vec![kind.as_str(), project];
    parts.extend(cover.iter().map(String::as_str));
    format!("{}{}", kind.prefix(), &hex_key(&parts)[..12])
}

/// Opens the SQLite file `path` to read only, leaving the directory as it found it. A file no writer has open (it
/// has no `-wal` beside it) is opened immutable, so SQLite does not make its `-wal` and `-shm` files either; one that
/// a writer has open is read through the writer's WAL.
pub(crate) fn open_sqlite_read_only(path: &Path) -> Result<Connection, rusqlite::Error> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let text = path.to_string_lossy();
    // A URI's path: `%`, `?` and `#` would be read as escapes, the query and the fragment.
    let escaped = text.replace('%', "%25").replace('?', "%3f").replace('#', "%23");
    let uri = if Path::new(&wal).exists() {
        format!("file:{escaped}?mode=ro")
    } else {
        format!("file:{escaped}?immutable=1")
    };
    Connection::open_with_flags(uri, flags)
}

impl Archive {
    /// Opens the archive in `dir/memory.sqlite3` to read only: nothing is created, migrated or written, and a
    /// store without one is an error (a viewer of a run, `lessrt serve`, must leave the store as it found it).
    pub fn open_read_only(dir: &Path) -> Result<Archive, StoreError> {
        let path = dir.join(crate::layout::MEMORY_DB);
        if !path.is_file() {
            return Err(StoreError::Io {
                path,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no archive in this store"),
            });
        }
        let conn = open_sqlite_read_only(&path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        Ok(Archive { conn })
    }

    /// Opens (creating the tables if needed) the archive in `dir/memory.sqlite3`, beside the engrams.
    pub fn open(dir: &Path) -> Result<Archive, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io { path: dir.to_owned(), source })?;
        let conn = crate::files::open_sqlite(&dir.join(crate::layout::MEMORY_DB))?;
        // Wait for other connections to the same file (the archive and the engrams share it) instead of failing.
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS dag_messages (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT,
                 id TEXT NOT NULL UNIQUE,
                 dedup_key TEXT NOT NULL UNIQUE,
                 project TEXT NOT NULL,
                 session TEXT NOT NULL,
                 turn INTEGER NOT NULL,
                 role TEXT NOT NULL,
                 name TEXT,
                 at INTEGER NOT NULL,
                 content TEXT NOT NULL,
                 tokens INTEGER NOT NULL
             );
             CREATE UNIQUE INDEX IF NOT EXISTS dag_messages_turn ON dag_messages (project, session, turn);
             CREATE TRIGGER IF NOT EXISTS dag_messages_no_update BEFORE UPDATE ON dag_messages
                 BEGIN SELECT RAISE(ABORT, 'raw messages are immutable'); END;
             CREATE TRIGGER IF NOT EXISTS dag_messages_no_delete BEFORE DELETE ON dag_messages
                 BEGIN SELECT RAISE(ABORT, 'raw messages are never deleted'); END;
             CREATE TABLE IF NOT EXISTS dag_sessions (
                 project TEXT NOT NULL,
                 session TEXT NOT NULL,
                 ended INTEGER NOT NULL DEFAULT 0,
                 PRIMARY KEY (project, session)
             );
             CREATE TABLE IF NOT EXISTS dag_nodes (
                 id TEXT PRIMARY KEY,
                 project TEXT NOT NULL,
                 kind TEXT NOT NULL CHECK (kind IN ('session', 'arc', 'epoch')),
                 depth INTEGER NOT NULL,
                 session TEXT,
                 content TEXT NOT NULL,
                 token_count INTEGER NOT NULL,
                 input_tokens INTEGER NOT NULL,
                 earliest_at INTEGER NOT NULL,
                 latest_at INTEGER NOT NULL,
                 level INTEGER NOT NULL,
                 confidence REAL NOT NULL,
                 summarizer TEXT NOT NULL,
                 first_seq INTEGER NOT NULL
             );
             CREATE INDEX IF NOT EXISTS dag_nodes_project ON dag_nodes (project, kind, first_seq);
             CREATE TABLE IF NOT EXISTS dag_children (
                 parent TEXT NOT NULL,
                 ordinal INTEGER NOT NULL,
                 child TEXT NOT NULL UNIQUE,
                 PRIMARY KEY (parent, ordinal)
             );
             CREATE TABLE IF NOT EXISTS dag_node_messages (
                 node TEXT NOT NULL,
                 ordinal INTEGER NOT NULL,
                 message INTEGER NOT NULL UNIQUE,
                 PRIMARY KEY (node, ordinal)
             );
             CREATE TABLE IF NOT EXISTS dag_segments (
                 project TEXT NOT NULL,
                 session TEXT NOT NULL,
                 first_turn INTEGER NOT NULL,
                 last_turn INTEGER NOT NULL,
                 outcome TEXT NOT NULL CHECK (outcome IN ('summarized', 'skipped', 'backfilled')),
                 node TEXT,
                 gate TEXT NOT NULL,
                 PRIMARY KEY (project, session, first_turn)
             );
             CREATE TABLE IF NOT EXISTS dag_events (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT,
                 at INTEGER NOT NULL,
                 kind TEXT NOT NULL,
                 detail TEXT NOT NULL
             );",
        )?;
        let found: Option<String> =
            conn.query_row("SELECT value FROM meta WHERE key = 'archive_version'", [], |r| r.get(0)).optional()?;
        match found.map(|v| v.parse::<i64>().unwrap_or(-1)) {
            None => {
                conn.execute("INSERT INTO meta (key, value) VALUES ('archive_version', ?1)", [ARCHIVE_VERSION])?;
            }
            Some(ARCHIVE_VERSION) => {}
            Some(found) => return Err(StoreError::Version { found }),
        }
        Ok(Archive { conn })
    }

    /// Appends `messages` to `session` of `project` in one transaction; a message already archived (same dedup key:
    /// project, session, role, name, given time, content and its occurrence among equal messages of the batch) is
    /// not stored twice, so ingesting the same transcript again changes nothing. Returns the messages stored now.
    pub fn append(
        &mut self,
        project: &str,
        session: &str,
        messages: &[NewMessage],
        now: i64,
        count: &dyn Fn(&str) -> u32,
    ) -> Result<Vec<RawMessage>, StoreError> {
        self.append_then(project, session, messages, now, count, false)
    }

    /// [`Archive::append`] and [`Archive::end_session`] in one transaction: a process killed on the way leaves
    /// either nothing or the whole transcript in an ended session, never messages in a session that no build will
    /// summarize because nobody ends it.
    pub fn append_and_end(
        &mut self,
        project: &str,
        session: &str,
        messages: &[NewMessage],
        now: i64,
        count: &dyn Fn(&str) -> u32,
    ) -> Result<Vec<RawMessage>, StoreError> {
        self.append_then(project, session, messages, now, count, true)
    }

    fn append_then(
        &mut self,
        project: &str,
        session: &str,
        messages: &[NewMessage],
        now: i64,
        count: &dyn Fn(&str) -> u32,
        end: bool,
    ) -> Result<Vec<RawMessage>, StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO dag_sessions (project, session, ended) VALUES (?1, ?2, ?3)
             ON CONFLICT (project, session) DO UPDATE SET ended = MAX(ended, excluded.ended)",
            params![project, session, end],
        )?;
        let mut next_turn: i64 = tx.query_row(
            "SELECT COALESCE(MAX(turn) + 1, 0) FROM dag_messages WHERE project = ?1 AND session = ?2",
            params![project, session],
            |r| r.get(0),
        )?;
        let mut seen: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut stored = Vec::new();
        {
            let mut insert = tx.prepare_cached(
                "INSERT OR IGNORE INTO dag_messages
                     (id, dedup_key, project, session, turn, role, name, at, content, tokens)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            for message in messages {
                let at_text = message.at.map(|at| at.to_string()).unwrap_or_default();
                let name = message.name.as_deref().unwrap_or("");
                let base = hex_key(&[project, session, &message.role, name, &at_text, &message.content]);
                let occurrence = seen.entry(base.clone()).or_insert(0);
                let key = hex_key(&[&base, &occurrence.to_string()]);
                *occurrence += 1;
                let id = format!("m-{}", &key[..12]);
                let tokens = count(&message.content) + MESSAGE_FRAMING_TOKENS;
                let at = message.at.unwrap_or(now);
                let n = insert.execute(params![
                    id,
                    key,
                    project,
                    session,
                    next_turn,
                    message.role,
                    message.name,
                    at,
                    message.content,
                    tokens
                ])?;
                if n == 1 {
                    stored.push(RawMessage {
                        seq: tx.last_insert_rowid(),
                        id,
                        project: project.to_owned(),
                        session: session.to_owned(),
                        turn: next_turn,
                        role: message.role.clone(),
                        name: message.name.clone(),
                        at,
                        content: message.content.clone(),
                        tokens,
                    });
                    next_turn += 1;
                }
            }
        }
        tx.commit()?;
        Ok(stored)
    }

    /// Marks `session` ended: its messages may now be summarized (more may still come; they form a later part).
    pub fn end_session(&mut self, project: &str, session: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO dag_sessions (project, session, ended) VALUES (?1, ?2, 1)
             ON CONFLICT (project, session) DO UPDATE SET ended = 1",
            params![project, session],
        )?;
        Ok(())
    }

    /// Ended sessions with messages past their last segment: (project, session, first pending turn).
    pub fn pending_sessions(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT s.project, s.session,
                    COALESCE((SELECT MAX(g.last_turn) + 1 FROM dag_segments g
                              WHERE g.project = s.project AND g.session = s.session), 0) AS next
             FROM dag_sessions s
             WHERE s.ended = 1
               AND EXISTS (SELECT 1 FROM dag_messages m WHERE m.project = s.project AND m.session = s.session
                           AND m.turn >= COALESCE((SELECT MAX(g.last_turn) + 1 FROM dag_segments g
                                                   WHERE g.project = s.project AND g.session = s.session), 0))
             ORDER BY (SELECT MIN(m.seq) FROM dag_messages m WHERE m.project = s.project AND m.session = s.session)",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Messages of `session` from turn `from` on, in order.
    pub fn session_messages(&self, project: &str, session: &str, from: i64) -> Result<Vec<RawMessage>, StoreError> {
        self.messages_where(
            "WHERE project = ?1 AND session = ?2 AND turn >= ?3 ORDER BY turn",
            params![project, session, from],
        )
    }

    /// Messages of `session` in turns `first..=last`.
    pub fn session_range(
        &self,
        project: &str,
        session: &str,
        first: i64,
        last: i64,
    ) -> Result<Vec<RawMessage>, StoreError> {
        self.messages_where(
            "WHERE project = ?1 AND session = ?2 AND turn BETWEEN ?3 AND ?4 ORDER BY turn",
            params![project, session, first, last],
        )
    }

    /// The message `id` (`m-…`).
    pub fn message(&self, id: &str) -> Result<Option<RawMessage>, StoreError> {
        Ok(self.messages_where("WHERE id = ?1", params![id])?.pop())
    }

    /// Messages by id, in the order asked (unknown ids left out).
    pub fn messages_by_id(&self, ids: &[String]) -> Result<Vec<RawMessage>, StoreError> {
        let json = serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned());
        let mut found = self.messages_where("WHERE id IN (SELECT value FROM json_each(?1))", params![json])?;
        let order: std::collections::HashMap<&str, usize> =
            ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
        found.sort_by_key(|m| order.get(m.id.as_str()).copied().unwrap_or(usize::MAX));
        Ok(found)
    }

    /// The latest `n` messages of `project` before archive position `before`, newest first.
    pub fn recent_messages(&self, project: &str, before: i64, n: usize) -> Result<Vec<RawMessage>, StoreError> {
        self.messages_where(
            "WHERE project = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
            params![project, before, n as i64],
        )
    }

    /// Every message, in archive order (tests, rebuilding derived indexes).
    pub fn all_messages(&self) -> Result<Vec<RawMessage>, StoreError> {
        self.messages_where("ORDER BY seq", [])
    }

    fn messages_where(&self, clause: &str, params: impl rusqlite::Params) -> Result<Vec<RawMessage>, StoreError> {
        let sql = format!(
            "SELECT seq, id, project, session, turn, role, name, at, content, tokens FROM dag_messages {clause}"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params, |r| {
            Ok(RawMessage {
                seq: r.get(0)?,
                id: r.get(1)?,
                project: r.get(2)?,
                session: r.get(3)?,
                turn: r.get(4)?,
                role: r.get(5)?,
                name: r.get(6)?,
                at: r.get(7)?,
                content: r.get(8)?,
                tokens: r.get(9)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records a segment and, when it was summarized, its session node, in one transaction.
    pub(crate) fn insert_segment(&mut self, segment: &Segment, node: Option<&NewNode>) -> Result<(), StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if let Some(node) = node {
            insert_node(&tx, node)?;
        }
        tx.execute(
            "INSERT INTO dag_segments (project, session, first_turn, last_turn, outcome, node, gate)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (project, session, first_turn) DO UPDATE SET outcome = ?5, node = ?6, gate = ?7",
            params![
                segment.project,
                segment.session,
                segment.first_turn,
                segment.last_turn,
                segment.outcome,
                segment.node,
                segment.gate.to_string()
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Inserts an arc or epoch node with its child edges, in one transaction.
    pub(crate) fn insert_node(&mut self, node: &NewNode) -> Result<(), StoreError> {
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        insert_node(&tx, node)?;
        tx.commit()?;
        Ok(())
    }

    /// Segments the gate skipped and no backfill summarized, oldest first; only `session` when given.
    pub fn skipped_segments(&self, session: Option<&str>) -> Result<Vec<Segment>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT g.project, g.session, g.first_turn, g.last_turn, g.outcome, g.node, g.gate FROM dag_segments g
             WHERE g.outcome = 'skipped' AND (?1 IS NULL OR g.session = ?1)
             ORDER BY (SELECT MIN(m.seq) FROM dag_messages m
                       WHERE m.project = g.project AND m.session = g.session AND m.turn = g.first_turn)",
        )?;
        let rows = stmt.query_map(params![session], segment_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every segment of `session`.
    pub fn segments_of(&self, project: &str, session: &str) -> Result<Vec<Segment>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT project, session, first_turn, last_turn, outcome, node, gate FROM dag_segments
             WHERE project = ?1 AND session = ?2 ORDER BY first_turn",
        )?;
        let rows = stmt.query_map(params![project, session], segment_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The node `id`.
    pub fn node(&self, id: &str) -> Result<Option<Node>, StoreError> {
        Ok(self.nodes_where("WHERE id = ?1", params![id])?.pop())
    }

    /// Nodes of `kind` in `project` that no node above holds yet, oldest first.
    pub fn orphans(&self, project: &str, kind: NodeKind) -> Result<Vec<Node>, StoreError> {
        self.nodes_where(
            "WHERE project = ?1 AND kind = ?2 AND id NOT IN (SELECT child FROM dag_children) ORDER BY first_seq, id",
            params![project, kind.as_str()],
        )
    }

    /// Projects with nodes or messages.
    pub fn projects(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare_cached("SELECT DISTINCT project FROM dag_sessions ORDER BY project")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The top nodes (held by no node above), of `project` when given: epochs first, then arcs, then sessions, each
    /// oldest first.
    pub fn tops(&self, project: Option<&str>) -> Result<Vec<Node>, StoreError> {
        self.nodes_where(
            "WHERE (?1 IS NULL OR project = ?1) AND id NOT IN (SELECT child FROM dag_children)
             ORDER BY project, depth DESC, first_seq, id",
            params![project],
        )
    }

    /// Every node (tests, `dag show --json`).
    pub fn all_nodes(&self) -> Result<Vec<Node>, StoreError> {
        self.nodes_where("ORDER BY project, depth DESC, first_seq, id", [])
    }

    /// The child nodes of `id`, in order.
    pub fn children(&self, id: &str) -> Result<Vec<Node>, StoreError> {
        self.nodes_where(
            "JOIN dag_children c ON c.child = dag_nodes.id WHERE c.parent = ?1 ORDER BY c.ordinal",
            params![id],
        )
    }

    /// The node holding `id` (a node), if any.
    pub fn parent(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.conn.query_row("SELECT parent FROM dag_children WHERE child = ?1", [id], |r| r.get(0)).optional()?)
    }

    /// The session node holding message `id`, if any.
    pub fn node_of_message(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT nm.node FROM dag_node_messages nm JOIN dag_messages m ON m.seq = nm.message WHERE m.id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The source messages of session node `id`, in order.
    pub fn node_messages(&self, id: &str) -> Result<Vec<RawMessage>, StoreError> {
        self.messages_where(
            "JOIN dag_node_messages nm ON nm.message = dag_messages.seq WHERE nm.node = ?1 ORDER BY nm.ordinal",
            params![id],
        )
    }

    fn nodes_where(&self, clause: &str, params: impl rusqlite::Params) -> Result<Vec<Node>, StoreError> {
        let sql = format!(
            "SELECT dag_nodes.id, project, kind, depth, session, content, token_count, input_tokens, earliest_at,
                    latest_at, level, confidence, summarizer, first_seq FROM dag_nodes {clause}"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params, |r| {
            let kind: String = r.get(2)?;
            Ok(Node {
                id: r.get(0)?,
                project: r.get(1)?,
                kind: NodeKind::parse(&kind).unwrap_or(NodeKind::Session),
                depth: r.get(3)?,
                session: r.get(4)?,
                content: r.get(5)?,
                token_count: r.get(6)?,
                input_tokens: r.get(7)?,
                earliest_at: r.get(8)?,
                latest_at: r.get(9)?,
                level: r.get(10)?,
                confidence: r.get(11)?,
                summarizer: r.get(12)?,
                first_seq: r.get(13)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Appends to the event log.
    pub fn log(&self, at: i64, kind: &str, detail: &serde_json::Value) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO dag_events (at, kind, detail) VALUES (?1, ?2, ?3)",
            params![at, kind, detail.to_string()],
        )?;
        Ok(())
    }

    /// The event log, oldest first; of `kind` when given.
    pub fn events(&self, kind: Option<&str>) -> Result<Vec<DagEvent>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT at, kind, detail FROM dag_events WHERE (?1 IS NULL OR kind = ?1) ORDER BY seq")?;
        let rows = stmt.query_map(params![kind], |r| {
            let detail: String = r.get(2)?;
            Ok(DagEvent {
                at: r.get(0)?,
                kind: r.get(1)?,
                detail: serde_json::from_str(&detail).unwrap_or(serde_json::Value::Null),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Counts.
    pub fn stats(&self) -> Result<ArchiveStats, StoreError> {
        let one = |sql: &str| -> Result<u64, StoreError> {
            Ok(self.conn.query_row(sql, [], |r| r.get::<_, i64>(0))?.max(0) as u64)
        };
        Ok(ArchiveStats {
            messages: one("SELECT COUNT(*) FROM dag_messages")?,
            sessions: one("SELECT COUNT(*) FROM dag_sessions")?,
            session_nodes: one("SELECT COUNT(*) FROM dag_nodes WHERE kind = 'session'")?,
            arcs: one("SELECT COUNT(*) FROM dag_nodes WHERE kind = 'arc'")?,
            epochs: one("SELECT COUNT(*) FROM dag_nodes WHERE kind = 'epoch'")?,
            skipped: one("SELECT COUNT(*) FROM dag_segments WHERE outcome = 'skipped'")?,
            pending_messages: one("SELECT COUNT(*) FROM dag_messages m JOIN dag_sessions s
                     ON s.project = m.project AND s.session = m.session AND s.ended = 1
                 WHERE m.turn >= COALESCE((SELECT MAX(g.last_turn) + 1 FROM dag_segments g
                                           WHERE g.project = m.project AND g.session = m.session), 0)")?,
        })
    }

    /// Ids of the messages whose text contains `needle` (an engram id, say), in order.
    pub fn messages_mentioning(&self, needle: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt =
            self.conn.prepare_cached("SELECT id FROM dag_messages WHERE instr(content, ?1) > 0 ORDER BY seq")?;
        let rows = stmt.query_map([needle], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Messages after archive position `seq`, in order (catching up a derived index).
    pub fn messages_after(&self, seq: i64) -> Result<Vec<RawMessage>, StoreError> {
        self.messages_where("WHERE seq > ?1 ORDER BY seq", params![seq])
    }

    /// Claims of the latest `limit` hot engrams of `project` in the memory store beside the archive (none when the
    /// store was never opened here).
    pub fn known_claims(&self, project: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let has_engrams: bool = self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'engrams')",
            [],
            |r| r.get(0),
        )?;
        if !has_engrams {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT json_extract(doc, '$.claim') FROM engrams WHERE project = ?1 AND tier = 'hot'
             ORDER BY stored_at DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![project, limit as i64], |r| r.get::<_, Option<String>>(0))?;
        Ok(rows.filter_map(|r| r.transpose()).collect::<Result<_, _>>()?)
    }
}

fn hex_key(parts: &[&str]) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update(b"\x1f");
    }
    hasher.finalize().to_hex().to_string()
}

fn segment_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Segment> {
    let gate: String = r.get(6)?;
    Ok(Segment {
        project: r.get(0)?,
        session: r.get(1)?,
        first_turn: r.get(2)?,
        last_turn: r.get(3)?,
        outcome: r.get(4)?,
        node: r.get(5)?,
        gate: serde_json::from_str(&gate).unwrap_or(serde_json::Value::Null),
    })
}

fn insert_node(tx: &Transaction<'_>, new: &NewNode) -> Result<(), StoreError> {
    let node = &new.node;
    tx.execute(
        "INSERT INTO dag_nodes (id, project, kind, depth, session, content, token_count, input_tokens, earliest_at,
                                latest_at, level, confidence, summarizer, first_seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            node.id,
            node.project,
            node.kind.as_str(),
            node.depth,
            node.session,
            node.content,
            node.token_count,
            node.input_tokens,
            node.earliest_at,
            node.latest_at,
            node.level,
            node.confidence,
            node.summarizer,
            node.first_seq
        ],
    )?;
    for (ordinal, child) in new.children.iter().enumerate() {
        tx.execute(
            "INSERT INTO dag_children (parent, ordinal, child) VALUES (?1, ?2, ?3)",
            params![node.id, ordinal as i64, child],
        )?;
    }
    for (ordinal, message) in new.messages.iter().enumerate() {
        tx.execute(
            "INSERT INTO dag_node_messages (node, ordinal, message) VALUES (?1, ?2, ?3)",
            params![node.id, ordinal as i64, message],
        )?;
    }
    Ok(())
}
