//! `lessrt index [DIR]` builds or refreshes a workspace's index and says what it holds; `lessrt search "query"`
//! prints the hits a `search` action would get: pointers and one-line previews, best first.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use less_runtime::memory::Stages;
use less_runtime::workspace::{Hit, WorkspaceIndex};
use serde_json::json;

use super::args::{OutputArgs, Stop, count};
use crate::Ctx;
use crate::output::one_line;

/// Arguments of `lessrt index`.
#[derive(Debug, clap::Args)]
pub(crate) struct IndexArgs {
    /// The workspace (default: the current directory).
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Where the index lives (default: `index/<hash of DIR>` in the user cache, ~/.cache/lessrt).
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

/// Arguments of `lessrt search`.
#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// What to look for: key words, identifiers, or a question.
    query: String,
    /// The workspace (default: the current directory); indexed first if it is not yet, refreshed if it changed.
    #[arg(long, value_name = "DIR", default_value = ".")]
    workspace: PathBuf,
    /// Most hits (1 to 50).
    #[arg(short = 'k', long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=50))]
    k: u64,
    /// `hash`: BM25 alone; `hash+rerank`: reranked by the local embedding model (BM25 alone, said on stderr, when the
    /// model is not installed: `lessrt doctor`).
    #[arg(long, default_value = "hash+rerank", value_parser = parse_stages)]
    stages: Stages,
    /// Where the index lives (default: `index/<hash of the workspace>` in the user cache).
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

fn parse_stages(text: &str) -> Result<Stages, String> {
    match Stages::parse(text) {
        Some(Stages::Rerank) | None => Err(format!("{text:?}: use hash or hash+rerank")),
        Some(stages) => Ok(stages),
    }
}

/// Opens the index of `dir` (in `index_dir` if given) and brings it up to the files, with a bar on long builds.
fn open_fresh(
    dir: &std::path::Path,
    index_dir: Option<&std::path::Path>,
    ctx: Ctx,
) -> Result<(WorkspaceIndex, less_runtime::workspace::Refreshed), Stop> {
    let unusable = |err: less_runtime::workspace::WorkspaceError| {
        let violation = err.violation();
        Stop::usage(format!("{}: {} (instead: {})", violation.code, violation.message, violation.code.instruction()))
    };
    let mut index = match index_dir {
        Some(at) => WorkspaceIndex::open_in(dir, at),
        None => WorkspaceIndex::open(dir),
    }
    .map_err(unusable)?;
    let bars = crate::progress::Bars::new(ctx.quiet);
    let refreshed = index.refresh(bars.as_ref()).map_err(unusable);
    bars.clear();
    Ok((index, refreshed?))
}

pub(crate) fn index(args: &IndexArgs, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let (index, refreshed) = match open_fresh(&args.dir, args.index_dir.as_deref(), ctx) {
        Ok(opened) => opened,
        Err(stop) => {
            eprintln!("lessrt: {stop}");
            return Ok(ExitCode::from(stop.code));
        }
    };
    let stats = index.stats()?;
    let doc = json!({"refresh": refreshed, "index": stats});
    args.output.emit(&doc, || {
        outln!("workspace {}", stats.root.display());
        outln!("index     {} ({:.1} MiB)", stats.dir.display(), stats.index_bytes as f64 / 1_048_576.0);
        outln!(
            "refresh   {} in {} ms: {} re-indexed, {} unchanged, {} removed, {} skipped{}",
            count(refreshed.files as u64, "file"),
            refreshed.millis,
            refreshed.indexed,
            refreshed.unchanged,
            refreshed.removed,
            refreshed.skipped,
            if refreshed.rebuilt { " (built from nothing)" } else { "" }
        );
        outln!(
            "holds     {}, {}, {} lines, {} tokens, {} embedded",
            count(stats.files as u64, "file"),
            count(stats.chunks as u64, "chunk"),
            stats.lines,
            stats.tokens,
            stats.vectors
        );
        let langs: Vec<String> = stats.languages.iter().map(|(l, n)| format!("{l} {n}")).collect();
        outln!("languages {}", langs.join(", "));
        let kinds: Vec<String> = stats.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        outln!("chunks    {}", kinds.join(", "));
    })?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn search(args: &SearchArgs, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let (index, _) = match open_fresh(&args.workspace, args.index_dir.as_deref(), ctx) {
        Ok(opened) => opened,
        Err(stop) => {
            eprintln!("lessrt: {stop}");
            return Ok(ExitCode::from(stop.code));
        }
    };
    let started = Instant::now();
    let k = usize::try_from(args.k).unwrap_or(10);
    let found = match index.search(&args.query, k, args.stages, &|_: &Hit| true) {
        Ok(found) => found,
        Err(err) => {
            let violation = err.violation();
            eprintln!("lessrt: {}: {} (instead: {})", violation.code, violation.message, violation.code.instruction());
            return Ok(ExitCode::from(2));
        }
    };
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    if let Some(why) = &found.degraded
        && !ctx.quiet
    {
        eprintln!("lessrt: {why}");
    }
    let doc = json!({"query": args.query, "k": k, "stages": found.stages, "millis": millis, "hits": found.hits});
    args.output.emit(&doc, || {
        for hit in &found.hits {
            outln!("{:>6.3}  {}  {}", hit.score, one_line(&hit.pointer), one_line(&hit.preview));
        }
        if !ctx.quiet {
            eprintln!(
                "{} ({}) in {millis:.1} ms; read one with its pointer (`lessrt mcp`'s less_deref, an agent's deref)",
                count(found.hits.len() as u64, "hit"),
                found.stages.join("+")
            );
        }
    })?;
    Ok(if found.hits.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
