//! Where a supervised actor is: an address that outlives the actor behind it.
//!
//! The run supervisor restarts a failed infrastructure actor (memory, resolver, ledger, summarizers), and a restart
//! yields a new `ActorRef`. Every other actor reaches these through a [`Slot`] in the run's context, which the
//! supervisor points at the new actor before anyone can need it.
//!
//! The rule for work in flight: a call the actor never answered (its mailbox went down with it, or the send found it
//! gone) is sent once more, to the actor that replaced it, after waiting at most [`RESTART_WAIT`] for the
//! replacement. A call that was answered is never repeated. So a call fails only when the actor fails twice in a row
//! or is not replaced, and nothing acknowledged depends on a mailbox: what the ledger and the `sam:` index are told
//! without a call goes into their books ([`crate::run::ledger::LedgerBook`], the resolver's intake), which outlive
//! the actors that write them out.

use std::sync::RwLock;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorRef, Message, MessagingErr, RactorErr, RpcReplyPort};
use tokio::sync::watch;

/// Longest a call waits for a failed actor's replacement before it gives up.
pub const RESTART_WAIT: Duration = Duration::from_secs(30);

/// The actor now serving a part of the run, replaced when its supervisor restarts it.
pub(crate) struct Slot<M: Message> {
    current: RwLock<ActorRef<M>>,
    /// The supervisor gave the actor up: no replacement will come, and nobody waits for one.
    abandoned: std::sync::atomic::AtomicBool,
    /// How many times the actor was replaced; callers that found it gone wait for the next value.
    generation: watch::Sender<u64>,
}

impl<M: Message> Slot<M> {
    /// A slot holding `actor`.
    pub(crate) fn new(actor: ActorRef<M>) -> Slot<M> {
        Slot { current: RwLock::new(actor), abandoned: false.into(), generation: watch::Sender::new(0) }
    }

    /// The actor now serving.
    pub(crate) fn get(&self) -> ActorRef<M> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The actor now serving and the slot's generation, read together.
    pub(crate) fn current(&self) -> (ActorRef<M>, u64) {
        let actor = self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        (actor.clone(), *self.generation.borrow())
    }

    /// How many times the actor was replaced so far.
    #[cfg(any(test, feature = "faults"))]
    pub(crate) fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Points the slot at `actor`, the failed one's replacement (the supervisor does, once it started).
    pub(crate) fn replace(&self, actor: ActorRef<M>) {
        let mut current = self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = actor;
        self.generation.send_modify(|n| *n += 1);
    }

    /// No replacement will come (the actor failed past its restart limit): callers stop waiting for one.
    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, std::sync::atomic::Ordering::Release);
        self.generation.send_modify(|n| *n += 1);
    }

    /// Sends `msg` to the actor now serving, without waiting (a message lost with a failed actor is lost: use it
    /// only for what may be lost, such as a wake-up).
    pub(crate) fn send(&self, msg: M) -> Result<(), MessagingErr<M>> {
        self.get().send_message(msg)
    }

    /// Calls the actor now serving; a call it did not answer goes once more to its replacement (see the module's
    /// rule). `make` builds the message for each attempt.
    pub(crate) async fn call<T: Send + 'static>(
        &self,
        make: impl Fn(RpcReplyPort<T>) -> M,
        timeout: Option<Duration>,
    ) -> Result<CallResult<T>, MessagingErr<M>> {
        let (actor, generation) = self.current();
        let first = actor.call(&make, timeout).await;
        let unanswered = matches!(first, Ok(CallResult::SenderError) | Err(_));
        if !unanswered || !self.replaced_after(generation).await {
            return first;
        }
        self.get().call(&make, timeout).await
    }

    /// [`Slot::call`] without a timeout, its outcome as `ractor::call!` gives it.
    pub(crate) async fn ask<T: Send + 'static>(&self, make: impl Fn(RpcReplyPort<T>) -> M) -> Result<T, RactorErr<M>> {
        match self.call(make, None).await {
            Ok(CallResult::Success(value)) => Ok(value),
            Ok(other) => Err(RactorErr::from(other)),
            Err(err) => Err(RactorErr::from(err)),
        }
    }

    /// Waits (at most [`RESTART_WAIT`]) until the slot moved past `generation`: whether it did.
    pub(crate) async fn replaced_after(&self, generation: u64) -> bool {
        let abandoned = || self.abandoned.load(std::sync::atomic::Ordering::Acquire);
        let mut seen = self.generation.subscribe();
        let moved = tokio::time::timeout(RESTART_WAIT, seen.wait_for(|n| *n > generation || abandoned())).await;
        matches!(moved, Ok(Ok(_))) && !abandoned()
    }
}

#[cfg(test)]
mod tests {
    use ractor::{Actor, ActorProcessingErr};

    use super::*;

    struct Echo;

    enum EchoMsg {
        Echo(u32, RpcReplyPort<u32>),
        Fail,
    }

    impl Message for EchoMsg {}

    impl Actor for Echo {
        type Msg = EchoMsg;
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<EchoMsg>, _: ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }

        async fn handle(&self, _: ActorRef<EchoMsg>, msg: EchoMsg, _: &mut ()) -> Result<(), ActorProcessingErr> {
            match msg {
                EchoMsg::Echo(n, reply) => {
                    let _ = reply.send(n);
                    Ok(())
                }
                EchoMsg::Fail => Err("failing on purpose".into()),
            }
        }
    }

    /// A call queued behind a failure is not answered by the failed actor; it reaches the replacement once the slot
    /// points there, and is answered once.
    #[tokio::test]
    async fn an_unanswered_call_goes_once_more_to_the_replacement() {
        let (first, handle) = Actor::spawn(None, Echo, ()).await.expect("spawn");
        let slot = std::sync::Arc::new(Slot::new(first.clone()));
        first.send_message(EchoMsg::Fail).expect("send");
        let caller = {
            let slot = slot.clone();
            tokio::spawn(async move { slot.ask(|tx| EchoMsg::Echo(7, tx)).await })
        };
        handle.await.expect("the first actor ends");
        let (second, _) = Actor::spawn(None, Echo, ()).await.expect("spawn");
        slot.replace(second.clone());
        assert_eq!(caller.await.expect("join").expect("answered by the replacement"), 7);
        second.stop(None);
    }

    /// An actor given up gets no replacement: the call fails as it did, without waiting for one.
    #[tokio::test]
    async fn an_abandoned_actors_call_fails_at_once() {
        let (first, handle) = Actor::spawn(None, Echo, ()).await.expect("spawn");
        first.send_message(EchoMsg::Fail).expect("send");
        handle.await.expect("the first actor ends");
        let slot = Slot::new(first);
        slot.abandon();
        let started = std::time::Instant::now();
        assert!(slot.ask(|tx| EchoMsg::Echo(7, tx)).await.is_err());
        assert!(started.elapsed() < RESTART_WAIT, "no wait for a replacement");
    }
}
