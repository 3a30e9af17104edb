"""One record's scores, the run-level capabilities, tracks and overall."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..features import FeatureCache, FeatureError
from ..score import na
from .capabilities import (
    cross_view_scores,
    navigation_scores,
    persistence_scores,
    race_scores,
    revisit_scores,
    state_scores,
    structure_scores,
)
from .projection import attach_projection, projection_info, save_projection
from .protocol import CAPABILITIES, KIND, PARAMS, TASK_OF, TRACKS, VIEWS
from .record import TwoView, extractor_info, open_two_view, view_features
from .vlm import Judge, NoJudge


# ------------------------------------------------------------------------------------------------------ records
def measurable(tv: TwoView) -> bool:
    """Engine cases carry the geometry the measured path needs (the world spec with cells and the crosses)."""
    w = tv.spec.get("world")
    return isinstance(w, dict) and "seed" in w and tv.meta.get("intrinsics", {}).get("native") is not None


def score_two_view(tv: TwoView, feats: dict, backend: str, P: dict, judge: Judge | None = None) -> dict:
    """{capability: Score} for one record: the capabilities of its task; the others are not applicable."""
    task = tv.task
    j = judge if judge is not None else (None if measurable(tv) else NoJudge())
    if task == "matched_navigation":
        out = navigation_scores(tv, feats, backend, P)
    elif task == "cross_view_motion":
        out = cross_view_scores(tv, feats, backend, P, j)
    elif task == "shared_state":
        out = state_scores(tv, feats, P, j)
    elif task == "persistence":
        out = persistence_scores(tv, feats, P, j)
    elif task == "building_reveal":
        out = structure_scores(tv, feats, P, j)
    elif task == "concurrent_placement":
        out = race_scores(tv, feats, P, j)
    elif task == "delayed_revisit":
        out = revisit_scores(tv, feats, P, j)
    else:
        raise FeatureError(f"{tv.dir.name}: unknown MultiWorldBench task {task!r}")
    for m in CAPABILITIES:
        if m not in out:
            out[m] = na(f"not applicable: a {TASK_OF[m].replace('_', ' ')} capability ({task.replace('_', ' ')} case)")
    return out


def score_folder(folder: Path, cache: FeatureCache, backend: str = "classical", wanted: set | None = None,
                 P: dict | None = None, rescore: bool = False, stats: dict | None = None,
                 judge: Judge | None = None) -> dict:
    """One samples.jsonl row for a two-view record (an error entry with the reason when it cannot be scored)."""
    P = dict(PARAMS, **(P or {}))
    stats = stats if stats is not None else {"computed": 0, "cached": 0}
    row = {"case": Path(folder).name, "kind": KIND}
    try:
        tv = open_two_view(folder)
        feats = view_features(tv, backend, cache, rescore, stats)
        attach_projection(tv, cache, rescore, stats, complete=measurable(tv))  # the casts: cached like the features
        scores = score_two_view(tv, feats, backend, P, judge)
        save_projection(tv, cache)
        if wanted:
            scores = {k: v for k, v in scores.items() if k in wanted}
        row.update({
            "video_sha256": {p: tv.views[p].content_hash for p in VIEWS},
            "tags": tv.meta.get("case", {}).get("tags", {}),
            "task": tv.task,
            "visibility": tv.spec.get("visibility"),
            "adapter": tv.meta.get("adapter", {}).get("name"),
            "timing": tv.meta.get("timing"),
            "scores": {k: s.value for k, s in scores.items()},
            "unavailable": {k: s.reason for k, s in scores.items() if s.value is None},
            "detail": {k: s.detail for k, s in scores.items() if s.detail},
            "paths": {k: (s.detail or {}).get("path") for k, s in scores.items() if (s.detail or {}).get("path")},
        })
    except FeatureError as e:
        row["error"] = str(e)
    except Exception as e:  # a bug in one record's scoring must not hide the others; it is reported in full
        row["error"] = f"{type(e).__name__}: {e}"
    return row


# ------------------------------------------------------------------------------------------------------ aggregate
def aggregate(samples: list[dict], wanted: set | None = None) -> dict:
    """Run-level capabilities from two-view sample rows: means over the applicable cases, control isolation as the
    minimum over (target role, channel, partner condition) groups of the mean error."""
    n = len(samples)
    out = {}
    for m in CAPABILITIES:
        if wanted and m not in wanted:
            continue
        vals, reasons, paths = [], {}, set()
        for s in samples:
            if "error" in s:
                reasons["record error"] = reasons.get("record error", 0) + 1
                continue
            v = (s.get("scores") or {}).get(m)
            if v is None:
                r = (s.get("unavailable") or {}).get(m)
                if r:
                    reasons[r] = reasons.get(r, 0) + 1
                continue
            vals.append(v)
            p = (s.get("paths") or {}).get(m)
            if p:
                paths.add(p)
        entry = {"mean": float(np.mean(vals)) if vals else None, "std": float(np.std(vals)) if vals else None,
                 "n": len(vals), "coverage": len(vals) / n if n else 0.0, "unavailable": reasons,
                 "applicable": sum(1 for s in samples if s.get("task") == TASK_OF[m]),
                 "path": ",".join(sorted(paths)) if paths else None, "aggregation": "mean over cases"}
        if m == "control_isolation" and vals:
            groups: dict = {}
            for s in samples:
                d = (s.get("detail") or {}).get(m) or {}
                if (s.get("scores") or {}).get(m) is None or "e_rot" not in d:
                    continue
                for ch in ("rot", "trans"):
                    groups.setdefault(f"{d['role']}/{ch}/{d['condition']}", []).append(d[f"e_{ch}"])
            gvals = {g: 100.0 * (1.0 - min(1.0, float(np.mean(e)))) for g, e in sorted(groups.items())}
            entry.update(mean=min(gvals.values()), groups=gvals, per_case_mean=float(np.mean(vals)),
                         aggregation="100 min over (target role, channel, partner condition) of (1 - min(1, mean e))")
        out[m] = entry
    return out


def tracks(metrics: dict) -> dict:
    def mean(ids):
        v = [metrics[m]["mean"] for m in ids if m in metrics and metrics[m]["mean"] is not None]
        return float(np.mean(v)) if v else None

    return {"tracks": {t: {"mean": mean(ids), "capabilities": ids} for t, ids in TRACKS.items()},
            "overall": mean(CAPABILITIES),
            "available": sum(1 for m in CAPABILITIES if m in metrics and metrics[m]["mean"] is not None),
            "paths": {m: metrics[m].get("path") for m in CAPABILITIES if m in metrics}}


def finish_results(results: dict, samples: list[dict], wanted: set | None = None, **_) -> None:
    """Put the MultiWorldBench capabilities, tracks and overall into a run's results (in place). A run without
    two-view records keeps no MultiWorldBench rows; a run of only two-view records keeps no single-view rows."""
    two = [s for s in samples if s.get("kind") == KIND]
    one = [s for s in samples if s.get("kind") != KIND]
    if not two:
        for m in CAPABILITIES:
            results["metrics"].pop(m, None)
        return
    results["metrics"].update(aggregate(samples, wanted))
    if not one:
        for m in list(results["metrics"]):
            if m not in CAPABILITIES:
                results["metrics"].pop(m)
        results["backends"] = dict(extractor_info(), projection=projection_info())
    results["multiworld"] = tracks(results["metrics"])


def format_tracks(results: dict) -> str:
    mw = results.get("multiworld")
    if not mw:
        return ""
    cells = [f"{t} {v['mean']:.1f}" if v["mean"] is not None else f"{t} n/a" for t, v in mw["tracks"].items()]
    ov = "n/a" if mw["overall"] is None else f"{mw['overall']:.1f}"
    return f"MultiWorldBench tracks: {'; '.join(cells)}; overall {ov} ({mw['available']}/10 capabilities)"
