//! The recorded `--agents llm-free` bench replayed: the workers' searches rerank with the embedding model, so the
//! replay asks the recording the same questions only with the model provisioned.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::{between_markers, root, thousands};

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
    assert!(output.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&output.stderr));
    let replayed = std::fs::read(out.join("bench.json")).expect("bench.json");
    let committed = std::fs::read(root().join(committed)).expect("committed bench.json");
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

/// The command of docs/llm-agents.md's table of `real-ignore` with models on their own (`--agents llm-free`), replayed from
/// the committed recording (made against qwen2.5-coder-1.5b on the local server).
const LLM_FREE_COMMAND: &str = "lessrt bench scenarios/real-ignore.toml --agents llm-free --modes less,verbatim --replay scenarios/recordings/llm-free";

/// The recorded llm-free run replays without a server to its committed bench.json, byte for byte, and
/// docs/llm-agents.md's table is its summary. In it no authored pack reached a model (the briefs carry none) and the workers' models chose
/// their own searches and reads.
#[test]
fn the_recorded_llm_free_run_replays_to_its_committed_bench_json() {
    let (_dir, out, _) = replays_to_committed(
        LLM_FREE_COMMAND,
        "scenarios/recordings/llm-free/bench.json",
        "docs/llm-agents.md",
        "bench-llm-free",
    );
    let ledger = std::fs::read_to_string(out.join("runs/real-ignore/less/1/ledger.jsonl")).expect("ledger");
    let events: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).expect("event")).collect();
    for brief in events.iter().filter(|e| e["event"] == "delivered" && e["kind"] == "brief") {
        let packs = brief["doc"]["pointer_packs"].as_object();
        let empty = packs.is_none_or(|p| p.values().all(|p| p.as_array().is_some_and(Vec::is_empty)));
        assert!(empty, "a pack reached a model: {brief}");
    }
    let searches = events.iter().filter(|e| e["event"] == "search").count();
    let reads = events.iter().filter(|e| e["event"] == "deref" && e["granted"] == true).count();
    assert!(searches >= 4 && reads >= 4, "the workers searched ({searches}) and read ({reads}) on their own");
    // docs/llm-agents.md's reading of it is the ledger's and the verdicts' counts.
    let count = |f: &dyn Fn(&Value) -> bool| events.iter().filter(|e| f(e)).count();
    let worker_reads = count(&|e| {
        e["event"] == "deref"
            && e["granted"] == true
            && e["agent"].as_str().is_some_and(|a| a.ends_with("investigator"))
    });
    let asked = count(&|e| e["event"] == "grant_asked");
    let granted = count(&|e| e["event"] == "grant_issued" && e["answers"].is_string());
    let denied = count(&|e| e["event"] == "grant_denied");
    let bench: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).expect("bench.json")).expect("JSON");
    let less = bench["runs"].as_array().expect("runs").iter().find(|r| r["mode"] == "less").expect("the LESS run");
    let evidence: Vec<&str> =
        less["tasks"]["items"].as_array().expect("items").iter().filter_map(|t| t["evidence"].as_str()).collect();
    let wrong_span: Vec<&&str> = evidence.iter().filter(|e| e.contains("cites nothing overlapping")).collect();
    let lacking = wrong_span.iter().filter(|e| e.contains("does not state")).count();
    let unanswered = evidence.iter().filter(|e| e.contains("delivered no engram")).count();
    let doc = std::fs::read_to_string(root().join("docs/llm-agents.md")).expect("docs/llm-agents.md");
    let prose = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let other_task = evidence.iter().filter(|e| e.contains("answers ") && e.contains(", not ")).count();
    for said in [
        format!(
            "read what it chose ({worker_reads} granted reads by the workers; {asked} reads over budget went to the area lead as requests, {granted} granted by that lead's model, {denied} denied)"
        ),
        format!(
            "of the {}, {} cite no span overlapping the gold ({lacking} of those also lack the asked value), and {unanswered} are unanswered; {other_task} of the closest engrams answer another question",
            evidence.len(),
            wrong_span.len()
        ),
        format!("solve {} of the {} questions in LESS", less["tasks"]["solved"], less["tasks"]["graded"]),
        format!("({searches} searches,"),
        format!(
            "{} escalations, {} of {} worker completions unusable",
            less["totals"]["escalations"],
            less["roles"]["investigator"]["model"]["unusable"],
            less["roles"]["investigator"]["model"]["calls"]
        ),
    ] {
        assert!(prose.contains(&said), "docs/llm-agents.md should say: {said}");
    }
    // Beside it, the fair baseline's outcome and the tokens of both, as docs/llm-agents.md states them.
    let base =
        bench["runs"].as_array().expect("runs").iter().find(|r| r["mode"] == "verbatim").expect("the baseline run");
    let spent = |r: &Value| {
        r["totals"]["inline_tokens"]["total"].as_u64().expect("inline")
            + r["totals"]["deref_tokens"].as_u64().expect("deref")
    };
    let role_spent = |r: &Value, role: &str| {
        r["roles"][role]["inline_tokens"]["total"].as_u64().expect("inline")
            + r["roles"][role]["deref_tokens"].as_u64().expect("deref")
    };
    // Where the unsolved tasks were lost (the grader's `failure`); the solved ones were found and read too.
    let lost = |r: &Value, kind: &str| {
        r["tasks"]["items"].as_array().expect("items").iter().filter(|t| t["failure"] == kind).count()
    };
    let found_and_read = |r: &Value| {
        lost(r, "read_not_cited")
            + lost(r, "claim_misses")
            + lost(r, "other_task")
            + r["tasks"]["solved"].as_u64().expect("solved") as usize
    };
    assert_eq!(lost(base, "not_found"), lost(less, "not_found"), "the same search misses the same questions");
    let base_ledger = std::fs::read_to_string(out.join("runs/real-ignore/verbatim/1/ledger.jsonl")).expect("ledger");
    let base_events: Vec<Value> = base_ledger.lines().map(|l| serde_json::from_str(l).expect("event")).collect();
    let base_searches = base_events.iter().filter(|e| e["event"] == "search").count();
    let base_reads = base_events.iter().filter(|e| e["event"] == "deref").count();
    let base_wrong = base["tasks"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|t| t["evidence"].as_str().is_some_and(|e| e.contains("cites nothing overlapping")))
        .count();
    for said in [
        format!("and {} of {} in the fair baseline", base["tasks"]["solved"], base["tasks"]["graded"]),
        format!("({} inline + dereferenced against {})", thousands(spent(less)), thousands(spent(base))),
        format!("({base_searches} searches, {base_reads} reads); its answers fail the same ways ({base_wrong} of"),
        format!("for {} of the 21 questions no search answer held the gold span", lost(less, "not_found")),
        // Where LESS saves and where it loses, by role (inline + dereferenced).
        format!(
            "the investigators' turns, {} tokens against {}",
            thousands(role_spent(less, "investigator")),
            thousands(role_spent(base, "investigator"))
        ),
        format!(
            "the area leads, {} against {}",
            thousands(role_spent(less, "area-lead")),
            thousands(role_spent(base, "area-lead"))
        ),
        format!(
            "found and read ({} in LESS, {} in the baseline, where the hits are pasted)",
            found_and_read(less),
            found_and_read(base)
        ),
    ] {
        assert!(prose.contains(&said), "docs/llm-agents.md should say: {said}");
    }
}
