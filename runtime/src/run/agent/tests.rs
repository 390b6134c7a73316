//! The turn loop through the real actor tree, with test agents: a turn that never finishes ends at its limit with an
//! escalation and the run goes on; a child's request for a read over its budget reaches its parent, whose decision
//! the gateways carry out (a grant the child reads with, or a denial it is told of).

use std::sync::Arc;

use serde_json::Value;

use crate::run::{Action, Agent, AgentFactory, AgentFuture, DecideInput, Decision, Outcome, Seat, TurnInput};
use crate::run::{AskGrantAction, DerefAction, ledger_of_test_run};
use less_contract::{GrantSpec, WireMode};

/// `looper` never finishes; `asker` reads over its budget, asks, and reads with the grant; the others finish at once.
/// As a parent each grants what it is asked when `grants`, else denies.
struct Tester {
    id: String,
    grants: bool,
}

impl Agent for Tester {
    fn next<'a>(&'a mut self, turn: &'a TurnInput) -> AgentFuture<'a, Action> {
        let span = "repo:a.rs#L1-L20".to_owned();
        let action = match (turn.spec.id.as_str(), turn.last()) {
            ("looper", _) => Action::Query { text: "again".to_owned(), k: 1, project: None, scope: None },
            ("asker", None) => Action::Deref(DerefAction {
                pointers: vec![span],
                reason: "read it".to_owned(),
                intended_use: "report".to_owned(),
                grant: None,
            }),
            ("asker", Some(done)) => match (&done.action, &done.outcome) {
                (Action::Deref(_), Outcome::Refused(_)) => Action::AskGrant(AskGrantAction {
                    pointers: vec![span],
                    reason: "it is over my budget".to_owned(),
                    intended_use: "report".to_owned(),
                }),
                (Action::AskGrant(_), Outcome::Granted { grant_id }) => Action::Deref(DerefAction {
                    pointers: vec![span],
                    reason: "granted".to_owned(),
                    intended_use: "report".to_owned(),
                    grant: Some(grant_id.clone()),
                }),
                _ => Action::Finish,
            },
            _ => Action::Finish,
        };
        Box::pin(async move { action })
    }

    fn decide<'a>(&'a mut self, input: &'a DecideInput) -> AgentFuture<'a, Decision> {
        let decision = if self.grants {
            Decision::Grant(GrantSpec {
                id: format!("g-{}", input.ask.request.request_id),
                to: String::new(),
                patterns: vec!["repo:a.rs".to_owned()],
                max_derefs: 1,
                max_tokens: input.ask.tokens,
                uses: 1,
                ttl: "PT1H".to_owned(),
                inline_code_tokens: 0,
                tamper: false,
            })
        } else {
            Decision::Deny(format!("{} keeps its budget", self.id))
        };
        Box::pin(async move { decision })
    }
}

struct Testers {
    grants: bool,
}

impl AgentFactory for Testers {
    fn make(&self, seat: &Seat) -> Box<dyn Agent> {
        let spec = &seat.spec;
        Box::new(Tester { id: spec.id.clone(), grants: self.grants })
    }
}

const SCENARIO: &str = r#"
name = "turns"
[budgets.roles.dev]
max_deref_tokens_total = 20
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "looper"
role = "dev"
parent = "lead"
turn_limit = 3
[[agents]]
id = "asker"
role = "dev"
parent = "lead"
[[steps]]
action = "query"
agent = "looper"
text = "x"
[[steps]]
action = "query"
agent = "asker"
text = "x"
[[steps]]
action = "query"
agent = "lead"
text = "after"
"#;

/// Runs the scenario over a 20-line file in LESS mode: the ledger's events as JSON.
fn run(grants: bool) -> Vec<Value> {
    let text: String = (1..=20).map(|i| format!("fn line_{i}() {{ let value = {i}; }}\n")).collect();
    let ledger = ledger_of_test_run(SCENARIO, &[("a.rs", text)], Arc::new(Testers { grants }), WireMode::Less);
    ledger.lines().map(|l| serde_json::from_str(l).expect("event")).collect()
}

fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

#[test]
fn a_turn_that_never_finishes_ends_at_its_limit_with_an_escalation_and_the_run_goes_on() {
    let events = run(true);
    let limits = of(&events, "turn_limit");
    assert_eq!(limits.len(), 1, "{limits:?}");
    assert_eq!((&limits[0]["agent"], &limits[0]["actions"]), (&Value::from("looper"), &Value::from(3)));
    let queries = of(&events, "query").into_iter().filter(|e| e["agent"] == "looper").count();
    assert_eq!(queries, 3, "three actions, then the limit");
    let escalation = of(&events, "delivered")
        .into_iter()
        .find(|e| e["from"] == "looper" && e["doc"]["type"] == "escalation")
        .expect("an escalation to the parent");
    assert_eq!(escalation["to"], "lead");
    assert!(escalation["doc"]["reason"].as_str().expect("reason").contains("within 3 actions"));
    // The steps after it ran.
    assert!(of(&events, "step").iter().any(|e| e["agent"] == "lead"), "the run went on");
}

#[test]
fn a_read_over_budget_is_asked_for_granted_by_the_parent_and_read_with_the_grant() {
    let events = run(true);
    let derefs: Vec<(bool, Option<&str>)> = of(&events, "deref")
        .iter()
        .filter(|e| e["agent"] == "asker")
        .map(|e| (e["granted"].as_bool().expect("granted"), e["via_grant"].as_str()))
        .collect();
    let asked = of(&events, "grant_asked");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let request = asked[0]["request_id"].as_str().expect("request id");
    assert_eq!(asked[0]["parent"], "lead");
    let grant_id = format!("g-{request}");
    assert_eq!(derefs, vec![(false, None), (true, Some(grant_id.as_str()))]);
    let issued = of(&events, "grant_issued");
    assert_eq!(issued.len(), 1);
    assert_eq!((&issued[0]["answers"], &issued[0]["grantee"]), (&Value::from(request), &Value::from("asker")));
    // The request travelled as a counted question carrying the deref_request.
    let question = of(&events, "delivered")
        .into_iter()
        .find(|e| e["from"] == "asker" && e["doc"]["type"] == "question")
        .expect("the request's message");
    assert_eq!(question["doc"]["deref_requests"][0]["request_id"], Value::from(request));
    assert!(question["tokens"].as_u64().expect("tokens") > 0);
}

#[test]
fn a_denied_request_is_told_to_the_child_and_grants_nothing() {
    let events = run(false);
    let denied = of(&events, "grant_denied");
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["reason"], "lead keeps its budget");
    assert!(of(&events, "grant_issued").is_empty());
    let told = of(&events, "delivered")
        .into_iter()
        .find(|e| e["to"] == "asker" && e["doc"]["type"] == "gate_report")
        .expect("a failed gate_report to the child");
    assert_eq!((&told["doc"]["status"], &told["doc"]["gate_id"]), (&Value::from("fail"), &denied[0]["request_id"]));
    let reads = of(&events, "deref").into_iter().filter(|e| e["agent"] == "asker").count();
    assert_eq!(reads, 1, "only the refused read");
}

