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
//! Files are pretty JSON `{"key", "request", "completion"}` or `{"key", "request", "error"}`, never edited by hand.
//! `run.json` holds the recording's start time ([`recorded_run`]): recorded and replayed runs stamp their documents
//! with that time, so both count the same tokens. It holds no secret: a recording is meant to be shared (committed
//! beside the scenario), and the run's grant key never reaches a model or a counted byte (agents read a grant's
//! terms; its MAC stays with the grantee's gateway), so recorded and replayed runs sign with a fresh key of their
//! own like live runs. The `run_secret` that older recordings hold is ignored.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use crate::provider::{Completion, CompletionModel, CompletionRequest, LlmError, ModelFuture};

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

/// The start time (RFC 3339) of the recording in `dir`: read from its `run.json`, or, when `create` and there is none
/// yet, `now`, written there.
pub fn recorded_run(dir: &Path, create: bool, now: &str) -> Result<String, LlmError> {
    let path = dir.join(RUN_FILE);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let doc: Value = serde_json::from_str(&text).map_err(|err| io(err.to_string()))?;
            let started =
                doc.get("started_at").and_then(Value::as_str).ok_or_else(|| io("no started_at".to_owned()))?;
            Ok(started.to_owned())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && create => {
            std::fs::create_dir_all(dir).map_err(|err| io(err.to_string()))?;
            let text =
                serde_json::to_string_pretty(&json!({"started_at": now})).map_err(|err| io(err.to_string()))? + "\n";
            std::fs::write(&path, text).map_err(|err| io(err.to_string()))?;
            Ok(now.to_owned())
        }
        Err(err) => Err(io(format!("{err}: not a recording made with `lessrt run --record DIR`"))),
    }
}

/// Writes every exchange of the model it wraps.
pub struct Recorder {
    inner: Arc<dyn CompletionModel>,
    dir: PathBuf,
    /// Keys whose failure this recorder wrote (answered from the recording again; older failures are asked anew).
    failed_here: Mutex<HashSet<String>>,
}

impl Recorder {
    /// Records `inner`'s exchanges in `dir` (created if missing).
    pub fn new(inner: Arc<dyn CompletionModel>, dir: impl Into<PathBuf>) -> Result<Recorder, LlmError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|err| LlmError::Recording { path: dir.display().to_string(), message: err.to_string() })?;
        Ok(Recorder { inner, dir, failed_here: Mutex::default() })
    }

    fn write(&self, key: &str, doc: &Value) -> Result<(), LlmError> {
        let path = path_of(&self.dir, key);
        let failed = |message: String| LlmError::Recording { path: path.display().to_string(), message };
        let text = serde_json::to_string_pretty(doc).map_err(|err| failed(err.to_string()))? + "\n";
        std::fs::write(&path, text).map_err(|err| failed(err.to_string()))
    }
}

impl CompletionModel for Recorder {
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
            match self.inner.complete(request).await {
                Ok(completion) => {
                    self.write(&key, &json!({"key": key, "request": request, "completion": completion}))?;
                    Ok(completion)
                }
                Err(err) if err.is_exchange_outcome() => {
                    self.write(&key, &json!({"key": key, "request": request, "error": err}))?;
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
    let path = path_of(dir, key);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(io(err.to_string())),
    };
    let doc: Value = serde_json::from_str(&text).map_err(|err| io(err.to_string()))?;
    if let Some(error) = doc.get("error") {
        let failed: LlmError =
            serde_json::from_value(error.clone()).map_err(|err| io(format!("unreadable error: {err}")))?;
        return Ok(Some(Err(failed)));
    }
    let mut completion: Completion = serde_json::from_value(doc.get("completion").cloned().unwrap_or_default())
        .map_err(|err| io(format!("no completion: {err}")))?;
    completion.attempts = 0;
    Ok(Some(Ok(completion)))
}

/// Answers from a recording.
pub struct Replayer {
    dir: PathBuf,
}

impl Replayer {
    /// Replays the exchanges in `dir`, which must exist.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Replayer, LlmError> {
        let dir = dir.into();
        if !dir.is_dir() {
            return Err(LlmError::Recording {
                path: dir.display().to_string(),
                message: "no such recording directory: record one with `lessrt run --record DIR`".to_owned(),
            });
        }
        Ok(Replayer { dir })
    }
}

impl CompletionModel for Replayer {
    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let key = exchange_key(request)?;
            read_exchange(&self.dir, &key)?
                .unwrap_or_else(|| Err(LlmError::ReplayMissing { key, dir: self.dir.display().to_string() }))
        })
    }
}

#[cfg(test)]
mod tests;
