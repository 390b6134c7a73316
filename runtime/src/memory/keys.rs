//! Hash keys: the deterministic recall keys of an engram (LESS spec §9.1).
//!
//! Features are taken from the claim (normalized words and adjacent word pairs), from code identifiers in it (split at
//! `camelCase`, `snake_case`, `::`, `/` and `.`), from tags, and from pointer refs (the type and location, and each
//! path segment). Each feature is hashed with blake3 to a 16-hex-digit key, so keys are short, uniform and carry no
//! text; a query's text goes through the same extraction, so recall is a set intersection of keys.

use std::collections::BTreeSet;

use less_contract::Engram;
use less_contract::Pointer;
use less_contract::Valid;

/// Most keys stored in an engram's `hash_keys` (the schema's limit).
pub const MAX_STORED_KEYS: usize = 32;

/// Words too common to say anything on their own (they still take part in pairs).
pub(crate) const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "did", "do", "does", "for", "from", "had",
    "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not",
    "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "then", "there", "they", "this", "to", "was",
    "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// The features of a free text: words, adjacent pairs and identifier parts, normalized.
pub fn text_features(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut words = Vec::new();
    for raw in
        text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '\'' | '`' | '?' | '!'))
    {
        let token = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if token.is_empty() {
            continue;
        }
        let parts = identifier_parts(token);
        if parts.len() > 1 {
            out.insert(format!("id:{}", token.to_lowercase()));
            for part in &parts {
                if !STOPWORDS.contains(&part.as_str()) {
                    out.insert(format!("w:{part}"));
                }
            }
        }
        let word = token.to_lowercase();
        if !STOPWORDS.contains(&word.as_str()) {
            out.insert(format!("w:{word}"));
        }
        words.push(word);
    }
    for pair in words.windows(2) {
        if !(STOPWORDS.contains(&pair[0].as_str()) && STOPWORDS.contains(&pair[1].as_str())) {
            out.insert(format!("p:{} {}", pair[0], pair[1]));
        }
    }
    // Every word also under its stem, so "hiking" meets "hiked" and "studies" meets "study" (the exact form counts
    // twice).
    let stems: Vec<String> =
        out.iter().filter_map(|f| f.strip_prefix("w:")).map(|w| format!("s:{}", stem(w))).collect();
    out.extend(stems);
    out
}

/// A light English stem: a plural or `-ing`/`-ed` ending taken off when at least three letters stay (`studies` →
/// `study`, `hiking` → `hik`, `planned` → `plan`); words of three letters or fewer, or with other than letters, are
/// left as they are. Crude on purpose: the same rule on both sides is all that matching needs.
pub fn stem(word: &str) -> String {
    let chars: Vec<char> = word.chars().collect();
    if chars.len() <= 3 || !chars.iter().all(|c| c.is_alphabetic()) {
        return word.to_owned();
    }
    for (suffix, replacement) in [("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")] {
        let n = suffix.chars().count();
        if word.ends_with(suffix) && chars.len() - n >= 3 {
            let mut out: Vec<char> = chars[..chars.len() - n].to_vec();
            out.extend(replacement.chars());
            let doubled =
                out.len() > 3 && out[out.len() - 1] == out[out.len() - 2] && !"lsz".contains(out[out.len() - 1]);
            if matches!(suffix, "ing" | "ed") && doubled {
                out.pop();
            }
            return out.into_iter().collect();
        }
    }
    word.to_owned()
}

/// Words that place something in time: relative days and periods, weekdays, months and seasons.
const TIME_WORDS: &[&str] = &[
    "yesterday",
    "today",
    "tonight",
    "tomorrow",
    "ago",
    "recently",
    "lately",
    "earlier",
    "later",
    "weekend",
    "weekends",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "morning",
    "afternoon",
    "evening",
    "night",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "spring",
    "summer",
    "autumn",
    "fall",
    "winter",
    "вчера",
    "сегодня",
    "завтра",
    "назад",
    "недавно",
    "неделе",
    "неделю",
    "месяц",
    "году",
    "утром",
    "вечером",
];

/// Whether a text places something in time: a time word (`yesterday`, `last week`, `Friday`, `May`) or a year
/// (1900–2099) or a date with digits (`2023-05-07`, `7/5`).
pub fn mentions_time(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '-' && c != '/').any(|token| {
        let word = token.trim_matches('-').to_lowercase();
        if TIME_WORDS.contains(&word.as_str()) {
            return true;
        }
        let digits: Vec<&str> = word.split(['-', '/']).collect();
        let year = |d: &str| d.len() == 4 && d.parse::<u32>().is_ok_and(|y| (1900..2100).contains(&y));
        digits.iter().any(|d| year(d))
            || (digits.len() > 1 && digits.iter().all(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())))
    })
}

/// Whether a query asks for a time: it starts with "when" (or "когда"), or asks what day, date, month or year, or
/// how long ago. A "when" inside a question ("what did she say when …") does not ask for a time.
pub fn asks_time(query: &str) -> bool {
    let words: Vec<String> =
        query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    if words.first().is_some_and(|w| w == "when" || w == "когда") {
        return true;
    }
    words.windows(2).any(|pair| {
        matches!(
            (pair[0].as_str(), pair[1].as_str()),
            ("what" | "which", "day" | "date" | "month" | "year" | "time" | "week" | "weekend") | ("long", "ago")
        )
    })
}

