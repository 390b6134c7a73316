//! Pointers: addresses of sources, never content. The JSON object form (`{type, ref, span?, digest?}`) and the text
//! form (`repo:src/lib.rs#L120-L188@<rev>`) describe the same value and convert both ways exactly.
//!
//! # Text grammar
//!
//! ```text
//! repo:<path>[#L<a>[-L<b>]][@<rev>]          ref = <path>[@<rev>], span = L<a>[-L<b>]
//! artifact:<path>[#sec=<name>|#L..][@<rev>]  ref = <path>[@<rev>], span = sec=<name>
//! sam:<ns>:<key>[#<span>][@<rev>]            ref = <ns>:<key>[@<rev>]
//! diff:<a>..<b>[#<path>]                     ref = <a>..<b>,      span = <path>
//! test:<suite>::<name>                       ref = <suite>::<name>
//! url:<absolute url>                         ref = <url> (taken whole: `#` and `@` belong to the url)
//! ```
//!
//! The revision lives inside `ref` (the object form has no field of its own for it): it is the text after the last
//! `@` of the ref when that text matches `[A-Za-z0-9][A-Za-z0-9._:+-]*`.
//! The text form places it after the span, as in `repo:src/lib.rs#L1-L9@abc123`.
//! Spans of repo, artifact and sam pointers contain no `@`; refs of all types but url contain no `#`.
//! These rules make `parse(format(p)) == p` and `format(parse(t)) == t` hold for every valid pointer and text;
//! the digest is not part of the text form.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::{ErrorCode, Violation};
use crate::schema::DocKind;
use crate::valid::Contract;

/// Longest `ref`, in characters (spec §14).
pub const MAX_REF_CHARS: usize = 300;
/// Longest `span`, in characters (spec §14).
pub const MAX_SPAN_CHARS: usize = 80;

/// What a pointer points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PointerType {
    /// A file (and line span) in the workspace repository.
    Repo,
    /// A section of a Markdown artifact.
    Artifact,
    /// An earlier message or engram of episodic memory.
    Sam,
    /// A hunk of a unified diff, for one path.
    Diff,
    /// An external URL; not dereferenced by the runtime.
    Url,
    /// A named test.
    Test,
}

impl PointerType {
    /// Every pointer type.
    pub const ALL: [PointerType; 6] = [
        PointerType::Repo,
        PointerType::Artifact,
        PointerType::Sam,
        PointerType::Diff,
        PointerType::Url,
        PointerType::Test,
    ];

    /// The prefix used in the text form, without the colon.
    pub const fn as_str(self) -> &'static str {
        match self {
            PointerType::Repo => "repo",
            PointerType::Artifact => "artifact",
            PointerType::Sam => "sam",
            PointerType::Diff => "diff",
            PointerType::Url => "url",
            PointerType::Test => "test",
        }
    }

    /// Parses the text-form prefix.
    pub fn from_prefix(prefix: &str) -> Option<PointerType> {
        PointerType::ALL.into_iter().find(|ty| ty.as_str() == prefix)
    }

    /// Whether the runtime can dereference this type (everything but `url`).
    pub const fn is_resolvable(self) -> bool {
        !matches!(self, PointerType::Url)
    }

    /// Whether the ref may end in `@<rev>` placed after the span in the text form.
    const fn has_rev(self) -> bool {
        matches!(self, PointerType::Repo | PointerType::Artifact | PointerType::Sam)
    }
}

impl fmt::Display for PointerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An address of a source. Always well-formed: every constructor checks the grammar of its type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "PointerWire", into = "PointerWire")]
pub struct Pointer {
    // Invariant: `reference` and `span` satisfy the grammar of `ty` (see the module docs) and the length limits.
    ty: PointerType,
    reference: String,
    span: Option<String>,
    digest: Option<Digest>,
}

/// The serde mirror of the JSON object form; exactly `schemas/pointer.v0.1.json`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PointerWire {
    #[serde(rename = "type")]
    ty: PointerType,
    #[serde(rename = "ref")]
    reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    span: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
}

impl Contract for Pointer {
    const KIND: DocKind = DocKind::Pointer;
}

