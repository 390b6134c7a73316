//! An agent's inbox: what it received, typed, with a bound on what it holds inline.
//!
//! [`Received`] is everything an agent can find in its inbox: a document its gateway delivered (a brief, a typed
//! message, a grant's terms), a baseline's delivery as it was on the wire, what a deref let through, a recall's
//! engrams and its note of what did not fit, a search's or a listing's answer, and the stub of a spilled message.
//! Agents match on it; [`Received::to_json`] (this file alone) writes the JSON shapes a tool or a test reads
//! (`{"dereferenced": …}`, `{"recalled": …}`, …), and no code takes those shapes apart again.
//!
//! Everything delivered to an agent stays in its inbox for the whole run (its context), and its gateway keeps a copy
//! to restart it from. Under load that is where a run's memory goes: a recipient that does not take a turn holds every
//! document sent to it. So an inbox keeps at most `cap` typed messages inline; past that, the oldest inline one is
//! replaced by a stub naming it ([`Received::Spilled`]). The document itself is not lost: the run archived it and its
//! `sam:` index answers the pointer, so the agent dereferences it like any other source (metered against its budget).
//! Briefs, grants, what the agent dereferenced and what it recalled are never spilled.
//!
//! The gateway and the agent apply the same [`Inbox::push`] to the same deliveries, in the same order, so both copies
//! spill the same messages and a restarted agent starts from what the old one had. Both copies share one [`Spill`]
//! per typed message (its id, sender, type and size) and the gateway interns senders and types, so a spilled message
//! costs one small allocation and a slot in each copy. Items are cheap to clone: what is big sits behind an `Arc`.

use std::collections::VecDeque;
use std::sync::Arc;

use less_contract::{Engram, GrantTerms, SharedBriefMicro, TypedMessage, Valid};
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use crate::workspace::FileOutline;

/// How many typed messages an inbox keeps inline unless the run says otherwise.
pub const DEFAULT_INBOX_CAP: usize = 1024;

/// Everything an agent can find in its inbox.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// A document its gateway delivered (in a baseline run, one whose wire text was not kept, as after a restart).
    Delivered(Delivered),
    /// A delivery in a baseline run: the text that was on the wire (what a model reads) and the document it carried.
    Verbatim(Arc<Verbatim>),
    /// What a deref let through.
    Dereferenced(Arc<Dereferenced>),
    /// An engram a recall answered with, best first (its hash keys stay in the store).
    Recalled(Arc<Engram>),
    /// The engrams a recall answer cut over the role's inline budget had no room for, as pointers.
    RecalledMore(Arc<RecalledMore>),
    /// A search of the workspace index.
    Searched(Arc<Searched>),
    /// A listing of workspace files.
    Listed(Arc<Listed>),
    /// What pointers hold, one line each: the catalogue a model chooses from.
    Described(Arc<Described>),
    /// A typed message past the inbox's inline cap: its pointer, which a deref reads back.
    Spilled(Arc<Spill>),
}

/// A document a gateway checked and delivered.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivered {
    /// A brief from the parent.
    Brief(Arc<Valid<SharedBriefMicro>>),
    /// A typed message (a report, an escalation, a question, …).
    Message(Arc<Valid<TypedMessage>>),
    /// A grant's terms: the MAC stays with the grantee's gateway, which verified it and holds the grant.
    Grant(Arc<GrantTerms>),
}

/// A baseline's delivery as it was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Verbatim {
    /// The wire text, pasted files and restated reports included.
    pub wire: String,
    /// The document it carried.
    pub doc: Delivered,
}

/// Content a deref let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dereferenced {
    /// The pointer read, without its digest (the agent's gateway recorded the digest).
    pub pointer: String,
    /// What it addresses.
    pub content: String,
}

/// The rest of a recall answer that was cut to the role's inline budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecalledMore {
    /// `sam:engram:<id>` pointers, dereferenced like any source.
    pub pointers: Vec<String>,
    /// Why they are not inline.
    pub why: String,
}

