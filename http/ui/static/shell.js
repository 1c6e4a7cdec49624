// What the dashboard's and the console's shells share: the life of a page
// visit, the theme button, the menu on narrow screens and the skip link.

// Life is one page visit: timers and requests to cancel when it ends.
export class Life {
  // report receives the errors of the polls every() runs.
  constructor(report) { this.ctl = new AbortController(); this.timers = []; this.report = report; }
  get signal() { return this.ctl.signal; }
  get alive() { return !this.ctl.signal.aborted; }
  // every runs fn now and then every ms until the visit ends; a run
  // starts only after the previous one finished.
  every(ms, fn) {
    const tick = async () => {
      if (!this.alive) return;
      try { await fn(); } catch (e) { this.report(e); }
      if (this.alive) this.timers.push(setTimeout(tick, ms));
    };
    tick();
  }
  end() { this.ctl.abort(); this.timers.forEach(clearTimeout); }
}

// themeButton makes button switch between light and dark. The theme is
// the system's (prefers-color-scheme) until the user chooses; the choice
// is remembered.
export function themeButton(button) {
  const apply = (t) => {
    if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
    const dark = t ? t === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    button.textContent = dark ? "Light theme" : "Dark theme";
    button.setAttribute("aria-pressed", String(dark));
  };
  button.addEventListener("click", () => {
    const cur = document.documentElement.dataset.theme || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
    const next = cur === "dark" ? "light" : "dark";
    localStorage.setItem("queen.theme", next);
    apply(next);
  });
  apply(localStorage.getItem("queen.theme"));
}

// foldingMenu folds nav behind toggle on narrow screens (style.css) and
// answers the function that closes it.
export function foldingMenu(nav, toggle) {
  const close = () => { nav.dataset.open = "false"; toggle.setAttribute("aria-expanded", "false"); };
  toggle.addEventListener("click", () => {
    const open = nav.dataset.open !== "true";
    nav.dataset.open = String(open);
    toggle.setAttribute("aria-expanded", String(open));
  });
  close();
  return close;
}

// skipTo makes the skip link move focus to the content without touching
// the hash, which holds the route.
export function skipTo(link, view) {
  link.addEventListener("click", (ev) => { ev.preventDefault(); view.focus(); });
}
