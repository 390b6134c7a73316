//! The budget enforcer in front of every agent's mailbox, and the pure rules it applies.
//!
//! Nobody holds an agent's `ActorRef` but its gateway: messages to the agent, the supervisor's turn requests and the
//! agent's own derefs and grant requests all pass here.
//! Rules (LESS mode): a delivered document must validate; its wire text must fit the receiver's MAX_INLINE_TOKENS;
//! it may carry at most MAX_ENGRAMS engrams; inline code needs a grant. A refusal goes back to the sender with the code
//! and the instruction; the second consecutive refusal of the same sender also escalates to the sender's parent.
//! Derefs are metered per turn (MAX_REPO_SPANS, MAX_ARTIFACT_SECTIONS, MAX_SAM_ITEMS, MAX_DEREF_TOKENS_TOTAL); what
//! the budget cannot cover needs a valid grant, else LESS_DEREF_DENIED.
//! Verbatim mode is the baseline: everything is counted, nothing is refused.
//!
//! Restart policy: the gateway supervises its agent. An agent that panics is restarted from its arguments, at most
//! [`MAX_RESTARTS`] times per [`RESTART_WINDOW`]; past that the agent stays down and the gateway escalates to its parent.
//! Every restart is recorded in the ledger.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use serde_json::Value;

use crate::budget::Budget;
use crate::error::{ErrorCode, Violation};
use crate::grant::{Grant, GrantTerms};
use crate::pointer::{Pointer, PointerType};
use crate::resolver::Resolved;
use crate::run::agent::{ActOutcome, ActRequest, AgentActor, AgentArgs, AgentMsg};
use crate::run::ledger::Event;
use crate::run::resolver_actor::ResolverMsg;
use crate::run::wire::{DerefAction, Envelope, EnvelopeKind};
use crate::run::{Directory, RunContext};
use crate::scenario::{GrantSpec, WireMode};
use crate::schema::DocKind;
use crate::tokens::TokenCounter;
use crate::ttl::Ttl;
use crate::validate::validate;

/// Most restarts of one agent per window.
pub const MAX_RESTARTS: usize = 3;
/// The restart window.
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// Checks an inbound envelope against the receiver's budget; returns its token count.
///
/// Order: the schema, then the engram count, inline code, and the token budget, so the refusal names the most
/// specific rule broken.
pub fn check_inbound(
    envelope: &Envelope,
    budget: &Budget,
    counter: &TokenCounter,
    code_allowance: u32,
) -> Result<u32, Violation> {
    let kind = match envelope.kind {
        EnvelopeKind::Brief => DocKind::Brief,
        EnvelopeKind::Message | EnvelopeKind::Escalation => DocKind::Message,
        EnvelopeKind::Grant => DocKind::Grant,
    };
    if let Some(first) = validate(kind, &envelope.doc).into_iter().next() {
        return Err(first);
    }
    let n_engrams = envelope.doc.get("engrams").and_then(Value::as_array).map_or(0, Vec::len);
    if n_engrams > budget.max_engrams as usize {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "/engrams",
            format!("{n_engrams} engrams; the receiver accepts at most {}", budget.max_engrams),
        ));
    }
    if let Some(code) = &envelope.inline_code {
        let n_code = counter.count(code);
        let allowed = budget.max_inline_code + code_allowance;
        if n_code > allowed {
            return Err(Violation::new(
                ErrorCode::BudgetExceeded,
                "/body",
                format!("{n_code} tokens of inline code; {allowed} allowed without a grant covering them"),
            ));
        }
    }
    let n_tokens = counter.count(&envelope.wire);
    if n_tokens > budget.max_inline_tokens {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "",
            format!("{n_tokens} inline tokens; the receiver accepts at most {}", budget.max_inline_tokens),
        ));
    }
    Ok(n_tokens)
}

/// Per-turn deref usage of one agent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DerefMeter {
    /// The turn these counts belong to.
    pub turn: u64,
    /// Repo spans pulled.
    pub repo_spans: u32,
    /// Artifact sections pulled.
    pub artifact_sections: u32,
    /// Episodic items pulled.
    pub sam_items: u32,
    /// Tokens pulled.
    pub tokens: u32,
}

