//! A worker whose model chooses its own actions ([`less_runtime::LlmSpec::choose_actions`]). It works on one
//! question at a time: its first action on a question is a search of the workspace index with the question's own
//! words; then its model chooses, one JSON action per completion from a tagged union, to read hits it holds, search
//! or list again with other words, or answer — with only that question, what its actions on it returned, and its
//! children's reports in the prompt. The answer is the checked report of [`LlmAgent::report_on`] for that question
//! (cited lines must lie inside what it read), sent before the next question starts. Nothing authored reaches it:
//! its questions, its budget, and what its actions returned. What a number decides, the runtime still decides (a
//! read over budget becomes a request to the parent, a granted request is read with its grant).

use less_runtime::run::{Action, Delivered, DerefAction, Done, ListAction, Outcome, Received, SearchAction, TurnInput};
use less_runtime::{Budget, ReportStep};
use serde_json::{Value, json};

use super::roles::{SEARCH_K, grant_follow_up, unread};
use super::{LlmAgent, describe};

/// Actions a worker takes on one question before it must answer it: its search, then what its model chooses.
pub(crate) const MAX_ACTIONS_PER_QUESTION: usize = 5;
/// Searches (its own first one included) and reads it may spend on one question.
const MAX_SEARCHES: usize = 3;
const MAX_READS: usize = 2;
/// Characters of a search query or a list pattern.
const MAX_QUERY_CHARS: usize = 120;
/// Pointers one read may name.
const MAX_READ: usize = 2;

/// One action the model chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    Search(String),
    List(String),
    Read(Vec<String>),
    Answer,
}

/// The question a worker works on, and where its work on it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Focus {
    /// The task id.
    pub(crate) task: String,
    /// The inbox's length when work on it began: what arrived after it is this question's (an inbox only grows).
    pub(crate) from: usize,
    /// The turn's action count when work on it began.
    pub(crate) start: usize,
}

impl Focus {
    /// The documents a prompt about this question shows: what arrived since work on it began, and the reports and
    /// recalled engrams delivered before (children's findings; never another question's hits or reads).
    pub(crate) fn docs(&self, inbox: &[Received]) -> Vec<Received> {
        let findings = |doc: &Received| match doc {
            Received::Delivered(Delivered::Message(message)) => !message.engrams.is_empty(),
            Received::Recalled(_) => true,
            _ => false,
        };
        inbox
            .iter()
            .enumerate()
            .filter(|(i, doc)| *i >= self.from || findings(doc))
            .map(|(_, doc)| doc.clone())
            .collect()
    }
}

impl LlmAgent {
    /// The next action of a report turn whose unanswered questions are `questions`: work on the first.
    pub(super) async fn act(&mut self, turn: &TurnInput, step: &ReportStep, questions: &[(String, String)]) -> Action {
        if let Some(action) = turn.last().and_then(grant_follow_up) {
            return action;
        }
        let Some((task, question)) = questions.first().cloned() else { return Action::Finish };
        if self.focus.as_ref().is_none_or(|f| f.task != task) {
            self.focus = Some(Focus { task: task.clone(), from: turn.inbox.len(), start: turn.done.len() });
        }
        let focus = self.focus.clone().expect("set above");
        let mine = &turn.done[focus.start.min(turn.done.len())..];
        let searches = mine.iter().filter(|d| matches!(d.action, Action::Search(_))).count();
        let reads =
            mine.iter().filter(|d| matches!((&d.action, &d.outcome), (Action::Deref(_), Outcome::Done))).count();
        // Its own first step on a question: the question's words, which rank the chunks that share them.
        if searches == 0 && mine.is_empty() {
            let query: String = question.chars().take(MAX_QUERY_CHARS * 2).collect();
            return Action::Search(SearchAction { query, k: SEARCH_K });
        }
        // Room for the answer and its one resend, and the reports of the questions after this one.
        let left = turn.limit.saturating_sub(turn.done.len());
        if mine.len() >= MAX_ACTIONS_PER_QUESTION || left <= 2 * questions.len() + 1 || reads >= MAX_READS {
            return self.answer(turn, step, &task, &question).await;
        }
        let docs = focus.docs(&turn.inbox);
        let unread = unread(&docs);
        let (system, user) = self.action_prompt(turn, &question, &docs, &unread);
        let schema = action_schema(&unread, searches < MAX_SEARCHES);
        let choice = match self.ask_json(system, user, "action", schema).await {
            Ok(value) => read_choice(&value, &unread),
            Err(err) => {
                tracing::warn!(target: "less.llm", "{}: could not choose an action: {}", turn.spec.id, err.code());
                Choice::Answer
            }
        };
        // An action it took already would bring the same again: the best hit it has not read is read instead, or
        // with none left, it answers.
        let repeated = mine.iter().any(|d| match (&d.action, &choice) {
            (Action::Search(s), Choice::Search(q)) => s.query.eq_ignore_ascii_case(q),
            (Action::List(l), Choice::List(p)) => l.pattern == *p,
            _ => false,
        }) || matches!(choice, Choice::Search(_)) && searches >= MAX_SEARCHES;
        let choice = match choice {
            _ if repeated => unread.first().map_or(Choice::Answer, |best| Choice::Read(vec![best.clone()])),
            // Nothing read yet and hits to read: answering now would cite nothing; the best hit is read first.
            Choice::Answer if reads == 0 && !unread.is_empty() && !holds_pasted(&docs) => {
                Choice::Read(vec![unread[0].clone()])
            }
            other => other,
        };
        match choice {
            Choice::Search(query) => Action::Search(SearchAction { query, k: SEARCH_K }),
            Choice::List(pattern) => Action::List(ListAction { pattern }),
            Choice::Read(pointers) => Action::Deref(DerefAction {
                pointers,
                reason: "my model chose it to answer my question".to_owned(),
                intended_use: "cite the lines that answer".to_owned(),
                grant: None,
            }),
            Choice::Answer => self.answer(turn, step, &task, &question).await,
        }
    }

