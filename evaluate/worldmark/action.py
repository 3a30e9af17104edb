"""WorldMark's action metrics from the flow signals: segments, the parallax split, direction accuracy and purity,
motion stability and response latency."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..score import Score, na
from .params import PARAMS

# key -> (channel, sign, type); types: forward / lateral / yaw / pitch
TEMPLATES = {
    "W": ("srad", 1.0, "forward"), "S": ("srad", -1.0, "forward"),
    "A": ("sx", 1.0, "lateral"), "D": ("sx", -1.0, "lateral"),
    "L": ("sx", 1.0, "yaw"), "R": ("sx", -1.0, "yaw"),
    "^": ("sy", 1.0, "pitch"), "v": ("sy", -1.0, "pitch"),
}
TRANS_KEYS = set("WSAD")
OPPOSITE = {"W": "S", "S": "W", "A": "D", "D": "A", "L": "R", "R": "L", "^": "v", "v": "^"}


# ----------------------------------------------------------------------------------------------------- segments
@dataclass
class Seg:
    index: int
    key: str | None
    frames: tuple[int, int]
    pairs: np.ndarray  # pair indices p (frames p -> p+gap) inside the segment


def segments(traj: dict, n_pairs: int, gap: int = 2) -> list[Seg]:
    out = []
    for s in traj["segments"]:
        mv, lk = s["move"], s["look"]
        key = mv if (mv != "idle" and lk == "idle") else (lk if (lk != "idle" and mv == "idle") else None)
        a, b = s["frames"]
        pairs = np.arange(a, max(a, min(b - gap, n_pairs)))
        out.append(Seg(s["index"], key, (a, b), pairs))
    return out


def smooth(x: np.ndarray, n: int) -> np.ndarray:
    if n <= 1 or len(x) < 2:
        return x.astype(float)
    k = np.ones(n) / n
    pad = np.pad(x.astype(float), (n // 2, n - 1 - n // 2), mode="edge")
    return np.convolve(pad, k, mode="valid")


def parallax_amplitudes(feat: dict, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(translation, rotation) horizontal-motion amplitudes per pair.

    Learned backend (METRICS.md): with inverse depth d from the 1 fps depth maps, fit the flow grid's horizontal
    component ``u = a d + b``; translation = |a| (P95 - P5 of d), rotation = |b|. Classical backend: the pose
    extractor's split of the tracked flow into rotation-induced and parallax parts."""
    if "depth" in feat:
        D, grid = feat["depth"], feat["flow"]["grid"]
        fr = D["frame"]
        tr, ro = [], []
        for p in pairs[pairs < len(grid)]:
            if len(fr) == 0:
                break
            d = D["disparity"][int(np.argmin(np.abs(fr - p)))].ravel().astype(float)
            u = grid[p][..., 0].ravel().astype(float)
            A = np.c_[d, np.ones_like(d)]
            (a, b), *_ = np.linalg.lstsq(A, u, rcond=None)
            tr.append(abs(a) * (np.percentile(d, 95) - np.percentile(d, 5)))
            ro.append(abs(b))
        return np.asarray(tr), np.asarray(ro)
    P = feat["poses"]
    pv = pairs[pairs < len(P["valid"])]
    pv = pv[P["valid"][pv]]
    return P["trans_amp"][pv], P["rot_amp"][pv]


def p_trans(feat: dict, pairs: np.ndarray) -> float:
    """WorldMark's parallax split: translation share of the horizontal motion over the given pairs."""
    tr, ro = parallax_amplitudes(feat, pairs)
    if len(tr) == 0:
        return 0.5
    w = tr + ro
    if w.sum() <= 1e-9:
        return 0.5
    # median of the per-pair shares weighted by motion: still frames do not vote, a misjudged pair cannot tip it
    p = tr / np.maximum(w, 1e-12)
    order = np.argsort(p)
    cw = np.cumsum(w[order])
    return float(p[order][np.searchsorted(cw, 0.5 * cw[-1])])


def _channel(feat, key, pairs):
    ch, sign, typ = TEMPLATES[key]
    return feat["flow"][ch][pairs].astype(float), sign, typ


def direction(feat, seg: Seg) -> tuple[float, float]:
    """(weighted accuracy, raw dir) of one segment."""
    ch, sign, typ = _channel(feat, seg.key, seg.pairs)
    d = float(np.mean(sign * ch) / (np.mean(np.abs(ch)) + 1e-9))
    w = 1.0
    if typ == "lateral":
        w = p_trans(feat, seg.pairs)
    elif typ == "yaw":
        w = 1.0 - p_trans(feat, seg.pairs)
    return d * w, d


