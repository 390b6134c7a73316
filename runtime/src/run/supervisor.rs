//! The run supervisor and the driver of a run.
//!
//! `RunSupervisor` is the root of a run's actor tree. In `pre_start` it spawns, linked to itself, the ledger, the
//! resolver, the summarizers and the memory, then the node of each agent at the top of the hierarchy: an agent's
//! node is its gateway, which spawns and supervises its agent and the nodes of the agents below it (`gateway.rs`),
//! so the supervision tree is the scenario's hierarchy. [`run_scenario`] drives the steps in order, one turn at a
//! time, then collects the ledger into a [`RunReport`].
//!
//! Restart policy (`handle_supervisor_evt`, by the failed child's id; `crate::supervision` says the rules): the
//! supervisor is one_for_one over children started in order: the ledger, the resolver, the summarizers, the memory,
//! then the top nodes.
//! - an infrastructure actor is permanent: one that fails (or stops while the run goes on) is started again with its
//!   state recovered, within its intensity ([`MAX_RESTARTS`] per [`RESTART_WINDOW`]), and the restart is a
//!   `service_restart` event: the ledger's writer and the resolver take the same book (`LedgerBook`,
//!   `ResolverBook`), which outlives them, so nothing recorded or remembered is lost; the memory reopens its
//!   directory (SQLite is the truth, the indexes catch up); the summarizers reopen the archive and take the
//!   archive queue. Every other actor reaches them through a [`Slot`], which the supervisor points at the new actor;
//!   a call the failed one left unanswered goes once more to the new one.
//! - a top node is transient: one that fails is started again from the ledger (its agent's inbox and grants, and
//!   its subtree's), as a node restarts its children; one that stopped on its own is done, its subtree answered as
//!   down; past its intensity the run cannot go on without its lead, and ends.
//! - past its intensity, an infrastructure actor's failure, and the failure of any other child (a cluster run's
//!   head bridge, a gateway moved from a lost node), is kept, and the driver ends the run with [`Error::Runtime`]
//!   after the current step.
//!
//! Shutdown: the driver flushes the ledger and the `sam:` index, then stops the supervisor, which stops its
//! children in reverse start order, each to the end of its own `post_stop` (the memory commits its index, the
//! archive closes), and then removes a scratch store.
//!
//! The run's memory lives in `<out_dir>/memory/` when the run writes files (so project-scoped engrams outlive the
//! run, as project scope means; run-scoped ones are never seen by another run), and otherwise in a scratch directory
//! under the system's temporary directory, removed when the run stops.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::rpc::CallResult;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::task::JoinHandle;

use std::sync::atomic::AtomicU64;

use crate::dag::actor::{ArchiveQueue, SummarizerArgs, SummarizerMsg, SummarizerSupervisor};
use crate::dag::{BuildReport, Condenser, DagConfig, Extractive, Summarizer};
use crate::memory::{MemoryActor, MemoryArgs, MemoryPolicy, system_clock};
use crate::resolver::Resolver;
use crate::run::agent::{ActRequest, AgentFactory};
use crate::run::conduct::{Ordering, Plan, step_agent};
use crate::run::gateway::{GatewayMsg, local_subtree, spawn_node};
use crate::run::inbox::DEFAULT_INBOX_CAP;
use crate::run::ledger::{Event, LedgerBook, TokenLedger, TokenLedgerArgs, TokenLedgerMsg, TraceSink};
use crate::run::remote::{PlacedNodes, Placement};
use crate::run::report::RunReport;
use crate::run::resolver_actor::{ResolverActor, ResolverArgs, ResolverBook, ResolverMsg};
use crate::run::resume::{self, Resumption};
use crate::run::services::Services;
use crate::run::slot::{RESTART_WAIT, Slot};
use crate::run::wire::Envelope;
use crate::run::{Books, Directory, RunContext, fresh_secret};
use crate::supervision::{Children, Exit, MAX_RESTARTS, RESTART_WINDOW, Response, Restart, Strategy};
use less_contract::{Error, ErrorCode, Violation};
use less_contract::{Scenario, Step, WireMode};

/// Longest the summarizers may take to finish a run's session.
const SUMMARY_TIMEOUT: Duration = Duration::from_secs(120);

/// How often the driver looks for lost nodes while a turn of a cluster run goes on.
const LOST_POLL: Duration = Duration::from_millis(100);

/// Longest a single turn may take unless the agent's factory says its agent needs longer (an LLM agent: its model's
/// timeout and retries) or [`RunOptions::step_timeout`] says otherwise.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// How to run.
pub struct RunOptions {
    /// Wire mode.
    pub mode: WireMode,
    /// Where `ledger.jsonl`, `audit.log` and the run's memory (`memory/`) go (none: not written; the memory is a
    /// scratch store removed at the end).
    pub out_dir: Option<PathBuf>,
    /// Where the live trace goes (none: nowhere).
    pub trace: Option<Arc<dyn TraceSink>>,
    /// Pinned time (record/replay runs), so that a replay counts exactly the tokens the recorded run counted, and
    /// the grant key to use. `None`: the system clock and a fresh secret.
    pub pinned: Option<Pinned>,
    /// Who writes the run's session summary (and any arcs and epochs it completes). `None`: the deterministic
    /// [`Extractive`].
    pub summarizer: Option<Arc<dyn Summarizer>>,
    /// Longest one step may take, for every agent. `None`: per agent, what its factory says it may need
    /// ([`AgentFactory::turn_timeout`], e.g. an LLM agent's model timeout × attempts), at least
    /// [`DEFAULT_STEP_TIMEOUT`].
    pub step_timeout: Option<Duration>,
    /// How many typed messages an agent's inbox keeps inline; older ones become `sam:msg:<id>` pointers to the
    /// archived message ([`DEFAULT_INBOX_CAP`] unless set; at least 1).
    pub inbox_cap: usize,
    /// How to reach the run's worker nodes, for a scenario that places agents on nodes (`[cluster]`): e.g.
    /// [`crate::cluster::ClusterOptions`].
    pub cluster: Option<Arc<dyn Placement>>,
    /// The workspace index the agents' `search` and `list` actions use. `None`: the scenario workspace's, in its
    /// default directory ([`crate::workspace::WorkspaceIndex::default_dir`]), opened and refreshed on the first search.
    pub index: Option<Arc<crate::workspace::SharedIndex>>,
    /// Go on with the run `out_dir` holds, whose head died, instead of starting one
    /// ([`crate::run::resume`]): `LESS_RUN_NOT_RESUMABLE` when it holds none.
    pub resume: bool,
    /// How many turns may run at once (steps that wait for nothing unfinished; see [`crate::run::conduct`]). 0: what
    /// the agents' factory says its models serve at once ([`AgentFactory::parallel`]), else 1. 1 runs the steps in
    /// the scenario's order.
    pub parallel: usize,
    /// How agents read what arrived while they were idle, and how messages are numbered. [`Ordering::Arrival`]
    /// (recordings made before turns could overlap) runs one turn at a time whatever `parallel` says.
    pub ordering: Ordering,
}

