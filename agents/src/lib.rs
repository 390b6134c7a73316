//! less-agents: implementations of the agents that run inside lessrt's actor tree.
//!
//! The runtime (`less-runtime`) defines the [`Agent`] seam and knows no concrete agent or LLM provider; this crate
//! depends on it and provides the agents. [`ScriptedAgent`] follows the scenario's steps, including its scripted
//! misbehaviour (pasting files, too many engrams, a panic). The root `lessrt` binary wires the two together.
//!
//! LLM-backed agents: [`provider`] is the provider-neutral completion seam, [`openai`] its OpenAI-compatible
//! implementation, [`record`] records and replays exchanges, [`llm_agent`] is the agent, [`summarizer`] the DAG's
//! LLM-backed summarizer. [`AgentsFactory`] builds
//! the agent each scenario entry asks for (`kind = "scripted"` or `"llm"`).

pub mod llm_agent;
pub mod openai;
pub mod provider;
pub mod record;
pub mod summarizer;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use less_runtime::{AgentKind, LlmSpec, Scenario};

use crate::llm_agent::{LlmAgent, Sampling};
use crate::openai::{OpenAiCompatible, OpenAiConfig};
use crate::provider::{CompletionModel, LlmError};
use crate::record::{Recorder, Replayer};

use less_runtime::run::{
    Action, Agent, AgentFactory, AgentFuture, BriefAction, DerefAction, Done, EnvelopeKind, Outcome, ReportAction,
    Seat, SendAction, TurnInput,
};
use less_runtime::{AgentSpec, Grant, GrantSpec, Misbehaviour, Step, WireMode};

/// Follows the steps of a scenario: each step's actions in order, then the turn is done.
#[derive(Debug, Default)]
pub struct ScriptedAgent {
    /// What is left of the current turn's script.
    queue: VecDeque<Action>,
}

/// Builds a [`ScriptedAgent`] for every agent of a scenario.
#[derive(Debug, Default)]
pub struct ScriptedFactory;

impl AgentFactory for ScriptedFactory {
    fn make(&self, _seat: &Seat) -> Box<dyn Agent> {
        Box::new(ScriptedAgent::default())
    }
}

/// Overrides every `llm` agent's `base_url` (e.g. a server on another port).
pub const BASE_URL_ENV: &str = "LESSRT_LLM_BASE_URL";
/// Where `scripts/local-llm.sh start` serves its model: the base URL of a model a scenario does not place.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8437/v1";
/// The model a scenario that names none asks for (what `scripts/local-llm.sh` serves by default).
pub const DEFAULT_MODEL: &str = "smollm2-135m-instruct";
/// The most tokens per completion when a scenario does not say.
pub const DEFAULT_MAX_TOKENS: u32 = 512;
/// Seconds one request may take when a scenario does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Retries of a failed request when a scenario does not say.
pub const DEFAULT_RETRIES: u32 = 3;

/// An `llm` agent's model settings with every default filled in: what a scenario's [`LlmSpec`] leaves out, the
/// provider decides.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    /// Base URL up to the API version.
    pub base_url: String,
    /// Model name sent with each request.
    pub model: String,
    /// The environment variable holding the API key; none for a local server.
    pub api_key_env: Option<String>,
    /// Sampling temperature.
    pub temperature: f64,
    /// The most tokens per completion.
    pub max_tokens: u32,
    /// Timeout of one request in seconds.
    pub timeout_secs: u64,
    /// Retries of a request after a timeout, connection error, 429 or 5xx.
    pub retries: u32,
}

impl ModelSettings {
    /// `spec` with the defaults filled in, its base URL exactly as written (no environment override).
    pub fn of(spec: &LlmSpec) -> ModelSettings {
        ModelSettings {
            base_url: spec.base_url.clone().unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            model: spec.model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
            api_key_env: spec.api_key_env.clone(),
            temperature: spec.temperature,
            max_tokens: spec.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            timeout_secs: spec.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
            retries: spec.retries.unwrap_or(DEFAULT_RETRIES),
        }
    }

    /// `spec` with the defaults filled in, `LESSRT_LLM_BASE_URL` (when set) overriding its base URL.
    pub fn from_env(spec: &LlmSpec) -> ModelSettings {
        let mut settings = ModelSettings::of(spec);
        if let Some(url) = std::env::var(BASE_URL_ENV).ok().filter(|u| !u.is_empty()) {
            settings.base_url = url;
        }
        settings
    }
}

