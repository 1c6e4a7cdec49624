// The dashboard's shell: hash routes to pages, the theme, the sign-in
// dialog when the broker wants a token, and the life of a page (its
// polls and requests stop when the user leaves it).

import { get, token, setToken, onUnauthorized, ApiError } from "./api.js";
import { clear, notice } from "./dom.js";
import { Life, themeButton, foldingMenu, skipTo } from "./shell.js";
import * as overview from "./pages/overview.js";
import * as queues from "./pages/queues.js";
import * as groups from "./pages/groups.js";
import * as dlq from "./pages/dlq.js";
import * as topics from "./pages/topics.js";
import * as traces from "./pages/traces.js";
import * as streams from "./pages/streams.js";
import * as system from "./pages/system.js";
import * as acls from "./pages/acls.js";

const pages = { overview, queues, groups, dlq, traces, streams, topics, system, acls };
const view = document.getElementById("view");
const alertBox = document.getElementById("alert");

// report shows an error to the user; aborted requests of a left page are
// not errors.
export function report(e) {
  if (e && e.name === "AbortError") return;
  alertBox.textContent = e instanceof ApiError ? e.describe() : String(e && e.message || e);
}
export function clearReport() { alertBox.textContent = ""; }
window.addEventListener("queen:error", (ev) => report(ev.detail));

let life = null;

// parseRoute reads "#/queues/orders?x=1" as {page, parts, query}.
function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const page = pages[parts[0]] ? parts.shift() : "overview";
  return { page, parts, query: new URLSearchParams(qs || "") };
}

async function render() {
  if (life) life.end();
  life = new Life(report);
  clearReport();
  const route = parseRoute();
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === route.page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  closeMenu();
  clear(view);
  const p = pages[route.page];
  document.title = `${p.title} · Queen`;
  try {
    await p.render(view, route, life);
  } catch (e) {
    report(e);
    if (e instanceof ApiError && (e.status === 401 || e.status === 403)) view.append(notice(e.describe(), "bad"));
  }
}

themeButton(document.getElementById("theme-toggle"));
const closeMenu = foldingMenu(document.getElementById("nav"), document.getElementById("menu-toggle"));

// Sign-in: a 401 anywhere opens the dialog once; the token is checked
// against a read route (a 403 still means the token is valid, its role
// just cannot read there).
const dialog = document.getElementById("token-dialog");
const tokenButton = document.getElementById("token-button");
function showSignedIn() { tokenButton.hidden = !token(); }
onUnauthorized((err) => {
  if (err.sentToken !== token()) return; // the user signed in since this call left
  setToken("");
  showSignedIn();
  if (!dialog.open) {
    document.getElementById("token-error").textContent = "";
    dialog.showModal();
    document.getElementById("token-input").focus();
  }
});
document.getElementById("token-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = document.getElementById("token-input");
  const errEl = document.getElementById("token-error");
  setToken(input.value.trim());
  try {
    await get("/api/v1/resources/overview");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      errEl.textContent = "This token was refused (invalid, expired, or for another broker).";
      if (!dialog.open) dialog.showModal();
      return;
    }
  }
  input.value = "";
  dialog.close();
  showSignedIn();
  render();
});
dialog.addEventListener("cancel", (ev) => ev.preventDefault()); // nothing works without a token
tokenButton.addEventListener("click", () => { setToken(""); showSignedIn(); location.reload(); });
showSignedIn();

skipTo(document.querySelector(".skip"), view);

// Moving between pages puts focus on the new content, as a page load
// would put it at the top; the first load leaves it at the top, where
// the skip link is the first stop.
window.addEventListener("hashchange", () => render().then(() => view.focus()));
render();
