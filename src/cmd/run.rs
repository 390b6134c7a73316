//! `lessrt run SCENARIO`: run a scenario through the actor tree, print the live trace, the per-role table and the
//! checks; exit 0 iff every check passes. `llm` agents ask their model live, or with `--record DIR` live while
//! writing every exchange to DIR, or with `--replay DIR` from such a recording with no server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use less_agents::record::recorded_run;
use less_agents::{AgentsFactory, ModelSource};
use less_runtime::run::{Pinned, RunOptions, RunReport, fresh_secret, run_scenario};
use less_runtime::{ErrorCode, Scenario, WireMode};

use super::summarizer::SummarizerChoice;

/// Arguments of `lessrt run`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The scenario file (TOML).
    scenario: PathBuf,
    /// Wire mode: less (engrams, pointers, budgets), verbatim (the fair baseline: what a careful orchestrator without
    /// LESS sends) or verbatim-whole (whole files and every prior report pasted). less and verbatim when omitted.
    #[arg(long, value_parser = parse_mode)]
    mode: Option<WireMode>,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No live trace.
    #[arg(long)]
    quiet: bool,
    /// Where ledger.jsonl and audit.log go: DIR/<scenario>/<mode>/ (default DIR: runs).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Record every model exchange of the `llm` agents in this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer the `llm` agents from a recording made with --record, without a server.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    #[command(flatten)]
    summarizer: SummarizerChoice,
}

