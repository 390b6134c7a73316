//! The options every command shares, defined once so they mean the same everywhere: `--json` and `-o/--output`
//! (where the result goes), `--store` (which store), `--project` (which project, and what happens when it is
//! omitted), and the exit codes every `--help` ends with. `--quiet` is global (`main.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// What every `--help` ends with.
pub(crate) const EXIT_CODES: &str = "\
Exit status:
  0  yes: done, valid, found, every check passed
  1  no: a check failed, nothing was found, a document is invalid
  2  could not run: bad arguments, unreadable input or store, missing model or data, refused by the access rules,
     a runtime failure";

/// Where a command's result goes.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct OutputArgs {
    /// Print the result as JSON on standard output, instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the result as JSON to FILE (`-`: standard output, as `--json`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

impl OutputArgs {
    /// Whether standard output carries JSON rather than text.
    pub(crate) fn json(&self) -> bool {
        self.json || self.output.as_deref() == Some(Path::new("-"))
    }

    /// Delivers `value`: JSON on standard output (`--json`) or the text `text` prints; and the JSON document in the
    /// `--output` file.
    pub(crate) fn emit(&self, value: &Value, text: impl FnOnce()) -> anyhow::Result<()> {
        if self.json() {
            super::print_json(value);
        } else {
            text();
        }
        self.write_file(value)
    }

    /// Checks, before any work, that the `--output` file can be written (a long run must not find out at its end):
    /// not a directory, its directory creatable, the file openable for writing. Creates nothing that was not there.
    pub(crate) fn check_writable(&self) -> Result<(), less_runtime::Violation> {
        let Some(path) = self.output.as_deref().filter(|p| *p != Path::new("-")) else { return Ok(()) };
        let unwritable = |why: String| {
            less_runtime::Violation::new(
                less_runtime::ErrorCode::OutputUnwritable,
                "",
                format!("cannot write {}: {why}", path.display()),
            )
        };
        if path.is_dir() {
            return Err(unwritable("it is a directory; name a file".to_owned()));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|err| unwritable(err.to_string()))?;
        }
        let existed = path.exists();
        std::fs::OpenOptions::new().append(true).create(true).open(path).map_err(|err| unwritable(err.to_string()))?;
        if !existed {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }

    /// Writes `value` to the `--output` file, if one was named (pretty-printed, newline-terminated).
    pub(crate) fn write_file(&self, value: &Value) -> anyhow::Result<()> {
        let Some(path) = self.output.as_deref().filter(|p| *p != Path::new("-")) else { return Ok(()) };
        let mut text = serde_json::to_string_pretty(value)?;
        text.push('\n');
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let mut file = std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
        file.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

/// `--store`: the directory of the engram store and the lossless archive.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StoreArgs {
    /// The store directory (engrams, the message archive and their indexes).
    #[arg(long, value_name = "DIR", default_value = ".lessrt")]
    pub(crate) store: PathBuf,
}

impl StoreArgs {
    /// The store for a command that only reads: it must exist (opening would create an empty one and answer
    /// nothing, which looks like a store without matches).
    pub(crate) fn existing(&self) -> Result<&Path, Stop> {
        let dir = self.store.as_path();
        if dir.join(less_runtime::MEMORY_DB).is_file() {
            Ok(dir)
        } else {
            Err(Stop::usage(format!(
                "no store in {}: `lessrt memory put` or `lessrt memory ingest` creates one there, or pass --store DIR",
                dir.display()
            )))
        }
    }
}

/// `--project`: the project a command acts in.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ProjectArgs {
    /// The project to act in (projects never see each other's run and project engrams). When omitted: the store's
    /// only project, said on stderr; with several, the command stops (exit 2) and names them.
    #[arg(long, value_name = "NAME")]
    pub(crate) project: Option<String>,
}

