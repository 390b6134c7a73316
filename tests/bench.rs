//! `lessrt bench` end to end: every shipped scenario (UC1–UC4 and the graded ones) in LESS and both baselines, the
//! files it writes, the README's and docs/benchmark.md's tables against a fresh run, grading a wrong answer, repeats
//! that count alike, and the exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::support::{between_markers, copy_tree, thousands};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn lessrt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessrt")).args(args).current_dir(root()).output().expect("lessrt runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The command the LESS-vs-verbatim tables of the README and docs/benchmark.md come from (run from the repository
/// root).
const README_COMMAND: &str =
    "lessrt bench scenarios/ --modes less,verbatim,verbatim-whole --replay scenarios/recordings";

/// One bench of every shipped scenario, both modes, as the README's command runs it; shared by the tests below.
struct Shared {
    out: PathBuf,
    output: Output,
    bench: Value,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-shared");
        let _ = std::fs::remove_dir_all(&out);
        let mut args: Vec<String> = README_COMMAND.split(' ').skip(1).map(str::to_owned).collect();
        args.extend(["--out".to_owned(), out.display().to_string(), "--json".to_owned()]);
        let output = lessrt(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let bench = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
            panic!("bench.json on stdout ({err}); stderr: {}", text(&output.stderr));
        });
        Shared { out, output, bench }
    })
}

fn runs(bench: &Value) -> &Vec<Value> {
    bench["runs"].as_array().expect("runs")
}

fn run<'a>(bench: &'a Value, scenario: &str, mode: &str) -> &'a Value {
    runs(bench)
        .iter()
        .find(|r| r["scenario"] == json!(scenario) && r["mode"] == json!(mode))
        .unwrap_or_else(|| panic!("no run of {scenario} in {mode}"))
}

#[test]
fn every_scenario_runs_in_both_modes_and_every_graded_task_is_solved() {
    let shared = shared();
    // Exit 1, saying why: the recorded LLM run's baselines escalate (the model's result, a failed check).
    assert_eq!(shared.output.status.code(), Some(1), "stderr: {}", text(&shared.output.stderr));
    assert!(
        text(&shared.output.stderr).contains("lessrt: uc3-review-llm verbatim-whole: check 0 escalations"),
        "stderr: {}",
        text(&shared.output.stderr)
    );
    let scenarios = [
        "audit-tidepool",
        "real-ignore",
        "review-lanternfish",
        "uc1-refactor",
        "uc2-contradictions",
        "uc3-review",
        "uc3-review-llm",
        "uc4-shared-knowledge",
        "waves-harbor",
    ];
    assert_eq!(runs(&shared.bench).len(), scenarios.len() * 3);
    let mut graded = 0;
    for scenario in scenarios {
        for mode in ["less", "verbatim", "verbatim-whole"] {
            let r = run(&shared.bench, scenario, mode);
            assert_eq!(r["repeat"], json!(1));
            // The scenarios' checks hold, or do not apply to the baseline. (In the recorded LLM run the baseline's
            // concurrency reviewer escalates: the model's result, which its scenario's check reports as a failure.)
            for check in r["checks"].as_array().expect("checks") {
                if scenario == "uc3-review-llm" && mode != "less" {
                    continue;
                }
                assert!(
                    check["status"] == json!("pass") || check["status"] == json!("n/a"),
                    "{scenario} {mode}: {check}"
                );
                if mode == "less" {
                    assert_eq!(check["status"], json!("pass"), "{scenario}: {check}");
                }
            }
            if mode == "less" {
                assert_eq!(r["over_cap"], json!([]), "{scenario}: no LESS message reached an agent over its cap");
            }
            let tasks = &r["tasks"];
            assert_eq!(tasks["graded"], tasks["solved"], "{scenario} {mode}: {tasks}");
            assert_eq!(tasks["items"].as_array().map(Vec::len), tasks["graded"].as_u64().map(|n| n as usize));
            if mode == "less" {
                graded += tasks["graded"].as_u64().expect("graded");
            }
        }
    }
    assert!(graded >= 46, "at least 46 graded tasks, got {graded}");
    let waves = run(&shared.bench, "waves-harbor", "verbatim");
    assert_eq!(waves["depth"], json!(2));
    assert_eq!(run(&shared.bench, "review-lanternfish", "less")["depth"], json!(4));
    // The baseline restates prior waves to every spawn: its orchestrator's briefs grow wave by wave, LESS's do not.
    let turns = |r: &Value| -> Vec<u64> {
        r["roles"]["orchestrator"]["per_turn"].as_array().expect("per_turn").iter().filter_map(Value::as_u64).collect()
    };
    let (less, verbatim) = (turns(run(&shared.bench, "waves-harbor", "less")), turns(waves));
    assert_eq!((less.len(), verbatim.len()), (9, 9));
    let wave = |t: &[u64], w: usize| t[3 * w..3 * w + 3].iter().sum::<u64>();
    assert!(wave(&verbatim, 0) < wave(&verbatim, 1) && wave(&verbatim, 1) < wave(&verbatim, 2), "{verbatim:?}");
    assert!(wave(&less, 2) < wave(&less, 0) * 2, "{less:?}");
}

