//! Recording and replaying: one answer per question, a replay without the model, a missing exchange named.

use std::sync::Mutex;

use super::*;
use crate::provider::{ChatMessage, Usage};

/// Answers "n" for its n-th call, so a second call for the same question would show.
struct Counting(Mutex<u32>);

impl CompletionModel for Counting {
    fn complete<'a>(&'a self, _request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let mut n = self.0.lock().expect("lock");
            *n += 1;
            Ok(Completion {
                text: n.to_string(),
                finish_reason: None,
                usage: Some(Usage::default()),
                attempts: 1,
                elapsed_ms: 0,
            })
        })
    }
}

fn ask(text: &str) -> CompletionRequest {
    CompletionRequest {
        system: "s".to_owned(),
        messages: vec![ChatMessage::user(text)],
        temperature: 0.0,
        max_tokens: 8,
        schema: None,
    }
}

#[tokio::test]
async fn a_recording_answers_each_question_once_and_replays_without_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let live = Arc::new(Counting(Mutex::new(0)));
    let recorder = Recorder::new(live.clone(), dir.path()).expect("recorder");
    assert_eq!(recorder.complete(&ask("a")).await.expect("a").text, "1");
    assert_eq!(recorder.complete(&ask("b")).await.expect("b").text, "2");
    assert_eq!(recorder.complete(&ask("a")).await.expect("a again").text, "1", "one question, one answer");
    assert_eq!(*live.0.lock().expect("lock"), 2);

    let replayer = Replayer::new(dir.path()).expect("replayer");
    assert_eq!(replayer.complete(&ask("b")).await.expect("b").text, "2");
    let err = replayer.complete(&ask("c")).await.expect_err("never recorded");
    assert_eq!(err.code(), "LLM_REPLAY_MISSING");
    assert!(err.to_string().contains(&exchange_key(&ask("c")).expect("a key")), "{err}");
}

/// Fails its first call (the server is down), then answers "up".
struct DownThenUp(Mutex<u32>);

impl CompletionModel for DownThenUp {
    fn complete<'a>(&'a self, _request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let mut n = self.0.lock().expect("lock");
            *n += 1;
            if *n == 1 {
                return Err(LlmError::Unreachable { attempts: 4, message: "connection refused".to_owned() });
            }
            Ok(Completion {
                text: "up".to_owned(),
                finish_reason: None,
                usage: Some(Usage::default()),
                attempts: 1,
                elapsed_ms: 0,
            })
        })
    }
}

#[tokio::test]
async fn a_failed_exchange_is_recorded_and_replays_as_the_same_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let live = Arc::new(DownThenUp(Mutex::new(0)));
    let recorder = Recorder::new(live.clone(), dir.path()).expect("recorder");
    let failed = recorder.complete(&ask("a")).await.expect_err("the server is down");
    // Within the recording run, the question keeps its answer: the failure (both modes of a run see it alike).
    assert_eq!(recorder.complete(&ask("a")).await.expect_err("the same failure"), failed);
    assert_eq!(*live.0.lock().expect("lock"), 1);

    let replayed = Replayer::new(dir.path()).expect("replayer").complete(&ask("a")).await.expect_err("replayed");
    assert_eq!(replayed, failed, "the replay fails exactly as the recorded run did");
    assert_eq!(replayed.code(), "LLM_UNREACHABLE");

    // A later recording asks the failed question again, and its answer replaces the failure.
    let again = Recorder::new(live.clone(), dir.path()).expect("recorder");
    assert_eq!(again.complete(&ask("a")).await.expect("the server is up").text, "up");
    let replayer = Replayer::new(dir.path()).expect("replayer");
    assert_eq!(replayer.complete(&ask("a")).await.expect("replayed answer").text, "up");
}

#[tokio::test]
async fn recording_problems_are_not_recorded_as_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = tempfile::tempdir().expect("tempdir");
    // A recorder over a replayer of an empty recording: the miss is the recording's problem, not the model's answer.
    let model = ModelIdentity { name: "m".to_owned(), served: None, sha256: None };
    stamp_model(empty.path(), &model).expect("run.json");
    let inner: Arc<dyn CompletionModel> = Arc::new(Replayer::new(empty.path()).expect("replayer"));
    let recorder = Recorder::new(inner, dir.path()).expect("recorder");
    let err = recorder.complete(&ask("a")).await.expect_err("missing");
    assert_eq!(err.code(), "LLM_REPLAY_MISSING");
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0, "nothing written");
}