impl Pointer {
    /// Builds a pointer from its object-form parts, checking the grammar of `ty`.
    pub fn new(ty: PointerType, reference: &str, span: Option<&str>) -> Result<Pointer, Violation> {
        let wire = PointerWire { ty, reference: reference.to_owned(), span: span.map(str::to_owned), digest: None };
        if let Some(first) = check_wire(&wire).into_iter().next() {
            return Err(first);
        }
        Ok(Pointer { ty, reference: reference.to_owned(), span: span.map(str::to_owned), digest: None })
    }

    /// Parses the text form, e.g. `repo:src/lib.rs#L120-L188@4f2a9c1`.
    pub fn parse(text: &str) -> Result<Pointer, Violation> {
        let invalid = |why: &str| Violation::new(ErrorCode::PointerInvalid, "", format!("pointer {text:?}: {why}"));
        let (prefix, body) = text.split_once(':').ok_or_else(|| invalid("missing `<type>:` prefix"))?;
        let ty = PointerType::from_prefix(prefix)
            .ok_or_else(|| invalid("type must be one of repo, artifact, sam, diff, url, test"))?;
        let (reference, span) = match ty {
            PointerType::Url | PointerType::Test => (body.to_owned(), None),
            PointerType::Diff => match body.split_once('#') {
                Some((range, path)) => (range.to_owned(), Some(path.to_owned())),
                None => (body.to_owned(), None),
            },
            PointerType::Repo | PointerType::Artifact | PointerType::Sam => {
                let (rest, rev) = split_rev(body);
                let (main, span) = match rest.split_once('#') {
                    Some((main, span)) => (main, Some(span.to_owned())),
                    None => (rest, None),
                };
                let reference = match rev {
                    Some(rev) => format!("{main}@{rev}"),
                    None => main.to_owned(),
                };
                (reference, span)
            }
        };
        check_parts(ty, &reference, span.as_deref()).map_err(|v| invalid(&v.message))?;
        if reference.chars().count() > MAX_REF_CHARS {
            return Err(invalid(&format!("ref is longer than {MAX_REF_CHARS} characters")));
        }
        if span.as_ref().is_some_and(|span| span.chars().count() > MAX_SPAN_CHARS) {
            return Err(invalid(&format!("span is longer than {MAX_SPAN_CHARS} characters")));
        }
        let pointer = Pointer { ty, reference, span, digest: None };
        // One text per pointer: `repo:a@b#L1` would format as `repo:a#L1@b`, so it is refused with the right form.
        let canonical = pointer.to_string();
        if canonical != text {
            return Err(invalid(&format!("not in canonical form; write it as {canonical}")));
        }
        Ok(pointer)
    }

    /// The same pointer, recording the digest of the content it was resolved to.
    pub fn with_digest(mut self, digest: Digest) -> Pointer {
        self.digest = Some(digest);
        self
    }

    /// The whole source this pointer is a span of (itself when it names a whole source), without a digest.
    pub fn whole(&self) -> Pointer {
        Pointer { ty: self.ty, reference: self.reference.clone(), span: None, digest: None }
    }

    /// What the pointer points into.
    pub fn ty(&self) -> PointerType {
        self.ty
    }

    /// The address within its type (path, section owner, message key, diff range, test or url), with any `@<rev>`.
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// The part of the source: line range, section, or path inside a diff.
    pub fn span(&self) -> Option<&str> {
        self.span.as_deref()
    }

    /// The digest of the content as last dereferenced, if recorded.
    pub fn digest(&self) -> Option<Digest> {
        self.digest
    }

    /// The `@<rev>` of repo, artifact and sam refs.
    pub fn rev(&self) -> Option<&str> {
        if self.ty.has_rev() { split_rev(&self.reference).1 } else { None }
    }

    /// The ref without its `@<rev>`: a path for repo and artifact pointers.
    pub fn location(&self) -> &str {
        if self.ty.has_rev() { split_rev(&self.reference).0 } else { &self.reference }
    }

    /// The inclusive 1-based line range of an `L<a>[-L<b>]` span.
    pub fn line_range(&self) -> Option<(u32, u32)> {
        self.span.as_deref().and_then(parse_line_span)
    }
}

