//! Access rules and hygiene of the memory (LESS spec §4.3, §8, §13): who may read, write and promote which
//! engrams, how fast an agent may write, and what happens when two engrams speak of the same subject.
//!
//! # Scopes
//!
//! An engram is stored in one project (and, when written during a run, with that run's id). Its scope says who reads
//! it: `run` — members of its project in the same run; `project` — members of its project; `org` and `global` —
//! every project of the store (a store serves one organisation; `global` marks what may later leave it).
//! Reading `org` and `global` engrams needs an administrator's enablement (LESS spec §13.3): [`Principal::shared`].
//! A run's agents have it when the scenario says `shared_reads = true` (its author administers the run); the desk's
//! clients when its configuration says so. Without it, such engrams are never returned by a query or a get, and a
//! query asking for the `org` or `global` scope is refused with `LESS_SCOPE_DENIED`.
//! A project's engrams are never readable from another project: a get is refused with `LESS_SCOPE_DENIED`, a query
//! naming a project the caller is not a member of is refused likewise, and a query never returns them.
//!
//! # Roles
//!
//! An engram tagged `role:<r>` (one or more) is read only by those roles, and by its creator; an engram without a
//! role tag is read by every role of the projects that see it. A [`Principal`] without a role (an operator) reads
//! every role. A role may also be limited to some scopes ([`Principal::reads`], from the `[memory] reads` table of
//! a scenario or of the desk's configuration): it then never reads the others, by query or by id.
//!
//! # Writes and promotion
//!
//! Members write `run` engrams in their own projects, and `project` ones unless the policy says otherwise
//! ([`MemoryPolicy::project_writes`]; LESS §4.3: "children can write run/project (configurable)"). The promotion
//! path run → project → org (LESS §8.1) is controlled by parents: only a principal whose `parent_of` lists the
//! engram's creator (its descendants in the hierarchy), a parent promoting its own engram, or an operator widens an
//! engram beyond run scope, and only when the engram's confidence is at least the promotion floor
//! ([`PROMOTION_CONFIDENCE_FLOOR`], configurable in [`MemoryPolicy`]; LESS §13.2: "confidence floor for promotion
//! beyond run scope"). Putting an engram directly at a scope the member may not write (`org`, `global`, and `project`
//! when project writes are off) is a promotion at write time and follows the same rule. Scopes only widen.
//!
//! # Hygiene
//!
//! * Rate limit: at most [`MemoryPolicy::puts_per_window`] engrams stored per writer in any window of
//!   [`MemoryPolicy::window_secs`] (a sliding window counted in the store, in the put's own write transaction, so
//!   it holds across restarts and concurrent processes); over it a put is refused with `LESS_RATE_LIMITED`, saying when to retry, and nothing is stored.
//!   Duplicates cost nothing; operators (bulk loads from the command line) are not limited.
//! * Dedup: the same content in the same project is stored once (`store.rs`). Another claim under an id the project
//!   already holds is refused with `LESS_ID_CONFLICT` (nothing is stored, and the held claim is unchanged). A claim
//!   another run holds privately (scope `run`) is never revived, moved or shown to the putting run: that run gets a
//!   copy of its own, stored under [`run_copy_id`] (the acknowledgement names it; [`Memory::get_as`] finds it from
//!   the plain id), and the owner keeps its engram as it was.
//! * Subject key: the tag `subject:<key>` (first one wins; the key is lowercased). When a new engram has the subject
//!   key of a hot engram of the same project (and, for run-scoped ones, of the same run):
//!   - same creator, or the new one is tagged `correction` by one who may modify the old one (its creator, a parent
//!     of its creator, an operator: as [`Memory::supersede_as`]): the new one supersedes the old one (linked both ways, the
//!     old one goes cold), unless the new one is narrower in scope, which would hide the old one from readers who
//!     cannot see its replacement: then both stay hot;
//!   - another creator, both facts, different claims: both stay hot and one `risk` engram records the contradiction
//!     (tag `contradiction`, its pointers the union of both engrams' pointers, deduplicated, at most 12). It is
//!     derived from the pair alone, so the same pair never yields a second one (dedup by content).
//! * TTL: expired engrams move to the cold tier; cold engrams are readable by id and by a query with
//!   [`QueryOptions::include_cold`].