#[test]
fn replaying_a_missing_directory_says_how_to_record_one() {
    let err = Replayer::new("/nonexistent/recording").err().expect("no directory");
    assert_eq!(err.code(), "LLM_RECORDING_IO");
    assert!(err.to_string().contains("--record"));
}

#[test]
fn a_recording_holds_its_start_time_and_no_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let started = recorded_run(dir.path(), true, "2026-11-22T08:25:02Z").expect("created");
    assert_eq!(started, "2026-11-22T08:25:02Z");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(RUN_FILE)).expect("run.json")).expect("JSON");
    assert_eq!(
        doc,
        json!({"started_at": "2026-11-22T08:25:02Z", "ordering": "causal"}),
        "nothing but the start time and how its agents read"
    );
    assert_eq!(recorded_ordering(dir.path()).expect("read"), less_runtime::run::Ordering::Causal);
    // A recording made before turns could overlap names no ordering: it reads by arrival.
    std::fs::write(dir.path().join(RUN_FILE), r#"{"started_at": "2026-11-22T08:25:02Z"}"#).expect("write");
    assert_eq!(recorded_ordering(dir.path()).expect("read"), less_runtime::run::Ordering::Arrival);
    std::fs::write(dir.path().join(RUN_FILE), doc.to_string()).expect("write");
    assert_eq!(
        recorded_run(dir.path(), true, "2027-01-01T00:00:00Z").expect("read"),
        started,
        "read back, not rewritten"
    );
    // A recording of an older lessrt (with the key it used to keep) still replays; the key is ignored.
    std::fs::write(dir.path().join(RUN_FILE), r#"{"started_at": "2026-01-01T00:00:00Z", "run_secret": "00"}"#)
        .expect("write");
    assert_eq!(recorded_run(dir.path(), false, "x").expect("read"), "2026-01-01T00:00:00Z");
    let missing = tempfile::tempdir().expect("tempdir");
    assert!(recorded_run(missing.path(), false, "x").is_err(), "a replay needs a recording");
}

/// Answers "x" as the model `name`.
struct Named(&'static str);

impl CompletionModel for Named {
    fn complete<'a>(&'a self, _request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async {
            Ok(Completion {
                text: "x".to_owned(),
                finish_reason: None,
                usage: Some(Usage::default()),
                attempts: 1,
                elapsed_ms: 0,
            })
        })
    }

    fn identity(&self) -> ModelFuture<'_, ModelIdentity> {
        Box::pin(async move {
            ModelIdentity {
                name: self.0.to_owned(),
                served: Some(format!("{}.gguf", self.0)),
                sha256: Some("ab".repeat(32)),
            }
        })
    }
}

