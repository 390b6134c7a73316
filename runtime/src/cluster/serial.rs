//! How the messages that cross a node boundary are written on the wire.
//!
//! With ractor's `cluster` feature every message type implements [`ractor::Message`] itself. The types that never
//! leave their process (an agent's own mailbox, the memory, the summarizers) take the default: not serializable, so
//! a send to a remote actor fails instead of being written. The types a remote node sends (a gateway's, the
//! ledger's, the resolver's, the head's and a node host's) serialize their variants as JSON, one variant name per
//! variant; a call's reply port becomes a byte port on the wire and is answered in JSON too.
//!
//! What arrives is judged like anything else: a delivered document is validated again by the receiving gateway
//! (`Document` deserializes by validating), so a node cannot slip an unchecked document past a gateway.

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Message, RpcReplyPort};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::run::agent::AgentMsg;
use crate::run::gateway::GatewayMsg;
use crate::run::ledger::{Event, TokenLedgerMsg};
use crate::run::resolver_actor::ResolverMsg;

/// A one-way message with `args` as JSON.
pub(crate) fn cast<A: Serialize>(variant: &str, args: &A) -> Result<SerializedMessage, BoxedDowncastErr> {
    let args = encode(variant, args)?;
    Ok(SerializedMessage::Cast { variant: variant.to_owned(), args, metadata: None })
}

/// A call with `args` as JSON; the typed `reply` is answered from the JSON the remote node sends back.
pub(crate) fn call<A: Serialize, R: DeserializeOwned + Send + 'static>(
    variant: &str,
    args: &A,
    reply: RpcReplyPort<R>,
) -> Result<SerializedMessage, BoxedDowncastErr> {
    let args = encode(variant, args)?;
    let (tx, rx) = ractor::concurrency::oneshot::<Vec<u8>>();
    let timeout = reply.get_timeout();
    let name = variant.to_owned();
    tokio::spawn(async move {
        let bytes = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, rx).await.ok().and_then(Result::ok),
            None => rx.await.ok(),
        };
        // No bytes, or the empty answer ([`DROPPED`]): the remote side dropped the reply (its actor failed, or its
        // node went away); dropping the typed port tells the caller so (`CallResult::SenderError`), as it would
        // locally.
        let Some(bytes) = bytes.filter(|b| b.as_slice() != DROPPED) else { return };
        match serde_json::from_slice::<R>(&bytes) {
            Ok(answer) => {
                let _ = reply.send(answer);
            }
            Err(err) => tracing::error!(target: "less.cluster", "the answer to {name} does not decode: {err}"),
        }
    });
    let port = match timeout {
        Some(timeout) => RpcReplyPort::from((tx, timeout)),
        None => RpcReplyPort::from(tx),
    };
    Ok(SerializedMessage::Call { variant: variant.to_owned(), args, reply: port, metadata: None })
}

/// The arguments of a received message.
pub(crate) fn args<A: DeserializeOwned>(variant: &str, bytes: &[u8]) -> Result<A, BoxedDowncastErr> {
    serde_json::from_slice(bytes).map_err(|err| {
        tracing::error!(target: "less.cluster", "a received {variant} does not decode: {err}");
        BoxedDowncastErr
    })
}

/// A typed reply port whose answer goes back to the remote caller as JSON.
pub(crate) fn answer<R: Serialize + Send + 'static>(reply: RpcReplyPort<Vec<u8>>) -> RpcReplyPort<R> {
    let (tx, rx) = ractor::concurrency::oneshot::<R>();
    let timeout = reply.get_timeout();
    tokio::spawn(async move {
        let answer = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, rx).await.ok().and_then(Result::ok),
            None => rx.await.ok(),
        };
        let Some(answer) = answer else {
            // The actor dropped the reply (it failed mid-call): say so, else the caller waits for its timeout.
            let _ = reply.send(DROPPED.to_vec());
            return;
        };
        match serde_json::to_vec(&answer) {
            Ok(bytes) => {
                let _ = reply.send(bytes);
            }
            Err(err) => tracing::error!(target: "less.cluster", "an answer does not encode: {err}"),
        }
    });
    match timeout {
        Some(timeout) => RpcReplyPort::from((tx, timeout)),
        None => RpcReplyPort::from(tx),
    }
}