#[test]
fn a_seat_holds_the_questions_below_its_agent_and_never_a_gold_answer() {
    let scenario = less_contract::Scenario::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/real-ignore.toml"),
    )
    .expect("the shipped scenario");
    let lead = Seat::of(&scenario, "walk-lead").expect("an agent");
    let worker = Seat::of(&scenario, "walk-investigator").expect("an agent");
    // The lead sees its investigators' questions, the way down to each, and the pointers it may hand out.
    let question = lead.question("parallel-threads").expect("a question below the lead");
    assert_eq!(question.via, ["walk-lead", "walk-investigator"]);
    assert!(!lead.catalogue.is_empty());
    assert_eq!(lead.questions_below(&["parallel-threads".to_owned()], "walk-investigator").len(), 1);
    assert!(lead.questions_below(&["parallel-threads".to_owned()], "precedence-investigator").is_empty());
    // A worker sees its own, not a sibling's, and holds no catalogue.
    assert!(worker.question("parallel-threads").is_some());
    assert!(worker.questions.iter().all(|q| q.agent == "walk-investigator"));
    assert!(worker.catalogue.is_empty() && worker.children.is_empty());
    // Its script is its own steps, by their index in the scenario, and no one else's.
    let own: Vec<usize> = (0..scenario.steps.len())
        .filter(|&i| crate::run::conduct::step_agent(&scenario.steps[i]) == "walk-investigator")
        .collect();
    assert!(!own.is_empty());
    assert_eq!(worker.script.keys().copied().collect::<Vec<_>>(), own);
    assert!(worker.script.values().all(|step| crate::run::conduct::step_agent(step) == "walk-investigator"));
    // Whatever a seat holds, none of the gold: not its cited spans, not its terms, not its wrong patterns.
    let gold = scenario.task("parallel-threads").expect("a task");
    // A model's seat holds its report steps as tasks, without the scripted claims (which state the answers).
    let models = scenario.clone().with_every_agent_llm();
    let (model_lead, model_worker) = (Seat::of(&models, "walk-lead"), Seat::of(&models, "walk-investigator"));
    let scripted = format!("{worker:?}");
    assert!(scripted.contains("available_parallelism"), "a scripted worker plays its authored claims");
    let shown = format!("{model_lead:?}{model_worker:?}");
    let gold_text = format!("{:?}", gold.gold);
    for marker in ["available_parallelism", "whichever is smaller", "uncapped|unbounded"] {
        assert!(gold_text.contains(marker), "the gold names {marker}");
        assert!(!shown.contains(marker), "a seat shows the gold's {marker}");
    }
}

/// An agent that panics whenever it is asked to act.
struct Crasher;

impl Agent for Crasher {
    fn next<'a>(&'a mut self, _turn: &'a TurnInput) -> AgentFuture<'a, Action> {
        Box::pin(async { panic!("a crash loop") })
    }
}

/// `dev` crashes on every turn; the lead acts as written.
struct CrashLoop;

impl AgentFactory for CrashLoop {
    fn make(&self, seat: &Seat) -> Box<dyn Agent> {
        match seat.spec.id.as_str() {
            "dev" => Box::new(Crasher),
            id => Box::new(Tester { id: id.to_owned(), grants: false }),
        }
    }
}

#[test]
fn a_crash_loop_is_restarted_to_its_intensity_then_escalates_and_the_run_ends() {
    let scenario = r#"
name = "loop"
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "dev"
role = "dev"
parent = "lead"
[[steps]]
action = "query"
agent = "dev"
text = "x"
[[steps]]
action = "query"
agent = "dev"
text = "y"
[[steps]]
action = "query"
agent = "lead"
text = "after"
"#;
    let ledger = ledger_of_test_run(scenario, &[], Arc::new(CrashLoop), WireMode::Less);
    let events: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).expect("event")).collect();
    let restarts = of(&events, "restart").iter().filter(|e| e["agent"] == "dev").count();
    assert_eq!(restarts, crate::supervision::MAX_RESTARTS, "restarted to its intensity, no more");
    let down = of(&events, "agent_down");
    assert_eq!(down.len(), 1, "{down:?}");
    assert_eq!(down[0]["agent"], "dev");
    // The failure went up: an escalation about dev to its parent, and the run went on to its end.
    let escalated = of(&events, "escalated");
    assert!(escalated.iter().any(|e| e["about"] == "dev" && e["to"] == "lead"), "{escalated:?}");
    let ended: Vec<u64> = of(&events, "turn_end").iter().filter_map(|e| e["index"].as_u64()).collect();
    assert_eq!(ended, [0, 1, 2], "every step ended: the down agent's second turn is skipped, not retried");
}
