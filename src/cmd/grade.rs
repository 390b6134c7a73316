//! `lessrt grade SCENARIO.toml RUN`: a run's ledger graded again with this build's grader, and
//! `lessrt grade SCENARIO.toml --claims FILE.jsonl`: bare answers (one JSON object a line: `task`, `claim`,
//! `pointers`) graded on the claim and citation rules, every cited pointer taken as read, so a check kept outside the
//! project can grade answers it holds. Verdicts are output, not failures: grading exits 0; bad input exits 2 after
//! its code.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use less_runtime::run::{AnswerGrader, AnswerVerdict, Event, TaskReport, grade};
use less_runtime::{Pointer, Scenario, WireMode};
use serde::Deserialize;

use super::args::{OutputArgs, Stop};

/// Arguments of `lessrt grade`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The scenario whose tasks are graded.
    scenario: PathBuf,
    /// A run's `ledger.jsonl`, or the directory holding it (a mode's: `runs/<scenario>/less`).
    #[arg(required_unless_present = "claims", conflicts_with = "claims")]
    run: Option<PathBuf>,
    /// The mode the run was in (what counts as read differs between modes).
    #[arg(long, default_value = "less", value_parser = parse_mode)]
    mode: WireMode,
    /// Grade bare answers instead: a JSON Lines file of {"task", "claim", "pointers": ["repo:…", …]}.
    #[arg(long, value_name = "FILE")]
    claims: Option<PathBuf>,
    /// The task report (a run) or one verdict per line (claims) as JSON.
    #[command(flatten)]
    output: OutputArgs,
}

fn parse_mode(text: &str) -> Result<WireMode, String> {
    text.parse()
}

/// One line of a `--claims` file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Claim {
    task: String,
    claim: String,
    #[serde(default)]
    pointers: Vec<String>,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let scenario = less_runtime::load_scenario(&args.scenario, None).map_err(|violations| {
        let first = violations.0.first().map(ToString::to_string).unwrap_or_default();
        Stop::usage(format!("{}: {first}", args.scenario.display()))
    })?;
    match (&args.claims, &args.run) {
        (Some(file), _) => grade_claims(&scenario, file, &args.output),
        (None, Some(run)) => grade_run(&scenario, run, args.mode, &args.output),
        (None, None) => Err(Stop::usage("LESS_ARGUMENT_INVALID: name a run or --claims FILE").into()),
    }
}

/// Grades the ledger of a run and prints its task report.
fn grade_run(scenario: &Scenario, run: &Path, mode: WireMode, output: &OutputArgs) -> anyhow::Result<ExitCode> {
    let ledger = if run.is_dir() { run.join(less_runtime::LEDGER_FILE) } else { run.to_owned() };
    let text = std::fs::read_to_string(&ledger)
        .map_err(|err| Stop::usage(format!("LESS_INPUT_UNREADABLE: cannot read {}: {err}", ledger.display())))?;
    let events =
        events(&text).map_err(|why| Stop::usage(format!("LESS_JSON_MALFORMED: {}: {why}", ledger.display())))?;
    let report = grade(scenario, mode, &events);
    output.emit(&serde_json::to_value(&report)?, || print_report(&report))?;
    Ok(ExitCode::SUCCESS)
}

/// The events of a ledger's text, or which line is not one.
fn events(text: &str) -> Result<Vec<Event>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| serde_json::from_str(line).map_err(|err| format!("line {} is not an event ({err})", n + 1)))
        .collect()
}

fn print_report(report: &TaskReport) {
    outln!("{:<28} {:<9} {:<22} evidence", "task", "verdict", "lost");
    for item in &report.items {
        let verdict = if item.solved { "solved" } else { "unsolved" };
        let lost = item.failure.map(|f| f.as_str()).unwrap_or("");
        outln!("{:<28} {:<9} {:<22} {}", item.id, verdict, lost, item.evidence);
    }
    outln!("{} of {} tasks solved", report.solved, report.graded);
}

/// Grades every line of a claims file and prints a verdict per line.
fn grade_claims(scenario: &Scenario, file: &Path, output: &OutputArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(file)
        .map_err(|err| Stop::usage(format!("LESS_INPUT_UNREADABLE: cannot read {}: {err}", file.display())))?;
    let grader = AnswerGrader::new(scenario);
    let mut verdicts = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let at = |why: String| Stop::usage(format!("{} line {}: {why}", file.display(), n + 1));
        let value = less_runtime::parse_strict(line).map_err(|err| at(format!("LESS_JSON_MALFORMED: {err}")))?;
        let claim: Claim = serde_json::from_value(value).map_err(|err| at(format!("LESS_SCHEMA_INVALID: {err}")))?;
        let pointers: Vec<Pointer> = claim
            .pointers
            .iter()
            .map(|p| Pointer::parse(p).map_err(|v| at(format!("{}: {p}: {}", v.code, v.message))))
            .collect::<Result<_, _>>()?;
        let verdict = grader
            .grade(&claim.task, &claim.claim, &pointers)
            .ok_or_else(|| at(format!("LESS_ARGUMENT_INVALID: {} grades no task {}", scenario.name, claim.task)))?;
        verdicts.push(verdict);
    }
    if output.json() {
        for verdict in &verdicts {
            outln!("{}", serde_json::to_string(verdict)?);
        }
    } else {
        for AnswerVerdict { task, solved, evidence, .. } in &verdicts {
            outln!("{task}\t{}\t{evidence}", if *solved { "solved" } else { "unsolved" });
        }
    }
    output.write_file(&serde_json::to_value(&verdicts)?)?;
    Ok(ExitCode::SUCCESS)
}
