//! The run report: per-role token statistics, counts, the scenario's checks and its graded tasks, as printed and as
//! `--json`.
//!
//! A check has three outcomes: it passed, it failed, or it does not apply to the run's mode ("n/a"): budgets,
//! refusals, derefs and digests are LESS mechanisms, so in a baseline run the checks about them are not applicable
//! rather than passed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::run::grade::{TaskReport, grade};
use crate::run::ledger::Event;
use less_contract::Engram;
use less_contract::{Check, ErrorCode, Scenario, WireMode};
pub use timing::Timing;

/// Inline tokens per turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TokenStats {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u32,
    /// 95th percentile.
    pub p95: u32,
    /// Largest.
    pub max: u32,
    /// Sum.
    pub total: u64,
}

impl TokenStats {
    fn of(mut samples: Vec<u32>) -> TokenStats {
        if samples.is_empty() {
            return TokenStats::default();
        }
        samples.sort_unstable();
        let total: u64 = samples.iter().map(|&n| u64::from(n)).sum();
        let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
        TokenStats { mean: total as f64 / samples.len() as f64, p50: pick(0.5), p95: pick(0.95), max: pick(1.0), total }
    }
}

/// One role's line of the report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RoleReport {
    /// Turns: messages delivered from this role, plus recall answers it received.
    pub turns: u32,
    /// Inline tokens of the messages sent.
    pub inline_tokens: TokenStats,
    /// Inline tokens of each turn, in order (what `inline_tokens` summarizes).
    pub per_turn: Vec<u32>,
    /// Derefs granted.
    pub derefs: u32,
    /// Tokens dereferenced.
    pub deref_tokens: u64,
    /// Messages of this role refused.
    pub rejections: u32,
    /// Tokens of the refused messages (read by a gateway, never by an agent).
    pub rejected_tokens: u64,
    /// Compliant resends delivered.
    pub resends: u32,
    /// Escalations about this role: written by a gateway (refusals past the resend) or by the role's agents
    /// themselves (e.g. an LLM agent whose model failed).
    pub escalations: u32,
    /// Restarts of agents of this role.
    pub restarts: u32,
    /// What this role's models spent (`llm` agents; the provider's counts, beside the runtime's inline tokens).
    pub model: ModelSpend,
    /// What a model provider bills for this role: prompt plus completion tokens of every call (`model.billed()`).
    pub billed: u64,
    /// Model calls (`model.calls`), beside `billed` so a reader of `bench.json` finds both at one level.
    pub model_calls: u64,
}

/// Completions and tokens as a model provider counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelSpend {
    /// Completions asked for.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Prompt tokens the server answered from its prompt cache (a part of `prompt_tokens`), where it says so.
    #[serde(skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// Calls whose tokens the runtime counted with the run's tokenizer, the server having reported none.
    #[serde(skip_serializing_if = "is_zero")]
    pub counted_calls: u64,
    /// Milliseconds the model took over its calls (recorded with each exchange; a replay reports the recording's).
    #[serde(skip_serializing_if = "is_zero")]
    pub model_ms: u64,
    /// Answers thrown away as unusable (not JSON, or breaking the schema) and asked for again.
    pub unusable: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ModelSpend {
    fn add(&mut self, other: &ModelSpend) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.counted_calls += other.counted_calls;
        self.model_ms += other.model_ms;
        self.unusable += other.unusable;
    }

    /// What a provider bills: prompt plus completion tokens (cached prompt tokens included; `--price` prices them
    /// apart).
    pub fn billed(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// One check's verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckResult {
    /// Which check.
    pub name: String,
    /// Whether it held, or does not apply to the run's mode.
    pub status: CheckStatus,
    /// Why.
    pub detail: String,
}

