// Streams: the queries Queen's SDKs registered (POST /streams/v1/queries),
// each with its source's lag and the size of its state, from GET
// /streams/v1/queries. Refreshed every 5 s while the page is open.

import { get, enc } from "../api.js";
import { h, num, bytes, when, table } from "../dom.js";

export const title = "Streams";

export async function render(view, route, life) {
  const box = h("div");
  view.append(h("h1", null, "Streams"),
    h("p", null, "Stream queries, their source queue's backlog (its most-behind consumer) and their state rows."), box);
  const show = async () => {
    const r = await get("/streams/v1/queries", life.signal);
    const qs = r.queries || [];
    box.replaceChildren(table(`${num(qs.length)} queries`, [
      { label: "Name", cell: (q) => q.name },
      { label: "Source", cell: (q) => h("a", { href: `#/queues/${enc(q.source_queue)}` }, q.source_queue) },
      { label: "Sink", cell: (q) => q.sink_queue ? h("a", { href: `#/queues/${enc(q.sink_queue)}` }, q.sink_queue) : "—" },
      { label: "Lag", num: true, cell: (q) => num(q.lag) },
      { label: "State rows", num: true, cell: (q) => num(q.state_rows) + (q.partial ? "+" : "") },
      { label: "State size", num: true, cell: (q) => bytes(q.state_bytes) + (q.partial ? "+" : "") },
      { label: "Config hash", cell: (q) => h("code", null, q.config_hash) },
      { label: "Updated", cell: (q) => when(q.updated_at) },
    ], qs, "No stream queries registered yet."));
  };
  life.every(5000, show);
}
