//! `lessrt run SCENARIO`: run a scenario through the actor tree, print the live trace, the per-role table and the
//! checks; exit 0 iff every check passes. `llm` agents ask their model live, or with `--record DIR` live while
//! writing every exchange to DIR, or with `--replay DIR` from such a recording with no server.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use less_agents::record::recorded_run;
use less_agents::{AgentsFactory, ModelSource};
use less_runtime::cluster::ClusterOptions;
use less_runtime::run::{Pinned, RunOptions, RunReport, check_out_dir, fresh_secret, run_scenario_with};
use less_runtime::{ErrorCode, WireMode};

use super::args::{AgentsArgs, InboxArgs, OutputArgs, Stop, count};
use super::serve::manifest::Manifest;
use super::summarizer::SummarizerChoice;
use crate::Ctx;

/// Arguments of `lessrt run`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The scenario file (TOML).
    #[arg(required_unless_present = "resume")]
    scenario: Option<PathBuf>,
    /// Go on with a run whose process died (killed, the machine rebooted): DIR is the scenario's run directory
    /// (`runs/<scenario>`). Every other option is the interrupted run's; a mode that finished keeps its report, the
    /// mode that was running goes on from the step it had started, from its ledger; the scenario file must be
    /// unchanged.
    #[arg(long, value_name = "DIR", conflicts_with = "scenario")]
    resume: Option<PathBuf>,
    /// Wire mode: less (engrams, pointers, budgets), verbatim (the fair baseline: what a careful orchestrator without
    /// LESS sends) or verbatim-whole (whole files and every prior report pasted). less and verbatim when omitted.
    #[arg(long, value_parser = parse_mode)]
    mode: Option<WireMode>,
    /// The report: one object per mode (an array of two when both ran). `--json` replaces the trace and tables.
    #[command(flatten)]
    output: OutputArgs,
    /// Where each mode's ledger.jsonl, audit.log, report.json and memory go: DIR/<scenario>/<mode>/ (default DIR:
    /// runs); `lessrt runs show DIR/<scenario>` prints a finished run again.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Record every model exchange of the `llm` agents in this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer the `llm` agents from a recording made with --record, without a server.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// Longest one step may take, in seconds (default: 120, or for an `llm` agent what its model may take: its
    /// timeout_secs × attempts for each completion of a turn, plus a margin).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    step_timeout: Option<u64>,
    #[command(flatten)]
    summarizer: SummarizerChoice,
    #[command(flatten)]
    agents: AgentsArgs,
    #[command(flatten)]
    inbox: InboxArgs,
    /// Serve the LESS page of this run at ADDR (loopback; port 0 picks one, said on stderr) from before the first
    /// step: events arrive on the page as they happen. When the run ends the page stays up until Ctrl-C; the exit
    /// status is then the run's.
    #[arg(long, value_name = "ADDR")]
    serve: Option<std::net::SocketAddr>,
    /// With --serve: listen on an address other than loopback.
    #[arg(long, requires = "serve")]
    allow_remote: bool,
    /// Wait this long before each step after the first, so a person can follow the run on the page.
    #[arg(long, value_name = "MS")]
    pace: Option<u64>,
    /// Place the run's agents on worker nodes (`lessrt node`): a TOML file with `nodes = [{name, addr}]` and an
    /// optional `[placement]` table (agent = "node", or "head"); it replaces the scenario's `[cluster]`.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// With --cluster (or a scenario's `[cluster]`): a node that answers no heartbeat for this many seconds is lost,
    /// like one whose connection dropped, and its agents move to the head.
    #[arg(long, value_name = "SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    heartbeat_timeout: u64,
    #[command(flatten)]
    tls: super::args::TlsArgs,
    /// The environment variable holding the cluster's cookie (a scenario that places agents on nodes needs it).
    #[arg(long, value_name = "VAR", default_value = "LESSRT_COOKIE")]
    cookie_env: String,
    /// Run the scenario on this directory instead of its own `workspace` (any directory; symlinks out of it are
    /// still refused). Every pointer the scenario names must resolve in it.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

