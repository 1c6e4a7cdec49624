// Overview: the broker at a glance, polled every two seconds. Rates in
// and out are the change of /metrics' message counters between polls
// (messages appended; messages delivered by pops); everything else comes
// from the paged views, first pages only.

import { get, page, ApiError } from "../api.js";
import { h, num, rate, badge, table } from "../dom.js";
import { LineChart } from "../chart.js";

export const title = "Overview";
const pollMs = 2000;

export async function render(view, route, life) {
  const tiles = {};
  const tile = (key, label) => (tiles[key] = h("div", { class: "value", id: `tile-${key}` }, "…"),
    h("div", { class: "tile" }, h("div", { class: "label" }, label), tiles[key]));
  const rates = new LineChart("Messages per second", [{ name: "in", color: "--series-a" }, { name: "out", color: "--series-b" }], 30);
  const lagChart = new LineChart("Total consumer lag (messages)", [{ name: "lag", color: "--series-c" }], 30);
  const groupsBox = h("div");
  const nodesBox = h("div");
  view.append(
    h("h1", null, "Overview"),
    h("section", { "aria-label": "Totals", class: "tiles" },
      tile("in", "Messages in / s"), tile("out", "Messages out / s"), tile("queues", "Queues"),
      tile("partitions", "Partitions"), tile("messages", "Messages stored"), tile("lag", "Total lag"),
      tile("dlq", "Dead letters"), tile("live", "Nodes live"), tile("nodes", "Raft groups led here")),
    h("section", { class: "charts", "aria-label": "Charts" }, rates.el, lagChart.el),
    h("div", { class: "cols" },
      h("section", null, h("h2", null, "Consumer groups"), groupsBox),
      h("section", null, h("h2", null, "Raft groups on this node"), nodesBox)));

  let prev = null;
  let membership = true; // admin only: asked until the token proves not to be
  life.every(pollMs, async () => {
    if (membership) {
      try {
        const ms = (await get("/api/v1/system/raft/membership", life.signal)).membership.members || [];
        tiles.live.textContent = `${ms.filter((m) => m.live).length} / ${ms.length}`;
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 403)) throw e;
        membership = false;
        tiles.live.textContent = "admin only";
      }
    }
    const [m, ov, dl, gp] = await Promise.all([
      get("/metrics", life.signal),
      get("/api/v1/resources/overview", life.signal),
      get("/api/v1/dlq?limit=1", life.signal),
      page("/api/v1/consumer-groups", { limit: 10 }, life.signal),
    ]);
    const now = performance.now();
    let inRate = 0, outRate = 0;
    if (prev) {
      const secs = Math.max((now - prev.at) / 1000, 0.001);
      inRate = Math.max(0, (m.messages.total - prev.total) / secs);
      outRate = Math.max(0, (m.messages.delivered - prev.delivered) / secs);
    }
    prev = { at: now, total: m.messages.total, delivered: m.messages.delivered };
    const lag = ov.lag?.offset?.total ?? 0;
    tiles.in.textContent = rate(inRate);
    tiles.out.textContent = rate(outRate);
    tiles.queues.textContent = num(ov.queues);
    tiles.partitions.textContent = num(ov.partitions);
    tiles.messages.textContent = num(ov.messages.total);
    tiles.lag.textContent = num(lag);
    tiles.dlq.textContent = num(dl.total);
    const gs = m.groups || [];
    tiles.nodes.textContent = `${gs.filter((g) => g.role === "leader").length} / ${gs.length}`;
    rates.push(inRate, outRate);
    lagChart.push(lag);

    groupsBox.replaceChildren(table("First ten consumer groups, by name", [
      { label: "Group", cell: (g) => h("a", { href: `#/groups/${encodeURIComponent(g.name)}` }, g.name) },
      { label: "Queue", cell: (g) => g.queueName },
      { label: "Lag", num: true, cell: (g) => num(g.totalLag) },
      { label: "State", cell: (g) => badge(g.state, g.state === "Stable" ? "ok" : g.state === "Lagging" ? "warn" : "bad") },
    ], gp.data || [], "No consumer groups yet."));
    nodesBox.replaceChildren(table(null, [
      { label: "Group", num: true, cell: (g) => g.group },
      { label: "Role", cell: (g) => badge(g.role, g.role === "leader" || g.role === "follower" ? "ok" : "warn") },
      { label: "Leader", num: true, cell: (g) => g.leader || "—" },
      { label: "Term", num: true, cell: (g) => num(g.term) },
      { label: "Apply lag", num: true, cell: (g) => num(g.lag) },
      { label: "Ready", cell: (g) => g.storageReady ? badge("yes", "ok") : badge("no", "bad") },
    ], gs));
  });
}
