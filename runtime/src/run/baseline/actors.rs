//! The baselines through the actor tree: what a child actually receives in each mode, which reports a brief restates
//! (only those its writer knows), that the fair baseline sends no grants and does not read again what an agent holds.

use std::sync::{Arc, Mutex};

use crate::run::agent::{Agent, AgentFactory, AgentFuture, TurnInput};
use crate::run::inbox::Received;
use crate::run::ledger::Event;
use crate::run::ledger_of_test_run;
use crate::run::wire::{Action, BriefAction, DerefAction, ReportAction};
use less_contract::{Step, WireMode};

/// What each agent had in its inbox at each of its turns.
type Inboxes = Arc<Mutex<Vec<(String, Vec<Received>)>>>;

/// Follows the steps (brief, deref, report) and records its inbox (a test double for the scripted agent, which lives
/// in `less-agents`).
struct Follower {
    id: String,
    seen: Inboxes,
}

impl Agent for Follower {
    fn next<'a>(&'a mut self, input: &'a TurnInput) -> AgentFuture<'a, Action> {
        if !input.done.is_empty() {
            return Box::pin(async { Action::Finish });
        }
        let inbox = input.inbox.clone();
        self.seen.lock().expect("lock").push((self.id.clone(), inbox));
        let action = match &input.step {
            Step::Brief { to, now, constraints, risks, packs, grants, tasks, symbols, capsules, .. } => {
                Action::Brief(BriefAction {
                    to: to.clone(),
                    now: now.clone(),
                    constraints: constraints.clone(),
                    risks: risks.clone(),
                    packs: packs.clone(),
                    grants: grants.clone(),
                    tasks: tasks.clone(),
                    symbols: symbols.clone(),
                    capsules: capsules.clone(),
                })
            }
            Step::Deref { pointers, reason, intended_use, grant, .. } => Action::Deref(DerefAction {
                pointers: pointers.clone(),
                reason: reason.clone(),
                intended_use: intended_use.clone(),
                grant: grant.clone(),
            }),
            Step::Report(step) => Action::Report(ReportAction {
                to: step.to.clone(),
                kind: step.kind.clone(),
                engrams: step.engrams.clone(),
                summary: step.summary.clone(),
                paste_sources: false,
                grant: None,
            }),
            _ => Action::Finish,
        };
        Box::pin(async move { action })
    }
}

struct Followers(Inboxes);

impl AgentFactory for Followers {
    fn make(&self, seat: &crate::run::agent::Seat) -> Box<dyn Agent> {
        let spec = &seat.spec;
        Box::new(Follower { id: spec.id.clone(), seen: self.0.clone() })
    }
}

const SCENARIO: &str = r#"
name = "baseline"
[plan]
goal = "Keep the lines in order."
criteria = ["Line two stays line two"]
artifacts = ["repo:a.rs"]
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "mid"
role = "mid"
parent = "lead"
[[agents]]
id = "dev"
role = "dev"
parent = "mid"
[[agents]]
id = "peer"
role = "peer"
parent = "mid"

[[steps]]
action = "brief"
agent = "lead"
now = ["Start."]

[[steps]]
action = "brief"
agent = "mid"
to = ["dev"]
now = ["Read lines two and three."]
packs = { dev = ["repo:a.rs#L2-L3"] }
grants = [{ id = "g1", to = "dev", patterns = ["repo:a.rs"], max_derefs = 2, max_tokens = 900 }]

[[steps]]
action = "deref"
agent = "dev"
pointers = ["repo:a.rs#L2-L3", "repo:a.rs#L10-L10"]
reason = "Read the span, and line ten."
use = "Report."

