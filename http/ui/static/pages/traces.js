// Traces: the names traces were recorded under (POST /api/v1/traces with
// traceNames) and, for one name, its newest events; the message browser
// shows one message's events with the same table.

import { get, enc } from "../api.js";
import { h, when, table, Pager, field, pretty, pageSize } from "../dom.js";

export const title = "Traces";
const newest = 100;

// traceTable renders trace events (newest first, as the API answers).
export function traceTable(events, empty = "No trace events.") {
  return table(null, [
    { label: "When", cell: (e) => when(e.createdAt) },
    { label: "Event", cell: (e) => e.eventType },
    { label: "Transaction", cell: (e) => h("code", null, e.transactionId) },
    { label: "Partition id", cell: (e) => e.partitionId },
    { label: "Group", cell: (e) => e.consumerGroup || "—" },
    { label: "Names", wrap: true, cell: (e) => (e.traceNames || []).map((n) => h("a", { href: `#/traces/${enc(n)}` }, n)).flatMap((a, i) => i ? [", ", a] : [a]) },
    { label: "Data", wrap: true, cell: (e) => h("pre", null, pretty(e.data)) },
  ], events, empty);
}

export async function render(view, route, life) {
  if (route.parts.length) return renderName(view, route.parts[0], life);
  const filter = h("input", { type: "search", name: "filter", autocomplete: "off" });
  const box = h("div");
  view.append(h("h1", null, "Traces"),
    h("form", { class: "inline", "aria-label": "Filter trace names", onsubmit: (ev) => { ev.preventDefault(); pager.first(); } },
      field("Name contains", filter), h("button", { type: "submit", class: "primary" }, "Filter")), box);
  // The broker answers at most 10,000 names; they are paged here.
  const { names } = await get("/api/v1/traces/names", life.signal);
  const size = pageSize(route);
  const pager = new Pager(async (cursor) => {
    const match = names.filter((n) => n.includes(filter.value.trim()));
    const from = cursor || 0;
    return { rows: match.slice(from, from + size), next: from + size < match.length ? from + size : null };
  }, (rows, controls) => box.replaceChildren(table(null, [
    { label: "Trace name", cell: (n) => h("a", { href: `#/traces/${enc(n)}` }, n) },
  ], rows, "No traces recorded yet."), controls));
  await pager.first();
}

async function renderName(view, name, life) {
  const r = await get(`/api/v1/traces/by-name/${enc(name)}?limit=${newest}`, life.signal);
  view.append(h("div", { class: "crumbs" }, h("a", { href: "#/traces" }, "Traces"), " / ", name),
    h("h1", null, name), h("p", null, `The newest ${newest} events recorded under this name.`),
    traceTable(r.traces || []));
}
