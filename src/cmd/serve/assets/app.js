// The LESS page: draws the run's first view from the state the server inlined in the page (so the first paint shows
// the run), then reads from /api/ and follows the run live over /api/stream (server-sent events).
// Plain DOM, no framework; text is always set as text (never parsed as HTML), so nothing in a run can inject markup.
"use strict";

const state = {
  run: null,          // the run id shown
  events: 0,          // ledger lines the page has
  source: null,       // the EventSource of the live stream
  refresh: null,      // a pending refresh timer
  opener: null,       // the pointer button that opened the pointer panel (focus returns to it on Escape)
  finished: false,
  wire: false,        // the run kept its wire text (a baseline): delivered messages open what was sent
  initial: null,      // the state inlined in the page, drawn before anything is asked
};

// ---------- helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

async function api(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") query.set(key, value);
  }
  const response = await fetch(`/api/${path}?${query}`);
  const body = await response.json();
  if (!response.ok) {
    const err = new Error(body.message || response.statusText);
    err.body = body;
    throw err;
  }
  return body;
}

function errorBox(err) {
  const body = err.body || { code: "LESS_RUN_FAILED", message: String(err.message || err) };
  return el("div", { class: "error", role: "alert" },
    el("span", { class: "code", text: body.code }), " ", body.message,
    body.instead ? el("div", { class: "muted", text: `Instead: ${body.instead}` }) : null);
}

// A pointer as a button: focusable with Tab, opened with Enter or a click.
function pointerButton(text, digest) {
  return el("button", {
    type: "button",
    class: "ptr",
    "data-pointer": text,
    "data-digest": digest || null,
    title: digest ? `${text}\n${digest}` : text,
    "aria-label": `Open pointer ${text}`,
    onclick: (event) => openPointer(text, digest, event.currentTarget),
  }, text);
}

function pct(used, limit) { return limit > 0 ? Math.min(100, Math.round((100 * used) / limit)) : 0; }

function meter(label, used, limit, unit) {
  const over = limit !== null && limit !== undefined && used > limit;
  const shown = limit === null || limit === undefined ? `${used}${unit ? " " + unit : ""}` : `${used} / ${limit}${unit ? " " + unit : ""}`;
  return el("div", { class: over ? "meter over" : "meter", "data-meter": label },
    el("div", { class: "label" }, el("span", { text: label }), el("span", { class: "value", text: shown })),
    el("div", {
      class: "bar", role: "meter", "aria-label": label, "aria-valuemin": 0,
      "aria-valuemax": limit || used || 1, "aria-valuenow": used, "aria-valuetext": shown,
    }, el("div", { class: "fill", style: `width:${pct(used, limit || used || 1)}%` })));
}

// ---------- loading ----------

async function loadRuns() {
  return drawRuns(await api("runs"));
}

function drawRuns(runs) {
  const picker = clear(document.getElementById("run-picker"));
  for (const run of runs.runs) {
    const label = `${run.id}${run.finished ? "" : " (running)"}`;
    picker.append(el("option", { value: run.id, text: label }));
  }
  const wanted = new URLSearchParams(location.search).get("run");
  const chosen = runs.runs.some((r) => r.id === wanted) ? wanted : (state.run || runs.default);
  if (chosen) picker.value = chosen;
  return chosen;
}

async function showRun(id) {
  state.run = id;
  state.events = 0;
  await refreshAll();
  connect();
}

async function refreshAll() {
  if (!state.run) return;
  const results = await Promise.allSettled([renderRun(), renderBriefs(), renderFeed(), renderTimeline(), renderCompare()]);
  results.filter((r) => r.status === "rejected").forEach((r) => console.warn(r.reason));
}

// While a run is live the timeline grows by the stream's own items; the other panels are asked again at most once a
// second, so a fast run costs the server a few requests a second, not a few per event.
function scheduleRefresh() {
  if (state.refresh) return;
  state.refresh = setTimeout(async () => {
    state.refresh = null;
    const results = await Promise.allSettled([renderRun(), renderBriefs(), renderFeed(), renderCompare()]);
    results.filter((r) => r.status === "rejected").forEach((r) => console.warn(r.reason));
  }, 1000);
}

// ---------- header and hierarchy ----------

async function renderRun() {
  drawRun(await api("run", { run: state.run }));
}