/// Reads a `--cluster` file: the nodes and the placement (`LESS_NODE_UNKNOWN` when it cannot be read or parsed).
fn read_cluster(file: &Path) -> Result<less_runtime::cluster::ClusterFile, less_runtime::Violation> {
    let unknown = |message: String| less_runtime::Violation::new(ErrorCode::NodeUnknown, "", message);
    let text = std::fs::read_to_string(file).map_err(|e| unknown(format!("{}: {e}", file.display())))?;
    toml::from_str(&text).map_err(|e| unknown(format!("{}: {}", file.display(), e.message())))
}

/// The file in a run directory that holds its report; written when the run finished.
pub(crate) const REPORT_FILE: &str = less_runtime::view::REPORT_FILE;

fn parse_mode(text: &str) -> Result<WireMode, String> {
    text.parse()
}

/// The file in a scenario's run directory that says how the run was started, for `--resume`.
const COMMAND_FILE: &str = "command.json";

/// What [`COMMAND_FILE`] holds: the arguments of `lessrt run`, where it ran, and the scenario file's digest, with a MAC
/// over them under the user's own key ([`user_key`]), so that a changed file, or one written by another user or on
/// another machine, is not resumed.
#[derive(serde::Serialize, serde::Deserialize)]
struct Command {
    args: Vec<String>,
    cwd: PathBuf,
    scenario_blake3: String,
    #[serde(default)]
    mac: String,
}

impl Command {
    /// The MAC of its contents under `key`: keyed blake3 over each part, length-prefixed.
    fn mac(&self, key: &[u8; 32]) -> String {
        let mut hasher = blake3::Hasher::new_keyed(key);
        let cwd = self.cwd.as_os_str().as_encoded_bytes();
        let parts = self.args.iter().map(|a| a.as_bytes()).chain([cwd, self.scenario_blake3.as_bytes()]);
        for part in parts {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        hasher.finalize().to_hex().to_string()
    }
}

/// The file of the user's key for [`COMMAND_FILE`]'s MAC: `resume.key` in `$LESSRT_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/lessrt`, else `~/.config/lessrt` (a configuration directory: a cache may be wiped). Only an
/// absolute directory counts (as XDG says of its variables): a relative one would find a key a run directory ships.
fn user_key_file() -> std::io::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
    var("LESSRT_CONFIG_DIR")
        .or_else(|| var("XDG_CONFIG_HOME").map(|x| x.join("lessrt")))
        .or_else(|| var("HOME").map(|h| h.join(".config").join("lessrt")))
        .map(|dir| dir.join("resume.key"))
        .ok_or_else(|| {
            std::io::Error::other(
                "no configuration directory for the user's key: set HOME, XDG_CONFIG_HOME or LESSRT_CONFIG_DIR to an \
                 absolute path",
            )
        })
}

/// The user's key for [`COMMAND_FILE`]'s MAC ([`less_runtime::files::secret_key`]): made on first use with
/// `create`, only read without.
fn user_key(create: bool) -> std::io::Result<[u8; 32]> {
    let path = user_key_file()?;
    if create && let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    less_runtime::files::secret_key(&path, create)
}

/// The arguments of a `lessrt run` being resumed, read back.
#[derive(clap::Parser)]
#[command(no_binary_name = true)]
struct Stored {
    #[command(flatten)]
    args: Args,
}

