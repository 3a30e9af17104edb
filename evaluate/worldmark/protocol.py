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
  points of the 8x8 grid), the classical one the same samples from its pose model's tracks of the pair starting at
  (or just before) each picked frame (triangulated inverse depth, 0 where rotation alone explains the motion);
- per-frame embeddings for local (C1) and revisit (C2) memory and the hard-cut frames (the first frame after a
  frame-difference jump, TransNetV2's convention);
- the native video width for C2's degree-to-pixel conversion (cv:239).
"""

from __future__ import annotations

import numpy as np

from ..features.geometry import percentiles  # np.percentile's values, without its overhead
from .flow_eval import ACTION_TABLE, FLOW_FPS, FlowConfig, flow_record
from .master import MasterConfig

#: key sequence -> WorldMark action id (pr:13-17)
ACTION_OF_KEYS = {v: k for k, v in ACTION_TABLE.items()}
MOVE_KEYS, LOOK_KEYS = set("WSAD"), set("LR")
#: the classical parallax samples: a picked pair's triangulated depths count only when its model choice
#: (translation) is the majority's both over its segment and within this half-width (s) around it
VOTE_S = 0.5


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
    """({segment: (inverse depth, u) samples of WorldMark's fit}, "px_raw") on the frames WorldMark picks: from the
    learned depth and flow grid, or from the classical pose model's triangulated tracks (inverse depth on a unit
    baseline, 0 under the rotation-only model; the fit is invariant to the depth's scale); segments without a usable
    frame are left out (fe then weighs them 1, as WorldMark does when its fit has no samples)."""
    lat = [j for j, k in enumerate(keys) if k in "ADLR"]
    F = feat["flow"]
    if "px_segs" in F:  # an imported WorldMark FLOW cache: the fit's own samples (evaluate/worldmark/imported.py)
        raw = {}
        for j in (int(x) for x in np.asarray(F["px_segs"]).ravel()):
            if j < len(keys) and f"px_iv_{j}" in F and f"px_uu_{j}" in F:
                raw[j] = (np.asarray(F[f"px_iv_{j}"], float), np.asarray(F[f"px_uu_{j}"], float) * scale)
        return raw, "px_raw"
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
                q1, q99 = percentiles(d, (1, 99))
                kp = (d >= q1) & (d <= q99)
                iv.append(d[kp])
                uu.append(u[kp])
            if iv:
                raw[j] = (np.concatenate(iv), np.concatenate(uu))
        return raw, "px_raw"
    P = feat["poses"]
    if "px_iv" not in P:
        return {}, "px_raw"
    gap = int(P.get("gap", 2))  # pose rows: pair f -> f + gap, estimated for f = 0, gap, 2 gap, ...
    iv_all, u_all, row = (np.asarray(P[k]) for k in ("px_iv", "px_u", "px_pair"))
    order = np.argsort(row, kind="stable")
    starts = np.searchsorted(row[order], np.arange(len(P["valid"]) + 1))
    valid = np.asarray(P["valid"], bool)
    moving = valid & (np.linalg.norm(np.asarray(P["t"], float).reshape(-1, 3), axis=1) > 0)
    half = int(round(FLOW_FPS * VOTE_S))
    raw = {}
    for j in lat:
        iv, uu = [], []
        lo, hi = int(j * n_frames / len(keys)), int((j + 1) * n_frames / len(keys))
        # the segment's motion type is one: when most of its pose pairs are rotation-only, the pairs called
        # translational are misjudged turns (their depths are noise) and every point counts as at infinity
        turn = 2 * int(moving[lo:hi].sum()) < int(valid[lo:hi].sum())
        for i in _picks(j, len(keys), n_frames):
            f = i - i % gap  # the estimated pair nearest the frame WorldMark picks
            if f >= len(valid) or not valid[f]:
                continue
            sel = order[starts[f]:starts[f + 1]]
            d, u = iv_all[sel].astype(float), u_all[sel].astype(float) * scale
            win = slice(max(0, f - half), f + half + 1)
            if moving[f] and (turn or 2 * int(moving[win].sum()) < int(valid[win].sum())):
                # the camera's motion is smooth: a pair whose model choice (translation) the pairs around it do not
                # share is a misjudged rotation, and its depths are noise; its points are at infinity like theirs
                d = np.zeros_like(d)
            if len(d) == 0:
                continue
            q1, q99 = percentiles(d, (1, 99))  # fe:203
            kp = (d >= q1) & (d <= q99)
            iv.append(d[kp])
            uu.append(u[kp])
        if iv and sum(len(x) for x in iv) >= 2:
            raw[j] = (np.concatenate(iv), np.concatenate(uu))
    return raw, "px_raw"


def flow_cache(feat: dict, rec: dict, P: dict) -> tuple[dict | None, str]:
    """WorldMark's FLOW cache for one record (fe:perceive), or None and why not."""
    keys, why = record_keys(rec["trajectory"])
    if keys is None:
        return None, why
    F = feat["flow"]
    scale = 1.0 if P.get("wm_flow_full_scale") else 0.5
    if "wm_sx" in F:  # SEA-RAFT's feature carries fe:71-78's Sx / Srad themselves (half-size), bit for bit
        sx, srad = np.asarray(F["wm_sx"], float) * (2 * scale), np.asarray(F["wm_srad"], float) * (2 * scale)
    else:
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
