// The broker's HTTP API as the pages call it: JSON in and out, the
// token from sessionStorage as a Bearer header, errors as ApiError with
// the status and the broker's {error, code}. Nothing here knows a page.

const tokenKey = "queen.token";

export function token() { return sessionStorage.getItem(tokenKey) || ""; }
export function setToken(t) {
  if (t) sessionStorage.setItem(tokenKey, t); else sessionStorage.removeItem(tokenKey);
}

export class ApiError extends Error {
  constructor(status, body, path) {
    const msg = (body && (body.error || body.message)) || `HTTP ${status}`;
    super(msg);
    this.status = status;
    this.code = body && body.code;
    this.path = path;
  }
  // What to tell a person: which request failed and why, in words.
  describe() {
    if (this.status === 401) return "Authentication required: sign in with a token.";
    if (this.status === 403) return `Insufficient permissions: your token's role may not call ${this.path}.`;
    if (this.status === 0) return `The broker did not answer (${this.message}).`;
    return `${this.message}${this.code ? ` (${this.code})` : ""} — ${this.path}`;
  }
}

// Listeners told when a call answers 401, so the app can ask for a token.
const unauthorized = new Set();
export function onUnauthorized(fn) { unauthorized.add(fn); }

// call sends one request. body, when given, is sent as JSON. It answers
// {data, headers, status}; data is null for an empty body (204).
export async function call(method, path, body, signal) {
  // X-Queen-Web: sent by these pages only (a page elsewhere cannot add it
  // without a CORS preflight nobody grants), so behind the proxy the
  // console's session cookie may carry this call's change.
  const headers = { "Accept": "application/json", "X-Queen-Web": "1" };
  const t = token();
  if (t) headers["Authorization"] = "Bearer " + t;
  let init = { method, headers, signal };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, { error: e.message }, path);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { error: text }; }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data, path);
    err.sentToken = t; // a 401 for an older token must not sign out a newer one
    if (res.status === 401) unauthorized.forEach((fn) => fn(err));
    throw err;
  }
  return { data, headers: res.headers, status: res.status };
}

export async function get(path, signal) { return (await call("GET", path, undefined, signal)).data; }
export async function post(path, body, signal) { return (await call("POST", path, body ?? {}, signal)).data; }

// page reads one page of a paged listing (docs/decisions.md, "Paged
// views"): params plus limit and cursor; the next cursor comes from the
// body's nextCursor or the Queen-Next-Cursor header.
export async function page(path, params, signal) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== "") q.set(k, v);
  }
  const r = await call("GET", `${path}?${q}`, undefined, signal);
  const next = (r.data && r.data.nextCursor) || r.headers.get("Queen-Next-Cursor") || null;
  return { data: r.data, next };
}

// enc escapes one path segment.
export const enc = encodeURIComponent;
