//! Grading from the ledger: a right answer is solved with its evidence, and each way of being wrong (a wrong span, a
//! span too wide, a span never read, a missing side, a missing term, a wrong polarity, a restated question, an answer
//! to another task, an answer by someone else, an answer that was refused) is not.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::run::wire::{Document, EnvelopeKind};
use less_contract::Step;

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
gold = { cites = [["repo:src/tax.rs#L159-L167", "repo:src/money.rs#L239-L263"]], terms = [["half-even", "banker's"], "per line"], wrong = ["\\bnot rounded\\b"] }

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

fn deref(agent: &str, pointers: &[&str]) -> Event {
    Event::Deref {
        agent: agent.to_owned(),
        pointers: pointers.iter().map(|p| (*p).to_owned()).collect(),
        tokens: 50,
        granted: true,
        via_grant: None,
        code: None,
    }
}

fn answers(agent: &str, engram: &str, task: &str) -> Event {
    Event::Answer { agent: agent.to_owned(), engram: engram.to_owned(), task: task.to_owned() }
}

/// The events of `from` reading what its one engram cites, answering `task` with it, and delivering it.
fn answer(from: &str, task: &str, id: &str, claim: &str, pointers: &[&str]) -> Vec<Event> {
    vec![
        deref(from, pointers),
        answers(from, id, task),
        delivered(from, &format!("{from}-m"), vec![engram(id, claim, pointers)]),
    ]
}

fn graded(events: &[Event]) -> TaskReport {
    grade(&scenario(), WireMode::Less, events)
}

fn verdict<'a>(report: &'a TaskReport, id: &str) -> &'a TaskVerdict {
    report.items.iter().find(|v| v.id == id).expect("graded")
}

#[test]
fn a_right_answer_is_solved_with_its_evidence() {
    let contradiction =
        ["artifact:docs/SPEC.md#sec=Free tier", "artifact:docs/PRD.md#sec=Free plan", "repo:src/limits.rs#L8-L9"];
    let mut events = answer(
        "dev",
        "rounding",
        "eg_1",
        "Tax is rounded half-even, per line after discounts.",
        &["repo:src/tax.rs#L160-L163"],
    );
    events.extend(answer(
        "peer",
        "contradiction",
        "eg_2",
        "The spec allows 3 Free projects; the PRD allows five.",
        &contradiction,
    ));
    let report = graded(&events);
    assert_eq!((report.graded, report.solved), (2, 2), "{report:#?}");
    let rounding = verdict(&report, "rounding");
    assert_eq!(rounding.answer.as_ref().map(|a| a.engram.as_str()), Some("eg_1"));
    assert!(rounding.evidence.contains("dev-m") && rounding.evidence.contains("repo:src/tax.rs#L160-L163"));
    // An alternative of a gold entry is as good as the first one: money.rs and "banker's".
    let alt =
        answer("dev", "rounding", "eg_3", "Banker's rounding per line (money.rs).", &["repo:src/money.rs#L250-L300"]);
    assert!(verdict(&graded(&alt), "rounding").solved);
    // A span narrower than what was read, inside it, counts as read.
    let narrower = vec![
        deref("dev", &["repo:src/tax.rs#L150-L180"]),
        answers("dev", "eg_4", "rounding"),
        delivered("dev", "m", vec![engram("eg_4", "Half-even, per line.", &["repo:src/tax.rs#L160-L163"])]),
    ];
    assert!(verdict(&graded(&narrower), "rounding").solved);
}