impl RunOptions {
    /// A run in `mode` that writes nothing, prints no trace, reads the system clock, and takes the default summarizer
    /// and step timeouts; set the other fields with struct update syntax.
    pub fn new(mode: WireMode) -> RunOptions {
        RunOptions {
            mode,
            out_dir: None,
            trace: None,
            pinned: None,
            summarizer: None,
            step_timeout: None,
            inbox_cap: DEFAULT_INBOX_CAP,
            cluster: None,
            index: None,
            resume: false,
            parallel: 0,
            ordering: Ordering::Causal,
        }
    }
}

/// What a replayable run keeps fixed. Its `Debug` leaves the grant key out.
#[derive(Clone, Copy)]
pub struct Pinned {
    /// A frozen clock: every document the run stamps (engram `created_at`, grant expiry) takes this time, and grants
    /// are checked against it.
    pub clock: time::OffsetDateTime,
    /// The run's grant MAC key. No counted byte depends on it (agents read a grant's terms; the MAC stays with the
    /// grantee's gateway), so the command line gives recorded and replayed runs a fresh one and never stores it.
    pub secret: [u8; 32],
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinned").field("clock", &self.clock).field("secret", &"<redacted>").finish()
    }
}

/// A failure to inject into a run, for the tests of its supervision: before the step `before_step`, `target` fails
/// `times` times (each time once its restart finished, or its subtree was given up).
#[cfg(any(test, feature = "faults"))]
#[derive(Debug, Clone)]
pub struct Fault {
    /// The index of the step it comes before.
    pub before_step: usize,
    /// What fails.
    pub target: FaultTarget,
    /// How many times in a row.
    pub times: u32,
}

/// What a [`Fault`] makes fail.
#[cfg(any(test, feature = "faults"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultTarget {
    /// The memory actor (it panics).
    Memory,
    /// The resolver actor (it panics).
    Resolver,
    /// The ledger's writer (it panics).
    Ledger,
    /// The summarizers' supervisor (it panics, taking its level summarizers with it).
    Summarizers,
    /// The node (gateway) of an agent (it panics, taking its agent and its subtree's nodes with it).
    Node(String),
    /// The node of an agent once it has delivered its next message, before it acknowledges it: the message is in
    /// flight when the node fails.
    NodeAfterNextDelivery(String),
}

/// The run supervisor: the root of the run's tree (see the module's restart policy).
struct RunSupervisor;

/// Messages to the run supervisor.
enum RunSupervisorMsg {
    /// The run's context, once the tree is up.
    Context(RpcReplyPort<Arc<RunContext>>),
    /// What ended the run, if anything did: a failure past every restart.
    Failure(RpcReplyPort<Option<String>>),
}

// Local only: a run's supervisor never crosses to another node.
impl ractor::Message for RunSupervisorMsg {}

/// Everything the supervisor builds the run from.
struct RunSupervisorArgs {
    scenario: Arc<Scenario>,
    factory: Arc<dyn AgentFactory>,
    run_id: String,
    session_base: String,
    secret: [u8; 32],
    /// A resumed run: what its directory kept.
    resume: Option<Arc<Resumption>>,
    mode: WireMode,
    out_dir: Option<PathBuf>,
    trace: Option<Arc<dyn TraceSink>>,
    pinned: Option<Pinned>,
    summarizer: Arc<dyn Summarizer>,
    inbox_cap: usize,
    index: Option<Arc<crate::workspace::SharedIndex>>,
    ordering: Ordering,
}

/// The infrastructure actors the supervisor restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Service {
    Ledger,
    Resolver,
    Summarizers,
    Memory,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::Ledger => "ledger",
            Service::Resolver => "resolver",
            Service::Summarizers => "summarizers",
            Service::Memory => "memory",
        }
    }
}

/// A child of the supervisor it knows how to start again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Child {
    Service(Service),
    /// The node of an agent at the top of the hierarchy (or below an agent placed on another node).
    Node(String),
}

/// The supervisor's state: the run's context and what it takes to start each child again.
struct RunSupervisorState {
    ctx: Arc<RunContext>,
    ledger_book: Arc<LedgerBook>,
    resolver_book: Arc<ResolverBook>,
    /// The store directory of the memory and the archive, and whether the supervisor removes it once every child
    /// stopped (a scratch directory).
    memory_dir: PathBuf,
    remove_on_stop: bool,
    condenser: Condenser,
    /// The running children by id, with the task of each (awaited before a restart, so the failed actor's files
    /// are closed before its successor opens them).
    running: HashMap<ActorId, (Child, ActorCell, JoinHandle<()>)>,
    /// Their start order, restart types and intensities: one_for_one (`crate::supervision`).
    children: Children<Child>,
    /// What ended the run.
    failed: Option<String>,
}

fn named(run_id: &str, mode: WireMode, what: &str) -> String {
    format!("{run_id}:{}:{what}", mode.as_str())
}

/// The agents whose nodes the supervisor spawns: those on the head whose parent is not (the lead, or an agent
/// below one placed on another node). The others' nodes are spawned by their parents' nodes.
fn top_agents(scenario: &Scenario) -> Vec<String> {
    let on_head = |id: &str| scenario.agent(id).is_some_and(|a| a.node.is_none());
    let agents = scenario.agents.iter().filter(|a| a.node.is_none());
    agents.filter(|a| a.parent.as_deref().is_none_or(|p| !on_head(p))).map(|a| a.id.clone()).collect()
}

