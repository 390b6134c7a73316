//! The ledger's text: rendering the state as the one system message, and parsing a rendered ledger back.
//!
//! The format is Markdown a model reads directly and this module reads back exactly: `parse(render(s)) == s` for
//! every state the extractor builds (the idempotence of `compact` rests on it). Every entry is one line ending in a
//! citation group ` (#N…)`; entry texts never hold a newline, and the citation is found from the right, so text
//! that happens to contain ` (#` cannot confuse it.

use std::fmt::Write as _;

use super::extract::{
    Credential, Decision, DecisionStatus, Fact, FactValue, LedgerState, Obligation, ObligationStatus, Question, Topic,
};

/// The first line of every ledger message.
pub const LEDGER_HEADER: &str = "Semantic RLE context ledger";

/// The section headings, in order.
pub const SECTIONS: [&str; 7] = [
    "Active facts",
    "Decisions",
    "Obligations",
    "Superseded facts",
    "Unresolved questions",
    "Credential refs",
    "Retrieval notes",
];

const READING_RULES: &str = "Reading rules: Active facts, [open] obligations and [active] decisions are current; \
Superseded facts and [superseded] decisions are not. Secrets appear only as credential refs. \
Each entry cites the message it came from as #N; ask for a message by its index to read it whole.";

/// Renders the ledger message. `tail_start` is the index of the first verbatim message after it.
pub(crate) fn render(state: &LedgerState, tail_start: usize, n_tail: usize) -> String {
    let mut out = String::with_capacity(1024);
    out.push_str(LEDGER_HEADER);
    out.push('\n');
    match (state.first_compacted, state.last_compacted) {
        (Some(first), Some(last)) => {
            let _ = writeln!(out, "Compacted: {} messages (#{first}-#{last}).", state.n_compacted);
        }
        _ => out.push_str("Compacted: 0 messages.\n"),
    }
    let _ = writeln!(out, "Verbatim tail: {n_tail} messages from #{tail_start}.");
    out.push_str(READING_RULES);
    out.push('\n');

    let facts = state.facts_by_recency();
    section(&mut out, SECTIONS[0]);
    for fact in &facts {
        let corrected = if fact.current.corrected { ", corrected" } else { "" };
        let _ = writeln!(out, "- {}: {} (#{}{corrected})", fact.subject, fact.current.value, fact.current.idx);
    }
    section(&mut out, SECTIONS[1]);
    if state.n_omitted_decisions > 0 {
        let _ = writeln!(out, "- (+{} earlier superseded decisions)", state.n_omitted_decisions);
    }
    for decision in &state.decisions {
        match decision.status {
            DecisionStatus::Active => {
                let _ = writeln!(out, "- [active] {} (#{})", decision.text, decision.idx);
            }
            DecisionStatus::SupersededBy(by) => {
                let _ = writeln!(out, "- [superseded] {} (#{}, superseded by #{by})", decision.text, decision.idx);
            }
        }
    }
    section(&mut out, SECTIONS[2]);
    if state.n_omitted_obligations > 0 {
        let _ = writeln!(out, "- (+{} earlier closed obligations)", state.n_omitted_obligations);
    }
    for obligation in &state.obligations {
        let (tag, meta) = match obligation.status {
            ObligationStatus::Open => ("open", String::new()),
            ObligationStatus::Reopened(at) => ("open", format!(", reopened #{at}")),
            ObligationStatus::Done(at) => ("done", format!(", done #{at}")),
            ObligationStatus::Cancelled(at) => ("cancelled", format!(", cancelled #{at}")),
        };
        let _ = writeln!(out, "- [{tag}] {} (#{}{meta})", obligation.text, obligation.idx);
    }
    section(&mut out, SECTIONS[3]);
    for fact in facts.iter().filter(|f| !f.superseded.is_empty()) {
        let mut line = format!("- {}: ", fact.subject);
        if fact.n_omitted > 0 {
            let _ = write!(line, "(+{} earlier); ", fact.n_omitted);
        }
        let values: Vec<String> = fact
            .superseded
            .iter()
            .enumerate()
            .map(|(pos, v)| {
                let by = fact.superseded.get(pos + 1).unwrap_or(&fact.current).idx;
                format!("{} (#{}, superseded by #{by})", v.value, v.idx)
            })
            .collect();
        line.push_str(&values.join("; "));
        out.push_str(&line);
        out.push('\n');
    }
    section(&mut out, SECTIONS[4]);
    for question in &state.questions {
        let _ = writeln!(out, "- {} (#{}, {})", question.text, question.idx, question.role);
    }
    section(&mut out, SECTIONS[5]);
    let mut credentials: Vec<&Credential> = state.credentials.values().collect();
    credentials.sort_by(|a, b| a.first_idx.cmp(&b.first_idx).then_with(|| a.reference.cmp(&b.reference)));
    for credential in credentials {
        let mentions = if credential.n_mentions == 1 { "mention" } else { "mentions" };
        let _ = writeln!(
            out,
            "- {} ({}; #{}, {} {mentions})",
            credential.reference, credential.kind, credential.first_idx, credential.n_mentions
        );
    }
    section(&mut out, SECTIONS[6]);
    for (word, topic) in state.top_topics() {
        let indexes: Vec<String> = topic.first.iter().chain(&topic.last).map(|i| format!("#{i}")).collect();
        let messages = if topic.n_messages == 1 { "message" } else { "messages" };
        let _ = writeln!(out, "- \"{word}\": {} {messages} ({})", topic.n_messages, indexes.join(", "));
    }
    // No trailing newline: the message ends with its last line.
    out.truncate(out.trim_end().len());
    out
}

