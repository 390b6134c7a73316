//! Regression tests of issue 17 (reliability and attack resistance): each runs the built `lessrt` the way the defect
//! was found and fails on the code before its fix.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::{lessrt, lessrt_stdin, stderr, stdout, with_stdin};

/// `lessrt` without the embedding model (hash recall only): a command that must be quick does not load it.
fn lessrt_hash_only(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(args)
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .output()
        .expect("lessrt runs")
}

/// An engram of the shipped example's shape with its own id, claim, scope and TTL.
fn engram(id: &str, claim: &str, scope: &str, ttl: &str) -> Value {
    let mut doc: Value = serde_json::from_str(include_str!("../schemas/examples/engram.json")).expect("example engram");
    doc["id"] = json!(id);
    doc["claim"] = json!(claim);
    doc["scope"] = json!(scope);
    doc["ttl"] = json!(ttl);
    doc
}

fn store_arg(dir: &Path) -> String {
    dir.join("store").display().to_string()
}

/// The ids (and tiers) a `memory query --json` returned.
fn hits(output: &Output) -> Vec<(String, String)> {
    let recall: Value = serde_json::from_str(&stdout(output))
        .unwrap_or_else(|err| panic!("JSON ({err}): {}\n{}", stdout(output), stderr(output)));
    recall["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| (h["id"].as_str().unwrap_or_default().to_owned(), h["tier"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// `ttl = "PT3S"` queried after it ran out: out of hot recall and of the hot count, moved to the cold tier by the
/// next command that writes, still readable by id and by a cold query.
#[test]
fn issue17_an_expired_engram_leaves_hot_recall_and_the_hot_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let common = ["--store", store.as_str(), "--project", "p"];
    let short = engram("eg_short", "The staging token rotates every few seconds.", "project", "PT3S");
    let output = lessrt_stdin(&[&["memory", "put", "-"][..], &common].concat(), &short.to_string());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let query = |extra: &[&str]| {
        lessrt_hash_only(&[&["memory", "query", "staging token rotates", "--json"][..], &common, extra].concat())
    };
    let first = query(&[]);
    assert_eq!(hits(&first), [("eg_short".to_owned(), "hot".to_owned())], "{}", stderr(&first));
    // The TTL is the only clock a command-line user has: waiting it out is the test.
    std::thread::sleep(std::time::Duration::from_millis(3_100));
    assert!(hits(&query(&[])).is_empty(), "an expired engram is out of hot recall");
    let stats: Value =
        serde_json::from_str(&stdout(&lessrt(&["memory", "stats", "--json", "--store", &store]))).expect("JSON");
    assert_eq!((stats["hot"].as_u64(), stats["cold"].as_u64()), (Some(0), Some(1)), "{stats}");
    // A command that writes moves it to the cold tier for good.
    let other = engram("eg_other", "The staging database is read-only on Sundays.", "project", "P7D");
    let output = lessrt_stdin(&[&["memory", "put", "-"][..], &common].concat(), &other.to_string());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let got: Value =
        serde_json::from_str(&stdout(&lessrt(&[&["memory", "get", "eg_short", "--json"][..], &common].concat())))
            .expect("JSON");
    assert_eq!((got["tier"].as_str(), got["cold_reason"].as_str()), (Some("cold"), Some("expired")), "{got}");
    let cold = hits(&query(&["--cold"]));
    assert!(cold.contains(&("eg_short".to_owned(), "cold".to_owned())), "{cold:?}");
}

/// Run r2 putting the id run r1 holds privately: r2 gets a copy of its own (exit 0, `stored`, not `revived`), r1's
/// engram stays r1's and private; another claim under a taken id is refused with `LESS_ID_CONFLICT`, exit 2.
#[test]
fn issue17_a_run_never_takes_over_another_runs_engram_and_a_taken_id_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let in_run = |run: &'static str| ["--store", store.as_str(), "--project", "p", "--run", run];
    let private = engram("eg_private", "The release branch is cut on Thursdays.", "run", "P7D");
    let put = |run: &'static str, doc: &Value| {
        lessrt_stdin(&[&["memory", "put", "-"][..], &in_run(run)].concat(), &doc.to_string())
    };
    let output = put("r1", &private);
    assert_eq!((output.status.code(), stdout(&output).trim()), (Some(0), "stored\teg_private"), "{}", stderr(&output));
    let output = put("r2", &private);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (status, copy) =
        stdout(&output).trim().split_once('\t').map(|(a, b)| (a.to_owned(), b.to_owned())).expect("ack");
    assert_eq!(status, "stored", "a copy of r2's own, never `revived`");
    assert_ne!(copy, "eg_private");
    let get = |run: &'static str| {
        let output = lessrt(&[&["memory", "get", "eg_private", "--json"][..], &in_run(run)].concat());
        (output.status.code(), serde_json::from_str::<Value>(&stdout(&output)).unwrap_or(Value::Null), stderr(&output))
    };
    let (code, owner, err) = get("r1");
    assert_eq!(code, Some(0), "the owner keeps access: {err}");
    assert_eq!((owner["run"].as_str(), owner["engram"]["id"].as_str()), (Some("r1"), Some("eg_private")), "{owner}");
    let (code, theirs, err) = get("r2");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!((theirs["run"].as_str(), theirs["engram"]["id"].as_str()), (Some("r2"), Some(copy.as_str())));
    let (code, _, err) = get("r3");
    assert_eq!(code, Some(2), "a third run reads neither");
    assert!(err.contains("LESS_SCOPE_DENIED"), "{err}");
    // The same id for another claim: refused with a code, and the stored claim is unchanged.
    let mut other = private.clone();
    other["claim"] = json!("The release branch is cut on Mondays.");
    let output = put("r1", &other);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stdout(&output).contains("LESS_ID_CONFLICT"), "{}", stdout(&output));
    assert!(stderr(&output).contains("instead:"), "{}", stderr(&output));
    let (_, owner, _) = get("r1");
    assert_eq!(owner["engram"]["claim"].as_str(), Some("The release branch is cut on Thursdays."));
}

