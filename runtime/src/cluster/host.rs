//! A worker node: the node server and its host actor, which hosts agents (and their gateways) for the runs that
//! place them here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Actor, ActorProcessingErr, ActorRef, Message, RpcReplyPort};
use serde::{Deserialize, Serialize};

use super::serial::{answer, args, call, cast, parts, port, unknown};
use super::{CONNECT_TIMEOUT, HeadMsg, group, node_group, wait_for_group};
use crate::run::gateway::{GatewayActor, GatewayArgs, GatewayMsg};
use crate::run::ledger::TokenLedgerMsg;
use crate::run::resolver_actor::ResolverMsg;
use crate::run::services::Services;
use crate::run::slot::Slot;
use crate::run::{AgentFactory, Directory, RunContext};
use less_contract::{ClusterNode, Scenario, WireMode};

/// Makes the agents of a run hosted here (the binary's: scripted agents, or models).
pub type FactoryMaker = Arc<dyn Fn(&Scenario, &ModelDirs) -> Result<Arc<dyn AgentFactory>, String> + Send + Sync>;

/// Where the run's `llm` agents' model exchanges are recorded to or replayed from (`lessrt run --record DIR` /
/// `--replay DIR`), for the agents on nodes too: a node on the same machine (or sharing the directory) records into
/// it or answers from it as the head does. Neither: the models are asked live.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModelDirs {
    /// Record every exchange here.
    pub record: Option<PathBuf>,
    /// Answer from the exchanges recorded here, without a server.
    pub replay: Option<PathBuf>,
}

/// What a node needs to host agents of a run: the scenario as the head runs it, the run's identity and grant key,
/// and which agents are its own. Its `Debug` form leaves the grant key out.
#[derive(Clone, Serialize, Deserialize)]
pub struct HostSpec {
    /// The run id and mode (`<run>:<mode>`): the prefix of the run's groups.
    pub run_key: String,
    /// The run id.
    pub run_id: String,
    /// The run's session in the archive (without the mode).
    pub session_base: String,
    /// Wire mode.
    pub mode: WireMode,
    /// The scenario's TOML text and the directory its workspace is resolved against.
    pub scenario_toml: String,
    /// Where the scenario file is (the workspace is read by the head's resolver only).
    pub scenario_base: PathBuf,
    /// Every agent backed by a model (`--agents llm`).
    pub every_llm: bool,
    /// Every agent a model, without the scenario's steps and packs (`--agents llm-free`).
    #[serde(default)]
    pub delegated: bool,
    /// The request timeout of every `llm` agent (`--model-timeout`), if set.
    #[serde(default)]
    pub model_timeout: Option<u64>,
    /// The sampling temperature of every `llm` agent (`--temperature`), if set.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The cluster as the head runs it, and every agent's node.
    pub nodes: Vec<ClusterNode>,
    /// Agent → node, for every agent not on the head.
    pub placement: std::collections::BTreeMap<String, String>,
    /// The agents this node hosts.
    pub agents: Vec<String>,
    /// The head's node name: when it goes away, the node releases the run.
    pub head: String,
    /// The run's grant key: gateways on every node verify and issue the run's grants. It crosses only the
    /// authenticated node connection.
    pub secret: [u8; 32],
    /// The frozen clock of a recorded or replayed run (unix seconds).
    pub clock: Option<i64>,
    /// How many typed messages an agent's inbox keeps inline (`--inbox-cap`).
    #[serde(default = "default_inbox_cap")]
    pub inbox_cap: usize,
    /// How agents read what arrived while they were idle, and how messages are numbered (the head's).
    #[serde(default)]
    pub ordering: crate::run::Ordering,
    /// Agents moved here from a lost node: what the head's ledger holds, from which their gateways take back what
    /// they had (inbox, accepted grants and their spent uses, digests of what they read).
    #[serde(default)]
    pub(crate) restore: Option<crate::run::gateway::Kept>,
    /// Where the `llm` agents' exchanges are recorded or replayed (none: asked live).
    #[serde(default)]
    pub models: ModelDirs,
}

impl HostSpec {
    /// The scenario as the head runs it: the file's, with the agents the command line asked for (`--agents`,
    /// `--model-timeout`, `--temperature`) and the head's placement.
    pub(crate) fn scenario(&self) -> Result<Scenario, String> {
        let scenario = Scenario::from_toml(&self.scenario_toml, &self.scenario_base).map_err(|v| v.to_string())?;
        let scenario = match (self.delegated, self.every_llm) {
            (true, _) => scenario.delegated(),
            (false, true) => scenario.with_every_agent_llm(),
            (false, false) => scenario,
        };
        let scenario = scenario.with_model_settings(self.model_timeout, self.temperature);
        scenario.placed(self.nodes.clone(), &self.placement).map_err(|v| v.to_string())
    }
}

