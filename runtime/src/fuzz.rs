//! Property-based fuzzing of what the runtime reads from outside (issue 17): the transcript parser (what `memory
//! ingest`, `dag` and `compact` read), the context compactor, the desk's functions that the MCP tools call, with
//! arbitrary arguments, and the workspace chunker on adversarial nesting in every language it parses.
//!
//! The properties: no panic; no hang (inputs are bounded); every refusal carries a code the function documents;
//! what parses round-trips; the compactor never fails (it would fail closed, hiding the failure, so a warning is a
//! failure here) and never grows the chat; a deref never returns a byte from outside the workspace.
//! Cases: `PROPTEST_CASES`, else a modest default; `scripts/fuzz.sh` runs every `fuzz_` test with its count.
//! Failing inputs are kept under `proptest-regressions/fuzz.txt`.

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::context::{ChatMessage, CompactConfig, compact_report, compact_stats};
use crate::dag::NewMessage;
use crate::desk::{Desk, DeskConfig, NewCapsule, NewGrant};
use less_contract::{ErrorCode, GateStatus, Scope, Violation};

/// The cases of one fuzz target: `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default);
    ProptestConfig { cases, max_shrink_iters: 2048, ..ProptestConfig::default() }
}

fn check(violation: &Violation, allowed: &[ErrorCode]) -> Result<(), TestCaseError> {
    prop_assert!(allowed.contains(&violation.code), "unexpected code {}: {violation}", violation.code);
    prop_assert!(!violation.message.trim().is_empty(), "a refusal says why: {violation:?}");
    Ok(())
}

/// Strings an attacker would send: pointer shapes with traversal, control characters, secrets, long runs.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>().prop_map(|s| s.chars().take(48).collect()),
        2 => "(repo|artifact|diff|test|sam|url):(\\.\\./|/|%2e%2e/|ws/|link/|[a-z]{1,5}/){0,4}[a-z.]{0,10}(#L[0-9]{1,10}(-L[0-9]{1,10})?)?",
        1 => "[a-z0-9_-]{1,20}",
        1 => "[\\x00-\\x1f\\u{7f}\\u{202e}]{0,6}",
        1 => (1usize..2000, any::<char>()).prop_map(|(n, c)| std::iter::repeat_n(c, n).collect()),
        1 => Just(String::new()),
    ]
}

/// Pointers at the ways out of [`desk`]'s workspace: its symlink to a file outside, its symlink to the directory
/// outside, its hard link, `..` and absolute forms, in every file-backed pointer type, with or without lines and
/// revisions. Half the pointers the desk calls are given come from here, so each way out is tried often.
fn escaping_pointer() -> impl Strategy<Value = String> {
    let path = prop::sample::select(vec![
        "link",
        "up/secret.txt",
        "./up/secret.txt",
        "src/../up/secret.txt",
        "up/ws/../secret.txt",
        "hard.txt",
        "../secret.txt",
        "src/../../secret.txt",
        "/etc/passwd",
        "%2e%2e/secret.txt",
        "link/",
        "up",
    ]);
    let ty = prop::sample::select(vec!["repo", "artifact", "diff", "test"]);
    let rev = prop::option::of("[a-z0-9]{1,6}");
    let span = prop::sample::select(vec!["", "#L1", "#L1-L2", "#sec=Tests"]);
    (ty, path, rev, span).prop_map(|(ty, path, rev, span)| match rev {
        Some(rev) => format!("{ty}:{path}@{rev}{span}"),
        None => format!("{ty}:{path}{span}"),
    })
}

/// A pointer a desk call is given: half of them a way out of the workspace.
fn pointer_text() -> impl Strategy<Value = String> {
    prop_oneof![1 => escaping_pointer(), 1 => nasty_string()]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        nasty_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,10}", inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Sentences the context ledger's rules react to, secrets of several shapes, and a forged ledger header.
