//! The resolver actor: owns the run's [`Resolver`] (workspace + pinned digests) and the episodic index behind
//! `sam:` pointers (every delivered message and engram of the run).

use std::collections::HashMap;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;

use crate::blocking;
use crate::resolver::{Resolved, Resolver, SamSource};
use less_contract::Pointer;
use less_contract::Violation;

/// The actor.
pub struct ResolverActor;

/// What the blocking helper calls the resolver.
const RESOLVER: &str = "the resolver";
/// The error when a panic in a resolution took the resolver with it.
const LOST: &str = "the resolver was lost by an earlier failed task";

/// Messages to the resolver.
pub enum ResolverMsg {
    /// Resolve every pointer (all or nothing: digests are pinned only when every pointer resolved).
    Resolve(Vec<Pointer>, RpcReplyPort<Result<Vec<Resolved>, Violation>>),
    /// Read what a pointer addresses without pinning its digest (the verbatim baseline pastes this way; not
    /// metered).
    ReadUnpinned(Pointer, RpcReplyPort<Result<String, Violation>>),
    /// Remember a delivered (or refused) document for `sam:` pointers.
    Remember(String, std::sync::Arc<Value>),
}

/// State: the resolver and the episodic index, moved onto the blocking pool to resolve (a resolution reads files).
pub struct ResolverState {
    held: Option<Held>,
}

struct Held {
    resolver: Resolver,
    sam: SamIndex,
}

#[derive(Default)]
struct SamIndex(HashMap<(String, String), String>);

impl SamSource for SamIndex {
    fn lookup(&self, namespace: &str, key: &str) -> Option<String> {
        self.0.get(&(namespace.to_owned(), key.to_owned())).cloned()
    }
}

impl Actor for ResolverActor {
    type Msg = ResolverMsg;
    type State = ResolverState;
    type Arguments = Resolver;

    async fn pre_start(
        &self,
        _myself: ActorRef<ResolverMsg>,
        resolver: Resolver,
    ) -> Result<ResolverState, ActorProcessingErr> {
        Ok(ResolverState { held: Some(Held { resolver, sam: SamIndex::default() }) })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ResolverMsg>,
        msg: ResolverMsg,
        state: &mut ResolverState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ResolverMsg::Resolve(pointers, reply) => {
                let resolved =
                    blocking::with_taken(&mut state.held, RESOLVER, move |h| h.resolver.resolve_all(&pointers, &h.sam));
                let _ = reply.send(resolved.await?);
            }
            ResolverMsg::ReadUnpinned(pointer, reply) => {
                let read = blocking::with_taken(&mut state.held, RESOLVER, move |h| {
                    h.resolver.read_unpinned(&pointer, &h.sam)
                });
                let _ = reply.send(read.await?);
            }
            ResolverMsg::Remember(msg_id, doc) => {
                let sam = &mut state.held.as_mut().ok_or(LOST)?.sam;
                sam.0.insert(("msg".into(), msg_id), doc.to_string());
                for engram in doc.get("engrams").and_then(Value::as_array).into_iter().flatten() {
                    let text = engram.to_string();
                    let id = engram.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let kind = engram.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
                    sam.0.insert(("engram".into(), id.clone()), text.clone());
                    sam.0.insert((kind.clone(), id), text.clone());
                    for tag in engram.get("tags").and_then(Value::as_array).into_iter().flatten() {
                        if let Some(tag) = tag.as_str() {
                            sam.0.insert((kind.clone(), tag.to_owned()), text.clone());
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
