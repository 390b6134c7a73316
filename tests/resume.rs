//! `lessrt run --resume`: a run whose process was killed (SIGKILL) goes on from its ledger and reports what an
//! undisturbed run reports, apart from its `resumed` entry.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{lessrt, root, stderr, stdout};

/// `lessrt run` as the tests run it: scripted agents, no embedding model (hash recall only), JSON on stdout.
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(args)
        .current_dir(root())
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .output()
        .expect("lessrt runs")
}

/// The JSON reports a run printed, without their timing (which differs between any two runs).
fn reports(output: &Output) -> Value {
    crate::support::untimed(
        serde_json::from_str(&stdout(output))
            .unwrap_or_else(|err| panic!("JSON reports ({err}): {}\n{}", stdout(output), stderr(output))),
    )
}

fn ledger(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("ledger.jsonl")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Runs `scenario` (both modes) once undisturbed and once killed when `mode` has started `at_step` steps, then
/// resumes the killed one: both report alike but for the resumed run's `resumed` entries; the ledger says where it
/// went on; the grant key was kept 0600 while the run was unfinished and is gone once it ended.
fn killed_and_resumed(scenario: &str, mode: &str, at_step: usize) {
    let name = Path::new(scenario).file_stem().and_then(|s| s.to_str()).expect("a name").to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let (calm, killed) = (dir.path().join("calm"), dir.path().join("killed"));
    let undisturbed = run(&["run", scenario, "--json", "--out", calm.to_str().expect("utf-8")]);
    assert!(matches!(undisturbed.status.code(), Some(0 | 1)), "{}", stderr(&undisturbed));
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", scenario, "--json", "--pace", "150", "--out", killed.to_str().expect("utf-8")])
        .current_dir(root())
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("lessrt run starts");
    let run_dir = killed.join(&name);
    let mode_dir = run_dir.join(mode);
    let deadline = Instant::now() + Duration::from_secs(120);
    while ledger(&mode_dir).iter().filter(|e| e["event"] == "step").count() < at_step {
        assert!(Instant::now() < deadline, "{scenario} {mode} did not get to step {at_step}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(!mode_dir.join("report.json").exists(), "killed before {mode} finished");
    let key = mode_dir.join("grant.key");
    let meta = std::fs::metadata(&key).expect("the unfinished run's grant key is kept");
    assert_eq!(meta.len(), 32);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "the key is its owner's alone");
    }
    let resumed = run(&["run", "--resume", run_dir.to_str().expect("utf-8")]);
    assert_eq!(resumed.status.code(), undisturbed.status.code(), "{}", stderr(&resumed));
    let mut resumed_reports = reports(&resumed);
    let resumed_mode = resumed_reports
        .as_array_mut()
        .expect("a report per mode")
        .iter_mut()
        .find(|r| r["mode"] == mode)
        .expect("the killed mode's report");
    let entries = resumed_mode.as_object_mut().expect("an object").remove("resumed").expect("a resumed entry");
    let from_step = entries[0]["from_step"].as_u64().expect("from_step") as usize;
    // The kill came once `at_step` steps had started (maybe more: the ledger reaches the disk within 200 ms).
    assert!(from_step + 1 >= at_step, "{entries}");
    assert_eq!(resumed_reports, reports(&undisturbed), "the resumed run reports as the undisturbed one");
    // The ledger: the kept events, then `resumed`, then the unfinished step from its start, once.
    let events = ledger(&mode_dir);
    let at = events.iter().position(|e| e["event"] == "resumed").expect("a resumed event");
    assert_eq!(events[at]["from_step"].as_u64(), Some(from_step as u64));
    let steps: Vec<u64> = events.iter().filter(|e| e["event"] == "step").filter_map(|e| e["index"].as_u64()).collect();
    let n_steps = steps.len();
    assert_eq!(steps, (0..n_steps as u64).collect::<Vec<_>>(), "each step once, in order");
    let calm_steps = ledger(&calm.join(&name).join(mode)).iter().filter(|e| e["event"] == "step").count();
    assert_eq!(n_steps, calm_steps);
    let discarded = entries[0]["discarded"].as_u64().expect("discarded");
    if discarded > 0 {
        let aside = std::fs::read_to_string(mode_dir.join("ledger.discarded.jsonl")).expect("set aside");
        assert_eq!(aside.lines().count() as u64, discarded);
    }
    let audit = std::fs::read_to_string(mode_dir.join("audit.log")).expect("audit");
    assert!(audit.lines().any(|l| l.contains("\trun-resume\t")), "{audit}");
    assert!(!key.exists(), "the grant key goes when the run ends");
}

#[test]
fn uc1_killed_in_less_mode_resumes_and_reports_as_undisturbed() {
    killed_and_resumed("scenarios/uc1-refactor.toml", "less", 4);
}

#[test]
fn waves_harbor_killed_in_the_baseline_resumes_and_reports_as_undisturbed() {
    killed_and_resumed("scenarios/waves-harbor.toml", "verbatim", 14);
}

/// What cannot be resumed is refused with `LESS_RUN_NOT_RESUMABLE` and what to do instead: a directory no run
/// wrote, and a run whose scenario file changed since.
#[test]
fn a_resume_that_cannot_go_on_is_refused_saying_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nothing = lessrt(&["run", "--resume", dir.path().to_str().expect("utf-8")]);
    assert_eq!(nothing.status.code(), Some(2), "{}", stderr(&nothing));
    assert!(stderr(&nothing).contains("LESS_RUN_NOT_RESUMABLE"), "{}", stderr(&nothing));
    assert!(stderr(&nothing).contains("command.json"), "{}", stderr(&nothing));
    // A scenario copied beside the run (on the fixture's workspace), run, then edited: its digest no longer matches.
    let scenario = dir.path().join("uc1.toml");
    let text = std::fs::read_to_string(root().join("scenarios/uc1-refactor.toml")).expect("uc1");
    std::fs::write(&scenario, &text).expect("write");
    let workspace = root().join("scenarios/fixtures/uc1-refactor");
    let out = dir.path().join("out");
    let first = run(&[
        "run",
        scenario.to_str().expect("utf-8"),
        "--mode",
        "less",
        "--json",
        "--workspace",
        workspace.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    assert!(matches!(first.status.code(), Some(0 | 1)), "{}", stderr(&first));
    // A finished run resumes to its reports, unchanged.
    let again = run(&["run", "--resume", out.join("uc1-refactor").to_str().expect("utf-8")]);
    assert_eq!(again.status.code(), first.status.code(), "{}", stderr(&again));
    assert_eq!(reports(&again), reports(&first));
    std::fs::write(&scenario, format!("{text}\n# edited\n")).expect("edit");
    let changed = run(&["run", "--resume", out.join("uc1-refactor").to_str().expect("utf-8")]);
    assert_eq!(changed.status.code(), Some(2), "{}", stderr(&changed));
    assert!(stderr(&changed).contains("LESS_RUN_NOT_RESUMABLE"), "{}", stderr(&changed));
    assert!(stderr(&changed).contains("changed since the run started"), "{}", stderr(&changed));
}

/// `command.json` is authenticated (issue 61): arguments appended to it (another workspace, an output over a victim
/// file, a recording elsewhere) make the resume refused before anything runs or is written, and so does a file
/// written under another user's key.
#[test]
fn a_changed_command_is_not_resumed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, victim) = (dir.path().join("out"), dir.path().join("victim.txt"));
    std::fs::write(&victim, "keep me\n").expect("victim");
    let scenario = root().join("scenarios/uc1-refactor.toml");
    let first = run(&["run", scenario.to_str().expect("utf-8"), "--mode", "less", "--json", "--out", &s(&out)]);
    assert!(matches!(first.status.code(), Some(0 | 1)), "{}", stderr(&first));
    let run_dir = out.join("uc1-refactor");
    let command_file = run_dir.join("command.json");
    let honest = std::fs::read_to_string(&command_file).expect("command.json");
    let mut command: Value = serde_json::from_str(&honest).expect("JSON");
    let args = command["args"].as_array_mut().expect("args");
    for extra in ["--workspace", "/tmp", "-o", &s(&victim), "--record", &s(&dir.path().join("outside"))] {
        args.push(Value::from(extra));
    }
    std::fs::write(&command_file, serde_json::to_vec(&command).expect("JSON")).expect("tamper");
    let tampered = run(&["run", "--resume", &s(&run_dir)]);
    assert_eq!(tampered.status.code(), Some(2), "{}", stderr(&tampered));
    assert!(stderr(&tampered).contains("LESS_RUN_NOT_RESUMABLE"), "{}", stderr(&tampered));
    assert!(stderr(&tampered).contains("command.json was changed"), "{}", stderr(&tampered));
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep me\n", "nothing written over it");
    assert!(!dir.path().join("outside").exists(), "no recording made");
    // The honest file resumes; under another user's key it does not.
    std::fs::write(&command_file, &honest).expect("restore");
    let again = run(&["run", "--resume", &s(&run_dir)]);
    assert_eq!(again.status.code(), first.status.code(), "{}", stderr(&again));
    let elsewhere = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", "--resume", &s(&run_dir)])
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .env("LESSRT_CONFIG_DIR", dir.path().join("another-user"))
        .output()
        .expect("lessrt runs");
    assert_eq!(elsewhere.status.code(), Some(2), "{}", stderr(&elsewhere));
    assert!(stderr(&elsewhere).contains("LESS_RUN_NOT_RESUMABLE"), "{}", stderr(&elsewhere));
}

fn s(path: &Path) -> String {
    path.display().to_string()
}
