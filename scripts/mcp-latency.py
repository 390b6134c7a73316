"""Measures the latency of `lessrt mcp` tool calls as a host sees them (the official Python MCP SDK over stdio).

Usage: python scripts/mcp-latency.py LESSRT [N]   (the python of `bash scripts/mcp-clients.sh`; N calls per tool,
default 200). Works in a scratch store and workspace; prints a Markdown table of p50 and p95 per tool, in ms.
"""

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

CONFIG = """project = "demo"
[clients.lead]
role = "lead"
[clients.dev]
role = "dev"
parent = "lead"
[clients.dev.budget]
max_deref_tokens_total = 100000
max_repo_spans = 100000
"""


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def main():
    lessrt = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ws").mkdir()
        (root / "ws" / "lib.rs").write_text("".join(f"fn f{i}() -> u32 {{ {i} }}\n" for i in range(1, 201)))
        (root / "desk.toml").write_text(CONFIG)
        params = StdioServerParameters(command=lessrt, args=[
            "mcp", "--store", str(root / "store"), "--workspace", str(root / "ws"), "--config", str(root / "desk.toml")])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, client_info=types.Implementation(name="dev", version="1")) as client:
                await client.initialize()
                calls = {
                    "less_validate": lambda i: {"document": {"type": "repo", "ref": f"src/f{i}.rs", "span": "L1-L9"}},
                    "less_put_engram": lambda i: {"engram": {
                        "id": f"eg_lat_{i}", "kind": "fact", "claim": f"Function f{i} returns {i}; callers rely on it.",
                        "pointers": [{"type": "repo", "ref": "lib.rs", "span": f"L{i % 200 + 1}-L{i % 200 + 1}"}],
                        "confidence": 0.8, "ttl": "P7D", "scope": "project",
                        "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "dev", "source": "agent"}},
                        # Writers take turns: one writer may put 60 engrams a minute (LESS_RATE_LIMITED past that).
                        "client_identity": f"writer{i % 8}"},
                    "less_query_engrams": lambda i: {"query": f"what does f{i % 50} return", "k": 5},
                    "less_deref": lambda i: {"pointers": [f"repo:lib.rs#L{i % 190 + 1}-L{i % 190 + 10}"]},
                    "less_checkpoint": lambda i: {},
                    "less_compact": lambda i: {"messages": [
                        {"role": "user", "content": f"Note {j}: the deploy target of step {i} is host-{j}."}
                        for j in range(30)]},
                }
                rows = []
                for tool, args in calls.items():
                    samples = []
                    for i in range(n):
                        start = time.perf_counter()
                        result = await client.call_tool(tool, args(i))
                        samples.append((time.perf_counter() - start) * 1000)
                        if result.is_error:
                            raise SystemExit(f"{tool} failed: {result.content[0].text}")
                    rows.append((tool, statistics.median(samples), percentile(samples, 95)))
    print(f"| tool | p50 ms | p95 ms |  ({n} calls each)")
    print("|---|---|---|")
    for tool, p50, p95 in rows:
        print(f"| `{tool}` | {p50:.2f} | {p95:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
