//! Quoted answers. A model choosing its own actions answers a question in two parts, in this order: `quote`, the few
//! lines of what it read that show the answer, copied; then `statement`, the answer stated from them. The runtime finds
//! the copied lines in what the agent read and cites exactly those lines: a citation as narrow as the quote, and read
//! by construction. A small model asked for `repo:path#Lx-Ly` cites the whole chunk it read; asked to copy, it has
//! to pick the lines, and the claim it writes next rests on them.

use less_runtime::Pointer;
use less_runtime::run::Received;

/// Characters of a `quote`.
pub(crate) const MAX_QUOTE_CHARS: usize = 600;
/// Lines one citation made from a quote spans at most (the densest run of copied lines is kept).
pub(crate) const MAX_QUOTED_LINES: u32 = 12;
/// A copied line shorter than this (in letters and digits: `}`, `Ok(())`) matches too much to place a quote.
const MIN_ANCHOR_CHARS: usize = 4;
/// A copied line at least this long may be part of a longer line read (a model cuts long lines).
const MIN_PART_CHARS: usize = 12;
/// The share of a copied line's words a line read must hold to match it when no line matches as copied.
const MIN_WORD_SHARE: f64 = 0.6;
/// Lines a citation of comment lines grows by, at most, to take in the code the comment is about.
const MAX_ITEM_LINES: u32 = 24;

/// Reads one quote may cite: the fewest that hold its copied lines, at most this many.
const MAX_CITED_READS: usize = 4;

/// What the agent read: the text, and how a citation of lines in it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadText {
    /// The file's path in the workspace (for a read that is not lines of a file: the pointer read).
    pub path: String,
    /// The pointer type of a read of lines (`repo`, `artifact`): its lines are cited as `<kind>:<path>#L<a>-L<b>`.
    /// `None`: a read that has no file lines (a Markdown section, a diff, a test), cited whole, as read.
    pub kind: Option<&'static str>,
    /// The file line of the text's first line.
    pub first: u32,
    /// The text as read.
    pub content: String,
}

impl ReadText {
    /// The citation of lines `from..=to` of this text (the whole read, for one without file lines).
    fn cite(&self, from: u32, to: u32) -> String {
        match &self.kind {
            Some(kind) => format!("{kind}:{}#L{from}-L{to}", self.path),
            None => self.path.clone(),
        }
    }

    /// The file line of the text's last line.
    pub(crate) fn last(&self) -> u32 {
        self.first + self.content.lines().count().max(1) as u32 - 1
    }
}

/// The texts `docs` show as read: dereferenced spans, files, sections, diffs and tests, and the hits a baseline's
/// search pasted. Memory (`sam:`) and web (`url:`) reads are not the workspace: not quoted from.
pub fn read_texts(docs: &[Received]) -> Vec<ReadText> {
    use less_runtime::PointerType;
    let mut texts = Vec::new();
    let mut add = |pointer: &str, content: &str| {
        let Ok(parsed) = Pointer::parse(pointer) else { return };
        let lines = matches!(parsed.ty(), PointerType::Repo | PointerType::Artifact);
        let text = match (parsed.line_range(), parsed.span()) {
            _ if matches!(parsed.ty(), PointerType::Sam | PointerType::Url) => return,
            (Some((start, _)), _) if lines => (parsed.location().to_owned(), Some(parsed.ty().as_str()), start),
            (None, None) if lines => (parsed.location().to_owned(), Some(parsed.ty().as_str()), 1),
            _ => (pointer.to_owned(), None, 1),
        };
        let (path, kind, first) = text;
        let text = ReadText { path, kind, first, content: content.to_owned() };
        if !texts.contains(&text) {
            texts.push(text);
        }
    };
    for doc in docs {
        match doc {
            Received::Dereferenced(read) => add(&read.pointer, &read.content),
            Received::Searched(searched) => {
                for hit in &searched.hits {
                    if let Some(content) = &hit.content {
                        add(&hit.pointer, content);
                    }
                }
            }
            _ => {}
        }
    }
    texts
}

