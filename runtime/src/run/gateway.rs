//! The budget enforcer in front of every agent's mailbox; the rules it applies are the enforcement core's
//! ([`crate::enforce`]), its agent's grants held in memory in a [`GrantBook`].
//!
//! Nobody holds an agent's `ActorRef` but its gateway: messages to the agent, the supervisor's turn requests and the
//! agent's own derefs and grant requests all pass here.
//! Every mode: a delivered document must validate; it is checked once, here, into a typed [`Document`].
//! Rules (LESS mode): its wire text must fit the receiver's MAX_INLINE_TOKENS; it may carry at most MAX_ENGRAMS
//! engrams; inline code needs a grant. A refusal goes back to the sender with the code
//! and the instruction; the second consecutive refusal of the same sender also escalates to the sender's parent.
//! Derefs are metered per turn (MAX_REPO_SPANS, MAX_ARTIFACT_SECTIONS, MAX_SAM_ITEMS, MAX_DEREF_TOKENS_TOTAL); what
//! the budget cannot cover needs a valid grant, else LESS_DEREF_DENIED.
//! The baselines (verbatim, verbatim-whole): everything is counted, nothing within the contract is refused.
//!
//! Restart policy: the gateway supervises its agent. An agent that panics is restarted from its arguments, at most
//! [`MAX_RESTARTS`] times per [`RESTART_WINDOW`]; past that the agent stays down and the gateway escalates to its parent.
//! Every restart is recorded in the ledger.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use serde_json::Value;

use crate::enforce::{
    Charge, DerefMeter, GrantBook, Reach, Reader, Spend, check_code, check_deref, check_inbound, check_issue,
    commit_deref, spend_on_code,
};
use crate::resolver::Resolved;
use crate::run::RunContext;
use crate::run::agent::{ActOutcome, ActRequest, AgentActor, AgentArgs, AgentMsg, GrantAsk, Outcome};
use crate::run::inbox::{Delivered, Inbox, InboxItem, Received, Spill, Verbatim};
use crate::run::ledger::{Event, SentText};
use crate::run::resolver_actor::ResolverMsg;
use crate::run::services::MemoryFailure;
use crate::run::wire::{
    DerefAction, DescribeAction, Document, Draft, Envelope, EnvelopeKind, ListAction, SearchAction,
};
use less_contract::Budget;
use less_contract::Grant;
use less_contract::TokenCounter;
use less_contract::{ErrorCode, Violation};
use less_contract::{GrantSpec, WireMode};
use less_contract::{Payload, Severity, TypedMessage, Valid};
use less_contract::{Pointer, PointerType};
pub use look::{Looked, MAX_DESCRIBE};

use crate::supervision::{Children, Exit, Response, Restart, Strategy};
pub use crate::supervision::{MAX_RESTARTS, RESTART_WINDOW};

/// The gateway actor.
pub struct GatewayActor;

/// Messages to a gateway.
pub enum GatewayMsg {
    /// A message for the agent, from another agent; the reply is the token count or the refusal.
    Deliver(Box<Envelope>, RpcReplyPort<Result<u32, Violation>>),
    /// A system message (an escalation) already checked and recorded by the gateway that wrote it: only forwarded.
    Forward(Box<(Envelope, Arc<Document>, u32)>),
    /// The supervisor asks the agent to take a turn.
    Act(ActRequest, RpcReplyPort<ActOutcome>),
    /// The same from another node: the step by its index in the scenario, and the attempt.
    ActAt(usize, u32, RpcReplyPort<ActOutcome>),
    /// The agent's own deref request.
    Deref(DerefAction, RpcReplyPort<DerefOutcome>),
    /// The agent's search of the workspace index.
    Search(SearchAction, RpcReplyPort<Result<Looked, Violation>>),
    /// The agent's listing of workspace files.
    List(ListAction, RpcReplyPort<Result<Looked, Violation>>),
    /// The agent asks what pointers hold (its catalogue).
    Describe(DescribeAction, RpcReplyPort<Result<Looked, Violation>>),
    /// The agent's query of the run's memory: its text and options.
    Recall(Box<(String, crate::memory::QueryOptions)>, RpcReplyPort<Result<Looked, MemoryFailure>>),
    /// The agent sent a message: its turn is over (the deref budget starts again).
    EndTurn,
    /// The agent issues a grant to a descendant (answering the deref request named, if any).
    IssueGrant(GrantSpec, Option<String>, RpcReplyPort<Result<Grant, Violation>>),
    /// A child asks this agent for a dereference over its budget; the agent decides (the child's turn waits).
    AskGrant(Box<GrantAsk>, RpcReplyPort<Outcome>),
    /// A receiver's gateway asks to spend one use of this agent's inline-code grant on a message it sent.
    SpendCodeGrant(CodeGrantRequest, RpcReplyPort<Result<u32, Violation>>),
    /// The agent moved here from a lost node: what the ledger says was delivered to it, oldest first (sender and
    /// document), and the pointers of each deref it was granted; taken again without being recorded again (its
    /// inbox, the grants it had accepted, the digests of what it read), then the agent starts again from them.
    Restore(Box<Restored>, RpcReplyPort<usize>),
    /// Fails this node on purpose, and with it its agent and the nodes below (tests of its parent's restart).
    #[cfg(any(test, feature = "faults"))]
    Fail,
    /// Fails this node on purpose once it has delivered its next message, before it acknowledges it (tests of a
    /// message in flight to a node that fails).
    #[cfg(any(test, feature = "faults"))]
    FailAfterNextDelivery,
}

