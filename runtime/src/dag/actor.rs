//! The summarizer actors: a `SummarizerSupervisor` with one summarizer per level (session, arc, epoch).
//!
//! The runtime feeds the supervisor as messages are delivered (through a run's bounded [`ArchiveQueue`], taken a
//! batch at a time by `RecordQueued`) and as sessions end
//! (`EndSession`). The supervisor archives and indexes messages; the session summarizer summarizes
//! ended sessions (through the significance gate) and tells the supervisor, which wakes the arc summarizer, which in
//! turn wakes the epoch summarizer. All archive work runs on blocking threads (`crate::blocking`), never on the async
//! executor. A failed piece of work is retried with backoff (three attempts); what still fails stays pending in the
//! archive and is picked up by the next wake-up or `Drain`. A level actor that dies is restarted by the supervisor
//! within its restart intensity (`crate::supervision`); one failure more and the supervisor fails itself, escalating to
//! its own supervisor (a run's starts it again, levels and all). `Drain` (a call) returns once every level has done all
//! pending work.

use std::path::PathBuf;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::blocking;
use crate::dag::archive::{Archive, NewMessage, NodeKind};
use crate::dag::{BuildReport, Condenser, index_dir, index_messages};
use crate::memory::{Clock, Memory, StoreError};
use crate::supervision::{Children, Exit, Response, Restart, Strategy};
use less_contract::{Encoding, TokenCounter};

/// Attempts of one piece of work before it is left pending.
pub const ATTEMPTS: u32 = 3;

/// Most messages a run's [`ArchiveQueue`] holds before a delivery waits for the archive to catch up.
pub const ARCHIVE_BACKLOG: usize = 4096;

/// The messages a run delivered and the archive has not yet taken: written by the gateways, taken by the
/// supervisor in one transaction per batch ([`SummarizerMsg::RecordQueued`]). Bounded: a delivery waits for room
/// ([`ArchiveQueue::push`]), so a hierarchy that delivers faster than the disk archives is slowed down, not
/// buffered without end.
#[derive(Debug)]
pub struct ArchiveQueue {
    project: String,
    session: String,
    pending: std::sync::Mutex<Vec<NewMessage>>,
    room: tokio::sync::Semaphore,
}

impl ArchiveQueue {
    /// An empty queue for a session of `project`.
    pub fn new(project: impl Into<String>, session: impl Into<String>) -> ArchiveQueue {
        ArchiveQueue {
            project: project.into(),
            session: session.into(),
            pending: std::sync::Mutex::new(Vec::new()),
            room: tokio::sync::Semaphore::new(ARCHIVE_BACKLOG),
        }
    }

    /// Queues `message` once there is room, and tells `summarizers` when the queue was empty (else a
    /// [`SummarizerMsg::RecordQueued`] is on its way already, and will take this message too).
    ///
    /// A message is never dropped for want of summarizers: when they cannot be told (they failed and are being
    /// started again), the message stays queued, the replacement takes the queue as it starts, and the caller hears
    /// `Err(NotWoken)` so that it can wake a replacement that started before the message was queued. Only a closed
    /// queue ([`ArchiveQueue::close`]: the summarizers were given up and the run is failing) refuses a message.
    pub async fn push(
        self: &std::sync::Arc<Self>,
        message: NewMessage,
        summarizers: &ActorRef<SummarizerMsg>,
    ) -> Result<(), NotWoken> {
        match self.room.acquire().await {
            // Given back when the archive has taken the message.
            Ok(permit) => permit.forget(),
            Err(_) => {
                tracing::error!(target: "less.dag", "the summarizers were given up: a message not archived");
                return Ok(());
            }
        }
        let was_empty = {
            let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            pending.push(message);
            pending.len() == 1
        };
        if was_empty && summarizers.send_message(SummarizerMsg::RecordQueued(self.clone())).is_err() {
            return Err(NotWoken);
        }
        Ok(())
    }

    /// How many messages wait in the queue.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether no message waits.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// No summarizer will take the queue again (they failed past their restart limit): what waits is dropped, said
    /// once, and no later delivery waits for room that will never come.
    pub fn close(&self) {
        let lost = self.take().len();
        self.room.add_permits(lost);
        self.room.close();
        if lost > 0 {
            tracing::error!(target: "less.dag", "the summarizers were given up: {lost} messages not archived");
        }
    }

    /// Takes every queued message.
    fn take(&self) -> Vec<NewMessage> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Puts back, ahead of anything queued since, messages a failed batch had taken.
    fn requeue(&self, mut messages: Vec<NewMessage>) {
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        messages.append(&mut pending);
        *pending = messages;
    }
}

