//! The desk's rules against a real store and workspace: budgets per turn, grants only from ancestors, requests,
//! project isolation, the ledger.

use serde_json::json;

use super::*;

const CONFIG: &str = r#"
project = "demo"
[budget]
max_deref_tokens_total = 40
[clients.lead]
role = "lead"
[clients.dev]
role = "dev"
parent = "lead"
[clients.other]
role = "dev"
project = "elsewhere"
"#;

fn desk() -> (Desk, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("mkdir");
    let long: String = (1..=60).map(|i| format!("fn f{i}() -> u32 {{ {i} }}\n")).collect();
    std::fs::write(workspace.join("long.rs"), long).expect("write");
    std::fs::write(workspace.join("short.rs"), "fn a() {}\n").expect("write");
    let config = DeskConfig::from_toml(CONFIG).expect("config");
    let desk = Desk::open(&dir.path().join("store"), Some(&workspace), config).expect("desk");
    (desk, dir)
}

#[test]
fn a_configuration_with_an_unknown_parent_or_a_cycle_is_refused() {
    let unknown = DeskConfig::from_toml("[clients.dev]\nparent = \"boss\"\n").expect_err("unknown parent");
    assert_eq!(unknown.code, ErrorCode::ArgumentInvalid);
    assert!(unknown.message.contains("boss"), "{unknown:?}");
    let cycle = DeskConfig::from_toml("[clients.a]\nparent = \"b\"\n[clients.b]\nparent = \"a\"\n").expect_err("cycle");
    assert!(cycle.message.contains("cycle"), "{cycle:?}");
    let typo = DeskConfig::from_toml("[clients.a]\nrloe = \"x\"\n").expect_err("unknown field");
    assert_eq!(typo.code, ErrorCode::ArgumentInvalid);
    // An unconfigured client gets the defaults.
    let config = DeskConfig::from_toml(CONFIG).expect("config");
    let stranger = config.client("stranger");
    assert_eq!((stranger.role.as_str(), stranger.project.as_str(), stranger.parent), ("stranger", "demo", None));
    assert_eq!(stranger.budget.max_deref_tokens_total, 40);
}

#[test]
fn over_budget_is_denied_until_the_parent_grants_and_a_checkpoint_starts_a_new_turn() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    let (items, baseline) = desk.deref(&dev, &["repo:short.rs#L1-L1".to_owned()], None).expect("within budget");
    assert_eq!(items[0].content, "fn a() {}\n");
    assert!(items[0].digest.starts_with("blake3:"), "{:?}", items[0]);
    assert!(baseline >= items[0].tokens);
    let long = vec!["repo:long.rs#L1-L40".to_owned()];
    let denied = desk.deref(&dev, &long, None).expect_err("over the 40-token budget");
    assert_eq!(denied.code, ErrorCode::DerefDenied);
    // The child asks; only its parent can grant, and the grant is spent by the child alone.
    let request = desk.request_deref(&dev, &long, "need the whole table").expect("filed");
    let lead = desk.client("lead");
    let (pending, _) = desk.checkpoint(&lead).expect("checkpoint");
    assert_eq!(pending.iter().map(|r| r.request_id.as_str()).collect::<Vec<_>>(), [request.as_str()]);
    let refused = desk
        .issue_grant(&dev, &NewGrant { to: "lead".into(), patterns: long.clone(), ..NewGrant::default() })
        .expect_err("a child cannot grant its parent");
    assert_eq!(refused.code, ErrorCode::GrantInvalid);
    let order = NewGrant {
        to: "dev".into(),
        patterns: long.clone(),
        uses: Some(1),
        ttl: Some("PT10M".into()),
        max_tokens: Some(2000),
        answers: Some(request.clone()),
    };
    let grant = desk.issue_grant(&lead, &order).expect("grant");
    let other = desk.client("other");
    let stolen = desk.deref(&other, &long, Some(&grant.terms.grant_id)).expect_err("not its grant");
    assert_eq!(stolen.code, ErrorCode::GrantInvalid);
    let (items, _) = desk.deref(&dev, &long, Some(&grant.terms.grant_id)).expect("granted");
    assert!(items[0].tokens > 40);
    let spent = desk.deref(&dev, &long, Some(&grant.terms.grant_id)).expect_err("one use only");
    assert_eq!(spent.code, ErrorCode::GrantInvalid);
    let forged = desk.deref(&dev, &long, Some("g-000000000000")).expect_err("never issued");
    assert_eq!(forged.code, ErrorCode::GrantInvalid);
    let (pending, _) = desk.checkpoint(&lead).expect("checkpoint");
    assert!(pending.is_empty(), "the request was answered: {pending:?}");
    // A new turn: the budget is whole again.
    desk.checkpoint(&dev).expect("checkpoint");
    desk.deref(&dev, &["repo:short.rs#L1-L1".to_owned()], None).expect("a new turn");
    let escape =
        desk.deref(&dev, &["repo:../../etc/passwd#L1-L1".to_owned()], None).expect_err("outside the workspace");
    assert_ne!(escape.code, ErrorCode::DerefDenied, "{escape:?}");
}

