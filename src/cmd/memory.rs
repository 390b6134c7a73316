//! `lessrt memory put|query|get|stats|reindex|promote|evict`: the durable engram store and its recall from the
//! command line.
//!
//! The command line is an operator of the store: it stands above every agent (it may promote anyone's engram, above
//! the confidence floor, and is not rate-limited), acts in one project (`--project`, or the store's only one) and
//! run (`--run`, default none). Writes are recorded as made by `--as` (default `operator`). `--role` reads as that
//! role would (engrams tagged for other roles are left out). Refusals print their stable code and what to do
//! instead, and exit 2.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use less_runtime::memory::{MAX_K, Memory, MemoryError, Principal, PutOutcome, QueryOptions, Stored, Tier};
use less_runtime::{Engram, ErrorCode, Progress, Scope, Valid};
use serde_json::{Value, json};

use super::args::{OutputArgs, ProjectArgs, Stop, StoreArgs, count, rfc3339};
use crate::Ctx;
use crate::progress::Bars;

/// Sub-commands of `lessrt memory`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Store engrams: one JSON engram, a JSON array of them, or JSONL (`-` reads standard input).
    Put {
        /// The file, or `-`.
        file: PathBuf,
        #[command(flatten)]
        place: Place,
        #[command(flatten)]
        writer: Writer,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Recall the engrams that best match a question (stage 1: shared hash keys, BM25; stage 2: the embedding
    /// model's cosine, fused; `lessrt doctor` says whether the model is installed). Exit 1 when nothing matches.
    Query {
        /// The question (pointers in text form match the engrams citing them).
        text: String,
        /// How many engrams (1 to 1000).
        #[arg(long, default_value_t = 5, value_parser = parse_k)]
        k: usize,
        /// Only engrams of this kind.
        #[arg(long)]
        kind: Option<String>,
        /// Only engrams of this scope (run, project, org, global).
        #[arg(long, value_parser = parse_scope)]
        scope: Option<Scope>,
        /// Read as this role: engrams tagged for other roles (`role:<r>`) are left out.
        #[arg(long)]
        role: Option<String>,
        /// Cold engrams (expired, evicted, superseded) too.
        #[arg(long)]
        cold: bool,
        #[command(flatten)]
        place: Place,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Rebuild the recall indexes from the store (embedding engrams that have no vector yet).
    Reindex {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print one engram by id (hot or cold), with where it is in the store. Exit 1 if no project has it.
    Get {
        /// The engram id.
        id: String,
        #[command(flatten)]
        place: Place,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Count the engrams by tier and kind, and list the projects.
    Stats {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Widen an engram's scope (to org or global only at or above the confidence floor).
    Promote {
        /// The engram id.
        id: String,
        /// The scope it widens to: project, org or global.
        #[arg(long, value_parser = parse_scope)]
        to: Scope,
        #[command(flatten)]
        place: Place,
        #[command(flatten)]
        writer: Writer,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Archive a chat transcript (a JSON array or JSONL of `{role, content, name?, at?}`) as one session of the
    /// lossless memory; `lessrt dag build` summarizes it.
    Ingest(super::dag::IngestArgs),
    /// Move an engram to the cold tier (out of normal recall; still readable by id and by `query --cold`). Exit 1
    /// if it was not hot.
    Evict {
        /// The engram id.
        id: String,
        #[command(flatten)]
        place: Place,
        #[command(flatten)]
        writer: Writer,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// Where a memory command acts: the store, the project and the run.
#[derive(Debug, clap::Args)]
pub(crate) struct Place {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    project: ProjectArgs,
    /// The run (run-scoped engrams are seen only in their run; default: outside any run).
    #[arg(long, value_name = "RUN", default_value = "")]
    run: String,
}

/// Who a write is recorded as.
#[derive(Debug, clap::Args)]
pub(crate) struct Writer {
    /// Record the change as made by NAME (the store's `written_by` or `promoted_by`, and the rate limit's writer).
    /// The command line acts with an operator's rights whatever the name.
    #[arg(long = "as", value_name = "NAME", default_value = "operator")]
    agent: String,
}

/// The operator acting as `agent` in `project` and `run`, reading as `role`.
fn principal(agent: &str, project: &str, run: &str, role: Option<&str>) -> Principal {
    let mut who = Principal::operator(agent, &[project]);
    who.run = run.to_owned();
    who.role = role.map(str::to_owned);
    who
}

/// `--k`: a count between 1 and [`MAX_K`]; anything else (however large) is refused before any work.
fn parse_k(text: &str) -> Result<usize, String> {
    match text.trim().parse::<u128>().ok().and_then(|k| usize::try_from(k).ok()) {
        Some(k) if (1..=MAX_K).contains(&k) => Ok(k),
        _ => Err(format!("{}: --k takes a count between 1 and {MAX_K}", ErrorCode::ArgumentInvalid)),
    }
}

fn parse_scope(text: &str) -> Result<Scope, String> {
    match text {
        "run" => Ok(Scope::Run),
        "project" => Ok(Scope::Project),
        "org" => Ok(Scope::Org),
        "global" => Ok(Scope::Global),
        other => Err(format!("unknown scope {other:?}; expected run, project, org or global")),
    }
}

/// Prints a refusal (stable code, message, what to do instead) and exits 2; other failures go up as errors.
/// `owners`: the projects that hold the engram, said to the operator so the refusal points somewhere.
fn refusal(err: MemoryError, output: &OutputArgs, owners: &[String]) -> anyhow::Result<ExitCode> {
    let MemoryError::Refused(violation) = err else { return Err(err.into()) };
    let mut message = violation.message.clone();
    if !owners.is_empty() {
        let names: Vec<String> = owners.iter().map(|p| format!("{p:?}")).collect();
        message.push_str(&format!(" (it is in project {}: pass --project to read it there)", names.join(", ")));
    }
    eprintln!("lessrt: {}: {message}", violation.code);
    eprintln!("lessrt: instead: {}", violation.code.instruction());
    let doc = json!({"error": {"code": violation.code, "message": message, "instruction": violation.code.instruction(),
                               "projects": owners}});
    if output.json() {
        super::print_json(&doc);
    }
    output.write_file(&doc)?;
    Ok(ExitCode::from(2))
}

fn tier(stored: &Stored) -> &'static str {
    if stored.tier == Tier::Hot { "hot" } else { "cold" }
}

fn stored_json(stored: &Stored) -> Value {
    json!({
        "engram": stored.engram,
        "project": stored.project,
        "run": stored.run,
        "tier": tier(stored),
        "cold_reason": stored.cold_reason,
        "stored_at": stored.stored_at,
        "stored_at_utc": rfc3339(stored.stored_at),
        "expires_at": stored.expires_at,
        "expires_at_utc": rfc3339(stored.expires_at),
        "superseded_by": stored.superseded_by,
        "supersedes": stored.supersedes,
        "written_by": stored.written_by,
        "promoted_by": stored.promoted_by,
    })
}

/// An engram for people: one field per line, times in RFC 3339 UTC.
fn print_stored(stored: &Stored) {
    let e = &stored.engram;
    let field = |name: &str, value: &str| outln!("{name:<13} {value}");
    field("id", &e.id);
    field("kind", e.kind.as_str());
    field("claim", &e.claim);
    for p in &e.pointers {
        field("pointer", &p.to_string());
    }
    field("confidence", &e.confidence.to_string());
    field("scope", e.scope.as_str());
    if let Some(tags) = e.tags.as_ref().filter(|t| !t.is_empty()) {
        field("tags", &tags.join(" "));
    }
    field("project", &format!("{:?}", stored.project));
    if !stored.run.is_empty() {
        field("run", &stored.run);
    }
    let cold = stored.cold_reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
    field("tier", &format!("{}{cold}", tier(stored)));
    field("created", &format!("{} by {}", e.provenance.created_at, e.provenance.created_by));
    field("stored", &format!("{} by {}", rfc3339(stored.stored_at), stored.written_by));
    field("expires", &format!("{} (ttl {})", rfc3339(stored.expires_at), e.ttl));
    if let Some(by) = &stored.promoted_by {
        field("promoted by", by);
    }
    if let Some(old) = &stored.supersedes {
        field("supersedes", old);
    }
    if let Some(new) = &stored.superseded_by {
        field("superseded by", new);
    }
}

/// Opens the store for a command that reads: it must exist.
fn open_existing(place: &Place) -> anyhow::Result<Memory> {
    let dir = place.store.existing()?;
    Memory::open(dir).with_context(|| format!("cannot open the store in {}", dir.display()))
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Before a command that writes: engrams whose TTL ran out move to the cold tier (queries and stats leave them out
/// without writing).
fn sweep(memory: &mut Memory) -> anyhow::Result<()> {
    memory.evict_expired(now()).context("cannot move expired engrams to the cold tier")?;
    Ok(())
}

/// The project a read acts in; `None` when the store holds no engram at all.
fn read_project(memory: &Memory, place: &Place, ctx: Ctx) -> anyhow::Result<Option<String>> {
    Ok(place.project.resolve(&memory.projects()?, "store", ctx.quiet)?)
}

pub(crate) fn run(command: &Command, ctx: Ctx) -> anyhow::Result<ExitCode> {
    match command {
        Command::Put { file, place, writer, output } => put(file, place, writer, output, ctx),
        Command::Query { text, k, kind, scope, role, cold, place, output } => {
            let mut memory = open_existing(place)?;
            // A reranked query first embeds what was stored since the last one.
            let bars = Bars::new(ctx.quiet);
            memory.on_embed_progress(bars.embedding());
            let Some(project) = read_project(&memory, place, ctx)? else {
                return Err(Stop::no(format!("the store in {} holds no engrams", place.store.store.display())).into());
            };
            let options = QueryOptions {
                k: *k,
                kind: kind.clone(),
                scope: *scope,
                project: None,
                include_cold: *cold,
                now: Some(now()),
            };
            let who = principal("operator", &project, &place.run, role.as_deref());
            let recall = match memory.query_as(&who, text, &options) {
                Ok(recall) => recall,
                Err(err) => return refusal(err, output, &[]),
            };
            bars.clear();
            let hits: Vec<Value> = recall
                .hits
                .iter()
                .map(|h| {
                    json!({
                        "id": h.stored.engram.id,
                        "score": h.score,
                        "hash_score": h.hash_score,
                        "cosine": h.cosine,
                        "tier": tier(&h.stored),
                        "project": h.stored.project,
                        "engram": h.stored.engram,
                    })
                })
                .collect();
            let doc = json!({"project": project, "stages": recall.stages, "degraded": recall.degraded, "hits": hits});
            output.emit(&doc, || {
                // Say which stages ran: a recall without the rerank is never passed off as a full one.
                if !ctx.quiet {
                    match &recall.degraded {
                        Some(why) => eprintln!("lessrt: stages: {} ({why})", recall.stages.join("+")),
                        None => eprintln!("lessrt: stages: {}", recall.stages.join("+")),
                    }
                }
                for hit in &recall.hits {
                    let e = &hit.stored.engram;
                    let cold = if hit.stored.tier == Tier::Cold { "\tcold" } else { "" };
                    outln!(
                        "{}\t{:.3}\t{}\t{}{cold}",
                        e.id,
                        hit.score,
                        e.kind.as_str(),
                        e.claim.replace(['\t', '\n'], " ")
                    );
                }
            })?;
            if recall.hits.is_empty() {
                if !ctx.quiet {
                    eprintln!("lessrt: nothing in project {project:?} matches");
                }
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ingest(args) => super::dag::ingest(args, ctx),
        Command::Reindex { store, output } => {
            let dir = store.existing()?;
            let bars = Bars::new(ctx.quiet);
            bars.update("rebuilding the recall indexes", 0, 0);
            let mut memory =
                Memory::open(dir).with_context(|| format!("cannot open the store in {}", dir.display()))?;
            memory.on_embed_progress(bars.embedding());
            sweep(&mut memory)?;
            let n = memory.reindex()?;
            memory.close()?;
            bars.clear();
            output.emit(&json!({"reindexed": n}), || outln!("reindexed {}", count(n as u64, "hot engram")))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { id, place, output } => {
            let memory = open_existing(place)?;
            let project = read_project(&memory, place, ctx)?.unwrap_or_default();
            let stored = match memory.get_as(&principal("operator", &project, &place.run, None), id) {
                Ok(Some(stored)) => stored,
                Ok(None) => {
                    return Err(Stop::no(format!(
                        "no engram {id:?} in this store; `lessrt memory query` finds engrams by content"
                    ))
                    .into());
                }
                Err(err) => return refusal(err, output, &memory.owners(id)?),
            };
            output.emit(&stored_json(&stored), || print_stored(&stored))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { store, output } => {
            let dir = store.existing()?;
            let memory = Memory::open(dir).with_context(|| format!("cannot open the store in {}", dir.display()))?;
            let stats = memory.stats_at(now())?;
            let projects = memory.projects()?;
            let mut doc = serde_json::to_value(&stats)?;
            doc["projects"] = json!(projects);
            output.emit(&doc, || {
                outln!("hot\t{}\ncold\t{}", stats.hot, stats.cold);
                for (kind, n) in &stats.hot_by_kind {
                    outln!("hot.{kind}\t{n}");
                }
                for project in &projects {
                    outln!("project\t{project:?}");
                }
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Promote { id, to, place, writer, output } => {
            let mut memory = open_existing(place)?;
            sweep(&mut memory)?;
            let project = read_project(&memory, place, ctx)?.unwrap_or_default();
            match memory.promote(&principal(&writer.agent, &project, &place.run, None), id, *to) {
                Ok(Some(stored)) => {
                    output.emit(&stored_json(&stored), || outln!("{id}\t{}", stored.engram.scope.as_str()))?;
                    Ok(ExitCode::SUCCESS)
                }
                Ok(None) => Err(Stop::no(format!(
                    "no engram {id:?} in this store; `lessrt memory query` finds engrams by content"
                ))
                .into()),
                Err(err) => {
                    let owners = memory.owners(id)?;
                    refusal(err, output, &owners)
                }
            }
        }
        Command::Evict { id, place, writer, output } => {
            let mut memory = open_existing(place)?;
            sweep(&mut memory)?;
            let project = read_project(&memory, place, ctx)?.unwrap_or_default();
            match memory.evict_as(&principal(&writer.agent, &project, &place.run, None), id) {
                Ok(moved) => {
                    let status = if moved { "evicted" } else { "not hot" };
                    output.emit(&json!({"id": id, "evicted": moved}), || outln!("{id}\t{status}"))?;
                    Ok(if moved { ExitCode::SUCCESS } else { ExitCode::from(1) })
                }
                Err(err) => {
                    let owners = memory.owners(id)?;
                    refusal(err, output, &owners)
                }
            }
        }
    }
}

/// Stores every valid engram of the input; reports each one as soon as it is durable. Exit 1 if any was invalid (the
/// valid ones are stored), 2 if the input is not JSON or an engram was refused (scope).
///
/// Standard input is read as a stream: each line that is a whole JSON engram is stored and acknowledged before the
/// next line is read, so a writer can rely on every acknowledged line even if the process is killed right after.
fn put(
    file: &std::path::Path,
    place: &Place,
    writer: &Writer,
    output: &OutputArgs,
    ctx: Ctx,
) -> anyhow::Result<ExitCode> {
    let dir = &place.store.store;
    let mut store = Memory::open(dir).with_context(|| format!("cannot open the store in {}", dir.display()))?;
    sweep(&mut store)?;
    let project = place.project.for_write(&store.projects()?, "store", ctx.quiet)?;
    let who = principal(&writer.agent, &project, &place.run, None);
    let json_out = output.json();
    let mut put = Putter {
        store: &mut store,
        who,
        project,
        json_out,
        file,
        n_invalid: 0,
        n_refused: 0,
        n_seen: 0,
        results: Vec::new(),
    };
    if file == std::path::Path::new("-") {
        use std::io::BufRead;
        let mut pending = String::new();
        for line in std::io::stdin().lock().lines() {
            let line = line.with_context(|| crate::cmd::unreadable("standard input"))?;
            if pending.is_empty() {
                if line.trim().is_empty() {
                    continue;
                }
                if let Ok(doc) = less_runtime::parse_strict(&line) {
                    put.document(doc)?;
                    continue;
                }
            }
            // Not a line of JSONL: a pretty-printed document, parsed whole at the end.
            pending.push_str(&line);
            pending.push('\n');
        }
        if !pending.is_empty() && !put.text(&pending)? {
            return Ok(ExitCode::from(2));
        }
    } else {
        let text = super::read_input(file)?;
        if !put.text(&text)? {
            return Ok(ExitCode::from(2));
        }
    }
    if put.n_seen == 0 {
        // Nothing to acknowledge is not success: an empty pipe usually means the producer failed.
        let from =
            if file == std::path::Path::new("-") { "standard input".to_owned() } else { file.display().to_string() };
        return Err(Stop::usage(format!(
            "LESS_JSON_MALFORMED: no engram in {from}: send one JSON engram, a JSON array of them, or one per line"
        ))
        .into());
    }
    let doc =
        json!({"project": put.project, "results": put.results, "invalid": put.n_invalid, "refused": put.n_refused});
    if json_out {
        super::print_json(&doc);
    }
    output.write_file(&doc)?;
    let code = if put.n_refused > 0 {
        ExitCode::from(2)
    } else if put.n_invalid > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    // Every acknowledged put is in the store already; closing saves the recall indexes beside it.
    store.close().context("recall indexes not saved (rebuilt from the store on the next open)")?;
    Ok(code)
}

struct Putter<'a> {
    store: &'a mut Memory,
    /// The operator, as `--as` names it, in the project and run.
    who: Principal,
    project: String,
    /// Results go to one JSON document at the end rather than one acknowledgement per line.
    json_out: bool,
    file: &'a std::path::Path,
    n_invalid: usize,
    /// Engrams refused by the access rules (exit 2, like any denial).
    n_refused: usize,
    n_seen: usize,
    results: Vec<Value>,
}

impl Putter<'_> {
    /// A whole text: one engram, an array of engrams, or JSONL. False when it is not JSON.
    fn text(&mut self, text: &str) -> anyhow::Result<bool> {
        match less_runtime::parse_strict(text) {
            Ok(Value::Array(items)) => {
                for doc in items {
                    self.document(doc)?;
                }
            }
            Ok(single) => self.document(single)?,
            Err(_) => {
                let mut docs = Vec::new();
                for (idx, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                    match less_runtime::parse_strict(line) {
                        Ok(doc) => docs.push(doc),
                        Err(err) => {
                            let at = self.file.display();
                            eprintln!("lessrt: {at} line {}: not valid JSON: {err} (LESS_JSON_MALFORMED)", idx + 1);
                            return Ok(false);
                        }
                    }
                }
                for doc in docs {
                    self.document(doc)?;
                }
            }
        }
        Ok(true)
    }

    /// Reports engram `idx` as invalid or refused: a `validate`-style line, or a result of the JSON document.
    fn problem(&mut self, status: &str, idx: usize, v: &less_runtime::Violation) {
        if self.json_out {
            self.results.push(json!({"status": status, "index": idx, "code": v.code, "path": v.path,
                                     "message": v.message}));
        } else {
            outln!("{}\t{}\t/{idx}{}\t{}", v.code, self.file.display(), v.path, v.message);
        }
    }

    fn document(&mut self, doc: Value) -> anyhow::Result<()> {
        use std::io::Write;
        let idx = self.n_seen;
        self.n_seen += 1;
        let engram = match Valid::<Engram>::from_value(&doc) {
            Ok(engram) => engram,
            Err(violations) => {
                self.n_invalid += 1;
                for v in &violations.0 {
                    self.problem("invalid", idx, v);
                }
                return Ok(());
            }
        };
        let report = match self.store.put_as(&self.who, &engram, &self.project, now()) {
            Ok(report) => report,
            Err(MemoryError::Refused(v)) => {
                // A refused engram is reported like an invalid one: the others are still stored.
                self.n_refused += 1;
                self.problem("refused", idx, &v);
                eprintln!("lessrt: instead: {}", v.code.instruction());
                return Ok(());
            }
            Err(err) => return Err(err.into()),
        };
        let outcome = report.outcome;
        let status = match &outcome {
            PutOutcome::Stored { .. } => "stored",
            PutOutcome::Duplicate { .. } => "duplicate",
            PutOutcome::Revived { .. } => "revived",
        };
        self.results.push(json!({
            "status": status,
            "id": outcome.id(),
            "superseded": report.superseded,
            "contradictions": report.contradictions,
        }));
        if !self.json_out {
            // The acknowledgement: printed and flushed only after the commit.
            outln!("{status}\t{}", outcome.id());
            for old in &report.superseded {
                outln!("superseded\t{old}");
            }
            for risk in &report.contradictions {
                outln!("contradiction\t{risk}");
            }
            std::io::stdout().flush().context("cannot write the acknowledgement")?;
        }
        Ok(())
    }
}
