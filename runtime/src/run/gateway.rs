//! The budget enforcer in front of every agent's mailbox, and the pure rules it applies.
//!
//! Nobody holds an agent's `ActorRef` but its gateway: messages to the agent, the supervisor's turn requests and the
//! agent's own derefs and grant requests all pass here.
//! Every mode: a delivered document must validate; it is checked once, here, into a typed [`Document`].
//! Rules (LESS mode): its wire text must fit the receiver's MAX_INLINE_TOKENS; it may carry at most MAX_ENGRAMS
//! engrams; inline code needs a grant. A refusal goes back to the sender with the code
//! and the instruction; the second consecutive refusal of the same sender also escalates to the sender's parent.
//! Derefs are metered per turn (MAX_REPO_SPANS, MAX_ARTIFACT_SECTIONS, MAX_SAM_ITEMS, MAX_DEREF_TOKENS_TOTAL); what
//! the budget cannot cover needs a valid grant, else LESS_DEREF_DENIED.
//! The baselines (verbatim, verbatim-whole): everything is counted, nothing within the contract is refused.
//!
//! Restart policy: the gateway supervises its agent. An agent that panics is restarted from its arguments, at most
//! [`MAX_RESTARTS`] times per [`RESTART_WINDOW`]; past that the agent stays down and the gateway escalates to its parent.
//! Every restart is recorded in the ledger.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use serde_json::Value;

use crate::resolver::Resolved;
use crate::run::RunContext;
use crate::run::agent::{ActOutcome, ActRequest, AgentActor, AgentArgs, AgentMsg, GrantAsk, Outcome};
use crate::run::inbox::{Inbox, InboxItem, Spill};
use crate::run::ledger::{Event, SentText, TokenLedgerMsg};
use crate::run::resolver_actor::ResolverMsg;
use crate::run::wire::{DerefAction, Document, Draft, Envelope, EnvelopeKind, ListAction, SearchAction};
use less_contract::Budget;
use less_contract::Grant;
use less_contract::TokenCounter;
use less_contract::{ErrorCode, Violation};
use less_contract::{GrantSpec, WireMode};
use less_contract::{Payload, Severity, TypedMessage, Valid};
use less_contract::{Pointer, PointerType};
pub use look::Looked;

/// Most restarts of one agent per window.
pub const MAX_RESTARTS: usize = 3;
/// The restart window.
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// Checks a checked document of `n_tokens` tokens against the receiver's budget: the engram count, then
/// MAX_INLINE_TOKENS. Inline code is checked after these by [`check_code`], so a grant's use is spent only on a
/// message that is otherwise acceptable.
pub fn check_inbound(doc: &Document, n_tokens: u32, budget: &Budget) -> Result<(), Violation> {
    let n_engrams = doc.engrams().len();
    if n_engrams > budget.max_engrams as usize {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "/engrams",
            format!("{n_engrams} engrams; the receiver accepts at most {}", budget.max_engrams),
        ));
    }
    if n_tokens > budget.max_inline_tokens {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "",
            format!("{n_tokens} inline tokens; the receiver accepts at most {}", budget.max_inline_tokens),
        ));
    }
    Ok(())
}

/// Checks `n_code` tokens of inline code against MAX_INLINE_CODE plus what a grant allows.
pub fn check_code(n_code: u32, budget: &Budget, allowance: u32) -> Result<(), Violation> {
    let allowed = budget.max_inline_code.saturating_add(allowance);
    if n_code > allowed {
        return Err(Violation::new(
            ErrorCode::BudgetExceeded,
            "/body",
            format!("{n_code} tokens of inline code; {allowed} allowed without a grant covering them"),
        ));
    }
    Ok(())
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
        let next = self.after(items);
        next.over(budget).is_empty().then_some(next)
    }

    /// What the meter would read after `items` (type, tokens), whether the budget covers them or not.
    pub fn after(&self, items: &[(PointerType, u32)]) -> DerefMeter {
        let mut next = *self;
        for &(ty, n_tokens) in items {
            match ty {
                PointerType::Repo | PointerType::Diff | PointerType::Test => {
                    next.repo_spans = next.repo_spans.saturating_add(1);
                }
                PointerType::Artifact => next.artifact_sections = next.artifact_sections.saturating_add(1),
                PointerType::Sam => next.sam_items = next.sam_items.saturating_add(1),
                PointerType::Url => {}
            }
            next.tokens = next.tokens.saturating_add(n_tokens);
        }
        next
    }

    /// The limits of `budget` these counts are over, each as `<field> <count>/<limit>` (diff and test spans count as
    /// repo spans); empty when the budget covers them.
    pub fn over(&self, budget: &Budget) -> Vec<String> {
        [
            ("max_repo_spans", self.repo_spans, budget.max_repo_spans),
            ("max_artifact_sections", self.artifact_sections, budget.max_artifact_sections),
            ("max_sam_items", self.sam_items, budget.max_sam_items),
            ("max_deref_tokens_total", self.tokens, budget.max_deref_tokens_total),
        ]
        .into_iter()
        .filter(|&(_, used, limit)| used > limit)
        .map(|(field, used, limit)| format!("{field} {used}/{limit}"))
        .collect()
    }
}

/// A grant held by its grantee's gateway, with what is left of it.
#[derive(Debug, Clone)]
struct HeldGrant {
    grant: Grant,
    /// The grant's patterns, compiled once when it is accepted.
    patterns: Vec<GrantPattern>,
    uses_left: u32,
    derefs_left: u32,
    tokens_left: u32,
    expires: time::OffsetDateTime,
}