impl CheckResult {
    /// Whether the check failed (a check that does not apply has not failed).
    pub fn failed(&self) -> bool {
        self.status == CheckStatus::Fail
    }
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckStatus {
    /// It held.
    #[serde(rename = "pass")]
    Pass,
    /// It did not.
    #[serde(rename = "fail")]
    Fail,
    /// It is about a mechanism the run's mode does not have (budgets, refusals, derefs or digests in a baseline).
    #[serde(rename = "n/a")]
    NotApplicable,
}

impl CheckStatus {
    /// `PASS`, `FAIL` or `N/A`, as printed.
    pub fn label(self) -> &'static str {
        match self {
            CheckStatus::Pass => "PASS",
            CheckStatus::Fail => "FAIL",
            CheckStatus::NotApplicable => "N/A",
        }
    }

    fn of(passed: bool) -> CheckStatus {
        if passed { CheckStatus::Pass } else { CheckStatus::Fail }
    }
}

/// The whole report (`lessrt run --json`; `report.json` of a run directory, read back by `lessrt runs show`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    /// Scenario name.
    pub scenario: String,
    /// Wire mode.
    pub mode: WireMode,
    /// Tokenizer.
    pub tokenizer: String,
    /// By role.
    pub roles: BTreeMap<String, RoleReport>,
    /// The scenario's checks.
    pub checks: Vec<CheckResult>,
    /// The scenario's graded tasks, from what the agents delivered.
    pub tasks: TaskReport,
    /// Messages that reached an agent over its MAX_INLINE_TOKENS (`msg_id: tokens>cap`). In LESS mode a gateway
    /// refuses them, so any here is a defect; a baseline enforces no cap and lists what exceeded it.
    pub over_cap: Vec<String>,
    /// Sums over roles.
    pub totals: RoleReport,
    /// Restarts of the run's own actors (memory, resolver, ledger, summarizers) by the run supervisor, by actor;
    /// absent when there were none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_restarts: BTreeMap<String, u32>,
    /// Subtrees that went on without: an agent whose node failed past the restart limit, with every agent below it;
    /// absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostSubtree>,
    /// Where the run went on after its head died (`lessrt run --resume`), in order; absent when it never did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed: Vec<ResumedAt>,
    /// LESS §12's rates over the run.
    #[serde(default)]
    pub rates: Rates,
    /// How long the turns took (the one part of a report that depends on timing); absent for a ledger whose turns
    /// were not timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
}

/// One resume of a run ([`crate::run::Event::Resumed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumedAt {
    /// The step it went on from (it had started, and ran again whole).
    pub from_step: usize,
    /// Events of that step set aside in `ledger.discarded.jsonl`.
    pub discarded: usize,
}

/// LESS §12's metrics that are ratios, over one run (what an operator watches trend): each `None` when its
/// denominator is zero, rather than a zero that would read as "never".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Rates {
    /// Compliant resends delivered per message refused (LESS: "resend rate after budget rejection").
    pub resend_rate: Option<f64>,
    /// Deref requests denied per deref request.
    pub deref_denial_rate: Option<f64>,
    /// Derefs granted per turn, by role (roles with turns).
    pub derefs_per_turn: BTreeMap<String, f64>,
    /// Contradictions per engram put into memory: a put that raised a contradiction, or a delivered `risk` engram
    /// tagged `contradiction` citing two or more pointers.
    pub contradiction_rate: Option<f64>,
    /// Engrams delivered, by kind, most first (at most five; ties by name).
    pub top_engram_kinds: Vec<KindCount>,
    /// Inline tokens per turn in the first and in the second half of the run's turns, in order (the trend LESS asks
    /// to watch); `None` with fewer than two turns.
    pub tokens_per_turn_trend: Option<[f64; 2]>,
}

/// How many engrams of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCount {
    /// The kind (`fact`, `decision`, …).
    pub kind: String,
    /// How many were delivered.
    pub count: u32,
}

fn ratio(numerator: usize, denominator: usize) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