impl Actor for RunSupervisor {
    type Msg = RunSupervisorMsg;
    type State = RunSupervisorState;
    type Arguments = RunSupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<RunSupervisorMsg>,
        args: RunSupervisorArgs,
    ) -> Result<RunSupervisorState, ActorProcessingErr> {
        let RunSupervisorArgs {
            scenario,
            factory,
            run_id,
            session_base,
            secret,
            resume,
            mode,
            out_dir,
            trace,
            pinned,
            summarizer,
            inbox_cap,
            index,
            ordering,
        } = args;
        let cell = myself.get_cell();
        let mut children = Started::new();
        let resolver = Resolver::new(&scenario.workspace).map_err(|v| format!("workspace: {v}"))?;
        let ledger_args = TokenLedgerArgs {
            out_dir: out_dir.clone(),
            trace,
            run_id: run_id.clone(),
            wire: mode.is_baseline(),
            identities: scenario.agents.iter().map(|a| (a.id.clone(), scenario.identity(&a.id))).collect(),
        };
        let ledger_book = match &resume {
            Some(resumed) => LedgerBook::resumed(ledger_args, &resumed.kept.events, resumed.lengths),
            None => LedgerBook::new(ledger_args),
        };
        if let Some(resumed) = &resume {
            ledger_book.record(Event::Resumed { from_step: resumed.from_step, discarded: resumed.discarded });
        }
        let (ledger, handle) =
            Actor::spawn_linked(Some(named(&run_id, mode, "ledger")), TokenLedger, ledger_book.clone(), cell.clone())
                .await
                .map_err(|e| format!("ledger: {e}"))?;
        children.service(Service::Ledger, ledger.get_cell(), handle);
        let (memory_dir, remove_on_stop) = match &out_dir {
            Some(dir) => (dir.join(crate::layout::RUN_STORE_DIR), false),
            // A fresh directory of its own, which the memory actor removes when it stops.
            None => {
                let scratch = tempfile::Builder::new()
                    .prefix(&format!("lessrt-memory-{run_id}-{}-", mode.as_str()))
                    .tempdir()
                    .map_err(|e| format!("memory directory: {e}"))?;
                (scratch.keep(), true)
            }
        };
        let resolver_book = ResolverBook::new(ResolverArgs {
            resolver,
            sam_path: Some(memory_dir.join(crate::layout::SAM_DB)),
            keep: resume.is_some(),
        });
        // A resumed run's `sam:` index takes every kept delivery again (the dead head may not have written them).
        for event in resume.iter().flat_map(|r| r.kept.events.iter()) {
            if let Event::Delivered { msg_id, doc, .. } = event {
                resolver_book.remember(msg_id.clone(), Arc::new(doc.to_value()));
            }
        }
        let (resolver, handle) = Actor::spawn_linked(
            Some(named(&run_id, mode, "resolver")),
            ResolverActor,
            resolver_book.clone(),
            cell.clone(),
        )
        .await
        .map_err(|e| format!("resolver: {e}"))?;
        children.service(Service::Resolver, resolver.get_cell(), handle);
        let condenser = Condenser::new(DagConfig::default(), summarizer);
        let summarizer_args = SummarizerArgs {
            dir: memory_dir.clone(),
            condenser: condenser.clone(),
            clock: system_clock(),
            index: true,
        };
        let (summarizers, handle) = Actor::spawn_linked(
            Some(named(&run_id, mode, "summarizers")),
            SummarizerSupervisor,
            summarizer_args,
            cell.clone(),
        )
        .await
        .map_err(|e| format!("summarizers: {e}"))?;
        children.service(Service::Summarizers, summarizers.get_cell(), handle);
        if !scenario.symbols.is_empty() || !scenario.capsules.is_empty() {
            let (dir, scenario) = (memory_dir.clone(), scenario.clone());
            crate::blocking::run(move || {
                crate::shared::Shared::publish(&dir, &scenario.project, &scenario.symbols, &scenario.capsules)
            })
            .await?
            .map_err(|v| format!("symbols and capsules: {v}"))?;
        }
        // The scratch directory holds the archive too: the supervisor removes it once both stopped.
        let memory_args = MemoryArgs {
            policy: MemoryPolicy::from_settings(&scenario.memory),
            ..MemoryArgs::new(memory_dir.clone(), system_clock(), false)
        };
        let (memory, handle) =
            Actor::spawn_linked(Some(named(&run_id, mode, "memory")), MemoryActor, memory_args, cell.clone())
                .await
                .map_err(|e| format!("memory: {e}"))?;
        children.service(Service::Memory, memory.get_cell(), handle);
        let archive_queue =
            Arc::new(ArchiveQueue::new(scenario.project.clone(), format!("{session_base}:{}", mode.as_str())));
        let ctx = Arc::new(RunContext {
            run_id,
            session_base,
            mode,
            scenario: scenario.clone(),
            secret,
            directory: Directory::default(),
            resolver: Slot::new(resolver),
            ledger: Slot::new(ledger),
            books: Some(Books { ledger: ledger_book.clone(), resolver: resolver_book.clone() }),
            services: Services::Local {
                memory: Slot::new(memory),
                summarizers: Slot::new(summarizers),
                archive_queue,
                n_msgs: resume.as_ref().map_or_else(Default::default, |r| r.n_msgs.clone()),
                coord: Arc::new(crate::coord::Store::new(memory_dir.join(crate::coord::RUN_FILE))),
            },
            factory,
            clock: pinned.map(|p| p.clock),
            inbox_cap,
            workspace: index.unwrap_or_else(|| crate::workspace::SharedIndex::new(&scenario.workspace, None)),
            ordering,
        });
        // Placed agents run on their nodes, with their gateways; the others here, each node below its parent's.
        // A resumed run's agents take back what the kept ledger says they had.
        let restore = resume.as_ref().map(|r| r.kept.clone());
        if resume.is_some() {
            let _ = ctx.resolver.send(ResolverMsg::Take);
        }
        for agent in top_agents(&scenario) {
            let (node, handle) = spawn_node(&ctx, &agent, cell.clone(), restore.clone())
                .await
                .map_err(|e| format!("gateway {agent}: {e}"))?;
            children.started(Child::Node(agent), Restart::Transient, node.get_cell(), handle);
        }
        Ok(RunSupervisorState {
            ctx,
            ledger_book,
            resolver_book,
            memory_dir,
            remove_on_stop,
            condenser,
            running: children.running,
            children: children.order,
            failed: None,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<RunSupervisorMsg>,
        msg: RunSupervisorMsg,
        state: &mut RunSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RunSupervisorMsg::Context(reply) => {
                let _ = reply.send(state.ctx.clone());
            }
            RunSupervisorMsg::Failure(reply) => {
                let _ = reply.send(state.failed.clone());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RunSupervisorMsg>,
        event: SupervisionEvent,
        state: &mut RunSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // While the supervisor runs, a child that stops is as gone as one that failed (when the run stops, the
        // supervisor stops first and hears nothing more).
        let (cell, what, exit) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, format!("failed: {err}"), Exit::Failed),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let what = format!("stopped{}", reason.map(|r| format!(": {r}")).unwrap_or_default());
                (cell, what, Exit::Normal)
            }
            _ => return Ok(()),
        };
        let Some((child, _, handle)) = state.running.remove(&cell.get_id()) else {
            let name = cell.get_name().unwrap_or_else(|| "a run actor".to_owned());
            state.fail(format!("{name} {what}"));
            return Ok(());
        };
        // The failed actor's task is over once it dropped its state: its files and locks are free.
        let _ = handle.await;
        let name = match &child {
            Child::Service(service) => service.name().to_owned(),
            Child::Node(agent) => format!("{agent}'s node"),
        };
        match state.children.on_exit(&child, exit) {
            Response::Restart(_) => {}
            Response::Forget => {
                // A transient node that stopped on its own: its subtree's turns are answered as skipped from now on.
                if let Child::Node(agent) = &child {
                    let agents = local_subtree(&state.ctx.scenario, agent);
                    state.ctx.directory.lose(&agents);
                    state.ctx.record(Event::SubtreeLost { agent: agent.clone(), agents, reason: what.clone() });
                }
                return Ok(());
            }
            Response::Escalate => {
                match &child {
                    Child::Node(agent) => {
                        let agents = local_subtree(&state.ctx.scenario, agent);
                        state.ctx.directory.lose(&agents);
                        state.ctx.record(Event::SubtreeLost { agent: agent.clone(), agents, reason: what.clone() });
                    }
                    Child::Service(service) => state.abandon(*service),
                }
                let n = MAX_RESTARTS + 1;
                state.fail(format!("{name} {what}, the {n}th failure within {RESTART_WINDOW:?}"));
                return Ok(());
            }
        }
        tracing::warn!("{name} {what}; restarting it");
        let cell = myself.get_cell();
        let restarted = match &child {
            Child::Service(service) => state.restart_service(*service, cell, &what).await,
            Child::Node(agent) => state.restart_node(agent, cell, &what).await,
        };
        match restarted {
            Ok((cell, handle)) => {
                state.running.insert(cell.get_id(), (child, cell, handle));
            }
            Err(err) => state.fail(format!("{name} {what}, and could not be started again: {err}")),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<RunSupervisorMsg>,
        state: &mut RunSupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // Children stop last started first, each after what depends on it (the agents' nodes before the memory and
        // the archive they feed, the ledger that records everything last), and each runs its own `post_stop`: the
        // memory commits its indexes, the archive closes, the resolver writes what is pending.
        let cells: Vec<ActorCell> = state
            .children
            .stop_order()
            .into_iter()
            .filter_map(|child| state.running.values().find(|(c, _, _)| *c == child).map(|(_, cell, _)| cell.clone()))
            .collect();
        crate::supervision::stop_in_order(&myself.get_cell(), cells).await;
        if state.remove_on_stop
            && let Err(err) = std::fs::remove_dir_all(&state.memory_dir)
        {
            tracing::warn!("scratch memory {} left behind: {err}", state.memory_dir.display());
        }
        Ok(())
    }
}