/// Whether a query asks for a list ("what activities …", "which cities …", "where has … camped", "how many …"):
/// its evidence tends to lie in several sources. Crude: a possessive counts as a plural ("what is Caroline's …"),
/// as it did when the weight was chosen.
pub fn asks_list(query: &str) -> bool {
    let words: Vec<String> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '+'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.windows(2).any(|pair| pair[0] == "how" && pair[1] == "many") {
        return true;
    }
    let Some(first) = words.first() else { return false };
    if !matches!(first.as_str(), "what" | "which" | "where" | "who") {
        return false;
    }
    words.iter().skip(1).take(2).any(|w| {
        let plural = w.chars().count() > 3
            && w.ends_with('s')
            && !w.ends_with("ss")
            && !matches!(w.as_str(), "does" | "is" | "was" | "has");
        plural || w == "has" || w == "have"
    })
}

/// The features of a pointer: its type and location, and each segment of the location.
pub fn pointer_features(pointer: &Pointer) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    out.insert(format!("ref:{}:{}", pointer.ty(), pointer.location()));
    for part in identifier_parts(pointer.location()) {
        out.insert(format!("w:{part}"));
    }
    out
}

/// Every feature of an engram: claim, tags and pointers.
pub fn engram_features(engram: &Engram) -> BTreeSet<String> {
    let mut out = text_features(&engram.claim);
    for tag in engram.tags.iter().flatten() {
        out.insert(format!("tag:{}", tag.to_lowercase()));
        out.extend(text_features(tag));
    }
    for pointer in &engram.pointers {
        out.extend(pointer_features(pointer));
    }
    out
}

/// The key of one feature.
pub fn key(feature: &str) -> String {
    blake3::hash(feature.as_bytes()).to_hex()[..16].to_owned()
}

/// All keys of an engram, for the index (sorted, unique).
pub fn engram_keys(engram: &Engram) -> Vec<String> {
    let keys: BTreeSet<String> = engram_features(engram).iter().map(|f| key(f)).collect();
    keys.into_iter().collect()
}

/// The keys of a query text, for recall (sorted, unique). A query can also name pointers (`repo:src/a.rs`), which
/// match the engrams that cite them.
#[cfg(test)]
pub fn query_keys(text: &str) -> Vec<String> {
    keys_of(&query_features(text))
}

/// The keys of some features (sorted, unique).
pub fn keys_of(features: &BTreeSet<String>) -> Vec<String> {
    let keys: BTreeSet<String> = features.iter().map(|f| key(f)).collect();
    keys.into_iter().collect()
}

/// The features of a query text: its words and the pointers it names.
pub fn query_features(text: &str) -> BTreeSet<String> {
    let mut features = text_features(text);
    for token in text.split_whitespace() {
        if let Ok(pointer) = Pointer::parse(token) {
            features.extend(pointer_features(&pointer));
        }
    }
    features
}

/// The keys stored in the engram itself: at most [`MAX_STORED_KEYS`], the most specific features first (tags,
/// pointer refs, identifiers, then pairs, then the longest words), so the stored subset is the most useful one.
pub fn stored_keys(engram: &Engram) -> Vec<String> {
    let mut features: Vec<String> = engram_features(engram).into_iter().collect();
    let rank = |f: &str| match f.split_once(':').map(|(kind, _)| kind) {
        Some("tag") => 0,
        Some("ref") => 1,
        Some("id") => 2,
        Some("p") => 3,
        _ => 4,
    };
    features.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.len().cmp(&a.len())).then(a.cmp(b)));
    features.iter().take(MAX_STORED_KEYS).map(|f| key(f)).collect()
}

/// `engram` with its `hash_keys` derived from its content ([`stored_keys`]) when it has none; as it is otherwise.
/// Every put goes through this (`Store::put_many_placed`), so an engram stored during a run carries its keys like
/// one put from the command line.
pub fn with_stored_keys(engram: &Valid<Engram>) -> Valid<Engram> {
    if engram.hash_keys.is_some() {
        return engram.clone();
    }
    let mut inner = engram.clone().into_inner();
    inner.hash_keys = Some(stored_keys(&inner));
    // Generated keys always fit the schema (≤32 keys of 16 hex digits: tested); the original if that ever changes.
    Valid::new(inner).unwrap_or_else(|_| engram.clone())
}