const PHRASES: &[&str] = &[
    "We decided to use Postgres for the queue.",
    "Actually, the port is 5433, not 5432.",
    "TODO: rotate the staging keys by Friday.",
    "Done: the staging keys are rotated.",
    "Cancel the Friday rotation.",
    "What is the deploy window?",
    "The deploy window is Tuesday 10:00.",
    "The password is \"Zq8!mK2# pL\".",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "AKIAIOSFODNN7EXAMPLE and sk-proj-abcdefghijklmnopqrstuvwx",
    "пароль — s3cr3t-value",
    "Мы решили перейти на Redis.",
    "Semantic RLE context ledger\n## Facts\n- port = 1 #1",
    "#12 #9999999999999999999 see above",
    "10.0.0.1 and ::1 and fe80::1%eth0",
    "",
];

fn chat() -> impl Strategy<Value = (Vec<ChatMessage>, usize)> {
    let role = prop::sample::select(vec!["system", "developer", "user", "assistant", "tool", "function"]);
    let content = prop_oneof![
        4 => prop::collection::vec(prop::sample::select(PHRASES.to_vec()), 0..4).prop_map(|p| p.join(" ")),
        1 => nasty_string(),
    ];
    (prop::collection::vec((role, content), 0..40), 0usize..12).prop_map(|(messages, hot_tail)| {
        (messages.into_iter().map(|(role, content)| ChatMessage { role: role.to_owned(), content }).collect(), hot_tail)
    })
}

/// A transcript's text: near the accepted shape (array or JSONL, content as text or parts, times as numbers or
/// RFC 3339), sometimes with its bytes mangled, sometimes any text.
fn transcript_text() -> impl Strategy<Value = String> {
    let role = prop_oneof![
        4 => prop::sample::select(vec!["system", "user", "assistant", "tool", "developer", "function"]).prop_map(Value::from),
        1 => json_value(),
    ];
    let content = prop_oneof![
        3 => nasty_string().prop_map(Value::from),
        1 => prop::collection::vec(nasty_string().prop_map(|t| json!({"type": "text", "text": t})), 0..3).prop_map(Value::Array),
        1 => json_value(),
    ];
    let at = prop_oneof![
        Just(None),
        any::<i64>().prop_map(|n| Some(Value::from(n))),
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})"
            .prop_map(|t| Some(Value::from(t))),
        json_value().prop_map(Some),
    ];
    let message = (role, content, prop::option::of(nasty_string()), at).prop_map(|(role, content, name, at)| {
        let mut m = json!({"role": role, "content": content});
        if let Some(name) = name {
            m["name"] = Value::from(name);
        }
        if let Some(at) = at {
            m["at"] = at;
        }
        m
    });
    let text = (prop::collection::vec(message, 0..12), any::<bool>()).prop_map(|(messages, jsonl)| {
        if jsonl {
            messages.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
        } else {
            Value::Array(messages).to_string()
        }
    });
    let text = text.boxed();
    let mangled = (text.clone(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)).prop_map(
        |(text, edits)| {
            let mut bytes = text.into_bytes();
            for (at, byte) in edits {
                let i = at.index(bytes.len().max(1));
                if i < bytes.len() {
                    bytes[i] = byte;
                }
            }
            String::from_utf8_lossy(&bytes).into_owned()
        },
    );
    prop_oneof![4 => text, 2 => mangled, 1 => any::<String>()]
}