function drawRun(run) {
  state.finished = run.finished;
  state.wire = Boolean(run.wire);
  document.getElementById("run-title").textContent = `${run.scenario} · ${run.mode} mode`;
  document.getElementById("run-goal").textContent = run.manifest && run.manifest.goal ? run.manifest.goal : "";
  const counts = run.counts || {};
  document.getElementById("counts").textContent =
    `${counts.events || 0} events · ${counts.delivered || 0} delivered · ${counts.engrams || 0} engrams · ` +
    `${counts.rejected || 0} refused · ${(counts.derefs || 0) + (counts.derefs_denied || 0)} derefs ` +
    `(${counts.derefs_denied || 0} denied) · ${counts.restarts || 0} restarts`;
  setStatus(run);
  renderTree(run.agents || [], run.report);
  drawOutcome(run.outcome, run.report);
}

// ---------- checks and graded tasks ----------

// LESS §12's rates of a finished run, in one line ("-" where a rate has nothing to divide by).
function ratesText(rates) {
  const pct = (r) => (r === null || r === undefined ? "-" : `${Math.round(r * 100)}%`);
  const trend = rates.tokens_per_turn_trend;
  const kinds = (rates.top_engram_kinds || []).map((k) => `${k.kind} ${k.count}`).join(", ") || "-";
  return `Rates: resend ${pct(rates.resend_rate)}, deref denial ${pct(rates.deref_denial_rate)}, ` +
    `contradiction ${pct(rates.contradiction_rate)}; tokens per turn ` +
    `${trend ? `${Math.round(trend[0])} → ${Math.round(trend[1])}` : "-"}; engrams: ${kinds}.`;
}

function drawOutcome(outcome, report) {
  const view = clear(document.getElementById("outcome-view"));
  if (!outcome) {
    view.append(el("p", { class: "muted", text: "Shown when the run finished (its report)." }));
    return;
  }
  const n = (status) => outcome.checks.filter((c) => c.status === status).length;
  const checks = `${n("PASS")} check${n("PASS") === 1 ? "" : "s"} pass, ${n("FAIL")} fail` +
    (n("N/A") ? `, ${n("N/A")} do not apply to this mode` : "");
  const tasks = outcome.graded ? `${outcome.solved} of ${outcome.graded} graded tasks solved` : "no graded tasks";
  view.append(el("p", { class: outcome.passed ? "verdict ok" : "verdict bad", "data-passed": outcome.passed },
    `${outcome.passed ? "Passed" : "Not passed"}: ${checks}; ${tasks}.`));
  if (report && report.rates) view.append(el("p", { class: "muted", "data-rates": "", text: ratesText(report.rates) }));
  if (outcome.checks.length) {
    view.append(el("h3", { text: "Checks" }), el("table", { class: "verdicts", "data-checks": "" },
      el("tr", {}, ["check", "status", "evidence"].map((h) => el("th", { scope: "col", text: h }))),
      outcome.checks.map((c) => el("tr", { "data-check": c.name, "data-status": c.status },
        el("td", { class: "check-name", text: c.name }),
        el("td", {}, el("span", { class: `badge status-${c.status === "N/A" ? "na" : c.status.toLowerCase()}`, text: c.status === "N/A" ? "n/a" : c.status })),
        el("td", { class: "evidence", text: c.evidence })))));
  }
  if (outcome.tasks.length) {
    view.append(el("h3", { text: "Graded tasks" }), el("ol", { class: "tasks" }, outcome.tasks.map((t) => {
      const a = t.answer;
      return el("li", { class: t.solved ? "task solved" : "task unsolved", "data-task": t.id, "data-status": t.status },
        el("div", { class: "meta" },
          el("strong", { text: t.id }), " ",
          el("span", { class: t.solved ? "badge status-pass" : "badge status-fail", "data-task-status": "", text: t.status }),
          ` ${t.kind.replaceAll("_", " ")} · asked of ${t.agent}${t.role && t.role !== t.agent ? ` (${t.role})` : ""}`),
        el("p", { class: "evidence", text: t.evidence }),
        a ? el("div", { class: "answer", "data-answer-engram": a.engram },
          el("div", { class: "meta" }, t.solved ? "answered by " : "closest answer ",
            el("a", { href: `#engram-${a.engram}`, text: a.engram }), ` in ${a.msg_id}`),
          el("p", { class: "claim", text: a.claim }),
          el("div", {}, (a.pointers || []).map((p) => pointerButton(p))))
          : el("p", { class: "muted", text: "No engram answered it." }));
    })));
  }
}

