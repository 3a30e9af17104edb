"""The ``depth`` feature (WorldMark's parallax split ``u = a (1/Z) + b``): relative inverse depth on the flow's
8x8 grid.

Learned backend only: WorldMark's DA3 call (``DA3Depth``, models/da3.py) where ``depth-anything-3`` imports, else Depth
Anything V2 at 1 fps (``LearnedDepth``, a deviation its config names); ``learned_depth`` picks the first available.
Both give ``frame`` and ``disparity`` (K, 8, 8).
"""

from __future__ import annotations

import numpy as np

from .core import Choice, Extractor, FeatureError
from .models.catalogue import DEPTH_ID, HubModels, shared_model
from .models.da3 import GRID, DA3Extractor, inverse_depth_grid, predict, status, worldmark_frame, worldmark_picks
from .models.loaders import IMAGENET_MEAN, IMAGENET_STD, batch_for, require_torch, resolve_device, to_tensor


class LearnedDepth(HubModels, Extractor):
    """Depth Anything relative inverse depth at 1 fps, pooled on the flow's 8x8 grid; frames batched."""

    name = "depth"
    version = "1"
    backend = "learned"
    max_side = 518
    GRID = 8

    def __init__(self, model=None, hf_id: str = DEPTH_ID, size: int = 518, device: str = "auto",
                 batch_size: int | None = None):
        self.model, self.hf_id, self.size, self.given_batch = model, hf_id, size, batch_size
        self.device = resolve_device(device)
        self.batch_size = batch_for(self.name, self.device, batch_size, free_bytes=0)  # resolved again at start

    def _model(self):
        if self.model is None:
            self.model = shared_model("depth", "DepthAnythingForDepthEstimation", self.hf_id)
        return self.model.eval().to(self.device)

    def config(self):
        ok, why = status()
        return {**super().config(), "model": self.hf_id,
                "deviation": "Depth Anything V2 at 1 fps: WorldMark runs DA3 on its picked frames"
                             + ("" if ok else f" ({why})")}

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.step = max(1, int(round(rec.fps)))
        self.frames, self.grids, self.todo = [], [], []

    def _size(self, frame):
        h, w = frame.shape[:2]
        s = self.size / max(h, w)
        return (max(14, int(round(w * s / 14)) * 14), max(14, int(round(h * s / 14)) * 14))

    def disparities(self, frames: list) -> list:
        """Depth Anything's relative inverse depth of each frame (longer side at ``size``, sides multiples of 14),
        the frames of one size in one forward pass."""
        torch = require_torch()
        if not frames:
            return []
        size = self._size(frames[0])
        x = torch.cat([to_tensor(f, size, IMAGENET_MEAN, IMAGENET_STD) for f in frames]).to(self.device)
        with torch.inference_mode():
            return list(self._model()(pixel_values=x).predicted_depth.float().cpu().numpy())

    def disparity(self, frame: np.ndarray) -> np.ndarray:
        return self.disparities([frame])[0]

    def _run(self):
        G = self.GRID
        for d in self.disparities(self.todo):
            hh, ww = (d.shape[0] // G) * G, (d.shape[1] // G) * G
            self.grids.append(d[:hh, :ww].reshape(G, hh // G, G, ww // G).mean(axis=(1, 3)).astype(np.float32))
        self.todo = []

    def update(self, i, frame):
        if i % self.step:
            return
        self.frames.append(i)
        self.todo.append(frame)
        if len(self.todo) >= self.batch_size:
            self._run()

    def finish(self):
        self._run()
        return {"frame": np.asarray(self.frames, np.int32),
                "disparity": np.asarray(self.grids, np.float32).reshape(-1, self.GRID, self.GRID)}


class DA3Depth(HubModels, DA3Extractor):
    """WorldMark's DA3 depth for the parallax split: one ``inference`` call on the frames fe:_parallax_raw picks
    (640 x 432), the inverse depth on the flow's 8 x 8 grid; LearnedDepth's keys. Records that are not a WorldMark key
    sequence get no DA3 call (the protocol does not read their depth); where the frame count is unknown, every 16th
    frame is used (the protocol takes the nearest)."""

    name = "depth"
    version = "da3-1"

    def start(self, rec):
        super().start(rec)
        self.model_name = (rec.meta or {}).get("model") if isinstance(rec.meta, dict) else None
        self.picks = worldmark_picks(rec.trajectory, rec.n_frames) if rec.n_frames else None
        self.stride_fallback = self.picks is None and not rec.n_frames
        self.keep = {i for _, i in self.picks} if self.picks else set()
        self.frames: dict[int, np.ndarray] = {}

    def needs_frame(self, i):
        return i in self.keep or (self.stride_fallback and i % 16 == 0)

    def update(self, i, frame):
        if frame is not None and self.needs_frame(i):
            self.frames[i] = worldmark_frame(frame, self.model_name)

    def finish(self):
        order = [i for _, i in self.picks] if self.picks else sorted(self.frames)
        order = [i for i in order if i in self.frames]
        if not order:
            return {"frame": np.zeros(0, np.int32), "disparity": np.zeros((0, GRID, GRID), np.float32),
                    "model": np.asarray(self.label())}
        P = predict(self._model(), [self.frames[i] for i in order], self.process_res, self.method)
        if len(P["depth"]) != len(order):
            raise FeatureError(f"DA3 returned {len(P['depth'])} depth maps for {len(order)} frames")
        self.frames = {}
        return {"frame": np.asarray(order, np.int32), "disparity": inverse_depth_grid(P["depth"]),
                "image_hw": np.asarray(P["depth"].shape[1:], np.int32), "model": np.asarray(self.label()),
                "picks": np.asarray("worldmark" if self.picks else "every 16th frame")}


#: the learned ``depth`` feature: DA3 where it imports, else Depth Anything V2
learned_depth = Choice("depth", DA3Depth, LearnedDepth)
