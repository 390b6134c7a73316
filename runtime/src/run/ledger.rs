//! The ledger actor: the token ledger (every delivery, refusal and deref with its token cost), the append-only audit
//! log (`audit.log`, one tab-separated line per action) and the live trace, all from one ordered event stream.
//! It also answers "what did the others learn?" queries over the engrams delivered so far.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::Serialize;
use serde_json::Value;

use crate::error::ErrorCode;
use crate::run::wire::EnvelopeKind;

/// One thing that happened in a run.
#[derive(Debug, Clone, Serialize)]
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
        doc: Arc<Value>,
        /// The wire text of a typed message: what a verbatim orchestrator restates as "prior reports".
        #[serde(skip)]
        report_wire: Option<String>,
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
    },
    Query {
        agent: String,
        text: String,
        returned: Vec<String>,
        tokens: u32,
    },
    Restart {
        agent: String,
        reason: String,
    },
    AgentDown {
        agent: String,
        reason: String,
    },
    Step {
        index: usize,
        agent: String,
        action: String,
    },
}

impl Event {
    /// The audit line: time, actor, verb, details, tab-separated.
    fn audit_line(&self) -> String {
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
            Event::GrantIssued { issuer, grantee, grant_id } => {
                vec![issuer.clone(), "grant".into(), format!("{grant_id}->{grantee}")]
            }
            Event::Query { agent, returned, tokens, .. } => {
                vec![agent.clone(), "query".into(), format!("{}={tokens}", returned.len())]
            }
            Event::Restart { agent, .. } => vec![agent.clone(), "restart".into(), String::new()],
            Event::AgentDown { agent, .. } => vec![agent.clone(), "down".into(), String::new()],
            Event::Step { index, agent, action } => vec![agent.clone(), "step".into(), format!("{index}:{action}")],
        };
        format!("{at}\t{}", fields.join("\t"))
    }

    /// The live trace line, for people.
    fn trace_line(&self) -> Option<String> {
        Some(match self {
            Event::Delivered { from, to, kind, tokens, max_tokens, .. } => {
                format!("  {from} → {to}  {:<10} {tokens:>6} tok  (≤{max_tokens})", kind.as_str())
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
            Event::GrantIssued { issuer, grantee, grant_id } => format!("  {issuer} grants {grant_id} to {grantee}"),
            Event::Query { agent, returned, tokens, .. } => {
                format!("  {agent} queries memory: {} engrams, {tokens} tok", returned.len())
            }
            Event::Restart { agent, reason } => format!("  RESTART {agent}: {reason}"),
            Event::AgentDown { agent, reason } => format!("  DOWN {agent}: {reason}"),
            Event::Step { index, agent, action } => format!("step {index}: {agent} {action}"),
        })
    }
}

/// The actor.
pub struct LedgerActor;

/// Messages to the ledger.
pub enum LedgerMsg {
    /// Append an event.
    Record(Box<Event>),
    /// Engrams delivered so far that share the most words with `text` (top `k`).
    Query(String, usize, RpcReplyPort<Vec<Value>>),
    /// The wire text of every typed message delivered so far: the prior reports a verbatim orchestrator restates.
    History(RpcReplyPort<Vec<String>>),
    /// All events so far; flushes the files.
    Snapshot(RpcReplyPort<Vec<Event>>),
}

/// Where the ledger writes.
pub struct LedgerArgs {
    /// Output directory (created); `ledger.jsonl` and `audit.log` go here.
    pub out_dir: Option<PathBuf>,
    /// Print the live trace.
    pub trace: bool,
}

/// State: the events and the open files.
pub struct LedgerState {
    events: Vec<Event>,
    histories: Vec<String>,
    jsonl: Option<BufWriter<File>>,
    audit: Option<BufWriter<File>>,
    trace: bool,
}

impl Actor for LedgerActor {
    type Msg = LedgerMsg;
    type State = LedgerState;
    type Arguments = LedgerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<LedgerMsg>,
        args: LedgerArgs,
    ) -> Result<LedgerState, ActorProcessingErr> {
        let (jsonl, audit) = match &args.out_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                (
                    Some(BufWriter::new(File::create(dir.join("ledger.jsonl"))?)),
                    Some(BufWriter::new(File::create(dir.join("audit.log"))?)),
                )
            }
            None => (None, None),
        };
        Ok(LedgerState { events: Vec::new(), histories: Vec::new(), jsonl, audit, trace: args.trace })
    }

    async fn handle(
        &self,
        _myself: ActorRef<LedgerMsg>,
        msg: LedgerMsg,
        state: &mut LedgerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            LedgerMsg::Record(event) => state.record(*event),
            LedgerMsg::Query(text, k, reply) => {
                let _ = reply.send(state.query(&text, k));
            }
            LedgerMsg::History(reply) => {
                let _ = reply.send(state.histories.clone());
            }
            LedgerMsg::Snapshot(reply) => {
                let flushed = [state.jsonl.as_mut().map(Write::flush), state.audit.as_mut().map(Write::flush)];
                for result in flushed.into_iter().flatten() {
                    state.file_failed(result);
                }
                let _ = reply.send(state.events.clone());
            }
        }
        Ok(())
    }
}

impl LedgerState {
    /// Appends an event. A failing file (disk full, say) is reported once and then left alone: the events stay in
    /// memory and the run goes on, rather than a dead ledger taking the run down.
    fn record(&mut self, event: Event) {
        if let Event::Delivered { report_wire: Some(wire), .. } = &event {
            self.histories.push(wire.clone());
        }
        if self.trace
            && let Some(line) = event.trace_line()
        {
            println!("{line}");
        }
        let written = self.jsonl.as_mut().map(|f| {
            serde_json::to_writer(&mut *f, &event).map_err(std::io::Error::from).and_then(|()| f.write_all(b"\n"))
        });
        if let Some(result) = written {
            self.file_failed(result);
        }
        let line = event.audit_line();
        if let Some(result) = self.audit.as_mut().map(|f| writeln!(f, "{line}")) {
            self.file_failed(result);
        }
        self.events.push(event);
    }

    fn file_failed(&mut self, result: std::io::Result<()>) {
        if let Err(err) = result {
            tracing::error!("ledger files abandoned: {err}");
            self.jsonl = None;
            self.audit = None;
        }
    }

    fn query(&self, text: &str, k: usize) -> Vec<Value> {
        let words = |s: &str| -> std::collections::HashSet<String> {
            s.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect()
        };
        let wanted = words(text);
        let mut scored: Vec<(usize, usize, Value)> = Vec::new();
        for (idx, event) in self.events.iter().enumerate() {
            let Event::Delivered { doc, .. } = event else { continue };
            let doc: &Value = doc;
            for engram in doc.get("engrams").and_then(Value::as_array).into_iter().flatten() {
                let mut text = engram.get("claim").and_then(Value::as_str).unwrap_or_default().to_owned();
                for tag in engram.get("tags").and_then(Value::as_array).into_iter().flatten() {
                    text.push(' ');
                    text.push_str(tag.as_str().unwrap_or_default());
                }
                let overlap = words(&text).intersection(&wanted).count();
                if overlap > 0 && !scored.iter().any(|(_, _, e)| e.get("id") == engram.get("id")) {
                    scored.push((overlap, idx, engram.clone()));
                }
            }
        }
        // Most overlap first; among equals the most recent.
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        scored.into_iter().take(k).map(|(_, _, e)| e).collect()
    }
}
