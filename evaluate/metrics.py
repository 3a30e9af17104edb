"""Metrics: cheap pure functions of cached features (see ../shared/METRICS.md for the definitions).

Every threshold is a named entry of :data:`PARAMS`, so ``worldgate sweep`` can re-score from the cache with other
settings. A metric returns a :class:`Score`: a value, or ``None`` with the reason it is unavailable (not applicable,
not evaluable, or no honest backend), never a made-up number.

WorldMark scores are on [0, 100]; the action metrics are split into ``_trans`` (W/S/A/D segments) and ``_rot``
(yaw L/R and pitch segments). Camera following (WorldMemBench) reports RPEs, lower is better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PARAMS: dict[str, float] = {
    # WorldMemBench static memory: normalised cross-correlation below which a revisit has no valid observation
    "memory_min_match": 0.35,
    "memory_depth_max_gap": 4,  # frames between a revisit frame and the nearest frame with depth (learned)
    "spherical_bins": 24,  # elevation bins of the spherical grid (azimuth has twice as many)
    "spherical_log_tol": 0.2231,  # log(1.25): a common bin whose ranges differ by 25 % (after delta) scores 0
    # shared
    "smooth_s": 0.3,  # speed smoothing window
    # motion stability
    "stab_baseline_pct": 70.0,
    "stab_sustain_frac": 0.4,
    "stab_recover_frac": 0.5,
    "stab_hiccup_min_s": 0.3,
    "stab_hr_scale": 0.5,
    "stab_decay_window_s": 3.0,
    "stab_decay_ref": 0.7,
    # response latency
    "lat_vref_pct": 75.0,
    "lat_noresponse_frac": 0.1,
    "lat_thresh_frac": 0.5,
    # local memory
    "local_step_s": 0.5,
    "local_min_samples": 5,
    "local_mutation_classical": 0.06,  # 1 - cos of the classical colour+texture embedding
    "local_mutation_learned": 0.10,  # 1 - cos of pooled DINOv2 tokens (WorldMark)
    "hardcut_diff": 0.2,  # mean |frame difference| (fraction of full scale) that marks a hard cut
    "hardcut_exclude_s": 0.5,
    # revisit memory
    "revisit_dir_gate": 0.3,
    "revisit_sym_gate": 0.5,
    "revisit_coverage_gate": 0.3,
    "revisit_min_turn_deg": 15.0,
    "revisit_pairs": 10,
    "revisit_min_gap_s": 2.0,
    "revisit_tol_px": 30.0,
    "revisit_d_scale_classical": 0.2,
    "revisit_d_scale_learned": 1.0,
    # global memory: WorldMark's 0.05 is for VGGT's cross-frame error; the classical stand-in (median Sampson error
    # of ORB matches, focal-normalised) has a noise floor of ~0.5 px on a clean rigid world, so its scale is 0.1
    "global_e_scale_learned": 0.05,
    "global_e_scale_classical": 0.1,
    # imaging quality proxy (classical)
    "quality_sharp_ref": 300.0,
    "quality_noise_ref": 10.0,
}

# key -> (channel, sign, type); types: forward / lateral / yaw / pitch
TEMPLATES = {
    "W": ("srad", 1.0, "forward"), "S": ("srad", -1.0, "forward"),
    "A": ("sx", 1.0, "lateral"), "D": ("sx", -1.0, "lateral"),
    "L": ("sx", 1.0, "yaw"), "R": ("sx", -1.0, "yaw"),
    "^": ("sy", 1.0, "pitch"), "v": ("sy", -1.0, "pitch"),
}
OPPOSITE = {"W": "S", "S": "W", "A": "D", "D": "A", "L": "R", "R": "L", "^": "v", "v": "^"}
TRANS_KEYS = set("WSAD")

METRIC_INFO: dict[str, dict] = {}


def _info(mid, name, bench, rng="0-100", higher=True, needs=()):
    METRIC_INFO[mid] = {"name": name, "benchmark": bench, "range": rng, "higher_is_better": higher, "needs": needs}


for _s, _n in (("trans", "translation"), ("rot", "rotation")):
    _info(f"direction_accuracy_{_s}", f"Direction Accuracy ({_n})", "WorldMark", needs=("flow", "poses"))
    _info(f"direction_purity_{_s}", f"Direction Purity ({_n})", "WorldMark", needs=("flow", "poses"))
    _info(f"motion_stability_{_s}", f"Motion Stability ({_n})", "WorldMark", needs=("flow",))
    _info(f"response_latency_{_s}", f"Response Latency ({_n})", "WorldMark", needs=("flow",))
_info("local_memory", "Local Memory", "WorldMark", needs=("flow", "appearance"))
_info("revisit_memory", "Revisit Memory", "WorldMark", needs=("flow", "appearance", "poses"))
_info("global_memory", "Global Memory", "WorldMark", needs=("geometry",))
_info("visual_quality", "Visual Quality", "WorldMark", needs=("quality",))
_info("imaging_quality", "Imaging Quality", "WorldMemBench", "0-1", needs=("quality",))
_info("aesthetic_quality", "Aesthetic Quality", "WorldMemBench", "0-1", needs=("quality",))
_info("camera_rpe_trans", "Camera following: translation RPE", "WorldMemBench", ">=0", higher=False, needs=("poses",))
_info("camera_rpe_rot", "Camera following: rotation RPE", "WorldMemBench", ">=0", higher=False, needs=("poses",))
# WorldMemBench static memory (evaluate/memory.py): fixed reference from phase V, every revisit R_k counts
_info("human_identity", "Human Identity", "WorldMemBench", "0-1", needs=("faces",))
_info("human_appearance", "Human Appearance", "WorldMemBench", "0-1", needs=("targets", "poses"))
_info("object_appearance", "Object Appearance", "WorldMemBench", "0-1", needs=("targets", "poses"))
_info("object_geometry", "Object Geometry", "WorldMemBench", "0-1", needs=("targets", "poses"))
_info("environment_visible", "Environment Visible", "WorldMemBench", "0-1", needs=("appearance", "poses"))
_info("depth_spearman", "Environment Depth Spearman", "WorldMemBench", "0-1", needs=("memory_depth",))
_info("spherical_reconstruction", "Environment Spherical Reconstruction", "WorldMemBench", "0-1",
      needs=("memory_depth",))
# WorldMemBench dynamic memory (evaluate/judge.py): gated 8-question protocol; measured probe or a VLM judge
_info("dynamic_score", "Dynamic Memory", "WorldMemBench", "0-1", needs=("events",))
_info("dynamic_p_start", "Dynamic Memory: p_start", "WorldMemBench", "0-1", needs=("events",))
_info("dynamic_conditional", "Dynamic Memory: conditional", "WorldMemBench", "0-1", needs=("events",))
# MultiWorldBench: the ten capabilities of two-view records (scored by evaluate/multiworld.py; its thresholds below)
for _m, _n in (("control_isolation", "Control Isolation"), ("coordination_fairness", "Coordination Fairness"),
               ("cross_view_motion", "Cross-View Motion"), ("state_synchronization", "State Synchronization"),
               ("state_persistence", "State Persistence"), ("structural_consistency", "Structural Consistency"),
               ("spatial_reasoning", "Spatial Reasoning"), ("race_condition_consistency", "Race-Condition Consistency"),
               ("style_consistency", "Style Consistency"), ("id_consistency", "ID Consistency")):
    _info(_m, _n, "MultiWorldBench", needs=("two-view record",))
PARAMS.update({
    "mwb_chroma_tol": 0.06,  # a pixel belongs to a material / the cross / an avatar within this chromaticity distance
    "mwb_dark": 0.12,  # pixels darker than this (mean channel, 0..1) are never classified
    "mwb_min_px": 6,  # fewer expected pixels: not observable in that view
    "mwb_min_struct_px": 20,
    "mwb_present_frac": 0.5,  # share of a cell's pixels in block materials that makes the block present
    "mwb_cross_frac": 0.2,  # share of the marked footprint showing the cross after a destroy
    "mwb_iou": 0.5,  # structure silhouette IoU with the reference
    "mwb_material_agree": 0.6,  # share of the structure's pixels in the expected material
    "mwb_id_iou": 0.6,  # landmark silhouette IoU between the first and the returning view
    "mwb_avatar_frac": 0.3,  # share of the expected avatar pixels that must show the avatar's colour
    "mwb_motion_tol": 0.4,  # avatar displacement error / expected displacement
    "mwb_size_tol": 1.3,  # avatar apparent-size ratio tolerance (motion along the line of sight)
    "mwb_rot_floor_deg": 10.0,  # path-length floors of the pose errors
    "mwb_trans_floor_m": 0.5,
    "mwb_depth_scale_m": 6.0,  # metres per unit of the classical chain when the commanded path has no translation
    "mwb_pose_valid_frac": 0.5,  # share of frame pairs the pose estimate must track (eligibility)
    "mwb_actor_dir": 0.5,  # WorldMark direction of the actor's own flow that shows it moved as commanded
    "mwb_actor_min_flow": 0.5,  # ... with at least this mean flow (pixels of a 640-wide frame)
})

WORLDMARK_COLUMNS = [m for m in METRIC_INFO if METRIC_INFO[m]["benchmark"] == "WorldMark"]


@dataclass
class Score:
    value: float | None
    reason: str | None = None
    detail: dict | None = None

    def to_dict(self):
        d = {"value": self.value}
        if self.reason:
            d["reason"] = self.reason
        if self.detail:
            d["detail"] = self.detail
        return d


def na(reason: str) -> Score:
    return Score(None, reason)


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


def quality_scores(feat, rec, backend: str, P=PARAMS) -> dict[str, Score]:
    Q = feat["quality"]
    if len(Q["frame"]) == 0:
        return {m: na("no frames") for m in ("visual_quality", "imaging_quality", "aesthetic_quality")}
    if backend == "learned":
        aes = float(np.mean(Q["aesthetic"]))
        img = Q["imaging"][np.isfinite(Q["imaging"])]
        out = {"aesthetic_quality": Score(aes, detail={"model": "CLIP + linear aesthetic head"})}
        if len(img):
            out["imaging_quality"] = Score(float(np.mean(img)), detail={"model": "MUSIQ-SPAQ (pyiqa)"})
            out["visual_quality"] = Score(100.0 * 0.5 * (aes + float(np.mean(img))))
        else:
            why = "imaging model MUSIQ needs pyiqa (optional, PolyForm-NC, needs torchvision): pip install pyiqa"
            out["imaging_quality"] = na(why)
            out["visual_quality"] = na(why)
        return out
    sharp = 1.0 - np.exp(-Q["sharpness"] / P["quality_sharp_ref"])
    noise = np.clip(Q["noise"] / P["quality_noise_ref"], 0, 1)
    img = float(np.mean(sharp * (1 - noise)))
    why = "no honest classical aesthetic model: use --backend learned (CLIP + aesthetic head)"
    return {"imaging_quality": Score(img, detail={"proxy": "sharpness x (1 - noise)", "colourfulness": float(np.mean(Q["colourfulness"]))}),
            "visual_quality": Score(100.0 * img, detail={"proxy": "imaging only (classical)"}),
            "aesthetic_quality": na(why)}


# ----------------------------------------------------------------------------------------------------- camera
def estimated_trajectory(feat) -> tuple[np.ndarray, np.ndarray]:
    """Chain the classical relative poses of non-overlapping pairs (0->2->4...) into c2w poses at those frames.

    Monocular translation has no scale: each step's unit direction is scaled by its median parallax flow (a speed
    proxy under a roughly constant scene depth); Sim(3) alignment then fixes the global scale."""
    P = feat["poses"]
    n = len(P["valid"])
    f = float(P["K"][0, 0]) if P["K"].shape == (3, 3) else 1.0
    aw = float(P["analysis_width"]) or 640.0
    gap = int(P.get("gap", 2))
    idx = np.arange(0, n, gap)
    # each step's camera motion as a 4x4 (identity where the pair was not estimated), built for all steps at once
    rel = np.zeros((len(idx), 4, 4))
    rel[:, 3, 3] = 1.0
    valid = np.asarray(P["valid"], bool)[idx]
    R = np.asarray(P["R"], float).reshape(-1, 3, 3)[idx]
    t = np.asarray(P["t"], float).reshape(-1, 3)[idx]
    Rt = np.swapaxes(R, 1, 2)
    c = -np.einsum("nij,nj->ni", Rt, t)
    nrm = np.linalg.norm(c, axis=1)
    scale = np.asarray(P["trans_flow"], float)[idx] * aw / 640.0 / f
    c = np.where((nrm > 1e-9)[:, None], c / np.maximum(nrm, 1e-300)[:, None] * scale[:, None], c)
    rel[:, :3, :3] = np.where(valid[:, None, None], Rt, np.eye(3))
    rel[:, :3, 3] = np.where(valid[:, None], c, 0.0)
    poses = np.empty((len(idx) + 1, 4, 4))
    poses[0] = T = np.eye(4)
    for k in range(len(idx)):  # the chain itself is sequential
        poses[k + 1] = T = T @ rel[k]
    return poses, np.concatenate([[0], idx + gap])


def camera_following(feat, rec, P=PARAMS) -> dict[str, Score]:
    est, frames = estimated_trajectory(feat)
    cmd_all = rec["poses"]
    frames = frames[frames < len(cmd_all)]
    est = est[: len(frames)]
    cmd = cmd_all[frames]
    out = {}
    # rotation RPE: sum of angle(dR_t^T dR^_t) / sum of angle(dR_t), no alignment
    Rc, Re = cmd[:, :3, :3], est[:, :3, :3]
    dR = np.einsum("nji,njk->nik", Rc[:-1], Rc[1:])  # R_t^T R_{t+1}
    dRh = np.einsum("nji,njk->nik", Re[:-1], Re[1:])
    denom = float(rotation_angles(dR).sum())
    if denom < math.radians(1.0):
        out["camera_rpe_rot"] = na("commanded path has (almost) no rotation")
    else:
        out["camera_rpe_rot"] = Score(float(rotation_angles(np.einsum("nji,njk->nik", dR, dRh)).sum()) / denom)
    path = np.linalg.norm(np.diff(cmd[:, :3, 3], axis=0), axis=1).sum()
    if path < 1e-6:
        out["camera_rpe_trans"] = na("commanded path has no translation")
        return out
    try:
        out["camera_rpe_trans"] = Score(_rpe_trans(est, cmd, path, frames, rec["fps"]))
    except Exception as e:  # evo raises on degenerate alignments; say so
        out["camera_rpe_trans"] = na(f"Sim(3) alignment failed: {type(e).__name__}: {e}")
    return out


def rotation_angles(R: np.ndarray) -> np.ndarray:
    """Geodesic angle (radians) of each rotation matrix in a (N, 3, 3) stack."""
    tr = np.trace(R, axis1=1, axis2=2)
    return np.arccos(np.clip((tr - 1.0) / 2.0, -1.0, 1.0))


def _rpe_trans(est: np.ndarray, cmd: np.ndarray, path_len: float, frames, fps) -> float:
    from evo.core.trajectory import PoseTrajectory3D

    ref = cmd.copy()
    ref[:, :3, 3] /= path_len  # the commanded path normalised to unit length
    ts = np.asarray(frames, float) / fps
    t_ref = PoseTrajectory3D(poses_se3=list(ref), timestamps=ts)
    t_est = PoseTrajectory3D(poses_se3=list(est), timestamps=ts.copy())
    from evo.core.geometry import GeometryException

    try:
        t_est.align(t_ref, correct_scale=True)
    except GeometryException:  # a straight commanded path: Umeyama is rank-deficient, align along the line
        s, R, t = _line_sim3(t_est.positions_xyz, t_ref.positions_xyz)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, t
        t_est.scale(s)
        t_est.transform(T)
    return float(rpe_translation(np.asarray(t_ref.poses_se3), np.asarray(t_est.poses_se3)).mean())


def rpe_translation(ref: np.ndarray, est: np.ndarray) -> np.ndarray:
    """Per-step translation RPE of (N, 4, 4) poses: ``|trans(inv(Q_i^-1 Q_i+1) P_i^-1 P_i+1)|``, evo's
    ``RPE(PoseRelation.translation_part, delta=1, delta_unit=frames)`` vectorised (evo's per-pair Python loop was
    60 % of a rescore); tests hold it equal to evo's."""
    def step(T):  # rotation and translation of T_i^-1 T_i+1
        R, t = T[:, :3, :3], T[:, :3, 3]
        return R[:-1], R[1:], np.einsum("nji,nj->ni", R[:-1], t[1:] - t[:-1])

    Ra, Rb, tq = step(ref)
    tp = step(est)[2]
    Rq = np.einsum("nji,njk->nik", Ra, Rb)
    return np.linalg.norm(np.einsum("nji,nj->ni", Rq, tp - tq), axis=1)