[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "t1"
status = "pass"
summary = "SUMMARY-OF-DEV"
engrams = [{ kind = "fact", claim = "CLAIM-OF-DEV", pointers = ["repo:a.rs#L2-L3"] }]

[[steps]]
action = "brief"
agent = "mid"
to = ["peer"]
now = ["Now the whole file."]
packs = { peer = ["repo:a.rs"] }

[[steps]]
action = "report"
agent = "peer"
type = "task_result"
task = "t2"
status = "pass"
summary = "done"

[[steps]]
action = "brief"
agent = "lead"
now = ["Again."]

[[steps]]
action = "report"
agent = "mid"
type = "task_result"
task = "t3"
status = "pass"
summary = "mid done"
"#;

/// Runs the scenario over a 20-line file in `mode`: the inboxes each agent had at its turns, and the ledger.
fn run(mode: WireMode) -> (Vec<(String, Vec<Received>)>, Vec<Event>) {
    let text: String = (1..=20).map(|i| format!("fn line_{i}() {{}}\n")).collect();
    let seen: Inboxes = Arc::default();
    let ledger = ledger_of_test_run(SCENARIO, &[("a.rs", text)], Arc::new(Followers(seen.clone())), mode);
    let events = ledger.lines().map(|l| serde_json::from_str(l).expect("event")).collect();
    let seen = seen.lock().expect("lock").clone();
    (seen, events)
}

/// The wire text of the `n`-th brief in what `agent` had at its last turn.
fn brief_wire(seen: &[(String, Vec<Received>)], agent: &str, n: usize) -> String {
    let (_, inbox) = seen.iter().rev().find(|(id, _)| id == agent).expect("a turn");
    let briefs: Vec<&str> = inbox
        .iter()
        .filter_map(|d| match d {
            Received::Verbatim(verbatim) if verbatim.doc.brief().is_some() => Some(verbatim.wire.as_str()),
            _ => None,
        })
        .collect();
    briefs[n].to_owned()
}

#[test]
fn the_fair_baseline_pastes_spans_restates_known_reports_and_sends_no_grants() {
    let (seen, events) = run(WireMode::Verbatim);
    // dev's brief: goal and criteria restated, the packed span pasted, nothing around it, no plan document.
    let dev = brief_wire(&seen, "dev", 0);
    assert!(dev.contains("Goal: Keep the lines in order.") && dev.contains("1. Line two stays line two"), "{dev}");
    assert!(dev.contains("=== repo:a.rs#L2-L3 ===\nfn line_2() {}\nfn line_3() {}\n"), "{dev}");
    assert!(!dev.contains("fn line_1()") && !dev.contains("fn line_4()"), "only the span: {dev}");
    assert!(!dev.contains("Prior reports"), "mid knew no report yet: {dev}");
    // peer's brief: the whole file (its pack names the file), and dev's report restated as prose (mid received it).
    let peer = brief_wire(&seen, "peer", 0);
    assert!(peer.contains("fn line_1()") && peer.contains("fn line_20()"), "{peer}");
    assert!(peer.contains("Prior reports:\nReport from dev to mid, task_result t1: pass.\nSUMMARY-OF-DEV\n"), "{peer}");
    assert!(peer.contains("- fact: CLAIM-OF-DEV (repo:a.rs#L2-L3)"), "{peer}");
    assert_eq!(peer.matches("fn line_2()").count(), 1, "the report's pasted span is not restated: {peer}");
    // lead's second brief to mid: lead received no report (mid never reported), so it restates none.
    let mid = brief_wire(&seen, "mid", 1);
    assert!(!mid.contains("CLAIM-OF-DEV"), "{mid}");
    // No grant in the baseline; dev did not read again the span pasted into its brief, only line ten.
    assert!(!events.iter().any(|e| matches!(e, Event::GrantIssued { .. })));
    let derefs: Vec<&Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            Event::Deref { agent, pointers, .. } if agent == "dev" => Some(pointers),
            _ => None,
        })
        .collect();
    assert_eq!(derefs, vec![&vec!["repo:a.rs#L10-L10".to_owned()]]);
    // The brief that restated dev's report says so in the ledger.
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Delivered { to, restated, .. } if to == "peer" && restated.len() == 1))
    );
}

#[test]
fn less_and_the_whole_file_baseline_differ_from_it_where_they_should() {
    let (seen, events) = run(WireMode::VerbatimWhole);
    let dev = brief_wire(&seen, "dev", 0);
    assert!(dev.contains("fn line_1()") && dev.contains("fn line_20()"), "whole files: {dev}");
    assert!(events.iter().any(|e| matches!(e, Event::GrantIssued { .. })), "grants as before");
    let (_, events) = run(WireMode::Less);
    assert!(events.iter().any(|e| matches!(e, Event::GrantIssued { .. })));
    let n_dev_derefs = events.iter().filter(|e| matches!(e, Event::Deref { agent, .. } if agent == "dev")).count();
    assert_eq!(n_dev_derefs, 1, "LESS reads through its deref, both spans");
}