fn section(out: &mut String, name: &str) {
    let _ = writeln!(out, "## {name}");
}

/// Whether a message's content is a ledger [`compact`](super::compact) rendered (its first line is
/// [`LEDGER_HEADER`]).
pub fn is_ledger(content: &str) -> bool {
    content.starts_with(LEDGER_HEADER) && content[LEDGER_HEADER.len()..].starts_with('\n')
}

/// The entry lines (`- …`) of one section of a rendered ledger, `name` being one of [`SECTIONS`]: what a reader of
/// the compacted conversation finds under `## name`.
pub fn ledger_section<'c>(ledger: &'c str, name: &str) -> Vec<&'c str> {
    let heading = format!("## {name}");
    let mut inside = false;
    let mut lines = Vec::new();
    for line in ledger.lines() {
        if line.starts_with("## ") {
            inside = line == heading;
        } else if inside && line.starts_with("- ") {
            lines.push(line);
        }
    }
    lines
}

/// A parsed ledger: its state and the index its verbatim tail started at.
pub(crate) struct Parsed {
    pub state: LedgerState,
    pub tail_start: Option<usize>,
}

/// Parses a rendered ledger; lines it does not understand are skipped (a hand-edited ledger loses only those).
pub(crate) fn parse(content: &str) -> Parsed {
    let mut state = LedgerState::default();
    let mut tail_start = None;
    let mut current: Option<usize> = None;
    for line in content.lines().skip(1) {
        if let Some(name) = line.strip_prefix("## ") {
            current = SECTIONS.iter().position(|s| *s == name);
            continue;
        }
        let Some(section) = current else {
            if let Some(rest) = line.strip_prefix("Compacted: ") {
                parse_compacted(rest, &mut state);
            } else if let Some(rest) = line.strip_prefix("Verbatim tail: ") {
                tail_start = rest.rsplit_once("from #").and_then(|(_, n)| n.trim_end_matches('.').parse().ok());
            }
            continue;
        };
        let Some(entry) = line.strip_prefix("- ") else { continue };
        // A malformed line is skipped, never fatal.
        let _ = match section {
            0 => parse_active_fact(entry, &mut state),
            1 => parse_decision(entry, &mut state),
            2 => parse_obligation(entry, &mut state),
            3 => parse_superseded(entry, &mut state),
            4 => parse_question(entry, &mut state),
            5 => parse_credential(entry, &mut state),
            _ => parse_topic(entry, &mut state),
        };
    }
    Parsed { state, tail_start }
}

fn parse_compacted(rest: &str, state: &mut LedgerState) {
    let Some((count, range)) = rest.split_once(" messages") else { return };
    state.n_compacted = count.parse().unwrap_or(0);
    let range = range.trim().trim_start_matches('(').trim_end_matches(['.', ')']);
    if let Some((first, last)) = range.split_once('-') {
        state.first_compacted = first.trim_start_matches('#').parse().ok();
        state.last_compacted = last.trim_start_matches('#').parse().ok();
    }
}

/// Splits `text (#N, meta)` into the text, N and the meta after the first comma.
fn split_citation(entry: &str) -> Option<(&str, usize, &str)> {
    let open = entry.rfind(" (#")?;
    let inner = entry[open + 3..].strip_suffix(')')?;
    let (idx, meta) = inner.split_once(", ").unwrap_or((inner, ""));
    Some((&entry[..open], idx.parse().ok()?, meta))
}

/// `#N` at the end of a meta item such as `done #40`.
fn trailing_index(meta: &str) -> Option<usize> {
    meta.rsplit_once('#')?.1.parse().ok()
}

