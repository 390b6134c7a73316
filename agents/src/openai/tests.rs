//! The provider against a scripted HTTP server on 127.0.0.1: each failure path ends in its documented outcome.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::provider::{ChatMessage, OutputSchema, complete_json};

/// One scripted answer: status, body, delay before answering.
struct Reply(u16, String, Duration);

fn ok_body(content: &str) -> String {
    json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    })
    .to_string()
}

/// Serves `replies` in order, one connection each, then stops; returns the base URL and the requests it saw.
fn serve(replies: Vec<Reply>) -> (String, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for Reply(status, body, delay) in replies {
            let Ok((stream, _)) = listener.accept() else { break };
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            let mut buf = vec![0; length];
            reader.read_exact(&mut buf).ok();
            seen.push(format!("{head}\r\n{}", String::from_utf8_lossy(&buf)));
            std::thread::sleep(delay);
            let mut stream = reader.into_inner();
            let response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).ok();
        }
        seen
    });
    (base, handle)
}

fn client(base: &str, retries: u32, timeout_ms: u64) -> OpenAiCompatible {
    let mut config = OpenAiConfig::new(base, "test-model");
    config.retries = retries;
    config.timeout = Duration::from_millis(timeout_ms);
    config.backoff = Duration::from_millis(10);
    OpenAiCompatible::new(config)
}

fn request(schema: Option<Value>) -> CompletionRequest {
    CompletionRequest {
        system: "You review code.".to_owned(),
        messages: vec![ChatMessage::user("Report one risk.")],
        temperature: 0.0,
        max_tokens: 64,
        schema: schema.map(|schema| OutputSchema { name: "report".to_owned(), schema }),
    }
}

fn quick(status: u16, body: String) -> Reply {
    Reply(status, body, Duration::ZERO)
}

#[tokio::test]
async fn success_returns_text_usage_and_sends_the_schema() {
    let (base, server) = serve(vec![quick(200, ok_body("{\"a\":1}"))]);
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let done = client(&base, 0, 5_000).complete(&request(Some(schema))).await.expect("completion");
    assert_eq!(done.text, "{\"a\":1}");
    assert_eq!(done.usage, Some(Usage { prompt_tokens: 11, completion_tokens: 7, cached_tokens: 0 }));
    assert_eq!(done.attempts, 1);
    let seen = server.join().expect("server");
    assert!(seen[0].starts_with("POST /v1/chat/completions"), "{}", seen[0]);
    let body: Value = serde_json::from_str(seen[0].split("\r\n\r\n").nth(1).expect("body")).expect("json body");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"]["required"][0], "a");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["temperature"], 0.0);
}

