//! Test vectors for validation: every shipped example is valid, and every invalid vector fails with exactly the
//! expected codes at exactly the expected paths.

use serde_json::{Value, json};

use super::*;
use crate::error::ErrorCode::*;

fn example(kind: DocKind) -> Value {
    let text = match kind {
        DocKind::Engram => include_str!("../../examples/engram.json"),
        DocKind::Pointer => include_str!("../../examples/pointer.json"),
        DocKind::Brief => include_str!("../../examples/shared_brief_micro.json"),
        DocKind::Grant => include_str!("../../examples/grant.json"),
        DocKind::Deref => include_str!("../../examples/deref_request.json"),
        DocKind::Message => include_str!("../../examples/message.json"),
        DocKind::Budget => include_str!("../../examples/budget.json"),
        DocKind::Scenario => {
            return crate::scenario_document(include_str!("../../examples/scenario.toml"))
                .expect("example scenario parses");
        }
    };
    serde_json::from_str(text).expect("example is JSON")
}

type Mutation = fn(&mut Value);

/// One invalid vector: start from the kind's example, mutate, expect exactly these (code, path) pairs.
struct Vector {
    name: &'static str,
    kind: DocKind,
    mutate: Mutation,
    expect: &'static [(ErrorCode, &'static str)],
}

fn remove(doc: &mut Value, path: &str) {
    let (parent, key) = path.rsplit_once('/').expect("path has a parent");
    let parent = if parent.is_empty() { doc } else { doc.pointer_mut(parent).expect("parent exists") };
    parent.as_object_mut().expect("parent is an object").remove(key);
}

fn set(doc: &mut Value, path: &str, value: Value) {
    *doc.pointer_mut(path).expect("path exists") = value;
}

fn insert(doc: &mut Value, path: &str, value: Value) {
    let (parent, key) = path.rsplit_once('/').expect("path has a parent");
    let parent = if parent.is_empty() { doc } else { doc.pointer_mut(parent).expect("parent exists") };
    parent.as_object_mut().expect("parent is an object").insert(key.to_owned(), value);
}

fn repo(n: usize) -> Value {
    Value::Array((0..n).map(|i| json!({"type": "repo", "ref": format!("src/f{i}.rs")})).collect())
}

macro_rules! v {
    ($name:expr, $kind:ident, $mutate:expr, [$(($code:ident, $path:expr)),* $(,)?]) => {
        Vector { name: $name, kind: DocKind::$kind, mutate: $mutate, expect: &[$(($code, $path)),*] }
    };
}

