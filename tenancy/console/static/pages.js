// The console's pages for one cluster (overview, queues, API keys,
// members) and the operators' list of clusters. Each render(view, ctx,
// life) reads the proxy's /api/console/* and builds its part from the
// answer; ctx.cluster is {slug, role}.

import { get, call, enc, page } from "./api.js";
import { h, clear, num, bytes, when, badge, table, notice, field, fail, Pager } from "./dom.js";
import { LineChart } from "./chart.js";

const api = (c, sub = "") => `/api/console/clusters/${enc(c.slug)}${sub ? "/" + sub : ""}`;

function statusBadge(s) { return badge(s || "—", s === "active" ? "ok" : s === "push_blocked" || s === "grace" ? "warn" : "bad"); }

// limitRows names the plan's limits in the order people read them.
const limitNames = [
  ["requests_per_sec", "Requests per second", num], ["requests_burst", "Request burst", num],
  ["messages_per_sec", "Messages per second", num], ["messages_burst", "Message burst", num],
  ["max_queues", "Queues", num], ["max_partitions_per_queue", "Partitions per queue", num],
  ["max_parked_pops", "Parked long-poll pops", num], ["max_payload_bytes", "Largest payload", bytes],
  ["max_items_per_push", "Items per push", num], ["max_retained_bytes", "Retained bytes", bytes],
  ["retention_days", "Retention (days)", num], ["monthly_msgs_quota", "Messages per month", num],
];

// barChart draws month-to-date messages and requests per class as SVG
// bars, the values in its accessible name.
function barChart(title, rows) {
  const ns = "http://www.w3.org/2000/svg";
  const W = 600, H = 160, pad = 18;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("class", "bars");
  const max = Math.max(1, ...rows.flatMap((r) => [r.msgs, r.reqs]));
  const slot = W / Math.max(1, rows.length);
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
  };
  el("line", { x1: 0, y1: H - pad, x2: W, y2: H - pad, class: "axis" });
  rows.forEach((r, i) => {
    const x = i * slot + slot * 0.15, w = slot * 0.33;
    for (const [k, dx] of [["msgs", 0], ["reqs", w + 4]]) {
      const hgt = (r[k] / max) * (H - 2 * pad);
      el("rect", { x: x + dx, y: H - pad - hgt, width: w, height: Math.max(hgt, 0.5), class: `bar ${k}` });
    }
    el("text", { x: x, y: H - 4 }, r.op);
  });
  svg.setAttribute("aria-label", `${title}: ` + (rows.length ? rows.map((r) => `${r.op} ${r.msgs} messages, ${r.reqs} requests`).join("; ") : "nothing yet"));
  return h("figure", { class: "panel chart", style: "margin:0" }, h("figcaption", null, h("strong", null, title)), svg,
    h("div", { class: "legend" }, h("span", null, h("i", { style: "background:var(--series-a)" }), "messages"),
      h("span", null, h("i", { style: "background:var(--series-b)" }), "requests")));
}

// refreshButton reloads a list on demand: lists with links and pagers
// are not polled, so keyboard focus stays where the user put it.
function refreshButton(load) {
  return h("p", null, h("button", { type: "button", onclick: () => load().catch(fail) }, "Refresh"));
}

function tile(label, value, id) {
  return h("div", { class: "tile" }, h("div", { class: "label" }, label), h("div", { class: "value", id }, value));
}

