// Small DOM helpers shared by the pages: an element builder, tables with
// a pager, number and time formats, notices. No framework: pages rebuild
// their parts from data.

import { visible } from "./names.js";

// h builds an element: h("a", {href: "#"}, "text", child...). Attributes
// starting with "on" become listeners; null/false children are skipped.
// Text children are shown with visible (names.js): names come from
// clients, and a bidi override or an invisible character in one must not
// disguise it.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(visible(c)));
  }
  return el;
}

export function clear(el) { while (el.firstChild) el.firstChild.remove(); return el; }

const nf = new Intl.NumberFormat();
export function num(n) {
  if (n === null || n === undefined || n === "") return "—";
  return typeof n === "number" ? nf.format(n) : String(n);
}
export function rate(n) {
  if (n === null || n === undefined) return "—";
  return n >= 100 ? nf.format(Math.round(n)) : n.toFixed(n >= 10 ? 1 : 2);
}
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toLocaleString();
}
export function badge(text, kind) { return h("span", { class: `badge ${kind}` }, text); }

// table renders rows under columns [{label, num?, cell(row) -> node|text}].
export function table(caption, columns, rows, empty = "Nothing here yet.") {
  if (!rows.length) return h("div", { class: "table-wrap" }, h("p", { class: "empty" }, empty));
  return h("div", { class: "table-wrap" },
    h("table", null,
      caption ? h("caption", null, caption) : null,
      h("thead", null, h("tr", null, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
      h("tbody", null, rows.map((r) => h("tr", null, columns.map((c) =>
        h("td", { class: c.num ? "num" : c.wrap ? "wrap" : null }, c.cell(r))))))));
}

// fail hands an error from an event handler to the app, which shows it
// (app.js listens): handlers have no caller to throw to.
export function fail(e) { window.dispatchEvent(new CustomEvent("queen:error", { detail: e })); }

// Pager walks a cursor-paged listing: load(cursor) answers {rows, next}.
// It keeps the cursors of the pages before, so Previous works too.
export class Pager {
  constructor(load, render) {
    this.load = load; this.render = render;
    this.stack = []; this.cursor = null; this.next = null;
  }
  async first() { this.stack = []; this.cursor = null; return this.show(); }
  async show() {
    const { rows, next } = await this.load(this.cursor);
    this.next = next;
    this.render(rows, this.controls());
  }
  controls() {
    return h("div", { class: "pager" },
      h("button", { type: "button", disabled: !this.stack.length, onclick: () => { this.cursor = this.stack.pop(); this.show().catch(fail); } }, "Previous"),
      h("span", null, `Page ${this.stack.length + 1}`),
      h("button", { type: "button", disabled: !this.next, onclick: () => { this.stack.push(this.cursor); this.cursor = this.next; this.show().catch(fail); } }, "Next"));
  }
}

// pageSize is how many rows a list shows: the route's ?limit= when given
// (a link can ask for a smaller page), else 50.
export function pageSize(route) {
  const n = Number(route.query.get("limit"));
  return Number.isInteger(n) && n > 0 && n <= 1000 ? n : 50;
}

export function notice(text, kind = "") { return h("p", { class: `notice ${kind}`, role: kind === "bad" ? "alert" : "status" }, text); }

export function field(label, input) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), input);
}

// pretty shows a payload: JSON indented, anything else as it came.
export function pretty(v) {
  if (v === undefined) return "";
  if (typeof v === "string") return v;
  return JSON.stringify(v, null, 2);
}
