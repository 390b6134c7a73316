#!/usr/bin/env python3
"""How well a served model does lessrt's job: answer a code question as a schema-constrained engram, and choose the
next action (deref / ask_grant / report) under a budget. Standard library only; talks to any OpenAI-compatible
server that honours `response_format: json_schema` (llama.cpp's does).

    python3 scripts/model-eval.py [--base-url URL] [--label NAME] [--json FILE] [--only R1,A2] [--concurrency N]
    python3 scripts/model-eval.py --speed [--base-url URL] [--pid SERVER_PID [--threads 2]]

The questions, gold answers and the pointer catalogue are in scripts/model-eval/cases.json (over
scenarios/fixtures/uc1-refactor); every action case runs twice, with the open schema (A…) and with the schema
narrowed to what the agent may do (N…). Each case runs once at temperature 0 with the prompt cache off, so the
server's timings count every prompt token. Prints one line per case and a summary; --json writes every prompt size, answer,
grade and timing.
"""

import argparse
import concurrent.futures
import json
import re
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "scenarios" / "fixtures" / "uc1-refactor"
CASES = Path(__file__).resolve().parent / "model-eval" / "cases.json"
KINDS = ["fact", "decision", "risk", "todo", "constraint", "diff", "test", "perf", "policy"]
CONFIDENCES = [0.5, 0.7, 0.9]
MAX_TOKENS = 400

SYSTEM = (
    "You are programmer (role programmer) in a hierarchy of agents that exchange engrams: short typed claims, each "
    "citing the pointers (sources) it rests on. Answer with one JSON object. Cite only pointers you were given; never "
    "paste code."
)


def deref(pointer: str) -> str:
    """The content a pointer names in the fixture: a line span, a Markdown section or a whole file."""
    kind, _, rest = pointer.partition(":")
    path, _, frag = rest.partition("#")
    text = (FIXTURE / path).read_text()
    if frag.startswith("L"):
        first, last = (int(n) for n in re.fullmatch(r"L(\d+)-L(\d+)", frag).groups())
        return "\n".join(text.splitlines()[first - 1 : last])
    if frag.startswith("sec="):
        name = frag[4:]
        lines = text.splitlines()
        start = next(i for i, l in enumerate(lines) if re.fullmatch(r"#+ " + re.escape(name), l))
        level = len(lines[start]) - len(lines[start].lstrip("#"))
        end = next(
            (i for i in range(start + 1, len(lines)) if re.match(r"#{1,%d} " % level, lines[i])),
            len(lines),
        )
        return "\n".join(lines[start:end]).strip()
    assert kind in ("repo", "artifact") and not frag, pointer
    return text


def cost(pointer: str) -> int:
    """A dereference's price in tokens, shown in the catalogue (about 3.6 characters a token, rounded to 10)."""
    return max(10, round(len(deref(pointer)) / 36) * 10)


def engram_schema(pointers: list) -> dict:
    return {
        "type": "object",
        "properties": {
            "kind": {"enum": KINDS},
            "claim": {"type": "string", "minLength": 1, "maxLength": 300},
            "pointers": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"enum": pointers}},
            "confidence": {"enum": CONFIDENCES},
        },
        "required": ["kind", "claim", "pointers", "confidence"],
        "additionalProperties": False,
    }


def action_schema(pointers: list, narrowed: dict = None) -> dict:
    """The next-action choice. Open: every action, any catalogue pointer. Narrowed (`narrowed` holds the pointers
    that fit the budget, those that do not, and those read): deref only what fits and was not read, ask_grant only
    for what does not fit, report citing only what was read, and an action without such pointers left out."""
    deref_to, grant_for, cite = (
        (pointers, pointers, pointers) if narrowed is None else (narrowed["fit"], narrowed["over"], narrowed["read"])
    )
    branches = {
        "deref": {
            "type": "object",
            "properties": {
                "action": {"const": "deref"},
                "pointers": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"enum": deref_to}},
            },
            "required": ["action", "pointers"],
            "additionalProperties": False,
        },
        "ask_grant": {
            "type": "object",
            "properties": {
                "action": {"const": "ask_grant"},
                "pointer": {"enum": grant_for},
                "tokens": {"type": "integer", "minimum": 1, "maximum": 20000},
                "reason": {"type": "string", "minLength": 1, "maxLength": 200},
            },
            "required": ["action", "pointer", "tokens", "reason"],
            "additionalProperties": False,
        },
        "report": {
            "type": "object",
            "properties": {"action": {"const": "report"}, "engram": engram_schema(cite)},
            "required": ["action", "engram"],
            "additionalProperties": False,
        },
    }
    allowed = {"deref": deref_to, "ask_grant": grant_for, "report": cite}
    return {"oneOf": [branch for name, branch in branches.items() if allowed[name]]}