#[test]
fn the_bench_writes_its_files() {
    let shared = shared();
    let read = |name: &str| std::fs::read_to_string(shared.out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let on_disk: Value = serde_json::from_str(&read("bench.json")).expect("bench.json");
    assert_eq!(on_disk, shared.bench, "--json prints what bench.json holds");
    let csv = read("bench.csv");
    let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
    assert_eq!(&header[..5], ["scenario", "mode", "repeat", "depth", "role"]);
    let n_rows: usize = runs(&shared.bench).iter().map(|r| r["roles"].as_object().expect("roles").len() + 1).sum();
    assert_eq!(csv.lines().count(), 1 + n_rows, "one row per scenario × mode × role, and a TOTAL per run");
    assert!(csv.lines().any(|l| l.starts_with("waves-harbor,verbatim,1,2,orchestrator,9,")), "{csv}");
    let summary = read("summary.md");
    assert!(summary.contains("| **waves-harbor** (depth 2, 10 agents) | **total** |"), "{summary}");
    for plot in [
        "tokens-per-turn-waves-harbor.svg",
        "tokens-per-turn-uc1-refactor.svg",
        "tasks-solved.svg",
        "tokens-per-solved-task.svg",
    ] {
        let svg = read(plot);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{plot}");
        assert!(!svg.contains("plot failed"), "{plot}");
        assert!(svg.contains("verbatim") && svg.contains("less"), "{plot} has a series per mode");
    }
    assert!(shared.out.join("runs/uc1-refactor/less/1/ledger.jsonl").exists(), "each run's ledger is kept");
}

/// docs/benchmark.md's tables are the bench's `summary.md`, byte for byte, between their markers, and the README's
/// table is the first of them cut to each scenario's total row: neither can drift.
#[test]
fn the_readme_table_is_a_fresh_bench_run() {
    let shared = shared();
    let summary = std::fs::read_to_string(shared.out.join("summary.md")).expect("summary.md");
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    assert!(readme.contains(README_COMMAND), "the README names the command its table comes from");
    // The fair table is the block after its heading (the billed headline and the statistics come first).
    let blocks: Vec<&str> = summary.split("\n\n").collect();
    let heading = blocks.iter().position(|b| b.starts_with("LESS against `verbatim`, tokens")).expect("its heading");
    let fair_table = blocks[heading + 1];
    let totals: String = fair_table
        .lines()
        .enumerate()
        .filter(|(i, l)| *i < 2 || l.starts_with("| **"))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert!(totals.lines().count() > 5, "a total row per scenario: {totals}");
    assert_eq!(between_markers("README.md", "bench:totals"), totals, "regenerate the README's table from summary.md");
    let benchmark = std::fs::read_to_string(root().join("docs/benchmark.md")).expect("docs/benchmark.md");
    assert!(benchmark.contains(README_COMMAND), "docs/benchmark.md names the command its tables come from");
    assert_eq!(
        between_markers("docs/benchmark.md", "bench:summary"),
        summary,
        "regenerate docs/benchmark.md's tables from summary.md"
    );
    // The prose's figures are the table's: tokens per solved task (the tasks table's total row) and the largest LESS
    // p95 of a role against the fair baseline.
    let prose = benchmark.split_whitespace().collect::<Vec<_>>().join(" ");
    let number = |cell: &str| -> u64 {
        cell.trim_matches(|c: char| c == '*' || c == ' ').replace(',', "").parse().expect("a number")
    };
    let all: Vec<&str> =
        summary.lines().find(|l| l.starts_with("| **all** |")).expect("the total row").split('|').collect();
    let graded = number(all[2]);
    let (less, fair) = (number(all[5]), number(all[7]));
    let said = format!(
        "every one of the {graded} graded tasks is solved in every mode under the strict grader, at {} tokens per solved task for LESS against {} for the fair baseline ({}%)",
        thousands(less),
        thousands(fair),
        (less * 100 + fair / 2) / fair
    );
    assert!(prose.contains(&said), "docs/benchmark.md should say: {said}");
    let p95 = fair_table
        .lines()
        .filter(|l| l.starts_with("|  |"))
        .map(|l| number(l.split('|').nth(9).expect("LESS p95")))
        .max()
        .expect("role rows");
    let said = format!("p95 ≤ {p95} tokens in every role");
    assert!(prose.contains(&said), "docs/benchmark.md should say: {said}");
}

/// A scripted answer that cites the wrong span is graded unsolved, with the evidence, and the bench exits 1 naming
/// it.
#[test]
fn a_wrong_answer_is_graded_unsolved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = std::fs::read_to_string(root().join("scenarios/waves-harbor.toml")).expect("scenario");
    // A workspace lies beside or below its scenario: the fixture is copied next to the changed scenario.
    copy_tree(&root().join("scenarios/fixtures/uc1-refactor"), &dir.path().join("fixtures/uc1-refactor"));
    let wrong = original
        .replace(
            "pointers = [\"repo:src/tax.rs#L159-L167\", \"repo:src/money.rs#L239-L263\"], confidence = 0.95",
            "pointers = [\"repo:src/tax.rs#L100-L120\"], confidence = 0.95",
        )
        .replace("(expects one PaymentCaptured)", "(expects one event)")
        .replace("no PaymentCaptured or PaymentDeclined event is recorded", "no event is kept");
    assert_ne!(wrong, original);
    let path = dir.path().join("waves-harbor.toml");
    std::fs::write(&path, wrong).expect("write");
    let out = dir.path().join("out").display().to_string();
    let output = lessrt(&["bench", &path.display().to_string(), "--modes", "less", "--out", &out, "--json"]);
    // Exit 1, naming the unsolved tasks.
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("lessrt: waves-harbor less: task tax-rounding (w1-tax): "),
        "{}",
        text(&output.stderr)
    );
    let bench: Value = serde_json::from_slice(&output.stdout).expect("bench.json");
    let tasks = &run(&bench, "waves-harbor", "less")["tasks"];
    assert_eq!((tasks["graded"].as_u64(), tasks["solved"].as_u64()), (Some(9), Some(7)), "{tasks}");
    let item = |id: &str| tasks["items"].as_array().expect("items").iter().find(|t| t["id"] == json!(id)).cloned();
    let tax = item("tax-rounding").expect("tax-rounding");
    assert_eq!(tax["solved"], json!(false));
    assert!(tax["evidence"].as_str().is_some_and(|e| e.contains("cites nothing overlapping")), "{tax}");
    let diff = item("diff-breaks-tests").expect("diff-breaks-tests");
    assert!(diff["evidence"].as_str().is_some_and(|e| e.contains("does not state")), "{diff}");
    assert!(text(&output.stderr).contains("7 of 9 tasks solved"), "{}", text(&output.stderr));
}

