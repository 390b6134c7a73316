//! What both test binaries share (`tests.rs`, and `provisioned.rs` for the tests that need provisioned parts): the
//! built `lessrt` run as a user runs it, and where the repository is.

pub(crate) mod llm;
pub(crate) mod mcp;
pub(crate) mod serve;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository's root (where the scenarios, fixtures and committed recordings are).
/// `value` without its `timing` objects: what a report says that does not depend on how long its turns took.
pub(crate) fn untimed(mut value: serde_json::Value) -> serde_json::Value {
    match &mut value {
        serde_json::Value::Object(fields) => {
            fields.remove("timing");
            for field in fields.values_mut() {
                *field = untimed(field.take());
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|item| *item = untimed(item.take())),
        _ => {}
    }
    value
}

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn lessrt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessrt")).args(args).output().expect("lessrt runs")
}

pub(crate) fn lessrt_stdin(args: &[&str], stdin: &str) -> Output {
    with_stdin(Command::new(env!("CARGO_BIN_EXE_lessrt")).args(args), stdin)
}

/// Runs `command` with `stdin` written to its standard input; what it printed.
pub(crate) fn with_stdin(command: &mut Command, stdin: &str) -> Output {
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("lessrt starts");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("lessrt runs")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Copies a directory tree (files and directories only).
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The text of `file` (from the repository root) between `<!-- {marker}:start -->` and `<!-- {marker}:end -->`.
pub(crate) fn between_markers(file: &str, marker: &str) -> String {
    let text = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (start, end) = (format!("<!-- {marker}:start -->\n"), format!("<!-- {marker}:end -->"));
    let from = text.find(&start).unwrap_or_else(|| panic!("{file} has no {start}")) + start.len();
    let to = text[from..].find(&end).unwrap_or_else(|| panic!("{file} has no {end}")) + from;
    text[from..to].to_owned()
}

/// `n` with thousands separators, as the tables write it.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
