//! The provider-neutral completion seam: [`CompletionModel`] takes a [`CompletionRequest`] (system prompt, chat
//! turns, sampling, an optional JSON Schema the output must follow) and returns a [`Completion`] (text and the
//! provider's usage counts) or an [`LlmError`], whose variants and [`LlmError::code`] strings are stable.
//!
//! Agents and summarizers talk to this trait only; `openai.rs` speaks the OpenAI-compatible HTTP API and
//! `record.rs` records or replays exchanges. [`complete_json`] adds the checks every caller needs: the output must be
//! one JSON document and, when a schema was asked for, satisfy it (small models ignore numeric bounds).

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A boxed future, so [`CompletionModel`] stays object-safe.
pub type ModelFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who says a chat turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// The caller.
    User,
    /// The model (an earlier answer, replayed to it).
    Assistant,
}

/// One chat turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who says it.
    pub role: ChatRole,
    /// What is said.
    pub content: String,
}

impl ChatMessage {
    /// A user turn.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::User, content: content.into() }
    }

    /// An assistant turn.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::Assistant, content: content.into() }
    }
}

/// A JSON Schema the output must follow (`response_format: json_schema` on OpenAI-compatible servers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSchema {
    /// A short name (`[a-zA-Z0-9_-]`).
    pub name: String,
    /// The schema.
    pub schema: Value,
}

/// What to ask a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature (0 for reproducible output).
    pub temperature: f64,
    /// The most tokens to generate.
    pub max_tokens: u32,
    /// The schema the output must follow, if any.
    pub schema: Option<OutputSchema>,
}

/// Token counts the provider reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Prompt tokens the server answered from its prompt cache (`usage.prompt_tokens_details.cached_tokens`, or
    /// llama.cpp's `timings.cache_n`); 0 where it does not say, and in recordings made before it was kept.
    #[serde(default)]
    pub cached_tokens: u64,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The generated text.
    pub text: String,
    /// Why generation stopped (`stop`, `length`, …) when the provider says.
    pub finish_reason: Option<String>,
    /// Usage counts as the server reported them; `None` when it reported none (the caller counts the text with the
    /// run's tokenizer instead). Recordings made before this was optional always hold counts.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// HTTP attempts it took (1 when the first succeeded; 0 when replayed).
    pub attempts: u32,
    /// Wall time of the whole call in milliseconds, retries and backoffs included, as measured by the client that
    /// made it; a replay answers with the recorded time, so reports of a replay do not depend on the machine. 0 in
    /// recordings made before it was kept.
    #[serde(default)]
    pub elapsed_ms: u64,
}

