//! Memory benches: recall latency at 10k and 100k engrams, stage 1 alone and with the rerank (query embedding
//! included; each recall bench also prints the p50 and p95 of its queries), and put throughput (one durable put; a bulk load; a bulk load embedded). The corpus is generated
//! deterministically from a fixed vocabulary, so runs compare.
//!
//! Embedding 110k claims takes minutes, so the loaded corpora are kept in `$LESSRT_CACHE_DIR/bench/` (default
//! `~/.cache/lessrt/bench/`) and reused while they hold the expected count; delete the directory to rebuild them.
//! Needs the embedding model (`scripts/provision-model.sh`).

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use less_runtime::memory::{Embedder, Memory, ModelPaths, RecallRequest, Stages};
use less_runtime::{Engram, EngramKind, Pointer, Valid};

const SUBJECTS: &[&str] = &[
    "gateway",
    "budget",
    "capture",
    "invoice",
    "ledger",
    "resolver",
    "grant",
    "scenario",
    "engram",
    "pointer",
    "digest",
    "tokenizer",
    "summary",
    "session",
    "project",
    "scope",
    "cache",
    "port",
    "migration",
    "seed",
];
const VERBS: &[&str] = &["refuses", "records", "moves", "splits", "validates", "counts", "caches", "resolves", "pins"];
const OBJECTS: &[&str] = &[
    "oversize messages",
    "payment events",
    "line spans",
    "artifact sections",
    "expired grants",
    "tax rounding",
    "the resend rule",
    "deref tokens",
    "stale digests",
    "the dev server port",
    "cold engrams",
    "seed data",
];

/// Engram `n` of the corpus: a claim from the vocabulary, a pointer into one of 500 files.
fn corpus_engram(n: usize) -> Valid<Engram> {
    let pick =
        |list: &[&'static str], salt: usize| list[(n.wrapping_mul(2654435761).wrapping_add(salt * 97)) % list.len()];
    let claim = format!(
        "The {} {} {} in module m{} (case {n}); see the {} notes.",
        pick(SUBJECTS, 1),
        pick(VERBS, 2),
        pick(OBJECTS, 3),
        n % 97,
        pick(SUBJECTS, 4)
    );
    Engram::builder(EngramKind::Fact, claim, "bench")
        .pointer(Pointer::parse(&format!("repo:src/m{}/f{}.rs#L1-L20", n % 50, n % 500)).expect("pointer"))
        .tag(pick(SUBJECTS, 5))
        .created_at("2026-01-01T00:00:00Z")
        .build()
        .expect("engram")
}

fn with_model(dir: &std::path::Path) -> Memory {
    let mut memory = Memory::open(dir).expect("memory");
    if let Some(reason) = memory.rerank_unavailable() {
        panic!("the memory benches need the embedding model; run scripts/provision-model.sh ({reason})");
    }
    memory
}

fn loaded(n: usize) -> (tempfile::TempDir, Memory) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = with_model(dir.path());
    let engrams: Vec<Valid<Engram>> = (0..n).map(corpus_engram).collect();
    memory.put_many(&engrams, "bench", 0).expect("bulk load");
    memory.flush().expect("embed");
    (dir, memory)
}

/// The corpus of `n` engrams, loaded and embedded once, then reused across bench runs.
fn cached(n: usize) -> Memory {
    let cache = std::env::var_os("LESSRT_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache/lessrt")))
        .unwrap_or_else(std::env::temp_dir);
    let dir = cache.join("bench").join(format!("memory-{n}"));
    let mut memory = with_model(&dir);
    if memory.stats().expect("stats").hot != n as u64 {
        drop(memory);
        let _ = std::fs::remove_dir_all(&dir);
        memory = with_model(&dir);
        let engrams: Vec<Valid<Engram>> = (0..n).map(corpus_engram).collect();
        for chunk in engrams.chunks(10_000) {
            memory.put_many(chunk, "bench", 0).expect("bulk load");
            memory.flush().expect("embed");
        }
        memory.save().expect("save");
    }
    memory
}

