//! `lessrt serve` and `lessrt run --serve`: the JSON API over HTTP (status codes, LESS codes on bad input, the
//! workspace confinement, redaction, nothing written), the live stream, and the page in a real browser (headless
//! chromium through chromedriver, `tests/browser.rs`): every panel of a UC1 run against its report and ledger, a
//! pointer opened by click and by keyboard, readable contrast, and the live view of a running scenario.
//!
//! Servers listen on 127.0.0.1 on a free port and are stopped by the tests. Screenshots of each panel go to
//! `$CARGO_TARGET_TMPDIR/serve-screenshots/`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::browser::Browser;

const UC1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/uc1-refactor.toml");
/// A review with eight graded tasks (scripted agents).
const LANTERNFISH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/review-lanternfish.toml");
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/fixtures/uc1-refactor");

/// A `lessrt` that serves (`serve` or `run --serve`), killed on drop; `addr` is what it said on stderr.
struct Server {
    child: Child,
    addr: String,
    /// The cookie the page is served with (`name=token`): the API answers only requests that carry it.
    cookie: String,
    /// What it printed on stderr after the address.
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Server {
    /// Starts `lessrt ARGS` and waits for the line naming its address.
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lessrt starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Held from here on, so a failure below still stops the process (on drop).
        let mut server = Server { child, addr: String::new(), cookie: String::new(), stderr: rx };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = server
                .stderr
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("lessrt {args:?} said nothing"));
            if let Some(at) = line.find("http://") {
                server.addr = line[at + 7..].split('/').next().unwrap_or_default().to_owned();
                server.cookie = page_cookie(&server.url("/"));
                return server;
            }
            assert!(Instant::now() < deadline, "lessrt {args:?} did not say where it listens");
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The cookie `GET url` sets (`name=value`), as a browser keeps it for the page's requests.
pub(crate) fn page_cookie(url: &str) -> String {
    let page = http().get(url).call().expect("the page");
    let set = page.headers().get("set-cookie").and_then(|v| v.to_str().ok()).expect("the page sets a cookie");
    set.split(';').next().unwrap_or_default().trim().to_owned()
}

pub(crate) fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into()
}

/// GET `path` with `query`: the status and the JSON body.
fn get(server: &Server, path: &str, query: &[(&str, &str)]) -> (u16, Value) {
    let mut request = http().get(server.url(path)).header("Cookie", &server.cookie);
    for (key, value) in query {
        request = request.query(*key, *value);
    }
    let mut response = request.call().expect("the server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("a body");
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}")))
}

/// UC1 run in both modes into `out` (`out/uc1-refactor/{less,verbatim}`).
fn run_uc1(out: &Path) -> PathBuf {
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", UC1, "--out", &out.to_string_lossy(), "-q"])
        .output()
        .expect("lessrt run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    out.join("uc1-refactor")
}

/// `scenario` run in both modes into `out` (`out/<name>/{less,verbatim}`).
fn run_both(scenario: &str, name: &str, out: &Path) -> PathBuf {
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", scenario, "--out", &out.to_string_lossy(), "-q"])
        .output()
        .expect("lessrt run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    out.join(name)
}

/// The ledger's lines as JSON.
fn ledger(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("ledger.jsonl"))
        .expect("ledger")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).expect("report")).expect("JSON")
}

/// Every delivered engram of a ledger, in order.
fn delivered_engrams(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == "delivered")
        .flat_map(|e| e["doc"]["engrams"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Lines `from..=to` of a fixture file.
fn fixture_lines(file: &str, from: usize, to: usize) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(FIXTURE).join(file)).expect("fixture");
    text.lines().skip(from - 1).take(to - from + 1).map(str::to_owned).collect()
}

/// The text form of a pointer object of an engram (`{type, ref, span}`).
fn pointer_text(p: &Value) -> String {
    let mut text = format!("{}:{}", p["type"].as_str().unwrap_or_default(), p["ref"].as_str().unwrap_or_default());
    if let Some(span) = p["span"].as_str() {
        text.push('#');
        text.push_str(span);
    }
    text
}

