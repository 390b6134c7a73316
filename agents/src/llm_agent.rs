//! [`LlmAgent`]: an agent whose reports a language model writes.
//!
//! The scenario's steps say whose turn it is and what for. A parent's briefs, a worker's reads and a parent's answer
//! to a deref request, a worker's memory query are the model's choices (`roles`); scripted query and promotion steps
//! are carried out as written; a report
//! step becomes a completion: the prompt is built only from what the agent's gateway
//! delivered (briefs with their pointer packs, reports, recalled engrams, dereferenced content — never the step's
//! scripted engrams or summary), the answer is constrained by [`report_schema`] (or, answering the agent's graded
//! questions, [`answers_schema`]: one engram under each question's id; both derived from
//! `schemas/engram.v0.1.json`, its pointers an enum of the pointers the agent was given or read) and checked again
//! here (small models ignore bounds). Unusable output gets one corrective retry; after that the agent escalates to
//! its parent instead of reporting, so a bad model never crashes a run. When a gateway refuses the report, the code,
//! message and instruction go back to the model, with the schema tightened where the refusal says how, for one
//! resend.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use less_runtime::run::{
    Action, Agent, AgentFuture, DecideInput, Decision, Delivered, DescribeAction, Done, MAX_DESCRIBE, ModelUsage,
    Outcome, Received, ReportAction, Seat, TurnInput,
};
use less_runtime::{
    Engram, EngramSpec, ErrorCode, MAX_CLAIM_CHARS, Payload, Pointer, ReportKind, ReportStep, Scope, Severity, Step,
    TokenCounter, Violation, schema_document,
};
use serde_json::{Value, json};

use output::{EngramAnswer, Lenient, Report, texts};

use crate::provider::{
    ChatMessage, Completion, CompletionModel, CompletionRequest, JsonCompletion, LlmError, OutputSchema, check_json,
};

/// Characters of one dereferenced text kept in a prompt: numbered (a model choosing its actions, whose prompt holds
/// one question's findings), or as read.
const MAX_DEREF_CHARS: usize = 2_400;
const MAX_AS_READ_CHARS: usize = 1_500;
/// Engrams a report may carry (the message schema's limit).
const MAX_REPORT_ENGRAMS: usize = 12;
/// Engrams asked for at first (a report is a few findings; a small model runs out of tokens on more).
const DEFAULT_ENGRAMS: usize = 2;
/// Pointers per engram asked for.
const MAX_ENGRAM_POINTERS: usize = 2;
/// Characters of a claim asked for at first (the schema allows 500).
const DEFAULT_CLAIM_CHARS: usize = 300;
/// The confidences a model may choose: servers do not enforce numeric bounds, but they do enforce an enum.
const CONFIDENCE_LEVELS: [f64; 3] = [0.5, 0.7, 0.9];
/// Corrective retries of unusable output in a turn.
pub(crate) const OUTPUT_RETRIES: u32 = 1;

/// Sampling settings of an LLM agent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// Temperature.
    pub temperature: f64,
    /// The most tokens per completion.
    pub max_tokens: u32,
}

/// An agent whose reports a model writes.
pub struct LlmAgent {
    model: Arc<dyn CompletionModel>,
    sampling: Sampling,
    /// The agent's id (for its log lines).
    agent: String,
    /// The last report conversation, for a resend after a refusal.
    last: Option<Conversation>,
    /// Spent since the last `take_usage`.
    spent: ModelUsage,
    /// Carries out the steps a model does not write.
    script: crate::ScriptedAgent,
    /// What it may know of its run: its budget, its children, the questions at or below it, the plan, a parent's
    /// pointers (none: reports only).
    seat: Option<Seat>,
    /// The rest of a turn the model planned at once (a parent's briefs; a worker's recall and read).
    queue: VecDeque<Action>,
    /// Pointers the model chose to read in earlier turns (not offered again).
    chosen: Vec<String>,
    /// The question a model choosing its actions works on in this turn.
    focus: Option<act::Focus>,
    /// Questions of this turn it escalated instead of answering (not taken up again).
    given_up: Vec<String>,
}

/// A report exchange kept for a resend.
struct Conversation {
    request: CompletionRequest,
    answer: String,
    known: Citable,
    /// The graded questions the report answers, one engram each (`(id, question)`).
    questions: Vec<(String, String)>,
    n_engrams: usize,
}

impl LlmAgent {
    /// An agent asking `model`.
    pub fn new(agent: &str, model: Arc<dyn CompletionModel>, sampling: Sampling) -> LlmAgent {
        LlmAgent {
            model,
            sampling,
            agent: agent.to_owned(),
            last: None,
            spent: ModelUsage::default(),
            script: crate::ScriptedAgent::default(),
            seat: None,
            queue: VecDeque::new(),
            chosen: Vec::new(),
            focus: None,
            given_up: Vec::new(),
        }
    }

    /// The agent in its seat: as a parent its model writes its children's briefs and answers their deref requests;
    /// as a worker it chooses what to read.
    pub fn with_seat(mut self, seat: Seat) -> LlmAgent {
        self.seat = Some(seat);
        self
    }

    /// The graded questions the agent's report answers: among its briefs' `Task <id>: …` lines, in order, those of
    /// its own tasks (a parent's briefs carry its descendants' questions too, and a model may copy task lines into
    /// the lines it writes), worded as the scenario words them. Without a seat, every such line.
    fn questions_for(&self, input: &TurnInput) -> Vec<(String, String)> {
        let questions = task_questions(&input.inbox);
        match &self.seat {
            Some(seat) => questions
                .into_iter()
                .filter_map(|(id, _)| seat.question(&id).filter(|q| q.agent == input.spec.id))
                .map(|q| (q.id.clone(), q.question.clone()))
                .collect(),
            None => questions,
        }
    }

