//! Agents and the actor that hosts one.
//!
//! [`Agent`] is the seam between the runtime and whatever decides what an agent does: the scripted agent of
//! `less-agents` follows the scenario's steps, an LLM-backed agent will treat the same steps as its tasks.
//! The runtime knows no implementation; an [`AgentFactory`] given to [`crate::run::run_scenario`] builds them.
//! The hosting [`AgentActor`] turns the agent's logical [`Action`]s into envelopes in the run's wire mode and sends
//! them through gateways: it never holds another agent's `ActorRef`.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Value, json};

use crate::brief::{PointerText, SharedBriefMicro};
use crate::digest::Digest;
use crate::engram::{Engram, Provenance, Source};
use crate::error::{ErrorCode, Violation};
use crate::memory::{EngramRef, MemoryError, MemoryMsg, PromoteRequest, PutRequest, QueryOptions, QueryRequest};
use crate::message::{Payload, TypedMessage};
use crate::pointer::Pointer;
use crate::run::RunContext;
use crate::run::baseline::{self, BriefText, WholeBriefText, holds};
use crate::run::gateway::AgentMemory;
use crate::run::gateway::GatewayMsg;
use crate::run::ledger::{Event, LedgerMsg};
use crate::run::resolver_actor::ResolverMsg;
use crate::run::wire::{Action, BriefAction, Envelope, EnvelopeKind, ReportAction};
use crate::scenario::{AgentSpec, ReportKind, Step, WireMode};
use crate::tokens::TokenCounter;
use crate::ttl::Ttl;
use crate::valid::Valid;

/// The most engrams a typed message may carry (`message.v0.1.json`).
const SCHEMA_MAX_ENGRAMS: usize = 12;

/// A boxed future, so `Agent` stays object-safe while implementations may await (an LLM call, say).
pub type AgentFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an agent sees when asked to take a turn.
#[derive(Debug, Clone)]
pub struct TurnInput {
    /// The scenario step (the task, for an LLM agent).
    pub step: Step,
    /// 0 on the first try; more after the agent was restarted mid-step.
    pub attempt: u32,
    /// The agent.
    pub spec: AgentSpec,
    /// Documents delivered to it so far (LESS documents; recall answers as `{"recalled": engram}`; what it
    /// dereferenced as `{"dereferenced": {"pointer", "content"}}`; in the verbatim baseline a delivered message is
    /// `{"verbatim": wire text, "doc": document}`).
    pub inbox: Vec<Arc<Value>>,
    /// The run's wire mode (scripted misbehaviour only matters where a gateway can refuse it).
    pub mode: WireMode,
}

/// Decides what an agent does.
pub trait Agent: Send + Sync + 'static {
    /// The actions of one turn.
    fn act<'a>(&'a mut self, input: &'a TurnInput) -> AgentFuture<'a, Vec<Action>>;

    /// `action` was refused for `violation` (the `attempt`-th refusal); the resend, if any.
    fn on_rejection<'a>(
        &'a mut self,
        action: &'a Action,
        violation: &'a Violation,
        attempt: u32,
    ) -> AgentFuture<'a, Option<Action>>;

    /// What the agent's model spent since the last call, as its provider counted it (none for agents without one).
    fn take_usage(&mut self) -> ModelUsage {
        ModelUsage::default()
    }
}

/// Tokens a model spent, as its provider counted them; the ledger records them beside the runtime's own counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelUsage {
    /// Completions.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Why answers were thrown away and asked for again (`LLM_OUTPUT_INVALID: /engrams/0/claim: …`), one per answer.
    pub unusable: Vec<String>,
}

/// Builds agents (again, after a restart).
pub trait AgentFactory: Send + Sync + 'static {
    /// A fresh agent for `spec`.
    fn make(&self, spec: &AgentSpec) -> Box<dyn Agent>;

    /// The longest one turn of `spec`'s agent may legitimately take (an LLM agent: its model's timeout × attempts ×
    /// completions per turn, plus a margin); `None`: the runtime's default step timeout.
    fn turn_timeout(&self, _spec: &AgentSpec) -> Option<std::time::Duration> {
        None
    }
}

/// A turn request from the driver.
#[derive(Debug, Clone)]
pub struct ActRequest {
    /// Step index (in traces).
    #[allow(dead_code)]
    pub index: usize,
    /// The step.
    pub step: Step,
    /// Retry count after restarts.
    pub attempt: u32,
}

