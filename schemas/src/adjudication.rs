//! Hand adjudication files (`scenarios/adjudication/<scenario>.toml`): a person's verdict on each answer a
//! recording holds, by task and engram, so the grader can be measured against it. The TOML is read through
//! [`crate::scenario_document`], the contract's one TOML reader; this module only types and checks the result.
//!
//! ```toml
//! scenario = "real-ignore"
//! [[answer]]
//! task = "parallel-threads"
//! engram = "eg_ea77b00b20eb19c9"
//! claim = "…"        # copied, for the reader
//! verdict = "wrong"  # right | partly | wrong
//! why = "one line"
//! ```

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::error::{ErrorCode, Violation, Violations};
use crate::scenario::scenario_document;

/// A hand verdict on one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The claim answers the question rightly.
    Right,
    /// Part of it is right, part missing or wrong.
    Partly,
    /// It is wrong.
    Wrong,
}

impl Verdict {
    /// Its name in files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Right => "right",
            Verdict::Partly => "partly",
            Verdict::Wrong => "wrong",
        }
    }

    /// The verdict a name stands for.
    pub fn parse(text: &str) -> Option<Verdict> {
        [Verdict::Right, Verdict::Partly, Verdict::Wrong].into_iter().find(|v| v.as_str() == text)
    }
}

/// One adjudicated answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judged {
    /// The task it answers.
    pub task: String,
    /// The engram that carried it.
    pub engram: String,
    /// Its claim, copied for the reader.
    pub claim: String,
    /// The hand verdict.
    pub verdict: Verdict,
    /// Why, in a line.
    pub why: String,
}

/// The hand adjudication of one scenario's answers, by (task, engram).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adjudication {
    /// The scenario it judges.
    pub scenario: String,
    /// Every answer judged, by task and engram id.
    pub answers: BTreeMap<(String, String), Judged>,
}

impl Adjudication {
    /// Reads an adjudication file.
    pub fn load(path: &Path) -> Result<Adjudication, Violations> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            Violations(vec![Violation::new(
                ErrorCode::InputUnreadable,
                "",
                format!("cannot read {}: {err}", path.display()),
            )])
        })?;
        Adjudication::from_toml(&text)
    }

    /// Parses and checks an adjudication's TOML text: every problem is reported, each with its code and path (a
    /// missing or mistyped field, an unknown verdict, a (task, engram) judged twice).
    pub fn from_toml(text: &str) -> Result<Adjudication, Violations> {
        let doc = scenario_document(text).map_err(|v| Violations(vec![v]))?;
        let mut problems = Vec::new();
        let scenario = string_field(&doc, "scenario", "", &mut problems).unwrap_or_default();
        let mut answers = BTreeMap::new();
        match doc.get("answer") {
            None => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let path = format!("/answer/{i}");
                    let Some(judged) = judged(item, &path, &mut problems) else { continue };
                    let key = (judged.task.clone(), judged.engram.clone());
                    match answers.entry(key) {
                        Entry::Occupied(taken) => {
                            let (task, engram) = taken.key();
                            problems.push(Violation::new(
                                ErrorCode::IdConflict,
                                path,
                                format!("task {task} engram {engram} is judged twice"),
                            ));
                        }
                        Entry::Vacant(free) => {
                            free.insert(judged);
                        }
                    }
                }
            }
            Some(_) => problems.push(schema("/answer", "`answer` must be an array of tables ([[answer]])")),
        }
        for key in doc.as_object().into_iter().flat_map(|o| o.keys()) {
            if key != "scenario" && key != "answer" {
                problems.push(schema(&format!("/{key}"), &format!("unknown field `{key}`")));
            }
        }
        if problems.is_empty() { Ok(Adjudication { scenario, answers }) } else { Err(Violations(problems)) }
    }

    /// The verdict on `engram` answering `task`, if it was judged.
    pub fn verdict(&self, task: &str, engram: &str) -> Option<&Judged> {
        self.answers.get(&(task.to_owned(), engram.to_owned()))
    }
}

/// One `[[answer]]` table, or `None` with its problems pushed.
fn judged(item: &Value, path: &str, problems: &mut Vec<Violation>) -> Option<Judged> {
    let before = problems.len();
    let field = |name: &str, problems: &mut Vec<Violation>| string_field(item, name, path, problems);
    let task = field("task", problems);
    let engram = field("engram", problems);
    let claim = field("claim", problems);
    let why = field("why", problems);
    let verdict = field("verdict", problems).and_then(|text| {
        let verdict = Verdict::parse(&text);
        if verdict.is_none() {
            problems.push(schema(
                &format!("{path}/verdict"),
                &format!("unknown verdict `{text}` (right, partly or wrong)"),
            ));
        }
        verdict
    });
    for key in item.as_object().into_iter().flat_map(|o| o.keys()) {
        if !["task", "engram", "claim", "verdict", "why"].contains(&key.as_str()) {
            problems.push(schema(&format!("{path}/{key}"), &format!("unknown field `{key}`")));
        }
    }
    if problems.len() > before {
        return None;
    }
    Some(Judged { task: task?, engram: engram?, claim: claim?, verdict: verdict?, why: why? })
}

/// The string field `name` of `table` (at `path`), or `None` with a violation pushed.
fn string_field(table: &Value, name: &str, path: &str, problems: &mut Vec<Violation>) -> Option<String> {
    match table.get(name) {
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => {
            problems.push(schema(&format!("{path}/{name}"), &format!("`{name}` must be a string")));
            None
        }
        None => {
            problems.push(schema(&format!("{path}/{name}"), &format!("missing field `{name}`")));
            None
        }
    }
}

fn schema(path: &str, message: &str) -> Violation {
    Violation::new(ErrorCode::SchemaInvalid, path, message)
}

#[cfg(test)]
mod tests;
