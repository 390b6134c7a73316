//! The significance gate (zero-cost continuity): a session part that says nothing worth remembering is not
//! summarized; its raw messages are kept all the same, a `session_skipped` event records why, and a backfill can
//! summarize it later.
//!
//! Three checks, all deterministic; a part is skipped only when all three find it insignificant:
//! 1. substantive messages: fewer than `min_substantive` messages with at least [`SUBSTANTIVE_TERMS`] content words
//!    (not greetings, thanks or acknowledgements);
//! 2. overlap with known engrams: fewer than `min_overlap` hot engrams of the project share at least two content
//!    words with it;
//! 3. novelty: fewer than `min_novel_terms` of its content words are new to the project's recent messages.

use std::collections::HashSet;

use serde::Serialize;

/// Content words a message needs to count as substantive.
pub const SUBSTANTIVE_TERMS: usize = 4;

/// The gate's thresholds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GateConfig {
    /// Off: every part is summarized.
    pub enabled: bool,
    /// Substantive messages a significant part has at least.
    pub min_substantive: usize,
    /// Known engrams it overlaps at least.
    pub min_overlap: usize,
    /// Content words new to the project it brings at least.
    pub min_novel_terms: usize,
    /// How many of the project's latest messages novelty is measured against.
    pub recent_messages: usize,
}

impl Default for GateConfig {
    fn default() -> GateConfig {
        GateConfig { enabled: true, min_substantive: 5, min_overlap: 1, min_novel_terms: 12, recent_messages: 400 }
    }
}

/// What the gate found. The checks stop at the first that finds the part significant (the others cannot make it
/// skip), so a significant part may leave `overlap` and `novel_terms` unchecked (`None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GateReport {
    /// Substantive messages.
    pub substantive: usize,
    /// Known engrams overlapped.
    pub overlap: Option<usize>,
    /// New content words.
    pub novel_terms: Option<usize>,
    /// Skipped (all three below their thresholds).
    pub skip: bool,
}

/// Words that carry no content: function words and conversational scaffolding, English and Russian.
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "your",
    "yours",
    "all",
    "any",
    "can",
    "had",
    "her",
    "was",
    "one",
    "our",
    "out",
    "has",
    "have",
    "him",
    "his",
    "how",
    "its",
    "let",
    "may",
    "who",
    "did",
    "get",
    "got",
    "yes",
    "yeah",
    "yep",
    "nope",
    "this",
    "that",
    "these",
    "those",
    "with",
    "from",
    "they",
    "them",
    "then",
    "than",
    "there",
    "their",
    "what",
    "when",
    "where",
    "which",
    "while",
    "will",
    "would",
    "could",
    "should",
    "shall",
    "about",
    "into",
    "onto",
    "just",
    "also",
    "very",
    "really",
    "some",
    "much",
    "many",
    "more",
    "most",
    "here",
    "been",
    "being",
    "were",
    "does",
    "doing",
    "done",
    "okay",
    "sure",
    "thanks",
    "thank",
    "thx",
    "hello",
    "hey",
    "hiya",
    "bye",
    "goodbye",
    "cheers",
    "welcome",
    "please",
    "great",
    "good",
    "nice",
    "cool",
    "fine",
    "awesome",
    "perfect",
    "right",
    "well",
    "today",
    "morning",
    "evening",
    "night",
    "again",
    "anything",
    "something",
    "nothing",
    "help",
    "glad",
    "see",
    "later",
    "soon",
    "lol",
    "haha",
    "what's",
    "it's",
    "i'm",
    "you're",
    "that's",
    "let's",
    "don't",
    "can't",
    "i'll",
    "we're",
    "как",
    "что",
    "это",
    "так",
    "вот",
    "все",
    "всё",
    "ещё",
    "еще",
    "уже",
    "для",
    "над",
    "под",
    "при",
    "про",
    "без",
    "или",
    "его",
    "она",
    "они",
    "оно",
    "мне",
    "тебе",
    "вам",
    "нам",
    "спасибо",
    "привет",
    "пока",
    "хорошо",
    "ладно",
    "окей",
    "да",
    "нет",
    "ага",
    "понятно",
    "пожалуйста",
];

/// The content words of `text`: lowercase alphanumeric words of three or more characters that are not
/// [`STOPWORDS`].
pub fn content_terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '_' || c == '-'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '-').to_lowercase())
        .filter(|w| w.chars().count() >= 3 && !STOPWORDS.contains(&w.as_str()))
}

/// Whether a message says something: at least [`SUBSTANTIVE_TERMS`] content words.
pub fn is_substantive(text: &str) -> bool {
    content_terms(text).take(SUBSTANTIVE_TERMS).count() >= SUBSTANTIVE_TERMS
}

/// Runs the three checks, in order, stopping at the first that finds the part significant. `known_claims` gives the
/// project's hot engram claims, `recent` the project's latest messages before this part; each is asked for only
/// when its check runs.
pub fn assess<E>(
    config: &GateConfig,
    messages: &[&str],
    known_claims: impl FnOnce() -> Result<Vec<String>, E>,
    recent: impl FnOnce() -> Result<Vec<String>, E>,
) -> Result<GateReport, E> {
    let substantive = messages.iter().filter(|m| is_substantive(m)).count();
    let mut report = GateReport { substantive, overlap: None, novel_terms: None, skip: false };
    if !config.enabled || substantive >= config.min_substantive {
        return Ok(report);
    }
    let terms: HashSet<String> = messages.iter().flat_map(|m| content_terms(m)).collect();
    let overlap = known_claims()?
        .iter()
        .filter(|claim| {
            let shared: HashSet<String> = content_terms(claim).filter(|t| terms.contains(t)).collect();
            shared.len() >= 2
        })
        .count();
    report.overlap = Some(overlap);
    if overlap >= config.min_overlap {
        return Ok(report);
    }
    let seen: HashSet<String> = recent()?.iter().flat_map(|m| content_terms(m)).collect();
    let novel_terms = terms.iter().filter(|t| !seen.contains(*t)).count();
    report.novel_terms = Some(novel_terms);
    report.skip = novel_terms < config.min_novel_terms;
    Ok(report)
}