/// Splits an identifier or path at `/`, `.`, `::`, `_`, `-` and camelCase boundaries, lowercased; parts of one
/// character are dropped.
pub(crate) fn identifier_parts(token: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for chunk in token.split(['/', '.', ':', '_', '-', '#', '@']) {
        let mut current = String::new();
        let chars: Vec<char> = chunk.chars().collect();
        for (idx, &c) in chars.iter().enumerate() {
            let boundary = idx > 0
                && c.is_uppercase()
                && (chars[idx - 1].is_lowercase()
                    || chars.get(idx + 1).is_some_and(|next| next.is_lowercase()) && chars[idx - 1].is_uppercase());
            if boundary && !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            current.extend(c.to_lowercase());
        }
        if !current.is_empty() {
            parts.push(current);
        }
    }
    parts.retain(|p| p.chars().count() > 1);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use less_contract::EngramKind;

    fn engram(claim: &str, pointers: &[&str], tags: &[&str]) -> Engram {
        let mut builder = Engram::builder(EngramKind::Fact, claim, "agent").created_at("2026-01-01T00:00:00Z");
        for p in pointers {
            builder = builder.pointer(Pointer::parse(p).expect("pointer"));
        }
        for t in tags {
            builder = builder.tag(*t);
        }
        builder.build().expect("engram").into_inner()
    }

    #[test]
    fn word_forms_share_a_stem_key() {
        assert_eq!(stem("studies"), "study");
        assert_eq!(stem("hiking"), "hik");
        assert_eq!(stem("hiked"), "hik");
        assert_eq!(stem("planned"), "plan");
        assert_eq!(stem("running"), "run");
        assert_eq!(stem("paintings"), "painting");
        assert_eq!(stem("ties"), "tie");
        assert_eq!(stem("bus"), "bus", "three letters stay");
        assert_eq!(stem("kids2"), "kids2", "letters only");
        let keys = |text: &str| -> BTreeSet<String> { query_keys(text).into_iter().collect() };
        assert!(keys("she went hiking").contains(&key("s:hik")));
        assert!(keys("Melanie hiked up the hill").contains(&key("s:hik")));
        assert!(!keys("Melanie hiked").contains(&key("w:hiking")), "the words themselves stay apart");
    }

    #[test]
    fn list_questions_are_recognized() {
        for q in [
            "What activities does Melanie partake in?",
            "Which cities has Jon visited?",
            "Where has Melanie camped?",
            "How many children does Melanie have?",
            "What do Melanie's kids like?",
            "What is Caroline's identity?",
        ] {
            assert!(asks_list(q), "{q}");
        }
        for q in [
            "When did Caroline go to the support group?",
            "What is the identity of Caroline?",
            "which port does the dev server use",
            "Did Melanie paint a sunrise?",
            "",
        ] {
            assert!(!asks_list(q), "{q}");
        }
    }

    #[test]
    fn time_questions_and_time_mentions_are_recognized() {
        for q in [
            "When did Caroline go to the support group?",
            "what year did he move",
            "How long ago was it?",
            "Когда она переехала?",
        ] {
            assert!(asks_time(q), "{q}");
        }
        for q in ["What did Melanie say when her son fell?", "which port does the dev server use", ""] {
            assert!(!asks_time(q), "{q}");
        }
        for t in [
            "I went there yesterday!",
            "Last Friday we hiked",
            "back in 2019",
            "on 2023-05-07",
            "due 7/5",
            "мы уехали неделю назад",
        ] {
            assert!(mentions_time(t), "{t}");
        }
        for t in ["The dev server listens on port 5173.", "I love painting sunsets", "version 1-2-x", "3000 items"] {
            assert!(!mentions_time(t), "{t}");
        }
    }

    #[test]
    fn identifiers_split_at_every_convention() {
        assert_eq!(identifier_parts("capturePaymentNow"), ["capture", "payment", "now"]);
        assert_eq!(identifier_parts("HTTPServer"), ["http", "server"]);
        assert_eq!(identifier_parts("src/orders/pricing.rs"), ["src", "orders", "pricing", "rs"]);
        assert_eq!(identifier_parts("billing::capture_is_idempotent"), ["billing", "capture", "is", "idempotent"]);
    }

    #[test]
    fn a_query_shares_keys_with_the_engram_it_describes() {
        let e = engram("The dev server listens on port 5173.", &["repo:src/config.rs#L13-L14"], &["port"]);
        let keys: BTreeSet<String> = engram_keys(&e).into_iter().collect();
        let hits = |q: &str| query_keys(q).iter().filter(|k| keys.contains(*k)).count();
        assert!(hits("which port does the dev server use") >= 3);
        assert!(hits("repo:src/config.rs") >= 1, "a pointer in the query finds engrams citing it");
        assert_eq!(hits("cache ttl default"), 0);
    }

    #[test]
    fn keys_are_deterministic_and_stored_keys_fit_the_schema() {
        let claim = "capture_payment writes order.status and records PaymentCaptured; confirm_order reads it before and after. ".repeat(4);
        let e = engram(
            &claim,
            &["repo:src/orders/pricing.rs#L175-L245", "test:billing::capture_is_idempotent"],
            &["billing"],
        );
        assert_eq!(engram_keys(&e), engram_keys(&e.clone()));
        let stored = stored_keys(&e);
        assert_eq!(stored.len(), MAX_STORED_KEYS);
        assert!(stored.iter().all(|k| k.len() == 16));
        assert_eq!(stored[0], key("tag:billing"), "tags come first");
        let mut with_keys = e.clone();
        with_keys.hash_keys = Some(stored);
        assert!(Valid::new(with_keys).is_ok());
    }
}
