//! Record and replay of model exchanges: [`Recorder`] wraps a live [`CompletionModel`] and writes every exchange
//! to `DIR/<key>.json`, a failed one too (its error after the provider's retries); [`Replayer`] answers from those
//! files with no server, failing where the recorded run failed. A request already in the
//! recording is answered from it, also while recording: a server at temperature 0 is still not bit-stable (prompt
//! caching changes the arithmetic), and the LESS and verbatim runs of a scenario often ask the same question, so one
//! question gets one answer and the replay sees exactly what the live run saw. Record into an empty directory to ask
//! everything afresh. The key is the first 16 hex
//! digits of blake3 over the request's canonical JSON (system prompt, turns, sampling, schema), so a replayed run
//! asks the same questions and gets the same answers, and a request that was never recorded is the stable error
//! `LLM_REPLAY_MISSING` naming the key. A recorded failure answers again only within the recording process (so both
//! modes of a run see it alike); a later `--record` into the same directory asks that question live again, so a
//! server that was down while recording does not leave its errors behind for good.
//! Files are pretty JSON `{"key", "model", "request", "completion"}` or `{"key", "model", "request", "error"}`, never
//! edited by hand: `model` is the [`ModelIdentity`] that answered (its name, what the server serves, the weights'
//! sha256 when the server names them). `run.json` holds the recording's start time ([`recorded_run`]; recorded and
//! replayed runs stamp their documents with that time, so both count the same tokens) and its model, asked of the
//! provider at the first live exchange; recording into a directory made with another model is refused. A replay
//! A recording is sealed by its `manifest.json` ([`manifest`]): the blake3 of every file, and the model. A replay
//! verifies the whole directory against it before anything is asked (`LLM_REPLAY_TAMPERED` naming the file and what
//! differs; a recording without one is `LLM_RECORDING_UNSEALED`, sealed with `lessrt recording seal`), then checks
//! each exchange it answers from again: its bytes must be the ones sealed, its stored request the request the run
//! makes now, field for field, and its model the recording's (`LLM_REPLAY_MISMATCH` otherwise). So a completion, a
//! usage count or a model edited by hand, an exchange deleted or copied in, does not replay. [`recording_digest`]
//! names a recording's content and [`manifest::manifest_digest`] its seal (the bench writes both into `bench.json`). It holds no secret: a recording is meant to be shared (committed
//! beside the scenario), and the run's grant key never reaches a model or a counted byte (agents read a grant's
//! terms; its MAC stays with the grantee's gateway), so recorded and replayed runs sign with a fresh key of their
//! own like live runs. The `run_secret` that older recordings hold is ignored.

pub mod manifest;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use self::manifest::{Manifest, check_file, has_exchanges, read_manifest, seal_written, verify};
use crate::provider::{Completion, CompletionModel, CompletionRequest, LlmError, ModelFuture, ModelIdentity};

/// The key of `request` in a recording: 16 hex digits of the blake3 of its JSON. A request that cannot be written
/// as JSON has no key (`LLM_RECORDING_IO`), rather than the key of the empty text that every such request would share.
pub fn exchange_key(request: &CompletionRequest) -> Result<String, LlmError> {
    let text = serde_json::to_string(request).map_err(|err| LlmError::Recording {
        path: String::new(),
        message: format!("the request has no JSON form: {err}"),
    })?;
    Ok(blake3::hash(text.as_bytes()).to_hex()[..16].to_owned())
}

fn path_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.json"))
}

/// The name of the file holding a recording's start time.
pub const RUN_FILE: &str = "run.json";

/// The recording's `run.json`, parsed (`None`: there is none).
fn run_doc(dir: &Path) -> Result<Option<Value>, LlmError> {
    let path = dir.join(RUN_FILE);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|err| io(err.to_string())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(io(err.to_string())),
    }
}

/// Writes `doc` as the recording's `run.json` (pretty JSON), creating `dir`, and seals it (with `model`, the model
/// it names, if any).
fn write_run_doc(dir: &Path, doc: &Value, model: Option<&ModelIdentity>) -> Result<(), LlmError> {
    let path = dir.join(RUN_FILE);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    std::fs::create_dir_all(dir).map_err(|err| io(err.to_string()))?;
    let text = serde_json::to_string_pretty(doc).map_err(|err| io(err.to_string()))? + "\n";
    less_runtime::files::write_whole(&path, text.as_bytes()).map_err(|err| io(err.to_string()))?;
    seal_written(dir, RUN_FILE, text.as_bytes(), model)
}

