//! The coordination ledger (in a desk's `desk.sqlite`, and in a run's `coord.sqlite`): claims on surfaces with a collision gate, an append-only decision log,
//! and conflict records.
//!
//! A **claim** says that an agent will change some surfaces (workspace paths or globs: `src/run/**`) for a task,
//! for a while (its TTL). A claim whose surfaces share a path with a live claim of another agent of the same
//! project is refused (`LESS_CLAIM_CONFLICT`, naming the holder, its task and when its claim expires), unless the
//! claimant overrides it and says why: then the displaced claim ends, a **conflict record** names both agents and
//! both intents, and the **decision log** gets an entry linked to it. Every claim is made in one `IMMEDIATE`
//! transaction that reads the live claims and writes the new one, so of two processes racing for overlapping
//! surfaces exactly one wins. Whether two surfaces share a path is [`less_contract::patterns_intersect`]: exact for
//! the grant patterns' wildcards, and fail closed.
//!
//! The decision log is append-only (triggers refuse an update or a delete) and reads back as Markdown.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use less_contract::{ErrorCode, Violation, leaves_workspace, patterns_intersect};

/// The tables (a desk creates them with its others; a run in `coord.sqlite`).
pub(crate) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS claims (claim_id TEXT PRIMARY KEY, project TEXT NOT NULL, holder TEXT NOT NULL,
        identity TEXT NOT NULL, task TEXT NOT NULL, surfaces TEXT NOT NULL, made_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL, ended_at INTEGER, ended TEXT);
    CREATE INDEX IF NOT EXISTS claims_live ON claims (project, expires_at) WHERE ended_at IS NULL;
    CREATE TABLE IF NOT EXISTS conflicts (conflict_id TEXT PRIMARY KEY, project TEXT NOT NULL, at INTEGER NOT NULL,
        overriding TEXT NOT NULL, overriding_intent TEXT NOT NULL, displaced TEXT NOT NULL,
        displaced_intent TEXT NOT NULL, claim_id TEXT NOT NULL, surfaces TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS decisions (seq INTEGER PRIMARY KEY AUTOINCREMENT, decision_id TEXT NOT NULL UNIQUE,
        project TEXT NOT NULL, at INTEGER NOT NULL, identity TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL,
        conflict_id TEXT);
    CREATE TRIGGER IF NOT EXISTS decisions_no_update BEFORE UPDATE ON decisions
        BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
    CREATE TRIGGER IF NOT EXISTS decisions_no_delete BEFORE DELETE ON decisions
        BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
    CREATE TRIGGER IF NOT EXISTS conflicts_no_update BEFORE UPDATE ON conflicts
        BEGIN SELECT RAISE(ABORT, 'conflict records are append-only'); END;";

/// The shortest a claim may live, in seconds.
pub const MIN_CLAIM_TTL_SECS: u64 = 60;
/// The longest a claim may live before it must be renewed, in seconds (a week).
pub const MAX_CLAIM_TTL_SECS: u64 = 7 * 24 * 3600;
/// A claim's TTL when the claimant gives none, in seconds (30 minutes).
pub const DEFAULT_CLAIM_TTL_SECS: u64 = 30 * 60;
/// The most surfaces one claim names.
pub const MAX_SURFACES: usize = 64;
/// The longest a task, a title, an intent or a reason may be, in characters.
pub const MAX_CLAIM_TEXT: usize = 500;
/// The longest a decision's body may be, in characters.
pub const MAX_DECISION_BODY: usize = 4000;

/// A claim to make.
#[derive(Debug, Clone, Default)]
pub struct NewClaim {
    /// Workspace paths or globs (`src/run/**`; a leading `repo:` is dropped).
    pub surfaces: Vec<String>,
    /// What the change is for (`T-9: typed inbox`).
    pub task: String,
    /// How long it holds, in seconds ([`DEFAULT_CLAIM_TTL_SECS`] when `None`).
    pub ttl_secs: Option<u64>,
    /// Take the surfaces from the claims they overlap, saying why (a conflict record for each).
    pub override_reason: Option<String>,
}

/// A claim as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Its id (`cl_…`).
    pub claim_id: String,
    /// The project it is in (claims collide within a project).
    pub project: String,
    /// The client holding it.
    pub holder: String,
    /// The holder's hierarchical identity.
    pub identity: String,
    /// What it is for.
    pub task: String,
    /// The surfaces claimed.
    pub surfaces: Vec<String>,
    /// When it was made (UNIX seconds).
    pub made_at: i64,
    /// When it stops holding unless renewed (UNIX seconds).
    pub expires_at: i64,
    /// `live`, `released`, `overridden` or `expired`.
    pub status: String,
}

/// A conflict record: one agent overrode another's claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// Its id (`cf_…`).
    pub conflict_id: String,
    /// When (UNIX seconds).
    pub at: i64,
    /// Who overrode.
    pub overriding: String,
    /// Why, and for what.
    pub overriding_intent: String,
    /// Whose claim was displaced.
    pub displaced: String,
    /// What the displaced claim was for (its task).
    pub displaced_intent: String,
    /// The displaced claim.
    pub claim_id: String,
    /// Its surfaces.
    pub surfaces: Vec<String>,
    /// The decision-log entry that records it.
    pub decision_id: String,
}

/// One entry of the decision log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Its place in the log (1, 2, …).
    pub seq: i64,
    /// Its id (`dc_…`); `sam:decision:<id>` names it.
    pub decision_id: String,
    /// When (UNIX seconds).
    pub at: i64,
    /// Who decided.
    pub identity: String,
    /// What was decided, in one line.
    pub title: String,
    /// Why, and what follows.
    pub body: String,
    /// The conflict record it records, if it records one.
    pub conflict_id: Option<String>,
}

/// Who acts on the ledger: a client's id, project and hierarchical identity.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The client's id.
    pub id: &'a str,
    /// Its project (claims collide within a project).
    pub project: &'a str,
    /// Its identity (`project/lead/dev`).
    pub identity: &'a str,
}

fn failed(err: rusqlite::Error) -> Violation {
    Violation::new(ErrorCode::StoreFailed, "", format!("desk claims: {err}"))
}

