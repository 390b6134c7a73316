//! `lessrt eval locomo FILE`: evidence recall of the memory's recall on LoCoMo conversations.
//! `lessrt eval context`: the context ledger against its baselines on the built-in scenario suite, or
//! (`--suite paraphrase`) on the paraphrase set, its development and held-out splits side by side.
//!
//! The evaluations themselves (the LoCoMo scoring, the context suites and their checks) are `less-eval`'s
//! [`locomo`](less_eval::locomo) and [`context`](less_eval::context); this module parses the arguments, opens the
//! memory, shows progress and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use less_eval::locomo::{self, Sample};
use less_eval::{context, search};
use less_runtime::Progress;
use less_runtime::context::Engine;
use less_runtime::memory::{Fusion, Memory, Stages};
use serde_json::{Value, json};

use super::args::{OutputArgs, Stop, count};
use crate::Ctx;
use crate::progress::Bars;

/// Sub-commands of `lessrt eval`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Evidence recall@k on LoCoMo conversations (JSON array of samples).
    Locomo(LocomoArgs),
    /// The context ledger against the hot-tail and truncation baselines: checks passed per miss kind.
    Context(ContextArgs),
    /// Workspace search on the graded tasks of scenarios: the share whose gold spans are all in the top k hits of the
    /// task's question, with BM25 alone and with the embedding rerank, per split (tune, held out).
    Search(SearchEvalArgs),
}

/// Arguments of `lessrt eval search`.
#[derive(Debug, clap::Args)]
pub(crate) struct SearchEvalArgs {
    /// Scenario files with graded tasks (default: the four shipped graded scenarios).
    #[arg(value_name = "SCENARIO")]
    scenarios: Vec<PathBuf>,
    /// The cut-offs.
    #[arg(long, value_delimiter = ',', default_value = "5,10")]
    k: Vec<usize>,
    /// Other weights, for tuning on the development set (`scenarios/search-dev/`): `names=2,cosine=0.3,tests=1`,
    /// any subset (the rest: the weights every search uses).
    #[arg(long, value_name = "WEIGHTS")]
    ranking: Option<String>,
    /// The report: {"tasks", "rows": [{"stages", "split", "tasks", "found": {k: n}}], "items": [per task]}.
    #[command(flatten)]
    output: OutputArgs,
}

/// Arguments of `lessrt eval context`.
#[derive(Debug, clap::Args)]
pub(crate) struct ContextArgs {
    /// Which scenarios: `scenarios` (the 34 seeded transcripts) or `paraphrase` (the grammar-generated paraphrase
    /// families of every miss kind, English and Russian, reported per split: development and held out).
    #[arg(long, value_enum, default_value_t = ContextSuite::Scenarios)]
    suite: ContextSuite,
    /// The report: {"suite", "scenarios", "messages", "tokens_in", "engines": {name: {"passed", "checks",
    /// "tokens_out", "by_kind", "failures"}}, "recompaction": {"idempotent", "continued", "failures"}}; with
    /// `--suite paraphrase`, {"suite", "held_out_per_family", "splits": {"dev": <that report>, "held_out": <…>}}.
    #[command(flatten)]
    output: OutputArgs,
}

/// The scenario sets of `lessrt eval context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ContextSuite {
    /// The 34 seeded scenario transcripts.
    Scenarios,
    /// The paraphrase families, development and held-out splits.
    Paraphrase,
}

/// Where to get LoCoMo: it is not shipped with lessrt (its licence is CC BY-NC 4.0).
const LOCOMO_SOURCE: &str = "LoCoMo is not shipped with lessrt (CC BY-NC 4.0): download data/locomo10.json from \
                             https://github.com/snap-research/locomo and pass its path; the figures of docs/performance.md are on \
                             its first five conversations (conv-26, conv-30, conv-41, conv-42, conv-43), the \
                             development split";

