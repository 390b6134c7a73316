//! Tests of the context ledger: shape, extraction, supersession, redaction, fail-closed, idempotence, properties.

use super::*;

#[test]
fn the_ledger_engine_passes_every_check_of_the_suite() {
    let suite = scenarios();
    let report = evaluate(&suite);
    for score in &report.engines {
        eprintln!("{} {:?} {:?}", score.engine, score.total(), score.by_kind);
        for f in score.failures.iter().take(40) {
            eprintln!("  {f}");
        }
    }
    let ledger = &report.engines[0];
    assert!(ledger.failures.is_empty(), "{:#?}", ledger.failures);
}

#[test]
fn debug_print() {
    let suite = scenarios();
    let s = suite.iter().find(|s| s.name == "mixed_long_en").unwrap();
    let out = compact(&s.messages, &CompactConfig::default());
    eprintln!("{}", out[1].content);
}
