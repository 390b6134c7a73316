//! Issue 34, files: what is swapped into the workspace while it is read, a workspace that is a link, links left in a
//! run's output, secrets with words before their colon, and control characters printed to a terminal.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use less_runtime::{Pointer, Resolver};

use super::OUTSIDE;
use crate::support::{lessrt, stderr, stdout};

/// How long each race runs: long enough for thousands of swaps.
const RACE: Duration = Duration::from_secs(4);
/// A deref that has not come back after this long is hung (a liveness bound, not a timing assertion).
const HUNG: Duration = Duration::from_secs(60);

/// Swaps `a` and `b` (two names in one directory) through a third name, over and over, until `stop`: `a` alternates
/// between the two files. Renames only, so each swap is atomic for a reader of `a`.
fn swap_until(dir: &Path, a: &str, b: &str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let (a, b, spare) = (dir.join(a), dir.join(b), dir.join(".swap-spare"));
    std::thread::spawn(move || {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            let swapped = std::fs::rename(&a, &spare)
                .and_then(|()| std::fs::rename(&b, &a))
                .and_then(|()| std::fs::rename(&spare, &b));
            if swapped.is_err() {
                // The test ended and took the directory with it.
                break;
            }
            swaps += 1;
        }
        swaps
    })
}

/// Dereferences `pointer` in a loop for [`RACE`] (a fresh `@rev` each time, so no digest is pinned), in a thread
/// that must come back; returns every content read.
fn deref_while_racing(root: &Path, pointer: &str) -> Vec<String> {
    let (tx, rx) = mpsc::channel();
    let root = root.to_owned();
    let pointer = pointer.to_owned();
    std::thread::spawn(move || {
        let mut resolver = Resolver::new(&root).expect("resolver");
        let mut read = Vec::new();
        let started = Instant::now();
        let mut rev = 0u64;
        while started.elapsed() < RACE {
            rev += 1;
            let (path, span) = pointer.split_once('#').unwrap_or((&pointer, ""));
            let text = if span.is_empty() { format!("{path}@r{rev}") } else { format!("{path}#{span}@r{rev}") };
            let parsed = Pointer::parse(&text).expect("pointer");
            if let Ok(resolved) = resolver.resolve(&parsed, &()) {
                read.push(resolved.content);
            }
        }
        let _ = tx.send(read);
    });
    rx.recv_timeout(HUNG).expect("the resolver came back: nothing swapped in may block it")
}

#[cfg(unix)]
#[test]
fn attack_a_hard_link_swapped_over_a_workspace_file_is_never_read() {
    let dir = tempfile::tempdir().expect("dir");
    let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(ws.join("src/a.rs"), "inside\n").expect("write");
    std::fs::write(outside.join("secret.txt"), format!("{OUTSIDE}\n")).expect("write");
    // A second name of the outside file, in the workspace, swapped with `a.rs` by renames.
    std::fs::hard_link(outside.join("secret.txt"), ws.join("src/.b.rs")).expect("hard link");

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = swap_until(&ws.join("src"), "a.rs", ".b.rs", stop.clone());
    let read = deref_while_racing(&ws, "repo:src/a.rs#L1");
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");

    assert!(swaps > 100, "the race ran ({swaps} swaps)");
    assert!(!read.is_empty(), "the workspace file was read in between");
    let other = read.iter().filter(|content| *content != "inside\n").count();
    assert_eq!(other, 0, "{other} of {} reads returned something else (the outside file: {OUTSIDE})", read.len());
}

#[cfg(unix)]
#[test]
fn attack_a_fifo_swapped_over_a_workspace_file_never_blocks_the_resolver() {
    let dir = tempfile::tempdir().expect("dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::write(ws.join("a.rs"), "inside\n").expect("write");
    let made = std::process::Command::new("mkfifo").arg(ws.join(".b.rs")).status().expect("mkfifo runs");
    assert!(made.success());

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = swap_until(&ws, "a.rs", ".b.rs", stop.clone());
    let read = deref_while_racing(&ws, "repo:a.rs");
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    let other = read.iter().filter(|content| *content != "inside\n").count();
    assert_eq!(other, 0, "{other} of {} reads returned something else", read.len());
}

/// A scenario beside a workspace that is a symlink to a directory outside, loaded the way a user in that directory
/// runs it (`lessrt validate scenario.toml`, the path with no directory part).
#[cfg(unix)]
#[test]
fn attack_a_workspace_that_is_a_symlink_out_is_refused_from_any_working_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let (repo, outside) = (dir.path().join("repo"), dir.path().join("outside"));
    std::fs::create_dir_all(&repo).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("shadow"), format!("{OUTSIDE}\n")).expect("write");
    std::os::unix::fs::symlink(&outside, repo.join("wsetc")).expect("symlink");
    let scenario = "name = \"shadow\"\nworkspace = \"wsetc\"\n[[agents]]\nid = \"lead\"\nrole = \"lead\"\n";
    std::fs::write(repo.join("scenario.toml"), scenario).expect("write");
    for (cwd, file) in
        [(&repo, "scenario.toml"), (&repo, "./scenario.toml"), (&dir.path().to_owned(), "repo/scenario.toml")]
    {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_lessrt"))
            .args(["validate", file])
            .current_dir(cwd)
            .output()
            .expect("lessrt runs");
        assert_eq!(output.status.code(), Some(1), "{file} from {}: {}", cwd.display(), stdout(&output));
        let text = stdout(&output) + &stderr(&output);
        assert!(text.contains("LESS_SCENARIO_INVALID") && text.contains("outside the scenario"), "{text}");
    }
}

