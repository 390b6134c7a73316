//! The token ledger actor ([`TokenLedger`]): every delivery, refusal and deref with its token cost (`ledger.jsonl`),
//! the append-only audit log (`audit.log`, one tab-separated line per action) and the live trace, all from one
//! ordered event stream.
//! (Not the context ledger of `context/`, which compacts a conversation.)
//! It also keeps what a baseline orchestrator restates of each delivered report, and which reports each agent knows
//! (received, or restated to it in a brief), so a baseline brief restates only what its writer could know.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};

use crate::blocking;
use crate::run::wire::{Document, EnvelopeKind};
use less_contract::ErrorCode;

/// A claim an override displaced (in [`Event::Claim`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Displaced {
    /// The claim that ended.
    pub claim_id: String,
    /// Its holder's identity.
    pub holder: String,
    /// The conflict record.
    pub conflict_id: String,
    /// The decision that records it (`sam:decision:<id>`).
    pub decision_id: String,
}

/// One thing that happened in a run (a line of `ledger.jsonl`; read back by `lessrt runs show`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Event {
    Delivered {
        from: String,
        to: String,
        msg_id: String,
        kind: EnvelopeKind,
        tokens: u32,
        max_tokens: u32,
        /// The document as the receiver's gateway checked it.
        doc: Arc<Document>,
        /// What a baseline orchestrator restates of a typed message in later briefs ("prior reports"); kept in the
        /// ledger so that a resumed run restates what the run restated before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prose: Option<String>,
        /// The prior reports (message ids) a baseline brief restated.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        restated: Vec<String>,
    },
    /// A message for an agent that is down; not delivered.
    Dropped {
        from: String,
        to: String,
        msg_id: String,
    },

    Rejected {
        from: String,
        to: String,
        msg_id: String,
        code: ErrorCode,
        message: String,
        /// What the sender was told to send instead.
        instruction: String,
        tokens: u32,
        attempt: u32,
    },
    Resent {
        from: String,
        to: String,
        msg_id: String,
    },
    Escalated {
        about: String,
        to: String,
        reason: String,
    },
    Deref {
        agent: String,
        pointers: Vec<String>,
        tokens: u32,
        granted: bool,
        via_grant: Option<String>,
        code: Option<ErrorCode>,
    },
    GrantIssued {
        issuer: String,
        grantee: String,
        grant_id: String,
        /// The deref request it answers (`Action::AskGrant`), if it was asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answers: Option<String>,
    },
    /// An agent asked its parent for a dereference over its budget.
    GrantAsked {
        requester: String,
        parent: String,
        request_id: String,
        pointers: Vec<String>,
    },
    /// A parent refused a child's deref request.
    GrantDenied {
        issuer: String,
        requester: String,
        request_id: String,
        reason: String,
    },
    /// An agent's inbox held more typed messages than the run's cap: the oldest, `msg_id`, is now a `sam:msg:` stub
    /// in it (the agent reads it back with a deref).
    Spilled {
        agent: String,
        msg_id: String,
    },
    /// An agent's turn reached its action limit without finishing.
    TurnLimit {
        agent: String,
        actions: usize,
    },
    /// A memory query (refused: `code`, nothing returned).
    Query {
        agent: String,
        text: String,
        returned: Vec<String>,
        tokens: u32,
        /// The recall stages that answered (`hash`, `rerank`); empty when refused.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stages: Vec<String>,
        /// Pointers (`sam:engram:<id>`) to the engrams an answer over the role's inline budget was cut of.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        more: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// An agent searched the workspace index: the pointers it was answered with and the inline tokens they cost (a
    /// refusal: `code` and `message`).
    Search {
        agent: String,
        query: String,
        k: usize,
        returned: Vec<String>,
        tokens: u32,
        /// The stages that ranked the hits (`hash`, `rerank`); empty when refused.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stages: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// An agent asked what pointers hold: how many were described, the inline tokens the answer cost, the pointers
    /// whose description was cut to the role's budget (a refusal: `code` and `message`).
    Describe {
        agent: String,
        pointers: Vec<String>,
        described: usize,
        tokens: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cut: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// An agent listed workspace files under a pattern.
    List {
        agent: String,
        pattern: String,
        files: usize,
        tokens: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// An engram of a delivered report put into the memory as its sender: `status` is stored, duplicate, revived or
    /// refused (then `code` and `message` say why).
    MemoryPut {
        agent: String,
        id: String,
        status: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        superseded: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        contradictions: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// A promotion: `id` of the engram promoted (none: no engram of that subject), or refused with `code`.
    Promote {
        agent: String,
        subject: String,
        to: less_contract::Scope,
        id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// A claim on surfaces: granted (`claim_id`; `displaced`: the claims an override ended, each with its conflict
    /// record and decision) or refused with `code`.
    Claim {
        agent: String,
        surfaces: Vec<String>,
        task: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        claim_id: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        displaced: Vec<Displaced>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<ErrorCode>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// An agent released its live claims (`claims`: their ids; none released is an empty list).
    Release {
        agent: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        claims: Vec<String>,
    },
    /// An engram an agent wrote answers a graded task (the runtime's record of which task a report answers: the
    /// grader counts an engram for a task only when this says so).
    Answer {
        agent: String,
        engram: String,
        task: String,
    },
    Restart {
        agent: String,
        reason: String,
    },
    /// What an agent's model spent in one turn, as its provider counted it (beside the runtime's own counts).
    ModelUsage {
        agent: String,
        calls: u64,
        prompt_tokens: u64,
        completion_tokens: u64,
        /// Prompt tokens the server answered from its prompt cache, where it says so.
        #[serde(default, skip_serializing_if = "is_zero")]
        cached_tokens: u64,
        /// Calls whose tokens the runtime counted with the run's tokenizer (the server reported none).
        #[serde(default, skip_serializing_if = "is_zero")]
        counted_calls: u64,
        /// Milliseconds the model took (a replay: what the recording measured).
        #[serde(default, skip_serializing_if = "is_zero")]
        model_ms: u64,
        /// Why answers were thrown away and asked for again, one per answer.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unusable: Vec<String>,
    },
    AgentDown {
        agent: String,
        reason: String,
    },
    /// One of the run's own actors (`memory`, `resolver`, `ledger`, `summarizers`) failed and the run supervisor
    /// started it again, its state recovered from its files and books.
    ServiceRestart {
        service: String,
        reason: String,
    },
    /// An agent's node failed past the restart limit: it and every agent below it (`agents`, the agent first) are
    /// out of the run; its parent was told by an escalation.
    SubtreeLost {
        agent: String,
        agents: Vec<String>,
        reason: String,
    },
    Step {
        index: usize,
        agent: String,
        action: String,
    },
    /// Step `index`, `agent`'s turn, ended: when it started and ended (milliseconds since the run started), and the
    /// milliseconds its model took. What the report's timing reads; the counts never depend on it.
    TurnEnd {
        index: usize,
        agent: String,
        started_ms: u64,
        ended_ms: u64,
        #[serde(default)]
        model_ms: u64,
    },
    /// The run went on after its head died (`lessrt run --resume`): from step `from_step`, which had started and
    /// runs again whole; the `discarded` events it had recorded are in `ledger.discarded.jsonl`.
    Resumed {
        from_step: usize,
        discarded: usize,
    },
}

impl Event {
    /// The audit line: time, actor, the actor's identity (its place in the hierarchy; the actor itself for what is
    /// not an agent), verb, details, tab-separated.
    fn audit_line(&self, identities: &std::collections::HashMap<String, String>) -> String {
        let at = crate::now_rfc3339();
        let fields: Vec<String> = match self {
            Event::Delivered { from, to, msg_id, kind, tokens, .. } => {
                vec![from.clone(), "deliver".into(), format!("{}/{msg_id}->{to}={tokens}", kind.as_str())]
            }
            Event::Rejected { from, to, msg_id, code, tokens, attempt, .. } => {
                vec![from.clone(), "reject".into(), format!("{msg_id}->{to}={tokens}\t{code}\tattempt={attempt}")]
            }
            Event::Resent { from, to, msg_id } => vec![from.clone(), "resend".into(), format!("{msg_id}->{to}")],
            Event::Dropped { from, to, msg_id } => vec![from.clone(), "drop".into(), format!("{msg_id}->{to}")],
            Event::Escalated { about, to, .. } => vec![about.clone(), "escalate".into(), format!("->{to}")],
            Event::Deref { agent, pointers, tokens, granted, via_grant, code } => vec![
                agent.clone(),
                if *granted { "deref".into() } else { "deref-denied".into() },
                format!(
                    "{}={tokens}{}{}",
                    pointers.join(","),
                    via_grant.as_ref().map(|g| format!("\tgrant={g}")).unwrap_or_default(),
                    code.map(|c| format!("\t{c}")).unwrap_or_default()
                ),
            ],
            Event::GrantIssued { issuer, grantee, grant_id, answers } => vec![
                issuer.clone(),
                "grant".into(),
                format!(
                    "{grant_id}->{grantee}{}",
                    answers.as_ref().map(|r| format!("\tanswers={r}")).unwrap_or_default()
                ),
            ],
            Event::GrantAsked { requester, parent, request_id, pointers } => {
                vec![requester.clone(), "ask-grant".into(), format!("{request_id}->{parent}\t{}", pointers.join(","))]
            }
            Event::GrantDenied { issuer, requester, request_id, reason } => {
                vec![issuer.clone(), "deny-grant".into(), format!("{request_id}->{requester}\t{reason}")]
            }
            Event::Spilled { agent, msg_id } => vec![agent.clone(), "spill".into(), format!("sam:msg:{msg_id}")],
            Event::TurnLimit { agent, actions } => vec![agent.clone(), "turn-limit".into(), actions.to_string()],
            Event::Query { agent, returned, tokens, code, .. } => vec![
                agent.clone(),
                "query".into(),
                format!("{}={tokens}{}", returned.len(), code.map(|c| format!("\t{c}")).unwrap_or_default()),
            ],
            Event::Search { agent, returned, tokens, code, .. } => vec![
                agent.clone(),
                "search".into(),
                format!("{}={tokens}{}", returned.len(), code.map(|c| format!("\t{c}")).unwrap_or_default()),
            ],
            Event::List { agent, files, tokens, code, .. } => vec![
                agent.clone(),
                "list".into(),
                format!("{files}={tokens}{}", code.map(|c| format!("\t{c}")).unwrap_or_default()),
            ],
            Event::Describe { agent, described, tokens, code, .. } => vec![
                agent.clone(),
                "describe".into(),
                format!("{described}={tokens}{}", code.map(|c| format!("\t{c}")).unwrap_or_default()),
            ],
            Event::MemoryPut { agent, id, status, code, .. } => vec![
                agent.clone(),
                "memory-put".into(),
                format!("{id}={status}{}", code.map(|c| format!("\t{c}")).unwrap_or_default()),
            ],
            Event::Promote { agent, subject, to, id, code, .. } => vec![
                agent.clone(),
                if code.is_some() { "promote-denied".into() } else { "promote".into() },
                format!(
                    "subject:{subject}->{}\t{}{}",
                    to.as_str(),
                    id.as_deref().unwrap_or("-"),
                    code.map(|c| format!("\t{c}")).unwrap_or_default()
                ),
            ],
            Event::Claim { agent, surfaces, claim_id, displaced, code, .. } => vec![
                agent.clone(),
                match (code, displaced.is_empty()) {
                    (Some(_), _) => "claim-refused".into(),
                    (None, true) => "claim".into(),
                    (None, false) => "claim-override".into(),
                },
                format!(
                    "{}\t{}{}{}",
                    surfaces.join(","),
                    claim_id.as_deref().unwrap_or("-"),
                    displaced.iter().map(|d| format!("\t{}>{}", d.claim_id, d.conflict_id)).collect::<String>(),
                    code.map(|c| format!("\t{c}")).unwrap_or_default()
                ),
            ],
            Event::Release { agent, claims, .. } => vec![agent.clone(), "release".into(), claims.join(",")],
            Event::Answer { agent, engram, task } => vec![agent.clone(), "answer".into(), format!("{engram}->{task}")],
            Event::Restart { agent, .. } => vec![agent.clone(), "restart".into(), String::new()],
            Event::ModelUsage { agent, calls, prompt_tokens, completion_tokens, cached_tokens, unusable, .. } => {
                let mut detail = format!("calls={calls}\tprompt={prompt_tokens}\tcompletion={completion_tokens}");
                if *cached_tokens > 0 {
                    detail.push_str(&format!("\tcached={cached_tokens}"));
                }
                if !unusable.is_empty() {
                    detail.push_str(&format!("\tunusable={}", unusable.len()));
                }
                vec![agent.clone(), "model".into(), detail]
            }
            Event::AgentDown { agent, .. } => vec![agent.clone(), "down".into(), String::new()],
            Event::ServiceRestart { service, .. } => vec![service.clone(), "restart".into(), String::new()],
            Event::SubtreeLost { agent, agents, .. } => vec![agent.clone(), "lost".into(), agents.join(",")],
            Event::Step { index, agent, action } => vec![agent.clone(), "step".into(), format!("{index}:{action}")],
            Event::TurnEnd { index, agent, started_ms, ended_ms, .. } => {
                vec![agent.clone(), "turn_end".into(), format!("{index}\t{started_ms}..{ended_ms}ms")]
            }
            Event::Resumed { from_step, discarded } => {
                vec!["run".into(), "resumed".into(), format!("step={from_step}\tdiscarded={discarded}")]
            }
        };
        let identity = fields.first().map(|actor| identities.get(actor).unwrap_or(actor).clone()).unwrap_or_default();
        let (actor, rest) = fields.split_first().map_or(("", &[][..]), |(a, r)| (a.as_str(), r));
        format!("{at}\t{actor}\t{identity}\t{}", rest.join("\t"))
    }

    /// The live trace line(s), for people (`lessrt run` prints them as they happen, `lessrt runs show` again from
    /// `ledger.jsonl`).
    pub fn trace_line(&self) -> Option<String> {
        Some(match self {
            Event::Delivered { from, to, kind, tokens, max_tokens, doc, .. } => {
                let mut line = format!("  {from} → {to}  {:<10} {tokens:>6} tok  (≤{max_tokens})", kind.as_str());
                // An escalation an agent wrote itself (a gateway's are `Escalated` events): say why, so a failing
                // model is seen where it happens, not only in ledger.jsonl.
                if *kind != EnvelopeKind::Escalation
                    && let Some(reason) = doc.escalation_reason()
                {
                    line.push_str(&format!("\n    {}", escalation_note(from, to, reason)));
                }
                line
            }
            Event::Rejected { from, to, code, tokens, attempt, .. } => {
                format!("  {from} → {to}  REJECTED   {tokens:>6} tok  {code} (refusal {attempt})")
            }
            Event::Resent { from, to, .. } => format!("  {from} → {to}  resend"),
            Event::Dropped { from, to, .. } => format!("  {from} → {to}  DROPPED (receiver down)"),
            Event::Escalated { about, to, .. } => format!("  ESCALATION about {about} → {to}"),
            Event::Deref { agent, pointers, tokens, granted, via_grant, code } => format!(
                "  {agent} deref {} {}  {tokens} tok{}",
                pointers.join(" "),
                if *granted { "granted" } else { "DENIED" },
                match (via_grant, code) {
                    (_, Some(code)) => format!("  {code}"),
                    (Some(g), None) => format!("  via grant {g}"),
                    (None, None) => String::new(),
                }
            ),
            Event::GrantIssued { issuer, grantee, grant_id, answers } => match answers {
                Some(request) => format!("  {issuer} grants {grant_id} to {grantee} (answers {request})"),
                None => format!("  {issuer} grants {grant_id} to {grantee}"),
            },
            Event::GrantAsked { requester, parent, request_id, pointers } => {
                format!("  {requester} asks {parent} for a grant ({request_id}): {}", pointers.join(" "))
            }
            Event::GrantDenied { issuer, requester, request_id, reason } => {
                format!("  {issuer} DENIES {requester}'s request {request_id}: {reason}")
            }
            Event::Spilled { agent, msg_id } => {
                format!("  {agent} inbox full: {msg_id} is now the pointer sam:msg:{msg_id}")
            }
            Event::TurnLimit { agent, actions } => {
                format!("  {agent} did not finish its turn within {actions} actions: the turn ends")
            }
            Event::Query { agent, returned, tokens, stages, code: None, .. } => {
                format!("  {agent} queries memory ({}): {} engrams, {tokens} tok", stages.join("+"), returned.len())
            }
            Event::Query { agent, code: Some(code), message, .. } => {
                format!("  {agent} queries memory: REFUSED {code}: {message}")
            }
            Event::Search { agent, query, returned, tokens, stages, code: None, .. } => {
                format!("  {agent} searches {query:?} ({}): {} hits, {tokens} tok", stages.join("+"), returned.len())
            }
            Event::Search { agent, query, code: Some(code), message, .. } => {
                format!("  {agent} searches {query:?}: REFUSED {code}: {message}")
            }
            Event::List { agent, pattern, files, tokens, code: None, .. } => {
                format!("  {agent} lists {pattern:?}: {files} files, {tokens} tok")
            }
            Event::List { agent, pattern, code: Some(code), message, .. } => {
                format!("  {agent} lists {pattern:?}: REFUSED {code}: {message}")
            }
            Event::Describe { agent, pointers, described, tokens, cut, code: None, .. } => {
                let cut = if cut.is_empty() { String::new() } else { format!(", {} cut", cut.len()) };
                format!("  {agent} describes {} pointers: {described} described{cut}, {tokens} tok", pointers.len())
            }
            Event::Describe { agent, pointers, code: Some(code), message, .. } => {
                format!("  {agent} describes {} pointers: REFUSED {code}: {message}", pointers.len())
            }
            Event::MemoryPut { agent, id, status, code, message, superseded, contradictions } => match code {
                Some(code) => format!("  {agent} memory put {id}: REFUSED {code}: {message}"),
                None => format!(
                    "  {agent} memory put {id}: {status}{}{}",
                    if superseded.is_empty() {
                        String::new()
                    } else {
                        format!(", supersedes {}", superseded.join(" "))
                    },
                    if contradictions.is_empty() {
                        String::new()
                    } else {
                        format!(", contradiction {}", contradictions.join(" "))
                    }
                ),
            },
            Event::Promote { agent, subject, to, id, code, message } => match code {
                Some(code) => {
                    format!("  {agent} promotes subject:{subject} to {}: DENIED {code}: {message}", to.as_str())
                }
                None => format!(
                    "  {agent} promotes subject:{subject} to {}: {}",
                    to.as_str(),
                    id.as_deref().unwrap_or("no such engram")
                ),
            },
            Event::Claim { agent, surfaces, task, claim_id, displaced, code, message } => match code {
                Some(code) => format!("  {agent} claims {} for {task}: REFUSED {code}: {message}", surfaces.join(", ")),
                None => format!(
                    "  {agent} claims {} for {task}: {}{}",
                    surfaces.join(", "),
                    claim_id.as_deref().unwrap_or("-"),
                    displaced
                        .iter()
                        .map(|d| format!(", overrides {} of {} (conflict {})", d.claim_id, d.holder, d.conflict_id))
                        .collect::<String>()
                ),
            },
            Event::Release { agent, claims, .. } => format!("  {agent} releases {} claims", claims.len()),
            // Which task an engram answers shows in the report's task verdicts, not in the live trace.
            Event::Answer { .. } => return None,
            Event::Restart { agent, reason } => format!("  RESTART {agent}: {reason}"),
            Event::ModelUsage { agent, calls, prompt_tokens, completion_tokens, unusable, .. } => {
                let mut line = format!(
                    "  {agent} model: {calls} calls, {prompt_tokens} prompt + {completion_tokens} completion tok"
                );
                for why in unusable {
                    line.push_str(&format!("\n    answer thrown away: {why}"));
                }
                line
            }
            Event::AgentDown { agent, reason } => format!("  DOWN {agent}: {reason}"),
            Event::ServiceRestart { service, reason } => format!("  RESTART the run's {service}: {reason}"),
            Event::SubtreeLost { agents, reason, .. } => format!("  LOST {}: {reason}", agents.join(", ")),
            Event::Step { index, agent, action } => format!("step {index}: {agent} {action}"),
            // When turns end shows in the report's timing, not in the live trace.
            Event::TurnEnd { .. } => return None,
            Event::Resumed { from_step, discarded } => {
                format!("  RESUMED at step {from_step} ({discarded} events of it set aside: it runs again)")
            }
        })
    }
}

/// One line on an escalation an agent sent: `reviewer: model failed LLM_UNREACHABLE: … → escalated to lead` when its
/// model failed (the reason starts with the provider's code), else the reason.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn escalation_note(from: &str, to: &str, reason: &str) -> String {
    let short = |text: &str| -> String {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.chars().count() > 160 { text.chars().take(159).collect::<String>() + "…" } else { text }
    };
    match reason.split_once(": ") {
        Some((code, rest)) if code.starts_with("LLM_") && !code.contains(' ') => {
            let rest = rest.strip_prefix("the model could not write the report: ").unwrap_or(rest);
            format!("{from}: model failed {code}: {} → escalated to {to}", short(rest))
        }
        _ => format!("{from} escalates to {to}: {}", short(reason)),
    }
}

/// The token ledger actor of a run: the writer of its [`LedgerBook`].
pub struct TokenLedger;

/// Messages to the ledger.
pub enum TokenLedgerMsg {
    /// Append an event (what a worker node sends; on the head, [`crate::run::RunContext::record`] writes the book
    /// directly, so no event waits in a mailbox that a failure could take down).
    Record(Box<Event>),
    /// Append what a delivered message was sent as (a baseline run's [`WIRE_FILE`]; ignored by a ledger without it).
    Wire(Box<SentText>),
    /// The restatement of every typed message delivered so far: what reading every prior report costs.
    History(RpcReplyPort<Vec<String>>),
    /// The reports an agent knows, oldest first, as `(msg_id, restatement)`: those delivered to it and those a brief
    /// delivered to it restated.
    Known(String, RpcReplyPort<Vec<(String, String)>>),
    /// All events so far (read back from `ledger.jsonl` when the run writes one); flushes the files.
    Snapshot(RpcReplyPort<Vec<Event>>),
    /// Writes every event recorded so far to the files and syncs them to the disk; answers when they are there.
    Flush(RpcReplyPort<()>),
    /// Writes what is pending (sent by the ledger to itself [`FLUSH_AFTER`] after an event finds nothing pending, and
    /// by a recorder whose event made [`FLUSH_AT`] bytes pending).
    Tick,
    /// A recorder found nothing pending: a [`TokenLedgerMsg::Tick`] within [`FLUSH_AFTER`].
    Schedule,
    /// Answers at once: every event a node recorded before it is in this ledger (a node's messages arrive in order).
    Ack(RpcReplyPort<()>),
    /// Fails the ledger's writer on purpose (tests of its restart).
    #[cfg(any(test, feature = "faults"))]
    Fail,
}

/// Where a run's live trace goes: the lines of [`Event::trace_line`], in the order the ledger records the events.
/// The runtime never prints; the binary prints these (and decides what a closed pipe means).
pub trait TraceSink: Send + Sync {
    /// One line of the trace (it may hold newlines of its own).
    fn line(&self, line: &str);
}

/// The wire text's file in a run directory: what a baseline run actually sent, one [`SentText`] a line.
pub const WIRE_FILE: &str = "wire.jsonl";

/// What one delivered message was sent as on the wire: its text as the receiver's prompt holds it (a line of
/// [`WIRE_FILE`]). A baseline's ledger holds the typed document it restates; this is the restatement itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentText {
    /// The delivered message.
    pub msg_id: String,
    /// Sender agent id.
    pub from: String,
    /// Receiver agent id.
    pub to: String,
    /// What it carried.
    pub kind: EnvelopeKind,
    /// Its inline tokens (counted on `text`).
    pub tokens: u32,
    /// The text sent.
    pub text: String,
}

/// Where the ledger writes.
pub struct TokenLedgerArgs {
    /// Output directory (created); `ledger.jsonl` (this run's) and `audit.log` (appended to, every run's) go here.
    pub out_dir: Option<PathBuf>,
    /// Where the live trace goes, if anywhere.
    pub trace: Option<Arc<dyn TraceSink>>,
    /// The run's id, written at the head of its lines in the audit log.
    pub run_id: String,
    /// Write [`WIRE_FILE`] (a baseline run: what each delivered message was sent as). Without it a stale one left
    /// in the directory by an earlier run is removed, so the directory describes one run.
    pub wire: bool,
    /// Each agent's hierarchical identity ([`less_contract::Scenario::identity`]), written on its audit lines.
    pub identities: std::collections::HashMap<String, String>,
}

/// What each message in the `wire.jsonl` at `path` was sent as, by message id (lines that do not read back, a torn
/// last one among them, are left out); empty when there is no such file.
pub(crate) fn read_wire(path: &std::path::Path) -> std::collections::HashMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<SentText>(line).ok())
        .map(|sent| (sent.msg_id, sent.text))
        .collect()
}

/// The ledger's book: every event recorded, its lines waiting to be written and how far the files are written.
///
/// It outlives the [`TokenLedger`] that writes it out: the run supervisor holds it and hands it to each incarnation
/// of the writer, so a writer that fails loses nothing recorded. A restarted writer reopens the files in append mode
/// and cuts them back to the length the book knows was written, so a batch the failure interrupted is written once,
/// whole.
pub struct LedgerBook {
    inner: std::sync::Mutex<Book>,
    /// The directory of the files (none: the run writes none).
    out_dir: Option<PathBuf>,
    /// Write [`WIRE_FILE`].
    wire: bool,
}

/// What a recorder must do for its event to be written: nothing (a tick is on its way), ask for one, or have the
/// pending lines written now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    Nothing,
    Schedule,
    Now,
}

/// The book's contents.
///
/// A run that writes files keeps no events in memory: each is a line of `ledger.jsonl` within [`FLUSH_AFTER`]
/// (or sooner, every [`FLUSH_AT`] bytes), and a snapshot reads them back. So the ledger's memory does not grow
/// with the run, and a reader tailing `ledger.jsonl` (`lessrt serve`) sees events as they happen.
struct Book {
    /// Events not on the disk, in order: every event of a run without files; after the files failed, those that
    /// could not be written and all later ones.
    events: Vec<Event>,
    /// The first `on_disk` lines of `ledger.jsonl` are events written.
    on_disk: usize,
    /// Events in `pending_jsonl`.
    pending_events: usize,
    /// Where `ledger.jsonl` is (a snapshot reads it back).
    jsonl_path: Option<PathBuf>,
    /// A [`TokenLedgerMsg::Tick`] is on its way.
    tick_scheduled: bool,
    /// An event could not be written as JSON: it and every later event stay in memory (in order after the disk's).
    in_memory_from_now: bool,
    /// `(msg_id, restatement)` of every delivered typed message, in delivery order.
    histories: Vec<(String, String)>,
    /// Per agent, the message ids of the reports it knows, in the order it learned them.
    known: std::collections::HashMap<String, Vec<String>>,
    /// The run's files: opened by the first writer, reopened by each restarted one; taken by a writer while it
    /// writes (none: the run writes no files, they failed and were abandoned, or a write is under way).
    files: Option<LedgerFiles>,
    /// The files were opened once (a writer that starts after that is a restarted one: it reopens them).
    opened: bool,
    /// The files were given up after a write failed: no writer opens them again.
    abandoned: bool,
    /// Each agent's identity, for the audit lines.
    identities: std::collections::HashMap<String, String>,
    /// Bytes of each file known written: a restarted writer cuts the files back to these.
    written: Lengths,
    /// Lines not yet written: appended here by each event, written on the blocking pool in batches (every
    /// [`FLUSH_AT`] bytes, at each snapshot and when the ledger stops), so the executor never waits on a disk.
    pending_jsonl: Vec<u8>,
    pending_audit: Vec<u8>,
    /// Lines of `wire.jsonl` not yet written (a baseline run).
    pending_wire: Vec<u8>,
    trace: Option<Arc<dyn TraceSink>>,
}

/// `ledger.jsonl` and `audit.log`, and in a baseline run `wire.jsonl`.
struct LedgerFiles {
    jsonl: File,
    audit: File,
    wire: Option<File>,
}

/// Lengths of the ledger's files.
#[derive(Debug, Clone, Copy, Default)]
struct Lengths {
    jsonl: u64,
    audit: u64,
    wire: u64,
}

/// Pending bytes that make the ledger write them out.
const FLUSH_AT: usize = 64 * 1024;

/// Longest an event waits before it is written.
pub const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_millis(200);

impl Actor for TokenLedger {
    type Msg = TokenLedgerMsg;
    type State = Arc<LedgerBook>;
    type Arguments = Arc<LedgerBook>;

    async fn pre_start(
        &self,
        myself: ActorRef<TokenLedgerMsg>,
        book: Arc<LedgerBook>,
    ) -> Result<Arc<LedgerBook>, ActorProcessingErr> {
        book.open().await?;
        // A tick promised by a writer that failed will not come: this one writes what it left pending.
        if book.lock().restarted_with_pending() {
            myself.send_message(TokenLedgerMsg::Tick)?;
        }
        Ok(book)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<TokenLedgerMsg>,
        book: &mut Arc<LedgerBook>,
    ) -> Result<(), ActorProcessingErr> {
        book.flush(true).await
    }

    async fn handle(
        &self,
        myself: ActorRef<TokenLedgerMsg>,
        msg: TokenLedgerMsg,
        book: &mut Arc<LedgerBook>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TokenLedgerMsg::Record(event) => {
                let wake = book.record(*event);
                book.wake(&myself, wake).await?;
            }
            TokenLedgerMsg::Wire(sent) => {
                let wake = book.record_wire(&sent);
                book.wake(&myself, wake).await?;
            }
            TokenLedgerMsg::Tick => {
                book.lock().tick_scheduled = false;
                book.flush(false).await?;
            }
            TokenLedgerMsg::Schedule => book.wake(&myself, Wake::Schedule).await?,
            TokenLedgerMsg::Ack(reply) => {
                let _ = reply.send(());
            }
            TokenLedgerMsg::History(reply) => {
                let _ = reply.send(book.history());
            }
            TokenLedgerMsg::Known(agent, reply) => {
                let _ = reply.send(book.known_to(&agent));
            }
            TokenLedgerMsg::Snapshot(reply) => {
                book.flush(false).await?;
                let _ = reply.send(book.snapshot().await?);
            }
            TokenLedgerMsg::Flush(reply) => {
                book.flush(true).await?;
                let _ = reply.send(());
            }
            #[cfg(any(test, feature = "faults"))]
            TokenLedgerMsg::Fail => panic!("the ledger's writer failed on purpose"),
        }
        Ok(())
    }
}