function setStatus(run) {
  const status = document.getElementById("live-status");
  if (run.finished) {
    status.textContent = "finished";
    status.className = "status";
  } else if (run.incomplete) {
    status.textContent = "incomplete";
    status.className = "status";
  } else {
    const step = run.current_step ? ` · step ${run.current_step.index}: ${run.current_step.agent} ${run.current_step.action}` : "";
    status.textContent = `live${step}`;
    status.className = "status live";
  }
}

function renderTree(agents, report) {
  const byParent = new Map();
  for (const agent of agents) {
    const key = agent.parent || "";
    if (!byParent.has(key)) byParent.set(key, []);
    byParent.get(key).push(agent);
  }
  const ids = new Set(agents.map((a) => a.id));
  const roots = agents.filter((a) => !a.parent || !ids.has(a.parent));
  const build = (list) => el("ul", {}, list.map((agent) =>
    el("li", {}, agentCard(agent, report), (byParent.get(agent.id) || []).length ? build(byParent.get(agent.id)) : null)));
  const tree = clear(document.getElementById("tree"));
  const top = build(roots);
  top.className = "tree";
  tree.append(top);
}

function agentCard(agent, report) {
  const m = agent.meter || {};
  const limits = m.limits || {};
  const roleReport = report && report.roles ? report.roles[agent.role] : null;
  const badges = [el("span", { class: `badge state-${agent.state}`, "data-state": agent.state, text: agent.state })];
  if (agent.restarts) badges.push(el("span", { class: "badge warn", text: `restarted ×${agent.restarts}` }));
  if (agent.escalations) badges.push(el("span", { class: "badge warn", text: `escalated ×${agent.escalations}` }));
  if (agent.kind === "llm") badges.push(el("span", { class: "badge", text: "LLM" }));
  const meters = [];
  if (m.last_turn_tokens !== null && m.last_turn_tokens !== undefined) {
    meters.push(meter("inline tokens, last turn", m.last_turn_tokens, m.last_turn_cap, "tok"));
  } else {
    meters.push(el("div", { class: "meter muted", "data-meter": "inline tokens, last turn", text: "no message sent yet" }));
  }
  meters.push(meter("deref tokens", m.deref.tokens, limits.max_deref_tokens_total));
  meters.push(meter("repo spans", m.deref.repo_spans, limits.max_repo_spans));
  meters.push(meter("artifact sections", m.deref.artifact_sections, limits.max_artifact_sections));
  meters.push(meter("memory items", m.deref.sam_items, limits.max_sam_items));
  const facts = [
    `${m.turns} message${m.turns === 1 ? "" : "s"} sent`,
    `${m.refusals} refused`,
    `${m.resends} resent`,
    `${m.denied_derefs} deref${m.denied_derefs === 1 ? "" : "s"} denied`,
  ];
  if (m.via_grant_tokens) facts.push(`${m.via_grant_tokens} tok under grants`);
  if (roleReport) facts.push(`${roleReport.inline_tokens.total} inline tok in all`);
  const grants = (m.grants || []).map((g) => el("div", { class: "facts", "data-grant": g.grant_id },
    `grant ${g.grant_id} from ${g.issuer}: ${g.derefs_used}/${g.max_derefs} derefs, ${g.tokens_used}/${g.max_tokens} tok, patterns ${g.patterns.join(" ")}`));
  return el("div", { class: "agent", id: `agent-${agent.id}`, "data-agent": agent.id, "data-role": agent.role },
    el("div", { class: "agent-head" },
      el("span", { class: "agent-name", text: agent.id }),
      agent.role !== agent.id ? el("span", { class: "muted", text: `(${agent.role})` }) : null,
      badges),
    el("div", { class: "meters" }, meters),
    el("div", { class: "facts", "data-facts": "" }, facts.join(" · ")),
    grants);
}

// ---------- Shared Brief ----------

async function renderBriefs() {
  drawBriefs(await api("briefs", { run: state.run }));
}

