//! Pointer click-through: what a pointer of the run resolves to now, with the run's own resolver (confined to the
//! scenario's workspace: `..`, absolute paths, symlinks and hard links out are refused with
//! `LESS_POINTER_UNRESOLVED`), its digest, its token cost, the lines around it with the span marked, and what the run
//! did with it (who dereferenced it, granted or denied, under which grant).

use std::collections::HashMap;
use std::path::Path;

use crate::run::Event;
use crate::{Encoding, ErrorCode, Pointer, PointerType, Resolver, SamSource, TokenCounter, Violation};
use serde::Serialize;
use serde_json::Value;

/// Lines shown above and below a span.
const CONTEXT_LINES: usize = 12;

/// A pointer resolved for the page.
#[derive(Debug, Serialize)]
pub struct DerefAnswer {
    /// The pointer's text form, as asked.
    pub pointer: String,
    /// The pointer's type (`repo`, `artifact`, `diff`, `test`, `sam`).
    #[serde(rename = "type")]
    pub ty: String,
    /// The content behind it (the span).
    pub content: String,
    /// `blake3:` of the content.
    pub digest: String,
    /// The digest the run's documents carry for it, when one does, and whether the content still has it.
    pub pinned: Option<String>,
    /// Whether the content still has the pinned digest (none when nothing is pinned).
    pub unchanged: Option<bool>,
    /// Its cost in the run's tokenizer.
    pub tokens: u32,
    /// The tokenizer it was counted with.
    pub tokenizer: String,
    /// The lines around the span in its file, the span marked (for repo, artifact and diff pointers with a span).
    pub context: Option<Context>,
    /// The run's derefs that named it.
    pub derefs: Vec<Value>,
}

/// Lines of the file around a span.
#[derive(Debug, Serialize)]
pub struct Context {
    /// The file's line number of `lines[0]`.
    pub first_line: usize,
    /// The lines themselves.
    pub lines: Vec<String>,
    /// The span's first and last line numbers in the file.
    pub highlight: (usize, usize),
}

/// Resolves `text` in `workspace`, against the run's `events` (for `sam:` pointers and what the run did with it).
pub fn resolve_pointer(
    workspace: &Path,
    events: &[Event],
    text: &str,
    digest: Option<&str>,
    tokenizer: &str,
) -> Result<DerefAnswer, Violation> {
    let pointer = Pointer::parse(text.trim())?;
    if pointer.ty() == PointerType::Url {
        return Err(Violation::new(
            ErrorCode::PointerUnresolved,
            "",
            format!("{text}: url pointers are never fetched; open the address yourself"),
        ));
    }
    let sam = RunSam::of(events);
    let mut resolver = Resolver::new(workspace)?;
    let plain = Pointer::new(pointer.ty(), pointer.reference(), pointer.span())?;
    let resolved = resolver.resolve(&plain, &sam)?;
    let content = resolved.content;
    let encoding: Encoding = tokenizer.parse().unwrap_or_default();
    let tokens = TokenCounter::shared(encoding).count(&content);
    let pinned = digest.map(str::to_owned).or_else(|| pointer.digest().map(|d| d.to_string()));
    let unchanged = pinned.as_ref().map(|p| *p == resolved.digest.to_string());
    let context = match (pointer.ty(), pointer.span()) {
        (PointerType::Repo | PointerType::Artifact | PointerType::Diff, Some(_)) => {
            Pointer::new(pointer.ty(), pointer.reference(), None)
                .ok()
                .and_then(|whole| resolver.read_unpinned(&whole, &sam).ok())
                .and_then(|file| context_of(&file, &content))
        }
        _ => None,
    };
    let asked = plain.to_string();
    let derefs = events
        .iter()
        .enumerate()
        .filter_map(|(seq, event)| match event {
            Event::Deref { agent, pointers, tokens, granted, via_grant, code }
                if pointers.iter().any(|p| same_pointer(p, &asked)) =>
            {
                Some(serde_json::json!({"seq": seq, "agent": agent, "tokens": tokens, "granted": granted,
                                        "via_grant": via_grant, "code": code}))
            }
            _ => None,
        })
        .collect();
    Ok(DerefAnswer {
        pointer: asked,
        ty: pointer.ty().to_string(),
        content,
        digest: resolved.digest.to_string(),
        pinned,
        unchanged,
        tokens,
        tokenizer: encoding.to_string(),
        context,
        derefs,
    })
}