/// The cached prompt tokens in both shapes servers report them, and no usage at all told apart from zero.
#[test]
fn usage_reads_cached_tokens_in_either_shape_and_knows_when_none_was_reported() {
    let openai = json!({"usage": {"prompt_tokens": 1533, "completion_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 1408}}});
    assert_eq!(parse_usage(&openai), Some(Usage { prompt_tokens: 1533, completion_tokens: 9, cached_tokens: 1408 }));
    let llama_cpp = json!({"usage": {"prompt_tokens": 812, "completion_tokens": 40},
        "timings": {"cache_n": 768, "prompt_n": 44, "predicted_n": 40}});
    assert_eq!(parse_usage(&llama_cpp), Some(Usage { prompt_tokens: 812, completion_tokens: 40, cached_tokens: 768 }));
    // OpenAI's field wins where a server sends both.
    let both = json!({"usage": {"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 3}},
        "timings": {"cache_n": 4}});
    assert_eq!(parse_usage(&both).map(|u| u.cached_tokens), Some(3));
    let uncached = json!({"usage": {"prompt_tokens": 5, "completion_tokens": 1}});
    assert_eq!(parse_usage(&uncached), Some(Usage { prompt_tokens: 5, completion_tokens: 1, cached_tokens: 0 }));
    assert_eq!(parse_usage(&json!({"choices": []})), None, "no usage is not zero usage");
    assert_eq!(parse_usage(&json!({"usage": {}, "timings": {"cache_n": 4}})), None);
}

/// A recording of older lessrt holds `usage: {prompt_tokens, completion_tokens}` and no time: it still reads, as
/// counts the server reported, none of them cached, taking no time.
#[test]
fn a_completion_of_an_older_recording_still_reads() {
    let old = json!({"attempts": 1, "finish_reason": "stop", "text": "{}",
        "usage": {"completion_tokens": 98, "prompt_tokens": 4748}});
    let completion: Completion = serde_json::from_value(old).expect("an older completion");
    assert_eq!(completion.usage, Some(Usage { prompt_tokens: 4748, completion_tokens: 98, cached_tokens: 0 }));
    assert_eq!(completion.elapsed_ms, 0);
    let unreported: Completion =
        serde_json::from_value(json!({"attempts": 1, "finish_reason": null, "text": "x", "usage": null}))
            .expect("no usage");
    assert_eq!(unreported.usage, None);
}

/// The call's time is the whole call's: a failed attempt, the backoff and the slow answer after it.
#[tokio::test]
async fn the_elapsed_time_covers_every_attempt() {
    let (base, server) =
        serve(vec![quick(503, "busy".to_owned()), Reply(200, ok_body("{}"), Duration::from_millis(150))]);
    let done = client(&base, 1, 5_000).complete(&request(None)).await.expect("completion");
    assert_eq!(done.attempts, 2);
    assert!(done.elapsed_ms >= 160, "the backoff (10 ms) and the slow answer (150 ms): {}", done.elapsed_ms);
    assert!(done.elapsed_ms < 5_000, "{}", done.elapsed_ms);
    server.join().expect("server");
}

#[tokio::test]
async fn timeout_on_every_attempt_is_llm_timeout() {
    let slow = || Reply(200, ok_body("{}"), Duration::from_millis(1_500));
    let (base, server) = serve(vec![slow(), slow()]);
    let err = client(&base, 1, 300).complete(&request(None)).await.expect_err("timeout");
    assert_eq!(err, LlmError::Timeout { attempts: 2 });
    assert_eq!(err.code(), "LLM_TIMEOUT");
    assert_eq!(server.join().expect("server").len(), 2);
}

#[tokio::test]
async fn rate_limited_then_success_retries() {
    let (base, server) = serve(vec![quick(429, "{\"error\":\"slow down\"}".to_owned()), quick(200, ok_body("ok"))]);
    let done = client(&base, 3, 5_000).complete(&request(None)).await.expect("second attempt succeeds");
    assert_eq!((done.text.as_str(), done.attempts), ("ok", 2));
    assert_eq!(server.join().expect("server").len(), 2);
}

#[tokio::test]
async fn rate_limited_throughout_is_llm_rate_limited() {
    let (base, server) = serve(vec![quick(429, "{}".to_owned()), quick(429, "{}".to_owned())]);
    let err = client(&base, 1, 5_000).complete(&request(None)).await.expect_err("429s");
    assert_eq!((err.code(), err), ("LLM_RATE_LIMITED", LlmError::RateLimited { attempts: 2 }));
    server.join().expect("server");
}

#[tokio::test]
async fn server_errors_until_giving_up() {
    let replies = (0..3).map(|_| quick(500, "{\"error\":\"boom\"}".to_owned())).collect();
    let (base, server) = serve(replies);
    let err = client(&base, 2, 5_000).complete(&request(None)).await.expect_err("500s");
    assert!(matches!(&err, LlmError::Server { status: 500, attempts: 3, body } if body.contains("boom")), "{err:?}");
    assert_eq!(err.code(), "LLM_SERVER_ERROR");
    assert_eq!(server.join().expect("server").len(), 3, "first attempt + 2 retries");
}

#[tokio::test]
async fn malformed_body_is_not_retried() {
    let (base, server) = serve(vec![quick(200, "{\"choices\": [".to_owned())]);
    let err = client(&base, 3, 5_000).complete(&request(None)).await.expect_err("malformed");
    assert!(matches!(&err, LlmError::MalformedResponse { message } if message.starts_with("not JSON")), "{err:?}");
    assert_eq!(err.code(), "LLM_RESPONSE_MALFORMED");
    assert_eq!(server.join().expect("server").len(), 1);
}

#[tokio::test]
async fn body_without_content_is_malformed() {
    let (base, server) = serve(vec![quick(200, "{\"choices\": []}".to_owned())]);
    let err = client(&base, 0, 5_000).complete(&request(None)).await.expect_err("no choice");
    assert_eq!(err, LlmError::MalformedResponse { message: "no choices[0]".to_owned() });
    server.join().expect("server");
}

#[tokio::test]
async fn client_errors_are_refused_without_retry() {
    let (base, server) = serve(vec![quick(400, "{\"error\":\"bad schema\"}".to_owned())]);
    let err = client(&base, 3, 5_000).complete(&request(None)).await.expect_err("400");
    assert!(matches!(&err, LlmError::Refused { status: 400, .. }), "{err:?}");
    assert_eq!(server.join().expect("server").len(), 1);
}

#[tokio::test]
async fn output_that_is_not_json_is_reported() {
    let (base, server) = serve(vec![quick(200, ok_body("Sure! Here is a risk: ..."))]);
    let model = client(&base, 0, 5_000);
    let err = complete_json(&model, &request(None), |_| Vec::new()).await.expect_err("not json");
    assert_eq!(err.code(), "LLM_OUTPUT_NOT_JSON");
    server.join().expect("server");
}

#[tokio::test]
async fn schema_violating_output_is_reported_with_paths() {
    let schema = json!({
        "type": "object",
        "properties": {"confidence": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["confidence"],
    });
    let (base, server) = serve(vec![quick(200, ok_body("{\"confidence\": 7}"))]);
    let model = client(&base, 0, 5_000);
    let err = complete_json(&model, &request(Some(schema)), |_| Vec::new()).await.expect_err("invalid");
    match &err {
        LlmError::OutputInvalid { violations } => assert!(violations[0].starts_with("/confidence: "), "{violations:?}"),
        other => panic!("expected OutputInvalid, got {other:?}"),
    }
    assert_eq!(err.code(), "LLM_OUTPUT_INVALID");
    server.join().expect("server");
}

#[tokio::test]
async fn unreachable_server_after_retries() {
    // Bind then drop: nothing listens on the port any more.
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let err =
        client(&format!("http://127.0.0.1:{port}/v1"), 1, 2_000).complete(&request(None)).await.expect_err("refused");
    assert!(matches!(&err, LlmError::Unreachable { attempts: 2, .. }), "{err:?}");
    assert_eq!(err.code(), "LLM_UNREACHABLE");
}

#[tokio::test]
async fn api_key_comes_from_the_named_variable() {
    let mut config = OpenAiConfig::new("http://127.0.0.1:9/v1", "m");
    config.api_key_env = Some("LESSRT_TEST_KEY_THAT_IS_NOT_SET".to_owned());
    let err = OpenAiCompatible::new(config).complete(&request(None)).await.expect_err("no key");
    assert_eq!(err.code(), "LLM_API_KEY_MISSING");
    assert!(err.to_string().contains("LESSRT_TEST_KEY_THAT_IS_NOT_SET"));

    let (base, server) = serve(vec![quick(200, ok_body("{}"))]);
    let mut config = OpenAiConfig::new(base, "m");
    // PATH is always set: it stands in for a key variable without touching the environment.
    config.api_key_env = Some("PATH".to_owned());
    OpenAiCompatible::new(config).complete(&request(None)).await.expect("completion");
    let seen = server.join().expect("server");
    let expected = format!("authorization: bearer {}", std::env::var("PATH").expect("PATH").to_ascii_lowercase());
    assert!(seen[0].to_ascii_lowercase().contains(&expected));
}

/// Accepts one connection, reads the request head, answers nothing; then reports (through the channel) how long after
/// the request arrived the client closed the connection (`None`: still open after 10 s).
fn hang() -> (String, std::sync::mpsc::Receiver<Option<Duration>>, std::sync::mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let (closed_tx, closed) = std::sync::mpsc::channel();
    let (arrived_tx, arrived) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else { return };
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
            line.clear();
        }
        let since = std::time::Instant::now();
        arrived_tx.send(()).ok();
        // Whatever body bytes are left, then the end of the stream when the client goes.
        let mut rest = Vec::new();
        let gone = reader.read_to_end(&mut rest).is_ok();
        closed_tx.send(gone.then(|| since.elapsed())).ok();
    });
    (base, closed, arrived)
}

/// A call whose future is dropped — its step timed out, its run ended — is really cancelled: the connection closes
/// at once, not when the attempt's own timeout (a minute here) would have ended it.
#[tokio::test]
async fn a_dropped_call_closes_its_connection_at_once() {
    let (base, closed, arrived) = hang();
    let model = client(&base, 3, 60_000);
    let call = tokio::spawn(async move { model.complete(&request(None)).await });
    tokio::task::spawn_blocking(move || arrived.recv_timeout(Duration::from_secs(10)))
        .await
        .expect("join")
        .expect("the request reached the server");
    call.abort();
    let after = tokio::task::spawn_blocking(move || closed.recv_timeout(Duration::from_secs(15)))
        .await
        .expect("join")
        .expect("the server thread reports");
    let after = after.expect("the connection was closed when the call was dropped, not left running");
    assert!(after < Duration::from_secs(5), "closed {after:?} after the request, not when the call was dropped");
}

/// An attempt that times out closes its connection too (the server is not left answering a client that is gone).
#[tokio::test]
async fn a_timed_out_attempt_closes_its_connection() {
    let (base, closed, _arrived) = hang();
    let err = client(&base, 0, 300).complete(&request(None)).await.expect_err("timeout");
    assert_eq!(err, LlmError::Timeout { attempts: 1 });
    let after = tokio::task::spawn_blocking(move || closed.recv_timeout(Duration::from_secs(15)))
        .await
        .expect("join")
        .expect("the server thread reports")
        .expect("closed");
    assert!(after < Duration::from_secs(5), "closed {after:?} after the request");
}

/// An answer longer than any completion (a hostile or broken server) is cut off, not read into memory, and not
/// retried.
#[tokio::test]
async fn an_endless_answer_is_cut_off() {
    let huge = "x".repeat(MAX_ANSWER_BYTES + 1);
    let (base, server) = serve(vec![quick(200, huge)]);
    let err = client(&base, 2, 20_000).complete(&request(None)).await.expect_err("too long");
    assert!(matches!(&err, LlmError::MalformedResponse { message } if message.contains("longer than")), "{err:?}");
    assert_eq!(server.join().expect("server").len(), 1, "not retried");
}
