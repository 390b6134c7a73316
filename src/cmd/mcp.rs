//! `lessrt mcp`: the desk (`less_runtime::desk`) served over the Model Context Protocol, on stdio or, with `--http`,
//! as streamable HTTP on a loopback address (`/mcp`).
//!
//! Each tool is a thin call of the desk on tokio's blocking pool (SQLite, the indexes and file reads never run on the
//! executor). A result is one compact JSON text block and the same value as `structuredContent`, with an
//! `outputSchema` per tool; a refusal is a tool error whose text starts with the stable LESS code and says what to
//! do instead. Who calls is the client's name from `initialize` (`clientInfo.name`), or the call's
//! `client_identity` argument; the desk's configuration (`--config`) gives it a role, a parent, a project and a budget.
//! Standard output carries the protocol alone; logs go to standard error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{Json, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use less_runtime::desk::{
    Client, DEFAULT_CONFIDENCE, DEFAULT_SCOPE, DEFAULT_TTL, Desk, DeskConfig, NewCapsule, NewGrant,
};
use less_runtime::memory::MAX_K;
use less_runtime::{DocKind, ErrorCode, GateStatus, Scope, Violation, schema_document};

use crate::cmd::args::Stop;

/// Serve the LESS desk (memory, budgeted derefs, grants, the context ledger) to MCP hosts over stdio.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The store directory (engrams, the desk's grants, requests and ledger); created if missing.
    #[arg(long, value_name = "DIR", default_value = ".lessrt")]
    store: PathBuf,
    /// The directory pointers resolve in (`repo:src/lib.rs#L1-L9`); without it, derefs are refused.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The desk's configuration (TOML): `project`, `[budget]`, `[memory]` (shared_reads — org and global engrams,
    /// default false —, writes, reads per role, promotion_floor, rate limit; as in a scenario), `[clients.<id>]` with
    /// role, parent, project, budget, shared_reads.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio; loopback addresses only (port 0 picks one, said on
    /// stderr).
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// With --http: the most sessions open at once; an `initialize` past it is refused with a JSON-RPC error
    /// (close sessions with DELETE /mcp, or wait for idle ones to expire).
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_MAX_SESSIONS,
        value_parser = clap::value_parser!(u32).range(1..=100_000)
    )]
    max_sessions: u32,
    /// With --http: a session without a request for this many seconds is closed (its client initializes again).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = DEFAULT_SESSION_IDLE_SECS,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    session_idle_secs: u64,
}

/// Sessions open at once over HTTP, by default: a few hosts with a few reconnects each.
const DEFAULT_MAX_SESSIONS: u32 = 64;

/// Seconds a session over HTTP may stay idle, by default.
const DEFAULT_SESSION_IDLE_SECS: u64 = 300;

/// The longest line (one JSON-RPC message) read from standard input, as rmcp's own transport: 16 MiB.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// `lessrt mcp`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = match &args.config {
        Some(path) => {
            let text = crate::cmd::read_input(path)?;
            DeskConfig::from_toml(&text)
                .map_err(|v| Stop::usage(format!("{}: {}: {}", v.code, path.display(), v.message)))?
        }
        None => DeskConfig::default(),
    };
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
    {
        return Err(Stop::usage(format!(
            "--http {addr}: lessrt mcp serves loopback addresses only (127.0.0.1 or ::1); put a proxy in front to share it"
        ))
        .into());
    }
    let desk = Desk::open(&args.store, args.workspace.as_deref(), config)
        .map_err(|v| Stop::usage(format!("{}: {}", v.code, v.message)))?;
    let desk = Arc::new(desk);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("no async runtime")?;
    runtime.block_on(async {
        match args.http {
            Some(addr) => {
                let sessions = Sessions {
                    max: args.max_sessions as usize,
                    idle: std::time::Duration::from_secs(args.session_idle_secs),
                };
                serve_http(desk.clone(), addr, sessions).await
            }
            None => serve_stdio(desk.clone()).await,
        }
    })?;
    drop(runtime);
    match Arc::try_unwrap(desk) {
        Ok(desk) => desk.close().map_err(|v| anyhow::anyhow!("{}: {}", v.code, v.message))?,
        Err(_) => tracing::warn!(target: "less.desk", "the desk was still in use at shutdown; indexes not saved"),
    }
    Ok(ExitCode::SUCCESS)
}

/// How many sessions over HTTP, and for how long.
#[derive(Debug, Clone, Copy)]
struct Sessions {
    /// The most open at once.
    max: usize,
    /// How long one may go without a request before it is closed.
    idle: std::time::Duration,
}

/// Serves streamable HTTP at `http://addr/mcp` until interrupted; one session per client, all on the same desk.
///
/// Each session costs memory until it ends: a client may end it (DELETE), an idle one expires after
/// `sessions.idle` (rmcp's session keep-alive), and past `sessions.max` a new session is refused with a JSON-RPC
/// error instead of being opened.
async fn serve_http(desk: Arc<Desk>, addr: std::net::SocketAddr, sessions: Sessions) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let mut config = SessionConfig::default();
    config.keep_alive = Some(sessions.idle);
    let mut manager = LocalSessionManager::default();
    manager.session_config = config;
    let manager = Arc::new(manager);
    let service = StreamableHttpService::new(
        move || Ok(LessServer::new(desk.clone())),
        manager.clone(),
        StreamableHttpServerConfig::default(),
    );
    let cap = Arc::new(SessionCap { manager, sessions, opening: tokio::sync::Mutex::new(()) });
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(cap, cap_sessions));
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().context("the listener's address")?;
    eprintln!("lessrt mcp: serving http://{bound}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("HTTP server")
}

/// What [`cap_sessions`] needs: the open sessions, the limits, and a lock that opens one session at a time.
struct SessionCap {
    manager: Arc<rmcp::transport::streamable_http_server::session::local::LocalSessionManager>,
    sessions: Sessions,
    opening: tokio::sync::Mutex<()>,
}

/// The JSON-RPC error code of a refused session (the implementation-defined server errors are -32000 to -32099).
const SESSIONS_FULL: i64 = -32000;

/// The largest request body over HTTP, as rmcp's own limit (4 MiB).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Refuses an `initialize` without `Mcp-Session-Id` (a request that opens a session) when `max` sessions are open:
/// HTTP 503 with a JSON-RPC error naming the limit and what to do. Other requests pass untouched (their body read
/// and handed on as it was).
async fn cap_sessions(
    axum::extract::State(cap): axum::extract::State<Arc<SessionCap>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let sessionless = request.method() == axum::http::Method::POST && !request.headers().contains_key("mcp-session-id");
    if !sessionless {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let refuse = |id: Value, code: i64, message: String| {
        let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
    };
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        let message = format!("Invalid Request: a request body over {MAX_BODY_BYTES} bytes; send smaller requests");
        return refuse(Value::Null, -32600, message);
    };
    let message = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
    let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    if message.get("method").and_then(Value::as_str) != Some("initialize") {
        return next.run(request).await;
    }
    // One session opens at a time, so concurrent `initialize` calls cannot pass the cap together; the session is
    // in the manager's table once the answer to `initialize` is ready.
    let _opening = cap.opening.lock().await;
    let open = cap.manager.sessions.read().await.len();
    if open < cap.sessions.max {
        return next.run(request).await;
    }
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    refuse(
        id,
        SESSIONS_FULL,
        format!(
            "{open} MCP sessions are open, the most this server keeps (--max-sessions {}): close sessions you no \
             longer use (DELETE /mcp with their Mcp-Session-Id) or retry later; a session idle for {} s is closed",
            cap.sessions.max,
            cap.sessions.idle.as_secs()
        ),
    )
}

