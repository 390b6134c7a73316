//! The HTTP side of `lessrt serve`: the page and its assets (embedded in the binary), the JSON API under `/api/`, and
//! the live stream (server-sent events tailing the run's `ledger.jsonl`).
//!
//! Every answer goes through [`redacted`] (the runtime's rule: the context ledger's redaction, the one the DAG and its answers use), so
//! no secret in a workspace file, a claim or an archived message reaches the page; grants are shown without their
//! MAC. Bad input is a 4xx whose JSON body is `{code, message}`: the LESS code and what to send instead.
//! Nothing here writes: run directories are read, the archive is opened only to read and the message index without
//! the embedding model (so a query never embeds into the store).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use less_runtime::dag::{Archive, Dag, index_dir};
use less_runtime::memory::Memory;
use less_runtime::run::RunReport;
use less_runtime::{ErrorCode, Violation};
use serde::Deserialize;
use serde_json::{Value, json};

use less_runtime::run::WIRE_FILE;

use less_runtime::view::{leads_outside, redacted, resolve_pointer};

use super::dirs::{self, LEDGER_FILE, Loaded, REPORT_FILE, RunDir};
use super::manifest::{MANIFEST_FILE, Manifest};
use super::view;

/// What the server serves: a root directory of runs, and where their stores and scenarios are when not beside them.
#[derive(Debug)]
pub(crate) struct Served {
    /// The directory given: a mode's, a scenario's, or an output directory of scenarios.
    pub(crate) root: PathBuf,
    /// `--store`: the store to show instead of each run's `memory/`.
    pub(crate) store: Option<PathBuf>,
    /// `--scenario`: the manifest of runs whose directory has none.
    pub(crate) scenario: Option<Manifest>,
    /// How often the live stream looks at the ledger.
    pub(crate) poll: Duration,
    /// Answer requests for any host name (`--allow-remote`); else only for loopback names, so a web page whose
    /// name was rebound to 127.0.0.1 cannot read the workspace through the browser.
    pub(crate) any_host: bool,
    /// The ledgers read so far, parsed.
    pub(crate) events: dirs::EventCache,
}

/// The page, its script and its style, compiled in: the page works offline and needs nothing beside the binary.
const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// Who may call the API: the page this server served, which holds the server's token in a cookie.
///
/// A web page the user visits can make the browser send requests to a loopback server (`<img src=…>`, a form, a
/// `fetch` in `no-cors` mode): it cannot read the answers, but the server still does the work. So the API answers
/// only requests that carry the token, and refuses any request the browser marks as coming from another site.
/// The cookie is `SameSite=Strict` and `HttpOnly`: a browser sends it only with requests from this server's own
/// pages, and no script reads it. Its name carries the port, so two servers on one machine keep their own.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// The cookie's name: `lessrt-<port>`.
    cookie: String,
    /// 32 random bytes in hex, drawn when the server starts.
    token: String,
}

impl Access {
    /// A fresh token for the server listening on `port`.
    pub(crate) fn new(port: u16) -> anyhow::Result<Access> {
        let bytes = less_runtime::run::fresh_secret()
            .map_err(|v| anyhow::anyhow!("no random token for the page: {}: {}", v.code, v.message))?;
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Access { cookie: format!("lessrt-{port}"), token })
    }

    /// The `Set-Cookie` value the page is served with.
    fn set_cookie(&self) -> String {
        format!("{}={}; Path=/; HttpOnly; SameSite=Strict", self.cookie, self.token)
    }

    /// Whether the request's cookies carry this server's token.
    fn admits(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == self.cookie && same_bytes(value.as_bytes(), self.token.as_bytes()))
    }
}

/// Compares in time that depends on the lengths only.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The router.
pub(crate) fn router(served: Arc<Served>, access: Access) -> axum::Router {
    let page = {
        let access = access.clone();
        move |State(served): State<Arc<Served>>, Params(param): Params<RunParam>| async move {
            let html = blocking(move || Ok(first_view(&served, param.run.as_deref())))
                .await
                .unwrap_or_else(|_| INDEX_HTML.replace(INITIAL_MARK, ""));
            let mut response = page_response(html);
            if let Ok(cookie) = HeaderValue::from_str(&access.set_cookie()) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            response
        }
    };
    axum::Router::new()
        .route("/", get(page))
        .route("/assets/app.js", get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }))
        .route("/assets/style.css", get(|| async { asset(STYLE_CSS, "text/css; charset=utf-8") }))
        .route("/api/runs", get(runs))
        .route("/api/run", get(run))
        .route("/api/events", get(events))
        .route("/api/timeline", get(timeline))
        .route("/api/engrams", get(engrams))
        .route("/api/briefs", get(briefs))
        .route("/api/deref", get(deref))
        .route("/api/compare", get(compare))
        .route("/api/wire", get(wire))
        .route("/api/dag", get(dag))
        .route("/api/dag/query", get(dag_query))
        .route("/api/claims", get(claims))
        .route("/api/stream", get(stream))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::ArgumentInvalid,
                "no such page; the API is under /api/ (see the table in docs/serve.md)",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::ArgumentInvalid,
                "the page only reads: every path takes GET",
            )
        })
        .layer(axum::middleware::from_fn_with_state(Arc::new(access), same_site))
        .layer(axum::middleware::from_fn_with_state(served.clone(), loopback_host))
        .with_state(served)
}

