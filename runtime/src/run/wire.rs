//! What travels between agents: the logical [`Action`] an agent decides on, and the [`Envelope`] the runtime writes
//! for it in the run's [`WireMode`].
//!
//! LESS mode writes the contract documents (SharedBriefMicro, typed messages with engrams and pointers, grants) as
//! compact JSON. The verbatim baseline writes what a careful orchestrator without LESS sends: every brief restates the
//! goal, the acceptance criteria and the prior reports its writer knows (as prose), and pastes the spans its pack
//! points to; every report is a prose summary with its claims and pastes the spans it cites. The whole-file baseline
//! pastes whole files and every prior report instead. Same logic, only the wire differs, so the token counts compare.

use serde_json::Value;

use crate::engram::Scope;
use crate::scenario::{EngramSpec, GrantSpec, ReportKind};

/// What an agent decided to do on one turn, before it is written on the wire.
#[derive(Debug, Clone)]
pub enum Action {
    /// Brief children.
    Brief(BriefAction),
    /// Send a typed message.
    Report(ReportAction),
    /// Pull content through the gateway.
    Deref(DerefAction),
    /// Ask what the others learned (the run's memory, as this agent).
    Query {
        /// The question.
        text: String,
        /// Most engrams wanted.
        k: usize,
        /// Only this project (default: the scenario's).
        project: Option<String>,
        /// Only this scope.
        scope: Option<Scope>,
    },
    /// Widen the scope of the newest engram of a subject key.
    Promote {
        /// The subject key.
        subject: String,
        /// The scope it widens to.
        to: Scope,
    },
}

/// A brief to some children.
#[derive(Debug, Clone)]
pub struct BriefAction {
    /// Children briefed (empty: all).
    pub to: Vec<String>,
    /// What matters now.
    pub now: Vec<String>,
    /// Constraints.
    pub constraints: Vec<String>,
    /// Top risks.
    pub risks: Vec<String>,
    /// Pointer packs by role, in text form.
    pub packs: std::collections::BTreeMap<String, Vec<String>>,
    /// Grants to issue.
    pub grants: Vec<GrantSpec>,
    /// Graded tasks (ids) handed down: each child on the way to a task's agent gets its question.
    pub tasks: Vec<String>,
}

/// A typed message.
#[derive(Debug, Clone)]
pub struct ReportAction {
    /// Receiver (default parent).
    pub to: Option<String>,
    /// Type and fields.
    pub kind: ReportKind,
    /// Engrams.
    pub engrams: Vec<EngramSpec>,
    /// Prose summary (verbatim mode).
    pub summary: String,
    /// Paste the full content of every cited source into the body (refused in LESS mode).
    pub paste_sources: bool,
    /// Cycle the engrams until the message carries 12, the schema's limit (refused over a smaller MAX_ENGRAMS).
    pub pad_engrams: bool,
    /// A grant allowing inline code in this message.
    pub grant: Option<String>,
    /// Resend the same message after a refusal instead of a compliant one (scripted `paste_twice`).
    pub repeat_offender: bool,
}

/// A dereference.
#[derive(Debug, Clone)]
pub struct DerefAction {
    /// Pointers in text form.
    pub pointers: Vec<String>,
    /// Why.
    pub reason: String,
    /// What for.
    pub intended_use: String,
    /// Grant to present.
    pub grant: Option<String>,
}

/// What kind of document an envelope carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvelopeKind {
    /// A SharedBriefMicro (LESS) or its verbatim restatement.
    Brief,
    /// A typed message.
    Message,
    /// A grant from an ancestor.
    Grant,
    /// An escalation written by a gateway after a second refusal.
    Escalation,
}

impl EnvelopeKind {
    /// Lowercase name for traces and the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            EnvelopeKind::Brief => "brief",
            EnvelopeKind::Message => "message",
            EnvelopeKind::Grant => "grant",
            EnvelopeKind::Escalation => "escalation",
        }
    }
}

/// One message on the wire.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// Sender agent id.
    pub from: String,
    /// Receiver agent id.
    pub to: String,
    /// Unique id within the run.
    pub msg_id: String,
    /// What it carries.
    pub kind: EnvelopeKind,
    /// The LESS document (brief, typed message or grant) — the logical content the receiver acts on.
    pub doc: Value,
    /// The exact text the receiver's prompt would contain; tokens are counted on it.
    pub wire: String,
    /// Source code pasted inline (needs a grant for inline code).
    pub inline_code: Option<String>,
    /// The pointers (text form) the pasted code was read from; a code grant must cover them.
    pub code_sources: Vec<String>,
    /// Baseline runs: what a later brief restates of this report (its prose, or in the whole-file baseline its wire
    /// text). None for briefs, grants and LESS runs.
    pub prose: Option<String>,
    /// Baseline briefs: the prior reports (message ids) restated, which the receiver then knows.
    pub restated: Vec<String>,
}