impl DerefMeter {
    /// What the meter would read after `items` (type, tokens); `None` when the budget cannot cover them.
    pub fn admit(&self, budget: &Budget, items: &[(PointerType, u32)]) -> Option<DerefMeter> {
        let mut next = *self;
        for &(ty, n_tokens) in items {
            match ty {
                PointerType::Repo | PointerType::Diff | PointerType::Test => next.repo_spans += 1,
                PointerType::Artifact => next.artifact_sections += 1,
                PointerType::Sam => next.sam_items += 1,
                PointerType::Url => {}
            }
            next.tokens += n_tokens;
        }
        let fits = next.repo_spans <= budget.max_repo_spans
            && next.artifact_sections <= budget.max_artifact_sections
            && next.sam_items <= budget.max_sam_items
            && next.tokens <= budget.max_deref_tokens_total;
        fits.then_some(next)
    }
}

/// A grant held by its grantee's gateway, with what is left of it.
#[derive(Debug, Clone)]
struct HeldGrant {
    grant: Grant,
    uses_left: u32,
    derefs_left: u32,
    tokens_left: u32,
    expires: time::OffsetDateTime,
}

/// The grants one agent holds.
#[derive(Debug, Default)]
pub struct GrantBook {
    held: HashMap<String, HeldGrant>,
}

impl GrantBook {
    /// Accepts a grant delivered to `owner`: the MAC must verify, the grantee must be `owner`, the issuer an ancestor.
    pub fn accept(
        &mut self,
        grant: Grant,
        owner: &str,
        secret: &[u8; 32],
        issuer_is_ancestor: bool,
    ) -> Result<(), Violation> {
        grant.verify(secret)?;
        let terms = &grant.terms;
        if terms.grantee != owner {
            return Err(grant_invalid(&terms.grant_id, &format!("it was issued to {}, not {owner}", terms.grantee)));
        }
        if !issuer_is_ancestor {
            return Err(grant_invalid(&terms.grant_id, &format!("{} is not an ancestor of {owner}", terms.issuer)));
        }
        let expires = parse_time(&terms.expires_at).ok_or_else(|| grant_invalid(&terms.grant_id, "bad expiry"))?;
        let held = HeldGrant {
            uses_left: terms.uses,
            derefs_left: terms.max_derefs,
            tokens_left: terms.max_tokens,
            expires,
            grant: grant.clone(),
        };
        self.held.insert(terms.grant_id.clone(), held);
        Ok(())
    }

    /// Spends one use of `grant_id` on `items` (pointer, tokens); refuses anything the grant does not cover.
    pub fn authorize(
        &mut self,
        grant_id: &str,
        requester: &str,
        items: &[(Pointer, u32)],
        now: time::OffsetDateTime,
    ) -> Result<(), Violation> {
        let held = self.held.get_mut(grant_id).ok_or_else(|| {
            grant_invalid(grant_id, &format!("{requester} holds no such grant (grants cannot be shared or forged)"))
        })?;
        if held.grant.terms.grantee != requester {
            return Err(grant_invalid(grant_id, "presented by an agent it was not issued to"));
        }
        if now > held.expires {
            return Err(grant_invalid(grant_id, &format!("expired at {}", held.grant.terms.expires_at)));
        }
        if held.uses_left == 0 {
            return Err(grant_invalid(grant_id, "no uses left"));
        }
        let n_tokens: u32 = items.iter().map(|(_, n)| n).sum();
        let n_items = u32::try_from(items.len()).unwrap_or(u32::MAX);
        if n_items > held.derefs_left || n_tokens > held.tokens_left {
            return Err(Violation::new(
                ErrorCode::DerefDenied,
                "",
                format!(
                    "grant {grant_id} has {} derefs and {} tokens left; the request needs {n_items} and {n_tokens}",
                    held.derefs_left, held.tokens_left
                ),
            ));
        }
        for (pointer, _) in items {
            let text = pointer.to_string();
            let covered = held.grant.terms.patterns.iter().any(|pattern| glob_matches(pattern, &text));
            if !covered {
                return Err(Violation::new(
                    ErrorCode::DerefDenied,
                    "",
                    format!("grant {grant_id} does not cover {text}"),
                ));
            }
        }
        held.uses_left -= 1;
        held.derefs_left -= n_items;
        held.tokens_left -= n_tokens;
        Ok(())
    }
}

