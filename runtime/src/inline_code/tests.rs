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

/// Every text of the cases above, and every file of the scenarios' fixture workspaces (real Rust, Python, Go,
/// TypeScript, Markdown and TOML).
fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        RUST,
        PYTHON,
        GO_BODY,
        "const a = 1;\nconst b = a + 2;",
        "```\nanything at all\nhere",
        "The dev server listens on port 8437.\nIt was moved from 8080 last week.",
        "Migrations run before seeding\nthe cache TTL is 300 s",
        "Summary\nDetails follow below",
        "The parser returns Err on empty input (see parse_config).\nCallers retry once, then escalate.",
        "- the walker skips hidden files by default\n- ignore files are read per directory",
        "timeout = 30",
        "call `parse_config()` before `load()`",
        "fn walk(&self) -> Result<()> {\n    let entries = self.read_dir()?;\n    for e in entries {",
        "let x\nlet y",
        "~~~\nx\n~~~",
        "import os\nimport sys",
    ]
    .iter()
    .map(|t| (*t).to_owned())
    .collect();
    texts.push(format!("The fix:\n```rust\n{RUST}\n```\nDone."));
    texts.push(format!("This is what the function does now:\n{RUST}"));
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/fixtures");
    let mut dirs = vec![fixtures];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixtures").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                // Whole files, and their paragraphs one by one (what a message pastes).
                texts.extend(text.split("\n\n").map(str::to_owned));
                texts.push(text);
            }
        }
    }
    texts
}

#[test]
fn the_pre_check_never_skips_a_text_the_parser_would_flag() {
    let texts = corpus();
    let mut n_code = 0;
    for text in &texts {
        if !code_lines(text).is_empty() {
            n_code += 1;
            assert!(may_hold_code(text), "skipped code: {text:?}");
        }
    }
    assert!(n_code > 100, "the corpus holds code: {n_code} of {} texts", texts.len());
    // Skipping what holds none is the point: prose goes without a parse.
    assert!(!may_hold_code("The dev server listens on port 8437.\nIt was moved from 8080 last week."));
    assert!(!may_hold_code("Summary\nDetails follow below"));
    // A document is what its candidates make it.
    let doc = json!({ "claim": RUST, "notes": ["plain\nprose only", PYTHON] });
    assert_eq!(candidates(&doc), [RUST, PYTHON]);
    assert_eq!(code_in(&doc), code_in_texts([RUST, PYTHON]));
}

proptest::proptest! {
    /// Texts made of code's and prose's pieces: whatever the parser flags, the pre-check lets through.
    #[test]
    fn the_pre_check_lets_through_all_code_made_of_pieces(
        pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "fn f()", "let x", " = 1", ";", "{", "}", "\n", "\n\n", "def g", ":", "return y", "The cache",
                " is cleared.", "```", "~~~", "(a)", "[b]", "=>", "import os", "} else", "    ", "word", " ",
            ]),
            0..24,
        )
    ) {
        let text: String = pieces.concat();
        proptest::prop_assert!(code_lines(&text).is_empty() || may_hold_code(&text), "{:?}", text);
    }
}
