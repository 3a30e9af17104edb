"""One record's scores, the run-level capabilities, tracks and overall."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..features import FeatureCache, FeatureError
from ..score import na
from .capabilities import (
    cross_view_scores,
    persistence_scores,
    race_scores,
    revisit_scores,
    state_scores,
    structure_scores,
)
from .navigation import navigation_scores
from .projection import attach_projection, projection_info, save_projection
from .protocol import CAPABILITIES, KIND, PARAMS, TASK_OF, TRACKS, VIEWS
from .record import TwoView, extractor_info, open_two_view, view_features
from worldgate.generate.records import read_meta, record_views
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
        _record_error(Path(folder), row)
    except Exception as e:  # a bug in one record's scoring must not hide the others; it is reported in full
        row["error"] = f"{type(e).__name__}: {e}"
        _record_error(Path(folder), row, zero_rule=False)
    return row


MISSING_VIDEO = "missing generated video: a task failure, scored 0 (paper §4.1 zero rule)"
#: appended to a zero-ruled record's entry in results.json["errors"]: it is listed there (a real error to show), but
#: it was scored, and is counted once, as a zero rule of its own task's capabilities, never as a record error
ZERO_RULED = "scored 0 on its task's capabilities by the zero rule"


def _record_error(folder: Path, row: dict, zero_rule: bool = True) -> None:
    """An error row names its case's task where meta.json does, so the error counts against that task's
    capabilities only (as a zero rule or as a record error, see :func:`aggregate`), never against the others; a
    meta.json that is missing, refused or names no known task leaves the row in ``results["errors"]`` only."""
    try:
        meta = read_meta(folder) or {}
        task = ((meta.get("case") or {}).get("two_player") or {}).get("task")
        if not isinstance(task, str) or task not in set(TASK_OF.values()):
            return
        row["task"] = task
        if zero_rule:
            _missing_video(folder, row, meta, task)
    except Exception:  # noqa: BLE001 - whatever meta.json holds, the error row itself must come back
        return


def _missing_video(folder: Path, row: dict, meta: dict, task: str) -> None:
    """The paper's zero rule: a case whose generated video is missing is a task failure scored 0 on its task's
    capabilities and stays in the aggregate. Applies when meta.json names the case's task and a view's video file is
    absent or empty; any other record error stays an error (excluded from its task's capabilities, with the
    reason)."""
    views = record_views(meta)
    gone = [p for p in VIEWS if p in views and not _nonempty(folder / views[p]["video"])]
    if not gone:
        return
    own = [m for m in CAPABILITIES if TASK_OF[m] == task]
    row.update(task=task, missing_video=gone, kind=KIND, error=f"{row['error']} ({ZERO_RULED})",
               scores={m: (0.0 if m in own else None) for m in CAPABILITIES},
               unavailable={m: "not applicable" for m in CAPABILITIES if m not in own},
               detail={m: {"path": "zero rule", "missing_video": gone, "zero_rule": MISSING_VIDEO} for m in own},
               paths={m: "zero rule" for m in own})


def _nonempty(p: Path) -> bool:
    try:
        return p.is_file() and p.stat().st_size > 0
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------------ aggregate
def aggregate(samples: list[dict], wanted: set | None = None) -> dict:
    """Run-level capabilities from two-view sample rows: the mean over the scored cases of the capability's task
    (a missing video and the paper's zero rules count 0 and stay in; judge-unavailable and ineligible cases are
    excluded, their coverage reported). State persistence macro-averages the placement and destruction pass rates
    (§4.2).

    Only the cases of a capability's own task count for it, whatever happened to the others: a record error (a
    truncated or undecodable video, a bug) is excluded from its task's capabilities with the reason ``record error``
    and is not applicable elsewhere; a zero-ruled record (a missing or empty video) is scored 0 on its task's
    capabilities, counted once in ``zero_rule``, and is neither a record error nor unavailable anywhere. Both stay
    listed in ``results["errors"]``. A record whose task cannot be read (meta.json missing or refused) is listed there
    only."""
    out = {}
    for m in CAPABILITIES:
        if wanted and m not in wanted:
            continue
        vals, reasons, paths, ops, zero = [], {}, set(), {}, 0
        own = [s for s in samples if s.get("task") == TASK_OF[m]]
        for s in own:
            v = (s.get("scores") or {}).get(m)
            if v is None:
                r = "record error" if "error" in s else ((s.get("unavailable") or {}).get(m) or "unavailable")
                reasons[r] = reasons.get(r, 0) + 1
                continue
            vals.append(v)
            d = (s.get("detail") or {}).get(m) or {}
            if v == 0.0 and (d.get("zero_rule") or s.get("missing_video")):
                zero += 1
            if m == "state_persistence":
                op = d.get("op") or (s.get("tags") or {}).get("op") or "?"
                ops.setdefault(op, []).append(v)
            p = (s.get("paths") or {}).get(m)
            if p:
                paths.add(p)
        applicable = len(own)
        entry = {"mean": float(np.mean(vals)) if vals else None, "std": float(np.std(vals)) if vals else None,
                 "n": len(vals), "coverage": len(vals) / applicable if applicable else 0.0, "unavailable": reasons,
                 "applicable": applicable, "zero_rule": zero,
                 "path": ",".join(sorted(paths)) if paths else None, "aggregation": "mean over cases"}
        if m == "state_persistence" and ops:
            entry.update(mean=float(np.mean([np.mean(v) for v in ops.values()])),
                         per_operation={k: float(np.mean(v)) for k, v in sorted(ops.items())},
                         aggregation="macro-average of the placement and destruction pass rates")
        out[m] = entry
    return out


def tracks(metrics: dict) -> dict:
    """The paper's three tracks (equal weights) and the overall: the mean of all ten capabilities (§5.1), None
    unless all ten are available (``available_mean`` averages those that are)."""
    def mean(ids):
        v = [metrics[m]["mean"] for m in ids if m in metrics and metrics[m]["mean"] is not None]
        return float(np.mean(v)) if v else None

    avail = [m for m in CAPABILITIES if m in metrics and metrics[m]["mean"] is not None]
    return {"tracks": {t: {"mean": mean(ids) if all(m in avail for m in ids) else None, "capabilities": ids,
                           "available_mean": mean(ids)} for t, ids in TRACKS.items()},
            "overall": mean(CAPABILITIES) if len(avail) == len(CAPABILITIES) else None,
            "available_mean": mean(CAPABILITIES),
            "available": len(avail),
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
    if mw["overall"] is None and mw.get("available_mean") is not None:
        ov += f" (mean of the available: {mw['available_mean']:.1f})"
    return f"MultiWorldBench tracks: {'; '.join(cells)}; overall {ov} ({mw['available']}/10 capabilities)"
