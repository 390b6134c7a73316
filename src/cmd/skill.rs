//! `lessrt skill export DIR`: LESS packaged as an agent skill, so that a host's model knows the protocol before its
//! first call.
//!
//! The folder holds `SKILL.md` (the Agent Skills convention: YAML front matter with `name` and `description`, then
//! when to use LESS, pointer-first answers, budgets, grants, claims and decisions, with short examples of the
//! tools), `manifest.json` (the MCP server's command line, every tool with its input and output schema files, and
//! every contract schema with its example), `schemas/` (the contract's JSON schemas and each tool's), `examples/`
//! (one valid document per schema) and `mcp.json` (the `mcpServers` entry a host reads). The tools and their
//! schemas are the ones `lessrt mcp` serves, read from its router, so the pack cannot name a tool the server lacks.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};

use less_runtime::{DocKind, SCHEMA_FILES};

use crate::cmd::args::Stop;

/// `lessrt skill`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Write the LESS skill pack (SKILL.md, manifest.json, schemas, examples, mcp.json) into DIR.
    Export(ExportArgs),
}

/// Arguments of `lessrt skill export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The folder to write (created if missing; files of the pack already in it are replaced).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// The store the host's server uses (`lessrt mcp --store`), as the pack's command line names it.
    #[arg(long, value_name = "DIR", default_value = ".lessrt")]
    store: String,
    /// The workspace the host's server resolves pointers in (`lessrt mcp --workspace`).
    #[arg(long, value_name = "DIR", default_value = ".")]
    workspace: String,
}

/// The skill's name (its folder name in a host's skills directory).
pub(crate) const SKILL_NAME: &str = "less";

/// What the front matter says the skill is for: what a host shows its model to decide whether to load it.
const DESCRIPTION: &str = "Token-frugal coordination for agents that share a codebase: answer with small typed \
engrams anchored to pointers instead of pasted context, read sources by budgeted dereference, ask a parent for \
grants, claim files before changing them, and record decisions. Use when several agents (or sessions) work on one \
repository, or when context must stay small.";

/// One contract schema's example, shipped beside it.
fn example_of(kind: DocKind) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        DocKind::Engram => ("engram.json", include_str!("../../schemas/examples/engram.json")),
        DocKind::Pointer => ("pointer.json", include_str!("../../schemas/examples/pointer.json")),
        DocKind::Brief => ("shared_brief_micro.json", include_str!("../../schemas/examples/shared_brief_micro.json")),
        DocKind::Grant => ("grant.json", include_str!("../../schemas/examples/grant.json")),
        DocKind::Deref => ("deref_request.json", include_str!("../../schemas/examples/deref_request.json")),
        DocKind::Budget => ("budget.json", include_str!("../../schemas/examples/budget.json")),
        DocKind::Message => ("message.json", include_str!("../../schemas/examples/message.json")),
        _ => return None,
    })
}

/// The body of SKILL.md after its front matter.
const BODY: &str = r#"# LESS — addressable, minimal, budgeted context

LESS is a protocol for agents that work together. The `lessrt mcp` server (see `mcp.json`) enforces it: it meters
what you read, keeps what you learn, and tells you with a stable `LESS_*` code what to do when it refuses.

## When to use it

- Several agents or sessions work on one repository: share findings as engrams, not as pasted files.
- Your context must stay small: read a narrow span by pointer instead of a whole file.
- You will change files another agent may be changing: claim them first.

## Answer with pointers, not pastes

An **engram** is one claim of at most 500 characters anchored to **pointers** at its sources
(`repo:src/lib.rs#L10-L20`, `artifact:SPEC.md#sec=Budgets`, `test:suite::name`). Store it with
`less_put_engram`; find what others found with `less_query_engrams` before you read anything yourself.

```json
{"engram": {"kind": "fact", "claim": "Retries stop after 3 attempts (MAX_RETRIES).",
            "pointers": ["repo:src/net/retry.rs#L12-L18"]}}
```

## Read by dereference, within your budget

`less_search` finds spans; `less_deref` reads them and returns each with its blake3 digest. Reads are metered per
turn (a turn ends at `less_checkpoint`). Over budget the answer is `LESS_DEREF_DENIED`: ask your parent with
`less_request_deref` (pointers and a reason); a parent answers with `less_issue_grant`, and you present the grant id
with the next `less_deref`.

## Claim before you change

```json
{"surfaces": ["src/net/**"], "task": "T-9: retry with backoff", "ttl_minutes": 30}
```

`less_claim` refuses a claim that overlaps another agent's live claim with `LESS_CLAIM_CONFLICT`, naming the
holder, its task and when it expires: work elsewhere, wait, or — only if you must — claim again with `override` and
your reason; the other claim ends and a conflict record naming both intents goes to the decision log.
`less_claims` lists live claims; `less_renew_claim` keeps yours; `less_release_claim` frees it when you are done.

