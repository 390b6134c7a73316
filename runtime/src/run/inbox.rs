//! An agent's inbox, with a bound on what it holds inline.
//!
//! Everything delivered to an agent stays in its inbox for the whole run (its context), and its gateway keeps a copy
//! to restart it from. Under load that is where a run's memory goes: a recipient that does not take a turn holds every
//! document sent to it. So an inbox keeps at most `cap` typed messages inline; past that, the oldest inline one is
//! replaced by a stub naming it, `{"spilled": {"pointer": "sam:msg:<id>", …}}`. The document itself is not lost: the
//! run archived it and its `sam:` index answers the pointer, so the agent dereferences it like any other source
//! (metered against its budget). Briefs, grants, what the agent dereferenced and what it recalled are never spilled.
//!
//! The gateway and the agent apply the same [`Inbox::push`] to the same deliveries, in the same order, so both copies
//! spill the same messages and a restarted agent starts from what the old one had. Both copies share one [`Spill`]
//! per typed message (its id, sender, type and size) and the gateway interns senders and types, so a spilled message
//! costs one small allocation and a slot in each copy; its stub is made when the agent reads its inbox.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Value, json};

/// How many typed messages an inbox keeps inline unless the run says otherwise.
pub const DEFAULT_INBOX_CAP: usize = 1024;

/// A delivered typed message as its stub will name it. Shared (`Arc`) by the gateway's and the agent's copy of an
/// inbox; `from` and `kind` are shared by every message of a sender or of a type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spill {
    /// The message id (`sam:msg:<id>` reads it back).
    pub msg_id: Arc<str>,
    /// Who sent it.
    pub from: Arc<str>,
    /// Its type (`task_result`, `escalation`, …).
    pub kind: Arc<str>,
    /// Its size on the wire, in tokens: what a deref of it will cost.
    pub tokens: u32,
}

impl Spill {
    /// The pointer that reads the message back.
    pub fn pointer(&self) -> String {
        format!("sam:msg:{}", self.msg_id)
    }

    /// What stands in the inbox for the message once it is spilled.
    pub fn stub(&self) -> Value {
        json!({ "spilled": {
            "pointer": self.pointer(),
            "from": &*self.from,
            "type": &*self.kind,
            "tokens": self.tokens,
        } })
    }
}

/// One document for an inbox: a typed message carries what its stub would say; anything else is kept inline always.
#[derive(Debug, Clone)]
pub struct InboxItem {
    /// The document as the agent reads it.
    pub doc: Arc<Value>,
    /// `Some` for a typed message, which may be spilled.
    pub spill: Option<Arc<Spill>>,
}

/// A place in an inbox: a document, or what is left of a spilled message (its stub is made when the inbox is read,
/// so a spilled message costs a pointer to its shared description, not a JSON document).
#[derive(Debug, Clone)]
enum Entry {
    Doc(Arc<Value>),
    Spilled(Arc<Spill>),
}

/// An agent's delivered documents, oldest first, with at most `cap` typed messages inline.
#[derive(Debug, Clone)]
pub struct Inbox {
    entries: Vec<Entry>,
    /// Typed messages still inline: their position in `entries` and their stub, oldest first.
    inline: VecDeque<(usize, Arc<Spill>)>,
    cap: usize,
}

impl Default for Inbox {
    fn default() -> Inbox {
        Inbox::new(DEFAULT_INBOX_CAP)
    }
}

impl Inbox {
    /// An empty inbox keeping at most `cap` typed messages inline (at least one).
    pub fn new(cap: usize) -> Inbox {
        Inbox { entries: Vec::new(), inline: VecDeque::new(), cap: cap.max(1) }
    }

    /// Appends `item`; if that puts more than `cap` typed messages inline, the oldest is spilled (its document
    /// dropped, its stub left in its place), and its description is returned.
    pub fn push(&mut self, item: InboxItem) -> Option<Arc<Spill>> {
        let at = self.entries.len();
        self.entries.push(Entry::Doc(item.doc));
        let spill = item.spill?;
        self.inline.push_back((at, spill));
        if self.inline.len() <= self.cap {
            return None;
        }
        let (oldest, spill) = self.inline.pop_front()?;
        self.entries[oldest] = Entry::Spilled(spill.clone());
        Some(spill)
    }

