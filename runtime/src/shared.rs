//! What a project's clients share besides engrams, in the store's own SQLite file (`memory.sqlite3`), per project:
//! the symbol table (short ids for recurring artifacts, resolved both ways), context capsules (at most 10 lines,
//! hydrated as the transitive closure of their `depends`, dependencies first, nothing else), and the blackboard
//! (key → value facts; a new value supersedes the old one, which is kept and linked).
//! The desk serves them to its clients; a run publishes its scenario's symbols and capsules into them when it starts.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use less_contract::{Capsule, ErrorCode, NewCapsule, Violation, check_shared_id, check_symbol_value, closure};

/// A blackboard entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The current value.
    pub value: String,
    /// Who set it.
    pub set_by: String,
    /// The value it superseded, if any.
    pub superseded: Option<String>,
}

/// What filling the symbol table from the workspace index did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolFill {
    /// The ids it added, with their paths, in path order.
    pub added: Vec<(String, String)>,
    /// Files that had an id already (kept).
    pub kept: usize,
}

fn store_failed(err: impl std::fmt::Display) -> Violation {
    Violation::new(ErrorCode::StoreFailed, "", format!("the store's shared tables: {err}"))
}

fn argument(path: &str, message: impl Into<String>) -> Violation {
    Violation::new(ErrorCode::ArgumentInvalid, path, message)
}

/// The shared tables of one store.
pub(crate) struct Shared {
    db: Connection,
}

