//! less-eval: what lessrt measures itself with.
//!
//! The runtime (`less-runtime`) runs scenarios, keeps memories and compacts conversations; this crate holds the
//! machinery that measures it, so that none of it is part of the runtime's API:
//!
//! * [`bench`]: every run of `lessrt bench` and what it writes from them (`bench.json`, `bench.csv`, `summary.md`),
//!   pure functions of the run reports, so the same runs give the same bytes;
//! * [`context`]: the context ledger's evaluation (`lessrt eval context`): seeded conversations and a paraphrase set
//!   with checks for each way a compacted context makes an assistant miss, run against every engine;
//! * [`locomo`]: evidence recall on LoCoMo conversations (`lessrt eval locomo`): the samples, the engrams their turns
//!   become, and the scores;
//! * [`corpus`]: a synthetic, deterministic corpus of engineering conversations for the DAG's tests and benches.
//!
//! # Design notes
//!
//! * Deterministic: the corpora are generated from fixed seeds with no clock and no randomness of the machine, and
//!   every report is a function of its inputs.
//! * Not a runtime: nothing here runs a scenario, opens a store or prints. The binary runs the scenarios and the
//!   recalls, hands the results here, and prints what comes back; the runtime never depends on this crate (its tests
//!   may, through its public API).

pub mod bench;
pub mod context;
pub mod corpus;
pub mod locomo;
mod rng;
