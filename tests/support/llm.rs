//! Helpers of the LLM agents' tests, live (`provisioned`) and replayed (`tests`): runs that a model answers, and what
//! holds of their ledgers whatever the model wrote.

use std::path::Path;
use std::process::{Command, Output};

use less_runtime::{DocKind, validate};
use serde_json::Value;

use super::{lessrt, root};

/// Runs a scenario that a model answers: the model's failures are results (a failed check exits 1), so the run only
/// has to finish (0 or 1); returns the exit code and stdout.
pub(crate) fn run_finished(args: &[&str]) -> (i32, String) {
    let output = lessrt(args);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let code = output.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "lessrt {args:?} did not finish ({code}):\n{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (code, out)
}

/// Whether `agent` escalated: its own escalation delivered to its parent, or its gateway's after two refusals.
pub(crate) fn escalated_by(events: &[Value], agent: &str) -> bool {
    events.iter().any(|e| {
        (e["event"] == "delivered" && e["from"] == agent && e["doc"]["type"] == "escalation")
            || (e["event"] == "escalated" && e["about"] == agent)
    })
}

pub(crate) const REVIEWERS: [&str; 3] = ["correctness-reviewer", "concurrency-reviewer", "test-impact-reviewer"];

pub(crate) fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("report written")).expect("report is JSON")
}

pub(crate) fn ledger(out: &Path, mode: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("uc3-review-llm").join(mode).join("ledger.jsonl")).expect("ledger");
    text.lines().map(|l| serde_json::from_str(l).expect("ledger line")).collect()
}

/// Every delivered engram is schema-valid; each reviewer asked its model (the provider's count is in the ledger) and
/// either delivered the model's engrams or escalated saying why; the concurrency reviewer's refusal was followed by
/// the model's resend or its escalation. What a model writes varies with the model and the server's state; that it
/// went through the gateways, and what the run did with it, does not.
pub(crate) fn check_ledger(events: &[Value]) {
    check_ledger_of(events, true);
}

/// [`check_ledger`], the concurrency reviewer's refusal required or not: for a live model's run whether its first
/// report is refused depends on what the model writes (more engrams than the lead takes); one that came is answered.
pub(crate) fn check_ledger_of(events: &[Value], refusal_required: bool) {
    for event in events.iter().filter(|e| e["event"] == "delivered") {
        for engram in event["doc"]["engrams"].as_array().into_iter().flatten() {
            assert_eq!(validate(DocKind::Engram, engram), Vec::new(), "invalid engram delivered: {engram}");
        }
    }
    for reviewer in REVIEWERS {
        let usage = events.iter().find(|e| e["event"] == "model_usage" && e["agent"] == reviewer);
        let prompt = usage.and_then(|e| e["prompt_tokens"].as_u64()).unwrap_or(0);
        assert!(prompt > 0, "the ledger records {reviewer}'s model usage (provider's count)");
        let model_engrams = events
            .iter()
            .filter(|e| e["event"] == "delivered" && e["from"] == reviewer)
            .flat_map(|e| e["doc"]["engrams"].as_array().into_iter().flatten())
            .filter(|g| g["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == "llm")))
            .count();
        assert!(
            model_engrams > 0 || escalated_by(events, reviewer),
            "{reviewer} delivered its model's engrams or escalated"
        );
    }
    let from = |e: &&Value| e["from"] == "concurrency-reviewer" || e["about"] == "concurrency-reviewer";
    let mine: Vec<&Value> = events.iter().filter(from).collect();
    let brief = |e: &&Value| format!("{} {} {}", e["event"], e["kind"], e["reason"]);
    let seen: Vec<String> = mine.iter().map(brief).collect();
    let Some(rejected) = mine.iter().position(|e| e["event"] == "rejected") else {
        assert!(!refusal_required, "a refusal: {seen:?}");
        assert!(mine.iter().any(|e| e["event"] == "delivered"), "delivered at the first try: {seen:?}");
        return;
    };
    let answered =
        |e: &&&Value| e["event"] == "resent" || e["event"] == "escalated" || e["doc"]["type"] == "escalation";
    let after = mine.iter().position(|e| answered(&e)).expect("a resend, or an escalation saying why not");
    assert!(rejected < after, "the refusal came first");
}

pub(crate) fn script(arg: &str) -> Output {
    Command::new("bash").arg(root().join("scripts/local-llm.sh")).arg(arg).output().expect("bash runs")
}
