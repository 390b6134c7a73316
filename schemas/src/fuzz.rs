//! Property-based fuzzing of the contract's parsers of untrusted input (issue 17): the document validator (every
//! kind, as structured mutations of the shipped examples and as raw text), the pointer grammar, digests, ttls and
//! scenario TOML.
//!
//! The properties: no panic; no hang (every generated input is bounded); every refusal carries a code from the set
//! the parser documents; a document that is accepted round-trips (typed value → JSON → typed value, and JSON → text →
//! JSON). The number of cases is `PROPTEST_CASES` (a modest default keeps `cargo test` fast); `scripts/fuzz.sh` runs
//! every `fuzz_` test of the workspace with as many as it is given. A failing input is kept by proptest under
//! `proptest-regressions/fuzz.txt` and replayed first on every later run.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Value};

use crate::error::{ErrorCode, Violation};
use crate::schema::DocKind;
use crate::{
    Budget, Contract, DerefRequest, Digest, Engram, Grant, Pointer, Scenario, SharedBriefMicro, Step, Ttl,
    TypedMessage, Valid, parse_document, validate, validate_inferred,
};

/// The cases of one fuzz target: `PROPTEST_CASES` when set, else `default`.
pub(crate) fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default);
    ProptestConfig { cases, max_shrink_iters: 4096, ..ProptestConfig::default() }
}

/// Strings an attacker would try: pointer and ttl shapes, traversal, control characters, long runs, any Unicode.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>().prop_map(|s| s.chars().take(64).collect()),
        2 => "[a-z]{1,8}:[ -~]{0,40}",
        1 => "(repo|artifact|sam|diff|test|url):(\\.\\./|/|%2e%2e/|[a-z]{1,6}/){0,4}[a-z.]{0,10}(#L[0-9]{1,12}(-L[0-9]{1,12})?)?(@[0-9a-f]{0,12})?",
        1 => "P([0-9]{1,22}[YMWD]){0,3}(T([0-9]{1,22}(\\.[0-9]{1,400})?[HMS]){1,3})?",
        1 => "blake3:[0-9a-fA-F]{60,68}",
        1 => "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})",
        1 => "[\\x00-\\x1f\\u{7f}\\u{200b}\\u{202e}\\u{feff}]{0,8}",
        1 => (1usize..3000, any::<char>()).prop_map(|(n, c)| std::iter::repeat_n(c, n).collect()),
        1 => Just(String::new()),
        1 => Just(" \t\n".to_owned()),
    ]
}

/// Any JSON value of bounded size and depth.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![Just(0i64), Just(-1), Just(1), Just(i64::from(u32::MAX) + 1)].prop_map(Value::from),
        nasty_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,12}", inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every place in `doc`, as a path of keys and indexes.
fn places(doc: &Value) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    let mut stack = vec![(Vec::<String>::new(), doc)];
    while let Some((path, value)) = stack.pop() {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
            Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            _ => Vec::new(),
        };
        for (key, child) in children {
            let mut at = path.clone();
            at.push(key);
            out.push(at.clone());
            stack.push((at, child));
        }
    }
    out
}

