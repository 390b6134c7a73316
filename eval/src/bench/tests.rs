//! The bench's files from known reports: the comparison table's numbers, the tasks table, the CSV rows, and the two
//! things `lessrt bench` fails on or warns about (LESS messages over their cap, repeats that counted differently).

use std::path::Path;

use serde_json::json;

use std::sync::Arc;

use less_runtime::run::{Document, EnvelopeKind, Event};

use super::*;

const SCENARIO: &str = r#"
name = "tiny"
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
now = ["Go."]
tasks = ["where"]

[[tasks]]
id = "where"
kind = "locate_rule"
agent = "dev"
question = "Where?"
gold = { cites = ["repo:a.rs#L1-L2"], terms = ["here"] }
"#;

fn scenario() -> Scenario {
    Scenario::from_toml(SCENARIO, Path::new(".")).unwrap_or_else(|v| panic!("scenario: {v}"))
}

/// A typed message for a ledger event; panics when `doc` is not a valid one.
fn message(doc: serde_json::Value) -> Arc<Document> {
    Arc::new(serde_json::from_value(doc).expect("a valid typed message"))
}

fn delivered(from: &str, to: &str, tokens: u32, claim: Option<&str>) -> Event {
    let engrams = match claim {
        Some(claim) => json!([{"id": "eg_1", "kind": "fact", "claim": claim,
            "pointers": [{"type": "repo", "ref": "a.rs", "span": "L1-L2"}], "confidence": 0.8, "ttl": "P1D",
            "scope": "run", "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "dev", "source": "agent"}}]),
        None => json!([]),
    };
    Event::Delivered {
        from: from.to_owned(),
        to: to.to_owned(),
        msg_id: format!("{from}-{tokens}"),
        kind: EnvelopeKind::Message,
        tokens,
        max_tokens: 800,
        doc: message(json!({"type": "question", "from": from, "msg_id": "m", "question": "?", "engrams": engrams})),
        prose: None,
        restated: Vec::new(),
    }
}

fn deref(tokens: u32) -> Event {
    Event::Deref {
        agent: "dev".to_owned(),
        pointers: vec!["repo:a.rs#L1-L2".to_owned()],
        tokens,
        granted: true,
        via_grant: None,
        code: None,
    }
}

fn bench() -> Bench {
    let s = scenario();
    let answer = || Event::Answer { agent: "dev".to_owned(), engram: "eg_1".to_owned(), task: "where".to_owned() };
    let less =
        [delivered("lead", "dev", 100, None), deref(300), answer(), delivered("dev", "lead", 200, Some("It is here."))];
    let verbatim =
        [delivered("lead", "dev", 900, None), answer(), delivered("dev", "lead", 1100, Some("Somewhere else."))];
    Bench {
        failed: Vec::new(),
        recordings: Vec::new(),
        adjudication: None,
        runs: vec![
            BenchRun::new(&s, RunReport::build(&s, WireMode::Less, &less), 1),
            BenchRun::new(&s, RunReport::build(&s, WireMode::Verbatim, &verbatim), 1),
        ],
    }
}

#[test]
fn the_comparison_table_compares_inline_and_with_derefs() {
    let summary = bench().summary_markdown();
    // LESS 300 inline, 600 with the deref; verbatim 2,000 and 2,000.
    assert!(
        summary.contains("| **tiny** (depth 2, 2 agents) | **total** | **300** | **600** | **2,000** | **2,000** | **15.0%** | **30.0%** |"),
        "{summary}"
    );
    assert!(summary.contains("|  | dev | 200 | 500 | 1,100 | 1,100 | 18.2% | 45.5% |"), "{summary}");
    assert!(summary.contains("| tiny | 1 | locate_rule 1 | 1/1 | 600 | 0/1 | — |"), "{summary}");
    assert!(summary.contains("| tiny | lead | verbatim | 900 |"), "{summary}");
    // What failed is listed last: the baseline's unsolved task, with what its closest answer lacks.
    let (_, failures) = summary.split_once("Unsolved tasks and failed checks:").expect("a failures table");
    assert!(failures.contains("| tiny | verbatim | task where (dev): closest: eg_1 in dev-1100 "), "{failures}");
    assert!(!failures.contains("| tiny | less |"), "{failures}");
    assert_eq!(bench().failures().len(), 1);
    // The funnel: the baseline's task was never read (nothing was pasted), and its claim missed too.
    assert!(
        summary.contains(" | unanswered | claim right |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n"),
        "{summary}"
    );
    assert!(summary.contains("\n| tiny | less | 0 | 0 | 0 | 0 | 0 | 0 | 0 |\n"), "{summary}");
    assert!(summary.contains("\n| tiny | verbatim | 1 | 0 | 0 | 0 | 0 | 0 | 0 |\n"), "{summary}");
    let mut stated = bench();
    stated.runs[1].report.tasks.items[0].stated = true;
    assert!(stated.summary_markdown().contains("\n| tiny | verbatim | 1 | 0 | 0 | 0 | 0 | 0 | 1 |\n"));
    // A second baseline gets its totals only.
    let s = scenario();
    let mut b = bench();
    let whole = [delivered("lead", "dev", 3000, None), delivered("dev", "lead", 1000, None)];
    b.runs.push(BenchRun::new(&s, RunReport::build(&s, WireMode::VerbatimWhole, &whole), 1));
    let summary = b.summary_markdown();
    let (fair, rest) =
        summary.split_once("LESS against `verbatim-whole`, tokens (o200k_base) per scenario:").expect("2nd table");
    assert!(fair.starts_with("LESS against `verbatim`, tokens (o200k_base) per scenario and role:"), "{summary}");
    let table = rest.split("\n\n").nth(1).expect("table");
    assert_eq!(table.lines().count(), 3, "header, rule, one total row: {table}");
    assert!(table.contains("| **300** | **600** | **4,000** | **4,000** | **7.5%** | **15.0%** |"), "{table}");
    assert!(summary.contains("| solved less | per solved task less | solved verbatim | per solved task verbatim | solved verbatim-whole |"), "{summary}");
}

#[test]
fn the_csv_has_a_row_per_role_and_run() {
    let csv = bench().csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * 3, "header, then lead, dev and TOTAL for each of two runs:\n{csv}");
    assert!(lines[0].starts_with("scenario,mode,repeat,depth,role,turns,inline_total,"));
    let n_columns = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == n_columns), "{csv}");
    assert!(lines.contains(&"tiny,less,1,2,dev,1,200,200.0,200,200,200,1,300,0,0,0,0,0,0,0,0,1,1"), "{csv}");
    assert!(lines.contains(&"tiny,verbatim,1,2,TOTAL,2,2000,1000.0,1100,1100,1100,0,0,0,0,0,0,0,0,0,0,1,0"), "{csv}");
}