/// How a turn went.
#[derive(Debug, Clone, Default)]
pub struct ActOutcome {
    /// The agent is down and did not act.
    pub agent_down: bool,
    /// Refusals the turn met (codes).
    pub refusals: Vec<ErrorCode>,
}

impl ActOutcome {
    pub(crate) fn down(_agent: &str) -> ActOutcome {
        ActOutcome { agent_down: true, refusals: Vec::new() }
    }
}

tokio::task_local! {
    /// The agent whose code is running on this task (its turn or its answer to a refusal).
    static AGENT_TURN: String;
}

/// The agent whose code the current task is running, if any: a panic there is the agent's, caught by its actor and
/// answered by a restart (a process's panic hook uses this to keep such panics quiet and real crashes loud).
pub fn agent_in_turn() -> Option<String> {
    AGENT_TURN.try_with(Clone::clone).ok()
}

/// The actor hosting one agent.
pub struct AgentActor;

/// Messages to an agent (only its gateway sends them).
pub enum AgentMsg {
    /// Take a turn.
    Act(Box<ActRequest>, RpcReplyPort<ActOutcome>),
    /// A delivered document.
    Inbox(Arc<Value>),
}

/// What an agent actor starts from.
pub struct AgentArgs {
    pub(crate) ctx: Arc<RunContext>,
    pub(crate) agent_id: String,
    pub(crate) gateway: ActorRef<GatewayMsg>,
    /// What the agent knew before a restart (empty on first start).
    pub(crate) memory: AgentMemory,
}

/// Mutable state of an agent actor.
pub struct AgentState {
    ctx: Arc<RunContext>,
    spec: AgentSpec,
    gateway: ActorRef<GatewayMsg>,
    agent: Box<dyn Agent>,
    inbox: Vec<Arc<Value>>,
    /// Digests of what this agent dereferenced, by pointer text, recorded in the engrams it cites them from.
    seen: HashMap<String, Digest>,
}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = AgentArgs;

    async fn pre_start(&self, _myself: ActorRef<AgentMsg>, args: AgentArgs) -> Result<AgentState, ActorProcessingErr> {
        let spec = args.ctx.scenario.agent(&args.agent_id).cloned().ok_or("agent not in scenario")?;
        let agent = args.ctx.factory.make(&spec);
        Ok(AgentState {
            ctx: args.ctx,
            spec,
            gateway: args.gateway,
            agent,
            inbox: args.memory.inbox,
            seen: args.memory.seen,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<AgentMsg>,
        msg: AgentMsg,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            AgentMsg::Inbox(doc) => state.inbox.push(doc),
            AgentMsg::Act(request, reply) => {
                let input = TurnInput {
                    step: request.step,
                    attempt: request.attempt,
                    spec: state.spec.clone(),
                    inbox: state.inbox.clone(),
                    mode: state.ctx.mode,
                };
                // A panicking agent unwinds out of here; the gateway restarts it and the driver retries the step.
                let actions = AGENT_TURN.scope(state.spec.id.clone(), state.agent.act(&input)).await;
                let mut outcome = ActOutcome::default();
                for action in actions {
                    state.perform(action, &mut outcome).await;
                }
                let usage = state.agent.take_usage();
                if usage.calls > 0 {
                    state.ctx.record(Event::ModelUsage {
                        agent: state.spec.id.clone(),
                        calls: usage.calls,
                        prompt_tokens: usage.prompt_tokens,
                        completion_tokens: usage.completion_tokens,
                        unusable: usage.unusable,
                    });
                }
                let _ = reply.send(outcome);
            }
        }
        Ok(())
    }
}

impl AgentState {
    async fn perform(&mut self, action: Action, outcome: &mut ActOutcome) {
        match &action {
            Action::Deref(deref) => {
                let mut deref = deref.clone();
                if self.ctx.mode == WireMode::Verbatim {
                    // Without LESS the agent reads what it holds already in its context, not through a deref.
                    let held = self.held();
                    deref.pointers.retain(|t| !Pointer::parse(t).is_ok_and(|p| held.iter().any(|h| holds(h, &p))));
                    if deref.pointers.is_empty() {
                        return;
                    }
                }
                self.deref(deref, outcome).await;
            }
            Action::Query { text, k, project, scope } => {
                let options =
                    QueryOptions { k: *k, project: project.clone(), scope: *scope, ..QueryOptions::default() };
                self.query(text, options, outcome).await;
            }
            Action::Promote { subject, to } => self.promote(subject, *to, outcome).await,
            Action::Brief(brief) => self.brief(brief, outcome).await,
            Action::Report(_) => {
                self.send_report(action, outcome).await;
                self.end_turn();
            }
        }
    }

