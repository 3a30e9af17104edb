"""WorldMark's memory metrics: local memory (mutation rate along the flow arc), revisit memory (round trips),
global memory (two-view geometry)."""

from __future__ import annotations

import math

import numpy as np

from ..score import Score, na
from .action import OPPOSITE, TEMPLATES, Seg, direction, segments
from .params import PARAMS


# ----------------------------------------------------------------------------------------------------- memory
def arc_length(feat) -> np.ndarray:
    """Cumulative flow arc length per frame (reference pixels); frame 0 at 0."""
    sp = feat["flow"]["speed"].astype(float) / float(feat["flow"].get("gap", 2))
    n = len(sp) + int(feat["flow"].get("gap", 2))
    per_frame = np.zeros(n)
    per_frame[1:len(sp) + 1] = sp
    return np.cumsum(per_frame)


def local_memory(feat, rec, backend: str, P=PARAMS) -> Score:
    fps = rec["fps"]
    emb, diff = feat["appearance"]["emb"], feat["appearance"]["frame_diff"]
    sp = feat["flow"]["speed"] / 2.0
    moving = sp[sp > 1e-3]
    if len(moving) == 0:
        return na("frozen video: no motion to sample along")
    step = float(np.median(moving)) * P["local_step_s"] * fps
    arc = arc_length(feat)[: len(emb)]
    targets = np.arange(0.0, arc[-1], step)
    idx = np.unique(np.searchsorted(arc, targets, side="left").clip(0, len(emb) - 1))
    if len(idx) < P["local_min_samples"]:
        return na(f"frozen: only {len(idx)} motion-indexed samples (< {int(P['local_min_samples'])})")
    cuts = np.nonzero(diff > P["hardcut_diff"])[0]
    hardcut_rate = len(cuts) / max(1, len(diff) - 1)
    excl = int(round(P["hardcut_exclude_s"] * fps))
    d = 1.0 - np.sum(emb[idx[:-1]] * emb[idx[1:]], axis=1)
    keep = np.array([not np.any(np.abs(cuts - i) <= excl) for i in idx[1:]], bool) if len(cuts) else np.ones(len(d), bool)
    thr = P[f"local_mutation_{backend}"]
    mutation = float(np.mean(d[keep] > thr)) if keep.any() else 0.0
    return Score(100.0 * (1 - hardcut_rate) * (1 - mutation),
                 detail={"samples": int(len(idx)), "mutation_rate": mutation, "hardcut_rate": hardcut_rate,
                         "median_d": float(np.median(d))})


def _seg_turn_deg(feat, seg: Seg) -> float:
    P = feat["poses"]
    pairs = seg.pairs[(seg.pairs < len(P["valid"]))]
    pairs = pairs[pairs % int(P.get("gap", 2)) == 0]  # non-overlapping pairs
    tot = 0.0
    for p in pairs:
        if P["valid"][p]:
            Rrel = P["R"][p].T
            tot += math.degrees(math.atan2(Rrel[0, 2], Rrel[2, 2])) if TEMPLATES[seg.key][2] == "yaw" else \
                math.degrees(math.asin(np.clip(-Rrel[1, 2], -1, 1)))
    return abs(tot)


def revisit_memory(feat, rec, backend: str, P=PARAMS) -> Score:
    fps = rec["fps"]
    emb = feat["appearance"]["emb"]
    segs = segments(rec["trajectory"], len(feat["flow"]["sx"]))
    arc = arc_length(feat)[: len(emb)]
    trips, scores, reasons = 0, [], []
    for a, b in zip(segs[:-1], segs[1:]):
        if not a.key or not b.key or OPPOSITE.get(a.key) != b.key or len(a.pairs) < 4 or len(b.pairs) < 4:
            continue
        trips += 1
        da, db = direction(feat, a)[1], direction(feat, b)[1]
        A_out = arc[a.frames[1] - 1] - arc[a.frames[0]]
        A_ret = arc[min(b.frames[1], len(arc)) - 1] - arc[b.frames[0] - 1]
        sym = min(A_out, A_ret) / max(A_out, A_ret, 1e-9)
        cov = A_ret / max(A_out, 1e-9)
        gate = None
        if min(da, db) < P["revisit_dir_gate"]:
            gate = f"direction gate ({min(da, db):.2f} < {P['revisit_dir_gate']})"
        elif sym < P["revisit_sym_gate"]:
            gate = f"gain symmetry gate ({sym:.2f})"
        elif cov < P["revisit_coverage_gate"]:
            gate = f"coverage gate ({cov:.2f})"
        elif TEMPLATES[a.key][2] in ("yaw", "pitch") and "poses" in feat and \
                _seg_turn_deg(feat, a) < P["revisit_min_turn_deg"]:
            gate = f"turn below {P['revisit_min_turn_deg']} deg"
        if gate:
            scores.append(0.0)
            reasons.append(gate)
            continue
        turn = arc[a.frames[1] - 1]
        span = min(A_out, A_ret)
        ds = []
        for s in np.linspace(0.05, 0.95, int(P["revisit_pairs"])) * span:
            i = int(np.searchsorted(arc[a.frames[0]:a.frames[1]], arc[a.frames[0]] + (A_out - s))) + a.frames[0]
            target = turn + s  # the return reaches the same place after unwinding s
            j = int(np.searchsorted(arc[b.frames[0]:b.frames[1]], target)) + b.frames[0]
            i, j = min(i, len(emb) - 1), min(j, len(emb) - 1)
            if abs(arc[j] - target) > P["revisit_tol_px"] or (j - i) / fps < P["revisit_min_gap_s"]:
                continue
            ds.append(1.0 - float(np.dot(emb[i], emb[j])))
        if not ds:
            scores.append(0.0)
            reasons.append("no outbound/return frame pairs within tolerance")
            continue
        scale = P[f"revisit_d_scale_{backend}"]
        scores.append(100.0 / (1.0 + float(np.mean(ds)) / scale))
    if trips == 0:
        return na("no round trip (WS, AD, LR, ...) in this trajectory")
    return Score(float(np.mean(scores)), detail={"trips": trips, "gated": reasons, "per_trip": scores})


def global_memory(feat, rec, backend: str = "classical", P=PARAMS) -> Score:
    e = feat["geometry"]["err"]
    e = e[np.isfinite(e)]
    if len(e) == 0:
        return na("no frame pair at 1 fps with enough matches to fit two-view geometry")
    med = float(np.median(e))
    return Score(100.0 / (1.0 + med / P[f"global_e_scale_{backend}"]), detail={"median_err": med, "pairs": int(len(e))})


