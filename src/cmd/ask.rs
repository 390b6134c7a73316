//! `lessrt ask "question"`: a question of any directory, answered by a default hierarchy of LLM agents that find
//! their own evidence.
//!
//! The hierarchy is written as a scenario (`ask.toml` in the run directory, so the run can be read and run again):
//! `user` (scripted) briefs `lead` with the question; the lead's model splits it for its workers (a line of what
//! matters now for each); each worker searches the workspace index with its question, its model chooses what to read
//! among the hits, reads through its gateway (a read over its budget goes to the lead as a grant request) and
//! answers citing the lines it read; the lead reads what its workers cite and answers the user. Every agent speaks
//! through its gateway like any run's. The question travels as a task without a gold answer: handed down, never
//! graded.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use less_agents::{AgentsFactory, ModelSource};
use less_runtime::run::{Event, RunOptions, RunReport, check_out_dir, run_scenario_with};
use less_runtime::workspace::SharedIndex;
use less_runtime::{Pointer, Resolver, Scenario, WireMode, toml_string};
use serde_json::{Value, json};

use super::args::{OutputArgs, Stop, count};
use crate::Ctx;

/// The longest question (a brief's task line holds it).
const MAX_QUESTION_CHARS: usize = 150;

/// Arguments of `lessrt ask`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The question (at most 150 characters).
    question: String,
    /// The directory to answer from (default: the current one). Any directory may be named; symlinks out of it are
    /// not followed.
    #[arg(long, value_name = "DIR", default_value = ".")]
    workspace: PathBuf,
    /// Workers under the lead (1 to 6).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=6))]
    workers: u64,
    /// Ask the same question in the fair baseline too (the same agents and engine; search hits pasted, no budgets)
    /// and print both.
    #[arg(long)]
    compare: bool,
    /// Where the run directories go: DIR/<name>/<mode>/ (default DIR: runs).
    #[arg(long, value_name = "DIR", default_value = "runs")]
    out: PathBuf,
    /// The OpenAI-compatible endpoint, up to the API version (default: the local server of scripts/local-llm.sh,
    /// http://127.0.0.1:8437/v1; LESSRT_LLM_BASE_URL overrides it).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model name sent with each request.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// The environment variable holding the endpoint's API key (none for a local server).
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// The most tokens per completion.
    #[arg(long, value_name = "N", default_value_t = 384)]
    max_tokens: u32,
    /// Seconds one model request may take before it is retried.
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    model_timeout: u64,
    /// Record every model exchange in this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer from a recording made with --record, without a server.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// How many of the agents' turns may run at once (default: as many as there are workers, who work at once
    /// once the lead briefed them; 1: one after the other).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    parallel: Option<u64>,
    /// With --replay: every replayed exchange takes this many milliseconds, as a hosted model's would.
    #[arg(long, value_name = "MS", requires = "replay")]
    replay_latency: Option<u64>,
    /// Where the workspace index lives (default: `index/<hash of the workspace>` in the user cache).
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