/// The children `pre_start` started, in order.
struct Started {
    running: HashMap<ActorId, (Child, ActorCell, JoinHandle<()>)>,
    order: Children<Child>,
}

impl Started {
    fn new() -> Started {
        Started { running: HashMap::new(), order: Children::new(Strategy::OneForOne) }
    }

    fn started(&mut self, child: Child, restart: Restart, cell: ActorCell, handle: JoinHandle<()>) {
        self.order.started(child.clone(), restart);
        self.running.insert(cell.get_id(), (child, cell, handle));
    }

    /// Infrastructure is permanent: restarted however it ended.
    fn service(&mut self, service: Service, cell: ActorCell, handle: JoinHandle<()>) {
        self.started(Child::Service(service), Restart::Permanent, cell, handle);
    }
}

impl RunSupervisorState {
    /// Keeps the first failure that ends the run.
    fn fail(&mut self, what: String) {
        tracing::error!("{what}");
        self.failed.get_or_insert(what);
    }

    /// Gives `service` up: calls to it fail at once instead of waiting for a replacement.
    fn abandon(&self, service: Service) {
        match (service, &self.ctx.services) {
            (Service::Ledger, _) => self.ctx.ledger.abandon(),
            (Service::Resolver, _) => self.ctx.resolver.abandon(),
            (Service::Memory, Services::Local { memory, .. }) => memory.abandon(),
            (Service::Summarizers, Services::Local { summarizers, archive_queue, .. }) => {
                summarizers.abandon();
                archive_queue.close();
            }
            (_, Services::Remote { .. }) => {}
        }
    }

    /// Starts `service` again with its state recovered, points its slot at it and records the restart.
    async fn restart_service(
        &mut self,
        service: Service,
        supervisor: ActorCell,
        why: &str,
    ) -> Result<(ActorCell, JoinHandle<()>), String> {
        let ctx = &self.ctx;
        let name = Some(named(&ctx.run_id, ctx.mode, service.name()));
        let spawned = match service {
            Service::Ledger => {
                let (ledger, handle) = Actor::spawn_linked(name, TokenLedger, self.ledger_book.clone(), supervisor)
                    .await
                    .map_err(|e| e.to_string())?;
                let cell = ledger.get_cell();
                ctx.ledger.replace(ledger);
                (cell, handle)
            }
            Service::Resolver => {
                let (resolver, handle) =
                    Actor::spawn_linked(name, ResolverActor, self.resolver_book.clone(), supervisor)
                        .await
                        .map_err(|e| e.to_string())?;
                let cell = resolver.get_cell();
                ctx.resolver.replace(resolver);
                (cell, handle)
            }
            Service::Memory => {
                let Services::Local { memory: slot, .. } = &ctx.services else { return Err("no local memory".into()) };
                let args = MemoryArgs {
                    policy: MemoryPolicy::from_settings(&ctx.scenario.memory),
                    ..MemoryArgs::new(self.memory_dir.clone(), system_clock(), false)
                };
                let (memory, handle) =
                    Actor::spawn_linked(name, MemoryActor, args, supervisor).await.map_err(|e| e.to_string())?;
                let cell = memory.get_cell();
                slot.replace(memory);
                (cell, handle)
            }
            Service::Summarizers => {
                let Services::Local { summarizers: slot, archive_queue, .. } = &ctx.services else {
                    return Err("no local summarizers".into());
                };
                let args = SummarizerArgs {
                    dir: self.memory_dir.clone(),
                    condenser: self.condenser.clone(),
                    clock: system_clock(),
                    index: true,
                };
                let (summarizers, handle) = Actor::spawn_linked(name, SummarizerSupervisor, args, supervisor)
                    .await
                    .map_err(|e| e.to_string())?;
                // What was queued while they were down goes in now.
                summarizers
                    .send_message(SummarizerMsg::RecordQueued(archive_queue.clone()))
                    .map_err(|e| e.to_string())?;
                let cell = summarizers.get_cell();
                slot.replace(summarizers);
                (cell, handle)
            }
        };
        ctx.record(Event::ServiceRestart { service: service.name().to_owned(), reason: why.to_owned() });
        Ok(spawned)
    }

