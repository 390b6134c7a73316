//! The benchmark's results: every run of every scenario in every mode (and repeat), and what `lessrt bench` writes
//! from them: `bench.json`, `bench.csv` (one row per scenario × mode × repeat × role) and `summary.md` (the tables
//! docs/benchmark.md shows). Pure functions of the run reports, so the same runs give the same bytes.
//!
//! What a user pays leads: billed tokens (prompt + completion of every model call) per solved task per mode, over every
//! repeat ([`billing`]), with money at `--price`; then the paired statistics of LESS against each baseline over the same
//! tasks ([`stats`]), a budget sweep's table ([`sweep`]) and a per-role billed table.
//!
//! LESS is compared with each baseline on two totals: the inline tokens of every delivered message and recall answer,
//! and the same plus the content dereferenced. The fair baseline pastes what LESS dereferences, so "with derefs" is
//! the like-for-like figure; the inline one is what the hierarchy's messages carry.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use less_runtime::run::{Failure, RoleReport, RunReport};
use less_runtime::{Scenario, TaskKind, WireMode};

pub mod billing;
pub mod stats;
pub mod sweep;

pub use billing::{ModeTotals, Price};
pub use stats::{Comparison, RatioInterval};
pub use sweep::{Sweep, SweepReport, SweepValue};

/// One run of the benchmark: the run report (as `lessrt run --json` writes it) and where it sits in the bench.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRun {
    /// The report, with its graded tasks.
    #[serde(flatten)]
    pub report: RunReport,
    /// 1-based repeat.
    pub repeat: u32,
    /// Levels of the scenario's hierarchy (a lead with children is 2).
    pub depth: usize,
    /// Agents in the scenario.
    pub agents: usize,
    /// How many scenario tasks of each kind there are.
    pub task_kinds: BTreeMap<TaskKind, u32>,
    /// The role of the lead (the agent without a parent).
    pub lead: String,
    /// The budget a sweep set for this run (`role.field=value`, [`Sweep::label`]); none outside a sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<String>,
}

impl BenchRun {
    /// A run of `scenario` reported as `report`, without its timing: a bench file says the same whatever the machine
    /// and the parallelism (the run's own `report.json` keeps the timing).
    pub fn new(scenario: &Scenario, report: RunReport, repeat: u32) -> BenchRun {
        let report = report.untimed();
        let mut task_kinds = BTreeMap::new();
        for task in &scenario.tasks {
            *task_kinds.entry(task.kind).or_insert(0) += 1;
        }
        let lead = scenario.agents.iter().find(|a| a.parent.is_none()).map(|a| a.role.clone()).unwrap_or_default();
        BenchRun {
            report,
            repeat,
            depth: scenario.depth(),
            agents: scenario.agents.len(),
            task_kinds,
            lead,
            sweep: None,
        }
    }

    /// The run, labelled with the sweep value it ran at.
    pub fn with_sweep(mut self, sweep: Option<String>) -> BenchRun {
        self.sweep = sweep;
        self
    }
}

/// Every run of one `lessrt bench`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bench {
    /// In the order they ran: scenario by scenario, mode by mode, repeat by repeat.
    pub runs: Vec<BenchRun>,
    /// Runs that did not finish (a runtime failure, not a failed check), if any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<BenchFailure>,
    /// The recordings the models answered from (`--record`/`--replay`), one per scenario and repeat that has one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recordings: Vec<BenchRecording>,
    /// Prices of `--price` (USD per million tokens), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Per mode (and sweep value): billed and wire tokens per solved task over the runs with graded tasks, every
    /// repeat pooled, and their cost at `price` ([`Bench::conclude`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub billing: Vec<ModeTotals>,
    /// LESS against each baseline over the same tasks, every repeat pooled ([`stats::compare`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparison: Vec<Comparison>,
    /// The budget sweep's totals per value and mode, in a sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepReport>,
    /// The grader's agreement with the hand adjudication of these runs' answers, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjudication: Option<adjudication::Agreement>,
}

