"""The ``memory_depth`` feature (WorldMemBench's Depth Spearman and Spherical Reconstruction Score): relative inverse
depth on a 32 x 32 grid at frame 0 and the revisit frames (``targets.memory_depth_frames``), with the intrinsics on
that grid.

Learned backend only: Depth Anything 3 (``DA3MemoryDepth``; the paper's estimator for camera following and
Environment Visible; it names no depth model for these two metrics, worldgate's choice) where depth-anything-3
imports, else Depth Anything V2 (``LearnedMemoryDepth``); ``learned_memory_depth`` picks the first available. Both
give ``frame``, ``depth`` (K, 32, 32) and ``K``.
"""

from __future__ import annotations

import cv2
import numpy as np

from .camera_poses import AdjacentPoseExtractor
from .core import Choice, Extractor, FeatureError
from .depth import LearnedDepth
from .geometry import grid_K
from .models.catalogue import DEPTH_ID, HubModels
from .models.da3 import INVZ_MIN_DEPTH, DA3Extractor
from .models.loaders import batch_for
from .shared_views import SharedViews, release_views, shared_views
from .targets import memory_depth_frames


class LearnedMemoryDepth(HubModels, Extractor):
    """Depth Anything relative inverse depth, on a 32 x 32 grid, at frame 0 and at the frames of every revisit phase
    (every ``STRIDE``-th and the arrival frame; targets.memory_depth_frames): the maps Depth Spearman and the
    Spherical Reconstruction Score compare."""

    name = "memory_depth"
    version = "1"
    backend = "learned"
    max_side = 518
    GRID = 32
    STRIDE = 4

    def __init__(self, model=None, hf_id: str = DEPTH_ID, size: int = 518, device: str = "auto",
                 batch_size: int | None = None):
        self.depth = LearnedDepth(model=model, hf_id=hf_id, size=size, device=device, batch_size=batch_size)

    def start(self, rec):
        super().start(rec)
        self.depth.batch_size = batch_for(self.name, self.depth.device, self.depth.given_batch)
        self.keep = memory_depth_frames(rec, self.STRIDE)
        self.frames, self.maps, self.K, self.todo = [], [], None, []

    def needs_frame(self, i):
        return i in self.keep

    def update(self, i, frame):
        if frame is None or i not in self.keep:
            return
        h, w = frame.shape[:2]
        G = self.GRID
        self.frames.append(i)
        self.todo.append(frame)
        if len(self.todo) >= self.depth.batch_size:
            self._run()
        if self.K is None:
            self.K = grid_K(self.rec, w, h, G)

    def _run(self):
        G = self.GRID
        for disp in self.depth.disparities(self.todo):
            self.maps.append(cv2.resize(disp, (G, G), interpolation=cv2.INTER_AREA).astype(np.float32))
        self.todo = []

    def finish(self):
        self._run()
        return {"frame": np.asarray(self.frames, np.int32),
                "depth": np.asarray(self.maps, np.float32).reshape(-1, self.GRID, self.GRID),
                "K": self.K if self.K is not None else np.eye(3)}

    def config(self):
        return {**super().config(), "model": self.depth.hf_id, "grid": self.GRID, "stride": self.STRIDE}


class DA3MemoryDepth(HubModels, DA3Extractor):
    """Depth Anything 3 for WorldMemBench's Environment Depth Spearman and Spherical Reconstruction Score: frame 0 and
    the revisit frames ``worldmembench.static.memory_depth_frames`` picks (LearnedMemoryDepth's), given to DA3 in one
    ``inference`` call at the API's defaults (the views see each other, one depth scale for all of them), as
    ``1 / clip(depth, 1e-3)`` on LearnedMemoryDepth's 32 x 32 grid with the record's intrinsics on that grid: the
    same keys, so evaluate/worldmembench/static.py reads it unchanged. The paper names DA3 for poses and no depth
    model for these two metrics; one estimator for all of them is worldgate's choice."""

    name = "memory_depth"
    version = "da3-2"  # da3-2: on the camera-pose families, the depth of DA3's every-frame call (da3-1: picks only)
    GRID = 32
    STRIDE = 4

    def start(self, rec):
        super().start(rec)
        self.keep = memory_depth_frames(rec, self.STRIDE)
        self.K = None
        tags = ((rec.meta or {}).get("case") or {}).get("tags") or {}
        # an Environment record's camera poses come from DA3 on every frame (DA3CameraPoses): its depth at the picks
        # is taken from that same call (one DA3 run for both quantities, the views of the whole rollout, one depth
        # scale); elsewhere DA3 sees frame 0 and the revisit frames only
        self.every = bool(self.keep) and tags.get("family") in AdjacentPoseExtractor.FAMILIES
        self.views = shared_views(rec, self.call_key()) if self.every else SharedViews()

    def needs_frame(self, i):
        return self.every or i in self.keep

    def update(self, i, frame):
        if frame is None or not self.needs_frame(i):
            return
        if self.K is None:
            h, w = frame.shape[:2]
            self.K = grid_K(self.rec, w, h, self.GRID)
        self.views.put(i, frame, self._resize)

    def finish(self):
        G = self.GRID
        empty = {"frame": np.zeros(0, np.int32), "depth": np.zeros((0, G, G), np.float32),
                 "K": self.K if self.K is not None else np.eye(3), "model": np.asarray(self.label())}
        try:
            if not self.views.frames and self.views.result is None:
                return empty
            called, P = self.views.predict(self._predict)
        finally:
            release_views(self.rec, self.call_key(), self.views)
        if not called:
            return empty
        if len(P["depth"]) != len(called):
            raise FeatureError(f"DA3 returned {len(P['depth'])} depth maps for {len(called)} frames")
        at = {i: k for k, i in enumerate(called)}
        order = [i for i in sorted(self.keep) if i in at]
        if not order:
            return empty
        inv = 1.0 / np.clip(np.asarray(P["depth"][[at[i] for i in order]], np.float64), INVZ_MIN_DEPTH, None)
        maps = np.stack([cv2.resize(d, (G, G), interpolation=cv2.INTER_AREA) for d in inv]).astype(np.float32)
        return {**empty, "frame": np.asarray(order, np.int32), "depth": maps,
                "image_hw": np.asarray(P["depth"].shape[1:], np.int32)}


#: the learned ``memory_depth`` feature: DA3 where it imports, else Depth Anything V2
learned_memory_depth = Choice("memory_depth", DA3MemoryDepth, LearnedMemoryDepth)
