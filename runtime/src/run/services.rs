//! The run's shared services as an agent and its gateway use them: the memory (puts, recalls, promotions), the
//! archive and the message ids. On the head node they are the local actors; on a worker node (`lessrt node`) they are
//! the head's, reached through a [`HeadServices`] the cluster gives the node. Either way an agent gets the same answers,
//! as plain serializable values: what it reads of a recall, what came of a put.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::coord::Claimed;
use crate::dag::actor::{ArchiveQueue, SummarizerMsg};
use crate::memory::{EngramRef, MemoryError, MemoryMsg, PromoteRequest, PutRequest, QueryOptions, QueryRequest};
use crate::run::RunContext;
use crate::run::remote::HeadServices;
use crate::run::slot::Slot;
use crate::run::wire::ClaimAction;
use less_contract::{Engram, ErrorCode, Scope, Valid, Violation};

/// Where the shared services are.
pub(crate) enum Services {
    /// In this process: the run's memory and summarizers, and the archive's queue.
    Local {
        /// The run's engram memory (restarted by the run supervisor: a slot).
        memory: Slot<MemoryMsg>,
        /// The summarizers (restarted by the run supervisor: a slot).
        summarizers: Slot<SummarizerMsg>,
        /// Delivered messages on their way to the archive.
        archive_queue: Arc<ArchiveQueue>,
        /// The run's message numbers (shared with the head's bridge, which hands out ids to the nodes).
        n_msgs: Arc<MsgNumbers>,
        /// The run's coordination ledger (claims, conflicts, decisions), in `coord.sqlite` beside the memory.
        coord: Arc<crate::coord::Store>,
    },
    /// On the head node.
    Remote {
        /// The head's services, as this node reaches them.
        head: Arc<dyn HeadServices>,
    },
}

/// The run's message numbers: one counter per sender (an agent, or its gateway as `<agent>-gw`), so that an id
/// names the sender's n-th message whatever ran meanwhile ([`crate::run::Ordering::Causal`]); or one counter for
/// the run ([`crate::run::Ordering::Arrival`]).
#[derive(Debug, Default)]
pub(crate) struct MsgNumbers {
    /// Per sender: the last number handed out.
    per_sender: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// For the run: the last number handed out.
    run: AtomicU64,
}

impl MsgNumbers {
    /// The next number of `sender`'s messages, as `ordering` counts them.
    pub(crate) fn next(&self, sender: &str, ordering: crate::run::Ordering) -> u64 {
        match ordering {
            crate::run::Ordering::Arrival => self.run.fetch_add(1, Ordering::Relaxed) + 1,
            crate::run::Ordering::Causal => {
                let mut numbers = self.per_sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let n = numbers.entry(sender.to_owned()).or_default();
                *n += 1;
                *n
            }
        }
    }

    /// Notes that `sender` already used number `n` (a resumed run's ledger): the next numbers come after it.
    pub(crate) fn at_least(&self, sender: &str, n: u64) {
        self.run.fetch_max(n, Ordering::Relaxed);
        let mut numbers = self.per_sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let highest = numbers.entry(sender.to_owned()).or_default();
        *highest = (*highest).max(n);
    }

    /// The highest number handed out over the run.
    #[cfg(test)]
    pub(crate) fn highest(&self) -> u64 {
        self.run.load(Ordering::Relaxed)
    }
}

/// What an agent reads of a recall: the engrams (without the index's hash keys), the stages that ran, and why the
/// recall was degraded, if it was.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RecallAnswer {
    pub engrams: Vec<Value>,
    pub stages: Vec<String>,
    pub degraded: Option<String>,
}

/// What came of a put.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PutAnswer {
    pub id: String,
    pub status: String,
    pub superseded: Vec<String>,
    pub contradictions: Vec<String>,
}

/// A memory error as an agent sees it: its code, message and whether it is a refusal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct MemoryFailure {
    pub code: ErrorCode,
    pub message: String,
    pub refusal: Option<ErrorCode>,
}

impl From<MemoryError> for MemoryFailure {
    fn from(err: MemoryError) -> MemoryFailure {
        MemoryFailure { code: err.code(), message: err.message(), refusal: err.refusal_code() }
    }
}

impl MemoryFailure {
    pub(crate) fn unavailable(what: &str, err: &dyn std::fmt::Display) -> MemoryFailure {
        MemoryFailure::from(MemoryError::Unavailable(format!("{what}: {err}")))
    }

    /// A refusal (counted as the agent's refusal).
    pub(crate) fn refused(violation: Violation) -> MemoryFailure {
        MemoryFailure { code: violation.code, message: violation.message, refusal: Some(violation.code) }
    }
}

