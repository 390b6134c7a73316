//! Supervision as OTP describes it, in one place: restart intensity, restart types, strategies and the order
//! children start and stop in.
//!
//! - **Intensity**: a supervisor restarts a failed child at most [`MAX_RESTARTS`] times within [`RESTART_WINDOW`];
//!   one failure more within the window is not restarted but escalated: the run supervisor ends the run (its
//!   infrastructure is permanent), a node leaves its agent down and tells the parent agent (agents are transient), a
//!   parent's node gives the failed child's subtree up, and the summarizers' supervisor fails itself, so that the run
//!   supervisor starts it again with its levels. The count is per child (a crash-looping agent does not use up its
//!   siblings' restarts), where OTP counts per supervisor.
//! - **Restart types** ([`Restart`]): permanent children (the run's infrastructure, the summarizer levels) are
//!   restarted however they ended; transient ones (agents and their nodes) only when they failed; temporary ones never.
//! - **Strategies** ([`Strategy`]): one_for_one restarts the failed child alone (agents, and the run's services,
//!   which reach each other through slots and books a restart leaves in place); rest_for_one restarts it and every
//!   child started after it, in start order (the summarizer levels: an arc reads what sessions write, an epoch what
//!   arcs write).
//! - **Order**: [`Children`] keeps its children in start order; a supervisor stops them in reverse
//!   ([`Children::stop_order`]), each after the ones that depend on it, so the ledger that records them stops last.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

use ractor::ActorCell;

/// Most restarts of one child per [`RESTART_WINDOW`].
pub const MAX_RESTARTS: usize = 3;
/// The window [`MAX_RESTARTS`] counts over.
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// What a supervisor does with a child's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Start it again.
    Restart,
    /// It failed more than the intensity allows: give it up and tell the supervisor's own supervisor (or parent).
    Escalate,
}

/// The failures of one child within the window.
#[derive(Debug, Clone)]
pub struct Intensity {
    max: usize,
    period: Duration,
    restarts: VecDeque<Instant>,
}

impl Default for Intensity {
    fn default() -> Intensity {
        Intensity::new(MAX_RESTARTS, RESTART_WINDOW)
    }
}

impl Intensity {
    /// At most `max` restarts within `period`.
    pub fn new(max: usize, period: Duration) -> Intensity {
        Intensity { max, period, restarts: VecDeque::new() }
    }

    /// The child failed at `now`: restart it while fewer than `max` restarts happened within the period before,
    /// else escalate (the failure is not counted as a restart).
    pub fn on_failure(&mut self, now: Instant) -> Verdict {
        while self.restarts.front().is_some_and(|t| now.duration_since(*t) >= self.period) {
            self.restarts.pop_front();
        }
        if self.restarts.len() >= self.max {
            return Verdict::Escalate;
        }
        self.restarts.push_back(now);
        Verdict::Restart
    }

    /// Restarts within the period, as of the last failure.
    pub fn recent(&self) -> usize {
        self.restarts.len()
    }
}

/// The intensity of each child of a supervisor, by its name.
#[derive(Debug, Clone)]
pub struct Intensities<K> {
    children: HashMap<K, Intensity>,
}

impl<K> Default for Intensities<K> {
    fn default() -> Intensities<K> {
        Intensities { children: HashMap::new() }
    }
}

impl<K: Hash + Eq> Intensities<K> {
    /// Child `key` failed now ([`Intensity::on_failure`] with the defaults).
    pub fn on_failure(&mut self, key: K) -> Verdict {
        self.children.entry(key).or_default().on_failure(Instant::now())
    }
}