/// Arguments of `lessrt eval locomo`.
#[derive(Debug, clap::Args)]
pub(crate) struct LocomoArgs {
    /// The LoCoMo file: a JSON array of samples, such as `data/locomo10.json` of
    /// https://github.com/snap-research/locomo (not shipped with lessrt).
    file: Option<PathBuf>,
    /// The k values to report.
    #[arg(long, value_delimiter = ',', default_value = "1,5,10,25,50")]
    k: Vec<usize>,
    /// Stages: `hash` (hash-key recall alone), `hash+rerank` (fused with the embedding model) or `rerank` (the
    /// embedding model alone).
    #[arg(long, default_value = "hash+rerank")]
    stages: String,
    /// Fusion weights `HASH,COSINE,NEIGHBOUR,FLOOR[,CONTEXT,AUTHOR,SOURCE[,TIME[,LEADER]]]` (for tuning experiments; the
    /// defaults are the chosen ones; the optional ones are 0 when left out).
    #[arg(long, value_delimiter = ',')]
    fusion: Option<Vec<f32>>,
    /// Candidates each recall stage contributes before fusion (for tuning experiments; the default is the chosen one).
    #[arg(long, default_value_t = less_runtime::memory::RECALL_POOL)]
    pool: usize,
    /// Cross-validation over the conversations of FILE: for each conversation, the weights of turn context, writer,
    /// source and time (each on at its default or off: 16 choices) that score best on the other conversations, scored on
    /// it; the report is over every question, each scored by weights chosen without its conversation.
    #[arg(long)]
    cv: bool,
    /// Analysis: write every turn's vector, every question's vector and its stage-1 candidates (all of them, with
    /// their scores) to this file as JSON, for experiments with the ranking outside the binary.
    #[arg(long, value_name = "FILE", hide = true)]
    dump: Option<PathBuf>,
    /// Analysis: write one JSON line per question (its conversation, category, evidence and the dia_ids retrieved at
    /// the largest k) to this file, to read what was missed.
    #[arg(long, value_name = "FILE", conflicts_with = "cv")]
    questions: Option<PathBuf>,
    /// A regression floor: exit 1 when the overall recall@10 (percent) is below it.
    #[arg(long, value_name = "PERCENT")]
    min_recall_at_10: Option<f64>,
    /// The report: {"questions", "stages", "overall", "strict", "by_category", "latency_ms"} (recall in percent).
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) fn run(command: &Command, ctx: Ctx) -> anyhow::Result<ExitCode> {
    match command {
        Command::Locomo(args) => locomo(args, ctx),
        Command::Context(args) => context(args),
        Command::Search(args) => search(args, ctx),
    }
}

/// The shipped scenarios with graded tasks, the default of `lessrt eval search`.
pub(crate) const GRADED_SCENARIOS: [&str; 4] = [
    "scenarios/audit-tidepool.toml",
    "scenarios/real-ignore.toml",
    "scenarios/review-lanternfish.toml",
    "scenarios/waves-harbor.toml",
];