fn text_checked(text: &str, path: &str, max: usize) -> Result<String, Violation> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Violation::new(ErrorCode::TextEmpty, path, "say what it is for"));
    }
    if text.chars().count() > max {
        return Err(Violation::new(ErrorCode::ArgumentInvalid, path, format!("at most {max} characters")));
    }
    Ok(text.to_owned())
}

/// A surface as the ledger compares it: a workspace path or glob, without a `repo:` prefix, `.` segments, empty
/// segments (`src//a`) or a trailing `/`, so that every spelling of one path compares as one. Control and invisible
/// characters (a zero-width space, a direction mark) are refused: a name that looks like a held one must be it.
fn surface(text: &str, at: usize) -> Result<String, Violation> {
    let path = format!("/surfaces/{at}");
    let trimmed = text.trim();
    if let Some(bad) = trimmed.chars().find(|c| invisible(*c)) {
        return Err(Violation::new(
            ErrorCode::ArgumentInvalid,
            path,
            format!(
                "{text:?} holds U+{:04X}, a control or invisible character: name the path as it is",
                u32::from(bad)
            ),
        ));
    }
    let raw = trimmed.strip_prefix("repo:").unwrap_or(trimmed);
    if raw.starts_with('/') || leaves_workspace(&format!("repo:{raw}")) {
        return Err(Violation::new(
            ErrorCode::ArgumentInvalid,
            path,
            format!("{text}: name a place inside the workspace (a relative path without `..`)"),
        ));
    }
    // A directory named with a trailing slash is everything in it.
    let directory = raw.len() > 1 && raw.ends_with('/');
    let segments: Vec<&str> = raw.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    let bare = match (segments.join("/"), directory) {
        (joined, true) if !joined.is_empty() => format!("{joined}/**"),
        (joined, _) => joined,
    };
    if bare.is_empty() {
        return Err(Violation::new(ErrorCode::TextEmpty, path, "name a path or a glob (src/run/**)"));
    }
    if bare.contains('#') || bare.contains('@') || bare.contains(':') {
        return Err(Violation::new(
            ErrorCode::ArgumentInvalid,
            path,
            format!("{text}: a surface is a workspace path or glob (src/run/**), not a pointer to a span"),
        ));
    }
    if leaves_workspace(&format!("repo:{bare}")) {
        return Err(Violation::new(
            ErrorCode::ArgumentInvalid,
            path,
            format!("{text}: name a place inside the workspace (a relative path without `..`)"),
        ));
    }
    Ok(bare)
}

/// Whether `c` is a control character or one that shows nothing (zero-width, joiners, direction marks, the BOM).
fn invisible(c: char) -> bool {
    // Unicode's format characters (Cf) and default-ignorable code points, as of Unicode 15.
    const RANGES: &[(char, char)] = &[
        ('\u{ad}', '\u{ad}'),
        ('\u{34f}', '\u{34f}'),
        ('\u{600}', '\u{605}'),
        ('\u{61c}', '\u{61c}'),
        ('\u{6dd}', '\u{6dd}'),
        ('\u{70f}', '\u{70f}'),
        ('\u{890}', '\u{891}'),
        ('\u{8e2}', '\u{8e2}'),
        ('\u{115f}', '\u{1160}'),
        ('\u{17b4}', '\u{17b5}'),
        ('\u{180b}', '\u{180f}'),
        ('\u{200b}', '\u{200f}'),
        ('\u{2028}', '\u{202e}'),
        ('\u{2060}', '\u{206f}'),
        ('\u{3164}', '\u{3164}'),
        ('\u{fe00}', '\u{fe0f}'),
        ('\u{feff}', '\u{feff}'),
        ('\u{ffa0}', '\u{ffa0}'),
        ('\u{fff0}', '\u{fffb}'),
        ('\u{110bd}', '\u{110bd}'),
        ('\u{110cd}', '\u{110cd}'),
        ('\u{13430}', '\u{1343f}'),
        ('\u{1bca0}', '\u{1bca3}'),
        ('\u{1d173}', '\u{1d17a}'),
        ('\u{e0000}', '\u{e0fff}'),
    ];
    c.is_control() || RANGES.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c))
}

/// Whether two claimed surfaces share a path. A surface without wildcards may name a directory, so it also stands for
/// everything below it (`src/run` collides with `src/run/gateway.rs`): when in doubt, a collision.
fn collide(a: &str, b: &str) -> bool {
    let forms = |s: &str| {
        let mut forms = vec![s.to_owned()];
        if !s.contains(['*', '?']) {
            forms.push(format!("{s}/**"));
        }
        forms
    };
    forms(a).iter().any(|a| forms(b).iter().any(|b| patterns_intersect(a, b)))
}

/// A fresh id: `prefix` and 16 hex digits of blake3 over what makes it and `ordinal`, the number of rows the table
/// held when it was made (read in the writing transaction, so ids are unique within a store, and a run writes the
/// same ids into a fresh store whatever its clock: token counts of messages that cite them do not drift).
fn fresh_id(prefix: &str, parts: &[&str], ordinal: i64) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.update(&ordinal.to_le_bytes());
    let hex = hasher.finalize().to_hex();
    format!("{prefix}{}", &hex[..16])
}

/// How many rows `table` holds (for [`fresh_id`]).
fn rows(db: &Connection, table: &str) -> Result<i64, Violation> {
    db.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0)).map_err(failed)
}

/// An RFC 3339 time of UNIX seconds, for messages.
pub fn rfc3339(at: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| at.to_string())
}

type ClaimRow = (String, String, String, String, String, String, i64, i64, Option<String>);

const CLAIM_COLUMNS: &str = "claim_id, project, holder, identity, task, surfaces, made_at, expires_at, ended";

fn claim_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ClaimRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?))
}

fn claim_of(row: ClaimRow, now: i64) -> Claim {
    let (claim_id, project, holder, identity, task, surfaces, made_at, expires_at, ended) = row;
    let status = match ended {
        Some(how) => how,
        None if expires_at <= now => "expired".to_owned(),
        None => "live".to_owned(),
    };
    let surfaces = serde_json::from_str(&surfaces).unwrap_or_default();
    Claim { claim_id, project, holder, identity, task, surfaces, made_at, expires_at, status }
}