#[test]
fn wrong_answers_are_not_solved_and_say_what_they_lack() {
    let right = "Tax is rounded half-even, per line.";
    let cases: Vec<(&str, Vec<Event>, &str)> = vec![
        (
            "a span that does not overlap the gold one",
            answer("dev", "rounding", "e", right, &["repo:src/tax.rs#L1-L20"]),
            "cites nothing overlapping",
        ),
        (
            "a whole file where the gold is a span",
            answer("dev", "rounding", "e", right, &["repo:src/tax.rs"]),
            "cites nothing overlapping",
        ),
        (
            "a span more than three times the gold's length and over 40 lines",
            answer("dev", "rounding", "e", right, &["repo:src/tax.rs#L100-L200"]),
            "too wide",
        ),
        (
            "a span cited but never read",
            vec![
                deref("dev", &["repo:src/tax.rs#L1-L9"]),
                answers("dev", "e", "rounding"),
                delivered("dev", "m", vec![engram("e", right, &["repo:src/tax.rs#L159-L167"])]),
            ],
            "without having read it",
        ),
        (
            "a span only partly read",
            vec![
                deref("dev", &["repo:src/tax.rs#L159-L162"]),
                answers("dev", "e", "rounding"),
                delivered("dev", "m", vec![engram("e", right, &["repo:src/tax.rs#L159-L167"])]),
            ],
            "without having read it",
        ),
        (
            "a span read by another agent",
            vec![
                deref("peer", &["repo:src/tax.rs#L159-L167"]),
                answers("dev", "e", "rounding"),
                delivered("dev", "m", vec![engram("e", right, &["repo:src/tax.rs#L159-L167"])]),
            ],
            "without having read it",
        ),
        (
            "the right span without the rule",
            answer("dev", "rounding", "e", "Tax is rounded up.", &["repo:src/tax.rs#L159-L167"]),
            "does not state",
        ),
        (
            "the question restated",
            answer("dev", "rounding", "e", "Where is tax rounded, and how?", &["repo:src/tax.rs#L159-L167"]),
            "does not state",
        ),
        (
            "a term inside another word",
            answer("dev", "rounding", "e", "half-evenly, per lines", &["repo:src/tax.rs#L159-L167"]),
            "does not state",
        ),
        (
            "the wrong polarity",
            answer("dev", "rounding", "e", "Half-even per line: tax is not rounded.", &["repo:src/tax.rs#L159-L167"]),
            "states a wrong answer",
        ),
        (
            "an answer to another task",
            answer("dev", "contradiction", "e", right, &["repo:src/tax.rs#L159-L167"]),
            "answers contradiction, not rounding",
        ),
        (
            "an engram that answers no task",
            vec![
                deref("dev", &["repo:src/tax.rs#L159-L167"]),
                delivered("dev", "m", vec![engram("e", right, &["repo:src/tax.rs#L159-L167"])]),
            ],
            "answers no task",
        ),
        (
            "the answer from another agent",
            answer("peer", "rounding", "e", right, &["repo:src/tax.rs#L159-L167"]),
            "dev delivered no engram",
        ),
        (
            "the rule and the span split over two engrams",
            vec![
                deref("dev", &["repo:src/lib.rs#L1-L2", "repo:src/tax.rs#L159-L167"]),
                answers("dev", "e1", "rounding"),
                answers("dev", "e2", "rounding"),
                delivered(
                    "dev",
                    "m",
                    vec![
                        engram("e1", "Half-even, per line.", &["repo:src/lib.rs#L1-L2"]),
                        engram("e2", "See here.", &["repo:src/tax.rs#L159-L167"]),
                    ],
                ),
            ],
            "closest",
        ),
    ];
    for (name, events, lack) in cases {
        let report = graded(&events);
        let rounding = verdict(&report, "rounding");
        assert!(!rounding.solved, "{name}: {rounding:?}");
        assert!(rounding.evidence.contains(lack), "{name}: {}", rounding.evidence);
        assert_eq!(report.solved, 0, "{name}");
    }
}

#[test]
fn a_descendant_reading_counts_and_baselines_read_what_is_pasted() {
    let scenario = Scenario::from_toml(
        &SCENARIO.replace(
            "[[agents]]\nid = \"peer\"",
            "[[agents]]\nid = \"helper\"\nrole = \"dev\"\nparent = \"dev\"\n\n[[agents]]\nid = \"peer\"",
        ),
        Path::new("."),
    )
    .unwrap_or_else(|v| panic!("scenario: {v}"));
    let span = "repo:src/tax.rs#L159-L167";
    let claim = "Half-even, per line.";
    let by_helper = vec![
        deref("helper", &[span]),
        answers("dev", "e", "rounding"),
        delivered("dev", "m", vec![engram("e", claim, &[span])]),
    ];
    assert!(verdict(&grade(&scenario, WireMode::Less, &by_helper), "rounding").solved, "a child's read counts");
    // In the baseline a report to the agent pastes the spans it cites: the agent has read them.
    let pasted = Event::Delivered {
        from: "helper".to_owned(),
        to: "dev".to_owned(),
        msg_id: "h1".to_owned(),
        kind: EnvelopeKind::Message,
        tokens: 100,
        max_tokens: 800,
        doc: Document::message(
            json!({"type": "question", "from": "helper", "msg_id": "h1", "question": "?", "engrams": [engram("h", "x", &[span])]}),
        ),
        prose: None,
        restated: Vec::new(),
    };
    let unread =
        vec![pasted, answers("dev", "e", "rounding"), delivered("dev", "m", vec![engram("e", claim, &[span])])];
    assert!(verdict(&grade(&scenario, WireMode::Verbatim, &unread), "rounding").solved, "pasted in the baseline");
    assert!(!verdict(&grade(&scenario, WireMode::Less, &unread), "rounding").solved, "a pointer only in LESS");
}

