//! The pointer resolver: pointer → content + blake3 digest, confined to the run's workspace.
//!
//! | type | resolves to |
//! |---|---|
//! | repo | a file, or its `L<a>-L<b>` lines |
//! | artifact | a Markdown file's section (`sec=<heading>`, up to the next heading of the same or a higher level), or lines |
//! | diff | `diffs/<a>..<b>.diff` in the workspace, or only the part for the span's path |
//! | test | `fn <name>` (with its attributes) in `tests/<suite>.rs` or `src/<suite>.rs` |
//! | sam | an earlier message (`sam:msg:<msg_id>`) or engram (`sam:engram:<id>`, `sam:<kind>:<tag or id>`) of the run |
//! | url | never: the runtime does not fetch |
//!
//! Paths are confined to the workspace root after following symlinks: `..`, absolute paths and symlinks that lead
//! out of it are refused with [`ErrorCode::PointerUnresolved`].
//! The `@<rev>` of a ref names the revision the sender saw; the resolver reads the working tree and relies on digests
//! to notice change: the first resolution of a pointer in a run pins its digest, and a later one with different
//! content is [`ErrorCode::DigestMismatch`] (no phantom reads).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::digest::Digest;
use crate::error::{ErrorCode, Violation};
use crate::pointer::{Pointer, PointerType};

/// Content behind a pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The pointer, with the digest of `content` recorded.
    pub pointer: Pointer,
    /// The text.
    pub content: String,
    /// blake3 of `content`.
    pub digest: Digest,
}

/// Looks up episodic memory (messages and engrams of the run) for `sam:` pointers.
pub trait SamSource {
    /// The text stored under `namespace:key`, if any.
    fn lookup(&self, namespace: &str, key: &str) -> Option<String>;
}

/// A workspace with no episodic memory.
impl SamSource for () {
    fn lookup(&self, _namespace: &str, _key: &str) -> Option<String> {
        None
    }
}

/// A workspace root and the digests pinned so far in the run.
#[derive(Debug)]
pub struct Resolver {
    // Invariant: `root` is canonical (absolute, symlinks resolved).
    root: PathBuf,
    pinned: HashMap<String, Digest>,
}

impl Resolver {
    /// A resolver confined to `root`.
    pub fn new(root: &Path) -> Result<Resolver, Violation> {
        let root = root.canonicalize().map_err(|err| {
            Violation::new(ErrorCode::PointerUnresolved, "", format!("workspace {}: {err}", root.display()))
        })?;
        Ok(Resolver { root, pinned: HashMap::new() })
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `pointer`, pinning its digest; a pointer carrying a digest must match the content.
    pub fn resolve(&mut self, pointer: &Pointer, sam: &dyn SamSource) -> Result<Resolved, Violation> {
        let content = self.content_of(pointer, sam)?;
        let digest = Digest::of(content.as_bytes());
        let key = pointer.to_string();
        if let Some(claimed) = pointer.digest()
            && claimed != digest
        {
            return Err(mismatch(&key, claimed, digest));
        }
        if let Some(&pinned) = self.pinned.get(&key)
            && pinned != digest
        {
            return Err(mismatch(&key, pinned, digest));
        }
        self.pinned.insert(key, digest);
        Ok(Resolved { pointer: pointer.clone().with_digest(digest), content, digest })
    }

    fn content_of(&self, pointer: &Pointer, sam: &dyn SamSource) -> Result<String, Violation> {
        match pointer.ty() {
            PointerType::Repo => {
                let text = self.read(pointer.location())?;
                match pointer.line_range() {
                    Some(range) => lines(&text, range, pointer),
                    None => Ok(text),
                }
            }
            PointerType::Artifact => {
                let text = self.read(pointer.location())?;
                match (pointer.span(), pointer.line_range()) {
                    (_, Some(range)) => lines(&text, range, pointer),
                    (Some(span), None) => {
                        let heading = span.strip_prefix("sec=").unwrap_or(span);
                        markdown_section(&text, heading).ok_or_else(|| {
                            unresolved(pointer, &format!("no heading {heading:?} in {}", pointer.location()))
                        })
                    }
                    (None, None) => Ok(text),
                }
            }
            PointerType::Diff => {
                let text = self.read(&format!("diffs/{}.diff", pointer.reference()))?;
                match pointer.span() {
                    Some(path) => diff_for_path(&text, path)
                        .ok_or_else(|| unresolved(pointer, &format!("the diff does not touch {path}"))),
                    None => Ok(text),
                }
            }
            PointerType::Test => {
                let (suite, name) = pointer.reference().rsplit_once("::").unwrap_or(("", pointer.reference()));
                let suite_path = suite.replace("::", "/");
                let candidates = [
                    format!("tests/{suite_path}.rs"),
                    format!("src/{suite_path}.rs"),
                    format!("src/{suite_path}/mod.rs"),
                    format!("src/{suite_path}/tests.rs"),
                ];
                for candidate in &candidates {
                    if let Ok(text) = self.read(candidate)
                        && let Some(source) = rust_fn_source(&text, name)
                    {
                        return Ok(source);
                    }
                }
                Err(unresolved(pointer, &format!("no fn {name} in {}", candidates.join(", "))))
            }
            PointerType::Sam => {
                let (namespace, key) = pointer.location().split_once(':').unwrap_or(("", pointer.location()));
                sam.lookup(namespace, key).ok_or_else(|| unresolved(pointer, "no such message or engram in this run"))
            }
            PointerType::Url => Err(unresolved(pointer, "url pointers are not dereferenced by the runtime")),
        }
    }

    /// Reads a workspace-relative file, refusing anything that leads outside the root.
    fn read(&self, rel: &str) -> Result<String, Violation> {
        let outside =
            || Violation::new(ErrorCode::PointerUnresolved, "", format!("{rel}: outside the workspace root; refused"));
        let rel_path = Path::new(rel);
        if rel_path.is_absolute() || rel_path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            return Err(outside());
        }
        let joined = self.root.join(rel_path);
        let real = joined
            .canonicalize()
            .map_err(|err| Violation::new(ErrorCode::PointerUnresolved, "", format!("{rel}: {err}")))?;
        if !real.starts_with(&self.root) {
            return Err(outside());
        }
        std::fs::read_to_string(&real)
            .map_err(|err| Violation::new(ErrorCode::PointerUnresolved, "", format!("{rel}: {err}")))
    }
}

