//! `lessrt compact FILE`: compacts a conversation (JSON array or JSONL of `{role, content}`) with the context ledger
//! or one of the baselines, and prints the compacted messages as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use less_runtime::ErrorCode;
use less_runtime::context::{CompactConfig, Engine, compact_report};
use less_runtime::context::{LEDGER_HEADER, compact_stats, ledger_engrams, parse_transcript};
use serde_json::json;

use super::args::OutputArgs;
use crate::Ctx;

/// Arguments of `lessrt compact`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The transcript: a JSON array, or one JSON object per line, of {"role", "content"} (`-` for standard input).
    file: PathBuf,
    /// Non-system messages kept verbatim at the end.
    #[arg(long, default_value_t = 6)]
    hot_tail: usize,
    /// `ledger` (the semantic ledger), `hot-tail` (system messages and the tail only) or `truncate` (the cold
    /// history cut to --budget tokens).
    #[arg(long, default_value = "ledger", value_parser = parse_engine)]
    engine: Engine,
    /// Token budget of the cold history for `--engine truncate`.
    #[arg(long, default_value_t = 2000)]
    budget: u32,
    /// The report: {"messages": [...], "stats": {"messages_in", "messages_out", "tokens_in", "tokens_out",
    /// "hot_tail_unchanged", "note"?}, "warning"?}; without it, the compacted messages as one JSON array.
    #[command(flatten)]
    output: OutputArgs,
    /// Print the ledger's current entries as engrams instead, one JSON object per line (for `lessrt memory put -`),
    /// each citing its message as `sam:<conversation>:<N>` (also for a chat too short to compact).
    #[arg(long, conflicts_with_all = ["json", "output"])]
    engrams: bool,
    /// The conversation id of the `sam:` pointers (default: the file name without its extension).
    #[arg(long, requires = "engrams")]
    conversation: Option<String>,
}

fn parse_engine(text: &str) -> Result<Engine, String> {
    text.parse()
}

pub(crate) fn run(args: &Args, ctx: Ctx) -> anyhow::Result<ExitCode> {
    let text = match super::read_input(&args.file) {
        Ok(text) => text,
        Err(err) => return Ok(refuse(ErrorCode::InputUnreadable, &format!("{err:#}"))),
    };
    let messages = match parse_transcript(&text) {
        Ok(messages) => messages,
        Err(violation) => {
            let at = if violation.path.is_empty() { String::new() } else { format!(" at {}", violation.path) };
            return Ok(refuse(violation.code, &format!("{}{at}: {}", args.file.display(), violation.message)));
        }
    };
    let config = CompactConfig {
        hot_tail: args.hot_tail,
        engine: args.engine,
        budget_tokens: args.budget,
        keep_if_larger: args.engrams,
        ..Default::default()
    };
    if args.engrams && args.engine != Engine::Ledger {
        anyhow::bail!("--engrams needs --engine ledger: only the ledger has entries");
    }
    let compaction = compact_report(&messages, &config);
    if let Some(warning) = &compaction.warning {
        eprintln!("lessrt: warning: {warning}");
    }
    if let Some(note) = compaction.note.as_ref().filter(|_| !ctx.quiet) {
        eprintln!("lessrt: {note}");
    }
    if args.engrams {
        let conversation = args.conversation.clone().unwrap_or_else(|| {
            args.file.file_stem().map_or_else(|| "chat".to_owned(), |s| s.to_string_lossy().into_owned())
        });
        let ledger = compaction.messages.iter().find(|m| m.is_system() && m.content.starts_with(LEDGER_HEADER));
        let engrams = match ledger {
            Some(ledger) => ledger_engrams(&ledger.content, &conversation, "operator", &less_runtime::now_rfc3339())
                .map_err(|v| anyhow::anyhow!("a ledger entry is not a valid engram: {v}"))?,
            None => Vec::new(),
        };
        for engram in engrams {
            outln!("{}", serde_json::to_string(&*engram)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let output = serde_json::to_value(&compaction.messages)?;
    let mut stats = serde_json::to_value(compact_stats(&messages, &compaction.messages, &config))?;
    if let Some(note) = &compaction.note {
        stats["note"] = json!(note);
    }
    let mut report = json!({"messages": output, "stats": stats});
    if let Some(warning) = &compaction.warning {
        report["warning"] = json!(warning);
    }
    args.output.emit(&report, || super::print_json(&output))?;
    Ok(ExitCode::SUCCESS)
}

/// Reports input that cannot be compacted, with its code and what to send instead; exit 2.
fn refuse(code: ErrorCode, message: &str) -> ExitCode {
    eprintln!("lessrt: {code}: {message}");
    eprintln!("lessrt: {}", code.instruction());
    ExitCode::from(2)
}
