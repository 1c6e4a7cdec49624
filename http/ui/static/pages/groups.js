// Consumer groups, HTTP and Kafka alike (a Kafka group's committed
// offsets are the same positions): the paged list with lag and state, and
// one group's positions per partition with lag, leases and seek.

import { page, post, enc } from "../api.js";
import { h, num, when, badge, table, Pager, field, notice, pageSize, fail } from "../dom.js";

export const title = "Consumer groups";

function stateBadge(s) { return badge(s, s === "Stable" ? "ok" : s === "Lagging" ? "warn" : "bad"); }

export async function render(view, route, life) {
  if (route.parts.length) return renderGroup(view, route.parts[0], route, life);
  const box = h("div");
  view.append(h("h1", null, "Consumer groups"), box);
  const pager = new Pager(async (cursor) => {
    const r = await page("/api/v1/consumer-groups", { limit: pageSize(route), cursor }, life.signal);
    return { rows: r.data || [], next: r.next };
  }, (rows, controls) => box.replaceChildren(table("One row per group and queue (or Kafka topic)", [
    { label: "Group", cell: (g) => h("a", { href: `#/groups/${enc(g.name)}` }, g.name) },
    { label: "Queue / topic", cell: (g) => h("a", { href: `#/queues/${enc(g.queueName)}` }, g.queueName) },
    { label: "Mode", cell: (g) => g.subscriptionMode || "—" },
    { label: "Members", num: true, cell: (g) => num(g.members) },
    { label: "Partitions", num: true, cell: (g) => num(g.partitionCursors) },
    { label: "Lagging partitions", num: true, cell: (g) => num(g.partitionsWithLag) },
    { label: "Lag", num: true, cell: (g) => num(g.totalLag) },
    { label: "Oldest unconsumed (s)", num: true, cell: (g) => num(g.maxTimeLag) },
    { label: "State", cell: (g) => stateBadge(g.state) },
  ], rows, "No consumer groups yet."), controls));
  await pager.first();
}

async function renderGroup(view, name, route, life) {
  const box = h("div");
  view.append(h("div", { class: "crumbs" }, h("a", { href: "#/groups" }, "Consumer groups"), " / ", name),
    h("h1", null, name),
    h("p", null, "A Kafka group's members are as its coordinator recorded them at the last rebalance. Lag is messages after the group's position; a lease is an HTTP consumer holding the partition now. Refreshed every 3 seconds."),
    box);
  // The detail answers an object keyed by queue, one page of them; a
  // Kafka group's members come from its coordinator's record.
  life.every(3000, async () => {
    const [r, m] = await Promise.all([
      page(`/api/v1/consumer-groups/${enc(name)}`, { limit: pageSize(route) }, life.signal),
      page(`/api/v1/consumer-groups/${enc(name)}/members`, { limit: pageSize(route) }, life.signal),
    ]);
    const queues = Object.entries(r.data || {});
    if (document.activeElement && box.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return; // do not reset a form being typed in
    box.replaceChildren(members(m.data),
      ...queues.map(([queue, d]) => section(name, queue, d, life)),
      queues.length ? "" : notice("This group has no positions."));
  });
}

// members shows a Kafka group's members as of its last settled
// generation; nothing for a group without a Kafka membership.
function members(m) {
  if (!m || !m.kafka) return "";
  return h("section", { class: "panel", "aria-label": "Kafka members" },
    h("h2", null, `Kafka members: ${num(m.totalMembers)}`, " ",
      h("span", { class: "badge ok" }, `generation ${m.generation}`), " ",
      h("span", { class: "badge ok" }, `${m.protocolType} / ${m.protocol}`)),
    table(null, [
      { label: "Client id", cell: (x) => x.clientId },
      { label: "Host", cell: (x) => x.clientHost },
      { label: "Member id", cell: (x) => h("code", null, x.memberId) },
      { label: "Role", cell: (x) => x.memberId === m.leader ? badge("leader", "ok") : "member" },
      { label: "Assigned partitions", wrap: true, cell: (x) => (x.assignment || [])
        .map((a) => `${a.topic}: ${a.partitions.join(", ")}`).join("; ") || "—" },
    ], m.members));
}

function section(group, queue, d, life) {
  const parts = d.partitions || [];
  const total = parts.reduce((a, p) => a + (p.offsetLag || 0), 0);
  const out = h("div");
  const seek = async (path, body, what) => {
    try {
      await post(path, body, life.signal);
      out.replaceChildren(notice(`Moved ${what}. New positions show on the next refresh.`, "ok"));
    } catch (e) { fail(e); }
  };
  const at = h("input", { type: "datetime-local", name: "at", required: true });
  const base = `/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}`;
  return h("section", { class: "panel", "aria-label": `${group} on ${queue}` },
    h("h2", null, h("a", { href: `#/queues/${enc(queue)}` }, queue), " ",
      h("span", { class: "badge ok" }, `mode ${d.subscriptionMode || "—"}`), " ",
      h("span", { class: "group-lag", dataset: { lag: total } }, `lag ${num(total)}`)),
    table(null, [
      { label: "Partition", cell: (p) => p.partition },
      { label: "Position", num: true, cell: (p) => num(p.offset) },
      { label: "High watermark", num: true, cell: (p) => num(p.highWatermark) },
      { label: "Lag", num: true, cell: (p) => num(p.offsetLag) },
      { label: "Oldest unconsumed (s)", num: true, cell: (p) => num(p.timeLagSeconds) },
      { label: "Lease", cell: (p) => p.leaseActive ? badge(`until ${when(p.leaseExpiresAt)}`, "warn") : "—" },
      { label: "Last consumed", cell: (p) => when(p.lastConsumedAt) },
      { label: "", cell: (p) => h("button", { type: "button", "aria-label": `Seek ${p.partition} to its end`,
        onclick: () => confirm(`Move ${group} to the end of ${queue}/${p.partition}? Unconsumed messages there will be skipped.`) &&
          seek(`${base}/partitions/${enc(p.partition)}/seek`, { toEnd: true }, `${p.partition} to its end`) }, "Seek to end") },
    ], parts),
    h("form", { class: "inline", "aria-label": `Seek ${group} on ${queue}`, onsubmit: (ev) => {
      ev.preventDefault();
      seek(`${base}/seek`, { timestamp: new Date(at.value).toISOString() }, `every partition to ${at.value}`);
    } }, field("Seek every partition to a time (local)", at), h("button", { type: "submit" }, "Seek to time"),
    h("button", { type: "button", onclick: () => confirm(`Move ${group} to the end of every partition of ${queue}?`) &&
      seek(`${base}/seek`, { toEnd: true }, "every partition to its end") }, "Seek all to end")),
    out);
}