/// A fingerprint of every file below `dir`: path → bytes.
fn files_below(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("read_dir").map(Result::unwrap) {
            let path = entry.path();
            if entry.file_type().expect("type").is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    files
}

/// The API of a UC1 run, against what its report and ledger say.
#[test]
fn the_api_serves_a_uc1_run_as_its_ledger_and_report_have_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let less_dir = scenario_dir.join("less");
    let events = ledger(&less_dir);
    let report = report(&less_dir);
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);

    let (status, runs) = get(&server, "/api/runs", &[]);
    assert_eq!(status, 200);
    let ids: Vec<&str> = runs["runs"].as_array().expect("runs").iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["less", "verbatim"]);
    assert_eq!(runs["default"], "less");

    let (status, run) = get(&server, "/api/run", &[("run", "less")]);
    assert_eq!(status, 200);
    assert_eq!(run["finished"], true);
    assert_eq!(run["report"], report, "the report as report.json has it");
    let agents = run["agents"].as_array().expect("agents");
    let roles: Vec<&str> = agents.iter().filter_map(|a| a["role"].as_str()).collect();
    let mut reported: Vec<&str> = report["roles"].as_object().expect("roles").keys().map(String::as_str).collect();
    let mut sorted = roles.clone();
    sorted.sort_unstable();
    reported.sort_unstable();
    assert_eq!(sorted, reported, "every role of the report is in the hierarchy");
    let programmer = agents.iter().find(|a| a["id"] == "programmer").expect("programmer");
    assert_eq!(programmer["parent"], "manager");
    let last_delivered = events
        .iter()
        .rfind(|e| e["event"] == "delivered" && e["from"] == "programmer")
        .expect("the programmer delivered");
    let per_turn = report["roles"]["programmer"]["per_turn"].as_array().expect("per_turn");
    assert_eq!(programmer["meter"]["last_turn_tokens"], *per_turn.last().expect("a turn"));
    assert_eq!(programmer["meter"]["last_turn_cap"], last_delivered["max_tokens"]);
    assert_eq!(programmer["meter"]["refusals"], report["roles"]["programmer"]["rejections"]);
    assert_eq!(programmer["meter"]["resends"], report["roles"]["programmer"]["resends"]);
    let denied = events.iter().filter(|e| e["event"] == "deref" && e["agent"] == "programmer" && e["granted"] == false);
    assert_eq!(programmer["meter"]["denied_derefs"], json!(denied.count()));
    assert_eq!(run["counts"]["events"], json!(events.len()));

    let (status, all) = get(&server, "/api/events", &[]);
    assert_eq!(status, 200);
    assert_eq!(all["total"], json!(events.len()));
    assert_eq!(all["events"][3]["event"], events[3]["event"]);
    let (_, derefs) = get(&server, "/api/events", &[("event", "deref"), ("from", "2")]);
    assert!(derefs["events"].as_array().expect("events").iter().all(|e| e["event"] == "deref"));
    // `limit` cuts the list after `from` and `event`; `total` still counts every event.
    let (_, page) = get(&server, "/api/events", &[("from", "2"), ("limit", "3")]);
    let seqs: Vec<&Value> = page["events"].as_array().expect("events").iter().map(|e| &e["seq"]).collect();
    assert_eq!(seqs, [&json!(2), &json!(3), &json!(4)]);
    assert_eq!(page["total"], json!(events.len()));
    let (_, first_deref) = get(&server, "/api/timeline", &[("event", "deref"), ("limit", "1")]);
    let items = first_deref["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["event"], "deref");

    let engrams = delivered_engrams(&events);
    let (status, feed) = get(&server, "/api/engrams", &[]);
    assert_eq!(status, 200);
    let claims: Vec<&str> =
        feed["engrams"].as_array().expect("engrams").iter().filter_map(|e| e["claim"].as_str()).collect();
    let expected: Vec<&str> = engrams.iter().filter_map(|e| e["claim"].as_str()).collect();
    assert_eq!(claims, expected, "every engram, in delivery order");
    let (_, risks) = get(&server, "/api/engrams", &[("kind", "risk")]);
    let n_risks = engrams.iter().filter(|e| e["kind"] == "risk").count();
    assert_eq!(risks["engrams"].as_array().map(Vec::len), Some(n_risks));
    assert!(n_risks > 0);

    // A pointer an engram carries with its digest resolves to the same digest, with the span marked in its file.
    let risk = engrams.iter().find(|e| e["kind"] == "risk" && e["pointers"][0]["digest"].is_string()).expect("risk");
    let pointer = &risk["pointers"][0];
    let text = pointer_text(pointer);
    let (status, deref) = get(&server, "/api/deref", &[("pointer", &text)]);
    assert_eq!(status, 200, "{deref}");
    assert_eq!(deref["digest"], pointer["digest"]);
    assert!(deref["tokens"].as_u64().unwrap_or(0) > 0);
    let (from, to) = (
        deref["context"]["highlight"][0].as_u64().expect("from"),
        deref["context"]["highlight"][1].as_u64().expect("to"),
    );
    let span = pointer["span"].as_str().expect("span");
    assert_eq!(format!("L{from}-L{to}"), span, "the marked lines are the span");
    let file = pointer["ref"].as_str().expect("ref");
    let first = fixture_lines(file, from as usize, from as usize).remove(0);
    assert!(deref["content"].as_str().unwrap_or_default().starts_with(&first), "{}", deref["content"]);
    let (_, passed) =
        get(&server, "/api/deref", &[("pointer", &text), ("digest", pointer["digest"].as_str().unwrap_or_default())]);
    assert_eq!(passed["unchanged"], true);

    // The denied deref names the grant that covers it.
    let (_, timeline) = get(&server, "/api/timeline", &[("event", "deref")]);
    let denied =
        timeline["items"].as_array().expect("items").iter().find(|i| i["cover"].is_object()).expect("a denial");
    assert_eq!(denied["code"], "LESS_DEREF_DENIED");
    let grant = events.iter().find(|e| e["event"] == "grant_issued").expect("a grant");
    assert_eq!(denied["cover"]["covering"][0]["grant_id"], grant["grant_id"]);

    let (status, briefs) = get(&server, "/api/briefs", &[]);
    assert_eq!(status, 200);
    let n_briefs = events.iter().filter(|e| e["event"] == "delivered" && e["kind"] == "brief").count();
    assert_eq!(briefs["briefs"].as_array().map(Vec::len), Some(n_briefs));
    assert_eq!(briefs["grants"][0]["grant"]["mac"], "(kept by the gateway)", "a grant's MAC is never shown");

    let (status, dag) = get(&server, "/api/dag", &[]);
    assert_eq!(status, 200, "{dag}");
    let top = dag["nodes"][0]["id"].as_str().expect("a node").to_owned();
    let (status, node) = get(&server, "/api/dag", &[("node", &top)]);
    assert_eq!(status, 200);
    let n_delivered = events.iter().filter(|e| e["event"] == "delivered").count();
    assert_eq!(node["children"].as_array().map(Vec::len), Some(n_delivered), "the session's messages");
    let (status, answer) = get(&server, "/api/dag/query", &[("q", "event ordering of the capture")]);
    assert_eq!(status, 200, "{answer}");
    assert!(!answer["citations"].as_array().expect("citations").is_empty());

    let (status, compare) = get(&server, "/api/compare", &[]);
    assert_eq!(status, 200);
    let verbatim = self::report(&scenario_dir.join("verbatim"));
    let total = compare["comparisons"][0]["rows"].as_array().expect("rows").last().cloned().expect("TOTAL");
    assert_eq!(total["role"], "TOTAL");
    assert_eq!(total["less"], report["totals"]["inline_tokens"]["total"]);
    assert_eq!(total["baseline"], verbatim["totals"]["inline_tokens"]["total"]);

    let page = http().get(server.url("/")).call().expect("the page");
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.headers().get("content-security-policy").is_some());
}

