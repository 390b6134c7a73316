//! What travels between agents: the logical [`Action`] an agent decides on, and the [`Envelope`] the runtime writes
//! for it in the run's [`WireMode`].
//!
//! LESS mode writes the contract documents (SharedBriefMicro, typed messages with engrams and pointers, grants) as
//! compact JSON. The verbatim baseline writes what a careful orchestrator without LESS sends: every brief restates the
//! goal, the acceptance criteria and the prior reports its writer knows (as prose), and pastes the spans its pack
//! points to; every report is a prose summary with its claims and pastes the spans it cites. The whole-file baseline
//! pastes whole files and every prior report instead. Same logic, only the wire differs, so the token counts compare.

use serde_json::Value;

use less_contract::Scope;
use less_contract::Severity;
use less_contract::{EngramSpec, GrantSpec, ReportKind};

/// One thing an agent decides to do. A turn is a loop: the agent returns one action, the runtime performs it
/// through the agent's gateway and shows the agent what came of it ([`crate::run::Turn::last`]), until the agent
/// returns [`Action::Finish`] or the turn reaches its limit. Every agent — scripted, LLM-backed, or a user's own
/// `impl Agent` — speaks this vocabulary; the gateways judge every document it produces.
#[derive(Debug, Clone)]
pub enum Action {
    /// Brief children (a SharedBriefMicro each, with the pointers the parent chooses for them).
    Brief(BriefAction),
    /// Pull content through the gateway, metered against the turn's deref budget or a grant.
    Deref(DerefAction),
    /// Ask the parent for a dereference the agent cannot afford: a `question` carrying a `deref_request`; the parent
    /// answers with a grant or a denial before the turn goes on.
    AskGrant(AskGrantAction),
    /// Issue a grant to a descendant (unasked; an asked grant is the answer of [`crate::run::Agent::decide`]).
    Grant(GrantSpec),
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
    /// Send a typed message with engrams (by default to the parent).
    Report(ReportAction),
    /// Hand a problem to the parent (an `escalation` message).
    Escalate {
        /// What went wrong (at most 500 characters are sent).
        reason: String,
        /// How bad.
        severity: Severity,
    },
    /// Send a document the agent wrote itself, as it is: the receiver's gateway validates it like any other. Scripted
    /// misbehaviour (a forged grant, say) uses it; so may an agent that writes its own documents.
    Send(SendAction),
    /// The turn is done.
    Finish,
}

impl Action {
    /// Its name in traces and refusals (`deref`, `report`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Brief(_) => "brief",
            Action::Deref(_) => "deref",
            Action::AskGrant(_) => "ask_grant",
            Action::Grant(_) => "grant",
            Action::Query { .. } => "query",
            Action::Promote { .. } => "promote",
            Action::Report(_) => "report",
            Action::Escalate { .. } => "escalate",
            Action::Send(_) => "send",
            Action::Finish => "finish",
        }
    }
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
    /// Prose summary (what a baseline writes; LESS mode sends none).
    pub summary: String,
    /// Paste the whole files the engrams cite into the body: inline code, which a receiver accepts only under a
    /// code grant named by `grant`.
    pub paste_sources: bool,
    /// A grant allowing inline code in this message.
    pub grant: Option<String>,
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

/// A request to the parent for a dereference over the agent's budget.
#[derive(Debug, Clone)]
pub struct AskGrantAction {
    /// Pointers in text form.
    pub pointers: Vec<String>,
    /// Why (at most 200 characters are sent).
    pub reason: String,
    /// What for (at most 200 characters are sent).
    pub intended_use: String,
}

/// A document sent as the agent wrote it.
#[derive(Debug, Clone)]
pub struct SendAction {
    /// Receiver.
    pub to: String,
    /// What it carries.
    pub kind: EnvelopeKind,
    /// The document.
    pub doc: Value,
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
