//! The desk: the LESS rules for clients outside a run — the agents of MCP hosts (`lessrt mcp`).
//!
//! A client is an agent: its id is the name its host gives (or a per-call identity); the desk's configuration
//! ([`DeskConfig`], TOML) gives it a role, a parent, a project and a budget, the same fields as a scenario's.
//! The rules are the run's: a dereference past the caller's per-turn budget is refused with `LESS_DEREF_DENIED`
//! unless the caller presents a grant its parent (or another ancestor) issued; only an ancestor grants; a query never
//! leaves the caller's project; every call is written to the desk's ledger (tokens per client and tool) and its
//! audit log.
//!
//! A **turn** of a client is its calls to one desk (one server process) between two `checkpoint`s (the first turn
//! starts with its first call): the per-turn deref budget is metered over it, as a run meters an agent's turn.
//!
//! Several server processes may serve one store (each MCP host starts its own), so what crosses clients is durable,
//! in `<store>/desk.sqlite`: grants (signed with a key kept in `<store>/desk.key`, made once, readable by the owner
//! only), deref requests, and the ledger of calls. Engrams live in the store's [`Memory`].

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{ChatMessage, CompactConfig, compact_report, compact_stats};
use crate::dag::{Child, Dag, DagConfig, DagError};
use crate::enforce::{Charge, DerefMeter, Reach, Reader, check_deref, check_issue, outside_reach, spend_on_deref};
use crate::gate::gate_status;
use crate::memory::{Memory, MemoryError, Principal, QueryOptions};
use crate::resolver::{Resolver, SamSource};
use crate::shared::Shared;
use less_contract::{
    Budget, DocKind, Engram, ErrorCode, GateStatus, Grant, GrantTerms, Payload, Pointer, PointerType, Scope,
    TokenCounter, Ttl, TypedMessage, Valid, Violation, ancestors, is_ancestor, lineage, validate,
};

/// The desk's configuration: who its clients are.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeskConfig {
    /// The project of every client that names none (default `default`).
    #[serde(default)]
    pub project: Option<String>,
    /// The budget of every client that names none (default: the spec's).
    #[serde(default)]
    pub budget: Option<Budget>,
    /// Whether clients read `org` and `global` engrams (LESS spec §13.3: an administrator enables it); default
    /// false, so a client reads its own project alone. The same as `[memory] shared_reads`.
    #[serde(default)]
    pub shared_reads: Option<bool>,
    /// The `[memory]` table: scopes read per role, shared reads, direct project writes, the promotion floor and the
    /// rate limit (as in a scenario).
    #[serde(default)]
    pub memory: less_contract::MemorySettings,
    /// Clients by id.
    #[serde(default)]
    pub clients: BTreeMap<String, ClientSpec>,
}

/// One client's place.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// Its role (default: its id).
    #[serde(default)]
    pub role: Option<String>,
    /// The client it answers to (grants come from there).
    #[serde(default)]
    pub parent: Option<String>,
    /// Its project (default: the desk's).
    #[serde(default)]
    pub project: Option<String>,
    /// Its budget (default: the desk's).
    #[serde(default)]
    pub budget: Option<Budget>,
    /// Whether it reads `org` and `global` engrams (default: the desk's `shared_reads`).
    #[serde(default)]
    pub shared_reads: Option<bool>,
    /// Pointer patterns it may dereference without a grant (default: its parent's; a client without a parent: the
    /// whole workspace). Within its parent's; what it grants is within it or within grants it holds.
    #[serde(default)]
    pub reach: Option<Vec<String>>,
}

impl DeskConfig {
    /// Parses and checks a configuration: every parent is a configured client and the hierarchy has no cycle.
    pub fn from_toml(text: &str) -> Result<DeskConfig, Violation> {
        // TOML is read where scenarios are read (the contract's one TOML reader), then taken as JSON.
        let doc = less_contract::scenario_document(text)
            .map_err(|v| Violation { message: format!("desk configuration: {}", v.message), ..v })?;
        let config: DeskConfig = serde_json::from_value(doc)
            .map_err(|err| Violation::new(ErrorCode::ArgumentInvalid, "", format!("desk configuration: {err}")))?;
        if let Some(v) = less_contract::memory_violations(&config.memory, None, "/memory").into_iter().next() {
            return Err(Violation {
                code: ErrorCode::ArgumentInvalid,
                message: format!("desk configuration: {}", v.message),
                ..v
            });
        }
        if config.shared_reads.is_some() && config.memory.shared_reads {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/shared_reads",
                "desk configuration: shared_reads is written twice, at the top and in [memory]: keep the one in [memory]",
            ));
        }
        for id in config.clients.keys() {
            let mut last = id.as_str();
            for parent in ancestors(id, |c| config.parent_of(c)) {
                if !config.clients.contains_key(parent) {
                    return Err(Violation::new(
                        ErrorCode::ArgumentInvalid,
                        format!("/clients/{id}/parent"),
                        format!("{parent} is not a client of this configuration; add [clients.{parent}]"),
                    ));
                }
                last = parent;
            }
            // The walk ends at the top, or where it comes back to a client it passed.
            if let Some(parent) = config.parent_of(last) {
                return Err(Violation::new(
                    ErrorCode::ArgumentInvalid,
                    format!("/clients/{id}/parent"),
                    format!("the parents of {id} form a cycle through {parent}"),
                ));
            }
        }
        for (id, spec) in &config.clients {
            let parent_reach = spec.parent.as_deref().and_then(|p| config.reach_of(p));
            for (i, pattern) in spec.reach.iter().flatten().enumerate() {
                let path = format!("/clients/{id}/reach/{i}");
                if less_contract::leaves_workspace(pattern) {
                    return Err(Violation::new(
                        ErrorCode::ArgumentInvalid,
                        path,
                        format!("{pattern} names places outside the workspace: reach patterns are relative to it"),
                    ));
                }
                if let Some(outer) = &parent_reach
                    && !less_contract::pattern_within_any(pattern, outer)
                {
                    return Err(Violation::new(
                        ErrorCode::ArgumentInvalid,
                        path,
                        format!("{pattern} is wider than {id}'s parent reaches ({}): narrow it", outer.join(", ")),
                    ));
                }
            }
        }
        Ok(config)
    }

    /// The parent of client `id`, as configured.
    fn parent_of(&self, id: &str) -> Option<&str> {
        self.clients.get(id).and_then(|c| c.parent.as_deref())
    }

    /// The `reach` of `id`, or of its nearest ancestor that has one (`None`: the whole workspace).
    fn reach_of(&self, id: &str) -> Option<Vec<String>> {
        std::iter::once(id).chain(ancestors(id, |c| self.parent_of(c))).find_map(|c| self.clients.get(c)?.reach.clone())
    }

    /// The client `id` as configured, or with the defaults when it is not.
    pub fn client(&self, id: &str) -> Client {
        let spec = self.clients.get(id).cloned().unwrap_or_default();
        let role = spec.role.unwrap_or_else(|| id.to_owned());
        let project = spec.project.or_else(|| self.project.clone()).unwrap_or_else(|| "default".to_owned());
        Client {
            identity: self.identity(&project, id),
            id: id.to_owned(),
            parent: spec.parent,
            project,
            budget: spec.budget.or(self.budget).unwrap_or_default(),
            shared_reads: spec.shared_reads.or(self.shared_reads).unwrap_or(self.memory.shared_reads),
            reads: self.memory.reads.get(&role).cloned(),
            role,
            reach: Reach::new(self.reach_of(id).as_deref()),
        }
    }

    /// The hierarchical identity of client `id` of `project`: the project, the client's configured ancestors from
    /// the top, and the client (`shop/lead/cursor`); a client the configuration does not name is `project/id`.
    fn identity(&self, project: &str, id: &str) -> String {
        let mut path = vec![project];
        path.extend(lineage(id, |c| self.parent_of(c)));
        path.join("/")
    }

    /// Whether `ancestor` is above `id` in the hierarchy.
    pub fn is_ancestor(&self, ancestor: &str, id: &str) -> bool {
        is_ancestor(ancestor, id, |c| self.parent_of(c))
    }

    /// The configured clients below `id`.
    fn descendants(&self, id: &str) -> Vec<String> {
        self.clients.keys().filter(|c| self.is_ancestor(id, c)).cloned().collect()
    }
}

