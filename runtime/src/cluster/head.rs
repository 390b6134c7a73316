//! The head's side of a cluster run: its node server, the bridge nodes reach the run's shared services through,
//! placing agents on nodes, and moving the agents of a lost node.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Actor, ActorProcessingErr, ActorRef, Message, RpcReplyPort};
use tokio::sync::OnceCell;

use super::host::{HostMsg, HostSpec};
use super::serial::{answer, args, call, cast, parts, port, unknown};
use super::{CONNECT_TIMEOUT, SessionLog, group, node_group, wait_for_group};
use crate::coord::Claimed;
use crate::dag::NewMessage;
use crate::memory::QueryOptions;
use crate::run::gateway::{GatewayActor, GatewayArgs, GatewayMsg, Restored};
use crate::run::remote::{HeadServices, PlacedNodes, Placement, PromoteResult, RecallResult, RemoteFuture};
use crate::run::services::{
    MemoryFailure, PutAnswer, RecallAnswer, Services, claim_here, promote_here, put_here, recall_here, release_here,
};
use crate::run::wire::ClaimAction;
use crate::run::{Event, RunContext};
use less_contract::{ClusterNode, Engram, ErrorCode, HEAD_NODE, Scope, Valid, Violation};

/// Messages to the head's bridge: what a node asks of the run's shared services besides the ledger and resolver.
pub(crate) enum HeadMsg {
    /// The next message number of a sender (an agent, or `<agent>-gw`).
    NextId(String, RpcReplyPort<u64>),
    /// Archive a delivered message.
    Archive(Box<NewMessage>),
    /// Recall as an agent: (agent, text, options).
    Recall(Box<(String, String, QueryOptions)>, RpcReplyPort<Result<RecallAnswer, MemoryFailure>>),
    /// Promote as an agent: (agent, subject, scope).
    Promote(Box<(String, String, Scope)>, RpcReplyPort<Result<Option<String>, MemoryFailure>>),
    /// Put as an agent: (agent, engram). The engram is validated again as it is read.
    Put(Box<(String, Valid<Engram>)>, RpcReplyPort<Result<PutAnswer, MemoryFailure>>),
    /// Claim as an agent: (agent, claim).
    Claim(Box<(String, ClaimAction)>, RpcReplyPort<Result<Claimed, Violation>>),
    /// Release an agent's live claims: (agent, task).
    Release(Box<(String, Option<String>)>, RpcReplyPort<Result<Vec<String>, Violation>>),
    /// Answers once every message the node sent before it was taken (archived messages queued).
    Ack(RpcReplyPort<()>),
}

