//! Paired statistics of two modes over the same graded tasks, every repeat pooled: the exact McNemar test of the
//! solved counts and a task-clustered bootstrap of the ratio of tokens per solved task. Pure functions of the runs:
//! the bootstrap draws from a fixed seed ([`BOOTSTRAP_SEED`]) with the crate's splitmix64 generator, so the same runs
//! give the same intervals on every machine.
//!
//! A *pair* is one task of one scenario in one repeat (and sweep value) graded in both modes. A task's *cost* in a run
//! is that run's tokens divided by the run's graded tasks (a run spends for all its tasks at once; the share is the
//! even split). The *cluster* of the bootstrap is the task (scenario and task id): a resample draws as many tasks as
//! there are, with replacement, each bringing every repeat of it in both modes, so repeats of one task, which are not
//! independent, move together. docs/benchmark.md states the method for recomputing it from `bench.json`.

use serde::{Deserialize, Serialize};

use less_runtime::WireMode;

use super::BenchRun;
use crate::rng::Rng;

/// The bootstrap's seed.
pub const BOOTSTRAP_SEED: u64 = 0x0005_9B00_75EE_D059;

/// Resamples of the bootstrap.
pub const RESAMPLES: u32 = 10_000;

/// Mode `a` against mode `b` over the pairs both graded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The first mode (LESS).
    pub a: WireMode,
    /// The second mode (a baseline).
    pub b: WireMode,
    /// The sweep value both ran at (`role.field=value`), in a sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<String>,
    /// Tasks graded in both modes, one per scenario, repeat and task.
    pub pairs: u32,
    /// Pairs solved in both modes.
    pub solved_both: u32,
    /// Pairs solved in `a` only.
    pub solved_only_a: u32,
    /// Pairs solved in `b` only.
    pub solved_only_b: u32,
    /// Pairs solved in neither.
    pub solved_neither: u32,
    /// The exact two-sided McNemar p of the solved counts ([`mcnemar_exact`] of the discordant pairs).
    pub mcnemar_p: f64,
    /// Billed tokens (prompt + completion) per solved task, `a` over `b` (none: a mode solved nothing or `b` was
    /// billed nothing).
    pub billed: Option<RatioInterval>,
    /// Wire tokens (inline + deref) per solved task, `a` over `b`.
    pub wire: Option<RatioInterval>,
}

/// A ratio of tokens per solved task and its 95% task-clustered bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatioInterval {
    /// The ratio over every pair.
    pub ratio: f64,
    /// The 2.5th percentile of the resampled ratios.
    pub low: f64,
    /// The 97.5th percentile of the resampled ratios.
    pub high: f64,
    /// Resamples drawn.
    pub resamples: u32,
    /// Resamples left out: a mode solved nothing in them (or `b` spent nothing), so they have no ratio.
    pub skipped: u32,
    /// The generator's seed.
    pub seed: u64,
}

impl RatioInterval {
    /// Whether the interval leaves 1 out (the ratio differs from even at the 95% level).
    pub fn excludes_one(&self) -> bool {
        self.high < 1.0 || self.low > 1.0
    }
}

/// The exact two-sided McNemar p of `b` pairs solved only in one mode and `c` only in the other: twice the binomial
/// (n = b + c, ½) probability of a count at most min(b, c), at most 1; 1 when there is no discordant pair.
pub fn mcnemar_exact(b: u32, c: u32) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    if n <= 120 {
        // Exactly, in integers: C(120, 60) < 2^117, so every term and the sum fit in a u128.
        let mut choose: u128 = 1;
        let mut tail: u128 = 1;
        for i in 1..=u128::from(k) {
            choose = choose * (u128::from(n) - i + 1) / i;
            tail += choose;
        }
        return ((2 * tail) as f64 / (1u128 << n) as f64).min(1.0);
    }
    // ln C(n, i) - n ln 2, summed in log space (2^-n underflows past n = 1074).
    let ln_half_n = f64::from(n) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0f64;
    let mut terms = Vec::with_capacity(k as usize + 1);
    for i in 0..=k {
        if i > 0 {
            ln_choose += f64::from(n - i + 1).ln() - f64::from(i).ln();
        }
        terms.push(ln_choose - ln_half_n);
    }
    let most = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tail = most.exp() * terms.iter().map(|t| (t - most).exp()).sum::<f64>();
    (2.0 * tail).min(1.0)
}

/// One task's repeats in both modes, summed: solved counts and cost shares.
#[derive(Debug, Clone, Copy, Default)]
struct Cluster {
    solved: [u32; 2],
    billed: [f64; 2],
    wire: [f64; 2],
}

impl Cluster {
    fn add(&mut self, other: &Cluster) {
        for m in 0..2 {
            self.solved[m] += other.solved[m];
            self.billed[m] += other.billed[m];
            self.wire[m] += other.wire[m];
        }
    }
}

