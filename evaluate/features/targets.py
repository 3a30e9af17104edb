"""The ``targets`` feature (WorldMemBench static memory, docs/worldmembench.md): each target of the record's
``targets.npz`` found again at every revisit from the video alone, and its appearance and silhouette measured there.

Classical backend (``TargetExtractor``, CPU, no weights): each target's reference comes from phase V (the mean colour
descriptor inside its mask over V's frames, GrabCut's colour models, its silhouette in frame 0); in every revisit
phase R_k the target is detected by normalised cross-correlation of its frame-0 template inside a search window; on
the frame where it is detected best the colour descriptor inside the mask moved there and its silhouette are
measured. Learned backend (``LearnedTargets``): the same detection, DINOv2 patch tokens inside the mask and SAM2
silhouettes (``TrackedTargets`` in tracked_targets.py tracks the targets with SAM2 video instead). The metrics that
read this feature live in worldmembench/static.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

from worldgate.generate.record_files import TARGETS, check_record_file, read_record_array

from .boxes import bbox, canonical, iou
from .core import Extractor
from .models.catalogue import DINOV2_ID, SAM2_ID, HubModels, load_or_explain, shared_model
from .models.loaders import IMAGENET_MEAN, IMAGENET_STD, require_torch, resolve_device, to_tensor

SEARCH = 0.25  # template search window: +- this share of the frame around the reference box


def load_targets(folder: Path) -> dict | None:
    p = Path(folder) / TARGETS
    if not check_record_file(p, required=False):  # a link or a FIFO is refused, never read
        return None
    return read_record_array(p)



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
    x0, y0, x1, y1 = bbox(mask)
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


def departure_phases(trajectory: dict, revisits: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    """Per revisit R_k, the frames of its departure D_k (empty where the trajectory names none)."""
    ph = {p["name"]: (int(p["frames"][0]), int(p["frames"][1])) for p in trajectory.get("phases", [])}
    return [ph.get("D" + name[1:], (0, 0)) for name, _, _ in revisits]


def revisit_range(a: int, b: int, n_frames: int) -> range:
    """Frames of a revisit phase [a, b): its own and the frame b it arrives at, when the video has it."""
    return range(a, min(b + 1, n_frames) if n_frames else b)


class TargetExtractor(Extractor):
    """Per target u and revisit phase R_k: the frame where the target is best detected (highest normalised
    cross-correlation of its frame-0 template inside the search window), its match score, the appearance cosine to
    the V reference inside the mask moved there, and the IoU of canonical silhouettes (reference vs revisit)."""

    name = "targets"
    version = "9"
    backend = "classical"
    max_side = 256

    def start(self, rec):
        super().start(rec)
        self.targets = load_targets(rec.dir)
        self.phases = revisit_phases(rec.trajectory)
        self.departures = departure_phases(rec.trajectory, self.phases)
        v = next((p for p in rec.trajectory.get("phases", []) if p["name"] == "V"), None)
        self.v_range = (int(v["frames"][0]), int(v["frames"][1])) if v else (0, 1)
        self.ref = None
        self.best: dict = {}  # (u, k) -> (score, frame index, frame crop, moved mask crop, offset)
        self.dep: dict = {}  # (u, k) -> the lowest best-match score of target u over departure D_k's frames

    def _setup(self, frame):
        H, W = frame.shape[:2]
        self.masks = [cv2.resize(m.astype(np.uint8), (W, H), interpolation=cv2.INTER_NEAREST).astype(bool)
                      for m in self.targets["masks"]]
        self.boxes = [bbox(m) if m.any() else None for m in self.masks]
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

    def _departure(self, i):
        for k, (a, b) in enumerate(self.departures):
            if a <= i < b:
                return k
        return None

    def _match(self, frame, u):
        """Target u's best normalised cross-correlation in its search window and where (None: window too small)."""
        b, tpl = self.boxes[u], self.templates[u]
        H, W = frame.shape[:2]
        sx, sy = int(SEARCH * W), int(SEARCH * H)
        x0, y0 = max(0, b[0] - sx), max(0, b[1] - sy)
        x1, y1 = min(W, b[2] + sx), min(H, b[3] + sy)
        win = frame[y0:y1, x0:x1]
        if win.shape[0] < tpl.shape[0] or win.shape[1] < tpl.shape[1]:
            return None
        _, score, _, loc = cv2.minMaxLoc(cv2.matchTemplate(win, tpl, cv2.TM_CCOEFF_NORMED))
        return (float(score) if np.isfinite(score) else -1.0), (x0 + loc[0] - b[0], y0 + loc[1] - b[1])

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
        j = self._departure(i)
        if j is not None:  # departure evidence: the tracker loses the target at some frame of D_k
            for u, b in enumerate(self.boxes):
                m = self._match(frame, u) if b is not None else None
                sc = -1.0 if m is None else m[0]
                self.dep[(u, j)] = min(sc, self.dep.get((u, j), 2.0))
        k = self._phase(i)
        if k is None:
            return
        for u, b in enumerate(self.boxes):
            if b is None:
                continue
            m = self._match(frame, u)
            if m is None:
                continue
            score, d = m
            if score > -1.0 and score > self.best.get((u, k), (-2.0,))[0]:
                self.best[(u, k)] = (score, i, frame.copy(), d)

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
                    "frame": z.astype(np.int32), "phases": np.asarray([p[0] for p in self.phases], "U8"),
                    "departure_score": z}
        return self.scored_revisits()

    def revisit_mask(self, u: int, found) -> np.ndarray:
        """Target u's mask at the revisit frame it was found best in (``found``: its ``self.best`` entry): the
        frame-0 mask moved by the template's offset here; the tracking backend keeps the tracked mask itself."""
        return self._moved(u, found[3])

    def revisit_iou(self, u: int, img: np.ndarray, mask: np.ndarray) -> float:
        """Object geometry at a revisit: IoU of canonical silhouettes, reference vs revisit (NaN: none cut)."""
        return iou(canonical(self.silhouette(img, mask, u)), self.ref_sil[u]) if self.SEGMENTATION else np.nan

    def revisit_extra(self, u: int, k: int, img: np.ndarray, mask: np.ndarray) -> None:
        """Per-revisit measures a backend adds (the tracking backend: ArcFace identity)."""

    def scored_revisits(self) -> dict:
        """Per target u and revisit k, from where it was found best: match score, frame, appearance cosine to the V
        reference inside its mask there and object-geometry IoU; the one loop both target backends score with."""
        U, K = len(self.masks), len(self.phases)
        score, cos, io, frame = np.zeros((U, K)), np.zeros((U, K)), np.zeros((U, K)), np.full((U, K), -1, np.int32)
        # per target and revisit k: the lowest match over the departure before R_k (NaN: no departure frames seen)
        dep = np.array([[self.dep.get((u, k), np.nan) for k in range(K)] for u in range(U)], np.float64).reshape(U, K)
        for u in range(U):
            ref = np.mean(self.v_emb[u], axis=0) if self.v_emb[u] else None
            for k in range(K):
                if (u, k) not in self.best or ref is None:
                    continue
                found = self.best[(u, k)]
                sc, i, img = found[:3]
                mask = self.revisit_mask(u, found)
                if not mask.any():
                    continue
                score[u, k], frame[u, k] = sc, i
                r = ref / max(np.linalg.norm(ref), 1e-12)
                cos[u, k] = float(np.dot(r, self.embed(img, [mask])[0]))
                io[u, k] = self.revisit_iou(u, img, mask)
                self.revisit_extra(u, k, img, mask)
        return {"n_targets": np.asarray(U), "kinds": np.asarray(self.targets["kinds"]).astype("U8"),
                "score": score, "cos": cos, "iou": io, "frame": frame,
                "phases": np.asarray([p[0] for p in self.phases], "U8"), "departure_score": dep,
                "segmentation": np.asarray(self.SEGMENTATION or "", "U8")}



