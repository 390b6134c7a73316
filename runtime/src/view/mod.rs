//! What `lessrt serve`'s page shows of a run, as rules the binary only wires to HTTP: reading a run directory
//! ([`run_dir`], [`manifest`]), what may be shown ([`redact`]), a pointer clicked through ([`deref`]), and the views
//! derived from a run's ledger events (and its manifest when there is one): the hierarchy with
//! each agent's state and budget meter, the Shared Briefs each agent received, the engram feed, the timeline, and
//! LESS against verbatim. Pure functions of their inputs, so a finished run and a live one render alike and the
//! derivations are tested without a server.

use std::collections::{BTreeMap, HashMap};

pub mod deref;
pub mod manifest;
pub mod redact;
pub mod run_dir;

use crate::enforce::{DerefMeter, pattern_covers};
use crate::run::{EnvelopeKind, Event, RunReport};
use crate::{Budget, Pointer, PointerType};
use serde::Serialize;
use serde_json::{Value, json};

pub use deref::{DerefAnswer, leads_outside, resolve_pointer};
pub use manifest::{MANIFEST_FILE, Manifest, ManifestAgent};
pub use redact::{redact_text, redacted};
pub use run_dir::{EventCache, LEDGER_FILE, Loaded, REPORT_FILE, RunDir};

/// One agent of the hierarchy as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct AgentView {
    /// Its id.
    pub id: String,
    /// Its role.
    pub role: String,
    /// Its parent's id (none for the lead).
    pub parent: Option<String>,
    /// Its kind.
    pub kind: String,
    /// `working` (its step runs), `waiting`, `done` (the run finished) or `down` (left down past its restarts).
    pub state: String,
    /// Times its gateway restarted it.
    pub restarts: u32,
    /// Escalations about it (a second refusal, an agent left down) and escalations it sent.
    pub escalations: u32,
    /// Its budget meter.
    pub meter: Meter,
}

/// An agent's budget meter.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Meter {
    /// Inline tokens of the last message it had delivered, and the receiver's cap on it.
    pub last_turn_tokens: Option<u32>,
    /// The receiver's cap on it.
    pub last_turn_cap: Option<u32>,
    /// Messages it had delivered (its turns, as the report counts them).
    pub turns: u32,
    /// What it dereferenced on its own budget in its current turn (or its last one that dereferenced).
    pub deref: DerefUse,
    /// Its budget: the limits the deref meter is read against.
    pub limits: Option<Budget>,
    /// Tokens it pulled under grants in that turn.
    pub via_grant_tokens: u32,
    /// Derefs denied, messages refused, messages resent.
    pub denied_derefs: u32,
    /// Messages of it refused.
    pub refusals: u32,
    /// Refused messages it sent again.
    pub resends: u32,
    /// The grants it received, with what is left of each after the derefs it made under them.
    pub grants: Vec<GrantHeld>,
}

/// Per-turn deref use, as the gateway's meter counts it.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct DerefUse {
    /// Repo spans dereferenced.
    pub repo_spans: u32,
    /// Artifact sections dereferenced.
    pub artifact_sections: u32,
    /// Memory items dereferenced.
    pub sam_items: u32,
    /// Its inline tokens.
    pub tokens: u32,
}

/// A grant an agent holds.
#[derive(Debug, Clone, Serialize)]
pub struct GrantHeld {
    /// The grant's id.
    pub grant_id: String,
    /// Who issued it.
    pub issuer: String,
    /// The pointer patterns it covers.
    pub patterns: Vec<String>,
    /// Derefs it allows.
    pub max_derefs: u64,
    /// Tokens it allows.
    pub max_tokens: u64,
    /// How many times it may be used.
    pub uses: u64,
    /// Derefs made under it.
    pub derefs_used: u64,
    /// Tokens pulled under it.
    pub tokens_used: u64,
}

