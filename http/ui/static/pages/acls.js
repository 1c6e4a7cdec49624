// ACLs: the tenant's bindings (GET /api/v1/system/acls, admin level),
// filtered by principal, resource type and name as the route filters
// them. With ACLs off the broker answers security_disabled and the page
// says so instead of an error.

import { get, enc, ApiError } from "../api.js";
import { h, table, Pager, field, notice, pageSize, fail } from "../dom.js";

export const title = "ACLs";

const resourceTypes = ["", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"];

export async function render(view, route, life) {
  const principal = h("input", { type: "search", name: "principal", autocomplete: "off", placeholder: "User:alice", value: route.query.get("principal") || "" });
  const resourceName = h("input", { type: "search", name: "resourceName", autocomplete: "off", value: route.query.get("resourceName") || "" });
  const resourceType = h("select", { name: "resourceType" },
    resourceTypes.map((t) => h("option", { value: t, selected: t === (route.query.get("resourceType") || "") }, t || "any")));
  const match = h("input", { type: "checkbox", name: "match", checked: route.query.get("patternType") === "MATCH" });
  const box = h("div");
  view.append(h("h1", null, "ACLs"),
    h("p", null, "Who may do what on which queue (topic), consumer group and the cluster, on both doors. ",
      "Read the operation table in docs/security.md; change them with POST and DELETE /api/v1/system/acls or a Kafka admin tool."),
    h("form", { class: "inline", "aria-label": "Filter ACLs", onsubmit: (ev) => { ev.preventDefault(); load().catch(fail); } },
      field("Principal", principal), field("Resource type", resourceType), field("Resource name", resourceName),
      field("Bindings that apply to the name (MATCH)", match),
      h("button", { type: "submit", class: "primary" }, "Filter")), box);
  const size = pageSize(route);
  let acls = [];
  const pager = new Pager(async (cursor) => {
    const from = cursor || 0;
    return { rows: acls.slice(from, from + size), next: from + size < acls.length ? from + size : null };
  }, (rows, controls) => box.replaceChildren(table(null, [
    { label: "Principal", cell: (b) => h("code", null, b.principal) },
    { label: "Permission", cell: (b) => h("span", { class: `badge ${b.permission === "DENY" ? "bad" : "ok"}` }, b.permission) },
    { label: "Operation", cell: (b) => b.operation },
    { label: "Resource type", cell: (b) => b.resourceType },
    { label: "Pattern", cell: (b) => b.patternType },
    { label: "Resource name", wrap: true, cell: (b) => b.resourceType === "TOPIC" && b.patternType === "LITERAL" && b.resourceName !== "*"
      ? h("a", { href: `#/queues/${enc(b.resourceName)}` }, b.resourceName) : h("code", null, b.resourceName) },
    { label: "Host", cell: (b) => b.host },
  ], rows, "No ACLs match."), controls));
  async function load() {
    const q = new URLSearchParams();
    if (principal.value.trim()) q.set("principal", principal.value.trim());
    if (resourceType.value) q.set("resourceType", resourceType.value);
    if (resourceName.value.trim()) q.set("resourceName", resourceName.value.trim());
    if (match.checked) q.set("patternType", "MATCH");
    let r;
    try {
      r = await get(`/api/v1/system/acls${q.size ? "?" + q : ""}`, life.signal);
    } catch (e) {
      if (e instanceof ApiError && e.code === "security_disabled") {
        box.replaceChildren(notice("ACLs are off on this broker (QUEEN_ACLS=false): every request is judged by its token's role alone."));
        return;
      }
      throw e;
    }
    acls = r.acls || [];
    await pager.first();
  }
  await load();
}