fn engram_vectors() -> Vec<Vector> {
    vec![
        v!("claim of 501 chars", Engram, |d| set(d, "/claim", json!("x".repeat(501))), [(SchemaInvalid, "/claim")]),
        v!(
            "claim of 500 multibyte chars is fine, 501 is not",
            Engram,
            |d| set(d, "/claim", json!("я".repeat(501))),
            [(SchemaInvalid, "/claim")]
        ),
        v!("claim not a string", Engram, |d| set(d, "/claim", json!(42)), [(SchemaInvalid, "/claim")]),
        v!("claim blank", Engram, |d| set(d, "/claim", json!("   ")), [(TextEmpty, "/claim")]),
        v!("claim with ESC", Engram, |d| set(d, "/claim", json!("ok \u{1b}[2J PASS")), [(SchemaInvalid, "/claim")]),
        v!("claim with CR", Engram, |d| set(d, "/claim", json!("FAIL\rPASS")), [(SchemaInvalid, "/claim")]),
        v!("claim missing", Engram, |d| remove(d, "/claim"), [(SchemaInvalid, "/claim")]),
        v!("id missing", Engram, |d| remove(d, "/id"), [(SchemaInvalid, "/id")]),
        v!("id blank", Engram, |d| set(d, "/id", json!("")), [(TextEmpty, "/id")]),
        v!("id not a string", Engram, |d| set(d, "/id", json!(7)), [(SchemaInvalid, "/id")]),
        v!("unknown kind", Engram, |d| set(d, "/kind", json!("rumor")), [(SchemaInvalid, "/kind")]),
        v!("kind missing", Engram, |d| remove(d, "/kind"), [(SchemaInvalid, "/kind")]),
        v!("zero pointers", Engram, |d| set(d, "/pointers", json!([])), [(SchemaInvalid, "/pointers")]),
        v!("13 pointers", Engram, |d| set(d, "/pointers", repo(13)), [(SchemaInvalid, "/pointers")]),
        v!(
            "pointers not an array",
            Engram,
            |d| set(d, "/pointers", json!("repo:src/lib.rs")),
            [(SchemaInvalid, "/pointers")]
        ),
        v!("pointers missing", Engram, |d| remove(d, "/pointers"), [(SchemaInvalid, "/pointers")]),
        v!("confidence 1.5", Engram, |d| set(d, "/confidence", json!(1.5)), [(SchemaInvalid, "/confidence")]),
        v!("confidence below 0", Engram, |d| set(d, "/confidence", json!(-0.01)), [(SchemaInvalid, "/confidence")]),
        v!("confidence as text", Engram, |d| set(d, "/confidence", json!("high")), [(SchemaInvalid, "/confidence")]),
        v!("confidence missing", Engram, |d| remove(d, "/confidence"), [(SchemaInvalid, "/confidence")]),
        v!("ttl missing", Engram, |d| remove(d, "/ttl"), [(SchemaInvalid, "/ttl")]),
        v!("ttl in words", Engram, |d| set(d, "/ttl", json!("6 hours")), [(TtlInvalid, "/ttl")]),
        v!("ttl with no components", Engram, |d| set(d, "/ttl", json!("PT")), [(TtlInvalid, "/ttl")]),
        v!("ttl as seconds", Engram, |d| set(d, "/ttl", json!(3600)), [(SchemaInvalid, "/ttl")]),
        v!("unknown scope", Engram, |d| set(d, "/scope", json!("team")), [(SchemaInvalid, "/scope")]),
        v!("scope missing", Engram, |d| remove(d, "/scope"), [(SchemaInvalid, "/scope")]),
        v!("13 tags", Engram, |d| set(d, "/tags", json!(vec!["t"; 13])), [(SchemaInvalid, "/tags")]),
        v!("tag of 41 chars", Engram, |d| set(d, "/tags/0", json!("t".repeat(41))), [(SchemaInvalid, "/tags/0")]),
        v!("tag not a string", Engram, |d| set(d, "/tags/1", json!(1)), [(SchemaInvalid, "/tags/1")]),
        v!("33 hash keys", Engram, |d| set(d, "/hash_keys", json!(vec!["k"; 33])), [(SchemaInvalid, "/hash_keys")]),
        v!(
            "hash key of 81 chars",
            Engram,
            |d| set(d, "/hash_keys/0", json!("k".repeat(81))),
            [(SchemaInvalid, "/hash_keys/0")]
        ),
        v!("provenance missing", Engram, |d| remove(d, "/provenance"), [(SchemaInvalid, "/provenance")]),
        v!(
            "created_at missing",
            Engram,
            |d| remove(d, "/provenance/created_at"),
            [(SchemaInvalid, "/provenance/created_at")]
        ),
        v!(
            "created_by missing",
            Engram,
            |d| remove(d, "/provenance/created_by"),
            [(SchemaInvalid, "/provenance/created_by")]
        ),
        v!("source missing", Engram, |d| remove(d, "/provenance/source"), [(SchemaInvalid, "/provenance/source")]),
        v!(
            "unknown source",
            Engram,
            |d| set(d, "/provenance/source", json!("human")),
            [(SchemaInvalid, "/provenance/source")]
        ),
        v!(
            "created_at not a date-time",
            Engram,
            |d| set(d, "/provenance/created_at", json!("yesterday")),
            [(SchemaInvalid, "/provenance/created_at")]
        ),
        v!(
            "created_at without time",
            Engram,
            |d| set(d, "/provenance/created_at", json!("2026-01-08")),
            [(SchemaInvalid, "/provenance/created_at")]
        ),
        v!(
            "created_by blank",
            Engram,
            |d| set(d, "/provenance/created_by", json!(" ")),
            [(TextEmpty, "/provenance/created_by")]
        ),
        v!(
            "extra provenance field",
            Engram,
            |d| insert(d, "/provenance/model", json!("x")),
            [(SchemaInvalid, "/provenance/model")]
        ),
        v!("extra property", Engram, |d| insert(d, "/summary", json!("pasted")), [(SchemaInvalid, "/summary")]),
        v!(
            "decision citing only a url",
            Engram,
            |d| set(d, "/pointers", json!([{"type": "url", "ref": "https://x.org/a"}])),
            [(SourceRequired, "/pointers")]
        ),
        v!(
            "risk citing only a url",
            Engram,
            |d| {
                set(d, "/kind", json!("risk"));
                set(d, "/pointers", json!([{"type": "url", "ref": "https://x.org/a"}]));
            },
            [(SourceRequired, "/pointers")]
        ),
        v!(
            "pointer of unknown type",
            Engram,
            |d| set(d, "/pointers/1/type", json!("file")),
            [(SchemaInvalid, "/pointers/1/type")]
        ),
        v!(
            "pointer digest not blake3",
            Engram,
            |d| insert(d, "/pointers/0/digest", json!("sha256:00")),
            [(DigestInvalid, "/pointers/0/digest")]
        ),
        v!(
            "pointer escaping the workspace",
            Engram,
            |d| set(d, "/pointers/0/ref", json!("../../etc/passwd")),
            [(PointerInvalid, "/pointers/0/ref")]
        ),
        v!("not an object", Engram, |d| *d = json!(["an", "array"]), [(SchemaInvalid, "")]),
        v!(
            "two problems at once",
            Engram,
            |d| {
                set(d, "/claim", json!("x".repeat(600)));
                set(d, "/ttl", json!("soon"));
            },
            [(SchemaInvalid, "/claim"), (TtlInvalid, "/ttl")]
        ),
    ]
}

