//! A run across processes: `lessrt node` workers on 127.0.0.1 and `lessrt run` as the head, over ractor_cluster.
//! Every node a test starts is stopped by it (killed when its handle drops).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{stderr, stdout};

const COOKIE: &str = "cluster-test-cookie-0123456789";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A `lessrt node` child process; killed (SIGKILL) and reaped when dropped.
struct Node {
    child: Child,
    addr: String,
    stderr: mpsc::Receiver<String>,
}

impl Node {
    /// Starts node `name` on a free loopback port with `cookie`; returns once it listens.
    fn start(name: &str, cookie: &str) -> Node {
        Node::start_with(name, cookie, &[])
    }

    /// [`Node::start`] with more arguments (`--tls-cert …`).
    fn start_with(name: &str, cookie: &str, extra: &[&str]) -> Node {
        Node::start_env(name, cookie, extra, &[])
    }

    /// [`Node::start_with`] with environment variables set for the node's process.
    fn start_env(name: &str, cookie: &str, extra: &[&str], env: &[(&str, &str)]) -> Node {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
        let addr = format!("127.0.0.1:{port}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["node", "--listen", &addr, "--name", name])
            .args(extra)
            .envs(env.iter().copied())
            .env("LESSRT_COOKIE", cookie)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lessrt node starts");
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let node = Node { child, addr, stderr: rx };
        let line = node.stderr.recv_timeout(Duration::from_secs(20)).expect("the node says it listens");
        assert!(line.contains("listening on"), "{line}");
        node
    }

    /// Kills the node the way a crash does (SIGKILL).
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What the node wrote on stderr so far.
    fn log(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A cluster file placing UC1's director and manager on `n1`, the programmer and reviewer on `n2`; the architect
/// stays on the head.
fn uc1_cluster_file(dir: &Path, n1: &str, n2: &str) -> PathBuf {
    let file = dir.join("cluster.toml");
    let text = format!(
        "nodes = [{{ name = \"n1\", addr = \"{n1}\" }}, {{ name = \"n2\", addr = \"{n2}\" }}]\n\n[placement]\n\
         director = \"n1\"\nmanager = \"n1\"\nprogrammer = \"n2\"\nreviewer = \"n2\"\n"
    );
    std::fs::write(&file, text).expect("cluster file");
    file
}

fn run_uc1(out: &Path, extra: &[&str], cookie: &str) -> Output {
    run_scenario("scenarios/uc1-refactor.toml", out, extra, cookie)
}

fn run_scenario(scenario: &str, out: &Path, extra: &[&str], cookie: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", scenario, "--json", "--out"])
        .arg(out)
        .args(extra)
        .current_dir(root())
        .env("LESSRT_COOKIE", cookie)
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .output()
        .expect("lessrt run")
}

/// The JSON report(s) a run printed, without their timing (which differs between any two runs).
fn report(output: &Output) -> Value {
    crate::support::untimed(
        serde_json::from_str(&stdout(output))
            .unwrap_or_else(|err| panic!("a JSON report ({err}): {}\n{}", stdout(output), stderr(output))),
    )
}

fn ledger_events(out: &Path, mode: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("uc1-refactor").join(mode).join("ledger.jsonl")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// UC1 with four of its five agents on two `lessrt node` processes reports what the single-process run reports:
/// the same tokens per role in both modes, the same checks and graded tasks.
#[test]
fn uc1_on_two_nodes_reports_as_one_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = run_uc1(&dir.path().join("single"), &[], COOKIE);
    assert_eq!(single.status.code(), Some(0), "{}", stderr(&single));
    let (n1, n2) = (Node::start("n1", COOKIE), Node::start("n2", COOKIE));
    let file = uc1_cluster_file(dir.path(), &n1.addr, &n2.addr);
    let clustered = run_uc1(&dir.path().join("cluster"), &["--cluster", file.to_str().expect("utf-8")], COOKIE);
    assert_eq!(clustered.status.code(), Some(0), "{}\n{}\n{}", stderr(&clustered), n1.log(), n2.log());
    // The whole report: per mode, every role's tokens (inline, per turn), derefs, refusals, restarts; the checks;
    // the graded tasks.
    assert_eq!(report(&clustered), report(&single));
    // Every delivery the nodes' gateways acknowledged is in the head's ledger, exactly once.
    let (one, two) =
        (ledger_events(&dir.path().join("single"), "less"), ledger_events(&dir.path().join("cluster"), "less"));
    let delivered = |events: &[Value]| events.iter().filter(|e| e["event"] == "delivered").count();
    assert_eq!(delivered(&two), delivered(&one));
}

/// UC4 with five of its seven agents on the two nodes: recalls and promotions from a node go through the head's
/// memory, and the baseline's restatements (the reports each writer knows) come out as in one process.
#[test]
fn uc4_with_recall_on_two_nodes_reports_as_one_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = "scenarios/uc4-shared-knowledge.toml";
    let single = run_scenario(scenario, &dir.path().join("single"), &[], COOKIE);
    assert_eq!(single.status.code(), Some(0), "{}", stderr(&single));
    let (n1, n2) = (Node::start("n1", COOKIE), Node::start("n2", COOKIE));
    let file = dir.path().join("cluster.toml");
    let text = format!(
        "nodes = [{{ name = \"n1\", addr = \"{}\" }}, {{ name = \"n2\", addr = \"{}\" }}]\n[placement]\n\
         team-lead = \"n1\"\nconfig-programmer = \"n1\"\ndb-programmer = \"n2\"\ncache-programmer = \"n2\"\n\
         new-programmer = \"n2\"\n",
        n1.addr, n2.addr
    );
    std::fs::write(&file, text).expect("cluster file");
    let out = dir.path().join("cluster");
    let clustered = run_scenario(scenario, &out, &["--cluster", file.to_str().expect("utf-8")], COOKIE);
    assert_eq!(clustered.status.code(), Some(0), "{}\n{}\n{}", stderr(&clustered), n1.log(), n2.log());
    assert_eq!(report(&clustered), report(&single));
}

/// A node killed (SIGKILL) in the middle of a run: the head notices, its agents restart on the live node (n1, the
/// only worker left) with a `restart` event each in the ledger, taking back what the ledger says they had, and the
/// run completes with its report.
#[test]
fn a_node_killed_mid_run_moves_its_agents_and_the_run_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (n1, mut n2) = (Node::start("n1", COOKIE), Node::start("n2", COOKIE));
    let file = uc1_cluster_file(dir.path(), &n1.addr, &n2.addr);
    let out = dir.path().join("out");
    let head = spawn_paced_uc1(&out, &file, &[]);
    // Kill n2 once the run is past its first derefs (step 4 of UC1), before the programmer and reviewer report.
    wait_for_steps(&out, 4);
    n2.kill();
    let output = head.wait_with_output().expect("the run ends");
    // The run completes: a report, whatever its checks say (exit 0 or 1; 2 would be a run that could not go on).
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}\n{}", stderr(&output), n1.log());
    let report = report(&output);
    assert_eq!(report["mode"], "less", "{report}");
    let events = ledger_events(&out, "less");
    let restarts: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "restart" && e["reason"].as_str().is_some_and(|r| r.contains("node n2 was lost")))
        .collect();
    let moved: Vec<&str> = restarts.iter().filter_map(|e| e["agent"].as_str()).collect();
    assert_eq!(moved, ["programmer", "reviewer"], "{events:#?}");
    assert!(restarts.iter().all(|e| e["reason"].as_str().is_some_and(|r| r.contains("(its connection closed)"))));
    assert!(
        restarts.iter().all(|e| e["reason"].as_str().is_some_and(|r| r.ends_with("restarted on node n1"))),
        "a lost node's agents move to the live worker node: {restarts:?}"
    );
    // The agents that stayed (n1's, the head's) and the moved ones finished the script.
    let steps = events.iter().filter(|e| e["event"] == "step").count();
    assert_eq!(steps, 11, "every step of UC1 ran");
}

