//! Extraction: reads redacted cold messages, clause by clause, into the ledger's state.
//!
//! The state is what the ledger renders and what a rendered ledger parses back to (`ledger.rs`), so compacting an
//! already compacted conversation starts from the first ledger and loses nothing of it.
//! Everything here is linear in the input: entries are found through maps keyed by their normalized text, and the
//! lists that could grow without bound (superseded values, closed obligations, superseded decisions) keep their
//! newest entries and count the rest.

use std::collections::{BTreeMap, HashMap};

use super::redact::Redacted;
use super::rules::{Act, COMPILED, CORRECTION_HINTS, DECISION_WORDS, Matches, SECRET_KEYS, TASKLESS_WORDS, regex};

/// Superseded values kept per subject; older ones are counted.
pub(crate) const MAX_SUPERSEDED_PER_SUBJECT: usize = 8;
/// Closed obligations kept; older ones are counted.
pub(crate) const MAX_CLOSED_OBLIGATIONS: usize = 24;
/// Superseded decisions kept; older ones are counted.
pub(crate) const MAX_SUPERSEDED_DECISIONS: usize = 24;
/// Topics listed in the retrieval notes.
pub(crate) const MAX_TOPICS: usize = 12;
/// Message indexes shown per topic: the first ones and the last ones.
pub(crate) const TOPIC_FIRST: usize = 2;
pub(crate) const TOPIC_LAST: usize = 3;
/// How many messages back a retraction (`scratch that, use X`) reaches for the fact it takes back.
pub(crate) const RETRACTION_REACH: usize = 3;
/// The most words a retraction's statements hold past their markers (`use 9443`, `make that March 17 instead`).
const MAX_RETRACTION_WORDS: usize = 4;
/// Longest entry text kept, in characters.
const MAX_ENTRY_CHARS: usize = 200;

/// What the clauses of one message tell each other while it is read.
struct Reading {
    /// Subjects whose value a clause stated.
    touched: Vec<String>,
    /// Whether a clause opened with a retraction marker.
    retraction: bool,
    /// Whether a fact was stated just before the message, for a retraction to take back.
    retractable: bool,
    /// What followed the last retraction marker.
    retraction_rest: Option<String>,
    /// Whether a clause made a decision.
    decided: bool,
}

/// One value a subject had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FactValue {
    pub value: String,
    /// The message that stated it.
    pub idx: usize,
    /// Whether that message said it corrects something.
    pub corrected: bool,
}

/// A subject's history: the current value and what it superseded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fact {
    pub subject: String,
    pub current: FactValue,
    /// Older values, oldest first; each was superseded by the next one (or by `current`).
    pub superseded: Vec<FactValue>,
    /// Older values no longer listed.
    pub n_omitted: usize,
}

/// Whether a decision holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecisionStatus {
    Active,
    /// Superseded by the decision of this message.
    SupersededBy(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub text: String,
    pub idx: usize,
    pub status: DecisionStatus,
    /// `normalize(text)` and `content_words(text)`, computed once: entries are compared on every clause.
    key: String,
    words: Vec<String>,
    /// The options the decision names (lowercase) and the stems of what it is about: derived from the text alone,
    /// so a parsed ledger keys its decisions exactly as the extractor did.
    options: Vec<String>,
    subject: Vec<String>,
}

impl Decision {
    pub(crate) fn new(text: String, idx: usize, status: DecisionStatus) -> Decision {
        let options = option_tokens(&text);
        let subject = decision_subject(&text, &options);
        Decision { key: normalize(&text), words: content_words(&text), options, subject, text, idx, status }
    }

    /// Whether `self` and a decision naming `options` about `subject` decide the same thing: both name an option
    /// and they share most of the smaller subject.
    fn same_subject(&self, options: &[String], subject: &[String]) -> bool {
        !self.options.is_empty() && !options.is_empty() && overlaps(&self.subject, subject)
    }
}

/// An obligation's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObligationStatus {
    Open,
    /// Open again since this message.
    Reopened(usize),
    Done(usize),
    Cancelled(usize),
}

