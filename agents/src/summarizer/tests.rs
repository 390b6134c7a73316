//! The LLM summarizer through the DAG's escalation with a model that answers from a list: prompts by depth and
//! level, a too-long normal answer escalating to the aggressive level, a failing model ending in truncation.

use std::sync::Mutex;
use std::time::Duration;

use less_runtime::TokenCounter;
use less_runtime::dag::{Driver, SummaryItem};

use super::*;
use crate::provider::{Completion, LlmError, ModelFuture, Usage};

struct Answers {
    texts: Mutex<Vec<String>>,
    seen: Mutex<Vec<CompletionRequest>>,
}

impl CompletionModel for Answers {
    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            self.seen.lock().expect("lock").push(request.clone());
            match self.texts.lock().expect("lock").pop() {
                Some(text) => Ok(Completion {
                    text,
                    finish_reason: None,
                    usage: Some(Usage::default()),
                    attempts: 1,
                    elapsed_ms: 0,
                }),
                None => Err(LlmError::Timeout { attempts: 4 }),
            }
        })
    }
}

fn answers(texts: &[&str]) -> Arc<Answers> {
    Arc::new(Answers {
        texts: Mutex::new(texts.iter().rev().map(|t| (*t).to_owned()).collect()),
        seen: Mutex::new(Vec::new()),
    })
}

fn items() -> Vec<SummaryItem> {
    let line = "We moved the refill clock into TokenBucket::refill and fixed the boundary test in tests/bucket.rs. ";
    (0..6)
        .map(|i| SummaryItem {
            id: format!("m-{i:012}"),
            role: "assistant".to_owned(),
            content: line.repeat(4),
            tokens: 90,
            at: 1_700_000_000 + i,
        })
        .collect()
}

#[test]
fn prompts_say_what_to_keep_by_depth_and_level() {
    let summarizer = LlmSummarizer::new(answers(&[]), "llm:test", 0.0);
    let items = items();
    let input = SummaryInput { kind: NodeKind::Arc, project: "p", session: None, items: &items };
    let normal = summarizer.request(&input, Level::Normal, 100);
    assert!(
        normal.system.contains("decisions and outcomes") && normal.system.contains("75 words"),
        "{}",
        normal.system
    );
    assert_eq!(normal.max_tokens, 100);
    let aggressive = summarizer.request(&input, Level::Aggressive, 50);
    assert!(aggressive.system.contains("terse bullets"));
    assert!(normal.messages[0].content.contains("[m-000000000003] assistant: We moved"));
}

#[test]
fn a_too_long_normal_answer_escalates_to_the_aggressive_level() {
    let long = "The refill clock moved. ".repeat(60);
    let model = answers(&[&long, "- refill clock moved into TokenBucket::refill"]);
    let summarizer = LlmSummarizer::new(model.clone(), "llm:test", 0.0);
    let items = items();
    let input = SummaryInput { kind: NodeKind::Session, project: "p", session: Some("s"), items: &items };
    let summary =
        Driver::default().escalate(&summarizer, &input, 120, TokenCounter::shared(less_runtime::Encoding::O200kBase));
    assert_eq!(summary.level, 2, "{summary:?}");
    assert_eq!(summary.content, "- refill clock moved into TokenBucket::refill");
    assert!(summary.attempts[0].rejected.as_deref().is_some_and(|r| r.contains("over the level's target")));
    assert_eq!(model.seen.lock().expect("lock")[1].max_tokens, 60);
}

#[test]
fn a_failing_model_ends_in_deterministic_truncation() {
    let summarizer = LlmSummarizer::new(answers(&[]), "llm:test", 0.0);
    let items = items();
    let input = SummaryInput { kind: NodeKind::Epoch, project: "p", session: None, items: &items };
    let summary =
        Driver::default().escalate(&summarizer, &input, 100, TokenCounter::shared(less_runtime::Encoding::O200kBase));
    assert_eq!(summary.level, 3);
    assert!(summary.attempts[0].rejected.as_deref().is_some_and(|r| r.contains("LLM_TIMEOUT")), "{summary:?}");
}

#[test]
fn a_model_that_is_down_is_not_asked_again_until_the_cooldown_ends() {
    let model = answers(&[]);
    let summarizer = LlmSummarizer::new(model.clone(), "llm:test", 0.0);
    let items = items();
    let input = SummaryInput { kind: NodeKind::Session, project: "p", session: Some("s"), items: &items };
    let counter = TokenCounter::shared(less_runtime::Encoding::O200kBase);
    for _ in 0..5 {
        assert_eq!(Driver::default().escalate(&summarizer, &input, 100, counter).level, 3);
    }
    assert_eq!(
        model.seen.lock().expect("lock").len(),
        1,
        "one failed call opens the breaker: the other nine levels are not asked"
    );
    let summary = Driver::default().escalate(&summarizer, &input, 100, counter);
    let second = summary.attempts[0].rejected.as_deref().unwrap_or_default();
    assert!(second.contains("LLM_TIMEOUT") && second.contains("not asked again"), "{second}");

    // A model that recovers is asked again after the cooldown, and a good answer closes the breaker.
    let flaky: Arc<Answers> = answers(&[]);
    let summarizer = LlmSummarizer::new(flaky.clone(), "llm:test", 0.0).with_cooldown(Duration::from_millis(50));
    assert_eq!(Driver::default().escalate(&summarizer, &input, 100, counter).level, 3);
    assert_eq!(flaky.seen.lock().expect("lock").len(), 1);
    std::thread::sleep(Duration::from_millis(60));
    flaky.texts.lock().expect("lock").push("- refill clock moved".to_owned());
    assert_eq!(Driver::default().escalate(&summarizer, &input, 100, counter).level, 1);
    flaky.texts.lock().expect("lock").push("- boundary test fixed".to_owned());
    assert_eq!(Driver::default().escalate(&summarizer, &input, 100, counter).level, 1, "the breaker closed");
    assert_eq!(flaky.seen.lock().expect("lock").len(), 3);
}

#[test]
fn a_confused_model_keeps_being_asked() {
    // Output problems are the model's answer, not its absence: no breaker.
    let model = answers(&["", "", "", ""]);
    let summarizer = LlmSummarizer::new(model.clone(), "llm:test", 0.0);
    let items = items();
    let input = SummaryInput { kind: NodeKind::Session, project: "p", session: Some("s"), items: &items };
    let counter = TokenCounter::shared(less_runtime::Encoding::O200kBase);
    for _ in 0..2 {
        assert_eq!(Driver::default().escalate(&summarizer, &input, 100, counter).level, 3);
    }
    assert_eq!(model.seen.lock().expect("lock").len(), 4, "both levels asked, both times");
}