/// What is left of a held grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantLeft {
    /// Uses (derefs or messages it may still cover).
    pub uses: u32,
    /// Pointers it may still cover.
    pub derefs: u32,
    /// Tokens it may still cover.
    pub tokens: u32,
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
        if self.held.contains_key(&terms.grant_id) {
            // Delivering a grant again must not refill its uses.
            return Err(grant_invalid(&terms.grant_id, "already held; a grant is delivered once"));
        }
        let expires = parse_time(&terms.expires_at).ok_or_else(|| grant_invalid(&terms.grant_id, "bad expiry"))?;
        let held = HeldGrant {
            uses_left: terms.uses,
            derefs_left: terms.max_derefs,
            tokens_left: terms.max_tokens,
            expires,
            patterns: terms.patterns.iter().map(|p| GrantPattern::new(p)).collect(),
            grant: grant.clone(),
        };
        self.held.insert(terms.grant_id.clone(), held);
        Ok(())
    }

    /// Accepts a grant some of which was spent already (a grant kept outside this book, as the desk keeps them):
    /// the same checks as [`GrantBook::accept`], then what is `left` of it.
    pub fn restore(
        &mut self,
        grant: Grant,
        owner: &str,
        secret: &[u8; 32],
        issuer_is_ancestor: bool,
        left: GrantLeft,
    ) -> Result<(), Violation> {
        let id = grant.terms.grant_id.clone();
        self.accept(grant, owner, secret, issuer_is_ancestor)?;
        if let Some(held) = self.held.get_mut(&id) {
            held.uses_left = left.uses.min(held.uses_left);
            held.derefs_left = left.derefs.min(held.derefs_left);
            held.tokens_left = left.tokens.min(held.tokens_left);
        }
        Ok(())
    }

    /// Whether one grant held now covers what `terms` would grant of `pattern`: the pattern within the held
    /// grant's, and no more uses, derefs, tokens, inline code or lifetime than it has left. What a holder may pass on
    /// to its own descendants (never more than it holds).
    pub fn holds(&self, pattern: &str, terms: &less_contract::GrantTerms, now: time::OffsetDateTime) -> bool {
        let expires = parse_time(&terms.expires_at);
        self.held.values().any(|held| {
            let left = GrantLeft { uses: held.uses_left, derefs: held.derefs_left, tokens: held.tokens_left };
            now <= held.expires
                && expires.is_some_and(|expires| expires <= held.expires)
                && passes_on(&held.grant.terms, left, pattern, terms)
        })
    }

    /// What is left of `grant_id`, if it is held.
    pub fn left(&self, grant_id: &str) -> Option<GrantLeft> {
        self.held.get(grant_id).map(|h| GrantLeft { uses: h.uses_left, derefs: h.derefs_left, tokens: h.tokens_left })
    }

    /// Spends one use of `grant_id` on `items` (pointer, tokens); refuses anything the grant does not cover.
    pub fn authorize(
        &mut self,
        grant_id: &str,
        requester: &str,
        items: &[(Pointer, u32)],
        now: time::OffsetDateTime,
    ) -> Result<(), Violation> {
        let held = self.live(grant_id, requester, now)?;
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
        covers(held, grant_id, items.iter().map(|(p, _)| p))?;
        held.uses_left -= 1;
        held.derefs_left -= n_items;
        held.tokens_left -= n_tokens;
        Ok(())
    }

    /// Spends one use of `grant_id` on a message of `n_code` tokens of inline code taken from `sources`; returns
    /// the inline-code tokens the grant allows.
    pub fn authorize_code(
        &mut self,
        grant_id: &str,
        sender: &str,
        sources: &[Pointer],
        n_code: u32,
        now: time::OffsetDateTime,
    ) -> Result<u32, Violation> {
        let held = self.live(grant_id, sender, now)?;
        let allowed = held.grant.terms.inline_code_tokens;
        if n_code > allowed {
            return Err(Violation::new(
                ErrorCode::BudgetExceeded,
                "/body",
                format!("{n_code} tokens of inline code; grant {grant_id} allows {allowed}"),
            ));
        }
        covers(held, grant_id, sources.iter())?;
        held.uses_left -= 1;
        Ok(allowed)
    }

    /// The held grant, if `holder` may use it now.
    fn live(&mut self, grant_id: &str, holder: &str, now: time::OffsetDateTime) -> Result<&mut HeldGrant, Violation> {
        let held = self.held.get_mut(grant_id).ok_or_else(|| {
            grant_invalid(grant_id, &format!("{holder} holds no such grant (grants cannot be shared or forged)"))
        })?;
        if held.grant.terms.grantee != holder {
            return Err(grant_invalid(grant_id, "presented by an agent it was not issued to"));
        }
        if now > held.expires {
            return Err(grant_invalid(grant_id, &format!("expired at {}", held.grant.terms.expires_at)));
        }
        if held.uses_left == 0 {
            return Err(grant_invalid(grant_id, "no uses left"));
        }
        Ok(held)
    }
}

/// Every pointer must match one of the grant's patterns.
fn covers<'a>(held: &HeldGrant, grant_id: &str, pointers: impl Iterator<Item = &'a Pointer>) -> Result<(), Violation> {
    for pointer in pointers {
        let (whole, file) = (pointer.to_string(), format!("{}:{}", pointer.ty(), pointer.location()));
        if !held.patterns.iter().any(|pattern| pattern.covers(&whole, &file)) {
            return Err(Violation::new(
                ErrorCode::DerefDenied,
                "",
                format!("grant {grant_id} does not cover {pointer}"),
            ));
        }
    }
    Ok(())
}

/// One pattern of a held grant. A pattern without `#` names files (`repo:src/**`) and covers any span and revision
/// of them; a pattern with `#` is matched against the whole text form (`diff:a..b#**`, `artifact:SPEC.md#sec=*`).
#[derive(Debug, Clone)]
struct GrantPattern {
    whole: bool,
    /// None: too large to compile; it covers nothing (a grant fails closed).
    glob: Option<regex::Regex>,
}

impl GrantPattern {
    fn new(pattern: &str) -> GrantPattern {
        GrantPattern { whole: pattern.contains('#'), glob: glob_regex(pattern) }
    }

    /// Whether it covers a pointer whose whole text form is `whole` and whose file form (`type:location`) is `file`.
    fn covers(&self, whole: &str, file: &str) -> bool {
        self.glob.as_ref().is_some_and(|glob| glob.is_match(if self.whole { whole } else { file }))
    }
}

/// What an agent may dereference without a grant: the patterns of its (or its nearest ancestor's) `reach`, or the
/// whole workspace.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// `(text, compiled)`; `None`: the whole workspace.
    patterns: Option<Vec<(String, GrantPattern)>>,
}

impl PartialEq for Reach {
    fn eq(&self, other: &Reach) -> bool {
        let texts = |r: &Reach| r.patterns.as_ref().map(|ps| ps.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
        texts(self) == texts(other)
    }
}

impl Reach {
    /// The reach of `patterns` (`None`: the whole workspace).
    pub fn new(patterns: Option<&[String]>) -> Reach {
        Reach { patterns: patterns.map(|ps| ps.iter().map(|p| (p.clone(), GrantPattern::new(p))).collect()) }
    }

    /// Whether `pointer` is within it.
    pub fn covers(&self, pointer: &Pointer) -> bool {
        let Some(patterns) = &self.patterns else { return true };
        let (whole, file) = (pointer.to_string(), format!("{}:{}", pointer.ty(), pointer.location()));
        patterns.iter().any(|(_, pattern)| pattern.covers(&whole, &file))
    }

    /// Whether everything `pattern` covers is within it.
    pub fn holds(&self, pattern: &str) -> bool {
        match &self.patterns {
            None => !less_contract::leaves_workspace(pattern),
            Some(patterns) => patterns.iter().any(|(outer, _)| less_contract::pattern_within(pattern, outer)),
        }
    }

