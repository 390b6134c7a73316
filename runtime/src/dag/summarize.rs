//! Summarizers and the three-level escalation around them.
//!
//! A [`Summarizer`] turns the items a node covers (raw messages for a session, child summaries for an arc or an
//! epoch) into text at a target size, at two levels: normal and aggressive. [`escalate`] wraps any summarizer with
//! the convergence guarantee: normal at the target T, then aggressive at T/2, then a deterministic truncation that
//! involves no summarizer at all. A level's output is accepted only if it is smaller than its input (and within its
//! target), so a summary never costs more than what it replaces, and the third level always succeeds.
//!
//! [`Extractive`] is the default summarizer: deterministic, no LLM. It keeps the engrams and sentences that carry
//! decisions, constraints, obligations, outcomes, errors, commands and facts, as labelled lines citing their
//! messages (`sam:msg:<id>`), chosen by depth: sessions keep operational detail, arcs decisions and outcomes, epochs
//! architecture, pivots and standing constraints. Its markers (English and Russian) live in one table,
//! [`MARKERS`], with [`EXPLICIT_OBLIGATIONS`] (a `TODO` is an obligation whatever else it says) and [`UNDECIDED`]
//! (a decision proposed or asked about is no decision) read first.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use serde::Serialize;

use crate::dag::archive::NodeKind;
use less_contract::TokenCounter;

/// One thing a node summarizes: a raw message (session) or a child summary (arc, epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryItem {
    /// The message id (`m-…`) or the child node's id.
    pub id: String,
    /// The message's role (or the child's kind).
    pub role: String,
    /// The text.
    pub content: String,
    /// Its token count (a message's includes the framing).
    pub tokens: u32,
    /// When (unix seconds).
    pub at: i64,
}

/// What a summarizer is asked to summarize.
#[derive(Debug, Clone, Copy)]
pub struct SummaryInput<'a> {
    /// The node being made.
    pub kind: NodeKind,
    /// Its project.
    pub project: &'a str,
    /// Its session (session nodes).
    pub session: Option<&'a str>,
    /// What it covers, in order.
    pub items: &'a [SummaryItem],
}

impl SummaryInput<'_> {
    /// The input's size: the sum of its items' tokens.
    pub fn tokens(&self) -> u32 {
        self.items.iter().map(|i| i.tokens).sum()
    }
}

/// How hard a summarizer should compress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Full detail for the depth, at the target.
    Normal,
    /// Only the essentials, as terse bullets, at half the target.
    Aggressive,
}

/// A summarizer failed (an LLM timed out, answered garbage…): the escalation moves on to the next level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SummarizeError(pub String);

/// What [`Summarizer::summarize`] returns: the summary's text, when it comes.
pub type SummaryFuture<'a> = Pin<Box<dyn Future<Output = Result<String, SummarizeError>> + Send + 'a>>;

/// Turns a node's items into a summary, asynchronously, as an agent acts: a model-backed summarizer waits for its
/// provider without holding a thread. Implementations: [`Extractive`] (default, deterministic, ready at once); an
/// LLM-backed one lives with the LLM agents. The [`Condenser`](crate::dag::Condenser), which works on the blocking
/// pool, waits for the future through a [`Driver`].
pub trait Summarizer: Send + Sync {
    /// A short name, recorded on every node it writes.
    fn name(&self) -> &str;
    /// A summary of `input` of at most about `target_tokens` tokens.
    fn summarize<'a>(&'a self, input: SummaryInput<'a>, level: Level, target_tokens: u32) -> SummaryFuture<'a>;
}

/// Waits for summarizer futures from synchronous code: on the runtime of the thread it is called on (a thread of
/// tokio's blocking pool, where an actor's condenser runs), else on a current-thread runtime of its own, made once
/// (the CLI's `dag build`).
///
/// **Invariant:** never called on an async worker thread, where waiting would stall the executor (tokio panics, and
/// the panic counts as a failed level).
#[derive(Debug, Default)]
pub struct Driver {
    own: OnceLock<Result<tokio::runtime::Runtime, String>>,
}