#[test]
fn repeats_count_the_same_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().display().to_string();
    let output = lessrt(&[
        "bench",
        "scenarios/uc1-refactor.toml",
        "scenarios/uc4-shared-knowledge.toml",
        "--repeat",
        "2",
        "--out",
        &out,
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(!text(&output.stderr).contains("repeats counted different tokens"), "{}", text(&output.stderr));
    let bench: Value = serde_json::from_slice(&output.stdout).expect("bench.json");
    assert_eq!(runs(&bench).len(), 8);
    for first in runs(&bench).iter().filter(|r| r["repeat"] == json!(1)) {
        let second = runs(&bench)
            .iter()
            .find(|r| r["repeat"] == json!(2) && r["scenario"] == first["scenario"] && r["mode"] == first["mode"])
            .expect("second repeat");
        assert_eq!(first["roles"], second["roles"], "{} {}", first["scenario"], first["mode"]);
        assert_eq!(first["tasks"], second["tasks"]);
    }
}

#[test]
fn exit_codes_say_what_went_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out").display().to_string();
    // No such path: usage (2).
    let missing = lessrt(&["bench", "scenarios/nope.toml", "--out", &out]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));
    assert!(text(&missing.stderr).contains("no such scenario"), "{}", text(&missing.stderr));
    // An unknown mode: usage (2).
    assert_eq!(lessrt(&["bench", "scenarios/uc1-refactor.toml", "--modes", "less,terse"]).status.code(), Some(2));
    // A scenario that breaks its schema: 1, with the violation.
    let invalid = dir.path().join("invalid.toml");
    std::fs::write(&invalid, "name = \"Bad Name\"\n[[agents]]\nid = \"a\"\nrole = \"a\"\n").expect("write");
    let output = lessrt(&["bench", &invalid.display().to_string(), "--out", &out]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stdout).contains("LESS_SCHEMA_INVALID"), "{}", text(&output.stdout));
    // A run that cannot start (its workspace is gone) fails the bench (1) and is listed, the others still run.
    let gone = dir.path().join("gone.toml");
    std::fs::write(&gone, "name = \"gone\"\nworkspace = \"no-such-dir\"\n[[agents]]\nid = \"a\"\nrole = \"a\"\n")
        .expect("write");
    let output =
        lessrt(&["bench", &gone.display().to_string(), "scenarios/uc2-contradictions.toml", "--out", &out, "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let bench: Value = serde_json::from_slice(&output.stdout).expect("bench.json");
    assert_eq!(runs(&bench).len(), 2, "uc2 ran in both modes");
    assert_eq!(bench["failed"].as_array().map(Vec::len), Some(2), "gone failed in both modes: {bench}");
    assert!(text(&output.stderr).contains("gone less #1 failed"), "{}", text(&output.stderr));
    assert!(Path::new(&out).join("bench.json").exists());
}

/// A bar per run and one over all runs on a terminal; none under `--quiet` or on a pipe.
#[test]
fn progress_bars_show_on_a_terminal_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().display().to_string();
    let bin = env!("CARGO_BIN_EXE_lessrt");
    let on_a_terminal = |extra: &str| -> String {
        let command = format!("{bin} bench scenarios/uc2-contradictions.toml --out {out} {extra}");
        let output = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(root())
            .output()
            .expect("`script` (util-linux) gives the command a terminal");
        assert!(output.status.success(), "{command}: {}", text(&output.stdout));
        text(&output.stdout)
    };
    let shown = on_a_terminal("");
    assert!(shown.contains("uc2-contradictions less #1"), "a bar for the run: {shown}");
    assert!(shown.contains("/2 runs"), "a bar over all runs: {shown}");
    let quiet = on_a_terminal("--quiet");
    assert!(!quiet.contains("uc2-contradictions less #1") && !quiet.contains("/2 runs"), "{quiet}");
    let piped = lessrt(&["bench", "scenarios/uc2-contradictions.toml", "--out", &out]);
    assert!(!text(&piped.stderr).contains("uc2-contradictions less #1"), "{}", text(&piped.stderr));
}