/// The answer that says the reply was dropped (no JSON text is empty).
const DROPPED: &[u8] = b"";

fn encode<A: Serialize>(variant: &str, args: &A) -> Result<Vec<u8>, BoxedDowncastErr> {
    serde_json::to_vec(args).map_err(|err| {
        tracing::error!(target: "less.cluster", "{variant} does not encode: {err}");
        BoxedDowncastErr
    })
}

/// A message that is not for this message type, or a local-only variant sent to a remote actor.
pub(crate) fn unknown(what: &str, variant: &str) -> BoxedDowncastErr {
    tracing::error!(target: "less.cluster", "{what}: no remote variant {variant}");
    BoxedDowncastErr
}

/// A received message: its variant, its arguments and (for a call) its reply port.
pub(crate) type Parts = (String, Vec<u8>, Option<RpcReplyPort<Vec<u8>>>);

/// Splits a received message into its variant, arguments and (for a call) reply port.
pub(crate) fn parts(message: SerializedMessage) -> Result<Parts, BoxedDowncastErr> {
    match message {
        SerializedMessage::Cast { variant, args, .. } => Ok((variant, args, None)),
        SerializedMessage::Call { variant, args, reply, .. } => Ok((variant, args, Some(reply))),
        SerializedMessage::CallReply(..) => Err(BoxedDowncastErr),
    }
}

/// The reply port of a call, or an error for a call sent as a cast.
pub(crate) fn port(
    variant: &str,
    reply: Option<RpcReplyPort<Vec<u8>>>,
) -> Result<RpcReplyPort<Vec<u8>>, BoxedDowncastErr> {
    reply.ok_or_else(|| unknown("a call without a reply port", variant))
}

// The agent's mailbox never leaves its node: only its gateway holds it.
impl Message for AgentMsg {}
impl Message for crate::memory::MemoryMsg {}
impl Message for crate::dag::actor::SummarizerMsg {}
impl Message for crate::dag::actor::LevelMsg {}

impl Message for GatewayMsg {
    fn serializable() -> bool {
        true
    }

    /// What one agent sends another, and the driver's turns, cross; an agent's requests to its own gateway (derefs,
    /// grants, the end of a turn) never leave its node.
    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            GatewayMsg::Deliver(envelope, reply) => call("Deliver", &envelope, reply),
            GatewayMsg::Forward(forwarded) => cast("Forward", &forwarded),
            GatewayMsg::Act(request, reply) => call("Act", &(request.index, request.attempt), reply),
            GatewayMsg::ActAt(index, attempt, reply) => call("Act", &(index, attempt), reply),
            GatewayMsg::AskGrant(ask, reply) => call("AskGrant", &ask, reply),
            GatewayMsg::SpendCodeGrant(request, reply) => call("SpendCodeGrant", &request, reply),
            GatewayMsg::Deref(..) => Err(unknown("gateway", "Deref")),
            GatewayMsg::Search(..) => Err(unknown("gateway", "Search")),
            GatewayMsg::List(..) => Err(unknown("gateway", "List")),
            GatewayMsg::Describe(..) => Err(unknown("gateway", "Describe")),
            GatewayMsg::Recall(..) => Err(unknown("gateway", "Recall")),
            GatewayMsg::EndTurn => Err(unknown("gateway", "EndTurn")),
            GatewayMsg::IssueGrant(..) => Err(unknown("gateway", "IssueGrant")),
            GatewayMsg::Restore(..) => Err(unknown("gateway", "Restore")),
            #[cfg(any(test, feature = "faults"))]
            GatewayMsg::Fail => Err(unknown("gateway", "Fail")),
            #[cfg(any(test, feature = "faults"))]
            GatewayMsg::FailAfterNextDelivery => Err(unknown("gateway", "FailAfterNextDelivery")),
        }
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
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
}