impl LedgerBook {
    /// A book for a run that writes where `args` says (no file is touched until a writer starts).
    pub fn new(args: TokenLedgerArgs) -> Arc<LedgerBook> {
        LedgerBook::starting(args, "run-start")
    }

    /// A book for a run resumed from `kept`, the events its files hold (of `lengths`: `ledger.jsonl`, `audit.log`,
    /// `wire.jsonl`): the writer appends to them, and what the book knows of deliveries (restatements, who knows
    /// which report) is read from them again.
    pub(crate) fn resumed(args: TokenLedgerArgs, kept: &[Event], lengths: [u64; 3]) -> Arc<LedgerBook> {
        let resumed = LedgerBook::starting(args, "run-resume");
        {
            let mut book = resumed.lock();
            for event in kept {
                book.note(event);
            }
            book.on_disk = kept.len();
            book.opened = true;
            book.written = Lengths { jsonl: lengths[0], audit: lengths[1], wire: lengths[2] };
        }
        resumed
    }

    fn starting(args: TokenLedgerArgs, verb: &str) -> Arc<LedgerBook> {
        let pending_audit = format!("{}\t{}\t{verb}\t\n", crate::now_rfc3339(), args.run_id).into_bytes();
        Arc::new(LedgerBook {
            inner: std::sync::Mutex::new(Book {
                events: Vec::new(),
                on_disk: 0,
                pending_events: 0,
                jsonl_path: args.out_dir.as_ref().map(|dir| dir.join(crate::layout::LEDGER_FILE)),
                tick_scheduled: false,
                in_memory_from_now: false,
                histories: Vec::new(),
                known: Default::default(),
                files: None,
                opened: false,
                abandoned: false,
                written: Lengths::default(),
                pending_jsonl: Vec::new(),
                pending_audit,
                pending_wire: Vec::new(),
                trace: args.trace,
                identities: args.identities,
            }),
            out_dir: args.out_dir,
            wire: args.wire,
        })
    }

