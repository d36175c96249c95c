// Eagle Eye live dashboard. Plain browser JavaScript, no build step.
// Data: GET api/config and api/history once, then one server-sent "frame" event per tick.
// Charts: uPlot (fetched with npm when the package is built, see setup.py); without it
// the page says so and the table and totals still update.
"use strict";

const PALETTE = ["#58a6ff", "#3fb950", "#d29922", "#f778ba", "#a371f7", "#39c5cf",
  "#ff7b72", "#e3b341", "#7ee787", "#79c0ff", "#d2a8ff", "#ffa657"];

// Chart definitions: `per` charts draw one line per instance from series "<per>@<key>";
// `fleet` charts draw the named "fleet.<name>" series.
const CHARTS = [
  { id: "decisions", title: "Routing decisions / s, per instance", per: "decisions_per_s", router: true },
  { id: "waiting", title: "Waiting requests (queue), per instance", per: "waiting" },
  { id: "running", title: "Running requests, per instance", per: "running" },
  { id: "kv", title: "KV-cache usage, per instance", per: "kv_usage", unit: "pct" },
  { id: "tokens", title: "Generated tokens / s, per instance", per: "tokens_per_s" },
  { id: "fleet", title: "Fleet: running and waiting", fleet: [
    ["running", "running"], ["waiting", "waiting"]] },
  { id: "latency", title: "Router TTFT and time per output token (ms)", unit: "ms", router: true, fleet: [
    ["ttft_p50_s", "TTFT p50"], ["ttft_p99_s", "TTFT p99"],
    ["tpot_p50_s", "TPOT p50"], ["tpot_p99_s", "TPOT p99"]] },
  { id: "duration", title: "Request duration (s)", router: true, fleet: [
    ["duration_p50_s", "p50"], ["duration_p99_s", "p99"]] },
  { id: "traffic", title: "Requests, errors and retries / s", router: true, fleet: [
    ["requests_per_s", "requests"], ["errors_per_s", "errors"], ["retries_per_s", "retries"]] },
];

// [row field, header, alignment, cell renderer, router only]
const COLUMNS = [
  ["key", "Instance", "left", (r) => `<span class="swatch" style="background:${colorFor(r.key)}"></span>${esc(r.key)}`],
  ["model", "Model", "left", (r) => esc(r.model)],
  ["engine", "Engine", "left", (r) => esc(r.engine)],
  ["state", "State", "left", (r) => `<span class="pill state-${esc(r.state)}">${esc(r.state)}</span>`],
  ["running", "Running", "", (r) => r.running],
  ["waiting", "Waiting", "", (r) => r.waiting],
  ["kv_usage", "KV cache", "", (r) => kvCell(r.kv_usage)],
  ["tokens_per_s", "Tok/s", "", (r) => fmt(r.tokens_per_s, 0)],
  ["ttft_recent_s", "TTFT", "", (r) => fmtMs(r.ttft_recent_s)],
  ["itl_recent_s", "ITL", "", (r) => fmtMs(r.itl_recent_s)],
  ["prefix_hit_rate", "Prefix hit", "", (r) => fmtPct(r.prefix_hit_rate)],
  ["decisions_per_s", "Decisions/s", "", (r) => fmt(r.decisions_per_s), true],
  ["inflight", "In flight", "", (r) => r.inflight, true],
  ["health", "Health", "left", (r) => esc(r.health), true],
  ["age_s", "Age", "", (r) => `${r.age_s.toFixed(1)} s`],
];
const visibleColumns = () => COLUMNS.filter((c) => !c[4] || ui.config.router);

const ui = {
  config: null,
  hist: { t: [], series: {} },
  maxPoints: 1200,
  rangeMinutes: 0,
  rangeData: null,
  charts: {},
  colors: {},
  sortKey: "key",
  sortDesc: false,
  frames: 0,
  lastFrame: null,
};
window.eagleEye = ui; // for the browser tests and for poking around in devtools

const $ = (sel) => document.querySelector(sel);
const haveCharts = () => typeof window.uPlot !== "undefined";

