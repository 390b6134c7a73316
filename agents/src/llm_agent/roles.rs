//! The model's part in every role besides writing reports: a parent writes its children's briefs and answers their
//! deref requests; a worker chooses what to read and what to recall from the run's memory. Each question is one
//! completion constrained by a schema that allows only what the agent may use (its children, the pointers it holds,
//! the pointers it has not read yet);
//! what the runtime can decide from numbers, it decides (a read over budget becomes a request to the parent, a
//! granted request is read with its grant), so the model only makes the choices a number cannot.

use std::collections::BTreeMap;

use less_runtime::run::{
    Action, AskGrantAction, BriefAction, DecideInput, Delivered, DerefAction, Done, Outcome, Received, SearchAction,
    Seat, TurnInput,
};
use less_runtime::{ErrorCode, GrantSpec, Step};
use serde_json::{Value, json};

use super::output::{ChildBrief, Field, GrantDecision, Lenient, ReadChoice, texts};
use super::{LlmAgent, catalogue_line, describe, describe_first, known_pointers};
use crate::provider::{ChatMessage, CompletionRequest, LlmError, OutputSchema};

/// Lines of "what matters now" a model writes per child (task lines are added by the runtime).
const MAX_NOW_LINES: usize = 2;
/// Characters of one such line.
const MAX_NOW_CHARS: usize = 160;
/// Pointers a model may pack for one child: as many as a pointer pack holds (`shared_brief_micro.v0.1.json`), so
/// that a lead's child that is itself a parent can be handed what all of its children need.
const MAX_PACK: usize = 12;
/// Pointers a model may choose for one graded question (a contradiction needs both sides, a cross-file rule both
/// files; a third for the spec that states it).
const MAX_PER_QUESTION: usize = 3;
/// Pointers a worker may choose to read at once; its budget, not this cap, says
/// how many it may read without asking.
const MAX_READ: usize = 6;
/// Characters of a worker's memory query.
const MAX_RECALL_CHARS: usize = 120;
/// Engrams a worker's memory query recalls.
const RECALL_K: usize = 3;
/// Lines of what matters now a brief may carry (`shared_brief_micro.v0.1.json`).
const MAX_BRIEF_LINES: usize = 10;
/// Hits a worker's search asks for: a few pointers with previews, well inside a message budget.
pub(crate) const SEARCH_K: usize = 5;
/// Characters of a search query.
const MAX_QUERY_CHARS: usize = 300;

