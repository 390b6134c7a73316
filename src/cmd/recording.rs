//! `lessrt recording seal|verify DIR`: a recording's `manifest.json` (`less_agents::record::manifest`). `verify`
//! checks a recording as a replay does before anything runs (exit 0, or 2 with the code: `LLM_REPLAY_TAMPERED`
//! naming the file and what differs, `LLM_RECORDING_UNSEALED`); `seal` writes the manifest of a recording made
//! before recordings were sealed, after checking that its files name one model, and never over a manifest the
//! recording no longer matches.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use less_agents::provider::LlmError;
use less_agents::record::manifest::{self, Manifest, SealOptions};

/// Sub-commands of `lessrt recording`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Write manifest.json for a recording made before recordings were sealed (or seal one again that still
    /// verifies): the blake3 of run.json and of every exchange, and the model that answered. Exit 0 when sealed, 2
    /// when the recording names no one model, a hash given is not the server's, or it no longer matches its manifest.
    Seal {
        /// The recording directory (`--record DIR`, or `--record ROOT` of a bench: ROOT/<scenario>).
        dir: PathBuf,
        /// The model file (GGUF) that answered: its sha256 is computed here and sealed; it must be the one the server
        /// named when the recording was made.
        #[arg(long, value_name = "GGUF", conflicts_with = "model_sha256")]
        model_file: Option<PathBuf>,
        /// The model file's sha256 when the file is not at hand, as a checksum list names it (say which with
        /// --sha256-from); it must be the one the server named.
        #[arg(long, value_name = "HEX", requires = "sha256_from")]
        model_sha256: Option<String>,
        /// Where --model-sha256 comes from, kept in the manifest (e.g. scripts/local-llm.sh).
        #[arg(long, value_name = "SOURCE", requires = "model_sha256")]
        sha256_from: Option<String>,
        /// A note on the model's identity, kept in the manifest.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Check a recording against its manifest.json, as `--replay` does before anything runs: every file listed is
    /// there with the bytes sealed, every exchange is listed, every exchange names the manifest's model. Exit 0 if
    /// it verifies, 2 (with the code) if not.
    Verify {
        /// The recording directory.
        dir: PathBuf,
    },
}

pub(crate) fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Seal { dir, model_file, model_sha256, sha256_from, note } => {
            let (file_sha256, file_sha256_from) = match (model_file, model_sha256) {
                (Some(file), _) => (Some(file_sha256(file)?), Some(format!("sha256 of {}", file.display()))),
                (None, Some(hex)) => (Some(hex.clone()), sha256_from.clone()),
                (None, None) => (None, None),
            };
            let options = SealOptions { file_sha256, file_sha256_from, note: note.clone() };
            let sealed = manifest::seal(dir, &options).map_err(coded)?;
            outln!("{}: sealed {}", dir.display(), describe(dir, &sealed)?);
        }
        Command::Verify { dir } => {
            let sealed = manifest::verify(dir).map_err(coded)?;
            outln!("{}: verified {}", dir.display(), describe(dir, &sealed)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A recording's failure as printed: its code first.
fn coded(err: LlmError) -> anyhow::Error {
    anyhow::anyhow!("{}: {err}", err.code())
}

/// `N files, model M (file sha256 …), manifest blake3:…`: what a manifest seals, in a line.
fn describe(dir: &Path, sealed: &Manifest) -> anyhow::Result<String> {
    let model = match &sealed.model {
        Some(model) => {
            let name = model.identity.served.as_deref().unwrap_or(&model.identity.name);
            match &model.file_sha256 {
                Some(sha) => format!("model {name} (file sha256 {sha})"),
                None => format!("model {name}"),
            }
        }
        None => "no model".to_owned(),
    };
    let digest = manifest::manifest_digest(dir).map_err(coded)?;
    Ok(format!("{} files, {model}, manifest {digest}", sealed.files.len()))
}

/// The sha256 of `path`, in hex, read in blocks (a model file is a gigabyte).
fn file_sha256(path: &Path) -> anyhow::Result<String> {
    use sha2::Digest as _;
    let unreadable = || format!("LESS_INPUT_UNREADABLE: cannot read the model file {}", path.display());
    let mut file = std::fs::File::open(path).with_context(unreadable)?;
    let mut hasher = sha2::Sha256::new();
    let mut block = vec![0; 1 << 20];
    loop {
        let n = file.read(&mut block).with_context(unreadable)?;
        if n == 0 {
            break;
        }
        hasher.update(&block[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
