"""WorldMemBench static memory: targets given by masks in the conditioning frame, found again at every revisit from
the video alone, scored against a fixed reference from the initial hold V (docs/worldmembench.md).

Feature (features/targets.py; classical backend, CPU, no weights): ``TargetExtractor`` reads the record's
``targets.npz`` (masks of the targets in frame 0 and their kinds: human, object, event). Each target's reference comes
from phase V: the mean colour descriptor inside its mask over V's frames, GrabCut's colour models of the target and
its surroundings, and its silhouette in frame 0 cut with those models. In every revisit phase R_k (its frames and the
frame it arrives at) the target is detected by normalised cross-correlation of its frame-0 template inside a search
window (the tracking backend); on the frame where it is detected best, the colour descriptor inside the mask moved
there and its silhouette (GrabCut initialised from that mask, with the reference's colour models held fixed) are
measured, the silhouette after crop - resize - centre on a common canvas.

Metrics (pure, cheap; ``S_rollout = mean_u (1/K) sum_k s_{u,k}``; a revisit without a valid observation — the
target not detected, NCC below ``memory_min_match`` — scores 0):
  human_appearance, object_appearance  s = clip(cos(mean descriptor over V, descriptor at R_k), 0, 1)
  object_geometry                      s = IoU of canonical silhouettes (reference vs revisit)
  environment_visible                  s = clip(cos(global appearance of frame 0, of the R_k frame closest in
                                       estimated orientation to frame 0 (classical: the pose feature; learned:
                                       DA3's camera poses), 0, 1); unavailable, with the reason, where no
                                       orientation is estimated (no pose feature: --backend learned without DA3)
  human_identity                       learned backend: ArcFace cosine of the face at each revisit against the
                                       conditioning frame's (0 where no face is found); unavailable under classical
  depth_spearman, spherical_reconstruction  learned backend: DA3 (else Depth Anything V2) at frame 0 and the revisits
                                       (``memory_depth``); unavailable under classical (rotation-only revisits carry
                                       no parallax)
Under ``--backend learned`` the appearance descriptor is DINOv2 patch tokens pooled inside the mask, and silhouettes
are SAM2's masks prompted with the target's box (at the reference and at the revisit where it was detected).
Per-revisit values, the orientation errors and the tracker's departure evidence are kept in the detail for the
analyses (``analyses``: decay, cross-axis penalty and return-qualified subsets, per metric and per case pair).
"""

from __future__ import annotations

import numpy as np

from ..features.targets import revisit_phases, revisit_range
from ..score import Score, na

STRIDE = 2  # revisit frames whose orientation is compared (environment): every 2nd


# ---------------------------------------------------------------------------------------------------- metrics
def pose_feature(feat: dict) -> dict | None:
    """The pose chain the return frame is chosen by: the shared ``poses`` feature (classical: frame pairs 0->2->4...),
    else ``camera_poses`` (under --backend learned: DA3's poses, the paper's estimator, frame t -> t+1), which has
    the same rows (R, t, valid, gap) and the same convention."""
    P = feat.get("poses")
    if P is not None and len(P.get("R", ())):
        return P
    C = feat.get("camera_poses")
    if C is not None and "inactive" not in C and len(C.get("R", ())):
        return C
    return P


def orientations(feat: dict, n_frames: int) -> np.ndarray | None:
    """Estimated camera-to-world rotation of every frame relative to frame 0, chained from the pose feature's
    frame j -> j+gap rotations (``x_b = R x_a``, so the camera turns by R^T); frames between hold the last
    estimate. None when too many pairs could not be estimated for the chain to mean anything."""
    P = pose_feature(feat)
    if P is None or len(P.get("R", ())) == 0:
        return None
    gap = int(P.get("gap", 2))
    idx = list(range(0, len(P["R"]), gap))
    if np.mean([bool(P["valid"][j]) for j in idx]) < 0.8:
        return None
    R = np.eye(3)
    out = np.repeat(np.eye(3)[None], n_frames, axis=0)
    for j in idx:
        if P["valid"][j]:
            R = R @ np.asarray(P["R"][j]).T
        out[j + gap: j + 2 * gap] = R
    return out


def _angle_deg(R: np.ndarray) -> np.ndarray:
    c = (np.trace(R, axis1=-2, axis2=-1) - 1) / 2
    return np.degrees(np.arccos(np.clip(c, -1, 1)))


def turns(traj: dict) -> bool:
    """Whether the trajectory turns the camera (a rotation loop); the FRBL square only translates."""
    return any(str(s.get("look", "idle")) != "idle" for s in traj.get("segments", [])) or not traj.get("segments")