/// The paths served without the token: the page and its assets. The page holds the run's first view; whoever can
/// load it gets the token with it, so it needs none.
const PUBLIC_PATHS: [&str; 3] = ["/", "/assets/app.js", "/assets/style.css"];

/// Answers a request only from this server's own page: refuses what the browser says comes from another site or
/// origin (`Sec-Fetch-Site`, `Origin`), then anything without the server's token (see [`Access`]). The page and
/// its assets ([`PUBLIC_PATHS`]) are served to anyone who reaches the server, as before; every other path (the API,
/// and whatever a path spelled otherwise would route to) needs the token.
async fn same_site(
    State(access): State<Arc<Access>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if PUBLIC_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let refuse = |why: String| ApiError::new(StatusCode::FORBIDDEN, ErrorCode::ArgumentInvalid, why).into_response();
    // `same-site` too: another server on this machine (another port) is the same site but not this page.
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return refuse(format!(
            "a request from another site (Sec-Fetch-Site: {site}) is refused: the API answers the page this server \
             serves; open the page (/ on this server) and use it"
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok())
        && origin != format!("http://{host}")
    {
        return refuse(format!(
            "a request from another origin ({origin}) is refused: the API answers the page this server serves; \
             open the page (/ on this server) and use it"
        ));
    }
    if !access.admits(headers) {
        return refuse(format!(
            "no token of this server (cookie {}): the API answers the page it serves; open the page (/ on this \
             server; reload it if the server restarted), or GET / first and send its cookie back (curl -c jar -b jar)",
            access.cookie
        ));
    }
    next.run(request).await
}

/// Refuses a request whose `Host` is not a loopback name (unless `--allow-remote`): the server listens on loopback,
/// but a browser visiting a hostile site whose name now resolves to 127.0.0.1 would otherwise send it requests.
async fn loopback_host(
    State(served): State<Arc<Served>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if served.any_host {
        return next.run(request).await;
    }
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    if matches!(name.to_ascii_lowercase().as_str(), "127.0.0.1" | "localhost" | "::1") {
        return next.run(request).await;
    }
    ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::ArgumentInvalid,
        format!("host {host:?} is not this machine's loopback; open the page at http://127.0.0.1:<port>/"),
    )
    .into_response()
}

/// Where the page's first view goes in `index.html`: the run's state as JSON, which the script draws before the
/// live stream starts.
const INITIAL_MARK: &str = "<!--initial-state-->";
/// The run's title in `index.html`, filled in on the server.
const TITLE_MARK: &str = "<span id=\"run-title\" class=\"run-title\">loading…</span>";

/// The page with its first view in it: the title written in, and the run's state (what `/api/runs`, `/api/run`,
/// `/api/briefs`, `/api/engrams`, `/api/timeline` and `/api/compare` answer) inlined as JSON, so a browser draws
/// the run on its first paint, before any request of its own; the live stream then keeps it current. Without a run
/// (or when reading it fails) the page is served as it is and asks for itself.
fn first_view(served: &Served, id: Option<&str>) -> String {
    let state = (|| -> Result<(String, Value), ApiError> {
        let loaded = load(served, id)?;
        let all = view::EngramFilter::default();
        let state = json!({
            "runs": runs_json(served),
            "run": run_json(&loaded),
            "briefs": briefs_json(&loaded),
            "engrams": engrams_json(&loaded, &all),
            "timeline": timeline_json(&loaded, &EventsParam::default()),
            "compare": compare_json(&loaded.run)?,
        });
        Ok((format!("{} · {} mode", loaded.scenario(), loaded.mode()), state))
    })();
    let Ok((title, state)) = state else {
        return INDEX_HTML.replace(INITIAL_MARK, "").replace(TITLE_MARK, &TITLE_MARK.replace("loading…", "no run yet"));
    };
    // `<`, `>` and `&` escaped inside the JSON (where only strings hold them), so no text of the run ends the element.
    let json = redacted(state).to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    INDEX_HTML
        .replace(TITLE_MARK, &TITLE_MARK.replace("loading…", &html_text(&title)))
        .replace(INITIAL_MARK, &format!("<script id=\"initial-state\" type=\"application/json\">{json}</script>"))
}

