//! `lessrt errors`: every stable error code lessrt reports, and what to do instead: the contract's closed set
//! (`LESS_*`, what a sender should send instead) and the model providers' (`LLM_*`, from `LlmError`).

use std::process::ExitCode;

use less_agents::provider::LlmError;
use less_runtime::ErrorCode;
use serde_json::{Value, json};

use super::args::OutputArgs;

/// Arguments of `lessrt errors`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// JSON: an array of {"code", "source" (contract or model), "instruction"}.
    #[command(flatten)]
    output: OutputArgs,
}

/// Every code with where it comes from and what to do instead.
fn codes() -> Vec<(&'static str, &'static str, &'static str)> {
    let contract = ErrorCode::ALL.iter().map(|c| (c.as_str(), "contract", c.instruction()));
    let model = LlmError::CODES.iter().map(|(code, what)| (*code, "model", *what));
    contract.chain(model).collect()
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let codes = codes();
    let doc: Vec<Value> = codes
        .iter()
        .map(|(code, source, instruction)| json!({"code": code, "source": source, "instruction": instruction}))
        .collect();
    args.output.emit(&Value::Array(doc), || {
        for (code, _, instruction) in &codes {
            outln!("{code}\t{instruction}");
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
