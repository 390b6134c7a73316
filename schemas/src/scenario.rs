//! Scenario files: the only module that knows TOML. A scenario is parsed into a JSON document, checked against
//! `schemas/scenario.v0.1.json` like any other document, then converted into the typed [`Scenario`].
//!
//! A scenario names the agent hierarchy, the budgets, the workspace, the plan (what the verbatim baseline restates),
//! an ordered list of scripted [`Step`]s and the [`Expect`]ed outcome.
//! Steps are logical: the claims, pointers, deref requests and decisions an agent produces; the wire format (LESS or
//! verbatim) is the runtime's business, so one scenario measures both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::budget::Budget;
use crate::capsule::{Capsule, NewCapsule, closure};
use crate::engram::{EngramKind, Scope};
use crate::error::{ErrorCode, Violation, Violations};
use crate::message::{GateStatus, Severity, TaskStatus, WaveState};
use crate::schema::DocKind;
use crate::tokens::Encoding;
use crate::validate::validate;

/// `text` as a TOML string, for a scenario written as text (`lessrt ask`): TOML's own writer, since JSON's escaping
/// leaves DEL (U+007F) bare, which a TOML string may not hold.
pub fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// Parses a scenario's TOML text into the JSON document the schema describes.
pub fn scenario_document(toml_text: &str) -> Result<Value, Violation> {
    let table: toml::Table = toml::from_str(toml_text)
        .map_err(|err| Violation::new(ErrorCode::JsonMalformed, "", format!("TOML: {}", err.message())))?;
    serde_json::to_value(table)
        .map_err(|err| Violation::new(ErrorCode::JsonMalformed, "", format!("TOML value has no JSON form: {err}")))
}

/// A validated scenario, with its workspace resolved against the scenario file's directory.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short name (`uc1-refactor`).
    pub name: String,
    /// What it exercises.
    pub description: String,
    /// The project its memory belongs to (default: the name); every agent of the scenario is a member.
    pub project: String,
    /// Who reads and writes which scopes of the run's memory, and how promotion is gated (`[memory]`).
    pub memory: MemorySettings,
    /// Tokenizer for every count of the run.
    pub tokenizer: Encoding,
    /// Workspace root the resolver is confined to.
    pub workspace: PathBuf,
    /// What the run is for; the verbatim baseline restates it in every brief.
    pub plan: Plan,
    /// The project's symbol table for the run (id → value); briefs carry only the entries they name.
    pub symbols: BTreeMap<String, String>,
    /// Context capsules of finished work, in the order written; briefs carry the closure of the ones they name.
    pub capsules: Vec<NewCapsule>,
    /// Budgets of every role: the scenario's defaults overlaid with per-role overrides.
    pub budgets: Budgets,
    /// The hierarchy, lead first.
    pub agents: Vec<AgentSpec>,
    /// The script, in order.
    pub steps: Vec<Step>,
    /// Checks on the outcome.
    pub expect: Vec<Expect>,
    /// Graded tasks: questions agents are briefed with, and their gold answers (never shown to an agent).
    pub tasks: Vec<Task>,
    /// The worker nodes agents are placed on (`[cluster] nodes`); empty: every agent runs on the head.
    pub cluster: Vec<ClusterNode>,
}

/// A worker node of a run's cluster: a `lessrt node` process.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterNode {
    /// Its name (`lessrt node --name`).
    pub name: String,
    /// Where it listens (`lessrt node --listen`), `host:port`.
    pub addr: String,
}

/// The `[memory]` table of a scenario (and of the desk's configuration): who reads which scopes, which scopes a
/// member writes directly, and how promotion is gated (LESS §4.3, §8.1, §13.2, §13.3). What is not written takes the
/// memory's defaults: every scope read (org and global only with `shared_reads`), run and project written directly,
/// the default promotion floor and rate limit.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    /// Whether agents read `org` and `global` engrams (LESS §13.3: an administrator's enablement; the scenario's
    /// author administers the run). Default false.
    #[serde(default)]
    pub shared_reads: bool,
    /// Least confidence of an engram promoted beyond run scope (LESS §13.2). None: the memory's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_floor: Option<f64>,
    /// The scopes a member writes directly, without a parent's promotion (LESS §4.3: "children can write
    /// run/project (configurable)"): run and project, or run alone (run scope is always written directly; `[]`
    /// means run alone). None: both. Writing at any other scope is a promotion at write time: only by a parent, at
    /// or above the floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<Vec<Scope>>,
    /// Per role, the scopes its agents read (org and global only with `shared_reads`); a role not named reads
    /// every scope it may.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reads: BTreeMap<String, Vec<Scope>>,
    /// Engrams one writer may store per window (the rate limit). None: the memory's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub puts_per_window: Option<u32>,
    /// The rate limit's window, in seconds. None: the memory's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_secs: Option<i64>,
}

impl MemorySettings {
    /// The scopes `role` reads: its `reads` entry, else every scope (org and global only with `shared_reads`).
    pub fn reads_of(&self, role: &str) -> Vec<Scope> {
        let all = [Scope::Run, Scope::Project, Scope::Org, Scope::Global];
        let listed = self.reads.get(role).map_or(&all[..], Vec::as_slice);
        listed.iter().copied().filter(|s| self.shared_reads || matches!(s, Scope::Run | Scope::Project)).collect()
    }
}

