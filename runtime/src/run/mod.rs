//! The PAS runtime: one run of a scenario as a tree of actors, whose supervision tree is the scenario's hierarchy.
//!
//! ```text
//! RunSupervisor                 restarts what fails below it, state recovered (supervisor.rs)
//! ├── TokenLedger               every delivery, refusal, deref, grant, restart: ledger.jsonl + audit.log
//! ├── ResolverActor             pointer → content + digest, confined to the workspace; the sam: index
//! ├── SummarizerSupervisor      the archive of every delivered message, and the run's session summary
//! ├── MemoryActor               the run's engram memory: agents' reports are put, their queries answered, as them
//! └── Gateway(lead)             the lead's node: its budget enforcer, supervising its agent and its children's nodes
//!     ├── Agent(lead)
//!     └── Gateway(child) …      restarted by its parent's node from the ledger; past the limit, lost with its
//!                               subtree and escalated to the parent agent
//! ```
//!
//! The conductor ([`LocalRun::drive`], `conduct.rs`) starts each step once the steps it waits for ended (a brief
//! wakes its child, the children's reports their parent), up to `parallel` turns at once, by asking the acting agent's
//! gateway for a turn named by the step's index (the agent holds its own steps, handed over in its [`Seat`]); the
//! turn's reply arrives when every message of the turn was delivered, refused and resent, or escalated. What an agent
//! reads is ordered by sender and message number, so runs are deterministic at any parallelism. Supervisors follow
//! `crate::supervision` (restart types, strategies, intensity, stop in reverse start order). Actors reach the restartable infrastructure through [`slot::Slot`]s and the books of the
//! ledger and the resolver, never through an `ActorRef` a restart would leave stale.

pub(crate) mod agent;
pub(crate) mod baseline;
pub(crate) mod conduct;
pub(crate) mod gateway;
pub(crate) mod grade;
pub(crate) mod inbox;
pub(crate) mod ledger;
pub(crate) mod remote;
pub(crate) mod report;
pub(crate) mod resolver_actor;
pub mod resume;
pub(crate) mod services;
pub(crate) mod slot;
pub(crate) mod supervisor;
pub(crate) mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use ractor::ActorRef;

use crate::dag::actor::SummarizerMsg;
use crate::memory::Principal;
use crate::run::gateway::GatewayMsg;
use crate::run::ledger::{LedgerBook, SentText as Sent, TokenLedgerMsg, Wake};
pub use crate::run::resolver_actor::sam_keys;
use crate::run::resolver_actor::{ResolverBook, ResolverMsg};
use crate::run::slot::Slot;
use less_contract::{ErrorCode, Violation};
use less_contract::{Scenario, WireMode};

pub use agent::{
    Agent, AgentFactory, AgentFuture, DEFAULT_TURN_LIMIT, DecideInput, Decision, Done, GrantAsk, ModelUsage, Outcome,
    Question, Seat, TurnInput, agent_in_turn,
};
pub use conduct::Ordering;
pub use gateway::{MAX_DESCRIBE, MAX_RESTARTS, RESTART_WINDOW};
pub use grade::{
    Answer, AnswerGrader, AnswerVerdict, Failure, TaskReport, TaskVerdict, contradiction, covers, grade, is_yes_no,
    states,
};
pub use inbox::{
    DEFAULT_INBOX_CAP, Delivered, Dereferenced, Described, Description, Inbox, InboxItem, Listed, RecalledMore,
    Received, SearchHit, Searched, Spill, Verbatim,
};
pub use ledger::{Displaced, Event, SentText, TraceSink, WIRE_FILE};
pub use remote::{PlacedNodes, Placement, RemoteFuture};
pub use report::{
    CheckResult, CheckStatus, KindCount, LostSubtree, ModelSpend, Rates, ResumedAt, RoleReport, RunReport, Timing,
    TokenStats,
};
pub use slot::RESTART_WAIT;
pub use supervisor::{
    DEFAULT_STEP_TIMEOUT, LocalRun, Pinned, RunOptions, check_out_dir, run_scenario, run_scenario_with,
};
#[cfg(any(test, feature = "faults"))]
pub use supervisor::{Fault, FaultTarget, run_scenario_faulted};
pub use wire::{
    Action, AskGrantAction, BriefAction, ClaimAction, DerefAction, DescribeAction, Document, Draft, Envelope,
    EnvelopeKind, ListAction, ReportAction, SearchAction, SendAction,
};