pub(crate) fn run(args: &Args, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let Some(dir) = &args.resume else { return run_modes(args, ctx, None) };
    let not_resumable = |why: String| {
        let code = ErrorCode::RunNotResumable;
        Stop::usage(format!(
            "{code}: {} cannot be resumed: {why}\nlessrt: instead: {}",
            dir.display(),
            code.instruction()
        ))
    };
    let dir = std::path::absolute(dir).map_err(|e| not_resumable(e.to_string()))?;
    let text = std::fs::read(dir.join(COMMAND_FILE)).map_err(|e| not_resumable(format!("{COMMAND_FILE}: {e}")))?;
    let command: Command = serde_json::from_slice(&text).map_err(|e| not_resumable(format!("{COMMAND_FILE}: {e}")))?;
    let key = user_key(false).map_err(|e| not_resumable(format!("this user's key: {e}")))?;
    if command.mac.is_empty() || !constant_time_eq(command.mac.as_bytes(), command.mac(&key).as_bytes()) {
        return Err(not_resumable(format!(
            "{COMMAND_FILE} was changed since the run wrote it, or another user or machine wrote it"
        ))
        .into());
    }
    let mut stored = <Stored as clap::Parser>::try_parse_from(&command.args)
        .map_err(|e| not_resumable(format!("{COMMAND_FILE}: its arguments do not parse: {e}")))?
        .args;
    // A resume goes on with the run; it opens no listener and sends nothing anywhere the run did not already.
    if stored.serve.is_some() || stored.summarizer.names_an_endpoint() {
        return Err(not_resumable(format!(
            "{COMMAND_FILE} asks for --serve or a summarizer endpoint, which a resume does not keep: watch it with \
             `lessrt serve {}`, or run the scenario again with them",
            dir.display()
        ))
        .into());
    }
    std::env::set_current_dir(&command.cwd)
        .map_err(|e| not_resumable(format!("the directory it ran in, {}: {e}", command.cwd.display())))?;
    let scenario = stored.scenario.clone().ok_or_else(|| not_resumable(format!("{COMMAND_FILE} names no scenario")))?;
    let now = std::fs::read(&scenario).map_err(|e| not_resumable(format!("{}: {e}", scenario.display())))?;
    if blake3::hash(&now).to_hex().as_str() != command.scenario_blake3 {
        return Err(not_resumable(format!("{} changed since the run started", scenario.display())).into());
    }
    // The directory may have moved since: the run goes on where it is now.
    stored.out = dir.parent().map(Path::to_owned);
    run_modes(&stored, ctx, Some(dir))
}

