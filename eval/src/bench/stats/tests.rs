//! McNemar's exact p on hand-checked tables, the percentile rule, and the comparison with its bootstrap over
//! hand-built runs and over the two committed llm-free recordings' bench.json files pooled as two repeats.

use serde_json::json;

use super::*;
use crate::bench::{Bench, BenchRun};
use less_runtime::run::RunReport;

#[test]
fn mcnemar_is_exact_on_small_tables() {
    // n = 13, min 6: Σ_{i≤6} C(13, i) = 2^12, so p = 2 · 2^12 / 2^13 = 1.
    assert_eq!(mcnemar_exact(6, 7), 1.0);
    assert_eq!(mcnemar_exact(7, 6), 1.0);
    // Every discordant pair one way: 2 · (1/2)^5.
    assert!((mcnemar_exact(0, 5) - 0.0625).abs() < 1e-12, "{}", mcnemar_exact(0, 5));
    // n = 12, min 2: 2 · (1 + 12 + 66) / 4096.
    assert!((mcnemar_exact(2, 10) - 158.0 / 4096.0).abs() < 1e-12, "{}", mcnemar_exact(2, 10));
    assert_eq!(mcnemar_exact(0, 0), 1.0, "no discordant pair: no evidence");
    assert_eq!(mcnemar_exact(1, 0), 1.0);
    // Large tables stay finite: balanced ones near 1, lopsided ones near 0 (2^-2000 underflows to 0, not NaN).
    assert!(mcnemar_exact(2000, 2001) > 0.98);
    assert_eq!(mcnemar_exact(0, 2000), 0.0);
}

#[test]
fn percentiles_interpolate_between_order_statistics() {
    let v = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(percentile(&v, 0.5), Some(2.5));
    assert!((percentile(&v, 0.025).expect("some") - 1.075).abs() < 1e-12);
    assert_eq!(percentile(&v, 1.0), Some(4.0));
    assert_eq!(percentile(&[7.0], 0.975), Some(7.0));
    assert_eq!(percentile(&[], 0.5), None);
}

/// A run of scenario `s` in `mode`, repeat `repeat`: ten tasks `t0`…`t9` of which `solved` are, `billed` model tokens
/// (prompt + completion) and `wire` inline tokens.
fn run(mode: &str, repeat: u32, solved: &[usize], billed: u64, wire: u64) -> BenchRun {
    let items: Vec<_> = (0..10)
        .map(|i| {
            json!({"id": format!("t{i}"), "kind": "locate_rule", "agent": "dev", "role": "dev",
                   "solved": solved.contains(&i), "answer": null, "evidence": ""})
        })
        .collect();
    let report: RunReport = serde_json::from_value(json!({
        "scenario": "s", "mode": mode, "tokenizer": "o200k_base", "checks": [], "over_cap": [], "roles": {},
        "tasks": {"graded": 10, "solved": solved.len(), "items": items},
        "totals": {"inline_tokens": {"mean": 0.0, "p50": 0, "p95": 0, "max": 0, "total": wire}, "deref_tokens": 0,
                   "model": {"calls": 4, "prompt_tokens": billed - 100, "completion_tokens": 100}},
    }))
    .expect("a report");
    BenchRun { report, repeat, depth: 2, agents: 2, task_kinds: Default::default(), lead: "lead".into(), sweep: None }
}

/// Two repeats of ten tasks: LESS solves 5 then 4, verbatim 4 then 6, for half the billed tokens and a third of the
/// wire tokens.
fn runs() -> Vec<BenchRun> {
    vec![
        run("less", 1, &[0, 1, 2, 3, 4], 1000, 500),
        run("less", 2, &[0, 1, 2, 3], 1000, 500),
        run("verbatim", 1, &[0, 1, 2, 5], 2000, 1500),
        run("verbatim", 2, &[0, 1, 2, 3, 4, 5], 2000, 1500),
    ]
}