    /// The book, held for one short update (never across an await). A panic while it was held left it as whole
    /// as every update is: each appends, or moves lines from pending to written, as its last step.
    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends an event (its lines are written by the next flush); what the writer must be told.
    pub(crate) fn record(&self, event: Event) -> Wake {
        let mut book = self.lock();
        book.record(event);
        book.wake()
    }

    /// Appends what a delivered message was sent as (written with the next flush); nothing without a wire file.
    pub(crate) fn record_wire(&self, sent: &SentText) -> Wake {
        if !self.wire {
            return Wake::Nothing;
        }
        let mut book = self.lock();
        match serde_json::to_vec(sent) {
            Ok(line) => {
                book.pending_wire.extend_from_slice(&line);
                book.pending_wire.push(b'\n');
            }
            Err(err) => tracing::error!("wire text of {} has no JSON form: {err}", sent.msg_id),
        }
        book.wake()
    }

    /// Tells the writer `myself` what `wake` says.
    async fn wake(&self, myself: &ActorRef<TokenLedgerMsg>, wake: Wake) -> Result<(), ActorProcessingErr> {
        match wake {
            Wake::Nothing => {}
            Wake::Now => self.flush(false).await?,
            Wake::Schedule => {
                myself.send_after(FLUSH_AFTER, || TokenLedgerMsg::Tick);
            }
        }
        Ok(())
    }