/// Runs each mode of `args`; `resuming`: the scenario's run directory of an interrupted run, whose finished modes keep
/// their reports and whose unfinished one goes on from its ledger.
fn run_modes(args: &Args, ctx: Ctx, resuming: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let Some(scenario_path) = args.scenario.as_deref() else {
        return Err(Stop::usage("a scenario file or --resume DIR is needed").into());
    };
    let placed =
        less_runtime::load_scenario(scenario_path, args.workspace.as_deref()).and_then(|s| match &args.cluster {
            Some(file) => {
                let cluster = read_cluster(file).map_err(|v| less_runtime::Violations(vec![v]))?;
                s.placed(cluster.nodes, &cluster.placement)
            }
            None => Ok(s),
        });
    let scenario = match placed {
        Ok(s) => Arc::new(args.agents.apply(s)),
        Err(violations) => {
            let file = scenario_path.display().to_string();
            let errors: Vec<serde_json::Value> = violations
                .0
                .iter()
                .map(|v| serde_json::json!({"code": v.code, "file": file, "path": v.path, "message": v.message}))
                .collect();
            args.output.emit(&serde_json::json!({"valid": false, "errors": errors}), || {
                for v in &violations.0 {
                    outln!("{}\t{file}\t{}\t{}", v.code, v.path, v.message);
                }
            })?;
            // Input that cannot be read or parsed is a usage problem (2); a scenario that breaks its schema is 1.
            let unusable =
                violations.0.iter().any(|v| matches!(v.code, ErrorCode::InputUnreadable | ErrorCode::JsonMalformed));
            return Ok(ExitCode::from(if unusable { 2 } else { 1 }));
        }
    };
    let source = ModelSource::from_dirs(args.record.as_deref(), args.replay.as_deref());
    // The run's summarizer actors: extractive, or a model answering like the agents' (live, recorded, replayed).
    let Some(summarizer) = args.summarizer.summarizer(&source)? else {
        return Err(Stop::usage("--llm-base-url, --llm-model and --llm-api-key-env need `--summarizer llm`").into());
    };
    // Recorded and replayed runs stamp documents with the recording's start time, so both count alike; grants are
    // signed with a fresh key, as in a live run (a recording holds no secret).
    let pinned = pinned_for(&source)?;
    let (parallel, ordering) = schedule_for(&args.agents, &source)?;
    let modes = match args.mode {
        Some(mode) => vec![mode],
        None => vec![WireMode::Less, WireMode::Verbatim],
    };
    let scenario_dir = args.out.clone().unwrap_or_else(|| PathBuf::from("runs")).join(&scenario.name);
    let out_dir = |mode: WireMode| scenario_dir.join(mode.as_str());
    if let Some(dir) = &resuming
        && dir.file_name() != Some(std::ffi::OsStr::new(&scenario.name))
    {
        let code = ErrorCode::RunNotResumable;
        return Err(Stop::usage(format!(
            "{code}: {} cannot be resumed: a run of {} is in a directory named after it\nlessrt: instead: {}",
            dir.display(),
            scenario.name,
            code.instruction()
        ))
        .into());
    }
    // Every output is checked before anything runs: a run must not end, or its actors fail, on a path it could
    // have refused at once.
    let checked =
        args.output.check_writable().and_then(|()| modes.iter().try_for_each(|mode| check_out_dir(&out_dir(*mode))));
    if let Err(violation) = checked {
        eprintln!("lessrt: {}: {}", violation.code, violation.message);
        eprintln!("lessrt: instead: {}", violation.code.instruction());
        return Ok(ExitCode::from(2));
    }
    // The trace and tables are the text output: `--json` puts the report on stdout instead.
    let text = !args.output.json();
    let trace = text && !ctx.quiet;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // The page is up before the first step, on the scenario's output directory (each mode's directory appears when
    // the mode starts). Ctrl-C during the run ends the process as it would without --serve.
    let watch = match args.serve {
        Some(addr) => {
            crate::cmd::serve::check_addr(addr, args.allow_remote, "--serve")?;
            let dir = scenario_dir.clone();
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let (bound, server) =
                runtime.block_on(crate::cmd::serve::start(crate::cmd::serve::for_run(dir, args.allow_remote), addr))?;
            eprintln!("lessrt run: watch it at http://{bound}/");
            let interrupt = runtime.spawn(async {
                if tokio::signal::ctrl_c().await.is_ok() {
                    eprintln!("lessrt: interrupted");
                    std::process::exit(130);
                }
            });
            Some((bound, server, interrupt))
        }
        None => None,
    };
    let pace = args.pace.map(Duration::from_millis);
    // A run with agents on nodes: the cookie, and the scenario's text for the nodes to rebuild it from.
    let cluster = if scenario.agents.iter().any(|a| a.node.is_some()) {
        let cookie = less_runtime::cluster::cookie_from_env(&args.cookie_env)
            .map_err(|e| Stop::usage(format!("LESS_ARGUMENT_INVALID: {e}")))?;
        let scenario_toml = std::fs::read_to_string(scenario_path)
            .with_context(|| format!("cannot read {}", scenario_path.display()))?;
        Some(Arc::new(ClusterOptions {
            cookie,
            scenario_toml,
            scenario_base: scenario_path.parent().unwrap_or(Path::new(".")).to_owned(),
            every_llm: matches!(args.agents.agents, super::args::AgentsChoice::Llm),
            delegated: matches!(args.agents.agents, super::args::AgentsChoice::LlmFree),
            model_timeout: args.agents.model_timeout,
            temperature: args.agents.temperature,
            heartbeat_timeout: Duration::from_secs(args.heartbeat_timeout),
            tls: args.tls.load()?,
            models: less_runtime::cluster::ModelDirs {
                record: args.record.as_deref().map(std::path::absolute).transpose()?,
                replay: args.replay.as_deref().map(std::path::absolute).transpose()?,
            },
        }) as Arc<dyn less_runtime::run::Placement>)
    } else {
        None
    };
    if resuming.is_none() {
        save_command(&scenario_dir, scenario_path)?;
    }
    let mut reports = Vec::new();
    for mode in modes {
        if trace {
            outln!("{}", heading(&scenario.name, mode, &scenario.tokenizer.to_string()));
        }
        let out = out_dir(mode);
        let report_file = out.join(REPORT_FILE);
        // A resumed run's mode that finished keeps its report; the one that was running goes on from its ledger.
        let resume = resuming.is_some() && out.join(less_runtime::LEDGER_FILE).is_file();
        if resume && report_file.is_file() {
            let text = std::fs::read_to_string(&report_file)
                .with_context(|| format!("cannot read {}", report_file.display()))?;
            let report: RunReport =
                serde_json::from_str(&text).with_context(|| format!("{} does not read back", report_file.display()))?;
            if !args.output.json() {
                outln!("(finished before the run was interrupted: {})", report_file.display());
                print_report(&report);
            }
            reports.push(report);
            continue;
        }
        // A report left by an earlier run in this directory would describe another ledger.
        match std::fs::remove_file(&report_file) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(anyhow::anyhow!("cannot remove {}: {err}", report_file.display()));
            }
            _ => {}
        }
        let options = RunOptions {
            mode,
            out_dir: Some(out),
            trace: crate::output::trace_if(trace),
            pinned,
            summarizer: Some(summarizer.clone()),
            step_timeout: args.step_timeout.map(Duration::from_secs),
            inbox_cap: args.inbox.cap(),
            cluster: cluster.clone(),
            index: None,
            resume,
            parallel,
            ordering,
        };
        let factory = Arc::new(factory_for(&scenario, &source, &args.agents)?);
        // What the page needs and the run directory does not otherwise say: the workspace, the hierarchy, budgets.
        write_manifest(&Manifest::of(&scenario, Some(scenario_path), mode), &out_dir(mode))?;
        // The driver runs on this thread (block_on): a pause here holds the next step while the actors run on.
        let paced = move |index: usize, _: usize| {
            if let Some(pace) = pace.filter(|_| index > 0) {
                std::thread::sleep(pace);
            }
        };
        let report = runtime
            .block_on(run_scenario_with(scenario.clone(), factory, options, paced))
            .map_err(|v| anyhow::anyhow!("{v}"))?;
        let mut json = serde_json::to_string_pretty(&report)?;
        json.push('\n');
        less_runtime::files::write_whole(&report_file, json.as_bytes())
            .with_context(|| format!("cannot write {}", report_file.display()))?;
        if text {
            print_report(&report);
        }
        reports.push(report);
    }
    verify_replayed(&source)?;
    if text && reports.len() == 2 {
        print_comparison(&reports[0], &reports[1]);
    }
    let doc = if reports.len() == 1 { serde_json::to_value(&reports[0])? } else { serde_json::to_value(&reports)? };
    args.output.emit(&doc, || {})?;
    if let Some((bound, server, interrupt)) = watch {
        interrupt.abort();
        eprintln!("lessrt run: the run is over; the page stays at http://{bound}/ until Ctrl-C");
        runtime.block_on(async {
            tokio::select! {
                done = server => done.context("the server stopped")??,
                _ = tokio::signal::ctrl_c() => {}
            }
            anyhow::Ok(())
        })?;
    }
    // Exit 1 says why: each failed check and unsolved task, with its mode.
    for report in &reports {
        for failure in report.failures() {
            eprintln!("lessrt run: {} {}: {failure}", report.scenario, report.mode);
        }
    }
    Ok(if reports.iter().all(RunReport::passed) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Writes [`COMMAND_FILE`] into `dir` (the scenario's run directory): this process's `lessrt run` arguments, where it
/// runs, and the scenario file's digest, so `--resume` can go on with the same run.
fn save_command(dir: &Path, scenario: &Path) -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // The subcommand's own arguments: what follows `run` (the global flags before it are the resuming process's).
    if let Some(at) = args.iter().position(|a| a == "run") {
        args.drain(..=at);
    }
    // The global flags given after `run` are the resuming process's too.
    let mut kept = Vec::with_capacity(args.len());
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        match arg.as_str() {
            "-q" | "--quiet" => {}
            "--otlp" => skip_value = true,
            _ if arg.starts_with("--otlp=") => {}
            _ => kept.push(arg),
        }
    }
    let args = kept;
    let text = std::fs::read(scenario).with_context(|| format!("cannot read {}", scenario.display()))?;
    let mut command = Command {
        args,
        cwd: std::env::current_dir().context("the current directory")?,
        scenario_blake3: blake3::hash(&text).to_hex().to_string(),
        mac: String::new(),
    };
    let key = user_key(true).context("the user's key for command.json")?;
    command.mac = command.mac(&key);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut json = serde_json::to_vec_pretty(&command)?;
    json.push(b'\n');
    less_runtime::files::write_whole(&dir.join(COMMAND_FILE), &json)
        .with_context(|| format!("cannot write {}", dir.join(COMMAND_FILE).display()))
}

