//! The desk's attacks of issue 34 (the second outside round): races between desks on one store (a single-use grant
//! spent twice, the rate limit passed, capsule rewrites closing a cycle), pins that never renew, derefs that read
//! before they count, refusals that name the wrong limit, the gate adapter reading past the caller's reach, grants
//! with terms that mean nothing, capsules of unbounded size, and raw secrets from `less_expand`.
//!
//! Races run as bounded loops: each round starts both sides at a barrier, and the assertion is on what was stored,
//! never on timing.

use std::sync::Barrier;

use less_runtime::dag::{Dag, DagConfig, NewMessage};
use less_runtime::desk::{MAX_DEREF_POINTERS, NewCapsule};
use less_runtime::memory::MemoryPolicy;
use less_runtime::{EngramKind, Pointer};

use super::*;

/// A second desk on the store `desk(dir)` made: what a second `lessrt mcp` process is.
fn second_desk(dir: &Path) -> Desk {
    Desk::open(&dir.join("store"), Some(&dir.join("ws")), DeskConfig::from_toml(CONFIG).expect("config")).expect("desk")
}

/// Two desks on one store spend 300 single-use grants at once, each round from a barrier: every grant is spent
/// exactly once (the spend is one write transaction with a relative, checked update).
#[test]
fn attack_two_desks_racing_spend_each_single_use_grant_exactly_once() {
    const GRANTS: usize = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (desk(dir.path()), second_desk(dir.path()));
    let lead = first.client("lead");
    let ids: Vec<String> = (0..GRANTS)
        .map(|_| {
            let issued = first.issue_grant(&lead, &grant("dev", &["repo:src/long.rs"], 1, "PT1H")).expect("grant");
            issued.terms.grant_id
        })
        .collect();
    let barrier = Barrier::new(2);
    let long = vec![LONG.to_owned()];
    let spent: Vec<Vec<bool>> = std::thread::scope(|scope| {
        let sides: Vec<_> = [&first, &second]
            .into_iter()
            .map(|desk| {
                let (ids, barrier, long) = (&ids, &barrier, &long);
                scope.spawn(move || {
                    let dev = desk.client("dev");
                    ids.iter()
                        .map(|id| {
                            barrier.wait();
                            match desk.deref(&dev, long, Some(id)) {
                                Ok(_) => true,
                                Err(violation) => {
                                    assert_eq!(violation.code, ErrorCode::GrantInvalid, "{violation}");
                                    false
                                }
                            }
                        })
                        .collect()
                })
            })
            .collect();
        sides.into_iter().map(|side| side.join().expect("a side")).collect()
    });
    let twice: Vec<&String> =
        ids.iter().enumerate().filter(|&(i, _)| spent[0][i] && spent[1][i]).map(|(_, id)| id).collect();
    let never: Vec<&String> =
        ids.iter().enumerate().filter(|&(i, _)| !spent[0][i] && !spent[1][i]).map(|(_, id)| id).collect();
    assert!(twice.is_empty(), "{} of {GRANTS} single-use grants were spent twice: {twice:?}", twice.len());
    assert!(never.is_empty(), "{} of {GRANTS} grants were never spent: {never:?}", never.len());
    assert!(held(&first, &first.client("dev")).is_empty(), "every grant is used up");
}

/// Two memories on one store put as the same writers at once, with a limit of one put per window: no writer ever
/// gets two engrams stored (the count and the put are one write transaction).
#[test]
fn attack_two_writers_racing_never_pass_the_rate_limit() {
    const WRITERS: usize = 100;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let open = || {
        let mut memory = Memory::open_without_model(&store).expect("memory");
        memory.set_policy(MemoryPolicy { puts_per_window: 1, window_secs: 3600, ..MemoryPolicy::default() });
        memory
    };
    let (first, second) = (open(), open());
    let barrier = Barrier::new(2);
    let stored: Vec<Vec<bool>> = std::thread::scope(|scope| {
        let sides: Vec<_> = [first, second]
            .into_iter()
            .enumerate()
            .map(|(side, mut memory)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    (0..WRITERS)
                        .map(|writer| {
                            let agent = format!("w{writer}");
                            let who = Principal::agent(&agent, "dev", "demo", "desk");
                            let claim = format!("Writer {writer} records fact {side} about the billing cache.");
                            let engram = Engram::builder(EngramKind::Fact, claim, &agent)
                                .pointer(Pointer::parse("repo:src/short.rs#L1-L1").expect("pointer"))
                                .build()
                                .expect("engram");
                            barrier.wait();
                            match memory.put_as(&who, &engram, "demo", 1_000) {
                                Ok(_) => true,
                                Err(err) => {
                                    assert_eq!(err.code(), ErrorCode::RateLimited, "{err}");
                                    false
                                }
                            }
                        })
                        .collect()
                })
            })
            .collect();
        sides.into_iter().map(|side| side.join().expect("a side")).collect()
    });
    let over: Vec<usize> = (0..WRITERS).filter(|&w| stored[0][w] && stored[1][w]).collect();
    assert!(over.is_empty(), "{} of {WRITERS} writers stored 2 engrams with a limit of 1: {over:?}", over.len());
    assert!((0..WRITERS).all(|w| stored[0][w] || stored[1][w]), "each writer's first put is stored");
}

