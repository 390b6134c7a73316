//! Actor-level tests: a gateway in a real run context (resolver, ledger, directory), driven message by message.

use std::path::Path;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use ractor::Actor;
use serde_json::{Value, json};

use super::*;
use crate::run::agent::{ActRequest, Agent, AgentFactory, AgentFuture, Seat, TurnInput};
use crate::run::gateway::{GatewayActor, GatewayArgs, GatewayMsg};
use crate::run::ledger::{Event, LedgerBook, TokenLedger, TokenLedgerArgs, TokenLedgerMsg};
use crate::run::resolver_actor::{ResolverActor, ResolverArgs, ResolverBook};
use crate::run::wire::{Action, DerefAction, DescribeAction, Document, Draft, Envelope, EnvelopeKind};
use crate::{Pointer, Resolver};
use less_contract::{ErrorCode, Scenario, WireMode};

/// Records what the agent saw in its inbox at each turn (a test double for the logic around the gateway).
struct Recorder(Arc<Mutex<Vec<Vec<Received>>>>);

impl Agent for Recorder {
    fn next<'a>(&'a mut self, input: &'a TurnInput) -> AgentFuture<'a, Action> {
        self.0.lock().expect("lock").push(input.inbox.clone());
        Box::pin(async { Action::Finish })
    }
}

struct RecorderFactory(Arc<Mutex<Vec<Vec<Received>>>>);

impl AgentFactory for RecorderFactory {
    fn make(&self, _seat: &Seat) -> Box<dyn Agent> {
        Box::new(Recorder(self.0.clone()))
    }
}

/// A gateway in a real run context (also what the enforcement core's tests drive a run's side with).
pub(crate) struct Harness {
    pub(crate) ctx: Arc<RunContext>,
    seen: Arc<Mutex<Vec<Vec<Received>>>>,
    pub(crate) _workspace: tempfile::TempDir,
}

pub(crate) async fn harness(budget_toml: &str) -> Harness {
    harness_in(WireMode::Less, budget_toml).await
}

async fn harness_in(mode: WireMode, budget_toml: &str) -> Harness {
    harness_with(mode, budget_toml, "", DEFAULT_INBOX_CAP).await
}