/// The hierarchy: the manifest's agents (or, without one, every agent the ledger names, parents taken from who
/// briefed whom), each with its state and meter.
pub fn hierarchy(manifest: Option<&Manifest>, events: &[Event], finished: bool) -> Vec<AgentView> {
    let mut agents: Vec<AgentView> = match manifest {
        Some(m) => m
            .agents
            .iter()
            .map(|a| AgentView {
                id: a.id.clone(),
                role: a.role.clone(),
                parent: a.parent.clone(),
                kind: a.kind.clone(),
                state: String::new(),
                restarts: 0,
                escalations: 0,
                meter: Meter { limits: Some(a.budget), ..Meter::default() },
            })
            .collect(),
        None => inferred_agents(events),
    };
    let index: HashMap<String, usize> = agents.iter().enumerate().map(|(i, a)| (a.id.clone(), i)).collect();
    let mut current: HashMap<usize, DerefMeter> = HashMap::new();
    let mut via_grant_now: HashMap<usize, u32> = HashMap::new();
    let mut working: Option<usize> = None;
    let mut down = vec![false; agents.len()];
    for event in events {
        match event {
            Event::Step { agent, .. } => working = index.get(agent).copied(),
            Event::Delivered { from, to, tokens, max_tokens, doc, kind, .. } => {
                if let Some(&i) = index.get(from) {
                    let meter = &mut agents[i].meter;
                    meter.last_turn_tokens = Some(*tokens);
                    meter.last_turn_cap = Some(*max_tokens);
                    meter.turns += 1;
                    // A message sent ends the sender's turn: the deref meter starts again.
                    current.remove(&i);
                    via_grant_now.remove(&i);
                    if *kind == EnvelopeKind::Escalation {
                        agents[i].escalations += 1;
                    }
                }
                if let Some(&i) = index.get(to) {
                    let value = doc.to_value();
                    if *kind == EnvelopeKind::Brief
                        && manifest.is_none()
                        && let Some(budget) = value
                            .pointer(&format!("/budgets/{}", json_pointer_key(&agents[i].role)))
                            .and_then(|b| serde_json::from_value::<Budget>(b.clone()).ok())
                    {
                        agents[i].meter.limits = Some(budget);
                    }
                    if *kind == EnvelopeKind::Grant {
                        agents[i].meter.grants.push(GrantHeld {
                            grant_id: str_at(&value, "grant_id"),
                            issuer: str_at(&value, "issuer"),
                            patterns: value
                                .get("patterns")
                                .and_then(Value::as_array)
                                .map(|p| p.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                                .unwrap_or_default(),
                            max_derefs: value.get("max_derefs").and_then(Value::as_u64).unwrap_or(0),
                            max_tokens: value.get("max_tokens").and_then(Value::as_u64).unwrap_or(0),
                            uses: value.get("uses").and_then(Value::as_u64).unwrap_or(0),
                            derefs_used: 0,
                            tokens_used: 0,
                        });
                    }
                }
            }
            Event::Rejected { from, .. } => {
                if let Some(&i) = index.get(from) {
                    agents[i].meter.refusals += 1;
                    current.remove(&i);
                    via_grant_now.remove(&i);
                }
            }
            Event::Resent { from, .. } => {
                if let Some(&i) = index.get(from) {
                    agents[i].meter.resends += 1;
                }
            }
            Event::Deref { agent, pointers, tokens, granted, via_grant, .. } => {
                let Some(&i) = index.get(agent) else { continue };
                if !granted {
                    agents[i].meter.denied_derefs += 1;
                    continue;
                }
                match via_grant {
                    Some(grant_id) => {
                        *via_grant_now.entry(i).or_default() += tokens;
                        if let Some(held) = agents[i].meter.grants.iter_mut().find(|g| &g.grant_id == grant_id) {
                            held.derefs_used += pointers.len() as u64;
                            held.tokens_used += u64::from(*tokens);
                        }
                    }
                    None => {
                        let items = deref_items(pointers, *tokens);
                        let meter = current.entry(i).or_default();
                        // The meter reads what the gateway counted, whatever the budget: `admit` against an
                        // unbounded budget only adds.
                        if let Some(next) = meter.admit(&unbounded(), &items) {
                            *meter = next;
                        }
                    }
                }
                let meter = current.get(&i).copied().unwrap_or_default();
                agents[i].meter.deref = DerefUse {
                    repo_spans: meter.repo_spans,
                    artifact_sections: meter.artifact_sections,
                    sam_items: meter.sam_items,
                    tokens: meter.tokens,
                };
                agents[i].meter.via_grant_tokens = via_grant_now.get(&i).copied().unwrap_or(0);
            }
            Event::Escalated { about, .. } => {
                if let Some(&i) = index.get(about) {
                    agents[i].escalations += 1;
                }
            }
            Event::Restart { agent, .. } => {
                if let Some(&i) = index.get(agent) {
                    agents[i].restarts += 1;
                }
            }
            Event::AgentDown { agent, .. } => {
                if let Some(&i) = index.get(agent) {
                    down[i] = true;
                }
            }
            _ => {}
        }
    }
    for (i, agent) in agents.iter_mut().enumerate() {
        agent.state = if down[i] {
            "down"
        } else if finished {
            "done"
        } else if working == Some(i) {
            "working"
        } else {
            "waiting"
        }
        .to_owned();
    }
    agents
}

/// A budget nothing exceeds.
fn unbounded() -> Budget {
    Budget {
        max_repo_spans: u32::MAX,
        max_artifact_sections: u32::MAX,
        max_sam_items: u32::MAX,
        max_deref_tokens_total: u32::MAX,
        ..Budget::default()
    }
}

/// A deref's pointers as the meter counts them; the event carries the tokens of all of them, charged to the first.
fn deref_items(pointers: &[String], tokens: u32) -> Vec<(PointerType, u32)> {
    pointers
        .iter()
        .filter_map(|p| Pointer::parse(p).ok())
        .enumerate()
        .map(|(n, p)| (p.ty(), if n == 0 { tokens } else { 0 }))
        .collect()
}

/// Without a manifest: every agent the ledger names, its parent the sender of the first brief it received (or the
/// receiver of its first report).
fn inferred_agents(events: &[Event]) -> Vec<AgentView> {
    let mut order: Vec<String> = Vec::new();
    let mut parents: HashMap<String, String> = HashMap::new();
    let note = |name: &str, order: &mut Vec<String>| {
        if !name.is_empty() && !order.iter().any(|n| n == name) {
            order.push(name.to_owned());
        }
    };
    for event in events {
        match event {
            Event::Step { agent, .. } => note(agent, &mut order),
            Event::Delivered { from, to, kind, .. } => {
                note(from, &mut order);
                note(to, &mut order);
                match kind {
                    EnvelopeKind::Brief | EnvelopeKind::Grant => {
                        parents.entry(to.clone()).or_insert_with(|| from.clone());
                    }
                    _ => {
                        parents.entry(from.clone()).or_insert_with(|| to.clone());
                    }
                }
            }
            _ => {}
        }
    }
    order
        .into_iter()
        .map(|id| AgentView {
            role: id.clone(),
            parent: parents.get(&id).cloned(),
            id,
            kind: "scripted".to_owned(),
            state: String::new(),
            restarts: 0,
            escalations: 0,
            meter: Meter::default(),
        })
        .collect()
}

/// A brief an agent received.
#[derive(Debug, Clone, Serialize)]
pub struct BriefView {
    /// Its place in the ledger (the line, from 0).
    pub seq: usize,
    /// The message's id.
    pub msg_id: String,
    /// Sender agent id.
    pub from: String,
    /// Receiver agent id.
    pub to: String,
    /// Its inline tokens.
    pub tokens: u32,
    /// The receiver's cap on inline tokens.
    pub max_tokens: u32,
    /// The SharedBriefMicro as delivered (JSON).
    pub brief: Value,
    /// The brief as the child reads it, one counted line per item.
    pub text: String,
}

/// Every brief delivered, in order; also the grants, which are delivered as their own documents.
pub fn briefs(events: &[Event]) -> Vec<BriefView> {
    events
        .iter()
        .enumerate()
        .filter_map(|(seq, event)| match event {
            Event::Delivered { from, to, msg_id, kind: EnvelopeKind::Brief, tokens, max_tokens, doc, .. } => {
                let text = match &**doc {
                    crate::run::Document::Brief(brief) => brief.to_string(),
                    _ => String::new(),
                };
                Some(BriefView {
                    seq,
                    msg_id: msg_id.clone(),
                    from: from.clone(),
                    to: to.clone(),
                    tokens: *tokens,
                    max_tokens: *max_tokens,
                    brief: doc.to_value(),
                    text,
                })
            }
            _ => None,
        })
        .collect()
}

/// An engram in the feed.
#[derive(Debug, Clone, Serialize)]
pub struct EngramView {
    /// Its place in delivery order (the ledger line of its delivery).
    pub seq: usize,
    /// The message's id.
    pub msg_id: String,
    /// Sender agent id.
    pub from: String,
    /// Receiver agent id.
    pub to: String,
    /// The sender's role.
    pub role: String,
    /// The engram as delivered (JSON), with `pointer_texts`: its pointers in text form, digests beside.
    pub engram: Value,
    /// Its kind.
    pub kind: String,
    /// Its scope.
    pub scope: String,
    /// Its claim.
    pub claim: String,
    /// Its pointers, clickable.
    pub pointers: Vec<PointerRef>,
    /// The engram that replaced it in memory, if one did.
    pub superseded_by: Option<String>,
    /// What it replaced.
    pub supersedes: Vec<String>,
    /// Risk engrams memory raised because it contradicts another.
    pub contradictions: Vec<String>,
    /// What memory did with it (`stored`, `duplicate`, `revived`, `refused`).
    pub memory: Option<String>,
}

/// A pointer as the page links it.
#[derive(Debug, Clone, Serialize)]
pub struct PointerRef {
    /// The text form (what `/api/deref?pointer=` takes).
    pub text: String,
    /// The digest it was pinned with, if any.
    pub digest: Option<String>,
}

/// Filters of the engram feed; each matches all when empty.
#[derive(Debug, Clone, Default)]
pub struct EngramFilter {
    /// Only engrams of this kind.
    pub kind: Option<String>,
    /// Only engrams from this role.
    pub role: Option<String>,
    /// Only engrams of this scope.
    pub scope: Option<String>,
}

/// Every engram delivered, in delivery order, with what memory made of it.
pub fn engrams(events: &[Event], manifest: Option<&Manifest>, filter: &EngramFilter) -> Vec<EngramView> {
    let roles: HashMap<&str, &str> =
        manifest.map(|m| m.agents.iter().map(|a| (a.id.as_str(), a.role.as_str())).collect()).unwrap_or_default();
    let mut superseded_by: HashMap<String, String> = HashMap::new();
    let mut supersedes: HashMap<String, Vec<String>> = HashMap::new();
    let mut contradictions: HashMap<String, Vec<String>> = HashMap::new();
    let mut memory: HashMap<String, String> = HashMap::new();
    for event in events {
        if let Event::MemoryPut { id, status, superseded, contradictions: raised, .. } = event {
            for old in superseded {
                superseded_by.insert(old.clone(), id.clone());
            }
            supersedes.entry(id.clone()).or_default().extend(superseded.iter().cloned());
            contradictions.entry(id.clone()).or_default().extend(raised.iter().cloned());
            memory.insert(id.clone(), status.clone());
        }
    }
    let mut out = Vec::new();
    for (seq, event) in events.iter().enumerate() {
        let Event::Delivered { from, to, msg_id, doc, .. } = event else { continue };
        for engram in doc.engrams() {
            let value = serde_json::to_value(engram).unwrap_or(Value::Null);
            let kind = str_at(&value, "kind");
            let scope = str_at(&value, "scope");
            let role = roles.get(from.as_str()).map_or_else(|| from.clone(), |r| (*r).to_owned());
            let wanted = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w.is_empty() || w == have);
            if !(wanted(&filter.kind, &kind) && wanted(&filter.role, &role) && wanted(&filter.scope, &scope)) {
                continue;
            }
            out.push(EngramView {
                seq,
                msg_id: msg_id.clone(),
                from: from.clone(),
                to: to.clone(),
                role,
                kind,
                scope,
                claim: engram.claim.clone(),
                pointers: engram
                    .pointers
                    .iter()
                    .map(|p| PointerRef { text: plain_text(p), digest: p.digest().map(|d| d.to_string()) })
                    .collect(),
                superseded_by: superseded_by.get(&engram.id).cloned(),
                supersedes: supersedes.get(&engram.id).cloned().unwrap_or_default(),
                contradictions: contradictions.get(&engram.id).cloned().unwrap_or_default(),
                memory: memory.get(&engram.id).cloned(),
                engram: value,
            });
        }
    }
    out
}