/// `text` safe between HTML tags.
fn html_text(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The page's response: its HTML with the headers of every asset.
fn page_response(html: String) -> Response {
    let mut response = html.into_response();
    secure(&mut response, "text/html; charset=utf-8");
    response
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    secure(&mut response, content_type);
    response
}

/// The headers every page and asset is served with.
fn secure(response: &mut Response, content_type: &'static str) {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // The page loads only its own script and style, and talks only to this server.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'"),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
}

/// A refusal: the status, the LESS code and what to do instead.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    /// A violation of the runtime's (a pointer that does not parse or resolve, a digest that changed), its status
    /// read from its code.
    fn violation(v: Violation) -> ApiError {
        ApiError::violation_with(v, None)
    }

    /// [`ApiError::violation`], with `status` instead of the one its code says when the caller knows better.
    fn violation_with(v: Violation, status: Option<StatusCode>) -> ApiError {
        let status = status.unwrap_or(match v.code {
            ErrorCode::PointerUnresolved | ErrorCode::InputUnreadable => StatusCode::NOT_FOUND,
            ErrorCode::DigestMismatch => StatusCode::CONFLICT,
            ErrorCode::StoreFailed | ErrorCode::RunFailed => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        });
        ApiError::new(status, v.code, v.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "code": self.code.as_str(),
            "message": view::redact_text(&self.message),
            "instead": self.code.instruction(),
        });
        (self.status, Json(body)).into_response()
    }
}

type ApiResult = Result<Json<Value>, ApiError>;

/// Runs the work of a request on the blocking pool (files, SQLite, tantivy), never on the executor.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|err| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::RunFailed,
            format!("the request failed: {err}"),
        ))
    })
}

/// A request's query parameters; ones that do not parse are a 400 with `LESS_ARGUMENT_INVALID`, in JSON like every
/// other refusal.
struct Params<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> axum::extract::FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Params(value)),
            Err(rejection) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::ArgumentInvalid,
                format!("{}; the API table of docs/serve.md lists each endpoint's parameters", rejection.body_text()),
            )),
        }
    }
}

/// The `run` parameter every run-scoped endpoint takes.
#[derive(Debug, Deserialize)]
struct RunParam {
    run: Option<String>,
}

/// The run a request names (by id, from `/api/runs`), or the default one.
fn pick(served: &Served, id: Option<&str>) -> Result<RunDir, ApiError> {
    let runs = dirs::discover(&served.root);
    let found = match id.filter(|id| !id.is_empty()) {
        Some(id) => runs.iter().find(|r| r.id == id),
        None => dirs::default_run(&runs),
    };
    found.cloned().ok_or_else(|| {
        let known: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        let message = match id {
            Some(id) => format!("no run {id:?} here; the runs are {known:?} (GET /api/runs)"),
            None => format!(
                "{} holds no run yet: `lessrt run SCENARIO --out DIR` writes DIR/<scenario>/<mode>/",
                served.root.display()
            ),
        };
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::InputUnreadable, message)
    })
}

/// A run read now, with the `--scenario` manifest standing in for a missing one.
fn load(served: &Served, id: Option<&str>) -> Result<Loaded, ApiError> {
    let run = pick(served, id)?;
    let mut loaded = dirs::load(&run, &served.events);
    if loaded.manifest.is_none()
        && let Some(scenario) = &served.scenario
    {
        let mut manifest = scenario.clone();
        manifest.mode = loaded.mode();
        loaded.manifest = Some(manifest);
    }
    Ok(loaded)
}

/// `GET /api/runs`: every run under the served directory.
async fn runs(State(served): State<Arc<Served>>) -> ApiResult {
    blocking(move || Ok(Json(redacted(runs_json(&served))))).await
}

/// Every run under the served directory, and the one the page opens first.
fn runs_json(served: &Served) -> Value {
    let runs = dirs::discover(&served.root);
    let default = dirs::default_run(&runs).map(|r| r.id.clone());
    let list: Vec<Value> = runs
        .iter()
        .map(|r| {
            let manifest = Manifest::read(&r.dir);
            json!({
                "id": r.id,
                "scenario": manifest.as_ref().map(|m| m.scenario.clone()),
                "mode": manifest.as_ref().map_or_else(
                    || r.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                    |m| m.mode.clone()),
                "started_at": manifest.as_ref().map(|m| m.started_at.clone()),
                "finished": r.dir.join(REPORT_FILE).is_file(),
            })
        })
        .collect();
    json!({"root": served.root.display().to_string(), "default": default, "runs": list})
}

/// `GET /api/run`: the run's report, its checks and graded tasks, manifest, hierarchy with budget meters, and counts.
async fn run(State(served): State<Arc<Served>>, Params(param): Params<RunParam>) -> ApiResult {
    blocking(move || {
        let loaded = load(&served, param.run.as_deref())?;
        Ok(Json(redacted(run_json(&loaded))))
    })
    .await
}