/// What is wrong with a `[memory]` table (`settings`, written at `base`), beyond its schema: a direct write beyond
/// project scope, a role that reads nothing or org/global without `shared_reads`, a role no agent has (`roles`: the
/// scenario's roles; none for the desk, whose clients' roles are open). `LESS_SCENARIO_INVALID` each, at its path.
pub fn memory_violations(settings: &MemorySettings, roles: Option<&[&str]>, base: &str) -> Vec<Violation> {
    let invalid = |path: String, message: String| Violation::new(ErrorCode::ScenarioInvalid, path, message);
    let mut out = Vec::new();
    for (idx, scope) in settings.writes.iter().flatten().enumerate() {
        if matches!(scope, Scope::Org | Scope::Global) {
            out.push(invalid(
                format!("{base}/writes/{idx}"),
                format!(
                    "{} cannot be written directly: only a parent promotes to org or global (LESS §4.3); list run \
                     and project only",
                    scope.as_str()
                ),
            ));
        }
    }
    for (role, scopes) in &settings.reads {
        let path = format!("{base}/reads/{role}");
        if let Some(roles) = roles
            && !roles.contains(&role.as_str())
        {
            out.push(invalid(
                path.clone(),
                format!("no agent has role {role:?}: name a role of the scenario's agents"),
            ));
        }
        if scopes.is_empty() {
            out.push(invalid(path.clone(), format!("role {role:?} reads no scope: list [\"run\"] at least")));
        }
        for (idx, scope) in scopes.iter().enumerate() {
            if matches!(scope, Scope::Org | Scope::Global) && !settings.shared_reads {
                out.push(invalid(
                    format!("{path}/{idx}"),
                    format!(
                        "role {role:?} cannot read {} engrams without shared_reads = true in the same table (LESS \
                         §13.3: an administrator's enablement)",
                        scope.as_str()
                    ),
                ));
            }
        }
    }
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterDoc {
    nodes: Vec<ClusterNode>,
}

/// What is wrong with placing agents on `nodes`: `placed` is each placed agent's index and node. A node named twice,
/// an address that is not `host:port`, an agent on a node not named (all `LESS_NODE_UNKNOWN`; `nodes_path` is where
/// the nodes are written).
pub fn placement_violations(nodes: &[ClusterNode], placed: &[(usize, String)], nodes_path: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, node) in nodes.iter().enumerate() {
        if node.name == HEAD_NODE || !seen.insert(node.name.as_str()) {
            out.push(Violation::new(
                ErrorCode::NodeUnknown,
                format!("{nodes_path}/{i}/name"),
                format!("node {:?} is named twice (the head is {HEAD_NODE:?})", node.name),
            ));
        }
        let port = node.addr.rsplit_once(':').and_then(|(host, port)| (!host.is_empty()).then_some(port));
        if port.and_then(|p| p.parse::<u16>().ok()).is_none() {
            out.push(Violation::new(
                ErrorCode::NodeUnknown,
                format!("{nodes_path}/{i}/addr"),
                format!("node {:?} has address {:?}, not host:port", node.name, node.addr),
            ));
        }
    }
    for (idx, node) in placed {
        if node != HEAD_NODE && !nodes.iter().any(|n| &n.name == node) {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            out.push(Violation::new(
                ErrorCode::NodeUnknown,
                format!("/agents/{idx}/node"),
                format!(
                    "agent {idx} is placed on node {node:?}, which the cluster does not name (its nodes: {}); name one \
                     of them, or leave `node` out to keep the agent on the head",
                    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                ),
            ));
        }
    }
    out
}

/// The name of the head node: the `lessrt run` process, where unplaced agents run.
pub const HEAD_NODE: &str = "head";

/// A graded task: a question or job one agent must answer, and the gold answer its report is graded against.
///
/// The question reaches the agent through the briefs that name the task (`tasks = [id]` of a brief step: a line
/// `Task <id>: <question>` for the child on the way to the agent). The answer is graded from what the agent actually
/// delivered ([`crate::run::RunReport`]'s `tasks`): one engram of a delivered message of the agent must cite every
/// gold pointer (an overlapping one) and state every gold term in its claim.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Unique within the scenario.
    pub id: String,
    /// What sort of work it is.
    pub kind: TaskKind,
    /// The agent expected to answer it.
    pub agent: String,
    /// The question or job, as the agent's brief states it.
    pub question: String,
    /// The gold answer.
    pub gold: Gold,
}

/// The kinds of graded work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// Locate the code that implements a rule and state the rule.
    LocateRule,
    /// Find the two documents (or a document and the code) that contradict each other and say how.
    Contradiction,
    /// Review a diff and name the test it breaks (or the rule it breaks).
    DiffReview,
    /// Answer a question that needs two spans from different files.
    TwoSpans,
}

impl TaskKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskKind::LocateRule => "locate_rule",
            TaskKind::Contradiction => "contradiction",
            TaskKind::DiffReview => "diff_review",
            TaskKind::TwoSpans => "two_spans",
        }
    }
}

/// A gold answer. One engram must satisfy all of it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gold {
    /// Every entry must be cited by a pointer of the engram that overlaps it (same source; intersecting line ranges,
    /// or the same section, diff path or test); an entry that is a list is satisfied by any one of its pointers.
    #[serde(default)]
    pub cites: Vec<OneOf>,
    /// Every entry must appear in the claim, case-insensitively and as whole words; a list entry by any one of its
    /// terms.
    #[serde(default)]
    pub terms: Vec<OneOf>,
    /// Every regular expression must match the claim (case-insensitive unless it says `(?-i)`).
    #[serde(default)]
    pub patterns: Vec<String>,
    /// Regular expressions of a wrong answer (the opposite polarity of a yes/no or before/after question, a wrong
    /// value, the wrong function or document): a claim matching any of them does not solve the task, whatever else
    /// it states.
    #[serde(default)]
    pub wrong: Vec<String>,
}

/// One value, or alternatives of which any one will do.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum OneOf {
    /// Exactly this.
    One(String),
    /// Any of these.
    Any(Vec<String>),
}

impl OneOf {
    /// The alternatives (one for [`OneOf::One`]).
    pub fn options(&self) -> &[String] {
        match self {
            OneOf::One(one) => std::slice::from_ref(one),
            OneOf::Any(any) => any,
        }
    }
}

/// The plan of a run.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// One paragraph.
    #[serde(default)]
    pub goal: String,
    /// Acceptance criteria, numbered from 1.
    #[serde(default)]
    pub criteria: Vec<String>,
    /// Pointers to the plan's documents (pasted whole by the verbatim baseline).
    #[serde(default)]
    pub artifacts: Vec<String>,
}

/// Budgets by role.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    /// For roles without an override.
    pub defaults: Budget,
    /// Per role, complete (defaults filled in).
    pub roles: BTreeMap<String, Budget>,
}

impl Budgets {
    /// The budget of `role`.
    pub fn of(&self, role: &str) -> Budget {
        self.roles.get(role).copied().unwrap_or(self.defaults)
    }
}

/// A budget in which every cap is optional; the rest come from a base budget.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
struct BudgetPatch {
    max_inline_tokens: Option<u32>,
    max_engrams: Option<u32>,
    max_inline_code: Option<u32>,
    max_repo_spans: Option<u32>,
    max_artifact_sections: Option<u32>,
    max_sam_items: Option<u32>,
    max_deref_tokens_total: Option<u32>,
}

impl BudgetPatch {
    fn over(self, base: Budget) -> Budget {
        Budget {
            max_inline_tokens: self.max_inline_tokens.unwrap_or(base.max_inline_tokens),
            max_engrams: self.max_engrams.unwrap_or(base.max_engrams),
            max_inline_code: self.max_inline_code.unwrap_or(base.max_inline_code),
            max_repo_spans: self.max_repo_spans.unwrap_or(base.max_repo_spans),
            max_artifact_sections: self.max_artifact_sections.unwrap_or(base.max_artifact_sections),
            max_sam_items: self.max_sam_items.unwrap_or(base.max_sam_items),
            max_deref_tokens_total: self.max_deref_tokens_total.unwrap_or(base.max_deref_tokens_total),
        }
    }
}