/// A pointer's text form without its digest (what the resolver and the page take).
pub fn plain_text(pointer: &Pointer) -> String {
    match Pointer::new(pointer.ty(), pointer.reference(), pointer.span()) {
        Ok(plain) => plain.to_string(),
        Err(_) => pointer.to_string(),
    }
}

/// One line of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineItem {
    /// Its place in the ledger (the line, from 0).
    pub seq: usize,
    /// The event's name in the ledger (`delivered`, `rejected`, `deref`, …).
    pub event: String,
    /// The agent it is about.
    pub agent: String,
    /// The trace line `lessrt run` printed for it.
    pub text: String,
    /// Pointers it names (derefs, asks), clickable.
    pub pointers: Vec<String>,
    /// The message it is about (deliveries, refusals, resends), when it is about one.
    pub msg_id: Option<String>,
    /// The refusal's code, when it is one.
    pub code: Option<String>,
    /// For a denied deref: the grants of the run that cover every pointer, and the grant its parent would have had
    /// to issue.
    pub cover: Option<Value>,
}

/// Every event as a timeline line.
pub fn timeline(events: &[Event], manifest: Option<&Manifest>) -> Vec<TimelineItem> {
    let grants = grants_issued(events);
    events
        .iter()
        .enumerate()
        .map(|(seq, event)| {
            let value = serde_json::to_value(event).unwrap_or(Value::Null);
            let name = str_at(&value, "event");
            let agent = ["agent", "from", "about", "issuer", "requester"]
                .iter()
                .find_map(|k| value.get(*k).and_then(Value::as_str))
                .unwrap_or_default()
                .to_owned();
            let code = value.get("code").and_then(Value::as_str).map(str::to_owned);
            let msg_id = value.get("msg_id").and_then(Value::as_str).map(str::to_owned);
            let pointers: Vec<String> = value
                .get("pointers")
                .and_then(Value::as_array)
                .map(|p| p.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            let cover = match event {
                Event::Deref { agent, pointers, granted: false, .. } => {
                    Some(denied_cover(agent, pointers, &grants, manifest))
                }
                _ => None,
            };
            TimelineItem {
                seq,
                event: name,
                agent,
                text: event.trace_line().unwrap_or_default().trim_start().to_owned(),
                pointers,
                msg_id,
                code,
                cover,
            }
        })
        .collect()
}

/// The grants delivered in a run: (grantee, the grant's JSON).
fn grants_issued(events: &[Event]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Delivered { to, kind: EnvelopeKind::Grant, doc, .. } => Some((to.clone(), doc.to_value())),
            _ => None,
        })
        .collect()
}

