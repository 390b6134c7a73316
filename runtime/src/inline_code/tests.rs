//! What counts as pasted code and what does not.

use serde_json::json;

use super::*;

const RUST: &str = "fn total(items: &[Item]) -> u64 {\n    items.iter().map(|i| i.price).sum()\n}";
const PYTHON: &str = "def total(items):\n    return sum(i.price for i in items)";
const GO_BODY: &str = "n := 0\nfor _, i := range items {\n\tn += i.Price\n}";

#[test]
fn code_in_a_fence_or_a_block_that_parses_is_code() {
    assert_eq!(code_lines(&format!("The fix:\n```rust\n{RUST}\n```\nDone.")).len(), 3);
    assert_eq!(code_lines(RUST).len(), 3, "Rust without a fence");
    assert_eq!(code_lines(PYTHON).len(), 2, "Python");
    assert_eq!(code_lines(GO_BODY).len(), 4, "a Go function body");
    assert_eq!(code_lines("const a = 1;\nconst b = a + 2;").len(), 2, "JavaScript");
    // An unclosed fence runs to the end.
    assert_eq!(code_lines("```\nanything at all\nhere").len(), 2);
    // A prose line before the code ends the prose, not the code.
    assert_eq!(code_lines(&format!("This is what the function does now:\n{RUST}")).len(), 3);
}

#[test]
fn prose_and_a_single_cited_line_are_not_code() {
    for text in [
        "The dev server listens on port 8437.\nIt was moved from 8080 last week.",
        "Migrations run before seeding\nthe cache TTL is 300 s",
        "Summary\nDetails follow below",
        "The parser returns Err on empty input (see parse_config).\nCallers retry once, then escalate.",
        "- the walker skips hidden files by default\n- ignore files are read per directory",
        "timeout = 30",
        "call `parse_config()` before `load()`",
        "Checked repo:src/lib.rs#L10-L20 and repo:src/walk.rs#L1-L5; both agree.\nNothing else changed.",
    ] {
        assert!(code_lines(text).is_empty(), "{text:?} -> {:?}", code_lines(text));
    }
}

#[test]
fn lines_that_look_like_code_count_in_a_block_that_does_not_parse() {
    // Half a function: it does not parse, but its lines read as code.
    let half = "fn walk(&self) -> Result<()> {\n    let entries = self.read_dir()?;\n    for e in entries {";
    assert_eq!(code_lines(half).len(), 3);
}

#[test]
fn code_is_found_in_any_text_field_of_a_document() {
    let forty: String = (0..40).map(|i| format!("let x{i} = compute({i});\n")).collect();
    let doc = json!({
        "type": "task_result",
        "engrams": [{ "claim": "The totals are computed once.", "tags": ["a"] }],
        "notes": { "detail": forty },
    });
    assert_eq!(code_in(&doc).lines().count(), 40);
    assert!(code_in(&json!({ "claim": "One line: let x = 1;" })).is_empty());
}