/// Gateways by agent id: the only way to reach an agent. An agent of a subtree lost past its restart limit has no
/// gateway any more; the directory remembers it as lost.
#[derive(Default)]
pub struct Directory {
    gateways: RwLock<HashMap<String, ActorRef<GatewayMsg>>>,
    lost: RwLock<HashSet<String>>,
    /// Bumped by every change, so a test can wait for a node's restart.
    changes: tokio::sync::watch::Sender<u64>,
}

impl Directory {
    /// The gateway of `agent`.
    pub(crate) fn get(&self, agent: &str) -> Option<ActorRef<GatewayMsg>> {
        self.gateways.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(agent).cloned()
    }

    pub(crate) fn insert(&self, agent: String, gateway: ActorRef<GatewayMsg>) {
        self.lost.write().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&agent);
        self.gateways.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(agent, gateway);
        self.changes.send_modify(|n| *n += 1);
    }

    /// `agents` are out of the run: their gateways are gone, and a step or a message for one of them is answered
    /// as for an agent that is down.
    pub(crate) fn lose(&self, agents: &[String]) {
        let mut gateways = self.gateways.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut lost = self.lost.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        for agent in agents {
            gateways.remove(agent);
            lost.insert(agent.clone());
        }
        drop((gateways, lost));
        self.changes.send_modify(|n| *n += 1);
    }

    /// Whether `agent` is out of the run with a lost subtree.
    pub(crate) fn is_lost(&self, agent: &str) -> bool {
        self.lost.read().unwrap_or_else(std::sync::PoisonError::into_inner).contains(agent)
    }

    /// Waits until the directory changes after the change count `seen` (at most `wait`); the count now.
    pub(crate) async fn changed_after(&self, seen: u64, wait: std::time::Duration) -> u64 {
        let mut changes = self.changes.subscribe();
        let _ = tokio::time::timeout(wait, changes.wait_for(|n| *n > seen)).await;
        *changes.borrow()
    }

    /// The change count now.
    pub(crate) fn n_changes(&self) -> u64 {
        *self.changes.borrow()
    }

    /// Waits up to `wait` until `agent`'s gateway is another than `was` (its node was restarted or moved): the new
    /// one, or `None` when none came (or the agent's subtree is out of the run).
    pub(crate) async fn replaced(
        &self,
        agent: &str,
        was: ractor::ActorId,
        wait: std::time::Duration,
    ) -> Option<ActorRef<GatewayMsg>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let seen = self.n_changes();
            if self.is_lost(agent) {
                return None;
            }
            if let Some(now) = self.get(agent).filter(|g| g.get_id() != was) {
                return Some(now);
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            self.changed_after(seen, left).await;
        }
    }
}

/// On the head: the books of the ledger and the resolver, which outlive the actors that write them out (see
/// [`slot`]), so what is recorded waits in no mailbox.
pub(crate) struct Books {
    pub(crate) ledger: Arc<LedgerBook>,
    pub(crate) resolver: Arc<ResolverBook>,
}