/// What would have covered a denied deref: the run's grants to that agent whose patterns cover every pointer, and
/// the smallest grant its parent could have issued (one pattern per file, a deref per pointer).
fn denied_cover(agent: &str, pointers: &[String], grants: &[(String, Value)], manifest: Option<&Manifest>) -> Value {
    let parsed: Vec<Pointer> = pointers.iter().filter_map(|p| Pointer::parse(p).ok()).collect();
    let covering: Vec<Value> = grants
        .iter()
        .filter(|(grantee, _)| grantee == agent)
        .filter(|(_, grant)| {
            let patterns: Vec<&str> = grant
                .get("patterns")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            !parsed.is_empty() && parsed.iter().all(|p| patterns.iter().any(|pattern| pattern_covers(pattern, p)))
        })
        .map(|(_, grant)| {
            json!({
                "grant_id": grant.get("grant_id"),
                "issuer": grant.get("issuer"),
                "patterns": grant.get("patterns"),
                "max_derefs": grant.get("max_derefs"),
                "max_tokens": grant.get("max_tokens"),
            })
        })
        .collect();
    let mut files: Vec<String> = parsed.iter().map(|p| format!("{}:{}", p.ty(), p.location())).collect();
    files.dedup();
    let parent = manifest
        .and_then(|m| m.agents.iter().find(|a| a.id == agent))
        .and_then(|a| a.parent.clone())
        .or_else(|| grants.iter().find(|(g, _)| g == agent).map(|(_, v)| str_at(v, "issuer")));
    json!({
        "covering": covering,
        "needed": {"issuer": parent, "grantee": agent, "patterns": files, "max_derefs": parsed.len()},
    })
}

