//! End-to-end tests of `lessrt compact` and `lessrt eval context`: what a user types, what comes back, exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn lessrt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessrt")).args(args).output().expect("lessrt runs")
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write transcript");
    path
}

/// A conversation with a correction, a secret and an address in the cold history, chatter (so the ledger is
/// smaller than what it replaces), and eight tail-able messages.
fn transcript() -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "system", "content": "You are terse."}),
        json!({"role": "user", "content": "The deploy target is alpha-01."}),
        json!({"role": "user", "content": "api_key=Q7fK2mZp9LxW3vB8 and the bastion is 10.20.30.40"}),
        json!({"role": "assistant", "content": "TODO: rotate that key."}),
        json!({"role": "user", "content": "Correction: the deploy target is now beta-02."}),
    ];
    for i in 0..12 {
        let content = format!(
            "Chatter {i}: the coffee machine on the third floor was broken again this morning, so everybody queued \
             downstairs and talked about the weekend, the weather and the football results for a good while."
        );
        messages.push(json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": content}));
    }
    for i in 0..8 {
        messages.push(json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("turn {i}")}));
    }
    messages
}

/// Each miss kind and the label of its row in docs/context-ledger.md's tables.
const KIND_LABELS: [(&str, &str); 6] = [
    ("stale_fact", "stale fact used as current"),
    ("lost_obligation", "lost obligation"),
    ("missing_fact", "fact missing from context"),
    ("secret_exposed", "raw secret or IP exposed"),
    ("superseded_decision", "superseded decision used"),
    ("correction_lost", "correction lost"),
];

#[test]
fn compact_prints_system_messages_one_ledger_and_the_verbatim_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = transcript();
    let file = write(dir.path(), "chat.json", &Value::Array(input.clone()).to_string());
    let output = lessrt(&["compact", file.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let messages = stdout_json(&output);
    let messages = messages.as_array().expect("an array of messages");
    assert_eq!(messages.len(), 1 + 1 + 6);
    assert_eq!(messages[0], input[0]);
    let ledger = messages[1]["content"].as_str().expect("ledger text");
    assert!(ledger.starts_with("Semantic RLE context ledger\n"), "{ledger}");
    assert!(ledger.contains("- deploy target: beta-02 (#4, corrected)"), "{ledger}");
    assert!(ledger.contains("- [open] rotate that key (#3)"), "{ledger}");
    assert!(!ledger.contains("Q7fK2mZp9LxW3vB8") && !ledger.contains("10.20.30.40"), "{ledger}");
    assert!(ledger.contains("credential_ref:credential:"), "{ledger}");
    assert_eq!(&messages[2..], &input[input.len() - 6..], "the hot tail is byte-identical");
}

#[test]
fn compact_reads_jsonl_and_reports_stats_with_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jsonl: String = transcript().iter().map(|m| format!("{m}\n")).collect();
    let file = write(dir.path(), "chat.jsonl", &jsonl);
    let path = file.to_str().expect("utf-8 path");
    let output = lessrt(&["compact", path, "--hot-tail", "3", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = stdout_json(&output);
    let stats = &report["stats"];
    assert_eq!(stats["messages_in"], 25);
    assert_eq!(stats["messages_out"], 1 + 1 + 3);
    assert_eq!(stats["hot_tail_unchanged"], true);
    assert!(stats["tokens_in"].as_u64().expect("tokens_in") > 0);
    assert!(stats["tokens_out"].as_u64().expect("tokens_out") > 0);
    assert_eq!(report["messages"].as_array().map(Vec::len), Some(5));
    // The same input gives the same bytes, and compacting the output again changes nothing.
    let again = lessrt(&["compact", path, "--hot-tail", "3", "--json"]);
    assert_eq!(again.stdout, output.stdout);
    let compacted = write(dir.path(), "compacted.json", &report["messages"].to_string());
    let twice = lessrt(&["compact", compacted.to_str().expect("utf-8 path"), "--hot-tail", "3"]);
    assert_eq!(stdout_json(&twice), report["messages"]);
}

#[test]
fn compact_runs_the_baselines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "chat.json", &Value::Array(transcript()).to_string());
    let path = file.to_str().expect("utf-8 path");
    let hot_tail = stdout_json(&lessrt(&["compact", path, "--engine", "hot-tail", "--hot-tail", "2"]));
    assert_eq!(hot_tail.as_array().map(Vec::len), Some(3), "system + tail: {hot_tail}");
    let truncate = lessrt(&["compact", path, "--engine", "truncate", "--budget", "10", "--json"]);
    assert_eq!(truncate.status.code(), Some(0), "{}", stderr(&truncate));
    let report = stdout_json(&truncate);
    let text = report["messages"].to_string();
    assert!(text.contains("[context truncated:"), "{text}");
    let bad = lessrt(&["compact", path, "--engine", "summary"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("expected ledger, hot-tail or truncate"), "{}", stderr(&bad));
}

#[test]
fn compact_refuses_malformed_input_with_a_stable_code_and_what_to_send() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("broken.json", "[{\"role\": \"user\",", "LESS_JSON_MALFORMED"),
        ("numbers.jsonl", "{\"role\":\"user\",\"content\":\"hi\"}\n42\n", "LESS_TRANSCRIPT_INVALID"),
        ("role.json", "[{\"role\":\"wizard\",\"content\":\"hi\"}]", "LESS_TRANSCRIPT_INVALID"),
        ("empty.json", "  \n", "LESS_TRANSCRIPT_INVALID"),
    ];
    for (name, text, code) in cases {
        let file = write(dir.path(), name, text);
        let output = lessrt(&["compact", file.to_str().expect("utf-8 path")]);
        assert_eq!(output.status.code(), Some(2), "{name}");
        assert!(output.stdout.is_empty(), "{name}: nothing on stdout");
        let err = stderr(&output);
        assert!(err.contains(code), "{name}: {err}");
        assert!(err.contains("Send "), "{name} says what to send instead: {err}");
    }
    let missing = lessrt(&["compact", "/nonexistent/chat.json"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("LESS_INPUT_UNREADABLE"), "{}", stderr(&missing));
}

