//! Which turn may start when: the run's steps as a graph of what each waits for.
//!
//! A step is an agent's turn. It waits for the steps before it that it cannot overtake without changing what some
//! agent sees ([`Plan::of`]): its agent's previous step; every earlier step that addresses its agent (a brief to
//! it, a report to it, a grant request to it: a brief delivered wakes the child, the children's reports wake the
//! parent once all of them are in); every earlier step of an agent it addresses (a report does not land in the
//! middle of its receiver's turn); and every earlier step that writes what it reads (the run's memory, the claims).
//! Steps that wait for nothing unfinished run at once, up to the run's parallelism, the earliest first; with a
//! parallelism of 1 the steps run in the scenario's order.
//!
//! What the graph leaves free must not change what an agent sees: two senders' messages to one receiver arrive in
//! either order, and the receiver reads them ordered by (the sender's place in the hierarchy, the sender's message
//! number), not by arrival ([`Ordering::Causal`]); the memory's writes commute (an engram's id derives from what it
//! says). Recordings made before this order existed replay with [`Ordering::Arrival`], one step at a time.

use std::collections::BTreeSet;

use less_contract::{AgentKind, Scenario, Step};

/// How an agent reads what arrived while it was idle, and how messages are numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    /// By the sender's place in the hierarchy, then the sender's own message number (`<sender>-m<n>`, counted per
    /// sender): what an agent sees does not depend on timing, so turns may overlap.
    #[default]
    Causal,
    /// By arrival, messages numbered by one counter for the run: the order of runs (and recordings) made before
    /// turns could overlap. Only one turn at a time.
    Arrival,
}

impl Ordering {
    /// The name `run.json` and the command line use.
    pub fn as_str(self) -> &'static str {
        match self {
            Ordering::Causal => "causal",
            Ordering::Arrival => "arrival",
        }
    }
}

/// What a step touches beyond its own agent.
#[derive(Debug, Default)]
struct Touch {
    /// Agents it sends to or asks (briefed children, a report's receiver, the parent a read may ask for a grant).
    addresses: BTreeSet<String>,
    reads_memory: bool,
    writes_memory: bool,
    claims: bool,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    /// Whose turn it is.
    pub(crate) agent: String,
    /// The earlier steps it waits for, ascending.
    pub(crate) waits: Vec<usize>,
}

/// The steps of a scenario and what each waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) steps: Vec<Planned>,
}

impl Plan {
    /// The plan of `scenario`'s steps (see the module's rules).
    pub(crate) fn of(scenario: &Scenario) -> Plan {
        let touches: Vec<(String, Touch)> =
            scenario.steps.iter().map(|step| (step_agent(step).to_owned(), touch(scenario, step))).collect();
        let steps = touches
            .iter()
            .enumerate()
            .map(|(j, (agent, mine))| {
                let waits = touches[..j]
                    .iter()
                    .enumerate()
                    .filter(|(_, (other, theirs))| {
                        other == agent
                            || theirs.addresses.contains(agent)
                            || mine.addresses.contains(other)
                            || (theirs.writes_memory && mine.reads_memory)
                            || (theirs.reads_memory && mine.writes_memory)
                            || (theirs.claims && mine.claims)
                    })
                    .map(|(i, _)| i)
                    .collect();
                Planned { agent: agent.clone(), waits }
            })
            .collect();
        Plan { steps }
    }

    /// The steps not in `done` whose waits are all in `done`, ascending.
    pub(crate) fn ready(&self, done: &BTreeSet<usize>, started: &BTreeSet<usize>) -> Vec<usize> {
        (0..self.steps.len())
            .filter(|i| !done.contains(i) && !started.contains(i))
            .filter(|&i| self.steps[i].waits.iter().all(|w| done.contains(w)))
            .collect()
    }

    /// The longest chain of waits ending at each step, weighed by `cost` (a step's model time, say): the critical
    /// path of the run is the largest.
    pub(crate) fn critical_path(&self, cost: impl Fn(usize) -> u64) -> u64 {
        let mut longest = vec![0u64; self.steps.len()];
        for (j, step) in self.steps.iter().enumerate() {
            let before = step.waits.iter().map(|&w| longest[w]).max().unwrap_or(0);
            longest[j] = before + cost(j);
        }
        longest.into_iter().max().unwrap_or(0)
    }
}

/// The agent whose turn `step` is.
pub(crate) fn step_agent(step: &Step) -> &str {
    match step {
        Step::Brief { agent, .. }
        | Step::Deref { agent, .. }
        | Step::Query { agent, .. }
        | Step::Search { agent, .. }
        | Step::List { agent, .. }
        | Step::Promote { agent, .. }
        | Step::Claim { agent, .. }
        | Step::Release { agent, .. }
        | Step::Panic { agent } => agent,
        Step::Report(report) => &report.agent,
    }
}

