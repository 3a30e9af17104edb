"""The ``events`` feature (WorldMemBench dynamic memory's measured probe, classical backend): per event target of the
record's ``targets.npz`` and frame, how far its region differs from frame 0, measured on the frame registered back
onto frame 0 (``EventExtractor``); the probe's answers and scores are in worldmembench/dynamic.py."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from worldgate.generate.record_files import DYNAMIC, RecordError, check_record_file, read_record_json

from .core import Extractor
from .targets import load_targets


def load_dynamic(folder: Path) -> dict | None:
    p = Path(folder) / DYNAMIC
    try:
        return read_record_json(p) if check_record_file(p, required=False) else None
    except (OSError, RecordError):
        return None


class EventExtractor(Extractor):
    """Per event target and frame: how far its region differs from frame 0 (0..1), measured on the frame warped back
    onto frame 0 by a homography; NaN where less than ``BOX_SEEN`` of the region is in view. The homography is
    chained frame to frame (Shi-Tomasi + LK, USAC) and, while enough of frame 0 is in view, re-fitted directly to
    frame 0's own corners tracked from the chained guess (no drift on return). For the rotations WorldMemBench's
    revisits are made of, a homography is the exact mapping, so the region is followed until it actually leaves the
    frame and picked up as soon as it is back. The rest of the view (outside every event box and the sky) gives
    the registration residual ``rest``."""

    name = "events"
    version = "6"
    backend = "classical"
    max_side = 192
    CORNERS = 200
    MIN_TRACKS = 16
    BOX_SEEN = 0.5  # share of an event box inside the view for its change to be measured (= adapter IN_VIEW)
    REST_SEEN = 0.25  # share of the rest of frame 0 that must be in view for the residual to mean anything
    LOCAL = 0.08  # residual (0-1) of a box's surroundings above which the box is not measured there (misaligned)

    def start(self, rec):
        super().start(rec)

        self.targets = load_targets(rec.dir)
        self.dyn = load_dynamic(rec.dir)
        self.ref = None
        self.rows: list[list[float]] = []
        self.rest: list[float] = []
        self.shift: list[tuple[float, float]] = []

    def _setup(self, frame):
        H, W = frame.shape[:2]
        self.ref = frame.astype(np.float32)
        self.boxes = []
        for item in self.dyn["events"]:
            m = cv2.resize(self.targets["masks"][item["target"]].astype(np.uint8), (W, H),
                           interpolation=cv2.INTER_NEAREST).astype(bool)
            ys, xs = np.nonzero(m)
            x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
            if item["kind"] == "grow":  # the tower grows upward: watch the space above it too
                y0 = max(0, y0 - 3 * (y1 - y0))
            gx, gy = max(2, (x1 - x0) // 4), max(2, (y1 - y0) // 4)
            self.boxes.append((max(0, x0 - gx), max(0, y0 - gy), min(W, x1 + gx), min(H, y1 + gy)))
        self.keep = np.ones((H, W), bool)
        for x0, y0, x1, y1 in self.boxes:
            self.keep[y0:y1, x0:x1] = False
        # each box's surroundings (the box grown by half its size, outside every box): where the registration is
        # checked locally, since a homography misplaces what stands off the dominant plane (parallax)
        self.rings = []
        for x0, y0, x1, y1 in self.boxes:
            gx, gy = max(3, (x1 - x0) // 2), max(3, (y1 - y0) // 2)
            r = np.zeros((H, W), bool)
            r[max(0, y0 - gy):min(H, y1 + gy), max(0, x0 - gx):min(W, x1 + gx)] = True
            self.rings.append(r & self.keep)
        self.keep[: H // 3] = False  # the sky drifts (clouds): judge the ground and the things on it
        self.g0 = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        # frame 0's own corners, away from the events (they change) and the sky (it drifts)
        self.p_ref = cv2.goodFeaturesToTrack(self.g0, 2 * self.CORNERS, 0.01, 5, mask=self.keep.astype(np.uint8),
                                             blockSize=5)
        self.G = np.eye(3)  # frame 0 -> this frame
        self.prev = self.g0
        self.ones = np.full((H, W), 255, np.uint8)
        self.ground = np.zeros((H, W), np.uint8)  # where frame-to-frame corners are taken: not the sky
        self.ground[H // 3:] = 255

    def _step(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """Homography a -> b from the lower two thirds' corners (the sky drifts)."""
        p0 = cv2.goodFeaturesToTrack(a, self.CORNERS, 0.01, 5, mask=self.ground, blockSize=5)
        if p0 is None or len(p0) < self.MIN_TRACKS:
            return None
        p1, st, _ = cv2.calcOpticalFlowPyrLK(a, b, p0, None, winSize=(15, 15), maxLevel=3)
        good = st.reshape(-1) == 1
        if good.sum() < self.MIN_TRACKS:
            return None
        Hm, inl = cv2.findHomography(p0[good], p1[good], cv2.USAC_FAST, 2.0)
        return Hm if Hm is not None and inl is not None and inl.sum() >= self.MIN_TRACKS else None

    def _direct(self, g: np.ndarray, G: np.ndarray) -> np.ndarray | None:
        """Re-fit frame 0 -> g from frame 0's corners, tracked from where ``G`` puts them."""
        if self.p_ref is None:
            return None
        H, W = g.shape
        pred = cv2.perspectiveTransform(self.p_ref, G)
        pr = pred.reshape(-1, 2)
        inside = (pr[:, 0] >= 2) & (pr[:, 0] < W - 2) & (pr[:, 1] >= 2) & (pr[:, 1] < H - 2)
        if inside.sum() < self.MIN_TRACKS:
            return None
        p0 = np.ascontiguousarray(self.p_ref[inside])
        p1, st, _ = cv2.calcOpticalFlowPyrLK(self.g0, g, p0, np.ascontiguousarray(pred[inside]), winSize=(15, 15),
                                             maxLevel=3, flags=cv2.OPTFLOW_USE_INITIAL_FLOW)
        good = st.reshape(-1) == 1
        if good.sum() < self.MIN_TRACKS:
            return None
        Hm, inl = cv2.findHomography(p0[good], p1[good], cv2.USAC_FAST, 2.0)
        return Hm if Hm is not None and inl is not None and inl.sum() >= self.MIN_TRACKS else None

    def needs_frame(self, i):
        return self.targets is not None and bool(self.dyn and self.dyn.get("events"))

    def update(self, i, frame):
        if frame is None or self.targets is None or not self.dyn or not self.dyn.get("events"):
            return
        if self.ref is None:
            self._setup(frame)
        H, W = frame.shape[:2]
        g = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        if i > 0:
            step = self._step(self.prev, g)
            G = step @ self.G if step is not None else self.G
            direct = self._direct(g, G)
            G = direct if direct is not None else G
            if np.all(np.isfinite(G)) and abs(np.linalg.det(G)) > 1e-8:  # a degenerate fit keeps the last mapping
                self.G = G
        self.prev = g
        Ginv = np.linalg.inv(self.G)
        warped = cv2.warpPerspective(frame, Ginv, (W, H), flags=cv2.INTER_LINEAR).astype(np.float32)
        valid = cv2.warpPerspective(self.ones, Ginv, (W, H), flags=cv2.INTER_NEAREST) == 255
        c = cv2.perspectiveTransform(np.array([[[W / 2, H / 2]]], np.float64), self.G).reshape(2)
        self.shift.append((float(c[0] - W / 2), float(c[1] - H / 2)))
        diff = np.abs(self.ref - warped).mean(axis=2)
        row = []
        for (x0, y0, x1, y1), ring in zip(self.boxes, self.rings):
            v = valid[y0:y1, x0:x1]
            rv = ring & valid
            if v.mean() < self.BOX_SEEN or (rv.any() and diff[rv].mean() / 255.0 > self.LOCAL):
                row.append(np.nan)  # out of view, or its surroundings do not line up with frame 0's
                continue
            px = diff[y0:y1, x0:x1][v]  # the changing part of a
            k = max(1, len(px) // 5)  # box (a lamp's glow) is small: the mean of its most changed fifth
            row.append(float(np.partition(px, len(px) - k)[-k:].mean() / 255.0))
        self.rows.append(row)
        keep = self.keep & valid
        if keep.sum() < self.REST_SEEN * max(1, self.keep.sum()):
            self.rest.append(np.nan)
        else:
            self.rest.append(float(diff[keep].mean() / 255.0))

    def finish(self):
        if not self.rows:
            return {"change": np.zeros((0, 0)), "shift": np.zeros((0, 2)), "rest": np.zeros(0)}
        return {"change": np.asarray(self.rows, np.float64).T, "shift": np.asarray(self.shift, np.float64),
                "rest": np.asarray(self.rest, np.float64)}
