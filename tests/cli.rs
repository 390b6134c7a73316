//! End-to-end tests of the `lessrt` binary: what a user types, what comes back, and the exit code.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{lessrt, lessrt_stdin, stderr, stdout};

fn repo_path(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel).display().to_string()
}

fn example_engram() -> Value {
    serde_json::from_str(include_str!("../schemas/examples/engram.json")).expect("example engram")
}

/// Writes `doc` to a file in `dir` and returns its path.
fn write_doc(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, doc.to_string()).expect("write document");
    path
}

#[test]
fn every_shipped_example_validates() {
    let dir = repo_path("schemas/examples");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("examples dir")
        .map(|e| e.expect("entry").path().display().to_string())
        .collect();
    files.sort();
    assert!(files.len() >= 14, "one example per schema: {files:?}");
    let mut args = vec!["validate"];
    args.extend(files.iter().map(String::as_str));
    let output = lessrt(&args);
    assert_eq!(output.status.code(), Some(0), "stdout: {}\nstderr: {}", stdout(&output), stderr(&output));
    assert_eq!(stdout(&output), "", "nothing on stdout when all are valid");
    assert!(stderr(&output).contains(&format!("{} valid, 0 invalid", files.len())), "{}", stderr(&output));
}

#[test]
fn the_spec_shapes_are_accepted() {
    // Heimdall's own example message, piped on standard input.
    let heimdall = r#"{"type":"task_result","from":"coder","msg_id":"m1","task":"3.2","status":"pass","criteria":[1,2],"commit":"a2ef507"}"#;
    let output = lessrt_stdin(&["validate", "-"], heimdall);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    for text in [
        "repo:src/lib.rs#L120-L188@4f2a9c1",
        "artifact:SPEC_Foo.md#sec=BudgetRules@4f2a9c1",
        "sam:decision:publish-domain@2026-01-08",
        "diff:4f2a9c1..b7e01d2#src/lib.rs",
        "test:budget::spend_never_exceeds",
        "url:https://example.org/spec#budgets",
    ] {
        let parsed = lessrt(&["pointer", "parse", text]);
        assert_eq!(parsed.status.code(), Some(0), "{text}: {}", stderr(&parsed));
        let object = stdout(&parsed);
        let formatted = lessrt(&["pointer", "format", object.trim()]);
        assert_eq!(formatted.status.code(), Some(0), "{text}: {}", stderr(&formatted));
        assert_eq!(stdout(&formatted).trim_end(), text, "text form round-trips through the CLI");
    }
}

/// The violations the issue names, each with the path the user must fix.
#[test]
fn contract_violations_exit_1_with_code_and_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    type Mutation = fn(&mut Value);
    let cases: [(&str, Mutation, &str); 11] = [
        ("claim501", |d| d["claim"] = json!("x".repeat(501)), "/claim"),
        ("pointers0", |d| d["pointers"] = json!([]), "/pointers"),
        ("pointers13", |d| d["pointers"] = json!(vec![json!({"type": "repo", "ref": "a.rs"}); 13]), "/pointers"),
        ("confidence", |d| d["confidence"] = json!(1.5), "/confidence"),
        ("kind", |d| d["kind"] = json!("rumor"), "/kind"),
        ("scope", |d| d["scope"] = json!("team"), "/scope"),
        ("source", |d| d["provenance"]["source"] = json!("human"), "/provenance/source"),
        (
            "provenance",
            |d| {
                d["provenance"].as_object_mut().expect("object").remove("created_at");
            },
            "/provenance/created_at",
        ),
        (
            "extra",
            |d| {
                d.as_object_mut().expect("object").insert("pasted_context".into(), json!("..."));
            },
            "/pasted_context",
        ),
        ("ref301", |d| d["pointers"][0]["ref"] = json!(format!("{}.rs", "a".repeat(298))), "/pointers/0/ref"),
        ("span81", |d| d["pointers"][0]["span"] = json!("L".repeat(81)), "/pointers/0/span"),
    ];
    for (name, mutate, path) in cases {
        let mut doc = example_engram();
        mutate(&mut doc);
        let file = write_doc(dir.path(), &format!("{name}.json"), &doc);
        let file = file.display().to_string();
        let output = lessrt(&["validate", &file]);
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        let lines: Vec<String> = stdout(&output).lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), 1, "{name}: one violation, got {lines:?}");
        let fields: Vec<&str> = lines[0].split('\t').collect();
        assert_eq!(fields.len(), 4, "{name}: CODE, FILE, PATH, message: {fields:?}");
        assert_eq!(&fields[..3], &["LESS_SCHEMA_INVALID", file.as_str(), path], "{name}");
        assert!(!fields[3].is_empty(), "{name}: a message says what is wrong");
    }
}

#[test]
fn json_report_lists_every_error_of_every_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = write_doc(dir.path(), "good.json", &example_engram());
    let mut doc = example_engram();
    doc["claim"] = json!("x".repeat(501));
    doc["ttl"] = json!("six hours");
    let bad = write_doc(dir.path(), "bad.json", &doc);
    let output = lessrt(&["validate", "--json", &good.display().to_string(), &bad.display().to_string()]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_eq!(report["valid"], json!(false));
    let errors = report["errors"].as_array().expect("errors array");
    let got: Vec<(&str, &str)> =
        errors.iter().map(|e| (e["code"].as_str().expect("code"), e["path"].as_str().expect("path"))).collect();
    assert_eq!(got, vec![("LESS_SCHEMA_INVALID", "/claim"), ("LESS_TTL_INVALID", "/ttl")]);
    for error in errors {
        assert_eq!(error["file"], json!(bad.display().to_string()));
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    }

    let output = lessrt(&["validate", "--json", &good.display().to_string()]);
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(report, json!({"valid": true, "errors": []}));
}

