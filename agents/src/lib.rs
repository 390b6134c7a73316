//! less-agents: implementations of the agents that run inside lessrt's actor tree.
//!
//! The runtime (`less-runtime`) defines the [`Agent`] seam and knows no concrete agent or LLM provider; this crate
//! depends on it and provides the agents. [`ScriptedAgent`] follows the scenario's steps, including its scripted
//! misbehaviour (pasting files, too many engrams, a panic). The root `lessrt` binary wires the two together.

use less_runtime::run::{Action, Agent, AgentFactory, AgentFuture, BriefAction, DerefAction, ReportAction, TurnInput};
use less_runtime::{AgentSpec, Misbehaviour, Step, Violation, WireMode};

/// Follows the steps of a scenario.
#[derive(Debug, Default)]
pub struct ScriptedAgent;

/// Builds a [`ScriptedAgent`] for every agent of a scenario.
#[derive(Debug, Default)]
pub struct ScriptedFactory;

impl AgentFactory for ScriptedFactory {
    fn make(&self, _spec: &AgentSpec) -> Box<dyn Agent> {
        Box::new(ScriptedAgent)
    }
}

impl Agent for ScriptedAgent {
    fn act<'a>(&'a mut self, input: &'a TurnInput) -> AgentFuture<'a, Vec<Action>> {
        Box::pin(async move { actions_for(input) })
    }

    fn on_rejection<'a>(
        &'a mut self,
        action: &'a Action,
        _violation: &'a Violation,
        _attempt: u32,
    ) -> AgentFuture<'a, Option<Action>> {
        Box::pin(async move {
            match action {
                // `paste_twice` resends the same over-budget message, so the receiver's gateway escalates.
                Action::Report(report) if report.repeat_offender => Some(action.clone()),
                // The compliant resend: the same engrams and pointers, nothing pasted, nothing padded.
                Action::Report(report) => {
                    let compliant = ReportAction { paste_sources: false, pad_engrams: false, ..report.clone() };
                    Some(Action::Report(compliant))
                }
                _ => None,
            }
        })
    }
}

fn actions_for(input: &TurnInput) -> Vec<Action> {
    match &input.step {
        Step::Brief { to, now, constraints, risks, packs, grants, .. } => vec![Action::Brief(BriefAction {
            to: to.clone(),
            now: now.clone(),
            constraints: constraints.clone(),
            risks: risks.clone(),
            packs: packs.clone(),
            grants: grants.clone(),
        })],
        Step::Deref { pointers, reason, intended_use, grant, .. } => vec![Action::Deref(DerefAction {
            pointers: pointers.clone(),
            reason: reason.clone(),
            intended_use: intended_use.clone(),
            grant: grant.clone(),
        })],
        Step::Report(step) => {
            // Misbehaviour exercises the gateways; the verbatim baseline has none, and its reports paste what they
            // cite anyway, so there the agent sends its ordinary report and the comparison stays like for like.
            let misbehave = if input.mode == WireMode::Less { step.misbehave } else { None };
            let (paste_sources, pad_engrams) = match misbehave {
                Some(Misbehaviour::PasteFiles | Misbehaviour::PasteTwice) => (true, false),
                Some(Misbehaviour::TooManyEngrams) => (false, true),
                None => (false, false),
            };
            let report = ReportAction {
                to: step.to.clone(),
                kind: step.kind.clone(),
                engrams: step.engrams.clone(),
                summary: step.summary.clone(),
                paste_sources,
                pad_engrams,
                grant: step.grant.clone(),
                repeat_offender: misbehave == Some(Misbehaviour::PasteTwice),
            };
            vec![Action::Report(report)]
        }
        Step::Query { text, k, project, scope, .. } => {
            vec![Action::Query { text: text.clone(), k: *k, project: project.clone(), scope: *scope }]
        }
        Step::Promote { subject, to, .. } => vec![Action::Promote { subject: subject.clone(), to: *to }],
        Step::Panic { agent } => {
            // Scripted crash, once: the restarted agent runs the step again with attempt 1 and carries on.
            assert!(input.attempt > 0, "scripted panic of {agent} (first attempt)");
            Vec::new()
        }
    }
}
