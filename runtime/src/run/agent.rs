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
use tracing::Instrument;

use crate::memory::QueryOptions;
use crate::run::RunContext;
use crate::run::baseline::{self, BriefText, WholeBriefText, holds};
use crate::run::conduct::Ordering;
use crate::run::gateway::AgentKnowledge;
use crate::run::gateway::GatewayMsg;
use crate::run::inbox::{Delivered, Dereferenced, Inbox, InboxItem, Received};
use crate::run::ledger::{Event, TokenLedgerMsg};
use crate::run::resolver_actor::ResolverMsg;
use crate::run::wire::{Action, AskGrantAction, BriefAction, Draft, Envelope, EnvelopeKind, ReportAction};
use less_contract::Digest;
use less_contract::Pointer;
use less_contract::Severity;
use less_contract::TokenCounter;
use less_contract::Ttl;
use less_contract::Valid;
use less_contract::{AgentSpec, GrantSpec, ReportKind, Step, WireMode};
use less_contract::{Engram, Provenance, Source};
use less_contract::{ErrorCode, Violation};
use less_contract::{Payload, TypedMessage};
use less_contract::{PointerText, SharedBriefMicro};

/// A boxed future, so `Agent` stays object-safe while implementations may await (an LLM call, say).
pub type AgentFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an agent sees when it decides its next action: the turn so far.
#[derive(Debug, Clone)]
pub struct TurnInput {
    /// The scenario step (the task, for an LLM agent).
    pub step: Step,
    /// 0 on the first try; more after the agent was restarted mid-step.
    pub attempt: u32,
    /// The agent.
    pub spec: AgentSpec,
    /// What it received so far, oldest first ([`Received`]): the documents delivered to it (in a baseline run with
    /// their wire text), what it dereferenced, recalled, searched and listed, and an older message past the inbox's
    /// inline cap as its `sam:msg:<id>` stub, which a deref reads back.
    pub inbox: Vec<Received>,
    /// The run's wire mode (scripted misbehaviour only matters where a gateway can refuse it).
    pub mode: WireMode,
    /// The actions of this turn so far, each with what came of it, in order.
    pub done: Vec<Done>,
    /// The most actions this turn may take; the turn ends there (with an escalation to the parent).
    pub limit: usize,
    /// The run's clock (RFC 3339), for documents an agent writes itself.
    pub now: String,
}

impl TurnInput {
    /// What came of the previous action of this turn, if there was one.
    pub fn last(&self) -> Option<&Done> {
        self.done.last()
    }
}

/// An action of the turn and what came of it.
#[derive(Debug, Clone)]
pub struct Done {
    /// The action.
    pub action: Action,
    /// What came of it.
    pub outcome: Outcome,
}

/// What came of an action.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    /// Carried out (delivered, read, recalled).
    Done,
    /// Refused, with the violation that says why and what to do instead.
    Refused(Violation),
    /// The parent answered a deref request with this grant (present it with the deref).
    Granted {
        /// The grant's id.
        grant_id: String,
    },
    /// The parent refused a deref request.
    Denied {
        /// Why.
        reason: String,
    },
}

/// A child's request for a dereference over its budget, as its parent decides on it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GrantAsk {
    /// The request (its pointers, reason and use).
    pub request: less_contract::DerefRequest,
    /// What the requester's pointers cost, in tokens, if they resolve.
    pub tokens: u32,
}

/// A parent's answer to a deref request.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Grant it: the spec's `to` is set to the requester by the runtime.
    Grant(GrantSpec),
    /// Refuse it, saying why.
    Deny(String),
}

/// What a parent sees when deciding on a child's deref request.
#[derive(Debug, Clone)]
pub struct DecideInput {
    /// The request.
    pub ask: GrantAsk,
    /// The parent.
    pub spec: AgentSpec,
    /// Everything the parent received so far (the request's message among it).
    pub inbox: Vec<Received>,
    /// The run's wire mode.
    pub mode: WireMode,
}

/// Decides what an agent does.
pub trait Agent: Send + Sync + 'static {
    /// The next action of the turn ([`Action::Finish`] ends it).
    fn next<'a>(&'a mut self, turn: &'a TurnInput) -> AgentFuture<'a, Action>;

    /// A child asks for a dereference it cannot afford: grant it or say why not. The default refuses.
    fn decide<'a>(&'a mut self, input: &'a DecideInput) -> AgentFuture<'a, Decision> {
        let who = input.spec.id.clone();
        Box::pin(async move { Decision::Deny(format!("{who} grants nothing on request")) })
    }

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
    /// Prompt tokens the server answered from its prompt cache, where it says so.
    pub cached_tokens: u64,
    /// Calls whose tokens were counted with the run's tokenizer, the server having reported none.
    pub counted_calls: u64,
    /// Milliseconds the model took over these calls.
    pub model_ms: u64,
    /// Why answers were thrown away and asked for again (`LLM_OUTPUT_INVALID: /engrams/0/claim: …`), one per answer.
    pub unusable: Vec<String>,
}

/// What an agent may know of its run, handed to its factory: itself, its budget, its children, the questions at or
/// below it (never their gold answers: [`Question`] has none), the plan's goal and criteria, and for a parent the
/// pointers the scenario gives it to hand out. Nothing else of the scenario (other agents' packs, the graded answers,
/// the steps of others) is reachable from agent code.
#[derive(Debug, Clone)]
pub struct Seat {
    /// The agent.
    pub spec: AgentSpec,
    /// Its role's budget.
    pub budget: less_contract::Budget,
    /// Its children, in the scenario's order.
    pub children: Vec<AgentSpec>,
    /// The graded questions whose agent is it or below it.
    pub questions: Vec<Question>,
    /// The plan's goal.
    pub goal: String,
    /// The plan's acceptance criteria, numbered from 1.
    pub criteria: Vec<String>,
    /// For a parent: the pointers it holds when the run starts (the plan's artifacts and the packs the scenario
    /// names, [`less_contract::Scenario::catalogue`]); empty for an agent without children.
    pub catalogue: Vec<String>,
    /// The run's tokenizer.
    pub tokenizer: less_contract::Encoding,
    /// Its own steps of the scenario, by their index in it: what a scripted agent plays, an LLM agent's tasks.
    /// Handed over once, when the agent is made; a turn names the step it plays by index.
    pub script: BTreeMap<usize, Step>,
}

/// `step` as `spec`'s agent is given it: a model's report step is a task (its kind and addressee), without the claims
/// and summary a scripted agent would send, which a model writes itself and must not see.
fn as_played_by(step: &Step, spec: &AgentSpec) -> Step {
    match step {
        Step::Report(report) if spec.kind == less_contract::AgentKind::Llm => {
            Step::Report(Box::new(less_contract::ReportStep {
                engrams: Vec::new(),
                summary: String::new(),
                ..(**report).clone()
            }))
        }
        _ => step.clone(),
    }
}

