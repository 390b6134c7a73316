//! The parts of `summary.md` about what a user pays and what can be concluded: the billed headline, the paired
//! statistics in words, a sweep's table and the billed tokens per role.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use less_runtime::WireMode;
use less_runtime::run::ModelSpend;

use super::stats::RatioInterval;
use super::{Bench, thousands};

/// A run's place in the per-role table: sweep value, scenario, mode.
type RunKey<'a> = (Option<&'a str>, &'a str, WireMode);

/// `n` rounded, with thousands separators; a dash for none.
fn rounded(n: Option<f64>) -> String {
    n.map_or_else(|| "—".to_owned(), |n| thousands(n.round() as u64))
}

/// USD with four decimals; a dash for none.
fn usd(n: Option<f64>) -> String {
    n.map_or_else(|| "—".to_owned(), |n| format!("${n:.4}"))
}

/// A mode's name as the sentences use it.
fn name(mode: WireMode) -> String {
    if mode == WireMode::Less { "LESS".to_owned() } else { format!("`{mode}`") }
}

/// A p value for people: three decimals, or `< 0.001`.
pub(super) fn p_value(p: f64) -> String {
    if p < 0.001 { "< 0.001".to_owned() } else { format!("{p:.3}") }
}

impl Bench {
    /// Billed tokens per solved task per mode, first: the figure a user pays, with the wire figure beside it.
    pub(super) fn billed_headline(&self, out: &mut String) {
        if self.billing.is_empty() {
            return;
        }
        let swept = self.billing.iter().any(|t| t.sweep.is_some());
        out.push_str(
            "Billed tokens (prompt + completion of every model call, as the provider counted them) per solved task, \
             over every repeat of the runs with graded tasks; the wire tokens (inline + deref) beside them:\n\n",
        );
        let mut header = String::from(if swept { "| sweep | mode |" } else { "| mode |" });
        let mut rule = String::from(if swept { "|---|---|" } else { "|---|" });
        header.push_str(" solved | model calls | billed | **billed per solved** | wire | wire per solved |");
        rule.push_str("---:|---:|---:|---:|---:|---:|");
        if self.price.is_some() {
            header.push_str(" cost | cost per solved |");
            rule.push_str("---:|---:|");
        }
        let _ = writeln!(out, "{header}\n{rule}");
        for t in &self.billing {
            if swept {
                let _ = write!(out, "| {} ", t.sweep.as_deref().unwrap_or(""));
            }
            let _ = write!(
                out,
                "| {} | {}/{} | {} | {} | **{}** | {} | {} |",
                t.mode,
                t.solved,
                t.graded,
                thousands(t.model_calls),
                thousands(t.billed),
                rounded(t.billed_per_solved.filter(|_| t.model_calls > 0)),
                thousands(t.wire),
                rounded(t.wire_per_solved),
            );
            if self.price.is_some() {
                let _ = write!(out, " {} | {} |", usd(t.cost_usd), usd(t.cost_per_solved_usd));
            }
            out.push('\n');
        }
        out.push('\n');
        if let Some(price) = &self.price {
            let _ = writeln!(
                out,
                "Priced at USD {} per million uncached prompt tokens, {} per million cached, {} per million completion \
                 tokens.\n",
                price.input, price.cached, price.output
            );
        }
    }

    /// The paired statistics in words: solved pairs, whether the difference is significant at 0.05, and whether each
    /// ratio's interval leaves out 1.
    pub(super) fn statistics(&self, out: &mut String) {
        for c in &self.comparison {
            let (a, b) = (name(c.a), name(c.b));
            let at = c.sweep.as_ref().map(|s| format!(" at {s}")).unwrap_or_default();
            let significant = if c.mcnemar_p < 0.05 { "is" } else { "is not" };
            let _ = writeln!(
                out,
                "{a} against {b}{at}, paired over the same {} tasks (every scenario, task and repeat): {a} solved {}, \
                 {b} {}; both {}, only {a} {}, only {b} {}, neither {}. The difference in solved tasks {significant} \
                 significant at 0.05 (exact McNemar p = {}).",
                c.pairs,
                c.solved_both + c.solved_only_a,
                c.solved_both + c.solved_only_b,
                c.solved_both,
                c.solved_only_a,
                c.solved_only_b,
                c.solved_neither,
                p_value(c.mcnemar_p),
            );
            ratio_sentence(out, "Billed tokens", &a, &b, c.billed.as_ref());
            ratio_sentence(out, "Wire tokens (inline + deref)", &a, &b, c.wire.as_ref());
            out.push('\n');
        }
    }

