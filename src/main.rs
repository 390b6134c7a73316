//! The `lessrt` command line: argument parsing and wiring only; the work is done by `less-runtime`.
//!
//! Exit codes, the same for every command (`cmd::args::EXIT_CODES`, shown by every `--help`): 0 yes (done, valid,
//! found, every check passed), 1 no (a check failed, nothing found, an invalid document), 2 could not run (bad
//! arguments, unreadable input, missing model or data, refused, runtime failure).
//! A reader that closes the pipe early (`lessrt dag show | head`) ends the command quietly with status 141
//! (`output`).

#![deny(clippy::print_stdout)]

#[macro_use]
mod output;
mod cmd;
mod progress;
mod telemetry;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::cmd::args::{EXIT_CODES, Stop};

/// `lessrt --version`: the package version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LESSRT_GIT_COMMIT"), ")");

/// lessrt: a runtime for hierarchies of cooperating AI agents that exchange budgeted engrams, not pasted context.
#[derive(Debug, Parser)]
#[command(name = "lessrt", version = VERSION, about, long_about = None, propagate_version = true)]
struct Cli {
    /// No live trace, no progress bars, no notes on stderr (errors and warnings still print).
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Export agents' turns, tool uses and model calls as OpenTelemetry traces and metrics (GenAI conventions, with
    /// less.* attributes) over OTLP/HTTP to this endpoint, e.g. http://127.0.0.1:4318 (default: $LESSRT_OTLP_ENDPOINT;
    /// none: nothing is exported).
    #[arg(long, global = true, value_name = "URL")]
    otlp: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a PAS scenario through the actor tree, in LESS and verbatim modes, and report tokens per role and the checks.
    Run(cmd::run::Args),
    /// Benchmark scenarios in LESS and the baselines: graded tasks, tokens per role, bench.json/csv, summary.md, plots.
    Bench(cmd::bench::Args),
    /// Ask a question of any directory: a lead and workers (LLM agents) search the workspace, read what they need
    /// and answer with cited spans; tokens per role, and with --compare the fair baseline beside it.
    Ask(cmd::ask::Args),
    /// Build or refresh a workspace's index (chunks along the syntax, BM25 and embeddings) and say what it holds.
    Index(cmd::index::IndexArgs),
    /// Search a workspace's index: the pointers and one-line previews a `search` action gets, best first.
    Search(cmd::index::SearchArgs),
    /// Re-render a finished run from its directory: the trace, the per-role tables and the checks.
    #[command(subcommand)]
    Runs(cmd::runs::Command),
    /// Model recordings (`--record`/`--replay`): verify one against its manifest.json, or seal one made before.
    #[command(subcommand)]
    Recording(cmd::recording::Command),
    /// Grade a scenario's tasks again: a run's ledger with this build's grader, or bare answers (--claims FILE.jsonl)
    /// on their claim and citation rules; verdicts are output (exit 0), bad input exits 2.
    Grade(cmd::grade::Args),
    /// Validate engrams, pointers, briefs, grants, deref requests, typed messages or scenarios against the schemas.
    Validate(cmd::validate::Args),
    /// Count the tokens of a text with a real tokenizer.
    Tokens(cmd::tokens::Args),
    /// Convert pointers between their text form and their JSON object form.
    #[command(subcommand)]
    Pointer(cmd::pointer::Command),
    /// Compact a long conversation: system messages, one context ledger, the verbatim hot tail.
    Compact(cmd::compact::Args),
    /// Evaluate recall on real data (LoCoMo) and the context ledger against its baselines.
    #[command(subcommand)]
    Eval(cmd::eval::Command),
    /// The durable engram store: put, query, get, stats, reindex, promote, evict; ingest archives a transcript.
    #[command(subcommand)]
    Memory(cmd::memory::Command),
    /// The lossless memory: raw messages and the session → arc → epoch summary DAG over them.
    #[command(subcommand)]
    Dag(cmd::dag::Command),
    Mcp(cmd::mcp::Args),
    /// Serve the LESS page of a run on a loopback address: hierarchy with budget meters, Shared Briefs, engram feed,
    /// pointer click-through, timeline, memory DAG, LESS vs verbatim; live during `lessrt run --serve`.
    Serve(cmd::serve::Args),
    /// A worker node of cluster runs: hosts the agents (and their gateways) a run places on it, over ractor_cluster
    /// with a cookie handshake; loopback unless --allow-remote.
    Node(cmd::node::Args),
    /// Put the runtime under load and measure it: agents sending through gateways at once, concurrent memory
    /// clients, an ingest while queries run. Exit 1 if anything acknowledged was lost.
    Load(cmd::load::Args),
    /// Check what this machine has for lessrt (embedding model, ONNX Runtime) and say how to fix what is missing.
    Doctor(cmd::doctor::Args),
    /// Print a published JSON Schema, or list them.
    Schema(cmd::schema::Args),
    /// LESS as an agent skill: `lessrt skill export DIR` writes SKILL.md, the manifest, the schemas and the MCP
    /// server's command for an agent host to load.
    #[command(subcommand)]
    Skill(cmd::skill::Command),
    /// List the stable error codes (the contract's and the model providers') with what to do instead.
    Errors(cmd::errors::Args),
    /// Print shell completions for lessrt (e.g. `lessrt completions bash > ~/.local/share/bash-completion/completions/lessrt`).
    Completions(cmd::completions::Args),
}