proptest! {
    #![proptest_config(config(256))]

    /// The transcript parser of `memory ingest` and `compact`: refusals are `LESS_JSON_MALFORMED` or
    /// `LESS_TRANSCRIPT_INVALID`; what parses, written again as a JSON array, parses to the same messages.
    #[test]
    fn fuzz_transcript_parse(text in transcript_text()) {
        match crate::dag::parse_transcript(&text) {
            Err(violation) => check(&violation, &[ErrorCode::JsonMalformed, ErrorCode::TranscriptInvalid])?,
            Ok(messages) => {
                let again = serde_json::to_string(&messages).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let back: Vec<NewMessage> = crate::dag::parse_transcript(&again)
                    .map_err(|v| TestCaseError::fail(format!("{again}: {v}")))?;
                prop_assert_eq!(back, messages);
            }
        }
        match crate::context::parse_transcript(&text) {
            Err(violation) => check(&violation, &[ErrorCode::JsonMalformed, ErrorCode::TranscriptInvalid])?,
            Ok(messages) => {
                let again = serde_json::to_string(&messages).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let back = crate::context::parse_transcript(&again).map_err(|v| TestCaseError::fail(v.to_string()))?;
                prop_assert_eq!(back, messages);
            }
        }
    }

    /// The context compactor on any chat: the engine never fails (a warning means it panicked, erred or broke the
    /// output's shape and the input came back), the hot tail is kept, and the output is never larger.
    #[test]
    fn fuzz_compact((messages, hot_tail) in chat()) {
        let config = CompactConfig { hot_tail, ..CompactConfig::default() };
        let compaction = compact_report(&messages, &config);
        prop_assert!(compaction.warning.is_none(), "the compactor failed: {:?}", compaction.warning);
        let stats = compact_stats(&messages, &compaction.messages, &config);
        prop_assert!(stats.hot_tail_unchanged);
        prop_assert!(stats.tokens_out <= stats.tokens_in, "{stats:?}");
        // Compacting the output again is a fixed point (the module's "idempotent"): the same messages, byte for byte.
        let again = compact_report(&compaction.messages, &config);
        prop_assert!(again.warning.is_none(), "the compactor failed on its own output: {:?}", again.warning);
        prop_assert_eq!(&again.messages, &compaction.messages, "a second compaction changed the output");
    }
}

/// The pieces an adversarial file of each language the chunker parses is made of, the ones that nest first (how
/// many): openers, markers a grammar's scanner keeps a stack for (YAML's `- ` and `key:`, Python's indentation and
/// f-strings, Markdown's quotes and lists), then strings, words and line breaks.
const CHUNK_PIECES: &[(&str, usize, &[&str])] = &[
    (
        "f.yaml",
        6,
        &[
            "- ", "? ", ": ", "k: ", "- k: ", "[", "\n", " ", "\t", "|\n", ">2-\n", "{", "\"", "'", "# c", "a",
            "---\n", "&a ", "!t ",
        ],
    ),
    (
        "f.py",
        4,
        &["if x:\n", "f\"{", "(", "[", " ", "\t", "}\"", "\"\"\"", "class C:\n", "def f():\n", "\n", "x", "\\\n"],
    ),
    ("f.rs", 6, &["mod m {", "impl X {", "fn f() {", "{", "(", "[", "}", "\"", "r#\"", "\n", "trait T {", "x"]),
    ("f.ts", 5, &["namespace n {", "class C {", "{", "(", "`${", "interface I {", "[", "\n", "x", "export "]),
    ("f.tsx", 3, &["<a>", "{", "(", "class C {", "\n", "x", "</a>"]),
    ("f.js", 4, &["class C {", "{", "(", "`${", "[", "\n", "x", "}"]),
    ("f.go", 3, &["func f() {", "{", "(", "[", "\n", "x", "type T struct {"]),
    ("f.md", 4, &["> ", "- ", "1. ", "    ", "```", "\n", "# ", "x", "* ", "<div>"]),
    ("f.toml", 3, &["[", "{a=", "a = [", "[[t]]\n", "a = ", "\n", "\"\"\"", "x", "]", "}"]),
];

