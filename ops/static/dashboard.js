// The operator's picture: polls /api/summary each second and redraws. No build step: plain
// browser JavaScript and uPlot (vendored beside this file).
"use strict";
const charts = {};
const fmt = (v) => (v === null || v === undefined ? "—" : Number.isInteger(v) ? String(v) : Number(v).toFixed(2));

function counts(id, rows) {
  const table = document.getElementById(id);
  const max = Math.max(1, ...rows.map(([, v]) => Number(v) || 0));
  table.replaceChildren(...rows.map(([label, value]) => {
    const tr = document.createElement("tr");
    tr.dataset.key = label;
    const width = Math.round(((Number(value) || 0) / max) * 160);
    tr.innerHTML = `<td>${label}</td><td class="n">${fmt(value)}</td><td class="bar"><span style="width:${width}px"></span></td>`;
    return tr;
  }));
}

function entries(object) { return Object.entries(object || {}).sort(([a], [b]) => a.localeCompare(b)); }

function chart(id, labels, data) {
  const element = document.getElementById(id);
  const width = Math.max(300, element.clientWidth || 400);
  if (!charts[id]) {
    const series = [{}].concat(labels.map((label, i) => ({ label, stroke: `hsl(${(i * 57) % 360} 65% 45%)`, width: 2 })));
    charts[id] = new uPlot({ width, height: 180, series, scales: { x: { time: true } } }, data, element);
  } else {
    charts[id].setData(data);
  }
}

function render(s) {
  const STATES = Object.keys(s.states);  // the server's ProcessState order
  document.getElementById("updated").textContent = `store time ${s.at} · profile ${s.profile}`;
  counts("states", STATES.map((state) => [state, s.states[state]]));
  document.getElementById("transitions").textContent =
    entries(s.transitions).map(([k, v]) => `${k} ${fmt(v)}`).join(", ") || "none yet";
  const h = s.history;
  chart("states-chart", STATES, [h.map((x) => x.t)].concat(STATES.map((state) => h.map((x) => x.states[state]))));
  const b = s.backlog;
  counts("backlog", [["backlog (Pending)", b.pending], ["threshold", b.threshold], ["in flight", b.in_flight], ["cap", b.cap]]);
  document.getElementById("gauges").textContent = `sas.backlog ${fmt(b.gauge_backlog)}, sas.in_flight ${fmt(b.gauge_in_flight)}`;
  chart("backlog-chart", ["backlog", "threshold", "in flight", "cap"],
    [h.map((x) => x.t), h.map((x) => x.backlog), h.map(() => b.threshold), h.map((x) => x.in_flight), h.map(() => b.cap)]);
  counts("recoveries", entries(s.supervisor.recoveries));
  counts("scan", [["scan cost", s.supervisor.cost], ["pages", s.supervisor.pages], ["expired scanned", s.supervisor.items]]);
  counts("alerts", entries(s.alerts));
  document.getElementById("alerts-metric").textContent =
    entries(s.alerts_metric).map(([k, v]) => `${k} ${fmt(v)}`).join(", ") || "none yet";
  counts("agent", entries(s.agent.calls).map(([k, v]) => [`calls ${k}`, v])
    .concat([["retries", s.agent.retries], ["breaker rejections", s.agent.breaker_rejections]]));
  counts("latency", [["orders", s.latency.orders], ["p50 (s)", s.latency.p50], ["p95 (s)", s.latency.p95]]);
  counts("dead-letters", entries(s.dead_letters));
  const body = document.querySelector("#failed tbody");
  body.replaceChildren(...s.failed.map((row) => {
    const tr = document.createElement("tr");
    tr.dataset.order = row.OrderID;
    for (const value of [row.OrderID, row.ProcessState, row.FailedStep, row.LastError, row.UpdatedAt]) {
      const td = document.createElement("td");
      td.textContent = value ?? "";
      tr.append(td);
    }
    const link = document.createElement("a");
    link.href = `/order/${encodeURIComponent(row.OrderID)}`;
    link.textContent = row.OrderID;
    tr.firstChild.replaceChildren(link);
    return tr;
  }));
  const select = document.getElementById("app");
  if (select.options.length === 1) {
    for (const app of s.apps) select.add(new Option(app, app));
  }
}

async function refresh() {
  const app = document.getElementById("app").value;
  try {
    const response = await fetch(`/api/summary${app ? `?app=${encodeURIComponent(app)}` : ""}`);
    if (response.ok) render(await response.json());
  } catch (error) {
    document.getElementById("updated").textContent = `not answering: ${error}`;
  }
}

refresh();
setInterval(refresh, 1000);
