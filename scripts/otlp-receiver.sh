#!/usr/bin/env bash
# Installs what the OTLP receiver of the telemetry tests needs (idempotent): OpenTelemetry's own protobuf classes
# (`opentelemetry-proto` from PyPI, pinned, with `protobuf`) in a virtual environment under $LESSRT_CACHE_DIR (default
# ~/.cache/lessrt). Prints the venv's python, which runs `scripts/otlp-receiver.py`.
set -euo pipefail
cache="${LESSRT_CACHE_DIR:-$HOME/.cache/lessrt}"
venv="$cache/otlp-venv"
version="1.45.2"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('opentelemetry-proto') != '$version')" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "opentelemetry-proto==$version" >&2
fi
echo "$venv/bin/python"
