//! Benchmarks of the contract layer: validation, pointer parsing and token counting — the work a gateway does for
//! every message before it is forwarded.

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use less_runtime::{DocKind, Encoding, Pointer, TokenCounter, TypedMessage, Valid, validate};
use serde_json::Value;
use std::hint::black_box;

const ENGRAM: &str = include_str!("../schemas/examples/engram.json");
const MESSAGE: &str = include_str!("../schemas/examples/message.json");

fn bench_validate(c: &mut Criterion) {
    let engram: Value = serde_json::from_str(ENGRAM).expect("example engram");
    let message: Value = serde_json::from_str(MESSAGE).expect("example message");
    // Compile the schemas outside the timed region.
    assert!(validate(DocKind::Engram, &engram).is_empty());
    c.bench_function("validate/engram", |b| b.iter(|| validate(DocKind::Engram, black_box(&engram))));
    c.bench_function("validate/message_with_engram_and_deref", |b| {
        b.iter(|| validate(DocKind::Message, black_box(&message)))
    });
    let mut invalid = engram.clone();
    invalid["claim"] = Value::String("x".repeat(501));
    invalid["ttl"] = Value::String("soon".into());
    c.bench_function("validate/engram_two_violations", |b| b.iter(|| validate(DocKind::Engram, black_box(&invalid))));
    c.bench_function("valid/typed_message_from_json", |b| {
        b.iter(|| Valid::<TypedMessage>::from_json(black_box(MESSAGE)).expect("valid"))
    });
}

fn bench_pointer(c: &mut Criterion) {
    let text = "repo:src/runtime/gateway.rs#L120-L188@4f2a9c1";
    c.bench_function("pointer/parse", |b| b.iter(|| Pointer::parse(black_box(text)).expect("valid")));
    let pointer = Pointer::parse(text).expect("valid");
    c.bench_function("pointer/format", |b| b.iter(|| black_box(&pointer).to_string()));
}

fn bench_tokens(c: &mut Criterion) {
    // A 4 kB message body, what a verbatim agent pastes: here, the published schemas themselves.
    let body = less_runtime::SCHEMA_FILES
        .iter()
        .map(|(_, text)| *text)
        .collect::<String>()
        .chars()
        .take(4096)
        .collect::<String>();
    let counter = TokenCounter::shared(Encoding::O200kBase);
    counter.count("warm up the BPE tables");
    c.bench_function("tokens/o200k_4kB_uncached", |b| b.iter(|| counter.count_uncached(black_box(&body))));
    c.bench_function("tokens/o200k_4kB_cached", |b| b.iter(|| counter.count(black_box(&body))));
    c.bench_function("tokens/o200k_4kB_first_count", |b| {
        b.iter_batched(
            || TokenCounter::new(Encoding::O200kBase),
            |fresh| fresh.count(black_box(&body)),
            BatchSize::SmallInput,
        )
    });
}

/// Counts from four threads at once, each counting texts the cache holds (what a run's gateways do for every
/// delivery): the cache must not make them wait on each other. One iteration is 4 × 1,000 counts.
fn bench_tokens_concurrent(c: &mut Criterion) {
    let counter = TokenCounter::shared(Encoding::O200kBase);
    let texts: Vec<String> = (0..4000).map(|i| format!("engram {i}: the deploy target is beta-{i:02}")).collect();
    for text in &texts {
        counter.count(text);
    }
    c.bench_function("tokens/cached_4_threads_x_1000", |b| {
        b.iter(|| {
            std::thread::scope(|scope| {
                for chunk in texts.chunks(1000) {
                    scope.spawn(move || chunk.iter().map(|t| counter.count(black_box(t))).sum::<u32>());
                }
            })
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench_validate, bench_pointer, bench_tokens, bench_tokens_concurrent
}
criterion_main!(benches);
