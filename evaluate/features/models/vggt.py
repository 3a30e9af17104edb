"""WorldMark's global memory under ``--backend learned``: VGGT-Omega from a checkout the user points at.

VGGT-Omega (facebookresearch/vggt-omega, FAIR Noncommercial Research License) has no package and no transformers
class, and its checkpoints are gated on the Hub. It is therefore treated like the official-code runners
(adapters/repo.py): a checkout plus a weights file, named by ``VGGT_OMEGA_PATH`` / ``VGGT_OMEGA_CKPT`` (WorldMark's
own variables, wc:33-35) or by the extractor's arguments, checked once (:func:`check`) before the first record, each
missing piece named with the command that gets it.

The protocol is WorldMark's ``evaluation/worldmark/vggt_omega_global_c3.py`` (vg, AlayaLab/WorldMark 26f33a81),
reimplemented here:

- frames at 1 fps (a step of ``round(fps)`` frames), 6 evenly spaced where that gives fewer than 6, at most 64
  evenly spaced (vg:35-39); each written as a PNG (RGB, vg:43-48) and loaded with the checkout's
  ``load_and_preprocess_images(paths, image_resolution=512)`` (vg:49);
- ``VGGTOmega()`` with the checkpoint's state dict (vg:20-24), run once on all picked frames (vg:50-51);
  ``encoding_to_camera(pose_enc, HW)`` gives world-to-camera extrinsics and intrinsics (vg:52-56);
- :func:`global_from_predictions` (vg:57-94): depth back-projected to world points; for every ordered pair (i, j)
  the confident grid points of i (every 16th pixel, confidence at or above the 0.3 quantile of all confidences)
  projected into j; a point is co-visible where it lands inside j in front of it, its depth over j's depth there is
  in (0.7, 1.4) and j's confidence there passes the same threshold; pairs with fewer than 5 points inside or 5
  co-visible points are skipped; the error of a point is its distance to j's world point at that pixel over the
  median depth; the video's e is the median over every pair's points pooled.

The feature holds WorldMark's per-video record (``global_median_e`` rounded to 5 places, ``global_mean_e``,
``global_score`` = 100 / (1 + e), ``covis_ratio``), NaN where no pair is co-visible (vg:88-89 ``no_covis``);
WorldMark's tau (0.05, fm:90) is applied by the benchmark (`worldmark.geometry.vggt_global_memory` for one video).
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import cv2
import numpy as np

from ...checkout import checkout_problems
from ..core import Extractor, FeatureError, error_line
from .vggt_c3 import (
    C3_CONF_Q,
    C3_GRID_STEP,
    C3_MAX_FRAMES,
    C3_OCC_HI,
    C3_OCC_LO,
    C3_STRIDE_SEC,
    c3_errors,
    c3_record,
    c3_select_frames,
)

# WorldMark's constants (vg:18, vg:49), shared with WorldMark's results tree (vggt_c3.py)
STRIDE_SEC, MAX_FRAMES, GRID_STEP, OCC_LO, OCC_HI, CONF_Q = (C3_STRIDE_SEC, C3_MAX_FRAMES, C3_GRID_STEP, C3_OCC_LO,
                                                          C3_OCC_HI, C3_CONF_Q)
MIN_FRAMES = 6
IMAGE_RESOLUTION = 512
DEFAULT_FPS = 16.0  # vg:35: a video without an average fps is taken as 16 fps

REPO_URL = "https://github.com/facebookresearch/vggt-omega"
HF_REPO = "facebook/VGGT-Omega"
CKPT_FILE = "vggt_omega_1b_512.pt"  # VGGT-Omega-1B-512, the 512 px checkpoint VGGTOmega() builds (its README)
LICENCE = "FAIR Noncommercial Research License (code); gated checkpoints (request access on the Hub)"
ENV_PATH, ENV_CKPT = "VGGT_OMEGA_PATH", "VGGT_OMEGA_CKPT"
CLONE_CMD = f"git clone {REPO_URL}"
#: what the checkout's inference code imports (torch, torchvision, numpy, Pillow; its requirements.txt also pins
#: numpy<2 and opencv-python, which would replace this environment's numpy and opencv-python-headless)
DEPS_CMD = ("pip install torchvision Pillow  (the packages vggt_omega/ imports; not its requirements.txt, "
            "which pins numpy<2)")
FETCH_CMD = (f"hf download {HF_REPO} {CKPT_FILE} --local-dir WEIGHTS  "
             f"(gated: request access at https://huggingface.co/{HF_REPO} first)")

#: module in the checkout -> (file, the name it must define)
MODULES = {
    "vggt_omega.models": ("vggt_omega/models/__init__.py", "VGGTOmega"),
    "vggt_omega.utils.load_fn": ("vggt_omega/utils/load_fn.py", "load_and_preprocess_images"),
    "vggt_omega.utils.pose_enc": ("vggt_omega/utils/pose_enc.py", "encoding_to_camera"),
}


class MissingVGGTOmega(FeatureError, ValueError):
    """The VGGT-Omega checkout or its weights are not usable here (a user error: printed as one message)."""


# --- the protocol (vg:33-94) -----------------------------------------------------------------------------------------

def pick_frames(n_frames: int, fps: float | None) -> list[int]:
    """The frames VGGT-Omega sees of a video of ``n_frames`` at ``fps`` (vg:35-39; master.c3_select_frames)."""
    return c3_select_frames(int(n_frames), fps) if int(n_frames) > 0 else []


def pair_errors(depth, conf, extr, intr) -> tuple[list[np.ndarray], int, int, int]:
    """(per-pair error arrays, co-visible points, points inside, pairs skipped for < 5 inside) over every ordered pair
    of frames (vg:57-87, as master.c3_errors computes them for WorldMark's scoring)."""
    f32 = [np.asarray(x, np.float32) for x in (extr, intr, depth, conf)]
    return c3_errors(*f32, with_skipped=True)


def global_from_predictions(depth, conf, extr, intr) -> dict:
    """WorldMark's per-video global record from VGGT-Omega's predictions (vg:57-94): depth and confidence (K, H, W),
    world-to-camera extrinsics (K, 3, 4), intrinsics (K, 3, 3). ``{"na": "no_covis"}`` where no pair has 5
    co-visible points."""
    errs, n_cov, n_in, _ = pair_errors(depth, conf, extr, intr)
    return _record(errs, n_cov, n_in)


def _record(errs: list, n_cov: int, n_in: int) -> dict:
    """vg:88-94 (master.c3_record without its model and stem)."""
    return {k: v for k, v in c3_record("", "", errs, n_cov, n_in).items() if k not in ("model", "stem")}


# --- the checkout (checked once, like adapters/repo.py) --------------------------------------------------------------

def resolve(path=None, ckpt=None) -> tuple[str | None, str | None]:
    """The checkout and weights: the arguments, else ``VGGT_OMEGA_PATH`` / ``VGGT_OMEGA_CKPT`` (read now)."""
    return (str(path) if path else os.environ.get(ENV_PATH) or None,
            str(ckpt) if ckpt else os.environ.get(ENV_CKPT) or None)


def configured() -> bool:
    """Whether the user pointed worldgate at a VGGT-Omega checkout (``VGGT_OMEGA_PATH``)."""
    return bool(resolve()[0])


def missing(path=None, ckpt=None, import_modules: bool = True) -> list[dict]:
    """What is missing for the ``vggt_global`` feature, as ``catalogue.missing_models`` rows (feature, what, source,
    id, licence, fetch); empty when the checkout imports and the weights file is there. Nothing is downloaded."""
    path, ckpt = resolve(path, ckpt)

    def row(what, mid, fetch):
        return {"feature": "vggt_global", "what": what, "source": "checkout", "id": mid, "licence": LICENCE,
                "fetch": fetch}

    out = []
    repo = Path(path).expanduser() if path else None
    out += [row(*p) for p in checkout_problems(repo, "VGGT-Omega", "WorldMark global memory, vg:9-14", ENV_PATH,
                                               f"{CLONE_CMD}; then export {ENV_PATH}=$PWD/vggt-omega", MODULES,
                                               REPO_URL, CLONE_CMD, DEPS_CMD,
                                               import_checkout if import_modules else None)]
    if not ckpt:
        out.append(row("VGGT-Omega-1B-512 weights (vg:17, 23)", f"${ENV_CKPT} (not set)",
                       f"{FETCH_CMD}; then export {ENV_CKPT}=WEIGHTS/{CKPT_FILE}"))
    elif not Path(ckpt).expanduser().is_file():
        out.append(row("VGGT-Omega-1B-512 weights (vg:17, 23)", f"{ENV_CKPT}={ckpt} (no such file)",
                       f"{FETCH_CMD}; then export {ENV_CKPT}=WEIGHTS/{CKPT_FILE}"))
    return out


def check(path=None, ckpt=None, import_modules: bool = True) -> dict:
    """Fail once, in seconds, before any record, naming every missing piece with the command that gets it; returns
    the resolved ``{"repo": Path, "ckpt": Path}``."""
    miss = missing(path, ckpt, import_modules)
    if miss:
        lines = [f"  {m['what']}: {m['id']}\n    -> {m['fetch']}" for m in miss]
        raise MissingVGGTOmega(
            "WorldMark's global memory under --backend learned runs VGGT-Omega from a checkout you point at "
            f"({ENV_PATH}=CHECKOUT, {ENV_CKPT}=WEIGHTS_FILE; it has no package):\n" + "\n".join(lines)
            + "\nor use --backend classical (global memory from two-view geometry)")
    path, ckpt = resolve(path, ckpt)
    return {"repo": Path(path).expanduser().resolve(), "ckpt": Path(ckpt).expanduser().resolve()}


_IMPORT_LOCK = threading.Lock()


def import_checkout(repo) -> dict:
    """``{"VGGTOmega", "load_and_preprocess_images", "encoding_to_camera"}`` imported from the checkout at ``repo``
    (put first on sys.path, as vg:9 does); a ``vggt_omega`` already imported from elsewhere is replaced."""
    repo = Path(repo).expanduser().resolve()
    with _IMPORT_LOCK:
        loaded = sys.modules.get("vggt_omega")
        origin = getattr(loaded, "__file__", None) if loaded is not None else None
        if loaded is not None and (origin is None or repo not in Path(origin).resolve().parents):
            for name in [m for m in sys.modules if m == "vggt_omega" or m.startswith("vggt_omega.")]:
                del sys.modules[name]
        if str(repo) in sys.path:
            sys.path.remove(str(repo))
        sys.path.insert(0, str(repo))
        importlib.invalidate_caches()
        return {name: getattr(importlib.import_module(mod), name) for mod, (_, name) in MODULES.items()}


_MODELS: dict = {}  # (checkout, weights, device) -> (model, functions): loaded once per process, kept across records
_MODELS_LOCK = threading.Lock()


def load_model(repo, ckpt, device: str = "cpu"):
    """The checkout's ``VGGTOmega()`` with the checkpoint's state dict, in eval mode on ``device`` (vg:20-24), and the
    checkout's functions; loaded once per (checkout, weights, device)."""
    key = (str(repo), str(ckpt), str(device))
    with _MODELS_LOCK:
        if key not in _MODELS:
            import torch  # optional: the learned extra

            fns = import_checkout(repo)
            model = fns["VGGTOmega"]()
            try:
                path = str(ckpt)
                state = torch.load(path, map_location="cpu", weights_only=True)
                model.load_state_dict(state)
            except (OSError, RuntimeError, ValueError, KeyError, EOFError) as e:
                raise MissingVGGTOmega(
                    f"cannot load the VGGT-Omega weights {ckpt} into VGGTOmega() ({error_line(e)}): "
                    f"{ENV_CKPT} must be the 512 px checkpoint "
                    f"({FETCH_CMD})") from None
            _MODELS[key] = (model.to(device).eval(), fns)
        return _MODELS[key]


class VGGTOmegaGlobal(Extractor):
    """WorldMark's global memory quantities from VGGT-Omega (vg:33-94) on the frames :func:`pick_frames` chooses,
    written as PNGs at the video's size and loaded with the checkout's own preprocessing at 512 px."""

    name = "vggt_global"
    version = "1"
    backend = "learned"
    max_side = None  # native frames: the checkout's load_and_preprocess_images resizes (vg:45, 49)

    @classmethod
    def available(cls) -> bool:
        """A checkout the user points at (VGGT_OMEGA_PATH): global memory runs when it is configured and is
        unavailable, with what to set, when it is not."""
        return configured()

    @classmethod
    def preflight(cls) -> None:
        check()  # every missing piece of the checkout named at once, before the first record

    def __init__(self, path=None, ckpt=None, device: str | None = None, image_resolution: int = IMAGE_RESOLUTION):
        self.path, self.ckpt, self.device, self.image_resolution = path, ckpt, device, int(image_resolution)
        self._paths = None

    def _device(self) -> str:
        """The given device, else CUDA where visible (VGGT-Omega's forward autocasts on CUDA, vg:23), else CPU."""
        if self.device is None:
            import torch  # optional: the learned extra

            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        return self.device

    def check(self, import_modules: bool = True) -> dict:
        if self._paths is None:
            self._paths = check(self.path, self.ckpt, import_modules)
        return self._paths

    def start(self, rec):
        super().start(rec)
        self.check()
        self.n_known = rec.n_frames > 0
        self.keep = set(pick_frames(rec.n_frames, rec.fps)) if self.n_known else None
        self.work = Path(tempfile.mkdtemp(prefix="worldgate-vggt-"))
        self.written: dict[int, Path] = {}
        self.seen = 0

    def needs_frame(self, i):
        return self.keep is None or i in self.keep

    def update(self, i, frame):
        if frame is None:
            return
        self.seen = max(self.seen, i + 1)
        if self.keep is not None and i not in self.keep:
            return
        p = self.work / f"{i:06d}.png"
        if not cv2.imwrite(str(p), cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR)):
            raise FeatureError(f"could not write frame {i} as PNG under {self.work}")
        self.written[i] = p

    def predictions(self, paths: list[Path]) -> dict[str, np.ndarray]:
        """depth, conf (K, H, W), extr (K, 3, 4), intr (K, 3, 3) as float32, from one forward pass (vg:49-56)."""
        import torch  # optional: the learned extra

        device = self._device()
        model, fns = load_model(self._paths["repo"], self._paths["ckpt"], device)
        imgs = fns["load_and_preprocess_images"]([str(p) for p in paths], image_resolution=self.image_resolution)
        with torch.inference_mode():
            pred = model(imgs.to(device))
            hw = pred["images"].shape[-2:]
            extr, intr = fns["encoding_to_camera"](pred["pose_enc"], hw)
        return {"depth": pred["depth"][0, :, :, :, 0].float().cpu().numpy(),
                "conf": pred["depth_conf"][0].float().cpu().numpy(),
                "extr": extr[0].float().cpu().numpy(), "intr": intr[0].float().cpu().numpy()}

    def finish(self):
        try:
            picks = pick_frames(self.seen, self.rec.fps) if not self.n_known else sorted(self.keep)
            picks = [i for i in picks if i in self.written]
            if len(picks) < 2:
                raise FeatureError(f"VGGT-Omega needs at least 2 frames, the video gave {len(picks)}")
            P = self.predictions([self.written[i] for i in picks])
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
        if len(P["depth"]) != len(picks):
            raise FeatureError(f"VGGT-Omega returned {len(P['depth'])} depth maps for {len(picks)} frames")
        errs, n_cov, n_in, _ = pair_errors(P["depth"], P["conf"], P["extr"], P["intr"])
        g = _record(errs, n_cov, n_in)
        nan = float("nan")
        return {"frame": np.asarray(picks, np.int32), "image_hw": np.asarray(P["depth"].shape[1:], np.int32),
                "global_median_e": np.float64(g.get("global_median_e", nan)),
                "global_mean_e": np.float64(g.get("global_mean_e", nan)),
                "global_score": np.float64(g.get("global_score", nan)),
                "covis_ratio": np.float64(round(n_cov / max(1, n_in), 3)),
                "pairs": np.int64(len(errs)), "points": np.int64(sum(len(e) for e in errs))}

    def config(self):
        return {**super().config(), "model": "VGGT-Omega-1B-512 (checkout)", "image_resolution": self.image_resolution,
                "stride_s": STRIDE_SEC, "max_frames": MAX_FRAMES, "grid_step": GRID_STEP, "occlusion": [OCC_LO, OCC_HI],
                "conf_quantile": CONF_Q}