/// A run's cost shares of one task: its billed and wire tokens over its graded tasks.
fn shares(run: &BenchRun) -> (f64, f64) {
    let graded = f64::from(run.report.tasks.graded.max(1));
    let totals = &run.report.totals;
    (totals.model.billed() as f64 / graded, super::spent(totals) as f64 / graded)
}

/// Mode `a` against mode `b` over `runs`, the runs of one sweep value (or of a bench without a sweep): the pairs,
/// McNemar, and both ratios with their intervals from `resamples` draws seeded with `seed`. None when no task was
/// graded in both modes.
pub fn compare(runs: &[&BenchRun], a: WireMode, b: WireMode, resamples: u32, seed: u64) -> Option<Comparison> {
    // Clusters in the order their tasks first appear in `a`'s runs.
    let mut clusters: Vec<((&str, &str), Cluster)> = Vec::new();
    let mut counts = [0u32; 4];
    for run_a in runs.iter().filter(|r| r.report.mode == a) {
        let Some(run_b) = runs
            .iter()
            .find(|r| r.report.mode == b && r.report.scenario == run_a.report.scenario && r.repeat == run_a.repeat)
        else {
            continue;
        };
        let (shares_a, shares_b) = (shares(run_a), shares(run_b));
        for item_a in &run_a.report.tasks.items {
            let Some(item_b) = run_b.report.tasks.items.iter().find(|t| t.id == item_a.id) else { continue };
            counts[match (item_a.solved, item_b.solved) {
                (true, true) => 0,
                (true, false) => 1,
                (false, true) => 2,
                (false, false) => 3,
            }] += 1;
            let pair = Cluster {
                solved: [u32::from(item_a.solved), u32::from(item_b.solved)],
                billed: [shares_a.0, shares_b.0],
                wire: [shares_a.1, shares_b.1],
            };
            let key = (run_a.report.scenario.as_str(), item_a.id.as_str());
            match clusters.iter_mut().find(|(k, _)| *k == key) {
                Some((_, cluster)) => cluster.add(&pair),
                None => clusters.push((key, pair)),
            }
        }
    }
    let pairs: u32 = counts.iter().sum();
    if pairs == 0 {
        return None;
    }
    let clusters: Vec<Cluster> = clusters.into_iter().map(|(_, c)| c).collect();
    let (billed, wire) = bootstrap(&clusters, resamples, seed);
    Some(Comparison {
        a,
        b,
        sweep: runs.first().and_then(|r| r.sweep.clone()),
        pairs,
        solved_both: counts[0],
        solved_only_a: counts[1],
        solved_only_b: counts[2],
        solved_neither: counts[3],
        mcnemar_p: mcnemar_exact(counts[1], counts[2]),
        billed,
        wire,
    })
}

/// `a`'s cost per solved task over `b`'s, from summed clusters; none when a mode solved nothing or `b` cost nothing.
fn ratio(total: &Cluster, cost: impl Fn(&Cluster) -> [f64; 2]) -> Option<f64> {
    let [ca, cb] = cost(total);
    let [sa, sb] = total.solved;
    (sa > 0 && sb > 0 && cb > 0.0).then(|| (ca / f64::from(sa)) / (cb / f64::from(sb)))
}

/// The billed and wire ratios with their percentile intervals: each resample draws `clusters.len()` clusters with
/// replacement (`Rng::below`, in order), the same draws serving both ratios.
fn bootstrap(clusters: &[Cluster], resamples: u32, seed: u64) -> (Option<RatioInterval>, Option<RatioInterval>) {
    let mut total = Cluster::default();
    clusters.iter().for_each(|c| total.add(c));
    let billed_of = |c: &Cluster| c.billed;
    let wire_of = |c: &Cluster| c.wire;
    let (point_billed, point_wire) = (ratio(&total, billed_of), ratio(&total, wire_of));
    let mut rng = Rng(seed);
    let (mut billed, mut wire) = (Vec::new(), Vec::new());
    for _ in 0..resamples {
        let mut sample = Cluster::default();
        for _ in 0..clusters.len() {
            sample.add(&clusters[rng.below(clusters.len())]);
        }
        billed.extend(ratio(&sample, billed_of));
        wire.extend(ratio(&sample, wire_of));
    }
    let interval = |point: Option<f64>, mut ratios: Vec<f64>| {
        let ratio = point?;
        ratios.sort_by(f64::total_cmp);
        let skipped = resamples - ratios.len() as u32;
        Some(RatioInterval {
            ratio,
            low: percentile(&ratios, 0.025)?,
            high: percentile(&ratios, 0.975)?,
            resamples,
            skipped,
            seed,
        })
    };
    (interval(point_billed, billed), interval(point_wire, wire))
}

/// The `q` quantile of sorted `values`, interpolated linearly between the order statistics at (len − 1)·q (numpy's
/// default); none when there are none.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let at = last as f64 * q;
    let below = at.floor() as usize;
    let above = (below + 1).min(last);
    Some(sorted[below] + (at - below as f64) * (sorted[above] - sorted[below]))
}

#[cfg(test)]
mod tests;
