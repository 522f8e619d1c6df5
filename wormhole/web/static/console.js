// The wormhole console: a page over the JSON API (/api/openapi.json), nothing else. Hand-written, no build
// step: every element is made with h() from text, never from HTML strings, so no stored value can run as code.
"use strict";

const state = { timer: null, samples: {}, seq: 0 };
const COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#0b7285"];

function h(tag, attrs, ...children) {
  const ns = ["svg", "rect", "polyline", "line", "text", "g", "title"].includes(tag);
  const el = ns ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v); else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function headers(json) {
  const out = {};
  const token = sessionStorage.getItem("wh-token");
  const actor = sessionStorage.getItem("wh-actor");
  if (token) out["X-Wormhole-Token"] = token;
  if (actor) out["X-Wormhole-Actor"] = actor;
  if (json) out["Content-Type"] = "application/json";
  return out;
}

async function api(path, body) {
  const init = body === undefined ? { headers: headers(false) }
    : { method: "POST", headers: headers(true), body: JSON.stringify(body) };
  const res = await fetch(path, init);
  const doc = (res.headers.get("content-type") || "").includes("json") ? await res.json() : {};
  if (!res.ok) { const err = new Error(doc.error || res.statusText); err.doc = doc; err.status = res.status; throw err; }
  return doc;
}

function flash(text) {
  const el = document.getElementById("flash");
  el.textContent = text; el.className = "shown";
  setTimeout(() => { el.className = ""; }, 4000);
}

// Arrays among the parts (a heading and its table) are laid out in order; empty parts are left out.
const put = (el, ...parts) => el.replaceChildren(...parts.flat(3).filter((p) => p !== "" && p !== null && p !== undefined));
const badge = (s) => h("span", { class: `state ${s}`, "data-state": s }, s);
const num = (n) => (n === null || n === undefined ? "" : Number(n).toLocaleString("en"));
const when = (t) => (t ? new Date(t).toLocaleString() : "");
const cell = (v, cls) => h("td", cls ? { class: cls } : {}, v);

async function act(path, body, done) {
  try {
    await api(path, body || {});
    flash(`${path.split("/").pop()}: done`);
    if (done) done();
  } catch (e) {
    flash(`${path.split("/").pop()} refused: ${e.message}`);
  }
}

// -- pages ------------------------------------------------------------------------------------------

async function tasksPage(view, params) {
  const status = params.get("status") || "";
  const search = params.get("search") || "";
  const q = new URLSearchParams();
  if (status) q.set("status", status);
  if (search) q.set("search", search);
  const doc = await api(`/api/tasks?${q}`);
  const select = h("select", { id: "filter-status" }, h("option", { value: "" }, "any state"),
    ["pending", "running", "success", "partial", "failed", "scheduled"].map(
      (s) => h("option", { value: s, selected: s === status ? "selected" : null }, s)));
  const input = h("input", { id: "filter-search", value: search, placeholder: "name or id" });
  const apply = () => { location.hash = `#/?status=${select.value}&search=${encodeURIComponent(input.value)}`; };
  select.addEventListener("change", apply);
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") apply(); });
  const rows = doc.tasks.map((t) => h("tr", { "data-task": t.id },
    cell(h("a", { href: `#/task/${t.id}` }, t.id)), cell(t.name), cell(badge(t.status)),
    cell(t.schedule ? `${t.schedule.cron}${t.schedule.paused ? " (paused)" : ""}` : ""),
    cell(t.schedule ? when(t.schedule.next_run_at) : ""),
    cell(t.last_result ? `${t.last_result.status} (exit ${t.last_result.exit_code}), ${num(t.last_result.rows_read)} read`
      : ""),
    cell(when(t.finished_at || t.started_at || t.created_at))));
  put(view, h("h1", {}, "Tasks"), h("div", { class: "filters" }, select, input,
    h("button", { onclick: apply }, "Filter")), h("p", {}, `task database: ${doc.task_db}`),
  h("table", { id: "tasks" }, h("tr", {}, ["id", "name", "state", "schedule", "next run", "last result", "when"]
    .map((c) => h("th", {}, c))), rows));
}