impl Message for HeadMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            HeadMsg::NextId(sender, reply) => call("NextId", &sender, reply),
            HeadMsg::Archive(message) => cast("Archive", &message),
            HeadMsg::Recall(request, reply) => call("Recall", &request, reply),
            HeadMsg::Promote(request, reply) => call("Promote", &request, reply),
            HeadMsg::Put(request, reply) => call("Put", &request, reply),
            HeadMsg::Claim(request, reply) => call("Claim", &request, reply),
            HeadMsg::Release(request, reply) => call("Release", &request, reply),
            HeadMsg::Ack(reply) => call("Ack", &(), reply),
        }
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        let (variant, bytes, reply) = parts(message)?;
        Ok(match variant.as_str() {
            "NextId" => HeadMsg::NextId(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Archive" => HeadMsg::Archive(args(&variant, &bytes)?),
            "Recall" => HeadMsg::Recall(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Promote" => HeadMsg::Promote(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Put" => HeadMsg::Put(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Claim" => HeadMsg::Claim(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Release" => HeadMsg::Release(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Ack" => HeadMsg::Ack(answer(port(&variant, reply)?)),
            other => return Err(unknown("head", other)),
        })
    }
}

/// The bridge actor.
pub(crate) struct HeadBridge;

impl Actor for HeadBridge {
    type Msg = HeadMsg;
    type State = Arc<RunContext>;
    type Arguments = Arc<RunContext>;

    async fn pre_start(
        &self,
        _myself: ActorRef<HeadMsg>,
        ctx: Arc<RunContext>,
    ) -> Result<Arc<RunContext>, ActorProcessingErr> {
        Ok(ctx)
    }

    async fn handle(
        &self,
        _myself: ActorRef<HeadMsg>,
        msg: HeadMsg,
        ctx: &mut Arc<RunContext>,
    ) -> Result<(), ActorProcessingErr> {
        let Services::Local { .. } = &ctx.services else {
            return Err("the head bridge runs on the head".into());
        };
        match msg {
            HeadMsg::NextId(sender, reply) => {
                let _ = reply.send(ctx.next_msg_number(&sender).await);
            }
            HeadMsg::Archive(message) => {
                let name = message.name.clone().unwrap_or_default();
                ctx.archive(&name, message.content).await;
            }
            // The memory calls wait in their own tasks, so one slow recall does not hold the ids and the archive.
            HeadMsg::Recall(request, reply) => {
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let (agent, text, options) = *request;
                    let _ = reply.send(recall_here(&ctx, &agent, text, options).await);
                });
            }
            HeadMsg::Promote(request, reply) => {
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let (agent, subject, to) = *request;
                    let _ = reply.send(promote_here(&ctx, &agent, subject, to).await);
                });
            }
            HeadMsg::Put(request, reply) => {
                let (agent, engram) = *request;
                let _ = reply.send(put_here(ctx, &agent, engram).await);
            }
            HeadMsg::Claim(request, reply) => {
                let (agent, claim) = *request;
                let _ = reply.send(claim_here(ctx, &agent, claim).await);
            }
            HeadMsg::Release(request, reply) => {
                let (agent, task) = *request;
                let _ = reply.send(release_here(ctx, &agent, task).await);
            }
            HeadMsg::Ack(reply) => {
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

/// The refusal of a claim or release the head's ledger could not be asked for.
fn unreached(err: &impl std::fmt::Display) -> Violation {
    Violation::new(ErrorCode::StoreFailed, "", format!("the head node's coordination ledger: {err}"))
}

/// The head's bridge as a worker node's run reaches it: its services for the node's agents.
pub(crate) struct Bridge(pub(crate) ActorRef<HeadMsg>);

impl HeadServices for Bridge {
    fn recall(&self, agent: String, text: String, options: QueryOptions) -> RemoteFuture<'_, RecallResult> {
        Box::pin(async move {
            match ractor::call!(self.0, HeadMsg::Recall, Box::new((agent, text, options))) {
                Ok(answer) => answer,
                Err(err) => Err(MemoryFailure::unavailable("the head node's memory", &err)),
            }
        })
    }

    fn promote(&self, agent: String, subject: String, to: Scope) -> RemoteFuture<'_, PromoteResult> {
        Box::pin(async move {
            match ractor::call!(self.0, HeadMsg::Promote, Box::new((agent, subject, to))) {
                Ok(answer) => answer,
                Err(err) => Err(MemoryFailure::unavailable("the head node's memory", &err)),
            }
        })
    }

    fn put(&self, agent: String, engram: Valid<Engram>) -> RemoteFuture<'_, Result<PutAnswer, MemoryFailure>> {
        Box::pin(async move {
            match ractor::call!(self.0, HeadMsg::Put, Box::new((agent, engram))) {
                Ok(answer) => answer,
                Err(err) => Err(MemoryFailure::unavailable("the head node's memory", &err)),
            }
        })
    }

    fn claim(&self, agent: String, claim: ClaimAction) -> RemoteFuture<'_, Result<Claimed, Violation>> {
        Box::pin(async move {
            ractor::call!(self.0, HeadMsg::Claim, Box::new((agent, claim))).unwrap_or_else(|err| Err(unreached(&err)))
        })
    }

    fn release(&self, agent: String, task: Option<String>) -> RemoteFuture<'_, Result<Vec<String>, Violation>> {
        Box::pin(async move {
            ractor::call!(self.0, HeadMsg::Release, Box::new((agent, task))).unwrap_or_else(|err| Err(unreached(&err)))
        })
    }

    fn next_id(&self, sender: String) -> RemoteFuture<'_, Result<u64, String>> {
        Box::pin(async move { ractor::call!(self.0, HeadMsg::NextId, sender).map_err(|e| e.to_string()) })
    }

    fn archive(&self, message: NewMessage) -> Result<(), String> {
        self.0.send_message(HeadMsg::Archive(Box::new(message))).map_err(|e| e.to_string())
    }

    fn ack(&self) -> RemoteFuture<'_, Result<(), String>> {
        Box::pin(async move { ractor::call!(self.0, HeadMsg::Ack).map_err(|e| e.to_string()) })
    }
}

