//! Attacks of the second outside round (issue 34) on what listens or reads from outside: the page's API
//! (`lessrt serve`: a query that copied the whole message index, requests from other sites), `lessrt mcp` over HTTP
//! (sessions that never ended) and over stdio (lines that got no answer), `lessrt node` (port 0, blank cookies,
//! silent connections) and `lessrt memory ingest` / `less_compact` (odd roles, blank content, huge names and
//! messages). Every server a test starts listens on 127.0.0.1 and is killed by the test.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;
use crate::support::serve::{http, page_cookie};

/// A child process killed and reaped when dropped, with the lines of its standard error as they come.
struct Running {
    child: Child,
    stderr: mpsc::Receiver<String>,
}

impl Running {
    fn start(command: &mut Command) -> Running {
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("lessrt starts");
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, stderr: rx }
    }

    /// The first line of standard error holding `needle` (waiting up to a minute).
    fn said(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match self.stderr.recv_timeout(Duration::from_secs(1)) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("lessrt never said {needle:?}");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address after `http://` in a line.
fn http_addr(line: &str) -> String {
    let at = line.find("http://").expect("an address");
    line[at + 7..].split('/').next().unwrap_or_default().to_owned()
}

/// Every file below `dir`, with its bytes.
fn files_below(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("read dir").map_while(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

/// A GET of the page's API: the status and the JSON body.
fn api(addr: &str, path_and_query: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = http().get(format!("http://{addr}{path_and_query}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.call().expect("the server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("a body");
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path_and_query}: not JSON: {text}")))
}

/// Medium 6: `/api/dag/query` copied the whole message index to the temporary directory on every query (1 to 1.5 s
/// and 250 MB of temporary space each on a 300 MB index), and any web page could make the browser ask it
/// (`<img src="http://127.0.0.1:PORT/api/dag/query?q=x">`). The query now reads the index in place: with no
/// temporary directory at all it answers, and the store is byte for byte what it was (even with its recall files
/// gone, which a reader catches up in memory). And the API answers only the page the server served: a request
/// without its cookie, or one the browser marks as from another site or origin, is refused with 403.
#[test]
fn attack_web_dag_query_reads_in_place_and_answers_only_the_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("runs/demo/less");
    std::fs::create_dir_all(&run).expect("mkdir");
    std::fs::write(run.join("ledger.jsonl"), "").expect("write");
    let transcript = json!([
        {"role": "user", "content": "how do we make the capture idempotent?"},
        {"role": "assistant", "content": "the capture is idempotent when keyed by the order id"},
    ])
    .to_string();
    let store = run.join("memory");
    let store_text = store.display().to_string();
    let ingest = lessrt_bytes(
        &["memory", "ingest", "-", "--session", "s1", "--project", "p", "--store", &store_text],
        transcript.as_bytes(),
    );
    assert!(ingest.status.success(), "{}", stderr(&ingest));
    // A store whose message index lost its recall files: the reader catches up in memory, not on disk.
    let recall = store.join("archive-index/recall");
    assert!(recall.is_dir(), "{} holds the message index", recall.display());
    std::fs::remove_dir_all(&recall).expect("remove");
    let before = files_below(&store);

    // No temporary directory: a query that copies the index cannot run.
    let server = Running::start(
        Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["serve", &dir.path().join("runs").display().to_string(), "--addr", "127.0.0.1:0"])
            .env("TMPDIR", dir.path().join("no-such-tmp")),
    );
    let addr = http_addr(&server.said("http://"));
    let page = http().get(format!("http://{addr}/")).call().expect("the page");
    let set_cookie = page.headers().get("set-cookie").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    assert!(set_cookie.contains("SameSite=Strict") && set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(page.headers().get("content-security-policy").is_some(), "the page keeps its CSP");
    let cookie = page_cookie(&format!("http://{addr}/"));
    let query = "/api/dag/query?q=capture%20idempotent";

    let (status, answer) = api(&addr, query, &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{answer}");
    assert!(!answer["citations"].as_array().expect("citations").is_empty(), "{answer}");
    let (status, answer) = api(&addr, query, &[("Cookie", &cookie), ("Sec-Fetch-Site", "same-origin")]);
    assert_eq!(status, 200, "the page's own requests pass: {answer}");

    // What a web page the user visits can make the browser send: refused before any work.
    for (headers, why) in [
        (vec![], "no cookie"),
        (vec![("Cookie", "lessrt-1=00")], "another server's cookie"),
        (vec![("Cookie", cookie.as_str()), ("Sec-Fetch-Site", "cross-site")], "another site"),
        (vec![("Cookie", cookie.as_str()), ("Sec-Fetch-Site", "same-site")], "another port of this host"),
        (vec![("Cookie", cookie.as_str()), ("Origin", "http://evil.example")], "another origin"),
    ] {
        for path in [query, "/api/runs", "/api/stream?run=demo/less", "/%61pi/runs", "/nowhere"] {
            let (status, body) = api(&addr, path, &headers);
            assert_eq!((status, body["code"].as_str()), (403, Some("LESS_ARGUMENT_INVALID")), "{why} {path}: {body}");
            assert!(body["message"].as_str().unwrap_or_default().contains("open the page (/ on this server"), "{body}");
        }
    }
    drop(server);
    assert_eq!(files_below(&store), before, "serving changed the store");
    assert!(!dir.path().join("no-such-tmp").exists());
}

/// One `initialize` over streamable HTTP: the status, the session id and the JSON-RPC answer.
fn initialize(addr: &str, id: u64) -> (u16, Option<String>, Value) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": format!("attacker-{id}"), "version": "1"}}});
    let mut response = http()
        .post(format!("http://{addr}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .expect("the server answers");
    let status = response.status().as_u16();
    let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let text = response.body_mut().read_to_string().expect("a body");
    // JSON, or server-sent events whose data lines hold the answer.
    let answer = serde_json::from_str::<Value>(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
    });
    (status, session, answer.unwrap_or(Value::Null))
}

/// `lessrt mcp --http 127.0.0.1:0` with `extra` arguments, and the address it serves.
fn mcp_http(dir: &Path, extra: &[&str]) -> (Running, String) {
    let server = Running::start(
        Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["mcp", "--store", &dir.join("store").display().to_string(), "--http", "127.0.0.1:0"])
            .args(extra)
            .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model"),
    );
    let addr = http_addr(&server.said("http://"));
    (server, addr)
}

/// Low 2: MCP sessions over HTTP never ended (5,000 `initialize` calls: 25 → 316 MB, still there 15 minutes later).
/// Now at most `--max-sessions` are open: the next `initialize` gets a JSON-RPC error naming the limit and what to
/// do, until a session is closed (DELETE) or has been idle for `--session-idle-secs`.
#[test]
fn attack_mcp_http_sessions_are_capped_and_expire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, addr) = mcp_http(dir.path(), &["--max-sessions", "2"]);
    let (status, first, answer) = initialize(&addr, 1);
    assert_eq!(status, 200, "{answer}");
    assert!(answer["result"].is_object(), "{answer}");
    let first = first.expect("a session id");
    let (status, second, _) = initialize(&addr, 2);
    assert_eq!(status, 200);
    assert!(second.is_some());
    let (status, none, refused) = initialize(&addr, 3);
    assert_eq!((status, none), (503, None), "{refused}");
    assert_eq!(refused["id"], 3, "{refused}");
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-sessions 2") && message.contains("DELETE /mcp"), "{message}");
    // A session closed by its client makes room.
    let closed = http()
        .delete(format!("http://{addr}/mcp"))
        .header("Mcp-Session-Id", &first)
        .call()
        .expect("the server answers");
    assert!(closed.status().is_success(), "{}", closed.status());
    let (status, _, answer) = initialize(&addr, 4);
    assert_eq!(status, 200, "{answer}");

    // An idle session expires and makes room (bounded wait, no timing assert).
    let other = tempfile::tempdir().expect("tempdir");
    let (_server, addr) = mcp_http(other.path(), &["--max-sessions", "1", "--session-idle-secs", "1"]);
    assert_eq!(initialize(&addr, 1).0, 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, session, answer) = initialize(&addr, 2);
        if status == 200 {
            assert!(session.is_some() && answer["result"].is_object(), "{answer}");
            break;
        }
        assert_eq!(answer["error"]["code"], -32000, "{answer}");
        assert!(Instant::now() < deadline, "an idle session never closed: {answer}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Low 3: over stdio, a line over 16 MiB was dropped with a log line only, and a line that is not UTF-8 or holds a
/// lone surrogate got no answer: the host waited forever. Each now gets a JSON-RPC error with id null (-32600 or
/// -32700), and the server answers the next request.
#[test]
fn attack_mcp_stdio_answers_every_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = mcp_over_stdio(dir.path());
    let mut input = server.stdin.take().expect("stdin");
    let output = server.stdout.take().expect("stdout");
    let (tx, answers) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if tx.send(serde_json::from_str(&line).unwrap_or(Value::Null)).is_err() {
                break;
            }
        }
    });
    // The next answer (a message with an id, even a null one), skipping notifications.
    let next = || loop {
        let message = answers.recv_timeout(Duration::from_secs(60)).expect("an answer to every line");
        if message.get("id").is_some() {
            break message;
        }
    };
    let mut send = |bytes: &[u8]| {
        input.write_all(bytes).and_then(|()| input.write_all(b"\n")).and_then(|()| input.flush()).expect("send");
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "attacker", "version": "1"}}}).to_string().as_bytes());
    assert!(next()["result"].is_object());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string().as_bytes());

    let huge =
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{{"pad":"{}"}}}}"#, "x".repeat(17 << 20));
    let not_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{\"x\":\"\xff\xfe\"}}".to_vec();
    let surrogate = br#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"x":"\ud800"}}"#.to_vec();
    for (line, code) in [(huge.into_bytes(), -32600), (not_utf8, -32700), (surrogate, -32700)] {
        send(line.as_slice());
        let answer = next();
        assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (Value::Null, json!(code)), "{answer}");
        assert!(!answer["error"]["message"].as_str().unwrap_or_default().is_empty(), "{answer}");
    }
    send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string().as_bytes());
    let answer = next();
    assert_eq!(answer["id"], 5, "{answer}");
    assert!(answer["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "still serving: {answer}");
    drop(input);
    let _ = server.kill();
    let _ = server.wait();
}

/// Low 6: `lessrt node --listen 127.0.0.1:0` said port 0, not the port it bound; a cookie of 16 spaces was
/// accepted; a connection that never did the handshake stayed open for as long as its peer liked. Now the node says
/// the port it listens on, a cookie needs 16 characters that are not whitespace (exit 2, `LESS_ARGUMENT_INVALID`),
/// and a silent connection is closed after the handshake timeout (10 s).
#[test]
fn attack_node_says_its_port_wants_a_real_cookie_and_closes_silent_connections() {
    for cookie in [" ".repeat(16), "\t \u{a0}".repeat(8), format!("{}{}", "ab cd ".repeat(3), "        ")] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["node", "--listen", "127.0.0.1:0", "--name", "n1"])
            .env("LESSRT_COOKIE", &cookie)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lessrt node");
        // A node that accepted the cookie would serve until stopped: bounded wait, then stop it.
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut said = String::new();
        child.stderr.take().expect("stderr").read_to_string(&mut said).expect("stderr");
        assert_eq!(status.and_then(|s| s.code()), Some(2), "cookie {cookie:?} accepted: {said}");
        assert!(said.contains("LESS_ARGUMENT_INVALID") && said.contains("printable ASCII"), "{said}");
    }

    let node = Running::start(
        Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["node", "--listen", "127.0.0.1:0", "--name", "n1"])
            .env("LESSRT_COOKIE", "web-attack-cookie-0123456789"),
    );
    let line = node.said("listening on");
    let addr = line.rsplit(' ').next().unwrap_or_default().to_owned();
    let port: u16 = addr.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_default();
    assert_ne!(port, 0, "the port bound, not the one asked for: {line}");
    // Connections that say nothing: each is closed by the node (read gives end of file), not held.
    let mut silent: Vec<TcpStream> =
        (0..5).map(|_| TcpStream::connect(&addr).expect("the node listens where it says")).collect();
    for stream in &mut silent {
        stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        let mut byte = [0u8; 1];
        let read = stream.read(&mut byte);
        assert!(
            matches!(read, Ok(0)) || read.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "a silent connection was kept open: {read:?}"
        );
    }
}

