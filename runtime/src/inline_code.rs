//! Finding code pasted into a message's text (LESS §1: full content travels only by dereference; MAX_INLINE_CODE
//! bounds what a message may carry inline, and is 0 unless a grant allows more).
//!
//! A sender that pastes a source declares it (`Envelope::inline_code`); this module finds what was pasted without
//! saying so, in any text field of a document. A line of text is code when it is
//!
//! * inside a fenced block (a line starting with three backticks or tildes opens it, the next such line closes it; an
//!   unclosed fence runs to the end of the text), or
//! * part of a block of two or more non-blank lines (blocks are separated by blank lines and by lines that read as
//!   prose: words ending in a full stop, a colon or a question mark) that parses without a syntax error as Rust,
//!   Python, TypeScript, JavaScript or Go (Go also as a function body) and holds some code punctuation, or
//! * in such a block that does not parse, a line that looks like code on its own (it ends in `;`, `{`, `}` or `=>`, or
//!   starts with a keyword that opens a declaration or statement), when the block has two or more such lines.
//!
//! A single line standing alone is never counted: a claim that names `parse_config()` or says `timeout = 30` cites
//! code, it does not paste it. The languages are the ones the workspace index parses; prose parses in none of them
//! (two lines of prose always contain a juxtaposition of words no grammar accepts).

use std::cell::RefCell;

use serde_json::Value;
use tree_sitter::{Language, Parser};

/// Keywords that open a line of code in the languages above.
const OPENERS: &[&str] = &[
    "fn ",
    "pub ",
    "let ",
    "const ",
    "static ",
    "impl ",
    "struct ",
    "enum ",
    "trait ",
    "use ",
    "mod ",
    "match ",
    "def ",
    "class ",
    "import ",
    "from ",
    "return ",
    "elif ",
    "async def ",
    "await ",
    "function ",
    "var ",
    "export ",
    "interface ",
    "type ",
    "func ",
    "package ",
    "if (",
    "for (",
    "while (",
    "} else",
    "#include ",
];

/// The lines of `text` that are code (module docs), in order.
pub fn code_lines(text: &str) -> Vec<&str> {
    let mut code = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            flush(&mut block, &mut code);
            fenced = !fenced;
            continue;
        }
        if fenced {
            if !line.trim().is_empty() {
                code.push(line);
            }
            continue;
        }
        if line.trim().is_empty() || is_prose(line) {
            flush(&mut block, &mut code);
        } else {
            block.push(line);
        }
    }
    flush(&mut block, &mut code);
    code
}

/// Every piece of code in the text fields of `doc` (strings at any depth), one line per line found, joined by
/// newlines: what MAX_INLINE_CODE counts. Empty when there is none.
pub fn code_in(doc: &Value) -> String {
    code_in_texts(candidates(doc))
}

/// The text fields of `doc` that may hold code ([`may_hold_code`]), in document order: all [`code_in`] reads. A
/// document without any is known to hold no code without parsing anything.
pub fn candidates(doc: &Value) -> Vec<&str> {
    let mut found = Vec::new();
    let mut pending = vec![doc];
    while let Some(value) = pending.pop() {
        match value {
            Value::String(text) if may_hold_code(text) => found.push(text.as_str()),
            Value::Array(items) => pending.extend(items.iter().rev()),
            Value::Object(fields) => pending.extend(fields.values().rev()),
            _ => {}
        }
    }
    found
}

/// The code of `texts` (the [`candidates`] of a document), as [`code_in`] joins it. It parses: a caller on the
/// async executor runs it on the blocking pool.
pub fn code_in_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    texts.into_iter().flat_map(code_lines).collect::<Vec<_>>().join("\n")
}

/// Whether `text` may hold code, decided without parsing: [`code_lines`] finds none in a text without two lines, or
/// without a fence, code punctuation (`()[]{};=`) and a line that opens like code. Never false where it finds some.
pub fn may_hold_code(text: &str) -> bool {
    // One line is never code, and fenced code takes a fence and a line.
    if !text.contains('\n') || text.lines().filter(|line| !line.trim().is_empty()).nth(1).is_none() {
        return false;
    }
    text.contains("```")
        || text.contains("~~~")
        || text.contains(['(', ')', '[', ']', '{', '}', ';', '='])
        || text.lines().any(|line| OPENERS.iter().any(|k| line.trim().starts_with(k)))
}

/// Moves the code of a finished block into `code`.
fn flush<'a>(block: &mut Vec<&'a str>, code: &mut Vec<&'a str>) {
    if block.len() >= 2 {
        if parses(&block.join("\n")) {
            code.append(block);
        } else {
            let looks: Vec<&str> = block.iter().copied().filter(|line| looks_like_code(line)).collect();
            if looks.len() >= 2 {
                code.extend(looks);
            }
        }
    }
    block.clear();
}

/// A line of prose: at least three words, ending in `.`, `:` or `?`, with no code punctuation before that.
fn is_prose(line: &str) -> bool {
    let line = line.trim();
    let Some(body) = line.strip_suffix(['.', ':', '?']) else { return false };
    let words = body.split_whitespace().filter(|w| w.chars().any(char::is_alphabetic)).count();
    words >= 3 && !body.contains(['{', '}', ';', '(', '=', '[', '<'])
}

/// A line that reads as code on its own.
fn looks_like_code(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.ends_with([';', '{', '}']) || trimmed.ends_with("=>") || OPENERS.iter().any(|k| trimmed.starts_with(k))
}

/// Whether `text` parses without a syntax error in one of the code languages and holds code punctuation.
fn parses(text: &str) -> bool {
    if !text.contains(['(', ')', '{', '}', '[', ']', ';', '=']) {
        return false;
    }
    thread_local! {
        static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
    }
    let languages: [(Language, bool); 5] = [
        (tree_sitter_rust::LANGUAGE.into(), false),
        (tree_sitter_python::LANGUAGE.into(), false),
        (tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(), false),
        (tree_sitter_javascript::LANGUAGE.into(), false),
        (tree_sitter_go::LANGUAGE.into(), true),
    ];
    PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        languages.iter().any(|(language, in_function)| {
            if parser.set_language(language).is_err() {
                return false;
            }
            let mut clean = |source: &str| {
                parser.parse(source, None).is_some_and(|tree| {
                    let root = tree.root_node();
                    !root.has_error() && root.named_child_count() > 0
                })
            };
            clean(text) || (*in_function && clean(&format!("package p\nfunc _() {{\n{text}\n}}")))
        })
    })
}

#[cfg(test)]
mod tests;
