//! Grants: a parent's permission for one descendant to dereference beyond its budget, or to inline code.
//!
//! A grant is unforgeable: its `mac` is a keyed blake3 over every other field, with the run's secret as the key.
//! Changing any field (grantee, patterns, counts, expiry, uses) without the secret makes [`Grant::verify`] fail.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::{ErrorCode, Violation};
use crate::schema::DocKind;
use crate::valid::Contract;

/// Domain separation for grant MACs, so a MAC over another kind of document can never pass as a grant's.
const GRANT_MAC_CONTEXT: &[u8] = b"lessrt grant v0.1\n";

/// What a grant allows; everything the MAC covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantTerms {
    /// Unique id, quoted by the grantee in deref requests and messages.
    pub grant_id: String,
    /// The parent that issued it.
    pub issuer: String,
    /// The only agent that may present it.
    pub grantee: String,
    /// Pointer patterns in text form; `*` matches within a path segment, `**` across segments.
    pub patterns: Vec<String>,
    /// Most dereferences it covers in all.
    pub max_derefs: u32,
    /// Most tokens of dereferenced content it covers in all.
    pub max_tokens: u32,
    /// Tokens of code the grantee may inline in messages (0 when absent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inline_code_tokens: u32,
    /// RFC 3339 expiry.
    pub expires_at: String,
    /// How many requests may present it.
    pub uses: u32,
}

/// A signed grant: `schemas/grant.v0.1.json`.
///
/// Unknown fields are refused by the schema (deserialize through [`crate::Valid`]); serde cannot deny them
/// through the flattened terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The terms the MAC covers.
    #[serde(flatten)]
    pub terms: GrantTerms,
    /// Keyed blake3 of the terms with the run's secret.
    pub mac: Digest,
}

impl Contract for Grant {
    const KIND: DocKind = DocKind::Grant;
}

impl Grant {
    /// Signs `terms` with the run's `secret`.
    pub fn issue(terms: GrantTerms, secret: &[u8; 32]) -> Grant {
        let mac = mac_of(&terms, secret);
        Grant { terms, mac }
    }

    /// Checks the MAC: [`ErrorCode::GrantInvalid`] when any field was changed or another secret signed it.
    pub fn verify(&self, secret: &[u8; 32]) -> Result<(), Violation> {
        // Digest equality is blake3::Hash equality, which is constant-time: the comparison leaks nothing about
        // the expected MAC.
        if mac_of(&self.terms, secret) == self.mac {
            Ok(())
        } else {
            Err(Violation::new(
                ErrorCode::GrantInvalid,
                "/mac",
                format!("grant {:?} was not issued by this run or was altered", self.terms.grant_id),
            ))
        }
    }
}

