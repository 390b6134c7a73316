//! The words a chunk is found by, and the words a query looks for: the same rule on both sides.
//!
//! A token is a run of letters, digits and `_`. An identifier with parts (`stock_reservation`, `holdTtl`) gives its
//! whole lowercased form and each part (split at `_`, `-` and camelCase boundaries, as the memory's keys are); every
//! plain word is then reduced by the English Snowball stemmer (`alternatives`, `alternates` → `altern`; `files`,
//! `file` → `file`). Words that say nothing in prose or code (`the`, `fn`, `self`) and one-character tokens are
//! dropped; a query also drops the words of asking ([`QUERY_FILLER`]: `why`, `happens`, `instead`).

use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

use crate::memory::keys::{STOPWORDS, identifier_parts};

/// English Snowball stemming of a plain word (`alternatives`, `alternates` → `altern`); a word with digits or
/// other than ASCII letters is kept as it is.
fn stem(word: &str) -> String {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    if word.len() <= 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_owned();
    }
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English)).stem(word).into_owned()
}

/// Keywords common to every file of a language, which rank nothing.
const CODE_WORDS: &[&str] = &[
    "fn", "pub", "let", "mut", "self", "use", "crate", "super", "impl", "struct", "enum", "return", "else", "def",
    "const", "var", "func", "function", "import", "export", "package", "true", "false", "none", "null", "nil", "ok",
    "some", "err", "str", "string", "int", "u32", "u64", "usize", "i64", "f64", "bool", "vec", "new",
];

fn dropped(word: &str) -> bool {
    word.chars().count() < 2 || STOPWORDS.contains(&word) || CODE_WORDS.contains(&word)
}

/// Calls `each` with every term of `text`, in order (repeats included: they are the term frequencies).
pub fn for_each_term(text: &str, mut each: impl FnMut(String)) {
    for token in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let token = token.trim_matches('_');
        if token.is_empty() || token.len() > 64 {
            continue;
        }
        let whole = token.to_lowercase();
        let parts = identifier_parts(token);
        if parts.len() > 1 {
            for part in parts {
                if !dropped(&part) {
                    each(stem(&part));
                }
            }
        }
        if !dropped(&whole) {
            each(stem(&whole));
        }
    }
}

/// The terms of `text` joined by spaces: what the index's whitespace tokenizer reads.
pub fn index_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for_each_term(text, |term| {
        out.push_str(&term);
        out.push(' ');
    });
    out
}

/// Stems of words that phrase a question rather than name what it is about (`why does … happen`, `is there a way
/// to … instead`), dropped from queries (unless nothing else is left). On the development set of
/// `lessrt eval search`, found in the top 10: 68 of 80 with them dropped against 67 (top 5: 55 both); a wider list
/// (`same`, `first`, `one`, `other`, `only`) found 57 in the top 5 but drops words that name behaviour.
pub const QUERY_FILLER: &[&str] = &[
    "happen", "also", "way", "instead", "still", "want", "need", "like", "thing", "actual", "realli", "ever", "even",
    "just", "should", "could", "say", "mean",
];

/// The distinct terms of a query, in their order of first appearance, without [`QUERY_FILLER`] (all of them when
/// that is all there is).
pub fn query_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for_each_term(text, |term| {
        if seen.insert(term.clone()) {
            out.push(term);
        }
    });
    if out.iter().any(|t| !QUERY_FILLER.contains(&t.as_str())) {
        out.retain(|t| !QUERY_FILLER.contains(&t.as_str()));
    }
    out
}