#[test]
fn engrams_are_validated_stored_and_recalled_only_in_their_project() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    let engram = json!({
        "id": "eg_desk_1", "kind": "fact", "claim": "The billing cache is invalidated on every capture.",
        "pointers": [{"type": "repo", "ref": "short.rs", "span": "L1-L1"}], "confidence": 0.8, "ttl": "P7D",
        "scope": "project", "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "dev", "source": "agent"}
    });
    let put = desk.put_engram(&dev, &engram).expect("stored");
    assert_eq!((put.id.as_str(), put.outcome.as_str()), ("eg_desk_1", "stored"));
    assert_eq!(desk.put_engram(&dev, &engram).expect("again").outcome, "duplicate");
    let mut bad = engram.clone();
    bad["claim"] = json!("x".repeat(501));
    assert_eq!(desk.put_engram(&dev, &bad).expect_err("too long").code, ErrorCode::SchemaInvalid);
    let found = desk.query(&dev, "billing cache capture", Some(3), None, None).expect("recall");
    assert_eq!(found.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["eg_desk_1"]);
    assert!(found[0].hash_keys.is_none(), "what a client reads carries no index keys");
    let other = desk.client("other");
    assert!(desk.query(&other, "billing cache capture", Some(3), None, None).expect("recall").is_empty());
    let huge = desk.query(&dev, "billing", Some(1 << 40), None, None).expect_err("k is capped");
    assert_eq!(huge.code, ErrorCode::ArgumentInvalid);
}

#[test]
fn the_desks_memory_table_gates_project_writes_and_reads_per_role() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!("{CONFIG}\n[memory]\nwrites = [\"run\"]\nreads = {{ dev = [\"run\"] }}\n");
    let desk =
        Desk::open(&dir.path().join("store"), None, DeskConfig::from_toml(&config).expect("config")).expect("desk");
    let (dev, lead) = (desk.client("dev"), desk.client("lead"));
    let engram = |id: &str, by: &str, scope: &str, claim: &str| {
        json!({
            "id": id, "kind": "fact", "claim": claim, "pointers": [{"type": "repo", "ref": "short.rs"}],
            "confidence": 0.9, "ttl": "P7D", "scope": scope,
            "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": by, "source": "agent"}
        })
    };
    let refused = desk
        .put_engram(&dev, &engram("eg_p", "dev", "project", "The billing cache is per tenant."))
        .expect_err("a child's project write");
    assert_eq!(refused.code, ErrorCode::ScopeDenied, "{refused:?}");
    desk.put_engram(&dev, &engram("eg_r", "dev", "run", "The billing cache is per tenant.")).expect("run scope");
    desk.put_engram(&lead, &engram("eg_l", "lead", "project", "The billing cache expires hourly.")).expect("a parent");
    let ids = |who: &Client| -> Vec<String> {
        let found = desk.query(who, "billing cache", Some(5), None, None).expect("recall");
        let mut ids: Vec<String> = found.into_iter().map(|e| e.id).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&dev), ["eg_r"], "dev reads only run scope");
    assert_eq!(ids(&lead), ["eg_l", "eg_r"]);
    let bad = DeskConfig::from_toml("[memory]\nwrites = [\"org\"]\n").expect_err("org is never written directly");
    assert_eq!((bad.code, bad.path.as_str()), (ErrorCode::ArgumentInvalid, "/memory/writes/0"), "{bad:?}");
}

