//! `lessrt dag build|show|expand|query|impact|backfill|log` and `lessrt memory ingest`: the lossless memory (raw
//! messages and the session → arc → epoch summary DAG) from the command line.
//!
//! What they print of archived text (messages, summaries, answers) is redacted the way the page redacts it: secrets
//! become `credential_ref:` references, addresses `[REDACTED_IP]`. The raw messages stay in the store, unchanged.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use less_agents::ModelSource;
use less_runtime::dag::{
    Answer, ArchiveStats, BuildReport, Child, Condenser, Dag, DagConfig, DagError, EVENT_KINDS, Expansion, Impact,
    Node, day, index_dir, parse_transcript,
};
use less_runtime::memory::Memory;
use less_runtime::{Pointer, Progress};
use serde_json::json;

use super::args::{OutputArgs, ProjectArgs, Stop, StoreArgs, count, rfc3339};
use super::summarizer::SummarizerChoice;
use crate::Ctx;
use crate::progress::Bars;
use less_runtime::view::{redact_text, redacted};

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
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print the DAG as a tree (every project's top nodes down to sessions), or one node with its summary and
    /// children. Exit 1 for an unknown node.
    Show {
        /// A node id (`S-…`, `A-…`, `E-…`).
        id: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One level below a node: an arc's or epoch's children, a session's raw messages; a message id prints it.
    /// Exit 1 for an unknown id.
    Expand {
        /// A node id or a message id (`m-…` or `sam:msg:m-…`).
        id: String,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Answer a question from one project's archived messages, within a token budget, citing messages and nodes.
    /// Exit 1 when nothing bears on it.
    Query {
        /// The question.
        question: String,
        /// Most tokens in the answer.
        #[arg(long, default_value_t = 400)]
        max_tokens: u32,
        #[command(flatten)]
        project: ProjectArgs,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// What depends on a source, in every project: engrams, raw messages citing it and summaries, by layer (1 will
    /// break, 2 likely affected, 3 may need testing). Exit 1 when nothing does.
    Impact {
        /// The source, as a pointer (`repo:src/lib.rs#L10-L20`, `sam:msg:m-…`, `sam:engram:<id>`).
        pointer: String,
        /// Leave out engrams and summaries below this confidence.
        #[arg(long, default_value_t = 0.5)]
        min_confidence: f64,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Summarize sessions the significance gate skipped (all, or one session).
    Backfill {
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        summarizer: SummarizerArgs,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print the event log (skips, summaries, escalations, backfills, failures), oldest first. Exit 1 when no event
    /// matches.
    Log {
        /// Only events of this kind.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(EVENT_KINDS))]
        kind: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
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
    /// Keep the session open (more messages will come); by default it ends and `dag build` may summarize it.
    #[arg(long)]
    open: bool,
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    output: OutputArgs,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Opens the archive of an existing store.
fn open(store: &StoreArgs, config: DagConfig) -> anyhow::Result<Dag> {
    let dir = store.existing()?;
    Dag::open(dir, config).with_context(|| format!("cannot open the archive in {}", dir.display()))
}

/// Opens the archive with the summarizer `args` name, reporting its progress to `progress`.
fn open_summarizing(
    store: &StoreArgs,
    config: DagConfig,
    args: &SummarizerArgs,
    progress: Arc<dyn Progress>,
) -> anyhow::Result<Dag> {
    if (args.record.is_some() || args.replay.is_some()) && !args.choice.is_llm() {
        return Err(Stop::usage("--record and --replay need `--summarizer llm`").into());
    }
    let source = ModelSource::from_dirs(args.record.as_deref(), args.replay.as_deref());
    let Some(summarizer) = args.choice.summarizer(&source)? else {
        return Err(Stop::usage("--llm-base-url, --llm-model and --llm-api-key-env need `--summarizer llm`").into());
    };
    let dir = store.existing()?;
    let condenser = Condenser::new(config, summarizer).with_progress(progress.clone());
    let mut index =
        Memory::open(&index_dir(dir)).with_context(|| format!("cannot open the message index in {}", dir.display()))?;
    index.on_embed_progress(move |done, total| progress.update("embedding claims", done as u64, total as u64));
    let dag = Dag::open_with(dir, condenser, index)
        .with_context(|| format!("cannot open the archive in {}", dir.display()))?;
    Ok(dag)
}

/// `lessrt memory ingest`.
pub(crate) fn ingest(args: &IngestArgs, ctx: Ctx) -> anyhow::Result<ExitCode> {
    // Before the store is opened (or created): a refused ingest leaves no trace.
    less_runtime::dag::check_name(&args.session)
        .map_err(|why| Stop::usage(format!("LESS_ARGUMENT_INVALID: --session {why}")))?;
    args.project.resolve(&[], "archive", true)?;
    let text = super::read_input(&args.file)?;
    let parsed = parse_transcript(&text).and_then(|messages| {
        less_runtime::dag::check_archivable(&messages)?;
        Ok(messages)
    });
    let messages = match parsed {
        Ok(messages) => messages,
        Err(v) => {
            eprintln!("lessrt: {}: {} {}: {}", v.code, args.file.display(), v.path, v.message);
            eprintln!("lessrt: instead: {}", v.code.instruction());
            let doc = json!({"error": {"code": v.code, "path": v.path, "message": v.message}});
            if args.output.json() {
                super::print_json(&doc);
            }
            args.output.write_file(&doc)?;
            return Ok(ExitCode::from(2));
        }
    };
    let bars = Bars::new(ctx.quiet);
    let dir = &args.store.store;
    let index =
        Memory::open(&index_dir(dir)).with_context(|| format!("cannot open the message index in {}", dir.display()))?;
    let mut dag =
        Dag::open_with(dir, Condenser::new(DagConfig::default(), Arc::new(less_runtime::dag::Extractive)), index)
            .with_context(|| format!("cannot open the archive in {}", dir.display()))?;
    let project = args.project.for_write(&dag.archive().projects()?, "archive", ctx.quiet)?;
    dag.index_mut().on_embed_progress(bars.embedding());
    bars.update(&format!("archiving {}", count(messages.len() as u64, "message")), 0, 0);
    // Archived and ended in one transaction: a killed ingest leaves all of it, in an ended session, or nothing.
    let stored = if args.open {
        dag.ingest(&project, &args.session, &messages, now())?
    } else {
        dag.ingest_and_end(&project, &args.session, &messages, now())?
    };
    dag.flush()?;
    bars.clear();
    let duplicates = messages.len() - stored.len();
    let ids: Vec<&str> = stored.iter().map(|m| m.id.as_str()).collect();
    let doc = json!({"session": args.session, "project": project, "stored": stored.len(),
                     "duplicates": duplicates, "ended": !args.open, "ids": ids});
    args.output.emit(&doc, || {
        outln!(
            "archived {} in session {} of project {project:?} ({duplicates} already archived){}",
            count(stored.len() as u64, "message"),
            args.session,
            if args.open { "" } else { "; `lessrt dag build` summarizes it" }
        );
    })?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(command: &Command, ctx: Ctx) -> anyhow::Result<ExitCode> {
    match command {
        Command::Build { arc_every, epoch_every, no_gate, summarizer, store, output } => {
            if *arc_every == 0 || *epoch_every == 0 {
                return Err(Stop::usage("--arc-every and --epoch-every must be at least 1").into());
            }
            let mut config = DagConfig { arc_every: *arc_every, epoch_every: *epoch_every, ..DagConfig::default() };
            config.gate.enabled = !no_gate;
            let bars = Bars::new(ctx.quiet);
            let mut dag = open_summarizing(store, config, summarizer, bars.clone())?;
            let report = dag.build(now())?;
            bars.clear();
            print_build(&report, &dag.archive().stats()?, output)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Backfill { session, summarizer, store, output } => {
            let bars = Bars::new(ctx.quiet);
            let mut dag = open_summarizing(store, DagConfig::default(), summarizer, bars.clone())?;
            let report = dag.backfill(session.as_deref(), now())?;
            bars.clear();
            print_build(&report, &dag.archive().stats()?, output)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { id, store, output } => {
            let dag = open(store, DagConfig::default())?;
            show(&dag, id.as_deref(), output)
        }
        Command::Expand { id, store, output } => {
            let dag = open(store, DagConfig::default())?;
            match dag.expand(id) {
                Ok(expansion) => {
                    output.emit(&redacted(serde_json::to_value(&expansion)?), || print_expansion(&expansion))?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(err @ DagError::NotFound(_)) => Err(Stop::no(err.to_string()).into()),
                Err(err) => Err(err.into()),
            }
        }
        Command::Query { question, max_tokens, project, store, output } => {
            let mut dag = open(store, DagConfig::default())?;
            // The first reranked question embeds what was archived since the last one.
            let bars = Bars::new(ctx.quiet);
            dag.index_mut().on_embed_progress(bars.embedding());
            let Some(project) = project.resolve(&dag.archive().projects()?, "archive", ctx.quiet)? else {
                return Err(Stop::no("the archive holds no messages; `lessrt memory ingest` adds some").into());
            };
            let answer = dag.expand_query(question, *max_tokens, Some(&project))?;
            bars.clear();
            output.emit(&redacted(serde_json::to_value(&answer)?), || print_answer(&answer, ctx))?;
            Ok(if answer.citations.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Impact { pointer, min_confidence, store, output } => {
            let pointer = match Pointer::parse(pointer) {
                Ok(p) => p,
                Err(v) => return Err(Stop::usage(format!("{}: {}", v.code, v.message)).into()),
            };
            let dag = open(store, DagConfig::default())?;
            let impact = dag.impact(&pointer, *min_confidence)?;
            output.emit(&redacted(serde_json::to_value(&impact)?), || print_impact(&impact))?;
            Ok(if impact.items.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Log { kind, store, output } => {
            let dag = open(store, DagConfig::default())?;
            let events = dag.archive().events(kind.as_deref())?;
            let doc: Vec<serde_json::Value> = events
                .iter()
                .map(|e| json!({"at": e.at, "at_utc": rfc3339(e.at), "kind": e.kind, "detail": e.detail}))
                .collect();
            output.emit(&serde_json::Value::Array(doc), || {
                for event in &events {
                    outln!("{}\t{}\t{}", rfc3339(event.at), event.kind, event.detail);
                }
            })?;
            Ok(if events.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
    }
}

fn print_build(report: &BuildReport, stats: &ArchiveStats, output: &OutputArgs) -> anyhow::Result<()> {
    output.emit(&json!({"built": report, "archive": stats}), || {
        outln!(
            "built {} ({} skipped by the gate, {} backfilled), {}, {}; {} escalated",
            count(report.sessions as u64, "session summary"),
            report.skipped,
            report.backfilled,
            count(report.arcs as u64, "arc"),
            count(report.epochs as u64, "epoch"),
            report.escalated
        );
        outln!("archive: {}", stats_line(stats));
    })?;
    if report.truncated > 0 {
        eprintln!(
            "lessrt: {} summaries fell back to deterministic truncation (confidence 0.3): the summarizer failed or \
             overran at both levels; `lessrt dag log --kind escalated` shows each attempt's error",
            report.truncated
        );
    }
    Ok(())
}

fn stats_line(stats: &ArchiveStats) -> String {
    format!(
        "{} in {}; {}, {}, {}; {} skipped, {} pending",
        count(stats.messages, "message"),
        count(stats.sessions, "session"),
        count(stats.session_nodes, "session node"),
        count(stats.arcs, "arc"),
        count(stats.epochs, "epoch"),
        count(stats.skipped, "part"),
        count(stats.pending_messages, "message"),
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

fn show(dag: &Dag, id: Option<&str>, output: &OutputArgs) -> anyhow::Result<ExitCode> {
    let archive = dag.archive();
    let Some(id) = id else {
        let tops = archive.tops(None)?;
        if output.json() || output.output.is_some() {
            let doc = redacted(json!({"archive": archive.stats()?, "nodes": archive.all_nodes()?}));
            output.write_file(&doc)?;
            if output.json() {
                super::print_json(&doc);
                return Ok(ExitCode::SUCCESS);
            }
        }
        outln!("{}", stats_line(&archive.stats()?));
        let mut project = None;
        for top in &tops {
            if project != Some(&top.project) {
                outln!("project {:?}", top.project);
                project = Some(&top.project);
            }
            tree(dag, top, 1)?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let Some(node) = archive.node(id)? else {
        return Err(Stop::no(format!("no node {id}; `lessrt dag show` lists the top nodes")).into());
    };
    let expansion = redacted(serde_json::to_value(dag.expand(id)?)?);
    output.write_file(&expansion)?;
    if output.json() {
        super::print_json(&expansion);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{}", node_line(&node));
    if let Some(parent) = archive.parent(id)? {
        outln!("  in {parent}");
    }
    for line in redact_text(&node.content).lines() {
        outln!("  | {line}");
    }
    tree_children(dag, &node, 1)?;
    Ok(ExitCode::SUCCESS)
}

fn tree(dag: &Dag, node: &Node, depth: usize) -> anyhow::Result<()> {
    outln!("{}{}", "  ".repeat(depth), node_line(node));
    tree_children(dag, node, depth + 1)
}

fn tree_children(dag: &Dag, node: &Node, depth: usize) -> anyhow::Result<()> {
    for child in dag.archive().children(&node.id)? {
        tree(dag, &child, depth)?;
    }
    if depth <= 2 && node.kind == less_runtime::dag::NodeKind::Session {
        for m in dag.archive().node_messages(&node.id)? {
            let text: String = redact_text(&m.content).chars().take(100).collect::<String>().replace(['\n', '\t'], " ");
            outln!("{}{} {} {}", "  ".repeat(depth), m.id, m.name.as_deref().unwrap_or(&m.role), text);
        }
    }
    Ok(())
}

fn print_expansion(expansion: &Expansion) {
    match &expansion.target {
        Child::Node(node) => {
            outln!("{}", node_line(node));
            for line in redact_text(&node.content).lines() {
                outln!("  | {line}");
            }
        }
        Child::Message(m) => {
            outln!(
                "{} {} {} session {} turn {}",
                m.id,
                day(m.at),
                m.name.as_deref().unwrap_or(&m.role),
                m.session,
                m.turn
            );
            outln!("{}", redact_text(&m.content));
        }
    }
    if let Some(parent) = &expansion.parent {
        outln!("in {parent}");
    }
    for child in &expansion.children {
        match child {
            Child::Node(node) => {
                outln!("{}", node_line(node));
                for line in redact_text(&node.content).lines() {
                    outln!("  | {line}");
                }
            }
            Child::Message(m) => {
                outln!("--- {} {} {} ({} tok)", m.id, day(m.at), m.name.as_deref().unwrap_or(&m.role), m.tokens);
                outln!("{}", redact_text(&m.content));
            }
        }
    }
}

fn print_answer(answer: &Answer, ctx: Ctx) {
    if !ctx.quiet {
        match &answer.degraded {
            Some(why) => eprintln!("lessrt: stages: {} ({why})", answer.stages),
            None => eprintln!("lessrt: stages: {}", answer.stages),
        }
    }
    if answer.citations.is_empty() {
        eprintln!("lessrt: nothing in the archive bears on this question");
        return;
    }
    out!("{}", redact_text(&answer.text));
    if !ctx.quiet {
        eprintln!(
            "lessrt: {} tokens of {}; cites {} through {}",
            answer.tokens,
            answer.max_tokens,
            count(answer.citations.len() as u64, "message"),
            count(answer.nodes.len() as u64, "node")
        );
    }
}

fn print_impact(impact: &Impact) {
    if impact.items.is_empty() {
        outln!("nothing depends on {} (at confidence ≥ {})", impact.pointer, impact.min_confidence);
        return;
    }
    let mut layer = 0;
    for item in &impact.items {
        if item.layer != layer {
            layer = item.layer;
            outln!("layer {layer}: {}", item.label.replace('_', " "));
        }
        outln!(
            "  {} {} ({}) conf {:.2} via {}: {}",
            item.kind,
            item.id,
            if item.project.is_empty() { "-" } else { &item.project },
            item.confidence,
            item.via,
            redact_text(&item.text).chars().take(100).collect::<String>()
        );
    }
}