/// LESS against a baseline, per role: inline tokens, and inline plus dereferenced content (what `lessrt run`
/// prints after both modes).
pub fn compare(less: &RunReport, baseline: &RunReport) -> Value {
    let mut rows = Vec::new();
    let row = |role: &str, l: &crate::run::RoleReport, b: Option<&crate::run::RoleReport>| {
        let (base, base_all) = b.map_or((0, 0), |b| (b.inline_tokens.total, b.inline_tokens.total + b.deref_tokens));
        json!({
            "role": role,
            "less": l.inline_tokens.total,
            "less_with_derefs": l.inline_tokens.total + l.deref_tokens,
            "baseline": base,
            "baseline_with_derefs": base_all,
            "less_p95": l.inline_tokens.p95,
            "baseline_p95": b.map(|b| b.inline_tokens.p95),
        })
    };
    for (role, report) in &less.roles {
        rows.push(row(role, report, baseline.roles.get(role)));
    }
    rows.push(row("TOTAL", &less.totals, Some(&baseline.totals)));
    json!({"less": less.mode.as_str(), "baseline": baseline.mode.as_str(), "rows": rows})
}

/// The run's verdicts, as the page's checks panel shows them: each check with its status and evidence, each graded
/// task with its status (solved, or where it was lost), its evidence and the engram that answered it.
#[derive(Debug, Clone, Serialize)]
pub struct OutcomeView {
    /// No check failed and every graded task was solved.
    pub passed: bool,
    /// Each check, in the scenario's order.
    pub checks: Vec<CheckView>,
    /// Tasks graded.
    pub graded: u32,
    /// Tasks solved.
    pub solved: u32,
    /// Each graded task, in the scenario's order.
    pub tasks: Vec<TaskView>,
}