#[test]
fn repeats_that_count_differently_and_less_messages_over_cap_are_found() {
    let s = scenario();
    let mut b = bench();
    assert!(b.differing_repeats().is_empty() && b.less_over_cap().is_empty());
    let again = [delivered("lead", "dev", 101, None), deref(300), delivered("dev", "lead", 200, None)];
    b.runs.push(BenchRun::new(&s, RunReport::build(&s, WireMode::Less, &again), 2));
    let differing = b.differing_repeats();
    assert_eq!(differing.len(), 1, "{differing:?}");
    assert!(differing[0].starts_with("tiny less lead: repeat 1 Some((100, 0)) vs repeat 2 Some((101, 0))"));
    let over = [delivered("lead", "dev", 801, None)];
    b.runs.push(BenchRun::new(&s, RunReport::build(&s, WireMode::Less, &over), 3));
    assert_eq!(b.less_over_cap(), vec!["tiny (repeat 3): lead-801: 801>800".to_owned()]);
}

#[test]
fn numbers_are_written_for_people() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1_000), "1,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
    assert_eq!(percent(1, 3), "33.3%");
    assert_eq!(percent(1, 0), "—");
}

/// The summary says which model the recordings came from and at which temperature, a line per model and temperature
/// naming its scenarios, and nothing when no recording was used.
#[test]
fn the_summary_names_the_recordings_model_and_temperature() {
    assert!(!bench().summary_markdown().contains("Models answered"));
    let mut b = bench();
    let recording = |scenario: &str, temperature: Option<f64>| BenchRecording {
        scenario: scenario.to_owned(),
        model: json!({"name": "local", "served": "qwen2.5-coder-1.5b", "sha256": "cc324af070c2ecbfd324a308"}),
        digest: "blake3:00".to_owned(),
        temperature,
    };
    b.recordings = vec![recording("a", Some(0.0)), recording("b", Some(0.7)), recording("c", Some(0.0))];
    let summary = b.summary_markdown();
    assert!(
        summary.contains(
            "Models answered from recordings: `qwen2.5-coder-1.5b` (sha256 `cc324af070c2…`) at temperature 0, for a, c.\n"
        ),
        "{summary}"
    );
    assert!(summary.contains("`qwen2.5-coder-1.5b` (sha256 `cc324af070c2…`) at temperature 0.7, for b."), "{summary}");
}
