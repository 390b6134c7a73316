//! On-demand expansion over the DAG: `expand` (one level down), `expand_query` (a bounded, cited answer to a
//! question) and `impact` (what depends on a source).
//!
//! `expand_query` asks the message index (the memory's two-stage recall over every archived message) which messages
//! bear on the question, lets their relevance flow up to the session, arc and epoch nodes that hold them, then walks
//! down from the most relevant top node, through its most relevant children, to the messages: each cited with its
//! path. The answer is the messages' text, best first, cut to the token budget.
//!
//! `impact` walks dependencies from a pointer: engrams citing an overlapping source, summaries citing it or the
//! message it names, then what depends on those (engrams citing an engram, summaries mentioning it, the node above
//! a node), three layers deep: 1 will break, 2 likely affected, 3 may need testing. Items below the confidence
//! threshold are left out and not followed.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::context::redact;
use crate::dag::archive::{Archive, Node, RawMessage};
use crate::dag::summarize::{day, truncate_tokens};
use crate::dag::{Dag, DagError, index_project};
use crate::memory::index::{RecallFilter, vis_key};
use crate::memory::store::{Store, Stored, Tier};
use crate::memory::{RecallRequest, Stages};
use less_contract::Scope;
use less_contract::{Encoding, TokenCounter};
use less_contract::{Pointer, PointerType};

/// One level below a node (or a message itself).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Child {
    /// A summary node.
    Node(Node),
    /// A raw message.
    Message(RawMessage),
}

/// What `expand` returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expansion {
    /// The node or message expanded.
    pub target: Child,
    /// Its parent node, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// One level down: child nodes (arc, epoch), source messages (session), nothing (a message).
    pub children: Vec<Child>,
}

/// A message cited by an answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Citation {
    /// The message id (`sam:msg:<id>`).
    pub message: String,
    /// Its session.
    pub session: String,
    /// Its project.
    pub project: String,
    /// When.
    pub at: i64,
    /// Nodes from the top down to its session node (empty: its session part is not summarized yet, or was
    /// skipped).
    pub path: Vec<String>,
    /// The recall score.
    pub score: f32,
    /// Whether its text was cut to fit.
    pub truncated: bool,
}

/// What `expand_query` returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// The question.
    pub question: String,
    /// The answer: cited message text, best first.
    pub text: String,
    /// Tokens of `text`.
    pub tokens: u32,
    /// The budget.
    pub max_tokens: u32,
    /// Cited messages, in the order of the text.
    pub citations: Vec<Citation>,
    /// Nodes the walk went through, top first.
    pub nodes: Vec<String>,
    /// Recall stages that ran.
    pub stages: String,
    /// Why the rerank did not run, if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
}

/// One dependent found by `impact`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImpactItem {
    /// 1, 2 or 3.
    pub layer: u8,
    /// `will_break`, `likely_affected`, `may_need_testing`.
    pub label: &'static str,
    /// `engram`, `message` (a raw archived message) or the node kind.
    pub kind: String,
    /// The engram, message or node id.
    pub id: String,
    /// Its project.
    pub project: String,
    /// Its confidence.
    pub confidence: f64,
    /// What it depends on (the pointer, an engram id, a node id).
    pub via: String,
    /// The claim, the summary's first line, or the start of the message.
    pub text: String,
}

/// What `impact` returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Impact {
    /// The source asked about.
    pub pointer: String,
    /// Items below this confidence were left out.
    pub min_confidence: f64,
    /// Dependents, layer by layer.
    pub items: Vec<ImpactItem>,
}

/// Labels of impact layers 1, 2, 3.
pub const IMPACT_LABELS: [&str; 3] = ["will_break", "likely_affected", "may_need_testing"];

/// Fewest tokens of a message worth citing.
const MIN_BODY_TOKENS: u32 = 8;

/// Candidates recalled per question.
const RECALL_K: usize = 24;

impl Dag {
    /// One level below `id`: a node's children, a session node's messages; a message id gives the message.
    pub fn expand(&self, id: &str) -> Result<Expansion, DagError> {
        let archive = self.archive();
        if let Some(node) = archive.node(id)? {
            let children = if node.kind == crate::dag::NodeKind::Session {
                archive.node_messages(id)?.into_iter().map(Child::Message).collect()
            } else {
                archive.children(id)?.into_iter().map(Child::Node).collect()
            };
            let parent = archive.parent(id)?;
            return Ok(Expansion { target: Child::Node(node), parent, children });
        }
        let id = id.strip_prefix("sam:msg:").unwrap_or(id);
        if let Some(message) = archive.message(id)? {
            let parent = archive.node_of_message(id)?;
            return Ok(Expansion { target: Child::Message(message), parent, children: Vec::new() });
        }
        Err(DagError::NotFound(id.to_owned()))
    }

