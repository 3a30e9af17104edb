"""Learned feature backends, loaded by Hugging Face id / torchvision as the benchmarks use them.

================  ======================================================  =============================================
feature           model                                                    used for
================  ======================================================  =============================================
``flow``          torchvision RAFT (``raft_large``, C+T+S+K+H weights)     Sx / Srad / speed (WorldMark runs SEA-RAFT,
                                                                           which is not packaged; RAFT is its family)
``depth``         Depth Anything V2 (``depth-anything/Depth-Anything-V2-   the parallax split ``u = a (1/Z) + b`` at 1 fps
                  Small-hf``), relative inverse depth
``appearance``    DINOv2-base (``facebook/dinov2-base``): mean of          local / revisit memory (1 - cos)
                  L2-normalised patch tokens, re-normalised
``aesthetic``     CLIP ViT-L/14 image embeds + a linear aesthetic head     aesthetic quality (LAION predictor on CLIP)
                  (weights given as a safetensors file)
``imaging``       MUSIQ-SPAQ through pyiqa when it is installed            imaging quality (pyiqa is PolyForm-NC and
                                                                           needs torchvision: optional)
``targets``       DINOv2-base in each target's mask; SAM2.1-hiera-large    WorldMemBench human/object appearance and
                  (``facebook/sam2.1-hiera-large``) box-prompted masks     object geometry
``memory_depth``  Depth Anything V2 at frame 0 and the revisit frames     Depth Spearman, Spherical Reconstruction
================  ======================================================  =============================================

Preprocessing is done here (resize + ImageNet / CLIP normalisation) so the exact same code path runs in the
offline tests, which build every model from a tiny config with random weights, and in production. Global memory
(VGGT) and camera following (DA3 / ViPE poses) have no packaged learned backend: under ``--backend learned`` they
are reported unavailable, never filled from another backend.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import cv2
import numpy as np

from .classical import FlowSignals, HardCutSignal
from .classical_geometry import analysis_K
from .features import Extractor, FeatureError
from .worldmembench.static import TargetExtractor, _bbox, revisit_phases, revisit_range

DINOV2_ID = "facebook/dinov2-base"
DEPTH_ID = "depth-anything/Depth-Anything-V2-Small-hf"
SAM2_ID = "facebook/sam2.1-hiera-large"
CLIP_ID = "openai/clip-vit-large-patch14"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is pinned by scripts/setup.sh
        raise FeatureError("the learned backend needs torch: run scripts/setup.sh (it pins the CPU build)") from None
    return torch


_SHARED: dict = {}  # (class name, HF id) -> model: extractors that use the same model share one copy
_SHARED_LOCK = __import__("threading").Lock()


def _shared(kind: str, cls_name: str, hf_id: str):
    """``transformers.<cls_name>.from_pretrained(hf_id)``, loaded once per process: the appearance and targets
    features both run DINOv2, the depth and memory-depth features both Depth Anything, on parallel threads."""
    with _SHARED_LOCK:
        if (cls_name, hf_id) not in _SHARED:
            import transformers

            cls = getattr(transformers, cls_name)
            _SHARED[(cls_name, hf_id)] = _load(kind, hf_id, lambda: cls.from_pretrained(hf_id))
        return _SHARED[(cls_name, hf_id)]


def _load(kind: str, hf_id: str, loader):
    try:
        return loader()
    except (OSError, ValueError) as e:
        raise FeatureError(
            f"cannot load the {kind} model {hf_id!r} ({type(e).__name__}: {str(e).splitlines()[0][:160]}). Fetch it on "
            f"a machine with network access (`hf download {hf_id}`) and point HF_HOME at that cache, "
            f"or use --backend classical"
        ) from None


def _to_tensor(frame: np.ndarray, size: tuple[int, int], mean, std, device="cpu"):
    """uint8 HxWx3 -> normalised 1x3xhxw float tensor at ``size`` = (w, h)."""
    torch = _torch()
    f = cv2.resize(frame, size, interpolation=cv2.INTER_AREA if size[0] < frame.shape[1] else cv2.INTER_CUBIC)
    x = torch.from_numpy(f.astype(np.float32) / 255.0).permute(2, 0, 1)
    m = torch.tensor(mean).view(3, 1, 1)
    s = torch.tensor(std).view(3, 1, 1)
    return ((x - m) / s).unsqueeze(0).to(device)


class LearnedFlow(Extractor):
    """RAFT flow between frames i and i+2 at 432x640-like analysis size (multiples of 8), same signals as classical."""

    name = "flow"
    version = "1"
    backend = "learned"
    max_side = 640
    MIN_SIDE = 128

    def __init__(self, model=None, iters: int = 12, device: str = "cpu"):
        self.model, self.iters, self.device = model, iters, device

    def _model(self):
        if self.model is None:
            def load():
                from torchvision.models.optical_flow import Raft_Large_Weights, raft_large

                return raft_large(weights=Raft_Large_Weights.C_T_SKHT_V2, progress=False)

            self.model = _load("flow", "torchvision raft_large C_T_SKHT_V2", load)
        return self.model.eval().to(self.device)

    def start(self, rec):
        super().start(rec)
        self.prev = []
        self.signals = FlowSignals()

    def update(self, i, frame):
        torch = _torch()
        h, w = frame.shape[:2]
        up = max(1.0, self.MIN_SIDE / min(h, w))  # RAFT's correlation pyramid needs >= 128 px
        h8, w8 = int(math.ceil(h * up / 8)) * 8, int(math.ceil(w * up / 8)) * 8
        x = _to_tensor(frame, (w8, h8), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), self.device)  # RAFT takes [-1, 1]
        self.prev.append(x)
        if len(self.prev) > 2:
            a = self.prev.pop(0)
            with torch.inference_mode():
                flow = self._model()(a, x, num_flow_updates=self.iters)[-1][0].permute(1, 2, 0).cpu().numpy()
            self.signals.add(flow)

    def finish(self):
        return self.signals.arrays()


class LearnedDepth(Extractor):
    """Depth Anything relative inverse depth at 1 fps, pooled on the flow's 8x8 grid."""

    name = "depth"
    version = "1"
    backend = "learned"
    max_side = 518
    GRID = 8

    def __init__(self, model=None, hf_id: str = DEPTH_ID, size: int = 518, device: str = "cpu"):
        self.model, self.hf_id, self.size, self.device = model, hf_id, size, device

    def _model(self):
        if self.model is None:
            self.model = _shared("depth", "DepthAnythingForDepthEstimation", self.hf_id)
        return self.model.eval().to(self.device)

    def start(self, rec):
        super().start(rec)
        self.step = max(1, int(round(rec.fps)))
        self.frames, self.grids = [], []

    def disparity(self, frame: np.ndarray) -> np.ndarray:
        """Depth Anything's relative inverse depth of ``frame`` (longer side at ``size``, sides multiples of 14)."""
        torch = _torch()
        h, w = frame.shape[:2]
        s = self.size / max(h, w)
        size = (max(14, int(round(w * s / 14)) * 14), max(14, int(round(h * s / 14)) * 14))
        x = _to_tensor(frame, size, IMAGENET_MEAN, IMAGENET_STD, self.device)
        with torch.inference_mode():
            return self._model()(pixel_values=x).predicted_depth[0].float().cpu().numpy()

    def update(self, i, frame):
        if i % self.step:
            return
        d = self.disparity(frame)
        G = self.GRID
        hh, ww = (d.shape[0] // G) * G, (d.shape[1] // G) * G
        self.frames.append(i)
        self.grids.append(d[:hh, :ww].reshape(G, hh // G, G, ww // G).mean(axis=(1, 3)).astype(np.float32))

    def finish(self):
        return {"frame": np.asarray(self.frames, np.int32),
                "disparity": np.asarray(self.grids, np.float32).reshape(-1, self.GRID, self.GRID)}


class LearnedAppearance(Extractor):
    """DINOv2 embedding per frame: mean of L2-normalised patch tokens, re-normalised (WorldMark's memory metrics)."""

    name = "appearance"
    version = "1"
    backend = "learned"
    max_side = 448

    def __init__(self, model=None, hf_id: str = DINOV2_ID, size: int = 224, device: str = "cpu"):
        self.model, self.hf_id, self.size, self.device = model, hf_id, size, device

    def _model(self):
        if self.model is None:
            self.model = _shared("appearance", "Dinov2Model", self.hf_id)
        return self.model.eval().to(self.device)

    def start(self, rec):
        super().start(rec)
        self.emb, self.cuts = [], HardCutSignal()

    def update(self, i, frame):
        torch = _torch()
        x = _to_tensor(frame, (self.size, self.size), IMAGENET_MEAN, IMAGENET_STD, self.device)
        with torch.inference_mode():
            tok = self._model()(pixel_values=x).last_hidden_state[0, 1:]  # patch tokens
            tok = torch.nn.functional.normalize(tok.float(), dim=-1).mean(0)
            e = torch.nn.functional.normalize(tok, dim=0).cpu().numpy()
        self.emb.append(e.astype(np.float32))
        self.cuts.add(frame)

    def finish(self):
        return {"emb": np.asarray(self.emb, np.float32), "frame_diff": self.cuts.array()}


class LearnedQuality(Extractor):
    """Every 4th frame: CLIP + linear aesthetic head (1..10 -> [0, 1]) and, with pyiqa, MUSIQ-SPAQ imaging."""

    name = "quality"
    version = "1"
    backend = "learned"
    max_side = 512
    STRIDE = 4

    def __init__(self, clip=None, head=None, hf_id: str = CLIP_ID, head_path: str | None = None, imaging=None,
                 device: str = "cpu"):
        self.clip, self.head, self.hf_id, self.head_path, self.imaging, self.device = clip, head, hf_id, head_path, imaging, device

    def _models(self):
        torch = _torch()
        if self.clip is None:
            from transformers import CLIPVisionModelWithProjection

            self.clip = _load("aesthetic", self.hf_id, lambda: CLIPVisionModelWithProjection.from_pretrained(self.hf_id))
        if self.head is None:
            if not self.head_path:
                raise FeatureError("the aesthetic head needs its weights: pass head_path=FILE.safetensors (a linear "
                                   "layer 'weight' (1, D) and 'bias' (1,) on L2-normalised CLIP image embeds)")
            from safetensors.torch import load_file

            sd = load_file(self.head_path)
            self.head = torch.nn.Linear(sd["weight"].shape[1], 1)
            self.head.load_state_dict(sd)
        if self.imaging is None:
            try:
                import pyiqa  # noqa: F401

                self.imaging = pyiqa.create_metric("musiq-spaq", device=self.device)
            except ImportError:
                self.imaging = False
        return self.clip.eval().to(self.device), self.head.eval().to(self.device)

    def start(self, rec):
        super().start(rec)
        self.rows = {"frame": [], "aesthetic": [], "imaging": []}

    def update(self, i, frame):
        if i % self.STRIDE:
            return
        torch = _torch()
        clip, head = self._models()
        size = clip.config.image_size
        x = _to_tensor(frame, (size, size), CLIP_MEAN, CLIP_STD, self.device)
        with torch.inference_mode():
            e = torch.nn.functional.normalize(clip(pixel_values=x).image_embeds.float(), dim=-1)
            a = float(head(e)[0, 0])
        self.rows["frame"].append(i)
        self.rows["aesthetic"].append(float(np.clip((a - 1.0) / 9.0, 0.0, 1.0)))  # LAION predictor scale 1..10
        if self.imaging:
            t = torch.from_numpy(frame.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
            with torch.inference_mode():
                self.rows["imaging"].append(float(self.imaging(t)) / 100.0)  # MUSIQ-SPAQ is on 0..100
        else:
            self.rows["imaging"].append(math.nan)

    def finish(self):
        return {k: np.asarray(v, np.float64) for k, v in self.rows.items()}


class LearnedTargets(TargetExtractor):
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

    def __init__(self, model=None, hf_id: str = DINOV2_ID, size: int = 224, device: str = "cpu", segmenter=None,
                 sam_id: str = SAM2_ID):
        self.model, self.hf_id, self.size, self.device = model, hf_id, size, device
        self.segmenter, self.sam_id = segmenter, sam_id

    def silhouette(self, frame: np.ndarray, mask: np.ndarray, u: int) -> np.ndarray:
        return self.segment(frame, mask)

    def _sam(self):
        if self.segmenter is None:
            from transformers import Sam2Model

            self.segmenter = _load("segmentation", self.sam_id, lambda: Sam2Model.from_pretrained(self.sam_id))
        return self.segmenter.eval().to(self.device)

    def segment(self, frame: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """SAM2's mask of the thing in ``mask``'s bounding box."""
        torch = _torch()
        H, W = mask.shape
        x0, y0, x1, y1 = _bbox(mask)
        S = self.SAM_SIZE
        x = _to_tensor(frame, (S, S), IMAGENET_MEAN, IMAGENET_STD, self.device)
        box = torch.tensor([[[x0 * S / W, y0 * S / H, x1 * S / W, y1 * S / H]]], dtype=torch.float32,
                           device=self.device)
        with torch.inference_mode():
            out = self._sam()(pixel_values=x, input_boxes=box, multimask_output=True)
        best = int(out.iou_scores[0, 0].argmax())
        low = out.pred_masks[0, 0, best].float().cpu().numpy()
        return cv2.resize(low, (W, H), interpolation=cv2.INTER_LINEAR) > 0

    def _model(self):
        if self.model is None:
            self.model = _shared("targets", "Dinov2Model", self.hf_id)
        return self.model.eval().to(self.device)

    def embed(self, frame: np.ndarray, masks: list) -> list:
        torch = _torch()
        if not any(m.any() for m in masks):
            return [None] * len(masks)
        x = _to_tensor(frame, (self.size, self.size), IMAGENET_MEAN, IMAGENET_STD, self.device)
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


class LearnedMemoryDepth(Extractor):
    """Depth Anything relative inverse depth, on a 32 x 32 grid, at frame 0 and at the frames of every revisit phase
    (every ``STRIDE``-th and the arrival frame; evaluate/worldmembench/static.py): the maps Depth Spearman and the Spherical
    Reconstruction Score compare."""

    name = "memory_depth"
    version = "1"
    backend = "learned"
    max_side = 518
    GRID = 32
    STRIDE = 4

    def __init__(self, model=None, hf_id: str = DEPTH_ID, size: int = 518, device: str = "cpu"):
        self.depth = LearnedDepth(model=model, hf_id=hf_id, size=size, device=device)

    def start(self, rec):
        super().start(rec)
        n = rec.n_frames or 10**9
        keep = set()
        for _, a, b in revisit_phases(rec.trajectory):
            r = revisit_range(a, b, rec.n_frames)
            keep.update(range(r.start, r.stop, self.STRIDE))
            keep.add(r.stop - 1)
        self.keep = {0} | {i for i in keep if 0 <= i < n} if keep else set()
        self.frames, self.maps, self.K = [], [], None

    def needs_frame(self, i):
        return i in self.keep

    def update(self, i, frame):
        if frame is None or i not in self.keep:
            return
        h, w = frame.shape[:2]
        disp = self.depth.disparity(frame)
        G = self.GRID
        self.frames.append(i)
        self.maps.append(cv2.resize(disp, (G, G), interpolation=cv2.INTER_AREA).astype(np.float32))
        if self.K is None:  # the intrinsics of the G x G grid (x and y scaled separately)
            self.K = np.diag([G / w, G / h, 1.0]) @ analysis_K(self.rec, w, h)

    def finish(self):
        return {"frame": np.asarray(self.frames, np.int32),
                "depth": np.asarray(self.maps, np.float32).reshape(-1, self.GRID, self.GRID),
                "K": self.K if self.K is not None else np.eye(3)}

    def config(self):
        return {**super().config(), "model": self.depth.hf_id, "grid": self.GRID, "stride": self.STRIDE}


#: every model a learned feature loads: feature -> [(what, source, id, licence)] (``worldgate doctor`` lists them)
MODELS_BY_FEATURE = {
    "flow": [("optical flow (RAFT large, C+T+S+K+H)", "torchvision", "raft_large_C_T_SKHT_V2-ff5fadd5.pth",
              "BSD-3-Clause")],
    "depth": [("depth (parallax split)", "hub", DEPTH_ID, "Apache-2.0")],
    "appearance": [("appearance embeddings", "hub", DINOV2_ID, "Apache-2.0")],
    "quality": [("aesthetic (CLIP ViT-L/14 + linear head)", "hub", CLIP_ID, "MIT")],
    "targets": [("target appearance", "hub", DINOV2_ID, "Apache-2.0"), ("target silhouettes (SAM 2.1)", "hub", SAM2_ID,
                                                                      "Apache-2.0")],
    "memory_depth": [("revisit depth", "hub", DEPTH_ID, "Apache-2.0")],
}


def fetch_command(source: str, model_id: str) -> str:
    if source == "hub":
        return f"hf download {model_id}"
    if source == "torchvision":  # torchvision weights are not on the Hub: they go to TORCH_HOME's hub/checkpoints
        return ("python -c 'from torchvision.models.optical_flow import raft_large, Raft_Large_Weights; "
                "raft_large(weights=Raft_Large_Weights.C_T_SKHT_V2)'")
    return f"(fetch {model_id})"


def is_present(source: str, model_id: str) -> bool:
    """Whether a model's weights are on this machine, checked in the local caches only (never the network)."""
    if source == "hub":
        from huggingface_hub import try_to_load_from_cache  # optional: the learned extra

        home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
        cache = os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")  # read now, not at import
        return isinstance(try_to_load_from_cache(model_id, "config.json", cache_dir=cache), str)
    if source == "torchvision":
        torch = _torch()
        return (Path(torch.hub.get_dir()) / "checkpoints" / model_id).is_file()
    return False


def missing_models(features) -> list[dict]:
    """The models the given learned features need that are not on this machine, each with its fetch command."""
    out, seen = [], set()
    for f in features:
        for what, source, mid, licence in MODELS_BY_FEATURE.get(f, []):
            if (source, mid) in seen:
                continue
            seen.add((source, mid))
            if not is_present(source, mid):
                out.append({"feature": f, "what": what, "source": source, "id": mid, "licence": licence,
                            "fetch": fetch_command(source, mid)})
    return out


class MissingModelsError(FeatureError, ValueError):
    """Models of the learned backend are not on this machine (a user error: the CLI prints it as one message)."""


def preflight(features) -> None:
    """Fail once, in seconds, before any record: every missing model named with the command that fetches it."""
    miss = missing_models(features)
    if miss:
        lines = [f"  {m['id']} ({m['what']}, {m['source']}): {m['fetch']}" for m in miss]
        raise MissingModelsError("--backend learned needs models that are not on this machine (no download is tried):\n"
                           + "\n".join(lines) + "\nfetch them on a connected machine into the same cache "
                           "(HF_HOME, TORCH_HOME), or use --backend classical")


def check_installed() -> None:
    try:
        import transformers  # noqa: F401  (optional: the learned extra)
    except ImportError:
        raise FeatureError("the learned backend needs transformers: pip install -e '.[learned]'") from None


def learned_extractors(device: str = "cpu", **kw) -> list[Extractor]:
    check_installed()
    return [LearnedFlow(device=device), LearnedDepth(device=device), LearnedAppearance(device=device),
            LearnedQuality(device=device, head_path=kw.get("aesthetic_head")), LearnedTargets(device=device),
            LearnedMemoryDepth(device=device)]
