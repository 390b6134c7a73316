//! `lessrt node --listen ADDR --name NAME [--cookie-env VAR] [--tls-cert F --tls-key F --tls-ca F]`: a worker node of
//! cluster runs. It hosts the agents a run places on it (each with its gateway) until it is stopped (Ctrl-C or a
//! signal); the head (`lessrt run` of a scenario with `[cluster]`, or `--cluster FILE`) connects to it with the same
//! cookie, and with TLS from the same CA when the node serves TLS.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use less_agents::{AgentsFactory, ModelSource};
use less_runtime::cluster::{FactoryMaker, cookie_from_env, start_node};
use less_runtime::run::AgentFactory;

use super::args::Stop;

/// Arguments of `lessrt node`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The address to listen on for the head and the other nodes (loopback unless --allow-remote).
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// This node's name: what scenarios place agents on (`node = "NAME"`).
    #[arg(long, value_name = "NAME", value_parser = parse_name)]
    name: String,
    /// The environment variable holding the cluster's cookie (the same on the head and every node; at least 16
    /// characters).
    #[arg(long, value_name = "VAR", default_value = "LESSRT_COOKIE")]
    cookie_env: String,
    /// Listen on an address other than loopback (only with TLS: the run's grant key crosses the link).
    #[arg(long)]
    allow_remote: bool,
    #[command(flatten)]
    tls: super::args::TlsArgs,
}

fn parse_name(text: &str) -> Result<String, String> {
    let ok = text.len() <= 40
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && text != less_runtime::HEAD_NODE;
    if ok { Ok(text.to_owned()) } else { Err("a node name is [a-z][a-z0-9_-]{0,39}, and not `head`".to_owned()) }
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let tls = args.tls.load()?;
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        return Err(Stop::usage(format!(
            "LESS_ARGUMENT_INVALID: --listen {} is not a loopback address: a node runs the agents of whoever holds the \
             cookie. Use 127.0.0.1 or ::1, or add --allow-remote (with TLS) to mean it",
            args.listen
        ))
        .into());
    }
    if !args.listen.ip().is_loopback() && tls.is_none() {
        return Err(Stop::usage(format!(
            "LESS_ARGUMENT_INVALID: --listen {} with --allow-remote needs TLS: the run's grant key crosses the link. \
             Add --tls-cert FILE --tls-key FILE --tls-ca FILE (docs/cluster.md makes a private CA with openssl)",
            args.listen
        ))
        .into());
    }
    let cookie = cookie_from_env(&args.cookie_env).map_err(|e| Stop::usage(format!("LESS_ARGUMENT_INVALID: {e}")))?;
    // Scripted agents, and `llm` agents asking their models live, or recording into or replaying from the directory
    // the head's `--record`/`--replay` names (on this machine, or shared with it).
    let factory: FactoryMaker = Arc::new(|scenario, models| {
        let source = ModelSource::from_dirs(models.record.as_deref(), models.replay.as_deref());
        AgentsFactory::for_scenario(scenario, &source)
            .map(|f| Arc::new(f) as Arc<dyn AgentFactory>)
            .map_err(|err| format!("{}: {err}", err.code()))
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let node =
            start_node(&args.name, args.listen, cookie, factory, tls.as_ref()).await.map_err(|e| anyhow::anyhow!(e))?;
        let over = if tls.is_some() { " (TLS)" } else { "" };
        eprintln!("lessrt node {}: listening on {}{over}", node.name, node.addr);
        tokio::signal::ctrl_c().await?;
        eprintln!("lessrt node {}: stopping", node.name);
        node.stop();
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