impl Driver {
    /// [`escalate`], waited for here.
    pub fn escalate(
        &self,
        summarizer: &dyn Summarizer,
        input: &SummaryInput<'_>,
        target: u32,
        counter: &TokenCounter,
    ) -> Summary {
        let escalation = escalate(summarizer, input, target, counter);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            return handle.block_on(escalation);
        }
        let own = self.own.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|err| err.to_string())
        });
        match own {
            Ok(runtime) => runtime.block_on(escalation),
            Err(why) => {
                let target = effective_target(input, target);
                let failed = |level: u8, target: u32| Attempt {
                    level,
                    target,
                    tokens: None,
                    rejected: Some(format!("failed: no runtime to run the summarizer on: {why}")),
                };
                truncation(input, target, counter, vec![failed(1, target), failed(2, (target / 2).max(1))])
            }
        }
    }
}

/// A summarizer's future, with a panic (while it is made or polled) turned into a failed level.
struct Guarded<'a>(Option<SummaryFuture<'a>>);

impl Future for Guarded<'_> {
    type Output = Option<Result<String, SummarizeError>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(future) = self.0.as_mut() else { return Poll::Ready(None) };
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => Poll::Ready(Some(result)),
            Err(_) => {
                self.0 = None;
                Poll::Ready(None)
            }
        }
    }
}

/// One level tried by [`escalate`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    /// 1, 2 or 3.
    pub level: u8,
    /// The level's target.
    pub target: u32,
    /// The output's tokens, when there was an output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
    /// Why it was not accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

/// An accepted summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The text.
    pub content: String,
    /// Its tokens.
    pub tokens: u32,
    /// Tokens of the input.
    pub input_tokens: u32,
    /// The level accepted: 1 normal, 2 aggressive, 3 deterministic truncation.
    pub level: u8,
    /// 0.7, 0.5, 0.3 by level.
    pub confidence: f64,
    /// Every level tried, in order.
    pub attempts: Vec<Attempt>,
}

/// Confidence of a summary by escalation level.
pub fn level_confidence(level: u8) -> f64 {
    match level {
        1 => 0.7,
        2 => 0.5,
        _ => 0.3,
    }
}

/// Summarizes `input` with `summarizer`, escalating: normal at T, aggressive at T / 2, then a deterministic
/// truncation of the input to T / 2 tokens, where T is `target`, or one token less than the input when that is
/// smaller. Always terminates; the result is always smaller than a non-empty input. A summarizer that panics counts
/// as a failed level.
pub async fn escalate(
    summarizer: &dyn Summarizer,
    input: &SummaryInput<'_>,
    target: u32,
    counter: &TokenCounter,
) -> Summary {
    let input_tokens = input.tokens();
    let target = effective_target(input, target);
    let mut attempts = Vec::new();
    for (level, number, level_target) in [(Level::Normal, 1u8, target), (Level::Aggressive, 2, (target / 2).max(1))] {
        let future = std::panic::catch_unwind(AssertUnwindSafe(|| summarizer.summarize(*input, level, level_target)));
        let outcome = Guarded(future.ok()).await;
        let (tokens, rejected) = match outcome {
            Some(Ok(content)) => {
                let tokens = counter.count(&content);
                if content.trim().is_empty() {
                    (Some(tokens), Some("empty output".to_owned()))
                } else if tokens >= input_tokens {
                    (Some(tokens), Some(format!("{tokens} tokens is not smaller than the input's {input_tokens}")))
                } else if tokens > level_target {
                    (Some(tokens), Some(format!("{tokens} tokens is over the level's target {level_target}")))
                } else {
                    attempts.push(Attempt {
                        level: number,
                        target: level_target,
                        tokens: Some(tokens),
                        rejected: None,
                    });
                    return Summary {
                        content,
                        tokens,
                        input_tokens,
                        level: number,
                        confidence: level_confidence(number),
                        attempts,
                    };
                }
            }
            Some(Err(err)) => (None, Some(format!("failed: {err}"))),
            None => (None, Some("panicked".to_owned())),
        };
        attempts.push(Attempt { level: number, target: level_target, tokens, rejected });
    }
    truncation(input, target, counter, attempts)
}

/// A target at or above the input asks for no compression at all: aim below the input instead.
fn effective_target(input: &SummaryInput<'_>, target: u32) -> u32 {
    target.min(input.tokens().saturating_sub(1)).max(1)
}