fn mismatch(key: &str, expected: Digest, actual: Digest) -> Violation {
    Violation::new(
        ErrorCode::DigestMismatch,
        "",
        format!("{key} now has digest {actual}, but {expected} was read before: the source changed"),
    )
}

fn unresolved(pointer: &Pointer, why: &str) -> Violation {
    Violation::new(ErrorCode::PointerUnresolved, "", format!("{pointer}: {why}"))
}

fn lines(text: &str, (start, end): (u32, u32), pointer: &Pointer) -> Result<String, Violation> {
    let all: Vec<&str> = text.lines().collect();
    let (start, end) = (start as usize, end as usize);
    if start > all.len() {
        return Err(unresolved(pointer, &format!("the file has {} lines", all.len())));
    }
    let end = end.min(all.len());
    let mut out = all[start - 1..end].join("\n");
    out.push('\n');
    Ok(out)
}

/// The section under the Markdown heading whose text is `heading`, heading line included.
fn markdown_section(text: &str, heading: &str) -> Option<String> {
    let level_of = |line: &str| {
        let n_hashes = line.bytes().take_while(|&b| b == b'#').count();
        (n_hashes > 0 && n_hashes <= 6 && line[n_hashes..].starts_with(' ')).then_some(n_hashes)
    };
    let all: Vec<&str> = text.lines().collect();
    let start = all.iter().position(|line| {
        level_of(line).is_some_and(|n| line[n..].trim().trim_end_matches('#').trim() == heading.trim())
    })?;
    let level = level_of(all[start])?;
    let end = all[start + 1..]
        .iter()
        .position(|line| level_of(line).is_some_and(|n| n <= level))
        .map_or(all.len(), |offset| start + 1 + offset);
    let mut out = all[start..end].join("\n");
    out.push('\n');
    Some(out)
}

/// The part of a unified diff that touches `path` (from its `diff --git` or `---` header to the next file).
fn diff_for_path(text: &str, path: &str) -> Option<String> {
    let all: Vec<&str> = text.lines().collect();
    let is_file_start = |line: &str| line.starts_with("diff --git ");
    let touches = |line: &str| {
        line.starts_with("diff --git ")
            && (line.ends_with(&format!(" b/{path}")) || line.contains(&format!(" a/{path} ")))
    };
    let start = all.iter().position(|l| touches(l))?;
    let end = all[start + 1..].iter().position(|l| is_file_start(l)).map_or(all.len(), |offset| start + 1 + offset);
    let mut out = all[start..end].join("\n");
    out.push('\n');
    Some(out)
}

/// The source of `fn name` in Rust text, with the attributes and doc comments right above it.
fn rust_fn_source(text: &str, name: &str) -> Option<String> {
    let all: Vec<&str> = text.lines().collect();
    let signature = format!("fn {name}(");
    let def = all.iter().position(|line| {
        let trimmed = line.trim_start();
        trimmed.contains(&signature) && !trimmed.starts_with("//")
    })?;
    let mut start = def;
    while start > 0 {
        let above = all[start - 1].trim_start();
        if above.starts_with("#[") || above.starts_with("///") {
            start -= 1;
        } else {
            break;
        }
    }
    let mut depth = 0i32;
    let mut opened = false;
    for (idx, line) in all.iter().enumerate().skip(def) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            let mut out = all[start..=idx].join("\n");
            out.push('\n');
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests;