/// Bad input is a 4xx with its LESS code and what to do instead; pointers never leave the workspace.
#[test]
fn bad_input_gets_a_4xx_with_its_code_and_nothing_leaves_the_workspace() {
    let tmp = tempfile::tempdir().expect("tmp");
    // A run directory by hand: its manifest names a workspace with a symlink and a hard link out of it.
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n// the key is password=Sup3rS3cretValue99 here\n")
        .expect("write");
    let outside = tmp.path().join("outside.txt");
    std::fs::write(&outside, "not for the page\n").expect("write");
    std::os::unix::fs::symlink(&outside, ws.join("src/link.rs")).expect("symlink");
    std::fs::hard_link(&outside, ws.join("src/hard.rs")).expect("hard link");
    let run = tmp.path().join("runs/demo/less");
    std::fs::create_dir_all(&run).expect("mkdir");
    let manifest = json!({"scenario": "demo", "mode": "less", "started_at": "2026-01-01T00:00:00Z",
        "scenario_file": null, "workspace": ws.canonicalize().expect("ws"), "tokenizer": "o200k_base",
        "agents": [{"id": "lead", "role": "lead", "parent": null, "kind": "scripted",
                    "budget": {"max_inline_tokens": 800, "max_engrams": 12, "max_inline_code": 0, "max_repo_spans": 3,
                               "max_artifact_sections": 2, "max_sam_items": 2, "max_deref_tokens_total": 1200}}]});
    std::fs::write(run.join("manifest.json"), manifest.to_string()).expect("write");
    let query = json!({"event": "query", "agent": "lead", "text": "where is api_key=sk-live-0123456789abcdefghij", "returned": [], "tokens": 3});
    std::fs::write(run.join("ledger.jsonl"), format!("{query}\n")).expect("write");
    let server = Server::start(&["serve", &tmp.path().join("runs").to_string_lossy(), "--addr", "127.0.0.1:0"]);

    let refused = |query: &[(&str, &str)], path: &str, status: u16, code: &str| {
        let (got, body) = get(&server, path, query);
        assert_eq!((got, body["code"].as_str().unwrap_or_default()), (status, code), "{path} {query:?}: {body}");
        assert!(!body["message"].as_str().unwrap_or_default().is_empty());
        assert!(!body["instead"].as_str().unwrap_or_default().is_empty());
        body
    };
    refused(&[("pointer", "repo:../outside.txt")], "/api/deref", 400, "LESS_POINTER_INVALID");
    refused(&[("pointer", "repo:/etc/hostname")], "/api/deref", 400, "LESS_POINTER_INVALID");
    refused(&[("pointer", "repo:src/%2e%2e/%2e%2e/outside.txt")], "/api/deref", 404, "LESS_POINTER_UNRESOLVED");
    let body = refused(&[("pointer", "repo:src/link.rs")], "/api/deref", 403, "LESS_POINTER_UNRESOLVED");
    assert!(!body.to_string().contains("not for the page"));
    let body = refused(&[("pointer", "repo:src/hard.rs")], "/api/deref", 404, "LESS_POINTER_UNRESOLVED");
    assert!(!body.to_string().contains("not for the page"));
    refused(&[("pointer", "repo:src/missing.rs")], "/api/deref", 404, "LESS_POINTER_UNRESOLVED");
    refused(&[("pointer", "url:https://example.invalid/")], "/api/deref", 404, "LESS_POINTER_UNRESOLVED");
    refused(&[("pointer", "no pointer")], "/api/deref", 400, "LESS_POINTER_INVALID");
    refused(&[], "/api/deref", 400, "LESS_POINTER_INVALID");
    refused(&[("run", "../../etc")], "/api/run", 404, "LESS_INPUT_UNREADABLE");
    refused(&[("kind", "gossip")], "/api/engrams", 400, "LESS_ARGUMENT_INVALID");
    refused(&[("scope", "everyone")], "/api/engrams", 400, "LESS_ARGUMENT_INVALID");
    refused(&[], "/api/dag/query", 400, "LESS_ARGUMENT_INVALID");
    refused(&[("q", "x"), ("max_tokens", "1")], "/api/dag/query", 400, "LESS_ARGUMENT_INVALID");
    refused(&[], "/api/dag", 404, "LESS_INPUT_UNREADABLE");
    refused(&[], "/etc/passwd", 404, "LESS_ARGUMENT_INVALID");
    refused(&[("from", "minus one")], "/api/events", 400, "LESS_ARGUMENT_INVALID");
    // A page whose host name was rebound to 127.0.0.1 gets nothing; nor does a write.
    let url = format!("{}?pointer=repo:src/lib.rs", server.url("/api/deref"));
    let mut rebound = http().get(&url).header("Host", "attacker.example:80").call().expect("answers");
    let body: Value = serde_json::from_str(&rebound.body_mut().read_to_string().expect("body")).expect("JSON");
    assert_eq!((rebound.status().as_u16(), body["code"].as_str()), (403, Some("LESS_ARGUMENT_INVALID")), "{body}");
    assert!(!body.to_string().contains("pub fn a"), "{body}");
    let mut posted = http().post(server.url("/api/run")).header("Cookie", &server.cookie).send("{}").expect("answers");
    let body: Value = serde_json::from_str(&posted.body_mut().read_to_string().expect("body")).expect("JSON");
    assert_eq!((posted.status().as_u16(), body["code"].as_str()), (405, Some("LESS_ARGUMENT_INVALID")), "{body}");

    // Secrets are redacted wherever they would show: a workspace file, a ledger line.
    let (status, deref) = get(&server, "/api/deref", &[("pointer", "repo:src/lib.rs")]);
    assert_eq!(status, 200, "{deref}");
    assert!(!deref.to_string().contains("Sup3rS3cretValue99"), "{deref}");
    assert!(deref["content"].as_str().unwrap_or_default().contains("credential_ref:credential:"));
    for path in ["/api/events", "/api/timeline"] {
        let (_, body) = get(&server, path, &[]);
        assert!(!body.to_string().contains("sk-live-0123456789"), "{path}: {body}");
    }
}

