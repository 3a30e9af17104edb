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
    index.html + media/        case picker, synced playback, commanded path + phase timeline, per-case scores, and
                               under each rollout its flow signals Sx, Srad (from the cached flow feature) over the
                               commanded segments, WorldMark's stable zones and the switches, with a playback cursor

Runs scored with different backends are never put in one table. A CSV cell a spreadsheet would read as a formula
(starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, and not a plain number) gets a leading ``'``.

Everything the page shows from the runs (run and case names, prompts, tags, phase and segment names, errors) reaches
the page as text: Python-side through ``_esc`` (html.escape), the embedded JSON through ``_script_json`` (``<``, ``>``
and ``&`` as ``\\u003c`` etc., so no string can close its ``<script>``), and in the browser through ``textContent`` /
``setAttribute`` only (the script never assigns ``innerHTML``). A Content-Security-Policy lets only the page's own
script run. Media are taken only from regular files inside their record folder: a record folder, video, trajectory or
pose file that is a symbolic link, or that resolves outside its run, is skipped with a warning naming it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from .csv_cells import write_csv
from .metrics import METRIC_INFO, WORLDMARK_COLUMNS
from .report_html import ReportError, _esc, write_html

# WorldMemBench groups (METRICS.md); ids not produced by any run are left out of the table
WORLDMEMBENCH_GROUPS = {
    "static memory": ["human_identity", "human_appearance", "object_appearance", "object_geometry",
                      "environment_visible", "depth_spearman", "spherical_reconstruction"],
    "dynamic memory": ["dynamic_p_start", "dynamic_conditional", "dynamic_score", "dynamic_return_progress",
                       "dynamic_persistence", "dynamic_final_state", "dynamic_causal", "dynamic_probe_score",
                       "dynamic_probe_p_start", "dynamic_probe_conditional"],
    "quality": ["imaging_quality", "aesthetic_quality"],
    "camera following": ["camera_rpe_trans", "camera_rpe_rot"],
}
MULTIWORLDBENCH = ["control_isolation", "coordination_fairness", "cross_view_motion", "state_synchronization",
                   "state_persistence", "structural_consistency", "spatial_reasoning", "race_condition_consistency",
                   "style_consistency", "id_consistency"]


log = logging.getLogger("worldgate.report")


def _md_cell(s) -> str:
    return _esc(s).replace("|", "\\|")


def _plot_label(s) -> str:
    """A run name as matplotlib text: a ``$`` would start mathtext (and an invalid one fails the whole report)."""
    return str(s).replace("$", r"\$")


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
        md.append("| " + " | ".join([_md_cell(r["name"]), _md_cell(r["results"].get("records", ""))] + cells + ex)
                  + " |")
        rows.append([r["name"], str(r["results"].get("records", ""))] +
                    ["" if vals[m][i] is None else f"{vals[m][i]:.6g}" for m in ids] +
                    ["" if f(r) is None else f"{f(r):.6g}" for f in extra_cols.values()])
    backend = runs[0]["backend"] if runs else ""
    md += ["", (f"backend: {_md_cell(backend)}; best **bold**, second <u>underlined</u>, worst ▼ "
                "(lower is better for RPE columns); n/a = unavailable for every case of the run"), ""]
    if not ids:
        md = [f"### {title}", "", "no run has any of these metrics", ""]
    return "\n".join(md), rows




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
        ax.bar(x + k * w - 0.4 + w / 2, [_mean(r, m) or 0.0 for m in ids], w, label=_plot_label(r["name"]))
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
        ax.boxplot([d if d else [np.nan] for d in data], tick_labels=[_plot_label(r["name"][:10]) for r in runs])
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
        ax.plot([f"R{i + 1}" for i in range(len(ys))], [np.nan if y is None else y for y in ys], "o-",
                label=_plot_label(name))
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
        ax.annotate(_plot_label(f"{p['policy']} (budget {p['budget']})"), (p["seconds"], p["memory"]), fontsize=7)
    ax.set_xlabel("rollout wall time (s)")
    ax.set_ylabel("revisit memory")
    ax.set_title("context policy: memory vs time")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---------------------------------------------------------------------------------------------------------- html
def write_report(run_dirs: list[str | Path], out: str | Path) -> dict:
    runs = [load_run(Path(r)) for r in run_dirs]
    if not runs:
        raise ReportError("give at least one run folder")
    # runs imported from a benchmark's own results (WorldMark's perception, labelled imported) stand beside any
    # backend: they are the benchmark's numbers, which is what worldgate's are compared with
    backs = {r["backend"] for r in runs if not r["results"].get("imported")}
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
    write_csv(out / "worldmark.csv", rows)
    written["worldmark"] = "worldmark.md"
    parts = []
    for g, ids in WORLDMEMBENCH_GROUPS.items():
        gmd, grows = table(runs, ids, f"WorldMemBench — {g}")
        parts.append(gmd)
        write_csv(out / f"worldmembench-{g.replace(' ', '-')}.csv", grows)
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
    write_csv(out / "multiworldbench.csv", rows)
    written["multiworldbench"] = "multiworldbench.md"
    for name, fn in (("profile.png", plot_profile), ("distributions.png", plot_distributions),
                     ("revisit_decay.png", plot_revisit_decay), ("context.png", plot_context)):
        if fn(runs, out / name):
            written[name] = name
    written["html"] = write_html(runs, out).name
    return written