#[test]
fn an_engram_without_id_or_provenance_and_with_text_pointers_is_completed_then_stored() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    let claim = "The retry loop of long.rs gives up after the third attempt.";
    let given = json!({
        "kind": "fact", "claim": claim,
        "pointers": ["repo:long.rs#L3-L9", {"type": "repo", "ref": "short.rs", "span": "L1-L1"}],
    });
    let before = now_unix();
    let put = desk.put_engram(&dev, &given).expect("completed and stored");
    assert_eq!(put.outcome, "stored");
    // The id is the contract builder's content-derived id of the same kind, claim and pointers.
    let expected = Engram::builder(less_contract::EngramKind::Fact, claim, "dev")
        .pointer(Pointer::parse("repo:long.rs#L3-L9").expect("pointer"))
        .pointer(Pointer::parse("repo:short.rs#L1-L1").expect("pointer"))
        .build()
        .expect("builds");
    assert_eq!(put.id, expected.id);
    let found = desk.query(&dev, "retry loop gives up after the third attempt", Some(3), None, None).expect("recall");
    let stored = found.iter().find(|e| e.id == put.id).unwrap_or_else(|| panic!("{put:?} in {found:?}"));
    assert_eq!(stored.provenance.created_by, "dev", "the caller made it");
    assert_eq!(stored.provenance.source, less_contract::Source::Agent);
    let created =
        time::OffsetDateTime::parse(&stored.provenance.created_at, &time::format_description::well_known::Rfc3339)
            .expect("RFC 3339");
    assert!((before - 1..=now_unix() + 1).contains(&created.unix_timestamp()), "created now: {created}");
    let pointers: Vec<String> = stored.pointers.iter().map(ToString::to_string).collect();
    assert_eq!(pointers, ["repo:long.rs#L3-L9", "repo:short.rs#L1-L1"]);
    assert_eq!(
        (stored.confidence, stored.ttl.to_string(), stored.scope),
        (DEFAULT_CONFIDENCE, DEFAULT_TTL.to_owned(), DEFAULT_SCOPE)
    );
    // The same claim again has the same id; null counts as left out.
    let mut again = given.clone();
    again["id"] = Value::Null;
    again["provenance"] = Value::Null;
    let again = desk.put_engram(&dev, &again).expect("again");
    assert_eq!((again.id.as_str(), again.outcome.as_str()), (put.id.as_str(), "duplicate"));
    // A partial provenance keeps what it gives and gets the rest.
    let partial = json!({
        "kind": "todo", "claim": "Cover the retry loop with a test.", "pointers": ["repo:long.rs#L3-L9"],
        "provenance": {"source": "tool"}, "scope": "run", "confidence": 0.5,
    });
    let put = desk.put_engram(&dev, &partial).expect("stored");
    let found = desk.query(&dev, "cover the retry loop with a test", Some(3), None, None).expect("recall");
    let stored = found.iter().find(|e| e.id == put.id).expect("found");
    assert_eq!(stored.provenance.source, less_contract::Source::Tool);
    assert_eq!(stored.provenance.created_by, "dev");
    assert_eq!((stored.scope, stored.confidence), (Scope::Run, 0.5));
}