/// The scenario `lessrt ask` runs.
fn scenario_text(name: &str, question: &str, workers: usize, args: &Args) -> String {
    let q = toml_string(question);
    // The workers, briefed together, work at once: the model serves as many requests as there are workers.
    let parallel = args.parallel.unwrap_or(workers as u64);
    let mut llm = format!(
        "temperature = 0.0\nmax_tokens = {}\ntimeout_secs = {}\nparallel = {parallel}\n",
        args.max_tokens, args.model_timeout
    );
    for (key, value) in [("base_url", &args.base_url), ("model", &args.model), ("api_key_env", &args.api_key_env)] {
        if let Some(value) = value {
            llm.push_str(&format!("{key} = {}\n", toml_string(value)));
        }
    }
    let ids: Vec<String> = (1..=workers).map(|n| format!("worker-{n}")).collect();
    let mut text = format!(
        "name = {}\ndescription = {}\ntokenizer = \"o200k_base\"\nworkspace = \".\"\n\n[plan]\ngoal = {q}\ncriteria = [\"The answer cites the lines that show it.\"]\n\n",
        toml_string(name),
        toml_string(&format!("lessrt ask: {question}")),
    );
    // A worker reads the best hits of its search within its budget: five spans and 2,400 tokens (the spec's defaults,
    // three and 1,200, stop before a setting's impl below its struct); the lead reads what they cite.
    text.push_str(
        "[budgets.roles.worker]\nmax_repo_spans = 5\nmax_artifact_sections = 3\nmax_deref_tokens_total = 2400\n\n",
    );
    text.push_str("[budgets.roles.lead]\nmax_repo_spans = 6\nmax_deref_tokens_total = 2400\n\n");
    text.push_str("[[agents]]\nid = \"user\"\nrole = \"user\"\n\n");
    text.push_str(&format!(
        "[[agents]]\nid = \"lead\"\nrole = \"lead\"\nparent = \"user\"\nkind = \"llm\"\n\n[agents.llm]\n{llm}\n"
    ));
    for id in &ids {
        text.push_str(&format!(
            "[[agents]]\nid = \"{id}\"\nrole = \"worker\"\nparent = \"lead\"\nkind = \"llm\"\n\n[agents.llm]\n{llm}\n"
        ));
    }
    let all: Vec<String> = std::iter::once("q".to_owned()).chain(ids.iter().map(|id| format!("q-{id}"))).collect();
    let list = |items: &[String]| items.iter().map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(", ");
    text.push_str(&format!(
        "[[steps]]\naction = \"brief\"\nagent = \"user\"\nnow = [\"Answer the question; cite the lines that show the answer.\"]\ntasks = [{}]\n\n",
        list(&all)
    ));
    text.push_str(&format!(
        "[[steps]]\naction = \"brief\"\nagent = \"lead\"\nnow = [\"Find where the workspace answers this.\"]\ntasks = [{}]\n\n",
        list(&all[1..])
    ));
    for id in &ids {
        text.push_str(&format!(
            "[[steps]]\naction = \"report\"\nagent = \"{id}\"\ntype = \"task_result\"\ntask = \"q-{id}\"\nstatus = \"pass\"\n\n"
        ));
    }
    text.push_str("[[steps]]\naction = \"report\"\nagent = \"lead\"\nto = \"user\"\ntype = \"task_result\"\ntask = \"q\"\nstatus = \"pass\"\n\n");
    text.push_str(&format!(
        "[[tasks]]\nid = \"q\"\nkind = \"locate_rule\"\nagent = \"lead\"\nquestion = {q}\ngold = {{}}\n\n"
    ));
    for id in &ids {
        text.push_str(&format!(
            "[[tasks]]\nid = \"q-{id}\"\nkind = \"locate_rule\"\nagent = \"{id}\"\nquestion = {q}\ngold = {{}}\n\n"
        ));
    }
    text
}

/// The hosts the user named for the model on the command line (`--base-url`).
fn trusted_hosts(args: &Args) -> Vec<String> {
    args.base_url.iter().map(|url| less_agents::host_of(url)).collect()
}

/// One answer: who gave it, the claim, and each cited span with whether it resolves in the workspace.
#[derive(Debug, serde::Serialize)]
struct Answer {
    agent: String,
    claim: String,
    cites: Vec<Cite>,
}

#[derive(Debug, serde::Serialize)]
struct Cite {
    pointer: String,
    /// `path:line` (a terminal opens it), or the pointer when it names no file line.
    at: String,
    resolves: bool,
}

/// The answers delivered by `agent` in a mode's ledger.
fn answers(ledger: &[Event], agent: &str, resolver: &Resolver) -> Vec<Answer> {
    let mut out = Vec::new();
    for event in ledger {
        let Event::Delivered { from, doc, .. } = event else { continue };
        if from != agent {
            continue;
        }
        for engram in doc.engrams() {
            let cites = engram
                .pointers
                .iter()
                .map(|p| {
                    let plain =
                        Pointer::new(p.ty(), p.reference(), p.span()).map(|p| p.to_string()).unwrap_or_default();
                    Cite { at: at(p), resolves: resolver.read_unpinned(p, &()).is_ok(), pointer: plain }
                })
                .collect();
            out.push(Answer { agent: agent.to_owned(), claim: engram.claim.clone(), cites });
        }
    }
    out
}

/// `path:line` for a repo or artifact pointer with lines (`path` for a whole file), else the pointer.
fn at(pointer: &Pointer) -> String {
    match (pointer.ty(), pointer.line_range()) {
        (less_runtime::PointerType::Repo | less_runtime::PointerType::Artifact, Some((start, end))) => {
            format!("{}:{start}-{end}", pointer.location())
        }
        (less_runtime::PointerType::Repo, None) if pointer.span().is_none() => pointer.location().to_owned(),
        _ => pointer.to_string(),
    }
}

