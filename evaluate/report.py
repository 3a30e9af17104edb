"""``worldgate report RUN... --out DIR``: the leaderboard tables as the benchmarks print them, plots, and an HTML page
to watch every model's rollout of a case side by side.

Reads only what ``evaluate`` wrote (``results.json``, ``samples.jsonl``) and the records (videos, commanded poses,
phases). Writes into ``DIR``::

    worldmark.md / .csv        the 12 WorldMark columns; best **bold**, second <u>underlined</u>, worst marked ▼
    worldmembench.md / .csv    static memory / dynamic memory / quality / camera following (what the runs have)
    multiworldbench.md / .csv  the ten capabilities, track averages and overall (when the runs have them)
    profile.png                capability profile per model (WorldMark columns, 0-100)
    distributions.png          per-metric distribution over cases, per model
    revisit_decay.png          revisit memory per round trip R1, R2, R3 (runs with multi-trip trajectories)
    context.png                memory vs wall time per context policy (runs written with a context policy)
    index.html + media/        case picker, synced playback, commanded path + phase timeline, per-case scores

Runs scored with different backends are never put in one table.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np

from .metrics import METRIC_INFO, WORLDMARK_COLUMNS

# WorldMemBench groups (METRICS.md); ids not produced by any run are left out of the table
WORLDMEMBENCH_GROUPS = {
    "static memory": ["human_identity", "human_appearance", "object_appearance", "object_geometry",
                      "environment_visible", "depth_spearman", "spherical_reconstruction"],
    "dynamic memory": ["dynamic_p_start", "dynamic_conditional", "dynamic_score"],
    "quality": ["imaging_quality", "aesthetic_quality"],
    "camera following": ["camera_rpe_trans", "camera_rpe_rot"],
}
MULTIWORLDBENCH = ["control_isolation", "coordination_fairness", "cross_view_motion", "state_synchronization",
                   "state_persistence", "structural_consistency", "spatial_reasoning", "race_condition_consistency",
                   "style_consistency", "id_consistency"]


class ReportError(ValueError):
    pass


def load_run(run: Path) -> dict:
    run = Path(run)
    res = run / "results.json"
    if not res.is_file():
        raise ReportError(f"{run} has no results.json: score it first with `worldgate evaluate {run}`")
    results = json.loads(res.read_text())
    samples = []
    if (run / "samples.jsonl").is_file():
        samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines() if x.strip()]
    backends = sorted({b["backend"] for b in results.get("backends", {}).values()})
    return {"run": run, "name": run.name, "results": results, "samples": samples, "backend": ",".join(backends)}


def _mean(r, m):
    a = r["results"]["metrics"].get(m)
    return None if not a else a.get("mean")


def _rank_marks(values: list, higher: bool, key=None) -> list[str]:
    """'best', 'second', 'worst' or '' for each value (None never ranks). Ties (equal after ``key``, the displayed
    rounding) share a mark; when every value ties nothing is marked."""
    key = key or (lambda v: v)
    shown = [None if v is None else key(v) for v in values]
    distinct = sorted({v for v in shown if v is not None}, reverse=higher)
    marks = [""] * len(values)
    if len(distinct) < 2:
        return marks
    for i, v in enumerate(shown):
        if v is None:
            continue
        if v == distinct[0]:
            marks[i] = "best"
        elif v == distinct[-1]:
            marks[i] = "worst"
        elif len(distinct) >= 3 and v == distinct[1]:
            marks[i] = "second"
    return marks


def _fmt(m: str, v) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}" if METRIC_INFO.get(m, {}).get("range") == "0-100" else f"{v:.3f}"


def table(runs: list[dict], ids: list[str], title: str, extra_cols: dict | None = None) -> tuple[str, list[list[str]]]:
    """Markdown (best bold, second underlined, worst ▼) and CSV rows of ``ids`` for ``runs``."""
    ids = [m for m in ids if any(_mean(r, m) is not None for r in runs)]
    extra_cols = extra_cols or {}
    cols = ["model", "records"] + [METRIC_INFO.get(m, {}).get("name", m) for m in ids] + list(extra_cols)
    vals = {m: [_mean(r, m) for r in runs] for m in ids}
    marks = {m: _rank_marks(vals[m], METRIC_INFO.get(m, {}).get("higher_is_better", True), key=lambda v, m=m: float(_fmt(m, v)))
             for m in ids}
    md = [f"### {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    rows = [["model", "records"] + ids + list(extra_cols)]
    for i, r in enumerate(runs):
        cells = []
        for m in ids:
            s = _fmt(m, vals[m][i])
            mk = marks[m][i]
            s = f"**{s}**" if mk == "best" else f"<u>{s}</u>" if mk == "second" else f"{s} ▼" if mk == "worst" else s
            cells.append(s)
        ex = [_fmt("", f(r)) for f in extra_cols.values()]
        md.append("| " + " | ".join([r["name"], str(r["results"].get("records", ""))] + cells + ex) + " |")
        rows.append([r["name"], str(r["results"].get("records", ""))] +
                    ["" if vals[m][i] is None else f"{vals[m][i]:.6g}" for m in ids] +
                    ["" if f(r) is None else f"{f(r):.6g}" for f in extra_cols.values()])
    backend = runs[0]["backend"] if runs else ""
    md += ["", f"backend: {backend}; best **bold**, second <u>underlined</u>, worst ▼ "
               f"(lower is better for RPE columns); n/a = unavailable for every case of the run", ""]
    if not ids:
        md = [f"### {title}", "", "no run has any of these metrics", ""]
    return "\n".join(md), rows


def _write_csv(path: Path, rows):
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    path.write_text(buf.getvalue())


def _overall(r) -> float | None:
    vs = [_mean(r, m) for m in WORLDMARK_COLUMNS if _mean(r, m) is not None]
    return float(np.mean(vs)) if vs else None


# --------------------------------------------------------------------------------------------------------- plots
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_profile(runs, path: Path) -> bool:
    ids = [m for m in WORLDMARK_COLUMNS if any(_mean(r, m) is not None for r in runs)]
    if not ids:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(ids) + 2), 4.5))
    w = 0.8 / len(runs)
    x = np.arange(len(ids))
    for k, r in enumerate(runs):
        ax.bar(x + k * w - 0.4 + w / 2, [_mean(r, m) or 0.0 for m in ids], w, label=r["name"])
    ax.set_xticks(x, [METRIC_INFO[m]["name"] for m in ids], rotation=35, ha="right", fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("score (0-100)")
    ax.set_title("WorldMark capability profile")
    ax.legend(fontsize=7, ncol=min(4, len(runs)))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_distributions(runs, path: Path) -> bool:
    ids = [m for m in METRIC_INFO if any(s.get("scores", {}).get(m) is not None for r in runs for s in r["samples"])]
    if not ids:
        return False
    plt = _plt()
    ncol = 4
    nrow = int(np.ceil(len(ids) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.4 * nrow), squeeze=False)
    for ax, m in zip(axes.flat, ids):
        data = [[s["scores"][m] for s in r["samples"] if s.get("scores", {}).get(m) is not None] for r in runs]
        ax.boxplot([d if d else [np.nan] for d in data], tick_labels=[r["name"][:10] for r in runs])
        ax.set_title(METRIC_INFO[m]["name"], fontsize=8)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(ids):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def revisit_decay(r) -> list[float | None]:
    """Mean revisit memory of the k-th round trip (R1, R2, R3, ...) over the cases that have one."""
    per = {}
    for s in r["samples"]:
        for k, v in enumerate(((s.get("detail") or {}).get("revisit_memory") or {}).get("per_trip", [])):
            per.setdefault(k, []).append(v)
    return [float(np.mean(per[k])) if k in per else None for k in range(max(per) + 1)] if per else []


def plot_revisit_decay(runs, path: Path) -> bool:
    curves = {r["name"]: revisit_decay(r) for r in runs}
    curves = {k: v for k, v in curves.items() if len(v) >= 2}
    if not curves:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, ys in curves.items():
        ax.plot([f"R{i + 1}" for i in range(len(ys))], [np.nan if y is None else y for y in ys], "o-", label=name)
    ax.set_ylabel("revisit memory")
    ax.set_title("revisit decay")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def context_points(r) -> dict | None:
    """(policy, budget, revisit memory, wall time) of a run written with a context policy."""
    cfg = (r["results"].get("config") or {}).get("run_config") or {}
    ctx = cfg.get("context")
    if not ctx:
        return None
    pol, budget = ctx.get("name"), ctx.get("budget")
    secs = [(s.get("timing") or {}).get("rollout_s") for s in r["samples"]]
    secs = [x for x in secs if x is not None]
    mem = _mean(r, "revisit_memory")
    return {"policy": pol, "budget": budget, "memory": mem, "seconds": float(np.sum(secs)) if secs else None}


def plot_context(runs, path: Path) -> bool:
    return plot_context_points([context_points(r) for r in runs], path)


def plot_context_points(points: list[dict | None], path: Path) -> bool:
    """Memory vs rollout time, one point per {policy, budget, memory, seconds}."""
    pts = [p for p in points if p and p["memory"] is not None and p["seconds"] is not None]
    if not pts:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for p in pts:
        ax.scatter(p["seconds"], p["memory"], s=40)
        ax.annotate(f"{p['policy']} (budget {p['budget']})", (p["seconds"], p["memory"]), fontsize=7)
    ax.set_xlabel("rollout wall time (s)")
    ax.set_ylabel("revisit memory")
    ax.set_title("context policy: memory vs time")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---------------------------------------------------------------------------------------------------------- html
def _case_data(runs, media: Path, out: Path) -> dict:
    """Per case: every run's video (linked under media/), commanded path, phases and per-case scores."""
    cases: dict[str, dict] = {}
    for k, r in enumerate(runs):
        for s in r["samples"]:
            cid = s["case"]
            rec = r["run"] / cid
            video = rec / "video.mp4"
            entry = cases.setdefault(cid, {"id": cid, "runs": {}, "trajectory": None, "tags": s.get("tags", {})})
            def link(src, suffix=""):
                if not src.is_file():
                    return None
                dst = media / f"{k:02d}-{r['name']}" / f"{cid}{suffix}.mp4"
                dst.parent.mkdir(parents=True, exist_ok=True)
                if not dst.exists():
                    try:
                        os.link(src, dst)
                    except OSError:
                        shutil.copy2(src, dst)
                return str(dst.relative_to(out))

            vrel, vb = link(video), None
            if vrel is None and (rec / "video_a.mp4").is_file():  # a two-view record: player A and player B
                vrel, vb = link(rec / "video_a.mp4", "-A"), link(rec / "video_b.mp4", "-B")
            entry["runs"][r["name"]] = {"video": vrel, "video_b": vb, "error": s.get("error"),
                                        "scores": {m: v for m, v in (s.get("scores") or {}).items() if v is not None}}
            if entry["trajectory"] is None and (rec / "trajectory.json").is_file() and (rec / "poses.npy").is_file():
                tj = json.loads((rec / "trajectory.json").read_text())
                poses = np.load(rec / "poses.npy", allow_pickle=False)
                entry["trajectory"] = {
                    "fps": tj["fps"], "n_frames": tj["n_frames"],
                    "xz": np.round(poses[:, [0, 2], 3], 3).tolist(),
                    "yaw": np.round(np.degrees(np.arctan2(poses[:, 0, 2], poses[:, 2, 2])), 2).tolist(),
                    "segments": [{"label": _seg_label(x), "frames": x["frames"]} for x in tj["segments"]],
                    "phases": [{"name": p["name"], "frames": p["frames"]} for p in tj["phases"]],
                }
    return dict(sorted(cases.items()))


