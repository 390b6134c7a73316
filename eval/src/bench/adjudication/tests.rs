//! Agreement with the hand adjudication: each of the four cells, an unjudged answer, a run without an answer, the
//! disagreements listed, and the summary's section.

use super::*;
use crate::bench::{Bench, BenchRun};
use less_runtime::Scenario;
use less_runtime::run::{Answer, Failure, RunReport, TaskReport, TaskVerdict};
use less_runtime::{TaskKind, WireMode};

fn item(id: &str, solved: bool, engram: Option<&str>) -> TaskVerdict {
    TaskVerdict {
        id: id.to_owned(),
        kind: TaskKind::LocateRule,
        agent: "dev".to_owned(),
        role: "dev".to_owned(),
        solved,
        answer: engram.map(|e| Answer {
            msg_id: "m1".to_owned(),
            engram: e.to_owned(),
            claim: "c".to_owned(),
            pointers: Vec::new(),
        }),
        evidence: String::new(),
        failure: (!solved).then_some(Failure::ClaimMisses),
        stated: false,
    }
}

fn bench(items: Vec<TaskVerdict>) -> Bench {
    let scenario =
        Scenario::from_toml("name = \"s\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n", std::path::Path::new("."))
            .expect("scenario");
    let mut report = RunReport::build(&scenario, WireMode::Less, &[]);
    report.tasks = TaskReport { graded: items.len() as u32, solved: 0, items };
    Bench { runs: vec![BenchRun::new(&scenario, report, 1)], ..Bench::default() }
}

const HAND: &str = r#"
scenario = "s"
[[answer]]
task = "a"
engram = "e1"
claim = "c"
verdict = "right"
why = "right"
[[answer]]
task = "b"
engram = "e2"
claim = "c"
verdict = "wrong"
why = "says 12 threads"
[[answer]]
task = "c"
engram = "e3"
claim = "c"
verdict = "right"
why = "overridden is raised"
[[answer]]
task = "d"
engram = "e4"
claim = "c"
verdict = "partly"
why = "half of it"
"#;

#[test]
fn each_answer_agrees_or_disagrees_by_its_cell() {
    let hand = Adjudication::from_toml(HAND).expect("valid");
    let bench = bench(vec![
        item("a", true, Some("e1")),
        item("b", true, Some("e2")),
        item("c", false, Some("e3")),
        item("d", false, Some("e4")),
        item("e", false, Some("e5")),
        item("f", false, None),
    ]);
    let agreement = agreement(&bench, std::slice::from_ref(&hand));
    let counts = (
        agreement.solved_right,
        agreement.solved_not_right,
        agreement.unsolved_right,
        agreement.unsolved_not_right,
        agreement.unjudged,
    );
    assert_eq!(counts, (1, 1, 1, 1, 1), "{agreement:?}");
    assert_eq!(agreement.rate, Some(0.5));
    let listed: Vec<(&str, bool, Verdict)> =
        agreement.disagreements.iter().map(|d| (d.task.as_str(), d.solved, d.verdict)).collect();
    assert_eq!(listed, vec![("b", true, Verdict::Wrong), ("c", false, Verdict::Right)]);
    assert_eq!(agreement.disagreements[0].mode, "less");
    // Another scenario's adjudication judges nothing here.
    let other = Adjudication::from_toml(&HAND.replace("scenario = \"s\"", "scenario = \"t\"")).expect("valid");
    let none = super::agreement(&bench, &[other]);
    assert_eq!((none.unjudged, none.rate), (5, None));
}

#[test]
fn the_summary_has_the_section_with_its_numbers() {
    let hand = Adjudication::from_toml(HAND).expect("valid");
    let mut bench = bench(vec![item("b", true, Some("e2")), item("a", true, Some("e1"))]);
    assert!(!bench.summary_markdown().contains("hand adjudication"), "no section without an adjudication");
    bench.adjudication = Some(agreement(&bench, &[hand]));
    let summary = bench.summary_markdown();
    assert!(summary.contains("### The grader against the hand adjudication"), "{summary}");
    assert!(summary.contains("Agreement: 50.0 % of 2 judged answers (0 not judged)."), "{summary}");
    assert!(summary.contains("| s | less | 1 | b | `e2` | solved | wrong | says 12 threads |"), "{summary}");
    let json = serde_json::to_value(&bench).expect("json");
    assert_eq!(json["adjudication"]["solved_not_right"], 1, "{json}");
}
