"""The ``flow`` feature: optical flow between frames i and i+2 (WorldMark's pairing) and its signals.

- classical (``FlowExtractor``): OpenCV DIS dense optical flow, in pixels of a 640-pixel-wide reference frame: ``sx``
  (mean horizontal flow), ``sy``, ``srad`` (mean flow along unit vectors pointing away from the image centre),
  ``speed`` (mean flow magnitude) and a coarse 8x8 grid of mean flow;
- learned: SEA-RAFT spring-M, WorldMark's model, from a checkout (``SeaRaftFlow``, models/searaft.py) where
  ``SEA_RAFT_PATH`` is configured, else torchvision RAFT (``LearnedFlow``, a deviation named in
  ``models.loaders.SEARAFT_REASON``): ``learned_flow`` picks the first available.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import cv2
import numpy as np

from .core import Choice, Extractor
from .models.catalogue import HubModels, load_or_explain
from .models.loaders import batch_for, require_torch, resolve_device, to_tensor
from .models.searaft import (
    CFG_REL,
    ENV_CKPT,
    HF_ID,
    RH,
    RW,
    STEP,
    analysis_frame,
    check,
    configured,
    feature_flow,
    load_model,
    radial_units,
    worldmark_flow,
    worldmark_signals,
)
from .signals import PAIR_GAP, FlowSignals, to_gray_norm


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
        g = to_gray_norm(frame)
        self.prev.append(g)
        if len(self.prev) > PAIR_GAP:
            self.signals.add(self.dis.calc(self.prev.pop(0), g, None))

    def finish(self):
        return self.signals.arrays()


class LearnedFlow(HubModels, Extractor):
    """RAFT flow between frames i and i+2 at the analysis size (multiples of 8), same signals as classical; pairs go
    through RAFT ``batch_size`` at a time (the signals are added in frame order)."""

    name = "flow"
    version = "1"
    backend = "learned"
    max_side = 640
    MIN_SIDE = 128

    def __init__(self, model=None, iters: int = 12, device: str = "auto", batch_size: int | None = None):
        self.model, self.iters, self.device, self.given_batch = model, iters, resolve_device(device), batch_size
        self.batch_size = batch_for(self.name, self.device, batch_size, free_bytes=0)  # resolved again at start

    def _model(self):
        if self.model is None:
            def load():
                from torchvision.models.optical_flow import Raft_Large_Weights, raft_large

                return raft_large(weights=Raft_Large_Weights.C_T_SKHT_V2, progress=False)

            self.model = load_or_explain("flow", "torchvision raft_large C_T_SKHT_V2", load)
        return self.model.eval().to(self.device)

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.prev, self.pairs = [], []
        self.signals = FlowSignals()

    def _run(self):
        torch = require_torch()
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
        x = to_tensor(frame, (w8, h8), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))  # RAFT takes [-1, 1]
        self.prev.append(x)
        if len(self.prev) > 2:
            self.pairs.append((self.prev.pop(0), x))
            if len(self.pairs) >= self.batch_size:
                self._run()

    def finish(self):
        self._run()
        return self.signals.arrays()


class SeaRaftFlow(Extractor):
    """WorldMark's SEA-RAFT flow (fe:46-79) between frames i and i+2 on the 640x432 frame, turned into the same
    ``flow`` feature as LearnedFlow (FlowSignals), plus fe's own Sx / Srad (``wm_sx``, ``wm_srad``). Pairs go
    through the model ``batch_size`` at a time; the default 1 is fe's call exactly (a batch of several is the same
    maths, but kernels may round differently: ~3e-6 px on CPU)."""

    name = "flow"
    version = "searaft-1"  # a cache key of its own: never mixed with torchvision RAFT's flow@1-learned
    backend = "learned"
    max_side = None  # native frames: WorldMark resizes the decoded frame itself (fe:62)

    def __init__(self, path=None, ckpt=None, cfg=None, device: str | None = None, batch_size: int = 1, hud=None,
                 model=None, args=None):
        self.path, self.ckpt, self.cfg, self.device = path, ckpt, cfg, device
        self.batch_size, self.hud = max(1, int(batch_size)), (tuple(hud) if hud else None)
        self.model, self.args = model, args
        self._paths = None

    def _device(self) -> str:
        """The given device, else CUDA where visible (WorldMark runs on CUDA, fe:37, 48), else CPU."""
        if self.device is None:
            self.device = resolve_device("auto")
        return self.device

    def check(self, import_modules: bool = True) -> dict:
        if self._paths is None:
            self._paths = check(self.path, self.ckpt, self.cfg, import_modules)
        return self._paths

    def _model(self):
        if self.model is None:
            p = self.check()
            self.model, self.args = load_model(p["repo"], p["cfg"], p["ckpt"], self._device())
        return self.model, self.args

    def start(self, rec):
        super().start(rec)
        if self.model is None:
            self.check()
        self.prev, self.pairs = [], []
        self.signals = FlowSignals()
        self.wm = {"wm_sx": [], "wm_srad": []}
        self._rad = None

    def update(self, i, frame):
        if frame is None:
            return
        im = analysis_frame(frame, self.hud)
        self.prev.append(im)
        if len(self.prev) > STEP:
            self.pairs.append((self.prev.pop(0), im))
            if len(self.pairs) >= self.batch_size:
                self._run()

    def _run(self):
        if not self.pairs:
            return
        model, args = self._model()
        dev = self._device()
        if len(self.pairs) == 1:
            fields = [worldmark_flow(model, args, *self.pairs[0], device=dev)]
        else:
            fields = list(worldmark_flow(model, args, np.stack([p[0] for p in self.pairs]),
                                         np.stack([p[1] for p in self.pairs]), device=dev))
        self.pairs = []
        for f in fields:
            if self._rad is None:
                self._rad = radial_units(f.shape[1], f.shape[2])
            sx, srad = worldmark_signals(f, self._rad)
            self.wm["wm_sx"].append(sx)
            self.wm["wm_srad"].append(srad)
            self.signals.add(feature_flow(f, args.scale))

    def finish(self):
        self._run()
        return {**self.signals.arrays(STEP), **{k: np.asarray(v, np.float64) for k, v in self.wm.items()}}

    def config(self):
        a = self.args
        return {**super().config(), "model": "SEA-RAFT (checkout)",
                "weights": self.ckpt or os.environ.get(ENV_CKPT) or HF_ID,
                "config": Path(str(getattr(a, "cfg", CFG_REL))).name, "size": [RH, RW],
                "scale": getattr(a, "scale", None), "iters": getattr(a, "iters", None), "step": STEP,
                "hud": list(self.hud) if self.hud else None, "batch_size": self.batch_size,
                "unit": "px of the 640x432 frame (SEA-RAFT's field x 2**-scale; fe scores half, fe:52)"}


    @classmethod
    def available(cls) -> bool:
        """Where SEA_RAFT_PATH names a checkout (checked in full by ``preflight``); else torchvision RAFT runs."""
        return configured()

    @classmethod
    def preflight(cls) -> None:
        check()  # every missing piece of the checkout named at once, before the first record


#: the learned ``flow`` feature: WorldMark's SEA-RAFT where its checkout is configured, else torchvision RAFT
learned_flow = Choice("flow", SeaRaftFlow, LearnedFlow)
