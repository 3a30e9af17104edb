"""WorldMark's optical flow under ``--backend learned``: SEA-RAFT from a checkout the user points at.

SEA-RAFT (princeton-vl/SEA-RAFT, BSD-3-Clause) has no package: WorldMark puts a checkout on ``sys.path`` and imports
``raft.RAFT`` from its ``core/`` folder (fe:13-15). worldgate does the same with a checkout named by ``SEA_RAFT_PATH``
(or the extractor's arguments), the weights named by ``SEA_RAFT_CKPT`` (a Hub id, default WorldMark's
``MemorySlices/Tartan-C-T-TSKH-spring540x960-M``, a folder holding ``model.safetensors`` / ``pytorch_model.bin``, or
one such file) and the config by ``SEA_RAFT_CFG`` (default the checkout's ``config/eval/spring-M.json``, the one
WorldMark's ``SEARAFT_CFG`` names). Everything is checked once (:func:`check`) before the first record, each missing
piece named with the command that gets it; the model is loaded once per process.

The protocol is WorldMark's ``evaluation/worldmark/flow_eval.py`` (fe, AlayaLab/WorldMark 26f33a81), run as it runs:

- every decoded frame resized to 640x432 with ``cv2.resize`` (bilinear, aspect ratio not kept; fe:58-66), with its
  HUD box set to 128 where one is given (fe:25, 63-65: WorldMark masks only ``SANA-WM-streaming``);
- pairs frame i vs i+2 (fe:70-79); each frame a float32 0..255 tensor, scaled by ``2**scale`` with
  ``F.interpolate(bilinear, align_corners=False)`` (spring-M: scale -1, so 216x320, a multiple of 8: SEA-RAFT's own
  replicate padding is empty), ``RAFT(i1, i2, iters=iters, test_mode=True)["flow"][-1]`` in fp32, no autocast,
  under ``torch.no_grad`` (fe:46-52), the flow resized back to 432x640 the same way **without** the ``2**-scale``
  factor (fe:52): :func:`worldmark_flow` returns exactly that half-size field;
- the ``flow`` feature is the same content torchvision RAFT's LearnedFlow writes (``FlowSignals``: sx, sy, srad,
  speed, 8x8 grid, in pixels of a 640-wide frame), computed from that field times ``2**-scale`` (x2, exact in
  floating point), which WorldMark's protocol (``protocol.flow_cache``) halves back; FlowSignals' statistics sample
  every other pixel about a centre offset by one pixel, so its halved sx / srad are close to fe's, not equal. The
  feature therefore also holds ``wm_sx`` / ``wm_srad``: fe:71-78's Sx and Srad themselves, on fe's half-size scale,
  bit for bit.

Loading differs from fe:33-40 in one way that cannot change a weight: ``RAFT(args)`` is built with ResNetFPN's
``init_weight`` off (its ImageNet ResNet init would be fetched from download.pytorch.org), and the checkpoint's state
dict is then loaded and required to cover every parameter and buffer (``num_batches_tracked`` aside), so nothing of
that init could survive; ``RAFT.from_pretrained`` loads the same file with ``strict=False`` and calls ``eval()``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import cv2
import numpy as np

from ...checkout import checkout_problems
from ..core import FeatureError, error_line
from ..signals import PAIR_GAP

REPO_URL = "https://github.com/princeton-vl/SEA-RAFT"
HF_ID = "MemorySlices/Tartan-C-T-TSKH-spring540x960-M"  # fe:36
CFG_REL = "config/eval/spring-M.json"  # the spring config of the M model WorldMark's SEARAFT_CFG names (fe:38)
LICENCE = "BSD-3-Clause (princeton-vl/SEA-RAFT: code and weights)"
ENV_PATH, ENV_CKPT, ENV_CFG = "SEA_RAFT_PATH", "SEA_RAFT_CKPT", "SEA_RAFT_CFG"
CLONE_CMD = f"git clone {REPO_URL}"
FETCH_CMD = f"hf download {HF_ID}"
#: what core/raft.py imports besides torch and numpy (utils/utils.py: scipy; raft.py: huggingface_hub's mixin)
DEPS_CMD = "pip install scipy huggingface_hub  (what SEA-RAFT's core/ imports; not its requirements.txt)"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # what RAFT.from_pretrained looks for, in that order

#: WorldMark's analysis frame (fe:58: RH=432, RW=640) and pair step (fe:70: step=2)
RH, RW = 432, 640
STEP = PAIR_GAP
#: WorldMark's HUD boxes (fe:25): model -> (height fraction, width fraction) of the bottom-left box set to 128
WORLDMARK_HUD = {"SANA-WM-streaming": (0.18, 0.22)}
HUD_VALUE = 128
#: the config keys the model and the call read
CFG_KEYS = ("scale", "iters", "dim", "radius", "block_dims", "initial_dim", "pretrain", "num_blocks", "use_var")
#: module in the checkout's core/ -> (file, the name it must define)
MODULES = {"raft": ("core/raft.py", "RAFT"), "extractor": ("core/extractor.py", "ResNetFPN"),
           "utils.utils": ("core/utils/utils.py", "InputPadder")}
#: top-level names SEA-RAFT's core/ imports under (generic: imported in isolation, see import_checkout)
CORE_NAMES = ("raft", "update", "corr", "extractor", "layer", "utils")


class MissingSeaRaft(FeatureError, ValueError):
    """The SEA-RAFT checkout, config or weights are not usable here (a user error: printed as one message)."""


# --- WorldMark's preprocessing maths (fe:46-66) -----------------------------------------------------------------

def hud_box(hud, h: int = RH, w: int = RW) -> tuple[int, int]:
    """(first masked row, end column) of the HUD box on an ``h`` x ``w`` frame (fe:65: ``im[int(RH*(1-fh)):,
    :int(RW*fw)] = 128``)."""
    fh, fw = hud
    return int(h * (1 - fh)), int(w * fw)


def analysis_frame(frame: np.ndarray, hud=None) -> np.ndarray:
    """A decoded RGB frame as WorldMark's ``_read`` leaves it (fe:62-66): ``cv2.resize`` to 640x432 (bilinear, per
    channel, so resizing RGB equals fe's resize of BGR then conversion), the HUD box set to 128."""
    im = cv2.resize(np.ascontiguousarray(frame), (RW, RH))
    if hud:
        r0, c1 = hud_box(hud)
        im[r0:, :c1] = HUD_VALUE
    return im