impl std::fmt::Debug for HostSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSpec")
            .field("run_key", &self.run_key)
            .field("run_id", &self.run_id)
            .field("mode", &self.mode)
            .field("scenario_base", &self.scenario_base)
            .field("nodes", &self.nodes)
            .field("placement", &self.placement)
            .field("agents", &self.agents)
            .field("head", &self.head)
            .field("secret", &"<redacted>")
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

fn default_inbox_cap() -> usize {
    crate::run::DEFAULT_INBOX_CAP
}

/// Messages to a node's host.
pub enum HostMsg {
    /// Host agents of a run: build its context (the head's ledger, resolver and bridge found by group), spawn a
    /// gateway per agent and join each to its group.
    Host(Box<HostSpec>, RpcReplyPort<Result<(), String>>),
    /// Fill the run's directory with the gateway of every agent of the run, wherever it is (again after a node was
    /// lost and its agents moved).
    Wire(String, RpcReplyPort<Result<(), String>>),
    /// Stop the run's gateways (and their agents).
    Release(String),
    /// A peer went away: release every run it heads (a head that died cannot release them itself).
    PeerLost(String),
    /// Answers at once.
    Ping(RpcReplyPort<()>),
}

impl Message for HostMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            HostMsg::Host(spec, reply) => call("Host", &spec, reply),
            HostMsg::Wire(run_key, reply) => call("Wire", &run_key, reply),
            HostMsg::Release(run_key) => cast("Release", &run_key),
            HostMsg::PeerLost(_) => Err(unknown("node host", "PeerLost")),
            HostMsg::Ping(reply) => call("Ping", &(), reply),
        }
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        let (variant, bytes, reply) = parts(message)?;
        Ok(match variant.as_str() {
            "Host" => HostMsg::Host(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Wire" => HostMsg::Wire(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Release" => HostMsg::Release(args(&variant, &bytes)?),
            "Ping" => HostMsg::Ping(answer(port(&variant, reply)?)),
            other => return Err(unknown("node host", other)),
        })
    }
}

/// The host actor of a node.
struct NodeHost;

/// A run hosted here.
struct HostedRun {
    head: String,
    ctx: Arc<RunContext>,
    gateways: Vec<ActorRef<GatewayMsg>>,
}

/// The host's state.
struct NodeHostState {
    name: String,
    server: ActorRef<ractor_cluster::NodeServerMessage>,
    factory: FactoryMaker,
    runs: HashMap<String, HostedRun>,
    /// How this node connects to the other nodes of a run (as the head connects to it).
    tls: Option<super::Tls>,
}

struct NodeHostArgs {
    name: String,
    server: ActorRef<ractor_cluster::NodeServerMessage>,
    factory: FactoryMaker,
    tls: Option<super::Tls>,
}