impl LlmAgent {
    /// Asks the model for one JSON answer under `schema`, with one corrective retry of unusable output.
    pub(super) async fn ask_json(
        &mut self,
        system: String,
        user: String,
        name: &str,
        schema: Value,
    ) -> Result<Value, LlmError> {
        let mut request = CompletionRequest {
            system,
            messages: vec![ChatMessage::user(user)],
            temperature: self.sampling.temperature,
            max_tokens: self.sampling.max_tokens,
            schema: Some(OutputSchema { name: name.to_owned(), schema }),
        };
        let mut tries = 0;
        loop {
            match self.ask(&request, &super::Citable::default(), &[], super::QuoteCheck::Any).await {
                Ok(done) => return Ok(done.value),
                Err(err) if tries < super::OUTPUT_RETRIES && !err.is_transient() => {
                    tries += 1;
                    self.spent.unusable.push(super::unusable_reason(&err));
                    request.messages.push(ChatMessage::user(format!(
                        "That answer was unusable ({}: {err}). Answer again with one JSON object that follows the schema.",
                        err.code()
                    )));
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// A worker with questions and nothing to read finds its own evidence: its first action is a search of the
    /// workspace with its questions' words, once per turn, and
    /// not again once it holds a search's hits. `None`: it has pointers to read, or it searched already.
    pub(super) fn search_step(&self, turn: &TurnInput) -> Option<Action> {
        let searched = turn.done.iter().any(|d| matches!(d.action, Action::Search(_)))
            || turn.inbox.iter().any(|d| matches!(d, Received::Searched(_)));
        let read = turn.inbox.iter().any(|d| matches!(d, Received::Dereferenced(_)));
        if searched || read || !unread(&turn.inbox).is_empty() {
            return None;
        }
        let questions = self.questions_for(turn);
        if questions.is_empty() {
            return None;
        }
        // The questions' own words: a parent's lines of what matters now are a model's, and a small one writes a
        // guessed answer there ("… is 7 days"), which then ranks chunks that say so above the ones that answer.
        let words: Vec<&str> = questions.iter().map(|(_, q)| q.as_str()).collect();
        let query: String = words.join(" ").chars().take(MAX_QUERY_CHARS).collect();
        Some(Action::Search(SearchAction { query, k: SEARCH_K }))
    }

    /// What a worker reads of its own search's hits: the best unread ones, in rank order, while its budget's repo
    /// spans, artifact sections and deref tokens last (the first whatever it costs). `None`: nothing it holds came
    /// from a search, or it was handed pointers besides.
    fn search_reads(&self, turn: &TurnInput, unread: &[String]) -> Option<Vec<String>> {
        let found = hits(&turn.inbox);
        if found.is_empty() || unread.iter().any(|p| !found.iter().any(|(h, _)| h == p)) {
            return None;
        }
        let budget = self.seat.as_ref()?.budget;
        let (mut repo, mut artifact, mut tokens) = (0u32, 0u32, 0u32);
        let mut chosen = Vec::new();
        for (pointer, cost) in found.iter().filter(|(p, _)| unread.contains(p)) {
            let is_artifact = pointer.starts_with("artifact:");
            let fits = if is_artifact { artifact < budget.max_artifact_sections } else { repo < budget.max_repo_spans };
            if !chosen.is_empty() && (!fits || tokens + cost > budget.max_deref_tokens_total) {
                continue;
            }
            if is_artifact {
                artifact += 1;
            } else {
                repo += 1;
            }
            tokens += cost;
            chosen.push(pointer.clone());
        }
        Some(chosen)
    }

    /// A parent's brief turn: the model writes one brief per child, the runtime hands the step's tasks down with
    /// them; then the turn is done.
    pub(super) async fn brief_turn(&mut self, turn: &TurnInput) -> Action {
        // The turn's first action may be the catalogue's description; the briefs follow its answer.
        let described = matches!(turn.done.as_slice(), [Done { action: Action::Describe(_), .. }]);
        if turn.done.is_empty() || described {
            match self.write_briefs(turn).await {
                Ok(briefs) => self.queue.extend(briefs),
                Err(err) => return super::escalation_for(&turn.spec.id, "write the briefs", &err),
            }
        }
        self.queue.pop_front().unwrap_or(Action::Finish)
    }

    async fn write_briefs(&mut self, turn: &TurnInput) -> Result<Vec<Action>, LlmError> {
        let Step::Brief { to, tasks, symbols, capsules, .. } = &turn.step else { return Ok(Vec::new()) };
        let Some(seat) = self.seat.clone() else { return Ok(Vec::new()) };
        let children: Vec<(String, String)> = seat
            .children
            .iter()
            .filter(|c| to.is_empty() || to.contains(&c.id))
            .map(|c| (c.id.clone(), c.role.clone()))
            .collect();
        if children.is_empty() {
            return Ok(Vec::new());
        }
        let catalogue = holdings(&seat, turn);
        if let Some(asking) = describe_first(turn, &catalogue) {
            return Ok(vec![asking]);
        }
        let pointer = if catalogue.is_empty() { json!({"type": "string"}) } else { json!({"enum": catalogue}) };
        let now = json!({"type": "array", "minItems": 1, "maxItems": MAX_NOW_LINES,
                         "items": {"type": "string", "minLength": 1, "maxLength": MAX_NOW_CHARS}});
        let mut properties = serde_json::Map::new();
        for (child, _) in &children {
            let questions: Vec<&str> = seat.questions_below(tasks, child).iter().map(|t| t.id.as_str()).collect();
            let brief = if questions.is_empty() {
                // No graded question: the child's pack is one list.
                json!({
                    "type": "object",
                    "properties": {
                        "now": now,
                        "pointers": {"type": "array", "minItems": usize::from(!catalogue.is_empty()),
                                     "maxItems": MAX_PACK.min(catalogue.len().max(1)), "items": pointer},
                    },
                    "required": ["now", "pointers"],
                    "additionalProperties": false,
                })
            } else {
                // One list per question: a small model that picks the pointers of one question at a time packs
                // what each needs, where one list for all of them stops after the first one or two.
                let per_question = json!({"type": "array", "minItems": usize::from(!catalogue.is_empty()),
                                          "maxItems": MAX_PER_QUESTION.min(catalogue.len().max(1)), "items": pointer});
                let lists: serde_json::Map<String, Value> =
                    questions.iter().map(|id| ((*id).to_owned(), per_question.clone())).collect();
                json!({
                    "type": "object",
                    "properties": {
                        "now": now,
                        "questions": {"type": "object", "properties": lists, "required": questions,
                                      "additionalProperties": false},
                    },
                    "required": ["now", "questions"],
                    "additionalProperties": false,
                })
            };
            properties.insert(child.clone(), brief);
        }
        let names: Vec<&String> = children.iter().map(|(c, _)| c).collect();
        let schema =
            json!({"type": "object", "properties": properties, "required": names, "additionalProperties": false});
        let mut user = String::new();
        for doc in &turn.inbox {
            describe(doc, &mut user, super::Reads::of(&turn.spec));
        }
        // Nothing delivered yet (its catalogue's description aside): the lead starts from the plan.
        if turn.inbox.iter().all(|d| matches!(d, Received::Described(_))) {
            user.push_str(&format!("\n# Plan\n{}\n", seat.goal));
            for (idx, criterion) in seat.criteria.iter().enumerate() {
                user.push_str(&format!("Criterion {}: {criterion}\n", idx + 1));
            }
        }
        user.push_str("\n# Your children and their questions\n");
        for (child, role) in &children {
            let below = seat.questions_below(tasks, child);
            if below.is_empty() {
                user.push_str(&format!("- {child} (role {role}): no graded question\n"));
            } else {
                user.push_str(&format!("- {child} (role {role}):\n"));
                for task in below {
                    user.push_str(&format!("  - question {}: {}\n", task.id, task.question));
                }
            }
        }
        user.push_str("\n# Pointers you hold (each with what it holds)\n");
        for text in &catalogue {
            user.push_str(&catalogue_line(&turn.inbox, text));
        }
        user.push_str(&format!(
            "\n# Task\nWrite one brief for each child: one or two short lines of what matters now (where to look, what to check; you have not read the sources, so never state an answer), and under `questions`, for each of the child's questions, the pointers (one to {MAX_PER_QUESTION}) from your list whose description shows they hold that question's answer (a question comparing two sources needs a pointer to each). Never paste content.\n",
        ));
        let system = format!(
            "You are {} (role {}), a parent in a hierarchy of agents that exchange pointers to sources instead of pasting them. Answer with one JSON object: for each child, its brief.",
            turn.spec.id, turn.spec.role
        );
        let value = self.ask_json(system, user, "briefs", schema).await?;
        let briefs = Lenient::<BTreeMap<String, Lenient<ChildBrief>>>::of(&value);
        let mut actions = Vec::new();
        for (child, role) in &children {
            let brief = briefs.get(child).map(|b| &b.0);
            let trimmed = |list: Option<&Field<Vec<Field<String>>>>| -> Vec<String> {
                list.into_iter().flat_map(texts).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect()
            };
            // The pack: the pointers chosen for each question, in question order, each once.
            let below = seat.questions_below(tasks, child);
            let chosen: Vec<String> = if below.is_empty() {
                trimmed(brief.map(|b| &b.pointers))
            } else {
                below.iter().flat_map(|t| trimmed(brief.and_then(|b| b.questions.0.get(&t.id)))).collect()
            };
            let mut pointers: Vec<String> = Vec::new();
            for text in chosen {
                if catalogue.contains(&text) && !pointers.contains(&text) && pointers.len() < MAX_PACK {
                    pointers.push(text);
                }
            }
            let room = MAX_BRIEF_LINES.saturating_sub(below.len()).clamp(1, MAX_NOW_LINES);
            let mut now: Vec<String> = trimmed(brief.map(|b| &b.now)).into_iter().take(room).collect();
            if now.is_empty() {
                now.push("Answer your questions, citing what you read.".to_owned());
            }
            actions.push(Action::Brief(BriefAction {
                to: vec![child.clone()],
                now,
                constraints: Vec::new(),
                risks: Vec::new(),
                packs: BTreeMap::from([(role.clone(), pointers)]),
                grants: Vec::new(),
                tasks: tasks.clone(),
                symbols: symbols.clone(),
                capsules: capsules.clone(),
            }));
        }
        Ok(actions)
    }

    /// A parent decides on a child's deref request with its model; a model that fails denies.
    pub(super) async fn decide_with_model(&mut self, input: &DecideInput) -> less_runtime::run::Decision {
        use less_runtime::run::Decision;
        let request = &input.ask.request;
        let pointers: Vec<String> = request.pointers.iter().map(ToString::to_string).collect();
        let mut user = String::new();
        for doc in &input.inbox {
            describe(doc, &mut user, super::Reads::of(&input.spec));
        }
        user.push_str(&format!(
            "\n# Request {}\nYour child {} asks to read {} ({} tokens), more than its budget allows this turn.\nReason: {}\nUse: {}\n\n# Task\nFirst say in one short sentence whether the child needs it for its questions; then grant it if it does, deny it if it does not.\n",
            request.request_id,
            request.requester,
            pointers.join(", "),
            input.ask.tokens,
            request.reason,
            request.intended_use
        ));
        let schema = json!({
            "type": "object",
            // Keys are written in order (serde_json sorts them), so `because` comes first: the model says what the
            // child needs before it decides.
            "properties": {"because": {"type": "string", "minLength": 1, "maxLength": 160}, "grant": {"type": "boolean"}},
            "required": ["because", "grant"],
            "additionalProperties": false,
        });
        let system = format!(
            "You are {} (role {}), a parent in a hierarchy of agents. A child asks for a grant to read sources over its budget. Answer with one JSON object.",
            input.spec.id, input.spec.role
        );
        let decided = self.ask_json(system, user, "decision", schema).await.map(|v| Lenient::<GrantDecision>::of(&v));
        match decided {
            Ok(decision) if decision.grant.get() == Some(&true) => Decision::Grant(GrantSpec {
                id: format!("g-{}", request.request_id),
                to: request.requester.clone(),
                patterns: request.pointers.iter().map(|p| format!("{}:{}", p.ty(), p.location())).collect(),
                max_derefs: u32::try_from(request.pointers.len()).unwrap_or(u32::MAX),
                max_tokens: input.ask.tokens.max(1),
                uses: 1,
                ttl: "PT1H".to_owned(),
                inline_code_tokens: 0,
                tamper: false,
            }),
            Ok(decision) => {
                Decision::Deny(decision.because.get().map_or("denied", String::as_str).chars().take(160).collect())
            }
            Err(err) => Decision::Deny(format!("{}: the model could not decide", err.code())),
        }
    }

    /// The reading part of a worker's turn: the model chooses what to read among the pointers it holds and has not
    /// read; a read over budget becomes a request to the parent, a granted request is read with the grant. `None`
    /// when reading is over for this turn.
    pub(super) async fn read_step(&mut self, turn: &TurnInput) -> Option<Action> {
        if let Some(action) = self.queue.pop_front() {
            // The read the model chose with its query, after the recall.
            return Some(action);
        }
        let reading: Vec<&Done> = turn.done.iter().filter(|d| is_reading(&d.action)).collect();
        let queried = turn.done.iter().any(|d| matches!(d.action, Action::Query { .. }));
        match reading.last() {
            None if queried => None,
            None => {
                // What it chose before counts as read: a baseline holds it pasted, a refused read was answered.
                let unread: Vec<String> =
                    unread(&turn.inbox).into_iter().filter(|p| !self.chosen.contains(p)).collect();
                if unread.is_empty() {
                    return None;
                }
                // The agent's own search ranked what it found: the best hits its budget covers are read, a number
                // decides that (the first even over the budget, which then goes to the parent as a request).
                if let Some(pointers) = self.search_reads(turn, &unread) {
                    self.chosen.extend(pointers.iter().cloned());
                    return Some(Action::Deref(DerefAction {
                        pointers,
                        reason: "the best hits of my search".to_owned(),
                        intended_use: "cite the lines that answer my questions".to_owned(),
                        grant: None,
                    }));
                }
                // What the pointers hold comes through the gateway first.
                if let Some(asking) = describe_first(turn, &unread) {
                    return Some(asking);
                }
                match self.choose_reads(turn, &unread).await {
                    Ok(Reads { pointers, recall }) => {
                        self.chosen.extend(pointers.iter().cloned());
                        if !pointers.is_empty() {
                            self.queue.push_back(Action::Deref(DerefAction {
                                pointers,
                                reason: "to answer my questions".to_owned(),
                                intended_use: "cite it in my report".to_owned(),
                                grant: None,
                            }));
                        }
                        // The recall first: what others reported is in the prompt beside what the worker reads.
                        if let Some(text) = recall {
                            self.queue.push_front(Action::Query { text, k: RECALL_K, project: None, scope: None });
                        }
                        self.queue.pop_front()
                    }
                    Err(err) => {
                        tracing::warn!(target: "less.llm", "{}: could not choose what to read: {}", turn.spec.id, err.code());
                        None
                    }
                }
            }
            Some(done) => grant_follow_up(done),
        }
    }

    async fn choose_reads(&mut self, turn: &TurnInput, unread: &[String]) -> Result<Reads, LlmError> {
        let mut user = String::new();
        for doc in &turn.inbox {
            describe(doc, &mut user, super::Reads::of(&turn.spec));
        }
        user.push_str("\n# Pointers you have not read (each with what it holds)\n");
        for text in unread {
            user.push_str(&catalogue_line(&turn.inbox, text));
        }
        user.push_str(
            "\n# Task\nChoose what to read among the pointers you were given and have not read: the ones your questions need. Under `recall`, write a short search of the run's memory for what other agents already reported about your questions (a few key words), or leave it empty when you need nothing from them.\n",
        );
        let schema = json!({
            "type": "object",
            "properties": {
                "read": {"type": "array", "minItems": 1, "maxItems": MAX_READ.min(unread.len()), "items": {"enum": unread}},
                "recall": {"type": "string", "maxLength": MAX_RECALL_CHARS},
            },
            "required": ["read", "recall"],
            "additionalProperties": false,
        });
        let system = format!(
            "You are {} (role {}) in a hierarchy of agents that exchange pointers to sources. Reading costs budget: read only what you need. Answer with one JSON object.",
            turn.spec.id, turn.spec.role
        );
        let value = self.ask_json(system, user, "read", schema).await?;
        let choice = Lenient::<ReadChoice>::of(&value);
        let mut pointers: Vec<String> = Vec::new();
        for text in texts(&choice.read) {
            if unread.iter().any(|u| u == text) && !pointers.iter().any(|c| c == text) {
                pointers.push(text.to_owned());
            }
        }
        let recall = choice.recall.get().map(|t| t.trim()).filter(|t| !t.is_empty());
        Ok(Reads { pointers, recall: recall.map(|t| t.chars().take(MAX_RECALL_CHARS).collect()) })
    }
}

/// What follows a read as a number decides it: a read refused over the budget becomes a request to the parent, a
/// granted request is read with its grant, a denied request of several pointers reads the first alone (which the
/// budget may cover). `None`: nothing follows of itself.
pub(super) fn grant_follow_up(done: &Done) -> Option<Action> {
    match done {
        Done { action: Action::Deref(deref), outcome: Outcome::Refused(violation) }
            if violation.code == ErrorCode::DerefDenied && deref.grant.is_none() =>
        {
            Some(Action::AskGrant(AskGrantAction {
                pointers: deref.pointers.clone(),
                reason: "over my deref budget; needed for my questions".to_owned(),
                intended_use: "cite it in my report".to_owned(),
            }))
        }
        Done { action: Action::AskGrant(ask), outcome: Outcome::Granted { grant_id } } => {
            Some(Action::Deref(DerefAction {
                pointers: ask.pointers.clone(),
                reason: "granted by my parent".to_owned(),
                intended_use: "cite it in my report".to_owned(),
                grant: Some(grant_id.clone()),
            }))
        }
        Done { action: Action::AskGrant(ask), outcome: Outcome::Denied { .. } } if ask.pointers.len() > 1 => {
            Some(Action::Deref(DerefAction {
                pointers: ask.pointers[..1].to_vec(),
                reason: "the most needed one, within my budget".to_owned(),
                intended_use: "cite it in my report".to_owned(),
                grant: None,
            }))
        }
        _ => None,
    }
}

/// A worker model's choice: what to read, and what to recall from the run's memory.
struct Reads {
    pointers: Vec<String>,
    recall: Option<String>,
}

fn is_reading(action: &Action) -> bool {
    matches!(action, Action::Deref(_) | Action::AskGrant(_))
}

/// The pointers a parent holds: the lead (or a parent nobody briefed, which starts the work), the catalogue of its
/// seat; any other, what it was handed.
fn holdings(seat: &Seat, turn: &TurnInput) -> Vec<String> {
    let mut held = known_pointers(&turn.inbox);
    let briefed = turn.inbox.iter().any(|d| d.delivered().and_then(Delivered::brief).is_some());
    if turn.spec.parent.is_none() || !briefed {
        for text in seat.catalogue.iter().cloned() {
            if !held.contains(&text) {
                held.push(text);
            }
        }
    }
    held
}

/// Pointers the agent was given and has not read yet (nor read a span containing them).
pub(super) fn unread(inbox: &[Received]) -> Vec<String> {
    let read: Vec<String> = inbox
        .iter()
        .filter_map(|d| match d {
            Received::Dereferenced(read) => Some(read.pointer.clone()),
            _ => None,
        })
        .collect();
    let mut given = known_pointers(inbox);
    for (pointer, _) in hits(inbox) {
        if !given.contains(&pointer) {
            given.push(pointer);
        }
    }
    given.into_iter().filter(|p| !read.contains(p)).collect()
}

/// The hits of the agent's searches not pasted to it (a baseline's are), best first: pointer and tokens to read.
fn hits(inbox: &[Received]) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = Vec::new();
    for doc in inbox {
        let Received::Searched(searched) = doc else { continue };
        for hit in searched.hits.iter().filter(|hit| hit.content.is_none()) {
            if !out.iter().any(|(p, _)| *p == hit.pointer) {
                out.push((hit.pointer.clone(), hit.tokens));
            }
        }
    }
    out
}