/// A message in flight to a node of another process when that process dies: n2 aborts right after its gateway
/// delivered the director's grant to the programmer (recorded in the head's ledger), before acknowledging it. The
/// director's turn on n1 goes on: the head moves n2's agents to n1 at once, the grant goes to the programmer's new
/// gateway under the same id, which knows from the ledger that it was delivered, so the programmer gets it exactly
/// once, derefs under it later, and the run passes the undisturbed run's checks with its tokens (the reviewer's restart
/// count excepted: its move is a restart too).
#[test]
fn a_message_in_flight_to_a_node_that_dies_is_delivered_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = run_uc1(&dir.path().join("single"), &["--mode", "less"], COOKIE);
    assert_eq!(single.status.code(), Some(0), "{}", stderr(&single));
    let n1 = Node::start("n1", COOKIE);
    let n2 = Node::start_env("n2", COOKIE, &[], &[("LESSRT_FAULT_ABORT_AFTER_DELIVERY_TO", "programmer")]);
    let file = uc1_cluster_file(dir.path(), &n1.addr, &n2.addr);
    let out = dir.path().join("out");
    let output = run_uc1(&out, &["--mode", "less", "--cluster", file.to_str().expect("utf-8")], COOKIE);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}\n{}\n{}", stderr(&output), n1.log(), n2.log());
    assert!(n2.log().contains("fails on purpose after a delivery"), "{}", n2.log());
    let events = ledger_events(&out, "less");
    let grants: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "delivered" && e["to"] == "programmer" && e["kind"] == "grant")
        .collect();
    assert_eq!(grants.len(), 1, "the grant was delivered once: {grants:#?}");
    let moved: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "restart")
        .filter(|e| e["reason"].as_str().is_some_and(|r| r.contains("node n2 was lost") && r.ends_with("on node n1")))
        .filter_map(|e| e["agent"].as_str())
        .collect();
    assert_eq!(moved, ["programmer", "reviewer"], "{events:#?}");
    let (got, want) = (report(&output), report(&single));
    assert_eq!(got["totals"]["inline_tokens"], want["totals"]["inline_tokens"], "nothing counted twice");
    let checks = |report: &Value| -> Vec<Value> {
        let all = report["checks"].as_array().expect("checks").iter();
        all.filter(|c| !c["name"].as_str().is_some_and(|n| n.contains("restarted"))).cloned().collect()
    };
    assert_eq!(checks(&got), checks(&want));
    assert!(checks(&got).iter().all(|c| c["status"] == "pass"), "{got:#}");
}

