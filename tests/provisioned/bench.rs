//! The recorded `--agents llm-free` bench replayed: the workers' searches rerank with the embedding model, so the
//! replay asks the recording the same questions only with the model provisioned.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::{between_markers, root, thousands, untimed};

/// Runs a documented replay `command` into a fresh directory (kept alive by the returned guard) and checks that it
/// writes the committed `bench.json` byte for byte and that `doc` between `<!-- {marker}:summary:start -->` and its
/// end is its `summary.md`. Returns the output directory and the committed bench.json.
fn replays_to_committed(
    command: &str,
    committed: &str,
    doc: &str,
    marker: &str,
) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("bench");
    let mut args: Vec<String> = command.split(' ').skip(1).map(str::to_owned).collect();
    args.extend(["--out".to_owned(), out.display().to_string(), "--quiet".to_owned()]);
    let output =
        Command::new(env!("CARGO_BIN_EXE_lessrt")).args(&args).current_dir(root()).output().expect("lessrt runs");
    let committed = std::fs::read(root().join(committed)).expect("committed bench.json");
    // The status the committed bench had, exactly: 1 when it left a graded task unsolved or a check failed, else 0;
    // never 2 (a recording that is not what was sealed, or a run that could not start).
    assert_eq!(output.status.code(), Some(committed_status(&committed)), "{}", String::from_utf8_lossy(&output.stderr));
    let replayed = std::fs::read(out.join("bench.json")).expect("bench.json");
    assert!(replayed == committed, "the replay must write the committed bench.json byte for byte");
    let text = std::fs::read_to_string(root().join(doc)).expect("the document");
    assert!(text.contains(command), "{doc} names the command its table comes from");
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert_eq!(
        between_markers(doc, &format!("{marker}:summary")),
        summary,
        "regenerate {doc}'s {marker} table from summary.md"
    );
    (dir, out, committed)
}

/// The exit status of the bench that wrote `bench_json`: 1 when a run failed, a LESS message reached an agent over
/// its cap, a check failed or a graded task was left unsolved; 0 otherwise.
fn committed_status(bench_json: &[u8]) -> i32 {
    let bench: Value = serde_json::from_slice(bench_json).expect("bench.json");
    let runs = bench["runs"].as_array().expect("runs");
    let failed = bench["failed"].as_array().is_some_and(|f| !f.is_empty())
        || runs.iter().any(|run| {
            run["tasks"]["solved"] != run["tasks"]["graded"]
                || run["checks"].as_array().into_iter().flatten().any(|c| c["status"] == "fail")
                || (run["mode"] == "less" && run["over_cap"].as_array().is_some_and(|over| !over.is_empty()))
        });
    i32::from(failed)
}

/// The command of docs/llm-agents.md's tables of the graded scenarios with models on their own (`--agents llm-free`),
/// replayed from the committed recordings (made against qwen2.5-coder-1.5b on the local server).
const LLM_FREE_COMMAND: &str = "lessrt bench scenarios/real-ignore.toml scenarios/audit-tidepool.toml scenarios/review-lanternfish.toml scenarios/waves-harbor.toml --agents llm-free --modes less,verbatim --replay scenarios/recordings/llm-free";

/// The roles of the scenarios' workers (agents with no children): the ones whose models choose their own actions.
const WORKER_ROLES: [&str; 4] = ["investigator", "auditor", "reviewer", "worker"];

/// The ledger events of every run of `mode` under `out`, over the command's scenarios.
fn ledgers(out: &std::path::Path, mode: &str) -> Vec<Value> {
    let scenarios = LLM_FREE_COMMAND.split(' ').filter_map(|a| a.strip_prefix("scenarios/")?.strip_suffix(".toml"));
    let mut events = Vec::new();
    for scenario in scenarios {
        let path = out.join(format!("runs/{scenario}/{mode}/1/ledger.jsonl"));
        let ledger = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        events.extend(ledger.lines().map(|l| serde_json::from_str::<Value>(l).expect("event")));
    }
    events
}

/// The tokens a run spent: inline plus dereferenced.
fn spent(run: &Value) -> u64 {
    run["totals"]["inline_tokens"]["total"].as_u64().expect("inline")
        + run["totals"]["deref_tokens"].as_u64().expect("deref")
}

