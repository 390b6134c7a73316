//! What needs the embedding model (`scripts/provision-model.sh`): `lessrt doctor` finding and running it, and a run
//! whose archive waits for it instead of the run waiting.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{lessrt, root, stderr, stdout};

/// The run did not wait for the embedding model: its archive is indexed for hash recall at once, and the messages are
/// embedded by the first query that reranks.
#[test]
fn a_run_leaves_its_archive_to_be_embedded_by_the_first_reranked_query() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("runs");
    let scenario = root().join("scenarios/uc1-refactor.toml");
    let s = |p: &Path| p.display().to_string();
    let json = dir.path().join("report.json");
    let output = lessrt(&["run", &s(&scenario), "--mode", "less", "--quiet", "-o", &s(&json), "--out", &s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("JSON");
    let delivered = report["totals"]["turns"].as_u64().expect("turns");
    let store = out.join("uc1-refactor/less/memory");
    let unembedded = || {
        let index = less_runtime::dag::index_dir(&store);
        less_runtime::memory::Memory::open(&index).expect("index").unembedded().expect("count")
    };
    assert!(unembedded() >= delivered.min(5) as usize, "the run embedded its archive");
    let query = lessrt(&["dag", "query", "payment capture", "--store", &s(&store), "--json"]);
    assert_eq!(query.status.code(), Some(0), "{}", stderr(&query));
    let answer: Value = serde_json::from_str(&stdout(&query)).expect("JSON");
    assert_eq!(answer["stages"], json!("hash+rerank"), "the query reranked: {answer}");
    assert_eq!(unembedded(), 0, "the first reranked query embeds what was pending");
}

/// `lessrt doctor` finds the provisioned model and runs it; pointed at an empty place, it names what is missing and
/// the fix, and exits 1.
#[test]
fn doctor_reports_the_model_and_what_is_missing() {
    let output = lessrt(&["doctor", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON report");
    assert_eq!(report["ok"], json!(true));
    let checks = report["checks"].as_array().expect("checks");
    assert!(checks.iter().any(|c| c["check"] == json!("embedding model runs") && c["ok"] == json!(true)));

    let empty = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["doctor"])
        .env("LESSRT_MODEL_DIR", empty.path())
        .output()
        .expect("run lessrt");
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("MISSING model file model.onnx"), "{text}");
    assert!(text.contains("stage 1 only") && text.contains("scripts/provision-model.sh"), "{text}");
}