/// The head of a run across nodes killed (SIGKILL) mid-run: `lessrt run --resume` goes on from its ledger on the same
/// nodes, whose agents take back what they had, and reports what the single process reports (its `resumed` entry
/// aside).
#[test]
fn a_cluster_run_whose_head_was_killed_resumes_on_its_nodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = run_uc1(&dir.path().join("single"), &["--mode", "less"], COOKIE);
    assert_eq!(single.status.code(), Some(0), "{}", stderr(&single));
    let (n1, n2) = (Node::start("n1", COOKIE), Node::start("n2", COOKIE));
    let file = uc1_cluster_file(dir.path(), &n1.addr, &n2.addr);
    let out = dir.path().join("out");
    let mut head = spawn_paced_uc1(&out, &file, &[]);
    wait_for_steps(&out, 5);
    head.kill().expect("SIGKILL");
    head.wait().expect("reaped");
    let resumed = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", "--resume"])
        .arg(out.join("uc1-refactor"))
        .env("LESSRT_COOKIE", COOKIE)
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .output()
        .expect("lessrt run --resume");
    assert_eq!(resumed.status.code(), Some(0), "{}\n{}\n{}", stderr(&resumed), n1.log(), n2.log());
    let mut got = report(&resumed);
    let entries = got.as_object_mut().expect("a report").remove("resumed").expect("a resumed entry");
    assert!(entries[0]["from_step"].as_u64().is_some_and(|s| s >= 4), "{entries}");
    assert_eq!(got, report(&single), "the resumed cluster run reports as one undisturbed process");
}