    /// A sweep's table: per value and mode, solved, billed and wire tokens, and billed per solved task.
    pub(super) fn sweep_table(&self, out: &mut String) {
        let Some(sweep) = &self.sweep else { return };
        let _ = writeln!(
            out,
            "Budget sweep of `{}.{}`, every scenario and repeat at each value:\n\n| {} | mode | solved | billed | \
             billed per solved | wire | wire per solved |\n|---:|---|---:|---:|---:|---:|---:|",
            sweep.role, sweep.field, sweep.field
        );
        for value in &sweep.values {
            for t in &value.modes {
                let _ = writeln!(
                    out,
                    "| {} | {} | {}/{} | {} | {} | {} | {} |",
                    value.value,
                    t.mode,
                    t.solved,
                    t.graded,
                    thousands(t.billed),
                    rounded(t.billed_per_solved.filter(|_| t.model_calls > 0)),
                    thousands(t.wire),
                    rounded(t.wire_per_solved),
                );
            }
        }
        out.push('\n');
    }

    /// Billed tokens per role, per scenario and mode (and sweep value), every repeat summed: the roles whose models
    /// were called.
    pub(super) fn billed_roles_table(&self, out: &mut String) {
        let mut rows: Vec<(RunKey<'_>, BTreeMap<&str, ModelSpend>)> = Vec::new();
        for run in &self.runs {
            let key = (run.sweep.as_deref(), run.report.scenario.as_str(), run.report.mode);
            let idx = match rows.iter().position(|(k, _)| *k == key) {
                Some(idx) => idx,
                None => {
                    rows.push((key, BTreeMap::new()));
                    rows.len() - 1
                }
            };
            for (role, r) in run.report.roles.iter().filter(|(_, r)| r.model.calls > 0) {
                let spend = rows[idx].1.entry(role.as_str()).or_default();
                spend.calls += r.model.calls;
                spend.prompt_tokens += r.model.prompt_tokens;
                spend.cached_tokens += r.model.cached_tokens;
                spend.completion_tokens += r.model.completion_tokens;
            }
        }
        if rows.iter().all(|(_, roles)| roles.is_empty()) {
            return;
        }
        out.push_str(
            "Billed tokens per role (the roles whose models were called), every repeat summed:\n\n| scenario | mode | \
             role | calls | prompt | cached | completion | billed |\n|---|---|---|---:|---:|---:|---:|---:|\n",
        );
        for ((sweep, scenario, mode), roles) in &rows {
            let label = sweep.map_or_else(|| (*scenario).to_owned(), |s| format!("{scenario} [{s}]"));
            for (role, m) in roles {
                let _ = writeln!(
                    out,
                    "| {label} | {mode} | {role} | {} | {} | {} | {} | {} |",
                    thousands(m.calls),
                    thousands(m.prompt_tokens),
                    thousands(m.cached_tokens),
                    thousands(m.completion_tokens),
                    thousands(m.billed()),
                );
            }
        }
        out.push('\n');
    }
}

/// One ratio in words: its value, its interval, how it was drawn, and whether the interval leaves out 1.
fn ratio_sentence(out: &mut String, what: &str, a: &str, b: &str, ratio: Option<&RatioInterval>) {
    match ratio {
        Some(r) => {
            let verdict = if r.excludes_one() { "leaves out 1" } else { "includes 1" };
            let _ = writeln!(
                out,
                "{what} per solved task, {a} / {b}: {:.2} (95% task-clustered bootstrap interval {:.2}–{:.2}, {} \
                 resamples, {} skipped with nothing solved in a mode): the interval {verdict}.",
                r.ratio,
                r.low,
                r.high,
                thousands(u64::from(r.resamples)),
                thousands(u64::from(r.skipped)),
            );
        }
        None => {
            let _ = writeln!(out, "{what} per solved task, {a} / {b}: no ratio (a mode solved nothing or spent none).");
        }
    }
}