use std::collections::BTreeSet;

use crate::memory::index::{RecallFilter, vis_key};
use crate::memory::store::{Placement, PutOutcome, StoreError, Stored, WriteCap, run_copy_id};
use crate::memory::{MAX_K, Memory, MemoryError, Recall, RecallRequest};
use less_contract::Valid;
use less_contract::{Engram, EngramKind, MAX_CLAIM_CHARS, MAX_POINTERS, MemorySettings, Scope, Source};
use less_contract::{ErrorCode, Violation};
use less_contract::{Pointer, PointerType};

/// Least confidence an engram needs to be promoted beyond run scope (LESS spec §13.2).
pub const PROMOTION_CONFIDENCE_FLOOR: f64 = 0.8;
/// Engrams one writer may store per window, by default.
pub const DEFAULT_PUTS_PER_WINDOW: u32 = 60;
/// The rate-limit window, by default (seconds).
pub const DEFAULT_RATE_WINDOW_SECS: i64 = 60;
/// Tag prefix of the subject key (`subject:deploy-target`).
pub const SUBJECT_TAG_PREFIX: &str = "subject:";
/// Tag prefix restricting reads to a role (`role:programmer`).
pub const ROLE_TAG_PREFIX: &str = "role:";
/// Tag marking an engram as a correction of what it supersedes, whoever wrote the earlier one.
pub const CORRECTION_TAG: &str = "correction";
/// Tag of the risk engrams that record contradictions.
pub const CONTRADICTION_TAG: &str = "contradiction";
/// The creator (and writer) of engrams the memory writes itself.
pub const MEMORY_AGENT: &str = "memory";

/// Limits of the access rules and hygiene.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryPolicy {
    /// Least confidence for a promotion beyond run scope.
    pub promotion_floor: f64,
    /// Whether members write `project` engrams directly; when false, project scope is a promotion (by a parent, at
    /// or above the floor), like org and global.
    pub project_writes: bool,
    /// Engrams one writer may store per window.
    pub puts_per_window: u32,
    /// The window, in seconds.
    pub window_secs: i64,
}

impl Default for MemoryPolicy {
    fn default() -> MemoryPolicy {
        MemoryPolicy {
            promotion_floor: PROMOTION_CONFIDENCE_FLOOR,
            project_writes: true,
            puts_per_window: DEFAULT_PUTS_PER_WINDOW,
            window_secs: DEFAULT_RATE_WINDOW_SECS,
        }
    }
}

impl MemoryPolicy {
    /// The policy a `[memory]` table asks for: what it leaves out keeps the default.
    pub fn from_settings(settings: &MemorySettings) -> MemoryPolicy {
        let default = MemoryPolicy::default();
        MemoryPolicy {
            promotion_floor: settings.promotion_floor.unwrap_or(default.promotion_floor),
            project_writes: settings.writes.as_ref().is_none_or(|writes| writes.contains(&Scope::Project)),
            puts_per_window: settings.puts_per_window.unwrap_or(default.puts_per_window),
            window_secs: settings.window_secs.unwrap_or(default.window_secs),
        }
    }

    /// Whether a member writes at `scope` without a parent's promotion.
    pub fn writes_directly(&self, scope: Scope) -> bool {
        match scope {
            Scope::Run => true,
            Scope::Project => self.project_writes,
            Scope::Org | Scope::Global => false,
        }
    }
}