/// A graded question as an agent may see it: no gold answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The task's id.
    pub id: String,
    /// The agent expected to answer it.
    pub agent: String,
    /// The question as briefs state it.
    pub question: String,
    /// The agents from the seat's agent down to `agent` (the seat's own id first; `agent` last).
    pub via: Vec<String>,
}

impl Seat {
    /// `id`'s seat in `scenario` (`None`: no such agent).
    pub fn of(scenario: &less_contract::Scenario, id: &str) -> Option<Seat> {
        let spec = scenario.agent(id)?.clone();
        let children: Vec<AgentSpec> = scenario.children(id).into_iter().cloned().collect();
        let questions = scenario
            .tasks
            .iter()
            .filter(|t| scenario.is_at_or_below(&t.agent, id))
            .map(|t| {
                let chain = less_contract::lineage(&t.agent, |a| scenario.agent(a).and_then(|s| s.parent.as_deref()));
                let from = chain.iter().position(|a| *a == id).unwrap_or(0);
                let via = chain[from..].iter().map(|a| (*a).to_owned()).collect();
                Question { id: t.id.clone(), agent: t.agent.clone(), question: t.question.clone(), via }
            })
            .collect();
        Some(Seat {
            budget: scenario.budgets.of(&spec.role),
            catalogue: if children.is_empty() { Vec::new() } else { scenario.catalogue() },
            children,
            questions,
            goal: scenario.plan.goal.clone(),
            criteria: scenario.plan.criteria.clone(),
            tokenizer: scenario.tokenizer,
            script: scenario
                .steps
                .iter()
                .enumerate()
                .filter(|(_, step)| crate::run::conduct::step_agent(step) == id)
                .map(|(i, step)| (i, as_played_by(step, &spec)))
                .collect(),
            spec,
        })
    }

    /// The question with `id`, if it is at or below this agent.
    pub fn question(&self, id: &str) -> Option<&Question> {
        self.questions.iter().find(|q| q.id == id)
    }

    /// The questions named in `ids` whose agent is `child` or below it, in the order named.
    pub fn questions_below(&self, ids: &[String], child: &str) -> Vec<&Question> {
        ids.iter().filter_map(|id| self.question(id)).filter(|q| q.via.iter().any(|a| a == child)).collect()
    }
}

/// Builds agents (again, after a restart).
pub trait AgentFactory: Send + Sync + 'static {
    /// A fresh agent for `seat` (what it may know of its run).
    fn make(&self, seat: &Seat) -> Box<dyn Agent>;

    /// The longest one turn of `spec`'s agent may legitimately take (an LLM agent: its model's timeout × attempts ×
    /// completions per turn, plus a margin); `None`: the runtime's default step timeout.
    fn turn_timeout(&self, _spec: &AgentSpec) -> Option<std::time::Duration> {
        None
    }

    /// How many turns its agents' models serve at once (`None`: the runtime's default, one at a time), for a run
    /// whose [`crate::run::RunOptions::parallel`] is 0.
    fn parallel(&self) -> Option<usize> {
        None
    }
}

/// A turn request from the driver.
#[derive(Debug, Clone)]
pub struct ActRequest {
    /// The index of the step the turn plays, in the scenario (the agent's seat holds the step itself).
    pub index: usize,
    /// Retry count after restarts.
    pub attempt: u32,
}

/// How a turn went.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ActOutcome {
    /// The agent is down and did not act.
    pub agent_down: bool,
    /// Refusals the turn met (codes).
    pub refusals: Vec<ErrorCode>,
    /// Inline tokens the turn cost: its messages delivered and the answers it looked up (as the report counts them).
    #[serde(default)]
    pub inline_tokens: u64,
    /// Milliseconds the agent's model took over the turn.
    #[serde(default)]
    pub model_ms: u64,
}

impl ActOutcome {
    pub(crate) fn down(_agent: &str) -> ActOutcome {
        ActOutcome { agent_down: true, ..ActOutcome::default() }
    }
}