/// The recorded llm-free runs replay without a server to their committed bench.json, byte for byte; docs/llm-agents.md's
/// tables are its summary (the README leads with the pooled bench of both recordings, below). In them no
/// authored pack reached a model (the briefs carry none) and the workers' models chose their own searches and reads.
#[test]
fn the_recorded_llm_free_run_replays_to_its_committed_bench_json() {
    let (_dir, out, _) = replays_to_committed(
        LLM_FREE_COMMAND,
        "scenarios/recordings/llm-free/bench.json",
        "docs/llm-agents.md",
        "bench-llm-free",
    );
    let events = ledgers(&out, "less");
    for brief in events.iter().filter(|e| e["event"] == "delivered" && e["kind"] == "brief") {
        let packs = brief["doc"]["pointer_packs"].as_object();
        let empty = packs.is_none_or(|p| p.values().all(|p| p.as_array().is_some_and(Vec::is_empty)));
        assert!(empty, "a pack reached a model: {brief}");
    }
    // Workers are the agents that brief no one.
    let parents: std::collections::BTreeSet<&str> = events
        .iter()
        .filter(|e| e["event"] == "delivered" && e["kind"] == "brief")
        .filter_map(|e| e["from"].as_str())
        .collect();
    let count = |f: &dyn Fn(&Value) -> bool| events.iter().filter(|e| f(e)).count();
    let worker = |e: &Value| e["agent"].as_str().is_some_and(|a| !parents.contains(a));
    let searches = count(&|e| e["event"] == "search");
    let worker_reads = count(&|e| e["event"] == "deref" && e["granted"] == true && worker(e));
    assert!(
        searches >= 4 && worker_reads >= 4,
        "the workers searched ({searches}) and read ({worker_reads}) on their own"
    );
    let asked = count(&|e| e["event"] == "grant_asked");
    let granted = count(&|e| e["event"] == "grant_issued" && e["answers"].is_string());
    let denied = count(&|e| e["event"] == "grant_denied");
    let bench: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).expect("bench.json")).expect("JSON");
    let runs = |mode: &str| -> Vec<&Value> {
        bench["runs"].as_array().expect("runs").iter().filter(|r| r["mode"] == mode).collect()
    };
    let (less, base) = (runs("less"), runs("verbatim"));
    let sum = |runs: &[&Value], f: &dyn Fn(&Value) -> u64| runs.iter().map(|r| f(r)).sum::<u64>();
    let workers_spent = |r: &Value| {
        WORKER_ROLES
            .iter()
            .filter(|role| r["roles"][**role].is_object())
            .map(|role| {
                r["roles"][*role]["inline_tokens"]["total"].as_u64().expect("inline")
                    + r["roles"][*role]["deref_tokens"].as_u64().expect("deref")
            })
            .sum::<u64>()
    };
    let workers_model = |r: &Value, field: &str| {
        WORKER_ROLES.iter().filter_map(|role| r["roles"][*role]["model"][field].as_u64()).sum::<u64>()
    };
    let solved = |runs: &[&Value]| sum(runs, &|r| r["tasks"]["solved"].as_u64().expect("solved"));
    let graded = sum(&less, &|r| r["tasks"]["graded"].as_u64().expect("graded"));
    assert_eq!(graded, sum(&base, &|r| r["tasks"]["graded"].as_u64().expect("graded")));
    let base_events = ledgers(&out, "verbatim");
    let base_searches = base_events.iter().filter(|e| e["event"] == "search").count();
    let base_reads = base_events.iter().filter(|e| e["event"] == "deref").count();
    // Where the unsolved questions were lost, summed over the scenarios, and which kinds were solved.
    let lost = |runs: &[&Value], failure: &str| runs.iter().map(|r| lost_at(r, failure)).sum::<usize>();
    let solved_of = |runs: &[&Value], kind: &str| {
        let items = runs.iter().flat_map(|r| r["tasks"]["items"].as_array().expect("items"));
        let of_kind: Vec<&Value> = items.filter(|i| i["kind"] == kind).collect();
        (of_kind.iter().filter(|i| i["solved"] == true).count(), of_kind.len())
    };
    let (located, locate_rules) = solved_of(&less, "locate_rule");
    let others: usize = ["two_spans", "contradiction", "diff_review"]
        .iter()
        .map(|kind| {
            let (less_solved, n) = solved_of(&less, kind);
            assert_eq!((less_solved, solved_of(&base, kind).0), (0, 0), "the docs say no {kind} question is solved");
            n
        })
        .sum();
    // The ceiling of the citations: unsolved questions a claim answered right all the same; and the questions whose
    // gold lines the workers read (solved, or lost after the read), with how many of them a claim answered right.
    let stated_in = |runs: &[&Value]| runs.iter().map(|r| stated(r)).sum::<usize>();
    let gold_read = |runs: &[&Value]| {
        let items = runs.iter().flat_map(|r| r["tasks"]["items"].as_array().expect("items"));
        let read: Vec<&Value> = items
            .filter(|i| {
                i["solved"] == true
                    || matches!(i["failure"].as_str(), Some("read_not_cited" | "claim_misses" | "other_task"))
            })
            .collect();
        (read.len(), read.iter().filter(|i| i["solved"] == true || i["stated"] == true).count())
    };
    let ((less_read, less_right), (base_read, base_right)) = (gold_read(&less), gold_read(&base));
    let doc = std::fs::read_to_string(root().join("docs/llm-agents.md")).expect("docs/llm-agents.md");
    let prose = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        format!(
            "a claim answered right all the same in {} of LESS's unsolved questions and {} of the baseline's, so with every citation right LESS would solve at most {} of {graded} and the baseline {}",
            stated_in(&less),
            stated_in(&base),
            solved(&less) as usize + stated_in(&less),
            solved(&base) as usize + stated_in(&base)
        ),
        format!(
            "Of the questions whose gold lines the workers read ({less_read} in LESS, {base_read} in the baseline), a claim answered {less_right} and {base_right} right"
        ),
        format!(
            "solve {} of the {graded} questions in LESS and {} of {graded} in the fair baseline",
            solved(&less),
            solved(&base)
        ),
        format!("({} inline + dereferenced against {})", thousands(sum(&less, &spent)), thousands(sum(&base, &spent))),
        format!(
            "the workers searched {searches} times and read {worker_reads} times on their own; {asked} reads over budget went to their parents as requests, {granted} granted by the parent's model, {denied} denied"
        ),
        format!(
            "{} escalations, {} of {} worker completions unusable",
            sum(&less, &|r| r["totals"]["escalations"].as_u64().expect("escalations")),
            sum(&less, &|r| workers_model(r, "unusable")),
            sum(&less, &|r| workers_model(r, "calls"))
        ),
        format!("The baseline pastes the hits ({base_searches} searches, {base_reads} reads)"),
        format!(
            "are `locate_rule` questions ({located} of the {locate_rules} in LESS); none of the {others} `two_spans`, `contradiction` or `diff_review` questions is solved in either mode"
        ),
        format!(
            "in LESS {} were never found by a search, {} were found and not read, {} read and not cited, {} cited with a claim that misses; in the baseline, which reads every hit it is pasted, {} not found, {} found and not read, {} read and not cited, {} claim misses",
            lost(&less, "not_found"),
            lost(&less, "found_not_read"),
            lost(&less, "read_not_cited"),
            lost(&less, "claim_misses"),
            lost(&base, "not_found"),
            lost(&base, "found_not_read"),
            lost(&base, "read_not_cited"),
            lost(&base, "claim_misses")
        ),
        format!(
            "the workers' turns, {} tokens against {}",
            thousands(sum(&less, &workers_spent)),
            thousands(sum(&base, &workers_spent))
        ),
        format!(
            "the hierarchy above them, {} against {}",
            thousands(sum(&less, &|r| spent(r) - workers_spent(r))),
            thousands(sum(&base, &|r| spent(r) - workers_spent(r)))
        ),
    ] {
        assert!(prose.contains(&said), "docs/llm-agents.md should say: {said}");
    }
}