impl Shared {
    pub(crate) fn open(dir: &Path) -> Result<Shared, Violation> {
        let db = crate::files::open_sqlite(&dir.join(crate::layout::MEMORY_DB)).map_err(store_failed)?;
        db.busy_timeout(std::time::Duration::from_secs(60)).map_err(store_failed)?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS symbols (project TEXT NOT NULL, id TEXT NOT NULL, value TEXT NOT NULL,
                 PRIMARY KEY (project, id));
             CREATE INDEX IF NOT EXISTS symbols_by_value ON symbols (project, value);
             CREATE TABLE IF NOT EXISTS capsules (project TEXT NOT NULL, id TEXT NOT NULL, text TEXT NOT NULL,
                 depends TEXT NOT NULL, PRIMARY KEY (project, id));
             CREATE TABLE IF NOT EXISTS blackboard (seq INTEGER PRIMARY KEY, project TEXT NOT NULL, key TEXT NOT NULL,
                 value TEXT NOT NULL, set_by TEXT NOT NULL, superseded_by INTEGER);",
        )
        .map_err(store_failed)?;
        Ok(Shared { db })
    }

    /// Writes a scenario's symbol table and capsules into the store under `project` (a run does this when it starts,
    /// so `lessrt mcp` on the run's store resolves and hydrates what its briefs named). One transaction.
    pub(crate) fn publish(
        dir: &Path,
        project: &str,
        symbols: &std::collections::BTreeMap<String, String>,
        capsules: &[NewCapsule],
    ) -> Result<(), Violation> {
        std::fs::create_dir_all(dir).map_err(store_failed)?;
        let shared = Shared::open(dir)?;
        shared.db.execute_batch("BEGIN IMMEDIATE").map_err(store_failed)?;
        let written = (|| {
            for (id, value) in symbols {
                shared.symbol_set(project, id, value)?;
            }
            // In the scenario's order: a capsule depends only on capsules listed before it.
            for capsule in capsules {
                shared.capsule_write(project, capsule)?;
            }
            Ok(())
        })();
        let end = if written.is_ok() { "COMMIT" } else { "ROLLBACK" };
        shared.db.execute_batch(end).map_err(store_failed)?;
        written
    }

    pub(crate) fn symbol_set(&self, project: &str, id: &str, value: &str) -> Result<(), Violation> {
        check_shared_id("/id", id)?;
        check_symbol_value("/value", value)?;
        self.db
            .execute(
                "INSERT INTO symbols (project, id, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (project, id) DO UPDATE SET value = excluded.value",
                params![project, id, value],
            )
            .map_err(store_failed)?;
        Ok(())
    }

    /// The value of `id`, or with `reverse` the ids whose value is `text`.
    pub(crate) fn symbol_resolve(
        &self,
        project: &str,
        text: &str,
        reverse: bool,
    ) -> Result<Vec<(String, String)>, Violation> {
        let sql = if reverse {
            "SELECT id, value FROM symbols WHERE project = ?1 AND value = ?2 ORDER BY id"
        } else {
            "SELECT id, value FROM symbols WHERE project = ?1 AND id = ?2"
        };
        let mut statement = self.db.prepare(sql).map_err(store_failed)?;
        let found = statement
            .query_map(params![project, text], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(store_failed)?;
        if found.is_empty() {
            let what = if reverse { "no symbol has the value" } else { "no symbol" };
            return Err(Violation::new(ErrorCode::PointerUnresolved, "", format!("{what} {text:?} in {project}")));
        }
        Ok(found)
    }

    /// Gives every one of `paths` without an id in `project` the next free `F<n>` (above every `F` number in use),
    /// in one write transaction: two fills at once never hand out one id twice.
    pub(crate) fn symbol_fill(&self, project: &str, paths: &[String]) -> Result<SymbolFill, Violation> {
        for (i, path) in paths.iter().enumerate() {
            check_symbol_value(&format!("/paths/{i}"), path)?;
        }
        self.in_write(|| {
            let table = self.symbol_list(project)?;
            let mut next = table
                .iter()
                .filter_map(|(id, _)| id.strip_prefix('F').and_then(|n| n.parse::<u64>().ok()))
                .max()
                .unwrap_or(0);
            let mut fill = SymbolFill::default();
            for path in paths {
                if table.iter().any(|(_, value)| value == path) {
                    fill.kept += 1;
                    continue;
                }
                next += 1;
                let id = format!("F{next}");
                self.db
                    .execute("INSERT INTO symbols (project, id, value) VALUES (?1, ?2, ?3)", params![project, id, path])
                    .map_err(store_failed)?;
                fill.added.push((id, path.clone()));
            }
            Ok(fill)
        })
    }

    pub(crate) fn symbol_list(&self, project: &str) -> Result<Vec<(String, String)>, Violation> {
        let mut statement =
            self.db.prepare("SELECT id, value FROM symbols WHERE project = ?1 ORDER BY id").map_err(store_failed)?;
        statement
            .query_map(params![project], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(store_failed)
    }

    /// Writes `capsule` in one write transaction: its dependencies are checked to exist and not to lead back to it
    /// where no other writer can change them before it is stored (two rewrites at once never close a cycle).
    pub(crate) fn capsule_write(&self, project: &str, capsule: &NewCapsule) -> Result<Capsule, Violation> {
        let rendered = capsule.render()?;
        self.in_write(|| self.capsule_store(project, capsule, rendered))
    }

    fn capsule_store(&self, project: &str, capsule: &NewCapsule, rendered: Capsule) -> Result<Capsule, Violation> {
        for (i, dep) in capsule.depends.iter().enumerate() {
            if self.capsule(project, dep)?.is_none() {
                return Err(argument(
                    &format!("/depends/{i}"),
                    format!("no capsule {dep} in {project}: write it first"),
                ));
            }
        }
        // Rewriting a capsule must not close a cycle: none of its dependencies may depend on it.
        if self.closure(project, &capsule.depends)?.iter().any(|c| c.id == capsule.id) {
            return Err(argument(
                "/depends",
                format!("{} would depend on itself through its dependencies", capsule.id),
            ));
        }
        let depends = serde_json::to_string(&rendered.depends).map_err(store_failed)?;
        self.db
            .execute(
                "INSERT INTO capsules (project, id, text, depends) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (project, id) DO UPDATE SET text = excluded.text, depends = excluded.depends",
                params![project, rendered.id, rendered.text, depends],
            )
            .map_err(store_failed)?;
        Ok(rendered)
    }

    /// The capsule `id` of `project`, if written.
    fn capsule(&self, project: &str, id: &str) -> Result<Option<Capsule>, Violation> {
        let row: Option<(String, String)> = self
            .db
            .query_row("SELECT text, depends FROM capsules WHERE project = ?1 AND id = ?2", params![project, id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(store_failed)?;
        let Some((text, depends)) = row else { return Ok(None) };
        let depends: Vec<String> = serde_json::from_str(&depends).map_err(store_failed)?;
        Ok(Some(Capsule { id: id.to_owned(), text, depends }))
    }

    /// The transitive `depends` closure of `ids`, dependencies before what depends on them, each once.
    pub(crate) fn closure(&self, project: &str, ids: &[String]) -> Result<Vec<Capsule>, Violation> {
        closure(ids, |id| self.capsule(project, id)).map_err(|mut v| {
            if v.code == ErrorCode::PointerUnresolved {
                v.message = format!("{} in {project}", v.message);
            }
            v
        })
    }

    /// Sets `key` in one write transaction, so two writers never both supersede the same value.
    pub(crate) fn board_set(&self, project: &str, key: &str, value: &str, who: &str) -> Result<Entry, Violation> {
        check_shared_id("/key", key)?;
        if value.chars().count() > 500 {
            return Err(argument("/value", "a blackboard value is at most 500 characters"));
        }
        self.in_write(|| self.board_store(project, key, value, who))
    }

    fn board_store(&self, project: &str, key: &str, value: &str, who: &str) -> Result<Entry, Violation> {
        let current = self.board_current(project, key)?;
        self.db
            .execute(
                "INSERT INTO blackboard (project, key, value, set_by) VALUES (?1, ?2, ?3, ?4)",
                params![project, key, value, who],
            )
            .map_err(store_failed)?;
        let seq = self.db.last_insert_rowid();
        if let Some((old_seq, _)) = &current {
            self.db
                .execute("UPDATE blackboard SET superseded_by = ?1 WHERE seq = ?2", params![seq, old_seq])
                .map_err(store_failed)?;
        }
        Ok(Entry {
            key: key.to_owned(),
            value: value.to_owned(),
            set_by: who.to_owned(),
            superseded: current.map(|(_, e)| e.value),
        })
    }

    pub(crate) fn board_get(&self, project: &str, key: &str) -> Result<Entry, Violation> {
        self.board_current(project, key)?.map(|(_, entry)| entry).ok_or_else(|| {
            Violation::new(ErrorCode::PointerUnresolved, "/key", format!("no blackboard key {key} in {project}"))
        })
    }

    pub(crate) fn board_list(&self, project: &str) -> Result<Vec<Entry>, Violation> {
        let mut statement = self
            .db
            .prepare(
                "SELECT b.key, b.value, b.set_by, (SELECT o.value FROM blackboard o WHERE o.superseded_by = b.seq)
                 FROM blackboard b WHERE b.project = ?1 AND b.superseded_by IS NULL ORDER BY b.key",
            )
            .map_err(store_failed)?;
        statement
            .query_map(params![project], |r| {
                Ok(Entry { key: r.get(0)?, value: r.get(1)?, set_by: r.get(2)?, superseded: r.get(3)? })
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(store_failed)
    }

    /// Runs `work` in a write transaction (`BEGIN IMMEDIATE`: other writers wait, in this process or another),
    /// committed when it succeeds and rolled back when it fails; inside one already open (`publish`), in that one.
    fn in_write<T>(&self, work: impl FnOnce() -> Result<T, Violation>) -> Result<T, Violation> {
        if !self.db.is_autocommit() {
            return work();
        }
        self.db.execute_batch("BEGIN IMMEDIATE").map_err(store_failed)?;
        let done = work();
        let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self.db.execute_batch(end);
        if ended.is_err() && !self.db.is_autocommit() {
            // A transaction left open would swallow every later write of this connection.
            let _ = self.db.execute_batch("ROLLBACK");
        }
        ended.map_err(store_failed)?;
        done
    }

    fn board_current(&self, project: &str, key: &str) -> Result<Option<(i64, Entry)>, Violation> {
        self.db
            .query_row(
                "SELECT b.seq, b.value, b.set_by, (SELECT o.value FROM blackboard o WHERE o.superseded_by = b.seq)
                 FROM blackboard b WHERE b.project = ?1 AND b.key = ?2 AND b.superseded_by IS NULL",
                params![project, key],
                |r| {
                    Ok((
                        r.get(0)?,
                        Entry { key: key.to_owned(), value: r.get(1)?, set_by: r.get(2)?, superseded: r.get(3)? },
                    ))
                },
            )
            .optional()
            .map_err(store_failed)
    }
}