/// What `/api/run` answers.
fn run_json(loaded: &Loaded) -> Value {
    let finished = loaded.report.is_some();
    let agents = view::hierarchy(loaded.manifest.as_ref(), &loaded.events, finished);
    let current = loaded.events.iter().rev().find_map(|e| match e {
        less_runtime::run::Event::Step { index, agent, action } => {
            Some(json!({"index": index, "agent": agent, "action": action}))
        }
        _ => None,
    });
    let manifest = loaded.manifest.as_ref().map(|m| {
        json!({"scenario": m.scenario, "description": m.description, "mode": m.mode, "started_at": m.started_at,
               "goal": m.goal, "tokenizer": m.tokenizer, "steps": m.steps,
               "workspace": m.workspace.is_some()})
    });
    json!({
        "id": loaded.run.id,
        "scenario": loaded.scenario(),
        "mode": loaded.mode(),
        "finished": finished,
        "incomplete": loaded.cut,
        "manifest": manifest,
        "current_step": current,
        "counts": view::counts(&loaded.events),
        "agents": agents,
        "outcome": loaded.report.as_ref().map(view::outcome),
        "wire": loaded.run.dir.join(WIRE_FILE).is_file(),
        "report": loaded.report,
    })
}

/// Parameters of `/api/events` and `/api/timeline`.
#[derive(Debug, Default, Deserialize)]
struct EventsParam {
    run: Option<String>,
    /// The first event to return (its line number in the ledger, from 0).
    from: Option<usize>,
    /// Only events of this name (`delivered`, `deref`, …).
    event: Option<String>,
    /// At most this many (after `from` and `event`); `total` still counts them all.
    limit: Option<usize>,
}

/// `GET /api/events`: the ledger's events as written (`ledger.jsonl`), each with its `seq`.
async fn events(State(served): State<Arc<Served>>, Params(param): Params<EventsParam>) -> ApiResult {
    blocking(move || {
        let loaded = load(&served, param.run.as_deref())?;
        let from = param.from.unwrap_or(0);
        let list: Vec<Value> = loaded
            .events
            .iter()
            .enumerate()
            .skip(from)
            .map(|(seq, e)| (seq, serde_json::to_value(e).unwrap_or(Value::Null)))
            .filter(|(_, v)| {
                param.event.as_deref().is_none_or(|want| v.get("event").and_then(Value::as_str) == Some(want))
            })
            .map(|(seq, mut v)| {
                if let Some(object) = v.as_object_mut() {
                    object.insert("seq".to_owned(), json!(seq));
                }
                v
            })
            .take(param.limit.unwrap_or(usize::MAX))
            .collect();
        Ok(Json(redacted(json!({"run": loaded.run.id, "total": loaded.events.len(), "events": list}))))
    })
    .await
}

/// `GET /api/timeline`: every event as the trace line `lessrt run` printed, with its pointers, its code, and for a
/// denied deref the grant that would have covered it.
async fn timeline(State(served): State<Arc<Served>>, Params(param): Params<EventsParam>) -> ApiResult {
    blocking(move || {
        let loaded = load(&served, param.run.as_deref())?;
        Ok(Json(redacted(timeline_json(&loaded, &param))))
    })
    .await
}

/// What `/api/timeline` answers.
fn timeline_json(loaded: &Loaded, param: &EventsParam) -> Value {
    let items: Vec<view::TimelineItem> = view::timeline(&loaded.events, loaded.manifest.as_ref())
        .into_iter()
        .skip(param.from.unwrap_or(0))
        .filter(|item| param.event.as_deref().is_none_or(|want| item.event == want))
        .take(param.limit.unwrap_or(usize::MAX))
        .collect();
    json!({"run": loaded.run.id, "total": loaded.events.len(), "items": items})
}

/// Parameters of `/api/engrams`.
#[derive(Debug, Deserialize)]
struct EngramsParam {
    run: Option<String>,
    kind: Option<String>,
    role: Option<String>,
    scope: Option<String>,
}

/// `GET /api/engrams`: every engram delivered, in delivery order, filtered by kind, role (the sender's) and scope.
async fn engrams(State(served): State<Arc<Served>>, Params(param): Params<EngramsParam>) -> ApiResult {
    blocking(move || {
        const KINDS: [&str; 8] = ["fact", "decision", "risk", "todo", "test", "diff", "contract", "summary"];
        if let Some(kind) = param.kind.as_deref().filter(|k| !k.is_empty() && !KINDS.contains(k)) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::ArgumentInvalid,
                format!("kind {kind:?} is not an engram kind; use one of {}", KINDS.join(", ")),
            ));
        }
        if let Some(scope) =
            param.scope.as_deref().filter(|s| !s.is_empty() && !["run", "project", "org", "global"].contains(s))
        {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::ArgumentInvalid,
                format!("scope {scope:?} is not a scope; use run, project, org or global"),
            ));
        }
        let loaded = load(&served, param.run.as_deref())?;
        let filter = view::EngramFilter { kind: param.kind, role: param.role, scope: param.scope };
        Ok(Json(redacted(engrams_json(&loaded, &filter))))
    })
    .await
}

