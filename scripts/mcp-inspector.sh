#!/usr/bin/env bash
# A second real MCP client, for CI: the MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, pinned) lists the
# tools of `lessrt mcp` and calls four of them, in a scratch store and workspace. Installs the inspector into
# $LESSRT_CACHE_DIR/mcp-inspector (idempotent). Usage: scripts/mcp-inspector.sh [LESSRT] (default: lessrt on PATH).
set -euo pipefail
lessrt="${1:-lessrt}"
cache="${LESSRT_CACHE_DIR:-$HOME/.cache/lessrt}"
dir="$cache/mcp-inspector"
version="2.12.0"
inspector="$dir/node_modules/.bin/mcp-inspector"
if [ ! -x "$inspector" ] || ! grep -q "\"version\": \"$version\"" "$dir/node_modules/@modelcontextprotocol/inspector/package.json" 2>/dev/null; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/inspector@$version" >&2
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws"
printf 'fn alpha() {}\n' > "$work/ws/a.rs"
serve=("$lessrt" mcp --store "$work/store" --workspace "$work/ws")

tools="$("$inspector" --cli "${serve[@]}" --method tools/list 2>/dev/null)"
for tool in less_put_engram less_query_engrams less_deref less_request_deref less_issue_grant less_checkpoint \
    less_expand less_expand_query less_impact less_compact less_validate less_ledger_report less_symbol_set \
    less_symbol_resolve less_symbol_list less_capsule_write less_capsule_hydrate less_blackboard_set \
    less_blackboard_get less_blackboard_list less_gate_report less_search less_symbol_fill less_claim \
    less_release_claim less_renew_claim less_claims less_decide less_decisions; do
    grep -q "\"name\": \"$tool\"" <<<"$tools" || { echo "mcp-inspector: $tool is not listed" >&2; exit 1; }
done
deref="$("$inspector" --cli "${serve[@]}" --method tools/call --tool-name less_deref \
    --tool-arg 'pointers=["repo:a.rs#L1-L1"]' 2>/dev/null)"
grep -q '"digest": "blake3:' <<<"$deref" || { echo "mcp-inspector: less_deref answered $deref" >&2; exit 1; }
search="$("$inspector" --cli "${serve[@]}" --method tools/call --tool-name less_search --tool-arg 'query=alpha' 2>/dev/null)"
grep -q '"pointer": "repo:a.rs#L1-L1"' <<<"$search" || { echo "mcp-inspector: less_search answered $search" >&2; exit 1; }
report="$("$inspector" --cli "${serve[@]}" --method tools/call --tool-name less_ledger_report 2>/dev/null)"
grep -q '"tool": "less_deref"' <<<"$report" || { echo "mcp-inspector: the ledger lacks the deref: $report" >&2; exit 1; }
claim="$("$inspector" --cli "${serve[@]}" --method tools/call --tool-name less_claim \
    --tool-arg 'surfaces=["src/**"]' --tool-arg 'task=T-1' 2>/dev/null)"
grep -q '"status": "live"' <<<"$claim" || { echo "mcp-inspector: less_claim answered $claim" >&2; exit 1; }
echo "mcp-inspector: 29 tools listed; less_deref, less_search, less_ledger_report and less_claim answered"