/// The live claims of `project` (all holders), oldest first.
pub fn live_claims(db: &Connection, project: &str, now: i64) -> Result<Vec<Claim>, Violation> {
    let mut statement = db
        .prepare(&format!(
            "SELECT {CLAIM_COLUMNS} FROM claims WHERE project = ?1 AND ended_at IS NULL AND expires_at > ?2
             ORDER BY made_at, claim_id"
        ))
        .map_err(failed)?;
    let rows = statement.query_map(params![project, now], claim_row).map_err(failed)?;
    rows.map(|row| row.map(|row| claim_of(row, now)).map_err(failed)).collect()
}

/// What a claim did: the claim, and the conflict records of the claims it overrode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    /// The claim made.
    pub claim: Claim,
    /// One per claim it overrode.
    pub conflicts: Vec<Conflict>,
    /// The decision-log entry of each conflict, in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
}

/// Makes a claim for `who` at `now` (see the module docs).
pub fn claim(db: &mut Connection, who: Actor<'_>, new: &NewClaim, now: i64) -> Result<Claimed, Violation> {
    if new.surfaces.is_empty() {
        return Err(Violation::new(ErrorCode::TextEmpty, "/surfaces", "name at least one surface (src/run/**)"));
    }
    if new.surfaces.len() > MAX_SURFACES {
        return Err(Violation::new(
            ErrorCode::ArgumentInvalid,
            "/surfaces",
            format!("{} surfaces; claim at most {MAX_SURFACES} (a glob names many files)", new.surfaces.len()),
        ));
    }
    let mut surfaces = Vec::with_capacity(new.surfaces.len());
    for (at, text) in new.surfaces.iter().enumerate() {
        let bare = surface(text, at)?;
        if !surfaces.contains(&bare) {
            surfaces.push(bare);
        }
    }
    let task = text_checked(&new.task, "/task", MAX_CLAIM_TEXT)?;
    let ttl = new.ttl_secs.unwrap_or(DEFAULT_CLAIM_TTL_SECS);
    if !(MIN_CLAIM_TTL_SECS..=MAX_CLAIM_TTL_SECS).contains(&ttl) {
        return Err(Violation::new(
            ErrorCode::ArgumentInvalid,
            "/ttl_minutes",
            format!(
                "a claim lives {} to {} minutes; renew it to hold longer",
                MIN_CLAIM_TTL_SECS / 60,
                MAX_CLAIM_TTL_SECS / 60
            ),
        ));
    }
    let reason = new.override_reason.as_deref().map(|r| text_checked(r, "/override", MAX_CLAIM_TEXT)).transpose()?;
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
    let overlapping: Vec<Claim> = live_claims(&tx, who.project, now)?
        .into_iter()
        .filter(|c| c.holder != who.id)
        .filter(|c| c.surfaces.iter().any(|theirs| surfaces.iter().any(|mine| collide(mine, theirs))))
        .collect();
    let (mut conflicts, mut decisions) = (Vec::new(), Vec::new());
    if let Some(first) = overlapping.first() {
        let Some(reason) = &reason else {
            let shared: Vec<&str> = first
                .surfaces
                .iter()
                .filter(|theirs| surfaces.iter().any(|mine| collide(mine, theirs)))
                .map(String::as_str)
                .collect();
            return Err(Violation::new(
                ErrorCode::ClaimConflict,
                "/surfaces",
                format!(
                    "{} overlaps claim {} of {} on {} for \"{}\", live until {}{}",
                    surfaces.join(", "),
                    first.claim_id,
                    first.identity,
                    shared.join(", "),
                    first.task,
                    rfc3339(first.expires_at),
                    if overlapping.len() > 1 {
                        format!(" (and {} more claims)", overlapping.len() - 1)
                    } else {
                        String::new()
                    }
                ),
            ));
        };
        for displaced in &overlapping {
            tx.execute(
                "UPDATE claims SET ended_at = ?1, ended = 'overridden' WHERE claim_id = ?2",
                params![now, displaced.claim_id],
            )
            .map_err(failed)?;
            let conflict_id = fresh_id("cf_", &[who.id, &displaced.claim_id], rows(&tx, "conflicts")?);
            let decision_id = fresh_id("dc_", &[who.id, &conflict_id], rows(&tx, "decisions")?);
            let intent = format!("{task} — {reason}");
            let displaced_surfaces = serde_json::to_string(&displaced.surfaces)
                .map_err(|e| Violation::new(ErrorCode::StoreFailed, "", format!("desk claims: {e}")))?;
            tx.execute(
                "INSERT INTO conflicts (conflict_id, project, at, overriding, overriding_intent, displaced,
                     displaced_intent, claim_id, surfaces) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    conflict_id,
                    who.project,
                    now,
                    who.identity,
                    intent,
                    displaced.identity,
                    displaced.task,
                    displaced.claim_id,
                    displaced_surfaces
                ],
            )
            .map_err(failed)?;
            let title = format!("{} overrode claim {} of {}", who.identity, displaced.claim_id, displaced.identity);
            let body = format!(
                "Surfaces: {}.\nOverriding intent ({}): {intent}.\nDisplaced intent ({}): {}.\nConflict record: {conflict_id}.",
                displaced.surfaces.join(", "),
                who.identity,
                displaced.identity,
                displaced.task
            );
            let seq = append(&tx, who, &decision_id, &title, &body, Some(&conflict_id), now)?;
            decisions.push(Decision {
                seq,
                decision_id: decision_id.clone(),
                at: now,
                identity: who.identity.to_owned(),
                title,
                body,
                conflict_id: Some(conflict_id.clone()),
            });
            conflicts.push(Conflict {
                conflict_id,
                at: now,
                overriding: who.identity.to_owned(),
                overriding_intent: intent,
                displaced: displaced.identity.clone(),
                displaced_intent: displaced.task.clone(),
                claim_id: displaced.claim_id.clone(),
                surfaces: displaced.surfaces.clone(),
                decision_id,
            });
        }
    }
    let claim_id = fresh_id("cl_", &[who.id, &task, &surfaces.join("\n")], rows(&tx, "claims")?);
    let expires_at = now.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
    let stored = serde_json::to_string(&surfaces)
        .map_err(|e| Violation::new(ErrorCode::StoreFailed, "", format!("desk claims: {e}")))?;
    tx.execute(
        "INSERT INTO claims (claim_id, project, holder, identity, task, surfaces, made_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![claim_id, who.project, who.id, who.identity, task, stored, now, expires_at],
    )
    .map_err(failed)?;
    tx.commit().map_err(failed)?;
    let claim = Claim {
        claim_id,
        project: who.project.to_owned(),
        holder: who.id.to_owned(),
        identity: who.identity.to_owned(),
        task,
        surfaces,
        made_at: now,
        expires_at,
        status: "live".to_owned(),
    };
    Ok(Claimed { claim, conflicts, decisions })
}