/// The memory of a run on the head node.
fn local_memory(ctx: &RunContext) -> Result<&Slot<MemoryMsg>, MemoryFailure> {
    match &ctx.services {
        Services::Local { memory, .. } => Ok(memory),
        Services::Remote { .. } => Err(MemoryFailure::unavailable("memory", &"a run's memory is on its head node")),
    }
}

/// Calls the local memory with the message `make` builds; a call that a failed memory did not answer goes once
/// more to its replacement ([`Slot::call`]).
async fn call_memory<T: Send + 'static>(
    ctx: &RunContext,
    make: impl Fn(ractor::RpcReplyPort<Result<T, MemoryError>>) -> MemoryMsg,
) -> Result<T, MemoryFailure> {
    match local_memory(ctx)?.ask(make).await {
        Ok(result) => Ok(result?),
        Err(err) => Err(MemoryFailure::unavailable("memory", &err)),
    }
}

/// A recall through the local memory, as `agent`.
pub(crate) async fn recall_here(
    ctx: &RunContext,
    agent: &str,
    text: String,
    options: QueryOptions,
) -> Result<RecallAnswer, MemoryFailure> {
    let request = QueryRequest { who: ctx.principal(agent), text, options };
    let recall = match call_memory(ctx, |reply| MemoryMsg::Query(Box::new(request.clone()), reply)).await {
        Ok(recall) => recall,
        Err(failure) => return Err(failure),
    };
    // An agent reads the claims, not the index's keys: the hash keys stay in the store.
    let engrams = recall
        .hits
        .iter()
        .map(|hit| {
            let mut engram = hit.stored.engram.clone();
            engram.hash_keys = None;
            serde_json::to_value(&engram).map_err(|e| MemoryFailure::unavailable("recall answer", &e))
        })
        .collect::<Result<Vec<Value>, _>>()?;
    Ok(RecallAnswer {
        engrams,
        stages: recall.stages.iter().map(|s| (*s).to_owned()).collect(),
        degraded: recall.degraded.clone(),
    })
}

/// A promotion through the local memory, as `agent`: the id of the engram promoted, if there was one.
pub(crate) async fn promote_here(
    ctx: &RunContext,
    agent: &str,
    subject: String,
    to: Scope,
) -> Result<Option<String>, MemoryFailure> {
    let request = PromoteRequest { who: ctx.principal(agent), target: EngramRef::Subject(subject), to };
    let promoted = call_memory(ctx, |reply| MemoryMsg::Promote(Box::new(request.clone()), reply)).await?;
    Ok(promoted.map(|stored| stored.engram.id))
}

/// A put through the local memory, as `agent`, into the scenario's project.
pub(crate) async fn put_here(ctx: &RunContext, agent: &str, engram: Valid<Engram>) -> Result<PutAnswer, MemoryFailure> {
    let request = PutRequest { who: ctx.principal(agent), engram, project: ctx.scenario.project.clone() };
    let report = call_memory(ctx, |reply| MemoryMsg::Put(Box::new(request.clone()), reply)).await?;
    Ok(PutAnswer {
        id: report.outcome.id().to_owned(),
        status: match report.outcome {
            crate::memory::PutOutcome::Stored { .. } => "stored",
            crate::memory::PutOutcome::Duplicate { .. } => "duplicate",
            crate::memory::PutOutcome::Revived { .. } => "revived",
        }
        .to_owned(),
        superseded: report.superseded,
        contradictions: report.contradictions,
    })
}

/// Runs `work` on the run's own coordination ledger as `agent` (its PAS identity, in the scenario's project), at
/// the run's time, on the blocking pool.
async fn on_ledger<T: Send + 'static>(
    ctx: &RunContext,
    agent: &str,
    work: impl FnOnce(&mut rusqlite::Connection, crate::coord::Actor<'_>, i64) -> Result<T, Violation> + Send + 'static,
) -> Result<T, Violation> {
    let Services::Local { coord, .. } = &ctx.services else {
        return Err(Violation::new(ErrorCode::StoreFailed, "", "the coordination ledger is on the head"));
    };
    let (coord, identity, now) = (coord.clone(), ctx.scenario.identity(agent), ctx.now().unix_timestamp());
    let (id, project) = (agent.to_owned(), ctx.scenario.project.clone());
    crate::blocking::run(move || {
        let who = crate::coord::Actor { id: &id, project: &project, identity: &identity };
        coord.with(|db| work(db, who, now))
    })
    .await
    .map_err(|err| Violation::new(ErrorCode::StoreFailed, "", format!("the coordination ledger: {err}")))?
}

