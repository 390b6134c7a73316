"""Drives `lessrt mcp` over stdio with the official Python MCP SDK, as a host does, and checks what it answers.

Usage: python mcp_client.py LESSRT STORE WORKSPACE CONFIG         (stdio: the script starts the server)
       python mcp_client.py --http URL                             (streamable HTTP: a server already serves URL)
Every tool is called; refusals are checked by their LESS code. Exit 0 and a JSON summary on stdout when all holds.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def structured(result):
    expect(not result.is_error, f"a tool error: {result.content}")
    expect(result.structured_content is not None, "structuredContent is set")
    text = result.content[0].text
    expect(json.loads(text) == result.structured_content, "the text block is the structured content")
    return result.structured_content


def refused(result, code):
    expect(result.is_error, f"expected a refusal {code}, got {result.structured_content}")
    text = result.content[0].text
    expect(text.startswith(code), f"the error text starts with {code}: {text}")
    return text


def transport():
    if sys.argv[1] == "--http":
        return streamable_http_client(sys.argv[2])
    lessrt, store, workspace, config = sys.argv[1:5]
    params = StdioServerParameters(
        command=lessrt, args=["mcp", "--store", store, "--workspace", workspace, "--config", config]
    )
    return stdio_client(params)


async def main():
    summary = {}
    async with transport() as streams:
        read, write = streams[0], streams[1]
        # The host names its client `lead`: calls without `client_identity` are the lead's.
        lead = types.Implementation(name="lead", version="1.0")
        async with ClientSession(read, write, client_info=lead) as client:
            init = await client.initialize()
            expect(init.server_info.name == "lessrt", f"server name {init.server_info.name}")
            await client.send_ping()
            tools = {t.name: t for t in (await client.list_tools()).tools}
            wanted = {
                "less_validate", "less_put_engram", "less_query_engrams", "less_deref", "less_request_deref",
                "less_issue_grant", "less_checkpoint", "less_compact", "less_ledger_report", "less_expand",
                "less_expand_query", "less_impact", "less_symbol_set", "less_symbol_resolve", "less_symbol_list",
                "less_capsule_write", "less_capsule_hydrate", "less_blackboard_set", "less_blackboard_get",
                "less_blackboard_list", "less_gate_report", "less_search", "less_symbol_fill",
                "less_claim", "less_release_claim", "less_renew_claim", "less_claims", "less_decide",
                "less_decisions",
            }
            expect(wanted <= set(tools), f"tools listed: {sorted(tools)}")
            expect(all(tools[t].output_schema for t in wanted), "every tool has an outputSchema")
            # Every argument is spelled out: a schema that constrains something, and a description.
            for name in wanted:
                for field, schema in tools[name].input_schema.get("properties", {}).items():
                    expect(isinstance(schema, dict) and set(schema) - {"description", "title", "default"},
                           f"{name}.{field} has a schema: {schema}")
                    expect(schema.get("description"), f"{name}.{field} is described")
            summary["tools"] = sorted(tools)

            # The validator: a valid pointer, an engram whose claim is too long.
            ok = structured(await client.call_tool("less_validate", {"document": {"type": "repo", "ref": "a.rs"}}))
            expect(ok["valid"] and ok["kind"] == "pointer", ok)
            bad = structured(await client.call_tool("less_validate", {"document": {"claim": "x"}, "kind": "engram"}))
            expect(not bad["valid"] and bad["violations"][0]["code"] == "LESS_SCHEMA_INVALID", bad)

            # Engrams, as the worker `dev`.
            engram = {
                "id": "eg_mcp_1", "kind": "decision", "claim": "Capture moves after pricing; the cache is cleared on capture.",
                "pointers": [{"type": "repo", "ref": "short.rs", "span": "L1-L1"}], "confidence": 0.9, "ttl": "P7D",
                "scope": "project",
                "provenance": {"created_at": "2026-01-01T00:00:00Z", "created_by": "dev", "source": "agent"},
            }
            put = structured(await client.call_tool("less_put_engram", {"engram": engram, "client_identity": "dev"}))
            expect(put["id"] == "eg_mcp_1" and put["outcome"] == "stored", put)
            found = structured(await client.call_tool(
                "less_query_engrams", {"query": "capture pricing cache", "k": 3, "client_identity": "dev"}))
            expect([e["id"] for e in found["engrams"]] == ["eg_mcp_1"], found)
            elsewhere = structured(await client.call_tool(
                "less_query_engrams", {"query": "capture pricing cache", "client_identity": "other"}))
            expect(elsewhere["engrams"] == [], f"a query never crosses projects: {elsewhere}")
            refused(await client.call_tool("less_put_engram", {"engram": {"claim": "no"}, "client_identity": "dev"}),
                    "LESS_SCHEMA_INVALID")
            # As a host's model writes one: no id, no provenance, pointers as text. The desk fills them in.
            bare = {"kind": "fact", "claim": "long.rs numbers its sixty functions f1 to f60.",
                    "pointers": ["repo:long.rs#L1-L3"]}
            put = structured(await client.call_tool("less_put_engram", {"engram": bare, "client_identity": "dev"}))
            expect(put["id"].startswith("eg_") and put["outcome"] == "stored", put)
            found = structured(await client.call_tool(
                "less_query_engrams", {"query": "long.rs numbers its sixty functions", "k": 1, "client_identity": "dev"}))
            stored = found["engrams"][0]
            expect(stored["id"] == put["id"] and stored["provenance"]["created_by"] == "dev", found)
            expect(stored["pointers"] == [{"type": "repo", "ref": "long.rs", "span": "L1-L3"}], stored)
            text = refused(await client.call_tool("less_put_engram", {
                "engram": {**bare, "pointers": ["long.rs#L1-L3"]}, "client_identity": "dev"}), "LESS_POINTER_INVALID")
            expect("/pointers/0" in text, text)

            # A search answers with pointers and previews, which a deref reads; too many hits for the budget are
            # refused, naming the k that fits.
            hits = structured(await client.call_tool("less_search", {"query": "f42", "k": 3, "client_identity": "dev"}))
            expect(hits["hits"][0]["pointer"] == "repo:long.rs#L42-L42", hits)
            expect(hits["hits"][0]["preview"] == "fn f42() -> u32 { 42 }" and "content" not in hits["hits"][0], hits)
            expect(0 < hits["tokens"] < 100, hits)
            many = " ".join(f"f{i}" for i in range(1, 51))
            text = refused(await client.call_tool("less_search", {"query": many, "k": 50, "client_identity": "dev"}),
                           "LESS_BUDGET_EXCEEDED")
            expect("k = " in text, text)

            # Derefs under the budget, a refusal over it, a request, a grant from the parent, the granted deref.
            small = structured(await client.call_tool(
                "less_deref", {"pointers": ["repo:short.rs#L1-L1"], "client_identity": "dev"}))
            expect(small["items"][0]["digest"].startswith("blake3:"), small)
            big = ["repo:long.rs#L1-L40"]
            text = refused(await client.call_tool("less_deref", {"pointers": big, "client_identity": "dev"}),
                           "LESS_DEREF_DENIED")
            expect("less_request_deref" in text, text)
            summary["refusal"] = text
            request = structured(await client.call_tool(
                "less_request_deref", {"pointers": big, "reason": "the whole table", "client_identity": "dev"}))
            waiting = structured(await client.call_tool("less_checkpoint", {}))
            expect([r["request_id"] for r in waiting["requests"]] == [request["request_id"]], waiting)
            refused(await client.call_tool("less_issue_grant", {"to": "lead", "pointers": big, "client_identity": "dev"}),
                    "LESS_GRANT_INVALID")
            grant = structured(await client.call_tool("less_issue_grant", {
                "to": "dev", "pointers": big, "answers": request["request_id"]}))
            granted = structured(await client.call_tool(
                "less_deref", {"pointers": big, "grant_id": grant["grant_id"], "client_identity": "dev"}))
            expect(granted["items"][0]["tokens"] > 40, granted)
            refused(await client.call_tool(
                "less_deref", {"pointers": big, "grant_id": grant["grant_id"], "client_identity": "dev"}),
                "LESS_GRANT_INVALID")
            refused(await client.call_tool(
                "less_deref", {"pointers": ["repo:../outside.rs#L1-L2"], "client_identity": "dev"}),
                "LESS_POINTER_")

            # The lossless memory (the test archived a session and built its summary before starting the server).
            answer = structured(await client.call_tool(
                "less_expand_query", {"question": "which port does the staging proxy use", "client_identity": "dev"}))
            cited = answer["result"]["citations"]
            expect(cited and all(c["project"] == "demo" for c in cited), answer)
            expect(any("8443" in c.get("text", "") for c in cited) or "8443" in answer["result"]["text"], answer)
            node = answer["result"]["nodes"][0] if answer["result"]["nodes"] else cited[0]["message"].split(":")[-1]
            expanded = structured(await client.call_tool("less_expand", {"id": node, "client_identity": "dev"}))
            expect(expanded["result"]["target"]["project"] == "demo", expanded)
            refused(await client.call_tool("less_expand", {"id": node, "client_identity": "other"}),
                    "LESS_POINTER_UNRESOLVED")
            impact = structured(await client.call_tool(
                "less_impact", {"pointer": "repo:short.rs", "client_identity": "dev"}))
            expect(any(i["id"] == "eg_mcp_1" for i in impact["result"]["items"]), impact)

            # The symbol table, both ways.
            structured(await client.call_tool("less_symbol_set", {"id": "F12", "value": "src/matching/engine.ts"}))
            forward = structured(await client.call_tool("less_symbol_resolve", {"id": "F12"}))
            expect(forward["symbols"] == [{"id": "F12", "value": "src/matching/engine.ts"}], forward)
            back = structured(await client.call_tool("less_symbol_resolve", {"value": "src/matching/engine.ts"}))
            expect([s["id"] for s in back["symbols"]] == ["F12"], back)
            expect(len(structured(await client.call_tool("less_symbol_list", {}))["symbols"]) == 1, "one symbol")
            refused(await client.call_tool("less_symbol_resolve", {"id": "F12", "client_identity": "other"}),
                    "LESS_POINTER_UNRESOLVED")
            # Filled from the workspace index: new files get the next F ids, in path order; a second fill keeps them.
            rust = structured(await client.call_tool("less_symbol_fill", {"pattern": "*.rs"}))
            expect(rust["added"] == [{"id": "F13", "value": "long.rs"}, {"id": "F14", "value": "short.rs"}], rust)
            again = structured(await client.call_tool("less_symbol_fill", {}))
            expect(again["added"] == [{"id": "F15", "value": "report.txt"}] and again["kept"] == 2, again)
            back = structured(await client.call_tool("less_symbol_resolve", {"value": "short.rs"}))
            expect([s["id"] for s in back["symbols"]] == ["F14"], back)
            refused(await client.call_tool("less_symbol_fill", {"pattern": "../**"}), "LESS_")

            # Capsules: the cap, and hydration of the dependency closure only.
            structured(await client.call_tool("less_capsule_write", {"id": "w1", "what": "added LOB engine",
                                                                      "where": "F12", "gotcha": "seed must be fixed"}))
            structured(await client.call_tool("less_capsule_write", {"id": "w2", "what": "added book diff",
                                                                      "where": "F13", "depends": ["w1"]}))
            structured(await client.call_tool("less_capsule_write", {"id": "w3", "what": "unrelated docs"}))
            hydrated = structured(await client.call_tool("less_capsule_hydrate", {"ids": ["w2"]}))
            expect([c["id"] for c in hydrated["capsules"]] == ["w1", "w2"], hydrated)
            text = refused(await client.call_tool("less_capsule_write", {"id": "w4", "what": "x\n" * 11}),
                           "LESS_ARGUMENT_INVALID")
            expect("at most 10 lines" in text, text)

            # The blackboard.
            structured(await client.call_tool("less_blackboard_set", {"key": "dev_port", "value": "5173"}))
            second = structured(await client.call_tool("less_blackboard_set", {"key": "dev_port", "value": "5174"}))
            expect(second["entries"][0]["superseded"] == "5173", second)
            got = structured(await client.call_tool("less_blackboard_get", {"key": "dev_port"}))
            expect(got["entries"][0]["value"] == "5174", got)
            listed = structured(await client.call_tool("less_blackboard_list", {}))
            expect([e["key"] for e in listed["entries"]] == ["dev_port"], listed)

            # The gate adapter: a reference to the report, never its text.
            gate = structured(await client.call_tool("less_gate_report", {"gate_id": "tests", "report": "report.txt"}))
            expect(gate["message"]["type"] == "gate_report" and gate["message"]["status"] == "pass", gate)
            expect(gate["message"]["report_ref"].startswith("artifact:report.txt"), gate)
            expect("PLANTED" not in json.dumps(gate), "the report's body never travels")
            expect(gate["report_tokens"] > gate["tokens"], gate)

            # The coordination ledger: the lead's claim blocks dev's overlapping one; every result names its caller.
            claim = structured(await client.call_tool("less_claim", {"surfaces": ["src/**"], "task": "T-1"}))
            expect(claim["identity"] == "demo/lead" and claim["claim"]["status"] == "live", claim)
            text = refused(await client.call_tool("less_claim", {"surfaces": ["src/a.rs"], "task": "T-2",
                                                                 "client_identity": "dev"}), "LESS_CLAIM_CONFLICT")
            expect("demo/lead" in text and "T-1" in text, text)
            renewed = structured(await client.call_tool("less_renew_claim", {"claim_id": claim["claim"]["claim_id"],
                                                                             "ttl_minutes": 60}))
            expect(renewed["claim"]["expires_at"] > claim["claim"]["expires_at"], renewed)
            live = structured(await client.call_tool("less_claims", {}))
            expect(len(live["claims"]) == 1, live)
            released = structured(await client.call_tool("less_release_claim",
                                                         {"claim_id": claim["claim"]["claim_id"]}))
            expect(released["claim"]["status"] == "released", released)
            mine = structured(await client.call_tool("less_claim", {"surfaces": ["src/a.rs"], "task": "T-2",
                                                                    "client_identity": "dev"}))
            expect(mine["identity"] == "demo/lead/dev", mine)
            decided = structured(await client.call_tool("less_decide", {"title": "Ship T-2", "body": "Tests pass."}))
            log = structured(await client.call_tool("less_decisions", {"markdown": True}))
            expect(log["decisions"][-1]["decision_id"] == decided["decision"]["decision_id"], log)
            expect("Ship T-2" in log["markdown"], log["markdown"])
            # The decision is a decision engram too; its pointer reads the whole entry back.
            engram = decided["engram_id"]
            recalled = structured(await client.call_tool(
                "less_query_engrams", {"query": "ship T-2", "kind": "decision", "k": 5}))
            hit = [e for e in recalled["engrams"] if e["id"] == engram]
            expect(hit and hit[0]["claim"] == "Ship T-2", recalled)
            pointer = f"sam:decision:{decided['decision']['decision_id']}"
            read = structured(await client.call_tool("less_deref", {"pointers": [pointer]}))
            expect("Tests pass." in read["items"][0]["content"], read)

            # A second host on the same store (over stdio its own server process; over HTTP a second session),
            # named `dev` by its client info: the lead's live claim blocks its overlapping one, naming the holder.
            async with transport() as streams2:
                dev = types.Implementation(name="dev", version="1.0")
                async with ClientSession(streams2[0], streams2[1], client_info=dev) as other:
                    await other.initialize()
                    held = structured(await client.call_tool("less_claim", {"surfaces": ["docs/**"], "task": "T-5"}))
                    text = refused(await other.call_tool("less_claim", {"surfaces": ["docs/api.md"], "task": "T-6"}),
                                   "LESS_CLAIM_CONFLICT")
                    expect("demo/lead" in text and "T-5" in text and held["claim"]["claim_id"] in text, text)
                    disjoint = structured(await other.call_tool("less_claim", {"surfaces": ["tests/**"], "task": "T-7"}))
                    expect(disjoint["identity"] == "demo/lead/dev" and disjoint["claim"]["status"] == "live", disjoint)
                    seen = structured(await other.call_tool("less_claims", {}))
                    expect({"T-5", "T-7"} <= {c["task"] for c in seen["claims"]}, seen)
                    expect(seen["identity"] == "demo/lead/dev", seen)

            # The context ledger.
            chat = [{"role": "user", "content": f"Note {i}: the deploy target is host-{i}."} for i in range(40)]
            compacted = structured(await client.call_tool("less_compact", {"messages": chat, "hot_tail": 4}))
            expect(compacted["stats"]["messages_in"] == 40, compacted["stats"])

            # The ledger saw every call, per client and tool, with the deref baseline.
            report = structured(await client.call_tool("less_ledger_report", {"role": "dev"}))
            derefs = [r for r in report["rows"] if r["tool"] == "less_deref"]
            expect(derefs and derefs[0]["calls"] == 5 and derefs[0]["refused"] == 3, report)
            expect(derefs[0]["baseline_tokens"] >= derefs[0]["tokens_out"], report)
            summary["ledger"] = report
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
