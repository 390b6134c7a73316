//! `lessrt errors`: the closed set of stable error codes and what a sender should send instead.

use std::process::ExitCode;

use less_runtime::ErrorCode;
use serde_json::{Value, json};

/// Arguments of `lessrt errors`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print a JSON array of {"code", "instruction"}.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if args.json {
        let codes: Vec<Value> =
            ErrorCode::ALL.iter().map(|c| json!({"code": c.as_str(), "instruction": c.instruction()})).collect();
        super::print_json(&Value::Array(codes));
    } else {
        for code in ErrorCode::ALL {
            println!("{code}\t{}", code.instruction());
        }
    }
    Ok(ExitCode::SUCCESS)
}