/// Whether `a` and `b` are equal, in time that does not depend on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Recorded and replayed runs stamp documents with the recording's start time and sign grants with its key, so both
/// count alike; a live run is not pinned.
pub(crate) fn pinned_for(source: &ModelSource) -> anyhow::Result<Option<Pinned>> {
    let (dir, create) = match source {
        ModelSource::Live => return Ok(None),
        ModelSource::Record(dir) => (dir, true),
        ModelSource::Replay(dir) => (dir, false),
    };
    verify_replayed(source)?;
    let text = recorded_run(dir, create, &less_runtime::now_rfc3339())
        .map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
    let secret = fresh_secret().map_err(|err| anyhow::anyhow!("{}: {err}", err.code))?;
    let parsed = time::OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339);
    let clock = parsed.map_err(|err| anyhow::anyhow!("{}: started_at {text:?}: {err}", dir.display()))?;
    Ok(Some(Pinned { clock, secret }))
}

/// How many turns of a run may overlap and how its agents read what arrived (`--parallel`, and the recording's
/// ordering for a recorded or replayed run): a recording made one turn at a time replays one turn at a time.
pub(crate) fn schedule_for(
    agents: &AgentsArgs,
    source: &ModelSource,
) -> anyhow::Result<(usize, less_runtime::run::Ordering)> {
    use less_runtime::run::Ordering;
    let ordering = match source {
        ModelSource::Live => Ordering::Causal,
        ModelSource::Record(dir) | ModelSource::Replay(dir) => {
            less_agents::record::recorded_ordering(dir).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?
        }
    };
    if ordering == Ordering::Arrival && agents.parallel > 1 {
        let dir = match source {
            ModelSource::Record(dir) | ModelSource::Replay(dir) => dir.display().to_string(),
            ModelSource::Live => String::new(),
        };
        return Err(Stop::usage(format!(
            "LESS_ARGUMENT_INVALID: the recording in {dir} was made one turn at a time, its agents reading messages \
             in the order they arrived: replay it with --parallel 1, or record it again to run turns at once"
        ))
        .into());
    }
    if agents.replay_latency.is_some() && !matches!(source, ModelSource::Replay(_)) {
        return Err(Stop::usage(
            "LESS_ARGUMENT_INVALID: --replay-latency paces a replay: give --replay DIR with it".to_owned(),
        )
        .into());
    }
    Ok((agents.parallel, ordering))
}

