//! A gate's verdict read from its report (cargo, pytest, JUnit, a `status:` line): what a run's gate reports and the
//! desk's gate adapter state without passing the report's text on.

use less_contract::GateStatus;

/// A gate's verdict as its report states it: a cargo or pytest summary, a JUnit `failures`/`errors` count, or a
/// `status: pass|fail` line. None when the report says neither (or both).
pub fn gate_status(report: &str) -> Option<GateStatus> {
    let lower = report.to_lowercase();
    let line_starts = |prefix: &str| lower.lines().any(|l| l.trim_start().starts_with(prefix));
    // A failing part fails the gate, whatever else passed.
    let failed = lower.contains("test result: failed")
        || line_starts("status: fail")
        || line_starts("failed ")
        || regex_count(&lower, r#"(?:failures|errors)="([0-9]+)""#).is_some_and(|n| n > 0)
        || regex_count(&lower, r"([0-9]+) failed").is_some_and(|n| n > 0);
    let passed = lower.contains("test result: ok")
        || line_starts("status: pass")
        || (lower.contains("<testsuite") && regex_count(&lower, r#"failures="([0-9]+)""#) == Some(0))
        || regex_count(&lower, r"([0-9]+) passed").is_some_and(|n| n > 0);
    if failed {
        Some(GateStatus::Fail)
    } else if passed {
        Some(GateStatus::Pass)
    } else {
        None
    }
}

/// The largest number the first group of `pattern` captures in `text`.
fn regex_count(text: &str, pattern: &str) -> Option<u64> {
    let re = regex::Regex::new(pattern).ok()?;
    re.captures_iter(text).filter_map(|c| c.get(1)?.as_str().parse().ok()).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_verdicts_are_read_from_common_report_forms() {
        assert_eq!(gate_status("test result: ok. 12 passed; 0 failed; 0 ignored"), Some(GateStatus::Pass));
        assert_eq!(gate_status("test result: FAILED. 11 passed; 1 failed"), Some(GateStatus::Fail));
        assert_eq!(gate_status("===== 3 failed, 40 passed in 2.1s ====="), Some(GateStatus::Fail));
        assert_eq!(gate_status("===== 40 passed in 2.1s ====="), Some(GateStatus::Pass));
        assert_eq!(gate_status(r#"<testsuite name="x" tests="4" failures="0" errors="0">"#), Some(GateStatus::Pass));
        assert_eq!(gate_status(r#"<testsuite name="x" tests="4" failures="0" errors="2">"#), Some(GateStatus::Fail));
        assert_eq!(gate_status("status: pass"), Some(GateStatus::Pass));
        assert_eq!(gate_status("all good, I think"), None);
    }
}