/// Low 7: `memory ingest` archived role "hacker", blank content, an empty project and 100,000-character names, and
/// a 30 MB message took 1.57 GB; MCP `less_compact` took role "evil". Each is now refused with its code and what to
/// do, before the store is touched.
#[test]
fn attack_memory_ingest_and_compact_refuse_odd_messages_and_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let store_text = store.display().to_string();
    let long = "n".repeat(100_000);
    let ok = json!([{"role": "user", "content": "hello"}]).to_string();
    let cases: Vec<(Vec<&str>, String, &str, &str)> = vec![
        (vec![], json!([{"role": "hacker", "content": "hi"}]).to_string(), "LESS_TRANSCRIPT_INVALID", "/0/role"),
        (
            vec![],
            json!([{"role": "user", "content": "hi"}, {"role": "user", "content": " \n\t"}]).to_string(),
            "LESS_TEXT_EMPTY",
            "/1/content",
        ),
        (
            vec![],
            json!([{"role": "user", "content": "hi", "name": long}]).to_string(),
            "LESS_TRANSCRIPT_INVALID",
            "/0/name",
        ),
        (
            vec![],
            json!([{"role": "user", "content": "x".repeat(30 << 20)}]).to_string(),
            "LESS_TRANSCRIPT_INVALID",
            "/0/content",
        ),
        (vec!["--project", ""], ok.clone(), "LESS_ARGUMENT_INVALID", "--project"),
        (vec!["--project", "  "], ok.clone(), "LESS_ARGUMENT_INVALID", "--project"),
        (vec!["--project", &long], ok.clone(), "LESS_ARGUMENT_INVALID", "--project"),
        (vec!["--session", &long], ok.clone(), "LESS_ARGUMENT_INVALID", "--session"),
        (vec!["--session", ""], ok.clone(), "LESS_ARGUMENT_INVALID", "--session"),
    ];
    for (extra, transcript, code, at) in cases {
        let mut args = vec!["memory", "ingest", "-", "--store", &store_text];
        if !extra.contains(&"--session") {
            args.extend(["--session", "s1"]);
        }
        if !extra.contains(&"--project") {
            args.extend(["--project", "p"]);
        }
        args.extend(extra.iter().copied());
        let output = lessrt_bytes(&args, transcript.as_bytes());
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{extra:?} {code}: {said}");
        assert!(said.contains(code) && said.contains(at), "{extra:?}: {}", &said[..said.len().min(600)]);
        assert!(said.len() < 10_000, "the refusal does not echo the input");
        assert!(!store.exists(), "a refused ingest created the store ({extra:?} {code})");
    }
    let output = lessrt_bytes(
        &["memory", "ingest", "-", "--session", "s1", "--project", "p", "--store", &store_text],
        ok.as_bytes(),
    );
    assert!(output.status.success(), "{}", stderr(&output));

    // The desk that `less_compact` calls.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let desk = desk(elsewhere.path());
    let evil = json!([{"role": "user", "content": "hi"}, {"role": "evil", "content": "obey"}]);
    let refusal = refused(desk.compact(&evil, None), ErrorCode::TranscriptInvalid, "role evil");
    assert_eq!(refusal.path, "/messages/1/role", "{refusal:?}");
    assert!(desk.compact(&json!([{"role": "user", "content": "hi"}]), None).is_ok());
}
