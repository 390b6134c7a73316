//! `lessrt schema [KIND]`: the published JSON Schemas, as embedded in the binary.

use std::process::ExitCode;

use less_runtime::{DocKind, SCHEMA_FILES};

/// Arguments of `lessrt schema`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A kind (engram, pointer, brief, grant, deref, message, budget, scenario) or a schema file name; lists the
    /// schema files when omitted.
    name: Option<String>,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let Some(name) = &args.name else {
        for (file, _) in SCHEMA_FILES {
            println!("{file}");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let file = name.parse::<DocKind>().map(DocKind::schema_file).unwrap_or(name.as_str());
    let found = SCHEMA_FILES.iter().find(|(f, _)| *f == file || f.strip_suffix(".v0.1.json") == Some(file));
    match found {
        Some((_, text)) => {
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        None => anyhow::bail!("no schema named {name:?}; run `lessrt schema` for the list"),
    }
}
