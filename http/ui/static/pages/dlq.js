// Dead-letter queue: rows filtered by queue and consumer group, paged,
// each with its error and payload and a Replay button (POST
// /api/v1/dlq/:id/replay puts the message back on its partition).

import { page, post, enc } from "../api.js";
import { h, num, when, table, Pager, field, pretty, notice, pageSize, fail } from "../dom.js";

export const title = "Dead letters";

export async function render(view, route, life) {
  const queue = h("input", { name: "queue", value: route.query.get("queue") || "", autocomplete: "off" });
  const group = h("input", { name: "consumerGroup", value: route.query.get("consumerGroup") || "", autocomplete: "off" });
  const status = h("div");
  const box = h("div");
  const form = h("form", { class: "inline", "aria-label": "Filter dead letters" },
    field("Queue", queue), field("Consumer group", group), h("button", { type: "submit", class: "primary" }, "Filter"));
  view.append(h("h1", null, "Dead letters"), form, status, box);

  const pager = new Pager(async (cursor) => {
    const r = await page("/api/v1/dlq", { queue: queue.value.trim(), consumerGroup: group.value.trim(), limit: pageSize(route), cursor }, life.signal);
    box.dataset.total = r.data.total;
    return { rows: r.data.messages || [], next: r.next };
  }, (rows, controls) => box.replaceChildren(table(`${num(Number(box.dataset.total))} dead letters`, [
    { label: "When", cell: (m) => when(m.dlqTimestamp || m.failedAt) },
    { label: "Queue", cell: (m) => h("a", { href: `#/queues/${enc(m.queue)}` }, m.queue) },
    { label: "Partition", cell: (m) => m.partition },
    { label: "Offset", num: true, cell: (m) => num(m.offset) },
    { label: "Group", cell: (m) => m.consumerGroup || "—" },
    { label: "Retries", num: true, cell: (m) => num(m.retryCount) },
    { label: "Error", wrap: true, cell: (m) => m.errorMessage || "—" },
    { label: "Payload", wrap: true, cell: (m) => h("pre", null, pretty(m.data)) },
    { label: "", cell: (m) => h("button", { type: "button", class: "primary", "aria-label": `Replay dead letter ${m.id}`,
      dataset: { replay: m.id }, onclick: (ev) => replay(m, ev.target) }, "Replay") },
  ], rows, "No dead letters match."), controls));

  async function replay(m, button) {
    button.disabled = true;
    try {
      const r = await post(`/api/v1/dlq/${enc(m.id)}/replay`, {}, life.signal);
      status.replaceChildren(notice(`Replayed ${m.queue}/${m.partition} offset ${m.offset}: ${r.result || "moved"}.`, "ok"));
      await pager.show();
    } catch (e) {
      button.disabled = false;
      fail(e);
    }
  }
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams({ queue: queue.value.trim(), consumerGroup: group.value.trim() });
    history.replaceState(null, "", `#/dlq?${q}`);
    pager.first().catch(fail);
  });
  await pager.first();
}
