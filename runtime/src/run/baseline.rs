//! The baselines' wire text: what an orchestrator without LESS sends instead of SharedBriefMicros and typed
//! messages. Pure functions over content already read, so their output is tested as text.
//!
//! The fair baseline (`verbatim`) is what a careful orchestrator without LESS writes:
//! - a brief restates the goal and the acceptance criteria, the prior reports its writer knows (received, or
//!   restated to it by its own parent) as prose — each report's summary and claims with their citations, not the
//!   content those reports pasted — then what matters now, constraints and risks, and pastes the content of each
//!   pointer its pack names: the span when the pointer names a span, a whole file only when it names a whole file;
//! - the symbols and capsules a brief names are spelled out the same way (the values of the symbols, the capsules'
//!   dependency closure as prior work), so these mechanisms carry the same information in both modes;
//! - a report is a prose summary, its claims with their citations, and the content of each cited span, once.
//!
//! It sends no grants and no budgets (it has none), and an agent does not dereference again what it holds already
//! (pasted to it, or read before): see [`holds`].
//!
//! The whole-file baseline (`verbatim-whole`, [`whole_brief`]) is the rule this runtime used first: every brief pastes
//! the plan's documents and every packed file whole, and restates every prior report of the run with what it pasted,
//! every symbol and every capsule of the scenario.

use less_contract::Engram;
use less_contract::Payload;
use less_contract::Plan;
use less_contract::Pointer;

/// What a fair baseline brief says, with every pasted pointer already read.
#[derive(Debug, Clone, Default)]
pub struct BriefText<'a> {
    /// The writer.
    pub from: &'a str,
    /// The child.
    pub to: &'a str,
    /// The plan: goal and criteria are restated.
    pub plan: Option<&'a Plan>,
    /// The restatements of the prior reports the writer knows, oldest first.
    pub prior_reports: &'a [String],
    /// What matters now (the brief's lines and the child's task lines).
    pub now: &'a [String],
    /// Constraints.
    pub constraints: &'a [String],
    /// Risks.
    pub risks: &'a [String],
    /// The pack's pointers (text form) with their content, in pack order.
    pub pasted: &'a [(String, String)],
    /// The symbols the brief names, as `id: value` lines (the names the child will meet, spelled out).
    pub symbols: &'a [String],
    /// The prior work the brief names: the capsules and their dependency closure, each capsule's text.
    pub prior_work: &'a [String],
}

