//! `lessrt load`: the runtime under load, measured. Three parts, each on real parts (actors, SQLite, tantivy):
//!
//! - `gateways`: N agents (a lead's managers and their workers) each send M typed messages to their parent at the
//!   same time, through the parent's gateway (validation, token count, budget rules, ledger, archive, forwarding).
//!   Nothing may be lost: the deliveries the senders were told about, the `delivered` lines of `ledger.jsonl`, the
//!   raw messages in the run's archive and N × M must agree.
//! - `memory`: C clients on one memory actor, half putting engrams, half querying, at the same time. Every
//!   acknowledged put must be in the store afterwards.
//! - `ingest`: a transcript of K messages archived in batches while another handle on the same store answers
//!   questions; every message must be archived, and queries must keep answering while it runs.
//!
//! - `cluster` (not in the default set: it starts a `lessrt node` process on loopback): the `gateways` part twice,
//!   with the gateways in this process and with every agent (so every gateway) on the node, so the same deliveries
//!   are measured through a local and a remote gateway. Nothing may be lost there either.
//!
//! Each part reports its latencies (p50, p99, max), throughput, and the process's resident memory before and after
//! and at its peak, so a reader can see whether memory stays bounded.

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use less_agents::ScriptedFactory;
use less_runtime::dag::{Archive, Dag, NewMessage};
use less_runtime::memory::{
    Memory, MemoryActor, MemoryArgs, MemoryMsg, Principal, PutRequest, QueryOptions, QueryRequest,
};
use less_runtime::run::{Draft, Envelope, EnvelopeKind, LocalRun, RunOptions, sam_keys};
use less_runtime::{Engram, Scenario, Valid, WireMode};
use ractor::Actor;
use serde_json::{Value, json};

use super::args::{InboxArgs, OutputArgs, Stop};
use crate::Ctx;

/// Arguments of `lessrt load`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Parts to run, comma-separated: gateways, memory, ingest, cluster (gateways on a `lessrt node` process).
    #[arg(long, value_delimiter = ',', default_value = "gateways,memory,ingest")]
    parts: Vec<Part>,
    /// Agents sending at once (gateways).
    #[arg(long, default_value_t = 64)]
    agents: usize,
    /// Messages each agent sends (gateways).
    #[arg(long, default_value_t = 1000)]
    messages: usize,
    /// Concurrent clients of one memory actor, half writers and half readers (memory).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Operations per memory client (memory).
    #[arg(long, default_value_t = 500)]
    ops: usize,
    /// Messages archived while queries run (ingest).
    #[arg(long, default_value_t = 100_000)]
    ingest: usize,
    /// What each recipient keeps inline (gateways); the rest is spilled to `sam:msg:` pointers.
    #[command(flatten)]
    inbox: InboxArgs,
    /// The cluster part over TLS: the node and this process both use this certificate (one that names 127.0.0.1,
    /// from `scripts/cluster-ca.sh`).
    #[command(flatten)]
    tls: super::args::TlsArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// A part of the load test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Gateways,
    Memory,
    Ingest,
    Cluster,
}

/// Latencies in microseconds: p50, p99, max, and how many.
fn latency(mut samples: Vec<Duration>) -> Value {
    samples.sort_unstable();
    let at = |q: f64| {
        if samples.is_empty() {
            0
        } else {
            let idx = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[idx].as_micros() as u64
        }
    };
    json!({"n": samples.len(), "p50_us": at(0.50), "p99_us": at(0.99), "max_us": at(1.0)})
}

/// Resident and peak resident memory of this process, in MiB (Linux; zero elsewhere).
fn rss_mib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn memory_json(before: (u64, u64), after: (u64, u64)) -> Value {
    json!({"rss_before_mib": before.0, "rss_after_mib": after.0, "peak_rss_mib": after.1})
}

