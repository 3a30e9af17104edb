"""The report's HTML page and its script (report_html.py fills in the title, the policy and the data). The script
only ever puts text from the runs on the page through textContent and setAttribute; its sha256 is the page's
Content-Security-Policy, so no other script can run."""

HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="__CSP__">
<title>__TITLE__</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
#bar{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin-bottom:10px}
#caseinfo{margin-bottom:10px;font-size:13px;color:#444}
#grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:10px}
.cell{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px}
.cell h3{margin:2px 0 6px;font-size:13px}
video{width:100%;background:#000;display:block}
.err{color:#b00;font-size:12px}
#below{display:flex;gap:16px;margin-top:12px;flex-wrap:wrap}
#timeline{flex:1;min-width:420px}
table{border-collapse:collapse;margin-top:12px;font-size:12px}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}
.best{font-weight:bold}
.second{text-decoration:underline}
h4{margin:14px 0 2px;font-size:13px}
.note{color:#666;font-size:12px;margin-top:4px}
svg.signals{width:100%;height:auto;display:block;margin-top:4px;background:#fff;cursor:crosshair}
.sigcap{color:#555;font-size:11px;margin-top:2px}
</style></head><body>
<h2>__TITLE__</h2>
<div id="bar">
  <label>case <select id="case"></select></label>
  <button id="play">play</button>
  <input id="scrub" type="range" min="0" max="1000" value="0" style="width:260px">
  <span id="time">0.00 s</span>
  <span id="backend"></span>
</div>
<div id="caseinfo"><div id="prompt"></div><div id="tags"></div></div>
<div id="grid"></div>
<div id="below">
  <svg id="path" width="260" height="260" viewBox="0 0 260 260" style="background:#fff;border:1px solid #ddd"></svg>
  <div id="timeline"><svg id="phases" width="100%" height="64"></svg><div id="seginfo"></div></div>
</div>
<table id="scores"></table>
<div id="tables"></div>
<script id="data" type="application/json">__DATA__</script>
<script>__SCRIPT__</script></body></html>
"""

# The page's script. Text from the runs only ever reaches the page through textContent and setAttribute (el below);
# nothing assigns innerHTML. Its sha256 is the page's Content-Security-Policy: no other script can run.
JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const SVG = "http://www.w3.org/2000/svg";
const sel = document.getElementById("case"), grid = document.getElementById("grid");
const playBtn = document.getElementById("play"), scrub = document.getElementById("scrub");
const COLORS = {V:"#9bd", H:"#ccc"};
let videos = [], cur = null, plots = [], raf = 0;
// the one way this page makes elements: attributes via setAttribute, text via textContent
function el(tag, attrs, text, ns){
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
document.getElementById("backend").textContent = "backend: " + D.backend;
for (const id of Object.keys(D.cases)) { const o = el("option", {}, id); o.value = id; sel.appendChild(o); }
function master(){ return videos.find(v => v.readyState >= 1) || videos[0]; }
function fmt(m, v){ const r = D.metrics[m] ? D.metrics[m].range : ""; return r === "0-100" ? v.toFixed(1) : v.toFixed(3); }
function show(id){
  cur = D.cases[id]; grid.replaceChildren(); videos = []; plots = [];
  document.getElementById("prompt").textContent = cur.prompt ? "prompt: " + cur.prompt : "";
  const tags = Object.entries(cur.tags || {}).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v));
  document.getElementById("tags").textContent = tags.length ? "tags: " + tags.join(", ") : "";
  for (const run of D.runs) {
    const c = el("div", {class: "cell"}); c.appendChild(el("h3", {}, run));
    const e = Object.prototype.hasOwnProperty.call(cur.runs, run) ? cur.runs[run] : null;
    for (const src of e ? [e.video, e.video_b] : []) {
      if (!src) continue;
      const v = el("video"); v.src = src; v.muted = true; v.preload = "auto";
      v.playsInline = true; v.dataset.run = run; c.appendChild(v); videos.push(v);
      if (e.video_b) { v.style.width = "49%"; v.style.display = "inline-block"; v.title = src === e.video ? "player A" : "player B"; }
      v.addEventListener("timeupdate", tick);
      v.addEventListener("play", () => { if (!raf) raf = requestAnimationFrame(loop); });
      v.addEventListener("ended", () => { if (videos.every(x => x.ended || x.paused)) playBtn.textContent = "play"; });
    }
    const own = videos.filter(v => v.dataset.run === run);
    if (e && e.signals && own.length === 1) drawSignals(c, e.signals, own[0]);
    else if (e && e.signals_note) c.appendChild(el("div", {class: "note"}, e.signals_note));
    if (!e) c.appendChild(el("div", {class: "err"}, "no rollout for this case"));
    else {
      if (e.error) c.appendChild(el("div", {class: "err"}, e.error));
      for (const n of e.notes || []) c.appendChild(el("div", {class: "err"}, n));
    }
    grid.appendChild(c);
  }
  drawPath(); drawPhases(); drawScores(); playBtn.textContent = "play"; tick();
}
function tick(){
  const m = master(); if (!m) return;
  for (const v of videos) if (v !== m && v.readyState >= 1 && Math.abs(v.currentTime - m.currentTime) > 0.15) v.currentTime = m.currentTime;
  document.getElementById("time").textContent = m.currentTime.toFixed(2) + " s";
  if (m.duration) scrub.value = Math.round(1000 * m.currentTime / m.duration);
  drawMarker(m.currentTime);
  for (const p of plots) p.cursor(p.video.currentTime);
}
// while anything plays, the cursors follow every animation frame (timeupdate alone fires ~4 times a second)
function loop(){ tick(); raf = videos.some(v => !v.paused && !v.ended) ? requestAnimationFrame(loop) : 0; }
playBtn.onclick = () => {
  const m = master(); if (!m) return;
  if (m.paused) { for (const v of videos) { v.currentTime = m.currentTime; v.play().catch(()=>{}); } playBtn.textContent = "pause"; }
  else { for (const v of videos) v.pause(); playBtn.textContent = "play"; }
};
scrub.oninput = () => { const m = master(); if (!m || !m.duration) return; const t = m.duration * scrub.value / 1000; for (const v of videos) v.currentTime = t; tick(); };
sel.onchange = () => show(sel.value);
// the rollout's flow signals Sx and Srad (S: see worldmark/signals.case_signals) over the commanded segments, with WorldMark's
// stable zones, the switches and a cursor at the video's time; a click seeks every video there
function drawSignals(cell, S, video){
  const VW = 420, VH = 180, L = 34, R = 6, T = 18, B = 30, PW = VW - L - R, PH = VH - T - B;
  const svg = el("svg", {class: "signals", viewBox: `0 0 ${VW} ${VH}`, width: "100%"}, null, SVG);
  const fps = S.fps > 0 ? S.fps : 16, segEnd = Math.max(0, ...S.segments.map(g => g.frames[1]));
  const tmax = Math.max(1 / fps, (S.n + S.gap) / fps, segEnd / fps);
  const X = t => L + PW * Math.max(0, Math.min(1, t / tmax));
  const vals = S.sx.v.concat(S.srad.v).filter(v => v !== null && isFinite(v));
  const ymax = Math.max(1e-6, ...vals.map(Math.abs));
  const Y = v => T + PH / 2 * (1 - v / ymax);
  const COL = {sx: "#1f6fd0", srad: "#e07b00"}, NAME = {sx: "Sx", srad: "Srad"};
  S.segments.forEach((g, j) => {
    const x0 = X(g.frames[0] / fps), x1 = X(g.frames[1] / fps);
    svg.appendChild(el("rect", {class: "seg", x: x0, y: T, width: Math.max(1, x1 - x0), height: PH, fill: j % 2 ? "#f2f2f8" : "#e8eaf4"}, null, SVG));
    const lab = g.key ? `${g.key}: ${NAME[g.channel]}${g.sign > 0 ? "+" : "\u2212"}${g.zone_n < S.min_samples ? " (n/a)" : ""}` : g.label;
    svg.appendChild(el("text", {class: "seglabel", x: x0 + 3, y: T - 6, "font-size": 11}, lab, SVG));
    if (g.zone && g.zone_n > 0) {
      const z0 = X(g.zone[0] / fps), z1 = X(g.zone[1] / fps);
      svg.appendChild(el("rect", {class: "zone", x: z0, y: T, width: Math.max(1, z1 - z0), height: PH, fill: "#3a3", "fill-opacity": 0.16}, null, SVG));
      svg.appendChild(el("rect", {x: z0, y: T + PH - 4, width: Math.max(1, z1 - z0), height: 4, fill: "#3a3"}, null, SVG));
    }
  });
  svg.appendChild(el("line", {x1: L, x2: L + PW, y1: Y(0), y2: Y(0), stroke: "#999", "stroke-width": 0.8}, null, SVG));
  const line = (tr, keep, attrs) => {  // one polyline per run of finite points that keep() accepts
    let pts = [];
    const flush = () => { if (pts.length > 1) svg.appendChild(el("polyline", Object.assign({points: pts.join(" "), fill: "none"}, attrs), null, SVG)); pts = []; };
    tr.i.forEach((i, k) => { const v = tr.v[k]; if (v === null || !keep(i)) flush(); else pts.push(X(i / fps).toFixed(1) + "," + Y(v).toFixed(1)); });
    flush();
  };
  for (const c of ["sx", "srad"]) line(S[c], () => true, {class: "trace-" + c, stroke: COL[c], "stroke-width": 1, "stroke-opacity": 0.75});
  for (const g of S.segments) if (g.channel && g.zone && g.zone_n > 0)  // the samples and channel the segment is scored on
    line(S[g.channel], i => i >= g.zone[0] - 1e-9 && i <= g.zone[1] + 1e-9, {class: "scored", stroke: COL[g.channel], "stroke-width": 3});
  for (const t of S.switches) svg.appendChild(el("line", {class: "switch", x1: X(t), x2: X(t), y1: T - 2, y2: T + PH, stroke: "#222", "stroke-width": 1.2, "stroke-dasharray": "4 2"}, null, SVG));
  const fmtY = v => (Math.abs(v) >= 10 ? v.toFixed(0) : v.toPrecision(2));
  svg.appendChild(el("text", {x: L - 3, y: T + 8, "font-size": 10, "text-anchor": "end"}, "+" + fmtY(ymax), SVG));
  svg.appendChild(el("text", {x: L - 3, y: Y(0) + 3, "font-size": 10, "text-anchor": "end"}, "0", SVG));
  svg.appendChild(el("text", {x: L - 3, y: T + PH, "font-size": 10, "text-anchor": "end"}, "\u2212" + fmtY(ymax), SVG));
  svg.appendChild(el("text", {x: L, y: VH - 16, "font-size": 10}, "0 s", SVG));
  svg.appendChild(el("text", {x: L + PW, y: VH - 16, "font-size": 10, "text-anchor": "end"}, tmax.toFixed(2) + " s", SVG));
  svg.appendChild(el("text", {x: L + PW / 2, y: VH - 16, "font-size": 10, "text-anchor": "middle"}, "video time (pair i, i+" + S.gap + " at i / " + fps + " fps)", SVG));
  svg.appendChild(el("text", {x: L, y: VH - 3, "font-size": 10, fill: COL.sx}, "\u2014 Sx (horizontal)", SVG));
  svg.appendChild(el("text", {x: L + 110, y: VH - 3, "font-size": 10, fill: COL.srad}, "\u2014 Srad (radial)", SVG));
  svg.appendChild(el("text", {x: L + 210, y: VH - 3, "font-size": 10, fill: "#3a3"}, "\u25a0 stable zone", SVG));
  const cur = el("line", {class: "cursor", x1: L, x2: L, y1: T - 2, y2: T + PH, stroke: "#d33", "stroke-width": 2}, null, SVG);
  svg.appendChild(cur);
  svg.addEventListener("click", ev => {
    const r = svg.getBoundingClientRect(); if (!r.width) return;
    const t = Math.max(0, Math.min(tmax, ((ev.clientX - r.left) * VW / r.width - L) / PW * tmax));
    for (const v of videos) v.currentTime = Math.min(t, v.duration || t);
    tick();
  });
  cell.appendChild(svg);
  const cap = `Sx, Srad in ${S.unit}, from the cached feature ${S.feature}; shaded: commanded segments (key: the channel it is scored on, expected sign), dashed: switches, green: WorldMark's stable zones (3 s after / 1 s before a switch on its ${S.time_base} fps time base: sample = t \u00b7 ${S.time_base}), thick: the samples each segment is scored on. Click to seek.`;
  const det = el("details", {class: "sigcap"}); det.appendChild(el("summary", {}, "flow signals: how to read" + (S.why ? " (no stable zones)" : "")));
  det.appendChild(el("div", {}, cap + (S.why ? " No stable zones: " + S.why : ""))); cell.appendChild(det);
  plots.push({video, cursor: t => { const x = X(t); cur.setAttribute("x1", x); cur.setAttribute("x2", x); }});
}
function drawPath(){
  const svg = document.getElementById("path"); svg.replaceChildren();
  const T = cur.trajectory; if (!T || !T.xz.length) return;
  const xs = T.xz.map(p => p[0]), zs = T.xz.map(p => p[1]);
  const span = Math.max(1e-3, Math.max(...xs) - Math.min(...xs), Math.max(...zs) - Math.min(...zs));
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2, cz = (Math.max(...zs) + Math.min(...zs)) / 2;
  const s = 220 / span;
  svg._map = p => [130 + (p[0] - cx) * s, 130 - (p[1] - cz) * s];
  const pts = T.xz.map(p => svg._map(p).join(",")).join(" ");
  svg.appendChild(el("polyline", {points: pts, fill: "none", stroke: "#36c", "stroke-width": 2}, null, SVG));
  svg.appendChild(el("text", {x: 6, y: 14, "font-size": 11}, "commanded path (top view, +z up)", SVG));
  const cam = el("g", {id: "cam"}, null, SVG);
  cam.appendChild(el("circle", {r: 5, fill: "#d33"}, null, SVG));
  cam.appendChild(el("line", {x1: 0, y1: 0, x2: 0, y2: -14, stroke: "#d33", "stroke-width": 2}, null, SVG));
  svg.appendChild(cam);
}
function drawPhases(){
  const svg = document.getElementById("phases"); svg.replaceChildren();
  const T = cur.trajectory; if (!T) return;
  const W = svg.clientWidth || 600, n = T.n_frames || 1;
  for (const p of T.phases) {
    const x0 = W * p.frames[0] / n, x1 = W * p.frames[1] / n, name = String(p.name);
    const col = COLORS[name[0]] || (name[0] === "D" ? "#fc8" : "#8d8");
    svg.appendChild(el("rect", {x: x0, y: 0, width: Math.max(1, x1 - x0), height: 24, fill: col, stroke: "#fff"}, null, SVG));
    svg.appendChild(el("text", {x: x0 + 3, y: 16, "font-size": 11}, name, SVG));
  }
  for (const sg of T.segments) {
    const x0 = W * sg.frames[0] / n, x1 = W * sg.frames[1] / n;
    svg.appendChild(el("rect", {x: x0, y: 28, width: Math.max(1, x1 - x0), height: 22, fill: "#eef", stroke: "#99a"}, null, SVG));
    svg.appendChild(el("text", {x: x0 + 3, y: 43, "font-size": 11}, sg.label, SVG));
  }
  svg.appendChild(el("line", {id: "playhead", x1: 0, y1: 0, x2: 0, y2: 52, stroke: "#d33", "stroke-width": 2}, null, SVG));
  document.getElementById("seginfo").textContent = `${T.n_frames} frames at ${T.fps} fps; phases (top) and commanded segments (bottom)`;
}
function drawMarker(t){
  const T = cur && cur.trajectory; if (!T || !T.xz.length) return;
  const i = Math.max(0, Math.min(T.n_frames - 1, Math.floor(t * T.fps)));
  const svg = document.getElementById("path"), cam = document.getElementById("cam");
  if (cam && svg._map) { const [x, y] = svg._map(T.xz[Math.min(i, T.xz.length - 1)]); cam.setAttribute("transform", `translate(${x},${y}) rotate(${T.yaw[Math.min(i, T.yaw.length - 1)]})`); }
  const ph = document.getElementById("playhead"), W = document.getElementById("phases").clientWidth || 600;
  if (ph) { const x = W * i / (T.n_frames || 1); ph.setAttribute("x1", x); ph.setAttribute("x2", x); }
}
function drawScores(){
  const t = document.getElementById("scores"); t.replaceChildren();
  const has = r => Object.prototype.hasOwnProperty.call(cur.runs, r);
  const ms = Object.keys(D.metrics).filter(m => D.runs.some(r => has(r) && m in cur.runs[r].scores));
  const head = el("tr"); head.appendChild(el("th", {}, "metric"));
  for (const r of D.runs) head.appendChild(el("th", {}, r));
  t.appendChild(head);
  for (const m of ms) {
    const vals = D.runs.map(r => has(r) ? cur.runs[r].scores[m] : undefined);
    const ok = vals.filter(v => v !== undefined).map(v => parseFloat(fmt(m, v)));  // rank what is shown
    const best = new Set(ok).size > 1 ? (D.metrics[m].higher ? Math.max(...ok) : Math.min(...ok)) : null;
    const tr = el("tr"); tr.appendChild(el("td", {}, D.metrics[m].name));
    for (const v of vals) tr.appendChild(v === undefined ? el("td", {}, "n/a")
      : el("td", {class: parseFloat(fmt(m, v)) === best ? "best" : ""}, fmt(m, v)));
    t.appendChild(tr);
  }
}
// the tables the benchmarks declare (report_tables.page_tables): one row per run, best bold, second underlined, worst ▼
function drawTables(){
  const box = document.getElementById("tables");
  for (const T of D.tables || []) {
    box.appendChild(el("h4", {}, T.title));
    const t = el("table", {class: "bench"}), head = el("tr");
    for (const c of T.columns) head.appendChild(el("th", {}, c));
    t.appendChild(head);
    for (const R of T.rows) {
      const tr = el("tr"); tr.appendChild(el("td", {}, R.run)); tr.appendChild(el("td", {}, R.records));
      R.cells.forEach((c, i) => { const mk = R.marks[i]; tr.appendChild(el("td", {class: mk}, mk === "worst" ? c + " \u25bc" : c)); });
      t.appendChild(tr);
    }
    box.appendChild(t);
  }
}
drawTables();
if (sel.options.length) show(sel.options[0].value);
"""


__all__ = ["HTML", "JS"]