/// A search's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Searched {
    /// The query.
    pub query: String,
    /// The hits, best first.
    pub hits: Vec<SearchHit>,
}

/// One hit of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// The pointer in text form.
    pub pointer: String,
    /// Its signature, heading or first line.
    pub preview: String,
    /// What a deref of it costs.
    pub tokens: u32,
    /// Its content, pasted in the fair baseline (an orchestrator without LESS pastes what it retrieved); `None`
    /// under LESS.
    pub content: Option<String>,
}

/// A listing's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The path or glob listed.
    pub pattern: String,
    /// The files, with their sizes and top-level symbols.
    pub files: Vec<FileOutline>,
}

/// A description's answer: one line per pointer asked about, in the order asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// Each pointer with what it holds (`None`: nothing to say, outside the agent's reach, or cut).
    pub pointers: Vec<Description>,
    /// The pointers whose description the role's inline budget had no room for (the last ones asked): they are
    /// listed bare, and a deref reads them.
    pub cut: Vec<String>,
}

/// One pointer and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// The pointer as asked.
    pub pointer: String,
    /// One line on what it holds ([`crate::resolver::about`]).
    pub about: Option<String>,
}

impl Description {
    /// Its line in a catalogue: `- pointer — about`, or `- pointer` (what the gateway counts, and what a prompt
    /// shows).
    pub fn line(&self) -> String {
        match &self.about {
            Some(about) => format!("- {} — {about}\n", self.pointer),
            None => format!("- {}\n", self.pointer),
        }
    }
}

impl Received {
    /// The delivered document it is or carries (a baseline's delivery carries one beside its wire text).
    pub fn delivered(&self) -> Option<&Delivered> {
        match self {
            Received::Delivered(doc) => Some(doc),
            Received::Verbatim(verbatim) => Some(&verbatim.doc),
            _ => None,
        }
    }

    /// The JSON an agent's inbox item had before the inbox was typed, and what a tool or a test reads:
    /// a delivered document as itself, `{"verbatim": wire text, "doc": document}`, `{"dereferenced": {"pointer",
    /// "content"}}`, `{"recalled": engram}`, `{"recalled_more": {"pointers", "why"}}`, `{"searched": {"query",
    /// "hits": [{"pointer", "preview", "tokens"(, "content")}]}}`, `{"listed": {"pattern", "files": [{"path",
    /// "lines", "tokens", "symbols", "more"}]}}`, `{"described": {"pointers": [{"pointer", "about"}], "cut"}}`,
    /// `{"spilled": {"pointer": "sam:msg:<id>", "from", "type", "tokens"}}`.
    pub fn to_json(&self) -> Value {
        match self {
            Received::Delivered(doc) => doc.to_json(),
            Received::Verbatim(verbatim) => json!({ "verbatim": verbatim.wire, "doc": verbatim.doc.to_json() }),
            Received::Dereferenced(read) => {
                json!({ "dereferenced": { "pointer": read.pointer, "content": read.content } })
            }
            Received::Recalled(engram) => json!({ "recalled": to_value(&**engram) }),
            Received::RecalledMore(more) => {
                json!({ "recalled_more": { "pointers": more.pointers, "why": more.why } })
            }
            Received::Searched(searched) => {
                let hits: Vec<Value> = searched
                    .hits
                    .iter()
                    .map(|hit| match &hit.content {
                        Some(content) => json!({"pointer": hit.pointer, "preview": hit.preview, "tokens": hit.tokens,
                                                "content": content}),
                        None => json!({"pointer": hit.pointer, "preview": hit.preview, "tokens": hit.tokens}),
                    })
                    .collect();
                json!({ "searched": { "query": searched.query, "hits": hits } })
            }
            Received::Listed(listed) => {
                let files: Vec<Value> = listed
                    .files
                    .iter()
                    .map(|f| {
                        json!({"path": f.path, "lines": f.lines, "tokens": f.tokens, "symbols": f.symbols,
                               "more": f.more})
                    })
                    .collect();
                json!({ "listed": { "pattern": listed.pattern, "files": files } })
            }
            Received::Described(described) => {
                let pointers: Vec<Value> =
                    described.pointers.iter().map(|d| json!({"pointer": d.pointer, "about": d.about})).collect();
                json!({ "described": { "pointers": pointers, "cut": described.cut } })
            }
            Received::Spilled(spill) => json!({ "spilled": {
                "pointer": spill.pointer(),
                "from": &*spill.from,
                "type": &*spill.kind,
                "tokens": spill.tokens,
            } }),
        }
    }
}