function progressCard(t) {
  const p = t.progress;
  const card = h("div", { class: "card", "data-progress": t.id },
    h("h2", {}, h("a", { href: `#/task/${t.id}` }, `task ${t.id} ${t.name}`), " ", badge(t.status)));
  if (!p) return card.appendChild(h("p", {}, "waiting for its first heartbeat")) && card;
  const samples = (state.samples[t.id] = (state.samples[t.id] || []).filter((s) => s.run === p.run_id));
  if (!samples.length || samples[samples.length - 1].at !== p.at) {
    samples.push({ run: p.run_id, at: p.at, t: p.elapsed_s,
      dests: Object.fromEntries(p.destinations.map((d) => [d.id, d.written])) });
  }
  card.append(h("p", {}, `read ${num(p.rows_read)}${p.estimated_rows ? ` of ${num(p.estimated_rows)}` : ""}, `
    + `${num(p.rows_per_s)} rows/s, ${p.elapsed_s.toFixed(1)} s`),
  h("table", {}, h("tr", {}, ["destination", "state", "written", "rejected", "rows/s"].map((c) => h("th", {}, c))),
    p.destinations.map((d) => h("tr", { "data-destination": d.id }, cell(d.id), cell(badge(d.state)),
      cell(num(d.written), "num written"), cell(num(d.rejected), "num"), cell(num(d.rows_per_s), "num")))),
  rateChart(samples, p.destinations.map((d) => d.id)));
  return card;
}

function rateChart(samples, dests) {
  // rows/s between successive heartbeats, per destination: a polyline each, drawn here (no chart library).
  const W = 480, H = 120, points = {};
  let top = 1, span = 1;
  for (const d of dests) {
    points[d] = [];
    for (let i = 1; i < samples.length; i++) {
      const dt = samples[i].t - samples[i - 1].t;
      if (dt <= 0) continue;
      const rate = Math.max(0, ((samples[i].dests[d] || 0) - (samples[i - 1].dests[d] || 0)) / dt);
      points[d].push([samples[i].t, rate]);
      top = Math.max(top, rate);
    }
  }
  if (samples.length) span = Math.max(1, samples[samples.length - 1].t - samples[0].t);
  const t0 = samples.length ? samples[0].t : 0;
  const svg = h("svg", { width: W + 60, height: H + 30, class: "rate-chart", "data-samples": samples.length },
    h("line", { x1: 50, y1: H + 5, x2: W + 50, y2: H + 5, stroke: "#999" }),
    h("text", { x: 0, y: 12 }, `${num(Math.round(top))}/s`), h("text", { x: 0, y: H + 5 }, "0"),
    h("text", { x: W, y: H + 22 }, `${span.toFixed(0)} s`));
  dests.forEach((d, i) => {
    const xy = points[d].map(([t, r]) => `${50 + ((t - t0) / span) * W},${H + 5 - (r / top) * H}`).join(" ");
    svg.append(h("polyline", { points: xy, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2,
      "data-destination": d }, h("title", {}, d)),
    h("text", { x: 60 + i * 90, y: H + 22, fill: COLORS[i % COLORS.length] }, d));
  });
  return svg;
}

async function livePage(view) {
  const doc = await api("/api/running");
  put(view, h("h1", {}, "Running tasks"),
    doc.tasks.length ? doc.tasks.map(progressCard) : h("p", { id: "none-running" }, "no task is running"),
    daemonTable(doc.daemons));
  return true; // polled
}

function daemonTable(daemons) {
  return [h("h2", {}, "Daemons"), h("table", { id: "daemons" },
    h("tr", {}, ["id", "host", "pid", "state", "running", "heartbeat", "age (s)"].map((c) => h("th", {}, c))),
    daemons.map((d) => h("tr", {}, cell(d.id), cell(d.host), cell(d.pid), cell(badge(d.status)),
      cell(d.running_tasks, "num"), cell(when(d.heartbeat_at)), cell(d.heartbeat_age_s, "num"))))];
}

async function daemonsPage(view) {
  const doc = await api("/api/daemons");
  put(view, h("h1", {}, "Daemons and claims"), daemonTable(doc.daemons), h("h2", {}, "Claims"),
    h("table", { id: "claims" }, h("tr", {}, ["task", "name", "claimed by", "since", "heartbeat"]
      .map((c) => h("th", {}, c))), doc.claims.map((c) => h("tr", {}, cell(h("a", { href: `#/task/${c.task_id}` },
      c.task_id)), cell(c.name), cell(c.claimed_by), cell(when(c.started_at)), cell(when(c.heartbeat_at))))));
  return true;
}