def model_input_hw(h: int, w: int, scale: float) -> tuple[int, int]:
    """The size ``F.interpolate(scale_factor=2**scale)`` gives (floor of size x factor): 432x640 at -1 -> 216x320."""
    f = 2.0 ** scale
    return math.floor(h * f), math.floor(w * f)


def sintel_padding(h: int, w: int) -> list[int]:
    """[left, right, top, bottom] replicate padding SEA-RAFT's ``InputPadder`` (mode 'sintel') adds inside
    ``RAFT.forward`` to reach multiples of 8 (core/utils/utils.py:20-29), and removes from the flow."""
    pad_ht = (((h // 8) + 1) * 8 - h) % 8
    pad_wd = (((w // 8) + 1) * 8 - w) % 8
    return [pad_wd // 2, pad_wd - pad_wd // 2, pad_ht // 2, pad_ht - pad_ht // 2]


def worldmark_flow(model, args, im1: np.ndarray, im2: np.ndarray, device: str = "cpu") -> np.ndarray:
    """fe:46-53 on uint8 HxWx3 RGB frames (or N of them stacked): the final flow, resized back to HxW without the
    ``2**-scale`` factor, as float32 (2, H, W) (or (N, 2, H, W)). One pair at a time is fe's call exactly."""
    import torch
    import torch.nn.functional as F

    one = np.ndim(im1) == 3

    def t(x):
        if one:
            return torch.tensor(x, dtype=torch.float32).permute(2, 0, 1)[None].to(device)  # fe:48
        return torch.cat([torch.tensor(f, dtype=torch.float32).permute(2, 0, 1)[None] for f in x]).to(device)

    h, w = (im1.shape[0], im1.shape[1]) if one else (im1.shape[1], im1.shape[2])
    with torch.no_grad():
        i1 = F.interpolate(t(im1), scale_factor=2 ** args.scale, mode="bilinear", align_corners=False)
        i2 = F.interpolate(t(im2), scale_factor=2 ** args.scale, mode="bilinear", align_corners=False)
        o = model(i1, i2, iters=args.iters, test_mode=True)
        fl = F.interpolate(o["flow"][-1], size=(h, w), mode="bilinear", align_corners=False)
        out = fl.cpu().numpy()
    return out[0] if one else out


def radial_units(h: int = RH, w: int = RW) -> tuple[np.ndarray, np.ndarray]:
    """fe:71-72: unit vectors from the centre (w/2, h/2) to every pixel (float64, ``hypot + 1e-6``)."""
    yy, xx = np.mgrid[0:h, 0:w]
    rx, ry = xx - w / 2, yy - h / 2
    rn = np.hypot(rx, ry) + 1e-6
    return rx / rn, ry / rn


def worldmark_signals(field: np.ndarray, rad) -> tuple[float, float]:
    """fe:78: (Sx, Srad) of one half-size field (2, H, W): the float32 mean of u, and the mean of u rx + v ry."""
    u, v = field[0], field[1]
    return float(u.mean()), float((u * rad[0] + v * rad[1]).mean())


def feature_flow(field: np.ndarray, scale: float) -> np.ndarray:
    """A (2, H, W) half-size field (:func:`worldmark_flow`) as the HxWx2 flow ``FlowSignals`` takes: times
    ``2**-scale`` (a power of two: exact), i.e. SEA-RAFT's flow of the 640x432 frame (as its custom.py:90 returns)."""
    return np.ascontiguousarray(np.moveaxis(field, 0, -1) * np.float32(2.0 ** -scale), dtype=np.float32)


# --- the checkout, config and weights (checked once, like models.vggt) -----------------------------------------------

def resolve(path=None, ckpt=None, cfg=None) -> tuple[str | None, str, str | None]:
    """(checkout, weights, config): the arguments, else ``SEA_RAFT_PATH`` / ``SEA_RAFT_CKPT`` (default WorldMark's
    Hub id) / ``SEA_RAFT_CFG`` (default ``<checkout>/config/eval/spring-M.json``), read now."""
    path = str(path) if path else os.environ.get(ENV_PATH) or None
    ckpt = str(ckpt) if ckpt else os.environ.get(ENV_CKPT) or HF_ID
    cfg = str(cfg) if cfg else os.environ.get(ENV_CFG) or (str(Path(path).expanduser() / CFG_REL) if path else None)
    return path, ckpt, cfg


def configured() -> bool:
    """Whether the user pointed worldgate at a SEA-RAFT checkout (``SEA_RAFT_PATH``)."""
    return bool(os.environ.get(ENV_PATH))


def weights_kind(ckpt: str) -> str:
    """'file', 'dir', 'hub' (``owner/name``, as from_pretrained takes it) or 'absent' (a path that is not there)."""
    p = Path(ckpt).expanduser()
    if p.is_file():
        return "file"
    if p.is_dir():
        return "dir"
    looks_local = (ckpt.startswith(("/", ".", "~")) or ckpt.count("/") != 1
                   or ckpt.endswith((".pth", ".pt", ".bin", ".safetensors")))
    return "absent" if looks_local else "hub"


def _hub_cached(repo_id: str) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    cache = os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
    for name in WEIGHT_FILES:
        hit = try_to_load_from_cache(repo_id, name, cache_dir=cache)
        if isinstance(hit, str):
            return hit
    return None


def weights_file(ckpt: str) -> Path | None:
    """The local weights file ``ckpt`` names (a Hub id: from the local cache only), else None."""
    kind = weights_kind(ckpt)
    p = Path(ckpt).expanduser()
    if kind == "file":
        return p
    if kind == "dir":
        return next((p / n for n in WEIGHT_FILES if (p / n).is_file()), None)
    if kind == "absent":
        return None
    try:
        hit = _hub_cached(ckpt)
    except Exception:  # noqa: BLE001 - a malformed id is reported as missing weights
        return None
    return Path(hit) if hit else None


def read_config(cfg) -> dict:
    """The SEA-RAFT config json as a dict (config/parser.py ``json_to_args``)."""
    with open(cfg, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")  # noqa: TRY004 - reported with the unreadable configs
    return data


def missing(path=None, ckpt=None, cfg=None, import_modules: bool = True) -> list[dict]:
    """What is missing for SEA-RAFT flow, as ``catalogue.missing_models`` rows (feature, what, source, id, licence,
    fetch); empty when the checkout imports, the config reads and the weights are on this machine. Nothing is
    downloaded."""
    cfg_named = bool(cfg or os.environ.get(ENV_CFG))
    path, ckpt, cfg = resolve(path, ckpt, cfg)

    def row(what, mid, fetch, source="checkout"):
        return {"feature": "flow", "what": what, "source": source, "id": mid, "licence": LICENCE, "fetch": fetch}

    out = []
    repo = Path(path).expanduser() if path else None
    clone = f"{CLONE_CMD}; then export {ENV_PATH}=$PWD/SEA-RAFT"
    out += [row(*p) for p in checkout_problems(repo, "SEA-RAFT", "WorldMark flow, fe:13-15", ENV_PATH, clone, MODULES,
                                               REPO_URL, CLONE_CMD, DEPS_CMD,
                                               import_checkout if import_modules else None)]
    if cfg is not None and (cfg_named or (repo is not None and repo.is_dir())):  # a default config: in a checkout
        try:
            data = read_config(cfg)
            lacks = [k for k in CFG_KEYS if k not in data]
            if lacks:
                out.append(row(f"SEA-RAFT config lacks {', '.join(lacks)}", f"{ENV_CFG}={cfg}",
                               f"unset {ENV_CFG} to use the checkout's {CFG_REL} (WorldMark's spring config)"))
        except (OSError, ValueError) as e:
            out.append(row(f"SEA-RAFT config does not read ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
                           f"{ENV_CFG}={cfg}" if os.environ.get(ENV_CFG) else cfg,
                           f"unset {ENV_CFG} to use the checkout's {CFG_REL}; is {path} a full checkout?"))
    kind = weights_kind(ckpt)
    if kind == "absent":
        out.append(row("SEA-RAFT weights", f"{ENV_CKPT}={ckpt} (no such file or folder)",
                       f"{FETCH_CMD} --local-dir WEIGHTS; then export {ENV_CKPT}=WEIGHTS, or unset {ENV_CKPT} "
                       f"(WorldMark's {HF_ID} from the Hub cache)", source="hub"))
    elif kind == "dir" and weights_file(ckpt) is None:
        out.append(row(f"SEA-RAFT weights: the folder holds none of {', '.join(WEIGHT_FILES)}",
                       f"{ENV_CKPT}={ckpt}", f"{FETCH_CMD} --local-dir {ckpt}", source="hub"))
    elif kind == "hub" and weights_file(ckpt) is None:
        shown = f"{ENV_CKPT}={ckpt}" if os.environ.get(ENV_CKPT) else f"{ckpt} ({ENV_CKPT} not set: WorldMark's model)"
        out.append(row("SEA-RAFT spring-M weights (fe:36), not in the local Hub cache", shown,
                       f"hf download {ckpt} (into the HF_HOME cache), or export {ENV_CKPT}=FOLDER_OR_FILE",
                       source="hub"))
    return out


def check(path=None, ckpt=None, cfg=None, import_modules: bool = True) -> dict:
    """Fail once, in seconds, before any record, naming every missing piece with the command that gets it; returns
    the resolved ``{"repo": Path, "ckpt": str, "cfg": Path}``."""
    miss = missing(path, ckpt, cfg, import_modules)
    if miss:
        lines = [f"  {m['what']}: {m['id']}\n    -> {m['fetch']}" for m in miss]
        raise MissingSeaRaft(
            "WorldMark's flow under --backend learned runs SEA-RAFT from a checkout you point at "
            f"({ENV_PATH}=CHECKOUT; {ENV_CKPT}=HUB_ID|FOLDER|FILE, default {HF_ID}; it has no package):\n"
            + "\n".join(lines)
            + f"\nor unset {ENV_PATH} (torchvision RAFT stand-in, a deviation), or use --backend classical")
    path, ckpt, cfg = resolve(path, ckpt, cfg)
    return {"repo": Path(path).expanduser().resolve(), "ckpt": ckpt, "cfg": Path(cfg).expanduser().resolve()}


_IMPORT_LOCK = threading.Lock()
_CHECKOUTS: dict = {}  # resolved checkout -> {"RAFT", "ResNetFPN", "InputPadder"}


def _core_name(name: str) -> bool:
    return any(name == n or name.startswith(n + ".") for n in CORE_NAMES)


def import_checkout(repo) -> dict:
    """``{"RAFT", "ResNetFPN", "InputPadder"}`` from the checkout's ``core/`` (fe:15 puts it on sys.path). Its
    modules have generic top-level names (``utils``, ``layer``, ``corr``, ...), so they are imported in isolation:
    ``core/`` first on sys.path and any other module of those names set aside for the import, then sys.path and
    sys.modules put back (the imported classes keep their own references)."""
    repo = Path(repo).expanduser().resolve()
    with _IMPORT_LOCK:
        if repo in _CHECKOUTS:
            return _CHECKOUTS[repo]
        core = str(repo / "core")
        saved = {n: m for n, m in sys.modules.items() if _core_name(n)}
        for n in saved:
            del sys.modules[n]
        path0 = list(sys.path)
        sys.path.insert(0, core)
        importlib.invalidate_caches()
        try:
            raft = importlib.import_module("raft")
            fns = {"RAFT": raft.RAFT, "ResNetFPN": importlib.import_module("extractor").ResNetFPN,
                   "InputPadder": importlib.import_module("utils.utils").InputPadder}
        finally:
            for n in [n for n in sys.modules if _core_name(n)]:
                del sys.modules[n]
            sys.modules.update(saved)
            sys.path[:] = path0
        _CHECKOUTS[repo] = fns
        return fns


def make_args(cfg, url: str = HF_ID, path=None, device: str = "cuda") -> argparse.Namespace:
    """The Namespace fe:34-38 builds: config/parser.py's ``parse_args`` = the json's keys, then the parser's
    ``cfg``, ``path``, ``url``, ``device``."""
    args = argparse.Namespace(**read_config(cfg))
    for k, v in (("cfg", str(cfg)), ("path", path), ("url", url), ("device", device)):
        setattr(args, k, v)
    return args


@contextmanager
def _no_imagenet_init(ResNetFPN):
    """RAFT.__init__ builds both ResNetFPNs with ``init_weight=True`` (core/raft.py:31, 48), which loads torchvision's
    ImageNet ResNet (a download); every such weight is replaced by the checkpoint's."""
    orig = ResNetFPN.__init__

    def init(self, *a, **k):
        k["init_weight"] = False
        orig(self, *a, **k)

    ResNetFPN.__init__ = init
    try:
        yield
    finally:
        ResNetFPN.__init__ = orig


def build_model(fns: dict, args):
    """``RAFT(args)`` from the checkout, without the ImageNet init (random weights: load a checkpoint next)."""
    with _IMPORT_LOCK, _no_imagenet_init(fns["ResNetFPN"]):
        return fns["RAFT"](args)


def read_state_dict(file) -> dict:
    """The state dict of a ``.safetensors`` file or a torch file (``weights_only=True``; a ``state_dict`` / ``model``
    entry or a ``module.`` prefix are unwrapped)."""
    import torch

    file = str(file)
    if file.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(file)
    sd = torch.load(file, map_location="cpu", weights_only=True)
    for k in ("state_dict", "model"):
        if isinstance(sd, dict) and isinstance(sd.get(k), dict):
            sd = sd[k]
    if not isinstance(sd, dict):
        raise ValueError(f"not a state dict ({type(sd).__name__})")  # noqa: TRY004 - a bad weights file
    if sd and all(k.startswith("module.") for k in sd):
        sd = {k[len("module."):]: v for k, v in sd.items()}
    return sd


def load_weights(model, state: dict) -> None:
    """Load ``state`` into ``model``, requiring it to cover every parameter and buffer except BatchNorm's
    ``num_batches_tracked`` (unused in eval) and to bring nothing the model lacks."""
    res = model.load_state_dict(state, strict=False)
    miss = [k for k in res.missing_keys if not k.endswith("num_batches_tracked")]
    if miss or res.unexpected_keys:
        raise ValueError(f"the checkpoint does not match the config: missing {miss[:4]}{'...' if len(miss) > 4 else ''}"
                         f", unexpected {res.unexpected_keys[:4]}{'...' if len(res.unexpected_keys) > 4 else ''}")


_MODELS: dict = {}  # (checkout, config, weights, device) -> (model, args): loaded once per process
_MODELS_LOCK = threading.Lock()


def load_model(repo, cfg, ckpt: str = HF_ID, device: str = "cpu"):
    """(SEA-RAFT in eval mode on ``device``, its args), once per (checkout, config, weights, device): fe:33-40 with
    the weights resolved as RAFT.from_pretrained resolves them (a Hub id: model.safetensors, else pytorch_model.bin,
    downloaded unless HF_HUB_OFFLINE; a folder: the same names in it) or a file."""
    key = (str(repo), str(cfg), str(ckpt), str(device))
    with _MODELS_LOCK:
        if key not in _MODELS:
            fns = import_checkout(repo)
            kind = weights_kind(ckpt)
            args = make_args(cfg, url=ckpt if kind == "hub" else HF_ID, path=ckpt if kind != "hub" else None,
                             device=device)
            model = build_model(fns, args)
            try:
                file = weights_file(ckpt)
                if file is None and kind == "hub":
                    file = Path(_hub_download(ckpt))
                if file is None:
                    raise FileNotFoundError(f"none of {', '.join(WEIGHT_FILES)} in {ckpt}")
                load_weights(model, read_state_dict(file))
            except Exception as e:  # noqa: BLE001 - any failure to read the user's weights is what to report
                raise MissingSeaRaft(
                    f"cannot load the SEA-RAFT weights {ckpt} into RAFT({Path(cfg).name}) ({error_line(e)}): "
                    f"{ENV_CKPT} must be the spring-M checkpoint "
                    f"({FETCH_CMD}) and {ENV_CFG} its config ({CFG_REL})") from None
            _MODELS[key] = (model.to(device).eval(), args)
        return _MODELS[key]


def _hub_download(repo_id: str) -> str:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return hf_hub_download(repo_id, WEIGHT_FILES[0])
    except EntryNotFoundError:
        return hf_hub_download(repo_id, WEIGHT_FILES[1])


def status() -> tuple[bool, str]:
    """(runnable, why not) for ``models.loaders.searaft_status``: checked here, nothing downloaded."""
    if not configured():
        return False, (f"{ENV_PATH} is not set: point it at a {REPO_URL} checkout ({CLONE_CMD}; weights: "
                       f"{FETCH_CMD}); until then --backend learned runs torchvision RAFT (a deviation)")
    miss = missing()
    return (not miss), "; ".join(f"{m['what']}: {m['id']} -> {m['fetch']}" for m in miss)


