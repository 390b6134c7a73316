//! `lessrt schema [KIND]`: the published JSON Schemas, as embedded in the binary.

use std::process::ExitCode;

use less_runtime::{DocKind, SCHEMA_FILES};
use serde_json::Value;

use super::args::{OutputArgs, Stop};

/// Arguments of `lessrt schema`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A kind (engram, pointer, brief, grant, deref, message, budget, scenario) or a schema file name; lists the
    /// schema files when omitted.
    name: Option<String>,
    /// JSON: the schema on one line, or the list as an array of file names.
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let Some(name) = &args.name else {
        let files: Vec<Value> = SCHEMA_FILES.iter().map(|(file, _)| Value::from(*file)).collect();
        args.output.emit(&Value::Array(files), || {
            for (file, _) in SCHEMA_FILES {
                outln!("{file}");
            }
        })?;
        return Ok(ExitCode::SUCCESS);
    };
    let file = name.parse::<DocKind>().map(DocKind::schema_file).unwrap_or(name.as_str());
    let found = SCHEMA_FILES.iter().find(|(f, _)| *f == file || f.strip_suffix(".v0.1.json") == Some(file));
    let Some((_, text)) = found else {
        return Err(Stop::usage(format!("no schema named {name:?}; `lessrt schema` lists them")).into());
    };
    let schema: Value = serde_json::from_str(text)?;
    args.output.emit(&schema, || out!("{text}"))?;
    Ok(ExitCode::SUCCESS)
}