/// Level 3: the input's plain lines truncated to half the (effective) target; no summarizer involved.
fn truncation(input: &SummaryInput<'_>, target: u32, counter: &TokenCounter, mut attempts: Vec<Attempt>) -> Summary {
    let input_tokens = input.tokens();
    let budget = (target / 2).max(1).min(input_tokens.saturating_sub(1));
    let content = truncate_tokens(&render_plain(input), budget, counter);
    let tokens = counter.count(&content);
    attempts.push(Attempt { level: 3, target: budget, tokens: Some(tokens), rejected: None });
    Summary { content, tokens, input_tokens, level: 3, confidence: level_confidence(3), attempts }
}

/// The items as plain lines (`role: content`), what level 3 truncates.
fn render_plain(input: &SummaryInput<'_>) -> String {
    let mut out = String::new();
    for item in input.items {
        out.push_str(&item.role);
        out.push_str(": ");
        out.push_str(item.content.trim());
        out.push('\n');
    }
    out
}

/// The longest prefix of `text` (cut at a character boundary, preferring a word boundary) of at most `max` tokens.
pub fn truncate_tokens(text: &str, max: u32, counter: &TokenCounter) -> String {
    if max == 0 {
        return String::new();
    }
    if counter.count_uncached(text) <= max {
        return text.to_owned();
    }
    // Token counts of prefixes grow with their length (almost always by at most one per character), so a binary
    // search over character boundaries finds the longest fitting prefix in O(log n) counts.
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let (mut lo, mut hi) = (0usize, bounds.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count_uncached(&text[..bounds[mid]]) <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut cut = &text[..bounds[lo]];
    if let Some(space) = cut.rfind(char::is_whitespace).filter(|&i| i > cut.len() / 2) {
        cut = &cut[..space];
    }
    // A prefix's count can exceed a longer one's by a token at a merge boundary: shrink until it fits.
    while !cut.is_empty() && counter.count_uncached(cut) > max {
        let mut end = cut.len() - 1;
        while !cut.is_char_boundary(end) {
            end -= 1;
        }
        cut = &cut[..end];
    }
    cut.trim_end().to_owned()
}

/// What a kept line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A choice made.
    Decision,
    /// A rule that must hold.
    Constraint,
    /// Something someone has to do.
    Obligation,
    /// A change of direction.
    Pivot,
    /// How the system is built.
    Architecture,
    /// Something that went wrong.
    Error,
    /// Something that was achieved.
    Outcome,
    /// A risk named.
    Risk,
    /// A command run.
    Command,
    /// A plain statement of fact.
    Fact,
}

impl Class {
    /// The label of a summary line.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Decision => "decision",
            Class::Constraint => "constraint",
            Class::Obligation => "obligation",
            Class::Pivot => "pivot",
            Class::Architecture => "architecture",
            Class::Error => "error",
            Class::Outcome => "outcome",
            Class::Risk => "risk",
            Class::Command => "command",
            Class::Fact => "fact",
        }
    }

    fn parse(label: &str) -> Option<Class> {
        ALL_CLASSES.iter().copied().find(|c| c.as_str() == label)
    }

    fn of_engram_kind(kind: &str) -> Class {
        match kind {
            "decision" => Class::Decision,
            "constraint" | "policy" => Class::Constraint,
            "todo" => Class::Obligation,
            "risk" => Class::Risk,
            "test" | "perf" | "diff" => Class::Outcome,
            _ => Class::Fact,
        }
    }
}

const ALL_CLASSES: [Class; 10] = [
    Class::Decision,
    Class::Constraint,
    Class::Obligation,
    Class::Pivot,
    Class::Architecture,
    Class::Error,
    Class::Outcome,
    Class::Risk,
    Class::Command,
    Class::Fact,
];