    /// Pulls content through the gateway; what it lets through joins the inbox, with its digest remembered.
    async fn deref(&mut self, deref: crate::run::wire::DerefAction, outcome: &mut ActOutcome) {
        match ractor::call!(self.gateway, GatewayMsg::Deref, deref) {
            Ok(result) => match result.result {
                Ok(resolved) => {
                    for r in resolved {
                        let key = Pointer::new(r.pointer.ty(), r.pointer.reference(), r.pointer.span())
                            .map(|p| p.to_string())
                            .unwrap_or_default();
                        self.seen.insert(key.clone(), r.digest);
                        // What the gateway let through is what the agent knows (an LLM agent's prompt).
                        self.inbox.push(Arc::new(json!({ "dereferenced": { "pointer": key, "content": r.content } })));
                    }
                }
                Err(violation) => outcome.refusals.push(violation.code),
            },
            Err(err) => tracing::warn!("deref failed: {err}"),
        }
    }

    /// What this agent has in its context already in the fair baseline: the spans pasted into its briefs and into
    /// the reports it received, and what it dereferenced.
    fn held(&self) -> Vec<Pointer> {
        let mut held = Vec::new();
        for item in &self.inbox {
            if let Some(text) = item.pointer("/dereferenced/pointer").and_then(Value::as_str) {
                held.extend(Pointer::parse(text).ok());
            }
            let Some(doc) = item.get("verbatim").and(item.get("doc")) else { continue };
            for pack in doc.get("pointer_packs").and_then(Value::as_object).into_iter().flat_map(|p| p.values()) {
                held.extend(pack.as_array().into_iter().flatten().filter_map(|t| Pointer::parse(t.as_str()?).ok()));
            }
            for engram in doc.get("engrams").and_then(Value::as_array).into_iter().flatten() {
                let pointers = engram.get("pointers").and_then(Value::as_array).into_iter().flatten();
                held.extend(pointers.filter_map(|p| serde_json::from_value::<Pointer>(p.clone()).ok()));
            }
        }
        held
    }

    /// The agent sent a message: its gateway starts a new deref budget.
    fn end_turn(&self) {
        self.gateway.send_message(GatewayMsg::EndTurn).ok();
    }

    /// Recall through the run's memory as this agent. A baseline gets the same engrams (the same logic) but is
    /// charged for reading every prior report of the run, as an agent without a shared memory has to.
    async fn query(&mut self, text: &str, options: QueryOptions, outcome: &mut ActOutcome) {
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let request = QueryRequest { who: self.ctx.principal(&self.spec.id), text: text.to_owned(), options };
        let recalled = match ractor::call!(self.ctx.memory, MemoryMsg::Query, Box::new(request)) {
            Ok(result) => result,
            Err(err) => Err(MemoryError::Unavailable(err.to_string())),
        };
        let (engrams, stages, code, message) = match recalled {
            Ok(recall) => {
                let engrams: Vec<Value> =
                    recall.hits.iter().map(|h| serde_json::to_value(&h.stored.engram).unwrap_or_default()).collect();
                if let Some(why) = &recall.degraded {
                    tracing::warn!(target: "less.memory.query", "{}: {why}", self.spec.id);
                }
                (engrams, recall.stages.iter().map(|s| (*s).to_owned()).collect(), None, String::new())
            }
            Err(err) => {
                outcome.refusals.extend(err.code());
                (Vec::new(), Vec::new(), err.code(), err.message())
            }
        };
        let n_tokens = match self.ctx.mode {
            // A refused query reads nothing.
            _ if code.is_some() => 0,
            WireMode::Less => counter.count(&Value::Array(engrams.clone()).to_string()),
            WireMode::Verbatim | WireMode::VerbatimWhole => {
                let history = ractor::call!(self.ctx.ledger, LedgerMsg::History).unwrap_or_default();
                counter.count(&history.join("\n"))
            }
        };
        let ids = engrams.iter().map(|e| e.get("id").and_then(Value::as_str).unwrap_or_default().to_owned()).collect();
        for engram in &engrams {
            self.inbox.push(Arc::new(json!({ "recalled": engram })));
        }
        self.ctx.record(Event::Query {
            agent: self.spec.id.clone(),
            text: text.to_owned(),
            returned: ids,
            tokens: n_tokens,
            stages,
            code,
            message,
        });
    }

