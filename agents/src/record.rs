//! Record and replay of model exchanges: [`Recorder`] wraps a live [`CompletionModel`] and writes every successful
//! exchange to `DIR/<key>.json`; [`Replayer`] answers from those files with no server. The key is the first 16 hex
//! digits of blake3 over the request's canonical JSON (system prompt, turns, sampling, schema), so a replayed run
//! asks the same questions and gets the same answers, and a request that was never recorded is the stable error
//! `LLM_REPLAY_MISSING` naming the key. Failed exchanges are not recorded: a run that met one cannot be replayed.
//! Files are pretty JSON `{"key", "request", "completion"}`, written once per key and never edited by hand.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::provider::{Completion, CompletionModel, CompletionRequest, LlmError, ModelFuture};

/// The key of `request` in a recording.
pub fn exchange_key(request: &CompletionRequest) -> String {
    let text = serde_json::to_string(request).unwrap_or_default();
    blake3::hash(text.as_bytes()).to_hex()[..16].to_owned()
}

fn path_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.json"))
}

/// Writes every successful exchange of the model it wraps.
pub struct Recorder {
    inner: Arc<dyn CompletionModel>,
    dir: PathBuf,
}

impl Recorder {
    /// Records `inner`'s exchanges in `dir` (created if missing).
    pub fn new(inner: Arc<dyn CompletionModel>, dir: impl Into<PathBuf>) -> Result<Recorder, LlmError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|err| LlmError::Recording { path: dir.display().to_string(), message: err.to_string() })?;
        Ok(Recorder { inner, dir })
    }
}

impl CompletionModel for Recorder {
    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let completion = self.inner.complete(request).await?;
            let key = exchange_key(request);
            let path = path_of(&self.dir, &key);
            let doc = json!({"key": key, "request": request, "completion": completion});
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
            std::fs::write(&path, text)
                .map_err(|err| LlmError::Recording { path: path.display().to_string(), message: err.to_string() })?;
            Ok(completion)
        })
    }
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
            let key = exchange_key(request);
            let path = path_of(&self.dir, &key);
            let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    return Err(LlmError::ReplayMissing { key, dir: self.dir.display().to_string() });
                }
                Err(err) => return Err(io(err.to_string())),
            };
            let doc: Value = serde_json::from_str(&text).map_err(|err| io(err.to_string()))?;
            let mut completion: Completion = serde_json::from_value(doc.get("completion").cloned().unwrap_or_default())
                .map_err(|err| io(format!("no completion: {err}")))?;
            completion.attempts = 0;
            Ok(completion)
        })
    }
}