/// The marker table: a sentence belongs to the first class (in this order) one of whose markers it contains as whole
/// words (matched on lowercased text with punctuation turned into spaces). English and Russian.
pub const MARKERS: &[(Class, &[&str])] = &[
    (
        Class::Pivot,
        &[
            "instead",
            "switch to",
            "switched to",
            "no longer",
            "migrate to",
            "migrated to",
            "replaced",
            "pivot",
            "changed our mind",
            "decision changed",
            "вместо",
            "больше не",
            "перешли на",
        ],
    ),
    (
        Class::Decision,
        &[
            "decided",
            "decision",
            "we will",
            "we'll",
            "let's go with",
            "going with",
            "chose",
            "choose",
            "agreed",
            "settled on",
            "we picked",
            "решили",
            "решение",
            "договорились",
            "выбрали",
        ],
    ),
    (
        Class::Constraint,
        &[
            "must",
            "must not",
            "never",
            "always",
            "do not",
            "don't",
            "cannot",
            "can't",
            "required",
            "requirement",
            "constraint",
            "at most",
            "at least",
            "forbidden",
            "only if",
            "нельзя",
            "должен",
            "должна",
            "должно",
            "обязательно",
            "запрещено",
        ],
    ),
    (
        Class::Obligation,
        &[
            "todo",
            "need to",
            "needs to",
            "remind me",
            "follow up",
            "action item",
            "don't forget",
            "will do",
            "надо",
            "нужно",
            "не забыть",
            "напомни",
        ],
    ),
    (
        Class::Risk,
        &["risk", "risky", "might break", "could break", "danger", "vulnerable", "security", "риск", "опасно"],
    ),
    (
        Class::Error,
        &[
            "error",
            "errors",
            "failed",
            "fails",
            "failure",
            "panic",
            "panicked",
            "exception",
            "traceback",
            "crash",
            "crashed",
            "timeout",
            "timed out",
            "ошибка",
            "упал",
            "сломалось",
        ],
    ),
    (
        Class::Outcome,
        &[
            "fixed",
            "resolved",
            "shipped",
            "merged",
            "released",
            "deployed",
            "passes",
            "passed",
            "done",
            "works now",
            "completed",
            "finished",
            "landed",
            "готово",
            "сделано",
            "исправлено",
            "выкатили",
        ],
    ),
    (
        Class::Architecture,
        &[
            "architecture",
            "design",
            "module",
            "service",
            "database",
            "schema",
            "api",
            "protocol",
            "layer",
            "component",
            "interface",
            "crate",
            "pipeline",
            "storage",
            "архитектура",
            "сервис",
            "база данных",
        ],
    ),
];

/// Lowercase words separated by single spaces, padded with a space each side (for whole-word marker matching).
fn normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(' ');
    let mut space = true;
    for ch in text.chars().flat_map(char::to_lowercase) {
        if ch.is_alphanumeric() || ch == '\'' || ch == '’' {
            out.push(if ch == '’' { '\'' } else { ch });
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    if !space {
        out.push(' ');
    }
    out
}

/// Markers of an obligation stated as such (`TODO`, `action item`, `remind me`): they win over every other class,
/// so `TODO: switch to the new API` is an obligation, not a pivot.
pub const EXPLICIT_OBLIGATIONS: &[&str] =
    &["todo", "fixme", "action item", "remind me", "don't forget", "follow up", "не забыть", "напомни"];

/// Markers of a choice not (yet) made: a sentence with one is never a decision or a pivot, nor is a question.
/// "We need to decide about the billing cache." proposes a decision; it records none.
pub const UNDECIDED: &[&str] = &[
    "need to decide",
    "needs to decide",
    "have to decide",
    "has to decide",
    "to decide",
    "deciding",
    "undecided",
    "not decided",
    "haven't decided",
    "have not decided",
    "need a decision",
    "no decision",
    "decision pending",
    "need to choose",
    "to choose",
    "should we",
    "shall we",
    "could we",
    "what about",
    "how about",
    "maybe",
    "perhaps",
    "propose",
    "suggest",
    "whether",
    "надо решить",
    "нужно решить",
    "решить",
    "может",
    "предлагаю",
    "стоит ли",
];

/// The class of a sentence: an explicit obligation ([`EXPLICIT_OBLIGATIONS`]) first, then [`MARKERS`] (no decision
/// or pivot for a question or an undecided sentence, [`UNDECIDED`]), else command (`$ …` or a code span), else fact
/// (a number or a copula), else none.
pub fn classify(sentence: &str) -> Option<Class> {
    let norm = normalized(sentence);
    let has = |markers: &[&str]| markers.iter().any(|m| norm.contains(&format!(" {m} ")));
    if has(EXPLICIT_OBLIGATIONS) {
        return Some(Class::Obligation);
    }
    let undecided = sentence.trim_end().ends_with('?') || has(UNDECIDED);
    for (class, markers) in MARKERS {
        if undecided && matches!(class, Class::Decision | Class::Pivot) {
            continue;
        }
        if has(markers) {
            return Some(*class);
        }
    }
    let trimmed = sentence.trim_start();
    if trimmed.starts_with("$ ") || trimmed.contains('`') {
        return Some(Class::Command);
    }
    let words = norm.split_whitespace().count();
    let copula = [" is ", " are ", " was ", " were ", " uses ", " runs ", " has ", " это ", " равно "];
    if words >= 4 && (norm.bytes().any(|b| b.is_ascii_digit()) || copula.iter().any(|c| norm.contains(c))) {
        return Some(Class::Fact);
    }
    None
}

/// The classes a depth keeps, most important first, at each level.
fn kept(kind: NodeKind, level: Level) -> &'static [Class] {
    use Class::*;
    match (kind, level) {
        // Sessions keep what was decided, what is left to do, what failed and what was run before the rest.
        (NodeKind::Session, Level::Normal) => {
            &[Decision, Obligation, Error, Command, Constraint, Pivot, Risk, Outcome, Architecture, Fact]
        }
        (NodeKind::Session, Level::Aggressive) => &[Decision, Obligation, Error, Constraint, Pivot, Command],
        (NodeKind::Arc, Level::Normal) => &[Decision, Pivot, Constraint, Outcome, Obligation, Risk, Architecture],
        (NodeKind::Arc, Level::Aggressive) => &[Decision, Pivot, Constraint],
        (NodeKind::Epoch, Level::Normal) => &[Architecture, Pivot, Constraint, Decision],
        (NodeKind::Epoch, Level::Aggressive) => &[Pivot, Constraint, Architecture],
    }
}