def revisit_frames(feat: dict, rec: dict) -> list[dict]:
    """Per revisit phase: the analysed frame closest in estimated orientation to frame 0, with its return error and
    the phase's preceding departure angle (``by``: "orientation"). A trajectory that never turns (the FRBL
    translation square) returns by position, which orientation cannot tell: its revisit frame is the one the phase
    arrives at (``by``: "arrival (translation loop)"). Without an orientation estimate (no pose feature, or a chain
    too incomplete) a rotation loop's frame is the arrival too, marked ``by``: "arrival (no orientation estimate)":
    Environment Visible refuses it (its return frame must be the estimated-orientation one), depth metrics say so."""
    traj = rec["trajectory"]
    phases = revisit_phases(traj)
    n = int(traj.get("n_frames", 0)) or max((b for _, _, b in phases), default=0)
    O = orientations(feat, n)
    rot = turns(traj)
    out = []
    prev_end = 0
    for name, a, b in phases:
        r = revisit_range(a, b, n)
        frames = list(range(r.start, r.stop, STRIDE))
        if frames and frames[-1] != r.stop - 1:
            frames.append(r.stop - 1)  # the arrival view is always among them
        if not frames:
            continue
        # the departure's largest angle from frame 0, up to the view it arrives at (frame a, where R_k starts)
        dep = float(_angle_deg(O[prev_end:a + 1]).max()) if O is not None and a > prev_end else (
            0.0 if O is not None else None)
        if O is not None and not rot:
            out.append({"phase": name, "frame": frames[-1], "return_err_deg": float(_angle_deg(O[frames[-1]])),
                        "departure_deg": dep, "frames": frames, "errs": None, "by": "arrival (translation loop)"})
        elif O is not None:
            err = _angle_deg(O[frames])
            best = frames[int(np.lexsort((-np.asarray(frames), np.round(err, 3)))[0])]
            out.append({"phase": name, "frame": best, "return_err_deg": float(_angle_deg(O[best])),
                        "departure_deg": dep, "frames": frames, "errs": [float(e) for e in err], "by": "orientation"})
        else:
            out.append({"phase": name, "frame": frames[-1], "return_err_deg": None, "departure_deg": None,
                        "frames": frames, "errs": None,
                        "by": "arrival (translation loop)" if not rot else "arrival (no orientation estimate)"})
        prev_end = b
    return out


def _no_orientation_reason(feat: dict) -> str:
    P = pose_feature(feat)
    if P is None or len(P.get("R", ())) == 0:
        return ("the return frame is chosen by estimated camera orientation (the paper: DA3 poses) and this backend "
                "computed no pose estimate (under --backend learned the poses are DA3's: pip install --no-deps "
                "depth-anything-3==0.1.1 addict==2.4.0 einops==0.8.2); or use --backend classical")
    gap = int(P.get("gap", 2))
    share = float(np.mean([bool(P["valid"][j]) for j in range(0, len(P["R"]), gap)]))
    return (f"the return frame is chosen by estimated camera orientation and the pose chain is too incomplete to "
            f"give one ({share:.0%} of its frame pairs estimated, 80% needed)")