fn lessrt_hash_only_stdin(args: &[&str], stdin: &str) -> Output {
    with_stdin(
        Command::new(env!("CARGO_BIN_EXE_lessrt")).args(args).env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model"),
        stdin,
    )
}

/// Four `memory put` loops and two `memory query` loops, each command its own process, on one store: every command
/// succeeds (writers wait for the index's write lock, readers need none), and every acknowledged engram is recalled.
#[test]
fn issue17_parallel_writers_and_readers_on_one_store_all_succeed() {
    const PUTS: usize = 12;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    // One engram first: a query of an empty or missing store answers "nothing" (exit 1), not what is tested here.
    let seed = engram("eg_seed", "The deploy pipeline records every fact.", "project", "P7D").to_string();
    let output = lessrt_hash_only_stdin(&["memory", "put", "-", "--store", &store, "--project", "p"], &seed);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let (store, failures) = (&store, &failures);
            scope.spawn(move || {
                for n in 0..PUTS {
                    let doc = engram(
                        &format!("eg_w{writer}_{n}"),
                        &format!("Writer {writer} records deploy fact {n} for the pipeline."),
                        "project",
                        "P7D",
                    );
                    let output = lessrt_hash_only_stdin(
                        &["memory", "put", "-", "--store", store, "--project", "p"],
                        &doc.to_string(),
                    );
                    if output.status.code() != Some(0) {
                        failures.lock().expect("lock").push(format!("put: {}", stderr(&output)));
                    }
                }
            });
        }
        for _ in 0..2 {
            let (store, failures) = (&store, &failures);
            scope.spawn(move || {
                for _ in 0..PUTS {
                    let output = lessrt_hash_only(&[
                        "memory",
                        "query",
                        "deploy fact pipeline",
                        "--store",
                        store,
                        "--project",
                        "p",
                    ]);
                    if output.status.code() != Some(0) {
                        failures.lock().expect("lock").push(format!("query: {}", stderr(&output)));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("lock");
    assert!(failures.is_empty(), "{} of {} commands failed: {failures:#?}", failures.len(), 6 * PUTS);
    let stats: Value =
        serde_json::from_str(&stdout(&lessrt_hash_only(&["memory", "stats", "--store", &store, "--json"])))
            .expect("JSON");
    assert_eq!(stats["hot"].as_u64(), Some(4 * PUTS as u64 + 1), "{stats}");
    // Every acknowledged engram is in the index: the most specific question finds each one first.
    for writer in 0..4 {
        let question = format!("Writer {writer} records deploy fact 7");
        let output = lessrt_hash_only(&[
            "memory",
            "query",
            &question,
            "--store",
            &store,
            "--project",
            "p",
            "--k",
            "1",
            "--json",
        ]);
        assert_eq!(hits(&output), [(format!("eg_w{writer}_7"), "hot".to_owned())], "{}", stderr(&output));
    }
}

/// Garbage in the recall index's files and in the archive's message index: every command still answers (the
/// damage is detected and the index rebuilt from SQLite), and `memory reindex` repairs what it finds.
#[test]
fn issue17_a_damaged_index_is_rebuilt_from_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let common = ["--store", store.as_str(), "--project", "p"];
    let docs: Vec<String> = (0..3)
        .map(|n| {
            engram(
                &format!("eg_{n}"),
                &format!("The deploy pipeline runs stage {n} on canary hosts."),
                "project",
                "P7D",
            )
            .to_string()
        })
        .collect();
    let output = lessrt_hash_only_stdin(&[&["memory", "put", "-"][..], &common].concat(), &docs.join("\n"));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let transcript = json!([
        {"role": "user", "content": "Where do the canary hosts live?"},
        {"role": "assistant", "content": "The canary hosts live in the eu-west-3 rack, behind the blue load balancer."}
    ]);
    let output = lessrt_hash_only_stdin(
        &["memory", "ingest", "-", "--session", "s1", "--project", "p", "--store", &store],
        &transcript.to_string(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let garbage = |index: &Path| {
        let mut n = 0;
        for entry in std::fs::read_dir(index).expect("index dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "term") {
                std::fs::write(&path, b"\x00not a term dictionary\xff".repeat(64)).expect("damage");
                n += 1;
            }
        }
        assert!(n > 0, "no term file in {}", index.display());
    };
    garbage(&dir.path().join("store/recall"));
    garbage(&dir.path().join("store/archive-index/recall"));
    let query = lessrt_hash_only(&[&["memory", "query", "deploy pipeline canary", "--json"][..], &common].concat());
    assert_eq!(query.status.code(), Some(0), "{}", stderr(&query));
    assert_eq!(hits(&query).len(), 3);
    for args in [&["memory", "stats"][..], &["memory", "reindex"][..]] {
        let output = lessrt_hash_only(&[args, &["--store", store.as_str()]].concat());
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
    }
    garbage(&dir.path().join("store/recall"));
    let more = engram("eg_more", "The deploy pipeline pauses on Fridays.", "project", "P7D").to_string();
    let output = lessrt_hash_only_stdin(&[&["memory", "put", "-"][..], &common].concat(), &more);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answer = lessrt_hash_only(&["dag", "query", "where are the canary hosts", "--store", &store, "--json"]);
    assert_eq!(answer.status.code(), Some(0), "{}", stderr(&answer));
    assert!(stdout(&answer).contains("eu-west-3"), "{}", stdout(&answer));
}

/// `memory query --k` with a count the process could never allocate: refused up front with a code and exit 2, never
/// an abort or a panic; the library refuses it too.
#[test]
fn issue17_a_huge_k_is_refused_with_a_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let doc = engram("eg_k", "The deploy pipeline has four stages.", "project", "P7D").to_string();
    let output = lessrt_hash_only_stdin(&["memory", "put", "-", "--store", &store, "--project", "p"], &doc);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    for k in ["4294967296", "18446744073709551615", "99999999999999999999999", "1001", "0", "-3", "five"] {
        let output = lessrt_hash_only(&[
            "memory",
            "query",
            "deploy pipeline",
            "--store",
            &store,
            "--project",
            "p",
            &format!("--k={k}"),
        ]);
        assert_eq!(output.status.code(), Some(2), "--k {k}: {}", stderr(&output));
        assert!(stderr(&output).contains("LESS_ARGUMENT_INVALID"), "--k {k}: {}", stderr(&output));
        assert!(!stderr(&output).contains("panicked"), "--k {k}: {}", stderr(&output));
    }
    let output =
        lessrt_hash_only(&["memory", "query", "deploy pipeline", "--store", &store, "--project", "p", "--k", "1000"]);
    assert_eq!((output.status.code(), stdout(&output).lines().count()), (Some(0), 1), "{}", stderr(&output));
}

/// The shipped example scenario with one line replaced, written into `dir` (with the file it reads).
fn scenario_with(dir: &Path, from: &str, to: &str) -> String {
    let example = include_str!("../schemas/examples/scenario.toml");
    assert!(example.contains(from), "the example has {from:?}");
    std::fs::write(dir.join("budget.json"), include_str!("../schemas/examples/budget.json")).expect("write budget");
    let path = dir.join("scenario.toml");
    std::fs::write(&path, example.replacen(from, to, 1)).expect("write scenario");
    path.display().to_string()
}

/// A workspace outside the scenario's directory (absolute, `..`, or a symlink out), a step for an agent the scenario
/// does not have, a grant to a non-descendant or living "forever": each refused by `validate` and by `run` before
/// anything runs, with its code and path; nothing of `/etc` reaches the run's memory.
#[test]
fn issue17_scenarios_are_refused_for_what_the_run_would_trip_over() {
    let cases = [
        ("workspace = \".\"", "workspace = \"/etc\"", "LESS_SCENARIO_INVALID", "/workspace"),
        ("workspace = \".\"", "workspace = \"../../..\"", "LESS_SCENARIO_INVALID", "/workspace"),
        ("agent = \"programmer\"\npointers", "agent = \"nobody\"\npointers", "LESS_SCENARIO_INVALID", "/steps/1/agent"),
        (
            "to = \"programmer\", patterns",
            "to = \"architect\", patterns",
            "LESS_SCENARIO_INVALID",
            "/steps/0/grants/0/to",
        ),
        ("max_tokens = 2000 }", "max_tokens = 2000, ttl = \"forever\" }", "LESS_TTL_INVALID", "/steps/0/grants/0/ttl"),
    ];
    for (from, to, code, path) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let scenario = scenario_with(dir.path(), from, to);
        let output = lessrt(&["validate", &scenario]);
        assert_eq!(output.status.code(), Some(1), "{to}: {}{}", stdout(&output), stderr(&output));
        assert!(stdout(&output).contains(&format!("{code}\t{scenario}\t{path}")), "{to}: {}", stdout(&output));
        let out = dir.path().join("runs");
        let run = lessrt(&["run", &scenario, "--out", &out.display().to_string(), "--quiet"]);
        assert_eq!(run.status.code(), Some(1), "{to}: {}{}", stdout(&run), stderr(&run));
        let said = format!("{}{}", stdout(&run), stderr(&run));
        assert!(said.contains(code) && said.contains(path), "{to}: {said}");
        assert!(!said.contains("run failed"), "refused before the run: {said}");
        assert!(!out.exists(), "nothing ran: {to}");
    }
    // A symlink out of the scenario's directory is refused when the scenario is loaded.
    let dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink("/etc", dir.path().join("ws")).expect("symlink");
    let scenario = scenario_with(dir.path(), "workspace = \".\"", "workspace = \"ws\"");
    let run = lessrt(&["run", &scenario, "--out", &dir.path().join("runs").display().to_string(), "--quiet"]);
    let said = format!("{}{}", stdout(&run), stderr(&run));
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(said.contains("LESS_SCENARIO_INVALID") && said.contains("outside the scenario's directory"), "{said}");
    // The example itself, its workspace inside its directory, runs.
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = scenario_with(dir.path(), "workspace = \".\"", "workspace = \".\"");
    let run = lessrt(&["run", &scenario, "--out", &dir.path().join("runs").display().to_string(), "--quiet"]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
}

/// A key given twice in an untrusted document (last one wins in most parsers, first one in others) is refused with
/// `LESS_JSON_MALFORMED` naming the key: by `validate`, `memory put`, `memory ingest`, `compact` and `pointer format`.
#[test]
fn issue17_duplicate_json_keys_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let doc = engram("eg_dup", "The deploy pipeline has four stages.", "project", "P7D").to_string();
    let smuggled = doc.replacen("\"scope\":\"project\"", "\"scope\":\"project\",\"scope\":\"global\"", 1);
    assert_ne!(smuggled, doc, "the key was doubled");
    let file = dir.path().join("dup.json");
    std::fs::write(&file, &smuggled).expect("write");
    let file = file.display().to_string();
    let validate = lessrt(&["validate", &file]);
    assert_eq!(validate.status.code(), Some(2), "{}", stdout(&validate));
    let said = format!("{}{}", stdout(&validate), stderr(&validate));
    assert!(said.contains("LESS_JSON_MALFORMED") && said.contains("duplicate key \"scope\""), "{said}");
    let put = lessrt_hash_only(&["memory", "put", &file, "--store", &store, "--project", "p"]);
    assert_eq!(put.status.code(), Some(2), "{}", stdout(&put));
    assert!(stderr(&put).contains("duplicate key \"scope\""), "{}", stderr(&put));
    assert!(!dir.path().join("store/memory.sqlite3").exists() || !stdout(&put).contains("stored"));
    let transcript = r#"[{"role": "user", "content": "hi", "role": "system"}]"#;
    for args in [
        &["memory", "ingest", "-", "--session", "s", "--project", "p", "--store", store.as_str()][..],
        &["compact", "-"][..],
    ] {
        let output = lessrt_stdin(args, transcript);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stdout(&output));
        let said = format!("{}{}", stdout(&output), stderr(&output));
        assert!(said.contains("LESS_JSON_MALFORMED") && said.contains("duplicate key \"role\""), "{args:?}: {said}");
    }
    let pointer = lessrt(&["pointer", "format", r#"{"type": "repo", "ref": "a.rs", "ref": "/etc/passwd"}"#]);
    assert_eq!(pointer.status.code(), Some(2));
    assert!(stderr(&pointer).contains("duplicate key \"ref\""), "{}", stderr(&pointer));
}

/// `dag show` after an ingest reads rows and nothing else: without the model it succeeds and says nothing about it;
/// with the model it embeds nothing (the vector index is not touched). Embedding waits for a query that reranks.
#[test]
fn issue17_dag_show_does_no_heavy_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let transcript: Vec<Value> = (0..40)
        .map(|n| json!({"role": if n % 2 == 0 { "user" } else { "assistant" }, "content": format!("Message {n}: the canary deploy of build {n} passed its checks.")}))
        .collect();
    let output = lessrt_stdin(
        &["memory", "ingest", "-", "--session", "s1", "--project", "p", "--store", &store],
        &Value::Array(transcript).to_string(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let vectors = dir.path().join("store/archive-index/vectors/vectors.usearch");
    let before = std::fs::read(&vectors).ok();
    let show = lessrt_hash_only(&["dag", "show", "--store", &store]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    assert!(stdout(&show).contains("40 messages"), "{}", stdout(&show));
    let said = stderr(&show).to_lowercase();
    assert!(!said.contains("model") && !said.contains("embed"), "{said}");
    let show = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["dag", "show", "--store", &store])
        .env("LESSRT_LOG", "less.memory=info")
        .output()
        .expect("lessrt runs");
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    assert!(!stderr(&show).contains("embedded"), "{}", stderr(&show));
    assert_eq!(std::fs::read(&vectors).ok(), before, "dag show changed the vector index");
}

/// Outputs are checked before the run starts: `--out` naming a file, a place no directory can be made, `-o` naming a
/// directory or an unwritable place: exit 2 with `LESS_OUTPUT_UNWRITABLE`, nothing run, no actor failing mid-start.
#[test]
fn issue17_run_outputs_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = scenario_with(dir.path(), "workspace = \".\"", "workspace = \".\"");
    let a_file = dir.path().join("a-file");
    std::fs::write(&a_file, "not a directory").expect("write");
    let runs = dir.path().join("runs").display().to_string();
    let a_file = a_file.display().to_string();
    let report_dir = dir.path().join("reports");
    std::fs::create_dir(&report_dir).expect("mkdir");
    let report_dir = report_dir.display().to_string();
    for args in [
        vec!["--out", a_file.as_str()],
        vec!["--out", "/proc/lessrt-cannot-be-here"],
        vec!["--out", runs.as_str(), "-o", report_dir.as_str()],
        vec!["--out", runs.as_str(), "-o", "/proc/lessrt-report.json"],
    ] {
        let output = lessrt(&[&["run", scenario.as_str(), "--quiet"][..], &args].concat());
        let said = format!("{}{}", stdout(&output), stderr(&output));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains("LESS_OUTPUT_UNWRITABLE") && said.contains("instead:"), "{args:?}: {said}");
        assert!(!said.contains("panicked") && !said.contains("step 0"), "{args:?}: {said}");
        assert!(!Path::new(&runs).join("example-refactor").exists(), "{args:?}: something ran");
    }
}

/// A rerun into the same directory appends to its audit log: every run's lines stay, each run headed by its id.
#[test]
fn issue17_the_audit_log_is_append_only_across_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = scenario_with(dir.path(), "workspace = \".\"", "workspace = \".\"");
    let runs = dir.path().join("runs");
    let audit = runs.join("example-refactor/less/audit.log");
    let mut sizes = Vec::new();
    for _ in 0..2 {
        let output = lessrt(&["run", &scenario, "--mode", "less", "--out", &runs.display().to_string(), "--quiet"]);
        assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
        sizes.push(std::fs::read_to_string(&audit).expect("audit.log"));
    }
    let (first, second) = (&sizes[0], &sizes[1]);
    assert!(second.starts_with(first.as_str()), "the rerun kept the first run's lines");
    assert_eq!(second.lines().filter(|l| l.contains("\trun-start\t")).count(), 2, "{second}");
    assert_eq!(second.lines().count(), 2 * first.lines().count(), "{second}");
}

/// Failures that printed no code: an empty pipe to `memory put -` (was exit 0, nothing said), input that is not UTF-8,
/// a store file that is not SQLite, a scenario file that is not there. Each now exits 2 with its code first.
#[test]
fn issue17_every_failure_starts_with_its_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let cases: Vec<(&str, Output)> = vec![
        (
            "LESS_JSON_MALFORMED",
            lessrt_hash_only_stdin(&["memory", "put", "-", "--store", &store, "--project", "p"], ""),
        ),
        ("LESS_INPUT_UNREADABLE", {
            let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
                .args(["memory", "put", "-", "--store", &store, "--project", "p"])
                .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn");
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(b"\xff\xfe{}\n").expect("write");
            child.wait_with_output().expect("output")
        }),
        ("LESS_STORE_FAILED", {
            let broken = dir.path().join("broken");
            std::fs::create_dir_all(&broken).expect("mkdir");
            std::fs::write(broken.join("memory.sqlite3"), "this is not an SQLite database, not even its header\n")
                .expect("write");
            lessrt_hash_only(&["memory", "stats", "--store", &broken.display().to_string()])
        }),
    ];
    for (code, output) in cases {
        assert_eq!(output.status.code(), Some(2), "{code}: {}", stderr(&output));
        let text = stderr(&output);
        assert!(text.starts_with(&format!("lessrt: {code}: ")), "want {code} first: {text}");
    }
    // Nothing was acknowledged, so nothing is in the store.
    let stats = lessrt_hash_only(&["memory", "stats", "--store", &store, "--json"]);
    assert!(stdout(&stats).contains("\"hot\": 0") || stdout(&stats).contains("\"hot\":0"), "{}", stdout(&stats));
}

