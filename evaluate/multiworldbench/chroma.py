"""The video's pixels as the measured judgments read them: a class per pixel by nearest chromaticity.

The costly part of the classification, which no threshold touches (each pixel's nearest of the seven classes), is a
per-frame feature: the key-frame extractor (:class:`~.record.KeyFrames`) caches it next to the frames (one byte a
pixel). The scoring computes the distance to that one class again and applies the thresholds (``mwb_chroma_tol``,
``mwb_dark``; :func:`labels`), bit for bit as :func:`classify` does, so a rescore never searches the classes again,
whatever thresholds it is given.
"""

from __future__ import annotations

import numpy as np

from worldgate.trajectories.multiworldbench.world import AVATAR_RGB, CROSS_RGB, MATERIALS

from .protocol import P_


def _class_table():
    names = list(MATERIALS) + ["cross", "avatar:A", "avatar:B"]
    rgb = [MATERIALS[m] for m in MATERIALS] + [CROSS_RGB, AVATAR_RGB["A"], AVATAR_RGB["B"]]
    rgb = np.asarray(rgb, np.float64)
    return names, rgb[:, :2] / rgb.sum(1, keepdims=True)


CLASS_NAMES, _CHROMA = _class_table()
_CHROMA32 = _CHROMA.astype(np.float32)
CLASS = {n: i for i, n in enumerate(CLASS_NAMES)}
N_MATERIALS = 4


def _planes(frame: np.ndarray):
    """(r + g + b, r / max(r + g + b, 1), g / ...) in float32. The sum plane by plane: f.sum(-1) adds the three in
    the same order ((r + g) + b, exact for 8-bit pixels anyway) but ~30x slower over a 3-long last axis."""
    f = frame.astype(np.float32)
    s = f[..., 0] + f[..., 1] + f[..., 2]
    m = np.maximum(s, 1.0)
    return s, f[..., 0] / m, f[..., 1] / m


def chroma(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pixel: the class of nearest chromaticity (r, g) / (r + g + b) (int8 index into :data:`CLASS_NAMES`), the
    distance to it (float32) and the channel sum r + g + b (float32).

    float32 and one class at a time on whole planes, as a per-pixel (H, W, classes, 2) norm and argmin computes it,
    bit for bit (the first nearest class wins a tie), several times faster than those interleaved arrays."""
    s, r, g = _planes(frame)
    best, near = None, np.zeros(s.shape, np.int8)
    for c, (cr, cg) in enumerate(_CHROMA32):
        dr, dg = r - cr, g - cg
        d = np.sqrt(dr * dr + dg * dg)
        if best is None:
            best = d
        else:
            near[d < best] = c
            np.minimum(best, d, out=best)
    return near, best, s


def _threshold(near: np.ndarray, dist: np.ndarray, total: np.ndarray, P: dict) -> np.ndarray:
    lab = near.astype(np.int16)
    ok = (dist <= P_(P, "mwb_chroma_tol")) & (total >= 3 * 255 * P_(P, "mwb_dark"))
    lab[~ok] = -1
    return lab


def classify(frame: np.ndarray, P: dict) -> np.ndarray:
    """Per-pixel class index into :data:`CLASS_NAMES` (-1: none) by nearest chromaticity (r, g) / (r + g + b)
    within ``mwb_chroma_tol``; pixels darker than ``mwb_dark`` (mean of the channels, 0..1) are never classified."""
    return _threshold(*chroma(frame), P)


def labels(frame: np.ndarray, near: np.ndarray, P: dict) -> np.ndarray:
    """:func:`classify` given each pixel's nearest class (``near``, as :func:`chroma` found it): only the distance to
    that one class is computed again (the same float32 operations, so the same bits), about half the work."""
    s, r, g = _planes(frame)
    dr, dg = r - _CHROMA32[:, 0][near], g - _CHROMA32[:, 1][near]
    return _threshold(near, np.sqrt(dr * dr + dg * dg), s, P)


def nearest_classes(frames: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`chroma`'s nearest class of every pixel of frames (F, H, W, 3) as a cached array (``near``, int8)."""
    if frames.ndim != 4 or len(frames) == 0:
        return {}
    return {"near": np.stack([chroma(f)[0] for f in frames])}


def frame_labels(kf: dict, f: int, P: dict) -> np.ndarray:
    """:func:`classify` of key frame ``f`` of a view's ``keyframes`` feature, from its cached nearest classes."""
    j = list(kf["index"]).index(f)
    if "near" in kf:
        return labels(kf["frames"][j], kf["near"][j], P)
    return classify(kf["frames"][j], P)