/// Serving changes nothing: every file of the run directory and its store is byte for byte what it was.
#[test]
fn the_server_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    // The message index's recall files gone (a store a run was killed in): a query catches up in memory, not on disk.
    let recall = scenario_dir.join("less/memory/archive-index/recall");
    assert!(recall.is_dir(), "{} holds the message index", recall.display());
    std::fs::remove_dir_all(&recall).expect("remove");
    let before = files_below(&scenario_dir);
    let fixture_before = files_below(Path::new(FIXTURE));
    {
        let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
        for (path, query) in [
            ("/api/runs", vec![]),
            ("/api/run", vec![]),
            ("/api/events", vec![]),
            ("/api/timeline", vec![]),
            ("/api/engrams", vec![("kind", "risk")]),
            ("/api/briefs", vec![]),
            ("/api/deref", vec![("pointer", "repo:src/orders/service.rs#L143-L165")]),
            ("/api/deref", vec![("pointer", "sam:msg:programmer-m11")]),
            ("/api/compare", vec![]),
            ("/api/dag", vec![]),
            ("/api/dag/query", vec![("q", "capture idempotent")]),
            ("/api/run", vec![("run", "verbatim")]),
            ("/api/wire", vec![("run", "verbatim")]),
            ("/", vec![("run", "verbatim")]),
        ] {
            if path == "/" {
                let page = http().get(server.url("/?run=verbatim")).call().expect("the page");
                assert_eq!(page.status().as_u16(), 200);
                continue;
            }
            let (status, body) = get(&server, path, &query);
            assert_eq!(status, 200, "{path}: {body}");
        }
    }
    let after = files_below(&scenario_dir);
    let changed: Vec<&PathBuf> =
        before.iter().filter(|(p, bytes)| after.get(*p) != Some(bytes)).map(|(p, _)| p).collect();
    let added: Vec<&PathBuf> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    assert!(changed.is_empty() && added.is_empty(), "changed: {changed:?}; added: {added:?}");
    assert_eq!(fixture_before, files_below(Path::new(FIXTURE)));
}

/// A non-loopback address is refused unless asked for.
#[test]
fn serving_beyond_loopback_must_be_asked_for() {
    let tmp = tempfile::tempdir().expect("tmp");
    for args in [vec!["serve", ".", "--addr", "0.0.0.0:0"], vec!["run", UC1, "--out", ".", "--serve", "0.0.0.0:0"]] {
        let output =
            Command::new(env!("CARGO_BIN_EXE_lessrt")).args(&args).current_dir(tmp.path()).output().expect("runs");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("LESS_ARGUMENT_INVALID") && stderr.contains("--allow-remote"), "{stderr}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt")).args(["serve", "no/such/dir"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("LESS_INPUT_UNREADABLE"));
}

/// The live stream tails `ledger.jsonl`: each appended line arrives as a `ledger` event in order, a truncated ledger
/// (a new run in the directory) as `reset`, the report as `report`. Prints the latency from append to arrival.
#[test]
fn the_live_stream_follows_the_ledger_as_it_is_written() {
    let tmp = tempfile::tempdir().expect("tmp");
    let recorded = run_uc1(&tmp.path().join("recorded"));
    let lines: Vec<String> = std::fs::read_to_string(recorded.join("less/ledger.jsonl"))
        .expect("ledger")
        .lines()
        .map(str::to_owned)
        .collect();
    let run = tmp.path().join("live/uc1-refactor/less");
    std::fs::create_dir_all(&run).expect("mkdir");
    std::fs::copy(recorded.join("less/manifest.json"), run.join("manifest.json")).expect("copy");
    std::fs::write(run.join("ledger.jsonl"), "").expect("write");
    let server = Server::start(&["serve", &tmp.path().join("live").to_string_lossy(), "--addr", "127.0.0.1:0"]);

    let response = http()
        .get(server.url("/api/stream"))
        .header("Cookie", &server.cookie)
        .query("run", "uc1-refactor/less")
        .call()
        .expect("stream");
    assert_eq!(response.status().as_u16(), 200);
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    let (tx, rx) = std::sync::mpsc::channel::<(String, String, Instant)>();
    std::thread::spawn(move || {
        let reader = BufReader::new(response.into_body().into_reader());
        let mut name = String::new();
        for line in reader.lines().map_while(Result::ok) {
            if let Some(event) = line.strip_prefix("event:") {
                name = event.trim().to_owned();
            } else if let Some(data) = line.strip_prefix("data:")
                && tx.send((name.clone(), data.trim().to_owned(), Instant::now())).is_err()
            {
                break;
            }
        }
    });
    let next =
        |what: &str| rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no {what} within 30 s"));
    let mut latencies = Vec::new();
    let append = |text: &str| {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().append(true).open(run.join("ledger.jsonl")).expect("open");
        file.write_all(text.as_bytes()).expect("append");
    };
    for (seq, line) in lines.iter().take(12).enumerate() {
        // Half a line first: nothing may arrive until the line is whole.
        let (head, tail) = line.split_at(line.len() / 2);
        append(head);
        std::thread::sleep(Duration::from_millis(150));
        assert!(rx.try_recv().is_err(), "a partial line was sent");
        let sent = Instant::now();
        append(&format!("{tail}\n"));
        let (name, data, at) = next("ledger event");
        latencies.push(at.duration_since(sent));
        assert_eq!(name, "ledger");
        let data: Value = serde_json::from_str(&data).expect("JSON");
        assert_eq!(data["seq"], json!(seq));
        let expected: Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(data["event"]["event"], expected["event"]);
        assert!(!data["text"].as_str().unwrap_or_default().is_empty() || expected["event"] == "step");
    }
    // A new run in the directory: the ledger starts again, and so does the stream.
    std::fs::write(run.join("ledger.jsonl"), "").expect("truncate");
    assert_eq!(next("reset").0, "reset");
    append(&format!("{}\n", lines[0]));
    let (name, data, _) = next("the new run's first event");
    assert_eq!(name, "ledger");
    assert_eq!(serde_json::from_str::<Value>(&data).expect("JSON")["seq"], 0);
    std::fs::copy(recorded.join("less/report.json"), run.join("report.json")).expect("copy");
    assert_eq!(next("report").0, "report");
    latencies.sort();
    eprintln!(
        "serve: SSE latency from a ledger line's append to its arrival: p50 {:?}, max {:?} (poll {:?})",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
        Duration::from_millis(100)
    );
    assert!(latencies[latencies.len() - 1] < Duration::from_secs(2));
}