/// What the head of a cluster run needs besides the scenario: the cookie, and the scenario as the nodes rebuild it.
/// `lessrt run` gives it to a run whose scenario places agents on nodes ([`crate::run::RunOptions::cluster`]).
#[derive(Clone)]
pub struct ClusterOptions {
    /// The nodes' shared secret (`--cookie-env`).
    pub cookie: String,
    /// The scenario file's text: each node rebuilds the scenario from it.
    pub scenario_toml: String,
    /// The scenario file's directory.
    pub scenario_base: std::path::PathBuf,
    /// Every agent backed by a model (`--agents llm`).
    pub every_llm: bool,
    /// Every agent a model, without the scenario's steps and packs (`--agents llm-free`).
    pub delegated: bool,
    /// The request timeout of every `llm` agent (`--model-timeout`), for the nodes' agents too.
    pub model_timeout: Option<u64>,
    /// The sampling temperature of every `llm` agent (`--temperature`), for the nodes' agents too.
    pub temperature: Option<f64>,
    /// How long a node may leave the head's heartbeats unanswered before it is lost (`--heartbeat-timeout`): a node
    /// that hangs with its connection open (stopped, or wedged) is treated like one that died.
    pub heartbeat_timeout: Duration,
    /// TLS to the nodes (`--tls-cert`, `--tls-key`, `--tls-ca`); without it, only nodes on loopback take agents.
    pub tls: Option<super::Tls>,
    /// Where the nodes' `llm` agents record or replay their model exchanges (`--record`, `--replay`).
    pub models: super::ModelDirs,
}

/// The default [`ClusterOptions::heartbeat_timeout`].
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);

impl Placement for ClusterOptions {
    fn start(
        &self,
        ctx: Arc<RunContext>,
        supervisor: ractor::ActorCell,
        clock: Option<i64>,
    ) -> RemoteFuture<'_, Result<Box<dyn PlacedNodes>, Violation>> {
        Box::pin(async move {
            let handle = ClusterHandle::start(ctx, self, supervisor, clock).await?;
            Ok(Box::new(handle) as Box<dyn PlacedNodes>)
        })
    }
}

impl PlacedNodes for ClusterHandle {
    fn move_lost(&self, supervisor: ractor::ActorCell) -> RemoteFuture<'_, Result<Vec<String>, Violation>> {
        Box::pin(ClusterHandle::move_lost(self, supervisor))
    }

    fn node_lost<'a>(&'a self, agent: &'a str, wait: Duration) -> RemoteFuture<'a, Option<String>> {
        Box::pin(ClusterHandle::node_lost(self, agent, wait))
    }

    fn fail_over<'a>(
        &'a self,
        node: &'a str,
        supervisor: ractor::ActorCell,
    ) -> RemoteFuture<'a, Result<Vec<String>, Violation>> {
        Box::pin(ClusterHandle::fail_over(self, node, supervisor))
    }

    fn release(&self) {
        ClusterHandle::release(self);
    }
}

/// The process's node server for runs it heads: one per process (node ids are per server, and the groups are the
/// process's), started on first use on loopback with the first run's cookie.
static HEAD_SERVER: OnceCell<HeadServer> = OnceCell::const_new();

