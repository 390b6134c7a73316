//! Guard tests: conventions that keep the repository readable and the published contract consistent.

use std::path::{Path, PathBuf};

use less_runtime::{DocKind, ErrorCode, SCHEMA_FILES, scenario_document, validate, validate_inferred};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn files_with_extension(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                files_with_extension(&path, ext, out);
            }
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["src", "schemas", "runtime", "agents", "eval", "tests", "benches"] {
        files_with_extension(&root().join(dir), "rs", &mut files);
    }
    assert!(files.len() > 10);
    let undocumented: Vec<String> = files
        .iter()
        .filter(|path| !std::fs::read_to_string(path).expect("read").starts_with("//!"))
        .map(|path| path.display().to_string())
        .collect();
    assert!(undocumented.is_empty(), "files without a leading //! paragraph: {undocumented:?}");
}

#[test]
fn every_schema_file_is_embedded_and_has_a_valid_example() {
    let mut on_disk: Vec<String> = std::fs::read_dir(root().join("schemas"))
        .expect("schemas dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".json"))
        .collect();
    on_disk.sort();
    let mut embedded: Vec<String> = SCHEMA_FILES.iter().map(|(name, _)| (*name).to_owned()).collect();
    embedded.sort();
    assert_eq!(on_disk, embedded, "schemas/ and SCHEMA_FILES list the same files");
    for (name, text) in SCHEMA_FILES {
        let on_disk = std::fs::read_to_string(root().join("schemas").join(name)).expect("read schema");
        assert_eq!(on_disk, text, "{name}: the binary embeds the file as committed");
        let stem = name.strip_suffix(".v0.1.json").expect("versioned name");
        let json = root().join("schemas/examples").join(format!("{stem}.json"));
        let toml = root().join("schemas/examples").join(format!("{stem}.toml"));
        let doc = if json.exists() {
            serde_json::from_str(&std::fs::read_to_string(&json).expect("read")).expect("example is JSON")
        } else {
            scenario_document(&std::fs::read_to_string(&toml).unwrap_or_else(|_| panic!("{name} has no example")))
                .expect("example is TOML")
        };
        let (_, violations) = validate_inferred(&doc);
        assert!(violations.is_empty(), "{name}'s example: {violations:?}");
    }
}

#[test]
fn every_scenario_validates() {
    // Scenarios are the .toml files directly in scenarios/; fixture workspaces below it may hold other TOML.
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios"))
        .expect("scenarios dir")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files_with_extension(&root().join("schemas/examples"), "toml", &mut files);
    assert!(!files.is_empty());
    for file in files {
        let doc = scenario_document(&std::fs::read_to_string(&file).expect("read")).expect("scenario is TOML");
        let violations = validate(DocKind::Scenario, &doc);
        assert!(violations.is_empty(), "{}: {violations:?}", file.display());
        // The schema and the typed model agree: what validates also loads, with a workspace that exists and every
        // pointer resolving in it.
        let scenario = less_runtime::load_scenario(&file, None).unwrap_or_else(|v| panic!("{}: {v}", file.display()));
        assert!(scenario.workspace.is_dir(), "{}: workspace {}", file.display(), scenario.workspace.display());
    }
}

#[test]
fn the_docs_list_every_error_code() {
    let doc = std::fs::read_to_string(root().join("docs/error-codes.md")).expect("docs/error-codes.md");
    for code in ErrorCode::ALL {
        let row = format!("| `{code}` | {} |", code.instruction());
        assert!(doc.contains(&row), "docs/error-codes.md lacks the row:\n{row}");
    }
    // The model providers' codes, as `lessrt errors` lists them.
    for (code, what) in less_agents::provider::LlmError::CODES {
        let row = format!("| `{code}` | {what} |");
        assert!(doc.contains(&row), "docs/error-codes.md lacks the row:\n{row}");
    }
}

#[test]
fn the_architecture_codemap_names_every_module() {
    let codemap = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut files = Vec::new();
    for dir in ["schemas/src", "runtime/src", "agents/src", "eval/src"] {
        files_with_extension(&root().join(dir), "rs", &mut files);
    }
    for file in files {
        let name = file.file_name().and_then(|n| n.to_str()).expect("name");
        if name == "tests.rs" || name == "lib.rs" {
            continue;
        }
        assert!(codemap.contains(name), "ARCHITECTURE.md does not mention {name}");
    }
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    // The second command of the quick start is the test command.
    let quick_start = readme.split("```sh").nth(1).expect("a sh block").split("```").next().expect("closed block");
    let commands: Vec<&str> =
        quick_start.lines().map(|l| l.split('#').next().unwrap_or_default().trim()).filter(|l| !l.is_empty()).collect();
    assert_eq!(commands.len(), 2, "the README opens with two commands: {commands:?}");
    let ci = std::fs::read_to_string(root().join("scripts/ci.sh")).expect("scripts/ci.sh");
    let ci_entry = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    assert!(ci_entry.contains("scripts/ci.sh"), ".ci/run calls scripts/ci.sh");
    for command in commands {
        assert!(ci.lines().any(|l| l.trim() == command), "scripts/ci.sh does not run `{command}`");
    }
}

#[test]
fn every_tracing_target_is_in_the_observability_table() {
    let codemap = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let table = codemap.split("**Observability.**").nth(1).expect("an observability section");
    let mut files = Vec::new();
    for dir in ["schemas/src", "runtime/src", "agents/src", "eval/src", "src"] {
        files_with_extension(&root().join(dir), "rs", &mut files);
    }
    let mut targets = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        for rest in text.split("target: \"").skip(1) {
            let target = rest.split('"').next().expect("a closing quote");
            if target.starts_with("less.") {
                targets.insert(target.to_owned());
            }
        }
    }
    assert!(targets.len() >= 5, "the sources log under less.* targets: {targets:?}");
    for target in targets {
        assert!(table.contains(&format!("`{target}`")), "ARCHITECTURE.md's observability table lacks `{target}`");
    }
}

