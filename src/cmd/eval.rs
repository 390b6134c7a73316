//! `lessrt eval locomo FILE`: evidence recall of the memory's recall on LoCoMo conversations.
//! `lessrt eval context`: the context ledger against its baselines on the built-in scenario suite, or
//! (`--suite paraphrase`) on the paraphrase set, its development and held-out splits side by side.
//!
//! Every dialog turn of a conversation becomes an engram of that conversation's project, citing
//! `sam:<sample_id>:<dia_id>`; every QA question is asked against its own conversation. A question's recall@k is
//! the fraction of its evidence dia_ids among the top k retrieved turns (exact string match; a question without
//! evidence counts 1), averaged over all questions, overall and per category; the strict variant counts a question
//! only when all its evidence is in the top k.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use less_runtime::context;
use less_runtime::context::Engine;
use less_runtime::memory::{Fusion, Memory, RecallRequest, Stages};
use less_runtime::{Engram, EngramKind, Pointer, Progress, Scope, Source, Ttl, Valid};
use serde::Deserialize;
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
    /// Fusion weights `HASH,COSINE,NEIGHBOUR,FLOOR[,CONTEXT,AUTHOR,SOURCE[,TIME]]` (for tuning experiments; the
    /// defaults are the chosen ones; the optional ones are 0 when left out).
    #[arg(long, value_delimiter = ',')]
    fusion: Option<Vec<f32>>,
    /// Cross-validation over the conversations of FILE: for each conversation, the weights of turn context, writer,
    /// source and time (each on at its default or off: 16 choices) that score best on the other conversations, scored on
    /// it; the report is over every question, each scored by weights chosen without its conversation.
    #[arg(long)]
    cv: bool,
    /// Analysis: write every turn's vector, every question's vector and its stage-1 candidates (all of them, with
    /// their scores) to this file as JSON, for experiments with the ranking outside the binary.
    #[arg(long, value_name = "FILE", hide = true)]
    dump: Option<PathBuf>,
    /// A regression floor: exit 1 when the overall recall@10 (percent) is below it.
    #[arg(long, value_name = "PERCENT")]
    min_recall_at_10: Option<f64>,
    /// The report: {"questions", "stages", "overall", "strict", "by_category", "latency_ms"} (recall in percent).
    #[command(flatten)]
    output: OutputArgs,
}

/// One question's category and its recall and strict recall at each k.
type QuestionScore = (u32, Vec<f64>, Vec<f64>);

#[derive(Deserialize)]
struct Sample {
    sample_id: String,
    conversation: serde_json::Map<String, Value>,
    qa: Vec<Qa>,
}

#[derive(Deserialize)]
struct Qa {
    question: String,
    #[serde(default)]
    evidence: Vec<String>,
    category: u32,
}