    /// What each message delivered so far was sent as (a baseline run's `wire.jsonl`, read after a snapshot wrote
    /// it); empty for a run without that file.
    pub(crate) async fn wire_texts(&self) -> std::collections::HashMap<String, String> {
        let Some(dir) = self.out_dir.clone().filter(|_| self.wire) else { return Default::default() };
        blocking::run(move || read_wire(&dir.join(WIRE_FILE))).await.unwrap_or_default()
    }

    /// The restatement of every typed message delivered so far.
    fn history(&self) -> Vec<String> {
        self.lock().histories.iter().map(|(_, prose)| prose.clone()).collect()
    }

    /// The reports `agent` knows, with their restatements.
    fn known_to(&self, agent: &str) -> Vec<(String, String)> {
        let book = self.lock();
        let ids = book.known.get(agent).map(Vec::as_slice).unwrap_or_default();
        ids.iter().filter_map(|id| book.histories.iter().find(|(m, _)| m == id).cloned()).collect()
    }

    /// Opens the files for a writer that starts: the first creates `ledger.jsonl` (and `wire.jsonl`) and appends to
    /// `audit.log`; a restarted one reopens all three for appending and cuts each back to what the book knows was
    /// written (a batch a failure interrupted is written again, whole, by the next flush).
    async fn open(&self) -> Result<(), ActorProcessingErr> {
        let Some(dir) = self.out_dir.clone() else { return Ok(()) };
        let (opened, written) = {
            let mut book = self.lock();
            if book.abandoned {
                return Ok(());
            }
            // Dropped here: the failed writer's handles, if its failure left them in the book.
            book.files = None;
            book.tick_scheduled = false;
            (book.opened, book.written)
        };
        let wire = self.wire;
        let (files, written) = blocking::run(move || -> std::io::Result<(LedgerFiles, Lengths)> {
            std::fs::create_dir_all(&dir)?;
            let wire_path = dir.join(WIRE_FILE);
            if opened {
                let reopen = |path: &std::path::Path, len: u64| -> std::io::Result<File> {
                    let file = crate::files::append(path)?;
                    file.set_len(len)?;
                    Ok(file)
                };
                let files = LedgerFiles {
                    jsonl: reopen(&dir.join(crate::layout::LEDGER_FILE), written.jsonl)?,
                    audit: reopen(&dir.join(crate::layout::AUDIT_FILE), written.audit)?,
                    wire: if wire { Some(reopen(&wire_path, written.wire)?) } else { None },
                };
                return Ok((files, written));
            }
            // The ledger is this run's; the audit log is append-only across runs: a rerun adds to it, never
            // truncates what earlier runs recorded.
            let audit = crate::files::append(&dir.join(crate::layout::AUDIT_FILE))?;
            let audit_len = audit.metadata()?.len();
            let wire = match wire {
                true => Some(crate::files::create(&wire_path)?),
                false => {
                    if wire_path.is_file() {
                        std::fs::remove_file(&wire_path)?;
                    }
                    None
                }
            };
            let files =
                LedgerFiles { jsonl: crate::files::create(&dir.join(crate::layout::LEDGER_FILE))?, audit, wire };
            Ok((files, Lengths { jsonl: 0, audit: audit_len, wire: 0 }))
        })
        .await??;
        let mut book = self.lock();
        book.files = Some(files);
        book.opened = true;
        book.written = written;
        Ok(())
    }