impl fmt::Display for Pointer {
    /// Formats the text form. Inverse of [`Pointer::parse`] (the digest is not part of the text form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.ty)?;
        if self.ty.has_rev() {
            let (main, rev) = split_rev(&self.reference);
            f.write_str(main)?;
            if let Some(span) = &self.span {
                write!(f, "#{span}")?;
            }
            if let Some(rev) = rev {
                write!(f, "@{rev}")?;
            }
            Ok(())
        } else {
            f.write_str(&self.reference)?;
            match &self.span {
                Some(span) => write!(f, "#{span}"),
                None => Ok(()),
            }
        }
    }
}

impl FromStr for Pointer {
    type Err = Violation;

    fn from_str(text: &str) -> Result<Pointer, Violation> {
        Pointer::parse(text)
    }
}

impl TryFrom<PointerWire> for Pointer {
    type Error = String;

    fn try_from(wire: PointerWire) -> Result<Pointer, String> {
        let violations = check_wire(&wire);
        if let Some(first) = violations.into_iter().next() {
            let field = first.path.trim_start_matches('/');
            return Err(format!("{} ({field}): {}", first.code, first.message));
        }
        let digest = wire.digest.as_deref().map(Digest::parse).transpose().map_err(|v| v.message)?;
        Ok(Pointer { ty: wire.ty, reference: wire.reference, span: wire.span, digest })
    }
}

impl From<Pointer> for PointerWire {
    fn from(pointer: Pointer) -> PointerWire {
        PointerWire {
            ty: pointer.ty,
            reference: pointer.reference,
            span: pointer.span,
            digest: pointer.digest.map(|d| d.to_string()),
        }
    }
}

/// The semantic checks of one pointer object given as JSON, with paths relative to the object.
///
/// Assumes the schema already holds (types and lengths); reports grammar and digest problems.
pub(crate) fn check_value(value: &serde_json::Value) -> Vec<Violation> {
    match serde_json::from_value::<PointerWire>(value.clone()) {
        Ok(wire) => check_wire(&wire),
        Err(err) => vec![Violation::new(ErrorCode::SchemaInvalid, "", err.to_string())],
    }
}

fn check_wire(wire: &PointerWire) -> Vec<Violation> {
    let mut out = Vec::new();
    if wire.reference.chars().count() > MAX_REF_CHARS {
        out.push(Violation::new(
            ErrorCode::SchemaInvalid,
            "/ref",
            format!("ref is longer than {MAX_REF_CHARS} characters"),
        ));
    }
    if let Some(span) = &wire.span
        && span.chars().count() > MAX_SPAN_CHARS
    {
        out.push(Violation::new(
            ErrorCode::SchemaInvalid,
            "/span",
            format!("span is longer than {MAX_SPAN_CHARS} characters"),
        ));
    }
    if let Err(v) = check_parts(wire.ty, &wire.reference, wire.span.as_deref()) {
        out.push(v);
    }
    if let Some(digest) = &wire.digest
        && let Err(mut v) = Digest::parse(digest)
    {
        v.path = "/digest".to_owned();
        out.push(v);
    }
    out
}

