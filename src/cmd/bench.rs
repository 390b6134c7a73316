//! `lessrt bench [SCENARIO|DIR]...`: every scenario in every mode (and repeat), through the same actor tree as
//! `lessrt run`, then the bench files in `--out`: `bench.json` (every run's report with its graded tasks),
//! `bench.csv` (one row per scenario × mode × repeat × role), `summary.md` (the tables of docs/benchmark.md) and SVG
//! plots.
//! A progress bar per run and one over all runs, on stderr when it is a terminal. What the files hold is
//! `less-eval`'s [`Bench`]; this module runs the scenarios, writes the files and reports.
//!
//! Exit 1 when a LESS-mode message reached an agent over its cap, a run failed, a check failed or a graded task was
//! left unsolved (every file is still written: those are results, reported). Exit 2 on bad usage or input that
//! cannot be read.

mod plot;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use less_agents::{AgentsFactory, ModelSource};
use less_eval::bench::{Bench, BenchFailure, BenchRecording, BenchRun};
use less_runtime::run::{RunOptions, run_scenario_with};
use less_runtime::{AgentKind, ErrorCode, Scenario, WireMode};

use super::args::{AgentsArgs, InboxArgs, OutputArgs, Stop};
use super::run::pinned_for;
use super::summarizer::SummarizerChoice;
use crate::Ctx;

/// Arguments of `lessrt bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Scenario files, or directories whose `*.toml` files are scenarios (default: `scenarios`).
    paths: Vec<PathBuf>,
    /// Wire modes to run, comma-separated: less, verbatim (the fair baseline), verbatim-whole.
    #[arg(long, value_delimiter = ',', default_value = "less,verbatim", value_parser = parse_mode)]
    modes: Vec<WireMode>,
    /// Runs of each scenario in each mode (the counts must not differ between them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Where the bench files go (and each run's ledger under `runs/<scenario>/<mode>/<repeat>/`).
    #[arg(long, value_name = "DIR", default_value = "runs/bench")]
    out: PathBuf,
    /// bench.json: `--json` prints it instead of the tables, `-o FILE` writes it to FILE too (it is always in --out).
    #[command(flatten)]
    output: OutputArgs,
    /// Record every model exchange of the `llm` agents, per scenario, in DIR/<scenario>/.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer the `llm` agents from DIR/<scenario>/ (made with --record, or `lessrt run --record`), no server.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// Longest one turn may take, in seconds (default: what the slowest agent's model settings need, at least 120).
    #[arg(long, value_name = "SECS")]
    step_timeout: Option<u64>,
    #[command(flatten)]
    summarizer: SummarizerChoice,
    #[command(flatten)]
    agents: AgentsArgs,
    #[command(flatten)]
    inbox: InboxArgs,
    /// Run the one scenario named on this directory instead of its own `workspace` (any directory; symlinks out of
    /// it are still refused). Every pointer the scenario names must resolve in it.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Where the hand adjudications are, one `<scenario>.toml` each (default: `adjudication/` beside each scenario
    /// file); the grader's agreement with them goes into bench.json and summary.md.
    #[arg(long, value_name = "DIR")]
    adjudication: Option<PathBuf>,
}

fn parse_mode(text: &str) -> Result<WireMode, String> {
    text.parse()
}