function drawBriefs(data) {
  const list = clear(document.getElementById("brief-list"));
  if (!data.briefs.length) {
    list.append(el("p", { class: "muted", text: "No brief delivered yet." }));
    return;
  }
  for (const b of data.briefs) {
    const brief = b.brief;
    const dl = el("dl", {});
    const section = (title, items) => {
      if (!items || !items.length) return;
      dl.append(el("dt", { text: title }), el("dd", {}, el("ul", {}, items.map((line) => el("li", { text: line })))));
    };
    section("What matters now", brief.what_matters_now);
    section("Constraints", brief.constraints);
    section("Top risks", brief.top_risks);
    for (const [role, pointers] of Object.entries(brief.pointer_packs || {})) {
      dl.append(el("dt", { text: `Pointer pack for ${role}` }), el("dd", {}, pointers.map((p) => pointerButton(p))));
    }
    for (const [role, budget] of Object.entries(brief.budgets || {})) {
      dl.append(el("dt", { text: `Budget of ${role}` }), el("dd", {}, budgetTable(budget)));
    }
    const grants = data.grants.filter((g) => g.to === b.to);
    for (const g of grants) {
      const t = g.grant;
      dl.append(el("dt", { text: `Grant ${t.grant_id} from ${t.issuer}` }),
        el("dd", {}, `${t.max_derefs} derefs, ${t.max_tokens} tok, ${t.uses} use${t.uses === 1 ? "" : "s"}, expires ${t.expires_at}; patterns `,
          (t.patterns || []).map((p) => el("code", { text: p + " " }))));
    }
    for (const c of brief.capsules || []) dl.append(el("dt", { text: "Capsule" }), el("dd", {}, el("pre", { class: "plain", text: c })));
    list.append(el("article", { class: "brief", "data-brief": b.msg_id, "data-to": b.to },
      el("h3", {}, `${b.to} ← ${b.from}`, " ", el("span", { class: "muted", text: `${b.msg_id} · ${b.tokens} / ${b.max_tokens} tok` }),
        state.wire ? wireButton(b.msg_id) : null),
      dl));
  }
}

function budgetTable(budget) {
  const keys = ["max_inline_tokens", "max_engrams", "max_repo_spans", "max_artifact_sections", "max_sam_items", "max_deref_tokens_total", "max_inline_code"];
  return el("table", {}, el("tr", {}, keys.map((k) => el("th", { scope: "col", text: k.replace(/^max_/, "").replaceAll("_", " ") }))),
    el("tr", {}, keys.map((k) => el("td", { text: budget[k] }))));
}

// ---------- engram feed ----------

function fillSelect(select, values) {
  const current = select.value;
  clear(select).append(el("option", { value: "", text: "all" }));
  for (const v of values) select.append(el("option", { value: v, text: v }));
  select.value = values.includes(current) ? current : "";
}

async function renderFeed() {
  const filters = {
    kind: document.getElementById("filter-kind").value,
    role: document.getElementById("filter-role").value,
    scope: document.getElementById("filter-scope").value,
  };
  drawFeed(await api("engrams", { run: state.run, ...filters }));
}

function drawFeed(data) {
  fillSelect(document.getElementById("filter-kind"), data.facets.kind);
  fillSelect(document.getElementById("filter-role"), data.facets.role);
  fillSelect(document.getElementById("filter-scope"), data.facets.scope);
  document.getElementById("feed-count").textContent = `${data.engrams.length} engram${data.engrams.length === 1 ? "" : "s"}`;
  const list = clear(document.getElementById("engram-list"));
  for (const e of data.engrams) {
    const id = e.engram.id;
    const classes = ["engram", `kind-${e.kind}`];
    if (e.superseded_by) classes.push("superseded");
    const pointers = e.kind === "risk" && e.pointers.length >= 2
      ? el("div", { class: "sides", "aria-label": "Both sides of the risk" },
          e.pointers.map((p, i) => el("div", { class: "side" }, el("div", { class: "muted", text: i === 0 ? "one side" : "other side" }), pointerButton(p.text, p.digest))))
      : el("div", {}, e.pointers.map((p) => pointerButton(p.text, p.digest)));
    const links = [];
    if (e.superseded_by) links.push(el("span", {}, "superseded by ", el("a", { href: `#engram-${e.superseded_by}`, text: e.superseded_by })));
    for (const old of e.supersedes) links.push(el("span", {}, " replaces ", el("a", { href: `#engram-${old}`, text: old })));
    for (const risk of e.contradictions) links.push(el("span", {}, " contradiction raised: ", el("a", { href: `#engram-${risk}`, text: risk })));
    list.append(el("li", { class: classes.join(" "), id: `engram-${id}`, "data-engram": id, "data-kind": e.kind },
      el("div", { class: "meta" },
        el("span", { class: "badge", text: e.kind }), " ", el("span", { class: "badge", text: e.scope }),
        ` ${e.from} → ${e.to} · ${e.msg_id} · confidence ${e.engram.confidence}`,
        e.memory ? ` · memory: ${e.memory}` : "", " · ", el("code", { text: id })),
      e.superseded_by ? el("s", { class: "claim", text: e.claim }) : el("p", { class: "claim", text: e.claim }),
      pointers,
      links.length ? el("div", { class: "meta" }, links) : null));
  }
}

