//! `lessrt pointer parse|format`: between the text form and the JSON object form of a pointer.

use std::path::Path;
use std::process::ExitCode;

use less_runtime::{ErrorCode, Pointer, Valid, Violation};
use serde_json::Value;

/// Sub-commands of `lessrt pointer`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Parse a text form such as `repo:src/lib.rs#L120-L188@4f2a9c1` and print its JSON object.
    Parse {
        /// The pointer text.
        text: String,
    },
    /// Format a JSON pointer object (`-` reads it from standard input) as its text form.
    Format {
        /// The JSON object, or `-`.
        json: String,
    },
}

pub(crate) fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Parse { text } => match Pointer::parse(text) {
            Ok(pointer) => {
                super::print_json(&serde_json::to_value(&pointer)?);
                Ok(ExitCode::SUCCESS)
            }
            Err(violation) => Ok(refuse(&[violation])),
        },
        Command::Format { json } => {
            let text = if json == "-" { super::read_input(Path::new("-"))? } else { json.clone() };
            let doc: Value = match serde_json::from_str(&text) {
                Ok(doc) => doc,
                Err(err) => {
                    eprintln!("lessrt: not valid JSON: {err} ({})", ErrorCode::JsonMalformed);
                    return Ok(ExitCode::from(2));
                }
            };
            match Valid::<Pointer>::from_value(&doc) {
                Ok(pointer) => {
                    println!("{}", *pointer);
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
