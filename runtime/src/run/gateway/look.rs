//! An agent's `search` and `list`, answered by its gateway from the run's workspace index, and its `query` of the
//! run's memory, metered like any inline message: nothing an agent looks up reaches it around its gateway.
//!
//! A recall answer in LESS mode is the engrams recalled, best first, counted with the run's tokenizer; over the
//! role's `max_inline_tokens` it is cut to the best engrams that fit, and the rest is named by pointers
//! (`sam:engram:<id>`, dereferenced like any source, against the deref budget) in one [`Received::RecalledMore`]; when
//! not even the note fits, the query is refused with `LESS_BUDGET_EXCEEDED`. The fair baseline gets the same engrams
//! uncut, charged for reading every prior report of the run, as an agent without a shared memory has to.
//!
//! In LESS mode the answer is one line per hit, `pointer — preview (N tok)`, or per file, `path (L lines, T
//! tokens): symbols`; hits outside the agent's reach are left out, and an answer over the role's
//! `max_inline_tokens` is refused with `LESS_BUDGET_EXCEEDED`, saying how many hits would fit. In the fair baseline
//! the same engine at the same `k` answers, and each hit's content is pasted under its pointer, as an orchestrator
//! without LESS pastes what it retrieved; nothing is refused there (it has no budgets).
//!
//! A `describe` answers what pointers hold, one line each (`- pointer — what it holds`, [`crate::resolver::about`]):
//! the catalogue a model chooses what to read or to pack from. Under LESS a pointer outside the agent's reach is
//! listed bare, and an answer over the role's `max_inline_tokens` is cut: the last descriptions are dropped (their
//! pointers stay, bare, and are named in the answer's `cut`) until it fits; when not even the bare pointers fit, it is
//! refused with `LESS_BUDGET_EXCEEDED`. The baseline describes every pointer, counted, never cut.

use serde_json::Value;

use std::sync::Arc;

use super::GatewayState;
use crate::enforce::{check_list, check_search, fit_descriptions, fit_recall};
use crate::memory::{QueryOptions, Stages};
use crate::run::inbox::{Described, Description, Listed, RecalledMore, Received, SearchHit, Searched};
use crate::run::ledger::{Event, TokenLedgerMsg};
use crate::run::resolver_actor::ResolverMsg;
use crate::run::services::MemoryFailure;
use crate::run::wire::{DescribeAction, ListAction, SearchAction};
use crate::workspace::{Hit, MAX_K};
use less_contract::{Engram, ErrorCode, Pointer, TokenCounter, Violation, WireMode};

/// Most pointers one `describe` may ask about.
pub const MAX_DESCRIBE: usize = 128;

/// What a search, a listing, a description or a recall brought the agent.
#[derive(Debug, Clone)]
pub struct Looked {
    /// The inbox items: one [`Received::Searched`] or [`Received::Listed`], or one [`Received::Recalled`] per engram
    /// (then a [`Received::RecalledMore`] when the answer was cut).
    pub items: Vec<Received>,
    /// The inline tokens the answer cost (as its ledger event says).
    pub tokens: u32,
}

impl GatewayState {
    /// Searches the workspace index for the agent (see the module docs).
    pub(super) async fn search(&mut self, action: SearchAction) -> Result<Looked, Violation> {
        let less = self.ctx.mode == WireMode::Less;
        let refused = |this: &Self, violation: Violation| {
            this.ctx.record(Event::Search {
                agent: this.agent_id.clone(),
                query: action.query.clone(),
                k: action.k,
                returned: Vec::new(),
                tokens: 0,
                stages: Vec::new(),
                code: Some(violation.code),
                message: violation.message.clone(),
            });
            Err(violation)
        };
        if !(1..=MAX_K).contains(&action.k) {
            let why = format!("k is {}; ask for 1 to {MAX_K} hits", action.k);
            return refused(self, Violation::new(ErrorCode::ArgumentInvalid, "/k", why));
        }
        let reach = self.reach.clone();
        // Outside its reach an agent learns nothing, not even that a file exists (in LESS mode; the baseline has no
        // reach).
        let keep: Box<dyn Fn(&Hit) -> bool + Send> = if less {
            Box::new(move |hit: &Hit| Pointer::parse(&hit.pointer).is_ok_and(|p| reach.covers(&p)))
        } else {
            Box::new(|_: &Hit| true)
        };
        let found = match self.ctx.workspace.search(action.query.clone(), action.k, Stages::HashRerank, keep).await {
            Ok(found) => found,
            Err(violation) => return refused(self, violation),
        };
        if let Some(why) = &found.degraded {
            tracing::warn!(target: "less.search", "{}: {why}", self.agent_id);
        }
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let (item, text) = if less {
            let lines: Vec<String> = found.hits.iter().map(Hit::line).collect();
            let hits: Vec<SearchHit> = found
                .hits
                .iter()
                .map(|h| SearchHit {
                    pointer: h.pointer.clone(),
                    preview: h.preview.clone(),
                    tokens: h.tokens,
                    content: None,
                })
                .collect();
            (Searched { query: action.query.clone(), hits }, lines.join("\n"))
        } else {
            let pointers: Vec<String> = found.hits.iter().map(|h| h.pointer.clone()).collect();
            let contents = match self.ctx.workspace.read(pointers).await {
                Ok(contents) => contents,
                Err(violation) => return refused(self, violation),
            };
            let mut text = String::new();
            let mut hits = Vec::with_capacity(found.hits.len());
            for (hit, content) in found.hits.iter().zip(contents) {
                text.push_str(&format!("{}\n{}\n\n", hit.pointer, content.trim_end()));
                hits.push(SearchHit {
                    pointer: hit.pointer.clone(),
                    preview: hit.preview.clone(),
                    tokens: hit.tokens,
                    content: Some(content),
                });
            }
            (Searched { query: action.query.clone(), hits }, text)
        };
        let tokens = counter.count(&text);
        if less {
            let fit = || crate::workspace::fitting(&found.hits, counter, self.budget.max_inline_tokens);
            if let Err(violation) = check_search(found.hits.len(), tokens, fit, &self.budget) {
                return refused(self, violation);
            }
        }
        self.ctx.record(Event::Search {
            agent: self.agent_id.clone(),
            query: action.query.clone(),
            k: action.k,
            returned: found.hits.iter().map(|h| h.pointer.clone()).collect(),
            tokens,
            stages: found.stages.clone(),
            code: None,
            message: String::new(),
        });
        Ok(Looked { items: vec![Received::Searched(Arc::new(item))], tokens })
    }

