// Kafka topics: every queue is a topic (spec decision 2). The list shows
// each with its partition count; a topic's page shows its partitions
// (paged) with the node leading each, offsets and its configs.

import { page, enc } from "../api.js";
import { h, num, badge, table, Pager, pageSize } from "../dom.js";

export const title = "Kafka topics";

export async function render(view, route, life) {
  if (route.parts.length) return renderTopic(view, route.parts[0], route, life);
  const box = h("div");
  view.append(h("h1", null, "Kafka topics"),
    h("p", null, "Every queue is a Kafka topic and each of its partitions a Kafka partition, by index."), box);
  const pager = new Pager(async (cursor) => {
    const r = await page("/api/v1/resources/queues", { limit: pageSize(route), cursor }, life.signal);
    return { rows: r.data.queues, next: r.next };
  }, (rows, controls) => box.replaceChildren(table(null, [
    { label: "Topic", cell: (q) => h("a", { href: `#/topics/${enc(q.name)}` }, q.name) },
    { label: "Partitions", num: true, cell: (q) => num(q.partitions) },
    { label: "Messages", num: true, cell: (q) => num(q.messages.total) },
    { label: "Created", cell: (q) => new Date(q.createdAt).toLocaleString() },
  ], rows, "No topics yet."), controls));
  await pager.first();
}

async function renderTopic(view, name, route, life) {
  const head = h("p");
  const parts = h("div");
  const configs = h("div");
  view.append(h("div", { class: "crumbs" }, h("a", { href: "#/topics" }, "Kafka topics"), " / ", name),
    h("h1", null, name), head, h("h2", null, "Partitions"), parts, h("h2", null, "Configs"), configs);
  const pager = new Pager(async (cursor) => {
    const r = await page(`/api/v1/resources/topics/${enc(name)}`, { limit: pageSize(route), cursor }, life.signal);
    const t = r.data;
    head.replaceChildren(`${num(t.totalPartitions)} partitions. `,
      t.kafka ? "Created through Kafka: its configs can be altered with AlterConfigs." : "Created over HTTP: its configs are read-only from Kafka.",
      " ", h("a", { href: `#/queues/${enc(name)}` }, "Open as a queue"));
    configs.replaceChildren(table(null, [
      { label: "Config", cell: (c) => h("code", null, c.name) },
      { label: "Value", cell: (c) => c.value },
      { label: "Source", cell: (c) => c.source === "topic" ? badge("set on topic", "ok") : "default" },
    ], t.configs));
    return { rows: t.partitions, next: r.next };
  }, (rows, controls) => parts.replaceChildren(table(null, [
    { label: "Partition", num: true, cell: (p) => p.index },
    { label: "Name", cell: (p) => p.name },
    { label: "Leader (node)", num: true, cell: (p) => p.leader || badge("electing", "warn") },
    { label: "Leader epoch", num: true, cell: (p) => num(p.leaderEpoch) },
    { label: "Raft group", num: true, cell: (p) => p.group },
    { label: "Log start", num: true, cell: (p) => num(p.logStartOffset) },
    { label: "High watermark", num: true, cell: (p) => num(p.highWatermark) },
  ], rows), controls));
  await pager.first();
}