/// Checks `ref` and `span` against the grammar of `ty`; the violation's path names the offending field.
fn check_parts(ty: PointerType, reference: &str, span: Option<&str>) -> Result<(), Violation> {
    let bad_ref = |why: String| Err(Violation::new(ErrorCode::PointerInvalid, "/ref", why));
    let bad_span = |why: String| Err(Violation::new(ErrorCode::PointerInvalid, "/span", why));
    if reference.trim().is_empty() {
        return bad_ref(format!("a {ty} pointer needs a non-blank ref"));
    }
    if reference.chars().any(char::is_control) {
        return bad_ref("ref contains control characters".to_owned());
    }
    if let Some(span) = span {
        if span.trim().is_empty() {
            return bad_span("span is blank: omit it instead".to_owned());
        }
        if span.chars().any(char::is_control) {
            return bad_span("span contains control characters".to_owned());
        }
    }
    if ty != PointerType::Url && reference.contains('#') {
        return bad_ref(format!("a {ty} ref cannot contain `#`: put the part after it in span"));
    }
    match ty {
        PointerType::Repo | PointerType::Artifact => {
            let (path, _) = split_rev(reference);
            check_relative_path(path).or_else(bad_ref)?;
        }
        PointerType::Sam => {
            let (key, _) = split_rev(reference);
            let well_formed = key.split_once(':').is_some_and(|(ns, rest)| {
                !ns.is_empty()
                    && ns.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
                    && !rest.is_empty()
                    && !rest.contains(char::is_whitespace)
            });
            if !well_formed {
                return bad_ref(format!(
                    "sam ref {reference:?} must be <namespace>:<key>, e.g. decision:publish-domain"
                ));
            }
        }
        PointerType::Diff => {
            let well_formed = reference
                .split_once("..")
                .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty() && !reference.contains(char::is_whitespace));
            if !well_formed {
                return bad_ref(format!("diff ref {reference:?} must be <from>..<to>"));
            }
        }
        PointerType::Test => {
            let well_formed = reference.rsplit_once("::").is_some_and(|(suite, name)| {
                !suite.is_empty()
                    && !name.is_empty()
                    && !reference.contains(char::is_whitespace)
                    && !reference.contains('@')
            });
            if !well_formed {
                return bad_ref(format!("test ref {reference:?} must be <suite>::<name>"));
            }
        }
        PointerType::Url => {
            let well_formed = reference.split_once(':').is_some_and(|(scheme, rest)| {
                scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                    && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                    && !rest.is_empty()
            }) && !reference.contains(char::is_whitespace);
            if !well_formed {
                return bad_ref(format!("url ref {reference:?} must be an absolute url such as https://host/path"));
            }
        }
    }
    if let Some(span) = span {
        match ty {
            PointerType::Url | PointerType::Test => {
                return bad_span(format!("a {ty} pointer has no span: the whole ref is the address"));
            }
            PointerType::Repo => {
                if parse_line_span(span).is_none() {
                    return bad_span(format!("repo span {span:?} must be L<a> or L<a>-L<b> with 1 <= a <= b"));
                }
            }
            PointerType::Artifact => {
                let section = span.strip_prefix("sec=").is_some_and(|name| !name.trim().is_empty());
                if !section && parse_line_span(span).is_none() {
                    return bad_span(format!("artifact span {span:?} must be sec=<heading> or L<a>-L<b>"));
                }
            }
            PointerType::Sam | PointerType::Diff => {}
        }
        if ty.has_rev() && span.contains('@') {
            return bad_span(format!("a {ty} span cannot contain `@` (it would read as a revision)"));
        }
        if span.contains('#') {
            return bad_span("span cannot contain `#`".to_owned());
        }
    }
    Ok(())
}

/// Splits `main@rev` at the last `@` when what follows is a revision; see the module docs.
fn split_rev(reference: &str) -> (&str, Option<&str>) {
    match reference.rsplit_once('@') {
        Some((main, rev)) if is_rev(rev) && !main.is_empty() => (main, Some(rev)),
        _ => (reference, None),
    }
}

fn is_rev(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '+' | '-'))
}

/// Workspace-relative paths only: no leading `/`, no `..` or empty segments, no backslashes.
fn check_relative_path(path: &str) -> Result<(), String> {
    if path.starts_with('/') || path.starts_with('~') {
        return Err(format!("path {path:?} must be relative to the workspace root"));
    }
    if path.contains('\\') {
        return Err(format!("path {path:?} must use `/` separators"));
    }
    if path.ends_with('@') {
        return Err(format!("path {path:?} ends with `@`: give a revision after it or drop it"));
    }
    for segment in path.split('/') {
        if segment.is_empty() || segment == ".." || segment == "." {
            return Err(format!("path {path:?} has an empty, `.` or `..` segment"));
        }
    }
    Ok(())
}

/// Parses `L<a>` or `L<a>-L<b>` (1-based, inclusive, a <= b).
fn parse_line_span(span: &str) -> Option<(u32, u32)> {
    let number = |text: &str| -> Option<u32> {
        let digits = text.strip_prefix('L')?;
        if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    };
    let (start, end) = match span.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => {
            let line = number(span)?;
            (line, line)
        }
    };
    (start <= end).then_some((start, end))
}

#[cfg(test)]
mod tests;