impl Rates {
    /// The rates of a run's `events`, with its per-role report (turns and derefs) and its turns' inline tokens in
    /// order.
    fn of(events: &[Event], roles: &BTreeMap<String, RoleReport>, per_turn: &[u32]) -> Rates {
        let (mut refused, mut resent, mut asked, mut denied, mut puts, mut contradictions) = (0, 0, 0, 0, 0, 0);
        for event in events {
            match event {
                Event::Rejected { .. } => refused += 1,
                Event::Resent { .. } => resent += 1,
                Event::Deref { granted, .. } => {
                    asked += 1;
                    denied += usize::from(!granted);
                }
                Event::MemoryPut { code: None, contradictions: raised, .. } => {
                    puts += 1;
                    contradictions += usize::from(!raised.is_empty());
                }
                _ => {}
            }
        }
        let mut kinds: BTreeMap<String, u32> = BTreeMap::new();
        for (_, engram) in delivered_engrams(events) {
            *kinds.entry(engram.kind.as_str().to_owned()).or_default() += 1;
            let tagged = engram.tags.iter().flatten().any(|t| t == "contradiction");
            contradictions +=
                usize::from(engram.kind == less_contract::EngramKind::Risk && tagged && engram.pointers.len() >= 2);
        }
        let mut top: Vec<KindCount> = kinds.into_iter().map(|(kind, count)| KindCount { kind, count }).collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.kind.cmp(&b.kind)));
        top.truncate(5);
        let half = per_turn.len() / 2;
        let mean = |turns: &[u32]| turns.iter().map(|&t| f64::from(t)).sum::<f64>() / turns.len() as f64;
        Rates {
            resend_rate: ratio(resent, refused),
            deref_denial_rate: ratio(denied, asked),
            derefs_per_turn: roles
                .iter()
                .filter(|(_, r)| r.turns > 0)
                .map(|(role, r)| (role.clone(), f64::from(r.derefs) / f64::from(r.turns)))
                .collect(),
            contradiction_rate: ratio(contradictions, puts),
            top_engram_kinds: top,
            tokens_per_turn_trend: (half > 0).then(|| [mean(&per_turn[..half]), mean(&per_turn[half..])]),
        }
    }
}

/// A subtree out of the run: its node failed past the restart limit, and its parent was told by an escalation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostSubtree {
    /// The agent whose node failed.
    pub agent: String,
    /// It and every agent below it, out of the run with it.
    pub agents: Vec<String>,
    /// Its last failure.
    pub reason: String,
}