/// Who is calling the memory: given by the runtime from the scenario tree (or by the command line), never by the
/// agent itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Principal {
    /// The agent id.
    pub agent: String,
    /// Its role; none reads every role (operators).
    pub role: Option<String>,
    /// The projects it is a member of (reads and writes happen there).
    pub projects: Vec<String>,
    /// The run it acts in (empty: outside any run).
    pub run: String,
    /// The agents below it in the hierarchy (children, grandchildren…), whose engrams it may promote.
    pub parent_of: Vec<String>,
    /// An operator (the command line): stands above every agent, promotes anyone's engrams (above the floor), and
    /// is not rate-limited.
    pub operator: bool,
    /// Whether it reads `org` and `global` engrams (LESS spec §13.3: enabled by an administrator).
    pub shared: bool,
    /// The scopes its role reads (`[memory] reads`); none: every scope (org and global only when `shared`).
    pub reads: Option<Vec<Scope>>,
}

impl Principal {
    /// An agent of `role`, member of `project`, acting in `run`.
    pub fn agent(agent: &str, role: &str, project: &str, run: &str) -> Principal {
        Principal {
            agent: agent.to_owned(),
            role: Some(role.to_owned()),
            projects: vec![project.to_owned()],
            run: run.to_owned(),
            parent_of: Vec::new(),
            operator: false,
            shared: true,
            reads: None,
        }
    }

    /// An operator acting as `agent` in `projects`, outside any run, reading every role.
    pub fn operator(agent: &str, projects: &[&str]) -> Principal {
        Principal {
            agent: agent.to_owned(),
            role: None,
            projects: projects.iter().map(|p| (*p).to_owned()).collect(),
            run: String::new(),
            parent_of: Vec::new(),
            operator: true,
            shared: true,
            reads: None,
        }
    }

    /// The same principal, parent of `agents`.
    pub fn parent_of(mut self, agents: impl IntoIterator<Item = impl Into<String>>) -> Principal {
        self.parent_of = agents.into_iter().map(Into::into).collect();
        self
    }

    /// The same principal, reading only `scopes` (its role's `[memory] reads`); none: every scope.
    pub fn reading(mut self, scopes: Option<Vec<Scope>>) -> Principal {
        self.reads = scopes;
        self
    }

    /// Whether it may read `stored` (scope, project, run and role).
    pub fn sees(&self, stored: &Stored) -> bool {
        let member = self.is_member(&stored.project);
        let scope = stored.engram.scope;
        let scope_ok = match scope {
            Scope::Run => member && stored.run == self.run,
            Scope::Project => member,
            Scope::Org | Scope::Global => self.shared,
        };
        scope_ok && self.reads_scope(scope) && self.reads_role(&stored.engram)
    }

    /// Whether its role reads engrams of `scope` at all (`[memory] reads`; org and global also need `shared`).
    pub fn reads_scope(&self, scope: Scope) -> bool {
        self.reads.as_ref().is_none_or(|scopes| scopes.contains(&scope))
    }

    /// Whether it is a member of `project`.
    pub fn is_member(&self, project: &str) -> bool {
        self.projects.iter().any(|p| p == project)
    }

    /// Whether it may promote engrams created by `creator` beyond run scope.
    pub fn may_promote(&self, creator: &str) -> bool {
        self.operator
            || self.parent_of.iter().any(|a| a == creator)
            || (creator == self.agent && !self.parent_of.is_empty())
    }

    /// Whether it may supersede or evict `stored`: its creator, a parent of its creator, or an operator, in the
    /// engram's own project.
    pub fn may_modify(&self, stored: &Stored) -> bool {
        let creator = stored.engram.provenance.created_by.as_str();
        self.is_member(&stored.project)
            && (self.operator || creator == self.agent || self.parent_of.iter().any(|a| a == creator))
    }

    fn reads_role(&self, engram: &Engram) -> bool {
        let roles = role_tags(engram);
        roles.is_empty()
            || engram.provenance.created_by == self.agent
            || self.role.as_ref().is_none_or(|role| roles.iter().any(|r| r == role))
    }