def valid(value, schema) -> bool:
    """The subset of JSON Schema the two schemas above use."""
    if "oneOf" in schema:
        return sum(valid(value, s) for s in schema["oneOf"]) == 1
    if "const" in schema:
        return value == schema["const"]
    if "enum" in schema:
        return value in schema["enum"]
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return False
        props = schema.get("properties", {})
        if any(k not in value for k in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and any(k not in props for k in value):
            return False
        return all(valid(v, props[k]) for k, v in value.items() if k in props)
    if kind == "array":
        return (
            isinstance(value, list)
            and schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", 1 << 30)
            and all(valid(v, schema["items"]) for v in value)
        )
    if kind == "string":
        return isinstance(value, str) and schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", 1 << 30)
    if kind == "integer":
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and schema.get("minimum", -(1 << 62)) <= value <= schema.get("maximum", 1 << 62)
        )
    return True


def catalogue_text(catalogue: list, with_cost: bool) -> str:
    lines = []
    for entry in catalogue:
        price = f" (~{cost(entry['pointer'])} tokens)" if with_cost else ""
        lines.append(f"- {entry['pointer']}{price}: {entry['about']}")
    return "\n".join(lines)


def brief(catalogue: list, with_cost: bool) -> str:
    return (
        "# Brief from manager\n"
        "Now: the billing split (docs/PLAN.md) moves invoice totals and payment capture out of "
        "src/orders/pricing.rs into src/billing/ without changing behaviour. Answer the question below for the "
        "review of that split.\n"
        "Constraint: every claim cites the pointers it rests on.\n"
        "Pointers for programmer (pointer, what it holds):\n" + catalogue_text(catalogue, with_cost) + "\n"
    )


def read_text(read: list) -> str:
    return "".join(f"\n# You read {p}\n{deref(p)}\n" for p in read)


def report_request(cases: dict, case: dict) -> tuple:
    question = cases["questions"][case["question"]]
    # The catalogue, and whatever else was read (a long case reads whole files).
    pointers = list(dict.fromkeys([e["pointer"] for e in cases["catalogue"]] + case["read"]))
    user = (
        brief(cases["catalogue"], False)
        + read_text(case["read"])
        + f"\n# Task\nQuestion: {question['question']}\n"
        "Answer with one engram: kind (usually fact), a claim of one or two sentences that answers the question "
        "precisely, the one or two pointers that support it, and your confidence."
    )
    return user, engram_schema(pointers)


def action_request(cases: dict, case: dict) -> tuple:
    question = cases["questions"][case["question"]]
    pointers = [e["pointer"] for e in cases["catalogue"]]
    read = case["read"]
    narrowed = None
    if case.get("narrowed"):
        unread = [p for p in pointers if p not in read]
        narrowed = {
            "fit": [p for p in unread if cost(p) <= case["budget"]],
            "over": [p for p in unread if cost(p) > case["budget"]],
            "read": list(read),
        }
    status = (
        "You have read: " + ", ".join(read) + "." if read else "You have not dereferenced anything yet."
    )
    user = (
        brief(cases["catalogue"], True)
        + read_text(read)
        + f"\n# Task\nQuestion: {question['question']}\n"
        f"{status} Your dereference budget left this turn: {case['budget']} tokens.\n"
        "Choose your next action, one JSON object:\n"
        '- {"action": "deref", "pointers": [...]}: read the pointers you need to answer, if their cost fits your budget;\n'
        '- {"action": "ask_grant", "pointer": ..., "tokens": N, "reason": ...}: ask your parent for a grant when the '
        "pointer you need costs more than your budget left;\n"
        '- {"action": "report", "engram": {kind, claim, pointers, confidence}}: answer, when what you have read is '
        "enough to answer the question."
    )
    return user, action_schema(pointers, narrowed)