    /// The patterns, for messages (`the workspace` when unrestricted).
    pub fn describe(&self) -> String {
        match &self.patterns {
            None => "the workspace".to_owned(),
            Some(patterns) => patterns.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(", "),
        }
    }
}

/// A deref of pointers outside the agent's reach and no grant presented.
pub(crate) fn outside_reach(agent: &str, reach: &Reach, pointer: &Pointer) -> Violation {
    Violation::new(
        ErrorCode::DerefDenied,
        "",
        format!(
            "{pointer} is outside what {agent} may read without a grant ({}): ask the parent for a grant that covers it",
            reach.describe()
        ),
    )
}

/// Whether a grant of `terms` for `pattern` is within what is `left` of the `held` grant (its lifetime apart).
pub(crate) fn passes_on(
    held: &less_contract::GrantTerms,
    left: GrantLeft,
    pattern: &str,
    terms: &less_contract::GrantTerms,
) -> bool {
    left.uses >= terms.uses.max(1)
        && left.derefs >= terms.max_derefs
        && left.tokens >= terms.max_tokens
        && held.inline_code_tokens >= terms.inline_code_tokens
        && less_contract::pattern_within_any(pattern, &held.patterns)
}

/// A grant pattern wider than what its issuer holds.
pub(crate) fn wider_than_held(grant_id: &str, issuer: &str, reach: &Reach, pattern: &str) -> Violation {
    grant_invalid(
        grant_id,
        &format!(
            "{pattern} is wider than {issuer} holds (it reads {} without a grant, and no grant it holds covers this \
             one's pattern, uses, derefs, tokens and lifetime): an agent grants only what it may read itself",
            reach.describe()
        ),
    )
}

/// Whether the grant pattern `pattern` covers `pointer`, by the rule a grantee's gateway applies: a pattern without
/// `#` names files and covers any span of them, one with `#` is matched against the whole text form. For readers of a
/// finished run (`lessrt serve` names the grant that would have covered a denied deref).
pub fn pattern_covers(pattern: &str, pointer: &Pointer) -> bool {
    let (whole, file) = (pointer.to_string(), format!("{}:{}", pointer.ty(), pointer.location()));
    GrantPattern::new(pattern).covers(&whole, &file)
}

#[cfg(test)]
fn glob_matches(pattern: &str, text: &str) -> bool {
    glob_regex(pattern).is_some_and(|glob| glob.is_match(text))
}

/// A grant pattern as a regular expression: `**` matches anything, `*` anything but `/`, `?` one character but
/// `/`; everything else matches itself. Matching takes time linear in the text whatever the pattern (a parent's
/// model writes patterns; a backtracking matcher is exponential in the number of stars). None when the pattern is
/// too large to compile.
pub(crate) fn glob_regex(pattern: &str) -> Option<regex::Regex> {
    let mut expr = String::with_capacity(pattern.len() * 2 + 2);
    expr.push('^');
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        if let Some(tail) = rest.strip_prefix("**") {
            expr.push_str("(?s:.*)");
            rest = tail;
            continue;
        }
        match c {
            '*' => expr.push_str("[^/]*"),
            '?' => expr.push_str("[^/]"),
            _ => expr.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
        }
        rest = &rest[c.len_utf8()..];
    }
    expr.push('$');
    regex::RegexBuilder::new(&expr).size_limit(1 << 20).build().ok()
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
    /// A system message (an escalation) already checked and recorded by the gateway that wrote it: only forwarded.
    Forward(Box<(Envelope, Arc<Document>, Arc<Value>, u32)>),
    /// The supervisor asks the agent to take a turn.
    Act(ActRequest, RpcReplyPort<ActOutcome>),
    /// The same from another node: the step by its index in the scenario, and the attempt.
    ActAt(usize, u32, RpcReplyPort<ActOutcome>),
    /// The agent's own deref request.
    Deref(DerefAction, RpcReplyPort<DerefOutcome>),
    /// The agent's search of the workspace index.
    Search(SearchAction, RpcReplyPort<Result<Looked, Violation>>),
    /// The agent's listing of workspace files.
    List(ListAction, RpcReplyPort<Result<Looked, Violation>>),
    /// The agent sent a message: its turn is over (the deref budget starts again).
    EndTurn,
    /// The agent issues a grant to a descendant (answering the deref request named, if any).
    IssueGrant(GrantSpec, Option<String>, RpcReplyPort<Result<Grant, Violation>>),
    /// A child asks this agent for a dereference over its budget; the agent decides (the child's turn waits).
    AskGrant(Box<GrantAsk>, RpcReplyPort<Outcome>),
    /// A receiver's gateway asks to spend one use of this agent's inline-code grant on a message it sent.
    SpendCodeGrant(CodeGrantRequest, RpcReplyPort<Result<u32, Violation>>),
    /// The agent moved here from a lost node: what the ledger says was delivered to it, oldest first (sender and
    /// document), and the pointers of each deref it was granted; taken again without being recorded again (its
    /// inbox, the grants it had accepted, the digests of what it read), then the agent starts again from them.
    Restore(Box<Restored>, RpcReplyPort<usize>),
    /// Fails this node on purpose, and with it its agent and the nodes below (tests of its parent's restart).
    #[cfg(any(test, feature = "faults"))]
    Fail,
}

/// A gateway's message as it crosses to another node: what one agent sends another, and the driver's turns. An
/// agent's requests to its own gateway (derefs, grants, the end of a turn) never leave its node.
pub(crate) fn to_wire(msg: GatewayMsg) -> Result<SerializedMessage, BoxedDowncastErr> {
    use crate::cluster::serial::{call, cast, unknown};
    match msg {
        GatewayMsg::Deliver(envelope, reply) => call("Deliver", &envelope, reply),
        GatewayMsg::Forward(forwarded) => cast("Forward", &forwarded),
        GatewayMsg::Act(request, reply) => call("Act", &(request.index, request.attempt), reply),
        GatewayMsg::ActAt(index, attempt, reply) => call("Act", &(index, attempt), reply),
        GatewayMsg::AskGrant(ask, reply) => call("AskGrant", &ask, reply),
        GatewayMsg::SpendCodeGrant(request, reply) => call("SpendCodeGrant", &request, reply),
        GatewayMsg::Deref(..) => Err(unknown("gateway", "Deref")),
        GatewayMsg::Search(..) => Err(unknown("gateway", "Search")),
        GatewayMsg::List(..) => Err(unknown("gateway", "List")),
        GatewayMsg::EndTurn => Err(unknown("gateway", "EndTurn")),
        GatewayMsg::IssueGrant(..) => Err(unknown("gateway", "IssueGrant")),
        GatewayMsg::Restore(..) => Err(unknown("gateway", "Restore")),
        #[cfg(any(test, feature = "faults"))]
        GatewayMsg::Fail => Err(unknown("gateway", "Fail")),
    }
}