fn at_mut<'a>(doc: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(doc, |value, key| match value {
        Value::Object(map) => map.get_mut(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

/// One edit of a document.
#[derive(Debug, Clone)]
enum Edit {
    /// The value at a place replaced.
    Set(prop::sample::Index, Value),
    /// The value at a place removed from its object or array.
    Remove(prop::sample::Index),
    /// A key added to the object at a place (or an item to an array).
    Add(prop::sample::Index, String, Value),
    /// The string at a place replaced by an attacker's string.
    Text(prop::sample::Index, String),
    /// The array at a place made long (over a count limit).
    Repeat(prop::sample::Index, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let key = prop_oneof!["[a-z_]{1,16}", Just("grant_id".to_owned()), Just("scope".to_owned())];
    prop_oneof![
        3 => (any::<prop::sample::Index>(), json_value()).prop_map(|(i, v)| Edit::Set(i, v)),
        2 => any::<prop::sample::Index>().prop_map(Edit::Remove),
        1 => (any::<prop::sample::Index>(), key, json_value()).prop_map(|(i, k, v)| Edit::Add(i, k, v)),
        3 => (any::<prop::sample::Index>(), nasty_string()).prop_map(|(i, s)| Edit::Text(i, s)),
        1 => (any::<prop::sample::Index>(), 1usize..40).prop_map(|(i, n)| Edit::Repeat(i, n)),
    ]
}

fn apply(doc: &mut Value, edit: &Edit) {
    let all = places(doc);
    let pick = |index: &prop::sample::Index| index.get(&all).clone();
    match edit {
        Edit::Set(i, value) => {
            if let Some(place) = at_mut(doc, &pick(i)) {
                *place = value.clone();
            }
        }
        Edit::Remove(i) => {
            let mut path = pick(i);
            if let Some(last) = path.pop() {
                match at_mut(doc, &path) {
                    Some(Value::Object(map)) => {
                        map.remove(&last);
                    }
                    Some(Value::Array(items)) => {
                        if let Ok(n) = last.parse::<usize>()
                            && n < items.len()
                        {
                            items.remove(n);
                        }
                    }
                    _ => {}
                }
            }
        }
        Edit::Add(i, key, value) => match at_mut(doc, &pick(i)) {
            Some(Value::Object(map)) => {
                map.insert(key.clone(), value.clone());
            }
            Some(Value::Array(items)) => items.push(value.clone()),
            _ => {}
        },
        Edit::Text(i, text) => {
            if let Some(place) = at_mut(doc, &pick(i))
                && place.is_string()
            {
                *place = Value::String(text.clone());
            }
        }
        Edit::Repeat(i, n) => {
            if let Some(Value::Array(items)) = at_mut(doc, &pick(i))
                && let Some(first) = items.first().cloned()
            {
                items.extend(std::iter::repeat_n(first, *n));
            }
        }
    }
}

/// The shipped example of each document kind (a typed message has one per type).
fn examples() -> Vec<(DocKind, Value)> {
    let parse = |text: &str| serde_json::from_str::<Value>(text).expect("a shipped example is JSON");
    vec![
        (DocKind::Engram, parse(include_str!("../examples/engram.json"))),
        (DocKind::Pointer, parse(include_str!("../examples/pointer.json"))),
        (DocKind::Brief, parse(include_str!("../examples/shared_brief_micro.json"))),
        (DocKind::Grant, parse(include_str!("../examples/grant.json"))),
        (DocKind::Deref, parse(include_str!("../examples/deref_request.json"))),
        (DocKind::Budget, parse(include_str!("../examples/budget.json"))),
        (DocKind::Message, parse(include_str!("../examples/message.json"))),
        (DocKind::Message, parse(include_str!("../examples/task_claim.json"))),
        (DocKind::Message, parse(include_str!("../examples/task_result.json"))),
        (DocKind::Message, parse(include_str!("../examples/escalation.json"))),
        (DocKind::Message, parse(include_str!("../examples/question.json"))),
        (DocKind::Message, parse(include_str!("../examples/checkpoint.json"))),
        (DocKind::Message, parse(include_str!("../examples/gate_report.json"))),
    ]
}

/// What a violation must be: a code of `allowed`, a message, and a path that is empty or a JSON pointer.
fn check_violation(violation: &Violation, allowed: &[ErrorCode]) -> Result<(), TestCaseError> {
    prop_assert!(allowed.contains(&violation.code), "unexpected code {}: {violation}", violation.code);
    prop_assert!(ErrorCode::ALL.contains(&violation.code));
    prop_assert!(!violation.message.trim().is_empty(), "a refusal says why: {violation:?}");
    prop_assert!(violation.path.is_empty() || violation.path.starts_with('/'), "path {:?}", violation.path);
    Ok(())
}

/// The codes document validation may give.
const VALIDATION_CODES: [ErrorCode; 10] = [
    ErrorCode::SchemaInvalid,
    ErrorCode::TtlInvalid,
    ErrorCode::DigestInvalid,
    ErrorCode::PointerInvalid,
    ErrorCode::SourceRequired,
    ErrorCode::TextEmpty,
    ErrorCode::BriefTooLong,
    ErrorCode::ScenarioInvalid,
    ErrorCode::KindUnknown,
    ErrorCode::JsonMalformed,
];

/// An accepted document converts to its type, and back to a document that is accepted and converts to the same.
fn round_trip<T: Contract>(doc: &Value) -> Result<(), TestCaseError> {
    let valid = Valid::<T>::from_value(doc)
        .map_err(|v| TestCaseError::fail(format!("schema and type disagree on an accepted document: {v}\n{doc}")))?;
    let again = valid.to_value();
    let back = Valid::<T>::from_value(&again)
        .map_err(|v| TestCaseError::fail(format!("a converted document is refused: {v}\n{again}")))?;
    prop_assert_eq!(back.to_value(), again.clone());
    let text = serde_json::to_string(&again).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let reparsed = parse_document(&text).map_err(|v| TestCaseError::fail(v.to_string()))?;
    prop_assert_eq!(reparsed, again);
    Ok(())
}

fn check_document(kind: DocKind, doc: &Value) -> Result<(), TestCaseError> {
    let violations = validate(kind, doc);
    for violation in &violations {
        check_violation(violation, &VALIDATION_CODES)?;
    }
    if violations.is_empty() {
        match kind {
            DocKind::Engram => round_trip::<Engram>(doc)?,
            DocKind::Pointer => round_trip::<Pointer>(doc)?,
            DocKind::Brief => round_trip::<SharedBriefMicro>(doc)?,
            DocKind::Grant => round_trip::<Grant>(doc)?,
            DocKind::Deref => round_trip::<DerefRequest>(doc)?,
            DocKind::Budget => round_trip::<Budget>(doc)?,
            DocKind::Message => round_trip::<TypedMessage>(doc)?,
            DocKind::Scenario => {}
        }
    }
    Ok(())
}

/// The text of an example with bytes flipped, inserted and cut.
fn mangled_text() -> impl Strategy<Value = String> {
    let texts: Vec<String> =
        examples().into_iter().map(|(_, doc)| serde_json::to_string_pretty(&doc).expect("JSON")).collect();
    (prop::sample::select(texts), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..8))
        .prop_map(|(text, edits)| {
            let mut bytes = text.into_bytes();
            for (at, byte, op) in edits {
                if bytes.is_empty() {
                    break;
                }
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => bytes.truncate(i),
                }
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
}

/// A scenario's TOML: the shipped example with lines replaced, removed, doubled or added.
fn scenario_text() -> impl Strategy<Value = String> {
    let example = include_str!("../examples/scenario.toml");
    let inserts = prop_oneof![
        nasty_string().prop_map(|s| format!("workspace = {s:?}")),
        "P[0-9]{1,12}[YD]".prop_map(|ttl| format!(
            "grants = [{{ id = \"g9\", to = \"programmer\", patterns = [\"repo:**\"], ttl = \"{ttl}\" }}]"
        )),
        (0usize..200).prop_map(|n| format!("deep = {}{}", "[".repeat(n), "]".repeat(n))),
        (0usize..200).prop_map(|n| format!("deep = {}1{}", "{ a = ".repeat(n), " }".repeat(n))),
        "[a-z_]{1,12} = [ -~]{0,30}",
        "\\[\\[?[a-z.]{1,12}\\]\\]?",
        nasty_string(),
    ];
    let line_edit = (0u8..4, any::<prop::sample::Index>(), inserts);
    (prop::collection::vec(line_edit, 0..6)).prop_map(move |edits| {
        let mut lines: Vec<String> = example.lines().map(str::to_owned).collect();
        for (op, at, text) in edits {
            let i = at.index(lines.len().max(1)).min(lines.len());
            match op {
                0 if i < lines.len() => lines[i] = text,
                1 if i < lines.len() => {
                    lines.remove(i);
                }
                2 if i < lines.len() => {
                    let line = lines[i].clone();
                    lines.insert(i, line);
                }
                _ => lines.insert(i, text),
            }
        }
        lines.join("\n")
    })
}

proptest! {
    #![proptest_config(config(256))]

    /// Every kind of document, as an example with up to four edits: validation never panics, every finding has a
    /// documented code, and an accepted document round-trips through its type.
    #[test]
    fn fuzz_validator_structured(example in prop::sample::select(examples()), edits in prop::collection::vec(edit(), 1..5)) {
        let (kind, mut doc) = example;
        for edit in &edits {
            apply(&mut doc, edit);
        }
        check_document(kind, &doc)?;
        // What the document looks like is a guess the validator makes too.
        let (inferred, violations) = validate_inferred(&doc);
        for violation in &violations {
            check_violation(violation, &VALIDATION_CODES)?;
        }
        if let Some(inferred) = inferred && violations.is_empty() {
            check_document(inferred, &doc)?;
        }
    }

    /// Raw text (arbitrary, or an example's text mangled byte by byte) through the strict parser and the validator.
    #[test]
    fn fuzz_validator_raw_text(text in prop_oneof![mangled_text(), any::<String>(), prop::collection::vec(any::<u8>(), 0..512).prop_map(|b| String::from_utf8_lossy(&b).into_owned())]) {
        match parse_document(&text) {
            Err(violation) => check_violation(&violation, &[ErrorCode::JsonMalformed])?,
            Ok(doc) => {
                let (kind, violations) = validate_inferred(&doc);
                for violation in &violations {
                    check_violation(violation, &VALIDATION_CODES)?;
                }
                if let Some(kind) = kind {
                    check_document(kind, &doc)?;
                }
            }
        }
    }

    /// The pointer text form: a parsed pointer prints as what it parses from again; a refusal is a pointer or
    /// digest code.
    #[test]
    fn fuzz_pointer_parse(text in nasty_string()) {
        match Pointer::parse(&text) {
            Ok(pointer) => {
                let printed = pointer.to_string();
                let again = Pointer::parse(&printed).map_err(|v| TestCaseError::fail(format!("{printed:?}: {v}")))?;
                prop_assert_eq!(&again, &pointer);
                prop_assert_eq!(again.to_string(), printed);
                let doc = serde_json::to_value(&pointer).map_err(|e| TestCaseError::fail(e.to_string()))?;
                check_document(DocKind::Pointer, &doc)?;
            }
            Err(violation) => check_violation(&violation, &[ErrorCode::PointerInvalid, ErrorCode::DigestInvalid])?,
        }
    }

    /// Durations and digests: accepted text keeps its form; refused text has its code; nothing panics.
    #[test]
    fn fuzz_ttl_and_digest(text in nasty_string()) {
        match Ttl::parse(&text) {
            Ok(ttl) => prop_assert_eq!(ttl.as_str(), text.as_str()),
            Err(violation) => check_violation(&violation, &[ErrorCode::TtlInvalid])?,
        }
        match Digest::parse(&text) {
            Ok(digest) => prop_assert_eq!(digest.to_string(), text.clone()),
            Err(violation) => check_violation(&violation, &[ErrorCode::DigestInvalid])?,
        }
    }

    /// Scenario TOML (the example with lines edited, or any text): loaded or refused with documented codes; a
    /// loaded scenario's grants can all be issued (their expiry computed) without a panic.
    #[test]
    fn fuzz_scenario_toml(text in prop_oneof![4 => scenario_text(), 1 => any::<String>()]) {
        let base = std::env::temp_dir();
        match Scenario::from_toml(&text, Path::new(&base)) {
            Err(violations) => {
                prop_assert!(!violations.0.is_empty());
                for violation in &violations.0 {
                    check_violation(violation, &VALIDATION_CODES)?;
                }
            }
            Ok(scenario) => {
                let now = time::OffsetDateTime::now_utc();
                for step in &scenario.steps {
                    if let Step::Brief { agent, grants, .. } = step {
                        for grant in grants {
                            if let Err(violation) = grant.terms(agent, now) {
                                check_violation(&violation, &[ErrorCode::TtlInvalid])?;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Found by fuzzing: counters the schema took (`4294967296`, `-0.0`, `2.0`) and the typed document could not hold,
/// so `validate` said valid and the gateway's conversion refused. Now `validate` refuses them, with a path when the
/// schema's bound catches it.
#[test]
fn found_by_fuzzing_counters_the_type_cannot_hold_are_refused() {
    let budget = serde_json::json!({"max_inline_tokens": 4_294_967_296_u64});
    let violations = validate(DocKind::Budget, &budget);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!((violations[0].code, violations[0].path.as_str()), (ErrorCode::SchemaInvalid, "/max_inline_tokens"));
    let mut result: Value = serde_json::from_str(include_str!("../examples/task_result.json")).expect("example");
    for bad in [serde_json::json!(-0.0), serde_json::json!(2.0)] {
        result["criteria"] = Value::Array(vec![bad.clone()]);
        let violations = validate(DocKind::Message, &result);
        assert_eq!(violations.len(), 1, "{bad}: {violations:?}");
        assert_eq!(violations[0].code, ErrorCode::SchemaInvalid, "{bad}");
        assert!(violations[0].message.contains("without a fraction"), "{}", violations[0].message);
    }
    result["criteria"] = serde_json::json!([2]);
    assert!(validate(DocKind::Message, &result).is_empty());
}