#[test]
fn a_contradiction_needs_both_sides_and_both_numbers() {
    let one_side = answer(
        "peer",
        "contradiction",
        "e",
        "The spec allows 3 projects, the PRD 5.",
        &["artifact:docs/SPEC.md#sec=Free tier"],
    );
    let contradiction = verdict(&graded(&one_side), "contradiction").clone();
    assert!(!contradiction.solved);
    assert!(contradiction.evidence.contains("artifact:docs/PRD.md#sec=Free plan"), "{}", contradiction.evidence);
    // Another section of the same document is another source.
    let wrong_section = answer(
        "peer",
        "contradiction",
        "e",
        "3 vs 5",
        &["artifact:docs/SPEC.md#sec=Seats", "artifact:docs/PRD.md#sec=Free plan"],
    );
    assert!(!verdict(&graded(&wrong_section), "contradiction").solved);
    let no_pattern = answer(
        "peer",
        "contradiction",
        "e",
        "3 vs 4",
        &["artifact:docs/SPEC.md#sec=Free tier", "artifact:docs/PRD.md#sec=Free plan"],
    );
    let missing = verdict(&graded(&no_pattern), "contradiction").clone();
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
    let report = graded(&[refused]);
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
    // Width: at most 3× the gold's lines or 40 lines, whichever is larger.
    assert!(covers(&p("repo:a.rs#L1-L40"), &p("repo:a.rs#L12")), "40 lines for a one-line gold");
    assert!(!covers(&p("repo:a.rs#L1-L41"), &p("repo:a.rs#L12")), "41 lines for a one-line gold");
    assert!(covers(&p("repo:a.rs#L1-L90"), &p("repo:a.rs#L31-L60")), "3× a 30-line gold");
    assert!(!covers(&p("repo:a.rs#L1-L91"), &p("repo:a.rs#L31-L60")), "more than 3× a 30-line gold");
    assert!(overlaps(&p("repo:a.rs#L1-L91"), &p("repo:a.rs#L31-L60")));
    assert!(covers(&p("diff:a..b#src/x.rs"), &p("diff:a..b#src/x.rs")));
    assert!(!covers(&p("diff:a..b#src/y.rs"), &p("diff:a..b#src/x.rs")));
    assert!(covers(&p("diff:a..b#src/y.rs"), &p("diff:a..b")));
    assert!(covers(&p("test:billing::capture"), &p("test:billing::capture")));
    assert!(!covers(&p("test:billing::capture"), &p("test:billing::refund")));
    assert!(!covers(&p("repo:docs/A.md#L1-L9"), &p("artifact:docs/A.md#sec=X")), "another pointer type");
    assert!(covers(&p("artifact:docs/A.md#L3-L4"), &p("repo:docs/A.md#L4-L5")), "lines of one file, either type");
    assert!(!covers(&p("artifact:docs/A.md#L3-L4"), &p("repo:docs/B.md#L3-L4")));
    assert!(!covers(&p("diff:a..b#docs/A.md"), &p("repo:docs/A.md#L3-L4")), "a diff is not the file's lines");
    assert!(states("Rounded HALF-EVEN here", "half-even"));
    assert!(!states("halfeven", "half-even"));
    assert!(states("x = &mut Order;", "&mut Order"));
    assert!(!states("FREE_MAX_PROJECTS5", "5"));
    assert!(states("limit 5.", "5"));
}

/// The shipped graded scenarios: restating a task's question never states its answer (a term the question does not
/// hold is required), and every yes/no question has patterns of the wrong polarity.
#[test]
fn shipped_questions_do_not_answer_themselves() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut graded = 0;
    for entry in std::fs::read_dir(&dir).expect("scenarios") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let scenario = Scenario::from_toml(&text, &dir).unwrap_or_else(|v| panic!("{}: {v}", path.display()));
        for task in &scenario.tasks {
            graded += 1;
            let miss = judge(task, &task.question, &[], &|_| false, &GoldPlaces::none());
            assert!(
                !(miss.claim.terms.is_empty() && miss.claim.patterns.is_empty()),
                "{} {}: the question alone states every term and pattern",
                path.display(),
                task.id
            );
            let first = task.question.split_whitespace().next().unwrap_or_default().to_lowercase();
            let yes_no = ["does", "do", "did", "is", "are", "can", "will", "should", "has", "have", "was", "were"];
            assert!(
                !yes_no.contains(&first.as_str()) || !task.gold.wrong.is_empty(),
                "{} {}: a yes/no question needs `wrong` patterns for the other answer",
                path.display(),
                task.id
            );
        }
    }
    assert!(graded >= 25, "only {graded} graded tasks found in {}", dir.display());
}