/// Grant patterns over pointer text forms: `**` matches anything, `*` anything but `/`, `?` one character but `/`;
/// everything else matches itself. So `repo:src/*.rs` covers the files of `src/` only, `repo:src/**` the whole tree,
/// and `diff:a..b#**` every path of a diff.
fn glob_matches(pattern: &str, text: &str) -> bool {
    fn matches(p: &[char], t: &[char]) -> bool {
        match p {
            [] => t.is_empty(),
            ['*', '*', rest @ ..] => (0..=t.len()).any(|skip| matches(rest, &t[skip..])),
            ['*', rest @ ..] => {
                let segment = t.iter().position(|&c| c == '/').unwrap_or(t.len());
                (0..=segment).any(|skip| matches(rest, &t[skip..]))
            }
            ['?', rest @ ..] => t.first().is_some_and(|&c| c != '/') && matches(rest, &t[1..]),
            [c, rest @ ..] => t.first() == Some(c) && matches(rest, &t[1..]),
        }
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    matches(&pattern, &text)
}

fn grant_invalid(grant_id: &str, why: &str) -> Violation {
    Violation::new(ErrorCode::GrantInvalid, "", format!("grant {grant_id}: {why}"))
}

pub(crate) fn parse_time(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

/// The gateway actor.
pub struct GatewayActor;

/// Messages to a gateway.
pub enum GatewayMsg {
    /// A message for the agent, from another agent; the reply is the token count or the refusal.
    Deliver(Box<Envelope>, RpcReplyPort<Result<u32, Violation>>),
    /// An escalation written by another gateway: counted and forwarded, never refused.
    DeliverSystem(Box<Envelope>),
    /// The supervisor asks the agent to take a turn.
    Act(ActRequest, RpcReplyPort<ActOutcome>),
    /// The agent's own deref request.
    Deref(DerefAction, u64, RpcReplyPort<DerefOutcome>),
    /// The agent issues a grant to a descendant.
    IssueGrant(GrantSpec, RpcReplyPort<Result<Grant, Violation>>),
}

/// The answer to a deref.
#[derive(Debug, Clone)]
pub struct DerefOutcome {
    /// The content, when allowed.
    pub result: Result<Vec<Resolved>, Violation>,
}

/// Everything a gateway starts from.
pub struct GatewayArgs {
    /// The run.
    pub ctx: Arc<RunContext>,
    /// The agent it fronts.
    pub agent_id: String,
}

/// A gateway's mutable state.
pub struct GatewayState {
    ctx: Arc<RunContext>,
    agent_id: String,
    budget: Budget,
    agent: Option<ActorRef<AgentMsg>>,
    meter: DerefMeter,
    grants: GrantBook,
    refusals_by_sender: HashMap<String, u32>,
    restarts: Vec<Instant>,
    n_restarts_total: u32,
}

impl Actor for GatewayActor {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = GatewayArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<GatewayMsg>,
        args: GatewayArgs,
    ) -> Result<GatewayState, ActorProcessingErr> {
        let role = args.ctx.scenario.agent(&args.agent_id).map(|a| a.role.clone()).unwrap_or_default();
        let budget = args.ctx.scenario.budgets.of(&role);
        let mut state = GatewayState {
            ctx: args.ctx,
            agent_id: args.agent_id,
            budget,
            agent: None,
            meter: DerefMeter::default(),
            grants: GrantBook::default(),
            refusals_by_sender: HashMap::new(),
            restarts: Vec::new(),
            n_restarts_total: 0,
        };
        state.agent = Some(spawn_agent(&myself, &state, 0).await?);
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<GatewayMsg>,
        msg: GatewayMsg,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Deliver(envelope, reply) => {
                let verdict = state.deliver(*envelope);
                let _ = reply.send(verdict);
            }
            GatewayMsg::DeliverSystem(envelope) => state.deliver_system(*envelope),
            GatewayMsg::Act(request, reply) => match &state.agent {
                Some(agent) => {
                    // The reply port travels with the request, so this gateway stays free to serve the agent's derefs.
                    if let Err(err) = agent.send_message(AgentMsg::Act(request, reply)) {
                        tracing::warn!(agent = %state.agent_id, "act not delivered: {err}");
                    }
                }
                None => {
                    let _ = reply.send(ActOutcome::down(&state.agent_id));
                }
            },
            GatewayMsg::Deref(action, turn, reply) => {
                let outcome = state.deref(action, turn).await;
                let _ = reply.send(outcome);
            }
            GatewayMsg::IssueGrant(spec, reply) => {
                let _ = reply.send(state.issue_grant(&spec));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<GatewayMsg>,
        event: SupervisionEvent,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(_, err) = event {
            state.agent = None;
            let now = Instant::now();
            state.restarts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
            if state.restarts.len() >= MAX_RESTARTS {
                state.ctx.record(Event::AgentDown { agent: state.agent_id.clone(), reason: err.to_string() });
                state.escalate_to_parent(&format!(
                    "{} failed {} times within {:?}; left down: {err}",
                    state.agent_id,
                    MAX_RESTARTS + 1,
                    RESTART_WINDOW
                ));
                return Ok(());
            }
            state.restarts.push(now);
            state.n_restarts_total += 1;
            state.ctx.record(Event::Restart { agent: state.agent_id.clone(), reason: err.to_string() });
            state.agent = Some(spawn_agent(&myself, state, state.n_restarts_total).await?);
        }
        Ok(())
    }
}

async fn spawn_agent(
    myself: &ActorRef<GatewayMsg>,
    state: &GatewayState,
    generation: u32,
) -> Result<ActorRef<AgentMsg>, ActorProcessingErr> {
    let args = AgentArgs { ctx: state.ctx.clone(), agent_id: state.agent_id.clone(), gateway: myself.clone() };
    let (agent, _) = Actor::spawn_linked(
        Some(format!("{}:{}:agent:{}:{generation}", state.ctx.run_id, state.ctx.mode.as_str(), state.agent_id)),
        AgentActor,
        args,
        myself.get_cell(),
    )
    .await?;
    Ok(agent)
}

impl GatewayState {
    fn directory(&self) -> &Directory {
        &self.ctx.directory
    }

    fn deliver(&mut self, envelope: Envelope) -> Result<u32, Violation> {
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let verdict = match self.ctx.mode {
            WireMode::Verbatim => Ok(counter.count(&envelope.wire)),
            WireMode::Less => {
                let allowance =
                    self.ctx.code_allowance(envelope.doc.get("grant_id").and_then(Value::as_str), &envelope.from);
                let checked = check_inbound(&envelope, &self.budget, counter, allowance);
                match (checked, envelope.kind) {
                    (Ok(n), EnvelopeKind::Grant) => self.accept_grant(&envelope).map(|()| n),
                    (other, _) => other,
                }
            }
        };
        match &verdict {
            Ok(n_tokens) => {
                self.refusals_by_sender.remove(&envelope.from);
                for engram in envelope.doc.get("engrams").and_then(Value::as_array).into_iter().flatten() {
                    let id = engram.get("id").and_then(Value::as_str).unwrap_or_default();
                    let kind = engram.get("kind").and_then(Value::as_str).unwrap_or_default();
                    tracing::info!(target: "less.engram.put", id, kind, from = %envelope.from);
                }
                self.ctx.record(Event::Delivered {
                    from: envelope.from.clone(),
                    to: envelope.to.clone(),
                    msg_id: envelope.msg_id.clone(),
                    kind: envelope.kind,
                    tokens: *n_tokens,
                    max_tokens: self.budget.max_inline_tokens,
                    doc: envelope.doc.clone(),
                });
                self.ctx
                    .resolver
                    .send_message(ResolverMsg::Remember(envelope.msg_id.clone(), envelope.doc.clone()))
                    .ok();
                if let Some(agent) = &self.agent {
                    agent.send_message(AgentMsg::Inbox(Box::new(envelope))).ok();
                }
            }
            Err(violation) => {
                let n_refusals = self.refusals_by_sender.entry(envelope.from.clone()).or_insert(0);
                *n_refusals += 1;
                let n_refusals = *n_refusals;
                tracing::info!(target: "less.budget.reject", from = %envelope.from, to = %envelope.to, code = %violation.code);
                self.ctx.record(Event::Rejected {
                    from: envelope.from.clone(),
                    to: envelope.to.clone(),
                    msg_id: envelope.msg_id.clone(),
                    code: violation.code,
                    message: violation.message.clone(),
                    instruction: violation.code.instruction().to_owned(),
                    tokens: counter.count(&envelope.wire),
                    attempt: n_refusals,
                });
                if n_refusals >= 2 {
                    self.refusals_by_sender.remove(&envelope.from);
                    self.escalate_sender(&envelope.from, violation);
                }
            }
        }
        verdict
    }

    fn accept_grant(&mut self, envelope: &Envelope) -> Result<(), Violation> {
        let grant: Grant = serde_json::from_value(envelope.doc.clone())
            .map_err(|err| Violation::new(ErrorCode::GrantInvalid, "", err.to_string()))?;
        let is_ancestor = self.ctx.scenario.is_ancestor(&grant.terms.issuer, &self.agent_id);
        let result = self.grants.accept(grant, &self.agent_id, &self.ctx.secret, is_ancestor);
        if result.is_ok() {
            tracing::info!(target: "less.deref.grant", grantee = %self.agent_id, from = %envelope.from);
        }
        result
    }

    fn deliver_system(&mut self, envelope: Envelope) {
        let n_tokens = TokenCounter::shared(self.ctx.scenario.tokenizer).count(&envelope.wire);
        self.ctx.record(Event::Delivered {
            from: envelope.from.clone(),
            to: envelope.to.clone(),
            msg_id: envelope.msg_id.clone(),
            kind: envelope.kind,
            tokens: n_tokens,
            max_tokens: self.budget.max_inline_tokens,
            doc: envelope.doc.clone(),
        });
        if let Some(agent) = &self.agent {
            agent.send_message(AgentMsg::Inbox(Box::new(envelope))).ok();
        }
    }

    /// The second refusal of `sender` in a row: tell the sender's parent.
    fn escalate_sender(&self, sender: &str, violation: &Violation) {
        let reason = format!(
            "{sender} was refused twice by {}'s gateway ({}): {}",
            self.agent_id, violation.code, violation.message
        );
        self.send_escalation(sender, &reason);
    }

    fn escalate_to_parent(&self, reason: &str) {
        self.send_escalation(&self.agent_id.clone(), reason);
    }

    fn send_escalation(&self, about: &str, reason: &str) {
        let Some(parent) = self.ctx.scenario.agent(about).and_then(|a| a.parent.clone()) else { return };
        let Some(gateway) = self.directory().get(&parent) else { return };
        let msg_id = self.ctx.next_msg_id(&format!("{}-gw", self.agent_id));
        let reason: String = reason.chars().take(480).collect();
        let doc = serde_json::json!({
            "type": "escalation", "from": format!("{}-gw", self.agent_id), "msg_id": msg_id, "to": parent,
            "reason": reason, "severity": "warning", "refs": [format!("sam:agent:{about}")],
        });
        let wire = doc.to_string();
        self.ctx.record(Event::Escalated { about: about.to_owned(), to: parent.clone(), reason: reason.clone() });
        let envelope = Envelope {
            from: format!("{}-gw", self.agent_id),
            to: parent,
            msg_id,
            kind: EnvelopeKind::Escalation,
            doc,
            wire,
            inline_code: None,
        };
        gateway.send_message(GatewayMsg::DeliverSystem(Box::new(envelope))).ok();
    }

    async fn deref(&mut self, action: DerefAction, turn: u64) -> DerefOutcome {
        if turn != self.meter.turn {
            self.meter = DerefMeter { turn, ..DerefMeter::default() };
        }
        let pointers: Result<Vec<Pointer>, Violation> = action.pointers.iter().map(|t| Pointer::parse(t)).collect();
        let pointers = match pointers {
            Ok(p) => p,
            Err(v) => return self.deref_refused(&action, v),
        };
        tracing::info!(target: "less.deref.request", agent = %self.agent_id, n = pointers.len());
        let resolved = match ractor::call!(self.ctx.resolver, ResolverMsg::Resolve, pointers.clone()) {
            Ok(Ok(resolved)) => resolved,
            Ok(Err(violation)) => return self.deref_refused(&action, violation),
            Err(err) => {
                return self.deref_refused(&action, Violation::new(ErrorCode::PointerUnresolved, "", err.to_string()));
            }
        };
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let items: Vec<(Pointer, u32)> =
            resolved.iter().map(|r| (r.pointer.clone(), counter.count(&r.content))).collect();
        let n_tokens: u32 = items.iter().map(|(_, n)| n).sum();
        let mut via_grant = None;
        if self.ctx.mode == WireMode::Less {
            let typed: Vec<(PointerType, u32)> = items.iter().map(|(p, n)| (p.ty(), *n)).collect();
            match self.meter.admit(&self.budget, &typed) {
                Some(next) => self.meter = next,
                None => {
                    let Some(grant_id) = &action.grant else {
                        let violation = Violation::new(
                            ErrorCode::DerefDenied,
                            "",
                            format!(
                                "{} pointers / {n_tokens} tokens exceed this turn's deref budget (repo {}/{}, artifact {}/{}, sam {}/{}, tokens {}/{}) and no grant was presented",
                                items.len(),
                                self.meter.repo_spans,
                                self.budget.max_repo_spans,
                                self.meter.artifact_sections,
                                self.budget.max_artifact_sections,
                                self.meter.sam_items,
                                self.budget.max_sam_items,
                                self.meter.tokens,
                                self.budget.max_deref_tokens_total
                            ),
                        );
                        return self.deref_refused(&action, violation);
                    };
                    let now = time::OffsetDateTime::now_utc();
                    if let Err(violation) = self.grants.authorize(grant_id, &self.agent_id, &items, now) {
                        return self.deref_refused(&action, violation);
                    }
                    via_grant = Some(grant_id.clone());
                }
            }
        }
        self.ctx.record(Event::Deref {
            agent: self.agent_id.clone(),
            pointers: action.pointers.clone(),
            tokens: n_tokens,
            granted: true,
            via_grant,
            code: None,
        });
        DerefOutcome { result: Ok(resolved) }
    }

    fn deref_refused(&self, action: &DerefAction, violation: Violation) -> DerefOutcome {
        self.ctx.record(Event::Deref {
            agent: self.agent_id.clone(),
            pointers: action.pointers.clone(),
            tokens: 0,
            granted: false,
            via_grant: action.grant.clone(),
            code: Some(violation.code),
        });
        DerefOutcome { result: Err(violation) }
    }

    fn issue_grant(&self, spec: &GrantSpec) -> Result<Grant, Violation> {
        if !self.ctx.scenario.is_ancestor(&self.agent_id, &spec.to) {
            return Err(grant_invalid(
                &spec.id,
                &format!("{} may only grant to its descendants, not {}", self.agent_id, spec.to),
            ));
        }
        let ttl = Ttl::parse(&spec.ttl)?;
        let expires = time::OffsetDateTime::now_utc() + ttl.duration();
        let expires_at = expires
            .replace_nanosecond(0)
            .unwrap_or(expires)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let terms = GrantTerms {
            grant_id: spec.id.clone(),
            issuer: self.agent_id.clone(),
            grantee: spec.to.clone(),
            patterns: spec.patterns.clone(),
            max_derefs: spec.max_derefs,
            max_tokens: spec.max_tokens,
            inline_code_tokens: spec.inline_code_tokens,
            expires_at,
            uses: spec.uses,
        };
        let grant = Grant::issue(terms, &self.ctx.secret);
        self.ctx
            .issued_grants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(grant.terms.grant_id.clone(), grant.clone());
        self.ctx.record(Event::GrantIssued {
            issuer: self.agent_id.clone(),
            grantee: spec.to.clone(),
            grant_id: spec.id.clone(),
        });
        Ok(grant)
    }
}

#[cfg(test)]
mod tests;
