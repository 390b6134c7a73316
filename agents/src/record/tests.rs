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
    assert!(err.to_string().contains(&exchange_key(&ask("c"))), "{err}");
}

#[test]
fn replaying_a_missing_directory_says_how_to_record_one() {
    let err = Replayer::new("/nonexistent/recording").err().expect("no directory");
    assert_eq!(err.code(), "LLM_RECORDING_IO");
    assert!(err.to_string().contains("--record"));
}
