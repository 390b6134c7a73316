//! Serde agreement between the Rust types and the schemas: every example converts both ways exactly, and random
//! valid values survive JSON round trips unchanged.

use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::{
    Budget, DerefRequest, Engram, EngramKind, Grant, GrantTerms, Payload, Pointer, Provenance, Scope, Severity,
    SharedBriefMicro, Source, TaskStatus, Ttl, TypedMessage, WaveState,
};

fn exact_round_trip<T: Contract + std::fmt::Debug>(text: &str) {
    let doc: Value = serde_json::from_str(text).expect("example is JSON");
    let valid = Valid::<T>::from_value(&doc).unwrap_or_else(|v| panic!("{:?}: {v}", T::KIND));
    assert_eq!(valid.to_value(), doc, "{:?} serializes back to the same document", T::KIND);
}

#[test]
fn examples_convert_both_ways_exactly() {
    exact_round_trip::<Engram>(include_str!("../../examples/engram.json"));
    exact_round_trip::<Pointer>(include_str!("../../examples/pointer.json"));
    exact_round_trip::<Budget>(include_str!("../../examples/budget.json"));
    exact_round_trip::<Grant>(include_str!("../../examples/grant.json"));
    exact_round_trip::<DerefRequest>(include_str!("../../examples/deref_request.json"));
    for text in [
        include_str!("../../examples/message.json"),
        include_str!("../../examples/task_claim.json"),
        include_str!("../../examples/task_result.json"),
        include_str!("../../examples/gate_report.json"),
        include_str!("../../examples/escalation.json"),
        include_str!("../../examples/question.json"),
        include_str!("../../examples/checkpoint.json"),
    ] {
        exact_round_trip::<TypedMessage>(text);
    }
}

#[test]
fn partial_budgets_normalize_to_the_spec_defaults() {
    let text = include_str!("../../examples/shared_brief_micro.json");
    let brief = Valid::<SharedBriefMicro>::from_json(text).expect("example brief");
    let reviewer = brief.budgets["reviewer"];
    assert_eq!(reviewer.max_inline_tokens, 400);
    assert_eq!(Budget { max_inline_tokens: 800, ..reviewer }, Budget::default());
    let again = Valid::<SharedBriefMicro>::from_value(&brief.to_value()).expect("normalized brief is valid");
    assert_eq!(again, brief);
}

#[test]
fn invalid_documents_never_become_values() {
    let mut doc: Value = serde_json::from_str(include_str!("../../examples/engram.json")).expect("JSON");
    doc["claim"] = Value::String("x".repeat(501));
    let err = Valid::<Engram>::from_value(&doc).expect_err("501-char claim");
    assert_eq!(err.code(), Some(ErrorCode::SchemaInvalid));
    let err = Valid::<Engram>::from_json("{not json").expect_err("malformed");
    assert!(matches!(err, Error::Malformed { code: ErrorCode::JsonMalformed, .. }));
    // The serde path for Valid<T> refuses too, so a Valid<T> field in a larger struct is checked on the way in.
    assert!(serde_json::from_value::<Valid<Engram>>(doc).is_err());
}

#[test]
fn the_builder_cannot_build_an_invalid_engram() {
    let source = Pointer::parse("repo:src/gateway.rs#L120-L188").expect("pointer");
    let engram = Engram::builder(EngramKind::Decision, "Keep the resend rule in the gateway.", "director")
        .pointer(source.clone())
        .confidence(0.9)
        .build()
        .expect("valid");
    assert!(engram.id.starts_with("eg_"));
    let same = Engram::builder(EngramKind::Decision, "Keep the resend rule in the gateway.", "director")
        .pointer(source)
        .build()
        .expect("valid");
    assert_eq!(engram.id, same.id, "ids derive from content");

    let no_pointer = Engram::builder(EngramKind::Fact, "a claim", "agent").build();
    assert_eq!(no_pointer.expect_err("no pointer").code(), Some(ErrorCode::SchemaInvalid));
    let url_only = Engram::builder(EngramKind::Risk, "a risk", "agent")
        .pointer(Pointer::parse("url:https://example.org/cve").expect("pointer"))
        .build();
    assert_eq!(url_only.expect_err("url only").code(), Some(ErrorCode::SourceRequired));
    let too_confident = Engram::builder(EngramKind::Fact, "x", "agent")
        .pointer(Pointer::parse("repo:a.rs").expect("p"))
        .confidence(1.5);
    assert!(too_confident.build().is_err());
    let nan = Engram::builder(EngramKind::Fact, "x", "agent").pointer(Pointer::parse("repo:a.rs").expect("p"));
    assert!(nan.confidence(f64::NAN).build().is_err(), "NaN is not a confidence");
}

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[A-Za-z0-9][A-Za-z0-9 .,:;()é中-]{{0,{}}}", max - 1)).expect("regex")
}

