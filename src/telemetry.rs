//! `--otlp ENDPOINT` (or `LESSRT_OTLP_ENDPOINT`): the runtime's and the agents' spans exported as OpenTelemetry traces
//! and metrics over OTLP/HTTP (protobuf), in OpenTelemetry's GenAI semantic conventions.
//!
//! The libraries speak `tracing` only: spans with target `gen_ai` — `invoke_agent` (an agent's turn, with `less.*`
//! attributes: role, mode, step, budgets, inline tokens, refusals), `execute_tool` (a search, listing, description,
//! recall or deref under it), `chat` (a model call: `gen_ai.request.model`, `gen_ai.usage.input_tokens`,
//! `gen_ai.usage.output_tokens`) — and a `refused` span for each message a gateway refused. Here they become OTLP spans (`tracing-opentelemetry`) and the
//! metrics operators chart: `gen_ai.client.token.usage` and `gen_ai.client.operation.duration` of every model call,
//! `less.inline_tokens` and `less.turns` by role, `less.tool.calls` by tool, `less.refusals` by code. Nothing is
//! exported without an endpoint, and the rest of the process's logging is untouched.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, MeterProvider as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The environment variable that turns the export on when `--otlp` is not given.
pub(crate) const ENDPOINT_ENV: &str = "LESSRT_OTLP_ENDPOINT";

/// The target of the spans and events exported.
const TARGET: &str = "gen_ai";

/// The exporters of a process that exports; [`Telemetry::shutdown`] sends what is still buffered.
pub(crate) struct Telemetry {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
}

/// The OTLP/HTTP base endpoint asked for: `--otlp`, else [`ENDPOINT_ENV`], else none (an empty value is none).
pub(crate) fn endpoint(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_owned).or_else(|| std::env::var(ENDPOINT_ENV).ok()).filter(|e| !e.trim().is_empty())
}

impl Telemetry {
    /// Exporters to `endpoint` (an OTLP/HTTP base such as `http://127.0.0.1:4318`; `/v1/traces` and `/v1/metrics` are
    /// added), and the two layers that feed them (spans; metrics from span totals), filtered to [`TARGET`].
    pub(crate) fn start<S>(endpoint: &str) -> anyhow::Result<(Telemetry, impl Layer<S> + Send + Sync)>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let base = endpoint.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            anyhow::bail!(
                "LESS_ARGUMENT_INVALID: --otlp {endpoint:?} is not an http:// or https:// URL (an OTLP/HTTP endpoint, \
                 such as http://127.0.0.1:4318)"
            );
        }
        let resource = Resource::builder().with_service_name("lessrt").build();
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/traces"))
            .with_timeout(Duration::from_secs(10))
            .build()?;
        let tracer = SdkTracerProvider::builder().with_resource(resource.clone()).with_batch_exporter(spans).build();
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/metrics"))
            .with_timeout(Duration::from_secs(10))
            .build()?;
        let meter = SdkMeterProvider::builder().with_resource(resource).with_periodic_exporter(metrics).build();
        let targets = || Targets::new().with_target(TARGET, tracing::Level::INFO);
        let layers = tracing_opentelemetry::layer()
            .with_tracer(tracer.tracer("lessrt"))
            .with_filter(targets())
            .and_then(GenAiMetrics::new(&meter.meter("lessrt")).with_filter(targets()));
        Ok((Telemetry { tracer, meter }, layers))
    }

    /// Sends what is buffered and stops the exporters (at the end of the process).
    pub(crate) fn shutdown(self) {
        if let Err(err) = self.tracer.shutdown() {
            eprintln!("lessrt: the OTLP trace export did not finish: {err}");
        }
        if let Err(err) = self.meter.shutdown() {
            eprintln!("lessrt: the OTLP metrics export did not finish: {err}");
        }
    }
}

/// The metrics, recorded from the totals of `gen_ai` spans as they close.
struct GenAiMetrics {
    token_usage: Histogram<u64>,
    duration: Histogram<f64>,
    inline_tokens: Counter<u64>,
    turns: Counter<u64>,
    tool_calls: Counter<u64>,
    refusals: Counter<u64>,
}

/// A `gen_ai` span's fields as recorded so far, and when it started.
struct Fields {
    values: HashMap<&'static str, String>,
    started: Instant,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.values.insert(field.name(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.values.insert(field.name(), value.to_owned());
    }
}

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    fn number(&self, name: &str) -> Option<u64> {
        self.get(name).and_then(|v| v.parse().ok())
    }

    /// `names` that are set, as attributes.
    fn attributes(&self, names: &[&'static str]) -> Vec<KeyValue> {
        names.iter().filter_map(|&n| self.get(n).map(|v| KeyValue::new(n, v.to_owned()))).collect()
    }
}

impl GenAiMetrics {
    fn new(meter: &Meter) -> GenAiMetrics {
        GenAiMetrics {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens of each model call, by gen_ai.token.type (input, output)")
                .with_boundaries(vec![
                    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
                ])
                .build(),
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of each model call")
                .build(),
            inline_tokens: meter
                .u64_counter("less.inline_tokens")
                .with_unit("{token}")
                .with_description("Inline tokens agents' turns cost: messages delivered and answers looked up")
                .build(),
            turns: meter.u64_counter("less.turns").with_description("Agent turns, by role").build(),
            tool_calls: meter.u64_counter("less.tool.calls").with_description("Tools agents used, by tool").build(),
            refusals: meter
                .u64_counter("less.refusals")
                .with_description("Messages a gateway refused, by error code")
                .build(),
        }
    }
}

impl<S> Layer<S> for GenAiMetrics
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields { values: HashMap::new(), started: Instant::now() };
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let extensions = span.extensions();
        let Some(fields) = extensions.get::<Fields>() else { return };
        match fields.get("gen_ai.operation.name") {
            Some("chat") => {
                let mut attributes =
                    fields.attributes(&["gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"]);
                self.duration.record(fields.started.elapsed().as_secs_f64(), &{
                    let mut with_error = attributes.clone();
                    with_error.extend(fields.attributes(&["error.type"]));
                    with_error
                });
                for (field, kind) in [("gen_ai.usage.input_tokens", "input"), ("gen_ai.usage.output_tokens", "output")]
                {
                    if let Some(n) = fields.number(field) {
                        attributes.push(KeyValue::new("gen_ai.token.type", kind));
                        self.token_usage.record(n, &attributes);
                        attributes.pop();
                    }
                }
            }
            Some("invoke_agent") => {
                let attributes = fields.attributes(&["less.role", "less.mode"]);
                self.turns.add(1, &attributes);
                self.inline_tokens.add(fields.number("less.inline_tokens").unwrap_or(0), &attributes);
            }
            Some("execute_tool") => {
                self.tool_calls.add(1, &fields.attributes(&["gen_ai.tool.name", "error.type"]));
            }
            _ => {
                if let Some(code) = fields.get("less.refusal.code") {
                    self.refusals.add(1, &[KeyValue::new("error.type", code.to_owned())]);
                }
            }
        }
    }
}