function fmt(v, digits = 1) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (Math.abs(v) >= 1000) return v.toFixed(0);
  return v.toFixed(digits);
}
function fmtMs(s) { return s === null || s === undefined ? "–" : (s * 1000).toFixed(s < 0.01 ? 1 : 0) + " ms"; }
function fmtPct(r) { return r === null || r === undefined ? "–" : (r * 100).toFixed(1) + "%"; }
function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }

function colorFor(key) {
  if (!(key in ui.colors)) ui.colors[key] = PALETTE[Object.keys(ui.colors).length % PALETTE.length];
  return ui.colors[key];
}

// ---- cards and table ---------------------------------------------------------------

function card(label, value, detail) {
  return `<div class="card"><div class="label">${esc(label)}</div>` +
    `<div class="value">${value}</div><div class="detail">${detail || "&nbsp;"}</div></div>`;
}

function renderCards(frame) {
  const f = frame.fleet, r = frame.router;
  const states = Object.entries(f.by_state).filter(([, n]) => n > 0 && true)
    .map(([s, n]) => `${n} ${s}`).join(", ");
  let html = card("Instances", `${f.by_state.ready || 0} / ${f.instances}`, states || "none") +
    card("Running", f.running, r ? `in flight via router: ${f.inflight}` : "in engines") +
    card("Waiting", f.waiting, "queued in engines") +
    card("KV cache (mean)", fmtPct(f.kv_usage), "") +
    card("Tokens / s", fmt(f.tokens_per_s, 0), "generated, fleet");
  if (r) {
    html += card("Decisions / s", fmt(f.decisions_per_s), "routing, all instances") +
      card("Requests / s", fmt(r.requests_per_s), `${r.requests_total} total`) +
      card("Errors / s", fmt(r.errors_per_s, 2), `${r.errors_total} total` +
        (r.errors_total ? " · " + Object.entries(r.errors_by_kind).map(([k, n]) => `${esc(k)} ${n}`).join(", ") : "")) +
      card("Retries / s", fmt(r.retries_per_s, 2), `${r.retries_total} total`) +
      card("TTFT p50 / p99", `${fmtMs(r.ttft_s.p50)}`, `p99 ${fmtMs(r.ttft_s.p99)} · ${r.window_requests} req`) +
      card("TPOT p50 / p99", `${fmtMs(r.tpot_s.p50)}`, `p99 ${fmtMs(r.tpot_s.p99)}`) +
      card("Duration p50 / p99", `${fmt(r.duration_s.p50, 2)} s`, `p99 ${fmt(r.duration_s.p99, 2)} s`);
  } else {
    html += card("Router", "–", "standalone view: routing figures are on the router's /dashboard/");
  }
  $("#cards").innerHTML = html;
  $("#policy").textContent = r && r.policy ? `policy: ${r.policy}` : "";
}

function renderHead() {
  const tr = $("#instances thead tr");
  tr.innerHTML = visibleColumns().map(([k, label, align]) => {
    const cls = [align, ui.sortKey === k ? "sorted" : "", ui.sortKey === k && !ui.sortDesc ? "asc" : ""].join(" ");
    return `<th class="${cls}" data-key="${k}">${esc(label)}</th>`;
  }).join("");
}

function kvCell(v) {
  if (v === null || v === undefined) return "–";
  const cls = v > 0.9 ? "bad" : v > 0.7 ? "warn" : "";
  return `<span class="bar"><span class="${cls}" style="width:${(v * 100).toFixed(1)}%"></span></span>${fmtPct(v)}`;
}

function renderTable(frame) {
  const rows = frame.instances.slice();
  const k = ui.sortKey, dir = ui.sortDesc ? -1 : 1;
  rows.sort((a, b) => {
    const x = a[k], y = b[k];
    if (x === y) return a.key < b.key ? -1 : 1;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * dir;
  });
  $("#empty").hidden = rows.length > 0;
  const cols = visibleColumns();
  $("#instances tbody").innerHTML = rows.map((r) => `<tr data-key="${esc(r.key)}">` +
    cols.map(([k, , align, cell]) =>
      `<td class="${align} col-${k}${k === "age_s" && r.stale ? " stale" : ""}">${cell(r)}</td>`).join("") +
    "</tr>").join("");
}