#[test]
fn a_completed_engram_is_still_refused_with_the_code_and_path_of_what_is_wrong() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    let engram = |pointers: Value| json!({"kind": "fact", "claim": "Pricing rounds half up.", "pointers": pointers});
    // A text pointer that does not parse: LESS's pointer code, at its index.
    let bad = desk.put_engram(&dev, &engram(json!(["repo:short.rs#L1-L1", "src/x.rs#L3-L9"]))).expect_err("no type");
    assert_eq!((bad.code, bad.path.as_str()), (ErrorCode::PointerInvalid, "/pointers/1"), "{bad:?}");
    assert!(bad.message.contains("src/x.rs#L3-L9"), "{bad:?}");
    let bad = desk.put_engram(&dev, &engram(json!(["repo:short.rs#lines 1-2"]))).expect_err("bad span");
    assert_eq!((bad.code, bad.path.as_str()), (ErrorCode::PointerInvalid, "/pointers/0"), "{bad:?}");
    // Without an id, the refusal names the real problem, not the id.
    let mut long = engram(json!(["repo:short.rs#L1-L1"]));
    long["claim"] = json!("x".repeat(501));
    let bad = desk.put_engram(&dev, &long).expect_err("too long");
    assert_eq!((bad.code, bad.path.as_str()), (ErrorCode::SchemaInvalid, "/claim"), "{bad:?}");
    let bad = desk.put_engram(&dev, &engram(json!([]))).expect_err("no pointers");
    assert_eq!((bad.code, bad.path.as_str()), (ErrorCode::SchemaInvalid, "/pointers"), "{bad:?}");
    // A given id and provenance are validated as given, never replaced.
    let mut blank = engram(json!(["repo:short.rs#L1-L1"]));
    blank["id"] = json!(" ");
    assert_eq!(desk.put_engram(&dev, &blank).expect_err("blank id").path, "/id");
    let mut wrong = engram(json!(["repo:short.rs#L1-L1"]));
    wrong["provenance"] = json!({"created_by": "dev", "source": "oracle"});
    assert_eq!(desk.put_engram(&dev, &wrong).expect_err("no such source").path, "/provenance/source");
    let mut given = engram(json!(["repo:short.rs#L1-L1"]));
    given["id"] = json!("eg_mine");
    given["provenance"] = json!({"created_at": "2026-01-01T00:00:00Z", "created_by": "lead", "source": "rag"});
    assert_eq!(desk.put_engram(&dev, &given).expect("kept as given").id, "eg_mine");
    let found = desk.query(&dev, "pricing rounds half up", Some(1), None, None).expect("recall");
    assert_eq!(serde_json::to_value(&found[0].provenance).expect("json"), given["provenance"]);
    assert!(desk.put_engram(&dev, &json!("repo:short.rs")).is_err(), "an engram is an object");
}

#[test]
fn the_desk_defaults_are_the_contract_builders_but_for_the_scope() {
    let pointer = Pointer::parse("repo:short.rs").expect("pointer");
    let built = Engram::builder(less_contract::EngramKind::Fact, "x", "dev").pointer(pointer).build().expect("builds");
    assert_eq!(built.confidence, DEFAULT_CONFIDENCE);
    assert_eq!(built.ttl.to_string(), DEFAULT_TTL);
}

#[test]
fn every_call_is_on_the_ledger_per_client_and_tool() {
    let (desk, dir) = desk();
    let dev = desk.client("dev");
    desk.record(&dev, "less_deref", 12, 30, 400, None);
    desk.record(&dev, "less_deref", 10, 0, 0, Some(ErrorCode::DerefDenied));
    desk.record(&desk.client("lead"), "less_issue_grant", 20, 60, 60, None);
    let rows = desk.ledger_report(Some("dev")).expect("report");
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!((row.calls, row.refused, row.tokens_in, row.tokens_out, row.baseline_tokens), (2, 1, 22, 30, 400));
    assert_eq!(desk.ledger_report(None).expect("report").len(), 2);
    let audit = std::fs::read_to_string(dir.path().join("store/desk-audit.log")).expect("audit log");
    assert_eq!(audit.lines().count(), 3);
    assert!(audit.contains("LESS_DEREF_DENIED"));
}

#[test]
fn symbols_resolve_both_ways_within_the_project() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    desk.symbol_set(&dev, "F12", "src/matching/engine.ts").expect("set");
    desk.symbol_set(&dev, "C3", "balances sum to zero").expect("set");
    assert_eq!(
        desk.symbol_resolve(&dev, "F12", false).expect("forward"),
        [("F12".into(), "src/matching/engine.ts".into())]
    );
    let back = desk.symbol_resolve(&dev, "src/matching/engine.ts", true).expect("reverse");
    assert_eq!(back, [("F12".to_owned(), "src/matching/engine.ts".to_owned())]);
    assert_eq!(desk.symbol_list(&dev).expect("list").len(), 2);
    let other = desk.client("other");
    assert_eq!(
        desk.symbol_resolve(&other, "F12", false).expect_err("another project").code,
        ErrorCode::PointerUnresolved
    );
    assert_eq!(desk.symbol_set(&dev, "bad id!", "x").expect_err("not an id").code, ErrorCode::ArgumentInvalid);
}