fn id() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_-]{0,30}"
}

fn pointer() -> impl Strategy<Value = Pointer> {
    prop_oneof![
        ("[a-z]{1,8}(/[a-z]{1,8}){0,2}\\.rs", 1u32..900, 0u32..50).prop_map(|(p, a, n)| Pointer::parse(&format!(
            "repo:{p}#L{a}-L{}",
            a + n
        ))
        .expect("repo")),
        ("[A-Z][A-Za-z]{1,10}\\.md", "[A-Za-z]{1,12}")
            .prop_map(|(p, s)| Pointer::parse(&format!("artifact:{p}#sec={s}")).expect("artifact")),
        ("[a-z]{1,8}", "[a-z0-9-]{1,12}").prop_map(|(ns, k)| Pointer::parse(&format!("sam:{ns}:{k}")).expect("sam")),
        ("[a-z_]{1,8}", "[a-z_]{1,12}").prop_map(|(s, n)| Pointer::parse(&format!("test:{s}::{n}")).expect("test")),
    ]
}

fn timestamp() -> impl Strategy<Value = String> {
    (2000u32..2100, 1u32..13, 1u32..29, 0u32..24, 0u32..60, 0u32..60)
        .prop_map(|(y, mo, d, h, mi, s)| format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"))
}

fn engram() -> impl Strategy<Value = Engram> {
    let kinds = prop::sample::select(vec![
        EngramKind::Fact,
        EngramKind::Decision,
        EngramKind::Risk,
        EngramKind::Todo,
        EngramKind::Constraint,
        EngramKind::Diff,
        EngramKind::Test,
        EngramKind::Perf,
        EngramKind::Policy,
    ]);
    let scopes = prop::sample::select(vec![Scope::Run, Scope::Project, Scope::Org, Scope::Global]);
    let sources = prop::sample::select(vec![Source::Rag, Source::Sam, Source::Agent, Source::Tool]);
    let ttls = prop::sample::select(vec!["PT6H", "P7D", "P1DT12H", "PT30M", "P1Y2M", "PT0.5S"]);
    (
        (id(), kinds, text(500), prop::collection::vec(pointer(), 1..=12), 0.0f64..=1.0, ttls, scopes),
        (
            prop::option::of(prop::collection::vec(text(40), 0..=12)),
            prop::option::of(prop::collection::vec(text(80), 0..=32)),
            timestamp(),
            id(),
            sources,
        ),
    )
        .prop_map(
            |(
                (id, kind, claim, pointers, confidence, ttl, scope),
                (tags, hash_keys, created_at, created_by, source),
            )| {
                Engram {
                    id,
                    kind,
                    claim,
                    pointers,
                    confidence,
                    ttl: Ttl::parse(ttl).expect("ttl"),
                    scope,
                    tags,
                    hash_keys,
                    provenance: Provenance { created_at, created_by, source },
                }
            },
        )
}

fn deref_request() -> impl Strategy<Value = DerefRequest> {
    (id(), id(), prop::collection::vec(pointer(), 1..=12), text(200), text(200), prop::option::of(id())).prop_map(
        |(request_id, requester, pointers, reason, intended_use, grant_id)| DerefRequest {
            request_id,
            requester,
            pointers,
            reason,
            intended_use,
            grant_id,
        },
    )
}

fn payload() -> impl Strategy<Value = Payload> {
    let refs = || prop::collection::vec(pointer().prop_map(|p| p.to_string()), 0..=12);
    prop_oneof![
        (id(), refs(), prop::collection::vec(id(), 0..=16)).prop_map(|(task, symbols, capsules)| Payload::TaskClaim {
            task,
            symbols,
            capsules
        }),
        (
            id(),
            prop::sample::select(vec![TaskStatus::Pass, TaskStatus::Fail, TaskStatus::Partial]),
            prop::collection::vec(0u32..100, 0..8),
            prop::option::of(id()),
            prop::option::of(id())
        )
            .prop_map(|(task, status, criteria, commit, capsule)| Payload::TaskResult {
                task,
                status,
                criteria,
                commit,
                capsule
            }),
        (text(500), prop::sample::select(vec![Severity::Info, Severity::Warning, Severity::Blocker]), refs())
            .prop_map(|(reason, severity, refs)| Payload::Escalation { reason, severity, refs }),
        (text(500), refs()).prop_map(|(question, refs)| Payload::Question { question, refs }),
        (
            0u32..1000,
            prop::sample::select(vec![
                WaveState::Started,
                WaveState::InProgress,
                WaveState::Complete,
                WaveState::Blocked
            ]),
            prop::collection::vec(id(), 0..=16)
        )
            .prop_map(|(wave, state, capsules)| Payload::Checkpoint { wave, state, capsules }),
    ]
}

fn message() -> impl Strategy<Value = TypedMessage> {
    (
        id(),
        id(),
        prop::option::of(id()),
        prop::collection::vec(engram(), 0..3),
        prop::collection::vec(deref_request(), 0..2),
        prop::option::of(text(300)),
        payload(),
    )
        .prop_map(|(from, msg_id, to, engrams, deref_requests, body, payload)| TypedMessage {
            from,
            msg_id,
            to,
            engrams,
            deref_requests,
            body,
            grant_id: None,
            payload,
        })
}

fn grant() -> impl Strategy<Value = Grant> {
    (
        id(),
        id(),
        id(),
        prop::collection::vec(pointer().prop_map(|p| p.to_string()), 1..=12),
        1u32..50,
        1u32..5000,
        timestamp(),
        1u32..10,
        any::<[u8; 32]>(),
    )
        .prop_map(|(grant_id, issuer, grantee, patterns, max_derefs, max_tokens, expires_at, uses, secret)| {
            let terms = GrantTerms {
                grant_id,
                issuer,
                grantee,
                patterns,
                max_derefs,
                max_tokens,
                inline_code_tokens: 0,
                expires_at,
                uses,
            };
            Grant::issue(terms, &secret)
        })
}

fn assert_round_trip<T: Contract + PartialEq + std::fmt::Debug + Clone>(value: T) -> Result<(), TestCaseError> {
    let valid = Valid::new(value.clone()).map_err(|v| TestCaseError::fail(format!("generated value invalid: {v}")))?;
    let doc = valid.to_value();
    let back = Valid::<T>::from_value(&doc).map_err(|v| TestCaseError::fail(v.to_string()))?;
    prop_assert_eq!(back.into_inner(), value);
    let text = serde_json::to_string(&doc).expect("serializes");
    let reparsed: Value = serde_json::from_str(&text).expect("parses");
    prop_assert_eq!(reparsed, doc);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn engrams_round_trip(value in engram()) {
        assert_round_trip(value)?;
    }

    #[test]
    fn deref_requests_round_trip(value in deref_request()) {
        assert_round_trip(value)?;
    }

    #[test]
    fn messages_round_trip(value in message()) {
        assert_round_trip(value)?;
    }

    #[test]
    fn grants_round_trip(value in grant()) {
        assert_round_trip(value)?;
    }
}

#[test]
fn wire_names_match_serde() {
    use crate::engram::{EngramKind::*, Scope::*};
    for kind in [Fact, Decision, Risk, Todo, Constraint, Diff, Test, Perf, Policy] {
        assert_eq!(serde_json::to_value(kind).expect("kind"), Value::String(kind.as_str().to_owned()));
    }
    for scope in [Run, Project, Org, Global] {
        assert_eq!(serde_json::to_value(scope).expect("scope"), Value::String(scope.as_str().to_owned()));
    }
}