/// A recording a bench's models answered from: which model made it and a digest of its exact content, so a
/// `bench.json` names what its figures came from and an edited recording no longer matches it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRecording {
    /// The scenario.
    pub scenario: String,
    /// The 1-based repeat it answered (`--replay A,B`: repeat k from the k-th directory).
    pub repeat: u32,
    /// The model's identity as the recording names it (`name`, `served`, `sha256`).
    pub model: serde_json::Value,
    /// `blake3:<hex>` over the recording's files.
    pub digest: String,
    /// `blake3:<hex>` of the recording's `manifest.json`, which seals every file and the model.
    pub manifest: String,
    /// The sampling temperature of the scenario's `llm` agents, when they share one (a recording at another
    /// temperature is another recording: the request carries it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

/// A run that did not finish.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchFailure {
    /// The scenario.
    pub scenario: String,
    /// The mode.
    pub mode: WireMode,
    /// 1-based repeat.
    pub repeat: u32,
    /// The sweep value it ran at, in a sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<String>,
    /// What went wrong.
    pub error: String,
}

impl Bench {
    /// The scenarios, in the order they ran.
    pub fn scenarios(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for run in &self.runs {
            if !names.contains(&run.report.scenario.as_str()) {
                names.push(&run.report.scenario);
            }
        }
        names
    }

    /// The modes, LESS first.
    pub fn modes(&self) -> Vec<WireMode> {
        let mut modes: Vec<WireMode> = self.runs.iter().map(|r| r.report.mode).collect();
        modes.sort();
        modes.dedup();
        modes
    }

    /// The first repeat of `scenario` in `mode`.
    pub fn run(&self, scenario: &str, mode: WireMode) -> Option<&BenchRun> {
        self.runs.iter().find(|r| r.report.scenario == scenario && r.report.mode == mode)
    }

    /// LESS-mode messages that reached an agent over its MAX_INLINE_TOKENS (a gateway should have refused them).
    pub fn less_over_cap(&self) -> Vec<String> {
        self.runs
            .iter()
            .filter(|r| r.report.mode == WireMode::Less)
            .flat_map(|r| {
                r.report.over_cap.iter().map(move |m| format!("{} (repeat {}): {m}", r.report.scenario, r.repeat))
            })
            .collect()
    }

    /// Where repeats of the same scenario and mode counted different tokens: `scenario mode role: a vs b`.
    pub fn differing_repeats(&self) -> Vec<String> {
        let mut out = Vec::new();
        for run in self.runs.iter().filter(|r| r.repeat > 1) {
            let first = self.runs.iter().find(|r| {
                r.report.scenario == run.report.scenario && r.report.mode == run.report.mode && r.sweep == run.sweep
            });
            let Some(first) = first else { continue };
            for (role, r) in &run.report.roles {
                let a = first.report.roles.get(role).map(|f| (f.inline_tokens.total, f.deref_tokens));
                let b = Some((r.inline_tokens.total, r.deref_tokens));
                if a != b {
                    out.push(format!(
                        "{}{} {} {role}: repeat 1 {:?} vs repeat {} {:?} (inline, deref)",
                        run.report.scenario,
                        run.sweep.as_ref().map(|s| format!(" [{s}]")).unwrap_or_default(),
                        run.report.mode,
                        a,
                        run.repeat,
                        b
                    ));
                }
            }
        }
        out
    }

    /// The bench's files by name, as `lessrt bench` writes them: `bench.json` (this bench, pretty-printed),
    /// `bench.csv` ([`Bench::csv`]) and `summary.md` ([`Bench::summary_markdown`]).
    pub fn files(&self) -> Result<Vec<(&'static str, String)>, serde_json::Error> {
        let json = serde_json::to_string_pretty(&serde_json::to_value(self)?)? + "\n";
        Ok(vec![("bench.json", json), ("bench.csv", self.csv()), ("summary.md", self.summary_markdown())])
    }