/// A client as the desk sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Client {
    /// Its id.
    pub id: String,
    /// Its hierarchical identity (`project/parent/id`): what every result echoes and every audit line names.
    pub identity: String,
    /// Its role.
    pub role: String,
    /// Its parent.
    pub parent: Option<String>,
    /// Its project.
    pub project: String,
    /// Its budget.
    pub budget: Budget,
    /// Whether it reads `org` and `global` engrams.
    pub shared_reads: bool,
    /// The scopes its role reads (`[memory] reads`); none: every scope it may.
    pub reads: Option<Vec<Scope>>,
    /// What it may dereference without a grant.
    pub reach: Reach,
}

/// What a put did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PutAnswer {
    /// The id the engram has in the store.
    pub id: String,
    /// `stored`, `duplicate`, `revived`, `superseded` (it replaced engrams of its subject) or `risk` (it contradicts
    /// one, and a risk engram records it).
    pub outcome: String,
    /// What it superseded.
    pub superseded: Vec<String>,
    /// The risk engrams recording a contradiction.
    pub contradictions: Vec<String>,
}

/// One dereferenced pointer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DerefItem {
    /// The pointer, with its digest.
    pub pointer: String,
    /// What it addresses.
    pub content: String,
    /// blake3 of the content.
    pub digest: String,
    /// Its tokens.
    pub tokens: u32,
    /// The digest this client read in an earlier turn, when the content has changed since: the source changed
    /// between its turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_from: Option<String>,
}

/// Most pointers one deref names (the contract's deref request carries 1 to 12).
pub const MAX_DEREF_POINTERS: usize = 12;

/// Most digests a client's earlier turns are remembered by (past it, the oldest turns are forgotten and their
/// changes go unmentioned).
const MAX_EARLIER_PINS: usize = 4096;

/// The digests one client read: in its current turn (content must not change under it) and in earlier turns (a
/// change is reported, not refused).
#[derive(Debug, Default)]
struct ClientPins {
    turn: crate::resolver::Pins,
    earlier: crate::resolver::Pins,
}

/// A deref request, as its parent sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestView {
    /// Its id.
    pub request_id: String,
    /// Who asks.
    pub requester: String,
    /// What for.
    pub pointers: Vec<String>,
    /// Why.
    pub reason: String,
    /// `pending`, `granted` or `denied`.
    pub status: String,
}

/// What a parent asks the desk to grant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewGrant {
    /// The grantee: a descendant of the issuer.
    pub to: String,
    /// Pointers (text forms) or patterns (`repo:src/**`) it covers.
    pub patterns: Vec<String>,
    /// Derefs it allows (default 1; 0 is refused).
    pub uses: Option<u32>,
    /// How long it lives (ISO-8601 duration, default `PT1H`; under a second is refused).
    pub ttl: Option<String>,
    /// Tokens it covers (default 4,000).
    pub max_tokens: Option<u32>,
    /// The deref request it answers: a pending request of the grantee to the issuer (another is refused).
    pub answers: Option<String>,
}

/// A grant a client holds, and what is left of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldView {
    /// The terms.
    pub terms: GrantTerms,
    /// Uses left.
    pub uses_left: u32,
    /// Pointers left.
    pub derefs_left: u32,
    /// Tokens left.
    pub tokens_left: u32,
}

/// One row of the ledger report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerRow {
    /// The client.
    pub client: String,
    /// Its role.
    pub role: String,
    /// The tool.
    pub tool: String,
    /// Calls.
    pub calls: u64,
    /// Calls refused.
    pub refused: u64,
    /// Tokens of the arguments the client sent.
    pub tokens_in: u64,
    /// Tokens of the results it read.
    pub tokens_out: u64,
    /// Tokens the same results would have cost without LESS (a deref: the whole files of its spans; other tools:
    /// what they returned).
    pub baseline_tokens: u64,
}

/// A search's answer at the desk.
#[derive(Debug, Clone)]
pub struct SearchAnswer {
    /// Best first.
    pub hits: Vec<crate::workspace::Hit>,
    /// Tokens of the hits as one line each (pointer, preview, tokens to read): what the caller was charged.
    pub tokens: u32,
    /// What pasting each hit's content would have cost instead.
    pub baseline: u32,
    /// The stages that ranked them (`hash`, `rerank`).
    pub stages: Vec<String>,
    /// Why the rerank did not run, when it did not.
    pub degraded: Option<String>,
}

/// Files one `symbol_fill` takes at most.
pub const MAX_SYMBOL_FILL: usize = 500;

/// The desk of one store.
pub struct Desk {
    config: DeskConfig,
    dir: PathBuf,
    /// The lossless memory of the store, opened by the first call that reads it.
    dag: Mutex<Option<Dag>>,
    /// Symbols, capsules and the blackboard.
    shared: Mutex<Shared>,
    memory: Mutex<Memory>,
    /// Reads only (`&self`): clients' derefs do not wait for each other.
    resolver: Option<Resolver>,
    /// The workspace's index, opened by the first search (and brought up to the files before each).
    index: Mutex<Option<crate::workspace::WorkspaceIndex>>,
    db: Mutex<Connection>,
    key: [u8; 32],
    meters: Mutex<HashMap<String, DerefMeter>>,
    /// The digests each client read, in its current turn and before.
    pins: Mutex<HashMap<String, ClientPins>>,
    audit: PathBuf,
    counter: &'static TokenCounter,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk").field("config", &self.config).field("audit", &self.audit).finish_non_exhaustive()
    }
}

/// What `sam:` pointers read at the desk: the entries of the caller's project's decision log
/// (`sam:decision:<id>`, as Markdown). Other namespaces belong to runs and read nothing here.
struct DeskSam<'a> {
    db: &'a Mutex<Connection>,
    project: &'a str,
}

impl SamSource for DeskSam<'_> {
    fn lookup(&self, namespace: &str, key: &str) -> Option<String> {
        if namespace != "decision" {
            return None;
        }
        let db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        crate::coord::decision_text(&db, self.project, key).ok().flatten()
    }
}

fn store_failed(what: &str, err: impl std::fmt::Display) -> Violation {
    Violation::new(ErrorCode::StoreFailed, "", format!("{what}: {err}"))
}

fn dag_violation(err: DagError) -> Violation {
    match err {
        DagError::NotFound(id) => {
            Violation::new(ErrorCode::PointerUnresolved, "/id", format!("no node or message {id}"))
        }
        DagError::Memory(err) => memory_violation(err),
        DagError::Store(err) => store_failed("the archive", err),
    }
}

fn memory_violation(err: MemoryError) -> Violation {
    Violation::new(err.code(), "", err.message())
}