    /// Widens the newest engram of `subject` to `to`, as this agent; a refusal is in the ledger and the outcome.
    async fn promote(&mut self, subject: &str, to: crate::engram::Scope, outcome: &mut ActOutcome) {
        let request = PromoteRequest {
            who: self.ctx.principal(&self.spec.id),
            target: EngramRef::Subject(subject.to_owned()),
            to,
        };
        let result = match ractor::call!(self.ctx.memory, MemoryMsg::Promote, Box::new(request)) {
            Ok(result) => result,
            Err(err) => Err(MemoryError::Unavailable(err.to_string())),
        };
        let (id, code, message) = match result {
            Ok(stored) => (stored.map(|s| s.engram.id), None, String::new()),
            Err(err) => {
                outcome.refusals.extend(err.code());
                (None, err.code(), err.message())
            }
        };
        self.ctx.record(Event::Promote {
            agent: self.spec.id.clone(),
            subject: subject.to_owned(),
            to,
            id,
            code,
            message,
        });
    }

    /// Puts the engrams of a delivered report into the run's memory as this agent, in the scenario's project.
    /// Refusals (rate limit, scope) are recorded; the report itself was delivered either way.
    async fn remember(&self, engrams: &[Value]) {
        for doc in engrams {
            let id = doc.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            let Ok(engram) = Valid::<Engram>::from_value(doc) else {
                // The receiver's gateway validated the message, engrams included; nothing invalid gets here.
                continue;
            };
            let request = PutRequest {
                who: self.ctx.principal(&self.spec.id),
                engram,
                project: self.ctx.scenario.project.clone(),
            };
            let result = match ractor::call!(self.ctx.memory, MemoryMsg::Put, Box::new(request)) {
                Ok(result) => result,
                Err(err) => Err(MemoryError::Unavailable(err.to_string())),
            };
            let event = match result {
                Ok(report) => Event::MemoryPut {
                    agent: self.spec.id.clone(),
                    id: report.outcome.id().to_owned(),
                    status: match report.outcome {
                        crate::memory::PutOutcome::Stored { .. } => "stored",
                        crate::memory::PutOutcome::Duplicate { .. } => "duplicate",
                        crate::memory::PutOutcome::Revived { .. } => "revived",
                    }
                    .to_owned(),
                    superseded: report.superseded,
                    contradictions: report.contradictions,
                    code: None,
                    message: String::new(),
                },
                Err(err) => Event::MemoryPut {
                    agent: self.spec.id.clone(),
                    id,
                    status: "refused".to_owned(),
                    superseded: Vec::new(),
                    contradictions: Vec::new(),
                    code: err.code(),
                    message: err.message(),
                },
            };
            self.ctx.record(event);
        }
    }

