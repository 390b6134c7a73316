//! `lessrt mcp` over the protocol's bytes themselves, one JSON-RPC message a line over stdio: the tools' input schemas as
//! `tools/list` gives them, `less_put_engram` as a host's model writes an engram, the coordination ledger's claims
//! between clients and processes, and the skill pack loaded as a host loads it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

use crate::support::lessrt;
use crate::support::mcp::workspace;

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
    assert_eq!(tools.len(), 29, "{listed}");
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

/// Issue 39: a claim that overlaps another client's live claim is refused naming the holder, its task and expiry; a
/// disjoint one is granted; an override leaves a conflict record in the decision log, read back as Markdown; every
/// result and every audit line carries the caller's identity.
#[test]
fn claims_collide_between_clients_and_an_override_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut session = RawSession::start(dir.path(), "dev");
    let claimed = session
        .call("less_claim", serde_json::json!({"surfaces": ["src/run/**"], "task": "T-9: typed inbox"}))
        .expect("granted");
    assert_eq!(claimed["identity"], "demo/lead/dev", "{claimed}");
    assert_eq!((claimed["claim"]["status"].as_str(), claimed["claim"]["holder"].as_str()), (Some("live"), Some("dev")));
    let dev_claim = claimed["claim"]["claim_id"].as_str().expect("an id").to_owned();
    let as_lead = |args: Value| {
        let mut args = args;
        args["client_identity"] = "lead".into();
        args
    };
    let refusal = session
        .call("less_claim", as_lead(serde_json::json!({"surfaces": ["src/run/gateway.rs"], "task": "T-4: hotfix"})))
        .expect_err("collides");
    assert!(refusal.starts_with("LESS_CLAIM_CONFLICT: "), "{refusal}");
    for part in ["demo/lead/dev", "T-9: typed inbox", &dev_claim, "live until 20"] {
        assert!(refusal.contains(part), "{part} in {refusal}");
    }
    let disjoint = session
        .call("less_claim", as_lead(serde_json::json!({"surfaces": ["docs/**"], "task": "T-5: docs"})))
        .expect("disjoint: granted");
    assert_eq!(disjoint["identity"], "demo/lead");
    let listed = session.call("less_claims", serde_json::json!({})).expect("listed");
    assert_eq!(listed["claims"].as_array().map(Vec::len), Some(2), "{listed}");
    // Only the holder releases; the lead overrides with a reason instead.
    let not_held = session
        .call("less_release_claim", as_lead(serde_json::json!({"claim_id": dev_claim})))
        .expect_err("not the lead's");
    assert!(not_held.starts_with("LESS_CLAIM_NOT_HELD: "), "{not_held}");
    let taken = session
        .call(
            "less_claim",
            as_lead(serde_json::json!({"surfaces": ["src/run/gateway.rs"], "task": "T-4: hotfix",
                                        "override": "production is down"})),
        )
        .expect("override");
    let conflict = &taken["conflicts"][0];
    assert_eq!(
        (conflict["overriding"].as_str(), conflict["displaced"].as_str()),
        (Some("demo/lead"), Some("demo/lead/dev"))
    );
    assert_eq!(conflict["displaced_intent"], "T-9: typed inbox");
    let decided = session
        .call("less_decide", serde_json::json!({"title": "Hotfix first", "body": "The inbox waits a day."}))
        .expect("decided");
    assert_eq!(decided["decision"]["seq"], 2, "the override's entry is the first: {decided}");
    let log = session.call("less_decisions", serde_json::json!({"markdown": true})).expect("the log");
    assert_eq!(log["decisions"].as_array().map(Vec::len), Some(2), "{log}");
    assert_eq!(log["decisions"][0]["conflict_id"], conflict["conflict_id"]);
    let markdown = log["markdown"].as_str().expect("markdown");
    for part in ["# Decision log — demo", "demo/lead overrode claim", "production is down", "## 2. Hotfix first"] {
        assert!(markdown.contains(part), "{part} in:\n{markdown}");
    }
    let audit = std::fs::read_to_string(dir.path().join("store/desk-audit.log")).expect("audit log");
    assert!(audit.lines().any(|l| l.contains("\tdev\tdev\tdemo/lead/dev\tless_claim\t")), "{audit}");
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\tlead\tlead\tdemo/lead\tless_claim\t") && l.ends_with("LESS_CLAIM_CONFLICT")),
        "{audit}"
    );
}

