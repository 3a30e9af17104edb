"""worldgate's records on WorldMark's protocol: the inputs WorldMark's scoring reads, built from worldgate's features.

WorldMark's scoring (``flow_eval``, ``consistency``, ``master``: its code, reproduced and proven by the parity tests)
starts where its perception stops. This module builds those inputs from a record's cached features, each on the
protocol's scale, and says where a backend cannot:

- the FLOW cache: ``tm`` on WorldMark's 16 fps time base whatever the video's fps (fe:19; option
  ``wm_time_base_real_fps`` uses the record's fps), ``Sx``/``Srad`` from the flow feature (frame i vs i+2, like
  fe:70-80) in SEA-RAFT's half-size pixels of a 640-wide frame (fe:50-53: the flow is resized back without its
  2^-scale factor; worldgate's flow is in full 640-wide pixels, so it is halved; option ``wm_flow_full_scale``
  keeps it whole), the key sequence and action id;
- the parallax split per lateral/yaw segment on the frames WorldMark picks (every 16th frame in [0.25, 0.9] of the
  segment, fe:182-188): the learned backend gives the fit's samples (inverse depth and horizontal flow at the same
  points of the 8x8 grid), the classical one the fit's two amplitudes from its pose model (it has no depth): their
  translation share is the motion-weighted median over every pose pair of the segment;
- per-frame embeddings for local (C1) and revisit (C2) memory and the hard-cut frames (the first frame after a
  frame-difference jump, TransNetV2's convention);
- the native video width for C2's degree-to-pixel conversion (cv:239).
"""

from __future__ import annotations

import numpy as np

from .flow_eval import ACTION_TABLE, FLOW_FPS, FlowConfig, flow_record, parallax_from_amplitudes
from .master import MasterConfig

#: key sequence -> WorldMark action id (pr:13-17)
ACTION_OF_KEYS = {v: k for k, v in ACTION_TABLE.items()}
MOVE_KEYS, LOOK_KEYS = set("WSAD"), set("LR")


def record_keys(trajectory: dict) -> tuple[list[str] | None, str]:
    """WorldMark keys of a record's segments (each one W/S/A/D move or one L/R look), or None and why not."""
    keys = []
    for s in trajectory.get("segments", []):
        move, look = s.get("move"), s.get("look")
        if move in MOVE_KEYS and look == "idle":
            keys.append(move)
        elif move == "idle" and look in LOOK_KEYS:
            keys.append(look)
        else:
            return None, (f"segment {s.get('index')} is {move}+{look}: WorldMark scores sequences of single W/S/A/D "
                          "moves and L/R looks (its 15 action ids)")
    return (keys, "") if keys else (None, "no segments")


def time_base(rec: dict, P: dict) -> float:
    return float(rec["fps"]) if P.get("wm_time_base_real_fps") else FLOW_FPS


def _picks(j: int, n_keys: int, n_frames: int, step: int = 2) -> list[int]:
    """Frames fe:_parallax_raw samples for segment j (fe:182-188): every round(16)-th in [0.25, 0.9] of the segment."""
    lo, hi = int((j + 0.25) * n_frames / n_keys), int((j + 0.9) * n_frames / n_keys)
    idxs = list(range(lo, min(hi, n_frames - step - 1), max(1, int(round(FLOW_FPS)))))
    if len(idxs) < 3:
        idxs = [int(x) for x in np.linspace(lo, min(hi, n_frames - step - 1), 3)]
    return idxs