#[derive(Deserialize)]
struct Turn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
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
    use less_runtime::workspace::{WorkspaceIndex, eval};
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
        index.refresh(&less_runtime::Silent).map_err(|e| anyhow::anyhow!("{e}"))?;
        for stages in [Stages::Hash, Stages::HashRerank] {
            let found = eval::evaluate(&scenario, &mut index, stages, &args.k).map_err(|e| anyhow::anyhow!("{e}"))?;
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
    let mut rows = Vec::new();
    for stages in ["hash", "hash+rerank"] {
        for split in ["tune", "held_out", "all"] {
            let chosen: Vec<&eval::TaskFound> = items
                .iter()
                .filter(|(s, f)| s.as_str() == stages && (split == "all" || f.split == split))
                .map(|(_, f)| f)
                .collect();
            let found: serde_json::Map<String, Value> = args
                .k
                .iter()
                .map(|k| {
                    let n = chosen.iter().filter(|f| f.found.iter().any(|(kk, ok)| kk == k && *ok)).count();
                    (k.to_string(), serde_json::json!(n))
                })
                .collect();
            rows.push(serde_json::json!({"stages": stages, "split": split, "tasks": chosen.len(), "found": found}));
        }
    }
    let n_tasks = items.len() / 2;
    let doc = serde_json::json!({
        "tasks": n_tasks,
        "rows": rows,
        "items": items.iter().map(|(s, f)| serde_json::json!({"stages": s.as_str(), "found": f})).collect::<Vec<_>>(),
    });
    args.output.emit(&doc, || {
        outln!("{}", search_table(&doc, &args.k));
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

/// The table of `lessrt eval search` (docs/index-search-ask.md's): a row per stages and split, a column per k.
pub(crate) fn search_table(doc: &Value, ks: &[usize]) -> String {
    let mut out = String::from("| stages | split | tasks |");
    for k in ks {
        out.push_str(&format!(" found in top {k} |"));
    }
    out.push_str("\n|---|---|---:|");
    for _ in ks {
        out.push_str("---:|");
    }
    for row in doc["rows"].as_array().into_iter().flatten() {
        let tasks = row["tasks"].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "\n| {} | {} | {tasks} |",
            row["stages"].as_str().unwrap_or(""),
            row["split"].as_str().unwrap_or("")
        ));
        for k in ks {
            let n = row["found"][k.to_string()].as_u64().unwrap_or(0);
            let pct = if tasks == 0 { 0.0 } else { 100.0 * n as f64 / tasks as f64 };
            out.push_str(&format!(" {n} ({pct:.0}%) |"));
        }
    }
    out
}

/// Runs a scenario set; exit 1 when the ledger misses a check (the set is its contract).
fn context(args: &ContextArgs) -> anyhow::Result<ExitCode> {
    let reports: Vec<(&str, context::EvalReport)> = match args.suite {
        ContextSuite::Scenarios => vec![("all", context::evaluate(&context::eval_suite()))],
        ContextSuite::Paraphrase => {
            let suite = context::paraphrase_suite();
            context::Split::ALL.iter().map(|split| (split.as_str(), context::evaluate(suite.split(*split)))).collect()
        }
    };
    let doc = match args.suite {
        ContextSuite::Scenarios => {
            let mut doc = context_doc(&reports[0].1);
            doc["suite"] = json!("scenarios");
            doc
        }
        ContextSuite::Paraphrase => {
            let splits: serde_json::Map<String, Value> =
                reports.iter().map(|(name, report)| ((*name).to_owned(), context_doc(report))).collect();
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

/// One report as JSON.
fn context_doc(report: &context::EvalReport) -> Value {
    let engines: serde_json::Map<String, Value> = report
        .engines
        .iter()
        .map(|score| {
            let (passed, checks) = score.total();
            let by_kind: serde_json::Map<String, Value> = score
                .by_kind
                .iter()
                .map(|(kind, (p, t))| (kind.as_str().to_owned(), json!({"passed": p, "checks": t})))
                .collect();
            let body = json!({
                "passed": passed,
                "checks": checks,
                "tokens_out": score.tokens_out,
                "by_kind": by_kind,
                "failures": score.failures,
            });
            (score.engine.as_str().to_owned(), body)
        })
        .collect();
    let recompaction = &report.recompaction;
    json!({
        "scenarios": report.n_scenarios,
        "messages": report.n_messages,
        "tokens_in": report.tokens_in,
        "engines": engines,
        "recompaction": {
            "idempotent": {"stable": recompaction.idempotent.0, "scenarios": recompaction.idempotent.1},
            "continued": {"passed": recompaction.continued.0, "checks": recompaction.continued.1},
            "failures": recompaction.failures,
        },
    })
}

/// The table: one row per miss kind, one column per engine and report (split).
fn print_context(suite: ContextSuite, reports: &[(&str, context::EvalReport)]) {
    let cell = |(passed, total): (usize, usize)| format!("{passed}/{total}");
    let n_scenarios: usize = reports.iter().map(|(_, r)| r.n_scenarios).sum();
    let n_messages: usize = reports.iter().map(|(_, r)| r.n_messages).sum();
    let tokens_in: u64 = reports.iter().map(|(_, r)| r.tokens_in).sum();
    let title = match suite {
        ContextSuite::Scenarios => "Context ledger evaluation",
        ContextSuite::Paraphrase => "Context ledger evaluation, paraphrase set (dev | held out)",
    };
    outln!("{title}: {n_scenarios} scenarios, {n_messages} messages, {tokens_in} tokens in");
    // Columns: engine by engine, each split of it side by side.
    let columns: Vec<(Engine, usize)> =
        Engine::ALL.iter().flat_map(|engine| (0..reports.len()).map(move |r| (*engine, r))).collect();
    let width = if reports.len() > 1 { 12 } else { 10 };
    let header: Vec<String> = columns
        .iter()
        .map(|(engine, r)| {
            let name = if reports.len() > 1 {
                format!("{} {}", engine.as_str(), if reports[*r].0 == "dev" { "dev" } else { "held" })
            } else {
                engine.as_str().to_owned()
            };
            format!("{name:>width$}", width = if reports.len() > 1 { name.len().max(width) + 1 } else { width })
        })
        .collect();
    outln!("{:<30}{}", "miss kind (checks passed)", header.join(""));
    let widths: Vec<usize> = header.iter().map(String::len).collect();
    let score = |engine: Engine, r: usize| reports[r].1.engines.iter().find(|s| s.engine == engine);
    let row = |label: &str, value: &dyn Fn(Engine, usize) -> String| {
        let cells: Vec<String> =
            columns.iter().zip(&widths).map(|((engine, r), width)| format!("{:>width$}", value(*engine, *r))).collect();
        outln!("{label:<30}{}", cells.join(""));
    };
    for kind in context::MissKind::ALL {
        row(kind.label(), &|engine, r| {
            cell(score(engine, r).and_then(|s| s.by_kind.get(&kind).copied()).unwrap_or_default())
        });
    }
    row("total", &|engine, r| cell(score(engine, r).map(|s| s.total()).unwrap_or_default()));
    row("tokens out", &|engine, r| score(engine, r).map(|s| s.tokens_out).unwrap_or_default().to_string());
    for (name, report) in reports {
        let recompaction = &report.recompaction;
        let which = if reports.len() > 1 { format!(" ({name})") } else { String::new() };
        outln!(
            "ledger re-compaction{which}: {} of {} outputs unchanged when compacted again; {} checks passed \
             when compacted in two steps",
            recompaction.idempotent.0,
            recompaction.idempotent.1,
            cell(recompaction.continued),
        );
    }
    // The baselines' misses are expected (`--json` lists them); the ledger's are regressions.
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
    let k_max = ks.iter().copied().max().unwrap_or(10);
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
            w.len() == 4 || w.len() == 7 || w.len() == 8,
            "--fusion takes four, seven or eight numbers, HASH,COSINE,NEIGHBOUR,FLOOR[,CONTEXT,AUTHOR,SOURCE[,TIME]] \
             (e.g. 1,1.5,0.5,0.3,0.3,0.3,0.5,0.2)"
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
        });
    }
    let bars = Bars::new(ctx.quiet);
    memory.on_embed_progress(bars.embedding());
    if args.cv {
        return cross_validate(args, &mut memory, &samples, &ks, k_max, stages, &bars);
    }
    let n_questions: usize = samples.iter().map(|s| s.qa.len()).sum();
    let mut per_question: Vec<QuestionScore> = Vec::new();
    let mut latencies_ms: Vec<f64> = Vec::new();
    for sample in &samples {
        // One bar over every question; it waits while a conversation is stored (and embedded).
        bars.update("LoCoMo questions", per_question.len() as u64, n_questions as u64);
        let engrams = turns_as_engrams(sample)?;
        memory.put_many(&engrams, &sample.sample_id, 0)?;
        memory.flush()?;
        for qa in &sample.qa {
            bars.update("LoCoMo questions", per_question.len() as u64, n_questions as u64);
            let started = Instant::now();
            let recall =
                memory.recall(&RecallRequest::in_project(&qa.question, &sample.sample_id, k_max).stages(stages))?;
            latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            per_question.push(question_score(qa, &recall, &sample.sample_id, &ks));
        }
    }
    bars.clear();
    if let Some(path) = &args.dump {
        dump(&mut memory, &samples, path)?;
    }
    let report = build_report(&ks, &per_question, &mut latencies_ms, stages.as_str());
    args.output.emit(&report, || print_report(&ks, &report))?;
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

/// `--cv`: every weight choice on every question, then per conversation the choice that scores best on the others.
fn cross_validate(
    args: &LocomoArgs,
    memory: &mut Memory,
    samples: &[Sample],
    ks: &[usize],
    k_max: usize,
    stages: Stages,
    bars: &Bars,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(samples.len() >= 2, "--cv needs at least two conversations");
    for sample in samples {
        memory.put_many(&turns_as_engrams(sample)?, &sample.sample_id, 0)?;
    }
    memory.flush()?;
    let defaults = Fusion::default();
    let choices: Vec<Fusion> = (0..16u8)
        .map(|bits| Fusion {
            context: if bits & 1 != 0 { defaults.context } else { 0.0 },
            author: if bits & 2 != 0 { defaults.author } else { 0.0 },
            source: if bits & 4 != 0 { defaults.source } else { 0.0 },
            time: if bits & 8 != 0 { defaults.time } else { 0.0 },
            ..defaults
        })
        .collect();
    let n_questions: usize = samples.iter().map(|s| s.qa.len()).sum();
    // scores[choice][sample] = the questions of that sample under that choice.
    let mut scores: Vec<Vec<Vec<QuestionScore>>> = Vec::new();
    let mut latencies_ms = Vec::new();
    for (n, fusion) in choices.iter().enumerate() {
        memory.set_fusion(*fusion);
        let mut per_sample = Vec::new();
        for sample in samples {
            let mut questions = Vec::new();
            for qa in &sample.qa {
                let done = (n * n_questions + per_sample.iter().map(Vec::len).sum::<usize>() + questions.len()) as u64;
                bars.update("LoCoMo cross-validation", done, (choices.len() * n_questions) as u64);
                let started = Instant::now();
                let recall =
                    memory.recall(&RecallRequest::in_project(&qa.question, &sample.sample_id, k_max).stages(stages))?;
                latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
                questions.push(question_score(qa, &recall, &sample.sample_id, ks));
            }
            per_sample.push(questions);
        }
        scores.push(per_sample);
    }
    bars.clear();
    let at10 = ks.iter().position(|&k| k == 10).unwrap_or(0);
    let mean_at10 = |choice: usize, samples_in: &mut dyn Iterator<Item = usize>| {
        let (sum, count) = samples_in
            .flat_map(|s| scores[choice][s].iter())
            .fold((0.0, 0usize), |(sum, count), q| (sum + q.1[at10], count + 1));
        if count == 0 { 0.0 } else { sum / count as f64 }
    };
    let mut tested = Vec::new();
    let mut folds = Vec::new();
    for held in 0..samples.len() {
        let best = (0..choices.len())
            .max_by(|&a, &b| {
                let score = |c| mean_at10(c, &mut (0..samples.len()).filter(|&s| s != held));
                score(a).total_cmp(&score(b)).then(b.cmp(&a))
            })
            .unwrap_or(0);
        let chosen = choices[best];
        folds.push(json!({
            "held_out": samples[held].sample_id,
            "chosen": {"context": round3(chosen.context), "author": round3(chosen.author), "source": round3(chosen.source),
                "time": round3(chosen.time)},
            "recall@10": (mean_at10(best, &mut std::iter::once(held)) * 1000.0).round() / 10.0,
        }));
        tested.extend(scores[best][held].iter().cloned());
    }
    let mut report = build_report(ks, &tested, &mut latencies_ms, stages.as_str());
    report["cv_folds"] = json!(folds);
    args.output.emit(&report, || {
        print_report(ks, &report);
        for fold in &folds {
            outln!(
                "fold {}: context {}, writer {}, source {}, time {} chosen on the others; recall@10 {}",
                fold["held_out"].as_str().unwrap_or(""),
                fold["chosen"]["context"],
                fold["chosen"]["author"],
                fold["chosen"]["source"],
                fold["chosen"]["time"],
                fold["recall@10"]
            );
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A weight as a short decimal (0.3, not the f32's 0.30000001192092896).
fn round3(weight: f32) -> f64 {
    (f64::from(weight) * 1000.0).round() / 1000.0
}

/// One question's category, recall and strict recall at each k, from a recall's hits.
fn question_score(qa: &Qa, recall: &less_runtime::memory::Recall, sample_id: &str, ks: &[usize]) -> QuestionScore {
    let retrieved: Vec<String> =
        recall.hits.iter().filter_map(|h| h.stored.engram.pointers.first().map(|p| dia_id_of(p, sample_id))).collect();
    let (recalls, stricts) = ks.iter().map(|&k| score(&qa.evidence, &retrieved[..k.min(retrieved.len())])).unzip();
    (qa.category, recalls, stricts)
}

/// The analysis dump of `--dump`: turns with vectors, questions with vectors and stage-1 candidates.
fn dump(memory: &mut Memory, samples: &[Sample], path: &Path) -> anyhow::Result<()> {
    let embedder = less_runtime::memory::shared_embedder().map_err(|e| anyhow::anyhow!(e))?;
    let mut out = Vec::new();
    for sample in samples {
        let engrams = turns_as_engrams(sample)?;
        let texts: Vec<&str> = engrams.iter().map(|e| e.claim.as_str()).collect();
        let vectors = embedder.embed(&texts)?;
        let turns: Vec<Value> = engrams
            .iter()
            .zip(&vectors)
            .map(|(e, v)| {
                json!({"dia_id": dia_id_of(&e.pointers[0], &sample.sample_id), "claim": e.claim,
                    "tags": e.tags, "vector": v})
            })
            .collect();
        let mut questions = Vec::new();
        for qa in &sample.qa {
            let recall = memory
                .recall(&RecallRequest::in_project(&qa.question, &sample.sample_id, 1000).stages(Stages::Hash))?;
            let stage1: Vec<Value> = recall
                .hits
                .iter()
                .filter_map(|h| {
                    let p = h.stored.engram.pointers.first()?;
                    Some(json!([dia_id_of(p, &sample.sample_id), h.hash_score]))
                })
                .collect();
            questions.push(json!({"question": qa.question, "category": qa.category, "evidence": qa.evidence,
                "vector": embedder.embed_one(&qa.question)?, "stage1": stage1}));
        }
        out.push(json!({"sample_id": sample.sample_id, "turns": turns, "questions": questions}));
    }
    std::fs::write(path, serde_json::to_vec(&out)?)?;
    Ok(())
}

/// Recall and strict recall of one question against the retrieved dia_ids.
fn score(evidence: &[String], retrieved: &[String]) -> (f64, f64) {
    if evidence.is_empty() {
        return (1.0, 1.0);
    }
    let found = evidence.iter().filter(|e| retrieved.contains(e)).count();
    (found as f64 / evidence.len() as f64, if found == evidence.len() { 1.0 } else { 0.0 })
}

fn build_report(
    ks: &[usize],
    per_question: &[(u32, Vec<f64>, Vec<f64>)],
    latencies: &mut [f64],
    stages: &str,
) -> Value {
    let mean = |values: Vec<f64>| {
        if values.is_empty() { 0.0 } else { 100.0 * values.iter().sum::<f64>() / values.len() as f64 }
    };
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let table = |select: &dyn Fn(&QuestionScore) -> bool, strict: bool| {
        let mut out = serde_json::Map::new();
        for (idx, k) in ks.iter().enumerate() {
            let values: Vec<f64> =
                per_question.iter().filter(|q| select(q)).map(|q| if strict { q.2[idx] } else { q.1[idx] }).collect();
            out.insert(format!("recall@{k}"), json!(round(mean(values))));
        }
        Value::Object(out)
    };
    let mut by_category = BTreeMap::new();
    for category in 1..=5u32 {
        let n = per_question.iter().filter(|q| q.0 == category).count();
        if n > 0 {
            let mut t = table(&|q| q.0 == category, false);
            t["questions"] = json!(n);
            by_category.insert(category.to_string(), t);
        }
    }
    latencies.sort_by(f64::total_cmp);
    let pick = |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    json!({
        "questions": per_question.len(),
        "stages": stages,
        "overall": table(&|_| true, false),
        "by_category": by_category,
        "strict": table(&|_| true, true),
        "latency_ms": {"p50": (pick(0.5) * 1000.0).round() / 1000.0, "p95": (pick(0.95) * 1000.0).round() / 1000.0},
    })
}

fn print_report(ks: &[usize], report: &Value) {
    outln!(
        "LoCoMo evidence recall ({} questions, stages: {})",
        report["questions"],
        report["stages"].as_str().unwrap_or("")
    );
    let header: Vec<String> = ks.iter().map(|k| format!("{:>9}", format!("@{k}"))).collect();
    outln!("{:<12}{}", "", header.join(""));
    let row = |name: &str, t: &Value| {
        let cells: Vec<String> =
            ks.iter().map(|k| format!("{:>9.1}", t[format!("recall@{k}")].as_f64().unwrap_or(0.0))).collect();
        outln!("{name:<12}{}", cells.join(""));
    };
    row("overall", &report["overall"]);
    row("strict", &report["strict"]);
    for (category, t) in report["by_category"].as_object().into_iter().flatten() {
        row(&format!("category {category}"), t);
    }
    outln!("query latency p50 {} ms, p95 {} ms", report["latency_ms"]["p50"], report["latency_ms"]["p95"]);
}

/// Every turn of every session, as an engram citing `sam:<sample_id>:<dia_id>`.
fn turns_as_engrams(sample: &Sample) -> anyhow::Result<Vec<Valid<Engram>>> {
    let mut engrams = Vec::new();
    for n_session in 1.. {
        let Some(turns) = sample.conversation.get(&format!("session_{n_session}")) else { break };
        let date =
            sample.conversation.get(&format!("session_{n_session}_date_time")).and_then(Value::as_str).unwrap_or("");
        let turns: Vec<Turn> = serde_json::from_value(turns.clone()).context("a session is not a list of turns")?;
        for turn in turns {
            let mut claim = format!("{}: {}", turn.speaker, turn.text);
            if let Some(caption) = &turn.blip_caption {
                claim.push_str(&format!(" [shares a photo: {caption}]"));
            }
            let claim: String = claim.chars().take(500).collect();
            let pointer = Pointer::parse(&format!("sam:{}:{}", sample.sample_id, turn.dia_id))
                .map_err(|v| anyhow::anyhow!("turn {}: {v}", turn.dia_id))?;
            let mut builder = Engram::builder(EngramKind::Fact, claim, turn.speaker.clone())
                .pointer(pointer)
                .confidence(1.0)
                .ttl(Ttl::days(3650))
                .scope(Scope::Project)
                .source(Source::Sam)
                .created_at("2026-01-01T00:00:00Z");
            if !date.is_empty() {
                builder = builder.tag(date.chars().take(40).collect::<String>());
            }
            engrams.push(builder.build().map_err(|v| anyhow::anyhow!("turn {}: {v}", turn.dia_id))?);
        }
    }
    Ok(engrams)
}

fn dia_id_of(pointer: &Pointer, sample_id: &str) -> String {
    pointer.location().strip_prefix(&format!("{sample_id}:")).unwrap_or(pointer.location()).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_the_fraction_of_evidence_found_and_strict_needs_all() {
        let ev = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
        assert_eq!(score(&ev(&["D1:3", "D2:4"]), &ev(&["D2:4", "D9:9"])), (0.5, 0.0));
        assert_eq!(score(&ev(&["D1:3"]), &ev(&["D1:3"])), (1.0, 1.0));
        assert_eq!(score(&[], &ev(&["D1:3"])), (1.0, 1.0), "no evidence counts 1");
        assert_eq!(score(&ev(&["D8:6; D9:17"]), &ev(&["D8:6", "D9:17"])), (0.0, 0.0), "evidence strings match exactly");
    }
}