/// Why a completion failed. Each variant has a stable [`LlmError::code`]; none is a panic. Serializable, so a
/// recording can keep a failed exchange and a replay fail the same way.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LlmError {
    /// The API key's environment variable is unset or empty.
    #[error("environment variable {var} (the API key) is not set: export it, or set api_key_env to a variable that is")]
    MissingApiKey {
        /// The variable named by `api_key_env`.
        var: String,
    },
    /// The API key would go to a host nobody trusted with it (a scenario names both the variable and the URL).
    #[error(
        "{var} (the API key) would be sent to {host}, which is not on loopback, not a known model provider and not in \
         $LESSRT_MODEL_HOSTS: add the host there (comma-separated) if you mean to send it the key"
    )]
    KeyHostUntrusted {
        /// The variable named by `api_key_env`.
        var: String,
        /// The host of `base_url`.
        host: String,
    },
    /// No answer within the request timeout, on every attempt.
    #[error("no answer within the timeout after {attempts} attempts: check the server, or raise timeout_secs")]
    Timeout {
        /// Attempts made.
        attempts: u32,
    },
    /// HTTP 429 on every attempt.
    #[error("rate limited (HTTP 429) on all {attempts} attempts: wait, or lower the request rate")]
    RateLimited {
        /// Attempts made.
        attempts: u32,
    },
    /// HTTP 5xx on every attempt.
    #[error("server error HTTP {status} on all {attempts} attempts: {body}")]
    Server {
        /// The last status.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The start of the last body.
        body: String,
    },
    /// The server could not be reached on any attempt.
    #[error(
        "cannot reach the model server after {attempts} attempts ({message}): start it (scripts/local-llm.sh start) or fix base_url"
    )]
    Unreachable {
        /// Attempts made.
        attempts: u32,
        /// The transport error.
        message: String,
    },
    /// The server refused the request (a 4xx other than 429); not retried.
    #[error("the server refused the request with HTTP {status}: {body}")]
    Refused {
        /// The status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The HTTP body is not an OpenAI-style completion (not JSON, or no `choices[0].message.content`).
    #[error("malformed response from the server: {message}")]
    MalformedResponse {
        /// What is wrong.
        message: String,
    },
    /// The generated text is not one JSON document.
    #[error("the model's output is not JSON ({message})")]
    OutputNotJson {
        /// The parser's message.
        message: String,
    },
    /// The generated JSON breaks the schema that was asked for.
    #[error("the model's output breaks its schema: {}", violations.join("; "))]
    OutputInvalid {
        /// `path: message` per violation.
        violations: Vec<String>,
    },
    /// Replay found no recorded exchange for a request.
    #[error(
        "no recorded exchange {key} in {dir}: record it again with `lessrt run --record {dir}` against a live server"
    )]
    ReplayMissing {
        /// The request's key (file stem).
        key: String,
        /// The recording directory.
        dir: String,
    },
    /// A recorded exchange is not what this run asks or not of the recording's model (edited by hand, or mixed).
    #[error("recorded exchange {key} in {dir}: {what}; record it again with `--record` into an empty directory")]
    ReplayMismatch {
        /// The request's key (file stem).
        key: String,
        /// The recording directory.
        dir: String,
        /// What differs.
        what: String,
    },
    /// A recording is not what its `manifest.json` sealed: a file's bytes differ from its digest, a listed file is
    /// gone, an exchange file is not listed, or an exchange's model is not the manifest's.
    #[error(
        "recording {dir}: {file} {what}; the recording is not what was sealed: restore it (git checkout), or record it again into an empty directory"
    )]
    ReplayTampered {
        /// The recording directory.
        dir: String,
        /// The file that differs (`manifest.json` when the manifest itself is at fault).
        file: String,
        /// What differs.
        what: String,
    },
    /// A recording has no `manifest.json` (made before recordings were sealed), so nothing vouches for its files.
    #[error(
        "recording {dir} has no manifest.json (made before recordings were sealed): check it, then seal it with `lessrt recording seal {dir}`, or record it again"
    )]
    RecordingUnsealed {
        /// The recording directory.
        dir: String,
    },
    /// A recording could not be written or read.
    #[error("recording {path}: {message}")]
    Recording {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
}

impl LlmError {
    /// Every code [`LlmError::code`] returns, with what it means and what to do (`lessrt errors` lists them).
    pub const CODES: [(&'static str, &'static str); 15] = [
        ("LLM_API_KEY_MISSING", "The variable `api_key_env` names is unset: export it."),
        (
            "LLM_KEY_HOST_UNTRUSTED",
            "A scenario would send the key `api_key_env` names to a host that is not loopback or a known provider: add \
             the host to LESSRT_MODEL_HOSTS (comma-separated) to allow it.",
        ),
        ("LLM_TIMEOUT", "No answer within `timeout_secs` on any attempt: check the server or raise the timeout."),
        ("LLM_RATE_LIMITED", "HTTP 429 on every attempt (backoff honours `Retry-After`): lower the rate or wait."),
        ("LLM_SERVER_ERROR", "HTTP 5xx on every attempt: the server's body is in the message."),
        (
            "LLM_UNREACHABLE",
            "Connection failed on every attempt: start the server (`scripts/local-llm.sh start`) or fix `base_url`.",
        ),
        ("LLM_REQUEST_REFUSED", "Another 4xx (not retried): the request or the schema is not accepted by that server."),
        ("LLM_RESPONSE_MALFORMED", "The body is not an OpenAI-style completion (not retried)."),
        ("LLM_OUTPUT_NOT_JSON", "The model's text is not one JSON document (often: cut at `max_tokens`)."),
        ("LLM_OUTPUT_INVALID", "The model's JSON breaks the requested schema or cites pointers it was not given."),
        ("LLM_REPLAY_MISSING", "A replay met a request the recording lacks: record again with `--record`."),
        (
            "LLM_REPLAY_MISMATCH",
            "A recorded exchange's request differs from the run's, or its model from the recording's: record again.",
        ),
        (
            "LLM_REPLAY_TAMPERED",
            "A recording differs from its `manifest.json` (a file edited, deleted or added): restore it or record again.",
        ),
        (
            "LLM_RECORDING_UNSEALED",
            "A recording has no `manifest.json`: check it and seal it with `lessrt recording seal DIR`, or record again.",
        ),
        ("LLM_RECORDING_IO", "A recording cannot be read or written (or `--replay` names no recording)."),
    ];

    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::MissingApiKey { .. } => "LLM_API_KEY_MISSING",
            LlmError::KeyHostUntrusted { .. } => "LLM_KEY_HOST_UNTRUSTED",
            LlmError::Timeout { .. } => "LLM_TIMEOUT",
            LlmError::RateLimited { .. } => "LLM_RATE_LIMITED",
            LlmError::Server { .. } => "LLM_SERVER_ERROR",
            LlmError::Unreachable { .. } => "LLM_UNREACHABLE",
            LlmError::Refused { .. } => "LLM_REQUEST_REFUSED",
            LlmError::MalformedResponse { .. } => "LLM_RESPONSE_MALFORMED",
            LlmError::OutputNotJson { .. } => "LLM_OUTPUT_NOT_JSON",
            LlmError::OutputInvalid { .. } => "LLM_OUTPUT_INVALID",
            LlmError::ReplayMissing { .. } => "LLM_REPLAY_MISSING",
            LlmError::ReplayMismatch { .. } => "LLM_REPLAY_MISMATCH",
            LlmError::ReplayTampered { .. } => "LLM_REPLAY_TAMPERED",
            LlmError::RecordingUnsealed { .. } => "LLM_RECORDING_UNSEALED",
            LlmError::Recording { .. } => "LLM_RECORDING_IO",
        }
    }

    /// Whether the failure is the model's or its server's answer to a request (and so belongs in a recording), rather
    /// than the recording's own.
    pub fn is_exchange_outcome(&self) -> bool {
        !matches!(
            self,
            LlmError::ReplayMissing { .. }
                | LlmError::ReplayMismatch { .. }
                | LlmError::ReplayTampered { .. }
                | LlmError::RecordingUnsealed { .. }
                | LlmError::Recording { .. }
        )
    }

    /// Whether another attempt may succeed (transport failures, 429, 5xx).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LlmError::Timeout { .. }
                | LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::Unreachable { .. }
        )
    }
}

