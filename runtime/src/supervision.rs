//! Restart intensity, as OTP defines it: a supervisor restarts a failed child at most [`MAX_RESTARTS`] times within
//! [`RESTART_WINDOW`]; one failure more within the window is not restarted but escalated: the run supervisor ends the
//! run (its infrastructure is permanent), a node leaves its agent down and tells the parent agent (agents are
//! transient), a parent's node gives the failed child's subtree up, and the summarizers' supervisor fails itself, so
//! that the run supervisor starts it again with its levels. One implementation serves them all.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

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
}
