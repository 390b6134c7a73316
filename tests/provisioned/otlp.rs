//! `--otlp`: a run's telemetry received by a real OTLP/HTTP receiver (`scripts/otlp-receiver.py`, on OpenTelemetry's
//! own protobuf classes from PyPI, installed by `scripts/otlp-receiver.sh`; a missing install fails the test with the
//! command that installs it): spans in the GenAI conventions whose counts and token totals are the report's.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::support::{root, stderr};

/// The receiver's process, killed when dropped, and the file it appends each request to.
struct Receiver {
    child: Child,
    port: u16,
    file: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start(dir: &Path) -> Receiver {
        let python = crate::venv_python("otlp-venv", "otlp-receiver.sh");
        let file = dir.join("otlp.jsonl");
        let mut child = Command::new(python)
            .arg(root().join("scripts/otlp-receiver.py"))
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("its first line");
        let port = line.trim().strip_prefix("listening on ").and_then(|p| p.parse().ok()).expect("listening on PORT");
        Receiver { child, port, file }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request received of `signal` (`traces`, `metrics`), as OTLP's JSON mapping.
    fn received(&self, signal: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        let lines = text.lines().map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"));
        lines.filter(|l| l["signal"] == signal).map(|l| l["body"].clone()).collect()
    }

    /// Every span received: its name, ids and attributes (values as strings or numbers).
    fn spans(&self) -> Vec<Span> {
        let mut spans = Vec::new();
        for body in self.received("traces") {
            for resource in body["resourceSpans"].as_array().into_iter().flatten() {
                for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                    for span in scope["spans"].as_array().into_iter().flatten() {
                        spans.push(Span {
                            name: span["name"].as_str().unwrap_or_default().to_owned(),
                            id: span["spanId"].as_str().unwrap_or_default().to_owned(),
                            parent: span["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                            attributes: attributes(&span["attributes"]),
                            kinds: kinds(&span["attributes"]),
                        });
                    }
                }
            }
        }
        spans
    }

    /// The sum of every data point of the sum metric `name` in the last metrics request that has it.
    fn sum(&self, name: &str) -> Option<f64> {
        let bodies = self.received("metrics");
        let metric = bodies.iter().rev().find_map(|body| {
            let resources = body["resourceMetrics"].as_array().into_iter().flatten();
            let scopes = resources.flat_map(|r| r["scopeMetrics"].as_array().into_iter().flatten());
            let metrics = scopes.flat_map(|s| s["metrics"].as_array().into_iter().flatten());
            metrics.into_iter().find(|m| m["name"] == name).cloned()
        })?;
        let points = metric["sum"]["dataPoints"].as_array()?.clone();
        Some(points.iter().map(|p| number(&p["asInt"]).or_else(|| p["asDouble"].as_f64()).unwrap_or(0.0)).sum())
    }
}

struct Span {
    name: String,
    id: String,
    parent: String,
    attributes: HashMap<String, Value>,
    /// Each attribute's OTLP value kind (`stringValue`, `intValue`, …).
    kinds: HashMap<String, String>,
}

impl Span {
    fn number(&self, key: &str) -> Option<f64> {
        self.attributes.get(key).and_then(number)
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(Value::as_str)
    }
}

/// An OTLP number: a 64-bit integer is a string in OTLP's JSON mapping.
fn number(value: &Value) -> Option<f64> {
    value.as_f64().or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

fn kinds(list: &Value) -> HashMap<String, String> {
    let pairs = list.as_array().into_iter().flatten().filter_map(|kv| {
        let kind = kv["value"].as_object()?.keys().next()?.clone();
        Some((kv["key"].as_str()?.to_owned(), kind))
    });
    pairs.collect()
}

fn attributes(list: &Value) -> HashMap<String, Value> {
    let mut map = HashMap::new();
    for kv in list.as_array().into_iter().flatten() {
        let value = &kv["value"];
        let v = ["stringValue", "intValue", "doubleValue", "boolValue"].iter().find_map(|k| value.get(*k).cloned());
        map.insert(kv["key"].as_str().unwrap_or_default().to_owned(), v.unwrap_or(Value::Null));
    }
    map
}

/// `lessrt run` exporting to `receiver`; its report.
fn run(receiver: &Receiver, args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(args)
        .args(["--mode", "less", "--json", "--otlp", &receiver.endpoint()])
        .current_dir(root())
        .output()
        .expect("lessrt runs");
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("a JSON report")
}

/// Inline tokens the report counts for agents (the gateways' own escalations are the pseudo-role `gateway`).
fn agents_inline_tokens(report: &Value) -> f64 {
    let roles = report["roles"].as_object().expect("roles");
    roles
        .iter()
        .filter(|(role, _)| *role != "gateway")
        .map(|(_, r)| number(&r["inline_tokens"]["total"]).unwrap_or(0.0))
        .sum()
}

/// UC1 (scripted agents): an `invoke_agent` span for every step, whose inline tokens sum to the report's; a tool span
/// for each deref, under its turn, refused ones with their code; the metrics say the same totals.
#[test]
fn a_runs_turns_and_tools_arrive_as_gen_ai_spans_with_the_reports_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(dir.path());
    let out = dir.path().join("out");
    let report = run(&receiver, &["run", "scenarios/uc1-refactor.toml", "--out", out.to_str().expect("utf-8")]);
    let spans = receiver.spans();
    let turns: Vec<&Span> = spans.iter().filter(|s| s.text("gen_ai.operation.name") == Some("invoke_agent")).collect();
    assert!(turns.iter().all(|s| s.name.starts_with("invoke_agent ")), "span names say the operation and the agent");
    let ledger = std::fs::read_to_string(out.join("uc1-refactor/less/ledger.jsonl")).expect("ledger");
    let events: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).expect("event")).collect();
    let steps: Vec<f64> = events.iter().filter(|e| e["event"] == "step").filter_map(|e| number(&e["index"])).collect();
    let mut spanned: Vec<f64> = turns.iter().filter_map(|s| s.number("less.step")).filter(|&i| i >= 0.0).collect();
    spanned.sort_by(f64::total_cmp);
    spanned.dedup();
    assert_eq!(spanned, steps, "a turn span for every step");
    let tokens: f64 = turns.iter().filter_map(|s| s.number("less.inline_tokens")).sum();
    assert_eq!(tokens, agents_inline_tokens(&report), "the turns' inline tokens are the report's");
    assert!(turns.iter().all(|s| s.text("less.role").is_some() && s.number("less.budget.max_inline_tokens").is_some()));
    let derefs: Vec<&Span> = spans.iter().filter(|s| s.text("gen_ai.tool.name") == Some("deref")).collect();
    let granted = events.iter().filter(|e| e["event"] == "deref" && e["granted"] == true).count();
    let denied = events.iter().filter(|e| e["event"] == "deref" && e["granted"] == false).count();
    assert_eq!(derefs.iter().filter(|s| s.text("error.type").is_none()).count(), granted);
    assert_eq!(derefs.iter().filter(|s| s.text("error.type").is_some()).count(), denied);
    assert!(denied > 0, "UC1's programmer over-derefs once");
    assert!(
        derefs.iter().all(|d| turns.iter().any(|t| t.id == d.parent)),
        "every tool span is a child of its agent's turn"
    );
    assert_eq!(receiver.sum("less.inline_tokens"), Some(tokens), "the metric says what the spans say");
    assert_eq!(receiver.sum("less.refusals"), Some(number(&report["totals"]["rejections"]).expect("rejections")));
}

