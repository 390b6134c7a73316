//! The context ledger: deterministic, local compaction of long conversations (semantic RLE).
//!
//! [`compact`] turns a long conversation into: the original system messages verbatim, then one system message that
//! begins with [`LEDGER_HEADER`] (the ledger: active facts, decisions, obligations, superseded facts, unresolved
//! questions, credential refs and retrieval notes, each entry citing the message it came from), then the last
//! `hot_tail` non-system messages byte for byte. Everything before the hot tail (the cold history) is read by the
//! rules of `rules.rs` after redaction (`redact.rs`), so no raw secret or IP address from it reaches the output.
//!
//! # Design notes
//!
//! * Deterministic and local: no model, no network, no clock, no randomness; the same input gives the same bytes.
//! * Fail closed: if an engine panics or its output breaks the shape (hot tail changed, not exactly one ledger),
//!   [`compact_report`] returns the original messages unchanged with a warning: losing context silently is worse
//!   than not compacting.
//! * Never larger: an output with at least as many tokens as the input (a short chat, whose ledger costs more than
//!   what it replaces) is dropped and the input returned unchanged with a note.
//! * Idempotent: a ledger in the input is parsed back into the state and extended, so compacting a compacted
//!   conversation gives the same conversation, and a continued one keeps every entry of the first ledger.
//! * Two baselines share the interface for the evaluation (`lessrt eval context`, in `less-eval`):
//!   [`Engine::HotTail`] (system messages and the tail only) and [`Engine::Truncate`] (the head and the most recent
//!   cold messages that fit a token budget).
//! * Linear: one pass over the cold history; entries are found through maps, and the lists that could grow
//!   without bound keep their newest entries and count the rest (`extract.rs`).

mod engrams;
mod extract;
mod ledger;
mod redact;
mod rules;
#[cfg(test)]
mod tests;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Encoding, ErrorCode, TokenCounter, Violation};

pub use engrams::{LEDGER_TAG, ledger_engrams};
pub use ledger::{LEDGER_HEADER, SECTIONS, is_ledger, ledger_section};
pub use redact::{CREDENTIAL_REF_PREFIX, REDACTED_IP, Redacted, credential_ref, redact, redact_all};

/// One chat message in the OpenAI chat shape: `{"role": "...", "content": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `developer`, `user`, `assistant`, `tool` or `function`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message of `role` with `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }

    /// Whether this is a system message (kept verbatim, never part of the hot tail).
    pub fn is_system(&self) -> bool {
        self.role == "system"
    }
}

/// The roles a transcript may use.
pub const ROLES: [&str; 6] = ["system", "developer", "user", "assistant", "tool", "function"];

/// Which compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// The semantic ledger (the default).
    #[default]
    Ledger,
    /// Baseline: system messages and the hot tail only.
    HotTail,
    /// Baseline: the cold history truncated to a token budget (head and most recent messages, whole messages).
    Truncate,
}

impl Engine {
    /// All engines, ledger first.
    pub const ALL: [Engine; 3] = [Engine::Ledger, Engine::HotTail, Engine::Truncate];

    /// The name on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Engine::Ledger => "ledger",
            Engine::HotTail => "hot-tail",
            Engine::Truncate => "truncate",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Engine {
    type Err = String;

    fn from_str(text: &str) -> Result<Engine, String> {
        Engine::ALL
            .into_iter()
            .find(|e| e.as_str() == text)
            .ok_or_else(|| format!("unknown engine {text:?}; expected ledger, hot-tail or truncate"))
    }
}

/// How to compact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactConfig {
    /// Non-system messages kept verbatim at the end.
    pub hot_tail: usize,
    /// Which engine runs.
    pub engine: Engine,
    /// Token budget of the cold history kept by [`Engine::Truncate`].
    pub budget_tokens: u32,
    /// The tokenizer for budgets and statistics.
    pub encoding: Encoding,
    /// Return the compaction even when it has more tokens than the input (to export a short chat's ledger entries
    /// as engrams); by default such an input comes back unchanged, with a note.
    pub keep_if_larger: bool,
}

impl Default for CompactConfig {
    fn default() -> CompactConfig {
        CompactConfig {
            hot_tail: 6,
            engine: Engine::Ledger,
            budget_tokens: 2000,
            encoding: Encoding::O200kBase,
            keep_if_larger: false,
        }
    }
}

