"""WorldMark's per-video global-memory computation (``vggt_omega_global_c3.py``, vg:18-94) from VGGT-Omega's
predictions: the frames it picks, the all-pairs co-visible errors over the median depth, and the record it stores.
Shared by WorldMark's results tree (``worldmark/master.py``, parity-tested) and the learned extractor
(``models/vggt.py``), so neither holds a second copy."""

from __future__ import annotations

import numpy as np

C3_STRIDE_SEC, C3_MAX_FRAMES, C3_GRID_STEP, C3_OCC_LO, C3_OCC_HI, C3_CONF_Q = 1.0, 64, 16, 0.7, 1.4, 0.3  # vg:18


def c3_select_frames(n_frames, fps):
    """vg:35-39: every round(fps)-th frame (fps = decoder's average fps, 16 when it reports 0); < 6 -> 6 evenly
    spaced; > 64 -> 64 picked by linspace(...).astype(int)."""
    fps = fps or 16.0
    step = max(1, int(round(C3_STRIDE_SEC * fps)))
    fr = list(range(0, n_frames, step))
    if len(fr) < 6:
        fr = sorted(set(int(x) for x in np.linspace(0, n_frames - 1, 6)))
    if len(fr) > C3_MAX_FRAMES:
        fr = [fr[i] for i in np.linspace(0, len(fr) - 1, C3_MAX_FRAMES).astype(int)]
    return fr


def sample_at(img, px, py):
    """vg:27-30 nearest-lower-pixel lookup with clipping."""
    H, W = img.shape[:2]
    x0 = np.clip(np.floor(px).astype(int), 0, W - 1); y0 = np.clip(np.floor(py).astype(int), 0, H - 1)
    return img[y0, x0]


def c3_errors(extr, intr, depth, conf, with_skipped=False):
    """All-pairs reprojection errors (vg:57-87).  extr [K,3,4] w2c, intr [K,3,3], depth/conf [K,H,W], float32 as
    the model returns them.  Returns (list of per-pair error arrays (already / median depth), covis, total), and with
    ``with_skipped`` the number of pairs skipped for fewer than 5 points inside the other frame (vg:81)."""
    Kf, H, W = depth.shape
    yy, xx = np.mgrid[0:H, 0:W]
    wp = np.zeros((Kf, H, W, 3), np.float32)
    for k in range(Kf):                                    # back-project (vg:60-66)
        fx, fy, cx, cy = intr[k][0, 0], intr[k][1, 1], intr[k][0, 2], intr[k][1, 2]
        d = depth[k]
        Xc = np.stack([(xx - cx) / fx * d, (yy - cy) / fy * d, d], -1)
        R = extr[k][:, :3]; t = extr[k][:, 3]
        wp[k] = (Xc - t) @ R
    scale = float(np.median(depth[depth > 1e-6]))          # vg:67 one median depth over all frames
    conf_thr = np.quantile(conf, C3_CONF_Q)                # vg:68 global 30% quantile
    gy, gx = yy[::C3_GRID_STEP, ::C3_GRID_STEP].ravel(), xx[::C3_GRID_STEP, ::C3_GRID_STEP].ravel()
    errs = []; covis = 0; total = 0; skipped = 0
    with np.errstate(all="ignore"):
        for i in range(Kf):
            gm = conf[i][gy, gx] >= conf_thr
            X = wp[i][gy[gm], gx[gm]]
            for j in range(Kf):
                if i == j:
                    continue
                R = extr[j][:, :3]; t = extr[j][:, 3]
                xc = X @ R.T + t; Z = xc[:, 2]; Kj = intr[j]
                px = Kj[0, 0] * xc[:, 0] / Z + Kj[0, 2]; py = Kj[1, 1] * xc[:, 1] / Z + Kj[1, 2]
                inside = (Z > 1e-6) & (px >= 0) & (px < W) & (py >= 0) & (py < H)
                if inside.sum() < 5:
                    skipped += 1
                    continue
                dj = sample_at(depth[j], px, py); ratio = Z / np.maximum(dj, 1e-6)
                cov = inside & (ratio > C3_OCC_LO) & (ratio < C3_OCC_HI) & (sample_at(conf[j], px, py) >= conf_thr)
                total += int(inside.sum()); covis += int(cov.sum())
                if cov.sum() < 5:
                    continue
                Y = sample_at(wp[j], px[cov], py[cov])
                errs.append(np.linalg.norm(X[cov] - Y, axis=1) / scale)
    return (errs, covis, total, skipped) if with_skipped else (errs, covis, total)


def c3_record(model, stem, errs, covis=0, total=0):
    """The omega_c3_1s_shard{S}of{N}.json entry (vg:88-94).  `global_score` uses tau 1 and is not used by fm."""
    if not len(errs):
        return {"model": model, "stem": stem, "na": "no_covis"}
    alle = np.concatenate(errs)
    return {"model": model, "stem": stem,
            "global_median_e": round(float(np.median(alle)), 5), "global_mean_e": round(float(np.mean(alle)), 5),
            "global_score": round(100.0 / (1.0 + float(np.median(alle))), 3),
            "covis_ratio": round(covis / max(1, total), 3)}