/// How long a child may take to stop (to finish the message in hand and its `post_stop`) before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Stops `children` of `supervisor` one after the other, in the order given (a supervisor's
/// [`Children::stop_order`]): each finishes the message in hand and runs its `post_stop` (within [`STOP_GRACE`], else
/// it is killed) before the next is asked. Unlinked first, so its end is not a failure to the stopping supervisor.
pub async fn stop_in_order(supervisor: &ActorCell, children: impl IntoIterator<Item = ActorCell>) {
    for child in children {
        child.unlink(supervisor.clone());
        if child.stop_and_wait(None, Some(STOP_GRACE)).await.is_err() {
            let _ = child.kill_and_wait(Some(STOP_GRACE)).await;
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It stopped on its own or was stopped (not by its supervisor).
    Normal,
    /// It failed (panicked or returned an error).
    Failed,
}

/// When a child is restarted (OTP's restart types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Always: the run cannot go on without it.
    Permanent,
    /// Only after a failure: one that stopped normally is done.
    Transient,
    /// Never.
    Temporary,
}

impl Restart {
    /// Whether a child of this type that ended with `exit` is started again (within its intensity).
    pub fn restarts(self, exit: Exit) -> bool {
        match self {
            Restart::Permanent => true,
            Restart::Transient => exit == Exit::Failed,
            Restart::Temporary => false,
        }
    }
}

/// Which children a supervisor restarts when one ends and is to be restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The child alone.
    OneForOne,
    /// The child and every child started after it, stopped in reverse and started again in order.
    RestForOne,
}

/// What a supervisor does when a child ends ([`Children::on_exit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response<K> {
    /// Start these again, in this order (the ended child first). For rest_for_one the others are still running: stop
    /// them first, last started first.
    Restart(Vec<K>),
    /// Its restart type says it is done: forget it.
    Forget,
    /// Past its intensity: give it up and escalate.
    Escalate,
}

/// A supervisor's children in start order, with their restart types, intensities and the supervisor's strategy.
#[derive(Debug, Clone)]
pub struct Children<K> {
    strategy: Strategy,
    order: Vec<(K, Restart)>,
    intensities: Intensities<K>,
}

impl<K: Clone + Hash + Eq> Children<K> {
    /// No children yet.
    pub fn new(strategy: Strategy) -> Children<K> {
        Children { strategy, order: Vec::new(), intensities: Intensities::default() }
    }

    /// The supervisor's strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// `key` was started: appended to the start order (a restarted child keeps its place).
    pub fn started(&mut self, key: K, restart: Restart) {
        if !self.order.iter().any(|(k, _)| *k == key) {
            self.order.push((key, restart));
        }
    }

    /// `key` ended with `exit`: what to do. A child the supervisor does not know is escalated.
    pub fn on_exit(&mut self, key: &K, exit: Exit) -> Response<K> {
        self.on_exit_at(key, exit, Instant::now())
    }

    fn on_exit_at(&mut self, key: &K, exit: Exit, now: Instant) -> Response<K> {
        let Some(at) = self.order.iter().position(|(k, _)| k == key) else { return Response::Escalate };
        if !self.order[at].1.restarts(exit) {
            self.order.remove(at);
            return Response::Forget;
        }
        let intensity = self.intensities.children.entry(key.clone()).or_default();
        if intensity.on_failure(now) == Verdict::Escalate {
            return Response::Escalate;
        }
        match self.strategy {
            Strategy::OneForOne => Response::Restart(vec![key.clone()]),
            Strategy::RestForOne => Response::Restart(self.order[at..].iter().map(|(k, _)| k.clone()).collect()),
        }
    }

