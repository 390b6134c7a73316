//! One module per sub-command; each exposes `Args` (or `Command`) and `run`.

pub(crate) mod args;
pub(crate) mod ask;
pub(crate) mod bench;
pub(crate) mod compact;
pub(crate) mod completions;
pub(crate) mod dag;
pub(crate) mod doctor;
pub(crate) mod errors;
pub(crate) mod eval;
pub(crate) mod grade;
pub(crate) mod index;
pub(crate) mod load;
pub(crate) mod mcp;
pub(crate) mod memory;
pub(crate) mod node;
pub(crate) mod pointer;
pub(crate) mod recording;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod skill;
pub(crate) mod summarizer;
pub(crate) mod tokens;
pub(crate) mod validate;

use std::io::Read;
use std::path::Path;

use anyhow::Context as _;

/// Reads a file, or standard input for `-`; a failure (a missing file, bytes that are not UTF-8) says
/// `LESS_INPUT_UNREADABLE` and what to do instead.
pub(crate) fn read_input(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).with_context(|| unreadable("standard input"))?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).with_context(|| unreadable(&path.display().to_string()))
    }
}

/// The context of an input that cannot be read: the code, what, and what to send instead.
pub(crate) fn unreadable(what: &str) -> String {
    let code = less_runtime::ErrorCode::InputUnreadable;
    format!("{code}: cannot read {what} (instead: {} Send UTF-8 text.)", code.instruction())
}

/// Prints a JSON value on one line to standard output.
pub(crate) fn print_json(value: &serde_json::Value) {
    outln!("{value}");
}
