//! `lessrt tokens [FILE|-]`: the token count of a text.

use std::path::PathBuf;
use std::process::ExitCode;

use less_runtime::{Encoding, TokenCounter};
use serde_json::json;

use super::args::OutputArgs;

/// Arguments of `lessrt tokens`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The text's file; standard input when omitted or `-`.
    file: Option<PathBuf>,
    /// The tokenizer encoding.
    #[arg(long, default_value = "o200k_base", value_parser = parse_encoding)]
    encoding: Encoding,
    /// JSON: {"tokens": N, "encoding": "...", "bytes": N}.
    #[command(flatten)]
    output: OutputArgs,
}

fn parse_encoding(text: &str) -> Result<Encoding, String> {
    text.parse()
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let path = args.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let text = super::read_input(&path)?;
    let n_tokens = TokenCounter::shared(args.encoding).count(&text);
    let doc = json!({"tokens": n_tokens, "encoding": args.encoding, "bytes": text.len()});
    args.output.emit(&doc, || outln!("{n_tokens}"))?;
    Ok(ExitCode::SUCCESS)
}