fn bench_recall(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory");
    for n in [10_000usize, 100_000] {
        // Loaded on the first bench that runs, so a filter that selects none of them (`-- embed`) loads no corpus.
        let mut memory: Option<Memory> = None;
        let questions =
            ["which module refuses oversize messages", "where are payment events recorded", "dev server port"];
        for (name, stages) in [("stage1", Stages::Hash), ("both", Stages::HashRerank)] {
            let mut idx = 0;
            // Every query's own time, warm-up included, for the percentiles criterion does not give.
            let mut latencies: Vec<Duration> = Vec::new();
            let id = format!("recall_{name}_k10_{}k", n / 1000);
            group.bench_function(&id, |b| {
                let memory = memory.get_or_insert_with(|| cached(n));
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        idx = (idx + 1) % questions.len();
                        let request = RecallRequest::in_project(black_box(questions[idx]), "bench", 10).stages(stages);
                        let started = Instant::now();
                        black_box(memory.recall(&request).expect("query"));
                        let took = started.elapsed();
                        latencies.push(took);
                        total += took;
                    }
                    total
                })
            });
            if let Some(line) = percentiles(&mut latencies) {
                println!("memory/{id}: {line}");
            }
        }
    }
    group.finish();
}

/// p50 and p95 of the measured queries, or nothing when the bench was filtered out.
fn percentiles(latencies: &mut [Duration]) -> Option<String> {
    if latencies.is_empty() {
        return None;
    }
    latencies.sort_unstable();
    let at = |q: usize| latencies[(latencies.len() * q / 100).min(latencies.len() - 1)].as_secs_f64() * 1000.0;
    Some(format!("p50 {:.3} ms, p95 {:.3} ms over {} queries", at(50), at(95), latencies.len()))
}

fn bench_put(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory");
    group.sample_size(20);
    let (_dir, mut memory) = loaded(1_000);
    let mut n = 1_000_000;
    group.bench_function("put_one_durable", |b| {
        b.iter(|| {
            n += 1;
            memory.put(&corpus_engram(n), "bench", 0).expect("put")
        })
    });
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("put_many_1000", |b| {
        b.iter_batched(
            || {
                n += 1_000;
                (n..n + 1_000).map(corpus_engram).collect::<Vec<_>>()
            },
            |batch| memory.put_many(&batch, "bench", 0).expect("bulk"),
            BatchSize::LargeInput,
        )
    });
    // What the benches above put is embedded here, outside the measurement.
    memory.flush().expect("embed");
    group.bench_function("put_many_1000_embedded", |b| {
        b.iter_batched(
            || {
                n += 1_000;
                (n..n + 1_000).map(corpus_engram).collect::<Vec<_>>()
            },
            |batch| {
                memory.put_many(&batch, "bench", 0).expect("bulk");
                memory.flush().expect("embed")
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// The model alone: 1,000 claims of the corpus in one call, and one query, so the put and recall figures can be
/// split into model time and index time.
fn bench_embed(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory");
    group.sample_size(10);
    let embedder = Embedder::load(&ModelPaths::from_env()).expect("the embedding model (scripts/provision-model.sh)");
    let claims: Vec<String> = (0..1_000).map(|n| corpus_engram(n).claim.clone()).collect();
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("embed_1000", |b| b.iter(|| embedder.embed(black_box(&claims)).expect("embed")));
    // 256 texts of mixed length, like turns of a conversation (one to eight clauses): one call sorts them by length so
    // that each batch of 64 pads little; calls of 64 in the given order pad every batch to its longest text, as
    // before issue 19.
    let mixed: Vec<String> = (0..256)
        .map(|n| (0..1 + (n * 7919) % 8).map(|c| corpus_engram(n * 8 + c).claim.clone()).collect::<Vec<_>>().join(" "))
        .collect();
    group.throughput(Throughput::Elements(256));
    group.bench_function("embed_256_mixed", |b| b.iter(|| embedder.embed(black_box(&mixed)).expect("embed")));
    group.bench_function("embed_256_mixed_in_given_order", |b| {
        b.iter(|| black_box(&mixed).chunks(64).map(|chunk| embedder.embed(chunk).expect("embed").len()).sum::<usize>())
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("embed_one", |b| b.iter(|| embedder.embed_one(black_box(&claims[7])).expect("embed")));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench_recall, bench_put, bench_embed
}
criterion_main!(benches);