/// What `/api/engrams` answers.
fn engrams_json(loaded: &Loaded, filter: &view::EngramFilter) -> Value {
    let list = view::engrams(&loaded.events, loaded.manifest.as_ref(), filter);
    let all = view::engrams(&loaded.events, loaded.manifest.as_ref(), &view::EngramFilter::default());
    let facet = |f: fn(&view::EngramView) -> &str| {
        let mut values: Vec<&str> = all.iter().map(f).collect();
        values.sort_unstable();
        values.dedup();
        values.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    json!({
        "run": loaded.run.id,
        "engrams": list,
        "facets": {"kind": facet(|e| &e.kind), "role": facet(|e| &e.role), "scope": facet(|e| &e.scope)},
    })
}

/// `GET /api/briefs`: the SharedBriefMicro each agent received, in delivery order, and the grants delivered.
async fn briefs(State(served): State<Arc<Served>>, Params(param): Params<RunParam>) -> ApiResult {
    blocking(move || {
        let loaded = load(&served, param.run.as_deref())?;
        Ok(Json(redacted(briefs_json(&loaded))))
    })
    .await
}

/// What `/api/briefs` answers.
fn briefs_json(loaded: &Loaded) -> Value {
    let briefs = view::briefs(&loaded.events);
    let grants: Vec<Value> = loaded
        .events
        .iter()
        .enumerate()
        .filter_map(|(seq, e)| match e {
            less_runtime::run::Event::Delivered {
                from,
                to,
                msg_id,
                kind: less_runtime::run::EnvelopeKind::Grant,
                doc,
                ..
            } => Some(json!({"seq": seq, "msg_id": msg_id, "from": from, "to": to, "grant": doc.to_value()})),
            _ => None,
        })
        .collect();
    json!({"run": loaded.run.id, "briefs": briefs, "grants": grants})
}

/// Parameters of `/api/wire`.
#[derive(Debug, Deserialize)]
struct WireParam {
    run: Option<String>,
    /// A delivered message's id: its text. Without it, the messages whose text the run kept.
    msg: Option<String>,
}

/// `GET /api/wire`: what a baseline run actually sent (`wire.jsonl`, written by the run): with `msg`, that
/// message's wire text; without, every message the file holds (without their text).
async fn wire(State(served): State<Arc<Served>>, Params(param): Params<WireParam>) -> ApiResult {
    blocking(move || {
        let run = pick(&served, param.run.as_deref())?;
        let sent = dirs::wire_texts(&run.dir).ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::InputUnreadable,
                format!(
                    "run {} kept no wire text: a LESS run sends its documents as they are (GET /api/events); a \
                     baseline run writes {WIRE_FILE}",
                    run.id
                ),
            )
        })?;
        let Some(msg) = param.msg.filter(|m| !m.is_empty()) else {
            let messages: Vec<Value> = sent
                .iter()
                .map(|s| json!({"msg_id": s.msg_id, "from": s.from, "to": s.to, "kind": s.kind, "tokens": s.tokens}))
                .collect();
            return Ok(Json(redacted(json!({"run": run.id, "messages": messages}))));
        };
        let Some(found) = sent.into_iter().find(|s| s.msg_id == msg) else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::ArgumentInvalid,
                format!("no wire text of message {msg:?} in run {}; GET /api/wire lists the messages", run.id),
            ));
        };
        let mut answer = serde_json::to_value(found).unwrap_or(Value::Null);
        if let Some(object) = answer.as_object_mut() {
            object.insert("run".to_owned(), json!(run.id));
        }
        Ok(Json(redacted(answer)))
    })
    .await
}

/// Parameters of `/api/deref`.
#[derive(Debug, Deserialize)]
struct DerefParam {
    run: Option<String>,
    pointer: Option<String>,
    /// The digest the page saw beside the pointer: the answer says whether the content still has it.
    digest: Option<String>,
}

