"""Shared box and mask helpers of the target features and the benchmarks that score them: a mask's tight box, the
IoU of two masks or two boxes, and a silhouette's canonical form (crop - resize - centre on a square canvas)."""

from __future__ import annotations

import cv2
import numpy as np

CANVAS = 48  # canonical silhouette canvas (pixels)


def bbox(m: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(m)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1



def canonical(mask: np.ndarray, size: int = CANVAS) -> np.ndarray:
    """Crop a silhouette to its tight box, resize keeping the aspect ratio, centre it on a square canvas."""
    out = np.zeros((size, size), bool)
    if not mask.any():
        return out
    x0, y0, x1, y1 = bbox(mask)
    crop = mask[y0:y1, x0:x1].astype(np.uint8)
    s = (size - 2) / max(crop.shape)
    w, h = max(1, int(round(crop.shape[1] * s))), max(1, int(round(crop.shape[0] * s)))
    r = cv2.resize(crop, (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)
    oy, ox = (size - h) // 2, (size - w) // 2
    out[oy:oy + h, ox:ox + w] = r
    return out


def iou(a: np.ndarray, b: np.ndarray) -> float:
    u = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / u) if u else 0.0


def box_iou(a, b) -> float:
    """IoU of two (x0, y0, x1, y1) boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / u) if u > 0 else 0.0
