"""Under each rollout of the HTML report, why its WorldMark action scores are what they are (:func:`case_signals`,
WorldMark's ``Benchmark.signals``): the per-frame flow signals Sx and Srad read from the record's cached flow feature
(found through FeatureCache by the record's inputs digest; the report never computes flow), on the scale WorldMark's
scoring reads them (protocol.flow_cache: SEA-RAFT's half-size pixels unless the run set ``wm_flow_full_scale``), over
the commanded segments, with the switches, the channel each segment is scored on (flow_eval.KEY_FLOW) and WorldMark's
stable zones (flow_eval.stable_window on WorldMark's 16 fps time base, mapped to flow samples as protocol.time_base
does). Playback is on the video's real time (sample i at i / fps). A trace is at most MAX_TRACE_POINTS points (an
envelope beyond)."""

from __future__ import annotations

import itertools
import logging
import os
import re
from pathlib import Path

import numpy as np

from ..features import FeatureCache, FeatureError, open_record
from ..report_files import inside, seg_label
from .flow_eval import KEY_FLOW, stable_window
from .protocol import flow_config, record_keys, time_base

log = logging.getLogger("worldgate.report")


#: the most points one trace of a rollout's signal plot carries (a 10-minute video's 9,600 samples become an envelope)
MAX_TRACE_POINTS = 2000
#: the largest cached flow feature the report reads (a 10-minute 16 fps record's is ~5 MB, its 8x8 grid included)
MAX_FLOW_BYTES = 256 << 20
CHANNEL = {"rad": "srad", "hor": "sx"}