/// A span of one tool an agent uses (`search`, `list`, `describe`, `query`, `deref`) in OpenTelemetry's GenAI
/// conventions (`execute_tool`), under its turn's; [`tool_done`] records what its answer cost, or what refused it.
fn tool_span(tool: &str) -> tracing::Span {
    tracing::info_span!(
        target: "gen_ai",
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.type = "function",
        less.inline_tokens = tracing::field::Empty,
        less.deref.pointers = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Records on a [`tool_span`] the inline tokens the answer cost, or the code that refused it.
fn tool_done(span: &tracing::Span, tokens: u32, refused: Option<ErrorCode>) {
    match refused {
        Some(code) => span.record("error.type", code.as_str()),
        None => span.record("less.inline_tokens", i64::from(tokens)),
    };
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
    Inbox(InboxItem),
    /// A child asks for a dereference over its budget (through this agent's gateway); the answer goes back to the
    /// child's waiting turn.
    Decide(Box<GrantAsk>, RpcReplyPort<Outcome>),
}

/// The most actions one turn may take unless the agent's spec says otherwise.
pub const DEFAULT_TURN_LIMIT: usize = 12;

/// What an agent actor starts from.
pub struct AgentArgs {
    pub(crate) ctx: Arc<RunContext>,
    pub(crate) agent_id: String,
    pub(crate) gateway: ActorRef<GatewayMsg>,
    /// What the agent knew before a restart (empty on first start).
    pub(crate) memory: AgentKnowledge,
}

/// Mutable state of an agent actor.
pub struct AgentState {
    ctx: Arc<RunContext>,
    spec: AgentSpec,
    gateway: ActorRef<GatewayMsg>,
    agent: Box<dyn Agent>,
    inbox: Inbox,
    /// What arrived since the agent last acted ([`Ordering::Causal`]): it joins the inbox, ordered by sender and
    /// message number, when the agent acts next.
    pending: Vec<InboxItem>,
    /// Digests of what this agent dereferenced, by pointer text, recorded in the engrams it cites them from.
    seen: HashMap<String, Digest>,
    /// Its steps, by index ([`Seat::script`]): a turn names the one it plays.
    script: BTreeMap<usize, Step>,
}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = AgentArgs;

    async fn pre_start(&self, _myself: ActorRef<AgentMsg>, args: AgentArgs) -> Result<AgentState, ActorProcessingErr> {
        let seat = Seat::of(&args.ctx.scenario, &args.agent_id).ok_or("agent not in scenario")?;
        let agent = args.ctx.factory.make(&seat);
        let (spec, script) = (seat.spec, seat.script);
        Ok(AgentState {
            script,
            ctx: args.ctx,
            spec,
            gateway: args.gateway,
            agent,
            inbox: args.memory.inbox,
            pending: Vec::new(),
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
            // What arrives while the agent is idle waits until it acts: then it is read in an order that does not
            // depend on which sender's turn ended first.
            AgentMsg::Inbox(item) if state.ctx.ordering == Ordering::Causal => state.pending.push(item),
            AgentMsg::Inbox(item) => {
                // The gateway's copy spilled the same message and recorded it.
                state.inbox.push(item);
            }
            AgentMsg::Act(request, reply) => {
                state.take_pending();
                let span = state.turn_span("turn", Some(&request));
                let outcome = state.take_turn(*request).instrument(span.clone()).await;
                state.close_span(&span, &outcome);
                // On a worker node, what the turn recorded reaches the head's ledger before the turn's answer.
                state.ctx.settle().await;
                let _ = reply.send(outcome);
            }
            AgentMsg::Decide(ask, reply) => {
                let span = state.turn_span("decide", None);
                let mut spent = ActOutcome::default();
                let outcome = state.decide(*ask, &mut spent).instrument(span.clone()).await;
                state.close_span(&span, &spent);
                state.ctx.settle().await;
                let _ = reply.send(outcome);
            }
        }
        Ok(())
    }
}

impl AgentState {
    /// The span of one turn of this agent (`what`: a driver's `turn`, or a `decide` on a child's deref request), in
    /// OpenTelemetry's GenAI conventions (`invoke_agent`) with the run's `less.*` attributes; its totals are recorded
    /// by [`AgentState::close_span`]. Target `gen_ai`: what `lessrt --otlp` exports.
    fn turn_span(&self, what: &str, request: Option<&ActRequest>) -> tracing::Span {
        let budget = self.ctx.scenario.budgets.of(&self.spec.role);
        tracing::info_span!(
            target: "gen_ai",
            "invoke_agent",
            otel.name = %format!("invoke_agent {}", self.spec.id),
            otel.kind = "internal",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.id = %self.spec.id,
            gen_ai.agent.name = %self.spec.id,
            less.role = %self.spec.role,
            less.run.id = %self.ctx.run_id,
            less.mode = self.ctx.mode.as_str(),
            less.turn.kind = what,
            less.step = request.map(|r| r.index as i64).unwrap_or(-1),
            less.attempt = i64::from(request.map_or(0, |r| r.attempt)),
            less.budget.max_inline_tokens = i64::from(budget.max_inline_tokens),
            less.budget.max_deref_tokens_total = i64::from(budget.max_deref_tokens_total),
            less.inline_tokens = tracing::field::Empty,
            less.refusals = tracing::field::Empty,
        )
    }

    /// Records what the turn cost on its span (integers as `i64`: the exporter writes unsigned ones as text).
    fn close_span(&self, span: &tracing::Span, outcome: &ActOutcome) {
        span.record("less.inline_tokens", i64::try_from(outcome.inline_tokens).unwrap_or(i64::MAX));
        span.record("less.refusals", i64::try_from(outcome.refusals.len()).unwrap_or(i64::MAX));
    }

    /// Moves what arrived while the agent was idle into its inbox, by the sender's place in the hierarchy and the
    /// sender's message number.
    fn take_pending(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by(|a, b| a.order.cmp(&b.order));
        for item in pending {
            self.inbox.push(item);
        }
    }

    /// One turn: the agent's actions, one at a time, each carried out before the agent decides the next.
    async fn take_turn(&mut self, request: ActRequest) -> ActOutcome {
        let Some(step) = self.script.get(&request.index).cloned() else {
            tracing::error!(agent = %self.spec.id, "step {} is not one of this agent's", request.index);
            return ActOutcome::default();
        };
        let mut turn = TurnInput {
            step,
            attempt: request.attempt,
            spec: self.spec.clone(),
            inbox: self.inbox.docs(),
            mode: self.ctx.mode,
            done: Vec::new(),
            limit: self.spec.turn_limit.unwrap_or(DEFAULT_TURN_LIMIT),
            now: self.ctx.now_rfc3339(),
        };
        let mut outcome = ActOutcome::default();
        loop {
            if turn.done.len() >= turn.limit {
                self.ctx.record(Event::TurnLimit { agent: self.spec.id.clone(), actions: turn.done.len() });
                let reason = format!(
                    "{} did not finish its turn within {} actions; it ends here with what it has",
                    self.spec.id, turn.limit
                );
                self.escalate(&reason, Severity::Warning, &turn.done, &mut outcome).await;
                break;
            }
            // A panicking agent unwinds out of here; the gateway restarts it and the driver retries the step.
            let action = AGENT_TURN.scope(self.spec.id.clone(), self.agent.next(&turn)).await;
            if matches!(action, Action::Finish) {
                break;
            }
            let result = self.perform(&action, &turn.done, &mut outcome).await;
            // A message refused right after a refused message: its resend was refused too.
            let resent = resending(&turn.done);
            turn.done.push(Done { action, outcome: result });
            let refused_twice = resent && resending(&turn.done);
            turn.inbox = self.inbox.docs();
            // One resend after a refusal; the receiver's gateway escalated the second refusal.
            if refused_twice {
                break;
            }
        }
        outcome.model_ms = self.record_usage();
        outcome
    }

    /// What the model spent, as a ledger event (nothing for agents without one): the milliseconds it took.
    fn record_usage(&mut self) -> u64 {
        let usage = self.agent.take_usage();
        let model_ms = usage.model_ms;
        if usage.calls > 0 {
            self.ctx.record(Event::ModelUsage {
                agent: self.spec.id.clone(),
                calls: usage.calls,
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                cached_tokens: usage.cached_tokens,
                counted_calls: usage.counted_calls,
                model_ms: usage.model_ms,
                unusable: usage.unusable,
            });
        }
        model_ms
    }

    async fn perform(&mut self, action: &Action, done: &[Done], outcome: &mut ActOutcome) -> Outcome {
        match action {
            Action::Deref(deref) => {
                let mut deref = deref.clone();
                if self.ctx.mode == WireMode::Verbatim {
                    // Without LESS the agent reads what it holds already in its context, not through a deref.
                    let held = self.held();
                    deref.pointers.retain(|t| !Pointer::parse(t).is_ok_and(|p| held.iter().any(|h| holds(h, &p))));
                    if deref.pointers.is_empty() {
                        return Outcome::Done;
                    }
                }
                self.deref(deref, outcome).await
            }
            Action::AskGrant(ask) => self.ask_grant(ask, outcome).await,
            Action::Grant(spec) => {
                if self.ctx.mode == WireMode::Verbatim {
                    // The fair baseline has no grants: without LESS no budget refuses, so there is nothing to allow.
                    return Outcome::Done;
                }
                self.grant(spec, None, outcome).await
            }
            Action::Query { text, k, project, scope } => {
                let options =
                    QueryOptions { k: *k, project: project.clone(), scope: *scope, ..QueryOptions::default() };
                self.query(text, options, outcome).await
            }
            Action::Search(search) => {
                let span = tool_span("search");
                let gateway = &self.gateway;
                let answer =
                    async { ractor::call!(gateway, GatewayMsg::Search, search.clone()) }.instrument(span.clone()).await;
                self.looked(answer.map_err(|e| e.to_string()), &span, "search", outcome)
            }
            Action::List(list) => {
                let span = tool_span("list");
                let gateway = &self.gateway;
                let answer =
                    async { ractor::call!(gateway, GatewayMsg::List, list.clone()) }.instrument(span.clone()).await;
                self.looked(answer.map_err(|e| e.to_string()), &span, "list", outcome)
            }
            Action::Describe(describe) => {
                let span = tool_span("describe");
                let gateway = &self.gateway;
                let answer = async { ractor::call!(gateway, GatewayMsg::Describe, describe.clone()) }
                    .instrument(span.clone())
                    .await;
                self.looked(answer.map_err(|e| e.to_string()), &span, "describe", outcome)
            }
            Action::Promote { subject, to } => self.promote(subject, *to, outcome).await,
            Action::Claim(claim) => self.claim(claim, outcome).await,
            Action::Release { task } => {
                let released = self.ctx.release(&self.spec.id, task.clone()).await;
                match released {
                    Ok(claims) => {
                        self.ctx.record(Event::Release { agent: self.spec.id.clone(), task: task.clone(), claims });
                        Outcome::Done
                    }
                    Err(violation) => Outcome::Refused(violation),
                }
            }
            Action::Brief(brief) => self.brief(brief, outcome).await,
            Action::Report(report) => {
                let result = self.send_report(report, resending(done), outcome).await;
                self.end_turn();
                result
            }
            Action::Escalate { reason, severity } => self.escalate(reason, *severity, done, outcome).await,
            Action::Send(send) => {
                let envelope =
                    self.envelope(&send.to, send.kind, Draft::Raw(send.doc.clone()), send.doc.to_string()).await;
                let result = self.deliver(envelope, outcome).await;
                if send.kind == EnvelopeKind::Message {
                    self.end_turn();
                }
                match result {
                    Ok(()) => Outcome::Done,
                    Err(violation) => Outcome::Refused(violation),
                }
            }
            Action::Finish => Outcome::Done,
        }
    }

    /// An escalation to the parent, as a typed message (nothing when the agent is the lead).
    async fn escalate(&mut self, reason: &str, severity: Severity, done: &[Done], outcome: &mut ActOutcome) -> Outcome {
        if self.spec.parent.is_none() {
            tracing::warn!(target: "less.run", "{}: nobody to escalate to: {reason}", self.spec.id);
            return Outcome::Done;
        }
        let report = escalation(reason, severity, Vec::new());
        let result = self.send_report(&report, resending(done), outcome).await;
        self.end_turn();
        result
    }

    /// A search's, a listing's or a description's answer from the gateway: what it let through joins the inbox.
    fn looked(
        &mut self,
        answer: Result<Result<crate::run::gateway::Looked, Violation>, String>,
        span: &tracing::Span,
        what: &str,
        outcome: &mut ActOutcome,
    ) -> Outcome {
        match answer {
            Ok(Ok(looked)) => {
                outcome.inline_tokens += u64::from(looked.tokens);
                tool_done(span, looked.tokens, None);
                for item in looked.items {
                    self.inbox.keep(item);
                }
                Outcome::Done
            }
            Ok(Err(violation)) => {
                tool_done(span, 0, Some(violation.code));
                outcome.refusals.push(violation.code);
                Outcome::Refused(violation)
            }
            Err(err) => Outcome::Refused(run_failed(what, &err)),
        }
    }

    /// Pulls content through the gateway; what it lets through joins the inbox, with its digest remembered.
    async fn deref(&mut self, deref: crate::run::wire::DerefAction, outcome: &mut ActOutcome) -> Outcome {
        let span = tool_span("deref");
        span.record("less.deref.pointers", i64::try_from(deref.pointers.len()).unwrap_or(i64::MAX));
        let gateway = &self.gateway;
        let answer = async { ractor::call!(gateway, GatewayMsg::Deref, deref) }.instrument(span.clone()).await;
        match answer {
            Ok(result) => match result.result {
                Ok(resolved) => {
                    for r in resolved {
                        let key = Pointer::new(r.pointer.ty(), r.pointer.reference(), r.pointer.span())
                            .map(|p| p.to_string())
                            .unwrap_or_else(|_| r.pointer.to_string());
                        self.seen.insert(key.clone(), r.digest);
                        // What the gateway let through is what the agent knows (an LLM agent's prompt).
                        self.inbox
                            .keep(Received::Dereferenced(Arc::new(Dereferenced { pointer: key, content: r.content })));
                    }
                    Outcome::Done
                }
                Err(violation) => {
                    tool_done(&span, 0, Some(violation.code));
                    outcome.refusals.push(violation.code);
                    Outcome::Refused(violation)
                }
            },
            Err(err) => Outcome::Refused(run_failed("deref", &err.to_string())),
        }
    }

    /// Asks the parent for a dereference over this turn's budget: a `question` carrying the `deref_request` goes to
    /// the parent's gateway (counted like any message), then the parent decides while this turn waits.
    async fn ask_grant(&mut self, ask: &AskGrantAction, outcome: &mut ActOutcome) -> Outcome {
        if self.ctx.mode != WireMode::Less {
            return Outcome::Denied { reason: "this run meters no dereference: read it with a deref".to_owned() };
        }
        let Some(parent) = self.spec.parent.clone() else {
            return Outcome::Refused(Violation::new(
                ErrorCode::ScenarioInvalid,
                "",
                format!("{} is the lead: there is nobody to ask for a grant", self.spec.id),
            ));
        };
        let pointers: Result<Vec<Pointer>, Violation> = ask.pointers.iter().map(|t| Pointer::parse(t)).collect();
        let pointers = match pointers {
            Ok(p) if !p.is_empty() => p,
            Ok(_) => {
                return Outcome::Refused(Violation::new(ErrorCode::SchemaInvalid, "/pointers", "name 1..12 pointers"));
            }
            Err(violation) => return Outcome::Refused(violation),
        };
        let clip = |text: &str| -> String {
            let text = if text.trim().is_empty() { "over my deref budget" } else { text.trim() };
            text.chars().take(200).collect()
        };
        let msg_id = self.ctx.next_msg_id(&self.spec.id).await;
        let request = less_contract::DerefRequest {
            request_id: format!("dr-{msg_id}"),
            requester: self.spec.id.clone(),
            pointers: pointers.clone(),
            reason: clip(&ask.reason),
            intended_use: clip(&ask.intended_use),
            grant_id: None,
        };
        let message = TypedMessage {
            from: self.spec.id.clone(),
            msg_id: msg_id.clone(),
            to: Some(parent.clone()),
            engrams: Vec::new(),
            deref_requests: vec![request.clone()],
            body: None,
            grant_id: None,
            payload: Payload::Question {
                question: "May I read these? They are over my deref budget.".to_owned(),
                refs: Vec::new(),
            },
        };
        let draft = Draft::Message(message);
        let wire = match draft.to_value() {
            Ok(doc) => doc.to_string(),
            Err(violation) => return Outcome::Refused(violation),
        };
        let envelope = Envelope { msg_id, ..self.envelope(&parent, EnvelopeKind::Message, draft, wire).await };
        if let Err(violation) = self.deliver(envelope, outcome).await {
            return Outcome::Refused(violation);
        }
        self.ctx.record(Event::GrantAsked {
            requester: self.spec.id.clone(),
            parent: parent.clone(),
            request_id: request.request_id.clone(),
            pointers: ask.pointers.clone(),
        });
        let tokens = self.cost(&pointers).await;
        let Some(gateway) = self.ctx.directory.get(&parent) else {
            return Outcome::Denied { reason: format!("no agent {parent}") };
        };
        let ask = Box::new(GrantAsk { request, tokens });
        match ractor::call!(gateway, GatewayMsg::AskGrant, ask) {
            Ok(Outcome::Granted { grant_id }) => Outcome::Granted { grant_id },
            Ok(other) => other,
            Err(err) => Outcome::Denied { reason: format!("{parent} did not answer: {err}") },
        }
    }

    /// What the content behind `pointers` would cost, in tokens (0 for what does not resolve): the parent weighs it.
    async fn cost(&self, pointers: &[Pointer]) -> u32 {
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let mut tokens = 0;
        for pointer in pointers {
            tokens += counter.count(&self.read_span(pointer).await);
        }
        tokens
    }

    /// This agent, as a parent, decides on a child's deref request and carries the decision out: a grant issued by
    /// its gateway and delivered to the child, or a denial (a failed `gate_report` naming the request).
    async fn decide(&mut self, ask: GrantAsk, spent: &mut ActOutcome) -> Outcome {
        let requester = ask.request.requester.clone();
        let request_id = ask.request.request_id.clone();
        // What the parent had when it last acted, and what the requester sent since: not what its other children
        // sent meanwhile, which depends on whose turn ran first.
        let mut inbox = self.inbox.docs();
        inbox.extend(
            self.pending
                .iter()
                .filter(|item| {
                    let from = match &item.doc {
                        Received::Delivered(doc) => doc.from(),
                        Received::Verbatim(verbatim) => verbatim.doc.from(),
                        _ => None,
                    };
                    from == Some(requester.as_str())
                })
                .map(|item| item.doc.clone()),
        );
        let input = DecideInput { ask, spec: self.spec.clone(), inbox, mode: self.ctx.mode };
        let decision = AGENT_TURN.scope(self.spec.id.clone(), self.agent.decide(&input)).await;
        self.record_usage();
        let outcome = spent;
        let reason = match decision {
            Decision::Grant(spec) => {
                let spec = GrantSpec { to: requester.clone(), ..spec };
                match self.grant(&spec, Some(&request_id), outcome).await {
                    Outcome::Done => return Outcome::Granted { grant_id: spec.id },
                    Outcome::Refused(violation) => {
                        format!("the grant was refused: {}: {}", violation.code, violation.message)
                    }
                    other => return other,
                }
            }
            Decision::Deny(reason) => reason,
        };
        let reason: String = reason.chars().take(200).collect();
        self.ctx.record(Event::GrantDenied {
            issuer: self.spec.id.clone(),
            requester: requester.clone(),
            request_id: request_id.clone(),
            reason: reason.clone(),
        });
        let msg_id = self.ctx.next_msg_id(&self.spec.id).await;
        let message = TypedMessage {
            from: self.spec.id.clone(),
            msg_id: msg_id.clone(),
            to: Some(requester.clone()),
            engrams: Vec::new(),
            deref_requests: Vec::new(),
            body: None,
            grant_id: None,
            payload: Payload::GateReport {
                gate_id: request_id,
                status: less_contract::GateStatus::Fail,
                report_ref: None,
            },
        };
        let draft = Draft::Message(message);
        if let Ok(doc) = draft.to_value() {
            let wire = doc.to_string();
            let envelope = Envelope { msg_id, ..self.envelope(&requester, EnvelopeKind::Message, draft, wire).await };
            let _ = self.deliver(envelope, outcome).await;
        }
        Outcome::Denied { reason }
    }

    /// Issues a grant through this agent's gateway and delivers it to the grantee (whose gateway checks it).
    async fn grant(&mut self, spec: &GrantSpec, answers: Option<&str>, outcome: &mut ActOutcome) -> Outcome {
        match ractor::call!(self.gateway, GatewayMsg::IssueGrant, spec.clone(), answers.map(str::to_owned)) {
            Ok(Ok(grant)) => {
                // The grantee's gateway verifies and keeps the MAC; the agent reads, and is charged for, the terms
                // (it presents a grant by id). Counting the MAC's random hex would also make the same run count
                // differently each time.
                let wire = match serde_json::to_string(&grant.terms) {
                    Ok(wire) => wire,
                    Err(err) => return Outcome::Refused(run_failed("grant", &err.to_string())),
                };
                let envelope = self.envelope(&spec.to, EnvelopeKind::Grant, Draft::Grant(grant), wire).await;
                match self.deliver(envelope, outcome).await {
                    Ok(()) => Outcome::Done,
                    Err(violation) => Outcome::Refused(violation),
                }
            }
            Ok(Err(violation)) => {
                outcome.refusals.push(violation.code);
                Outcome::Refused(violation)
            }
            Err(err) => Outcome::Refused(run_failed("grant", &err.to_string())),
        }
    }

    /// What this agent has in its context already in the fair baseline: the spans pasted into its briefs and into
    /// the reports it received, and what it dereferenced.
    fn held(&self) -> Vec<Pointer> {
        let mut held = Vec::new();
        for item in &self.inbox.docs() {
            match item {
                Received::Dereferenced(read) => held.extend(Pointer::parse(&read.pointer).ok()),
                // A baseline's search answer pasted each hit's content.
                Received::Searched(searched) => {
                    let pasted = searched.hits.iter().filter(|hit| hit.content.is_some());
                    held.extend(pasted.filter_map(|hit| Pointer::parse(&hit.pointer).ok()));
                }
                Received::Verbatim(verbatim) => match &verbatim.doc {
                    Delivered::Brief(brief) => held.extend(brief.pointer_packs.values().flatten().map(|p| p.0.clone())),
                    Delivered::Message(message) => {
                        held.extend(message.engrams.iter().flat_map(|e| e.pointers.iter().cloned()));
                    }
                    Delivered::Grant(_) => {}
                },
                _ => {}
            }
        }
        held
    }

    /// The agent sent a message: its gateway starts a new deref budget.
    fn end_turn(&self) {
        self.gateway.send_message(GatewayMsg::EndTurn).ok();
    }

    /// Recall through the run's memory as this agent, answered (counted, capped, recorded) by its gateway; what it
    /// lets through joins the inbox.
    async fn query(&mut self, text: &str, options: QueryOptions, outcome: &mut ActOutcome) -> Outcome {
        let span = tool_span("query");
        let gateway = &self.gateway;
        let answer = async { ractor::call!(gateway, GatewayMsg::Recall, Box::new((text.to_owned(), options))) }
            .instrument(span.clone())
            .await;
        match answer {
            Ok(Ok(looked)) => {
                outcome.inline_tokens += u64::from(looked.tokens);
                tool_done(&span, looked.tokens, None);
                for item in looked.items {
                    self.inbox.keep(item);
                }
                Outcome::Done
            }
            Ok(Err(failure)) => {
                tool_done(&span, 0, Some(failure.code));
                outcome.refusals.extend(failure.refusal);
                Outcome::Refused(Violation::new(failure.code, "", failure.message))
            }
            Err(err) => Outcome::Refused(run_failed("query", &err.to_string())),
        }
    }

    /// Widens the newest engram of `subject` to `to`, as this agent; a refusal is in the ledger and the outcome.
    async fn promote(&mut self, subject: &str, to: less_contract::Scope, outcome: &mut ActOutcome) -> Outcome {
        let result = self.ctx.promote(&self.spec.id, subject.to_owned(), to).await;
        let mut answer = Outcome::Done;
        let (id, code, message) = match result {
            Ok(id) => (id, None, String::new()),
            Err(err) => {
                outcome.refusals.extend(err.refusal);
                answer = Outcome::Refused(Violation::new(err.code, "", err.message.clone()));
                (None, Some(err.code), err.message)
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
        answer
    }

    /// Claims surfaces in the run's coordination ledger. A refusal (another agent's live claim overlaps) is the
    /// agent's to handle; an override is escalated to the agent's parent, naming both agents and both intents, and
    /// each of its decisions becomes a decision engram in the run's memory.
    async fn claim(&mut self, claim: &crate::run::ClaimAction, outcome: &mut ActOutcome) -> Outcome {
        let (surfaces, task) = (claim.surfaces.clone(), claim.task.clone());
        let agent = self.spec.id.clone();
        let claimed = match self.ctx.claim(&agent, claim.clone()).await {
            Ok(claimed) => claimed,
            Err(violation) => {
                outcome.refusals.push(violation.code);
                self.ctx.record(Event::Claim {
                    agent,
                    surfaces,
                    task,
                    claim_id: None,
                    displaced: Vec::new(),
                    code: Some(violation.code),
                    message: violation.message.clone(),
                });
                return Outcome::Refused(violation);
            }
        };
        let displaced: Vec<crate::run::Displaced> = claimed
            .conflicts
            .iter()
            .map(|c| crate::run::Displaced {
                claim_id: c.claim_id.clone(),
                holder: c.displaced.clone(),
                conflict_id: c.conflict_id.clone(),
                decision_id: c.decision_id.clone(),
            })
            .collect();
        self.ctx.record(Event::Claim {
            agent: agent.clone(),
            surfaces,
            task,
            claim_id: Some(claimed.claim.claim_id.clone()),
            displaced,
            code: None,
            message: String::new(),
        });
        let created_at = self.ctx.now_rfc3339();
        let mut engrams = Vec::new();
        for decision in &claimed.decisions {
            match crate::coord::decision_engram(decision, &agent, &created_at, less_contract::Scope::Run) {
                Ok(engram) => engrams.push(engram.into_inner()),
                Err(violation) => tracing::warn!(target: "less.run", "{agent}: decision engram: {violation}"),
            }
        }
        self.remember(&engrams).await;
        if claimed.conflicts.is_empty() || self.spec.parent.is_none() {
            return Outcome::Done;
        }
        let reason: String = claimed
            .conflicts
            .iter()
            .map(|c| {
                format!(
                    "{} overrode {}'s claim on {} (\"{}\") for \"{}\"",
                    c.overriding,
                    c.displaced,
                    c.surfaces.join(", "),
                    c.displaced_intent,
                    c.overriding_intent
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let refs = claimed.conflicts.iter().map(|c| format!("sam:decision:{}", c.decision_id)).collect();
        self.send_report(&escalation(&reason, Severity::Warning, refs), false, outcome).await
    }

    /// Puts the engrams of a delivered report into the run's memory as this agent, in the scenario's project.
    /// Refusals (rate limit, scope) are recorded; the report itself was delivered either way.
    async fn remember(&self, engrams: &[Engram]) {
        for engram in engrams {
            let id = engram.id.clone();
            let Ok(engram) = Valid::new(engram.clone()) else {
                // The receiver's gateway validated the message, engrams included; nothing invalid gets here.
                continue;
            };
            let event = match self.ctx.put(&self.spec.id, engram).await {
                Ok(put) => Event::MemoryPut {
                    agent: self.spec.id.clone(),
                    id: put.id,
                    status: put.status,
                    superseded: put.superseded,
                    contradictions: put.contradictions,
                    code: None,
                    message: String::new(),
                },
                Err(err) => Event::MemoryPut {
                    agent: self.spec.id.clone(),
                    id,
                    status: "refused".to_owned(),
                    superseded: Vec::new(),
                    contradictions: Vec::new(),
                    code: Some(err.code),
                    message: err.message,
                },
            };
            self.ctx.record(event);
        }
    }

    async fn brief(&mut self, brief: &BriefAction, outcome: &mut ActOutcome) -> Outcome {
        let mut result = Outcome::Done;
        // The fair baseline has no grants: without LESS no budget refuses, so there is nothing to allow.
        let grants = if self.ctx.mode == WireMode::Verbatim { &[][..] } else { &brief.grants[..] };
        for spec in grants {
            // A refused grant is in the ledger and the outcome; the brief still goes out.
            if let refused @ Outcome::Refused(_) = self.grant(spec, None, outcome).await
                && result == Outcome::Done
            {
                result = refused;
            }
        }
        // The symbols and capsules the brief names, the same for every child (validation refused unknown names).
        let symbols = self.ctx.scenario.symbol_entries(&brief.symbols);
        let capsules: Vec<String> = match self.ctx.scenario.hydrate(&brief.capsules) {
            Ok(closure) => closure.into_iter().map(|c| c.text).collect(),
            Err(violation) => return Outcome::Refused(violation),
        };
        let shared = Shared { symbols: &symbols, capsules: &capsules };
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
                brief_id: self.ctx.next_msg_id(&self.spec.id).await,
                from: self.spec.id.clone(),
                what_matters_now: now.clone(),
                constraints: brief.constraints.clone(),
                top_risks: brief.risks.clone(),
                pointer_packs: packs.clone(),
                budgets: [(role.clone(), self.ctx.scenario.budgets.of(&role))].into_iter().collect(),
                grants: Vec::new(),
                symbols: symbols.clone(),
                capsules: capsules.clone(),
            };
            let draft = Draft::Brief(doc_brief);
            let less_wire = match draft.to_value() {
                Ok(doc) => doc.to_string(),
                Err(violation) => return Outcome::Refused(violation),
            };
            let mut envelope = self.envelope(&child, EnvelopeKind::Brief, draft, String::new()).await;
            let wire = match self.ctx.mode {
                WireMode::Less => Ok(less_wire),
                WireMode::Verbatim => {
                    self.fair_brief(&child, brief, &now, &packs, &shared).await.map(|(wire, restated)| {
                        envelope.restated = restated;
                        wire
                    })
                }
                WireMode::VerbatimWhole => self.whole_brief(&child, brief, &now, &packs).await,
            };
            envelope.wire = match wire {
                Ok(wire) => wire,
                Err(violation) => return Outcome::Refused(violation),
            };
            if let Err(violation) = self.deliver(envelope, outcome).await
                && result == Outcome::Done
            {
                result = Outcome::Refused(violation);
            }
        }
        self.end_turn();
        result
    }

    /// The fair baseline's brief to `child`, and the prior reports (message ids) it restates.
    async fn fair_brief(
        &self,
        child: &str,
        brief: &BriefAction,
        now: &[String],
        packs: &BTreeMap<String, Vec<PointerText>>,
        shared: &Shared<'_>,
    ) -> Result<(String, Vec<String>), Violation> {
        // What the baseline restates is the ledger's: without it the brief would silently undercount the baseline.
        let known = self
            .ctx
            .ledger
            .ask(|reply| TokenLedgerMsg::Known(self.spec.id.clone(), reply))
            .await
            .map_err(|err| run_failed("ledger", &err.to_string()))?;
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
            symbols: &shared.symbol_lines(),
            prior_work: shared.capsules,
        });
        Ok((text, restated))
    }

    /// The whole-file baseline's brief to `child`: the plan's documents and each packed file whole, once each, and
    /// every report delivered so far in the run.
    async fn whole_brief(
        &self,
        child: &str,
        brief: &BriefAction,
        now: &[String],
        packs: &BTreeMap<String, Vec<PointerText>>,
    ) -> Result<String, Violation> {
        let mut seen: Vec<(less_contract::PointerType, String)> = Vec::new();
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
        let all_reports =
            self.ctx.ledger.ask(TokenLedgerMsg::History).await.map_err(|err| run_failed("ledger", &err.to_string()))?;
        let lines: Vec<String> = now.iter().chain(&brief.constraints).chain(&brief.risks).cloned().collect();
        // Without a symbol table or capsule closure the whole baseline restates all of both.
        let scenario = &self.ctx.scenario;
        let all_symbols = Shared { symbols: &scenario.symbols, capsules: &[] }.symbol_lines();
        let all_ids: Vec<String> = scenario.capsules.iter().map(|c| c.id.clone()).collect();
        let prior_work: Vec<String> = scenario.hydrate(&all_ids)?.into_iter().map(|c| c.text).collect();
        Ok(baseline::whole_brief(&WholeBriefText {
            from: &self.spec.id,
            to: child,
            plan: Some(&self.ctx.scenario.plan),
            plan_documents: &plan_documents,
            all_reports: &all_reports,
            lines: &lines,
            files: &files,
            symbols: &all_symbols,
            prior_work: &prior_work,
        }))
    }

    /// The gate adapter: a gate report whose status is read from the report `report_ref` points to, carrying only
    /// the reference, never the report's text.
    async fn gate_adapter(&self, gate_id: &str, report_ref: &Option<String>) -> Result<Payload, Violation> {
        let unreadable = |message: String| Violation::new(ErrorCode::PointerUnresolved, "/report_ref", message);
        let text = report_ref
            .as_deref()
            .ok_or_else(|| unreadable("a gate report without a status needs report_ref".into()))?;
        let pointer = Pointer::parse(text)?;
        let content = match self.ctx.resolver.ask(|reply| ResolverMsg::ReadUnpinned(pointer.clone(), reply)).await {
            Ok(Ok(content)) => content,
            Ok(Err(violation)) => return Err(violation),
            Err(err) => return Err(run_failed("resolver", &err.to_string())),
        };
        let status = crate::gate::gate_status(&content).ok_or_else(|| {
            Violation::new(
                ErrorCode::ArgumentInvalid,
                "/status",
                format!("{text} says neither pass nor fail in a form the gate adapter reads; give `status`"),
            )
        })?;
        Ok(Payload::GateReport { gate_id: gate_id.to_owned(), status, report_ref: Some(pointer.to_string()) })
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
        match self.ctx.resolver.ask(|reply| ResolverMsg::ReadUnpinned(pointer.clone(), reply)).await {
            Ok(Ok(text)) => text,
            _ => String::new(),
        }
    }

    /// Delivers a typed message; `resending` says it answers a refusal earlier in the turn (a `resend` event).
    /// Only what was delivered is remembered: a refused message's engrams never reach the memory.
    async fn send_report(&mut self, report: &ReportAction, resending: bool, outcome: &mut ActOutcome) -> Outcome {
        let envelope = match self.render_report(report).await {
            Ok(envelope) => envelope,
            Err(violation) => return Outcome::Refused(violation),
        };
        let msg_id = envelope.msg_id.clone();
        let to = envelope.to.clone();
        let engrams = match &envelope.doc {
            Draft::Message(message) => message.engrams.clone(),
            Draft::Brief(_) | Draft::Grant(_) | Draft::Raw(_) => Vec::new(),
        };
        match self.deliver(envelope, outcome).await {
            Ok(()) => {
                if resending {
                    self.ctx.record(Event::Resent { from: self.spec.id.clone(), to, msg_id });
                }
                self.remember(&engrams).await;
                Outcome::Done
            }
            Err(violation) => Outcome::Refused(violation),
        }
    }

    async fn render_report(&self, report: &ReportAction) -> Result<Envelope, Violation> {
        let to = report.to.clone().or_else(|| self.spec.parent.clone()).unwrap_or_else(|| self.spec.id.clone());
        let mut engrams = Vec::new();
        let specs: Vec<&less_contract::EngramSpec> = report.engrams.iter().collect();
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
                let id = format!("eg_{}", &hasher.finalize().to_hex()[..16]);
                if let Some(task) = &spec.task {
                    self.ctx.record(Event::Answer {
                        agent: self.spec.id.clone(),
                        engram: id.clone(),
                        task: task.clone(),
                    });
                }
                engrams.push(Engram {
                    id,
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
            ReportKind::TaskClaim { task, symbols, capsules } => {
                Payload::TaskClaim { task: task.clone(), symbols: symbols.clone(), capsules: capsules.clone() }
            }
            ReportKind::Checkpoint { wave, state, capsules } => {
                Payload::Checkpoint { wave: *wave, state: *state, capsules: capsules.clone() }
            }
            ReportKind::TaskResult { task, status, criteria } => Payload::TaskResult {
                task: task.clone(),
                status: *status,
                criteria: criteria.clone(),
                commit: None,
                capsule: None,
            },
            ReportKind::GateReport { gate_id, status: Some(status), report_ref } => {
                Payload::GateReport { gate_id: gate_id.clone(), status: *status, report_ref: report_ref.clone() }
            }
            ReportKind::GateReport { gate_id, status: None, report_ref } => {
                self.gate_adapter(gate_id, report_ref).await?
            }
            ReportKind::Escalation { reason, severity, refs } => {
                Payload::Escalation { reason: reason.clone(), severity: *severity, refs: refs.clone() }
            }
            ReportKind::Question { question, refs } => {
                Payload::Question { question: question.clone(), refs: refs.clone() }
            }
        };
        let msg_id = self.ctx.next_msg_id(&self.spec.id).await;
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
        let (wire, prose) = match self.ctx.mode {
            WireMode::Less => (Draft::Message(message.clone()).to_value()?.to_string(), None),
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
        Ok(Envelope {
            from: self.spec.id.clone(),
            to,
            msg_id,
            kind: EnvelopeKind::Message,
            doc: Draft::Message(message),
            wire,
            inline_code,
            code_sources,
            prose,
            restated: Vec::new(),
        })
    }

    async fn envelope(&self, to: &str, kind: EnvelopeKind, doc: Draft, wire: String) -> Envelope {
        Envelope {
            from: self.spec.id.clone(),
            to: to.to_owned(),
            msg_id: self.ctx.next_msg_id(&self.spec.id).await,
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
        if self.ctx.directory.is_lost(&envelope.to) {
            // Its subtree is out of the run: answered as for an agent left down, by the sender's side.
            self.ctx.record(Event::Dropped {
                from: envelope.from.clone(),
                to: envelope.to.clone(),
                msg_id: envelope.msg_id.clone(),
            });
            outcome.refusals.push(ErrorCode::AgentDown);
            return Err(Violation::new(
                ErrorCode::AgentDown,
                "",
                format!("{} is out of the run (its node failed past the restart limit); not delivered", envelope.to),
            ));
        }
        let Some(mut gateway) = self.ctx.directory.get(&envelope.to) else {
            return Err(Violation::new(
                ErrorCode::ScenarioInvalid,
                "/to",
                format!("no agent {} in this run: send to an agent of the scenario", envelope.to),
            ));
        };
        // On a worker node, what this turn recorded so far (a query, a search) reaches the head's ledger before the
        // receiving gateway records the delivery: the ledger's order, and the report's turns, do not depend on
        // which link was faster (issue 61: per-turn tokens read [86, 0, 335, 0] on nodes, [86, 0, 0, 335] in one
        // process). A local run settles at once.
        self.ctx.settle().await;
        let mut redelivered = 0;
        loop {
            match ractor::call!(gateway, GatewayMsg::Deliver, Box::new(envelope.clone())) {
                Ok(Ok(tokens)) => {
                    outcome.inline_tokens += u64::from(tokens);
                    return Ok(());
                }
                Ok(Err(violation)) => {
                    // A moment's span under the turn: what the exporter counts as a refusal (`less.refusals`).
                    drop(tracing::info_span!(
                        target: "gen_ai",
                        "refused",
                        less.refusal.code = violation.code.as_str(),
                        less.to = envelope.to.as_str()
                    ));
                    outcome.refusals.push(violation.code);
                    return Err(violation);
                }
                // The receiver's node failed with the message in flight: once its parent's node started it again
                // (or, on a worker node of another process, the head moved its agents to a live node), the message
                // goes to the new gateway under the same id. The new gateway knows from the ledger whether the old
                // one had delivered it, so the agent gets it exactly once.
                Err(err) if redelivered < MAX_REDELIVERIES => {
                    let Some(next) = self
                        .ctx
                        .directory
                        .replaced(&envelope.to, gateway.get_id(), crate::run::slot::RESTART_WAIT)
                        .await
                    else {
                        return Err(run_failed("delivery", &err.to_string()));
                    };
                    tracing::warn!(
                        target: "less.run",
                        "{}: the delivery of {} to {} failed ({err}); delivering it to its new node",
                        self.spec.id,
                        envelope.msg_id,
                        envelope.to
                    );
                    gateway = next;
                    redelivered += 1;
                }
                Err(err) => return Err(run_failed("delivery", &err.to_string())),
            }
        }
    }
}

/// Whether the turn's last action was a message its receiver refused (so the next one is its resend).
/// The symbols and hydrated capsules a brief carries.
struct Shared<'a> {
    symbols: &'a BTreeMap<String, String>,
    capsules: &'a [String],
}

impl Shared<'_> {
    /// The symbols as the baselines spell them: `id: value`.
    fn symbol_lines(&self) -> Vec<String> {
        self.symbols.iter().map(|(id, value)| format!("{id}: {value}")).collect()
    }
}

fn resending(done: &[Done]) -> bool {
    done.last().is_some_and(|d| {
        matches!(d.action, Action::Report(_) | Action::Escalate { .. } | Action::Send(_))
            && matches!(d.outcome, Outcome::Refused(_))
    })
}

/// An escalation to the parent: `reason` cut to [`crate::MAX_CLAIM_CHARS`], `refs` its evidence.
fn escalation(reason: &str, severity: Severity, refs: Vec<String>) -> ReportAction {
    let reason: String = if reason.chars().count() > crate::MAX_CLAIM_CHARS {
        reason.chars().take(crate::MAX_CLAIM_CHARS - 1).collect::<String>() + "…"
    } else {
        reason.to_owned()
    };
    ReportAction {
        to: None,
        kind: ReportKind::Escalation { reason: reason.clone(), severity, refs },
        engrams: Vec::new(),
        summary: reason,
        paste_sources: false,
        grant: None,
    }
}

/// How many times a message whose receiver's node failed in flight goes to the node started in its place.
const MAX_REDELIVERIES: u32 = 2;

/// An actor of the run that did not answer (`LESS_RUN_FAILED`).
fn run_failed(what: &str, err: &str) -> Violation {
    Violation::new(ErrorCode::RunFailed, "", format!("{what}: an actor of the run did not answer: {err}"))
}

/// Whether the file behind `pointer` was pasted already; records it when not.
fn already_pasted(pasted: &mut Vec<(less_contract::PointerType, String)>, pointer: &Pointer) -> bool {
    let key = (pointer.ty(), pointer.location().to_owned());
    if pasted.contains(&key) {
        true
    } else {
        pasted.push(key);
        false
    }
}

#[cfg(test)]
mod tests;