/// Serves stdio until standard input ends. Lines are framed here, not by rmcp, so that every line gets an answer:
/// one over [`MAX_LINE_BYTES`], one that is not UTF-8 and one that is not JSON (a lone surrogate escape included)
/// each get a JSON-RPC error with id null (-32600 Invalid Request, -32700 Parse error), where rmcp would drop them
/// and the host would wait forever. What parses goes on to rmcp, through an in-process pipe.
async fn serve_stdio(desk: Arc<Desk>) -> anyhow::Result<()> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (from_server, to_server) = tokio::io::split(ours);
    // Bounded: a host that floods bad lines without reading the answers is read no further until it does.
    let (errors, errors_out) = tokio::sync::mpsc::channel(64);
    let reader = tokio::spawn(read_requests(tokio::io::stdin(), to_server, errors));
    let writer = tokio::spawn(write_answers(from_server, errors_out, tokio::io::stdout()));
    let service = LessServer::new(desk).serve(theirs).await.context("MCP handshake")?;
    service.waiting().await.context("MCP session")?;
    // The server's side of the pipe is closed: the writer writes what is left, then ends.
    writer.await.context("the stdio writer")?.context("standard output")?;
    reader.abort();
    Ok(())
}

/// A line read from standard input.
enum Line {
    /// A whole line is in the buffer (without its newline).
    Whole,
    /// The line was longer than the limit; it was read past and dropped.
    TooLong,
    /// Standard input ended.
    End,
}

/// Reads one line into `line` (cleared first), never holding more than `max` bytes of it.
async fn read_line_bounded<R: tokio::io::AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    use tokio::io::AsyncBufReadExt;
    line.clear();
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            // A last line without a newline is still a line.
            return Ok(if too_long {
                Line::TooLong
            } else if line.is_empty() {
                Line::End
            } else {
                Line::Whole
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        let part = &available[..newline.unwrap_or(available.len())];
        if !too_long && line.len() + part.len() > max {
            too_long = true;
            line.clear();
            line.shrink_to(0);
        }
        if !too_long {
            line.extend_from_slice(part);
        }
        input.consume(take);
        if newline.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// A JSON-RPC error answering a request whose id is unknown.
fn error_line(code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}).to_string()
}

/// What to do with a line read: `None` passes it on to rmcp (or skips a blank one), `Some` answers it with an error.
fn check_line(line: &[u8]) -> Option<String> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Some(error_line(
            -32700,
            "Parse error: the message is not UTF-8; send JSON-RPC as UTF-8 JSON, one message a line",
        ));
    };
    if text.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(_) => None,
        Err(err) => Some(error_line(
            -32700,
            &format!(
                "Parse error: the message is not JSON ({err}); send one JSON-RPC message a line, strings as valid UTF-16 escapes"
            ),
        )),
    }
}

/// Reads standard input line by line: good lines go to rmcp, bad ones are answered through `errors`.
async fn read_requests(
    input: impl tokio::io::AsyncRead + Unpin,
    mut to_server: impl tokio::io::AsyncWrite + Unpin,
    errors: tokio::sync::mpsc::Sender<String>,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut input = tokio::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        let answer = match read_line_bounded(&mut input, &mut line, MAX_LINE_BYTES).await? {
            Line::End => break,
            Line::TooLong => Some(error_line(
                -32600,
                "Invalid Request: a message over 16 MiB was dropped unread; send smaller messages (cite content by \
                 pointer instead of pasting it)",
            )),
            Line::Whole => check_line(line.strip_suffix(b"\r").unwrap_or(&line)),
        };
        match answer {
            Some(error) => {
                if errors.send(error).await.is_err() {
                    break;
                }
            }
            None if line.iter().all(u8::is_ascii_whitespace) => {}
            None => {
                to_server.write_all(&line).await?;
                to_server.write_all(b"\n").await?;
                to_server.flush().await?;
            }
        }
    }
    // Standard input ended: so does the server's.
    to_server.shutdown().await
}

/// Writes rmcp's answers and the framing's errors to standard output, whole lines only.
async fn write_answers(
    from_server: impl tokio::io::AsyncRead + Unpin,
    mut errors: tokio::sync::mpsc::Receiver<String>,
    mut output: impl tokio::io::AsyncWrite + Unpin,
) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut from_server = tokio::io::BufReader::new(from_server);
    let mut line = Vec::new();
    let mut errors_open = true;
    loop {
        tokio::select! {
            // Errors first: one queued before the server's side closed is still written.
            biased;
            error = errors.recv(), if errors_open => match error {
                Some(error) => {
                    output.write_all(error.as_bytes()).await?;
                    output.write_all(b"\n").await?;
                    output.flush().await?;
                }
                None => errors_open = false,
            },
            // Cancel-safe: a partly read line stays in `line` for the next turn.
            read = from_server.read_until(b'\n', &mut line) => {
                if read? == 0 {
                    break;
                }
                if line.ends_with(b"\n") {
                    output.write_all(&line).await?;
                    output.flush().await?;
                    line.clear();
                }
            }
        }
    }
    while let Ok(error) = errors.try_recv() {
        output.write_all(error.as_bytes()).await?;
        output.write_all(b"\n").await?;
    }
    if !line.is_empty() {
        output.write_all(&line).await?;
    }
    output.flush().await
}

/// The MCP server: the desk and the tool router.
#[derive(Clone)]
struct LessServer {
    desk: Arc<Desk>,
    tool_router: ToolRouter<LessServer>,
}

/// Every tool the server serves, as `tools/list` answers (the skill pack is written from it).
pub(crate) fn tools() -> Vec<rmcp::model::Tool> {
    LessServer::tool_router().list_all()
}

/// Who calls: the host's client name unless the call names itself.
fn caller(desk: &Desk, identity: Option<&str>, ctx: &RequestContext<RoleServer>) -> Client {
    let name = identity
        .map(str::to_owned)
        .or_else(|| ctx.client_info().map(|info| info.name))
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "anonymous".to_owned());
    desk.client(&name)
}

/// A refusal as the client reads it: the code first, then what to do instead.
fn refusal(violation: &Violation) -> String {
    let at = if violation.path.is_empty() { String::new() } else { format!(" at {}", violation.path) };
    format!("{}: {}{at} (instead: {})", violation.code, violation.message, violation.code.instruction())
}

impl LessServer {
    fn new(desk: Arc<Desk>) -> LessServer {
        LessServer { desk, tool_router: LessServer::tool_router() }
    }

    /// The tokens of a call's arguments, as the client sent them.
    fn tokens_in<A: Serialize>(&self, args: &A) -> u32 {
        serde_json::to_string(args).map_or(0, |text| self.desk.tokens(&text))
    }

