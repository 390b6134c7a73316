//! The closed set of LESS error codes, the violation record every check produces, and the crate's error type.
//!
//! Error codes are part of the published contract: their strings never change meaning, and every code carries an
//! instruction that tells the sender what to send instead.
//! Expected failures (a message over budget, an invalid engram) are values of [`Violation`], never panics.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A stable LESS error code.
///
/// The string form (`LESS_SCHEMA_INVALID`, …) is the wire form; see [`ErrorCode::as_str`].
/// New codes may be added in minor versions; existing codes are never renamed or repurposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The input is not parseable JSON (or TOML, for scenarios).
    #[serde(rename = "LESS_JSON_MALFORMED")]
    JsonMalformed,
    /// The input file or stream could not be read.
    #[serde(rename = "LESS_INPUT_UNREADABLE")]
    InputUnreadable,
    /// The document kind could not be inferred from its shape.
    #[serde(rename = "LESS_KIND_UNKNOWN")]
    KindUnknown,
    /// The document violates its JSON Schema (type, enum, length, count, range, required, extra property, format).
    #[serde(rename = "LESS_SCHEMA_INVALID")]
    SchemaInvalid,
    /// A `ttl` is not an ISO-8601 duration.
    #[serde(rename = "LESS_TTL_INVALID")]
    TtlInvalid,
    /// A digest is not of the form `blake3:<64 lowercase hex>`.
    #[serde(rename = "LESS_DIGEST_INVALID")]
    DigestInvalid,
    /// A pointer's `ref`/`span` does not follow the grammar of its type, or a pointer text form does not parse.
    #[serde(rename = "LESS_POINTER_INVALID")]
    PointerInvalid,
    /// A decision or risk engram cites no resolvable source (repo, artifact, sam, diff or test pointer).
    #[serde(rename = "LESS_SOURCE_REQUIRED")]
    SourceRequired,
    /// A text field that must say something is blank.
    #[serde(rename = "LESS_TEXT_EMPTY")]
    TextEmpty,
    /// A SharedBriefMicro renders to more than 30 lines.
    #[serde(rename = "LESS_BRIEF_TOO_LONG")]
    BriefTooLong,
    /// A scenario is well-formed but inconsistent (duplicate agent ids, unknown parent, cycles).
    #[serde(rename = "LESS_SCENARIO_INVALID")]
    ScenarioInvalid,
    /// A message exceeds the receiver's inline budget (tokens, engrams or inline code).
    #[serde(rename = "LESS_BUDGET_EXCEEDED")]
    BudgetExceeded,
    /// A dereference exceeds the requester's deref budget and no valid grant covers it.
    #[serde(rename = "LESS_DEREF_DENIED")]
    DerefDenied,
    /// A grant is forged, expired, used up, or presented by an agent it was not issued to.
    #[serde(rename = "LESS_GRANT_INVALID")]
    GrantInvalid,
    /// A read or write outside the caller's scope or project.
    #[serde(rename = "LESS_SCOPE_DENIED")]
    ScopeDenied,
    /// Too many engram writes from one agent in the current window.
    #[serde(rename = "LESS_RATE_LIMITED")]
    RateLimited,
    /// A pointer does not resolve to content (missing file, section, message, hunk or test; or outside the workspace).
    #[serde(rename = "LESS_POINTER_UNRESOLVED")]
    PointerUnresolved,
    /// Content behind a pointer no longer matches the digest recorded for it.
    #[serde(rename = "LESS_DIGEST_MISMATCH")]
    DigestMismatch,
    /// The receiving agent failed repeatedly and is left down; nothing was delivered.
    #[serde(rename = "LESS_AGENT_DOWN")]
    AgentDown,
    /// A transcript for compaction is not a JSON array (or JSONL) of `{role, content}` messages.
    #[serde(rename = "LESS_TRANSCRIPT_INVALID")]
    TranscriptInvalid,
    /// An engram's id already names a different claim in the project; nothing was stored.
    #[serde(rename = "LESS_ID_CONFLICT")]
    IdConflict,
    /// An argument is outside what the operation accepts (a count over its cap, a value out of range).
    #[serde(rename = "LESS_ARGUMENT_INVALID")]
    ArgumentInvalid,
    /// An output path cannot be written (a file where a directory is needed, a read-only place); nothing ran.
    #[serde(rename = "LESS_OUTPUT_UNWRITABLE")]
    OutputUnwritable,
    /// The store (SQLite and its derived indexes) could not be read or written: a full or read-only disk, a damaged
    /// file, another process holding it too long. What was acknowledged before stays.
    #[serde(rename = "LESS_STORE_FAILED")]
    StoreFailed,
    /// A run could not go on: one of its actors failed (not an agent, which its gateway restarts) or stopped
    /// answering; the run ended with what it had.
    #[serde(rename = "LESS_RUN_FAILED")]
    RunFailed,
    /// `lessrt run --resume` was given a directory it cannot continue: not a run's, of another scenario, a run that
    /// ended (its grant key is gone), or a ledger that does not read back.
    #[serde(rename = "LESS_RUN_NOT_RESUMABLE")]
    RunNotResumable,
    /// An agent is placed on a node the run's cluster does not name, or a node of the cluster could not be reached,
    /// refused the handshake, or is named twice.
    #[serde(rename = "LESS_NODE_UNKNOWN")]
    NodeUnknown,
    /// A claim's surfaces overlap a live claim of another agent; nothing was claimed.
    #[serde(rename = "LESS_CLAIM_CONFLICT")]
    ClaimConflict,
    /// A claim released, renewed or overridden is not the caller's to change (not held by it, released already,
    /// expired, or unknown).
    #[serde(rename = "LESS_CLAIM_NOT_HELD")]
    ClaimNotHeld,
}

