#!/usr/bin/env python3
"""Crash-safety harness: kills `lessrt` with SIGKILL at random moments and checks what survives.

Usage: crash-test.py N --lessrt PATH [--seed S] [--workdir DIR] [--keep] [--model-every M] [--no-model]

Each round starts one `lessrt` command on a shared store (or a run into its own directory) and, most of the time,
kills it with SIGKILL after a random delay drawn from the seed (between 0 and the longest time that command has taken
so far). Commands: `memory put` of one engram (a file), of many (JSONL streamed on standard input, or a JSON array
file), `memory ingest` of a transcript, `dag build`, `lessrt run` of a shipped scenario with `--out`, and, with the
embedding model, `memory query` (which embeds what was stored since the last one) and `memory reindex`. A command
that finishes before its kill is kept as an acknowledgement and the round is drawn again; N counts kills.

An acknowledged write is one the command reported: an engram whose `stored` line was printed (each is printed after
its commit), every message of an ingest that exited 0, every DAG node present after a build that exited 0, a run that
exited 0 or 1 (its report printed). After every round the store is reopened by `lessrt` and checked:

1. every acknowledged write is present and identical (engrams and messages read back from SQLite and, for a sample,
   through `lessrt memory get` / `lessrt dag expand`; DAG nodes by id and content; runs through `lessrt runs show`);
2. `PRAGMA integrity_check` is ok on every SQLite file (after `lessrt` reopened it);
3. the recall indexes answer as those of a reference store that was never killed: the reference receives every
   engram and every session the killed store committed (acknowledged or not: SQLite is the truth), and the id sets
   of `memory query --json --k 1000` (hash recall; with the model too every M rounds and at the end) and of the
   message index must be equal;
4. a run directory left by a killed run is reported by `lessrt runs show` as incomplete (exit 2), never as a run,
   unless its report was completely written before the kill.

The last line is `N kills, K acknowledged writes, L lost`; the exit status is 1 when anything was lost or a check
failed.
"""

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EXAMPLE = json.loads((REPO / "schemas/examples/engram.json").read_text())
SCENARIOS = ["uc1-refactor", "uc2-contradictions", "uc3-review", "uc4-shared-knowledge"]
PROJECTS = ["harbor", "lantern"]
WORDS = [
    "billing", "ledger", "gateway", "invoice", "refund", "canary", "rollout", "schema", "migration", "cache",
    "quota", "tenant", "webhook", "retry", "backoff", "latency", "replica", "shard", "vacuum", "index",
    "token", "session", "cursor", "batch", "stream", "queue", "lease", "fence", "snapshot", "checkpoint",
    "compactor", "tombstone", "bloom", "manifest", "journal", "barrier", "epoch", "quorum", "gossip", "beacon",
]
VERBS = ["owns", "blocks", "retries", "feeds", "guards", "splits", "drains", "pins", "throttles", "mirrors"]
# Rare words, each in a few percent of engrams and messages: a question's matches stay well under `--k 1000`, so the
# whole answer is compared, never a cut whose edge depends on how ties fall.
MARKERS = ["zircon", "basalt", "obsidian", "feldspar", "gneiss", "pumice"]
QUERIES = MARKERS
MAX_K = 1000
HASH_ONLY = dict(os.environ, LESSRT_MODEL_DIR="/nonexistent/lessrt-model")
HUNG = 300.0  # seconds: a command still running by then counts as hung (a failed check)


class Outcome:
    def __init__(self, code, stdout, stderr, seconds):
        self.code, self.stdout, self.stderr, self.seconds = code, stdout, stderr, seconds

    @property
    def killed(self):
        return self.code == -signal.SIGKILL

    def lines(self):
        """Whole lines printed (a line cut by the kill is not an acknowledgement)."""
        text = self.stdout.decode("utf-8", "replace")
        return text.split("\n")[:-1]