    /// The nodes from the top down to the session node holding message `id` (empty when none holds it).
    pub fn path_of_message(&self, id: &str) -> Result<Vec<String>, DagError> {
        let archive = self.archive();
        let mut path = Vec::new();
        let mut at = archive.node_of_message(id)?;
        while let Some(node) = at {
            at = archive.parent(&node)?;
            path.push(node);
        }
        path.reverse();
        Ok(path)
    }

    /// A bounded answer to `question` from the archived messages (of `project` only, when given), citing them.
    pub fn expand_query(&mut self, question: &str, max_tokens: u32, project: Option<&str>) -> Result<Answer, DagError> {
        let projects = match project {
            Some(p) => vec![p.to_owned()],
            None => self.archive().projects()?,
        };
        let filter = RecallFilter {
            visible: projects.iter().map(|p| vis_key(Scope::Project, &index_project(p), "")).collect(),
            ..RecallFilter::default()
        };
        let recall =
            self.index_mut().recall(&RecallRequest::new(question, filter, RECALL_K).stages(Stages::default()))?;
        // Best score per message.
        let mut scores: Vec<(String, f32)> = Vec::new();
        let mut seen = HashSet::new();
        for hit in &recall.hits {
            for pointer in &hit.stored.engram.pointers {
                if let Some(id) = pointer.location().strip_prefix("msg:")
                    && pointer.ty() == PointerType::Sam
                    && seen.insert(id.to_owned())
                {
                    scores.push((id.to_owned(), hit.score));
                }
            }
        }
        let ids: Vec<String> = scores.iter().map(|(id, _)| id.clone()).collect();
        let messages: HashMap<String, RawMessage> =
            self.archive().messages_by_id(&ids)?.into_iter().map(|m| (m.id.clone(), m)).collect();
        // Relevance flows up: a node's relevance is the best score below it.
        let mut paths: HashMap<String, Vec<String>> = HashMap::new();
        let mut relevance: HashMap<String, f32> = HashMap::new();
        for (id, score) in &scores {
            let path = self.path_of_message(id)?;
            for node in &path {
                let r = relevance.entry(node.clone()).or_insert(f32::MIN);
                *r = r.max(*score);
            }
            paths.insert(id.clone(), path);
        }
        // The walk: top nodes by relevance, then children by relevance, down to the messages. Messages of a branch
        // come together, best branch first; a message no node holds comes by its own score.
        let order = walk_order(&scores, &paths, &relevance);
        let counter = TokenCounter::shared(Encoding::default());
        let mut text = String::new();
        let mut citations = Vec::new();
        let mut nodes: Vec<String> = Vec::new();
        for (id, score) in order {
            let Some(message) = messages.get(&id) else { continue };
            let path = paths.get(&id).cloned().unwrap_or_default();
            let speaker = message.name.as_deref().unwrap_or(&message.role);
            let route = if path.is_empty() { "not summarized".to_owned() } else { path.join(" > ") };
            let head = format!(
                "[sam:msg:{}] {} {} · session {} · {}\n",
                message.id,
                day(message.at),
                speaker,
                message.session,
                route
            );
            let used = counter.count(&text);
            // The full head names the message's day, speaker, session and path; under a tight budget the message
            // id alone cites it (the path is in the citations).
            let mut head = head;
            let mut room = max_tokens.saturating_sub(used + counter.count(&head) + 1);
            if room < MIN_BODY_TOKENS {
                head = format!("[sam:msg:{}]\n", message.id);
                room = max_tokens.saturating_sub(used + counter.count(&head) + 1);
            }
            if room < MIN_BODY_TOKENS {
                break;
            }
            // An answer is a derived view an agent reads: secrets and addresses in it are redacted (the archived
            // message stays verbatim).
            let content = redact(message.content.trim()).text;
            let body = truncate_tokens(&content, room, counter);
            let truncated = body.len() < content.len();
            let block = format!("{head}{body}\n");
            if counter.count(&format!("{text}{block}")) > max_tokens {
                break;
            }
            text.push_str(&block);
            for node in &path {
                if !nodes.contains(node) {
                    nodes.push(node.clone());
                }
            }
            citations.push(Citation {
                message: message.id.clone(),
                session: message.session.clone(),
                project: message.project.clone(),
                at: message.at,
                path,
                score,
                truncated,
            });
        }
        let tokens = counter.count(&text);
        Ok(Answer {
            question: question.to_owned(),
            text,
            tokens,
            max_tokens,
            citations,
            nodes,
            stages: recall.stages.join("+"),
            degraded: recall.degraded.clone(),
        })
    }

