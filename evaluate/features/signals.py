"""Classical CPU feature extractors (OpenCV, no weights). Every number they produce is labelled ``classical``.

- ``flow``: OpenCV DIS dense optical flow between frames i and i+2 (WorldMark's pairing), in pixels of a
  640-pixel-wide reference frame: ``sx`` (mean horizontal flow), ``sy``, ``srad`` (mean flow along unit vectors
  pointing away from the image centre), ``speed`` (mean flow magnitude) and a coarse 8x8 grid of mean flow.
- ``appearance``: per-frame colour (HSV) + gradient-orientation histograms on a 2x2 grid, Hellinger-mapped and
  L2-normalised (a global appearance embedding; the learned backend uses DINOv2), plus the frame-difference signal
  used to detect hard cuts.
- ``quality``: every 4th frame: Laplacian-variance sharpness, Immerkaer noise sigma, Hasler-Suesstrunk colourfulness.
Poses and two-view geometry are in ``classical_geometry.py``.
"""

from __future__ import annotations

import functools
import math

import cv2
import numpy as np

from .features import Extractor

REF_WIDTH = 640.0  # flows are reported in pixels of a 640-wide frame (WorldMark runs SEA-RAFT at 432x640)
PAIR_GAP = 2  # frame i vs i+2


def _gray(frame: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)


def _gray_norm(frame: np.ndarray) -> np.ndarray:
    """Grey level with the frame's mean and contrast normalised: motion estimates that survive global flicker."""
    g = _gray(frame)
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


class FlowExtractor(Extractor):
    name = "flow"
    version = "4"
    backend = "classical"
    #: DIS's ultrafast preset estimates patches on a quarter-size image (finest scale 2) of a 256-wide frame; fed a
    #: 128-wide frame one scale finer, it fits the same 64-wide patch grid and skips the full-size pyramid level and
    #: densification: ~35 % less flow time, signals within 1 % (sx/speed correlation 0.9999 with the 256 run)
    max_side = 128
    FINEST_SCALE = 1

    def start(self, rec):
        super().start(rec)
        self.prev: list[np.ndarray] = []
        self.signals = FlowSignals()
        self.dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST)
        self.dis.setFinestScale(self.FINEST_SCALE)

    def update(self, i, frame):
        g = _gray_norm(frame)
        self.prev.append(g)
        if len(self.prev) > PAIR_GAP:
            self.signals.add(self.dis.calc(self.prev.pop(0), g, None))

    def finish(self):
        return self.signals.arrays()



class HardCutSignal:
    """Mean absolute grey-level difference between consecutive frames (0..1, at 64x64): WorldMark's hard-cut cue,
    shared by both appearance backends."""

    def __init__(self):
        self.diff: list[float] = []
        self.last = None

    def add(self, frame: np.ndarray, gray: np.ndarray | None = None) -> None:
        """Take the next frame (``gray``: its grey level, where the caller already has it)."""
        g = _gray(frame) if gray is None else gray
        g = cv2.resize(g, (64, 64), interpolation=cv2.INTER_AREA).astype(np.float32)
        self.diff.append(0.0 if self.last is None else float(np.abs(g - self.last).mean() / 255.0))
        self.last = g

    def array(self) -> np.ndarray:
        return np.asarray(self.diff, np.float32)


class AppearanceExtractor(Extractor):
    name = "appearance"
    version = "1"
    backend = "classical"
    max_side = 128

    def start(self, rec):
        super().start(rec)
        self.emb, self.cuts = [], HardCutSignal()

    def update(self, i, frame):
        g = _gray(frame)  # shared by the embedding and the hard-cut signal
        self.emb.append(appearance_embedding(frame, g))
        self.cuts.add(frame, g)

    def finish(self):
        return {"emb": np.asarray(self.emb, np.float32), "frame_diff": self.cuts.array()}


def appearance_embedding(frame: np.ndarray, gray: np.ndarray | None = None) -> np.ndarray:
    """Colour + texture descriptor of a frame (unit length): HSV histograms and gradient-orientation histograms on a
    2x2 grid, square-rooted (Hellinger) so that 1 - cos behaves like a distance between distributions."""
    hsv = cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)
    g = (_gray(frame) if gray is None else gray).astype(np.float32)
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


class QualityExtractor(Extractor):
    name = "quality"
    version = "1"
    backend = "classical"
    max_side = 512
    STRIDE = 4  # WorldMemBench scores quality on every 4th frame

    def start(self, rec):
        super().start(rec)
        self.rows = {"frame": [], "sharpness": [], "noise": [], "colourfulness": []}

    def needs_frame(self, i):
        return i % self.STRIDE == 0

    def update(self, i, frame):
        if i % self.STRIDE:
            return
        g = _gray(frame).astype(np.float32)
        s = 256.0 / max(g.shape)  # sharpness at a fixed reference scale
        lap = cv2.Laplacian(cv2.resize(g, None, fx=s, fy=s, interpolation=cv2.INTER_AREA) if s < 1 else g, cv2.CV_32F)
        kernel = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float32)
        conv = cv2.filter2D(g, cv2.CV_32F, kernel)
        noise = math.sqrt(math.pi / 2) * float(np.abs(conv[1:-1, 1:-1]).mean()) / 6.0  # Immerkaer (1996)
        f = frame.astype(np.float32)
        rg = f[..., 0] - f[..., 1]
        yb = 0.5 * (f[..., 0] + f[..., 1]) - f[..., 2]
        colourful = float(math.hypot(rg.std(), yb.std()) + 0.3 * math.hypot(rg.mean(), yb.mean()))
        self.rows["frame"].append(i)
        self.rows["sharpness"].append(float(lap.var()))
        self.rows["noise"].append(noise)
        self.rows["colourfulness"].append(colourful)

    def finish(self):
        return {k: np.asarray(v, np.float64) for k, v in self.rows.items()}