    async fn brief(&mut self, brief: &BriefAction, outcome: &mut ActOutcome) {
        // The fair baseline has no grants: without LESS nothing is refused, so there is nothing to allow.
        let grants = if self.ctx.mode == WireMode::Verbatim { &[][..] } else { &brief.grants[..] };
        for spec in grants {
            match ractor::call!(self.gateway, GatewayMsg::IssueGrant, spec.clone()) {
                Ok(Ok(mut grant)) => {
                    if spec.tamper {
                        grant.terms.uses += 10;
                    }
                    let doc = serde_json::to_value(&grant).unwrap_or_default();
                    // The grantee's gateway verifies and keeps the MAC; the agent reads, and is charged for, the
                    // terms (it presents a grant by id). Counting the MAC's random hex would also make the same
                    // run count differently each time.
                    let wire = serde_json::to_string(&grant.terms).unwrap_or_default();
                    let envelope = self.envelope(&spec.to, EnvelopeKind::Grant, doc, wire);
                    // A refused grant is in the ledger and the outcome; the brief still goes out.
                    let _ = self.deliver(envelope, outcome).await;
                }
                Ok(Err(violation)) => outcome.refusals.push(violation.code),
                Err(err) => tracing::warn!("grant failed: {err}"),
            }
        }
        let children: Vec<String> = if brief.to.is_empty() {
            self.ctx.scenario.children(&self.spec.id).iter().map(|c| c.id.clone()).collect()
        } else {
            brief.to.clone()
        };
        for child in children {
            let role = self.ctx.scenario.agent(&child).map(|a| a.role.clone()).unwrap_or_default();
            let packs: BTreeMap<String, Vec<PointerText>> = brief
                .packs
                .iter()
                .filter(|(r, _)| **r == role)
                .map(|(r, texts)| {
                    (r.clone(), texts.iter().filter_map(|t| Pointer::parse(t).ok().map(PointerText)).collect())
                })
                .collect();
            let mut now = brief.now.clone();
            now.extend(self.ctx.scenario.task_lines(&brief.tasks, &child));
            let doc_brief = SharedBriefMicro {
                brief_id: self.ctx.next_msg_id(&self.spec.id),
                from: self.spec.id.clone(),
                what_matters_now: now.clone(),
                constraints: brief.constraints.clone(),
                top_risks: brief.risks.clone(),
                pointer_packs: packs.clone(),
                budgets: [(role.clone(), self.ctx.scenario.budgets.of(&role))].into_iter().collect(),
                grants: Vec::new(),
            };
            let doc = serde_json::to_value(&doc_brief).unwrap_or_default();
            let mut envelope = self.envelope(&child, EnvelopeKind::Brief, doc, String::new());
            envelope.wire = match self.ctx.mode {
                WireMode::Less => envelope.doc.to_string(),
                WireMode::Verbatim => {
                    let (wire, restated) = self.fair_brief(&child, brief, &now, &packs).await;
                    envelope.restated = restated;
                    wire
                }
                WireMode::VerbatimWhole => self.whole_brief(&child, brief, &now, &packs).await,
            };
            let _ = self.deliver(envelope, outcome).await;
        }
        self.end_turn();
    }

    /// The fair baseline's brief to `child`, and the prior reports (message ids) it restates.
    async fn fair_brief(
        &self,
        child: &str,
        brief: &BriefAction,
        now: &[String],
        packs: &BTreeMap<String, Vec<PointerText>>,
    ) -> (String, Vec<String>) {
        let known = ractor::call!(self.ctx.ledger, LedgerMsg::Known, self.spec.id.clone()).unwrap_or_default();
        let (restated, prior_reports): (Vec<String>, Vec<String>) = known.into_iter().unzip();
        let mut pasted = Vec::new();
        for pointer in packs.values().flatten() {
            let text = pointer.0.to_string();
            if !pasted.iter().any(|(p, _)| *p == text) {
                pasted.push((text, self.read_span(&pointer.0).await));
            }
        }
        let text = baseline::fair_brief(&BriefText {
            from: &self.spec.id,
            to: child,
            plan: Some(&self.ctx.scenario.plan),
            prior_reports: &prior_reports,
            now,
            constraints: &brief.constraints,
            risks: &brief.risks,
            pasted: &pasted,
        });
        (text, restated)
    }

    /// The whole-file baseline's brief to `child`: the plan's documents and each packed file whole, once each, and
    /// every report delivered so far in the run.
    async fn whole_brief(
        &self,
        child: &str,
        brief: &BriefAction,
        now: &[String],
        packs: &BTreeMap<String, Vec<PointerText>>,
    ) -> String {
        let mut seen: Vec<(crate::pointer::PointerType, String)> = Vec::new();
        let mut plan_documents = Vec::new();
        for artifact in &self.ctx.scenario.plan.artifacts {
            if let Ok(pointer) = Pointer::parse(artifact)
                && !already_pasted(&mut seen, &pointer)
            {
                plan_documents.push((pointer.location().to_owned(), self.read_whole(&pointer).await));
            }
        }
        let mut files = Vec::new();
        for pointer in packs.values().flatten() {
            if !already_pasted(&mut seen, &pointer.0) {
                files.push((pointer.0.location().to_owned(), self.read_whole(&pointer.0).await));
            }
        }
        let all_reports = ractor::call!(self.ctx.ledger, LedgerMsg::History).unwrap_or_default();
        let lines: Vec<String> = now.iter().chain(&brief.constraints).chain(&brief.risks).cloned().collect();
        baseline::whole_brief(&WholeBriefText {
            from: &self.spec.id,
            to: child,
            plan: Some(&self.ctx.scenario.plan),
            plan_documents: &plan_documents,
            all_reports: &all_reports,
            lines: &lines,
            files: &files,
        })
    }