fn read_ledger(dir: &Path) -> anyhow::Result<Vec<Event>> {
    let path = dir.join(less_runtime::LEDGER_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text.lines().filter_map(|line| serde_json::from_str::<Event>(line).ok()).collect())
}

pub(crate) fn run(args: &Args, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let question = args.question.trim();
    if question.is_empty() || question.chars().count() > MAX_QUESTION_CHARS {
        return Err(Stop::usage(format!(
            "LESS_ARGUMENT_INVALID: the question is {} characters; ask in 1 to {MAX_QUESTION_CHARS}",
            question.chars().count()
        ))
        .into());
    }
    let root = args.workspace.canonicalize().map_err(|err| {
        Stop::usage(format!("LESS_POINTER_UNRESOLVED: workspace {}: {err}", args.workspace.display()))
    })?;
    if !root.is_dir() {
        return Err(
            Stop::usage(format!("LESS_POINTER_UNRESOLVED: workspace {} is not a directory", root.display())).into()
        );
    }
    let stamp = time::OffsetDateTime::now_utc();
    let name = format!(
        "ask-{:04}{:02}{:02}-{:02}{:02}{:02}",
        stamp.year(),
        u8::from(stamp.month()),
        stamp.day(),
        stamp.hour(),
        stamp.minute(),
        stamp.second()
    );
    let workers = usize::try_from(args.workers).unwrap_or(2);
    let text = scenario_text(&name, question, workers, args);
    let scenario = Scenario::from_toml(&text, &root).map_err(|v| anyhow::anyhow!("the ask scenario: {v}"))?;
    let scenario = Arc::new(scenario);
    let modes = if args.compare { vec![WireMode::Less, WireMode::Verbatim] } else { vec![WireMode::Less] };
    let base = args.out.join(&name);
    for mode in &modes {
        if let Err(v) = check_out_dir(&base.join(mode.as_str())) {
            return Err(Stop::usage(format!("{}: {}", v.code, v.message)).into());
        }
    }
    args.output.check_writable().map_err(|v| Stop::usage(format!("{}: {}", v.code, v.message)))?;
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    less_runtime::files::write_whole(&base.join("ask.toml"), text.as_bytes())
        .with_context(|| format!("cannot write {}", base.display()))?;

    // The index first, with a bar: a first build on a large directory takes seconds.
    let bars = crate::progress::Bars::new(ctx.quiet);
    let opened = match &args.index_dir {
        Some(dir) => less_runtime::workspace::WorkspaceIndex::open_in(&root, dir),
        None => less_runtime::workspace::WorkspaceIndex::open(&root),
    }
    .and_then(|mut index| index.refresh(bars.as_ref()).map(|r| (index, r)));
    bars.clear();
    let (index, refreshed) = opened.map_err(|e| Stop::usage(format!("{}: {e}", e.violation().code)))?;
    let index_dir = index.dir().to_owned();
    drop(index);
    let text_out = !args.output.json();
    if text_out && !ctx.quiet {
        eprintln!(
            "lessrt ask: {} indexed ({} re-read) in {} ms; a lead and {} at work",
            count(refreshed.files as u64, "file"),
            refreshed.indexed,
            refreshed.millis,
            count(workers as u64, "worker")
        );
    }
    let shared = SharedIndex::new(&root, Some(&index_dir));
    let source = ModelSource::from_dirs(args.record.as_deref(), args.replay.as_deref());
    let pinned = super::run::pinned_for(&source)?;
    let ordering = match &source {
        ModelSource::Live => less_runtime::run::Ordering::Causal,
        ModelSource::Record(dir) | ModelSource::Replay(dir) => {
            less_agents::record::recorded_ordering(dir).map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let resolver = Resolver::new(&root).map_err(|v| anyhow::anyhow!("{}: {}", v.code, v.message))?;
    let mut results = Vec::new();
    for mode in modes {
        let out = base.join(mode.as_str());
        let options = RunOptions {
            out_dir: Some(out.clone()),
            trace: crate::output::trace_if(text_out && !ctx.quiet),
            pinned,
            step_timeout: Some(Duration::from_secs(args.model_timeout * 4 + 60)),
            index: Some(shared.clone()),
            ordering,
            ..RunOptions::new(mode)
        };
        let factory =
            // The host named with --base-url is the user's own choice for the key.
            AgentsFactory::for_scenario_trusting(&scenario, &source, &trusted_hosts(args))
                .map_err(|err| anyhow::anyhow!("{}: {err}", err.code()))?;
        let factory = Arc::new(match args.replay_latency {
            Some(ms) => factory.paced(Duration::from_millis(ms)),
            None => factory,
        });
        super::run::write_manifest(&super::serve::manifest::Manifest::of(&scenario, None, mode), &out)?;
        if text_out && !ctx.quiet {
            outln!("{}", super::run::heading(&scenario.name, mode, &scenario.tokenizer.to_string()));
        }
        let report = runtime
            .block_on(run_scenario_with(scenario.clone(), factory, options, |_, _| {}))
            .map_err(|v| anyhow::anyhow!("{v}"))?;
        let mut json = serde_json::to_string_pretty(&report)?;
        json.push('\n');
        less_runtime::files::write_whole(&out.join(super::run::REPORT_FILE), json.as_bytes())
            .with_context(|| format!("cannot write {}", out.display()))?;
        let ledger = read_ledger(&out)?;
        let lead = answers(&ledger, "lead", &resolver);
        let mut found = Vec::new();
        for n in 1..=workers {
            found.extend(answers(&ledger, &format!("worker-{n}"), &resolver));
        }
        results.push((mode, report, lead, found, out));
    }
    let answered = results
        .first()
        .is_some_and(|(_, _, lead, found, _)| lead.iter().chain(found).any(|a| a.cites.iter().any(|c| c.resolves)));
    let doc = json!({
        "question": question,
        "workspace": root,
        "runs": results.iter().map(|(mode, report, lead, found, out)| json!({
            "mode": mode.as_str(),
            "dir": out,
            "answer": lead,
            "workers": found,
            "tokens": tokens_of(report),
        })).collect::<Vec<_>>(),
    });
    args.output.emit(&doc, || {
        for (mode, report, lead, found, out) in &results {
            outln!("\n== answer ({} mode)", mode.as_str());
            if lead.is_empty() {
                outln!("the lead gave no answer (see the trace above: an escalation says why)");
            }
            print_answers(lead);
            if !found.is_empty() {
                outln!("\nfrom the workers:");
                print_answers(found);
            }
            outln!(
                "\ntokens by role (inline: what reached each agent; deref: what it read; model: the provider's count)"
            );
            outln!("  {:<8} {:>7} {:>7} {:>9} {:>9}", "role", "inline", "deref", "prompt", "completion");
            for (role, r) in report.roles.iter().chain(std::iter::once((&"TOTAL".to_owned(), &report.totals))) {
                outln!(
                    "  {role:<8} {:>7} {:>7} {:>9} {:>9}",
                    r.inline_tokens.total,
                    r.deref_tokens,
                    r.model.prompt_tokens,
                    r.model.completion_tokens
                );
            }
            outln!("run directory: {} (`lessrt runs show {}`)", out.display(), out.display());
        }
        if let [(_, less, ..), (_, baseline, ..)] = &results[..] {
            let total = |r: &RunReport| r.totals.inline_tokens.total + r.totals.deref_tokens;
            let pct =
                |a: u64, b: u64| if b == 0 { "—".to_owned() } else { format!("{:.1}%", 100.0 * a as f64 / b as f64) };
            outln!(
                "\nLESS vs the fair baseline: inline + deref {} vs {} tokens ({}); model prompt {} vs {} ({})",
                total(less),
                total(baseline),
                pct(total(less), total(baseline)),
                less.totals.model.prompt_tokens,
                baseline.totals.model.prompt_tokens,
                pct(less.totals.model.prompt_tokens, baseline.totals.model.prompt_tokens)
            );
        }
    })?;
    Ok(if answered { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn print_answers(answers: &[Answer]) {
    for answer in answers {
        outln!("- {} ({})", answer.claim, answer.agent);
        for cite in &answer.cites {
            let note = if cite.resolves { "" } else { "  (does not resolve in the workspace)" };
            outln!("    {}{note}", cite.at);
        }
    }
}

fn tokens_of(report: &RunReport) -> Value {
    let role = |r: &less_runtime::run::RoleReport| {
        json!({
            "inline": r.inline_tokens.total,
            "deref": r.deref_tokens,
            "model_prompt": r.model.prompt_tokens,
            "model_completion": r.model.completion_tokens,
        })
    };
    let mut roles: serde_json::Map<String, Value> = report.roles.iter().map(|(k, r)| (k.clone(), role(r))).collect();
    roles.insert("TOTAL".to_owned(), role(&report.totals));
    Value::Object(roles)
}