fn pointer_vectors() -> Vec<Vector> {
    vec![
        v!("type missing", Pointer, |d| remove(d, "/type"), [(SchemaInvalid, "/type")]),
        v!("unknown type", Pointer, |d| set(d, "/type", json!("file")), [(SchemaInvalid, "/type")]),
        v!("ref missing", Pointer, |d| remove(d, "/ref"), [(SchemaInvalid, "/ref")]),
        v!(
            "ref of 301 chars",
            Pointer,
            |d| set(d, "/ref", json!(format!("{}.rs", "a".repeat(298)))),
            [(SchemaInvalid, "/ref")]
        ),
        v!("ref not a string", Pointer, |d| set(d, "/ref", json!(["src/lib.rs"])), [(SchemaInvalid, "/ref")]),
        v!("span of 81 chars", Pointer, |d| set(d, "/span", json!("L".repeat(81))), [(SchemaInvalid, "/span")]),
        v!("extra property", Pointer, |d| insert(d, "/content", json!("fn main() {}")), [(SchemaInvalid, "/content")]),
        v!("digest not blake3", Pointer, |d| set(d, "/digest", json!("sha1:abc")), [(DigestInvalid, "/digest")]),
        v!(
            "digest in upper case",
            Pointer,
            |d| set(d, "/digest", json!(format!("blake3:{}", "A".repeat(64)))),
            [(DigestInvalid, "/digest")]
        ),
        v!(
            "digest too short",
            Pointer,
            |d| set(d, "/digest", json!(format!("blake3:{}", "a".repeat(63)))),
            [(DigestInvalid, "/digest")]
        ),
        v!("digest not a string", Pointer, |d| set(d, "/digest", json!(1)), [(SchemaInvalid, "/digest")]),
        v!("empty ref", Pointer, |d| set(d, "/ref", json!("")), [(PointerInvalid, "/ref")]),
        v!("absolute repo path", Pointer, |d| set(d, "/ref", json!("/etc/passwd")), [(PointerInvalid, "/ref")]),
        v!("repo ref with a fragment", Pointer, |d| set(d, "/ref", json!("src/lib.rs#L1")), [(PointerInvalid, "/ref")]),
        v!("repo span not lines", Pointer, |d| set(d, "/span", json!("lines 1-2")), [(PointerInvalid, "/span")]),
        v!("reversed line span", Pointer, |d| set(d, "/span", json!("L9-L2")), [(PointerInvalid, "/span")]),
        v!(
            "url pointer with a span",
            Pointer,
            |d| {
                set(d, "/type", json!("url"));
                set(d, "/ref", json!("https://example.org/x"));
            },
            [(PointerInvalid, "/span")]
        ),
        v!(
            "test ref without suite",
            Pointer,
            |d| {
                set(d, "/type", json!("test"));
                set(d, "/ref", json!("one_resend"));
                remove(d, "/span");
            },
            [(PointerInvalid, "/ref")]
        ),
        v!(
            "sam ref without namespace",
            Pointer,
            |d| {
                set(d, "/type", json!("sam"));
                set(d, "/ref", json!("publish-domain"));
                remove(d, "/span");
            },
            [(PointerInvalid, "/ref")]
        ),
        v!(
            "diff ref without range",
            Pointer,
            |d| {
                set(d, "/type", json!("diff"));
                set(d, "/ref", json!("4f2a9c1"));
            },
            [(PointerInvalid, "/ref")]
        ),
    ]
}