/// A claim in the run's own coordination ledger, as `agent`.
pub(crate) async fn claim_here(ctx: &RunContext, agent: &str, claim: ClaimAction) -> Result<Claimed, Violation> {
    let new = crate::coord::NewClaim {
        surfaces: claim.surfaces,
        task: claim.task,
        ttl_secs: claim.ttl_minutes.map(|m| m.saturating_mul(60)),
        override_reason: claim.override_reason,
    };
    on_ledger(ctx, agent, move |db, who, now| crate::coord::claim(db, who, &new, now)).await
}

/// Releases `agent`'s live claims (for `task`, or all) in the run's own ledger: the ids released.
pub(crate) async fn release_here(
    ctx: &RunContext,
    agent: &str,
    task: Option<String>,
) -> Result<Vec<String>, Violation> {
    on_ledger(ctx, agent, move |db, who, now| crate::coord::release_held(db, who, task.as_deref(), now)).await
}

impl RunContext {
    /// Claim as `agent` (in the head's ledger wherever the agent runs).
    pub(crate) async fn claim(&self, agent: &str, claim: ClaimAction) -> Result<Claimed, Violation> {
        match &self.services {
            Services::Local { .. } => claim_here(self, agent, claim).await,
            Services::Remote { head } => head.claim(agent.to_owned(), claim).await,
        }
    }

    /// Release `agent`'s live claims (for `task`, or all).
    pub(crate) async fn release(&self, agent: &str, task: Option<String>) -> Result<Vec<String>, Violation> {
        match &self.services {
            Services::Local { .. } => release_here(self, agent, task).await,
            Services::Remote { head } => head.release(agent.to_owned(), task).await,
        }
    }

    /// Recall as `agent`.
    pub(crate) async fn recall(
        &self,
        agent: &str,
        text: String,
        options: QueryOptions,
    ) -> Result<RecallAnswer, MemoryFailure> {
        match &self.services {
            Services::Local { .. } => recall_here(self, agent, text, options).await,
            Services::Remote { head } => head.recall(agent.to_owned(), text, options).await,
        }
    }

    /// Promote as `agent`.
    pub(crate) async fn promote(
        &self,
        agent: &str,
        subject: String,
        to: Scope,
    ) -> Result<Option<String>, MemoryFailure> {
        match &self.services {
            Services::Local { .. } => promote_here(self, agent, subject, to).await,
            Services::Remote { head } => head.promote(agent.to_owned(), subject, to).await,
        }
    }

    /// Put as `agent`.
    pub(crate) async fn put(&self, agent: &str, engram: Valid<Engram>) -> Result<PutAnswer, MemoryFailure> {
        match &self.services {
            Services::Local { .. } => put_here(self, agent, engram).await,
            Services::Remote { head } => head.put(agent.to_owned(), engram).await,
        }
    }

    /// The next message number of `sender` (one set of counters for the whole run, on the head, so ids are the same
    /// wherever the agents run).
    pub(crate) async fn next_msg_number(&self, sender: &str) -> u64 {
        match &self.services {
            Services::Local { n_msgs, .. } => n_msgs.next(sender, self.ordering),
            Services::Remote { head } => match head.next_id(sender.to_owned()).await {
                Ok(n) => n,
                Err(err) => {
                    // Without the head the run is over; an id that cannot collide with the head's keeps the
                    // documents valid until the head notices.
                    tracing::error!(target: "less.cluster", "no message id from the head: {err}");
                    u64::MAX - (std::process::id() as u64)
                }
            },
        }
    }

    /// On a worker node: waits until every event, document and archived message this node sent the head's ledger,
    /// resolver and bridge is there (each connection keeps its order, so one answered call behind them is enough). Before a node answers
    /// a delivery or a turn, so that what it acknowledged is in the head's ledger, and another node that acts next
    /// reads a ledger that has it. On the head: nothing to wait for.
    pub(crate) async fn settle(&self) {
        if let Services::Remote { head } = &self.services {
            // The three in flight at once: one round trip, not three.
            let (ledger, resolver, bridge) = tokio::join!(
                async { self.ledger.ask(crate::run::ledger::TokenLedgerMsg::Ack).await.map_err(|e| e.to_string()) },
                async {
                    self.resolver.ask(crate::run::resolver_actor::ResolverMsg::Ack).await.map_err(|e| e.to_string())
                },
                head.ack(),
            );
            for (what, answer) in [("ledger", ledger), ("resolver", resolver), ("archive", bridge)] {
                if let Err(err) = answer {
                    tracing::error!(target: "less.cluster", "the head's {what} did not acknowledge: {err}");
                }
            }
        }
    }
}
