//! LLM agents without a server: a run recorded while the server was down replays its failures, the committed
//! recording of `scenarios/uc3-review-llm.toml` replays to the report the README shows, and the local server's script
//! pins every model. The live runs against the server are in `provisioned/llm.rs`.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::llm::{check_ledger, ledger, read_json, run_finished, script};
use crate::support::{copy_tree, lessrt, root, stderr};

/// Every check of the LESS run passed (a replay of the committed recording, where the model's answers are fixed).
fn less_checks_pass(report: &Value) {
    let less = &report[0];
    assert_eq!(less["mode"], json!("less"));
    for check in less["checks"].as_array().expect("checks") {
        assert_eq!(check["status"], json!("pass"), "{check}");
    }
}

/// A run recorded while the model server was down replays to the same report: the failures are in the recording.
#[test]
fn a_run_recorded_against_a_dead_server_replays_its_failures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = |p: &Path| p.display().to_string();
    let scenario = s(&root().join("scenarios/uc3-review-llm.toml"));
    let rec = dir.path().join("rec");
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let run = |source: &str, name: &str| -> Value {
        let json = dir.path().join(format!("{name}.json"));
        let out = dir.path().join(name);
        let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["run", &scenario, "--mode", "less", source, &s(&rec), "--out", &s(&out)])
            .args(["-o", &s(&json)])
            .env(less_agents::BASE_URL_ENV, format!("http://127.0.0.1:{port}/v1"))
            .output()
            .expect("lessrt runs");
        assert_eq!(
            output.status.code(),
            Some(1),
            "checks fail, nothing crashes: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The failure is on the console where it happens, with its code, not only in ledger.jsonl.
        let trace = String::from_utf8_lossy(&output.stdout);
        for reviewer in ["correctness-reviewer", "concurrency-reviewer", "test-impact-reviewer"] {
            let line = format!("{reviewer}: model failed LLM_UNREACHABLE: ");
            let shown = trace.lines().find(|l| l.trim_start().starts_with(&line));
            assert!(shown.is_some_and(|l| l.ends_with("→ escalated to review-lead")), "{reviewer}:\n{trace}");
        }
        read_json(&json)
    };
    let recorded = run("--record", "live");
    let failures = std::fs::read_dir(&rec)
        .expect("recording")
        .filter_map(|e| std::fs::read_to_string(e.expect("entry").path()).ok())
        .filter(|text| text.contains("\"unreachable\""))
        .count();
    // Each reviewer asked two questions (what to read, then its report; a question asked again is answered from
    // the recording), and each failed exchange is recorded.
    assert_eq!(failures, 6, "each reviewer's failed exchanges are recorded");
    let escalations = recorded["totals"]["escalations"].as_u64().expect("escalations");
    assert!(escalations >= 3, "each reviewer escalated instead of reporting: {recorded}");
    let check = recorded["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "0 escalations").cloned();
    assert_eq!(check.map(|c| c["status"].clone()), Some(json!("fail")), "the scenario's own check sees them");
    assert_eq!(
        crate::support::untimed(run("--replay", "replay")),
        crate::support::untimed(recorded),
        "the replay fails where the recorded run failed"
    );
}