/// `--replay` reaches the `llm` agents on nodes: the committed uc3-review-llm recording replayed with the reviewers
/// on two nodes (each node answers from the same recording directory, at the pinned clock) reports, in both modes,
/// what it reports in one process, which is the recorded run's report.
#[test]
fn a_recorded_llm_run_replays_on_nodes_as_in_one_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (n1, n2) = (Node::start("n1", COOKIE), Node::start("n2", COOKIE));
    let file = dir.path().join("cluster.toml");
    let text = format!(
        "nodes = [{{ name = \"n1\", addr = \"{}\" }}, {{ name = \"n2\", addr = \"{}\" }}]\n\n[placement]\n\
         correctness-reviewer = \"n1\"\nconcurrency-reviewer = \"n2\"\ntest-impact-reviewer = \"n2\"\n",
        n1.addr, n2.addr
    );
    std::fs::write(&file, text).expect("cluster file");
    let replay = ["--replay", "scenarios/recordings/uc3-review-llm"];
    let single = run_scenario("scenarios/uc3-review-llm.toml", &dir.path().join("single"), &replay, COOKIE);
    assert_eq!(single.status.code(), Some(0), "{}", stderr(&single));
    let mut extra = replay.to_vec();
    extra.extend(["--cluster", file.to_str().expect("utf-8")]);
    let clustered = run_scenario("scenarios/uc3-review-llm.toml", &dir.path().join("cluster"), &extra, COOKIE);
    assert_eq!(clustered.status.code(), Some(0), "{}\n{}\n{}", stderr(&clustered), n1.log(), n2.log());
    let (got, want) = (report(&clustered), report(&single));
    assert!(want[0]["totals"]["model"]["calls"].as_u64().is_some_and(|n| n > 0), "{want}");
    assert_eq!(got, want, "the nodes' reviewers answered from the recording as the head's did");
}

/// A node that hangs with its connection open (SIGSTOP) is lost by the head's heartbeats: its agents move to node n1
/// within the heartbeat limit and the run completes, although the node never closed its connection.
#[test]
fn a_node_stopped_mid_run_is_lost_by_its_heartbeats_and_the_run_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (n1, n2) = (Node::start("n1", COOKIE), Node::start("n2", COOKIE));
    let file = uc1_cluster_file(dir.path(), &n1.addr, &n2.addr);
    let out = dir.path().join("out");
    let head = spawn_paced_uc1(&out, &file, &["--heartbeat-timeout", "2", "--step-timeout", "60"]);
    wait_for_steps(&out, 4);
    let stopped = Instant::now();
    let status = Command::new("kill").args(["-STOP", &n2.child.id().to_string()]).status().expect("kill -STOP");
    assert!(status.success(), "SIGSTOP sent to n2");
    let output = head.wait_with_output().expect("the run ends");
    let took = stopped.elapsed();
    let _ = Command::new("kill").args(["-CONT", &n2.child.id().to_string()]).status();
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}\n{}", stderr(&output), n1.log());
    let events = ledger_events(&out, "less");
    let moved: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "restart" && e["reason"].as_str().is_some_and(|r| r.contains("node n2 was lost")))
        .filter_map(|e| e["agent"].as_str())
        .collect();
    assert_eq!(moved, ["programmer", "reviewer"], "{events:#?}");
    let said = |e: &&Value| {
        e["reason"].as_str().is_some_and(|r| r.contains("(no heartbeat answered for") && r.ends_with("on node n1"))
    };
    assert_eq!(events.iter().filter(|e| e["event"] == "restart").filter(said).count(), 2, "the restarts say why");
    assert_eq!(events.iter().filter(|e| e["event"] == "step").count(), 11, "every step of UC1 ran");
    // Well within the 60 s step timeout: the heartbeats, not a step's timeout, noticed the node.
    assert!(took < Duration::from_secs(30), "the run took {took:?} after n2 stopped");
}

/// Starts `lessrt run` of UC1 in LESS mode, 150 ms between steps, on the nodes of `cluster`, writing into `out`.
fn spawn_paced_uc1(out: &Path, cluster: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", "scenarios/uc1-refactor.toml", "--json", "--mode", "less", "--pace", "150", "--out"])
        .arg(out)
        .args(["--cluster", cluster.to_str().expect("utf-8")])
        .args(extra)
        .current_dir(root())
        .env("LESSRT_COOKIE", COOKIE)
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lessrt run")
}