/// `GET /api/deref?pointer=…`: the pointer resolved in the run's workspace.
async fn deref(State(served): State<Arc<Served>>, Params(param): Params<DerefParam>) -> ApiResult {
    blocking(move || {
        let Some(pointer) = param.pointer.filter(|p| !p.trim().is_empty()) else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::PointerInvalid,
                "no pointer: pass ?pointer=<type>:<ref>[#<span>], e.g. repo:src/lib.rs#L10-L20",
            ));
        };
        let loaded = load(&served, param.run.as_deref())?;
        let Some(manifest) = loaded.manifest.as_ref() else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::InputUnreadable,
                format!(
                    "{} has no {MANIFEST_FILE}, so its workspace is unknown; serve it with --scenario FILE (the scenario \
                     it ran)",
                    loaded.run.dir.display()
                ),
            ));
        };
        let Some(workspace) = manifest.workspace.as_deref() else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::InputUnreadable,
                "the run's manifest names no workspace; serve it with --scenario FILE",
            ));
        };
        let tokenizer = loaded.report.as_ref().map_or(manifest.tokenizer.as_str(), |r| r.tokenizer.as_str());
        let answer = resolve_pointer(workspace, &loaded.events, &pointer, param.digest.as_deref(), tokenizer)
            .map_err(|v| {
                // A pointer that leads out of the workspace is a forbidden read, not a missing file.
                let forbidden = v.code == ErrorCode::PointerUnresolved && leads_outside(workspace, &pointer);
                let status = if forbidden { Some(StatusCode::FORBIDDEN) } else { None };
                ApiError::violation_with(v, status)
            })?;
        Ok(Json(redacted(serde_json::to_value(answer).unwrap_or(Value::Null))))
    })
    .await
}

/// `GET /api/compare`: LESS against the baselines of the same scenario that finished, per role.
async fn compare(State(served): State<Arc<Served>>, Params(param): Params<RunParam>) -> ApiResult {
    blocking(move || {
        let run = pick(&served, param.run.as_deref())?;
        Ok(Json(redacted(compare_json(&run)?)))
    })
    .await
}

/// What `/api/compare` answers for `run`: LESS against each baseline beside it that finished.
fn compare_json(run: &RunDir) -> Result<Value, ApiError> {
    let Some(scenario_dir) = run.dir.parent() else {
        return Ok(json!({"comparisons": []}));
    };
    let report = |mode: &str| -> Option<RunReport> {
        let text = std::fs::read_to_string(scenario_dir.join(mode).join(REPORT_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    };
    let Some(less) = report("less") else {
        return Ok(json!({"comparisons": [], "note": "no finished LESS run beside this one"}));
    };
    let comparisons: Vec<Value> = ["verbatim", "verbatim-whole"]
        .iter()
        .filter_map(|mode| report(mode))
        .map(|b| view::compare(&less, &b))
        .collect();
    Ok(json!({"scenario": less.scenario, "comparisons": comparisons}))
}

/// The store shown with a run: `--store`, else the run's own `memory/`.
fn store_of(served: &Served, run: &RunDir) -> Result<PathBuf, ApiError> {
    let dir = served.store.clone().unwrap_or_else(|| run.dir.join(less_runtime::RUN_STORE_DIR));
    if dir.join(less_runtime::MEMORY_DB).is_file() {
        Ok(dir)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::InputUnreadable,
            format!("no store in {}: the run wrote none yet; pass --store DIR to show another", dir.display()),
        ))
    }
}

/// The store's coordination ledger: every project's live claims, the latest decisions and how many conflict records
/// there are (a run's own store has none: claims are the desk's, `lessrt serve --store` shows a desk's store).
async fn claims(State(served): State<Arc<Served>>, Params(param): Params<RunParam>) -> ApiResult {
    blocking(move || {
        let run = pick(&served, param.run.as_deref())?;
        let dir = store_of(&served, &run)?;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let ledger = less_runtime::coord::read_store(&dir, now, 50).map_err(ApiError::violation)?;
        Ok(Json(redacted(json!(ledger))))
    })
    .await
}

/// Parameters of `/api/dag`.
#[derive(Debug, Deserialize)]
struct DagParam {
    run: Option<String>,
    /// A node id (`S-…`, `A-…`, `E-…`) or a message id (`m-…`): one level below it.
    node: Option<String>,
}