## Record decisions

`less_decide` appends a one-line title and a body to the project's append-only decision log, attributed to you;
`less_decisions` reads it (with `markdown: true`, as a document for people). Each decision is also a `decision`
engram, so `less_query_engrams` finds past decisions by meaning; its pointer, `sam:decision:<id>`, reads the whole
entry with `less_deref`. Every result names your identity (`project/parent/you`).

## Refusals

A refused call's text starts with its code and says what to send instead, e.g.
`LESS_BUDGET_EXCEEDED` (send fewer engrams, pointers instead of content), `LESS_DEREF_DENIED` (ask for a grant),
`LESS_CLAIM_CONFLICT` (another agent holds the surfaces). Follow the instruction; do not retry unchanged.

## Files of this pack

- `manifest.json`: the server's command line, every tool with its input and output schema, every document schema
  with an example.
- `schemas/`: the LESS document schemas (`*.v0.1.json`) and each tool's (`tools/`).
- `examples/`: one valid document per schema.
- `mcp.json`: the `mcpServers` entry for a host.
"#;

/// The pack's files, path (relative to the pack) → content.
pub(crate) fn files(store: &str, workspace: &str) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let pretty = |value: &Value| {
        serde_json::to_string_pretty(value).map(|mut s| {
            s.push('\n');
            s
        })
    };
    let args = ["mcp", "--store", store, "--workspace", workspace];
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    // The description as a double-quoted scalar: YAML reads a JSON string as one, colons and all.
    let front = format!("---\nname: {SKILL_NAME}\ndescription: {}\n---\n\n", serde_json::to_string(DESCRIPTION)?);
    out.push(("SKILL.md".into(), format!("{front}{BODY}")));
    let mut tools = Vec::new();
    for tool in super::mcp::tools() {
        let name = tool.name.to_string();
        let input = format!("schemas/tools/{name}.input.json");
        out.push((input.clone().into(), pretty(&Value::Object((*tool.input_schema).clone()))?));
        let output = match &tool.output_schema {
            Some(schema) => {
                let file = format!("schemas/tools/{name}.output.json");
                out.push((file.clone().into(), pretty(&Value::Object((**schema).clone()))?));
                Value::String(file)
            }
            None => Value::Null,
        };
        tools.push(json!({
            "name": name,
            "description": tool.description.as_deref().unwrap_or_default(),
            "input_schema": input,
            "output_schema": output,
        }));
    }
    let mut schemas = Vec::new();
    for (file, text) in SCHEMA_FILES {
        out.push((format!("schemas/{file}").into(), text.to_owned()));
        let kind = DocKind::ALL.into_iter().find(|k| k.schema_file() == file);
        let example = kind.and_then(example_of).map(|(name, text)| {
            out.push((format!("examples/{name}").into(), text.to_owned()));
            format!("examples/{name}")
        });
        schemas.push(json!({
            "kind": kind.map(|k| k.as_str()),
            "schema": format!("schemas/{file}"),
            "example": example,
        }));
    }
    let manifest = json!({
        "name": SKILL_NAME,
        "version": env!("CARGO_PKG_VERSION"),
        "description": DESCRIPTION,
        "skill": "SKILL.md",
        "mcp": {"command": "lessrt", "args": args},
        "tools": tools,
        "schemas": schemas,
    });
    out.push(("manifest.json".into(), pretty(&manifest)?));
    out.push(("mcp.json".into(), pretty(&json!({"mcpServers": {"less": {"command": "lessrt", "args": args}}}))?));
    Ok(out)
}

/// Writes the pack into `dir` (followed if it is a link: the user named it) without writing through a link left
/// in it: its subdirectories are made or entered refusing a link, and each file is written whole under a fresh name
/// and renamed into place, so a link in a file's place is replaced, never followed.
fn write_all(dir: &Path, files: &[(PathBuf, String)]) -> anyhow::Result<()> {
    for (rel, text) in files {
        let parent = rel.parent().unwrap_or(Path::new(""));
        let parent = less_runtime::files::create_dirs_under(dir, parent).map_err(|err| {
            Stop::usage(format!("LESS_OUTPUT_UNWRITABLE: cannot create {}: {err}", dir.join(parent).display()))
        })?;
        let path = parent.join(rel.file_name().unwrap_or_default());
        less_runtime::files::write_whole(&path, text.as_bytes())
            .with_context(|| format!("LESS_OUTPUT_UNWRITABLE: cannot write {}", path.display()))?;
    }
    Ok(())
}

/// `lessrt skill`.
pub(crate) fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Export(args) => {
            let files = files(&args.store, &args.workspace)?;
            write_all(&args.dir, &files)?;
            outln!("wrote the {SKILL_NAME} skill ({} files) to {}", files.len(), args.dir.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