def _seg_label(seg) -> str:
    parts = [v for v in (seg["move"], seg["look"]) if v != "idle"]
    return "+".join(parts) or "hold"


def write_html(runs, out: Path) -> Path:
    media = out / "media"
    data = {
        "runs": [r["name"] for r in runs],
        "metrics": {m: {"name": i["name"], "range": i["range"], "higher": i["higher_is_better"]}
                    for m, i in METRIC_INFO.items()},
        "cases": _case_data(runs, media, out),
        "backend": runs[0]["backend"],
    }
    page = HTML.replace("__DATA__", json.dumps(data).replace("</", "<\\/"))
    page = page.replace("__TITLE__", html.escape("worldgate report: " + ", ".join(r["name"] for r in runs)))
    p = out / "index.html"
    p.write_text(page)
    return p


def write_report(run_dirs: list[str | Path], out: str | Path) -> dict:
    runs = [load_run(Path(r)) for r in run_dirs]
    if not runs:
        raise ReportError("give at least one run folder")
    backs = {r["backend"] for r in runs}
    if len(backs) > 1:
        raise ReportError(f"runs were scored with different backends ({sorted(backs)}); scores from different "
                          f"backends are never mixed: evaluate them all with the same --backend")
    names = [r["name"] for r in runs]
    if len(set(names)) != len(names):
        raise ReportError(f"two runs share a folder name ({names}); rename one so the tables can tell them apart")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    md, rows = table(runs, WORLDMARK_COLUMNS, "WorldMark", {"overall": _overall})
    (out / "worldmark.md").write_text(md)
    _write_csv(out / "worldmark.csv", rows)
    written["worldmark"] = "worldmark.md"
    parts = []
    for g, ids in WORLDMEMBENCH_GROUPS.items():
        gmd, grows = table(runs, ids, f"WorldMemBench — {g}")
        parts.append(gmd)
        _write_csv(out / f"worldmembench-{g.replace(' ', '-')}.csv", grows)
    (out / "worldmembench.md").write_text("\n".join(parts))
    written["worldmembench"] = "worldmembench.md"

    def track(ids):
        return lambda r: (np.mean([_mean(r, m) for m in ids if _mean(r, m) is not None])
                          if any(_mean(r, m) is not None for m in ids) else None)

    mw = [r["results"].get("multiworld") or {} for r in runs]
    tracks = sorted({t for m in mw for t in (m.get("tracks") or {})})
    cols = {f"track: {t}": (lambda r, t=t: ((r["results"].get("multiworld") or {}).get("tracks") or {}).get(t, {})
                            .get("mean")) for t in tracks}
    cols["overall"] = lambda r: (r["results"].get("multiworld") or {}).get("overall", track(MULTIWORLDBENCH)(r))
    md, rows = table(runs, MULTIWORLDBENCH, "MultiWorldBench", cols)
    (out / "multiworldbench.md").write_text(md)
    _write_csv(out / "multiworldbench.csv", rows)
    written["multiworldbench"] = "multiworldbench.md"
    for name, fn in (("profile.png", plot_profile), ("distributions.png", plot_distributions),
                     ("revisit_decay.png", plot_revisit_decay), ("context.png", plot_context)):
        if fn(runs, out / name):
            written[name] = name
    written["html"] = write_html(runs, out).name
    return written


HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
#bar{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin-bottom:10px}
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
</style></head><body>
<h2>__TITLE__</h2>
<div id="bar">
  <label>case <select id="case"></select></label>
  <button id="play">play</button>
  <input id="scrub" type="range" min="0" max="1000" value="0" style="width:260px">
  <span id="time">0.00 s</span>
  <span id="backend"></span>
</div>
<div id="grid"></div>
<div id="below">
  <svg id="path" width="260" height="260" viewBox="0 0 260 260" style="background:#fff;border:1px solid #ddd"></svg>
  <div id="timeline"><svg id="phases" width="100%" height="64"></svg><div id="seginfo"></div></div>
</div>
<table id="scores"></table>
<script id="data" type="application/json">__DATA__</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const sel = document.getElementById("case"), grid = document.getElementById("grid");
const playBtn = document.getElementById("play"), scrub = document.getElementById("scrub");
const COLORS = {V:"#9bd", H:"#ccc"};
let videos = [], cur = null;
document.getElementById("backend").textContent = "backend: " + D.backend;
for (const id of Object.keys(D.cases)) {
  const o = document.createElement("option"); o.value = id; o.textContent = id; sel.appendChild(o);
}
function master(){ return videos.find(v => v.readyState >= 1) || videos[0]; }
function fmt(m, v){ const r = D.metrics[m] ? D.metrics[m].range : ""; return r === "0-100" ? v.toFixed(1) : v.toFixed(3); }
function show(id){
  cur = D.cases[id]; grid.innerHTML = ""; videos = [];
  for (const run of D.runs) {
    const c = document.createElement("div"); c.className = "cell";
    const h = document.createElement("h3"); h.textContent = run; c.appendChild(h);
    const e = cur.runs[run];
    for (const src of e ? [e.video, e.video_b] : []) {
      if (!src) continue;
      const v = document.createElement("video"); v.src = src; v.muted = true; v.preload = "auto";
      v.playsInline = true; v.dataset.run = run; c.appendChild(v); videos.push(v);
      if (e.video_b) { v.style.width = "49%"; v.style.display = "inline-block"; v.title = src === e.video ? "player A" : "player B"; }
      v.addEventListener("timeupdate", tick);
      v.addEventListener("ended", () => { if (videos.every(x => x.ended || x.paused)) playBtn.textContent = "play"; });
    }
    if (!e) { const p = document.createElement("div"); p.className = "err"; p.textContent = "no rollout for this case"; c.appendChild(p); }
    else if (e.error) { const p = document.createElement("div"); p.className = "err"; p.textContent = e.error; c.appendChild(p); }
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
}
playBtn.onclick = () => {
  const m = master(); if (!m) return;
  if (m.paused) { for (const v of videos) { v.currentTime = m.currentTime; v.play().catch(()=>{}); } playBtn.textContent = "pause"; }
  else { for (const v of videos) v.pause(); playBtn.textContent = "play"; }
};
scrub.oninput = () => { const m = master(); if (!m || !m.duration) return; const t = m.duration * scrub.value / 1000; for (const v of videos) v.currentTime = t; tick(); };
sel.onchange = () => show(sel.value);
function drawPath(){
  const svg = document.getElementById("path"); svg.innerHTML = "";
  const T = cur.trajectory; if (!T) return;
  const xs = T.xz.map(p => p[0]), zs = T.xz.map(p => p[1]);
  const span = Math.max(1e-3, Math.max(...xs) - Math.min(...xs), Math.max(...zs) - Math.min(...zs));
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2, cz = (Math.max(...zs) + Math.min(...zs)) / 2;
  const s = 220 / span;
  svg._map = p => [130 + (p[0] - cx) * s, 130 - (p[1] - cz) * s];
  const pts = T.xz.map(p => svg._map(p).join(",")).join(" ");
  svg.innerHTML = `<polyline points="${pts}" fill="none" stroke="#36c" stroke-width="2"/>` +
    `<text x="6" y="14" font-size="11">commanded path (top view, +z up)</text>` +
    `<g id="cam"><circle r="5" fill="#d33"/><line x1="0" y1="0" x2="0" y2="-14" stroke="#d33" stroke-width="2"/></g>`;
}
function drawPhases(){
  const svg = document.getElementById("phases"); svg.innerHTML = "";
  const T = cur.trajectory; if (!T) return;
  const W = svg.clientWidth || 600, n = T.n_frames;
  let h = "";
  for (const p of T.phases) {
    const x0 = W * p.frames[0] / n, x1 = W * p.frames[1] / n;
    const col = COLORS[p.name[0]] || (p.name[0] === "D" ? "#fc8" : "#8d8");
    h += `<rect x="${x0}" y="0" width="${Math.max(1, x1 - x0)}" height="24" fill="${col}" stroke="#fff"/>` +
         `<text x="${x0 + 3}" y="16" font-size="11">${p.name}</text>`;
  }
  for (const sg of T.segments) {
    const x0 = W * sg.frames[0] / n, x1 = W * sg.frames[1] / n;
    h += `<rect x="${x0}" y="28" width="${Math.max(1, x1 - x0)}" height="22" fill="#eef" stroke="#99a"/>` +
         `<text x="${x0 + 3}" y="43" font-size="11">${sg.label}</text>`;
  }
  h += `<line id="playhead" x1="0" y1="0" x2="0" y2="52" stroke="#d33" stroke-width="2"/>`;
  svg.innerHTML = h;
  document.getElementById("seginfo").textContent = `${n} frames at ${T.fps} fps; phases (top) and commanded segments (bottom)`;
}
function drawMarker(t){
  const T = cur && cur.trajectory; if (!T) return;
  const i = Math.max(0, Math.min(T.n_frames - 1, Math.floor(t * T.fps)));
  const svg = document.getElementById("path"), cam = document.getElementById("cam");
  if (cam && svg._map) { const [x, y] = svg._map(T.xz[Math.min(i, T.xz.length - 1)]); cam.setAttribute("transform", `translate(${x},${y}) rotate(${T.yaw[Math.min(i, T.yaw.length - 1)]})`); }
  const ph = document.getElementById("playhead"), W = document.getElementById("phases").clientWidth || 600;
  if (ph) { const x = W * i / T.n_frames; ph.setAttribute("x1", x); ph.setAttribute("x2", x); }
}
function drawScores(){
  const t = document.getElementById("scores");
  const ms = Object.keys(D.metrics).filter(m => D.runs.some(r => cur.runs[r] && m in cur.runs[r].scores));
  let h = "<tr><th>metric</th>" + D.runs.map(r => `<th>${r}</th>`).join("") + "</tr>";
  for (const m of ms) {
    const vals = D.runs.map(r => cur.runs[r] ? cur.runs[r].scores[m] : undefined);
    const ok = vals.filter(v => v !== undefined).map(v => parseFloat(fmt(m, v)));  // rank what is shown
    const best = new Set(ok).size > 1 ? (D.metrics[m].higher ? Math.max(...ok) : Math.min(...ok)) : null;
    h += `<tr><td>${D.metrics[m].name}</td>` + vals.map(v => v === undefined ? "<td>n/a</td>" :
      `<td class="${parseFloat(fmt(m, v)) === best ? "best" : ""}">${fmt(m, v)}</td>`).join("") + "</tr>";
  }
  t.innerHTML = h;
}
if (sel.options.length) show(sel.options[0].value);
</script></body></html>
"""