/// `GET /api/dag`: the archive's top nodes (epochs, arcs, sessions), or one node with its children (a session's are
/// its messages).
async fn dag(State(served): State<Arc<Served>>, Params(param): Params<DagParam>) -> ApiResult {
    blocking(move || {
        let run = pick(&served, param.run.as_deref())?;
        let dir = store_of(&served, &run)?;
        let archive = open_archive(&dir)?;
        let failed = |err: less_runtime::memory::StoreError| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::StoreFailed, err.to_string())
        };
        let Some(id) = param.node.filter(|n| !n.is_empty()) else {
            let stats = archive.stats().map_err(failed)?;
            let tops = archive.tops(None).map_err(failed)?;
            return Ok(Json(redacted(json!({"store": dir.display().to_string(), "archive": stats, "nodes": tops}))));
        };
        if let Some(node) = archive.node(&id).map_err(failed)? {
            let children: Vec<Value> = if node.kind == less_runtime::dag::NodeKind::Session {
                archive.node_messages(&id).map_err(failed)?.into_iter().map(|m| json!({"message": m})).collect()
            } else {
                archive.children(&id).map_err(failed)?.into_iter().map(|n| json!({"node": n})).collect()
            };
            let parent = archive.parent(&id).map_err(failed)?;
            return Ok(Json(redacted(json!({"node": node, "parent": parent, "children": children}))));
        }
        let message_id = id.strip_prefix("sam:msg:").unwrap_or(&id);
        if let Some(message) = archive.message(message_id).map_err(failed)? {
            let parent = archive.node_of_message(message_id).map_err(failed)?;
            return Ok(Json(redacted(json!({"message": message, "parent": parent, "children": []}))));
        }
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::ArgumentInvalid,
            format!("no node or message {id:?} in the archive; GET /api/dag lists the top nodes"),
        ))
    })
    .await
}

/// The archive of the store in `dir`, to read.
fn open_archive(dir: &Path) -> Result<Archive, ApiError> {
    if !dir.join(less_runtime::MEMORY_DB).is_file() {
        return Err(no_archive(dir));
    }
    Archive::open_read_only(dir).map_err(|err| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::StoreFailed,
            format!("cannot open the archive: {err}"),
        )
    })
}

fn no_archive(dir: &Path) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::ArgumentInvalid,
        format!("no archive in {}; a run's store is <run dir>/memory (or name one with --store)", dir.display()),
    )
}

/// Parameters of `/api/dag/query`.
#[derive(Debug, Deserialize)]
struct QueryParam {
    run: Option<String>,
    q: Option<String>,
    max_tokens: Option<u32>,
}

/// `GET /api/dag/query?q=…`: a bounded answer from the archived messages, citing them (`expand_query`).
async fn dag_query(State(served): State<Arc<Served>>, Params(param): Params<QueryParam>) -> ApiResult {
    blocking(move || {
        let Some(question) = param.q.filter(|q| !q.trim().is_empty()) else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::ArgumentInvalid,
                "no question: pass ?q=<words>",
            ));
        };
        let max_tokens = param.max_tokens.unwrap_or(400);
        if !(16..=8000).contains(&max_tokens) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::ArgumentInvalid,
                format!("max_tokens {max_tokens} is out of range; use 16 to 8000"),
            ));
        }
        let run = pick(&served, param.run.as_deref())?;
        let dir = store_of(&served, &run)?;
        let failed = |err: String| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::StoreFailed, err);
        if !dir.join(less_runtime::MEMORY_DB).is_file() {
            return Err(no_archive(&dir));
        }
        // Hash recall only (no model), in place: the index is read where it is, through read-only connections,
        // and what it lacks is caught up in memory. Nothing of the store is written or copied.
        let index_at = index_dir(&dir);
        if !index_at.join(less_runtime::MEMORY_DB).is_file() {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::ArgumentInvalid,
                format!("no message index in {}: the archive has no message yet", dir.display()),
            ));
        }
        let index = Memory::open_to_read(&index_at).map_err(|e| failed(e.to_string()))?;
        let mut dag = Dag::open_to_read(&dir, index).map_err(|e| failed(e.to_string()))?;
        let answer = dag.expand_query(&question, max_tokens, None).map_err(|e| failed(e.to_string()))?;
        Ok(Json(redacted(serde_json::to_value(answer).unwrap_or(Value::Null))))
    })
    .await
}

/// Parameters of `/api/stream`.
#[derive(Debug, Deserialize)]
struct StreamParam {
    run: Option<String>,
    /// Events already shown: the stream starts after them (a reconnecting browser says so in `Last-Event-ID`).
    from: Option<usize>,
}

/// `GET /api/stream`: the run live, as server-sent events: `ledger` (one per new ledger line: `{seq, event, text}`),
/// `report` (the mode finished), `reset` (a new run started in the directory: start again).
async fn stream(
    State(served): State<Arc<Served>>,
    Params(param): Params<StreamParam>,
    headers: HeaderMap,
) -> Result<Sse<impl futures_util::Stream<Item = Result<SseEvent, std::convert::Infallible>>>, ApiError> {
    let picked = {
        let served = served.clone();
        let id = param.run.clone();
        blocking(move || pick(&served, id.as_deref())).await?
    };
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .map(|last| last.saturating_add(1));
    let from = resumed.or(param.from).unwrap_or(0);
    let tail = Tail::new(picked.dir, from, served.poll);
    let stream = futures_util::stream::unfold(tail, |mut tail| async move {
        let event = tail.next().await;
        Some((Ok(event), tail))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10))))
}