/// The result of a compaction: the messages, and why they are the input unchanged if they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// The compacted messages (the input unchanged when `warning` or `note` is set).
    pub messages: Vec<ChatMessage>,
    /// Why the input came back unchanged after a failure (an engine panicked, erred or broke the output's shape).
    pub warning: Option<String>,
    /// Why the input came back unchanged although compaction worked: it would not have made the chat smaller.
    pub note: Option<String>,
}

/// Sizes before and after, for `lessrt compact --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CompactStats {
    /// Messages in the input.
    pub messages_in: usize,
    /// Messages in the output.
    pub messages_out: usize,
    /// Tokens of the input's contents.
    pub tokens_in: u64,
    /// Tokens of the output's contents.
    pub tokens_out: u64,
    /// Whether the last `hot_tail` non-system messages are byte-identical in input and output.
    pub hot_tail_unchanged: bool,
}

/// Compacts `messages`; on failure returns them unchanged (the warning goes to the log; see [`compact_report`]).
pub fn compact(messages: &[ChatMessage], config: &CompactConfig) -> Vec<ChatMessage> {
    let compaction = compact_report(messages, config);
    if let Some(warning) = &compaction.warning {
        tracing::warn!(target: "less.context.compact", "{warning}");
    }
    compaction.messages
}

/// Compacts `messages` with the configured engine, failing closed.
pub fn compact_report(messages: &[ChatMessage], config: &CompactConfig) -> Compaction {
    compact_with(messages, config, run_engine)
}

/// Runs `engine` on `messages`, catching panics and errors and checking the output's shape; the seam tests use to
/// make an engine fail.
pub(crate) fn compact_with(
    messages: &[ChatMessage],
    config: &CompactConfig,
    engine: impl FnOnce(&[ChatMessage], &CompactConfig) -> Result<Vec<ChatMessage>, String>,
) -> Compaction {
    let outcome = catch_unwind(AssertUnwindSafe(|| engine(messages, config)));
    let failure = match outcome {
        Ok(Ok(output)) => match check_shape(messages, &output, config) {
            Ok(()) => return no_larger(messages, output, config),
            Err(why) => why,
        },
        Ok(Err(why)) => why,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            format!("the {} engine panicked: {what}", config.engine)
        }
    };
    Compaction {
        messages: messages.to_vec(),
        warning: Some(format!("compaction failed closed, the original messages are returned unchanged: {failure}")),
        note: None,
    }
}

/// `output`, unless it has at least as many tokens as `input` (a short chat, whose ledger costs more than the
/// messages it replaces): then `input` unchanged with a note, so compaction never makes a chat bigger.
fn no_larger(input: &[ChatMessage], output: Vec<ChatMessage>, config: &CompactConfig) -> Compaction {
    if config.keep_if_larger || output.as_slice() == input {
        return Compaction { messages: output, warning: None, note: None };
    }
    let counter = TokenCounter::shared(config.encoding);
    let tokens =
        |messages: &[ChatMessage]| -> u64 { messages.iter().map(|m| u64::from(counter.count(&m.content))).sum() };
    let (tokens_in, tokens_out) = (tokens(input), tokens(&output));
    if tokens_out < tokens_in {
        return Compaction { messages: output, warning: None, note: None };
    }
    Compaction {
        messages: input.to_vec(),
        warning: None,
        note: Some(format!(
            "not compacted: the {} engine's output would have {tokens_out} tokens for {tokens_in} in, so the {} \
             messages are returned unchanged",
            config.engine,
            input.len()
        )),
    }
}

fn run_engine(messages: &[ChatMessage], config: &CompactConfig) -> Result<Vec<ChatMessage>, String> {
    Ok(match config.engine {
        Engine::Ledger => compact_ledger(messages, config),
        Engine::HotTail => compact_hot_tail(messages, config),
        Engine::Truncate => compact_truncate(messages, config),
    })
}

/// The last `hot_tail` non-system messages.
fn hot_tail<'m>(messages: &'m [ChatMessage], config: &CompactConfig) -> Vec<&'m ChatMessage> {
    let non_system: Vec<&ChatMessage> = messages.iter().filter(|m| !m.is_system()).collect();
    non_system[non_system.len().saturating_sub(config.hot_tail)..].to_vec()
}

