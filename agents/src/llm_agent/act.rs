//! A worker whose model chooses its own actions ([`less_runtime::LlmSpec::choose_actions`]): each completion is one
//! JSON action, picked from a tagged union — search the workspace index, list files, read pointers it found, or
//! answer — with what came of its earlier actions in the prompt, until it answers or reaches its own action limit.
//! Nothing authored reaches it: its questions, its budget, and what its actions returned. What a number decides,
//! the runtime still decides (a read over budget becomes a request to the parent, a granted request is read with
//! its grant), and the answer is the checked report of [`LlmAgent::report`].

use less_runtime::run::{Action, DerefAction, Done, ListAction, Outcome, SearchAction, TurnInput};
use less_runtime::{Budget, ReportStep};
use serde_json::{Value, json};

use super::roles::{SEARCH_K, grant_follow_up, unread};
use super::{LlmAgent, describe};

/// Actions a worker's model may choose in one turn before it must answer (the turn's own limit may be lower).
pub(crate) const MAX_OWN_ACTIONS: usize = 8;
/// Characters of a search query or a list pattern.
const MAX_QUERY_CHARS: usize = 120;
/// Pointers one read may name.
const MAX_READ: usize = 4;
/// Inline tokens one answer takes in a message, about (a claim, two pointers with digests, provenance): a message
/// answers as many questions as the receiver's budget holds at this rate, the rest in the next.
const TOKENS_PER_ANSWER: u32 = 300;

/// One action the model chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    Search(String),
    List(String),
    Read(Vec<String>),
    Answer,
}

impl LlmAgent {
    /// The next action of a report turn answering `questions`, chosen by the model.
    pub(super) async fn act(&mut self, turn: &TurnInput, step: &ReportStep, questions: &[(String, String)]) -> Action {
        if let Some(action) = turn.last().and_then(grant_follow_up) {
            return action;
        }
        let own = turn.done.len();
        if own >= MAX_OWN_ACTIONS.min(turn.limit.saturating_sub(3)) {
            return self.answer(turn, step, questions).await;
        }
        let unread = unread(&turn.inbox);
        let (system, user) = self.action_prompt(turn, questions, &unread);
        let choice = match self.ask_json(system, user, "action", action_schema(&unread)).await {
            Ok(value) => read_choice(&value, &unread),
            Err(err) => {
                tracing::warn!(target: "less.llm", "{}: could not choose an action: {}", turn.spec.id, err.code());
                Choice::Answer
            }
        };
        // An action it took already this turn would answer the same again: it answers instead.
        let repeated = turn.done.iter().any(|d| match (&d.action, &choice) {
            (Action::Search(s), Choice::Search(q)) => s.query.eq_ignore_ascii_case(q),
            (Action::List(l), Choice::List(p)) => l.pattern == *p,
            _ => false,
        });
        match choice {
            _ if repeated => self.answer(turn, step, questions).await,
            Choice::Search(query) => Action::Search(SearchAction { query, k: SEARCH_K }),
            Choice::List(pattern) => Action::List(ListAction { pattern }),
            Choice::Read(pointers) => Action::Deref(DerefAction {
                pointers,
                reason: "my model chose it to answer my questions".to_owned(),
                intended_use: "cite the lines that answer".to_owned(),
                grant: None,
            }),
            Choice::Answer => self.answer(turn, step, questions).await,
        }
    }

    /// The report answering the first of `questions` that a message to the parent holds (its budget at
    /// [`TOKENS_PER_ANSWER`] each); the others follow in the next reports of the turn.
    pub(super) async fn answer(
        &mut self,
        turn: &TurnInput,
        step: &ReportStep,
        questions: &[(String, String)],
    ) -> Action {
        let parent_role =
            turn.spec.parent.as_deref().and_then(|p| self.scenario.as_ref()?.agent(p)).map(|a| a.role.clone());
        let per_message = match (&self.scenario, parent_role) {
            (Some(scenario), Some(role)) => {
                (scenario.budgets.of(&role).max_inline_tokens / TOKENS_PER_ANSWER).max(1) as usize
            }
            _ => questions.len().max(1),
        };
        self.report_on(turn, step, questions.iter().take(per_message).cloned().collect()).await
    }

