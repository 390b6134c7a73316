//! `lessrt mcp` driven by a real MCP client: the official Python SDK (`mcp` from PyPI, installed by
//! `scripts/mcp-clients.sh` into a venv under the cache; never skipped: a missing install fails the test with the
//! command that installs it). The client script is `tests/mcp_client.py`: every tool called, refusals checked by code.
//! Also the protocol's bytes themselves, one JSON-RPC message a line over stdio: the tools' input schemas as
//! `tools/list` gives them, and `less_put_engram` as a host's model writes an engram.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

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
    assert_eq!(summary["tools"].as_array().map(Vec::len), Some(23), "{summary}");
    // docs/mcp.md's transcript shows this refusal: its numbers are what the server says.
    let refusal = summary["refusal"].as_str().expect("the refusal's text");
    let shown = refusal.split(" (").next().expect("its head");
    assert!(refusal.contains("(max_deref_tokens_total ") && refusal.contains("/40,"), "the limit it passed: {refusal}");
    assert_eq!(shown, "LESS_DEREF_DENIED: 1 pointer / 440 tokens exceed this turn's deref budget");
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/mcp.md")).expect("docs/mcp.md");
    assert!(doc.contains(shown), "docs/mcp.md's transcript shows `{shown}`");
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
    assert_eq!(summary["tools"].as_array().map(Vec::len), Some(23), "{summary}");
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

/// `lessrt mcp` over stdio, spoken to in raw JSON-RPC (one message a line) as the host's client `client`.
struct RawSession {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl RawSession {
    fn start(dir: &Path, client: &str) -> RawSession {
        let ws = workspace(dir);
        let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["mcp", "--store"])
            .arg(dir.join("store"))
            .arg("--workspace")
            .arg(&ws)
            .arg("--config")
            .arg(dir.join("desk.toml"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("lessrt mcp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut session = RawSession { child, stdin, stdout, next_id: 1 };
        let init = session.request(
            "initialize",
            serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": client, "version": "1.0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "lessrt", "{init}");
        session.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The response to a request (the server's notifications and requests in between are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).expect("read") > 0, "the server closed stdout");
            let message: Value = serde_json::from_str(&line).expect("stdout carries JSON-RPC alone");
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// A tool's result: `structuredContent`, or the refusal's text.
    fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        let response = self.request("tools/call", serde_json::json!({"name": tool, "arguments": arguments}));
        let result = &response["result"];
        if result["isError"] == true {
            Err(result["content"][0]["text"].as_str().unwrap_or_default().to_owned())
        } else {
            Ok(result["structuredContent"].clone())
        }
    }
}

impl Drop for RawSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every place under `schema` (at `path`) whose schema constrains nothing: `true`/`false`, `{}`, or words only.
fn empty_schemas(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Some(fields) = schema.as_object() else {
        out.push(format!("{path}: {schema}"));
        return;
    };
    let words = ["description", "title", "default", "examples", "$comment"];
    if fields.keys().all(|key| words.contains(&key.as_str())) {
        out.push(format!("{path}: {schema}"));
    }
    for key in ["properties", "$defs"] {
        for (name, inner) in fields.get(key).and_then(Value::as_object).into_iter().flatten() {
            empty_schemas(inner, &format!("{path}/{key}/{name}"), out);
        }
    }
    if let Some(items) = fields.get("items") {
        empty_schemas(items, &format!("{path}/items"), out);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for (index, inner) in fields.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            empty_schemas(inner, &format!("{path}/{key}/{index}"), out);
        }
    }
}

#[test]
fn every_tool_input_schema_spells_out_its_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut session = RawSession::start(dir.path(), "lead");
    let listed = session.request("tools/list", serde_json::json!({}));
    let tools = listed["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 23, "{listed}");
    let mut empty = Vec::new();
    let mut undescribed = Vec::new();
    for tool in tools {
        let name = tool["name"].as_str().expect("a name");
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{name}: {schema}");
        empty_schemas(schema, name, &mut empty);
        for (field, inner) in schema["properties"].as_object().expect("properties") {
            if inner["description"].as_str().is_none_or(str::is_empty) {
                undescribed.push(format!("{name}.{field}"));
            }
        }
    }
    assert!(empty.is_empty(), "fields whose schema says nothing: {empty:#?}");
    assert!(undescribed.is_empty(), "fields without a description: {undescribed:?}");
    // The engram a host's model writes: what the desk fills in is optional, pointers as text or objects.
    let put = tools.iter().find(|t| t["name"] == "less_put_engram").expect("less_put_engram");
    let engram = &put["inputSchema"]["properties"]["engram"];
    assert_eq!(engram["required"], serde_json::json!(["kind", "claim", "pointers"]), "{engram}");
    assert_eq!(engram["properties"]["claim"]["maxLength"], 500);
    assert_eq!(engram["properties"]["scope"]["enum"], serde_json::json!(["run", "project", "org", "global"]));
    let forms = engram["properties"]["pointers"]["items"]["anyOf"].as_array().expect("string or object");
    assert_eq!(forms.iter().map(|f| f["type"].clone()).collect::<Vec<_>>(), ["string", "object"]);
    assert!(engram["properties"]["provenance"].get("required").is_none(), "{engram}");
}

#[test]
fn a_put_without_id_or_provenance_is_completed_and_a_malformed_text_pointer_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut session = RawSession::start(dir.path(), "dev");
    let engram = serde_json::json!({
        "kind": "fact", "claim": "long.rs numbers its sixty functions f1 to f60.",
        "pointers": ["repo:long.rs#L1-L3", {"type": "repo", "ref": "short.rs"}],
    });
    let put = session.call("less_put_engram", serde_json::json!({"engram": engram})).expect("stored");
    let id = put["id"].as_str().expect("an id");
    assert!(id.starts_with("eg_") && id.len() == 19, "a content-derived id: {put}");
    assert_eq!(put["outcome"], "stored");
    let found = session
        .call("less_query_engrams", serde_json::json!({"query": "long.rs numbers its sixty functions", "k": 1}))
        .expect("recalled");
    let stored = &found["engrams"][0];
    assert_eq!(stored["id"], id, "{found}");
    assert_eq!(stored["provenance"]["created_by"], "dev", "{stored}");
    assert_eq!(stored["provenance"]["source"], "agent", "{stored}");
    assert!(stored["provenance"]["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{stored}");
    assert_eq!(stored["pointers"][0], serde_json::json!({"type": "repo", "ref": "long.rs", "span": "L1-L3"}));
    assert_eq!((stored["scope"].as_str(), stored["ttl"].as_str()), (Some("project"), Some("P7D")), "{stored}");
    // The same claim again: the same id.
    let again = session.call("less_put_engram", serde_json::json!({"engram": engram})).expect("again");
    assert_eq!((again["id"].as_str(), again["outcome"].as_str()), (Some(id), Some("duplicate")));
    let mut bad = engram.clone();
    bad["pointers"] = serde_json::json!(["long.rs#L1-L3"]);
    let refusal = session.call("less_put_engram", serde_json::json!({"engram": bad})).expect_err("refused");
    assert!(refusal.starts_with("LESS_POINTER_INVALID: ") && refusal.contains(" at /pointers/0 "), "{refusal}");
}
