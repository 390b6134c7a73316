#!/usr/bin/env bash
# Usage: venv.sh NAME PACKAGE VERSION — a Python virtual environment $LESSRT_CACHE_DIR/NAME (default cache
# ~/.cache/lessrt) holding PACKAGE==VERSION from PyPI, made or brought to that version if needed (idempotent). Prints
# the venv's python. What `mcp-clients.sh` and `otlp-receiver.sh` install with.
set -euo pipefail
name="$1" package="$2" version="$3"
cache="${LESSRT_CACHE_DIR:-$HOME/.cache/lessrt}"
venv="$cache/$name"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$package') != '$version')" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$package==$version" >&2
fi
echo "$venv/bin/python"