impl ErrorCode {
    /// Every code, in documentation order.
    pub const ALL: [ErrorCode; 29] = [
        ErrorCode::JsonMalformed,
        ErrorCode::InputUnreadable,
        ErrorCode::KindUnknown,
        ErrorCode::SchemaInvalid,
        ErrorCode::TtlInvalid,
        ErrorCode::DigestInvalid,
        ErrorCode::PointerInvalid,
        ErrorCode::SourceRequired,
        ErrorCode::TextEmpty,
        ErrorCode::BriefTooLong,
        ErrorCode::ScenarioInvalid,
        ErrorCode::BudgetExceeded,
        ErrorCode::DerefDenied,
        ErrorCode::GrantInvalid,
        ErrorCode::ScopeDenied,
        ErrorCode::RateLimited,
        ErrorCode::PointerUnresolved,
        ErrorCode::DigestMismatch,
        ErrorCode::AgentDown,
        ErrorCode::TranscriptInvalid,
        ErrorCode::IdConflict,
        ErrorCode::ArgumentInvalid,
        ErrorCode::OutputUnwritable,
        ErrorCode::StoreFailed,
        ErrorCode::RunFailed,
        ErrorCode::RunNotResumable,
        ErrorCode::NodeUnknown,
        ErrorCode::ClaimConflict,
        ErrorCode::ClaimNotHeld,
    ];

