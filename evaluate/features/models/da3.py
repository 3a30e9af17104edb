"""Depth Anything 3 under ``--backend learned``: WorldMark's parallax depth, WorldMemBench's camera poses and revisit
depth.

DA3 comes from PyPI ``depth-anything-3`` 0.1.1 (code Apache-2.0), loaded with its own API,
``depth_anything_3.api.DepthAnything3.from_pretrained(ID)`` (a Hub id or a local folder; WorldMark's default
``depth-anything/DA3-LARGE-1.1``, weights CC BY-NC 4.0; ``DA3_MODEL`` overrides it, as in WorldMark's wc:31), once
per process and device, and run with ``model.inference(images, process_res=504,
process_res_method="upper_bound_resize")`` (the API's defaults). Its prediction: ``depth`` (N, h, w) at the processed
size, ``conf``, ``extrinsics`` (N, 3, 4, OpenCV world-to-camera) and ``intrinsics`` (N, 3, 3) at the processed size.

Packaging (checked on a machine of this kind, 2026-12): with ``pip install --no-deps depth-anything-3==0.1.1``
the network and the inference path need only ``addict`` and ``einops`` beyond worldgate's own dependencies (torch,
torchvision, omegaconf, evo, opencv, Pillow, huggingface_hub). ``depth_anything_3.api`` also imports its export
package at module top (api.py:34), which pulls moviepy 1.0.3 (``moviepy.editor``), pycolmap (a 38 MB binary wheel),
trimesh, plyfile (GPL-3.0) and matplotlib; they run only when ``inference`` is given ``export_dir``, which worldgate
never does. Where one of them is missing, :func:`import_api` stands in an ``export`` that refuses to run and says so in
the features' config (``api_import``); with the full set installed the real module is used.

- ``depth`` (:class:`DA3Depth`): WorldMark's fe:_parallax_raw. Every frame resized to 640 x 432 with ``cv2.resize``'s
  default (fe:_read: RW=640, RH=432; the HUD of WorldMark's ``SANA-WM-streaming`` greyed, fe:25), the frames
  fe:_parallax_raw chooses (:func:`worldmark_picks`, equal to ``protocol._picks``) (every 16th in [0.25, 0.9] of each lateral / yaw segment, fe:182-188) handed to DA3 as
  PIL images in one ``inference`` call (fe:191-193: the views see each other), ``invZ = 1 / clip(depth, 1e-3)``
  (fe:199). The feature holds what ``LearnedDepth`` holds (``frame``, ``disparity`` (K, 8, 8): the inverse depth
  averaged on the flow's 8 x 8 grid), so evaluate/worldmark/protocol.py reads it unchanged; WorldMark's per-pixel
  samples (every 6th pixel of the depth map) are pooled on that grid as the existing port already does for DA-V2.
- ``camera_poses`` (:class:`DA3CameraPoses`): WorldMemBench's camera following (paper, Camera Following: the
  estimated camera-to-world poses of frame t and the adjacent motions t -> t+1 over the full rollout). The paper
  names no frame sampling or resolution: worldgate gives DA3 every frame in one call at the API's default 504 px
  (``max_views`` caps the views by a uniform stride, said in ``gap``). The feature is in the format
  ``shared.estimated_trajectory`` chains (one row per pair f -> f + gap, ``x_b = R x_a + t``), with ``K`` = I and
  ``analysis_width`` = 640 so its per-step rescale (``trans_flow * width / 640 / f``) is the identity and
  ``trans_flow`` holds DA3's own step length: the chain reproduces DA3's poses relative to the first frame. DA3's
  camera-to-world poses themselves are kept too (``c2w``, ``intrinsics``, ``frame``), and ``estimator`` names it.
- ``memory_depth`` (:class:`DA3MemoryDepth`): Environment Depth Spearman and the Spherical Reconstruction Score from
  DA3's depth of frame 0 and the revisit frames, in LearnedMemoryDepth's format. The paper names no depth model for
  them; DA3 (its pose estimator) rather than a second depth model is worldgate's choice. On an Environment record
  (a camera-pose family) the depth is read from the same every-frame call that gives the camera poses: DA3 runs once
  for both (:func:`shared_views`; the frames are resized and kept once), its views spanning the whole rollout; on
  other records DA3 sees frame 0 and the revisit frames in one call.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import types
import warnings

import cv2
import numpy as np

from ..core import Extractor, FeatureError

DA3_ID = "depth-anything/DA3-LARGE-1.1"  # WorldMark's default (wc:31 DA3_MODEL)
ENV_MODEL = "DA3_MODEL"
PACKAGE, MODULE, PIN = "depth-anything-3", "depth_anything_3", "0.1.1"
#: what the inference path imports beyond worldgate's dependencies, and the install that brings no more
EXTRA_DEPS = ("addict==2.4.0", "einops==0.8.2")
INSTALL_CMD = f"pip install --no-deps {PACKAGE}=={PIN} " + " ".join(EXTRA_DEPS)
LICENCE = "CC BY-NC 4.0 (DA3-LARGE-1.1 weights); Apache-2.0 (depth-anything-3 code)"
#: the modules only ``depth_anything_3.utils.export`` imports (moviepy 1.0.3, pycolmap, trimesh, plyfile,
#: matplotlib through utils/visualize.py, gsplat optional inside): missing ones are stood in for (never called)
EXPORT_ONLY = frozenset({"moviepy", "pycolmap", "trimesh", "plyfile", "matplotlib", "open3d", "gsplat", "proglog",
                         "decorator"})
HUB_FILES = ("config.json", "model.safetensors")  # PyTorchModelHubMixin's files

PROCESS_RES, PROCESS_RES_METHOD = 504, "upper_bound_resize"  # DepthAnything3.inference's defaults (fe:193 passes none)
WM_SIZE = (640, 432)  # fe:_read(video, model, RH=432, RW=640): every frame cv2.resize'd to this
WM_HUD = {"SANA-WM-streaming": (0.18, 0.22)}  # fe:25: (height, width) fractions greyed at the bottom left
INVZ_MIN_DEPTH = 1e-3  # fe:199 invZ = 1 / clip(depth, 1e-3)
GRID = 8  # the flow's grid (LearnedDepth.GRID)


# --- the package ------------------------------------------------------------------------------------------------------

_IMPORT_LOCK = threading.Lock()
_API: dict = {}


def _export_stub(missing: str) -> types.ModuleType:
    mod = types.ModuleType(f"{MODULE}.utils.export")

    def export(*_a, **_k):
        raise FeatureError(f"DA3's export needs {missing} (not installed); worldgate never exports")

    mod.export = export
    mod.__doc__ = f"worldgate's stand-in: {MODULE}.utils.export needs {missing}, which is not installed"
    return mod


def _quiet_import_warnings() -> None:
    """DA3's cfg.py registers an omegaconf resolver the deprecated way and its model code calls torch.jit.script:
    two warnings on every import that say nothing about the user's run."""
    warnings.filterwarnings("ignore", message=r".*register_new_resolver\(\) is deprecated", category=UserWarning)
    warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=FutureWarning)