    async fn ask(
        &mut self,
        request: &CompletionRequest,
        known: &Citable,
        questions: &[(String, String)],
        quotes: QuoteCheck,
    ) -> Result<JsonCompletion, LlmError> {
        let completion = crate::provider::traced_complete(&*self.model, request, &self.agent).await?;
        let tokenizer = self.seat.as_ref().map(|s| s.tokenizer).unwrap_or_default();
        spend(&mut self.spent, request, &completion, TokenCounter::shared(tokenizer));
        // Every answer costs tokens, usable or not: counted above, before the checks.
        check_json(request, completion, |value| check_report(value, known, questions, quotes))
    }

    /// The documents a report's prompt shows: for the one question a model choosing its actions works on, what its
    /// work on that question found (`Focus::docs`); else everything delivered.
    fn prompt_docs(&self, input: &TurnInput, questions: &[(String, String)]) -> Vec<Received> {
        match (&self.focus, questions) {
            (Some(focus), [(task, _)]) if focus.task == *task => focus.docs(&input.inbox),
            _ => input.inbox.clone(),
        }
    }

    /// The question worked on is given up: its answer was unusable, and the agent escalated instead.
    fn give_up(&mut self) {
        if let Some(focus) = &self.focus {
            self.given_up.push(focus.task.clone());
        }
    }

    /// Writes the report of `step` with the model, or an escalation when its output stays unusable.
    async fn report(&mut self, input: &TurnInput, step: &ReportStep) -> Action {
        let questions = self.questions_for(input);
        self.report_on(input, step, questions).await
    }

    /// Writes the report of `step` answering `questions` (none: findings), or an escalation.
    async fn report_on(&mut self, input: &TurnInput, step: &ReportStep, questions: Vec<(String, String)>) -> Action {
        let docs = self.prompt_docs(input, &questions);
        // A quote is placed in what the prompt shows: the reads of the work on this question.
        let known =
            Citable { reads: Reads::of(&input.spec), texts: quote::read_texts(&docs), ..Citable::of(&input.inbox) };
        let schema = if questions.is_empty() {
            report_schema(&known, DEFAULT_ENGRAMS, DEFAULT_CLAIM_CHARS)
        } else {
            answers_schema(&known, &questions, DEFAULT_CLAIM_CHARS)
        };
        let quoting = !questions.is_empty() && known.quotes();
        let mut request = CompletionRequest {
            system: system_prompt(input, Reads::of(&input.spec), quoting),
            messages: vec![ChatMessage::user(user_prompt(&docs, input, step, &questions, quoting))],
            temperature: self.sampling.temperature,
            max_tokens: self.sampling.max_tokens,
            schema: Some(OutputSchema { name: "report".to_owned(), schema }),
        };
        let mut tries = 0;
        loop {
            // A quote that copies nothing read is refused once; asked again, it falls back on the closest read.
            let quotes = if tries == 0 { QuoteCheck::Copied } else { QuoteCheck::Any };
            match self.ask(&request, &known, &questions, quotes).await {
                Ok(done) => {
                    let (summary, engrams) = read_report(&done.value, &questions, &known);
                    self.last = Some(Conversation {
                        request: request.clone(),
                        answer: done.completion.text.clone(),
                        known,
                        questions,
                        n_engrams: engrams.len(),
                    });
                    // Scripted misbehaviour is the scripted agent's: a model's report is what the model wrote.
                    return Action::Report(ReportAction {
                        to: step.to.clone(),
                        kind: step.kind.clone(),
                        engrams,
                        summary,
                        paste_sources: false,
                        grant: step.grant.clone(),
                    });
                }
                Err(err) if tries < OUTPUT_RETRIES && !err.is_transient() => {
                    tries += 1;
                    self.spent.unusable.push(unusable_reason(&err));
                    tracing::warn!(target: "less.llm", "{}: unusable output ({}), asking again", self.agent, err.code());
                    if let LlmError::OutputInvalid { .. } | LlmError::OutputNotJson { .. } = err {
                        request.messages.push(ChatMessage::user(format!(
                            "That answer was unusable ({}: {err}). Answer again with one JSON object that follows the schema, with short claims.",
                            err.code()
                        )));
                    }
                }
                Err(err) => return escalation(step, &err),
            }
        }
    }

    /// The model's resend after `violation`, or an escalation when it cannot give one.
    async fn resend(&mut self, action: &Action, violation: &Violation, split: bool) -> Option<Action> {
        let Action::Report(report) = action else { return None };
        let last = self.last.take()?;
        let mut request = last.request.clone();
        request.messages.push(ChatMessage::assistant(last.answer.clone()));
        request.messages.push(ChatMessage::user(rejection_prompt(violation, &last.questions)));
        let (mut max_engrams, max_claim) = tightened(violation, last.n_engrams, !last.questions.is_empty());
        // Answers that may follow in the next report (a model choosing its actions answers the rest then): as many
        // as the receiver's inline budget holds, in the proportion the refusal names.
        if split && violation.code == ErrorCode::BudgetExceeded && !last.questions.is_empty() {
            max_engrams = max_engrams.min(fitting_answers(violation, last.n_engrams));
        }
        // An answer per question, as many as the receiver takes.
        let questions: Vec<(String, String)> = last.questions.into_iter().take(max_engrams).collect();
        let schema = if questions.is_empty() {
            report_schema(&last.known, max_engrams, max_claim)
        } else {
            answers_schema(&last.known, &questions, max_claim)
        };
        request.schema = Some(OutputSchema { name: "report".to_owned(), schema });
        match self.ask(&request, &last.known, &questions, QuoteCheck::Any).await {
            Ok(done) => {
                let (summary, engrams) = read_report(&done.value, &questions, &last.known);
                let n_engrams = engrams.len();
                self.last = Some(Conversation {
                    request,
                    answer: done.completion.text,
                    known: last.known,
                    questions,
                    n_engrams,
                });
                Some(Action::Report(ReportAction { engrams, summary, paste_sources: false, ..report.clone() }))
            }
            Err(err) => {
                let step = ReportStep {
                    agent: self.agent.clone(),
                    to: report.to.clone(),
                    kind: report.kind.clone(),
                    engrams: Vec::new(),
                    summary: String::new(),
                    misbehave: None,
                    grant: None,
                };
                Some(escalation(&step, &err))
            }
        }
    }
}