/// How an agent decides what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// Follows the scenario's steps.
    #[default]
    Scripted,
    /// Backed by a language model (the LLM issue); the steps become its tasks.
    Llm,
}

/// One agent of the hierarchy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Unique id.
    pub id: String,
    /// Role, for budgets and the per-role report.
    pub role: String,
    /// The agent it reports to; none for the lead.
    #[serde(default)]
    pub parent: Option<String>,
    /// Scripted or LLM-backed.
    #[serde(default)]
    pub kind: AgentKind,
    /// The model of an `llm` agent (`[agents.llm]`; defaults when absent).
    #[serde(default)]
    pub llm: Option<LlmSpec>,
    /// The most actions one turn may take (default [`crate::run::DEFAULT_TURN_LIMIT`]); the turn ends there, with
    /// an escalation to the parent, so a loop that does not converge never hangs a run.
    #[serde(default)]
    pub turn_limit: Option<usize>,
    /// Pointer patterns it may dereference without a grant (`repo:src/orders/**`); absent, its parent's (the lead's
    /// absent: the whole workspace). Within its parent's; what it grants is within it or within grants it holds.
    #[serde(default)]
    pub reach: Option<Vec<String>>,
    /// The node it runs on (with its gateway): a name of the run's cluster; absent, the head.
    #[serde(default)]
    pub node: Option<String>,
}

/// The model behind an `llm` agent, as the scenario writes it (`[agents.llm]`): an OpenAI-compatible endpoint. Every
/// field but the temperature may be left out; the provider (`less-agents`) knows the defaults and fills them in.
/// The runtime only carries the settings to the agent factory.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSpec {
    /// Base URL up to the API version; the environment variable `LESSRT_LLM_BASE_URL` overrides it.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Model name sent with each request.
    #[serde(default)]
    pub model: Option<String>,
    /// The environment variable holding the API key; none for a local server.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Sampling temperature (default 0: reproducible).
    #[serde(default)]
    pub temperature: f64,
    /// The most tokens per completion.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Timeout of one request in seconds.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Retries of a request after a timeout, connection error, 429 or 5xx.
    #[serde(default)]
    pub retries: Option<u32>,
    /// The model chooses each action of a worker's turn itself (search, list, read, answer), one JSON action per
    /// completion, instead of the runtime's fixed order (search with the question's words, read the best hits,
    /// answer).
    #[serde(default)]
    pub choose_actions: bool,
    /// How many requests the endpoint serves at once: a run's turns overlap up to the smallest of its agents'
    /// (`lessrt run --parallel` overrides it); `None`: one.
    #[serde(default)]
    pub parallel: Option<u32>,
}

/// What an engram in a step says; the runtime fills in ids, provenance and digests.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngramSpec {
    /// Kind of claim.
    pub kind: EngramKind,
    /// The claim (≤500 characters).
    pub claim: String,
    /// Pointers in text form.
    pub pointers: Vec<String>,
    /// Confidence (default 0.8).
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// TTL (default P7D).
    #[serde(default = "default_ttl")]
    pub ttl: String,
    /// Scope (default run).
    #[serde(default = "default_scope")]
    pub scope: Scope,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The graded task this engram answers (an id of the scenario's `[[tasks]]`). The runtime records the answer in
    /// the ledger; the grader counts an engram for a task only when it answers that task.
    #[serde(default)]
    pub task: Option<String>,
}

fn default_confidence() -> f64 {
    0.8
}

fn default_ttl() -> String {
    "P7D".to_owned()
}

fn default_scope() -> Scope {
    Scope::Run
}

/// A grant a parent issues in a brief.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantSpec {
    /// Grant id, quoted by the grantee's deref steps.
    pub id: String,
    /// The grantee: a descendant of the issuer.
    pub to: String,
    /// Pointer patterns it covers.
    pub patterns: Vec<String>,
    /// Dereferences it covers.
    pub max_derefs: u32,
    /// Tokens it covers.
    pub max_tokens: u32,
    /// Requests that may present it (default 1).
    #[serde(default = "one")]
    pub uses: u32,
    /// Lifetime (ISO-8601 duration, default PT1H).
    #[serde(default = "default_grant_ttl")]
    pub ttl: String,
    /// Tokens of code the grantee may inline.
    #[serde(default)]
    pub inline_code_tokens: u32,
    /// Scripted misbehaviour: the grant is altered after signing (its uses raised), so the grantee's gateway must
    /// refuse it as forged.
    #[serde(default)]
    pub tamper: bool,
}

impl GrantSpec {
    /// The terms of this grant issued by `issuer` at `now`: it expires `ttl` later, to the second.
    /// `LESS_TTL_INVALID` when the ttl is not an ISO-8601 duration.
    pub fn terms(&self, issuer: &str, now: time::OffsetDateTime) -> Result<crate::GrantTerms, Violation> {
        let expires = now + crate::Ttl::parse(&self.ttl)?.duration();
        let expires_at = expires
            .replace_nanosecond(0)
            .unwrap_or(expires)
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|err| Violation::new(ErrorCode::TtlInvalid, "/ttl", format!("expiry out of range: {err}")))?;
        Ok(crate::GrantTerms {
            grant_id: self.id.clone(),
            issuer: issuer.to_owned(),
            grantee: self.to.clone(),
            patterns: self.patterns.clone(),
            max_derefs: self.max_derefs,
            max_tokens: self.max_tokens,
            inline_code_tokens: self.inline_code_tokens,
            expires_at,
            uses: self.uses,
        })
    }
}

fn one() -> u32 {
    1
}

fn default_grant_ttl() -> String {
    "PT1H".to_owned()
}

/// Scripted misbehaviour of a report step, refused by the receiver's gateway in LESS mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Misbehaviour {
    /// The first attempt pastes the full content of every cited source into the body.
    PasteFiles,
    /// The first attempt carries 12 engrams (the step's, cycled), more than a receiver budget below 12 allows.
    TooManyEngrams,
    /// Every attempt pastes (no compliant resend): the second refusal escalates to the sender's parent.
    PasteTwice,
}

