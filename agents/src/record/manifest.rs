//! `manifest.json`: what makes a recording tamper-evident. It names its format, the model that answered (its identity
//! as the server reported it, and the sha256 of the model file when known, with where that hash comes from) and the
//! blake3 of every file of the recording (`run.json` and each exchange, over the file's bytes, so the request, the
//! completion and its usage are all covered). The [`Recorder`](super::Recorder) keeps it up to date after every
//! file it writes; [`verify`] checks a whole directory against it (what [`Replayer::new`](super::Replayer::new) and
//! `lessrt recording verify` do before anything runs) and [`check_file`] one file read later. A recording made before
//! manifests is sealed once, by hand, with [`seal`] (`lessrt recording seal DIR`), after checking it.
//!
//! The manifest is not signed: whoever edits a file and its manifest consistently makes a recording that verifies.
//! What names a recording for good is the digest of its manifest ([`manifest_digest`]), which `bench.json` keeps.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{RUN_FILE, recorded_model};
use crate::provider::{LlmError, ModelIdentity};

/// The name of a recording's manifest.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The manifest format this lessrt writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// Where a recorder's model file hash comes from: the local server names the file it serves so (scripts/local-llm.sh
/// hashes the file it starts the server with).
pub const FROM_SERVER: &str = "the server's /v1/models alias sha256:<hex>";

/// One process writes a directory's manifest at a time (every LLM agent of a run has a recorder of its own).
static MANIFEST_LOCK: Mutex<()> = Mutex::new(());

/// A recording's `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: u32,
    /// The model that answered; `None` until the first exchange.
    #[serde(default)]
    pub model: Option<SealedModel>,
    /// Every file of the recording by name, with `blake3:<hex>` of its bytes.
    pub files: BTreeMap<String, String>,
}

/// The model of a sealed recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SealedModel {
    /// The identity every exchange of the recording stores, as the server reported it.
    #[serde(flatten)]
    pub identity: ModelIdentity,
    /// The sha256 of the model file (the GGUF) that answered, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_sha256: Option<String>,
    /// Where `file_sha256` comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_sha256_from: Option<String>,
    /// What a reader should know about the identity (e.g. that `name` is only the name requests asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SealedModel {
    /// `identity` as a recorder seals it: the file's hash is the one the server named, if any.
    pub fn served_by(identity: &ModelIdentity) -> SealedModel {
        SealedModel {
            identity: identity.clone(),
            file_sha256: identity.sha256.clone(),
            file_sha256_from: identity.sha256.as_ref().map(|_| FROM_SERVER.to_owned()),
            note: None,
        }
    }
}

/// `blake3:<hex>` of `bytes`: how the manifest names a file's content.
pub fn file_digest(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}

/// Whether `name` is an exchange file's: 16 lowercase hex digits and `.json`.
pub fn is_exchange_file(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|stem| stem.len() == 16 && stem.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// The error for `file` of the recording in `dir`.
fn tampered(dir: &Path, file: &str, what: String) -> LlmError {
    LlmError::ReplayTampered { dir: dir.display().to_string(), file: file.to_owned(), what }
}

/// The recording's manifest (`None`: it has none). One that does not read is a tampered recording.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, LlmError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(LlmError::Recording { path: path.display().to_string(), message: err.to_string() }),
    };
    serde_json::from_str(&text).map(Some).map_err(|err| tampered(dir, MANIFEST_FILE, format!("does not read: {err}")))
}

/// Writes `manifest` (pretty JSON, renamed into place).
fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), LlmError> {
    let path = dir.join(MANIFEST_FILE);
    let io = |message: String| LlmError::Recording { path: path.display().to_string(), message };
    let text = serde_json::to_string_pretty(manifest).map_err(|err| io(err.to_string()))? + "\n";
    less_runtime::files::write_whole(&path, text.as_bytes()).map_err(|err| io(err.to_string()))
}