struct HeadServer {
    server: ActorRef<ractor_cluster::NodeServerMessage>,
    /// Its node name (`head-<pid>-<nanos>`): the nodes release this head's runs when it goes away.
    name: String,
    cookie: String,
    lost: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

/// Starts a node server named `name` on `addr`; `lost` hears the names of authenticated peers that disconnect.
pub(crate) async fn node_server(
    name: &str,
    addr: SocketAddr,
    cookie: String,
    lost: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    refused: Arc<Mutex<Vec<String>>>,
    tls: Option<&super::Tls>,
) -> Result<ActorRef<ractor_cluster::NodeServerMessage>, String> {
    let encryption = tls.map(|tls| ractor_cluster::IncomingEncryptionMode::Tls(tls.acceptor()));
    let server = ractor_cluster::NodeServer::new(
        addr.port(),
        cookie,
        name.to_owned(),
        addr.ip().to_string(),
        encryption,
        Some(ractor_cluster::node::NodeConnectionMode::Isolated),
    )
    .with_listen_addr(addr.ip());
    let (server, _) = Actor::spawn(None, server, ()).await.map_err(|e| format!("node server: {e}"))?;
    let log = SessionLog { node: name.to_owned(), authenticated: Default::default(), lost, refused };
    server
        .cast(ractor_cluster::NodeServerMessage::SubscribeToEvents {
            id: "lessrt".to_owned(),
            subscription: Box::new(log),
        })
        .map_err(|e| format!("node server: {e}"))?;
    Ok(server)
}

/// A run's cluster, seen from its head.
pub struct ClusterHandle {
    run_key: String,
    ctx: Arc<RunContext>,
    spec: HostSpec,
    server: ActorRef<ractor_cluster::NodeServerMessage>,
    /// Nodes still in the run, by name (the heartbeat task pings them).
    live: Arc<Mutex<BTreeMap<String, ActorRef<HostMsg>>>>,
    lost: Mutex<HashSet<String>>,
    /// Nodes the heartbeat task declared lost (their connections closed), with how long each was silent.
    hung: Arc<Mutex<BTreeMap<String, Duration>>>,
    /// Why each lost node was lost, for the `restart` events of its agents.
    causes: Mutex<BTreeMap<String, String>>,
    heartbeat: tokio::task::JoinHandle<()>,
    bridge: ActorRef<HeadMsg>,
    n_moved: AtomicU64,
    /// Where each agent runs now: its node, or none for the head (agents of a lost node move).
    placed: Mutex<BTreeMap<String, Option<String>>>,
}

fn node_error(message: String) -> Violation {
    Violation::new(ErrorCode::NodeUnknown, "/cluster/nodes", message)
}

impl ClusterHandle {
    /// Connects to every node of `ctx`'s scenario, starts the bridge, and places the agents: the head's gateways
    /// (already spawned by the caller) join their groups, each node hosts its agents, and every directory is filled.
    pub(crate) async fn start(
        ctx: Arc<RunContext>,
        options: &ClusterOptions,
        supervisor: ractor::ActorCell,
        clock: Option<i64>,
    ) -> Result<ClusterHandle, Violation> {
        let ClusterOptions {
            cookie,
            scenario_toml,
            scenario_base,
            every_llm,
            delegated,
            model_timeout,
            temperature,
            heartbeat_timeout,
            tls,
            models,
        } = options.clone();
        let scenario = &ctx.scenario;
        let run_key = format!("{}:{}", ctx.run_id, ctx.mode.as_str());
        let head = HEAD_SERVER
            .get_or_try_init(|| async {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
                let refused = Arc::new(Mutex::new(Vec::new()));
                // Named per process: two heads running on one node at once are two peers, not one connecting twice.
                let nanos =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
                let name = format!("{HEAD_NODE}-{}-{nanos}", std::process::id());
                let server = node_server(&name, addr, cookie.clone(), Some(tx), refused.clone(), None).await?;
                Ok::<_, String>(HeadServer {
                    server,
                    name,
                    cookie: cookie.clone(),
                    lost: Mutex::new(Some(rx)),
                    refused,
                })
            })
            .await
            .map_err(|e| Violation::new(ErrorCode::RunFailed, "", e))?;
        if head.cookie != cookie {
            return Err(node_error("this process heads runs with another cookie already".to_owned()));
        }
        for node in &scenario.cluster {
            if !ractor::pg::get_members(&node_group(&node.name)).is_empty() {
                continue;
            }
            super::tls::connect(&head.server, &node.addr, tls.as_ref()).await.map_err(|e| match e {
                super::tls::ConnectError::NeedsTls(why) => node_error(format!("node {}: {why}", node.name)),
                super::tls::ConnectError::Failed(e) => node_error(format!(
                    "cannot connect to node {} at {}: {e}: is `lessrt node --name {} --listen {}` running{}?",
                    node.name,
                    node.addr,
                    node.name,
                    node.addr,
                    if tls.is_some() { " with TLS from the same CA" } else { "" }
                )),
            })?;
        }
        let mut live = BTreeMap::new();
        for node in &scenario.cluster {
            let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
            let host = loop {
                if let Some(host) = wait_for_group(&node_group(&node.name), Duration::ZERO).await {
                    break host;
                }
                let refused =
                    head.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&node.addr);
                if refused || tokio::time::Instant::now() >= deadline {
                    return Err(node_error(format!(
                        "node {} at {} {}: check that it runs with the run's cookie (`lessrt node --cookie-env`)",
                        node.name,
                        node.addr,
                        if refused {
                            "refused the cookie handshake".to_owned()
                        } else {
                            format!("did not join within {}s", CONNECT_TIMEOUT.as_secs())
                        }
                    )));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            live.insert(node.name.clone(), ActorRef::<HostMsg>::from(host));
        }
        let (bridge, _) = Actor::spawn_linked(Some(format!("{run_key}:head")), HeadBridge, ctx.clone(), supervisor)
            .await
            .map_err(|e| Violation::new(ErrorCode::RunFailed, "", format!("head bridge: {e}")))?;
        ractor::pg::join(group(&run_key, "head"), vec![bridge.get_cell()]);
        ractor::pg::join(group(&run_key, "ledger"), vec![ctx.ledger.get().get_cell()]);
        ractor::pg::join(group(&run_key, "resolver"), vec![ctx.resolver.get().get_cell()]);
        for agent in scenario.agents.iter().filter(|a| a.node.is_none()) {
            if let Some(gateway) = ctx.directory.get(&agent.id) {
                ractor::pg::join(group(&run_key, &format!("gateway:{}", agent.id)), vec![gateway.get_cell()]);
            }
        }
        let placement: BTreeMap<String, String> =
            scenario.agents.iter().filter_map(|a| Some((a.id.clone(), a.node.clone()?))).collect();
        let spec = HostSpec {
            run_key: run_key.clone(),
            run_id: ctx.run_id.clone(),
            session_base: ctx.session_base.clone(),
            mode: ctx.mode,
            scenario_toml,
            scenario_base,
            every_llm,
            delegated,
            model_timeout,
            temperature,
            nodes: scenario.cluster.clone(),
            placement: placement.clone(),
            agents: Vec::new(),
            head: head.name.clone(),
            secret: ctx.secret,
            clock,
            inbox_cap: ctx.inbox_cap,
            ordering: ctx.ordering,
            restore: None,
            models,
        };
        // A resumed run's ledger holds what its agents had: the nodes' gateways take it back as the head's did.
        let kept = ctx.kept().await.map_err(|e| Violation::new(ErrorCode::RunFailed, "", format!("ledger: {e}")))?;
        let restore = kept.events.iter().any(|e| matches!(e, Event::Resumed { .. })).then_some(kept);
        let live = Arc::new(Mutex::new(live));
        let hung = Arc::new(Mutex::new(BTreeMap::new()));
        let heartbeat = tokio::spawn(heartbeats(head.server.clone(), live.clone(), hung.clone(), heartbeat_timeout));
        let cluster = ClusterHandle {
            run_key,
            ctx: ctx.clone(),
            spec,
            server: head.server.clone(),
            live,
            lost: Mutex::new(HashSet::new()),
            hung,
            causes: Mutex::new(BTreeMap::new()),
            heartbeat,
            bridge,
            n_moved: AtomicU64::new(0),
            placed: Mutex::new(scenario.agents.iter().map(|a| (a.id.clone(), a.node.clone())).collect()),
        };
        for node in &scenario.cluster {
            let agents: Vec<String> =
                placement.iter().filter(|(_, n)| *n == &node.name).map(|(a, _)| a.clone()).collect();
            let host = cluster.host(&node.name).ok_or_else(|| node_error(format!("node {} is gone", node.name)))?;
            let spec = HostSpec { agents, restore: restore.clone(), ..cluster.spec.clone() };
            match host.call(|reply| HostMsg::Host(Box::new(spec), reply), Some(CONNECT_TIMEOUT)).await {
                Ok(ractor::rpc::CallResult::Success(Ok(()))) => {}
                Ok(ractor::rpc::CallResult::Success(Err(err))) => {
                    return Err(node_error(format!("node {} cannot host its agents: {err}", node.name)));
                }
                other => return Err(node_error(format!("node {} did not answer: {other:?}", node.name))),
            }
        }
        cluster.wire_all().await?;
        Ok(cluster)
    }

    fn host(&self, node: &str) -> Option<ActorRef<HostMsg>> {
        self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(node).cloned()
    }

    /// Fills every directory (the head's and each live node's) from the groups.
    async fn wire_all(&self) -> Result<(), Violation> {
        super::host::wire(&self.run_key, &self.ctx).await.map_err(|e| Violation::new(ErrorCode::RunFailed, "", e))?;
        let hosts: Vec<(String, ActorRef<HostMsg>)> = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(n, h)| (n.clone(), h.clone()))
            .collect();
        for (name, host) in hosts {
            let key = self.run_key.clone();
            match host.call(|reply| HostMsg::Wire(key, reply), Some(CONNECT_TIMEOUT)).await {
                Ok(ractor::rpc::CallResult::Success(Ok(()))) => {}
                Ok(ractor::rpc::CallResult::Success(Err(err))) => {
                    return Err(Violation::new(ErrorCode::RunFailed, "", format!("node {name}: {err}")));
                }
                // A node lost while wiring is dealt with by the next failover.
                other => tracing::warn!(target: "less.cluster", "node {name} did not wire: {other:?}"),
            }
        }
        Ok(())
    }

