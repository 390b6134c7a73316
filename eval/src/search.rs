//! How well the workspace search finds the evidence of graded tasks (`lessrt eval search`): for each task of a scenario, its question is searched in
//! the scenario's workspace, and the task counts as found at `k` when every gold citation (any one of an entry's
//! alternatives) overlaps one of the top `k` hits: the same file and intersecting lines.
//!
//! Gold citations name sources as the scenarios' authors wrote them; each is placed on its file's lines first:
//! `repo:` as written, `artifact:` by its lines or its section's heading, `diff:<a>..<b>#<path>` as that path's part
//! of `diffs/<a>..<b>.diff`, `test:<suite>::<name>` as the function's chunk in `tests/<suite>.rs` or `src/<suite>.rs`.
//!
//! The tasks are split once, by the blake3 of their id (even first byte: `tune`, odd: `held_out`), before any figure
//! was looked at; ranking choices are made on the `tune` half alone and both halves are reported.

use std::path::Path;

use less_runtime::memory::Stages;
use less_runtime::workspace::{Hit, MAX_K, WorkspaceError, WorkspaceIndex, chunk_file};
use less_runtime::{OneOf, Pointer, PointerType, Scenario};
use serde_json::{Value, json};

/// Where a source sits: a workspace file and lines (inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The workspace-relative path.
    pub path: String,
    /// First line.
    pub start: u32,
    /// Last line.
    pub end: u32,
}

/// One task's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaskFound {
    /// The scenario.
    pub scenario: String,
    /// The task's id.
    pub task: String,
    /// `tune` or `held_out`.
    pub split: &'static str,
    /// For each `k` asked: whether every gold entry was among the top `k`.
    pub found: Vec<(usize, bool)>,
    /// The rank (1-based) at which each gold entry was first covered; none: not in the pool.
    pub ranks: Vec<Option<usize>>,
}

/// The split of a task, by its id.
pub fn split_of(task_id: &str) -> &'static str {
    if blake3::hash(task_id.as_bytes()).as_bytes()[0].is_multiple_of(2) { "tune" } else { "held_out" }
}

/// Places `pointer` on its file's lines in the workspace `root` (none: it names nothing there).
pub fn place(root: &Path, pointer: &Pointer) -> Option<Place> {
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
    let lines_of = |text: &str| u32::try_from(text.lines().count()).unwrap_or(u32::MAX).max(1);
    match pointer.ty() {
        PointerType::Repo | PointerType::Artifact => {
            let path = pointer.location().to_owned();
            let text = read(&path)?;
            if let Some((start, end)) = pointer.line_range() {
                return Some(Place { path, start, end });
            }
            match pointer.span().map(|s| s.strip_prefix("sec=").unwrap_or(s)) {
                Some(heading) => {
                    let chunk = chunk_file(&path, &text)
                        .into_iter()
                        .find(|c| c.symbols.first().is_some_and(|s| s == heading))?;
                    Some(Place { path, start: chunk.start, end: chunk.end })
                }
                None => Some(Place { end: lines_of(&text), path, start: 1 }),
            }
        }
        PointerType::Diff => {
            let path = format!("diffs/{}.diff", pointer.reference());
            let text = read(&path)?;
            let Some(file) = pointer.span() else { return Some(Place { end: lines_of(&text), path, start: 1 }) };
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.iter().position(|l| l.starts_with("diff --git") && l.contains(&format!("b/{file}")))?;
            let end = lines[start + 1..]
                .iter()
                .position(|l| l.starts_with("diff --git"))
                .map_or(lines.len(), |n| start + 1 + n);
            Some(Place { path, start: u32::try_from(start + 1).ok()?, end: u32::try_from(end).ok()? })
        }
        PointerType::Test => {
            let (suite, name) = pointer.reference().rsplit_once("::").unwrap_or(("", pointer.reference()));
            let suite = suite.replace("::", "/");
            for candidate in [format!("tests/{suite}.rs"), format!("src/{suite}.rs"), format!("src/{suite}/mod.rs")] {
                if let Some(text) = read(&candidate)
                    && let Some(chunk) =
                        chunk_file(&candidate, &text).into_iter().find(|c| c.symbols.iter().any(|s| s == name))
                {
                    return Some(Place { path: candidate, start: chunk.start, end: chunk.end });
                }
            }
            None
        }
        PointerType::Sam | PointerType::Url => None,
    }
}