def envelope(v: np.ndarray, limit: int = MAX_TRACE_POINTS) -> dict:
    """A trace of at most ``limit`` points: every sample where there are few enough, else each of ``(limit - 2) // 2``
    even buckets' minimum and maximum, and the first and last sample, in time order (so no spike is lost). {"i":
    sample indices, "v": values (4 decimals; non-finite ones null)}."""
    v = np.asarray(v, float)
    if len(v) <= limit:
        idx = np.arange(len(v))
    else:
        edges = np.linspace(0, len(v), (limit - 2) // 2 + 1).astype(int)
        picks = {0, len(v) - 1}  # the trace spans the whole timeline
        for lo, hi in itertools.pairwise(edges):
            w = v[lo:hi]
            ok = np.isfinite(w)
            if not ok.any():
                picks.add(int(lo))
                continue
            ww = np.where(ok, w, np.nan)
            picks |= {int(lo) + int(np.nanargmin(ww)), int(lo) + int(np.nanargmax(ww))}
        idx = np.asarray(sorted(picks), int)
    return {"i": idx.tolist(), "v": [round(float(x), 4) if np.isfinite(x) else None for x in v[idx]]}


class CachedFeature:
    """The cache key of a feature that ``evaluate`` recorded for a sample (``name@version-backend``)."""

    def __init__(self, key: str):
        self._key = key

    def key(self) -> str:
        return self._key


def flow_key(sample: dict, results: dict) -> str | None:
    key = (sample.get("features") or {}).get("flow") if isinstance(sample.get("features"), dict) else None
    if key is None:
        key = ((results.get("backends") or {}).get("flow") or {}).get("key")
    if not isinstance(key, str) or not re.fullmatch(r"flow@[A-Za-z0-9_.-]+", key):
        return None
    return key


def load_flow(run: Path, rec: Path, key: str):
    """(the record's cached flow arrays, its RecordView) or (None, why not): found through FeatureCache by the
    record's inputs digest (open_record checks the record against its meta.json first); the cache file must be a
    regular file inside the run."""
    try:
        view = open_record(rec)
    except FeatureError as e:
        return None, f"the record cannot be read ({e})"
    cache = FeatureCache(run / ".features")
    p = cache.path(view, CachedFeature(key))
    try:
        st = os.lstat(p)
    except OSError:
        return None, f"no flow feature ({key}) is cached for this record: run `worldgate evaluate {run.name}`"
    if p.is_symlink() or not p.is_file() or not inside(p, run) or any(q.is_symlink() for q in (p.parent, p.parent.parent)):
        log.warning("skipped %s: a symbolic link or not a regular file inside its run %s", p, run)
        return None, "the cached flow feature is a link or not a regular file inside the run: skipped"
    if st.st_size > MAX_FLOW_BYTES:
        return None, f"the cached flow feature is {st.st_size} bytes, over the report's {MAX_FLOW_BYTES}: skipped"
    F = cache.get(view, CachedFeature(key))
    if F is None or "sx" not in F or "srad" not in F:
        return None, "the cached flow feature is unreadable (no sx/srad arrays)"
    sx, srad = np.asarray(F["sx"]), np.asarray(F["srad"])
    if sx.ndim != 1 or srad.shape != sx.shape or sx.dtype.kind not in "fi" or srad.dtype.kind not in "fi":
        return None, "the cached flow feature's sx/srad are not two 1-D numeric arrays of one length"
    return {"sx": sx.astype(float), "srad": srad.astype(float), "gap": int(np.asarray(F.get("gap", 2)))}, view


def case_signals(run: Path, rec: Path | None, sample: dict, results: dict) -> tuple[dict | None, str]:
    """What the plot under a rollout shows, or (None, why not): the record's per-frame flow signals Sx and Srad (from
    its cached flow feature only, on the scale WorldMark's scoring reads them: protocol.flow_cache), its commanded
    segments and switches, and per segment the channel it is scored on (flow_eval.KEY_FLOW) and WorldMark's stable
    zone (flow_eval.stable_window on WorldMark's time base, mapped to samples as protocol.time_base does).

    Times: flow sample i (frame i vs i + gap) sits at the video's real time i / fps; a zone [a, b] in WorldMark's
    seconds covers samples a * time_base .. b * time_base (time_base 16 whatever the video's fps, unless the run set
    wm_time_base_real_fps)."""
    if rec is None:
        return None, "no record folder: no flow signals"
    key = flow_key(sample, results)
    if key is None:
        return None, "evaluate recorded no flow feature for this record"
    F, view = load_flow(run, rec, key)
    if F is None:
        return None, view
    P = ((results.get("config") or {}).get("params") or {})
    P = P if isinstance(P, dict) else {}
    full = bool(P.get("wm_flow_full_scale"))
    scale = 1.0 if full else 0.5
    fps = float(view.fps)
    r = {"fps": fps}
    tb = time_base(r, P)
    cfg = flow_config(P, r)
    n = len(F["sx"])
    segs = view.trajectory.get("segments") or []
    keys, why = record_keys(view.trajectory)
    if keys is not None and n < 8:
        keys, why = None, f"{n} flow samples: too short for WorldMark's segments"
    tm = np.arange(n) / tb  # protocol.flow_cache's timeline
    dur = float(tm[-1]) if n else 0.0
    out_segs = []
    for j, s in enumerate(segs):
        frames = [int(f) for f in s["frames"][:2]]
        e = {"label": seg_label(s), "frames": frames, "key": None, "channel": None, "sign": None,
             "zone": None, "zone_s": None, "zone_n": 0, "span": None}
        if keys is not None:
            k = keys[j]
            a, b = stable_window(j, len(keys), dur, cfg)
            ch, sign = KEY_FLOW[k]
            e.update(key=k, channel=CHANNEL[ch], sign=sign, zone_s=[a, b], zone=[a * tb, b * tb],
                     zone_n=int(((tm >= a) & (tm <= b)).sum()),  # the samples flow_eval.score reads of it
                     span=[j * dur / len(keys) * tb, (j + 1) * dur / len(keys) * tb])
        out_segs.append(e)
    unit = ("px of a 640-wide frame" if full else
            "px, SEA-RAFT's half-size scale (flow of a 640-wide frame / 2), as WorldMark scores it")
    return {
        "fps": fps, "n": n, "gap": F["gap"], "scale": scale, "unit": unit, "time_base": tb,
        "sx": envelope(F["sx"] * scale), "srad": envelope(F["srad"] * scale),
        "segments": out_segs, "switches": [e["frames"][0] / fps for e in out_segs[1:]],
        "min_samples": cfg.min_samples,
        "why": "" if keys is not None else why, "feature": key,
    }, ""


__all__ = ["MAX_TRACE_POINTS", "MAX_FLOW_BYTES", "CHANNEL", "envelope", "CachedFeature", "flow_key", "load_flow",
           "case_signals"]