impl Agent for LlmAgent {
    fn next<'a>(&'a mut self, turn: &'a TurnInput) -> AgentFuture<'a, Action> {
        Box::pin(async move {
            if turn.done.is_empty() {
                // What a turn planned ends with it.
                self.queue.clear();
                self.focus = None;
                self.given_up.clear();
            }
            // A model that chooses its own actions (`LlmSpec::choose_actions`, the `act` module) works from what its
            // actions return; as a parent it hands the steps' questions down as written, never choosing among
            // authored pointers.
            let chooses_actions = turn.spec.llm.as_ref().is_some_and(|llm| llm.choose_actions);
            match &turn.step {
                Step::Brief { .. } if self.seat.is_some() && !chooses_actions => self.brief_turn(turn).await,
                Step::Deref { .. } if self.seat.is_some() => self.read_step(turn).await.unwrap_or(Action::Finish),
                // A model that chooses its actions works on its questions one at a time, each answered in a report
                // of its own before the next begins.
                Step::Report(step)
                    if chooses_actions && self.seat.is_some() && !self.questions_for(turn).is_empty() =>
                {
                    if let Some(Done { action: action @ Action::Report(_), outcome: Outcome::Refused(violation) }) =
                        turn.last()
                    {
                        let resent = self.resend(action, violation, true).await.unwrap_or(Action::Finish);
                        if matches!(resent, Action::Escalate { .. }) {
                            self.give_up();
                        }
                        return resent;
                    }
                    let open: Vec<(String, String)> = act::unanswered(&self.questions_for(turn), turn)
                        .into_iter()
                        .filter(|(id, _)| !self.given_up.contains(id))
                        .collect();
                    let action = self.act(turn, step, &open).await;
                    if matches!(action, Action::Escalate { .. }) {
                        self.give_up();
                    }
                    action
                }
                Step::Report(step) => {
                    let reported =
                        turn.done.iter().any(|d| matches!(d.action, Action::Report(_) | Action::Escalate { .. }));
                    if !reported {
                        // A worker handed questions and no pointers finds its own: it searches the workspace first.
                        if self.seat.is_some()
                            && let Some(action) = self.search_step(turn)
                        {
                            return action;
                        }
                        // A worker that has read nothing yet reads first (the model chooses what).
                        let read_before = turn.inbox.iter().any(|d| matches!(d, Received::Dereferenced(_)));
                        let reading =
                            turn.done.iter().any(|d| matches!(d.action, Action::Deref(_) | Action::AskGrant(_)));
                        if self.seat.is_some()
                            && (reading || !read_before)
                            && let Some(action) = self.read_step(turn).await
                        {
                            return action;
                        }
                        return self.report(turn, step).await;
                    }
                    match turn.last() {
                        Some(Done { action, outcome: Outcome::Refused(violation) })
                            if matches!(action, Action::Report(_)) =>
                        {
                            self.resend(action, violation, false).await.unwrap_or(Action::Finish)
                        }
                        _ => Action::Finish,
                    }
                }
                // The rest of the hierarchy's plumbing (queries, promotions) is carried out as written.
                _ => self.script.next(turn).await,
            }
        })
    }

    fn decide<'a>(&'a mut self, input: &'a DecideInput) -> AgentFuture<'a, Decision> {
        Box::pin(async move { self.decide_with_model(input).await })
    }

    fn take_usage(&mut self) -> ModelUsage {
        std::mem::take(&mut self.spent)
    }
}

/// Adds one completion of `request` to `spent`: a call, the tokens and cached tokens the server reported and the
/// call's time. A server that reported no usage has the prompt (system prompt and every turn) and the answer counted
/// with `counter`, the run's tokenizer, and the call is counted among `counted_calls`, so a report never shows a
/// model call as free.
pub(crate) fn spend(
    spent: &mut ModelUsage,
    request: &CompletionRequest,
    completion: &Completion,
    counter: &TokenCounter,
) {
    spent.calls += 1;
    spent.model_ms += completion.elapsed_ms;
    match &completion.usage {
        Some(usage) => {
            spent.prompt_tokens += usage.prompt_tokens;
            spent.completion_tokens += usage.completion_tokens;
            spent.cached_tokens += usage.cached_tokens;
        }
        None => {
            let turns = request.messages.iter().map(|m| u64::from(counter.count(&m.content)));
            spent.prompt_tokens += u64::from(counter.count(&request.system)) + turns.sum::<u64>();
            spent.completion_tokens += u64::from(counter.count(&completion.text));
            spent.counted_calls += 1;
        }
    }
}

/// The JSON Schema a report answer must follow: a summary and 1..=`max_engrams` engrams whose kind comes from
/// `schemas/engram.v0.1.json`, whose confidence is one of [`CONFIDENCE_LEVELS`] within that schema's bounds, whose
/// claim has at most `max_claim` characters and whose pointers are among `known`.
pub fn report_schema(known: &Citable, max_engrams: usize, max_claim: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string", "minLength": 1, "maxLength": 300},
            "engrams": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_engrams.clamp(1, MAX_REPORT_ENGRAMS),
                "items": engram_item_schema(known, max_claim, false),
            },
        },
        "required": ["summary", "engrams"],
        "additionalProperties": false,
    })
}

/// The JSON Schema of a report that answers graded questions: `answers`, one engram (as in [`report_schema`]) under
/// each question's id, and a summary. A small model answers a question it sees named far better than it maps
/// findings to questions itself. When `known` quotes ([`Citable::quotes`]), an answer copies the lines it rests on
/// (`quote`, written before its claim, which is then called `statement`) instead of naming pointers: the runtime
/// cites the lines copied ([`quote`]).
pub fn answers_schema(known: &Citable, questions: &[(String, String)], max_claim: usize) -> Value {
    let mut answers = serde_json::Map::new();
    for (id, _) in questions {
        answers.insert(id.clone(), engram_item_schema(known, max_claim, known.quotes()));
    }
    let ids: Vec<&String> = questions.iter().map(|(id, _)| id).collect();
    json!({
        "type": "object",
        // serde_json writes keys sorted: `answers` before `summary`, each answer's `claim` before its `pointers`.
        "properties": {
            "answers": {"type": "object", "properties": answers, "required": ids, "additionalProperties": false},
            "summary": {"type": "string", "minLength": 1, "maxLength": 300},
        },
        "required": ["answers", "summary"],
        "additionalProperties": false,
    })
}

