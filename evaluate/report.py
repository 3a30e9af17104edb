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
pose file that is a symbolic link, or that resolves outside its run, is skipped with a warning naming it. A video is
copied into media/ (never hard-linked: editing the report never edits the run) and hashed as it is copied: one whose
sha256 is not the one its meta.json records (a file hard-linked into the record, a swapped video), or, where meta.json
records none, one with other hard links, is left out with a note saying why (copying and hashing run at several
hundred MB/s: a 500-video delivery adds seconds, not minutes).

Inputs are checked before anything is written: results.json and samples.jsonl must be regular files (a link, FIFO or
device is refused unopened), UTF-8, JSON, in evaluate's schema (results.json an object whose metrics are objects,
every samples.jsonl line an object); anything else is one :class:`ReportError` naming the file (and line) and what is
wrong, which the command line prints as one ``error:`` line, exit status 2.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from worldgate.generate.provenance import differences
from worldgate.generate.record_files import RecordError, read_regular_text

from .csv_cells import write_csv
from . import protocol as PR
from .metrics import METRIC_INFO, WORLDMARK_COLUMNS, benchmarks, metric_info
from .report_html import ReportError, _esc, write_html
from .uncertainty import per_case, rank_first

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


#: the most bytes the report reads of a run's results.json or samples.jsonl
MAX_RESULTS_BYTES = 1 << 30
_RERUN = "rewrite it with `worldgate evaluate {run}`"


def _read_text(path: Path, run: Path) -> str | None:
    """The UTF-8 text of a run's results.json / samples.jsonl; None when absent; :class:`ReportError` naming the file
    when it is a symbolic link, a FIFO, a device or a folder (never followed or opened), too large, or not UTF-8."""
    try:
        return read_regular_text(path, MAX_RESULTS_BYTES)
    except FileNotFoundError:
        return None
    except RecordError as e:  # the report reads only the regular files evaluate wrote into the run
        raise ReportError(f"{e}: {_RERUN.format(run=run)}") from None


def _parse_json(text: str, where: str, run: Path):
    try:
        return json.loads(text)
    except RecursionError:
        raise ReportError(f"{where} is nested too deeply to be evaluate's output: {_RERUN.format(run=run)}") from None
    except ValueError as e:  # JSONDecodeError (truncated, not JSON), an over-long integer
        msg = f"{e.msg} at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else \
            (str(e).splitlines() or [type(e).__name__])[0]
        raise ReportError(f"{where} is not valid JSON ({msg}): {_RERUN.format(run=run)}") from None


