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

async function refresh() {
  const response = await fetch(`/api/order/${encodeURIComponent(orderId)}`);
  const updated = document.getElementById("updated");
  if (!response.ok) { updated.textContent = (await response.json()).error; return; }
  const order = await response.json();
  updated.textContent = `${order.events.length} events`;
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