    /// Starts `agent`'s node again from what the ledger says its subtree had.
    async fn restart_node(
        &mut self,
        agent: &str,
        supervisor: ActorCell,
        why: &str,
    ) -> Result<(ActorCell, JoinHandle<()>), String> {
        let ctx = &self.ctx;
        let kept = ctx.kept().await.map_err(|e| format!("ledger: {e}"))?;
        ctx.record(Event::Restart { agent: agent.to_owned(), reason: format!("its node {why}") });
        let (node, handle) =
            spawn_node(ctx, agent, supervisor, Some(Arc::new(kept))).await.map_err(|e| e.to_string())?;
        Ok((node.get_cell(), handle))
    }
}

/// A started run: the supervisor and its tree, with no step driven yet.
///
/// [`run_scenario`] drives one to the end; benches and embedders deliver envelopes to it directly.
pub struct LocalRun {
    pub(crate) ctx: Arc<RunContext>,
    step_timeout: Option<Duration>,
    supervisor: ActorRef<RunSupervisorMsg>,
    supervisor_handle: JoinHandle<()>,
    /// The worker nodes of a cluster run.
    cluster: Option<Box<dyn PlacedNodes>>,
    /// The steps that ended before (a resumed run's; else none).
    done: BTreeSet<usize>,
    /// How many turns may run at once.
    parallel: usize,
    /// When the run started, for the turns' timing.
    started: Instant,
    /// Where the run writes (its grant key is removed from there when it ends).
    out_dir: Option<PathBuf>,
}

fn fail(what: &str, err: &dyn std::fmt::Display) -> Error {
    Error::Runtime { message: format!("{what}: {err}") }
}

impl LocalRun {
    /// Spawns the actor tree of `scenario`.
    pub async fn start(
        scenario: Arc<Scenario>,
        factory: Arc<dyn AgentFactory>,
        options: &RunOptions,
    ) -> crate::Result<LocalRun> {
        // Actor names are process-wide, so every run gets its own id.
        static N_RUNS: AtomicU64 = AtomicU64::new(0);
        if let Some(dir) = &options.out_dir {
            // Before any actor starts: a ledger that cannot create its files would fail its start, mid-tree.
            let dir = dir.clone();
            crate::blocking::run(move || check_out_dir(&dir))
                .await
                .map_err(|err| fail("the run's output directory", &err))?
                .map_err(|v| Error::Malformed { code: v.code, message: v.message })?;
        }
        let placed = scenario.agents.iter().any(|a| a.node.is_some());
        let violations = scenario.check_placement();
        if let Some(v) = violations.into_iter().next() {
            return Err(Error::Malformed { code: v.code, message: v.message });
        }
        if placed && options.cluster.is_none() {
            return Err(Error::Malformed {
                code: ErrorCode::NodeUnknown,
                message: "the scenario places agents on nodes, and the run was given no cookie to reach them \
                          (`lessrt run --cookie-env VAR`)"
                    .to_owned(),
            });
        }
        let resume = match (&options.out_dir, options.resume) {
            (Some(dir), true) => {
                let (dir, scenario) = (dir.clone(), scenario.clone());
                let prepared = crate::blocking::run(move || resume::prepare(&dir, &scenario))
                    .await
                    .map_err(|err| fail("resume", &err))?;
                Some(Arc::new(prepared.map_err(|v| Error::Malformed { code: v.code, message: v.message })?))
            }
            (None, true) => {
                return Err(Error::Malformed {
                    code: ErrorCode::RunNotResumable,
                    message: "only a run that writes its files (an output directory) can be resumed".to_owned(),
                });
            }
            (_, false) => None,
        };
        let (run_id, session_base, secret) = match &resume {
            Some(resumed) => (resumed.run_id.clone(), resumed.session_base.clone(), resumed.secret),
            None => {
                let run_id = format!(
                    "{}-{}-{}",
                    scenario.name,
                    std::process::id(),
                    N_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                );
                // A pinned (recorded or replayed) run archives under the scenario and its pinned start time, so a
                // replay archives the same messages under the same ids and asks a model summarizer the same questions.
                let session_base = match options.pinned {
                    Some(pinned) => format!("{}@{}", scenario.name, pinned.clock.unix_timestamp()),
                    None => run_id.clone(),
                };
                let secret = match options.pinned {
                    Some(pinned) => pinned.secret,
                    None => fresh_secret().map_err(|v| Error::Malformed { code: v.code, message: v.message })?,
                };
                if let Some(dir) = options.out_dir.clone() {
                    let (name, id, base) = (scenario.name.clone(), run_id.clone(), session_base.clone());
                    crate::blocking::run(move || resume::save(&dir, &name, &id, &base, &secret))
                        .await
                        .map_err(|err| fail("the run's resume files", &err))?
                        .map_err(|err| fail("the run's resume files", &err))?;
                }
                (run_id, session_base, secret)
            }
        };
        let done = resume.as_ref().map(|r| r.done.clone()).unwrap_or_default();
        let parallel = match (options.ordering, options.parallel) {
            (Ordering::Arrival, _) => 1,
            (Ordering::Causal, 0) => factory.parallel().unwrap_or(1),
            (Ordering::Causal, n) => n,
        }
        .max(1);
        let args = RunSupervisorArgs {
            scenario: scenario.clone(),
            factory,
            run_id,
            session_base,
            secret,
            resume,
            mode: options.mode,
            out_dir: options.out_dir.clone(),
            trace: options.trace.clone(),
            pinned: options.pinned,
            summarizer: options.summarizer.clone().unwrap_or_else(|| Arc::new(Extractive) as Arc<dyn Summarizer>),
            inbox_cap: options.inbox_cap.max(1),
            index: options.index.clone(),
            ordering: options.ordering,
        };
        let (supervisor, supervisor_handle) =
            Actor::spawn(None, RunSupervisor, args).await.map_err(|e| fail("run supervisor", &e))?;
        let ctx = ractor::call!(supervisor, RunSupervisorMsg::Context).map_err(|e| fail("run supervisor", &e))?;
        let cluster = match (&options.cluster, placed) {
            (Some(cluster), true) => {
                let clock = options.pinned.map(|p| p.clock.unix_timestamp());
                let started = cluster.start(ctx.clone(), supervisor.get_cell(), clock).await;
                match started {
                    Ok(cluster) => Some(cluster),
                    Err(v) => {
                        supervisor.stop(None);
                        let _ = supervisor_handle.await;
                        return Err(Error::Malformed { code: v.code, message: v.message });
                    }
                }
            }
            _ => None,
        };
        Ok(LocalRun {
            ctx,
            step_timeout: options.step_timeout,
            supervisor,
            supervisor_handle,
            cluster,
            done,
            parallel,
            started: Instant::now(),
            out_dir: options.out_dir.clone(),
        })
    }