    /// What depends on `pointer`, in three layers, leaving out items below `min_confidence`.
    pub fn impact(&self, pointer: &Pointer, min_confidence: f64) -> Result<Impact, DagError> {
        let walk = ImpactWalk {
            engrams: Store::open(&self.dir)?.all(Tier::Hot)?,
            nodes: self.archive().all_nodes()?,
            archive: self.archive(),
        };
        let mut items: Vec<ImpactItem> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut frontier = vec![Dep::Pointer(pointer.clone())];
        for layer in 1..=3u8 {
            let mut next = Vec::new();
            for dep in &frontier {
                for (found, dep) in walk.dependents(dep)? {
                    if found.confidence + 1e-9 >= min_confidence && seen.insert(found.id.clone()) {
                        items.push(ImpactItem { layer, label: IMPACT_LABELS[usize::from(layer - 1)], ..found });
                        next.push(dep);
                    }
                }
            }
            frontier = next;
        }
        Ok(Impact { pointer: pointer.to_string(), min_confidence, items })
    }
}

/// Something others may depend on.
enum Dep {
    Pointer(Pointer),
    Engram(String),
    Node(String),
}

/// What `impact` walks over: the hot engrams of the memory store and the summary nodes.
struct ImpactWalk<'a> {
    engrams: Vec<Stored>,
    nodes: Vec<Node>,
    archive: &'a Archive,
}

impl ImpactWalk<'_> {
    /// The direct dependents of `dep` (layer fields left for the caller).
    fn dependents(&self, dep: &Dep) -> Result<Vec<(ImpactItem, Dep)>, DagError> {
        let mut found = Vec::new();
        match dep {
            Dep::Pointer(p) => {
                let via = p.to_string();
                for s in &self.engrams {
                    if s.engram.pointers.iter().any(|q| overlaps(p, q)) {
                        found.push(engram_item(s, &via));
                    }
                }
                for n in &self.nodes {
                    if cites(&n.content, p) {
                        found.push(node_item(n, &via));
                    }
                }
                // Raw messages that cite it (a review that quoted the span, say): found whether or not a summary kept
                // the citation.
                let ids = self.archive.messages_mentioning(&format!("{}:{}", p.ty(), p.location()))?;
                for m in self.archive.messages_by_id(&ids)? {
                    if cites(&m.content, p) {
                        found.push(message_item(&m, &via));
                    }
                }
                if p.ty() == PointerType::Sam {
                    if let Some(id) = p.location().strip_prefix("msg:")
                        && let Some(node) = self.archive.node_of_message(id)?
                        && let Some(n) = self.nodes.iter().find(|n| n.id == node)
                    {
                        found.push(node_item(n, &via));
                    }
                    // `sam:<ns>:<engram id>` names an engram: what depends on it depends on the source.
                    if let Some((_, id)) = p.location().split_once(':')
                        && self.engrams.iter().any(|s| s.engram.id == id)
                    {
                        found.extend(self.dependents(&Dep::Engram(id.to_owned()))?);
                    }
                }
            }
            Dep::Engram(id) => {
                for s in &self.engrams {
                    let cites_it = s.engram.pointers.iter().any(|q| {
                        q.ty() == PointerType::Sam && q.location().split_once(':').is_some_and(|(_, key)| key == id)
                    });
                    if cites_it && s.engram.id != *id {
                        found.push(engram_item(s, id));
                    }
                }
                for n in &self.nodes {
                    if n.content.contains(id.as_str()) {
                        found.push(node_item(n, id));
                    }
                }
                for message in self.archive.messages_mentioning(id)? {
                    if let Some(node) = self.archive.node_of_message(&message)?
                        && let Some(n) = self.nodes.iter().find(|n| n.id == node)
                    {
                        found.push(node_item(n, id));
                    }
                }
            }
            Dep::Node(id) => {
                if let Some(parent) = self.archive.parent(id)?
                    && let Some(n) = self.nodes.iter().find(|n| n.id == parent)
                {
                    found.push(node_item(n, id));
                }
            }
        }
        Ok(found)
    }
}

