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
            Ok(Completion { text: n.to_string(), finish_reason: None, usage: Usage::default(), attempts: 1 })
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
            Ok(Completion { text: "up".to_owned(), finish_reason: None, usage: Usage::default(), attempts: 1 })
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
    assert_eq!(doc, json!({"started_at": "2026-11-22T08:25:02Z"}), "nothing but the start time");
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
            Ok(Completion { text: "x".to_owned(), finish_reason: None, usage: Usage::default(), attempts: 1 })
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
async fn a_replay_refuses_an_edited_request_another_model_and_a_recording_without_its_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::new(Arc::new(Named("qwen")), dir.path()).expect("recorder");
    recorder.complete(&ask("a")).await.expect("a");
    recorder.complete(&ask("b")).await.expect("b");
    assert_eq!(recorded_model(dir.path()).expect("run.json").map(|m| m.name), Some("qwen".to_owned()));
    let digest = recording_digest(dir.path()).expect("digest");
    let replayer = Replayer::new(dir.path()).expect("replayer");
    assert_eq!(replayer.model().sha256.as_deref(), Some("ab".repeat(32).as_str()));
    assert_eq!(replayer.complete(&ask("a")).await.expect("a").text, "x");

    // The stored request of `a` edited by hand (its file name, the key, unchanged): refused, and the digest moves.
    let key = exchange_key(&ask("a")).expect("key");
    let file = dir.path().join(format!("{key}.json"));
    let text = std::fs::read_to_string(&file).expect("exchange");
    std::fs::write(&file, text.replace("\"max_tokens\": 8", "\"max_tokens\": 9")).expect("edit");
    assert_ne!(recording_digest(dir.path()).expect("digest"), digest, "any edit changes the digest");
    let err = replayer.complete(&ask("a")).await.expect_err("edited");
    assert_eq!(err.code(), "LLM_REPLAY_MISMATCH");
    assert!(err.to_string().contains("stored request"), "{err}");

    // An exchange of another model's recording copied in: refused.
    let other = tempfile::tempdir().expect("tempdir");
    Recorder::new(Arc::new(Named("smol")), other.path()).expect("recorder").complete(&ask("c")).await.expect("c");
    let key_c = exchange_key(&ask("c")).expect("key");
    std::fs::copy(other.path().join(format!("{key_c}.json")), dir.path().join(format!("{key_c}.json"))).expect("copy");
    let err = replayer.complete(&ask("c")).await.expect_err("another model");
    assert_eq!(err.code(), "LLM_REPLAY_MISMATCH");
    assert!(err.to_string().contains("smol"), "{err}");

    // Recording into a directory another model made is refused before anything is asked.
    let err = Recorder::new(Arc::new(Named("smol")), dir.path())
        .expect("recorder")
        .complete(&ask("d"))
        .await
        .expect_err("another model");
    assert_eq!(err.code(), "LLM_RECORDING_IO");
    assert!(!dir.path().join(format!("{}.json", exchange_key(&ask("d")).expect("key"))).exists());

    // A recording whose run.json names no model does not replay.
    std::fs::write(dir.path().join(RUN_FILE), "{\"started_at\": \"2026-01-01T00:00:00Z\"}\n").expect("run.json");
    let err = Replayer::new(dir.path()).err().expect("no model");
    assert!(err.to_string().contains("names no model"), "{err}");
}