/// The claim `claim_id` as `who` may change it: live and held by `who`, else why not.
fn held(db: &Connection, who: Actor<'_>, claim_id: &str, now: i64) -> Result<Claim, Violation> {
    let row = db
        .query_row(
            &format!("SELECT {CLAIM_COLUMNS} FROM claims WHERE claim_id = ?1 AND project = ?2"),
            params![claim_id, who.project],
            claim_row,
        )
        .optional()
        .map_err(failed)?;
    let not_held = |why: String| Violation::new(ErrorCode::ClaimNotHeld, "/claim_id", why);
    let Some(claim) = row.map(|row| claim_of(row, now)) else {
        return Err(not_held(format!("no claim {claim_id} in project {}", who.project)));
    };
    if claim.holder != who.id {
        return Err(not_held(format!("claim {claim_id} is {}'s, not yours", claim.identity)));
    }
    if claim.status != "live" {
        return Err(not_held(format!("claim {claim_id} is {} (since {})", claim.status, rfc3339(claim.expires_at))));
    }
    Ok(claim)
}

/// Releases `who`'s live claim `claim_id`.
pub fn release(db: &mut Connection, who: Actor<'_>, claim_id: &str, now: i64) -> Result<Claim, Violation> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
    let mut claim = held(&tx, who, claim_id, now)?;
    tx.execute("UPDATE claims SET ended_at = ?1, ended = 'released' WHERE claim_id = ?2", params![now, claim_id])
        .map_err(failed)?;
    tx.commit().map_err(failed)?;
    claim.status = "released".to_owned();
    Ok(claim)
}

/// Extends `who`'s live claim `claim_id` to `ttl_secs` from `now`.
pub fn renew(
    db: &mut Connection,
    who: Actor<'_>,
    claim_id: &str,
    ttl_secs: Option<u64>,
    now: i64,
) -> Result<Claim, Violation> {
    let ttl = ttl_secs.unwrap_or(DEFAULT_CLAIM_TTL_SECS);
    if !(MIN_CLAIM_TTL_SECS..=MAX_CLAIM_TTL_SECS).contains(&ttl) {
        return Err(Violation::new(
            ErrorCode::ArgumentInvalid,
            "/ttl_minutes",
            format!("a claim lives {} to {} minutes", MIN_CLAIM_TTL_SECS / 60, MAX_CLAIM_TTL_SECS / 60),
        ));
    }
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
    let mut claim = held(&tx, who, claim_id, now)?;
    let expires_at = now.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
    tx.execute("UPDATE claims SET expires_at = ?1 WHERE claim_id = ?2", params![expires_at, claim_id])
        .map_err(failed)?;
    tx.commit().map_err(failed)?;
    claim.expires_at = expires_at;
    Ok(claim)
}

/// Releases `who`'s live claims (those for `task`, or all of them): the ids released.
pub fn release_held(
    db: &mut Connection,
    who: Actor<'_>,
    task: Option<&str>,
    now: i64,
) -> Result<Vec<String>, Violation> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
    let held: Vec<String> = live_claims(&tx, who.project, now)?
        .into_iter()
        .filter(|c| c.holder == who.id && task.is_none_or(|task| c.task == task))
        .map(|c| c.claim_id)
        .collect();
    for claim_id in &held {
        tx.execute("UPDATE claims SET ended_at = ?1, ended = 'released' WHERE claim_id = ?2", params![now, claim_id])
            .map_err(failed)?;
    }
    tx.commit().map_err(failed)?;
    Ok(held)
}

/// A run's coordination ledger: the tables in the run's `coord.sqlite` (beside its memory; durable, like it),
/// opened at the first claim.
#[derive(Debug)]
pub(crate) struct Store {
    path: std::path::PathBuf,
    db: std::sync::Mutex<Option<Connection>>,
}

/// The file of a run's coordination ledger in its store directory.
pub(crate) const RUN_FILE: &str = crate::layout::COORD_DB;

impl Store {
    /// The ledger at `path` (nothing is opened yet).
    pub(crate) fn new(path: std::path::PathBuf) -> Store {
        Store { path, db: std::sync::Mutex::new(None) }
    }

    /// Runs `work` on the ledger if a claim opened it (`None`: the run made no claim).
    pub(crate) fn if_open<T>(&self, work: impl FnOnce(&mut Connection) -> T) -> Option<T> {
        let mut held = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.as_mut().map(work)
    }

    /// Runs `work` on the ledger, opening it (and creating its tables) first if needed.
    pub(crate) fn with<T>(&self, work: impl FnOnce(&mut Connection) -> Result<T, Violation>) -> Result<T, Violation> {
        let mut held = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.is_none() {
            let db = crate::files::open_sqlite(&self.path).map_err(failed)?;
            db.busy_timeout(std::time::Duration::from_secs(60)).map_err(failed)?;
            db.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;").map_err(failed)?;
            db.execute_batch(SCHEMA).map_err(failed)?;
            *held = Some(db);
        }
        match held.as_mut() {
            Some(db) => work(db),
            None => Err(Violation::new(ErrorCode::StoreFailed, "", "the coordination ledger is not open")),
        }
    }
}