/// The recording committed with the repository (made against the local server) replays without one.
#[test]
fn the_committed_recording_replays_without_a_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = root().join("scenarios/uc3-review-llm.toml").display().to_string();
    let recording = root().join("scenarios/recordings/uc3-review-llm").display().to_string();
    let out = dir.path().display().to_string();
    let json = dir.path().join("report.json");
    let (code, text) =
        run_finished(&["run", &scenario, "--replay", &recording, "--out", &out, "-o", &json.display().to_string()]);
    assert!(text.contains("PASS concurrency-reviewer rejected then resent"), "{text}");
    less_checks_pass(&read_json(&json));
    // Every check of the scenario held in the recorded run, in both modes (the checks about LESS mechanisms are n/a
    // in the baseline).
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("PASS 0 escalations — 0 escalations"), "{text}");
    let events = ledger(dir.path(), "less");
    check_ledger(&events);
    // In the recorded run every reviewer's model wrote its engrams (no escalation, checked above).
    let model_engrams = events
        .iter()
        .filter(|e| e["event"] == "delivered")
        .flat_map(|e| e["doc"]["engrams"].as_array().into_iter().flatten())
        .filter(|g| g["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == "llm")))
        .count();
    assert!(model_engrams >= 3, "the three reviewers' engrams come from the model: {model_engrams}");
    let expected = read_json(&root().join("scenarios/recordings/uc3-review-llm.report.json"));
    assert_eq!(
        crate::support::untimed(read_json(&json)),
        expected,
        "the replay reports what the recorded run reported"
    );
    // The providers' counts per role, beside the runtime's; the refused reviewer asked three times: what to read, its
    // report, then the compliant resend.
    let report = read_json(&json);
    let (less, verbatim) = (&report[0], &report[1]);
    assert_eq!((&less["mode"], &verbatim["mode"]), (&json!("less"), &json!("verbatim")));
    assert_eq!(less["roles"]["concurrency-reviewer"]["model"]["calls"], json!(3));
    let prompt = |r: &Value| r["totals"]["model"]["prompt_tokens"].as_u64().expect("prompt tokens");
    let by_role: u64 = less["roles"]
        .as_object()
        .expect("roles")
        .values()
        .map(|r| r["model"]["prompt_tokens"].as_u64().expect("prompt tokens"))
        .sum();
    assert_eq!(by_role, prompt(less), "the totals add the roles up");
    assert!(0 < prompt(less) && 0 < prompt(verbatim), "{} vs {}", prompt(less), prompt(verbatim));
    // A thrown-away answer would be accounted for where it happened: in the report and, with its reason, in the
    // ledger (this recording has none; the agents' unit tests throw answers away).
    for (mode, stats) in [("less", less), ("verbatim", verbatim)] {
        let unusable = stats["totals"]["model"]["unusable"].as_u64().expect("unusable");
        let reasons: Vec<String> = ledger(dir.path(), mode)
            .iter()
            .filter(|e| e["event"] == "model_usage")
            .flat_map(|e| e["unusable"].as_array().cloned().unwrap_or_default())
            .map(|r| r.as_str().expect("a reason").to_owned())
            .collect();
        assert_eq!(reasons.len() as u64, unusable, "{mode}: {reasons:?}");
        assert!(reasons.iter().all(|r| r.starts_with("LLM_OUTPUT_")), "{reasons:?}");
    }
    documented_tables_are_the_report(less, verbatim);
}

/// docs/llm-agents.md's two uc3-review-llm tables (tokens per role, the models' tokens per role) are the committed
/// report's.
fn documented_tables_are_the_report(less: &Value, verbatim: &Value) {
    let readme = std::fs::read_to_string(root().join("docs/llm-agents.md")).expect("docs/llm-agents.md");
    let t = less_eval::bench::thousands;
    let n = |v: &Value| v.as_u64().expect("a count");
    let pct = |a: u64, b: u64| format!("{:.1}%", 100.0 * a as f64 / b as f64);
    let inline = |r: &Value| n(&r["inline_tokens"]["total"]);
    let with_derefs = |r: &Value| inline(r) + n(&r["deref_tokens"]);
    let mut rows = Vec::new();
    for (role, kind) in [
        ("lead", "scripted"),
        ("review-lead", "scripted"),
        ("correctness-reviewer", "LLM"),
        ("concurrency-reviewer", "LLM"),
        ("test-impact-reviewer", "LLM"),
    ] {
        let (l, v) = (&less["roles"][role], &verbatim["roles"][role]);
        rows.push(format!(
            "| {role} ({kind}) | {} | {} | {} | {} | {} |",
            t(inline(l)),
            t(with_derefs(l)),
            t(inline(v)),
            t(with_derefs(v)),
            pct(with_derefs(l), with_derefs(v))
        ));
        if kind == "LLM" {
            let (lm, vm) = (&l["model"], &v["model"]);
            rows.push(format!(
                "| {role} | {} | {} | {} | {} | {} |",
                t(n(&lm["prompt_tokens"])),
                t(n(&lm["completion_tokens"])),
                t(n(&vm["prompt_tokens"])),
                t(n(&vm["completion_tokens"])),
                pct(n(&lm["prompt_tokens"]), n(&vm["prompt_tokens"]))
            ));
        }
    }
    let (l, v) = (&less["totals"], &verbatim["totals"]);
    rows.push(format!(
        "| **total** | **{}** | **{}** | **{}** | **{}** | **{}** |",
        t(inline(l)),
        t(with_derefs(l)),
        t(inline(v)),
        t(with_derefs(v)),
        pct(with_derefs(l), with_derefs(v))
    ));
    for row in rows {
        assert!(readme.contains(&row), "docs/llm-agents.md lacks {row:?}: regenerate it from the committed report");
    }
}

/// `scripts/local-llm.sh` knows each model it can serve by a pinned sha256 of the whole `.gguf`, serves SmolLM2-135M
/// unless asked otherwise (what CI and the committed recordings use), and refuses a model it does not know, naming
/// the ones it does.
#[test]
fn the_local_llm_script_pins_every_model_and_refuses_unknown_ones() {
    let listed = script("models");
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let text = String::from_utf8_lossy(&listed.stdout).into_owned();
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(names, ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"], "{text}");
    for row in &rows {
        let sha = row.iter().find(|w| w.len() == 64).unwrap_or_else(|| panic!("no sha256 in {row:?}"));
        assert!(sha.bytes().all(|b| b.is_ascii_hexdigit()), "{row:?}");
        assert!(row.iter().any(|w| w.ends_with(".gguf")), "{row:?}");
    }
    // The default model is CI's: its sha256 is the one the recordings were made with.
    assert!(rows[0].contains(&"b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"), "{text}");

    let refused = Command::new("bash")
        .arg(root().join("scripts/local-llm.sh"))
        .args(["installed", "--model", "gpt-5"])
        .output()
        .expect("bash runs");
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("unknown model 'gpt-5'") && err.contains("qwen2.5-coder-1.5b"), "{err}");
    let by_env = Command::new("bash")
        .arg(root().join("scripts/local-llm.sh"))
        .arg("installed")
        .env("LESSRT_LLM_MODEL", "gpt-5")
        .output()
        .expect("bash runs");
    assert_eq!(by_env.status.code(), Some(2), "LESSRT_LLM_MODEL names the model too");
}

/// The committed recordings, each sealed by its manifest.
const COMMITTED_RECORDINGS: [&str; 9] = [
    "uc3-review-llm",
    "llm-free/real-ignore",
    "llm-free/audit-tidepool",
    "llm-free/review-lanternfish",
    "llm-free/waves-harbor",
    "llm-free-t0.7/real-ignore",
    "llm-free-t0.7/audit-tidepool",
    "llm-free-t0.7/review-lanternfish",
    "llm-free-t0.7/waves-harbor",
];

/// A copy of the committed recording `name` under a temporary root, at ROOT/<its last component> (where `bench
/// --replay ROOT` looks for the scenario's recording). Returns the guard, the root and the copy.
fn copied(name: &str) -> (tempfile::TempDir, String, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let leaf = Path::new(name).file_name().expect("a name");
    let copy = dir.path().join(leaf);
    copy_tree(&root().join("scenarios/recordings").join(name), &copy);
    let root_dir = dir.path().display().to_string();
    (dir, root_dir, copy)
}

/// The exchange files of a recording, sorted.
fn exchanges(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("recording")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_stem().is_some_and(|s| s.len() == 16) && p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// `lessrt bench` of the llm-free scenario `scenario` in LESS mode, replayed from `root`: it must end with exit 2
/// before any run, the code and `needle` on stderr.
fn bench_refuses(scenario: &str, root_dir: &str, code: &str, needle: &str) {
    let out = tempfile::tempdir().expect("tempdir");
    let scenario = root().join(format!("scenarios/{scenario}.toml")).display().to_string();
    let output = lessrt(&[
        "bench",
        &scenario,
        "--agents",
        "llm-free",
        "--modes",
        "less",
        "--replay",
        root_dir,
        "--quiet",
        "--out",
        &out.path().display().to_string(),
    ]);
    refused_with(&output, code, needle);
    assert!(!out.path().join("bench.json").exists(), "nothing ran");
}

/// A command that ended with exit 2, the code and `needle` on its stderr.
fn refused_with(output: &std::process::Output, code: &str, needle: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains(code) && err.contains(needle), "{code} and {needle:?} expected:\n{err}");
}

/// `lessrt run` of uc3-review-llm replayed from `dir`: exit 2, the code and `needle` on stderr.
fn run_refuses(dir: &Path, code: &str, needle: &str) {
    let out = tempfile::tempdir().expect("tempdir");
    let scenario = root().join("scenarios/uc3-review-llm.toml").display().to_string();
    let output = lessrt(&[
        "run",
        &scenario,
        "--replay",
        &dir.display().to_string(),
        "--quiet",
        "--out",
        &out.path().display().to_string(),
    ]);
    refused_with(&output, code, needle);
}

/// Every committed recording verifies against its manifest, which names the model file's sha256 as
/// scripts/local-llm.sh lists it for the model that answered.
#[test]
fn every_committed_recording_is_sealed_and_verifies() {
    let listed = String::from_utf8_lossy(&script("models").stdout).into_owned();
    for name in COMMITTED_RECORDINGS {
        let dir = root().join("scenarios/recordings").join(name);
        let output = lessrt(&["recording", "verify", &dir.display().to_string()]);
        assert_eq!(output.status.code(), Some(0), "{name}: {}", stderr(&output));
        let manifest = read_json(&dir.join("manifest.json"));
        let model = &manifest["model"];
        let served = model["served"].as_str().expect("served");
        let row = listed.lines().find(|l| l.starts_with(served)).unwrap_or_else(|| panic!("{served}: {listed}"));
        let sha = model["file_sha256"].as_str().expect("file sha256");
        assert!(row.split_whitespace().any(|w| w == sha), "{name}: {sha} is not local-llm.sh's for {served}");
        // Where the hash comes from: local-llm.sh's checksum list, or the very file it installs, hashed when sealed.
        let from = model["file_sha256_from"].as_str().expect("file_sha256_from");
        let file = row.split_whitespace().find(|w| w.ends_with(".gguf")).expect("the model's file");
        assert!(from == "scripts/local-llm.sh" || from.ends_with(file), "{name}: {from}");
    }
}

/// A stored completion edited by one word: the bench refuses to replay it, naming the file.
#[test]
fn a_replay_refuses_a_completion_edited_by_one_word() {
    let (_guard, root_dir, copy) = copied("llm-free/real-ignore");
    let file = exchanges(&copy)
        .into_iter()
        .find(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("\"completion\"") && t.contains("\"text\": \"")));
    let file = file.expect("an exchange with a completion");
    let text = std::fs::read_to_string(&file).expect("exchange");
    let at = text.find("\"text\": \"").expect("text") + "\"text\": \"".len();
    let line_end = at + text[at..].find('\n').expect("line");
    let word = text[at..line_end]
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| w.len() >= 4)
        .expect("a word of the completion")
        .to_owned();
    let edited = format!("{}{}", &text[..at], text[at..].replacen(&word, &word.to_uppercase(), 1));
    std::fs::write(&file, edited).expect("edit");
    let name = file.file_name().expect("name").to_string_lossy().into_owned();
    bench_refuses("real-ignore", &root_dir, "LLM_REPLAY_TAMPERED", &format!("{name} is not the file sealed"));
}