/// One check's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct CheckView {
    /// Its name.
    pub name: String,
    /// `PASS`, `FAIL` or `N/A` (a LESS mechanism the run's mode does not have).
    pub status: &'static str,
    /// Why: what the ledger showed.
    pub evidence: String,
}

/// One graded task's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    /// Its id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// The agent it is about.
    pub agent: String,
    /// Its role.
    pub role: String,
    /// Whether it was solved.
    pub solved: bool,
    /// `solved`, or where the task was lost (`not found`, `read, not cited`, …; `unsolved` when the report predates
    /// that field).
    pub status: String,
    /// The failure kind as the report names it (`not_found`, …), when unsolved.
    pub failure: Option<Value>,
    /// What the ledger showed.
    pub evidence: String,
    /// The engram that solved it, or the closest one its agent delivered.
    pub answer: Option<crate::run::Answer>,
}

/// The checks and graded tasks of a finished run's report.
pub fn outcome(report: &RunReport) -> OutcomeView {
    let checks = report
        .checks
        .iter()
        .map(|c| CheckView { name: c.name.clone(), status: c.status.label(), evidence: c.detail.clone() })
        .collect();
    let tasks = report
        .tasks
        .items
        .iter()
        .map(|t| TaskView {
            id: t.id.clone(),
            kind: t.kind.as_str().to_owned(),
            agent: t.agent.clone(),
            role: t.role.clone(),
            solved: t.solved,
            status: match (t.solved, t.failure) {
                (true, _) => "solved".to_owned(),
                (false, Some(failure)) => failure.as_str().to_owned(),
                (false, None) => "unsolved".to_owned(),
            },
            failure: t.failure.and_then(|f| serde_json::to_value(f).ok()),
            evidence: t.evidence.clone(),
            answer: t.answer.clone(),
        })
        .collect();
    OutcomeView { passed: report.passed(), checks, graded: report.tasks.graded, solved: report.tasks.solved, tasks }
}

/// Counts of what happened, for the page's header.
pub fn counts(events: &[Event]) -> BTreeMap<&'static str, usize> {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for event in events {
        let key = match event {
            Event::Delivered { .. } => "delivered",
            Event::Rejected { .. } => "rejected",
            Event::Resent { .. } => "resent",
            Event::Deref { granted: true, .. } => "derefs",
            Event::Deref { granted: false, .. } => "derefs_denied",
            Event::GrantIssued { .. } => "grants",
            Event::Escalated { .. } => "escalations",
            Event::Restart { .. } => "restarts",
            Event::Step { .. } => "steps",
            _ => continue,
        };
        *counts.entry(key).or_default() += 1;
    }
    counts.insert(
        "engrams",
        events.iter().map(|e| if let Event::Delivered { doc, .. } = e { doc.engrams().len() } else { 0 }).sum(),
    );
    counts.insert("events", events.len());
    counts
}