fn search(agent: &str, returned: &[&str]) -> Event {
    Event::Search {
        agent: agent.to_owned(),
        query: "q".to_owned(),
        k: 5,
        returned: returned.iter().map(|p| (*p).to_owned()).collect(),
        tokens: 40,
        stages: vec!["hash".to_owned()],
        code: None,
        message: String::new(),
    }
}

/// Each unsolved task says where it was lost on the way from search to answer; a solved one says nothing.
#[test]
fn an_unsolved_task_says_where_it_was_lost() {
    let gold = "repo:src/tax.rs#L159-L167";
    let right = "Tax is rounded half-even per line.";
    let failure = |events: Vec<Event>| verdict(&graded(&events), "rounding").failure;
    assert_eq!(failure(Vec::new()), Some(Failure::Unanswered));
    let elsewhere = answer("dev", "rounding", "e1", right, &["repo:src/other.rs#L1-L5"]);
    assert_eq!(failure(elsewhere.clone()), Some(Failure::NotFound));
    let mut found = vec![search("dev", &["repo:src/tax.rs#L150-L170"])];
    found.extend(elsewhere.clone());
    assert_eq!(failure(found), Some(Failure::FoundNotRead));
    let mut read = vec![deref("dev", &["repo:src/tax.rs#L150-L170"])];
    read.extend(elsewhere);
    assert_eq!(failure(read), Some(Failure::ReadNotCited));
    assert_eq!(
        failure(answer("dev", "rounding", "e2", "Tax is rounded somewhere.", &[gold])),
        Some(Failure::ClaimMisses)
    );
    assert_eq!(failure(answer("dev", "contradiction", "e3", right, &[gold])), Some(Failure::OtherTask));
    assert_eq!(failure(answer("dev", "rounding", "e4", right, &[gold])), None, "solved");
}

/// An unsolved task whose agent stated the asked value for it, whatever it cited, is marked `stated` (a right
/// citation away from solved); a wrong or missing statement, a statement made for another task, and a solved task
/// are not.
#[test]
fn an_unsolved_task_says_whether_its_claim_stated_the_answer() {
    let right = "Tax is rounded half-even per line.";
    let stated = |events: Vec<Event>| {
        let report = graded(&events);
        let rounding = verdict(&report, "rounding");
        (rounding.solved, rounding.stated)
    };
    let elsewhere = answer("dev", "rounding", "e1", right, &["repo:src/other.rs#L1-L5"]);
    assert_eq!(stated(elsewhere.clone()), (false, true), "right claim, wrong citation");
    // One right claim among the agent's engrams for the task is enough; the closest one may be another.
    let mut two = answer("dev", "rounding", "e2", "Tax is rounded up.", &["repo:src/tax.rs#L159-L167"]);
    two.extend(elsewhere);
    assert_eq!(stated(two), (false, true));
    assert_eq!(
        stated(answer("dev", "rounding", "e3", "Rounded somewhere.", &["repo:src/other.rs#L1-L5"])),
        (false, false)
    );
    assert_eq!(
        stated(answer("dev", "rounding", "e4", "Half-even per line: tax is not rounded.", &["repo:src/x.rs#L1-L2"])),
        (false, false),
        "a wrong polarity is not the answer"
    );
    assert_eq!(stated(answer("dev", "contradiction", "e5", right, &["repo:src/other.rs#L1-L5"])), (false, false));
    assert_eq!(stated(answer("peer", "rounding", "e6", right, &["repo:src/other.rs#L1-L5"])), (false, false));
    assert_eq!(stated(answer("dev", "rounding", "e7", right, &["repo:src/tax.rs#L159-L167"])), (true, false));
    let report = graded(&answer("dev", "rounding", "e1", right, &["repo:src/other.rs#L1-L5"]));
    let json = serde_json::to_value(verdict(&report, "rounding")).expect("json");
    assert_eq!(json["stated"], true, "{json}");
    let json = serde_json::to_value(verdict(&report, "contradiction")).expect("json");
    assert!(json.get("stated").is_none(), "written only when set: {json}");
}

/// A gold `diff:` citation (the part of a diff that touches a path) is located as well by the same lines of the diff
/// file, as a search of the workspace index finds them (`repo:diffs/<a>..<b>.diff#L…`), and by nothing outside them.
#[test]
fn lines_of_a_diff_file_cite_the_diff_part_they_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("diffs")).expect("mkdir");
    let diff = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-old\n+new\n\
                diff --git a/src/b.rs b/src/b.rs\n--- a/src/b.rs\n+++ b/src/b.rs\n@@ -1 +1 @@\n-guard held\n+guard dropped\n";
    std::fs::write(dir.path().join("diffs/main..pr-1.diff"), diff).expect("write the diff");
    let toml = r#"