impl Message for TokenLedgerMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            // A delivery's restatement is not written to `ledger.jsonl`, but the ledger needs it (a baseline's
            // history, the reports an agent knows): it travels beside the event.
            TokenLedgerMsg::Record(event) => {
                let prose = match &*event {
                    Event::Delivered { prose, .. } => prose.clone(),
                    _ => None,
                };
                cast("Record", &(event, prose))
            }
            TokenLedgerMsg::Wire(sent) => cast("Wire", &sent),
            TokenLedgerMsg::History(reply) => call("History", &(), reply),
            TokenLedgerMsg::Known(agent, reply) => call("Known", &agent, reply),
            TokenLedgerMsg::Ack(reply) => call("Ack", &(), reply),
            // Snapshots, flushes and ticks are the head's own.
            TokenLedgerMsg::Snapshot(_) => Err(unknown("ledger", "Snapshot")),
            TokenLedgerMsg::Flush(_) => Err(unknown("ledger", "Flush")),
            TokenLedgerMsg::Tick => Err(unknown("ledger", "Tick")),
            TokenLedgerMsg::Schedule => Err(unknown("ledger", "Schedule")),
            #[cfg(any(test, feature = "faults"))]
            TokenLedgerMsg::Fail => Err(unknown("ledger", "Fail")),
        }
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        let (variant, bytes, reply) = parts(message)?;
        Ok(match variant.as_str() {
            "Record" => {
                let (mut event, prose): (Box<Event>, Option<String>) = args(&variant, &bytes)?;
                if let Event::Delivered { prose: slot, .. } = &mut *event {
                    *slot = prose;
                }
                TokenLedgerMsg::Record(event)
            }
            "Wire" => TokenLedgerMsg::Wire(args(&variant, &bytes)?),
            "History" => TokenLedgerMsg::History(answer(port(&variant, reply)?)),
            "Known" => TokenLedgerMsg::Known(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Ack" => TokenLedgerMsg::Ack(answer(port(&variant, reply)?)),
            other => return Err(unknown("ledger", other)),
        })
    }
}