/// `blake3:<hex>` of the recording's `manifest.json`: the one name of everything the recording holds.
pub fn manifest_digest(dir: &Path) -> Result<String, LlmError> {
    match std::fs::read(dir.join(MANIFEST_FILE)) {
        Ok(bytes) => Ok(file_digest(&bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            Err(LlmError::RecordingUnsealed { dir: dir.display().to_string() })
        }
        Err(err) => {
            Err(LlmError::Recording { path: dir.join(MANIFEST_FILE).display().to_string(), message: err.to_string() })
        }
    }
}

/// Enters the file `name` just written with `bytes` into the manifest of `dir` (made if there is none), and the
/// model, when given, if the manifest names none yet.
pub(super) fn seal_written(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    model: Option<&ModelIdentity>,
) -> Result<(), LlmError> {
    let _guard = MANIFEST_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    let mut manifest =
        read_manifest(dir)?.unwrap_or(Manifest { format: MANIFEST_FORMAT, model: None, files: BTreeMap::new() });
    manifest.files.insert(name.to_owned(), file_digest(bytes));
    if manifest.model.is_none() {
        manifest.model = model.map(SealedModel::served_by);
    }
    write_manifest(dir, &manifest)
}

/// Whether `dir` holds any exchange file.
pub(super) fn has_exchanges(dir: &Path) -> Result<bool, LlmError> {
    Ok(!exchange_files(dir)?.is_empty())
}

/// The exchange files of `dir`, by name, sorted.
fn exchange_files(dir: &Path) -> Result<Vec<String>, LlmError> {
    let io = |message: String| LlmError::Recording { path: dir.display().to_string(), message };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|err| io(err.to_string()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| is_exchange_file(name))
        .collect();
    names.sort();
    Ok(names)
}

/// Checks the bytes of `name`, read from the recording, against what `manifest` sealed.
pub fn check_file(dir: &Path, manifest: &Manifest, name: &str, bytes: &[u8]) -> Result<(), LlmError> {
    let Some(sealed) = manifest.files.get(name) else {
        return Err(tampered(dir, name, format!("is not listed in {MANIFEST_FILE}")));
    };
    let found = file_digest(bytes);
    if &found != sealed {
        return Err(tampered(
            dir,
            name,
            format!("is not the file sealed: its bytes are {found}, {MANIFEST_FILE} sealed {sealed}"),
        ));
    }
    Ok(())
}

/// The model a recorded file (an exchange or `run.json`) names, as JSON (`null` when it names none).
fn model_of(dir: &Path, name: &str, bytes: &[u8]) -> Result<Value, LlmError> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|err| tampered(dir, name, format!("is not JSON: {err}")))?;
    Ok(doc.get("model").cloned().unwrap_or(Value::Null))
}

/// Checks the recording in `dir` against its manifest: the manifest reads, is of this format and names one file hash
/// for its model; every file it lists is there with the bytes it sealed; every exchange file is listed; and every
/// exchange (and `run.json`) names the manifest's model. Returns the manifest.
pub fn verify(dir: &Path) -> Result<Manifest, LlmError> {
    if !dir.is_dir() {
        return Err(LlmError::Recording {
            path: dir.display().to_string(),
            message: "no such recording directory: record one with `lessrt run --record DIR`".to_owned(),
        });
    }
    let Some(manifest) = read_manifest(dir)? else {
        return Err(LlmError::RecordingUnsealed { dir: dir.display().to_string() });
    };
    if manifest.format != MANIFEST_FORMAT {
        let what = format!("is format {}; this lessrt reads format {MANIFEST_FORMAT}", manifest.format);
        return Err(tampered(dir, MANIFEST_FILE, what));
    }
    if let Some(model) = &manifest.model
        && let (Some(served), Some(file)) = (&model.identity.sha256, &model.file_sha256)
        && served != file
    {
        let what = format!("names the served model's sha256 {served} and the model file's {file}: they differ");
        return Err(tampered(dir, MANIFEST_FILE, what));
    }
    let expected = manifest.model.as_ref().map(|m| serde_json::json!(m.identity));
    for name in manifest.files.keys() {
        if name != RUN_FILE && !is_exchange_file(name) {
            return Err(tampered(dir, MANIFEST_FILE, format!("lists {name:?}, which is no file of a recording")));
        }
        let bytes = match std::fs::read(dir.join(name)) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(tampered(dir, name, format!("is listed in {MANIFEST_FILE} but missing")));
            }
            Err(err) => {
                return Err(LlmError::Recording {
                    path: dir.join(name).display().to_string(),
                    message: err.to_string(),
                });
            }
        };
        check_file(dir, &manifest, name, &bytes)?;
        let model = model_of(dir, name, &bytes)?;
        // run.json names no model until the first exchange; an exchange always names one.
        let named = !(name == RUN_FILE && model.is_null());
        if named && Some(&model) != expected.as_ref() {
            let sealed = expected.as_ref().map_or_else(|| "none".to_owned(), Value::to_string);
            return Err(tampered(dir, name, format!("names the model {model}, and {MANIFEST_FILE} names {sealed}")));
        }
    }
    for name in exchange_files(dir)? {
        if !manifest.files.contains_key(&name) {
            return Err(tampered(dir, &name, format!("is not listed in {MANIFEST_FILE}")));
        }
    }
    Ok(manifest)
}