    /// Runs `work` on the blocking pool as `who`, and writes the call to the desk's ledger: the arguments' tokens,
    /// the answer's, and the baseline `work` reports (None: the answer itself).
    async fn call<T: Serialize + Send + 'static>(
        &self,
        who: Client,
        tool: &'static str,
        tokens_in: u32,
        work: impl FnOnce(&Desk, &Client) -> Result<(T, Option<u32>), Violation> + Send + 'static,
    ) -> Result<Json<Attributed<T>>, String> {
        let desk = self.desk.clone();
        let identity = who.identity.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let result = work(&desk, &who);
            match &result {
                Ok((answer, baseline)) => {
                    // An answer with no JSON form fails in rmcp's serialization right after; it read nothing.
                    let tokens_out = serde_json::to_string(answer).map_or(0, |text| desk.tokens(&text));
                    desk.record(&who, tool, tokens_in, tokens_out, baseline.unwrap_or(tokens_out), None);
                }
                Err(violation) => desk.record(&who, tool, tokens_in, 0, 0, Some(violation.code)),
            }
            result
        })
        .await;
        match outcome {
            Ok(Ok((answer, _))) => Ok(Json(Attributed { result: answer, identity })),
            Ok(Err(violation)) => Err(refusal(&violation)),
            Err(err) => Err(refusal(&Violation::new(ErrorCode::RunFailed, "", format!("{tool} failed: {err}")))),
        }
    }
}

/// A tool's answer with who it was attributed to.
#[derive(Debug, Serialize, JsonSchema)]
struct Attributed<T> {
    /// The answer.
    #[serde(flatten)]
    result: T,
    /// The caller's hierarchical identity (`project/parent/client`), as the desk's ledger and audit log name it.
    identity: String,
}

/// `less_validate`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct ValidateArgs {
    /// The document, a JSON object: an engram, a pointer object, a SharedBriefMicro, a grant, a deref request, a
    /// typed message, a budget or a scenario, as the schemas of `schemas/*.v0.1.json` define them (any object is
    /// accepted here; the answer lists what is wrong with it).
    #[schemars(schema_with = "document_schema")]
    document: Value,
    /// Its kind; inferred from its fields when absent.
    #[serde(default)]
    #[schemars(transform = doc_kinds)]
    kind: Option<String>,
}

/// One problem with a document.
#[derive(Debug, Serialize, JsonSchema)]
struct Problem {
    /// The stable LESS code.
    code: String,
    /// Where (RFC 6901 path).
    path: String,
    /// What is wrong.
    message: String,
}

/// `less_validate`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct ValidateOut {
    /// The kind it was checked as.
    kind: String,
    /// Whether it passed both layers (schema and semantic rules).
    valid: bool,
    /// Every problem.
    violations: Vec<Problem>,
}

/// `less_put_engram`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct PutArgs {
    /// An engram v0.1 (`schemas/engram.v0.1.json`): kind, claim and pointers are needed; the desk fills in the id
    /// (derived from them), the provenance (now, the caller, agent), and the confidence, ttl and scope defaults.
    #[schemars(schema_with = "engram_input_schema")]
    engram: Value,
    /// Act as this client instead of the host's client name.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_put_engram`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct PutOut {
    /// The id it has in the store.
    id: String,
    /// `stored`, `duplicate`, `revived`, `superseded` or `risk`.
    outcome: String,
    /// Engrams it superseded.
    superseded: Vec<String>,
    /// Risk engrams recording a contradiction with it.
    contradictions: Vec<String>,
}

/// `less_query_engrams`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct QueryArgs {
    /// What to recall.
    query: String,
    /// Most engrams (1 to 1000; default 5).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_K))]
    k: Option<usize>,
    /// Only this kind.
    #[serde(default)]
    #[schemars(transform = engram_kinds)]
    kind: Option<String>,
    /// Only this scope.
    #[serde(default)]
    #[schemars(transform = engram_scopes)]
    scope: Option<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_query_engrams`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct QueryOut {
    /// Best first, from the caller's project only.
    engrams: Vec<Value>,
}

/// `less_deref`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct DerefArgs {
    /// Pointers in text form (`repo:src/lib.rs#L1-L20`).
    pointers: Vec<String>,
    /// A grant the caller's parent issued, for what this turn's budget cannot cover.
    #[serde(default)]
    grant_id: Option<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_search`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct SearchArgs {
    /// What to look for: key words, identifiers, or a question (`where is the upstream HTTP timeout set`).
    query: String,
    /// Most hits, 1 to 50 (default 5); an answer over the caller's `max_inline_tokens` is refused, naming the k that
    /// fits.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    k: Option<usize>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// One hit of a search.
#[derive(Debug, Serialize, JsonSchema)]
struct SearchHit {
    /// The pointer to read with less_deref (`repo:src/x.rs#L10-L42`, `artifact:README.md#sec=Install`).
    pointer: String,
    /// Its signature, heading or first line.
    preview: String,
    /// What it is: function, method, type, impl, module, const, section, table or window.
    kind: String,
    /// The names it defines.
    symbols: Vec<String>,
    /// What reading it costs, in tokens.
    tokens: u32,
}

/// `less_search`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct SearchOut {
    /// Best first, within the caller's reach.
    hits: Vec<SearchHit>,
    /// What the answer cost the caller (one line per hit).
    tokens: u32,
    /// The stages that ranked them (`hash`: BM25; `rerank`: the local embedding model).
    stages: Vec<String>,
}

/// One dereferenced pointer.
#[derive(Debug, Serialize, JsonSchema)]
struct Item {
    /// The pointer.
    pointer: String,
    /// The content it addresses.
    content: String,
    /// blake3 of the content: cite it.
    digest: String,
    /// Its tokens.
    tokens: u32,
    /// Present when the content changed since the caller read it in an earlier turn: the digest it read then.
    #[serde(skip_serializing_if = "Option::is_none")]
    changed_from: Option<String>,
}

/// `less_deref`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct DerefOut {
    /// One item per pointer, in order.
    items: Vec<Item>,
}