#[test]
fn capsules_are_capped_at_ten_lines_and_hydrate_only_their_dependency_closure() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    let write = |id: &str, depends: &[&str]| {
        let capsule = NewCapsule {
            id: id.to_owned(),
            what: format!("work {id}"),
            location: Some("F12".to_owned()),
            depends: depends.iter().map(|d| (*d).to_owned()).collect(),
            ..NewCapsule::default()
        };
        desk.capsule_write(&dev, &capsule)
    };
    write("w1", &[]).expect("w1");
    write("w2", &["w1"]).expect("w2");
    write("w3", &[]).expect("w3");
    write("w4", &["w2", "w1"]).expect("w4");
    let ids = |capsules: Vec<Capsule>| capsules.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(ids(desk.capsule_hydrate(&dev, &["w2".into()]).expect("hydrate")), ["w1", "w2"], "not w3");
    assert_eq!(ids(desk.capsule_hydrate(&dev, &["w4".into()]).expect("hydrate")), ["w1", "w2", "w4"]);
    assert_eq!(write("w5", &["nope"]).expect_err("unknown dependency").code, ErrorCode::ArgumentInvalid);
    assert!(write("w1", &["w4"]).expect_err("a cycle").message.contains("itself"));
    let ten = NewCapsule { id: "w8".into(), what: "line\n".repeat(10), ..NewCapsule::default() };
    assert_eq!(desk.capsule_write(&dev, &ten).expect("ten lines fit").text.lines().count(), 10);
    let long = NewCapsule { id: "w9".into(), what: "line\n".repeat(11), ..NewCapsule::default() };
    let refused = desk.capsule_write(&dev, &long).expect_err("over ten lines");
    assert!(refused.message.contains("at most 10 lines"), "{refused:?}");
    assert!(desk.capsule_hydrate(&dev, &["w9".into()]).is_err(), "a refused capsule is not stored");
}

#[test]
fn the_blackboard_keeps_what_a_new_value_supersedes() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    let lead = desk.client("lead");
    desk.blackboard_set(&dev, "dev_port", "5173").expect("set");
    let again = desk.blackboard_set(&lead, "dev_port", "5174").expect("set again");
    assert_eq!(again.superseded.as_deref(), Some("5173"));
    let now = desk.blackboard_get(&dev, "dev_port").expect("get");
    assert_eq!((now.value.as_str(), now.set_by.as_str(), now.superseded.as_deref()), ("5174", "lead", Some("5173")));
    desk.blackboard_set(&dev, "node_version", "20.11.0").expect("set");
    let list = desk.blackboard_list(&dev).expect("list");
    assert_eq!(
        list.iter().map(|e| (e.key.as_str(), e.value.as_str())).collect::<Vec<_>>(),
        [("dev_port", "5174"), ("node_version", "20.11.0")]
    );
    assert!(desk.blackboard_get(&desk.client("other"), "dev_port").is_err(), "per project");
}

