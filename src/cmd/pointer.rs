//! `lessrt pointer parse|format`: between the text form and the JSON object form of a pointer.
//!
//! A pointer that breaks the grammar is an invalid document (exit 1, `LESS_POINTER_INVALID` and the path on
//! stderr); input that is not JSON is unreadable (exit 2).

use std::path::Path;
use std::process::ExitCode;

use less_runtime::{ErrorCode, Pointer, Valid, Violation};
use serde_json::{Value, json};

use super::args::OutputArgs;

/// Sub-commands of `lessrt pointer`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Parse a text form such as `repo:src/lib.rs#L120-L188@4f2a9c1` and print its JSON object.
    Parse {
        /// The pointer text.
        text: String,
        /// The object is JSON either way; `--json` prints it on one line, as every command's `--json` does.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Format a JSON pointer object (`-` reads it from standard input) as its text form.
    Format {
        /// The JSON object, or `-`.
        #[arg(value_name = "JSON")]
        object: String,
        /// JSON: {"text": "repo:…"}.
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub(crate) fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Parse { text, output } => match Pointer::parse(text) {
            Ok(pointer) => {
                let doc = serde_json::to_value(&pointer)?;
                output.emit(&doc, || super::print_json(&doc))?;
                Ok(ExitCode::SUCCESS)
            }
            Err(violation) => Ok(refuse(&[violation])),
        },
        Command::Format { object, output } => {
            let text = if object == "-" { super::read_input(Path::new("-"))? } else { object.clone() };
            let doc: Value = match less_runtime::parse_strict(&text) {
                Ok(doc) => doc,
                Err(err) => {
                    eprintln!("lessrt: not valid JSON: {err} ({})", ErrorCode::JsonMalformed);
                    return Ok(ExitCode::from(2));
                }
            };
            match Valid::<Pointer>::from_value(&doc) {
                Ok(pointer) => {
                    let text = pointer.to_string();
                    output.emit(&json!({"text": text}), || outln!("{text}"))?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(violations) => Ok(refuse(&violations.0)),
            }
        }
    }
}

fn refuse(violations: &[Violation]) -> ExitCode {
    for v in violations {
        eprintln!("{}\t{}\t{}", v.code, v.path, v.message);
    }
    ExitCode::from(1)
}