fn parse_active_fact(entry: &str, state: &mut LedgerState) -> Option<()> {
    let (text, idx, meta) = split_citation(entry)?;
    let (subject, value) = text.split_once(": ")?;
    let current = FactValue { value: value.to_owned(), idx, corrected: meta == "corrected" };
    state.facts.insert(
        subject.to_owned(),
        Fact { subject: subject.to_owned(), current, superseded: Vec::new(), n_omitted: 0 },
    );
    Some(())
}

fn parse_superseded(entry: &str, state: &mut LedgerState) -> Option<()> {
    let (subject, chain) = entry.split_once(": ")?;
    let fact = state.facts.get_mut(subject)?;
    for item in chain.split("; ") {
        if let Some(n) = omitted(item, "earlier") {
            fact.n_omitted = n;
            continue;
        }
        let (value, idx, _) = split_citation(item)?;
        fact.superseded.push(FactValue { value: value.to_owned(), idx, corrected: false });
    }
    Some(())
}

/// The count of an omission line such as `(+12 earlier closed obligations)`.
fn omitted(entry: &str, what: &str) -> Option<usize> {
    entry.strip_prefix("(+")?.strip_suffix(')')?.strip_suffix(what)?.strip_suffix(' ')?.parse().ok()
}

/// Splits `[tag] text (#N, meta)`.
fn split_tagged(entry: &str) -> Option<(&str, &str, usize, &str)> {
    let (tag, rest) = entry.strip_prefix('[')?.split_once("] ")?;
    let (text, idx, meta) = split_citation(rest)?;
    Some((tag, text, idx, meta))
}

fn parse_decision(entry: &str, state: &mut LedgerState) -> Option<()> {
    if let Some(n) = omitted(entry, "earlier superseded decisions") {
        state.n_omitted_decisions = n;
        return Some(());
    }
    let (tag, text, idx, meta) = split_tagged(entry)?;
    let status = match tag {
        "active" => DecisionStatus::Active,
        "superseded" => DecisionStatus::SupersededBy(trailing_index(meta)?),
        _ => return None,
    };
    state.decisions.push(Decision::new(text.to_owned(), idx, status));
    Some(())
}

fn parse_obligation(entry: &str, state: &mut LedgerState) -> Option<()> {
    if let Some(n) = omitted(entry, "earlier closed obligations") {
        state.n_omitted_obligations = n;
        return Some(());
    }
    let (tag, text, idx, meta) = split_tagged(entry)?;
    let status = match (tag, meta) {
        ("open", "") => ObligationStatus::Open,
        ("open", _) => ObligationStatus::Reopened(trailing_index(meta)?),
        ("done", _) => ObligationStatus::Done(trailing_index(meta)?),
        ("cancelled", _) => ObligationStatus::Cancelled(trailing_index(meta)?),
        _ => return None,
    };
    state.obligations.push(Obligation::new(text.to_owned(), idx, status));
    Some(())
}

fn parse_question(entry: &str, state: &mut LedgerState) -> Option<()> {
    let (text, idx, role) = split_citation(entry)?;
    state.questions.push(Question::new(text.to_owned(), idx, role.to_owned()));
    Some(())
}

fn parse_credential(entry: &str, state: &mut LedgerState) -> Option<()> {
    let (reference, rest) = entry.split_once(" (")?;
    let (kind, rest) = rest.strip_suffix(')')?.split_once("; #")?;
    let (first, mentions) = rest.split_once(", ")?;
    let n_mentions = mentions.split_once(' ')?.0.parse().ok()?;
    state.credentials.insert(
        reference.to_owned(),
        Credential {
            reference: reference.to_owned(),
            kind: kind.to_owned(),
            first_idx: first.parse().ok()?,
            n_mentions,
        },
    );
    Some(())
}

fn parse_topic(entry: &str, state: &mut LedgerState) -> Option<()> {
    let (word, rest) = entry.strip_prefix('"')?.split_once("\": ")?;
    let (count, indexes) = rest.split_once(" messages (").or_else(|| rest.split_once(" message ("))?;
    let indexes: Vec<usize> = indexes
        .strip_suffix(')')?
        .split(", ")
        .map(|i| i.trim_start_matches('#').parse())
        .collect::<Result<_, _>>()
        .ok()?;
    let split = indexes.len().min(super::extract::TOPIC_FIRST);
    let topic =
        Topic { n_messages: count.parse().ok()?, first: indexes[..split].to_vec(), last: indexes[split..].to_vec() };
    state.topics.insert(word.to_owned(), topic);
    Some(())
}