export const overview = {
  title: "Overview",
  async render(view, { cluster }, life) {
    const head = h("div");
    const body = h("div");
    view.append(head, body);
    life.every(5000, async () => {
      const [o, u] = await Promise.all([get(api(cluster), life.signal), get(api(cluster, "usage"), life.signal)]);
      clear(head).append(h("h1", null, `Cluster ${o.cluster.slug} `, statusBadge(o.cluster.status)));
      const ops = Object.entries(o.month_to_date || {}).map(([op, r]) => ({ op, ...r })).sort((a, b) => a.op.localeCompare(b.op));
      const sum = (k) => ops.reduce((t, r) => t + (r[k] || 0), 0);
      const pushed = (o.month_to_date && o.month_to_date.push && o.month_to_date.push.msgs) || 0;
      // The last hour, one sample a minute, summed over classes.
      const chart = new LineChart("Last hour, per minute", [{ name: "messages", color: "--series-a" }, { name: "requests", color: "--series-b" }], 60);
      const byMinute = new Map();
      for (const m of u.minutes || []) {
        const k = m.minute.slice(0, 16);
        const cur = byMinute.get(k) || { msgs: 0, reqs: 0 };
        cur.msgs += m.msgs; cur.reqs += m.reqs;
        byMinute.set(k, cur);
      }
      const now = Date.now();
      for (let i = 59; i >= 0; i--) {
        const k = new Date(now - i * 60000).toISOString().slice(0, 16);
        const v = byMinute.get(k) || { msgs: 0, reqs: 0 };
        chart.push(v.msgs, v.reqs);
      }
      const quota = o.limits && o.limits.monthly_msgs_quota;
      clear(body).append(
        h("div", { class: "tiles" },
          tile("Plan", o.cluster.plan_code, "tile-plan"), tile("Your role", o.role, "tile-role"),
          tile("Messages pushed this month", num(pushed) + (quota ? ` / ${num(quota)}` : ""), "tile-pushed"),
          tile("Requests this month", num(sum("reqs")), "tile-reqs"),
          tile("Bytes in this month", bytes(sum("bytes_in")), "tile-bytes-in"),
          tile("Bytes out this month", bytes(sum("bytes_out")), "tile-bytes-out")),
        h("div", { class: "charts" }, barChart("Month to date, by class", ops), chart.el),
        h("div", { class: "cols" },
          h("section", { "aria-labelledby": "limits-title" }, h("h2", { id: "limits-title" }, "Plan limits"),
            table(null, [{ label: "Limit", cell: (r) => r[1] }, { label: "Value", num: true, cell: (r) => r[2] }],
              limitNames.map(([k, label, fmt]) => [k, label, o.limits && k in o.limits && o.limits[k] !== null ? fmt(o.limits[k]) : "unlimited"]))),
          h("section", { "aria-labelledby": "mtd-title" }, h("h2", { id: "mtd-title" }, "Month to date"),
            table(null, [{ label: "Class", cell: (r) => r.op }, { label: "Requests", num: true, cell: (r) => num(r.reqs) },
              { label: "Messages", num: true, cell: (r) => num(r.msgs) }, { label: "Bytes in", num: true, cell: (r) => bytes(r.bytes_in) },
              { label: "Bytes out", num: true, cell: (r) => bytes(r.bytes_out) }], ops, "No traffic this month yet."),
            h("h2", null, "Features"), h("p", null, (o.features || []).length ? o.features.map((f) => [badge(f, "ok"), " "]) : "none"))));
    });
  },
};

export const queues = {
  title: "Queues",
  async render(view, { cluster }, life) {
    const out = h("div");
    view.append(h("h1", null, `Queues of ${cluster.slug}`),
      h("p", { class: "muted" }, "Read only. Open the dashboard for partitions, messages and consumer groups."),
      refreshButton(() => pager.show()), out);
    const pager = new Pager(async (cursor) => {
      const r = await page(api(cluster, "queues"), { limit: 50, cursor }, life.signal);
      return { rows: r.data.queues || [], next: r.next };
    }, (rows, controls) => clear(out).append(table(null, [
      { label: "Queue", cell: (q) => q.name },
      { label: "Partitions", num: true, cell: (q) => num(q.partitions) },
      { label: "Messages", num: true, cell: (q) => num(q.messages.total) },
      { label: "Pending", num: true, cell: (q) => num(q.messages.pending) },
      { label: "Dead letters", num: true, cell: (q) => num(q.messages.deadLetter) },
      { label: "Created", cell: (q) => new Date(q.createdAt).toLocaleString() },
    ], rows, "No queues yet: push a message with an API key to make one."), controls));
    await pager.first();
  },
};

