// System: this node's raft groups (role, leader, term, apply lag), its
// disk and memory, where each group's leader is, and, for admins, the
// cluster's membership with the actions of /api/v1/system/raft/membership;
// on a standby cluster, how far behind its source it is and its promotion.

import { get, call, ApiError } from "../api.js";
import { h, num, bytes, badge, table, field, notice, fail } from "../dom.js";

export const title = "System";

export async function render(view, route, life) {
  const node = h("div");
  const groups = h("div");
  const standby = h("div");
  const members = h("div");
  const actions = h("div");
  const result = h("div");
  view.append(h("h1", null, "System"), node, standby,
    h("h2", null, "Raft groups"), groups,
    h("h2", null, "Membership"), members, result, actions);

  life.every(3000, async () => {
    const [m, place] = await Promise.all([get("/metrics", life.signal), get("/api/v1/system/placement", life.signal)]);
    const leaders = new Map((place.groups || []).map((g) => [g.group, g.leader]));
    const d = m.disk || {};
    node.replaceChildren(h("div", { class: "tiles" },
      [["Up (s)", num(m.uptime)], ["Data dir", bytes(d.dataDirBytes)], ["Disk free", bytes(d.availableBytes)],
        ["Disk size", bytes(d.filesystemBytes)], ["Memory (RSS)", bytes(m.memory?.rss)], ["Requests", num(m.requests?.total)]]
        .map(([l, v]) => h("div", { class: "tile" }, h("div", { class: "label" }, l), h("div", { class: "value" }, v)))));
    groups.replaceChildren(table("As this node sees them", [
      { label: "Group", num: true, cell: (g) => g.group },
      { label: "Role here", cell: (g) => badge(g.role, g.role === "leader" || g.role === "follower" ? "ok" : "warn") },
      { label: "Leader (node)", num: true, cell: (g) => leaders.get(g.group) ?? g.leader ?? "—" },
      { label: "Term", num: true, cell: (g) => num(g.term) },
      { label: "Applied", num: true, cell: (g) => num(g.applied) },
      { label: "Committed", num: true, cell: (g) => num(g.commit) },
      { label: "Apply lag", num: true, cell: (g) => num(g.lag) },
      { label: "Quorum ack (ms)", num: true, cell: (g) => num(g.quorumAckMs) },
    ], m.groups || []));
    await showStandby();
    await showMembership();
  });

  // A standby's block of /health (absent on a cluster that follows
  // nothing); /health answers 503 with the same body while settling.
  async function showStandby() {
    let sb;
    try {
      sb = (await get("/health", life.signal)).standby;
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      return; // settling: keep what is shown
    }
    if (!sb) { standby.replaceChildren(); return; }
    standby.replaceChildren(h("h2", null, "Standby"),
      notice(sb.following ? `Following ${sb.source}: read-only until promoted.` : `Promoted: no longer follows ${sb.source}.`, sb.following ? "warn" : "ok"),
      h("div", { class: "tiles" }, [["Lag (entries)", num(sb.lagEntries)], ["Lag (ms)", num(sb.lagMs)]]
        .map(([l, v]) => h("div", { class: "tile" }, h("div", { class: "label" }, l), h("div", { class: "value" }, v)))),
      table("Per raft group, as this node sees it", [
        { label: "Group", num: true, cell: (g) => g.group },
        { label: "Source commit", num: true, cell: (g) => num(g.sourceCommit) },
        { label: "Applied source index", num: true, cell: (g) => num(g.appliedSourceIndex) },
        { label: "Lag (entries)", num: true, cell: (g) => num(g.lagEntries) },
        { label: "Lag (ms)", num: true, cell: (g) => num(g.lagMs) },
      ], sb.groups || []),
      sb.following ? h("div", { class: "actions" }, h("button", { type: "button", class: "danger",
        onclick: () => confirm(`Promote this standby? It stops following ${sb.source} for good and takes writes.`) &&
          act("POST", "/api/v1/system/standby/promote", undefined, "standby promoted") }, "Promote")) : null);
  }

  async function showMembership() {
    try {
      const r = await get("/api/v1/system/raft/membership", life.signal);
      const mb = r.membership;
      members.replaceChildren(table(`Leader node ${mb.leader}, term ${mb.term}`, [
        { label: "Node", num: true, cell: (n) => n.nodeId },
        { label: "Role", cell: (n) => n.voter ? badge("voter", "ok") : badge("learner", "warn") },
        { label: "Raft address", cell: (n) => n.raft || "—" },
        { label: "Live", cell: (n) => n.live ? badge("live", "ok") : badge("down", "bad") },
        { label: "Lag (entries)", num: true, cell: (n) => num(n.lag) },
        { label: "Groups", num: true, cell: (n) => num(n.groups) },
        { label: "", cell: (n) => h("button", { type: "button", class: "danger", "aria-label": `Remove node ${n.nodeId}`,
          onclick: () => confirm(`Remove node ${n.nodeId} from every raft group? Its id can never be reused.`) &&
            act("DELETE", `/api/v1/system/raft/membership/members/${n.nodeId}`, undefined, `removed node ${n.nodeId}`) }, "Remove") },
      ], mb.members || []));
      if (!actions.firstChild) actions.append(actionForms());
    } catch (e) {
      if (e instanceof ApiError && e.status === 403) {
        members.replaceChildren(notice("Membership and its actions need the operator's token (admin role, no tenant).", "bad"));
        actions.replaceChildren();
        return;
      }
      throw e;
    }
  }

  async function act(method, path, body, what) {
    try {
      const r = await call(method, `${path}?timeoutMs=30000`, body, life.signal);
      result.replaceChildren(notice(`Done: ${what}.${r.data && r.data.ok === false ? " The broker said: " + JSON.stringify(r.data) : ""}`, "ok"));
      await showMembership();
    } catch (e) {
      result.replaceChildren(notice(e instanceof ApiError ? e.describe() : String(e), "bad"));
      if (!(e instanceof ApiError)) fail(e);
    }
  }

  function actionForms() {
    const id = h("input", { type: "number", min: 1, required: true, name: "id" });
    const raft = h("input", { required: true, name: "raft", placeholder: "host:7400" });
    const http = h("input", { name: "http", placeholder: "host:6632" });
    const promote = h("input", { required: true, name: "ids", placeholder: "4, 5" });
    const voters = h("input", { required: true, name: "voters", placeholder: "1, 2, 4" });
    const ids = (s) => s.split(/[\s,]+/).filter(Boolean).map(Number);
    return h("div", { class: "cols" },
      h("form", { class: "panel", "aria-label": "Add a learner", onsubmit: (ev) => { ev.preventDefault();
        act("POST", "/api/v1/system/raft/membership/learners", { id: Number(id.value), raft: raft.value, http: http.value || undefined }, `added learner ${id.value}`); } },
      h("h2", null, "Add a learner"), field("Node id", id), field("Raft address", raft), field("HTTP address", http),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Add learner"))),
      h("form", { class: "panel", "aria-label": "Promote learners", onsubmit: (ev) => { ev.preventDefault();
        act("POST", "/api/v1/system/raft/membership/promote", { ids: ids(promote.value), force: false }, `promoted ${promote.value}`); } },
      h("h2", null, "Promote learners"), field("Node ids", promote),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Promote"))),
      h("form", { class: "panel", "aria-label": "Set the voters", onsubmit: (ev) => { ev.preventDefault();
        if (confirm(`Make exactly ${voters.value} the voters?`)) act("PUT", "/api/v1/system/raft/membership/voters", { voters: ids(voters.value), force: false }, `voters set to ${voters.value}`); } },
      h("h2", null, "Set the voters"), field("Node ids", voters),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Set voters"))));
  }
}
