//! `lessrt serve [DIR]`: the LESS page of a run — the hierarchy with budget meters, the Shared Brief each agent
//! received, the engram feed, pointer click-through, the timeline, the memory DAG, LESS against verbatim — and its
//! JSON API, on a loopback address by default. `lessrt run … --serve ADDR` starts the same server on the run's
//! directory before the first step, so the page follows the run live (server-sent events tailing `ledger.jsonl`).
//!
//! The server only reads: run directories, the store's archive, the workspace through the run's resolver. What it
//! shows of them, and what it redacts, are rules of the runtime ([`less_runtime::view`]): this module keeps the
//! routing, the HTTP errors and the assets.

pub(crate) mod api;

// The rules of what the page shows live in the runtime; this module wires them to HTTP.
pub(crate) use less_runtime::view;
pub(crate) use less_runtime::view::{manifest, run_dir as dirs};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use self::api::Served;
use self::manifest::Manifest;
use super::args::Stop;

/// Arguments of `lessrt serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to serve: a mode's directory (`runs/uc1-refactor/less`), a scenario's (its modes side by side) or an
    /// output directory of scenarios (`runs`, the default).
    dir: Option<PathBuf>,
    /// The store whose memory DAG the page shows (default: each run's own `memory/`).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// The scenario a run without `manifest.json` ran (written by an older lessrt or by `lessrt bench`): its
    /// workspace is where pointers resolve, its hierarchy what the page draws.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Where to listen; port 0 picks a free one (the address is said on stderr).
    #[command(flatten)]
    listen: ListenArgs,
}

/// Where the server listens, shared by `lessrt serve` and `lessrt run --serve`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ListenArgs {
    /// The address to listen on (loopback by default; port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub(crate) addr: SocketAddr,
    /// Listen on an address other than loopback. Anyone who reaches it reads the run: its sources, engrams and
    /// ledger (secrets stay redacted).
    #[arg(long)]
    pub(crate) allow_remote: bool,
}

/// Refuses a non-loopback address unless it was asked for explicitly.
pub(crate) fn check_addr(addr: SocketAddr, allow_remote: bool, flag: &str) -> anyhow::Result<()> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    if !allow_remote {
        return Err(Stop::usage(format!(
            "LESS_ARGUMENT_INVALID: {flag} {addr} is not a loopback address: the page shows the run's sources and \
             engrams to anyone who reaches it. Use 127.0.0.1 or ::1, or add --allow-remote to mean it"
        ))
        .into());
    }
    eprintln!("lessrt: warning: serving on {addr}, not loopback: anyone who reaches it reads this run");
    Ok(())
}

/// `lessrt serve`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    check_addr(args.listen.addr, args.listen.allow_remote, "--addr")?;
    let root = args.dir.clone().unwrap_or_else(|| PathBuf::from("runs"));
    if !root.is_dir() {
        return Err(Stop::usage(format!(
            "LESS_INPUT_UNREADABLE: {} is not a directory of runs: `lessrt run SCENARIO --out DIR` writes \
             DIR/<scenario>/<mode>/; serve DIR, DIR/<scenario> or one mode's directory",
            root.display()
        ))
        .into());
    }
    if let Some(store) = &args.store
        && !store.join(less_runtime::MEMORY_DB).is_file()
    {
        return Err(Stop::usage(format!(
            "LESS_INPUT_UNREADABLE: no store in {}: pass the directory holding memory.sqlite3",
            store.display()
        ))
        .into());
    }
    let scenario = match &args.scenario {
        Some(file) => Some(scenario_manifest(file)?),
        None => None,
    };
    if dirs::discover(&root).is_empty() {
        eprintln!("lessrt: {} holds no run yet; the page shows runs as they appear", root.display());
    }
    let served = Served {
        root,
        store: args.store.clone(),
        scenario,
        poll: POLL,
        any_host: args.listen.allow_remote,
        events: Default::default(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("no async runtime")?;
    runtime.block_on(async {
        let (addr, server) = start(served, args.listen.addr).await?;
        eprintln!("lessrt serve: http://{addr}/ (Ctrl-C stops)");
        tokio::select! {
            done = server => done.context("the server stopped")??,
            _ = tokio::signal::ctrl_c() => {}
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// How often the live stream looks at a ledger.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The manifest of a scenario file given with `--scenario`.
fn scenario_manifest(file: &Path) -> anyhow::Result<Manifest> {
    let scenario = less_runtime::Scenario::load(file).map_err(|violations| {
        let first = violations.0.first().map(|v| format!("{}: {} {}", v.code, v.path, v.message)).unwrap_or_default();
        Stop::usage(format!("{first} ({})", file.display()))
    })?;
    Ok(Manifest::of(&scenario, Some(file), less_runtime::WireMode::Less))
}

/// Binds `addr` and serves on the current runtime; gives the bound address and the server's task.
pub(crate) async fn start(
    served: Served,
    addr: SocketAddr,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().context("the listener's address")?;
    let router = api::router(Arc::new(served), api::Access::new(bound.port())?);
    let server = tokio::spawn(async move { axum::serve(listener, router).await.context("HTTP server") });
    Ok((bound, server))
}

/// What `lessrt run --serve` serves: the scenario's output directory (its modes appear as they start).
pub(crate) fn for_run(dir: PathBuf, any_host: bool) -> Served {
    Served { root: dir, store: None, scenario: None, poll: POLL, any_host, events: Default::default() }
}