/// Waits (up to a minute) until the LESS run in `out` has started `n` steps.
fn wait_for_steps(out: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while ledger_events(out, "less").iter().filter(|e| e["event"] == "step").count() < n {
        assert!(Instant::now() < deadline, "the run did not get to step {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A node with another cookie is refused: the run stops before any step with `LESS_NODE_UNKNOWN` saying so, and the
/// node logs the refusal.
#[test]
fn a_wrong_cookie_is_refused_and_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (n1, n2) = (Node::start("n1", "another-cookie-0123456789"), Node::start("n2", "another-cookie-0123456789"));
    let file = uc1_cluster_file(dir.path(), &n1.addr, &n2.addr);
    let started = Instant::now();
    let output =
        run_uc1(&dir.path().join("out"), &["--mode", "less", "--cluster", file.to_str().expect("utf-8")], COOKIE);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("LESS_NODE_UNKNOWN"), "{}", stderr(&output));
    assert!(stderr(&output).contains("refused the cookie handshake"), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(10), "refused at once, not after a timeout");
    std::thread::sleep(Duration::from_millis(200));
    let log = n1.log();
    assert!(log.contains("refused a connection"), "{log}");
}

/// An agent placed on a node the cluster does not name is refused before anything starts, with a stable code and a
/// message that says what to do.
#[test]
fn an_agent_on_an_unknown_node_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cluster.toml");
    std::fs::write(&file, "nodes = [{ name = \"n1\", addr = \"127.0.0.1:1\" }]\n[placement]\nreviewer = \"n9\"\n")
        .expect("cluster file");
    let output = run_uc1(&dir.path().join("out"), &["--cluster", file.to_str().expect("utf-8")], COOKIE);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = report(&output);
    let error = &report["errors"][0];
    assert_eq!(error["code"], "LESS_NODE_UNKNOWN", "{report}");
    assert!(error["message"].as_str().is_some_and(|m| m.contains("n9") && m.contains("leave `node` out")), "{report}");
}

/// A node refuses a non-loopback address unless asked, and starts with no cookie not at all.
#[test]
fn a_node_needs_loopback_and_a_cookie() {
    let remote = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["node", "--listen", "0.0.0.0:0", "--name", "n1"])
        .env("LESSRT_COOKIE", COOKIE)
        .output()
        .expect("lessrt node");
    assert_eq!(remote.status.code(), Some(2), "{}", stderr(&remote));
    assert!(stderr(&remote).contains("not a loopback address"), "{}", stderr(&remote));
    let no_cookie = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["node", "--listen", "127.0.0.1:0", "--name", "n1"])
        .env_remove("LESSRT_COOKIE")
        .output()
        .expect("lessrt node");
    assert_eq!(no_cookie.status.code(), Some(2), "{}", stderr(&no_cookie));
    assert!(stderr(&no_cookie).contains("no cookie"), "{}", stderr(&no_cookie));
}

/// Claims made by agents on two nodes go to the head's coordination ledger: the collision between them is refused,
/// the override reaches the parent on the head as an escalation, and the report is the single process's.
#[test]
fn claims_from_two_nodes_collide_in_the_heads_ledger() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("src")).expect("mkdir");
    std::fs::write(dir.path().join("src/a.rs"), "pub fn a() -> u32 {\n    1\n}\n").expect("write");
    let scenario = dir.path().join("claims.toml");
    std::fs::write(
        &scenario,
        r#"name = "claims"
workspace = "."
[[agents]]
id = "lead"
role = "architect"
[[agents]]
id = "dev"
role = "programmer"
parent = "lead"
[[agents]]
id = "peer"
role = "reviewer"
parent = "lead"
[[steps]]
action = "claim"
agent = "dev"
surfaces = ["src/**"]
task = "T-1: rename a"
[[steps]]
action = "claim"
agent = "peer"
surfaces = ["src/a.rs"]
task = "T-2: review a"
[[steps]]
action = "claim"
agent = "peer"
surfaces = ["src/a.rs"]
task = "T-2: review a"
override = "the review blocks the release"
[[expect]]
check = "claims"
granted = 2
refused = 1
overrides = 1
[[expect]]
check = "escalations"
count = 1
"#,
    )
    .expect("scenario");
    let scenario = scenario.to_str().expect("utf-8");
    let single = run_scenario(scenario, &dir.path().join("single"), &[], COOKIE);
    assert_eq!(single.status.code(), Some(0), "{}", stderr(&single));
    let (n1, n2) = (Node::start("n1", COOKIE), Node::start("n2", COOKIE));
    let file = dir.path().join("cluster.toml");
    let text = format!(
        "nodes = [{{ name = \"n1\", addr = \"{}\" }}, {{ name = \"n2\", addr = \"{}\" }}]\n[placement]\n\
         dev = \"n1\"\npeer = \"n2\"\n",
        n1.addr, n2.addr
    );
    std::fs::write(&file, text).expect("cluster file");
    let out = dir.path().join("cluster");
    let clustered = run_scenario(scenario, &out, &["--cluster", file.to_str().expect("utf-8")], COOKIE);
    assert_eq!(
        clustered.status.code(),
        Some(0),
        "{}\n{}\n{}\n{}",
        stdout(&clustered),
        stderr(&clustered),
        n1.log(),
        n2.log()
    );
    let report = report(&clustered);
    assert_eq!(report, self::report(&single));
    let runs = report.as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 2, "both modes: {report}");
    for run in &runs {
        let checks = run["checks"].as_array().cloned().unwrap_or_default();
        assert!(checks.len() == 2 && checks.iter().all(|c| c["status"] == "pass"), "{checks:?}");
    }
    assert!(out.join("claims/less/memory/coord.sqlite").is_file(), "the head holds the ledger");
}

