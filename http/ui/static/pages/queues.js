// Queues: the paged list with depth and rates; one queue's partitions
// (paged) with offsets, leases and consumption; and a message browser
// reading a partition from an offset or a time, showing payload, key,
// headers and the message's trace.

import { get, page, post, enc } from "../api.js";
import { traceTable } from "./traces.js";
import { h, num, rate, when, table, Pager, field, pretty, notice, clear, pageSize } from "../dom.js";

export const title = "Queues";

export async function render(view, route, life) {
  if (route.parts.length) return renderQueue(view, route.parts[0], route, life);
  const box = h("div");
  view.append(h("h1", null, "Queues"), box);
  const pager = new Pager(async (cursor) => {
    // Both listings page by queue name, so one cursor serves both.
    const from = new Date(Date.now() - 5 * 60000).toISOString();
    const [qs, lag] = await Promise.all([
      page("/api/v1/status/queues", { limit: pageSize(route), cursor }, life.signal),
      page("/api/v1/analytics/queue-lag", { limit: pageSize(route), cursor, from }, life.signal),
    ]);
    const byName = new Map((lag.data.queues || []).map((q) => [q.queue, q]));
    const rows = qs.data.queues.map((q) => ({ ...q, lag: byName.get(q.name) || {} }));
    box.dataset.total = qs.data.total;
    return { rows, next: qs.next, total: qs.data.total };
  }, (rows, controls) => {
    box.replaceChildren(table(`${num(Number(box.dataset.total))} queues; rates over the last five minutes`, [
      { label: "Queue", cell: (q) => h("a", { href: `#/queues/${enc(q.name)}` }, q.name) },
      { label: "Partitions", num: true, cell: (q) => num(q.partitions) },
      { label: "Messages", num: true, cell: (q) => num(q.messages.total) },
      { label: "Pending", num: true, cell: (q) => num(q.messages.pending) },
      { label: "Leased", num: true, cell: (q) => num(q.messages.processing) },
      { label: "Dead letters", num: true, cell: (q) => num(q.messages.deadLetter) },
      { label: "Lag", num: true, cell: (q) => num(q.lag.lagMessages) },
      { label: "In / s", num: true, cell: (q) => rate(q.lag.pushPerSecond) },
      { label: "Out / s", num: true, cell: (q) => rate(q.lag.popPerSecond) },
    ], rows, "No queues yet: push a message or produce to a Kafka topic."), controls);
  });
  await pager.first();
}

async function renderQueue(view, name, route, life) {
  const head = h("div");
  const parts = h("div");
  const browser = h("section", { "aria-labelledby": "browser-title" });
  view.append(
    h("div", { class: "crumbs" }, h("a", { href: "#/queues" }, "Queues"), " / ", name),
    h("h1", null, name), head,
    h("h2", null, "Partitions"), parts,
    h("h2", { id: "browser-title" }, "Message browser"), browser);
  const ids = new Map(); // partition name -> partition id, for traces
  const pager = new Pager(async (cursor) => {
    const q = (await page(`/api/v1/resources/queues/${enc(name)}`, { limit: pageSize(route), cursor }, life.signal));
    renderHead(head, q.data);
    q.data.partitions.forEach((p) => ids.set(p.name, p.id));
    return { rows: q.data.partitions, next: q.next };
  }, (rows, controls) => {
    parts.replaceChildren(table(null, [
      { label: "Index", num: true, cell: (p) => p.index },
      { label: "Partition", cell: (p) => p.name },
      { label: "Log start", num: true, cell: (p) => num(p.logStartOffset) },
      { label: "High watermark", num: true, cell: (p) => num(p.highWatermark) },
      { label: "Pending", num: true, cell: (p) => num(p.messages.pending) },
      { label: "Leased", num: true, cell: (p) => num(p.messages.processing) },
      { label: "Completed", num: true, cell: (p) => num(p.messages.completed) },
      { label: "Dead letters", num: true, cell: (p) => num(p.messages.deadLetter) },
      { label: "Consumed (all groups)", num: true, cell: (p) => num(p.cursor.totalConsumed) },
      { label: "Last activity", cell: (p) => when(p.lastActivity) },
      { label: "", cell: (p) => h("button", { type: "button", "aria-label": `Browse partition ${p.name}`,
        onclick: () => { form.partition.value = p.name; form.requestSubmit(); } }, "Browse") },
    ], rows), controls);
  });
  const form = browserForm(name, browser, ids, life);
  await pager.first();
  if (route.query.get("partition")) {
    form.partition.value = route.query.get("partition");
    form.requestSubmit();
  }
}