    /// The whole file (or section owner) behind `pointer`, for pasting; nothing is metered or pinned.
    async fn read_whole(&self, pointer: &Pointer) -> String {
        match Pointer::new(pointer.ty(), pointer.reference(), None) {
            Ok(whole) => self.read_span(&whole).await,
            Err(_) => String::new(),
        }
    }

    /// What `pointer` addresses, for pasting; nothing is metered or pinned.
    async fn read_span(&self, pointer: &Pointer) -> String {
        match ractor::call!(self.ctx.resolver, ResolverMsg::ReadUnpinned, pointer.clone()) {
            Ok(Ok(text)) => text,
            _ => String::new(),
        }
    }

    async fn send_report(&mut self, mut action: Action, outcome: &mut ActOutcome) {
        let mut n_refusals = 0u32;
        loop {
            let Action::Report(report) = &action else { return };
            let envelope = self.render_report(report).await;
            let msg_id = envelope.msg_id.clone();
            let to = envelope.to.clone();
            let engrams = envelope.doc.get("engrams").and_then(Value::as_array).cloned().unwrap_or_default();
            match self.deliver(envelope, outcome).await {
                Ok(()) => {
                    if n_refusals > 0 {
                        self.ctx.record(Event::Resent { from: self.spec.id.clone(), to, msg_id });
                    }
                    // Only what was delivered is remembered: a refused message's engrams never reach the memory.
                    self.remember(&engrams).await;
                    return;
                }
                Err(violation) => {
                    n_refusals += 1;
                    match AGENT_TURN
                        .scope(self.spec.id.clone(), self.agent.on_rejection(&action, &violation, n_refusals))
                        .await
                    {
                        Some(resend) if n_refusals < 2 => action = resend,
                        _ => return,
                    }
                }
            }
        }
    }