#[test]
fn unreadable_or_non_json_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"id\": \"x\",").expect("write");
    let output = lessrt(&["validate", &broken.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not valid JSON"), "{}", stderr(&output));
    assert!(stderr(&output).contains("LESS_JSON_MALFORMED"));

    let missing = dir.path().join("missing.json");
    let output = lessrt(&["validate", &missing.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot read"), "{}", stderr(&output));
    assert!(stderr(&output).contains("LESS_INPUT_UNREADABLE"));

    // Unreadable input wins over invalid documents: the run is not trustworthy.
    let mut doc = example_engram();
    doc["confidence"] = json!(2);
    let invalid = write_doc(dir.path(), "invalid.json", &doc);
    let output = lessrt(&["validate", &invalid.display().to_string(), &missing.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stdout(&output).starts_with("LESS_SCHEMA_INVALID\t"), "the invalid file is still reported");

    let output = lessrt(&["validate", "--json", &broken.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON even for broken input");
    assert_eq!(report["errors"][0]["code"], json!("LESS_JSON_MALFORMED"));

    let toml = dir.path().join("broken.toml");
    std::fs::write(&toml, "name = \"x\"\n[[agents]\n").expect("write");
    let output = lessrt(&["validate", &toml.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("TOML"), "{}", stderr(&output));
}

#[test]
fn kind_is_inferred_or_forced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pointer = write_doc(dir.path(), "p.json", &json!({"type": "repo", "ref": "src/lib.rs", "span": "L1-L2"}));
    let pointer = pointer.display().to_string();
    assert_eq!(lessrt(&["validate", &pointer]).status.code(), Some(0));
    // Forced to the wrong kind, the same file is an engram missing most of its fields.
    let output = lessrt(&["validate", "--kind", "engram", &pointer]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("LESS_SCHEMA_INVALID\t"));
    assert!(stdout(&output).contains("\t/claim\t"));

    let unknown = write_doc(dir.path(), "u.json", &json!({"hello": "world"}));
    let output = lessrt(&["validate", &unknown.display().to_string()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).starts_with("LESS_KIND_UNKNOWN\t"), "{}", stdout(&output));

    let output = lessrt(&["validate", "--kind", "novel", &pointer]);
    assert_eq!(output.status.code(), Some(2), "a bad flag is a usage error");
}

#[test]
fn tokens_agree_with_tiktoken() {
    for encoding in ["o200k_base", "cl100k_base"] {
        let output = lessrt_stdin(&["tokens", "--encoding", encoding], "hello world");
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stdout(&output).trim(), "2", "{encoding}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("t.txt");
    std::fs::write(&file, "hello world").expect("write");
    let output = lessrt(&["tokens", "--json", &file.display().to_string()]);
    let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(report, json!({"tokens": 2, "encoding": "o200k_base", "bytes": 11}));
    let output = lessrt(&["tokens", "--encoding", "p50k_base", &file.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn pointer_commands_refuse_bad_input() {
    let output = lessrt(&["pointer", "parse", "repo:../../etc/passwd"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("LESS_POINTER_INVALID"), "{}", stderr(&output));
    let output = lessrt(&["pointer", "format", r#"{"type":"url","ref":"https://x.org","span":"L1"}"#]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("LESS_POINTER_INVALID\t/span"), "{}", stderr(&output));
    let output = lessrt(&["pointer", "format", "{oops"]);
    assert_eq!(output.status.code(), Some(2));
    let output =
        lessrt_stdin(&["pointer", "format", "-"], r#"{"type":"sam","ref":"decision:publish-domain@2026-01-08"}"#);
    assert_eq!(stdout(&output).trim(), "sam:decision:publish-domain@2026-01-08");
}

/// `lessrt … | head`: a reader that stops early ends lessrt quietly (status 141, as after SIGPIPE), not with a panic.
#[test]
fn a_closed_stdout_ends_the_process_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Far more output than a pipe buffers, so the write fails however late the read end is closed.
    let messages: Vec<Value> =
        (0..5_000).map(|i| json!({"role": "user", "content": format!("message {i}: {}", "x".repeat(100))})).collect();
    let file = write_doc(dir.path(), "long.json", &Value::Array(messages));
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["compact", &file.display().to_string(), "--engine", "hot-tail", "--hot-tail", "5000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lessrt starts");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("lessrt ends");
    assert_eq!(output.status.code(), Some(141), "{}", stderr(&output));
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
}

/// The sub-commands `lessrt [PATH…] --help` lists.
fn subcommands(path: &[&str]) -> Vec<String> {
    let output = lessrt(&[path, &["--help"]].concat());
    assert_eq!(output.status.code(), Some(0), "{path:?}: {}", stderr(&output));
    let text = stdout(&output);
    let Some((_, listing)) = text.split_once("Commands:\n") else { return Vec::new() };
    listing
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command, found by walking `--help` from the top, documents the exit codes (the same text everywhere).
#[test]
fn every_help_documents_the_exit_codes() {
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = pending.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let help = stdout(&lessrt(&[&args[..], &["--help"]].concat()));
        assert!(help.contains("Usage: lessrt"), "{path:?}: {help}");
        for line in [
            "Exit status:",
            "  0  yes: done, valid, found, every check passed",
            "  1  no: a check failed, nothing was found, a document is invalid",
            "  2  could not run: bad arguments, unreadable input or store, missing model or data",
        ] {
            assert!(help.contains(line), "{path:?} --help lacks {line:?}:\n{help}");
        }
        for sub in subcommands(&args) {
            let mut next = path.clone();
            next.push(sub);
            pending.push(next);
        }
        seen += 1;
    }
    assert!(seen >= 30, "every command and sub-command: {seen}");
    // `memory query` reads; it takes no `--as` (only writes are recorded under a name).
    let query = stdout(&lessrt(&["memory", "query", "--help"]));
    assert!(!query.contains("--as"), "{query}");
    assert!(stdout(&lessrt(&["memory", "put", "--help"])).contains("--as <NAME>"));
}

/// `lessrt --version` names the commit it was built from (`unknown` outside a git checkout).
#[test]
fn the_version_names_the_commit() {
    let output = lessrt(&["--version"]);
    assert_eq!(output.status.code(), Some(0));
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(stdout(&output).trim(), format!("lessrt {} ({head})", env!("CARGO_PKG_VERSION")));
    // Sub-commands say the same.
    assert_eq!(
        stdout(&lessrt(&["memory", "--version"])).trim(),
        format!("lessrt-memory {} ({head})", env!("CARGO_PKG_VERSION"))
    );
}

/// `lessrt completions SHELL` prints a completion script that knows the commands and their options.
#[test]
fn completions_know_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let output = lessrt(&["completions", shell]);
        assert_eq!(output.status.code(), Some(0), "{shell}: {}", stderr(&output));
        let script = stdout(&output);
        for word in ["lessrt", "memory", "ingest", "runs", "project", "output", "step-timeout"] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
    assert_eq!(lessrt(&["completions", "cmd.exe"]).status.code(), Some(2));
}

#[test]
fn schemas_and_error_codes_are_printable() {
    let output = lessrt(&["schema", "engram"]);
    let schema: Value = serde_json::from_str(&stdout(&output)).expect("schema is JSON");
    assert_eq!(schema["properties"]["claim"]["maxLength"], json!(500));
    let listing = stdout(&lessrt(&["schema"]));
    assert!(listing.lines().any(|l| l == "shared_brief_micro.v0.1.json"));
    assert_eq!(lessrt(&["schema", "nonsense"]).status.code(), Some(2));

    let output = lessrt(&["schema", "engram", "--json"]);
    assert_eq!(output.status.code(), Some(0), "schema accepts --json");
    assert_eq!(serde_json::from_str::<Value>(&stdout(&output)).expect("one line of JSON"), schema);
    let listed: Value = serde_json::from_str(&stdout(&lessrt(&["schema", "--json"]))).expect("JSON");
    assert!(listed.as_array().is_some_and(|files| files.contains(&json!("engram.v0.1.json"))), "{listed}");
}

/// `lessrt errors` lists every code lessrt reports: the contract's and the model providers' (`LLM_*`).
#[test]
fn errors_lists_every_code_llm_ones_included() {
    let output = lessrt(&["errors", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let codes: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let codes = codes.as_array().expect("array");
    let listed: Vec<&str> = codes.iter().filter_map(|c| c["code"].as_str()).collect();
    for code in less_runtime::ErrorCode::ALL {
        assert!(listed.contains(&code.as_str()), "{code} missing");
    }
    for (code, _) in less_agents::provider::LlmError::CODES {
        assert!(listed.contains(&code), "{code} missing");
    }
    assert_eq!(listed.len(), less_runtime::ErrorCode::ALL.len() + less_agents::provider::LlmError::CODES.len());
    assert!(codes.iter().all(|c| c["instruction"].as_str().is_some_and(|s| s.len() > 20)));
    let unreachable = codes.iter().find(|c| c["code"] == json!("LLM_UNREACHABLE")).expect("LLM_UNREACHABLE");
    assert_eq!(unreachable["source"], json!("model"));
    let text = stdout(&lessrt(&["errors"]));
    assert!(text.lines().any(|l| l.starts_with("LLM_TIMEOUT\t")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("LESS_SCOPE_DENIED\t")), "{text}");
}

/// One output convention: `--json` prints JSON on stdout; `-o FILE` writes the JSON to FILE (`-o -` is stdout)
/// and leaves the text output alone; `--json -` is no file name (a usage error, no file named `-`).
#[test]
fn json_prints_and_output_writes_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("t.txt");
    std::fs::write(&text, "hello world").expect("write");
    let text = text.display().to_string();
    let expected = json!({"tokens": 2, "encoding": "o200k_base", "bytes": 11});
    let printed = lessrt(&["tokens", &text, "--json"]);
    assert_eq!(serde_json::from_str::<Value>(&stdout(&printed)).expect("JSON"), expected);
    let file = dir.path().join("out/tokens.json");
    let written = lessrt(&["tokens", &text, "-o", &file.display().to_string()]);
    assert_eq!(written.status.code(), Some(0), "{}", stderr(&written));
    assert_eq!(stdout(&written).trim(), "2", "the text output is unchanged");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("written")).expect("JSON");
    assert_eq!(saved, expected);
    let dash = lessrt(&["tokens", &text, "--output", "-"]);
    assert_eq!(serde_json::from_str::<Value>(&stdout(&dash)).expect("JSON"), expected);
    // Every command that has a result takes both.
    for args in [
        &["pointer", "parse", "repo:src/lib.rs#L1-L2"][..],
        &["pointer", "format", r#"{"type":"repo","ref":"a.rs"}"#],
        &["errors"],
        &["schema"],
        &["eval", "context"],
    ] {
        let file = dir.path().join("any.json");
        let _ = std::fs::remove_file(&file);
        let output = lessrt(&[args, &["--json", "-o", &file.display().to_string()]].concat());
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
        let printed: Value = serde_json::from_str(&stdout(&output)).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("written")).expect("JSON");
        assert_eq!(printed, saved, "{args:?}");
    }
    // `--json` takes no value: `--json -` leaves `-` as a stray argument, refused before anything runs.
    let scenario = repo_path("scenarios/uc1-refactor.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", &scenario, "--json", "-"])
        .current_dir(dir.path())
        .output()
        .expect("lessrt runs");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(!dir.path().join("-").exists(), "no file named -");
}

/// Exit codes by what the answer is, whatever the command: 0 yes, 1 no, 2 could not run.
#[test]
fn exit_codes_mean_yes_no_and_could_not_run_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store").display().to_string();
    let engram = write_doc(dir.path(), "e.json", &example_engram()).display().to_string();
    let mut invalid = example_engram();
    invalid["confidence"] = json!(2);
    let invalid = write_doc(dir.path(), "bad.json", &invalid).display().to_string();
    let missing = dir.path().join("missing.json").display().to_string();
    let nowhere = dir.path().join("no-store").display().to_string();
    let put = lessrt(&["memory", "put", &engram, "--store", &store, "--project", "p"]);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    let cases: [(&[&str], i32); 17] = [
        // yes
        (&["validate", &engram], 0),
        (&["pointer", "parse", "repo:src/lib.rs#L1-L2"], 0),
        (&["memory", "query", "budget enforcer gateway", "--store", &store], 0),
        (&["memory", "get", "eg_budget_split", "--store", &store], 0),
        // no: invalid, nothing found, not hot
        (&["validate", &invalid], 1),
        (&["pointer", "parse", "repo:../x"], 1),
        (&["memory", "query", "zebra crossing", "--store", &store], 1),
        (&["memory", "get", "eg_nothing", "--store", &store], 1),
        (&["memory", "put", &invalid, "--store", &store, "--project", "p"], 1),
        (&["dag", "impact", "repo:src/nowhere.rs#L1-L2", "--store", &store], 1),
        // could not run: bad arguments, unreadable input, no store, missing data
        (&["tokens", "--encoding", "p50k_base", &engram], 2),
        (&["validate", &missing], 2),
        (&["memory", "query", "anything", "--store", &nowhere], 2),
        (&["dag", "show", "--store", &nowhere], 2),
        (&["memory", "get", "eg_budget_split", "--store", &store, "--project", "q"], 2),
        (&["eval", "locomo"], 2),
        (&["schema", "nonsense"], 2),
    ];
    for (args, code) in cases {
        let output = lessrt(args);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {}{}", stdout(&output), stderr(&output));
        if code == 2 {
            assert!(!stderr(&output).trim().is_empty(), "{args:?} says why it could not run");
        }
    }
    let output = lessrt(&["memory", "query", "anything", "--store", &nowhere]);
    assert!(stderr(&output).contains("no store in") && stderr(&output).contains("--store"), "{}", stderr(&output));
    // With `--json`, a "no" is still one JSON document on stdout.
    let output = lessrt(&["memory", "put", &invalid, "--store", &store, "--project", "p", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_eq!((report["invalid"].as_u64(), report["results"][0]["status"].as_str()), (Some(1), Some("invalid")));
    assert_eq!(report["results"][0]["path"], json!("/confidence"), "{report}");
    let scenario = dir.path().join("bad.toml");
    std::fs::write(&scenario, "name = \"x\"\n[[agents]]\nid = \"a\"\nrole = \"a\"\nparent = \"nobody\"\n")
        .expect("write");
    let output = lessrt(&["run", &scenario.display().to_string(), "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_eq!(report["valid"], json!(false), "{report}");
}

/// A missing `--project` is never a silent empty answer: the store's only project is used and said, several are
/// named and the command stops; a refused read says which project holds the engram.
#[test]
fn a_missing_project_is_the_only_one_said_or_an_error_naming_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store").display().to_string();
    let mut cache = example_engram();
    cache["id"] = json!("eg_cache");
    cache["claim"] = json!("The billing cache keeps invoices for ten minutes before it asks the ledger again.");
    let file = write_doc(dir.path(), "cache.json", &cache).display().to_string();
    // A write needs a project when the store is empty.
    let output = lessrt(&["memory", "put", &file, "--store", &store]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--project"), "{}", stderr(&output));
    let output = lessrt(&["memory", "put", &file, "--store", &store, "--project", "shop"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // One project: used, and said on stderr.
    let output = lessrt(&["memory", "query", "cache", "--store", &store]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("eg_cache\t"), "{}", stdout(&output));
    assert!(stderr(&output).contains("project \"shop\" (the only one"), "{}", stderr(&output));
    let quiet = lessrt(&["memory", "query", "cache", "--store", &store, "--quiet"]);
    assert_eq!((quiet.status.code(), stderr(&quiet).as_str()), (Some(0), ""));
    // Two projects: the command stops and names them.
    let mut other = example_engram();
    other["id"] = json!("eg_other");
    let other = write_doc(dir.path(), "other.json", &other).display().to_string();
    let output = lessrt(&["memory", "put", &other, "--store", &store, "--project", "warehouse"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = lessrt(&["memory", "query", "cache", "--store", &store]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("\"shop\", \"warehouse\"") && stderr(&output).contains("--project"));
    // A refused read names the project that holds the engram.
    let output = lessrt(&["memory", "get", "eg_cache", "--store", &store, "--project", "warehouse"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("LESS_SCOPE_DENIED") && err.contains("project \"shop\""), "{err}");
    let output = lessrt(&["memory", "get", "eg_cache", "--store", &store, "--project", "warehouse", "--json"]);
    let refusal: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(refusal["error"]["projects"], json!(["shop"]));
    // The archive follows the same rule.
    let transcript = write_doc(dir.path(), "t.json", &json!([{"role": "user", "content": "the cache is warm"}]));
    let ingest = lessrt(&["memory", "ingest", &transcript.display().to_string(), "--session", "s", "--store", &store]);
    assert_eq!(ingest.status.code(), Some(2), "an empty archive needs --project: {}", stderr(&ingest));
}

/// `memory get` text output is for people: one field per line, RFC 3339 times; JSON keeps the numbers too.
#[test]
fn memory_get_shows_human_dates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store").display().to_string();
    let file = write_doc(dir.path(), "e.json", &example_engram()).display().to_string();
    assert_eq!(lessrt(&["memory", "put", &file, "--store", &store, "--project", "p"]).status.code(), Some(0));
    let output = lessrt(&["memory", "get", "eg_budget_split", "--store", &store, "--quiet"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let stored = text.lines().find(|l| l.starts_with("stored ")).expect("a stored line");
    let when = stored.split_whitespace().nth(1).expect("a time");
    assert!(when.len() == 20 && when.ends_with('Z') && when.as_bytes()[10] == b'T', "{stored}");
    assert!(text.lines().any(|l| l.starts_with("claim ")), "{text}");
    let json: Value =
        serde_json::from_str(&stdout(&lessrt(&["memory", "get", "eg_budget_split", "--store", &store, "--json"])))
            .expect("JSON");
    assert!(json["stored_at"].is_i64() && json["stored_at_utc"].as_str() == Some(when), "{json}");
}

/// UC1 through the whole actor tree, both modes: every check passes, LESS is a small fraction of verbatim, and the
/// ledger and audit log are written; `lessrt runs show` prints the run again, byte for byte, from its directory.
#[test]
fn uc1_runs_in_both_modes_and_less_is_a_small_fraction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("report.json");
    let out = dir.path().join("runs");
    let scenario = repo_path("scenarios/uc1-refactor.toml");
    let output = lessrt(&["run", &scenario, "-o", &json.display().to_string(), "--out", &out.display().to_string()]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let printed = stdout(&output);
    assert!(printed.contains("== uc1-refactor (less mode") && printed.contains("PASS"), "{printed}");
    // The README's excerpt of this trace is what a run prints: every line of it, in order ("…" skips lines).
    let readme = std::fs::read_to_string(repo_path("README.md")).expect("README");
    let excerpt = readme.split("```text\n").nth(1).and_then(|b| b.split("```").next()).expect("the README's trace");
    let mut rest = printed.as_str();
    for line in excerpt.lines().filter(|l| l.trim() != "…") {
        let at = rest.find(line).unwrap_or_else(|| panic!("README's trace line not printed (in order): {line:?}"));
        rest = &rest[at + line.len()..];
    }
    // The scripted panic of the reviewer is the agent's, caught and answered by a restart: one line, no Rust
    // panic message.
    assert!(stderr(&output).contains("agent reviewer panicked (its gateway restarts it)"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("RUST_BACKTRACE"), "{}", stderr(&output));
    let reports: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("JSON");
    let run_dir = out.join("uc1-refactor").display().to_string();
    let shown = lessrt(&["runs", "show", &run_dir]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert_eq!(stdout(&shown), printed, "runs show prints what run printed");
    let shown: Value = serde_json::from_str(&stdout(&lessrt(&["runs", "show", &run_dir, "--json"]))).expect("JSON");
    assert_eq!(shown, reports, "runs show --json is the run's report");
    let less_dir = out.join("uc1-refactor/less");
    let one: Value =
        serde_json::from_str(&stdout(&lessrt(&["runs", "show", &less_dir.display().to_string(), "--json"])))
            .expect("JSON");
    assert_eq!(one, reports[0], "one mode's directory: its report");
    // A run cut short is incomplete, never shown as a finished one.
    let cut = dir.path().join("cut/less");
    std::fs::create_dir_all(&cut).expect("mkdir");
    let ledger = std::fs::read_to_string(less_dir.join("ledger.jsonl")).expect("ledger");
    std::fs::write(cut.join("ledger.jsonl"), &ledger[..ledger.len() / 2]).expect("write");
    std::fs::copy(less_dir.join("report.json"), cut.join("report.json")).expect("copy");
    let output = lessrt(&["runs", "show", &cut.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("incomplete run"), "{}", stderr(&output));
    std::fs::write(cut.join("ledger.jsonl"), &ledger).expect("write");
    std::fs::remove_file(cut.join("report.json")).expect("remove");
    let output = lessrt(&["runs", "show", &cut.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("incomplete run") && stderr(&output).contains("no report.json"));
    assert!(stdout(&output).contains("step 0:"), "the trace it has is shown: {}", stdout(&output));
    let output = lessrt(&["runs", "show", &dir.path().display().to_string()]);
    assert_eq!(output.status.code(), Some(2), "not a run directory");
    assert!(stderr(&output).contains("holds no run"), "{}", stderr(&output));
    let (less, verbatim) = (&reports[0], &reports[1]);
    assert_eq!((less["mode"].as_str(), verbatim["mode"].as_str()), (Some("less"), Some("verbatim")));
    let total = |r: &Value| r["totals"]["inline_tokens"]["total"].as_u64().expect("total");
    // Against the fair baseline (spans pasted, not whole files) UC1's LESS inline total is about 15% of verbatim.
    assert!(total(less) * 4 < total(verbatim), "LESS {} vs verbatim {}", total(less), total(verbatim));
    assert!(less["totals"]["inline_tokens"]["p95"].as_u64().expect("p95") <= 800);
    assert_eq!(less["roles"]["reviewer"]["restarts"], json!(1));
    assert!(less["checks"].as_array().expect("checks").iter().all(|c| c["status"] == json!("pass")), "{less}");
    // The baseline enforces no budget and meters no deref: those checks do not apply to it, and say so.
    let status_of = |name: &str| {
        let checks = verbatim["checks"].as_array().expect("checks");
        checks.iter().find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name))).map(|c| c["status"].clone())
    };
    assert_eq!(status_of("no turn over budget"), Some(json!("n/a")), "{verbatim}");
    assert_eq!(status_of("derefs of programmer"), Some(json!("n/a")), "{verbatim}");
    assert_eq!(status_of("risk engram cites"), Some(json!("pass")), "{verbatim}");
    let audit = std::fs::read_to_string(out.join("uc1-refactor/less/audit.log")).expect("audit.log");
    assert!(audit.lines().any(|l| l.contains("\treject\t") && l.contains("LESS_BUDGET_EXCEEDED")), "{audit}");
    assert!(audit.lines().any(|l| l.contains("\tderef-denied\t") && l.contains("LESS_DEREF_DENIED")));
    assert!(out.join("uc1-refactor/verbatim/ledger.jsonl").exists());
    // Every delivered message was archived, and the run's session summarized, citing its messages.
    let store = out.join("uc1-refactor/less/memory").display().to_string();
    let show = lessrt(&["dag", "show", "--store", &store, "--json"]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let dag: Value = serde_json::from_str(&stdout(&show)).expect("JSON");
    let delivered = less["totals"]["turns"].as_u64().expect("turns");
    assert!(dag["archive"]["messages"].as_u64().expect("messages") >= delivered.min(5), "{dag}");
    assert_eq!(dag["archive"]["session_nodes"], json!(1), "{dag}");
    let node = &dag["nodes"][0];
    assert!(node["token_count"].as_u64() < node["input_tokens"].as_u64(), "{node}");
    assert!(node["content"].as_str().expect("content").contains("(sam:msg:m-"), "{node}");
}

/// The lossless memory from the command line: ingest transcripts, build the DAG, look at it, expand it, ask it,
/// trace impact, and backfill what the gate skipped.
#[test]
fn dag_commands_ingest_build_show_expand_query_impact_and_backfill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store").display().to_string();
    let topics = ["billing", "ledger", "gateway", "search"];
    for (i, topic) in topics.iter().enumerate() {
        let mut lines = Vec::new();
        for turn in 0..8 {
            let content = match turn {
                0 => format!("We decided the {topic} keeps its state in postgres, replicated per region."),
                1 => format!("The {topic} must never call the payment provider without an idempotency key."),
                2 => format!("TODO: write the {topic} migration runbook before the staging rollout."),
                3 if i == 0 => "Marta mentioned that her cat goes by Pixel and naps on the rack server.".to_owned(),
                3 => format!("Running `cargo test -p {topic}` failed with a timeout in the {topic} store."),
                4 => format!("Fixed the timeout in the {topic}; the suite passes now on staging."),
                5 => format!("The {topic} service listens on port 70{i}{turn} behind the gateway."),
                6 => format!("Let's switch the {topic} cache to redis instead of memcached next sprint."),
                _ => format!("The {topic} architecture keeps one writer per shard and replicas for reads."),
            };
            let role = if turn % 2 == 0 { "user" } else { "assistant" };
            lines.push(json!({"role": role, "content": content, "at": 1_767_603_600 + i * 86_400 + turn * 60}));
        }
        let file = dir.path().join(format!("s{i}.jsonl"));
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&file, text.join("\n")).expect("write");
        let file = file.display().to_string();
        let args = [
            "memory",
            "ingest",
            &file,
            "--session",
            &format!("s{i}"),
            "--project",
            "shop",
            "--store",
            &store,
            "--json",
        ];
        let output = lessrt(&args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let ingested: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
        assert_eq!((ingested["stored"].as_u64(), ingested["duplicates"].as_u64()), (Some(8), Some(0)));
        // The same transcript again stores nothing.
        let again: Value = serde_json::from_str(&stdout(&lessrt(&args))).expect("JSON");
        assert_eq!((again["stored"].as_u64(), again["duplicates"].as_u64()), (Some(0), Some(8)));
    }
    let trivial = r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello! How can I help?"},{"role":"user","content":"thanks, bye"}]"#;
    let output =
        lessrt_stdin(&["memory", "ingest", "-", "--session", "chat", "--project", "shop", "--store", &store], trivial);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // Bad transcripts: a stable code, where, and what to send instead; exit 2, nothing stored.
    let bad = lessrt_stdin(&["memory", "ingest", "-", "--session", "x", "--store", &store], "{\"role\": \"user\"\n");
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("LESS_JSON_MALFORMED") && stderr(&bad).contains("line 1"), "{}", stderr(&bad));
    let bad =
        lessrt_stdin(&["memory", "ingest", "-", "--session", "x", "--store", &store], r#"[{"content": "no role"}]"#);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("LESS_TRANSCRIPT_INVALID") && stderr(&bad).contains("/0/role"), "{}", stderr(&bad));

    let output = lessrt(&["dag", "build", "--arc-every", "2", "--epoch-every", "2", "--store", &store, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let built: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(built["built"]["sessions"], json!(4), "{built}");
    assert_eq!(built["built"]["skipped"], json!(1), "{built}");
    assert_eq!((built["built"]["arcs"].as_u64(), built["built"]["epochs"].as_u64()), (Some(2), Some(1)));
    assert_eq!(built["archive"]["messages"], json!(35));

    let tree = stdout(&lessrt(&["dag", "show", "--store", &store]));
    assert!(tree.contains("project \"shop\""), "{tree}");
    let epoch_line = tree.lines().find(|l| l.trim_start().starts_with("E-")).expect("an epoch");
    let epoch = epoch_line.split_whitespace().next().expect("id").to_owned();
    assert_eq!(tree.lines().filter(|l| l.trim_start().starts_with("A-")).count(), 2, "{tree}");
    assert_eq!(tree.lines().filter(|l| l.trim_start().starts_with("S-")).count(), 4, "{tree}");

    let expanded: Value =
        serde_json::from_str(&stdout(&lessrt(&["dag", "expand", &epoch, "--store", &store, "--json"]))).expect("JSON");
    assert_eq!(expanded["children"].as_array().expect("children").len(), 2);
    assert_eq!(expanded["children"][0]["kind"], json!("arc"));
    let missing = lessrt(&["dag", "expand", "S-000000000000", "--store", &store]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("dag show"), "{}", stderr(&missing));

    let output = lessrt(&[
        "dag",
        "query",
        "What is the name of Marta's cat?",
        "--max-tokens",
        "80",
        "--store",
        &store,
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answer: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert!(answer["tokens"].as_u64().expect("tokens") <= 80);
    assert!(answer["text"].as_str().expect("text").contains("Pixel"), "{answer}");
    let cited = answer["citations"][0]["message"].as_str().expect("message").to_owned();
    assert_eq!(answer["citations"][0]["path"].as_array().expect("path").len(), 3, "epoch > arc > session: {answer}");

    let output = lessrt(&["dag", "impact", &format!("sam:msg:{cited}"), "--store", &store, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let impact: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let kinds: Vec<&str> =
        impact["items"].as_array().expect("items").iter().filter_map(|i| i["kind"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"session"), "{impact}");
    let bad = lessrt(&["dag", "impact", "repo:../etc/passwd", "--store", &store]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("LESS_POINTER_INVALID"), "{}", stderr(&bad));

    let log = stdout(&lessrt(&["dag", "log", "--kind", "session_skipped", "--store", &store]));
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("\"session\":\"chat\""), "{log}");
    let when = log.split('\t').next().expect("a time");
    assert!(when.len() == 20 && when.ends_with('Z') && when.as_bytes()[10] == b'T', "RFC 3339 UTC: {log}");
    let bogus = lessrt(&["dag", "log", "--kind", "bogus", "--store", &store]);
    assert_eq!(bogus.status.code(), Some(2));
    assert!(
        stderr(&bogus).contains("session_skipped") && stderr(&bogus).contains("summarize_failed"),
        "{}",
        stderr(&bogus)
    );
    let none = lessrt(&["dag", "log", "--kind", "summarize_failed", "--store", &store]);
    assert_eq!((none.status.code(), stdout(&none).as_str()), (Some(1), ""), "nothing found");
    let shown = stdout(&lessrt(&["dag", "show", "--store", &store]));
    assert!(shown.starts_with("35 messages in 5 sessions; 4 session nodes, 2 arcs, 1 epoch;"), "{shown}");
    let backfill: Value =
        serde_json::from_str(&stdout(&lessrt(&["dag", "backfill", "--store", &store, "--json"]))).expect("JSON");
    assert_eq!(backfill["built"]["backfilled"], json!(1), "{backfill}");
    assert_eq!(backfill["archive"]["session_nodes"], json!(5));
}

/// `dag build --summarizer llm` with no model behind the URL: every node still gets a summary (level 3, deterministic
/// truncation), the build says so, and the log names the model's error; misplaced model options are usage errors.
#[test]
fn dag_build_with_an_unreachable_model_falls_back_to_truncation_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store").display().to_string();
    let transcript: Vec<Value> = (0..6)
        .map(|i| {
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                        "content": format!("Step {i}: we decided the ledger shard {i} must move to region eu-{i}.")})
        })
        .collect();
    let file = write_doc(dir.path(), "t.json", &Value::Array(transcript));
    let file = file.display().to_string();
    let ingest = lessrt(&["memory", "ingest", &file, "--session", "s1", "--project", "p", "--store", &store]);
    assert!(ingest.status.success(), "{}", stderr(&ingest));

    let misplaced = lessrt(&["dag", "build", "--llm-model", "x", "--store", &store]);
    assert_eq!(misplaced.status.code(), Some(2), "{}", stderr(&misplaced));
    assert!(stderr(&misplaced).contains("need `--summarizer llm`"), "{}", stderr(&misplaced));
    let missing = dir.path().join("no-recording").display().to_string();
    let no_recording = lessrt(&["dag", "build", "--summarizer", "llm", "--replay", &missing, "--store", &store]);
    assert!(!no_recording.status.success());
    assert!(stderr(&no_recording).contains("no such recording directory"), "{}", stderr(&no_recording));

    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let build = lessrt(&["dag", "build", "--summarizer", "llm", "--llm-base-url", &url, "--store", &store, "--json"]);
    assert!(build.status.success(), "{}", stderr(&build));
    let report: Value = serde_json::from_str(&stdout(&build)).expect("JSON");
    assert_eq!((&report["built"]["sessions"], &report["built"]["truncated"]), (&json!(1), &json!(1)), "{report}");
    assert!(stderr(&build).contains("fell back to deterministic truncation"), "{}", stderr(&build));
    let shown: Value =
        serde_json::from_str(&stdout(&lessrt(&["dag", "show", "--store", &store, "--json"]))).expect("JSON");
    let node = &shown["nodes"][0];
    assert_eq!((&node["level"], &node["confidence"]), (&json!(3), &json!(0.3)), "{node}");
    assert_eq!(node["summarizer"], json!("truncation"), "{node}");
    let log = stdout(&lessrt(&["dag", "log", "--kind", "escalated", "--store", &store]));
    assert!(log.contains("LLM_UNREACHABLE"), "{log}");
    let node_id = node["id"].as_str().expect("id");
    let expanded = stdout(&lessrt(&["dag", "expand", node_id, "--store", &store]));
    assert!(expanded.contains("eu-5"), "the raw messages stay reachable: {expanded}");
}

#[test]
fn run_refuses_bad_scenarios_with_the_documented_exit_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.toml");
    assert_eq!(lessrt(&["run", &missing.display().to_string()]).status.code(), Some(2));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\n[[agents]]\nid = \"a\"\nrole = \"a\"\n[[steps]]\naction = \"deref\"\nagent = \"a\"\npointers = [\"repo:../x\"]\nreason = \"r\"\nuse = \"u\"\n").expect("write");
    let output = lessrt(&["run", &bad.display().to_string()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).starts_with("LESS_POINTER_INVALID\t"), "{}", stdout(&output));
    let llm = dir.path().join("llm.toml");
    std::fs::write(&llm, "name = \"x\"\n[[agents]]\nid = \"a\"\nrole = \"a\"\nkind = \"llm\"\n").expect("write");
    let missing = dir.path().join("no-recording");
    let output = lessrt(&["run", &llm.display().to_string(), "--replay", &missing.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("LLM_RECORDING_IO"), "{}", stderr(&output));
    let bad_llm = dir.path().join("bad-llm.toml");
    let text =
        "name = \"x\"\n[[agents]]\nid = \"a\"\nrole = \"a\"\nkind = \"llm\"\n[agents.llm]\nbase_url = \"ftp://x\"\n";
    std::fs::write(&bad_llm, text).expect("write");
    let output = lessrt(&["run", &bad_llm.display().to_string()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("/agents/0/llm/base_url"), "{}", stdout(&output));
}

/// A put acknowledged on stdout survives the process being killed right after the acknowledgement.
#[test]
fn an_acknowledged_put_survives_a_kill() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["memory", "put", "-", "--store", &store.display().to_string(), "--project", "p"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("lessrt starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut acks = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    writeln!(stdin, "{}", example_engram()).expect("write engram");
    stdin.flush().expect("flush");
    let mut ack = String::new();
    acks.read_line(&mut ack).expect("acknowledgement");
    assert_eq!(ack.trim_end(), "stored\teg_budget_split");
    // SIGKILL while the process still waits for more input: no clean shutdown, no checkpoint.
    child.kill().expect("kill");
    child.wait().expect("reaped");
    let output = lessrt(&[
        "memory",
        "get",
        "eg_budget_split",
        "--store",
        &store.display().to_string(),
        "--project",
        "p",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let got: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(got["engram"]["claim"], example_engram()["claim"]);
    assert_eq!(got["tier"], json!("hot"));
    assert!(got["engram"]["hash_keys"].as_array().is_some_and(|k| !k.is_empty()));
    // Killed before its index commit: the next open sees the index behind the store and rebuilds it.
    let store_dir = store.display().to_string();
    let output =
        lessrt(&["memory", "query", "budget enforcer gateway", "--store", &store_dir, "--project", "p", "--json"]);
    let recall: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(recall["hits"][0]["id"], json!("eg_budget_split"), "{recall}");
    // Another project may not read it: refused with the stable code and what to do instead, exit 2.
    let output =
        lessrt(&["memory", "get", "eg_budget_split", "--store", &store.display().to_string(), "--project", "q"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("LESS_SCOPE_DENIED"), "{}", stderr(&output));
    assert!(stderr(&output).contains("instead:"), "{}", stderr(&output));
}

/// `lessrt eval locomo` on a small file in LoCoMo's format: recall computed as LoCoMo's evaluation does, a floor
/// that fails below it (exit 1), and the data's source named when the file is missing (exit 2). The benchmark on
/// the real development split, with its floors, runs in CI (`scripts/ci.sh`), where the data is.
#[test]
fn eval_locomo_scores_holds_floors_and_says_where_the_data_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let turn = |dia: &str, speaker: &str, text: &str| json!({"speaker": speaker, "dia_id": dia, "text": text});
    let sample = json!([{
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana", "speaker_b": "Ben",
            "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [
                turn("D1:1", "Ana", "I adopted a grey kitten called Pixel last week."),
                turn("D1:2", "Ben", "Lovely! I am training for the Lisbon marathon in October."),
                turn("D1:3", "Ana", "My sister moved to Porto for a job at a bakery."),
                turn("D1:4", "Ben", "I repaired my old bicycle with a new chain."),
            ],
        },
        "qa": [
            {"question": "What is the name of Ana's kitten?", "evidence": ["D1:1"], "category": 4},
            {"question": "Which marathon is Ben training for?", "evidence": ["D1:2"], "category": 4},
            {"question": "Where did Ana's sister move?", "evidence": ["D1:3"], "category": 4},
        ],
    }]);
    let file = write_doc(dir.path(), "locomo.json", &sample).display().to_string();
    let eval =
        |extra: &[&str]| lessrt(&[&["eval", "locomo", &file, "--stages", "hash", "--k", "1,10"][..], extra].concat());
    let output = eval(&["--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON report");
    assert_eq!(report["questions"], json!(3));
    assert_eq!(report["overall"]["recall@10"], json!(100.0), "four turns: every evidence is in the top 10");
    assert!(report["overall"]["recall@1"].as_f64().expect("recall@1") >= 66.6, "{report}");
    assert_eq!(eval(&["--min-recall-at-10", "100", "--quiet"]).status.code(), Some(0));
    let below = eval(&["--min-recall-at-10", "100.1"]);
    assert_eq!(below.status.code(), Some(1), "below the floor");
    assert!(stderr(&below).contains("below the floor"), "{}", stderr(&below));
    for args in [&["eval", "locomo"][..], &["eval", "locomo", "/nonexistent/locomo10.json"]] {
        let output = lessrt(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr(&output).contains("github.com/snap-research/locomo"), "{}", stderr(&output));
    }
    let missing = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["eval", "locomo", &file, "--stages", "rerank"])
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .output()
        .expect("run lessrt");
    assert_eq!(missing.status.code(), Some(2), "the rerank alone without its model is refused, never faked");
    assert!(stderr(&missing).contains("provision-model.sh"), "{}", stderr(&missing));
    // Cross-validation needs two conversations; with two, each is scored with the weights the other chose.
    let output = eval(&["--cv", "--quiet"]);
    assert_eq!(output.status.code(), Some(2), "one conversation cannot be cross-validated");
    assert!(stderr(&output).contains("at least two conversations"), "{}", stderr(&output));
    let mut second = sample[0].clone();
    second["sample_id"] = json!("conv-y");
    let two = write_doc(dir.path(), "locomo-two.json", &json!([sample[0].clone(), second])).display().to_string();
    let output = lessrt(&["eval", "locomo", &two, "--stages", "hash", "--k", "1,10", "--cv", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON report");
    assert_eq!(report["questions"], json!(6), "every question scored once, in its own fold");
    let folds = report["cv_folds"].as_array().expect("folds");
    assert_eq!(folds.iter().map(|f| f["held_out"].as_str().unwrap_or("")).collect::<Vec<_>>(), ["conv-x", "conv-y"]);
    assert_eq!(report["overall"]["recall@10"], json!(100.0), "{report}");
}

/// Progress bars go to a terminal only: under a pseudo-terminal (`script`, util-linux) `eval locomo` and `dag
/// build` draw theirs on stderr; `--quiet`, or stderr that is a pipe, shows none of it.
#[test]
fn progress_shows_on_a_terminal_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sample = json!([{"sample_id": "c", "conversation": {"session_1": [
        {"speaker": "A", "dia_id": "D1:1", "text": "I adopted a kitten called Pixel."}]},
        "qa": [{"question": "What is the kitten called?", "evidence": ["D1:1"], "category": 4}]}]);
    let file = write_doc(dir.path(), "locomo.json", &sample).display().to_string();
    let store = dir.path().join("store").display().to_string();
    let transcript =
        write_doc(dir.path(), "t.json", &json!([{"role": "user", "content": "We decided to ship on Monday."}]));
    let ingest = lessrt(&[
        "memory",
        "ingest",
        &transcript.display().to_string(),
        "--session",
        "s",
        "--project",
        "p",
        "--store",
        &store,
    ]);
    assert_eq!(ingest.status.code(), Some(0), "{}", stderr(&ingest));
    let lessrt_bin = env!("CARGO_BIN_EXE_lessrt");
    let on_a_terminal = |args: &str| -> String {
        let output = Command::new("script")
            .args(["-qec", &format!("{lessrt_bin} {args}"), "/dev/null"])
            .output()
            .expect("`script` (util-linux) gives the command a terminal");
        assert!(output.status.success(), "{args}: {}", stdout(&output));
        stdout(&output)
    };
    let eval = format!("eval locomo {file} --stages hash");
    assert!(on_a_terminal(&eval).contains("LoCoMo questions"), "a bar on a terminal");
    assert!(!on_a_terminal(&format!("{eval} --quiet")).contains("LoCoMo questions"), "none with --quiet");
    let piped = lessrt(&["eval", "locomo", &file, "--stages", "hash"]);
    assert!(!stderr(&piped).contains("LoCoMo questions"), "none on a pipe: {}", stderr(&piped));
    assert!(on_a_terminal(&format!("dag build --no-gate --store {store}")).contains("summarizing sessions"));
}

/// `dag impact` finds the raw messages that cite a source (or an overlapping span), as docs/memory.md's workflow
/// does: ingest a transcript that cites a span, ask what depends on it.
#[test]
fn dag_impact_finds_raw_messages_citing_a_span() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store").display().to_string();
    let transcript = json!([
        {"role": "user", "content": "Can you check the capture path before we split billing out?"},
        {"role": "assistant", "content": "The capture is emitted in `repo:src/orders/service.rs#L140-L150`, so the move must keep it."},
        {"role": "user", "content": "And the refund path is in repo:src/orders/refund.rs#L10-L20."},
    ]);
    let file = write_doc(dir.path(), "review.json", &transcript).display().to_string();
    let ingest = lessrt(&["memory", "ingest", &file, "--session", "review", "--project", "shop", "--store", &store]);
    assert_eq!(ingest.status.code(), Some(0), "{}", stderr(&ingest));
    for span in ["repo:src/orders/service.rs#L140-L150", "repo:src/orders/service.rs#L145-L146"] {
        let output = lessrt(&["dag", "impact", span, "--store", &store, "--json"]);
        assert_eq!(output.status.code(), Some(0), "{span}: {}", stderr(&output));
        let impact: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
        let items = impact["items"].as_array().expect("items");
        assert_eq!(items.len(), 1, "{span}: the citing message only: {impact}");
        assert_eq!((items[0]["kind"].as_str(), items[0]["layer"].as_u64()), (Some("message"), Some(1)));
        assert!(items[0]["text"].as_str().expect("text").contains("capture is emitted"), "{impact}");
    }
    let text = stdout(&lessrt(&["dag", "impact", "repo:src/orders/service.rs#L140-L150", "--store", &store]));
    assert!(text.contains("layer 1: will break") && text.contains("message m-"), "{text}");
    let output = lessrt(&["dag", "impact", "repo:src/orders/service.rs#L1-L20", "--store", &store]);
    assert_eq!(output.status.code(), Some(1), "a span nothing cites: nothing depends on it");
    // After the build, the session summary depends on the message too (layer 2 through it, or layer 1 when it kept
    // the citation).
    assert_eq!(lessrt(&["dag", "build", "--no-gate", "--store", &store]).status.code(), Some(0));
    let output = lessrt(&["dag", "impact", "repo:src/orders/service.rs#L140-L150", "--store", &store, "--json"]);
    let impact: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let kinds: Vec<&str> =
        impact["items"].as_array().expect("items").iter().filter_map(|i| i["kind"].as_str()).collect();
    assert!(kinds.contains(&"message") && kinds.contains(&"session"), "{impact}");
}

/// A scripted panic is the agent's, caught by the runtime and answered by a restart: under `--quiet` nothing of it
/// reaches stderr; without, one line says so. A real crash would still print Rust's whole message.
#[test]
fn an_agents_panic_is_quiet_under_quiet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("panic.toml");
    let text = "name = \"panic\"\nworkspace = \".\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n[[agents]]\nid = \"dev\"\nrole = \"incident-response-programmer\"\nparent = \"lead\"\n[[steps]]\naction = \"panic\"\nagent = \"dev\"\n";
    std::fs::write(&scenario, text).expect("write");
    let out = dir.path().join("runs").display().to_string();
    let scenario = scenario.display().to_string();
    let quiet = lessrt(&["run", &scenario, "--mode", "less", "--out", &out, "--quiet"]);
    assert_eq!(quiet.status.code(), Some(0), "{}{}", stdout(&quiet), stderr(&quiet));
    assert_eq!(stderr(&quiet), "", "nothing on stderr under --quiet");
    let loud = lessrt(&["run", &scenario, "--mode", "less", "--out", &out]);
    assert_eq!(loud.status.code(), Some(0));
    assert_eq!(stderr(&loud).lines().count(), 1, "{}", stderr(&loud));
    assert!(stderr(&loud).contains("agent dev panicked (its gateway restarts it): scripted panic of dev"));
    assert!(stdout(&loud).contains("RESTART dev"), "the trace shows the restart: {}", stdout(&loud));
    // The per-role table stays aligned for a long role name: header, rows and total are one width.
    let printed = stdout(&loud);
    let table: Vec<&str> =
        printed.lines().skip_while(|l| !l.starts_with("role ")).take_while(|l| !l.trim().is_empty()).collect();
    assert_eq!(table.len(), 4, "header, lead, the long role, TOTAL: {printed}");
    assert!(table.iter().all(|l| l.chars().count() == table[0].chars().count()), "{table:#?}");
    assert!(table.iter().any(|l| l.starts_with("incident-response-programmer ")), "{table:#?}");
}

/// UC4 through the run's MemoryActor, twice into the same output directory (the project memory outlives a run):
/// report engrams are put as their senders, queries answered as the asker, the lead's promotion is visible from
/// another project, a child's promotion and a cross-project query are refused with LESS_SCOPE_DENIED.
#[test]
fn uc4_goes_through_the_memory_actor_in_both_modes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("runs");
    let scenario = repo_path("scenarios/uc4-shared-knowledge.toml");
    for attempt in 0..2 {
        let output = lessrt(&["run", &scenario, "--quiet", "--out", &out.display().to_string()]);
        assert_eq!(output.status.code(), Some(0), "run {attempt}: {}", stdout(&output));
    }
    for mode in ["less", "verbatim"] {
        let run_dir = out.join("uc4-shared-knowledge").join(mode);
        let ledger = std::fs::read_to_string(run_dir.join("ledger.jsonl")).expect("ledger.jsonl");
        let events: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
        let of = |name: &'static str| events.iter().filter(move |e| e["event"] == json!(name));
        assert!(of("memory_put").count() >= 7, "{mode}: report engrams are put into memory");
        assert!(of("memory_put").all(|e| e["code"].is_null()));
        let recalled: Vec<&Value> = of("query").filter(|e| e["code"].is_null()).collect();
        assert_eq!(recalled.len(), 3, "{mode}");
        assert!(recalled.iter().all(|e| e["returned"].as_array().is_some_and(|r| !r.is_empty())), "{mode}");
        let refused: Vec<&Value> = of("query").filter(|e| e["code"] == json!("LESS_SCOPE_DENIED")).collect();
        assert_eq!(refused.len(), 1, "{mode}: the query naming project billing");
        let promotions: Vec<&Value> = of("promote").collect();
        assert_eq!(promotions[0]["code"], json!("LESS_SCOPE_DENIED"), "{mode}: a child may not promote");
        let promoted = promotions[1]["id"].as_str().expect("the lead's promotion").to_owned();
        let audit = std::fs::read_to_string(run_dir.join("audit.log")).expect("audit.log");
        assert!(audit.lines().any(|l| l.contains("\tpromote-denied\t") && l.contains("LESS_SCOPE_DENIED")));
        // The run's memory is a store the CLI reads: the org engram from any project, the rest only from kelp.
        let store = run_dir.join("memory").display().to_string();
        let output = lessrt(&["memory", "get", &promoted, "--store", &store, "--project", "billing", "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let got: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
        assert_eq!((got["engram"]["scope"].as_str(), got["promoted_by"].as_str()), (Some("org"), Some("team-lead")));
        let project_only = of("memory_put")
            .map(|e| e["id"].as_str().expect("id").to_owned())
            .find(|id| *id != promoted)
            .expect("another engram");
        let output = lessrt(&["memory", "get", &project_only, "--store", &store, "--project", "billing"]);
        assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    }
}

/// The memory CLI: promotion above the floor, refusals with their code and what to do instead (exit 2), eviction to
/// cold, and cold engrams read by id and by `query --cold`.
#[test]
fn memory_cli_promotes_refuses_and_reads_cold_engrams() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store").display().to_string();
    let mut unsure = example_engram();
    unsure["id"] = json!("eg_unsure");
    unsure["claim"] = json!("The gateway might also enforce deref budgets.");
    unsure["confidence"] = json!(0.5);
    let docs = format!("{}\n{}\n", example_engram(), unsure);
    let output = lessrt_stdin(&["memory", "put", "-", "--store", &store, "--project", "p"], &docs);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let as_lead = ["--store", store.as_str(), "--project", "p", "--as", "lead"];
    let promote = |id: &str| lessrt(&[&["memory", "promote", id, "--to", "org"][..], &as_lead[..]].concat());
    let output = promote("eg_unsure");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("LESS_SCOPE_DENIED") && stderr(&output).contains("floor"), "{}", stderr(&output));
    assert!(stderr(&output).contains("instead:"), "{}", stderr(&output));
    let output = promote("eg_budget_split");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "eg_budget_split\torg");
    // Org engrams are read from another project; project ones are not.
    let get =
        |id: &str, project: &str| lessrt(&["memory", "get", id, "--store", &store, "--project", project, "--json"]);
    assert_eq!(get("eg_budget_split", "q").status.code(), Some(0));
    assert_eq!(get("eg_unsure", "q").status.code(), Some(2));
    // Evicted: out of normal recall, in a cold query, readable by id.
    let output = lessrt(&["memory", "evict", "eg_unsure", "--store", &store, "--project", "p"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let query = |extra: &[&str]| {
        let args =
            [&["memory", "query", "gateway deref budgets", "--store", &store, "--project", "p", "--json"][..], extra];
        let output = lessrt(&args.concat());
        let recall: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
        recall["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|h| (h["id"].clone(), h["tier"].clone()))
            .collect::<Vec<_>>()
    };
    assert!(!query(&[]).contains(&(json!("eg_unsure"), json!("hot"))));
    assert!(query(&["--cold"]).contains(&(json!("eg_unsure"), json!("cold"))), "{:?}", query(&["--cold"]));
    let cold: Value = serde_json::from_str(&stdout(&get("eg_unsure", "p"))).expect("JSON");
    assert_eq!((cold["tier"].as_str(), cold["cold_reason"].as_str()), (Some("cold"), Some("evicted")));
    // Bad input is exit 2 with the accepted values.
    let output = lessrt(&["memory", "promote", "eg_unsure", "--to", "galaxy", "--store", &store]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("run, project, org or global"), "{}", stderr(&output));
}

/// docs/index-search-ask.md's search quality tables are what `lessrt eval search` measures now, on the graded tasks
/// and on the development set (BM25 and the rerank: the embedding model must be provisioned), and the JSON report
/// agrees with them.
#[test]
fn the_readme_search_quality_table_is_a_fresh_measurement() {
    let readme = std::fs::read_to_string(repo_path("docs/index-search-ask.md")).expect("docs/index-search-ask.md");
    let dev = ["globset", "pyjwt", "walkdir"].map(|s| format!("scenarios/search-dev/{s}.toml"));
    for extra in [&[][..], &dev[..]] {
        let mut args = vec!["eval".to_owned(), "search".to_owned()];
        args.extend(extra.iter().cloned());
        search_table_matches(&args, &readme);
    }
    let json = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["eval", "search", "--json"])
        .output()
        .expect("lessrt runs");
    let doc: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(doc["tasks"], 46, "the 46 graded tasks of the shipped scenarios");
    let row = |stages: &str, split: &str| {
        doc["rows"].as_array().expect("rows").iter().find(|r| r["stages"] == stages && r["split"] == split).cloned()
    };
    let all = row("hash", "all").expect("the BM25 row");
    assert!(all["found"]["5"].as_u64() <= all["found"]["10"].as_u64(), "top 5 is a prefix of top 10: {all}");
}

/// Runs `lessrt <args>` (an `eval search`) and checks each row it prints against the row of `readme` with the same
/// stages, split and number of tasks.
fn search_table_matches(args: &[String], readme: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("lessrt runs");
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    // BM25 is exact; the rerank's cosines may differ in their last bits on another CPU, which can move a hit across a
    // cut-off: its rows may differ from the page by one task.
    let rows = |text: &str| -> Vec<(String, Vec<i64>)> {
        text.lines()
            .filter(|l| l.starts_with("| hash"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let counts = cells[4..cells.len() - 1]
                    .iter()
                    .map(|c| c.split(' ').next().and_then(|n| n.parse().ok()).expect("a count"))
                    .collect();
                (format!("{} {} {}", cells[1], cells[2], cells[3]), counts)
            })
            .collect()
    };
    let (fresh, documented) = (rows(&table), rows(readme));
    assert_eq!(fresh.len(), 6, "{table}");
    for (key, counts) in &fresh {
        let shown = documented.iter().find(|(k, _)| k == key).map(|(_, c)| c.clone());
        let shown = shown.unwrap_or_else(|| panic!("docs/index-search-ask.md has no row {key}:\n{table}"));
        let slack = if key.starts_with("hash+rerank") { 1 } else { 0 };
        let close = counts.iter().zip(&shown).all(|(a, b)| (a - b).abs() <= slack);
        assert!(close, "docs/index-search-ask.md's row {key} is {shown:?}, a fresh run measures {counts:?}:\n{table}");
    }
}

/// The documented figures of the harbor fixture's index (the `lessrt index` output in docs/index-search-ask.md and
/// the row of docs/performance.md) are what
/// `lessrt index` builds now.
#[test]
fn the_readme_index_figures_of_the_fixture_are_a_fresh_build() {
    let at = tempfile::tempdir().expect("index dir");
    let output = lessrt(&[
        "index",
        &repo_path("scenarios/fixtures/uc1-refactor"),
        "--index-dir",
        &at.path().display().to_string(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let doc: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let index = &doc["index"];
    assert_eq!(doc["refresh"]["rebuilt"], true);
    let readme = std::fs::read_to_string(repo_path("docs/index-search-ask.md")).expect("docs/index-search-ask.md");
    let holds = format!(
        "holds     {} files, {} chunks, {} lines, {} tokens, 0 embedded",
        index["files"], index["chunks"], index["lines"], index["tokens"]
    );
    assert!(readme.contains(&holds), "docs/index-search-ask.md's `lessrt index` example should say: {holds}");
    let thousands = |n: &Value| {
        let n = n.as_u64().expect("count").to_string();
        let mut out = String::new();
        for (i, c) in n.chars().enumerate() {
            if i > 0 && (n.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let row = format!(
        "the harbor fixture, {} files, {} lines, {} chunks",
        index["files"],
        thousands(&index["lines"]),
        thousands(&index["chunks"])
    );
    let performance = std::fs::read_to_string(repo_path("docs/performance.md")).expect("docs/performance.md");
    assert!(performance.contains(&row), "docs/performance.md's row should say: {row}");
}

/// A first own scenario's mistakes, caught by `validate` (and by `run` before anything starts) at the place they are
/// written: a pack keyed by an agent id, a pointer to a missing file, a glob and a directory where a pointer names a
/// file, and a span past a file's end.
#[test]
fn validate_resolves_every_pointer_and_refuses_packs_that_reach_nobody() {
    let dir = tempfile::tempdir().expect("tempdir");
    let example = std::fs::read_to_string(repo_path("schemas/examples/scenario.toml")).expect("example");
    std::fs::write(dir.path().join("budget.json"), (1..=17).map(|i| format!("{i}\n")).collect::<String>())
        .expect("a 17-line file");
    std::fs::create_dir(dir.path().join("pelican")).expect("a directory");
    // The programmer is renamed `pat`; its role stays `programmer`.
    let mut base = example.clone();
    for key in ["id", "agent", "to"] {
        base = base.replace(&format!("{key} = \"programmer\""), &format!("{key} = \"pat\""));
    }
    let pack = r#"packs = { programmer = ["repo:budget.json#L1-L9"] }"#;
    assert!(base.contains(pack) && base.contains(r#"to = "pat""#), "{base}");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(&scenario, base.replace(pack, r#"packs = { pat = ["repo:budget.json#L1-L9"] }"#)).expect("write");
    let output = lessrt(&["validate", "--json", scenario.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("one JSON report");
    let errors: Vec<(String, String, String)> = report["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            (
                e["code"].as_str().expect("text").into(),
                e["path"].as_str().expect("text").into(),
                e["message"].to_string(),
            )
        })
        .collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!((errors[0].0.as_str(), errors[0].1.as_str()), ("LESS_SCENARIO_INVALID", "/steps/0/packs/pat"));
    assert!(errors[0].2.contains("under `programmer`"), "{}", errors[0].2);

    // Keyed by the role, the pack's pointers are resolved: each bad one at its place, with what to do instead.
    let bad =
        r#"packs = { programmer = ["repo:pelican/**", "repo:pelican", "repo:gone.rs", "repo:budget.json#L12-L30"] }"#;
    std::fs::write(&scenario, base.replace(pack, bad)).expect("write");
    for command in
        [vec!["validate"], vec!["run", "--mode", "less", "--out", dir.path().join("runs").to_str().expect("utf-8")]]
    {
        let mut args = command.clone();
        args.push(scenario.to_str().expect("utf-8"));
        let output = lessrt(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {}{}", stdout(&output), stderr(&output));
        let lines: Vec<String> = stdout(&output).lines().map(str::to_owned).collect();
        let at = |path: &str| lines.iter().find(|l| l.contains(&format!("\t{path}\t"))).cloned().unwrap_or_default();
        assert_eq!(lines.len(), 4, "{args:?}: {lines:#?}");
        assert!(lines.iter().all(|l| l.starts_with("LESS_POINTER_UNRESOLVED\t")), "{lines:#?}");
        assert!(at("/steps/0/packs/programmer/0").contains("a pattern"), "{lines:#?}");
        assert!(at("/steps/0/packs/programmer/1").contains("a directory"), "{lines:#?}");
        assert!(at("/steps/0/packs/programmer/2").contains("gone.rs"), "{lines:#?}");
        assert!(at("/steps/0/packs/programmer/3").contains("it has 17 lines"), "{lines:#?}");
        assert!(!dir.path().join("runs").exists(), "nothing started");
    }
}

/// `--workspace DIR` aims a scenario at any directory, outside the scenario's own; its pointers resolve there.
#[test]
fn run_and_bench_take_the_workspace_from_the_command_line() {
    let scenario_dir = tempfile::tempdir().expect("tempdir");
    let checkout = tempfile::tempdir().expect("another directory");
    let scenario = scenario_dir.path().join("scenario.toml");
    std::fs::copy(repo_path("schemas/examples/scenario.toml"), &scenario).expect("copy the example");
    std::fs::copy(repo_path("schemas/examples/budget.json"), checkout.path().join("budget.json")).expect("copy");
    let (scenario, checkout) = (scenario.to_str().expect("utf-8"), checkout.path().to_str().expect("utf-8"));
    // Without it, the scenario's own directory lacks the file its pointers name.
    let own = lessrt(&["validate", scenario]);
    assert_eq!(own.status.code(), Some(1), "{}", stdout(&own));
    assert!(stdout(&own).contains("LESS_POINTER_UNRESOLVED\t"), "{}", stdout(&own));
    let out = scenario_dir.path().join("runs");
    let run =
        lessrt(&["run", scenario, "--mode", "less", "--workspace", checkout, "--out", out.to_str().expect("utf-8")]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    assert!(stdout(&run).contains("SOLVED inline-cap"), "{}", stdout(&run));
    let bench_out = scenario_dir.path().join("bench");
    let bench = lessrt(&[
        "bench",
        scenario,
        "--modes",
        "less",
        "--workspace",
        checkout,
        "--out",
        bench_out.to_str().expect("utf-8"),
    ]);
    assert_eq!(bench.status.code(), Some(0), "{}{}", stdout(&bench), stderr(&bench));
    // A directory that is not there is refused before anything starts.
    let missing =
        lessrt(&["run", scenario, "--workspace", "/nonexistent/checkout", "--out", out.to_str().expect("utf-8")]);
    assert_eq!(missing.status.code(), Some(2), "{}{}", stdout(&missing), stderr(&missing));
    assert!(stdout(&missing).contains("not a directory"), "{}", stdout(&missing));
}

/// `lessrt run … | head -1`: a reader that goes away ends the run quietly with the status a process killed by
/// SIGPIPE reports, never a panic in the actor that prints the trace.
#[test]
fn a_run_whose_reader_went_away_ends_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        // Paced, so that the trace's lines come from the ledger actor after the reader has gone.
        .args(["run", &repo_path("scenarios/uc1-refactor.toml"), "--mode", "less", "--pace", "300", "--out"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lessrt starts");
    // `head -1`: one line read, then the reader closes its end.
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().expect("stdout")), &mut first)
        .expect("a first line");
    assert!(first.starts_with("== uc1-refactor"), "{first}");
    let output = child.wait_with_output().expect("lessrt runs");
    assert_eq!(output.status.code(), Some(141), "{}", stderr(&output));
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
}

/// The top 10 of a question is the same whatever other k is asked beside it (`--k 10` against `--k 10,50` and
/// `--k 10,100`): the recall pool does not grow with the largest k. A conversation of 400 turns over a small
/// vocabulary, so that many turns share every question's words and the cut decides something (when the pool grew
/// with k, this file scored 87.5 at `--k 10` and 68.1 at `--k 10,50`).
#[test]
fn eval_locomo_reports_the_same_top_10_whatever_other_k_is_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    const WORDS: [&str; 16] = [
        "kitten", "marathon", "bakery", "bicycle", "garden", "violin", "camping", "museum", "painting", "recipe",
        "river", "concert", "puppy", "novel", "office", "lake",
    ];
    let word = |i: usize| WORDS[(i * 7 + i / 16) % WORDS.len()];
    let turns: Vec<Value> = (0..400)
        .map(|i| {
            let dia = format!("D{}:{}", i / 40 + 1, i % 40 + 1);
            let text =
                format!("I talked about the {} and the {} near the {}.", word(i), word(i * 3 + 1), word(i * 5 + 2));
            json!({"speaker": if i % 2 == 0 { "Ana" } else { "Ben" }, "dia_id": dia, "text": text})
        })
        .collect();
    let mut conversation = json!({"speaker_a": "Ana", "speaker_b": "Ben"});
    for (s, session) in turns.chunks(40).enumerate() {
        conversation[format!("session_{}_date_time", s + 1)] = json!("1:00 pm on 8 May, 2023");
        conversation[format!("session_{}", s + 1)] = json!(session);
    }
    // The evidence of a question: Ana's first three turns that name both of its words (its own turn when none does).
    let qa: Vec<Value> = (0..24)
        .map(|q| {
            let (a, b) = (word(q), word(q + 5));
            let mut evidence: Vec<&Value> = turns
                .iter()
                .filter(|t| t["speaker"] == "Ana")
                .filter(|t| t["text"].as_str().is_some_and(|text| text.contains(a) && text.contains(b)))
                .map(|t| &t["dia_id"])
                .take(3)
                .collect();
            if evidence.is_empty() {
                evidence.push(&turns[q]["dia_id"]);
            }
            json!({"question": format!("What did Ana say about the {a} and the {b}?"), "evidence": evidence,
                   "category": 1 + q % 4})
        })
        .collect();
    let file =
        write_doc(dir.path(), "locomo.json", &json!([{"sample_id": "conv-k", "conversation": conversation, "qa": qa}]))
            .display()
            .to_string();
    let top10 = |ks: &str, name: &str| {
        let questions = dir.path().join(name);
        let output = lessrt(&[
            "eval",
            "locomo",
            &file,
            "--stages",
            "hash",
            "--k",
            ks,
            "--json",
            "--questions",
            &questions.display().to_string(),
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let report: Value = serde_json::from_str(&stdout(&output)).expect("JSON report");
        let retrieved: Vec<Vec<String>> = std::fs::read_to_string(&questions)
            .expect("questions file")
            .lines()
            .map(|line| {
                let q: Value = serde_json::from_str(line).expect("a JSON line");
                q["retrieved"]
                    .as_array()
                    .expect("retrieved")
                    .iter()
                    .take(10)
                    .map(|d| d.as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .collect();
        assert_eq!(retrieved.len(), 24);
        (report["overall"]["recall@10"].clone(), report["strict"]["recall@10"].clone(), retrieved)
    };
    let alone = top10("10", "k10.jsonl");
    assert!(alone.2.iter().all(|hits| hits.len() == 10), "every question finds at least 10 turns sharing its words");
    assert!(alone.0.as_f64().is_some_and(|r| r > 50.0), "the evidence is within reach: {:?}", alone.0);
    assert_eq!(top10("10,50", "k50.jsonl"), alone, "--k 10,50 ranks the top 10 as --k 10 does");
    assert_eq!(top10("1,5,10,25,100", "k100.jsonl"), alone, "--k …,100 ranks the top 10 as --k 10 does");
}

/// `--otlp` takes an OTLP/HTTP URL: anything else stops before the command runs, with its code and an example.
#[test]
fn an_otlp_endpoint_that_is_not_a_url_is_refused() {
    let output = lessrt(&["--otlp", "127.0.0.1:4318", "errors"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("LESS_ARGUMENT_INVALID"), "{}", stderr(&output));
    assert!(stderr(&output).contains("http://127.0.0.1:4318"), "{}", stderr(&output));
}

/// `lessrt grade SCENARIO RUN` grades a run's ledger again with this build's grader: the same task report the run
/// wrote, as JSON or a table; the mode's directory and its ledger file alike; an unreadable run exits 2 with its code.
#[test]
fn grade_regrades_a_runs_ledger() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("runs");
    let scenario = repo_path("scenarios/review-lanternfish.toml");
    let ran = lessrt(&["run", &scenario, "--quiet", "--out", &out.display().to_string()]);
    assert_eq!(ran.status.code(), Some(0), "{}{}", stdout(&ran), stderr(&ran));
    let mode_dir = out.join("review-lanternfish/less");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(mode_dir.join("report.json")).expect("report")).expect("json");
    let graded = lessrt(&["grade", &scenario, &mode_dir.display().to_string(), "--json"]);
    assert_eq!(graded.status.code(), Some(0), "{}", stderr(&graded));
    let tasks: Value = serde_json::from_str(&stdout(&graded)).expect("a task report");
    assert_eq!(tasks, report["tasks"], "the grade the run wrote");
    assert_eq!(tasks["solved"], 8, "{tasks}");
    let ledger = mode_dir.join("ledger.jsonl").display().to_string();
    let table = lessrt(&["grade", &scenario, &ledger, "--mode", "less"]);
    assert_eq!(table.status.code(), Some(0));
    let text = stdout(&table);
    assert!(text.contains("refill-rule") && text.contains("8 of 8 tasks solved"), "{text}");
    let missing = lessrt(&["grade", &scenario, &dir.path().join("nowhere").display().to_string()]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("LESS_INPUT_UNREADABLE"), "{}", stderr(&missing));
}

/// `lessrt grade SCENARIO --claims FILE` grades bare answers, one verdict a line, their citations taken as read:
/// right and wrong answers to one task, a doc comment cited for code; bad lines exit 2 with their code.
#[test]
fn grade_judges_bare_claims() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = repo_path("scenarios/review-lanternfish.toml");
    let claims = dir.path().join("claims.jsonl");
    let lines = [
        json!({"task": "refill-rule", "claim": "TokenBucket::refill restarts the refill clock once the bucket is full.",
               "pointers": ["repo:src/bucket.rs#L60-L75"]}),
        json!({"task": "refill-rule", "claim": "ManualClock::advance restarts the refill clock when full.",
               "pointers": ["repo:src/bucket.rs#L60-L75"]}),
        json!({"task": "refill-rule", "claim": "TokenBucket::refill restarts the refill clock once the bucket is full.",
               "pointers": ["repo:src/bucket.rs#L60-L60"]}),
        json!({"task": "missing-key", "claim": "It answers 400.", "pointers": []}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&claims, text).expect("write claims");
    let claims = claims.display().to_string();
    let output = lessrt(&["grade", &scenario, "--claims", &claims, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let verdicts: Vec<Value> =
        stdout(&output).lines().map(|l| serde_json::from_str(l).expect("a verdict a line")).collect();
    let solved: Vec<bool> = verdicts.iter().map(|v| v["solved"].as_bool().expect("solved")).collect();
    assert_eq!(solved, vec![true, false, false, false], "{verdicts:?}");
    assert_eq!(verdicts[1]["failure"], "claim_misses", "{}", verdicts[1]);
    assert!(verdicts[2]["evidence"].as_str().expect("evidence").contains("comment lines"), "{}", verdicts[2]);
    assert_eq!(verdicts[3]["failure"], "read_not_cited", "{}", verdicts[3]);
    let table = lessrt(&["grade", &scenario, "--claims", &claims]);
    assert!(stdout(&table).starts_with("refill-rule\tsolved\t"), "{}", stdout(&table));
    for (line, code) in [
        ("{\"task\": \"nope\", \"claim\": \"x\"}", "LESS_ARGUMENT_INVALID"),
        ("{\"task\": ", "LESS_JSON_MALFORMED"),
        ("{\"task\": \"refill-rule\", \"claim\": \"x\", \"pointers\": [\"nope\"]}", "LESS_POINTER_INVALID"),
        ("{\"task\": \"refill-rule\"}", "LESS_SCHEMA_INVALID"),
    ] {
        let bad = dir.path().join("bad.jsonl");
        std::fs::write(&bad, format!("{line}\n")).expect("write");
        let output = lessrt(&["grade", &scenario, "--claims", &bad.display().to_string()]);
        assert_eq!(output.status.code(), Some(2), "{line}");
        assert!(stderr(&output).contains(code), "{line}: {}", stderr(&output));
    }
}
