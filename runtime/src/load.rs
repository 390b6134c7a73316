//! Loading a scenario as a run does: its document checked ([`Scenario::load`]), its workspace chosen (the file's, or
//! one the user names), and every pointer it names resolved against that workspace before anything starts, so a
//! missing file, a span past a file's end, or a directory or glob where a pointer is needed is refused with the
//! place in the scenario where it is written, not met in the middle of a run.

use std::path::Path;

use less_contract::{ErrorCode, Pointer, PointerType, Scenario, Violation, Violations, scenario_pointer_texts};
use serde_json::Value;

use crate::resolver::Resolver;

/// Loads the scenario at `path` for a run on `workspace` (its own when `None`; a directory the user named may be
/// anywhere, and symlinks out of it are still refused by the resolver), with every pointer it names resolved.
pub fn load_scenario(path: &Path, workspace: Option<&Path>) -> Result<Scenario, Violations> {
    let mut scenario = Scenario::load(path)?;
    if let Some(dir) = workspace {
        if !dir.is_dir() {
            return Err(Violations(vec![Violation::new(
                ErrorCode::InputUnreadable,
                "/workspace",
                format!(
                    "--workspace {}: not a directory; name the directory the scenario's pointers are in",
                    dir.display()
                ),
            )]));
        }
        scenario.workspace = dir.to_path_buf();
    }
    let text = std::fs::read_to_string(path).map_err(|err| {
        Violations(vec![Violation::new(ErrorCode::InputUnreadable, "", format!("{}: {err}", path.display()))])
    })?;
    let doc = less_contract::scenario_document(&text).map_err(|v| Violations(vec![v]))?;
    let problems = pointer_problems(&doc, &scenario.workspace);
    if problems.is_empty() { Ok(scenario) } else { Err(Violations(problems)) }
}

/// What is wrong with the pointers the scenario document `doc` names, resolved against `workspace`: a file that is
/// not there, a directory or a glob where a pointer names one file, a line span that starts or ends past the file's
/// end, a section or test that is not there. `sam:` pointers name what a run writes and `url:` ones are never read,
/// so neither is checked; a workspace that does not exist yet (a template) is refused when a run opens it.
pub fn pointer_problems(doc: &Value, workspace: &Path) -> Vec<Violation> {
    let Ok(resolver) = Resolver::new(workspace) else { return Vec::new() };
    let mut out = Vec::new();
    for (path, text) in scenario_pointer_texts(doc) {
        // A text that does not parse is reported by the document's own check.
        let Ok(pointer) = Pointer::parse(&text) else { continue };
        if let Some(why) = problem(&resolver, &pointer) {
            out.push(Violation::new(ErrorCode::PointerUnresolved, path, format!("{text}: {why}")));
        }
    }
    out
}

/// Why `pointer` would not resolve in a run, with what to write instead; `None` when it resolves.
fn problem(resolver: &Resolver, pointer: &Pointer) -> Option<String> {
    if matches!(pointer.ty(), PointerType::Sam | PointerType::Url) {
        return None;
    }
    let location = pointer.location();
    let names_file = matches!(pointer.ty(), PointerType::Repo | PointerType::Artifact);
    if names_file && location.contains(['*', '?', '[']) {
        return Some(
            "a pointer names one file, and this is a pattern: name each file (a pattern belongs in a grant or a reach)"
                .to_owned(),
        );
    }
    if names_file && resolver.root().join(location).is_dir() {
        return Some("a directory; a pointer names one file (or lines of it) inside the workspace".to_owned());
    }
    if let Err(violation) = resolver.read_unpinned(pointer, &()) {
        return Some(format!("{}; point at a file of the workspace {}", violation.message, resolver.root().display()));
    }
    let (_, end) = pointer.line_range()?;
    let n_lines = resolver.read_unpinned(&pointer.whole(), &()).ok()?.lines().count();
    (end as usize > n_lines)
        .then(|| format!("the span ends past the file's end: it has {n_lines} lines, so end it at L{n_lines} at most"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("src/nested")).expect("mkdir");
        let seventeen: String = (1..=17).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("src/lib.rs"), seventeen).expect("write");
        std::fs::write(dir.path().join("NOTES.md"), "# Notes\n\nbody\n").expect("write");
        dir
    }

    fn problems_of(pointers: &[&str]) -> Vec<Violation> {
        let dir = workspace();
        pointer_problems(&json!({"plan": {"artifacts": pointers}}), dir.path())
    }

    #[test]
    fn pointers_that_resolve_pass() {
        let problems =
            problems_of(&["repo:src/lib.rs", "repo:src/lib.rs#L3-L17", "artifact:NOTES.md#sec=Notes", "sam:msg:m1"]);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_missing_file_a_directory_a_glob_and_a_span_past_the_end_are_each_refused_where_they_are_written() {
        let problems = problems_of(&[
            "repo:src/gone.rs",
            "repo:src/nested",
            "repo:src/**",
            "repo:src/lib.rs#L10-L30",
            "repo:src/lib.rs#L18-L20",
            "artifact:NOTES.md#sec=Missing",
        ]);
        let at: Vec<(&str, &str)> = problems.iter().map(|v| (v.path.as_str(), v.message.as_str())).collect();
        assert_eq!(problems.len(), 6, "{at:?}");
        assert!(problems.iter().all(|v| v.code == ErrorCode::PointerUnresolved));
        assert_eq!(at[0].0, "/plan/artifacts/0");
        assert!(at[1].1.contains("a directory"), "{at:?}");
        assert!(at[2].1.contains("a pattern"), "{at:?}");
        assert!(at[3].1.contains("it has 17 lines"), "{at:?}");
        assert!(at[4].1.contains("the file has 17 lines"), "{at:?}");
        assert!(at[5].1.contains("no heading"), "{at:?}");
    }

    #[test]
    fn a_workspace_that_is_not_there_yet_is_left_to_the_run() {
        let problems = pointer_problems(&json!({"plan": {"artifacts": ["repo:x.rs"]}}), Path::new("/nonexistent/ws"));
        assert!(problems.is_empty());
    }
}
