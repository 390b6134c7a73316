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
//! content is [`ErrorCode::DigestMismatch`] (no phantom reads). A caller that keeps pins of its own (the desk keeps
//! them per client and per turn) resolves against them with [`Resolver::resolve_with`].
//! One resolution reads each file once, however many of its pointers name it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use less_contract::Digest;
use less_contract::{ErrorCode, Violation};
use less_contract::{Pointer, PointerType};

/// The largest file the resolver reads.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Content behind a pointer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Digests pinned by pointer (its text form without a digest).
pub(crate) type Pins = HashMap<String, Digest>;

/// A workspace root and the digests pinned so far in the run.
#[derive(Debug)]
pub struct Resolver {
    // Invariant: `root` is canonical (absolute, symlinks resolved).
    root: PathBuf,
    pinned: Pins,
}

/// Why a workspace-relative path does not lead to a place in the workspace.
enum Unlocated {
    /// It leads out of the root.
    Outside,
    /// Its target cannot be resolved (missing, say).
    Missing(std::io::Error),
}

/// The files one resolution read, by workspace-relative path (a read that failed is kept failed), so that many
/// pointers into one file read it once.
type Reads = HashMap<String, Result<String, Violation>>;

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
        let mut resolved = self.resolve_all(std::slice::from_ref(pointer), sam)?;
        Ok(resolved.remove(0))
    }

    /// Resolves every pointer or none: digests are pinned only when all resolved and matched.
    pub fn resolve_all(&mut self, pointers: &[Pointer], sam: &dyn SamSource) -> Result<Vec<Resolved>, Violation> {
        let mut pins = std::mem::take(&mut self.pinned);
        let resolved = self.resolve_with(pointers, sam, &mut pins);
        self.pinned = pins;
        resolved
    }

    /// [`Resolver::resolve_all`] against `pins` instead of the resolver's own: every pointer or none, a pointer
    /// carrying a digest must match its content, a pinned one its pin; `pins` takes the new digests only when all
    /// resolved and matched.
    pub(crate) fn resolve_with(
        &self,
        pointers: &[Pointer],
        sam: &dyn SamSource,
        pins: &mut Pins,
    ) -> Result<Vec<Resolved>, Violation> {
        let mut reads = Reads::new();
        let mut out = Vec::with_capacity(pointers.len());
        for pointer in pointers {
            let content = self.content_in(pointer, sam, &mut reads)?;
            let digest = Digest::of(content.as_bytes());
            let key = plain_key(pointer);
            if let Some(claimed) = pointer.digest()
                && claimed != digest
            {
                return Err(mismatch(&key, claimed, digest));
            }
            if let Some(&pinned) = pins.get(&key)
                && pinned != digest
            {
                return Err(mismatch(&key, pinned, digest));
            }
            out.push(Resolved { pointer: pointer.clone().with_digest(digest), content, digest });
        }
        for resolved in &out {
            pins.insert(plain_key(&resolved.pointer), resolved.digest);
        }
        Ok(out)
    }

    /// The content behind `pointer` without pinning or checking digests (the verbatim baseline reads this way).
    pub fn read_unpinned(&self, pointer: &Pointer, sam: &dyn SamSource) -> Result<String, Violation> {
        self.content_of(pointer, sam)
    }

    /// [`Resolver::read_unpinned`] of many pointers, reading each file once: the contents in order, `None` where a
    /// pointer does not resolve.
    pub(crate) fn read_unpinned_all(&self, pointers: &[Pointer], sam: &dyn SamSource) -> Vec<Option<String>> {
        let mut reads = Reads::new();
        pointers.iter().map(|pointer| self.content_in(pointer, sam, &mut reads).ok()).collect()
    }

    /// One line saying what is behind `pointer` (see [`about`]), read without pinning; `None` when it does not
    /// resolve or there is nothing to say. What an agent's catalogue shows beside a pointer it has not read.
    pub fn about(&self, pointer: &Pointer) -> Option<String> {
        about(pointer, &self.content_of(pointer, &()).ok()?)
    }

    /// Whether `pointer` names a file whose path leads out of the workspace (absolute, through `..`, or a symlink
    /// out), which [`Resolver::resolve`] refuses as `LESS_POINTER_UNRESOLVED`: a caller that must tell such a
    /// refusal from a missing file asks this, never the refusal's text.
    pub fn leads_outside(&self, pointer: &Pointer) -> bool {
        let rel = match pointer.ty() {
            PointerType::Repo | PointerType::Artifact => pointer.location().to_owned(),
            PointerType::Diff => format!("diffs/{}.diff", pointer.reference()),
            PointerType::Test | PointerType::Sam | PointerType::Url => return false,
        };
        matches!(self.locate(&rel), Err(Unlocated::Outside))
    }

    /// Where the workspace-relative `rel` leads: its canonical path (symlinks resolved) inside the root, or why not
    /// (an absolute path, a `..` or a target outside the root; a target that cannot be resolved).
    fn locate(&self, rel: &str) -> Result<PathBuf, Unlocated> {
        let rel_path = Path::new(rel);
        if rel_path.is_absolute() || rel_path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            return Err(Unlocated::Outside);
        }
        let real = self.root.join(rel_path).canonicalize().map_err(Unlocated::Missing)?;
        if real.starts_with(&self.root) { Ok(real) } else { Err(Unlocated::Outside) }
    }

    fn content_of(&self, pointer: &Pointer, sam: &dyn SamSource) -> Result<String, Violation> {
        self.content_in(pointer, sam, &mut Reads::new())
    }

    fn content_in(&self, pointer: &Pointer, sam: &dyn SamSource, reads: &mut Reads) -> Result<String, Violation> {
        match pointer.ty() {
            PointerType::Repo => {
                let text = self.read_once(pointer.location(), reads)?;
                match pointer.line_range() {
                    Some(range) => lines(text, range, pointer),
                    None => Ok(text.to_owned()),
                }
            }
            PointerType::Artifact => {
                let text = self.read_once(pointer.location(), reads)?;
                match (pointer.span(), pointer.line_range()) {
                    (_, Some(range)) => lines(text, range, pointer),
                    (Some(span), None) => {
                        let heading = span.strip_prefix("sec=").unwrap_or(span);
                        markdown_section(text, heading).ok_or_else(|| {
                            unresolved(pointer, &format!("no heading {heading:?} in {}", pointer.location()))
                        })
                    }
                    (None, None) => Ok(text.to_owned()),
                }
            }
            PointerType::Diff => {
                let text = self.read_once(&format!("diffs/{}.diff", pointer.reference()), reads)?;
                match pointer.span() {
                    Some(path) => diff_for_path(text, path)
                        .ok_or_else(|| unresolved(pointer, &format!("the diff does not touch {path}"))),
                    None => Ok(text.to_owned()),
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
                    if let Ok(text) = self.read_once(candidate, reads)
                        && let Some(source) = rust_fn_source(text, name)
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

    /// [`Resolver::read`], once per resolution: a file named again is taken from `reads`.
    fn read_once<'r>(&self, rel: &str, reads: &'r mut Reads) -> Result<&'r str, Violation> {
        reads.entry(rel.to_owned()).or_insert_with(|| self.read(rel)).as_deref().map_err(Clone::clone)
    }

    /// Reads a workspace-relative regular file of at most [`MAX_FILE_BYTES`], refusing anything that leads outside
    /// the root: `..` and absolute paths up front, symlinks after resolving them. The path is checked once, and then
    /// again on what was really opened, because it may be swapped between the check and the open (a symlink, a FIFO,
    /// or a hard link to a file outside renamed over a workspace file): the opening never follows a last symlink and
    /// never blocks, and the opened descriptor itself must be a regular file with one link whose path is inside the
    /// root.
    fn read(&self, rel: &str) -> Result<String, Violation> {
        use std::io::Read;
        let unresolved = |why: String| Violation::new(ErrorCode::PointerUnresolved, "", format!("{rel}: {why}"));
        let outside = || unresolved("outside the workspace root; refused".to_owned());
        let real = match self.locate(rel) {
            Ok(real) => real,
            Err(Unlocated::Outside) => return Err(outside()),
            Err(Unlocated::Missing(err)) => return Err(unresolved(err.to_string())),
        };
        let file = crate::files::open_to_read(&real).map_err(|err| unresolved(err.to_string()))?;
        // What was opened, not what the path named a moment ago.
        let meta = file.metadata().map_err(|err| unresolved(err.to_string()))?;
        if !meta.is_file() {
            // Directories, FIFOs and devices would fail or block the resolver.
            return Err(unresolved("not a regular file".to_owned()));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(unresolved(format!("{} bytes; the resolver reads files up to {MAX_FILE_BYTES}", meta.len())));
        }
        #[cfg(unix)]
        {
            // A file with another hard link may be the same file as one outside the workspace (its other name
            // cannot be found from here): refused like a symlink out.
            use std::os::unix::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(unresolved(format!(
                    "it has {} hard links, and one may lead out of the workspace; copy the file instead of linking it",
                    meta.nlink()
                )));
            }
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
                Ok(opened) if opened.starts_with(&self.root) => {}
                Ok(_) => return Err(outside()),
                Err(err) => return Err(unresolved(format!("cannot tell where the opened file is: {err}"))),
            }
        }
        let mut text = String::new();
        file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(|err| unresolved(err.to_string()))?;
        Ok(text)
    }
}