/// The second llm-free recording, for the spread: every model sampled at temperature 0.7 (a request names its
/// temperature, so this is a recording of its own, made and replayed with the flag), with the build of the first, of
/// every graded scenario in both modes. Its command, committed bench.json, and docs/llm-agents.md's marker of its
/// summary.
const LLM_FREE_SAMPLED: (&str, &str, &str) = (
    "lessrt bench scenarios/real-ignore.toml scenarios/audit-tidepool.toml scenarios/review-lanternfish.toml scenarios/waves-harbor.toml --agents llm-free --modes less,verbatim --temperature 0.7 --replay scenarios/recordings/llm-free-t0.7",
    "scenarios/recordings/llm-free-t0.7/bench.json",
    "bench-llm-free-t0.7",
);

/// The run of `scenario` in `mode` in `bench`.
fn run_of<'a>(bench: &'a Value, scenario: &str, mode: &str) -> &'a Value {
    bench["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["mode"] == mode && r["scenario"] == scenario)
        .unwrap_or_else(|| panic!("no run of {scenario} in {mode}"))
}

/// The ids of the tasks `run` solved.
fn solved_ids(run: &Value) -> std::collections::BTreeSet<String> {
    let items = run["tasks"]["items"].as_array().expect("items");
    items.iter().filter(|i| i["solved"] == true).map(|i| i["id"].as_str().expect("task id").to_owned()).collect()
}

