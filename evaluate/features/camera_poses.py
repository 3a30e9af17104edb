"""The ``camera_poses`` feature (WorldMemBench camera following): the camera pose chain over adjacent frames t -> t+1.

Classical backend: ``AdjacentPoseExtractor`` (the two-view pose chain of geometry.PoseExtractor at gap 1); learned
backend: ``DA3CameraPoses`` (Depth Anything 3's poses, every frame in one call; models/da3.py), available where
depth-anything-3 imports. Both give the rows (R, t, valid, gap) the metrics of worldmembench/camera.py read.
"""

from __future__ import annotations

import math

import numpy as np

from .core import FeatureError
from .geometry import PoseExtractor
from .models.catalogue import HubModels
from .models.da3 import DA3Extractor, available as da3_available, c2w_from_w2c, chain_rows
from .shared_views import SharedViews, release_views, shared_views


class AdjacentPoseExtractor(PoseExtractor):
    """The classical pose chain on adjacent frames (t -> t+1 for every t): the steps camera following's RPEs sum over."""

    name = "camera_poses"
    version = f"{PoseExtractor.version}.2"
    GAP = 1
    #: the families camera following is scored on (benchmark.FAMILY_OF); on other records (a WorldMark case, say)
    #: the chain is not run: it would double the pose cost of every record for a metric that reads the 2-frame poses
    FAMILIES = ("human", "object", "environment")

    def start(self, rec):
        super().start(rec)
        tags = ((rec.meta or {}).get("case") or {}).get("tags") or {}
        self.active = tags.get("family") in self.FAMILIES

    def needs_frame(self, i):
        return self.active and super().needs_frame(i)

    def update(self, i, frame):
        return super().update(i, frame) if self.active else None

    def finish(self):
        return super().finish() if self.active else {"inactive": np.asarray(True)}


class DA3CameraPoses(HubModels, DA3Extractor):
    """DA3's camera poses for WorldMemBench's camera following: every frame (or every ``gap``-th, at most
    ``max_views``) in one ``inference`` call at the API's defaults; rows in ``estimated_trajectory``'s format plus
    DA3's own c2w poses. Runs on the static families only (like AdjacentPoseExtractor)."""

    name = "camera_poses"
    version = "da3-1"

    def __init__(self, *a, max_views: int | None = None, **k):
        super().__init__(*a, **k)
        self.max_views = int(max_views) if max_views else None

    def start(self, rec):
        super().start(rec)
        tags = ((rec.meta or {}).get("case") or {}).get("tags") or {}
        self.active = tags.get("family") in AdjacentPoseExtractor.FAMILIES
        n = int(rec.n_frames or 0)
        self.gap = max(1, math.ceil(n / self.max_views)) if self.max_views and n > self.max_views else 1
        # every frame: the call DA3MemoryDepth makes on the same record (one call in a pass that has both)
        self.views = shared_views(rec, self.call_key()) if self.active and self.gap == 1 else SharedViews()

    def needs_frame(self, i):
        return self.active and i % self.gap == 0

    def update(self, i, frame):
        if frame is not None and self.needs_frame(i):
            self.views.put(i, frame, self._resize)

    def finish(self):
        if not self.active:
            return {"inactive": np.asarray(True)}
        try:
            if len(self.views.frames) < 2 and self.views.result is None:
                raise FeatureError(f"DA3 camera poses need at least 2 frames, the video gave {len(self.views.frames)}")
            order, P = self.views.predict(self._predict)
        finally:
            release_views(self.rec, self.call_key(), self.views)
        if "w2c" not in P or len(P["w2c"]) != len(order):
            raise FeatureError(f"DA3 returned no camera poses for {len(order)} frames")
        c2w = c2w_from_w2c(P["w2c"])
        out = chain_rows(c2w, self.gap)
        out.update({"frame": np.asarray(order, np.int32), "c2w": c2w, "intrinsics": P["intrinsics"],
                    "image_hw": np.asarray(P["depth"].shape[1:], np.int32),
                    "estimator": np.asarray(f"DA3 ({self.label()})")})
        return out

    def config(self):
        return {**super().config(), "max_views": self.max_views}

    @classmethod
    def available(cls) -> bool:
        """Where depth-anything-3 imports; else camera following is unavailable, with the install command
        (worldmembench/benchmark.py)."""
        return da3_available()