// ---------- timeline ----------

function timelineItem(item, fresh) {
  const li = el("li", { class: fresh ? "new" : null, "data-seq": item.seq, "data-event": item.event },
    el("span", { class: "seq", text: item.seq }),
    el("span", { class: `ev ev-${item.event}`, text: item.event }),
    el("span", { class: "tl-text" }, item.text, item.event === "delivered" && state.wire && item.msg_id ? [" ", wireButton(item.msg_id)] : null));
  if (item.pointers && item.pointers.length && item.event !== "deref") {
    li.append(el("div", { class: "cover" }, item.pointers.map((p) => pointerButton(p))));
  }
  if (item.event === "deref" && item.pointers) {
    li.append(el("div", { class: "cover" }, item.pointers.map((p) => pointerButton(p))));
  }
  if (item.cover) {
    const c = item.cover;
    const lines = [];
    lines.push(el("span", { class: "code", text: item.code || "LESS_DEREF_DENIED" }));
    if (c.covering && c.covering.length) {
      for (const g of c.covering) {
        lines.push(el("span", {}, ` · covered by grant ${g.grant_id} from ${g.issuer} (${(g.patterns || []).join(" ")}; ${g.max_derefs} derefs, ${g.max_tokens} tok)`));
      }
    } else {
      lines.push(el("span", {}, " · no grant of this run covers it"));
    }
    const n = c.needed || {};
    lines.push(el("div", {}, `A grant from ${n.issuer || "its parent"} to ${n.grantee} with patterns ${(n.patterns || []).join(" ")} and ${n.max_derefs} derefs would cover it.`));
    li.append(el("div", { class: "cover", "data-cover": "" }, lines));
  }
  return li;
}

async function renderTimeline() {
  drawTimeline(await api("timeline", { run: state.run }));
}

function drawTimeline(data) {
  const want = document.getElementById("filter-event").value;
  const names = [...new Set(data.items.map((i) => i.event))].sort();
  fillSelect(document.getElementById("filter-event"), names);
  const list = clear(document.getElementById("timeline-list"));
  for (const item of data.items) {
    if (!want || item.event === want) list.append(timelineItem(item, false));
  }
  state.events = data.total;
}

// ---------- pointer click-through ----------

