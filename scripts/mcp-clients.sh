#!/usr/bin/env bash
# Installs the real MCP clients the tests of `lessrt mcp` drive (idempotent): the official Python SDK (`mcp` from
# PyPI, pinned) in a virtual environment under $LESSRT_CACHE_DIR (default ~/.cache/lessrt). Prints the venv's python.
set -euo pipefail
exec bash "$(dirname "$0")/venv.sh" mcp-venv mcp 2.3.0