def _import_api_class():
    try:
        from depth_anything_3.api import DepthAnything3
    except ModuleNotFoundError as e:
        root = (e.name or "").split(".")[0]
        if root not in EXPORT_ONLY:
            raise
        for name in [m for m in sys.modules if m == f"{MODULE}.api" or m.startswith(f"{MODULE}.utils.export")]:
            del sys.modules[name]
        sys.modules[f"{MODULE}.utils.export"] = _export_stub(root)
        return importlib.import_module(f"{MODULE}.api").DepthAnything3, f"export stubbed (no {root})"
    return DepthAnything3, "full"


def import_api():
    """(``DepthAnything3``, how it was imported): ``"full"``, or ``"export stubbed (no MODULE)"`` where an
    export-only dependency is missing. Raises ImportError for anything else (the inference path itself)."""
    with _IMPORT_LOCK:
        if "cls" in _API and sys.modules.get(f"{MODULE}.api") is _API["module"]:
            return _API["cls"], _API["mode"]
        with warnings.catch_warnings():
            _quiet_import_warnings()
            DepthAnything3, mode = _import_api_class()
        if not os.environ.get("DA3_LOG_LEVEL"):  # its INFO lines go to stdout on every call
            from depth_anything_3.utils.logger import LOG_LEVELS, logger

            logger.level = LOG_LEVELS["WARN"]
        _API.update(cls=DepthAnything3, mode=mode, module=sys.modules.get(f"{MODULE}.api"))
        return DepthAnything3, mode