/// The summarizers could not be told that a message was queued (see [`ArchiveQueue::push`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotWoken;

/// Messages to the supervisor.
pub enum SummarizerMsg {
    /// Archive (and index) what a run's queue holds, in one transaction.
    RecordQueued(std::sync::Arc<ArchiveQueue>),
    /// Archive what the queue holds, then answer: every message queued before the call is archived.
    Sync(std::sync::Arc<ArchiveQueue>, RpcReplyPort<()>),
    /// A session ended: summarize it.
    EndSession {
        /// The project.
        project: String,
        /// The session.
        session: String,
    },
    /// A level made nodes: wake the level above.
    LevelDone(NodeKind),
    /// Do all pending work at every level; reply with what was done since the last drain.
    Drain(RpcReplyPort<BuildReport>),
    /// Panics on purpose (tests of the run supervisor's restart).
    #[cfg(any(test, feature = "faults"))]
    Fail,
    /// Makes one level panic on purpose (tests of the levels' restart).
    #[cfg(test)]
    FailLevel(NodeKind),
    /// The levels' actors, session first (tests of the levels' restart).
    #[cfg(test)]
    Levels(RpcReplyPort<Vec<ractor::ActorId>>),
}

/// Messages to a level summarizer.
pub enum LevelMsg {
    /// Do the pending work of this level.
    Work,
    /// Do the pending work, then reply with what was done since the last drain.
    Drain(RpcReplyPort<BuildReport>),
    /// Panics on purpose.
    #[cfg(test)]
    Fail,
}

/// How to start the supervisor.
pub struct SummarizerArgs {
    /// The archive's directory (the memory store's).
    pub dir: PathBuf,
    /// The building rules and summarizer.
    pub condenser: Condenser,
    /// The clock (unix seconds).
    pub clock: Clock,
    /// Index messages for `expand_query` (the index loads the embedding model when provisioned).
    pub index: bool,
}

/// The supervisor.
pub struct SummarizerSupervisor;

/// What the supervisor's blocking work needs.
struct Held {
    archive: Archive,
    index: Option<Memory>,
}

/// Its state.
pub struct SupervisorState {
    /// The archive and the message index, moved onto the blocking pool for each piece of work.
    held: Option<Held>,
    /// The level summarizers, session first.
    levels: Vec<(NodeKind, ActorRef<LevelMsg>)>,
    /// Their start order and restart intensities: rest_for_one, since each level reads what the one before writes.
    children: Children<NodeKind>,
    args: SummarizerArgs,
}

async fn spawn_level(
    kind: NodeKind,
    args: &SummarizerArgs,
    supervisor: &ActorRef<SummarizerMsg>,
) -> Result<ActorRef<LevelMsg>, ActorProcessingErr> {
    let level_args = LevelArgs {
        kind,
        dir: args.dir.clone(),
        condenser: args.condenser.clone(),
        clock: args.clock.clone(),
        supervisor: supervisor.clone(),
    };
    let (actor, _) = Actor::spawn_linked(None, LevelSummarizer, level_args, supervisor.get_cell()).await?;
    Ok(actor)
}