fn parse_mode(text: &str) -> Result<WireMode, String> {
    text.parse()
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let scenario = match Scenario::load(&args.scenario) {
        Ok(s) => Arc::new(s),
        Err(violations) => {
            for v in &violations.0 {
                println!("{}\t{}\t{}\t{}", v.code, args.scenario.display(), v.path, v.message);
            }
            // Input that cannot be read or parsed is a usage problem (2); a scenario that breaks its schema is 1.
            let unusable =
                violations.0.iter().any(|v| matches!(v.code, ErrorCode::InputUnreadable | ErrorCode::JsonMalformed));
            return Ok(ExitCode::from(if unusable { 2 } else { 1 }));
        }
    };
    let source = ModelSource::from_dirs(args.record.as_deref(), args.replay.as_deref());
    // The run's summarizer actors: extractive, or a model answering like the agents' (live, recorded, replayed).
    let Some(summarizer) = args.summarizer.summarizer(&source)? else {
        return Ok(ExitCode::from(2));
    };
    let pinned = pinned_for(&source)?;
    let modes = match args.mode {
        Some(mode) => vec![mode],
        None => vec![WireMode::Less, WireMode::Verbatim],
    };
    // An agent that panics is caught by its actor and restarted by its gateway, and the restart is in the trace and the
    // ledger; one line on stderr says where, instead of a backtrace in the middle of the trace.
    std::panic::set_hook(Box::new(|info| eprintln!("lessrt: an agent panicked (it will be restarted): {info}")));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut reports = Vec::new();
    for mode in modes {
        if !args.quiet {
            println!("== {} ({} mode, {})", scenario.name, mode.as_str(), scenario.tokenizer);
        }
        let out = args.out.clone().unwrap_or_else(|| PathBuf::from("runs")).join(&scenario.name).join(mode.as_str());
        let options =
            RunOptions { mode, out_dir: Some(out), trace: !args.quiet, pinned, summarizer: Some(summarizer.clone()) };
        let factory = Arc::new(
            AgentsFactory::for_scenario(&scenario, &source).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?,
        );
        let report =
            runtime.block_on(run_scenario(scenario.clone(), factory, options)).map_err(|v| anyhow::anyhow!("{v}"))?;
        print_report(&report);
        reports.push(report);
    }
    if reports.len() == 2 {
        print_comparison(&reports[0], &reports[1]);
    }
    if let Some(path) = &args.json {
        let doc = if reports.len() == 1 { serde_json::to_value(&reports[0])? } else { serde_json::to_value(&reports)? };
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(if reports.iter().all(RunReport::passed) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Recorded and replayed runs stamp documents with the recording's start time and sign grants with its key, so both
/// count alike; a live run is not pinned.
pub(crate) fn pinned_for(source: &ModelSource) -> anyhow::Result<Option<Pinned>> {
    let (dir, create) = match source {
        ModelSource::Live => return Ok(None),
        ModelSource::Record(dir) => (dir, true),
        ModelSource::Replay(dir) => (dir, false),
    };
    let (text, secret) = recorded_run(dir, create, &less_runtime::now_rfc3339(), fresh_secret())
        .map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
    let parsed = time::OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339);
    let clock = parsed.map_err(|err| anyhow::anyhow!("{}: started_at {text:?}: {err}", dir.display()))?;
    Ok(Some(Pinned { clock, secret }))
}

pub(crate) fn print_report(report: &RunReport) {
    println!(
        "\n{:<12} {:>5} {:>8} {:>6} {:>6} {:>6} {:>9} {:>6} {:>8} {:>5} {:>5} {:>5} {:>5}",
        "role", "turns", "mean", "p50", "p95", "max", "total", "derefs", "deref_tok", "rej", "resnd", "esc", "rst"
    );
    for (role, r) in report.roles.iter().chain(std::iter::once((&"TOTAL".to_owned(), &report.totals))) {
        let t = &r.inline_tokens;
        println!(
            "{role:<12} {:>5} {:>8.1} {:>6} {:>6} {:>6} {:>9} {:>6} {:>8} {:>5} {:>5} {:>5} {:>5}",
            r.turns,
            t.mean,
            t.p50,
            t.p95,
            t.max,
            t.total,
            r.derefs,
            r.deref_tokens,
            r.rejections,
            r.resends,
            r.escalations,
            r.restarts
        );
    }
    for (role, r) in report.roles.iter().filter(|(_, r)| r.model.calls > 0) {
        let m = &r.model;
        println!(
            "model usage {role}: {} calls ({} unusable), {} prompt + {} completion tokens (provider's count)",
            m.calls, m.unusable, m.prompt_tokens, m.completion_tokens
        );
    }
    println!();
    for check in &report.checks {
        println!("{} {} — {}", check.status.label(), check.name, check.detail);
    }
    if report.tasks.graded > 0 {
        println!("\ntasks: {} of {} solved", report.tasks.solved, report.tasks.graded);
        for task in &report.tasks.items {
            let verdict = if task.solved { "SOLVED" } else { "UNSOLVED" };
            println!("{verdict} {} ({}, {}) — {}", task.id, task.kind.as_str(), task.agent, task.evidence);
        }
    }
    println!();
}

fn print_comparison(less: &RunReport, verbatim: &RunReport) {
    // LESS moves content out of messages into metered derefs, so its cost is shown with and without them; the
    // verbatim baseline already has everything pasted inline.
    println!("tokens, LESS vs verbatim (inline; inline + deref'd content):");
    println!("  {:<22} {:>9} {:>9} {:>9} {:>8} {:>8}", "role", "LESS", "LESS+drf", "verbatim", "inline%", "+deref%");
    let pct = |a: u64, b: u64| if b == 0 { "—".to_owned() } else { format!("{:.1}%", 100.0 * a as f64 / b as f64) };
    let rows = less.roles.iter().map(|(role, r)| (role.as_str(), r, verbatim.roles.get(role)));
    for (role, r, v) in rows.chain(std::iter::once(("TOTAL", &less.totals, Some(&verbatim.totals)))) {
        let base = v.map_or(0, |v| v.inline_tokens.total);
        let (inline, with_deref) = (r.inline_tokens.total, r.inline_tokens.total + r.deref_tokens);
        println!(
            "  {role:<22} {inline:>9} {with_deref:>9} {base:>9} {:>8} {:>8}",
            pct(inline, base),
            pct(with_deref, base)
        );
    }
    if less.totals.model.calls + verbatim.totals.model.calls == 0 {
        return;
    }
    // What the models read and wrote, as their provider counted it: the prompt is where pasted context costs.
    println!("model tokens, LESS vs verbatim (prompt + completion, provider's count):");
    println!("  {:<22} {:>9} {:>9} {:>9} {:>9} {:>8}", "role", "LESS in", "LESS out", "verb in", "verb out", "in%");
    let rows = less.roles.iter().map(|(role, r)| (role.as_str(), r.model, verbatim.roles.get(role).map(|v| v.model)));
    for (role, l, v) in rows.chain(std::iter::once(("TOTAL", less.totals.model, Some(verbatim.totals.model)))) {
        let v = v.unwrap_or_default();
        if l.calls + v.calls == 0 {
            continue;
        }
        println!(
            "  {role:<22} {:>9} {:>9} {:>9} {:>9} {:>8}",
            l.prompt_tokens,
            l.completion_tokens,
            v.prompt_tokens,
            v.completion_tokens,
            pct(l.prompt_tokens, v.prompt_tokens)
        );
    }
}
