//! The evaluation of `lessrt eval context`: scenario transcripts with checks for the six miss kinds of the
//! semantic RLE spec, run against every engine.
//!
//! Each scenario is a conversation generated from a fixed seed (planted facts, corrections, decisions, obligations,
//! questions, secrets and addresses among filler turns, some over 1,000 messages), plus checks. A check does not
//! look at an engine's internals: it reads the model-visible output as a reader would, message by message, and the
//! latest statement wins. A raw message counts as a statement when it says the thing; a ledger counts only through
//! the section that says it is current (an `Active facts` line, an `[active]` decision, an `[open]` obligation, an
//! `Unresolved questions` line). So a baseline that keeps the raw messages can pass, and a ledger that lists a stale
//! value as active fails.

use std::collections::BTreeMap;

use less_runtime::TokenCounter;
use less_runtime::context::{
    ChatMessage, CompactConfig, Engine, compact_report, compact_stats, is_ledger, ledger_section,
};
use serde_json::{Value, json};

/// The six ways a compacted context makes an assistant miss (the spec's "What counts as a miss").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MissKind {
    /// An inactive or superseded fact presented as current.
    StaleFact,
    /// A still-open obligation lost, or a closed one presented as open.
    LostObligation,
    /// A fact (or open question) of the cold history missing from the model-visible context.
    MissingFact,
    /// A raw secret or IP address from the cold history visible.
    SecretExposed,
    /// An older decision presented as current after a newer one superseded it.
    SupersededDecision,
    /// A user's correction lost (the corrected value is not the current one).
    CorrectionLost,
}

impl MissKind {
    /// All kinds, in the spec's order.
    pub const ALL: [MissKind; 6] = [
        MissKind::StaleFact,
        MissKind::LostObligation,
        MissKind::MissingFact,
        MissKind::SecretExposed,
        MissKind::SupersededDecision,
        MissKind::CorrectionLost,
    ];

    /// A stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            MissKind::StaleFact => "stale_fact",
            MissKind::LostObligation => "lost_obligation",
            MissKind::MissingFact => "missing_fact",
            MissKind::SecretExposed => "secret_exposed",
            MissKind::SupersededDecision => "superseded_decision",
            MissKind::CorrectionLost => "correction_lost",
        }
    }

    /// What the check guards against, in words.
    pub const fn label(self) -> &'static str {
        match self {
            MissKind::StaleFact => "stale fact used as current",
            MissKind::LostObligation => "lost obligation",
            MissKind::MissingFact => "fact missing from context",
            MissKind::SecretExposed => "raw secret or IP exposed",
            MissKind::SupersededDecision => "superseded decision used",
            MissKind::CorrectionLost => "correction lost",
        }
    }
}

/// One scenario: a transcript and its checks.
#[derive(Debug, Clone)]
pub struct EvalCase {
    /// A short stable name.
    pub name: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// The hot tail every engine keeps.
    pub hot_tail: usize,
    checks: Vec<Check>,
}

impl EvalCase {
    /// How many checks the scenario has.
    pub fn n_checks(&self) -> usize {
        self.checks.len()
    }

    /// Reads `output` (what an engine made of this scenario) as the checks do: each check's kind, what it looks
    /// for, and whether the output gets it right.
    pub fn check(&self, output: &[ChatMessage]) -> Vec<(MissKind, String, bool)> {
        self.checks.iter().map(|c| (c.kind, c.probe.to_string(), c.probe.passes(output))).collect()
    }
}

#[derive(Debug, Clone)]
struct Check {
    kind: MissKind,
    probe: Probe,
}

