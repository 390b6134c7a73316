//! `lessrt memory put|query|get|stats|reindex|promote|evict`: the durable engram store and its recall from the
//! command line.
//!
//! The command line is an operator of the store: it stands above every agent (it may promote anyone's engram, above
//! the confidence floor, and is not rate-limited), acts in one project (`--project`) and run (`--run`, default none),
//! and is recorded as `--as` (default `operator`). `--role` reads as that role would (engrams tagged for other roles
//! are left out). Refusals print their stable code and what to do instead, and exit 2.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use less_runtime::memory::{MAX_K, Memory, MemoryError, Principal, PutOutcome, QueryOptions, Stored, Tier, keys};
use less_runtime::{Engram, ErrorCode, Scope, Valid};
use serde_json::{Value, json};

/// Sub-commands of `lessrt memory`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Store engrams: one JSON engram, a JSON array of them, or JSONL (`-` reads standard input).
    Put {
        /// The file, or `-`.
        file: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Recall the engrams that best match a question (stage 1: shared hash keys, BM25; stage 2: the embedding
    /// model's cosine, fused; `lessrt doctor` says whether the model is installed).
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
        common: Common,
    },
    /// Rebuild the recall index from the store.
    Reindex {
        #[command(flatten)]
        common: Common,
    },
    /// Print one engram by id (hot or cold), with where it is in the store.
    Get {
        /// The engram id.
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Count the engrams by tier and kind.
    Stats {
        #[command(flatten)]
        common: Common,
    },
    /// Widen an engram's scope (to org or global only at or above the confidence floor).
    Promote {
        /// The engram id.
        id: String,
        /// The scope it widens to: project, org or global.
        #[arg(long, value_parser = parse_scope)]
        to: Scope,
        #[command(flatten)]
        common: Common,
    },
    /// Archive a chat transcript (a JSON array or JSONL of `{role, content, name?, at?}`) as one session of the
    /// lossless memory; `lessrt dag build` summarizes it.
    Ingest(super::dag::IngestArgs),
    /// Move an engram to the cold tier (out of normal recall; still readable by id and by `query --cold`).
    Evict {
        /// The engram id.
        id: String,
        #[command(flatten)]
        common: Common,
    },
}

/// Options every memory command takes.
#[derive(Debug, clap::Args)]
pub(crate) struct Common {
    /// The store directory.
    #[arg(long, default_value = ".lessrt")]
    store: PathBuf,
    /// The project the engrams belong to (projects never see each other's engrams).
    #[arg(long, default_value = "")]
    project: String,
    /// The run (run-scoped engrams are seen only in their run; default: outside any run).
    #[arg(long, default_value = "")]
    run: String,
    /// Who is recorded as writing or promoting.
    #[arg(long = "as", default_value = "operator")]
    agent: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl Common {
    fn principal(&self, role: Option<&str>) -> Principal {
        let mut who = Principal::operator(&self.agent, &[&self.project]);
        who.run.clone_from(&self.run);
        who.role = role.map(str::to_owned);
        who
    }
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
fn refusal(err: MemoryError, json_out: bool) -> anyhow::Result<ExitCode> {
    let MemoryError::Refused(violation) = err else { return Err(err.into()) };
    eprintln!("lessrt: {}: {}", violation.code, violation.message);
    eprintln!("lessrt: instead: {}", violation.code.instruction());
    if json_out {
        println!(
            "{}",
            json!({"error": {"code": violation.code, "message": violation.message, "instruction": violation.code.instruction()}})
        );
    }
    Ok(ExitCode::from(2))
}

fn stored_json(stored: &Stored) -> Value {
    json!({
        "engram": stored.engram,
        "project": stored.project,
        "run": stored.run,
        "tier": if stored.tier == Tier::Hot { "hot" } else { "cold" },
        "cold_reason": stored.cold_reason,
        "stored_at": stored.stored_at,
        "expires_at": stored.expires_at,
        "superseded_by": stored.superseded_by,
        "supersedes": stored.supersedes,
        "written_by": stored.written_by,
        "promoted_by": stored.promoted_by,
    })
}

pub(crate) fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Put { file, common } => put(file, common),
        Command::Query { text, k, kind, scope, role, cold, common } => {
            let options = QueryOptions {
                k: *k,
                kind: kind.clone(),
                scope: *scope,
                project: None,
                include_cold: *cold,
                now: Some(now()),
            };
            let recall = match open(common)?.query_as(&common.principal(role.as_deref()), text, &options) {
                Ok(recall) => recall,
                Err(err) => return refusal(err, common.json),
            };
            if common.json {
                let hits: Vec<Value> = recall
                    .hits
                    .iter()
                    .map(|h| {
                        json!({
                            "id": h.stored.engram.id,
                            "score": h.score,
                            "hash_score": h.hash_score,
                            "cosine": h.cosine,
                            "tier": if h.stored.tier == Tier::Hot { "hot" } else { "cold" },
                            "project": h.stored.project,
                            "engram": h.stored.engram,
                        })
                    })
                    .collect();
                println!("{}", json!({"stages": recall.stages, "degraded": recall.degraded, "hits": hits}));
            } else {
                // Say which stages ran: a recall without the rerank is never passed off as a full one.
                match &recall.degraded {
                    Some(why) => eprintln!("lessrt: stages: {} ({why})", recall.stages.join("+")),
                    None => eprintln!("lessrt: stages: {}", recall.stages.join("+")),
                }
                for hit in &recall.hits {
                    let e = &hit.stored.engram;
                    let cold = if hit.stored.tier == Tier::Cold { "\tcold" } else { "" };
                    println!(
                        "{}\t{:.3}\t{}\t{}{cold}",
                        e.id,
                        hit.score,
                        e.kind.as_str(),
                        e.claim.replace(['\t', '\n'], " ")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ingest(args) => super::dag::ingest(args),
        Command::Reindex { common } => {
            let n = open_sweeping(common)?.reindex()?;
            println!("reindexed {n} hot engrams");
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { id, common } => {
            let store = open(common)?;
            let stored = match store.get_as(&common.principal(None), id) {
                Ok(Some(stored)) => stored,
                Ok(None) => {
                    eprintln!("lessrt: no engram {id:?} in this store; `lessrt memory query` finds engrams by content");
                    return Ok(ExitCode::from(1));
                }
                Err(err) => return refusal(err, common.json),
            };
            let report = stored_json(&stored);
            println!("{}", if common.json { report.to_string() } else { serde_json::to_string_pretty(&report)? });
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { common } => {
            let stats = open(common)?.stats_at(now())?;
            if common.json {
                println!("{}", serde_json::to_string(&stats)?);
            } else {
                println!("hot\t{}\ncold\t{}", stats.hot, stats.cold);
                for (kind, n) in &stats.hot_by_kind {
                    println!("hot.{kind}\t{n}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Promote { id, to, common } => {
            let mut memory = open_sweeping(common)?;
            match memory.promote(&common.principal(None), id, *to) {
                Ok(Some(stored)) => {
                    if common.json {
                        println!("{}", stored_json(&stored));
                    } else {
                        println!("{id}\t{}", stored.engram.scope.as_str());
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Ok(None) => {
                    eprintln!("lessrt: no engram {id:?} in this store; `lessrt memory query` finds engrams by content");
                    Ok(ExitCode::from(1))
                }
                Err(err) => refusal(err, common.json),
            }
        }
        Command::Evict { id, common } => {
            let mut memory = open_sweeping(common)?;
            match memory.evict_as(&common.principal(None), id) {
                Ok(moved) => {
                    let status = if moved { "evicted" } else { "not hot" };
                    if common.json {
                        println!("{}", json!({"id": id, "evicted": moved}));
                    } else {
                        println!("{id}\t{status}");
                    }
                    Ok(if moved { ExitCode::SUCCESS } else { ExitCode::from(1) })
                }
                Err(err) => refusal(err, common.json),
            }
        }
    }
}

fn open(common: &Common) -> anyhow::Result<Memory> {
    Memory::open(&common.store).with_context(|| format!("cannot open the store in {}", common.store.display()))
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Opens the store for a command that writes, first moving engrams whose TTL ran out to the cold tier (queries and
/// stats leave them out without writing).
fn open_sweeping(common: &Common) -> anyhow::Result<Memory> {
    let mut memory = open(common)?;
    memory.evict_expired(now()).context("cannot move expired engrams to the cold tier")?;
    Ok(memory)
}

/// Stores every valid engram of the input; reports each one as soon as it is durable. Exit 1 if any was invalid (the
/// valid ones are stored), 2 if the input is not JSON or an engram was refused (scope).
///
/// Standard input is read as a stream: each line that is a whole JSON engram is stored and acknowledged before the
/// next line is read, so a writer can rely on every acknowledged line even if the process is killed right after.
fn put(file: &std::path::Path, common: &Common) -> anyhow::Result<ExitCode> {
    let mut store = open_sweeping(common)?;
    let mut put =
        Putter { store: &mut store, common, file, n_invalid: 0, n_refused: 0, n_seen: 0, results: Vec::new() };
    if file == std::path::Path::new("-") {
        use std::io::BufRead;
        let mut pending = String::new();
        for line in std::io::stdin().lock().lines() {
            let line = line.context("cannot read standard input")?;
            if pending.is_empty() {
                if line.trim().is_empty() {
                    continue;
                }
                if let Ok(doc) = serde_json::from_str::<Value>(&line) {
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
    if common.json {
        println!("{}", json!({"results": put.results, "invalid": put.n_invalid, "refused": put.n_refused}));
    }
    Ok(if put.n_refused > 0 {
        ExitCode::from(2)
    } else if put.n_invalid > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

struct Putter<'a> {
    store: &'a mut Memory,
    common: &'a Common,
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
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) => {
                for doc in items {
                    self.document(doc)?;
                }
            }
            Ok(single) => self.document(single)?,
            Err(_) => {
                let mut docs = Vec::new();
                for (idx, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                    match serde_json::from_str(line) {
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

    fn document(&mut self, doc: Value) -> anyhow::Result<()> {
        use std::io::Write;
        let idx = self.n_seen;
        self.n_seen += 1;
        let engram = match Valid::<Engram>::from_value(&doc) {
            Ok(engram) => with_keys(engram),
            Err(violations) => {
                self.n_invalid += 1;
                for v in &violations.0 {
                    println!("{}\t{}\t/{idx}{}\t{}", v.code, self.file.display(), v.path, v.message);
                }
                return Ok(());
            }
        };
        let report = match self.store.put_as(&self.common.principal(None), &engram, &self.common.project, now()) {
            Ok(report) => report,
            Err(MemoryError::Refused(v)) => {
                // A refused engram is reported like an invalid one: the others are still stored.
                self.n_refused += 1;
                println!("{}\t{}\t/{idx}{}\t{}", v.code, self.file.display(), v.path, v.message);
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
        if self.common.json {
            self.results.push(json!({
                "status": status,
                "id": outcome.id(),
                "superseded": report.superseded,
                "contradictions": report.contradictions,
            }));
        } else {
            // The acknowledgement: printed and flushed only after the commit.
            println!("{status}\t{}", outcome.id());
            for old in &report.superseded {
                println!("superseded\t{old}");
            }
            for risk in &report.contradictions {
                println!("contradiction\t{risk}");
            }
            std::io::stdout().flush().context("cannot write the acknowledgement")?;
        }
        Ok(())
    }
}

/// Fills in the engram's hash keys when it has none (they are derived from its content).
fn with_keys(engram: Valid<Engram>) -> Valid<Engram> {
    if engram.hash_keys.is_some() {
        return engram;
    }
    let mut inner = engram.clone().into_inner();
    inner.hash_keys = Some(keys::stored_keys(&inner));
    // Generated keys always fit the schema (≤32 keys of 16 hex digits); keep the original if that ever changes.
    Valid::new(inner).unwrap_or(engram)
}
