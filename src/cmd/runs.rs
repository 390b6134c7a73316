//! `lessrt runs show DIR`: a finished run again, from what it left in its directory: the trace from `ledger.jsonl`,
//! the per-role table, model usage and checks from `report.json` (which `lessrt run` writes when a mode finishes),
//! and, for a directory holding both modes, LESS against verbatim. The same text `lessrt run` printed; `--json` gives
//! the report.
//!
//! A directory whose ledger is cut short, or that has no report (the run was stopped or failed), is reported as
//! incomplete (exit 2) after the part of the trace it has.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use less_runtime::WireMode;
use less_runtime::run::{Event, RunReport};

use super::args::{OutputArgs, Stop, count};
use super::run::{REPORT_FILE, heading, print_comparison, print_report};
use crate::Ctx;

/// Sub-commands of `lessrt runs`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Print a finished run again: its trace, per-role tables and checks. DIR is a mode's directory
    /// (`runs/uc1-refactor/less`) or a scenario's (`runs/uc1-refactor`: both modes and the comparison). Exit 0 iff
    /// every check passed, 1 if one failed, 2 if DIR holds no run or an incomplete one.
    Show {
        /// The run directory (what `lessrt run --out DIR` made: DIR/<scenario>[/<mode>]).
        dir: PathBuf,
        /// The report: one object per mode (an array of two for a scenario's directory), as `lessrt run --json`.
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// What one mode's directory holds.
struct Recorded {
    dir: PathBuf,
    events: Vec<Event>,
    /// The report, or why there is none (the run is incomplete).
    report: Result<RunReport, String>,
}

pub(crate) fn run(command: &Command, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let Command::Show { dir, output } = command;
    let dirs = run_dirs(dir)?;
    let runs: Vec<Recorded> = dirs.iter().map(|d| read_run(d)).collect::<anyhow::Result<_>>()?;
    let text = !output.json();
    for run in &runs {
        if !text {
            break;
        }
        if !ctx.quiet {
            match &run.report {
                Ok(report) => outln!("{}", heading(&report.scenario, report.mode, &report.tokenizer)),
                Err(_) => outln!("== {}", run.dir.display()),
            }
            for line in run.events.iter().filter_map(Event::trace_line) {
                outln!("{line}");
            }
        }
        match &run.report {
            Ok(report) => print_report(report),
            Err(why) => return Err(incomplete(&run.dir, why)),
        }
    }
    let mut reports = Vec::new();
    for run in runs {
        match run.report {
            Ok(report) => reports.push(report),
            Err(why) => return Err(incomplete(&run.dir, &why)),
        }
    }
    if text && let [less, verbatim] = reports.as_slice() {
        print_comparison(less, verbatim);
    }
    let doc = if reports.len() == 1 { serde_json::to_value(&reports[0])? } else { serde_json::to_value(&reports)? };
    output.emit(&doc, || {})?;
    Ok(if reports.iter().all(RunReport::passed) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn incomplete(dir: &Path, why: &str) -> anyhow::Error {
    Stop::usage(format!("{} is an incomplete run: {why}", dir.display())).into()
}

/// The mode directories `dir` names: itself when it holds a ledger, else its `less` and `verbatim` subdirectories
/// that do.
fn run_dirs(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if dir.join(less_runtime::LEDGER_FILE).is_file() {
        return Ok(vec![dir.to_owned()]);
    }
    let modes: Vec<PathBuf> = [WireMode::Less, WireMode::Verbatim]
        .iter()
        .map(|mode| dir.join(mode.as_str()))
        .filter(|d| d.join(less_runtime::LEDGER_FILE).is_file())
        .collect();
    if modes.is_empty() {
        return Err(Stop::usage(format!(
            "{} holds no run: no ledger.jsonl in it or in its less/ and verbatim/ directories (`lessrt run --out DIR` \
             writes DIR/<scenario>/<mode>/)",
            dir.display()
        ))
        .into());
    }
    Ok(modes)
}

/// Reads a mode's ledger and report.
fn read_run(dir: &Path) -> anyhow::Result<Recorded> {
    let path = dir.join(less_runtime::LEDGER_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut events = Vec::new();
    let mut cut = None;
    for (n, line) in text.lines().enumerate() {
        match serde_json::from_str::<Event>(line) {
            Ok(event) => events.push(event),
            Err(err) => {
                cut = Some(format!("ledger.jsonl line {} is not a whole event ({err})", n + 1));
                break;
            }
        }
    }
    if cut.is_none() && !text.is_empty() && !text.ends_with('\n') {
        cut = Some(format!("ledger.jsonl ends in the middle of line {}", text.lines().count()));
    }
    let report_path = dir.join(REPORT_FILE);
    let report = match cut {
        Some(why) => Err(why),
        None => match std::fs::read_to_string(&report_path) {
            Ok(text) => serde_json::from_str::<RunReport>(&text)
                .map_err(|err| format!("{REPORT_FILE} is not a run report ({err})")),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "no {REPORT_FILE}: the run was stopped or failed after {} (its trace is above)",
                count(events.len() as u64, "event")
            )),
            Err(err) => Err(format!("cannot read {}: {err}", report_path.display())),
        },
    };
    Ok(Recorded { dir: dir.to_owned(), events, report })
}
