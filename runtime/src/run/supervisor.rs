//! The run supervisor and the driver of a run.
//!
//! `RunSupervisor` spawns the memory, the resolver, the ledger and one gateway per agent, linked to itself; each gateway spawns
//! and supervises its agent (see the restart policy in `gateway.rs`). A resolver, ledger or gateway failure is a bug:
//! the supervisor keeps it and the driver ends the run with an error after the current step.
//! [`run_scenario`] drives the steps in order, one turn at a time, then collects the ledger into a [`RunReport`].
//! Shutdown: the driver stops the supervisor, which stops its children (and they theirs); the memory commits its index
//! as it stops.
//!
//! The run's memory lives in `<out_dir>/memory/` when the run writes files (so project-scoped engrams outlive the
//! run, as project scope means; run-scoped ones are never seen by another run), and otherwise in a scratch directory
//! under the system's temporary directory, removed when the run stops.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::dag::actor::{ArchiveQueue, SummarizerArgs, SummarizerMsg, SummarizerSupervisor};
use crate::dag::{BuildReport, Condenser, DagConfig, Extractive, Summarizer};
use crate::memory::{MemoryActor, MemoryArgs, MemoryPolicy, system_clock};
use crate::resolver::Resolver;
use crate::run::agent::{ActRequest, AgentFactory};
use crate::run::gateway::{GatewayActor, GatewayArgs, GatewayMsg, MAX_RESTARTS};
use crate::run::inbox::DEFAULT_INBOX_CAP;
use crate::run::ledger::{Event, TokenLedger, TokenLedgerArgs, TokenLedgerMsg, TraceSink};
use crate::run::report::RunReport;
use crate::run::resolver_actor::{ResolverActor, ResolverArgs, ResolverMsg};
use crate::run::services::Services;
use crate::run::wire::Envelope;
use crate::run::{Directory, RunContext, fresh_secret};
use less_contract::{Error, ErrorCode, Violation};
use less_contract::{Scenario, Step, WireMode};

/// Longest the summarizers may take to finish a run's session.
const SUMMARY_TIMEOUT: Duration = Duration::from_secs(120);

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
    /// How to reach the run's worker nodes, for a scenario that places agents on nodes (`[cluster]`).
    pub cluster: Option<ClusterOptions>,
    /// The workspace index the agents' `search` and `list` actions use. `None`: the scenario workspace's, in its
    /// default directory ([`crate::workspace::WorkspaceIndex::default_dir`]), opened and refreshed on the first search.
    pub index: Option<Arc<crate::workspace::SharedIndex>>,
}

/// What the head of a cluster run needs besides the scenario: the cookie, and the scenario as the nodes rebuild it.
#[derive(Clone)]
pub struct ClusterOptions {
    /// The nodes' shared secret (`--cookie-env`).
    pub cookie: String,
    /// The scenario file's text: each node rebuilds the scenario from it.
    pub scenario_toml: String,
    /// The scenario file's directory.
    pub scenario_base: PathBuf,
    /// Every agent backed by a model (`--agents llm`).
    pub every_llm: bool,
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
        }
    }
}

/// What a replayable run keeps fixed.
#[derive(Debug, Clone, Copy)]
pub struct Pinned {
    /// A frozen clock: every document the run stamps (engram `created_at`, grant expiry) takes this time, and grants
    /// are checked against it.
    pub clock: time::OffsetDateTime,
    /// The run's grant MAC key. No counted byte depends on it (agents read a grant's terms; the MAC stays with the
    /// grantee's gateway), so the command line gives recorded and replayed runs a fresh one and never stores it.
    pub secret: [u8; 32],
}

/// The per-run supervisor. Its children (memory, resolver, ledger, gateways) failing is a bug or a broken environment, never
/// an agent's misbehaviour (agents are supervised by their gateways): the failure is kept in `failed` and the driver
/// ends the run with [`Error::Runtime`] after the current step.
struct RunSupervisor;