/// One engram of an answer: a kind from `schemas/engram.v0.1.json`, a claim of at most `max_claim` characters, 1–2
/// pointers among `known`, a confidence among [`CONFIDENCE_LEVELS`] within the schema's bounds. `quoted`: instead of
/// pointers, a `quote` of lines copied from what was read, and the claim as `statement`, so that the quote sorts,
/// and so is written, first (a model asked for a `basis` before its `claim` wrote a pointer in it).
fn engram_item_schema(known: &Citable, max_claim: usize, quoted: bool) -> Value {
    let engram = schema_document("engram.v0.1.json").unwrap_or_default();
    let kind = engram.pointer("/properties/kind").cloned().unwrap_or_else(|| json!({"type": "string"}));
    let bound = |name: &str, default: f64| {
        engram.pointer(&format!("/properties/confidence/{name}")).and_then(Value::as_f64).unwrap_or(default)
    };
    let (low, high) = (bound("minimum", 0.0), bound("maximum", 1.0));
    let levels: Vec<f64> = CONFIDENCE_LEVELS.into_iter().filter(|c| (low..=high).contains(c)).collect();
    let claim = json!({"type": "string", "minLength": 1, "maxLength": max_claim.min(MAX_CLAIM_CHARS)});
    if quoted {
        return json!({
            "type": "object",
            "properties": {
                "kind": kind,
                "quote": {"type": "string", "minLength": 4, "maxLength": quote::MAX_QUOTE_CHARS},
                "statement": claim,
                "confidence": {"enum": levels},
            },
            "required": ["kind", "quote", "statement", "confidence"],
            "additionalProperties": false,
        });
    }
    let pointer = known.schema();
    json!({
        "type": "object",
        "properties": {
            "kind": kind,
            "claim": claim,
            "pointers": {"type": "array", "minItems": 1, "maxItems": MAX_ENGRAM_POINTERS, "items": pointer},
            "confidence": {"enum": levels},
        },
        "required": ["kind", "claim", "pointers", "confidence"],
        "additionalProperties": false,
    })
}

/// The engrams of an answer: its `engrams`, or its `answers` in the order of `questions` (`/answers/<id>`); an
/// answer missing from `answers` is left out (the schema requires every one).
fn answer_engrams<'a>(report: &'a Report, questions: &'a [(String, String)]) -> Vec<(String, &'a EngramAnswer)> {
    if questions.is_empty() {
        let engrams = report.engrams.get().into_iter().flatten();
        engrams.enumerate().map(|(i, e)| (format!("/engrams/{i}"), &e.0)).collect()
    } else {
        let answers = report.answers.get();
        questions.iter().filter_map(|(id, _)| Some((format!("/answers/{id}"), &answers?.get(id)?.0))).collect()
    }
}

/// The graded questions an agent's briefs carry, as `Task <id>: <question>` lines: `(id, question)`, in order.
pub fn task_questions(inbox: &[Received]) -> Vec<(String, String)> {
    let mut questions: Vec<(String, String)> = Vec::new();
    for brief in inbox.iter().filter_map(|doc| doc.delivered()?.brief()) {
        for line in &brief.what_matters_now {
            if let Some((id, question)) = line.strip_prefix("Task ").and_then(|rest| rest.split_once(": "))
                && !id.is_empty()
                && !id.contains(char::is_whitespace)
                && !questions.iter().any(|(q, _)| q == id)
            {
                questions.push((id.to_owned(), question.trim().to_owned()));
            }
        }
    }
    questions
}

/// Whether `claim` asks rather than answers `question` (small models copy the question into the claim): it holds
/// the question's words in order, or ends with a question mark after a word (not after code such as `.await?`).
fn asks(claim: &str, question: &str) -> bool {
    let words = |text: &str| -> String {
        let lower = text.to_lowercase();
        let kept: String = lower.chars().map(|c| if c.is_alphanumeric() { c } else { ' ' }).collect();
        kept.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let question = words(question);
    if question.split(' ').count() >= 4 && words(claim).contains(&question) {
        return true;
    }
    let claim = claim.trim();
    let last = claim.split_whitespace().last().unwrap_or_default();
    claim.ends_with('?') && !last.contains(['.', '(', ')', '`', ':', '!'])
}

/// Whether a quote must copy lines the agent read, or may fall back on the read closest to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuoteCheck {
    /// A quote [`quote::locate`] cannot place is a violation: the model is asked again, showing what it read.
    Copied,
    /// Any quote goes ([`read_report`] falls back on [`quote::closest_text`]).
    Any,
}

/// What the schema cannot say: claims not blank (and, answering questions, not a question), quotes that copy what
/// was read (with [`QuoteCheck::Copied`]), pointers in the text grammar and among those the agent knows.
fn check_report(value: &Value, known: &Citable, questions: &[(String, String)], quotes: QuoteCheck) -> Vec<String> {
    let mut violations = Vec::new();
    let report = Lenient::<Report>::of(value);
    for (idx, (path, engram)) in answer_engrams(&report, questions).into_iter().enumerate() {
        let (field, claim) =
            if engram.quote.is_present() { ("statement", &engram.statement) } else { ("claim", &engram.claim) };
        let claim = claim.get().map_or("", String::as_str);
        let question = questions.get(idx).map(|(_, q)| q.as_str());
        match engram.quote.get() {
            Some(quote) if quote.trim().is_empty() => {
                violations.push(format!("{path}/quote: blank; copy the lines of what you read that show the answer"))
            }
            Some(quote)
                if quotes == QuoteCheck::Copied
                    && !known.texts.is_empty()
                    && quote::locate(quote, &known.texts).is_empty() =>
            {
                violations.push(format!(
                    "{path}/quote: copies none of the lines you read ({}); copy, character for character, the lines of what you read that show the answer",
                    read_spans(&known.texts)
                ))
            }
            _ => {}
        }
        if claim.trim().is_empty() {
            violations.push(format!("{path}/{field}: blank"));
        } else if let Some(question) = question
            && asks(claim, question)
        {
            violations.push(format!(
                "{path}/{field}: asks a question; state the answer the sources you read show (values, names), not the question"
            ));
        }
        for (j, pointer) in engram.pointers.get().into_iter().flatten().enumerate() {
            let text = pointer.get().map_or("", String::as_str);
            match Pointer::parse(text) {
                Err(_) => violations.push(format!("{path}/pointers/{j}: not a pointer: {text:?}")),
                Ok(pointer) if !known.allows(text, &pointer) => violations.push(format!(
                    "{path}/pointers/{j}: not one of the pointers you were given, nor lines inside what you read: {text:?}"
                )),
                Ok(_) => {}
            }
        }
    }
    violations
}