/// `lessrt load` at a small scale, all three parts: 8 agents × 50 messages through gateways at once, 4 memory clients,
/// a 2,000-message ingest while questions run. Nothing acknowledged is lost: every delivery is a `delivered` line of
/// the ledger even though the run stops right after the last one (a stop used to drop the ledger's mailbox: 67 of 400
/// were missing), every acknowledged put is in the store, every message is archived, and the questions kept getting
/// answers during the ingest.
#[test]
fn issue17_under_load_nothing_acknowledged_is_lost() {
    let output = lessrt_hash_only(&[
        "load",
        "--agents",
        "8",
        "--messages",
        "50",
        "--clients",
        "4",
        "--ops",
        "10",
        "--ingest",
        "2000",
        "--inbox-cap",
        "16",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let gateways = &doc["parts"]["gateways"];
    assert_eq!((gateways["sent"].as_u64(), gateways["delivered"].as_u64()), (Some(400), Some(400)), "{gateways}");
    assert_eq!(gateways["on_ledger"].as_u64(), Some(400), "every delivery on the ledger: {gateways}");
    // 8 senders: 2 managers under the lead (100 messages to it), 3 workers under each manager (150 to each). Past 16
    // inline, each recipient's oldest are spilled, and every spilled message reads back by its pointer.
    assert_eq!(gateways["spilled"].as_u64(), Some((100 - 16) + 2 * (150 - 16)), "{gateways}");
    assert_eq!(gateways["spilled_unreadable"].as_u64(), Some(0), "{gateways}");
    let memory = &doc["parts"]["memory"];
    assert_eq!((memory["acknowledged_puts"].as_u64(), memory["lost"].as_u64()), (Some(20), Some(0)), "{memory}");
    assert_eq!(memory["query"]["n"].as_u64(), Some(20), "{memory}");
    let ingest = &doc["parts"]["ingest"];
    assert_eq!((ingest["stored"].as_u64(), ingest["lost"].as_u64()), (Some(2000), Some(0)), "{ingest}");
    assert!(ingest["queries_answered"].as_u64().is_some_and(|n| n > 0), "{ingest}");
    assert_eq!(doc["lost"].as_u64(), Some(0));
}

/// Rows of `sql` (a count) in the store's SQLite file, read-only while another process writes it; 0 while the file or
/// the table is not there yet.
fn count_rows(db: &Path, sql: &str) -> i64 {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    rusqlite::Connection::open_with_flags(db, flags)
        .and_then(|conn| {
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            conn.query_row(sql, [], |r| r.get(0))
        })
        .unwrap_or(0)
}

/// `memory ingest` killed (SIGKILL) as soon as its messages are committed, while it indexes them: the transcript is
/// archived whole in an *ended* session, so `dag show` counts it pending, the next open indexes it and `dag build`
/// summarizes it. (The session used to be ended in a second transaction after the indexing: a kill in between left
/// the messages in a session no build would ever summarize, and `dag show` said 0 pending.)
#[test]
fn issue17_a_killed_ingest_leaves_its_whole_transcript_in_an_ended_session() {
    const MESSAGES: usize = 3_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let transcript: Vec<Value> = (0..MESSAGES)
        .map(|n| {
            let role = if n % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "at": 1_760_000_000 + n, "content": format!(
                "Turn {n}: we decided the canary fleet {n} must drain its queue before the schema migration {n} runs."
            )})
        })
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["memory", "ingest", "-", "--session", "s1", "--project", "p", "--store", &store])
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("lessrt starts");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(Value::Array(transcript).to_string().as_bytes()).expect("transcript written");
    }
    let db = dir.path().join("store/memory.sqlite3");
    let committed = loop {
        let n = count_rows(&db, "SELECT COUNT(*) FROM dag_messages");
        if n > 0 {
            break n;
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("lessrt ended ({status}) before its commit was seen");
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert_eq!(committed, MESSAGES as i64, "one transaction: all messages or none");
    let ended = count_rows(&db, "SELECT COUNT(*) FROM dag_sessions WHERE session = 's1' AND ended = 1");
    assert_eq!(ended, 1, "the killed ingest left its messages in a session nobody ends");
    let show = lessrt_hash_only(&["dag", "show", "--store", &store]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    assert!(stdout(&show).contains(&format!("{MESSAGES} messages pending")), "{}", stdout(&show));
    let build = lessrt_hash_only(&["dag", "build", "--store", &store]);
    assert_eq!(build.status.code(), Some(0), "{}", stderr(&build));
    assert!(stdout(&build).contains("built 1 session summary"), "{}", stdout(&build));
    // The message index was caught up from the archive on the next open.
    let answer = lessrt_hash_only(&["dag", "query", "canary fleet 2999 drain", "--store", &store, "--json"]);
    assert_eq!(answer.status.code(), Some(0), "{}", stderr(&answer));
    assert!(stdout(&answer).contains("canary fleet 2999 must drain"), "{}", stdout(&answer));
}

/// `memory put -` streaming engrams, killed (SIGKILL) after some acknowledgements: every engram it acknowledged is
/// in the store, identical, and recalled (the index the kill left behind is caught up), and the store opens for the
/// next writer.
#[test]
fn issue17_every_engram_a_killed_put_acknowledged_is_stored_and_recalled() {
    use std::io::{BufRead, Write};
    const ENGRAMS: usize = 400;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_arg(dir.path());
    let docs: Vec<Value> = (0..ENGRAMS)
        .map(|n| {
            engram(
                &format!("eg_kill_{n}"),
                &format!("The billing shard {n} replays its ledger nightly."),
                "project",
                "P7D",
            )
        })
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["memory", "put", "-", "--store", &store, "--project", "p"])
        .env("LESSRT_MODEL_DIR", "/nonexistent/lessrt-model")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("lessrt starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        for doc in docs {
            // The pipe breaks when the process is killed: the rest is simply never sent.
            if writeln!(stdin, "{doc}").is_err() {
                break;
            }
        }
    });
    let mut acknowledged = Vec::new();
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    while acknowledged.len() < ENGRAMS / 4 {
        let line = lines.next().expect("an acknowledgement").expect("a line");
        let (status, id) = line.split_once('\t').expect("status\tid");
        assert_eq!(status, "stored", "{line}");
        acknowledged.push(id.to_owned());
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // Lines already in the pipe when the kill came were acknowledged too.
    acknowledged.extend(lines.map_while(Result::ok).filter_map(|l| l.strip_prefix("stored\t").map(str::to_owned)));
    feeder.join().expect("feeder");
    assert!(acknowledged.len() < ENGRAMS, "the kill came before the end");
    for id in &acknowledged {
        let n: usize = id.trim_start_matches("eg_kill_").parse().expect("n");
        let got = lessrt_hash_only(&["memory", "get", id, "--store", &store, "--project", "p", "--json"]);
        assert_eq!(got.status.code(), Some(0), "{id}: {}", stderr(&got));
        let got: Value = serde_json::from_str(&stdout(&got)).expect("JSON");
        let want = engram(id, &format!("The billing shard {n} replays its ledger nightly."), "project", "P7D");
        assert_eq!(got["engram"], want, "{id}");
    }
    let last = acknowledged.last().expect("one").trim_start_matches("eg_kill_").to_owned();
    let query = lessrt_hash_only(&[
        "memory",
        "query",
        &format!("billing shard {last} replays"),
        "--store",
        &store,
        "--project",
        "p",
        "--k",
        "1000",
        "--json",
    ]);
    let found: Vec<String> = hits(&query).into_iter().map(|(id, _)| id).collect();
    for id in &acknowledged {
        assert!(found.contains(id), "{id} acknowledged but not recalled ({} hits)", found.len());
    }
    let next = engram("eg_after", "The billing shard after the kill replays too.", "project", "P7D").to_string();
    let output = lessrt_hash_only_stdin(&["memory", "put", "-", "--store", &store, "--project", "p"], &next);
    assert_eq!((output.status.code(), stdout(&output).trim()), (Some(0), "stored\teg_after"), "{}", stderr(&output));
}

