"""The scene filter: a measured traversability score per image with named thresholds, then near-duplicate removal by
embedding distance. Both are classical (CPU, deterministic) by default; a depth model by HF id adds a depth-extent
term (WorldMark's "too enclosed" criterion) and a learned embedder can replace the thumbnail embedding.

Traversability (WorldMark supplement, "Image Suite": scenes "too enclosed or too uniform to reward traversal" are
discarded before deduplication). Measured on the image's grey levels, downscaled (never upscaled: that would blur the
detail away) to ``ANALYSIS_SIZE`` pixels on its long side:

- ``texture``: the fraction of the cells of a ``GRID`` x ``GRID`` grid whose mean fine detail (the absolute difference
  between the grey image, 0-1 scale, and its Gaussian blur at ``DETAIL_SIGMA`` pixels) exceeds ``CELL_DETAIL_MIN``: a
  featureless field, a smooth sky-like gradient or a blank wall scores 0, a street or a forest near 1.
- ``depth_extent`` (only with a depth model): ``log(p95 / p5)`` of the model's relative depth over the frame: a
  sealed room scores low, a street canyon or a landscape high.

An image is kept when ``texture >= PARAMS["traversability.texture_min"]`` and, where measured,
``depth_extent >= PARAMS["traversability.depth_extent_min"]``. Defaults are set so that every image of WorldMark's own
arena (first and third view, real and stylised: 100 images) passes with margin (tests pin the margins), while a flat
image and a smooth gradient fail.

Near-duplicates: each image's embedding is a 16x16 RGB thumbnail, each channel made zero-mean, the whole L2-normalised;
the distance is ``1 - cosine``. An image within ``PARAMS["dedup.max_distance"]`` of an earlier kept image is dropped
(the earlier one stays), with the distance and the image it repeats in the build log.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from PIL import Image

ANALYSIS_SIZE = 256
GRID = 8
DETAIL_SIGMA = 2.0
CELL_DETAIL_MIN = 0.005
THUMB = 16

PARAMS = {
    "traversability.texture_min": 0.4,
    "traversability.depth_extent_min": 0.5,
    "dedup.max_distance": 0.05,
}


def _grey(img: Image.Image) -> np.ndarray:
    w, h = img.size
    s = min(1.0, ANALYSIS_SIZE / max(w, h))
    size = (max(GRID, round(w * s)), max(GRID, round(h * s)))
    g = img.convert("L")
    return np.asarray(g if size == g.size else g.resize(size, Image.Resampling.BILINEAR), np.float32) / 255.0


def texture_score(img: Image.Image) -> float:
    g = _grey(img)
    h, w = g.shape
    ys = np.linspace(0, h, GRID + 1).astype(int)
    xs = np.linspace(0, w, GRID + 1).astype(int)
    detail = np.abs(g - cv2.GaussianBlur(g, (0, 0), DETAIL_SIGMA))
    cells = np.array([[detail[ys[i]:ys[i + 1], xs[j]:xs[j + 1]].mean() for j in range(GRID)] for i in range(GRID)])
    return float((cells > CELL_DETAIL_MIN).mean())


def depth_extent(depth: np.ndarray) -> float:
    """``log(p95 / p5)`` of a positive relative depth (or disparity: the ratio is symmetric in it) map."""
    d = np.asarray(depth, np.float64)
    d = d[np.isfinite(d) & (d > 0)]
    if d.size == 0:
        return 0.0
    lo, hi = np.percentile(d, [5, 95])
    return float(math.log(hi / lo)) if lo > 0 else float("inf")


def traversability(img: Image.Image, depth: np.ndarray | None = None, params: dict | None = None) -> dict:
    P = {**PARAMS, **(params or {})}
    tex = texture_score(img)
    ext = depth_extent(depth) if depth is not None else None
    reasons = []
    if tex < P["traversability.texture_min"]:
        reasons.append(f"too uniform: texture {tex:.3f} < traversability.texture_min {P['traversability.texture_min']}")
    if ext is not None and ext < P["traversability.depth_extent_min"]:
        reasons.append(f"too enclosed: depth_extent {ext:.3f} < traversability.depth_extent_min "
                       f"{P['traversability.depth_extent_min']}")
    return {"texture": round(tex, 6), "depth_extent": None if ext is None else round(ext, 6),
            "texture_min": P["traversability.texture_min"],
            "depth_extent_min": P["traversability.depth_extent_min"] if ext is not None else None,
            "passed": not reasons, "reason": "; ".join(reasons) or None}


def thumbnail_embedding(img: Image.Image) -> np.ndarray:
    a = np.asarray(img.convert("RGB").resize((THUMB, THUMB), Image.Resampling.BOX), np.float64) / 255.0
    a = a - a.reshape(-1, 3).mean(0)
    v = a.reshape(-1)
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 0.0 if na == nb else 1.0
    return float(1.0 - np.dot(a, b) / (na * nb))


def near_duplicates(embeddings: list[np.ndarray | None], max_distance: float) -> list[dict]:
    """Per image, in order: ``{"nearest": j, "distance": d, "duplicate_of": j or None}`` against the earlier images
    that were kept (``None`` embeddings are images already dropped: they neither keep nor drop others)."""
    out, kept = [], []
    for i, e in enumerate(embeddings):
        if e is None:
            out.append({"nearest": None, "distance": None, "duplicate_of": None})
            continue
        best, bd = None, None
        for j in kept:
            d = cosine_distance(e, embeddings[j])
            if bd is None or d < bd:
                best, bd = j, d
        dup = best if bd is not None and bd <= max_distance else None
        if dup is None:
            kept.append(i)
        out.append({"nearest": best, "distance": None if bd is None else round(bd, 6), "duplicate_of": dup})
    return out


def relative_depth(img: Image.Image, model_id: str, device: str = "cpu", model=None, processor=None) -> np.ndarray:
    """Relative depth of one image from a transformers depth-estimation model loaded by HF id (Depth Anything)."""
    import torch  # heavy, optional
    from transformers import AutoImageProcessor, AutoModelForDepthEstimation  # heavy, optional

    if model is None:
        try:
            processor = AutoImageProcessor.from_pretrained(model_id, local_files_only=True)
            model = AutoModelForDepthEstimation.from_pretrained(model_id, local_files_only=True).to(device)
        except (OSError, ValueError) as e:
            raise FileNotFoundError(f"depth model {model_id!r} is not in the Hugging Face cache: fetch it with "
                                    f"`hf download {model_id}` on a connected machine ({e})") from None
    inputs = processor(images=img.convert("RGB"), return_tensors="pt")
    with torch.no_grad():
        out = model(**{k: v.to(device) for k, v in inputs.items()})
    d = out.predicted_depth[0].float().cpu().numpy()
    return cv2.resize(d, img.size, interpolation=cv2.INTER_LINEAR)