impl Message for ResolverMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            ResolverMsg::Resolve(pointers, reply) => call("Resolve", &pointers, reply),
            ResolverMsg::ReadUnpinned(pointer, reply) => call("ReadUnpinned", &pointer, reply),
            ResolverMsg::Remember(id, doc) => cast("Remember", &(id, doc)),
            ResolverMsg::Ack(reply) => call("Ack", &(), reply),
            ResolverMsg::Flush(reply) => call("Flush", &(), reply),
            // Taking the intake and failing are the head's own.
            ResolverMsg::Take => Err(unknown("resolver", "Take")),
            #[cfg(any(test, feature = "faults"))]
            ResolverMsg::Fail => Err(unknown("resolver", "Fail")),
        }
    }

    fn deserialize(message: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        let (variant, bytes, reply) = parts(message)?;
        Ok(match variant.as_str() {
            "Resolve" => ResolverMsg::Resolve(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "ReadUnpinned" => ResolverMsg::ReadUnpinned(args(&variant, &bytes)?, answer(port(&variant, reply)?)),
            "Remember" => {
                let (id, doc) = args(&variant, &bytes)?;
                ResolverMsg::Remember(id, doc)
            }
            "Ack" => ResolverMsg::Ack(answer(port(&variant, reply)?)),
            "Flush" => ResolverMsg::Flush(answer(port(&variant, reply)?)),
            other => return Err(unknown("resolver", other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call written for the wire and read back answers the original caller through JSON.
    #[tokio::test]
    async fn a_call_round_trips_through_bytes() {
        let (tx, rx) = ractor::concurrency::oneshot::<Vec<(String, String)>>();
        let wire = TokenLedgerMsg::Known("lead".to_owned(), tx.into()).serialize().expect("serializes");
        let TokenLedgerMsg::Known(agent, reply) = TokenLedgerMsg::deserialize(wire).expect("deserializes") else {
            panic!("another variant")
        };
        assert_eq!(agent, "lead");
        reply.send(vec![("m1".to_owned(), "said".to_owned())]).expect("sent");
        assert_eq!(rx.await.expect("answered"), vec![("m1".to_owned(), "said".to_owned())]);
    }

    /// A delivery crosses with its envelope whole: the draft under its kind, the exact wire text.
    #[tokio::test]
    async fn a_delivery_crosses_whole() {
        let doc = serde_json::json!({"type": "escalation", "from": "a", "msg_id": "a-m1", "reason": "r", "severity": "warning"});
        let envelope = crate::run::Envelope {
            from: "a".to_owned(),
            to: "b".to_owned(),
            msg_id: "a-m1".to_owned(),
            kind: crate::run::EnvelopeKind::Escalation,
            doc: crate::run::Draft::Raw(doc.clone()),
            wire: doc.to_string(),
            inline_code: None,
            code_sources: Vec::new(),
            prose: None,
            restated: vec!["said".to_owned()],
        };
        let (tx, rx) = ractor::concurrency::oneshot::<Result<u32, less_contract::Violation>>();
        let wire = GatewayMsg::Deliver(Box::new(envelope), tx.into()).serialize().expect("serializes");
        let GatewayMsg::Deliver(back, reply) = GatewayMsg::deserialize(wire).expect("deserializes") else {
            panic!("another variant")
        };
        assert_eq!(
            (back.wire.as_str(), back.restated.as_slice()),
            (doc.to_string().as_str(), &["said".to_owned()][..])
        );
        assert!(matches!(back.doc, crate::run::Draft::Raw(ref d) if d == &doc));
        reply.send(Ok(7)).expect("sent");
        assert_eq!(rx.await.expect("answered"), Ok(7));
    }

    /// A reply the callee drops reaches the caller as a dropped reply, not a wait for the timeout.
    #[tokio::test]
    async fn a_dropped_reply_is_dropped_for_the_caller() {
        let (tx, rx) = ractor::concurrency::oneshot::<()>();
        let wire = TokenLedgerMsg::Ack(tx.into()).serialize().expect("serializes");
        let TokenLedgerMsg::Ack(reply) = TokenLedgerMsg::deserialize(wire).expect("deserializes") else {
            panic!("another variant")
        };
        drop(reply);
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), rx).await.expect("at once");
        assert!(answer.is_err(), "the caller's reply was dropped");
    }

    /// A delivery's restatement crosses with its event (`ledger.jsonl` leaves it out; the ledger needs it).
    #[test]
    fn a_recorded_delivery_keeps_its_restatement() {
        let doc = crate::run::wire::Document::message(serde_json::json!({
            "type": "escalation", "from": "a", "msg_id": "a-m1", "reason": "r", "severity": "warning"
        }));
        let event = Event::Delivered {
            from: "a".to_owned(),
            to: "b".to_owned(),
            msg_id: "a-m1".to_owned(),
            kind: crate::run::EnvelopeKind::Escalation,
            tokens: 3,
            max_tokens: 800,
            doc,
            prose: Some("a said r".to_owned()),
            restated: Vec::new(),
        };
        let wire = TokenLedgerMsg::Record(Box::new(event)).serialize().expect("serializes");
        let TokenLedgerMsg::Record(event) = TokenLedgerMsg::deserialize(wire).expect("deserializes") else {
            panic!("another variant")
        };
        assert!(matches!(*event, Event::Delivered { prose: Some(ref p), .. } if p == "a said r"));
    }

    /// The ledger's own variants are refused on the wire, not written.
    #[test]
    fn local_variants_do_not_serialize() {
        assert!(TokenLedgerMsg::Tick.serialize().is_err());
    }
}