    /// Delivers `envelope` to its receiver's gateway: the token count, or the refusal.
    pub async fn deliver(&self, envelope: Envelope) -> crate::Result<Result<u32, Violation>> {
        let gateway = self
            .ctx
            .directory
            .get(&envelope.to)
            .ok_or_else(|| fail("deliver", &format!("no agent {}", envelope.to)))?;
        ractor::call!(gateway, GatewayMsg::Deliver, Box::new(envelope)).map_err(|e| fail("deliver", &e))
    }

    /// Drives the scenario's steps: each starts once the steps it waits for ended ([`Plan`]), at most
    /// [`RunOptions::parallel`] at once, the earliest first (with 1, in the scenario's order).
    ///
    /// A turn whose agent panicked (its reply was dropped) is retried once the gateway restarted the agent; actions
    /// the agent completed before panicking are repeated (at-least-once). After [`MAX_RESTARTS`] restarts the
    /// gateway leaves the agent down and answers the turn as skipped; the run goes on. A turn whose node failed is
    /// taken again by the node its parent started in its place; a turn of an agent whose subtree was given up is
    /// skipped.
    pub async fn drive(&self) -> crate::Result<()> {
        self.drive_with(|_, _| {}).await
    }

    /// [`LocalRun::drive`], calling `on_step(index, n_steps)` as each step starts (a progress bar, say).
    pub async fn drive_with(&self, on_step: impl FnMut(usize, usize) + Send) -> crate::Result<()> {
        self.drive_faulted(on_step, &[]).await
    }

    /// How many turns may run at once in this run.
    pub fn parallel(&self) -> usize {
        self.parallel
    }

    /// [`LocalRun::drive_with`], making `faults` happen before their steps.
    async fn drive_faulted(
        &self,
        mut on_step: impl FnMut(usize, usize) + Send,
        faults: &[FaultAt],
    ) -> crate::Result<()> {
        let ctx = &self.ctx;
        let plan = Plan::of(&ctx.scenario);
        let n_steps = plan.steps.len();
        let mut done = self.done.clone();
        let mut started = BTreeSet::new();
        let mut running = futures_util::stream::FuturesUnordered::new();
        loop {
            for index in plan.ready(&done, &started) {
                if running.len() >= self.parallel {
                    break;
                }
                let step = &ctx.scenario.steps[index];
                on_step(index, n_steps);
                for fault in faults.iter().filter(|f| f.before_step == index) {
                    fault.inject(ctx).await;
                }
                let agent = step_agent(step).to_owned();
                if let Some(cluster) = &self.cluster {
                    let moved =
                        cluster.move_lost(self.supervisor.get_cell()).await.map_err(|v| fail("cluster", &v.message))?;
                    if !moved.is_empty() {
                        tracing::warn!(target: "less.cluster", "a node was lost; {} moved", moved.join(", "));
                    }
                }
                ctx.record(Event::Step { index, agent: agent.clone(), action: step_name(step).to_owned() });
                started.insert(index);
                running.push(self.timed_turn(index, agent));
            }
            let Some(ended) = futures_util::StreamExt::next(&mut running).await else { break };
            done.insert(ended?);
            let failure = ractor::call!(self.supervisor, RunSupervisorMsg::Failure).map_err(|e| fail("run", &e))?;
            if let Some(what) = failure {
                return Err(fail("run", &what));
            }
        }
        Ok(())
    }

    /// Runs step `index` as `agent`'s turn and records when it started and ended: the step's index.
    async fn timed_turn(&self, index: usize, agent: String) -> crate::Result<usize> {
        let started_ms = self.started.elapsed().as_millis() as u64;
        let model_ms = self.take_turn(index, &agent).await?;
        let ended_ms = self.started.elapsed().as_millis() as u64;
        self.ctx.record(Event::TurnEnd { index, agent, started_ms, ended_ms, model_ms });
        Ok(index)
    }

    /// Runs step `index` as `agent`'s turn: the milliseconds its model took.
    async fn take_turn(&self, index: usize, agent: &str) -> crate::Result<u64> {
        let ctx = &self.ctx;
        let timeout = self.step_timeout(agent);
        let mut attempt = 0u32;
        let mut moves = 0u32;
        loop {
            if ctx.directory.is_lost(agent) {
                tracing::warn!("{agent}'s subtree is out of the run; step {index} skipped");
                return Ok(0);
            }
            let gateway = ctx.directory.get(agent).ok_or_else(|| fail("step", &format!("no agent {agent}")))?;
            let request = ActRequest { index, attempt };
            let call = gateway.call(|reply| GatewayMsg::Act(request, reply), Some(timeout));
            let answer = match &self.cluster {
                // While the turn runs, a node lost meanwhile has its agents moved at once: a message in flight to
                // one of them is redelivered to its new gateway, and the turn goes on.
                Some(cluster) => {
                    tokio::pin!(call);
                    loop {
                        tokio::select! {
                            answer = &mut call => break answer,
                            () = tokio::time::sleep(LOST_POLL) => {
                                match cluster.move_lost(self.supervisor.get_cell()).await {
                                    Ok(moved) if !moved.is_empty() => {
                                        tracing::warn!(target: "less.cluster", "a node was lost during step {index}; {} moved", moved.join(", "));
                                    }
                                    Ok(_) => {}
                                    Err(v) => tracing::error!(target: "less.cluster", "a lost node's agents did not move: {}", v.message),
                                }
                            }
                        }
                    }
                }
                None => call.await,
            };
            // The agent's node was lost (mid-turn, or before): its agents move (to a live node, else the head)
            // and the step is taken again there.
            if !matches!(answer, Ok(CallResult::Success(_)))
                && let Some(cluster) = &self.cluster
                && moves < 2
                && let Some(node) = cluster.node_lost(agent, lost_wait(&answer)).await
            {
                let moved = cluster.fail_over(&node, self.supervisor.get_cell()).await.map_err(|v| {
                    fail("cluster", &format!("node {node} was lost and its agents could not move: {}", v.message))
                })?;
                tracing::warn!(target: "less.cluster", "node {node} lost; {} moved", moved.join(", "));
                moves += 1;
                attempt += 1;
                continue;
            }
            match answer {
                Ok(CallResult::Success(outcome)) => {
                    if outcome.agent_down {
                        tracing::warn!("{agent} is down; step {index} skipped");
                    }
                    return Ok(outcome.model_ms);
                }
                // A timeout is not retried: the first turn may still be running, and a second one would repeat it.
                Ok(CallResult::Timeout) => {
                    return Err(fail(
                        "step",
                        &format!(
                            "{agent} did not finish step {index} within {}s (the step timeout: `lessrt run \
                             --step-timeout`, or the agent's model timeout_secs and retries)",
                            timeout.as_secs()
                        ),
                    ));
                }
                // The agent (or its node) failed mid-turn, or the turn reached an agent already failing: once its
                // supervisor started it again, the turn is taken again. Past its restart intensity the gateway
                // answers the turn as down, so the bound only guards against a gateway that never answers (a turn
                // dropped on its way to a failing agent is an attempt without a restart).
                Ok(CallResult::SenderError) | Err(_) if attempt <= 2 * (MAX_RESTARTS as u32 + 1) => {
                    attempt += 1;
                    self.restarted(agent, &gateway).await;
                }
                Ok(CallResult::SenderError) | Err(_) => {
                    return Err(fail("step", &format!("{agent}'s gateway did not answer step {index}")));
                }
            }
        }
    }