/// Ends the live claims `holders` (a run's agents) hold in `project`, as the run ends: `run-ended`. The number ended.
pub(crate) fn end_claims(db: &mut Connection, project: &str, holders: &[String], now: i64) -> Result<usize, Violation> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
    let mut ended = 0;
    for holder in holders {
        ended += tx
            .execute(
                "UPDATE claims SET ended_at = ?1, ended = 'run-ended'
                 WHERE project = ?2 AND holder = ?3 AND ended_at IS NULL AND expires_at > ?1",
                params![now, project, holder],
            )
            .map_err(failed)?;
    }
    tx.commit().map_err(failed)?;
    Ok(ended)
}

/// What `sam:decision:<id>` reads in a run: the decision in the ledger at `path` ([`decision_text`]), if the run made
/// it.
pub(crate) fn read_decision(path: &std::path::Path, decision_id: &str) -> Option<String> {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags(path, flags).ok()?;
    let project: String = db
        .query_row("SELECT project FROM decisions WHERE decision_id = ?1", params![decision_id], |r| r.get(0))
        .ok()?;
    decision_text(&db, &project, decision_id).ok().flatten()
}

/// What the page shows of a store's coordination ledger: every project's live claims, the latest decisions (at most
/// `limit`, newest last) and the conflict records, read from `<store>/desk.sqlite` without writing to it. A store
/// without a desk has none of them.
pub fn read_store(store: &std::path::Path, now: i64, limit: usize) -> Result<StoreLedger, Violation> {
    let path = store.join(crate::layout::DESK_DB);
    if !path.is_file() {
        return Ok(StoreLedger::default());
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags(&path, flags).map_err(failed)?;
    let has_claims: bool = db
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'claims'", [], |r| r.get(0))
        .map(|n: i64| n > 0)
        .map_err(failed)?;
    if !has_claims {
        return Ok(StoreLedger::default());
    }
    let mut statement = db
        .prepare(&format!(
            "SELECT {CLAIM_COLUMNS} FROM claims WHERE ended_at IS NULL AND expires_at > ?1 ORDER BY project, made_at"
        ))
        .map_err(failed)?;
    let claims = statement
        .query_map(params![now], claim_row)
        .map_err(failed)?
        .map(|row| row.map(|row| claim_of(row, now)).map_err(failed))
        .collect::<Result<Vec<_>, _>>()?;
    let mut statement = db
        .prepare(
            "SELECT seq, decision_id, at, identity, title, body, conflict_id FROM decisions ORDER BY seq DESC LIMIT ?1",
        )
        .map_err(failed)?;
    let mut decisions = statement
        .query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], decision_row)
        .map_err(failed)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    decisions.reverse();
    let n_conflicts: i64 = db.query_row("SELECT COUNT(*) FROM conflicts", [], |r| r.get(0)).map_err(failed)?;
    Ok(StoreLedger { claims, decisions, conflicts: u64::try_from(n_conflicts).unwrap_or(0) })
}

/// A store's coordination ledger as the page shows it ([`read_store`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StoreLedger {
    /// Every project's live claims.
    pub claims: Vec<Claim>,
    /// The latest decisions, oldest first.
    pub decisions: Vec<Decision>,
    /// How many conflict records there are.
    pub conflicts: u64,
}

fn append(
    db: &Connection,
    who: Actor<'_>,
    decision_id: &str,
    title: &str,
    body: &str,
    conflict_id: Option<&str>,
    now: i64,
) -> Result<i64, Violation> {
    db.execute(
        "INSERT INTO decisions (decision_id, project, at, identity, title, body, conflict_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![decision_id, who.project, now, who.identity, title, body, conflict_id],
    )
    .map_err(failed)?;
    Ok(db.last_insert_rowid())
}

/// A row of `decisions` (`seq, decision_id, at, identity, title, body, conflict_id`).
fn decision_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Decision> {
    Ok(Decision {
        seq: r.get(0)?,
        decision_id: r.get(1)?,
        at: r.get(2)?,
        identity: r.get(3)?,
        title: r.get(4)?,
        body: r.get(5)?,
        conflict_id: r.get(6)?,
    })
}

/// Appends a decision of `who` to the log.
pub fn decide(db: &mut Connection, who: Actor<'_>, title: &str, body: &str, now: i64) -> Result<Decision, Violation> {
    let title = text_checked(title, "/title", MAX_CLAIM_TEXT)?;
    if title.contains('\n') {
        return Err(Violation::new(ErrorCode::ArgumentInvalid, "/title", "one line; put the rest in the body"));
    }
    let body = text_checked(body, "/body", MAX_DECISION_BODY)?;
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(failed)?;
    let decision_id = fresh_id("dc_", &[who.id, &title, &body], rows(&tx, "decisions")?);
    let seq = append(&tx, who, &decision_id, &title, &body, None, now)?;
    tx.commit().map_err(failed)?;
    Ok(Decision { seq, decision_id, at: now, identity: who.identity.to_owned(), title, body, conflict_id: None })
}

/// The decision `decision_id` of `project`, if there is one.
pub fn decision(db: &Connection, project: &str, decision_id: &str) -> Result<Option<Decision>, Violation> {
    db.query_row(
        "SELECT seq, decision_id, at, identity, title, body, conflict_id FROM decisions
         WHERE project = ?1 AND decision_id = ?2",
        params![project, decision_id],
        decision_row,
    )
    .optional()
    .map_err(failed)
}

/// What `sam:decision:<id>` reads: the decision's title, who and when, its body, and the conflict record it links
/// to (the log's Markdown without its anchors).
pub fn decision_text(db: &Connection, project: &str, decision_id: &str) -> Result<Option<String>, Violation> {
    let Some(found) = decision(db, project, decision_id)? else { return Ok(None) };
    let linked: Vec<Conflict> = match &found.conflict_id {
        Some(id) => conflicts(db, project)?.into_iter().filter(|c| &c.conflict_id == id).collect(),
        None => Vec::new(),
    };
    let mut text = format!(
        "{}\n{} · {} · decision {}\n\n{}\n",
        found.title,
        found.identity,
        rfc3339(found.at),
        found.seq,
        found.body
    );
    if let Some(conflict) = linked.first() {
        text.push_str(&conflict_lines(conflict));
    }
    Ok(Some(text))
}