/// One scripted action of one agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// A parent briefs some of its children (SharedBriefMicro in LESS mode).
    Brief {
        /// The parent.
        agent: String,
        /// Children briefed (default: all).
        #[serde(default)]
        to: Vec<String>,
        /// What matters now.
        now: Vec<String>,
        /// Standing constraints.
        #[serde(default)]
        constraints: Vec<String>,
        /// Top risks.
        #[serde(default)]
        risks: Vec<String>,
        /// Pointer packs by child role.
        #[serde(default)]
        packs: BTreeMap<String, Vec<String>>,
        /// Grants issued with the brief.
        #[serde(default)]
        grants: Vec<GrantSpec>,
        /// Graded tasks this brief hands down: each child on the way to a task's agent gets the line
        /// `Task <id>: <question>` after `now`.
        #[serde(default)]
        tasks: Vec<String>,
        /// Symbols (ids of the scenario's `[symbols]`) the brief carries with their values.
        #[serde(default)]
        symbols: Vec<String>,
        /// Capsules (ids of the scenario's `[[capsules]]`) the brief carries, with their dependency closure.
        #[serde(default)]
        capsules: Vec<String>,
    },
    /// An agent dereferences pointers through its gateway.
    Deref {
        /// The requester.
        agent: String,
        /// Pointers in text form.
        pointers: Vec<String>,
        /// Why.
        reason: String,
        /// What for.
        #[serde(rename = "use")]
        intended_use: String,
        /// A grant id to present.
        #[serde(default)]
        grant: Option<String>,
    },
    /// An agent sends a typed message (by default to its parent).
    Report(Box<ReportStep>),
    /// An agent asks what the others learned (engram recall instead of prompts).
    Query {
        /// Who asks.
        agent: String,
        /// The question.
        text: String,
        /// Most engrams returned (default 5).
        #[serde(default = "default_k")]
        k: usize,
        /// Only this project (default: the scenario's); another project is refused with `LESS_SCOPE_DENIED`.
        #[serde(default)]
        project: Option<String>,
        /// Only this scope.
        #[serde(default)]
        scope: Option<Scope>,
    },
    /// An agent searches the workspace index (pointers with one-line previews in LESS mode; the hits' content pasted
    /// in the baseline).
    Search {
        /// Who searches.
        agent: String,
        /// What to look for.
        query: String,
        /// Most hits (1 to 50; default 5).
        #[serde(default = "default_k")]
        k: usize,
    },
    /// An agent lists workspace files under a path or glob, with their sizes and top-level symbols.
    List {
        /// Who lists.
        agent: String,
        /// A file, a directory or a glob (`src/**/*.rs`); empty: every file.
        #[serde(default)]
        pattern: String,
    },
    /// An agent promotes the newest engram of a subject key (`subject:<key>` tag) to a wider scope; only a parent of
    /// its creator may promote to org or global, above the confidence floor.
    Promote {
        /// Who promotes.
        agent: String,
        /// The subject key.
        subject: String,
        /// The scope it widens to.
        to: Scope,
    },
    /// An agent claims the surfaces it will change (workspace paths or globs), for a task, for a while: refused with
    /// `LESS_CLAIM_CONFLICT` when they overlap another agent's live claim, unless it overrides that claim (a conflict
    /// record, a decision, and an escalation to its parent).
    Claim {
        /// Who claims.
        agent: String,
        /// Workspace paths or globs (`src/run/**`).
        surfaces: Vec<String>,
        /// What the change is for.
        task: String,
        /// How long the claim holds, in minutes (default 30).
        #[serde(default)]
        ttl_minutes: Option<u64>,
        /// Take the surfaces from the claims they overlap, saying why.
        #[serde(default, rename = "override")]
        override_reason: Option<String>,
    },
    /// An agent releases its live claims (of one task, or all).
    Release {
        /// Who releases.
        agent: String,
        /// Only its claims for this task.
        #[serde(default)]
        task: Option<String>,
    },
    /// The agent panics while acting (once); it is restarted and the step runs again.
    Panic {
        /// The agent.
        agent: String,
    },
}

fn default_k() -> usize {
    5
}

/// A typed message an agent sends. (Unknown fields are refused by the schema; serde cannot deny them through the
/// flattened kind.)
#[derive(Debug, Clone, Deserialize)]
pub struct ReportStep {
    /// Sender.
    pub agent: String,
    /// Receiver (default: the sender's parent).
    #[serde(default)]
    pub to: Option<String>,
    /// The type and its fields.
    #[serde(flatten)]
    pub kind: ReportKind,
    /// Engrams carried.
    #[serde(default)]
    pub engrams: Vec<EngramSpec>,
    /// The prose summary the verbatim baseline writes (LESS mode sends none).
    #[serde(default)]
    pub summary: String,
    /// Scripted misbehaviour.
    #[serde(default)]
    pub misbehave: Option<Misbehaviour>,
    /// A grant (issued to the sender) that allows inline code in this message.
    #[serde(default)]
    pub grant: Option<String>,
}

/// The typed-message part of a report step.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum ReportKind {
    TaskClaim {
        task: String,
        #[serde(default)]
        symbols: Vec<String>,
        #[serde(default)]
        capsules: Vec<String>,
    },
    Checkpoint {
        wave: u32,
        state: WaveState,
        #[serde(default)]
        capsules: Vec<String>,
    },
    TaskResult {
        task: String,
        status: TaskStatus,
        #[serde(default)]
        criteria: Vec<u32>,
    },
    GateReport {
        gate_id: String,
        /// Omitted: the gate adapter reads it from the report `report_ref` points to (cargo, pytest, JUnit or a
        /// `status:` line) and carries only the reference, with the report's digest.
        #[serde(default)]
        status: Option<GateStatus>,
        #[serde(default)]
        report_ref: Option<String>,
    },
    Escalation {
        reason: String,
        severity: Severity,
        #[serde(default)]
        refs: Vec<String>,
    },
    Question {
        question: String,
        #[serde(default)]
        refs: Vec<String>,
    },
}

/// A check on the run's outcome.
#[derive(Debug, Clone, Deserialize)]
pub struct Expect {
    /// What is checked.
    #[serde(flatten)]
    pub check: Check,
    /// Only in this mode (both when absent).
    #[serde(default)]
    pub mode: Option<WireMode>,
}