/// What every actor of a run shares (read-only but for counters).
pub struct RunContext {
    /// Identifies the run in actor names and the ledger.
    pub run_id: String,
    /// The run's session in the archive (without the mode): the run id, or for a pinned (recorded or replayed) run
    /// the scenario and the pinned start time, so that a replay archives the same messages under the same ids and
    /// asks a model summarizer the recorded questions.
    pub session_base: String,
    /// Wire mode.
    pub mode: WireMode,
    /// The scenario.
    pub scenario: Arc<Scenario>,
    /// The run's grant MAC key; never leaves the process.
    pub(crate) secret: [u8; 32],
    pub(crate) directory: Directory,
    /// The resolver and the ledger, wherever they are now (the run supervisor restarts them on the head).
    pub(crate) resolver: Slot<ResolverMsg>,
    pub(crate) ledger: Slot<TokenLedgerMsg>,
    /// On the head, their books; on a worker node none (events and documents travel to the head as messages).
    pub(crate) books: Option<Books>,
    /// The memory, the summarizers (every delivered message is archived, and the run is one session) and the
    /// message ids: here on the head node, the head's on a worker node.
    pub(crate) services: services::Services,
    pub(crate) factory: Arc<dyn AgentFactory>,
    /// The frozen clock of [`RunOptions::frozen_clock`], if any.
    pub(crate) clock: Option<time::OffsetDateTime>,
    /// How many typed messages an agent's inbox keeps inline ([`RunOptions::inbox_cap`]).
    pub(crate) inbox_cap: usize,
    /// The workspace index behind the agents' `search` and `list` ([`RunOptions::index`]).
    pub(crate) workspace: Arc<crate::workspace::SharedIndex>,
    /// How agents read what arrived while they were idle, and how messages are numbered ([`RunOptions::ordering`]).
    pub(crate) ordering: Ordering,
}

impl RunContext {
    /// Records an event in the ledger (fire and forget: the ledger never refuses). On the head it goes into the
    /// ledger's book at once, and the writer is only woken: a writer that is down loses nothing, its replacement
    /// writes what the book holds.
    pub(crate) fn record(&self, event: Event) {
        match &self.books {
            Some(books) => self.wake_ledger(books.ledger.record(event)),
            None => {
                if let Err(err) = self.ledger.send(TokenLedgerMsg::Record(Box::new(event))) {
                    tracing::error!("ledger unavailable: {err}");
                }
            }
        }
    }

    /// Records what a delivered message was sent as (a baseline run's `wire.jsonl`).
    pub(crate) fn record_wire(&self, sent: Sent) {
        match &self.books {
            Some(books) => self.wake_ledger(books.ledger.record_wire(&sent)),
            None => {
                if let Err(err) = self.ledger.send(TokenLedgerMsg::Wire(Box::new(sent))) {
                    tracing::error!("ledger unavailable: {err}");
                }
            }
        }
    }

    fn wake_ledger(&self, wake: Wake) {
        let msg = match wake {
            Wake::Nothing => return,
            Wake::Schedule => TokenLedgerMsg::Schedule,
            Wake::Now => TokenLedgerMsg::Tick,
        };
        // A writer that is down is woken by its restart instead.
        let _ = self.ledger.send(msg);
    }

    /// Gives the `sam:` index a delivered (or refused) document: `sam:msg:<msg_id>` and its engrams read back.
    pub(crate) fn remember(&self, msg_id: String, doc: Arc<serde_json::Value>) {
        match &self.books {
            Some(books) => {
                if books.resolver.remember(msg_id, doc) {
                    let _ = self.resolver.send(ResolverMsg::Take);
                }
            }
            None => {
                if let Err(err) = self.resolver.send(ResolverMsg::Remember(msg_id, doc)) {
                    tracing::error!("resolver unavailable: {err}");
                }
            }
        }
    }

    /// The run's session in the archive: the run id and the mode.
    pub(crate) fn session(&self) -> String {
        format!("{}:{}", self.session_base, self.mode.as_str())
    }

