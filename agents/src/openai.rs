//! [`OpenAiCompatible`]: a [`CompletionModel`] over the OpenAI-compatible chat API (`POST {base_url}/chat/completions`),
//! as served by OpenAI, llama.cpp's server and most local servers.
//!
//! One async HTTP/1.1 request per attempt (hyper, rustls for `https`), bounded by a timeout per attempt; retries with
//! exponential backoff (honouring `Retry-After`, capped) on timeouts, connection errors, 429 and 5xx; other 4xx and
//! malformed bodies are not retried. Nothing runs outside the future: a call that is dropped (its step timed out,
//! its run ended) or whose attempt times out closes its connection then and there, and a server still working on
//! it sees the client go. The API key is read from a named environment variable at each request, never
//! stored in a scenario; a server that needs none (a local one) is fine with the variable unset when
//! `api_key_env` is `None`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::provider::{Completion, CompletionModel, CompletionRequest, LlmError, ModelFuture, ModelIdentity, Usage};

/// The longest answer read from a server (a completion is a few kilobytes; a server streaming without end is cut off).
pub(crate) const MAX_ANSWER_BYTES: usize = 16 << 20;

/// The most a `Retry-After` header may make us wait.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(20);

/// Settings of an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL up to the API version, e.g. `http://127.0.0.1:8437/v1`.
    pub base_url: String,
    /// The model name sent with each request.
    pub model: String,
    /// The environment variable holding the API key (`None`: send no key).
    pub api_key_env: Option<String>,
    /// Timeout of one attempt (connect, send, answer).
    pub timeout: Duration,
    /// Attempts after the first on transient failures.
    pub retries: u32,
    /// The first backoff; doubled per retry.
    pub backoff: Duration,
}

impl OpenAiConfig {
    /// Defaults: 120 s per attempt, 3 retries, 500 ms first backoff, no key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            timeout: Duration::from_secs(120),
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }
}

/// The HTTP client: plain `http` for local servers, `https` with the Mozilla roots.
type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client of one OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    config: OpenAiConfig,
    client: HttpClient,
}

/// How one attempt failed.
enum Attempt {
    /// Worth retrying, after at least this long (a `Retry-After`).
    Transient(LlmError, Option<Duration>),
    /// Final.
    Fatal(LlmError),
}

impl OpenAiCompatible {
    /// A client for `config`.
    pub fn new(config: OpenAiConfig) -> OpenAiCompatible {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .expect("ring supports rustls' default protocol versions")
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        OpenAiCompatible { config, client }
    }

    /// The settings.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The request body for `request`.
    pub fn body(&self, request: &CompletionRequest) -> Value {
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        messages.extend(request.messages.iter().map(|m| json!({"role": m.role, "content": m.content})));
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        });
        if let Some(schema) = &request.schema {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": schema.name, "strict": true, "schema": schema.schema},
            });
        }
        body
    }

    /// Every attempt, until one succeeds, fails for good or the retries run out.
    async fn complete_all(&self, body: Bytes) -> Result<Completion, LlmError> {
        let key = match &self.config.api_key_env {
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.is_empty() => Some(key),
                _ => return Err(LlmError::MissingApiKey { var: var.clone() }),
            },
            None => None,
        };
        let url = format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'));
        let mut attempts = 0;
        loop {
            attempts += 1;
            let attempt = self.attempt(&url, key.as_deref(), body.clone(), attempts);
            let outcome = match tokio::time::timeout(self.config.timeout, attempt).await {
                Ok(outcome) => outcome,
                // The attempt's future is dropped here, and its connection with it.
                Err(_) => Err(Attempt::Transient(LlmError::Timeout { attempts }, None)),
            };
            match outcome {
                Ok(mut completion) => {
                    completion.attempts = attempts;
                    return Ok(completion);
                }
                Err(Attempt::Fatal(err)) => return Err(err),
                Err(Attempt::Transient(err, retry_after)) => {
                    if attempts > self.config.retries {
                        return Err(err);
                    }
                    let backoff = self.config.backoff.saturating_mul(1 << (attempts - 1).min(10));
                    let wait = retry_after.map_or(backoff, |after| after.min(MAX_RETRY_AFTER).max(backoff));
                    tracing::warn!(target: "less.llm", "attempt {attempts} failed ({}); retrying in {wait:?}", err.code());
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn attempt(&self, url: &str, key: Option<&str>, body: Bytes, attempts: u32) -> Result<Completion, Attempt> {
        let unreachable = |message: String| Attempt::Transient(LlmError::Unreachable { attempts, message }, None);
        let mut request = hyper::Request::post(url).header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(key) = key {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let request = request.body(Full::new(body)).map_err(|err| {
            Attempt::Fatal(LlmError::Unreachable { attempts, message: format!("bad request to {url}: {err}") })
        })?;
        let response = self.client.request(request).await.map_err(|err| unreachable(transport_message(&err)))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = match http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) if err.is::<http_body_util::LengthLimitError>() => {
                return Err(Attempt::Fatal(LlmError::MalformedResponse {
                    message: format!("the answer is longer than {MAX_ANSWER_BYTES} bytes; no completion is"),
                }));
            }
            Err(err) => return Err(unreachable(format!("the answer broke off: {err}"))),
        };
        let text = String::from_utf8_lossy(&bytes);
        let head: String = text.chars().take(300).collect();
        match status {
            200..=299 => parse_completion(&text).map_err(Attempt::Fatal),
            429 => Err(Attempt::Transient(LlmError::RateLimited { attempts }, retry_after)),
            500..=599 => Err(Attempt::Transient(LlmError::Server { status, attempts, body: head }, retry_after)),
            _ => Err(Attempt::Fatal(LlmError::Refused { status, body: head })),
        }
    }
}

/// A transport failure in words, with its cause (hyper's own message is only "client error (Connect)").
fn transport_message(err: &hyper_util::client::legacy::Error) -> String {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// An OpenAI chat completion body to a [`Completion`].
fn parse_completion(text: &str) -> Result<Completion, LlmError> {
    let malformed = |message: String| LlmError::MalformedResponse { message };
    let doc: Value = serde_json::from_str(text).map_err(|err| malformed(format!("not JSON: {err}")))?;
    let choice = doc.pointer("/choices/0").ok_or_else(|| malformed("no choices[0]".to_owned()))?;
    let content = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("no choices[0].message.content string".to_owned()))?;
    Ok(Completion {
        text: content.to_owned(),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_owned),
        usage: parse_usage(&doc),
        attempts: 1,
        elapsed_ms: 0,
    })
}