/// The start time (RFC 3339) of the recording in `dir`: read from its `run.json`, or, when `create` and there is none
/// yet, `now`, written there.
pub fn recorded_run(dir: &Path, create: bool, now: &str) -> Result<String, LlmError> {
    let io = |message: &str| LlmError::Recording {
        path: dir.join(RUN_FILE).display().to_string(),
        message: message.to_owned(),
    };
    match run_doc(dir)? {
        Some(doc) => {
            let started = doc.get("started_at").and_then(Value::as_str).ok_or_else(|| io("no started_at"))?;
            Ok(started.to_owned())
        }
        None if create => {
            // A recording made now orders what agents read causally, so it replays at any parallelism.
            let doc = json!({"started_at": now, "ordering": less_runtime::run::Ordering::Causal.as_str()});
            write_run_doc(dir, &doc, None)?;
            Ok(now.to_owned())
        }
        None => Err(io("not found: not a recording made with `lessrt run --record DIR`")),
    }
}

/// How the run recorded in `dir` ordered what its agents read ([`less_runtime::run::Ordering`]): what its
/// `run.json` says, and for a recording made before turns could overlap, which says nothing, by arrival (one turn at
/// a time). A directory without `run.json` (a recording about to start) is recorded causally.
pub fn recorded_ordering(dir: &Path) -> Result<less_runtime::run::Ordering, LlmError> {
    use less_runtime::run::Ordering;
    let Some(doc) = run_doc(dir)? else { return Ok(Ordering::Causal) };
    match doc.get("ordering") {
        None | Some(Value::Null) => Ok(Ordering::Arrival),
        Some(ordering) => serde_json::from_value(ordering.clone()).map_err(|err| LlmError::Recording {
            path: dir.join(RUN_FILE).display().to_string(),
            message: format!("ordering: {err}"),
        }),
    }
}

/// A model whose every completion takes `latency` (`--replay-latency`): a replay made to take as long as a hosted
/// model would, so that a run shows the wall time its user would see. The completion's time is that latency.
pub struct Paced {
    inner: Arc<dyn CompletionModel>,
    latency: std::time::Duration,
}

impl Paced {
    /// `inner`, each completion taking `latency`.
    pub fn new(inner: Arc<dyn CompletionModel>, latency: std::time::Duration) -> Paced {
        Paced { inner, latency }
    }
}

impl CompletionModel for Paced {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn identity(&self) -> ModelFuture<'_, ModelIdentity> {
        self.inner.identity()
    }

    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let (answer, ()) = tokio::join!(self.inner.complete(request), tokio::time::sleep(self.latency));
            let mut completion = answer?;
            completion.elapsed_ms = u64::try_from(self.latency.as_millis()).unwrap_or(u64::MAX);
            Ok(completion)
        })
    }
}

/// The model a recording was made with, from its `run.json` (`None`: none recorded yet, or no `run.json`).
pub fn recorded_model(dir: &Path) -> Result<Option<ModelIdentity>, LlmError> {
    match run_doc(dir)?.as_ref().and_then(|doc| doc.get("model")) {
        None | Some(Value::Null) => Ok(None),
        Some(model) => serde_json::from_value(model.clone()).map(Some).map_err(|err| LlmError::Recording {
            path: dir.join(RUN_FILE).display().to_string(),
            message: format!("model: {err}"),
        }),
    }
}

/// Writes `model` into the recording's `run.json` (beside its start time) unless it names one already (checked
/// against the recorder's model before its exchange was asked).
fn stamp_model(dir: &Path, model: &ModelIdentity) -> Result<(), LlmError> {
    let mut doc = run_doc(dir)?.unwrap_or_else(|| json!({}));
    if doc.get("model").is_some_and(|m| !m.is_null()) {
        return Ok(());
    }
    doc["model"] = json!(model);
    write_run_doc(dir, &doc, Some(model))
}

