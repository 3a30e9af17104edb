"""Metric helpers two benchmarks share: the classical pose chain, geodesic angles, and the quality proxies.

WorldMark's visual-quality column and WorldMemBench's imaging/aesthetic scores come from one quality feature;
WorldMemBench's camera following and MultiWorldBench's control isolation chain the same classical relative poses.
"""

from __future__ import annotations

import numpy as np

from .score import Score, na

PARAMS: dict[str, float] = {
    # imaging quality proxy (classical)
    "quality_sharp_ref": 300.0,
    "quality_noise_ref": 10.0,
}


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



def rotation_angles(R: np.ndarray) -> np.ndarray:
    """Geodesic angle (radians) of each rotation matrix in a (N, 3, 3) stack."""
    tr = np.trace(R, axis1=1, axis2=2)
    return np.arccos(np.clip((tr - 1.0) / 2.0, -1.0, 1.0))


