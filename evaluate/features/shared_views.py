"""Frames that several extractors of one pass hand to the same model call: each frame is resized once and kept once,
and the call runs once, by the first extractor to finish; the others read its result. Depth Anything 3's camera poses
and revisit depth of an Environment record share one every-frame call this way (models/da3.py)."""

from __future__ import annotations

import threading

import numpy as np


class SharedViews:
    """The frames one DA3 call takes, shared by the extractors of one pass that need the same call (camera poses and
    revisit depth of an Environment record): each frame is resized once, kept once, and the model runs once; the
    first extractor to finish runs it, the others read its prediction."""

    def __init__(self):
        self.frames: dict[int, np.ndarray] = {}
        self.lock = threading.Lock()
        self.users = 0
        self.result: dict | None = None
        self.order: list[int] = []

    def put(self, i: int, frame: np.ndarray, resize) -> None:
        if i not in self.frames:  # two threads may both resize frame i: the frames are equal, one is kept
            f = resize(frame)
            with self.lock:
                self.frames.setdefault(i, f)

    def predict(self, run) -> tuple[list[int], dict]:
        """(frame indices in order, ``run(frames in that order)``), run once: the first caller runs it."""
        with self.lock:
            if self.result is None:
                self.order = sorted(self.frames)
                self.result = run([self.frames[i] for i in self.order]) if self.order else {}
                self.frames = {}
            return self.order, self.result


_SHARED_LOCK = threading.Lock()
_SHARED: "dict[tuple, tuple[object, SharedViews]]" = {}  # (id(record), call key) -> (the record, its views)
_SHARED_MAX = 8  # passes whose extractor failed before finish() leave an entry: the oldest go


def shared_views(rec, key: tuple) -> SharedViews:
    """The views of the model call ``key`` (DA3: model, process size and method) on ``rec`` in this pass (the extractors of
    one ``compute_features`` call are started on the same record object); call :func:`release_views` when done."""
    with _SHARED_LOCK:
        k = (id(rec), key)
        hit = _SHARED.get(k)
        if hit is None or hit[0] is not rec:
            while len(_SHARED) >= _SHARED_MAX:
                _SHARED.pop(next(iter(_SHARED)))
            hit = _SHARED[k] = (rec, SharedViews())
        hit[1].users += 1
        return hit[1]


def release_views(rec, key: tuple, views: SharedViews) -> None:
    with _SHARED_LOCK:
        views.users -= 1
        k = (id(rec), key)
        if views.users <= 0 and k in _SHARED and _SHARED[k][1] is views:
            del _SHARED[k]


def held() -> int:
    """How many passes' shared views are held now (0 once every extractor of every pass has finished)."""
    with _SHARED_LOCK:
        return len(_SHARED)