fn str_at(value: &Value, key: &str) -> String {
    value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// `key` escaped for a JSON pointer.
fn json_pointer_key(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deref(agent: &str, pointers: &[&str], tokens: u32, granted: bool, via: Option<&str>) -> Event {
        Event::Deref {
            agent: agent.into(),
            pointers: pointers.iter().map(|p| (*p).to_owned()).collect(),
            tokens,
            granted,
            via_grant: via.map(str::to_owned),
            code: (!granted).then_some(crate::ErrorCode::DerefDenied),
        }
    }

    /// The deref meter counts spans and tokens of the agent's own budget per turn, and grants apart.
    #[test]
    fn the_meter_counts_a_turn_of_derefs() {
        let events = vec![
            Event::Step { index: 0, agent: "dev".into(), action: "deref".into() },
            deref("dev", &["repo:a.rs#L1-L2", "artifact:SPEC.md#sec=Goals"], 50, true, None),
            deref("dev", &["repo:b.rs#L1-L2"], 0, false, None),
            deref("dev", &["repo:b.rs#L1-L2"], 70, true, Some("g1")),
        ];
        let agents = hierarchy(None, &events, false);
        let dev = agents.iter().find(|a| a.id == "dev").expect("dev is named");
        assert_eq!(dev.state, "working");
        assert_eq!(dev.meter.deref.repo_spans, 1);
        assert_eq!(dev.meter.deref.artifact_sections, 1);
        assert_eq!(dev.meter.deref.tokens, 50);
        assert_eq!(dev.meter.via_grant_tokens, 70);
        assert_eq!(dev.meter.denied_derefs, 1);
    }

    /// The checks panel reads a report's verdicts: each check's status label and evidence, each task's status
    /// (solved, or its failure kind) and its answer.
    #[test]
    fn the_outcome_labels_checks_and_tasks() {
        let report: RunReport = serde_json::from_value(json!({
            "scenario": "s", "mode": "less", "tokenizer": "o200k_base", "roles": {}, "over_cap": [], "totals": {},
            "checks": [
                {"name": "engram_cites", "status": "pass", "detail": "risk eg_1 cites 2 pointers"},
                {"name": "derefs", "status": "n/a", "detail": "the baseline pastes content"},
                {"name": "escalations", "status": "fail", "detail": "0 escalations, want 1"},
            ],
            "tasks": {"graded": 2, "solved": 1, "items": [
                {"id": "t1", "kind": "locate_rule", "agent": "dev", "role": "dev", "solved": true, "evidence": "cites the span",
                 "answer": {"msg_id": "dev-m3", "engram": "eg_9", "claim": "the bug is here", "pointers": ["repo:a.rs#L1-L4"]}},
                {"id": "t2", "kind": "two_spans", "agent": "dev", "role": "dev", "solved": false, "evidence": "no read",
                 "answer": null, "failure": "found_not_read"},
            ]},
        }))
        .expect("a report");
        let outcome = outcome(&report);
        assert!(!outcome.passed);
        let statuses: Vec<&str> = outcome.checks.iter().map(|c| c.status).collect();
        assert_eq!(statuses, ["PASS", "N/A", "FAIL"]);
        assert_eq!(outcome.checks[2].evidence, "0 escalations, want 1");
        assert_eq!((outcome.graded, outcome.solved), (2, 1));
        assert_eq!(outcome.tasks[0].status, "solved");
        assert_eq!(outcome.tasks[0].answer.as_ref().map(|a| a.engram.as_str()), Some("eg_9"));
        assert_eq!(outcome.tasks[1].status, "found, not read");
        assert_eq!(outcome.tasks[1].failure, Some(json!("found_not_read")));
    }

    /// A denied deref names the run's grant to that agent that covers it, and the grant that would have been needed.
    #[test]
    fn a_denied_deref_names_the_grant_that_covers_it() {
        let grants = vec![(
            "dev".to_owned(),
            json!({"grant_id": "g1", "issuer": "lead", "patterns": ["repo:src/**"], "max_derefs": 2, "max_tokens": 900}),
        )];
        let cover = denied_cover("dev", &["repo:src/a.rs#L1-L9".to_owned()], &grants, None);
        assert_eq!(cover["covering"][0]["grant_id"], "g1");
        assert_eq!(cover["needed"]["patterns"][0], "repo:src/a.rs");
        assert_eq!(cover["needed"]["issuer"], "lead");
        let none = denied_cover("dev", &["repo:docs/a.md#L1-L9".to_owned()], &grants, None);
        assert_eq!(none["covering"].as_array().map(Vec::len), Some(0));
    }
}