/// How many of `run`'s unsolved tasks were lost at `failure` (the funnel's stages).
fn lost_at(run: &Value, failure: &str) -> usize {
    let items = run["tasks"]["items"].as_array().expect("items");
    items.iter().filter(|i| i["solved"] == false && i["failure"] == failure).count()
}

/// How many of `run`'s unsolved tasks a claim answered right all the same (`stated`: a right citation away).
fn stated(run: &Value) -> usize {
    run["tasks"]["items"].as_array().expect("items").iter().filter(|i| i["stated"] == true).count()
}

/// The sampled recording's benches replay to their committed bench.json, their summaries name the temperature (the
/// first recording's names 0), and the spread table of docs/llm-agents.md and the README is what the two recordings
/// solve run by run: at each temperature, in both, and at what cost per solved task.
#[test]
fn the_sampled_llm_free_recording_replays_and_the_docs_show_the_spread() {
    let first = between_markers("docs/llm-agents.md", "bench-llm-free:summary");
    assert!(first.contains(" at temperature 0, for real-ignore, audit-tidepool"), "{first}");
    let greedy: Value = serde_json::from_slice(
        &std::fs::read(root().join("scenarios/recordings/llm-free/bench.json"))
            .expect("the first recording's bench.json"),
    )
    .expect("JSON");
    let per_solved = |solved: usize, spent: u64| {
        if solved == 0 { "—".to_owned() } else { thousands((spent as f64 / solved as f64).round() as u64) }
    };
    let mut table = String::from(
        "| scenario | mode | solved at temperature 0 | solved at 0.7 | solved in both | tokens per solved task at 0 | at 0.7 |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    // Over the runs, per mode (see below); and LESS's questions found and not read, and read and not cited, at 0 and
    // at 0.7.
    let (mut less, mut base, mut less_lost) = ([0u64; 6], [0u64; 6], [(0usize, 0usize); 2]);
    let (command, committed, marker) = LLM_FREE_SAMPLED;
    let (_dir, out, committed) = replays_to_committed(command, committed, "docs/llm-agents.md", marker);
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(summary.contains(" at temperature 0.7, for real-ignore, audit-tidepool"), "{summary}");
    let sampled: Value = serde_json::from_slice(&committed).expect("bench.json");
    for run in sampled["runs"].as_array().expect("runs") {
        let (scenario, mode) = (run["scenario"].as_str().expect("scenario"), run["mode"].as_str().expect("mode"));
        let (run0, run7) = (run_of(&greedy, scenario, mode), run_of(&sampled, scenario, mode));
        let graded = run0["tasks"]["graded"].as_u64().expect("graded");
        assert_eq!(run7["tasks"]["graded"], graded, "both recordings grade the same questions");
        let (at0, at7, spent0, spent7) = (solved_ids(run0), solved_ids(run7), spent(run0), spent(run7));
        // Per mode: questions graded, solved at 0 and at 0.7, tokens spent at 0 and at 0.7, and unsolved at 0.7 with
        // a claim right.
        let totals = if mode == "less" { &mut less } else { &mut base };
        let add = [graded, at0.len() as u64, at7.len() as u64, spent0, spent7, stated(run7) as u64];
        for (total, add) in totals.iter_mut().zip(add) {
            *total += add;
        }
        if mode == "less" {
            for (i, failure) in ["found_not_read", "read_not_cited"].iter().enumerate() {
                less_lost[i] = (less_lost[i].0 + lost_at(run0, failure), less_lost[i].1 + lost_at(run7, failure));
            }
        }
        let _ = writeln!(
            table,
            "| {scenario} | {mode} | {}/{graded} | {}/{graded} | {} | {} | {} |",
            at0.len(),
            at7.len(),
            at0.intersection(&at7).count(),
            per_solved(at0.len(), spent0),
            per_solved(at7.len(), spent7)
        );
    }
    let [all, less0, less7, less_spent0, less_spent7, less_stated7] = less;
    let [base_n, base0, base7, base_spent0, base_spent7, base_stated7] = base;
    assert_eq!(base_n, all, "both modes were recorded sampled");
    let first = |mode: &str| greedy["runs"].as_array().expect("runs").iter().filter(|r| r["mode"] == mode).count();
    assert_eq!(sampled["runs"].as_array().expect("runs").len(), first("less") + first("verbatim"), "every run");
    let [(unread0, unread7), (uncited0, uncited7)] = less_lost;
    let both = format!(
        "over both runs LESS solves {} of {} at {} tokens per solved task and the baseline {} at {}",
        less0 + less7,
        2 * all,
        per_solved((less0 + less7) as usize, less_spent0 + less_spent7),
        base0 + base7,
        per_solved((base0 + base7) as usize, base_spent0 + base_spent7)
    );
    let said = [
        (
            "README.md",
            format!(
                "sampled, LESS solves {less7} of the {all} questions and the baseline {base7} (greedy {less0} and {base0})"
            ),
        ),
        ("README.md", both.clone()),
        ("README.md", format!("the first recording's {less0} against {base0} is within what one run varies by")),
        (
            "docs/llm-agents.md",
            format!(
                "sampled, LESS solves {less7} of the {all} questions and the baseline {base7} (greedy {less0} and {base0}). The funnel tables say where: sampled, LESS lost {unread7} questions found and not read ({unread0} greedy) and {uncited7} read and not cited ({uncited0} greedy)"
            ),
        ),
        ("docs/llm-agents.md", both),
        (
            "docs/llm-agents.md",
            format!("the first recording's {less0} against {base0} of {all} is within what one run varies by"),
        ),
        (
            "docs/llm-agents.md",
            format!(
                "with every citation right, LESS would solve at most {} of {all} sampled and the baseline {}",
                less7 + less_stated7,
                base7 + base_stated7
            ),
        ),
    ];
    for (doc, said) in said {
        let text = std::fs::read_to_string(root().join(doc)).expect("the document");
        assert!(text.split_whitespace().collect::<Vec<_>>().join(" ").contains(&said), "{doc} should say: {said}");
    }
    for doc in ["docs/llm-agents.md", "README.md"] {
        assert_eq!(
            between_markers(doc, "llm-free:spread"),
            table,
            "{doc}'s spread table, regenerated from the benches"
        );
    }
}

/// Both llm-free recordings replayed as the two repeats of one bench (each at the temperature its exchanges were
/// recorded at): the figures the README leads with. Its command, committed bench.json, and the marker of its summary
/// in docs/llm-agents.md.
const LLM_FREE_POOLED: (&str, &str, &str) = (
    "lessrt bench scenarios/real-ignore.toml scenarios/audit-tidepool.toml scenarios/review-lanternfish.toml scenarios/waves-harbor.toml --agents llm-free --modes less,verbatim --replay scenarios/recordings/llm-free,scenarios/recordings/llm-free-t0.7",
    "scenarios/recordings/pooled/bench.json",
    "bench-llm-free-pooled",
);

/// The pooled bench replays to its committed bench.json; the README's headline is its summary's billed table, paired
/// statistics and the grader's agreement with the hand adjudication, and the committed figures are what bench.json's
/// items give when recomputed here (billed per solved task per mode, the discordant pairs, every answer judged).
#[test]
fn both_llm_free_recordings_pool_into_the_readme_headline() {
    let (command, committed, marker) = LLM_FREE_POOLED;
    let (_dir, out, committed) = replays_to_committed(command, committed, "docs/llm-agents.md", marker);
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    let headline = summary.split("\nLESS against `verbatim`, tokens").next().expect("the headline");
    let agreement = summary.split("### The grader against the hand adjudication").nth(1).expect("the agreement");
    let readme = between_markers("README.md", "bench-llm-free-pooled:headline");
    let whole = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    assert!(whole.contains(command), "the README names the command");
    assert!(readme.contains(headline.trim()), "regenerate the README's pooled headline from summary.md");
    assert!(readme.contains(agreement.trim()), "regenerate the README's grader agreement from summary.md");
    let bench: Value = serde_json::from_slice(&committed).expect("bench.json");
    let runs = bench["runs"].as_array().expect("runs");
    let billed_per_solved = |mode: &str| {
        let of: Vec<&Value> = runs.iter().filter(|r| r["mode"] == mode).collect();
        let billed: u64 = of.iter().map(|r| r["totals"]["billed"].as_u64().expect("billed")).sum();
        let solved: u64 = of.iter().map(|r| r["tasks"]["solved"].as_u64().expect("solved")).sum();
        (solved, (billed as f64 / solved as f64).round() as u64)
    };
    for mode in ["less", "verbatim"] {
        let (solved, per) = billed_per_solved(mode);
        assert!(
            headline.contains(&format!("| {mode} | {solved}/92 |"))
                && headline.contains(&format!("**{}**", thousands(per))),
            "{mode}: {solved} solved at {per} billed per solved task, recomputed from the items"
        );
    }
    // The discordant pairs, recomputed from the items: the same task and repeat in both modes.
    let solved_in = |mode: &str| -> std::collections::BTreeSet<(String, u64, String)> {
        runs.iter()
            .filter(|r| r["mode"] == mode)
            .flat_map(|r| {
                let key = (r["scenario"].as_str().expect("scenario").to_owned(), r["repeat"].as_u64().expect("repeat"));
                solved_ids(r).into_iter().map(move |id| (key.0.clone(), key.1, id))
            })
            .collect()
    };
    let (less, base) = (solved_in("less"), solved_in("verbatim"));
    let said = format!(
        "both {}, only LESS {}, only `verbatim` {}",
        less.intersection(&base).count(),
        less.difference(&base).count(),
        base.difference(&less).count()
    );
    assert!(headline.contains(&said), "the headline should say: {said}");
    // The README's reading of the headline: each recording alone, billed against wire, calls; recomputed here.
    let one = |path: &str| -> Value {
        serde_json::from_slice(&std::fs::read(root().join(path)).expect("a committed bench.json")).expect("JSON")
    };
    let ratio = |bench: &Value, field: &str, key: &str| bench["comparison"][0][field][key].as_f64().expect("ratio");
    let (greedy, sampled) =
        (one("scenarios/recordings/llm-free/bench.json"), one("scenarios/recordings/llm-free-t0.7/bench.json"));
    let total = |mode: &str, f: &dyn Fn(&Value) -> u64| -> u64 {
        runs.iter().filter(|r| r["mode"] == mode).map(|r| f(&r["totals"])).sum()
    };
    let billed = |t: &Value| t["billed"].as_u64().expect("billed");
    let wire =
        |t: &Value| t["inline_tokens"]["total"].as_u64().expect("inline") + t["deref_tokens"].as_u64().expect("deref");
    let calls = |t: &Value| t["model_calls"].as_u64().expect("calls");
    let times = |a: u64, b: u64| format!("{:.1}", a as f64 / b as f64);
    let prose = whole.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        format!(
            "its billed tokens per solved task are {:.2} of the baseline's with an interval from {:.2} to {:.2}",
            ratio(&bench, "billed", "ratio"),
            ratio(&bench, "billed", "low"),
            ratio(&bench, "billed", "high")
        ),
        format!(
            "for {:.2} of the billed tokens per solved task ({:.2}–{:.2}), sampled {} against {} for {:.2}",
            ratio(&greedy, "billed", "ratio"),
            ratio(&greedy, "billed", "low"),
            ratio(&greedy, "billed", "high"),
            sampled["comparison"][0]["solved_only_a"].as_u64().expect("a")
                + sampled["comparison"][0]["solved_both"].as_u64().expect("both"),
            sampled["comparison"][0]["solved_only_b"].as_u64().expect("b")
                + sampled["comparison"][0]["solved_both"].as_u64().expect("both"),
            ratio(&sampled, "billed", "ratio")
        ),
        format!(
            "Billed tokens are {} (LESS) and {} (baseline) times the wire tokens",
            times(total("less", &billed), total("less", &wire)),
            times(total("verbatim", &billed), total("verbatim", &wire))
        ),
        format!("LESS makes {} times the baseline's calls", times(total("less", &calls), total("verbatim", &calls))),
    ] {
        assert!(prose.contains(&said), "README.md should say: {said}");
    }
    let agreement = &bench["adjudication"];
    let cell = |name: &str| agreement[name].as_u64().unwrap_or_else(|| panic!("adjudication.{name}"));
    let judged = ["solved_right", "solved_not_right", "unsolved_right", "unsolved_not_right"].map(cell);
    assert_eq!(cell("unjudged"), 0, "every recorded answer is judged by hand ({} are)", judged.iter().sum::<u64>());
    assert_eq!(judged.iter().sum::<u64>(), 184, "one judged answer per task, run and repeat");
}