#[tokio::test]
async fn a_replay_refuses_an_edited_request_and_another_models_exchange() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::new(Arc::new(Named("qwen")), dir.path()).expect("recorder");
    recorder.complete(&ask("a")).await.expect("a");
    recorder.complete(&ask("b")).await.expect("b");
    assert_eq!(recorded_model(dir.path()).expect("run.json").map(|m| m.name), Some("qwen".to_owned()));
    let digest = recording_digest(dir.path()).expect("digest");
    let replayer = Replayer::new(dir.path()).expect("replayer");
    assert_eq!(replayer.model().sha256.as_deref(), Some("ab".repeat(32).as_str()));
    assert_eq!(replayer.complete(&ask("a")).await.expect("a").text, "x");

    // The stored request of `a` edited by hand (its file name, the key, unchanged): its bytes are no longer the
    // sealed ones, so it is refused as it is read, and the digest moves.
    let key = exchange_key(&ask("a")).expect("key");
    let file = dir.path().join(format!("{key}.json"));
    let text = std::fs::read_to_string(&file).expect("exchange");
    std::fs::write(&file, text.replace("\"max_tokens\": 8", "\"max_tokens\": 9")).expect("edit");
    assert_ne!(recording_digest(dir.path()).expect("digest"), digest, "any edit changes the digest");
    let err = replayer.complete(&ask("a")).await.expect_err("edited");
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    assert!(err.to_string().contains(&format!("{key}.json is not the file sealed")), "{err}");
    // Sealed along with its edit (a forged manifest), the edited request is still not the run's.
    forge_seal(dir.path(), &format!("{key}.json"));
    let err = Replayer::new(dir.path()).expect("replayer").complete(&ask("a")).await.expect_err("edited");
    assert_eq!(err.code(), "LLM_REPLAY_MISMATCH");
    assert!(err.to_string().contains("stored request"), "{err}");

    // Recording into a directory another model made is refused before anything is asked.
    let err = Recorder::new(Arc::new(Named("smol")), dir.path())
        .expect("recorder")
        .complete(&ask("d"))
        .await
        .expect_err("another model");
    assert_eq!(err.code(), "LLM_RECORDING_IO");
    assert!(!dir.path().join(format!("{}.json", exchange_key(&ask("d")).expect("key"))).exists());

    // An exchange of another model's recording copied in (and sealed by a forged manifest): refused.
    let other = tempfile::tempdir().expect("tempdir");
    Recorder::new(Arc::new(Named("smol")), other.path()).expect("recorder").complete(&ask("c")).await.expect("c");
    let key_c = exchange_key(&ask("c")).expect("key");
    std::fs::copy(other.path().join(format!("{key_c}.json")), dir.path().join(format!("{key_c}.json"))).expect("copy");
    let err = Replayer::new(dir.path()).err().expect("not listed");
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    forge_seal(dir.path(), &format!("{key_c}.json"));
    let err = Replayer::new(dir.path()).err().expect("another model");
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    assert!(err.to_string().contains("smol"), "{err}");
}

/// Enters `name`'s current bytes into the manifest by hand, as someone covering an edit would.
fn forge_seal(dir: &Path, name: &str) {
    let mut sealed = read_manifest(dir).expect("manifest").expect("sealed");
    let bytes = std::fs::read(dir.join(name)).expect("file");
    sealed.files.insert(name.to_owned(), manifest::file_digest(&bytes));
    let text = serde_json::to_string_pretty(&sealed).expect("JSON") + "\n";
    std::fs::write(dir.join(manifest::MANIFEST_FILE), text).expect("manifest");
}

/// A recording of two exchanges by `Named("qwen")` in a fresh directory.
async fn recorded() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    recorded_run(dir.path(), true, "2026-11-22T08:25:02Z").expect("run.json");
    let recorder = Recorder::new(Arc::new(Named("qwen")), dir.path()).expect("recorder");
    recorder.complete(&ask("a")).await.expect("a");
    recorder.complete(&ask("b")).await.expect("b");
    dir
}

/// The file of `request`'s exchange in `dir`.
fn exchange_file(dir: &Path, request: &CompletionRequest) -> PathBuf {
    dir.join(format!("{}.json", exchange_key(request).expect("key")))
}

/// The error a replay of `dir` begins with.
fn refused(dir: &Path) -> LlmError {
    Replayer::new(dir).err().expect("the replay is refused")
}

#[tokio::test]
async fn the_recorder_seals_every_file_it_writes() {
    let dir = recorded().await;
    let sealed = verify(dir.path()).expect("the recording verifies");
    assert_eq!(sealed.format, manifest::MANIFEST_FORMAT);
    let names: Vec<&str> = sealed.files.keys().map(String::as_str).collect();
    let mut expected = [
        RUN_FILE.to_owned(),
        format!("{}.json", exchange_key(&ask("a")).expect("key")),
        format!("{}.json", exchange_key(&ask("b")).expect("key")),
    ];
    expected.sort();
    assert_eq!(names, expected.iter().map(String::as_str).collect::<Vec<_>>());
    for (name, digest) in &sealed.files {
        let bytes = std::fs::read(dir.path().join(name)).expect("file");
        assert_eq!(*digest, manifest::file_digest(&bytes), "{name}");
    }
    let model = sealed.model.expect("the model");
    assert_eq!(model.identity.name, "qwen");
    assert_eq!(model.file_sha256.as_deref(), Some("ab".repeat(32).as_str()), "the hash the server named");
    assert_eq!(model.file_sha256_from.as_deref(), Some(manifest::FROM_SERVER));
    // The manifest's digest names the seal; the content digest leaves the manifest out.
    let seal = manifest::manifest_digest(dir.path()).expect("digest");
    assert_eq!(
        seal,
        manifest::file_digest(&std::fs::read(dir.path().join(manifest::MANIFEST_FILE)).expect("manifest"))
    );
    let content = recording_digest(dir.path()).expect("digest");
    std::fs::write(dir.path().join(manifest::MANIFEST_FILE), "{}").expect("edit");
    assert_eq!(recording_digest(dir.path()).expect("digest"), content);
}