/// A usage count edited (the prompt's tokens made 1): refused, by `lessrt run` and `lessrt recording verify`.
#[test]
fn a_replay_refuses_an_edited_usage_count() {
    let (_guard, _root, copy) = copied("uc3-review-llm");
    let file = exchanges(&copy)
        .into_iter()
        .find(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("\"prompt_tokens\": ")));
    let file = file.expect("an exchange with usage");
    let text = std::fs::read_to_string(&file).expect("exchange");
    let at = text.find("\"prompt_tokens\": ").expect("usage") + "\"prompt_tokens\": ".len();
    let digits = text[at..].find(|c: char| !c.is_ascii_digit()).expect("a count");
    assert_ne!(&text[at..at + digits], "1");
    std::fs::write(&file, format!("{}1{}", &text[..at], &text[at + digits..])).expect("edit");
    let name = file.file_name().expect("name").to_string_lossy().into_owned();
    run_refuses(&copy, "LLM_REPLAY_TAMPERED", &name);
    let verified = lessrt(&["recording", "verify", &copy.display().to_string()]);
    assert_eq!(verified.status.code(), Some(2));
    assert!(stderr(&verified).starts_with("lessrt: LLM_REPLAY_TAMPERED: "), "{}", stderr(&verified));
}

/// The manifest's model file hash made another: refused before anything runs.
#[test]
fn a_replay_refuses_a_model_hash_that_differs() {
    let (_guard, root_dir, copy) = copied("llm-free/audit-tidepool");
    let path = copy.join("manifest.json");
    let mut manifest = read_json(&path);
    let sha = manifest["model"]["file_sha256"].as_str().expect("sha").to_owned();
    manifest["model"]["file_sha256"] = json!(sha.chars().rev().collect::<String>());
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).expect("JSON")).expect("edit");
    bench_refuses("audit-tidepool", &root_dir, "LLM_REPLAY_TAMPERED", "they differ");
    // The served model's hash changed alike: no exchange names that model.
    manifest["model"]["sha256"] = manifest["model"]["file_sha256"].clone();
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).expect("JSON")).expect("edit");
    bench_refuses("audit-tidepool", &root_dir, "LLM_REPLAY_TAMPERED", "names the model");
}

