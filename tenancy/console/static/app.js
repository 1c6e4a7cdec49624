// The console's shell: who is signed in (the proxy's session cookie,
// set by /auth/login or a provider's callback), hash routes to the
// pages, the theme and the menu. Everything shown comes from the proxy's
// /api/console/* for the signed-in person; API keys are refused there.

import { get, post, ApiError } from "./api.js";
import { h, clear, notice, field } from "./dom.js";
import { Life, themeButton, foldingMenu, skipTo } from "./shell.js";
import * as pages from "./pages.js";

const view = document.getElementById("view");
const alertBox = document.getElementById("alert");
const navList = document.getElementById("nav-list");
const who = document.getElementById("who");
const signOut = document.getElementById("sign-out");

// me is the signed-in person ({user_id, email, operator, clusters}), null
// when signed out.
let me = null;

export function report(e) {
  if (e && e.name === "AbortError") return;
  if (e instanceof ApiError && e.status === 401 && me) {
    // The session ended (expired, or signed out elsewhere): back to the
    // sign-in, saying why.
    me = null;
    render().then(() => { alertBox.textContent = "Your session ended: sign in again."; });
    return;
  }
  alertBox.textContent = describe(e);
}
window.addEventListener("queen:error", (ev) => report(ev.detail));

// describe words an error for a person; the console has no tokens to ask
// for, only the sign-in.
function describe(e) {
  if (!(e instanceof ApiError)) return String((e && e.message) || e);
  if (e.status === 401) return `Signed out: ${e.message}. Sign in again.`;
  if (e.status === 403) return `Not allowed: ${e.message} (${e.path}).`;
  if (e.status === 0) return `The proxy did not answer (${e.message}).`;
  return `${e.message}${e.code ? ` (${e.code})` : ""}`;
}

let life = null;

// parseRoute reads "#/c/acme/keys" as {page: "keys", cluster: "acme"}.
function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "operator") return { page: "operator" };
  if (parts[0] === "c" && parts[1]) return { page: parts[2] || "overview", cluster: parts[1] };
  return { page: "home" };
}

function clusterOf(slug) { return me && me.clusters.find((c) => c.slug === slug); }

// navFor lists the pages of the cluster shown (members for admins), the
// operators' page, and the dashboard of the cluster this address serves.
function navFor(route) {
  const links = [];
  const c = route.cluster ? clusterOf(route.cluster) : me.clusters[0];
  const role = c ? c.role : (me.operator ? "admin" : "");
  const slug = route.cluster || (c && c.slug);
  if (slug) {
    const base = `#/c/${encodeURIComponent(slug)}`;
    links.push([`${base}`, "overview", "Overview"], [`${base}/queues`, "queues", "Queues"], [`${base}/keys`, "keys", "API keys"]);
    if (role === "admin") links.push([`${base}/members`, "members", "Members"]);
  }
  if (me.operator) links.push(["#/operator", "operator", "Clusters (operator)"]);
  navList.replaceChildren(...links.map(([href, page, label]) =>
    h("li", null, h("a", { href, "aria-current": page === route.page ? "page" : null }, label))));
  if (me.clusters.length > 1) {
    // Someone with roles on several clusters switches here, staying on
    // the same kind of page.
    const pick = h("select", { "aria-label": "Cluster", onchange: () => {
      const sub = route.page === "overview" || route.page === "operator" ? "" : `/${route.page}`;
      location.hash = `#/c/${encodeURIComponent(pick.value)}${sub}`;
    } }, me.clusters.map((x) => h("option", { value: x.slug, selected: x.slug === slug }, `${x.slug} (${x.role})`)));
    navList.prepend(h("li", null, pick));
  }
  navList.append(h("li", null, h("a", { href: "/" }, "Dashboard")));
}

async function render() {
  if (life) life.end();
  life = new Life(report);
  alertBox.textContent = "";
  closeMenu();
  clear(view);
  if (!me) {
    document.title = "Sign in · Queen console";
    navList.replaceChildren();
    who.textContent = "";
    signOut.hidden = true;
    return renderSignIn();
  }
  who.textContent = me.email;
  signOut.hidden = false;
  const route = parseRoute();
  if (route.page === "home") {
    if (me.clusters.length) { location.replace(`#/c/${encodeURIComponent(me.clusters[0].slug)}`); return; }
    if (me.operator) { location.replace("#/operator"); return; }
    navFor(route);
    view.append(h("h1", null, "No clusters"), notice("You have no role on any cluster yet: ask an admin of one to add you."));
    return;
  }
  navFor(route);
  const page = pages.byName[route.page];
  if (!page) {
    view.append(h("h1", null, "Not found"), notice(`There is no page “${route.page}”.`, "bad"));
    return;
  }
  document.title = `${page.title} · Queen console`;
  const c = route.cluster ? (clusterOf(route.cluster) || { slug: route.cluster, role: me.operator ? "admin" : "" }) : null;
  try {
    await page.render(view, { cluster: c, me }, life);
  } catch (e) {
    report(e); // a 401 goes back to the sign-in
  }
}

// renderSignIn is the local password form and the providers configured.
async function renderSignIn() {
  const email = h("input", { type: "email", name: "email", required: true, autocomplete: "username", value: "" });
  const password = h("input", { type: "password", name: "password", required: true, autocomplete: "current-password" });
  const err = h("p", { class: "error", id: "signin-error", role: "alert" });
  const providers = h("div", { class: "providers" });
  const form = h("form", { "aria-label": "Sign in", onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = "";
    if (password.value.trim().startsWith("qk_")) {
      err.textContent = "API keys are not accepted on the console: they are for programs, on the data plane. Sign in with your email and password.";
      return;
    }
    try {
      await post("/auth/login", { email: email.value.trim(), password: password.value });
    } catch (e) {
      err.textContent = e instanceof ApiError && e.status === 401 ? "Wrong email or password." : describe(e);
      password.focus();
      return;
    }
    password.value = "";
    await loadMe();
    render().then(() => view.focus());
  } },
  field("Email", email), field("Password", password), err,
  h("button", { type: "submit", class: "primary" }, "Sign in"));
  view.append(h("section", { class: "panel signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in"), form, providers,
    h("p", { class: "muted" }, "The console is for people. API keys (qk_…) are refused here: they work on the data plane only.")));
  email.focus();
  try {
    const p = await get("/auth/providers");
    if (p.google) providers.append(h("a", { class: "button", href: "/auth/google/login" }, "Sign in with Google"));
    if (p.github) providers.append(h("a", { class: "button", href: "/auth/github/login" }, "Sign in with GitHub"));
  } catch (e) { report(e); }
}

async function loadMe() {
  try {
    me = await get("/api/console/me");
  } catch (e) {
    me = null;
    if (!(e instanceof ApiError && e.status === 401)) report(e);
  }
}

signOut.addEventListener("click", async () => {
  try { await post("/auth/logout", {}); } catch (e) { report(e); return; }
  me = null;
  location.hash = "";
  render();
});

themeButton(document.getElementById("theme-toggle"));
const closeMenu = foldingMenu(document.getElementById("nav"), document.getElementById("menu-toggle"));
skipTo(document.querySelector(".skip"), view);
window.addEventListener("hashchange", () => render().then(() => view.focus()));

loadMe().then(render);
