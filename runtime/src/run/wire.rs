//! What travels between agents: the logical [`Action`] an agent decides on, and the [`Envelope`] the runtime writes
//! for it in the run's [`WireMode`].
//!
//! LESS mode writes the contract documents (SharedBriefMicro, typed messages with engrams and pointers, grants) as
//! compact JSON. The verbatim baseline writes what a careful orchestrator without LESS sends: every brief restates the
//! goal, the acceptance criteria and the prior reports its writer knows (as prose), and pastes the spans its pack
//! points to; every report is a prose summary with its claims and pastes the spans it cites. The whole-file baseline
//! pastes whole files and every prior report instead. Same logic, only the wire differs, so the token counts compare.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use less_contract::{
    DocKind, Engram, EngramSpec, ErrorCode, Grant, GrantSpec, Payload, ReportKind, Scope, Severity, SharedBriefMicro,
    TypedMessage, Valid, Violation,
};

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
    /// Search the workspace index: the answer is pointers with one-line previews (LESS), or the same hits with their
    /// content pasted (the fair baseline), metered as inline tokens by the agent's gateway.
    Search(SearchAction),
    /// List the workspace's files under a path or glob, with their sizes and top-level symbols (an outline), metered
    /// like a search.
    List(ListAction),
    /// Ask what pointers hold, one line each (a catalogue), metered like a search.
    Describe(DescribeAction),
    /// Widen the scope of the newest engram of a subject key.
    Promote {
        /// The subject key.
        subject: String,
        /// The scope it widens to.
        to: Scope,
    },
    /// Claim the surfaces the agent will change, for a task (the run's coordination ledger: refused with
    /// `LESS_CLAIM_CONFLICT` when they overlap another agent's live claim, unless the agent overrides it; an override
    /// is a conflict record, a decision engram and an escalation to the agent's parent).
    Claim(ClaimAction),
    /// Release the agent's live claims (for `task`, or all).
    Release {
        /// Only the claims for this task.
        task: Option<String>,
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
            Action::Search(_) => "search",
            Action::List(_) => "list",
            Action::Describe(_) => "describe",
            Action::Promote { .. } => "promote",
            Action::Claim(_) => "claim",
            Action::Release { .. } => "release",
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
    /// Symbols (ids of the scenario's table) the brief carries with their values.
    pub symbols: Vec<String>,
    /// Capsules (ids) the brief carries, hydrated with their dependency closure.
    pub capsules: Vec<String>,
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

/// A search of the workspace index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchAction {
    /// What to look for: key words, identifiers, a question.
    pub query: String,
    /// Most hits (1 to [`crate::workspace::MAX_K`]).
    pub k: usize,
}

/// A listing of the workspace's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListAction {
    /// A file, a directory (`src/orders`: everything under it) or a glob (`src/**/*.rs`); empty: every file.
    pub pattern: String,
}

/// A request for one line on what each pointer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeAction {
    /// Pointers in text form (at most [`crate::run::MAX_DESCRIBE`]).
    pub pointers: Vec<String>,
}

/// A claim on surfaces of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimAction {
    /// Workspace paths or globs (`src/run/**`).
    pub surfaces: Vec<String>,
    /// What the change is for.
    pub task: String,
    /// How long it holds, in minutes (default 30).
    pub ttl_minutes: Option<u64>,
    /// Take the surfaces from the claims they overlap, saying why.
    pub override_reason: Option<String>,
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
    /// The document, as the agent wrote it (the receiver's gateway judges it like any other).
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
    /// The contract's kind of the document it carries.
    pub fn doc_kind(self) -> DocKind {
        match self {
            EnvelopeKind::Brief => DocKind::Brief,
            EnvelopeKind::Message | EnvelopeKind::Escalation => DocKind::Message,
            EnvelopeKind::Grant => DocKind::Grant,
        }
    }

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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    /// Sender agent id.
    pub from: String,
    /// Receiver agent id.
    pub to: String,
    /// Unique id within the run.
    pub msg_id: String,
    /// What it carries.
    pub kind: EnvelopeKind,
    /// The LESS document (brief, typed message or grant) — the logical content the receiver acts on — as its
    /// sender built it, not yet checked: the receiver's gateway makes it a [`Document`] or refuses it.
    pub doc: Draft,
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

/// A document as its sender hands it to the receiver's gateway: built, not yet checked.
#[derive(Debug, Clone)]
pub enum Draft {
    /// A brief the runtime wrote for a parent.
    Brief(SharedBriefMicro),
    /// A typed message the runtime wrote for an agent (a report, a deref request, an answer) or a gateway (an
    /// escalation).
    Message(TypedMessage),
    /// A grant a gateway issued.
    Grant(Grant),
    /// A document an agent wrote itself ([`Action::Send`]), judged as the envelope's kind says.
    Raw(Value),
}

impl Draft {
    /// The JSON document the receiver's gateway judges (objects with sorted keys, as it has always been counted).
    pub fn to_value(&self) -> Result<Value, Violation> {
        let value = match self {
            Draft::Brief(brief) => serde_json::to_value(brief),
            Draft::Message(message) => serde_json::to_value(message),
            Draft::Grant(grant) => serde_json::to_value(grant),
            Draft::Raw(doc) => return Ok(doc.clone()),
        };
        value.map_err(|err| {
            Violation::new(ErrorCode::SchemaInvalid, "", format!("the document has no JSON form: {err}"))
        })
    }
}