/// The checks a scenario can ask for.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// One delivered engram of `kind` cites every pointer listed.
    EngramCites {
        /// The engram kind.
        kind: EngramKind,
        /// Pointers in text form (compared without digest).
        pointers: Vec<String>,
    },
    /// Every pointer of a delivered engram that the sender had dereferenced records the digest it got.
    DigestsRecorded,
    /// No delivered message exceeded its receiver's MAX_INLINE_TOKENS (LESS mode) and the p95 is at most `p95`.
    NoTurnOverBudget {
        /// Ceiling for the p95 inline tokens per turn (default 800).
        #[serde(default = "default_p95")]
        p95: u32,
    },
    /// The agent had a message refused and then delivered a compliant resend.
    RejectedThenResent {
        /// The sender.
        agent: String,
    },
    /// Dereference counts.
    Derefs {
        /// Only this requester (all when absent).
        #[serde(default)]
        agent: Option<String>,
        /// Exactly this many granted.
        #[serde(default)]
        granted: Option<u32>,
        /// Exactly this many denied.
        #[serde(default)]
        denied: Option<u32>,
    },
    /// The agent was restarted exactly `times` times.
    Restarted {
        /// The agent.
        agent: String,
        /// Restarts.
        times: u32,
    },
    /// Exactly this many escalations were sent.
    Escalations {
        /// Count.
        count: u32,
    },
    /// The agent's queries returned at least `min` engrams in all, including one citing `cites` if given.
    QueryFound {
        /// The asking agent.
        agent: String,
        /// Least engrams returned.
        min: usize,
        /// A pointer one returned engram must cite.
        #[serde(default)]
        cites: Option<String>,
    },
    /// The memory refused exactly `count` puts, queries or promotions with `code` (of `agent`, if given).
    MemoryRefused {
        /// Only this agent's.
        #[serde(default)]
        agent: Option<String>,
        /// `LESS_SCOPE_DENIED` or `LESS_RATE_LIMITED`.
        code: ErrorCode,
        /// Exactly this many.
        count: u32,
    },
    /// An engram of `subject` was promoted to `to`.
    Promoted {
        /// The subject key.
        subject: String,
        /// The scope.
        to: Scope,
    },
    /// Reports put at least `min` engrams into the memory (stored, or found already there), of `agent` if given.
    MemoryPuts {
        /// Only this agent's.
        #[serde(default)]
        agent: Option<String>,
        /// Least engrams.
        min: usize,
    },
    /// Claims made in the run (of `agent`, if given): exactly as many granted, refused with `LESS_CLAIM_CONFLICT`,
    /// and claims of others displaced by an override, as each count given.
    Claims {
        /// Only this agent's.
        #[serde(default)]
        agent: Option<String>,
        /// Exactly this many granted.
        #[serde(default)]
        granted: Option<u32>,
        /// Exactly this many refused as conflicts.
        #[serde(default)]
        refused: Option<u32>,
        /// Exactly this many conflict records.
        #[serde(default)]
        overrides: Option<u32>,
    },
}

fn default_p95() -> u32 {
    800
}

/// How messages are written on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize)]
pub enum WireMode {
    /// Engrams, pointers, micro-briefs; budgets enforced.
    #[serde(rename = "less")]
    Less,
    /// The fair baseline: what a careful orchestrator without LESS sends. Briefs restate the goal, the criteria and
    /// the prior reports the parent knows (as prose) and paste the spans the pack points to (a whole file only where
    /// the pack names a whole file); reports paste the spans they cite. No budgets, no grants; nothing refused.
    #[serde(rename = "verbatim")]
    Verbatim,
    /// The whole-file baseline: every brief also pastes the plan's documents, every packed file whole and every prior
    /// report of the run with what it pasted. An upper bound on what pasting costs, not a fair comparison.
    #[serde(rename = "verbatim-whole")]
    VerbatimWhole,
}

impl WireMode {
    /// Every mode, LESS first.
    pub const ALL: [WireMode; 3] = [WireMode::Less, WireMode::Verbatim, WireMode::VerbatimWhole];

    /// The name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            WireMode::Less => "less",
            WireMode::Verbatim => "verbatim",
            WireMode::VerbatimWhole => "verbatim-whole",
        }
    }

    /// A baseline without LESS: budgets are not enforced and nothing is refused.
    pub fn is_baseline(self) -> bool {
        self != WireMode::Less
    }
}

impl std::fmt::Display for WireMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for WireMode {
    type Err = String;

    fn from_str(text: &str) -> Result<WireMode, String> {
        WireMode::ALL
            .into_iter()
            .find(|m| m.as_str() == text)
            .ok_or_else(|| format!("unknown mode {text:?}; expected less, verbatim or verbatim-whole"))
    }
}

/// The workspace, resolved, must stay inside the scenario's directory: validation refused absolute and `..` paths,
/// and this refuses a symlink out of it, a dangling one, and a workspace whose scenario directory does not resolve
/// (a missing workspace fails later, when the resolver opens it).
fn check_workspace_inside(base: &Path, workspace: &Path) -> Result<(), Violations> {
    let invalid = |message: String| Violations(vec![Violation::new(ErrorCode::ScenarioInvalid, "/workspace", message)]);
    let real = match workspace.canonicalize() {
        Ok(real) => real,
        // Not there yet (a template validated before its workspace exists): the run refuses it when it opens it.
        Err(_) if std::fs::symlink_metadata(workspace).is_err() => return Ok(()),
        // There but not resolvable: a dangling link, a loop.
        Err(err) => {
            return Err(invalid(format!(
                "workspace {}: {err}; make it a directory beside or below the scenario file",
                workspace.display()
            )));
        }
    };
    // Fail closed: a workspace that is there is inside only if the directory it must be inside resolves.
    let base = if base.as_os_str().is_empty() { Path::new(".") } else { base };
    let base = base
        .canonicalize()
        .map_err(|err| invalid(format!("the scenario's directory {} cannot be resolved: {err}", base.display())))?;
    if real.starts_with(&base) {
        return Ok(());
    }
    Err(Violations(vec![Violation::new(
        ErrorCode::ScenarioInvalid,
        "/workspace",
        format!(
            "workspace {} resolves to {}, outside the scenario's directory {}: put the workspace beside or below the \
             scenario file",
            workspace.display(),
            real.display(),
            base.display()
        ),
    )]))
}

/// Why a scenario document that passed its schema does not convert to its typed form, if it does not.
pub(crate) fn type_mismatch(doc: &Value) -> Option<String> {
    ScenarioDoc::deserialize(doc).err().map(|err| err.to_string())
}

/// The raw document shape, deserialized after the schema passed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioDoc {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    project: Option<String>,
    /// Kept for scenarios written before `[memory]`: the same as `[memory] shared_reads`.
    #[serde(default)]
    shared_reads: Option<bool>,
    #[serde(default)]
    memory: MemorySettings,
    #[serde(default)]
    tokenizer: Encoding,
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    plan: Plan,
    #[serde(default)]
    symbols: BTreeMap<String, String>,
    #[serde(default)]
    capsules: Vec<NewCapsule>,
    #[serde(default)]
    budgets: BudgetsDoc,
    agents: Vec<AgentSpec>,
    #[serde(default)]
    steps: Vec<Step>,
    #[serde(default)]
    expect: Vec<Expect>,
    #[serde(default)]
    tasks: Vec<Task>,
    #[serde(default)]
    cluster: Option<ClusterDoc>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetsDoc {
    #[serde(default)]
    defaults: BudgetPatch,
    #[serde(default)]
    roles: BTreeMap<String, BudgetPatch>,
}