function renderHead(head, q) {
  const t = q.totals || {};
  head.replaceChildren(h("div", { class: "tiles" },
    [["Messages", t.total], ["Pending", t.pending], ["Leased", t.processing], ["Completed", t.completed],
      ["Dead letters", t.deadLetter]].map(([l, v]) =>
      h("div", { class: "tile" }, h("div", { class: "label" }, l), h("div", { class: "value" }, num(v))))),
  h("details", { class: "panel" }, h("summary", null, "Configuration"),
    h("dl", { class: "kv" }, Object.entries(q.config || {}).sort().map(([k, v]) => [h("dt", null, k), h("dd", null, String(v))]))));
}

const shown = 20;

function browserForm(queue, box, ids, life) {
  const partition = h("input", { name: "partition", required: true, value: "Default", autocomplete: "off" });
  const mode = h("select", { name: "mode" }, h("option", { value: "offset" }, "From offset"), h("option", { value: "time" }, "From time"),
    h("option", { value: "earliest" }, "From the start"), h("option", { value: "latest" }, "Newest"));
  const offset = h("input", { name: "offset", type: "number", min: 0, value: 0 });
  const at = h("input", { name: "at", type: "datetime-local" });
  const out = h("div", { id: "browser-out" });
  const form = h("form", { class: "inline", "aria-label": "Read messages" },
    field("Partition", partition), field("Read", mode), field("Offset", offset), field("Time (local)", at),
    h("button", { type: "submit", class: "primary" }, "Read"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      let from = Number(offset.value) || 0;
      if (mode.value !== "offset") {
        const ts = mode.value === "time" ? new Date(at.value || Date.now()).toISOString() : mode.value;
        const r = await post("/api/v1/fetch/offsets", { entries: [{ queue, partition: partition.value, timestamp: ts }] }, life.signal);
        const e = r.entries[0];
        if (e.error) throw new Error(`${partition.value}: ${e.error}`);
        from = mode.value === "latest" ? Math.max(e.highWatermark - shown, e.logStartOffset) : e.offset;
      }
      await read(queue, partition.value, from, out, ids, life, (next) => { mode.value = "offset"; offset.value = next; form.requestSubmit(); });
    } catch (e) {
      if (e.name !== "AbortError") out.replaceChildren(notice(e.describe ? e.describe() : e.message, "bad"));
    }
  });
  box.append(form, out);
  return form;
}

async function read(queue, partition, from, out, ids, life, goto) {
  const r = await post("/api/v1/fetch", { entries: [{ queue, partition, offset: from, maxBytes: 256 << 10 }] }, life.signal);
  const e = r.entries[0];
  if (e.error) {
    out.replaceChildren(notice(`${partition} @ ${from}: ${e.error} (log ${e.logStartOffset}–${e.highWatermark})`, "bad"));
    return;
  }
  const recs = e.records.slice(0, shown);
  const last = recs.length ? recs.at(-1).offset : from - 1;
  out.replaceChildren(
    h("p", null, `Partition ${partition}: offsets ${num(e.logStartOffset)} to ${num(e.highWatermark - 1)}; showing ${recs.length} from ${num(from)}.`),
    table(null, [
      { label: "Offset", num: true, cell: (m) => m.offset },
      { label: "Time", cell: (m) => when(m.ts) },
      { label: "Key", cell: (m) => m.key === undefined ? "—" : h("code", null, pretty(m.key)) },
      { label: "Headers", wrap: true, cell: (m) => m.headers?.length ? h("code", null, m.headers.map((x) => `${x.key}=${pretty(x.value ?? "")}`).join(", ")) : "—" },
      { label: "Payload", wrap: true, cell: (m) => h("pre", null, (m.encoding ? `[${m.encoding}] ` : "") + pretty(m.payload)) },
      { label: "Transaction", cell: (m) => h("code", null, m.transactionId) },
      { label: "", cell: (m) => h("button", { type: "button", "aria-label": `Trace of offset ${m.offset}`,
        onclick: (ev) => trace(queue, partition, m, ids, ev.target, life) }, "Trace") },
    ], recs, "No messages at this offset."),
    h("div", { class: "pager" },
      h("button", { type: "button", disabled: from <= e.logStartOffset, onclick: () => goto(Math.max(e.logStartOffset, from - shown)) }, "Older"),
      h("button", { type: "button", disabled: last + 1 >= e.highWatermark, onclick: () => goto(last + 1) }, "Newer")));
}

async function trace(queue, partition, m, ids, button, life) {
  const cell = button.closest("tr");
  let pid = ids.get(partition);
  if (!pid) {
    const r = await get(`/api/v1/messages?queue=${enc(queue)}&partition=${enc(partition)}&limit=1`, life.signal);
    pid = r.messages[0]?.partitionId;
  }
  const row = h("tr", null, h("td", { colspan: 7, class: "wrap" }, "…"));
  cell.after(row);
  try {
    const t = await get(`/api/v1/traces/${enc(pid)}/${enc(m.transactionId)}`, life.signal);
    clear(row.firstChild).append(traceTable(t.traces || [], "No trace events for this message."));
  } catch (e) {
    clear(row.firstChild).append(notice(e.describe ? e.describe() : e.message, "bad"));
  }
}