def _number(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _check_results(results, path: Path, run: Path) -> dict:
    """results.json as the report reads it: an object whose ``metrics`` map ids to objects (``mean`` a number or
    null) or null, ``backends`` map names to objects with a string ``backend``, ``config``/``multiworld`` objects;
    :class:`ReportError` naming the file and the first key that is not so."""
    def bad(what):
        return ReportError(f"{path}: {what}: not evaluate's results.json; {_RERUN.format(run=run)}")

    def kind(v):
        return "null" if v is None else f"a JSON {type(v).__name__}"

    if not isinstance(results, dict):
        raise bad(f"holds {kind(results)}, not an object")
    metrics = results.get("metrics", {})
    if not isinstance(metrics, dict):
        raise bad(f'"metrics" is {kind(metrics)}, not an object of metric id -> summary')
    for m, a in metrics.items():
        if a is not None and (not isinstance(a, dict) or not _number(a.get("mean"))):
            raise bad(f'"metrics"[{m!r}] is {kind(a)}' + (", whose mean is not a number" if isinstance(a, dict) else
                                                         ", not an object with a numeric mean"))
    backends = results.get("backends", {})
    if not isinstance(backends, dict) or not all(isinstance(b, dict) and isinstance(b.get("backend"), str)
                                                 for b in backends.values()):
        raise bad('"backends" is not an object of feature -> {"backend": name, ...}')
    for key in ("config", "multiworld"):
        if results.get(key) is not None and not isinstance(results[key], dict):
            raise bad(f'"{key}" is {kind(results[key])}, not an object')
    mw = results.get("multiworld") or {}
    if mw.get("tracks") is not None and not (isinstance(mw["tracks"], dict) and all(
            isinstance(t, dict) and _number(t.get("mean")) for t in mw["tracks"].values())):
        raise bad('"multiworld"."tracks" is not an object of track -> {"mean": number}')
    if not _number(mw.get("overall")):
        raise bad('"multiworld"."overall" is not a number')
    cfg = results.get("config") or {}
    if cfg.get("run_config") is not None and not isinstance(cfg["run_config"], dict) or \
            isinstance(cfg.get("run_config"), dict) and cfg["run_config"].get("context") is not None and \
            not isinstance(cfg["run_config"]["context"], dict):
        raise bad('"config"."run_config" (or its "context") is not an object')
    return results


def _check_sample(s, where: str, run: Path) -> dict:
    """One samples.jsonl line as the report reads it: an object whose scores / detail / timing / tags are objects."""
    if not isinstance(s, dict):
        raise ReportError(f"{where} holds a JSON {type(s).__name__}, not a sample object: {_RERUN.format(run=run)}")
    for key in ("scores", "detail", "timing", "tags", "features"):
        if s.get(key) is not None and not isinstance(s[key], dict):
            raise ReportError(f"{where}: \"{key}\" is a JSON {type(s[key]).__name__}, not an object: "
                              f"{_RERUN.format(run=run)}")
    bad = [m for m, v in (s.get("scores") or {}).items() if not _number(v)]
    if bad:
        raise ReportError(f"{where}: the score {bad[0]!r} is not a number or null: {_RERUN.format(run=run)}")
    rm = (s.get("detail") or {}).get("revisit_memory")
    if rm is not None and not (isinstance(rm, dict) and isinstance(rm.get("per_trip", []), list)
                               and all(_number(v) for v in rm.get("per_trip", []))):
        raise ReportError(f"{where}: \"detail\".\"revisit_memory\" is not an object with a numeric per_trip list: "
                          f"{_RERUN.format(run=run)}")
    if not _number((s.get("timing") or {}).get("rollout_s")):
        raise ReportError(f'{where}: "timing"."rollout_s" is not a number: {_RERUN.format(run=run)}')
    return s


def read_results(run: Path) -> dict:
    """A run's results.json, checked (:func:`_check_results`): :class:`ReportError` naming the file and what is wrong
    (absent, a link or FIFO, not UTF-8, not JSON, not evaluate's schema)."""
    run = Path(run)
    path = run / "results.json"
    text = _read_text(path, run)
    if text is None:
        raise ReportError(f"{run} has no results.json: score it first with `worldgate evaluate {run}`")
    return _check_results(_parse_json(text, str(path), run), path, run)


def load_run(run: Path) -> dict:
    """A scored run as the report reads it; every input is checked first, and anything malformed is one
    :class:`ReportError` naming the file (and line) and what is wrong."""
    run = Path(run)
    if not run.is_dir():
        raise ReportError(f"run folder {run} not found (or not a folder)")
    results = read_results(run)
    samples = []
    sp = run / "samples.jsonl"
    text = _read_text(sp, run)
    for n, x in enumerate((text or "").splitlines(), 1):
        if x.strip():
            where = f"{sp} line {n}"
            samples.append(_check_sample(_parse_json(x, where, run), where, run))
    backends = sorted({b["backend"] for b in results.get("backends", {}).values()})
    return {"run": run, "name": run.name, "results": results, "samples": samples, "backend": ",".join(backends)}


def _mean(r, m):
    a = r["results"].get("metrics", {}).get(m)
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
            if v is not None:
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
def comparability(runs: list[dict], allow_mixed: bool) -> str:
    """comparability.md: each run's protocol, why the runs cannot be ranked side by side (refused unless
    ``allow_mixed``), what differs in their provenance, and how often each run ranks first per metric over
    resamples of the cases they share."""
    scored = [r for r in runs if not r["results"].get("imported")]
    why = PR.mixed([r["results"] for r in scored]) if len(scored) > 1 else []
    if why and not allow_mixed:
        raise ReportError("these runs cannot be ranked side by side: " + "; ".join(why) + ". Report runs of one "
                          "protocol, or pass --allow-mixed (the report then says so on every table)")
    lines = ["# Comparability", ""] + [f"- {_md_cell(r['name'])}: {_md_cell(PR.header(r['results'].get('protocol')))}"
                                      for r in scored]
    if why:
        lines += ["", "**Mixed protocols (--allow-mixed)**: " + _md_cell("; ".join(why))]
    ref = scored[0] if scored else None
    for r in scored[1:]:
        diffs = differences((ref["results"].get("provenance") or {}), (r["results"].get("provenance") or {}))
        if diffs:
            lines += ["", f"What differs, {_md_cell(ref['name'])} -> {_md_cell(r['name'])}:"] + \
                     [f"- {_md_cell(d)}" for d in diffs[:40]]
    if len(scored) > 1:
        info = metric_info()
        lines += ["", "How often each run ranks first (bootstrap over the shared cases):", "",
                  "| metric | " + " | ".join(_md_cell(r["name"]) for r in scored) + " |",
                  "|---|" + "---|" * len(scored)]
        for m in info:
            share = rank_first({r["name"]: per_case(r["samples"], m) for r in scored},
                               higher=info[m]["higher_is_better"])
            if share:
                lines.append(f"| {_md_cell(info[m]['name'])} | " + " | ".join(f"{share[r['name']]:.0%}"
                                                                           for r in scored) + " |")
    return "\n".join(lines) + "\n"


def write_report(run_dirs: list[str | Path], out: str | Path, allow_mixed: bool = False) -> dict:
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
    comp = comparability(runs, allow_mixed)  # refused before anything is written
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    (out / "comparability.md").write_text(comp)
    written["comparability"] = "comparability.md"
    md, rows = table(runs, WORLDMARK_COLUMNS, "WorldMark", {"overall": _overall})
    wm = next((b for b in benchmarks() if b.name == "worldmark"), None)
    notes = [(r["name"], wm.summary(r["results"])) for r in runs] if wm is not None and wm.summary else []
    if any(n for _, n in notes):  # beside the table: which WorldMark it is, and every deviation from it
        md += "\n" + "\n".join(f"- {_md_cell(name)}: " + "; ".join(_md_cell(x.strip()) for x in n.splitlines())
                                for name, n in notes if n) + "\n"
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
