//! `lessrt mcp` driven by a real MCP client: the official Python SDK (`mcp` from PyPI, installed by
//! `scripts/mcp-clients.sh` into a venv under the cache; a missing install fails the test with the command that
//! installs it). The client script is `tests/mcp_client.py`: every tool called, refusals checked by code, over stdio
//! and over streamable HTTP on loopback.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::lessrt;
use crate::support::mcp::workspace;

/// The venv's python with the MCP SDK.
fn python() -> PathBuf {
    crate::venv_python("mcp-venv", "mcp-clients.sh")
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
    assert_eq!(summary["tools"].as_array().map(Vec::len), Some(29), "{summary}");
    // docs/mcp.md's transcript shows this refusal: its numbers are what the server says.
    let refusal = summary["refusal"].as_str().expect("the refusal's text");
    let shown = refusal.split(" (").next().expect("its head");
    assert!(refusal.contains(", tokens 4/40)"), "the turn's token limit: {refusal}");
    assert_eq!(shown, "LESS_DEREF_DENIED: 1 pointer / 440 tokens exceed this turn's deref budget");
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/mcp.md")).expect("docs/mcp.md");
    assert!(doc.contains(shown), "docs/mcp.md's transcript shows `{shown}`");
    // The desk's ledger and audit log outlive the session.
    let audit = std::fs::read_to_string(store.join("desk-audit.log")).expect("audit log");
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\tdev\tdev\tdemo/lead/dev\tless_deref\t") && l.ends_with("LESS_DEREF_DENIED")),
        "{audit}"
    );
    assert!(audit.lines().any(|l| l.contains("\tlead\tlead\tdemo/lead\tless_issue_grant\t")), "{audit}");
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
    assert_eq!(summary["tools"].as_array().map(Vec::len), Some(29), "{summary}");
}
