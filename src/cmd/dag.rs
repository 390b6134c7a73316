//! `lessrt dag build|show|expand|query|impact|backfill|log` and `lessrt memory ingest`: the lossless memory (raw
//! messages and the session → arc → epoch summary DAG) from the command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use less_agents::ModelSource;
use less_runtime::Pointer;
use less_runtime::dag::{
    Answer, ArchiveStats, BuildReport, Builder, Child, Dag, DagConfig, DagError, Expansion, Impact, Node, day,
    index_dir, parse_transcript,
};
use less_runtime::memory::Memory;

use super::summarizer::SummarizerChoice;
use serde_json::json;

/// Sub-commands of `lessrt dag`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Summarize ended sessions (through the significance gate), then form arcs and epochs.
    Build {
        /// Session nodes per arc.
        #[arg(long, default_value_t = 8)]
        arc_every: usize,
        /// Arcs per epoch.
        #[arg(long, default_value_t = 4)]
        epoch_every: usize,
        /// Summarize every session, however trivial.
        #[arg(long)]
        no_gate: bool,
        #[command(flatten)]
        summarizer: SummarizerArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Print the DAG as a tree (top nodes down to sessions), or one node with its summary and children.
    Show {
        /// A node id (`S-…`, `A-…`, `E-…`).
        id: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// One level below a node: an arc's or epoch's children, a session's raw messages; a message id prints it.
    Expand {
        /// A node id or a message id (`m-…` or `sam:msg:m-…`).
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Answer a question from the archived messages, within a token budget, citing messages and nodes.
    Query {
        /// The question.
        question: String,
        /// Most tokens in the answer.
        #[arg(long, default_value_t = 400)]
        max_tokens: u32,
        /// Only this project's messages.
        #[arg(long)]
        project: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// What depends on a source: engrams and summaries, by layer (1 will break, 2 likely affected, 3 may need
    /// testing).
    Impact {
        /// The source, as a pointer (`repo:src/lib.rs#L10-L20`, `sam:msg:m-…`, `sam:engram:<id>`).
        pointer: String,
        /// Leave out engrams and summaries below this confidence.
        #[arg(long, default_value_t = 0.5)]
        min_confidence: f64,
        #[command(flatten)]
        common: Common,
    },
    /// Summarize sessions the significance gate skipped (all, or one session).
    Backfill {
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        summarizer: SummarizerArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Print the event log (skips, summaries, escalations, backfills, failures).
    Log {
        /// Only events of this kind (`session_skipped`, `escalated`, …).
        #[arg(long)]
        kind: Option<String>,
        #[command(flatten)]
        common: Common,
    },
}

/// Options every dag command takes.
#[derive(Debug, clap::Args)]
pub(crate) struct Common {
    /// The store directory.
    #[arg(long, default_value = ".lessrt")]
    store: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The summarizer options of `dag build` and `dag backfill`.
#[derive(Debug, clap::Args)]
pub(crate) struct SummarizerArgs {
    #[command(flatten)]
    choice: SummarizerChoice,
    /// With `--summarizer llm`: write every model exchange to DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// With `--summarizer llm`: answer from a recording made with --record, without a server.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
}

/// `lessrt memory ingest`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct IngestArgs {
    /// A JSON array or JSONL of `{role, content, name?, at?}` (`-` reads standard input).
    file: PathBuf,
    /// The session the messages belong to.
    #[arg(long)]
    session: String,
    /// The project.
    #[arg(long, default_value = "")]
    project: String,
    /// Keep the session open (more messages will come); by default it ends and `dag build` may summarize it.
    #[arg(long)]
    open: bool,
    #[command(flatten)]
    common: Common,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn open(store: &Path, config: DagConfig) -> anyhow::Result<Dag> {
    Dag::open(store, config).with_context(|| format!("cannot open the archive in {}", store.display()))
}

/// Opens the archive with the summarizer `args` name; `None` (after saying why) on a usage error.
fn open_summarizing(store: &Path, config: DagConfig, args: &SummarizerArgs) -> anyhow::Result<Option<Dag>> {
    if (args.record.is_some() || args.replay.is_some()) && !args.choice.is_llm() {
        eprintln!("lessrt: --record and --replay need `--summarizer llm`");
        return Ok(None);
    }
    let Some(summarizer) =
        args.choice.summarizer(&ModelSource::from_dirs(args.record.as_deref(), args.replay.as_deref()))?
    else {
        return Ok(None);
    };
    let builder = Builder::new(config, summarizer);
    let index = Memory::open(&index_dir(store))
        .with_context(|| format!("cannot open the message index in {}", store.display()))?;
    let dag = Dag::open_with(store, builder, index)
        .with_context(|| format!("cannot open the archive in {}", store.display()))?;
    Ok(Some(dag))
}

/// `lessrt memory ingest`.
pub(crate) fn ingest(args: &IngestArgs) -> anyhow::Result<ExitCode> {
    let text = super::read_input(&args.file)?;
    let messages = match parse_transcript(&text) {
        Ok(messages) => messages,
        Err(v) => {
            eprintln!("lessrt: {}: {} {}: {}", v.code, args.file.display(), v.path, v.message);
            eprintln!("lessrt: instead: {}", v.code.instruction());
            if args.common.json {
                println!("{}", json!({"error": {"code": v.code, "path": v.path, "message": v.message}}));
            }
            return Ok(ExitCode::from(2));
        }
    };
    let mut dag = open(&args.common.store, DagConfig::default())?;
    let stored = dag.ingest(&args.project, &args.session, &messages, now())?;
    if !args.open {
        dag.end_session(&args.project, &args.session)?;
    }
    dag.flush()?;
    let duplicates = messages.len() - stored.len();
    if args.common.json {
        let ids: Vec<&str> = stored.iter().map(|m| m.id.as_str()).collect();
        println!(
            "{}",
            json!({"session": args.session, "project": args.project, "stored": stored.len(),
                   "duplicates": duplicates, "ended": !args.open, "ids": ids})
        );
    } else {
        println!(
            "archived {} messages in session {} ({duplicates} already archived); `lessrt dag build` summarizes it",
            stored.len(),
            args.session
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Build { arc_every, epoch_every, no_gate, summarizer, common } => {
            if *arc_every == 0 || *epoch_every == 0 {
                eprintln!("lessrt: --arc-every and --epoch-every must be at least 1");
                return Ok(ExitCode::from(2));
            }
            let mut config = DagConfig { arc_every: *arc_every, epoch_every: *epoch_every, ..DagConfig::default() };
            config.gate.enabled = !no_gate;
            let Some(mut dag) = open_summarizing(&common.store, config, summarizer)? else {
                return Ok(ExitCode::from(2));
            };
            let report = dag.build(now())?;
            print_build(&report, &dag.archive().stats()?, common.json);
            Ok(ExitCode::SUCCESS)
        }
        Command::Backfill { session, summarizer, common } => {
            let Some(mut dag) = open_summarizing(&common.store, DagConfig::default(), summarizer)? else {
                return Ok(ExitCode::from(2));
            };
            let report = dag.backfill(session.as_deref(), now())?;
            print_build(&report, &dag.archive().stats()?, common.json);
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { id, common } => {
            let dag = open(&common.store, DagConfig::default())?;
            show(&dag, id.as_deref(), common.json)
        }
        Command::Expand { id, common } => {
            let dag = open(&common.store, DagConfig::default())?;
            match dag.expand(id) {
                Ok(expansion) => {
                    if common.json {
                        println!("{}", serde_json::to_string(&expansion)?);
                    } else {
                        print_expansion(&expansion);
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(err @ DagError::NotFound(_)) => {
                    eprintln!("lessrt: {err}");
                    Ok(ExitCode::from(1))
                }
                Err(err) => Err(err.into()),
            }
        }
        Command::Query { question, max_tokens, project, common } => {
            let mut dag = open(&common.store, DagConfig::default())?;
            let answer = dag.expand_query(question, *max_tokens, project.as_deref())?;
            if common.json {
                println!("{}", serde_json::to_string(&answer)?);
            } else {
                print_answer(&answer);
            }
            Ok(if answer.citations.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Impact { pointer, min_confidence, common } => {
            let pointer = match Pointer::parse(pointer) {
                Ok(p) => p,
                Err(v) => {
                    eprintln!("lessrt: {}: {}", v.code, v.message);
                    return Ok(ExitCode::from(2));
                }
            };
            let dag = open(&common.store, DagConfig::default())?;
            let impact = dag.impact(&pointer, *min_confidence)?;
            if common.json {
                println!("{}", serde_json::to_string(&impact)?);
            } else {
                print_impact(&impact);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Log { kind, common } => {
            let dag = open(&common.store, DagConfig::default())?;
            for event in dag.archive().events(kind.as_deref())? {
                if common.json {
                    println!("{}", serde_json::to_string(&event)?);
                } else {
                    println!("{}\t{}\t{}", event.at, event.kind, event.detail);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_build(report: &BuildReport, stats: &ArchiveStats, json_out: bool) {
    if json_out {
        println!("{}", json!({"built": report, "archive": stats}));
    } else {
        println!(
            "built {} session summaries ({} skipped by the gate, {} backfilled), {} arcs, {} epochs; {} escalated",
            report.sessions, report.skipped, report.backfilled, report.arcs, report.epochs, report.escalated
        );
        println!("archive: {}", stats_line(stats));
    }
    if report.truncated > 0 {
        eprintln!(
            "lessrt: {} summaries fell back to deterministic truncation (confidence 0.3): the summarizer failed or \
             overran at both levels; `lessrt dag log --kind escalated` shows each attempt's error",
            report.truncated
        );
    }
}

fn stats_line(stats: &ArchiveStats) -> String {
    format!(
        "{} messages in {} sessions; {} session nodes, {} arcs, {} epochs; {} parts skipped, {} messages pending",
        stats.messages,
        stats.sessions,
        stats.session_nodes,
        stats.arcs,
        stats.epochs,
        stats.skipped,
        stats.pending_messages
    )
}

fn node_line(node: &Node) -> String {
    let span = if node.earliest_at == node.latest_at {
        day(node.earliest_at)
    } else {
        format!("{}..{}", day(node.earliest_at), day(node.latest_at))
    };
    let session = node.session.as_deref().map(|s| format!(" {s}")).unwrap_or_default();
    format!(
        "{} {}{session} {span} · {} tok from {} · level {} ({})",
        node.id,
        node.kind.as_str(),
        node.token_count,
        node.input_tokens,
        node.level,
        node.confidence
    )
}

fn show(dag: &Dag, id: Option<&str>, json_out: bool) -> anyhow::Result<ExitCode> {
    let archive = dag.archive();
    let Some(id) = id else {
        let tops = archive.tops(None)?;
        if json_out {
            println!("{}", json!({"archive": archive.stats()?, "nodes": archive.all_nodes()?}));
            return Ok(ExitCode::SUCCESS);
        }
        println!("{}", stats_line(&archive.stats()?));
        let mut project = None;
        for top in &tops {
            if project != Some(&top.project) {
                println!("project {:?}", top.project);
                project = Some(&top.project);
            }
            tree(dag, top, 1)?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let Some(node) = archive.node(id)? else {
        eprintln!("lessrt: no node {id}; `lessrt dag show` lists the top nodes");
        return Ok(ExitCode::from(1));
    };
    if json_out {
        println!("{}", serde_json::to_string(&dag.expand(id)?)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", node_line(&node));
    if let Some(parent) = archive.parent(id)? {
        println!("  in {parent}");
    }
    for line in node.content.lines() {
        println!("  | {line}");
    }
    tree_children(dag, &node, 1)?;
    Ok(ExitCode::SUCCESS)
}

fn tree(dag: &Dag, node: &Node, depth: usize) -> anyhow::Result<()> {
    println!("{}{}", "  ".repeat(depth), node_line(node));
    tree_children(dag, node, depth + 1)
}

fn tree_children(dag: &Dag, node: &Node, depth: usize) -> anyhow::Result<()> {
    for child in dag.archive().children(&node.id)? {
        tree(dag, &child, depth)?;
    }
    if depth <= 2 && node.kind == less_runtime::dag::NodeKind::Session {
        for m in dag.archive().node_messages(&node.id)? {
            let text: String = m.content.chars().take(100).collect::<String>().replace(['\n', '\t'], " ");
            println!("{}{} {} {}", "  ".repeat(depth), m.id, m.name.as_deref().unwrap_or(&m.role), text);
        }
    }
    Ok(())
}

fn print_expansion(expansion: &Expansion) {
    match &expansion.target {
        Child::Node(node) => {
            println!("{}", node_line(node));
            for line in node.content.lines() {
                println!("  | {line}");
            }
        }
        Child::Message(m) => {
            println!(
                "{} {} {} session {} turn {}",
                m.id,
                day(m.at),
                m.name.as_deref().unwrap_or(&m.role),
                m.session,
                m.turn
            );
            println!("{}", m.content);
        }
    }
    if let Some(parent) = &expansion.parent {
        println!("in {parent}");
    }
    for child in &expansion.children {
        match child {
            Child::Node(node) => {
                println!("{}", node_line(node));
                for line in node.content.lines() {
                    println!("  | {line}");
                }
            }
            Child::Message(m) => {
                println!("--- {} {} {} ({} tok)", m.id, day(m.at), m.name.as_deref().unwrap_or(&m.role), m.tokens);
                println!("{}", m.content);
            }
        }
    }
}

fn print_answer(answer: &Answer) {
    match &answer.degraded {
        Some(why) => eprintln!("lessrt: stages: {} ({why})", answer.stages),
        None => eprintln!("lessrt: stages: {}", answer.stages),
    }
    if answer.citations.is_empty() {
        eprintln!("lessrt: nothing in the archive bears on this question");
        return;
    }
    print!("{}", answer.text);
    eprintln!(
        "lessrt: {} tokens of {}; cites {} messages through {} nodes",
        answer.tokens,
        answer.max_tokens,
        answer.citations.len(),
        answer.nodes.len()
    );
}

fn print_impact(impact: &Impact) {
    if impact.items.is_empty() {
        println!("nothing depends on {} (at confidence ≥ {})", impact.pointer, impact.min_confidence);
        return;
    }
    let mut layer = 0;
    for item in &impact.items {
        if item.layer != layer {
            layer = item.layer;
            println!("layer {layer}: {}", item.label.replace('_', " "));
        }
        println!(
            "  {} {} ({}) conf {:.2} via {}: {}",
            item.kind,
            item.id,
            if item.project.is_empty() { "-" } else { &item.project },
            item.confidence,
            item.via,
            item.text.chars().take(100).collect::<String>()
        );
    }
}
