//! The LLM agent's rules with a model that answers from a list: prompt from the inbox only, schema from the engram
//! schema, corrective retry, escalation on unusable output, resend after a refusal with the tightened schema.

use std::sync::Mutex;

use less_runtime::{AgentSpec, ReportStep, TaskStatus};

use super::*;
use crate::provider::{Completion, ModelFuture, Usage};

/// Answers with the texts given, in order; keeps the requests.
struct Answers {
    texts: Mutex<Vec<String>>,
    seen: Mutex<Vec<CompletionRequest>>,
}

impl Answers {
    fn new(texts: &[&str]) -> Arc<Answers> {
        Arc::new(Answers {
            texts: Mutex::new(texts.iter().rev().map(|t| (*t).to_owned()).collect()),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<CompletionRequest> {
        self.seen.lock().expect("lock").clone()
    }
}

impl CompletionModel for Answers {
    fn complete<'a>(&'a self, request: &'a CompletionRequest) -> ModelFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            self.seen.lock().expect("lock").push(request.clone());
            match self.texts.lock().expect("lock").pop() {
                Some(text) => Ok(Completion {
                    text,
                    finish_reason: Some("stop".to_owned()),
                    usage: Usage { prompt_tokens: 10, completion_tokens: 5 },
                    attempts: 1,
                }),
                None => Err(LlmError::Server { status: 500, attempts: 1, body: "no more answers".to_owned() }),
            }
        })
    }
}

const DIFF: &str = "diff:main..pr-142#src/store.rs";
const SPAN: &str = "repo:src/store.rs#L53-L55";

fn input() -> TurnInput {
    let step = ReportStep {
        agent: "rev".to_owned(),
        to: None,
        kind: ReportKind::TaskResult { task: "review".to_owned(), status: TaskStatus::Fail, criteria: vec![1] },
        engrams: vec![EngramSpec {
            kind: EngramKind::Risk,
            claim: "SCRIPTED CLAIM THE MODEL MUST NOT SEE".to_owned(),
            pointers: vec![SPAN.to_owned()],
            confidence: 0.9,
            ttl: "P7D".to_owned(),
            scope: Scope::Run,
            tags: Vec::new(),
        }],
        summary: "SCRIPTED SUMMARY".to_owned(),
        misbehave: None,
        grant: None,
    };
    let brief = json!({
        "brief_id": "lead-m1", "from": "lead", "what_matters_now": ["Check the lock rules."],
        "constraints": ["Cite spans."], "top_risks": [], "pointer_packs": {"reviewer": [DIFF]}, "budgets": {}, "grants": [],
    });
    let read =
        json!({"dereferenced": {"pointer": SPAN, "content": "let guard = self.map.lock();\nbackend.save().await;"}});
    TurnInput {
        step: Step::Report(Box::new(step)),
        attempt: 0,
        spec: AgentSpec {
            id: "rev".to_owned(),
            role: "reviewer".to_owned(),
            parent: Some("lead".to_owned()),
            kind: less_runtime::AgentKind::Llm,
            llm: None,
            turn_limit: None,
        },
        inbox: vec![Arc::new(brief), Arc::new(read)],
        mode: WireMode::Less,
        done: Vec::new(),
        limit: 12,
        now: "2026-11-23T00:00:00Z".to_owned(),
    }
}

/// The first action of a turn.
async fn first(agent: &mut LlmAgent, input: &TurnInput) -> Action {
    agent.next(input).await
}

fn good(n: usize) -> String {
    let engrams: Vec<Value> = (0..n)
        .map(|i| json!({"kind": "risk", "claim": format!("The guard is held across the await ({i})."), "pointers": [DIFF, SPAN], "confidence": 0.9}))
        .collect();
    json!({"summary": "Guard held across await.", "engrams": engrams}).to_string()
}

fn agent(model: Arc<Answers>) -> LlmAgent {
    LlmAgent::new("rev", model, Sampling { temperature: 0.0, max_tokens: 256 })
}

fn report_of(actions: &[Action]) -> &ReportAction {
    match actions {
        [Action::Report(report)] => report,
        other => panic!("expected one report, got {other:?}"),
    }
}

#[test]
fn schema_takes_kinds_and_bounds_from_the_engram_schema() {
    let schema = report_schema(&[DIFF.to_owned()], 3, 500);
    let kinds = schema.pointer("/properties/engrams/items/properties/kind/enum").expect("kind enum");
    assert!(kinds.as_array().expect("array").contains(&json!("risk")));
    assert_eq!(schema.pointer("/properties/engrams/maxItems"), Some(&json!(3)));
    assert_eq!(schema.pointer("/properties/engrams/items/properties/confidence/enum"), Some(&json!([0.5, 0.7, 0.9])));
    assert_eq!(schema.pointer("/properties/engrams/items/properties/pointers/items/enum/0"), Some(&json!(DIFF)));
}

#[test]
fn known_pointers_come_from_packs_and_reads() {
    assert_eq!(known_pointers(&input().inbox), vec![DIFF.to_owned(), SPAN.to_owned()]);
}