/// The report of `lessrt eval search` over every task searched by each stages (`items`): {"tasks", "rows":
/// [{"stages", "split", "tasks", "found": {k: n}}] (a row per stages and split, `tune`, `held_out` and `all`),
/// "items": [{"stages", "found": <the task's outcome>}]}.
pub fn report(items: &[(Stages, TaskFound)], ks: &[usize]) -> Value {
    let mut rows = Vec::new();
    for stages in ["hash", "hash+rerank"] {
        for split in ["tune", "held_out", "all"] {
            let chosen: Vec<&TaskFound> = items
                .iter()
                .filter(|(s, f)| s.as_str() == stages && (split == "all" || f.split == split))
                .map(|(_, f)| f)
                .collect();
            let found: serde_json::Map<String, Value> = ks
                .iter()
                .map(|k| {
                    let n = chosen.iter().filter(|f| f.found.iter().any(|(kk, ok)| kk == k && *ok)).count();
                    (k.to_string(), json!(n))
                })
                .collect();
            rows.push(json!({"stages": stages, "split": split, "tasks": chosen.len(), "found": found}));
        }
    }
    json!({
        "tasks": items.len() / 2,
        "rows": rows,
        "items": items.iter().map(|(s, f)| json!({"stages": s.as_str(), "found": f})).collect::<Vec<_>>(),
    })
}

/// The table of `lessrt eval search` (docs/index-search-ask.md's): a row per stages and split, a column per k.
pub fn table(doc: &Value, ks: &[usize]) -> String {
    let mut out = String::from("| stages | split | tasks |");
    for k in ks {
        out.push_str(&format!(" found in top {k} |"));
    }
    out.push_str("\n|---|---|---:|");
    for _ in ks {
        out.push_str("---:|");
    }
    for row in doc["rows"].as_array().into_iter().flatten() {
        let tasks = row["tasks"].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "\n| {} | {} | {tasks} |",
            row["stages"].as_str().unwrap_or(""),
            row["split"].as_str().unwrap_or("")
        ));
        for k in ks {
            let n = row["found"][k.to_string()].as_u64().unwrap_or(0);
            let pct = if tasks == 0 { 0.0 } else { 100.0 * n as f64 / tasks as f64 };
            out.push_str(&format!(" {n} ({pct:.0}%) |"));
        }
    }
    out
}

fn overlaps(hit: &Hit, place: &Place) -> bool {
    hit.path == place.path && hit.start <= place.end && place.start <= hit.end
}

/// Searches each graded task's question of `scenario` in `index` (of the scenario's workspace) by `stages`, and
/// says at which of `ks` its gold citations were all found.
pub fn evaluate(
    scenario: &Scenario,
    index: &mut WorkspaceIndex,
    stages: Stages,
    ks: &[usize],
) -> Result<Vec<TaskFound>, WorkspaceError> {
    let pool = ks.iter().copied().max().unwrap_or(10).clamp(1, MAX_K);
    let mut out = Vec::new();
    for task in &scenario.tasks {
        if task.gold.cites.is_empty() {
            continue;
        }
        let hits = index.search(&task.question, pool, stages, &|_| true)?.hits;
        let ranks: Vec<Option<usize>> = task
            .gold
            .cites
            .iter()
            .map(|entry| {
                let alternatives: Vec<&String> = match entry {
                    OneOf::One(one) => vec![one],
                    OneOf::Any(any) => any.iter().collect(),
                };
                let places: Vec<Place> = alternatives
                    .into_iter()
                    .filter_map(|text| Pointer::parse(text).ok())
                    .filter_map(|p| place(&scenario.workspace, &p))
                    .collect();
                hits.iter().position(|hit| places.iter().any(|p| overlaps(hit, p))).map(|i| i + 1)
            })
            .collect();
        let found = ks.iter().map(|&k| (k, ranks.iter().all(|r| r.is_some_and(|r| r <= k)))).collect();
        out.push(TaskFound {
            scenario: scenario.name.clone(),
            task: task.id.clone(),
            split: split_of(&task.id),
            found,
            ranks,
        });
    }
    Ok(out)
}