    /// The index filter of what it may recall under `options`.
    fn recall_filter(&self, options: &QueryOptions) -> Result<RecallFilter, Violation> {
        let projects: Vec<&str> = match &options.project {
            Some(project) if self.is_member(project) => vec![project.as_str()],
            Some(project) => {
                return Err(denied(format!(
                    "{} is not a member of project {project:?}, whose engrams are never readable from another \
                     project; query your own projects ({}) or ask a parent to promote what should be shared to org",
                    self.agent,
                    self.projects.join(", ")
                )));
            }
            None => self.projects.iter().map(String::as_str).collect(),
        };
        let scopes: Vec<Scope> = match options.scope {
            Some(scope @ (Scope::Org | Scope::Global)) if !self.shared => {
                return Err(denied(format!(
                    "{} may not read {} engrams: reading org and global scope needs an administrator's enablement \
                     (shared_reads = true in the desk's configuration); query your own project's run and project \
                     scopes",
                    self.agent,
                    scope.as_str()
                )));
            }
            Some(scope) if !self.reads_scope(scope) => {
                let readable: Vec<&str> = self.reads.iter().flatten().map(|s| s.as_str()).collect();
                return Err(denied(format!(
                    "{} reads only {} engrams ([memory] reads of role {}): query one of those scopes, or leave the \
                     scope out",
                    self.agent,
                    readable.join(" and "),
                    self.role.as_deref().unwrap_or("(none)")
                )));
            }
            Some(scope) => vec![scope],
            None if self.shared => vec![Scope::Run, Scope::Project, Scope::Org, Scope::Global],
            None => vec![Scope::Run, Scope::Project],
        };
        let scopes: Vec<Scope> = scopes.into_iter().filter(|s| self.reads_scope(*s)).collect();
        let mut visible = Vec::new();
        for scope in scopes {
            match scope {
                Scope::Run | Scope::Project => {
                    visible.extend(projects.iter().map(|p| vis_key(scope, p, &self.run)));
                }
                Scope::Org | Scope::Global => visible.push(vis_key(scope, "", "")),
            }
        }
        Ok(RecallFilter {
            visible,
            reader: self.role.clone().map(|role| (role, self.agent.clone())),
            kind: options.kind.clone(),
            include_cold: options.include_cold,
            now: options.now,
        })
    }
}

/// How to query.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueryOptions {
    /// Most engrams returned.
    pub k: usize,
    /// Only engrams of this kind.
    pub kind: Option<String>,
    /// Only engrams of this scope.
    pub scope: Option<Scope>,
    /// Only this project (the caller must be a member); all of the caller's projects when none.
    pub project: Option<String>,
    /// Cold engrams (expired, evicted, superseded) too.
    pub include_cold: bool,
    /// The time of the query (unix seconds): engrams whose TTL ran out by then are left out like cold ones, even
    /// before the sweep moves them. None: no TTL check. The memory actor and the command line always set it.
    pub now: Option<i64>,
}

impl Default for QueryOptions {
    fn default() -> QueryOptions {
        QueryOptions { k: 5, kind: None, scope: None, project: None, include_cold: false, now: None }
    }
}

/// What a put did, hygiene included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutReport {
    /// Stored, duplicate or revived.
    pub outcome: PutOutcome,
    /// Engrams it superseded (same subject key).
    pub superseded: Vec<String>,
    /// Risk engrams recording a contradiction with it (new or already recorded).
    pub contradictions: Vec<String>,
}

/// The subject key of an engram: its first `subject:<key>` tag, lowercased and trimmed.
pub fn subject_key(engram: &Engram) -> Option<String> {
    engram
        .tags
        .iter()
        .flatten()
        .find_map(|tag| tag.strip_prefix(SUBJECT_TAG_PREFIX))
        .map(|key| key.trim().to_lowercase())
        .filter(|key| !key.is_empty())
}