    async fn render_report(&self, report: &ReportAction) -> Envelope {
        let to = report.to.clone().or_else(|| self.spec.parent.clone()).unwrap_or_else(|| self.spec.id.clone());
        let mut engrams = Vec::new();
        let specs: Vec<&crate::scenario::EngramSpec> = if report.pad_engrams && !report.engrams.is_empty() {
            report.engrams.iter().cycle().take(SCHEMA_MAX_ENGRAMS).collect()
        } else {
            report.engrams.iter().collect()
        };
        {
            for (idx, spec) in specs.into_iter().enumerate() {
                let pointers: Vec<Pointer> = spec
                    .pointers
                    .iter()
                    .filter_map(|t| Pointer::parse(t).ok())
                    .map(|p| match self.seen.get(&p.to_string()) {
                        Some(digest) => p.with_digest(*digest),
                        None => p,
                    })
                    .collect();
                let ttl = Ttl::parse(&spec.ttl).unwrap_or_else(|_| Ttl::days(7));
                let mut hasher = blake3::Hasher::new();
                hasher.update(spec.claim.as_bytes());
                hasher.update(self.spec.id.as_bytes());
                hasher.update(&idx.to_le_bytes());
                engrams.push(Engram {
                    id: format!("eg_{}", &hasher.finalize().to_hex()[..16]),
                    kind: spec.kind,
                    claim: spec.claim.clone(),
                    pointers,
                    confidence: spec.confidence,
                    ttl,
                    scope: spec.scope,
                    tags: (!spec.tags.is_empty()).then(|| spec.tags.clone()),
                    hash_keys: None,
                    provenance: Provenance {
                        created_at: self.ctx.now_rfc3339(),
                        created_by: self.spec.id.clone(),
                        source: Source::Agent,
                    },
                });
            }
        }
        let cited: Vec<Pointer> =
            report.engrams.iter().flat_map(|e| e.pointers.iter()).filter_map(|t| Pointer::parse(t).ok()).collect();
        // Misbehaviour pastes every cited file whole; the baselines paste what they cite (the spans; the fair one each
        // span once).
        let mut pasted = String::new();
        let mut spans: Vec<(String, String)> = Vec::new();
        if report.paste_sources {
            let mut files = Vec::new();
            for pointer in &cited {
                if !already_pasted(&mut files, pointer) {
                    pasted.push_str(&format!("=== {} ===\n{}\n", pointer.location(), self.read_whole(pointer).await));
                }
            }
        } else if self.ctx.mode == WireMode::VerbatimWhole {
            for pointer in &cited {
                pasted.push_str(&format!("=== {pointer} ===\n{}\n", self.read_span(pointer).await));
            }
        } else if self.ctx.mode == WireMode::Verbatim {
            for pointer in &cited {
                let text = pointer.to_string();
                if !spans.iter().any(|(p, _)| *p == text) {
                    spans.push((text, self.read_span(pointer).await));
                }
            }
        }
        let payload = match &report.kind {
            ReportKind::TaskResult { task, status, criteria } => Payload::TaskResult {
                task: task.clone(),
                status: *status,
                criteria: criteria.clone(),
                commit: None,
                capsule: None,
            },
            ReportKind::GateReport { gate_id, status, report_ref } => {
                Payload::GateReport { gate_id: gate_id.clone(), status: *status, report_ref: report_ref.clone() }
            }
            ReportKind::Escalation { reason, severity, refs } => {
                Payload::Escalation { reason: reason.clone(), severity: *severity, refs: refs.clone() }
            }
            ReportKind::Question { question, refs } => {
                Payload::Question { question: question.clone(), refs: refs.clone() }
            }
        };
        let msg_id = self.ctx.next_msg_id(&self.spec.id);
        let message = TypedMessage {
            from: self.spec.id.clone(),
            msg_id: msg_id.clone(),
            to: Some(to.clone()),
            engrams,
            deref_requests: Vec::new(),
            body: (report.paste_sources && !pasted.is_empty()).then(|| pasted.clone()),
            grant_id: report.grant.clone(),
            payload,
        };
        let doc = serde_json::to_value(&message).unwrap_or_default();
        let (wire, prose) = match self.ctx.mode {
            WireMode::Less => (doc.to_string(), None),
            WireMode::Verbatim => {
                let prose =
                    baseline::report_prose(&self.spec.id, &to, &message.payload, &report.summary, &message.engrams);
                (baseline::fair_report(&prose, &spans), Some(prose))
            }
            WireMode::VerbatimWhole => {
                let mut text = format!(
                    "Report from {} to {to} ({}).\n\n{}\n\n",
                    self.spec.id,
                    message.payload.type_name(),
                    report.summary
                );
                for engram in &message.engrams {
                    text.push_str(&format!("- {:?}: {}\n", engram.kind, engram.claim));
                }
                text.push_str("\nSources:\n");
                text.push_str(&pasted);
                // The whole-file baseline restates every report as it was on the wire.
                (text.clone(), Some(text))
            }
        };
        let (inline_code, code_sources) = if report.paste_sources && !pasted.is_empty() {
            (Some(pasted), cited.iter().map(ToString::to_string).collect())
        } else {
            (None, Vec::new())
        };
        Envelope {
            from: self.spec.id.clone(),
            to,
            msg_id,
            kind: EnvelopeKind::Message,
            doc,
            wire,
            inline_code,
            code_sources,
            prose,
            restated: Vec::new(),
        }
    }

    fn envelope(&self, to: &str, kind: EnvelopeKind, doc: Value, wire: String) -> Envelope {
        Envelope {
            from: self.spec.id.clone(),
            to: to.to_owned(),
            msg_id: self.ctx.next_msg_id(&self.spec.id),
            kind,
            doc,
            wire,
            inline_code: None,
            code_sources: Vec::new(),
            prose: None,
            restated: Vec::new(),
        }
    }

    async fn deliver(&self, envelope: Envelope, outcome: &mut ActOutcome) -> Result<(), Violation> {
        let Some(gateway) = self.ctx.directory.get(&envelope.to) else {
            return Err(Violation::new(ErrorCode::PointerUnresolved, "", format!("no agent {}", envelope.to)));
        };
        match ractor::call!(gateway, GatewayMsg::Deliver, Box::new(envelope)) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(violation)) => {
                outcome.refusals.push(violation.code);
                Err(violation)
            }
            Err(err) => Err(Violation::new(ErrorCode::PointerUnresolved, "", err.to_string())),
        }
    }
}

/// Whether the file behind `pointer` was pasted already; records it when not.
fn already_pasted(pasted: &mut Vec<(crate::pointer::PointerType, String)>, pointer: &Pointer) -> bool {
    let key = (pointer.ty(), pointer.location().to_owned());
    if pasted.contains(&key) {
        true
    } else {
        pasted.push(key);
        false
    }
}
