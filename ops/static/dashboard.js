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

// Time axis labels on either clock (real, or devhost's virtual one far from now): HH:MM:SS in UTC,
// with the date when the range spans days, never uPlot's sub-second ":42.200".
function clockLabel(seconds, withDate) {
  const iso = new Date(seconds * 1000).toISOString();
  return withDate ? `${iso.slice(5, 10)} ${iso.slice(11, 19)}` : iso.slice(11, 19);
}

function timeAxis() {
  return {
    values: (u, splits) => {
      const range = (u.scales.x.max ?? 0) - (u.scales.x.min ?? 0);
      return splits.map((t) => clockLabel(t, range > 86400));
    },
    space: 70,
  };
}

function chart(id, labels, data) {
  const element = document.getElementById(id);
  const width = Math.max(300, element.clientWidth || 400);
  if (!charts[id]) {
    const series = [{ label: "time (UTC)", value: (u, t) => (t == null ? "—" : clockLabel(t, false)) }].concat(
      labels.map((label, i) => ({ label, stroke: `hsl(${(i * 57) % 360} 65% 45%)`, width: 2, value: (u, v) => fmt(v) })));
    charts[id] = new uPlot({ width, height: 160, series, scales: { x: { time: true } }, axes: [timeAxis(), {}] }, data, element);
  } else {
    charts[id].setData(data);
  }
  // The legend shows the latest sample's values unless the cursor points at another.
  const last = data[0].length - 1;
  if (last >= 0 && charts[id].cursor.idx == null) charts[id].setLegend({ idx: last });
}

function rows(selector, items, cellsOf, key) {
  const body = document.querySelector(selector);
  body.replaceChildren(...items.map((item) => {
    const tr = document.createElement("tr");
    tr.dataset.key = key(item);
    for (const value of cellsOf(item)) {
      const td = document.createElement("td");
      td.textContent = value ?? "";
      tr.append(td);
    }
    return tr;
  }));
  return body;
}

function health(s) {
  const deadLetters = Object.values(s.dead_letters).reduce((a, v) => a + (Number(v) || 0), 0);
  const alerts = Object.values(s.alerts).reduce((a, v) => a + v, 0);
  const functionFailures = s.functions.reduce((a, f) => a + f.failed, 0);
  const problems = [
    [s.failed.length, "failed orders"], [functionFailures, "function failures"],
    [deadLetters, "dead letters"], [alerts, "alerts waiting"],
  ].concat(entries(s.waiting_on).map(([dependency, n]) => [n, `orders waiting on the ${dependency}`]))
    .filter(([n]) => n > 0);
  const element = document.getElementById("health");
  element.className = problems.length ? "bad" : "good";
  element.textContent = problems.length
    ? `Needs attention: ${problems.map(([n, what]) => `${n} ${what}`).join(", ")}`
    : "Healthy: no failed order, function failure, dead letter, alert or outage";
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
  // An empty table would read as "no panel": say there is no outage instead.
  counts("waiting-on", entries(s.waiting_on).length ? entries(s.waiting_on) : [["none", 0]]);
  document.getElementById("waiting-floor").textContent =
    s.waiting_on_complete ? "" : "; at least: a state holds more records than the page reads";
  const body = rows("#failed tbody", s.failed,
    (r) => [r.OrderID, r.ProcessState, r.FailedStep, r.LastError, r.UpdatedAt], (r) => r.OrderID);
  for (const tr of body.children) {
    tr.dataset.order = tr.dataset.key;
    const link = document.createElement("a");
    link.href = `/order/${encodeURIComponent(tr.dataset.key)}`;
    link.textContent = tr.dataset.key;
    tr.firstChild.replaceChildren(link);
  }
  rows("#functions tbody", s.functions, (f) => [f.function, String(f.failed), (f.last_error || "").split("\n")[0], f.last_failed_at], (f) => f.function);
  health(s);
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