pub(crate) fn run(args: &Args, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let files = scenario_files(&args.paths).map_err(|err| Stop::usage(format!("{err:#}")))?;
    if args.workspace.is_some() && files.len() != 1 {
        return Err(Stop::usage(format!(
            "--workspace points one scenario at a directory, and {} scenarios are named: name one scenario file",
            files.len()
        ))
        .into());
    }
    let mut scenarios = Vec::new();
    let mut unusable = None;
    for file in &files {
        match less_runtime::load_scenario(file, args.workspace.as_deref()) {
            Ok(s) => scenarios.push(Arc::new(args.agents.apply(s))),
            Err(violations) => {
                for v in &violations.0 {
                    outln!("{}\t{}\t{}\t{}", v.code, file.display(), v.path, v.message);
                }
                let unreadable = violations.0.iter().any(|v| matches!(v.code, ErrorCode::InputUnreadable));
                unusable = Some(unusable.unwrap_or(false) || unreadable);
            }
        }
    }
    if let Some(unreadable) = unusable {
        return Ok(ExitCode::from(if unreadable { 2 } else { 1 }));
    }
    let mut modes = args.modes.clone();
    modes.dedup();

    let bars = Bars::new(scenarios.len() as u64 * modes.len() as u64 * u64::from(args.repeat), ctx.quiet);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut bench = Bench::default();
    for scenario in &scenarios {
        let source = source_for(args, scenario);
        let Some(summarizer) = args.summarizer.summarizer(&source)? else {
            return Err(Stop::usage("--llm-base-url, --llm-model and --llm-api-key-env need `--summarizer llm`").into());
        };
        let pinned = pinned_for(&source)?;
        let factory = Arc::new(
            AgentsFactory::for_scenario(scenario, &source).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?,
        );
        for &mode in &modes {
            for repeat in 1..=args.repeat {
                let out = args.out.join("runs").join(&scenario.name).join(mode.as_str()).join(repeat.to_string());
                // A run starts from nothing: the project memory of an earlier bench would change what queries find.
                if out.exists() {
                    std::fs::remove_dir_all(&out).with_context(|| format!("cannot clear {}", out.display()))?;
                }
                let options = RunOptions {
                    mode,
                    out_dir: Some(out),
                    trace: None,
                    pinned,
                    summarizer: Some(summarizer.clone()),
                    step_timeout: args.step_timeout.map(Duration::from_secs),
                    inbox_cap: args.inbox.cap(),
                    cluster: None,
                    index: None,
                    resume: false,
                };
                let step_bar = bars.run(&format!("{} {mode} #{repeat}", scenario.name), scenario.steps.len() as u64);
                let on_step = {
                    let bar = step_bar.clone();
                    move |index: usize, _n: usize| bar.set_position(index as u64)
                };
                let result = runtime.block_on(run_scenario_with(scenario.clone(), factory.clone(), options, on_step));
                step_bar.finish_and_clear();
                bars.total.inc(1);
                match result {
                    Ok(report) => bench.runs.push(BenchRun::new(scenario, report, repeat)),
                    Err(err) => bench.failed.push(BenchFailure {
                        scenario: scenario.name.clone(),
                        mode,
                        repeat,
                        error: err.to_string(),
                    }),
                }
            }
        }
    }
    bars.total.finish_and_clear();
    // bench.json names the recordings its models answered from: their model and the digest of their content.
    for scenario in &scenarios {
        if let ModelSource::Record(dir) | ModelSource::Replay(dir) = source_for(args, scenario)
            && dir.join(less_agents::record::RUN_FILE).exists()
        {
            let model =
                less_agents::record::recorded_model(&dir).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
            let digest =
                less_agents::record::recording_digest(&dir).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
            bench.recordings.push(BenchRecording {
                scenario: scenario.name.clone(),
                model: serde_json::to_value(model)?,
                digest,
                temperature: shared_temperature(scenario),
            });
        }
    }

    let adjudications = adjudications(args.adjudication.as_deref(), &files, &scenarios)?;
    if !adjudications.is_empty() {
        bench.adjudication = Some(less_eval::bench::adjudication::agreement(&bench, &adjudications));
    }

    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let write = |name: &str, text: &str| {
        let path = args.out.join(name);
        less_runtime::files::write_whole(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
    };
    let mut written = Vec::new();
    for (name, text) in bench.files()? {
        write(name, &text)?;
        written.push(name.to_owned());
    }
    for (name, svg) in plot::plots(&bench) {
        write(&name, &svg)?;
        written.push(name);
    }
    args.output.emit(&serde_json::to_value(&bench)?, || out!("{}", bench.summary_markdown()))?;

    for line in bench.less_over_cap() {
        eprintln!("lessrt: a LESS message reached an agent over its cap: {line}");
    }
    for failure in &bench.failed {
        eprintln!("lessrt: {} {} #{} failed: {}", failure.scenario, failure.mode, failure.repeat, failure.error);
    }
    for (scenario, mode, failure) in bench.failures() {
        eprintln!("lessrt: {scenario} {mode}: {failure}");
    }
    for line in bench.differing_repeats() {
        eprintln!("lessrt: repeats counted different tokens: {line}");
    }
    // 1 when a LESS message reached an agent over its cap, a run failed, a check failed or a graded task was left
    // unsolved (each printed above, and listed in `summary.md`).
    let exit_code = if bench.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) };
    if ctx.quiet {
        return Ok(exit_code);
    }
    let (solved, graded) = bench.n_tasks();
    eprintln!(
        "bench: {} runs of {} scenarios in {:.1} s ({} checks failed, {solved} of {graded} tasks solved); wrote {} in {}",
        bench.runs.len(),
        scenarios.len(),
        started.elapsed().as_secs_f64(),
        bench.n_failed_checks(),
        written.join(", "),
        args.out.display()
    );
    Ok(exit_code)
}

