#!/usr/bin/env bash
# Installs the real MCP clients the tests of `lessrt mcp` drive (idempotent): the official Python SDK (`mcp` from
# PyPI, pinned) in a virtual environment under $LESSRT_CACHE_DIR (default ~/.cache/lessrt). Prints the venv's python.
set -euo pipefail
cache="${LESSRT_CACHE_DIR:-$HOME/.cache/lessrt}"
venv="$cache/mcp-venv"
version="2.3.0"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$version')" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$version" >&2
fi
echo "$venv/bin/python"
