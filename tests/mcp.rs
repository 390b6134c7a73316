//! `lessrt mcp` driven by a real MCP client: the official Python SDK (`mcp` from PyPI, installed by
//! `scripts/mcp-clients.sh` into a venv under the cache; never skipped: a missing install fails the test with the
//! command that installs it). The client script is `tests/mcp_client.py`: every tool called, refusals checked by code.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::cli::lessrt;

const CONFIG: &str = r#"project = "demo"
[budget]
max_deref_tokens_total = 40
[clients.lead]
role = "lead"
[clients.dev]
role = "dev"
parent = "lead"
[clients.other]
role = "dev"
project = "elsewhere"
"#;

/// The venv's python with the MCP SDK.
fn python() -> PathBuf {
    let cache = std::env::var_os("LESSRT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/lessrt"));
    let python = cache.join("mcp-venv/bin/python");
    assert!(
        python.is_file(),
        "the Python MCP client is not installed: run `bash scripts/mcp-clients.sh` once (it installs mcp from PyPI \
         into {})",
        python.display()
    );
    python
}

fn workspace(dir: &Path) -> PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    let long: String = (1..=60).map(|i| format!("fn f{i}() -> u32 {{ {i} }}\n")).collect();
    std::fs::write(ws.join("long.rs"), long).expect("write");
    std::fs::write(ws.join("short.rs"), "fn a() {}\n").expect("write");
    let log: String = (0..40).map(|i| format!("test suite::case_{i} ... ok PLANTED-{i}\n")).collect();
    std::fs::write(ws.join("report.txt"), log + "test result: ok. 40 passed; 0 failed\n").expect("write");
    std::fs::write(dir.join("desk.toml"), CONFIG).expect("write");
    ws
}

/// A session in the lossless memory of `store`, summarized, for the expand tools.
fn prepare_archive(dir: &Path, store: &Path) {
    let transcript = dir.join("session.json");
    let chat = serde_json::json!([
        {"role": "user", "content": "The staging proxy listens on port 8443 since the migration."},
        {"role": "assistant", "content": "Noted: staging proxy port is 8443; production stays on 443."},
        {"role": "user", "content": "We decided to keep the billing cache per region."},
        {"role": "assistant", "content": "Decision recorded: the billing cache stays per region."},
    ]);
    std::fs::write(&transcript, chat.to_string()).expect("write");
    let store_arg = store.to_string_lossy().into_owned();
    let ingest = lessrt(&[
        "memory",
        "ingest",
        &transcript.to_string_lossy(),
        "--session",
        "s1",
        "--project",
        "demo",
        "--store",
        &store_arg,
    ]);
    assert!(ingest.status.success(), "{}", String::from_utf8_lossy(&ingest.stderr));
    let build = lessrt(&["dag", "build", "--store", &store_arg]);
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
}

#[test]
fn the_python_sdk_calls_every_tool_over_stdio_and_the_rules_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = workspace(dir.path());
    let store = dir.path().join("store");
    prepare_archive(dir.path(), &store);
    let output = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py"))
        .args([env!("CARGO_BIN_EXE_lessrt").as_ref(), store.as_os_str(), ws.as_os_str()])
        .arg(dir.path().join("desk.toml"))
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the client's checks failed:\n{stderr}");
    let summary: Value = serde_json::from_slice(&output.stdout).expect("a JSON summary");
    assert_eq!(summary["tools"].as_array().map(Vec::len), Some(21), "{summary}");
    // The README's transcript shows this refusal: its numbers are what the server says.
    let refusal = summary["refusal"].as_str().expect("the refusal's text");
    let shown = refusal.split(" (tokens used").next().expect("its head");
    assert_eq!(shown, "LESS_DEREF_DENIED: 1 pointer / 440 tokens exceed this turn's deref budget");
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README");
    assert!(readme.contains(shown), "the README's MCP transcript shows `{shown}`");
    // The desk's ledger and audit log outlive the session.
    let audit = std::fs::read_to_string(store.join("desk-audit.log")).expect("audit log");
    assert!(
        audit.lines().any(|l| l.contains("\tdev\tdev\tless_deref\t") && l.ends_with("LESS_DEREF_DENIED")),
        "{audit}"
    );
    assert!(audit.lines().any(|l| l.contains("\tlead\tlead\tless_issue_grant\t")), "{audit}");
    let key = std::fs::metadata(store.join("desk.key")).expect("a grant key");
    assert_eq!(key.len(), 32);
    #[cfg(unix)]
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o077, 0, "the key is the owner's alone");
}

#[test]
fn the_python_sdk_calls_every_tool_over_streamable_http_on_loopback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = workspace(dir.path());
    let store = dir.path().join("store");
    prepare_archive(dir.path(), &store);
    let mut server = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["mcp", "--http", "127.0.0.1:0", "--store"])
        .arg(&store)
        .arg("--workspace")
        .arg(&ws)
        .arg("--config")
        .arg(dir.path().join("desk.toml"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("lessrt mcp --http starts");
    // The server says where it listens (port 0 picked one).
    let mut stderr = BufReader::new(server.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("a line on stderr");
    let url = line.trim().strip_prefix("lessrt mcp: serving ").map(str::to_owned);
    let output = url.as_ref().map(|url| {
        Command::new(python())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py"))
            .args(["--http", url])
            .output()
            .expect("python runs")
    });
    server.kill().expect("the server stops");
    server.wait().expect("reaped");
    let url = url.unwrap_or_else(|| panic!("the server did not say where it listens: {line}"));
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"), "{url}");
    let output = output.expect("the client ran");
    assert!(output.status.success(), "the client's checks failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("a JSON summary");
    assert_eq!(summary["tools"].as_array().map(Vec::len), Some(21), "{summary}");
}

#[test]
fn a_non_loopback_address_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let output = lessrt(&["mcp", "--http", "0.0.0.0:8080", "--store", &store.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("loopback"));
}

#[test]
fn a_bad_configuration_is_refused_before_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("desk.toml");
    std::fs::write(&config, "[clients.dev]\nparent = \"boss\"\n").expect("write");
    let store = dir.path().join("store");
    let output = lessrt(&["mcp", "--store", &store.to_string_lossy(), "--config", &config.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("LESS_ARGUMENT_INVALID") && stderr.contains("boss"), "{stderr}");
    assert!(output.stdout.is_empty(), "stdout is the protocol's alone");
}