def ask(base_url: str, user: str, schema: dict, name: str) -> dict:
    body = {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
        "cache_prompt": False,
        "response_format": {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}},
    }
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=1800) as response:
        answer = json.load(response)
    answer["wall_s"] = time.monotonic() - started
    return answer


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` (Linux), or 0 without one."""
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def speed(base_url: str, cases: dict, pid: int, threads: int) -> dict:
    """One agent turn as a benchmark run has it: a ~1,500-token prompt (the brief, the catalogue and two spans),
    then a 150-token answer, timed by the server; with the server's pid, also the CPU seconds each part took and
    the speed the same work would reach with `threads` idle cores."""
    user = brief(cases["catalogue"], True) + read_text(
        ["repo:src/orders/pricing.rs#L175-L245", "repo:src/orders/service.rs#L134-L170"]
    )
    user += "\n# Task\nSummarize what capture_payment does to the order, in detail."
    out = {}
    for part, body in (
        ("prompt", {"max_tokens": 1, "cache_prompt": True}),
        ("gen", {"max_tokens": 150, "cache_prompt": True, "ignore_eos": True}),
    ):
        payload = {
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
            "temperature": 0,
            **body,
        }
        request = urllib.request.Request(
            base_url.rstrip("/") + "/chat/completions",
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
        )
        cpu = cpu_seconds(pid)
        with urllib.request.urlopen(request, timeout=1800) as response:
            answer = json.load(response)
        cpu = cpu_seconds(pid) - cpu
        t = answer["timings"]
        n, ms = (t["prompt_n"], t["prompt_ms"]) if part == "prompt" else (t["predicted_n"], t["predicted_ms"])
        out[part] = {"tokens": n, "seconds": round(ms / 1000, 1), "per_s": round(n * 1000 / ms, 1)}
        if pid:
            out[part]["cpu_s"] = round(cpu, 1)
            out[part]["idle_per_s"] = round(n / (cpu / threads), 1) if cpu else None
    out["turn_s"] = round(out["prompt"]["seconds"] + out["gen"]["seconds"], 1)
    if pid:
        out["idle_turn_s"] = round(
            out["prompt"]["tokens"] / out["prompt"]["idle_per_s"] + out["gen"]["tokens"] / out["gen"]["idle_per_s"], 1
        )
    out["load_average"] = Path("/proc/loadavg").read_text().split()[:3]
    return out


def grade_claim(question: dict, claim: str) -> bool:
    """Every `must` pattern and no `must_not` one; a claim that asks a question (small models echo the question
    back, which then matches its own words) answers nothing."""
    if "?" in claim:
        return False
    return all(re.search(p, claim, re.I) for p in question["must"]) and not any(
        re.search(p, claim, re.I) for p in question["must_not"]
    )


def run_case(base_url: str, cases: dict, case: dict) -> dict:
    action = case["id"][0] in "AN"
    user, schema = (action_request if action else report_request)(cases, case)
    answer = ask(base_url, user, schema, "action" if action else "engram")
    choice = answer["choices"][0]
    text = choice["message"].get("content") or ""
    timings = answer.get("timings", {})
    result = {
        "id": case["id"],
        "question": case["question"],
        "long": case.get("long", False),
        "finish_reason": choice.get("finish_reason"),
        "answer": text,
        "prompt_tokens": answer.get("usage", {}).get("prompt_tokens"),
        "completion_tokens": answer.get("usage", {}).get("completion_tokens"),
        "prompt_per_s": timings.get("prompt_per_second"),
        "gen_per_s": timings.get("predicted_per_second"),
        "prompt_ms": timings.get("prompt_ms"),
        "gen_ms": timings.get("predicted_ms"),
        "wall_s": round(answer["wall_s"], 2),
    }
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    result["valid_json"] = value is not None and choice.get("finish_reason") == "stop" and valid(value, schema)
    if case.get("narrowed"):
        result["branches"] = [b["properties"]["action"]["const"] for b in schema["oneOf"]]
    question = cases["questions"][case["question"]]
    relevant = set(question["relevant"])
    if not result["valid_json"]:
        result.update(pointers_ok=False, correct=False)
        if action:
            result["action_ok"] = False
        return result
    if action:
        chosen = value["action"]
        result["action"] = chosen
        result["action_ok"] = chosen == case["gold"]
        if chosen == "deref":
            pointers = value["pointers"]
            result["pointers_ok"] = all(p in relevant for p in pointers) and all(
                cost(p) <= case["budget"] for p in pointers
            )
        elif chosen == "ask_grant":
            result["pointers_ok"] = value["pointer"] in relevant and cost(value["pointer"]) > case["budget"]
        else:
            result["pointers_ok"] = all(p in relevant for p in value["engram"]["pointers"])
            result["pointer_hit"] = any(p in relevant for p in value["engram"]["pointers"])
            result["claim"] = value["engram"]["claim"]
        result["correct"] = result["action_ok"] and result["pointers_ok"] and (
            chosen != "report" or grade_claim(question, value["engram"]["claim"])
        )
    else:
        result["claim"] = value["claim"]
        result["pointers_ok"] = all(p in relevant for p in value["pointers"])
        result["pointer_hit"] = any(p in relevant for p in value["pointers"])
        result["correct"] = grade_claim(question, value["claim"])
    return result


def print_result(r: dict) -> None:
    flags = " ".join(
        f"{k}={'y' if r.get(k) else 'n'}"
        for k in ("valid_json", "action_ok", "pointer_hit", "pointers_ok", "correct")
        if k in r
    )
    print(
        f"{r['id']:>4} {r['question']:<18} {flags:<44} prompt {r['prompt_tokens']:>5} tok @ {r['prompt_per_s'] or 0:6.1f}/s"
        f"  gen {r['completion_tokens']:>4} tok @ {r['gen_per_s'] or 0:5.1f}/s  {r['wall_s']:6.1f}s"
        + (f"  action={r.get('action')}" if "action" in r else ""),
        flush=True,
    )
    print(f"      {r.get('claim') or r['answer'][:200]}", flush=True)


def rate(results: list, key: str) -> str:
    n = len(results)
    return f"{sum(1 for r in results if r.get(key)) }/{n}" if n else "n/a"


def mean(values: list) -> float:
    values = [v for v in values if v]
    return sum(values) / len(values) if values else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8437/v1")
    parser.add_argument("--label", default="")
    parser.add_argument("--json", help="write every case's answer, grade and timings here")
    parser.add_argument("--only", help="comma-separated case ids")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight (match the server's slots)")
    parser.add_argument("--speed", action="store_true", help="time one agent turn (1,500-token prompt, 150-token answer)")
    parser.add_argument("--pid", type=int, default=0, help="with --speed: the server's pid, to count its CPU seconds")
    parser.add_argument("--threads", type=int, default=2, help="with --speed --pid: the server's threads")
    args = parser.parse_args()

    cases = json.loads(CASES.read_text())
    if args.speed:
        print(json.dumps(speed(args.base_url, cases, args.pid, args.threads), indent=1))
        return 0
    # Every action case twice: with the open schema (A…) and with the schema narrowed to what the agent may do (N…).
    narrowed = [dict(c, id="N" + c["id"][1:], narrowed=True) for c in cases["action_cases"]]
    todo = cases["report_cases"] + cases["action_cases"] + narrowed
    if args.only:
        wanted = set(args.only.split(","))
        todo = [c for c in todo if c["id"] in wanted]
    started = time.monotonic()
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for r in pool.map(lambda c: run_case(args.base_url, cases, c), todo):
            results.append(r)
            print_result(r)
    wall = time.monotonic() - started
    reports = [r for r in results if r["id"].startswith("R")]
    longs = [r for r in results if r["long"]]
    actions = [r for r in results if r["id"].startswith("A")]
    narrowed = [r for r in results if r["id"].startswith("N")]
    short = [r for r in results if not r["long"]]
    summary = {
        "label": args.label,
        "reports": {
            "valid_json": rate(reports, "valid_json"),
            "pointer_hit": rate(reports, "pointer_hit"),
            "pointers_ok": rate(reports, "pointers_ok"),
            "correct": rate(reports, "correct"),
        },
        "long": {"valid_json": rate(longs, "valid_json"), "correct": rate(longs, "correct")},
        "actions": {
            "valid_json": rate(actions, "valid_json"),
            "action_ok": rate(actions, "action_ok"),
            "pointers_ok": rate(actions, "pointers_ok"),
            "correct": rate(actions, "correct"),
        },
        "actions_narrowed": {
            "valid_json": rate(narrowed, "valid_json"),
            "action_ok": rate(narrowed, "action_ok"),
            "pointers_ok": rate(narrowed, "pointers_ok"),
            "correct": rate(narrowed, "correct"),
        },
        "prompt_per_s": round(mean([r["prompt_per_s"] for r in short]), 1),
        "gen_per_s": round(mean([r["gen_per_s"] for r in short]), 1),
        "long_prompt_per_s": round(mean([r["prompt_per_s"] for r in longs]), 1),
        "long_gen_per_s": round(mean([r["gen_per_s"] for r in longs]), 1),
        "mean_prompt_tokens": round(mean([r["prompt_tokens"] for r in short])),
        "mean_completion_tokens": round(mean([r["completion_tokens"] for r in short])),
        "mean_wall_s": round(mean([r["wall_s"] for r in short]), 1),
        "total_wall_s": round(wall, 1),
        "concurrency": args.concurrency,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