fn engram_item(s: &Stored, via: &str) -> (ImpactItem, Dep) {
    let e = &s.engram;
    let item = ImpactItem {
        layer: 0,
        label: "",
        kind: "engram".to_owned(),
        id: e.id.clone(),
        project: s.project.clone(),
        confidence: e.confidence,
        via: via.to_owned(),
        text: e.claim.clone(),
    };
    (item, Dep::Engram(e.id.clone()))
}

fn message_item(m: &RawMessage, via: &str) -> (ImpactItem, Dep) {
    let speaker = m.name.as_deref().unwrap_or(&m.role);
    let text: String = m.content.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(200).collect();
    let item = ImpactItem {
        layer: 0,
        label: "",
        kind: "message".to_owned(),
        id: m.id.clone(),
        project: m.project.clone(),
        // Verbatim: the message says what it says.
        confidence: 1.0,
        via: via.to_owned(),
        text: format!("{speaker} in session {}: {text}", m.session),
    };
    // What depends on the message: the session node that holds it, at the next layer.
    let dep = Pointer::new(PointerType::Sam, &format!("msg:{}", m.id), None)
        .map_or_else(|_| Dep::Engram(m.id.clone()), Dep::Pointer);
    (item, dep)
}

fn node_item(n: &Node, via: &str) -> (ImpactItem, Dep) {
    let item = ImpactItem {
        layer: 0,
        label: "",
        kind: n.kind.as_str().to_owned(),
        id: n.id.clone(),
        project: n.project.clone(),
        confidence: n.confidence,
        via: via.to_owned(),
        text: n.content.lines().next().unwrap_or_default().to_owned(),
    };
    (item, Dep::Node(n.id.clone()))
}

/// Whether two pointers name overlapping sources: same type and location, and intersecting line ranges when both
/// have one.
pub fn overlaps(a: &Pointer, b: &Pointer) -> bool {
    a.ty() == b.ty()
        && a.location() == b.location()
        && match (a.line_range(), b.line_range()) {
            (Some((a1, a2)), Some((b1, b2))) => a1 <= b2 && b1 <= a2,
            _ => true,
        }
}

/// Whether `content` cites a pointer overlapping `p`: a pointer in its text form, in prose (quoted, in backticks
/// or brackets, ending a sentence) or in a summary's citations.
fn cites(content: &str, p: &Pointer) -> bool {
    let needle = format!("{}:{}", p.ty(), p.location());
    if !content.contains(&needle) {
        return false;
    }
    content
        .split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '(' | ')' | '<' | '>' | ',' | '`' | '"' | '\''))
        .map(|t| t.trim_end_matches(['.', ';', ':', '!', '?']))
        .filter(|t| t.contains(&needle))
        .filter_map(|t| Pointer::parse(t).ok())
        .any(|q| overlaps(p, &q))
}

/// The order the walk reaches the recalled messages: grouped under their top node (most relevant first), then
/// under each child (most relevant first), by score within a session.
fn walk_order(
    scores: &[(String, f32)],
    paths: &HashMap<String, Vec<String>>,
    relevance: &HashMap<String, f32>,
) -> Vec<(String, f32)> {
    // Per message: the path's (negated relevance, node id) from the top, its negated score, its id.
    type Key = (Vec<(f32, String)>, f32, String);
    let mut order: Vec<Key> = scores
        .iter()
        .map(|(id, score)| {
            let path = paths.get(id).map(Vec::as_slice).unwrap_or_default();
            let key: Vec<(f32, String)> =
                path.iter().map(|n| (-relevance.get(n).copied().unwrap_or(f32::MIN), n.clone())).collect();
            (key, -*score, id.clone())
        })
        .collect();
    // A message no node holds sorts as its own branch, with its score as the branch's relevance.
    order.sort_by(|a, b| {
        let ka = a.0.first().map_or(a.1, |k| k.0);
        let kb = b.0.first().map_or(b.1, |k| k.0);
        ka.total_cmp(&kb)
            .then_with(|| {
                for (x, y) in a.0.iter().zip(&b.0) {
                    let c = x.0.total_cmp(&y.0).then_with(|| x.1.cmp(&y.1));
                    if c.is_ne() {
                        return c;
                    }
                }
                a.0.len().cmp(&b.0.len())
            })
            .then_with(|| a.1.total_cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2))
    });
    order.into_iter().map(|(_, s, id)| (id, -s)).collect()
}