#[cfg(unix)]
#[test]
fn attack_links_left_in_a_run_output_directory_are_never_written_through() {
    let dir = tempfile::tempdir().expect("dir");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep\n").expect("write");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/uc1-refactor.toml");
    let out = dir.path().join("runs");
    for (name, link_to) in [("ledger.jsonl", &victim), ("audit.log", &victim), ("memory/recall/meta.json", &victim)] {
        let mode_dir = out.join("uc1-refactor/less");
        let _ = std::fs::remove_dir_all(&mode_dir);
        let link = mode_dir.join(name);
        std::fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(link_to, &link).expect("symlink");
        let output = lessrt(&[
            "run",
            &scenario.display().to_string(),
            "--mode",
            "less",
            "--out",
            &out.display().to_string(),
            "--quiet",
        ]);
        assert_eq!(output.status.code(), Some(2), "{name}: {}", stderr(&output));
        let err = stderr(&output);
        assert!(err.contains("LESS_OUTPUT_UNWRITABLE") && err.contains("symlink"), "{name}: {err}");
        assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep\n", "{name} was written through");
    }
}

/// Messages with secrets worded the way people write them, and control characters, through the archive and out of
/// `dag show`, `dag expand` and `dag query`.
#[test]
fn attack_secrets_after_words_and_control_characters_never_reach_the_terminal() {
    let dir = tempfile::tempdir().expect("dir");
    let store = dir.path().join("store").display().to_string();
    let secrets = ["swordfish42", "rybamech77", "9dk3Lq7mZ2"];
    let lines: Vec<Value> = [
        "The password for the billing db: swordfish42 (rotate it monthly).",
        "пароль от базы billing: rybamech77, не забудь.",
        "The billing api key: 9dk3Lq7mZ2 goes in the vault.",
        "Billing decision: \u{1b}[2J\u{1b}[Hthe invoice job runs nightly\rPASS \u{7}",
        "We decided billing invoices are retried three times before alerting.",
        "TODO: the billing runbook must list the vault path for the billing db.",
    ]
    .iter()
    .enumerate()
    .map(|(i, content)| {
        json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": content, "at": 1_767_603_600 + i * 60})
    })
    .collect();
    let file = dir.path().join("s.jsonl");
    std::fs::write(&file, lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")).expect("write");
    let file = file.display().to_string();
    let ingest = lessrt(&["memory", "ingest", &file, "--session", "s1", "--project", "shop", "--store", &store]);
    assert_eq!(ingest.status.code(), Some(0), "{}", stderr(&ingest));
    let build = lessrt(&["dag", "build", "--store", &store, "--json"]);
    assert_eq!(build.status.code(), Some(0), "{}", stderr(&build));

    let mut printed = Vec::new();
    let show = lessrt(&["dag", "show", "--store", &store]);
    printed.push(stdout(&show));
    let tree: Value =
        serde_json::from_str(&stdout(&lessrt(&["dag", "show", "--store", &store, "--json"]))).expect("JSON");
    let session = tree.to_string();
    let id = session.split('"').find(|s| s.starts_with("S-")).expect("a session node").to_owned();
    printed.push(stdout(&lessrt(&["dag", "show", &id, "--store", &store])));
    printed.push(stdout(&lessrt(&["dag", "expand", &id, "--store", &store])));
    printed.push(stdout(&lessrt(&["dag", "query", "billing password vault invoice", "--store", &store])));
    let all = printed.join("\n");
    assert!(all.contains("billing"), "something was printed: {all}");
    for secret in secrets {
        assert!(!all.contains(secret), "{secret} printed: {all}");
    }
    for c in all.chars() {
        assert!(!c.is_control() || c == '\n' || c == '\t', "a raw control character U+{:04X} printed", u32::from(c));
    }
}

/// Issue 61: `lessrt skill export` writes nothing through a link left in the pack: a link as `mcp.json` is replaced
/// (the file it pointed at is kept as it was), and a linked subdirectory (`schemas -> elsewhere`) is refused with
/// `LESS_OUTPUT_UNWRITABLE`, nothing landing where it points.
#[cfg(unix)]
#[test]
fn attack_skill_export_never_writes_through_links() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pack = dir.path().join("less");
    std::fs::create_dir_all(&pack).expect("mkdir");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep\n").expect("write");
    std::os::unix::fs::symlink(&victim, pack.join("mcp.json")).expect("symlink");
    let out = lessrt(&["skill", "export", &pack.to_string_lossy()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep\n", "written through mcp.json");
    assert!(!std::fs::symlink_metadata(pack.join("mcp.json")).expect("meta").file_type().is_symlink());
    let host: Value =
        serde_json::from_str(&std::fs::read_to_string(pack.join("mcp.json")).expect("read")).expect("JSON");
    assert!(host["mcpServers"]["less"].is_object(), "{host}");

    let pack = dir.path().join("less-linked");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&pack).expect("mkdir");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, pack.join("schemas")).expect("symlink");
    let out = lessrt(&["skill", "export", &pack.to_string_lossy()]);
    assert!(!out.status.success(), "a linked schemas directory is refused");
    let err = stderr(&out);
    assert!(err.contains("LESS_OUTPUT_UNWRITABLE") && err.contains("symlink"), "{err}");
    assert_eq!(std::fs::read_dir(&elsewhere).expect("read").count(), 0, "files landed in the linked directory");
}