/// A candidate line: its class, text and citations, and where it came from (for output order).
#[derive(Debug, Clone)]
struct Line {
    class: Class,
    text: String,
    cites: Vec<String>,
    order: usize,
}

/// The default summarizer: deterministic and extractive.
#[derive(Debug, Clone, Default)]
pub struct Extractive;

/// Longest sentence kept, in characters, at each level.
const MAX_SENTENCE_CHARS: [usize; 2] = [220, 120];
/// Citations kept on one line.
const MAX_CITES: [usize; 2] = [3, 1];

impl Summarizer for Extractive {
    fn name(&self) -> &str {
        "extractive"
    }

    fn summarize<'a>(&'a self, input: SummaryInput<'a>, level: Level, target: u32) -> SummaryFuture<'a> {
        Box::pin(std::future::ready(Ok(extract(&input, level, target))))
    }
}

/// The extractive summary of `input` at `level` within `target` tokens.
fn extract(input: &SummaryInput<'_>, level: Level, target: u32) -> String {
    let counter = TokenCounter::shared(less_contract::Encoding::default());
    let lvl = usize::from(level == Level::Aggressive);
    let classes = kept(input.kind, level);
    let lines = candidate_lines(input, MAX_SENTENCE_CHARS[lvl]);
    // Rank: class importance for the depth, then earlier first; keep what fits the target.
    let mut ranked: Vec<&Line> = lines.iter().filter(|l| classes.contains(&l.class)).collect();
    ranked.sort_by_key(|l| (classes.iter().position(|c| *c == l.class), l.order));
    let header = header(input);
    let mut used = counter.count(&header) + 1;
    let mut chosen: Vec<(&Line, String)> = Vec::new();
    for line in ranked {
        let text = render_line(line, MAX_CITES[lvl]);
        let cost = counter.count(&text) + 1;
        if used + cost <= target {
            used += cost;
            chosen.push((line, text));
        }
    }
    chosen.sort_by_key(|(l, _)| l.order);
    let mut out = header_and(&header, &chosen);
    // Lines were counted one by one; the whole can differ by a token at joins. Drop the last-ranked lines until
    // the whole fits.
    while counter.count(&out) > target && !chosen.is_empty() {
        let worst = (0..chosen.len())
            .max_by_key(|&i| (classes.iter().position(|c| *c == chosen[i].0.class), chosen[i].0.order))
            .unwrap_or(0);
        chosen.remove(worst);
        out = header_and(&header, &chosen);
    }
    out
}