/// Two desks rewrite two capsules at once so that each would depend on the other: never both (a cycle), 300 rounds.
#[test]
fn attack_concurrent_capsule_rewrites_never_close_a_cycle() {
    const ROUNDS: usize = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (desk(dir.path()), second_desk(dir.path()));
    let capsule = |id: &str, depends: &[String]| NewCapsule {
        id: id.to_owned(),
        what: format!("work {id}"),
        depends: depends.to_vec(),
        ..NewCapsule::default()
    };
    let dev = first.client("dev");
    for round in 0..ROUNDS {
        for id in [format!("a{round}"), format!("b{round}")] {
            first.capsule_write(&dev, &capsule(&id, &[])).expect("a capsule");
        }
    }
    let barrier = Barrier::new(2);
    let written: Vec<Vec<bool>> = std::thread::scope(|scope| {
        let sides: Vec<_> = [(&first, "a", "b"), (&second, "b", "a")]
            .into_iter()
            .map(|(desk, this, that)| {
                let (barrier, capsule) = (&barrier, &capsule);
                scope.spawn(move || {
                    let dev = desk.client("dev");
                    (0..ROUNDS)
                        .map(|round| {
                            let rewrite = capsule(&format!("{this}{round}"), &[format!("{that}{round}")]);
                            barrier.wait();
                            desk.capsule_write(&dev, &rewrite).is_ok()
                        })
                        .collect()
                })
            })
            .collect();
        sides.into_iter().map(|side| side.join().expect("a side")).collect()
    });
    let cycles: Vec<usize> = (0..ROUNDS).filter(|&r| written[0][r] && written[1][r]).collect();
    assert!(cycles.is_empty(), "{} of {ROUNDS} concurrent rewrites closed a cycle: {cycles:?}", cycles.len());
    assert!((0..ROUNDS).all(|r| written[0][r] || written[1][r]), "one rewrite of each pair is stored");
}

/// A file edited while a server runs: the reader's turn still sees it as read (no phantom reads), other clients read
/// it as it is now, and after the reader's checkpoint it reads the new content, told that it changed.
#[test]
fn attack_an_edited_file_is_read_again_after_a_checkpoint_and_said_to_have_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let desk = desk(dir.path());
    let (dev, dev2) = (desk.client("dev"), desk.client("dev2"));
    let short = vec!["repo:src/short.rs#L1-L1".to_owned()];
    let (before, _) = desk.deref(&dev, &short, None).expect("read");
    assert_eq!(before[0].changed_from, None);
    std::fs::write(dir.path().join("ws/src/short.rs"), "fn b() {}\n").expect("edit");
    let stale = refused(desk.deref(&dev, &short, None), ErrorCode::DigestMismatch, "changed within the turn");
    assert!(stale.message.contains("less_checkpoint"), "the message says how to read it again: {stale}");
    // Another client has pinned nothing: it reads the file as it is.
    let (other, _) = desk.deref(&dev2, &short, None).expect("another client reads the edit");
    assert_eq!(other[0].content, "fn b() {}\n");
    assert_eq!(other[0].changed_from, None, "it never read the old content");
    desk.checkpoint(&dev).expect("checkpoint");
    let (after, _) = desk.deref(&dev, &short, None).expect("a new turn reads the edit");
    assert_eq!(after[0].content, "fn b() {}\n");
    assert_eq!(after[0].changed_from.as_deref(), Some(before[0].digest.as_str()), "it says what was read before");
    let (again, _) = desk.deref(&dev, &short, None).expect("the same turn again");
    assert_eq!((again[0].digest.as_str(), again[0].changed_from.as_deref()), (after[0].digest.as_str(), None));
}

