//! `lessrt validate FILE...`: schema and semantic validation, one line per violation or one JSON report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use less_runtime::{DocKind, ErrorCode, Violation, scenario_document, validate, validate_inferred};
use serde_json::{Value, json};

use super::args::OutputArgs;

/// Arguments of `lessrt validate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Files to validate (`-` for standard input). `.toml` files are scenarios.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The kind of every file; inferred from each file's fields when omitted.
    #[arg(long, value_parser = parse_kind)]
    kind: Option<DocKind>,
    /// JSON: one report, {"valid": bool, "errors": [{"code","file","path","message"}]}.
    #[command(flatten)]
    output: OutputArgs,
}

fn parse_kind(text: &str) -> Result<DocKind, String> {
    text.parse()
}

/// What happened to one file.
enum Outcome {
    /// Parsed and checked; empty means valid.
    Checked(Vec<Violation>),
    /// Could not be read or parsed; the violation says why.
    Unusable(Violation),
    // Invariant: an unusable file's violation is LESS_JSON_MALFORMED or LESS_INPUT_UNREADABLE; both exit 2.
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut report = Vec::new();
    let (mut n_valid, mut n_invalid, mut n_unusable) = (0usize, 0usize, 0usize);
    for file in &args.files {
        let outcome = check_file(file, args.kind);
        let name = file.display().to_string();
        match outcome {
            Outcome::Checked(violations) if violations.is_empty() => n_valid += 1,
            Outcome::Checked(violations) => {
                n_invalid += 1;
                report.extend(violations.into_iter().map(|v| (name.clone(), v)));
            }
            Outcome::Unusable(violation) => {
                n_unusable += 1;
                if !args.output.json() {
                    eprintln!("lessrt: {name}: {} ({})", violation.message, violation.code);
                }
                report.push((name, violation));
            }
        }
    }
    let errors: Vec<Value> = report
        .iter()
        .map(|(file, v)| json!({"code": v.code, "file": file, "path": v.path, "message": v.message}))
        .collect();
    args.output.emit(&json!({"valid": report.is_empty(), "errors": errors}), || {
        for (file, v) in
            report.iter().filter(|(_, v)| !matches!(v.code, ErrorCode::JsonMalformed | ErrorCode::InputUnreadable))
        {
            outln!("{}\t{file}\t{}\t{}", v.code, v.path, v.message.replace(['\t', '\n'], " "));
        }
        eprintln!("lessrt: {n_valid} valid, {n_invalid} invalid, {n_unusable} unreadable");
    })?;
    Ok(ExitCode::from(if n_unusable > 0 {
        2
    } else if n_invalid > 0 {
        1
    } else {
        0
    }))
}

fn check_file(file: &Path, kind: Option<DocKind>) -> Outcome {
    let text = match super::read_input(file) {
        Ok(text) => text,
        Err(err) => return Outcome::Unusable(Violation::new(ErrorCode::InputUnreadable, "", format!("{err:#}"))),
    };
    let is_toml = file.extension().is_some_and(|ext| ext == "toml");
    let doc = if is_toml || kind == Some(DocKind::Scenario) && serde_json::from_str::<Value>(&text).is_err() {
        match scenario_document(&text) {
            Ok(doc) => doc,
            Err(violation) => return Outcome::Unusable(violation),
        }
    } else {
        match less_runtime::parse_document(&text) {
            Ok(doc) => doc,
            Err(violation) => return Outcome::Unusable(violation),
        }
    };
    let kind = kind.or(is_toml.then_some(DocKind::Scenario));
    let violations = match kind {
        Some(kind) => validate(kind, &doc),
        None => validate_inferred(&doc).1,
    };
    // A scenario file is also loaded as a run loads it: that is where its workspace is resolved (a workspace that
    // leads out of the scenario's directory, a symlink a cloned repository carries, is refused) and every pointer
    // it names is resolved in it.
    if violations.is_empty() && kind == Some(DocKind::Scenario) && file != Path::new("-") {
        return match less_runtime::load_scenario(file, None) {
            Err(loaded) => Outcome::Checked(loaded.0),
            Ok(scenario) => Outcome::Checked(key_destinations(&scenario)),
        };
    }
    Outcome::Checked(violations)
}

/// An `llm` agent whose API key would go to a host nobody trusted with it: `lessrt run` refuses to start it
/// (`LLM_KEY_HOST_UNTRUSTED`), so `validate` says so first.
fn key_destinations(scenario: &less_runtime::Scenario) -> Vec<Violation> {
    scenario
        .agents
        .iter()
        .enumerate()
        .filter(|(_, agent)| agent.kind == less_runtime::AgentKind::Llm)
        .filter_map(|(i, agent)| {
            let settings = less_agents::ModelSettings::from_env(&agent.llm.clone().unwrap_or_default());
            let untrusted = less_agents::untrusted_key_destination(&settings, &[])?;
            Some(Violation::new(
                ErrorCode::ArgumentInvalid,
                format!("/agents/{i}/llm/base_url"),
                format!("{}: {untrusted}", untrusted.code()),
            ))
        })
        .collect()
}
