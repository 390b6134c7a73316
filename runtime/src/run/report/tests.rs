//! Every check evaluator on a run that satisfies it and on a wrong run that does not, and the checks about LESS
//! mechanisms reported as not applicable in the baselines (never as passed).

use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::run::wire::{Document, EnvelopeKind};
use less_contract::{EngramKind, Scope};
use less_contract::{ErrorCode, Pointer};

const SCENARIO: &str = r#"
name = "checked"
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "dev"
role = "dev"
parent = "lead"
"#;

fn scenario() -> Scenario {
    Scenario::from_toml(SCENARIO, Path::new(".")).unwrap_or_else(|v| panic!("scenario: {v}"))
}

const DIGEST: &str = "blake3:0000000000000000000000000000000000000000000000000000000000000000";

fn engram(id: &str, kind: &str, pointers: Vec<Value>) -> Value {
    json!({"id": id, "kind": kind, "claim": "c", "pointers": pointers, "confidence": 0.8, "ttl": "P1D", "scope": "run",
           "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "dev", "source": "agent"}})
}

fn pointer(text: &str, digest: bool) -> Value {
    let mut p = serde_json::to_value(Pointer::parse(text).expect("pointer")).expect("json");
    if digest {
        p["digest"] = json!(DIGEST);
    }
    p
}

fn delivered(from: &str, msg_id: &str, tokens: u32, engrams: Vec<Value>) -> Event {
    Event::Delivered {
        from: from.to_owned(),
        to: "lead".to_owned(),
        msg_id: msg_id.to_owned(),
        kind: EnvelopeKind::Message,
        tokens,
        max_tokens: 800,
        doc: Document::message(
            json!({"type": "question", "from": from, "msg_id": msg_id, "question": "?", "engrams": engrams}),
        ),
        prose: None,
        restated: Vec::new(),
    }
}

fn deref(agent: &str, pointers: &[&str], granted: bool) -> Event {
    Event::Deref {
        agent: agent.to_owned(),
        pointers: pointers.iter().map(|p| (*p).to_owned()).collect(),
        tokens: if granted { 100 } else { 0 },
        granted,
        via_grant: None,
        code: (!granted).then_some(ErrorCode::DerefDenied),
    }
}

fn query(agent: &str, returned: &[&str], code: Option<ErrorCode>) -> Event {
    Event::Query {
        agent: agent.to_owned(),
        text: "q".to_owned(),
        returned: returned.iter().map(|r| (*r).to_owned()).collect(),
        tokens: 10,
        stages: Vec::new(),
        more: Vec::new(),
        code,
        message: String::new(),
    }
}

fn put(agent: &str, code: Option<ErrorCode>) -> Event {
    Event::MemoryPut {
        agent: agent.to_owned(),
        id: "eg".to_owned(),
        status: if code.is_some() { "refused" } else { "stored" }.to_owned(),
        superseded: Vec::new(),
        contradictions: Vec::new(),
        code,
        message: String::new(),
    }
}

fn promote(subject: &str, to: Scope, id: Option<&str>, code: Option<ErrorCode>) -> Event {
    Event::Promote {
        agent: "lead".to_owned(),
        subject: subject.to_owned(),
        to,
        id: id.map(str::to_owned),
        code,
        message: String::new(),
    }
}

fn rejected(from: &str) -> Event {
    Event::Rejected {
        from: from.to_owned(),
        to: "lead".to_owned(),
        msg_id: "m".to_owned(),
        code: ErrorCode::BudgetExceeded,
        message: String::new(),
        instruction: String::new(),
        tokens: 9000,
        attempt: 1,
    }
}

fn resent(from: &str) -> Event {
    Event::Resent { from: from.to_owned(), to: "lead".to_owned(), msg_id: "m".to_owned() }
}

fn escalated() -> Event {
    Event::Escalated { about: "dev".to_owned(), to: "lead".to_owned(), reason: "r".to_owned() }
}

fn restart(agent: &str) -> Event {
    Event::Restart { agent: agent.to_owned(), reason: "panic".to_owned() }
}

/// The check's status on `events` in `mode`.
fn status(check: &Check, mode: WireMode, events: &[Event]) -> CheckStatus {
    let scenario = scenario();
    let report = RunReport::build(&scenario, mode, events);
    evaluate(check, &scenario, mode, events, &report.totals).status
}

/// `check` passes on `right`, fails on `wrong` in LESS mode.
fn right_and_wrong(name: &str, check: &Check, right: &[Event], wrong: &[Event]) {
    assert_eq!(status(check, WireMode::Less, right), CheckStatus::Pass, "{name} on the right run");
    assert_eq!(status(check, WireMode::Less, wrong), CheckStatus::Fail, "{name} on the wrong run");
}

#[test]
fn engram_cites_fails_without_an_engram_citing_every_pointer() {
    let check = Check::EngramCites {
        kind: EngramKind::Risk,
        pointers: vec!["repo:a.rs#L1-L2".to_owned(), "repo:b.rs#L3-L4".to_owned()],
    };
    let both = vec![pointer("repo:a.rs#L1-L2", false), pointer("repo:b.rs#L3-L4", true)];
    let right = [delivered("dev", "m1", 10, vec![engram("e", "risk", both.clone())])];
    // One side only; both sides but as a fact; both sides split over two engrams.
    for wrong in [
        vec![delivered("dev", "m1", 10, vec![engram("e", "risk", vec![pointer("repo:a.rs#L1-L2", false)])])],
        vec![delivered("dev", "m1", 10, vec![engram("e", "fact", both)])],
        vec![delivered(
            "dev",
            "m1",
            10,
            vec![
                engram("e1", "risk", vec![pointer("repo:a.rs#L1-L2", false)]),
                engram("e2", "risk", vec![pointer("repo:b.rs#L3-L4", false)]),
            ],
        )],
    ] {
        right_and_wrong("engram_cites", &check, &right, &wrong);
    }
    // A refused message does not count.
    assert_eq!(status(&check, WireMode::Less, &[rejected("dev")]), CheckStatus::Fail);
}

#[test]
fn digests_recorded_fails_when_a_dereferenced_citation_lacks_its_digest() {
    let check = Check::DigestsRecorded;
    let read = deref("dev", &["repo:a.rs#L1-L2"], true);
    let right =
        [read.clone(), delivered("dev", "m", 10, vec![engram("e", "fact", vec![pointer("repo:a.rs#L1-L2", true)])])];
    let wrong =
        [read.clone(), delivered("dev", "m", 10, vec![engram("e", "fact", vec![pointer("repo:a.rs#L1-L2", false)])])];
    right_and_wrong("digests_recorded", &check, &right, &wrong);
    // Nothing dereferenced and cited: nothing shows digests work.
    assert_eq!(status(&check, WireMode::Less, &[delivered("dev", "m", 10, vec![])]), CheckStatus::Fail);
    assert_eq!(status(&check, WireMode::Verbatim, &wrong), CheckStatus::NotApplicable);
}

#[test]
fn no_turn_over_budget_fails_on_an_oversize_delivery_or_a_high_p95_and_is_na_in_the_baselines() {
    let check = Check::NoTurnOverBudget { p95: 500 };
    let right = [delivered("dev", "m1", 400, vec![]), delivered("lead", "m2", 300, vec![])];
    right_and_wrong("over cap", &check, &right, &[delivered("dev", "m1", 801, vec![])]);
    right_and_wrong("p95", &check, &right, &[delivered("dev", "m1", 600, vec![])]);
    for mode in [WireMode::Verbatim, WireMode::VerbatimWhole] {
        let scenario = scenario();
        let events = [delivered("dev", "m1", 8477, vec![])];
        let report = RunReport::build(&scenario, mode, &events);
        let result = evaluate(&check, &scenario, mode, &events, &report.totals);
        assert_eq!(result.status, CheckStatus::NotApplicable, "{mode}");
        assert!(result.detail.contains("8477>800"), "the evidence is kept: {}", result.detail);
        assert!(report.passed(), "n/a is not a failure");
        assert_eq!(report.over_cap, vec!["m1: 8477>800".to_owned()]);
    }
}

#[test]
fn rejected_then_resent_fails_without_both() {
    let check = Check::RejectedThenResent { agent: "dev".to_owned() };
    right_and_wrong("rejected_then_resent", &check, &[rejected("dev"), resent("dev")], &[rejected("dev")]);
    right_and_wrong("rejected_then_resent", &check, &[rejected("dev"), resent("dev")], &[resent("dev")]);
    right_and_wrong("someone else", &check, &[rejected("dev"), resent("dev")], &[rejected("lead"), resent("lead")]);
    assert_eq!(status(&check, WireMode::Verbatim, &[]), CheckStatus::NotApplicable);
}

#[test]
fn derefs_fails_on_other_counts() {
    let check = Check::Derefs { agent: Some("dev".to_owned()), granted: Some(1), denied: Some(1) };
    let right =
        [deref("dev", &["repo:a.rs"], true), deref("dev", &["repo:b.rs"], false), deref("lead", &["repo:c.rs"], true)];
    right_and_wrong("derefs", &check, &right, &[deref("dev", &["repo:a.rs"], true)]);
    right_and_wrong("derefs", &check, &right, &[right[0].clone(), right[1].clone(), deref("dev", &["x"], true)]);
    assert_eq!(status(&check, WireMode::VerbatimWhole, &right), CheckStatus::NotApplicable);
}

#[test]
fn restarted_fails_on_another_count() {
    let check = Check::Restarted { agent: "dev".to_owned(), times: 1 };
    right_and_wrong("restarted", &check, &[restart("dev")], &[]);
    right_and_wrong("restarted", &check, &[restart("dev")], &[restart("dev"), restart("dev")]);
    assert_eq!(status(&check, WireMode::Verbatim, &[restart("dev")]), CheckStatus::Pass, "applies to every mode");
}

#[test]
fn escalations_counts_gateway_and_agent_escalations() {
    let check = Check::Escalations { count: 0 };
    let by_agent = Event::Delivered {
        from: "dev".to_owned(),
        to: "lead".to_owned(),
        msg_id: "e".to_owned(),
        kind: EnvelopeKind::Message,
        tokens: 50,
        max_tokens: 800,
        doc: Document::message(
            json!({"type": "escalation", "from": "dev", "msg_id": "e", "reason": "model down", "severity": "blocker"}),
        ),
        prose: None,
        restated: Vec::new(),
    };
    right_and_wrong("escalations", &check, &[], &[escalated()]);
    right_and_wrong("escalations", &check, &[], &[by_agent]);
    assert_eq!(status(&check, WireMode::Verbatim, &[escalated()]), CheckStatus::Fail, "applies to every mode");
}

#[test]
fn query_found_fails_on_too_few_or_without_the_citation() {
    let check = Check::QueryFound { agent: "dev".to_owned(), min: 1, cites: Some("repo:a.rs#L1-L2".to_owned()) };
    let cited = delivered("lead", "m", 10, vec![engram("eg_a", "fact", vec![pointer("repo:a.rs#L1-L2", false)])]);
    let other = delivered("lead", "m", 10, vec![engram("eg_b", "fact", vec![pointer("repo:b.rs", false)])]);
    right_and_wrong(
        "query_found",
        &check,
        &[cited.clone(), query("dev", &["eg_a"], None)],
        &[cited.clone(), query("dev", &[], None)],
    );
    right_and_wrong(
        "query_found",
        &check,
        &[cited.clone(), query("dev", &["eg_a"], None)],
        &[other, query("dev", &["eg_b"], None)],
    );
    right_and_wrong(
        "query_found",
        &check,
        &[cited.clone(), query("dev", &["eg_a"], None)],
        &[cited, query("lead", &["eg_a"], None)],
    );
}

#[test]
fn memory_refused_fails_on_another_count_or_code() {
    let check = Check::MemoryRefused { agent: Some("dev".to_owned()), code: ErrorCode::ScopeDenied, count: 1 };
    let right = [query("dev", &[], Some(ErrorCode::ScopeDenied)), put("dev", None)];
    right_and_wrong("memory_refused", &check, &right, &[put("dev", Some(ErrorCode::RateLimited))]);
    right_and_wrong("memory_refused", &check, &right, &[right[0].clone(), put("dev", Some(ErrorCode::ScopeDenied))]);
    right_and_wrong("memory_refused", &check, &right, &[query("lead", &[], Some(ErrorCode::ScopeDenied))]);
}

#[test]
fn promoted_fails_when_refused_or_another_scope() {
    let check = Check::Promoted { subject: "port".to_owned(), to: Scope::Org };
    let right = [promote("port", Scope::Org, Some("eg_1"), None)];
    right_and_wrong("promoted", &check, &right, &[promote("port", Scope::Org, None, Some(ErrorCode::ScopeDenied))]);
    right_and_wrong("promoted", &check, &right, &[promote("port", Scope::Project, Some("eg_1"), None)]);
    right_and_wrong("promoted", &check, &right, &[promote("port", Scope::Org, None, None)]);
}

#[test]
fn memory_puts_fails_below_the_minimum() {
    let check = Check::MemoryPuts { agent: Some("dev".to_owned()), min: 2 };
    let right = [put("dev", None), put("dev", None)];
    right_and_wrong("memory_puts", &check, &right, &[put("dev", None), put("dev", Some(ErrorCode::RateLimited))]);
    right_and_wrong("memory_puts", &check, &right, &[put("dev", None), put("lead", None)]);
}

#[test]
fn the_report_counts_turns_in_order_and_serializes_the_third_state() {
    let scenario = scenario();
    let events =
        [delivered("lead", "m1", 5, vec![]), delivered("dev", "m2", 7, vec![]), delivered("lead", "m3", 9, vec![])];
    let report = RunReport::build(&scenario, WireMode::Verbatim, &events);
    assert_eq!(report.roles["lead"].per_turn, vec![5, 9]);
    assert_eq!(report.totals.per_turn, vec![5, 7, 9]);
    let na = CheckResult { name: "x".to_owned(), status: CheckStatus::NotApplicable, detail: String::new() };
    assert_eq!(serde_json::to_value(&na).expect("json")["status"], json!("n/a"));
}

#[test]
fn the_rates_count_what_the_ledger_says_and_have_no_value_without_a_denominator() {
    use super::Rates;
    let empty = Rates::of(&[], &BTreeMap::new(), &[]);
    assert_eq!(empty, Rates::default());
    let deref = |granted| Event::Deref {
        agent: "dev".to_owned(),
        pointers: vec!["repo:a.rs".to_owned()],
        tokens: 10,
        granted,
        via_grant: None,
        code: None,
    };
    let put = |contradictions: &[&str]| Event::MemoryPut {
        agent: "dev".to_owned(),
        id: "eg_1".to_owned(),
        status: "stored".to_owned(),
        superseded: Vec::new(),
        contradictions: contradictions.iter().map(|c| (*c).to_owned()).collect(),
        code: None,
        message: String::new(),
    };
    let events =
        [deref(true), deref(false), deref(false), deref(true), put(&[]), put(&["eg_risk"]), put(&[]), put(&[])];
    let roles = BTreeMap::from([
        ("programmer".to_owned(), RoleReport { turns: 4, derefs: 2, ..RoleReport::default() }),
        ("idle".to_owned(), RoleReport::default()),
    ]);
    let rates = Rates::of(&events, &roles, &[100, 300, 50, 50]);
    assert_eq!(rates.deref_denial_rate, Some(0.5));
    assert_eq!(rates.contradiction_rate, Some(0.25));
    assert_eq!(rates.resend_rate, None, "nothing was refused");
    assert_eq!(rates.derefs_per_turn, BTreeMap::from([("programmer".to_owned(), 0.5)]));
    assert_eq!(rates.tokens_per_turn_trend, Some([200.0, 50.0]));
}