/// Derefs are counted before anything is read: a pointer count over the cap, spans over the turn's budget (in a file
/// that does not even exist: reading first would say so), and pointers a grant cannot cover are refused as such.
#[test]
fn attack_a_deref_is_counted_and_refused_before_any_file_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let desk = desk(dir.path());
    let (lead, dev) = (desk.client("lead"), desk.client("dev"));
    let many: Vec<String> = (0..20_000).map(|i| format!("repo:src/long.rs#L{}-L{}", i % 40 + 1, i % 40 + 1)).collect();
    let cap = refused(desk.deref(&dev, &many, None), ErrorCode::ArgumentInvalid, "20,000 pointers");
    assert!(cap.message.contains(&MAX_DEREF_POINTERS.to_string()) && cap.path == "/pointers", "{cap}");
    let over = vec![LONG.to_owned(); MAX_DEREF_POINTERS + 1];
    let issued = desk.issue_grant(&lead, &grant("dev", &["repo:src/long.rs"], 50, "PT1H")).expect("a wide grant");
    refused(desk.deref(&dev, &over, Some(&issued.terms.grant_id)), ErrorCode::ArgumentInvalid, "13 under a grant");
    let missing: Vec<String> = (1..=4).map(|i| format!("repo:src/missing.rs#L{i}-L{i}")).collect();
    let spans = refused(desk.deref(&dev, &missing, None), ErrorCode::DerefDenied, "4 spans, 3 in the budget");
    assert!(spans.message.contains("4 pointers exceed") && spans.message.contains("repo 0/3"), "{spans}");
    let one = desk.issue_grant(&lead, &grant("dev", &["repo:src/missing.rs"], 1, "PT1H")).expect("a one-span grant");
    let beyond: Vec<String> = missing.iter().chain(&missing[..1]).cloned().collect();
    refused(desk.deref(&dev, &beyond, Some(&one.terms.grant_id)), ErrorCode::DerefDenied, "5 spans, 1 granted");
    assert_eq!(held(&desk, &dev).iter().find(|h| h.0 == one.terms.grant_id).map(|h| h.1), Some(1), "unspent");
    // Within the spans of the budget, the tokens decide: the files are read (and here, not found).
    let two = missing[..2].to_vec();
    refused(desk.deref(&dev, &two, None), ErrorCode::PointerUnresolved, "within the budget, read and not found");
}

/// A deref refused for its spans names the spans and their limit, not the token limit it did not reach; one refused
/// for its tokens names the tokens read and the turn's token limit.
#[test]
fn attack_a_refusal_names_the_limit_that_was_hit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let desk = desk(dir.path());
    let dev = desk.client("dev");
    let spans: Vec<String> = (1..=4).map(|i| format!("repo:src/long.rs#L{i}-L{i}")).collect();
    let refusal = refused(desk.deref(&dev, &spans, None), ErrorCode::DerefDenied, "4 repo spans, 3 allowed");
    assert!(refusal.message.starts_with("4 pointers exceed") && refusal.message.contains("repo 0/3"), "{refusal}");
    assert!(!refusal.message.contains("token"), "no token limit was hit: {refusal}");
    let tokens = refused(desk.deref(&dev, &[LONG.to_owned()], None), ErrorCode::DerefDenied, "30 lines, 12 tokens");
    assert!(tokens.message.starts_with("1 pointer / ") && tokens.message.contains("tokens 0/12)"), "{tokens}");
}

const NARROW: &str = r#"
project = "demo"
[clients.lead]
role = "lead"
[clients.narrow]
role = "dev"
parent = "lead"
reach = ["repo:src/**", "artifact:docs/**"]
"#;

/// The gate adapter reads a report as its caller would: outside the caller's reach, it learns no verdict.
#[test]
fn attack_the_gate_adapter_never_reads_past_the_callers_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = workspace(dir.path());
    std::fs::create_dir_all(ws.join("docs")).expect("mkdir");
    std::fs::write(ws.join("secret-report.txt"), "test result: ok. 5 passed; 0 failed\n").expect("write");
    std::fs::write(ws.join("docs/report.txt"), "test result: ok. 5 passed; 0 failed\n").expect("write");
    let config = DeskConfig::from_toml(NARROW).expect("config");
    let desk = Desk::open(&dir.path().join("store"), Some(&ws), config).expect("desk");
    let narrow = desk.client("narrow");
    let outside = refused(desk.gate_report(&narrow, "g", "secret-report.txt", None), ErrorCode::DerefDenied, "reach");
    assert_eq!(outside.path, "/report");
    let told = desk.gate_report(&narrow, "g", "secret-report.txt", Some(less_runtime::GateStatus::Pass));
    refused(told, ErrorCode::DerefDenied, "a given status does not open the file either");
    desk.gate_report(&narrow, "g", "docs/report.txt", None).expect("within its reach");
}

