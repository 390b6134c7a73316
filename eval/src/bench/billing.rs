//! What a bench costs the way a user pays for it: billed tokens (prompt + completion of every model call, as the
//! provider counted them) per mode, beside the wire tokens (inline + deref) the runtime counts, and optionally money
//! at given prices (`lessrt bench --price`).

use serde::{Deserialize, Serialize};

use less_runtime::WireMode;
use less_runtime::run::ModelSpend;

use super::BenchRun;

/// Prices in USD per million tokens: cached prompt tokens at `cached`, the rest of the prompt at `input`, the
/// completion at `output`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Prompt tokens the server answered from its cache.
    pub cached: f64,
    /// Completion tokens.
    pub output: f64,
}

impl Price {
    /// Parses `input=…,cached=…,output=…` (any order; `input` and `output` required, `cached` defaults to `input`;
    /// each a finite number ≥ 0). The error says what is wrong and what is expected.
    pub fn parse(text: &str) -> Result<Price, String> {
        let expected = "give --price input=USD,cached=USD,output=USD (USD per million tokens; cached optional)";
        let (mut input, mut cached, mut output) = (None, None, None);
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!("{part:?} is not KEY=PRICE: {expected}"));
            };
            let price = match value.trim().parse::<f64>() {
                Ok(p) if p.is_finite() && p >= 0.0 => p,
                _ => return Err(format!("{value:?} is not a price for {key}: a number of USD ≥ 0; {expected}")),
            };
            let slot = match key.trim() {
                "input" => &mut input,
                "cached" => &mut cached,
                "output" => &mut output,
                other => return Err(format!("{other:?} is not a price (input, cached, output): {expected}")),
            };
            if slot.replace(price).is_some() {
                return Err(format!("{key} is priced twice: {expected}"));
            }
        }
        match (input, output) {
            (Some(input), Some(output)) => Ok(Price { input, cached: cached.unwrap_or(input), output }),
            _ => Err(format!("{text:?} lacks input or output: {expected}")),
        }
    }

    /// What `spend` costs in USD.
    pub fn cost(&self, spend: &ModelSpend) -> f64 {
        let cached = spend.cached_tokens.min(spend.prompt_tokens);
        let uncached = spend.prompt_tokens - cached;
        (uncached as f64 * self.input + cached as f64 * self.cached + spend.completion_tokens as f64 * self.output)
            / 1e6
    }
}

/// One mode's totals over the runs with graded tasks, every repeat pooled (of one sweep value, in a sweep).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeTotals {
    /// The mode.
    pub mode: WireMode,
    /// The sweep value (`role.field=value`), in a sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<String>,
    /// Runs counted.
    pub runs: u32,
    /// Tasks graded over them.
    pub graded: u32,
    /// Tasks solved over them.
    pub solved: u32,
    /// Model calls.
    pub model_calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Of them, answered from the server's prompt cache.
    pub cached_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt plus completion tokens.
    pub billed: u64,
    /// Inline plus dereferenced tokens.
    pub wire: u64,
    /// `billed / solved` (none when nothing was solved).
    pub billed_per_solved: Option<f64>,
    /// `wire / solved`.
    pub wire_per_solved: Option<f64>,
    /// What the billed tokens cost at `--price`, in USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// `cost_usd / solved`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_solved_usd: Option<f64>,
}

impl ModeTotals {
    /// The totals of `mode` over `runs` (those of another mode, and runs without graded tasks, left out).
    pub fn of(runs: &[&BenchRun], mode: WireMode, sweep: Option<&str>, price: Option<&Price>) -> ModeTotals {
        let mut t = ModeTotals {
            mode,
            sweep: sweep.map(str::to_owned),
            runs: 0,
            graded: 0,
            solved: 0,
            model_calls: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            completion_tokens: 0,
            billed: 0,
            wire: 0,
            billed_per_solved: None,
            wire_per_solved: None,
            cost_usd: price.map(|_| 0.0),
            cost_per_solved_usd: None,
        };
        for run in runs.iter().filter(|r| r.report.mode == mode && r.report.tasks.graded > 0) {
            let report = &run.report;
            let model = &report.totals.model;
            t.runs += 1;
            t.graded += report.tasks.graded;
            t.solved += report.tasks.solved;
            t.model_calls += model.calls;
            t.prompt_tokens += model.prompt_tokens;
            t.cached_tokens += model.cached_tokens;
            t.completion_tokens += model.completion_tokens;
            t.billed += model.billed();
            t.wire += super::spent(&report.totals);
            if let (Some(cost), Some(price)) = (t.cost_usd.as_mut(), price) {
                *cost += price.cost(model);
            }
        }
        let per = |n: f64| (t.solved > 0).then(|| n / f64::from(t.solved));
        t.billed_per_solved = per(t.billed as f64);
        t.wire_per_solved = per(t.wire as f64);
        t.cost_per_solved_usd = t.cost_usd.and_then(per);
        t
    }
}