impl Delivered {
    /// Who sent it (a grant's terms name an issuer, not a sender).
    pub fn from(&self) -> Option<&str> {
        match self {
            Delivered::Brief(brief) => Some(&brief.from),
            Delivered::Message(message) => Some(&message.from),
            Delivered::Grant(_) => None,
        }
    }

    /// The brief, if it is one.
    pub fn brief(&self) -> Option<&SharedBriefMicro> {
        match self {
            Delivered::Brief(brief) => Some(brief),
            _ => None,
        }
    }

    /// The typed message, if it is one.
    pub fn message(&self) -> Option<&TypedMessage> {
        match self {
            Delivered::Message(message) => Some(message),
            _ => None,
        }
    }

    /// The document's JSON, as its gateway checked it (a grant: its terms).
    pub fn to_json(&self) -> Value {
        match self {
            Delivered::Brief(brief) => brief.to_value(),
            Delivered::Message(message) => message.to_value(),
            Delivered::Grant(terms) => to_value(&**terms),
        }
    }
}

impl Serialize for Received {
    /// As [`Received::to_json`].
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// A contract value's JSON (string keys and finite numbers only, so it cannot fail; a NaN would become null).
fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

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
}

/// One document for an inbox: a typed message carries what its stub would say; anything else is kept inline always.
#[derive(Debug, Clone)]
pub struct InboxItem {
    /// The document as the agent reads it.
    pub doc: Received,
    /// `Some` for a typed message, which may be spilled.
    pub spill: Option<Arc<Spill>>,
    /// Where it stands among what arrived while its receiver was idle: its sender's place in the hierarchy (the
    /// sender's path, a gateway's after its agent's) and the sender's message number
    /// ([`crate::run::Ordering::Causal`]). `None` sorts first.
    pub order: Option<(String, u64)>,
}

impl InboxItem {
    /// The order of a document `sender` sent as message `msg_id` (`<sender>-m<n>`), in `scenario`.
    pub fn order_of(scenario: &less_contract::Scenario, sender: &str, msg_id: &str) -> Option<(String, u64)> {
        let n = msg_id.rsplit_once("-m")?.1.parse().ok()?;
        let path = match sender.strip_suffix("-gw") {
            Some(agent) => format!("{}#gw", scenario.identity(agent)),
            None => scenario.identity(sender),
        };
        Some((path, n))
    }
}