/// The output keeps the hot tail byte for byte at its end and, for the ledger engine, has exactly one ledger.
fn check_shape(input: &[ChatMessage], output: &[ChatMessage], config: &CompactConfig) -> Result<(), String> {
    let tail_in = hot_tail(input, config);
    let tail_out = hot_tail(output, config);
    if tail_in != tail_out || !output.ends_with(&tail_in.iter().map(|m| (*m).clone()).collect::<Vec<_>>()) {
        return Err("the hot tail would have changed".to_owned());
    }
    if config.engine == Engine::Ledger {
        let n_ledgers = output.iter().filter(|m| m.is_system() && is_ledger(&m.content)).count();
        if n_ledgers != 1 {
            return Err(format!("the output would have {n_ledgers} ledgers instead of one"));
        }
    }
    Ok(())
}

fn compact_ledger(messages: &[ChatMessage], config: &CompactConfig) -> Vec<ChatMessage> {
    let mut systems: Vec<&ChatMessage> = Vec::new();
    let mut prior: Option<ledger::Parsed> = None;
    // Non-system messages with their index in the conversation. After a ledger, numbering continues from the
    // index its verbatim tail started at, so a re-compaction cites the same messages as the first one.
    let mut numbered: Vec<(usize, &ChatMessage)> = Vec::new();
    let mut next_idx: Option<usize> = None;
    for (pos, message) in messages.iter().enumerate() {
        if message.is_system() {
            if is_ledger(&message.content) {
                let parsed = ledger::parse(&message.content);
                next_idx = parsed.tail_start.or(next_idx);
                match &mut prior {
                    None => prior = Some(parsed),
                    // A second ledger (two compacted conversations pasted together) is folded into the first.
                    Some(first) => merge(&mut first.state, parsed.state),
                }
            } else {
                systems.push(message);
            }
            continue;
        }
        let idx = match &mut next_idx {
            Some(next) => {
                *next += 1;
                *next - 1
            }
            None => pos,
        };
        numbered.push((idx, message));
    }
    let n_tail = config.hot_tail.min(numbered.len());
    let (cold, tail) = numbered.split_at(numbered.len() - n_tail);
    let mut state = prior.map(|p| p.state).unwrap_or_default();
    // Two passes: a secret found in one message is redacted in every message, before or after it.
    let mut secrets = Vec::new();
    let mut redacted: Vec<Redacted> =
        cold.iter().map(|(_, m)| redact::redact_collecting(&m.content, &mut secrets)).collect();
    let known = redact::KnownSecrets::new(secrets);
    for ((idx, message), redacted) in cold.iter().zip(&mut redacted) {
        known.apply(redacted);
        state.ingest(*idx, &message.role, redacted);
    }
    state.prune();
    let tail_start = tail
        .first()
        .map(|(idx, _)| *idx)
        .or_else(|| cold.last().map(|(idx, _)| idx + 1))
        .or(next_idx)
        .unwrap_or(messages.len());
    let mut output: Vec<ChatMessage> = systems.into_iter().cloned().collect();
    output.push(ChatMessage::new("system", ledger::render(&state, tail_start, n_tail)));
    output.extend(tail.iter().map(|(_, m)| (*m).clone()));
    output
}

/// Folds `other` into `into`: entries `into` lacks are added; a subject both know keeps the newer current value.
fn merge(into: &mut extract::LedgerState, other: extract::LedgerState) {
    for (key, fact) in other.facts {
        match into.facts.get_mut(&key) {
            Some(mine) if mine.current.idx >= fact.current.idx => {}
            Some(mine) => {
                let old = std::mem::replace(&mut mine.current, fact.current);
                mine.superseded.push(old);
            }
            None => {
                into.facts.insert(key, fact);
            }
        }
    }
    into.decisions.extend(other.decisions);
    into.obligations.extend(other.obligations);
    into.questions.extend(other.questions);
    for (reference, credential) in other.credentials {
        into.credentials.entry(reference).or_insert(credential);
    }
    for (word, topic) in other.topics {
        into.topics.entry(word).or_insert(topic);
    }
    into.n_compacted += other.n_compacted;
    into.first_compacted = match (into.first_compacted, other.first_compacted) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    into.last_compacted = into.last_compacted.max(other.last_compacted);
}

