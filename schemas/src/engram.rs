//! Engrams: typed claims of at most 500 characters, anchored to 1..12 pointers, with confidence, TTL, scope and
//! provenance (spec §5.2, §14). Built with [`EngramBuilder`], which can only return a valid engram.

use serde::{Deserialize, Serialize};

use crate::error::Violations;
use crate::pointer::Pointer;
use crate::schema::DocKind;
use crate::ttl::Ttl;
use crate::valid::{Contract, Valid};

/// Longest claim, in characters.
pub const MAX_CLAIM_CHARS: usize = 500;
/// Most pointers per engram.
pub const MAX_POINTERS: usize = 12;

/// What an engram claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum EngramKind {
    Fact,
    Decision,
    Risk,
    Todo,
    Constraint,
    Diff,
    Test,
    Perf,
    Policy,
}

impl EngramKind {
    /// The wire name (`"decision"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            EngramKind::Fact => "fact",
            EngramKind::Decision => "decision",
            EngramKind::Risk => "risk",
            EngramKind::Todo => "todo",
            EngramKind::Constraint => "constraint",
            EngramKind::Diff => "diff",
            EngramKind::Test => "test",
            EngramKind::Perf => "perf",
            EngramKind::Policy => "policy",
        }
    }
}

/// Who may read an engram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// This run only.
    Run,
    /// Every run of the same project.
    Project,
    /// The whole organisation (promotion by a parent only).
    Org,
    /// Everyone (promotion by a parent only).
    Global,
}

impl Scope {
    /// The wire name (`"project"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Project => "project",
            Scope::Org => "org",
            Scope::Global => "global",
        }
    }
}

/// Where the knowledge came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Retrieval over the repository and artifacts.
    Rag,
    /// Episodic memory.
    Sam,
    /// An agent's own reasoning.
    Agent,
    /// A tool's output.
    Tool,
}

/// Who made an engram, when, from what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// RFC 3339 timestamp.
    pub created_at: String,
    /// The agent id (or tool name) that created it.
    pub created_by: String,
    /// The kind of source.
    pub source: Source,
}

/// A typed claim anchored to sources. Field for field the object of `schemas/engram.v0.1.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Engram {
    /// Unique id; the builder derives it from the content.
    pub id: String,
    /// What the claim is.
    pub kind: EngramKind,
    /// The claim itself, at most 500 characters.
    pub claim: String,
    /// 1..12 addresses of the sources.
    pub pointers: Vec<Pointer>,
    /// 0.0 ..= 1.0.
    pub confidence: f64,
    /// How long the claim stays in normal recall.
    pub ttl: Ttl,
    /// Who may read it.
    pub scope: Scope,
    /// At most 12 tags of at most 40 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// At most 32 recall keys of at most 80 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_keys: Option<Vec<String>>,
    /// Who, when, from what.
    pub provenance: Provenance,
}

impl Contract for Engram {
    const KIND: DocKind = DocKind::Engram;
}

impl Engram {
    /// Starts an engram of `kind` claiming `claim`, created by `created_by`.
    pub fn builder(kind: EngramKind, claim: impl Into<String>, created_by: impl Into<String>) -> EngramBuilder {
        EngramBuilder {
            id: None,
            kind,
            claim: claim.into(),
            pointers: Vec::new(),
            confidence: 0.8,
            ttl: Ttl::days(7),
            scope: Scope::Run,
            tags: Vec::new(),
            created_at: None,
            created_by: created_by.into(),
            source: Source::Agent,
        }
    }
}

/// Builds an [`Engram`]; [`EngramBuilder::build`] validates.
#[derive(Debug, Clone)]
pub struct EngramBuilder {
    id: Option<String>,
    kind: EngramKind,
    claim: String,
    pointers: Vec<Pointer>,
    confidence: f64,
    ttl: Ttl,
    scope: Scope,
    tags: Vec<String>,
    created_at: Option<String>,
    created_by: String,
    source: Source,
}

impl EngramBuilder {
    /// Adds a pointer to a source.
    pub fn pointer(mut self, pointer: Pointer) -> EngramBuilder {
        self.pointers.push(pointer);
        self
    }

    /// Sets the confidence (default 0.8).
    pub fn confidence(mut self, confidence: f64) -> EngramBuilder {
        self.confidence = confidence;
        self
    }

    /// Sets the TTL (default `P7D`).
    pub fn ttl(mut self, ttl: Ttl) -> EngramBuilder {
        self.ttl = ttl;
        self
    }

    /// Sets the scope (default run).
    pub fn scope(mut self, scope: Scope) -> EngramBuilder {
        self.scope = scope;
        self
    }

    /// Sets the source (default agent).
    pub fn source(mut self, source: Source) -> EngramBuilder {
        self.source = source;
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> EngramBuilder {
        self.tags.push(tag.into());
        self
    }

    /// Sets the creation time (RFC 3339; default now).
    pub fn created_at(mut self, created_at: impl Into<String>) -> EngramBuilder {
        self.created_at = Some(created_at.into());
        self
    }

    /// Sets the id (default: `eg_` and 16 hex digits of the blake3 of kind, claim and pointers).
    pub fn id(mut self, id: impl Into<String>) -> EngramBuilder {
        self.id = Some(id.into());
        self
    }

    /// Validates and returns the engram.
    pub fn build(self) -> Result<Valid<Engram>, Violations> {
        let id = self.id.unwrap_or_else(|| content_id(self.kind, &self.claim, &self.pointers));
        let created_at = self.created_at.unwrap_or_else(crate::now_rfc3339);
        Valid::new(Engram {
            id,
            kind: self.kind,
            claim: self.claim,
            pointers: self.pointers,
            confidence: self.confidence,
            ttl: self.ttl,
            scope: self.scope,
            tags: (!self.tags.is_empty()).then_some(self.tags),
            hash_keys: None,
            provenance: Provenance { created_at, created_by: self.created_by, source: self.source },
        })
    }
}

/// A content-derived id: the same claim about the same sources gets the same id.
fn content_id(kind: EngramKind, claim: &str, pointers: &[Pointer]) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(format!("{kind:?}\n{claim}\n").as_bytes());
    for pointer in pointers {
        hasher.update(pointer.to_string().as_bytes());
        hasher.update(b"\n");
    }
    let hex = hasher.finalize().to_hex();
    format!("eg_{}", &hex[..16])
}
