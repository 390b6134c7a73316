//! A `lessrt serve` started on loopback and the runs it shows, for the API tests (`tests`) and the page's tests in a
//! real browser (`provisioned`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) const UC1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/uc1-refactor.toml");

pub(crate) const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/fixtures/uc1-refactor");

/// A `lessrt` that serves (`serve` or `run --serve`), killed on drop; `addr` is what it said on stderr.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
    /// The cookie the page is served with (`name=token`): the API answers only requests that carry it.
    pub(crate) cookie: String,
    /// What it printed on stderr after the address.
    pub(crate) stderr: std::sync::mpsc::Receiver<String>,
}

impl Server {
    /// Starts `lessrt ARGS` and waits for the line naming its address.
    pub(crate) fn start(args: &[&str]) -> Server {
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

    pub(crate) fn url(&self, path: &str) -> String {
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
pub(crate) fn get(server: &Server, path: &str, query: &[(&str, &str)]) -> (u16, Value) {
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
pub(crate) fn run_uc1(out: &Path) -> PathBuf {
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", UC1, "--out", &out.to_string_lossy(), "-q"])
        .output()
        .expect("lessrt run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    out.join("uc1-refactor")
}

/// The ledger's lines as JSON.
pub(crate) fn ledger(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("ledger.jsonl"))
        .expect("ledger")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

pub(crate) fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).expect("report")).expect("JSON")
}

/// Every delivered engram of a ledger, in order.
pub(crate) fn delivered_engrams(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == "delivered")
        .flat_map(|e| e["doc"]["engrams"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Lines `from..=to` of a fixture file.
pub(crate) fn fixture_lines(file: &str, from: usize, to: usize) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(FIXTURE).join(file)).expect("fixture");
    text.lines().skip(from - 1).take(to - from + 1).map(str::to_owned).collect()
}

/// The text form of a pointer object of an engram (`{type, ref, span}`).
pub(crate) fn pointer_text(p: &Value) -> String {
    let mut text = format!("{}:{}", p["type"].as_str().unwrap_or_default(), p["ref"].as_str().unwrap_or_default());
    if let Some(span) = p["span"].as_str() {
        text.push('#');
        text.push_str(span);
    }
    text
}

/// The lines of a run directory's `wire.jsonl`.
pub(crate) fn wire_lines(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("wire.jsonl"))
        .expect("wire.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}