/// On the wire (between nodes) a draft is its JSON under its kind's name.
impl Serialize for Draft {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (kind, value) = match self {
            Draft::Brief(brief) => ("brief", serde_json::to_value(brief)),
            Draft::Message(message) => ("message", serde_json::to_value(message)),
            Draft::Grant(grant) => ("grant", serde_json::to_value(grant)),
            Draft::Raw(doc) => ("raw", Ok(doc.clone())),
        };
        let value = value.map_err(serde::ser::Error::custom)?;
        let mut map = serde_json::Map::new();
        map.insert(kind.to_owned(), value);
        map.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Draft {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Draft, D::Error> {
        use serde::de::Error;
        let map = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        let mut entries = map.into_iter();
        let (Some((kind, value)), None) = (entries.next(), entries.next()) else {
            return Err(D::Error::custom("a draft is one object with one key: brief, message, grant or raw"));
        };
        Ok(match kind.as_str() {
            "brief" => Draft::Brief(serde_json::from_value(value).map_err(D::Error::custom)?),
            "message" => Draft::Message(serde_json::from_value(value).map_err(D::Error::custom)?),
            "grant" => Draft::Grant(serde_json::from_value(value).map_err(D::Error::custom)?),
            "raw" => Draft::Raw(value),
            other => return Err(D::Error::custom(format!("no draft kind {other}"))),
        })
    }
}

/// A document a gateway accepted: checked once, against the schema and the semantic rules of its kind, and held
/// typed from there on (the ledger's `delivered` events, grading, reports, and the agent's inbox as
/// [`crate::run::Delivered`], a grant as its terms only).
///
/// It serializes as the document's JSON object with sorted keys, exactly the JSON the receiver's gateway checked, and
/// deserializes (reading a ledger back) by validating again.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// A SharedBriefMicro.
    Brief(Valid<SharedBriefMicro>),
    /// A typed message (an escalation among them).
    Message(Valid<TypedMessage>),
    /// A grant.
    Grant(Valid<Grant>),
}

impl Document {
    /// Checks `draft` as the document an envelope of `kind` carries: the first violation of the schema or the
    /// semantic rules, or of the kind (a grant sent as a message), refuses it. Gives back the document's JSON too
    /// (sorted keys, as [`Document::to_value`] makes it), made once.
    pub fn check(kind: EnvelopeKind, draft: &Draft) -> Result<(Document, Value), Violation> {
        let first = |violations: less_contract::Violations| {
            violations.0.into_iter().next().unwrap_or_else(|| Violation::new(ErrorCode::SchemaInvalid, "", "invalid"))
        };
        match (kind, draft) {
            (EnvelopeKind::Brief, Draft::Brief(brief)) => {
                Valid::with_document(brief.clone()).map(|(v, doc)| (Document::Brief(v), doc))
            }
            (EnvelopeKind::Message | EnvelopeKind::Escalation, Draft::Message(message)) => {
                Valid::with_document(message.clone()).map(|(v, doc)| (Document::Message(v), doc))
            }
            (EnvelopeKind::Grant, Draft::Grant(grant)) => {
                Valid::with_document(grant.clone()).map(|(v, doc)| (Document::Grant(v), doc))
            }
            (kind, Draft::Raw(doc)) => Document::from_value(kind.doc_kind(), doc).map(|d| {
                let value = d.to_value();
                (d, value)
            }),
            (kind, _) => {
                return Err(Violation::new(
                    ErrorCode::SchemaInvalid,
                    "",
                    format!("a {} envelope carries another kind of document", kind.as_str()),
                ));
            }
        }
        .map_err(first)
    }

    /// Validates an untrusted JSON document of `kind` (a brief, a message or a grant).
    fn from_value(kind: DocKind, doc: &Value) -> Result<Document, less_contract::Violations> {
        match kind {
            DocKind::Brief => Valid::from_value(doc).map(Document::Brief),
            DocKind::Grant => Valid::from_value(doc).map(Document::Grant),
            // Every envelope kind but these two carries a typed message.
            _ => Valid::from_value(doc).map(Document::Message),
        }
    }

    /// The engrams it carries (a typed message's; none for a brief or a grant).
    pub fn engrams(&self) -> &[Engram] {
        match self {
            Document::Message(message) => &message.engrams,
            Document::Brief(_) | Document::Grant(_) => &[],
        }
    }

    /// The reason of an escalation message.
    pub fn escalation_reason(&self) -> Option<&str> {
        match self {
            Document::Message(message) => match &message.payload {
                Payload::Escalation { reason, .. } => Some(reason),
                _ => None,
            },
            Document::Brief(_) | Document::Grant(_) => None,
        }
    }

    /// The grant a typed message names for its inline code.
    pub fn grant_id(&self) -> Option<&str> {
        match self {
            Document::Message(message) => message.grant_id.as_deref(),
            Document::Brief(_) | Document::Grant(_) => None,
        }
    }

    /// Its JSON object (sorted keys).
    pub fn to_value(&self) -> Value {
        match self {
            Document::Brief(brief) => brief.to_value(),
            Document::Message(message) => message.to_value(),
            Document::Grant(grant) => grant.to_value(),
        }
    }
}

#[cfg(test)]
impl Document {
    /// A typed message for a test's ledger events; panics when `doc` is not a valid message.
    pub(crate) fn message(doc: Value) -> std::sync::Arc<Document> {
        std::sync::Arc::new(Document::check(EnvelopeKind::Message, &Draft::Raw(doc)).expect("a valid typed message").0)
    }
}

impl Serialize for Document {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Document, D::Error> {
        let doc = Value::deserialize(deserializer)?;
        match DocKind::infer(&doc) {
            Some(kind @ (DocKind::Brief | DocKind::Message | DocKind::Grant)) => {
                Document::from_value(kind, &doc).map_err(serde::de::Error::custom)
            }
            _ => Err(serde::de::Error::custom("not a brief, a typed message or a grant")),
        }
    }
}