/// A model that never answers: the step times out (`--step-timeout`), the run ends with the timeout's message, and
/// the model call is really cancelled — the connection closes when the run stops, and the process exits — instead
/// of a request left running on a thread until the model's own timeout (300 s here) and a process waiting for it.
#[test]
fn a_step_timeout_cancels_the_model_call_and_the_run_ends() {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let (tx, closed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else { return };
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).ok();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
            line.clear();
        }
        let mut rest = Vec::new();
        let closed = reader.read_to_end(&mut rest).is_ok();
        tx.send(closed).ok();
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/uc3-review-llm.toml");
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_lessrt"))
        .args(["run", &scenario.display().to_string(), "--mode", "less", "--quiet", "--step-timeout", "2", "--out"])
        .arg(dir.path())
        .env("LESSRT_LLM_BASE_URL", &base)
        .output()
        .expect("lessrt runs");
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(2), "the run fails: {}", stderr(&output));
    assert!(stderr(&output).contains("within 2s"), "the step timeout says so: {}", stderr(&output));
    assert!(took < std::time::Duration::from_secs(45), "the run ended {took:?} after it started, not at once");
    let closed = closed.recv_timeout(std::time::Duration::from_secs(5)).expect("the server saw the request");
    assert!(closed, "the model's connection was closed");
}
