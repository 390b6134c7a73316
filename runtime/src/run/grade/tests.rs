//! Grading from delivered documents: a right answer is solved with its evidence, and each way of being wrong (a
//! wrong span, a missing side, a missing term, an answer by someone else, an answer that was refused) is not.

use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::run::wire::{Document, EnvelopeKind};

const SCENARIO: &str = r#"
name = "graded"
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "dev"
role = "dev"
parent = "lead"
[[agents]]
id = "peer"
role = "dev"
parent = "lead"

[[steps]]
action = "brief"
agent = "lead"
now = ["Answer your tasks."]
tasks = ["rounding", "contradiction"]

[[tasks]]
id = "rounding"
kind = "locate_rule"
agent = "dev"
question = "Where is tax rounded, and how?"
gold = { cites = [["repo:src/tax.rs#L159-L167", "repo:src/money.rs#L239-L263"]], terms = [["half-even", "banker's"], "per line"] }

[[tasks]]
id = "contradiction"
kind = "contradiction"
agent = "peer"
question = "Which two documents disagree on the Free project limit?"
gold = { cites = ["artifact:docs/SPEC.md#sec=Free tier", "artifact:docs/PRD.md#sec=Free plan"], terms = ["3"], patterns = ["\\b(5|five)\\b"] }
"#;

fn scenario() -> Scenario {
    Scenario::from_toml(SCENARIO, Path::new(".")).unwrap_or_else(|v| panic!("scenario: {v}"))
}

fn engram(id: &str, claim: &str, pointers: &[&str]) -> Value {
    let pointers: Vec<Value> =
        pointers.iter().map(|t| serde_json::to_value(Pointer::parse(t).expect("pointer")).expect("json")).collect();
    json!({"id": id, "kind": "fact", "claim": claim, "pointers": pointers, "confidence": 0.8, "ttl": "P1D",
           "scope": "run", "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "x", "source": "agent"}})
}

fn delivered(from: &str, msg_id: &str, engrams: Vec<Value>) -> Event {
    Event::Delivered {
        from: from.to_owned(),
        to: "lead".to_owned(),
        msg_id: msg_id.to_owned(),
        kind: EnvelopeKind::Message,
        tokens: 100,
        max_tokens: 800,
        doc: Document::message(
            json!({"type": "question", "from": from, "msg_id": msg_id, "question": "?", "engrams": engrams}),
        ),
        prose: None,
        restated: Vec::new(),
    }
}

fn verdict<'a>(report: &'a TaskReport, id: &str) -> &'a TaskVerdict {
    report.items.iter().find(|v| v.id == id).expect("graded")
}

#[test]
fn a_right_answer_is_solved_with_its_evidence() {
    let events = vec![
        delivered(
            "dev",
            "dev-m1",
            vec![engram("eg_1", "Tax is rounded half-even, per line after discounts.", &["repo:src/tax.rs#L160-L163"])],
        ),
        delivered(
            "peer",
            "peer-m2",
            vec![engram(
                "eg_2",
                "The spec allows 3 Free projects; the PRD allows five.",
                &[
                    "artifact:docs/SPEC.md#sec=Free tier",
                    "artifact:docs/PRD.md#sec=Free plan",
                    "repo:src/limits.rs#L8-L9",
                ],
            )],
        ),
    ];
    let report = grade(&scenario(), &events);
    assert_eq!((report.graded, report.solved), (2, 2), "{report:#?}");
    let rounding = verdict(&report, "rounding");
    assert_eq!(rounding.answer.as_ref().map(|a| a.engram.as_str()), Some("eg_1"));
    assert!(rounding.evidence.contains("dev-m1") && rounding.evidence.contains("repo:src/tax.rs#L160-L163"));
    // An alternative of a gold entry is as good as the first one: money.rs and "banker's".
    let alt = vec![delivered(
        "dev",
        "dev-m3",
        vec![engram("eg_3", "Banker's rounding per line (money.rs).", &["repo:src/money.rs#L250-L300"])],
    )];
    assert!(verdict(&grade(&scenario(), &alt), "rounding").solved);
}