/// What `lessrt recording seal` is told about the model beyond what the recording says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SealOptions {
    /// The sha256 of the model file that answered (hashed from the file, or as a checksum list names it).
    pub file_sha256: Option<String>,
    /// Where `file_sha256` comes from (only with it).
    pub file_sha256_from: Option<String>,
    /// A note on the model's identity.
    pub note: Option<String>,
}

/// Seals the recording in `dir`: writes its manifest over what it holds now, after checking that it names one model
/// in `run.json` and every exchange, and that a model file hash given agrees with the one the server named. A
/// recording that has a manifest is sealed again only if it still verifies (a manifest is never rewritten over an
/// edit). Returns the manifest written.
pub fn seal(dir: &Path, options: &SealOptions) -> Result<Manifest, LlmError> {
    if read_manifest(dir)?.is_some() {
        verify(dir)?;
    }
    let Some(identity) = recorded_model(dir)? else {
        return Err(LlmError::Recording {
            path: dir.join(RUN_FILE).display().to_string(),
            message: "names no model: only a recording made with `--record` since recordings stored their model can be sealed"
                .to_owned(),
        });
    };
    let expected = serde_json::json!(identity);
    let read = |name: &str| {
        std::fs::read(dir.join(name))
            .map_err(|err| LlmError::Recording { path: dir.join(name).display().to_string(), message: err.to_string() })
    };
    let mut files = BTreeMap::new();
    let run = read(RUN_FILE)?;
    files.insert(RUN_FILE.to_owned(), file_digest(&run));
    for name in exchange_files(dir)? {
        let bytes = read(&name)?;
        let model = model_of(dir, &name, &bytes)?;
        if model != expected {
            return Err(LlmError::ReplayMismatch {
                key: name.trim_end_matches(".json").to_owned(),
                dir: dir.display().to_string(),
                what: format!("its model {model} is not the recording's {expected}, so there is no one model to seal"),
            });
        }
        files.insert(name, file_digest(&bytes));
    }
    let mut model = SealedModel::served_by(&identity);
    if let Some(file) = &options.file_sha256 {
        let file = file.to_ascii_lowercase();
        if file.len() != 64 || !file.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(LlmError::Recording {
                path: dir.display().to_string(),
                message: format!("{file:?} is no sha256: give 64 hex digits"),
            });
        }
        if let Some(served) = identity.sha256.as_ref().filter(|served| **served != file) {
            return Err(LlmError::ReplayMismatch {
                key: RUN_FILE.trim_end_matches(".json").to_owned(),
                dir: dir.display().to_string(),
                what: format!("the model file's sha256 {file} is not the one the server named, {served}"),
            });
        }
        model.file_sha256 = Some(file);
        model.file_sha256_from = options.file_sha256_from.clone();
    }
    model.note = options.note.clone();
    let manifest = Manifest { format: MANIFEST_FORMAT, model: Some(model), files };
    let _guard = MANIFEST_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    write_manifest(dir, &manifest)?;
    Ok(manifest)
}