/// `--sweep` runs every scenario × mode at each value of one role's budget field, deterministically: at a small inline
/// budget LESS spends less on the wire for the same 8 tasks, and the baseline (which enforces no budget) the same;
/// the runs carry their value, sit in their value's directory, and bench.json, summary.md and sweep.svg hold the
/// front. A role, field or value the budget refuses is a usage error, as is a bad --price.
#[test]
fn a_budget_sweep_runs_every_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sweep = |out: &Path| {
        let out = out.display().to_string();
        let args = ["bench", "scenarios/audit-tidepool.toml", "--sweep", "auditor.max_inline_tokens=150,800"];
        let output = lessrt(&[&args[..], &["--price", "input=3,output=15", "--out", &out, "--json"]].concat());
        assert!(output.status.code().is_some_and(|c| c <= 1), "{}", text(&output.stderr));
        serde_json::from_slice::<Value>(&output.stdout).expect("bench.json")
    };
    let bench = sweep(&dir.path().join("a"));
    assert_eq!(runs(&bench).len(), 4, "two values × two modes");
    let labels: Vec<&str> = runs(&bench).iter().filter_map(|r| r["sweep"].as_str()).collect();
    assert_eq!(
        labels,
        [
            "auditor.max_inline_tokens=150",
            "auditor.max_inline_tokens=150",
            "auditor.max_inline_tokens=800",
            "auditor.max_inline_tokens=800"
        ]
    );
    let report = &bench["sweep"];
    assert_eq!((report["role"].as_str(), report["field"].as_str()), (Some("auditor"), Some("max_inline_tokens")));
    let at = |value: usize, mode: usize, what: &str| report["values"][value]["modes"][mode][what].as_u64();
    assert_eq!(report["values"][0]["value"], json!(150));
    assert_eq!(report["values"][0]["modes"][0]["mode"], json!("less"));
    assert_eq!((at(1, 0, "solved"), at(1, 0, "graded")), (Some(8), Some(8)), "{report}");
    assert_eq!(at(0, 0, "solved"), Some(8), "{report}");
    assert!(at(0, 0, "wire") < at(1, 0, "wire"), "a small inline budget changes what LESS spends: {report}");
    assert_eq!(at(0, 1, "solved"), at(1, 1, "solved"), "the baseline enforces no budget: {report}");
    assert_eq!(bench["comparison"].as_array().map(Vec::len), Some(2), "one comparison per value");
    assert_eq!(bench["price"]["cached"], json!(3.0), "cached prompt tokens default to the input price");
    let out = dir.path().join("a");
    assert!(out.join("runs/auditor.max_inline_tokens=150/audit-tidepool/less/1/ledger.jsonl").exists());
    assert!(out.join("runs/auditor.max_inline_tokens=800/audit-tidepool/verbatim/1/ledger.jsonl").exists());
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(summary.contains("Budget sweep of `auditor.max_inline_tokens`"), "{summary}");
    let svg = std::fs::read_to_string(out.join("sweep.svg")).expect("sweep.svg");
    assert!(svg.contains("budget sweep of auditor.max_inline_tokens") && !svg.contains("plot failed"), "{svg}");
    assert!(svg.contains("max_inline_tokens=150") && svg.contains("max_inline_tokens=800"), "each point labelled");
    // The same sweep again gives the same figures.
    assert_eq!(sweep(&dir.path().join("b"))["sweep"], bench["sweep"]);
    // Refusals, before anything runs: exit 2 naming what is known.
    let out = dir.path().join("c").display().to_string();
    for (arg, says) in [
        ("--sweep=nobody.max_inline_tokens=1", "their roles: architect, auditor, lead"),
        ("--sweep=auditor.max_tokens=1", "the fields: max_artifact_sections, max_deref_tokens_total, max_engrams"),
        ("--sweep=auditor.max_engrams=13", "13 is refused for auditor.max_engrams"),
        ("--sweep=auditor.max_engrams", "has no '='"),
        ("--price=input=3,output=cheap", "is not a price for output"),
        ("--price=input=3", "lacks input or output"),
    ] {
        let output = lessrt(&["bench", "scenarios/audit-tidepool.toml", arg, "--out", &out]);
        assert_eq!(output.status.code(), Some(2), "{arg}: {}", text(&output.stderr));
        assert!(text(&output.stderr).contains(says), "{arg}: {}", text(&output.stderr));
    }
    assert!(!Path::new(&out).join("bench.json").exists(), "nothing ran");
}