/// Grant terms that mean nothing are refused with their path, and no grant is stored.
#[test]
fn attack_grants_with_odd_terms_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let desk = desk(dir.path());
    let (lead, dev) = (desk.client("lead"), desk.client("dev"));
    let cases = [
        ("/uses", grant("dev", &["repo:src/long.rs"], 0, "PT1H")),
        ("/ttl", grant("dev", &["repo:src/long.rs"], 1, "PT0S")),
        (
            "/answers",
            NewGrant { answers: Some("dr-000000000000".into()), ..grant("dev", &["repo:src/long.rs"], 1, "PT1H") },
        ),
    ];
    for (path, order) in cases {
        let refusal = refused(desk.issue_grant(&lead, &order), ErrorCode::ArgumentInvalid, path);
        assert_eq!(refusal.path, path, "{refusal}");
    }
    // A request answered once is answered: a second grant naming it is refused.
    let request = desk.request_deref(&dev, &[LONG.to_owned()], "the table").expect("a request");
    let answering = NewGrant { answers: Some(request.clone()), ..grant("dev", &["repo:src/long.rs"], 1, "PT1H") };
    desk.issue_grant(&lead, &answering).expect("the answer");
    let again = refused(desk.issue_grant(&lead, &answering), ErrorCode::ArgumentInvalid, "answered twice");
    assert_eq!(again.path, "/answers");
    // And a request of another client is not answered by a grant to this one.
    let foreign = desk.request_deref(&desk.client("dev2"), &[LONG.to_owned()], "mine").expect("a request");
    let misdirected = NewGrant { answers: Some(foreign), ..grant("dev", &["repo:src/long.rs"], 1, "PT1H") };
    refused(desk.issue_grant(&lead, &misdirected), ErrorCode::ArgumentInvalid, "another client's request");
    assert_eq!(held(&desk, &dev).len(), 1, "only the answering grant was stored");
}

/// A capsule's ten lines are bounded in characters too, and its dependencies in number.
#[test]
fn attack_a_capsule_cannot_hide_a_book_in_one_line_or_lean_on_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let desk = desk(dir.path());
    let dev = desk.client("dev");
    let capsule = |id: &str| NewCapsule { id: id.to_owned(), what: format!("work {id}"), ..NewCapsule::default() };
    let book = NewCapsule { what: "x".repeat(100_000), ..capsule("book") };
    let refusal = refused(desk.capsule_write(&dev, &book), ErrorCode::ArgumentInvalid, "a 100,000-character line");
    assert_eq!(refusal.path, "/what");
    let deps: Vec<String> = (0..9).map(|i| format!("d{i}")).collect();
    for id in &deps {
        desk.capsule_write(&dev, &capsule(id)).expect("a dependency");
    }
    let leaning = NewCapsule { depends: deps.clone(), ..capsule("top") };
    let refusal = refused(desk.capsule_write(&dev, &leaning), ErrorCode::ArgumentInvalid, "9 dependencies");
    assert_eq!(refusal.path, "/depends");
    assert!(desk.capsule_hydrate(&dev, &["top".to_owned(), "book".to_owned()]).is_err(), "neither was stored");
    let eight = NewCapsule { depends: deps[..8].to_vec(), ..capsule("top") };
    desk.capsule_write(&dev, &eight).expect("8 dependencies fit");
}

/// `less_expand` shows an archived message redacted, as the page does: no AWS key, no PEM body.
#[test]
fn attack_expand_answers_archived_secrets_redacted() {
    const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
    const PEM_BODY: &str = "MIIEowIBAAKCAQEA7bq8Zt1tY2xQ0pW3kB9nXv4rLmA5sJ8fH2dG6eK1cN0oP3uR";
    let dir = tempfile::tempdir().expect("tempdir");
    let desk = desk(dir.path());
    let text = format!(
        "Deploy with key {AWS} and this one:\n-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"
    );
    let message = NewMessage { role: "user".to_owned(), content: text, name: None, at: None };
    let stored = {
        let mut dag = Dag::open(&dir.path().join("store"), DagConfig::default()).expect("archive");
        dag.ingest("demo", "s1", &[message], 0).expect("ingest")
    };
    let shown = desk.expand(&desk.client("dev"), &stored[0].id).expect("expand").to_string();
    assert!(!shown.contains(AWS) && !shown.contains(PEM_BODY), "a secret in the answer: {shown}");
    assert!(shown.contains("credential_ref:credential:"), "{shown}");
}
