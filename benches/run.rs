//! Whole runs, as `lessrt run` does them: UC1 (a 5-agent, 4-level hierarchy over a 49-file workspace) in each mode,
//! writing its ledger, audit log and memory (the archive of every delivered message, summarized at the end), and the
//! ingest of one long transcript into a fresh store. These are the figures a user waits for; the embedding model is
//! never on their path (messages are embedded by the first query that reranks).

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use less_agents::ScriptedFactory;
use less_runtime::dag::Dag;
use less_runtime::dag::NewMessage;
use less_runtime::run::{RunOptions, run_scenario};
use less_runtime::{Scenario, WireMode};

fn uc1(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/uc1-refactor.toml");
    let scenario = Arc::new(Scenario::load(&path).expect("uc1 loads"));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("run");
    group.sample_size(10);
    for mode in [WireMode::Less, WireMode::Verbatim] {
        group.bench_function(format!("uc1_refactor_{}", mode.as_str()), |b| {
            b.iter(|| {
                let out = tempfile::tempdir().expect("out");
                let options = RunOptions { out_dir: Some(out.path().to_owned()), ..RunOptions::new(mode) };
                let report =
                    runtime.block_on(run_scenario(scenario.clone(), Arc::new(ScriptedFactory), options)).expect("run");
                assert!(report.passed(), "UC1 checks fail");
            })
        });
    }
    group.finish();
}

/// One 30 kB assistant message (a pasted log), the case that used to wait for the model: 54 chunks to embed.
fn ingest(c: &mut Criterion) {
    let content: String =
        (0..600).map(|i| format!("line {i}: capture retried for order {}\n", i * 7919 % 10007)).collect();
    assert!(content.len() >= 20_000);
    let mut group = c.benchmark_group("ingest");
    group.sample_size(10);
    group.bench_function("one_30kB_message", |b| {
        b.iter(|| {
            let dir = tempfile::tempdir().expect("store");
            let mut dag = Dag::open(&dir.path().join("store"), Default::default()).expect("dag");
            let message = NewMessage { role: "assistant".into(), content: content.clone(), name: None, at: None };
            dag.ingest("shop", "s1", &[message], 1_767_225_600).expect("ingest");
            dag.flush().expect("commit");
        })
    });
    group.finish();
}

criterion_group!(benches, uc1, ingest);
criterion_main!(benches);