    /// The stable wire string of this code.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::JsonMalformed => "LESS_JSON_MALFORMED",
            ErrorCode::InputUnreadable => "LESS_INPUT_UNREADABLE",
            ErrorCode::KindUnknown => "LESS_KIND_UNKNOWN",
            ErrorCode::SchemaInvalid => "LESS_SCHEMA_INVALID",
            ErrorCode::TtlInvalid => "LESS_TTL_INVALID",
            ErrorCode::DigestInvalid => "LESS_DIGEST_INVALID",
            ErrorCode::PointerInvalid => "LESS_POINTER_INVALID",
            ErrorCode::SourceRequired => "LESS_SOURCE_REQUIRED",
            ErrorCode::TextEmpty => "LESS_TEXT_EMPTY",
            ErrorCode::BriefTooLong => "LESS_BRIEF_TOO_LONG",
            ErrorCode::ScenarioInvalid => "LESS_SCENARIO_INVALID",
            ErrorCode::BudgetExceeded => "LESS_BUDGET_EXCEEDED",
            ErrorCode::DerefDenied => "LESS_DEREF_DENIED",
            ErrorCode::GrantInvalid => "LESS_GRANT_INVALID",
            ErrorCode::ScopeDenied => "LESS_SCOPE_DENIED",
            ErrorCode::RateLimited => "LESS_RATE_LIMITED",
            ErrorCode::PointerUnresolved => "LESS_POINTER_UNRESOLVED",
            ErrorCode::DigestMismatch => "LESS_DIGEST_MISMATCH",
            ErrorCode::AgentDown => "LESS_AGENT_DOWN",
            ErrorCode::TranscriptInvalid => "LESS_TRANSCRIPT_INVALID",
            ErrorCode::IdConflict => "LESS_ID_CONFLICT",
            ErrorCode::ArgumentInvalid => "LESS_ARGUMENT_INVALID",
            ErrorCode::OutputUnwritable => "LESS_OUTPUT_UNWRITABLE",
            ErrorCode::StoreFailed => "LESS_STORE_FAILED",
            ErrorCode::RunFailed => "LESS_RUN_FAILED",
            ErrorCode::RunNotResumable => "LESS_RUN_NOT_RESUMABLE",
            ErrorCode::NodeUnknown => "LESS_NODE_UNKNOWN",
            ErrorCode::ClaimConflict => "LESS_CLAIM_CONFLICT",
            ErrorCode::ClaimNotHeld => "LESS_CLAIM_NOT_HELD",
        }
    }

    /// What the sender should send instead. One sentence, imperative, stable enough to show to a model.
    pub const fn instruction(self) -> &'static str {
        match self {
            ErrorCode::JsonMalformed => {
                "Send one well-formed JSON document (TOML for scenarios); check quoting, commas and brackets."
            }
            ErrorCode::InputUnreadable => {
                "Check that the file exists and is readable, or pipe the document on standard input with `-`."
            }
            ErrorCode::KindUnknown => {
                "Pass --kind (engram, pointer, brief, grant, deref, message, budget or scenario) or send a document of a known shape."
            }
            ErrorCode::SchemaInvalid => {
                "Resend the document so it satisfies its schema in schemas/: fix the field at the reported path."
            }
            ErrorCode::TtlInvalid => "Send ttl as an ISO-8601 duration such as PT6H, P7D or P1DT12H.",
            ErrorCode::DigestInvalid => {
                "Send digests as blake3:<64 lowercase hex>, exactly as returned by a dereference."
            }
            ErrorCode::PointerInvalid => {
                "Send pointers in their typed form, e.g. repo:src/lib.rs#L10-L20@<rev>, artifact:SPEC.md#sec=Name, sam:decision:key, diff:a..b#path, test:suite::name, url:https://…"
            }
            ErrorCode::SourceRequired => {
                "Anchor decision and risk engrams to at least one repo, artifact, sam, diff or test pointer."
            }
            ErrorCode::TextEmpty => "Send a non-blank value for the reported field.",
            ErrorCode::BriefTooLong => {
                "Cut the brief to at most 30 lines: keep what matters now, move detail behind pointers."
            }
            ErrorCode::ScenarioInvalid => {
                "Fix the scenario: agent ids must be unique, every parent must exist and the hierarchy must be a tree; steps name agents of the scenario, briefs go to children, grants to descendants, and the workspace is a relative path inside the scenario's directory."
            }
            ErrorCode::BudgetExceeded => {
                "Resend as at most the allowed engrams with pointers instead of pasted content; request a deref for anything longer."
            }
            ErrorCode::DerefDenied => {
                "Request fewer spans within your deref budget, or ask your parent for a grant covering these pointers."
            }
            ErrorCode::GrantInvalid => {
                "Ask your parent for a fresh grant issued to you; grants cannot be edited, shared or reused past their uses."
            }
            ErrorCode::ScopeDenied => {
                "Read and write within your own run or project; ask a parent to promote engrams to org or global."
            }
            ErrorCode::RateLimited => "Send fewer engrams: merge related claims, then retry after the current window.",
            ErrorCode::PointerUnresolved => {
                "Point at content that exists inside the workspace: check the path, section, message id, hunk or test name."
            }
            ErrorCode::DigestMismatch => {
                "The source changed since it was cited: dereference it again and cite the new digest."
            }
            ErrorCode::AgentDown => {
                "The receiver is down after repeated failures: send to its parent, who was told by an escalation."
            }
            ErrorCode::TranscriptInvalid => {
                "Send a JSON array, or one JSON object per line, of chat messages such as {\"role\": \"user\", \"content\": \"text\"} (roles: system, developer, user, assistant, tool, function)."
            }
            ErrorCode::IdConflict => {
                "Give the engram an id of its own: this one already names a different claim (ids derived from kind, claim and sources, as `eg_` + blake3, never collide)."
            }
            ErrorCode::ArgumentInvalid => {
                "Pass the value within the range the message names (e.g. memory query --k between 1 and 1000); see --help."
            }
            ErrorCode::OutputUnwritable => {
                "Name an output you can write: a directory (created if missing) where a directory is asked for, a file path whose directory you can write."
            }
            ErrorCode::StoreFailed => {
                "Check the store directory's disk space and permissions and retry (another process may have held it); `lessrt memory reindex` rebuilds damaged indexes from SQLite."
            }
            ErrorCode::RunFailed => {
                "Read the message for the part that failed, fix its cause (disk, model server, workspace) and run again; report it as a bug if it repeats."
            }
            ErrorCode::RunNotResumable => {
                "Resume a directory `lessrt run` wrote and did not finish (`runs/<scenario>`, holding command.json, and per mode ledger.jsonl, resume.json and grant.key), with the scenario file unchanged; otherwise run the scenario again from the start."
            }
            ErrorCode::NodeUnknown => {
                "Place the agent on a node named in the scenario's [cluster] nodes (or the --cluster file), or leave `node` out to keep it on the head; start each node with `lessrt node --name NAME --listen ADDR` and the run's cookie."
            }
            ErrorCode::ClaimConflict => {
                "Claim other surfaces, wait until the holder releases its claim or it expires, or, if you must change them now, claim again with an override and your reason: a conflict record names both intents."
            }
            ErrorCode::ClaimNotHeld => {
                "Release or renew only a live claim you hold (list them with less_claims); claim the surfaces again if yours expired."
            }
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule broken by one document, at one place in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Which rule was broken.
    pub code: ErrorCode,
    /// RFC 6901 JSON pointer to the offending value inside the document (`""` is the whole document).
    pub path: String,
    /// What is wrong, in words.
    pub message: String,
}