impl ObligationStatus {
    pub(crate) fn is_open(self) -> bool {
        matches!(self, ObligationStatus::Open | ObligationStatus::Reopened(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Obligation {
    pub text: String,
    pub idx: usize,
    pub status: ObligationStatus,
    /// `content_words(text)`, computed once.
    words: Vec<String>,
}

impl Obligation {
    pub(crate) fn new(text: String, idx: usize, status: ObligationStatus) -> Obligation {
        Obligation { words: content_words(&text), text, idx, status }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    pub text: String,
    pub idx: usize,
    pub role: String,
    /// `normalize(text)` and `content_words(text)`, computed once.
    key: String,
    words: Vec<String>,
}

impl Question {
    pub(crate) fn new(text: String, idx: usize, role: String) -> Question {
        Question { key: normalize(&text), words: content_words(&text), text, idx, role }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credential {
    pub reference: String,
    pub kind: String,
    pub first_idx: usize,
    pub n_mentions: usize,
}

/// A word that recurs in the compacted messages, with where.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Topic {
    pub n_messages: usize,
    /// The first [`TOPIC_FIRST`] indexes.
    pub first: Vec<usize>,
    /// The last [`TOPIC_LAST`] indexes after `first`.
    pub last: Vec<usize>,
}

/// Everything the ledger knows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LedgerState {
    /// Facts by subject key.
    pub facts: BTreeMap<String, Fact>,
    /// Decisions in the order they were made.
    pub decisions: Vec<Decision>,
    pub n_omitted_decisions: usize,
    /// Obligations in the order they were made.
    pub obligations: Vec<Obligation>,
    pub n_omitted_obligations: usize,
    /// Unresolved questions in the order they were asked.
    pub questions: Vec<Question>,
    /// Credentials by reference.
    pub credentials: BTreeMap<String, Credential>,
    /// Topics by word.
    pub topics: HashMap<String, Topic>,
    /// Compacted messages: count, first and last index.
    pub n_compacted: usize,
    pub first_compacted: Option<usize>,
    pub last_compacted: Option<usize>,
}

impl LedgerState {
    /// Reads one cold message (already redacted) at conversation index `idx`.
    pub(crate) fn ingest(&mut self, idx: usize, role: &str, redacted: &Redacted) {
        self.n_compacted += 1;
        self.first_compacted = Some(self.first_compacted.map_or(idx, |f| f.min(idx)));
        self.last_compacted = Some(self.last_compacted.map_or(idx, |l| l.max(idx)));
        for (reference, kind) in &redacted.credentials {
            let entry = self.credentials.entry(reference.clone()).or_insert_with(|| Credential {
                reference: reference.clone(),
                kind: (*kind).to_owned(),
                first_idx: idx,
                n_mentions: 0,
            });
            entry.n_mentions += 1;
        }
        self.note_topics(idx, &redacted.text);
        // Subjects known before this message: a message that names one of them may restate its value in any words.
        let known: Vec<String> = self.facts.keys().cloned().collect();
        // The fact a retraction in this message would take back: the one stated last, just before it.
        let retractable = self.recent_fact(idx);
        let mut reading = Reading {
            touched: Vec::new(),
            retraction: false,
            retractable: retractable.is_some(),
            retraction_rest: None,
            decided: false,
        };
        let mut statements: Vec<&str> = Vec::new();
        for clause in clauses(&redacted.text) {
            if let Some(read) = self.ingest_clause(idx, role, clause, &mut reading) {
                statements.push(read);
            }
        }
        let hinted = CORRECTION_HINTS.iter().any(|h| redacted.text.to_lowercase().contains(h));
        let restated = self.restated_value(idx, &known, &reading.touched, &statements, hinted);
        if !restated
            && reading.touched.is_empty()
            && !reading.decided
            && let Some(subject) = retractable
            && (reading.retraction || hinted)
        {
            self.retracted_value(idx, &subject, &statements, reading.retraction_rest.as_deref());
        }
        for clause in &statements {
            self.answered_by(idx, clause);
        }
    }

    /// The subject stated last, if that was at most [`RETRACTION_REACH`] messages before `idx` and nothing (a
    /// decision, an obligation) was said after it: what `scratch that, use X` takes back.
    fn recent_fact(&self, idx: usize) -> Option<String> {
        let (subject, fact) = self.facts.iter().max_by_key(|(_, f)| f.current.idx)?;
        let after = |other: usize| other > fact.current.idx;
        let later_entry = self.decisions.iter().any(|d| after(d.idx)) || self.obligations.iter().any(|o| after(o.idx));
        (idx.saturating_sub(fact.current.idx) <= RETRACTION_REACH && !later_entry).then(|| subject.clone())
    }

    /// A short retraction naming no subject the ledger knows, with one new value (a value-like token, or the one
    /// word after the retraction marker): the value replaces the one stated last. A longer one speaks of something
    /// else (`No, the support email isn't X, it's Y`).
    fn retracted_value(&mut self, idx: usize, subject: &str, statements: &[&str], rest: Option<&str>) {
        if statements.iter().map(|s| s.split_whitespace().count()).sum::<usize>() > MAX_RETRACTION_WORDS {
            return;
        }
        let Some(fact) = self.facts.get(subject) else { return };
        let current = fact.current.value.to_lowercase();
        let subject_words = content_words(subject);
        let mut candidates: Vec<String> = value_tokens(&statements.join(" "))
            .into_iter()
            .filter(|(value, negated)| {
                let lower = value.to_lowercase();
                !negated
                    && lower != current
                    && !lower.split_whitespace().all(|w| subject_words.iter().any(|s| s == w))
                    && !lower.starts_with("credential_ref")
            })
            .map(|(value, _)| value)
            .collect();
        candidates.dedup();
        if candidates.is_empty()
            && let Some(word) = rest.map(|r| r.trim().trim_end_matches(['.', '!']).trim())
            && !word.is_empty()
            && !word.contains(char::is_whitespace)
            && word.to_lowercase() != current
        {
            candidates.push(word.to_owned());
        }
        if let [value] = candidates.as_slice() {
            let subject = subject.to_owned();
            self.fact(idx, &subject, value, true);
        }
    }

    /// A statement sharing most of an open question's words, and saying something beside them, answers it.
    fn answered_by(&mut self, idx: usize, clause: &str) {
        let words: Vec<String> = content_words(clause).iter().map(|w| stem(w)).collect();
        self.questions.retain(|q| {
            if q.idx >= idx {
                return true;
            }
            let theirs: Vec<String> = q.words.iter().map(|w| stem(w)).collect();
            let shared = theirs.iter().filter(|w| words.contains(w)).count();
            let beside = words.iter().any(|w| !theirs.contains(w));
            !(shared >= 2 && shared * 3 >= theirs.len() * 2 && beside)
        });
    }

    /// Reads one clause; when it is a plain statement (neither a question nor an obligation), what it states: the
    /// clause without its leading markers (`Noted:`, `Scratch that,`).
    fn ingest_clause<'c>(&mut self, idx: usize, role: &str, clause: &'c str, reading: &mut Reading) -> Option<&'c str> {
        let mut matches = COMPILED.scan(clause);
        let mut corrected = false;
        let mut retraction = false;
        let mut text = clause;
        if let Some(rest) = matches.first(Act::Correction).and_then(|caps| caps.name("rest")) {
            text = rest.as_str();
            corrected = true;
            reading.retraction = true;
            matches = COMPILED.scan(text);
        }
        // An acknowledgement restates: what follows it is read, the acknowledgement itself is nothing. A decision
        // by structure reads the clause whole, where an option opening what follows still stands past its first
        // word (`OK, Kafka it is for the queue`).
        let whole = text;
        if let Some(rest) = matches.first(Act::Acknowledgement).and_then(|caps| caps.name("rest")) {
            text = rest.as_str();
            matches = COMPILED.scan(text);
        }
        // A marker that closes an obligation wins over every other reading (`cancel: …`, `отмена: …`); failing
        // that, a retraction marker is stripped and the rest read.
        let mut by_marker = self.closing(idx, text, &matches);
        if !by_marker && let Some(rest) = matches.first(Act::Retraction).and_then(|caps| caps.name("rest")) {
            text = rest.as_str();
            corrected = true;
            retraction = true;
            reading.retraction = true;
            reading.retraction_rest = Some(text.to_owned());
            matches = COMPILED.scan(text);
            by_marker = self.closing(idx, text, &matches);
        }
        // An instruction about the notes themselves (`forget the earlier values`) is neither a task nor a fact.
        if !by_marker && matches.first(Act::Forget).is_some() && matches.first(Act::Earlier).is_some() {
            return Some(text);
        }
        // Right after a fact, a retraction takes its value back: it decides nothing.
        let retracting = retraction && reading.retractable;
        let touched = &mut reading.touched;
        if !by_marker && let Some(rest) = matches.first(Act::Obligation).and_then(|c| c.name("rest")) {
            by_marker = true;
            self.obligation(Act::Obligation, idx, rest.as_str());
        }
        let mut is_obligation = by_marker;
        let mut is_decision = false;
        if by_marker || retracting {
            // Read as an obligation, or a value taken back: no decision.
        } else if let Some((act, caps)) =
            matches.first_of(&[Act::DecisionChanged, Act::DecisionContrast, Act::Decision])
        {
            let rest = caps.name("rest").map_or(text, |m| m.as_str());
            let old = matches.first(Act::DecisionReplaces).and_then(|c| c.name("old").map(|m| m.as_str().to_owned()));
            is_decision = self.decision(act, idx, rest, old.as_deref());
        } else if let Some(rest) = matches.first(Act::Commitment).and_then(|c| c.name("rest"))
            && !self.is_decision_by_structure(rest.as_str(), &COMPILED.scan(rest.as_str()))
        {
            // A commitment, unless what is committed to is itself a choice (`we'll stick with Kafka for the queue`).
            is_obligation = true;
            self.obligation(Act::Obligation, idx, rest.as_str());
        } else if let whole_matches = (whole.len() != text.len()).then(|| COMPILED.scan(whole))
            && self.is_decision_by_structure(whole, whole_matches.as_ref().unwrap_or(&matches))
        {
            is_decision = self.decision(Act::Decision, idx, whole, None);
        }
        reading.decided |= is_decision;
        let mut is_question = false;
        // A request phrased as a question (`can you …?`) is an obligation only; a commitment that embeds a question
        // (`someone should find out who …`) is both.
        let is_request = is_obligation && !by_marker && text.trim_end().ends_with('?');
        if let Some((act, caps)) = matches.first_of(&[Act::Answer, Act::Question]).filter(|_| !is_request) {
            let rest = caps.name("rest").map_or("", |m| m.as_str());
            if act == Act::Answer {
                self.answer(rest);
            } else if content_words(rest).len() >= 2 {
                is_question = true;
                self.question(idx, role, rest);
            }
        }
        if is_obligation || is_question {
            return None;
        }
        self.facts_of(idx, text, corrected, &matches, is_decision, touched, true);
        Some(text)
    }

    /// A decision by structure: the clause names an option, neither asks nor hedges, and has a verb of choice or is
    /// about the subject of an earlier decision.
    fn is_decision_by_structure(&self, text: &str, matches: &Matches<'_>) -> bool {
        if text.trim_end().ends_with('?') || matches.first(Act::Hedge).is_some() {
            return false;
        }
        let options = option_tokens(text);
        if options.is_empty() {
            return false;
        }
        let subject = decision_subject(text, &options);
        let decided_before = self.decisions.iter().any(|d| d.same_subject(&options, &subject));
        // A new value of a subject the facts already hold is a fact, unless that subject has been decided on.
        let known_fact = matches
            .rules_of(Act::Fact)
            .filter_map(|rule| regex(rule).captures(text))
            .filter_map(|caps| caps.name("subject"))
            .any(|s| self.facts.contains_key(&canonical_subject(&normalize(s.as_str()))));
        if known_fact && !decided_before {
            return false;
        }
        matches.first(Act::Choice).is_some() || decided_before
    }

    /// A message that names exactly one subject the ledger knew before it, without a fact rule reading it, and
    /// holds exactly one new value-like token (or ends in `— value`), restates that subject's value: "any later
    /// value for the same subject supersedes the earlier one", whatever the wording.
    fn restated_value(
        &mut self,
        idx: usize,
        known: &[String],
        touched: &[String],
        statements: &[&str],
        hinted: bool,
    ) -> bool {
        if statements.is_empty() || known.is_empty() {
            return false;
        }
        let text = statements.join(" ");
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')).collect();
        let named: Vec<&String> = known
            .iter()
            .filter(|key| {
                let subject_words = content_words(key);
                !subject_words.is_empty()
                    && subject_words.iter().all(|w| words.iter().any(|word| word.starts_with(stem(w).as_str())))
            })
            .collect();
        let [subject] = named.as_slice() else { return false };
        if touched.contains(subject) {
            return false;
        }
        let Some(fact) = self.facts.get(*subject) else { return false };
        let current = fact.current.value.to_lowercase();
        let subject_words = content_words(subject);
        let mut candidates: Vec<String> = value_tokens(&text)
            .into_iter()
            .filter(|(value, negated)| {
                let value_lower = value.to_lowercase();
                !negated
                    && value_lower != current
                    && !value_lower.split_whitespace().all(|w| subject_words.iter().any(|s| s == w))
                    && !value_lower.starts_with("credential_ref")
            })
            .map(|(value, _)| value)
            .collect();
        if candidates.is_empty()
            && let Some(tail) = dash_tail(&text)
            && tail.to_lowercase() != current
            && !subject_words.iter().all(|w| tail.to_lowercase().contains(w.as_str()))
        {
            candidates.push(tail);
        }
        candidates.dedup();
        if let [value] = candidates.as_slice() {
            let subject = (*subject).clone();
            return self.fact(idx, &subject, value, hinted);
        }
        false
    }

    /// Closing, cancelling or reopening markers: every matching rule is tried in table order until one finds the
    /// obligation it speaks of. True when one did; a marker that closes nothing says nothing about obligations.
    fn closing(&mut self, idx: usize, text: &str, matches: &Matches<'_>) -> bool {
        for act in [Act::ObligationCancelled, Act::ObligationDone, Act::ObligationReopened] {
            let rules: Vec<usize> = matches.rules_of(act).collect();
            for rule in rules {
                let rest = regex(rule).captures(text).and_then(|c| c.name("rest")).map_or("", |m| m.as_str());
                if self.obligation(act, idx, rest) {
                    return true;
                }
            }
        }
        false
    }

    /// Records an obligation act; true when it opened, closed or reopened one (or found it already so).
    fn obligation(&mut self, act: Act, idx: usize, rest: &str) -> bool {
        let text = entry_text(rest);
        if content_words(&text).is_empty() {
            return false;
        }
        match act {
            Act::Obligation => {
                // A promise with no task in it (`I'll keep that in mind`) commits to nothing to track.
                if content_words(&text).iter().all(|w| TASKLESS_WORDS.contains(&w.as_str())) {
                    return false;
                }
                if let Some(existing) = self.best_obligation(&text, |_| true) {
                    let existing = &mut self.obligations[existing];
                    if !existing.status.is_open() {
                        existing.status = ObligationStatus::Reopened(idx);
                    }
                    return true;
                }
                self.obligations.push(Obligation::new(text, idx, ObligationStatus::Open));
                true
            }
            Act::ObligationDone | Act::ObligationCancelled => {
                let Some(existing) = self.best_obligation(&text, |o| o.status.is_open()) else { return false };
                self.obligations[existing].status = if act == Act::ObligationDone {
                    ObligationStatus::Done(idx)
                } else {
                    ObligationStatus::Cancelled(idx)
                };
                true
            }
            _ => {
                let Some(existing) = self.best_obligation(&text, |o| !o.status.is_open()) else { return false };
                self.obligations[existing].status = ObligationStatus::Reopened(idx);
                true
            }
        }
    }

    /// The obligation `text` refers to: the most recent one among those sharing most of its content words.
    fn best_obligation(&self, text: &str, eligible: impl Fn(&Obligation) -> bool) -> Option<usize> {
        let words = content_words(text);
        let mut best: Option<(usize, usize)> = None;
        for (pos, obligation) in self.obligations.iter().enumerate() {
            if !eligible(obligation) {
                continue;
            }
            let theirs = &obligation.words;
            let shared = words.iter().filter(|w| theirs.contains(w)).count();
            // Most of the shorter one's words must be shared, so "renew the certificate" does not close
            // "renew the domain".
            let needed = words.len().min(theirs.len()).div_ceil(2).max(1);
            let needed = if words.len().min(theirs.len()) >= 2 { needed.max(2) } else { needed };
            if shared >= needed && best.is_none_or(|(_, s)| shared >= s) {
                best = Some((pos, shared));
            }
        }
        best.map(|(pos, _)| pos)
    }

    /// Records a decision; true when the clause was one. Any later decision about the same subject (both naming an
    /// option) supersedes the earlier ones, whatever the words; an explicit change (`decision changed:`, `instead of
    /// X`) also supersedes the decision it names, or the most similar one.
    fn decision(&mut self, act: Act, idx: usize, rest: &str, old: Option<&str>) -> bool {
        let text = entry_text(rest);
        if content_words(&text).is_empty() {
            return false;
        }
        let key = normalize(&text);
        let mut replaced = match (act, old) {
            (Act::Decision, _) => None,
            (_, Some(old)) => {
                let old = old.trim_end_matches(['.', '-', '#', '+']).to_lowercase();
                self.decisions.iter().rposition(|d| d.status == DecisionStatus::Active && d.words.contains(&old))
            }
            (Act::DecisionChanged, None) => self.most_similar_active_decision(&text),
            _ => None,
        };
        if act == Act::DecisionContrast && replaced.is_none() && old.is_none() {
            // "instead" with nothing it replaces is conversation, not a decision.
            return false;
        }
        let existing = self.decisions.iter().rposition(|d| d.key == key);
        if replaced == existing {
            replaced = None;
        }
        let new = Decision::new(text, idx, DecisionStatus::Active);
        // A decision naming an option an earlier decision named is about that decision's subject too, whatever else
        // it says (`let's go back to Kafka`).
        let related: Vec<Vec<String>> = self
            .decisions
            .iter()
            .filter(|d| d.options.iter().any(|o| new.options.contains(o)))
            .map(|d| d.subject.clone())
            .collect();
        for (pos, decision) in self.decisions.iter_mut().enumerate() {
            let same = decision.same_subject(&new.options, &new.subject)
                || related.iter().any(|subject| decision.same_subject(&new.options, subject));
            if decision.status == DecisionStatus::Active && Some(pos) != existing && (same || Some(pos) == replaced) {
                decision.status = DecisionStatus::SupersededBy(idx);
            }
        }
        match existing {
            Some(pos) => {
                let decision = &mut self.decisions[pos];
                if decision.status != DecisionStatus::Active {
                    decision.status = DecisionStatus::Active;
                    decision.idx = idx;
                }
            }
            None => self.decisions.push(new),
        }
        true
    }

    /// The latest active decision sharing most words with `text`, or the latest active one.
    fn most_similar_active_decision(&self, text: &str) -> Option<usize> {
        let words = content_words(text);
        let mut best: Option<(usize, usize)> = None;
        for (pos, decision) in self.decisions.iter().enumerate() {
            if decision.status != DecisionStatus::Active {
                continue;
            }
            let shared = decision.words.iter().filter(|w| words.contains(w)).count();
            if best.is_none_or(|(_, s)| shared >= s) {
                best = Some((pos, shared));
            }
        }
        best.map(|(pos, _)| pos)
    }

    fn question(&mut self, idx: usize, role: &str, rest: &str) {
        let text = entry_text(rest);
        let key = normalize(&text);
        if self.questions.iter().any(|q| q.key == key) {
            return;
        }
        self.questions.push(Question::new(text, idx, role.to_owned()));
    }

    /// An explicit answer resolves the open question sharing most of its words (at least two, or all of a short one).
    fn answer(&mut self, rest: &str) {
        let words = content_words(rest);
        let mut best: Option<(usize, usize)> = None;
        for (pos, question) in self.questions.iter().enumerate() {
            let theirs = &question.words;
            let shared = theirs.iter().filter(|w| words.contains(w)).count();
            if shared >= 2.min(theirs.len()) && shared > 0 && best.is_none_or(|(_, s)| shared >= s) {
                best = Some((pos, shared));
            }
        }
        if let Some((pos, _)) = best {
            self.questions.remove(pos);
        }
    }

    /// Reads the facts of a statement; true when it found one. Failing the fact rules, the key/value shape (not in a
    /// decision), then the same after a short preamble (once).
    #[allow(clippy::too_many_arguments)] // One clause's whole reading; a struct would only rename the arguments.
    fn facts_of(
        &mut self,
        idx: usize,
        text: &str,
        corrected: bool,
        matches: &Matches<'_>,
        is_decision: bool,
        touched: &mut Vec<String>,
        preamble: bool,
    ) -> bool {
        let mut found = false;
        let rules: Vec<usize> = matches.rules_of(Act::Fact).collect();
        for rule in rules {
            let mut at = 0;
            while let Some(caps) = regex(rule).captures_at(text, at) {
                let (Some(subject), Some(value)) = (caps.name("subject"), caps.name("value")) else { break };
                let value_text = cut_value(value.as_str());
                at = value.start() + value_text.len().max(1);
                if at > text.len() {
                    break;
                }
                while !text.is_char_boundary(at) {
                    at += 1;
                }
                found |= self.fact_touching(idx, subject.as_str(), value_text, corrected, touched);
            }
        }
        if !found
            && !is_decision
            && let Some(caps) = matches.first(Act::KeyValue)
            && let (Some(subject), Some(value)) = (caps.name("subject"), caps.name("value"))
            && is_short_key(subject.as_str(), 3)
            && is_short_key(value.as_str(), 3)
            && !value.as_str().contains(['—', '–', '=', ':'])
        {
            found |= self.fact_touching(idx, subject.as_str(), cut_value(value.as_str()), corrected, touched);
        }
        if !found
            && preamble
            && let Some(caps) = matches.first(Act::Preamble)
            && let (Some(pre), Some(rest)) = (caps.name("pre"), caps.name("rest"))
        {
            let pre = pre.as_str().to_lowercase();
            let hinted = corrected || CORRECTION_HINTS.iter().any(|h| pre.contains(h));
            let rest = rest.as_str();
            let inner = COMPILED.scan(rest);
            found = self.facts_of(idx, rest, hinted, &inner, is_decision, touched, false);
        }
        found
    }

    /// [`LedgerState::fact`], noting the subject it touched; true when it stored a value.
    fn fact_touching(
        &mut self,
        idx: usize,
        subject: &str,
        value: &str,
        corrected: bool,
        touched: &mut Vec<String>,
    ) -> bool {
        let key = canonical_subject(&normalize(subject));
        let stored = self.fact(idx, subject, value, corrected);
        if stored && !touched.contains(&key) {
            touched.push(key);
        }
        stored
    }

    fn fact(&mut self, idx: usize, subject: &str, value: &str, corrected: bool) -> bool {
        let value = value.trim().trim_matches(['"', '\'', '`', '«', '»']).trim();
        let lower = value.to_lowercase();
        if value.is_empty() || lower.starts_with("not ") || lower.starts_with("не ") || lower == "not" {
            return false;
        }
        let subject = normalize(subject);
        if subject.is_empty() || STOPWORDS.contains(&subject.as_str()) {
            return false;
        }
        // An acknowledgement (`noted`, `updated`, `принял`) is never a subject: it restates another one.
        if COMPILED
            .scan(&subject)
            .first(Act::Acknowledgement)
            .is_some_and(|c| c.name("rest").is_none_or(|r| r.is_empty()))
        {
            return false;
        }
        // The value of a key named like a secret is one, whether or not a detector recognized its shape: never
        // echoed.
        if SECRET_KEYS.iter().any(|k| subject.contains(k)) && !lower.starts_with(super::CREDENTIAL_REF_PREFIX) {
            return false;
        }
        let subject = canonical_subject(&subject);
        let new = FactValue { value: value.to_owned(), idx, corrected };
        // A fact answers the open questions that name its subject.
        let subject_words = content_words(&subject);
        if !subject_words.is_empty() {
            self.questions.retain(|q| !subject_words.iter().all(|w| q.words.contains(w)));
        }
        match self.facts.get_mut(&subject) {
            None => {
                self.facts
                    .insert(subject.clone(), Fact { subject, current: new, superseded: Vec::new(), n_omitted: 0 });
            }
            Some(fact) if fact.current.value.eq_ignore_ascii_case(value) => {
                fact.current.corrected |= corrected;
            }
            Some(fact) => {
                let old = std::mem::replace(&mut fact.current, new);
                fact.superseded.push(old);
                if fact.superseded.len() > MAX_SUPERSEDED_PER_SUBJECT {
                    let excess = fact.superseded.len() - MAX_SUPERSEDED_PER_SUBJECT;
                    fact.superseded.drain(..excess);
                    fact.n_omitted += excess;
                }
            }
        }
        true
    }

    fn note_topics(&mut self, idx: usize, text: &str) {
        let mut seen: Vec<String> = Vec::new();
        for word in content_words(text) {
            // Topics are words of letters only: a run with digits may be an identifier or a secret no detector knew.
            let n_chars = word.chars().count();
            if !(4..=24).contains(&n_chars)
                || !word.chars().all(|c| c.is_alphabetic() || c == '-')
                || seen.contains(&word)
                || word.contains("credential")
                || word.contains("redacted")
            {
                continue;
            }
            let topic = self.topics.entry(word.clone()).or_default();
            topic.n_messages += 1;
            if topic.first.len() < TOPIC_FIRST {
                topic.first.push(idx);
            } else {
                topic.last.push(idx);
                if topic.last.len() > TOPIC_LAST {
                    topic.last.remove(0);
                }
            }
            seen.push(word);
        }
    }

    /// Trims the lists that could grow without bound, counting what it drops.
    pub(crate) fn prune(&mut self) {
        let n_closed = self.obligations.iter().filter(|o| !o.status.is_open()).count();
        if n_closed > MAX_CLOSED_OBLIGATIONS {
            let mut to_drop = n_closed - MAX_CLOSED_OBLIGATIONS;
            self.n_omitted_obligations += to_drop;
            self.obligations.retain(|o| {
                if to_drop > 0 && !o.status.is_open() {
                    to_drop -= 1;
                    false
                } else {
                    true
                }
            });
        }
        let n_superseded = self.decisions.iter().filter(|d| d.status != DecisionStatus::Active).count();
        if n_superseded > MAX_SUPERSEDED_DECISIONS {
            let mut to_drop = n_superseded - MAX_SUPERSEDED_DECISIONS;
            self.n_omitted_decisions += to_drop;
            self.decisions.retain(|d| {
                if to_drop > 0 && d.status != DecisionStatus::Active {
                    to_drop -= 1;
                    false
                } else {
                    true
                }
            });
        }
    }

    /// The facts, the least recently stated first.
    pub(crate) fn facts_by_recency(&self) -> Vec<&Fact> {
        let mut facts: Vec<&Fact> = self.facts.values().collect();
        facts.sort_by(|a, b| a.current.idx.cmp(&b.current.idx).then_with(|| a.subject.cmp(&b.subject)));
        facts
    }

    /// The topics the retrieval notes list: words of the ledger's entries, never chatter however often repeated.
    /// The words of the facts' subjects first, then the words of the other current entries (active decisions, open
    /// obligations, questions); within each, most messages first, then by word.
    pub(crate) fn top_topics(&self) -> Vec<(&String, &Topic)> {
        let stems = |texts: &mut dyn Iterator<Item = &str>| -> Vec<String> {
            texts.flat_map(content_words).map(|w| stem(&w)).collect()
        };
        let subjects = stems(&mut self.facts.keys().map(String::as_str));
        let entries = stems(
            &mut self
                .decisions
                .iter()
                .filter(|d| d.status == DecisionStatus::Active)
                .map(|d| d.text.as_str())
                .chain(self.obligations.iter().filter(|o| o.status.is_open()).map(|o| o.text.as_str()))
                .chain(self.questions.iter().map(|q| q.text.as_str())),
        );
        let tier = |word: &str| {
            let stem = stem(word);
            if subjects.contains(&stem) {
                Some(0)
            } else if entries.contains(&stem) {
                Some(1)
            } else {
                None
            }
        };
        let mut topics: Vec<(usize, &String, &Topic)> = self
            .topics
            .iter()
            .filter_map(|(w, t)| tier(w).map(|tier| (tier, w, t)))
            // A subject's word is listed from its first message (a later compaction keeps counting it); other
            // words once they recur.
            .filter(|(tier, _, t)| *tier == 0 || t.n_messages >= 2)
            .collect();
        topics
            .sort_by(|a, b| a.0.cmp(&b.0).then_with(|| b.2.n_messages.cmp(&a.2.n_messages)).then_with(|| a.1.cmp(b.1)));
        topics.truncate(MAX_TOPICS);
        topics.into_iter().map(|(_, w, t)| (w, t)).collect()
    }
}

/// A subject without the words that qualify a statement rather than name a thing (`right memory limit`,
/// `cache cluster now`, `сервер сборки ещё раз поменялся`), when something is left.
fn canonical_subject(subject: &str) -> String {
    let words: Vec<&str> = subject.split_whitespace().collect();
    let qualifier = |w: &&str| SUBJECT_QUALIFIERS.contains(w) || STOPWORDS.contains(w);
    let start = words.iter().position(|w| !qualifier(w)).unwrap_or(words.len());
    let end = words.iter().rposition(|w| !qualifier(w)).map_or(start, |e| e + 1);
    if start >= end {
        return subject.to_owned();
    }
    words[start..end].join(" ")
}

/// The first five characters of a word: enough to match its other forms (`queue`/`queues`, `очереди`/`очередей`).
fn stem(word: &str) -> String {
    word.chars().take(5).collect()
}

/// Whether two subjects (stems) share more than half of the smaller one.
fn overlaps(a: &[String], b: &[String]) -> bool {
    let shared = a.iter().filter(|w| b.contains(w)).count();
    shared > 0 && shared * 2 > a.len().min(b.len())
}

/// The options a clause names: identifiers (a digit, a capital inside the word), proper names (a capital past the
/// clause's first word) and Latin words in Cyrillic text; lowercase, in order.
pub(crate) fn option_tokens(text: &str) -> Vec<String> {
    let cyrillic = text.chars().any(|c| matches!(c, 'а'..='я' | 'А'..='Я' | 'ё' | 'Ё'));
    let mut out: Vec<String> = Vec::new();
    for (pos, raw) in text.split_whitespace().enumerate() {
        let token = raw.trim_matches(|c: char| !(c.is_alphanumeric() || c == '+' || c == '#'));
        let lower = token.to_lowercase();
        if token.chars().count() < 2
            || STOPWORDS.contains(&lower.as_str())
            || matches!(lower.as_str(), "ok" | "okay")
            || lower.starts_with("credential_ref")
        {
            continue;
        }
        let mut chars = token.chars();
        let first_upper = chars.next().is_some_and(char::is_uppercase);
        let inner_upper = chars.any(char::is_uppercase);
        let has_digit = token.chars().any(|c| c.is_ascii_digit());
        let latin_in_cyrillic = cyrillic && token.chars().any(|c| c.is_ascii_alphabetic()) && token.is_ascii();
        if (has_digit || inner_upper || (first_upper && pos > 0) || latin_in_cyrillic) && !out.contains(&lower) {
            out.push(lower);
        }
    }
    out
}

/// What a decision is about: the stems of its content words that are neither options nor words of deciding.
fn decision_subject(text: &str, options: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in content_words(text) {
        if options.contains(&word) || DECISION_WORDS.contains(&word.as_str()) {
            continue;
        }
        let stem = stem(&word);
        if !out.contains(&stem) {
            out.push(stem);
        }
    }
    out
}

/// The value-like tokens of a text (a digit, a capital past the first word, `.`/`@`/`-`/`_`/`+`/`/` inside, or
/// Latin in Cyrillic text), adjacent ones joined (`March 17`, `512 MB`), each with whether a negation precedes it.
fn value_tokens(text: &str) -> Vec<(String, bool)> {
    let cyrillic = text.chars().any(|c| matches!(c, 'а'..='я' | 'А'..='Я' | 'ё' | 'Ё'));
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut negated = false;
    let mut previous: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<&str>, negated: bool, out: &mut Vec<(String, bool)>| {
        if !run.is_empty() {
            out.push((run.join(" "), negated));
            run.clear();
        }
    };
    for (pos, raw) in text.split_whitespace().enumerate() {
        let token = raw.trim_matches(|c: char| !(c.is_alphanumeric() || c == '+' || c == '[' || c == ']'));
        let lower = token.to_lowercase();
        let inner = token.get(1..token.len().saturating_sub(1)).unwrap_or("");
        let mut chars = token.chars();
        let first_upper = chars.next().is_some_and(char::is_uppercase);
        let inner_upper = chars.any(char::is_uppercase);
        let valued = (token.chars().count() >= 2 || token.chars().all(|c| c.is_ascii_digit()))
            && !token.is_empty()
            && !STOPWORDS.contains(&lower.as_str())
            && (token.chars().any(|c| c.is_ascii_digit())
                || inner_upper
                || (first_upper && pos > 0)
                || inner.contains(['.', '@', '-', '_', '+', '/'])
                || (cyrillic && token.is_ascii() && token.chars().any(|c| c.is_ascii_alphabetic())));
        if valued {
            if run.is_empty() {
                negated = previous.iter().rev().take(2).any(|w| NEGATIONS.contains(&w.as_str()));
            }
            run.push(token);
        } else {
            flush(&mut run, negated, &mut out);
        }
        previous.push(lower);
        // A token ending a phrase (`old,`) ends the run, and a negation before it (`not X, Y`) reaches no further.
        if raw.ends_with([',', ';', '.']) {
            flush(&mut run, negated, &mut out);
            previous.clear();
        }
    }
    flush(&mut run, negated, &mut out);
    out
}

/// Words after which a value is the one rejected (`not X`, `instead of X`, `не X`, `вместо X`).
const NEGATIONS: [&str; 9] = ["not", "isn't", "wasn't", "never", "instead", "of", "не", "вместо", "нет"];

/// The short value ending a text after a dash, colon or equals sign (`… правильно — среда`), if any.
fn dash_tail(text: &str) -> Option<String> {
    let cut = text.rfind(['—', '–', ':', '='])?;
    let tail = text[cut..].trim_start_matches(['—', '–', ':', '=']).trim().trim_end_matches(['.', '!']).trim();
    let n_words = tail.split_whitespace().count();
    (1..=3).contains(&n_words).then(|| tail.to_owned())
}

/// A key or value of the key/value shape: at most `max_words` words, none of them a stopword past a leading
/// article (so `Here is the build log` is no key).
fn is_short_key(text: &str, max_words: usize) -> bool {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let body = match words.first() {
        Some(&("the" | "our" | "my" | "наш" | "наша" | "мой" | "моя")) => &words[1..],
        _ => &words[..],
    };
    !body.is_empty() && words.len() <= max_words && body.iter().all(|w| !STOPWORDS.contains(w))
}

/// The clauses of a text: split after `.`, `!`, `?` followed by whitespace, and at newlines and `;`.
pub(crate) fn clauses(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut pieces = Vec::new();
    for (pos, &b) in bytes.iter().enumerate() {
        let boundary = match b {
            b'\n' | b';' => Some(pos),
            b'.' | b'!' | b'?' if bytes.get(pos + 1).is_some_and(u8::is_ascii_whitespace) => Some(pos + 1),
            _ => None,
        };
        if let Some(end) = boundary {
            pieces.push(&text[start..end]);
            start = end + usize::from(matches!(b, b'\n' | b';'));
        }
    }
    pieces.push(&text[start..]);
    pieces.into_iter().map(str::trim).filter(|c| !c.is_empty())
}

/// Cuts a captured fact value at the end of its phrase: a conjunction, a sentence end or a dash.
fn cut_value(value: &str) -> &str {
    const CUTS: [&str; 14] = [
        " and ",
        " but ",
        " so ",
        " because ",
        " which ",
        " while ",
        " until ",
        " и ",
        " но ",
        " а ",
        " потому ",
        " так как ",
        ". ",
        " — ",
    ];
    let lower = value.to_lowercase();
    let mut end = value.len();
    // `to_lowercase` keeps byte offsets for the ASCII and Cyrillic letters the cuts are made of only when the text
    // lowercases to the same byte length; otherwise the value is kept whole.
    if lower.len() == value.len() {
        for cut in CUTS {
            if let Some(pos) = lower.find(cut) {
                end = end.min(pos);
            }
        }
    }
    value[..end].trim_end().trim_end_matches(['.', ':']).trim_end()
}

/// One line of entry text: whitespace collapsed, at most [`MAX_ENTRY_CHARS`] characters.
fn entry_text(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = collapsed.trim_end_matches(['.', ',', ';', ':', '!']).trim();
    if trimmed.chars().count() > MAX_ENTRY_CHARS {
        let mut cut: String = trimmed.chars().take(MAX_ENTRY_CHARS).collect();
        cut.push('…');
        cut
    } else {
        trimmed.to_owned()
    }
}

/// A key for comparing entries: lowercase, whitespace collapsed, without trailing punctuation.
pub(crate) fn normalize(text: &str) -> String {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let mut joined = words.join(" ");
    let trimmed_len = joined.trim_end_matches(['.', ',', ';', ':', '!', '?']).len();
    joined.truncate(trimmed_len);
    joined.strip_prefix("the ").map(str::to_owned).unwrap_or(joined)
}

/// The content words of a text: lowercase letter/digit runs that are not stopwords.
pub(crate) fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .map(|w| w.trim_matches('-').to_lowercase())
        .filter(|w| w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .collect()
}

/// Words at the edge of a fact's subject that qualify the statement, not the thing (`now`, `right`, `новый`,
/// `ещё раз поменялся`).
const SUBJECT_QUALIFIERS: &[&str] = &[
    "now",
    "currently",
    "again",
    "today",
    "right",
    "correct",
    "new",
    "latest",
    "current",
    "actual",
    "updated",
    "changed",
    "moved",
    "once",
    "more",
    "теперь",
    "сейчас",
    "снова",
    "опять",
    "ещё",
    "еще",
    "раз",
    "правильный",
    "правильная",
    "правильное",
    "верный",
    "новый",
    "новая",
    "новое",
    "текущий",
    "текущая",
    "актуальный",
    "последний",
    "поменялся",
    "поменялась",
    "поменялось",
    "сменился",
    "сменилась",
    "сменилось",
    "изменился",
    "изменилась",
    "изменилось",
];

/// Words that carry no topic, English and Russian.
const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "to",
    "of",
    "in",
    "on",
    "at",
    "for",
    "with",
    "and",
    "or",
    "but",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "we",
    "you",
    "i",
    "he",
    "she",
    "they",
    "me",
    "my",
    "our",
    "your",
    "their",
    "us",
    "do",
    "does",
    "did",
    "done",
    "have",
    "has",
    "had",
    "will",
    "would",
    "can",
    "could",
    "should",
    "must",
    "need",
    "not",
    "no",
    "yes",
    "ok",
    "okay",
    "so",
    "if",
    "then",
    "than",
    "there",
    "here",
    "what",
    "which",
    "who",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "some",
    "just",
    "also",
    "now",
    "about",
    "from",
    "by",
    "as",
    "up",
    "out",
    "into",
    "after",
    "before",
    "over",
    "more",
    "very",
    "good",
    "great",
    "fine",
    "let",
    "let's",
    "sure",
    "thanks",
    "please",
    "still",
    "again",
    "todo",
    "и",
    "в",
    "во",
    "на",
    "с",
    "со",
    "по",
    "к",
    "ко",
    "о",
    "об",
    "у",
    "за",
    "из",
    "для",
    "не",
    "что",
    "это",
    "как",
    "а",
    "но",
    "да",
    "нет",
    "мы",
    "вы",
    "я",
    "он",
    "она",
    "они",
    "то",
    "так",
    "же",
    "ли",
    "бы",
    "уже",
    "ещё",
    "еще",
    "теперь",
    "надо",
    "нужно",
    "снова",
];