name = "diffs"
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "dev"
role = "dev"
parent = "lead"
[[steps]]
action = "brief"
agent = "lead"
now = ["Review."]
tasks = ["guard"]
[[tasks]]
id = "guard"
kind = "locate_rule"
agent = "dev"
question = "What does the PR change about the guard?"
gold = { cites = ["diff:main..pr-1#src/b.rs"], terms = ["dropped"] }
"#;
    let scenario = Scenario::from_toml(toml, dir.path()).unwrap_or_else(|v| panic!("scenario: {v}"));
    let grade_one = |cited: &str| {
        let events = answer("dev", "guard", "e1", "The PR has the guard dropped.", &[cited]);
        let report = grade(&scenario, WireMode::Less, &events);
        (report.solved, report.items[0].failure)
    };
    assert_eq!(grade_one("repo:diffs/main..pr-1.diff#L7-L12"), (1, None), "the lines of src/b.rs's part");
    assert_eq!(grade_one("repo:diffs/main..pr-1.diff#L10-L12"), (1, None), "a narrower span inside it");
    assert_eq!(grade_one("diff:main..pr-1#src/b.rs"), (1, None), "the diff pointer itself");
    let (solved, failure) = grade_one("repo:diffs/main..pr-1.diff#L1-L6");
    assert_eq!((solved, failure), (0, Some(Failure::NotFound)), "src/a.rs's part is not the gold");
}

/// The shipped graded scenarios (the four whose answers are models').
const GRADED: [&str; 4] = ["real-ignore", "audit-tidepool", "review-lanternfish", "waves-harbor"];

fn shipped(name: &str) -> Scenario {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let text = std::fs::read_to_string(dir.join(format!("{name}.toml"))).expect("read");
    Scenario::from_toml(&text, &dir).unwrap_or_else(|v| panic!("{name}: {v}"))
}

/// The scripted answers of a scenario: task id → claim and pointers.
fn scripted(scenario: &Scenario) -> Vec<(String, String, Vec<Pointer>)> {
    let mut out = Vec::new();
    for step in &scenario.steps {
        let Step::Report(report) = step else { continue };
        for engram in &report.engrams {
            let Some(task) = &engram.task else { continue };
            let pointers = engram.pointers.iter().map(|p| Pointer::parse(p).expect("pointer")).collect();
            out.push((task.clone(), engram.claim.clone(), pointers));
        }
    }
    out
}

/// The claims the grader got wrong in the committed recordings (issue 59), graded again: a capped thread count
/// stated without its cap, a doc comment cited for a function's code, "does not comply" after the rule is shown
/// kept, and "overridden" for raised.
#[test]
fn the_reported_claims_are_graded_right() {
    let cases: [(&str, &str, &str, &str, bool); 6] = [
        (
            "real-ignore",
            "parallel-threads",
            "When WalkBuilder::threads is 0, WalkParallel uses the available parallelism, so it uses 12 threads.",
            "repo:src/walk.rs#L1582-L1583",
            false,
        ),
        (
            "real-ignore",
            "parallel-threads",
            "When WalkBuilder::threads is set to 0, WalkParallel uses the number of available parallelism threads as \
             the default number of threads. If no available parallelism threads are available, it uses 1 thread. If \
             the number of available parallelism threads is greater than 12, it uses 12 threads.",
            "repo:src/walk.rs#L1582-L1583",
            true,
        ),
        (
            "review-lanternfish",
            "refill-rule",
            "The quote indicates that a full bucket does not bank time, meaning that once a bucket is full, the refill \
             clock restarts from the current time. This rule is implemented in the `ManualClock` struct, where the \
             `advance` method updates the clock's offset by the specified duration.",
            "repo:src/bucket.rs#L4-L6",
            false,
        ),
        (
            "audit-tidepool",
            "token-logging",
            "The code ensures that session tokens are not printed in full by only printing the first eight digits of \
             the token. This is a risk because it does not comply with the rule that session tokens must never be \
             written to logs in full.",
            "repo:src/auth/token.rs#L40-L43",
            false,
        ),
        (
            "real-ignore",
            "max-below-min",
            "When `max_depth` is set lower than `min_depth`, the `max_depth` is overridden to the `min_depth`.",
            "repo:src/walk.rs#L752-L758",
            true,
        ),
        (
            "real-ignore",
            "max-below-min",
            "max_depth raises an error when it is set lower than min_depth.",
            "repo:src/walk.rs#L752-L758",
            false,
        ),
    ];
    for (name, task, claim, pointer, solved) in cases {
        let scenario = shipped(name);
        let grader = AnswerGrader::new(&scenario);
        let verdict = grader.grade(task, claim, &[Pointer::parse(pointer).expect("pointer")]).expect("graded task");
        assert_eq!(verdict.solved, solved, "{task}: {claim}\n{verdict:?}");
    }
    // The refill rule's answer is lost twice over: the doc comment stands for no code, and the function is wrong.
    let scenario = shipped("review-lanternfish");
    let refill = |claim: &str, pointer: &str| {
        AnswerGrader::new(&scenario)
            .grade("refill-rule", claim, &[Pointer::parse(pointer).expect("pointer")])
            .expect("graded task")
    };
    let right = "TokenBucket::refill restarts the refill clock when it fills the bucket: a full bucket banks no time.";
    assert!(refill(right, "repo:src/bucket.rs#L60-L75").solved);
    let doc = refill(right, "repo:src/bucket.rs#L60-L60");
    assert!(!doc.solved && doc.evidence.contains("comment lines"), "{doc:?}");
    assert_eq!(doc.failure, Some(Failure::ReadNotCited));
}