/// The engram a decision puts into memory: a `decision` engram whose claim is the title, anchored to
/// `sam:decision:<id>` (the whole entry), tagged with its subject `decision:<id>` and, when it records a conflict, the
/// conflict's id. `created_at` is RFC 3339.
pub fn decision_engram(
    found: &Decision,
    created_by: &str,
    created_at: &str,
    scope: less_contract::Scope,
) -> Result<less_contract::Valid<less_contract::Engram>, Violation> {
    let first = |violations: less_contract::Violations| {
        violations.0.into_iter().next().unwrap_or_else(|| Violation::new(ErrorCode::SchemaInvalid, "", "engram"))
    };
    let pointer = less_contract::Pointer::parse(&format!("sam:decision:{}", found.decision_id))?;
    let mut builder =
        less_contract::Engram::builder(less_contract::EngramKind::Decision, found.title.clone(), created_by.to_owned())
            .created_at(created_at.to_owned())
            .scope(scope)
            .pointer(pointer)
            .tag(format!("subject:decision:{}", found.decision_id));
    if let Some(conflict) = &found.conflict_id {
        builder = builder.tag(format!("conflict:{conflict}"));
    }
    builder.build().map_err(first)
}

/// The decision log of `project`, oldest first, from entry `after` on (exclusive; 0 for all), at most `limit`.
pub fn decisions(db: &Connection, project: &str, after: i64, limit: usize) -> Result<Vec<Decision>, Violation> {
    let mut statement = db
        .prepare(
            "SELECT seq, decision_id, at, identity, title, body, conflict_id FROM decisions
             WHERE project = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )
        .map_err(failed)?;
    let rows = statement
        .query_map(params![project, after, i64::try_from(limit).unwrap_or(i64::MAX)], decision_row)
        .map_err(failed)?;
    rows.map(|row| row.map_err(failed)).collect()
}

/// The conflict records of `project`, oldest first.
pub fn conflicts(db: &Connection, project: &str) -> Result<Vec<Conflict>, Violation> {
    let mut statement = db
        .prepare(
            "SELECT c.conflict_id, c.at, c.overriding, c.overriding_intent, c.displaced, c.displaced_intent,
                    c.claim_id, c.surfaces, d.decision_id
             FROM conflicts c JOIN decisions d ON d.conflict_id = c.conflict_id
             WHERE c.project = ?1 ORDER BY c.at, c.conflict_id",
        )
        .map_err(failed)?;
    let rows = statement
        .query_map(params![project], |r| {
            let surfaces: String = r.get(7)?;
            Ok(Conflict {
                conflict_id: r.get(0)?,
                at: r.get(1)?,
                overriding: r.get(2)?,
                overriding_intent: r.get(3)?,
                displaced: r.get(4)?,
                displaced_intent: r.get(5)?,
                claim_id: r.get(6)?,
                surfaces: serde_json::from_str(&surfaces).unwrap_or_default(),
                decision_id: r.get(8)?,
            })
        })
        .map_err(failed)?;
    rows.map(|row| row.map_err(failed)).collect()
}

/// The decision log as Markdown: a heading per entry (its number, title and id), who and when, the body, and the
/// conflict record it links to.
pub fn markdown(project: &str, log: &[Decision], conflicts: &[Conflict]) -> String {
    let mut out = format!("# Decision log — {project}\n");
    if log.is_empty() {
        out.push_str("\nNo decision yet.\n");
    }
    for decision in log {
        let conflict = decision.conflict_id.as_ref().and_then(|id| conflicts.iter().find(|c| &c.conflict_id == id));
        out.push('\n');
        out.push_str(&entry(decision, conflict));
    }
    out
}

/// One entry of the log in Markdown ([`markdown`]).
fn entry(decision: &Decision, conflict: Option<&Conflict>) -> String {
    let mut out = format!(
        "## {}. {} <a id=\"{}\"></a>\n\n*{} · {} · `sam:decision:{}`*\n\n{}\n",
        decision.seq,
        decision.title,
        decision.decision_id,
        decision.identity,
        rfc3339(decision.at),
        decision.decision_id,
        decision.body
    );
    if let Some(conflict) = conflict {
        out.push_str(&conflict_lines(conflict));
    }
    out
}