/// What a reader of the output must find.
#[derive(Debug, Clone)]
enum Probe {
    /// The latest visible statement of `subject` names `current` (among the values it ever had). A ledger states
    /// through every *Active facts* line that names the subject, under whatever key: it states `current` only when
    /// there is one such line and it names `current`, since every active line is presented as current.
    Fact { subject: String, current: String, values: Vec<String> },
    /// Nothing the message `text` says is presented as an open obligation (an `[open]` line whose entry is part of
    /// it): an acknowledgement, a promise with no task in it, an instruction about the notes themselves.
    NotAnObligation { text: String },
    /// The question naming `phrase` is not presented as unresolved once answered. `events` are the raw messages
    /// that ask or answer it, with whether it is open after each.
    Answered { phrase: String, events: Vec<(String, bool)> },
    /// A reader can find where a subject was discussed: a ledger's *Retrieval notes*, or a raw message, name one of
    /// `words`.
    Topic { words: Vec<String> },
    /// The obligation is visible as open (`open`), or is not presented as open. `events` are the raw messages
    /// that open or close it, with whether it is open after each.
    Obligation { phrase: String, open: bool, events: Vec<(String, bool)> },
    /// The latest visible decision among `current` and `older` is `current`. `asides` are raw messages that name an
    /// option without deciding it (a proposal, a question): a reader of the raw messages skips them.
    Decision { current: String, older: Vec<String>, asides: Vec<String> },
    /// The open question is visible.
    Question { phrase: String },
    /// The text appears nowhere in the output.
    Absent { text: String },
}

/// The checks passed by one engine.
#[derive(Debug, Clone)]
pub struct EngineScore {
    /// The engine.
    pub engine: Engine,
    /// Checks passed and checks run, per miss kind.
    pub by_kind: BTreeMap<MissKind, (usize, usize)>,
    /// Tokens of every scenario's output, summed.
    pub tokens_out: u64,
    /// `scenario: kind: what` of each failed check.
    pub failures: Vec<String>,
}

impl EngineScore {
    /// Checks passed and run, over all kinds.
    pub fn total(&self) -> (usize, usize) {
        self.by_kind.values().fold((0, 0), |(p, t), (pp, tt)| (p + pp, t + tt))
    }
}

/// The evaluation of every engine over the scenarios.
#[derive(Debug, Clone)]
pub struct EvalReport {
    /// Scenarios run.
    pub n_scenarios: usize,
    /// Messages in all scenarios.
    pub n_messages: usize,
    /// Tokens of all scenarios' input.
    pub tokens_in: u64,
    /// One score per engine, ledger first.
    pub engines: Vec<EngineScore>,
    /// The ledger compacted again: is it stable?
    pub recompaction: Recompaction,
}

/// How the ledger behaves when a compacted conversation is compacted again.
#[derive(Debug, Clone, Default)]
pub struct Recompaction {
    /// Scenarios whose compacted output, compacted again, is byte for byte the same; and scenarios run.
    pub idempotent: (usize, usize),
    /// Checks passed and run when the conversation is compacted in two steps: its first half, then that output
    /// with the rest of the conversation appended (what a long chat compacted as it grows sees).
    pub continued: (usize, usize),
    /// `scenario: what` of each scenario that changed on a second compaction or failed a check when continued.
    pub failures: Vec<String>,
}