    /// The nodes reported lost since the last call (by the head's node server, or by the heartbeats).
    fn take_lost(&self) -> Vec<String> {
        let hung: Vec<(String, Duration)> =
            std::mem::take(&mut *self.hung.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
                .into_iter()
                .collect();
        let mut causes = self.causes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (name, silent) in &hung {
            causes.insert(name.clone(), format!("no heartbeat answered for {:.1} s", silent.as_secs_f64()));
        }
        drop(causes);
        let mut names: Vec<String> = hung.into_iter().map(|(name, _)| name).collect();
        let Some(head) = HEAD_SERVER.get() else { return names };
        let mut guard = head.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(rx) = guard.as_mut() {
            while let Ok(name) = rx.try_recv() {
                names.push(name);
            }
        }
        names
    }

    /// Moves the agents of every node lost since the last look (before a step: a node may die between turns).
    pub(crate) async fn move_lost(&self, supervisor: ractor::ActorCell) -> Result<Vec<String>, Violation> {
        let newly = self.take_lost();
        self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(newly);
        let lost: Vec<String> =
            self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect();
        let mut moved = Vec::new();
        for node in lost {
            if !self.agents_on(&node).is_empty() {
                moved.extend(self.fail_over(&node, supervisor.clone()).await?);
            }
        }
        Ok(moved)
    }

    /// Whether `agent`'s node is lost, waiting up to `wait` for the head's server to notice.
    pub(crate) async fn node_lost(&self, agent: &str, wait: Duration) -> Option<String> {
        let node = self.placed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(agent).cloned()??;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let newly = self.take_lost();
            self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(newly);
            if self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&node) {
                return Some(node);
            }
            let host_alive = self.host(&node).is_some_and(|h| h.get_status() == ractor::ActorStatus::Running);
            if !host_alive {
                return Some(node);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The agents that run on `node` now.
    fn agents_on(&self, node: &str) -> Vec<String> {
        let placed = self.placed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.ctx
            .scenario
            .agents
            .iter()
            .filter(|a| placed.get(&a.id).is_some_and(|n| n.as_deref() == Some(node)))
            .map(|a| a.id.clone())
            .collect()
    }

    /// The live worker node with the fewest agents now (ties: the first by name), if any.
    fn least_loaded(&self) -> Option<(String, ActorRef<HostMsg>)> {
        let live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let placed = self.placed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let load = |node: &str| placed.values().filter(|n| n.as_deref() == Some(node)).count();
        live.into_iter().min_by_key(|(name, _)| (load(name), name.clone()))
    }

    /// Moves every agent of the lost `node` to the live worker node with the fewest agents, or to the head when no
    /// worker is left: a fresh gateway (and agent) each, a `restart` event each in the ledger, and every directory
    /// rewired. The new gateway takes again what the ledger says was delivered to the agent (its inbox, the grants
    /// it accepted and the uses of them it spent, what it dereferenced).
    pub(crate) async fn fail_over(&self, node: &str, supervisor: ractor::ActorCell) -> Result<Vec<String>, Violation> {
        self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(node);
        let cause = self
            .causes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(node)
            .cloned()
            .unwrap_or_else(|| "its connection closed".to_owned());
        let agents = self.agents_on(node);
        // Everything acknowledged before the loss is in the ledger (a node settles before it acknowledges).
        let kept =
            self.ctx.kept().await.map_err(|e| Violation::new(ErrorCode::RunFailed, "", format!("ledger: {e}")))?;
        if let Some((target, host)) = self.least_loaded() {
            match self.move_to_node(&agents, &target, &host, kept.clone()).await {
                Ok(()) => {
                    for agent in &agents {
                        self.ctx.record(Event::Restart {
                            agent: agent.clone(),
                            reason: format!("node {node} was lost ({cause}); {agent} restarted on node {target}"),
                        });
                    }
                    self.wire_all().await?;
                    return Ok(agents);
                }
                Err(err) => {
                    tracing::warn!(target: "less.cluster", "node {target} did not take the agents of {node}: {err}; they move to the head");
                }
            }
        }
        for agent in &agents {
            let args = GatewayArgs { ctx: self.ctx.clone(), agent_id: agent.clone(), restore: None };
            let n = self.n_moved.fetch_add(1, Ordering::Relaxed);
            let (gateway, _) = Actor::spawn_linked(
                Some(format!("{}:gateway:{agent}:moved{n}", self.run_key)),
                GatewayActor,
                args,
                supervisor.clone(),
            )
            .await
            .map_err(|e| Violation::new(ErrorCode::RunFailed, "", format!("gateway {agent}: {e}")))?;
            // The lost node's member leaves the group when its session closes; the new one joins now.
            let group = group(&self.run_key, &format!("gateway:{agent}"));
            let stale: Vec<ractor::ActorCell> =
                ractor::pg::get_members(&group).into_iter().filter(|c| !c.get_id().is_local()).collect();
            if !stale.is_empty() {
                ractor::pg::leave(group.clone(), stale);
            }
            ractor::pg::join(group, vec![gateway.get_cell()]);
            // What was delivered to the agent is in the ledger: it comes back to the new gateway (the agent's inbox,
            // accepted grants and the uses of them it spent, and what it dereferenced).
            let restored = Box::new(Restored::from_kept(&kept, agent));
            match ractor::call!(gateway, GatewayMsg::Restore, restored) {
                Ok(n) => {
                    tracing::info!(target: "less.cluster", "{agent}: {n} delivered documents restored from the ledger")
                }
                Err(err) => tracing::warn!(target: "less.cluster", "{agent}: nothing restored: {err}"),
            }
            self.ctx.directory.insert(agent.clone(), gateway);
            self.placed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(agent.clone(), None);
            self.ctx.record(Event::Restart {
                agent: agent.clone(),
                reason: format!("node {node} was lost ({cause}); {agent} restarted on the head"),
            });
        }
        self.wire_all().await?;
        Ok(agents)
    }

    /// Hosts `agents` on the live node `target`, each gateway taking back what `kept` says its agent had; the lost
    /// node's members leave the agents' groups first, so every directory finds the new gateways.
    async fn move_to_node(
        &self,
        agents: &[String],
        target: &str,
        host: &ActorRef<HostMsg>,
        kept: crate::run::gateway::Kept,
    ) -> Result<(), String> {
        for agent in agents {
            let group = group(&self.run_key, &format!("gateway:{agent}"));
            let stale = ractor::pg::get_members(&group);
            if !stale.is_empty() {
                ractor::pg::leave(group, stale);
            }
        }
        let mut placement = self.spec.placement.clone();
        for agent in agents {
            placement.insert(agent.clone(), target.to_owned());
        }
        let spec = HostSpec { agents: agents.to_vec(), placement, restore: Some(kept), ..self.spec.clone() };
        match host.call(|reply| HostMsg::Host(Box::new(spec), reply), Some(CONNECT_TIMEOUT)).await {
            Ok(ractor::rpc::CallResult::Success(Ok(()))) => {}
            Ok(ractor::rpc::CallResult::Success(Err(err))) => return Err(err),
            other => return Err(format!("no answer: {other:?}")),
        }
        let mut placed = self.placed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for agent in agents {
            placed.insert(agent.clone(), Some(target.to_owned()));
        }
        Ok(())
    }

    /// Tells every live node the run is over (its gateways stop) and leaves the run's groups.
    pub(crate) fn release(&self) {
        let hosts: Vec<ActorRef<HostMsg>> =
            self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
        for host in hosts {
            let _ = host.send_message(HostMsg::Release(self.run_key.clone()));
        }
        self.heartbeat.abort();
        self.bridge.stop(None);
        let _ = &self.server;
    }
}

impl Drop for ClusterHandle {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// Pings every live node's host a few times per `timeout`; a node whose last answer is older than `timeout` is lost:
/// its connection is closed (so its agents' calls end at once, and a node that wakes up again finds itself out of
/// the run) and its name goes into `hung`, where the run's next look for lost nodes finds it.
async fn heartbeats(
    server: ActorRef<ractor_cluster::NodeServerMessage>,
    live: Arc<Mutex<BTreeMap<String, ActorRef<HostMsg>>>>,
    hung: Arc<Mutex<BTreeMap<String, Duration>>>,
    timeout: Duration,
) {
    let interval = (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut answered: BTreeMap<String, tokio::time::Instant> = BTreeMap::new();
    loop {
        tokio::time::sleep(interval).await;
        let hosts: Vec<(String, ActorRef<HostMsg>)> = live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(n, h)| (n.clone(), h.clone()))
            .collect();
        let now = tokio::time::Instant::now();
        answered.retain(|name, _| hosts.iter().any(|(n, _)| n == name));
        let mut pings = tokio::task::JoinSet::new();
        for (name, host) in hosts {
            pings.spawn(async move {
                let answer = host.call(HostMsg::Ping, Some(interval)).await;
                (name, matches!(answer, Ok(ractor::rpc::CallResult::Success(()))))
            });
        }
        while let Some(Ok((name, ok))) = pings.join_next().await {
            let last = answered.entry(name.clone()).or_insert(now);
            if ok {
                *last = tokio::time::Instant::now();
                continue;
            }
            if last.elapsed() < timeout {
                continue;
            }
            tracing::warn!(
                target: "less.cluster",
                "node {name} answered no heartbeat for {:.1} s (the limit is {:.1} s): it is lost; its connection is closed",
                last.elapsed().as_secs_f64(),
                timeout.as_secs_f64()
            );
            let silent = last.elapsed();
            live.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&name);
            answered.remove(&name);
            disconnect(&server, &name).await;
            hung.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name, silent);
        }
    }
}

/// Closes the head's sessions with node `name` (ractor_cluster names a peer `name@host`).
async fn disconnect(server: &ActorRef<ractor_cluster::NodeServerMessage>, name: &str) {
    let sessions = match ractor::call!(server, ractor_cluster::NodeServerMessage::GetSessions) {
        Ok(sessions) => sessions,
        Err(err) => {
            tracing::error!(target: "less.cluster", "the head's node server did not list its sessions: {err}");
            return;
        }
    };
    for session in sessions.into_values() {
        let peer = session.peer_name.as_ref().map(|n| n.name.as_str()).unwrap_or_default();
        if peer.split('@').next() == Some(name) {
            session.actor.stop(Some(format!("node {name} answered no heartbeat")));
        }
    }
}

/// A cluster file (`lessrt run --cluster FILE`): the nodes, and where agents go.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// The nodes.
    pub nodes: Vec<ClusterNode>,
    /// Agent → node (`head` for the head); overrides the scenario's `node`s.
    #[serde(default)]
    pub placement: BTreeMap<String, String>,
}