def purity(feat, seg: Seg, fps: float = 16.0, P=PARAMS) -> float:
    F = feat["flow"]
    n = max(1, int(round(P["smooth_s"] * fps)))  # smoothed like every speed signal: flow noise is not motion
    sx = float(np.mean(np.abs(smooth(F["sx"][seg.pairs], n))))
    srad = float(np.mean(np.abs(smooth(F["srad"][seg.pairs], n))))
    sy = float(np.mean(np.abs(smooth(F["sy"][seg.pairs], n))))
    typ = TEMPLATES[seg.key][2]
    if typ == "pitch":
        return sy / (sx + sy + srad + 1e-9)
    if typ == "forward":
        lateral = yaw = 0.5 * sx
    else:
        p = p_trans(feat, seg.pairs)
        lateral, yaw = p * sx, (1 - p) * sx
    on = {"forward": srad, "lateral": lateral, "yaw": yaw}[typ]
    return on / (lateral + yaw + srad + 1e-9)


def stability(feat, seg: Seg, fps: float, P=PARAMS) -> float:
    ch, _, _ = _channel(feat, seg.key, seg.pairs)
    v = smooth(np.abs(ch), max(1, int(round(P["smooth_s"] * fps))))
    if len(v) < 4:
        return float("nan")
    g = np.percentile(v, P["stab_baseline_pct"])
    if g <= 1e-6:
        return 0.0
    low = v < P["stab_sustain_frac"] * g
    sustain = 1.0 - float(low.mean())
    hiccups, i, n = 0, 0, len(v)
    min_len = P["stab_hiccup_min_s"] * fps
    while i < n:
        if low[i]:
            j = i
            while j < n and low[j]:
                j += 1
            if j - i >= min_len and j < n and np.any(v[j:] > P["stab_recover_frac"] * g):
                hiccups += 1
            i = j
        else:
            i += 1
    hr = hiccups / (n / fps)
    w = max(1, int(round(P["stab_decay_window_s"] * fps)))
    first, last = float(np.mean(v[:w])), float(np.mean(v[-w:]))
    decay = float(np.clip(last / first, 0, 1.2)) if first > 1e-9 else 0.0
    return sustain * math.exp(-hr / P["stab_hr_scale"]) * min(1.0, decay / P["stab_decay_ref"])


def latency(feat, seg: Seg, fps: float, P=PARAMS) -> float:
    ch, sign, _ = _channel(feat, seg.key, seg.pairs)
    if len(ch) < 4:
        return float("nan")
    v_ref = np.percentile(np.abs(ch), P["lat_vref_pct"])
    s = smooth(sign * ch, max(1, int(round(P["smooth_s"] * fps))))
    L = len(s) / fps
    steady = float(np.median(s[len(s) // 2:]))
    if v_ref <= 1e-9 or steady <= P["lat_noresponse_frac"] * v_ref:
        return 0.0
    hit = np.nonzero(s >= P["lat_thresh_frac"] * v_ref)[0]
    lat = hit[0] / fps if len(hit) else L
    return 1.0 - min(lat, L) / L


def _split_scores(feat, rec, fn) -> dict[str, Score]:
    segs = [s for s in segments(rec["trajectory"], len(feat["flow"]["sx"])) if s.key and len(s.pairs) >= 4]
    out = {}
    for split, keys in (("trans", TRANS_KEYS), ("rot", set("LR^v"))):
        vals = [fn(s) for s in segs if s.key in keys]
        vals = [v for v in vals if v is not None and not math.isnan(v)]
        out[split] = Score(100.0 * float(np.mean(vals)), detail={"segments": len(vals)}) if vals else \
            na(f"no {'translation' if split == 'trans' else 'rotation'} segment in this trajectory")
    return out


def worldmark_action(feat, rec, P=PARAMS) -> dict[str, Score]:
    fps = rec["fps"]
    out = {}
    for mid, fn in (
        ("direction_accuracy", lambda s: float(np.clip(direction(feat, s)[0], 0.0, 1.0))),
        ("direction_purity", lambda s: purity(feat, s, fps, P)),
        ("motion_stability", lambda s: stability(feat, s, fps, P)),
        ("response_latency", lambda s: latency(feat, s, fps, P)),
    ):
        for split, sc in _split_scores(feat, rec, fn).items():
            out[f"{mid}_{split}"] = sc
    return out