/// What a run's ledger holds, for agents that start again from it (a lost node's, a resumed run's); it crosses to
/// the node a lost node's agents move to.
#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Kept {
    /// The ledger's events, oldest first.
    pub(crate) events: Vec<Event>,
    /// In a baseline run, what each delivered message was sent as (`wire.jsonl`, by message id): what its receiver
    /// read.
    pub(crate) wire: HashMap<String, String>,
}

/// What the ledger says an agent had: for [`GatewayMsg::Restore`].
pub struct Restored {
    /// Delivered to it, oldest first: the sender, the message id, its tokens on the wire, the document and (a
    /// baseline's message) the text it was sent as.
    pub delivered: Vec<(String, String, u32, Arc<Document>, String)>,
    /// The pointers (text form) of each deref it was granted.
    pub read: Vec<Vec<String>>,
    /// The uses of its grants it spent, in order: the grant and what the use took (a deref's pointers and tokens; a
    /// message's inline code, nothing more).
    pub spent: Vec<(String, Spend)>,
    /// The derefs its budget paid for in the turn it is in (since the last message it sent): their pointers and
    /// tokens, so the turn's meter goes on where it was.
    pub metered: Vec<(Vec<String>, u32)>,
}

impl Restored {
    /// What `kept` says was delivered to `agent` and what it was granted to read.
    pub(crate) fn from_kept(kept: &Kept, agent: &str) -> Restored {
        let events = &kept.events;
        let delivered = events
            .iter()
            .filter_map(|e| match e {
                Event::Delivered { from, to, msg_id, tokens, doc, .. } if to == agent => {
                    let wire = kept.wire.get(msg_id).cloned().unwrap_or_default();
                    Some((from.clone(), msg_id.clone(), *tokens, doc.clone(), wire))
                }
                _ => None,
            })
            .collect();
        let read = events
            .iter()
            .filter_map(|e| match e {
                Event::Deref { agent: reader, pointers, granted: true, .. } if reader == agent => {
                    Some(pointers.clone())
                }
                _ => None,
            })
            .collect();
        let spent = events
            .iter()
            .filter_map(|e| match e {
                Event::Deref { agent: reader, pointers, tokens, granted: true, via_grant: Some(grant), .. }
                    if reader == agent =>
                {
                    let derefs = u32::try_from(pointers.len()).unwrap_or(u32::MAX);
                    Some((grant.clone(), Spend { derefs, tokens: *tokens }))
                }
                Event::Delivered { from, doc, .. } if from == agent => match &**doc {
                    Document::Message(message) => {
                        message.grant_id.clone().map(|grant| (grant, Spend { derefs: 0, tokens: 0 }))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        // The agent's turn started after the last message it sent (delivered or refused): the derefs since then
        // were charged to this turn's budget.
        let turn_start = events
            .iter()
            .rposition(|e| match e {
                Event::Delivered { from, kind: EnvelopeKind::Message, .. } => from == agent,
                Event::Rejected { from, .. } => from == agent,
                _ => false,
            })
            .map_or(0, |at| at + 1);
        let metered = events[turn_start..]
            .iter()
            .filter_map(|e| match e {
                Event::Deref { agent: reader, pointers, tokens, granted: true, via_grant: None, .. }
                    if reader == agent =>
                {
                    Some((pointers.clone(), *tokens))
                }
                _ => None,
            })
            .collect();
        Restored { delivered, read, spent, metered }
    }
}

/// `agent` and the agents below it whose nodes are below its node: those on the head below an agent on the head
/// (an agent placed on another node is that node's; see [`spawn_node`]). What a lost node takes with it.
pub(crate) fn local_subtree(scenario: &less_contract::Scenario, agent: &str) -> Vec<String> {
    let mut subtree = vec![agent.to_owned()];
    let mut next = 0;
    while let Some(parent) = subtree.get(next).cloned() {
        subtree.extend(node_children(scenario, &parent));
        next += 1;
    }
    subtree
}

/// The agents whose nodes `agent`'s node spawns and supervises: its children, when it and they run on the head.
fn node_children(scenario: &less_contract::Scenario, agent: &str) -> Vec<String> {
    if scenario.agent(agent).is_none_or(|a| a.node.is_some()) {
        return Vec::new();
    }
    let children = scenario.agents.iter().filter(|a| a.parent.as_deref() == Some(agent) && a.node.is_none());
    children.map(|a| a.id.clone()).collect()
}

/// Spawns `agent`'s node (its gateway, which spawns its agent and its children's nodes) linked to `supervisor`, its
/// parent's node or the run supervisor, and puts it in the run's directory. With `restore` (what the ledger holds: a
/// restart, a resumed run), every node of the subtree first takes back what the ledger says its agent had.
pub(crate) async fn spawn_node(
    ctx: &Arc<RunContext>,
    agent: &str,
    supervisor: ractor::ActorCell,
    restore: Option<Arc<Kept>>,
) -> Result<(ActorRef<GatewayMsg>, tokio::task::JoinHandle<()>), ractor::SpawnErr> {
    // Actor names are process-wide, and a failed node's subtree may not have let go of its names yet.
    static N_RESTARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut name = format!("{}:{}:gateway:{agent}", ctx.run_id, ctx.mode.as_str());
    if restore.is_some() {
        name.push_str(&format!(":r{}", N_RESTARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    }
    let args = GatewayArgs { ctx: ctx.clone(), agent_id: agent.to_owned(), restore };
    let (gateway, handle) = Actor::spawn_linked(Some(name), GatewayActor, args, supervisor).await?;
    ctx.directory.insert(agent.to_owned(), gateway.clone());
    Ok((gateway, handle))
}

/// A request to spend an inline-code grant.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CodeGrantRequest {
    /// The grant named by the message.
    pub grant_id: String,
    /// Where the pasted code comes from.
    pub sources: Vec<Pointer>,
    /// Tokens of pasted code.
    pub n_code: u32,
}

/// The answer to a deref.
#[derive(Debug, Clone)]
pub struct DerefOutcome {
    /// The content, when allowed.
    pub result: Result<Vec<Resolved>, Violation>,
}

/// Everything a gateway starts from.
pub struct GatewayArgs {
    /// The run.
    pub ctx: Arc<RunContext>,
    /// The agent it fronts.
    pub agent_id: String,
    /// A node started again (by its parent, or in a resumed run): what the ledger holds, from which it and the
    /// nodes it spawns take back what their agents had.
    pub(crate) restore: Option<Arc<Kept>>,
}

/// What an agent knows, kept by its gateway so a restarted agent starts from it: the documents delivered to it and
/// the digests of what it dereferenced.
#[derive(Debug, Clone, Default)]
pub struct AgentKnowledge {
    /// Delivered documents, oldest first, older typed messages past the run's cap spilled to `sam:msg:` stubs.
    pub inbox: Inbox,
    /// Digest of every pointer the agent dereferenced, by pointer text.
    pub seen: HashMap<String, less_contract::Digest>,
}

/// What a node supervises.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Member {
    /// Its agent.
    Agent,
    /// The node of a child agent.
    Node(String),
}

/// A gateway's mutable state.
pub struct GatewayState {
    ctx: Arc<RunContext>,
    agent_id: String,
    budget: Budget,
    /// The agent; `None` while it is down for good.
    agent: Option<ActorRef<AgentMsg>>,
    memory: AgentKnowledge,
    /// The agent's turn number; a turn ends when the agent sends a message.
    turn: u64,
    meter: DerefMeter,
    grants: GrantBook,
    /// What the agent may dereference without a grant (the scenario's `reach`).
    reach: Reach,
    /// Consecutive refused messages per sender (briefs and grants have no resend and do not count).
    refusals_by_sender: HashMap<String, u32>,
    /// The ids of messages spilled from the agent's inbox (shared with their stubs): a `sam:msg:<id>` pointer of one
    /// is within the agent's reach whatever its reach.
    spilled: HashSet<Arc<str>>,
    /// Senders and message types, one copy each for all the stubs that name them.
    names: HashSet<Arc<str>>,
    n_restarts_total: u32,
    /// Turns that arrived while the agent was being restarted: taken by the new agent, or answered as down.
    waiting: Vec<(Box<ActRequest>, RpcReplyPort<ActOutcome>)>,
    /// The nodes this node supervises, by actor id: its children's on the head.
    children: HashMap<ractor::ActorId, (String, ractor::ActorCell)>,
    /// What this node supervises, in start order (its agent, then its children's nodes): one_for_one, all
    /// transient, each within its own intensity (`crate::supervision`).
    members: Children<Member>,
    /// The ids of the messages delivered to the agent (restored from the ledger too): a message sent again because
    /// the node failed before it acknowledged is acknowledged, not delivered twice.
    delivered: HashSet<String>,
    /// Fail once the next delivery is made ([`GatewayMsg::FailAfterNextDelivery`]).
    #[cfg(any(test, feature = "faults"))]
    fail_after_delivery: bool,
}

impl Actor for GatewayActor {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = GatewayArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<GatewayMsg>,
        args: GatewayArgs,
    ) -> Result<GatewayState, ActorProcessingErr> {
        let role = args.ctx.scenario.agent(&args.agent_id).map(|a| a.role.clone()).unwrap_or_default();
        let budget = args.ctx.scenario.budgets.of(&role);
        let reach = Reach::new(args.ctx.scenario.reach_of(&args.agent_id));
        let inbox = Inbox::new(args.ctx.inbox_cap);
        let mut state = GatewayState {
            reach,
            ctx: args.ctx,
            agent_id: args.agent_id,
            budget,
            agent: None,
            memory: AgentKnowledge { inbox, seen: HashMap::new() },
            turn: 0,
            meter: DerefMeter::default(),
            grants: GrantBook::default(),
            refusals_by_sender: HashMap::new(),
            spilled: HashSet::new(),
            names: HashSet::new(),
            n_restarts_total: 0,
            waiting: Vec::new(),
            children: HashMap::new(),
            members: Children::new(Strategy::OneForOne),
            delivered: HashSet::new(),
            #[cfg(any(test, feature = "faults"))]
            fail_after_delivery: false,
        };
        if let Some(kept) = &args.restore {
            state.restore(Restored::from_kept(kept, &state.agent_id)).await;
        }
        state.agent = Some(spawn_agent(&myself, &state).await?);
        state.members.started(Member::Agent, Restart::Transient);
        // The nodes of its children on the head: spawned here, so this node supervises them (a worker node's
        // host spawns the agents placed on it).
        if state.ctx.books.is_some() {
            for child in node_children(&state.ctx.scenario, &state.agent_id) {
                let (node, _) = spawn_node(&state.ctx, &child, myself.get_cell(), args.restore.clone()).await?;
                state.members.started(Member::Node(child.clone()), Restart::Transient);
                state.children.insert(node.get_id(), (child, node.get_cell()));
            }
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<GatewayMsg>,
        msg: GatewayMsg,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Deliver(envelope, reply) => {
                let verdict = state.deliver(*envelope).await;
                // On a worker node: an acknowledged delivery is in the head's ledger before the acknowledgement.
                state.ctx.settle().await;
                #[cfg(any(test, feature = "faults"))]
                if state.fail_after_delivery && verdict.is_ok() {
                    state.fail_after_delivery = false;
                    // On a worker node, the node is its process: it dies as a crash would, unacknowledged.
                    if state.ctx.books.is_none() {
                        tracing::error!(target: "less.cluster", "{}'s node fails on purpose after a delivery: the process aborts", state.agent_id);
                        std::process::abort();
                    }
                    panic!("{}'s node failed on purpose after a delivery", state.agent_id);
                }
                let _ = reply.send(verdict);
            }
            GatewayMsg::Forward(forwarded) => {
                let (envelope, doc, n_tokens) = *forwarded;
                state.forward(&envelope, &doc, n_tokens);
            }
            GatewayMsg::ActAt(index, attempt, reply) => state.act(Box::new(ActRequest { index, attempt }), reply),
            GatewayMsg::Act(request, reply) => state.act(Box::new(request), reply),
            GatewayMsg::Deref(action, reply) => {
                let outcome = state.deref(action).await;
                let _ = reply.send(outcome);
            }
            GatewayMsg::Search(action, reply) => {
                let _ = reply.send(state.search(action).await);
            }
            GatewayMsg::List(action, reply) => {
                let _ = reply.send(state.list(action).await);
            }
            GatewayMsg::Describe(action, reply) => {
                let _ = reply.send(state.describe(action).await);
            }
            GatewayMsg::Recall(query, reply) => {
                let (text, options) = *query;
                let _ = reply.send(state.recall(text, options).await);
            }
            GatewayMsg::EndTurn => state.turn += 1,
            GatewayMsg::Restore(restored, reply) => {
                // The agent is out while its knowledge comes back, so `forward` fills the gateway's memory only.
                if let Some(agent) = state.agent.take() {
                    agent.stop(Some("restarting from the ledger".to_owned()));
                }
                let n = state.restore(*restored).await;
                state.agent = Some(spawn_agent(&myself, state).await?);
                let _ = reply.send(n);
            }
            GatewayMsg::IssueGrant(spec, answers, reply) => {
                let _ = reply.send(state.issue_grant(&spec, answers.as_deref()));
            }
            GatewayMsg::AskGrant(ask, reply) => match &state.agent {
                // The reply port travels with the request, so this gateway stays free to issue the grant.
                Some(agent) => {
                    if let Err(err) = agent.send_message(AgentMsg::Decide(ask, reply)) {
                        tracing::warn!(agent = %state.agent_id, "deref request not delivered: {err}");
                    }
                }
                None => {
                    let _ = reply.send(Outcome::Denied { reason: format!("{} is down", state.agent_id) });
                }
            },
            #[cfg(any(test, feature = "faults"))]
            GatewayMsg::Fail => panic!("{}'s node failed on purpose", state.agent_id),
            #[cfg(any(test, feature = "faults"))]
            GatewayMsg::FailAfterNextDelivery => state.fail_after_delivery = true,
            GatewayMsg::SpendCodeGrant(request, reply) => {
                let now = state.ctx.now();
                let verdict = spend_on_code(
                    &mut state.grants,
                    &request.grant_id,
                    &state.agent_id,
                    &request.sources,
                    request.n_code,
                    now,
                );
                let _ = reply.send(verdict);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<GatewayMsg>,
        event: SupervisionEvent,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        let SupervisionEvent::ActorFailed(cell, err) = event else { return Ok(()) };
        if let Some((child, _)) = state.children.remove(&cell.get_id()) {
            state.child_failed(&myself, child, err.to_string()).await;
            return Ok(());
        }
        if state.agent.as_ref().is_none_or(|agent| agent.get_id() != cell.get_id()) {
            return Ok(());
        }
        state.agent = None;
        if state.members.on_exit(&Member::Agent, Exit::Failed) == Response::Escalate {
            state.ctx.record(Event::AgentDown { agent: state.agent_id.clone(), reason: err.to_string() });
            let reason = format!(
                "{} failed {} times within {:?} and is left down: {err}",
                state.agent_id,
                MAX_RESTARTS + 1,
                RESTART_WINDOW
            );
            state.send_escalation(&state.agent_id.clone(), &reason, None).await;
            for (_, reply) in state.waiting.drain(..) {
                let _ = reply.send(ActOutcome::down(&state.agent_id));
            }
            return Ok(());
        }
        state.n_restarts_total += 1;
        state.ctx.record(Event::Restart { agent: state.agent_id.clone(), reason: err.to_string() });
        state.agent = Some(spawn_agent(&myself, state).await?);
        for (request, reply) in std::mem::take(&mut state.waiting) {
            state.act(request, reply);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<GatewayMsg>,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        // The children's nodes stop last started first, each with its subtree, then the agent.
        let cells: Vec<ractor::ActorCell> = state
            .members
            .stop_order()
            .into_iter()
            .filter_map(|member| match member {
                Member::Agent => state.agent.as_ref().map(|agent| agent.get_cell()),
                Member::Node(child) => state.children.values().find(|(c, _)| *c == child).map(|(_, cell)| cell.clone()),
            })
            .collect();
        crate::supervision::stop_in_order(&myself.get_cell(), cells).await;
        Ok(())
    }
}

/// Spawns the agent, linked to (supervised by) this gateway, from what the gateway remembers for it.
async fn spawn_agent(
    myself: &ActorRef<GatewayMsg>,
    state: &GatewayState,
) -> Result<ActorRef<AgentMsg>, ActorProcessingErr> {
    let args = AgentArgs {
        ctx: state.ctx.clone(),
        agent_id: state.agent_id.clone(),
        gateway: myself.clone(),
        memory: state.memory.clone(),
    };
    // Unnamed: a named actor could be looked up in the registry, and only this gateway may hold the agent.
    let (agent, _) = Actor::spawn_linked(None, AgentActor, args, myself.get_cell()).await?;
    Ok(agent)
}

impl GatewayState {
    /// Hands a turn to the agent (the reply port travels with the request, so this gateway stays free to serve the
    /// agent's derefs). A turn that finds the agent failed waits for the agent this gateway starts in its place;
    /// an agent left down answers it as skipped.
    fn act(&mut self, request: Box<ActRequest>, reply: RpcReplyPort<ActOutcome>) {
        let Some(agent) = &self.agent else {
            let _ = reply.send(ActOutcome::down(&self.agent_id));
            return;
        };
        match agent.send_message(AgentMsg::Act(request, reply)) {
            Ok(()) => {}
            Err(ractor::MessagingErr::SendErr(AgentMsg::Act(request, reply))) => self.waiting.push((request, reply)),
            Err(err) => tracing::warn!(agent = %self.agent_id, "act not delivered: {err}"),
        }
    }

    /// A child's node failed: it is started again from the ledger, its subtree with it, within [`MAX_RESTARTS`]
    /// per [`RESTART_WINDOW`]; past that the subtree is out of the run and this node's agent is told by an
    /// escalation.
    async fn child_failed(&mut self, myself: &ActorRef<GatewayMsg>, child: String, why: String) {
        let past_limit = self.members.on_exit(&Member::Node(child.clone()), Exit::Failed) == Response::Escalate;
        let restarted = match past_limit {
            true => Err(format!("its node failed {} times within {RESTART_WINDOW:?}", MAX_RESTARTS + 1)),
            false => self.restart_child(myself, &child, &why).await,
        };
        let Err(cause) = restarted else { return };
        let agents = local_subtree(&self.ctx.scenario, &child);
        self.ctx.directory.lose(&agents);
        let reason = format!("{child} is out of the run with {}: {cause}: {why}", agents.join(", "));
        self.ctx.record(Event::SubtreeLost { agent: child.clone(), agents, reason: why });
        self.send_escalation(&child, &reason, None).await;
    }

    /// Starts `child`'s node again, linked to this one, from what the ledger says now.
    async fn restart_child(&mut self, myself: &ActorRef<GatewayMsg>, child: &str, why: &str) -> Result<(), String> {
        let kept = self.ctx.kept().await.map_err(|e| format!("ledger: {e}"))?;
        self.ctx.record(Event::Restart { agent: child.to_owned(), reason: format!("its node failed: {why}") });
        let (node, _) = spawn_node(&self.ctx, child, myself.get_cell(), Some(Arc::new(kept)))
            .await
            .map_err(|e| format!("its node did not start again: {e}"))?;
        self.children.insert(node.get_id(), (child.to_owned(), node.get_cell()));
        Ok(())
    }

    /// Takes again what the ledger says the agent had (see [`GatewayMsg::Restore`]); how many documents came back.
    async fn restore(&mut self, restored: Restored) -> usize {
        let mut n = 0;
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        for (from, msg_id, n_tokens, doc, wire) in restored.delivered {
            // What comes back from the ledger passes this gateway's checks again: the schema when the ledger was
            // read, the budget here, at its recorded size, which must be the document's own (its JSON re-serialized
            // counts within a tenth of what its wire text did), so a ledger edited between the kill and the resume
            // delivers nothing the run would have refused.
            if self.ctx.mode == WireMode::Less && !matches!(&*doc, Document::Grant(_)) {
                let own = counter.count(&doc.to_value().to_string());
                let checked = if own > n_tokens + n_tokens / 10 + 8 {
                    Err(format!("its recorded size, {n_tokens} tokens, is not its own ({own})"))
                } else {
                    check_inbound(doc.engrams().len(), n_tokens, &self.budget).map_err(|v| v.message)
                };
                if let Err(why) = checked {
                    tracing::warn!(agent = %self.agent_id, "{msg_id} from the ledger not restored: {why}");
                    continue;
                }
            }
            self.delivered.insert(msg_id.clone());
            if let Document::Grant(grant) = &*doc {
                let grant = Grant::clone(grant);
                let is_ancestor = self.ctx.scenario.is_ancestor(&grant.terms.issuer, &self.agent_id);
                // A grant that has run out since is refused again; the rest still comes back.
                if let Err(v) = self.grants.accept(grant, &self.agent_id, &self.ctx.secret, is_ancestor) {
                    tracing::warn!(target: "less.cluster", agent = %self.agent_id, "a grant not restored: {}", v.message);
                }
            }
            let envelope = Envelope {
                from,
                to: self.agent_id.clone(),
                // Its id names it again in a `sam:msg:` stub, should the inbox spill it.
                msg_id,
                kind: EnvelopeKind::Message,
                doc: Draft::Raw(Value::Null),
                // A baseline's message comes back as it was sent (`wire.jsonl`).
                wire,
                inline_code: None,
                code_sources: Vec::new(),
                prose: None,
                restated: Vec::new(),
            };
            self.forward(&envelope, &doc, n_tokens);
            n += 1;
        }
        // The uses of its grants it spent before are spent still (a grant does not start over on another node).
        for (grant_id, spend) in restored.spent {
            if !self.grants.spent_before(&grant_id, spend) {
                tracing::warn!(target: "less.cluster", agent = %self.agent_id, "spent uses of {grant_id}, which it no longer holds");
            }
        }
        // The turn's meter reads what the budget paid for in it before (the deref tokens counted on the first).
        for (texts, n_tokens) in restored.metered {
            let types = texts.iter().filter_map(|t| Pointer::parse(t).ok()).map(|p| p.ty());
            let items: Vec<(PointerType, u32)> =
                types.enumerate().map(|(i, ty)| (ty, if i == 0 { n_tokens } else { 0 })).collect();
            self.meter = DerefMeter { turn: self.turn, ..self.meter.after(&items) };
        }
        for texts in restored.read {
            let Ok(pointers) = texts.iter().map(|t| Pointer::parse(t)).collect::<Result<Vec<_>, _>>() else { continue };
            if let Ok(Ok(resolved)) = self.ctx.resolver.ask(|reply| ResolverMsg::Resolve(pointers.clone(), reply)).await
            {
                for r in &resolved {
                    if let Ok(plain) = Pointer::new(r.pointer.ty(), r.pointer.reference(), r.pointer.span()) {
                        self.memory.seen.insert(plain.to_string(), r.digest);
                    }
                }
            }
        }
        n
    }

    async fn deliver(&mut self, envelope: Envelope) -> Result<u32, Violation> {
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        // The wire is counted once; the cache makes any later count of the same text free.
        let n_tokens = counter.count(&envelope.wire);
        if self.delivered.contains(&envelope.msg_id) {
            // Sent again after this node's predecessor delivered it and failed before acknowledging.
            tracing::info!(agent = %self.agent_id, "{} was delivered already; acknowledged again", envelope.msg_id);
            return Ok(n_tokens);
        }
        let checked = Document::check(envelope.kind, &envelope.doc);
        let verdict = match (&checked, self.ctx.mode) {
            (Err(violation), _) => Err(violation.clone()),
            (Ok((doc, value)), WireMode::Less) => self.check_less(&envelope, doc, value, n_tokens, counter).await,
            (Ok(_), WireMode::Verbatim | WireMode::VerbatimWhole) => Ok(()),
        };
        let (doc, value) = match (verdict, checked) {
            (Ok(()), Ok(checked)) => checked,
            (Err(violation), _) | (Ok(()), Err(violation)) => {
                self.refuse(&envelope, n_tokens, &violation).await;
                return Err(violation);
            }
        };
        if self.agent.is_none() {
            let violation = Violation::new(
                ErrorCode::AgentDown,
                "",
                format!("{} is down after repeated failures; the message was not delivered", self.agent_id),
            );
            self.ctx.record(Event::Dropped {
                from: envelope.from.clone(),
                to: self.agent_id.clone(),
                msg_id: envelope.msg_id.clone(),
            });
            return Err(violation);
        }
        self.refusals_by_sender.remove(&envelope.from);
        for engram in doc.engrams() {
            tracing::info!(target: "less.engram.put", id = %engram.id, kind = ?engram.kind, from = %envelope.from);
        }
        let (doc, value) = (Arc::new(doc), Arc::new(value));
        self.record_delivery(&envelope, &doc, &value, n_tokens).await;
        self.forward(&envelope, &doc, n_tokens);
        self.delivered.insert(envelope.msg_id.clone());
        Ok(n_tokens)
    }

    /// The LESS rules, most specific first; an inline-code grant is spent only on an otherwise acceptable message.
    /// Inline code is what the sender declared pasting plus what [`crate::inline_code`] finds in any text field of
    /// the document (`value`).
    async fn check_less(
        &mut self,
        envelope: &Envelope,
        doc: &Document,
        value: &Value,
        n_tokens: u32,
        counter: &TokenCounter,
    ) -> Result<(), Violation> {
        check_inbound(doc.engrams().len(), n_tokens, &self.budget)?;
        // Texts that cannot hold code are skipped without a parse; the others are parsed on the blocking pool.
        let texts: Vec<String> = crate::inline_code::candidates(value).into_iter().map(str::to_owned).collect();
        let found = if texts.is_empty() {
            String::new()
        } else {
            crate::blocking::run(move || crate::inline_code::code_in_texts(texts.iter().map(String::as_str)))
                .await
                .map_err(|err| Violation::new(ErrorCode::RunFailed, "", format!("finding inline code: {err}")))?
        };
        if envelope.inline_code.is_some() || !found.is_empty() {
            let declared = envelope.inline_code.as_deref().map_or(0, |code| counter.count(code));
            let n_code = declared + if found.is_empty() { 0 } else { counter.count(&found) };
            let mut allowance = 0;
            if n_code > self.budget.max_inline_code
                && let Some(grant_id) = doc.grant_id()
            {
                allowance = self.spend_code_grant(envelope, grant_id, n_code).await?;
            }
            check_code(n_code, &self.budget, allowance)?;
        }
        if let Document::Grant(grant) = doc {
            self.accept_grant(envelope, grant)?;
        }
        Ok(())
    }

    /// Asks the sender's gateway, which holds the sender's grants, to spend one use of `grant_id`.
    async fn spend_code_grant(&self, envelope: &Envelope, grant_id: &str, n_code: u32) -> Result<u32, Violation> {
        let denied = |why: String| Violation::new(ErrorCode::GrantInvalid, "", format!("grant {grant_id}: {why}"));
        let sender =
            self.ctx.directory.get(&envelope.from).ok_or_else(|| denied(format!("no agent {}", envelope.from)))?;
        let sources = envelope.code_sources.iter().filter_map(|t| Pointer::parse(t).ok()).collect();
        let request = CodeGrantRequest { grant_id: grant_id.to_owned(), sources, n_code };
        match ractor::call!(sender, GatewayMsg::SpendCodeGrant, request) {
            Ok(verdict) => verdict,
            Err(err) => Err(denied(err.to_string())),
        }
    }

    /// Records a delivery; `value` is `doc`'s JSON, made once per delivery.
    async fn record_delivery(&self, envelope: &Envelope, doc: &Arc<Document>, value: &Arc<Value>, n_tokens: u32) {
        self.ctx.record(Event::Delivered {
            from: envelope.from.clone(),
            to: envelope.to.clone(),
            msg_id: envelope.msg_id.clone(),
            kind: envelope.kind,
            tokens: n_tokens,
            max_tokens: self.budget.max_inline_tokens,
            doc: doc.clone(),
            prose: envelope.prose.clone(),
            restated: envelope.restated.clone(),
        });
        // A baseline's document is what it restates; the run directory keeps the restatement itself.
        if self.ctx.mode.is_baseline() && !envelope.wire.is_empty() {
            let sent = SentText {
                msg_id: envelope.msg_id.clone(),
                from: envelope.from.clone(),
                to: envelope.to.clone(),
                kind: envelope.kind,
                tokens: n_tokens,
                text: envelope.wire.clone(),
            };
            self.ctx.record_wire(sent);
        }
        let content = if envelope.wire.is_empty() { value.to_string() } else { envelope.wire.clone() };
        self.ctx.remember(envelope.msg_id.clone(), value.clone());
        self.ctx.archive(&envelope.from, content).await;
    }

    /// `name`, shared with every stub that already names it.
    fn name(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.names.get(name) {
            return known.clone();
        }
        let name: Arc<str> = name.into();
        self.names.insert(name.clone());
        name
    }

    /// Hands a delivered document to the agent and remembers it for a restart. In a baseline run the agent gets what
    /// was on the wire too ([`Received::Verbatim`]): an LLM agent reads what it was sent.
    fn forward(&mut self, envelope: &Envelope, doc: &Document, n_tokens: u32) {
        // Typed messages may be spilled past the inbox's cap (`sam:msg:<id>` reads them back); briefs and grants never.
        let (delivered, spill) = match doc {
            Document::Message(message) => {
                let spill = Arc::new(Spill {
                    msg_id: envelope.msg_id.as_str().into(),
                    from: self.name(&envelope.from),
                    kind: self.name(message.payload.type_name()),
                    tokens: n_tokens,
                });
                (Delivered::Message(Arc::new(message.clone())), Some(spill))
            }
            Document::Brief(brief) => (Delivered::Brief(Arc::new(brief.clone())), None),
            // The agent gets a grant's terms; the MAC stays with this gateway, which verified it and holds the grant.
            Document::Grant(grant) => (Delivered::Grant(Arc::new(grant.terms.clone())), None),
        };
        let doc = match delivered {
            Delivered::Brief(_) | Delivered::Message(_) if self.ctx.mode.is_baseline() && !envelope.wire.is_empty() => {
                Received::Verbatim(Arc::new(Verbatim { wire: envelope.wire.clone(), doc: delivered }))
            }
            delivered => Received::Delivered(delivered),
        };
        let order = InboxItem::order_of(&self.ctx.scenario, &envelope.from, &envelope.msg_id);
        let item = InboxItem { doc, spill, order };
        if let Some(spilled) = self.memory.inbox.push(item.clone()) {
            self.ctx.record(Event::Spilled { agent: self.agent_id.clone(), msg_id: spilled.msg_id.to_string() });
            self.spilled.insert(spilled.msg_id.clone());
        }
        if let Some(agent) = &self.agent {
            agent.send_message(AgentMsg::Inbox(item)).ok();
        }
    }

    async fn refuse(&mut self, envelope: &Envelope, n_tokens: u32, violation: &Violation) {
        tracing::info!(target: "less.budget.reject", from = %envelope.from, to = %envelope.to, code = %violation.code);
        // The refused document stays reachable (sam:msg:<id>) for whoever handles the escalation.
        if let Ok(doc) = envelope.doc.to_value() {
            self.ctx.remember(envelope.msg_id.clone(), Arc::new(doc));
        }
        let counts = envelope.kind == EnvelopeKind::Message;
        let n_refusals = if counts {
            let n = self.refusals_by_sender.entry(envelope.from.clone()).or_insert(0);
            *n += 1;
            *n
        } else {
            1
        };
        self.ctx.record(Event::Rejected {
            from: envelope.from.clone(),
            to: envelope.to.clone(),
            msg_id: envelope.msg_id.clone(),
            code: violation.code,
            message: violation.message.clone(),
            instruction: violation.code.instruction().to_owned(),
            tokens: n_tokens,
            attempt: n_refusals,
        });
        if counts && n_refusals >= 2 {
            self.refusals_by_sender.remove(&envelope.from);
            let reason = format!(
                "{} was refused twice by {}'s gateway ({}): {}",
                envelope.from, self.agent_id, violation.code, violation.message
            );
            self.send_escalation(&envelope.from, &reason, Some(&envelope.msg_id)).await;
        }
    }

    fn accept_grant(&mut self, envelope: &Envelope, grant: &Valid<Grant>) -> Result<(), Violation> {
        let grant = Grant::clone(grant);
        let is_ancestor = self.ctx.scenario.is_ancestor(&grant.terms.issuer, &self.agent_id);
        self.grants.accept(grant, &self.agent_id, &self.ctx.secret, is_ancestor)?;
        tracing::info!(target: "less.deref.grant", grantee = %self.agent_id, from = %envelope.from);
        Ok(())
    }

    /// Writes an escalation about `about` to its parent. It is recorded here, before this gateway answers, so the
    /// ledger order does not depend on delivery timing; the parent's gateway only forwards it.
    async fn send_escalation(&mut self, about: &str, reason: &str, refused_msg: Option<&str>) {
        let Some(parent) = self.ctx.scenario.agent(about).and_then(|a| a.parent.clone()) else { return };
        let from = format!("{}-gw", self.agent_id);
        let msg_id = self.ctx.next_msg_id(&from).await;
        let reason: String = reason.chars().take(480).collect();
        let refs: Vec<String> = refused_msg.map(|id| format!("sam:msg:{id}")).into_iter().collect();
        let message = TypedMessage {
            from: from.clone(),
            msg_id: msg_id.clone(),
            to: Some(parent.clone()),
            engrams: Vec::new(),
            deref_requests: Vec::new(),
            body: None,
            grant_id: None,
            payload: Payload::Escalation { reason: reason.clone(), severity: Severity::Warning, refs },
        };
        self.ctx.record(Event::Escalated { about: about.to_owned(), to: parent.clone(), reason });
        let draft = Draft::Message(message);
        let (doc, value) = match Document::check(EnvelopeKind::Escalation, &draft) {
            Ok(checked) => checked,
            Err(violation) => {
                // Only a bug in this function gets here: an agent id that makes no valid sender id, say.
                tracing::error!(target: "less.run", %about, %violation, "an escalation broke the contract; not sent");
                return;
            }
        };
        let wire = value.to_string();
        let n_tokens = TokenCounter::shared(self.ctx.scenario.tokenizer).count(&wire);
        let envelope = Envelope {
            from,
            to: parent.clone(),
            msg_id,
            kind: EnvelopeKind::Escalation,
            doc: draft,
            wire,
            inline_code: None,
            code_sources: Vec::new(),
            prose: None,
            restated: Vec::new(),
        };
        let (doc, value) = (Arc::new(doc), Arc::new(value));
        self.record_delivery(&envelope, &doc, &value, n_tokens).await;
        if parent == self.agent_id {
            self.forward(&envelope, &doc, n_tokens);
        } else if let Some(gateway) = self.ctx.directory.get(&parent) {
            gateway.send_message(GatewayMsg::Forward(Box::new((envelope, doc, n_tokens)))).ok();
        }
    }

    /// The core's two deref steps around the resolver: checked on counts, reach and grant before any file is read,
    /// committed on the tokens read. The baselines meter nothing.
    async fn deref(&mut self, action: DerefAction) -> DerefOutcome {
        if self.turn != self.meter.turn {
            self.meter = DerefMeter { turn: self.turn, ..DerefMeter::default() };
        }
        let pointers: Result<Vec<Pointer>, Violation> = action.pointers.iter().map(|t| Pointer::parse(t)).collect();
        let pointers = match pointers {
            Ok(p) => p,
            Err(v) => return self.deref_refused(&action, v),
        };
        tracing::info!(target: "less.deref.request", agent = %self.agent_id, n = pointers.len());
        let less = self.ctx.mode == WireMode::Less;
        let now = self.ctx.now();
        let reader = Reader { id: &self.agent_id, budget: &self.budget, reach: &self.reach };
        // A message spilled from the agent's own inbox is its to read back, whatever its reach.
        let own = |p: &Pointer| {
            p.ty() == PointerType::Sam && p.location().strip_prefix("msg:").is_some_and(|id| self.spilled.contains(id))
        };
        let plan = match less
            .then(|| check_deref(&reader, &self.meter, &pointers, own, action.grant.as_deref(), &self.grants, now))
        {
            Some(Err(violation)) => return self.deref_refused(&action, violation),
            Some(Ok(plan)) => Some(plan),
            None => None,
        };
        let resolved = match self.ctx.resolver.ask(|reply| ResolverMsg::Resolve(pointers.clone(), reply)).await {
            Ok(Ok(resolved)) => resolved,
            Ok(Err(violation)) => return self.deref_refused(&action, violation),
            Err(err) => {
                return self.deref_refused(&action, Violation::new(ErrorCode::PointerUnresolved, "", err.to_string()));
            }
        };
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let items: Vec<(Pointer, u32)> =
            resolved.iter().map(|r| (r.pointer.clone(), counter.count(&r.content))).collect();
        let n_tokens: u32 = items.iter().map(|(_, n)| n).sum();
        let mut via_grant = None;
        if let Some(plan) = plan {
            match commit_deref(&plan, &reader, &mut self.meter, &items, &mut self.grants, now) {
                Ok(Charge::Budget) => {}
                Ok(Charge::Grant(grant_id)) => via_grant = Some(grant_id),
                Err(violation) => return self.deref_refused(&action, violation),
            }
        }
        for r in &resolved {
            if let Ok(plain) = Pointer::new(r.pointer.ty(), r.pointer.reference(), r.pointer.span()) {
                self.memory.seen.insert(plain.to_string(), r.digest);
            }
        }
        self.ctx.record(Event::Deref {
            agent: self.agent_id.clone(),
            pointers: action.pointers.clone(),
            tokens: n_tokens,
            granted: true,
            via_grant,
            code: None,
        });
        DerefOutcome { result: Ok(resolved) }
    }

    fn deref_refused(&self, action: &DerefAction, violation: Violation) -> DerefOutcome {
        self.ctx.record(Event::Deref {
            agent: self.agent_id.clone(),
            pointers: action.pointers.clone(),
            tokens: 0,
            granted: false,
            via_grant: action.grant.clone(),
            code: Some(violation.code),
        });
        DerefOutcome { result: Err(violation) }
    }

    fn issue_grant(&self, spec: &GrantSpec, answers: Option<&str>) -> Result<Grant, Violation> {
        let now = self.ctx.now();
        let terms = spec.terms(&self.agent_id, now)?;
        let is_descendant = self.ctx.scenario.is_ancestor(&self.agent_id, &spec.to);
        check_issue(&terms, is_descendant, &self.reach, &self.grants, now)?;
        let grant = Grant::issue(terms, &self.ctx.secret);
        self.ctx.record(Event::GrantIssued {
            issuer: self.agent_id.clone(),
            grantee: spec.to.clone(),
            grant_id: spec.id.clone(),
            answers: answers.map(str::to_owned),
        });
        Ok(grant)
    }
}

mod look;
