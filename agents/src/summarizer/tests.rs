//! The LLM summarizer through the DAG's escalation with a model that answers from a list: prompts by depth and
//! level, a too-long normal answer escalating to the aggressive level, a failing model ending in truncation.

use std::sync::Mutex;

use less_runtime::TokenCounter;
use less_runtime::dag::{SummaryItem, escalate};

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
                Some(text) => Ok(Completion { text, finish_reason: None, usage: Usage::default(), attempts: 1 }),
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
    let summary = escalate(&summarizer, &input, 120, TokenCounter::shared(less_runtime::Encoding::O200kBase));
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
    let summary = escalate(&summarizer, &input, 100, TokenCounter::shared(less_runtime::Encoding::O200kBase));
    assert_eq!(summary.level, 3);
    assert!(summary.attempts[0].rejected.as_deref().is_some_and(|r| r.contains("LLM_TIMEOUT")), "{summary:?}");
}