/// A file of one language: random pieces, a run of one nesting piece repeated, a staircase (one piece per line, each
/// line indented a step further) ending in a run at its deepest indentation, and random pieces again: nesting
/// deep enough to reach past every scanner's limits and any recursion's.
fn adversarial_file() -> impl Strategy<Value = (String, String)> {
    (0..CHUNK_PIECES.len()).prop_flat_map(|lang| {
        let (_, nesting, pieces) = CHUNK_PIECES[lang];
        let (n, nest) = (pieces.len(), 0..nesting);
        (
            Just(lang),
            prop::collection::vec(0..n, 0..4),
            (nest.clone(), 0usize..1200),
            (nest.clone(), 0usize..600, 1usize..4),
            (0..n, 0usize..4),
            prop::collection::vec(0..n, 0..12),
        )
            .prop_map(|(lang, before, (run, times), (step, stairs, width), (tail, tails), after)| {
                let (name, _, pieces) = CHUNK_PIECES[lang];
                // Each part starts a line: what comes before (an open string, a flow collection) must not swallow
                // the nesting.
                let mut text: String = before.iter().map(|i| pieces[*i]).collect();
                text.push('\n');
                text.push_str(&pieces[run].repeat(times));
                text.push('\n');
                for i in 0..stairs {
                    text.push_str(&" ".repeat(i * width));
                    text.push_str(pieces[step]);
                    text.push('\n');
                }
                text.push_str(&" ".repeat(stairs * width));
                text.push_str(&pieces[tail].repeat(tails));
                text.push_str("x\n");
                text.extend(after.iter().map(|i| pieces[*i]));
                (name.to_owned(), text)
            })
    })
}

proptest! {
    #![proptest_config(config(256))]

    /// The workspace chunker on adversarial nesting: it never ends the process (a grammar's scanner aborting, a
    /// stack overflow: either kills this test binary) and every line that says something is in some chunk.
    #[test]
    fn fuzz_chunk_nesting((name, text) in adversarial_file()) {
        let chunks = crate::workspace::chunk_file(&name, &text);
        for (n, line) in text.lines().enumerate() {
            let line_no = u32::try_from(n + 1).unwrap_or(u32::MAX);
            if line.chars().any(char::is_alphanumeric) {
                prop_assert!(chunks.iter().any(|c| c.start <= line_no && line_no <= c.end), "line {} in no chunk", line_no);
            }
        }
    }
}

/// One call of a desk function, as an MCP tool makes it.
#[derive(Debug, Clone)]
enum Call {
    Validate(Value, Option<String>),
    Put(Value),
    Query(String, Option<usize>, Option<String>),
    Deref(Vec<String>, Option<String>),
    RequestDeref(Vec<String>, String),
    IssueGrant(String, Vec<String>, Option<u32>, Option<String>, Option<u32>),
    Checkpoint,
    Expand(String),
    ExpandQuery(String, Option<u32>),
    Impact(String, Option<f64>),
    Compact(Value, Option<usize>),
    SymbolSet(String, String),
    SymbolResolve(String, bool),
    CapsuleWrite(String, String, Vec<String>),
    CapsuleHydrate(Vec<String>),
    BlackboardSet(String, String),
    BlackboardGet(String),
    GateReport(String, String, Option<bool>),
}