/// `less_request_deref`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct RequestArgs {
    /// What the caller cannot afford.
    pointers: Vec<String>,
    /// Why it needs them (at most 200 characters are kept).
    reason: String,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_request_deref`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct RequestOut {
    /// The request's id; the parent answers it with `less_issue_grant(answers = …)`.
    request_id: String,
}

/// `less_issue_grant`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct GrantArgs {
    /// The grantee: a client below the caller in the desk's configuration.
    to: String,
    /// Pointers or patterns (`repo:src/**`) it covers.
    pointers: Vec<String>,
    /// Derefs it allows (default 1).
    #[serde(default)]
    uses: Option<u32>,
    /// How long it lives (ISO-8601 duration, default PT1H).
    #[serde(default)]
    ttl: Option<String>,
    /// Tokens it covers (default 4000).
    #[serde(default)]
    max_tokens: Option<u32>,
    /// The deref request it answers.
    #[serde(default)]
    answers: Option<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_issue_grant`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct GrantOut {
    /// The grant's id, which the grantee presents to `less_deref`.
    grant_id: String,
    /// Its terms (the signature stays with the desk).
    terms: Value,
}

/// Arguments of calls that take only an identity.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
struct IdentityArgs {
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_checkpoint`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct CheckpointOut {
    /// Deref requests from the caller's children waiting for an answer.
    requests: Vec<Value>,
    /// Grants the caller holds, with what is left of them.
    grants: Vec<Value>,
}

/// `less_compact`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct CompactArgs {
    /// Chat messages in the OpenAI chat shape (`[{"role": "user", "content": "…"}]`), oldest first.
    #[schemars(schema_with = "messages_schema")]
    messages: Value,
    /// Messages kept verbatim at the end (default 6).
    #[serde(default)]
    hot_tail: Option<usize>,
}

/// `less_compact`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct CompactOut {
    /// The compacted messages: the ledger, then the hot tail.
    messages: Value,
    /// Sizes before and after.
    stats: Value,
    /// Why the input came back unchanged after a failure.
    warning: Value,
    /// Why it came back unchanged although compaction worked (it would not have been smaller).
    note: Value,
}

/// `less_ledger_report`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct LedgerArgs {
    /// Only this role.
    #[serde(default)]
    role: Option<String>,
}

/// `less_ledger_report`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct LedgerOut {
    /// Per client and tool: calls, refusals, tokens in and out, and the baseline (what the answers would have cost
    /// without LESS: a deref's whole files).
    rows: Vec<Value>,
    /// Tokens read by clients in all.
    tokens_out: u64,
    /// The baseline of the same calls.
    baseline_tokens: u64,
}

/// `less_expand`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct ExpandArgs {
    /// A node id (`S-…`, `A-…`, `E-…`) or a message id (`m-…`).
    id: String,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_expand_query`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct ExpandQueryArgs {
    /// The question.
    question: String,
    /// Most tokens of the answer's excerpts (default 800).
    #[serde(default)]
    max_tokens: Option<u32>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_impact`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct ImpactArgs {
    /// The pointer whose dependents are wanted (`repo:src/lib.rs`).
    pointer: String,
    /// Leave out what is below this confidence (default 0).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    min_confidence: Option<f64>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// An answer of the lossless memory, as `lessrt dag` prints it with `--json`.
#[derive(Debug, Serialize, JsonSchema)]
struct DagOut {
    /// `expand`: the target, its parent and its children; `expand_query`: the excerpts and their citations;
    /// `impact`: what depends on the pointer, by layer.
    result: Value,
}

/// `less_symbol_set`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct SymbolSetArgs {
    /// The short id (`F12`).
    id: String,
    /// What it stands for (`src/matching/engine.ts`, an invariant).
    value: String,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_symbol_resolve`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct SymbolResolveArgs {
    /// The id to resolve.
    #[serde(default)]
    id: Option<String>,
    /// Or the value whose ids are wanted (reverse).
    #[serde(default)]
    value: Option<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_symbol_fill`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct SymbolFillArgs {
    /// Which files: a path, a directory (`src/net`: everything under it) or a glob (`**/*.rs`); empty: every
    /// indexed file. At most 500 files at a time.
    #[serde(default)]
    pattern: Option<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// What filling the symbol table did.
#[derive(Debug, Serialize, JsonSchema)]
struct SymbolFillOut {
    /// The ids added (`{id, value}`, by path), the first 50 of them; `less_symbol_list` shows them all.
    added: Vec<Value>,
    /// How many ids were added.
    added_count: usize,
    /// Files that had an id already and kept it.
    kept: usize,
}

/// Symbols.
#[derive(Debug, Serialize, JsonSchema)]
struct SymbolsOut {
    /// `{id, value}` pairs, by id.
    symbols: Vec<Value>,
}

/// `less_capsule_write`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct CapsuleArgs {
    /// Its id (`w2`).
    id: String,
    /// What was done.
    what: String,
    /// Where (a path or a symbol id).
    #[serde(default, rename = "where")]
    location: Option<String>,
    /// The decision taken.
    #[serde(default)]
    decision: Option<String>,
    /// What bit, and will bite again.
    #[serde(default)]
    gotcha: Option<String>,
    /// The capsules it builds on (they must exist).
    #[serde(default)]
    depends: Vec<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_capsule_hydrate`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct HydrateArgs {
    /// The capsules referenced.
    ids: Vec<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// Capsules.
#[derive(Debug, Serialize, JsonSchema)]
struct CapsulesOut {
    /// Dependencies before what depends on them; nothing outside the closure.
    capsules: Vec<Value>,
}

/// `less_blackboard_set`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct BoardSetArgs {
    /// The key (`dev_port`).
    key: String,
    /// The value (`5173`).
    value: String,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_blackboard_get`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct BoardGetArgs {
    /// The key.
    key: String,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// Blackboard entries.
#[derive(Debug, Serialize, JsonSchema)]
struct BoardOut {
    /// `{key, value, set_by, superseded}`: current values, and the value each replaced.
    entries: Vec<Value>,
}

/// `less_gate_report`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct GateArgs {
    /// The gate's id.
    gate_id: String,
    /// The report file, a path in the workspace (test output, a JUnit XML, a file saying `status: pass`).
    report: String,
    /// The gate's verdict; read from the report when absent.
    #[serde(default)]
    #[schemars(transform = gate_statuses)]
    status: Option<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_gate_report`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct GateOut {
    /// The validated gate_report message, addressed to the caller's parent: a reference to the report, never its text.
    message: Value,
    /// The message's tokens.
    tokens: u32,
    /// The report's tokens: what pasting it would have cost.
    report_tokens: u32,
}

/// `less_claim`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct ClaimArgs {
    /// The surfaces you will change: workspace paths or globs (`src/run/**`, `docs/mcp.md`).
    surfaces: Vec<String>,
    /// What the change is for (`T-9: typed inbox`).
    task: String,
    /// How long the claim holds, in minutes (1 to 10080; default 30). Renew it to hold longer.
    #[serde(default)]
    ttl_minutes: Option<u64>,
    /// Take the surfaces from the live claims they overlap, saying why: each displaced claim ends, and a conflict
    /// record naming both intents goes to the decision log. Leave out unless you must.
    #[serde(default, rename = "override")]
    override_reason: Option<String>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_claim`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct ClaimOut {
    /// `{claim_id, holder, identity, task, surfaces, made_at, expires_at, status}` (times in UNIX seconds).
    claim: Value,
    /// One conflict record per claim an override displaced: `{conflict_id, overriding, overriding_intent,
    /// displaced, displaced_intent, claim_id, surfaces, decision_id}`.
    conflicts: Vec<Value>,
}

/// `less_release_claim`'s and `less_renew_claim`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct ClaimIdArgs {
    /// The claim (`cl_…`), one you hold.
    claim_id: String,
    /// With `less_renew_claim`: how long from now it holds, in minutes (default 30).
    #[serde(default)]
    ttl_minutes: Option<u64>,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// A claim after a release or a renewal.
#[derive(Debug, Serialize, JsonSchema)]
struct OneClaimOut {
    /// The claim as it is now.
    claim: Value,
}

/// `less_claims`' answer.
#[derive(Debug, Serialize, JsonSchema)]
struct ClaimsOut {
    /// The project's live claims, oldest first.
    claims: Vec<Value>,
}

/// `less_decide`'s arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct DecideArgs {
    /// What was decided, in one line.
    title: String,
    /// Why, and what follows from it.
    body: String,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_decide`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
struct DecisionOut {
    /// `{seq, decision_id, at, identity, title, body, conflict_id}`; `sam:decision:<decision_id>` names it.
    decision: Value,
    /// The decision engram put into the project's memory (kind `decision`, claim: the title, pointer:
    /// `sam:decision:<decision_id>`), found by `less_query_engrams`; absent when the memory refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    engram_id: Option<String>,
}

/// `less_decisions`' arguments.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct DecisionsArgs {
    /// Entries after this one (its `seq`; default 0: from the start).
    #[serde(default)]
    after: Option<i64>,
    /// At most this many entries (1 to 200; default 50).
    #[serde(default)]
    limit: Option<usize>,
    /// Also the whole log as Markdown.
    #[serde(default)]
    markdown: bool,
    /// Act as this client.
    #[serde(default)]
    client_identity: Option<String>,
}

/// `less_decisions`' answer.
#[derive(Debug, Serialize, JsonSchema)]
struct DecisionsOut {
    /// The entries, oldest first.
    decisions: Vec<Value>,
    /// The project's conflict records, each linked to its entry.
    conflicts: Vec<Value>,
    /// The whole log as Markdown, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    markdown: Option<String>,
}

/// The most decision-log entries one `less_decisions` answers.
const MAX_DECISIONS: usize = 200;

/// Minutes as seconds, refusing what would overflow.
fn ttl_secs(minutes: Option<u64>) -> Result<Option<u64>, Violation> {
    minutes
        .map(|m| {
            m.checked_mul(60).ok_or_else(|| {
                Violation::new(ErrorCode::ArgumentInvalid, "/ttl_minutes", "a claim lives 1 to 10080 minutes")
            })
        })
        .transpose()
}

/// The contract's schema `file` (`schemas/`), without the keys that make it a document of its own.
fn contract_schema(file: &str) -> Option<Value> {
    let mut doc = schema_document(file)?;
    let fields = doc.as_object_mut()?;
    for key in ["$schema", "$id", "title"] {
        fields.remove(key);
    }
    Some(doc)
}

/// The schema of `less_put_engram`'s `engram`: the contract's engram (`schemas/engram.v0.1.json`, its pointer object
/// inlined), with pointers also as text, and what the desk fills in (`Desk::put_engram`) optional with its default.
fn engram_input_schema(_: &mut SchemaGenerator) -> Schema {
    let (Some(mut engram), Some(pointer)) = (contract_schema("engram.v0.1.json"), contract_schema("pointer.v0.1.json"))
    else {
        return json_schema!({"type": "object"});
    };
    engram["required"] = json!(["kind", "claim", "pointers"]);
    let notes = [
        (
            "id",
            "Left out: derived from kind, claim and pointers (`eg_` and 16 hex digits of their blake3), so the same \
             claim about the same sources has the same id. Given: kept, and must not name another claim.",
        ),
        ("kind", "What the claim is."),
        ("claim", "The claim itself, at most 500 characters: a finding, not pasted content."),
        (
            "pointers",
            "1 to 12 sources the claim rests on, each as text (`repo:src/lib.rs#L10-L20`) or as an object; cite the \
             narrowest span.",
        ),
        ("confidence", "How sure the claim is, 0 to 1."),
        ("ttl", "How long it stays in normal recall: an ISO-8601 duration (PT6H, P7D, P1Y)."),
        (
            "scope",
            "Who may read it: run, project (the caller's project), org or global (org and global are promotions \
             only a parent may make).",
        ),
        ("tags", "Labels; `subject:<key>` makes a newer fact on the same subject supersede the older one."),
        ("hash_keys", "Recall keys; derived from the content when left out."),
        (
            "provenance",
            "Who made it, when, from what. Left out, or any of its fields: created_at now, created_by the caller, \
             source agent.",
        ),
    ];
    let properties = &mut engram["properties"];
    for (name, note) in notes {
        properties[name]["description"] = json!(note);
    }
    properties["confidence"]["default"] = json!(DEFAULT_CONFIDENCE);
    properties["ttl"]["default"] = json!(DEFAULT_TTL);
    properties["scope"]["default"] = json!(DEFAULT_SCOPE.as_str());
    properties["pointers"]["items"] = json!({"anyOf": [
        {
            "type": "string",
            "description": "A pointer's text form: repo:src/lib.rs#L10-L20, artifact:PLAN.md#sec=Steps, \
                            diff:a..b#src/lib.rs, test:suite::name, sam:msg:<id>, url:https://…",
        },
        pointer,
    ]});
    if let Some(provenance) = properties["provenance"].as_object_mut() {
        provenance.remove("required");
    }
    Schema::try_from(engram).unwrap_or_else(|_| json_schema!({"type": "object"}))
}