#[test]
fn the_contract_crate_links_nothing_that_stores_indexes_embeds_or_runs() {
    // Whoever only validates documents or counts tokens depends on `less-contract` alone.
    let manifest: toml::Table =
        std::fs::read_to_string(root().join("schemas/Cargo.toml")).expect("schemas/Cargo.toml").parse().expect("TOML");
    let dependencies = manifest.get("dependencies").and_then(|d| d.as_table()).expect("[dependencies]");
    assert!(dependencies.contains_key("jsonschema") && dependencies.contains_key("tiktoken-rs"), "{dependencies:?}");
    for heavy in
        ["rusqlite", "tantivy", "usearch", "fastembed", "ort", "ractor", "tokio", "less-runtime", "less-agents"]
    {
        assert!(!dependencies.contains_key(heavy), "less-contract depends on {heavy}");
    }
}

#[test]
fn every_ledger_event_is_in_the_observability_section() {
    let codemap = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let section = codemap.split("**Observability.**").nth(1).expect("an observability section");
    let source = std::fs::read_to_string(root().join("runtime/src/run/ledger.rs")).expect("ledger.rs");
    let body = source.split("pub enum Event {").nth(1).expect("enum Event").split("\n}\n").next().expect("its end");
    // A variant is a line of four spaces and a capitalized name (fields are indented further).
    let events: Vec<String> = body
        .lines()
        .filter_map(|line| line.strip_prefix("    "))
        .filter(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|rest| {
            let name: String = rest.chars().take_while(char::is_ascii_alphanumeric).collect();
            let mut snake = String::new();
            for (i, c) in name.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            snake
        })
        .collect();
    assert!(events.len() >= 15 && events.contains(&"grant_issued".to_owned()), "events found: {events:?}");
    for event in events {
        assert!(section.contains(&format!("| `{event}` |")), "ARCHITECTURE.md's ledger event table lacks `{event}`");
    }
}