/// The budget sweep of audit-tidepool replays from its recording (the values 500 and 1000 were recorded beside the
/// scenario's 250) to its committed bench.json.
#[test]
fn the_recorded_budget_sweep_replays() {
    replays_to_committed(
        "lessrt bench scenarios/audit-tidepool.toml --agents llm-free --modes less,verbatim --replay scenarios/recordings/llm-free --sweep auditor.max_deref_tokens_total=250,500,1000",
        "scenarios/recordings/sweep/bench.json",
        "docs/benchmark.md",
        "bench-sweep",
    );
}

/// `lessrt run` of the causal recording of `scenario` in `mode`, replayed at 300 ms per exchange with `parallel`
/// turns at once: its exit status and its report (JSON).
fn replay_causal(scenario: &str, mode: &str, parallel: &str) -> (Option<i32>, Value) {
    let out = tempfile::tempdir().expect("tempdir");
    let (file, recording) = (format!("scenarios/{scenario}.toml"), format!("scenarios/recordings/causal/{scenario}"));
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", &file, "--agents", "llm-free", "--mode", mode])
        .args(["--replay", &recording, "--replay-latency", "300"])
        .args(["--parallel", parallel, "--json", "--quiet", "--out"])
        .arg(out.path())
        .current_dir(root())
        .output()
        .expect("lessrt runs");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code(), report)
}