    /// Lists workspace files for the agent (see the module docs).
    pub(super) async fn list(&mut self, action: ListAction) -> Result<Looked, Violation> {
        let less = self.ctx.mode == WireMode::Less;
        let refused = |this: &Self, violation: Violation| {
            this.ctx.record(Event::List {
                agent: this.agent_id.clone(),
                pattern: action.pattern.clone(),
                files: 0,
                tokens: 0,
                code: Some(violation.code),
                message: violation.message.clone(),
            });
            Err(violation)
        };
        let mut files = match self.ctx.workspace.list(action.pattern.clone()).await {
            Ok(files) => files,
            Err(violation) => return refused(self, violation),
        };
        if less {
            let reach = self.reach.clone();
            files.retain(|f| Pointer::parse(&format!("repo:{}", f.path)).is_ok_and(|p| reach.covers(&p)));
        }
        let text: String = files.iter().map(|f| f.line() + "\n").collect();
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let tokens = counter.count(&text);
        if less && let Err(violation) = check_list(files.len(), tokens, &self.budget) {
            return refused(self, violation);
        }
        self.ctx.record(Event::List {
            agent: self.agent_id.clone(),
            pattern: action.pattern.clone(),
            files: files.len(),
            tokens,
            code: None,
            message: String::new(),
        });
        Ok(Looked { items: vec![Received::Listed(Arc::new(Listed { pattern: action.pattern, files }))], tokens })
    }

    /// Describes pointers for the agent (see the module docs).
    pub(super) async fn describe(&mut self, action: DescribeAction) -> Result<Looked, Violation> {
        let less = self.ctx.mode == WireMode::Less;
        let record = |this: &Self, described: usize, tokens: u32, cut: Vec<String>, refusal: Option<&Violation>| {
            this.ctx.record(Event::Describe {
                agent: this.agent_id.clone(),
                pointers: action.pointers.clone(),
                described,
                tokens,
                cut,
                code: refusal.map(|v| v.code),
                message: refusal.map(|v| v.message.clone()).unwrap_or_default(),
            });
        };
        if action.pointers.is_empty() || action.pointers.len() > MAX_DESCRIBE {
            let why = format!("{} pointers; ask about 1 to {MAX_DESCRIBE}", action.pointers.len());
            let violation = Violation::new(ErrorCode::ArgumentInvalid, "/pointers", why);
            record(self, 0, 0, Vec::new(), Some(&violation));
            return Err(violation);
        }
        let mut descriptions = Vec::with_capacity(action.pointers.len());
        for text in &action.pointers {
            let about = match Pointer::parse(text) {
                // Outside its reach an agent learns nothing of what a pointer holds (in LESS mode; the baseline has
                // no reach).
                Ok(pointer) if !less || self.reach.covers(&pointer) => self.about(&pointer).await,
                _ => None,
            };
            descriptions.push(Description { pointer: text.clone(), about });
        }
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let count = |descriptions: &[Description]| {
            counter.count(&descriptions.iter().map(Description::line).collect::<String>())
        };
        let mut tokens = count(&descriptions);
        let mut cut = Vec::new();
        if less && tokens > self.budget.max_inline_tokens {
            // The last descriptions go first; their pointers stay, bare.
            let described: Vec<bool> = descriptions.iter().map(|d| d.about.is_some()).collect();
            let fit = fit_descriptions(&described, &self.budget, |kept| {
                let lines = descriptions.iter().zip(kept).map(|(d, &keep)| {
                    if keep { d.line() } else { Description { pointer: d.pointer.clone(), about: None }.line() }
                });
                counter.count(&lines.collect::<String>())
            });
            let fit = match fit {
                Ok(fit) => fit,
                Err(violation) => {
                    record(self, 0, 0, Vec::new(), Some(&violation));
                    return Err(violation);
                }
            };
            for &idx in &fit.cut {
                descriptions[idx].about = None;
                cut.push(descriptions[idx].pointer.clone());
            }
            tokens = fit.tokens;
        }
        let described = descriptions.iter().filter(|d| d.about.is_some()).count();
        record(self, described, tokens, cut.clone(), None);
        let answer = Described { pointers: descriptions, cut };
        Ok(Looked { items: vec![Received::Described(Arc::new(answer))], tokens })
    }