impl Desk {
    /// Opens the desk of the store in `dir` (created if missing), resolving pointers in `workspace` when given.
    pub fn open(dir: &Path, workspace: Option<&Path>, config: DeskConfig) -> Result<Desk, Violation> {
        std::fs::create_dir_all(dir).map_err(|err| store_failed(&dir.display().to_string(), err))?;
        let mut memory = Memory::open(dir).map_err(memory_violation)?;
        memory.set_policy(crate::memory::MemoryPolicy::from_settings(&config.memory));
        let resolver = workspace.map(Resolver::new).transpose()?;
        let db = crate::files::open_sqlite(&dir.join(crate::layout::DESK_DB))
            .map_err(|err| store_failed(crate::layout::DESK_DB, err))?;
        db.busy_timeout(std::time::Duration::from_secs(60)).map_err(|err| store_failed(crate::layout::DESK_DB, err))?;
        db.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             CREATE TABLE IF NOT EXISTS grants (grant_id TEXT PRIMARY KEY, grantee TEXT NOT NULL, doc TEXT NOT NULL,
                 uses_left INTEGER NOT NULL, derefs_left INTEGER NOT NULL, tokens_left INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS requests (request_id TEXT PRIMARY KEY, requester TEXT NOT NULL,
                 parent TEXT NOT NULL, pointers TEXT NOT NULL, reason TEXT NOT NULL, status TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS calls (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, client TEXT NOT NULL,
                 role TEXT NOT NULL, tool TEXT NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,
                 baseline INTEGER NOT NULL, code TEXT);",
        )
        .and_then(|()| db.execute_batch(crate::coord::SCHEMA))
        .map_err(|err| store_failed(crate::layout::DESK_DB, err))?;
        let key = desk_key(&dir.join(crate::layout::DESK_KEY))?;
        Ok(Desk {
            config,
            dir: dir.to_owned(),
            dag: Mutex::default(),
            shared: Mutex::new(Shared::open(dir)?),
            memory: Mutex::new(memory),
            resolver,
            index: Mutex::new(None),
            db: Mutex::new(db),
            key,
            meters: Mutex::default(),
            pins: Mutex::default(),
            audit: dir.join("desk-audit.log"),
            counter: TokenCounter::shared(less_contract::Encoding::default()),
        })
    }

    /// The client `id`.
    pub fn client(&self, id: &str) -> Client {
        self.config.client(id)
    }

    /// Validates `document` (as `kind`, or the kind its fields say).
    pub fn validate(&self, document: &Value, kind: Option<&str>) -> Result<(DocKind, Vec<Violation>), Violation> {
        match kind {
            Some(name) => {
                let kind: DocKind =
                    name.parse().map_err(|err: String| Violation::new(ErrorCode::KindUnknown, "/kind", err))?;
                Ok((kind, validate(kind, document)))
            }
            None => match less_contract::validate_inferred(document) {
                (Some(kind), violations) => Ok((kind, violations)),
                (None, _) => Err(Violation::new(
                    ErrorCode::KindUnknown,
                    "",
                    "the document's fields say no kind; name it with `kind`",
                )),
            },
        }
    }

    /// Completes, validates and stores an engram as `who`, in its project.
    ///
    /// What a host's model leaves out is filled in first ([`complete_engram`]): the content-derived id, the
    /// provenance (now, `who`, agent), the default confidence, TTL and scope; pointers may be given as text. Whatever
    /// is still wrong is refused with its code and path (relative to the engram).
    pub fn put_engram(&self, who: &Client, engram: &Value) -> Result<PutAnswer, Violation> {
        let engram = complete_engram(who, engram)?;
        let mut memory = self.memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let report =
            memory.put_as(&self.principal(who), &engram, &who.project, now_unix()).map_err(memory_violation)?;
        // Durable at the store's commit; the recall index catches up before the next query (here, or in another
        // process from the store's generation), so a put does not wait for an index commit.
        let outcome = if !report.contradictions.is_empty() {
            "risk".to_owned()
        } else if !report.superseded.is_empty() {
            "superseded".to_owned()
        } else {
            match &report.outcome {
                crate::memory::PutOutcome::Stored { .. } => "stored",
                crate::memory::PutOutcome::Duplicate { .. } => "duplicate",
                crate::memory::PutOutcome::Revived { .. } => "revived",
            }
            .to_owned()
        };
        Ok(PutAnswer {
            id: report.outcome.id().to_owned(),
            outcome,
            superseded: report.superseded,
            contradictions: report.contradictions,
        })
    }

    /// Two-stage recall in `who`'s project.
    pub fn query(
        &self,
        who: &Client,
        query: &str,
        k: Option<usize>,
        kind: Option<&str>,
        scope: Option<Scope>,
    ) -> Result<Vec<Engram>, Violation> {
        let options = QueryOptions {
            k: k.unwrap_or(5),
            kind: kind.map(str::to_owned),
            scope,
            project: Some(who.project.clone()),
            include_cold: false,
            now: Some(now_unix()),
        };
        let mut memory = self.memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let recall = memory.query_as(&self.principal(who), query, &options).map_err(memory_violation)?;
        Ok(recall
            .hits
            .into_iter()
            .map(|hit| {
                let mut engram = hit.stored.engram;
                engram.hash_keys = None;
                engram
            })
            .collect())
    }

    /// Dereferences `pointers` (at most [`MAX_DEREF_POINTERS`]) as `who`: within this turn's budget, or under
    /// `grant_id`. Returns the items and what the whole files would have cost (the baseline).
    ///
    /// What can be refused without reading is refused before any file is read: too many pointers, a pointer outside
    /// the caller's reach without a grant, more spans than the turn has left without a grant, a grant that is not the
    /// caller's, is spent or expired, or does not cover the pointers. Each file is read once per call.
    ///
    /// Digests are pinned per client and per turn ([`Desk::checkpoint`] ends a turn): within a turn, content that
    /// changed since the caller read it is `LESS_DIGEST_MISMATCH` (no phantom reads); in a later turn it is read
    /// afresh, and the item names the digest the caller read before ([`DerefItem::changed_from`]).
    pub fn deref(
        &self,
        who: &Client,
        pointers: &[String],
        grant_id: Option<&str>,
    ) -> Result<(Vec<DerefItem>, u32), Violation> {
        let parsed = parse_pointers(pointers, "/pointers")?;
        let items = self.read_metered(who, &parsed, grant_id)?;
        // The whole source of each pointer, read once however many of its spans were asked for.
        let wholes: Vec<Pointer> = parsed.iter().map(Pointer::whole).collect();
        let mut distinct: Vec<Pointer> = wholes.clone();
        distinct.sort_by_key(ToString::to_string);
        distinct.dedup();
        let texts = self.resolver()?.read_unpinned_all(&distinct, &self.sam(who));
        let whole_tokens: HashMap<String, u32> = distinct
            .iter()
            .zip(texts)
            .map(|(whole, text)| (whole.to_string(), text.map_or(0, |text| self.counter.count(&text))))
            .collect();
        let baseline = wholes
            .iter()
            .map(|whole| whole_tokens.get(&whole.to_string()).copied().unwrap_or(0))
            .fold(0, u32::saturating_add);
        Ok((items, baseline))
    }

    /// Resolves `parsed` as `who` under the deref rules ([`Desk::deref`]): reach, the turn's budget or a grant, the
    /// client's pins. The meter (or the grant) is charged and the pins taken only when everything is delivered.
    fn read_metered(
        &self,
        who: &Client,
        parsed: &[Pointer],
        grant_id: Option<&str>,
    ) -> Result<Vec<DerefItem>, Violation> {
        if parsed.is_empty() || parsed.len() > MAX_DEREF_POINTERS {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/pointers",
                format!(
                    "{} pointers in one deref; name 1 to {MAX_DEREF_POINTERS}: split the request over several calls, or \
                     name one wider span (repo:src/lib.rs#L1-L200) instead of many narrow ones",
                    parsed.len()
                ),
            ));
        }
        // The core's check step: reach, the turn's counts or the grant, before anything is read.
        let reader = Reader { id: &who.id, budget: &who.budget, reach: &who.reach };
        let now = time::OffsetDateTime::now_utc();
        let plan = {
            let meter = self.meter(who);
            let mut db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            check_deref(&reader, &meter, parsed, |_| false, grant_id, &self.grants(&mut db), now)?
        };
        let resolved = self.resolve_pinned(who, parsed)?;
        let items: Vec<(Pointer, u32)> =
            resolved.iter().map(|r| (r.pointer.clone(), self.counter.count(&r.content))).collect();
        // The commit step: the turn's meter is charged under its lock; a grant is spent after it is released (the
        // spend may wait for another process's write).
        let charge = {
            let mut meters = self.meters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            plan.charge(&who.budget, meters.entry(who.id.clone()).or_default(), &items)?
        };
        if let Charge::Grant(grant_id) = charge {
            let mut db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            spend_on_deref(&mut self.grants(&mut db), &grant_id, &who.id, &items, now)?;
        }
        let changed = self.take_pins(who, &resolved);
        Ok(resolved
            .into_iter()
            .zip(items)
            .zip(changed)
            .map(|((r, (_, tokens)), changed_from)| DerefItem {
                pointer: r.pointer.to_string(),
                content: r.content,
                digest: r.digest.to_string(),
                tokens,
                changed_from,
            })
            .collect())
    }

    /// Resolves `parsed` against `who`'s pins of this turn, leaving them as they are: [`Desk::take_pins`] pins what
    /// is delivered.
    fn resolve_pinned(&self, who: &Client, parsed: &[Pointer]) -> Result<Vec<crate::resolver::Resolved>, Violation> {
        let mut turn_pins = self.pins(|pins| pins.get(&who.id).map(|c| c.turn.clone()).unwrap_or_default());
        let resolved = self.resolver()?.resolve_with(parsed, &self.sam(who), &mut turn_pins).map_err(|mut v| {
            if v.code == ErrorCode::DigestMismatch {
                v.message.push_str(
                    " in this turn; content does not change under a client within its turn: call less_checkpoint to \
                     end the turn, then dereference it again (the answer names the digest read before)",
                );
            }
            v
        })?;
        Ok(resolved)
    }

    /// Pins the digests of `resolved` in `who`'s turn (by the pointer's text form, as the resolver pins); for each,
    /// the digest `who` read in an earlier turn when the content changed since.
    fn take_pins(&self, who: &Client, resolved: &[crate::resolver::Resolved]) -> Vec<Option<String>> {
        self.pins(|pins| {
            let client = pins.entry(who.id.clone()).or_default();
            resolved
                .iter()
                .map(|r| {
                    let key = r.pointer.to_string();
                    client.turn.insert(key.clone(), r.digest);
                    client.earlier.remove(&key).filter(|d| *d != r.digest).map(|d| d.to_string())
                })
                .collect()
        })
    }

    /// `who`'s deref meter for this turn.
    fn meter(&self, who: &Client) -> DerefMeter {
        let meters = self.meters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        meters.get(&who.id).copied().unwrap_or_default()
    }

    /// The workspace's resolver, or the refusal of a server started without one.
    fn resolver(&self) -> Result<&Resolver, Violation> {
        self.resolver.as_ref().ok_or_else(|| {
            Violation::new(
                ErrorCode::PointerUnresolved,
                "",
                "this server has no workspace to resolve pointers in; start it with --workspace DIR",
            )
        })
    }

    fn pins<T>(&self, work: impl FnOnce(&mut HashMap<String, ClientPins>) -> T) -> T {
        work(&mut self.pins.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Searches the workspace as `who`: the best `k` chunks within its reach, as pointers with one-line previews,
    /// metered like an inline message (over the caller's `max_inline_tokens`: `LESS_BUDGET_EXCEEDED`, naming the `k`
    /// that fits). Returns the hits, their tokens as the caller reads them, and what pasting the hits' content (the
    /// baseline) would have cost.
    pub fn search(&self, who: &Client, query: &str, k: usize) -> Result<SearchAnswer, Violation> {
        self.with_index("search", |index| self.search_in(index, who, query, k))
    }

    /// The workspace's index (opened the first time, beside the store: the desk's clients share it), brought up to
    /// date with the files first (files change under an MCP host's feet; a walk and a stat when nothing did), then
    /// `work` on it. A server without a workspace refuses, saying it has none to `what`.
    fn with_index<T>(
        &self,
        what: &str,
        work: impl FnOnce(&mut crate::workspace::WorkspaceIndex) -> Result<T, Violation>,
    ) -> Result<T, Violation> {
        let root = self.resolver.as_ref().map(|r| r.root().to_owned()).ok_or_else(|| {
            Violation::new(
                ErrorCode::PointerUnresolved,
                "",
                format!("this server has no workspace to {what}; start it with --workspace DIR"),
            )
        })?;
        let mut slot = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            let at = self.dir.join(crate::layout::DESK_WORKSPACE_INDEX_DIR);
            *slot = Some(crate::workspace::WorkspaceIndex::open_in(&root, &at).map_err(|e| e.violation())?);
        }
        let index = slot.as_mut().ok_or_else(|| Violation::new(ErrorCode::RunFailed, "", "no workspace index"))?;
        index.refresh(&crate::Silent).map_err(|e| e.violation())?;
        work(index)
    }

    fn search_in(
        &self,
        index: &mut crate::workspace::WorkspaceIndex,
        who: &Client,
        query: &str,
        k: usize,
    ) -> Result<SearchAnswer, Violation> {
        let reach = who.reach.clone();
        let keep = move |hit: &crate::workspace::Hit| Pointer::parse(&hit.pointer).is_ok_and(|p| reach.covers(&p));
        let found = index.search(query, k, crate::memory::Stages::HashRerank, &keep).map_err(|e| e.violation())?;
        let lines: Vec<String> = found.hits.iter().map(crate::workspace::Hit::line).collect();
        let tokens = self.counter.count(&lines.join("\n"));
        let fit = || crate::workspace::fitting(&found.hits, self.counter, who.budget.max_inline_tokens);
        crate::enforce::check_search(found.hits.len(), tokens, fit, &who.budget)?;
        let baseline = found
            .hits
            .iter()
            .map(|h| index.read(&h.pointer).map_or(0, |text| self.counter.count(&text)))
            .sum::<u32>()
            .max(tokens);
        Ok(SearchAnswer { hits: found.hits, tokens, baseline, stages: found.stages, degraded: found.degraded })
    }

    /// The grants of the store, read and spent through `db` (locked by the caller).
    fn grants<'a>(&'a self, db: &'a mut Connection) -> DeskGrants<'a> {
        DeskGrants { db, key: &self.key, config: &self.config }
    }

    /// Keeps `terms` signed with the store's key, whole, as [`Desk::issue_grant`] keeps what it issues, without its
    /// checks: grants the suite of the enforcement core gives directly (expired, forged with `edit` after signing).
    #[cfg(test)]
    pub(crate) fn keep_grant(&self, terms: GrantTerms, edit: impl FnOnce(&mut Grant)) -> Result<(), Violation> {
        let mut grant = Grant::issue(terms, &self.key);
        edit(&mut grant);
        grants::keep(&self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner), &grant)
    }

    /// Files a request to `who`'s parent for a dereference over its budget.
    pub fn request_deref(&self, who: &Client, pointers: &[String], reason: &str) -> Result<String, Violation> {
        let parent = who.parent.clone().ok_or_else(|| {
            Violation::new(
                ErrorCode::ArgumentInvalid,
                "",
                format!(
                    "{} has no parent to ask; give it one in the desk configuration ([clients.{}] parent)",
                    who.id, who.id
                ),
            )
        })?;
        parse_pointers(pointers, "/pointers")?;
        if pointers.is_empty() || pointers.len() > MAX_DEREF_POINTERS {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/pointers",
                format!("{} pointers; a request names 1 to {MAX_DEREF_POINTERS}: file several", pointers.len()),
            ));
        }
        let reason: String = reason.chars().take(200).collect();
        let request_id = format!(
            "dr-{}",
            &blake3::hash(format!("{}|{pointers:?}|{}", who.id, now_nanos()).as_bytes()).to_hex()[..12]
        );
        let pointers_json = serde_json::to_string(pointers).map_err(|err| store_failed("desk request", err))?;
        let db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        db.execute(
            "INSERT INTO requests (request_id, requester, parent, pointers, reason, status) VALUES (?1, ?2, ?3, ?4, ?5, 'pending')",
            params![request_id, who.id, parent, pointers_json, reason],
        )
        .map_err(|err| store_failed("desk requests", err))?;
        Ok(request_id)
    }

    /// Issues a grant from `who` to its descendant; answers a request if the grant names it.
    pub fn issue_grant(&self, who: &Client, grant: &NewGrant) -> Result<Grant, Violation> {
        let NewGrant { to, patterns, uses, ttl, max_tokens, answers } = grant;
        let to = to.as_str();
        let grant_id = format!(
            "g-{}",
            &blake3::hash(format!("{}|{to}|{patterns:?}|{}", who.id, now_nanos()).as_bytes()).to_hex()[..12]
        );
        if patterns.is_empty() {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/pointers",
                "name at least one pointer or pattern",
            ));
        }
        let ttl =
            Ttl::parse(ttl.as_deref().unwrap_or("PT1H")).map_err(|v| Violation { path: "/ttl".to_owned(), ..v })?;
        if ttl.duration() < std::time::Duration::from_secs(1) {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/ttl",
                format!("ttl {ttl} would be born expired: give a grant at least PT1S to live (default PT1H)"),
            ));
        }
        let uses = uses.unwrap_or(1);
        if uses == 0 {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/uses",
                "uses 0 grants nothing: give 1 or more (default 1), or issue no grant",
            ));
        }
        let expires =
            time::OffsetDateTime::now_utc().replace_nanosecond(0).unwrap_or_else(|_| time::OffsetDateTime::now_utc())
                + ttl.duration();
        let expires_at = expires
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|err| Violation::new(ErrorCode::ArgumentInvalid, "/ttl", err.to_string()))?;
        let terms = GrantTerms {
            grant_id: grant_id.clone(),
            issuer: who.id.clone(),
            grantee: to.to_owned(),
            patterns: patterns.to_vec(),
            max_derefs: u32::try_from(patterns.len()).unwrap_or(u32::MAX).saturating_mul(uses),
            max_tokens: max_tokens.unwrap_or(4000),
            inline_code_tokens: 0,
            expires_at,
            uses,
        };
        // The desk's argument is `pointers`: a pattern's refusal names it there.
        let is_descendant = self.config.is_ancestor(&who.id, to);
        let mut db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        check_issue(&terms, is_descendant, &who.reach, &self.grants(&mut db), time::OffsetDateTime::now_utc())
            .map_err(|v| Violation { path: v.path.replace("/patterns/", "/pointers/"), ..v })?;
        drop(db);
        let grant = Grant::issue(terms, &self.key);
        Valid::new(grant.clone()).map_err(|v| {
            v.0.into_iter().next().unwrap_or_else(|| Violation::new(ErrorCode::SchemaInvalid, "", "invalid grant"))
        })?;
        let mut db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // The request it answers is checked and marked in the transaction that stores the grant.
        let failed = |err: rusqlite::Error| store_failed("desk grants", err);
        let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(failed)?;
        if let Some(request) = answers {
            let answered = tx
                .execute(
                    "UPDATE requests SET status = 'granted'
                     WHERE request_id = ?1 AND parent = ?2 AND requester = ?3 AND status = 'pending'",
                    params![request, who.id, to],
                )
                .map_err(failed)?;
            if answered != 1 {
                return Err(Violation::new(
                    ErrorCode::ArgumentInvalid,
                    "/answers",
                    format!(
                        "{request} is no pending request of {to} to {}: answer a request less_checkpoint lists, or \
                         leave `answers` out",
                        who.id
                    ),
                ));
            }
        }
        grants::keep(&tx, &grant)?;
        tx.commit().map_err(failed)?;
        Ok(grant)
    }

    /// Ends `who`'s turn (its deref budget starts again) and says what waits for it: requests from its children,
    /// grants it holds.
    ///
    /// The digests `who` read in the turn it ends stop binding it: content changed since is read afresh in the next
    /// turn, and the answer says it changed ([`DerefItem::changed_from`]).
    pub fn checkpoint(&self, who: &Client) -> Result<(Vec<RequestView>, Vec<HeldView>), Violation> {
        self.meters.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&who.id);
        self.pins(|pins| {
            if let Some(client) = pins.get_mut(&who.id) {
                let turn = std::mem::take(&mut client.turn);
                if client.earlier.len() + turn.len() > MAX_EARLIER_PINS {
                    client.earlier.clear();
                }
                client.earlier.extend(turn);
            }
        });
        let db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut statement = db
            .prepare("SELECT request_id, requester, pointers, reason, status FROM requests WHERE parent = ?1 AND status = 'pending' ORDER BY rowid")
            .map_err(|err| store_failed("desk requests", err))?;
        let requests = statement
            .query_map(params![who.id], |r| {
                let pointers: String = r.get(2)?;
                Ok(RequestView {
                    request_id: r.get(0)?,
                    requester: r.get(1)?,
                    pointers: serde_json::from_str(&pointers).map_err(|err| {
                        rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(err))
                    })?,
                    reason: r.get(3)?,
                    status: r.get(4)?,
                })
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|err| store_failed("desk requests", err))?;
        let mut statement = db
            .prepare("SELECT doc, uses_left, derefs_left, tokens_left FROM grants WHERE grantee = ?1 AND uses_left > 0 ORDER BY rowid")
            .map_err(|err| store_failed("desk grants", err))?;
        let held = statement
            .query_map(params![who.id], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(Iterator::collect::<Result<Vec<(String, u32, u32, u32)>, _>>)
            .map_err(|err| store_failed("desk grants", err))?
            .into_iter()
            .filter_map(|(doc, uses_left, derefs_left, tokens_left)| {
                let grant: Grant = serde_json::from_str(&doc).ok()?;
                Some(HeldView { terms: grant.terms, uses_left, derefs_left, tokens_left })
            })
            .collect();
        Ok((requests, held))
    }

    /// One level of the lossless memory below `id` (a node or a message of the caller's project), redacted as every
    /// answer that shows archived text is (`expand_query`, the page): secrets and addresses in the messages' content
    /// become credential references and `[REDACTED_IP]`. The archive itself keeps them verbatim.
    pub fn expand(&self, who: &Client, id: &str) -> Result<Value, Violation> {
        let mut expansion = self.with_dag(|dag| dag.expand(id))?;
        for child in std::iter::once(&mut expansion.target).chain(expansion.children.iter_mut()) {
            let content = match child {
                Child::Node(node) => &mut node.content,
                Child::Message(message) => &mut message.content,
            };
            *content = crate::context::redact(content).text;
        }
        let project = match &expansion.target {
            Child::Node(node) => &node.project,
            Child::Message(message) => &message.project,
        };
        if *project != who.project {
            // Said as not found: another project's ids are not the caller's to learn about.
            return Err(Violation::new(
                ErrorCode::PointerUnresolved,
                "/id",
                format!("no node or message {id} in {}", who.project),
            ));
        }
        serde_json::to_value(&expansion).map_err(|err| store_failed("expansion", err))
    }

    /// Answers `question` from the raw messages of the caller's project within `max_tokens`, citing them.
    pub fn expand_query(&self, who: &Client, question: &str, max_tokens: Option<u32>) -> Result<Value, Violation> {
        let answer = self.with_dag(|dag| dag.expand_query(question, max_tokens.unwrap_or(800), Some(&who.project)))?;
        serde_json::to_value(&answer).map_err(|err| store_failed("answer", err))
    }

    /// What depends on `pointer` in the caller's project, layer by layer, at `min_confidence` or above.
    pub fn impact(&self, who: &Client, pointer: &str, min_confidence: Option<f64>) -> Result<Value, Violation> {
        let pointer = Pointer::parse(pointer).map_err(|v| Violation { path: "/pointer".to_owned(), ..v })?;
        let mut impact = self.with_dag(|dag| dag.impact(&pointer, min_confidence.unwrap_or(0.0)))?;
        impact.items.retain(|item| item.project == who.project);
        serde_json::to_value(&impact).map_err(|err| store_failed("impact", err))
    }

    fn with_dag<T>(&self, work: impl FnOnce(&mut Dag) -> Result<T, DagError>) -> Result<T, Violation> {
        let mut dag = self.dag.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if dag.is_none() {
            *dag = Some(Dag::open(&self.dir, DagConfig::default()).map_err(dag_violation)?);
        }
        match dag.as_mut() {
            Some(dag) => work(dag).map_err(dag_violation),
            None => Err(store_failed("the archive", "not open")),
        }
    }

    /// The context ledger of `messages` (a JSON array of chat messages).
    pub fn compact(&self, messages: &Value, hot_tail: Option<usize>) -> Result<Value, Violation> {
        let messages: Vec<ChatMessage> = serde_json::from_value(messages.clone()).map_err(|err| {
            Violation::new(ErrorCode::TranscriptInvalid, "/messages", format!("not a list of chat messages: {err}"))
        })?;
        for (idx, message) in messages.iter().enumerate() {
            crate::context::check_role(&message.role, idx, "/messages")?;
        }
        let mut config = CompactConfig::default();
        if let Some(hot_tail) = hot_tail {
            config.hot_tail = hot_tail;
        }
        let compaction = compact_report(&messages, &config);
        let stats = compact_stats(&messages, &compaction.messages, &config);
        let report = serde_json::json!({
            "messages": compaction.messages, "stats": stats, "warning": compaction.warning, "note": compaction.note,
        });
        Ok(report)
    }

    /// Writes one call to the ledger and the audit log.
    pub fn record(
        &self,
        who: &Client,
        tool: &str,
        tokens_in: u32,
        tokens_out: u32,
        baseline: u32,
        code: Option<ErrorCode>,
    ) {
        let at = now_unix();
        let db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let written = db.execute(
            "INSERT INTO calls (at, client, role, tool, tokens_in, tokens_out, baseline, code) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![at, who.id, who.role, tool, tokens_in, tokens_out, baseline, code.map(|c| c.as_str())],
        );
        if let Err(err) = written {
            tracing::warn!(target: "less.desk", %err, "a call was not written to the desk's ledger");
        }
        let line = format!(
            "{at}\t{}\t{}\t{}\t{tool}\tin={tokens_in}\tout={tokens_out}\tbaseline={baseline}{}\n",
            who.id,
            who.role,
            who.identity,
            code.map(|c| format!("\t{c}")).unwrap_or_default()
        );
        // Refusing a link or a FIFO in its place, as every file lessrt writes.
        let appended = crate::files::append(&self.audit).and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(err) = appended {
            tracing::warn!(target: "less.desk", %err, "a call was not written to the desk's audit log");
        }
    }

    /// Tokens per client (role) and tool, from the ledger; only `role`'s when given.
    pub fn ledger_report(&self, role: Option<&str>) -> Result<Vec<LedgerRow>, Violation> {
        let db = self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut statement = db
            .prepare(
                "SELECT client, role, tool, COUNT(*), SUM(code IS NOT NULL), SUM(tokens_in), SUM(tokens_out), SUM(baseline)
                 FROM calls WHERE ?1 IS NULL OR role = ?1 GROUP BY client, role, tool ORDER BY client, tool",
            )
            .map_err(|err| store_failed("desk ledger", err))?;
        statement
            .query_map(params![role], |r| {
                Ok(LedgerRow {
                    client: r.get(0)?,
                    role: r.get(1)?,
                    tool: r.get(2)?,
                    calls: r.get::<_, i64>(3)?.unsigned_abs(),
                    refused: r.get::<_, i64>(4)?.unsigned_abs(),
                    tokens_in: r.get::<_, i64>(5)?.unsigned_abs(),
                    tokens_out: r.get::<_, i64>(6)?.unsigned_abs(),
                    baseline_tokens: r.get::<_, i64>(7)?.unsigned_abs(),
                })
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|err| store_failed("desk ledger", err))
    }

    /// Tokens of `text` with the desk's tokenizer.
    pub fn tokens(&self, text: &str) -> u32 {
        self.counter.count(text)
    }

    /// The gate adapter: a gate's report file (in the workspace) becomes a `gate_report` message from `who` to its
    /// parent that carries only a reference to the report (`artifact:<path>`, with the report's digest), never its
    /// text. The status is `status` when given, else read from the report ([`gate_status`]); a report that says
    /// neither is refused, so a verdict is never guessed. Returns the validated message, its tokens and the report's.
    ///
    /// The report is read as `who` reads: a report outside its reach is refused as a deref would be
    /// (`LESS_DEREF_DENIED`; a verdict and a size are what it would learn of a file it may not read), and its digest
    /// is pinned in `who`'s turn like a deref's. It is not metered against the turn's deref budget: its text never
    /// reaches the caller.
    pub fn gate_report(
        &self,
        who: &Client,
        gate_id: &str,
        report: &str,
        status: Option<GateStatus>,
    ) -> Result<(Valid<TypedMessage>, u32, u32), Violation> {
        let pointer = Pointer::new(PointerType::Artifact, report, None)
            .map_err(|v| Violation { path: "/report".to_owned(), ..v })?;
        if !who.reach.covers(&pointer) {
            let violation = outside_reach(&who.id, &who.reach, &pointer);
            return Err(Violation { path: "/report".to_owned(), ..violation });
        }
        let resolved = self
            .resolve_pinned(who, std::slice::from_ref(&pointer))
            .map_err(|v| Violation { path: "/report".to_owned(), ..v })?;
        self.take_pins(who, &resolved);
        let Some(resolved) = resolved.into_iter().next() else {
            return Err(Violation::new(ErrorCode::PointerUnresolved, "/report", format!("no report {report}")));
        };
        let status = match status.or_else(|| gate_status(&resolved.content)) {
            Some(status) => status,
            None => {
                return Err(Violation::new(
                    ErrorCode::ArgumentInvalid,
                    "/status",
                    format!("{report} says neither pass nor fail in a form this adapter reads; give `status`"),
                ));
            }
        };
        let message = TypedMessage {
            from: who.id.clone(),
            msg_id: format!(
                "gr-{}",
                &blake3::hash(format!("{}|{gate_id}|{}", who.id, now_nanos()).as_bytes()).to_hex()[..12]
            ),
            to: who.parent.clone(),
            engrams: Vec::new(),
            deref_requests: Vec::new(),
            body: None,
            grant_id: None,
            payload: Payload::GateReport {
                gate_id: gate_id.to_owned(),
                status,
                report_ref: Some(format!("{}", resolved.pointer)),
            },
        };
        let message = Valid::new(message).map_err(|v| {
            v.0.into_iter()
                .next()
                .unwrap_or_else(|| Violation::new(ErrorCode::SchemaInvalid, "", "invalid gate report"))
        })?;
        let text = serde_json::to_string(&*message).map_err(|err| store_failed("gate report", err))?;
        Ok((message, self.counter.count(&text), self.counter.count(&resolved.content)))
    }

    /// Sets symbol `id` to `value` in `who`'s project.
    pub fn symbol_set(&self, who: &Client, id: &str, value: &str) -> Result<(), Violation> {
        let shared = self.shared();
        // A client may not replace what it may not see.
        let held = match shared.symbol_resolve(&who.project, id, false) {
            Err(v) if v.code == ErrorCode::PointerUnresolved => Vec::new(),
            held => held?,
        };
        if held.iter().any(|(_, old)| !symbol_within_reach(who, old)) {
            return Err(Violation::new(
                ErrorCode::ScopeDenied,
                "/id",
                format!("symbol {id} names a place outside {}'s reach; choose another id", who.id),
            ));
        }
        shared.symbol_set(&who.project, id, value)
    }

    /// The value of symbol `text`, or with `reverse` the symbols whose value is `text`: `(id, value)` pairs.
    pub fn symbol_resolve(&self, who: &Client, text: &str, reverse: bool) -> Result<Vec<(String, String)>, Violation> {
        let found = self.shared().symbol_resolve(&who.project, text, reverse)?;
        Ok(found.into_iter().filter(|(_, value)| symbol_within_reach(who, value)).collect())
    }

    /// The symbol table of `who`'s project, less the entries whose value names a place outside `who`'s reach
    /// (another client's fill names every file it reaches).
    pub fn symbol_list(&self, who: &Client) -> Result<Vec<(String, String)>, Violation> {
        let listed = self.shared().symbol_list(&who.project)?;
        Ok(listed.into_iter().filter(|(_, value)| symbol_within_reach(who, value)).collect())
    }

    /// Fills `who`'s project's symbol table from the workspace index: every indexed file under `pattern` (as
    /// `WorkspaceIndex::list` reads it; empty: every file) within the caller's reach gets an id `F<n>` for its
    /// path, unless one of its ids has that value already (kept: ids are stable). More than
    /// [`MAX_SYMBOL_FILL`] files at once is refused with a narrower pattern to name.
    pub fn symbol_fill(&self, who: &Client, pattern: &str) -> Result<SymbolFill, Violation> {
        let files = self.with_index("fill symbols from", |index| index.list(pattern).map_err(|e| e.violation()))?;
        let paths: Vec<String> = files
            .into_iter()
            .map(|file| file.path)
            .filter(|path| Pointer::parse(&format!("repo:{path}")).is_ok_and(|p| who.reach.covers(&p)))
            .collect();
        if paths.is_empty() {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/pattern",
                format!(
                    "no indexed file within this client's reach matches {pattern:?}: name a path, a directory or a glob of the workspace (less_search shows what is indexed)"
                ),
            ));
        }
        if paths.len() > MAX_SYMBOL_FILL {
            return Err(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/pattern",
                format!(
                    "{} files match {pattern:?}; fill at most {MAX_SYMBOL_FILL} at a time: name a directory or a glob \
                     (src/net, **/*.rs)",
                    paths.len()
                ),
            ));
        }
        self.shared().symbol_fill(&who.project, &paths)
    }

    /// Writes a capsule (at most [`MAX_CAPSULE_LINES`] lines; its `depends` must exist).
    pub fn capsule_write(&self, who: &Client, capsule: &NewCapsule) -> Result<Capsule, Violation> {
        self.shared().capsule_write(&who.project, capsule)
    }

    /// The capsules `ids` need: their transitive `depends` closure, dependencies first, nothing else.
    pub fn capsule_hydrate(&self, who: &Client, ids: &[String]) -> Result<Vec<Capsule>, Violation> {
        self.shared().closure(&who.project, ids)
    }

    /// Sets a blackboard key; the value it replaces is kept, linked to the new one.
    pub fn blackboard_set(&self, who: &Client, key: &str, value: &str) -> Result<Entry, Violation> {
        self.shared().board_set(&who.project, key, value, &who.id)
    }

    /// The current value of a blackboard key.
    pub fn blackboard_get(&self, who: &Client, key: &str) -> Result<Entry, Violation> {
        self.shared().board_get(&who.project, key)
    }

    /// The blackboard of `who`'s project (current values).
    pub fn blackboard_list(&self, who: &Client) -> Result<Vec<Entry>, Violation> {
        self.shared().board_list(&who.project)
    }

    /// Claims `surfaces` for `who` (see [`crate::coord`]): refused with `LESS_CLAIM_CONFLICT` when they overlap another's
    /// live claim, unless `new` overrides it with a reason.
    pub fn claim(&self, who: &Client, new: &NewClaim) -> Result<Claimed, Violation> {
        let claimed = crate::coord::claim(&mut self.db(), actor(who), new, now_unix())?;
        for decision in &claimed.decisions {
            self.remember_decision(who, decision);
        }
        Ok(claimed)
    }

    /// Releases `who`'s live claim `claim_id`.
    pub fn release_claim(&self, who: &Client, claim_id: &str) -> Result<Claim, Violation> {
        crate::coord::release(&mut self.db(), actor(who), claim_id, now_unix())
    }

    /// Extends `who`'s live claim `claim_id` by `ttl_secs` from now.
    pub fn renew_claim(&self, who: &Client, claim_id: &str, ttl_secs: Option<u64>) -> Result<Claim, Violation> {
        crate::coord::renew(&mut self.db(), actor(who), claim_id, ttl_secs, now_unix())
    }

    /// The live claims of `who`'s project.
    pub fn claims(&self, who: &Client) -> Result<Vec<Claim>, Violation> {
        crate::coord::live_claims(&self.db(), &who.project, now_unix())
    }

    /// Appends `who`'s decision to its project's log, and puts its decision engram into memory (the engram's id;
    /// `None` when the memory refused it: the log entry stands either way).
    pub fn decide(&self, who: &Client, title: &str, body: &str) -> Result<(Decision, Option<String>), Violation> {
        let decision = crate::coord::decide(&mut self.db(), actor(who), title, body, now_unix())?;
        let engram = self.remember_decision(who, &decision);
        Ok((decision, engram))
    }

    /// Puts `decision`'s engram ([`crate::coord::decision_engram`]) into `who`'s project's memory, so a recall finds
    /// it and its pointer, `sam:decision:<id>`, reads the whole entry back.
    fn remember_decision(&self, who: &Client, decision: &Decision) -> Option<String> {
        let put = crate::coord::decision_engram(decision, &who.id, &less_contract::now_rfc3339(), Scope::Project)
            .and_then(|engram| {
                let mut memory = self.memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let report = memory.put_as(&self.principal(who), &engram, &who.project, now_unix());
                report.map(|report| report.outcome.id().to_owned()).map_err(memory_violation)
            });
        match put {
            Ok(id) => Some(id),
            Err(refused) => {
                tracing::warn!(target: "less.memory", "decision {} not in memory: {refused}", decision.decision_id);
                None
            }
        }
    }

    /// What `sam:` pointers read for `who`.
    fn sam<'a>(&'a self, who: &'a Client) -> DeskSam<'a> {
        DeskSam { db: &self.db, project: &who.project }
    }

    /// The decision log of `who`'s project after entry `after` (at most `limit` entries), and its conflict records.
    pub fn decisions(
        &self,
        who: &Client,
        after: i64,
        limit: usize,
    ) -> Result<(Vec<Decision>, Vec<Conflict>), Violation> {
        let db = self.db();
        Ok((crate::coord::decisions(&db, &who.project, after, limit)?, crate::coord::conflicts(&db, &who.project)?))
    }

    /// The whole decision log of `project` as Markdown.
    pub fn decisions_markdown(&self, project: &str) -> Result<String, Violation> {
        let db = self.db();
        let log = crate::coord::decisions(&db, project, 0, usize::MAX)?;
        Ok(crate::coord::markdown(project, &log, &crate::coord::conflicts(&db, project)?))
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Saves the memory's indexes (on shutdown).
    pub fn close(self) -> Result<(), Violation> {
        let memory = self.memory.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        memory.close().map_err(memory_violation)
    }

    fn principal(&self, who: &Client) -> Principal {
        let mut principal = Principal::agent(&who.id, &who.role, &who.project, "desk");
        principal.parent_of = self.config.descendants(&who.id);
        principal.shared = who.shared_reads;
        principal.reading(who.reads.clone())
    }
}