/// Whether `text` is a pointer whose path leads out of `workspace` (absolute, `..`, a symlink out): a refusal of it
/// is a forbidden read, not a missing file ([`Resolver::leads_outside`]).
pub fn leads_outside(workspace: &Path, text: &str) -> bool {
    let Ok(pointer) = Pointer::parse(text.trim()) else { return false };
    Resolver::new(workspace).is_ok_and(|resolver| resolver.leads_outside(&pointer))
}

/// Whether a pointer text of the ledger names the same place as `asked` (digests aside).
fn same_pointer(text: &str, asked: &str) -> bool {
    Pointer::parse(text)
        .ok()
        .and_then(|p| Pointer::new(p.ty(), p.reference(), p.span()).ok())
        .is_some_and(|p| p.to_string() == asked)
}

/// Where `span` sits in `file`, with lines around it; none when it is not found as is.
fn context_of(file: &str, span: &str) -> Option<Context> {
    let at = file.find(span.trim_end_matches('\n')).filter(|_| !span.trim().is_empty())?;
    let start = file[..at].matches('\n').count() + 1;
    let end = start + span.trim_end_matches('\n').matches('\n').count();
    let lines: Vec<&str> = file.lines().collect();
    let first = start.saturating_sub(CONTEXT_LINES).max(1);
    let last = (end + CONTEXT_LINES).min(lines.len());
    Some(Context {
        first_line: first,
        lines: lines.get(first - 1..last).unwrap_or_default().iter().map(|l| (*l).to_owned()).collect(),
        highlight: (start, end),
    })
}

/// The run's messages and engrams for `sam:` pointers, as the run's resolver indexed them: `sam:msg:<id>` the
/// delivered document, `sam:engram:<id>` and `sam:<kind>:<id or tag>` an engram.
struct RunSam(HashMap<(String, String), String>);

impl RunSam {
    fn of(events: &[Event]) -> RunSam {
        let mut index = HashMap::new();
        for event in events {
            let Event::Delivered { msg_id, doc, .. } = event else { continue };
            let value = doc.to_value();
            index.insert(("msg".to_owned(), msg_id.clone()), value.to_string());
            for engram in value.get("engrams").and_then(Value::as_array).into_iter().flatten() {
                let text = engram.to_string();
                let id = engram.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                let kind = engram.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
                index.insert(("engram".to_owned(), id.clone()), text.clone());
                for tag in engram.get("tags").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
                {
                    index.insert((kind.clone(), tag.to_owned()), text.clone());
                }
                index.insert((kind, id), text);
            }
        }
        RunSam(index)
    }
}

impl SamSource for RunSam {
    fn lookup(&self, namespace: &str, key: &str) -> Option<String> {
        self.0.get(&(namespace.to_owned(), key.to_owned())).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The span is found in its file and marked by line numbers, with lines around it.
    #[test]
    fn a_span_is_placed_in_its_file() {
        let file: String = (1..=40).map(|n| format!("line {n}\n")).collect();
        let context = context_of(&file, "line 20\nline 21\n").expect("found");
        assert_eq!(context.highlight, (20, 21));
        assert_eq!(context.first_line, 8);
        assert_eq!(context.lines.first().map(String::as_str), Some("line 8"));
        assert_eq!(context.lines.last().map(String::as_str), Some("line 33"));
    }
}
