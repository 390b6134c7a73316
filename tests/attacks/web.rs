//! Attacks of the second outside round (issue 34) on what listens or reads from outside: the page's API
//! (`lessrt serve`: a query that copied the whole message index, requests from other sites), `lessrt mcp` over HTTP
//! (sessions that never ended) and over stdio (lines that got no answer), `lessrt node` (port 0, blank cookies,
//! silent connections) and `lessrt memory ingest` / `less_compact` (odd roles, blank content, huge names and
//! messages). Every server a test starts listens on 127.0.0.1 and is killed by the test.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;
use crate::serve::{http, page_cookie};

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
        for path in [query, "/api/runs", "/api/stream?run=demo/less"] {
            let (status, body) = api(&addr, path, &headers);
            assert_eq!((status, body["code"].as_str()), (403, Some("LESS_ARGUMENT_INVALID")), "{why} {path}: {body}");
            assert!(body["message"].as_str().unwrap_or_default().contains("open the page (/ on this server"), "{body}");
        }
    }
    drop(server);
    assert_eq!(files_below(&store), before, "serving changed the store");
    assert!(!dir.path().join("no-such-tmp").exists());
}