/// The roles an engram is restricted to (its `role:<r>` tags); empty: every role.
pub fn role_tags(engram: &Engram) -> Vec<String> {
    engram
        .tags
        .iter()
        .flatten()
        .filter_map(|tag| tag.strip_prefix(ROLE_TAG_PREFIX))
        .map(|role| role.trim().to_owned())
        .filter(|role| !role.is_empty())
        .collect()
}

fn denied(message: String) -> Violation {
    Violation::new(ErrorCode::ScopeDenied, "/scope", message)
}

fn refused(violation: Violation) -> MemoryError {
    MemoryError::Refused(violation)
}

impl Memory {
    /// The limits in force.
    pub fn policy(&self) -> MemoryPolicy {
        self.policy
    }

    /// Changes the limits (promotion floor, direct project writes, rate limit).
    pub fn set_policy(&mut self, policy: MemoryPolicy) {
        self.policy = policy;
    }

    /// Stores `engram` in `project` as `who`, after the access rules and the rate limit, then applies supersession
    /// and contradiction by subject key. Acknowledged after the store's commit; refused puts store nothing.
    pub fn put_as(
        &mut self,
        who: &Principal,
        engram: &Valid<Engram>,
        project: &str,
        now: i64,
    ) -> Result<PutReport, MemoryError> {
        if !who.is_member(project) {
            return Err(refused(denied(format!(
                "{} is not a member of project {project:?}; write to your own projects ({})",
                who.agent,
                who.projects.join(", ")
            ))));
        }
        if !self.policy.writes_directly(engram.scope) {
            self.check_promotion(who, &engram.provenance.created_by, engram.confidence, engram.scope)?;
        }
        let placement = Placement { project: project.to_owned(), run: who.run.clone(), written_by: who.agent.clone() };
        // The rate limit is counted in the put's own transaction, so writers in several processes never pass it.
        let put = if who.operator {
            self.store.put_placed(engram, &placement, now).map(Some)
        } else {
            let MemoryPolicy { puts_per_window, window_secs, .. } = self.policy;
            let cap = WriteCap { puts: puts_per_window, since: now - window_secs };
            self.store.put_capped(engram, &placement, now, cap)
        };
        let outcome = match put {
            Ok(Some(outcome)) => outcome,
            Ok(None) => return Err(self.rate_limited(who, now)),
            Err(StoreError::IdConflict { project, id }) => {
                return Err(refused(Violation::new(
                    ErrorCode::IdConflict,
                    "/id",
                    format!(
                        "engram id {id} already names a different claim in project {project:?}; nothing was stored: \
                         give this claim an id of its own"
                    ),
                )));
            }
            Err(err) => return Err(err.into()),
        };
        let mut report = PutReport { outcome, superseded: Vec::new(), contradictions: Vec::new() };
        if matches!(report.outcome, PutOutcome::Duplicate { .. }) {
            return Ok(report);
        }
        self.reindex_one(project, report.outcome.id())?;
        if let Some(new) = self.store.get(project, report.outcome.id())? {
            self.settle_subject(who, &new, now, &mut report)?;
        }
        Ok(report)
    }

    /// The `options.k` best engrams for `text` that `who` may read.
    pub fn query_as(&mut self, who: &Principal, text: &str, options: &QueryOptions) -> Result<Recall, MemoryError> {
        if options.k == 0 || options.k > MAX_K {
            return Err(refused(Violation::new(
                ErrorCode::ArgumentInvalid,
                "/k",
                format!("k = {} is out of range: ask for between 1 and {MAX_K} engrams", options.k),
            )));
        }
        let filter = who.recall_filter(options).map_err(refused)?;
        let request = RecallRequest { scope: options.scope, ..RecallRequest::new(text, filter, options.k) };
        let mut recall = self.recall(&request)?;
        // The index is derived; the store's rows decide (a scope changed by another process, say).
        recall.hits.retain(|hit| who.sees(&hit.stored));
        Ok(recall)
    }

