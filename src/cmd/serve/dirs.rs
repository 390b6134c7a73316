//! The runs a served directory holds, and reading one: its ledger (complete lines only, so a ledger being written is
//! read up to its last whole event), its report and its manifest. Nothing here writes.
//!
//! Runs are found afresh on every request, so a mode that starts while the page is open (`lessrt run --serve`
//! serves `<out>/<scenario>/` before its modes have directories) appears on the next look. A request names a run
//! by the id this module gave it, never by a path: nothing a browser sends is joined to a path.

use std::path::{Path, PathBuf};

use less_runtime::run::{Event, RunReport};

use super::manifest::{MANIFEST_FILE, Manifest};

/// The ledger's name in a mode's directory.
pub(crate) const LEDGER_FILE: &str = "ledger.jsonl";
/// The report's (written when the mode finished).
pub(crate) const REPORT_FILE: &str = crate::cmd::run::REPORT_FILE;

/// A run directory found under the served root.
#[derive(Debug, Clone)]
pub(crate) struct RunDir {
    /// Its id: the path below the root (`uc1-refactor/less`), or the root's own name when the root is a run.
    pub(crate) id: String,
    pub(crate) dir: PathBuf,
}

/// Whether `dir` is a mode's directory: it holds a ledger or a manifest.
pub(crate) fn is_run(dir: &Path) -> bool {
    dir.join(LEDGER_FILE).is_file() || dir.join(MANIFEST_FILE).is_file()
}

/// The runs under `root`: the root itself when it is one, else its subdirectories that are, and theirs (a
/// scenario's directory holds its modes; an output directory holds scenarios), sorted by id.
pub(crate) fn discover(root: &Path) -> Vec<RunDir> {
    if is_run(root) {
        let id = root
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".to_owned());
        return vec![RunDir { id, dir: root.to_owned() }];
    }
    let mut found = Vec::new();
    for (name, dir) in subdirs(root) {
        if is_run(&dir) {
            found.push(RunDir { id: name, dir });
            continue;
        }
        for (mode, sub) in subdirs(&dir) {
            if is_run(&sub) {
                found.push(RunDir { id: format!("{name}/{mode}"), dir: sub });
            }
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// The subdirectories of `dir` (not following symlinks out of it: a symlinked directory is skipped).
fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(|n| (n.to_owned(), e.path())))
        .filter(|(name, _)| !name.starts_with('.') && name != "memory")
        .collect()
}

/// A run as read now.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) run: RunDir,
    pub(crate) manifest: Option<Manifest>,
    pub(crate) events: Vec<Event>,
    /// Why the ledger stops early, when a line in it is not a whole event.
    pub(crate) cut: Option<String>,
    /// The report (none while the mode runs, or when it was stopped or failed).
    pub(crate) report: Option<RunReport>,
}

impl Loaded {
    /// The mode's name: the manifest's, the report's, else the directory's.
    pub(crate) fn mode(&self) -> String {
        self.manifest
            .as_ref()
            .map(|m| m.mode.clone())
            .or_else(|| self.report.as_ref().map(|r| r.mode.as_str().to_owned()))
            .unwrap_or_else(|| self.run.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
    }

    /// The scenario's name.
    pub(crate) fn scenario(&self) -> String {
        self.manifest
            .as_ref()
            .map(|m| m.scenario.clone())
            .or_else(|| self.report.as_ref().map(|r| r.scenario.clone()))
            .unwrap_or_else(|| self.run.id.clone())
    }
}

/// Reads a run directory.
pub(crate) fn load(run: &RunDir) -> Loaded {
    let (events, cut) = read_events(&run.dir.join(LEDGER_FILE));
    let report = std::fs::read_to_string(run.dir.join(REPORT_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<RunReport>(&text).ok());
    Loaded { run: run.clone(), manifest: Manifest::read(&run.dir), events, cut, report }
}

/// The whole events of a ledger, in order. A last line without its newline is being written and is left for the
/// next read; a line that is not an event ends the reading (with why).
pub(crate) fn read_events(path: &Path) -> (Vec<Event>, Option<String>) {
    let Ok(bytes) = std::fs::read(path) else { return (Vec::new(), None) };
    let mut events = Vec::new();
    let whole = match bytes.iter().rposition(|b| *b == b'\n') {
        Some(end) => &bytes[..=end],
        None => return (events, None),
    };
    for (n, line) in whole.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Event>(line) {
            Ok(event) => events.push(event),
            Err(err) => return (events, Some(format!("{LEDGER_FILE} line {} is not a whole event ({err})", n + 1))),
        }
    }
    (events, None)
}

/// The run the page opens first: one still running, else the LESS mode, else the first.
pub(crate) fn default_run(runs: &[RunDir]) -> Option<&RunDir> {
    runs.iter()
        .find(|r| r.dir.join(LEDGER_FILE).is_file() && !r.dir.join(REPORT_FILE).is_file())
        .or_else(|| runs.iter().find(|r| r.dir.file_name().is_some_and(|n| n == "less")))
        .or_else(|| runs.first())
}