/// docs/context-ledger.md's short chat: its ledger would cost more tokens than the messages it replaces, so `compact` returns
/// them unchanged and says so (stderr, and `stats.note` in the report); every engine, every tail.
#[test]
fn compact_never_returns_more_tokens_than_it_was_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short: Vec<Value> = [
        "The deploy target is alpha-01.",
        "api_key=Q7fK2mZp9LxW3vB8, and the bastion is 10.20.30.40",
        "TODO: rotate that key.",
        "Decision: use PostgreSQL for storage.",
        "Correction: the deploy target is now beta-02.",
        "Decision changed: use SQLite instead of PostgreSQL.",
        "Open question: who owns the backup rotation?",
        "Надо обновить сертификаты.",
        "ok",
        "thanks",
    ]
    .iter()
    .map(|text| json!({"role": "user", "content": text}))
    .collect();
    let file = write(dir.path(), "chat.json", &Value::Array(short.clone()).to_string());
    let path = file.to_str().expect("utf-8 path");
    for engine in ["ledger", "hot-tail", "truncate"] {
        for tail in ["0", "2", "6"] {
            let output = lessrt(&["compact", path, "--engine", engine, "--hot-tail", tail, "--budget", "40", "--json"]);
            assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
            let report = stdout_json(&output);
            let stats = &report["stats"];
            let (tokens_in, tokens_out) = (stats["tokens_in"].as_u64(), stats["tokens_out"].as_u64());
            assert!(tokens_out <= tokens_in, "{engine} tail {tail}: {stats}");
            if let Some(note) = stats["note"].as_str() {
                assert_eq!(report["messages"], Value::Array(short.clone()), "{engine}: unchanged when noted");
                assert!(stderr(&output).contains(note), "the note is on stderr too: {}", stderr(&output));
            }
        }
    }
    // The ledger engine with a tail of 2 is docs/context-ledger.md's example: noted, unchanged.
    let output = lessrt(&["compact", path, "--hot-tail", "2", "--json"]);
    let report = stdout_json(&output);
    assert!(report["stats"]["note"].as_str().is_some_and(|n| n.contains("unchanged")), "{report}");
    assert_eq!(report["stats"]["tokens_out"], report["stats"]["tokens_in"]);
    // Quiet means no note on stderr; the answer is the same.
    let quiet = lessrt(&["compact", path, "--hot-tail", "2", "--quiet"]);
    assert_eq!(stderr(&quiet), "");
    assert_eq!(stdout_json(&quiet), Value::Array(short));
}