async function taskPage(view, id) {
  const t = await api(`/api/tasks/${id}`);
  const reload = () => route();
  const buttons = [
    h("button", { id: "retry", onclick: () => act(`/api/tasks/${id}/retry`, {}, reload) }, "Retry"),
    h("button", { id: "cancel", disabled: t.status !== "running" ? "disabled" : null,
      onclick: () => act(`/api/tasks/${id}/cancel`, {}, reload) }, "Cancel"),
  ];
  if (t.schedule) {
    const paused = t.schedule.paused;
    buttons.push(h("button", { id: paused ? "resume" : "pause",
      onclick: () => act(`/api/tasks/${id}/${paused ? "resume" : "pause"}`, {}, reload) }, paused ? "Resume" : "Pause"));
  }
  put(view, 
    h("h1", {}, `Task ${t.id}: ${t.name} `, h("span", { id: "task-state" }, badge(t.status))),
    h("p", {}, buttons),
    t.error ? h("p", { class: "error", id: "task-error" }, t.error) : "",
    t.schedule ? h("p", {}, `schedule ${t.schedule.cron}, next run ${when(t.schedule.next_run_at)}`
      + `${t.schedule.paused ? ", paused" : ""}`) : "",
    t.status === "running" ? progressCard(t) : "",
    h("h2", {}, "Runs"),
    h("table", { id: "runs" }, h("tr", {}, ["run", "state", "exit", "started", "finished", "resumed from", "error"]
      .map((c) => h("th", {}, c))), t.runs.map((r) => h("tr", { "data-run": r.id },
      cell(h("a", { href: `#/task/${t.id}/run/${r.id}` }, r.id)), cell(badge(r.status)), cell(r.exit_code),
      cell(when(r.started_at)), cell(when(r.finished_at)), cell(r.resumed_from), cell(r.error)))),
    t.watermarks ? [h("h2", {}, "Watermarks"), h("pre", {}, JSON.stringify(t.watermarks, null, 2))] : "",
    h("h2", {}, "Spec"), h("pre", { id: "spec" }, JSON.stringify(t.spec, null, 2)),
    h("h2", {}, "Actions"), h("table", { id: "actions" }, t.actions.map((a) => h("tr", {}, cell(a.action),
      cell(a.actor), cell(when(a.at)), cell(a.detail)))));
  return t.status === "running" || t.status === "pending";
}

function timelineChart(tl) {
  const dests = Object.keys(tl.destinations);
  const W = 560, row = 26, end = Math.max(tl.end_s, 0.001);
  const svg = h("svg", { width: W + 140, height: dests.length * row + 24, id: "timeline" });
  dests.forEach((d, i) => {
    const y = i * row + 4;
    svg.append(h("text", { x: 0, y: y + 14 }, d));
    for (const s of tl.destinations[d].splits) {
      const x = 120 + (s.start_s / end) * W;
      svg.append(h("rect", { x, y, width: Math.max(2, ((s.end_s - s.start_s) / end) * W), height: row - 8,
        fill: COLORS[i % COLORS.length], opacity: 0.75, stroke: "#fff", "data-split": s.split },
      h("title", {}, `${s.split}: ${num(s.rows)} rows, held at ${s.end_s} s`)));
    }
    const c = tl.destinations[d].committed_s;
    if (c !== null) svg.append(h("line", { x1: 120 + (c / end) * W, x2: 120 + (c / end) * W, y1: y - 2,
      y2: y + row - 6, stroke: "#000", "stroke-width": 2 }, h("title", {}, `committed at ${c} s`)));
  });
  svg.append(h("text", { x: 120, y: dests.length * row + 18 }, "0 s"),
    h("text", { x: W + 100, y: dests.length * row + 18 }, `${end} s`));
  return svg;
}

