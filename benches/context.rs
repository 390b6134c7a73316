//! Benchmarks of the context ledger: compaction time of generated 1k, 10k and 100k-message conversations (it must
//! scale linearly), and the heap it needs.
//!
//! Memory is measured with a counting global allocator (`peak_alloc`): before each timed group, one compaction runs
//! alone and the bench prints the peak of heap bytes allocated during it above what was live before (the input is
//! already built, so it is not counted), with the input's and output's text sizes beside it.

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use less_runtime::context::{ChatMessage, CompactConfig, compact};
use peak_alloc::PeakAlloc;

#[global_allocator]
static PEAK: PeakAlloc = PeakAlloc;

const FILLER: [&str; 8] = [
    "Can you look at the logs from the last deploy?",
    "Here is the output: 212 tests passed, 0 failed.",
    "Looks good to me, merging.",
    "I'll check the dashboard after lunch.",
    "Посмотрю логи чуть позже.",
    "The retry logic waits a few seconds between attempts.",
    "Reading through the design doc now.",
    "Thanks, that helps.",
];

/// A conversation of `n` messages with facts that change, obligations opened and closed, decisions and their
/// changes, questions, secrets and addresses among filler, the same for every run.
fn conversation(n: usize) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::new("system", "You help a small infrastructure team.")];
    for i in 1..n {
        let text = if i % 50 == 0 {
            format!("The host of service-{} is node-{i}.", (i / 50) % 100)
        } else if i % 97 == 0 {
            format!("TODO: review the rollout of feature {}.", i % 40)
        } else if i % 131 == 0 {
            format!("Done: reviewed the rollout of feature {}.", (i / 3) % 40)
        } else if i % 211 == 0 {
            format!("Decision: use queue-{} for the billing jobs.", i % 13)
        } else if i % 307 == 0 {
            format!("Decision changed: use queue-{} for the billing jobs instead of queue-{}.", i % 11, (i / 2) % 13)
        } else if i % 173 == 0 {
            format!("What is the owner of ticket {}?", i % 500)
        } else if i % 89 == 0 {
            format!("api_key=K{i:08}x{:08x}", i.wrapping_mul(2_654_435_761) % 0xFFFF_FFFF)
        } else if i % 61 == 0 {
            format!("ping 10.{}.{}.{} timed out", i % 250, (i / 7) % 250, (i / 13) % 250)
        } else {
            FILLER[i % FILLER.len()].to_owned()
        };
        messages.push(ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, text));
    }
    messages
}

fn text_bytes(messages: &[ChatMessage]) -> usize {
    messages.iter().map(|m| m.content.len() + m.role.len()).sum()
}

fn bench_compact(c: &mut Criterion) {
    let config = CompactConfig::default();
    // Compile the rule and detector tables outside every measurement.
    black_box(compact(&conversation(100), &config));
    let mut group = c.benchmark_group("context/compact");
    for n in [1_000usize, 10_000, 100_000] {
        let messages = conversation(n);
        let before = PEAK.current_usage();
        PEAK.reset_peak_usage();
        let output = compact(&messages, &config);
        let peak = PEAK.peak_usage().saturating_sub(before);
        let ledger_bytes = output.iter().find(|m| m.content.starts_with("Semantic RLE")).map_or(0, |m| m.content.len());
        eprintln!(
            "context/memory/{n}: input {} B of text, output {} B (ledger {ledger_bytes} B), \
             peak heap during compaction {} B",
            text_bytes(&messages),
            text_bytes(&output),
            peak
        );
        drop(output);
        group.throughput(Throughput::Elements(n as u64));
        if n >= 100_000 {
            group.sample_size(10);
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &messages, |b, messages| {
            b.iter(|| compact(black_box(messages), &config))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench_compact
}
criterion_main!(benches);