/// The committed LLM recording replayed: a `chat` span for every model call, naming the model, whose input and
/// output tokens sum to the report's model spend; the token-usage histogram counts the same.
#[test]
fn model_calls_arrive_as_chat_spans_with_the_providers_token_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(dir.path());
    let out = dir.path().join("out");
    let report = run(
        &receiver,
        &[
            "run",
            "scenarios/uc3-review-llm.toml",
            "--replay",
            "scenarios/recordings/uc3-review-llm",
            "--out",
            out.to_str().expect("utf-8"),
        ],
    );
    let spans = receiver.spans();
    let chats: Vec<&Span> = spans.iter().filter(|s| s.text("gen_ai.operation.name") == Some("chat")).collect();
    let model = &report["totals"]["model"];
    assert!(number(&model["calls"]).expect("calls") > 0.0, "{report}");
    assert_eq!(chats.len() as f64, number(&model["calls"]).expect("calls"), "a span per model call");
    let sum = |key: &str| chats.iter().filter_map(|s| s.number(key)).sum::<f64>();
    assert_eq!(sum("gen_ai.usage.input_tokens"), number(&model["prompt_tokens"]).expect("prompt"));
    assert_eq!(sum("gen_ai.usage.output_tokens"), number(&model["completion_tokens"]).expect("completion"));
    assert!(chats.iter().all(|s| s.text("gen_ai.request.model").is_some_and(|m| m != "unknown")), "the model is named");
    assert!(chats.iter().all(|s| s.name.starts_with("chat ")));
    assert!(
        chats.iter().all(|s| s.kinds.get("gen_ai.usage.input_tokens").map(String::as_str) == Some("intValue")),
        "token counts are OTLP integers"
    );
    let turns: Vec<&str> = spans
        .iter()
        .filter(|s| s.text("gen_ai.operation.name") == Some("invoke_agent"))
        .map(|s| s.id.as_str())
        .collect();
    assert!(chats.iter().all(|c| turns.contains(&c.parent.as_str())), "each model call is inside its agent's turn");
    let bodies = receiver.received("metrics");
    let text = serde_json::to_string(&bodies).expect("json");
    assert!(text.contains("gen_ai.client.token.usage") && text.contains("gen_ai.client.operation.duration"), "{text}");
}
