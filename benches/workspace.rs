//! Workspace index benches: a build from nothing (the harbor fixture, 49 files, and this repository's own sources,
//! 60k+ lines), a refresh with nothing changed, and searches by BM25 alone and with the embedding rerank. Each build
//! prints the files, lines, chunks and on-disk size it made; each search bench the p50 and p95 of its queries.
//! The rerank needs the embedding model (`scripts/provision-model.sh`); its chunk vectors are computed on the first
//! searches (outside the measurement) and reused, as in use.

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use less_runtime::Silent;
use less_runtime::memory::Stages;
use less_runtime::workspace::{SharedIndex, WorkspaceIndex};
use std::sync::Arc;

const QUERIES: &[&str] = &[
    "How long is a stock reservation held for an unpaid order by default?",
    "where is the payment captured",
    "refund an invoice",
    "retry policy for failed webhooks",
    "tax rounding rule",
    "budget gateway refuses oversize messages",
    "grant MAC verification",
    "markdown section resolver",
    "tokenizer cache",
    "inbox spill cap",
    "summarizer escalation",
    "recall rerank fusion weights",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspaces measured: the fixture, and the repository's Rust, TOML and Markdown (as `git` sees it).
fn workspaces() -> Vec<(&'static str, PathBuf)> {
    vec![("harbor", root().join("scenarios/fixtures/uc1-refactor")), ("lessrt", root())]
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("workspace");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    for (name, dir) in workspaces() {
        group.bench_function(format!("build_{name}"), |b| {
            b.iter_batched(
                || tempfile::tempdir().expect("index dir"),
                |at| {
                    let mut index = WorkspaceIndex::open_in(&dir, at.path()).expect("open");
                    index.refresh(&Silent).expect("build");
                    at
                },
                BatchSize::PerIteration,
            )
        });
        let at = tempfile::tempdir().expect("index dir");
        let mut index = WorkspaceIndex::open_in(&dir, at.path()).expect("open");
        let started = Instant::now();
        let built = index.refresh(&Silent).expect("build");
        let stats = index.stats().expect("stats");
        println!(
            "workspace/build_{name}: {} files, {} lines, {} chunks, {:.1} MiB on disk, built once in {} ms",
            built.files,
            stats.lines,
            stats.chunks,
            stats.index_bytes as f64 / 1_048_576.0,
            started.elapsed().as_millis()
        );
        group.bench_function(format!("refresh_unchanged_{name}"), |b| {
            b.iter(|| index.refresh(&Silent).expect("refresh"))
        });
    }
    group.finish();
}

fn search(c: &mut Criterion) {
    let mut group = c.benchmark_group("workspace");
    group.sample_size(20);
    for (name, dir) in workspaces() {
        let at = tempfile::tempdir().expect("index dir");
        let mut index = WorkspaceIndex::open_in(&dir, at.path()).expect("open");
        index.refresh(&Silent).expect("build");
        for stages in [Stages::Hash, Stages::HashRerank] {
            // The first searches embed their candidates; later ones reuse the vectors.
            for query in QUERIES {
                index.search(query, 10, stages, &|_| true).expect("warm");
            }
            let id = format!("search_{name}_{}", if stages == Stages::Hash { "bm25" } else { "rerank" });
            let mut latencies = Vec::new();
            let mut n = 0;
            group.bench_function(&id, |b| {
                b.iter(|| {
                    let query = QUERIES[n % QUERIES.len()];
                    n += 1;
                    let started = Instant::now();
                    let found = index.search(query, 10, stages, &|_| true).expect("search");
                    latencies.push(started.elapsed());
                    found
                })
            });
            if !latencies.is_empty() {
                latencies.sort_unstable();
                let at =
                    |q: usize| latencies[(latencies.len() * q / 100).min(latencies.len() - 1)].as_secs_f64() * 1000.0;
                println!("workspace/{id}: p50 {:.3} ms, p95 {:.3} ms over {} queries", at(50), at(95), latencies.len());
            }
        }
    }
    group.finish();
}

/// Searches from four agents at once through a run's shared index (BM25, this repository): one iteration is 4 × 4
/// searches on a multi-threaded runtime, each on the blocking pool; readers should not wait on each other.
fn concurrent_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("workspace");
    group.sample_size(20);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let at = tempfile::tempdir().expect("index dir");
    let shared = SharedIndex::new(&root(), Some(at.path()));
    let search = |shared: Arc<SharedIndex>, query: &'static str| async move {
        shared.search(query.to_owned(), 10, Stages::Hash, Box::new(|_| true)).await.expect("search")
    };
    runtime.block_on(search(shared.clone(), QUERIES[0]));
    group.bench_function("search_lessrt_bm25_4_agents_x_4", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let agents: Vec<_> = (0..4)
                    .map(|agent| {
                        let shared = shared.clone();
                        tokio::spawn(async move {
                            for n in 0..4 {
                                search(shared.clone(), QUERIES[(agent * 4 + n) % QUERIES.len()]).await;
                            }
                        })
                    })
                    .collect();
                for agent in agents {
                    agent.await.expect("agent");
                }
            })
        })
    });
    group.finish();
}

criterion_group!(benches, build, search, concurrent_search);
criterion_main!(benches);