/// The digest of a recording's content: blake3 over every `*.json` file of `dir` (exchanges and `run.json`, not the
/// manifest that seals them), in name order, each file's name and bytes. Any edit of any exchange changes it.
pub fn recording_digest(dir: &Path) -> Result<String, LlmError> {
    let io = |message: String| LlmError::Recording { path: dir.display().to_string(), message };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|err| io(err.to_string()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json") && name != manifest::MANIFEST_FILE)
        .collect();
    names.sort();
    let mut hasher = blake3::Hasher::new();
    for name in &names {
        let bytes = std::fs::read(dir.join(name)).map_err(|err| io(format!("{name}: {err}")))?;
        hasher.update(name.as_bytes());
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(format!("blake3:{}", hasher.finalize().to_hex()))
}

/// Writes every exchange of the model it wraps.
pub struct Recorder {
    inner: Arc<dyn CompletionModel>,
    dir: PathBuf,
    /// Keys whose failure this recorder wrote (answered from the recording again; older failures are asked anew).
    failed_here: Mutex<HashSet<String>>,
    /// The model that answers, asked once at the first live exchange and stamped into `run.json`.
    model: tokio::sync::OnceCell<ModelIdentity>,
}

impl Recorder {
    /// Records `inner`'s exchanges in `dir` (created if missing). A recording already there must verify against its
    /// manifest (one without a manifest but with exchanges is refused: seal it first), so a recording that goes on
    /// never seals an edit along with its new exchanges.
    pub fn new(inner: Arc<dyn CompletionModel>, dir: impl Into<PathBuf>) -> Result<Recorder, LlmError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|err| LlmError::Recording { path: dir.display().to_string(), message: err.to_string() })?;
        if read_manifest(&dir)?.is_some() {
            verify(&dir)?;
        } else if has_exchanges(&dir)? {
            return Err(LlmError::RecordingUnsealed { dir: dir.display().to_string() });
        }
        Ok(Recorder { inner, dir, failed_here: Mutex::default(), model: tokio::sync::OnceCell::new() })
    }

    /// Writes the exchange `key` answered by `model` and enters it into the manifest.
    fn write(&self, key: &str, doc: &Value, model: &ModelIdentity) -> Result<(), LlmError> {
        let path = path_of(&self.dir, key);
        let failed = |message: String| LlmError::Recording { path: path.display().to_string(), message };
        let text = serde_json::to_string_pretty(doc).map_err(|err| failed(err.to_string()))? + "\n";
        less_runtime::files::write_whole(&path, text.as_bytes()).map_err(|err| failed(err.to_string()))?;
        seal_written(&self.dir, &format!("{key}.json"), text.as_bytes(), Some(model))
    }
}

impl CompletionModel for Recorder {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let key = exchange_key(request)?;
            match read_exchange(&self.dir, &key)? {
                Some(Ok(recorded)) => return Ok(recorded),
                Some(Err(failed)) if self.failed_here.lock().unwrap_or_else(PoisonError::into_inner).contains(&key) => {
                    return Err(failed);
                }
                Some(Err(_)) | None => {}
            }
            // The model is asked for once; a recording made with another one is refused before anything is asked.
            let model = self.model.get_or_init(|| self.inner.identity()).await;
            if let Some(recorded) = recorded_model(&self.dir)?.filter(|recorded| recorded != model) {
                return Err(LlmError::Recording {
                    path: self.dir.join(RUN_FILE).display().to_string(),
                    message: format!(
                        "this recording was made with {recorded:?}, the server now answers as {model:?}: record into an empty directory"
                    ),
                });
            }
            match self.inner.complete(request).await {
                Ok(completion) => {
                    stamp_model(&self.dir, model)?;
                    let doc = json!({"key": key, "model": model, "request": request, "completion": completion});
                    self.write(&key, &doc, model)?;
                    Ok(completion)
                }
                Err(err) if err.is_exchange_outcome() => {
                    stamp_model(&self.dir, model)?;
                    self.write(&key, &json!({"key": key, "model": model, "request": request, "error": err}), model)?;
                    self.failed_here.lock().unwrap_or_else(PoisonError::into_inner).insert(key);
                    Err(err)
                }
                Err(err) => Err(err),
            }
        })
    }
}

/// The recorded outcome of `key`: the completion (`attempts` 0) or the failure; `None` if there is none.
fn read_exchange(dir: &Path, key: &str) -> Result<Option<Result<Completion, LlmError>>, LlmError> {
    match read_doc(dir, key)? {
        Some(doc) => outcome(dir, key, &doc).map(Some),
        None => Ok(None),
    }
}

