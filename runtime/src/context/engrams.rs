//! Ledger entries as engrams, so the memory store holds what a compaction kept.
//!
//! Each current entry of a ledger becomes one engram citing the message it came from as `sam:<conversation>:<N>`:
//! active facts are `fact` engrams tagged `subject:<key>` (so the memory's own supersession by subject replaces a
//! value when a later compaction changes it, and `correction` when the user corrected it), active decisions are
//! `decision` engrams, open obligations `todo` engrams, unresolved questions `todo` engrams tagged `question`.
//! Superseded entries and credential references stay in the ledger only: the memory keeps history its own way, and
//! a reference is not a claim. Ids are content-derived, so putting the same ledger twice stores nothing new.

use super::extract::DecisionStatus;
use super::ledger::{is_ledger, parse};
use crate::{Engram, EngramKind, Pointer, Scope, Source, Ttl, Valid, Violations};

/// Tag on every engram that came from a context ledger.
pub const LEDGER_TAG: &str = "context-ledger";

/// Longest tag the engram schema allows.
const MAX_TAG_CHARS: usize = 40;

/// The current entries of `ledger` (a ledger message's content) as engrams of `conversation`, written by
/// `created_by` at `created_at` (RFC 3339). Not a ledger: no engrams.
pub fn ledger_engrams(
    ledger: &str,
    conversation: &str,
    created_by: &str,
    created_at: &str,
) -> Result<Vec<Valid<Engram>>, Violations> {
    if !is_ledger(ledger) {
        return Ok(Vec::new());
    }
    let state = parse(ledger).state;
    // The `sam:` grammar wants an ASCII namespace.
    let namespace: String =
        slug(conversation, 64).chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
    let namespace = if namespace.is_empty() { "chat".to_owned() } else { namespace };
    let make = |kind: EngramKind, claim: String, idx: usize, tags: Vec<String>| {
        let pointer = Pointer::parse(&format!("sam:{namespace}:{idx}")).map_err(|v| Violations(vec![v]))?;
        let mut builder = Engram::builder(kind, claim, created_by)
            .pointer(pointer)
            .confidence(0.9)
            .ttl(Ttl::days(30))
            .scope(Scope::Project)
            .source(Source::Sam)
            .created_at(created_at)
            .tag(LEDGER_TAG);
        for tag in tags {
            builder = builder.tag(tag);
        }
        builder.build()
    };
    let mut engrams = Vec::new();
    for fact in state.facts_by_recency() {
        let mut tags = vec![format!("subject:{}", slug(&fact.subject, MAX_TAG_CHARS - "subject:".len()))];
        if fact.current.corrected {
            tags.push("correction".to_owned());
        }
        engrams.push(make(
            EngramKind::Fact,
            format!("{}: {}", fact.subject, fact.current.value),
            fact.current.idx,
            tags,
        )?);
    }
    for decision in state.decisions.iter().filter(|d| d.status == DecisionStatus::Active) {
        engrams.push(make(EngramKind::Decision, decision.text.clone(), decision.idx, Vec::new())?);
    }
    for obligation in state.obligations.iter().filter(|o| o.status.is_open()) {
        engrams.push(make(EngramKind::Todo, obligation.text.clone(), obligation.idx, Vec::new())?);
    }
    for question in &state.questions {
        let claim = format!("unresolved question: {}", question.text);
        engrams.push(make(EngramKind::Todo, claim, question.idx, vec!["question".to_owned()])?);
    }
    Ok(engrams)
}

/// Lowercase letters and digits with `-` between words, at most `max` characters.
fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(max).collect();
    out.trim_end_matches('-').to_owned()
}
