//! The runtime through its actors: small scenarios over a workspace made for each test, run with the scripted agents
//! exactly as `lessrt run` runs them, asserting on the ledger's events and the report.

use std::path::Path;
use std::sync::Arc;

use less_agents::ScriptedFactory;
use less_runtime::run::{CheckStatus, RunOptions, RunReport, run_scenario};
use less_runtime::{Scenario, WireMode};
use serde_json::Value;

/// A workspace: 120-line source files, a spec, a test file, and a symlink leading out of the workspace.
fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for sub in ["src", "docs", "tests"] {
        std::fs::create_dir_all(root.join(sub)).expect("mkdir");
    }
    for name in ["a", "b", "c", "d"] {
        let body: String = (1..=120)
            .map(|i| format!("pub fn {name}_{i}(x: u64) -> u64 {{ x.wrapping_mul({i}).rotate_left({}) }}\n", i % 7))
            .collect();
        std::fs::write(root.join(format!("src/{name}.rs")), body).expect("write");
    }
    std::fs::write(root.join("docs/SPEC.md"), "# Spec\n## Budget Rules\nAt most 800 tokens.\n## Other\nx\n")
        .expect("write");
    std::fs::write(root.join("docs/gate.txt"), "running 3 tests\ntest result: FAILED. 2 passed; 1 failed\n")
        .expect("write");
    std::fs::write(root.join("tests/budget.rs"), "#[test]\nfn spend_never_exceeds() {\n    assert!(true);\n}\n")
        .expect("write");
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.rs"), "const SECRET: &str = \"x\";\n").expect("write");
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path().join("secret.rs"), root.join("src/link.rs")).expect("symlink");
    (dir, outside)
}

const HIERARCHY: &str = r#"
[[agents]]
id = "lead"
role = "architect"
[[agents]]
id = "manager"
role = "manager"
parent = "lead"
[[agents]]
id = "dev"
role = "programmer"
parent = "manager"
[[agents]]
id = "peer"
role = "programmer"
parent = "manager"
"#;

/// Runs `body` (budgets, steps, expects) over a fresh workspace in `mode`; returns the report and the ledger events.
fn run(body: &str, mode: WireMode) -> (RunReport, Vec<Value>) {
    let (report, events, _out) = run_kept(body, mode);
    (report, events)
}

/// [`run`], keeping the run's directory (its ledger, audit log and store).
fn run_kept(body: &str, mode: WireMode) -> (RunReport, Vec<Value>, tempfile::TempDir) {
    run_in(body, HIERARCHY, mode)
}