#[test]
fn the_symbol_table_fills_from_the_workspace_index_with_stable_ids() {
    let (desk, dir) = desk();
    let dev = desk.client("dev");
    desk.symbol_set(&dev, "F12", "src/matching/engine.ts").expect("set by hand");
    desk.symbol_set(&dev, "F3", "short.rs").expect("set by hand");
    let fill = desk.symbol_fill(&dev, "").expect("fill");
    assert_eq!(fill.added, [("F13".to_owned(), "long.rs".to_owned())], "above every F number in use");
    assert_eq!(fill.kept, 1, "short.rs had an id");
    // A new file: the next fill gives it the next id and keeps the others.
    std::fs::write(dir.path().join("ws/new.py"), "def f():\n    return 1\n").expect("write");
    let fill = desk.symbol_fill(&dev, "").expect("fill again");
    assert_eq!((fill.added, fill.kept), (vec![("F14".to_owned(), "new.py".to_owned())], 2));
    assert_eq!(desk.symbol_resolve(&dev, "new.py", true).expect("reverse")[0].0, "F14");
    // A pattern that matches no indexed file says so.
    let none = desk.symbol_fill(&dev, "docs/**").expect_err("nothing matches");
    assert_eq!((none.code, none.path.as_str()), (ErrorCode::ArgumentInvalid, "/pattern"));
    // Another project's table starts from nothing.
    let other = desk.client("other");
    assert_eq!(desk.symbol_fill(&other, "*.rs").expect("fill").added.len(), 2);
}

#[test]
fn two_desks_filling_one_symbol_table_at_once_never_hand_out_an_id_twice() {
    let (first, dir) = desk();
    for i in 0..30 {
        std::fs::write(dir.path().join(format!("ws/m{i:02}.rs")), format!("fn m{i}() {{}}\n")).expect("write");
    }
    let config = DeskConfig::from_toml(CONFIG).expect("config");
    let second = Desk::open(&dir.path().join("store"), Some(&dir.path().join("ws")), config).expect("second desk");
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| first.symbol_fill(&first.client("dev"), "m*.rs").expect("first"));
        let b = scope.spawn(|| second.symbol_fill(&second.client("dev"), "").expect("second"));
        (a.join().expect("first thread"), b.join().expect("second thread"))
    });
    let table = first.symbol_list(&first.client("dev")).expect("list");
    let mut values: Vec<&str> = table.iter().map(|(_, v)| v.as_str()).collect();
    values.sort_unstable();
    values.dedup();
    assert_eq!(values.len(), table.len(), "one id per file: {table:?}");
    assert_eq!(table.len(), 32, "every file once");
    assert_eq!(a.added.len() + b.added.len(), 32, "what one added the other kept");
}

#[test]
fn two_desks_on_one_store_see_each_others_engrams_and_grants() {
    // Two MCP hosts start two server processes on one store; each has its own desk.
    let (first, dir) = desk();
    let config = DeskConfig::from_toml(CONFIG).expect("config");
    let second = Desk::open(&dir.path().join("store"), Some(&dir.path().join("ws")), config).expect("second desk");
    let engram = json!({
        "id": "eg_shared_1", "kind": "fact", "claim": "The ledger service retries writes three times.",
        "pointers": [{"type": "repo", "ref": "short.rs"}], "confidence": 0.8, "ttl": "P7D", "scope": "project",
        "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "dev", "source": "agent"}
    });
    // The second desk has answered a query before the put: its index must catch up, not stay as it was.
    assert!(second.query(&second.client("dev"), "ledger retries writes", Some(3), None, None).expect("q").is_empty());
    first.put_engram(&first.client("dev"), &engram).expect("put through the first");
    let seen = second.query(&second.client("lead"), "ledger retries writes", Some(3), None, None).expect("recall");
    assert_eq!(seen.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["eg_shared_1"]);
    let long = vec!["repo:long.rs#L1-L40".to_owned()];
    let order = NewGrant { to: "dev".into(), patterns: long.clone(), ..NewGrant::default() };
    let grant = first.issue_grant(&first.client("lead"), &order).expect("granted by the first");
    second.deref(&second.client("dev"), &long, Some(&grant.terms.grant_id)).expect("spent through the second");
    let again =
        first.deref(&first.client("dev"), &long, Some(&grant.terms.grant_id)).expect_err("spent once, anywhere");
    assert_eq!(again.code, ErrorCode::GrantInvalid);
}