fn header_and(header: &str, chosen: &[(&Line, String)]) -> String {
    let mut out = header.to_owned();
    for (_, text) in chosen {
        out.push('\n');
        out.push_str(text);
    }
    out
}

fn header(input: &SummaryInput<'_>) -> String {
    let (first, last) =
        (input.items.iter().map(|i| i.at).min().unwrap_or(0), input.items.iter().map(|i| i.at).max().unwrap_or(0));
    let span = if day(first) == day(last) { day(first) } else { format!("{}..{}", day(first), day(last)) };
    match input.kind {
        NodeKind::Session => format!(
            "session {} ({}): {} messages, {span}",
            input.session.unwrap_or("?"),
            input.project,
            input.items.len()
        ),
        NodeKind::Arc => format!("arc ({}): {} sessions, {span}", input.project, input.items.len()),
        NodeKind::Epoch => format!("epoch ({}): {} arcs, {span}", input.project, input.items.len()),
    }
}

/// `YYYY-MM-DD` of a unix time.
pub fn day(at: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at)
        .map(|t| format!("{:04}-{:02}-{:02}", t.year(), u8::from(t.month()), t.day()))
        .unwrap_or_else(|_| at.to_string())
}

fn render_line(line: &Line, max_cites: usize) -> String {
    let cites: Vec<&str> = line.cites.iter().take(max_cites).map(String::as_str).collect();
    if cites.is_empty() {
        format!("- {}: {}", line.class.as_str(), line.text)
    } else {
        format!("- {}: {} ({})", line.class.as_str(), line.text, cites.join(" "))
    }
}

/// Every classifiable line of the input, deduplicated (the same text from several items is one line citing them
/// all).
fn candidate_lines(input: &SummaryInput<'_>, max_chars: usize) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    let mut by_text: HashMap<String, usize> = HashMap::new();
    let mut push = |class: Class, text: String, cites: Vec<String>, lines: &mut Vec<Line>| {
        let key = normalized(&text);
        if key.trim().is_empty() {
            return;
        }
        match by_text.get(&key) {
            Some(&i) => {
                for cite in cites {
                    if !lines[i].cites.contains(&cite) {
                        lines[i].cites.push(cite);
                    }
                }
            }
            None => {
                by_text.insert(key, lines.len());
                let order = lines.len();
                lines.push(Line { class, text, cites, order });
            }
        }
    };
    for item in input.items {
        if input.kind == NodeKind::Session {
            let cite = format!("sam:msg:{}", item.id);
            if let Some(document) = document_lines(&item.content) {
                for (class, text, pointers) in document {
                    let mut text = clip(&text, max_chars);
                    if !pointers.is_empty() {
                        text = format!("{text} [{}]", pointers.join(" "));
                    }
                    push(class, text, vec![cite.clone()], &mut lines);
                }
                continue;
            }
            for sentence in sentences(&item.content) {
                if let Some(class) = classify(sentence) {
                    push(class, clip(sentence, max_chars), vec![cite.clone()], &mut lines);
                }
            }
        } else {
            // A child summary: its labelled lines keep their label and citations; other lines are classified.
            for raw in item.content.lines().skip(1) {
                let Some(body) = raw.trim().strip_prefix("- ") else { continue };
                let (class, rest) = match body.split_once(": ").and_then(|(l, r)| Class::parse(l).map(|c| (c, r))) {
                    Some(labelled) => labelled,
                    None => match classify(body) {
                        Some(class) => (class, body),
                        None => continue,
                    },
                };
                let (text, cites) = split_cites(rest);
                push(class, clip(text, max_chars), cites, &mut lines);
            }
        }
    }
    lines
}

/// A line's text and its trailing `(cite cite …)` citations.
fn split_cites(line: &str) -> (&str, Vec<String>) {
    if let Some(open) = line.rfind(" (")
        && line.ends_with(')')
    {
        let inner = &line[open + 2..line.len() - 1];
        let cites: Vec<String> = inner.split_whitespace().map(str::to_owned).collect();
        if !cites.is_empty() && cites.iter().all(|c| c.starts_with("sam:")) {
            return (&line[..open], cites);
        }
    }
    (line, Vec::new())
}