#[tokio::test]
async fn a_completion_edited_by_one_word_does_not_replay() {
    let dir = recorded().await;
    let file = exchange_file(dir.path(), &ask("b"));
    let text = std::fs::read_to_string(&file).expect("exchange");
    assert!(text.contains("\"text\": \"x\""), "{text}");
    std::fs::write(&file, text.replace("\"text\": \"x\"", "\"text\": \"y\"")).expect("edit");
    let err = refused(dir.path());
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    assert!(
        err.to_string()
            .contains(&format!("{} is not the file sealed", file.file_name().expect("name").to_string_lossy())),
        "{err}"
    );
}

#[tokio::test]
async fn a_usage_count_edited_does_not_replay() {
    let dir = recorded().await;
    let file = exchange_file(dir.path(), &ask("a"));
    let text = std::fs::read_to_string(&file).expect("exchange");
    assert!(text.contains("\"prompt_tokens\": 0"), "{text}");
    std::fs::write(&file, text.replace("\"prompt_tokens\": 0", "\"prompt_tokens\": 1")).expect("edit");
    assert_eq!(refused(dir.path()).code(), "LLM_REPLAY_TAMPERED");
}

#[tokio::test]
async fn a_deleted_or_an_added_exchange_does_not_replay() {
    let dir = recorded().await;
    let a = exchange_file(dir.path(), &ask("a"));
    let kept = std::fs::read(&a).expect("exchange");
    std::fs::remove_file(&a).expect("delete");
    let err = refused(dir.path());
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    assert!(err.to_string().contains("is listed in manifest.json but missing"), "{err}");
    std::fs::write(&a, &kept).expect("restore");
    Replayer::new(dir.path()).expect("restored, it verifies again");

    let added = dir.path().join("0123456789abcdef.json");
    std::fs::write(&added, &kept).expect("add");
    let err = refused(dir.path());
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    assert!(err.to_string().contains("0123456789abcdef.json is not listed in manifest.json"), "{err}");
    // Files that are not exchanges (notes, traces) are not the recording's.
    std::fs::remove_file(&added).expect("remove");
    std::fs::write(dir.path().join("README.md"), "notes").expect("notes");
    Replayer::new(dir.path()).expect("a note beside the recording changes nothing");
}

#[tokio::test]
async fn a_model_hash_that_differs_does_not_replay() {
    let dir = recorded().await;
    let path = dir.path().join(manifest::MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).expect("manifest");
    // The manifest's model file hash is not the one the server named.
    std::fs::write(&path, text.replacen(&"ab".repeat(32), &"cd".repeat(32), 1)).expect("edit");
    let err = refused(dir.path());
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    assert!(err.to_string().contains("they differ") || err.to_string().contains("names the model"), "{err}");
    // Both hashes of the manifest changed alike: every exchange names another model than the manifest's.
    std::fs::write(&path, text.replace(&"ab".repeat(32), &"cd".repeat(32))).expect("edit");
    let err = refused(dir.path());
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED");
    assert!(err.to_string().contains("names the model"), "{err}");
}