/// The schema of `less_validate`'s `document`: any object (what is wrong with it is the answer).
fn document_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

/// The schema of `less_compact`'s `messages`.
fn messages_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["role", "content"],
            "properties": {
                "role": {"type": "string", "enum": less_runtime::context::ROLES},
                "content": {"type": "string", "description": "The message's text."},
            },
        },
    })
}

/// Restricts an optional string argument to `names` (null, too, where the schema admits it).
fn one_of(schema: &mut Schema, names: impl IntoIterator<Item = Value>) {
    let mut names: Vec<Value> = names.into_iter().collect();
    if schema.get("type").and_then(Value::as_array).is_some_and(|types| types.contains(&json!("null"))) {
        names.push(Value::Null);
    }
    schema.insert("enum".to_owned(), Value::Array(names));
}

/// The names of a property's `enum` in the contract's engram schema.
fn engram_enum(property: &str) -> Vec<Value> {
    schema_document("engram.v0.1.json")
        .and_then(|doc| doc["properties"][property]["enum"].as_array().cloned())
        .unwrap_or_default()
}

fn engram_kinds(schema: &mut Schema) {
    one_of(schema, engram_enum("kind"));
}

fn engram_scopes(schema: &mut Schema) {
    one_of(schema, engram_enum("scope"));
}

fn doc_kinds(schema: &mut Schema) {
    one_of(schema, DocKind::ALL.iter().map(|kind| json!(kind.as_str())));
}

fn gate_statuses(schema: &mut Schema) {
    one_of(schema, [json!("pass"), json!("fail")]);
}