class Harness:
    def __init__(self, args):
        self.args = args
        self.lessrt = args.lessrt
        self.rng = random.Random(args.seed)
        self.work = Path(args.workdir)
        self.store = self.work / "store"
        self.ref = self.work / "reference"
        self.runs = self.work / "runs"
        self.model = not args.no_model
        self.kills = 0
        self.kills_by = {}
        self.finished = 0
        self.failures = []
        self.lost = []
        self.engrams = {}  # (project, id) -> document acknowledged
        self.messages = {}  # message id -> (project, session, role, name, at, content) acknowledged
        self.nodes = {}  # DAG node id -> content present after a build that exited 0
        self.acked_runs = []  # (scenario dir, exit code, report printed)
        self.ref_engrams = set()
        self.ref_sessions = set()
        self.seq = 0
        self.round = 0
        self.longest = {}
        self.killed_run_dirs = []
        self.truncated = 0

    # -- running lessrt -------------------------------------------------------------------------------------------

    def start(self, args, stdin=None, env=None, kill_after=None):
        """Runs lessrt; kills it with SIGKILL after `kill_after` seconds if it is still running."""
        began = time.monotonic()
        proc = subprocess.Popen(
            [self.lessrt, *args],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env or os.environ,
        )
        out, err = [], []

        def drain(pipe, into):
            for chunk in iter(lambda: pipe.read(65536), b""):
                into.append(chunk)

        def feed():
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass

        threads = [threading.Thread(target=drain, args=(proc.stdout, out)), threading.Thread(target=drain, args=(proc.stderr, err))]
        if stdin is not None:
            threads.append(threading.Thread(target=feed))
        for t in threads:
            t.daemon = True
            t.start()
        try:
            proc.wait(timeout=kill_after if kill_after is not None else HUNG)
        except subprocess.TimeoutExpired:
            if kill_after is None:
                proc.kill()
                proc.wait()
                self.fail(f"lessrt {' '.join(args[:3])} hung for {HUNG:.0f} s")
            else:
                proc.send_signal(signal.SIGKILL)
                try:
                    proc.wait(timeout=HUNG)
                except subprocess.TimeoutExpired:
                    self.fail("a killed lessrt did not exit")
        for t in threads:
            t.join(timeout=30)
        return Outcome(proc.returncode, b"".join(out), b"".join(err), time.monotonic() - began)

    def check(self, args, env=HASH_ONLY, ok=(0,)):
        """A verification command: its exit code must be in `ok`."""
        outcome = self.start(args, env=env)
        if outcome.code not in ok:
            self.fail(f"`lessrt {' '.join(args)}` exited {outcome.code}: {outcome.stderr.decode('utf-8', 'replace').strip()[-600:]}")
        return outcome

    def fail(self, message):
        self.failures.append(f"round {self.round}: {message}")
        print(f"  FAILED: {message}", flush=True)

    def lose(self, message):
        self.lost.append(f"round {self.round}: {message}")
        print(f"  LOST: {message}", flush=True)

    # -- generated content ----------------------------------------------------------------------------------------

    def engram(self):
        self.seq += 1
        words = self.rng.sample(WORDS, 3)
        doc = json.loads(json.dumps(EXAMPLE))
        doc["id"] = f"eg_crash_{self.args.seed}_{self.seq}"
        doc["claim"] = (
            f"The {words[0]} service {self.rng.choice(VERBS)} the {words[1]} path while the {words[2]} job runs "
            f"(note {self.seq})."
        )
        if self.rng.random() < 0.15:
            doc["claim"] += f" Stored beside the {self.rng.choice(MARKERS)} archive."
        doc["hash_keys"] = words[:2]
        doc["tags"] = [words[2]]
        doc["ttl"] = "P30D"
        doc["kind"] = self.rng.choice(["decision", "fact", "constraint"])
        doc["confidence"] = round(self.rng.uniform(0.5, 0.99), 2)
        return doc

    def transcript(self, session, n):
        messages = []
        base = 1_760_000_000 + self.round * 10_000
        for turn in range(n):
            words = self.rng.sample(WORDS, 4)
            text = (
                f"[{session} turn {turn}] The {words[0]} {self.rng.choice(VERBS)} the {words[1]}; "
                f"we decided the {words[2]} must not touch the {words[3]}."
            )
            if self.rng.random() < 0.03:
                text += f" Filed under {self.rng.choice(MARKERS)}."
            if self.rng.random() < 0.05:
                text += " " + " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(500, 3000)))
            message = {"role": "user" if turn % 2 == 0 else "assistant", "content": text, "at": base + turn}
            if self.rng.random() < 0.3:
                message["name"] = self.rng.choice(["ana", "bo", "cy"])
            messages.append(message)
        return messages

    # -- the rounds -----------------------------------------------------------------------------------------------

    def delay(self, op, default):
        return self.rng.uniform(0.0, max(self.longest.get(op, 0.0), default))

    def finished_in(self, op, outcome):
        if not outcome.killed:
            self.longest[op] = max(self.longest.get(op, 0.0), outcome.seconds)

    def put(self, op):
        project = self.rng.choice(PROJECTS)
        if op == "put-one":
            docs = [self.engram()]
        else:
            docs = [self.engram() for _ in range(self.rng.randint(20, 300))]
        base = ["memory", "put", "--store", str(self.store), "--project", project]
        if op == "put-stream":
            stdin = "".join(json.dumps(d) + "\n" for d in docs).encode()
            args, path = base[:2] + ["-"] + base[2:], None
        else:
            path = self.work / f"put-{self.round}.json"
            text = json.dumps(docs[0], indent=2) if op == "put-one" else json.dumps(docs)
            path.write_text(text)
            args, stdin = base[:2] + [str(path)] + base[2:], None
        outcome = self.start(args, stdin=stdin, kill_after=self.delay(op, 0.05 if op == "put-one" else 1.5))
        statuses = [line.split("\t") for line in outcome.lines() if line.split("\t")[0] in ("stored", "duplicate", "revived")]
        for (status, id_), doc in zip(statuses, docs):
            if status != "stored" or id_ != doc["id"]:
                self.fail(f"put acknowledged {status} {id_} for a new engram {doc['id']}")
            self.engrams[(project, id_)] = doc
        if not outcome.killed and (outcome.code != 0 or len(statuses) != len(docs)):
            self.fail(f"{op} exited {outcome.code} with {len(statuses)} of {len(docs)} acknowledged: {outcome.stderr.decode()[-400:]}")
        if path is not None:
            path.unlink()
        return outcome, f"{op} {len(docs)} engram(s) into {project}: {len(statuses)} acknowledged"

    def ingest(self, op):
        project = self.rng.choice(PROJECTS)
        session = f"r{self.round}"
        # Mostly short sessions, so builds make arcs and epochs; some long ones, so kills land inside the indexing.
        n = self.rng.randint(5, 60) if self.rng.random() < 0.7 else self.rng.randint(100, 1500)
        messages = self.transcript(session, n)
        jsonl = self.rng.random() < 0.5
        text = "".join(json.dumps(m) + "\n" for m in messages) if jsonl else json.dumps(messages)
        args = ["memory", "ingest", "-", "--session", session, "--project", project, "--store", str(self.store), "--json"]
        outcome = self.start(args, stdin=text.encode(), kill_after=self.delay(op, 1.5))
        said = f"{op} of {len(messages)} messages into {project}/{session}"
        if outcome.killed:
            return outcome, said
        if outcome.code != 0:
            self.fail(f"ingest exited {outcome.code}: {outcome.stderr.decode()[-400:]}")
            return outcome, said
        ids = json.loads(outcome.stdout)["ids"]
        if len(ids) != len(messages):
            self.fail(f"ingest stored {len(ids)} of {len(messages)} new messages")
        for id_, m in zip(ids, messages):
            self.messages[id_] = (project, session, m["role"], m.get("name"), m["at"], m["content"])
        return outcome, f"{said}: {len(ids)} acknowledged"

    def build(self, op):
        outcome = self.start(["dag", "build", "--store", str(self.store), "--json"], kill_after=self.delay(op, 1.0))
        said = "dag build"
        if not outcome.killed and self.sqlite_ok():
            if outcome.code != 0:
                self.fail(f"dag build exited {outcome.code}: {outcome.stderr.decode()[-400:]}")
            else:
                with self.connect(self.store / "memory.sqlite3") as db:
                    nodes = dict(db.execute("SELECT id, content FROM dag_nodes"))
                self.nodes.update(nodes)
                said += f": {len(nodes)} nodes acknowledged"
        return outcome, said

    def run(self, op):
        scenario = self.rng.choice(SCENARIOS)
        reuse = [d for d in self.killed_run_dirs if d.name == scenario]
        if reuse and self.rng.random() < 0.5:
            out = reuse[-1].parent
            self.killed_run_dirs.remove(reuse[-1])
        else:
            out = self.runs / f"{self.round}"
        mode = self.rng.choice([[], ["--mode", "less"], ["--mode", "verbatim"]])
        args = ["run", str(REPO / "scenarios" / f"{scenario}.toml"), "--out", str(out), "--json", *mode]
        outcome = self.start(args, kill_after=self.delay(op, 2.0))
        scenario_dir = out / scenario
        # One mode's run is its mode directory (the scenario's may hold another mode's killed run).
        run_dir = scenario_dir / mode[1] if mode else scenario_dir
        said = f"run {scenario} {' '.join(mode)} into {out.name}"
        if outcome.killed:
            self.killed_run_dirs.append(scenario_dir)
            self.check_killed_run(scenario_dir)
        elif outcome.code in (0, 1):
            report = json.loads(outcome.stdout)
            self.acked_runs.append((run_dir, outcome.code, report))
            self.check_run(run_dir, outcome.code, report)
            said += f": exit {outcome.code}, acknowledged"
        else:
            self.fail(f"{said} exited {outcome.code}: {outcome.stderr.decode()[-400:]}")
        self.check_run_memories(scenario_dir)
        for path in sorted(scenario_dir.rglob("*.sqlite3")) if scenario_dir.exists() else []:
            self.integrity(path)
        return outcome, said

    def query(self, op):
        project = self.rng.choice(PROJECTS)
        args = ["memory", "query", self.rng.choice(QUERIES), "--store", str(self.store), "--project", project]
        outcome = self.start(args, kill_after=self.delay(op, 3.0))
        if not outcome.killed and outcome.code not in (0, 1):
            self.fail(f"query exited {outcome.code}: {outcome.stderr.decode()[-400:]}")
        return outcome, f"memory query (embeds) in {project}"

    def reindex(self, op):
        outcome = self.start(["memory", "reindex", "--store", str(self.store)], kill_after=self.delay(op, 1.0))
        if not outcome.killed and outcome.code != 0:
            self.fail(f"reindex exited {outcome.code}: {outcome.stderr.decode()[-400:]}")
        return outcome, "memory reindex"

    def one_round(self):
        ops = [("put-one", 3), ("put-stream", 4), ("put-array", 3), ("ingest", 4), ("build", 3), ("run", 4)]
        if self.model:
            ops += [("query", 2), ("reindex", 1)]
        if not self.sqlite_ok():
            ops = [o for o in ops if o[0] in ("put-one", "put-stream", "put-array", "ingest", "run")]
        op = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        handler = {"put-one": self.put, "put-stream": self.put, "put-array": self.put, "ingest": self.ingest,
                   "build": self.build, "run": self.run, "query": self.query, "reindex": self.reindex}[op]
        outcome, said = handler(op)
        self.finished_in(op, outcome)
        if outcome.killed:
            self.kills += 1
            self.kills_by[op] = self.kills_by.get(op, 0) + 1
            print(f"[{self.kills}/{self.args.n}] {said}; killed after {outcome.seconds:.2f} s", flush=True)
        else:
            self.finished += 1
            print(f"[{self.kills}/{self.args.n}] {said}; finished in {outcome.seconds:.2f} s (exit {outcome.code})", flush=True)

    # -- checks ---------------------------------------------------------------------------------------------------

    def sqlite_ok(self):
        return (self.store / "memory.sqlite3").is_file()

    @staticmethod
    def connect(path):
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=60)
        return db

    def integrity(self, path):
        try:
            db = self.connect(path)
            result = db.execute("PRAGMA integrity_check").fetchall()
            db.close()
        except sqlite3.Error as err:
            self.fail(f"{path}: {err}")
            return
        if result != [("ok",)]:
            self.fail(f"{path}: integrity_check says {result[:5]}")

    def verify(self, with_model=False, final=False):
        """Reopens the store with lessrt (its own recovery path), then reads SQLite directly. Each round asks one
        question per project of each index; the final check asks them all."""
        if self.sqlite_ok():
            store = str(self.store)
            self.check(["memory", "stats", "--store", store, "--json"])
            self.check(["dag", "show", "--store", store])  # catches the message index up
            for path in (self.store / "memory.sqlite3", self.store / "archive-index" / "memory.sqlite3"):
                if path.exists():
                    self.integrity(path)
            self.verify_engrams()
            self.verify_messages()
            self.verify_nodes()
            self.catch_up_reference()
            self.compare_recall(with_model, QUERIES if final else [QUERIES[self.round % len(QUERIES)]])

    def verify_engrams(self):
        with self.connect(self.store / "memory.sqlite3") as db:
            rows = {(p, i): d for p, i, d in db.execute("SELECT project, id, doc FROM engrams")}
        for key, doc in self.engrams.items():
            if key not in rows:
                self.lose(f"engram {key[1]} of {key[0]} is gone")
            elif json.loads(rows[key]) != doc:
                self.lose(f"engram {key[1]} of {key[0]} changed: {rows[key][:200]}")
        for project, id_ in self.rng.sample(sorted(self.engrams), min(3, len(self.engrams))):
            got = self.check(["memory", "get", id_, "--store", str(self.store), "--project", project, "--json"])
            if got.code == 0 and json.loads(got.stdout)["engram"] != self.engrams[(project, id_)]:
                self.lose(f"`memory get {id_}` answers another engram")

    def verify_messages(self):
        with self.connect(self.store / "memory.sqlite3") as db:
            rows = {r[0]: tuple(r[1:]) for r in db.execute("SELECT id, project, session, role, name, at, content FROM dag_messages")}
        for id_, want in self.messages.items():
            if rows.get(id_) != want:
                self.lose(f"message {id_} is {'gone' if id_ not in rows else 'changed'}")
        for id_ in self.rng.sample(sorted(self.messages), min(2, len(self.messages))):
            got = self.check(["dag", "expand", id_, "--store", str(self.store), "--json"])
            if got.code == 0 and json.dumps(self.messages[id_][5])[1:-1] not in got.stdout.decode():
                self.lose(f"`dag expand {id_}` does not give the message's text")

    def verify_nodes(self):
        with self.connect(self.store / "memory.sqlite3") as db:
            rows = dict(db.execute("SELECT id, content FROM dag_nodes"))
            # Every ingest here ends its session: one left open was archived by a killed ingest that did not end it,
            # and no build would ever summarize it.
            open_sessions = db.execute(
                "SELECT project, session FROM dag_sessions s WHERE ended = 0 AND EXISTS "
                "(SELECT 1 FROM dag_messages m WHERE m.project = s.project AND m.session = s.session)").fetchall()
        for project, session in open_sessions:
            self.fail(f"session {project}/{session} holds messages of a killed ingest but was never ended")
        for id_, content in self.nodes.items():
            if rows.get(id_) != content:
                self.lose(f"DAG node {id_} is {'gone' if id_ not in rows else 'changed'}")

    def catch_up_reference(self):
        """The reference store receives, without kills, what the killed store committed."""
        with self.connect(self.store / "memory.sqlite3") as db:
            engrams = db.execute("SELECT project, id, doc FROM engrams ORDER BY rowid").fetchall()
            messages = db.execute(
                "SELECT project, session, role, name, at, content, id FROM dag_messages ORDER BY seq").fetchall()
        by_project = {}
        for project, id_, doc in engrams:
            if (project, id_) not in self.ref_engrams:
                by_project.setdefault(project, []).append((id_, doc))
        for project, docs in by_project.items():
            stdin = "".join(doc + "\n" for _, doc in docs).encode()
            out = self.start(["memory", "put", "-", "--store", str(self.ref), "--project", project], stdin=stdin,
                             env=HASH_ONLY)
            if out.code != 0:
                self.fail(f"reference put exited {out.code}: {out.stderr.decode()[-300:]}")
            self.ref_engrams.update((project, id_) for id_, _ in docs)
        sessions = {}
        for project, session, role, name, at, content, id_ in messages:
            if (project, session) not in self.ref_sessions:
                m = {"role": role, "content": content, "at": at}
                if name is not None:
                    m["name"] = name
                sessions.setdefault((project, session), []).append((m, id_))
        for (project, session), items in sessions.items():
            stdin = "".join(json.dumps(m) + "\n" for m, _ in items).encode()
            out = self.start(["memory", "ingest", "-", "--session", session, "--project", project, "--store",
                              str(self.ref), "--json", "--open"], stdin=stdin, env=HASH_ONLY)
            if out.code != 0 or json.loads(out.stdout)["ids"] != [i for _, i in items]:
                self.fail(f"reference ingest of {project}/{session} differs: {out.stderr.decode()[-300:]}")
            self.ref_sessions.add((project, session))

    def hits(self, store, query, project, env=HASH_ONLY, k=MAX_K):
        """The ids a query answers, best first, each with whether it had a vector."""
        out = self.check(["memory", "query", query, "--store", str(store), "--project", project, "--json",
                          "--k", str(k)], env=env, ok=(0, 1))
        if out.code != 0:
            return []
        return [(h["id"], h.get("cosine") is not None) for h in json.loads(out.stdout)["hits"]]

    def same_hits(self, what, killed, reference):
        a, b = {i for i, _ in killed}, {i for i, _ in reference}
        if MAX_K in (len(killed), len(reference)):
            self.truncated += 1  # a cut answer: which of equal scores made it in may differ; not compared
        elif a != b:
            self.fail(f"{what}: {len(a - b)} extra, {len(b - a)} missing against the reference")

    def compare_recall(self, with_model, queries):
        projects = sorted({p for p, _ in self.ref_engrams})
        for project in projects:
            for query in queries:
                self.same_hits(f"hash recall of {query!r} in {project}", self.hits(self.store, query, project),
                               self.hits(self.ref, query, project))
        if with_model:
            # Both stages: a few committed engrams asked for by their exact claim must come first, with their vector
            # found in the usearch index, in the killed store as in the reference (the query embeds what is new).
            with self.connect(self.store / "memory.sqlite3") as db:
                rows = db.execute("SELECT project, id, json_extract(doc, '$.claim') FROM engrams").fetchall()
            for project, id_, claim in self.rng.sample(rows, min(4, len(rows))):
                for name, store in (("killed", self.store), ("reference", self.ref)):
                    top = self.hits(store, claim, project, env=os.environ, k=3)[:1]
                    if top != [(id_, True)]:
                        self.fail(f"two-stage recall in the {name} store: {id_}'s own claim gives {top}")
        index, ref_index = self.store / "archive-index", self.ref / "archive-index"
        for project in sorted({p for p, _ in self.ref_sessions}):
            for query in queries:
                self.same_hits(f"message index recall of {query!r} in {project}",
                               self.hits(index, query, f"dag:{project}"), self.hits(ref_index, query, f"dag:{project}"))

    def check_run(self, scenario_dir, code, report):
        shown = self.check(["runs", "show", str(scenario_dir), "--json"], ok=(0, 1, 2))
        if shown.code != code:
            self.lose(f"`runs show {scenario_dir}` exits {shown.code} for a run that exited {code}")
        elif json.loads(shown.stdout) != report:
            self.lose(f"`runs show {scenario_dir}` gives another report than the run printed")

    def check_killed_run(self, scenario_dir):
        if not scenario_dir.exists():
            return
        for target in [scenario_dir, *[d for d in scenario_dir.iterdir() if d.is_dir()]]:
            shown = self.check(["runs", "show", str(target)], ok=(0, 1, 2))
            said = shown.stderr.decode()
            if shown.code == 2:
                if "incomplete run" not in said and "holds no run" not in said:
                    self.fail(f"`runs show {target}` of a killed run fails without saying it is incomplete: {said[-300:]}")
                continue
            # Reported as a run: only right if every report it read was written whole before the kill.
            for mode in ([target] if (target / "ledger.jsonl").exists() else [target / "less", target / "verbatim"]):
                report = mode / "report.json"
                if (mode / "ledger.jsonl").exists():
                    try:
                        json.loads(report.read_text())
                    except (OSError, ValueError) as err:
                        self.fail(f"`runs show {target}` reports a killed run as a run, but {report}: {err}")

    def check_run_memories(self, scenario_dir):
        if not scenario_dir.exists():
            return
        for memory in scenario_dir.glob("*/memory"):
            if (memory / "memory.sqlite3").is_file():
                self.check(["memory", "stats", "--store", str(memory)])
                self.check(["dag", "show", "--store", str(memory)])

    def main(self):
        print(f"crash-test: seed {self.args.seed}, {self.args.n} kills, work directory {self.work}, "
              f"model {'on' if self.model else 'off'}", flush=True)
        began = time.monotonic()
        while self.kills < self.args.n:
            self.round += 1
            self.one_round()
            self.verify(with_model=self.model and self.round % self.args.model_every == 0)
        self.round += 1
        print("final checks", flush=True)
        self.verify(with_model=self.model, final=True)
        if self.sqlite_ok():
            # A build that is not killed finishes what killed ones left: nothing stays pending.
            built = self.check(["dag", "build", "--store", str(self.store), "--json"])
            if built.code == 0 and json.loads(built.stdout)["archive"]["pending_messages"] != 0:
                self.fail(f"after a whole dag build, messages are still pending: {built.stdout.decode()[:300]}")
            self.verify_nodes()
        for scenario_dir, code, report in self.acked_runs:
            self.check_run(scenario_dir, code, report)
        for path in sorted(self.runs.rglob("*.sqlite3")) if self.runs.exists() else []:
            self.integrity(path)
        acked = len(self.engrams) + len(self.messages) + len(self.nodes) + len(self.acked_runs)
        print(f"seed {self.args.seed}; kills by command: "
              + ", ".join(f"{k} {v}" for k, v in sorted(self.kills_by.items()))
              + f"; {self.finished} commands finished before their kill; acknowledged: {len(self.engrams)} engrams, "
              f"{len(self.messages)} messages, {len(self.nodes)} DAG nodes, {len(self.acked_runs)} runs; "
              f"{len(self.failures)} failed checks ({self.truncated} answers cut at k={MAX_K} not compared); "
              f"{time.monotonic() - began:.0f} s")
        for line in self.failures + self.lost:
            print(f"  {line}")
        print(f"{self.kills} kills, {acked} acknowledged writes, {len(self.lost)} lost")
        return 1 if self.lost or self.failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("n", type=int, help="how many kills")
    parser.add_argument("--lessrt", required=True)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--model-every", type=int, default=10)
    parser.add_argument("--no-model", action="store_true")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    keep = args.keep or args.workdir is not None
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="lessrt-crash-")
        args.workdir = tmp.name
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    try:
        code = Harness(args).main()
    finally:
        if tmp is not None and not keep:
            tmp.cleanup()
    sys.exit(code)


if __name__ == "__main__":
    main()