/// The citations of `quoted` in `texts`: the fewest reads that hold its copied lines (at most [`MAX_CITED_READS`]),
/// in each one run, the densest of at most [`MAX_QUOTED_LINES`] lines it copies (`repo:<path>#L<a>-L<b>`; a read without
/// file lines, whole). The read holding most copied lines comes first; a later read wins a tie, being what the agent
/// read for this question last. A quote that is itself a line span inside a text is taken as it is. Empty: it copies
/// nothing read.
pub(crate) fn locate(quoted: &str, texts: &[ReadText]) -> Vec<String> {
    if let Some(span) = span_inside(quoted.trim(), texts) {
        return vec![span];
    }
    let copied: Vec<String> = quoted.lines().map(key).filter(|k| letters(k) >= MIN_ANCHOR_CHARS).collect();
    let exact = |line: &str, quoted: &str| {
        line == quoted
            || letters(quoted) >= MIN_PART_CHARS && line.contains(quoted)
            || letters(line) >= MIN_PART_CHARS && quoted.contains(line)
    };
    let near = |line: &str, quoted: &str| word_share(quoted, line) >= MIN_WORD_SHARE;
    for matches in [&exact as &dyn Fn(&str, &str) -> bool, &near] {
        let mut left: Vec<&str> = copied.iter().map(String::as_str).collect();
        let (mut cited, mut used): (Vec<String>, Vec<&ReadText>) = (Vec::new(), Vec::new());
        while !left.is_empty() && cited.len() < MAX_CITED_READS {
            // One run per read: copied lines far from the densest run are not cited.
            let unused = texts.iter().filter(|t| !used.contains(t));
            let Some((text, run)) = densest_in(unused, |line| {
                let line = key(line);
                letters(&line) >= MIN_ANCHOR_CHARS && left.iter().any(|q| matches(&line, q))
            }) else {
                break;
            };
            used.push(text);
            // The copied lines this run holds are placed; what is left may lie in another read.
            let held: Vec<String> = text
                .content
                .lines()
                .enumerate()
                .filter(|(i, _)| run.contains(&(text.first + *i as u32)))
                .map(|(_, line)| key(line))
                .collect();
            left.retain(|q| !held.iter().any(|line| matches(line, q)));
            let (from, to) = (run[0], run[run.len() - 1]);
            let cite = text.cite(from, with_commented_code(text, from, to));
            if !cited.contains(&cite) {
                cited.push(cite);
            }
        }
        if !cited.is_empty() {
            return cited;
        }
    }
    Vec::new()
}

/// The last line of a citation of `from..=to` in `text`: `to`, or, when those lines are all comment (a doc comment,
/// a note above a statement), the end of the code under them (past further comment, attribute and blank lines, to
/// where its braces close or its first statement ends), at most [`MAX_ITEM_LINES`] further and inside what was read.
/// A comment says what the code does; the code is the evidence. Prose files (Markdown, text) have no comments.
fn with_commented_code(text: &ReadText, from: u32, to: u32) -> u32 {
    if text.kind.is_none() {
        return to;
    }
    let lines: Vec<&str> = text.content.lines().map(str::trim).collect();
    let at = |line: u32| lines.get(line.checked_sub(text.first)? as usize).copied();
    let comment = |line: &str| line.starts_with("//") || line.starts_with("/*") || line.starts_with('*');
    let prose = std::path::Path::new(&text.path)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["md", "markdown", "txt", "rst", "adoc"].contains(&e.to_ascii_lowercase().as_str()));
    if prose || !(from..=to).all(|l| at(l).is_some_and(|line| line.is_empty() || comment(line))) {
        return to;
    }
    let mut next = to + 1;
    while at(next).is_some_and(|l| l.is_empty() || comment(l) || l.starts_with("#[")) {
        next += 1;
    }
    let (mut depth, mut opened, mut last) = (0i32, false, to);
    while next <= to + MAX_ITEM_LINES
        && let Some(line) = at(next)
    {
        if !line.is_empty() && !comment(line) {
            last = next;
        }
        for c in line.chars() {
            match c {
                '{' => (depth, opened) = (depth + 1, true),
                '}' => depth -= 1,
                _ => {}
            }
        }
        if opened && depth <= 0 || !opened && line.ends_with(';') {
            return next;
        }
        next += 1;
    }
    // The code runs past what was read or past the limit: cited up to there.
    last
}

/// Where an answer whose quote copies nothing read rests: the densest run of lines read that hold the code names its
/// quote and statement give (identifiers with `_`, `::` or inner capitals, and words in backticks: `SessionRevoked`,
/// `max_filesize`), or, naming none found, the text read that shares most words with them, cited whole (a later text
/// wins a tie). `None`: nothing read.
pub(crate) fn closest_text(words: &str, texts: &[ReadText]) -> Option<String> {
    let names = code_names(words);
    if let Some((text, run)) = densest_in(texts.iter(), |line| names.iter().any(|name| holds_name(line, name))) {
        return Some(text.cite(run[0], run[run.len() - 1]));
    }
    let wanted = word_set(words);
    let best = texts.iter().max_by_key(|text| word_set(&text.content).intersection(&wanted).count())?;
    Some(best.cite(best.first, best.last()))
}

