"""WorldMemBench camera following (the paper's Camera Following paragraph, its two RPE formulas): over adjacent
frames t -> t+1 of the whole rollout,

- translation RPE = sum_t |trans(dQ_t^-1 dQ^_t)| after normalising the commanded path to unit length and aligning the
  estimate to it by Sim(3) (evo's Umeyama; a collinear path by ``_line_sim3``), dQ_t = Q_t^-1 Q_t+1;
- rotation RPE = sum_t theta(dR_t^T dR^_t) / sum_t theta(dR_t), no alignment: the accumulated angular disagreement
  over the accumulated commanded angle.

Both are accumulated, dimensionless, lower is better. The paper's estimators are DA3 and ViPE (translation: each
aligned on its own) and DA3 alone (rotation); worldgate has one estimator per backend: the classical pose chain of
``AdjacentPoseExtractor`` (features/camera_poses.py, the feature ``camera_poses``: frame t -> t+1 for every t), and
under ``--backend learned`` DA3's poses in the same format (features/camera_poses.DA3CameraPoses; ViPE is not run).
Where only the shared ``poses`` feature is computed (frame pairs 0->2->4...), the sums run over its 2-frame steps and
the detail says so. The rotation RPE is also kept per departure-and-revisit cycle (D_k and R_k: Fig. 5's per-revisit
RPE)."""

from __future__ import annotations

import math

import numpy as np
from evo.core.geometry import GeometryException, umeyama_alignment
from scipy.spatial.transform import Rotation

from ..score import Score, na
from ..shared import estimated_trajectory, rotation_angles
from .params import PARAMS


#: why classical poses do not give translation RPE: over adjacent frames the two-view baseline is a fraction of a
#: pixel's parallax, and the accumulated step error on the unit path measured ~0.86 on Engine GT with the faults alike
#: (drift 0.82, forget 0.51; docs/metric-validation.md before this rule), so it separated nothing
CLASSICAL_TRANS = ("translation RPE needs a learned pose estimator (the paper's DA3; --backend learned): the "
                   "classical adjacent-frame poses do not resolve translation per step (Engine GT scored 0.86, as its "
                   "faults did)")


def camera_following(feat, rec, P=PARAMS, backend: str | None = None) -> dict[str, Score]:
    """Camera following's two RPEs; ``backend`` (None: told by the pose feature's estimator) decides whether the
    translation RPE is measured (learned poses) or unavailable (classical, CLASSICAL_TRANS)."""
    src = "camera_poses" if "camera_poses" in feat and "inactive" not in feat["camera_poses"] else "poses"
    est, frames = estimated_trajectory({"poses": feat[src]})
    cmd_all = rec["poses"]
    keep = frames < len(cmd_all)
    frames, est = frames[keep], est[keep]
    cmd = cmd_all[frames]
    step = int(np.median(np.diff(frames))) if len(frames) > 1 else 1
    name = str(feat[src]["estimator"]) if "estimator" in feat[src] else f"classical ({src})"
    label = {"estimator": name, "step_frames": step, "steps": max(0, len(frames) - 1)}
    out = {}
    Rc, Re = cmd[:, :3, :3], est[:, :3, :3]
    dR = np.einsum("nji,njk->nik", Rc[:-1], Rc[1:])  # R_t^T R_{t+1}
    dRh = np.einsum("nji,njk->nik", Re[:-1], Re[1:])
    target = rotation_angles(dR)
    err = rotation_angles(np.einsum("nji,njk->nik", dR, dRh))
    denom = float(target.sum())
    if denom < math.radians(1.0):
        out["camera_rpe_rot"] = na("commanded path has (almost) no rotation")
    else:
        cyc = _per_cycle(rec.get("trajectory") or {}, frames, target, err)
        out["camera_rpe_rot"] = Score(float(err.sum()) / denom, detail={
            **label, "accumulated_error_deg": math.degrees(float(err.sum())), "target_deg": math.degrees(denom),
            "per_revisit": [c["rpe"] for c in cyc], "cycles": cyc})
    path = np.linalg.norm(np.diff(cmd[:, :3, 3], axis=0), axis=1).sum()
    if path < 1e-6:
        out["camera_rpe_trans"] = na("commanded path has no translation")
        return out
    if backend == "classical" or (backend is None and not name.startswith("DA3")):
        out["camera_rpe_trans"] = na(CLASSICAL_TRANS)
        return out
    try:
        out["camera_rpe_trans"] = Score(_rpe_trans(est, cmd, path, frames, rec["fps"]), detail=label)
    except Exception as e:  # evo raises on degenerate alignments; say so
        out["camera_rpe_trans"] = na(f"Sim(3) alignment failed: {type(e).__name__}: {e}")
    return out


def _per_cycle(traj: dict, frames: np.ndarray, target: np.ndarray, err: np.ndarray) -> list[dict]:
    """Rotation RPE of each departure-and-revisit cycle k: the steps from the start of D_k to the end of R_k (the
    arrival frame included), accumulated error over accumulated commanded angle; None where the cycle commands no
    rotation."""
    ph = {p["name"]: (int(p["frames"][0]), int(p["frames"][1])) for p in traj.get("phases", [])}
    out = []
    k = 1
    while f"R{k}" in ph:
        a = ph.get(f"D{k}", ph[f"R{k}"])[0]
        b = ph[f"R{k}"][1]
        m = (frames[:-1] >= a) & (frames[1:] <= b)  # step t -> t+1 inside [a, b]
        d = float(target[m].sum())
        out.append({"phase": f"R{k}", "frames": [a, b], "rpe": float(err[m].sum()) / d if d >= math.radians(1.0)
                    else None})
        k += 1
    return out


def _rpe_trans(est: np.ndarray, cmd: np.ndarray, path_len: float, frames, fps) -> float:
    """The accumulated translation RPE on the unit-length commanded path after evo's Sim(3) Umeyama alignment of the
    estimate's positions (what ``PoseTrajectory3D.align(correct_scale=True)`` computes, applied to the poses as
    arrays: evo's per-pose objects were most of a rescore)."""
    ref = np.array(cmd, float)
    ref[:, :3, 3] /= path_len  # the commanded path normalised to unit length
    est = np.array(est, float)
    try:
        R, t, s = umeyama_alignment(est[:, :3, 3].T, ref[:, :3, 3].T, True)
    except GeometryException:  # a straight commanded path: Umeyama is rank-deficient, align along the line
        s, R, t = _line_sim3(est[:, :3, 3], ref[:, :3, 3])
    # evo's align: scale the positions, then apply the rigid [R | t] to every pose
    est[:, :3, 3] *= s
    est[:, :3, :3] = np.einsum("ij,njk->nik", R, est[:, :3, :3])
    est[:, :3, 3] = est[:, :3, 3] @ R.T + t
    # accumulated over the rollout's adjacent steps (the paper's sum)
    return float(rpe_translation(ref, est).sum())


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