def status() -> tuple[bool, str]:
    """(usable, why not): whether DA3's API imports here, else what is missing and the install command."""
    if importlib.util.find_spec(MODULE) is None:
        return False, f"package {PACKAGE} is not installed: {INSTALL_CMD}"
    try:
        import_api()
    except ImportError as e:
        return False, (f"{PACKAGE} is installed but its API does not import ({type(e).__name__}: "
                       f"{str(e).splitlines()[0][:120]}): {INSTALL_CMD}")
    return True, ""


def available() -> bool:
    return status()[0]


def model_id(hf_id: str | None = None) -> str:
    return str(hf_id or os.environ.get(ENV_MODEL) or DA3_ID)


def fetch_command(hf_id: str | None = None) -> str:
    return f"hf download {model_id(hf_id)}"


def present(hf_id: str | None = None) -> bool:
    """Whether the weights are on this machine (a local folder, or the Hub cache; never the network)."""
    mid = model_id(hf_id)
    if os.path.isdir(mid):
        return all(os.path.isfile(os.path.join(mid, f)) for f in HUB_FILES)
    from huggingface_hub import try_to_load_from_cache

    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    cache = os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")  # read now, as catalogue.is_present does
    try:
        return all(isinstance(try_to_load_from_cache(mid, f, cache_dir=cache), str) for f in HUB_FILES)
    except ValueError:  # not a Hub id (HFValidationError) and not a folder
        return False


_MODELS: dict = {}  # (id, device) -> model, loaded once per process
_MODELS_LOCK = threading.Lock()
_RUN_LOCK = threading.Lock()  # one DA3 call at a time: depth and camera_poses share the model (and the GPU)


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(hf_id: str | None = None, device: str | None = None):
    """``DepthAnything3.from_pretrained(id)`` in eval mode on ``device``, once per (id, device) per process."""
    mid, device = model_id(hf_id), device or default_device()
    with _MODELS_LOCK:
        if (mid, device) not in _MODELS:
            try:
                cls, _ = import_api()
            except ImportError as e:
                raise FeatureError(f"DA3 does not import ({type(e).__name__}: {e}): {INSTALL_CMD}") from None
            try:
                model = cls.from_pretrained(mid)
            except Exception as e:  # noqa: BLE001 - huggingface_hub's offline/missing errors are several classes
                first = (str(e).strip().splitlines() or [""])[0][:160]
                raise FeatureError(
                    f"cannot load DA3 {mid!r} ({type(e).__name__}: {first}). Fetch it on a machine with network "
                    f"access (`{fetch_command(mid)}`; {LICENCE}) and point HF_HOME at that cache, or set "
                    f"{ENV_MODEL} to a local folder with {' and '.join(HUB_FILES)}") from None
            _MODELS[(mid, device)] = model.to(device).eval()
        return _MODELS[(mid, device)]


def predict(model, frames: list, process_res: int = PROCESS_RES, method: str = PROCESS_RES_METHOD) -> dict:
    """One ``model.inference`` call on uint8 RGB frames (as PIL images, fe:191-193): depth, conf (N, h, w),
    w2c (N, 3, 4) OpenCV world-to-camera, intrinsics (N, 3, 3) at the processed size, as float64 / float32."""
    from PIL import Image

    imgs = [Image.fromarray(np.ascontiguousarray(f)) for f in frames]
    with _RUN_LOCK:
        p = model.inference(imgs, process_res=int(process_res), process_res_method=method)
    out = {"depth": np.asarray(p.depth, np.float32)}
    if p.conf is not None:
        out["conf"] = np.asarray(p.conf, np.float32)
    if p.extrinsics is not None:
        out["w2c"] = np.asarray(p.extrinsics, np.float64)[:, :3, :4]
        out["intrinsics"] = np.asarray(p.intrinsics, np.float64)
    return out