/// The file of `key`, parsed; `None` if there is none.
fn read_doc(dir: &Path, key: &str) -> Result<Option<Value>, LlmError> {
    Ok(read_bytes(dir, key)?.map(|(_, doc)| doc))
}

/// The file of `key`: its bytes and their JSON; `None` if there is none.
fn read_bytes(dir: &Path, key: &str) -> Result<Option<(Vec<u8>, Value)>, LlmError> {
    let path = path_of(dir, key);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(io(err.to_string())),
    };
    let doc = serde_json::from_slice(&bytes).map_err(|err| io(err.to_string()))?;
    Ok(Some((bytes, doc)))
}

/// The outcome an exchange file records.
fn outcome(dir: &Path, key: &str, doc: &Value) -> Result<Result<Completion, LlmError>, LlmError> {
    let path = path_of(dir, key);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    if let Some(error) = doc.get("error") {
        let failed: LlmError =
            serde_json::from_value(error.clone()).map_err(|err| io(format!("unreadable error: {err}")))?;
        return Ok(Err(failed));
    }
    let mut completion: Completion = serde_json::from_value(doc.get("completion").cloned().unwrap_or_default())
        .map_err(|err| io(format!("no completion: {err}")))?;
    completion.attempts = 0;
    Ok(Ok(completion))
}

/// Answers from a sealed recording, checking each exchange against the manifest, the request and the recording's
/// model.
pub struct Replayer {
    dir: PathBuf,
    model: ModelIdentity,
    /// The recording's manifest, as verified when the replay began.
    manifest: Manifest,
}

impl Replayer {
    /// Replays the exchanges in `dir`, which must exist and verify against its manifest ([`manifest::verify`]).
    pub fn new(dir: impl Into<PathBuf>) -> Result<Replayer, LlmError> {
        let dir = dir.into();
        if !dir.is_dir() {
            return Err(LlmError::Recording {
                path: dir.display().to_string(),
                message: "no such recording directory: record one with `lessrt run --record DIR`".to_owned(),
            });
        }
        let manifest = verify(&dir)?;
        let Some(model) = recorded_model(&dir)? else {
            return Err(LlmError::Recording {
                path: dir.join(RUN_FILE).display().to_string(),
                message: "the recording names no model (made before recordings stored their model): record it again"
                    .to_owned(),
            });
        };
        Ok(Replayer { dir, model, manifest })
    }

    /// The model the recording was made with.
    pub fn model(&self) -> &ModelIdentity {
        &self.model
    }
}

impl CompletionModel for Replayer {
    fn name(&self) -> String {
        self.model.name.clone()
    }

    fn identity(&self) -> ModelFuture<'_, ModelIdentity> {
        Box::pin(async move { self.model.clone() })
    }

    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let key = exchange_key(request)?;
            let dir = self.dir.display().to_string();
            let name = format!("{key}.json");
            let Some((bytes, doc)) = read_bytes(&self.dir, &key)? else {
                if self.manifest.files.contains_key(&name) {
                    let what = format!("is listed in {} but missing", manifest::MANIFEST_FILE);
                    return Err(LlmError::ReplayTampered { dir, file: name, what });
                }
                return Err(LlmError::ReplayMissing { key, dir });
            };
            // Checked again as it is read: the directory verified when the replay began, this file may not have.
            check_file(&self.dir, &self.manifest, &name, &bytes)?;
            let mismatch = |what: String| LlmError::ReplayMismatch { key: key.clone(), dir: dir.clone(), what };
            let asked =
                serde_json::to_value(request).map_err(|err| mismatch(format!("the request has no JSON: {err}")))?;
            if doc.get("request") != Some(&asked) {
                return Err(mismatch("its stored request is not the request this run makes".to_owned()));
            }
            let model: Option<ModelIdentity> = doc.get("model").and_then(|m| serde_json::from_value(m.clone()).ok());
            if model.as_ref() != Some(&self.model) {
                return Err(mismatch(format!("its model {model:?} is not the recording's {:?}", self.model)));
            }
            outcome(&self.dir, &key, &doc)?
        })
    }
}

#[cfg(test)]
mod tests;
