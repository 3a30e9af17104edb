"""WorldMemBench camera following: translation RPE after Sim(3) alignment (evo) and rotation RPE normalised by the
commanded angular path, from the classical pose chain."""

from __future__ import annotations

import math

import numpy as np
from evo.core.geometry import GeometryException
from evo.core.trajectory import PoseTrajectory3D
from scipy.spatial.transform import Rotation

from ..score import Score, na
from ..shared import estimated_trajectory, rotation_angles
from .params import PARAMS


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



def _rpe_trans(est: np.ndarray, cmd: np.ndarray, path_len: float, frames, fps) -> float:
    ref = cmd.copy()
    ref[:, :3, 3] /= path_len  # the commanded path normalised to unit length
    ts = np.asarray(frames, float) / fps
    t_ref = PoseTrajectory3D(poses_se3=list(ref), timestamps=ts)
    t_est = PoseTrajectory3D(poses_se3=list(est), timestamps=ts.copy())
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


