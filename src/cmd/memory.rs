//! `lessrt memory put|query|get|stats|reindex`: the durable engram store and its recall from the command line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use less_runtime::memory::{Memory, PutOutcome, keys};
use less_runtime::{Engram, Valid};
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
        /// How many engrams.
        #[arg(long, default_value_t = 5)]
        k: usize,
        /// Only engrams of this kind.
        #[arg(long)]
        kind: Option<String>,
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
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Put { file, common } => put(file, common),
        Command::Query { text, k, kind, common } => {
            let recall = open(common)?.query(text, &common.project, kind.as_deref(), *k)?;
            if common.json {
                let hits: Vec<Value> = recall
                    .hits
                    .iter()
                    .map(|h| {
                        json!({"id": h.stored.engram.id, "score": h.score, "hash_score": h.hash_score,
                            "cosine": h.cosine, "engram": h.stored.engram})
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
                    println!("{}\t{:.3}\t{}\t{}", e.id, hit.score, e.kind.as_str(), e.claim.replace(['\t', '\n'], " "));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Reindex { common } => {
            let n = open(common)?.reindex()?;
            println!("reindexed {n} hot engrams");
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { id, common } => {
            let store = open(common)?;
            let Some(stored) = store.get(&common.project, id)? else {
                eprintln!("lessrt: no engram {id:?} in project {:?}", common.project);
                return Ok(ExitCode::from(1));
            };
            let report = json!({
                "engram": stored.engram,
                "project": stored.project,
                "tier": format!("{:?}", stored.tier).to_lowercase(),
                "cold_reason": stored.cold_reason,
                "stored_at": stored.stored_at,
                "expires_at": stored.expires_at,
                "superseded_by": stored.superseded_by,
                "supersedes": stored.supersedes,
            });
            println!("{}", if common.json { report.to_string() } else { serde_json::to_string_pretty(&report)? });
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { common } => {
            let stats = open(common)?.stats()?;
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
    }
}

fn open(common: &Common) -> anyhow::Result<Memory> {
    Memory::open(&common.store).with_context(|| format!("cannot open the store in {}", common.store.display()))
}

/// Stores every valid engram of the input; reports each one as soon as it is durable. Exit 1 if any was invalid (the
/// valid ones are stored), 2 if the input is not JSON.
///
/// Standard input is read as a stream: each line that is a whole JSON engram is stored and acknowledged before the
/// next line is read, so a writer can rely on every acknowledged line even if the process is killed right after.
fn put(file: &std::path::Path, common: &Common) -> anyhow::Result<ExitCode> {
    let mut store = open(common)?;
    let mut put = Putter { store: &mut store, common, file, n_invalid: 0, n_seen: 0, results: Vec::new() };
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
        println!("{}", json!({"results": put.results, "invalid": put.n_invalid}));
    }
    Ok(if put.n_invalid > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

struct Putter<'a> {
    store: &'a mut Memory,
    common: &'a Common,
    file: &'a std::path::Path,
    n_invalid: usize,
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
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let outcome = self.store.put(&engram, &self.common.project, now)?;
        let status = match &outcome {
            PutOutcome::Stored { .. } => "stored",
            PutOutcome::Duplicate { .. } => "duplicate",
            PutOutcome::Revived { .. } => "revived",
        };
        if self.common.json {
            self.results.push(json!({"status": status, "id": outcome.id()}));
        } else {
            // The acknowledgement: printed and flushed only after the commit.
            println!("{status}\t{}", outcome.id());
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