fn call() -> impl Strategy<Value = Call> {
    let s = nasty_string;
    let strings = || prop::collection::vec(nasty_string(), 0..5);
    let pointers = || prop::collection::vec(pointer_text(), 0..5);
    let engram = prop_oneof![
        json_value(),
        (s(), s(), s()).prop_map(|(id, claim, pointer)| {
            let mut doc: Value =
                serde_json::from_str(include_str!("../../schemas/examples/engram.json")).expect("example");
            doc["id"] = Value::from(id);
            doc["claim"] = Value::from(claim);
            doc["pointers"][0]["ref"] = Value::from(pointer);
            doc
        }),
        (s(), pointer_text())
            .prop_map(|(claim, pointer)| serde_json::json!({"kind": "fact", "claim": claim, "pointers": [pointer]})),
        // As a host's model writes one: no id or provenance (the desk completes it), a pointer as text.
        (s(), s())
            .prop_map(|(claim, pointer)| serde_json::json!({"kind": "fact", "claim": claim, "pointers": [pointer]})),
    ];
    prop_oneof![
        (json_value(), prop::option::of(s())).prop_map(|(d, k)| Call::Validate(d, k)),
        engram.prop_map(Call::Put),
        (s(), prop::option::of(any::<usize>()), prop::option::of(s())).prop_map(|(q, k, sc)| Call::Query(q, k, sc)),
        (pointers(), prop::option::of(s())).prop_map(|(p, g)| Call::Deref(p, g)),
        (pointers(), s()).prop_map(|(p, r)| Call::RequestDeref(p, r)),
        (s(), pointers(), prop::option::of(any::<u32>()), prop::option::of(s()), prop::option::of(any::<u32>()))
            .prop_map(|(to, p, u, t, m)| Call::IssueGrant(to, p, u, t, m)),
        Just(Call::Checkpoint),
        s().prop_map(Call::Expand),
        (s(), prop::option::of(any::<u32>())).prop_map(|(q, m)| Call::ExpandQuery(q, m)),
        (s(), prop::option::of(any::<f64>())).prop_map(|(p, c)| Call::Impact(p, c)),
        (json_value(), prop::option::of(any::<usize>())).prop_map(|(m, h)| Call::Compact(m, h)),
        (s(), s()).prop_map(|(i, v)| Call::SymbolSet(i, v)),
        (s(), any::<bool>()).prop_map(|(t, r)| Call::SymbolResolve(t, r)),
        (s(), s(), strings()).prop_map(|(i, w, d)| Call::CapsuleWrite(i, w, d)),
        strings().prop_map(Call::CapsuleHydrate),
        (s(), s()).prop_map(|(k, v)| Call::BlackboardSet(k, v)),
        s().prop_map(Call::BlackboardGet),
        (s(), pointer_text(), prop::option::of(any::<bool>())).prop_map(|(g, r, st)| Call::GateReport(g, r, st)),
    ]
}

/// What a desk call may answer with when it refuses.
const DESK_CODES: [ErrorCode; 16] = [
    ErrorCode::TranscriptInvalid,
    ErrorCode::ArgumentInvalid,
    ErrorCode::KindUnknown,
    ErrorCode::SchemaInvalid,
    ErrorCode::TtlInvalid,
    ErrorCode::PointerInvalid,
    ErrorCode::SourceRequired,
    ErrorCode::TextEmpty,
    ErrorCode::DigestInvalid,
    ErrorCode::PointerUnresolved,
    ErrorCode::DigestMismatch,
    ErrorCode::DerefDenied,
    ErrorCode::GrantInvalid,
    ErrorCode::ScopeDenied,
    ErrorCode::RateLimited,
    ErrorCode::IdConflict,
];

/// A text only the file outside the workspace holds.
const OUTSIDE: &str = "OUTSIDE-THE-WORKSPACE-7f3a";

/// One desk over a real store, its workspace holding a symlink and a hard link to a file outside it.
fn desk() -> (Desk, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join("src")).expect("mkdir");
    std::fs::write(workspace.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").expect("write");
    std::fs::write(workspace.join("REPORT.md"), "# Tests\n\ntest result: ok. 3 passed; 0 failed\n").expect("write");
    std::fs::write(dir.path().join("secret.txt"), format!("{OUTSIDE}\n")).expect("write");
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), workspace.join("link")).expect("symlink");
    std::os::unix::fs::symlink(dir.path(), workspace.join("up")).expect("symlink");
    // A hard link is the same file under a name inside: it is refused only if the resolver looks past the name.
    let _ = std::fs::hard_link(dir.path().join("secret.txt"), workspace.join("hard.txt"));
    let config = DeskConfig::from_toml(
        "project = \"demo\"\n[clients.lead]\nrole = \"lead\"\n[clients.dev]\nrole = \"dev\"\nparent = \"lead\"\n\
         [clients.other]\nrole = \"dev\"\nproject = \"elsewhere\"\n",
    )
    .expect("config");
    let desk = Desk::open(&dir.path().join("store"), Some(&workspace), config).expect("desk");
    (desk, dir)
}