#[test]
fn a_comparison_pairs_tasks_over_repeats() {
    let runs = runs();
    let refs: Vec<&BenchRun> = runs.iter().collect();
    let c = compare(&refs, WireMode::Less, WireMode::Verbatim, 2000, 7).expect("pairs");
    // Repeat 1: both t0–t2, LESS only t3 t4, verbatim only t5; repeat 2: both t0–t3, verbatim only t4 t5.
    assert_eq!((c.pairs, c.solved_both, c.solved_only_a, c.solved_only_b, c.solved_neither), (20, 7, 2, 3, 8));
    assert_eq!(c.mcnemar_p, 1.0);
    // Billed: LESS 2,000 for 9 solved, verbatim 4,000 for 10: (2000/9)/(400) = 5/9. Wire: (1000/9)/(300) = 10/27.
    let billed = c.billed.clone().expect("a billed ratio");
    assert!((billed.ratio - 5.0 / 9.0).abs() < 1e-12, "{billed:?}");
    let wire = c.wire.clone().expect("a wire ratio");
    assert!((wire.ratio - 10.0 / 27.0).abs() < 1e-12, "{wire:?}");
    for r in [&billed, &wire] {
        assert!(r.low <= r.ratio && r.ratio <= r.high, "the interval brackets the estimate: {r:?}");
        assert!(r.low < r.high, "ten tasks that differ give an interval of some width: {r:?}");
        assert_eq!((r.resamples, r.seed), (2000, 7));
    }
    // A wire ratio is a third of verbatim's solved over LESS's: above 1 only in the rare resample where verbatim
    // solves over three times as many.
    assert!(wire.excludes_one() && wire.high < 1.0, "{wire:?}");
    // Every run spends the same per task, so a resample's ratio moves only with what it solved, and a resample
    // solves nothing in a mode only when it draws none of t0–t5 (LESS solves a task of them in every repeat).
    assert_eq!(billed.skipped, wire.skipped);
    // The same draws again give the same interval; another seed another one.
    assert_eq!(compare(&refs, WireMode::Less, WireMode::Verbatim, 2000, 7), Some(c.clone()));
    let other = compare(&refs, WireMode::Less, WireMode::Verbatim, 2000, 8).expect("pairs");
    assert_ne!(other.billed.as_ref().map(|r| (r.low, r.high)), Some((billed.low, billed.high)));
    // A mode that ran alone has no pair; a mode with no spend has no billed ratio.
    assert_eq!(compare(&refs[..2], WireMode::Less, WireMode::Verbatim, 10, 1), None);
    let mut free = runs.clone();
    for r in &mut free {
        r.report.totals.model = Default::default();
    }
    let free: Vec<&BenchRun> = free.iter().collect();
    let c = compare(&free, WireMode::Less, WireMode::Verbatim, 10, 1).expect("pairs");
    assert!(c.billed.is_none() && c.wire.is_some(), "{c:?}");
}

/// A resample that solves nothing in a mode has no ratio: it is counted as skipped, not drawn again.
#[test]
fn resamples_without_a_solved_task_are_skipped_and_counted() {
    // One task of ten solved in each mode: a resample misses it with probability 0.9^10 ≈ 35%.
    let runs = [run("less", 1, &[0], 100, 100), run("verbatim", 1, &[0], 200, 200)];
    let refs: Vec<&BenchRun> = runs.iter().collect();
    let c = compare(&refs, WireMode::Less, WireMode::Verbatim, 1000, BOOTSTRAP_SEED).expect("pairs");
    let r = c.billed.expect("a ratio");
    assert!((r.ratio - 0.5).abs() < 1e-12 && r.low == 0.5 && r.high == 0.5, "{r:?}");
    assert!((250..=450).contains(&r.skipped), "about 35% of 1,000 skipped: {}", r.skipped);
}

/// The two committed llm-free recordings' bench.json files, read as repeats 1 and 2 of one bench: LESS solves 10 of
/// 92 and the baseline 11, and the difference is far from significant.
#[test]
fn the_committed_llm_free_recordings_pool_to_9_and_8_of_92() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/recordings");
    let mut bench = Bench::default();
    for (repeat, dir) in [(1, "llm-free"), (2, "llm-free-t0.7")] {
        let text = std::fs::read_to_string(root.join(dir).join("bench.json")).expect("committed bench.json");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        for run in doc["runs"].as_array().expect("runs") {
            let mut run: BenchRun = serde_json::from_value(run.clone()).expect("a bench run");
            run.repeat = repeat;
            bench.runs.push(run);
        }
    }
    bench.conclude(None);
    let less = bench.billing.iter().find(|t| t.mode == WireMode::Less).expect("LESS");
    let base = bench.billing.iter().find(|t| t.mode == WireMode::Verbatim).expect("verbatim");
    assert_eq!((less.solved, less.graded, base.solved, base.graded), (9, 92, 8, 92));
    let [c] = &bench.comparison[..] else { panic!("one comparison: {:?}", bench.comparison) };
    assert_eq!(c.pairs, 92);
    assert_eq!((c.solved_both, c.solved_only_a, c.solved_only_b), (3, 6, 5));
    assert_eq!(c.mcnemar_p, 1.0);
    let billed = c.billed.as_ref().expect("billed");
    assert!(billed.low <= billed.ratio && billed.ratio <= billed.high, "{billed:?}");
    let summary = bench.summary_markdown();
    assert!(summary.contains("is not significant at 0.05 (exact McNemar p = 1.000)"), "{summary}");
    assert!(summary.starts_with("Billed tokens (prompt + completion"), "{summary}");
}
