"""The report's plots: the capability profile of the table a benchmark declares as one (``Table.profile``), each
metric's distribution over cases, revisit memory per round trip, and memory against wall time per context policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .metrics import metric_info
from .report_tables import declared, mean


def _plot_label(s) -> str:
    """A run name as matplotlib text: a ``$`` would start mathtext (and an invalid one fails the whole report)."""
    return str(s).replace("$", r"\$")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_profile(runs, path: Path) -> bool:
    """The first declared table drawn as a profile (``Table.profile``): its metrics' means (0-100), per run."""
    t = next((t for t in declared() if t.profile), None)
    ids = [m for m in (t.metrics if t else ()) if any(mean(r, m) is not None for r in runs)]
    if not ids:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(ids) + 2), 4.5))
    w = 0.8 / len(runs)
    x = np.arange(len(ids))
    for k, r in enumerate(runs):
        ax.bar(x + k * w - 0.4 + w / 2, [mean(r, m) or 0.0 for m in ids], w, label=_plot_label(r["name"]))
    ax.set_xticks(x, [metric_info()[m]["name"] for m in ids], rotation=35, ha="right", fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("score (0-100)")
    ax.set_title(f"{t.title} capability profile")
    ax.legend(fontsize=7, ncol=min(4, len(runs)))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_distributions(runs, path: Path) -> bool:
    ids = [m for m in metric_info() if any(s.get("scores", {}).get(m) is not None for r in runs for s in r["samples"])]
    if not ids:
        return False
    plt = _plt()
    ncol = 4
    nrow = int(np.ceil(len(ids) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.4 * nrow), squeeze=False)
    for ax, m in zip(axes.flat, ids):
        data = [[s["scores"][m] for s in r["samples"] if s.get("scores", {}).get(m) is not None] for r in runs]
        ax.boxplot([d if d else [np.nan] for d in data], tick_labels=[_plot_label(r["name"][:10]) for r in runs])
        ax.set_title(metric_info()[m]["name"], fontsize=8)
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
    mem = mean(r, "revisit_memory")
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


__all__ = ["plot_profile", "plot_distributions", "revisit_decay", "plot_revisit_decay", "context_points",
           "plot_context", "plot_context_points"]
