"""WorldMemBench static memory: targets given by masks in the conditioning frame, found again at every revisit from
the video alone, scored against a fixed reference from the initial hold V (docs/worldmembench.md).

Feature (classical backend, CPU, no weights): ``TargetExtractor`` reads the record's ``targets.npz`` (masks of the
targets in frame 0 and their kinds: human, object, event). Each target's reference comes from phase V: the mean
colour descriptor inside its mask over V's frames, GrabCut's colour models of the target and its surroundings, and
its silhouette in frame 0 cut with those models. In every revisit phase R_k (its frames and the frame it arrives at)
the target is detected by normalised cross-correlation of its frame-0 template inside a search window (the tracking
backend); on the frame where it is detected best, the colour descriptor inside the mask moved there and its
silhouette (GrabCut initialised from that mask, with the reference's colour models held fixed) are measured, the
silhouette after crop - resize - centre on a common canvas.

Metrics (pure, cheap; ``S_rollout = mean_u (1/K) sum_k s_{u,k}``; a revisit without a valid observation — the
target not detected, NCC below ``memory_min_match`` — scores 0):
  human_appearance, object_appearance  s = clip(cos(mean descriptor over V, descriptor at R_k), 0, 1)
  object_geometry                      s = IoU of canonical silhouettes (reference vs revisit)
  environment_visible                  s = clip(cos(global appearance of frame 0, of the R_k frame closest in
                                       estimated orientation to frame 0), 0, 1)
  human_identity                       unavailable (needs ArcFace, not packaged here)
  depth_spearman, spherical_reconstruction  learned backend: Depth Anything at frame 0 and at the revisit frames
                                       (``memory_depth``); unavailable under classical (rotation-only revisits carry
                                       no parallax)
Under ``--backend learned`` the appearance descriptor is DINOv2 patch tokens pooled inside the mask, and silhouettes
are SAM2's masks prompted with the target's box (at the reference and at the revisit where it was detected).
Per-revisit values and the orientation errors are kept in the detail for the decay and return-qualified analyses.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from scipy.stats import spearmanr

from ..features import Extractor
from ..score import Score, na

STRIDE = 2  # revisit frames whose orientation is compared (environment): every 2nd
CANVAS = 48  # canonical silhouette canvas (pixels)
SEARCH = 0.25  # template search window: +- this share of the frame around the reference box


def load_targets(folder: Path) -> dict | None:
    p = Path(folder) / "targets.npz"
    if not p.is_file():
        return None
    with np.load(p, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _bbox(m: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(m)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def canonical(mask: np.ndarray, size: int = CANVAS) -> np.ndarray:
    """Crop a silhouette to its tight box, resize keeping the aspect ratio, centre it on a square canvas."""
    out = np.zeros((size, size), bool)
    if not mask.any():
        return out
    x0, y0, x1, y1 = _bbox(mask)
    crop = mask[y0:y1, x0:x1].astype(np.uint8)
    s = (size - 2) / max(crop.shape)
    w, h = max(1, int(round(crop.shape[1] * s))), max(1, int(round(crop.shape[0] * s)))
    r = cv2.resize(crop, (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)
    oy, ox = (size - h) // 2, (size - w) // 2
    out[oy:oy + h, ox:ox + w] = r
    return out


def iou(a: np.ndarray, b: np.ndarray) -> float:
    u = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / u) if u else 0.0


def masked_embedding(frame: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Colour descriptor of the pixels inside the mask: a 12 x 4 x 4 HSV histogram, square-rooted (Hellinger) and
    unit length, so 1 - cos behaves like a distance between colour distributions. Position inside the mask does not
    enter, so a target relocated a few pixels off describes the same. The frame is smoothed (3 x 3 Gaussian: codec
    noise would push pixels across bin edges) and a mask of more than 50 pixels loses its 1-pixel rim (edge pixels
    mix in the background wherever the mask is off by a pixel): on Engine GT revisits this raised human appearance
    0.966 -> 0.979 while a forgetting engine-memory fell 0.343 -> 0.284."""
    m = mask.astype(np.uint8)
    if int(m.sum()) > 50:
        core = cv2.erode(m, np.ones((3, 3), np.uint8))
        if int(core.sum()) >= 20:
            m = core
    hsv = cv2.cvtColor(cv2.GaussianBlur(frame, (3, 3), 0), cv2.COLOR_RGB2HSV)
    h = cv2.calcHist([hsv], [0, 1, 2], m, [12, 4, 4], [0, 180, 0, 256, 0, 256]).reshape(-1)
    v = np.sqrt(h / max(h.sum(), 1e-9))
    return (v / max(np.linalg.norm(v), 1e-12)).astype(np.float32)