    /// Archives a delivered message: queued for the summarizers, which take the queue in one transaction. Waits
    /// only when [`crate::dag::actor::ARCHIVE_BACKLOG`] messages are queued already.
    pub(crate) async fn archive(&self, from: &str, content: String) {
        let role = self.scenario.agent(from).map(|a| a.role.clone()).unwrap_or_else(|| from.to_owned());
        let message = crate::dag::NewMessage { role, content, name: Some(from.to_owned()), at: None };
        match &self.services {
            services::Services::Local { archive_queue, summarizers, .. } => {
                let (actor, generation) = summarizers.current();
                // The summarizers failed: the message stays queued, and their replacement takes the queue as it
                // starts. One that started before the message was queued is woken here.
                if archive_queue.push(message, &actor).await.is_err()
                    && summarizers.replaced_after(generation).await
                    && let Err(err) = summarizers.send(SummarizerMsg::RecordQueued(archive_queue.clone()))
                {
                    tracing::error!("the summarizers' replacement did not take the queue: {err}");
                }
            }
            services::Services::Remote { head } => {
                if let Err(err) = head.archive(message) {
                    tracing::error!(target: "less.cluster", "a message not archived: the head is unreachable: {err}");
                }
            }
        }
    }

    /// Who `agent` is to the memory: its role, the scenario's project, this run, the agents below it, whether it
    /// reads org and global engrams, and which scopes its role reads (the scenario's `[memory]`).
    pub(crate) fn principal(&self, agent: &str) -> Principal {
        let role = self.scenario.agent(agent).map(|a| a.role.clone()).unwrap_or_default();
        let memory = &self.scenario.memory;
        let mut principal = Principal::agent(agent, &role, &self.scenario.project, &self.run_id)
            .parent_of(self.scenario.descendants(agent))
            .reading(memory.reads.contains_key(&role).then(|| memory.reads_of(&role)));
        principal.shared = memory.shared_reads;
        principal
    }

    /// What the ledger holds now: every event, and a baseline's sent texts (for agents that start again from it).
    pub(crate) async fn kept(&self) -> Result<gateway::Kept, String> {
        let events = self.ledger.ask(TokenLedgerMsg::Snapshot).await.map_err(|e| e.to_string())?;
        let wire = match &self.books {
            Some(books) => books.ledger.wire_texts().await,
            None => Default::default(),
        };
        Ok(gateway::Kept { events, wire })
    }

    /// The run's time: the frozen clock, else the system's.
    pub(crate) fn now(&self) -> time::OffsetDateTime {
        self.clock.unwrap_or_else(time::OffsetDateTime::now_utc)
    }

    /// [`RunContext::now`] in RFC 3339, whole seconds.
    pub(crate) fn now_rfc3339(&self) -> String {
        let now = self.now();
        now.replace_nanosecond(0)
            .unwrap_or(now)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
    }

    /// A new message id for `agent`.
    pub(crate) async fn next_msg_id(&self, agent: &str) -> String {
        let n = self.next_msg_number(agent).await;
        format!("{agent}-m{n}")
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// Test support: runs `scenario` (TOML) over a scratch workspace holding `files` (name, text) with `factory`'s agents
/// in `mode`; the run's `ledger.jsonl`.
#[cfg(test)]
pub(crate) fn ledger_of_test_run(
    scenario: &str,
    files: &[(&str, String)],
    factory: Arc<dyn AgentFactory>,
    mode: WireMode,
) -> String {
    let workspace = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        std::fs::write(workspace.path().join(name), text).expect("write");
    }
    let scenario = Arc::new(Scenario::from_toml(scenario, workspace.path()).unwrap_or_else(|v| panic!("{v}")));
    let out = tempfile::tempdir().expect("out");
    let options = RunOptions { out_dir: Some(out.path().to_owned()), ..RunOptions::new(mode) };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(run_scenario(scenario, factory, options)).expect("run");
    std::fs::read_to_string(out.path().join("ledger.jsonl")).expect("ledger")
}

/// 32 bytes from the operating system's random source: a run's grant MAC key. Without one there is no key agents
/// cannot guess, so the run does not start (`LESS_RUN_FAILED`).
pub fn fresh_secret() -> Result<[u8; 32], Violation> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|err| {
        Violation::new(
            ErrorCode::RunFailed,
            "",
            format!("the operating system gave no random bytes for the run's grant key: {err}"),
        )
    })?;
    Ok(secret)
}
