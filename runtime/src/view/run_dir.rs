//! The runs a served directory holds, and reading one: its ledger (complete lines only, so a ledger being written is
//! read up to its last whole event), its report and its manifest. Nothing here writes.
//!
//! Runs are found afresh on every request, so a mode that starts while the page is open (`lessrt run --serve`
//! serves `<out>/<scenario>/` before its modes have directories) appears on the next look. A request names a run
//! by the id this module gave it, never by a path: nothing a browser sends is joined to a path.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::run::{Event, RunReport, SentText, WIRE_FILE};

use super::manifest::{MANIFEST_FILE, Manifest};

/// The ledger's name in a mode's directory.
pub const LEDGER_FILE: &str = crate::layout::LEDGER_FILE;
/// The report's (written when the mode finished).
pub const REPORT_FILE: &str = "report.json";

/// A run directory found under the served root.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// Its id: the path below the root (`uc1-refactor/less`), or the root's own name when the root is a run.
    pub id: String,
    /// The directory.
    pub dir: PathBuf,
}

/// Whether `dir` is a mode's directory: it holds a ledger or a manifest.
pub fn is_run(dir: &Path) -> bool {
    dir.join(LEDGER_FILE).is_file() || dir.join(MANIFEST_FILE).is_file()
}

/// The runs under `root`: the root itself when it is one, else its subdirectories that are, and theirs (a
/// scenario's directory holds its modes; an output directory holds scenarios), sorted by id.
pub fn discover(root: &Path) -> Vec<RunDir> {
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
        .filter(|(name, _)| !name.starts_with('.') && name != crate::layout::RUN_STORE_DIR)
        .collect()
}

/// A run as read now.
#[derive(Debug)]
pub struct Loaded {
    /// The run directory.
    pub run: RunDir,
    /// Its manifest, when it has one.
    pub manifest: Option<Manifest>,
    /// The ledger's whole events, in order.
    pub events: Arc<Vec<Event>>,
    /// Why the ledger stops early, when a line in it is not a whole event.
    pub cut: Option<String>,
    /// The report (none while the mode runs, or when it was stopped or failed).
    pub report: Option<RunReport>,
}

impl Loaded {
    /// The mode's name: the manifest's, the report's, else the directory's.
    pub fn mode(&self) -> String {
        self.manifest
            .as_ref()
            .map(|m| m.mode.clone())
            .or_else(|| self.report.as_ref().map(|r| r.mode.as_str().to_owned()))
            .unwrap_or_else(|| self.run.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
    }

    /// The scenario's name.
    pub fn scenario(&self) -> String {
        self.manifest
            .as_ref()
            .map(|m| m.scenario.clone())
            .or_else(|| self.report.as_ref().map(|r| r.scenario.clone()))
            .unwrap_or_else(|| self.run.id.clone())
    }
}

/// Reads a run directory; its ledger's events come from `cache`, which parses only what was appended since.
pub fn load(run: &RunDir, cache: &EventCache) -> Loaded {
    let manifest = Manifest::read(&run.dir);
    let started_at = manifest.as_ref().map(|m| m.started_at.clone());
    let (events, cut) = cache.events(&run.dir.join(LEDGER_FILE), started_at);
    let report = std::fs::read_to_string(run.dir.join(REPORT_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<RunReport>(&text).ok());
    Loaded { run: run.clone(), manifest, events, cut, report }
}

/// What a baseline run sent (its `wire.jsonl`, whole lines that read as [`SentText`]); `None` when the run kept
/// none (a LESS run, or a run written before the file existed).
pub fn wire_texts(dir: &Path) -> Option<Vec<SentText>> {
    let text = std::fs::read_to_string(dir.join(WIRE_FILE)).ok()?;
    // A last line without its newline is being written.
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    Some(whole.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
}

/// How many ledgers an [`EventCache`] keeps parsed (the most recently read).
const CACHED_LEDGERS: usize = 4;

/// The parsed events of the ledgers read last, so that a request reads only the lines appended since the one before
/// (the page asks several times a second while a run is live). A ledger that shrank, or whose run's manifest names
/// another start, is read again from its beginning.
#[derive(Default)]
pub struct EventCache(Mutex<Vec<(PathBuf, Cached)>>);

impl std::fmt::Debug for EventCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_list().entries(held.iter().map(|(path, c)| (path, c.events.len()))).finish()
    }
}

#[derive(Clone, Default)]
struct Cached {
    events: Arc<Vec<Event>>,
    /// Bytes of the file read so far (whole lines).
    offset: u64,
    /// Lines read so far (for the line number of a broken one).
    lines: usize,
    started_at: Option<String>,
    cut: Option<String>,
}

impl EventCache {
    /// The whole events of the ledger at `path`, in order. A last line without its newline is being written and is
    /// left for the next read; a line that is not an event ends the reading (with why).
    pub fn events(&self, path: &Path, started_at: Option<String>) -> (Arc<Vec<Event>>, Option<String>) {
        let mut cached = {
            let mut held = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match held.iter().position(|(p, _)| p == path) {
                Some(at) => held.remove(at).1,
                None => Cached::default(),
            }
        };
        if cached.started_at != started_at {
            cached = Cached { started_at, ..Cached::default() };
        }
        extend(&mut cached, path);
        let answer = (cached.events.clone(), cached.cut.clone());
        let mut held = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.retain(|(p, _)| p != path);
        held.insert(0, (path.to_owned(), cached));
        held.truncate(CACHED_LEDGERS);
        answer
    }
}

/// Reads the lines appended to `path` since `cached.offset` into `cached`.
fn extend(cached: &mut Cached, path: &Path) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        *cached = Cached { started_at: cached.started_at.take(), ..Cached::default() };
        return;
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < cached.offset {
        *cached = Cached { started_at: cached.started_at.take(), ..Cached::default() };
    }
    if cached.cut.is_some() || len == cached.offset || file.seek(SeekFrom::Start(cached.offset)).is_err() {
        return;
    }
    let mut bytes = Vec::new();
    if file.take(len - cached.offset).read_to_end(&mut bytes).is_err() {
        return;
    }
    let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else { return };
    let events = Arc::make_mut(&mut cached.events);
    let mut read = 0;
    for line in bytes[..=end].split_inclusive(|b| *b == b'\n') {
        cached.lines += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        if !text.is_empty() {
            match serde_json::from_slice::<Event>(text) {
                Ok(event) => events.push(event),
                Err(err) => {
                    cached.cut = Some(format!("{LEDGER_FILE} line {} is not a whole event ({err})", cached.lines));
                    break;
                }
            }
        }
        read += line.len();
    }
    cached.offset += read as u64;
}

