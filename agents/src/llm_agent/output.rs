//! A model's JSON answers as types: a worker's action choice, a worker's choice of what to read, a parent's briefs
//! and grant decisions, and reports (findings or answers keyed by task).
//!
//! An answer is read after its schema check, but what reaches these types is still a model's output, so they read
//! it leniently and alike whatever is wrong with it: a field of another type than expected is [`Field::Wrong`] (told
//! apart from one left out, [`Field::Absent`], because a report reads an engram's fields by which are present), an
//! item of another type in a list is skipped or kept as wrong, and a part that is not an object reads as empty.
//! Nothing here refuses: what an answer lacks is decided where it is used.

use std::collections::BTreeMap;

use less_runtime::EngramKind;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// One field of a model's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Field<T> {
    /// Left out.
    #[default]
    Absent,
    /// Present, but not a `T` (`null` included).
    Wrong,
    /// Present and a `T`.
    Is(T),
}

impl<T> Field<T> {
    /// The value, when present and of its type.
    pub(crate) fn get(&self) -> Option<&T> {
        match self {
            Field::Is(value) => Some(value),
            _ => None,
        }
    }

    /// Whether the field was written at all (of any type).
    pub(crate) fn is_present(&self) -> bool {
        !matches!(self, Field::Absent)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(serde_json::from_value(value).map_or(Field::Wrong, Field::Is))
    }
}

/// A part of an answer that reads as its default when it is not of its type (not an object, say).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Lenient<T>(pub(crate) T);

impl<'de, T: DeserializeOwned + Default> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Lenient(serde_json::from_value(value).unwrap_or_default()))
    }
}

impl<T: DeserializeOwned + Default> Lenient<T> {
    /// `value` read as a `T`; its default when it is not one.
    pub(crate) fn of(value: &Value) -> T {
        T::deserialize(value).unwrap_or_default()
    }
}

/// The strings of a list field, in order: items of other types skipped, a field that is not a list empty.
pub(crate) fn texts(field: &Field<Vec<Field<String>>>) -> impl Iterator<Item = &str> {
    field.get().into_iter().flatten().filter_map(|item| item.get().map(String::as_str))
}

/// A worker's choice of its next action (`act.rs`): `{"action": "search", "query": …}`, `list` with a `pattern`,
/// `read` with `pointers`, or `answer`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ActionChoice {
    pub(crate) action: Field<String>,
    pub(crate) query: Field<String>,
    pub(crate) pattern: Field<String>,
    pub(crate) pointers: Field<Vec<Field<String>>>,
}

/// A worker's choice of what to read, and what to ask the run's memory (`roles.rs`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ReadChoice {
    pub(crate) read: Field<Vec<Field<String>>>,
    pub(crate) recall: Field<String>,
}

/// A parent's decision on a child's deref request (`roles.rs`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GrantDecision {
    pub(crate) because: Field<String>,
    pub(crate) grant: Field<bool>,
}

/// A parent's brief for one child (`roles.rs`; the answer is these by child id).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ChildBrief {
    /// The pack, when the child has no graded questions.
    pub(crate) pointers: Field<Vec<Field<String>>>,
    /// The pack by question id.
    pub(crate) questions: Lenient<BTreeMap<String, Field<Vec<Field<String>>>>>,
    /// What matters now.
    pub(crate) now: Field<Vec<Field<String>>>,
}

/// A report: a summary and its engrams, or its answers keyed by task id.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Report {
    pub(crate) summary: Field<String>,
    pub(crate) engrams: Field<Vec<Lenient<EngramAnswer>>>,
    pub(crate) answers: Field<BTreeMap<String, Lenient<EngramAnswer>>>,
}

/// One engram of a report: a `claim` with `pointers`, or (quoting) a `statement` with the `quote` it rests on.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct EngramAnswer {
    pub(crate) kind: Field<EngramKind>,
    pub(crate) claim: Field<String>,
    pub(crate) statement: Field<String>,
    pub(crate) quote: Field<String>,
    pub(crate) pointers: Field<Vec<Field<String>>>,
    pub(crate) confidence: Field<f64>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_field_tells_left_out_from_wrong_and_a_part_not_an_object_reads_empty() {
        let engram = Lenient::<EngramAnswer>::of(&json!({"quote": null, "claim": 3, "pointers": ["a", 1, "b"],
                                                          "confidence": 1, "kind": "nonsense"}));
        assert_eq!(engram.quote, Field::Wrong, "null is written, not left out");
        assert!(engram.quote.is_present() && !engram.statement.is_present());
        assert_eq!(engram.claim, Field::Wrong);
        assert_eq!(texts(&engram.pointers).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(engram.confidence, Field::Is(1.0), "an integer is a number");
        assert_eq!(engram.kind, Field::Wrong);
        let report = Lenient::<Report>::of(&json!({"summary": "s", "engrams": [7, {"claim": "c"}]}));
        let engrams = report.engrams.get().expect("a list");
        assert_eq!((engrams[0].0.claim.get(), engrams[1].0.claim.get()), (None, Some(&"c".to_owned())));
        assert!(Lenient::<Report>::of(&json!([1, 2])).summary.get().is_none());
        let choice = Lenient::<ActionChoice>::of(&json!({"action": "read", "pointers": "repo:a.rs"}));
        assert_eq!((choice.action.get().map(String::as_str), texts(&choice.pointers).count()), (Some("read"), 0));
    }
}