/// Sentences of a message: split at line breaks and at `.`, `!`, `?` followed by a space, except in an ellipsis
/// (`test x ... FAILED`) or before a digit or a lowercase letter (`FAILED. 2 passed`), so tool output stays whole.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.lines().flat_map(|line| {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let ellipsis = bytes[i] == b'.' && (i > 0 && bytes[i - 1] == b'.');
            let continues = bytes.get(i + 2).is_some_and(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
            if matches!(bytes[i], b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') && !ellipsis && !continues {
                out.push(&line[start..=i]);
                start = i + 2;
            }
        }
        out.push(&line[start..]);
        out.into_iter().map(str::trim).filter(|s| !s.is_empty())
    })
}

/// At most `max` characters, cut at a character boundary, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

/// What a typed document says, when a message's content is one (the runtime's wire form): its engrams (class by
/// kind, with their pointers), a brief's priorities, constraints and risks, a grant, and the free text of bodies,
/// questions and reasons (classified like any sentence). None when the content is not a JSON object.
fn document_lines(content: &str) -> Option<Vec<(Class, String, Vec<String>)>> {
    use serde_json::Value;
    let trimmed = content.trim_start();
    if !trimmed.starts_with('{') {
        return None;
    }
    let doc: Value = serde_json::from_str(trimmed).ok()?;
    let mut out = Vec::new();
    let strings = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        }
    };
    let engrams: Vec<&Value> = if doc.get("claim").is_some() {
        vec![&doc]
    } else {
        doc.get("engrams").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
    };
    for e in engrams {
        let Some(claim) = e.get("claim").and_then(Value::as_str) else { continue };
        let kind = e.get("kind").and_then(Value::as_str).unwrap_or("fact");
        let pointers = e.get("pointers").and_then(Value::as_array).map(|a| a.iter().filter_map(pointer_text).collect());
        out.push((Class::of_engram_kind(kind), claim.to_owned(), pointers.unwrap_or_default()));
    }
    for text in strings(doc.get("what_matters_now")) {
        out.push((classify(&text).unwrap_or(Class::Decision), text, Vec::new()));
    }
    for (key, class) in [("constraints", Class::Constraint), ("top_risks", Class::Risk), ("reason", Class::Risk)] {
        out.extend(strings(doc.get(key)).into_iter().map(|text| (class, text, Vec::new())));
    }
    for key in ["body", "question"] {
        for text in strings(doc.get(key)) {
            out.extend(sentences(&text).filter_map(|s| classify(s).map(|c| (c, s.to_owned(), Vec::new()))));
        }
    }
    if let (Some(grant), Some(grantee)) = (doc.get("grant_id").and_then(Value::as_str), doc.get("grantee")) {
        let patterns = strings(doc.get("patterns")).join(" ");
        let text = format!("grant {grant} to {} for {patterns}", grantee.as_str().unwrap_or("?"));
        out.push((Class::Decision, text, Vec::new()));
    }
    Some(out)
}

/// A pointer of a JSON document in its text form (documents carry the text form or the object form).
fn pointer_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(text) => Some(text.clone()),
        object => serde_json::from_value::<less_contract::Pointer>(object.clone()).ok().map(|p| p.to_string()),
    }
}

#[cfg(test)]
mod tests {
    //! The kinds a session summary keeps: commands, errors, obligations and decisions made, not proposed.

    use super::*;

    fn item(n: usize, role: &str, content: &str) -> SummaryItem {
        let counter = TokenCounter::shared(less_contract::Encoding::default());
        SummaryItem {
            id: format!("m-{n}"),
            role: role.to_owned(),
            content: content.to_owned(),
            tokens: counter.count(content) + 4,
            at: 1_767_603_600 + n as i64 * 60,
        }
    }

    /// A session of work: filler, then each kind once, then filler again.
    fn session() -> Vec<SummaryItem> {
        let mut items: Vec<SummaryItem> = (0..12)
            .map(|n| item(n, if n % 2 == 0 { "user" } else { "assistant" }, "Thanks, looking at the dashboards now."))
            .collect();
        let planted = [
            ("user", "We need to decide about the billing cache."),
            ("user", "Should we use Redis for the billing cache?"),
            ("assistant", "$ cargo test -p billing"),
            (
                "tool",
                "running 3 tests\ntest cache::evicts ... FAILED\nthread 'cache::evicts' panicked at src/cache.rs:41:9\n\
                 test result: FAILED. 2 passed; 1 failed",
            ),
            ("user", "TODO: switch the cache tests to the new clock."),
            ("user", "We decided to keep the billing cache in process for now."),
        ];
        for (role, content) in planted {
            let n = items.len();
            items.push(item(n, role, content));
        }
        for n in 0..12 {
            let n = items.len() + n;
            items.push(item(n, "assistant", "The meeting went fine and the weather is nice."));
        }
        items
    }