/// Issue 39: two server processes on one store, each claiming the same 200 surfaces for a different client at once:
/// for every surface exactly one wins (one transaction per claim), and the loser is told who holds it.
#[test]
fn two_processes_racing_for_the_same_surfaces_never_both_win() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sessions = [RawSession::start(dir.path(), "dev"), RawSession::start(dir.path(), "lead")];
    const N: u64 = 200;
    // Every request of both first (each server works on several at once), then every answer.
    for i in 0..N {
        for session in &mut sessions {
            let arguments = serde_json::json!({"surfaces": [format!("race/{i}/**")], "task": format!("race {i}")});
            let request = serde_json::json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                                             "params": {"name": "less_claim", "arguments": arguments}});
            session.send(&request);
        }
    }
    let mut won = vec![Vec::new(); N as usize];
    for (who, session) in sessions.iter_mut().enumerate() {
        let mut seen = 0;
        while seen < N {
            let mut line = String::new();
            assert!(session.stdout.read_line(&mut line).expect("read") > 0, "the server closed stdout");
            let message: Value = serde_json::from_str(&line).expect("JSON-RPC");
            let Some(id) = message["id"].as_u64().filter(|id| (1000..1000 + N).contains(id)) else { continue };
            seen += 1;
            let result = &message["result"];
            if result["isError"] == true {
                let text = result["content"][0]["text"].as_str().unwrap_or_default();
                assert!(text.starts_with("LESS_CLAIM_CONFLICT: "), "{text}");
            } else {
                won[(id - 1000) as usize].push(who);
            }
        }
    }
    let doubles: Vec<usize> = (0..N as usize).filter(|i| won[*i].len() != 1).collect();
    assert!(
        doubles.is_empty(),
        "surfaces without exactly one winner: {doubles:?} ({:?})",
        doubles.first().map(|i| &won[*i])
    );
    let listed = sessions[0].call("less_claims", serde_json::json!({})).expect("listed");
    assert_eq!(listed["claims"].as_array().map(Vec::len), Some(N as usize));
}

/// Issue 39: `lessrt skill export` writes a pack a host can load: the front matter parses (name, description), the
/// manifest's command line starts the server, every tool the pack names is one the server lists with the same
/// schemas, and every shipped example satisfies its schema, checked by a JSON Schema validator given only the pack.
#[test]
fn the_skill_pack_loads_as_a_host_loads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pack = dir.path().join("less");
    let out = lessrt(&["skill", "export", &pack.to_string_lossy()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let skill = std::fs::read_to_string(pack.join("SKILL.md")).expect("SKILL.md");
    let front = skill.strip_prefix("---\n").and_then(|rest| rest.split_once("\n---\n")).expect("front matter").0;
    let mut fields = std::collections::BTreeMap::new();
    for line in front.lines() {
        let (key, value) = line.split_once(": ").expect("key: value");
        // A plain scalar may not hold `: `; a quoted one is JSON.
        let value = if value.starts_with('"') {
            serde_json::from_str::<String>(value).expect("a double-quoted scalar")
        } else {
            assert!(!value.contains(": ") && !value.starts_with(['[', '{', '&', '*', '!', '|', '>']), "{line}");
            value.to_owned()
        };
        fields.insert(key.to_owned(), value);
    }
    assert_eq!(fields.keys().collect::<Vec<_>>(), ["description", "name"]);
    assert_eq!(fields["name"], "less");
    assert!(fields["description"].len() > 80 && fields["description"].len() <= 1024, "{fields:?}");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(pack.join("manifest.json")).expect("manifest")).expect("JSON");
    let host: Value =
        serde_json::from_str(&std::fs::read_to_string(pack.join("mcp.json")).expect("mcp.json")).expect("JSON");
    assert_eq!(host["mcpServers"]["less"]["args"], manifest["mcp"]["args"]);
    assert_eq!(manifest["mcp"]["args"][0], "mcp");
    // The server the pack names, as its tools/list answers.
    let mut session = RawSession::start(dir.path(), "host");
    let listed = session.request("tools/list", serde_json::json!({}));
    let served: std::collections::BTreeMap<String, Value> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| (t["name"].as_str().expect("name").to_owned(), t.clone()))
        .collect();
    let packed = manifest["tools"].as_array().expect("tools");
    assert_eq!(packed.len(), served.len(), "the pack names every tool the server serves");
    for tool in packed {
        let name = tool["name"].as_str().expect("name");
        let serving = served.get(name).unwrap_or_else(|| panic!("the pack names {name}, which the server lacks"));
        let input: Value = serde_json::from_str(
            &std::fs::read_to_string(pack.join(tool["input_schema"].as_str().expect("file"))).expect("input schema"),
        )
        .expect("JSON");
        assert_eq!(input, serving["inputSchema"], "{name}");
    }
    let mentioned: std::collections::BTreeSet<&str> =
        skill.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("less_")).collect();
    assert!(mentioned.len() >= 10, "{mentioned:?}");
    for name in mentioned {
        assert!(served.contains_key(name), "SKILL.md names {name}, which the server lacks");
    }
    // Each example against its schema, with the pack's schemas as the only documents a reference may reach.
    let mut registry = jsonschema::Registry::new();
    let schemas = manifest["schemas"].as_array().expect("schemas");
    let mut documents = Vec::new();
    for entry in schemas {
        let file = entry["schema"].as_str().expect("file");
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(pack.join(file)).expect("schema")).expect("JSON");
        let uri = doc["$id"].as_str().expect("an $id").to_owned();
        documents.push((uri, doc));
    }
    for (uri, doc) in &documents {
        registry = registry.add(uri, doc).expect("a schema");
    }
    let registry = registry.prepare().expect("the registry");
    let mut checked = 0;
    for (entry, (_, schema)) in schemas.iter().zip(&documents) {
        let Some(example) = entry["example"].as_str() else { continue };
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(pack.join(example)).expect("example")).expect("JSON");
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .with_registry(&registry)
            .build(schema)
            .expect("a validator");
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{example}: {errors:?}");
        checked += 1;
    }
    assert!(checked >= 7, "an example for every document kind a host writes");
}
