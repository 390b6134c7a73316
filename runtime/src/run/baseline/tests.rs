//! The baselines' text: what the fair brief and report contain (and leave out), what the whole-file brief pastes,
//! and when an agent already holds what it asks to dereference.

use super::*;
use less_contract::Ttl;
use less_contract::{EngramKind, Provenance, Scope, Source};
use less_contract::{GateStatus, TaskStatus};

fn plan() -> Plan {
    Plan {
        goal: "Split billing out of orders.".to_owned(),
        criteria: vec!["Totals unchanged".to_owned(), "Events in order".to_owned()],
        artifacts: vec!["artifact:docs/PLAN.md#sec=Steps".to_owned()],
    }
}

fn engram(kind: EngramKind, claim: &str, pointers: &[&str]) -> Engram {
    Engram {
        id: "eg_1".to_owned(),
        kind,
        claim: claim.to_owned(),
        pointers: pointers.iter().map(|t| Pointer::parse(t).expect("pointer")).collect(),
        confidence: 0.8,
        ttl: Ttl::days(7),
        scope: Scope::Run,
        tags: None,
        hash_keys: None,
        provenance: Provenance {
            created_at: "2026-01-01T00:00:00Z".to_owned(),
            created_by: "dev".to_owned(),
            source: Source::Agent,
        },
    }
}

#[test]
fn the_fair_brief_restates_the_plan_and_known_reports_and_pastes_the_packed_spans() {
    let prior = vec!["Report from w1 to lead, task_result t1: pass.\nTax is per line.\n".to_owned()];
    let now = vec!["Find the discount cap.".to_owned(), "Task t4: Where are discounts capped?".to_owned()];
    let constraints = vec!["Cite spans.".to_owned()];
    let pasted = vec![
        (
            "repo:src/pricing.rs#L128-L131".to_owned(),
            "/// The total of all discounts, capped.\nfn resolve() {}\n".to_owned(),
        ),
        ("repo:src/config.rs".to_owned(), "whole config file".to_owned()),
    ];
    let plan = plan();
    let symbols = vec!["F12: src/pricing.rs".to_owned()];
    let prior_work = vec!["w1: Capped discounts\nwhere: F12".to_owned(), "w2: Logged the cap".to_owned()];
    let text = fair_brief(&BriefText {
        from: "lead",
        to: "w4",
        plan: Some(&plan),
        prior_reports: &prior,
        now: &now,
        constraints: &constraints,
        risks: &[],
        pasted: &pasted,
        symbols: &symbols,
        prior_work: &prior_work,
    });
    let expected = "Brief from lead to w4.\n\nGoal: Split billing out of orders.\n\nAcceptance criteria:\n\
        1. Totals unchanged\n2. Events in order\n\nPrior reports:\nReport from w1 to lead, task_result t1: pass.\n\
        Tax is per line.\n\nNames used:\n- F12: src/pricing.rs\n\nPrior work:\nw1: Capped discounts\nwhere: F12\n\
        w2: Logged the cap\n\nWhat matters now:\n- Find the discount cap.\n- Task t4: Where are discounts capped?\n\n\
        Constraints:\n- Cite spans.\n\n=== repo:src/pricing.rs#L128-L131 ===\n/// The total of all discounts, capped.\n\
        fn resolve() {}\n\n=== repo:src/config.rs ===\nwhole config file\n";
    assert_eq!(text, expected);
    // The plan's documents are not pasted: only what the pack points to.
    assert!(!text.contains("PLAN.md"));
}

#[test]
fn an_empty_fair_brief_has_no_empty_sections() {
    let now = vec!["Go.".to_owned()];
    let text = fair_brief(&BriefText { from: "a", to: "b", now: &now, ..BriefText::default() });
    assert_eq!(text, "Brief from a to b.\n\nWhat matters now:\n- Go.\n");
}