/// `--replay A,B` replays repeat k from the k-th directory at the temperature its exchanges were asked at;
/// `--repeat` defaults to the number of directories, and another number, a `--temperature` the recording was not
/// made at, or a recording mixing temperatures are usage errors.
#[test]
fn repeats_replay_one_recording_per_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out").display().to_string();
    let two = "scenarios/recordings,scenarios/recordings";
    let output = lessrt(&[
        "bench",
        "scenarios/uc3-review-llm.toml",
        "--modes",
        "less",
        "--replay",
        two,
        "--out",
        &out,
        "--json",
    ]);
    assert!(output.status.code().is_some_and(|c| c <= 1), "{}", text(&output.stderr));
    let bench: Value = serde_json::from_slice(&output.stdout).expect("bench.json");
    let repeats: Vec<u64> = runs(&bench).iter().filter_map(|r| r["repeat"].as_u64()).collect();
    assert_eq!(repeats, [1, 2]);
    assert_eq!(runs(&bench)[0]["roles"], runs(&bench)[1]["roles"], "the same recording answers alike");
    let recordings: Vec<(u64, f64)> = bench["recordings"]
        .as_array()
        .expect("recordings")
        .iter()
        .map(|r| (r["repeat"].as_u64().expect("repeat"), r["temperature"].as_f64().expect("temperature")))
        .collect();
    assert_eq!(recordings, [(1, 0.0), (2, 0.0)]);
    let refused = |extra: &[&str], says: &str| {
        let output = lessrt(&[&["bench", "scenarios/uc3-review-llm.toml", "--out", &out][..], extra].concat());
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {}", text(&output.stderr));
        assert!(text(&output.stderr).contains(says), "{extra:?}: {}", text(&output.stderr));
    };
    refused(&["--replay", two, "--repeat", "3"], "--repeat 3 with 2 directories for --replay");
    refused(&["--replay", "scenarios/recordings", "--temperature", "0.7"], "was recorded at temperature 0");
    // A recording whose exchanges disagree on the temperature replays as no one repeat.
    let mixed = dir.path().join("mixed");
    copy_tree(&root().join("scenarios/recordings/uc3-review-llm"), &mixed.join("uc3-review-llm"));
    let exchange = std::fs::read_dir(mixed.join("uc3-review-llm"))
        .expect("the copy")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().is_some_and(|n| n != "run.json"))
        .expect("an exchange");
    let edited = std::fs::read_to_string(&exchange).expect("exchange").replacen(
        "\"temperature\": 0.0",
        "\"temperature\": 0.5",
        1,
    );
    std::fs::write(&exchange, edited).expect("write");
    refused(&["--replay", &mixed.display().to_string()], "mixes temperatures");
}