/// A language model behind some provider.
pub trait CompletionModel: Send + Sync + 'static {
    /// One completion (retries, if any, happen inside).
    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>>;

    /// Which model answers, as far as the provider can tell (a recording stores it with every exchange).
    fn identity(&self) -> ModelFuture<'_, ModelIdentity> {
        Box::pin(async { ModelIdentity::unknown() })
    }

    /// The name requests ask for, without asking the server (telemetry's `gen_ai.request.model`).
    fn name(&self) -> String {
        "unknown".to_owned()
    }
}

/// Completes `request` with `model` for `agent` inside a `chat` span in OpenTelemetry's GenAI conventions (target
/// `gen_ai`, what `lessrt --otlp` exports): the model asked, the provider's token counts and finish reason, or the
/// error's stable code. Integers are recorded as `i64` (the exporter writes unsigned ones as text).
pub async fn traced_complete(
    model: &dyn CompletionModel,
    request: &CompletionRequest,
    agent: &str,
) -> Result<Completion, LlmError> {
    use tracing::Instrument;
    let name = model.name();
    let span = tracing::info_span!(
        target: "gen_ai",
        "chat",
        otel.name = %format!("chat {name}"),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = "openai",
        gen_ai.request.model = %name,
        gen_ai.request.temperature = request.temperature,
        gen_ai.request.max_tokens = i64::from(request.max_tokens),
        gen_ai.agent.name = agent,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        error.type = tracing::field::Empty,
        less.attempts = tracing::field::Empty,
    );
    let result = model.complete(request).instrument(span.clone()).await;
    match &result {
        Ok(completion) => {
            if let Some(usage) = &completion.usage {
                span.record("gen_ai.usage.input_tokens", i64::try_from(usage.prompt_tokens).unwrap_or(i64::MAX));
                span.record("gen_ai.usage.output_tokens", i64::try_from(usage.completion_tokens).unwrap_or(i64::MAX));
            }
            span.record("less.attempts", i64::from(completion.attempts));
            if let Some(reason) = &completion.finish_reason {
                span.record("gen_ai.response.finish_reasons", reason.as_str());
            }
        }
        Err(err) => {
            span.record("error.type", err.code());
        }
    }
    result
}

/// Which model answered: the name requests ask for, what the server says it serves, and the sha256 of the weights
/// when the server says (the local server of `scripts/local-llm.sh` does, as an alias `sha256:<hex>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelIdentity {
    /// The model name sent with each request.
    pub name: String,
    /// The model the server lists as served (`GET /models`), if it answered.
    #[serde(default)]
    pub served: Option<String>,
    /// The sha256 of the weights, if the server names it.
    #[serde(default)]
    pub sha256: Option<String>,
}

