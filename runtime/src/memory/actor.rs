//! The `MemoryActor`: one [`Memory`] served to a run as messages (put, query, get, promote, supersede, evict, stats)
//! with RPC replies.
//!
//! SQLite and tantivy block, so the actor never touches the memory on the async executor: each message moves the
//! memory onto the blocking pool and back (`crate::blocking::with_taken`). This works on a multi-threaded and a current-thread runtime
//! alike, and the actor still handles one message at a time, so every reply reflects every earlier message.
//! Expected failures (`LESS_SCOPE_DENIED`, `LESS_RATE_LIMITED`) and failures of the store are values in the reply;
//! the actor fails only when a blocking task panicked and took the memory with it.
//!
//! The clock is injected ([`Clock`]): tests drive rate limits and TTLs without sleeping.
//!
//! TTLs: a query never returns an engram whose TTL ran out (the query carries the clock's time), and the actor moves
//! such engrams to the cold tier on a schedule: before any message once [`MemoryArgs::sweep_every`] seconds of the
//! clock passed since the last sweep, and on a timer of the same period while the actor is idle.
//! Shutdown: `post_stop` closes the memory on a blocking thread (saving the indexes), then removes the directory
//! when the run asked for a scratch store.

use std::path::PathBuf;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::blocking;
use crate::memory::policy::{MemoryPolicy, Principal, PutReport, QueryOptions};
use crate::memory::store::{StoreStats, Stored};
use crate::memory::{Memory, MemoryError, Recall};
use less_contract::Valid;
use less_contract::{Engram, Scope};

/// The time in unix seconds.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| time::OffsetDateTime::now_utc().unix_timestamp())
}

/// An engram named by id or by subject key (the newest hot engram of that subject the caller reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngramRef {
    /// By id.
    Id(String),
    /// By subject key (`subject:<key>` tag).
    Subject(String),
}

/// The actor.
pub struct MemoryActor;

/// What the actor starts from.
pub struct MemoryArgs {
    /// The store directory (created if needed).
    pub dir: PathBuf,
    /// Limits (promotion floor, rate limit).
    pub policy: MemoryPolicy,
    /// The clock.
    pub clock: Clock,
    /// Remove `dir` when the actor stops (a scratch store).
    pub remove_on_stop: bool,
    /// Seconds between sweeps of expired engrams to the cold tier (at least 1; [`DEFAULT_SWEEP_SECS`] by default).
    pub sweep_every: i64,
}

/// The default period of the sweep of expired engrams, in seconds.
pub const DEFAULT_SWEEP_SECS: i64 = 60;

impl MemoryArgs {
    /// A store in `dir` with the default policy and sweep period.
    pub fn new(dir: PathBuf, clock: Clock, remove_on_stop: bool) -> MemoryArgs {
        MemoryArgs { dir, policy: MemoryPolicy::default(), clock, remove_on_stop, sweep_every: DEFAULT_SWEEP_SECS }
    }
}

/// A put.
#[derive(Debug, Clone)]
pub struct PutRequest {
    /// Who writes.
    pub who: Principal,
    /// The engram.
    pub engram: Valid<Engram>,
    /// Into which of the writer's projects.
    pub project: String,
}

/// A query.
#[derive(Debug, Clone)]
pub struct QueryRequest {
    /// Who asks.
    pub who: Principal,
    /// The question.
    pub text: String,
    /// How.
    pub options: QueryOptions,
}

/// A promotion.
#[derive(Debug, Clone)]
pub struct PromoteRequest {
    /// Who promotes.
    pub who: Principal,
    /// Which engram.
    pub target: EngramRef,
    /// To which scope.
    pub to: Scope,
}

/// An explicit supersession.
#[derive(Debug, Clone)]
pub struct SupersedeRequest {
    /// Who supersedes.
    pub who: Principal,
    /// The engram replaced.
    pub old: String,
    /// Its replacement.
    pub new: String,
}

/// Messages to the memory actor.
pub enum MemoryMsg {
    /// Store an engram (access rules, rate limit, dedup, supersession, contradiction).
    Put(Box<PutRequest>, RpcReplyPort<Result<PutReport, MemoryError>>),
    /// Recall what the caller may read.
    Query(Box<QueryRequest>, RpcReplyPort<Result<Recall, MemoryError>>),
    /// One engram by id, hot or cold.
    Get(Principal, String, RpcReplyPort<Result<Option<Stored>, MemoryError>>),
    /// Widen an engram's scope (none in the reply: no such engram).
    Promote(Box<PromoteRequest>, RpcReplyPort<Result<Option<Stored>, MemoryError>>),
    /// Replace one engram by another (false: one is missing).
    Supersede(Box<SupersedeRequest>, RpcReplyPort<Result<bool, MemoryError>>),
    /// Move one engram to the cold tier (false: missing or already cold).
    Evict(Principal, String, RpcReplyPort<Result<bool, MemoryError>>),
    /// Move every engram whose TTL ran out to the cold tier; how many moved.
    EvictExpired(RpcReplyPort<Result<usize, MemoryError>>),
    /// Counts by tier and kind (engrams past their TTL count as cold).
    Stats(RpcReplyPort<Result<StoreStats, MemoryError>>),
    /// The sweep timer: moves expired engrams to the cold tier if the period passed (no reply).
    Sweep,
    /// Panics on purpose (tests of the run supervisor's restart).
    #[cfg(any(test, feature = "faults"))]
    Fail,
}