impl Actor for SummarizerSupervisor {
    type Msg = SummarizerMsg;
    type State = SupervisorState;
    type Arguments = SummarizerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SummarizerMsg>,
        args: SummarizerArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let (dir, with_index) = (args.dir.clone(), args.index);
        let held = blocking::run(move || -> Result<_, ActorProcessingErr> {
            let archive = Archive::open(&dir)?;
            let index = if with_index { Some(Memory::open(&index_dir(&dir))?) } else { None };
            Ok(Held { archive, index })
        })
        .await??;
        let (mut levels, mut children) = (Vec::new(), Children::new(Strategy::RestForOne));
        for kind in [NodeKind::Session, NodeKind::Arc, NodeKind::Epoch] {
            levels.push((kind, spawn_level(kind, &args, &myself).await?));
            children.started(kind, Restart::Permanent);
        }
        Ok(SupervisorState { held: Some(held), levels, children, args })
    }

    async fn handle(
        &self,
        _myself: ActorRef<SummarizerMsg>,
        msg: SummarizerMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SummarizerMsg::RecordQueued(queue) => state.archive_queued(&queue).await?,
            #[cfg(any(test, feature = "faults"))]
            SummarizerMsg::Fail => panic!("the summarizers failed on purpose"),
            #[cfg(test)]
            SummarizerMsg::FailLevel(kind) => {
                if let Some((_, level)) = state.levels.iter().find(|(k, _)| *k == kind) {
                    let _ = level.send_message(LevelMsg::Fail);
                }
            }
            #[cfg(test)]
            SummarizerMsg::Levels(reply) => {
                let _ = reply.send(state.levels.iter().map(|(_, level)| level.get_id()).collect());
            }
            SummarizerMsg::Sync(queue, reply) => {
                state.archive_queued(&queue).await?;
                let _ = reply.send(());
            }
            SummarizerMsg::EndSession { project, session } => {
                let result = state.blocking(move |archive, _| archive.end_session(&project, &session)).await?;
                match result {
                    Ok(()) => state.cast(NodeKind::Session),
                    Err(err) => tracing::error!(target: "less.dag", "session end not recorded: {err}"),
                }
            }
            SummarizerMsg::LevelDone(kind) => match kind {
                NodeKind::Session => state.cast(NodeKind::Arc),
                NodeKind::Arc => state.cast(NodeKind::Epoch),
                NodeKind::Epoch => {}
            },
            SummarizerMsg::Drain(reply) => {
                let mut report = BuildReport::default();
                for (kind, level) in &state.levels {
                    match ractor::call!(level, LevelMsg::Drain) {
                        Ok(done) => report.add(&done),
                        Err(err) => tracing::error!(target: "less.dag", "{} summarizer: {err}", kind.as_str()),
                    }
                }
                // Commit only: embedding the archive waits for the first query that reranks, so a run never ends
                // by loading the model.
                let flushed = blocking::with_taken(&mut state.held, "the archive", |held| {
                    held.index.as_mut().map_or(Ok(()), Memory::save)
                })
                .await?;
                if let Err(err) = flushed {
                    tracing::warn!(target: "less.dag", "message index not committed: {err}");
                }
                let _ = reply.send(report);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SummarizerMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = event {
            let Some(i) = state.level_of(&cell) else { return Ok(()) };
            let kind = state.levels[i].0;
            tracing::error!(target: "less.dag", "{} summarizer failed: {err}", kind.as_str());
            let Response::Restart(kinds) = state.children.on_exit(&kind, Exit::Failed) else {
                return Err(format!("the {} summarizer failed past its restart intensity: {err}", kind.as_str()).into());
            };
            // rest_for_one: the levels after it stop (last first) and all start again in order, each told to work.
            let mut later = Vec::new();
            for kind in kinds.iter().skip(1).rev() {
                later.extend(state.levels.iter().filter(|(k, _)| k == kind).map(|(_, actor)| actor.get_cell()));
            }
            crate::supervision::stop_in_order(&myself.get_cell(), later).await;
            for kind in kinds {
                let actor = spawn_level(kind, &state.args, &myself).await?;
                if let Some(slot) = state.levels.iter_mut().find(|(k, _)| *k == kind) {
                    slot.1 = actor;
                }
                state.cast(kind);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<SummarizerMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // The levels stop last started first, each finishing its message, before the archive they write closes.
        let mut levels = Vec::new();
        for kind in state.children.stop_order() {
            levels.extend(state.levels.iter().filter(|(k, _)| *k == kind).map(|(_, actor)| actor.get_cell()));
        }
        crate::supervision::stop_in_order(&myself.get_cell(), levels).await;
        // Closing the index saves it and the archive closes its database: blocking work.
        if let Some(held) = state.held.take()
            && let Err(err) = blocking::run(move || held.index.map_or(Ok(()), Memory::close)).await?
        {
            tracing::warn!(target: "less.dag", "message index not saved at shutdown (rebuilt on next open): {err}");
        }
        Ok(())
    }
}

impl SupervisorState {
    /// Archives (and indexes) what `queue` holds in one transaction, then makes room for as many more.
    async fn archive_queued(&mut self, queue: &std::sync::Arc<ArchiveQueue>) -> Result<(), ActorProcessingErr> {
        let messages = std::sync::Arc::new(queue.take());
        if messages.is_empty() {
            return Ok(());
        }
        let n = messages.len();
        let (project, session, now) = (queue.project.clone(), queue.session.clone(), (self.args.clock)());
        let batch = messages.clone();
        let result = self
            .blocking(move |archive, index| {
                let counter = TokenCounter::shared(Encoding::default());
                let stored = archive.append(&project, &session, &batch, now, &|t| counter.count(t))?;
                if let Some(index) = index
                    && let Err(err) = index_messages(index, &stored, now)
                {
                    tracing::warn!(target: "less.dag", "message index behind: {err}");
                }
                Ok(())
            })
            .await;
        let unarchived = match &result {
            Ok(Ok(())) => false,
            Ok(Err(err)) => {
                tracing::error!(target: "less.dag", "{n} messages not archived yet, kept queued: {err}");
                true
            }
            Err(_) => true,
        };
        if unarchived {
            // One transaction per batch: nothing of it is in the archive. It goes back to the front of the queue, for
            // the next batch (or, when this failure ends the supervisor, its replacement) to take again.
            queue.requeue(std::sync::Arc::try_unwrap(messages).unwrap_or_else(|shared| (*shared).clone()));
        } else {
            queue.room.add_permits(n);
        }
        let _ = result?;
        Ok(())
    }

    fn level_of(&self, cell: &ActorCell) -> Option<usize> {
        self.levels.iter().position(|(_, actor)| actor.get_id() == cell.get_id())
    }

    fn cast(&self, kind: NodeKind) {
        if let Some((_, actor)) = self.levels.iter().find(|(k, _)| *k == kind)
            && let Err(err) = actor.send_message(LevelMsg::Work)
        {
            tracing::error!(target: "less.dag", "{} summarizer unreachable: {err}", kind.as_str());
        }
    }

    async fn blocking<T: Send + 'static>(
        &mut self,
        work: impl FnOnce(&mut Archive, Option<&mut Memory>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<Result<T, StoreError>, ActorProcessingErr> {
        blocking::with_taken(&mut self.held, "the archive", move |held| work(&mut held.archive, held.index.as_mut()))
            .await
    }
}

/// How to start a level summarizer.
pub struct LevelArgs {
    kind: NodeKind,
    dir: PathBuf,
    condenser: Condenser,
    clock: Clock,
    supervisor: ActorRef<SummarizerMsg>,
}

/// A summarizer of one level.
pub struct LevelSummarizer;

/// Its state.
pub struct LevelState {
    archive: Option<Archive>,
    args: LevelArgs,
    done: BuildReport,
}

impl Actor for LevelSummarizer {
    type Msg = LevelMsg;
    type State = LevelState;
    type Arguments = LevelArgs;

    async fn pre_start(&self, _myself: ActorRef<LevelMsg>, args: LevelArgs) -> Result<LevelState, ActorProcessingErr> {
        let dir = args.dir.clone();
        let archive = blocking::run(move || Archive::open(&dir)).await??;
        Ok(LevelState { archive: Some(archive), args, done: BuildReport::default() })
    }

    async fn handle(
        &self,
        _myself: ActorRef<LevelMsg>,
        msg: LevelMsg,
        state: &mut LevelState,
    ) -> Result<(), ActorProcessingErr> {
        #[cfg(test)]
        if matches!(msg, LevelMsg::Fail) {
            panic!("the {} summarizer failed on purpose", state.args.kind.as_str());
        }
        let made = state.work().await?;
        if made {
            let _ = state.args.supervisor.send_message(SummarizerMsg::LevelDone(state.args.kind));
        }
        if let LevelMsg::Drain(reply) = msg {
            let _ = reply.send(std::mem::take(&mut state.done));
        }
        Ok(())
    }
}

impl LevelState {
    /// Does this level's pending work, retrying with backoff; true when it made nodes.
    async fn work(&mut self) -> Result<bool, ActorProcessingErr> {
        let kind = self.args.kind;
        for attempt in 1..=ATTEMPTS {
            let condenser = self.args.condenser.clone();
            let now = (self.args.clock)();
            let result = blocking::with_taken(&mut self.archive, "the archive", move |archive| match kind {
                NodeKind::Session => condenser.summarize_pending(archive, now),
                level => {
                    let mut report = BuildReport::default();
                    let projects = archive.projects();
                    match projects {
                        Ok(projects) => {
                            let mut failed = None;
                            for project in projects {
                                match condenser.condense_level(archive, &project, level, now) {
                                    Ok(r) => report.add(&r),
                                    Err(err) => {
                                        failed = Some(err);
                                        break;
                                    }
                                }
                            }
                            failed.map_or(Ok(report), Err)
                        }
                        Err(err) => Err(err),
                    }
                }
            })
            .await?;
            match result {
                Ok(report) => {
                    let made = report != BuildReport::default();
                    self.done.add(&report);
                    return Ok(made);
                }
                Err(err) => {
                    tracing::warn!(target: "less.dag", "{} summarizer, attempt {attempt}: {err}", kind.as_str());
                    if attempt == ATTEMPTS {
                        let detail = serde_json::json!({"level": kind, "error": err.to_string()});
                        if let Some(archive) = &self.archive {
                            let _ = archive.log((self.args.clock)(), "summarize_failed", &detail);
                        }
                        return Ok(false);
                    }
                    tokio::time::sleep(Duration::from_millis(50 * 4u64.pow(attempt - 1))).await;
                }
            }
        }
        Ok(false)
    }
}