/// A claim that says a thing and its negation is not an answer: both a yes and a no, or one subject said to be and
/// not to be the same thing; a clause that states a case (`if`, `when`, `only`, …) is not a statement of it.
#[test]
fn a_claim_that_contradicts_itself_is_refused() {
    let yes_no = "Is a file of exactly max_filesize skipped?";
    let open = "Which glob decides?";
    let contradicts = [
        (yes_no, "Yes, it is skipped. No, it is kept."),
        (yes_no, "No: the file is kept. Yes — larger files only."),
        (open, "The root is skipped by the walk; the root is not skipped."),
        (open, "The code does comply with the policy, and it does not comply with the rule."),
        (open, "The code complies: it isn't logged. It is logged in full."),
        (open, "The comment is wrong. The comment is not wrong."),
    ];
    for (question, claim) in contradicts {
        let why = contradiction(question, claim);
        assert!(why.is_some(), "{claim}");
    }
    let consistent = [
        (yes_no, "No. A file is skipped only when it is larger; a file of equal size is not skipped."),
        (yes_no, "No, it is kept: skip_filesize skips when fs > max_filesize."),
        (open, "Yes, the root is yielded."),
        (open, "The file is skipped if it is larger, and it is not skipped when it is equal."),
        (open, "The comment is wrong and the docs are not wrong."),
        (open, "Nothing is skipped. No file is lost."),
        (open, "A .ignore match is ignored even when a .gitignore is not consulted."),
    ];
    for (question, claim) in consistent {
        assert_eq!(contradiction(question, claim), None, "{claim}");
    }
    // In a verdict: the evidence says it.
    let scenario = shipped("real-ignore");
    let verdict = AnswerGrader::new(&scenario)
        .grade(
            "filesize-boundary",
            "No: a file is skipped when strictly larger. Yes, a file of equal size is skipped as well.",
            &[Pointer::parse("repo:src/walk.rs#L2118-L2140").expect("pointer")],
        )
        .expect("graded");
    assert!(!verdict.solved && verdict.evidence.contains("contradicts itself"), "{verdict:?}");
    assert!(is_yes_no("Does PR 142 hold the lock?") && !is_yes_no("Which test breaks?"));
}

/// The comment rule reads lines as they are: `//`, `///`, `//!` and `/* */` lines are comments, blank lines are
/// neither, and a span is comment lines when it holds a comment and no code.
#[test]
fn comment_lines_are_told_from_code() {
    use LineKind::{Blank, Code, Comment};
    let text = "//! Module.\n\n/// Doc.\nfn f() {} // trailing\n/* block\n   still */\nlet x = 1; /* c */\n  * y;\n";
    assert_eq!(line_kinds(text), vec![Comment, Blank, Comment, Code, Comment, Comment, Code, Code]);
    let kinds = line_kinds(text);
    assert!(comment_only(&kinds, 1, 3), "comments around a blank line");
    assert!(!comment_only(&kinds, 3, 4), "a doc comment and its function");
    assert!(!comment_only(&kinds, 2, 2), "a blank line alone");
    assert!(comment_only(&kinds, 5, 6), "a block comment over two lines");
    assert!(!comment_only(&kinds, 0, 1) && !comment_only(&kinds, 20, 30), "outside the file");
}