async function openPointer(text, digest, opener) {
  state.opener = opener ? locate(opener) : null;
  document.querySelectorAll('.ptr[aria-pressed="true"]').forEach((b) => b.setAttribute("aria-pressed", "false"));
  if (opener) opener.setAttribute("aria-pressed", "true");
  const view = clear(document.getElementById("pointer-view"));
  view.append(el("p", { class: "muted", text: `Resolving ${text}…` }));
  const heading = document.getElementById("pointer-h");
  heading.textContent = "Pointer";
  heading.focus({ preventScroll: true });
  try {
    const d = await api("deref", { run: state.run, pointer: text, digest: digest || "" });
    clear(view);
    view.append(el("p", {}, el("code", { class: "pointer-text", text: d.pointer }), ` · ${d.type}`));
    view.append(el("dl", {},
      el("dt", { text: "Digest" }), el("dd", { class: "digest", "data-digest": d.digest, text: d.digest }),
      el("dt", { text: "Token cost" }), el("dd", { "data-tokens": d.tokens, text: `${d.tokens} tokens (${d.tokenizer})` }),
      d.pinned ? el("dt", { text: "Against the run" }) : null,
      d.pinned ? el("dd", { class: d.unchanged ? "" : "code" }, d.unchanged ? "unchanged since the run (same digest)" : `changed since the run: the run saw ${d.pinned}`) : null));
    if (d.context) {
      const [from, to] = d.context.highlight;
      const source = el("div", { class: "source", role: "region", "aria-label": `${d.pointer}, lines ${from} to ${to} marked` });
      d.context.lines.forEach((line, i) => {
        const no = d.context.first_line + i;
        const hl = no >= from && no <= to;
        source.append(el("div", { class: hl ? "ln hl" : "ln", "data-line": no },
          el("span", { class: "no", text: no }), hl ? el("mark", { class: "tx", text: line }) : el("span", { class: "tx", text: line })));
      });
      view.append(el("p", { class: "muted", text: `Lines ${from}–${to} of the file, marked:` }), source);
    } else {
      view.append(el("pre", { class: "plain span-text" }, el("mark", { text: d.content })));
    }
    if (d.derefs.length) {
      view.append(el("h3", { text: "Dereferenced in this run" }), el("ul", {}, d.derefs.map((x) => el("li", {},
        `${x.agent}: ${x.granted ? "granted" : "denied"}${x.via_grant ? " under grant " + x.via_grant : ""}, ${x.tokens} tok `,
        x.code ? el("span", { class: "code", text: x.code }) : null))));
    }
  } catch (err) {
    clear(view).append(el("p", {}, el("code", { text: text })), errorBox(err));
  }
}

// ---------- what a baseline sent ----------

// A button that opens a delivered message's wire text (a baseline run keeps it) in the side panel.
function wireButton(msgId) {
  return el("button", {
    type: "button", class: "wire-btn", "data-wire": msgId, "aria-label": `What was sent as ${msgId}`,
    onclick: (event) => openWire(msgId, event.currentTarget),
  }, "sent text");
}

async function openWire(msgId, opener) {
  state.opener = null;
  const view = clear(document.getElementById("pointer-view"));
  const heading = document.getElementById("pointer-h");
  heading.textContent = "What was sent";
  heading.focus({ preventScroll: true });
  view.append(el("p", { class: "muted", text: `Reading ${msgId}…` }));
  try {
    const w = await api("wire", { run: state.run, msg: msgId });
    clear(view).append(
      el("p", {}, el("code", { text: w.msg_id }), ` · ${w.kind} from ${w.from} to ${w.to} · ${w.tokens} tok`),
      el("p", { class: "muted", text: "The text the baseline sent: what the receiver's prompt held, and what its tokens were counted on." }),
      el("pre", { class: "plain wire-text", "data-wire-text": w.msg_id, text: w.text }));
  } catch (err) {
    clear(view).append(el("p", {}, el("code", { text: msgId })), errorBox(err));
  }
}

// Escape in the pointer panel goes back to the pointer that opened it (found again if a refresh redrew it).
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || !state.opener || !document.getElementById("pointer").contains(document.activeElement)) return;
  let target = state.opener.element;
  if (!target.isConnected) {
    const within = state.opener.scope ? document.querySelector(state.opener.scope) : document;
    target = (within || document).querySelector(`.ptr[data-pointer="${CSS.escape(state.opener.pointer)}"]`);
  }
  if (target) target.focus();
});

// Where a pointer button sits, to find it again after a redraw.
function locate(button) {
  const holder = button.closest("[data-brief], [data-engram], [data-seq]");
  let scope = null;
  if (holder) {
    for (const key of ["brief", "engram", "seq"]) {
      if (holder.dataset[key] !== undefined) scope = `[data-${key}="${CSS.escape(holder.dataset[key])}"]`;
    }
  }
  return { element: button, pointer: button.dataset.pointer, scope };
}

// ---------- memory ----------