def memory_depth_frames(rec, stride: int) -> set[int]:
    """The frames whose depth Depth Spearman and the Spherical Reconstruction Score compare: frame 0 and, in every
    revisit phase, every ``stride``-th frame and the arrival frame (none at all for a record without revisits, or for
    a case of a WorldMemBench family whose metrics do not read it: only Environment cases are scored on depth)."""
    fam = (((rec.meta or {}).get("case") or {}).get("tags") or {}).get("family") if isinstance(rec.meta, dict) else None
    if fam in ("human", "object", "dynamic"):
        return set()
    n = rec.n_frames or 10**9
    keep = set()
    for _, a, b in revisit_phases(rec.trajectory):
        r = revisit_range(a, b, rec.n_frames)
        keep.update(range(r.start, r.stop, stride))
        keep.add(r.stop - 1)
    return {0} | {i for i in keep if 0 <= i < n} if keep else set()



class LearnedTargets(HubModels, TargetExtractor):
    """WorldMemBench targets under the learned backend: found at each revisit as the classical extractor finds them
    (template detection in a search window; evaluate/worldmembench/static.py), described by DINOv2 patch tokens inside the mask
    (L2-normalised tokens weighted by the mask's share of each patch, re-normalised; METRICS.md "DINOv2 features inside
    the person mask"), and cut out by SAM2 prompted with the target's box (object geometry), at the reference and at
    the revisit frame where it was detected. SAM2's input is the frame resized to 1024 x 1024 with ImageNet
    normalisation (its processor's recipe, done here so both torch builds run it); of its three masks the one with
    the best predicted IoU is kept, upsampled to the frame and thresholded at 0."""

    name = "targets"
    version = "2"
    backend = "learned"
    max_side = 256
    SAM_SIZE = 1024
    SEGMENTATION = "sam2"

    def __init__(self, model=None, hf_id: str = DINOV2_ID, size: int = 224, device: str = "auto", segmenter=None,
                 sam_id: str = SAM2_ID):
        self.model, self.hf_id, self.size, self.device = model, hf_id, size, resolve_device(device)
        self.segmenter, self.sam_id = segmenter, sam_id

    def silhouette(self, frame: np.ndarray, mask: np.ndarray, u: int) -> np.ndarray:
        return self.segment(frame, mask)

    def _sam(self):
        if self.segmenter is None:
            from transformers import Sam2Model

            self.segmenter = load_or_explain("segmentation", self.sam_id, lambda: Sam2Model.from_pretrained(self.sam_id))
        return self.segmenter.eval().to(self.device)

    def segment(self, frame: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """SAM2's mask of the thing in ``mask``'s bounding box."""
        torch = require_torch()
        H, W = mask.shape
        x0, y0, x1, y1 = bbox(mask)
        S = self.SAM_SIZE
        x = to_tensor(frame, (S, S), IMAGENET_MEAN, IMAGENET_STD, self.device)
        box = torch.tensor([[[x0 * S / W, y0 * S / H, x1 * S / W, y1 * S / H]]], dtype=torch.float32,
                           device=self.device)
        with torch.inference_mode():
            out = self._sam()(pixel_values=x, input_boxes=box, multimask_output=True)
        best = int(out.iou_scores[0, 0].argmax())
        low = out.pred_masks[0, 0, best].float().cpu().numpy()
        return cv2.resize(low, (W, H), interpolation=cv2.INTER_LINEAR) > 0

    def _model(self):
        if self.model is None:
            self.model = shared_model("targets", "Dinov2Model", self.hf_id)
        return self.model.eval().to(self.device)

    def embed(self, frame: np.ndarray, masks: list) -> list:
        torch = require_torch()
        if not any(m.any() for m in masks):
            return [None] * len(masks)
        x = to_tensor(frame, (self.size, self.size), IMAGENET_MEAN, IMAGENET_STD, self.device)
        model = self._model()
        with torch.inference_mode():
            tok = model(pixel_values=x).last_hidden_state[0, 1:].float()
            tok = torch.nn.functional.normalize(tok, dim=-1).cpu().numpy()
        g = int(round(math.sqrt(tok.shape[0])))
        out = []
        for m in masks:
            if not m.any():
                out.append(None)
                continue
            w = cv2.resize(m.astype(np.float32), (g, g), interpolation=cv2.INTER_AREA).reshape(-1)
            v = (w[:, None] * tok).sum(0) / max(float(w.sum()), 1e-9)
            out.append((v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32))
        return out

    def config(self):
        return {**super().config(), "model": self.hf_id, "size": self.size, "detection": "template NCC",
                "segmentation": self.sam_id}