// ---- history and charts ------------------------------------------------------------

function appendPoint(t, point) {
  const h = ui.hist, n = h.t.length;
  if (n && t <= h.t[n - 1]) return; // already in the history fetched at load
  h.t.push(t);
  for (const name of Object.keys(point)) {
    if (!(name in h.series)) h.series[name] = new Array(n).fill(null);
  }
  for (const [name, col] of Object.entries(h.series)) col.push(name in point ? point[name] : null);
  const extra = h.t.length - ui.maxPoints;
  if (extra > 0) {
    h.t.splice(0, extra);
    for (const col of Object.values(h.series)) col.splice(0, extra);
  }
}

function chartSeries(def, data) {
  // -> [[seriesName, label, color], ...] present in `data`
  if (def.fleet) {
    return def.fleet.filter(([n]) => ("fleet." + n) in data.series)
      .map(([n, label], i) => ["fleet." + n, label, PALETTE[i]]);
  }
  const prefix = def.per + "@";
  return Object.keys(data.series).filter((n) => n.startsWith(prefix)).sort()
    .map((n) => [n, n.slice(prefix.length), colorFor(n.slice(prefix.length))]);
}

function axisFormatter(def) {
  if (def.unit === "pct") return (v) => (v * 100).toFixed(0) + "%";
  if (def.unit === "ms") return (v) => trim(v * 1000);
  return trim;
}
function trim(v) {
  if (v === null || v === undefined) return "";
  if (Math.abs(v) >= 1000) return (v / 1000).toFixed(v % 1000 ? 1 : 0) + "k";
  return String(Number(v.toFixed(2)));
}

function valueFormatter(def) {
  if (def.unit === "pct") return (v) => (v === null || v === undefined ? "–" : (v * 100).toFixed(1) + "%");
  if (def.unit === "ms") return (v) => (v === null || v === undefined ? "–" : (v * 1000).toFixed(1));
  return (v) => (v === null || v === undefined ? "–" : fmt(v, 2));
}

function buildChart(def, el, series, data) {
  const width = Math.max(300, el.clientWidth - 16);
  const vf = valueFormatter(def), af = axisFormatter(def);
  const axis = { stroke: "#8a96a3", grid: { stroke: "#2a313b", width: 1 }, ticks: { stroke: "#2a313b" } };
  const opts = {
    width, height: 170,
    scales: { x: { time: true }, y: def.unit === "pct" ? { range: [0, 1] } : { range: (u, min, max) => [0, niceMax(max, def)] } },
    axes: [axis, { ...axis, size: 50, values: (u, vals) => vals.map(af) }],
    series: [{}].concat(series.map(([, label, color]) => ({
      label, stroke: color, width: 1.5, spanGaps: false, value: (u, v) => vf(v),
    }))),
    legend: { show: true, live: true },
    cursor: { drag: { x: false, y: false } },
  };
  return new uPlot(opts, chartData(series, data), el);
}

function niceMax(max, def) {
  const floor = def.unit === "ms" ? 0.01 : 1; // an idle chart still gets a sensible axis
  return Math.max(max || 0, floor) * 1.1;
}

function chartData(series, data) {
  return [data.t].concat(series.map(([n]) => data.series[n]));
}

function renderCharts() {
  const data = ui.rangeMinutes ? ui.rangeData : ui.hist;
  if (!data) return;
  for (const def of visibleCharts()) {
    const box = document.getElementById("chart-" + def.id);
    const el = box.querySelector(".plot");
    if (!haveCharts()) continue;
    const series = chartSeries(def, data);
    const signature = series.map(([n]) => n).join("|") + "#" + ui.rangeMinutes;
    const existing = ui.charts[def.id];
    if (existing && existing.signature === signature) {
      existing.plot.setData(chartData(series, data));
      continue;
    }
    if (existing) existing.plot.destroy();
    el.innerHTML = "";
    if (!series.length) {
      el.innerHTML = `<div class="missing">no data${ui.rangeMinutes ? " from Prometheus for this range" : " yet"}</div>`;
      delete ui.charts[def.id];
      continue;
    }
    ui.charts[def.id] = { signature, plot: buildChart(def, el, series, data) };
  }
}