/// A fuzz filter that matches no target would run nothing and report success (issue 34): the script refuses it
/// before building anything, naming the targets; and every target it lists exists as a `fuzz_*` test.
#[test]
fn the_fuzz_script_refuses_a_filter_that_matches_no_target() {
    let output = std::process::Command::new("bash")
        .args(["scripts/fuzz.sh", "1", "fuzz_no_such_target"])
        .current_dir(root())
        .output()
        .expect("bash runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("no target matches") && err.contains("fuzz::fuzz_compact"), "{err}");

    let script = std::fs::read_to_string(root().join("scripts/fuzz.sh")).expect("fuzz.sh");
    let mut sources = Vec::new();
    files_with_extension(root(), "rs", &mut sources);
    let defined: String = sources.iter().map(|p| std::fs::read_to_string(p).expect("source")).collect();
    let listed: Vec<&str> = script
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.strip_suffix('"'))
        .filter_map(|l| l.rsplit("::").next())
        .filter(|name| name.starts_with("fuzz_"))
        .collect();
    assert!(listed.len() >= 10, "{listed:?}");
    for name in listed {
        assert!(defined.contains(&format!("fn {name}(")), "scripts/fuzz.sh lists {name}, which no test defines");
    }
}

/// The libraries never print: the binary decides what goes to stdout and stderr (the runtime's trace goes through
/// `TraceSink`, diagnostics through `tracing`), so a closed pipe or a redirect is handled in one place. Test code
/// (files named `tests.rs` or under `tests/`, and `#[cfg(test)]` modules at a file's end) may print.
#[test]
fn the_libraries_never_print() {
    let mut files = Vec::new();
    for dir in ["schemas/src", "runtime/src", "agents/src", "eval/src"] {
        files_with_extension(&root().join(dir), "rs", &mut files);
    }
    let mut printing = Vec::new();
    for path in files.iter().filter(|p| p.file_name().is_some_and(|n| n != "tests.rs")) {
        let text = std::fs::read_to_string(path).expect("read");
        let code = text.split("\n#[cfg(test)]\nmod tests").next().unwrap_or_default();
        for (idx, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            if ["println!(", "eprintln!(", "print!(", "eprint!(", "dbg!("].iter().any(|m| line.contains(m)) {
                printing.push(format!("{}:{}: {line}", path.display(), idx + 1));
            }
        }
    }
    assert!(printing.is_empty(), "the libraries print:\n{}", printing.join("\n"));
}

/// Every source file ARCHITECTURE.md names exists (a codemap that names a moved or deleted file is false): a path
/// from the repository root, or the tail of a file's path under a crate, as the codemap names files under a heading
/// that says where (`#### run/`, then `baseline/actors.rs`).
#[test]
fn every_file_the_architecture_names_exists() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut files = Vec::new();
    for dir in ["src", "schemas", "runtime", "agents", "eval", "tests", "benches"] {
        files_with_extension(&root().join(dir), "rs", &mut files);
    }
    let mut missing = Vec::new();
    let mut n_named = 0;
    for quoted in text.split('`').skip(1).step_by(2) {
        let is_path = quoted.len() > 3
            && quoted.ends_with(".rs")
            && quoted.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '-'));
        if !is_path {
            continue;
        }
        n_named += 1;
        if !root().join(quoted).is_file() && !files.iter().any(|f| f.ends_with(quoted)) {
            missing.push(quoted.to_owned());
        }
    }
    assert!(n_named > 50, "the codemap names source files: {n_named}");
    assert!(missing.is_empty(), "ARCHITECTURE.md names files that do not exist: {missing:?}");
}