#[test]
fn eval_context_prints_every_engine_per_miss_kind_and_the_ledger_passes_all() {
    let output = lessrt(&["eval", "context", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = stdout_json(&output);
    assert!(report["scenarios"].as_u64().expect("scenarios") >= 30);
    let ledger = &report["engines"]["ledger"];
    assert_eq!(ledger["passed"], ledger["checks"], "{ledger}");
    for engine in ["hot-tail", "truncate"] {
        let score = &report["engines"][engine];
        assert!(score["passed"].as_u64() < score["checks"].as_u64(), "{engine}: {score}");
    }
    for kind in
        ["stale_fact", "lost_obligation", "missing_fact", "secret_exposed", "superseded_decision", "correction_lost"]
    {
        assert!(ledger["by_kind"][kind]["checks"].as_u64().expect("checks") > 0, "{kind}");
    }
    // docs/context-ledger.md's table is this run's result, row by row.
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/context-ledger.md"))
        .expect("docs/context-ledger.md");
    for (kind, label) in KIND_LABELS {
        let cell = |engine: &str| {
            let k = &report["engines"][engine]["by_kind"][kind];
            format!("{}/{}", k["passed"], k["checks"])
        };
        let row = format!("| {label} | **{}** | {} | {} |", cell("ledger"), cell("hot-tail"), cell("truncate"));
        assert!(readme.contains(&row), "docs/context-ledger.md lacks the row:\n{row}");
    }
    let text = lessrt(&["eval", "context"]);
    assert_eq!(text.status.code(), Some(0));
    let table = String::from_utf8_lossy(&text.stdout);
    assert!(table.contains("ledger") && table.contains("hot-tail") && table.contains("truncate"), "{table}");
    assert!(table.contains("raw secret or IP exposed"), "{table}");
}

#[test]
fn eval_context_paraphrase_reports_dev_and_held_out_side_by_side_as_the_readme_says() {
    let output = lessrt(&["eval", "context", "--suite", "paraphrase", "--json"]);
    let report = stdout_json(&output);
    assert_eq!(report["suite"], "paraphrase");
    let kinds =
        ["stale_fact", "lost_obligation", "missing_fact", "secret_exposed", "superseded_decision", "correction_lost"];
    let mut ledger_failures = 0;
    for split in ["dev", "held_out"] {
        let doc = &report["splits"][split];
        let ledger = &doc["engines"]["ledger"];
        for kind in kinds {
            assert!(ledger["by_kind"][kind]["checks"].as_u64().expect("checks") > 0, "{split}: {kind}");
        }
        for engine in ["hot-tail", "truncate"] {
            assert!(doc["engines"][engine]["passed"].as_u64() < ledger["passed"].as_u64(), "{split}: {engine}");
        }
        // Re-compaction is idempotent on every scenario of the set.
        let idempotent = &doc["recompaction"]["idempotent"];
        assert_eq!(idempotent["stable"], idempotent["scenarios"], "{split}: {}", doc["recompaction"]);
        assert_eq!(idempotent["scenarios"], doc["scenarios"]);
        ledger_failures += ledger["failures"].as_array().expect("failures").len();
    }
    // Exit 1 exactly when the ledger misses a check, in either split.
    assert_eq!(output.status.code(), Some(i32::from(ledger_failures > 0)), "{}", stderr(&output));
    // docs/context-ledger.md's table is this run's result, row by row.
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/context-ledger.md"))
        .expect("docs/context-ledger.md");
    for (kind, label) in KIND_LABELS {
        let cell = |split: &str, engine: &str| {
            let k = &report["splits"][split]["engines"][engine]["by_kind"][kind];
            format!("{}/{}", k["passed"], k["checks"])
        };
        let row = format!(
            "| {label} | **{}** | **{}** | {} | {} | {} | {} |",
            cell("dev", "ledger"),
            cell("held_out", "ledger"),
            cell("dev", "hot-tail"),
            cell("held_out", "hot-tail"),
            cell("dev", "truncate"),
            cell("held_out", "truncate"),
        );
        assert!(readme.contains(&row), "docs/context-ledger.md lacks the row:\n{row}");
    }
    let text = lessrt(&["eval", "context", "--suite", "paraphrase"]);
    let table = String::from_utf8_lossy(&text.stdout);
    assert!(table.contains("ledger dev") && table.contains("ledger held"), "{table}");
    let unknown = lessrt(&["eval", "context", "--suite", "nonsense"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
}

#[test]
fn compact_engrams_go_into_the_memory_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "standup.json", &Value::Array(transcript()).to_string());
    let output = lessrt(&["compact", file.to_str().expect("utf-8 path"), "--engrams"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one engram per line"))
        .collect();
    let claims: Vec<&str> = lines.iter().filter_map(|e| e["claim"].as_str()).collect();
    assert_eq!(claims, ["bastion: [REDACTED_IP]", "deploy target: beta-02", "rotate that key"], "{lines:?}");
    assert_eq!(lines[1]["pointers"][0], json!({"type": "sam", "ref": "standup:4"}));
    assert_eq!(lines[1]["tags"], json!(["context-ledger", "subject:deploy-target", "correction"]));
    let engrams = write(dir.path(), "engrams.jsonl", &String::from_utf8_lossy(&output.stdout));
    let store = dir.path().join("store").display().to_string();
    let put = lessrt(&["memory", "put", engrams.to_str().expect("utf-8 path"), "--store", &store, "--project", "p"]);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    assert_eq!(String::from_utf8_lossy(&put.stdout).matches("stored").count(), 3, "{}", stderr(&put));
}