/// A harness whose lead has `lead_toml` added to its `[[agents]]` table, with inboxes of `inbox_cap`.
async fn harness_with(mode: WireMode, budget_toml: &str, lead_toml: &str, inbox_cap: usize) -> Harness {
    let workspace = tempfile::tempdir().expect("tempdir");
    std::fs::write(workspace.path().join("a.rs"), "fn a() {}\n").expect("write");
    let toml = format!(
        "name = \"h\"\n{budget_toml}\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n{lead_toml}\n[[agents]]\nid = \"dev\"\nrole = \"dev\"\nparent = \"lead\"\n\
         [[steps]]\naction = \"query\"\nagent = \"lead\"\ntext = \"x\"\n"
    );
    let scenario = Arc::new(Scenario::from_toml(&toml, workspace.path()).expect("scenario"));
    let args =
        ResolverArgs { resolver: Resolver::new(workspace.path()).expect("resolver"), sam_path: None, keep: false };
    let (resolver, _) = Actor::spawn(None, ResolverActor, ResolverBook::new(args)).await.expect("resolver actor");
    let (ledger, _) = Actor::spawn(
        None,
        TokenLedger,
        LedgerBook::new(TokenLedgerArgs {
            out_dir: None,
            trace: None,
            run_id: "h".to_owned(),
            wire: false,
            identities: Default::default(),
        }),
    )
    .await
    .expect("ledger");
    let memory_args =
        crate::memory::MemoryArgs::new(workspace.path().join(".memory"), crate::memory::system_clock(), false);
    let (memory, _) = Actor::spawn(None, crate::memory::MemoryActor, memory_args).await.expect("memory");
    let summarizer_args = crate::dag::actor::SummarizerArgs {
        dir: workspace.path().join(".memory"),
        condenser: crate::dag::Condenser::new(crate::dag::DagConfig::default(), Arc::new(crate::dag::Extractive)),
        clock: crate::memory::system_clock(),
        index: false,
    };
    let (summarizers, _) =
        Actor::spawn(None, crate::dag::actor::SummarizerSupervisor, summarizer_args).await.expect("summarizers");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let index = crate::workspace::SharedIndex::new(&scenario.workspace, None);
    let ctx = Arc::new(RunContext {
        run_id: format!("h{}", rand_suffix()),
        session_base: format!("h{}", rand_suffix()),
        mode,
        scenario,
        secret: [9u8; 32],
        directory: Directory::default(),
        // Messages, as on a worker node: the harness spawns each gateway itself.
        resolver: Slot::new(resolver),
        ledger: Slot::new(ledger),
        books: None,
        services: services::Services::Local {
            memory: Slot::new(memory),
            summarizers: Slot::new(summarizers),
            archive_queue: Arc::new(crate::dag::actor::ArchiveQueue::new("demo", "h")),
            n_msgs: Default::default(),
            coord: Arc::new(crate::coord::Store::new(std::env::temp_dir().join("lessrt-unused-coord.sqlite"))),
        },
        factory: Arc::new(RecorderFactory(seen.clone())),
        clock: None,
        inbox_cap,
        workspace: index,
        ordering: Default::default(),
    });
    for id in ["lead", "dev"] {
        let args = GatewayArgs { ctx: ctx.clone(), agent_id: id.to_owned(), restore: None };
        let (gateway, _) = Actor::spawn(None, GatewayActor, args).await.expect("gateway");
        ctx.directory.insert(id.to_owned(), gateway);
    }
    Harness { ctx, seen, _workspace: workspace }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn message(idx: usize, body: &str, n_engrams: usize, code: bool) -> Envelope {
    let engram = |i: usize| {
        json!({
            "id": format!("eg_{i}"), "kind": "fact", "claim": format!("claim {i}"),
            "pointers": [{"type": "repo", "ref": "a.rs"}], "confidence": 0.5, "ttl": "P1D", "scope": "run",
            "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "dev", "source": "agent"}
        })
    };
    let mut doc = json!({"type": "question", "from": "dev", "msg_id": format!("q{idx}"), "question": "why?"});
    if n_engrams > 0 {
        doc["engrams"] = Value::Array((0..n_engrams).map(engram).collect());
    }
    if !body.is_empty() {
        doc["body"] = Value::String(body.to_owned());
    }
    let wire = doc.to_string();
    Envelope {
        from: "dev".into(),
        to: "lead".into(),
        msg_id: format!("q{idx}"),
        kind: EnvelopeKind::Message,
        doc: Draft::Raw(doc),
        wire,
        inline_code: code.then(|| body.to_owned()),
        code_sources: vec!["repo:a.rs".to_owned()],
        prose: None,
        restated: Vec::new(),
    }
}

async fn inbox_of_lead(h: &Harness) -> Vec<Received> {
    let gateway = h.ctx.directory.get("lead").expect("lead");
    let request = ActRequest { index: 0, attempt: 0 };
    ractor::call!(gateway, GatewayMsg::Act, request).expect("act");
    h.seen.lock().expect("lock").last().cloned().unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever is sent, nothing over the receiver's budget reaches the receiving agent.
    #[test]
    fn no_over_budget_message_ever_reaches_an_agent(
        max_tokens in 40u32..600,
        max_engrams in 0u32..6,
        messages in prop::collection::vec((0usize..3000, 0usize..9, any::<bool>()), 1..6),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let h = harness(&format!(
                "[budgets.roles.lead]\nmax_inline_tokens = {max_tokens}\nmax_engrams = {max_engrams}\n"
            ))
            .await;
            let gateway = h.ctx.directory.get("lead").expect("lead");
            let mut n_accepted = 0;
            for (idx, (n_chars, n_engrams, code)) in messages.iter().enumerate() {
                let body: String = "let x = y; ".chars().cycle().take(*n_chars).collect();
                let envelope = message(idx, &body, *n_engrams, *code);
                let verdict = ractor::call!(gateway, GatewayMsg::Deliver, Box::new(envelope)).expect("deliver");
                if let Ok(n_tokens) = verdict {
                    prop_assert!(n_tokens <= max_tokens);
                    n_accepted += 1;
                }
            }
            // Escalations written by the gateway itself (after a second refusal) are system messages, outside agent
            // budgets; the property is about what other agents send.
            let inbox: Vec<Value> = inbox_of_lead(&h)
                .await
                .iter()
                .filter(|doc| doc.delivered().and_then(Delivered::from) == Some("dev"))
                .map(Received::to_json)
                .collect();
            prop_assert_eq!(inbox.len(), n_accepted, "the agent got exactly the accepted messages");
            let counter = crate::TokenCounter::shared(crate::Encoding::O200kBase);
            for doc in &inbox {
                prop_assert!(counter.count(&doc.to_string()) <= max_tokens);
                let n_engrams = doc.get("engrams").and_then(Value::as_array).map_or(0, Vec::len);
                prop_assert!(n_engrams <= max_engrams as usize);
                // Code needs a grant (MAX_INLINE_CODE is 0): no message flagged as carrying code got through.
                let idx: usize = doc["msg_id"].as_str().and_then(|m| m.strip_prefix('q')).and_then(|n| n.parse().ok()).expect("msg id");
                let (n_chars, _, code) = messages[idx];
                prop_assert!(!code || n_chars == 0, "message {} carried code", idx);
            }
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn every_mode_checks_a_document_once_into_its_type_and_the_ledger_holds_it_typed() {
    for mode in [WireMode::Less, WireMode::Verbatim, WireMode::VerbatimWhole] {
        let h = harness_in(mode, "").await;
        let gateway = h.ctx.directory.get("lead").expect("lead");
        let deliver = |envelope: Envelope| {
            let gateway = gateway.clone();
            async move { ractor::call!(gateway, GatewayMsg::Deliver, Box::new(envelope)).expect("deliver") }
        };
        // A question without its question: the schema refuses it, in the baselines too.
        let mut broken = message(1, "", 0, false);
        broken.doc = Draft::Raw(json!({"type": "question", "from": "dev", "msg_id": "q1"}));
        let refused = deliver(broken).await.expect_err("a document that breaks the contract is refused");
        assert_eq!(refused.code, ErrorCode::SchemaInvalid, "{mode:?}: {refused:?}");
        // A grant in a message's envelope: refused as the wrong kind, before anything else looks at it.
        let terms = crate::GrantTerms {
            grant_id: "g1".into(),
            issuer: "lead".into(),
            grantee: "dev".into(),
            patterns: vec!["repo:a.rs".into()],
            max_derefs: 1,
            max_tokens: 100,
            inline_code_tokens: 0,
            expires_at: "2999-01-01T00:00:00Z".into(),
            uses: 1,
        };
        let mut misfiled = message(2, "", 0, false);
        misfiled.doc = Draft::Grant(crate::Grant::issue(terms, &h.ctx.secret));
        let refused = deliver(misfiled).await.expect_err("a grant is not a message");
        assert_eq!(refused.code, ErrorCode::SchemaInvalid, "{mode:?}");
        assert!(refused.message.contains("another kind"), "{refused:?}");
        // A valid message with two engrams: delivered; the ledger holds it as a typed message.
        deliver(message(3, "", 2, false)).await.expect("a valid message is delivered");
        let events = h.ctx.ledger.ask(TokenLedgerMsg::Snapshot).await.expect("ledger");
        let delivered: Vec<&Document> = events
            .iter()
            .filter_map(|e| match e {
                Event::Delivered { msg_id, doc, .. } if msg_id == "q3" => Some(&**doc),
                _ => None,
            })
            .collect();
        let [Document::Message(message)] = delivered.as_slice() else {
            panic!("{mode:?}: one typed message delivered, not {delivered:?}")
        };
        let ids: Vec<&str> = message.engrams.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["eg_0", "eg_1"], "{mode:?}");
        // What the ledger writes reads back as the same typed document.
        let line = serde_json::to_string(delivered[0]).expect("serializes");
        let back: Document = serde_json::from_str(&line).expect("reads back, validated again");
        assert_eq!(&back, delivered[0]);
        assert!(serde_json::from_str::<Document>(r#"{"type": "question", "from": "dev"}"#).is_err());
    }
}

#[tokio::test]
async fn a_changed_source_is_a_digest_mismatch_through_the_resolver_actor() {
    let h = harness("").await;
    let pointer = Pointer::parse("repo:a.rs").expect("pointer");
    let first = h.ctx.resolver.ask(|reply| ResolverMsg::Resolve(vec![pointer.clone()], reply)).await.expect("call");
    assert!(first.is_ok());
    std::fs::write(h._workspace.path().join("a.rs"), "fn a() { changed() }\n").expect("rewrite");
    let second = h.ctx.resolver.ask(|reply| ResolverMsg::Resolve(vec![pointer.clone()], reply)).await.expect("call");
    assert_eq!(second.expect_err("changed").code, ErrorCode::DigestMismatch);
    // Path traversal cannot even be written as a pointer; the resolver refuses it too if handed a raw path.
    assert!(Pointer::parse("repo:../etc/passwd").is_err());
    let _ = Path::new("..");
}

#[tokio::test]
async fn a_forged_grant_delivered_to_a_gateway_is_refused() {
    let h = harness("").await;
    let terms = crate::GrantTerms {
        grant_id: "g".into(),
        issuer: "lead".into(),
        grantee: "dev".into(),
        patterns: vec!["repo:**".into()],
        max_derefs: 1,
        max_tokens: 100,
        inline_code_tokens: 0,
        expires_at: "2999-01-01T00:00:00Z".into(),
        uses: 1,
    };
    let forged = crate::Grant::issue(terms.clone(), &[1u8; 32]);
    let genuine = crate::Grant::issue(terms, &h.ctx.secret);
    let gateway = h.ctx.directory.get("dev").expect("dev");
    for (grant, ok) in [(forged, false), (genuine, true)] {
        let doc = serde_json::to_value(&grant).expect("grant JSON");
        let envelope = Envelope {
            from: "lead".into(),
            to: "dev".into(),
            msg_id: "g".into(),
            kind: EnvelopeKind::Grant,
            wire: doc.to_string(),
            doc: Draft::Grant(grant),
            inline_code: None,
            code_sources: Vec::new(),
            prose: None,
            restated: Vec::new(),
        };
        let verdict = ractor::call!(gateway, GatewayMsg::Deliver, Box::new(envelope)).expect("deliver");
        assert_eq!(verdict.is_ok(), ok, "{verdict:?}");
        if let Err(v) = verdict {
            assert_eq!(v.code, ErrorCode::GrantInvalid);
        }
    }
}

#[tokio::test]
async fn past_the_inbox_cap_old_messages_become_pointers_the_agent_reads_back() {
    // The lead may read only a.rs by its reach; what was spilled from its own inbox it reads all the same.
    let h = harness_with(WireMode::Less, "", "reach = [\"repo:a.rs\"]", 2).await;
    let gateway = h.ctx.directory.get("lead").expect("lead");
    for idx in 0..5 {
        let verdict = ractor::call!(gateway, GatewayMsg::Deliver, Box::new(message(idx, "", 1, false)));
        verdict.expect("answered").expect("delivered");
    }
    let inbox: Vec<Received> =
        inbox_of_lead(&h).await.into_iter().filter(|d| !matches!(d, Received::Recalled(_))).collect();
    let stubs: Vec<&Spill> = inbox
        .iter()
        .filter_map(|d| match d {
            Received::Spilled(spill) => Some(&**spill),
            _ => None,
        })
        .collect();
    let pointers: Vec<String> = stubs.iter().map(|s| s.pointer()).collect();
    assert_eq!(pointers, ["sam:msg:q0", "sam:msg:q1", "sam:msg:q2"], "{inbox:?}");
    let inline: Vec<&str> = inbox.iter().filter_map(|d| Some(d.delivered()?.message()?.msg_id.as_str())).collect();
    assert_eq!(inline, ["q3", "q4"], "the newest stay inline, in order");
    assert_eq!(&*stubs[0].kind, "question");
    let events = h.ctx.ledger.ask(TokenLedgerMsg::Snapshot).await.expect("ledger");
    let spilled: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Spilled { agent, msg_id } if agent == "lead" => Some(msg_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(spilled, ["q0", "q1", "q2"]);
    // The pointer reads the message back, whole.
    let read = |pointer: &str| DerefAction {
        pointers: vec![pointer.to_owned()],
        reason: "an older message".into(),
        intended_use: "answer it".into(),
        grant: None,
    };
    let outcome = ractor::call!(gateway, GatewayMsg::Deref, read("sam:msg:q1")).expect("deref answered");
    let resolved = outcome.result.expect("a spilled message reads back");
    let doc: Value = serde_json::from_str(&resolved[0].content).expect("the document");
    assert_eq!((doc["msg_id"].as_str(), doc["engrams"][0]["claim"].as_str()), (Some("q1"), Some("claim 0")));
    // A message that was not spilled from its inbox stays outside its reach.
    let outcome = ractor::call!(gateway, GatewayMsg::Deref, read("sam:msg:q4")).expect("deref answered");
    assert_eq!(outcome.result.expect_err("outside the reach").code, ErrorCode::DerefDenied);
}

#[tokio::test]
async fn path_traversal_and_absolute_paths_are_refused_through_the_gateway() {
    let h = harness("").await;
    let outside = h._workspace.path().parent().expect("parent").join("lessrt-outside.rs");
    std::fs::write(&outside, "secret\n").expect("write outside");
    let gateway = h.ctx.directory.get("dev").expect("dev");
    for text in
        ["repo:../lessrt-outside.rs", &format!("repo:{}", outside.display()), "repo:a.rs/../../lessrt-outside.rs"]
    {
        let action =
            DerefAction { pointers: vec![text.to_owned()], reason: "r".into(), intended_use: "u".into(), grant: None };
        let outcome = ractor::call!(gateway, GatewayMsg::Deref, action).expect("deref answered");
        let violation = outcome.result.expect_err(text);
        assert_eq!(violation.code, ErrorCode::PointerInvalid, "{text}: {violation}");
    }
    std::fs::remove_file(outside).ok();
}

#[test]
fn an_output_directory_that_cannot_be_written_is_refused_before_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").expect("write");
    for bad in [file.clone(), file.join("below"), std::path::PathBuf::from("/proc/lessrt-out")] {
        let violation = check_out_dir(&bad).expect_err("refused");
        assert_eq!(violation.code, ErrorCode::OutputUnwritable, "{}", bad.display());
    }
    let good = dir.path().join("runs/a/less");
    check_out_dir(&good).expect("created and writable");
    assert_eq!(std::fs::read_dir(&good).expect("dir").count(), 0, "the probe is removed");
}

#[test]
fn each_run_gets_a_grant_key_of_its_own_from_the_os() {
    let (a, b) = (fresh_secret().expect("random bytes"), fresh_secret().expect("random bytes"));
    assert_ne!(a, b);
    assert_ne!(a, [0u8; 32]);
}

/// Asks the memory a question once, then finishes.
struct Asker;

impl Agent for Asker {
    fn next<'a>(&'a mut self, input: &'a TurnInput) -> AgentFuture<'a, Action> {
        let action = if input.done.is_empty() {
            Action::Query { text: "what did the team learn".to_owned(), k: 3, project: None, scope: None }
        } else {
            Action::Finish
        };
        Box::pin(async move { action })
    }
}

struct AskerFactory;

impl AgentFactory for AskerFactory {
    fn make(&self, _seat: &Seat) -> Box<dyn Agent> {
        Box::new(Asker)
    }
}

/// The memory actor dies mid-run, up to the restart limit: the run supervisor starts it again each time and the
/// run's queries are answered; one more death and the memory is given up: the step that needed it gets an answer
/// (a refusal, not a hang), and the run ends after it with an error naming the memory; the report is still there.
#[tokio::test]
async fn a_dying_memory_actor_is_started_again_up_to_the_limit_then_the_run_ends() {
    let workspace = tempfile::tempdir().expect("tempdir");
    let toml = "name = \"m\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n[[agents]]\nid = \"dev\"\nrole = \"dev\"\n\
                parent = \"lead\"\n[[steps]]\naction = \"query\"\nagent = \"dev\"\ntext = \"x\"\n\
                [[steps]]\naction = \"query\"\nagent = \"dev\"\ntext = \"y\"\n";
    let scenario = Arc::new(Scenario::from_toml(toml, workspace.path()).expect("scenario"));
    let options =
        RunOptions { step_timeout: Some(std::time::Duration::from_secs(30)), ..RunOptions::new(WireMode::Less) };
    for n_deaths in [MAX_RESTARTS, MAX_RESTARTS + 1] {
        let run = LocalRun::start(scenario.clone(), Arc::new(AskerFactory), &options).await.expect("run starts");
        let services::Services::Local { memory, .. } = &run.ctx.services else { panic!("a local run") };
        for _ in 0..n_deaths {
            let generation = memory.generation();
            memory.get().kill();
            memory.replaced_after(generation).await;
        }
        let driven = run.drive().await;
        let report = run.report().await.expect("the ledger still answers");
        let queries: Vec<Event> = run
            .ctx
            .ledger
            .ask(TokenLedgerMsg::Snapshot)
            .await
            .expect("snapshot")
            .into_iter()
            .filter(|e| matches!(e, Event::Query { .. }))
            .collect();
        if n_deaths == MAX_RESTARTS {
            driven.expect("the run completes");
            assert_eq!(report.service_restarts.get("memory"), Some(&(MAX_RESTARTS as u32)));
            assert!(
                matches!(&queries[..], [Event::Query { code: None, .. }, Event::Query { code: None, .. }]),
                "{queries:?}"
            );
        } else {
            let err = driven.expect_err("the run ends").to_string();
            assert!(err.contains("memory stopped"), "{err}");
            // The first step's query was answered (refused with a code, no hang); the run ended before the second.
            assert!(
                matches!(&queries[..], [Event::Query { code: Some(ErrorCode::RunFailed), .. }]),
                "one refused query: {queries:?}"
            );
        }
        assert_eq!(report.scenario, "m");
        run.stop().await;
    }
}

/// What pointers hold reaches an agent through its gateway (issue 35): counted, cut to the role's inline budget (the
/// last descriptions dropped, their pointers left bare and named), refused when not even the bare pointers fit, and
/// on the ledger either way; never delivered whole.
#[tokio::test]
async fn a_description_over_the_inline_budget_is_cut_or_refused_never_delivered_whole() {
    let h = harness("[budgets.roles.lead]\nmax_inline_tokens = 60\n").await;
    let about = "Keeps the ledger of every bucket and flushes it to the backend after every single write";
    for i in 0..4 {
        let text = format!("/// {about} ({i}).\nfn f() {{}}\n");
        std::fs::write(h._workspace.path().join(format!("f{i}.rs")), text).expect("write");
    }
    let gateway = h.ctx.directory.get("lead").expect("lead");
    let pointers: Vec<String> = (0..4).map(|i| format!("repo:f{i}.rs")).collect();
    let describe = |pointers: &[String]| DescribeAction { pointers: pointers.to_vec() };
    let looked = ractor::call!(gateway, GatewayMsg::Describe, describe(&pointers)).expect("answered").expect("cut");
    let [Received::Described(described)] = looked.items.as_slice() else { panic!("one answer: {looked:?}") };
    let n_described = described.pointers.iter().filter(|d| d.about.is_some()).count();
    assert!((1..4).contains(&n_described), "the first fit, the rest are cut: {described:?}");
    assert_eq!(described.pointers[0].about.as_deref(), Some(format!("{about} (0).").as_str()));
    assert!(described.pointers[n_described..].iter().all(|d| d.about.is_none()));
    assert_eq!(described.cut, pointers[n_described..], "the answer names what it cut");
    let text: String = described.pointers.iter().map(Description::line).collect();
    let counter = crate::TokenCounter::shared(h.ctx.scenario.tokenizer);
    assert!(counter.count(&text) <= 60, "{text}");
    // Not even the pointers fit: refused, with the budget's code.
    let many: Vec<String> = (0..40).map(|i| format!("repo:some/long/path/to/a/file_{i}.rs")).collect();
    let refused = ractor::call!(gateway, GatewayMsg::Describe, describe(&many)).expect("answered");
    assert_eq!(refused.expect_err("over the budget").code, ErrorCode::BudgetExceeded);
    let events = h.ctx.ledger.ask(TokenLedgerMsg::Snapshot).await.expect("ledger");
    let described_events: Vec<(usize, u32, Vec<String>, Option<ErrorCode>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Describe { agent, described, tokens, cut, code, .. } if agent == "lead" => {
                Some((*described, *tokens, cut.clone(), *code))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        described_events,
        [
            (n_described, counter.count(&text), pointers[n_described..].to_vec(), None),
            (0, 0, Vec::new(), Some(ErrorCode::BudgetExceeded))
        ]
    );
}

#[test]
fn a_pinned_runs_debug_leaves_its_grant_key_out() {
    let pinned = Pinned { clock: time::OffsetDateTime::UNIX_EPOCH, secret: [0xab; 32] };
    let shown = format!("{pinned:?}");
    assert!(shown.contains("<redacted>") && !shown.contains("171"), "{shown}");
}

/// What a restarted or moved gateway takes back from the ledger of its agent's current turn: the derefs its budget
/// paid for since the agent's last message (not those of earlier turns, nor those a grant paid for), so the turn's
/// meter goes on where it was and a deref the budget had no room for is still refused.
#[test]
fn a_restored_gateway_meters_the_turn_it_is_in_from_the_ledger() {
    let deref = |tokens: u32, via_grant: Option<&str>| Event::Deref {
        agent: "dev".into(),
        pointers: vec!["repo:a.rs#L1-L1".into(), "repo:a.rs#L2-L2".into()],
        tokens,
        granted: true,
        via_grant: via_grant.map(str::to_owned),
        code: None,
    };
    let sent = Event::Delivered {
        from: "dev".into(),
        to: "lead".into(),
        msg_id: "dev-m1".into(),
        kind: EnvelopeKind::Message,
        tokens: 10,
        max_tokens: 800,
        doc: Document::message(json!({"type": "escalation", "from": "dev", "msg_id": "dev-m1",
            "reason": "x", "severity": "warning"})),
        prose: None,
        restated: Vec::new(),
    };
    let kept = gateway::Kept {
        events: vec![deref(500, None), sent, deref(300, None), deref(900, Some("g1")), deref(40, None)],
        wire: Default::default(),
    };
    let restored = gateway::Restored::from_kept(&kept, "dev");
    let tokens: Vec<u32> = restored.metered.iter().map(|(_, n)| *n).collect();
    assert_eq!(tokens, [300, 40], "this turn's budget-paid derefs only");
    assert!(gateway::Restored::from_kept(&kept, "lead").metered.is_empty());
}

/// A run stops its children in reverse start order, each to the end of its own `post_stop` (`crate::supervision`),
/// not killed with the supervisor: the memory commits, the archive closes, and a run that writes no files leaves no
/// scratch store behind (before, every such run left its `lessrt-memory-*` directory in the temporary directory).
#[tokio::test]
async fn a_stopped_run_stops_its_children_in_order_and_leaves_no_scratch_store() {
    let workspace = tempfile::tempdir().expect("tempdir");
    let toml = "name = \"s\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n[[agents]]\nid = \"dev\"\nrole = \"dev\"\n\
                parent = \"lead\"\n[[steps]]\naction = \"query\"\nagent = \"dev\"\ntext = \"x\"\n";
    let scenario = Arc::new(Scenario::from_toml(toml, workspace.path()).expect("scenario"));
    let options =
        RunOptions { step_timeout: Some(std::time::Duration::from_secs(30)), ..RunOptions::new(WireMode::Less) };
    let run = LocalRun::start(scenario, Arc::new(AskerFactory), &options).await.expect("run starts");
    let prefix = format!("lessrt-memory-{}-{}-", run.ctx.run_id, WireMode::Less.as_str());
    let scratch = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .expect("temp dir")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect()
    };
    assert_eq!(scratch().len(), 1, "the run's scratch store");
    run.drive().await.expect("the run completes");
    run.stop().await;
    assert_eq!(scratch(), Vec::<std::path::PathBuf>::new(), "removed once every child stopped");
}

/// A run that fails in its process (here its memory dies past the restart intensity) removes its grant key as a
/// finished one does (issue 61: it was left behind); `--resume` is for a run whose process died.
#[tokio::test]
async fn a_failed_run_leaves_no_grant_key_behind() {
    let workspace = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let toml = "name = \"k\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n[[agents]]\nid = \"dev\"\nrole = \"dev\"\n\
                parent = \"lead\"\n[[steps]]\naction = \"query\"\nagent = \"dev\"\ntext = \"x\"\n";
    let scenario = Arc::new(Scenario::from_toml(toml, workspace.path()).expect("scenario"));
    let options = RunOptions {
        step_timeout: Some(std::time::Duration::from_secs(30)),
        out_dir: Some(out.path().to_owned()),
        ..RunOptions::new(WireMode::Less)
    };
    let fault = Fault { before_step: 0, target: FaultTarget::Memory, times: MAX_RESTARTS as u32 + 1 };
    let ended = run_scenario_faulted(scenario, Arc::new(AskerFactory), options, &[fault]).await;
    assert!(ended.is_err(), "the memory was given up and the run ended");
    assert!(out.path().join(resume::RESUME_FILE).exists(), "the run kept what a resume needs, grant key aside");
    assert!(!out.path().join(resume::KEY_FILE).exists(), "no grant key left behind");
}

/// What a resumed (or moved) agent takes back from the ledger passes its gateway's budget again (issue 61): a
/// message over the receiver's budget, or one whose recorded size is not its own, written into the ledger between the
/// kill and the resume, is not restored; the others are.
#[tokio::test]
async fn restored_deliveries_pass_the_gateways_checks_again() {
    let h = harness("[budgets.defaults]\nmax_engrams = 2\n").await;
    let doc = |envelope: &Envelope| Arc::new(Document::check(envelope.kind, &envelope.doc).expect("valid").0);
    let (fits, over, shrunk) =
        (message(1, "", 1, false), message(2, "", 3, false), message(3, &"x ".repeat(400), 1, false));
    let counter = less_contract::TokenCounter::shared(less_contract::Encoding::default());
    let delivered = vec![
        ("dev".to_owned(), "q1".to_owned(), counter.count(&fits.wire), doc(&fits), String::new()),
        ("dev".to_owned(), "q2".to_owned(), counter.count(&over.wire), doc(&over), String::new()),
        ("dev".to_owned(), "q3".to_owned(), 5, doc(&shrunk), String::new()),
    ];
    let restored = gateway::Restored { delivered, read: Vec::new(), spent: Vec::new(), metered: Vec::new() };
    let gateway = h.ctx.directory.get("lead").expect("lead");
    let n = ractor::call!(gateway, GatewayMsg::Restore, Box::new(restored)).expect("restored");
    assert_eq!(n, 1, "only the message within the budget, at its own size");
    let inbox = inbox_of_lead(&h).await;
    assert_eq!(inbox.len(), 1, "{inbox:?}");
}
