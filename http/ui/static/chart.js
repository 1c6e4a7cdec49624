// A line chart drawn as SVG: a few series over the same x (sample order),
// scaled to the largest value, with the latest values in the legend and
// in the chart's accessible name. Enough for live rates; no library.

import { h, rate } from "./dom.js";

const svgNS = "http://www.w3.org/2000/svg";
function s(tag, attrs) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

export class LineChart {
  // series: [{name, color (a CSS var name)}]; capacity: samples kept.
  constructor(title, series, capacity = 60) {
    this.title = title;
    this.series = series.map((x) => ({ ...x, values: [] }));
    this.capacity = capacity;
    this.svg = s("svg", { viewBox: "0 0 600 160", preserveAspectRatio: "none", role: "img" });
    this.legend = h("div", { class: "legend" });
    this.el = h("figure", { class: "panel chart", style: "margin:0" },
      h("figcaption", null, h("strong", null, title)), this.svg, this.legend);
    this.draw();
  }
  // push adds one sample per series (in the series' order).
  push(...values) {
    this.series.forEach((x, i) => {
      x.values.push(Number.isFinite(values[i]) ? values[i] : 0);
      if (x.values.length > this.capacity) x.values.shift();
    });
    this.draw();
  }
  draw() {
    const W = 600, H = 160, top = 14, bottom = 4;
    while (this.svg.firstChild) this.svg.firstChild.remove();
    const maxV = Math.max(1, ...this.series.flatMap((x) => x.values));
    this.svg.append(s("line", { x1: 0, y1: H - bottom, x2: W, y2: H - bottom, class: "axis" }));
    const label = s("text", { x: 4, y: 11 });
    label.textContent = `max ${rate(maxV)}`;
    this.svg.append(label);
    for (const x of this.series) {
      if (x.values.length < 2) continue;
      const step = W / (this.capacity - 1);
      const off = (this.capacity - x.values.length) * step;
      const pts = x.values.map((v, i) => `${(off + i * step).toFixed(1)},${(H - bottom - (v / maxV) * (H - top - bottom)).toFixed(1)}`);
      this.svg.append(s("polyline", { points: pts.join(" "), fill: "none", stroke: `var(${x.color})`, "stroke-width": 2,
        "vector-effect": "non-scaling-stroke" }));
    }
    const last = this.series.map((x) => `${x.name} ${rate(x.values.at(-1) ?? 0)}`);
    this.svg.setAttribute("aria-label", `${this.title}: ${last.join(", ")}`);
    this.legend.replaceChildren(...this.series.map((x, i) =>
      h("span", null, h("i", { style: `background:var(${x.color})` }), last[i])));
  }
}