/// Runs every engine over `scenarios`. The truncation baseline gets, per scenario, the token budget the ledger
/// used, so the comparison is at equal size.
pub fn evaluate(scenarios: &[EvalCase]) -> EvalReport {
    let counter = TokenCounter::shared(CompactConfig::default().encoding);
    let mut report = EvalReport {
        n_scenarios: scenarios.len(),
        n_messages: 0,
        tokens_in: 0,
        engines: Vec::new(),
        recompaction: Recompaction::default(),
    };
    for engine in Engine::ALL {
        report.engines.push(EngineScore {
            engine,
            by_kind: MissKind::ALL.iter().map(|k| (*k, (0, 0))).collect(),
            tokens_out: 0,
            failures: Vec::new(),
        });
    }
    for scenario in scenarios {
        report.n_messages += scenario.messages.len();
        let base = CompactConfig { hot_tail: scenario.hot_tail, ..CompactConfig::default() };
        let ledger_out = compact_report(&scenario.messages, &base).messages;
        // The truncation baseline gets the ledger's size even where the ledger was not used (it would not have
        // made the chat smaller, so `compact` returned the chat unchanged).
        let ledger_full = compact_report(&scenario.messages, &CompactConfig { keep_if_larger: true, ..base }).messages;
        let ledger_tokens: u32 = ledger_full
            .iter()
            .filter(|m| m.is_system() && is_ledger(&m.content))
            .map(|m| counter.count(&m.content))
            .sum();
        report.tokens_in += compact_stats(&scenario.messages, &ledger_out, &base).tokens_in;
        recompact(scenario, &base, &ledger_out, &mut report.recompaction);
        for score in &mut report.engines {
            let output = match score.engine {
                Engine::Ledger => ledger_out.clone(),
                engine => {
                    let config = CompactConfig { engine, budget_tokens: ledger_tokens, ..base };
                    compact_report(&scenario.messages, &config).messages
                }
            };
            score.tokens_out += compact_stats(&scenario.messages, &output, &base).tokens_out;
            for (kind, what, passed) in scenario.check(&output) {
                let entry = score.by_kind.entry(kind).or_default();
                entry.1 += 1;
                if passed {
                    entry.0 += 1;
                } else {
                    score.failures.push(format!("{}: {}: {what}", scenario.name, kind.as_str()));
                }
            }
        }
    }
    report
}

impl EvalReport {
    /// The report as JSON: {"scenarios", "messages", "tokens_in", "engines": {name: {"passed", "checks",
    /// "tokens_out", "by_kind", "failures"}}, "recompaction": {"idempotent", "continued", "failures"}}.
    pub fn to_json(&self) -> Value {
        let engines: serde_json::Map<String, Value> = self
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
        let recompaction = &self.recompaction;
        json!({
            "scenarios": self.n_scenarios,
            "messages": self.n_messages,
            "tokens_in": self.tokens_in,
            "engines": engines,
            "recompaction": {
                "idempotent": {"stable": recompaction.idempotent.0, "scenarios": recompaction.idempotent.1},
                "continued": {"passed": recompaction.continued.0, "checks": recompaction.continued.1},
                "failures": recompaction.failures,
            },
        })
    }
}

/// The table of `lessrt eval context`, line by line, under `title`: one row per miss kind, one column per engine
/// and report (a paraphrase run's `dev` and `held_out` splits side by side), then the ledger's re-compaction.
pub fn table_lines(title: &str, reports: &[(&str, EvalReport)]) -> Vec<String> {
    let mut lines = Vec::new();
    let cell = |(passed, total): (usize, usize)| format!("{passed}/{total}");
    let n_scenarios: usize = reports.iter().map(|(_, r)| r.n_scenarios).sum();
    let n_messages: usize = reports.iter().map(|(_, r)| r.n_messages).sum();
    let tokens_in: u64 = reports.iter().map(|(_, r)| r.tokens_in).sum();
    lines.push(format!("{title}: {n_scenarios} scenarios, {n_messages} messages, {tokens_in} tokens in"));
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
    lines.push(format!("{:<30}{}", "miss kind (checks passed)", header.join("")));
    let widths: Vec<usize> = header.iter().map(String::len).collect();
    let score = |engine: Engine, r: usize| reports[r].1.engines.iter().find(|s| s.engine == engine);
    let row = |label: &str, value: &dyn Fn(Engine, usize) -> String| {
        let cells: Vec<String> =
            columns.iter().zip(&widths).map(|((engine, r), width)| format!("{:>width$}", value(*engine, *r))).collect();
        format!("{label:<30}{}", cells.join(""))
    };
    for kind in MissKind::ALL {
        lines.push(row(kind.label(), &|engine, r| {
            cell(score(engine, r).and_then(|s| s.by_kind.get(&kind).copied()).unwrap_or_default())
        }));
    }
    lines.push(row("total", &|engine, r| cell(score(engine, r).map(|s| s.total()).unwrap_or_default())));
    lines.push(row("tokens out", &|engine, r| score(engine, r).map(|s| s.tokens_out).unwrap_or_default().to_string()));
    for (name, report) in reports {
        let recompaction = &report.recompaction;
        let which = if reports.len() > 1 { format!(" ({name})") } else { String::new() };
        lines.push(format!(
            "ledger re-compaction{which}: {} of {} outputs unchanged when compacted again; {} checks passed \
             when compacted in two steps",
            recompaction.idempotent.0,
            recompaction.idempotent.1,
            cell(recompaction.continued),
        ));
    }
    lines
}