    /// Whether the bench passed: no LESS message over its cap, no run that did not finish, no failed check and no
    /// unsolved task.
    pub fn passed(&self) -> bool {
        self.less_over_cap().is_empty() && self.failed.is_empty() && self.failures().is_empty()
    }

    /// Checks that failed, over every run.
    pub fn n_failed_checks(&self) -> usize {
        self.runs.iter().map(|r| r.report.checks.iter().filter(|c| c.failed()).count()).sum()
    }

    /// Graded tasks solved and graded, over every run.
    pub fn n_tasks(&self) -> (u32, u32) {
        self.runs
            .iter()
            .fold((0, 0), |(solved, graded), r| (solved + r.report.tasks.solved, graded + r.report.tasks.graded))
    }

    /// `bench.csv`: a header and one row per scenario × mode × repeat × role, plus a `TOTAL` row per run.
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "scenario,mode,repeat,depth,role,turns,inline_total,inline_mean,inline_p50,inline_p95,inline_max,\
             derefs,deref_tokens,rejections,rejected_tokens,resends,escalations,restarts,\
             model_calls,model_prompt_tokens,model_completion_tokens,tasks_graded,tasks_solved,\
             billed,model_cached_tokens,model_ms,model_counted_calls,sweep\n",
        );
        for run in &self.runs {
            let report = &run.report;
            let rows = report.roles.iter().map(|(role, r)| (role.as_str(), r)).chain([("TOTAL", &report.totals)]);
            for (role, r) in rows {
                let (graded, solved) = tasks_of_role(run, role);
                let t = &r.inline_tokens;
                let _ = writeln!(
                    out,
                    "{},{},{},{},{role},{},{},{:.1},{},{},{},{},{},{},{},{},{},{},{},{},{},{graded},{solved},{},{},{},{},{}",
                    report.scenario,
                    report.mode,
                    run.repeat,
                    run.depth,
                    r.turns,
                    t.total,
                    t.mean,
                    t.p50,
                    t.p95,
                    t.max,
                    r.derefs,
                    r.deref_tokens,
                    r.rejections,
                    r.rejected_tokens,
                    r.resends,
                    r.escalations,
                    r.restarts,
                    r.model.calls,
                    r.model.prompt_tokens,
                    r.model.completion_tokens,
                    r.model.billed(),
                    r.model.cached_tokens,
                    r.model.model_ms,
                    r.model.counted_calls,
                    run.sweep.as_deref().unwrap_or(""),
                );
            }
        }
        out
    }

    /// Fills what `bench.json` concludes from the runs: [`Bench::billing`] per mode (and sweep value),
    /// [`Bench::comparison`] of LESS against each baseline (per sweep value), and the [`Bench::sweep`] report of
    /// `sweep` when the bench swept a budget. Deterministic: the same runs give the same figures.
    pub fn conclude(&mut self, sweep: Option<&Sweep>) {
        let modes = self.modes();
        let mut groups: Vec<Option<&str>> = Vec::new();
        for run in &self.runs {
            if !groups.contains(&run.sweep.as_deref()) {
                groups.push(run.sweep.as_deref());
            }
        }
        let (mut billing, mut comparison) = (Vec::new(), Vec::new());
        for group in groups {
            let runs: Vec<&BenchRun> = self.runs.iter().filter(|r| r.sweep.as_deref() == group).collect();
            if !runs.iter().any(|r| r.report.tasks.graded > 0) {
                continue;
            }
            billing.extend(modes.iter().map(|&m| ModeTotals::of(&runs, m, group, self.price.as_ref())));
            if modes.contains(&WireMode::Less) {
                for &base in modes.iter().filter(|m| m.is_baseline()) {
                    comparison.extend(stats::compare(
                        &runs,
                        WireMode::Less,
                        base,
                        stats::RESAMPLES,
                        stats::BOOTSTRAP_SEED,
                    ));
                }
            }
        }
        self.billing = billing;
        self.comparison = comparison;
        self.sweep = sweep.map(|s| SweepReport::of(s, &self.runs, &modes, self.price.as_ref()));
    }

    /// `summary.md`: billed tokens per solved task per mode (with the wire tokens and any cost), the paired
    /// statistics, a sweep's table, LESS against each baseline per scenario and role, the billed tokens per role, the
    /// graded tasks, and the lead's tokens per turn. The headline, statistics and sweep pool every repeat (they are
    /// [`Bench::conclude`]'s); the per-scenario tables show the first repeat of each run.
    pub fn summary_markdown(&self) -> String {
        let mut out = String::new();
        let modes = self.modes();
        let baselines: Vec<WireMode> = modes.iter().copied().filter(|m| m.is_baseline()).collect();
        self.billed_headline(&mut out);
        self.statistics(&mut out);
        self.sweep_table(&mut out);
        if modes.contains(&WireMode::Less) {
            // Per role against the first baseline (the fair one when it ran); totals only against the others.
            for (idx, &base) in baselines.iter().enumerate() {
                self.comparison_table(&mut out, base, idx == 0);
            }
        }
        self.billed_roles_table(&mut out);
        self.recordings_line(&mut out);
        self.tasks_table(&mut out, &modes);
        self.failure_kinds_table(&mut out);
        self.lead_table(&mut out, &modes);
        self.failures_table(&mut out);
        if let Some(agreement) = &self.adjudication {
            agreement.markdown(&mut out);
        }
        out
    }

    /// What keeps each run from passing: `(scenario, mode, failure)`, failed checks first, then unsolved tasks, in the
    /// order the runs ran (a repeat after the first says which, `#2: …`).
    pub fn failures(&self) -> Vec<(String, WireMode, String)> {
        let mut out = Vec::new();
        for run in &self.runs {
            for failure in run.report.failures() {
                let failure = if run.repeat > 1 { format!("#{}: {failure}", run.repeat) } else { failure };
                out.push((run.report.scenario.clone(), run.report.mode, failure));
            }
        }
        out
    }

    fn failures_table(&self, out: &mut String) {
        let failures = self.failures();
        if failures.is_empty() {
            return;
        }
        out.push_str("\nUnsolved tasks and failed checks:\n\n| scenario | mode | what |\n|---|---|---|\n");
        for (scenario, mode, failure) in failures {
            let _ = writeln!(out, "| {scenario} | {mode} | {} |", failure.replace('|', "\\|"));
        }
    }

    fn comparison_table(&self, out: &mut String, base: WireMode, by_role: bool) {
        let per = if by_role { "per scenario and role" } else { "per scenario" };
        let _ = writeln!(out, "LESS against `{base}`, tokens ({}) {per}:\n", self.tokenizer());
        let _ = writeln!(
            out,
            "| scenario | role | LESS inline | LESS + deref | {base} inline | {base} + deref | inline | with derefs | LESS p95 | {base} p95 |"
        );
        out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for scenario in self.scenarios() {
            let (Some(less), Some(other)) = (self.run(scenario, WireMode::Less), self.run(scenario, base)) else {
                continue;
            };
            let head = format!("**{scenario}** (depth {}, {} agents)", less.depth, less.agents);
            row(out, &head, "**total**", &less.report.totals, Some(&other.report.totals), true);
            if !by_role {
                continue;
            }
            for (role, r) in &less.report.roles {
                row(out, "", role, r, other.report.roles.get(role), false);
            }
            // Roles only the baseline has (none today; a gateway's escalations exist only where something is refused).
            for (role, r) in other.report.roles.iter().filter(|(role, _)| !less.report.roles.contains_key(*role)) {
                row(out, "", role, &RoleReport::default(), Some(r), false);
            }
        }
        out.push('\n');
    }

    fn tasks_table(&self, out: &mut String, modes: &[WireMode]) {
        let with_tasks: Vec<&str> = self
            .scenarios()
            .into_iter()
            .filter(|s| self.runs.iter().any(|r| r.report.scenario == *s && r.report.tasks.graded > 0))
            .collect();
        if with_tasks.is_empty() {
            return;
        }
        out.push_str("Graded tasks: solved, and tokens (inline + deref) per solved task:\n\n");
        let mut header = String::from("| scenario | tasks | kinds |");
        let mut rule = String::from("|---|---:|---|");
        for mode in modes {
            let _ = write!(header, " solved {mode} | per solved task {mode} |");
            rule.push_str("---:|---:|");
        }
        let _ = writeln!(out, "{header}\n{rule}");
        let mut totals: Vec<(u64, u32, u32)> = vec![(0, 0, 0); modes.len()];
        for scenario in with_tasks {
            let Some(first) = modes.iter().find_map(|m| self.run(scenario, *m)) else { continue };
            let kinds: Vec<String> = first.task_kinds.iter().map(|(k, n)| format!("{} {n}", k.as_str())).collect();
            let _ = write!(out, "| {scenario} | {} | {} |", first.report.tasks.graded, kinds.join(", "));
            for (idx, mode) in modes.iter().enumerate() {
                match self.run(scenario, *mode) {
                    Some(run) => {
                        let spent = spent(&run.report.totals);
                        let tasks = &run.report.tasks;
                        totals[idx].0 += spent;
                        totals[idx].1 += tasks.solved;
                        totals[idx].2 += tasks.graded;
                        let _ = write!(out, " {}/{} | {} |", tasks.solved, tasks.graded, per_task(spent, tasks.solved));
                    }
                    None => out.push_str(" — | — |"),
                }
            }
            out.push('\n');
        }
        let graded = totals.first().map_or(0, |t| t.2);
        let _ = write!(out, "| **all** | **{graded}** | |");
        for (spent, solved, graded) in &totals {
            let _ = write!(out, " **{solved}/{graded}** | **{}** |", per_task(*spent, *solved));
        }
        out.push_str("\n\n");
    }

    /// Where the unsolved tasks were lost, per run: counts of each [`Failure`], and of the unsolved tasks whose claim
    /// stated the answer (nothing when every task was solved).
    fn failure_kinds_table(&self, out: &mut String) {
        let unsolved = |run: &BenchRun| run.report.tasks.items.iter().filter_map(|t| t.failure).collect::<Vec<_>>();
        if self.runs.iter().all(|run| unsolved(run).is_empty()) {
            return;
        }
        out.push_str(
            "Unsolved tasks by where they were lost (search → read → cite → state), and how many of them a claim \
             answered right, its citations aside:\n\n| scenario | mode |",
        );
        for kind in Failure::ALL {
            let _ = write!(out, " {} |", kind.as_str());
        }
        out.push_str(" claim right |\n|---|---|");
        out.push_str(&"---:|".repeat(Failure::ALL.len() + 1));
        out.push('\n');
        for run in &self.runs {
            let failures = unsolved(run);
            let repeat = if run.repeat > 1 { format!(" #{}", run.repeat) } else { String::new() };
            let _ = write!(out, "| {} | {}{repeat} |", run.report.scenario, run.report.mode);
            for kind in Failure::ALL {
                let _ = write!(out, " {} |", failures.iter().filter(|f| **f == kind).count());
            }
            let stated = run.report.tasks.items.iter().filter(|t| t.stated).count();
            let _ = writeln!(out, " {stated} |");
        }
        out.push('\n');
    }

    fn lead_table(&self, out: &mut String, modes: &[WireMode]) {
        out.push_str("Inline tokens of each turn of the lead (the role of the agent without a parent), in order:\n\n");
        out.push_str("| scenario | lead | mode | tokens per turn |\n|---|---|---|---|\n");
        for scenario in self.scenarios() {
            for mode in modes {
                let Some(run) = self.run(scenario, *mode) else { continue };
                let lead = run.lead.as_str();
                let Some(r) = run.report.roles.get(lead) else { continue };
                let turns: Vec<String> = r.per_turn.iter().map(|n| thousands(u64::from(*n))).collect();
                let _ = writeln!(out, "| {scenario} | {lead} | {mode} | {} |", turns.join(" · "));
            }
        }
        out.push('\n');
    }

    /// Which model the recordings' answers came from and at which temperature, one line per model and
    /// temperature, naming the scenarios (nothing when no recording was used).
    fn recordings_line(&self, out: &mut String) {
        let mut groups: Vec<(String, Option<f64>, Vec<String>)> = Vec::new();
        for recording in &self.recordings {
            let model = &recording.model;
            let name = model["served"].as_str().or_else(|| model["name"].as_str()).unwrap_or("an unnamed model");
            let mut named = format!("`{name}`");
            if let Some(sha) = model["sha256"].as_str() {
                let _ = write!(named, " (sha256 `{}…`)", sha.chars().take(12).collect::<String>());
            }
            let scenario = match recording.repeat {
                0 | 1 => recording.scenario.clone(),
                k => format!("{} #{k}", recording.scenario),
            };
            match groups.iter_mut().find(|(m, t, _)| *m == named && *t == recording.temperature) {
                Some((_, _, scenarios)) if scenarios.contains(&scenario) => {}
                Some((_, _, scenarios)) => scenarios.push(scenario),
                None => groups.push((named, recording.temperature, vec![scenario])),
            }
        }
        for (model, temperature, scenarios) in &groups {
            let at = temperature.map(|t| format!(" at temperature {t}")).unwrap_or_default();
            let _ = writeln!(out, "Models answered from recordings: {model}{at}, for {}.\n", scenarios.join(", "));
        }
    }

    fn tokenizer(&self) -> &str {
        self.runs.first().map_or("o200k_base", |r| r.report.tokenizer.as_str())
    }
}