impl RunReport {
    /// Whether no check failed (checks that do not apply to the mode have not failed) and every graded task was
    /// solved.
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(CheckResult::failed) && self.tasks.solved == self.tasks.graded
    }

    /// What keeps the run from passing, one line each: `check <name>: <detail>` for a failed check, `task <id>
    /// (<agent>): <evidence>` for an unsolved task.
    pub fn failures(&self) -> Vec<String> {
        let checks = self.checks.iter().filter(|c| c.failed()).map(|c| format!("check {}: {}", c.name, c.detail));
        let tasks = self.tasks.items.iter().filter(|t| !t.solved);
        checks.chain(tasks.map(|t| format!("task {} ({}): {}", t.id, t.agent, t.evidence))).collect()
    }

    /// Builds the report from the ledger's events.
    pub fn build(scenario: &Scenario, mode: WireMode, events: &[Event]) -> RunReport {
        // Turns that overlapped recorded their events interleaved: counted in the order of the steps, what the
        // report says does not depend on which turn ran first.
        let timing = Timing::of(scenario, events);
        let reordered = timing::in_step_order(events);
        let events = reordered.as_deref().unwrap_or(events);
        let role_of = |id: &str| scenario.agent(id).map(|a| a.role.clone());
        let mut samples: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        let mut roles: BTreeMap<String, RoleReport> = BTreeMap::new();
        let mut in_order = Vec::new();
        for agent in &scenario.agents {
            roles.entry(agent.role.clone()).or_default();
        }
        for event in events {
            match event {
                Event::Delivered { from, tokens, .. } => {
                    // Escalations written by a gateway are counted under the pseudo-role "gateway".
                    let role = role_of(from).unwrap_or_else(|| "gateway".to_owned());
                    let report = roles.entry(role.clone()).or_default();
                    report.turns += 1;
                    report.escalations += u32::from(is_agent_escalation(scenario, event));
                    samples.entry(role).or_default().push(*tokens);
                    in_order.push(*tokens);
                }
                // A recall, search or listing answer is inline context for the asking agent: one turn of its role.
                Event::Query { agent, tokens, .. }
                | Event::Search { agent, tokens, code: None, .. }
                | Event::List { agent, tokens, code: None, .. }
                | Event::Describe { agent, tokens, code: None, .. } => {
                    if let Some(role) = role_of(agent) {
                        roles.entry(role.clone()).or_default().turns += 1;
                        samples.entry(role).or_default().push(*tokens);
                        in_order.push(*tokens);
                    }
                }
                Event::Rejected { from, tokens, .. } => {
                    if let Some(role) = role_of(from) {
                        let r = roles.entry(role).or_default();
                        r.rejections += 1;
                        r.rejected_tokens += u64::from(*tokens);
                    }
                }
                Event::Resent { from, .. } => {
                    if let Some(role) = role_of(from) {
                        roles.entry(role).or_default().resends += 1;
                    }
                }
                Event::Escalated { about, .. } => {
                    if let Some(role) = role_of(about) {
                        roles.entry(role).or_default().escalations += 1;
                    }
                }
                Event::Deref { agent, tokens, granted: true, .. } => {
                    if let Some(role) = role_of(agent) {
                        let r = roles.entry(role).or_default();
                        r.derefs += 1;
                        r.deref_tokens += u64::from(*tokens);
                    }
                }
                Event::ModelUsage {
                    agent,
                    calls,
                    prompt_tokens,
                    completion_tokens,
                    cached_tokens,
                    counted_calls,
                    model_ms,
                    unusable,
                } => {
                    if let Some(role) = role_of(agent) {
                        let spend = ModelSpend {
                            calls: *calls,
                            prompt_tokens: *prompt_tokens,
                            completion_tokens: *completion_tokens,
                            cached_tokens: *cached_tokens,
                            counted_calls: *counted_calls,
                            model_ms: *model_ms,
                            unusable: unusable.len() as u64,
                        };
                        roles.entry(role).or_default().model.add(&spend);
                    }
                }
                Event::Restart { agent, .. } => {
                    if let Some(role) = role_of(agent) {
                        roles.entry(role).or_default().restarts += 1;
                    }
                }
                _ => {}
            }
        }
        let mut all_samples = Vec::new();
        for (role, report) in &mut roles {
            let role_samples = samples.remove(role).unwrap_or_default();
            all_samples.extend(&role_samples);
            report.inline_tokens = TokenStats::of(role_samples.clone());
            report.per_turn = role_samples;
            report.billed = report.model.billed();
            report.model_calls = report.model.calls;
        }
        let mut totals =
            RoleReport { inline_tokens: TokenStats::of(all_samples), per_turn: in_order, ..RoleReport::default() };
        for r in roles.values() {
            totals.turns += r.turns;
            totals.derefs += r.derefs;
            totals.deref_tokens += r.deref_tokens;
            totals.rejections += r.rejections;
            totals.rejected_tokens += r.rejected_tokens;
            totals.resends += r.resends;
            totals.escalations += r.escalations;
            totals.restarts += r.restarts;
            totals.model.add(&r.model);
        }
        totals.billed = totals.model.billed();
        totals.model_calls = totals.model.calls;
        let checks = scenario
            .expect
            .iter()
            .filter(|e| e.mode.is_none_or(|m| m == mode))
            .map(|e| evaluate(&e.check, scenario, mode, events, &totals))
            .collect();
        let rates = Rates::of(events, &roles, &totals.per_turn);
        RunReport {
            rates,
            scenario: scenario.name.clone(),
            mode,
            tokenizer: scenario.tokenizer.to_string(),
            roles,
            checks,
            tasks: grade(scenario, mode, events),
            over_cap: over_cap(events),
            totals,
            service_restarts: service_restarts(events),
            lost: lost(events),
            resumed: events
                .iter()
                .filter_map(|e| match e {
                    Event::Resumed { from_step, discarded } => {
                        Some(ResumedAt { from_step: *from_step, discarded: *discarded })
                    }
                    _ => None,
                })
                .collect(),
            timing,
        }
    }

    /// The report without what depends on timing ([`RunReport::timing`]): what two runs of the same scenario and
    /// agents must share whatever their parallelism.
    pub fn untimed(&self) -> RunReport {
        RunReport { timing: None, ..self.clone() }
    }
}