/// `who` as the coordination ledger names it.
/// Whether a symbol's value may be shown to `who`: one that names a place (a pointer, or a path: a `/`, a `\\`, a
/// `:` or a `.` in it) is shown only when it resolves to a place within `who`'s reach, every spelling of it
/// normalized first (`./`, `//`, `repo:`); one that leaves the workspace or does not parse is not shown to a
/// reach-limited client. Any other text is shown.
fn symbol_within_reach(who: &Client, value: &str) -> bool {
    if who.reach.is_whole() {
        return true;
    }
    let text = value.trim();
    if !text.contains(['/', '\\', ':', '.']) {
        return true;
    }
    if let Ok(pointer) = Pointer::parse(text) {
        return who.reach.covers(&pointer);
    }
    let bare = text.strip_prefix("repo:").unwrap_or(text);
    if bare.starts_with('/') || bare.contains("://") || bare.contains('\\') {
        return false;
    }
    let segments: Vec<&str> = bare.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    if segments.is_empty() || segments.contains(&"..") {
        return false;
    }
    Pointer::parse(&format!("repo:{}", segments.join("/"))).is_ok_and(|pointer| who.reach.covers(&pointer))
}

fn actor(who: &Client) -> crate::coord::Actor<'_> {
    crate::coord::Actor { id: &who.id, project: &who.project, identity: &who.identity }
}