    /// Waits until `agent`, whose turn on `gateway` was not answered, can take it again: its node is another (its
    /// parent started it again) or given up, or the node still runs (it restarts the agent itself).
    async fn restarted(&self, agent: &str, gateway: &ActorRef<GatewayMsg>) {
        // The node lives: its agent panicked, and the gateway holds the retried turn until the agent is back.
        if gateway.get_status() <= ractor::ActorStatus::Running {
            return;
        }
        let deadline = tokio::time::Instant::now() + RESTART_WAIT;
        loop {
            let seen = self.ctx.directory.n_changes();
            let moved = self.ctx.directory.get(agent).is_none_or(|now| now.get_id() != gateway.get_id());
            if moved || self.ctx.directory.is_lost(agent) || tokio::time::Instant::now() >= deadline {
                return;
            }
            self.ctx.directory.changed_after(seen, RESTART_WAIT).await;
        }
    }

    /// Longest `agent`'s turn may take: the run's setting, else what its factory says, at least the default.
    fn step_timeout(&self, agent: &str) -> Duration {
        if let Some(timeout) = self.step_timeout {
            return timeout;
        }
        let needed = self.ctx.scenario.agent(agent).and_then(|spec| self.ctx.factory.turn_timeout(spec));
        needed.map_or(DEFAULT_STEP_TIMEOUT, |needed| needed.max(DEFAULT_STEP_TIMEOUT))
    }

    /// The report of what happened so far.
    pub async fn report(&self) -> crate::Result<RunReport> {
        let events = self.ctx.ledger.ask(TokenLedgerMsg::Snapshot).await.map_err(|e| fail("ledger", &e))?;
        Ok(RunReport::build(&self.ctx.scenario, self.ctx.mode, &events))
    }

    /// Ends the run's session in the archive and waits (at most `SUMMARY_TIMEOUT`) until the summarizers have done
    /// everything pending: the run's messages are archived and, past the significance gate, summarized.
    pub async fn end_session(&self) -> crate::Result<BuildReport> {
        let ctx = &self.ctx;
        let Services::Local { summarizers, archive_queue, .. } = &ctx.services else {
            return Err(fail("summarizers", &"a run's session ends on its head node"));
        };
        // The queued messages go in before the session ends (it would summarize without them).
        let queue = archive_queue.clone();
        summarizers.send(SummarizerMsg::RecordQueued(queue)).map_err(|e| fail("summarizers", &e))?;
        let end = SummarizerMsg::EndSession { project: ctx.scenario.project.clone(), session: ctx.session() };
        summarizers.send(end).map_err(|e| fail("summarizers", &e))?;
        match summarizers.call(SummarizerMsg::Drain, Some(SUMMARY_TIMEOUT)).await {
            Ok(CallResult::Success(report)) => Ok(report),
            Ok(_) => Err(fail("summarizers", &"did not drain in time")),
            Err(err) => Err(fail("summarizers", &err)),
        }
    }

    /// Stops the tree: the supervisor stops its linked children, and each node its agent and the nodes below. The
    /// archive first takes every delivered message still queued, and the ledger writes out every event recorded
    /// before the call (a stop drops what is still in a mailbox, and nothing of a delivery that was acknowledged
    /// may be among it).
    pub async fn stop(self) {
        // Every delivered message is archived before the summarizers stop, and every event written.
        if let Services::Local { summarizers, archive_queue, .. } = &self.ctx.services
            && let Err(err) = summarizers.ask(|reply| SummarizerMsg::Sync(archive_queue.clone(), reply)).await
        {
            tracing::error!("the archive did not take the run's last messages before the run stopped: {err}");
        }
        // A run's agents end with it, and so do the claims they still hold.
        if let Services::Local { coord, .. } = &self.ctx.services {
            let (coord, project, now) =
                (coord.clone(), self.ctx.scenario.project.clone(), self.ctx.now().unix_timestamp());
            let agents: Vec<String> = self.ctx.scenario.agents.iter().map(|a| a.id.clone()).collect();
            let ended =
                crate::blocking::run(move || coord.if_open(|db| crate::coord::end_claims(db, &project, &agents, now)))
                    .await;
            if let Ok(Some(Err(err))) = ended {
                tracing::error!("the run's claims were not ended: {err}");
            }
        }
        if let Err(err) = self.ctx.ledger.ask(TokenLedgerMsg::Flush).await {
            tracing::error!("the ledger did not flush before the run stopped: {err}");
        }
        // Every `sam:msg:` pointer handed out (a spilled message's, a refused one's) reads back after the run.
        if let Err(err) = self.ctx.resolver.ask(ResolverMsg::Flush).await {
            tracing::error!("the sam: index was not written before the run stopped: {err}");
        }
        if let Some(cluster) = &self.cluster {
            cluster.release();
        }
        self.supervisor.stop(None);
        let _ = self.supervisor_handle.await;
    }
}

/// A [`Fault`] as the driver injects it (none outside the tests).
struct FaultAt {
    before_step: usize,
    #[cfg(any(test, feature = "faults"))]
    fault: Fault,
}

impl FaultAt {
    /// Makes the fault happen, and waits each time until the failed actor was started again.
    async fn inject(&self, ctx: &RunContext) {
        #[cfg(any(test, feature = "faults"))]
        for _ in 0..self.fault.times {
            inject_once(ctx, &self.fault.target).await;
        }
        let _ = ctx;
    }
}