/// Restarts of the run's own actors, by actor.
fn service_restarts(events: &[Event]) -> BTreeMap<String, u32> {
    let mut restarts = BTreeMap::new();
    for event in events {
        if let Event::ServiceRestart { service, .. } = event {
            *restarts.entry(service.clone()).or_default() += 1;
        }
    }
    restarts
}

/// The subtrees lost, in order.
fn lost(events: &[Event]) -> Vec<LostSubtree> {
    let lost = events.iter().filter_map(|e| match e {
        Event::SubtreeLost { agent, agents, reason } => {
            Some(LostSubtree { agent: agent.clone(), agents: agents.clone(), reason: reason.clone() })
        }
        _ => None,
    });
    lost.collect()
}

/// Messages delivered over their receiver's MAX_INLINE_TOKENS.
fn over_cap(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Delivered { msg_id, tokens, max_tokens, .. } if tokens > max_tokens => {
                Some(format!("{msg_id}: {tokens}>{max_tokens}"))
            }
            _ => None,
        })
        .collect()
}

fn delivered_engrams(events: &[Event]) -> impl Iterator<Item = (&str, &Engram)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Delivered { from, doc, .. } => Some((from.as_str(), doc)),
            _ => None,
        })
        .flat_map(|(from, doc)| doc.engrams().iter().map(move |e| (from, e)))
}

fn pointer_texts(engram: &Engram) -> Vec<String> {
    engram.pointers.iter().map(ToString::to_string).collect()
}

/// An escalation an agent wrote and delivered itself (a gateway's own escalations are `Event::Escalated`).
fn is_agent_escalation(scenario: &Scenario, event: &Event) -> bool {
    matches!(event, Event::Delivered { from, doc, .. }
        if scenario.agent(from).is_some() && doc.escalation_reason().is_some())
}

/// The id a run delivered for a recalled engram: a run's own copy of a claim another run holds privately is filed
/// as `<id>~r<run hash>` (`memory::store::run_copy_id`).
fn base_id(id: &str) -> &str {
    id.split_once("~r").map_or(id, |(base, _)| base)
}

/// Why a check about a LESS mechanism does not apply to a baseline run, if it does not.
fn not_applicable(check: &Check, mode: WireMode) -> Option<&'static str> {
    if !mode.is_baseline() {
        return None;
    }
    match check {
        Check::NoTurnOverBudget { .. } => Some("the baseline enforces no inline budget"),
        Check::RejectedThenResent { .. } => Some("the baseline refuses nothing"),
        Check::Derefs { .. } => Some("the baseline pastes content instead of metering derefs"),
        Check::DigestsRecorded => Some("the baseline pastes content; there are no dereferenced pointers to pin"),
        _ => None,
    }
}

fn evaluate(check: &Check, scenario: &Scenario, mode: WireMode, events: &[Event], totals: &RoleReport) -> CheckResult {
    let result = evaluate_rule(check, scenario, events, totals);
    match not_applicable(check, mode) {
        Some(why) => {
            CheckResult { status: CheckStatus::NotApplicable, detail: format!("{why} ({})", result.detail), ..result }
        }
        None => result,
    }
}