impl Default for ModelSettings {
    fn default() -> ModelSettings {
        ModelSettings::of(&LlmSpec::default())
    }
}

/// Where LLM agents get their answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// The live endpoint of each agent.
    Live,
    /// The live endpoint, every exchange written to the directory.
    Record(PathBuf),
    /// The directory's exchanges; no server.
    Replay(PathBuf),
}

impl ModelSource {
    /// The source `--record DIR` / `--replay DIR` name (recording wins; neither: live).
    pub fn from_dirs(record: Option<&Path>, replay: Option<&Path>) -> ModelSource {
        match (record, replay) {
            (Some(dir), _) => ModelSource::Record(dir.to_owned()),
            (None, Some(dir)) => ModelSource::Replay(dir.to_owned()),
            (None, None) => ModelSource::Live,
        }
    }
}

/// Builds a [`ScriptedAgent`] or an [`LlmAgent`] for each agent, as its `kind` says. What the models spend is
/// handed to the runtime turn by turn (`Agent::take_usage`), which records it in the ledger and the report.
pub struct AgentsFactory {
    models: HashMap<String, (Arc<dyn CompletionModel>, Sampling)>,
    /// The longest turn of each `llm` agent (see [`turn_timeout`]).
    turn_timeouts: HashMap<String, Duration>,
    /// How many requests the agents' endpoints serve at once: the least any `llm` agent's settings say.
    parallel: Option<usize>,
}

/// Completions an LLM agent's turn may wait for: choosing what to read and the report, each with a corrective retry
/// of unusable output, one resend after a gateway's refusal, and its parent's decision on a deref request (with its
/// retry).
const COMPLETIONS_PER_TURN: u32 = 2 * (1 + llm_agent::OUTPUT_RETRIES) + 1 + (1 + llm_agent::OUTPUT_RETRIES);
/// What a turn does besides asking its model (deliveries, dereferences, memory puts), at most.
const TURN_MARGIN: Duration = Duration::from_secs(60);

/// The longest one turn of an LLM agent with `spec` may take: each completion it may ask for
/// ([`COMPLETIONS_PER_TURN`]) running every attempt to its timeout, with the longest backoffs between attempts,
/// plus a margin for the rest of the turn. A step limit below this would end a run whose model is only slow.
pub fn turn_timeout(spec: &ModelSettings) -> Duration {
    let attempts = spec.retries.saturating_add(1);
    let per_attempt = Duration::from_secs(spec.timeout_secs);
    let backoffs = openai::MAX_RETRY_AFTER.saturating_mul(spec.retries);
    let per_completion = per_attempt.saturating_mul(attempts).saturating_add(backoffs);
    per_completion.saturating_mul(COMPLETIONS_PER_TURN).saturating_add(TURN_MARGIN)
}

/// Hosts besides loopback an `llm` agent's API key may be sent to, comma-separated, beside [`PROVIDER_HOSTS`].
pub const MODEL_HOSTS_ENV: &str = "LESSRT_MODEL_HOSTS";

/// Hosted model providers whose API an OpenAI-compatible `base_url` names: a key sent there goes where its owner
/// would send it.
pub const PROVIDER_HOSTS: &[&str] = &[
    "api.openai.com",
    "api.anthropic.com",
    "openrouter.ai",
    "api.groq.com",
    "api.together.xyz",
    "api.mistral.ai",
    "api.deepseek.com",
    "api.fireworks.ai",
    "api.x.ai",
    "generativelanguage.googleapis.com",
];