fn compact_hot_tail(messages: &[ChatMessage], config: &CompactConfig) -> Vec<ChatMessage> {
    let mut output: Vec<ChatMessage> = messages.iter().filter(|m| m.is_system()).cloned().collect();
    output.extend(hot_tail(messages, config).into_iter().cloned());
    output
}

/// Keeps the head of the cold history up to a quarter of the budget and the most recent cold messages up to the
/// rest, whole messages only, and says what it dropped.
fn compact_truncate(messages: &[ChatMessage], config: &CompactConfig) -> Vec<ChatMessage> {
    let counter = TokenCounter::shared(config.encoding);
    let cold: Vec<(usize, &ChatMessage)> = {
        let non_system: Vec<(usize, &ChatMessage)> =
            messages.iter().enumerate().filter(|(_, m)| !m.is_system()).collect();
        let n_cold = non_system.len().saturating_sub(config.hot_tail);
        non_system[..n_cold].to_vec()
    };
    let budget = u64::from(config.budget_tokens);
    let mut used = 0u64;
    let mut n_head = 0;
    for (_, message) in &cold {
        let tokens = u64::from(counter.count(&message.content));
        if used + tokens > budget / 4 {
            break;
        }
        used += tokens;
        n_head += 1;
    }
    let mut n_recent = 0;
    for (_, message) in cold[n_head..].iter().rev() {
        let tokens = u64::from(counter.count(&message.content));
        if used + tokens > budget {
            break;
        }
        used += tokens;
        n_recent += 1;
    }
    let mut output: Vec<ChatMessage> = messages.iter().filter(|m| m.is_system()).cloned().collect();
    output.extend(cold[..n_head].iter().map(|(_, m)| (*m).clone()));
    let dropped = &cold[n_head..cold.len() - n_recent];
    if let (Some(first), Some(last)) = (dropped.first(), dropped.last()) {
        output.push(ChatMessage::new(
            "system",
            format!(
                "[context truncated: {} messages (#{}-#{}) omitted to fit {budget} tokens]",
                dropped.len(),
                first.0,
                last.0
            ),
        ));
    }
    output.extend(cold[cold.len() - n_recent..].iter().map(|(_, m)| (*m).clone()));
    output.extend(hot_tail(messages, config).into_iter().cloned());
    output
}

/// Input and output sizes, tokens counted with the configured tokenizer.
pub fn compact_stats(input: &[ChatMessage], output: &[ChatMessage], config: &CompactConfig) -> CompactStats {
    let counter = TokenCounter::shared(config.encoding);
    let tokens = |messages: &[ChatMessage]| messages.iter().map(|m| u64::from(counter.count(&m.content))).sum();
    CompactStats {
        messages_in: input.len(),
        messages_out: output.len(),
        tokens_in: tokens(input),
        tokens_out: tokens(output),
        hot_tail_unchanged: hot_tail(input, config) == hot_tail(output, config),
    }
}

/// Parses a transcript: a JSON array of `{role, content}` objects, or one such object per line (JSONL).
///
/// Unparseable text is [`ErrorCode::JsonMalformed`]; parseable text of the wrong shape is
/// [`ErrorCode::TranscriptInvalid`], with the path of the first offending value.
pub fn parse_transcript(text: &str) -> Result<Vec<ChatMessage>, Violation> {
    let messages = crate::dag::parse_transcript(text)?;
    messages
        .into_iter()
        .enumerate()
        .map(|(idx, m)| {
            check_role(&m.role, idx, "")?;
            Ok(ChatMessage { role: m.role, content: m.content })
        })
        .collect()
}

/// Refuses a role outside [`ROLES`] (`LESS_TRANSCRIPT_INVALID` at `<base>/<idx>/role`): transcripts to compact or
/// archive are chats, whose roles are these.
pub fn check_role(role: &str, idx: usize, base: &str) -> Result<(), Violation> {
    if ROLES.contains(&role) {
        return Ok(());
    }
    let shown: String = role.chars().take(40).collect();
    Err(Violation::new(
        ErrorCode::TranscriptInvalid,
        format!("{base}/{idx}/role"),
        format!("message {idx} has role {shown:?}; expected one of {}", ROLES.join(", ")),
    ))
}