#[test]
fn the_gate_adapter_sends_a_reference_never_the_report() {
    let (desk, dir) = desk();
    let ws = dir.path().join("ws");
    let planted = "PLANTED-REPORT-BODY-7f3a";
    std::fs::write(ws.join("cargo.txt"), format!("running 5 tests\n{planted}\ntest result: ok. 5 passed; 0 failed\n"))
        .expect("write");
    std::fs::write(ws.join("pytest.txt"), "FAILED tests/test_x.py::test_y\n1 failed, 9 passed in 0.2s\n")
        .expect("write");
    std::fs::write(ws.join("notes.txt"), "nothing about tests here\n").expect("write");
    let dev = desk.client("dev");
    let (message, tokens, report_tokens) = desk.gate_report(&dev, "g1", "cargo.txt", None).expect("a gate report");
    let Payload::GateReport { status, report_ref, .. } = &message.payload else { panic!("{message:?}") };
    assert_eq!(*status, GateStatus::Pass);
    assert!(report_ref.as_deref().is_some_and(|r| r.starts_with("artifact:cargo.txt")), "{report_ref:?}");
    assert_eq!(message.to.as_deref(), Some("lead"), "to the sender's parent");
    let text = serde_json::to_string(&*message).expect("JSON");
    assert!(!text.contains(planted), "the report's body never travels: {text}");
    assert!(message.body.is_none() && tokens > 0 && report_tokens > 0);
    let (failing, _, _) = desk.gate_report(&dev, "g2", "pytest.txt", None).expect("a gate report");
    assert!(matches!(failing.payload, Payload::GateReport { status: GateStatus::Fail, .. }));
    let unknown = desk.gate_report(&dev, "g3", "notes.txt", None).expect_err("no verdict to read");
    assert_eq!(unknown.code, ErrorCode::ArgumentInvalid);
    let told = desk.gate_report(&dev, "g3", "notes.txt", Some(GateStatus::Fail)).expect("the caller says it");
    assert!(matches!(told.0.payload, Payload::GateReport { status: GateStatus::Fail, .. }));
    assert!(desk.gate_report(&dev, "g4", "../escape.txt", None).is_err(), "inside the workspace only");
}

#[test]
fn a_decision_is_recalled_as_a_decision_engram_whose_pointer_reads_the_whole_entry() {
    let (desk, _dir) = desk();
    let dev = desk.client("dev");
    let (decision, engram_id) =
        desk.decide(&dev, "Capture is idempotent per order id", "A retry finds the first.").expect("decided");
    let engram_id = engram_id.expect("the decision engram is in memory");
    let found = desk.query(&dev, "is capture idempotent", Some(3), Some("decision"), None).expect("recall");
    let engram = found.iter().find(|e| e.id == engram_id).expect("recalled as a decision");
    assert_eq!(engram.claim, "Capture is idempotent per order id");
    let pointer = format!("sam:decision:{}", decision.decision_id);
    assert_eq!(engram.pointers[0].to_string(), pointer);
    let (items, _) = desk.deref(&dev, std::slice::from_ref(&pointer), None).expect("the entry reads back");
    assert!(items[0].content.contains("A retry finds the first."), "{:?}", items[0]);
    assert!(items[0].content.contains("demo/lead/dev"), "who decided: {:?}", items[0]);
    // Another project's client reads nothing under that name, and an unknown decision is unresolved.
    let other = desk.client("other");
    assert_eq!(desk.deref(&other, &[pointer], None).expect_err("not its project").code, ErrorCode::PointerUnresolved);
    let unknown = desk.deref(&dev, &["sam:decision:dc_0000000000000000".to_owned()], None).expect_err("unknown");
    assert_eq!(unknown.code, ErrorCode::PointerUnresolved);
    // An override's decision is remembered too.
    let lead = desk.client("lead");
    desk.claim(&dev, &NewClaim { surfaces: vec!["src/**".into()], task: "T-1".into(), ..NewClaim::default() })
        .expect("dev's claim");
    let taking = NewClaim {
        surfaces: vec!["src/a.rs".into()],
        task: "T-2".into(),
        override_reason: Some("release blocker".into()),
        ..NewClaim::default()
    };
    let conflict = desk.claim(&lead, &taking).expect("override").conflicts.remove(0);
    let recalled = desk.query(&lead, "overrode claim", Some(5), Some("decision"), None).expect("recall");
    assert!(
        recalled.iter().any(|e| e.pointers[0].to_string() == format!("sam:decision:{}", conflict.decision_id)),
        "{recalled:?}"
    );
}