# --- poses ------------------------------------------------------------------------------------------------------------

def c2w_from_w2c(w2c: np.ndarray) -> np.ndarray:
    """(N, 4, 4) camera-to-world from (N, 3, 4) or (N, 4, 4) world-to-camera (OpenCV axes both)."""
    w2c = np.asarray(w2c, np.float64)
    R, t = w2c[:, :3, :3], w2c[:, :3, 3]
    out = np.zeros((len(w2c), 4, 4))
    out[:, :3, :3] = np.swapaxes(R, 1, 2)
    out[:, :3, 3] = -np.einsum("nji,nj->ni", R, t)
    out[:, 3, 3] = 1.0
    return out


def chain_rows(c2w: np.ndarray, gap: int = 1) -> dict[str, np.ndarray]:
    """The pair rows ``shared.estimated_trajectory`` chains, from the c2w poses of frames 0, gap, 2 gap, ...: row
    ``k gap`` is pair k gap -> (k+1) gap with ``x_b = R x_a + t`` (camera a to camera b), the rows between are
    placeholders (identity, not valid); ``trans_flow`` is the step's length, K = I and ``analysis_width`` = 640
    make estimated_trajectory's rescale the identity."""
    c2w = np.asarray(c2w, np.float64)
    m, gap = len(c2w) - 1, max(1, int(gap))
    n = max(0, m * gap)
    R, t = np.tile(np.eye(3), (n, 1, 1)), np.zeros((n, 3))
    valid, length = np.zeros(n, bool), np.zeros(n)
    if m > 0:
        rel = np.linalg.inv(c2w[:-1]) @ c2w[1:]  # camera b's pose in camera a: [Rr | c]
        Rr, c = rel[:, :3, :3], rel[:, :3, 3]
        rows = np.arange(m) * gap
        R[rows] = np.swapaxes(Rr, 1, 2)  # x_b = Rr^T x_a - Rr^T c
        t[rows] = -np.einsum("nji,nj->ni", Rr, c)
        valid[rows] = True
        length[rows] = np.linalg.norm(c, axis=1)
    return {"R": R, "t": t, "valid": valid, "trans_flow": length, "K": np.eye(3),
            "analysis_width": np.asarray(640), "gap": np.asarray(gap)}


# --- WorldMark's depth (fe:_read, fe:_parallax_raw) -------------------------------------------------------------------

def worldmark_frame(frame: np.ndarray, model: str | None = None) -> np.ndarray:
    """fe:_read: the frame at 640 x 432 (``cv2.resize`` default, bilinear), the model's HUD greyed (fe:25)."""
    im = cv2.resize(np.ascontiguousarray(frame), WM_SIZE)
    hud = WM_HUD.get(str(model)) if model else None
    if hud:
        fh, fw = hud
        RW, RH = WM_SIZE
        im[int(RH * (1 - fh)):, :int(RW * fw)] = 128
    return im


def worldmark_keys(trajectory: dict) -> list[str] | None:
    """The record's WorldMark keys (each segment one W/S/A/D move or one L/R look), or None: what
    ``worldmark.protocol.record_keys`` accepts (restated here: this module sits below the benchmarks, which import the
    metric registry; tests hold the two equal)."""
    keys = []
    for s in (trajectory or {}).get("segments", []):
        move, look = s.get("move"), s.get("look")
        if move in ("W", "S", "A", "D") and look == "idle":
            keys.append(move)
        elif move == "idle" and look in ("L", "R"):
            keys.append(look)
        else:
            return None
    return keys or None


def segment_picks(j: int, n_keys: int, n_frames: int, step: int = 2) -> list[int]:
    """fe:182-188 (``worldmark.protocol._picks``): every round(16)-th frame in [0.25, 0.9] of segment j, stopping
    before N - step - 1; 3 evenly spaced (``int`` of linspace) where that gives fewer than 3."""
    lo, hi = int((j + 0.25) * n_frames / n_keys), int((j + 0.9) * n_frames / n_keys)
    idxs = list(range(lo, min(hi, n_frames - step - 1), 16))  # fe:184 max(1, int(round(FPS))), FPS = 16
    if len(idxs) < 3:
        idxs = [int(x) for x in np.linspace(lo, min(hi, n_frames - step - 1), 3)]
    return idxs