async function renderDag() {
  const tree = clear(document.getElementById("dag-tree"));
  const stats = document.getElementById("dag-stats");
  try {
    const data = await api("dag", { run: state.run });
    const a = data.archive;
    stats.textContent = `${a.messages} messages in ${a.sessions} session${a.sessions === 1 ? "" : "s"}; ${a.session_nodes} session nodes, ${a.arcs} arcs, ${a.epochs} epochs`;
    for (const node of data.nodes) tree.append(dagNode(node));
    if (!data.nodes.length) tree.append(el("p", { class: "muted", text: "No summary yet (the run's session is summarized when it ends)." }));
  } catch (err) {
    stats.textContent = "";
    tree.append(errorBox(err));
  }
}

// The coordination ledger of the store (a desk's, `lessrt serve --store`): live claims and the latest decisions.
async function renderClaims() {
  const stats = document.getElementById("claims-stats");
  const table = document.getElementById("claims-table");
  const body = clear(table.querySelector("tbody"));
  const list = clear(document.getElementById("decision-list"));
  try {
    const data = await api("claims", { run: state.run });
    const when = (at) => new Date(at * 1000).toISOString().replace(".000Z", "Z");
    for (const c of data.claims) {
      body.append(el("tr", {},
        el("td", { text: c.surfaces.join(", ") }),
        el("td", { text: c.identity }),
        el("td", { text: c.task }),
        el("td", { text: when(c.expires_at) })));
    }
    table.hidden = !data.claims.length;
    for (const d of data.decisions) {
      list.append(el("li", { "data-decision": d.decision_id },
        el("strong", { text: d.title }), " ", el("span", { class: "muted", text: `${d.identity} · ${when(d.at)}` })));
    }
    stats.textContent = `${data.claims.length} live claim${data.claims.length === 1 ? "" : "s"}, ${data.decisions.length} decision${data.decisions.length === 1 ? "" : "s"} shown, ${data.conflicts} conflict record${data.conflicts === 1 ? "" : "s"}`;
  } catch (err) {
    stats.textContent = "";
    table.hidden = true;
    list.append(errorBox(err));
  }
}

function dagNode(node) {
  const details = el("details", { class: "node", "data-node": node.id },
    el("summary", {}, el("strong", { text: node.kind }), ` ${node.id}`, node.session ? ` · ${node.session}` : "",
      ` · ${node.token_count} tok from ${node.input_tokens}`),
    el("pre", { class: "plain", text: node.content }));
  let loaded = false;
  details.addEventListener("toggle", async () => {
    if (!details.open || loaded) return;
    loaded = true;
    try {
      const data = await api("dag", { run: state.run, node: node.id });
      for (const child of data.children) {
        if (child.node) details.append(dagNode(child.node));
        if (child.message) {
          const m = child.message;
          details.append(el("div", { class: "message", "data-message": m.id },
            el("div", { class: "meta" }, el("code", { text: m.id }), ` ${m.name || m.role} · turn ${m.turn} · ${m.tokens} tok`),
            el("pre", { class: "plain", text: m.content })));
        }
      }
    } catch (err) {
      details.append(errorBox(err));
    }
  });
  return details;
}

async function askDag(event) {
  event.preventDefault();
  const q = document.getElementById("dag-q").value.trim();
  const out = clear(document.getElementById("dag-answer"));
  if (!q) return;
  out.append(el("p", { class: "muted", text: "Asking…" }));
  try {
    const a = await api("dag/query", { run: state.run, q });
    clear(out);
    out.append(el("p", { class: "muted", text: `${a.tokens} of ${a.max_tokens} tokens · ${a.citations.length} messages cited · stages ${a.stages}` }));
    out.append(el("pre", { class: "plain", "data-answer": "", text: a.text || "Nothing in the archive bears on this question." }));
  } catch (err) {
    clear(out).append(errorBox(err));
  }
}

// ---------- LESS vs verbatim ----------

async function renderCompare() {
  drawCompare(await api("compare", { run: state.run }));
}