/// A gateway's message read from another node.
pub(crate) fn from_wire(message: SerializedMessage) -> Result<GatewayMsg, BoxedDowncastErr> {
    use crate::cluster::serial::{answer, args, parts, port, unknown};
    let (variant, bytes, reply) = parts(message)?;
    Ok(match variant.as_str() {
        "Deliver" => GatewayMsg::Deliver(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
        "Forward" => GatewayMsg::Forward(args(&variant, &bytes)?),
        "Act" => {
            let (index, attempt) = args(&variant, &bytes)?;
            GatewayMsg::ActAt(index, attempt, answer(port(&variant, reply)?))
        }
        "AskGrant" => GatewayMsg::AskGrant(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
        "SpendCodeGrant" => GatewayMsg::SpendCodeGrant(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
        other => return Err(unknown("gateway", other)),
    })
}

/// What the ledger says an agent had: for [`GatewayMsg::Restore`].
pub struct Restored {
    /// Delivered to it, oldest first: the sender, the message id, its tokens on the wire and the document.
    pub delivered: Vec<(String, String, u32, Arc<Document>)>,
    /// The pointers (text form) of each deref it was granted.
    pub read: Vec<Vec<String>>,
}

impl Restored {
    /// What `events` (a ledger's, oldest first) say was delivered to `agent` and what it was granted to read.
    pub(crate) fn from_events(events: &[Event], agent: &str) -> Restored {
        let delivered = events
            .iter()
            .filter_map(|e| match e {
                Event::Delivered { from, to, msg_id, tokens, doc, .. } if to == agent => {
                    Some((from.clone(), msg_id.clone(), *tokens, doc.clone()))
                }
                _ => None,
            })
            .collect();
        let read = events
            .iter()
            .filter_map(|e| match e {
                Event::Deref { agent: reader, pointers, granted: true, .. } if reader == agent => {
                    Some(pointers.clone())
                }
                _ => None,
            })
            .collect();
        Restored { delivered, read }
    }
}

/// `agent` and the agents below it whose nodes are below its node: those on the head below an agent on the head
/// (an agent placed on another node is that node's; see [`spawn_node`]). What a lost node takes with it.
pub(crate) fn local_subtree(scenario: &less_contract::Scenario, agent: &str) -> Vec<String> {
    let mut subtree = vec![agent.to_owned()];
    let mut next = 0;
    while let Some(parent) = subtree.get(next).cloned() {
        subtree.extend(node_children(scenario, &parent));
        next += 1;
    }
    subtree
}

/// The agents whose nodes `agent`'s node spawns and supervises: its children, when it and they run on the head.
fn node_children(scenario: &less_contract::Scenario, agent: &str) -> Vec<String> {
    if scenario.agent(agent).is_none_or(|a| a.node.is_some()) {
        return Vec::new();
    }
    let children = scenario.agents.iter().filter(|a| a.parent.as_deref() == Some(agent) && a.node.is_none());
    children.map(|a| a.id.clone()).collect()
}

/// Spawns `agent`'s node (its gateway, which spawns its agent and its children's nodes) linked to `supervisor`, its
/// parent's node or the run supervisor, and puts it in the run's directory. With `restore` (the ledger's events, a
/// restart), every node of the subtree first takes back what the ledger says its agent had.
pub(crate) async fn spawn_node(
    ctx: &Arc<RunContext>,
    agent: &str,
    supervisor: ractor::ActorCell,
    restore: Option<Arc<Vec<Event>>>,
) -> Result<(ActorRef<GatewayMsg>, tokio::task::JoinHandle<()>), ractor::SpawnErr> {
    // Actor names are process-wide, and a failed node's subtree may not have let go of its names yet.
    static N_RESTARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut name = format!("{}:{}:gateway:{agent}", ctx.run_id, ctx.mode.as_str());
    if restore.is_some() {
        name.push_str(&format!(":r{}", N_RESTARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    }
    let args = GatewayArgs { ctx: ctx.clone(), agent_id: agent.to_owned(), restore };
    let (gateway, handle) = Actor::spawn_linked(Some(name), GatewayActor, args, supervisor).await?;
    ctx.directory.insert(agent.to_owned(), gateway.clone());
    Ok((gateway, handle))
}

/// A request to spend an inline-code grant.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CodeGrantRequest {
    /// The grant named by the message.
    pub grant_id: String,
    /// Where the pasted code comes from.
    pub sources: Vec<Pointer>,
    /// Tokens of pasted code.
    pub n_code: u32,
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
    /// A node started again by its parent: the ledger's events, from which it and the nodes it spawns take back
    /// what their agents had.
    pub restore: Option<Arc<Vec<Event>>>,
}

/// What an agent knows, kept by its gateway so a restarted agent starts from it: the documents delivered to it and
/// the digests of what it dereferenced.
#[derive(Debug, Clone, Default)]
pub struct AgentKnowledge {
    /// Delivered documents, oldest first, older typed messages past the run's cap spilled to `sam:msg:` stubs.
    pub inbox: Inbox,
    /// Digest of every pointer the agent dereferenced, by pointer text.
    pub seen: HashMap<String, less_contract::Digest>,
}

/// A gateway's mutable state.
pub struct GatewayState {
    ctx: Arc<RunContext>,
    agent_id: String,
    budget: Budget,
    /// The agent; `None` while it is down for good.
    agent: Option<ActorRef<AgentMsg>>,
    memory: AgentKnowledge,
    /// The agent's turn number; a turn ends when the agent sends a message.
    turn: u64,
    meter: DerefMeter,
    grants: GrantBook,
    /// What the agent may dereference without a grant (the scenario's `reach`).
    reach: Reach,
    /// Consecutive refused messages per sender (briefs and grants have no resend and do not count).
    refusals_by_sender: HashMap<String, u32>,
    /// The ids of messages spilled from the agent's inbox (shared with their stubs): a `sam:msg:<id>` pointer of one
    /// is within the agent's reach whatever its reach.
    spilled: HashSet<Arc<str>>,
    /// Senders and message types, one copy each for all the stubs that name them.
    names: HashSet<Arc<str>>,
    restarts: Vec<Instant>,
    n_restarts_total: u32,
    /// Turns that arrived while the agent was being restarted: taken by the new agent, or answered as down.
    waiting: Vec<(Box<ActRequest>, RpcReplyPort<ActOutcome>)>,
    /// The nodes this node supervises, by actor id: its children's on the head.
    children: HashMap<ractor::ActorId, String>,
    /// Recent restarts of each child's node, within [`RESTART_WINDOW`].
    child_restarts: HashMap<String, Vec<Instant>>,
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
        let reach = Reach::new(args.ctx.scenario.reach_of(&args.agent_id));
        let inbox = Inbox::new(args.ctx.inbox_cap);
        let mut state = GatewayState {
            reach,
            ctx: args.ctx,
            agent_id: args.agent_id,
            budget,
            agent: None,
            memory: AgentKnowledge { inbox, seen: HashMap::new() },
            turn: 0,
            meter: DerefMeter::default(),
            grants: GrantBook::default(),
            refusals_by_sender: HashMap::new(),
            spilled: HashSet::new(),
            names: HashSet::new(),
            restarts: Vec::new(),
            n_restarts_total: 0,
            waiting: Vec::new(),
            children: HashMap::new(),
            child_restarts: HashMap::new(),
        };
        if let Some(events) = &args.restore {
            state.restore(Restored::from_events(events, &state.agent_id)).await;
        }
        state.agent = Some(spawn_agent(&myself, &state).await?);
        // The nodes of its children on the head: spawned here, so this node supervises them (a worker node's
        // host spawns the agents placed on it).
        if state.ctx.books.is_some() {
            for child in node_children(&state.ctx.scenario, &state.agent_id) {
                let (node, _) = spawn_node(&state.ctx, &child, myself.get_cell(), args.restore.clone()).await?;
                state.children.insert(node.get_id(), child);
            }
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<GatewayMsg>,
        msg: GatewayMsg,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Deliver(envelope, reply) => {
                let verdict = state.deliver(*envelope).await;
                // On a worker node: an acknowledged delivery is in the head's ledger before the acknowledgement.
                state.ctx.settle().await;
                let _ = reply.send(verdict);
            }
            GatewayMsg::Forward(forwarded) => {
                let (envelope, doc, value, n_tokens) = *forwarded;
                state.forward(&envelope, &doc, &value, n_tokens);
            }
            GatewayMsg::ActAt(index, attempt, reply) => {
                let Some(step) = state.ctx.scenario.steps.get(index).cloned() else {
                    tracing::error!(agent = %state.agent_id, "no step {index} in the scenario");
                    return Ok(());
                };
                state.act(Box::new(ActRequest { index, step, attempt }), reply);
            }
            GatewayMsg::Act(request, reply) => state.act(Box::new(request), reply),
            GatewayMsg::Deref(action, reply) => {
                let outcome = state.deref(action).await;
                let _ = reply.send(outcome);
            }
            GatewayMsg::Search(action, reply) => {
                let _ = reply.send(state.search(action).await);
            }
            GatewayMsg::List(action, reply) => {
                let _ = reply.send(state.list(action).await);
            }
            GatewayMsg::EndTurn => state.turn += 1,
            GatewayMsg::Restore(restored, reply) => {
                // The agent is out while its knowledge comes back, so `forward` fills the gateway's memory only.
                if let Some(agent) = state.agent.take() {
                    agent.stop(Some("restarting from the ledger".to_owned()));
                }
                let n = state.restore(*restored).await;
                state.agent = Some(spawn_agent(&myself, state).await?);
                let _ = reply.send(n);
            }
            GatewayMsg::IssueGrant(spec, answers, reply) => {
                let _ = reply.send(state.issue_grant(&spec, answers.as_deref()));
            }
            GatewayMsg::AskGrant(ask, reply) => match &state.agent {
                // The reply port travels with the request, so this gateway stays free to issue the grant.
                Some(agent) => {
                    if let Err(err) = agent.send_message(AgentMsg::Decide(ask, reply)) {
                        tracing::warn!(agent = %state.agent_id, "deref request not delivered: {err}");
                    }
                }
                None => {
                    let _ = reply.send(Outcome::Denied { reason: format!("{} is down", state.agent_id) });
                }
            },
            #[cfg(any(test, feature = "faults"))]
            GatewayMsg::Fail => panic!("{}'s node failed on purpose", state.agent_id),
            GatewayMsg::SpendCodeGrant(request, reply) => {
                let now = state.ctx.now();
                let verdict = state.grants.authorize_code(
                    &request.grant_id,
                    &state.agent_id,
                    &request.sources,
                    request.n_code,
                    now,
                );
                let _ = reply.send(verdict);
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
        let SupervisionEvent::ActorFailed(cell, err) = event else { return Ok(()) };
        if let Some(child) = state.children.remove(&cell.get_id()) {
            state.child_failed(&myself, child, err.to_string()).await;
            return Ok(());
        }
        if state.agent.as_ref().is_none_or(|agent| agent.get_id() != cell.get_id()) {
            return Ok(());
        }
        state.agent = None;
        let now = Instant::now();
        state.restarts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        if state.restarts.len() >= MAX_RESTARTS {
            state.ctx.record(Event::AgentDown { agent: state.agent_id.clone(), reason: err.to_string() });
            let reason = format!(
                "{} failed {} times within {:?} and is left down: {err}",
                state.agent_id,
                MAX_RESTARTS + 1,
                RESTART_WINDOW
            );
            state.send_escalation(&state.agent_id.clone(), &reason, None).await;
            for (_, reply) in state.waiting.drain(..) {
                let _ = reply.send(ActOutcome::down(&state.agent_id));
            }
            return Ok(());
        }
        state.restarts.push(now);
        state.n_restarts_total += 1;
        state.ctx.record(Event::Restart { agent: state.agent_id.clone(), reason: err.to_string() });
        state.agent = Some(spawn_agent(&myself, state).await?);
        for (request, reply) in std::mem::take(&mut state.waiting) {
            state.act(request, reply);
        }
        Ok(())
    }
}

/// Spawns the agent, linked to (supervised by) this gateway, from what the gateway remembers for it.
async fn spawn_agent(
    myself: &ActorRef<GatewayMsg>,
    state: &GatewayState,
) -> Result<ActorRef<AgentMsg>, ActorProcessingErr> {
    let args = AgentArgs {
        ctx: state.ctx.clone(),
        agent_id: state.agent_id.clone(),
        gateway: myself.clone(),
        memory: state.memory.clone(),
    };
    // Unnamed: a named actor could be looked up in the registry, and only this gateway may hold the agent.
    let (agent, _) = Actor::spawn_linked(None, AgentActor, args, myself.get_cell()).await?;
    Ok(agent)
}

impl GatewayState {
    /// Hands a turn to the agent (the reply port travels with the request, so this gateway stays free to serve the
    /// agent's derefs). A turn that finds the agent failed waits for the agent this gateway starts in its place;
    /// an agent left down answers it as skipped.
    fn act(&mut self, request: Box<ActRequest>, reply: RpcReplyPort<ActOutcome>) {
        let Some(agent) = &self.agent else {
            let _ = reply.send(ActOutcome::down(&self.agent_id));
            return;
        };
        match agent.send_message(AgentMsg::Act(request, reply)) {
            Ok(()) => {}
            Err(ractor::MessagingErr::SendErr(AgentMsg::Act(request, reply))) => self.waiting.push((request, reply)),
            Err(err) => tracing::warn!(agent = %self.agent_id, "act not delivered: {err}"),
        }
    }

    /// A child's node failed: it is started again from the ledger, its subtree with it, within [`MAX_RESTARTS`]
    /// per [`RESTART_WINDOW`]; past that the subtree is out of the run and this node's agent is told by an
    /// escalation.
    async fn child_failed(&mut self, myself: &ActorRef<GatewayMsg>, child: String, why: String) {
        let now = Instant::now();
        let recent = self.child_restarts.entry(child.clone()).or_default();
        recent.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        let past_limit = recent.len() >= MAX_RESTARTS;
        recent.push(now);
        let restarted = match past_limit {
            true => Err(format!("its node failed {} times within {RESTART_WINDOW:?}", MAX_RESTARTS + 1)),
            false => self.restart_child(myself, &child, &why).await,
        };
        let Err(cause) = restarted else { return };
        let agents = local_subtree(&self.ctx.scenario, &child);
        self.ctx.directory.lose(&agents);
        let reason = format!("{child} is out of the run with {}: {cause}: {why}", agents.join(", "));
        self.ctx.record(Event::SubtreeLost { agent: child.clone(), agents, reason: why });
        self.send_escalation(&child, &reason, None).await;
    }

    /// Starts `child`'s node again, linked to this one, from what the ledger says now.
    async fn restart_child(&mut self, myself: &ActorRef<GatewayMsg>, child: &str, why: &str) -> Result<(), String> {
        let events = self.ctx.ledger.ask(TokenLedgerMsg::Snapshot).await.map_err(|e| format!("ledger: {e}"))?;
        self.ctx.record(Event::Restart { agent: child.to_owned(), reason: format!("its node failed: {why}") });
        let (node, _) = spawn_node(&self.ctx, child, myself.get_cell(), Some(Arc::new(events)))
            .await
            .map_err(|e| format!("its node did not start again: {e}"))?;
        self.children.insert(node.get_id(), child.to_owned());
        Ok(())
    }

    /// Takes again what the ledger says the agent had (see [`GatewayMsg::Restore`]); how many documents came back.
    async fn restore(&mut self, restored: Restored) -> usize {
        let mut n = 0;
        for (from, msg_id, n_tokens, doc) in restored.delivered {
            if let Document::Grant(grant) = &*doc {
                let grant = Grant::clone(grant);
                let is_ancestor = self.ctx.scenario.is_ancestor(&grant.terms.issuer, &self.agent_id);
                // A grant that has run out since is refused again; the rest still comes back.
                if let Err(v) = self.grants.accept(grant, &self.agent_id, &self.ctx.secret, is_ancestor) {
                    tracing::warn!(target: "less.cluster", agent = %self.agent_id, "a grant not restored: {}", v.message);
                }
            }
            let value = Arc::new(doc.to_value());
            let envelope = Envelope {
                from,
                to: self.agent_id.clone(),
                // Its id names it again in a `sam:msg:` stub, should the inbox spill it.
                msg_id,
                kind: EnvelopeKind::Message,
                doc: Draft::Raw(Value::Null),
                // The wire text is not in the ledger: a baseline's inbox gets the document without it.
                wire: String::new(),
                inline_code: None,
                code_sources: Vec::new(),
                prose: None,
                restated: Vec::new(),
            };
            self.forward(&envelope, &doc, &value, n_tokens);
            n += 1;
        }
        for texts in restored.read {
            let Ok(pointers) = texts.iter().map(|t| Pointer::parse(t)).collect::<Result<Vec<_>, _>>() else { continue };
            if let Ok(Ok(resolved)) = self.ctx.resolver.ask(|reply| ResolverMsg::Resolve(pointers.clone(), reply)).await
            {
                for r in &resolved {
                    if let Ok(plain) = Pointer::new(r.pointer.ty(), r.pointer.reference(), r.pointer.span()) {
                        self.memory.seen.insert(plain.to_string(), r.digest);
                    }
                }
            }
        }
        n
    }

    async fn deliver(&mut self, envelope: Envelope) -> Result<u32, Violation> {
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        // The wire is counted once; the cache makes any later count of the same text free.
        let n_tokens = counter.count(&envelope.wire);
        let checked = Document::check(envelope.kind, &envelope.doc);
        let verdict = match (&checked, self.ctx.mode) {
            (Err(violation), _) => Err(violation.clone()),
            (Ok((doc, _)), WireMode::Less) => self.check_less(&envelope, doc, n_tokens, counter).await,
            (Ok(_), WireMode::Verbatim | WireMode::VerbatimWhole) => Ok(()),
        };
        let (doc, value) = match (verdict, checked) {
            (Ok(()), Ok(checked)) => checked,
            (Err(violation), _) | (Ok(()), Err(violation)) => {
                self.refuse(&envelope, n_tokens, &violation).await;
                return Err(violation);
            }
        };
        if self.agent.is_none() {
            let violation = Violation::new(
                ErrorCode::AgentDown,
                "",
                format!("{} is down after repeated failures; the message was not delivered", self.agent_id),
            );
            self.ctx.record(Event::Dropped {
                from: envelope.from.clone(),
                to: self.agent_id.clone(),
                msg_id: envelope.msg_id.clone(),
            });
            return Err(violation);
        }
        self.refusals_by_sender.remove(&envelope.from);
        for engram in doc.engrams() {
            tracing::info!(target: "less.engram.put", id = %engram.id, kind = ?engram.kind, from = %envelope.from);
        }
        let (doc, value) = (Arc::new(doc), Arc::new(value));
        self.record_delivery(&envelope, &doc, &value, n_tokens).await;
        self.forward(&envelope, &doc, &value, n_tokens);
        Ok(n_tokens)
    }

    /// The LESS rules, most specific first; an inline-code grant is spent only on an otherwise acceptable message.
    async fn check_less(
        &mut self,
        envelope: &Envelope,
        doc: &Document,
        n_tokens: u32,
        counter: &TokenCounter,
    ) -> Result<(), Violation> {
        check_inbound(doc, n_tokens, &self.budget)?;
        if let Some(code) = &envelope.inline_code {
            let n_code = counter.count(code);
            let mut allowance = 0;
            if n_code > self.budget.max_inline_code
                && let Some(grant_id) = doc.grant_id()
            {
                allowance = self.spend_code_grant(envelope, grant_id, n_code).await?;
            }
            check_code(n_code, &self.budget, allowance)?;
        }
        if let Document::Grant(grant) = doc {
            self.accept_grant(envelope, grant)?;
        }
        Ok(())
    }

    /// Asks the sender's gateway, which holds the sender's grants, to spend one use of `grant_id`.
    async fn spend_code_grant(&self, envelope: &Envelope, grant_id: &str, n_code: u32) -> Result<u32, Violation> {
        let denied = |why: String| Violation::new(ErrorCode::GrantInvalid, "", format!("grant {grant_id}: {why}"));
        let sender =
            self.ctx.directory.get(&envelope.from).ok_or_else(|| denied(format!("no agent {}", envelope.from)))?;
        let sources = envelope.code_sources.iter().filter_map(|t| Pointer::parse(t).ok()).collect();
        let request = CodeGrantRequest { grant_id: grant_id.to_owned(), sources, n_code };
        match ractor::call!(sender, GatewayMsg::SpendCodeGrant, request) {
            Ok(verdict) => verdict,
            Err(err) => Err(denied(err.to_string())),
        }
    }

    /// Records a delivery; `value` is `doc`'s JSON, made once per delivery.
    async fn record_delivery(&self, envelope: &Envelope, doc: &Arc<Document>, value: &Arc<Value>, n_tokens: u32) {
        self.ctx.record(Event::Delivered {
            from: envelope.from.clone(),
            to: envelope.to.clone(),
            msg_id: envelope.msg_id.clone(),
            kind: envelope.kind,
            tokens: n_tokens,
            max_tokens: self.budget.max_inline_tokens,
            doc: doc.clone(),
            prose: envelope.prose.clone(),
            restated: envelope.restated.clone(),
        });
        // A baseline's document is what it restates; the run directory keeps the restatement itself.
        if self.ctx.mode.is_baseline() && !envelope.wire.is_empty() {
            let sent = SentText {
                msg_id: envelope.msg_id.clone(),
                from: envelope.from.clone(),
                to: envelope.to.clone(),
                kind: envelope.kind,
                tokens: n_tokens,
                text: envelope.wire.clone(),
            };
            self.ctx.record_wire(sent);
        }
        let content = if envelope.wire.is_empty() { value.to_string() } else { envelope.wire.clone() };
        self.ctx.remember(envelope.msg_id.clone(), value.clone());
        self.ctx.archive(&envelope.from, content).await;
    }

    /// `name`, shared with every stub that already names it.
    fn name(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.names.get(name) {
            return known.clone();
        }
        let name: Arc<str> = name.into();
        self.names.insert(name.clone());
        name
    }

    /// Hands a delivered document to the agent and remembers it for a restart. In a baseline run the agent gets what
    /// was on the wire too (`{"verbatim": text, "doc": document}`): an LLM agent reads what it was sent.
    fn forward(&mut self, envelope: &Envelope, doc: &Document, value: &Arc<Value>, n_tokens: u32) {
        // Typed messages may be spilled past the inbox's cap (`sam:msg:<id>` reads them back); briefs and grants never.
        let spill = match (doc, value.get("type").and_then(Value::as_str)) {
            (Document::Message(_), Some(kind)) => Some(Arc::new(Spill {
                msg_id: envelope.msg_id.as_str().into(),
                from: self.name(&envelope.from),
                kind: self.name(kind),
                tokens: n_tokens,
            })),
            _ => None,
        };
        let doc = match (doc, self.ctx.mode) {
            // The agent gets a grant's terms; the MAC stays with this gateway, which verified it and holds the grant.
            (Document::Grant(grant), _) => match serde_json::to_value(&grant.terms) {
                Ok(terms) => Arc::new(terms),
                Err(err) => {
                    tracing::warn!(target: "less.run", agent = %self.agent_id, %err, "a grant's terms have no JSON form");
                    return;
                }
            },
            (_, mode) if mode.is_baseline() && !envelope.wire.is_empty() => {
                Arc::new(serde_json::json!({ "verbatim": envelope.wire, "doc": **value }))
            }
            (_, _) => value.clone(),
        };
        let item = InboxItem { doc, spill };
        if let Some(spilled) = self.memory.inbox.push(item.clone()) {
            self.ctx.record(Event::Spilled { agent: self.agent_id.clone(), msg_id: spilled.msg_id.to_string() });
            self.spilled.insert(spilled.msg_id.clone());
        }
        if let Some(agent) = &self.agent {
            agent.send_message(AgentMsg::Inbox(item)).ok();
        }
    }

    async fn refuse(&mut self, envelope: &Envelope, n_tokens: u32, violation: &Violation) {
        tracing::info!(target: "less.budget.reject", from = %envelope.from, to = %envelope.to, code = %violation.code);
        // The refused document stays reachable (sam:msg:<id>) for whoever handles the escalation.
        if let Ok(doc) = envelope.doc.to_value() {
            self.ctx.remember(envelope.msg_id.clone(), Arc::new(doc));
        }
        let counts = envelope.kind == EnvelopeKind::Message;
        let n_refusals = if counts {
            let n = self.refusals_by_sender.entry(envelope.from.clone()).or_insert(0);
            *n += 1;
            *n
        } else {
            1
        };
        self.ctx.record(Event::Rejected {
            from: envelope.from.clone(),
            to: envelope.to.clone(),
            msg_id: envelope.msg_id.clone(),
            code: violation.code,
            message: violation.message.clone(),
            instruction: violation.code.instruction().to_owned(),
            tokens: n_tokens,
            attempt: n_refusals,
        });
        if counts && n_refusals >= 2 {
            self.refusals_by_sender.remove(&envelope.from);
            let reason = format!(
                "{} was refused twice by {}'s gateway ({}): {}",
                envelope.from, self.agent_id, violation.code, violation.message
            );
            self.send_escalation(&envelope.from, &reason, Some(&envelope.msg_id)).await;
        }
    }

    fn accept_grant(&mut self, envelope: &Envelope, grant: &Valid<Grant>) -> Result<(), Violation> {
        let grant = Grant::clone(grant);
        let is_ancestor = self.ctx.scenario.is_ancestor(&grant.terms.issuer, &self.agent_id);
        self.grants.accept(grant, &self.agent_id, &self.ctx.secret, is_ancestor)?;
        tracing::info!(target: "less.deref.grant", grantee = %self.agent_id, from = %envelope.from);
        Ok(())
    }

    /// Writes an escalation about `about` to its parent. It is recorded here, before this gateway answers, so the
    /// ledger order does not depend on delivery timing; the parent's gateway only forwards it.
    async fn send_escalation(&mut self, about: &str, reason: &str, refused_msg: Option<&str>) {
        let Some(parent) = self.ctx.scenario.agent(about).and_then(|a| a.parent.clone()) else { return };
        let from = format!("{}-gw", self.agent_id);
        let msg_id = self.ctx.next_msg_id(&from).await;
        let reason: String = reason.chars().take(480).collect();
        let refs: Vec<String> = refused_msg.map(|id| format!("sam:msg:{id}")).into_iter().collect();
        let message = TypedMessage {
            from: from.clone(),
            msg_id: msg_id.clone(),
            to: Some(parent.clone()),
            engrams: Vec::new(),
            deref_requests: Vec::new(),
            body: None,
            grant_id: None,
            payload: Payload::Escalation { reason: reason.clone(), severity: Severity::Warning, refs },
        };
        self.ctx.record(Event::Escalated { about: about.to_owned(), to: parent.clone(), reason });
        let draft = Draft::Message(message);
        let (doc, value) = match Document::check(EnvelopeKind::Escalation, &draft) {
            Ok(checked) => checked,
            Err(violation) => {
                // Only a bug in this function gets here: an agent id that makes no valid sender id, say.
                tracing::error!(target: "less.run", %about, %violation, "an escalation broke the contract; not sent");
                return;
            }
        };
        let wire = value.to_string();
        let n_tokens = TokenCounter::shared(self.ctx.scenario.tokenizer).count(&wire);
        let envelope = Envelope {
            from,
            to: parent.clone(),
            msg_id,
            kind: EnvelopeKind::Escalation,
            doc: draft,
            wire,
            inline_code: None,
            code_sources: Vec::new(),
            prose: None,
            restated: Vec::new(),
        };
        let (doc, value) = (Arc::new(doc), Arc::new(value));
        self.record_delivery(&envelope, &doc, &value, n_tokens).await;
        if parent == self.agent_id {
            self.forward(&envelope, &doc, &value, n_tokens);
        } else if let Some(gateway) = self.ctx.directory.get(&parent) {
            gateway.send_message(GatewayMsg::Forward(Box::new((envelope, doc, value, n_tokens)))).ok();
        }
    }

    async fn deref(&mut self, action: DerefAction) -> DerefOutcome {
        if self.turn != self.meter.turn {
            self.meter = DerefMeter { turn: self.turn, ..DerefMeter::default() };
        }
        let pointers: Result<Vec<Pointer>, Violation> = action.pointers.iter().map(|t| Pointer::parse(t)).collect();
        let pointers = match pointers {
            Ok(p) => p,
            Err(v) => return self.deref_refused(&action, v),
        };
        tracing::info!(target: "less.deref.request", agent = %self.agent_id, n = pointers.len());
        let less = self.ctx.mode == WireMode::Less;
        // Outside the agent's reach, only a grant reads: the whole request then goes through it.
        // A message spilled from the agent's own inbox is its to read back, whatever its reach.
        let own = |p: &Pointer| {
            p.ty() == PointerType::Sam && p.location().strip_prefix("msg:").is_some_and(|id| self.spilled.contains(id))
        };
        let outside = if less { pointers.iter().find(|p| !self.reach.covers(p) && !own(p)) } else { None };
        if let (Some(pointer), None) = (outside, &action.grant) {
            return self.deref_refused(&action, outside_reach(&self.agent_id, &self.reach, pointer));
        }
        let outside = outside.is_some();
        // Counts are known before reading: refuse what no budget and no grant could cover without touching a file.
        let untokened: Vec<(PointerType, u32)> = pointers.iter().map(|p| (p.ty(), 0)).collect();
        if less && action.grant.is_none() && self.meter.admit(&self.budget, &untokened).is_none() {
            return self.deref_refused(&action, self.over_budget(pointers.len(), None));
        }
        let resolved = match self.ctx.resolver.ask(|reply| ResolverMsg::Resolve(pointers.clone(), reply)).await {
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
        if less {
            let typed: Vec<(PointerType, u32)> = items.iter().map(|(p, n)| (p.ty(), *n)).collect();
            match self.meter.admit(&self.budget, &typed).filter(|_| !outside) {
                Some(next) => self.meter = next,
                None => {
                    let Some(grant_id) = &action.grant else {
                        return self.deref_refused(&action, self.over_budget(items.len(), Some(n_tokens)));
                    };
                    let now = self.ctx.now();
                    if let Err(violation) = self.grants.authorize(grant_id, &self.agent_id, &items, now) {
                        return self.deref_refused(&action, violation);
                    }
                    via_grant = Some(grant_id.clone());
                }
            }
        }
        for r in &resolved {
            if let Ok(plain) = Pointer::new(r.pointer.ty(), r.pointer.reference(), r.pointer.span()) {
                self.memory.seen.insert(plain.to_string(), r.digest);
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

    fn over_budget(&self, n_pointers: usize, n_tokens: Option<u32>) -> Violation {
        Violation::new(
            ErrorCode::DerefDenied,
            "",
            format!(
                "{n_pointers} pointers{} exceed this turn's deref budget (used: repo {}/{}, artifact {}/{}, sam {}/{}, tokens {}/{}) and no grant was presented",
                n_tokens.map(|n| format!(" / {n} tokens")).unwrap_or_default(),
                self.meter.repo_spans,
                self.budget.max_repo_spans,
                self.meter.artifact_sections,
                self.budget.max_artifact_sections,
                self.meter.sam_items,
                self.budget.max_sam_items,
                self.meter.tokens,
                self.budget.max_deref_tokens_total
            ),
        )
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

    fn issue_grant(&self, spec: &GrantSpec, answers: Option<&str>) -> Result<Grant, Violation> {
        if !self.ctx.scenario.is_ancestor(&self.agent_id, &spec.to) {
            return Err(grant_invalid(
                &spec.id,
                &format!("{} may only grant to its descendants, not {}", self.agent_id, spec.to),
            ));
        }
        if let Some(pattern) = spec.patterns.iter().find(|p| less_contract::leaves_workspace(p)) {
            return Err(grant_invalid(
                &spec.id,
                &format!(
                    "{pattern} names places outside the workspace, which no issuer holds; grant patterns relative to it"
                ),
            ));
        }
        let now = self.ctx.now();
        let terms = spec.terms(&self.agent_id, now)?;
        if let Some(pattern) = spec.patterns.iter().find(|p| !self.reach.holds(p) && !self.grants.holds(p, &terms, now))
        {
            return Err(wider_than_held(&spec.id, &self.agent_id, &self.reach, pattern));
        }
        let grant = Grant::issue(terms, &self.ctx.secret);
        self.ctx.record(Event::GrantIssued {
            issuer: self.agent_id.clone(),
            grantee: spec.to.clone(),
            grant_id: spec.id.clone(),
            answers: answers.map(str::to_owned),
        });
        Ok(grant)
    }
}

mod look;
#[cfg(test)]
mod tests;