impl ProjectArgs {
    /// The project to act in: the one given, else the only one of `known` (said on stderr unless `quiet`).
    /// An empty store has no project to choose: `empty` says what to do then (`Ok(None)`: the caller decides).
    pub(crate) fn resolve(&self, known: &[String], what: &str, quiet: bool) -> Result<Option<String>, Stop> {
        if let Some(project) = &self.project {
            less_runtime::dag::check_name(project)
                .map_err(|why| Stop::usage(format!("LESS_ARGUMENT_INVALID: --project {why}")))?;
            return Ok(Some(project.clone()));
        }
        match known {
            [] => Ok(None),
            [only] => {
                if !quiet {
                    eprintln!("lessrt: project {only:?} (the only one in this {what}; --project chooses)");
                }
                Ok(Some(only.clone()))
            }
            several => Err(Stop::usage(format!(
                "this {what} holds {} projects ({}): pass --project NAME",
                several.len(),
                several.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// The project a write goes to: the one given, else the store's only one; an empty store needs `--project`.
    pub(crate) fn for_write(&self, known: &[String], what: &str, quiet: bool) -> Result<String, Stop> {
        self.resolve(known, what, quiet)?.ok_or_else(|| {
            Stop::usage(format!("this {what} is empty: pass --project NAME to say which project this belongs to"))
        })
    }
}

/// A command that stops early with an exit code and a message for stderr (exit 1: the answer is no; 2: it could
/// not run).
#[derive(Debug)]
pub(crate) struct Stop {
    /// The exit code.
    pub(crate) code: u8,
    /// What to print on stderr (after `lessrt: `).
    pub(crate) message: String,
}

impl Stop {
    /// Could not run (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Stop {
        Stop { code: 2, message: message.into() }
    }

    /// The answer is no (exit 1).
    pub(crate) fn no(message: impl Into<String>) -> Stop {
        Stop { code: 1, message: message.into() }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Stop {}

/// `n` and the noun, plural unless `n` is 1 (`1 session`, `2 sessions`, `3 summaries`).
pub(crate) fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        return format!("1 {noun}");
    }
    match noun.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{n} {stem}ies"),
        _ => format!("{n} {noun}s"),
    }
}

/// A unix time as RFC 3339 UTC (`2026-11-22T20:03:11Z`), for people; the number itself if it is out of range.
pub(crate) fn rfc3339(at: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| at.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--temperature` reaches every agent's model settings, and a temperature out of range is refused saying why.
    #[test]
    fn the_temperature_flag_sets_every_model_agents_temperature() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            agents: AgentsArgs,
        }
        use clap::Parser as _;
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let toml = std::fs::read_to_string(base.join("audit-tidepool.toml")).expect("the scenario");
        let scenario = || less_runtime::Scenario::from_toml(&toml, &base).expect("valid");
        let cli = Cli::try_parse_from(["lessrt", "--agents", "llm-free", "--temperature", "0.7"]).expect("parses");
        let sampled = cli.agents.apply(scenario());
        assert!(sampled.agents.iter().all(|a| a.llm.as_ref().is_some_and(|l| l.temperature == 0.7)));
        let cli = Cli::try_parse_from(["lessrt", "--agents", "llm-free"]).expect("parses");
        assert!(
            cli.agents.apply(scenario()).agents.iter().all(|a| a.llm.as_ref().is_some_and(|l| l.temperature == 0.0))
        );
        for bad in ["2.5", "-1", "warm"] {
            let arg = format!("--temperature={bad}");
            let err = Cli::try_parse_from(["lessrt", arg.as_str()]).err().expect("refused").to_string();
            assert!(err.contains("is not a temperature: give a number from 0 to 2"), "{err}");
        }
    }

    #[test]
    fn counts_are_singular_only_for_one() {
        assert_eq!(count(0u64, "session"), "0 sessions");
        assert_eq!(count(1u64, "session"), "1 session");
        assert_eq!(count(2u32, "message"), "2 messages");
        assert_eq!(count(3u64, "session summary"), "3 session summaries");
        assert_eq!(count(2u64, "day"), "2 days");
    }

    #[test]
    fn unix_times_read_as_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_767_603_600), "2026-01-05T09:00:00Z");
    }

    #[test]
    fn a_missing_project_is_the_only_one_or_a_usage_error() {
        let none = ProjectArgs::default();
        assert_eq!(none.resolve(&[], "store", true).expect("empty"), None);
        assert_eq!(none.resolve(&["shop".into()], "store", true).expect("one"), Some("shop".into()));
        let err = none.resolve(&["a".into(), "b".into()], "store", true).expect_err("two");
        assert_eq!(err.code, 2);
        assert!(err.message.contains("\"a\", \"b\""), "{}", err.message);
        assert_eq!(none.for_write(&[], "store", true).expect_err("empty").code, 2);
        let given = ProjectArgs { project: Some("x".into()) };
        assert_eq!(given.resolve(&["a".into(), "b".into()], "store", true).expect("given"), Some("x".into()));
    }
}

/// Who decides what the agents do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AgentsChoice {
    /// As each scenario says (`kind = "scripted"` or `"llm"`).
    #[default]
    AsWritten,
    /// Every agent asks its model: parents write briefs and answer deref requests, workers choose what to read and
    /// write their reports; the scenario's steps say only whose turn it is and what for.
    Llm,
    /// Free of the script: every agent asks its model, and the scenario's steps (their packs and answers) are
    /// replaced by the hierarchy's plain delegation of the goal and the questions; each worker's model chooses its
    /// own actions (search, list, read, answer). Nothing the scenario's author packed reaches a model.
    LlmFree,
}

/// `--agents`: the scenario's agents as written, or every one of them backed by a model.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AgentsArgs {
    /// as-written: each agent as its scenario says; llm: every agent asks a model (the settings of the scenario's
    /// first `llm` agent, or the defaults: the local server of scripts/local-llm.sh); llm-free: every agent a model
    /// and no scripted steps or packs: the hierarchy hands the questions down and workers choose their own actions.
    #[arg(long, value_enum, default_value_t = AgentsChoice::AsWritten)]
    pub(crate) agents: AgentsChoice,
    /// Seconds one model request of an `llm` agent may take before it is retried (default: as the scenario says,
    /// else 120). A small model on a CPU reading a verbatim baseline's pasted files needs several minutes.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) model_timeout: Option<u64>,
    /// Sampling temperature of every `llm` agent, from 0 to 2 (default: as the scenario says, else 0). Above 0 a run
    /// samples: record it (`--record`) to replay it, e.g. a second recording beside one at 0 to show the spread.
    #[arg(long, value_name = "T", value_parser = temperature)]
    pub(crate) temperature: Option<f64>,
    /// How many turns may run at once: agents whose steps wait for nothing unfinished (children briefed together)
    /// work concurrently, and what each reads does not depend on which finished first. Default: what the scenario's
    /// models serve at once (`[agents.llm] parallel`), else 1 (the scenario's order).
    #[arg(long, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub(crate) parallel: usize,
    /// With --replay: every replayed exchange takes this many milliseconds, as a hosted model's would, so the run
    /// shows the wall time a user would see (the report's timing).
    #[arg(long, value_name = "MS")]
    pub(crate) replay_latency: Option<u64>,
}

/// A sampling temperature: a number from 0 to 2.
fn temperature(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if (0.0..=2.0).contains(&t) => Ok(t),
        _ => Err(format!("{text:?} is not a temperature: give a number from 0 to 2 (0: reproducible)")),
    }
}

impl AgentsArgs {
    /// `scenario` as these arguments want its agents.
    pub(crate) fn apply(&self, scenario: less_runtime::Scenario) -> less_runtime::Scenario {
        let scenario = match self.agents {
            AgentsChoice::AsWritten => scenario,
            AgentsChoice::Llm => scenario.with_every_agent_llm(),
            AgentsChoice::LlmFree => scenario.delegated(),
        };
        scenario.with_model_settings(self.model_timeout, self.temperature)
    }
}

/// `--inbox-cap`: how much of what was delivered an agent keeps inline.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct InboxArgs {
    /// How many typed messages an agent's inbox keeps inline. Past that, the oldest is replaced by a pointer to it
    /// (`sam:msg:<id>`, in the ledger as a `spilled` event) that the agent reads back with a deref; briefs, grants,
    /// what it read and what it recalled always stay.
    #[arg(long, value_name = "N", default_value_t = less_runtime::run::DEFAULT_INBOX_CAP as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) inbox_cap: u64,
}

impl InboxArgs {
    /// The cap as a count.
    pub(crate) fn cap(&self) -> usize {
        usize::try_from(self.inbox_cap).unwrap_or(usize::MAX)
    }
}

/// `--tls-cert`, `--tls-key`, `--tls-ca`: TLS on the link between a run's head and its nodes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TlsArgs {
    /// This process's certificate (PEM; a node's names its address: an IP address or DNS name in its subject
    /// alternative names). With --tls-key and --tls-ca: the cluster link is TLS, both ends show a certificate.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub(crate) tls_cert: Option<PathBuf>,
    /// This process's private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_ca"])]
    pub(crate) tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): a peer whose certificate it did not sign is refused before the cookie is
    /// checked.
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_key"])]
    pub(crate) tls_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The same flags, for a child process (`lessrt node`); none when TLS was not asked for.
    pub(crate) fn as_args(&self) -> Vec<&std::ffi::OsStr> {
        let (Some(cert), Some(key), Some(ca)) = (&self.tls_cert, &self.tls_key, &self.tls_ca) else {
            return Vec::new();
        };
        let flags = ["--tls-cert", "--tls-key", "--tls-ca"].map(std::ffi::OsStr::new);
        flags.into_iter().zip([cert, key, ca]).flat_map(|(flag, path)| [flag, path.as_os_str()]).collect()
    }

    /// The TLS configuration, if asked for; a file that cannot be read or used is `LESS_ARGUMENT_INVALID` (exit 2).
    pub(crate) fn load(&self) -> Result<Option<less_runtime::cluster::Tls>, Stop> {
        let (Some(cert), Some(key), Some(ca)) = (&self.tls_cert, &self.tls_key, &self.tls_ca) else { return Ok(None) };
        let files = less_runtime::cluster::TlsFiles { cert: cert.clone(), key: key.clone(), ca: ca.clone() };
        less_runtime::cluster::Tls::load(&files)
            .map(Some)
            .map_err(|e| Stop::usage(format!("LESS_ARGUMENT_INVALID: {e}")))
    }
}
