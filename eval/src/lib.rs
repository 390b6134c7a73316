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
//! * [`search`]: how well the workspace search finds the evidence of graded tasks (`lessrt eval search`), per
//!   split (tune, held out);
//! * [`corpus`]: a synthetic, deterministic corpus of engineering conversations for the DAG's tests and benches.
//!
//! # Design notes
//!
//! * Deterministic: the corpora come from fixed seeds (no clock, no randomness of the machine), and every report is
//!   a function of its inputs (but LoCoMo's recall latencies, which are measured).
//! * Not the runtime, and not the binary: nothing here runs a scenario, opens a store or prints. `lessrt` runs the
//!   scenarios and opens the memory, hands them here, and prints what comes back.
//! * One way: this crate depends on `less-runtime` and uses only its public API; the runtime depends on it only for
//!   its own tests (the corpora), never in what it ships.

pub mod bench;
pub mod context;
pub mod corpus;
pub mod locomo;
mod rng;
pub mod search;