impl ModelIdentity {
    /// A provider that cannot tell (a test double).
    pub fn unknown() -> ModelIdentity {
        ModelIdentity { name: "unknown".to_owned(), served: None, sha256: None }
    }
}

/// A completion whose text parsed as JSON and satisfied `check`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonCompletion {
    /// The parsed output.
    pub value: Value,
    /// The raw completion.
    pub completion: Completion,
}

/// Completes `request` and parses the text as JSON, then checks it with `check` (which returns the violations as
/// `path: message` strings; empty when the value is acceptable). The request's schema, if any, is checked first.
pub async fn complete_json(
    model: &dyn CompletionModel,
    request: &CompletionRequest,
    check: impl Fn(&Value) -> Vec<String>,
) -> Result<JsonCompletion, LlmError> {
    check_json(request, model.complete(request).await?, check)
}

/// [`complete_json`]'s checks of a completion already made.
pub fn check_json(
    request: &CompletionRequest,
    completion: Completion,
    check: impl Fn(&Value) -> Vec<String>,
) -> Result<JsonCompletion, LlmError> {
    // A model's output is untrusted: a key given twice is refused like any malformed document.
    let value: Value = less_runtime::parse_strict(completion.text.trim()).map_err(|err| LlmError::OutputNotJson {
        message: match completion.finish_reason.as_deref() {
            Some("length") => format!("{err}; generation stopped at max_tokens"),
            _ => err.to_string(),
        },
    })?;
    let mut violations = match &request.schema {
        Some(schema) => schema_violations(&schema.schema, &value),
        None => Vec::new(),
    };
    if violations.is_empty() {
        violations = check(&value);
    }
    if violations.is_empty() {
        Ok(JsonCompletion { value, completion })
    } else {
        Err(LlmError::OutputInvalid { violations })
    }
}

/// Violations of `schema` by `value`, as `path: message` (empty if valid or if the schema does not compile).
pub fn schema_violations(schema: &Value, value: &Value) -> Vec<String> {
    match jsonschema::validator_for(schema) {
        Ok(validator) => validator.iter_errors(value).map(|e| format!("{}: {}", e.instance_path(), e)).collect(),
        Err(err) => vec![format!("the output schema does not compile: {err}")],
    }
}

#[cfg(test)]
mod codes_tests {
    use super::LlmError;

    /// Fails to compile when a variant is added, so the list below is updated with it.
    fn listed_below(err: &LlmError) {
        match err {
            LlmError::MissingApiKey { .. }
            | LlmError::KeyHostUntrusted { .. }
            | LlmError::Timeout { .. }
            | LlmError::RateLimited { .. }
            | LlmError::Server { .. }
            | LlmError::Unreachable { .. }
            | LlmError::Refused { .. }
            | LlmError::MalformedResponse { .. }
            | LlmError::OutputNotJson { .. }
            | LlmError::OutputInvalid { .. }
            | LlmError::ReplayMissing { .. }
            | LlmError::ReplayMismatch { .. }
            | LlmError::ReplayTampered { .. }
            | LlmError::RecordingUnsealed { .. }
            | LlmError::Recording { .. } => {}
        }
    }

    /// `LlmError::CODES` is the closed set: every variant's code is listed once, and nothing else is.
    #[test]
    fn every_variant_has_its_code_listed_once() {
        let s = String::new;
        let variants = [
            LlmError::MissingApiKey { var: s() },
            LlmError::KeyHostUntrusted { var: s(), host: s() },
            LlmError::Timeout { attempts: 1 },
            LlmError::RateLimited { attempts: 1 },
            LlmError::Server { status: 500, attempts: 1, body: s() },
            LlmError::Unreachable { attempts: 1, message: s() },
            LlmError::Refused { status: 400, body: s() },
            LlmError::MalformedResponse { message: s() },
            LlmError::OutputNotJson { message: s() },
            LlmError::OutputInvalid { violations: Vec::new() },
            LlmError::ReplayMissing { key: s(), dir: s() },
            LlmError::ReplayMismatch { key: s(), dir: s(), what: s() },
            LlmError::ReplayTampered { dir: s(), file: s(), what: s() },
            LlmError::RecordingUnsealed { dir: s() },
            LlmError::Recording { path: s(), message: s() },
        ];
        variants.iter().for_each(listed_below);
        let mut codes: Vec<&str> = variants.iter().map(LlmError::code).collect();
        let mut listed: Vec<&str> = LlmError::CODES.iter().map(|(code, _)| *code).collect();
        codes.sort_unstable();
        listed.sort_unstable();
        assert_eq!(codes, listed);
        assert!(LlmError::CODES.iter().all(|(_, what)| what.len() > 20));
    }
}