/// The boundaries ARCHITECTURE.md states that a grep can check: only `scenario.rs` (and `cmd/run.rs`, for the
/// `--cluster` file) parse TOML, the runtime never depends on the agents crate, and only its tests on `less-eval`.
#[test]
fn the_architecture_boundaries_hold() {
    let mut files = Vec::new();
    for dir in ["schemas/src", "runtime/src", "agents/src", "eval/src", "src"] {
        files_with_extension(&root().join(dir), "rs", &mut files);
    }
    let allowed = [root().join("schemas/src/scenario.rs"), root().join("src/cmd/run.rs")];
    let toml: Vec<String> = files
        .iter()
        .filter(|p| !allowed.contains(p))
        .filter(|p| std::fs::read_to_string(p).expect("read").contains("toml::"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(toml.is_empty(), "TOML parsed outside scenario.rs and cmd/run.rs: {toml:?}");
    let manifest = std::fs::read_to_string(root().join("runtime/Cargo.toml")).expect("runtime manifest");
    assert!(!manifest.contains("less-agents"), "the runtime knows no concrete agent");
    let sources: String = files
        .iter()
        .filter(|p| p.starts_with(root().join("runtime/src")))
        .map(|p| std::fs::read_to_string(p).expect("read"))
        .collect();
    assert!(!sources.contains("less_agents::"), "the runtime never names the agents crate");
    // The measurement machinery is not the runtime's: only its tests use `less-eval` (a dev-dependency).
    let (normal, dev) = manifest.split_once("[dev-dependencies]").expect("the runtime has dev-dependencies");
    assert!(!normal.contains("less-eval") && dev.contains("less-eval"), "less-eval is a dev-dependency of the runtime");
    let outside_tests: Vec<String> = files
        .iter()
        .filter(|p| p.starts_with(root().join("runtime/src")) && p.file_name().is_some_and(|n| n != "tests.rs"))
        .filter(|p| std::fs::read_to_string(p).expect("read").contains("less_eval::"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(outside_tests.is_empty(), "the runtime names less-eval outside its tests: {outside_tests:?}");
}

/// One enforcement core serves runs and the desk (issue 35): the desk imports nothing of `run`, and `run` nothing of
/// the desk or the cluster (the cluster adapts the run through `run::remote`'s traits).
#[test]
fn the_run_imports_neither_the_desk_nor_the_cluster() {
    // Code, not comments: a doc comment may name the cluster that adapts the run.
    let read_all = |dir: &str| {
        let mut files = Vec::new();
        files_with_extension(&root().join(dir), "rs", &mut files);
        files.push(root().join(format!("{dir}.rs")));
        files.into_iter().filter(|p| p.is_file()).map(|p| {
            let text = std::fs::read_to_string(&p).expect("read");
            let code: Vec<String> =
                text.lines().filter(|l| !l.trim_start().starts_with("//")).map(str::to_owned).collect();
            (code.join("\n"), p)
        })
    };
    for (code, path) in read_all("runtime/src/desk") {
        assert!(!code.contains("crate::run"), "{} imports the run", path.display());
    }
    for (code, path) in read_all("runtime/src/run") {
        assert!(!code.contains("crate::desk"), "{} imports the desk", path.display());
        assert!(
            !code.contains("crate::cluster"),
            "{} imports the cluster (the cluster adapts the run)",
            path.display()
        );
    }
}

/// The inbox is typed (issue 35): agents, the actor and the tests match on `Received`, and only its renderer
/// (`runtime/src/run/inbox.rs`) knows the JSON shapes inbox items had (`{"dereferenced": …}`, …). Nobody takes those
/// shapes apart again with `.get("…")` or `.pointer("/…")`.
#[test]
fn inbox_items_are_taken_apart_by_type_not_by_json_keys() {
    let mut files = Vec::new();
    for dir in ["src", "schemas", "runtime", "agents", "eval", "tests", "benches"] {
        files_with_extension(&root().join(dir), "rs", &mut files);
    }
    let renderer = root().join("runtime/src/run/inbox.rs");
    let keys = ["verbatim", "dereferenced", "recalled", "recalled_more", "searched", "listed", "described", "spilled"];
    let mut found = Vec::new();
    for path in files.iter().filter(|p| **p != renderer) {
        let text = std::fs::read_to_string(path).expect("read");
        for (idx, line) in text.lines().enumerate() {
            let by_key = keys
                .iter()
                .any(|key| line.contains(&format!(".get(\"{key}\")")) || line.contains(&format!(".pointer(\"/{key}")));
            if by_key {
                found.push(format!("{}:{}: {}", path.display(), idx + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "inbox items taken apart by JSON key outside run/inbox.rs:\n{}", found.join("\n"));
}

/// The README is a front door, not a manual (issue 36): what lessrt is, the two commands, what the main job prints,
/// the main table and where to go next; everything else lives in docs/.
#[test]
fn the_readme_stays_short() {
    let lines = std::fs::read_to_string(root().join("README.md")).expect("README.md").lines().count();
    assert!(lines <= 250, "README.md has {lines} lines; move detail to docs/ (at most 250)");
}

/// ARCHITECTURE.md is a code map, not a manual: constants live in code (issue 36).
#[test]
fn the_architecture_stays_short() {
    let lines = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md").lines().count();
    assert!(lines <= 500, "ARCHITECTURE.md has {lines} lines (at most 500)");
}

/// The anchors of a Markdown text's headings, as GitHub makes them: lowercased, punctuation but `-` and `_` dropped,
/// spaces made `-`, a repeated anchor numbered `-1`, `-2`…; headings inside code blocks are not headings.
fn heading_anchors(text: &str) -> Vec<String> {
    let mut anchors: Vec<String> = Vec::new();
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !in_code) else { continue };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let slug: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let n = counts.entry(slug.clone()).or_default();
        anchors.push(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        *n += 1;
    }
    anchors
}

/// The relative links of a Markdown text (`[text](target)` and `![alt](target)`), outside code blocks and code spans.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Code spans hold examples, not links.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for part in prose.split("](").skip(1) {
            let Some(target) = part.split(')').next() else { continue };
            let target = target.split_whitespace().next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            links.push(target.to_owned());
        }
    }
    links
}

/// Every relative link of the README, ARCHITECTURE.md and docs/ points at a file that exists, and an anchor at a
/// heading it has.
#[test]
fn every_link_of_the_readme_and_the_docs_resolves() {
    let mut pages = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    files_with_extension(&root().join("docs"), "md", &mut pages);
    assert!(pages.len() > 10, "docs/ holds the manual: {pages:?}");
    let mut broken = Vec::new();
    let mut n_links = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("read");
        let dir = page.parent().expect("a directory");
        for link in relative_links(&text) {
            n_links += 1;
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() { page.clone() } else { dir.join(path) };
            let name = page.strip_prefix(root()).unwrap_or(page).display().to_string();
            if !target.exists() {
                broken.push(format!("{name}: {link} (no such file)"));
                continue;
            }
            if !anchor.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let anchors = heading_anchors(&std::fs::read_to_string(&target).expect("read"));
                if !anchors.iter().any(|a| a == anchor) {
                    broken.push(format!("{name}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(n_links > 30, "the pages link to each other: {n_links}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn agent_code_reaches_neither_the_scenario_nor_the_run() {
    // An agent knows its run through its `Seat` (no gold answers, no other agent's packs) and its turn's input; the
    // factory reads the scenario's model settings once, in `AgentsFactory::for_scenario`, and keeps none of it.
    let mut files = Vec::new();
    files_with_extension(&root().join("agents/src"), "rs", &mut files);
    let mut leaks = Vec::new();
    for file in &files {
        let name = file.strip_prefix(root()).unwrap_or(file).display().to_string();
        if name.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let factory_input = name == "agents/src/lib.rs"
                && (code.starts_with("pub fn for_scenario(scenario: &Scenario")
                    || code.starts_with("scenario: &Scenario,")
                    || code.starts_with("use less_runtime::{AgentKind, LlmSpec, Scenario}"));
            for word in ["Scenario", "RunContext", "Gold", ".gold", "ScenarioTask"] {
                let named = code.match_indices(word).any(|(at, _)| {
                    let before = code[..at].chars().last();
                    let after = code[at + word.len()..].chars().next();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                        && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if named && !factory_input {
                    leaks.push(format!("{name}:{}: {word}: {code}", n + 1));
                }
            }
        }
    }
    assert!(leaks.is_empty(), "agent code reaches past its seat:\n{}", leaks.join("\n"));
}