/// The token counts a completion body reports: `usage.prompt_tokens` and `usage.completion_tokens`, and the prompt
/// tokens served from the server's cache, as OpenAI says (`usage.prompt_tokens_details.cached_tokens`) or as
/// llama.cpp does (`timings.cache_n`), whichever is present. `None` when the body reports neither count: the caller
/// then counts the text itself rather than take zero for an answer.
pub(crate) fn parse_usage(doc: &Value) -> Option<Usage> {
    let count = |pointer: &str| doc.pointer(pointer).and_then(Value::as_u64);
    let prompt = count("/usage/prompt_tokens");
    let completion = count("/usage/completion_tokens");
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    let cached = count("/usage/prompt_tokens_details/cached_tokens").or_else(|| count("/timings/cache_n"));
    Some(Usage {
        prompt_tokens: prompt.unwrap_or(0),
        completion_tokens: completion.unwrap_or(0),
        cached_tokens: cached.unwrap_or(0),
    })
}

impl CompletionModel for OpenAiCompatible {
    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let mut completion = self.complete_all(Bytes::from(self.body(request).to_string())).await?;
            completion.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            Ok(completion)
        })
    }

    fn name(&self) -> String {
        self.config.model.clone()
    }

    /// The configured name, and what `GET {base_url}/models` lists first: its name (id or alias) and a
    /// `sha256:<hex>` among them (the local server names its weights so). A server that does not answer leaves both
    /// unknown.
    fn identity(&self) -> ModelFuture<'_, ModelIdentity> {
        Box::pin(async move {
            let mut identity = ModelIdentity { name: self.config.model.clone(), served: None, sha256: None };
            let url = format!("{}/models", self.config.base_url.trim_end_matches('/'));
            let mut request = hyper::Request::get(&url);
            if let Some(key) = self.config.api_key_env.as_ref().and_then(|var| std::env::var(var).ok()) {
                request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {key}"));
            }
            let Ok(request) = request.body(Full::new(Bytes::new())) else { return identity };
            let asked = async {
                let response = self.client.request(request).await.ok()?;
                let body = http_body_util::Limited::new(response.into_body(), 1 << 20).collect().await.ok()?;
                serde_json::from_slice::<Value>(&body.to_bytes()).ok()
            };
            let Ok(Some(doc)) = tokio::time::timeout(self.config.timeout, asked).await else { return identity };
            let Some(first) = doc.pointer("/data/0") else { return identity };
            let id = first.get("id").and_then(Value::as_str);
            let aliases =
                first.get("aliases").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
            let names: Vec<&str> = id.into_iter().chain(aliases).collect();
            // The served name is the first that is not a digest (the local server lists `sha256:<hex>` first).
            identity.served =
                names.iter().find(|n| !n.starts_with("sha256:")).or(names.first()).map(|n| (*n).to_owned());
            identity.sha256 = names
                .iter()
                .find_map(|name| name.strip_prefix("sha256:"))
                .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .map(str::to_owned);
            identity
        })
    }
}

#[cfg(test)]
mod tests;