/// A conflict record under its decision, as a Markdown quote.
fn conflict_lines(conflict: &Conflict) -> String {
    format!(
        "\n> Conflict `{}`: {} overrode claim `{}` of {} on {}.\n> Overriding intent: {}\n> Displaced intent: {}\n",
        conflict.conflict_id,
        conflict.overriding,
        conflict.claim_id,
        conflict.displaced,
        conflict.surfaces.join(", "),
        conflict.overriding_intent,
        conflict.displaced_intent
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let db = Connection::open_in_memory().expect("sqlite");
        db.execute_batch(SCHEMA).expect("schema");
        db
    }

    fn who<'a>(id: &'a str, identity: &'a str) -> Actor<'a> {
        Actor { id, project: "shop", identity }
    }

    fn new(surfaces: &[&str], task: &str) -> NewClaim {
        NewClaim {
            surfaces: surfaces.iter().map(|s| (*s).to_owned()).collect(),
            task: task.into(),
            ..NewClaim::default()
        }
    }

    const DEV: (&str, &str) = ("dev", "shop/lead/dev");
    const CURSOR: (&str, &str) = ("cursor", "shop/cursor");

    #[test]
    fn an_overlapping_claim_is_refused_naming_the_holder_and_a_disjoint_one_granted() {
        let mut db = db();
        let dev = who(DEV.0, DEV.1);
        let cursor = who(CURSOR.0, CURSOR.1);
        let first = claim(&mut db, dev, &new(&["src/run/**"], "T-9: typed inbox"), 1_000).expect("granted");
        assert_eq!((first.claim.status.as_str(), first.claim.expires_at), ("live", 1_000 + 1_800));
        let refused = claim(&mut db, cursor, &new(&["repo:src/run/gateway.rs"], "T-4"), 1_010).expect_err("collides");
        assert_eq!(refused.code, ErrorCode::ClaimConflict);
        for part in ["shop/lead/dev", "T-9: typed inbox", "src/run/**", &first.claim.claim_id, "1970-01-01T00:46:40Z"] {
            assert!(refused.message.contains(part), "{part} in {}", refused.message);
        }
        claim(&mut db, cursor, &new(&["src/desk/**", "docs/*.md"], "T-5"), 1_020).expect("disjoint: granted");
        // The holder may claim within its own claim again.
        claim(&mut db, dev, &new(&["src/run/inbox.rs"], "T-9"), 1_030).expect("its own surfaces");
        // A path without wildcards may be a directory: it collides with what lies below it.
        let below = claim(&mut db, cursor, &new(&["src/run"], "T-6"), 1_035).expect_err("src/run/** is below");
        assert_eq!(below.code, ErrorCode::ClaimConflict);
        assert_eq!(live_claims(&db, "shop", 1_040).expect("live").len(), 3);
        // Another project's claims never collide with these.
        let elsewhere = Actor { id: "x", project: "other", identity: "other/x" };
        claim(&mut db, elsewhere, &new(&["src/run/**"], "T-1"), 1_040).expect("another project");
    }

    /// Other spellings of a held path collide with it, and a look-alike name is refused (issue 61: `src//a/x.rs`,
    /// `src/./a/x.rs`, `src/a/./x.rs` and a name with a trailing U+200B were granted while `src/a/x.rs` was held).
    #[test]
    fn every_spelling_of_a_held_path_collides_and_invisible_characters_are_refused() {
        let mut db = db();
        let (dev, cursor) = (who(DEV.0, DEV.1), who(CURSOR.0, CURSOR.1));
        claim(&mut db, dev, &new(&["src/a/x.rs"], "T-1"), 0).expect("granted");
        for spelling in ["src//a/x.rs", "src/./a/x.rs", "src/a/./x.rs", "./src/a//x.rs", "repo:src/a/x.rs", "src/a/"] {
            let refused = claim(&mut db, cursor, &new(&[spelling], "T-2"), 1).expect_err(spelling);
            assert_eq!(refused.code, ErrorCode::ClaimConflict, "{spelling}");
        }
        for look_alike in [
            "src/a/x.rs\u{200b}",
            "src/a/\u{200d}x.rs",
            "src/a/x\u{202e}sr.rs",
            "src/a/x.rs\u{feff}",
            "src/a\u{0}/x.rs",
            "src/a/x.rs\u{e0001}",
            "src/a/x.rs\u{e0100}",
            "src/a/x.rs\u{ffa0}",
            "src/a/x.rs\u{1d173}",
            "src/a/x.rs\u{600}",
        ] {
            let refused = claim(&mut db, cursor, &new(&[look_alike], "T-3"), 2).expect_err(look_alike);
            assert_eq!(refused.code, ErrorCode::ArgumentInvalid, "{look_alike:?}");
            assert!(refused.message.contains("invisible"), "{}", refused.message);
        }
        for outside in ["/etc/passwd", "src/../../x", "//src/a/x.rs"] {
            let refused = claim(&mut db, cursor, &new(&[outside], "T-4"), 3).expect_err(outside);
            assert_eq!(refused.code, ErrorCode::ArgumentInvalid, "{outside}");
        }
        // The stored surface is the plain spelling.
        let granted = claim(&mut db, cursor, &new(&["src//b/./y.rs"], "T-5"), 4).expect("granted");
        assert_eq!(granted.claim.surfaces, ["src/b/y.rs"]);
    }

    #[test]
    fn an_expired_or_released_claim_stops_blocking() {
        let mut db = db();
        let (dev, cursor) = (who(DEV.0, DEV.1), who(CURSOR.0, CURSOR.1));
        let mut short = new(&["src/**"], "T-1");
        short.ttl_secs = Some(60);
        claim(&mut db, dev, &short, 0).expect("granted");
        claim(&mut db, cursor, &new(&["src/a.rs"], "T-2"), 59).expect_err("still live");
        let taken = claim(&mut db, cursor, &new(&["src/a.rs"], "T-2"), 60).expect("expired: granted");
        assert!(live_claims(&db, "shop", 61).expect("live").iter().all(|c| c.holder == "cursor"));
        release(&mut db, cursor, &taken.claim.claim_id, 70).expect("released");
        claim(&mut db, dev, &new(&["src/**"], "T-3"), 71).expect("released: granted");
    }

    #[test]
    fn only_the_holder_releases_or_renews_a_live_claim() {
        let mut db = db();
        let (dev, cursor) = (who(DEV.0, DEV.1), who(CURSOR.0, CURSOR.1));
        let id = claim(&mut db, dev, &new(&["src/**"], "T-1"), 0).expect("granted").claim.claim_id;
        let not_held = |r: Result<Claim, Violation>| r.expect_err("not held").code;
        assert_eq!(not_held(release(&mut db, cursor, &id, 10)), ErrorCode::ClaimNotHeld);
        assert_eq!(not_held(renew(&mut db, cursor, &id, None, 10)), ErrorCode::ClaimNotHeld);
        assert_eq!(not_held(release(&mut db, dev, "cl_nothing", 10)), ErrorCode::ClaimNotHeld);
        let renewed = renew(&mut db, dev, &id, Some(3_600), 1_000).expect("renewed");
        assert_eq!(renewed.expires_at, 4_600);
        assert_eq!(not_held(renew(&mut db, dev, &id, None, 4_600)), ErrorCode::ClaimNotHeld, "expired by then");
        let out_of_range = renew(&mut db, dev, &id, Some(10), 100).expect_err("too short");
        assert_eq!(out_of_range.code, ErrorCode::ArgumentInvalid);
    }

    #[test]
    fn an_override_ends_the_other_claim_and_records_the_conflict_in_the_decision_log() {
        let mut db = db();
        let (dev, cursor) = (who(DEV.0, DEV.1), who(CURSOR.0, CURSOR.1));
        let displaced = claim(&mut db, dev, &new(&["src/run/**"], "T-9: typed inbox"), 0).expect("granted");
        let mut taking = new(&["src/run/gateway.rs"], "T-4: hotfix");
        taking.override_reason = Some("production is down".into());
        let claimed = claim(&mut db, cursor, &taking, 10).expect("override");
        let [conflict] = claimed.conflicts.as_slice() else { panic!("one conflict: {claimed:?}") };
        assert_eq!((conflict.overriding.as_str(), conflict.displaced.as_str()), ("shop/cursor", "shop/lead/dev"));
        assert_eq!(conflict.displaced_intent, "T-9: typed inbox");
        assert!(conflict.overriding_intent.contains("production is down"));
        assert_eq!(conflict.claim_id, displaced.claim.claim_id);
        let live = live_claims(&db, "shop", 11).expect("live");
        assert_eq!(live.iter().map(|c| c.holder.as_str()).collect::<Vec<_>>(), ["cursor"], "the displaced one ended");
        let log = decisions(&db, "shop", 0, 10).expect("log");
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].conflict_id.as_deref(), Some(conflict.conflict_id.as_str()));
        assert_eq!(conflicts(&db, "shop").expect("conflicts"), claimed.conflicts);
        let md = markdown("shop", &log, &claimed.conflicts);
        for part in ["# Decision log — shop", "shop/cursor overrode claim", "Displaced intent: T-9: typed inbox"] {
            assert!(md.contains(part), "{part} in:\n{md}");
        }
        // An override with an empty reason is no override.
        taking.override_reason = Some("  ".into());
        assert_eq!(claim(&mut db, dev, &taking, 20).expect_err("no reason").code, ErrorCode::TextEmpty);
    }

    #[test]
    fn the_decision_log_is_append_only_and_reads_back_in_order() {
        let mut db = db();
        let dev = who(DEV.0, DEV.1);
        let first =
            decide(&mut db, dev, "Keep the billing cache per region", "Latency: one region's cache.", 5).expect("one");
        decide(&mut db, dev, "Ship the typed inbox behind no flag", "Replays stay byte-identical.", 6).expect("two");
        assert_eq!(decide(&mut db, dev, "two\nlines", "b", 7).expect_err("title").code, ErrorCode::ArgumentInvalid);
        let log = decisions(&db, "shop", 0, 10).expect("log");
        assert_eq!(log.iter().map(|d| d.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(log[0], first);
        assert_eq!(decisions(&db, "shop", 1, 10).expect("after the first").len(), 1);
        let tx = db.transaction().expect("tx");
        assert!(tx.execute("UPDATE decisions SET title = 'x'", []).is_err(), "no edit");
        assert!(tx.execute("DELETE FROM decisions", []).is_err(), "no deletion");
    }

    #[test]
    fn a_decision_reads_back_by_its_id_and_becomes_a_decision_engram() {
        let mut db = db();
        let (dev, cursor) = (who(DEV.0, DEV.1), who("cursor", "shop/cursor"));
        claim(&mut db, dev, &new(&["src/run/**"], "T-9: typed inbox"), 10).expect("dev's");
        let taking = NewClaim { override_reason: Some("hotfix".into()), ..new(&["src/run/agent.rs"], "T-10") };
        let conflict = claim(&mut db, cursor, &taking, 11).expect("override").conflicts.remove(0);
        let text = decision_text(&db, "shop", &conflict.decision_id).expect("read").expect("found");
        for part in ["shop/cursor overrode claim", &conflict.conflict_id, "Displaced intent: T-9: typed inbox"] {
            assert!(text.contains(part), "{part} in:\n{text}");
        }
        assert_eq!(decision_text(&db, "other", &conflict.decision_id).expect("read"), None, "per project");
        assert_eq!(decision_text(&db, "shop", "dc_0000000000000000").expect("read"), None);
        let found = decision(&db, "shop", &conflict.decision_id).expect("read").expect("found");
        let engram = decision_engram(&found, "cursor", "2026-11-27T10:00:00Z", less_contract::Scope::Project)
            .expect("valid")
            .into_inner();
        assert_eq!(engram.kind, less_contract::EngramKind::Decision);
        assert_eq!(engram.claim, found.title);
        assert_eq!(engram.pointers[0].to_string(), format!("sam:decision:{}", found.decision_id));
        let tags = engram.tags.unwrap_or_default();
        assert!(tags.contains(&format!("conflict:{}", conflict.conflict_id)), "{tags:?}");
        // Ids depend on the store's history only: the same history writes the same ids, whatever the time.
        let mut again = db_with_history();
        let mut other = db_with_history();
        assert_eq!(
            decide(&mut again, dev, "t", "b", 30).expect("a").decision_id,
            decide(&mut other, dev, "t", "b", 31).expect("b").decision_id
        );
        assert_ne!(
            decide(&mut again, dev, "t", "b", 30).expect("c").decision_id,
            decide(&mut db_with_history(), dev, "t", "b", 30).expect("d").decision_id,
            "a later entry of the same log"
        );
    }

    fn db_with_history() -> Connection {
        let mut db = db();
        claim(&mut db, who(DEV.0, DEV.1), &new(&["a/**"], "T-1"), 1).expect("claim");
        db
    }

    #[test]
    fn surfaces_are_workspace_paths_or_globs() {
        let mut db = db();
        let dev = who(DEV.0, DEV.1);
        for (surface, code) in [
            ("../outside/**", ErrorCode::ArgumentInvalid),
            ("/etc/passwd", ErrorCode::ArgumentInvalid),
            ("repo:src/a.rs#L1-L9", ErrorCode::ArgumentInvalid),
            ("  ", ErrorCode::TextEmpty),
        ] {
            let refused = claim(&mut db, dev, &new(&[surface], "T"), 0).expect_err(surface);
            assert_eq!((refused.code, refused.path.as_str()), (code, "/surfaces/0"), "{surface}");
        }
        let claimed = claim(&mut db, dev, &new(&["./src/run/", "repo:docs/a.md"], "T"), 0).expect("granted");
        assert_eq!(claimed.claim.surfaces, ["src/run/**", "docs/a.md"]);
        assert_eq!(claim(&mut db, dev, &new(&[], "T"), 0).expect_err("none").code, ErrorCode::TextEmpty);
    }
}
