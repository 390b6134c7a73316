#!/usr/bin/env bash
# Runs every fuzz target of the workspace with CASES generated inputs each (default 1,000,000) and prints how long
# each took. The targets are proptest properties (`fuzz_*` tests in the library crates): stable Rust has no
# coverage-guided fuzzer, so the generators aim near the accepted shapes (mutated examples, attack strings) instead.
# A failure prints the shrunk input, saves it under the crate's proptest-regressions/ (check it in) and exits 1.
#   bash scripts/fuzz.sh            # the full run: 1M inputs per target
#   bash scripts/fuzz.sh 2000       # CI's quick run
#   FUZZ_RELEASE=1 bash scripts/fuzz.sh 1000000 fuzz_compact   # optimized, with overflow checks and debug
#                                   # assertions kept (its own target directory); an optional filter picks targets
set -euo pipefail

cd "$(dirname "$0")/.."

cases="${1:-1000000}"
if ! [[ "$cases" =~ ^[0-9]+$ ]] || [ "$cases" -lt 1 ]; then
  echo "fuzz: CASES must be a positive number of inputs per target, not '$cases'" >&2
  exit 2
fi

filter="${2:-}"

cache="${LESSRT_CACHE_DIR:-$HOME/.cache/lessrt}"
mkdir -p "$cache"
profile=()
if [ "${FUZZ_RELEASE:-0}" = 1 ]; then
  # Ten times faster than a debug build, and still checked: arithmetic overflow and debug_assert! panic as in tests.
  profile=(--release)
  export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target-fuzz}"
else
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
fi
export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0

# crate  test path (exact)
targets=(
  "less-contract fuzz::fuzz_validator_structured"
  "less-contract fuzz::fuzz_validator_raw_text"
  "less-contract fuzz::fuzz_pointer_parse"
  "less-contract fuzz::fuzz_ttl_and_digest"
  "less-contract fuzz::fuzz_scenario_toml"
  "less-runtime fuzz::fuzz_transcript_parse"
  "less-runtime fuzz::fuzz_compact"
  "less-runtime fuzz::fuzz_desk_calls"
  "less-runtime fuzz::fuzz_chunk_nesting"
  "less-agents llm_agent::tests::fuzz::fuzz_model_output_parser"
  "less-agents llm_agent::tests::fuzz::fuzz_model_answers_never_become_other_actions"
)

# A filter that matches nothing would run nothing and pass: refused before the build.
if [ -n "$filter" ]; then
  matched=0
  for target in "${targets[@]}"; do
    [[ "${target#* }" == *"$filter"* ]] && matched=$((matched + 1))
  done
  if [ "$matched" -eq 0 ]; then
    echo "fuzz: no target matches '$filter'; the targets are:" >&2
    printf '  %s\n' "${targets[@]#* }" >&2
    exit 2
  fi
fi

# One build of the three crates' test binaries, then each target runs its binary directly, from its crate's
# directory (where proptest-regressions/ lives): a long run holds no cargo lock, so other builds go on beside it.
echo "== building the fuzz targets"
declare -A binary
while IFS=$'\t' read -r name path; do
  binary[$name]="$path"
done < <(cargo test "${profile[@]}" -p less-contract -p less-runtime -p less-agents --lib --no-run --quiet --message-format=json |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"].replace("_", "-"), m["executable"], sep="\t")')
declare -A dir=([less-contract]=schemas [less-runtime]=runtime [less-agents]=agents)

failed=0
summary=()
for target in "${targets[@]}"; do
  read -r crate test <<<"$target"
  if [ -n "$filter" ] && [[ "$test" != *"$filter"* ]]; then
    continue
  fi
  echo "== $test ($crate): $cases inputs"
  start=$(date +%s)
  if (cd "${dir[$crate]}" && PROPTEST_CASES="$cases" "${binary[$crate]}" --exact "$test" --quiet); then
    verdict=ok
  else
    verdict=FAILED
    failed=$((failed + 1))
  fi
  seconds=$(( $(date +%s) - start ))
  summary+=("$(printf '%-72s %9s inputs %7ss  %s' "$test" "$cases" "$seconds" "$verdict")")
done

echo "== summary"
printf '%s\n' "${summary[@]}"
if [ "$failed" -gt 0 ]; then
  echo "fuzz: $failed of ${#summary[@]} targets failed; their inputs are in proptest-regressions/ (add them to git)" >&2
  exit 1
fi
echo "fuzz: ${#summary[@]} targets, $cases inputs each, no failure"