def _grabcut_window(frame: np.ndarray, mask: np.ndarray):
    """The GrabCut problem around ``mask``: its eroded core is sure foreground, the rest of it probable foreground, a
    ring around it (the box grown by 30 %) probable background. Returns (BGR sub-image, labels, core, window)."""
    H, W = mask.shape
    x0, y0, x1, y1 = _bbox(mask)
    gx, gy = max(3, int(0.3 * (x1 - x0))), max(3, int(0.3 * (y1 - y0)))
    bx0, by0, bx1, by1 = max(0, x0 - gx), max(0, y0 - gy), min(W, x1 + gx), min(H, y1 + gy)
    sub = np.ascontiguousarray(frame[by0:by1, bx0:bx1, ::-1])  # BGR for OpenCV
    m = mask[by0:by1, bx0:bx1].astype(np.uint8)
    core = cv2.erode(m, np.ones((3, 3), np.uint8), iterations=max(1, min(x1 - x0, y1 - y0) // 8)).astype(bool)
    gc = np.full(sub.shape[:2], cv2.GC_PR_BGD, np.uint8)
    gc[m.astype(bool)] = cv2.GC_PR_FGD
    gc[core] = cv2.GC_FGD
    return sub, gc, core, (bx0, by0, bx1, by1)


def grabcut_models(frame: np.ndarray, mask: np.ndarray, iters: int = 4):
    """The target's and its surroundings' colour models (GrabCut's two GMMs), fitted where ``mask`` is in ``frame``
    (the reference view). None when GrabCut cannot run (a mask without an interior)."""
    sub, gc, _, _ = _grabcut_window(frame, mask)
    if (gc != cv2.GC_PR_BGD).all():
        return None
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    cv2.setRNGSeed(0)
    try:
        cv2.grabCut(sub, gc, None, bgd, fgd, iters, cv2.GC_INIT_WITH_MASK)
    except cv2.error:
        return None
    return bgd, fgd


def grabcut_silhouette(frame: np.ndarray, mask: np.ndarray, models=None, iters: int = 4) -> np.ndarray:
    """The target's silhouette as the image shows it: GrabCut initialised from ``mask`` (see _grabcut_window), the
    component holding the sure core. With ``models`` (from grabcut_models on the reference view) the colour models are
    held fixed, so reference and revisit are cut by the same rule and only what the images show differs (a freshly
    fitted model re-draws the boundary on every frame: ~5 % IoU of noise on identical views of H.264 video); without,
    they are fitted on this frame."""
    H, W = mask.shape
    sub, gc, core, (bx0, by0, bx1, by1) = _grabcut_window(frame, mask)
    if (gc != cv2.GC_PR_BGD).all():
        return mask.copy()
    cv2.setRNGSeed(0)
    try:
        if models is None:
            bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
            cv2.grabCut(sub, gc, None, bgd, fgd, iters, cv2.GC_INIT_WITH_MASK)
        else:
            bgd, fgd = models[0].copy(), models[1].copy()
            cv2.grabCut(sub, gc, None, bgd, fgd, 1, cv2.GC_EVAL_FREEZE_MODEL)
    except cv2.error:
        return mask.copy()
    fg = ((gc == cv2.GC_FGD) | (gc == cv2.GC_PR_FGD)).astype(np.uint8)
    n, lab, stats, _ = cv2.connectedComponentsWithStats(fg, connectivity=8)
    if n > 2:  # keep the component holding the sure core (stray background blobs are not the target)
        keep = np.bincount(lab[core], minlength=n)
        keep[0] = 0
        fg = (lab == int(np.argmax(keep))).astype(np.uint8)
    out = np.zeros((H, W), bool)
    out[by0:by1, bx0:bx1] = fg.astype(bool)
    return out


def revisit_phases(trajectory: dict) -> list[tuple[str, int, int]]:
    """(name, a, b) of every revisit phase R_k: its commands act on frames a..b-1, and frame b is the view they
    arrive at (the return itself), so a revisit is looked for in frames a..b inclusive (see revisit_range)."""
    return [(p["name"], int(p["frames"][0]), int(p["frames"][1])) for p in trajectory.get("phases", [])
            if p["name"].startswith("R") and p["frames"][1] > p["frames"][0]]


def revisit_range(a: int, b: int, n_frames: int) -> range:
    """Frames of a revisit phase [a, b): its own and the frame b it arrives at, when the video has it."""
    return range(a, min(b + 1, n_frames) if n_frames else b)


class TargetExtractor(Extractor):
    """Per target u and revisit phase R_k: the frame where the target is best detected (highest normalised
    cross-correlation of its frame-0 template inside the search window), its match score, the appearance cosine to
    the V reference inside the mask moved there, and the IoU of canonical silhouettes (reference vs revisit)."""

    name = "targets"
    version = "8"
    backend = "classical"
    max_side = 256

    def start(self, rec):
        super().start(rec)
        self.targets = load_targets(rec.dir)
        self.phases = revisit_phases(rec.trajectory)
        v = next((p for p in rec.trajectory.get("phases", []) if p["name"] == "V"), None)
        self.v_range = (int(v["frames"][0]), int(v["frames"][1])) if v else (0, 1)
        self.ref = None
        self.best: dict = {}  # (u, k) -> (score, frame index, frame crop, moved mask crop, offset)

    def _setup(self, frame):
        H, W = frame.shape[:2]
        self.masks = [cv2.resize(m.astype(np.uint8), (W, H), interpolation=cv2.INTER_NEAREST).astype(bool)
                      for m in self.targets["masks"]]
        self.boxes = [_bbox(m) if m.any() else None for m in self.masks]
        self.templates = [frame[b[1]:b[3], b[0]:b[2]].copy() if b else None for b in self.boxes]
        if self.SEGMENTATION:
            self.models = [grabcut_models(frame, m) if m.any() and self.SEGMENTATION == "grabcut" else None
                           for m in self.masks]
            self.ref_sil = [canonical(self.silhouette(frame, m, u)) if m.any() else None
                            for u, m in enumerate(self.masks)]
        self.v_emb = [[] for _ in self.masks]
        self.ref = True

    def _phase(self, i):
        n = self.rec.n_frames
        for k, (_, a, b) in enumerate(self.phases):
            if i in revisit_range(a, b, n):
                return k
        return None

    def needs_frame(self, i):
        return self.targets is not None and len(self.targets["masks"]) > 0

    def update(self, i, frame):
        if frame is None or self.targets is None or len(self.targets["masks"]) == 0:
            return
        if self.ref is None:
            self._setup(frame)
        if self.v_range[0] <= i < max(self.v_range[1], 1):
            for u, e in enumerate(self.embed(frame, self.masks)):
                if e is not None:
                    self.v_emb[u].append(e)
        k = self._phase(i)
        if k is None:
            return
        H, W = frame.shape[:2]
        for u, (b, tpl) in enumerate(zip(self.boxes, self.templates)):
            if b is None:
                continue
            sx, sy = int(SEARCH * W), int(SEARCH * H)
            x0, y0 = max(0, b[0] - sx), max(0, b[1] - sy)
            x1, y1 = min(W, b[2] + sx), min(H, b[3] + sy)
            win = frame[y0:y1, x0:x1]
            if win.shape[0] < tpl.shape[0] or win.shape[1] < tpl.shape[1]:
                continue
            _, score, _, loc = cv2.minMaxLoc(cv2.matchTemplate(win, tpl, cv2.TM_CCOEFF_NORMED))
            if np.isfinite(score) and score > self.best.get((u, k), (-2.0,))[0]:
                self.best[(u, k)] = (float(score), i, frame.copy(), (x0 + loc[0] - b[0], y0 + loc[1] - b[1]))

    #: how silhouettes are cut for object geometry ("grabcut" here; the learned backend: "sam2"; None: not cut)
    SEGMENTATION: str | None = "grabcut"

    def silhouette(self, frame: np.ndarray, mask: np.ndarray, u: int) -> np.ndarray:
        """Target u's silhouette in ``frame`` around ``mask`` (GrabCut with the reference's colour models)."""
        return grabcut_silhouette(frame, mask, self.models[u])

    def embed(self, frame: np.ndarray, masks: list) -> list:
        """Appearance descriptor inside each mask (None for an empty mask): the colour descriptor here; the learned
        backend pools DINOv2 patch tokens instead."""
        return [masked_embedding(frame, m) if m.any() else None for m in masks]

    def _moved(self, u, d):
        m = self.masks[u]
        H, W = m.shape
        out = np.zeros_like(m)
        ys, xs = np.nonzero(m)
        ys, xs = ys + d[1], xs + d[0]
        ok = (ys >= 0) & (ys < H) & (xs >= 0) & (xs < W)
        out[ys[ok], xs[ok]] = True
        return out

    def finish(self):
        if self.targets is None or self.ref is None:
            z = np.zeros((0, len(self.phases)))
            return {"n_targets": np.asarray(0), "kinds": np.zeros(0, "U8"), "score": z, "cos": z, "iou": z,
                    "frame": z.astype(np.int32), "phases": np.asarray([p[0] for p in self.phases], "U8")}
        U, K = len(self.masks), len(self.phases)
        score, cos, io, frame = np.zeros((U, K)), np.zeros((U, K)), np.zeros((U, K)), np.full((U, K), -1, np.int32)
        for u in range(U):
            ref = np.mean(self.v_emb[u], axis=0) if self.v_emb[u] else None
            for k in range(K):
                if (u, k) not in self.best or ref is None:
                    continue
                sc, i, img, d = self.best[(u, k)]
                moved = self._moved(u, d)
                if not moved.any():
                    continue
                score[u, k], frame[u, k] = sc, i
                r = ref / max(np.linalg.norm(ref), 1e-12)
                cos[u, k] = float(np.dot(r, self.embed(img, [moved])[0]))
                io[u, k] = iou(canonical(self.silhouette(img, moved, u)), self.ref_sil[u]) \
                    if self.SEGMENTATION else np.nan
        return {"n_targets": np.asarray(U), "kinds": np.asarray(self.targets["kinds"]).astype("U8"),
                "score": score, "cos": cos, "iou": io, "frame": frame,
                "phases": np.asarray([p[0] for p in self.phases], "U8"),
                "segmentation": np.asarray(self.SEGMENTATION or "", "U8")}


# ---------------------------------------------------------------------------------------------------- metrics
def orientations(feat: dict, n_frames: int) -> np.ndarray | None:
    """Estimated camera-to-world rotation of every frame relative to frame 0, chained from the pose feature's
    frame j -> j+gap rotations (``x_b = R x_a``, so the camera turns by R^T); frames between hold the last
    estimate. None when too many pairs could not be estimated for the chain to mean anything."""
    P = feat.get("poses")
    if P is None or len(P.get("R", ())) == 0:
        return None
    gap = int(P.get("gap", 2))
    idx = list(range(0, len(P["R"]), gap))
    if np.mean([bool(P["valid"][j]) for j in idx]) < 0.8:
        return None
    R = np.eye(3)
    out = np.repeat(np.eye(3)[None], n_frames, axis=0)
    for j in idx:
        if P["valid"][j]:
            R = R @ np.asarray(P["R"][j]).T
        out[j + gap: j + 2 * gap] = R
    return out


def _angle_deg(R: np.ndarray) -> np.ndarray:
    c = (np.trace(R, axis1=-2, axis2=-1) - 1) / 2
    return np.degrees(np.arccos(np.clip(c, -1, 1)))


def revisit_frames(feat: dict, rec: dict) -> list[dict]:
    """Per revisit phase: the analysed frame closest in estimated orientation to frame 0, with its return error
    and the phase's preceding departure angle. A trajectory that never turns (the FRBL translation square) returns
    by position, which orientation cannot tell: its revisit frame is the one the phase arrives at."""
    traj = rec["trajectory"]
    phases = revisit_phases(traj)
    n = int(traj.get("n_frames", 0)) or max((b for _, _, b in phases), default=0)
    O = orientations(feat, n)
    turns = any(str(s.get("look", "idle")) != "idle" for s in traj.get("segments", [])) or not traj.get("segments")
    out = []
    prev_end = 0
    for name, a, b in phases:
        r = revisit_range(a, b, n)
        frames = list(range(r.start, r.stop, STRIDE))
        if frames and frames[-1] != r.stop - 1:
            frames.append(r.stop - 1)  # the arrival view is always among them
        if not frames:
            continue
        if O is not None and not turns:
            dep = float(_angle_deg(O[prev_end:a]).max()) if a > prev_end else 0.0
            out.append({"phase": name, "frame": frames[-1], "return_err_deg": float(_angle_deg(O[frames[-1]])),
                        "departure_deg": dep, "frames": frames, "errs": None, "by": "arrival (no rotation)"})
        elif O is not None:
            err = _angle_deg(O[frames])
            dep = float(_angle_deg(O[prev_end:a]).max()) if a > prev_end else 0.0
            best = frames[int(np.lexsort((-np.asarray(frames), np.round(err, 3)))[0])]
            out.append({"phase": name, "frame": best, "return_err_deg": float(_angle_deg(O[best])),
                        "departure_deg": dep, "frames": frames, "errs": [float(e) for e in err]})
        else:  # no orientation estimate: the phase's last analysed frame (loops end where they started)
            out.append({"phase": name, "frame": frames[-1], "return_err_deg": None, "departure_deg": None,
                        "frames": frames, "errs": None})
        prev_end = b
    return out


def static_memory_scores(feat: dict, rec: dict, backend: str, P: dict) -> dict:
    """Scores (value, reason, detail) of the static memory metrics for one record."""
    out = {}
    T = feat.get("targets")
    revs = revisit_frames(feat, rec)
    if not revs:
        reason = "no revisit phase (R_k) in this trajectory"
        return {m: na(reason) for m in ("human_appearance", "object_appearance", "object_geometry",
                                        "environment_visible", "human_identity", "depth_spearman",
                                        "spherical_reconstruction")}
    # environment: global appearance of frame 0 vs the revisit frame
    emb = feat.get("appearance", {}).get("emb")
    if emb is not None and len(emb):
        vals = [max(0.0, float(np.dot(emb[0], emb[min(r["frame"], len(emb) - 1)]))) for r in revs]
        slim = [{k: r[k] for k in ("phase", "frame", "return_err_deg", "departure_deg")} for r in revs]
        out["environment_visible"] = Score(float(np.mean(vals)), detail={"per_revisit": vals, "revisits": slim})
    else:
        out["environment_visible"] = na("no appearance feature")
    for metric, kinds, col in (("human_appearance", ("human",), "cos"), ("object_appearance", ("object",), "cos"),
                               ("object_geometry", ("object",), "iou")):
        if metric == "object_geometry" and T is not None and not str(T.get("segmentation", "grabcut")):
            out[metric] = na("the targets feature cut no silhouettes (no segmentation model)")
            continue
        if T is None or int(T["n_targets"]) == 0:
            out[metric] = na("the record has no targets (targets.npz with masks in the conditioning frame)")
            continue
        us = [u for u, k in enumerate(T["kinds"]) if str(k) in kinds]
        if not us:
            out[metric] = na(f"no {'/'.join(kinds)} target in the conditioning frame")
            continue
        per_u = []
        for u in us:  # a revisit without a valid observation (target not found) scores 0
            ok = T["score"][u] >= P["memory_min_match"]
            per_u.append(np.where(ok, np.clip(T[col][u], 0.0, 1.0), 0.0).tolist())
        per_rev = np.mean(per_u, axis=0).tolist()
        out[metric] = Score(float(np.mean(per_u)), detail={"targets": len(us), "per_revisit": per_rev})
    out["human_identity"] = na("face identity needs ArcFace: no honest classical stand-in") if backend == "classical" \
        else na("ArcFace is not packaged in this build")
    D = feat.get("memory_depth")
    if backend == "classical" or D is None:
        why = "depth at revisits needs a depth model: rotation-only revisits carry no parallax for classical depth"
        out["depth_spearman"] = na(why)
        out["spherical_reconstruction"] = na(why)
    else:
        out.update(depth_memory_scores(D, revs, feat, rec, P))
    return out


def _nearest_depth(D: dict, frame: int):
    fr = np.asarray(D["frame"])
    if len(fr) == 0:
        return None, None
    j = int(np.argmin(np.abs(fr - frame)))
    return int(fr[j]), np.asarray(D["depth"][j], np.float64)


def depth_memory_scores(D: dict, revs: list[dict], feat: dict, rec: dict, P: dict) -> dict:
    """Environment Depth Spearman and Spherical Reconstruction Score from the ``memory_depth`` feature (relative
    inverse depth on a grid at frame 0 and at revisit frames), at each revisit's frame (closest in estimated
    orientation to frame 0, as Environment Visible). A revisit without depth near its frame scores 0."""
    f0, ref = _nearest_depth(D, 0)
    if ref is None or f0 != 0:
        return {m: na("no depth of the conditioning frame") for m in ("depth_spearman", "spherical_reconstruction")}
    n = int(rec["trajectory"].get("n_frames", 0)) or int(max(D["frame"])) + 1
    O = orientations(feat, n)
    K = np.asarray(D["K"], np.float64)
    rho, sph, used = [], [], []
    for r in revs:
        fk, dk = _nearest_depth(D, r["frame"])
        if dk is None or abs(fk - r["frame"]) > int(P["memory_depth_max_gap"]):
            rho.append(0.0)
            sph.append(0.0)
            used.append(None)
            continue
        c = spearmanr(ref.ravel(), dk.ravel()).statistic
        rho.append(float(np.clip(c, 0.0, 1.0)) if np.isfinite(c) else 0.0)
        Rk = np.eye(3) if O is None else O[min(fk, len(O) - 1)]
        sph.append(spherical_score(ref, np.eye(3), dk, Rk, K, P))
        used.append(fk)
    det = {"frames": used, "orientation": "estimated" if O is not None else "assumed returned"}
    return {"depth_spearman": Score(float(np.mean(rho)), detail={**det, "per_revisit": rho}),
            "spherical_reconstruction": Score(float(np.mean(sph)), detail={**det, "per_revisit": sph})}


def spherical_score(disp_a: np.ndarray, R_a: np.ndarray, disp_b: np.ndarray, R_b: np.ndarray, K: np.ndarray,
                    P: dict) -> float:
    """Spherical Reconstruction Score of two views (METRICS.md): each grid cell's ray (camera-to-world ``R``) is
    binned on an azimuth x elevation grid and keeps its nearest log-range (range = 1 / relative inverse depth);
    global scale is removed with delta = median over common bins of (H_b - G_b); a bin seen by only one view counts
    as a missing or extra surface (0), a common bin scores max(0, 1 - |H_b - G_b - delta| / tol). Mean over the
    union of occupied bins, in [0, 1]."""
    bins = int(P["spherical_bins"])
    tol = float(P["spherical_log_tol"])

    def grid(disp, R):
        h, w = disp.shape
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
        rays = np.stack([xs + 0.5, ys + 0.5, np.ones_like(xs)], -1).reshape(-1, 3) @ np.linalg.inv(K).T
        rays = rays @ R.T
        rays /= np.linalg.norm(rays, axis=1, keepdims=True)
        az = np.arctan2(rays[:, 0], rays[:, 2])
        el = np.arcsin(np.clip(-rays[:, 1], -1, 1))
        ia = np.clip(((az + np.pi) / (2 * np.pi) * 2 * bins).astype(int), 0, 2 * bins - 1)
        ie = np.clip(((el + np.pi / 2) / np.pi * bins).astype(int), 0, bins - 1)
        logr = -np.log(np.maximum(disp.ravel(), 1e-6))
        out = {}
        for b, v in zip(zip(ia.tolist(), ie.tolist()), logr.tolist()):
            if b not in out or v < out[b]:
                out[b] = v
        return out

    A, B = grid(disp_a, R_a), grid(disp_b, R_b)
    union = set(A) | set(B)
    common = sorted(set(A) & set(B))
    if not union or not common:
        return 0.0
    delta = float(np.median([A[b] - B[b] for b in common]))
    s = sum(max(0.0, 1.0 - abs(A[b] - B[b] - delta) / tol) for b in common)
    return float(s / len(union))


def analyses(samples: list[dict]) -> dict:
    """WorldMemBench analyses over a run: per-revisit decay R1..Rk under LRLRLR, the LRUD-vs-LRLR cross-axis
    penalty, and return-qualified subsets (departure >= 30 deg, return within 30/15/5 deg)."""
    def per_rev(s, m="environment_visible"):
        return ((s.get("detail") or {}).get(m) or {}).get("per_revisit")

    out = {}
    by_traj: dict[str, list] = {}
    for s in samples:
        t = (s.get("tags") or {}).get("trajectory")
        v = per_rev(s, "object_appearance") or per_rev(s, "human_appearance") or per_rev(s)
        if t and v:
            by_traj.setdefault(t, []).append(v)
    if by_traj.get("LRLRLR"):
        k = min(len(v) for v in by_traj["LRLRLR"])
        out["decay_LRLRLR"] = [float(np.mean([v[i] for v in by_traj["LRLRLR"]])) for i in range(k)]
    if by_traj.get("LRUD") and by_traj.get("LRLR"):
        def drop(vs):
            vs = [v for v in vs if len(v) >= 2]
            return float(np.mean([v[0] - v[1] for v in vs])) if vs else None

        a, b = drop(by_traj["LRUD"]), drop(by_traj["LRLR"])
        out["cross_axis_penalty"] = None if a is None or b is None else a - b
    subsets = {}
    for tol in (30, 15, 5):
        vals = []
        for s in samples:
            d = (s.get("detail") or {}).get("environment_visible") or {}
            for r, v in zip(d.get("revisits", []), d.get("per_revisit", [])):
                if r.get("departure_deg") is not None and r["departure_deg"] >= 30 and r["return_err_deg"] <= tol:
                    vals.append(v)
        subsets[f"return_within_{tol}deg"] = {"n": len(vals), "environment_visible": float(np.mean(vals)) if vals else None}
    out["return_qualified"] = subsets
    return out


__all__ = ["TargetExtractor", "static_memory_scores", "analyses", "canonical", "iou", "masked_embedding",
           "grabcut_silhouette", "revisit_frames", "orientations", "load_targets"]