/// The spans `texts` hold, for a message: `src/walk.rs lines 20-27, src/dir.rs lines 1-40`.
fn read_spans(texts: &[ReadText]) -> String {
    let span = |t: &ReadText| match t.kind {
        Some(_) => format!("{} lines {}-{}", t.path, t.first, t.last()),
        None => t.path.clone(),
    };
    texts.iter().map(span).collect::<Vec<_>>().join(", ")
}

/// The summary and engrams of a checked answer. A quoted answer cites the lines its quote copies from what was read
/// ([`quote::locate`]), or, copying nothing read, the text read that shares most words with it.
fn read_report(value: &Value, questions: &[(String, String)], known: &Citable) -> (String, Vec<EngramSpec>) {
    let report = Lenient::<Report>::of(value);
    let summary = report.summary.get().cloned().unwrap_or_default();
    let engrams = answer_engrams(&report, questions)
        .into_iter()
        .filter_map(|(path, e)| {
            // An answer keyed by a task's id answers that task (the runtime records it for the grader).
            let task = path.strip_prefix("/answers/").map(str::to_owned);
            let claim = if e.claim.is_present() { &e.claim } else { &e.statement };
            let claim = claim.get()?.trim().to_owned();
            let pointers = match e.quote.get() {
                Some(quoted) => match quote::locate(quoted, &known.texts) {
                    cited if cited.is_empty() => {
                        vec![quote::closest_text(&format!("{quoted}\n{claim}"), &known.texts)?]
                    }
                    cited => cited,
                },
                // Small models repeat a pointer; each is cited once.
                None => {
                    e.pointers.get()?;
                    texts(&e.pointers).fold(Vec::new(), |mut v, p| {
                        if !v.iter().any(|q: &String| q == p) {
                            v.push(p.to_owned());
                        }
                        v
                    })
                }
            };
            Some(EngramSpec {
                kind: *e.kind.get()?,
                claim,
                pointers,
                confidence: e.confidence.get().copied().unwrap_or(0.8).clamp(0.0, 1.0),
                ttl: "P7D".to_owned(),
                scope: Scope::Run,
                tags: vec!["llm".to_owned()],
                task,
            })
        })
        .collect();
    (summary, engrams)
}

/// Why an answer was thrown away, for the ledger: the code and the first few violations, short.
fn unusable_reason(err: &LlmError) -> String {
    let mut reason = format!("{}: {err}", err.code());
    if reason.chars().count() > 300 {
        reason = reason.chars().take(299).collect::<String>() + "…";
    }
    reason
}

/// The escalation an agent sends instead of a report its model could not write.
fn escalation(step: &ReportStep, err: &LlmError) -> Action {
    escalation_for(&step.agent, "write the report", err)
}

/// The escalation an agent sends when its model could not do `what`.
fn escalation_for(agent: &str, what: &str, err: &LlmError) -> Action {
    let mut reason = format!("{}: the model could not {what}: {err}", err.code());
    if reason.chars().count() > MAX_CLAIM_CHARS {
        reason = reason.chars().take(MAX_CLAIM_CHARS - 1).collect::<String>() + "…";
    }
    tracing::warn!(target: "less.llm", "{agent}: escalating: {reason}");
    Action::Escalate { reason, severity: Severity::Warning }
}

/// The limits a resend must meet, from the refusal: `(engrams, claim characters)`.
fn tightened(violation: &Violation, n_engrams: usize, answering: bool) -> (usize, usize) {
    if violation.code != ErrorCode::BudgetExceeded {
        return (n_engrams.max(1), DEFAULT_CLAIM_CHARS);
    }
    if violation.path == "/engrams" {
        // "N engrams; the receiver accepts at most M"
        let most = violation.message.rsplit(' ').next().and_then(|m| m.parse::<usize>().ok());
        return (most.unwrap_or(n_engrams.saturating_sub(1)).max(1), DEFAULT_CLAIM_CHARS);
    }
    if violation.path == "/body" {
        return (n_engrams.max(1), DEFAULT_CLAIM_CHARS);
    }
    // Too many inline tokens: shorter claims, and fewer engrams unless each answers a question.
    if answering {
        return (n_engrams.max(1), 160);
    }
    (n_engrams.saturating_sub(1).max(1), 240)
}

/// How many of `n` answers fit a receiver whose refusal says "<sent> inline tokens; the receiver accepts at most
/// <allowed>": `n` scaled by allowed/sent, rounded down, one fewer for the margin, at least one (`n - 1` when the
/// refusal names no numbers).
fn fitting_answers(violation: &Violation, n: usize) -> usize {
    let numbers: Vec<usize> =
        violation.message.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    match (numbers.first(), numbers.last()) {
        (Some(&sent), Some(&allowed)) if sent > allowed && sent > 0 => (n * allowed / sent).saturating_sub(1).max(1),
        _ => n.saturating_sub(1).max(1),
    }
}