fn other_vectors() -> Vec<Vector> {
    vec![
        v!(
            "brief of 31 lines",
            Brief,
            |d| {
                set(d, "/what_matters_now", json!(vec!["n"; 10]));
                set(d, "/constraints", json!(vec!["c"; 10]));
                set(d, "/top_risks", json!(vec!["r"; 5]));
                insert(d, "/pointer_packs/tester", json!(["test:gateway::one_resend"]));
                insert(d, "/pointer_packs/writer", json!(["artifact:README.md"]));
                set(d, "/symbols", json!({}));
                set(d, "/capsules", json!([]));
            },
            [(BriefTooLong, "")]
        ),
        v!(
            "brief over 30 lines once its symbol and capsule lines count",
            Brief,
            |d| {
                set(d, "/what_matters_now", json!(vec!["n"; 10]));
                set(d, "/constraints", json!(vec!["c"; 10]));
                set(d, "/top_risks", json!(vec!["r"; 2]));
            },
            [(BriefTooLong, "")]
        ),
        v!(
            "brief capsule of 11 lines",
            Brief,
            |d| set(d, "/capsules", json!(["w1: x\n".repeat(11)])),
            [(BriefTooLong, "/capsules/0")]
        ),
        v!(
            "brief of 30 lines is fine",
            Brief,
            |d| {
                set(d, "/what_matters_now", json!(vec!["n"; 10]));
                set(d, "/constraints", json!(vec!["c"; 10]));
                set(d, "/top_risks", json!(vec!["r"; 5]));
                insert(d, "/pointer_packs/tester", json!(["test:gateway::one_resend"]));
                set(d, "/symbols", json!({}));
                set(d, "/capsules", json!([]));
            },
            []
        ),
        v!(
            "brief with 11 focus lines",
            Brief,
            |d| set(d, "/what_matters_now", json!(vec!["n"; 11])),
            [(SchemaInvalid, "/what_matters_now")]
        ),
        v!("brief without focus", Brief, |d| remove(d, "/what_matters_now"), [(SchemaInvalid, "/what_matters_now")]),
        v!(
            "brief pack with a bad pointer",
            Brief,
            |d| set(d, "/pointer_packs/programmer/0", json!("src/lib.rs")),
            [(PointerInvalid, "/pointer_packs/programmer/0")]
        ),
        v!(
            "brief role not a name",
            Brief,
            |d| insert(d, "/budgets/Lead Dev", json!({})),
            [(SchemaInvalid, "/budgets")]
        ),
        v!(
            "brief budget with unknown cap",
            Brief,
            |d| insert(d, "/budgets/reviewer/max_files", json!(3)),
            [(SchemaInvalid, "/budgets/reviewer/max_files")]
        ),
        v!("grant mac not blake3", Grant, |d| set(d, "/mac", json!("hmac:1")), [(SchemaInvalid, "/mac")]),
        v!("grant without patterns", Grant, |d| set(d, "/patterns", json!([])), [(SchemaInvalid, "/patterns")]),
        v!(
            "grant pattern without type",
            Grant,
            |d| set(d, "/patterns/0", json!("src/**")),
            [(SchemaInvalid, "/patterns/0")]
        ),
        v!("grant of zero uses", Grant, |d| set(d, "/uses", json!(0)), [(SchemaInvalid, "/uses")]),
        v!(
            "grant expiry not a date-time",
            Grant,
            |d| set(d, "/expires_at", json!("tomorrow")),
            [(SchemaInvalid, "/expires_at")]
        ),
        v!("grant without grantee", Grant, |d| remove(d, "/grantee"), [(SchemaInvalid, "/grantee")]),
        v!("deref without pointers", Deref, |d| set(d, "/pointers", json!([])), [(SchemaInvalid, "/pointers")]),
        v!("deref without reason", Deref, |d| remove(d, "/reason"), [(SchemaInvalid, "/reason")]),
        v!(
            "deref reason of 201 chars",
            Deref,
            |d| set(d, "/reason", json!("r".repeat(201))),
            [(SchemaInvalid, "/reason")]
        ),
        v!(
            "deref of a traversal",
            Deref,
            |d| set(d, "/pointers/0/ref", json!("src/../../x")),
            [(PointerInvalid, "/pointers/0/ref")]
        ),
        v!("message of unknown type", Message, |d| set(d, "/type", json!("chat")), [(SchemaInvalid, "/type")]),
        v!("task_result without status", Message, |d| remove(d, "/status"), [(SchemaInvalid, "/status")]),
        v!(
            "task_result with unknown status",
            Message,
            |d| set(d, "/status", json!("done")),
            [(SchemaInvalid, "/status")]
        ),
        v!("message without sender", Message, |d| remove(d, "/from"), [(SchemaInvalid, "/from")]),
        v!(
            "message with an extra field",
            Message,
            |d| insert(d, "/context", json!("everything")),
            [(SchemaInvalid, "/context")]
        ),
        v!(
            "message with a field of another type",
            Message,
            |d| insert(d, "/severity", json!("info")),
            [(SchemaInvalid, "/severity")]
        ),
        v!(
            "message with 13 engrams",
            Message,
            |d| {
                let engram = d["engrams"][0].clone();
                set(d, "/engrams", Value::Array(vec![engram; 13]));
            },
            [(SchemaInvalid, "/engrams")]
        ),
        v!(
            "message carrying an invalid engram",
            Message,
            |d| set(d, "/engrams/0/claim", json!("c".repeat(501))),
            [(SchemaInvalid, "/engrams/0/claim")]
        ),
        v!(
            "message carrying an engram with a bad ttl",
            Message,
            |d| set(d, "/engrams/0/ttl", json!("6h")),
            [(TtlInvalid, "/engrams/0/ttl")]
        ),
        v!(
            "message deref of a bad pointer",
            Message,
            |d| set(d, "/deref_requests/0/pointers/0/ref", json!("a")),
            [(PointerInvalid, "/deref_requests/0/pointers/0/ref")]
        ),
        v!(
            "message ref that is a broken pointer",
            Message,
            |d| {
                *d = json!({"type": "question", "from": "a", "msg_id": "q", "question": "why?", "refs": ["repo:/abs"]});
            },
            [(PointerInvalid, "/refs/0")]
        ),
        v!(
            "checkpoint with a negative wave",
            Message,
            |d| {
                *d = json!({"type": "checkpoint", "from": "a", "msg_id": "c", "wave": -1, "state": "started"});
            },
            [(SchemaInvalid, "/wave")]
        ),
        v!(
            "escalation with unknown severity",
            Message,
            |d| {
                *d = json!({"type": "escalation", "from": "a", "msg_id": "e", "reason": "r", "severity": "fatal"});
            },
            [(SchemaInvalid, "/severity")]
        ),
        v!("budget of 13 engrams", Budget, |d| set(d, "/max_engrams", json!(13)), [(SchemaInvalid, "/max_engrams")]),
        v!("negative budget", Budget, |d| set(d, "/max_repo_spans", json!(-1)), [(SchemaInvalid, "/max_repo_spans")]),
        v!(
            "scenario with a duplicate agent",
            Scenario,
            |d| set(d, "/agents/2/id", json!("director")),
            [(ScenarioInvalid, "/agents/2/id")]
        ),
        v!(
            "scenario with an unknown parent",
            Scenario,
            |d| set(d, "/agents/2/parent", json!("ghost")),
            [(ScenarioInvalid, "/agents/2/parent")]
        ),
        v!("scenario with two leads", Scenario, |d| remove(d, "/agents/2/parent"), [(ScenarioInvalid, "/agents/2")]),
        v!(
            "scenario packing for a role no child of the brief has",
            Scenario,
            |d| insert(d, "/steps/0/packs/writer", json!(["repo:budget.json"])),
            [(ScenarioInvalid, "/steps/0/packs/writer")]
        ),
        v!(
            "scenario packing under a child's agent id, not its role",
            Scenario,
            |d| set(d, "/agents/2/role", json!("developer")),
            [(ScenarioInvalid, "/steps/0/packs/programmer")]
        ),
        v!(
            "scenario placing an agent on a node its cluster does not name",
            Scenario,
            |d| {
                insert(d, "/cluster", json!({"nodes": [{"name": "n1", "addr": "127.0.0.1:7101"}]}));
                insert(d, "/agents/1/node", json!("n9"));
            },
            [(NodeUnknown, "/agents/1/node")]
        ),
        v!(
            "scenario naming a node twice, one without a port",
            Scenario,
            |d| {
                let node = json!({"name": "n1", "addr": "127.0.0.1"});
                insert(d, "/cluster", json!({"nodes": [{"name": "n1", "addr": "127.0.0.1:7101"}, node]}));
            },
            [(NodeUnknown, "/cluster/nodes/1/name"), (NodeUnknown, "/cluster/nodes/1/addr")]
        ),
        v!(
            "scenario with a cycle",
            Scenario,
            |d| {
                insert(d, "/agents/0/parent", json!("programmer"));
            },
            [
                (ScenarioInvalid, "/agents"),
                (ScenarioInvalid, "/agents/0/parent"),
                (ScenarioInvalid, "/agents/1/parent"),
                (ScenarioInvalid, "/agents/2/parent")
            ]
        ),
        v!(
            "scenario with an unknown tokenizer",
            Scenario,
            |d| set(d, "/tokenizer", json!("gpt2")),
            [(SchemaInvalid, "/tokenizer")]
        ),
        v!(
            "scenario workspace absolute",
            Scenario,
            |d| set(d, "/workspace", json!("/etc")),
            [(ScenarioInvalid, "/workspace")]
        ),
        v!(
            "scenario workspace escaping its directory",
            Scenario,
            |d| set(d, "/workspace", json!("../../..")),
            [(ScenarioInvalid, "/workspace")]
        ),
        v!(
            "scenario workspace escaping through a subdirectory",
            Scenario,
            |d| set(d, "/workspace", json!("fixtures/../../x")),
            [(ScenarioInvalid, "/workspace")]
        ),
        v!(
            "scenario workspace with a drive letter",
            Scenario,
            |d| set(d, "/workspace", json!("C:\\Windows")),
            [(ScenarioInvalid, "/workspace")]
        ),
        v!(
            "scenario step for an unknown agent",
            Scenario,
            |d| set(d, "/steps/2/agent", json!("nobody")),
            [(ScenarioInvalid, "/steps/2/agent")]
        ),
        v!(
            "scenario grant to a non-descendant",
            Scenario,
            |d| set(d, "/steps/0/grants/0/to", json!("architect")),
            [(ScenarioInvalid, "/steps/0/grants/0/to")]
        ),
        v!(
            "scenario grant living forever",
            Scenario,
            |d| insert(d, "/steps/0/grants/0/ttl", json!("forever")),
            [(TtlInvalid, "/steps/0/grants/0/ttl")]
        ),
        v!(
            "scenario engram with a bad ttl",
            Scenario,
            |d| insert(d, "/steps/2/engrams/0/ttl", json!("a week")),
            [(TtlInvalid, "/steps/2/engrams/0/ttl")]
        ),
        v!(
            "scenario brief to an agent that is not a child",
            Scenario,
            |d| insert(d, "/steps/0/to", json!(["architect"])),
            [(ScenarioInvalid, "/steps/0/to/0")]
        ),
        v!(
            "scenario report by the lead without a receiver",
            Scenario,
            |d| set(d, "/steps/2/agent", json!("architect")),
            // …and its engram answers the programmer's task, which is not the lead's to answer.
            [(ScenarioInvalid, "/steps/2/engrams/0/task"), (ScenarioInvalid, "/steps/2/to")]
        ),
        v!(
            "scenario engram answering a task that does not exist",
            Scenario,
            |d| set(d, "/steps/2/engrams/0/task", json!("no-such-task")),
            [(ScenarioInvalid, "/steps/2/engrams/0/task")]
        ),
        v!(
            "scenario report to an unknown agent",
            Scenario,
            |d| insert(d, "/steps/2/to", json!("ghost")),
            [(ScenarioInvalid, "/steps/2/to")]
        ),
        v!(
            "scenario step with an unknown action",
            Scenario,
            |d| set(d, "/steps/0/action", json!("paste")),
            [(SchemaInvalid, "/steps/0/action")]
        ),
        v!(
            "scenario task of an unknown kind",
            Scenario,
            |d| set(d, "/tasks/0/kind", json!("trivia")),
            [(SchemaInvalid, "/tasks/0/kind")]
        ),
        v!(
            "scenario task without gold citations",
            Scenario,
            |d| remove(d, "/tasks/0/gold/cites"),
            [(SchemaInvalid, "/tasks/0/gold/cites")]
        ),
        v!(
            "scenario task whose gold states nothing",
            Scenario,
            |d| remove(d, "/tasks/0/gold/terms"),
            [(ScenarioInvalid, "/tasks/0/gold")]
        ),
        v!(
            "scenario task with a bad gold pointer",
            Scenario,
            |d| set(d, "/tasks/0/gold/cites/0", json!(["repo:a.rs#L1-L2", "repo:a.rs@x#L1"])),
            [(PointerInvalid, "/tasks/0/gold/cites/0/1")]
        ),
        v!(
            "scenario task with a broken pattern",
            Scenario,
            |d| insert(d, "/tasks/0/gold/patterns", json!(["ok", "(unclosed"])),
            [(ScenarioInvalid, "/tasks/0/gold/patterns/1")]
        ),
        v!(
            "scenario task for an unknown agent",
            Scenario,
            |d| set(d, "/tasks/0/agent", json!("ghost")),
            [(ScenarioInvalid, "/tasks/0/agent"), (ScenarioInvalid, "/steps/0/tasks/0")]
        ),
        v!(
            "scenario task for the lead",
            Scenario,
            |d| set(d, "/tasks/0/agent", json!("architect")),
            [(ScenarioInvalid, "/tasks/0/agent"), (ScenarioInvalid, "/steps/0/tasks/0")]
        ),
        v!(
            "scenario task never handed down",
            Scenario,
            |d| remove(d, "/steps/0/tasks"),
            [(ScenarioInvalid, "/tasks/0")]
        ),
        v!(
            "scenario brief naming an unknown task",
            Scenario,
            |d| set(d, "/steps/0/tasks", json!(["inline-cap", "nope"])),
            [(ScenarioInvalid, "/steps/0/tasks/1")]
        ),
        v!(
            "scenario task with a duplicate id",
            Scenario,
            |d| {
                let task = d.pointer("/tasks/0").cloned().expect("task");
                d["tasks"].as_array_mut().expect("tasks").push(task);
            },
            [(ScenarioInvalid, "/tasks/1/id")]
        ),
        v!(
            "scenario memory writing org directly",
            Scenario,
            |d| insert(d, "/memory", json!({"writes": ["run", "org"]})),
            [(ScenarioInvalid, "/memory/writes/1")]
        ),
        v!(
            "scenario memory reads for a role no agent has",
            Scenario,
            |d| insert(d, "/memory", json!({"reads": {"ghost": ["run"]}})),
            [(ScenarioInvalid, "/memory/reads/ghost")]
        ),
        v!(
            "scenario memory role reading org without shared reads",
            Scenario,
            |d| insert(d, "/memory", json!({"reads": {"programmer": ["run", "org"]}})),
            [(ScenarioInvalid, "/memory/reads/programmer/1")]
        ),
        v!(
            "scenario memory role reading nothing",
            Scenario,
            |d| insert(d, "/memory", json!({"reads": {"director": []}})),
            [(ScenarioInvalid, "/memory/reads/director")]
        ),
        v!(
            "scenario shared reads written twice",
            Scenario,
            |d| {
                insert(d, "/shared_reads", json!(true));
                insert(d, "/memory", json!({"shared_reads": true}));
            },
            [(ScenarioInvalid, "/shared_reads")]
        ),
        v!(
            "scenario memory promotion floor above 1",
            Scenario,
            |d| insert(d, "/memory", json!({"promotion_floor": 1.5})),
            [(SchemaInvalid, "/memory/promotion_floor")]
        ),
        v!(
            "scenario memory with an unknown key",
            Scenario,
            |d| insert(d, "/memory", json!({"floor": 0.5})),
            [(SchemaInvalid, "/memory/floor")]
        ),
        v!(
            "scenario brief with too many lines once its tasks are added",
            Scenario,
            |d| set(d, "/steps/0/now", json!(vec!["n"; 10])),
            [(ScenarioInvalid, "/steps/0/tasks")]
        ),
    ]
}