pub(crate) fn run(args: &Args, ctx: Ctx) -> anyhow::Result<ExitCode> {
    if args.agents == 0 || args.messages == 0 || args.clients < 2 || args.ops == 0 || args.ingest == 0 {
        return Err(Stop::usage(
            "LESS_ARGUMENT_INVALID: --agents, --messages, --ops and --ingest must be at least 1, --clients at least 2",
        )
        .into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("no async runtime")?;
    let scratch =
        tempfile::Builder::new().prefix("lessrt-load-").tempdir().context("cannot make a scratch directory")?;
    let mut parts = serde_json::Map::new();
    let mut lost = 0u64;
    for part in &args.parts {
        let before = rss_mib();
        let (name, mut doc) = match part {
            Part::Gateways => ("gateways", runtime.block_on(gateways(args, &scratch.path().join("run"), None))?),
            Part::Memory => {
                ("memory", runtime.block_on(memory(args, &scratch.path().join(less_runtime::RUN_STORE_DIR)))?)
            }
            Part::Ingest => ("ingest", ingest(args, &scratch.path().join("archive"))?),
            Part::Cluster => ("cluster", runtime.block_on(cluster(args, scratch.path()))?),
        };
        lost += doc["lost"].as_u64().unwrap_or(0);
        doc["memory"] = memory_json(before, rss_mib());
        if !ctx.quiet && !args.output.json() {
            outln!("{name}: {}", serde_json::to_string(&doc)?);
        }
        parts.insert(name.to_owned(), doc);
    }
    let doc =
        json!({"parts": parts, "lost": lost, "cores": std::thread::available_parallelism().map_or(1, usize::from)});
    args.output.emit(&doc, || outln!("{lost} lost"))?;
    Ok(if lost == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The scenario: a lead, `managers` below it, the other senders spread over the managers.
fn hierarchy(senders: usize) -> (String, Vec<(String, String)>) {
    let managers = ((senders as f64).sqrt() as usize).max(1).min(senders);
    let mut toml = String::from("name = \"load\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n");
    let mut edges = Vec::new();
    for m in 0..managers {
        toml.push_str(&format!("[[agents]]\nid = \"m{m}\"\nrole = \"manager\"\nparent = \"lead\"\n"));
        edges.push((format!("m{m}"), "lead".to_owned()));
    }
    for w in 0..senders - managers {
        let parent = format!("m{}", w % managers);
        toml.push_str(&format!("[[agents]]\nid = \"w{w}\"\nrole = \"worker\"\nparent = \"{parent}\"\n"));
        edges.push((format!("w{w}"), parent));
    }
    (toml, edges)
}

/// A compliant task_result with one engram, unique per sender and sequence number.
fn message(from: &str, to: &str, seq: usize) -> Envelope {
    let doc = json!({
        "type": "task_result", "from": from, "msg_id": format!("{from}-{seq}"), "to": to, "task": "load",
        "status": "partial", "criteria": [1],
        "engrams": [{
            "id": format!("eg_{from}_{seq}"), "kind": "fact",
            "claim": format!("Checked partition {seq} of {from}: totals match the ledger."),
            "pointers": [{"type": "repo", "ref": "src/orders/service.rs", "span": "L134-L170"}],
            "confidence": 0.8, "ttl": "P7D", "scope": "run",
            "provenance": {"created_at": "2026-01-08T10:00:00Z", "created_by": from, "source": "agent"}
        }]
    });
    Envelope {
        from: from.to_owned(),
        to: to.to_owned(),
        msg_id: format!("{from}-{seq}"),
        kind: EnvelopeKind::Message,
        wire: doc.to_string(),
        doc: Draft::Raw(doc),
        inline_code: None,
        code_sources: Vec::new(),
        prose: None,
        restated: Vec::new(),
    }
}

/// The gateways part with every agent on a `lessrt node` child process (this executable), and again in this
/// process: the same deliveries through remote and local gateways.
async fn cluster(args: &Args, dir: &Path) -> anyhow::Result<Value> {
    let local = gateways(args, &dir.join("local"), None).await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    let secret = less_runtime::run::fresh_secret().map_err(|v| anyhow::anyhow!("no random cookie: {}", v.message))?;
    let cookie: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let tls = args.tls.load()?;
    let mut node = std::process::Command::new(std::env::current_exe()?)
        .args(["node", "--listen", &addr, "--name", "n1", "--cookie-env", "LESSRT_LOAD_COOKIE"])
        .args(args.tls.as_args())
        .env("LESSRT_LOAD_COOKIE", &cookie)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("cannot start a lessrt node")?;
    // The node listens once its port answers.
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_err() {
        if Instant::now() > deadline {
            let _ = node.kill();
            anyhow::bail!("the node did not listen on {addr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let remote = gateways(args, &dir.join("remote"), Some((addr, cookie, tls.clone()))).await;
    let _ = node.kill();
    let _ = node.wait();
    let remote = remote?;
    let lost = local["lost"].as_u64().unwrap_or(0) + remote["lost"].as_u64().unwrap_or(0);
    Ok(json!({"local": local, "remote": remote, "lost": lost, "tls": tls.is_some()}))
}

async fn gateways(
    args: &Args,
    out: &Path,
    node: Option<(String, String, Option<less_runtime::cluster::Tls>)>,
) -> anyhow::Result<Value> {
    let (mut toml, edges) = hierarchy(args.agents);
    let mut options =
        RunOptions { out_dir: Some(out.to_owned()), inbox_cap: args.inbox.cap(), ..RunOptions::new(WireMode::Less) };
    if let Some((addr, cookie, tls)) = node {
        // Every agent on the node: each delivery goes to a gateway in the other process.
        toml = toml.replace("role = ", "node = \"n1\"\nrole = ");
        toml.push_str(&format!("[cluster]\nnodes = [{{ name = \"n1\", addr = \"{addr}\" }}]\n"));
        options.cluster = Some(Arc::new(less_runtime::cluster::ClusterOptions {
            cookie,
            scenario_toml: toml.clone(),
            scenario_base: Path::new(".").to_owned(),
            every_llm: false,
            delegated: false,
            model_timeout: None,
            temperature: None,
            heartbeat_timeout: less_runtime::cluster::DEFAULT_HEARTBEAT_TIMEOUT,
            tls,
            models: Default::default(),
        }));
    }
    let scenario = Arc::new(Scenario::from_toml(&toml, Path::new(".")).map_err(|v| anyhow::anyhow!("{v}"))?);
    let run = Arc::new(LocalRun::start(scenario, Arc::new(ScriptedFactory), &options).await?);
    let started = Instant::now();
    let mut senders = tokio::task::JoinSet::new();
    for (from, to) in edges {
        let (run, n) = (run.clone(), args.messages);
        senders.spawn(async move {
            let mut samples = Vec::with_capacity(n);
            let (mut delivered, mut refused) = (0u64, 0u64);
            for seq in 0..n {
                let t = Instant::now();
                match run.deliver(message(&from, &to, seq)).await {
                    Ok(Ok(_)) => delivered += 1,
                    Ok(Err(_)) | Err(_) => refused += 1,
                }
                samples.push(t.elapsed());
            }
            (samples, delivered, refused)
        });
    }
    let (mut samples, mut delivered, mut refused) = (Vec::new(), 0u64, 0u64);
    while let Some(joined) = senders.join_next().await {
        let (s, d, r) = joined?;
        samples.extend(s);
        delivered += d;
        refused += r;
    }
    let elapsed = started.elapsed();
    let run = Arc::try_unwrap(run).map_err(|_| anyhow::anyhow!("a sender still holds the run"))?;
    run.stop().await;
    // Read line by line: the peak resident memory reported is the run's, not this count's.
    let ledger = std::fs::File::open(out.join(less_runtime::LEDGER_FILE)).context("the run's ledger")?;
    let (mut on_ledger, mut spilled) = (0u64, Vec::new());
    for line in std::io::BufReader::new(ledger).lines() {
        let line = line.context("the run's ledger")?;
        if line.contains("\"event\":\"delivered\"") {
            on_ledger += 1;
        } else if line.contains("\"event\":\"spilled\"") {
            // A spilled message left its recipient's inbox for a pointer: the pointer must read it back.
            let event: Value = serde_json::from_str(&line).context("a spilled event of the ledger")?;
            spilled.push(event["msg_id"].as_str().unwrap_or_default().to_owned());
        }
    }
    let readable = sam_keys(&out.join(less_runtime::RUN_STORE_DIR).join(less_runtime::SAM_DB), "msg")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let unreadable = spilled.iter().filter(|id| !readable.contains(id.as_str())).count();
    // Every delivered message is archived, raw, in the run's store.
    let archived =
        Archive::open(&out.join(less_runtime::RUN_STORE_DIR)).context("the run's archive")?.stats()?.messages;
    let sent = (args.agents * args.messages) as u64;
    Ok(json!({
        "agents": args.agents, "messages_per_agent": args.messages, "sent": sent, "delivered": delivered,
        "refused": refused, "on_ledger": on_ledger, "archived": archived,
        "lost": sent.saturating_sub(on_ledger.min(delivered).min(archived)) + unreadable as u64,
        "inbox_cap": args.inbox.cap(), "spilled": spilled.len(), "spilled_unreadable": unreadable,
        "seconds": elapsed.as_secs_f64(), "messages_per_s": sent as f64 / elapsed.as_secs_f64(),
        "deliver": latency(samples),
    }))
}

async fn memory(args: &Args, dir: &Path) -> anyhow::Result<Value> {
    // No rate limit: the part measures the actor, not the policy that would refuse a writer this fast.
    let mut memory_args = MemoryArgs::new(dir.to_owned(), less_runtime::memory::system_clock(), false);
    memory_args.policy.puts_per_window = u32::MAX;
    let (actor, handle) = Actor::spawn(None, MemoryActor, memory_args).await.context("the memory actor")?;
    let writers = args.clients / 2;
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..args.clients {
        let (actor, n) = (actor.clone(), args.ops);
        let writing = c < writers;
        clients.spawn(async move {
            let who = Principal::agent(&format!("client{c}"), "worker", "load", "load-run");
            let mut samples = Vec::with_capacity(n);
            let mut acknowledged = Vec::new();
            for i in 0..n {
                let t = Instant::now();
                if writing {
                    let id = format!("eg_c{c}_{i}");
                    let engram = engram(&id, &format!("client{c}"), i)?;
                    let request = PutRequest { who: who.clone(), engram, project: "load".to_owned() };
                    if ractor::call!(actor, MemoryMsg::Put, Box::new(request))?.is_ok() {
                        acknowledged.push(id);
                    }
                } else {
                    let text = format!("totals of partition {} in the ledger", i % 97);
                    let request = QueryRequest { who: who.clone(), text, options: QueryOptions::default() };
                    ractor::call!(actor, MemoryMsg::Query, Box::new(request))?.map_err(|e| anyhow::anyhow!("{e}"))?;
                }
                samples.push(t.elapsed());
            }
            Ok::<_, anyhow::Error>((writing, samples, acknowledged))
        });
    }
    let (mut puts, mut queries, mut acknowledged) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(joined) = clients.join_next().await {
        let (writing, samples, acked) = joined??;
        if writing {
            puts.extend(samples)
        } else {
            queries.extend(samples)
        }
        acknowledged.extend(acked);
    }
    let elapsed = started.elapsed();
    actor.stop(None);
    handle.await.context("the memory actor stopped")?;
    // Every acknowledged put, read back from the store after the actor closed it.
    let store = Memory::open_without_model(dir)?;
    let mut missing = 0u64;
    for id in &acknowledged {
        if store.get("load", id)?.is_none() {
            missing += 1;
        }
    }
    Ok(json!({
        "clients": args.clients, "writers": writers, "readers": args.clients - writers, "ops_per_client": args.ops,
        "acknowledged_puts": acknowledged.len(), "lost": missing, "seconds": elapsed.as_secs_f64(),
        "put": latency(puts), "query": latency(queries),
    }))
}

fn engram(id: &str, by: &str, i: usize) -> anyhow::Result<Valid<Engram>> {
    let doc = json!({
        "id": id, "kind": "fact",
        "claim": format!("Partition {} totals match the ledger after the nightly run (check {i} by {by}).", i % 97),
        "pointers": [{"type": "repo", "ref": "src/orders/service.rs", "span": format!("L{}-L{}", i % 500 + 1, i % 500 + 9)}],
        "confidence": 0.8, "ttl": "P7D", "scope": "project",
        "provenance": {"created_at": "2026-01-08T10:00:00Z", "created_by": by, "source": "agent"}
    });
    Valid::<Engram>::from_value(&doc).map_err(|v| anyhow::anyhow!("{v}"))
}

fn ingest(args: &Args, dir: &Path) -> anyhow::Result<Value> {
    const BATCH: usize = 1000;
    const PROJECT: &str = "load";
    std::fs::create_dir_all(dir)?;
    let open = || -> anyhow::Result<Dag> {
        let index = Memory::open_without_model(&less_runtime::dag::index_dir(dir))?;
        Ok(Dag::open_with(
            dir,
            less_runtime::dag::Condenser::new(
                less_runtime::dag::DagConfig::default(),
                Arc::new(less_runtime::dag::Extractive),
            ),
            index,
        )?)
    };
    let mut writer = open()?;
    // A first batch, so the reader has something to find from its first question.
    let message = |i: usize| NewMessage {
        role: if i.is_multiple_of(2) { "user" } else { "assistant" }.to_owned(),
        content: format!("Message {i}: partition {} totals were reconciled against invoice batch {}.", i % 97, i / 10),
        name: None,
        at: None,
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let first: Vec<NewMessage> = (0..BATCH.min(args.ingest)).map(message).collect();
    let mut archived = writer.ingest(PROJECT, "s0", &first, now)?.len();
    writer.flush()?;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        let mut dag = open()?;
        std::thread::spawn(move || -> anyhow::Result<(Vec<Duration>, u64)> {
            let (mut samples, mut answered) = (Vec::new(), 0u64);
            let mut i = 0usize;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                let answer = dag.expand_query(&format!("partition {} totals", i % 97), 400, Some(PROJECT))?;
                samples.push(t.elapsed());
                answered += u64::from(!answer.citations.is_empty());
                i += 1;
            }
            Ok((samples, answered))
        })
    };
    let started = Instant::now();
    let mut batch_samples = Vec::new();
    let mut next = first.len();
    while next < args.ingest {
        let end = (next + BATCH).min(args.ingest);
        let batch: Vec<NewMessage> = (next..end).map(message).collect();
        let t = Instant::now();
        archived += writer.ingest(PROJECT, &format!("s{}", next / (BATCH * 10)), &batch, now)?.len();
        writer.flush()?;
        batch_samples.push(t.elapsed());
        next = end;
    }
    let elapsed = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (queries, answered) = reader.join().map_err(|_| anyhow::anyhow!("the query thread panicked"))??;
    let stored = writer.archive().stats()?.messages;
    Ok(json!({
        "messages": args.ingest, "archived": archived, "stored": stored,
        "lost": (args.ingest as u64).saturating_sub(stored), "seconds": elapsed.as_secs_f64(),
        "messages_per_s": (args.ingest - first.len()) as f64 / elapsed.as_secs_f64().max(1e-9),
        "batch_of_1000": latency(batch_samples), "queries_answered": answered, "query": latency(queries),
    }))
}
