//! [`LlmSummarizer`]: the lossless DAG's [`Summarizer`] backed by a [`CompletionModel`].
//!
//! The prompt says what to keep by depth (sessions: operational detail; arcs: decisions and outcomes; epochs:
//! architecture, pivots and constraints) and how hard to compress by level (normal: full detail for the depth within
//! about the target; aggressive: only the essentials as terse bullets). Generation is capped at the level's target
//! in tokens, so a rambling model is cut, not trusted; `escalate` still measures the answer and falls back to the
//! next level (and finally to deterministic truncation) when it is empty, too long or the model failed. The
//! summarizer is asynchronous, as the seam is: its future is the model call, waited for on the run's runtime (the
//! DAG's level summarizers) or on the one runtime of a synchronous command's condenser.
//!
//! A model that is down costs every call its full retries (seconds each), and a build asks once or twice per node;
//! so after a call fails in a way retries did not cure (unreachable, timed out, rate-limited, 5xx), the summarizer
//! stops asking for [`COOLDOWN`]: calls fail at once with the error that opened the breaker, and their nodes fall
//! through to truncation. The first call after the cooldown asks the model again.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use less_runtime::dag::{Level, NodeKind, SummarizeError, Summarizer, SummaryFuture, SummaryInput};

use crate::provider::{ChatMessage, CompletionModel, CompletionRequest};

/// Characters of one item kept in a prompt (the rest is behind the item's id).
const MAX_ITEM_CHARS: usize = 1_200;
/// Characters of a whole prompt's items.
const MAX_PROMPT_CHARS: usize = 9_000;

/// How long the summarizer stops asking a model that failed beyond its retries.
pub const COOLDOWN: Duration = Duration::from_secs(60);

/// Summarizes DAG nodes with a model.
pub struct LlmSummarizer {
    model: Arc<dyn CompletionModel>,
    name: String,
    temperature: f64,
    cooldown: Duration,
    /// Open: until when calls fail without asking, and why.
    breaker: Mutex<Option<(Instant, String)>>,
}

impl LlmSummarizer {
    /// A summarizer asking `model`; `name` is recorded on every node it writes (e.g. `llm:smollm2-135m`).
    pub fn new(model: Arc<dyn CompletionModel>, name: impl Into<String>, temperature: f64) -> LlmSummarizer {
        LlmSummarizer { model, name: name.into(), temperature, cooldown: COOLDOWN, breaker: Mutex::new(None) }
    }

    /// The same with another cooldown after a failure (zero: always ask).
    pub fn with_cooldown(mut self, cooldown: Duration) -> LlmSummarizer {
        self.cooldown = cooldown;
        self
    }

    /// The request for one level of one node.
    pub fn request(&self, input: &SummaryInput<'_>, level: Level, target_tokens: u32) -> CompletionRequest {
        let keep = match input.kind {
            NodeKind::Session => {
                "what was done, found and decided in this session, with names of files, commands and errors"
            }
            NodeKind::Arc => "the decisions and outcomes across these session summaries; drop step-by-step detail",
            NodeKind::Epoch => "the architecture, pivots and standing constraints across these summaries",
        };
        // About 0.75 words per token.
        let words = (target_tokens * 3 / 4).max(8);
        let how = match level {
            Level::Normal => format!("Keep {keep}. Write at most {words} words."),
            Level::Aggressive => {
                format!("Keep only the essentials of {keep}, as terse bullets. Write at most {words} words.")
            }
        };
        let mut items = String::new();
        for item in input.items {
            let content: String = item.content.chars().take(MAX_ITEM_CHARS).collect();
            let _ = writeln!(items, "[{}] {}: {}", item.id, item.role, content.trim());
            if items.len() > MAX_PROMPT_CHARS {
                items.push_str("[…]\n");
                break;
            }
        }
        CompletionRequest {
            system: format!("You summarize the project {}'s work history for later agents. {how}", input.project),
            messages: vec![ChatMessage::user(format!("Summarize:\n{items}"))],
            temperature: self.temperature,
            max_tokens: target_tokens.max(8),
            schema: None,
        }
    }
}

impl Summarizer for LlmSummarizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn summarize<'a>(&'a self, input: SummaryInput<'a>, level: Level, target_tokens: u32) -> SummaryFuture<'a> {
        Box::pin(async move {
            {
                let breaker = self.breaker.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some((until, why)) = breaker.as_ref()
                    && Instant::now() < *until
                {
                    let left = until.saturating_duration_since(Instant::now()).as_secs();
                    return Err(SummarizeError(format!("{why} (not asked again for {left} s)")));
                }
            }
            let request = self.request(&input, level, target_tokens);
            match crate::provider::traced_complete(&*self.model, &request, "summarizer").await {
                Ok(completion) => {
                    *self.breaker.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    Ok(completion.text.trim().to_owned())
                }
                Err(err) => {
                    let why = format!("{}: {err}", err.code());
                    // Transient errors were retried already: the model is down or overloaded, not confused.
                    if err.is_transient() && !self.cooldown.is_zero() {
                        let until = Instant::now() + self.cooldown;
                        *self.breaker.lock().unwrap_or_else(PoisonError::into_inner) = Some((until, why.clone()));
                    }
                    Err(SummarizeError(why))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