    /// Writes the pending lines on the blocking pool, and with `sync` makes the disk hold them (at the end of a
    /// run, and whenever someone must be able to read them back). The lines leave the book only once written, so a
    /// writer that fails mid-write loses none. A failing file (disk full, say) is reported once and then left alone:
    /// from then on the events stay in memory and the run goes on, rather than a dead ledger taking the run down.
    async fn flush(&self, sync: bool) -> Result<(), ActorProcessingErr> {
        let (files, jsonl, audit, wire, n_events) = {
            let mut book = self.lock();
            let nothing =
                book.pending_jsonl.is_empty() && book.pending_audit.is_empty() && book.pending_wire.is_empty();
            if book.files.is_none() || (!sync && nothing) {
                return Ok(());
            }
            let files = book.files.take();
            (
                files,
                book.pending_jsonl.clone(),
                book.pending_audit.clone(),
                book.pending_wire.clone(),
                book.pending_events,
            )
        };
        let Some(mut files) = files else { return Ok(()) };
        let lengths = Lengths { jsonl: jsonl.len() as u64, audit: audit.len() as u64, wire: wire.len() as u64 };
        let (files, written) = blocking::run(move || {
            let mut write = || -> std::io::Result<()> {
                files.jsonl.write_all(&jsonl)?;
                files.audit.write_all(&audit)?;
                if let Some(file) = &mut files.wire {
                    file.write_all(&wire)?;
                }
                if sync {
                    files.jsonl.sync_data()?;
                    files.audit.sync_data()?;
                    if let Some(file) = &mut files.wire {
                        file.sync_data()?;
                    }
                }
                Ok(())
            };
            let written = write();
            (files, written)
        })
        .await?;
        let mut book = self.lock();
        match written {
            Ok(()) => {
                book.files = Some(files);
                book.pending_jsonl.drain(..lengths.jsonl as usize);
                book.pending_audit.drain(..lengths.audit as usize);
                book.pending_wire.drain(..lengths.wire as usize);
                book.pending_events -= n_events;
                book.on_disk += n_events;
                book.written.jsonl += lengths.jsonl;
                book.written.audit += lengths.audit;
                book.written.wire += lengths.wire;
            }
            Err(err) => {
                tracing::error!("ledger files abandoned: {err}");
                book.abandoned = true;
                // The batch that did not make it stays, in memory, with everything after it.
                let pending = std::mem::take(&mut book.pending_jsonl);
                let lines = pending.split(|b| *b == b'\n').filter(|line| !line.is_empty());
                let back: Vec<Event> = lines.filter_map(|line| serde_json::from_slice(line).ok()).collect();
                book.events.splice(0..0, back);
                book.pending_events = 0;
                book.pending_audit.clear();
                book.pending_wire.clear();
            }
        }
        Ok(())
    }