def worldmark_picks(trajectory: dict, n_frames: int) -> list[tuple[int, int]] | None:
    """(segment, frame) pairs fe:_parallax_raw gives DA3, in its order (fe:182-188: lateral and yaw segments, i.e.
    keys A, D, L, R), or None where the record is not a WorldMark key sequence (the protocol does not score it)."""
    keys = worldmark_keys(trajectory)
    if keys is None or n_frames <= 0:
        return None
    return [(j, i) for j, k in enumerate(keys) if k in "ADLR" for i in segment_picks(j, len(keys), int(n_frames))]


def inverse_depth_grid(depth: np.ndarray, grid: int = GRID) -> np.ndarray:
    """fe:199's ``1 / clip(depth, 1e-3)`` averaged on a grid x grid raster (sides cropped to multiples of it)."""
    iv = 1.0 / np.clip(np.asarray(depth, np.float64), INVZ_MIN_DEPTH, None)
    hh, ww = (iv.shape[-2] // grid) * grid, (iv.shape[-1] // grid) * grid
    iv = iv[..., :hh, :ww]
    return iv.reshape(*iv.shape[:-2], grid, hh // grid, grid, ww // grid).mean(axis=(-3, -1)).astype(np.float32)


class DA3Extractor(Extractor):
    """The base of the DA3 features (depth, camera_poses, memory_depth): one model per process, the API's resize."""

    backend = "learned"
    max_side = None  # native frames: fe:_read resizes them itself; the API resizes for camera poses

    @classmethod
    def available(cls) -> bool:
        """Where depth-anything-3 imports (``status``; what to install otherwise)."""
        return status()[0]

    def __init__(self, model=None, hf_id: str | None = None, device: str | None = None,
                 process_res: int = PROCESS_RES, process_res_method: str = PROCESS_RES_METHOD):
        self.model, self.hf_id, self.device = model, hf_id, device
        self.given = model is not None
        self.process_res, self.method = int(process_res), process_res_method
        self._ip = None

    def _model(self):
        if self.model is None:
            self.model = load_model(self.hf_id, self.device)
        return self.model

    def label(self) -> str:
        return "a given model" if self.given else model_id(self.hf_id)

    def _predict(self, frames: list) -> dict:
        return predict(self._model(), frames, self.process_res, self.method)

    def call_key(self) -> tuple:
        """What makes two extractors' DA3 calls on every frame the same call: the model and how frames are processed."""
        return (id(self.model) if self.given else model_id(self.hf_id), self.device, self.process_res, self.method)

    def _resize(self, frame):
        """The API's own boundary resize (InputProcessor._resize_image), done on arrival so only processed-size
        frames are kept; the API then finds them at the target size and leaves them as they are."""
        from PIL import Image

        if self._ip is None:
            from depth_anything_3.utils.io.input_processor import InputProcessor

            self._ip = InputProcessor()
        return np.asarray(self._ip._resize_image(Image.fromarray(np.ascontiguousarray(frame)), self.process_res,
                                                 self.method))

    def config(self):
        mode = _API.get("mode") or "not imported yet"
        return {**super().config(), "model": self.label(),
                "process_res": self.process_res, "process_res_method": self.method, "api_import": mode}


#: the rows ``catalogue.MODELS_BY_FEATURE`` lists for DA3 (what, source, id, licence)
MODEL_ROWS = {
    "depth": ("depth, parallax split (Depth Anything 3, WorldMark's DA3-LARGE-1.1; fe:41-42, 193)", "hub", DA3_ID,
              LICENCE),
    "camera_poses": ("camera following poses (Depth Anything 3, WorldMemBench's estimator)", "hub", DA3_ID, LICENCE),
    "memory_depth": ("revisit depth (Depth Anything 3; the paper names no depth model: worldgate's choice)", "hub",
                     DA3_ID, LICENCE),
}
