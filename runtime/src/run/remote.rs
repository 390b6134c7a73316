//! What a run needs of other processes, as traits the run defines and the cluster implements: the run never names
//! how nodes are reached (`crate::cluster` adapts the run, not the reverse).
//!
//! - [`HeadServices`]: on a worker node, the run's shared services that live on the head (the memory, the archive,
//!   the message counter, the coordination ledger), as [`crate::run::services::Services::Remote`] reaches them.
//! - [`Placement`] and [`PlacedNodes`]: on the head, starting the nodes a scenario places agents on, and moving the
//!   agents of a node that was lost.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::coord::Claimed;
use crate::dag::NewMessage;
use crate::memory::QueryOptions;
use crate::run::RunContext;
use crate::run::services::{MemoryFailure, PutAnswer, RecallAnswer};
use crate::run::wire::ClaimAction;
use less_contract::{Engram, Scope, Valid, Violation};

/// A boxed future, so the traits stay object-safe.
pub type RemoteFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The head's shared services as a worker node reaches them. Every call answers as the head's own services would
/// answer an agent of the head ([`crate::run::services`]); a head that cannot be reached is a `MemoryFailure`
/// (unavailable), never a hang past the link's timeouts.
pub(crate) trait HeadServices: Send + Sync + 'static {
    /// Recall as `agent`.
    fn recall(&self, agent: String, text: String, options: QueryOptions) -> RemoteFuture<'_, RecallResult>;
    /// Promote `agent`'s engram on `subject` to `to`: the id promoted, if any.
    fn promote(&self, agent: String, subject: String, to: Scope) -> RemoteFuture<'_, PromoteResult>;
    /// Put `engram` as `agent`.
    fn put(&self, agent: String, engram: Valid<Engram>) -> RemoteFuture<'_, Result<PutAnswer, MemoryFailure>>;
    /// Claim as `agent` in the run's coordination ledger.
    fn claim(&self, agent: String, claim: ClaimAction) -> RemoteFuture<'_, Result<Claimed, Violation>>;
    /// Release `agent`'s live claims (for `task`, or all): the ids released.
    fn release(&self, agent: String, task: Option<String>) -> RemoteFuture<'_, Result<Vec<String>, Violation>>;
    /// The next number of `sender`'s messages (an agent, or `<agent>-gw`), or why there is none.
    fn next_id(&self, sender: String) -> RemoteFuture<'_, Result<u64, String>>;
    /// Archives a delivered message (sent in order with everything else this node sends the head).
    fn archive(&self, message: NewMessage) -> Result<(), String>;
    /// Answers once the head took every message this node sent it before.
    fn ack(&self) -> RemoteFuture<'_, Result<(), String>>;
}

/// What a recall answers.
pub(crate) type RecallResult = Result<RecallAnswer, MemoryFailure>;
/// What a promotion answers.
pub(crate) type PromoteResult = Result<Option<String>, MemoryFailure>;

/// How a run on the head reaches the nodes its scenario places agents on (`[cluster]`); `lessrt run` gives one
/// ([`crate::cluster::ClusterOptions`]) when the scenario places agents.
pub trait Placement: Send + Sync + 'static {
    /// Connects to the scenario's nodes and places `ctx`'s agents on them; the head's own gateways (spawned already,
    /// under `supervisor`) join the run's groups. `clock`: the run's pinned clock (UNIX seconds), for the nodes.
    fn start(
        &self,
        ctx: Arc<RunContext>,
        supervisor: ractor::ActorCell,
        clock: Option<i64>,
    ) -> RemoteFuture<'_, Result<Box<dyn PlacedNodes>, Violation>>;
}

/// A run's started nodes, as its driver uses them.
pub trait PlacedNodes: Send + Sync {
    /// Moves the agents of every node lost since the last look (before a step: a node may die between turns); the
    /// agents moved.
    fn move_lost(&self, supervisor: ractor::ActorCell) -> RemoteFuture<'_, Result<Vec<String>, Violation>>;
    /// Whether `agent`'s node is lost, waiting up to `wait` to notice: the node's name if it is.
    fn node_lost<'a>(&'a self, agent: &'a str, wait: Duration) -> RemoteFuture<'a, Option<String>>;
    /// Moves every agent of the lost `node` (restored from the head's ledger); the agents moved.
    fn fail_over<'a>(
        &'a self,
        node: &'a str,
        supervisor: ractor::ActorCell,
    ) -> RemoteFuture<'a, Result<Vec<String>, Violation>>;
    /// The run is over: the nodes may drop what they host for it.
    fn release(&self);
}