/// The scenario files `paths` name: files as given, directories' `*.toml` files (not recursive) sorted by name.
fn scenario_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let default = [PathBuf::from("scenarios")];
    let paths = if paths.is_empty() { &default[..] } else { paths };
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("cannot read {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
                .collect();
            found.sort();
            if found.is_empty() {
                anyhow::bail!("{} holds no *.toml scenario", path.display());
            }
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            anyhow::bail!("{}: no such scenario file or directory", path.display());
        }
    }
    Ok(files)
}

/// The sampling temperature of `scenario`'s `llm` agents when they all share one.
fn shared_temperature(scenario: &Scenario) -> Option<f64> {
    let mut temperatures = scenario.agents.iter().filter_map(|a| a.llm.as_ref().map(|l| l.temperature));
    let first = temperatures.next()?;
    temperatures.all(|t| t == first).then_some(first)
}

/// Where `scenario`'s models answer from: its own directory of the recording, or live. A replay of a scenario
/// without `llm` agents and without a recording runs as it is (nothing to answer).
fn source_for(args: &Args, scenario: &Scenario) -> ModelSource {
    let dir = |root: &Path| root.join(&scenario.name);
    let has_models = scenario.agents.iter().any(|a| a.kind == AgentKind::Llm) || args.summarizer.is_llm();
    match (&args.record, &args.replay) {
        (Some(root), _) if has_models => ModelSource::Record(dir(root)),
        (None, Some(root)) if has_models || dir(root).exists() => ModelSource::Replay(dir(root)),
        _ => ModelSource::Live,
    }
}

/// Two bars, one over all runs and one for the current run's steps (so not `progress::Bars`, which draws one at a
/// time); drawn only when stderr is a terminal and `--quiet` is off.
struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
}

impl Bars {
    fn new(n_runs: u64, quiet: bool) -> Bars {
        let visible = !quiet && std::io::stderr().is_terminal();
        let target = if visible { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let multi = MultiProgress::with_draw_target(target);
        let total = multi.add(ProgressBar::new(n_runs));
        total.set_style(style("bench {bar:30} {pos}/{len} runs ({elapsed}, {eta} left)"));
        Bars { multi, total }
    }

    fn run(&self, name: &str, n_steps: u64) -> ProgressBar {
        let bar = self.multi.insert_before(&self.total, ProgressBar::new(n_steps));
        bar.set_style(style("{msg:32} {bar:30} step {pos}/{len}"));
        bar.set_message(name.to_owned());
        bar
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()).progress_chars("=> ")
}

/// The hand adjudications of `scenarios` (read from `files`): `<dir>/<scenario>.toml` for each that has one, `dir`
/// being `given` or else `adjudication/` beside the scenario's file. An adjudication that does not read is an error.
fn adjudications(
    given: Option<&Path>,
    files: &[PathBuf],
    scenarios: &[Arc<Scenario>],
) -> anyhow::Result<Vec<less_runtime::Adjudication>> {
    let mut out = Vec::new();
    for (file, scenario) in files.iter().zip(scenarios) {
        let dir = given.map_or_else(|| file.parent().unwrap_or(Path::new(".")).join("adjudication"), Path::to_owned);
        let path = dir.join(format!("{}.toml", scenario.name));
        if !path.is_file() {
            continue;
        }
        let adjudication = less_runtime::Adjudication::load(&path).map_err(|problems| {
            let code = problems.code().map(|c| c.to_string()).unwrap_or_default();
            Stop::usage(format!("{code}: {}: {problems}", path.display()))
        })?;
        out.push(adjudication);
    }
    Ok(out)
}