/// In a run: a citation of doc-comment lines does not locate a gold span of code, and does locate a gold span that
/// is itself comment lines.
#[test]
fn a_doc_comment_does_not_stand_for_the_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("src")).expect("mkdir");
    let code =
        "//! Buckets.\n//! A full bucket restarts its clock.\n\n/// Refills.\npub fn refill() {\n    restart();\n}\n";
    std::fs::write(dir.path().join("src/b.rs"), code).expect("write");
    let toml = |gold: &str| {
        format!(
            "name = \"comments\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n[[agents]]\nid = \"dev\"\nrole = \"dev\"\n\
             parent = \"lead\"\n[[steps]]\naction = \"brief\"\nagent = \"lead\"\nnow = [\"Look.\"]\ntasks = [\"rule\"]\n\
             [[tasks]]\nid = \"rule\"\nkind = \"locate_rule\"\nagent = \"dev\"\nquestion = \"Where is the clock \
             restarted?\"\ngold = {{ cites = [\"{gold}\"], terms = [\"restarts\"] }}\n"
        )
    };
    let solved = |gold: &str, cited: &str| {
        let scenario = Scenario::from_toml(&toml(gold), dir.path()).unwrap_or_else(|v| panic!("scenario: {v}"));
        let events = answer("dev", "rule", "e1", "refill restarts the clock.", &[cited]);
        let report = grade(&scenario, WireMode::Less, &events);
        (report.solved == 1, report.items[0].evidence.clone())
    };
    let (ok, evidence) = solved("repo:src/b.rs#L4-L7", "repo:src/b.rs#L4-L4");
    assert!(!ok && evidence.contains("cites only comment lines"), "{evidence}");
    assert!(solved("repo:src/b.rs#L4-L7", "repo:src/b.rs#L4-L7").0, "the doc comment with its code");
    assert!(solved("repo:src/b.rs#L4-L7", "repo:src/b.rs#L5-L6").0, "the code alone");
    assert!(solved("repo:src/b.rs#L1-L2", "repo:src/b.rs#L2-L2").0, "a gold that is the comment");
    assert!(!solved("repo:src/b.rs#L1-L7", "repo:src/b.rs#L1-L3").0, "module docs for a gold holding code");
}

/// Every scripted answer of the shipped graded scenarios states its task's answer (no `wrong` pattern or
/// self-contradiction refuses a right claim) and cites it.
#[test]
fn shipped_scripted_answers_are_solved() {
    for name in GRADED {
        let scenario = shipped(name);
        let grader = AnswerGrader::new(&scenario);
        for (task, claim, pointers) in scripted(&scenario) {
            let verdict = grader.grade(&task, &claim, &pointers).expect("graded task");
            assert!(verdict.solved, "{name} {task}: {}\n{claim}", verdict.evidence);
        }
    }
}

/// Hand-written wrong answers that use a task's right words: each states every gold term and pattern, and is
/// refused all the same (a wrong value, the other polarity, the wrong function or document).
const WRONG_IN_RIGHT_WORDS: &[(&str, &str)] = &[
    ("parallel-threads", "WalkParallel always uses 12 threads: available_parallelism is capped at 12."),
    ("root-never-skipped", "No: skip_entry checks depth 0 and the root is skipped."),
    ("max-below-min", "max_depth raises an error when it is set below min_depth."),
    ("filesize-boundary", "Yes: a file larger than max_filesize is skipped, and one equal to it is skipped too."),
    (
        "filter-comment",
        "The comment is right: the code skips when the predicate is true; filter_entry's docs say false.",
    ),
    (
        "symlink-loop-parents",
        "Because the walker reads the parent .gitignore files above the root; no loop is involved.",
    ),
    ("override-first", "Yes: overrides are checked first, and .gitignore rules are still consulted."),
    ("ignore-beats-gitignore", "The nested .gitignore wins, so the path is yielded though the .ignore ignored it."),
    ("hidden-whitelisted", "Yes: .env is skipped as hidden and never yielded."),
    (
        "require-git-default",
        "require_git decides it; it defaults to false, and true restricts the rules to repositories.",
    ),
    ("jj-repo", "Nothing else: only a .git entry counts; a .jj directory does not."),
    ("last-glob-wins", "The first matching glob decides; the last one is ignored."),
    ("slashless-glob", "It appends a **/ suffix to the glob."),
    ("bare-negation", "The parser returns an error for a bare !, since as a no-op it would match everything."),
    ("global-excludes", "The docs are complete: the code reads neither GIT_CONFIG_GLOBAL nor /etc/gitconfig."),
    (
        "explicit-ignore-order",
        "The last added file decides, with higher precedence than .gitignore; the lowest is .ignore.",
    ),
    ("override-unmatched", "The file is still yielded: nothing matched, so it is not ignored."),
    ("types-skip-dirs", "Yes: selecting a type filters out directories, though Types::matched returns Match::None."),
    ("types-last-wins", "Negation always wins, whichever selection came last."),
    ("unknown-type", "The unknown name is silently ignored; no UnrecognizedFileType error is raised."),
    ("cargo-lock-type", "Cargo.lock is matched by the rust type, not by toml."),
    ("free-projects", "They agree on 3 projects; only the code says 5."),
    ("free-seats", "check_new_seat enforces 3 seats, and the owner does not count against them."),
    ("annual-months", "The code bills 12 months a year; the spec says 10 months."),
    ("downgrade-order", "change_plan refuses it, and the error names seats first, before projects."),
    ("session-lifetime", "Yes: the policy's 12 hours and the code's 7 days agree."),
    ("revoked-error", "authenticate returns the same error for both: SessionRevoked is SessionExpired."),
    ("token-logging", "Debug prints the first eight hex digits, but the code does not comply with the policy."),
    ("token-format", "64 lowercase hex digits per the policy, but the parser says uppercase hex digits are accepted."),
    ("refill-boundary", "PR 142's due <= room is right: filling exactly to capacity works, and it breaks no test."),
    ("refill-rule", "ManualClock::advance restarts the refill clock once the bucket is full."),
    ("lock-across-await", "No: the PR drops the lock guard before it awaits backend.save."),
    (
        "io-outside-lock",
        "The review guide says so, and check shows the pattern, not flush: it releases the lock after the save.",
    ),
    (
        "deleted-assertion",
        "PR 142 deletes the assertion on saves() == 6, against the rule never to weaken the half test.",
    ),
    ("edited-store-test", "PR 142 edits filling_exactly_to_capacity_restarts_the_clock; 6 because of write-through."),
    ("forwarded-key", "It keys on the last address in X-Forwarded-For, unsafe when the proxy overwrites the header."),
    ("missing-key", "It answers 429 Too Many Requests; only a malformed key gets 400."),
    ("tax-rounding", "Tax is rounded half-even per line, and the invoice total is then rounded up."),
    ("discount-cap", "resolve_discounts sums the discounts with no cap; the subtotal is capped instead."),
    (
        "capture-keys",
        "The key has a random suffix; after a decline the same key is reused, capture_r1 after a timeout.",
    ),
    ("event-order", "confirm_order records order.confirmed before the payment_captured event."),
    (
        "free-shipping",
        "shipping_charge compares the subtotal before discounts with the threshold, not the discounted one.",
    ),
    ("status-owner", "SPEC_Billing and the code agree: capture_payment never writes Order.status."),
    ("diff-breaks-tests", "The move breaks no test: capture still records PaymentCaptured."),
    ("diff-port-boundary", "Yes: BillingPort takes &mut Order but never touches status."),
    ("diff-keeps-keys", "Yes, the keys are different now: capture_r1 is not the same."),
];