def static_memory_scores(feat: dict, rec: dict, backend: str, P: dict) -> dict:
    """Scores (value, reason, detail) of the static memory metrics for one record."""
    out = {}
    T = feat.get("targets")
    revs = revisit_frames(feat, rec)
    if not revs:
        reason = "no revisit phase (R_k) in this trajectory"
        return {m: na(reason) for m in ("human_appearance", "object_appearance", "object_geometry",
                                        "environment_visible", "human_identity", "depth_spearman",
                                        "spherical_reconstruction")}
    # environment: global appearance of frame 0 vs the revisit frame (closest in estimated orientation)
    emb = feat.get("appearance", {}).get("emb")
    slim = [{k: r[k] for k in ("phase", "frame", "return_err_deg", "departure_deg", "by")} for r in revs]
    if any(r["by"] == "arrival (no orientation estimate)" for r in revs):
        out["environment_visible"] = na(_no_orientation_reason(feat))
    elif emb is not None and len(emb):
        vals = [max(0.0, float(np.dot(emb[0], emb[min(r["frame"], len(emb) - 1)]))) for r in revs]
        out["environment_visible"] = Score(float(np.mean(vals)), detail={"per_revisit": vals, "revisits": slim})
    else:
        out["environment_visible"] = na("no appearance feature")
    for metric, kinds, col in (("human_appearance", ("human",), "cos"), ("object_appearance", ("object",), "cos"),
                               ("object_geometry", ("object",), "iou")):
        if metric == "object_geometry" and T is not None and not str(T.get("segmentation", "grabcut")):
            out[metric] = na("the targets feature cut no silhouettes (no segmentation model)")
            continue
        if T is None or int(T["n_targets"]) == 0:
            out[metric] = na("the record has no targets (targets.npz with masks in the conditioning frame)")
            continue
        us = [u for u, k in enumerate(T["kinds"]) if str(k) in kinds]
        if not us:
            out[metric] = na(f"no {'/'.join(kinds)} target in the conditioning frame")
            continue
        per_u = []
        for u in us:  # a revisit without a valid observation (target not found) scores 0
            ok = T["score"][u] >= P["memory_min_match"]
            per_u.append(np.where(ok, np.clip(T[col][u], 0.0, 1.0), 0.0).tolist())
        per_rev = np.mean(per_u, axis=0).tolist()
        out[metric] = Score(float(np.mean(per_u)), detail={"targets": len(us), "per_revisit": per_rev,
                                                           "tracked": tracking_evidence(T, us, P)})
    humans = [u for u, k in enumerate(T["kinds"]) if str(k) == "human"] if T is not None and \
        int(T["n_targets"]) else []
    if backend == "classical":
        out["human_identity"] = na("face identity needs ArcFace: no honest classical stand-in")
    elif T is None or "identity" not in T:
        out["human_identity"] = na("ArcFace weights not found (human identity): see `worldgate doctor`")
    elif not humans:
        out["human_identity"] = na("no human target in the conditioning frame")
    else:  # ArcFace cosine of the face at each revisit against the conditioning frame's; not found there scores 0
        per_u = []
        for u in humans:
            ok = (T["score"][u] >= P["memory_min_match"]) & np.isfinite(T["identity"][u])
            per_u.append(np.where(ok, np.clip(np.nan_to_num(T["identity"][u]), 0.0, 1.0), 0.0).tolist())
        out["human_identity"] = Score(float(np.mean(per_u)), detail={
            "targets": len(humans), "per_revisit": np.mean(per_u, axis=0).tolist(),
            "model": str(T.get("identity_model", "ArcFace")), "tracked": tracking_evidence(T, humans, P)})
    D = feat.get("memory_depth")
    if backend == "classical" or D is None:
        why = "depth at revisits needs a depth model: rotation-only revisits carry no parallax for classical depth"
        out["depth_spearman"] = na(why)
        out["spherical_reconstruction"] = na(why)
    else:
        out.update(depth_memory_scores(D, revs, feat, rec, P))
    return out



def tracking_evidence(T: dict, us: list[int], P: dict) -> list[bool] | None:
    """Per revisit R_k: whether the tracker gives departure evidence (every target lost at some frame of D_k) and a
    valid observation after the return (every target found at R_k): the paper's tracking-supported criterion. None
    for a feature computed without departure tracking."""
    if "departure_score" not in T:
        return None
    m = P["memory_min_match"]
    dep = np.asarray(T["departure_score"])[us]
    found = np.asarray(T["score"])[us] >= m
    left = np.isfinite(dep) & (dep < m)
    return [bool(x) for x in (left & found).all(axis=0)]


def _commanded_rotation(rec: dict, frame: int) -> np.ndarray:
    """The commanded camera-to-world rotation of ``frame`` relative to frame 0 (identity where poses are absent)."""
    P = rec.get("poses")
    if P is None or len(P) == 0:
        return np.eye(3)
    P = np.asarray(P, np.float64)
    return P[0, :3, :3].T @ P[min(frame, len(P) - 1), :3, :3]


def _nearest_depth(D: dict, frame: int):
    fr = np.asarray(D["frame"])
    if len(fr) == 0:
        return None, None
    j = int(np.argmin(np.abs(fr - frame)))
    return int(fr[j]), np.asarray(D["depth"][j], np.float64)


