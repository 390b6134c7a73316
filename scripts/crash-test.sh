#!/usr/bin/env bash
# Crash-safety harness: `bash scripts/crash-test.sh N` kills lessrt with SIGKILL N times at random moments (memory
# put, memory ingest, dag build, lessrt run, and with the embedding model memory query and reindex) and checks after
# each kill that every acknowledged write is there, that SQLite is intact and that the recall indexes answer as a
# store that was never killed. Its last line: `N kills, K acknowledged writes, L lost`; exit 1 if anything was lost or
# a check failed. See scripts/README.md.
#
# The binary: $LESSRT, else `lessrt` on the PATH, else the release build in $CARGO_TARGET_DIR (or target/).
# CRASH_SEED makes the draws (commands, sizes, kill delays) repeatable; CRASH_WORKDIR keeps the stores for a look.
set -euo pipefail

cd "$(dirname "$0")/.."
n="${1:-100}"
lessrt="${LESSRT:-}"
if [ -z "$lessrt" ]; then
  if command -v lessrt >/dev/null 2>&1; then
    lessrt="$(command -v lessrt)"
  else
    lessrt="${CARGO_TARGET_DIR:-target}/release/lessrt"
  fi
fi
if [ ! -x "$lessrt" ]; then
  echo "crash-test: no lessrt at $lessrt (cargo build --release, or set LESSRT)" >&2
  exit 2
fi
args=("$n" --lessrt "$lessrt")
[ -n "${CRASH_SEED:-}" ] && args+=(--seed "$CRASH_SEED")
[ -n "${CRASH_WORKDIR:-}" ] && args+=(--workdir "$CRASH_WORKDIR")
# Without the embedding model (lessrt doctor fails), the rounds that embed are left out.
if ! "$lessrt" doctor >/dev/null 2>&1; then
  args+=(--no-model)
fi
exec python3 scripts/crash-test.py "${args[@]}"
