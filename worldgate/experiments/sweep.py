"""``worldgate sweep``: re-score runs from cached features under other thresholds; the leaderboard's rank stability."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldgate.evaluate.metrics import worldmark_columns
from worldgate.evaluate.runner import evaluate_run


def overall(result: dict) -> float | None:
    """Mean of the available WorldMark columns of a run (the leaderboard's ordering key)."""
    vals = [result["metrics"][m]["mean"] for m in worldmark_columns()
            if m in result["metrics"] and result["metrics"][m]["mean"] is not None]
    return float(np.mean(vals)) if vals else None


def run_sweep(runs: list[str], sweeps: list[str], backend: str = "classical") -> list[dict]:
    """Re-score runs from cached features under other thresholds; report the leaderboard's rank stability."""
    if len(runs) < 2:
        raise ValueError("a sweep compares leaderboards: give at least two runs")
    base = [overall(evaluate_run(Path(r), backend=backend, rescore=True, progress=False, write=False)) for r in runs]
    from scipy.stats import spearmanr  # deferred: scipy.stats takes ~1 s to import, and every CLI start loads this module

    rows = []
    for spec in sweeps:
        if "=" not in spec:
            raise ValueError(f"--param {spec!r}: expected NAME=v1,v2,... (e.g. local_mutation_classical=0.04,0.06,0.08)")
        name, values = spec.split("=", 1)
        for v in [float(x) for x in values.split(",") if x.strip()]:
            scores = [overall(evaluate_run(Path(r), backend=backend, rescore=True, params={name: v}, progress=False,
                                           write=False)) for r in runs]
            ok = [i for i, (a, b) in enumerate(zip(base, scores)) if a is not None and b is not None]
            rho = float(spearmanr([base[i] for i in ok], [scores[i] for i in ok])[0]) if len(ok) >= 2 else float("nan")
            rank_b = np.argsort(np.argsort([-base[i] for i in ok]))
            rank_s = np.argsort(np.argsort([-scores[i] for i in ok]))
            rows.append({"param": name, "value": v, "scores": scores, "spearman_rho": rho,
                         "max_rank_shift": int(np.max(np.abs(rank_b - rank_s))) if ok else None})
    return rows