#[tokio::test]
async fn report_comes_from_the_model_and_the_prompt_from_the_inbox_only() {
    let model = Answers::new(&[&good(2)]);
    let mut agent = agent(model.clone());
    let input = input();
    let actions = [first(&mut agent, &input).await];
    let report = report_of(&actions);
    assert_eq!(report.engrams.len(), 2);
    assert_eq!(report.engrams[0].pointers, vec![DIFF.to_owned(), SPAN.to_owned()]);
    assert_eq!(report.summary, "Guard held across await.");
    let seen = model.seen();
    let prompt = &seen[0].messages[0].content;
    assert!(prompt.contains("Check the lock rules.") && prompt.contains("backend.save().await"), "{prompt}");
    assert!(!prompt.contains("SCRIPTED"), "the step's scripted answer leaked into the prompt: {prompt}");
    assert!(seen[0].schema.is_some());
    let spent = agent.take_usage();
    assert_eq!((spent.calls, spent.prompt_tokens, spent.completion_tokens), (1, 10, 5));
    assert_eq!(agent.take_usage(), ModelUsage::default(), "usage is handed over once");
}

#[tokio::test]
async fn unusable_output_is_retried_once_with_the_error() {
    let unknown = json!({"summary": "s", "engrams": [{"kind": "risk", "claim": "c", "pointers": ["repo:other.rs#L1-L2"], "confidence": 0.5}]});
    let model = Answers::new(&[&unknown.to_string(), &good(1)]);
    let mut agent = agent(model.clone());
    let actions = [first(&mut agent, &input()).await];
    assert_eq!(report_of(&actions).engrams.len(), 1);
    let seen = model.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].messages.last().expect("turn").content.contains("LLM_OUTPUT_INVALID"));
    // The thrown-away answer is accounted for: two calls, one unusable, and why.
    let spent = agent.take_usage();
    assert_eq!(spent.calls, 2);
    assert_eq!(spent.unusable.len(), 1, "{:?}", spent.unusable);
    assert!(spent.unusable[0].starts_with("LLM_OUTPUT_INVALID") && spent.unusable[0].contains("repo:other.rs"));
}

#[tokio::test]
async fn output_unusable_after_the_retry_becomes_an_escalation() {
    let model = Answers::new(&["not json at all", "{\"summary\": 3}"]);
    let mut agent = agent(model);
    let actions = [first(&mut agent, &input()).await];
    match &actions[0] {
        Action::Escalate { reason, .. } => assert!(reason.starts_with("LLM_OUTPUT_INVALID"), "{reason}"),
        other => panic!("expected an escalation, got {other:?}"),
    }
}

#[tokio::test]
async fn a_dead_server_becomes_an_escalation() {
    let mut agent = agent(Answers::new(&[]));
    let actions = [first(&mut agent, &input()).await];
    assert!(matches!(&actions[0], Action::Escalate { reason, .. } if reason.starts_with("LLM_SERVER_ERROR")));
}

#[tokio::test]
async fn a_refusal_goes_back_to_the_model_with_a_tightened_schema() {
    let model = Answers::new(&[&good(2), &good(1)]);
    let mut agent = agent(model.clone());
    let actions = [first(&mut agent, &input()).await];
    let violation =
        Violation::new(ErrorCode::BudgetExceeded, "/engrams", "2 engrams; the receiver accepts at most 1".to_owned());
    let mut turn = input();
    turn.done.push(Done { action: actions[0].clone(), outcome: Outcome::Refused(violation) });
    let resend = agent.next(&turn).await;
    assert_eq!(report_of(std::slice::from_ref(&resend)).engrams.len(), 1);
    let seen = model.seen();
    let last = &seen[1];
    assert_eq!(last.messages.len(), 3, "task, the refused answer, the refusal");
    assert!(last.messages[2].content.contains("LESS_BUDGET_EXCEEDED at /engrams"), "{}", last.messages[2].content);
    let schema = &last.schema.as_ref().expect("schema").schema;
    assert_eq!(schema.pointer("/properties/engrams/maxItems"), Some(&json!(1)));
}

#[tokio::test]
async fn scripted_steps_other_than_reports_are_carried_out_as_written() {
    let mut agent = agent(Answers::new(&[]));
    let mut input = input();
    input.step = Step::Promote { agent: "rev".to_owned(), subject: "s".to_owned(), to: Scope::Project };
    assert!(matches!(first(&mut agent, &input).await, Action::Promote { .. }));
    input
        .done
        .push(Done { action: Action::Promote { subject: "s".to_owned(), to: Scope::Project }, outcome: Outcome::Done });
    assert!(matches!(agent.next(&input).await, Action::Finish), "one step, one action");
}

#[tokio::test]
async fn in_the_verbatim_baseline_the_prompt_is_what_was_sent() {
    let model = Answers::new(&[&good(1)]);
    let mut agent = agent(model.clone());
    let mut input = input();
    input.mode = WireMode::Verbatim;
    let brief = (*input.inbox[0]).clone();
    let wire = "Brief from lead to rev.\n\n# File src/store.rs\npub struct Store { PASTED WHOLE FILE }";
    input.inbox[0] = Arc::new(json!({"verbatim": wire, "doc": brief}));
    assert_eq!(known_pointers(&input.inbox), vec![DIFF.to_owned(), SPAN.to_owned()]);
    first(&mut agent, &input).await;
    let prompt = model.seen()[0].messages[0].content.clone();
    assert!(prompt.contains("PASTED WHOLE FILE"), "{prompt}");
    assert!(!prompt.contains("Check the lock rules."), "the document is not restated beside its wire text: {prompt}");
}