    /// The children, last started first: the order a supervisor stops them in.
    pub fn stop_order(&self) -> Vec<K> {
        self.order.iter().rev().map(|(k, _)| k.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loop_is_restarted_max_times_then_escalates_and_a_quiet_period_forgives() {
        let start = Instant::now();
        let mut intensity = Intensity::new(3, Duration::from_secs(60));
        let at = |s: u64| start + Duration::from_secs(s);
        let verdicts: Vec<Verdict> = (0..5).map(|s| intensity.on_failure(at(s))).collect();
        assert_eq!(
            verdicts,
            [Verdict::Restart, Verdict::Restart, Verdict::Restart, Verdict::Escalate, Verdict::Escalate]
        );
        // A minute after the first restart it no longer counts: one more restart is allowed.
        assert_eq!(intensity.on_failure(at(60)), Verdict::Restart);
        assert_eq!(intensity.on_failure(at(60)), Verdict::Escalate);
        // Failures spread wider than the period never escalate.
        let mut spread = Intensity::new(3, Duration::from_secs(60));
        assert!((0..20).all(|n| spread.on_failure(at(n * 30)) == Verdict::Restart));
        assert!(spread.recent() <= 2);
    }

    #[test]
    fn each_child_has_its_own_intensity() {
        let mut children = Intensities::default();
        for _ in 0..3 {
            assert_eq!(children.on_failure("ledger"), Verdict::Restart);
        }
        assert_eq!(children.on_failure("ledger"), Verdict::Escalate);
        assert_eq!(children.on_failure("memory"), Verdict::Restart);
    }

    #[test]
    fn restart_types_decide_whether_an_ended_child_comes_back() {
        assert!(Restart::Permanent.restarts(Exit::Normal) && Restart::Permanent.restarts(Exit::Failed));
        assert!(!Restart::Transient.restarts(Exit::Normal) && Restart::Transient.restarts(Exit::Failed));
        assert!(!Restart::Temporary.restarts(Exit::Normal) && !Restart::Temporary.restarts(Exit::Failed));
        let mut children = Children::new(Strategy::OneForOne);
        children.started("ledger", Restart::Permanent);
        children.started("lead", Restart::Transient);
        assert_eq!(children.on_exit(&"ledger", Exit::Normal), Response::Restart(vec!["ledger"]));
        assert_eq!(children.on_exit(&"lead", Exit::Failed), Response::Restart(vec!["lead"]));
        // A transient child that stopped normally is done: forgotten, not restarted, and no longer stopped later.
        assert_eq!(children.on_exit(&"lead", Exit::Normal), Response::Forget);
        assert_eq!(children.stop_order(), ["ledger"]);
        assert_eq!(children.on_exit(&"stranger", Exit::Failed), Response::Escalate);
    }

    #[test]
    fn rest_for_one_restarts_the_later_children_in_start_order_and_stop_order_is_the_reverse() {
        let mut levels = Children::new(Strategy::RestForOne);
        for level in ["session", "arc", "epoch"] {
            levels.started(level, Restart::Permanent);
        }
        assert_eq!(levels.stop_order(), ["epoch", "arc", "session"]);
        assert_eq!(levels.on_exit(&"session", Exit::Failed), Response::Restart(vec!["session", "arc", "epoch"]));
        assert_eq!(levels.on_exit(&"arc", Exit::Failed), Response::Restart(vec!["arc", "epoch"]));
        assert_eq!(levels.on_exit(&"epoch", Exit::Failed), Response::Restart(vec!["epoch"]));
        // A restarted child keeps its place in the order.
        levels.started("session", Restart::Permanent);
        assert_eq!(levels.stop_order(), ["epoch", "arc", "session"]);
        let mut agents = Children::new(Strategy::OneForOne);
        agents.started("a", Restart::Transient);
        agents.started("b", Restart::Transient);
        assert_eq!(agents.on_exit(&"a", Exit::Failed), Response::Restart(vec!["a"]));
    }

    #[test]
    fn a_crash_loop_under_a_strategy_escalates_at_the_intensity() {
        let start = Instant::now();
        let mut children = Children::new(Strategy::RestForOne);
        children.started("session", Restart::Permanent);
        children.started("arc", Restart::Permanent);
        let verdicts: Vec<Response<&str>> = (0..4).map(|_| children.on_exit_at(&"arc", Exit::Failed, start)).collect();
        assert_eq!(
            verdicts[..3],
            [Response::Restart(vec!["arc"]), Response::Restart(vec!["arc"]), Response::Restart(vec!["arc"])]
        );
        assert_eq!(verdicts[3], Response::Escalate);
        // The sibling's intensity is its own.
        assert_eq!(children.on_exit_at(&"session", Exit::Failed, start), Response::Restart(vec!["session", "arc"]));
    }
}