/// Tasks graded and solved whose answering agent has `role` (all for `TOTAL`).
fn tasks_of_role(run: &BenchRun, role: &str) -> (u32, u32) {
    let items = run.report.tasks.items.iter().filter(|t| role == "TOTAL" || t.role == role);
    items.fold((0, 0), |(graded, solved), t| (graded + 1, solved + u32::from(t.solved)))
}

/// Inline plus dereferenced tokens: what went over the wire to a role (or a run's totals).
pub(crate) fn spent(r: &RoleReport) -> u64 {
    r.inline_tokens.total + r.deref_tokens
}

fn per_task(spent: u64, solved: u32) -> String {
    if solved == 0 { "—".to_owned() } else { thousands((spent as f64 / f64::from(solved)).round() as u64) }
}

fn row(out: &mut String, scenario: &str, role: &str, less: &RoleReport, base: Option<&RoleReport>, bold: bool) {
    let base = base.cloned().unwrap_or_default();
    let b = |text: String| if bold { format!("**{text}**") } else { text };
    let (l_inline, l_all) = (less.inline_tokens.total, spent(less));
    let (v_inline, v_all) = (base.inline_tokens.total, spent(&base));
    let _ = writeln!(
        out,
        "| {scenario} | {role} | {} | {} | {} | {} | {} | {} | {} | {} |",
        b(thousands(l_inline)),
        b(thousands(l_all)),
        b(thousands(v_inline)),
        b(thousands(v_all)),
        b(percent(l_inline, v_inline)),
        b(percent(l_all, v_all)),
        b(thousands(u64::from(less.inline_tokens.p95))),
        b(thousands(u64::from(base.inline_tokens.p95))),
    );
}

/// `a` as a percentage of `b`, one decimal; a dash when `b` is zero.
pub fn percent(a: u64, b: u64) -> String {
    if b == 0 { "—".to_owned() } else { format!("{:.1}%", 100.0 * a as f64 / b as f64) }
}

/// `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (idx, c) in digits.chars().enumerate() {
        if idx > 0 && (digits.len() - idx).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub mod adjudication;
mod summary;

#[cfg(test)]
mod tests;
