//! The published JSON Schemas (draft 2020-12), embedded in the binary and compiled once per process.
//!
//! The files in `schemas/` are the contract; this module only loads them.
//! References between them (`pointer.v0.1.json` from `engram.v0.1.json`, …) resolve inside an in-memory registry, so
//! validation never touches the network or the file system.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use serde_json::Value;

/// Every schema file, by file name, as shipped in `schemas/`.
pub const SCHEMA_FILES: [(&str, &str); 14] = [
    ("pointer.v0.1.json", include_str!("../pointer.v0.1.json")),
    ("engram.v0.1.json", include_str!("../engram.v0.1.json")),
    ("budget.v0.1.json", include_str!("../budget.v0.1.json")),
    ("grant.v0.1.json", include_str!("../grant.v0.1.json")),
    ("deref_request.v0.1.json", include_str!("../deref_request.v0.1.json")),
    ("shared_brief_micro.v0.1.json", include_str!("../shared_brief_micro.v0.1.json")),
    ("message.v0.1.json", include_str!("../message.v0.1.json")),
    ("task_claim.v0.1.json", include_str!("../task_claim.v0.1.json")),
    ("task_result.v0.1.json", include_str!("../task_result.v0.1.json")),
    ("gate_report.v0.1.json", include_str!("../gate_report.v0.1.json")),
    ("escalation.v0.1.json", include_str!("../escalation.v0.1.json")),
    ("question.v0.1.json", include_str!("../question.v0.1.json")),
    ("checkpoint.v0.1.json", include_str!("../checkpoint.v0.1.json")),
    ("scenario.v0.1.json", include_str!("../scenario.v0.1.json")),
];

/// The base URI of every schema's `$id`.
pub const SCHEMA_BASE: &str = "lessrt://schemas/";

/// The kinds of document `lessrt validate` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocKind {
    /// `engram.v0.1.json`
    Engram,
    /// `pointer.v0.1.json`
    Pointer,
    /// `shared_brief_micro.v0.1.json`
    Brief,
    /// `grant.v0.1.json`
    Grant,
    /// `deref_request.v0.1.json`
    Deref,
    /// `message.v0.1.json` (any of the six typed messages)
    Message,
    /// `budget.v0.1.json`
    Budget,
    /// `scenario.v0.1.json` (scenarios are written in TOML)
    Scenario,
}

impl DocKind {
    /// Every kind.
    pub const ALL: [DocKind; 8] = [
        DocKind::Engram,
        DocKind::Pointer,
        DocKind::Brief,
        DocKind::Grant,
        DocKind::Deref,
        DocKind::Message,
        DocKind::Budget,
        DocKind::Scenario,
    ];

    /// The name used on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            DocKind::Engram => "engram",
            DocKind::Pointer => "pointer",
            DocKind::Brief => "brief",
            DocKind::Grant => "grant",
            DocKind::Deref => "deref",
            DocKind::Message => "message",
            DocKind::Budget => "budget",
            DocKind::Scenario => "scenario",
        }
    }

    /// The schema file that defines this kind.
    pub const fn schema_file(self) -> &'static str {
        match self {
            DocKind::Engram => "engram.v0.1.json",
            DocKind::Pointer => "pointer.v0.1.json",
            DocKind::Brief => "shared_brief_micro.v0.1.json",
            DocKind::Grant => "grant.v0.1.json",
            DocKind::Deref => "deref_request.v0.1.json",
            DocKind::Message => "message.v0.1.json",
            DocKind::Budget => "budget.v0.1.json",
            DocKind::Scenario => "scenario.v0.1.json",
        }
    }

    /// Guesses the kind of a document from its shape (the fields only that kind requires).
    pub fn infer(doc: &Value) -> Option<DocKind> {
        let obj = doc.as_object()?;
        let has = |key: &str| obj.contains_key(key);
        let type_str = obj.get("type").and_then(Value::as_str);
        const MESSAGE_TYPES: [&str; 6] =
            ["task_claim", "task_result", "gate_report", "escalation", "question", "checkpoint"];
        if type_str.is_some_and(|t| MESSAGE_TYPES.contains(&t)) {
            Some(DocKind::Message)
        } else if has("claim") {
            Some(DocKind::Engram)
        } else if type_str.is_some() && has("ref") {
            Some(DocKind::Pointer)
        } else if has("what_matters_now") {
            Some(DocKind::Brief)
        } else if has("grant_id") && has("grantee") {
            Some(DocKind::Grant)
        } else if has("requester") {
            Some(DocKind::Deref)
        } else if has("agents") {
            Some(DocKind::Scenario)
        } else if !obj.is_empty() && obj.keys().all(|k| k.starts_with("max_")) {
            Some(DocKind::Budget)
        } else {
            None
        }
    }
}

impl fmt::Display for DocKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DocKind {
    type Err = String;

    fn from_str(text: &str) -> Result<DocKind, String> {
        DocKind::ALL.into_iter().find(|k| k.as_str() == text).ok_or_else(|| {
            let names: Vec<&str> = DocKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown kind {text:?}; expected one of {}", names.join(", "))
        })
    }
}

/// One compiled validator per kind.
pub(crate) struct Compiled {
    validators: Vec<(DocKind, jsonschema::Validator)>,
}

impl Compiled {
    pub(crate) fn get(&self, kind: DocKind) -> &jsonschema::Validator {
        // Every kind in DocKind::ALL is compiled in `compile`, so the lookup cannot miss.
        &self.validators.iter().find(|(k, _)| *k == kind).expect("every DocKind is compiled").1
    }
}

/// The compiled schemas. Compiling takes milliseconds, so it happens once, on first use.
pub(crate) static COMPILED: LazyLock<Compiled> = LazyLock::new(|| compile().expect("embedded schemas compile"));

/// The parsed schema document of a file in [`SCHEMA_FILES`].
pub fn schema_document(file: &str) -> Option<Value> {
    SCHEMA_FILES.iter().find(|(name, _)| *name == file).and_then(|(_, text)| serde_json::from_str(text).ok())
}

fn compile() -> Result<Compiled, String> {
    let mut documents = Vec::with_capacity(SCHEMA_FILES.len());
    for (name, text) in SCHEMA_FILES {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?;
        documents.push((format!("{SCHEMA_BASE}{name}"), doc));
    }
    let mut builder = jsonschema::Registry::new();
    for (uri, doc) in &documents {
        builder = builder.add(uri, doc).map_err(|e| format!("{uri}: {e}"))?;
    }
    let registry = builder.prepare().map_err(|e| e.to_string())?;
    let mut validators = Vec::with_capacity(DocKind::ALL.len());
    for kind in DocKind::ALL {
        let uri = format!("{SCHEMA_BASE}{}", kind.schema_file());
        let (_, doc) = documents.iter().find(|(u, _)| *u == uri).ok_or_else(|| format!("missing {uri}"))?;
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .with_registry(&registry)
            .build(doc)
            .map_err(|e| format!("{uri}: {e}"))?;
        validators.push((kind, validator));
    }
    Ok(Compiled { validators })
}