/// Characters of a pointer's one-line description.
pub const MAX_ABOUT_CHARS: usize = 120;

/// One line saying what `content`, the text behind `pointer`, is about: for code (repo spans, tests) its first doc
/// comment line, or else its first line; for a Markdown section, the first line of its body (the heading is in the
/// pointer); for a diff, the lines it adds and removes and where; at most [`MAX_ABOUT_CHARS`] characters. `None`
/// for sam and url pointers and for blank content.
pub fn about(pointer: &Pointer, content: &str) -> Option<String> {
    let nonblank = || content.lines().map(str::trim).filter(|l| !l.is_empty());
    let code = match pointer.ty() {
        PointerType::Test => true,
        PointerType::Repo => !is_markdown(pointer.location()),
        _ => false,
    };
    let line = match pointer.ty() {
        PointerType::Sam | PointerType::Url => return None,
        PointerType::Diff => diff_about(content)?,
        _ if code => {
            let doc = nonblank()
                .filter_map(|l| l.strip_prefix("///").or_else(|| l.strip_prefix("//!")))
                .map(str::trim)
                .find(|l| !l.is_empty());
            // A test without a doc comment: what it asserts first says more than its signature (its name is in
            // the pointer already).
            let first = if pointer.ty() == PointerType::Test {
                nonblank().find(|l| l.starts_with("assert")).or_else(|| nonblank().find(|l| !l.starts_with("#[")))
            } else {
                nonblank().find(|l| !l.starts_with("#["))
            };
            doc.or(first)?.to_owned()
        }
        // A document (an artifact, a Markdown file): the first line of its body; a section's heading is in the
        // pointer.
        _ => {
            let mut lines = nonblank().peekable();
            if pointer.span().is_some_and(|s| s.starts_with("sec=")) {
                lines.next_if(|l| l.starts_with('#'));
            }
            lines.next()?.trim_start_matches(['#', '-', '*', ' ']).to_owned()
        }
    };
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    Some(if line.chars().count() > MAX_ABOUT_CHARS {
        line.chars().take(MAX_ABOUT_CHARS - 1).collect::<String>() + "…"
    } else {
        line.to_owned()
    })
}

