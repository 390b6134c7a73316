//! The `lessrt` command line: argument parsing and wiring only; the work is done by `less-runtime`.
//!
//! Exit codes: 0 success, 1 a document broke the contract, 2 bad usage or input that cannot be read or parsed.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// lessrt: a runtime for hierarchies of cooperating AI agents that exchange budgeted engrams, not pasted context.
#[derive(Debug, Parser)]
#[command(name = "lessrt", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a PAS scenario through the actor tree, in LESS and verbatim modes, and report tokens per role and the checks.
    Run(cmd::run::Args),
    /// Benchmark scenarios in LESS and the baselines: graded tasks, tokens per role, bench.json/csv, summary.md, plots.
    Bench(cmd::bench::Args),
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
    /// Check what this machine has for lessrt (embedding model, ONNX Runtime) and say how to fix what is missing.
    Doctor(cmd::doctor::Args),
    /// Print a published JSON Schema, or list them.
    Schema(cmd::schema::Args),
    /// List the stable error codes with what to send instead.
    Errors(cmd::errors::Args),
}

/// `lessrt dag show | head` closes the pipe early: the shell user wants the head, not a panic about printing. Rust
/// ignores SIGPIPE, so a `println!` into a closed pipe panics; this hook ends such a process quietly (status 141,
/// what a process killed by SIGPIPE reports) and leaves every other panic to the default hook.
fn exit_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    exit_quietly_on_broken_pipe();
    let cli = Cli::parse();
    // Telemetry (less.engram.put, less.deref.request, less.deref.grant, less.budget.reject, …) goes to stderr when
    // LESSRT_LOG asks for it, e.g. LESSRT_LOG=info or LESSRT_LOG=less.budget.reject=info; quiet otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_env("LESSRT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(true).init();
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(&args),
        Command::Bench(args) => cmd::bench::run(&args),
        Command::Validate(args) => cmd::validate::run(&args),
        Command::Tokens(args) => cmd::tokens::run(&args),
        Command::Pointer(command) => cmd::pointer::run(&command),
        Command::Compact(args) => cmd::compact::run(&args),
        Command::Eval(command) => cmd::eval::run(&command),
        Command::Memory(command) => cmd::memory::run(&command),
        Command::Dag(command) => cmd::dag::run(&command),
        Command::Doctor(args) => cmd::doctor::run(&args),
        Command::Schema(args) => cmd::schema::run(&args),
        Command::Errors(args) => cmd::errors::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lessrt: {err:#}");
            ExitCode::from(2)
        }
    }
}