function drawCompare(data) {
  const view = clear(document.getElementById("compare-view"));
  if (!data.comparisons || !data.comparisons.length) {
    view.append(el("p", { class: "muted", text: "Shown when both modes of the scenario finished." }));
    return;
  }
  for (const c of data.comparisons) {
    const max = Math.max(1, ...c.rows.map((r) => Math.max(r.less_with_derefs, r.baseline_with_derefs)));
    const ratio = (a, b) => (b ? `${((100 * a) / b).toFixed(1)}%` : "—");
    view.append(el("h3", { text: `Against ${c.baseline}` }),
      el("table", { "data-compare": c.baseline },
        el("tr", {}, ["role", "LESS inline", "LESS + deref", `${c.baseline} inline`, `${c.baseline} + deref`, "inline %", "+deref %", ""].map((h) => el("th", { scope: "col", text: h }))),
        c.rows.map((r) => el("tr", { "data-role": r.role },
          el("td", { text: r.role }), el("td", { text: r.less }), el("td", { text: r.less_with_derefs }),
          el("td", { text: r.baseline }), el("td", { text: r.baseline_with_derefs }),
          el("td", { text: ratio(r.less, r.baseline) }), el("td", { text: ratio(r.less_with_derefs, r.baseline_with_derefs) }),
          el("td", {}, el("div", { class: "bars", "aria-hidden": "true" },
            el("div", { class: "bar-less", style: `width:${pct(r.less_with_derefs, max)}%` }),
            el("div", { class: "bar-base", style: `width:${pct(r.baseline_with_derefs, max)}%` })))))));
  }
}

// ---------- live ----------

function connect() {
  if (state.source) state.source.close();
  const source = new EventSource(`/api/stream?run=${encodeURIComponent(state.run)}&from=${state.events}`);
  state.source = source;
  source.addEventListener("ledger", (message) => {
    const data = JSON.parse(message.data);
    if (data.seq < state.events) return;
    state.events = data.seq + 1;
    const list = document.getElementById("timeline-list");
    const want = document.getElementById("filter-event").value;
    const event = data.event && data.event.event;
    if (!want || want === event) {
      list.append(timelineItem({ seq: data.seq, event, text: data.text, msg_id: data.event && data.event.msg_id, pointers: (data.event && data.event.pointers) || [] }, true));
      list.scrollTop = list.scrollHeight;
    }
    const status = document.getElementById("live-status");
    if (!state.finished) status.textContent = `live · ${state.events} events`;
    scheduleRefresh();
  });
  // A finished run's stream says `report` at once: the page has it already.
  source.addEventListener("report", () => {
    if (state.finished) return;
    refreshAll();
    loadRuns();
    renderDag();
    renderClaims();
  });
  source.addEventListener("reset", () => { state.events = 0; refreshAll(); renderDag(); renderClaims(); });
}

// ---------- start ----------

// The state the server inlined in the page: drawn at once, before anything is asked, so the first paint (a
// screenshot, a slow connection) shows the run. A page served without it (no run yet) asks for itself.
function drawInitial() {
  const holder = document.getElementById("initial-state");
  if (!holder) return false;
  let initial;
  try {
    initial = JSON.parse(holder.textContent);
  } catch (err) {
    console.warn(err);
    return false;
  }
  state.initial = initial;
  drawRuns(initial.runs);
  state.run = initial.run.id;
  document.getElementById("run-picker").value = state.run;
  const steps = [
    () => drawRun(initial.run), () => drawBriefs(initial.briefs), () => drawFeed(initial.engrams),
    () => drawTimeline(initial.timeline), () => drawCompare(initial.compare),
  ];
  for (const step of steps) {
    try { step(); } catch (err) { console.warn(err); }
  }
  return true;
}

const drawnFirst = drawInitial();

window.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("feed-filters").addEventListener("change", () => renderFeed().catch(console.warn));
  document.getElementById("filter-event").addEventListener("change", () => renderTimeline().catch(console.warn));
  document.getElementById("dag-query").addEventListener("submit", askDag);
  document.getElementById("run-picker").addEventListener("change", (event) => {
    const url = new URL(location.href);
    url.searchParams.set("run", event.target.value);
    history.replaceState(null, "", url);
    showRun(event.target.value);
    renderDag();
    renderClaims();
  });
  try {
    if (drawnFirst) {
      // The first view is the run as the server read it: the stream goes on from its last event.
      connect();
    } else {
      const id = await loadRuns();
      if (!id) {
        document.getElementById("run-title").textContent = "no run yet";
        setTimeout(() => location.reload(), 1000);
        return;
      }
      await showRun(id);
    }
    renderDag();
    renderClaims();
    document.body.setAttribute("data-ready", "true");
  } catch (err) {
    document.getElementById("main").prepend(errorBox(err));
  }
});