def parallax(feat: dict, keys: list[str], n_frames: int, scale: float) -> tuple[dict, str]:
    """({segment: fit input}, kind): "px_raw" samples (inverse depth, u) where the backend has depth, else the
    "px" split from the classical pose model's amplitudes; segments without a usable frame are left out (fe then
    weighs them 1, as WorldMark does when its fit has no samples)."""
    lat = [j for j, k in enumerate(keys) if k in "ADLR"]
    if "depth" in feat:
        D, grid = feat["depth"], feat["flow"]["grid"]
        raw = {}
        for j in lat:
            iv, uu = [], []
            for i in _picks(j, len(keys), n_frames):
                if i >= len(grid) or len(D["frame"]) == 0:
                    continue
                d = D["disparity"][int(np.argmin(np.abs(D["frame"] - i)))].ravel().astype(float)
                u = grid[i][..., 0].ravel().astype(float) * scale
                q1, q99 = np.percentile(d, 1), np.percentile(d, 99)
                kp = (d >= q1) & (d <= q99)
                iv.append(d[kp])
                uu.append(u[kp])
            if iv:
                raw[j] = (np.concatenate(iv), np.concatenate(uu))
        return raw, "px_raw"
    P = feat["poses"]
    valid = np.asarray(P["valid"], bool)
    gap = int(P.get("gap", 2))  # pose pairs are frame i vs i + gap (valid on every gap-th frame)
    amps = {}
    for j in lat:  # every pose pair of the segment: the classical split needs the whole segment to be robust (its
        lo, hi = int(j * n_frames / len(keys)), int((j + 1) * n_frames / len(keys)) - gap  # rotation-only test can
        pairs = np.arange(lo, min(hi, len(valid)))  # miss for a stretch of a turn; the fit's 1 fps picks are few)
        pairs = pairs[valid[pairs]]
        tr, ro = np.asarray(P["trans_amp"], float)[pairs], np.asarray(P["rot_amp"], float)[pairs]
        w = tr + ro
        if len(pairs) == 0 or w.sum() <= 1e-9:
            continue
        # the translation share as a motion-weighted median over the pairs: a misjudged pair cannot tip it
        share = tr / np.maximum(w, 1e-12)
        order = np.argsort(share)
        cw = np.cumsum(w[order])
        p = float(share[order][np.searchsorted(cw, 0.5 * cw[-1])])
        amps[j] = (p * float(np.median(w)) * scale, (1.0 - p) * float(np.median(w)) * scale)
    return parallax_from_amplitudes(amps, keys), "px"


def flow_cache(feat: dict, rec: dict, P: dict) -> tuple[dict | None, str]:
    """WorldMark's FLOW cache for one record (fe:perceive), or None and why not."""
    keys, why = record_keys(rec["trajectory"])
    if keys is None:
        return None, why
    F = feat["flow"]
    scale = 1.0 if P.get("wm_flow_full_scale") else 0.5
    sx, srad = np.asarray(F["sx"], float) * scale, np.asarray(F["srad"], float) * scale
    if len(sx) < 8:
        return None, f"{len(sx)} flow samples: too short for WorldMark's segments"
    n_frames = len(sx) + int(F.get("gap", 2))
    cache = {"tm": np.arange(len(sx)) / time_base(rec, P), "Sx": sx, "Srad": srad, "keys": keys,
             "action": ACTION_OF_KEYS.get("".join(keys), 0), "n_frames": n_frames}
    px, kind = parallax(feat, keys, n_frames, scale)
    cache[kind] = px
    return cache, ""


def flow_config(P: dict, rec: dict) -> FlowConfig:
    return FlowConfig(fps=time_base(rec, P))


def master_config(P: dict) -> MasterConfig:
    return MasterConfig(exclude=())  # worldgate scores every run it is given


def protocol_record(feat: dict, rec: dict, P: dict) -> tuple[dict | None, dict | None, str]:
    """(the results_flow record, the cache) of one record, or (None, None, why not)."""
    cache, why = flow_cache(feat, rec, P)
    if cache is None:
        return None, None, why
    model, stem = rec_model(rec), rec_stem(rec)
    return flow_record(model, stem, cache["action"], cache, flow_config(P, rec)), cache, ""


def rec_model(rec: dict) -> str:
    return str(rec.get("model") or "model")


def rec_stem(rec: dict) -> str:
    tags = rec.get("tags") or {}
    if "image" in tags and "action_id" in tags:
        return f"{int(tags['image']):03d}_{int(tags['action_id']):03d}"
    return str(rec.get("case", "case"))


def split_of(tags: dict) -> str:
    """WorldMark's EVAL_SUFFIX of a record: ``_{domain}_{view}`` (one results tree and table per split)."""
    d, v = tags.get("domain"), tags.get("view")
    return f"_{d}_{v}" if d and v else "_all"


def cut_frames(frame_diff: np.ndarray, thresh: float) -> list[int]:
    """Hard cuts as TransNetV2 reports them: the first frame of each new scene (frame i+1 after a jump i -> i+1)."""
    return [int(i) + 1 for i in np.nonzero(np.asarray(frame_diff) > thresh)[0]]