/// What a refusal says to the model; a path into an answered report's engrams names the answer (`/answers/<id>`:
/// its engrams are the answers in question order).
fn rejection_prompt(violation: &Violation, questions: &[(String, String)]) -> String {
    let mut at = violation.path.clone();
    if let Some(rest) = at.strip_prefix("/engrams/") {
        let (idx, tail) = rest.split_once('/').map_or((rest, ""), |(i, t)| (i, t));
        if let Some((id, _)) = idx.parse::<usize>().ok().and_then(|i| questions.get(i)) {
            at = if tail.is_empty() { format!("/answers/{id}") } else { format!("/answers/{id}/{tail}") };
        }
    }
    let path = if at.is_empty() { String::new() } else { format!(" at {at}") };
    format!(
        "The receiver's gateway refused that message: {}{path}: {}. {} Answer again with the corrected JSON only: cite pointers, never paste content.",
        violation.code,
        violation.message,
        violation.code.instruction()
    )
}

fn system_prompt(input: &TurnInput, reads: Reads, quoting: bool) -> String {
    let cite = match reads {
        Reads::Numbered if quoting => {
            "Each answer first quotes the lines of code or comments that show it, copied from what you read (the quote becomes its citation), then states it."
        }
        Reads::Numbered => {
            "Cite only pointers you were given or read, or the lines of what you read that show it (repo:path#Lx-Ly, from the line numbers shown); never paste code."
        }
        Reads::AsRead => "Cite only pointers you were given; never paste code.",
    };
    format!(
        "You are {} (role {}) in a hierarchy of agents that exchange engrams: short typed claims, each citing the pointers (sources) it rests on. Answer with one JSON object: a one-sentence summary and your findings as engrams. {cite}",
        input.spec.id, input.spec.role
    )
}

/// How a prompt shows what the agent read, and what its report may cite of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reads {
    /// Each line behind its number in the file, and a citation may name lines inside what was read: a model that
    /// chooses its own actions finds its evidence and cites the lines that show the answer.
    Numbered,
    /// The content as read (cut at [`MAX_AS_READ_CHARS`]), cited by the pointers the agent was given or read: the
    /// step-based agents, whose parents packed the pointers (and whose committed recording was made so).
    #[default]
    AsRead,
}

impl Reads {
    /// What `spec`'s model sees and cites.
    pub fn of(spec: &less_runtime::AgentSpec) -> Reads {
        if spec.llm.as_ref().is_some_and(|llm| llm.choose_actions) { Reads::Numbered } else { Reads::AsRead }
    }
}

/// The task and everything the gateway delivered, in the order it arrived.
fn user_prompt(
    docs: &[Received],
    input: &TurnInput,
    step: &ReportStep,
    questions: &[(String, String)],
    quoting: bool,
) -> String {
    let mut text = String::new();
    for doc in docs {
        describe(doc, &mut text, Reads::of(&input.spec));
    }
    let to = step.to.clone().or_else(|| input.spec.parent.clone()).unwrap_or_else(|| "the lead".to_owned());
    let task = match &step.kind {
        ReportKind::TaskResult { task, status, .. } => {
            format!("Report the result of task {task} (status {}) to {to}.", json!(status).as_str().unwrap_or_default())
        }
        ReportKind::GateReport { gate_id, status, .. } => {
            format!(
                "Report gate {gate_id} (status {}) to {to}: the decision and why.",
                json!(status).as_str().unwrap_or_default()
            )
        }
        ReportKind::Escalation { reason, .. } => format!("Escalate to {to}: {reason}"),
        ReportKind::Question { question, .. } => format!("Ask {to}: {question}"),
        ReportKind::TaskClaim { task, .. } => format!("Claim task {task} to {to}."),
        ReportKind::Checkpoint { wave, .. } => format!("Report the checkpoint of wave {wave} to {to}."),
    };
    // Graded questions reach an agent as `Task <id>: <question>` lines of its briefs; each is answered under its id.
    if questions.is_empty() {
        let how = "List your findings as engrams: a risk for each problem found, citing the exact pointers.";
        text.push_str(&format!("\n# Task\n{task} {how}\n"));
    } else {
        text.push_str("\n# Questions\n");
        for (id, question) in questions {
            text.push_str(&format!("- {id}: {question}\n"));
        }
        if quoting {
            text.push_str(&format!(
                "\n# Task\n{task} Under `answers`, answer each question under its id. First `quote`: copy, character \
                 for character, the one to eight lines of code or comments from what you read that show the answer, \
                 without their line numbers: the lines themselves, not a pointer or a file name. They become the \
                 answer's citation. Then `statement`: the answer in one or two sentences, saying what those lines \
                 show, with their values and names (never repeat the question). Kind: a risk where the sources \
                 disagree or the code breaks a rule, else a fact.\n"
            ));
            return text;
        }
        text.push_str(&format!(
            "\n# Task\n{task} Under `answers`, answer each question under its id in one engram: the claim states the \
             answer in one or two sentences, with the values and names the sources you read show (never repeat the \
             question), and cites {}; a risk where the sources disagree or the code breaks a rule, else a fact.\n",
            match Reads::of(&input.spec) {
                Reads::Numbered =>
                    "the pointers or the lines (repo:path#Lx-Ly, by the numbers shown) of what you read that show it",
                Reads::AsRead => "the pointers that show it",
            }
        ));
    }
    text
}

