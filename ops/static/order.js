// One order's timeline, from /api/order/<id>, refreshed each second.
"use strict";
const orderId = decodeURIComponent(location.pathname.split("/").pop());
document.getElementById("order-id").textContent = orderId;

function cells(tr, values) {
  for (const value of values) {
    const td = document.createElement("td");
    td.textContent = value === null || value === undefined ? "" : typeof value === "object" ? JSON.stringify(value) : String(value);
    tr.append(td);
  }
  return tr;
}

const SVG = "http://www.w3.org/2000/svg";
const LABEL = 170, LANE = 34;

function svg(name, attributes, parent) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  parent.append(element);
  return element;
}

function titled(element, item) {
  svg("title", {}, element).textContent = `${item.name} · ${item.start}${item.end !== item.start ? ` → ${item.end}` : ""}${item.detail ? ` · ${item.detail}` : ""}`;
  element.dataset.name = item.name;
  element.dataset.kind = item.kind;
  return element;
}

// One row per lane; x is time. Drawn in SVG: no dependency beyond the browser.
function drawLanes(lanes) {
  const times = lanes.flatMap((l) => l.items.flatMap((i) => [Date.parse(i.start), Date.parse(i.end)]));
  const host = document.getElementById("lanes");
  const WIDTH = Math.max(600, host.clientWidth || 1100);  // the section's width: no scaling of the text
  if (!times.length) { host.textContent = "no spans yet for this order"; return; }
  const t0 = Math.min(...times), t1 = Math.max(t0 + 1, ...times);
  const x = (t) => LABEL + ((t - t0) / (t1 - t0)) * (WIDTH - LABEL - 20);
  const root = document.createElementNS(SVG, "svg");
  const height = lanes.length * LANE + 24;
  Object.entries({ class: "timeline", width: WIDTH, height, viewBox: `0 0 ${WIDTH} ${height}` })
    .forEach(([k, v]) => root.setAttribute(k, v));
  lanes.forEach((lane, n) => {
    const y = n * LANE;
    const row = svg("g", { "data-lane": lane.lane, class: "lane-row" }, root);
    svg("rect", { class: "lane", x: 0, y: y + 2, width: WIDTH, height: LANE - 4 }, row);
    svg("text", { x: 6, y: y + LANE / 2 + 4 }, row).textContent = lane.lane === "order" ? "order" : `attempt ${lane.lane}`;
    for (const item of lane.items) {
      const start = x(Date.parse(item.start));
      if (item.kind === "bar") {
        const width = Math.max(2, x(Date.parse(item.end)) - start);
        titled(svg("rect", { class: `bar ${item.source}`, x: start, y: y + 8, width, height: LANE - 16 }, row), item);
      } else {
        const kind = item.source;
        const points = `${start},${y + 6} ${start + 5},${y + LANE / 2} ${start},${y + LANE - 6} ${start - 5},${y + LANE / 2}`;
        titled(svg("polygon", { class: `marker ${kind}`, points }, row), item);
      }
    }
  });
  const axis = lanes.length * LANE + 4;
  svg("line", { class: "axis", x1: LABEL, x2: WIDTH - 20, y1: axis, y2: axis }, root);
  for (let k = 0; k <= 4; k += 1) {
    const t = t0 + ((t1 - t0) * k) / 4;
    svg("text", { x: x(t), y: axis + 16, "text-anchor": k === 0 ? "start" : k === 4 ? "end" : "middle" }, root).textContent = new Date(t).toISOString().slice(11, 23);
  }
  host.replaceChildren(root);
}

async function refresh() {
  const response = await fetch(`/api/order/${encodeURIComponent(orderId)}`);
  const updated = document.getElementById("updated");
  if (!response.ok) { updated.textContent = (await response.json()).error; return; }
  const order = await response.json();
  updated.textContent = `${order.events.length} events, ${order.lanes.length - 1} attempts`;
  drawLanes(order.lanes);
  document.getElementById("record").replaceChildren(...Object.entries(order.record).map(([key, value]) => {
    const tr = cells(document.createElement("tr"), [key, value]);
    tr.dataset.key = key;
    return tr;
  }));
  document.querySelector("#timeline tbody").replaceChildren(...order.events.map((e) => {
    const tr = cells(document.createElement("tr"), [e.at, e.source, e.what, e.detail]);
    tr.dataset.source = e.source;
    return tr;
  }));
}

refresh();
setInterval(refresh, 1000);
