//! Memory benches: stage-1 recall latency at 10k and 100k engrams, and put throughput (one durable put; a bulk
//! load). The corpus is generated deterministically from a fixed vocabulary, so runs compare.

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use less_runtime::memory::Memory;
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

fn loaded(n: usize) -> (tempfile::TempDir, Memory) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut memory = Memory::open(dir.path()).expect("memory");
    let engrams: Vec<Valid<Engram>> = (0..n).map(corpus_engram).collect();
    for chunk in engrams.chunks(10_000) {
        memory.put_many(chunk, "bench", 0).expect("bulk load");
    }
    (dir, memory)
}

fn bench_recall(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory");
    for n in [10_000usize, 100_000] {
        let (_dir, mut memory) = loaded(n);
        let questions =
            ["which module refuses oversize messages", "where are payment events recorded", "dev server port"];
        let mut idx = 0;
        group.bench_function(format!("recall_stage1_k10_{}k", n / 1000), |b| {
            b.iter(|| {
                idx = (idx + 1) % questions.len();
                memory.query(black_box(questions[idx]), "bench", None, 10).expect("query")
            })
        });
    }
    group.finish();
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
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench_recall, bench_put
}
criterion_main!(benches);