/// A wrong claim that uses a task's right words is unsolved, for every task of the four graded scenarios: each
/// hand-written one above states every gold term and pattern and is refused; and, generated from the scenarios, for
/// every yes/no question the scripted answer with its polarity flipped (`Yes` for `No`, or both prefixed: at most one
/// may pass) and the answer with both a yes and a no are refused.
#[test]
fn a_wrong_claim_in_the_right_words_is_unsolved() {
    let mut covered = HashSet::new();
    for name in GRADED {
        let scenario = shipped(name);
        for task in &scenario.tasks {
            let wrong: Vec<&str> =
                WRONG_IN_RIGHT_WORDS.iter().filter(|(id, _)| *id == task.id).map(|(_, claim)| *claim).collect();
            assert!(!wrong.is_empty(), "{name} {}: no wrong claim in its right words", task.id);
            for claim in wrong {
                let miss = ClaimMiss::of(task, claim);
                assert!(
                    miss.terms.is_empty() && miss.patterns.is_empty(),
                    "{} test data: `{claim}` lacks right words: {miss:?}",
                    task.id
                );
                assert!(!miss.is_empty(), "{} accepts the wrong claim `{claim}`", task.id);
            }
            covered.insert(task.id.clone());
            if !is_yes_no(&task.question) {
                continue;
            }
            for (id, claim, _) in scripted(&scenario).into_iter().filter(|(id, ..)| *id == task.id) {
                let passes = |c: &str| ClaimMiss::of(task, c).is_empty();
                assert!(passes(&claim), "{id}: the scripted answer passes");
                let flipped = if let Some(rest) = claim.strip_prefix("No") {
                    vec![format!("Yes{rest}")]
                } else if let Some(rest) = claim.strip_prefix("Yes") {
                    vec![format!("No{rest}")]
                } else {
                    vec![format!("Yes. {claim}"), format!("No. {claim}")]
                };
                let passing = flipped.iter().filter(|c| passes(c)).count();
                assert!(passing + usize::from(flipped.len() == 1) <= 1, "{id}: both polarities pass: {flipped:?}");
                let both = format!("Yes. {claim} No.");
                assert!(!passes(&both), "{id}: a yes and a no pass: {both}");
            }
        }
    }
    assert_eq!(covered.len(), 46, "the four scenarios grade 46 tasks");
    assert_eq!(WRONG_IN_RIGHT_WORDS.len(), covered.len(), "a wrong claim per task, none for a task that is gone");
}