#[tokio::test]
async fn an_exchange_edited_during_the_replay_is_refused_as_it_is_read() {
    let dir = recorded().await;
    let replayer = Replayer::new(dir.path()).expect("replayer");
    let file = exchange_file(dir.path(), &ask("a"));
    let text = std::fs::read_to_string(&file).expect("exchange");
    std::fs::write(&file, text.replace("\"text\": \"x\"", "\"text\": \"z\"")).expect("edit");
    assert_eq!(replayer.complete(&ask("a")).await.expect_err("edited").code(), "LLM_REPLAY_TAMPERED");
    assert_eq!(replayer.complete(&ask("b")).await.expect("b untouched").text, "x");
    std::fs::remove_file(exchange_file(dir.path(), &ask("b"))).expect("delete");
    let err = replayer.complete(&ask("b")).await.expect_err("deleted");
    assert_eq!(err.code(), "LLM_REPLAY_TAMPERED", "a sealed exchange gone is not a question never asked: {err}");
    assert_eq!(replayer.complete(&ask("c")).await.expect_err("never asked").code(), "LLM_REPLAY_MISSING");
}

#[tokio::test]
async fn an_unsealed_recording_is_refused_until_sealed_and_a_seal_never_covers_an_edit() {
    let dir = recorded().await;
    let manifest_path = dir.path().join(manifest::MANIFEST_FILE);
    std::fs::remove_file(&manifest_path).expect("unseal");
    let err = refused(dir.path());
    assert_eq!(err.code(), "LLM_RECORDING_UNSEALED");
    assert!(err.to_string().contains("lessrt recording seal"), "{err}");
    let err = Recorder::new(Arc::new(Named("qwen")), dir.path()).err().expect("a recorder too");
    assert_eq!(err.code(), "LLM_RECORDING_UNSEALED");

    // Sealed with the model file's hash from a checksum list: it must be the hash the server named.
    let wrong = manifest::SealOptions { file_sha256: Some("cd".repeat(32)), ..Default::default() };
    assert_eq!(manifest::seal(dir.path(), &wrong).expect_err("another file").code(), "LLM_REPLAY_MISMATCH");
    assert!(!manifest_path.exists(), "nothing sealed");
    let options = manifest::SealOptions {
        file_sha256: Some("AB".repeat(32)),
        file_sha256_from: Some("scripts/local-llm.sh".to_owned()),
        note: Some("name is what requests asked for".to_owned()),
    };
    let sealed = manifest::seal(dir.path(), &options).expect("sealed");
    let model = sealed.model.expect("model");
    assert_eq!(model.file_sha256, Some("ab".repeat(32)));
    assert_eq!(model.file_sha256_from.as_deref(), Some("scripts/local-llm.sh"));
    assert_eq!(Replayer::new(dir.path()).expect("it replays").complete(&ask("a")).await.expect("a").text, "x");
    // Sealed again while it verifies: the same manifest.
    let before = std::fs::read(&manifest_path).expect("manifest");
    manifest::seal(dir.path(), &options).expect("sealed again");
    assert_eq!(std::fs::read(&manifest_path).expect("manifest"), before);

    // An edit is never sealed over: the manifest stays as it was.
    let file = exchange_file(dir.path(), &ask("a"));
    let text = std::fs::read_to_string(&file).expect("exchange");
    std::fs::write(&file, text.replace("\"text\": \"x\"", "\"text\": \"w\"")).expect("edit");
    assert_eq!(manifest::seal(dir.path(), &options).expect_err("edited").code(), "LLM_REPLAY_TAMPERED");
    assert_eq!(std::fs::read(&manifest_path).expect("manifest"), before);
}

#[tokio::test]
async fn a_recording_keeps_the_calls_time_and_a_replay_answers_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::new(Arc::new(Timed), dir.path()).expect("recorder");
    let live = recorder.complete(&ask("a")).await.expect("a");
    assert_eq!((live.elapsed_ms, live.usage), (1_234, None));
    let replayed = Replayer::new(dir.path()).expect("replayer").complete(&ask("a")).await.expect("a");
    assert_eq!(replayed.elapsed_ms, 1_234, "the recorded time, not the replay's");
    assert_eq!(replayed.usage, None, "no usage reported stays none reported");
    assert_eq!(replayed.attempts, 0);
}

/// Answers "t" in 1234 ms, reporting no usage.
struct Timed;

impl CompletionModel for Timed {
    fn complete<'a>(&'a self, _request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async {
            Ok(Completion { text: "t".to_owned(), finish_reason: None, usage: None, attempts: 1, elapsed_ms: 1_234 })
        })
    }
}