fn timing(report: &Value) -> Value {
    let report = report.as_array().and_then(|a| a.first()).unwrap_or(report);
    report["timing"].clone()
}

#[test]
fn the_causal_recording_reports_the_same_one_turn_at_a_time_and_four_at_once() {
    for mode in ["less", "verbatim"] {
        let (status_one, one) = replay_causal("real-ignore", mode, "1");
        let (status_four, four) = replay_causal("real-ignore", mode, "4");
        assert!(matches!(status_one, Some(0 | 1)), "{mode}: {one}");
        assert_eq!(status_one, status_four, "{mode}");
        assert_eq!(untimed(one.clone()), untimed(four.clone()), "{mode}: the report depends on parallelism");
        let (one, four) = (timing(&one), timing(&four));
        assert_eq!(one["most_at_once"], 1, "{mode}: {one}");
        assert!(four["most_at_once"].as_u64().unwrap_or(0) > 1, "{mode}: the investigators never overlapped: {four}");
        // Four investigators under two leads: the longest chain of turns asks the model far less than all of them.
        let critical = four["critical_path_model_ms"].as_u64().expect("critical path");
        assert!(critical > 0 && 2 * critical < four["model_ms"].as_u64().expect("model time"), "{mode}: {four}");
        assert_eq!(one["critical_path_model_ms"], four["critical_path_model_ms"], "{mode}");
    }
}

#[test]
fn every_causal_recording_reports_the_same_one_turn_at_a_time_and_four_at_once() {
    for scenario in ["waves-harbor", "review-lanternfish"] {
        let (status_one, one) = replay_causal(scenario, "less", "1");
        let (status_four, four) = replay_causal(scenario, "less", "4");
        assert_eq!(status_one, status_four, "{scenario}");
        assert_eq!(untimed(one), untimed(four.clone()), "{scenario}: the report depends on parallelism");
        assert!(timing(&four)["most_at_once"].as_u64().unwrap_or(0) > 1, "{scenario}: no turns overlapped: {four}");
    }
}
