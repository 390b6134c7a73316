//! The run supervisor and the driver of a run.
//!
//! `RunSupervisor` spawns the resolver, the ledger and one gateway per agent, linked to itself; each gateway spawns
//! and supervises its agent (see the restart policy in `gateway.rs`). A resolver, ledger or gateway failure is a bug:
//! the supervisor records it and the driver ends the run with an error.
//! [`run_scenario`] drives the steps in order, one turn at a time, then collects the ledger into a [`RunReport`].
//! Shutdown: the driver stops the supervisor, which stops its children (and they theirs).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;
use crate::resolver::Resolver;
use crate::run::agent::{ActRequest, AgentFactory};
use crate::run::gateway::{GatewayActor, GatewayArgs, GatewayMsg};
use crate::run::ledger::{Event, LedgerActor, LedgerArgs, LedgerMsg};
use crate::run::report::RunReport;
use crate::run::resolver_actor::{ResolverActor, ResolverMsg};
use crate::run::{Directory, RunContext, run_secret};
use crate::scenario::{Scenario, Step, WireMode};

/// How to run.
pub struct RunOptions {
    /// Wire mode.
    pub mode: WireMode,
    /// Where `ledger.jsonl` and `audit.log` go (none: not written).
    pub out_dir: Option<PathBuf>,
    /// Print the live trace.
    pub trace: bool,
}

/// The per-run supervisor.
struct RunSupervisor;

impl Actor for RunSupervisor {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<()>, _args: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        event: SupervisionEvent,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = event {
            tracing::error!("run actor {:?} failed: {err}", cell.get_name());
        }
        Ok(())
    }
}

/// Runs `scenario` to the end and reports.
pub async fn run_scenario(
    scenario: Arc<Scenario>,
    factory: Arc<dyn AgentFactory>,
    options: RunOptions,
) -> crate::Result<RunReport> {
    let fail = |what: &str, err: &dyn std::fmt::Display| Error::Runtime { message: format!("{what}: {err}") };
    // Actor names are process-wide, so every run gets its own id.
    static N_RUNS: AtomicU64 = AtomicU64::new(0);
    let run_id = format!("{}-{}-{}", scenario.name, std::process::id(), N_RUNS.fetch_add(1, Ordering::Relaxed));
    let mode = options.mode;
    let (supervisor, supervisor_handle) =
        Actor::spawn(None, RunSupervisor, ()).await.map_err(|e| fail("supervisor", &e))?;
    let resolver = Resolver::new(&scenario.workspace).map_err(|v| fail("workspace", &v))?;
    let (resolver, _) = Actor::spawn_linked(None, ResolverActor, resolver, supervisor.get_cell())
        .await
        .map_err(|e| fail("resolver", &e))?;
    let (ledger, _) = Actor::spawn_linked(
        None,
        LedgerActor,
        LedgerArgs { out_dir: options.out_dir.clone(), trace: options.trace },
        supervisor.get_cell(),
    )
    .await
    .map_err(|e| fail("ledger", &e))?;
    let ctx = Arc::new(RunContext {
        run_id: run_id.clone(),
        mode,
        scenario: scenario.clone(),
        secret: run_secret(),
        directory: Directory::default(),
        resolver: resolver.clone(),
        ledger: ledger.clone(),
        factory,
        issued_grants: Default::default(),
        n_msgs: Default::default(),
    });
    for agent in &scenario.agents {
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
    for (index, step) in scenario.steps.iter().enumerate() {
        let agent = step_agent(step).to_owned();
        ctx.record(Event::Step { index, agent: agent.clone(), action: step_name(step).to_owned() });
        let gateway = ctx.directory.get(&agent).ok_or_else(|| fail("step", &format!("no agent {agent}")))?;
        // An agent that panics mid-turn drops the reply; its gateway restarts it and the step is retried.
        let mut attempt = 0u32;
        loop {
            let request = ActRequest { index, step: step.clone(), attempt };
            match gateway.call(|reply| GatewayMsg::Act(request, reply), Some(Duration::from_secs(120))).await {
                Ok(ractor::rpc::CallResult::Success(outcome)) => {
                    if outcome.agent_down {
                        tracing::warn!("{agent} is down; step {index} skipped");
                    }
                    break;
                }
                Ok(_) | Err(_) if attempt < 3 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => return Err(fail("step", &format!("{agent} did not finish step {index}"))),
            }
        }
    }
    let events = ractor::call!(ledger, LedgerMsg::Snapshot).map_err(|e| fail("ledger", &e))?;
    let report = RunReport::build(&scenario, mode, &events);
    // Stopping the supervisor stops its linked children, and each gateway its agent.
    supervisor.stop(None);
    let _ = supervisor_handle.await;
    let _ = resolver;
    Ok(report)
}

fn step_agent(step: &Step) -> &str {
    match step {
        Step::Brief { agent, .. } | Step::Deref { agent, .. } | Step::Query { agent, .. } | Step::Panic { agent } => {
            agent
        }
        Step::Report(report) => &report.agent,
    }
}

fn step_name(step: &Step) -> &'static str {
    match step {
        Step::Brief { .. } => "brief",
        Step::Deref { .. } => "deref",
        Step::Report(_) => "report",
        Step::Query { .. } => "query",
        Step::Panic { .. } => "panic",
    }
}

#[allow(dead_code)]
fn _assert_send(_: ResolverMsg) {}