/// What every command may read besides its own arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    /// `--quiet`: no trace, no progress, no notes.
    pub(crate) quiet: bool,
}

/// The command line's definition, with the exit codes at the end of every `--help`.
pub(crate) fn command() -> clap::Command {
    fn with_exit_codes(command: clap::Command) -> clap::Command {
        command.after_help(EXIT_CODES).mut_subcommands(with_exit_codes)
    }
    with_exit_codes(Cli::command())
}

/// The panic hook: quiet for what the runtime catches and answers, loud for real crashes.
///
/// - An agent that panics in its turn is caught by its actor and restarted by its gateway, which the trace and the
///   ledger show: one line on stderr says so (none with `--quiet`), instead of a backtrace in the middle of the trace.
/// - Everything else is a bug of lessrt: the default hook prints it whole.
fn install_panic_hook(quiet: bool) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if let Some(agent) = less_runtime::run::agent_in_turn() {
            if !quiet {
                eprintln!("lessrt: agent {agent} panicked (its gateway restarts it): {message}");
            }
            return;
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    let matches = command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    install_panic_hook(cli.quiet);
    // Telemetry (less.engram.put, less.deref.request, less.deref.grant, less.budget.reject, …) goes to stderr when
    // LESSRT_LOG asks for it, e.g. LESSRT_LOG=info or LESSRT_LOG=less.budget.reject=info; quiet otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_env("LESSRT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true)
        .with_filter(filter);
    let (telemetry, export) = match telemetry::endpoint(cli.otlp.as_deref()) {
        Some(endpoint) => match telemetry::Telemetry::start(&endpoint) {
            Ok((telemetry, layer)) => (Some(telemetry), Some(layer)),
            Err(err) => {
                eprintln!("lessrt: {err:#}");
                return ExitCode::from(2);
            }
        },
        None => (None, None),
    };
    tracing_subscriber::registry().with(log).with(export).init();
    let ctx = Ctx { quiet: cli.quiet };
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(&args, ctx),
        Command::Bench(args) => cmd::bench::run(&args, ctx),
        Command::Runs(command) => cmd::runs::run(&command, ctx),
        Command::Recording(command) => cmd::recording::run(&command),
        Command::Grade(args) => cmd::grade::run(&args),
        Command::Validate(args) => cmd::validate::run(&args),
        Command::Tokens(args) => cmd::tokens::run(&args),
        Command::Pointer(command) => cmd::pointer::run(&command),
        Command::Compact(args) => cmd::compact::run(&args, ctx),
        Command::Eval(command) => cmd::eval::run(&command, ctx),
        Command::Memory(command) => cmd::memory::run(&command, ctx),
        Command::Ask(args) => cmd::ask::run(&args, ctx),
        Command::Index(args) => cmd::index::index(&args, ctx),
        Command::Search(args) => cmd::index::search(&args, ctx),
        Command::Dag(command) => cmd::dag::run(&command, ctx),
        Command::Mcp(args) => cmd::mcp::run(&args),
        Command::Serve(args) => cmd::serve::run(&args),
        Command::Node(args) => cmd::node::run(&args),
        Command::Load(args) => cmd::load::run(&args, ctx),
        Command::Doctor(args) => cmd::doctor::run(&args),
        Command::Schema(args) => cmd::schema::run(&args),
        Command::Skill(command) => cmd::skill::run(&command),
        Command::Errors(args) => cmd::errors::run(&args),
        Command::Completions(args) => cmd::completions::run(&args),
    };
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    match result {
        Ok(code) => code,
        Err(err) => match err.downcast_ref::<Stop>() {
            Some(stop) => {
                eprintln!("lessrt: {stop}");
                ExitCode::from(stop.code)
            }
            None => {
                eprintln!("lessrt: {}", with_code(&err));
                ExitCode::from(2)
            }
        },
    }
}

/// An error as printed: it starts with its stable code. A message that names a code already keeps it; otherwise
/// the code comes from the first cause that has one (a memory or runtime error, a violation), an I/O failure is
/// unreadable input or an unwritable output by what the command was doing, and anything else is `LESS_RUN_FAILED`.
fn with_code(err: &anyhow::Error) -> String {
    use less_runtime::ErrorCode;
    let text = format!("{err:#}");
    if text.starts_with("LESS_") || text.starts_with("LLM_") {
        return text;
    }
    let found = err.chain().find_map(|cause| {
        if let Some(e) = cause.downcast_ref::<less_runtime::memory::MemoryError>() {
            Some(e.code())
        } else if let Some(v) = cause.downcast_ref::<less_runtime::Violations>() {
            v.code()
        } else if let Some(e) = cause.downcast_ref::<less_runtime::Error>() {
            Some(e.code())
        } else if cause.is::<std::io::Error>() {
            let writing = ["cannot write", "cannot create", "cannot clear"].iter().any(|w| text.starts_with(w));
            Some(if writing { ErrorCode::OutputUnwritable } else { ErrorCode::InputUnreadable })
        } else {
            None
        }
    });
    format!("{}: {text}", found.unwrap_or(ErrorCode::RunFailed))
}

#[cfg(test)]
mod tests {
    /// clap's own checks of the definition (unique names, valid defaults, conflicts that exist), for every command.
    #[test]
    fn the_command_line_is_consistent() {
        crate::command().debug_assert();
    }
}