    /// Every event so far, oldest first: the lines written to `ledger.jsonl`, read back, then those in memory.
    async fn snapshot(&self) -> Result<Vec<Event>, ActorProcessingErr> {
        let (path, on_disk, in_memory) = {
            let book = self.lock();
            (book.jsonl_path.clone(), book.on_disk, book.events.clone())
        };
        let Some(path) = path else { return Ok(in_memory) };
        let mut events = if on_disk == 0 {
            Vec::new()
        } else {
            blocking::run(move || -> Result<Vec<Event>, String> {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let events = text
                    .lines()
                    .take(on_disk)
                    .map(serde_json::from_str::<Event>)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("{}: a line does not read back: {e}", path.display()))?;
                match events.len() == on_disk {
                    true => Ok(events),
                    false => Err(format!("{}: {} events written, {} read back", path.display(), on_disk, events.len())),
                }
            })
            .await?
            .map_err(|e| format!("the ledger cannot read its events back: {e}"))?
        };
        events.extend(in_memory);
        Ok(events)
    }
}

impl Book {
    /// Appends an event (its lines are written by the next flush).
    fn record(&mut self, event: Event) {
        self.note(&event);
        if let Some(sink) = &self.trace
            && let Some(line) = event.trace_line()
        {
            sink.line(&line);
        }
        if self.jsonl_path.is_none() || self.abandoned || self.in_memory_from_now {
            self.events.push(event);
            return;
        }
        let line = match serde_json::to_vec(&event) {
            Ok(line) => line,
            Err(err) => {
                // Kept in memory, and so is every later event: a snapshot lists the disk's events first, so the
                // order holds only if nothing after this one goes to the disk.
                tracing::error!("ledger event has no JSON form, kept in memory with every later one: {err}");
                self.in_memory_from_now = true;
                self.events.push(event);
                return;
            }
        };
        self.pending_jsonl.extend_from_slice(&line);
        self.pending_jsonl.push(b'\n');
        self.pending_events += 1;
        self.pending_audit.extend_from_slice(event.audit_line(&self.identities).as_bytes());
        self.pending_audit.push(b'\n');
    }