    /// Engram `id`, hot or cold, as `who` may read it: none when no project holds it, `LESS_SCOPE_DENIED` when it
    /// exists only where `who` may not read. When another run holds `id` privately and `who`'s run put the same
    /// claim, `who` reads its run's own copy (stored under [`run_copy_id`]).
    pub fn get_as(&self, who: &Principal, id: &str) -> Result<Option<Stored>, MemoryError> {
        let mut copies = self.store.get_any(id)?;
        if copies.is_empty() {
            return Ok(None);
        }
        if !copies.iter().any(|s| who.sees(s)) {
            copies.extend(self.store.get_any(&run_copy_id(id, &who.run))?);
        }
        // A copy in the caller's own projects first.
        copies.sort_by_key(|s| !who.is_member(&s.project));
        match copies.into_iter().find(|s| who.sees(s)) {
            Some(stored) => Ok(Some(stored)),
            None => Err(refused(denied(format!(
                "engram {id} is not readable by {}: it belongs to another project, run or role, or to a scope \
                 its role does not read; read within your own project and run, or ask a parent to promote it to org",
                who.agent
            )))),
        }
    }

    /// The newest hot engram with subject key `subject` that `who` reads in its own projects.
    pub fn find_subject(&self, who: &Principal, subject: &str) -> Result<Option<Stored>, MemoryError> {
        let subject = subject.trim().to_lowercase();
        for project in &who.projects {
            if let Some(stored) = self.store.hot_by_subject(project, &subject)?.into_iter().find(|s| who.sees(s)) {
                return Ok(Some(stored));
            }
        }
        Ok(None)
    }

    /// Widens the scope of engram `id` to `to` as `who`; none when no project holds it. Beyond run scope (project,
    /// org, global: LESS §8.1's promotion path, controlled by the parent): only a parent of its creator (or a parent
    /// promoting its own, or an operator), and only at or above the promotion floor. Promoting to the scope it has
    /// changes nothing, but asks for the same rights.
    pub fn promote(&mut self, who: &Principal, id: &str, to: Scope) -> Result<Option<Stored>, MemoryError> {
        let Some(stored) = self.get_as(who, id)? else { return Ok(None) };
        let current = stored.engram.scope;
        if !who.is_member(&stored.project) {
            return Err(refused(denied(format!(
                "engram {id} belongs to project {:?}: only its members promote it",
                stored.project
            ))));
        }
        if to < current {
            return Err(refused(denied(format!(
                "engram {id} is already {}; scopes only widen: supersede it with a narrower engram instead",
                current.as_str()
            ))));
        }
        // Rights first: asking for the scope an engram already has is still a request only a parent may make.
        let creator = stored.engram.provenance.created_by.clone();
        match to {
            Scope::Project | Scope::Org | Scope::Global => {
                self.check_promotion(who, &creator, stored.engram.confidence, to)?;
            }
            Scope::Run => {
                if creator != who.agent && !who.may_promote(&creator) {
                    return Err(refused(denied(format!(
                        "{} may not touch {creator}'s engram {id}: its creator or a parent of its creator does",
                        who.agent
                    ))));
                }
            }
        }
        if to == current {
            return Ok(Some(stored));
        }
        let id = stored.engram.id.as_str();
        self.store.promote(&stored.project, id, to, &who.agent)?;
        self.reindex_one(&stored.project, id)?;
        Ok(self.store.get(&stored.project, id)?)
    }

