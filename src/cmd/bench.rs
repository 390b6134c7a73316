//! `lessrt bench [SCENARIO|DIR]...`: every scenario in every mode (and repeat), through the same actor tree as
//! `lessrt run`, then the bench files in `--out`: `bench.json` (every run's report with its graded tasks),
//! `bench.csv` (one row per scenario × mode × repeat × role), `summary.md` (the tables of docs/benchmark.md) and SVG
//! plots.
//! `--replay A,B` (or `--record A,B`) answers repeat k from the k-th directory, at the temperature its exchanges were
//! asked at, so recordings made apart pool as repeats; `--sweep ROLE.FIELD=V1,V2` runs everything once per value of
//! one role's budget field (`Scenario::with_budget`), each value's runs under `runs/<ROLE.FIELD=V>/`; `--price` turns
//! billed tokens into money.
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
use less_agents::ModelSource;
use less_eval::bench::{Bench, BenchFailure, BenchRecording, BenchRun, Price, Sweep};
use less_runtime::run::{RunOptions, run_scenario_with};
use less_runtime::{AgentKind, ErrorCode, Scenario, WireMode};

use super::args::{AgentsArgs, InboxArgs, OutputArgs, Stop};
use super::run::{factory_for, pinned_for, schedule_for, verify_replayed};
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
    /// Runs of each scenario in each mode (default: one per directory of --replay or --record, else 1). With one
    /// directory, or none, the repeats must count alike; with several, repeat k answers from the k-th.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: Option<u32>,
    /// Where the bench files go (and each run's ledger under `runs/<scenario>/<mode>/<repeat>/`).
    #[arg(long, value_name = "DIR", default_value = "runs/bench")]
    out: PathBuf,
    /// bench.json: `--json` prints it instead of the tables, `-o FILE` writes it to FILE too (it is always in --out).
    #[command(flatten)]
    output: OutputArgs,
    /// Record every model exchange of the `llm` agents, per scenario, in DIR/<scenario>/; comma-separated
    /// directories record repeat k in the k-th.
    #[arg(long, value_name = "DIR[,DIR…]", value_delimiter = ',', conflicts_with = "replay")]
    record: Vec<PathBuf>,
    /// Answer the `llm` agents from DIR/<scenario>/ (made with --record, or `lessrt run --record`), no server;
    /// comma-separated directories answer repeat k from the k-th, each at the temperature it was recorded at.
    #[arg(long, value_name = "DIR[,DIR…]", value_delimiter = ',')]
    replay: Vec<PathBuf>,
    /// Prices in USD per million tokens, `input=…,cached=…,output=…` (cached prompt tokens at `cached`, default
    /// `input`; the rest of the prompt at `input`): billed tokens per solved task become money.
    #[arg(long, value_name = "input=USD,cached=USD,output=USD", value_parser = Price::parse)]
    price: Option<Price>,
    /// Run everything once per value of one field of one role's budget, e.g. `auditor.max_deref_tokens_total=250,1000`
    /// (the role's `[budgets.roles.<role>]`, else the scenario's defaults; scenarios without the role run as written).
    #[arg(long, value_name = "ROLE.FIELD=V1,V2,…", value_parser = Sweep::parse)]
    sweep: Option<Sweep>,
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
    let repeats = repeats(args)?;
    check_sweep(args.sweep.as_ref(), &scenarios)?;
    // Each repeat's scenario: at the temperature of the recording it replays.
    let mut per_repeat: Vec<Vec<Arc<Scenario>>> = Vec::new();
    for scenario in &scenarios {
        let mut variants = Vec::new();
        for repeat in 1..=repeats {
            variants.push(at_recorded_temperature(args, scenario, repeat)?);
        }
        per_repeat.push(variants);
    }
    // Every recording a run replays is checked before any run starts (and again after them all).
    for (variants, repeat) in per_repeat.iter().flat_map(|v| v.iter().zip(1..)) {
        verify_replayed(&source_for(args, variants, repeat))?;
    }
    let values: Vec<Option<u64>> = match &args.sweep {
        Some(sweep) => sweep.values.iter().copied().map(Some).collect(),
        None => vec![None],
    };

    let n_runs = values.len() as u64 * scenarios.len() as u64 * modes.len() as u64 * u64::from(repeats);
    let bars = Bars::new(n_runs, ctx.quiet);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut bench = Bench { price: args.price, ..Bench::default() };
    for value in &values {
        let label = args.sweep.as_ref().zip(*value).map(|(sweep, value)| sweep.label(value));
        for variants in &per_repeat {
            // Per repeat: the scenario at the sweep's value, where its models answer from, and what runs them.
            let mut prepared = Vec::new();
            for (idx, scenario) in variants.iter().enumerate() {
                let repeat = idx as u32 + 1;
                let scenario = match (&args.sweep, value) {
                    (Some(sweep), Some(value)) if scenario.agents.iter().any(|a| a.role == sweep.role) => Arc::new(
                        (**scenario)
                            .clone()
                            .with_budget(&sweep.role, &sweep.field, *value)
                            .map_err(|v| Stop::usage(format!("--sweep: {}", v.message)))?,
                    ),
                    _ => scenario.clone(),
                };
                let source = source_for(args, &scenario, repeat);
                let Some(summarizer) = args.summarizer.summarizer(&source)? else {
                    return Err(Stop::usage(
                        "--llm-base-url, --llm-model and --llm-api-key-env need `--summarizer llm`",
                    )
                    .into());
                };
                let pinned = pinned_for(&source)?;
                let schedule = schedule_for(&args.agents, &source)?;
                let factory = Arc::new(factory_for(&scenario, &source, &args.agents)?);
                prepared.push((repeat, scenario, summarizer, pinned, factory, schedule));
            }
            for &mode in &modes {
                for (repeat, scenario, summarizer, pinned, factory, (parallel, ordering)) in &prepared {
                    let repeat = *repeat;
                    let mut out = args.out.join("runs");
                    if let Some(label) = &label {
                        out.push(label);
                    }
                    let out = out.join(&scenario.name).join(mode.as_str()).join(repeat.to_string());
                    // A run starts from nothing: the project memory of an earlier bench would change what queries find.
                    if out.exists() {
                        std::fs::remove_dir_all(&out).with_context(|| format!("cannot clear {}", out.display()))?;
                    }
                    let options = RunOptions {
                        mode,
                        out_dir: Some(out),
                        trace: None,
                        pinned: *pinned,
                        summarizer: Some(summarizer.clone()),
                        step_timeout: args.step_timeout.map(Duration::from_secs),
                        inbox_cap: args.inbox.cap(),
                        cluster: None,
                        index: None,
                        resume: false,
                        parallel: *parallel,
                        ordering: *ordering,
                    };
                    let at = label.as_ref().map(|l| format!(" {l}")).unwrap_or_default();
                    let step_bar =
                        bars.run(&format!("{} {mode} #{repeat}{at}", scenario.name), scenario.steps.len() as u64);
                    let on_step = {
                        let bar = step_bar.clone();
                        move |index: usize, _n: usize| bar.set_position(index as u64)
                    };
                    let result =
                        runtime.block_on(run_scenario_with(scenario.clone(), factory.clone(), options, on_step));
                    step_bar.finish_and_clear();
                    bars.total.inc(1);
                    match result {
                        Ok(report) => {
                            bench.runs.push(BenchRun::new(scenario, report, repeat).with_sweep(label.clone()))
                        }
                        Err(err) => bench.failed.push(BenchFailure {
                            scenario: scenario.name.clone(),
                            mode,
                            repeat,
                            sweep: label.clone(),
                            error: err.to_string(),
                        }),
                    }
                }
            }
        }
    }
    bars.total.finish_and_clear();
    // bench.json names the recordings its models answered from: their model, the digest of their content and of the
    // manifest that seals it.
    for variants in &per_repeat {
        for (idx, scenario) in variants.iter().enumerate() {
            let repeat = idx as u32 + 1;
            let source = source_for(args, scenario, repeat);
            verify_replayed(&source)?;
            if let ModelSource::Record(dir) | ModelSource::Replay(dir) = source
                && dir.join(less_agents::record::RUN_FILE).exists()
            {
                let model = less_agents::record::recorded_model(&dir)
                    .map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
                let digest = less_agents::record::recording_digest(&dir)
                    .map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
                let manifest = less_agents::record::manifest::manifest_digest(&dir)
                    .map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
                bench.recordings.push(BenchRecording {
                    scenario: scenario.name.clone(),
                    repeat,
                    model: serde_json::to_value(model)?,
                    digest,
                    manifest,
                    temperature: shared_temperature(scenario),
                });
            }
        }
    }
    bench.conclude(args.sweep.as_ref());

    let adjudications = adjudications(args.adjudication.as_deref(), &files, &scenarios)?;
    if !adjudications.is_empty() {
        // Reported when it judges any of these answers (scripted answers, say, are nobody's to judge).
        let agreement = less_eval::bench::adjudication::agreement(&bench, &adjudications);
        bench.adjudication = agreement.rate.is_some().then_some(agreement);
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
    // Repeats answered from different recordings differ by design; from one source they must not.
    if args.record.len().max(args.replay.len()) <= 1 {
        for line in bench.differing_repeats() {
            eprintln!("lessrt: repeats counted different tokens: {line}");
        }
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

/// Where `scenario`'s models answer from in `repeat` (1-based): its own directory of the recording (the repeat's
/// directory of a list, the one directory for every repeat), or live. A replay of a scenario without `llm` agents and
/// without a recording runs as it is (nothing to answer).
fn source_for(args: &Args, scenario: &Scenario, repeat: u32) -> ModelSource {
    let of = |dirs: &[PathBuf]| {
        let root = dirs.get(repeat as usize - 1).or(dirs.first())?;
        Some(root.join(&scenario.name))
    };
    let has_models = scenario.agents.iter().any(|a| a.kind == AgentKind::Llm) || args.summarizer.is_llm();
    match (of(&args.record), of(&args.replay)) {
        (Some(dir), _) if has_models => ModelSource::Record(dir),
        (None, Some(dir)) if has_models || dir.exists() => ModelSource::Replay(dir),
        _ => ModelSource::Live,
    }
}

/// How many repeats run: `--repeat`, else one per directory of `--replay`/`--record`, else 1. Several directories
/// and another `--repeat` are a usage error (repeat k answers from the k-th directory).
fn repeats(args: &Args) -> anyhow::Result<u32> {
    let (flag, dirs) = if args.record.is_empty() { ("--replay", &args.replay) } else { ("--record", &args.record) };
    match (args.repeat, dirs.len()) {
        (None, 0) => Ok(1),
        (None, n) => u32::try_from(n).map_err(|_| Stop::usage(format!("{flag}: too many directories")).into()),
        (Some(repeat), 0 | 1) => Ok(repeat),
        (Some(repeat), n) if repeat as usize == n => Ok(repeat),
        (Some(repeat), n) => Err(Stop::usage(format!(
            "--repeat {repeat} with {n} directories for {flag}: repeat k answers from the k-th directory, so give \
             one directory per repeat (or leave --repeat out)"
        ))
        .into()),
    }
}

/// Refuses a sweep no scenario can take: a role no scenario has, or a field or value the budget refuses (naming the
/// known roles or fields), before anything runs.
fn check_sweep(sweep: Option<&Sweep>, scenarios: &[Arc<Scenario>]) -> anyhow::Result<()> {
    let Some(sweep) = sweep else { return Ok(()) };
    let with_role: Vec<&Arc<Scenario>> =
        scenarios.iter().filter(|s| s.agents.iter().any(|a| a.role == sweep.role)).collect();
    let Some(first) = with_role.first() else {
        let mut roles: Vec<&str> = scenarios.iter().flat_map(|s| s.agents.iter().map(|a| a.role.as_str())).collect();
        roles.sort_unstable();
        roles.dedup();
        return Err(Stop::usage(format!(
            "--sweep: no scenario has an agent of role {:?}; their roles: {}",
            sweep.role,
            roles.join(", ")
        ))
        .into());
    };
    for value in &sweep.values {
        (***first)
            .clone()
            .with_budget(&sweep.role, &sweep.field, *value)
            .map_err(|v| Stop::usage(format!("--sweep: {}", v.message)))?;
    }
    Ok(())
}

/// `scenario` as `repeat` replays it: at the temperature of its recording's exchanges (every exchange file's
/// `request.temperature`: they must agree), applied like `--temperature`. Unchanged when not replaying or when the
/// recording holds no exchange; a usage error when `--temperature` names another.
fn at_recorded_temperature(args: &Args, scenario: &Arc<Scenario>, repeat: u32) -> anyhow::Result<Arc<Scenario>> {
    let ModelSource::Replay(dir) = source_for(args, scenario, repeat) else { return Ok(scenario.clone()) };
    let Some(recorded) = recorded_temperature(&dir)? else { return Ok(scenario.clone()) };
    if let Some(given) = args.agents.temperature
        && given != recorded
    {
        return Err(Stop::usage(format!(
            "--temperature {given}, but {} was recorded at temperature {recorded}: leave --temperature out to \
             replay it as recorded",
            dir.display()
        ))
        .into());
    }
    Ok(Arc::new((**scenario).clone().with_model_settings(None, Some(recorded))))
}

/// The temperature every exchange of the recording in `dir` was asked at (exchange files: `*.json` holding `key`
/// and `request`; others, such as `run.json`, are not exchanges). None without exchanges; a usage error when they
/// disagree or one has none.
fn recorded_temperature(dir: &Path) -> anyhow::Result<Option<f64>> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(None) };
    let mut names: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    let mut found: Option<(f64, PathBuf)> = None;
    for path in names {
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let (Some(_), Some(request)) = (doc.get("key"), doc.get("request")) else { continue };
        let Some(temperature) = request.get("temperature").and_then(serde_json::Value::as_f64) else {
            return Err(Stop::usage(format!("{}: the exchange's request names no temperature", path.display())).into());
        };
        match &found {
            None => found = Some((temperature, path)),
            Some((first, at)) if *first != temperature => {
                return Err(Stop::usage(format!(
                    "{} mixes temperatures: {} asks at {first}, {} at {temperature}; a replayed repeat has one",
                    dir.display(),
                    at.display(),
                    path.display()
                ))
                .into());
            }
            Some(_) => {}
        }
    }
    Ok(found.map(|(t, _)| t))
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