fn is_markdown(path: &str) -> bool {
    path.ends_with(".md") || path.ends_with(".markdown")
}

/// What a diff changes: `+A -R lines`, and where its hunks say they are; `None` when it changes nothing.
fn diff_about(content: &str) -> Option<String> {
    let (mut added, mut removed) = (0usize, 0usize);
    let mut places: Vec<&str> = Vec::new();
    for l in content.lines() {
        if l.starts_with("+++") || l.starts_with("---") {
            continue;
        }
        if l.starts_with('+') {
            added += 1;
        } else if l.starts_with('-') {
            removed += 1;
        } else if let Some(hunk) = l.strip_prefix("@@") {
            let place = hunk.split_once("@@").map_or("", |(_, p)| p.trim());
            if !place.is_empty() && !places.contains(&place) {
                places.push(place);
            }
        }
    }
    if added + removed == 0 {
        return None;
    }
    let mut line = format!("+{added} -{removed} lines");
    if !places.is_empty() {
        line.push_str(&format!(" in {}", places.join("; ")));
    }
    Some(line)
}

/// The text form without a digest: the identity under which a pointer's digest is pinned.
fn plain_key(pointer: &Pointer) -> String {
    pointer.to_string()
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
    let (start, end) = diff_lines(text, path)?;
    let all: Vec<&str> = text.lines().collect();
    let mut out = all[start as usize - 1..end as usize].join("\n");
    out.push('\n');
    Some(out)
}

/// The lines (1-based, inclusive) of the part of the diff `text` that touches `path`: from its `diff --git` line to
/// the line before the next file's.
pub(crate) fn diff_lines(text: &str, path: &str) -> Option<(u32, u32)> {
    let all: Vec<&str> = text.lines().collect();
    let is_file_start = |line: &str| line.starts_with("diff --git ");
    let touches = |line: &str| {
        line.starts_with("diff --git ")
            && (line.ends_with(&format!(" b/{path}")) || line.contains(&format!(" a/{path} ")))
    };
    let start = all.iter().position(|l| touches(l))?;
    let end = all[start + 1..].iter().position(|l| is_file_start(l)).map_or(all.len(), |offset| start + 1 + offset);
    Some((u32::try_from(start + 1).ok()?, u32::try_from(end).ok()?))
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
