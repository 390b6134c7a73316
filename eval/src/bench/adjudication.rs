//! The grader against the hand adjudication: for every answer of a bench's runs that a person judged
//! (`scenarios/adjudication/<scenario>.toml`), whether the grader's verdict agrees. A task the grader solved agrees
//! with a hand `right`; solved on `partly` or `wrong`, or unsolved on `right`, it disagrees; unsolved on `partly` or
//! `wrong` agrees. Answers nobody judged are counted apart, never guessed.

use std::fmt::Write as _;

use serde::Serialize;

use less_runtime::{Adjudication, Verdict};

use super::Bench;

/// How far the grader agrees with the hand adjudication over a bench's answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Agreement {
    /// Judged answers whose grade agrees, over all judged answers (none judged: `None`).
    pub rate: Option<f64>,
    /// Solved, and judged right.
    pub solved_right: u32,
    /// Solved, and judged partly right or wrong.
    pub solved_not_right: u32,
    /// Unsolved, and judged right.
    pub unsolved_right: u32,
    /// Unsolved, and judged partly right or wrong.
    pub unsolved_not_right: u32,
    /// Answers no adjudication judges.
    pub unjudged: u32,
    /// Where the grader and the hand verdict differ, in the bench's order.
    pub disagreements: Vec<Disagreement>,
}

/// An answer on which the grader and the hand verdict differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    /// The scenario.
    pub scenario: String,
    /// The mode of the run.
    pub mode: String,
    /// Its repeat.
    pub repeat: u32,
    /// The task.
    pub task: String,
    /// The answer's engram.
    pub engram: String,
    /// Whether the grader solved it.
    pub solved: bool,
    /// The hand verdict.
    pub verdict: Verdict,
    /// Why, by hand.
    pub why: String,
}

/// The grader's agreement with `adjudications` (one per scenario, matched by name) over every task item of `bench`'s
/// runs that has an answer.
pub fn agreement(bench: &Bench, adjudications: &[Adjudication]) -> Agreement {
    let mut out = Agreement::default();
    for run in &bench.runs {
        let report = &run.report;
        let judged = adjudications.iter().find(|a| a.scenario == report.scenario);
        for item in &report.tasks.items {
            let Some(answer) = &item.answer else { continue };
            let Some(hand) = judged.and_then(|a| a.verdict(&item.id, &answer.engram)) else {
                out.unjudged += 1;
                continue;
            };
            let right = hand.verdict == Verdict::Right;
            *match (item.solved, right) {
                (true, true) => &mut out.solved_right,
                (true, false) => &mut out.solved_not_right,
                (false, true) => &mut out.unsolved_right,
                (false, false) => &mut out.unsolved_not_right,
            } += 1;
            if item.solved != right {
                out.disagreements.push(Disagreement {
                    scenario: report.scenario.clone(),
                    mode: report.mode.as_str().to_owned(),
                    repeat: run.repeat,
                    task: item.id.clone(),
                    engram: answer.engram.clone(),
                    solved: item.solved,
                    verdict: hand.verdict,
                    why: hand.why.clone(),
                });
            }
        }
    }
    let judged = out.solved_right + out.solved_not_right + out.unsolved_right + out.unsolved_not_right;
    let agreed = out.solved_right + out.unsolved_not_right;
    out.rate = (judged > 0).then(|| f64::from(agreed) / f64::from(judged));
    out
}

impl Agreement {
    /// The section of `summary.md`: the rate, the four counts and the unjudged, and every disagreement.
    pub fn markdown(&self, out: &mut String) {
        let judged = self.solved_right + self.solved_not_right + self.unsolved_right + self.unsolved_not_right;
        let _ = writeln!(out, "### The grader against the hand adjudication\n");
        let rate = self.rate.map_or("n/a".to_owned(), |r| format!("{:.1} %", r * 100.0));
        let _ = writeln!(out, "Agreement: {rate} of {judged} judged answers ({} not judged).\n", self.unjudged);
        let _ = writeln!(out, "| grader | judged right | judged partly or wrong |\n|---|---:|---:|");
        let _ = writeln!(out, "| solved | {} | {} |", self.solved_right, self.solved_not_right);
        let _ = writeln!(out, "| unsolved | {} | {} |\n", self.unsolved_right, self.unsolved_not_right);
        if self.disagreements.is_empty() {
            return;
        }
        let _ = writeln!(out, "| scenario | mode | repeat | task | engram | grader | by hand | why |");
        let _ = writeln!(out, "|---|---|---:|---|---|---|---|---|");
        for d in &self.disagreements {
            let grade = if d.solved { "solved" } else { "unsolved" };
            let why = d.why.replace('|', "\\|");
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | `{}` | {grade} | {} | {why} |",
                d.scenario,
                d.mode,
                d.repeat,
                d.task,
                d.engram,
                d.verdict.as_str()
            );
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests;