/// Makes `target` fail once and waits until its supervisor started it again (or gave it up).
#[cfg(any(test, feature = "faults"))]
async fn inject_once(ctx: &RunContext, target: &FaultTarget) {
    async fn fail_in<M: ractor::Message>(slot: &Slot<M>, fail: M) {
        let generation = slot.generation();
        let _ = slot.send(fail);
        slot.replaced_after(generation).await;
    }
    match target {
        FaultTarget::Ledger => {
            // The failed writer leaves lines on the disk as well as in its book, as in a run longer than the flush
            // interval.
            let _ = ctx.ledger.ask(TokenLedgerMsg::Flush).await;
            fail_in(&ctx.ledger, TokenLedgerMsg::Fail).await;
        }
        FaultTarget::Resolver => fail_in(&ctx.resolver, ResolverMsg::Fail).await,
        FaultTarget::Memory => {
            if let Services::Local { memory, .. } = &ctx.services {
                fail_in(memory, crate::memory::MemoryMsg::Fail).await;
            }
        }
        FaultTarget::Summarizers => {
            if let Services::Local { summarizers, .. } = &ctx.services {
                fail_in(summarizers, SummarizerMsg::Fail).await;
            }
        }
        FaultTarget::NodeAfterNextDelivery(agent) => {
            if let Some(gateway) = ctx.directory.get(agent) {
                let _ = gateway.send_message(GatewayMsg::FailAfterNextDelivery);
            }
        }
        FaultTarget::Node(agent) => {
            let Some(gateway) = ctx.directory.get(agent) else { return };
            let _ = gateway.send_message(GatewayMsg::Fail);
            let deadline = tokio::time::Instant::now() + RESTART_WAIT;
            loop {
                let seen = ctx.directory.n_changes();
                let replaced = ctx.directory.get(agent).is_some_and(|now| now.get_id() != gateway.get_id());
                if replaced || ctx.directory.is_lost(agent) || tokio::time::Instant::now() >= deadline {
                    return;
                }
                ctx.directory.changed_after(seen, RESTART_WAIT).await;
            }
        }
    }
}

/// Runs `scenario` to the end with `faults` injected, and reports (the tests of the run's supervision).
#[cfg(any(test, feature = "faults"))]
pub async fn run_scenario_faulted(
    scenario: Arc<Scenario>,
    factory: Arc<dyn AgentFactory>,
    options: RunOptions,
    faults: &[Fault],
) -> crate::Result<RunReport> {
    let faults: Vec<FaultAt> =
        faults.iter().map(|fault| FaultAt { before_step: fault.before_step, fault: fault.clone() }).collect();
    run_to_end(scenario, factory, options, |_, _| {}, &faults).await
}

/// Checks that `dir` can hold a run's output before anything runs: it is (or is created as) a directory, a file can
/// be written in it, and nothing an earlier run left in it is a symlink, a FIFO or a device (the run would write
/// through it, or block on it; the files lessrt opens itself refuse links anyway, see [`crate::files`], but the
/// memory's index writes its own). `LESS_OUTPUT_UNWRITABLE` otherwise, saying which and why.
pub fn check_out_dir(dir: &Path) -> Result<(), Violation> {
    let unwritable = |why: String| {
        Violation::new(
            ErrorCode::OutputUnwritable,
            "",
            format!("cannot write the run's output in {}: {why}", dir.display()),
        )
    };
    if dir.exists() && !dir.is_dir() {
        return Err(unwritable("it is a file, not a directory".to_owned()));
    }
    std::fs::create_dir_all(dir).map_err(|err| unwritable(err.to_string()))?;
    // Creating the directory can succeed where writing in it does not (a read-only mount, no write permission).
    let probe = dir.join(format!(".lessrt-write-probe-{}", std::process::id()));
    let _ = std::fs::remove_file(&probe);
    crate::files::create(&probe).map_err(|err| unwritable(err.to_string()))?;
    let _ = std::fs::remove_file(&probe);
    if let Some(odd) = not_plain(dir).map_err(|err| unwritable(err.to_string()))? {
        return Err(unwritable(format!(
            "{} is a symlink, a FIFO or a device, and lessrt does not write through those: remove it",
            odd.display()
        )));
    }
    Ok(())
}

/// The first entry under `dir` that is neither a directory nor a regular file (symlinks are not followed).
fn not_plain(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if !kind.is_file() {
                return Ok(Some(entry.path()));
            }
        }
    }
    Ok(None)
}

/// Runs `scenario` to the end and reports.
pub async fn run_scenario(
    scenario: Arc<Scenario>,
    factory: Arc<dyn AgentFactory>,
    options: RunOptions,
) -> crate::Result<RunReport> {
    run_scenario_with(scenario, factory, options, |_, _| {}).await
}

/// [`run_scenario`], calling `on_step(index, n_steps)` before each step.
pub async fn run_scenario_with(
    scenario: Arc<Scenario>,
    factory: Arc<dyn AgentFactory>,
    options: RunOptions,
    on_step: impl FnMut(usize, usize) + Send,
) -> crate::Result<RunReport> {
    run_to_end(scenario, factory, options, on_step, &[]).await
}

/// Starts the run, drives it with `faults` (none but in tests), summarizes its session, reports and stops it.
async fn run_to_end(
    scenario: Arc<Scenario>,
    factory: Arc<dyn AgentFactory>,
    options: RunOptions,
    on_step: impl FnMut(usize, usize) + Send,
    faults: &[FaultAt],
) -> crate::Result<RunReport> {
    let run = LocalRun::start(scenario, factory, &options).await?;
    let driven = run.drive_faulted(on_step, faults).await;
    if let Err(err) = run.end_session().await {
        // The run's messages stay archived; `lessrt dag build` summarizes them later.
        tracing::warn!("run session not summarized: {err}");
    }
    let report = run.report().await;
    let out_dir = run.out_dir.clone();
    run.stop().await;
    // The run ended, finished or failed, in this process: nothing will verify its grants again, and `--resume` is for
    // a run whose process died (a failed run is run again). A failure to remove the key was logged.
    if let Some(dir) = out_dir {
        let _ = crate::blocking::run(move || resume::forget_key(&dir)).await;
    }
    driven?;
    report
}

/// How long the driver waits to hear that a node was lost after a turn on it failed: a dropped reply is most often
/// an agent that panicked (its gateway restarts it), so only a moment; a failed send or a timeout, longer.
fn lost_wait<T>(answer: &Result<CallResult<T>, ractor::MessagingErr<GatewayMsg>>) -> Duration {
    match answer {
        Ok(CallResult::SenderError) => Duration::from_millis(100),
        _ => Duration::from_secs(3),
    }
}

fn step_name(step: &Step) -> &'static str {
    match step {
        Step::Brief { .. } => "brief",
        Step::Deref { .. } => "deref",
        Step::Report(_) => "report",
        Step::Query { .. } => "query",
        Step::Search { .. } => "search",
        Step::List { .. } => "list",
        Step::Promote { .. } => "promote",
        Step::Claim { .. } => "claim",
        Step::Release { .. } => "release",
        Step::Panic { .. } => "panic",
    }
}
