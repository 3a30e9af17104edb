"""Signals shared by the backends of several features: grey levels, the flow statistics every ``flow`` backend reports
(``FlowSignals``) and the hard-cut cue of both ``appearance`` backends (``HardCutSignal``)."""

from __future__ import annotations

import cv2
import numpy as np

REF_WIDTH = 640.0  # flows are reported in pixels of a 640-wide frame (WorldMark runs SEA-RAFT at 432x640)


PAIR_GAP = 2  # frame i vs i+2


def to_gray(frame: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)


def to_gray_norm(frame: np.ndarray) -> np.ndarray:
    """Grey level with the frame's mean and contrast normalised: motion estimates that survive global flicker."""
    g = to_gray(frame)
    m, sd = cv2.meanStdDev(g)
    a = 48.0 / max(float(sd[0, 0]), 1.0)
    return cv2.convertScaleAbs(g, alpha=a, beta=128.0 - a * float(m[0, 0]))


class FlowSignals:
    """WorldMark's flow signals from dense flow fields, accumulated pair by pair (shared by both flow backends):
    ``sx`` mean horizontal flow, ``sy`` mean vertical flow, ``srad`` mean flow along unit vectors pointing away from
    the image centre, ``speed`` mean magnitude, ``grid`` 8x8 cell means; all in pixels of a 640-wide frame."""

    GRID = 8

    def __init__(self):
        self.rows: dict[str, list] = {k: [] for k in ("sx", "sy", "srad", "speed", "grid")}
        self._rad = None

    def add(self, flow: np.ndarray) -> None:
        h, w = flow.shape[:2]
        s = REF_WIDTH / w
        if self._rad is None:  # statistics on every other pixel: the means are the same, the cost a quarter
            yy, xx = np.mgrid[0:h:2, 0:w:2].astype(np.float32)
            rx, ry = xx + 1.0 - w / 2, yy + 1.0 - h / 2
            n = np.maximum(np.hypot(rx, ry), 1e-6)
            self._rad = (rx / n, ry / n)
        flow = np.ascontiguousarray(flow, dtype=np.float32)
        if h % 2 == 0 and w % 2 == 0:  # nearest-neighbour halving picks exactly flow[::2, ::2], in C (a strided
            sub = cv2.resize(flow, (w // 2, h // 2), interpolation=cv2.INTER_NEAREST)  # numpy copy is 5x slower)
        else:
            sub = flow[::2, ::2]
        u, v = cv2.split(sub)  # contiguous channels: no hidden copies in the calls below
        self.rows["sx"].append(cv2.mean(u)[0] * s)
        self.rows["sy"].append(cv2.mean(v)[0] * s)
        self.rows["srad"].append(cv2.mean(u * self._rad[0] + v * self._rad[1])[0] * s)
        self.rows["speed"].append(cv2.mean(cv2.magnitude(u, v))[0] * s)
        G = self.GRID  # cell means by area resampling (C speed; equal to the block mean when G divides the size)
        cell = cv2.resize(flow, (G, G), interpolation=cv2.INTER_AREA) * s
        self.rows["grid"].append(cell.astype(np.float32))

    def arrays(self, gap: int = PAIR_GAP) -> dict[str, np.ndarray]:
        out = {k: np.asarray(v, np.float32) for k, v in self.rows.items()}
        if len(out["grid"]) == 0:
            out["grid"] = np.zeros((0, self.GRID, self.GRID, 2), np.float32)
        out["gap"] = np.asarray(gap)
        return out


class HardCutSignal:
    """Mean absolute grey-level difference between consecutive frames (0..1, at 64x64): WorldMark's hard-cut cue,
    shared by both appearance backends."""

    def __init__(self):
        self.diff: list[float] = []
        self.last = None

    def add(self, frame: np.ndarray, gray: np.ndarray | None = None) -> None:
        """Take the next frame (``gray``: its grey level, where the caller already has it)."""
        g = to_gray(frame) if gray is None else gray
        g = cv2.resize(g, (64, 64), interpolation=cv2.INTER_AREA).astype(np.float32)
        self.diff.append(0.0 if self.last is None else float(np.abs(g - self.last).mean() / 255.0))
        self.last = g

    def array(self) -> np.ndarray:
        return np.asarray(self.diff, np.float32)