def depth_memory_scores(D: dict, revs: list[dict], feat: dict, rec: dict, P: dict) -> dict:
    """Environment Depth Spearman and Spherical Reconstruction Score from the ``memory_depth`` feature (relative
    inverse depth on a grid at frame 0 and at revisit frames), at each revisit's frame (closest in estimated
    orientation to frame 0, as Environment Visible). A revisit without depth near its frame scores 0."""
    f0, ref = _nearest_depth(D, 0)
    if ref is None or f0 != 0:
        return {m: na("no depth of the conditioning frame") for m in ("depth_spearman", "spherical_reconstruction")}
    n = int(rec["trajectory"].get("n_frames", 0)) or int(max(D["frame"])) + 1
    O = orientations(feat, n)
    K = np.asarray(D["K"], np.float64)
    from scipy.stats import spearmanr  # deferred: scipy.stats takes ~1 s to import; every evaluate loads this module

    rho, sph, used = [], [], []
    for r in revs:
        fk, dk = _nearest_depth(D, r["frame"])
        if dk is None or abs(fk - r["frame"]) > int(P["memory_depth_max_gap"]):
            rho.append(0.0)
            sph.append(0.0)
            used.append(None)
            continue
        c = spearmanr(ref.ravel(), dk.ravel()).statistic
        rho.append(float(np.clip(c, 0.0, 1.0)) if np.isfinite(c) else 0.0)
        Rk = O[min(fk, len(O) - 1)] if O is not None else _commanded_rotation(rec, fk)
        sph.append(spherical_score(ref, np.eye(3), dk, Rk, K, P))
        used.append(fk)
    slim = [{k: r[k] for k in ("phase", "frame", "return_err_deg", "departure_deg", "by")} for r in revs]
    det = {"frames": used, "revisits": slim, "model": str(D["model"]) if "model" in D else "Depth Anything V2",
           "orientation": "estimated" if O is not None else "commanded (no orientation estimate)"}
    return {"depth_spearman": Score(float(np.mean(rho)), detail={**det, "per_revisit": rho}),
            "spherical_reconstruction": Score(float(np.mean(sph)), detail={**det, "per_revisit": sph})}


def spherical_score(disp_a: np.ndarray, R_a: np.ndarray, disp_b: np.ndarray, R_b: np.ndarray, K: np.ndarray,
                    P: dict) -> float:
    """Spherical Reconstruction Score of two views (METRICS.md): each grid cell's ray (camera-to-world ``R``) is
    binned on an azimuth x elevation grid and keeps its nearest log-range (range = 1 / relative inverse depth);
    global scale is removed with delta = median over common bins of (H_b - G_b); a bin seen by only one view counts
    as a missing or extra surface (0), a common bin scores max(0, 1 - |H_b - G_b - delta| / tol). Mean over the
    union of occupied bins, in [0, 1]."""
    bins = int(P["spherical_bins"])
    tol = float(P["spherical_log_tol"])

    def grid(disp, R):
        h, w = disp.shape
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
        rays = np.stack([xs + 0.5, ys + 0.5, np.ones_like(xs)], -1).reshape(-1, 3) @ np.linalg.inv(K).T
        rays = rays @ R.T
        rays /= np.linalg.norm(rays, axis=1, keepdims=True)
        az = np.arctan2(rays[:, 0], rays[:, 2])
        el = np.arcsin(np.clip(-rays[:, 1], -1, 1))
        ia = np.clip(((az + np.pi) / (2 * np.pi) * 2 * bins).astype(int), 0, 2 * bins - 1)
        ie = np.clip(((el + np.pi / 2) / np.pi * bins).astype(int), 0, bins - 1)
        logr = -np.log(np.maximum(disp.ravel(), 1e-6))
        out = {}
        for b, v in zip(zip(ia.tolist(), ie.tolist()), logr.tolist()):
            if b not in out or v < out[b]:
                out[b] = v
        return out

    A, B = grid(disp_a, R_a), grid(disp_b, R_b)
    union = set(A) | set(B)
    common = sorted(set(A) & set(B))
    if not union or not common:
        return 0.0
    delta = float(np.median([A[b] - B[b] for b in common]))
    s = sum(max(0.0, 1.0 - abs(A[b] - B[b] - delta) / tol) for b in common)
    return float(s / len(union))


#: the static memory metrics the analyses run over (higher is better) and camera rotation RPE (lower is better; the
#: paper's Fig. 5 follows it across revisits too); which of them the return qualification reads orientation for
STATIC_METRICS = ("human_identity", "human_appearance", "object_appearance", "object_geometry", "environment_visible",
                  "depth_spearman", "spherical_reconstruction")
ENVIRONMENT_METRICS = ("environment_visible", "depth_spearman", "spherical_reconstruction")
DECAY_METRICS = STATIC_METRICS + ("camera_rpe_rot",)
TOLERANCES = (30, 15, 5)  # return tolerances (degrees) of the pose-qualified subsets
DEPARTURE_DEG = 30.0  # departure the pose-qualified subsets require


def content_key(s: dict) -> str | None:
    """What pairs two cases of the same content under different trajectories: the ``content`` tag (Engine suites),
    else the case id without its trajectory part (``<family>-<trajectory>-<rep>`` -> ``<family>-<rep>``)."""
    t = s.get("tags") or {}
    if t.get("content"):
        return str(t["content"])
    traj, case = t.get("trajectory"), str(s.get("case", ""))
    return case.replace(f"-{traj}-", "-", 1) if traj and f"-{traj}-" in case else None