/// The code names in `text`: words in backticks, and identifiers that hold `_` or `::` or a capital after a
/// lowercase letter (`SessionRevoked`, `max_filesize`, `Error::SessionExpired`), at least 4 characters long.
fn code_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        let name = name.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if name.chars().filter(|c| c.is_alphanumeric()).count() >= 4 && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    };
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 && !part.contains(' ') {
            add(part);
        }
    }
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
        for word in word.split("::") {
            let camel = word.chars().zip(word.chars().skip(1)).any(|(a, b)| a.is_lowercase() && b.is_uppercase());
            if word.contains('_') || camel {
                add(word);
            }
        }
    }
    names
}

/// Whether `line` holds `name` as a whole identifier.
fn holds_name(line: &str, name: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(name).any(|(at, _)| {
        !line[..at].chars().next_back().is_some_and(ident) && !line[at + name.len()..].chars().next().is_some_and(ident)
    })
}

/// `quoted` as a line span inside one of `texts`, when it is one (`repo:p#La-Lb`, or `La-Lb` with a single file read).
fn span_inside(quoted: &str, texts: &[ReadText]) -> Option<String> {
    let inside = |path: &str, from: u32, to: u32| {
        let text = texts.iter().find(|t| t.kind.is_some() && t.path == path && t.first <= from && to <= t.last())?;
        Some(text.cite(from, to))
    };
    if let Ok(pointer) = Pointer::parse(quoted)
        && let Some((from, to)) = pointer.line_range()
    {
        return inside(pointer.location(), from, to);
    }
    let (from, to) = quoted.split_once('-')?;
    let number = |s: &str| s.trim().trim_start_matches(['L', 'l']).parse::<u32>().ok();
    let (from, to) = (number(from)?, number(to)?);
    let mut paths: Vec<&str> = texts.iter().filter(|t| t.kind.is_some()).map(|t| t.path.as_str()).collect();
    paths.dedup();
    match paths.as_slice() {
        [path] if from <= to => inside(path, from, to),
        _ => None,
    }
}

/// The text of `texts` with the longest [`densest`] run of lines that `holds`, and that run (a later text wins a tie).
fn densest_in<'a>(
    texts: impl Iterator<Item = &'a ReadText>,
    holds: impl Fn(&str) -> bool,
) -> Option<(&'a ReadText, Vec<u32>)> {
    let mut best: Option<(&ReadText, Vec<u32>)> = None;
    for text in texts {
        let lines: Vec<u32> = text
            .content
            .lines()
            .enumerate()
            .filter(|(_, line)| holds(line))
            .map(|(i, _)| text.first + i as u32)
            .collect();
        let run = densest(&lines);
        if !run.is_empty() && best.as_ref().is_none_or(|(_, b)| run.len() >= b.len()) {
            best = Some((text, run));
        }
    }
    best
}

/// The longest run of `lines` (sorted) that fits in [`MAX_QUOTED_LINES`] file lines; the first such run on a tie.
fn densest(lines: &[u32]) -> Vec<u32> {
    let mut best: &[u32] = &[];
    for (i, &start) in lines.iter().enumerate() {
        let end = lines[i..].iter().take_while(|&&l| l < start + MAX_QUOTED_LINES).count();
        if end > best.len() {
            best = &lines[i..i + end];
        }
    }
    best.to_vec()
}

/// A line as compared: without the line number a prompt showed before it (`277| `), comment markers and the
/// indentation, its inner whitespace one space.
fn key(line: &str) -> String {
    let line = line.trim_start();
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    let line = match line[digits..].strip_prefix('|') {
        Some(rest) if digits > 0 => rest,
        _ => line,
    };
    let line = line.trim_start().trim_start_matches(['/', '!', '#', '*']);
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Letters and digits in `text`.
fn letters(text: &str) -> usize {
    text.chars().filter(|c| c.is_alphanumeric()).count()
}

/// The words (identifiers, numbers) of `text`, lowercased.
fn word_set(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The share of `quoted`'s words that `line` holds, when `line` has few others (at most twice as many words).
fn word_share(quoted: &str, line: &str) -> f64 {
    let (quoted, line) = (word_set(quoted), word_set(line));
    if quoted.len() < 3 || line.len() > 2 * quoted.len() {
        return 0.0;
    }
    quoted.intersection(&line).count() as f64 / quoted.len() as f64
}