/// [`run_kept`] with another hierarchy.
fn run_in(body: &str, hierarchy: &str, mode: WireMode) -> (RunReport, Vec<Value>, tempfile::TempDir) {
    let (dir, _outside) = workspace();
    let out = tempfile::tempdir().expect("out");
    // The scenario sits in its workspace: a workspace must be the scenario's directory or inside it.
    let toml = format!("name = \"t\"\nworkspace = \".\"\n{body}\n{hierarchy}");
    let scenario = Arc::new(Scenario::from_toml(&toml, dir.path()).unwrap_or_else(|v| panic!("scenario: {v}")));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let options = RunOptions { out_dir: Some(out.path().to_owned()), ..RunOptions::new(mode) };
    let report = runtime.block_on(run_scenario(scenario, Arc::new(ScriptedFactory), options)).expect("run completes");
    let ledger = std::fs::read_to_string(out.path().join("ledger.jsonl")).expect("ledger.jsonl");
    let events = ledger.lines().map(|l| serde_json::from_str(l).expect("event is JSON")).collect();
    (report, events, out)
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

fn codes(events: &[Value], kind: &str) -> Vec<String> {
    of_kind(events, kind).iter().filter_map(|e| e["code"].as_str().map(str::to_owned)).collect()
}

const REPORT_PASTE: &str = r#"
[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "1"
status = "pass"
misbehave = "MISBEHAVE"
engrams = [{ kind = "fact", claim = "a_1 multiplies by one.", pointers = ["repo:src/a.rs#L1-L2"] }]
"#;

#[test]
fn a_pasted_file_is_refused_and_only_the_compliant_resend_reaches_the_agent() {
    let (report, events) = run(&REPORT_PASTE.replace("MISBEHAVE", "paste_files"), WireMode::Less);
    assert_eq!(codes(&events, "rejected"), ["LESS_BUDGET_EXCEEDED"]);
    assert_eq!(of_kind(&events, "resent").len(), 1);
    let delivered = of_kind(&events, "delivered");
    assert_eq!(delivered.len(), 1, "only the resend is delivered");
    assert!(delivered[0]["doc"].get("body").is_none(), "the resend pastes nothing");
    assert!(delivered[0]["tokens"].as_u64() <= delivered[0]["max_tokens"].as_u64());
    assert_eq!(report.roles["programmer"].rejections, 1);
    assert_eq!(report.roles["programmer"].resends, 1);
    assert_eq!(report.totals.escalations, 0);
    // LESS §12's rates: every refusal was followed by a resend; the one fact delivered is the top kind.
    assert_eq!(report.rates.resend_rate, Some(1.0));
    assert_eq!(
        report.rates.top_engram_kinds.iter().map(|k| (k.kind.as_str(), k.count)).collect::<Vec<_>>(),
        [("fact", 1)]
    );
    assert_eq!(report.rates.deref_denial_rate, None, "no deref was asked");
}

#[test]
fn code_pasted_into_a_claim_is_refused_without_the_sender_declaring_it() {
    // Nothing flags this report as carrying code: the gateway finds it in the claim (issue 35: any text field).
    let code: String = (0..40).map(|i| format!("x{i}=f({i});\n")).collect();
    let steps = format!(
        r#"
[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "1"
status = "pass"
engrams = [{{ kind = "fact", claim = """{code}""", pointers = ["repo:src/a.rs#L1-L2"], confidence = 0.9 }}]
"#
    );
    let (_, events) = run(&steps, WireMode::Less);
    let rejected = of_kind(&events, "rejected");
    assert!(!rejected.is_empty(), "{events:?}");
    for refusal in &rejected {
        assert_eq!(refusal["code"], "LESS_BUDGET_EXCEEDED", "{refusal}");
        let message = refusal["message"].as_str().expect("message");
        assert!(message.contains("inline code") && message.contains("MAX_INLINE_CODE is 0"), "{message}");
    }
    let delivered = of_kind(&events, "delivered");
    assert!(delivered.iter().all(|d| !d.to_string().contains("x17=f(17)")), "never delivered whole: {delivered:?}");
    // The same claim as one line of prose citing the code passes.
    let prose = steps.replace(&format!("\"\"\"{code}\"\"\""), "\"f is called once per item (x0 to x39).\"");
    let (_, events) = run(&prose, WireMode::Less);
    assert!(of_kind(&events, "rejected").is_empty(), "{events:?}");
    assert_eq!(of_kind(&events, "delivered").len(), 1);
}

#[test]
fn inline_code_needs_a_grant_even_under_the_token_budget() {
    // A small pasted span fits 800 tokens, but it is code and MAX_INLINE_CODE is 0.
    let body = REPORT_PASTE
        .replace("MISBEHAVE", "paste_files")
        .replace("repo:src/a.rs#L1-L2", "test:budget::spend_never_exceeds");
    let (_, events) = run(&body, WireMode::Less);
    let rejected = of_kind(&events, "rejected");
    assert_eq!(rejected.len(), 1);
    assert!(rejected[0]["message"].as_str().expect("message").contains("inline code"), "{}", rejected[0]);

    // With a grant for inline code from the manager, the same paste is delivered.
    let granted = format!(
        "{}\n{}",
        r#"
[[steps]]
action = "brief"
agent = "manager"
to = ["dev"]
now = ["Paste the test if you must."]
grants = [{ id = "code", to = "dev", patterns = ["test:budget::*"], max_derefs = 1, max_tokens = 100, inline_code_tokens = 200 }]
"#,
        body.replace("misbehave = \"paste_files\"", "misbehave = \"paste_files\"\ngrant = \"code\"")
    );
    let (_, events) = run(&granted, WireMode::Less);
    assert!(of_kind(&events, "rejected").is_empty(), "{:?}", of_kind(&events, "rejected"));
    assert!(of_kind(&events, "delivered").iter().any(|e| e["doc"]["body"].is_string()));

    // The grant has one use: a second pasted message under it is refused, and the resend pastes nothing.
    let twice = format!(
        "{granted}{}",
        body.replace("misbehave = \"paste_files\"", "misbehave = \"paste_files\"\ngrant = \"code\"")
    );
    let (_, events) = run(&twice, WireMode::Less);
    assert_eq!(codes(&events, "rejected"), ["LESS_GRANT_INVALID"]);
    let pasted: Vec<_> = of_kind(&events, "delivered").into_iter().filter(|e| e["doc"]["body"].is_string()).collect();
    assert_eq!(pasted.len(), 1, "only the first paste was covered");
}

#[test]
fn a_second_refusal_escalates_to_the_senders_parent() {
    let (report, events) = run(&REPORT_PASTE.replace("MISBEHAVE", "paste_twice"), WireMode::Less);
    assert_eq!(codes(&events, "rejected"), ["LESS_BUDGET_EXCEEDED", "LESS_BUDGET_EXCEEDED"]);
    let escalated = of_kind(&events, "escalated");
    assert_eq!(escalated.len(), 1);
    assert_eq!((escalated[0]["about"].as_str(), escalated[0]["to"].as_str()), (Some("dev"), Some("manager")));
    let to_manager: Vec<_> = of_kind(&events, "delivered")
        .into_iter()
        .filter(|e| e["to"] == "manager" && e["kind"] == "escalation")
        .collect();
    assert_eq!(to_manager.len(), 1, "the escalation is delivered to the sender's parent");
    assert_eq!(to_manager[0]["doc"]["type"], "escalation");
    assert_eq!(report.roles["programmer"].escalations, 1);

    // The same script in verbatim mode is never refused: the baseline has no budgets.
    let (report, events) = run(&REPORT_PASTE.replace("MISBEHAVE", "paste_twice"), WireMode::Verbatim);
    assert!(of_kind(&events, "rejected").is_empty());
    assert_eq!(report.totals.escalations, 0);
}

#[test]
fn schema_and_semantic_violations_are_refused_with_their_code() {
    let body = r#"
[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "1"
status = "pass"
engrams = [{ kind = "decision", claim = "Adopt the vendor's scheme.", pointers = ["url:https://example.org/scheme"] }]
"#;
    let (_, events) = run(body, WireMode::Less);
    // The scripted resend is identical, so it is refused again and escalated.
    assert_eq!(codes(&events, "rejected"), ["LESS_SOURCE_REQUIRED", "LESS_SOURCE_REQUIRED"]);
    assert_eq!(of_kind(&events, "escalated").len(), 1);
}

#[test]
fn too_many_engrams_are_refused_then_resent() {
    let body =
        format!("[budgets.roles.manager]\nmax_engrams = 4\n{}", REPORT_PASTE.replace("MISBEHAVE", "too_many_engrams"));
    let (_, events) = run(&body, WireMode::Less);
    let rejected = of_kind(&events, "rejected");
    assert_eq!(codes(&events, "rejected"), ["LESS_BUDGET_EXCEEDED"]);
    assert!(rejected[0]["message"].as_str().expect("message").contains("12 engrams"));
    assert_eq!(of_kind(&events, "resent").len(), 1);
}

const GRANT_BRIEF: &str = r#"
[budgets.roles.programmer]
max_repo_spans = 2

[[steps]]
action = "brief"
agent = "manager"
to = ["dev"]
now = ["Read what you need."]
grants = [GRANTS]
"#;

fn deref(agent: &str, n_files: usize, grant: Option<&str>) -> String {
    let pointers: Vec<String> =
        ["a", "b", "c", "d"].iter().take(n_files).map(|f| format!("\"repo:src/{f}.rs#L1-L20\"")).collect();
    format!(
        "\n[[steps]]\naction = \"deref\"\nagent = \"{agent}\"\npointers = [{}]\nreason = \"r\"\nuse = \"u\"\n{}",
        pointers.join(", "),
        grant.map(|g| format!("grant = \"{g}\"\n")).unwrap_or_default()
    )
}

fn turn_end(agent: &str) -> String {
    format!("\n[[steps]]\naction = \"report\"\nagent = \"{agent}\"\ntype = \"question\"\nquestion = \"next?\"\n")
}

#[test]
fn derefs_beyond_the_budget_need_a_valid_grant() {
    let grant = r#"{ id = "g", to = "dev", patterns = ["repo:src/**"], max_derefs = 3, max_tokens = 3000, uses = 1 }"#;
    let body = format!(
        "{}{}{}{}{}{}{}",
        GRANT_BRIEF.replace("GRANTS", grant),
        deref("dev", 2, None),      // within budget: granted
        deref("dev", 1, None),      // a third span this turn: denied
        deref("dev", 3, Some("g")), // beyond budget, under the grant: granted
        turn_end("dev"),
        deref("dev", 3, Some("g")),  // the grant's one use is spent: replay refused
        deref("peer", 3, Some("g")), // another agent presenting it: refused
    );
    let (report, events) = run(&body, WireMode::Less);
    let derefs = of_kind(&events, "deref");
    let verdicts: Vec<(bool, Option<&str>)> =
        derefs.iter().map(|e| (e["granted"].as_bool().expect("granted"), e["code"].as_str())).collect();
    assert_eq!(
        verdicts,
        vec![
            (true, None),
            (false, Some("LESS_DEREF_DENIED")),
            (true, None),
            (false, Some("LESS_GRANT_INVALID")),
            (false, Some("LESS_GRANT_INVALID")),
        ]
    );
    assert_eq!(derefs[2]["via_grant"], "g");
    assert_eq!(report.roles["programmer"].derefs, 2);
    // Verbatim mode has no deref budget: everything is granted.
    let (_, events) = run(&body, WireMode::Verbatim);
    assert!(of_kind(&events, "deref").iter().all(|e| e["granted"] == true));
}

#[test]
fn forged_expired_and_misdirected_grants_are_refused() {
    let grants = [
        r#"{ id = "forged", to = "dev", patterns = ["repo:src/**"], max_derefs = 3, max_tokens = 3000, tamper = true }"#,
        r#"{ id = "expired", to = "dev", patterns = ["repo:src/**"], max_derefs = 3, max_tokens = 3000, ttl = "PT0S" }"#,
        r#"{ id = "narrow", to = "dev", patterns = ["repo:docs/**"], max_derefs = 3, max_tokens = 3000 }"#,
    ]
    .join(", ");
    let body = format!(
        "{}{}{}{}{}{}",
        GRANT_BRIEF.replace("GRANTS", &grants),
        deref("dev", 3, Some("forged")),
        turn_end("dev"),
        deref("dev", 3, Some("expired")),
        turn_end("dev"),
        deref("dev", 3, Some("narrow")),
    );
    // A child cannot grant to its parent: such a scenario is refused before anything runs.
    let upward = "\n[[steps]]\naction = \"brief\"\nagent = \"dev\"\nnow = [\"x\"]\ngrants = [{ id = \"up\", to = \"manager\", patterns = [\"repo:**\"], max_derefs = 1, max_tokens = 10 }]\n";
    let toml = format!("name = \"t\"\nworkspace = \".\"\n{body}{upward}\n{HIERARCHY}");
    let refused = Scenario::from_toml(&toml, Path::new(".")).expect_err("an upward grant is refused");
    assert!(refused.to_string().contains("LESS_SCENARIO_INVALID"), "{refused}");
    let (_, events) = run(&body, WireMode::Less);
    // The tampered grant is refused on delivery, so the dev never holds it.
    let refused_grants: Vec<_> =
        of_kind(&events, "rejected").into_iter().filter(|e| e["code"] == "LESS_GRANT_INVALID").collect();
    assert_eq!(refused_grants.len(), 1, "{refused_grants:?}");
    let verdicts: Vec<Option<&str>> = of_kind(&events, "deref").iter().map(|e| e["code"].as_str()).collect();
    assert_eq!(verdicts, vec![Some("LESS_GRANT_INVALID"), Some("LESS_GRANT_INVALID"), Some("LESS_DEREF_DENIED")]);
}

#[test]
fn the_resolver_refuses_a_symlink_out_of_the_workspace_through_the_gateway() {
    let body = "\n[[steps]]\naction = \"deref\"\nagent = \"dev\"\npointers = [\"repo:src/link.rs\"]\nreason = \"r\"\nuse = \"u\"\n";
    let (_, events) = run(body, WireMode::Less);
    let derefs = of_kind(&events, "deref");
    assert_eq!(derefs.len(), 1);
    assert_eq!(derefs[0]["code"], "LESS_POINTER_UNRESOLVED");
}

#[test]
fn a_panicking_agent_is_restarted_and_the_run_goes_on() {
    let body = format!(
        "\n[[steps]]\naction = \"panic\"\nagent = \"dev\"\n{}",
        REPORT_PASTE.replace("misbehave = \"MISBEHAVE\"\n", "")
    );
    let (report, events) = run(&body, WireMode::Less);
    assert_eq!(of_kind(&events, "restart").len(), 1);
    assert_eq!(report.roles["programmer"].restarts, 1);
    assert_eq!(of_kind(&events, "delivered").len(), 1, "the step after the panic still runs");
}

#[test]
fn digests_of_dereferenced_content_are_recorded_in_the_citing_engram() {
    let body = format!(
        "{}{}",
        deref("dev", 1, None),
        REPORT_PASTE.replace("misbehave = \"MISBEHAVE\"\n", "").replace("#L1-L2", "#L1-L20")
    );
    let (_, events) = run(&body, WireMode::Less);
    let delivered = of_kind(&events, "delivered");
    let pointer = &delivered[0]["doc"]["engrams"][0]["pointers"][0];
    assert!(pointer["digest"].as_str().is_some_and(|d| d.starts_with("blake3:")), "{pointer}");
}

/// Runs a shipped scenario with a pinned clock and grant key; the report as JSON.
fn run_shipped(name: &str, mode: WireMode, clock: time::OffsetDateTime, secret: u8) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(format!("{name}.toml"));
    let scenario = Arc::new(Scenario::load(&path).unwrap_or_else(|v| panic!("{name}: {v}")));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let pinned = Some(less_runtime::run::Pinned { clock, secret: [secret; 32] });
    let options = RunOptions { pinned, ..RunOptions::new(mode) };
    let report = runtime.block_on(run_scenario(scenario, Arc::new(ScriptedFactory), options)).expect("run completes");
    serde_json::to_value(&report).expect("report is JSON")
}

#[test]
fn the_same_scenario_counts_the_same_tokens_whatever_the_clock_and_grant_key() {
    // Another day, another time of day, another grant key: nothing a run stamps may change what it counts.
    let at = |unix| time::OffsetDateTime::from_unix_timestamp(unix).expect("a time");
    let (first, second) = (at(1_767_225_600), at(1_942_358_287));
    for name in ["uc1-refactor", "uc2-contradictions", "uc3-review", "uc4-shared-knowledge"] {
        for mode in [WireMode::Less, WireMode::Verbatim] {
            let a = run_shipped(name, mode, first, 1);
            let b = run_shipped(name, mode, second, 2);
            assert_eq!(a["roles"], b["roles"], "{name} {mode:?}: per-role counts differ between runs");
            assert_eq!(a["totals"], b["totals"], "{name} {mode:?}");
            assert!(a["totals"]["inline_tokens"]["total"].as_u64().unwrap_or(0) > 0, "{name} {mode:?} counted nothing");
        }
    }
}

#[test]
fn all_six_typed_messages_are_sent_and_delivered_typed() {
    let steps = r#"
[[steps]]
action = "report"
agent = "dev"
type = "task_claim"
task = "2.1"
symbols = ["F12", "C3"]
capsules = ["w1"]

[[steps]]
action = "report"
agent = "dev"
type = "question"
question = "Does capture move before pricing?"

[[steps]]
action = "report"
agent = "dev"
type = "gate_report"
gate_id = "unit"
status = "pass"
report_ref = "artifact:docs/SPEC.md"

[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "2.1"
status = "pass"
engrams = [{ kind = "fact", claim = "a_1 multiplies by one.", pointers = ["repo:src/a.rs#L1-L2"] }]

[[steps]]
action = "report"
agent = "manager"
type = "checkpoint"
wave = 1
state = "complete"
capsules = ["w1"]

[[steps]]
action = "report"
agent = "manager"
type = "escalation"
reason = "wave 2 is blocked on a missing schema"
severity = "warning"
"#;
    for mode in [WireMode::Less, WireMode::Verbatim] {
        let (report, events) = run(steps, mode);
        assert!(codes(&events, "rejected").is_empty(), "{mode:?}: nothing refused");
        let delivered = of_kind(&events, "delivered");
        let types: Vec<&str> = delivered.iter().filter_map(|e| e["doc"]["type"].as_str()).collect();
        assert_eq!(
            types,
            ["task_claim", "question", "gate_report", "task_result", "checkpoint", "escalation"],
            "{mode:?}"
        );
        assert_eq!(delivered[0]["doc"]["symbols"], serde_json::json!(["F12", "C3"]));
        assert_eq!(delivered[4]["doc"]["state"], "complete");
        assert_eq!(delivered[4]["to"], "lead", "a manager reports to its parent");
        assert_eq!(report.totals.escalations, 1, "{mode:?}: the manager's own escalation");
    }
}

#[test]
fn a_less_brief_is_a_delta_that_never_carries_the_plan_body() {
    // Heimdall's delta-brief check: the plan (goal, criteria) is planted; a LESS brief carries what matters now and
    // the pointers chosen, never the plan, while the fair baseline restates it, as an orchestrator without LESS does.
    let planted = "PLANTED-PLAN-BODY-5e1c";
    let plan = format!(
        "[plan]\ngoal = \"Rewrite the multiplier table. {planted}\"\ncriteria = [\"every product is unchanged {planted}\"]\n"
    );
    let step = r#"
[[steps]]
action = "brief"
agent = "lead"
now = ["Manager: split the table work."]
packs = { manager = ["repo:src/a.rs#L1-L5"] }
"#;
    let brief = |events: &[Value]| {
        let briefs = of_kind(events, "delivered");
        assert_eq!(briefs.len(), 1, "one brief to the manager");
        (briefs[0]["doc"].to_string(), briefs[0]["tokens"].as_u64().expect("tokens"))
    };
    let (less_doc, less_with_plan) = brief(&run(&format!("{plan}{step}"), WireMode::Less).1);
    assert!(!less_doc.contains(planted), "the LESS brief carries no plan: {less_doc}");
    assert!(less_doc.contains("repo:src/a.rs#L1-L5"), "it carries the pointer chosen");
    let (_, less_without_plan) = brief(&run(step, WireMode::Less).1);
    assert_eq!(less_with_plan, less_without_plan, "the plan adds nothing to a LESS brief");
    let (_, baseline_with_plan) = brief(&run(&format!("{plan}{step}"), WireMode::Verbatim).1);
    let (_, baseline_without_plan) = brief(&run(step, WireMode::Verbatim).1);
    assert!(baseline_with_plan > baseline_without_plan, "the baseline restates the plan");
}

const SHARED: &str = r#"
[symbols]
F12 = "src/a.rs"
F13 = "src/b.rs"

[[capsules]]
id = "w1"
what = "Added the multiplier table"
where = "F12"
gotcha = "rotate_left takes i % 7"

[[capsules]]
id = "w2"
what = "Added the product check"
depends = ["w1"]

[[capsules]]
id = "w3"
what = "Unrelated docs pass UNRELATED-CAPSULE-7f"
"#;

/// A brief step naming `symbols` and `capsules`.
fn shared_brief(symbols: &str, capsules: &str) -> String {
    format!(
        "[[steps]]\naction = \"brief\"\nagent = \"lead\"\nnow = [\"Manager: check the products.\"]\n\
         symbols = {symbols}\ncapsules = {capsules}\n"
    )
}

#[test]
fn a_brief_carries_the_symbols_it_names_and_only_the_closure_of_its_capsules() {
    // Heimdall's delta brief with a symbol table and capsules: naming w2 hydrates w1 (its dependency) before w2, and
    // never the unrelated w3; only the named symbol's entry travels. The run also writes the table and the capsules
    // into its store, where an MCP client of the same store resolves and hydrates them.
    let body = format!("{SHARED}{}", shared_brief(r#"["F12"]"#, r#"["w2"]"#));
    let (_, events, out) = run_kept(&body, WireMode::Less);
    let delivered = of_kind(&events, "delivered");
    assert_eq!(delivered.len(), 1, "one brief to the manager");
    let doc = &delivered[0]["doc"];
    assert_eq!(doc["symbols"], serde_json::json!({ "F12": "src/a.rs" }), "only the named symbol: {doc}");
    let capsules: Vec<&str> = doc["capsules"].as_array().expect("capsules").iter().filter_map(Value::as_str).collect();
    assert_eq!(capsules.len(), 2, "{capsules:?}");
    assert!(capsules[0].starts_with("w1: Added the multiplier table\nwhere: F12"), "dependency first: {capsules:?}");
    assert!(capsules[1].starts_with("w2: Added the product check"), "{capsules:?}");
    assert!(!doc.to_string().contains("UNRELATED-CAPSULE-7f"), "w3 is not in the closure: {doc}");

    let desk = less_runtime::desk::Desk::open(
        &out.path().join("memory"),
        None,
        less_runtime::desk::DeskConfig::from_toml("project = \"t\"").expect("config"),
    )
    .expect("the run's store opens as a desk");
    let client = less_runtime::desk::DeskConfig::from_toml("project = \"t\"").expect("config").client("host");
    let hydrated = desk.capsule_hydrate(&client, &["w2".to_owned()]).expect("hydrate");
    let ids: Vec<&str> = hydrated.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["w1", "w2"], "the store hydrates the same closure");
    assert_eq!(hydrated[0].text, capsules[0], "and renders it the same way");
}

#[test]
fn symbols_and_capsules_cost_the_same_in_the_fair_baseline_and_all_of_them_in_the_whole_one() {
    let tokens = |body: &str, mode: WireMode| {
        let events = run(body, mode).1;
        of_kind(&events, "delivered")[0]["tokens"].as_u64().expect("tokens")
    };
    let none = format!("{SHARED}{}", shared_brief("[]", "[]"));
    let named = format!("{SHARED}{}", shared_brief(r#"["F12"]"#, r#"["w2"]"#));
    // The fair baseline spells out what the brief names (the symbol's value, the closure as prior work): the
    // mechanisms carry the same information in both modes, so each costs tokens in both.
    assert!(tokens(&named, WireMode::Less) > tokens(&none, WireMode::Less));
    assert!(tokens(&named, WireMode::Verbatim) > tokens(&none, WireMode::Verbatim));
    // The whole-file baseline restates every symbol and every capsule, named or not.
    assert_eq!(tokens(&named, WireMode::VerbatimWhole), tokens(&none, WireMode::VerbatimWhole));
    let without_shared = shared_brief("[]", "[]");
    assert!(tokens(&none, WireMode::VerbatimWhole) > tokens(&without_shared, WireMode::VerbatimWhole));
}

#[test]
fn a_brief_naming_an_unknown_symbol_or_capsule_is_refused_before_the_run() {
    let (dir, _outside) = workspace();
    let check = |body: String| {
        let toml = format!("name = \"t\"\nworkspace = \".\"\n{body}\n{HIERARCHY}");
        Scenario::from_toml(&toml, dir.path()).expect_err("refused").0
    };
    let unknown = check(format!("{SHARED}{}", shared_brief(r#"["F99"]"#, r#"["w9"]"#)));
    let paths: Vec<(&str, &str)> = unknown.iter().map(|v| (v.code.as_str(), v.path.as_str())).collect();
    assert_eq!(
        paths,
        [("LESS_SCENARIO_INVALID", "/steps/0/symbols/0"), ("LESS_SCENARIO_INVALID", "/steps/0/capsules/0")],
        "{unknown:?}"
    );
    // A capsule may depend only on one written before it: no forward reference, hence no cycle.
    let forward = check(
        "[[capsules]]\nid = \"a\"\nwhat = \"x\"\ndepends = [\"b\"]\n[[capsules]]\nid = \"b\"\nwhat = \"y\"\n"
            .to_owned(),
    );
    assert_eq!(forward[0].path, "/capsules/0/depends/0", "{forward:?}");
}

#[test]
fn the_gate_adapter_reads_the_status_from_the_report_and_carries_only_its_reference() {
    let step = |report: &str| {
        format!(
            "[[steps]]\naction = \"report\"\nagent = \"dev\"\ntype = \"gate_report\"\ngate_id = \"unit\"\n\
             report_ref = \"{report}\"\n"
        )
    };
    let (_, events) = run(&step("artifact:docs/gate.txt"), WireMode::Less);
    let delivered = of_kind(&events, "delivered");
    assert_eq!(delivered.len(), 1, "{events:?}");
    let doc = &delivered[0]["doc"];
    assert_eq!(doc["status"], "fail", "read from the cargo summary: {doc}");
    assert_eq!(doc["report_ref"], "artifact:docs/gate.txt", "the reference");
    assert!(!doc.to_string().contains("2 passed"), "never the report's text: {doc}");
    // A report that says neither pass nor fail is refused, not guessed.
    let (_, events) = run(&step("artifact:docs/SPEC.md"), WireMode::Less);
    assert!(of_kind(&events, "delivered").is_empty(), "{events:?}");
    // Neither a status nor a report to read it from: refused by validation.
    let toml = format!(
        "name = \"t\"\n[[steps]]\naction = \"report\"\nagent = \"dev\"\ntype = \"gate_report\"\n\
         gate_id = \"unit\"\n{HIERARCHY}"
    );
    let refused = Scenario::from_toml(&toml, Path::new(".")).expect_err("refused").0;
    assert_eq!(refused[0].path, "/steps/0/status", "{refused:?}");
}

#[test]
fn org_engrams_are_read_only_where_the_scenario_enables_shared_reads() {
    // LESS §13.3: org and global engrams need an administrator's enablement. The manager promotes the dev's fact to
    // org; the peer then asks for it. Without `shared_reads` the promoted engram is hidden (and asking for the org
    // scope is refused); with it, the peer finds it.
    let steps = r#"
[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "1"
status = "pass"
engrams = [{ kind = "fact", claim = "The dev server listens on port 8437.", pointers = ["repo:src/a.rs#L1-L2"], confidence = 0.9, scope = "project", tags = ["subject:dev-port"] }]

[[steps]]
action = "promote"
agent = "manager"
subject = "dev-port"
to = "org"

[[steps]]
action = "query"
agent = "peer"
text = "which port does the dev server listen on"

[[steps]]
action = "query"
agent = "peer"
text = "dev server port"
scope = "org"
"#;
    let queries = |events: &[Value]| -> Vec<(usize, Option<String>)> {
        of_kind(events, "query")
            .iter()
            .map(|q| (q["returned"].as_array().map_or(0, Vec::len), q["code"].as_str().map(str::to_owned)))
            .collect()
    };
    let (_, closed) = run(steps, WireMode::Less);
    assert!(of_kind(&closed, "promote").iter().all(|p| p.get("code").is_none()), "the promotion itself is allowed");
    assert_eq!(
        queries(&closed),
        [(0, None), (0, Some("LESS_SCOPE_DENIED".to_owned()))],
        "hidden without shared_reads: {closed:?}"
    );
    let (_, open) = run(&format!("shared_reads = true\n{steps}"), WireMode::Less);
    let found = queries(&open);
    assert!(found.iter().all(|(n, code)| *n == 1 && code.is_none()), "found with shared_reads: {found:?}");
}

#[test]
fn the_memory_table_gates_direct_writes_promotion_and_reads_per_role() {
    // LESS §4.3 / §8.1 / §13.2 through a run: with `writes = ["run"]` a child's project engram is refused and its run
    // engram stored; the child may not widen it to project, its parent may (above the scenario's floor); programmers,
    // who read only run scope here, then no longer find it, the lead does.
    let steps = r#"
[memory]
writes = ["run"]
promotion_floor = 0.85
reads = { programmer = ["run"] }

[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "1"
status = "pass"
engrams = [{ kind = "fact", claim = "The dev server listens on port 8437.", pointers = ["repo:src/a.rs#L1-L2"], confidence = 0.9, scope = "project", tags = ["subject:dev-port"] }]

[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "2"
status = "pass"
engrams = [{ kind = "fact", claim = "The build tool is cargo-make.", pointers = ["repo:src/a.rs#L1-L2"], confidence = 0.9, scope = "run", tags = ["subject:build-tool"] }]

[[steps]]
action = "query"
agent = "peer"
text = "which build tool"

[[steps]]
action = "promote"
agent = "dev"
subject = "build-tool"
to = "project"

[[steps]]
action = "promote"
agent = "manager"
subject = "build-tool"
to = "project"

[[steps]]
action = "query"
agent = "peer"
text = "which build tool"

[[steps]]
action = "query"
agent = "lead"
text = "which build tool"
"#;
    let (_, events) = run(steps, WireMode::Less);
    let puts: Vec<(&str, Option<&str>)> = of_kind(&events, "memory_put")
        .iter()
        .map(|p| (p["status"].as_str().unwrap_or(""), p["code"].as_str()))
        .collect();
    assert_eq!(puts, [("refused", Some("LESS_SCOPE_DENIED")), ("stored", None)], "{events:?}");
    let promotions: Vec<Option<&str>> = of_kind(&events, "promote").iter().map(|p| p["code"].as_str()).collect();
    assert_eq!(promotions, [Some("LESS_SCOPE_DENIED"), None], "the child may not, its parent may: {events:?}");
    let returned: Vec<usize> =
        of_kind(&events, "query").iter().map(|q| q["returned"].as_array().map_or(0, Vec::len)).collect();
    assert_eq!(returned, [1, 0, 1], "run scope read by programmers until promoted; the lead reads project: {events:?}");
    // The floor is the scenario's: at 0.95 the parent's promotion is refused too.
    let (_, strict) = run(&steps.replace("promotion_floor = 0.85", "promotion_floor = 0.95"), WireMode::Less);
    let promotions: Vec<Option<&str>> = of_kind(&strict, "promote").iter().map(|p| p["code"].as_str()).collect();
    assert_eq!(promotions, [Some("LESS_SCOPE_DENIED"), Some("LESS_SCOPE_DENIED")], "{strict:?}");
}

#[test]
fn a_recall_answer_over_the_receivers_inline_budget_is_cut_with_pointers_to_the_rest() {
    // The query is answered by the asking agent's gateway: counted, capped at its role's max_inline_tokens, on the
    // ledger. Four engrams do not fit 300 tokens: the best that fit are delivered, the others named by pointers.
    let engram = |i: usize| {
        format!(
            "{{ kind = \"fact\", claim = \"Cache shard {i} of the billing service keeps invoices for {i} days before \
             the nightly job moves them to cold storage.\", pointers = [\"repo:src/a.rs#L1-L2\"], confidence = 0.9, \
             scope = \"project\" }}"
        )
    };
    let body = |cap: u32| {
        format!(
            r#"
[budgets.roles.programmer]
max_inline_tokens = {cap}

[[steps]]
action = "report"
agent = "dev"
type = "task_result"
task = "1"
status = "pass"
engrams = [{}, {}, {}, {}]

[[steps]]
action = "query"
agent = "peer"
text = "cache shard billing invoices cold storage"
k = 4
"#,
            engram(1),
            engram(2),
            engram(3),
            engram(4)
        )
    };
    let (_, events) = run(&body(300), WireMode::Less);
    let query = of_kind(&events, "query")[0];
    let returned = query["returned"].as_array().expect("returned").len();
    let more = query["more"].as_array().expect("cut: pointers to the rest").clone();
    assert!(returned >= 1 && returned + more.len() == 4, "{query}");
    assert!(more.iter().all(|p| p.as_str().is_some_and(|p| p.starts_with("sam:engram:"))), "{query}");
    assert!(query["tokens"].as_u64().expect("tokens") <= 300, "{query}");
    // Uncut under the default budget; refused when not even the pointers fit.
    let (_, events) = run(&body(800), WireMode::Less);
    let query = of_kind(&events, "query")[0];
    assert_eq!((query["returned"].as_array().map(Vec::len), query.get("more")), (Some(4), None), "{query}");
    let (_, events) = run(&body(10), WireMode::Less);
    let query = of_kind(&events, "query")[0];
    assert_eq!((query["code"].as_str(), query["tokens"].as_u64()), (Some("LESS_BUDGET_EXCEEDED"), Some(0)), "{query}");
}

#[test]
fn a_grant_for_places_outside_the_workspace_is_refused_before_the_run() {
    // No issuer holds what lies outside the workspace, so no grant may name it (the resolver would refuse the deref
    // anyway; the grant itself is already wrong). The same rule as the MCP desk's, for `..`, absolute paths and
    // percent-encoded dots.
    let (dir, _outside) = workspace();
    for pattern in ["repo:../outside/**", "repo:/etc/passwd", "artifact:docs/%2e%2e/x.md"] {
        let toml = format!(
            "name = \"t\"\n[[steps]]\naction = \"brief\"\nagent = \"manager\"\nto = [\"dev\"]\nnow = [\"Read.\"]\n\
             grants = [{{ id = \"g1\", to = \"dev\", patterns = [\"{pattern}\"], max_derefs = 1, max_tokens = 100 }}]\n\
             {HIERARCHY}"
        );
        let refused = Scenario::from_toml(&toml, dir.path()).expect_err(pattern).0;
        assert_eq!(
            (refused[0].code.as_str(), refused[0].path.as_str()),
            ("LESS_SCENARIO_INVALID", "/steps/0/grants/0/patterns/0"),
            "{pattern}: {refused:?}"
        );
    }
}

/// [`HIERARCHY`] with the manager (and so the dev and the peer) reaching `src/a.rs` and `src/b.rs` alone.
fn narrow() -> String {
    let manager = "parent = \"lead\"\n";
    assert!(HIERARCHY.contains(manager));
    HIERARCHY.replace(manager, &format!("{manager}reach = [\"repo:src/a.rs\", \"repo:src/b.rs\"]\n"))
}

fn brief_granting(agent: &str, to: &str, grant: &str) -> String {
    format!(
        "\n[[steps]]\naction = \"brief\"\nagent = \"{agent}\"\nto = [\"{to}\"]\nnow = [\"Read.\"]\ngrants = [{grant}]\n"
    )
}

fn deref_one(agent: &str, pointer: &str, grant: Option<&str>) -> String {
    format!(
        "\n[[steps]]\naction = \"deref\"\nagent = \"{agent}\"\npointers = [\"{pointer}\"]\nreason = \"r\"\nuse = \"u\"\n{}",
        grant.map(|g| format!("grant = \"{g}\"\n")).unwrap_or_default()
    )
}

/// An agent reads outside its reach only through a grant, and grants only what it holds: its reach and the grants
/// it was given. The lead (the whole workspace) gives the manager `src/c.rs`; the manager passes it to the dev, who
/// reads it with that grant and not without.
#[test]
fn outside_its_reach_an_agent_reads_only_through_a_grant_it_was_passed() {
    let to_manager =
        r#"{ id = "g-c", to = "manager", patterns = ["repo:src/c.rs"], max_derefs = 2, max_tokens = 3000, uses = 2 }"#;
    let to_dev = r#"{ id = "g-c-dev", to = "dev", patterns = ["repo:src/c.rs"], max_derefs = 1, max_tokens = 3000, uses = 1, ttl = "PT30M" }"#;
    let body = [
        deref_one("dev", "repo:src/a.rs#L1-L2", None),
        deref_one("dev", "repo:src/c.rs#L1-L2", None),
        brief_granting("lead", "manager", to_manager),
        brief_granting("manager", "dev", to_dev),
        deref_one("dev", "repo:src/c.rs#L1-L2", Some("g-c-dev")),
    ]
    .concat();
    let (_, events, _out) = run_in(&body, &narrow(), WireMode::Less);
    let derefs = of_kind(&events, "deref");
    let verdicts: Vec<(bool, Option<&str>)> =
        derefs.iter().map(|e| (e["granted"].as_bool().expect("granted"), e["code"].as_str())).collect();
    assert_eq!(verdicts, vec![(true, None), (false, Some("LESS_DEREF_DENIED")), (true, None)]);
    assert_eq!(derefs[2]["via_grant"], "g-c-dev");
    let issued: Vec<&str> = of_kind(&events, "grant_issued").iter().filter_map(|e| e["grant_id"].as_str()).collect();
    assert_eq!(issued, ["g-c", "g-c-dev"]);
}

/// A grant wider than its issuer holds, or a reach wider than the parent's, is refused before the run.
#[test]
fn a_grant_or_a_reach_wider_than_the_issuer_holds_is_refused_before_the_run() {
    let (dir, _outside) = workspace();
    let wide = r#"{ id = "g", to = "dev", patterns = ["repo:src/**"], max_derefs = 1, max_tokens = 100 }"#;
    let toml = format!("name = \"t\"\n{}{}", brief_granting("manager", "dev", wide), narrow());
    let refused = Scenario::from_toml(&toml, dir.path()).expect_err("wider than the manager holds").0;
    assert_eq!(
        (refused[0].code.as_str(), refused[0].path.as_str()),
        ("LESS_SCENARIO_INVALID", "/steps/0/grants/0/patterns/0"),
        "{refused:?}"
    );
    assert!(refused[0].message.contains("wider than manager holds"), "{refused:?}");
    let wider_child =
        narrow().replace("parent = \"manager\"\n[[agents]]", "parent = \"manager\"\nreach = [\"repo:**\"]\n[[agents]]");
    let refused = Scenario::from_toml(&format!("name = \"t\"\n{wider_child}"), dir.path()).expect_err("dev wider").0;
    assert_eq!(refused[0].path, "/agents/2/reach/0", "{refused:?}");
}

/// Agents under an architect for the search tests: `dev` may read only `src/a.rs`, `tight` takes 40 inline tokens.
const SEARCHERS: &str = r#"
[budgets.roles.tight]
max_inline_tokens = 40

[[agents]]
id = "lead"
role = "architect"
[[agents]]
id = "dev"
role = "programmer"
parent = "lead"
reach = ["repo:src/a.rs"]
[[agents]]
id = "wide"
role = "programmer"
parent = "lead"
[[agents]]
id = "small"
role = "tight"
parent = "lead"
"#;

const SEARCHES: &str = r#"
[[steps]]
action = "search"
agent = "wide"
query = "discount tiers for large orders, or wrapping_mul"
k = 4

[[steps]]
action = "search"
agent = "dev"
query = "wrapping_mul rotate_left"
k = 3

[[steps]]
action = "list"
agent = "wide"
pattern = "src"

[[steps]]
action = "search"
agent = "small"
query = "wrapping_mul"
k = 10
"#;

/// Runs [`SEARCHES`] in `mode` with the index in a directory of its own; the ledger's events.
fn searched(mode: WireMode) -> Vec<Value> {
    let (dir, _outside) = workspace();
    let mut pricing = String::from("/// Discount tiers for large orders.\npub fn discount(total: u64) -> u64 {\n");
    for tier in 1..=30 {
        pricing.push_str(&format!("    if total > {tier}000 {{ return total / 100 * {tier}; }}\n"));
    }
    pricing.push_str("    0\n}\n");
    std::fs::write(dir.path().join("src/pricing.rs"), pricing).expect("write");
    let out = tempfile::tempdir().expect("out");
    let index_dir = tempfile::tempdir().expect("index");
    let toml = format!("name = \"s\"\nworkspace = \".\"\n{SEARCHES}\n{SEARCHERS}");
    let scenario = Arc::new(Scenario::from_toml(&toml, dir.path()).unwrap_or_else(|v| panic!("scenario: {v}")));
    let index = less_runtime::workspace::SharedIndex::new(&scenario.workspace, Some(index_dir.path()));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let options = RunOptions { out_dir: Some(out.path().to_owned()), index: Some(index), ..RunOptions::new(mode) };
    runtime.block_on(run_scenario(scenario, Arc::new(ScriptedFactory), options)).expect("run completes");
    let ledger = std::fs::read_to_string(out.path().join("ledger.jsonl")).expect("ledger.jsonl");
    ledger.lines().map(|l| serde_json::from_str(l).expect("event is JSON")).collect()
}

/// A search answers through the agent's gateway: pointers and previews in LESS mode, the same hits with their content
/// pasted in the baseline (so it costs more), hits outside the agent's reach left out, and an answer over the role's
/// inline budget refused with what to ask instead; a listing names the files with their symbols.
#[test]
fn search_and_list_travel_through_the_gateway_in_both_wire_modes() {
    let less = searched(WireMode::Less);
    let baseline = searched(WireMode::Verbatim);
    let search = |events: &[Value], agent: &str| -> Value {
        of_kind(events, "search").into_iter().find(|e| e["agent"] == agent).cloned().expect("a search event")
    };
    let (l, b) = (search(&less, "wide"), search(&baseline, "wide"));
    assert_eq!(l["returned"].as_array().map(Vec::len), Some(4), "{l}");
    assert_eq!(l["returned"], b["returned"], "the same engine and k answer in both modes");
    let tokens = |e: &Value| e["tokens"].as_u64().expect("tokens");
    assert_eq!(l["returned"][0], "repo:src/pricing.rs#L1-L34", "{l}");
    assert!(tokens(&l) > 0 && tokens(&b) > 2 * tokens(&l), "LESS {} vs pasted {}", tokens(&l), tokens(&b));
    let dev = search(&less, "dev");
    let pointers: Vec<&str> = dev["returned"].as_array().expect("hits").iter().filter_map(Value::as_str).collect();
    assert!(!pointers.is_empty() && pointers.iter().all(|p| p.starts_with("repo:src/a.rs#")), "{pointers:?}");
    let small = search(&less, "small");
    assert_eq!(small["code"], "LESS_BUDGET_EXCEEDED", "{small}");
    assert!(small["message"].as_str().expect("message").contains("k = "), "{small}");
    assert!(search(&baseline, "small")["code"].is_null(), "the baseline has no budgets to refuse with");
    let list = of_kind(&less, "list")[0].clone();
    assert_eq!(list["files"], 5, "src/link.rs leads out of the workspace: {list}");
}

/// A shipped scenario run with a pinned clock and grant key into a run directory, with `faults` injected: the
/// report as JSON and the directory.
fn run_faulted(name: &str, faults: &[less_runtime::run::Fault]) -> (Value, tempfile::TempDir) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(format!("{name}.toml"));
    let scenario = Arc::new(Scenario::load(&path).unwrap_or_else(|v| panic!("{name}: {v}")));
    let out = tempfile::tempdir().expect("out");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let at = time::OffsetDateTime::from_unix_timestamp(1_767_225_600).expect("a time");
    let pinned = Some(less_runtime::run::Pinned { clock: at, secret: [7; 32] });
    let options = RunOptions { pinned, out_dir: Some(out.path().to_owned()), ..RunOptions::new(WireMode::Less) };
    let run = less_runtime::run::run_scenario_faulted(scenario, Arc::new(ScriptedFactory), options, faults);
    let report = runtime.block_on(run).unwrap_or_else(|e| panic!("{name} with {faults:?}: the run completes: {e}"));
    (serde_json::to_value(report.untimed()).expect("report is JSON"), out)
}

/// The report without what restarts change: the restart counts and the list of restarted actors.
fn without_restarts(mut report: Value) -> Value {
    let object = report.as_object_mut().expect("an object");
    object.remove("service_restarts");
    for role in object["roles"].as_object_mut().expect("roles").values_mut() {
        role["restarts"] = 0.into();
    }
    object["totals"]["restarts"] = 0.into();
    report
}

/// The lines of `ledger.jsonl` but restarts (of an agent's node or of the run's own actors).
fn ledger_without_restarts(out: &Path) -> Vec<String> {
    let ledger = std::fs::read_to_string(out.join("ledger.jsonl")).expect("ledger.jsonl");
    // A turn's timing differs between any two runs: its end is kept, when it happened is not.
    let kept = ledger.lines().filter_map(|line| {
        let mut event: Value = serde_json::from_str(line).expect("an event");
        if event["event"] == "restart" || event["event"] == "service_restart" {
            return None;
        }
        if event["event"] == "turn_end" {
            for field in ["started_ms", "ended_ms", "model_ms"] {
                event.as_object_mut().expect("an object").remove(field);
            }
            return Some(event.to_string());
        }
        Some(line.to_owned())
    });
    kept.collect()
}

/// The messages a run archived (the DAG's raw messages), in order: session, turn, sender and content.
fn archived_messages(out: &Path) -> Vec<(String, i64, Option<String>, String)> {
    let db = rusqlite::Connection::open(out.join("memory/memory.sqlite3")).expect("the memory store");
    let mut select = db.prepare("SELECT session, turn, name, content FROM dag_messages ORDER BY seq").expect("select");
    let rows = select.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))).expect("rows");
    rows.collect::<Result<_, _>>().expect("messages")
}

/// The engram ids of a run's memory store.
fn stored_engrams(out: &Path) -> std::collections::BTreeSet<String> {
    let db = rusqlite::Connection::open(out.join("memory/memory.sqlite3")).expect("the memory store");
    let mut select = db.prepare("SELECT id FROM engrams").expect("engrams");
    let ids = select.query_map([], |row| row.get(0)).expect("ids");
    ids.collect::<Result<_, _>>().expect("ids")
}

/// Issue 35: the memory, the resolver, the ledger's writer and the summarizers fail mid-run, and so does a node with
/// agents below it, in UC1 and in waves-harbor. Each run completes with the undisturbed run's report and ledger
/// (restarts aside): no event is lost or written twice, every message is in `sam.sqlite` and in the archive, every
/// engram in the memory store.
#[test]
fn runs_survive_failures_of_their_actors_with_nothing_acknowledged_lost() {
    use less_runtime::run::{Fault, FaultTarget};
    for (name, node) in [("uc1-refactor", "manager"), ("waves-harbor", "w2-events")] {
        let (undisturbed, clean) = run_faulted(name, &[]);
        let steps = Scenario::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.toml")))
            .expect("scenario")
            .steps
            .len();
        let targets = [
            FaultTarget::Memory,
            FaultTarget::Resolver,
            FaultTarget::Ledger,
            FaultTarget::Summarizers,
            FaultTarget::Node(node.into()),
        ];
        for (i, target) in targets.into_iter().enumerate() {
            // Each fails past the middle of the run, once everything has something to lose.
            let before_step = (steps / 2 + i).min(steps - 1);
            let fault = Fault { before_step, target: target.clone(), times: 1 };
            let (faulted, out) = run_faulted(name, &[fault]);
            assert_eq!(without_restarts(faulted.clone()), without_restarts(undisturbed.clone()), "{name}, {target:?}");
            let restarted = match &target {
                FaultTarget::Node(_) => {
                    faulted["totals"]["restarts"].as_u64() > undisturbed["totals"]["restarts"].as_u64()
                }
                service => faulted["service_restarts"][format!("{service:?}").to_lowercase()] == 1,
            };
            assert!(restarted, "{name}, {target:?}: the restart is in the report: {}", faulted);
            assert_eq!(
                ledger_without_restarts(out.path()),
                ledger_without_restarts(clean.path()),
                "{name}, {target:?}"
            );
            let sam = |dir: &Path| less_runtime::run::sam_keys(&dir.join("memory/sam.sqlite"), "msg").expect("sam");
            assert_eq!(sam(out.path()), sam(clean.path()), "{name}, {target:?}: sam.sqlite");
            assert_eq!(stored_engrams(out.path()), stored_engrams(clean.path()), "{name}, {target:?}: memory");
            let archived = archived_messages(out.path());
            assert!(!archived.is_empty(), "{name}, {target:?}: the archive holds the run's messages");
            assert_eq!(archived, archived_messages(clean.path()), "{name}, {target:?}: the archive");
        }
    }
}

/// Issue 35: a mid-tree node that keeps failing is started again by its parent's node up to the limit; then its
/// parent's agent gets an escalation, the report names the lost subtree, steps for its agents are skipped and the
/// rest of the run goes on.
#[test]
fn a_node_failing_past_its_limit_is_escalated_to_its_parent_and_its_subtree_lost() {
    use less_runtime::run::{Fault, FaultTarget};
    let report_of_dev = REPORT_PASTE.replace("misbehave = \"MISBEHAVE\"\n", "");
    let steps = format!(
        "{report_of_dev}{}\n[[steps]]\naction = \"query\"\nagent = \"lead\"\ntext = \"multiplies\"\n",
        report_of_dev.replace("task = \"1\"", "task = \"2\"")
    );
    let (dir, _outside) = workspace();
    let out = tempfile::tempdir().expect("out");
    let toml = format!("name = \"t\"\nworkspace = \".\"\n{steps}\n{HIERARCHY}");
    let scenario = Arc::new(Scenario::from_toml(&toml, dir.path()).unwrap_or_else(|v| panic!("scenario: {v}")));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let options = RunOptions { out_dir: Some(out.path().to_owned()), ..RunOptions::new(WireMode::Less) };
    let limit = less_runtime::run::MAX_RESTARTS as u32;
    let fault = Fault { before_step: 1, target: FaultTarget::Node("manager".into()), times: limit + 1 };
    let faults = [fault];
    let run = less_runtime::run::run_scenario_faulted(scenario, Arc::new(ScriptedFactory), options, &faults);
    let report = runtime.block_on(run).expect("the run completes");
    let ledger = std::fs::read_to_string(out.path().join("ledger.jsonl")).expect("ledger.jsonl");
    let events: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).expect("event is JSON")).collect();

    let lost: Vec<&str> = report.lost.iter().map(|l| l.agent.as_str()).collect();
    assert_eq!(lost, ["manager"], "{:?}", report.lost);
    assert_eq!(report.lost[0].agents, ["manager", "dev", "peer"]);
    let restarts: Vec<&Value> = of_kind(&events, "restart").into_iter().filter(|e| e["agent"] == "manager").collect();
    assert_eq!(restarts.len(), limit as usize, "started again up to the limit");
    let escalated = of_kind(&events, "escalated");
    assert!(escalated.iter().any(|e| e["about"] == "manager" && e["to"] == "lead"), "{escalated:?}");
    let delivered = of_kind(&events, "delivered");
    assert!(
        delivered.iter().any(|e| e["to"] == "lead" && e["kind"] == "escalation"),
        "the escalation reaches the lead's inbox: {delivered:?}"
    );
    let reports_of_dev = delivered.iter().filter(|e| e["from"] == "dev").count();
    assert_eq!(reports_of_dev, 1, "the second report of dev, in the lost subtree, is skipped");
    assert_eq!(of_kind(&events, "query").len(), 1, "the lead's step after the loss still runs");
}

const CLAIMS: &str = r#"
[[steps]]
action = "claim"
agent = "dev"
surfaces = ["src/**"]
task = "T-1: the budget refactor"
[[steps]]
action = "claim"
agent = "peer"
surfaces = ["repo:src/a.rs"]
task = "T-2: a hotfix in a_1"
[[steps]]
action = "claim"
agent = "peer"
surfaces = ["tests/**"]
task = "T-3: budget tests"
ttl_minutes = 60
[[steps]]
action = "claim"
agent = "peer"
surfaces = ["src/a.rs"]
task = "T-2: a hotfix in a_1"
override = "the release is blocked on it"
[[steps]]
action = "release"
agent = "dev"
[[steps]]
action = "release"
agent = "peer"
task = "T-3: budget tests"
EXTRA
[[expect]]
check = "claims"
granted = 3
refused = 1
overrides = 1
[[expect]]
check = "claims"
agent = "dev"
granted = 1
overrides = 0
[[expect]]
check = "escalations"
count = 1
"#;

/// Runs `body` at a frozen clock, so the coordination ledger's ids are the same in every run.
fn run_frozen(body: &str, mode: WireMode) -> (RunReport, Vec<Value>, tempfile::TempDir) {
    let (dir, _outside) = workspace();
    let out = tempfile::tempdir().expect("out");
    let toml = format!("name = \"t\"\nworkspace = \".\"\n{body}\n{HIERARCHY}");
    let scenario = Arc::new(Scenario::from_toml(&toml, dir.path()).unwrap_or_else(|v| panic!("scenario: {v}")));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let clock = time::OffsetDateTime::from_unix_timestamp(1_795_773_600).expect("2026-11-27T10:00:00Z");
    let pinned = Some(less_runtime::run::Pinned { clock, secret: [7; 32] });
    let options = RunOptions { out_dir: Some(out.path().to_owned()), pinned, ..RunOptions::new(mode) };
    let report = runtime.block_on(run_scenario(scenario, Arc::new(ScriptedFactory), options)).expect("run completes");
    let ledger = std::fs::read_to_string(out.path().join("ledger.jsonl")).expect("ledger.jsonl");
    let events = ledger.lines().map(|l| serde_json::from_str(l).expect("event is JSON")).collect();
    (report, events, out)
}

#[test]
fn agents_claim_surfaces_a_collision_is_refused_and_an_override_escalates_to_the_parent() {
    for mode in [WireMode::Less, WireMode::Verbatim] {
        let (report, events, out) = run_frozen(&CLAIMS.replace("EXTRA", ""), mode);
        let failed: Vec<_> = report.checks.iter().filter(|c| c.status != CheckStatus::Pass).collect();
        assert!(failed.is_empty(), "{mode:?}: {failed:?}");
        let claims = of_kind(&events, "claim");
        assert_eq!(claims.len(), 4, "{claims:?}");
        // The refusal names the holder, its task and when its claim ends.
        assert_eq!(claims[1]["code"], "LESS_CLAIM_CONFLICT");
        let refusal = claims[1]["message"].as_str().expect("a message");
        for part in ["t/lead/manager/dev", "T-1: the budget refactor", "2026-11-27T10:30:00Z"] {
            assert!(refusal.contains(part), "{part} in {refusal}");
        }
        // The override ends dev's claim, with a conflict record and a decision.
        let displaced = &claims[3]["displaced"][0];
        assert_eq!(displaced["claim_id"], claims[0]["claim_id"]);
        assert_eq!(displaced["holder"], "t/lead/manager/dev");
        let decision = displaced["decision_id"].as_str().expect("a decision").to_owned();
        // It reaches the manager as an escalation naming both agents and intents, citing the decision.
        let escalation: Vec<_> =
            of_kind(&events, "delivered").into_iter().filter(|e| e["to"] == "manager" && e["from"] == "peer").collect();
        assert_eq!(escalation.len(), 1, "{mode:?}: {:?}", of_kind(&events, "delivered"));
        if mode == WireMode::Less {
            let doc = &escalation[0]["doc"];
            assert_eq!(doc["type"], "escalation");
            let reason = doc["reason"].as_str().expect("a reason");
            for part in
                ["t/lead/manager/peer overrode t/lead/manager/dev", "T-1: the budget refactor", "release is blocked"]
            {
                assert!(reason.contains(part), "{part} in {reason}");
            }
            assert_eq!(doc["refs"][0], format!("sam:decision:{decision}"));
        }
        // Its decision is a decision engram in the run's memory, put as the overriding agent.
        let puts: Vec<_> = of_kind(&events, "memory_put").into_iter().filter(|e| e["agent"] == "peer").collect();
        assert_eq!(puts.len(), 1, "{puts:?}");
        // dev's claim was overridden, so it releases nothing; peer releases the claim of T-3 only.
        let releases = of_kind(&events, "release");
        assert_eq!(releases[0]["claims"], serde_json::json!([]));
        assert_eq!(releases[1]["claims"].as_array().map(Vec::len), Some(1));
        // The audit log names each act and its agent's identity.
        let audit = std::fs::read_to_string(out.path().join("audit.log")).expect("audit.log");
        let verbs: Vec<&str> =
            audit.lines().filter(|l| l.contains("\tclaim")).filter_map(|l| l.split('\t').nth(3)).collect();
        assert_eq!(verbs, ["claim", "claim-refused", "claim", "claim-override"], "{audit}");
        assert!(audit.lines().any(|l| l.contains("\tt/lead/manager/peer\tclaim-override\t")), "{audit}");
        // The ledger is durable beside the run's memory; the claims still held ended with the run, the decision
        // log stays.
        let db = rusqlite::Connection::open(out.path().join("memory/coord.sqlite")).expect("coord.sqlite");
        assert_eq!(less_runtime::coord::live_claims(&db, "t", 1_795_773_600).expect("claims"), []);
        let log = less_runtime::coord::decisions(&db, "t", 0, 10).expect("decisions");
        assert_eq!(log.iter().map(|d| d.decision_id.as_str()).collect::<Vec<_>>(), [decision.as_str()]);

        // The same run with the manager reading the decision: `sam:decision:<id>` reads the entry back in the run.
        let read = format!(
            "[[steps]]\naction = \"deref\"\nagent = \"manager\"\npointers = [\"sam:decision:{decision}\"]\n\
             reason = \"the override\"\nuse = \"decide who goes on\"\n"
        );
        let (_, events, _out) = run_frozen(&CLAIMS.replace("EXTRA", &read), mode);
        let derefs: Vec<_> = of_kind(&events, "deref").into_iter().filter(|e| e["agent"] == "manager").collect();
        if mode == WireMode::Less {
            assert_eq!(derefs.len(), 1, "{derefs:?}");
            assert_eq!(derefs[0]["granted"], true, "{derefs:?}");
            assert!(derefs[0]["tokens"].as_u64().is_some_and(|t| t > 20), "the whole entry: {derefs:?}");
        }
    }
}

/// UC2 hunts contradictions: its report's contradiction rate counts them (LESS §12), and its deref denial rate the
/// derefs the budget refused.
#[test]
fn the_contradiction_rate_of_uc2_counts_its_contradictions() {
    let clock = time::OffsetDateTime::from_unix_timestamp(1_795_773_600).expect("a time");
    let report = run_shipped("uc2-contradictions", WireMode::Less, clock, 3);
    let rates = &report["rates"];
    let rate = rates["contradiction_rate"].as_f64().expect("a contradiction rate");
    assert!(rate > 0.0 && rate <= 1.0, "{rates}");
    let kinds: Vec<&str> =
        rates["top_engram_kinds"].as_array().expect("kinds").iter().filter_map(|k| k["kind"].as_str()).collect();
    assert!(kinds.contains(&"risk"), "{rates}");
    assert!(rates["tokens_per_turn_trend"].as_array().is_some_and(|t| t.len() == 2), "{rates}");
}

/// Runs `body` (steps, expects) in LESS mode over a fresh workspace with `faults` injected; the report and the ledger.
fn run_body_faulted(body: &str, faults: &[less_runtime::run::Fault]) -> (RunReport, Vec<Value>) {
    let (dir, _outside) = workspace();
    let out = tempfile::tempdir().expect("out");
    let toml = format!("name = \"t\"\nworkspace = \".\"\n{body}\n{HIERARCHY}");
    let scenario = Arc::new(Scenario::from_toml(&toml, dir.path()).unwrap_or_else(|v| panic!("scenario: {v}")));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let options = RunOptions { out_dir: Some(out.path().to_owned()), ..RunOptions::new(WireMode::Less) };
    let run = less_runtime::run::run_scenario_faulted(scenario, Arc::new(ScriptedFactory), options, faults);
    let report = runtime.block_on(run).expect("the run completes");
    let ledger = std::fs::read_to_string(out.path().join("ledger.jsonl")).expect("ledger.jsonl");
    let events = ledger.lines().map(|l| serde_json::from_str(l).expect("event is JSON")).collect();
    (report, events)
}

/// The uses of a grant an agent spent stay spent when its node fails and it is restored from the ledger: a grant of
/// two uses, one spent before the failure, covers one more deref after it, not two.
#[test]
fn spent_grant_uses_stay_spent_when_an_agent_is_restored_from_the_ledger() {
    use less_runtime::run::{Fault, FaultTarget};
    let grant = r#"{ id = "g", to = "dev", patterns = ["repo:src/**"], max_derefs = 9, max_tokens = 9000, uses = 2 }"#;
    let body = format!(
        "{}{}{}{}{}{}",
        GRANT_BRIEF.replace("GRANTS", grant),
        deref("dev", 3, Some("g")), // step 1: beyond the budget, under the grant: its first use
        turn_end("dev"),            // step 2
        deref("dev", 3, Some("g")), // step 3, after dev's node failed: its second use
        turn_end("dev"),
        deref("dev", 3, Some("g")), // step 5: no use left
    );
    let faults = [Fault { before_step: 3, target: FaultTarget::Node("dev".into()), times: 1 }];
    let (_, events) = run_body_faulted(&body, &faults);
    assert!(of_kind(&events, "restart").iter().any(|e| e["agent"] == "dev"), "dev's node was restarted");
    let verdicts: Vec<(bool, Option<&str>)> = of_kind(&events, "deref")
        .iter()
        .map(|e| (e["granted"].as_bool().expect("granted"), e["code"].as_str()))
        .collect();
    assert_eq!(verdicts, [(true, None), (true, None), (false, Some("LESS_GRANT_INVALID"))], "{events:#?}");
}

/// A message in flight when its receiver's node fails (it delivered the message, then failed before acknowledging
/// it) goes to the node started in its place under the same id, which knows from the ledger that it was delivered:
/// the receiver has it exactly once, and the sender's turn goes on as if nothing had happened.
#[test]
fn a_message_in_flight_to_a_failing_node_is_delivered_exactly_once() {
    use less_runtime::run::{Fault, FaultTarget};
    let brief = |line: &str| {
        format!("\n[[steps]]\naction = \"brief\"\nagent = \"manager\"\nto = [\"dev\"]\nnow = [\"{line}\"]\n")
    };
    let steps = format!("{}{}", brief("Rename a_1."), brief("Then b_1."));
    let (calm, _) = run_body_faulted(&steps, &[]);
    // dev's node fails right after the first brief reached it, before manager's turn hears back.
    let fault = Fault { before_step: 0, target: FaultTarget::NodeAfterNextDelivery("dev".into()), times: 1 };
    let (report, events) = run_body_faulted(&steps, &[fault]);
    assert!(of_kind(&events, "restart").iter().any(|e| e["agent"] == "dev"), "dev's node failed: {events:#?}");
    let to_dev: Vec<&str> = of_kind(&events, "delivered")
        .iter()
        .filter(|e| e["to"] == "dev")
        .filter_map(|e| e["msg_id"].as_str())
        .collect();
    assert_eq!(to_dev.len(), 2, "each brief delivered once: {to_dev:?}");
    assert_ne!(to_dev[0], to_dev[1]);
    assert!(report.checks.iter().all(|c| c.status != CheckStatus::Fail), "{:?}", report.checks);
    // The same tokens as the undisturbed run, role by role; only the restart differs.
    for (role, calm_role) in &calm.roles {
        assert_eq!(report.roles[role].per_turn, calm_role.per_turn, "{role}");
    }
    assert_eq!(report.roles["manager"].rejections, 0, "the sender saw no failure");
}
