//! Lossless-memory benches: ingest + DAG build throughput (messages per second: archive, message index, gate,
//! session summaries, arcs, epochs) and `expand_query` latency, at 10k and 100k messages.
//!
//! The corpus is `less_eval::corpus` (deterministic engineering conversations, two projects, 8 messages per
//! session). Ingest commits each session durably (one archive transaction and one index transaction per session,
//! as a live run does). The message index here is hash recall alone (stage 1), so the figures do not include
//! embedding every message (about 200 per second on a 2-core machine); `expand_query_rerank_10k` measures a query
//! with the rerank over a 10k-message archive embedded once. Loaded archives are kept in
//! `$LESSRT_CACHE_DIR/bench/` (default `~/.cache/lessrt/bench/`) and reused while they hold the expected count.

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use less_eval::corpus::{CorpusSession, corpus};
use less_runtime::dag::{Condenser, Dag, DagConfig, Extractive, index_dir};
use less_runtime::memory::Memory;

const PER_SESSION: usize = 8;

fn sessions(messages: usize) -> Vec<CorpusSession> {
    corpus(&["alpha", "beta"], messages / PER_SESSION / 2, PER_SESSION, 42)
}

fn open(dir: &Path, with_model: bool) -> Dag {
    let index = if with_model { Memory::open(&index_dir(dir)) } else { Memory::open_without_model(&index_dir(dir)) }
        .expect("message index");
    Dag::open_with(dir, Condenser::new(DagConfig::default(), Arc::new(Extractive)), index).expect("dag")
}

/// Ingests and builds `sessions` into a fresh `dir`; returns the time taken.
fn ingest_and_build(dir: &Path, sessions: &[CorpusSession], with_model: bool) -> Duration {
    let start = Instant::now();
    let mut dag = open(dir, with_model);
    for s in sessions {
        dag.ingest(&s.project, &s.session, &s.messages, 0).expect("ingest");
        dag.end_session(&s.project, &s.session).expect("end");
    }
    dag.build(0).expect("build");
    dag.flush().expect("flush");
    start.elapsed()
}

fn cache_dir() -> PathBuf {
    let base = std::env::var_os("LESSRT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/lessrt"));
    base.join("bench")
}

/// A built archive of `messages` messages, from the cache when it holds one.
fn cached(messages: usize, with_model: bool) -> Dag {
    let dir = cache_dir().join(format!("dag-{}k{}", messages / 1000, if with_model { "-rerank" } else { "" }));
    if dir.exists() {
        let dag = open(&dir, with_model);
        let stats = dag.archive().stats().expect("stats");
        if stats.messages == messages as u64 && stats.pending_messages == 0 {
            return dag;
        }
        drop(dag);
        std::fs::remove_dir_all(&dir).expect("stale cache");
    }
    let took = ingest_and_build(&dir, &sessions(messages), with_model);
    eprintln!("built the {messages}-message archive in {took:.1?}");
    open(&dir, with_model)
}

const QUESTIONS: &[&str] = &[
    "Which storage did we pick for the billing service?",
    "Why did cargo test fail in the scheduler?",
    "What port does the gateway listen on?",
    "How long does the indexer migration take on staging?",
];

fn bench_ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("dag");
    group.sample_size(10);
    for messages in [10_000, 100_000] {
        let corpus = sessions(messages);
        group.throughput(Throughput::Elements(messages as u64));
        group.measurement_time(Duration::from_secs(if messages > 10_000 { 400 } else { 40 }));
        group.bench_function(format!("ingest_build_{}k", messages / 1000), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().expect("tempdir");
                    total += ingest_and_build(dir.path(), &corpus, false);
                }
                total
            });
        });
    }
    group.finish();
}

fn bench_query(c: &mut Criterion) {
    let mut group = c.benchmark_group("dag");
    for messages in [10_000, 100_000] {
        let mut dag = cached(messages, false);
        let mut i = 0usize;
        group.bench_function(format!("expand_query_{}k", messages / 1000), |b| {
            b.iter(|| {
                i += 1;
                black_box(dag.expand_query(QUESTIONS[i % QUESTIONS.len()], 400, None).expect("query"))
            });
        });
    }
    let mut dag = cached(10_000, true);
    if dag.index_mut().rerank_unavailable().is_none() {
        let mut i = 0usize;
        group.bench_function("expand_query_rerank_10k", |b| {
            b.iter(|| {
                i += 1;
                black_box(dag.expand_query(QUESTIONS[i % QUESTIONS.len()], 400, None).expect("query"))
            });
        });
    } else {
        eprintln!(
            "expand_query_rerank_10k skipped: the embedding model is not provisioned (scripts/provision-model.sh)"
        );
    }
    group.finish();
}

criterion_group!(benches, bench_ingest, bench_query);
criterion_main!(benches);