    /// `new` supersedes `old` as `who` (both readable by `who`, in the same project; `who` may modify `old`).
    /// False when either is missing.
    pub fn supersede_as(&mut self, who: &Principal, old: &str, new: &str) -> Result<bool, MemoryError> {
        let (Some(old_row), Some(new_row)) = (self.get_as(who, old)?, self.get_as(who, new)?) else {
            return Ok(false);
        };
        if old_row.project != new_row.project || !who.may_modify(&old_row) {
            return Err(refused(denied(format!(
                "{} may not supersede {old}: only its creator, a parent of its creator or an operator does, with an \
                 engram of the same project",
                who.agent
            ))));
        }
        self.supersede(&old_row.project, &old_row.engram.id, &new_row.engram.id)
    }

    /// Moves engram `id` to the cold tier as `who` (its creator, a parent of its creator, or an operator); false
    /// when it is missing or already cold.
    pub fn evict_as(&mut self, who: &Principal, id: &str) -> Result<bool, MemoryError> {
        let Some(stored) = self.get_as(who, id)? else { return Ok(false) };
        if !who.may_modify(&stored) {
            return Err(refused(denied(format!(
                "{} may not evict {id}: only its creator, a parent of its creator or an operator does",
                who.agent
            ))));
        }
        self.evict(&stored.project, &stored.engram.id)
    }

    fn check_promotion(&self, who: &Principal, creator: &str, confidence: f64, to: Scope) -> Result<(), MemoryError> {
        if !who.may_promote(creator) {
            let who_is = if creator == who.agent {
                format!("{} leads no agent", who.agent)
            } else {
                format!("{} is not a parent of {creator}", who.agent)
            };
            let keep = if self.policy.project_writes { "run or project" } else { "run" };
            return Err(refused(denied(format!(
                "{who_is}: only a parent promotes to {}; keep the engram at {keep} scope and ask {creator}'s parent \
                 to promote it",
                to.as_str()
            ))));
        }
        let floor = self.policy.promotion_floor;
        if confidence < floor {
            return Err(refused(denied(format!(
                "confidence {confidence} is below the promotion floor {floor} for {}: back the claim with more \
                 evidence in a new engram of higher confidence, then promote that one",
                to.as_str()
            ))));
        }
        Ok(())
    }

    /// The refusal of a put over the rate limit, saying when to retry.
    fn rate_limited(&self, who: &Principal, now: i64) -> MemoryError {
        let MemoryPolicy { puts_per_window, window_secs, .. } = self.policy;
        let (n, oldest) = match self.store.writes_since(&who.agent, now - window_secs) {
            Ok(counted) => counted,
            Err(err) => return err.into(),
        };
        let retry_in = oldest.map_or(window_secs, |oldest| oldest + window_secs - now).max(1);
        refused(Violation::new(
            ErrorCode::RateLimited,
            "",
            format!(
                "{} stored {n} engrams in the last {window_secs} s (limit {puts_per_window}); nothing was stored: \
                 merge related claims and retry in {retry_in} s",
                who.agent
            ),
        ))
    }

    /// Supersession and contradiction by subject key (module docs).
    fn settle_subject(
        &mut self,
        who: &Principal,
        new: &Stored,
        now: i64,
        report: &mut PutReport,
    ) -> Result<(), MemoryError> {
        let Some(subject) = subject_key(&new.engram) else { return Ok(()) };
        let correction = new.engram.tags.iter().flatten().any(|t| t == CORRECTION_TAG);
        for old in self.store.hot_by_subject(&new.project, &subject)? {
            if old.engram.id == new.engram.id || (old.engram.scope == Scope::Run && old.run != new.run) {
                continue;
            }
            let same_source = old.engram.provenance.created_by == new.engram.provenance.created_by;
            // A correction replaces what its author may modify (the creator's, a child's, as an operator), as
            // `supersede_as` would; anyone else's is a second opinion, which may contradict it.
            // Either way the putter must be one who may modify the old engram: a `created_by` is what the putter
            // declares, so naming the old engram's creator gives no right to replace it.
            if (same_source || correction) && who.may_modify(&old) {
                // A narrower engram must not hide a wider one from readers who cannot see its replacement.
                if new.engram.scope >= old.engram.scope
                    && self.supersede(&new.project, &old.engram.id, &new.engram.id)?
                {
                    report.superseded.push(old.engram.id.clone());
                }
            } else if old.engram.kind == EngramKind::Fact
                && new.engram.kind == EngramKind::Fact
                && normalized(&old.engram.claim) != normalized(&new.engram.claim)
            {
                report.contradictions.push(self.record_contradiction(&old, new, &subject, now)?);
            }
        }
        Ok(())
    }