/// Mutable state: the memory (absent only while a blocking task holds it).
pub struct MemoryState {
    memory: Option<Memory>,
    clock: Clock,
    dir: PathBuf,
    remove_on_stop: bool,
    sweep_every: i64,
    /// The clock's time of the next sweep.
    next_sweep: i64,
}

impl Actor for MemoryActor {
    type Msg = MemoryMsg;
    type State = MemoryState;
    type Arguments = MemoryArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<MemoryMsg>,
        args: MemoryArgs,
    ) -> Result<MemoryState, ActorProcessingErr> {
        let dir = args.dir.clone();
        let policy = args.policy;
        let memory = blocking::run(move || {
            Memory::open(&dir).map(|mut memory| {
                memory.set_policy(policy);
                memory
            })
        })
        .await??;
        Ok(MemoryState {
            memory: Some(memory),
            clock: args.clock,
            dir: args.dir,
            remove_on_stop: args.remove_on_stop,
            sweep_every: args.sweep_every.max(1),
            next_sweep: i64::MIN,
        })
    }

    async fn post_start(&self, myself: ActorRef<MemoryMsg>, state: &mut MemoryState) -> Result<(), ActorProcessingErr> {
        // The timer only wakes an idle actor; whether a sweep is due is decided by the injected clock.
        let period = std::time::Duration::from_secs(u64::try_from(state.sweep_every).unwrap_or(1));
        myself.send_interval(period, || MemoryMsg::Sweep);
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<MemoryMsg>,
        msg: MemoryMsg,
        state: &mut MemoryState,
    ) -> Result<(), ActorProcessingErr> {
        // A reply port whose caller gave up is not an error of the memory: the work is done either way.
        match msg {
            MemoryMsg::Put(request, reply) => {
                let result = state
                    .blocking(move |memory, now| memory.put_as(&request.who, &request.engram, &request.project, now))
                    .await?;
                let _ = reply.send(result);
            }
            MemoryMsg::Query(request, reply) => {
                let result = state
                    .blocking(move |memory, now| {
                        let options = QueryOptions { now: request.options.now.or(Some(now)), ..request.options };
                        memory.query_as(&request.who, &request.text, &options)
                    })
                    .await?;
                let _ = reply.send(result);
            }
            MemoryMsg::Get(who, id, reply) => {
                let result = state.blocking(move |memory, _| memory.get_as(&who, &id)).await?;
                let _ = reply.send(result);
            }
            MemoryMsg::Promote(request, reply) => {
                let result = state
                    .blocking(move |memory, _| {
                        let id = match &request.target {
                            EngramRef::Id(id) => Some(id.clone()),
                            EngramRef::Subject(subject) => {
                                memory.find_subject(&request.who, subject)?.map(|s| s.engram.id)
                            }
                        };
                        match id {
                            Some(id) => memory.promote(&request.who, &id, request.to),
                            None => Ok(None),
                        }
                    })
                    .await?;
                let _ = reply.send(result);
            }
            MemoryMsg::Supersede(request, reply) => {
                let result = state
                    .blocking(move |memory, _| memory.supersede_as(&request.who, &request.old, &request.new))
                    .await?;
                let _ = reply.send(result);
            }
            MemoryMsg::Evict(who, id, reply) => {
                let result = state.blocking(move |memory, _| memory.evict_as(&who, &id)).await?;
                let _ = reply.send(result);
            }
            MemoryMsg::EvictExpired(reply) => {
                let result = state.blocking(|memory, now| memory.evict_expired(now)).await?;
                let _ = reply.send(result);
            }
            MemoryMsg::Stats(reply) => {
                let result = state.blocking(|memory, now| memory.stats_at(now)).await?;
                let _ = reply.send(result);
            }
            // `blocking` sweeps when the period passed.
            MemoryMsg::Sweep => state.blocking(|_, _| ()).await?,
            #[cfg(any(test, feature = "faults"))]
            MemoryMsg::Fail => panic!("the memory failed on purpose"),
        }
        Ok(())
    }

    async fn post_stop(&self, _myself: ActorRef<MemoryMsg>, state: &mut MemoryState) -> Result<(), ActorProcessingErr> {
        // Dropping the memory commits the index: blocking work, so off the executor.
        if let Some(memory) = state.memory.take()
            && let Err(err) = blocking::run(move || memory.close()).await?
        {
            tracing::warn!(target: "less.memory", "recall indexes not saved at shutdown (rebuilt on next open): {err}");
        }
        if state.remove_on_stop
            && let Err(err) = std::fs::remove_dir_all(&state.dir)
        {
            tracing::warn!("scratch memory {} left behind: {err}", state.dir.display());
        }
        Ok(())
    }
}

impl MemoryState {
    /// Runs `work` on the memory on a blocking thread, with the clock's `now`, after a sweep of expired engrams
    /// when one is due.
    async fn blocking<T: Send + 'static>(
        &mut self,
        work: impl FnOnce(&mut Memory, i64) -> T + Send + 'static,
    ) -> Result<T, ActorProcessingErr> {
        let now = (self.clock)();
        let sweep = now >= self.next_sweep;
        if sweep {
            self.next_sweep = now.saturating_add(self.sweep_every);
        }
        blocking::with_taken(&mut self.memory, "the memory", move |memory| {
            // A failed sweep is retried at the next one; queries leave expired engrams out meanwhile.
            if sweep && let Err(err) = memory.evict_expired(now) {
                tracing::warn!(target: "less.memory", "sweep of expired engrams failed: {err}");
            }
            work(memory, now)
        })
        .await
    }
}