/// One item of the inbox as prompt text, what was read shown as `reads` says: the one place a prompt shows what the
/// agent received.
fn describe(doc: &Received, text: &mut String, reads: Reads) {
    match doc {
        Received::Verbatim(verbatim) => {
            // The verbatim baseline: the model reads what was sent, pasted files and all.
            let from = verbatim.doc.from().unwrap_or_default();
            let what = verbatim.doc.message().map_or("brief", |message| message.payload.type_name());
            text.push_str(&format!("\n# {what} from {from}\n{}\n", verbatim.wire.trim_end()));
        }
        Received::Dereferenced(read) => {
            let (pointer, content) = (read.pointer.as_str(), read.content.as_str());
            let shown = match reads {
                Reads::Numbered => numbered(pointer, content),
                Reads::AsRead => {
                    let mut cut: String = content.chars().take(MAX_AS_READ_CHARS).collect();
                    if cut.len() < content.len() {
                        cut.push_str("\n[…]");
                    }
                    cut
                }
            };
            text.push_str(&format!("\n# You read {pointer}\n{shown}\n"));
        }
        Received::Searched(searched) => {
            text.push_str(&format!(
                "\n# You searched the workspace for {:?}: {} hits, best first\n",
                searched.query,
                searched.hits.len()
            ));
            for hit in &searched.hits {
                match &hit.content {
                    // The baseline pastes each hit's content.
                    Some(content) => {
                        text.push_str(&format!("## {}\n{}\n", hit.pointer, numbered(&hit.pointer, content)))
                    }
                    None => {
                        text.push_str(&format!("- {} — {} ({} tokens to read)\n", hit.pointer, hit.preview, hit.tokens))
                    }
                }
            }
        }
        Received::Listed(listed) => {
            text.push_str(&format!("\n# Files matching {:?}\n", listed.pattern));
            for file in &listed.files {
                text.push_str(&format!(
                    "- {} ({} lines, {} tokens): {}\n",
                    file.path,
                    file.lines,
                    file.tokens,
                    file.symbols.join(", ")
                ));
            }
        }
        Received::Spilled(spill) => {
            // An older message past the inbox's inline cap: its pointer, which a deref reads back.
            text.push_str(&format!(
                "\n# {} from {}: not shown ({} tokens); deref {} to read it\n",
                spill.kind,
                spill.from,
                spill.tokens,
                spill.pointer()
            ));
        }
        Received::Recalled(engram) => text.push_str(&format!("\n# Recalled\n{}\n", engram_line(engram))),
        // The note of a cut recall answer is not shown: the committed recordings were made from prompts without it,
        // and showing it changes every prompt after a cut recall.
        Received::RecalledMore(_) => {}
        // What pointers hold is shown in the catalogue that asked for it ([`catalogue_line`]).
        Received::Described(_) => {}
        Received::Delivered(Delivered::Brief(brief)) => {
            text.push_str(&format!("\n# Brief from {}\n", brief.from));
            for (lines, label) in
                [(&brief.what_matters_now, "Now"), (&brief.constraints, "Constraint"), (&brief.top_risks, "Risk")]
            {
                for line in lines {
                    text.push_str(&format!("{label}: {line}\n"));
                }
            }
            for (role, pointers) in &brief.pointer_packs {
                let list: Vec<String> = pointers.iter().filter_map(|p| plain(&p.0)).collect();
                text.push_str(&format!("Pointers for {role}: {}\n", list.join(", ")));
            }
        }
        Received::Delivered(Delivered::Message(message)) => {
            text.push_str(&format!("\n# {} from {}\n", message.payload.type_name(), message.from));
            for (field, value) in payload_fields(&message.payload) {
                text.push_str(&format!("{field}: {value}\n"));
            }
            for engram in &message.engrams {
                text.push_str(&engram_line(engram));
                text.push('\n');
            }
        }
        // A grant's terms are the runtime's to use (it presents the grant): nothing for the model to read.
        Received::Delivered(Delivered::Grant(_)) => {}
    }
}

/// The fields of a message's payload a prompt shows, in this order: task, status, gate id, reason, question.
fn payload_fields(payload: &Payload) -> Vec<(&'static str, String)> {
    let name = |value: Value| value.as_str().unwrap_or_default().to_owned();
    match payload {
        Payload::TaskClaim { task, .. } => vec![("task", task.clone())],
        Payload::TaskResult { task, status, .. } => vec![("task", task.clone()), ("status", name(json!(status)))],
        Payload::GateReport { gate_id, status, .. } => {
            vec![("status", name(json!(status))), ("gate_id", gate_id.clone())]
        }
        Payload::Escalation { reason, .. } => vec![("reason", reason.clone())],
        Payload::Question { question, .. } => vec![("question", question.clone())],
        Payload::Checkpoint { .. } => Vec::new(),
    }
}

/// `pointer` as a line of a catalogue: the pointer, then what it holds when the agent's gateway said so in a
/// `describe` answer of its inbox (the latest), else the pointer alone.
fn catalogue_line(inbox: &[Received], pointer: &str) -> String {
    let described = inbox.iter().rev().filter_map(|doc| match doc {
        Received::Described(described) => described.pointers.iter().find(|d| d.pointer == pointer),
        _ => None,
    });
    match described.into_iter().next() {
        Some(description) => description.line(),
        None => format!("- {pointer}\n"),
    }
}

/// What a catalogue of `pointers` needs first: a `describe` of the pointers no answer in the inbox covers, once a
/// turn (a refused or cut one is not asked again). What a pointer holds reaches the model through its gateway,
/// counted and capped like any answer. `None`: nothing to ask.
fn describe_first(turn: &TurnInput, pointers: &[String]) -> Option<Action> {
    if turn.done.iter().any(|d| matches!(d.action, Action::Describe(_))) {
        return None;
    }
    let asked = |pointer: &String| {
        turn.inbox.iter().any(|doc| {
            matches!(doc, Received::Described(described) if described.pointers.iter().any(|d| d.pointer == *pointer))
        })
    };
    let pointers: Vec<String> = pointers.iter().filter(|p| !asked(p)).take(MAX_DESCRIBE).cloned().collect();
    (!pointers.is_empty()).then_some(Action::Describe(DescribeAction { pointers }))
}

/// Content read through `pointer`, cut to [`MAX_DEREF_CHARS`], each line behind its number in the file when the
/// pointer says where it starts (a line span, or a whole file), so that a model can cite `#Lx-Ly` of what it read.
fn numbered(pointer: &str, content: &str) -> String {
    let mut cut: String = content.chars().take(MAX_DEREF_CHARS).collect();
    let truncated = cut.len() < content.len();
    let parsed = Pointer::parse(pointer).ok();
    let first = parsed.as_ref().and_then(|p| match (p.line_range(), p.span()) {
        (Some((start, _)), _) => Some(start),
        (None, None) if p.ty() == less_runtime::PointerType::Repo => Some(1),
        _ => None,
    });
    if let Some(first) = first {
        cut = cut.lines().enumerate().map(|(i, line)| format!("{}| {line}\n", first as usize + i)).collect();
        cut.truncate(cut.trim_end().len());
    }
    if truncated {
        cut.push_str("\n[…]");
    }
    cut
}