fn touch(scenario: &Scenario, step: &Step) -> Touch {
    let agent = step_agent(step);
    let parent = scenario.agent(agent).and_then(|a| a.parent.clone());
    // A model that does not choose its own actions may recall from the memory while it reads or reports; one that
    // does chooses among searches, lists and reads, and never recalls.
    let recalls = scenario
        .agent(agent)
        .is_some_and(|a| a.kind == AgentKind::Llm && !a.llm.as_ref().is_some_and(|llm| llm.choose_actions));
    let mut touch = Touch::default();
    match step {
        Step::Brief { to, .. } => {
            let children: Vec<String> = if to.is_empty() {
                scenario.children(agent).into_iter().map(|c| c.id.clone()).collect()
            } else {
                to.clone()
            };
            touch.addresses.extend(children);
        }
        Step::Deref { .. } => {
            // A read over budget asks the parent for a grant.
            touch.addresses.extend(parent);
            touch.reads_memory = recalls;
        }
        Step::Report(report) => {
            touch.addresses.extend(report.to.clone().or_else(|| parent.clone()));
            // A refused resend escalates to the parent, and a read on the way may ask it for a grant.
            touch.addresses.extend(parent);
            touch.writes_memory = true;
            touch.reads_memory = recalls;
        }
        Step::Query { .. } => touch.reads_memory = true,
        Step::Promote { .. } => {
            touch.reads_memory = true;
            touch.writes_memory = true;
        }
        Step::Claim { .. } | Step::Release { .. } => {
            touch.claims = true;
            // An override escalates to the parent.
            touch.addresses.extend(parent);
        }
        Step::Search { .. } | Step::List { .. } | Step::Panic { .. } => {}
    }
    touch.addresses.remove(agent);
    touch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(steps: &str) -> Scenario {
        let text = format!(
            r#"
name = "plan"
description = "plan"
workspace = "."
[[agents]]
id = "lead"
role = "lead"
[[agents]]
id = "a"
role = "worker"
parent = "lead"
[[agents]]
id = "b"
role = "worker"
parent = "lead"
{steps}
"#
        );
        Scenario::from_toml(&text, std::path::Path::new(".")).expect("a valid scenario")
    }

    #[test]
    fn siblings_briefed_together_wait_only_for_the_brief_and_the_parent_for_both_reports() {
        let s = scenario(
            r#"
[[steps]]
action = "brief"
agent = "lead"
now = ["go"]
[[steps]]
action = "search"
agent = "a"
query = "x"
[[steps]]
action = "search"
agent = "b"
query = "y"
[[steps]]
action = "report"
agent = "a"
type = "task_result"
task = "t"
status = "pass"
[[steps]]
action = "report"
agent = "b"
type = "task_result"
task = "t"
status = "pass"
[[steps]]
action = "query"
agent = "lead"
text = "what"
"#,
        );
        let plan = Plan::of(&s);
        let waits: Vec<Vec<usize>> = plan.steps.iter().map(|p| p.waits.clone()).collect();
        assert_eq!(waits, vec![vec![], vec![0], vec![0], vec![0, 1], vec![0, 2], vec![0, 3, 4]]);
        // Both searches start once the brief is done; the two reports overlap.
        let done: BTreeSet<usize> = [0].into();
        assert_eq!(plan.ready(&done, &BTreeSet::new()), vec![1, 2]);
        let done: BTreeSet<usize> = [0, 1, 2].into();
        assert_eq!(plan.ready(&done, &BTreeSet::new()), vec![3, 4]);
        assert_eq!(plan.ready(&done, &[3].into()), vec![4]);
        // The critical path: brief, a search and a report, the query.
        assert_eq!(plan.critical_path(|i| [10, 5, 7, 1, 1, 3][i]), 10 + 7 + 1 + 3);
    }

    #[test]
    fn a_recall_waits_for_every_earlier_write_and_claims_keep_their_order() {
        let s = scenario(
            r#"
[[steps]]
action = "report"
agent = "a"
type = "task_result"
task = "t"
status = "pass"
[[steps]]
action = "query"
agent = "b"
text = "what did a find"
[[steps]]
action = "claim"
agent = "a"
surfaces = ["src/**"]
task = "t"
[[steps]]
action = "claim"
agent = "b"
surfaces = ["src/lib.rs"]
task = "u"
"#,
        );
        let plan = Plan::of(&s);
        assert_eq!(plan.steps[1].waits, vec![0], "b's recall sees a's report");
        // b's claim waits for a's (same surfaces) and for its own query; a's claim for its report.
        assert_eq!(plan.steps[2].waits, vec![0]);
        assert_eq!(plan.steps[3].waits, vec![1, 2]);
    }
}