impl Scenario {
    /// Loads and validates a scenario file; the workspace is resolved against the file's directory.
    pub fn load(path: &Path) -> Result<Scenario, Violations> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            Violations(vec![Violation::new(ErrorCode::InputUnreadable, "", format!("{}: {err}", path.display()))])
        })?;
        // `scenario.toml` run from its own directory has the empty path as its parent.
        let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Scenario::from_toml(&text, base)
    }

    /// Parses and validates a scenario from TOML text; `base` is where a relative workspace is resolved.
    pub fn from_toml(text: &str, base: &Path) -> Result<Scenario, Violations> {
        let doc = scenario_document(text).map_err(|v| Violations(vec![v]))?;
        let violations = validate(DocKind::Scenario, &doc);
        if !violations.is_empty() {
            return Err(Violations(violations));
        }
        let doc: ScenarioDoc = serde_json::from_value(doc)
            .map_err(|err| Violations(vec![Violation::new(ErrorCode::SchemaInvalid, "", err.to_string())]))?;
        let workspace = base.join(doc.workspace.unwrap_or_else(|| ".".to_owned()));
        check_workspace_inside(base, &workspace)?;
        let defaults = doc.budgets.defaults.over(Budget::default());
        let roles = doc.budgets.roles.into_iter().map(|(role, patch)| (role, patch.over(defaults))).collect();
        Ok(Scenario {
            project: doc.project.unwrap_or_else(|| doc.name.clone()),
            name: doc.name,
            description: doc.description,
            memory: MemorySettings {
                shared_reads: doc.memory.shared_reads || doc.shared_reads.unwrap_or(false),
                ..doc.memory
            },
            tokenizer: doc.tokenizer,
            workspace,
            plan: doc.plan,
            symbols: doc.symbols,
            capsules: doc.capsules,
            budgets: Budgets { defaults, roles },
            agents: doc.agents,
            steps: doc.steps,
            expect: doc.expect,
            tasks: doc.tasks,
            cluster: doc.cluster.map(|c| c.nodes).unwrap_or_default(),
        })
    }

    /// The node `agent` runs on: its `node`, or [`HEAD_NODE`].
    pub fn node_of(&self, agent: &str) -> &str {
        self.agent(agent).and_then(|a| a.node.as_deref()).unwrap_or(HEAD_NODE)
    }

    /// Places the run on `nodes` (from `lessrt run --cluster FILE`: they replace the scenario's), moving the agents
    /// `placement` names (agent → node; [`HEAD_NODE`] for the head); checks that every placed agent's node is named.
    pub fn placed(
        mut self,
        nodes: Vec<ClusterNode>,
        placement: &BTreeMap<String, String>,
    ) -> Result<Scenario, Violations> {
        let mut out = Vec::new();
        for (agent, node) in placement {
            match self.agents.iter_mut().find(|a| &a.id == agent) {
                Some(spec) => spec.node = (node != HEAD_NODE).then(|| node.clone()),
                None => out.push(Violation::new(
                    ErrorCode::NodeUnknown,
                    format!("/placement/{agent}"),
                    format!("the placement names agent {agent:?}, which the scenario does not have"),
                )),
            }
        }
        self.cluster = nodes;
        out.extend(self.check_placement());
        if out.is_empty() { Ok(self) } else { Err(Violations(out)) }
    }

    /// What is wrong with the scenario's placement ([`placement_violations`]).
    pub fn check_placement(&self) -> Vec<Violation> {
        let placed: Vec<(usize, String)> =
            self.agents.iter().enumerate().filter_map(|(i, a)| Some((i, a.node.clone()?))).collect();
        placement_violations(&self.cluster, &placed, "/cluster/nodes")
    }

    /// The agent with `id`.
    pub fn agent(&self, id: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// Whether `ancestor` is above `agent` in the hierarchy.
    pub fn is_ancestor(&self, ancestor: &str, agent: &str) -> bool {
        crate::is_ancestor(ancestor, agent, |id| self.parent_of(id))
    }

    /// The parent of `agent`, if it has one.
    pub fn parent_of(&self, agent: &str) -> Option<&str> {
        self.agent(agent).and_then(|a| a.parent.as_deref())
    }

    /// What `agent` may dereference without a grant: its own `reach`, else its nearest ancestor's; `None` for the
    /// whole workspace.
    pub fn reach_of(&self, agent: &str) -> Option<&[String]> {
        std::iter::once(agent)
            .chain(crate::ancestors(agent, |id| self.parent_of(id)))
            .find_map(|id| self.agent(id)?.reach.as_deref())
    }

    /// Every agent below `id` in the hierarchy (children, grandchildren…).
    pub fn descendants(&self, id: &str) -> Vec<String> {
        self.agents.iter().filter(|a| self.is_ancestor(id, &a.id)).map(|a| a.id.clone()).collect()
    }

    /// The hierarchical identity of agent `id`: the project, then the agents from the root of the hierarchy down to
    /// it (`shop/lead/manager/dev`), as the coordination ledger and the audit logs name it.
    pub fn identity(&self, id: &str) -> String {
        let mut path = vec![self.project.as_str()];
        path.extend(crate::lineage(id, |a| self.parent_of(a)));
        path.join("/")
    }

    /// The children of `id`.
    pub fn children(&self, id: &str) -> Vec<&AgentSpec> {
        self.agents.iter().filter(|a| a.parent.as_deref() == Some(id)).collect()
    }

    /// The scenario with every agent backed by a model: each keeps its own `[agents.llm]` settings, the others take
    /// those of the scenario's first `llm` agent, or the defaults.
    pub fn with_every_agent_llm(mut self) -> Scenario {
        let first = self.agents.iter().find_map(|a| a.llm.clone()).unwrap_or_default();
        for agent in &mut self.agents {
            agent.kind = AgentKind::Llm;
            if agent.llm.is_none() {
                agent.llm = Some(first.clone());
            }
        }
        self
    }

    /// The scenario with every `llm` agent's request timeout (`--model-timeout`) and sampling temperature
    /// (`--temperature`) set to those given; `None` leaves the scenario's own.
    pub fn with_model_settings(mut self, timeout_secs: Option<u64>, temperature: Option<f64>) -> Scenario {
        if timeout_secs.is_none() && temperature.is_none() {
            return self;
        }
        for agent in self.agents.iter_mut().filter(|a| a.kind == AgentKind::Llm) {
            let llm = agent.llm.get_or_insert_default();
            llm.timeout_secs = timeout_secs.or(llm.timeout_secs);
            llm.temperature = temperature.unwrap_or(llm.temperature);
        }
        self
    }

    /// The scenario with one field of one role's budget set to `value` (`lessrt bench --sweep ROLE.FIELD=…`): the
    /// role's `[budgets.roles.<role>]`, or the scenario's defaults where it has none, with `field` replaced. The one
    /// rewrite of a budget from outside the file, so a bench that sweeps a budget and a replay of its recording ask
    /// the same requests. Refused (`LESS_ARGUMENT_INVALID`, naming what is known) when no agent has `role`, when
    /// `field` is not a field of a budget, and when the budget's schema refuses `value` (`max_engrams` above 12).
    pub fn with_budget(mut self, role: &str, field: &str, value: u64) -> Result<Scenario, Violation> {
        let path = format!("/budgets/roles/{role}/{field}");
        if !self.agents.iter().any(|a| a.role == role) {
            let mut roles: Vec<&str> = self.agents.iter().map(|a| a.role.as_str()).collect();
            roles.sort_unstable();
            roles.dedup();
            let message = format!("no agent of {} has the role {role:?}; its roles: {}", self.name, roles.join(", "));
            return Err(Violation::new(ErrorCode::ArgumentInvalid, path, message));
        }
        let budget = self.budgets.of(role);
        let mut doc = serde_json::to_value(budget)
            .map_err(|err| Violation::new(ErrorCode::ArgumentInvalid, path.clone(), err.to_string()))?;
        let Some(fields) = doc.as_object_mut() else {
            return Err(Violation::new(ErrorCode::ArgumentInvalid, path, "a budget is not an object"));
        };
        if !fields.contains_key(field) {
            let known: Vec<&str> = fields.keys().map(String::as_str).collect();
            let message = format!("{field:?} is not a budget field; the fields: {}", known.join(", "));
            return Err(Violation::new(ErrorCode::ArgumentInvalid, path, message));
        }
        fields.insert(field.to_owned(), Value::from(value));
        if let Some(refused) = validate(DocKind::Budget, &doc).into_iter().next() {
            let message = format!("{value} is refused for {role}.{field}: {}", refused.message);
            return Err(Violation::new(ErrorCode::ArgumentInvalid, path, message));
        }
        let budget: Budget = serde_json::from_value(doc)
            .map_err(|err| Violation::new(ErrorCode::ArgumentInvalid, path.clone(), err.to_string()))?;
        self.budgets.roles.insert(role.to_owned(), budget);
        Ok(self)
    }

    /// The scenario as models do its work on their own: every agent an `llm` agent that chooses its own actions
    /// ([`LlmSpec::choose_actions`]), and the scripted steps (with their pointer packs and answers) replaced by the
    /// hierarchy's plain delegation ([`Scenario::delegation_steps`]). No authored pack or catalogue reaches a model:
    /// it sees the goal, its questions, its budget and what its own actions return. The scenario's checks, which are
    /// about its script, are dropped; its graded tasks stay.
    pub fn delegated(self) -> Scenario {
        let mut scenario = self.with_every_agent_llm();
        for agent in &mut scenario.agents {
            agent.llm.get_or_insert_default().choose_actions = true;
        }
        // A model works on one question at a time (a search, what it chooses, the answer and its resend, a request
        // to its parent): room for each of its questions within its turn.
        const ACTIONS_PER_QUESTION: usize = 10;
        let owned: Vec<(String, usize)> = scenario
            .agents
            .iter()
            .map(|a| (a.id.clone(), scenario.tasks.iter().filter(|t| t.agent == a.id).count()))
            .collect();
        for (agent, (_, n)) in scenario.agents.iter_mut().zip(owned) {
            if n > 0 {
                let room = ACTIONS_PER_QUESTION * n + 2;
                agent.turn_limit = Some(agent.turn_limit.map_or(room, |limit| limit.max(room)));
            }
        }
        scenario.steps = scenario.delegation_steps();
        // The checks are about the script that is gone (its reads, its engrams): the graded tasks say how it went.
        scenario.expect.clear();
        scenario
    }

    /// The hierarchy's plain delegation, from the goal and the graded tasks alone: top down, each parent briefs each
    /// child with the goal and the questions of the tasks at or below that child (as many briefs as the lines of a
    /// brief need; no pointer packs, grants, symbols or capsules); then bottom up, every agent but the lead reports
    /// to its parent (a task result; its engrams are its model's).
    pub fn delegation_steps(&self) -> Vec<Step> {
        // Task lines per brief: a brief's "what matters now" holds 10 lines, one of them the goal.
        const TASKS_PER_BRIEF: usize = 9;
        // A brief's line holds 200 characters: a longer goal is cut at its last word that fits.
        let goal = if self.plan.goal.is_empty() {
            "Answer the questions below, citing the lines that answer them.".to_owned()
        } else if self.plan.goal.chars().count() <= 200 {
            self.plan.goal.clone()
        } else {
            let head: String = self.plan.goal.chars().take(199).collect();
            let cut = head.rfind(' ').unwrap_or(head.len());
            format!("{}…", head[..cut].trim_end_matches([',', ';', ':']))
        };
        let mut order: Vec<&AgentSpec> = self.agents.iter().collect();
        order.sort_by_key(|a| self.depth_of(&a.id));
        let mut steps = Vec::new();
        for parent in &order {
            for child in self.agents.iter().filter(|a| a.parent.as_deref() == Some(parent.id.as_str())) {
                let below: Vec<String> = self
                    .tasks
                    .iter()
                    .filter(|t| self.is_at_or_below(&t.agent, &child.id))
                    .map(|t| t.id.clone())
                    .collect();
                let chunks: Vec<Vec<String>> = if below.is_empty() {
                    vec![Vec::new()]
                } else {
                    below.chunks(TASKS_PER_BRIEF).map(<[String]>::to_vec).collect()
                };
                for tasks in chunks {
                    steps.push(Step::Brief {
                        agent: parent.id.clone(),
                        to: vec![child.id.clone()],
                        now: vec![goal.clone()],
                        constraints: vec!["Cite the lines that answer each question; never paste code.".to_owned()],
                        risks: Vec::new(),
                        packs: BTreeMap::new(),
                        grants: Vec::new(),
                        tasks,
                        symbols: Vec::new(),
                        capsules: Vec::new(),
                    });
                }
            }
        }
        for agent in order.iter().rev().filter(|a| a.parent.is_some()) {
            steps.push(Step::Report(Box::new(ReportStep {
                agent: agent.id.clone(),
                to: None,
                kind: ReportKind::TaskResult {
                    task: format!("{}-answers", agent.id),
                    status: TaskStatus::Pass,
                    criteria: Vec::new(),
                },
                engrams: Vec::new(),
                summary: String::new(),
                misbehave: None,
                grant: None,
            })));
        }
        steps
    }

    /// How many agents from the lead down to `id` (the lead: 1).
    fn depth_of(&self, id: &str) -> usize {
        1 + crate::ancestors(id, |a| self.parent_of(a)).count()
    }

    /// Whether `id` is `above` or below it.
    pub fn is_at_or_below(&self, id: &str, above: &str) -> bool {
        id == above || self.is_ancestor(above, id)
    }

    /// The pointers the lead holds when the run starts: the plan's artifacts and every pointer a brief step packs,
    /// in first-mention order. An LLM lead chooses its children's packs from these; a parent below it holds what
    /// it was handed.
    pub fn catalogue(&self) -> Vec<String> {
        let mut all: Vec<String> = self.plan.artifacts.clone();
        for step in &self.steps {
            if let Step::Brief { packs, .. } = step {
                for text in packs.values().flatten() {
                    if !all.contains(text) {
                        all.push(text.clone());
                    }
                }
            }
        }
        all
    }

    /// The entries of the symbol table named by `ids` (unknown ids are skipped: validation refused them).
    pub fn symbol_entries(&self, ids: &[String]) -> BTreeMap<String, String> {
        ids.iter().filter_map(|id| Some((id.clone(), self.symbols.get(id)?.clone()))).collect()
    }

    /// The capsules named by `ids` hydrated: the closure of their `depends`, dependencies first, each once.
    pub fn hydrate(&self, ids: &[String]) -> Result<Vec<Capsule>, Violation> {
        closure(ids, |id| match self.capsules.iter().find(|c| c.id == id) {
            Some(capsule) => capsule.render().map(Some),
            None => Ok(None),
        })
    }

    /// The task with `id`.
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The brief lines `child` gets for the tasks named in `task_ids`: those whose agent is `child` or below it.
    pub fn task_lines(&self, task_ids: &[String], child: &str) -> Vec<String> {
        self.tasks_below(task_ids, child).into_iter().map(|t| format!("Task {}: {}", t.id, t.question)).collect()
    }

    /// The tasks named in `task_ids` whose agent is `child` or below it, in the order named.
    pub fn tasks_below(&self, task_ids: &[String], child: &str) -> Vec<&Task> {
        task_ids
            .iter()
            .filter_map(|id| self.task(id))
            .filter(|t| t.agent == child || self.is_ancestor(child, &t.agent))
            .collect()
    }

    /// How deep the hierarchy is: 1 for a lone lead, 2 for a lead with children, and so on.
    pub fn depth(&self) -> usize {
        self.agents.iter().map(|a| self.depth_of(&a.id)).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    /// Whatever a question holds reaches a scenario as written (issue 61: a question with U+007F made `ask` fail,
    /// its JSON escaping taken for TOML's).
    #[test]
    fn any_text_is_a_valid_toml_string_that_reads_back_as_written() {
        let every_ascii: String = (0u8..=0x7f).map(char::from).collect();
        for text in [every_ascii.as_str(), "a\u{7f}b", "\"\"\"'''\\", "line\u{2028}sep\u{feff}", "é ✓ 𝄞"] {
            let doc = format!("q = {}\n", toml_string(text));
            let table: toml::Table = toml::from_str(&doc).unwrap_or_else(|e| panic!("{text:?}: {e}\n{doc}"));
            assert_eq!(table["q"].as_str(), Some(text));
        }
    }

    use super::*;

    #[test]
    fn a_toml_scenario_becomes_a_checked_document() {
        let doc = scenario_document(
            r#"
            name = "tiny"
            [[agents]]
            id = "lead"
            role = "architect"
            [[agents]]
            id = "dev"
            role = "programmer"
            parent = "lead"
            "#,
        )
        .expect("valid TOML");
        assert_eq!(doc["agents"][1]["parent"], "lead");
        assert!(validate(DocKind::Scenario, &doc).is_empty());
    }

    #[test]
    fn broken_toml_is_malformed_not_a_panic() {
        let err = scenario_document("name = \"x\"\n[[agents]\n").expect_err("unclosed table header");
        assert_eq!(err.code, ErrorCode::JsonMalformed);
    }

    #[test]
    fn role_budgets_overlay_the_scenario_defaults() {
        let scenario = Scenario::from_toml(
            r#"
            name = "budgets"
            [budgets.defaults]
            max_inline_tokens = 600
            [budgets.roles.programmer]
            max_repo_spans = 1
            [[agents]]
            id = "lead"
            role = "architect"
            [[agents]]
            id = "dev"
            role = "programmer"
            parent = "lead"
            "#,
            Path::new("."),
        )
        .expect("valid");
        let programmer = scenario.budgets.of("programmer");
        assert_eq!((programmer.max_inline_tokens, programmer.max_repo_spans), (600, 1));
        assert_eq!(programmer.max_deref_tokens_total, 1200, "spec default where nobody overrides");
        assert_eq!(scenario.budgets.of("architect").max_inline_tokens, 600);
        assert!(scenario.is_ancestor("lead", "dev"));
        assert!(!scenario.is_ancestor("dev", "lead"));
    }

    /// `with_budget` sets one field of a role's budget over the scenario's (or its defaults), and refuses an unknown
    /// role, an unknown field and a value the budget's schema refuses, naming what is known.
    #[test]
    fn a_budget_field_is_set_for_a_role_or_refused() {
        let scenario = || {
            Scenario::from_toml(
                "name = \"b\"\n[budgets.defaults]\nmax_inline_tokens = 600\n[budgets.roles.programmer]\n\
                 max_repo_spans = 1\n[[agents]]\nid = \"lead\"\nrole = \"architect\"\n[[agents]]\nid = \"dev\"\n\
                 role = \"programmer\"\nparent = \"lead\"\n",
                Path::new("."),
            )
            .expect("valid")
        };
        let swept = scenario().with_budget("programmer", "max_deref_tokens_total", 250).expect("set");
        let programmer = swept.budgets.of("programmer");
        assert_eq!((programmer.max_deref_tokens_total, programmer.max_repo_spans), (250, 1), "the role's own kept");
        let architect = scenario().with_budget("architect", "max_inline_tokens", 200).expect("set").budgets;
        assert_eq!((architect.of("architect").max_inline_tokens, architect.of("architect").max_repo_spans), (200, 3));
        assert_eq!(architect.of("programmer").max_inline_tokens, 600, "other roles untouched");
        let err = scenario().with_budget("auditor", "max_inline_tokens", 1).expect_err("no such role");
        assert_eq!(err.code, ErrorCode::ArgumentInvalid);
        assert!(err.message.contains("its roles: architect, programmer"), "{}", err.message);
        let err = scenario().with_budget("programmer", "max_tokens", 1).expect_err("no such field");
        assert!(err.message.contains("max_inline_tokens") && err.message.contains("max_deref_tokens_total"), "{err:?}");
        let err = scenario().with_budget("programmer", "max_engrams", 13).expect_err("over the schema's 12");
        assert!(err.message.contains("13 is refused for programmer.max_engrams"), "{}", err.message);
        let err = scenario().with_budget("programmer", "max_inline_tokens", u64::from(u32::MAX) + 1).expect_err("u32");
        assert_eq!(err.path, "/budgets/roles/programmer/max_inline_tokens");
    }
}