fn symbols_out(pairs: Vec<(String, String)>) -> SymbolsOut {
    SymbolsOut { symbols: pairs.into_iter().map(|(id, value)| serde_json::json!({"id": id, "value": value})).collect() }
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, Violation> {
    serde_json::to_value(value)
        .map_err(|err| Violation::new(ErrorCode::RunFailed, "", format!("an answer has no JSON form: {err}")))
}

#[tool_router(router = tool_router)]
impl LessServer {
    /// Validates a LESS document: schema, then semantic rules; every problem with its code and path.
    #[tool(description = "Validate a LESS document (engram, pointer, brief, grant, deref request, typed message, \
                          budget, scenario) against its JSON Schema and semantic rules; every problem has a stable \
                          code and an RFC 6901 path.")]
    async fn less_validate(
        &self,
        Parameters(args): Parameters<ValidateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<ValidateOut>>, String> {
        let who = caller(&self.desk, None, &ctx);
        self.call(who, "less_validate", self.tokens_in(&args), move |desk, _| {
            let (kind, violations) = desk.validate(&args.document, args.kind.as_deref())?;
            let violations: Vec<Problem> = violations
                .into_iter()
                .map(|v| Problem { code: v.code.to_string(), path: v.path, message: v.message })
                .collect();
            Ok((ValidateOut { kind: kind.to_string(), valid: violations.is_empty(), violations }, None))
        })
        .await
    }

    /// Validates and stores an engram in the caller's project.
    #[tool(description = "Validate and store an engram (v0.1: a claim of at most 500 characters anchored to 1 to \
                          12 pointers, as text or objects) in the caller's project. Leave out id and provenance: \
                          the id is derived from kind, claim and pointers, the provenance records the caller and \
                          now; confidence, ttl and scope have defaults. Returns its id and outcome (stored, \
                          duplicate, revived, superseded, risk).")]
    async fn less_put_engram(
        &self,
        Parameters(args): Parameters<PutArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<PutOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_put_engram", self.tokens_in(&args), move |desk, who| {
            let put = desk.put_engram(who, &args.engram)?;
            Ok((
                PutOut {
                    id: put.id,
                    outcome: put.outcome,
                    superseded: put.superseded,
                    contradictions: put.contradictions,
                },
                None,
            ))
        })
        .await
    }

    /// Two-stage recall of engrams in the caller's project.
    #[tool(description = "Recall engrams of the caller's project: hash-key recall, reranked by local embeddings \
                          when the model is installed; best first.")]
    async fn less_query_engrams(
        &self,
        Parameters(args): Parameters<QueryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<QueryOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_query_engrams", self.tokens_in(&args), move |desk, who| {
            let scope = args
                .scope
                .map(|name| {
                    serde_json::from_value::<Scope>(Value::String(name.clone())).map_err(|_| {
                        Violation::new(
                            ErrorCode::ArgumentInvalid,
                            "/scope",
                            format!("no scope {name}; use run, project, org or global"),
                        )
                    })
                })
                .transpose()?;
            let found = desk.query(who, &args.query, args.k, args.kind.as_deref(), scope)?;
            let engrams = found.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            Ok((QueryOut { engrams }, None))
        })
        .await
    }

    /// Resolves pointers under the caller's per-turn budget, or under a grant.
    #[tool(description = "Dereference 1 to 12 pointers (repo:path#Lx-Ly, artifact:doc#heading, diff:…, test:…) \
                          within the caller's deref budget for this turn, or under a grant its parent issued; returns \
                          each pointer's content, blake3 digest and tokens. Over budget without a grant: \
                          LESS_DEREF_DENIED naming the limit (ask with less_request_deref); more than 12 pointers: \
                          LESS_ARGUMENT_INVALID (split the call, or name one wider span). A turn sees each source as \
                          it first read it: content that changed since is LESS_DIGEST_MISMATCH until less_checkpoint \
                          ends the turn; read again in a later turn, the item's changed_from names the digest read \
                          before.")]
    async fn less_deref(
        &self,
        Parameters(args): Parameters<DerefArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<DerefOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_deref", self.tokens_in(&args), move |desk, who| {
            // The core's refusal names the budget; over MCP the way to more is a tool of its own.
            let (items, baseline) = desk.deref(who, &args.pointers, args.grant_id.as_deref()).map_err(|mut v| {
                if v.code == ErrorCode::DerefDenied {
                    v.message.push_str(": ask your parent with less_request_deref, or present a grant it issued");
                }
                v
            })?;
            let items = items
                .into_iter()
                .map(|i| Item {
                    pointer: i.pointer,
                    content: i.content,
                    digest: i.digest,
                    tokens: i.tokens,
                    changed_from: i.changed_from,
                })
                .collect();
            Ok((DerefOut { items }, Some(baseline)))
        })
        .await
    }

    /// Searches the workspace index.
    #[tool(description = "Search the workspace for code and documents: answers with pointers and one-line previews \
                          (signatures, headings), best first, never the content; read a hit with less_deref. \
                          Metered like a message: an answer over the caller's max_inline_tokens is refused with \
                          LESS_BUDGET_EXCEEDED naming the k that fits.")]
    async fn less_search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<SearchOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_search", self.tokens_in(&args), move |desk, who| {
            let found = desk.search(who, &args.query, args.k.unwrap_or(5))?;
            let hits = found
                .hits
                .into_iter()
                .map(|h| SearchHit {
                    pointer: h.pointer,
                    preview: h.preview,
                    kind: h.kind.as_str().to_owned(),
                    symbols: h.symbols,
                    tokens: h.tokens,
                })
                .collect();
            Ok((SearchOut { hits, tokens: found.tokens, stages: found.stages }, Some(found.baseline)))
        })
        .await
    }

    /// Files a deref request with the caller's parent.
    #[tool(description = "Ask the caller's parent for a dereference over the caller's budget; the parent sees it \
                          at its next less_checkpoint and answers with less_issue_grant.")]
    async fn less_request_deref(
        &self,
        Parameters(args): Parameters<RequestArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<RequestOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_request_deref", self.tokens_in(&args), move |desk, who| {
            let request_id = desk.request_deref(who, &args.pointers, &args.reason)?;
            Ok((RequestOut { request_id }, None))
        })
        .await
    }

    /// Issues a grant to a descendant (parents only).
    #[tool(description = "Issue a grant to a client below the caller: the pointers or patterns it covers, its uses \
                          (1 or more), lifetime (PT1S or longer) and tokens, and the pending request it answers, if \
                          any. Only an ancestor grants (else LESS_GRANT_INVALID); uses 0, a ttl under a second or \
                          answers naming no pending request of the grantee: LESS_ARGUMENT_INVALID.")]
    async fn less_issue_grant(
        &self,
        Parameters(args): Parameters<GrantArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<GrantOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_issue_grant", self.tokens_in(&args), move |desk, who| {
            let order = NewGrant {
                to: args.to,
                patterns: args.pointers,
                uses: args.uses,
                ttl: args.ttl,
                max_tokens: args.max_tokens,
                answers: args.answers,
            };
            let grant = desk.issue_grant(who, &order)?;
            Ok((GrantOut { grant_id: grant.terms.grant_id.clone(), terms: to_json(&grant.terms)? }, None))
        })
        .await
    }

    /// Ends the caller's turn and lists what waits for it.
    #[tool(description = "End the caller's turn (its deref budget starts again, and sources that changed since it \
                          read them can be read again) and list the deref requests its children filed and the grants \
                          it holds.")]
    async fn less_checkpoint(
        &self,
        Parameters(args): Parameters<IdentityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<CheckpointOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_checkpoint", self.tokens_in(&args), move |desk, who| {
            let (requests, grants) = desk.checkpoint(who)?;
            let requests = requests.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            let grants = grants.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            Ok((CheckpointOut { requests, grants }, None))
        })
        .await
    }

    /// One level of the lossless memory below a node or message.
    #[tool(description = "Expand a node of the lossless memory (epoch → arcs, arc → sessions, session → its raw \
                          messages) or show a raw message, in the caller's project; secrets and IP addresses in the \
                          text are redacted (credential_ref:…, [REDACTED_IP]), as in every answer that shows archived \
                          text.")]
    async fn less_expand(
        &self,
        Parameters(args): Parameters<ExpandArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<DagOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_expand", self.tokens_in(&args), move |desk, who| {
            Ok((DagOut { result: desk.expand(who, &args.id)? }, None))
        })
        .await
    }

    /// Answers a question from the raw messages, citing them.
    #[tool(description = "Answer a question from the raw messages of the caller's project within a token budget, \
                          citing each message and the summary nodes above it (secrets redacted).")]
    async fn less_expand_query(
        &self,
        Parameters(args): Parameters<ExpandQueryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<DagOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_expand_query", self.tokens_in(&args), move |desk, who| {
            Ok((DagOut { result: desk.expand_query(who, &args.question, args.max_tokens)? }, None))
        })
        .await
    }

    /// What depends on a source.
    #[tool(description = "List what depends on a source pointer in the caller's project, layer by layer: engrams \
                          citing it (will_break), summaries over them (likely_affected), tests nearby \
                          (may_need_testing).")]
    async fn less_impact(
        &self,
        Parameters(args): Parameters<ImpactArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<DagOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_impact", self.tokens_in(&args), move |desk, who| {
            Ok((DagOut { result: desk.impact(who, &args.pointer, args.min_confidence)? }, None))
        })
        .await
    }

    /// Sets a symbol of the caller's project.
    #[tool(description = "Set a symbol: a short id (F12) for a recurring artifact (a path, a criterion, an \
                          invariant), in the caller's project.")]
    async fn less_symbol_set(
        &self,
        Parameters(args): Parameters<SymbolSetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<SymbolsOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_symbol_set", self.tokens_in(&args), move |desk, who| {
            desk.symbol_set(who, &args.id, &args.value)?;
            Ok((symbols_out(vec![(args.id, args.value)]), None))
        })
        .await
    }

    /// Resolves a symbol, or a value back to its symbols.
    #[tool(description = "Resolve a symbol id to its value, or (with `value`) a value back to its ids.")]
    async fn less_symbol_resolve(
        &self,
        Parameters(args): Parameters<SymbolResolveArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<SymbolsOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_symbol_resolve", self.tokens_in(&args), move |desk, who| {
            let found = match (&args.id, &args.value) {
                (Some(id), None) => desk.symbol_resolve(who, id, false)?,
                (None, Some(value)) => desk.symbol_resolve(who, value, true)?,
                _ => return Err(Violation::new(ErrorCode::ArgumentInvalid, "", "give `id` or `value`, one of them")),
            };
            Ok((symbols_out(found), None))
        })
        .await
    }

    /// The symbol table.
    #[tool(description = "List the caller's project's symbol table.")]
    async fn less_symbol_list(
        &self,
        Parameters(args): Parameters<IdentityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<SymbolsOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_symbol_list", self.tokens_in(&args), move |desk, who| {
            Ok((symbols_out(desk.symbol_list(who)?), None))
        })
        .await
    }

    /// Fills the symbol table from the workspace index.
    #[tool(description = "Fill the caller's project's symbol table from the workspace index: every indexed file \
                          under `pattern` (a path, a directory or a glob; empty: all, at most 500) within the caller's \
                          reach gets a short id F<n> for its path, so that briefs and capsules can name it in a few \
                          tokens; a file that has an id keeps it.")]
    async fn less_symbol_fill(
        &self,
        Parameters(args): Parameters<SymbolFillArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<SymbolFillOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_symbol_fill", self.tokens_in(&args), move |desk, who| {
            let fill = desk.symbol_fill(who, args.pattern.as_deref().unwrap_or_default())?;
            let added_count = fill.added.len();
            let added = symbols_out(fill.added.into_iter().take(50).collect()).symbols;
            Ok((SymbolFillOut { added, added_count, kept: fill.kept }, None))
        })
        .await
    }

    /// Writes a context capsule.
    #[tool(description = "Write a context capsule of finished work: what, where, decision, gotcha, depends; at most \
                          10 lines of at most 200 characters, 2,000 characters in all and 8 dependencies (refused \
                          above: compact it); its dependencies must exist.")]
    async fn less_capsule_write(
        &self,
        Parameters(args): Parameters<CapsuleArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<CapsulesOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_capsule_write", self.tokens_in(&args), move |desk, who| {
            let capsule = NewCapsule {
                id: args.id,
                what: args.what,
                location: args.location,
                decision: args.decision,
                gotcha: args.gotcha,
                depends: args.depends,
            };
            let written = desk.capsule_write(who, &capsule)?;
            Ok((CapsulesOut { capsules: vec![to_json(&written)?] }, None))
        })
        .await
    }

    /// Hydrates capsules: their dependency closure, nothing else.
    #[tool(description = "Hydrate capsules: the referenced ones and their transitive dependencies, dependencies \
                          first, and nothing else.")]
    async fn less_capsule_hydrate(
        &self,
        Parameters(args): Parameters<HydrateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<CapsulesOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_capsule_hydrate", self.tokens_in(&args), move |desk, who| {
            let capsules = desk.capsule_hydrate(who, &args.ids)?.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            Ok((CapsulesOut { capsules }, None))
        })
        .await
    }

    /// Sets a shared fact.
    #[tool(description = "Set a shared fact on the project's blackboard (dev_port = 5173); a new value supersedes \
                          the old one, which is kept and linked.")]
    async fn less_blackboard_set(
        &self,
        Parameters(args): Parameters<BoardSetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<BoardOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_blackboard_set", self.tokens_in(&args), move |desk, who| {
            let entry = desk.blackboard_set(who, &args.key, &args.value)?;
            Ok((BoardOut { entries: vec![to_json(&entry)?] }, None))
        })
        .await
    }

    /// Reads a shared fact.
    #[tool(description = "Read a shared fact from the project's blackboard by key.")]
    async fn less_blackboard_get(
        &self,
        Parameters(args): Parameters<BoardGetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<BoardOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_blackboard_get", self.tokens_in(&args), move |desk, who| {
            Ok((BoardOut { entries: vec![to_json(&desk.blackboard_get(who, &args.key)?)?] }, None))
        })
        .await
    }

    /// Lists the shared facts.
    #[tool(description = "List the project's blackboard: every key's current value.")]
    async fn less_blackboard_list(
        &self,
        Parameters(args): Parameters<IdentityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<BoardOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_blackboard_list", self.tokens_in(&args), move |desk, who| {
            let entries = desk.blackboard_list(who)?.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            Ok((BoardOut { entries }, None))
        })
        .await
    }

    /// The gate adapter.
    #[tool(description = "Turn a gate's report file (in the workspace) into a gate_report message for the caller's \
                          parent that carries only report_ref (the file, with its digest), never the report's text; \
                          the status is read from the report (cargo, pytest, JUnit, `status: pass|fail`) unless given. \
                          The report must be within the caller's reach (else LESS_DEREF_DENIED, as for a deref); it \
                          is not metered against the deref budget, since its text never reaches the caller.")]
    async fn less_gate_report(
        &self,
        Parameters(args): Parameters<GateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<GateOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_gate_report", self.tokens_in(&args), move |desk, who| {
            let status = match args.status.as_deref() {
                None => None,
                Some("pass") => Some(GateStatus::Pass),
                Some("fail") => Some(GateStatus::Fail),
                Some(other) => {
                    return Err(Violation::new(
                        ErrorCode::ArgumentInvalid,
                        "/status",
                        format!("{other}: say pass or fail"),
                    ));
                }
            };
            let (message, tokens, report_tokens) = desk.gate_report(who, &args.gate_id, &args.report, status)?;
            Ok((GateOut { message: to_json(&*message)?, tokens, report_tokens }, Some(report_tokens)))
        })
        .await
    }

    /// The context ledger of a conversation.
    #[tool(description = "Compact a long chat into the context ledger (facts, decisions, obligations, questions; \
                          secrets redacted) plus the verbatim hot tail, as `lessrt compact` does.")]
    async fn less_compact(
        &self,
        Parameters(args): Parameters<CompactArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<CompactOut>>, String> {
        let who = caller(&self.desk, None, &ctx);
        self.call(who, "less_compact", self.tokens_in(&args), move |desk, _| {
            let mut report = desk.compact(&args.messages, args.hot_tail)?;
            let mut take = |key: &str| report.get_mut(key).map(Value::take).unwrap_or(Value::Null);
            Ok((
                CompactOut {
                    messages: take("messages"),
                    stats: take("stats"),
                    warning: take("warning"),
                    note: take("note"),
                },
                None,
            ))
        })
        .await
    }

    /// Tokens per client and tool, measured against the baseline.
    #[tool(description = "Tokens per client (role) and tool from the desk's ledger: calls, refusals, tokens in and \
                          out, and the baseline (a deref's whole files) with the delta.")]
    async fn less_ledger_report(
        &self,
        Parameters(args): Parameters<LedgerArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<LedgerOut>>, String> {
        let who = caller(&self.desk, None, &ctx);
        self.call(who, "less_ledger_report", self.tokens_in(&args), move |desk, _| {
            let rows = desk.ledger_report(args.role.as_deref())?;
            let tokens_out = rows.iter().map(|r| r.tokens_out).sum();
            let baseline_tokens = rows.iter().map(|r| r.baseline_tokens).sum();
            let rows = rows.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            Ok((LedgerOut { rows, tokens_out, baseline_tokens }, None))
        })
        .await
    }

    /// Claims surfaces before changing them.
    #[tool(description = "Claim the surfaces (workspace paths or globs) you are about to change, for a task, for a \
                          while (ttl_minutes, default 30). A claim that overlaps another client's live claim is \
                          refused with LESS_CLAIM_CONFLICT naming the holder, its task and when it expires; with \
                          `override` and your reason, the other claim ends and a conflict record naming both intents \
                          goes to the decision log. Release the claim when done.")]
    async fn less_claim(
        &self,
        Parameters(args): Parameters<ClaimArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<ClaimOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_claim", self.tokens_in(&args), move |desk, who| {
            let new = less_runtime::desk::NewClaim {
                surfaces: args.surfaces,
                task: args.task,
                ttl_secs: ttl_secs(args.ttl_minutes)?,
                override_reason: args.override_reason,
            };
            let claimed = desk.claim(who, &new)?;
            let conflicts = claimed.conflicts.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            Ok((ClaimOut { claim: to_json(&claimed.claim)?, conflicts }, None))
        })
        .await
    }

    /// Releases a claim.
    #[tool(description = "Release a live claim you hold (its surfaces are free for others).")]
    async fn less_release_claim(
        &self,
        Parameters(args): Parameters<ClaimIdArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<OneClaimOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_release_claim", self.tokens_in(&args), move |desk, who| {
            Ok((OneClaimOut { claim: to_json(&desk.release_claim(who, &args.claim_id)?)? }, None))
        })
        .await
    }

    /// Renews a claim.
    #[tool(description = "Renew a live claim you hold: it holds ttl_minutes (default 30) from now.")]
    async fn less_renew_claim(
        &self,
        Parameters(args): Parameters<ClaimIdArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<OneClaimOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_renew_claim", self.tokens_in(&args), move |desk, who| {
            let claim = desk.renew_claim(who, &args.claim_id, ttl_secs(args.ttl_minutes)?)?;
            Ok((OneClaimOut { claim: to_json(&claim)? }, None))
        })
        .await
    }

    /// Lists the live claims.
    #[tool(description = "List the project's live claims (every client's): who holds which surfaces, for what, \
                          until when. Look before you claim.")]
    async fn less_claims(
        &self,
        Parameters(args): Parameters<IdentityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<ClaimsOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_claims", self.tokens_in(&args), move |desk, who| {
            let claims = desk.claims(who)?.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
            Ok((ClaimsOut { claims }, None))
        })
        .await
    }

    /// Appends a decision.
    #[tool(description = "Append a decision to the project's decision log (append-only, attributed to you): a \
                          one-line title and a body saying why and what follows.")]
    async fn less_decide(
        &self,
        Parameters(args): Parameters<DecideArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<DecisionOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_decide", self.tokens_in(&args), move |desk, who| {
            let (decision, engram_id) = desk.decide(who, &args.title, &args.body)?;
            Ok((DecisionOut { decision: to_json(&decision)?, engram_id }, None))
        })
        .await
    }

    /// Reads the decision log.
    #[tool(description = "Read the project's decision log, oldest first (entries after `after`, at most `limit`), \
                          with its conflict records; `markdown: true` also gives the whole log as Markdown.")]
    async fn less_decisions(
        &self,
        Parameters(args): Parameters<DecisionsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Attributed<DecisionsOut>>, String> {
        let who = caller(&self.desk, args.client_identity.as_deref(), &ctx);
        self.call(who, "less_decisions", self.tokens_in(&args), move |desk, who| {
            let limit = args.limit.unwrap_or(50);
            if !(1..=MAX_DECISIONS).contains(&limit) {
                let why = format!("limit is {limit}; ask for 1 to {MAX_DECISIONS} entries and page with `after`");
                return Err(Violation::new(ErrorCode::ArgumentInvalid, "/limit", why));
            }
            let (log, conflicts) = desk.decisions(who, args.after.unwrap_or(0), limit)?;
            let markdown = if args.markdown { Some(desk.decisions_markdown(&who.project)?) } else { None };
            Ok((
                DecisionsOut {
                    decisions: log.iter().map(to_json).collect::<Result<Vec<_>, _>>()?,
                    conflicts: conflicts.iter().map(to_json).collect::<Result<Vec<_>, _>>()?,
                    markdown,
                },
                None,
            ))
        })
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for LessServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("lessrt", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "LESS: share small typed engrams anchored to pointers instead of pasting context. Recall with \
             less_query_engrams, read sources with less_deref (metered per turn; a turn ends at less_checkpoint), \
             ask your parent with less_request_deref when the budget is not enough. Before changing files, claim \
             them with less_claim (see less_claims) and release the claim when done; record decisions with less_decide."
                .to_owned(),
        );
        info
    }
}