    /// One risk engram for the pair: derived from the pair alone (ids in order), so it is stored once.
    fn record_contradiction(&mut self, a: &Stored, b: &Stored, subject: &str, now: i64) -> Result<String, MemoryError> {
        let (first, second) = if a.engram.id <= b.engram.id { (a, b) } else { (b, a) };
        let mut claim = format!(
            "Contradiction on subject {subject}: {} (by {}) and {} (by {}) make different claims; check both sources \
             before relying on either.",
            first.engram.id, first.engram.provenance.created_by, second.engram.id, second.engram.provenance.created_by
        );
        if let Some((cut, _)) = claim.char_indices().nth(MAX_CLAIM_CHARS) {
            claim.truncate(cut);
        }
        let mut seen = BTreeSet::new();
        let mut pointers: Vec<Pointer> = first
            .engram
            .pointers
            .iter()
            .chain(&second.engram.pointers)
            .filter(|p| seen.insert((p.ty(), p.reference().to_owned(), p.span().map(str::to_owned))))
            .take(MAX_POINTERS)
            .cloned()
            .collect();
        // A risk must cite a source (LESS_SOURCE_REQUIRED); when both sides cite only URLs, cite the engrams.
        if pointers.iter().all(|p| p.ty() == PointerType::Url) {
            pointers.truncate(MAX_POINTERS - 2);
            for side in [first, second] {
                if let Ok(pointer) = Pointer::new(PointerType::Sam, &format!("engram:{}", side.engram.id), None) {
                    pointers.push(pointer);
                }
            }
        }
        let roles: BTreeSet<String> = role_tags(&first.engram).into_iter().chain(role_tags(&second.engram)).collect();
        let scope = first.engram.scope.min(second.engram.scope).min(Scope::Project);
        let ttl = if first.engram.ttl.duration() >= second.engram.ttl.duration() {
            first.engram.ttl.clone()
        } else {
            second.engram.ttl.clone()
        };
        let mut builder = Engram::builder(EngramKind::Risk, claim, MEMORY_AGENT)
            .source(Source::Tool)
            .confidence(1.0)
            .scope(scope)
            .ttl(ttl)
            .created_at(rfc3339(now))
            .tag(CONTRADICTION_TAG);
        for role in roles.into_iter().take(11) {
            builder = builder.tag(format!("{ROLE_TAG_PREFIX}{role}"));
        }
        for pointer in pointers {
            builder = builder.pointer(pointer);
        }
        let risk = builder.build().map_err(|violations| {
            refused(violations.0.into_iter().next().unwrap_or_else(|| denied("invalid risk engram".to_owned())))
        })?;
        let placement =
            Placement { project: b.project.clone(), run: b.run.clone(), written_by: MEMORY_AGENT.to_owned() };
        let outcome = self.store.put_placed(&risk, &placement, now)?;
        if !matches!(outcome, PutOutcome::Duplicate { .. }) {
            self.reindex_one(&b.project, outcome.id())?;
        }
        Ok(outcome.id().to_owned())
    }
}

/// A claim compared for contradiction: lowercase, single spaces, no trailing punctuation.
fn normalized(claim: &str) -> String {
    claim.split_whitespace().collect::<Vec<_>>().join(" ").trim_end_matches(['.', '!', ';']).to_lowercase()
}

fn rfc3339(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(crate::now_rfc3339)
}

#[cfg(test)]
mod tests;