    fn summary_of(items: &[SummaryItem], level: Level) -> String {
        let input = SummaryInput { kind: NodeKind::Session, project: "p", session: Some("s"), items };
        let target = input.tokens() / if level == Level::Normal { 2 } else { 4 };
        extract(&input, level, target)
    }

    /// The summary's lines of `label` (`- label: text (cites)`).
    fn lines<'s>(summary: &'s str, label: &str) -> Vec<&'s str> {
        summary.lines().filter_map(|l| l.strip_prefix("- ")?.strip_prefix(label)?.strip_prefix(": ")).collect()
    }

    #[test]
    fn a_decision_proposed_or_asked_is_not_a_decision_and_one_made_is() {
        assert_eq!(classify("We need to decide about the billing cache."), Some(Class::Obligation));
        assert_eq!(classify("Should we use Redis for the billing cache?"), None);
        assert_eq!(classify("Maybe we'll go with Redis."), None);
        assert_eq!(classify("Надо решить, что делать с кэшем."), Some(Class::Obligation));
        assert_eq!(classify("We decided to keep the billing cache in process for now."), Some(Class::Decision));
        assert_eq!(classify("Решили хранить кэш в памяти процесса."), Some(Class::Decision));
        for level in [Level::Normal, Level::Aggressive] {
            let summary = summary_of(&session(), level);
            let decisions = lines(&summary, "decision");
            assert_eq!(decisions.len(), 1, "{summary}");
            assert!(decisions[0].starts_with("We decided to keep the billing cache in process"), "{summary}");
        }
    }

    #[test]
    fn a_todo_survives_as_an_obligation_whatever_else_it_says() {
        assert_eq!(classify("TODO: switch the cache tests to the new clock."), Some(Class::Obligation));
        assert_eq!(classify("// FIXME: this panics on empty input"), Some(Class::Obligation));
        for level in [Level::Normal, Level::Aggressive] {
            let summary = summary_of(&session(), level);
            assert!(
                lines(&summary, "obligation").iter().any(|l| l.starts_with("TODO: switch the cache tests")),
                "{summary}"
            );
        }
    }

    #[test]
    fn a_failing_cargo_test_survives_as_errors_citing_the_tool_message() {
        let summary = summary_of(&session(), Level::Normal);
        let errors = lines(&summary, "error");
        assert!(errors.iter().any(|l| l.starts_with("test cache::evicts ... FAILED")), "{summary}");
        assert!(
            errors.iter().any(|l| l.starts_with("thread 'cache::evicts' panicked at src/cache.rs:41:9")),
            "{summary}"
        );
        assert!(
            errors.iter().any(|l| l.starts_with("test result: FAILED. 2 passed; 1 failed (sam:msg:m-15)")),
            "{summary}"
        );
        // Under pressure the error still comes before constraints, pivots and commands.
        let aggressive = summary_of(&session(), Level::Aggressive);
        assert!(!lines(&aggressive, "error").is_empty(), "{aggressive}");
    }

    #[test]
    fn the_command_run_survives_in_the_session_summary() {
        let summary = summary_of(&session(), Level::Normal);
        assert_eq!(lines(&summary, "command"), ["$ cargo test -p billing (sam:msg:m-14)"], "{summary}");
    }

    #[test]
    fn an_obligation_in_words_survives_and_the_filler_does_not() {
        let mut items = session();
        let n = items.len();
        items.push(item(n, "user", "We need to renew the TLS certificate before Friday."));
        let summary = summary_of(&items, Level::Normal);
        assert!(lines(&summary, "obligation").iter().any(|l| l.starts_with("We need to renew the TLS")), "{summary}");
        assert!(!summary.contains("looking at the dashboards"), "{summary}");
    }
}