/// The run the page opens first: one still running, else the LESS mode, else the first.
pub fn default_run(runs: &[RunDir]) -> Option<&RunDir> {
    runs.iter()
        .find(|r| r.dir.join(LEDGER_FILE).is_file() && !r.dir.join(REPORT_FILE).is_file())
        .or_else(|| runs.iter().find(|r| r.dir.file_name().is_some_and(|n| n == "less")))
        .or_else(|| runs.first())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: usize) -> String {
        let event = Event::Spilled { agent: "lead".into(), msg_id: format!("m{n}") };
        serde_json::to_string(&event).expect("an event") + "\n"
    }

    fn ids(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Spilled { msg_id, .. } => msg_id.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// A ledger read again is parsed only where it grew; a shrunk ledger or another run's start reads it anew.
    #[test]
    fn the_cache_reads_what_was_appended_and_starts_over_for_a_new_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(LEDGER_FILE);
        let cache = EventCache::default();
        std::fs::write(&path, line(0) + &line(1)).expect("write");
        let (events, cut) = cache.events(&path, Some("t0".into()));
        assert_eq!((ids(&events), cut), (vec!["m0".to_owned(), "m1".to_owned()], None));
        // A line being written is left for the next read.
        let partial = line(3);
        std::fs::write(&path, line(0) + &line(1) + &line(2) + &partial[..10]).expect("write");
        assert_eq!(ids(&cache.events(&path, Some("t0".into())).0), ["m0", "m1", "m2"]);
        std::fs::write(&path, line(0) + &line(1) + &line(2) + &partial).expect("write");
        assert_eq!(ids(&cache.events(&path, Some("t0".into())).0), ["m0", "m1", "m2", "m3"]);
        // The file was replaced by a shorter one: read again from its start.
        std::fs::write(&path, line(7)).expect("write");
        assert_eq!(ids(&cache.events(&path, Some("t0".into())).0), ["m7"]);
        // The same length but another run (the manifest's start time): read again.
        std::fs::write(&path, line(8)).expect("write");
        assert_eq!(ids(&cache.events(&path, Some("t1".into())).0), ["m8"]);
        // A line that is not an event ends the reading, and says where.
        std::fs::write(&path, line(8) + "{\"event\":\"nonsense\"}\n" + &line(9)).expect("write");
        let (events, cut) = cache.events(&path, Some("t1".into()));
        assert_eq!(ids(&events), ["m8"]);
        assert!(cut.is_some_and(|c| c.contains("line 2")));
    }
}
