//! `lessrt serve` and `lessrt run --serve`: the JSON API over HTTP (status codes, LESS codes on bad input, the
//! workspace confinement, redaction, nothing written), the live stream, and what a baseline run sent. The page in a
//! real browser is tested in `provisioned/page.rs`.
//!
//! Servers listen on 127.0.0.1 on a free port and are stopped by the tests.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::serve::*;

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
            ("/api/deref", vec![("pointer", "sam:msg:programmer-m2")]),
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
        // A step and a turn's end have no line of their own in the trace.
        assert!(
            !data["text"].as_str().unwrap_or_default().is_empty()
                || ["step", "turn_end"].contains(&expected["event"].as_str().unwrap_or_default())
        );
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

/// Issue 39: the page shows a desk store's coordination ledger — its live claims, the latest decisions and how many
/// conflict records there are — read without writing to the store.
#[test]
fn the_page_shows_a_desk_stores_live_claims_and_decisions() {
    use less_runtime::desk::{Desk, DeskConfig, NewClaim};
    let tmp = tempfile::tempdir().expect("tmp");
    let scenario_dir = run_uc1(tmp.path());
    let store = tmp.path().join("desk-store");
    {
        let config = DeskConfig::from_toml("project = \"shop\"\n[clients.dev]\nparent = \"lead\"\n[clients.lead]\n")
            .expect("config");
        let desk = Desk::open(&store, None, config).expect("desk");
        let dev = desk.client("dev");
        let claim = NewClaim {
            surfaces: vec!["src/orders/**".into()],
            task: "T-7: idempotent capture".into(),
            ..NewClaim::default()
        };
        desk.claim(&dev, &claim).expect("claimed");
        let done = NewClaim { surfaces: vec!["docs/**".into()], task: "T-8".into(), ..NewClaim::default() };
        let released = desk.claim(&dev, &done).expect("claimed");
        desk.release_claim(&dev, &released.claim.claim_id).expect("released");
        desk.decide(&dev, "Capture is idempotent per order id", "A retried capture finds the first.").expect("decided");
        desk.close().expect("closed");
    }
    let before = files_below(&store);
    {
        let server = Server::start(&[
            "serve",
            &scenario_dir.to_string_lossy(),
            "--store",
            &store.to_string_lossy(),
            "--addr",
            "127.0.0.1:0",
        ]);
        let (status, body) = get(&server, "/api/claims", &[]);
        assert_eq!(status, 200, "{body}");
        let claims = body["claims"].as_array().expect("claims");
        assert_eq!(claims.len(), 1, "the released claim is not live: {body}");
        assert_eq!(claims[0]["identity"], "shop/lead/dev");
        assert_eq!(claims[0]["surfaces"], json!(["src/orders/**"]));
        assert_eq!(body["decisions"][0]["title"], "Capture is idempotent per order id");
        assert_eq!(body["conflicts"], 0);
        // A run's own store has no desk: nothing to show, and no error.
        let plain = Server::start(&["serve", &scenario_dir.to_string_lossy(), "--addr", "127.0.0.1:0"]);
        let (status, body) = get(&plain, "/api/claims", &[]);
        assert_eq!((status, body["claims"].as_array().map(Vec::len)), (200, Some(0)), "{body}");
    }
    let after = files_below(&store);
    let changed: Vec<&PathBuf> = before.iter().filter(|(p, b)| after.get(*p) != Some(b)).map(|(p, _)| p).collect();
    assert!(changed.is_empty(), "the server wrote to the store: {changed:?}");
}
