//! The evaluation's own tests: the suites are deterministic and cover every miss kind, the checks read the output
//! (and fail a ledger that lies), and the ledger passes them where the baselines cannot, on the seeded scenarios and
//! on the paraphrase set's two splits.

use less_runtime::context::LEDGER_HEADER;

use super::suite as eval_suite;
use super::*;

/// The ledger engine's output whatever its size (a short chat's ledger is larger than the chat, and the default
/// would return it unchanged).
fn compact_default(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let compaction = compact_report(messages, &CompactConfig { keep_if_larger: true, ..CompactConfig::default() });
    assert_eq!(compaction.warning, None);
    compaction.messages
}

#[test]
fn compacting_a_compacted_conversation_changes_nothing() {
    for scenario in eval_suite().iter().filter(|s| s.messages.len() <= 1200) {
        let once = compact_default(&scenario.messages);
        let twice = compact_default(&once);
        assert_eq!(once, twice, "{}", scenario.name);
    }
}

#[test]
fn the_suite_has_thirty_scenarios_long_ones_among_them_and_is_deterministic() {
    let suite = eval_suite();
    assert!(suite.len() >= 30, "{}", suite.len());
    assert!(suite.iter().filter(|s| s.messages.len() >= 1000).count() >= 4);
    let again = eval_suite();
    for (a, b) in suite.iter().zip(&again) {
        assert_eq!(a.messages, b.messages, "{}", a.name);
    }
    for kind in MissKind::ALL {
        let n: usize = suite.iter().map(|s| s.check(&s.messages).iter().filter(|c| c.0 == kind).count()).sum();
        assert!(n >= 5, "{kind:?} has {n} checks");
    }
}

#[test]
fn the_ledger_passes_every_check_and_the_baselines_do_not() {
    let report = evaluate(&eval_suite());
    let ledger = &report.engines[0];
    assert_eq!(ledger.engine, Engine::Ledger);
    assert!(ledger.failures.is_empty(), "{:#?}", ledger.failures);
    for baseline in &report.engines[1..] {
        let (passed, total) = baseline.total();
        assert!(passed < total, "{}: {passed}/{total}", baseline.engine);
    }
    let truncate = &report.engines[2];
    assert!(truncate.by_kind[&MissKind::SecretExposed].0 < truncate.by_kind[&MissKind::SecretExposed].1);
}

#[test]
fn the_paraphrase_set_has_fourteen_phrasings_per_family_and_language_and_a_disjoint_held_out_split() {
    let suite = paraphrase_suite();
    let again = paraphrase_suite();
    for (a, b) in suite.dev.iter().chain(&suite.held_out).zip(again.dev.iter().chain(&again.held_out)) {
        assert_eq!(a.messages, b.messages, "{}", a.name);
    }
    // Scenario names are family_lang_index_split: one scenario per phrasing under test.
    let mut per_family: BTreeMap<(String, String), (usize, usize)> = Default::default();
    for (split, cases) in [(Split::Dev, &suite.dev), (Split::HeldOut, &suite.held_out)] {
        for case in cases {
            let parts: Vec<&str> = case.name.split('_').collect();
            assert!(case.name.ends_with(split.as_str()), "{}", case.name);
            let counts = per_family.entry((parts[0].to_owned(), parts[1].to_owned())).or_default();
            if split == Split::Dev { counts.0 += 1 } else { counts.1 += 1 }
        }
    }
    assert_eq!(per_family.len(), 32, "16 families, English and Russian: {per_family:?}");
    for (family, (n_dev, n_held)) in &per_family {
        assert!(n_dev + n_held >= 14 && *n_dev >= 10, "{family:?}: {n_dev} + {n_held}");
        assert_eq!(*n_held, N_HELD_OUT, "{family:?}");
    }
    let dev: std::collections::BTreeSet<&str> = suite.dev.iter().map(|c| c.name.trim_end_matches("_dev")).collect();
    assert!(suite.held_out.iter().all(|c| !dev.contains(c.name.trim_end_matches("_held_out"))));
    for kind in MissKind::ALL {
        let n = |cases: &[EvalCase]| -> usize {
            cases.iter().map(|s| s.check(&s.messages).iter().filter(|c| c.0 == kind).count()).sum()
        };
        assert!(n(&suite.dev) >= 20 && n(&suite.held_out) >= 8, "{kind:?}");
    }
}

#[test]
fn the_ledger_generalizes_to_paraphrases_and_recompaction_is_idempotent_on_them() {
    let suite = paraphrase_suite();
    let dev = evaluate(&suite.dev);
    let held_out = evaluate(&suite.held_out);
    for report in [&dev, &held_out] {
        let ledger = &report.engines[0];
        assert_eq!(ledger.engine, Engine::Ledger);
        for kind in MissKind::ALL {
            let (passed, total) = ledger.by_kind[&kind];
            // Every miss kind covered and mostly passed (the held-out split has 16 checks of some kinds, so one miss
            // is six points); the baselines fail what they cannot see.
            assert!(total > 0 && passed * 20 >= total * 17, "{kind:?}: {passed}/{total}: {:#?}", ledger.failures);
        }
        let (ledger_passed, _) = ledger.total();
        for baseline in &report.engines[1..] {
            assert!(baseline.total().0 < ledger_passed, "{}", baseline.engine);
        }
        // Compacting the compacted output changes nothing, on every scenario.
        let (stable, n) = report.recompaction.idempotent;
        assert_eq!(stable, n, "{:#?}", report.recompaction.failures);
        assert_eq!(report.recompaction.continued.0, ledger_passed, "two steps keep what one step keeps");
    }
    // The decision reversed twice in other words (the miss that motivated the set): none left the older one active.
    for report in [&dev, &held_out] {
        let (passed, total) = report.engines[0].by_kind[&MissKind::SupersededDecision];
        assert_eq!(passed, total, "{:#?}", report.engines[0].failures);
    }
}

#[test]
fn the_checks_read_the_output_and_fail_a_ledger_that_lies() {
    let suite = eval_suite();
    let scenario = suite.iter().find(|s| s.name == "supersession_en").expect("scenario");
    let output = compact_default(&scenario.messages);
    assert!(scenario.check(&output).iter().all(|c| c.2));
    // The stale value listed as active: the stale-fact check fails.
    let mut lying = output.clone();
    for message in &mut lying {
        if message.content.starts_with(LEDGER_HEADER) {
            message.content = message.content.replace("- deploy target: beta-02", "- deploy target: alpha-01");
        }
    }
    assert!(scenario.check(&lying).iter().any(|c| c.0 == MissKind::StaleFact && !c.2));
    // The raw conversation leaks nothing in this scenario but misses no fact either: the checks are about output.
    assert!(scenario.check(&scenario.messages).iter().all(|c| c.2));
    let secrets = suite.iter().find(|s| s.name == "secrets_key_value").expect("scenario");
    assert!(secrets.check(&secrets.messages).iter().all(|c| c.0 == MissKind::SecretExposed && !c.2));
}