#[test]
fn wrong_answers_are_not_solved_and_say_what_they_lack() {
    let cases: Vec<(&str, Vec<Event>, &str)> = vec![
        (
            "a span that does not overlap the gold one",
            vec![delivered("dev", "m", vec![engram("e", "Half-even, per line.", &["repo:src/tax.rs#L1-L20"])])],
            "cites nothing overlapping",
        ),
        (
            "a whole file where the gold is a span",
            vec![delivered("dev", "m", vec![engram("e", "Half-even, per line.", &["repo:src/tax.rs"])])],
            "cites nothing overlapping",
        ),
        (
            "the right span without the rule",
            vec![delivered("dev", "m", vec![engram("e", "Tax is rounded up.", &["repo:src/tax.rs#L159-L167"])])],
            "does not state",
        ),
        (
            "a term inside another word",
            vec![delivered("dev", "m", vec![engram("e", "half-evenly, per lines", &["repo:src/tax.rs#L159-L167"])])],
            "does not state",
        ),
        (
            "the answer from another agent",
            vec![delivered("peer", "m", vec![engram("e", "Half-even, per line.", &["repo:src/tax.rs#L159-L167"])])],
            "dev delivered no engram",
        ),
        (
            "the rule and the span split over two engrams",
            vec![delivered(
                "dev",
                "m",
                vec![
                    engram("e1", "Half-even, per line.", &["repo:src/lib.rs#L1-L2"]),
                    engram("e2", "See here.", &["repo:src/tax.rs#L159-L167"]),
                ],
            )],
            "closest",
        ),
    ];
    for (name, events, lack) in cases {
        let report = grade(&scenario(), &events);
        let rounding = verdict(&report, "rounding");
        assert!(!rounding.solved, "{name}: {rounding:?}");
        assert!(rounding.evidence.contains(lack), "{name}: {}", rounding.evidence);
        assert_eq!(report.solved, 0, "{name}");
    }
}

#[test]
fn a_contradiction_needs_both_sides_and_both_numbers() {
    let one_side = vec![delivered(
        "peer",
        "m",
        vec![engram("e", "The spec allows 3 projects, the PRD 5.", &["artifact:docs/SPEC.md#sec=Free tier"])],
    )];
    let contradiction = verdict(&grade(&scenario(), &one_side), "contradiction").clone();
    assert!(!contradiction.solved);
    assert!(contradiction.evidence.contains("artifact:docs/PRD.md#sec=Free plan"), "{}", contradiction.evidence);
    // Another section of the same document is another source.
    let wrong_section = vec![delivered(
        "peer",
        "m",
        vec![engram("e", "3 vs 5", &["artifact:docs/SPEC.md#sec=Seats", "artifact:docs/PRD.md#sec=Free plan"])],
    )];
    assert!(!verdict(&grade(&scenario(), &wrong_section), "contradiction").solved);
    let no_pattern = vec![delivered(
        "peer",
        "m",
        vec![engram("e", "3 vs 4", &["artifact:docs/SPEC.md#sec=Free tier", "artifact:docs/PRD.md#sec=Free plan"])],
    )];
    let missing = verdict(&grade(&scenario(), &no_pattern), "contradiction").clone();
    assert!(!missing.solved && missing.evidence.contains("does not match"), "{}", missing.evidence);
}

#[test]
fn only_delivered_messages_count() {
    let refused = Event::Rejected {
        from: "dev".to_owned(),
        to: "lead".to_owned(),
        msg_id: "m".to_owned(),
        code: crate::ErrorCode::BudgetExceeded,
        message: String::new(),
        instruction: String::new(),
        tokens: 9000,
        attempt: 1,
    };
    let report = grade(&scenario(), &[refused]);
    assert_eq!(report.solved, 0);
    assert_eq!(verdict(&report, "rounding").answer, None);
}

#[test]
fn covers_and_states_follow_their_rules() {
    let p = |t: &str| Pointer::parse(t).expect("pointer");
    assert!(covers(&p("repo:a.rs#L10-L20"), &p("repo:a.rs#L20-L30")));
    assert!(!covers(&p("repo:a.rs#L10-L19"), &p("repo:a.rs#L20-L30")));
    assert!(covers(&p("repo:a.rs#L10-L20"), &p("repo:a.rs")), "a span inside a whole-file gold");
    assert!(!covers(&p("repo:a.rs"), &p("repo:a.rs#L1-L2")), "a whole file does not locate a span");
    assert!(!covers(&p("repo:b.rs#L10-L20"), &p("repo:a.rs#L10-L20")));
    assert!(covers(&p("repo:a.rs#L10-L20@abc"), &p("repo:a.rs#L12")), "revisions do not matter");
    assert!(covers(&p("diff:a..b#src/x.rs"), &p("diff:a..b#src/x.rs")));
    assert!(!covers(&p("diff:a..b#src/y.rs"), &p("diff:a..b#src/x.rs")));
    assert!(covers(&p("diff:a..b#src/y.rs"), &p("diff:a..b")));
    assert!(covers(&p("test:billing::capture"), &p("test:billing::capture")));
    assert!(!covers(&p("test:billing::capture"), &p("test:billing::refund")));
    assert!(!covers(&p("repo:docs/A.md#L1-L9"), &p("artifact:docs/A.md#sec=X")), "another pointer type");
    assert!(states("Rounded HALF-EVEN here", "half-even"));
    assert!(!states("halfeven", "half-even"));
    assert!(states("x = &mut Order;", "&mut Order"));
    assert!(!states("FREE_MAX_PROJECTS5", "5"));
    assert!(states("limit 5.", "5"));
}
