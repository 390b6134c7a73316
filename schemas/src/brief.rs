//! SharedBriefMicro: a parent's ≤30-line distillation for its children — what matters now, constraints, top risks,
//! a pointer pack per child role, budgets and grants (spec §5.3, §7.2), and the symbols and capsules it names.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::budget::Budget;
use crate::grant::Grant;
use crate::pointer::Pointer;
use crate::schema::DocKind;
use crate::valid::Contract;

/// A pointer carried in its text form (`repo:src/lib.rs#L1-L9`), as in pointer packs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PointerText(pub Pointer);

impl Serialize for PointerText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for PointerText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<PointerText, D::Error> {
        let text = String::deserialize(deserializer)?;
        Pointer::parse(&text).map(PointerText).map_err(|v| serde::de::Error::custom(v.message))
    }
}

/// `schemas/shared_brief_micro.v0.1.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedBriefMicro {
    /// Unique id within the run.
    pub brief_id: String,
    /// The parent that wrote it.
    pub from: String,
    /// 1..10 lines: what matters now.
    pub what_matters_now: Vec<String>,
    /// At most 10 standing constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// At most 5 top risks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_risks: Vec<String>,
    /// Per child role, at most 12 pointers to look at first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pointer_packs: BTreeMap<String, Vec<PointerText>>,
    /// Per child role, its budget.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub budgets: BTreeMap<String, Budget>,
    /// Grants to children.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
    /// The symbols the brief names, id → value (the project's symbol table, only these entries).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub symbols: BTreeMap<String, String>,
    /// The capsules the brief names, hydrated: the transitive closure of their `depends`, dependencies first, each
    /// capsule's text (at most 10 lines) once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capsules: Vec<String>,
}

impl Contract for SharedBriefMicro {
    const KIND: DocKind = DocKind::Brief;
}

impl fmt::Display for SharedBriefMicro {
    /// The brief as the child reads it: one line per item, per role pack, per role budget and per grant, so the
    /// line count is exactly what the 30-line rule counts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.what_matters_now {
            writeln!(f, "now: {line}")?;
        }
        for line in &self.constraints {
            writeln!(f, "constraint: {line}")?;
        }
        for line in &self.top_risks {
            writeln!(f, "risk: {line}")?;
        }
        for (role, pack) in &self.pointer_packs {
            let pointers: Vec<String> = pack.iter().map(|p| p.0.to_string()).collect();
            writeln!(f, "pack[{role}]: {}", pointers.join(" "))?;
        }
        for (role, b) in &self.budgets {
            writeln!(
                f,
                "budget[{role}]: inline {} tok, {} engrams, code {}, derefs repo {}/artifact {}/sam {}, deref {} tok",
                b.max_inline_tokens,
                b.max_engrams,
                b.max_inline_code,
                b.max_repo_spans,
                b.max_artifact_sections,
                b.max_sam_items,
                b.max_deref_tokens_total
            )?;
        }
        for (id, value) in &self.symbols {
            writeln!(f, "symbol[{id}]: {value}")?;
        }
        for line in self.capsules.iter().flat_map(|c| c.lines()) {
            writeln!(f, "capsule: {line}")?;
        }
        for grant in &self.grants {
            let t = &grant.terms;
            writeln!(
                f,
                "grant {} -> {}: {} (≤{} derefs, ≤{} tok, {} uses, until {})",
                t.grant_id,
                t.grantee,
                t.patterns.join(" "),
                t.max_derefs,
                t.max_tokens,
                t.uses,
                t.expires_at
            )?;
        }
        Ok(())
    }
}

/// How many lines a brief document renders to (see the `Display` impl of [`SharedBriefMicro`]).
pub(crate) fn brief_line_count(doc: &Value) -> usize {
    let n_items = |key: &str| doc.get(key).and_then(Value::as_array).map_or(0, Vec::len);
    let n_keys = |key: &str| doc.get(key).and_then(Value::as_object).map_or(0, serde_json::Map::len);
    n_items("what_matters_now")
        + n_items("constraints")
        + n_items("top_risks")
        + n_keys("pointer_packs")
        + n_keys("budgets")
        + n_items("grants")
        + n_keys("symbols")
        + doc
            .get("capsules")
            .and_then(Value::as_array)
            .map_or(0, |all| all.iter().filter_map(Value::as_str).map(|c| c.lines().count()).sum())
}