    /// Learns what a delivery says: its restatement, and the reports its receiver knows now.
    fn note(&mut self, event: &Event) {
        if let Event::Delivered { msg_id, to, prose, restated, .. } = event {
            if let Some(prose) = prose {
                self.histories.push((msg_id.clone(), prose.clone()));
                self.learn(to, std::slice::from_ref(msg_id));
            }
            self.learn(to, restated);
        }
    }

    /// What the writer must do after an append: write now past [`FLUSH_AT`] bytes, else make sure a tick comes.
    fn wake(&mut self) -> Wake {
        if self.jsonl_path.is_none() || self.abandoned {
            return Wake::Nothing;
        }
        if self.pending_jsonl.len() + self.pending_audit.len() + self.pending_wire.len() >= FLUSH_AT {
            return Wake::Now;
        }
        if self.tick_scheduled {
            return Wake::Nothing;
        }
        self.tick_scheduled = true;
        Wake::Schedule
    }

    /// A writer that starts after a failed one finds lines its predecessor did not write.
    fn restarted_with_pending(&self) -> bool {
        self.opened && !(self.pending_jsonl.is_empty() && self.pending_audit.is_empty() && self.pending_wire.is_empty())
    }

    /// `agent` now knows the reports `msg_ids`.
    fn learn(&mut self, agent: &str, msg_ids: &[String]) {
        let known = self.known.entry(agent.to_owned()).or_default();
        for id in msg_ids {
            if !known.contains(id) {
                known.push(id.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ledger.jsonl` is read back (`lessrt runs show`): every event comes back as it was written, the fields a line
    /// leaves out when empty included.
    #[test]
    fn events_read_back_as_written() {
        let events = vec![
            Event::Step { index: 3, agent: "dev".into(), action: "report".into() },
            Event::Delivered {
                from: "dev".into(),
                to: "lead".into(),
                msg_id: "m1".into(),
                kind: EnvelopeKind::Message,
                tokens: 12,
                max_tokens: 800,
                doc: Document::message(serde_json::json!({"type": "escalation", "from": "dev", "msg_id": "m1",
                    "reason": "LLM_TIMEOUT: slow", "severity": "blocker"})),
                prose: None,
                restated: Vec::new(),
            },
            Event::MemoryPut {
                agent: "dev".into(),
                id: "eg_1".into(),
                status: "stored".into(),
                superseded: Vec::new(),
                contradictions: Vec::new(),
                code: None,
                message: String::new(),
            },
            Event::Query {
                agent: "dev".into(),
                text: "q".into(),
                returned: Vec::new(),
                tokens: 0,
                stages: Vec::new(),
                more: Vec::new(),
                code: Some(ErrorCode::ScopeDenied),
                message: "no".into(),
            },
            Event::Promote {
                agent: "lead".into(),
                subject: "s".into(),
                to: less_contract::Scope::Org,
                id: None,
                code: None,
                message: String::new(),
            },
            Event::ModelUsage {
                agent: "dev".into(),
                calls: 1,
                prompt_tokens: 10,
                completion_tokens: 2,
                cached_tokens: 4,
                counted_calls: 0,
                model_ms: 120,
                unusable: Vec::new(),
            },
        ];
        for event in events {
            let line = serde_json::to_string(&event).expect("serializes");
            let back: Event = serde_json::from_str(&line).expect("reads back");
            assert_eq!(serde_json::to_string(&back).expect("serializes"), line);
            assert_eq!(back.trace_line(), event.trace_line());
        }
    }

    fn step(index: usize) -> Event {
        Event::Step { index, agent: format!("agent-{}", index % 7), action: "report".into() }
    }

    fn json_lines(events: &[Event]) -> Vec<String> {
        events.iter().map(|e| serde_json::to_string(e).expect("serializes")).collect()
    }

    /// Without anyone asking, an event is in `ledger.jsonl` within the flush interval (what a reader tailing the
    /// file sees), and a snapshot reads every event back as it was recorded.
    #[tokio::test]
    async fn events_reach_the_file_unasked_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args = TokenLedgerArgs {
            out_dir: Some(dir.path().to_owned()),
            trace: None,
            run_id: "r".into(),
            wire: false,
            identities: Default::default(),
        };
        let (ledger, handle) = Actor::spawn(None, TokenLedger, LedgerBook::new(args)).await.expect("ledger");
        let events: Vec<Event> = (0..3).map(step).collect();
        for event in &events {
            ledger.send_message(TokenLedgerMsg::Record(Box::new(event.clone()))).expect("send");
        }
        let path = dir.path().join("ledger.jsonl");
        let deadline = std::time::Instant::now() + FLUSH_AFTER * 25;
        loop {
            let lines = std::fs::read_to_string(&path).unwrap_or_default().lines().count();
            if lines == events.len() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{lines} of {} events written unasked", events.len());
            tokio::time::sleep(FLUSH_AFTER / 4).await;
        }
        let back = ractor::call!(ledger, TokenLedgerMsg::Snapshot).expect("snapshot");
        assert_eq!(json_lines(&back), json_lines(&events));
        ledger.stop(None);
        handle.await.expect("stopped");
    }

    /// A baseline run's ledger writes what each message was sent as to `wire.jsonl`; a LESS run's writes none and
    /// removes one an earlier run left in the directory.
    #[tokio::test]
    async fn a_baseline_ledger_keeps_the_wire_text_and_a_less_one_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sent = SentText {
            msg_id: "lead-m1".into(),
            from: "lead".into(),
            to: "dev".into(),
            kind: EnvelopeKind::Brief,
            tokens: 12,
            text: "Brief from lead to dev.\n\nGoal: ship it\n".into(),
        };
        for wire in [true, false] {
            let args = TokenLedgerArgs {
                out_dir: Some(dir.path().to_owned()),
                trace: None,
                run_id: "r".into(),
                wire,
                identities: Default::default(),
            };
            let (ledger, handle) = Actor::spawn(None, TokenLedger, LedgerBook::new(args)).await.expect("ledger");
            ledger.send_message(TokenLedgerMsg::Record(Box::new(step(0)))).expect("send");
            ledger.send_message(TokenLedgerMsg::Wire(Box::new(sent.clone()))).expect("send");
            ractor::call!(ledger, TokenLedgerMsg::Flush).expect("flush");
            let path = dir.path().join(WIRE_FILE);
            if wire {
                let text = std::fs::read_to_string(&path).expect("wire.jsonl");
                let back: Vec<SentText> =
                    text.lines().map(|l| serde_json::from_str(l).expect("a SentText line")).collect();
                assert_eq!(back, std::slice::from_ref(&sent));
            } else {
                assert!(!path.exists(), "a LESS run leaves no wire text, not even an earlier run's");
            }
            ledger.stop(None);
            handle.await.expect("stopped");
        }
    }

    /// A run that writes files holds none of its events in memory, however many there are; one whose files fail
    /// keeps, from the failed batch on, every event in memory, and its snapshot still has them all, in order.
    #[tokio::test]
    async fn events_live_on_the_disk_and_a_failed_file_keeps_them_in_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ledger.jsonl");
        let args = TokenLedgerArgs {
            out_dir: Some(dir.path().to_owned()),
            trace: None,
            run_id: "r".into(),
            wire: false,
            identities: Default::default(),
        };
        let book = LedgerBook::new(args);
        book.open().await.expect("open");
        let events: Vec<Event> = (0..5000).map(step).collect();
        for event in &events[..4000] {
            if book.record(event.clone()) == Wake::Now {
                book.flush(false).await.expect("flush");
            }
        }
        book.flush(true).await.expect("flush");
        assert!(book.lock().events.is_empty(), "{} events held in memory", book.lock().events.len());
        assert_eq!(book.lock().on_disk, 4000);

        // The disk goes away: a file opened read-only refuses the next batch.
        book.lock().files.as_mut().expect("files").jsonl = File::open(&path).expect("read-only");
        for event in &events[4000..4500] {
            book.record(event.clone());
        }
        book.flush(false).await.expect("a failed file does not fail the ledger");
        assert!(book.lock().abandoned, "the files are abandoned");
        for event in &events[4500..] {
            book.record(event.clone());
        }
        assert_eq!(book.lock().events.len(), 1000, "the failed batch and the later events are in memory");
        let back = book.snapshot().await.expect("snapshot");
        assert_eq!(json_lines(&back), json_lines(&events));
    }

    /// The writer fails with events written, events pending and a batch half on the disk: the writer started in
    /// its place with the same book cuts the half-written bytes off and writes every event exactly once.
    #[tokio::test]
    async fn a_writer_started_after_a_failed_one_loses_no_event_and_writes_none_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args = TokenLedgerArgs {
            out_dir: Some(dir.path().to_owned()),
            trace: None,
            run_id: "r".into(),
            wire: true,
            identities: Default::default(),
        };
        let book = LedgerBook::new(args);
        let (first, handle) = Actor::spawn(None, TokenLedger, book.clone()).await.expect("ledger");
        let events: Vec<Event> = (0..30).map(step).collect();
        for event in &events[..10] {
            book.record(event.clone());
        }
        ractor::call!(first, TokenLedgerMsg::Flush).expect("flush");
        for event in &events[10..20] {
            book.record(event.clone());
        }
        // What a write the failure interrupted leaves: half a line past what the book knows written.
        let mut jsonl = std::fs::OpenOptions::new().append(true).open(dir.path().join("ledger.jsonl")).expect("open");
        jsonl.write_all(b"{\"event\":\"st").expect("write");
        first.send_message(TokenLedgerMsg::Fail).expect("send");
        assert!(handle.await.is_ok(), "the failed writer's task ends");
        let (second, handle) = Actor::spawn(None, TokenLedger, book.clone()).await.expect("ledger");
        for event in &events[20..] {
            book.record(event.clone());
        }
        let back = ractor::call!(second, TokenLedgerMsg::Snapshot).expect("snapshot");
        assert_eq!(json_lines(&back), json_lines(&events));
        ractor::call!(second, TokenLedgerMsg::Flush).expect("flush");
        let written = std::fs::read_to_string(dir.path().join("ledger.jsonl")).expect("ledger.jsonl");
        assert_eq!(written.lines().map(str::to_owned).collect::<Vec<_>>(), json_lines(&events), "each event once");
        let audit = std::fs::read_to_string(dir.path().join("audit.log")).expect("audit.log");
        assert_eq!(audit.lines().count(), 1 + events.len(), "the run's start and each event once");
        second.stop(None);
        handle.await.expect("stopped");
    }

    #[test]
    fn an_agents_own_escalation_says_why_in_the_trace() {
        let doc = serde_json::json!({"type": "escalation", "from": "reviewer", "msg_id": "m", "severity": "blocker",
            "reason": "LLM_UNREACHABLE: the model could not write the report: cannot reach the model server after 4 attempts"});
        let event = Event::Delivered {
            from: "reviewer".into(),
            to: "lead".into(),
            msg_id: "m".into(),
            kind: EnvelopeKind::Message,
            tokens: 40,
            max_tokens: 800,
            doc: Document::message(doc),
            prose: None,
            restated: Vec::new(),
        };
        let trace = event.trace_line().expect("a line");
        assert!(
            trace.ends_with(
                "\n    reviewer: model failed LLM_UNREACHABLE: cannot reach the model server after 4 attempts → escalated to lead"
            ),
            "{trace}"
        );
        assert_eq!(escalation_note("dev", "lead", "tests keep failing"), "dev escalates to lead: tests keep failing");
    }
}