fn mac_of(terms: &GrantTerms, secret: &[u8; 32]) -> Digest {
    let mut hasher = blake3::Hasher::new_keyed(secret);
    hasher.update(GRANT_MAC_CONTEXT);
    // Every field, in declaration order, each string length-prefixed and each list counted: no two sets of terms
    // give the same bytes, and writing them cannot fail.
    let GrantTerms {
        grant_id,
        issuer,
        grantee,
        patterns,
        max_derefs,
        max_tokens,
        inline_code_tokens,
        expires_at,
        uses,
    } = terms;
    let text = |hasher: &mut blake3::Hasher, s: &str| {
        hasher.update(&(s.len() as u64).to_le_bytes());
        hasher.update(s.as_bytes());
    };
    text(&mut hasher, grant_id);
    text(&mut hasher, issuer);
    text(&mut hasher, grantee);
    hasher.update(&(patterns.len() as u64).to_le_bytes());
    for pattern in patterns {
        text(&mut hasher, pattern);
    }
    for n in [max_derefs, max_tokens, inline_code_tokens] {
        hasher.update(&n.to_le_bytes());
    }
    text(&mut hasher, expires_at);
    hasher.update(&uses.to_le_bytes());
    Digest::from_hash(hasher.finalize())
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Whether a grant's pattern names a place outside the workspace: an absolute path, a `..` segment (also
/// percent-encoded), or a backslash.
pub fn leaves_workspace(pattern: &str) -> bool {
    let rest = pattern.split_once(':').map_or(pattern, |(_, rest)| rest);
    // A diff names its revisions (`a..b`) before `#` and a path after it; the others a path before `#`.
    let place = if pattern.starts_with("diff:") {
        rest.split_once('#').map_or("", |(_, path)| path)
    } else {
        rest.split(['#', '@']).next().unwrap_or_default()
    };
    let lower = place.to_ascii_lowercase();
    place.starts_with('/')
        || place.contains('\\')
        || lower.contains("%2e")
        || lower.contains("%2f")
        || place.split('/').any(|segment| segment == "..")
}

/// Whether every pointer the pattern `inner` covers is covered by `outer`: what an issuer may grant (a grant no
/// wider than what it holds) and what a child may be given to reach (no more than its parent). Patterns are those of
/// grants: `**` matches anything, `*` anything but `/`, `?` one character but `/`. A pattern without `#` names files
/// (any span, any revision); one with `#` names spans (`artifact:SPEC.md#sec=*`). Sound, not complete: a pattern
/// it cannot prove within is not within (the check fails closed), and one that leaves the workspace never is.
pub fn pattern_within(inner: &str, outer: &str) -> bool {
    if leaves_workspace(inner) {
        return false;
    }
    match (inner.split_once('#'), outer.split_once('#')) {
        (None, None) | (Some(_), Some(_)) => tokens_within(&glob_tokens(inner), &glob_tokens(outer)),
        // The outer pattern names files: the spans of the inner one are in them when its file part is (the part
        // before `#`, whole: a path may hold `@`, so nothing of it is dropped).
        (Some((file, _)), None) => tokens_within(&glob_tokens(file), &glob_tokens(outer)),
        // An outer pattern with `#` covers only pointers with a span; one without `#` covers those without, too.
        (None, Some(_)) => false,
    }
}

/// Whether `inner` is within one of `outers`.
pub fn pattern_within_any(inner: &str, outers: &[String]) -> bool {
    outers.iter().any(|outer| pattern_within(inner, outer))
}

/// Whether some path matches both glob patterns `a` and `b` (`**` anything, `*` anything but `/`, `?` one character
/// but `/`): what decides that two claims on surfaces collide. Exact for patterns of these wildcards (a search of
/// the pair of automata over the characters either pattern names, `/`, and one character neither names), and fail
/// closed: a pair too large to compare is taken to intersect.
pub fn patterns_intersect(a: &str, b: &str) -> bool {
    use GlobToken::*;
    let (a, b) = (glob_tokens(a), glob_tokens(b));
    let (n, m) = (a.len(), b.len());
    if (n + 1).saturating_mul(m + 1) > 1 << 16 {
        return true;
    }
    // The characters that can make a difference: those the patterns name, `/`, and one neither names (`None`).
    let mut alphabet: Vec<Option<char>> = vec![Some('/'), None];
    for token in a.iter().chain(&b) {
        if let Char(c) = token
            && !alphabet.contains(&Some(*c))
        {
            alphabet.push(Some(*c));
        }
    }
    // Where a token at `i` goes on reading `c`, if it can read it.
    fn step(tokens: &[GlobToken], i: usize, c: Option<char>) -> Option<usize> {
        match tokens.get(i)? {
            Char(x) => (c == Some(*x)).then_some(i + 1),
            One => (c != Some('/')).then_some(i + 1),
            Star => (c != Some('/')).then_some(i),
            AnyDepth => Some(i),
        }
    }
    let skips = |tokens: &[GlobToken], i: usize| matches!(tokens.get(i), Some(Star | AnyDepth));
    let mut seen = vec![false; (n + 1) * (m + 1)];
    let mut todo = vec![(0, 0)];
    while let Some((i, j)) = todo.pop() {
        if std::mem::replace(&mut seen[i * (m + 1) + j], true) {
            continue;
        }
        if i == n && j == m {
            return true;
        }
        // A star may match nothing.
        if skips(&a, i) {
            todo.push((i + 1, j));
        }
        if skips(&b, j) {
            todo.push((i, j + 1));
        }
        for &c in &alphabet {
            if let (Some(i2), Some(j2)) = (step(&a, i, c), step(&b, j, c)) {
                todo.push((i2, j2));
            }
        }
    }
    false
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GlobToken {
    Char(char),
    /// `*`
    Star,
    /// `**`
    AnyDepth,
    /// `?`
    One,
}

fn glob_tokens(pattern: &str) -> Vec<GlobToken> {
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        if let Some(tail) = rest.strip_prefix("**") {
            tokens.push(GlobToken::AnyDepth);
            rest = tail;
            continue;
        }
        tokens.push(match c {
            '*' => GlobToken::Star,
            '?' => GlobToken::One,
            c => GlobToken::Char(c),
        });
        rest = &rest[c.len_utf8()..];
    }
    tokens
}

/// Whether the language of `inner` is within that of `outer`, by matching `outer` against `inner` read as text in
/// which each wildcard of `inner` may only be taken by a wildcard of `outer` that takes all it can stand for.
fn tokens_within(inner: &[GlobToken], outer: &[GlobToken]) -> bool {
    use GlobToken::*;
    let (n, m) = (inner.len(), outer.len());
    // Patterns are short; a pair too large to compare is not within (fail closed).
    if (n + 1).saturating_mul(m + 1) > 1 << 20 {
        return false;
    }
    // within[i][j]: inner[i..] is within outer[j..].
    let mut within = vec![vec![false; m + 1]; n + 1];
    within[n][m] = true;
    for j in (0..m).rev() {
        for i in (0..=n).rev() {
            let next = inner.get(i).copied();
            within[i][j] = match outer[j] {
                AnyDepth => within[i][j + 1] || (next.is_some() && within[i + 1][j]),
                Star => {
                    within[i][j + 1]
                        || (matches!(next, Some(Star | One)) || matches!(next, Some(Char(c)) if c != '/'))
                            && within[i + 1][j]
                }
                One => (matches!(next, Some(One)) || matches!(next, Some(Char(c)) if c != '/')) && within[i + 1][j + 1],
                Char(c) => next == Some(Char(c)) && within[i + 1][j + 1],
            };
        }
    }
    within[0][0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::valid::Valid;

    fn terms() -> GrantTerms {
        GrantTerms {
            grant_id: "g-1".into(),
            issuer: "director".into(),
            grantee: "programmer".into(),
            patterns: vec!["repo:src/**".into()],
            max_derefs: 2,
            max_tokens: 600,
            inline_code_tokens: 0,
            expires_at: "2026-01-08T12:00:00Z".into(),
            uses: 1,
        }
    }

    #[test]
    fn globs_intersect_when_one_path_matches_both() {
        let yes = [
            ("src/a/**", "src/a/b.rs"),
            ("src/**", "src/a/*.rs"),
            ("src/*.rs", "src/lib.*"),
            ("**/mod.rs", "src/run/*"),
            ("src/?.rs", "src/a.*"),
            ("a*b", "ab"),
            ("**", "x"),
        ];
        let no = [
            ("src/a/**", "src/b/**"),
            ("src/*.rs", "src/a/b.rs"),
            ("src/*.rs", "src/*.md"),
            ("src/?.rs", "src/ab.rs"),
            ("docs/**", "doc"),
            ("docs/**", "docs"),
            ("src/a.rs", "src/a.rs.bak"),
            ("*", "a/b"),
        ];
        for (a, b) in yes {
            assert!(patterns_intersect(a, b) && patterns_intersect(b, a), "{a} and {b} share a path");
        }
        for (a, b) in no {
            assert!(!patterns_intersect(a, b) && !patterns_intersect(b, a), "{a} and {b} share no path");
        }
        // Too large to compare: taken to intersect (fail closed).
        let long = "a".repeat(400);
        assert!(patterns_intersect(&long, &"b".repeat(400)));
    }

    #[test]
    fn intersecting_globs_agree_with_matching_random_paths() {
        // Every path the generator makes that matches both patterns proves they intersect: the test never sees
        // `patterns_intersect` deny a pair with a common path.
        let parts = ["a", "b", "ab", "*", "**", "?", "/"];
        let paths = ["a", "b", "ab", "a/b", "b/a", "ab/ab", "a/a/b", "", "aa", "ba/b", "a/"];
        let mut seed = 7u64;
        let mut pick = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let matches = |pattern: &str, path: &str| {
            let mut expr = String::from("^");
            let mut rest = pattern;
            while let Some(c) = rest.chars().next() {
                if let Some(tail) = rest.strip_prefix("**") {
                    expr.push_str(".*");
                    rest = tail;
                    continue;
                }
                expr.push_str(match c {
                    '*' => "[^/]*",
                    '?' => "[^/]",
                    '/' => "/",
                    'a' => "a",
                    _ => "b",
                });
                rest = &rest[1..];
            }
            expr.push('$');
            regex::Regex::new(&expr).expect("a regex").is_match(path)
        };
        for _ in 0..400 {
            let a: String = (0..1 + pick(4)).map(|_| parts[pick(parts.len())]).collect();
            let b: String = (0..1 + pick(4)).map(|_| parts[pick(parts.len())]).collect();
            if paths.iter().any(|p| matches(&a, p) && matches(&b, p)) {
                assert!(patterns_intersect(&a, &b), "{a} and {b} share a path");
            }
        }
    }

    #[test]
    fn issued_grants_verify_and_altered_ones_do_not() {
        let secret = [7u8; 32];
        let grant = Grant::issue(terms(), &secret);
        assert!(grant.verify(&secret).is_ok());
        assert!(Valid::new(grant.clone()).is_ok(), "an issued grant satisfies its schema");

        let other_secret = [8u8; 32];
        assert_eq!(grant.verify(&other_secret).expect_err("other run").code, ErrorCode::GrantInvalid);

        let mut forged = grant.clone();
        forged.terms.grantee = "reviewer".into();
        assert_eq!(forged.verify(&secret).expect_err("grantee changed").code, ErrorCode::GrantInvalid);

        let mut forged = grant;
        forged.terms.uses = 100;
        assert_eq!(forged.verify(&secret).expect_err("uses changed").code, ErrorCode::GrantInvalid);
    }

    #[test]
    fn terms_that_differ_only_in_where_text_is_split_sign_differently() {
        let secret = [7u8; 32];
        let mac = |edit: &dyn Fn(&mut GrantTerms)| {
            let mut t = terms();
            edit(&mut t);
            Grant::issue(t, &secret).mac
        };
        let moved = mac(&|t| {
            t.issuer = "directorp".into();
            t.grantee = "rogrammer".into();
        });
        assert_ne!(mac(&|_| {}), moved, "a character moved from grantee to issuer");
        let joined = mac(&|t| t.patterns = vec!["repo:src/**repo:docs/**".into()]);
        let split = mac(&|t| t.patterns = vec!["repo:src/**".into(), "repo:docs/**".into()]);
        assert_ne!(joined, split, "one pattern is not two");
        assert_ne!(mac(&|t| t.max_derefs = 3), mac(&|t| t.max_tokens = 601));
    }

    /// The shipped example is a real grant, signed with the documented example secret (32 zero bytes).
    #[test]
    fn the_example_grant_is_signed_with_the_example_secret() {
        let text = include_str!("../examples/grant.json");
        let grant = Valid::<Grant>::from_json(text).expect("example is valid");
        let resigned = Grant::issue(grant.terms.clone(), &[0u8; 32]);
        assert_eq!(grant.mac, resigned.mac, "expected mac {}", resigned.mac);
        assert!(grant.verify(&[0u8; 32]).is_ok());
    }

    #[test]
    fn a_pattern_is_within_what_covers_all_it_covers() {
        let within = [
            ("repo:src/orders/**", "repo:src/**"),
            ("repo:src/orders/a.rs", "repo:src/orders/*"),
            ("repo:src/*.rs", "repo:src/*"),
            ("repo:src/?.rs", "repo:src/*.rs"),
            ("repo:src/a.rs", "repo:**"),
            ("repo:src/a.rs#L1-L9", "repo:src/*.rs"),
            ("artifact:SPEC.md#sec=Scope", "artifact:SPEC.md#sec=*"),
            ("diff:a..b#src/x.rs", "diff:**"),
            ("test:billing::*", "test:billing::*"),
        ];
        for (inner, outer) in within {
            assert!(pattern_within(inner, outer), "{inner} within {outer}");
        }
        let wider = [
            ("repo:src/**", "repo:src/*"),
            ("repo:src/**", "repo:src/orders/**"),
            ("repo:**", "repo:src/**"),
            ("repo:src/*", "repo:src/*.rs"),
            ("repo:src/a.rs", "artifact:**"),
            ("artifact:SPEC.md", "artifact:SPEC.md#sec=*"),
            ("artifact:SPEC.md", "artifact:**#**"),
            ("sam:**", "sam:**#**"),
            ("repo:web/*@**#**", "repo:web/*"),
            ("repo:src/../../etc/**", "repo:**"),
            ("repo:/etc/passwd", "repo:**"),
            ("repo:src/a?rs", "repo:src/a.rs"),
            ("test:billing::*", "test:billing::a"),
        ];
        for (inner, outer) in wider {
            assert!(!pattern_within(inner, outer), "{inner} is wider than {outer}");
        }
    }
}