impl Actor for NodeHost {
    type Msg = HostMsg;
    type State = NodeHostState;
    type Arguments = NodeHostArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<HostMsg>,
        args: NodeHostArgs,
    ) -> Result<NodeHostState, ActorProcessingErr> {
        ractor::pg::join(node_group(&args.name), vec![myself.get_cell()]);
        Ok(NodeHostState {
            name: args.name,
            server: args.server,
            factory: args.factory,
            runs: HashMap::new(),
            tls: args.tls,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<HostMsg>,
        msg: HostMsg,
        state: &mut NodeHostState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            HostMsg::Host(spec, reply) => {
                let run_key = spec.run_key.clone();
                // The same run under another head (`lessrt run --resume` after the head died, before this node
                // noticed): what the dead head placed here goes.
                if state.runs.get(&run_key).is_some_and(|run| run.head != spec.head)
                    && let Some(old) = state.runs.remove(&run_key)
                {
                    for gateway in old.gateways {
                        gateway.stop(Some("the run was resumed under another head".to_owned()));
                    }
                }
                // A run hosted already takes the agents a lost node's failover moves here.
                let hosted = match state.runs.get_mut(&run_key) {
                    Some(run) => {
                        let restore = spec.restore.clone().map(Arc::new);
                        spawn_gateways(&run.ctx, &spec, restore).await.map(|gateways| run.gateways.extend(gateways))
                    }
                    None => state.host(*spec).await.map(|run| {
                        state.runs.insert(run_key.clone(), run);
                    }),
                };
                if let Err(err) = &hosted {
                    tracing::error!(target: "less.cluster", "{}: cannot host {run_key}: {err}", state.name);
                }
                let _ = reply.send(hosted);
            }
            HostMsg::Wire(run_key, reply) => {
                let answer = match state.runs.get(&run_key) {
                    Some(run) => wire(&run_key, &run.ctx).await,
                    None => Err(format!("{} hosts no run {run_key}", state.name)),
                };
                let _ = reply.send(answer);
            }
            HostMsg::Release(run_key) => {
                if let Some(run) = state.runs.remove(&run_key) {
                    for gateway in run.gateways {
                        gateway.stop(Some("the run ended".to_owned()));
                    }
                    tracing::info!(target: "less.cluster", "{}: released {run_key}", state.name);
                }
            }
            HostMsg::PeerLost(peer) => {
                let orphaned: Vec<String> =
                    state.runs.iter().filter(|(_, run)| run.head == peer).map(|(key, _)| key.clone()).collect();
                for key in orphaned {
                    if let Some(run) = state.runs.remove(&key) {
                        for gateway in run.gateways {
                            gateway.stop(Some("the run's head went away".to_owned()));
                        }
                        tracing::warn!(target: "less.cluster", "{}: released {key}: its head {peer} went away", state.name);
                    }
                }
            }
            HostMsg::Ping(reply) => {
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

impl NodeHostState {
    async fn host(&mut self, spec: HostSpec) -> Result<HostedRun, String> {
        let scenario = spec.scenario()?;
        // Other nodes this node's agents talk to: the lower name connects (the cluster's election settles a
        // simultaneous connect either way).
        for node in spec.nodes.iter().filter(|n| n.name > self.name) {
            if !ractor::pg::get_members(&node_group(&node.name)).is_empty() {
                continue;
            }
            let connected = super::tls::connect(&self.server, &node.addr, self.tls.as_ref()).await;
            if let Err(err) = connected {
                tracing::warn!(target: "less.cluster", "{}: cannot reach node {} at {}: {err}", self.name, node.name, node.addr);
            }
        }
        let find = |actor: &str| {
            let group = group(&spec.run_key, actor);
            async move { wait_for_group(&group, CONNECT_TIMEOUT).await.ok_or_else(|| format!("no {group} reachable")) }
        };
        let ledger: ActorRef<TokenLedgerMsg> = find("ledger").await?.into();
        let resolver: ActorRef<ResolverMsg> = find("resolver").await?.into();
        let head: ActorRef<HeadMsg> = find("head").await?.into();
        let factory = (self.factory)(&scenario, &spec.models)?;
        // The node searches its own copy of the workspace (the head's resolver reads it for derefs).
        let index = crate::workspace::SharedIndex::new(&scenario.workspace, None);
        let clock = match spec.clock {
            Some(at) => Some(time::OffsetDateTime::from_unix_timestamp(at).map_err(|e| e.to_string())?),
            None => None,
        };
        let ctx = Arc::new(RunContext {
            run_id: spec.run_id.clone(),
            session_base: spec.session_base.clone(),
            mode: spec.mode,
            scenario: Arc::new(scenario),
            secret: spec.secret,
            directory: Directory::default(),
            resolver: Slot::new(resolver),
            ledger: Slot::new(ledger),
            books: None,
            services: Services::Remote { head: Arc::new(super::head::Bridge(head)) },
            factory,
            clock,
            inbox_cap: spec.inbox_cap.max(1),
            workspace: index,
            ordering: spec.ordering,
        });
        let gateways = spawn_gateways(&ctx, &spec, spec.restore.clone().map(Arc::new)).await?;
        tracing::info!(target: "less.cluster", "{}: hosting {} of {}", self.name, spec.agents.join(", "), spec.run_key);
        Ok(HostedRun { head: spec.head.clone(), ctx, gateways })
    }
}

/// Spawns the gateways (and agents) of `spec.agents` in `ctx`, each taking back what `restore` says it had, and
/// puts them in their groups and the node's directory.
async fn spawn_gateways(
    ctx: &Arc<RunContext>,
    spec: &HostSpec,
    restore: Option<Arc<crate::run::gateway::Kept>>,
) -> Result<Vec<ActorRef<GatewayMsg>>, String> {
    let mut gateways = Vec::new();
    for agent in &spec.agents {
        let args = GatewayArgs { ctx: ctx.clone(), agent_id: agent.clone(), restore: restore.clone() };
        let (gateway, _) = Actor::spawn(None, GatewayActor, args).await.map_err(|e| format!("gateway {agent}: {e}"))?;
        ractor::pg::join(group(&spec.run_key, &format!("gateway:{agent}")), vec![gateway.get_cell()]);
        ctx.directory.insert(agent.clone(), gateway.clone());
        // Tests of a message in flight to a node that dies: this process aborts once `agent`'s gateway has
        // delivered its first message, before acknowledging it.
        #[cfg(any(test, feature = "faults"))]
        if restore.is_none() && std::env::var(FAULT_ABORT_AFTER_DELIVERY_TO).is_ok_and(|a| a == *agent) {
            let _ = gateway.send_message(GatewayMsg::FailAfterNextDelivery);
        }
        gateways.push(gateway);
    }
    Ok(gateways)
}

/// With the `faults` feature (the tests' build): the agent whose first delivery makes this node's process abort.
#[cfg(any(test, feature = "faults"))]
pub const FAULT_ABORT_AFTER_DELIVERY_TO: &str = "LESSRT_FAULT_ABORT_AFTER_DELIVERY_TO";

/// Fills `ctx`'s directory with every agent's gateway as the groups show it now.
pub(crate) async fn wire(run_key: &str, ctx: &RunContext) -> Result<(), String> {
    for agent in &ctx.scenario.agents {
        let group = group(run_key, &format!("gateway:{}", agent.id));
        let cell = wait_for_group(&group, CONNECT_TIMEOUT)
            .await
            .ok_or_else(|| format!("no gateway of {} reachable", agent.id))?;
        ctx.directory.insert(agent.id.clone(), cell.into());
    }
    Ok(())
}

/// A running node: its server's address and the actors to stop.
pub struct NodeHandle {
    /// The node's name.
    pub name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    server: ActorRef<ractor_cluster::NodeServerMessage>,
    host: ActorRef<HostMsg>,
}

impl NodeHandle {
    /// Stops the host (and every gateway it hosts) and the server.
    pub fn stop(self) {
        self.host.stop(None);
        self.server.stop(None);
    }
}

/// Starts a worker node: a `ractor_cluster` node server on `addr` with `cookie`, and its host actor. Port 0 picks a
/// free port, and the handle's `addr` says which.
pub async fn start_node(
    name: &str,
    addr: SocketAddr,
    cookie: String,
    factory: FactoryMaker,
    tls: Option<&super::Tls>,
) -> Result<NodeHandle, String> {
    // ractor_cluster binds the port it is given and does not say which one the system chose for port 0, so a free
    // one is chosen here (a port taken in between makes the server fail to start, with the error).
    let addr = if addr.port() == 0 {
        let probe = std::net::TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        probe.local_addr().map_err(|e| format!("the address bound on {addr}: {e}"))?
    } else {
        addr
    };
    let (lost_tx, mut lost_rx) = tokio::sync::mpsc::unbounded_channel();
    let server = super::head::node_server(name, addr, cookie, Some(lost_tx), Default::default(), tls).await?;
    let args = NodeHostArgs { name: name.to_owned(), server: server.clone(), factory, tls: tls.cloned() };
    let (host, _) = Actor::spawn(Some(format!("lessrt:node:{name}")), NodeHost, args)
        .await
        .map_err(|e| format!("node host: {e}"))?;
    let watcher = host.clone();
    tokio::spawn(async move {
        while let Some(peer) = lost_rx.recv().await {
            if watcher.send_message(HostMsg::PeerLost(peer)).is_err() {
                break;
            }
        }
    });
    Ok(NodeHandle { name: name.to_owned(), addr, server, host })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node rebuilds the scenario the head runs: `--agents llm-free` and `--model-timeout` reach its agents too.
    #[test]
    fn a_node_runs_the_scenario_as_the_command_line_changed_it() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let toml = std::fs::read_to_string(base.join("uc3-review-llm.toml")).expect("the scenario");
        let spec = HostSpec {
            run_key: "r:less".into(),
            run_id: "r".into(),
            session_base: "r".into(),
            mode: WireMode::Less,
            scenario_toml: toml,
            scenario_base: base,
            every_llm: false,
            delegated: true,
            model_timeout: Some(7),
            temperature: Some(0.7),
            nodes: Vec::new(),
            placement: Default::default(),
            agents: Vec::new(),
            head: "head".into(),
            secret: [0; 32],
            clock: None,
            inbox_cap: 16,
            ordering: Default::default(),
            restore: None,
            models: ModelDirs::default(),
        };
        let as_written = HostSpec { delegated: false, model_timeout: None, temperature: None, ..spec.clone() }
            .scenario()
            .expect("ok");
        let scenario = spec.scenario().expect("the scenario");
        assert!(!as_written.steps.is_empty());
        assert_ne!(
            scenario.steps.len(),
            as_written.steps.len(),
            "llm-free: the hierarchy's delegation, not the script"
        );
        assert!(scenario.agents.iter().all(|a| a.kind == less_contract::AgentKind::Llm));
        for agent in &scenario.agents {
            assert_eq!(agent.llm.as_ref().and_then(|l| l.timeout_secs), Some(7), "{}", agent.id);
            assert_eq!(agent.llm.as_ref().map(|l| l.temperature), Some(0.7), "{}", agent.id);
        }
    }
}
