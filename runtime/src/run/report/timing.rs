//! What a run's turns took in time, and the order of its events as if its turns had never overlapped.
//!
//! Counts never depend on timing; the report's [`Timing`] is the one part of it that does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::run::conduct::Plan;
use crate::run::ledger::Event;
use less_contract::Scenario;

/// How long the run's turns took: wall time, the model's time in all and along the critical path (the longest chain
/// of steps each waiting for the one before), and how many turns ran at once at most.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// From the first turn's start to the last turn's end, in milliseconds.
    pub wall_ms: u64,
    /// Turns timed.
    pub turns: usize,
    /// The model's time over every turn, in milliseconds (what a run one turn at a time waits at least).
    pub model_ms: u64,
    /// The model's time along the critical path, in milliseconds: the least wall time any parallelism could give.
    pub critical_path_model_ms: u64,
    /// The most turns that ran at once.
    pub most_at_once: usize,
}

impl Timing {
    /// The timing of the turns `events` record (`None` when none was timed: a ledger written before turns were).
    pub fn of(scenario: &Scenario, events: &[Event]) -> Option<Timing> {
        let mut model_by_step: BTreeMap<usize, u64> = BTreeMap::new();
        let mut spans = Vec::new();
        for event in events {
            if let Event::TurnEnd { index, started_ms, ended_ms, model_ms, .. } = event {
                *model_by_step.entry(*index).or_default() += model_ms;
                spans.push((*started_ms, *ended_ms));
            }
        }
        if spans.is_empty() {
            return None;
        }
        let start = spans.iter().map(|s| s.0).min().unwrap_or(0);
        let end = spans.iter().map(|s| s.1).max().unwrap_or(0);
        // Starts before ends at the same instant: a turn that starts as another ends does not overlap it.
        let mut edges: Vec<(u64, i32)> = spans.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
        edges.sort_by_key(|&(at, delta)| (at, delta));
        let (mut now, mut most) = (0i32, 0i32);
        for (_, delta) in edges {
            now += delta;
            most = most.max(now);
        }
        let plan = Plan::of(scenario);
        let critical = plan.critical_path(|i| model_by_step.get(&i).copied().unwrap_or(0));
        Some(Timing {
            wall_ms: end.saturating_sub(start),
            turns: spans.len(),
            model_ms: model_by_step.values().sum(),
            critical_path_model_ms: critical,
            most_at_once: usize::try_from(most).unwrap_or(0),
        })
    }
}

/// The agents an event names (a gateway's escalation under its agent).
fn named(event: &Event) -> Vec<&str> {
    let names: Vec<&String> = match event {
        Event::Delivered { from, to, .. }
        | Event::Dropped { from, to, .. }
        | Event::Rejected { from, to, .. }
        | Event::Resent { from, to, .. } => {
            vec![from, to]
        }
        Event::Escalated { about, to, .. } => vec![about, to],
        Event::GrantIssued { issuer, grantee, .. } => vec![grantee, issuer],
        Event::GrantAsked { requester, parent, .. } => vec![requester, parent],
        Event::GrantDenied { issuer, requester, .. } => vec![requester, issuer],
        Event::Deref { agent, .. }
        | Event::Spilled { agent, .. }
        | Event::TurnLimit { agent, .. }
        | Event::Query { agent, .. }
        | Event::Search { agent, .. }
        | Event::List { agent, .. }
        | Event::Describe { agent, .. }
        | Event::MemoryPut { agent, .. }
        | Event::Promote { agent, .. }
        | Event::Claim { agent, .. }
        | Event::Release { agent, .. }
        | Event::Answer { agent, .. }
        | Event::Restart { agent, .. }
        | Event::ModelUsage { agent, .. }
        | Event::AgentDown { agent, .. }
        | Event::SubtreeLost { agent, .. } => vec![agent],
        Event::ServiceRestart { .. } | Event::Step { .. } | Event::TurnEnd { .. } | Event::Resumed { .. } => Vec::new(),
    };
    names.into_iter().map(|n| n.strip_suffix("-gw").unwrap_or(n)).collect()
}

/// `events` in the order a run one turn at a time would have recorded them, when turns overlapped (`None` when
/// none did: the order is that already). Each event goes with the running step of an agent it names (the sender's
/// or the receiver's, the requester's of a grant), else with the earliest running step, else with the latest step
/// started; the events of a step keep their order.
pub(crate) fn in_step_order(events: &[Event]) -> Option<Vec<Event>> {
    let mut running: Vec<(usize, &str)> = Vec::new();
    let mut overlapped = false;
    let mut latest: Option<usize> = None;
    let mut keyed: Vec<(usize, usize)> = Vec::with_capacity(events.len());
    for (at, event) in events.iter().enumerate() {
        let step = match event {
            Event::Step { index, agent, .. } => {
                overlapped |= !running.is_empty();
                running.push((*index, agent));
                latest = Some(latest.map_or(*index, |l| l.max(*index)));
                Some(*index)
            }
            Event::TurnEnd { index, .. } => {
                running.retain(|(i, _)| i != index);
                Some(*index)
            }
            other => {
                let names = named(other);
                let mine = running.iter().filter(|(_, a)| names.contains(a)).map(|(i, _)| *i).min();
                mine.or_else(|| running.iter().map(|(i, _)| *i).min()).or(latest)
            }
        };
        keyed.push((step.map_or(0, |s| s + 1), at));
    }
    if !overlapped {
        return None;
    }
    keyed.sort();
    Some(keyed.into_iter().map(|(_, at)| events[at].clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: usize, agent: &str) -> Event {
        Event::Step { index, agent: agent.into(), action: "report".into() }
    }

    fn end(index: usize, agent: &str, started_ms: u64, ended_ms: u64, model_ms: u64) -> Event {
        Event::TurnEnd { index, agent: agent.into(), started_ms, ended_ms, model_ms }
    }

    fn put(agent: &str, id: &str) -> Event {
        Event::MemoryPut {
            agent: agent.into(),
            id: id.into(),
            status: "stored".into(),
            superseded: Vec::new(),
            contradictions: Vec::new(),
            code: None,
            message: String::new(),
        }
    }

    #[test]
    fn overlapping_turns_are_put_back_in_step_order_and_sequential_ones_are_left_alone() {
        let overlapped = vec![
            step(0, "a"),
            step(1, "b"),
            put("b", "b1"),
            put("a", "a1"),
            end(1, "b", 0, 5, 0),
            put("a", "a2"),
            end(0, "a", 0, 9, 0),
        ];
        let ordered = in_step_order(&overlapped).expect("the turns overlapped");
        let ids: Vec<String> = ordered
            .iter()
            .filter_map(|e| match e {
                Event::MemoryPut { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["a1", "a2", "b1"]);
        let sequential = vec![
            step(0, "a"),
            put("a", "a1"),
            end(0, "a", 0, 5, 0),
            step(1, "b"),
            put("b", "b1"),
            end(1, "b", 5, 9, 0),
        ];
        assert!(in_step_order(&sequential).is_none());
    }
}