async function runPage(view, id, runId) {
  const r = await api(`/api/tasks/${id}/runs/${runId}`);
  const dirty = r.dirty.file ? await api(`/api/tasks/${id}/runs/${runId}/dirty`) : null;
  const download = async () => {
    const res = await fetch(`/api/tasks/${id}/runs/${runId}/dirty/file`, { headers: headers(false) });
    const a = h("a", { href: URL.createObjectURL(await res.blob()), download: `task-${id}-run-${runId}-dirty.jsonl` });
    a.click();
  };
  const plan = r.plan || {};
  put(view, 
    h("h1", {}, h("a", { href: `#/task/${id}` }, `Task ${id}`), ` run ${r.id} `, h("span", { id: "run-state" },
      badge(r.status))),
    h("p", {}, `exit ${r.exit_code ?? ""}; ${r.engine || ""} engine; ${r.duration_s ?? "?"} s; `
      + `${r.resumed_from ? `resumed run ${r.resumed_from}; ` : ""}${r.interrupted ? "interrupted" : ""}`),
    r.error ? h("p", { class: "error", id: "run-error" }, r.error) : "",
    h("h2", {}, "Destinations"),
    h("table", { id: "destinations" }, h("tr", {}, ["destination", "plugin", "state", "written", "rejected", "rows/s",
      "rolled back", "resumed splits", "error"].map((c) => h("th", {}, c))),
    r.destinations.map((d) => h("tr", { "data-destination": d.id }, cell(d.id), cell(d.plugin), cell(badge(d.status)),
      cell(num(d.rows_written), "num written"), cell(num(d.rows_rejected), "num rejected"),
      cell(num(d.rows_per_s), "num"), cell(d.rolled_back ? "yes" : "no", "rolled-back"), cell(d.splits_resumed, "num"),
      cell(d.error || "")))),
    h("h2", {}, "Plan"),
    h("p", {}, `${plan.channels ?? "?"} channels (${plan.channel_reason || ""}); ${(plan.splits || []).length} splits`),
    h("h2", {}, "Timeline of the splits"), timelineChart(r.timeline),
    r.watermarks ? [h("h2", {}, "Watermarks"), h("table", { id: "watermarks" },
      h("tr", {}, ["destination", "before", "after"].map((c) => h("th", {}, c))),
      Object.entries(r.watermarks.destinations).map(([d, w]) => h("tr", {}, cell(d), cell(w.before), cell(w.after))))]
      : "",
    h("h2", {}, `Rejected rows (${num(r.dirty.rows)})`),
    dirty ? [h("button", { id: "download-dirty", onclick: download }, "Download the file"),
      h("table", { id: "dirty" }, h("tr", {}, ["where", "split", "reason", "row"].map((c) => h("th", {}, c))),
        dirty.rows.map((d) => h("tr", {}, cell(d.origin), cell(d.split), cell(d.reason, "reason"),
          cell(JSON.stringify(d.row)))))] : h("p", {}, "none"));
  return r.status === "running";
}

function submitPage(view) {
  const text = h("textarea", { id: "spec-text", spellcheck: "false" });
  const name = h("input", { id: "spec-name", placeholder: "name (default: the spec's)" });
  const out = h("div", { id: "submit-result" });
  const body = () => {
    let spec;
    try { spec = JSON.parse(text.value); } catch (e) { spec = text.value; } // the server says what is wrong
    return { spec, ...(name.value ? { name: name.value } : {}) };
  };
  const show = (e) => out.replaceChildren(h("p", { class: "error" }, e.message),
    h("ul", { class: "problems" }, (e.doc && e.doc.problems || []).map((p) => h("li", {}, p))));
  const check = async () => {
    try { await api("/api/validate", body()); out.replaceChildren(h("p", { id: "valid" }, "valid")); } catch (e) { show(e); }
  };
  const send = async () => {
    try {
      const made = await api("/api/tasks", body());
      out.replaceChildren(h("p", { id: "submitted" }, "submitted as ", h("a", { href: `#/task/${made.id}` },
        `task ${made.id}`)));
    } catch (e) { show(e); }
  };
  put(view, h("h1", {}, "Submit a task"), h("p", {}, name), text,
    h("p", {}, h("button", { id: "validate", onclick: check }, "Validate"),
      h("button", { id: "submit", onclick: send }, "Submit")), out);
}

// -- routing: #/, #/live, #/daemons, #/submit, #/task/N, #/task/N/run/M ---------------------------------

async function route() {
  clearTimeout(state.timer);
  // A page draws once its requests answer; a newer route (the user went on, the token was set) makes
  // this one stale, and a stale page must not draw over the newer one nor poll.
  const seq = ++state.seq;
  const shown = document.getElementById("view");
  const view = { replaceChildren: (...kids) => { if (seq === state.seq) shown.replaceChildren(...kids); } };
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  let poll = false;
  try {
    if (parts[0] === "task" && parts[2] === "run") poll = await runPage(view, parts[1], parts[3]);
    else if (parts[0] === "task") poll = await taskPage(view, parts[1]);
    else if (parts[0] === "live") poll = await livePage(view);
    else if (parts[0] === "daemons") poll = await daemonsPage(view);
    else if (parts[0] === "submit") submitPage(view);
    else await tasksPage(view, params);
  } catch (e) {
    put(view, h("p", { class: "error", id: "page-error" }, `${e.message}`));
  }
  const wait = (window.WH_POLL_S || 1) * 1000;
  if (poll && seq === state.seq) state.timer = setTimeout(route, wait);
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("token").value = sessionStorage.getItem("wh-token") || "";
  document.getElementById("actor").value = sessionStorage.getItem("wh-actor") || "";
  document.getElementById("auth").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("wh-token", document.getElementById("token").value.trim());
    sessionStorage.setItem("wh-actor", document.getElementById("actor").value.trim());
    flash("token set for this tab");
    route();
  });
  try { window.WH_POLL_S = (await api("/api/config")).poll_s; } catch (e) { /* the default */ }
  window.addEventListener("hashchange", route);
  route();
});