/// `texts` parsed as pointers; the first that does not parse is refused at `<path>/<i>`.
fn parse_pointers(texts: &[String], path: &str) -> Result<Vec<Pointer>, Violation> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Pointer::parse(t).map_err(|v| Violation { path: format!("{path}/{i}"), ..v }))
        .collect()
}

/// The confidence `put_engram` gives an engram that states none (the contract builder's default).
pub const DEFAULT_CONFIDENCE: f64 = 0.8;
/// The TTL `put_engram` gives an engram that states none (the contract builder's default).
pub const DEFAULT_TTL: &str = "P7D";
/// The scope `put_engram` gives an engram that states none: the caller's project. A desk has no runs (its clients
/// share one, `desk`), so a `run` engram would be seen by the same clients while hidden from the project's runs.
pub const DEFAULT_SCOPE: Scope = Scope::Project;

/// Stands in for an id the desk derives, only while the rest of the engram is validated.
const PENDING_ID: &str = "eg_pending";

/// `given` with what a host's model leaves out filled in, then validated as an engram v0.1.
///
/// - `id` absent: derived from kind, claim and pointers by the contract's `EngramBuilder` (`eg_` and 16 hex digits of
///   blake3), so the same claim about the same sources gets the same id.
/// - `provenance` absent, or some of its fields: `created_at` now, `created_by` the caller's id, `source` `agent`.
/// - `confidence`, `ttl`, `scope` absent: [`DEFAULT_CONFIDENCE`], [`DEFAULT_TTL`], [`DEFAULT_SCOPE`].
/// - A pointer given as text (`repo:src/x.rs#L3-L9`) is parsed into its object form; one that does not parse is
///   `LESS_POINTER_INVALID` at `/pointers/<i>`.
///
/// A field sent as `null` counts as left out. What the caller gives is kept as given (a given id or provenance is
/// validated, never replaced). The first problem left is the refusal, with its code and path.
fn complete_engram(who: &Client, given: &Value) -> Result<Valid<Engram>, Violation> {
    let first = |violations: less_contract::Violations| {
        violations
            .0
            .into_iter()
            .next()
            .unwrap_or_else(|| Violation::new(ErrorCode::SchemaInvalid, "", "invalid engram"))
    };
    let Some(fields) = given.as_object() else { return Valid::from_value(given).map_err(first) };
    let mut doc = fields.clone();
    for key in ["id", "provenance", "confidence", "ttl", "scope"] {
        if doc.get(key).is_some_and(Value::is_null) {
            doc.remove(key);
        }
    }
    if let Some(Value::Array(pointers)) = doc.get_mut("pointers") {
        for (index, pointer) in pointers.iter_mut().enumerate() {
            let Value::String(text) = pointer else { continue };
            let parsed =
                Pointer::parse(text).map_err(|v| Violation::new(v.code, format!("/pointers/{index}"), v.message))?;
            *pointer = serde_json::to_value(&parsed).map_err(|err| {
                Violation::new(ErrorCode::PointerInvalid, format!("/pointers/{index}"), err.to_string())
            })?;
        }
    }
    doc.entry("confidence").or_insert_with(|| DEFAULT_CONFIDENCE.into());
    doc.entry("ttl").or_insert_with(|| DEFAULT_TTL.into());
    doc.entry("scope").or_insert_with(|| DEFAULT_SCOPE.as_str().into());
    if let Value::Object(provenance) = doc.entry("provenance").or_insert_with(|| Value::Object(Default::default())) {
        provenance.retain(|_, value| !value.is_null());
        provenance.entry("created_at").or_insert_with(|| less_contract::now_rfc3339().into());
        provenance.entry("created_by").or_insert_with(|| who.id.clone().into());
        provenance.entry("source").or_insert_with(|| "agent".into());
    }
    if doc.contains_key("id") {
        return Valid::from_value(&Value::Object(doc)).map_err(first);
    }
    // Everything but the id is checked first, so a refusal names what the caller can fix.
    doc.insert("id".to_owned(), PENDING_ID.into());
    let engram = Valid::<Engram>::from_value(&Value::Object(doc)).map_err(first)?.into_inner();
    let mut builder = Engram::builder(engram.kind, engram.claim.clone(), engram.provenance.created_by.clone())
        .confidence(engram.confidence)
        .ttl(engram.ttl.clone())
        .scope(engram.scope)
        .source(engram.provenance.source)
        .created_at(engram.provenance.created_at.clone());
    for pointer in &engram.pointers {
        builder = builder.pointer(pointer.clone());
    }
    for tag in engram.tags.iter().flatten() {
        builder = builder.tag(tag.clone());
    }
    let id = builder.build().map_err(first)?.into_inner().id;
    Valid::new(Engram { id, ..engram }).map_err(first)
}

/// The key grants are signed with: made once per store (32 bytes from the OS), readable by its owner only.
fn desk_key(path: &Path) -> Result<[u8; 32], Violation> {
    crate::files::secret_key(path, true).map_err(|err| store_failed(&path.display().to_string(), err))
}

fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn now_nanos() -> i128 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos()
}

mod grants;

use grants::DeskGrants;

pub use crate::coord::{Claim, Claimed, Conflict, Decision, NewClaim};
pub use crate::shared::{Entry, SymbolFill};
pub use less_contract::{Capsule, MAX_CAPSULE_LINES, NewCapsule};

#[cfg(test)]
mod tests;