def _series(s: dict, m: str) -> list | None:
    v = ((s.get("detail") or {}).get(m) or {}).get("per_revisit")
    return None if v is None or any(x is None for x in v) else [float(x) for x in v]


def _qualifies(s: dict, m: str, ks: range, tol: float | None) -> bool:
    """Whether revisits ``ks`` of a case qualify for metric ``m``: no filter (``tol`` None); for an environment
    metric, estimated departure >= 30 deg before each and return within ``tol``; for a human/object metric, the
    tracker's departure evidence and valid observation of every target at each (tolerance-independent)."""
    if tol is None:
        return True
    d = (s.get("detail") or {}).get(m) or {}
    if m in ENVIRONMENT_METRICS:
        rv = d.get("revisits") or []
        if len(rv) <= max(ks):
            return False
        return all(rv[k].get("departure_deg") is not None and rv[k].get("return_err_deg") is not None
                   and rv[k]["departure_deg"] >= DEPARTURE_DEG and rv[k]["return_err_deg"] <= tol for k in ks)
    tr = d.get("tracked")
    return bool(tr) and len(tr) > max(ks) and all(tr[k] for k in ks)


def decay(samples: list[dict], m: str, tol: float | None = None) -> dict | None:
    """Per-revisit decay R1 -> R3 of metric ``m`` on the LRLRLR cases whose three returns all qualify: the mean per
    revisit over those cases and the mean of each case's own R1 - R3 (computed per case, then averaged)."""
    rows = [v for s in samples if (s.get("tags") or {}).get("trajectory") == "LRLRLR"
            for v in [_series(s, m)] if v is not None and len(v) >= 3 and _qualifies(s, m, range(3), tol)]
    if not rows:
        return None
    return {"n_cases": len(rows), "per_revisit": [float(np.mean([v[k] for v in rows])) for k in range(3)],
            "drop_R1_R3": float(np.mean([v[0] - v[2] for v in rows]))}


def cross_axis(samples: list[dict], m: str, tol: float | None = None) -> dict | None:
    """Cross-axis penalty of metric ``m`` from paired cases: each content's d = R1 - R2 under LRUD minus its d under
    LRLR (both returns of both trajectories qualifying), averaged over the pairs."""
    by: dict[str, dict[str, list]] = {}
    for s in samples:
        t = (s.get("tags") or {}).get("trajectory")
        key, v = content_key(s), _series(s, m)
        if t in ("LRLR", "LRUD") and key and v is not None and len(v) >= 2 and _qualifies(s, m, range(2), tol):
            by.setdefault(key, {})[t] = v
    pairs = [(p["LRUD"], p["LRLR"]) for p in by.values() if "LRUD" in p and "LRLR" in p]
    if not pairs:
        return None
    return {"n_pairs": len(pairs), "delta_axis": float(np.mean([(u[0] - u[1]) - (r[0] - r[1]) for u, r in pairs]))}


def analyses(samples: list[dict]) -> dict:
    """WorldMemBench's analyses over one run (one model), per metric and at case level: the decay R1 -> R3 under
    LRLRLR (each case's R1 - R3, then the mean), the cross-axis penalty Delta_axis = d_LRUD - d_LRLR with d = R1 - R2
    from paired cases (same content under both trajectories), and both again on the return-qualified subsets:
    environment metrics pose-qualified (departure >= 30 deg, return within 30 / 15 / 5 deg), human and object metrics
    tracking-supported (departure evidence and valid observations of every target at every compared revisit). A
    metric a run cannot compute, or whose subset is empty, is None (n counts say how many cases each number rests
    on)."""
    out: dict = {"decay_LRLRLR": {m: decay(samples, m) for m in DECAY_METRICS},
                 "cross_axis": {m: cross_axis(samples, m) for m in STATIC_METRICS}}
    q: dict = {}
    ent = [m for m in STATIC_METRICS if m not in ENVIRONMENT_METRICS]
    q["tracking_supported"] = {"decay_LRLRLR": {m: decay(samples, m, 0) for m in ent},
                               "cross_axis": {m: cross_axis(samples, m, 0) for m in ent}}
    for tol in TOLERANCES:
        q[f"return_within_{tol}deg"] = {"decay_LRLRLR": {m: decay(samples, m, tol) for m in ENVIRONMENT_METRICS},
                                        "cross_axis": {m: cross_axis(samples, m, tol) for m in ENVIRONMENT_METRICS}}
    out["return_qualified"] = q
    return out


__all__ = ["static_memory_scores", "analyses", "revisit_frames", "orientations"]