    /// The report answering one question, from what the work on it found.
    pub(super) async fn answer(&mut self, turn: &TurnInput, step: &ReportStep, task: &str, question: &str) -> Action {
        self.report_on(turn, step, vec![(task.to_owned(), question.to_owned())]).await
    }

    /// The prompt of one choice: the question, the budget and what it used, what the work on the question holds
    /// (search hits, outlines, what it read, with line numbers, children's reports), and its actions so far.
    fn action_prompt(
        &self,
        turn: &TurnInput,
        question: &str,
        docs: &[Received],
        unread: &[String],
    ) -> (String, String) {
        let system = format!(
            "You are {} (role {}) in a hierarchy of agents. You answer a question from the files of a workspace, \
             which you find yourself. Each reply is one JSON action: `read` pointers you found (this costs budget; \
             you get the lines, numbered), `search` the workspace index again (you get pointers to code with a \
             one-line preview each), `list` the files under a path (with their top-level symbols), or `answer` when \
             what you read answers the question. Search with words the code itself would contain (names of \
             functions, types, fields, settings), not with the question's wording.",
            turn.spec.id, turn.spec.role
        );
        let mut user = format!("# Your question\n{question}\n");
        if let Some(budget) = self.seat.as_ref().map(|s| s.budget) {
            user.push_str(&budget_lines(&budget, turn));
        }
        user.push_str("\n# What you found\n");
        for doc in docs {
            describe(doc, &mut user, super::Reads::Numbered);
        }
        let start = self.focus.as_ref().map_or(0, |f| f.start).min(turn.done.len());
        user.push_str("\n# Your actions on this question\n");
        for done in &turn.done[start..] {
            user.push_str(&format!("- {}\n", done_line(done)));
        }
        user.push_str(if unread.is_empty() {
            "\n# Task\nChoose your next action: answer if what you found shows the answer, else search or list with \
             other words (names the code would use).\n"
        } else {
            "\n# Task\nChoose your next action: read the hits most likely to hold the answer (their previews say \
             what they hold), search or list with other words, or answer if what you read already shows it.\n"
        });
        (system, user)
    }
}

/// Whether a search answer among `docs` pasted its hits' content (the baseline): what it holds is read already.
fn holds_pasted(docs: &[Received]) -> bool {
    docs.iter()
        .any(|doc| matches!(doc, Received::Searched(searched) if searched.hits.iter().any(|hit| hit.content.is_some())))
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

/// The tagged union of the actions a worker may choose: `read` first when it holds hits it has not read, `search`
/// while it may search again, `list`, `answer`.
pub(crate) fn action_schema(unread: &[String], may_search: bool) -> Value {
    let text = json!({"type": "string", "minLength": 2, "maxLength": MAX_QUERY_CHARS});
    let mut choices = Vec::new();
    if !unread.is_empty() {
        choices.push(json!({"type": "object", "properties": {"action": {"enum": ["read"]},
            "pointers": {"type": "array", "minItems": 1, "maxItems": MAX_READ.min(unread.len()), "items": {"enum": unread}}},
            "required": ["action", "pointers"], "additionalProperties": false}));
    }
    if may_search {
        choices.push(json!({"type": "object", "properties": {"action": {"enum": ["search"]}, "query": text},
               "required": ["action", "query"], "additionalProperties": false}));
    }
    choices.push(json!({"type": "object", "properties": {"action": {"enum": ["list"]}, "pattern": text},
           "required": ["action", "pattern"], "additionalProperties": false}));
    choices.push(json!({"type": "object", "properties": {"action": {"enum": ["answer"]}},
                        "required": ["action"], "additionalProperties": false}));
    json!({"anyOf": choices})
}

/// The choice a checked answer makes (what the schema cannot hold — a read of nothing it holds — is an answer).
pub(crate) fn read_choice(value: &Value, unread: &[String]) -> Choice {
    let choice = super::output::Lenient::<super::output::ActionChoice>::of(value);
    fn text(field: &super::output::Field<String>) -> &str {
        field.get().map_or("", |t| t.trim())
    }
    match choice.action.get().map(String::as_str) {
        Some("search") if !text(&choice.query).is_empty() => {
            Choice::Search(text(&choice.query).chars().take(MAX_QUERY_CHARS).collect())
        }
        Some("list") => Choice::List(text(&choice.pattern).chars().take(MAX_QUERY_CHARS).collect()),
        Some("read") => {
            let mut pointers: Vec<String> = Vec::new();
            for p in super::output::texts(&choice.pointers) {
                if unread.iter().any(|u| u == p) && !pointers.iter().any(|c| c == p) {
                    pointers.push(p.to_owned());
                }
            }
            if pointers.is_empty() { Choice::Answer } else { Choice::Read(pointers) }
        }
        _ => Choice::Answer,
    }
}