fn evaluate_rule(check: &Check, scenario: &Scenario, events: &[Event], totals: &RoleReport) -> CheckResult {
    let (name, passed, detail) = match check {
        Check::EngramCites { kind, pointers } => {
            let kind_name = kind.as_str();
            let found = delivered_engrams(events).find(|(_, e)| {
                e.kind == *kind && {
                    let cited = pointer_texts(e);
                    pointers.iter().all(|p| cited.contains(p))
                }
            });
            (
                format!("{kind_name} engram cites {}", pointers.join(" + ")),
                found.is_some(),
                found.map_or("no such engram was delivered".into(), |(from, e)| format!("{} from {from}", e.id)),
            )
        }
        Check::DigestsRecorded => {
            // Every pointer an agent dereferenced (granted) and then cites must carry the digest it got.
            let dereferenced: std::collections::HashSet<(&str, &str)> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Deref { agent, pointers, granted: true, .. } => Some((agent, pointers)),
                    _ => None,
                })
                .flat_map(|(agent, pointers)| pointers.iter().map(move |p| (agent.as_str(), p.as_str())))
                .collect();
            let (mut n_with, mut missing) = (0usize, Vec::new());
            for (from, engram) in delivered_engrams(events) {
                for parsed in &engram.pointers {
                    let text = parsed.to_string();
                    if dereferenced.contains(&(from, text.as_str())) {
                        if parsed.digest().is_some() {
                            n_with += 1;
                        } else {
                            missing.push(format!("{from}: {text}"));
                        }
                    }
                }
            }
            (
                "dereferenced sources are cited with their digest".into(),
                n_with > 0 && missing.is_empty(),
                format!(
                    "{n_with} citations carry a digest; missing: {}",
                    if missing.is_empty() { "none".into() } else { missing.join(", ") }
                ),
            )
        }
        Check::NoTurnOverBudget { p95 } => {
            let over = over_cap(events);
            (
                format!("no turn over budget, p95 ≤ {p95}"),
                over.is_empty() && totals.inline_tokens.p95 <= *p95,
                format!(
                    "p95 {} tok; over budget: {}",
                    totals.inline_tokens.p95,
                    if over.is_empty() { "none".into() } else { over.join(", ") }
                ),
            )
        }
        Check::RejectedThenResent { agent } => {
            let rejected = events.iter().any(|e| matches!(e, Event::Rejected { from, .. } if from == agent));
            let resent = events.iter().any(|e| matches!(e, Event::Resent { from, .. } if from == agent));
            (
                format!("{agent} rejected then resent"),
                rejected && resent,
                format!("rejected: {rejected}, resent: {resent}"),
            )
        }
        Check::Derefs { agent, granted, denied } => {
            let mine = |a: &String| agent.as_ref().is_none_or(|x| x == a);
            let n_granted =
                events.iter().filter(|e| matches!(e, Event::Deref { agent: a, granted: true, .. } if mine(a))).count();
            let n_denied =
                events.iter().filter(|e| matches!(e, Event::Deref { agent: a, granted: false, .. } if mine(a))).count();
            let ok = granted.is_none_or(|g| g as usize == n_granted) && denied.is_none_or(|d| d as usize == n_denied);
            (
                format!("derefs{}", agent.as_ref().map(|a| format!(" of {a}")).unwrap_or_default()),
                ok,
                format!("granted {n_granted} (want {granted:?}), denied {n_denied} (want {denied:?})"),
            )
        }
        Check::Restarted { agent, times } => {
            let n = events.iter().filter(|e| matches!(e, Event::Restart { agent: a, .. } if a == agent)).count();
            (format!("{agent} restarted {times}×"), n == *times as usize, format!("restarted {n}×"))
        }
        Check::Escalations { count } => {
            let n = events
                .iter()
                .filter(|e| matches!(e, Event::Escalated { .. }) || is_agent_escalation(scenario, e))
                .count();
            (format!("{count} escalations"), n == *count as usize, format!("{n} escalations"))
        }
        Check::QueryFound { agent, min, cites } => {
            let returned: Vec<&String> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Query { agent: a, returned, .. } if a == agent => Some(returned),
                    _ => None,
                })
                .flatten()
                .collect();
            let cites_ok = cites.as_ref().is_none_or(|want| {
                delivered_engrams(events)
                    .any(|(_, e)| returned.iter().any(|id| e.id == base_id(id)) && pointer_texts(e).contains(want))
            });
            (
                format!("{agent} recalled ≥{min} engrams"),
                returned.len() >= *min && cites_ok,
                format!("{} returned; citation found: {cites_ok}", returned.len()),
            )
        }
        Check::MemoryRefused { agent, code, count } => {
            let n = events
                .iter()
                .filter(|e| match e {
                    Event::Query { agent: a, code: Some(c), .. }
                    | Event::MemoryPut { agent: a, code: Some(c), .. }
                    | Event::Promote { agent: a, code: Some(c), .. } => {
                        c == code && agent.as_ref().is_none_or(|want| want == a)
                    }
                    _ => false,
                })
                .count();
            let whose = agent.as_ref().map(|a| format!(" of {a}")).unwrap_or_default();
            (format!("{count} memory refusals {code}{whose}"), n == *count as usize, format!("{n} refused"))
        }
        Check::Promoted { subject, to } => {
            let promoted = events.iter().find_map(|e| match e {
                Event::Promote { subject: s, to: t, id: Some(id), code: None, .. } if s == subject && t == to => {
                    Some(id.clone())
                }
                _ => None,
            });
            (
                format!("subject:{subject} promoted to {}", to.as_str()),
                promoted.is_some(),
                promoted.map_or_else(|| "no promotion".to_owned(), |id| format!("{id} promoted")),
            )
        }
        Check::MemoryPuts { agent, min } => {
            let n = events
                .iter()
                .filter(|e| match e {
                    Event::MemoryPut { agent: a, code: None, .. } => agent.as_ref().is_none_or(|want| want == a),
                    _ => false,
                })
                .count();
            let whose = agent.as_ref().map(|a| format!(" of {a}")).unwrap_or_default();
            (format!("≥{min} engrams{whose} put into memory"), n >= *min, format!("{n} put"))
        }
        Check::Claims { agent, granted, refused, overrides } => {
            let claims: Vec<(&Option<ErrorCode>, usize)> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Claim { agent: a, code, displaced, .. } if agent.as_ref().is_none_or(|want| want == a) => {
                        Some((code, displaced.len()))
                    }
                    _ => None,
                })
                .collect();
            let n_granted = claims.iter().filter(|(code, _)| code.is_none()).count();
            let n_refused = claims.iter().filter(|(code, _)| **code == Some(ErrorCode::ClaimConflict)).count();
            let n_overrides: usize = claims.iter().map(|(_, displaced)| displaced).sum();
            let want = |n: &Option<u32>, got: usize| n.is_none_or(|n| n as usize == got);
            let whose = agent.as_ref().map(|a| format!(" of {a}")).unwrap_or_default();
            let asked = [("granted", granted), ("refused", refused), ("overrides", overrides)]
                .iter()
                .filter_map(|(what, n)| n.map(|n| format!("{n} {what}")))
                .collect::<Vec<_>>()
                .join(", ");
            (
                format!("claims{whose}: {asked}"),
                want(granted, n_granted) && want(refused, n_refused) && want(overrides, n_overrides),
                format!("{n_granted} granted, {n_refused} refused, {n_overrides} overrides"),
            )
        }
    };
    CheckResult { name, status: CheckStatus::of(passed), detail }
}

mod timing;

#[cfg(test)]
mod tests;