#[test]
fn every_example_is_valid() {
    for kind in DocKind::ALL {
        let violations = validate(kind, &example(kind));
        assert!(violations.is_empty(), "{kind}: {violations:?}");
        assert_eq!(DocKind::infer(&example(kind)), Some(kind), "{kind} is inferred from its shape");
    }
}

#[test]
fn every_invalid_vector_fails_with_its_code_at_its_path() {
    let vectors: Vec<Vector> = engram_vectors().into_iter().chain(pointer_vectors()).chain(other_vectors()).collect();
    let n_engram_pointer = vectors.iter().filter(|v| matches!(v.kind, DocKind::Engram | DocKind::Pointer)).count();
    assert!(n_engram_pointer >= 40, "only {n_engram_pointer} engram/pointer vectors");
    let mut failures = Vec::new();
    for vector in &vectors {
        let mut doc = example(vector.kind);
        (vector.mutate)(&mut doc);
        let mut got: Vec<(ErrorCode, String)> =
            validate(vector.kind, &doc).into_iter().map(|v| (v.code, v.path)).collect();
        got.sort();
        let mut want: Vec<(ErrorCode, String)> = vector.expect.iter().map(|(c, p)| (*c, (*p).to_owned())).collect();
        want.sort();
        if got != want {
            failures.push(format!("{} ({}): want {want:?}, got {got:?}", vector.name, vector.kind));
        }
    }
    assert!(failures.is_empty(), "{} vectors failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_violation_message_is_short_and_never_echoes_a_pasted_body() {
    let mut doc = example(DocKind::Message);
    let body = "SECRET-PASTE ".repeat(2000);
    set(&mut doc, "/engrams/0/claim", json!(body));
    for violation in validate(DocKind::Message, &doc) {
        assert!(violation.message.len() < 200, "{}", violation.message);
        assert!(!violation.message.contains("SECRET-PASTE"));
    }
}

#[test]
fn the_brief_line_rule_counts_what_display_renders() {
    let brief: crate::SharedBriefMicro = serde_json::from_value(example(DocKind::Brief)).expect("example brief");
    let doc = serde_json::to_value(&brief).expect("serializes");
    assert_eq!(brief.to_string().lines().count(), brief_line_count(&doc));
    let mut long = brief.clone();
    long.constraints = vec!["c".to_owned(); 10];
    long.what_matters_now = vec!["n".to_owned(); 10];
    long.top_risks = vec!["r".to_owned(); 5];
    long.budgets.insert("tester".to_owned(), crate::Budget::default());
    long.budgets.insert("writer".to_owned(), crate::Budget::default());
    assert!(crate::Valid::new(long).is_err(), "a 31-line brief is refused by its constructor");
}

#[test]
fn an_unrecognisable_document_has_kind_unknown() {
    let (kind, violations) = validate_inferred(&json!({"hello": "world"}));
    assert_eq!(kind, None);
    assert_eq!(violations[0].code, KindUnknown);
}

/// A missing required field says what the field is for (a first scenario's author learns it from the refusal).
#[test]
fn a_missing_required_field_says_what_it_is_for() {
    let mut doc = example(DocKind::Scenario);
    remove(&mut doc, "/steps/1/reason");
    remove(&mut doc, "/agents/2/role");
    let violations = validate(DocKind::Scenario, &doc);
    let message = |path: &str| {
        violations
            .iter()
            .find(|v| v.path == path)
            .map(|v| v.message.clone())
            .unwrap_or_else(|| format!("{violations:?}"))
    };
    assert!(message("/steps/1/reason").contains("audit log"), "{}", message("/steps/1/reason"));
    assert!(message("/agents/2/role").contains("packs of briefs"), "{}", message("/agents/2/role"));
}
