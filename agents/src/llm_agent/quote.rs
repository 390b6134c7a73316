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

/// What the agent read of one repository file: the text, and the file line its first line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadText {
    /// The file's path in the repository.
    pub path: String,
    /// The file line of the text's first line.
    pub first: u32,
    /// The text as read.
    pub content: String,
}

/// The texts `docs` show as read: dereferenced repository spans and files, and the hits a baseline's search pasted.
pub fn read_texts(docs: &[Received]) -> Vec<ReadText> {
    let mut texts = Vec::new();
    let mut add = |pointer: &str, content: &str| {
        let Ok(parsed) = Pointer::parse(pointer) else { return };
        if parsed.ty() != less_runtime::PointerType::Repo {
            return;
        }
        let first = match (parsed.line_range(), parsed.span()) {
            (Some((start, _)), _) => start,
            (None, None) => 1,
            _ => return,
        };
        let text = ReadText { path: parsed.location().to_owned(), first, content: content.to_owned() };
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

/// The citation of `quoted` in `texts`: `repo:<path>#L<a>-L<b>` over the lines read that it copies (the densest run
/// of at most [`MAX_QUOTED_LINES`], in the text holding most of them; a later text wins a tie, being what the agent
/// read for this question last). A quote that is itself a line span inside a text is taken as it is. `None`: it
/// copies nothing read.
pub(crate) fn locate(quoted: &str, texts: &[ReadText]) -> Option<String> {
    if let Some(span) = span_inside(quoted.trim(), texts) {
        return Some(span);
    }
    let copied: Vec<String> = quoted.lines().map(key).filter(|k| letters(k) >= MIN_ANCHOR_CHARS).collect();
    if copied.is_empty() {
        return None;
    }
    let exact = |line: &str, quoted: &str| {
        line == quoted
            || letters(quoted) >= MIN_PART_CHARS && line.contains(quoted)
            || letters(line) >= MIN_PART_CHARS && quoted.contains(line)
    };
    let near = |line: &str, quoted: &str| word_share(quoted, line) >= MIN_WORD_SHARE;
    for matches in [&exact as &dyn Fn(&str, &str) -> bool, &near] {
        let mut best: Option<(usize, &ReadText, Vec<u32>)> = None;
        for text in texts {
            let lines: Vec<u32> = text
                .content
                .lines()
                .enumerate()
                .filter(|(_, line)| {
                    let line = key(line);
                    letters(&line) >= MIN_ANCHOR_CHARS && copied.iter().any(|q| matches(&line, q))
                })
                .map(|(i, _)| text.first + i as u32)
                .collect();
            let run = densest(&lines);
            if !run.is_empty() && best.as_ref().is_none_or(|(n, _, _)| run.len() >= *n) {
                best = Some((run.len(), text, run));
            }
        }
        if let Some((_, text, run)) = best {
            let (from, to) = (run[0], run[run.len() - 1]);
            return Some(format!("repo:{}#L{from}-L{to}", text.path));
        }
    }
    None
}

/// The text read that shares most words with `words` (the quote and the claim), cited whole: what a quote that
/// copies nothing read falls back on (a later text wins a tie). `None`: nothing read.
pub(crate) fn closest_text(words: &str, texts: &[ReadText]) -> Option<String> {
    let wanted = word_set(words);
    let best = texts.iter().max_by_key(|text| word_set(&text.content).intersection(&wanted).count())?;
    let last = best.first + best.content.lines().count().max(1) as u32 - 1;
    Some(format!("repo:{}#L{}-L{last}", best.path, best.first))
}

/// `quoted` as a line span inside one of `texts`, when it is one (`repo:p#La-Lb`, or `La-Lb` with a single file read).
fn span_inside(quoted: &str, texts: &[ReadText]) -> Option<String> {
    let inside = |path: &str, from: u32, to: u32| {
        texts.iter().any(|t| t.path == path && t.first <= from && to < t.first + t.content.lines().count() as u32)
    };
    if let Ok(pointer) = Pointer::parse(quoted)
        && let Some((from, to)) = pointer.line_range()
    {
        return inside(pointer.location(), from, to).then(|| format!("repo:{}#L{from}-L{to}", pointer.location()));
    }
    let (from, to) = quoted.split_once('-')?;
    let number = |s: &str| s.trim().trim_start_matches(['L', 'l']).parse::<u32>().ok();
    let (from, to) = (number(from)?, number(to)?);
    let mut paths: Vec<&str> = texts.iter().map(|t| t.path.as_str()).collect();
    paths.dedup();
    match paths.as_slice() {
        [path] if from <= to && inside(path, from, to) => Some(format!("repo:{path}#L{from}-L{to}")),
        _ => None,
    }
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
