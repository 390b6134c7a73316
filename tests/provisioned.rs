//! The integration tests that need parts `scripts/test.sh` provisions before it runs them: the embedding model
//! (`scripts/provision-model.sh`), the local LLM server (`scripts/local-llm.sh`), chromium and chromedriver
//! (`scripts/browser.sh`), the Python MCP SDK (`scripts/mcp-clients.sh`) and the OTLP receiver's packages
//! (`scripts/otlp-receiver.sh`). Compiled with the `provisioned-tests`
//! feature only, so a plain `cargo test` on a fresh clone passes with nothing installed; a part that is missing here
//! fails its test, naming the script that installs it. Never skipped.

use std::path::PathBuf;

/// The recorded llm-free bench replayed to its committed bench.json (its searches rerank with the embedding model).
#[path = "provisioned/bench.rs"]
mod bench;
/// A real browser: headless chromium driven over WebDriver through chromedriver.
#[path = "provisioned/browser.rs"]
mod browser;
/// LLM agents against the live local model server: record and replay, the summarizer, `lessrt ask`, llm-free workers.
#[path = "provisioned/llm.rs"]
mod llm;
/// `lessrt mcp` driven by the official Python MCP SDK over stdio and streamable HTTP.
#[path = "provisioned/mcp.rs"]
mod mcp;
/// What needs the embedding model: `lessrt doctor` running it, a run's archive embedded by the first reranked query.
#[path = "provisioned/model.rs"]
mod model;
/// `--otlp`: a run's spans and metrics received by a real OTLP/HTTP receiver.
#[path = "provisioned/otlp.rs"]
mod otlp;
/// The page of `lessrt serve` in a real browser.
#[path = "provisioned/page.rs"]
mod page;
/// Helpers both test binaries share.
#[allow(dead_code, reason = "this binary uses some of the shared helpers; `tests.rs` uses the rest")]
mod support;

/// The python of the venv `name` under the user cache (`$LESSRT_CACHE_DIR`, default `~/.cache/lessrt`), which
/// `scripts/<installer>` makes; a missing one fails the test saying to run it.
fn venv_python(name: &str, installer: &str) -> PathBuf {
    let cache = std::env::var_os("LESSRT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/lessrt"));
    let python = cache.join(name).join("bin/python");
    assert!(
        python.is_file(),
        "{} is not installed: run `bash scripts/{installer}` once (it installs from PyPI into {})",
        python.display(),
        cache.join(name).display()
    );
    python
}
