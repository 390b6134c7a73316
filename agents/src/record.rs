//! Record and replay of model exchanges: [`Recorder`] wraps a live [`CompletionModel`] and writes every successful
//! exchange to `DIR/<key>.json`; [`Replayer`] answers from those files with no server. A request already in the
//! recording is answered from it, also while recording: a server at temperature 0 is still not bit-stable (prompt
//! caching changes the arithmetic), and the LESS and verbatim runs of a scenario often ask the same question, so one
//! question gets one answer and the replay sees exactly what the live run saw. Record into an empty directory to ask
//! everything afresh. The key is the first 16 hex
//! digits of blake3 over the request's canonical JSON (system prompt, turns, sampling, schema), so a replayed run
//! asks the same questions and gets the same answers, and a request that was never recorded is the stable error
//! `LLM_REPLAY_MISSING` naming the key. Failed exchanges are not recorded: a run that met one cannot be replayed.
//! Files are pretty JSON `{"key", "request", "completion"}`, written once per key and never edited by hand.
//! `run.json` holds the recording's start time and grant key ([`recorded_run`]): recorded and replayed runs stamp
//! their documents with that time and sign grants with that key, so both count the same tokens.

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

/// The name of the file holding a recording's start time.
pub const RUN_FILE: &str = "run.json";

/// The start time (RFC 3339) and grant key of the recording in `dir`: read from its `run.json`, or, when `create`
/// and there is none yet, `now` and `secret` written there.
pub fn recorded_run(dir: &Path, create: bool, now: &str, secret: [u8; 32]) -> Result<(String, [u8; 32]), LlmError> {
    let path = dir.join(RUN_FILE);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let doc: Value = serde_json::from_str(&text).map_err(|err| io(err.to_string()))?;
            let field = |name: &str| doc.get(name).and_then(Value::as_str).ok_or_else(|| io(format!("no {name}")));
            let secret =
                blake3::Hash::from_hex(field("run_secret")?).map_err(|err| io(format!("run_secret: {err}")))?;
            Ok((field("started_at")?.to_owned(), *secret.as_bytes()))
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && create => {
            std::fs::create_dir_all(dir).map_err(|err| io(err.to_string()))?;
            let doc = json!({"started_at": now, "run_secret": blake3::Hash::from(secret).to_hex().as_str()});
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
            std::fs::write(&path, text).map_err(|err| io(err.to_string()))?;
            Ok((now.to_owned(), secret))
        }
        Err(err) => Err(io(format!("{err}: not a recording made with `lessrt run --record DIR`"))),
    }
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
            let key = exchange_key(request);
            if let Some(recorded) = read_exchange(&self.dir, &key)? {
                return Ok(recorded);
            }
            let completion = self.inner.complete(request).await?;
            let path = path_of(&self.dir, &key);
            let doc = json!({"key": key, "request": request, "completion": completion});
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
            std::fs::write(&path, text)
                .map_err(|err| LlmError::Recording { path: path.display().to_string(), message: err.to_string() })?;
            Ok(completion)
        })
    }
}

/// The recorded answer to `key` (`attempts` 0), `None` if there is none.
fn read_exchange(dir: &Path, key: &str) -> Result<Option<Completion>, LlmError> {
    let path = path_of(dir, key);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(io(err.to_string())),
    };
    let doc: Value = serde_json::from_str(&text).map_err(|err| io(err.to_string()))?;
    let mut completion: Completion = serde_json::from_value(doc.get("completion").cloned().unwrap_or_default())
        .map_err(|err| io(format!("no completion: {err}")))?;
    completion.attempts = 0;
    Ok(Some(completion))
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
            read_exchange(&self.dir, &key)?
                .ok_or_else(|| LlmError::ReplayMissing { key, dir: self.dir.display().to_string() })
        })
    }
}

#[cfg(test)]
mod tests;
