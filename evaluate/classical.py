"""Classical CPU feature extractors (OpenCV, no weights). Every number they produce is labelled ``classical``.

- ``flow``: OpenCV DIS dense optical flow between frames i and i+2 (WorldMark's pairing), in pixels of a
  640-pixel-wide reference frame: ``sx`` (mean horizontal flow), ``sy``, ``srad`` (mean flow along unit vectors
  pointing away from the image centre), ``speed`` (mean flow magnitude) and a coarse 8x8 grid of mean flow.
- ``poses``: relative camera motion between frames i and i+2 (i = 0, 2, 4, ...) from tracked corners (Shi-Tomasi + pyramidal LK):
  a rotation-only model (bearings of RANSAC-homography inliers aligned by Kabsch, p1 ~ K R K^-1 p0) when it explains the tracks, else the essential matrix
  (USAC + cheirality). Observed flow is split into its rotation-induced part and the translation (parallax) part,
  which gives WorldMark's translation / rotation amplitudes without a learned depth model.
- ``appearance``: per-frame colour (HSV) + gradient-orientation histograms on a 2x2 grid, Hellinger-mapped and
  L2-normalised (a global appearance embedding; the learned backend uses DINOv2), plus the frame-difference signal
  used to detect hard cuts.
- ``quality``: every 4th frame: Laplacian-variance sharpness, Immerkaer noise sigma, Hasler-Suesstrunk colourfulness.
- ``geometry``: at 1 fps (at most 64 frames): ORB matches between frames 1 s apart and the median Sampson error of
  all mutual ratio-test matches under a RANSAC essential matrix, in focal-normalised units (a consistent static
  world keeps it small; a morphing one does not).
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


def analysis_K(rec, w: int, h: int) -> np.ndarray:
    """3x3 intrinsics at an extractor's analysis size (w, h): the record's native intrinsics scaled, or WorldMark's
    median 66-degree FOV when the record carries none."""
    k = rec.intrinsics
    if k is None:
        f = w / (2 * math.tan(math.radians(66.0) / 2))
        return np.array([[f, 0, (w - 1) / 2], [0, f, (h - 1) / 2], [0, 0, 1.0]])
    s = w / rec.width if rec.width else 1.0
    fx, fy, cx, cy = np.asarray(k, float) * s
    return np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]])


def nearest_rotation(M: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(M)
    R = U @ Vt
    if np.linalg.det(R) < 0:
        R = U @ np.diag([1, 1, -1]) @ Vt
    return R


class PoseExtractor(Extractor):
    name = "poses"
    version = "12"
    backend = "classical"
    max_side = 256
    GAP = 2  # frame i vs i+2 for i = 0, 2, 4, ...: the flow's pairing, chained without overlap
    MAX_CORNERS = 200
    #: LK window (px) and pyramid levels: smaller windows or a third level cost accuracy on Engine drift (its rotation
    #: RPE against the rendered poses' true 0.20: 0.22 here, 0.38 with 11 px, 0.54 with 9 px and three levels)
    LK_WIN = 13
    LK_LEVELS = 2
    LOCKED_MIN_MOTION = 2.0  # px: below this median track motion the camera may be still; keep every track
    LOCKED_FRAC = 0.1  # a track moving less than this share of the median motion is screen-locked
    ROT_ONLY_PX = 0.6  # median track error (px at 256 wide) under which rotation alone explains the motion
    ROT_RATIO = 6.0  # ... or when it is within this factor of the essential model's median Sampson error

    def start(self, rec):
        super().start(rec)
        self.last: np.ndarray | None = None  # grey level of the last frame that starts a pair (i = 0, GAP, 2 GAP, ...)
        self.K = self.Ki = None
        self.width = 0  # analysis width
        self.seen = 0  # frames seen
        self.pairs: dict[int, tuple | None] = {}  # i -> the row of pair (i - GAP) -> i (None: not estimated)

    def needs_frame(self, i):
        return i % self.GAP == 0

    def update(self, i, frame):
        # one row per pair (i - GAP) -> i; only non-overlapping pairs 0->2, 2->4, ... are estimated (they chain without
        # double counting), the others are placeholders, so frames that only they would use are never looked at. The
        # pairs are independent: each is a job the pool may run beside the next (this extractor is the longest).
        self.seen = i + 1
        if i % self.GAP:
            return None
        g = _gray_norm(frame)
        if self.K is None:
            self.K = analysis_K(self.rec, g.shape[1], g.shape[0])
            self.Ki = np.linalg.inv(self.K)
            self.width = g.shape[1]
        a, self.last = self.last, g
        if a is None:
            return None

        def job():
            self.pairs[i] = self._pair(a, g)
        return job

    def _pair(self, a, b):
        p0 = cv2.goodFeaturesToTrack(a, self.MAX_CORNERS, 0.01, 6, blockSize=5)
        ok = p0 is not None and len(p0) >= 12
        if ok:
            p1, st, _ = cv2.calcOpticalFlowPyrLK(a, b, p0, None, winSize=(self.LK_WIN, self.LK_WIN),
                                                 maxLevel=self.LK_LEVELS)
            good = st.reshape(-1) == 1
            p0, p1 = p0.reshape(-1, 2)[good], p1.reshape(-1, 2)[good]
            ok = len(p0) >= 12
        if ok:
            # screen-locked tracks (a third-person avatar, a HUD) do not belong to the scene: drop them when the
            # rest of the image moves
            mv = np.linalg.norm(p1 - p0, axis=1)
            med = float(_median(mv))
            if med > self.LOCKED_MIN_MOTION:
                moving = mv > self.LOCKED_FRAC * med
                if moving.sum() >= 12:
                    p0, p1 = p0[moving], p1[moving]
        return self._estimate(p0, p1) if ok else None

    #: the row of a pair that is not estimated (odd pairs, or too few tracks): identity, marked invalid
    _SKIP = (np.eye(3), np.zeros(3), 0.0, 0.0, 0.0, 0.0, False, 0)
    _ROW = ("R", "t", "rot_amp", "trans_amp", "rot_flow_x", "trans_flow", "valid", "n")

    def _estimate(self, p0, p1):
        K, Ki = self.K, self.Ki
        s = REF_WIDTH / self.width
        h0 = _homogeneous(p0) @ Ki.T  # normalised rays
        # rotation-only model: p1 ~ K R K^-1 p0, R fitted to the bearings (Kabsch), refitted without outliers
        # on the inliers of a RANSAC homography (mistracked points never bend the fit)
        h1 = _homogeneous(p1) @ Ki.T
        # USAC_FAST (PROSAC + local optimisation): ~20 % less pose time than plain RANSAC; rotations agree to 1e-3
        _, inl = cv2.findHomography(p0, p1, cv2.USAC_FAST, 1.0)
        inl = inl.reshape(-1).astype(bool) if inl is not None else np.ones(len(p0), bool)
        Rh = rotation_between(h0[inl], h1[inl]) if inl.sum() >= 8 else rotation_between(h0, h1)
        pr = _project(K, h0 @ Rh.T)
        err_rot = float(_median(np.linalg.norm(pr - p1, axis=1)))
        R, t = Rh, np.zeros(3)
        small = err_rot <= self.ROT_ONLY_PX * self.width / 256.0
        E, mask = (None, None) if small else cv2.findEssentialMat(p0, p1, K, cv2.USAC_FAST, 0.999, 0.75)
        if E is not None and E.shape == (3, 3):
            # model selection: a pure rotation leaves the rotation-only model as good as the essential one (both at
            # the tracking noise); translation leaves parallax that only the essential model explains
            err_e = float(_median(sampson(E, p0, p1, K))) * K[0, 0]
            if err_rot > self.ROT_RATIO * err_e:
                # E's four (R, t): of its twisted pair (180 degrees apart) keep the rotation nearer the homography
                # fit's, then the baseline's sign that puts most essential inliers in front of camera a. Against the
                # poses the Engine and its faults rendered this is more accurate than cv2.recoverPose's triangulated
                # vote (rotation 0.074 vs 0.104 deg per step, baseline flipped in 47 vs 108 of 3152 steps; the vote
                # mistook the twisted rotation under drift and stalls) and costs a tenth of it
                inl_e = mask.reshape(-1).astype(bool) if mask is not None else np.ones(len(p0), bool)
                R1, R2, tu = cv2.decomposeEssentialMat(E)
                R = R1 if np.trace(R1.T @ Rh) >= np.trace(R2.T @ Rh) else R2
                t = tu.reshape(3)
                # depth d0 of each point in camera a from d1 x1 = d0 R x0 + t: d0 |x1 x R x0|^2 = -(x1 x t).(x1 x R x0)
                x1 = h1[inl_e]
                c = np.cross(x1, h0[inl_e] @ R.T)
                d0 = -np.einsum("ij,ij->i", np.cross(x1, t), c)
                if (d0 > 0).sum() < (d0 < 0).sum():
                    t = -t
                pr = _project(K, h0 @ R.T)
        rot_flow = pr - p0  # rotation-induced flow of each track
        # what rotation does not explain is parallax from translation; the rotation-only model has none
        trans_flow = p1 - pr if np.any(t) else np.zeros_like(p1)
        rx = float(_median(rot_flow[:, 0]))
        tx = trans_flow[:, 0] * s
        p95, p5 = _percentiles(np.abs(tx), (95, 5))
        # R, t: x_b = R x_a + t  (camera a -> camera b)
        return (R, t, float(abs(rx) * s), float(p95 - p5 + abs(_median(tx))), float(rx * s),
                float(_median(np.linalg.norm(trans_flow, axis=1)) * s), True, len(p0))

    def finish(self):
        rows = [self.pairs.get(i) or self._SKIP for i in range(self.GAP, self.seen)]
        out = {}
        for k, col in zip(self._ROW, zip(*rows) if rows else [[]] * len(self._ROW)):
            out[k] = np.asarray(col, bool if k == "valid" else (np.int32 if k == "n" else np.float64))
        if len(rows) == 0:
            out["R"] = np.zeros((0, 3, 3))
            out["t"] = np.zeros((0, 3))
        out["K"] = self.K if self.K is not None else np.eye(3)
        out["gap"] = np.asarray(self.GAP)
        out["analysis_width"] = np.asarray(self.width)
        return out


def _median(x: np.ndarray):
    """``np.median`` of a non-empty 1-D array (same value and dtype) without its generic-axis and NaN-check overhead,
    which dominates on the few hundred tracks of a pair."""
    n = len(x)
    k = n // 2
    if n % 2:
        return np.partition(x, k)[k]
    p = np.partition(x, (k - 1, k))
    return (p[k - 1] + p[k]) / 2


def _percentiles(x: np.ndarray, qs: tuple[float, ...]) -> list:
    """``np.percentile(x, qs)`` (linear interpolation; same values, bit for bit) of a non-empty 1-D array, from one
    partial sort and without the generic machinery that costs ten times the arithmetic on a few hundred values."""
    n = len(x)
    at = [((n - 1) * (q / 100), math.floor((n - 1) * (q / 100))) for q in qs]  # (virtual index, index below)
    p = np.partition(x, sorted({min(k + d, n - 1) for _, k in at for d in (0, 1)}))
    out = []
    for v, k in at:
        if v >= n - 1:
            out.append(p[n - 1])
            continue
        a, b = p[k], p[k + 1]
        t, d = v - k, b - a
        out.append(b - d * (1 - t) if t >= 0.5 else a + d * t)  # numpy's _lerp, both branches
    return out


def _homogeneous(p: np.ndarray) -> np.ndarray:
    """(N, 2) points -> (N, 3) float64 with a trailing 1 (``np.c_[p, np.ones(len(p))]``, without its index parsing)."""
    out = np.ones((len(p), 3))
    out[:, :2] = p
    return out


def rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotation R minimising sum |R a_i - b_i|^2 over unit bearings (Kabsch / Wahba)."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return nearest_rotation(b.T @ a)


def _project(K, rays):
    p = rays @ K.T
    return p[:, :2] / p[:, 2:3]


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


class GeometryExtractor(Extractor):
    name = "geometry"
    version = "2"
    backend = "classical"
    max_side = 320
    MAX_FRAMES = 64

    def start(self, rec):
        super().start(rec)
        step = max(1, int(round(rec.fps)))  # 1 fps
        n = rec.n_frames or 10**9
        self.keep = set(list(range(0, n, step))[: self.MAX_FRAMES])
        self.last: tuple[int, np.ndarray, np.ndarray | None] | None = None  # the previous key frame (i, pts, des)
        self.K = None
        self.rows: dict[str, list] = {"err": [], "frame": [], "n": []}
        self.orb = cv2.ORB_create(nfeatures=800, fastThreshold=10)

    def needs_frame(self, i):
        return i in self.keep

    def update(self, i, frame):
        if i in self.keep:
            g = _gray(frame)
            kp, des = self.orb.detectAndCompute(g, None)
            pts = cv2.KeyPoint_convert(kp).reshape(-1, 2) if kp else np.zeros((0, 2), np.float32)
            if self.K is None:
                self.K = analysis_K(self.rec, g.shape[1], g.shape[0])
            # each key frame is matched with the previous one as it arrives (while the video still decodes), not
            # all at the end
            if self.last is not None:
                self._match(self.last, (i, pts, des))
            self.last = (i, pts, des)

    def _match(self, ka, kb):
        (i, pa, da), (_, pb, db) = ka, kb
        K = self.K
        e, n = np.nan, 0
        if da is not None and db is not None and len(da) >= 8 and len(db) >= 8:
            # brute-force Hamming k-NN as arrays (what BFMatcher.knnMatch computes, without a Python object per
            # match): forward 2-NN for the ratio test, backward 1-NN for the mutual check
            d2, j2 = cv2.batchDistance(da, db, cv2.CV_32S, normType=cv2.NORM_HAMMING, K=2)
            j = j2[:, 0]
            q = np.flatnonzero((j >= 0) & (j2[:, 1] >= 0) & (d2[:, 0] < 0.8 * d2[:, 1].astype(np.float64)))
            if len(q):  # mutual: the best match of b's descriptor is this one (asked only of the b's in question)
                js, inv = np.unique(j[q], return_inverse=True)
                _, back = cv2.batchDistance(np.ascontiguousarray(db[js]), da, cv2.CV_32S,
                                            normType=cv2.NORM_HAMMING, K=1)
                q = q[back[inv.reshape(-1), 0] == q]
            n = len(q)
            if n >= 12:
                a = pa[q]
                b = pb[j[q]]
                # USAC (PROSAC sampling + local optimisation): ~2.5x faster than plain RANSAC here and a tighter fit
                # (median Sampson error ~20 % lower on Engine GT and on drift alike, so their ratio is unchanged)
                E, _ = cv2.findEssentialMat(a, b, K, cv2.USAC_ACCURATE, 0.999, 1.0)
                if E is not None and E.shape == (3, 3):
                    e = float(_median(sampson(E, a, b, K)))
        self.rows["err"].append(e)
        self.rows["frame"].append(i)
        self.rows["n"].append(n)

    def finish(self):
        return {"err": np.asarray(self.rows["err"], np.float64), "frame": np.asarray(self.rows["frame"], np.int32),
                "n": np.asarray(self.rows["n"], np.int32)}


def sampson(E, a, b, K):
    """Sampson distance of correspondences under E, in focal-normalised units (pixels / focal)."""
    Ki = np.linalg.inv(K)
    x = _homogeneous(a) @ Ki.T
    y = _homogeneous(b) @ Ki.T
    Ex = x @ E.T
    Ety = y @ E
    num = np.sum(y * Ex, axis=1) ** 2
    den = Ex[:, 0] ** 2 + Ex[:, 1] ** 2 + Ety[:, 0] ** 2 + Ety[:, 1] ** 2
    return np.sqrt(num / np.maximum(den, 1e-18))


CLASSICAL = {
    "flow": FlowExtractor,
    "poses": PoseExtractor,
    "appearance": AppearanceExtractor,
    "quality": QualityExtractor,
    "geometry": GeometryExtractor,
}
