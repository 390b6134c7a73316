//! The words a chunk is found by, and the words a query looks for: the same rule on both sides.
//!
//! A token is a run of letters, digits and `_`. An identifier with parts (`stock_reservation`, `holdTtl`) gives its
//! whole lowercased form and each part (split at `_`, `-` and camelCase boundaries, as the memory's keys are); every
//! word is then reduced by the memory's light English stem (`reservations` → `reservation`). Words that say nothing
//! in prose or code (`the`, `fn`, `self`) and one-character tokens are dropped.

use crate::memory::keys::{STOPWORDS, identifier_parts, stem};

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

/// The distinct terms of a query, in their order of first appearance.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for_each_term(text, |term| {
        if !out.contains(&term) {
            out.push(term);
        }
    });
    out
}