/// A ledger followed as it grows: the lines after `seq`, read from `offset`; a file that shrank, or a manifest with
/// another start time, is a new run in the same directory.
struct Tail {
    dir: PathBuf,
    /// Bytes of the ledger already read (whole lines only).
    offset: u64,
    /// Ledger lines seen (the next line's seq).
    seq: usize,
    /// Lines to skip before sending (what the page already has).
    skip: usize,
    started_at: Option<String>,
    report_sent: bool,
    pending: std::collections::VecDeque<SseEvent>,
    poll: Duration,
}

impl Tail {
    fn new(dir: PathBuf, from: usize, poll: Duration) -> Tail {
        let started_at = Manifest::read(&dir).map(|m| m.started_at);
        Tail { dir, offset: 0, seq: 0, skip: from, started_at, report_sent: false, pending: Default::default(), poll }
    }

    /// The next event to send, waiting for one.
    async fn next(&mut self) -> SseEvent {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return event;
            }
            let dir = self.dir.clone();
            let (offset, started_at) = (self.offset, self.started_at.clone());
            let read = tokio::task::spawn_blocking(move || read_tail(&dir, offset, started_at.as_deref())).await;
            match read {
                Ok(Grown::Reset(started_at)) => {
                    self.offset = 0;
                    self.seq = 0;
                    self.skip = 0;
                    self.report_sent = false;
                    self.started_at = started_at;
                    self.pending.push_back(SseEvent::default().event("reset").data("{}"));
                    continue;
                }
                Ok(Grown::Lines { lines, offset, report }) => {
                    self.offset = offset;
                    for line in lines {
                        let seq = self.seq;
                        self.seq += 1;
                        if self.skip > 0 {
                            self.skip -= 1;
                            continue;
                        }
                        let event: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                        let text = serde_json::from_str::<less_runtime::run::Event>(&line)
                            .ok()
                            .and_then(|e| e.trace_line())
                            .map(|t| t.trim_start().to_owned())
                            .unwrap_or_default();
                        let data = redacted(json!({"seq": seq, "event": event, "text": text}));
                        self.pending
                            .push_back(SseEvent::default().event("ledger").id(seq.to_string()).data(data.to_string()));
                    }
                    if report && !self.report_sent {
                        self.report_sent = true;
                        self.pending.push_back(
                            SseEvent::default().event("report").data(json!({"events": self.seq}).to_string()),
                        );
                    }
                }
                Err(_) => {}
            }
            if self.pending.is_empty() {
                tokio::time::sleep(self.poll).await;
            }
        }
    }
}

/// What a look at the ledger found.
enum Grown {
    /// The run in the directory is another one (its manifest's start time), or its ledger shrank.
    Reset(Option<String>),
    /// Whole lines after the offset, the offset after them, and whether the report is there.
    Lines { lines: Vec<String>, offset: u64, report: bool },
}

/// The most of a ledger the live stream reads at one look (1 MiB: a few thousand events).
const TAIL_READ: u64 = 1 << 20;

fn read_tail(dir: &Path, offset: u64, started_at: Option<&str>) -> Grown {
    use std::io::{Read, Seek, SeekFrom};
    let now_started = Manifest::read(dir).map(|m| m.started_at);
    if now_started.is_some() && now_started.as_deref() != started_at {
        return Grown::Reset(now_started);
    }
    let report = dir.join(REPORT_FILE).is_file();
    let path = dir.join(LEDGER_FILE);
    let Ok(mut file) = std::fs::File::open(&path) else {
        return Grown::Lines { lines: Vec::new(), offset, report: false };
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < offset {
        return Grown::Reset(now_started);
    }
    if len == offset || file.seek(SeekFrom::Start(offset)).is_err() {
        return Grown::Lines { lines: Vec::new(), offset, report };
    }
    // At most TAIL_READ bytes a look: a long ledger reaches a new page in steps, not in one read of the whole file.
    // A line longer than that is read whole.
    let mut bytes = Vec::new();
    let mut read = |bytes: &mut Vec<u8>, most: u64| (&mut file).take(most).read_to_end(bytes).is_ok();
    if !read(&mut bytes, (len - offset).min(TAIL_READ)) {
        return Grown::Lines { lines: Vec::new(), offset, report: false };
    }
    let rest = len - offset - bytes.len() as u64;
    if rest > 0 && !bytes.contains(&b'\n') && !read(&mut bytes, rest) {
        return Grown::Lines { lines: Vec::new(), offset, report: false };
    }
    // Only whole lines: a line being written is read on the next look.
    let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
        return Grown::Lines { lines: Vec::new(), offset, report: false };
    };
    let lines = bytes[..end]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    // The report is announced only once the ledger is read to its end.
    let whole = end + 1 == bytes.len() && offset + bytes.len() as u64 == len;
    Grown::Lines { lines, offset: offset + end as u64 + 1, report: report && whole }
}
