//! The six typed messages (task_claim, task_result, gate_report, escalation, question, checkpoint): every message
//! has a validated shape and references artifacts by id or pointer instead of restating them.
//!
//! Fields every type may carry (sender, receiver, engrams, deref requests, a free-text body, a grant id) live on
//! [`TypedMessage`]; the type-specific ones in [`Payload`], whose tag is the `type` field.

use serde::{Deserialize, Serialize};

use crate::deref::DerefRequest;
use crate::engram::Engram;
use crate::schema::DocKind;
use crate::valid::Contract;

/// `schemas/message.v0.1.json`.
///
/// Unknown fields are refused by the schema (deserialize through [`crate::Valid`]); serde cannot deny them through
/// the flattened payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypedMessage {
    /// Sender agent id.
    pub from: String,
    /// Unique id within the run.
    pub msg_id: String,
    /// Receiver agent id, when not implied by the channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// At most 12 engrams (the receiver's budget may allow fewer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engrams: Vec<Engram>,
    /// At most 4 deref requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deref_requests: Vec<DerefRequest>,
    /// Free text, metered by the receiver's gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The grant that allows inline code in this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// The type and its fields.
    #[serde(flatten)]
    pub payload: Payload,
}

impl Contract for TypedMessage {
    const KIND: DocKind = DocKind::Message;
}

/// The type-specific part of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Payload {
    /// An agent claims a task.
    TaskClaim {
        /// Task id.
        task: String,
        /// Symbol ids or pointers it will use.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        symbols: Vec<String>,
        /// Capsule ids it builds on.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        capsules: Vec<String>,
    },
    /// The outcome of a task.
    TaskResult {
        /// Task id.
        task: String,
        /// Outcome.
        status: TaskStatus,
        /// Acceptance criteria met, by id.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        criteria: Vec<u32>,
        /// The commit holding the work.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        /// The capsule summarizing it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capsule: Option<String>,
    },
    /// A gate's verdict.
    GateReport {
        /// Gate id.
        gate_id: String,
        /// Verdict.
        status: GateStatus,
        /// Where the report is (path or pointer), never its body.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        report_ref: Option<String>,
    },
    /// A problem handed to the parent.
    Escalation {
        /// What went wrong (at most 500 characters).
        reason: String,
        /// How bad.
        severity: Severity,
        /// Evidence, as ids or pointers.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
    },
    /// A question.
    Question {
        /// The question (at most 500 characters).
        question: String,
        /// What it is about, as ids or pointers.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
    },
    /// Progress of a wave.
    Checkpoint {
        /// Wave number.
        wave: u32,
        /// Its state.
        state: WaveState,
        /// Capsules completed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        capsules: Vec<String>,
    },
}

impl Payload {
    /// The wire name of the type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Payload::TaskClaim { .. } => "task_claim",
            Payload::TaskResult { .. } => "task_result",
            Payload::GateReport { .. } => "gate_report",
            Payload::Escalation { .. } => "escalation",
            Payload::Question { .. } => "question",
            Payload::Checkpoint { .. } => "checkpoint",
        }
    }
}

/// Outcome of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum TaskStatus {
    Pass,
    Fail,
    Partial,
}

/// Verdict of a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum GateStatus {
    Pass,
    Fail,
}

/// Severity of an escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Severity {
    Info,
    Warning,
    Blocker,
}

/// State of a wave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum WaveState {
    Started,
    InProgress,
    Complete,
    Blocked,
}