/// The agents of `scenario` from `source`, each replayed exchange taking `--replay-latency` if given.
pub(crate) fn factory_for(
    scenario: &less_runtime::Scenario,
    source: &ModelSource,
    agents: &AgentsArgs,
) -> anyhow::Result<AgentsFactory> {
    let factory =
        AgentsFactory::for_scenario(scenario, source).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
    Ok(match agents.replay_latency {
        Some(ms) => factory.paced(Duration::from_millis(ms)),
        None => factory,
    })
}

/// A replay's recording checked against its manifest (nothing for a live or recording run): before anything runs,
/// and again after, so a recording that is not what was sealed ends the command with its code (exit 2), whatever
/// the agents made of the exchange refused to them.
pub(crate) fn verify_replayed(source: &ModelSource) -> anyhow::Result<()> {
    if let ModelSource::Replay(dir) = source {
        less_agents::record::manifest::verify(dir).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
    }
    Ok(())
}

/// The line that opens a mode's trace.
pub(crate) fn heading(scenario: &str, mode: WireMode, tokenizer: &str) -> String {
    format!("== {scenario} ({} mode, {tokenizer})", mode.as_str())
}

/// The per-role table, each role's model usage and the checks.
pub(crate) fn print_report(report: &RunReport) {
    // The role column is as wide as the longest role name.
    let width = report.roles.keys().map(|r| r.chars().count()).chain([5]).max().unwrap_or(5);
    outln!(
        "\n{:<width$} {:>5} {:>8} {:>6} {:>6} {:>6} {:>9} {:>6} {:>9} {:>5} {:>5} {:>5} {:>5}",
        "role",
        "turns",
        "mean",
        "p50",
        "p95",
        "max",
        "total",
        "derefs",
        "deref_tok",
        "rej",
        "resnd",
        "esc",
        "rst"
    );
    for (role, r) in report.roles.iter().chain(std::iter::once((&"TOTAL".to_owned(), &report.totals))) {
        let t = &r.inline_tokens;
        outln!(
            "{role:<width$} {:>5} {:>8.1} {:>6} {:>6} {:>6} {:>9} {:>6} {:>9} {:>5} {:>5} {:>5} {:>5}",
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
        let mut extra = String::new();
        if m.cached_tokens > 0 {
            extra.push_str(&format!(", {} of the prompt cached", m.cached_tokens));
        }
        if m.counted_calls > 0 {
            extra.push_str(&format!(", {} counted with the run's tokenizer", count(m.counted_calls, "call")));
        }
        if m.model_ms > 0 {
            extra.push_str(&format!(", {:.1} s of model time", m.model_ms as f64 / 1000.0));
        }
        outln!(
            "model usage {role}: {} ({} unusable), {} prompt + {} completion = {} billed tokens (provider's count{extra})",
            count(m.calls, "call"),
            m.unusable,
            m.prompt_tokens,
            m.completion_tokens,
            m.billed()
        );
    }
    for (service, n) in &report.service_restarts {
        outln!("restarted: the run's {service}, {}", count(u64::from(*n), "time"));
    }
    for lost in &report.lost {
        outln!("LOST: {} (its node failed past the restart limit): {}", lost.agents.join(", "), lost.reason);
    }
    outln!("\n{}", rates_line(&report.rates));
    if let Some(timing) = &report.timing {
        outln!("{}", timing_line(timing));
    }
    outln!();
    for check in &report.checks {
        outln!("{} {} — {}", check.status.label(), check.name, check.detail);
    }
    if report.tasks.graded > 0 {
        outln!("\ntasks: {} of {} solved", report.tasks.solved, report.tasks.graded);
        for task in &report.tasks.items {
            let verdict = if task.solved { "SOLVED" } else { "UNSOLVED" };
            outln!("{verdict} {} ({}, {}) — {}", task.id, task.kind.as_str(), task.agent, task.evidence);
        }
    }
    outln!();
}

/// What the turns took in time, in one line.
fn timing_line(timing: &less_runtime::run::Timing) -> String {
    let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    format!(
        "timing: {} wall over {}, at most {} at once; model {} in all, {} along the critical path",
        secs(timing.wall_ms),
        count(timing.turns as u64, "turn"),
        timing.most_at_once,
        secs(timing.model_ms),
        secs(timing.critical_path_model_ms)
    )
}

/// LESS §12's rates in one line: `-` where a rate has no denominator.
fn rates_line(rates: &less_runtime::run::Rates) -> String {
    let pct = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", r * 100.0));
    let kinds: Vec<String> = rates.top_engram_kinds.iter().map(|k| format!("{} {}", k.kind, k.count)).collect();
    let trend = rates.tokens_per_turn_trend.map_or_else(|| "-".to_owned(), |[a, b]| format!("{a:.0} → {b:.0}"));
    format!(
        "rates: resend {}, deref denial {}, contradiction {}; tokens/turn {trend}; engrams: {}",
        pct(rates.resend_rate),
        pct(rates.deref_denial_rate),
        pct(rates.contradiction_rate),
        if kinds.is_empty() { "-".to_owned() } else { kinds.join(", ") }
    )
}

/// LESS against verbatim, per role.
pub(crate) fn print_comparison(less: &RunReport, verbatim: &RunReport) {
    // LESS moves content out of messages into metered derefs, so both sides are shown with and without them: the
    // fair baseline pastes what LESS dereferences and reads only what nobody pasted to it.
    let width = less.roles.keys().chain(verbatim.roles.keys()).map(|r| r.chars().count()).chain([5]).max().unwrap_or(5);
    outln!("tokens, LESS vs {} (inline; inline + deref'd content):", verbatim.mode);
    outln!(
        "  {:<width$} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "role",
        "LESS",
        "LESS+drf",
        "baseline",
        "base+drf",
        "inline%",
        "+deref%"
    );
    let pct = |a: u64, b: u64| if b == 0 { "—".to_owned() } else { format!("{:.1}%", 100.0 * a as f64 / b as f64) };
    let rows = less.roles.iter().map(|(role, r)| (role.as_str(), r, verbatim.roles.get(role)));
    for (role, r, v) in rows.chain(std::iter::once(("TOTAL", &less.totals, Some(&verbatim.totals)))) {
        let (base, base_all) = v.map_or((0, 0), |v| (v.inline_tokens.total, v.inline_tokens.total + v.deref_tokens));
        let (inline, with_deref) = (r.inline_tokens.total, r.inline_tokens.total + r.deref_tokens);
        outln!(
            "  {role:<width$} {inline:>9} {with_deref:>9} {base:>9} {base_all:>9} {:>8} {:>8}",
            pct(inline, base),
            pct(with_deref, base_all)
        );
    }
    if less.totals.model.calls + verbatim.totals.model.calls == 0 {
        return;
    }
    // What the models read and wrote, as their provider counted it: the prompt is where pasted context costs.
    outln!("model tokens, LESS vs verbatim (prompt + completion, provider's count; billed = prompt + completion):");
    outln!(
        "  {:<width$} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "role",
        "LESS in",
        "LESS out",
        "verb in",
        "verb out",
        "in%",
        "billed%"
    );
    let rows = less.roles.iter().map(|(role, r)| (role.as_str(), r.model, verbatim.roles.get(role).map(|v| v.model)));
    for (role, l, v) in rows.chain(std::iter::once(("TOTAL", less.totals.model, Some(verbatim.totals.model)))) {
        let v = v.unwrap_or_default();
        if l.calls + v.calls == 0 {
            continue;
        }
        outln!(
            "  {role:<width$} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
            l.prompt_tokens,
            l.completion_tokens,
            v.prompt_tokens,
            v.completion_tokens,
            pct(l.prompt_tokens, v.prompt_tokens),
            pct(l.billed(), v.billed())
        );
    }
}

/// Writes `manifest` into a mode's directory `dir` (whole or not at all): what the page reads of a run besides its
/// ledger.
pub(crate) fn write_manifest(manifest: &Manifest, dir: &Path) -> std::io::Result<()> {
    let context = |what: String| move |err: std::io::Error| std::io::Error::new(err.kind(), format!("{what}: {err}"));
    std::fs::create_dir_all(dir).map_err(context(format!("cannot create {}", dir.display())))?;
    let path = dir.join(less_runtime::view::MANIFEST_FILE);
    let mut json = serde_json::to_string_pretty(manifest).map_err(std::io::Error::other)?;
    json.push('\n');
    less_runtime::files::write_whole(&path, json.as_bytes())
        .map_err(context(format!("cannot write {}", path.display())))
}