/// A private CA and a certificate for each name, made by `scripts/cluster-ca.sh` (the openssl lines docs/cluster.md
/// shows); another CA's certificates go in another directory.
fn pki(dir: &Path, names: &[&str]) {
    let status = Command::new("bash")
        .arg(root().join("scripts/cluster-ca.sh"))
        .arg(dir)
        .args(names)
        .stdout(Stdio::null())
        .status()
        .expect("bash scripts/cluster-ca.sh");
    assert!(status.success(), "the CA and certificates are made");
}

/// `--tls-cert`, `--tls-key`, `--tls-ca` for `name`'s certificate in `dir`, trusting the CA in `ca`.
fn tls_args(dir: &Path, name: &str, ca: &Path) -> Vec<String> {
    let path = |file: PathBuf| file.to_str().expect("utf-8").to_owned();
    vec![
        "--tls-cert".to_owned(),
        path(dir.join(format!("{name}.pem"))),
        "--tls-key".to_owned(),
        path(dir.join(format!("{name}.key"))),
        "--tls-ca".to_owned(),
        path(ca.join("ca.pem")),
    ]
}

/// A loopback TCP proxy to `target` that keeps every byte it forwards, both ways (what a listener on the path sees).
fn tap(target: String) -> (String, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("addr").to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let (Ok(client), Ok(server)) = (client, std::net::TcpStream::connect(&target)) else { continue };
            for (mut from, mut to) in
                [(client.try_clone().expect("clone"), server.try_clone().expect("clone")), (server, client)]
            {
                let kept = kept.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        match from.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                kept.lock().expect("lock").extend_from_slice(&buf[..n]);
                                if to.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    (addr, seen)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// UC1 over TLS reports as in one process; a listener on the path between the head and a node sees the run's grant
/// key and the scenario in the clear without TLS, and neither with it.
#[test]
fn uc1_over_tls_reports_as_one_process_and_the_link_shows_no_grant_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("pki");
    pki(&certs, &["n1", "n2", "head"]);
    let single = run_uc1(&dir.path().join("single"), &[], COOKIE);
    assert_eq!(single.status.code(), Some(0), "{}", stderr(&single));
    for tls in [false, true] {
        let (n1_tls, n2_tls) = (tls_args(&certs, "n1", &certs), tls_args(&certs, "n2", &certs));
        fn on(tls: bool, args: &[String]) -> Vec<&str> {
            if tls { args.iter().map(String::as_str).collect() } else { Vec::new() }
        }
        let n1 = Node::start_with("n1", COOKIE, &on(tls, &n1_tls));
        let n2 = Node::start_with("n2", COOKIE, &on(tls, &n2_tls));
        let (n2_tapped, seen) = tap(n2.addr.clone());
        let file = uc1_cluster_file(dir.path(), &n1.addr, &n2_tapped);
        let head = tls_args(&certs, "head", &certs);
        let mut extra = vec!["--cluster", file.to_str().expect("utf-8")];
        extra.extend(on(tls, &head));
        let out = dir.path().join(if tls { "tls" } else { "plain" });
        let clustered = run_uc1(&out, &extra, COOKIE);
        assert_eq!(clustered.status.code(), Some(0), "tls {tls}: {}\n{}\n{}", stderr(&clustered), n1.log(), n2.log());
        assert_eq!(report(&clustered), report(&single), "tls: {tls}");
        let seen = seen.lock().expect("lock").clone();
        assert!(seen.len() > 1000, "the tap saw the link: {} bytes", seen.len());
        // The host spec carries the grant key (`secret`) and the scenario's text to the node.
        let clear = contains(&seen, b"\"secret\"") || contains(&seen, b"uc1-refactor");
        assert_eq!(clear, !tls, "tls: {tls}: the grant key and the scenario in the clear");
    }
}

/// A head whose certificate another CA signed is refused by a TLS node in the TLS handshake, before the cookie; a
/// head without TLS too; and without TLS a run places no agent on a node that is not on loopback.
#[test]
fn a_peer_without_a_certificate_of_the_clusters_ca_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (certs, rogue) = (dir.path().join("pki"), dir.path().join("rogue"));
    pki(&certs, &["n1", "n2"]);
    pki(&rogue, &["head"]);
    let (n1, n2) = (
        Node::start_with("n1", COOKIE, &tls_args(&certs, "n1", &certs).iter().map(String::as_str).collect::<Vec<_>>()),
        Node::start_with("n2", COOKIE, &tls_args(&certs, "n2", &certs).iter().map(String::as_str).collect::<Vec<_>>()),
    );
    let file = uc1_cluster_file(dir.path(), &n1.addr, &n2.addr);
    // The head trusts the cluster's CA, but its own certificate is the rogue CA's.
    let head = tls_args(&rogue, "head", &certs);
    let mut extra = vec!["--cluster", file.to_str().expect("utf-8")];
    extra.extend(head.iter().map(String::as_str));
    let refused = run_uc1(&dir.path().join("rogue-run"), &extra, COOKIE);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("LESS_NODE_UNKNOWN"), "{}", stderr(&refused));
    let plain = run_uc1(&dir.path().join("plain-run"), &["--cluster", file.to_str().expect("utf-8")], COOKIE);
    assert_eq!(plain.status.code(), Some(2), "{}", stderr(&plain));
    // Neither got as far as the cookie: no session was opened, so none failed the cookie handshake.
    for node in [&n1, &n2] {
        let log = node.log();
        assert!(!log.contains("cookie handshake failed"), "{log}");
    }
    // A node elsewhere than loopback takes agents only over TLS (the address is not even tried).
    let remote = dir.path().join("remote.toml");
    std::fs::write(
        &remote,
        "nodes = [{ name = \"n1\", addr = \"192.0.2.10:7000\" }]\n[placement]\nprogrammer = \"n1\"\n",
    )
    .expect("cluster file");
    let output = run_uc1(&dir.path().join("remote-run"), &["--cluster", remote.to_str().expect("utf-8")], COOKIE);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("only over TLS"), "{}", stderr(&output));
}

/// `lessrt load --parts cluster` over TLS: every delivery through the node's gateways, over the encrypted link, is
/// acknowledged and on the ledger.
#[test]
fn the_cluster_load_runs_over_tls_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("pki");
    pki(&certs, &["n1"]);
    let tls = tls_args(&certs, "n1", &certs);
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["load", "--parts", "cluster", "--agents", "4", "--messages", "20", "--json"])
        .args(&tls)
        .current_dir(root())
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .output()
        .expect("lessrt load");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let cluster = &doc["parts"]["cluster"];
    assert_eq!((cluster["tls"].as_bool(), cluster["lost"].as_u64()), (Some(true), Some(0)), "{cluster}");
    let remote = &cluster["remote"];
    assert_eq!((remote["sent"].as_u64(), remote["on_ledger"].as_u64()), (Some(80), Some(80)), "{remote}");
}