/// Runs the search evaluation; exit 1 when no scenario had a graded task.
fn search(args: &SearchEvalArgs, ctx: Ctx) -> anyhow::Result<ExitCode> {
    use less_runtime::workspace::WorkspaceIndex;
    let files: Vec<PathBuf> = if args.scenarios.is_empty() {
        GRADED_SCENARIOS.iter().map(PathBuf::from).collect()
    } else {
        args.scenarios.clone()
    };
    if args.k.iter().any(|k| !(1..=less_runtime::workspace::MAX_K).contains(k)) {
        return Err(Stop::usage(format!("--k takes cut-offs from 1 to {}", less_runtime::workspace::MAX_K)).into());
    }
    let mut items = Vec::new();
    let mut degraded = None;
    for file in &files {
        let scenario = less_runtime::Scenario::load(file).map_err(|v| anyhow::anyhow!("{}: {v}", file.display()))?;
        let mut index = WorkspaceIndex::open(&scenario.workspace).map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(weights) = &args.ranking {
            index.set_ranking(
                less_runtime::workspace::Ranking::parse(weights)
                    .map_err(|why| Stop::usage(format!("--ranking: {why}")))?,
            );
        }
        index.refresh(&less_runtime::Silent).map_err(|e| anyhow::anyhow!("{e}"))?;
        for stages in [Stages::Hash, Stages::HashRerank] {
            let found = search::evaluate(&scenario, &mut index, stages, &args.k).map_err(|e| anyhow::anyhow!("{e}"))?;
            if stages == Stages::HashRerank && degraded.is_none() {
                // A rerank without the model is BM25 again: say so rather than report it as the rerank's figure.
                let probe = index.search("probe", 1, stages, &|_| true);
                degraded = probe.ok().and_then(|s| s.degraded);
            }
            items.extend(found.into_iter().map(|f| (stages, f)));
        }
    }
    if let Some(why) = &degraded {
        return Err(
            Stop::usage(format!("LESS_RUN_FAILED: {why}; `lessrt doctor` says how to install the model")).into()
        );
    }
    let doc = search::report(&items, &args.k);
    let n_tasks = items.len() / 2;
    args.output.emit(&doc, || {
        outln!("{}", search::table(&doc, &args.k));
        if !ctx.quiet {
            eprintln!(
                "{} graded tasks of {}; a task is found at k when every gold citation overlaps a top-k hit",
                n_tasks,
                count(files.len() as u64, "scenario")
            );
        }
    })?;
    Ok(if n_tasks == 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Runs a scenario set; exit 1 when the ledger misses a check (the set is its contract).
fn context(args: &ContextArgs) -> anyhow::Result<ExitCode> {
    let reports: Vec<(&str, context::EvalReport)> = match args.suite {
        ContextSuite::Scenarios => vec![("all", context::evaluate(&context::suite()))],
        ContextSuite::Paraphrase => {
            let suite = context::paraphrase_suite();
            context::Split::ALL.iter().map(|split| (split.as_str(), context::evaluate(suite.split(*split)))).collect()
        }
    };
    let doc = match args.suite {
        ContextSuite::Scenarios => {
            let mut doc = reports[0].1.to_json();
            doc["suite"] = json!("scenarios");
            doc
        }
        ContextSuite::Paraphrase => {
            let splits: serde_json::Map<String, Value> =
                reports.iter().map(|(name, report)| ((*name).to_owned(), report.to_json())).collect();
            json!({"suite": "paraphrase", "held_out_per_family": context::N_HELD_OUT, "splits": splits})
        }
    };
    args.output.emit(&doc, || print_context(args.suite, &reports))?;
    let ledger_clean = reports
        .iter()
        .flat_map(|(_, report)| &report.engines)
        .filter(|s| s.engine == Engine::Ledger)
        .all(|s| s.failures.is_empty());
    Ok(if ledger_clean { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The table on stdout; the ledger's misses on stderr (the baselines' misses are expected, `--json` lists them; the
/// ledger's are regressions).
fn print_context(suite: ContextSuite, reports: &[(&str, context::EvalReport)]) {
    let title = match suite {
        ContextSuite::Scenarios => "Context ledger evaluation",
        ContextSuite::Paraphrase => "Context ledger evaluation, paraphrase set (dev | held out)",
    };
    for line in context::table_lines(title, reports) {
        outln!("{line}");
    }
    for (name, report) in reports {
        for score in report.engines.iter().filter(|s| s.engine == Engine::Ledger) {
            for failure in &score.failures {
                let which = if reports.len() > 1 { format!(" ({name})") } else { String::new() };
                eprintln!("lessrt: {}{which} missed {failure}", score.engine);
            }
        }
        for failure in &report.recompaction.failures {
            eprintln!("lessrt: ledger re-compaction: {failure}");
        }
    }
}

fn locomo(args: &LocomoArgs, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let Some(stages) = Stages::parse(&args.stages) else {
        return Err(Stop::usage(format!("unknown --stages {:?}; use hash, hash+rerank or rerank", args.stages)).into());
    };
    let file = match &args.file {
        Some(file) if file.is_file() || file == Path::new("-") => file,
        Some(file) => return Err(Stop::usage(format!("no LoCoMo file at {}. {LOCOMO_SOURCE}", file.display())).into()),
        None => return Err(Stop::usage(format!("which LoCoMo file? {LOCOMO_SOURCE}")).into()),
    };
    let text = super::read_input(file)?;
    let samples: Vec<Sample> = serde_json::from_str(&text).map_err(|err| {
        Stop::usage(format!("{} is not a LoCoMo file (a JSON array of samples): {err}", file.display()))
    })?;
    let mut ks = args.k.clone();
    if args.min_recall_at_10.is_some() && !ks.contains(&10) {
        ks.push(10);
    }
    // Removed when the evaluation ends, early or not (after `memory`, declared later, is dropped).
    let scratch =
        tempfile::Builder::new().prefix("lessrt-eval-").tempdir().context("cannot make a scratch directory")?;
    let dir = scratch.path();
    let mut memory = if stages == Stages::Hash { Memory::open_without_model(dir) } else { Memory::open(dir) }
        .context("cannot open a scratch memory")?;
    if let Some(reason) = memory.rerank_unavailable()
        && stages != Stages::Hash
    {
        return Err(Stop::usage(format!("--stages {} needs the embedding model: {reason}", stages.as_str())).into());
    }
    if let Some(w) = &args.fusion {
        anyhow::ensure!(
            w.len() == 4 || w.len() == 7 || w.len() == 8 || w.len() == 9,
            "--fusion takes four, seven, eight or nine numbers, HASH,COSINE,NEIGHBOUR,FLOOR[,CONTEXT,AUTHOR,SOURCE[,TIME[,LEADER]]] \
             (e.g. 1,1.5,0.5,0.3,0.3,0.3,0.5,0.5,0.2)"
        );
        let extra = |i: usize| w.get(i).copied().unwrap_or(0.0);
        memory.set_fusion(Fusion {
            hash: w[0],
            cosine: w[1],
            neighbour: w[2],
            floor: w[3],
            context: extra(4),
            author: extra(5),
            source: extra(6),
            time: extra(7),
            leader: extra(8),
        });
    }
    memory.set_recall_pool(args.pool);
    let bars = Bars::new(ctx.quiet);
    memory.on_embed_progress(bars.embedding());
    let on_question = |label: &str, done: u64, total: u64| bars.update(label, done, total);
    if args.cv {
        anyhow::ensure!(samples.len() >= 2, "--cv needs at least two conversations");
        let (scores, folds) = locomo::cross_validate(&mut memory, &samples, &ks, stages, &on_question)?;
        bars.clear();
        let mut report = locomo::report(&ks, &scores, stages);
        report["cv_folds"] = json!(folds);
        args.output.emit(&report, || {
            for line in locomo::report_lines(&ks, &report).into_iter().chain(locomo::fold_lines(&folds)) {
                outln!("{line}");
            }
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let scores = locomo::evaluate(&mut memory, &samples, &ks, stages, &on_question)?;
    bars.clear();
    if let Some(path) = &args.questions {
        let lines: String = scores.questions.iter().map(|q| format!("{}\n", q.detail)).collect();
        std::fs::write(path, lines).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.dump {
        let dump = locomo::dump(&mut memory, &samples)?;
        std::fs::write(path, serde_json::to_vec(&dump)?)?;
    }
    let report = locomo::report(&ks, &scores, stages);
    args.output.emit(&report, || {
        for line in locomo::report_lines(&ks, &report) {
            outln!("{line}");
        }
    })?;
    if let Some(floor) = args.min_recall_at_10 {
        let at10 = report["overall"]["recall@10"].as_f64().unwrap_or(0.0);
        if at10 < floor {
            eprintln!("lessrt: recall@10 is {at10}, below the floor of {floor}");
            return Ok(ExitCode::from(1));
        }
        if !ctx.quiet {
            eprintln!("lessrt: recall@10 is {at10}, at or above the floor of {floor}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