#[test]
fn a_fair_report_is_prose_with_citations_then_each_span_once() {
    let payload = Payload::GateReport { gate_id: "review".to_owned(), status: GateStatus::Fail, report_ref: None };
    let engrams = vec![
        engram(
            EngramKind::Risk,
            "No event is recorded after the diff.",
            &["diff:a..b#src/billing/capture.rs", "repo:src/orders/service.rs#L143-L165"],
        ),
        engram(EngramKind::Test, "capture_is_idempotent fails.", &["test:billing::capture_is_idempotent"]),
    ];
    let prose = report_prose("reviewer", "director", &payload, "The diff drops the events.\n", &engrams);
    assert_eq!(
        prose,
        "Report from reviewer to director, gate_report review: fail.\nThe diff drops the events.\n\
         - risk: No event is recorded after the diff. (diff:a..b#src/billing/capture.rs, \
         repo:src/orders/service.rs#L143-L165)\n- test: capture_is_idempotent fails. \
         (test:billing::capture_is_idempotent)\n"
    );
    let pasted = vec![("repo:src/orders/service.rs#L143-L165".to_owned(), "let was_paid = ...;".to_owned())];
    let wire = fair_report(&prose, &pasted);
    assert_eq!(wire, format!("{prose}\nSources:\n=== repo:src/orders/service.rs#L143-L165 ===\nlet was_paid = ...;\n"));
    // A report that cites nothing pastes nothing.
    assert_eq!(fair_report(&prose, &[]), prose);
    let task = Payload::TaskResult {
        task: "t1".to_owned(),
        status: TaskStatus::Partial,
        criteria: vec![],
        commit: None,
        capsule: None,
    };
    assert!(report_prose("w", "lead", &task, "", &[]).starts_with("Report from w to lead, task_result t1: partial.\n"));
}

#[test]
fn the_whole_file_brief_pastes_documents_files_and_every_report() {
    let plan = plan();
    let docs = vec![("docs/PLAN.md".to_owned(), "# Plan\nwhole plan".to_owned())];
    let reports = vec!["Report 1 with pasted sources".to_owned()];
    let lines = vec!["Go.".to_owned()];
    let files = vec![("src/pricing.rs".to_owned(), "the whole file".to_owned())];
    let text = whole_brief(&WholeBriefText {
        from: "a",
        to: "b",
        plan: Some(&plan),
        plan_documents: &docs,
        all_reports: &reports,
        lines: &lines,
        files: &files,
        symbols: &["F12: src/pricing.rs".to_owned()],
        prior_work: &["w3: Unrelated work".to_owned()],
    });
    for part in [
        "Names used:\n- F12: src/pricing.rs",
        "Prior work:\nw3: Unrelated work",
        "# Plan\nSplit billing",
        "1. Totals unchanged",
        "# docs/PLAN.md\n# Plan\nwhole plan",
        "Report 1 with pasted",
        "- Go.",
        "# File src/pricing.rs\nthe whole file",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
}

#[test]
fn holding_a_span_covers_what_is_inside_it() {
    let p = |t: &str| Pointer::parse(t).expect("pointer");
    assert!(holds(&p("repo:a.rs"), &p("repo:a.rs#L5-L9")));
    assert!(holds(&p("repo:a.rs#L1-L20"), &p("repo:a.rs#L5-L9")));
    assert!(!holds(&p("repo:a.rs#L6-L20"), &p("repo:a.rs#L5-L9")), "a partial overlap is not held");
    assert!(!holds(&p("repo:a.rs#L1-L20"), &p("repo:a.rs")), "a span does not hold the whole file");
    assert!(!holds(&p("repo:b.rs"), &p("repo:a.rs#L5-L9")));
    assert!(holds(&p("artifact:S.md#sec=A"), &p("artifact:S.md#sec=A")));
    assert!(!holds(&p("artifact:S.md#sec=A"), &p("artifact:S.md#sec=B")));
    assert!(holds(&p("test:x::y"), &p("test:x::y")));
}