/// Compacts the ledger's output again (it must not change), and the conversation in two steps (the checks must
/// still pass).
fn recompact(scenario: &EvalCase, base: &CompactConfig, ledger_out: &[ChatMessage], into: &mut Recompaction) {
    into.idempotent.1 += 1;
    if compact_report(ledger_out, base).messages == ledger_out {
        into.idempotent.0 += 1;
    } else {
        into.failures.push(format!("{}: a second compaction changed the output", scenario.name));
    }
    let n_non_system = scenario.messages.iter().filter(|m| !m.is_system()).count();
    let mut n_seen = 0;
    let cut = scenario
        .messages
        .iter()
        .position(|m| {
            n_seen += usize::from(!m.is_system());
            n_seen > n_non_system / 2
        })
        .unwrap_or(scenario.messages.len());
    let mut continued = compact_report(&scenario.messages[..cut], base).messages;
    continued.extend_from_slice(&scenario.messages[cut..]);
    let continued = compact_report(&continued, base).messages;
    for (kind, what, passed) in scenario.check(&continued) {
        into.continued.1 += 1;
        if passed {
            into.continued.0 += 1;
        } else {
            into.failures.push(format!("{}: continued: {}: {what}", scenario.name, kind.as_str()));
        }
    }
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Probe::Fact { subject, current, .. } => write!(f, "{subject} is {current}"),
            Probe::Obligation { phrase, open, .. } => {
                write!(f, "{phrase} is {}", if *open { "open" } else { "not open" })
            }
            Probe::Decision { current, .. } => write!(f, "current decision: {current}"),
            Probe::Question { phrase } => write!(f, "open question: {phrase}"),
            Probe::Absent { text } => write!(f, "absent: {text}"),
            Probe::NotAnObligation { text } => write!(f, "not an obligation: {text}"),
            Probe::Answered { phrase, .. } => write!(f, "answered question: {phrase}"),
            Probe::Topic { words } => write!(f, "retrieval notes name: {}", words.join(" or ")),
        }
    }
}