const scopeHelp = { produce: "push", consume: "pop, ack, fetch", read: "list and read", admin: "everything" };

export const keys = {
  title: "API keys",
  async render(view, { cluster }, life) {
    const admin = cluster.role === "admin";
    const fresh = h("div", { id: "new-key-box" });
    const list = h("div");
    view.append(h("h1", null, `API keys of ${cluster.slug}`),
      h("p", { class: "muted" }, "Programs use a key as Authorization: Bearer on the data plane (HTTP and Kafka). Only its hash is kept: the key is shown once, when it is made."));
    const load = async () => {
      const r = await get(api(cluster, "keys"), life.signal);
      clear(list).append(table(null, [
        { label: "Name", cell: (k) => k.name },
        { label: "Scopes", cell: (k) => k.scopes.join(", ") },
        { label: "State", cell: (k) => k.revoked ? badge("revoked", "bad") : badge("active", "ok") },
        { label: "Action", cell: (k) => admin && !k.revoked ? h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${k.name}`,
          dataset: { revoke: k.id }, onclick: (ev) => revoke(ev.currentTarget, k) }, "Revoke") : "" },
      ], r.keys, "No keys."));
    };
    // revoke asks once on the button itself (armed).
    const revoke = async (btn, k) => {
      if (!armed(btn, `Confirm: revoke key ${k.name} for good`)) return;
      try {
        await call("DELETE", api(cluster, `keys/${enc(k.id)}`));
        fresh.replaceChildren(notice(`Key “${k.name}” revoked: programs using it are refused from now on.`, "ok"));
        await load();
      } catch (e) { fail(e); }
    };
    if (admin) {
      const name = h("input", { name: "name", required: true, maxlength: 100, autocomplete: "off", placeholder: "e.g. orders-service" });
      const boxes = ["produce", "consume", "read", "admin"].map((s) =>
        h("label", null, h("input", { type: "checkbox", name: "scope", value: s, checked: s === "produce" || s === "consume" }), `${s} (${scopeHelp[s]})`));
      const form = h("form", { class: "inline", "aria-label": "Create an API key", onsubmit: async (ev) => {
        ev.preventDefault();
        const scopes = boxes.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
        if (!scopes.length) { fresh.replaceChildren(notice("Choose at least one scope.", "bad")); return; }
        try {
          const k = (await call("POST", api(cluster, "keys"), { name: name.value.trim(), scopes })).data;
          name.value = "";
          const code = h("code", { id: "new-key" }, k.api_key);
          fresh.replaceChildren(h("div", { class: "notice ok", role: "status" },
            h("p", null, h("strong", null, `Key “${k.name}” created (${k.scopes.join(", ")}). Copy it now: it is shown this once and never again.`)),
            h("div", { class: "secret" }, code, h("button", { type: "button", onclick: async (e) => {
              try { await navigator.clipboard.writeText(k.api_key); e.currentTarget.textContent = "Copied"; } catch { getSelection().selectAllChildren(code); }
            } }, "Copy"))));
          await load();
        } catch (e) { fail(e); }
      } },
      field("Name", name), h("fieldset", null, h("legend", null, "Scopes"), boxes),
      h("button", { type: "submit", class: "primary" }, "Create key"));
      view.append(h("section", { class: "panel", "aria-labelledby": "create-title" }, h("h2", { id: "create-title", style: "margin-top:0" }, "Create a key"), form, fresh));
    } else {
      view.append(notice("Only the cluster's admins create and revoke keys."), fresh);
    }
    view.append(h("h2", null, "Keys"), list);
    await load();
  },
};

const roles = ["admin", "producer", "consumer", "viewer"];

// armed makes a destructive button ask once on itself (no modal): the
// first press arms it with a new label, the second acts.
function armed(btn, confirmLabel) {
  if (btn.dataset.armed === "1") return true;
  btn.dataset.armed = "1";
  btn.textContent = "Confirm";
  btn.setAttribute("aria-label", confirmLabel);
  return false;
}

export const members = {
  title: "Members",
  async render(view, { cluster, me }, life) {
    const said = h("div");
    const list = h("div");
    const load = async () => {
      const r = await get(api(cluster, "members"), life.signal);
      clear(list).append(table(null, [
        { label: "Email", cell: (m) => m.email },
        { label: "Role", cell: (m) => h("select", { "aria-label": `Role of ${m.email}`, dataset: { member: m.email },
          onchange: (ev) => change("PUT", m, { role: ev.currentTarget.value }, `${m.email} is now ${ev.currentTarget.value}.`) },
          roles.map((x) => h("option", { value: x, selected: x === m.role }, x))) },
        { label: "Action", cell: (m) => h("button", { type: "button", class: "danger", "aria-label": `Remove ${m.email} from ${cluster.slug}`,
          onclick: (ev) => armed(ev.currentTarget, `Confirm: remove ${m.email} from ${cluster.slug}`) &&
            change("DELETE", m, undefined, `${m.email} removed from ${cluster.slug}.`) }, "Remove") },
      ], r.members, "No members."));
    };
    const change = async (method, m, body, done) => {
      try {
        await call(method, api(cluster, `members/${enc(m.user_id)}`), body);
        said.replaceChildren(notice(done, "ok"));
      } catch (e) {
        said.replaceChildren(notice(e.message, "bad"));
      }
      if (m.user_id === me.user_id && method === "DELETE") { location.reload(); return; }
      await load();
    };
    const email = h("input", { type: "email", name: "email", required: true, autocomplete: "off" });
    const role = h("select", { name: "role" }, roles.map((x) => h("option", { value: x, selected: x === "viewer" }, x)));
    const form = h("form", { class: "inline", "aria-label": "Add a member", onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const m = (await call("POST", api(cluster, "members"), { email: email.value.trim(), role: role.value })).data;
        said.replaceChildren(notice(m.role === role.value ? `${m.email} added as ${m.role}.` : `${m.email} is already a member, as ${m.role}.`, "ok"));
        email.value = "";
        await load();
      } catch (e) { fail(e); }
    } }, field("Email", email), field("Role", role), h("button", { type: "submit", class: "primary" }, "Add member"));
    view.append(h("h1", null, `Members of ${cluster.slug}`),
      h("section", { class: "panel", "aria-labelledby": "add-title" }, h("h2", { id: "add-title", style: "margin-top:0" }, "Add a member"), form,
        h("p", { class: "muted" }, "Someone new signs in with Google or GitHub under this email. Roles: admin (everything), producer (push, read), consumer (consume, read), viewer (read). The cluster always keeps an admin.")),
      said, h("h2", null, "Members"), list);
    await load();
  },
};

export const operator = {
  title: "Clusters",
  async render(view, ctx, life) {
    const out = h("div");
    const load = async () => {
      const r = await get("/api/console/operator/clusters", life.signal);
      clear(out).append(table(null, [
        { label: "Cluster", cell: (c) => h("a", { href: `#/c/${enc(c.slug)}` }, c.slug) },
        { label: "Tenant", cell: (c) => c.tenant_slug },
        { label: "Plan", cell: (c) => c.plan_code },
        { label: "Cluster status", cell: (c) => statusBadge(c.status) },
        { label: "Tenant status", cell: (c) => statusBadge(c.tenant_status) },
        { label: "Last traffic", cell: (c) => when(c.last_traffic) },
      ], r.clusters, "No clusters."));
    };
    view.append(h("h1", null, "Every cluster"), h("p", { class: "muted" }, "Operators are admin on every cluster."), refreshButton(load), out);
    await load();
  },
};

export const byName = { overview, queues, keys, members, operator };
