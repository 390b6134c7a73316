//! Gateway throughput: envelopes delivered to a budget enforcer actor and answered (validate, count, check, forward
//! to the agent, record in the ledger). The median time per delivery is the latency a gateway adds to a message;
//! its inverse is the checked messages per second of one gateway.

#![allow(missing_docs)] // criterion_group! generates undocumented public functions.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use less_agents::ScriptedFactory;
use less_runtime::run::{Draft, Envelope, EnvelopeKind, LocalRun, RunOptions};
use less_runtime::{Scenario, WireMode};
use serde_json::{Value, json};

const SCENARIO: &str = r#"
name = "bench"
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "dev"
role = "dev"
parent = "lead"
"#;

static N: AtomicU64 = AtomicU64::new(0);

/// A compliant task_result with two engrams (about 300 tokens), unique per call so every count is a real count.
fn compliant() -> Envelope {
    let n = N.fetch_add(1, Ordering::Relaxed);
    let engram = |i: u64| {
        json!({
            "id": format!("eg_{n}_{i}"), "kind": "risk",
            "claim": format!("Moving capture changes when PaymentCaptured is recorded (case {n}); confirm_order reads the status before and after."),
            "pointers": [{"type": "repo", "ref": "src/orders/service.rs", "span": "L134-L170"}, {"type": "test", "ref": "billing::capture_is_idempotent"}],
            "confidence": 0.8, "ttl": "P7D", "scope": "run",
            "provenance": {"created_at": "2026-01-08T10:00:00Z", "created_by": "dev", "source": "agent"}
        })
    };
    let doc = json!({
        "type": "task_result", "from": "dev", "msg_id": format!("m{n}"), "to": "lead", "task": "2", "status": "partial",
        "criteria": [1, 4], "engrams": [engram(0), engram(1)]
    });
    envelope(doc, None)
}

/// A message pasting 4 kB of code: refused.
fn pasted() -> Envelope {
    let n = N.fetch_add(1, Ordering::Relaxed);
    let code: String =
        format!("// {n}\n") + &"fn capture(order: &mut Order) -> Outcome { order.status = Paid; }\n".repeat(60);
    let doc = json!({"type": "question", "from": "dev", "msg_id": format!("p{n}"), "question": "ok?", "body": code});
    envelope(doc, Some(code))
}

fn envelope(doc: Value, inline_code: Option<String>) -> Envelope {
    Envelope {
        from: "dev".into(),
        to: "lead".into(),
        msg_id: doc["msg_id"].as_str().unwrap_or_default().to_owned(),
        kind: EnvelopeKind::Message,
        wire: doc.to_string(),
        doc: Draft::Raw(doc),
        inline_code,
        code_sources: vec!["repo:src/orders/pricing.rs".to_owned()],
        prose: None,
        restated: Vec::new(),
    }
}

fn bench_gateway(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let scenario = Arc::new(Scenario::from_toml(SCENARIO, Path::new(".")).expect("scenario"));
    let options = RunOptions::new(WireMode::Less);
    let run = runtime.block_on(LocalRun::start(scenario, Arc::new(ScriptedFactory), &options)).expect("run starts");
    // Warm the BPE tables and the schemas outside the measurement.
    runtime.block_on(run.deliver(compliant())).expect("deliver").expect("accepted");

    let mut group = c.benchmark_group("gateway");
    group.throughput(Throughput::Elements(1));
    group.bench_function("deliver_compliant_message", |b| {
        b.iter(|| runtime.block_on(run.deliver(black_box(compliant()))).expect("deliver").expect("accepted"))
    });
    // The same message again: its token count comes from the cache, so this is the gateway without the tokenizer
    // (validation, budget rules, ledger, forwarding, the actor round trip).
    let repeated = compliant();
    group.bench_function("deliver_repeated_message", |b| {
        b.iter(|| runtime.block_on(run.deliver(black_box(repeated.clone()))).expect("deliver").expect("accepted"))
    });
    group.bench_function("refuse_pasted_code", |b| {
        b.iter(|| runtime.block_on(run.deliver(black_box(pasted()))).expect("deliver").expect_err("refused"))
    });
    group.finish();
    runtime.block_on(run.stop());
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = bench_gateway
}
criterion_main!(benches);
