//! Standard output of the commands: `outln!` and `out!` in place of `println!` and `print!`.
//!
//! Rust ignores SIGPIPE, so writing into a pipe whose reader has gone (`lessrt dag show | head`) fails with
//! [`io::ErrorKind::BrokenPipe`]; `println!` panics on that. Here such a write ends the process quietly with status
//! 141, what a process killed by SIGPIPE reports; any other failure to write is one line on stderr and status 2
//! (could not run).
//!
//! What the commands print holds text others wrote (archived messages, claims, summaries): a control character in it
//! could clear the terminal, move the cursor or rewrite a line into a fake `PASS`. Everything goes out with control
//! characters escaped (`\u{1b}`), newlines and tabs kept.

use std::fmt;
use std::io::{self, Write};

/// Status of a process whose standard output was closed by its reader (128 + SIGPIPE).
const EXIT_BROKEN_PIPE: u8 = 141;
/// Status of a process that could not write its standard output: could not run.
const EXIT_OUTPUT_FAILED: u8 = 2;

/// Writes `args` (and a newline when `newline`) to standard output, or ends the process as the module says.
/// Control characters other than newline and tab are written escaped (see [`printable`]).
pub(crate) fn write(args: fmt::Arguments<'_>, newline: bool) {
    let text = match args.as_str() {
        Some(text) => printable(text),
        None => printable(&args.to_string()).into_owned().into(),
    };
    let mut out = io::stdout().lock();
    let written = out.write_all(text.as_bytes()).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) });
    if let Err(err) = written {
        exit_on(&err);
    }
}

/// `text` with every control character but newline and tab written as a Rust escape (`\u{1b}`).
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// `text` on one line: every control character, newline and tab too, written as an escape (`\n`, `\u{1b}`), for
/// a field of a line whose lines a reader counts (a file name may hold a newline).
pub(crate) fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// Ends the process after a failed write to standard output.
pub(crate) fn exit_on(err: &io::Error) -> ! {
    if err.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(EXIT_BROKEN_PIPE));
    }
    eprintln!("lessrt: cannot write to standard output: {err}");
    std::process::exit(i32::from(EXIT_OUTPUT_FAILED));
}

/// A run's live trace, printed as the ledger records it: each line through [`write`], so a closed pipe
/// (`lessrt run … | head -1`) ends the program quietly with 141 rather than a panic in the ledger actor.
pub(crate) struct StdoutTrace;

impl less_runtime::run::TraceSink for StdoutTrace {
    fn line(&self, line: &str) {
        write(format_args!("{line}"), true);
    }
}

/// The trace sink of a command that prints its trace when `on`.
pub(crate) fn trace_if(on: bool) -> Option<std::sync::Arc<dyn less_runtime::run::TraceSink>> {
    on.then(|| std::sync::Arc::new(StdoutTrace) as std::sync::Arc<dyn less_runtime::run::TraceSink>)
}

/// `println!` for the commands: see the module.
macro_rules! outln {
    () => { $crate::output::write(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), true) };
}

/// `print!` for the commands: see the module.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), false) };
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_and_text_is_kept() {
        assert_eq!(printable("plain\ttext\nnext line"), "plain\ttext\nnext line");
        assert_eq!(printable("\u{1b}[2Jcleared\u{7}"), "\\u{1b}[2Jcleared\\u{7}");
        assert_eq!(printable("FAIL\rPASS"), "FAIL\\u{d}PASS");
        assert_eq!(printable("\u{9b}31m"), "\\u{9b}31m", "a C1 control too");
        assert_eq!(printable("ünïcode ✓"), "ünïcode ✓");
    }
}