/// The fair baseline's brief.
pub fn fair_brief(brief: &BriefText<'_>) -> String {
    let mut text = format!("Brief from {} to {}.\n", brief.from, brief.to);
    if let Some(plan) = brief.plan {
        if !plan.goal.is_empty() {
            text.push_str(&format!("\nGoal: {}\n", plan.goal));
        }
        if !plan.criteria.is_empty() {
            text.push_str("\nAcceptance criteria:\n");
            for (idx, criterion) in plan.criteria.iter().enumerate() {
                text.push_str(&format!("{}. {criterion}\n", idx + 1));
            }
        }
    }
    if !brief.prior_reports.is_empty() {
        text.push_str("\nPrior reports:\n");
        for report in brief.prior_reports {
            text.push_str(report);
            if !report.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    push_shared(&mut text, brief.symbols, brief.prior_work);
    for (heading, lines) in
        [("What matters now", brief.now), ("Constraints", brief.constraints), ("Risks", brief.risks)]
    {
        if !lines.is_empty() {
            text.push_str(&format!("\n{heading}:\n"));
            for line in lines {
                text.push_str(&format!("- {line}\n"));
            }
        }
    }
    for (pointer, content) in brief.pasted {
        text.push_str(&format!("\n=== {pointer} ===\n{content}"));
        if !content.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

/// The symbols a brief names (`- id: value`) and the prior work it restates (each capsule's lines), under their
/// headings; nothing when there are none.
fn push_shared(text: &mut String, symbols: &[String], prior_work: &[String]) {
    if !symbols.is_empty() {
        text.push_str("\nNames used:\n");
        for line in symbols {
            text.push_str(&format!("- {line}\n"));
        }
    }
    if !prior_work.is_empty() {
        text.push_str("\nPrior work:\n");
        for capsule in prior_work {
            text.push_str(capsule.trim_end());
            text.push('\n');
        }
    }
}

/// A report as prose: who, what about, the summary, each claim with its citations. This is also what later briefs
/// restate of it.
pub fn report_prose(from: &str, to: &str, payload: &Payload, summary: &str, engrams: &[Engram]) -> String {
    let mut text = format!("Report from {from} to {to}, {}.\n", headline(payload));
    if !summary.trim().is_empty() {
        text.push_str(summary.trim_end());
        text.push('\n');
    }
    for engram in engrams {
        let cited: Vec<String> = engram.pointers.iter().map(ToString::to_string).collect();
        text.push_str(&format!("- {}: {} ({})\n", engram.kind.as_str(), engram.claim, cited.join(", ")));
    }
    text
}

/// The fair baseline's report: its prose, then each cited span's content once, in citation order.
pub fn fair_report(prose: &str, pasted: &[(String, String)]) -> String {
    let mut text = prose.to_owned();
    if !pasted.is_empty() {
        text.push_str("\nSources:\n");
        for (pointer, content) in pasted {
            text.push_str(&format!("=== {pointer} ===\n{content}"));
            if !content.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}

/// What the whole-file baseline's brief says, with every file already read whole.
#[derive(Debug, Clone, Default)]
pub struct WholeBriefText<'a> {
    /// The writer.
    pub from: &'a str,
    /// The child.
    pub to: &'a str,
    /// The plan.
    pub plan: Option<&'a Plan>,
    /// The plan's documents, whole: (location, content).
    pub plan_documents: &'a [(String, String)],
    /// Every report delivered so far in the run, as it was on the wire.
    pub all_reports: &'a [String],
    /// What matters now, constraints and risks, in that order.
    pub lines: &'a [String],
    /// Every packed file not pasted above, whole: (location, content).
    pub files: &'a [(String, String)],
    /// Every symbol of the scenario, as `id: value` lines.
    pub symbols: &'a [String],
    /// Every capsule of the scenario, each capsule's text.
    pub prior_work: &'a [String],
}

/// The whole-file baseline's brief.
pub fn whole_brief(brief: &WholeBriefText<'_>) -> String {
    let (goal, criteria) = brief.plan.map(|p| (p.goal.as_str(), p.criteria.as_slice())).unwrap_or_default();
    let mut text = format!("Brief from {} to {}.\n\n# Plan\n{goal}\n\n# Acceptance criteria\n", brief.from, brief.to);
    for (idx, criterion) in criteria.iter().enumerate() {
        text.push_str(&format!("{}. {criterion}\n", idx + 1));
    }
    for (location, content) in brief.plan_documents {
        text.push_str(&format!("\n# {location}\n{content}\n"));
    }
    text.push_str("\n# Prior reports\n");
    for report in brief.all_reports {
        text.push_str(report);
        text.push('\n');
    }
    push_shared(&mut text, brief.symbols, brief.prior_work);
    text.push_str("\n# What matters now\n");
    for line in brief.lines {
        text.push_str(&format!("- {line}\n"));
    }
    for (location, content) in brief.files {
        text.push_str(&format!("\n# File {location}\n{content}\n"));
    }
    text
}

/// Whether content read through `held` already contains what `wanted` addresses: the same source, and `held` names
/// the whole source, a line range containing `wanted`'s, or the same section, diff path or test.
pub fn holds(held: &Pointer, wanted: &Pointer) -> bool {
    if held.ty() != wanted.ty() || held.location() != wanted.location() {
        return false;
    }
    match (held.span(), wanted.span()) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(h), Some(w)) => match (held.line_range(), wanted.line_range()) {
            (Some((h1, h2)), Some((w1, w2))) => h1 <= w1 && w2 <= h2,
            (None, None) => h == w,
            _ => false,
        },
    }
}

/// One line naming what a report is: its type and the fields that say what it is about.
fn headline(payload: &Payload) -> String {
    match payload {
        Payload::TaskResult { task, status, .. } => format!("task_result {task}: {}", wire_name(status)),
        Payload::GateReport { gate_id, status, .. } => format!("gate_report {gate_id}: {}", wire_name(status)),
        Payload::Escalation { reason, severity, .. } => format!("escalation ({}): {reason}", wire_name(severity)),
        Payload::Question { question, .. } => format!("question: {question}"),
        Payload::TaskClaim { task, .. } => format!("task_claim {task}"),
        Payload::Checkpoint { wave, state, .. } => format!("checkpoint wave {wave}: {}", wire_name(state)),
    }
}

/// The wire name of a serde enum value (`pass`, `blocker`, …).
fn wire_name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

#[cfg(test)]
mod actors;
#[cfg(test)]
mod tests;
