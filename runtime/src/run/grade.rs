//! Grading the scenario's tasks from what the agents actually delivered.
//!
//! A task is solved when one engram of a message its agent delivered (a `Delivered` event in the ledger: refused
//! messages never count) cites, for every gold citation, a pointer overlapping it, and its claim states every gold
//! term and matches every gold pattern. The grader reads the delivered documents only, never the scenario's steps, so
//! a scripted answer and a model's answer are graded alike. Both wire modes deliver the same typed message (the
//! baseline's wire text restates it as prose), so LESS and the baseline are graded by the same rule.

use serde::{Deserialize, Serialize};

use crate::run::ledger::Event;
use less_contract::Engram;
use less_contract::Pointer;
use less_contract::{Gold, OneOf, Scenario, Task, TaskKind};

/// The graded tasks of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    /// Tasks graded (all of the scenario's).
    pub graded: u32,
    /// Tasks solved.
    pub solved: u32,
    /// One verdict per task, in the scenario's order.
    pub items: Vec<TaskVerdict>,
}

/// One task's verdict, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskVerdict {
    /// The task.
    pub id: String,
    /// Its kind.
    pub kind: TaskKind,
    /// The agent expected to answer.
    pub agent: String,
    /// Its role.
    pub role: String,
    /// Whether a delivered engram of the agent satisfies the gold answer.
    pub solved: bool,
    /// The engram that solved it, or the closest one the agent delivered (none if it delivered no engram).
    pub answer: Option<Answer>,
    /// What was found, or what the closest answer lacks.
    pub evidence: String,
}

/// A delivered engram, as graded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The message that carried it.
    pub msg_id: String,
    /// The engram's id.
    pub engram: String,
    /// Its claim.
    pub claim: String,
    /// Its pointers, in text form.
    pub pointers: Vec<String>,
}

/// Grades every task of `scenario` against the delivered messages among `events`.
pub fn grade(scenario: &Scenario, events: &[Event]) -> TaskReport {
    // A task without a gold answer is a question only (`lessrt ask` hands its question down that way): never graded.
    let items: Vec<TaskVerdict> = scenario
        .tasks
        .iter()
        .filter(|task| !(task.gold.cites.is_empty() && task.gold.terms.is_empty() && task.gold.patterns.is_empty()))
        .map(|task| {
            let mut verdict = grade_task(task, events);
            verdict.role = scenario.agent(&task.agent).map(|a| a.role.clone()).unwrap_or_default();
            verdict
        })
        .collect();
    TaskReport { graded: items.len() as u32, solved: items.iter().filter(|v| v.solved).count() as u32, items }
}

/// How far one engram is from the gold answer.
struct Miss {
    cites: Vec<String>,
    terms: Vec<String>,
    patterns: Vec<String>,
}

impl Miss {
    fn count(&self) -> usize {
        self.cites.len() + self.terms.len() + self.patterns.len()
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.cites.is_empty() {
            parts.push(format!("cites nothing overlapping {}", self.cites.join(", ")));
        }
        if !self.terms.is_empty() {
            parts.push(format!("does not state {}", self.terms.join(", ")));
        }
        if !self.patterns.is_empty() {
            parts.push(format!("does not match /{}/", self.patterns.join("/, /")));
        }
        parts.join("; ")
    }
}

fn grade_task(task: &Task, events: &[Event]) -> TaskVerdict {
    let mut best: Option<(Miss, Answer)> = None;
    for (msg_id, engram) in delivered_by(events, &task.agent) {
        let answer = Answer {
            msg_id: msg_id.to_owned(),
            engram: engram.id.clone(),
            claim: engram.claim.clone(),
            pointers: engram.pointers.iter().map(ToString::to_string).collect(),
        };
        let miss = judge(&task.gold, &answer.claim, &engram.pointers);
        if miss.count() == 0 {
            let evidence = format!("{} in {} cites {}", answer.engram, answer.msg_id, answer.pointers.join(" + "));
            return verdict(task, true, Some(answer), evidence);
        }
        // The closest miss is kept, the earliest among equals, so the evidence is stable.
        if best.as_ref().is_none_or(|(m, _)| miss.count() < m.count()) {
            best = Some((miss, answer));
        }
    }
    match best {
        Some((miss, answer)) => {
            let evidence = format!("closest: {} in {} {}", answer.engram, answer.msg_id, miss.describe());
            verdict(task, false, Some(answer), evidence)
        }
        None => verdict(task, false, None, format!("{} delivered no engram", task.agent)),
    }
}

fn verdict(task: &Task, solved: bool, answer: Option<Answer>, evidence: String) -> TaskVerdict {
    TaskVerdict {
        id: task.id.clone(),
        kind: task.kind,
        agent: task.agent.clone(),
        role: String::new(),
        solved,
        answer,
        evidence,
    }
}

/// What `claim` citing `cited` lacks of `gold`.
fn judge(gold: &Gold, claim: &str, cited: &[Pointer]) -> Miss {
    let cites = gold
        .cites
        .iter()
        .filter(|entry| {
            !entry.options().iter().filter_map(|t| Pointer::parse(t).ok()).any(|g| cited.iter().any(|c| covers(c, &g)))
        })
        .map(describe_one_of)
        .collect();
    let terms = gold
        .terms
        .iter()
        .filter(|entry| !entry.options().iter().any(|term| states(claim, term)))
        .map(describe_one_of)
        .collect();
    let patterns = gold
        .patterns
        .iter()
        .filter(|p| !regex::RegexBuilder::new(p).case_insensitive(true).build().is_ok_and(|re| re.is_match(claim)))
        .cloned()
        .collect();
    Miss { cites, terms, patterns }
}

fn describe_one_of(entry: &OneOf) -> String {
    match entry {
        OneOf::One(one) => one.clone(),
        OneOf::Any(any) => format!("one of [{}]", any.join(", ")),
    }
}

/// Whether a cited pointer locates the gold one: the same source, and a line range intersecting the gold's, or the
/// same section, diff path or test. A citation of a whole file locates only a gold citation of that whole file; a
/// gold citation of a whole file is located by any citation inside it.
pub fn covers(cited: &Pointer, gold: &Pointer) -> bool {
    if cited.ty() != gold.ty() || cited.location() != gold.location() {
        return false;
    }
    match (cited.span(), gold.span()) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(c), Some(g)) => match (cited.line_range(), gold.line_range()) {
            (Some((c1, c2)), Some((g1, g2))) => c1 <= g2 && g1 <= c2,
            (None, None) => c == g,
            _ => false,
        },
    }
}

/// Whether `claim` states `term`: case-insensitively, and as whole words where the term begins or ends with one.
pub fn states(claim: &str, term: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let pattern = format!(
        "(?i){}{}{}",
        if word(term.chars().next()) { r"\b" } else { "" },
        regex::escape(term),
        if word(term.chars().last()) { r"\b" } else { "" }
    );
    regex::Regex::new(&pattern).is_ok_and(|re| re.is_match(claim))
}

/// The engrams of messages `agent` delivered, in delivery order, with their message ids.
pub(crate) fn delivered_by<'a>(events: &'a [Event], agent: &'a str) -> impl Iterator<Item = (&'a str, &'a Engram)> {
    events
        .iter()
        .filter_map(move |e| match e {
            Event::Delivered { from, msg_id, doc, .. } if from == agent => Some((msg_id.as_str(), doc)),
            _ => None,
        })
        .flat_map(|(msg_id, doc)| doc.engrams().iter().map(move |e| (msg_id, e)))
}

#[cfg(test)]
mod tests;