/// An exchange deleted, then one added that the manifest does not list: each refused, naming the file.
#[test]
fn a_replay_refuses_a_deleted_or_an_unlisted_exchange() {
    let (_guard, _root, copy) = copied("uc3-review-llm");
    let files = exchanges(&copy);
    let kept = std::fs::read(&files[0]).expect("exchange");
    std::fs::remove_file(&files[0]).expect("delete");
    let name = files[0].file_name().expect("name").to_string_lossy().into_owned();
    run_refuses(&copy, "LLM_REPLAY_TAMPERED", &format!("{name} is listed in manifest.json but missing"));
    std::fs::write(&files[0], &kept).expect("restore");
    std::fs::write(copy.join("0000000000000000.json"), &kept).expect("add");
    run_refuses(&copy, "LLM_REPLAY_TAMPERED", "0000000000000000.json is not listed in manifest.json");
}

/// A recording without its manifest is refused with the command that seals it; sealed again as the committed one
/// was, it has the committed manifest byte for byte, and a seal is never written over an edit.
#[test]
fn an_unsealed_recording_is_refused_and_seals_to_the_committed_manifest() {
    let (_guard, root_dir, copy) = copied("llm-free/waves-harbor");
    let committed = std::fs::read(copy.join("manifest.json")).expect("manifest");
    let manifest = read_json(&copy.join("manifest.json"));
    std::fs::remove_file(copy.join("manifest.json")).expect("unseal");
    bench_refuses("waves-harbor", &root_dir, "LLM_RECORDING_UNSEALED", "lessrt recording seal");
    let dir = copy.display().to_string();
    let model = &manifest["model"];
    let mut args = vec!["recording", "seal", dir.as_str()];
    let sha = model["file_sha256"].as_str().expect("sha");
    args.extend(["--model-sha256", sha, "--sha256-from", model["file_sha256_from"].as_str().expect("from")]);
    if let Some(note) = model["note"].as_str() {
        args.extend(["--note", note]);
    }
    let sealed = lessrt(&args);
    assert_eq!(sealed.status.code(), Some(0), "{}", stderr(&sealed));
    assert_eq!(std::fs::read(copy.join("manifest.json")).expect("manifest"), committed, "sealed as committed");
    // An exchange edited: sealing again is refused, and the manifest stays.
    let file = &exchanges(&copy)[0];
    let text = std::fs::read_to_string(file).expect("exchange");
    std::fs::write(file, format!("{text} ")).expect("edit");
    let again = lessrt(&args);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("LLM_REPLAY_TAMPERED"), "{}", stderr(&again));
    assert_eq!(std::fs::read(copy.join("manifest.json")).expect("manifest"), committed);
}

#[test]
fn a_recording_made_one_turn_at_a_time_refuses_to_replay_turns_at_once() {
    // Its agents read by arrival and its message numbers are the run's: overlapping turns would ask other questions.
    let out = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", "scenarios/real-ignore.toml", "--agents", "llm-free", "--mode", "less"])
        .args(["--replay", "scenarios/recordings/llm-free/real-ignore", "--parallel", "2", "--out"])
        .arg(out.path())
        .current_dir(root())
        .output()
        .expect("lessrt runs");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("LESS_ARGUMENT_INVALID") && said.contains("--parallel 1"), "{said}");
    // --replay-latency paces a replay, nothing else.
    let output = lessrt(&["run", "scenarios/uc1-refactor.toml", "--replay-latency", "300"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("--replay-latency"), "{}", stderr(&output));
}