def _line_sim3(est: np.ndarray, ref: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Sim(3) for collinear references: the rotation taking the estimate's principal direction onto the
    reference line (the roll about the line is unobservable and left out), the least-squares scale along it."""
    from scipy.spatial.transform import Rotation

    ce, cr = est.mean(0), ref.mean(0)
    E, Rf = est - ce, ref - cr
    de = np.linalg.svd(E, full_matrices=False)[2][0]
    dr = np.linalg.svd(Rf, full_matrices=False)[2][0]
    if np.dot(E[-1] - E[0], de) < 0:
        de = -de
    if np.dot(Rf[-1] - Rf[0], dr) < 0:
        dr = -dr
    axis = np.cross(de, dr)
    ang = math.atan2(np.linalg.norm(axis), float(np.dot(de, dr)))
    R = Rotation.from_rotvec(axis / np.linalg.norm(axis) * ang).as_matrix() if np.linalg.norm(axis) > 1e-12 else np.eye(3)
    pe = E @ R.T @ dr
    pr = Rf @ dr
    s = float(np.dot(pe, pr) / max(np.dot(pe, pe), 1e-12))
    return s, R, cr - s * (R @ ce)


# ----------------------------------------------------------------------------------------------------- all
#: what a backend cannot measure honestly, and why (reported, never filled from another backend)
UNAVAILABLE = {
    "learned": {
        "global_memory": "no packaged feed-forward reconstruction (VGGT) backend; use --backend classical",
        "camera_rpe_trans": "no packaged learned pose estimator (DA3 / ViPE); use --backend classical",
        "camera_rpe_rot": "no packaged learned pose estimator (DA3 / ViPE); use --backend classical",
    },
}


def score_record(feat: dict, rec: dict, backend: str, wanted: set[str] | None = None, P=PARAMS) -> dict[str, Score]:
    out: dict[str, Score] = {}
    if "flow" in feat and ("poses" in feat or "depth" in feat):
        out.update(worldmark_action(feat, rec, P))
    if "flow" in feat and "appearance" in feat:
        out["local_memory"] = local_memory(feat, rec, backend, P)
        out["revisit_memory"] = revisit_memory(feat, rec, backend, P)
    if "geometry" in feat:
        out["global_memory"] = global_memory(feat, rec, backend, P)
    if "quality" in feat:
        out.update(quality_scores(feat, rec, backend, P))
    if "poses" in feat:
        out.update(camera_following(feat, rec, P))
    if "events" in feat:
        from .judge import dynamic_scores

        out.update(dynamic_scores(feat, rec, rec.get("dir"), P))
    if "targets" in feat and "appearance" in feat:
        from .memory import static_memory_scores

        out.update(static_memory_scores(feat, rec, backend, P))
    for mid in METRIC_INFO:
        if mid not in out and "two-view record" not in METRIC_INFO[mid]["needs"]:  # (MultiWorldBench: 2-view)
            out[mid] = na(UNAVAILABLE.get(backend, {}).get(mid, f"features {METRIC_INFO[mid]['needs']} not computed"))
    if wanted:
        out = {k: v for k, v in out.items() if k in wanted}
    return out