impl Actor for RunSupervisor {
    type Msg = ();
    type State = Arc<std::sync::Mutex<Option<String>>>;
    type Arguments = Arc<std::sync::Mutex<Option<String>>>;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        failed: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(failed)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        event: SupervisionEvent,
        failed: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // While the supervisor runs, a child that stops is as gone as one that failed: the run cannot go on
        // without it (when the run stops, the supervisor stops first and hears nothing more).
        let what = match event {
            SupervisionEvent::ActorFailed(cell, err) => {
                format!("{} failed: {err}", cell.get_name().unwrap_or_else(|| "a run actor".to_owned()))
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => format!(
                "{} stopped{}",
                cell.get_name().unwrap_or_else(|| "a run actor".to_owned()),
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            ),
            _ => return Ok(()),
        };
        tracing::error!("{what}");
        failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert(what);
        Ok(())
    }
}

/// A started run: the supervisor, resolver, ledger and one gateway per agent, with no step driven yet.
///
/// [`run_scenario`] drives one to the end; benches and embedders deliver envelopes to it directly.
pub struct LocalRun {
    pub(crate) ctx: Arc<RunContext>,
    step_timeout: Option<Duration>,
    failed: Arc<std::sync::Mutex<Option<String>>>,
    supervisor: ActorRef<()>,
    supervisor_handle: tokio::task::JoinHandle<()>,
    /// The worker nodes of a cluster run.
    cluster: Option<crate::cluster::ClusterHandle>,
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
            check_out_dir(dir).map_err(|v| Error::Malformed { code: v.code, message: v.message })?;
        }
        let run_id = format!("{}-{}-{}", scenario.name, std::process::id(), N_RUNS.fetch_add(1, Ordering::Relaxed));
        let mode = options.mode;
        let failed = Arc::new(std::sync::Mutex::new(None));
        let (supervisor, supervisor_handle) =
            Actor::spawn(None, RunSupervisor, failed.clone()).await.map_err(|e| fail("supervisor", &e))?;
        let resolver = Resolver::new(&scenario.workspace).map_err(|v| fail("workspace", &v))?;
        let ledger_args = TokenLedgerArgs {
            out_dir: options.out_dir.clone(),
            trace: options.trace.clone(),
            run_id: run_id.clone(),
            wire: mode.is_baseline(),
        };
        let (ledger, _) = Actor::spawn_linked(
            Some(format!("{run_id}:{}:ledger", mode.as_str())),
            TokenLedger,
            ledger_args,
            supervisor.get_cell(),
        )
        .await
        .map_err(|e| fail("ledger", &e))?;
        let (memory_dir, remove_on_stop) = match &options.out_dir {
            Some(dir) => (dir.join("memory"), false),
            // A fresh directory of its own, which the memory actor removes when it stops.
            None => {
                let scratch = tempfile::Builder::new()
                    .prefix(&format!("lessrt-memory-{run_id}-{}-", mode.as_str()))
                    .tempdir()
                    .map_err(|e| fail("memory directory", &e))?;
                (scratch.keep(), true)
            }
        };
        let resolver_args = ResolverArgs { resolver, sam_path: Some(memory_dir.join("sam.sqlite")) };
        let (resolver, _) = Actor::spawn_linked(
            Some(format!("{run_id}:{}:resolver", mode.as_str())),
            ResolverActor,
            resolver_args,
            supervisor.get_cell(),
        )
        .await
        .map_err(|e| fail("resolver", &e))?;
        let summarizer_args = SummarizerArgs {
            dir: memory_dir.clone(),
            condenser: Condenser::new(
                DagConfig::default(),
                options.summarizer.clone().unwrap_or_else(|| Arc::new(Extractive) as Arc<dyn Summarizer>),
            ),
            clock: system_clock(),
            index: true,
        };
        let (summarizers, _) = Actor::spawn_linked(
            Some(format!("{run_id}:{}:summarizers", mode.as_str())),
            SummarizerSupervisor,
            summarizer_args,
            supervisor.get_cell(),
        )
        .await
        .map_err(|e| fail("summarizers", &e))?;
        if !scenario.symbols.is_empty() || !scenario.capsules.is_empty() {
            let (dir, scenario) = (memory_dir.clone(), scenario.clone());
            crate::blocking::run(move || {
                crate::shared::Shared::publish(&dir, &scenario.project, &scenario.symbols, &scenario.capsules)
            })
            .await
            .map_err(|e| fail("symbols and capsules", &e))?
            .map_err(|v| fail("symbols and capsules", &v))?;
        }
        let memory_args = MemoryArgs {
            policy: MemoryPolicy::from_settings(&scenario.memory),
            ..MemoryArgs::new(memory_dir, system_clock(), remove_on_stop)
        };
        let (memory, _) = Actor::spawn_linked(
            Some(format!("{run_id}:{}:memory", mode.as_str())),
            MemoryActor,
            memory_args,
            supervisor.get_cell(),
        )
        .await
        .map_err(|e| fail("memory", &e))?;
        let session_base = match options.pinned {
            Some(pinned) => format!("{}@{}", scenario.name, pinned.clock.unix_timestamp()),
            None => run_id.clone(),
        };
        let archive_queue =
            Arc::new(ArchiveQueue::new(scenario.project.clone(), format!("{session_base}:{}", mode.as_str())));
        let ctx = Arc::new(RunContext {
            run_id: run_id.clone(),
            session_base,
            mode,
            scenario: scenario.clone(),
            secret: match options.pinned {
                Some(pinned) => pinned.secret,
                None => fresh_secret().map_err(|err| fail("grant key", &err))?,
            },
            directory: Directory::default(),
            resolver,
            ledger,
            services: Services::Local { memory, summarizers, archive_queue, n_msgs: Default::default() },
            factory,
            clock: options.pinned.map(|p| p.clock),
            inbox_cap: options.inbox_cap.max(1),
            workspace: options
                .index
                .clone()
                .unwrap_or_else(|| crate::workspace::SharedIndex::new(&scenario.workspace, None)),
        });
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
        // Placed agents run on their nodes, with their gateways; the others here.
        for agent in scenario.agents.iter().filter(|a| a.node.is_none()) {
            let args = GatewayArgs { ctx: ctx.clone(), agent_id: agent.id.clone() };
            let (gateway, _) = Actor::spawn_linked(
                Some(format!("{run_id}:{}:gateway:{}", mode.as_str(), agent.id)),
                GatewayActor,
                args,
                supervisor.get_cell(),
            )
            .await
            .map_err(|e| fail("gateway", &e))?;
            ctx.directory.insert(agent.id.clone(), gateway);
        }
        let cluster = match (&options.cluster, placed) {
            (Some(cluster), true) => {
                let started = crate::cluster::ClusterHandle::start(
                    ctx.clone(),
                    cluster.cookie.clone(),
                    cluster.scenario_toml.clone(),
                    cluster.scenario_base.clone(),
                    cluster.every_llm,
                    supervisor.get_cell(),
                    options.pinned.map(|p| p.clock.unix_timestamp()),
                )
                .await;
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
        Ok(LocalRun { ctx, step_timeout: options.step_timeout, failed, supervisor, supervisor_handle, cluster })
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

    /// Drives the scenario's steps in order, one turn at a time.
    ///
    /// A turn whose agent panicked (its reply was dropped) is retried once the gateway restarted the agent; actions
    /// the agent completed before panicking are repeated (at-least-once). After [`MAX_RESTARTS`] restarts the
    /// gateway leaves the agent down and answers the turn as skipped; the run goes on.
    pub async fn drive(&self) -> crate::Result<()> {
        self.drive_with(|_, _| {}).await
    }

    /// [`LocalRun::drive`], calling `on_step(index, n_steps)` before each step (a progress bar, say).
    pub async fn drive_with(&self, mut on_step: impl FnMut(usize, usize) + Send) -> crate::Result<()> {
        let ctx = &self.ctx;
        let n_steps = ctx.scenario.steps.len();
        for (index, step) in ctx.scenario.steps.iter().enumerate() {
            on_step(index, n_steps);
            let agent = step_agent(step).to_owned();
            if let Some(cluster) = &self.cluster {
                let moved =
                    cluster.move_lost(self.supervisor.get_cell()).await.map_err(|v| fail("cluster", &v.message))?;
                if !moved.is_empty() {
                    tracing::warn!(target: "less.cluster", "a node was lost; {} moved to the head", moved.join(", "));
                }
            }
            ctx.record(Event::Step { index, agent: agent.clone(), action: step_name(step).to_owned() });
            let mut gateway = ctx.directory.get(&agent).ok_or_else(|| fail("step", &format!("no agent {agent}")))?;
            let timeout = self.step_timeout(&agent);
            let mut attempt = 0u32;
            let mut moves = 0u32;
            loop {
                let request = ActRequest { index, step: step.clone(), attempt };
                let answer = gateway.call(|reply| GatewayMsg::Act(request, reply), Some(timeout)).await;
                // The agent's node was lost (mid-turn, or before): its agents move to the head and the step is
                // taken again there.
                if !matches!(answer, Ok(CallResult::Success(_)))
                    && let Some(cluster) = &self.cluster
                    && moves < 2
                    && let Some(node) = cluster.node_lost(&agent, lost_wait(&answer)).await
                {
                    let moved = cluster.fail_over(&node, self.supervisor.get_cell()).await.map_err(|v| {
                        fail("cluster", &format!("node {node} was lost and its agents could not move: {}", v.message))
                    })?;
                    tracing::warn!(target: "less.cluster", "node {node} lost; {} moved to the head", moved.join(", "));
                    gateway = ctx.directory.get(&agent).ok_or_else(|| fail("step", &format!("no agent {agent}")))?;
                    moves += 1;
                    attempt += 1;
                    continue;
                }
                match answer {
                    Ok(CallResult::Success(outcome)) => {
                        if outcome.agent_down {
                            tracing::warn!("{agent} is down; step {index} skipped");
                        }
                        break;
                    }
                    // The agent panicked mid-turn: give its gateway a moment to restart it, then retry.
                    Ok(CallResult::SenderError) if attempt <= MAX_RESTARTS as u32 => {
                        attempt += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
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
                    Ok(CallResult::SenderError) | Err(_) => {
                        return Err(fail("step", &format!("{agent}'s gateway did not answer step {index}")));
                    }
                }
            }
            if let Some(what) = self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone() {
                return Err(fail("run", &what));
            }
        }
        Ok(())
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
        let events = ractor::call!(self.ctx.ledger, TokenLedgerMsg::Snapshot).map_err(|e| fail("ledger", &e))?;
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
        summarizers.send_message(SummarizerMsg::RecordQueued(queue)).map_err(|e| fail("summarizers", &e))?;
        let end = SummarizerMsg::EndSession { project: ctx.scenario.project.clone(), session: ctx.session() };
        summarizers.send_message(end).map_err(|e| fail("summarizers", &e))?;
        match summarizers.call(SummarizerMsg::Drain, Some(SUMMARY_TIMEOUT)).await {
            Ok(CallResult::Success(report)) => Ok(report),
            Ok(_) => Err(fail("summarizers", &"did not drain in time")),
            Err(err) => Err(fail("summarizers", &err)),
        }
    }

    /// Stops the tree: the supervisor stops its linked children, and each gateway its agent. The archive first takes
    /// every delivered message still queued, and the ledger writes out every event recorded before the call (a stop
    /// drops what is still in a mailbox, and nothing of a delivery that was acknowledged may be among it).
    pub async fn stop(self) {
        // Every delivered message is archived before the summarizers stop, and every event written.
        if let Services::Local { summarizers, archive_queue, .. } = &self.ctx.services
            && let Err(err) = ractor::call!(summarizers, SummarizerMsg::Sync, archive_queue.clone())
        {
            tracing::error!("the archive did not take the run's last messages before the run stopped: {err}");
        }
        if let Err(err) = ractor::call!(self.ctx.ledger, TokenLedgerMsg::Flush) {
            tracing::error!("the ledger did not flush before the run stopped: {err}");
        }
        // Every `sam:msg:` pointer handed out (a spilled message's, a refused one's) reads back after the run.
        if let Err(err) = ractor::call!(self.ctx.resolver, ResolverMsg::Flush) {
            tracing::error!("the sam: index was not written before the run stopped: {err}");
        }
        if let Some(cluster) = &self.cluster {
            cluster.release();
        }
        self.supervisor.stop(None);
        let _ = self.supervisor_handle.await;
    }
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
    let run = LocalRun::start(scenario, factory, &options).await?;
    let driven = run.drive_with(on_step).await;
    if let Err(err) = run.end_session().await {
        // The run's messages stay archived; `lessrt dag build` summarizes them later.
        tracing::warn!("run session not summarized: {err}");
    }
    let report = run.report().await;
    run.stop().await;
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

fn step_agent(step: &Step) -> &str {
    match step {
        Step::Brief { agent, .. }
        | Step::Deref { agent, .. }
        | Step::Query { agent, .. }
        | Step::Search { agent, .. }
        | Step::List { agent, .. }
        | Step::Promote { agent, .. }
        | Step::Panic { agent } => agent,
        Step::Report(report) => &report.agent,
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
        Step::Panic { .. } => "panic",
    }
}