    /// The prompt of one choice: the questions, the budget and what it used, what the agent holds (briefs, search
    /// hits, outlines, what it read, with line numbers), and this turn's actions with their outcomes.
    fn action_prompt(&self, turn: &TurnInput, questions: &[(String, String)], unread: &[String]) -> (String, String) {
        let system = format!(
            "You are {} (role {}) in a hierarchy of agents. You answer your questions from the files of a workspace, \
             which you find yourself. Each reply is one JSON action: `search` the workspace index (you get pointers to \
             code with a one-line preview each), `list` the files under a path (with their top-level symbols), `read` \
             pointers you found (this costs budget; you get the lines, numbered), or `answer` when what you read \
             answers your questions. Search with words the code itself would contain (names of functions, types, \
             fields), not with the question's wording.",
            turn.spec.id, turn.spec.role
        );
        // The questions without their ids: a small model searches for an id as if it were a word of the code.
        let mut user = String::from("# Your questions\n");
        for (_, question) in questions {
            user.push_str(&format!("- {question}\n"));
        }
        if let Some(budget) = self.scenario.as_ref().map(|s| s.budgets.of(&turn.spec.role)) {
            user.push_str(&budget_lines(&budget, turn));
        }
        user.push_str("\n# What you hold\n");
        for doc in &turn.inbox {
            describe(doc, &mut user);
        }
        if !turn.done.is_empty() {
            user.push_str("\n# Your actions so far this turn\n");
            for done in &turn.done {
                user.push_str(&format!("- {}\n", done_line(done)));
            }
        }
        user.push_str(if unread.is_empty() {
            "\n# Task\nChoose your next action: search or list to find the code that answers, or answer.\n"
        } else {
            "\n# Task\nChoose your next action: read the pointers most likely to answer (their previews say what \
             they hold), search or list again with other words, or answer if what you read already answers.\n"
        });
        (system, user)
    }
}

/// `questions` that no report of this turn delivered an answer to.
pub(crate) fn unanswered(questions: &[(String, String)], turn: &TurnInput) -> Vec<(String, String)> {
    let answered: Vec<&str> = turn
        .done
        .iter()
        .filter(|d| d.outcome == Outcome::Done)
        .filter_map(|d| match &d.action {
            Action::Report(report) => Some(report.engrams.iter().filter_map(|e| e.task.as_deref())),
            _ => None,
        })
        .flatten()
        .collect();
    questions.iter().filter(|(id, _)| !answered.contains(&id.as_str())).cloned().collect()
}

/// The budget's reading limits and what this turn used of them.
fn budget_lines(budget: &Budget, turn: &TurnInput) -> String {
    let (mut spans, mut reads) = (0usize, 0usize);
    for done in &turn.done {
        if let (Action::Deref(deref), Outcome::Done) = (&done.action, &done.outcome) {
            spans += deref.pointers.len();
            reads += 1;
        }
    }
    format!(
        "\n# Your budget\nReading: at most {} code spans and {} tokens in all this turn ({} reads of {} spans so far); \
         every message at most {} tokens.\n",
        budget.max_repo_spans, budget.max_deref_tokens_total, reads, spans, budget.max_inline_tokens
    )
}

/// One line on an action of this turn and what came of it.
fn done_line(done: &Done) -> String {
    let action = match &done.action {
        Action::Search(search) => format!("search {:?}", search.query),
        Action::List(list) => format!("list {:?}", list.pattern),
        Action::Deref(deref) => format!("read {}", deref.pointers.join(", ")),
        Action::AskGrant(ask) => format!("asked the parent to read {}", ask.pointers.join(", ")),
        other => other.name().to_owned(),
    };
    let outcome = match &done.outcome {
        Outcome::Done => "done (what came of it is above)".to_owned(),
        Outcome::Refused(violation) => format!("refused: {} {}", violation.code, violation.message),
        Outcome::Granted { grant_id } => format!("granted ({grant_id})"),
        Outcome::Denied { reason } => format!("denied: {reason}"),
    };
    format!("{action}: {outcome}")
}

/// The tagged union of the actions a worker may choose; `read` only when it holds pointers it has not read.
pub(crate) fn action_schema(unread: &[String]) -> Value {
    let text = json!({"type": "string", "minLength": 2, "maxLength": MAX_QUERY_CHARS});
    let mut choices = vec![
        json!({"type": "object", "properties": {"action": {"enum": ["search"]}, "query": text},
               "required": ["action", "query"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"action": {"enum": ["list"]}, "pattern": text},
               "required": ["action", "pattern"], "additionalProperties": false}),
    ];
    if !unread.is_empty() {
        choices.push(json!({"type": "object", "properties": {"action": {"enum": ["read"]},
            "pointers": {"type": "array", "minItems": 1, "maxItems": MAX_READ.min(unread.len()), "items": {"enum": unread}}},
            "required": ["action", "pointers"], "additionalProperties": false}));
    }
    choices.push(json!({"type": "object", "properties": {"action": {"enum": ["answer"]}},
                        "required": ["action"], "additionalProperties": false}));
    json!({"anyOf": choices})
}

/// The choice a checked answer makes (what the schema cannot hold — a read of nothing it holds — is an answer).
pub(crate) fn read_choice(value: &Value, unread: &[String]) -> Choice {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::trim).unwrap_or_default();
    match value.get("action").and_then(Value::as_str) {
        Some("search") if !text("query").is_empty() => {
            Choice::Search(text("query").chars().take(MAX_QUERY_CHARS).collect())
        }
        Some("list") => Choice::List(text("pattern").chars().take(MAX_QUERY_CHARS).collect()),
        Some("read") => {
            let mut pointers: Vec<String> = Vec::new();
            for p in value.get("pointers").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if unread.iter().any(|u| u == p) && !pointers.iter().any(|c| c == p) {
                    pointers.push(p.to_owned());
                }
            }
            if pointers.is_empty() { Choice::Answer } else { Choice::Read(pointers) }
        }
        _ => Choice::Answer,
    }
}