    /// Appends a document that is never spilled (a deref result, a recall answer).
    pub fn keep(&mut self, doc: Arc<Value>) {
        self.entries.push(Entry::Doc(doc));
    }

    /// The documents, oldest first, spilled messages as their stubs (made here: what the agent reads in a turn).
    pub fn docs(&self) -> Vec<Arc<Value>> {
        self.entries
            .iter()
            .map(|entry| match entry {
                Entry::Doc(doc) => doc.clone(),
                Entry::Spilled(spill) => Arc::new(spill.stub()),
            })
            .collect()
    }

    /// How many documents it holds, stubs included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing was delivered yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many typed messages were spilled so far.
    pub fn n_spilled(&self) -> usize {
        self.entries.iter().filter(|entry| matches!(entry, Entry::Spilled(_))).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(i: usize) -> InboxItem {
        InboxItem {
            doc: Arc::new(json!({ "type": "task_result", "from": "w", "n": i })),
            spill: Some(Arc::new(Spill {
                msg_id: format!("m-{i}").into(),
                from: "w".into(),
                kind: "task_result".into(),
                tokens: 7,
            })),
        }
    }

    fn brief(i: usize) -> InboxItem {
        InboxItem { doc: Arc::new(json!({ "brief_id": format!("b-{i}") })), spill: None }
    }

    #[test]
    fn past_the_cap_the_oldest_message_becomes_a_pointer_and_briefs_stay() {
        let mut inbox = Inbox::new(2);
        assert_eq!(inbox.push(brief(0)), None);
        assert_eq!(inbox.push(message(1)), None);
        assert_eq!(inbox.push(message(2)), None);
        inbox.keep(Arc::new(json!({ "recalled": {} })));
        let spilled = inbox.push(message(3)).expect("the third message spills the first");
        assert_eq!(&*spilled.msg_id, "m-1");
        assert_eq!(inbox.len(), 5, "a stub keeps the message's place");
        let docs = inbox.docs();
        assert_eq!(docs[0]["brief_id"], "b-0");
        assert_eq!(docs[1]["spilled"]["pointer"], "sam:msg:m-1");
        assert_eq!(docs[1]["spilled"]["tokens"], 7);
        assert_eq!((docs[2]["n"].clone(), docs[4]["n"].clone()), (json!(2), json!(3)));
        // Many briefs later, briefs are still inline and only messages spill.
        for i in 0..10 {
            inbox.push(brief(10 + i));
        }
        assert_eq!(inbox.push(message(4)).map(|s| s.msg_id.clone()), Some("m-2".into()));
        assert_eq!(inbox.n_spilled(), 2);
        let inline_messages = inbox.docs().iter().filter(|d| d.get("type").is_some()).count();
        assert_eq!(inline_messages, 2);
        assert!(inbox.docs().iter().filter(|d| d.get("brief_id").is_some()).count() == 11);
    }

    #[test]
    fn two_copies_fed_the_same_deliveries_agree_whatever_else_the_agent_keeps() {
        // The gateway's copy sees deliveries only; the agent's also what it read and recalled.
        let (mut gateway, mut agent) = (Inbox::new(3), Inbox::new(3));
        for i in 0..50 {
            let item = if i % 7 == 0 { brief(i) } else { message(i) };
            let a = gateway.push(item.clone());
            if i % 5 == 0 {
                agent.keep(Arc::new(json!({ "dereferenced": { "pointer": "repo:a.rs", "content": "x" } })));
            }
            let b = agent.push(item);
            assert_eq!(a, b);
            if let (Some(a), Some(b)) = (a, b) {
                assert!(Arc::ptr_eq(&a, &b), "both copies keep one description of a spilled message");
            }
        }
        let deliveries = |inbox: &Inbox| -> Vec<Value> {
            inbox.docs().iter().filter(|d| d.get("dereferenced").is_none()).map(|d| (**d).clone()).collect()
        };
        assert_eq!(deliveries(&gateway), deliveries(&agent));
        assert_eq!(gateway.n_spilled(), 50 - 8 - 3);
    }

    #[test]
    fn a_cap_of_zero_still_keeps_the_newest_message() {
        let mut inbox = Inbox::new(0);
        assert_eq!(inbox.push(message(0)), None);
        assert!(inbox.push(message(1)).is_some());
        assert_eq!(inbox.docs()[1]["n"], 1);
    }
}