/// An agent's inbox, oldest first, with at most `cap` typed messages inline (older ones as
/// [`Received::Spilled`], which costs a pointer to the message's shared description).
#[derive(Debug, Clone)]
pub struct Inbox {
    entries: Vec<Received>,
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
        self.entries.push(item.doc);
        let spill = item.spill?;
        self.inline.push_back((at, spill));
        if self.inline.len() <= self.cap {
            return None;
        }
        let (oldest, spill) = self.inline.pop_front()?;
        self.entries[oldest] = Received::Spilled(spill.clone());
        Some(spill)
    }

    /// Appends what is never spilled (a deref result, a recall answer, a search's or a listing's).
    pub fn keep(&mut self, doc: Received) {
        self.entries.push(doc);
    }

    /// What it holds, oldest first, spilled messages as their stubs (what the agent reads in a turn).
    pub fn docs(&self) -> Vec<Received> {
        self.entries.clone()
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
        self.entries.iter().filter(|entry| matches!(entry, Received::Spilled(_))).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(i: usize) -> InboxItem {
        let doc =
            json!({ "type": "task_result", "from": "w", "msg_id": format!("m-{i}"), "task": "t", "status": "pass" });
        InboxItem {
            doc: Received::Delivered(Delivered::Message(Arc::new(Valid::from_value(&doc).expect("a message")))),
            spill: Some(Arc::new(Spill {
                msg_id: format!("m-{i}").into(),
                from: "w".into(),
                kind: "task_result".into(),
                tokens: 7,
            })),
            order: None,
        }
    }

    fn brief(i: usize) -> InboxItem {
        let doc = json!({ "brief_id": format!("b-{i}"), "from": "lead", "what_matters_now": ["x"] });
        InboxItem {
            doc: Received::Delivered(Delivered::Brief(Arc::new(Valid::from_value(&doc).expect("a brief")))),
            spill: None,
            order: None,
        }
    }

    fn read() -> Received {
        Received::Dereferenced(Arc::new(Dereferenced { pointer: "repo:a.rs".into(), content: "x".into() }))
    }

    /// The message id of a delivered message, the brief id of a brief.
    fn id(doc: &Received) -> Option<&str> {
        match doc.delivered()? {
            Delivered::Message(message) => Some(&message.msg_id),
            Delivered::Brief(brief) => Some(&brief.brief_id),
            Delivered::Grant(_) => None,
        }
    }

    #[test]
    fn past_the_cap_the_oldest_message_becomes_a_pointer_and_briefs_stay() {
        let mut inbox = Inbox::new(2);
        assert_eq!(inbox.push(brief(0)), None);
        assert_eq!(inbox.push(message(1)), None);
        assert_eq!(inbox.push(message(2)), None);
        inbox.keep(read());
        let spilled = inbox.push(message(3)).expect("the third message spills the first");
        assert_eq!(&*spilled.msg_id, "m-1");
        assert_eq!(inbox.len(), 5, "a stub keeps the message's place");
        let docs = inbox.docs();
        assert_eq!(id(&docs[0]), Some("b-0"));
        let Received::Spilled(stub) = &docs[1] else { panic!("a stub: {:?}", docs[1]) };
        assert_eq!((stub.pointer().as_str(), stub.tokens), ("sam:msg:m-1", 7));
        assert_eq!(docs[1].to_json()["spilled"]["pointer"], "sam:msg:m-1");
        assert_eq!((id(&docs[2]), id(&docs[4])), (Some("m-2"), Some("m-3")));
        // Many briefs later, briefs are still inline and only messages spill.
        for i in 0..10 {
            inbox.push(brief(10 + i));
        }
        assert_eq!(inbox.push(message(4)).map(|s| s.msg_id.clone()), Some("m-2".into()));
        assert_eq!(inbox.n_spilled(), 2);
        let docs = inbox.docs();
        let inline_messages = docs.iter().filter(|d| d.delivered().and_then(Delivered::message).is_some()).count();
        assert_eq!(inline_messages, 2);
        assert_eq!(docs.iter().filter(|d| d.delivered().and_then(Delivered::brief).is_some()).count(), 11);
    }

    #[test]
    fn two_copies_fed_the_same_deliveries_agree_whatever_else_the_agent_keeps() {
        // The gateway's copy sees deliveries only; the agent's also what it read and recalled.
        let (mut gateway, mut agent) = (Inbox::new(3), Inbox::new(3));
        for i in 0..50 {
            let item = if i % 7 == 0 { brief(i) } else { message(i) };
            let a = gateway.push(item.clone());
            if i % 5 == 0 {
                agent.keep(read());
            }
            let b = agent.push(item);
            assert_eq!(a, b);
            if let (Some(a), Some(b)) = (a, b) {
                assert!(Arc::ptr_eq(&a, &b), "both copies keep one description of a spilled message");
            }
        }
        let deliveries = |inbox: &Inbox| -> Vec<Received> {
            inbox.docs().into_iter().filter(|d| !matches!(d, Received::Dereferenced(_))).collect()
        };
        assert_eq!(deliveries(&gateway), deliveries(&agent));
        assert_eq!(gateway.n_spilled(), 50 - 8 - 3);
    }

    #[test]
    fn a_cap_of_zero_still_keeps_the_newest_message() {
        let mut inbox = Inbox::new(0);
        assert_eq!(inbox.push(message(0)), None);
        assert!(inbox.push(message(1)).is_some());
        assert_eq!(id(&inbox.docs()[1]), Some("m-1"));
    }

    /// Tools and tests read these shapes, byte for byte as they were before the inbox was typed.
    #[test]
    fn every_item_writes_the_json_shape_it_always_had() {
        let spill = message(1).spill.expect("a message's description");
        let engram = json!({"id": "eg_1", "kind": "fact", "claim": "c", "pointers": [{"type": "repo", "ref": "a.rs"}],
            "confidence": 0.9, "ttl": "P7D", "scope": "run",
            "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "w", "source": "agent"}});
        let outline =
            FileOutline { path: "a.rs".into(), lines: 3, bytes: 40, tokens: 12, symbols: vec!["main".into()], more: 0 };
        let hit = |content: Option<&str>| SearchHit {
            pointer: "repo:a.rs#L1-L2".into(),
            preview: "fn main()".into(),
            tokens: 9,
            content: content.map(str::to_owned),
        };
        let cases = [
            (read(), r#"{"dereferenced":{"pointer":"repo:a.rs","content":"x"}}"#.to_owned()),
            (Received::Spilled(spill), r#"{"spilled":{"pointer":"sam:msg:m-1","from":"w","type":"task_result","tokens":7}}"#.to_owned()),
            (
                Received::Recalled(Arc::new(serde_json::from_value(engram.clone()).expect("an engram"))),
                format!(r#"{{"recalled":{}}}"#, serde_json::to_string(&serde_json::from_value::<Engram>(engram).expect("an engram")).expect("json")),
            ),
            (
                Received::RecalledMore(Arc::new(RecalledMore { pointers: vec!["sam:engram:eg_2".into()], why: "w".into() })),
                r#"{"recalled_more":{"pointers":["sam:engram:eg_2"],"why":"w"}}"#.to_owned(),
            ),
            (
                Received::Searched(Arc::new(Searched { query: "q".into(), hits: vec![hit(None), hit(Some("fn main() {}"))] })),
                r#"{"searched":{"query":"q","hits":[{"pointer":"repo:a.rs#L1-L2","preview":"fn main()","tokens":9},{"pointer":"repo:a.rs#L1-L2","preview":"fn main()","tokens":9,"content":"fn main() {}"}]}}"#.to_owned(),
            ),
            (
                Received::Listed(Arc::new(Listed { pattern: "*.rs".into(), files: vec![outline] })),
                r#"{"listed":{"pattern":"*.rs","files":[{"path":"a.rs","lines":3,"tokens":12,"symbols":["main"],"more":0}]}}"#.to_owned(),
            ),
        ];
        for (item, shape) in cases {
            let shape: Value = serde_json::from_str(&shape).expect("a shape");
            assert_eq!(item.to_json(), shape);
            assert_eq!(serde_json::to_string(&item).expect("json"), shape.to_string(), "Serialize writes to_json");
        }
        let Received::Delivered(doc) = message(1).doc else { panic!("a delivery") };
        let wire = Received::Verbatim(Arc::new(Verbatim { wire: "text".into(), doc: doc.clone() }));
        assert_eq!(wire.to_json(), json!({"verbatim": "text", "doc": doc.to_json()}));
        assert_eq!(Received::Delivered(doc.clone()).to_json(), doc.to_json());
    }
}
