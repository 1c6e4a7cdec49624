// Kafka topics: every queue is a topic (spec decision 2). The list shows
// each with its partition count; a topic's page shows its partitions
// (paged) with the node leading each, offsets and its configs.

import { page, enc, get } from "../api.js";
import { h, num, when, badge, table, Pager, pageSize } from "../dom.js";

export const title = "Kafka topics";

export async function render(view, route, life) {
  if (route.parts.length) return renderTopic(view, route.parts[0], route, life);
  const box = h("div");
  const txns = h("div");
  view.append(h("h1", null, "Kafka topics"),
    h("p", null, "Every queue is a Kafka topic and each of its partitions a Kafka partition, by index."), box,
    h("h2", null, "Open transactions"),
    h("p", null, "An open Kafka transaction holds back every pop of the partitions it wrote to until it ends or times out."),
    txns);
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
  await renderTransactions(txns, life);
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

// renderTransactions lists the tenant's open Kafka transactions, oldest
// first: the ones holding pops back longest.
async function renderTransactions(box, life) {
  const r = await get("/api/v1/resources/transactions", life.signal);
  const more = r.total > r.transactions.length ? h("p", null, `Showing the oldest ${num(r.transactions.length)} of ${num(r.total)}.`) : null;
  box.replaceChildren(table(null, [
    { label: "Transactional id", cell: (t) => h("code", null, t.transactionalId) },
    { label: "Producer", cell: (t) => `${t.producerId} / epoch ${t.producerEpoch}` },
    { label: "State", cell: (t) => badge(t.state, t.state === "Ongoing" ? "warn" : "bad") },
    { label: "Since", cell: (t) => when(t.startedAt) },
    { label: "Aborted at", cell: (t) => when(t.expiresAt) },
    { label: "Partitions", wrap: true, cell: (t) => t.partitions.map((p) => `${p.topic}[${p.partition}]`).join(", ") || "—" },
  ], r.transactions, "No open transactions."), more);
}