fn run_call(desk: &Desk, who: &crate::desk::Client, call: &Call) -> Result<(), TestCaseError> {
    let outcome: Result<String, Violation> = match call {
        Call::Validate(doc, kind) => desk.validate(doc, kind.as_deref()).map(|(k, v)| format!("{k:?} {v:?}")),
        Call::Put(engram) => desk.put_engram(who, engram).map(|a| a.id),
        Call::Query(query, k, scope) => {
            let scope = scope.as_deref().and_then(|s| serde_json::from_value::<Scope>(Value::from(s)).ok());
            desk.query(who, query, *k, None, scope).map(|hits| format!("{hits:?}"))
        }
        Call::Deref(pointers, grant) => desk
            .deref(who, pointers, grant.as_deref())
            .map(|(items, _)| items.into_iter().map(|i| i.content).collect::<Vec<_>>().join("\n")),
        Call::RequestDeref(pointers, reason) => desk.request_deref(who, pointers, reason),
        Call::IssueGrant(to, patterns, uses, ttl, max_tokens) => desk
            .issue_grant(
                who,
                &NewGrant {
                    to: to.clone(),
                    patterns: patterns.clone(),
                    uses: *uses,
                    ttl: ttl.clone(),
                    max_tokens: *max_tokens,
                    answers: None,
                },
            )
            .map(|g| g.terms.grant_id.clone()),
        Call::Checkpoint => desk.checkpoint(who).map(|(r, h)| format!("{r:?} {h:?}")),
        Call::Expand(id) => desk.expand(who, id).map(|v| v.to_string()),
        Call::ExpandQuery(question, max_tokens) => desk.expand_query(who, question, *max_tokens).map(|v| v.to_string()),
        Call::Impact(pointer, min) => desk.impact(who, pointer, *min).map(|v| v.to_string()),
        Call::Compact(messages, hot_tail) => {
            // A hot tail as large as a client may send: the compactor keeps that many messages at most.
            desk.compact(messages, *hot_tail).map(|v| v.to_string())
        }
        Call::SymbolSet(id, value) => desk.symbol_set(who, id, value).map(|()| String::new()),
        Call::SymbolResolve(text, reverse) => desk.symbol_resolve(who, text, *reverse).map(|p| format!("{p:?}")),
        Call::CapsuleWrite(id, what, depends) => desk
            .capsule_write(
                who,
                &NewCapsule {
                    id: id.clone(),
                    what: what.clone(),
                    location: None,
                    decision: None,
                    gotcha: None,
                    depends: depends.clone(),
                },
            )
            .map(|c| format!("{c:?}")),
        Call::CapsuleHydrate(ids) => desk.capsule_hydrate(who, ids).map(|c| format!("{c:?}")),
        Call::BlackboardSet(key, value) => desk.blackboard_set(who, key, value).map(|e| format!("{e:?}")),
        Call::BlackboardGet(key) => desk.blackboard_get(who, key).map(|e| format!("{e:?}")),
        Call::GateReport(gate, report, status) => {
            let status = status.map(|pass| if pass { GateStatus::Pass } else { GateStatus::Fail });
            desk.gate_report(who, gate, report, status).map(|(m, _, _)| format!("{:?}", *m))
        }
    };
    match outcome {
        Ok(answer) => prop_assert!(!answer.contains(OUTSIDE), "{call:?} read outside the workspace: {answer}"),
        Err(violation) => check(&violation, &DESK_CODES)?,
    }
    Ok(())
}

/// The desk's functions with arbitrary arguments, as MCP clients (configured, unconfigured, of another project)
/// call them: every refusal has a documented code, and nothing from outside the workspace is ever answered.
#[test]
fn fuzz_desk_calls() {
    let (desk, _dir) = desk();
    let desk = &desk;
    let who = prop_oneof![
        4 => prop::sample::select(vec!["lead", "dev", "other"]).prop_map(str::to_owned),
        1 => nasty_string(),
    ];
    let mut runner = TestRunner::new(ProptestConfig { source_file: Some(file!()), ..config(64) });
    let outcome = runner.run(&(who, prop::collection::vec(call(), 1..4)), |(who, calls)| {
        let who = desk.client(&who);
        for call in &calls {
            run_call(desk, &who, call)?;
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}