    /// One line on what `pointer` holds, read through the run's resolver without pinning (what
    /// [`crate::Resolver::about`] says).
    async fn about(&self, pointer: &Pointer) -> Option<String> {
        match self.ctx.resolver.ask(|reply| ResolverMsg::ReadUnpinned(pointer.clone(), reply)).await {
            Ok(Ok(content)) => crate::resolver::about(pointer, &content),
            _ => None,
        }
    }

    /// Recalls engrams from the run's memory for the agent (see the module docs).
    pub(super) async fn recall(&mut self, text: String, options: QueryOptions) -> Result<Looked, MemoryFailure> {
        let counter = TokenCounter::shared(self.ctx.scenario.tokenizer);
        let record = |this: &Self, returned: Vec<String>, tokens: u32, stages: Vec<String>, more: Vec<String>| {
            this.ctx.record(Event::Query {
                agent: this.agent_id.clone(),
                text: text.clone(),
                returned,
                tokens,
                stages,
                more,
                code: None,
                message: String::new(),
            });
        };
        let refused = |this: &Self, failure: MemoryFailure| {
            this.ctx.record(Event::Query {
                agent: this.agent_id.clone(),
                text: text.clone(),
                returned: Vec::new(),
                // A refused query reads nothing.
                tokens: 0,
                stages: Vec::new(),
                more: Vec::new(),
                code: Some(failure.code),
                message: failure.message.clone(),
            });
            Err(failure)
        };
        let recall = match self.ctx.recall(&self.agent_id, text.clone(), options).await {
            Ok(recall) => recall,
            Err(failure) => return refused(self, failure),
        };
        if let Some(why) = &recall.degraded {
            tracing::warn!(target: "less.memory.query", "{}: {why}", self.agent_id);
        }
        let id = |engram: &Value| engram.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut engrams = recall.engrams;
        let mut more = Vec::new();
        let tokens = if self.ctx.mode == WireMode::Less {
            let answer_tokens = |kept: &[Value], rest: &[String]| {
                let mut text = Value::Array(kept.to_vec()).to_string();
                if !rest.is_empty() {
                    text.push_str(&more_item(rest).to_string());
                }
                counter.count(&text)
            };
            let names = |from: usize| -> Vec<String> {
                engrams[from..].iter().map(|e| format!("sam:engram:{}", id(e))).collect()
            };
            let (n, tokens) = match fit_recall(engrams.len(), &self.budget, |k| answer_tokens(&engrams[..k], &names(k)))
            {
                Ok(fit) => fit,
                Err(violation) => return refused(self, MemoryFailure::refused(violation)),
            };
            more = names(n);
            engrams.truncate(n);
            tokens
        } else {
            match self.ctx.ledger.ask(TokenLedgerMsg::History).await {
                Ok(history) => counter.count(&history.join("\n")),
                // Without the history the baseline's cost is unknown: the query fails rather than count it as free.
                Err(err) => {
                    let failure = MemoryFailure::unavailable("ledger", &err);
                    return refused(self, failure);
                }
            }
        };
        // The memory wrote each engram's JSON from its typed engram: it reads back.
        let typed: Result<Vec<Engram>, _> = engrams.iter().map(|e| serde_json::from_value(e.clone())).collect();
        let typed = match typed {
            Ok(typed) => typed,
            Err(err) => return refused(self, MemoryFailure::unavailable("recall answer", &err)),
        };
        record(self, engrams.iter().map(id).collect(), tokens, recall.stages, more.clone());
        let mut items: Vec<Received> = typed.into_iter().map(|engram| Received::Recalled(Arc::new(engram))).collect();
        if !more.is_empty() {
            items.push(Received::RecalledMore(Arc::new(RecalledMore { pointers: more, why: MORE_WHY.to_owned() })));
        }
        Ok(Looked { items, tokens })
    }
}

/// Why a recall answer's note names engrams by pointer.
const MORE_WHY: &str = "over this role's max_inline_tokens: dereference them to read them";

/// The note standing for the engrams a recall answer had no room for, as the answer's tokens count it.
fn more_item(pointers: &[String]) -> Value {
    Received::RecalledMore(Arc::new(RecalledMore { pointers: pointers.to_vec(), why: MORE_WHY.to_owned() })).to_json()
}
