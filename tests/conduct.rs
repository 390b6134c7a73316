//! Turns that overlap: steps start when what they wait for ended, up to `RunOptions::parallel` at once, and what a
//! run reports does not depend on how many ran at once.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use less_agents::ScriptedFactory;
use less_runtime::run::{
    Action, Agent, AgentFactory, AgentFuture, RunOptions, RunReport, Seat, TurnInput, run_scenario,
};
use less_runtime::{Scenario, WireMode};
use serde_json::Value;

/// Runs `scenario` with `factory`'s agents in `mode` with at most `parallel` turns at once: the report and the
/// ledger's events.
fn run(
    scenario: &Arc<Scenario>,
    factory: Arc<dyn AgentFactory>,
    mode: WireMode,
    parallel: usize,
) -> (RunReport, Vec<Value>) {
    let out = tempfile::tempdir().expect("out");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let clock = time::OffsetDateTime::from_unix_timestamp(1_767_225_600).expect("a time");
    let options = RunOptions {
        out_dir: Some(out.path().to_owned()),
        pinned: Some(less_runtime::run::Pinned { clock, secret: [7; 32] }),
        parallel,
        ..RunOptions::new(mode)
    };
    let report = runtime.block_on(run_scenario(scenario.clone(), factory, options)).expect("run completes");
    let ledger = std::fs::read_to_string(out.path().join("ledger.jsonl")).expect("ledger.jsonl");
    (report, ledger.lines().map(|l| serde_json::from_str(l).expect("event is JSON")).collect())
}

fn untimed(report: &RunReport) -> Value {
    serde_json::to_value(report.untimed()).expect("report is JSON")
}

#[test]
fn every_shipped_scripted_scenario_reports_the_same_one_turn_at_a_time_and_four_at_once() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    let mut overlapped = 0;
    for path in names {
        let scenario = Scenario::load(&path).unwrap_or_else(|v| panic!("{}: {v}", path.display()));
        // Models and other processes are out of scope here: scripted agents on this node only.
        if scenario.agents.iter().any(|a| a.kind != less_runtime::AgentKind::Scripted || a.node.is_some()) {
            continue;
        }
        let scenario = Arc::new(scenario);
        for mode in [WireMode::Less, WireMode::Verbatim] {
            let (one, _) = run(&scenario, Arc::new(ScriptedFactory), mode, 1);
            let (four, _) = run(&scenario, Arc::new(ScriptedFactory), mode, 4);
            assert_eq!(untimed(&one), untimed(&four), "{} {mode:?}: the report depends on parallelism", scenario.name);
            assert_eq!(one.timing.as_ref().map(|t| t.most_at_once), Some(1), "{}: one at a time", scenario.name);
            overlapped += usize::from(four.timing.as_ref().is_some_and(|t| t.most_at_once > 1));
        }
    }
    assert!(overlapped > 0, "no shipped scenario ran two turns at once: nothing was compared");
}

/// A scripted agent whose every turn first waits `delay`, as one that asks a model would.
struct Slow {
    inner: Box<dyn Agent>,
    delay: Duration,
}

impl Agent for Slow {
    fn next<'a>(&'a mut self, turn: &'a TurnInput) -> AgentFuture<'a, Action> {
        Box::pin(async move {
            if turn.done.is_empty() {
                tokio::time::sleep(self.delay).await;
            }
            self.inner.next(turn).await
        })
    }
}

struct SlowFactory(Duration);

impl AgentFactory for SlowFactory {
    fn make(&self, seat: &Seat) -> Box<dyn Agent> {
        Box::new(Slow { inner: ScriptedFactory.make(seat), delay: self.0 })
    }
}

/// A lead briefing five workers at once, each of which searches and reports.
fn five_workers() -> (tempfile::TempDir, Arc<Scenario>) {
    let dir = tempfile::tempdir().expect("workspace");
    std::fs::create_dir_all(dir.path().join("src")).expect("src");
    for n in 1..=5 {
        let body: String = (1..=40).map(|i| format!("pub fn part_{n}_{i}(x: u64) -> u64 {{ x + {i} }}\n")).collect();
        std::fs::write(dir.path().join(format!("src/part{n}.rs")), body).expect("write");
    }
    let mut toml = String::from("name = \"five\"\nworkspace = \".\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n");
    for n in 1..=5 {
        toml.push_str(&format!("[[agents]]\nid = \"w{n}\"\nrole = \"worker\"\nparent = \"lead\"\n"));
    }
    toml.push_str("[[steps]]\naction = \"brief\"\nagent = \"lead\"\nnow = [\"Each of you: find your part.\"]\n");
    for n in 1..=5 {
        toml.push_str(&format!(
            "[[steps]]\naction = \"search\"\nagent = \"w{n}\"\nquery = \"part_{n}\"\n\
             [[steps]]\naction = \"report\"\nagent = \"w{n}\"\ntype = \"task_result\"\ntask = \"part{n}\"\n\
             status = \"pass\"\nengrams = [{{ kind = \"fact\", claim = \"part {n} adds.\", pointers = [\"repo:src/part{n}.rs#L1-L2\"] }}]\n"
        ));
    }
    let scenario = Scenario::from_toml(&toml, dir.path()).unwrap_or_else(|v| panic!("scenario: {v}"));
    (dir, Arc::new(scenario))
}

/// Each worker's turns as (started, ended) milliseconds, from the ledger's `turn_end` events.
fn turns_of(events: &[Value], agent: &str) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter(|e| e["event"] == "turn_end" && e["agent"] == agent)
        .map(|e| (e["started_ms"].as_u64().expect("started"), e["ended_ms"].as_u64().expect("ended")))
        .collect()
}

#[test]
fn a_leads_five_workers_work_at_once_and_report_as_one_at_a_time() {
    let (_workspace, scenario) = five_workers();
    let slow = || Arc::new(SlowFactory(Duration::from_millis(500))) as Arc<dyn AgentFactory>;
    let (together, events) = run(&scenario, slow(), WireMode::Less, 5);
    // Every worker's first turn (its search) overlaps every other's: none ends before all have started.
    let firsts: Vec<(u64, u64)> = (1..=5).map(|n| turns_of(&events, &format!("w{n}"))[0]).collect();
    let last_start = firsts.iter().map(|t| t.0).max().expect("five");
    let first_end = firsts.iter().map(|t| t.1).min().expect("five");
    assert!(last_start < first_end, "the workers' turns did not overlap: {firsts:?}");
    let timing = together.timing.clone().expect("timed");
    assert_eq!(timing.most_at_once, 5, "{timing:?}");
    assert_eq!(timing.turns, 11, "{timing:?}");

    let (alone, events) = run(&scenario, slow(), WireMode::Less, 1);
    let all: Vec<(u64, u64)> = (1..=5).flat_map(|n| turns_of(&events, &format!("w{n}"))).collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert!(a.1 <= b.0 || b.1 <= a.0, "one at a time, yet {a:?} and {b:?} overlap");
        }
    }
    assert_eq!(alone.timing.as_ref().map(|t| t.most_at_once), Some(1));
    assert_eq!(untimed(&together), untimed(&alone), "what five at once report differs from one at a time");
    assert_eq!(together.totals.turns, alone.totals.turns);
}