impl Probe {
    /// Whether a reader of `output` gets this right.
    fn passes(&self, output: &[ChatMessage]) -> bool {
        match self {
            Probe::Fact { subject, current, values } => {
                let subject = subject.to_lowercase();
                // `None` in `latest`: a ledger stated the subject ambiguously (two active lines, or one naming no
                // value the subject had).
                let mut latest: Option<Option<&String>> = None;
                for message in output {
                    if message.is_system() && is_ledger(&message.content) {
                        let lines: Vec<&str> = ledger_section(&message.content, "Active facts")
                            .into_iter()
                            .filter(|line| line.to_lowercase().contains(&subject))
                            .collect();
                        match lines.as_slice() {
                            [] => {}
                            [line] => {
                                let value = line.split_once(": ").map_or(*line, |(_, value)| value);
                                latest = Some(last_mentioned(value, values));
                            }
                            _ => latest = Some(None),
                        }
                    } else if message.content.to_lowercase().contains(&subject) {
                        latest = last_mentioned(&message.content, values).map(Some).or(latest);
                    }
                }
                latest == Some(Some(current))
            }
            Probe::Obligation { phrase, open, events } => {
                let phrase = phrase.to_lowercase();
                let mut presented_open: Option<bool> = None;
                for message in output {
                    if message.is_system() && is_ledger(&message.content) {
                        let lines: Vec<&str> = ledger_section(&message.content, "Obligations")
                            .into_iter()
                            .filter(|l| l.to_lowercase().contains(&phrase))
                            .collect();
                        if !lines.is_empty() {
                            presented_open = Some(lines.iter().any(|l| l.starts_with("- [open]")));
                        }
                    } else if let Some((_, open_after)) = events.iter().find(|(text, _)| *text == message.content) {
                        presented_open = Some(*open_after);
                    }
                }
                if *open { presented_open == Some(true) } else { presented_open != Some(true) }
            }
            Probe::Decision { current, older, asides } => {
                let mut latest: Option<bool> = None; // Some(true): current; Some(false): an older one.
                for message in output.iter().filter(|m| !asides.contains(&m.content)) {
                    if message.is_system() && is_ledger(&message.content) {
                        let active: Vec<&str> = ledger_section(&message.content, "Decisions")
                            .into_iter()
                            .filter(|l| l.starts_with("- [active]"))
                            .collect();
                        let has_current = active.iter().any(|l| l.contains(current.as_str()));
                        let has_older = active.iter().any(|l| older.iter().any(|o| l.contains(o.as_str())));
                        if has_current || has_older {
                            latest = Some(has_current && !has_older);
                        }
                    } else if message.content.contains(current.as_str()) {
                        latest = Some(true);
                    } else if older.iter().any(|o| message.content.contains(o.as_str())) {
                        latest = Some(false);
                    }
                }
                latest == Some(true)
            }
            Probe::Question { phrase } => output.iter().any(|message| {
                if message.is_system() && is_ledger(&message.content) {
                    ledger_section(&message.content, "Unresolved questions").iter().any(|l| l.contains(phrase.as_str()))
                } else {
                    message.content.contains(phrase.as_str())
                }
            }),
            Probe::Absent { text } => output.iter().all(|m| !m.content.contains(text.as_str())),
            Probe::NotAnObligation { text } => {
                let text = text.to_lowercase();
                output.iter().filter(|m| m.is_system() && is_ledger(&m.content)).all(|message| {
                    ledger_section(&message.content, "Obligations").iter().all(|line| {
                        let Some(entry) = line.strip_prefix("- [open] ") else { return true };
                        let entry = entry.rsplit_once(" (#").map_or(entry, |(entry, _)| entry).to_lowercase();
                        entry.trim().is_empty() || !text.contains(entry.trim())
                    })
                })
            }
            Probe::Answered { phrase, events } => {
                let mut presented_open: Option<bool> = None;
                for message in output {
                    if message.is_system() && is_ledger(&message.content) {
                        let section = ledger_section(&message.content, "Unresolved questions");
                        presented_open = Some(section.iter().any(|l| l.contains(phrase.as_str())));
                    } else if let Some((_, open_after)) = events.iter().find(|(text, _)| *text == message.content) {
                        presented_open = Some(*open_after);
                    }
                }
                presented_open != Some(true)
            }
            Probe::Topic { words } => output.iter().any(|message| {
                let has_word = |text: &str| {
                    let text = text.to_lowercase();
                    words.iter().any(|w| text.contains(&w.to_lowercase()))
                };
                if message.is_system() && is_ledger(&message.content) {
                    ledger_section(&message.content, "Retrieval notes").iter().any(|l| has_word(l))
                } else {
                    has_word(&message.content)
                }
            }),
        }
    }
}

/// Of `values`, the one mentioned last in `text`.
fn last_mentioned<'v>(text: &str, values: &'v [String]) -> Option<&'v String> {
    let lower = text.to_lowercase();
    values
        .iter()
        .filter_map(|v| lower.rfind(&v.to_lowercase()).map(|pos| (pos, v)))
        .max_by_key(|(pos, _)| *pos)
        .map(|(_, v)| v)
}

mod paraphrase;
mod suite;
pub use paraphrase::{N_HELD_OUT, ParaphraseSuite, Split, paraphrase_suite};
pub use suite::suite;

#[cfg(test)]
mod tests;