fn engram_line(engram: &Engram) -> String {
    let pointers: Vec<String> = engram.pointers.iter().filter_map(plain).collect();
    format!("- {}: {} [{}]", engram.kind.as_str(), engram.claim, pointers.join(", "))
}

/// A pointer as text without its digest: the form a model cites.
fn plain(pointer: &Pointer) -> Option<String> {
    Pointer::new(pointer.ty(), pointer.reference(), pointer.span()).ok().map(|p| p.to_string())
}

/// What an agent may cite: every pointer it was given or read ([`known_pointers`]), and any line span inside a
/// repository file it read (a whole file or a span of one: a narrower citation than the hit or the pack).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Citable {
    /// Pointers given or read, in text form.
    pub known: Vec<String>,
    /// What it read of repository files: the path and the lines (none: the whole file).
    pub read: Vec<(String, Option<(u32, u32)>)>,
    /// Whether its schema offers lines inside what was read ([`Reads::Numbered`]), or the pointers only.
    pub reads: Reads,
    /// The texts a quote is placed in: what the prompt shows as read ([`quote::read_texts`] of the prompt's documents,
    /// set by the caller; none from [`Citable::of`], whose inbox may hold more than the prompt shows).
    pub texts: Vec<ReadText>,
}

impl Citable {
    /// What the inbox lets the agent cite.
    pub fn of(inbox: &[Received]) -> Citable {
        let mut read: Vec<(String, Option<(u32, u32)>)> = Vec::new();
        let mut add = |text: &str| {
            if let Ok(pointer) = Pointer::parse(text)
                && pointer.ty() == less_runtime::PointerType::Repo
                && (pointer.span().is_none() || pointer.line_range().is_some())
            {
                let entry = (pointer.location().to_owned(), pointer.line_range());
                if !read.contains(&entry) {
                    read.push(entry);
                }
            }
        };
        for doc in inbox {
            match doc {
                Received::Dereferenced(read) => add(&read.pointer),
                // The baseline's search answer pasted its hits: read as well.
                Received::Searched(searched) => {
                    searched.hits.iter().filter(|hit| hit.content.is_some()).for_each(|hit| add(&hit.pointer));
                }
                _ => {}
            }
        }
        let mut known = known_pointers(inbox);
        // What a baseline's search pasted was read: citable as it stands.
        for doc in inbox {
            let Received::Searched(searched) = doc else { continue };
            for hit in searched.hits.iter().filter(|hit| hit.content.is_some()) {
                if !known.contains(&hit.pointer) {
                    known.push(hit.pointer.clone());
                }
            }
        }
        Citable { known, read, reads: Reads::AsRead, texts: Vec::new() }
    }

    /// Only these pointers (nothing read).
    pub fn pointers(known: &[String]) -> Citable {
        Citable { known: known.to_vec(), read: Vec::new(), reads: Reads::AsRead, texts: Vec::new() }
    }

    /// Whether an answer quotes what it rests on instead of naming pointers: a model choosing its own actions
    /// ([`Reads::Numbered`]) that read something.
    pub fn quotes(&self) -> bool {
        self.reads == Reads::Numbered && !self.texts.is_empty()
    }

    /// Whether `text` (parsed: `pointer`) may be cited: one of the known pointers, or lines inside what was read.
    /// Nothing known and nothing read: anything in the pointer grammar.
    pub fn allows(&self, text: &str, pointer: &Pointer) -> bool {
        if self.known.is_empty() && self.read.is_empty() || self.known.iter().any(|k| k == text) {
            return true;
        }
        let Some((from, to)) = pointer.line_range() else { return false };
        pointer.ty() == less_runtime::PointerType::Repo
            && self.read.iter().any(|(path, lines)| {
                path == pointer.location() && lines.is_none_or(|(start, end)| start <= from && to <= end)
            })
    }

    /// The JSON Schema of one cited pointer: the known ones, or a line span of a file read (the lines are checked
    /// against what was read afterwards: a schema cannot bound them).
    fn schema(&self) -> Value {
        let mut options = Vec::new();
        if !self.known.is_empty() {
            options.push(json!({"enum": self.known}));
        }
        let mut paths: Vec<String> = self.read.iter().map(|(path, _)| regex_escape(path)).collect();
        paths.dedup();
        if self.reads == Reads::Numbered && !paths.is_empty() {
            let pattern = format!("^repo:({})#L[1-9][0-9]{{0,5}}-L[1-9][0-9]{{0,5}}$", paths.join("|"));
            options.push(json!({"type": "string", "pattern": pattern}));
        }
        match options.len() {
            0 => json!({"type": "string"}),
            1 => options.remove(0),
            _ => json!({"anyOf": options}),
        }
    }
}

/// `text` with the characters a regular expression treats specially escaped.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Every pointer the agent was given (brief packs, delivered engrams) or read, in first-seen order. A search hit is
/// not among them until it is read: a pointer is cited for what it says, and a hit's preview is not that.
pub fn known_pointers(inbox: &[Received]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut known = Vec::new();
    let mut add = |text: Option<String>| {
        if let Some(text) = text
            && seen.insert(text.clone())
        {
            known.push(text);
        }
    };
    for doc in inbox {
        match doc {
            Received::Dereferenced(read) => add(Some(read.pointer.clone())),
            Received::Spilled(spill) => add(Some(spill.pointer())),
            Received::Recalled(engram) => engram.pointers.iter().for_each(|p| add(plain(p))),
            _ => {}
        }
        match doc.delivered() {
            Some(Delivered::Brief(brief)) => brief.pointer_packs.values().flatten().for_each(|p| add(plain(&p.0))),
            Some(Delivered::Message(message)) => {
                message.engrams.iter().flat_map(|e| &e.pointers).for_each(|p| add(plain(p)));
            }
            Some(Delivered::Grant(_)) | None => {}
        }
    }
    known
}

mod roles;

mod act;

mod output;
mod quote;
pub use quote::ReadText;

#[cfg(test)]
mod tests;