/// Where the screenshots go.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-screenshots");
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// Waits until the page has loaded its run.
fn ready(browser: &Browser) {
    browser.wait_for("the page to load its run", "return document.body.getAttribute('data-ready') === 'true';", 30);
}

/// The WCAG contrast ratio of two CSS `rgb(…)` colours.
fn contrast(a: &str, b: &str) -> f64 {
    fn luminance(css: &str) -> f64 {
        let inner = css.trim_start_matches("rgba(").trim_start_matches("rgb(").trim_end_matches(')');
        let parts: Vec<f64> = inner.split(',').take(3).map(|p| p.trim().parse().expect("a channel")).collect();
        let lin = |c: f64| {
            let c = c / 255.0;
            if c <= 0.03928 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
        };
        0.2126 * lin(parts[0]) + 0.7152 * lin(parts[1]) + 0.0722 * lin(parts[2])
    }
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// The page of a finished UC1 run in chromium: every panel, with the values of its report and ledger; a pointer
/// clicked shows its span; filters, the DAG, the query box, LESS against verbatim; a screenshot of each panel.
#[test]
fn the_page_of_a_uc1_run_in_a_real_browser() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let less_dir = scenario_dir.join("less");
    let events = ledger(&less_dir);
    let report = report(&less_dir);
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let browser = Browser::start(1400, 1000);
    let started = Instant::now();
    browser.goto(&server.url("/"));
    ready(&browser);
    eprintln!("serve: the page of UC1 loaded (every panel's data) in {:?}", started.elapsed());

    for panel in ["hierarchy", "briefs", "feed", "timeline", "memory", "compare", "pointer"] {
        browser.find(&format!("section#{panel}, aside#{panel}"));
    }
    let title = browser.text(&browser.find("#run-title"));
    assert!(title.contains("uc1-refactor") && title.contains("less"), "{title}");

    // The hierarchy: every role of the report, and the programmer's meter as the report and ledger have it.
    for role in report["roles"].as_object().expect("roles").keys() {
        browser.find(&format!(".agent[data-role='{role}']"));
    }
    let per_turn = report["roles"]["programmer"]["per_turn"].as_array().expect("per_turn");
    let cap =
        events.iter().rfind(|e| e["event"] == "delivered" && e["from"] == "programmer").expect("sent")["max_tokens"]
            .clone();
    let inline = browser.text(&browser.find("#agent-programmer [data-meter='inline tokens, last turn'] .value"));
    assert_eq!(inline, format!("{} / {} tok", per_turn.last().expect("a turn"), cap));
    let spans = browser.text(&browser.find("#agent-programmer [data-meter='repo spans'] .value"));
    let first_deref = events
        .iter()
        .find(|e| {
            e["event"] == "deref" && e["agent"] == "programmer" && e["granted"] == true && e["via_grant"].is_null()
        })
        .expect("a deref");
    assert!(spans.starts_with(&format!("{} /", first_deref["pointers"].as_array().map_or(0, Vec::len))), "{spans}");
    let facts = browser.text(&browser.find("#agent-programmer [data-facts]"));
    assert!(facts.contains(&format!("{} refused", report["roles"]["programmer"]["rejections"])), "{facts}");
    let reviewer = browser.text(&browser.find("#agent-reviewer"));
    assert!(reviewer.contains(&format!("restarted ×{}", report["roles"]["reviewer"]["restarts"])), "{reviewer}");

    // The Shared Brief panel: each brief delivered, its lines and its pointer pack.
    let brief = events.iter().find(|e| e["event"] == "delivered" && e["kind"] == "brief").expect("a brief");
    let shown = browser.text(&browser.find(&format!("[data-brief='{}']", brief["msg_id"].as_str().expect("id"))));
    assert!(shown.contains(brief["doc"]["what_matters_now"][0].as_str().expect("a line")), "{shown}");
    let n_pack: usize = brief["doc"]["pointer_packs"]
        .as_object()
        .expect("packs")
        .values()
        .map(|v| v.as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(
        browser.find_all(&format!("[data-brief='{}'] .ptr", brief["msg_id"].as_str().expect("id"))).len(),
        n_pack
    );

    // The engram feed: every claim, in delivery order; the kind filter.
    let engrams = delivered_engrams(&events);
    let items = browser.find_all("#engram-list > li");
    assert_eq!(items.len(), engrams.len());
    let risk = engrams.iter().find(|e| e["kind"] == "risk" && e["pointers"][0]["digest"].is_string()).expect("a risk");
    let risk_id = risk["id"].as_str().expect("id");
    let item = browser.find(&format!("[data-engram='{risk_id}']"));
    assert!(browser.text(&item).contains(risk["claim"].as_str().expect("claim")));
    assert_eq!(browser.find_all(&format!("[data-engram='{risk_id}'] .side")).len(), 2, "a risk shows both sides");

    // Click a pointer: the pointer panel shows its span marked, its digest and its cost.
    let pointer = &risk["pointers"][0];
    let text = pointer_text(pointer);
    browser.click(&browser.find(&format!("[data-engram='{risk_id}'] .ptr[data-pointer='{text}']")));
    browser.wait_for("the pointer to resolve", "return document.querySelector('#pointer-view .digest');", 20);
    let digest = browser.text(&browser.find("#pointer-view .digest"));
    assert_eq!(digest, pointer["digest"].as_str().expect("digest"));
    let (from, to) = span_lines(pointer["span"].as_str().expect("span"));
    let marked: Vec<String> = browser
        .find_all("#pointer-view .ln.hl .tx")
        .iter()
        .map(|e| {
            browser
                .exec("return arguments[0].textContent;", json!([Browser::arg(e)]))
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(marked, fixture_lines(pointer["ref"].as_str().expect("ref"), from, to), "the span, marked");
    let tokens = browser.text(&browser.find("#pointer-view [data-tokens]"));
    assert!(tokens.ends_with("(o200k_base)") && !tokens.starts_with('0'), "{tokens}");

    // The timeline: every event; the denied deref with its code and the grant that covers it.
    assert_eq!(browser.find_all("#timeline-list > li").len(), events.len());
    let cover = browser.text(&browser.find("#timeline-list [data-cover]"));
    let grant = events.iter().find(|e| e["event"] == "grant_issued").expect("a grant");
    assert!(cover.contains("LESS_DEREF_DENIED") && cover.contains(grant["grant_id"].as_str().expect("id")), "{cover}");

    // LESS against verbatim, from both reports.
    let verbatim = self::report(&scenario_dir.join("verbatim"));
    let total = browser.text(&browser.find("table[data-compare='verbatim'] tr[data-role='TOTAL']"));
    let want = format!("TOTAL {} ", report["totals"]["inline_tokens"]["total"]);
    assert!(total.starts_with(&want), "{total}");
    assert!(total.contains(&verbatim["totals"]["inline_tokens"]["total"].to_string()), "{total}");

    // Memory: the session node opens to its messages; the query box answers.
    browser.wait_for("the DAG", "return document.querySelector('#dag-tree details.node');", 20);
    let n_delivered = events.iter().filter(|e| e["event"] == "delivered").count();
    browser.click(&browser.find("#dag-tree details.node > summary"));
    browser.wait_for(
        "the session's messages",
        &format!("return document.querySelectorAll('#dag-tree [data-message]').length === {n_delivered};"),
        20,
    );
    browser.type_into(&browser.find("#dag-q"), "event ordering of the capture");
    browser.click(&browser.find("#dag-query button"));
    let answer = browser.wait_for(
        "an answer",
        "const a = document.querySelector('#dag-answer [data-answer]'); return a && a.textContent;",
        20,
    );
    assert!(answer.as_str().unwrap_or_default().contains("sam:msg:"), "{answer}");

    let shots = screenshots();
    for panel in ["hierarchy", "briefs", "feed", "timeline", "memory", "compare", "pointer"] {
        browser.screenshot(&browser.find(&format!("#{panel}")), &shots.join(format!("{panel}.png")));
    }
    // Filters last: the feed shows only risks.
    browser.exec("const s = document.getElementById('filter-kind'); s.value = 'risk'; s.dispatchEvent(new Event('change', {bubbles: true}));", json!([]));
    let n_risks = engrams.iter().filter(|e| e["kind"] == "risk").count();
    browser.wait_for("the risk filter", &format!("const l = document.querySelectorAll('#engram-list > li'); return l.length === {n_risks} && [...l].every(e => e.dataset.kind === 'risk');"), 20);
    browser.screenshot(&browser.find("body"), &shots.join("page.png"));
    eprintln!("serve: screenshots in {}", shots.display());
}

/// `L<a>-L<b>` as numbers.
fn span_lines(span: &str) -> (usize, usize) {
    let (a, b) = span.split_once('-').expect("a range");
    (a.trim_start_matches('L').parse().expect("a"), b.trim_start_matches('L').parse().expect("b"))
}

/// Keyboard alone reaches a pointer (Tab) and opens it (Enter); Escape goes back to it. Main and muted text have a
/// contrast of at least 4.5:1 against their backgrounds.
#[test]
fn the_page_works_from_the_keyboard_and_reads_well() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let browser = Browser::start(1400, 1000);
    browser.goto(&server.url("/?run=less"));
    ready(&browser);
    let mut reached = None;
    for _ in 0..200 {
        browser.press("\u{E004}");
        let focused = browser.exec(
            "const a = document.activeElement; return a && a.classList.contains('ptr') ? a.dataset.pointer : null;",
            json!([]),
        );
        if let Some(pointer) = focused.as_str() {
            reached = Some(pointer.to_owned());
            break;
        }
    }
    let pointer = reached.expect("Tab reaches a pointer within 200 presses");
    browser.press("\u{E007}");
    let shown = browser.wait_for(
        "the pointer opened with Enter",
        "const p = document.querySelector('#pointer-view .pointer-text'); return p && p.textContent;",
        20,
    );
    assert_eq!(shown.as_str(), Some(pointer.as_str()));
    let focus = browser.exec("return document.activeElement.id;", json!([]));
    assert_eq!(focus, "pointer-h", "the focus moves to the pointer panel");
    browser.press("\u{E00C}");
    let back = browser.exec("return document.activeElement.dataset.pointer || null;", json!([]));
    assert_eq!(back.as_str(), Some(pointer.as_str()), "Escape returns to the pointer");

    let colours = browser.exec(
        "const c = (s, p) => getComputedStyle(document.querySelector(s))[p];
         return [c('body', 'color'), c('body', 'backgroundColor'), c('.claim', 'color'), c('.panel', 'backgroundColor'),
                 c('.hint', 'color'), c('.ptr', 'color'), c('.ptr', 'backgroundColor')];",
        json!([]),
    );
    let c: Vec<&str> = colours.as_array().expect("colours").iter().filter_map(Value::as_str).collect();
    for (what, fg, bg) in [
        ("main text", c[0], c[1]),
        ("a claim on its panel", c[2], c[3]),
        ("muted text", c[4], c[3]),
        ("a pointer", c[5], c[6]),
    ] {
        let ratio = contrast(fg, bg);
        eprintln!("serve: contrast of {what}: {ratio:.1}:1 ({fg} on {bg})");
        assert!(ratio >= 4.5, "{what}: {ratio:.2}:1 ({fg} on {bg})");
    }
}

/// `lessrt run --serve`: the page opened while the scenario runs (paced) sees events arrive without a reload, then
/// the report; the page stays up after the run until Ctrl-C, and the exit status is the run's.
#[test]
fn the_live_view_of_a_running_scenario() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().to_string_lossy().into_owned();
    let server =
        Server::start(&["run", UC1, "--mode", "less", "--out", &out, "--serve", "127.0.0.1:0", "--pace", "500", "-q"]);
    let browser = Browser::start(1400, 1000);
    let opened = Instant::now();
    browser.goto(&server.url("/"));
    ready(&browser);
    browser.exec("window.__same_page = true;", json!([]));
    let at_load = browser
        .exec("return document.querySelectorAll('#timeline-list > li').length;", json!([]))
        .as_u64()
        .unwrap_or(0);
    let dir = tmp.path().join("uc1-refactor/less");
    // While the run goes on, events arrive a few at a time (the ledger writes each within 200 ms, the page tails
    // it): the page shows several different counts before the report exists. Then the run ends (its report is
    // written), and every ledger line is on the page, which never reloaded.
    let count = || browser.exec("return document.querySelectorAll('#timeline-list > li').length;", json!([]));
    let mut seen_during_run = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join("report.json").is_file() {
        assert!(Instant::now() < deadline, "the run did not finish");
        if let Some(n) = count().as_u64().filter(|n| *n > 0) {
            seen_during_run.insert(n);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        seen_during_run.len() >= 3,
        "events arrive as the run goes, not all at its end: counts seen during the run {seen_during_run:?}"
    );
    let total = ledger(&dir).len();
    browser.wait_for(
        "every event on the page",
        &format!("return document.querySelectorAll('#timeline-list > li').length === {total};"),
        30,
    );
    browser.wait_for(
        "the finished status",
        "return document.getElementById('live-status').textContent === 'finished';",
        30,
    );
    assert_eq!(browser.exec("return window.__same_page === true;", json!([])), true, "the page was not reloaded");
    assert!((at_load as usize) < total, "the page opened before the run ended ({at_load} of {total} events)");
    eprintln!(
        "serve: live page opened at event {at_load} of {total}; all arrived {:?} after opening",
        opened.elapsed()
    );
    browser.screenshot(&browser.find("#timeline"), &screenshots().join("live-timeline.png"));
    // The run is over and the page is still served; Ctrl-C ends it with the run's status.
    let (status, _) = get(&server, "/api/run", &[]);
    assert_eq!(status, 200);
    let mut server = server;
    let said: Vec<String> =
        std::iter::from_fn(|| server.stderr.recv_timeout(Duration::from_secs(5)).ok()).take(20).collect();
    assert!(said.iter().any(|l| l.contains("until Ctrl-C")), "{said:?}");
    let killed = Command::new("kill").args(["-INT", &server.child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status.code();
        }
        assert!(Instant::now() < deadline, "lessrt run --serve did not stop on Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0), "the run's status: UC1 passes its checks");
}

/// The checks and graded-tasks panel of a finished run in chromium: every check of the report with its status and
/// evidence, every graded task with its status and the engram that answered it; and in the verbatim run, a brief's
/// "sent text" opens what the baseline actually sent, as the run directory's `wire.jsonl` holds it.
#[test]
fn the_checks_and_tasks_panel_and_a_baselines_sent_text_in_a_real_browser() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_both(LANTERNFISH, "review-lanternfish", tmp.path());
    let report = report(&scenario_dir.join("less"));
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let browser = Browser::start(1400, 1000);
    browser.goto(&server.url("/?run=less"));
    ready(&browser);

    let rows = browser.exec(
        "return [...document.querySelectorAll('#outcome tr[data-check]')].map(r =>
           [r.dataset.check, r.querySelector('.badge').textContent, r.querySelector('.evidence').textContent]);",
        json!([]),
    );
    let checks = report["checks"].as_array().expect("checks");
    assert!(!checks.is_empty());
    let label = |status: &str| match status {
        "pass" => "PASS",
        "fail" => "FAIL",
        _ => "n/a",
    };
    let expected: Vec<Value> = checks
        .iter()
        .map(|c| json!([c["name"], label(c["status"].as_str().unwrap_or_default()), c["detail"]]))
        .collect();
    assert_eq!(rows, Value::Array(expected), "every check with its status and evidence");

    let tasks = report["tasks"]["items"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 8);
    assert_eq!(browser.find_all("#outcome li[data-task]").len(), tasks.len());
    for task in tasks {
        let id = task["id"].as_str().expect("id");
        let shown = browser.text(&browser.find(&format!("#outcome li[data-task='{id}']")));
        let status = browser.text(&browser.find(&format!("#outcome li[data-task='{id}'] [data-task-status]")));
        assert_eq!(status == "solved", task["solved"] == true, "{id}: {status}");
        assert!(shown.contains(task["evidence"].as_str().expect("evidence")), "{id}: {shown}");
        let engram = task["answer"]["engram"].as_str().expect("an answer");
        let answered = browser.find(&format!("#outcome li[data-task='{id}'] [data-answer-engram='{engram}']"));
        assert!(browser.text(&answered).contains(task["answer"]["claim"].as_str().expect("claim")), "{id}");
    }
    let verdict = browser.text(&browser.find("#outcome .verdict"));
    assert!(verdict.contains("8 of 8 graded tasks solved"), "{verdict}");
    browser.screenshot(&browser.find("#outcome"), &screenshots().join("outcome.png"));

    // The verbatim run: its checks about LESS mechanisms do not apply, and a brief opens what was sent.
    let verbatim_dir = scenario_dir.join("verbatim");
    let verbatim = self::report(&verbatim_dir);
    browser.goto(&server.url("/?run=verbatim"));
    ready(&browser);
    let na = verbatim["checks"].as_array().expect("checks").iter().filter(|c| c["status"] == "n/a").count();
    assert!(na > 0);
    assert_eq!(browser.find_all("#outcome tr[data-check] .status-na").len(), na);
    let sent = wire_lines(&verbatim_dir);
    let brief = browser.find("#brief-list [data-brief] .wire-btn");
    let msg_id = browser.exec("return arguments[0].dataset.wire;", json!([Browser::arg(&brief)]));
    let msg_id = msg_id.as_str().expect("a message id").to_owned();
    browser.click(&brief);
    let shown = browser.wait_for(
        "the sent text",
        &format!("const p = document.querySelector('#pointer-view [data-wire-text=\"{msg_id}\"]'); return p && p.textContent;"),
        20,
    );
    let line = sent.iter().find(|l| l["msg_id"] == msg_id.as_str()).expect("the brief's line in wire.jsonl");
    assert_eq!(shown, line["text"], "the page shows what the run directory holds");
    assert!(shown.as_str().unwrap_or_default().starts_with("Brief from "), "{shown}");
    assert_eq!(browser.text(&browser.find("#pointer-h")), "What was sent");
    browser.screenshot(&browser.find("#pointer"), &screenshots().join("sent-text.png"));
}

/// The lines of a run directory's `wire.jsonl`.
fn wire_lines(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("wire.jsonl"))
        .expect("wire.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A plain `chromium --headless` (no WebDriver, no waiting for scripts or streams) sees the run on the page's first
/// view: its title, its checks and its timeline, never "loading…"; its screenshot is written.
#[test]
fn a_plain_headless_chromium_sees_the_run_on_the_first_view() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let less_dir = scenario_dir.join("less");
    let report = report(&less_dir);
    let events = ledger(&less_dir);
    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let chromium = crate::browser::installed("chromium");
    let profile = tempfile::tempdir().expect("profile");
    let plain = |extra: &str| {
        let output = Command::new(&chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1400,1000"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(extra)
            .arg(server.url("/"))
            .output()
            .expect("chromium runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let dom = plain("--dump-dom");
    assert!(!dom.contains("loading…"), "the first view is not a loading page");
    assert!(dom.contains("uc1-refactor · less mode"), "the run's title");
    let check = &report["checks"][0];
    let name = check["name"].as_str().expect("a check").replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    assert!(dom.contains(&format!("data-check=\"{name}\" data-status=\"PASS\"")), "the first check, passed");
    assert_eq!(dom.matches("<li data-seq=").count(), events.len(), "every event on the timeline");
    let png = tmp.path().join("first-view.png");
    plain(&format!("--screenshot={}", png.display()));
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "{} bytes", bytes.len());
    std::fs::copy(&png, screenshots().join("first-view.png")).expect("copy");
    // Without a script at all, the page still names the run.
    let page = http().get(server.url("/")).call().expect("the page").into_body().read_to_string().expect("HTML");
    assert!(page.contains("uc1-refactor · less mode") && page.contains("id=\"initial-state\""), "{page}");
}

/// A baseline run keeps what it sent (`wire.jsonl`: one line per delivered message, its text and the tokens counted
/// on it) and the API serves it; a LESS run keeps none, and says so with its code.
#[test]
fn a_verbatim_run_keeps_what_it_sent_and_the_api_serves_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let verbatim_dir = scenario_dir.join("verbatim");
    assert!(!scenario_dir.join("less/wire.jsonl").exists(), "a LESS run sends its documents as they are");
    let sent = wire_lines(&verbatim_dir);
    let delivered: Vec<Value> = ledger(&verbatim_dir)
        .into_iter()
        .filter(|e| e["event"] == "delivered" && (e["kind"] == "brief" || e["kind"] == "message"))
        .collect();
    assert!(!delivered.is_empty());
    let ids = |lines: &[Value]| lines.iter().map(|l| l["msg_id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&sent), ids(&delivered), "one line per delivered message, in delivery order");
    for (line, event) in sent.iter().zip(&delivered) {
        assert_eq!((&line["tokens"], &line["from"], &line["to"]), (&event["tokens"], &event["from"], &event["to"]));
        let text = line["text"].as_str().expect("text");
        if event["kind"] == "brief" {
            let head = format!(
                "Brief from {} to {}.",
                event["from"].as_str().unwrap_or_default(),
                event["to"].as_str().unwrap_or_default()
            );
            assert!(text.starts_with(&head), "{text}");
        }
    }
    // The restatement is prose, not the LESS document the ledger holds.
    let brief = sent.iter().find(|l| l["kind"] == "brief").expect("a brief");
    assert!(brief["text"].as_str().unwrap_or_default().contains("\nGoal: "), "{brief}");

    let server = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
    let (status, list) = get(&server, "/api/wire", &[("run", "verbatim")]);
    assert_eq!(status, 200, "{list}");
    assert_eq!(ids(list["messages"].as_array().expect("messages")), ids(&sent));
    let msg = brief["msg_id"].as_str().expect("id");
    let (status, one) = get(&server, "/api/wire", &[("run", "verbatim"), ("msg", msg)]);
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["text"], brief["text"]);
    assert_eq!(one["tokens"], brief["tokens"]);
    let (_, run) = get(&server, "/api/run", &[("run", "verbatim")]);
    assert_eq!(run["wire"], true);
    let (_, run) = get(&server, "/api/run", &[("run", "less")]);
    assert_eq!(run["wire"], false);
    let (status, none) = get(&server, "/api/wire", &[("run", "less")]);
    assert_eq!((status, none["code"].as_str()), (404, Some("LESS_INPUT_UNREADABLE")), "{none}");
    let (status, unknown) = get(&server, "/api/wire", &[("run", "verbatim"), ("msg", "nobody-m99")]);
    assert_eq!((status, unknown["code"].as_str()), (404, Some("LESS_ARGUMENT_INVALID")), "{unknown}");
}