/// Why `settings` may not send its API key where its `base_url` points (`None`: no key, or a host trusted with it:
/// loopback, a [`PROVIDER_HOSTS`] entry, one of `$LESSRT_MODEL_HOSTS`, `$LESSRT_LLM_BASE_URL`'s or one of `trusted`). A scenario names both the
/// variable and the URL, so without this one from anywhere could send any variable of the user's environment (a
/// token of another service) to its own server.
pub fn untrusted_key_destination(settings: &ModelSettings, trusted: &[String]) -> Option<LlmError> {
    let var = settings.api_key_env.as_ref()?;
    let host = host_of(&settings.base_url);
    let listed: Vec<String> = std::env::var(MODEL_HOSTS_ENV)
        .unwrap_or_default()
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect();
    let ok = is_loopback_host(&host)
        || PROVIDER_HOSTS.contains(&host.as_str())
        || listed.contains(&host)
        || trusted.iter().any(|t| t.eq_ignore_ascii_case(&host))
        || std::env::var(BASE_URL_ENV).is_ok_and(|url| host_of(&url) == host);
    (!ok).then(|| LlmError::KeyHostUntrusted { var: var.clone(), host })
}

/// The host of `url`, lowercased, without brackets (empty when it names none).
pub fn host_of(url: &str) -> String {
    let host = url.parse::<hyper::Uri>().ok().and_then(|uri| uri.host().map(str::to_owned)).unwrap_or_default();
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

fn is_loopback_host(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl AgentsFactory {
    /// Models for every `llm` agent of `scenario`, from `source`; a live or recording source refuses to send an API
    /// key to a host nobody trusted with it ([`untrusted_key_destination`]).
    pub fn for_scenario(scenario: &Scenario, source: &ModelSource) -> Result<AgentsFactory, LlmError> {
        AgentsFactory::for_scenario_trusting(scenario, source, &[])
    }

    /// [`AgentsFactory::for_scenario`], the key also trusted to `hosts` (ones the user named on the command line).
    pub fn for_scenario_trusting(
        scenario: &Scenario,
        source: &ModelSource,
        hosts: &[String],
    ) -> Result<AgentsFactory, LlmError> {
        let mut models = HashMap::new();
        let mut turn_timeouts = HashMap::new();
        let mut parallel: Option<usize> = None;
        for agent in scenario.agents.iter().filter(|a| a.kind == AgentKind::Llm) {
            let llm = agent.llm.clone().unwrap_or_default();
            if let Some(n) = llm.parallel {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                parallel = Some(parallel.map_or(n, |p| p.min(n)));
            }
            let spec = ModelSettings::from_env(&llm);
            if !matches!(source, ModelSource::Replay(_))
                && let Some(untrusted) = untrusted_key_destination(&spec, hosts)
            {
                return Err(untrusted);
            }
            let model = model_for(live_model(&spec), source)?;
            models.insert(
                agent.id.clone(),
                (model, Sampling { temperature: spec.temperature, max_tokens: spec.max_tokens }),
            );
            turn_timeouts.insert(agent.id.clone(), turn_timeout(&spec));
        }
        Ok(AgentsFactory { models, turn_timeouts, parallel })
    }

    /// Every model's completion made to take `latency` (`--replay-latency`, over a replay: the wall time a hosted
    /// model would give).
    pub fn paced(mut self, latency: Duration) -> AgentsFactory {
        for (model, _) in self.models.values_mut() {
            *model = Arc::new(record::Paced::new(model.clone(), latency));
        }
        self
    }
}

/// `live` as `source` says: itself, itself with every exchange recorded, or a recording in its place.
pub fn model_for(live: Arc<dyn CompletionModel>, source: &ModelSource) -> Result<Arc<dyn CompletionModel>, LlmError> {
    Ok(match source {
        ModelSource::Live => live,
        ModelSource::Record(dir) => Arc::new(Recorder::new(live, dir)?),
        ModelSource::Replay(dir) => Arc::new(Replayer::new(dir)?),
    })
}

/// The OpenAI-compatible client `spec` describes.
pub fn live_model(spec: &ModelSettings) -> Arc<dyn CompletionModel> {
    let mut config = OpenAiConfig::new(spec.base_url.clone(), spec.model.clone());
    config.api_key_env = spec.api_key_env.clone();
    config.timeout = Duration::from_secs(spec.timeout_secs);
    config.retries = spec.retries;
    Arc::new(OpenAiCompatible::new(config))
}

impl AgentFactory for AgentsFactory {
    fn make(&self, seat: &Seat) -> Box<dyn Agent> {
        match self.models.get(&seat.spec.id) {
            Some((model, sampling)) => {
                Box::new(LlmAgent::new(&seat.spec.id, model.clone(), *sampling).with_seat(seat.clone()))
            }
            None => Box::new(ScriptedAgent::default()),
        }
    }

    fn turn_timeout(&self, spec: &AgentSpec) -> Option<Duration> {
        self.turn_timeouts.get(&spec.id).copied()
    }

    fn parallel(&self) -> Option<usize> {
        self.parallel
    }
}

impl Agent for ScriptedAgent {
    fn next<'a>(&'a mut self, turn: &'a TurnInput) -> AgentFuture<'a, Action> {
        Box::pin(async move { self.next_action(turn) })
    }
}

impl ScriptedAgent {
    fn next_action(&mut self, turn: &TurnInput) -> Action {
        if turn.done.is_empty() {
            self.queue = actions_for(turn).into();
        }
        if let Some(Done { action: Action::Report(report), outcome: Outcome::Refused(_) }) = turn.last() {
            // `paste_twice` resends the same over-budget message, so the receiver's gateway escalates; otherwise the
            // compliant resend: the same engrams and pointers, nothing pasted, nothing padded.
            return match &turn.step {
                Step::Report(step) if step.misbehave == Some(Misbehaviour::PasteTwice) => {
                    Action::Report(report.clone())
                }
                Step::Report(step) => Action::Report(ReportAction {
                    engrams: step.engrams.clone(),
                    paste_sources: false,
                    ..report.clone()
                }),
                _ => Action::Finish,
            };
        }
        self.queue.pop_front().unwrap_or(Action::Finish)
    }
}

/// The scripted actions of a turn's step, in order.
fn actions_for(turn: &TurnInput) -> Vec<Action> {
    match &turn.step {
        Step::Brief { to, now, constraints, risks, packs, grants, tasks, symbols, capsules, .. } => {
            // A tampered grant is forged by the agent itself (signed with a key that is not the run's), so the
            // grantee's gateway must refuse it; the fair baseline has no grants at all.
            let (forged, issued): (Vec<GrantSpec>, Vec<GrantSpec>) = grants.iter().cloned().partition(|g| g.tamper);
            let mut actions: Vec<Action> = if turn.mode == WireMode::Verbatim {
                Vec::new()
            } else {
                forged.iter().filter_map(|spec| forged_grant(turn, spec)).collect()
            };
            actions.push(Action::Brief(BriefAction {
                to: to.clone(),
                now: now.clone(),
                constraints: constraints.clone(),
                risks: risks.clone(),
                packs: packs.clone(),
                grants: issued,
                tasks: tasks.clone(),
                symbols: symbols.clone(),
                capsules: capsules.clone(),
            }));
            actions
        }
        Step::Deref { pointers, reason, intended_use, grant, .. } => vec![Action::Deref(DerefAction {
            pointers: pointers.clone(),
            reason: reason.clone(),
            intended_use: intended_use.clone(),
            grant: grant.clone(),
        })],
        Step::Report(step) => {
            // Misbehaviour exercises the gateways; the verbatim baseline has none, and its reports paste what they
            // cite anyway, so there the agent sends its ordinary report and the comparison stays like for like.
            let misbehave = if turn.mode == WireMode::Less { step.misbehave } else { None };
            let engrams = if misbehave == Some(Misbehaviour::TooManyEngrams) && !step.engrams.is_empty() {
                // The schema's limit: more than a receiver budget below 12 allows.
                step.engrams.iter().cycle().take(MAX_MESSAGE_ENGRAMS).cloned().collect()
            } else {
                step.engrams.clone()
            };
            vec![Action::Report(ReportAction {
                to: step.to.clone(),
                kind: step.kind.clone(),
                engrams,
                summary: step.summary.clone(),
                paste_sources: matches!(misbehave, Some(Misbehaviour::PasteFiles | Misbehaviour::PasteTwice)),
                grant: step.grant.clone(),
            })]
        }
        Step::Query { text, k, project, scope, .. } => {
            vec![Action::Query { text: text.clone(), k: *k, project: project.clone(), scope: *scope }]
        }
        Step::Search { query, k, .. } => {
            vec![Action::Search(less_runtime::run::SearchAction { query: query.clone(), k: *k })]
        }
        Step::List { pattern, .. } => {
            vec![Action::List(less_runtime::run::ListAction { pattern: pattern.clone() })]
        }
        Step::Promote { subject, to, .. } => vec![Action::Promote { subject: subject.clone(), to: *to }],
        Step::Claim { surfaces, task, ttl_minutes, override_reason, .. } => {
            vec![Action::Claim(less_runtime::run::ClaimAction {
                surfaces: surfaces.clone(),
                task: task.clone(),
                ttl_minutes: *ttl_minutes,
                override_reason: override_reason.clone(),
            })]
        }
        Step::Release { task, .. } => vec![Action::Release { task: task.clone() }],
        Step::Panic { agent } => {
            // Scripted crash, once: the restarted agent runs the step again with attempt 1 and carries on.
            assert!(turn.attempt > 0, "scripted panic of {agent} (first attempt)");
            Vec::new()
        }
    }
}

/// The most engrams a typed message may carry (`message.v0.1.json`).
const MAX_MESSAGE_ENGRAMS: usize = 12;

/// A grant written by the agent itself and signed with a key of its own: what a tampering agent sends.
fn forged_grant(turn: &TurnInput, spec: &GrantSpec) -> Option<Action> {
    let now = time::OffsetDateTime::parse(&turn.now, &time::format_description::well_known::Rfc3339).ok()?;
    let terms = spec.terms(&turn.spec.id, now).ok()?;
    let forged = Grant::issue(terms, &[7u8; 32]);
    let doc = serde_json::to_value(&forged).ok()?;
    Some(Action::Send(SendAction { to: spec.to.clone(), kind: EnvelopeKind::Grant, doc }))
}

#[cfg(test)]
mod turn_timeout_tests {
    use std::time::Duration;

    use super::{ModelSettings, turn_timeout};

    #[test]
    fn a_turn_may_take_every_attempt_of_every_completion_it_can_ask_for() {
        // A turn may wait for 7 completions: what to read and the report (each with a corrective retry), a resend,
        // and the parent's decision on a deref request (with its retry).
        // The defaults (120 s × 4 attempts per completion) are far above the old fixed 120 s.
        let default = turn_timeout(&ModelSettings::default());
        assert!(default >= Duration::from_secs(7 * 4 * 120), "{default:?}");
        // A fast model with no retries: 7 completions of 5 s and the margin.
        let quick = ModelSettings { timeout_secs: 5, retries: 0, ..ModelSettings::default() };
        assert_eq!(turn_timeout(&quick), Duration::from_secs(7 * 5 + 60));
        // More retries, more time.
        let patient = ModelSettings { timeout_secs: 5, retries: 2, ..ModelSettings::default() };
        assert_eq!(turn_timeout(&patient), Duration::from_secs(7 * (3 * 5 + 2 * 20) + 60));
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    fn settings(url: &str, key: Option<&str>) -> ModelSettings {
        ModelSettings { base_url: url.to_owned(), api_key_env: key.map(str::to_owned), ..ModelSettings::default() }
    }

    /// An API key goes to loopback, a known provider or a host the user trusted, never to a host a scenario chose.
    #[test]
    fn a_key_goes_only_to_a_trusted_host() {
        for ok in
            ["http://127.0.0.1:8437/v1", "http://localhost:1/v1", "http://[::1]:8/v1", "https://api.openai.com/v1"]
        {
            assert_eq!(untrusted_key_destination(&settings(ok, Some("K")), &[]), None, "{ok}");
        }
        assert_eq!(untrusted_key_destination(&settings("https://evil.example/v1", None), &[]), None, "no key sent");
        let refused = untrusted_key_destination(&settings("https://EVIL.example:8443/v1", Some("GH_TOKEN")), &[]);
        assert_eq!(refused, Some(LlmError::KeyHostUntrusted { var: "GH_TOKEN".into(), host: "evil.example".into() }));
        assert_eq!(refused.expect("refused").code(), "LLM_KEY_HOST_UNTRUSTED");
        let trusted = ["evil.example".to_owned()];
        assert_eq!(untrusted_key_destination(&settings("https://evil.example/v1", Some("K")), &trusted), None);
        // A look-alike of a provider is not the provider.
        assert!(
            untrusted_key_destination(&settings("https://api.openai.com.evil.example/v1", Some("K")), &[]).is_some()
        );
        assert!(
            untrusted_key_destination(&settings("https://api.openai.com@evil.example/v1", Some("K")), &[]).is_some()
        );
    }
}