impl Violation {
    /// Creates a violation at `path`.
    pub fn new(code: ErrorCode, path: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation { code, path: path.into(), message: message.into() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() { "/" } else { &self.path };
        write!(f, "{} at {}: {}", self.code, path, self.message)
    }
}

/// A non-empty list of violations: why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violations(pub Vec<Violation>);

impl Violations {
    /// The first violation's code, which is the one a gateway reports.
    pub fn code(&self) -> Option<ErrorCode> {
        self.0.first().map(|v| v.code)
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (idx, violation) in self.0.iter().enumerate() {
            if idx > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{violation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}

/// Errors of the less-runtime crate that are not document violations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A document broke the contract.
    #[error("{0}")]
    Invalid(#[from] Violations),
    /// A run could not be carried out (an actor failed to start or stopped answering): a bug or a broken
    /// environment, never an agent's misbehaviour, which is always a [`Violation`] in the ledger.
    #[error("run failed: {message}")]
    Runtime {
        /// What failed.
        message: String,
    },
    /// An input could not be used at all: a document that does not parse, an output directory that cannot be
    /// written.
    #[error("{code}: {message}")]
    Malformed {
        /// [`ErrorCode::JsonMalformed`], [`ErrorCode::InputUnreadable`], [`ErrorCode::KindUnknown`] or
        /// [`ErrorCode::OutputUnwritable`].
        code: ErrorCode,
        /// The parser's explanation.
        message: String,
    },
}

impl Error {
    /// The stable code: the first violation's, `LESS_RUN_FAILED` for a run that could not be carried out, or the
    /// malformed input's.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Invalid(violations) => violations.code().unwrap_or(ErrorCode::SchemaInvalid),
            Error::Runtime { .. } => ErrorCode::RunFailed,
            Error::Malformed { code, .. } => *code,
        }
    }
}

/// The crate's result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