function visibleCharts() {
  return CHARTS.filter((d) => !d.router || ui.config.router);
}

function layoutCharts() {
  $("#charts").innerHTML = visibleCharts().map((d) =>
    `<div class="chart" id="chart-${d.id}"><h2>${esc(d.title)}</h2><div class="plot">` +
    (haveCharts() ? "" : '<div class="missing">chart library missing</div>') + "</div></div>").join("");
}

function resizeCharts() {
  for (const def of visibleCharts()) {
    const c = ui.charts[def.id];
    if (!c) continue;
    const el = document.getElementById("chart-" + def.id);
    c.plot.setSize({ width: Math.max(300, el.clientWidth - 16), height: 170 });
  }
}

// ---- wiring ------------------------------------------------------------------------

function onFrame(frame) {
  ui.frames += 1;
  ui.lastFrame = frame;
  renderCards(frame);
  renderTable(frame);
  if (!ui.rangeMinutes) {
    appendPoint(frame.t, frame.point);
    renderCharts();
  }
  $("#footer").textContent = `eagle-eye ${ui.config.version} · ${frame.instances.length} instances · ` +
    `tick ${(ui.config.tick_s * 1000).toFixed(0)} ms · live history ${(ui.config.history_s / 60).toFixed(0)} min` +
    ` · ${ui.config.prometheus ? "Prometheus connected for longer ranges" : "no Prometheus configured"}` +
    ` · updated ${new Date(frame.t * 1000).toLocaleTimeString()}`;
}

async function selectRange(minutes) {
  for (const b of document.querySelectorAll("#range button")) {
    b.classList.toggle("active", Number(b.dataset.minutes) === minutes);
  }
  ui.rangeMinutes = minutes;
  if (minutes) {
    const resp = await fetch(`api/range?minutes=${minutes}`);
    const body = await resp.json();
    if (!resp.ok) {
      showBanner(`Prometheus history unavailable: ${body.error}`);
      return selectRange(0);
    }
    ui.rangeData = body;
  }
  renderCharts();
}

function showBanner(text) {
  const b = $("#banner");
  b.textContent = text;
  b.hidden = false;
}

function connect() {
  const es = new EventSource("events");
  es.addEventListener("open", () => { $("#conn").className = "conn up"; $("#conn").textContent = "live"; });
  es.addEventListener("error", () => { $("#conn").className = "conn down"; $("#conn").textContent = "reconnecting…"; });
  es.addEventListener("frame", (e) => onFrame(JSON.parse(e.data)));
}

async function main() {
  ui.config = await (await fetch("api/config")).json();
  ui.maxPoints = Math.round(ui.config.history_s / ui.config.tick_s);
  if (!haveCharts()) {
    showBanner("Charts are unavailable: the chart library (uPlot) is not installed next to the " +
      "dashboard. Reinstall eagle-eye where npm is available (the build fetches it). " +
      "The numbers below still update live.");
  }
  for (const b of document.querySelectorAll("#range button.prom")) {
    b.disabled = !ui.config.prometheus;
    if (!ui.config.prometheus) b.title = "start the dashboard with --prometheus URL for longer history";
  }
  document.querySelectorAll("#range button").forEach((b) =>
    b.addEventListener("click", () => selectRange(Number(b.dataset.minutes))));
  $("#instances thead").addEventListener("click", (e) => {
    const key = e.target.dataset && e.target.dataset.key;
    if (!key) return;
    if (ui.sortKey === key) ui.sortDesc = !ui.sortDesc;
    else { ui.sortKey = key; ui.sortDesc = !["key", "model", "engine", "state", "health"].includes(key); }
    renderHead();
    if (ui.lastFrame) renderTable(ui.lastFrame);
  });
  renderHead();
  layoutCharts();
  const hist = await (await fetch("api/history")).json();
  ui.hist = hist;
  renderCharts();
  window.addEventListener("resize", resizeCharts);
  connect();
}

main();
