"""ArcFace face embeddings for WorldMemBench Human Identity (the paper's Human Memory paragraph: "Identity uses ArcFace
face embeddings", compared with the fixed reference set V as Eq. 4).

Two ways to run the same network, chosen by the weights file the user points at (``WORLDGATE_ARCFACE`` or the
``arcface=`` argument; nothing is downloaded):

- ``*.onnx``: insightface's recognition model as its model zoo ships it (``buffalo_l/w600k_r50.onnx``, an IResNet-50
  trained on WebFace600K), run with ``onnxruntime`` (optional: ``pip install onnxruntime``; checked installable from
  PyPI here, not a dependency). insightface itself is not needed: its ``ArcFaceONNX.get_feat`` is one
  ``cv2.dnn.blobFromImages(imgs, 1/127.5, (112, 112), (127.5,) * 3, swapRB=True)`` and a session run, which is what
  :class:`OnnxArcFace` does (frames here are already RGB).
- ``*.safetensors`` / ``*.pth``: an arcface_torch IResNet state dict (insightface/recognition/arcface_torch
  ``backbones/iresnet.py`` key names: ``conv1 bn1 prelu layer1..4 bn2 fc features``), built by :func:`iresnet_from_state_dict`
  with the depths and widths the state dict has, input RGB ``(x / 255 - 0.5) / 0.5`` at 112 x 112.

The face crop: insightface aligns a detected face (SCRFD ``det_10g.onnx`` + 5 landmarks) to 112 x 112. No face
detector is packaged here, so the crop is taken from the tracked person mask: the square at the top of the mask's tight
box (side = the box's width, at most its height, grown by ``FACE_MARGIN``), resized to 112 x 112 — a head crop, not a
landmark-aligned face (a deviation, named in the feature's config as ``face_crop``).

The weights: ``buffalo_l`` is insightface's, licensed for non-commercial research only (its model zoo README);
arcface_torch's own checkpoints likewise. Both stay the user's download.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from ..core import FeatureError

ARCFACE_ENV = "WORLDGATE_ARCFACE"
ARCFACE_ID = "insightface buffalo_l/w600k_r50.onnx"
ARCFACE_URL = "https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip"
ARCFACE_DEFAULT = Path("~/.insightface/models/buffalo_l/w600k_r50.onnx")
ARCFACE_LICENCE = "non-commercial research only (insightface model zoo); code MIT"
ARCFACE_FETCH = (f"curl -L -o /tmp/buffalo_l.zip {ARCFACE_URL} && mkdir -p ~/.insightface/models/buffalo_l && "
                 f"unzip -o /tmp/buffalo_l.zip -d ~/.insightface/models/buffalo_l  (or set {ARCFACE_ENV}=PATH)")
SIZE = 112
FACE_MARGIN = 0.1
FACE_CROP = "top square of the person mask's box (no face detector packaged; not landmark-aligned)"


def arcface_path(path: str | os.PathLike | None = None) -> Path:
    """The ArcFace weights file: ``path``, else ``$WORLDGATE_ARCFACE``, else insightface's default location."""
    p = path or os.environ.get(ARCFACE_ENV) or ARCFACE_DEFAULT
    return Path(p).expanduser()


def arcface_present(path=None) -> bool:
    p = arcface_path(path)
    if p.suffix == ".onnx":
        import importlib.util

        return p.is_file() and importlib.util.find_spec("onnxruntime") is not None
    return p.is_file()


# ---------------------------------------------------------------------------------------------- the torch network
def _iresnet_classes():
    import torch

    nn = torch.nn

    class IBasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.bn1 = nn.BatchNorm2d(inplanes, eps=1e-05)
            self.conv1 = nn.Conv2d(inplanes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes, eps=1e-05)
            self.prelu = nn.PReLU(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes, eps=1e-05)
            self.downsample = downsample

        def forward(self, x):
            out = self.bn3(self.conv2(self.prelu(self.bn2(self.conv1(self.bn1(x))))))
            return out + (self.downsample(x) if self.downsample is not None else x)

    class IResNet(nn.Module):
        """arcface_torch's IResNet (``iresnet.py``): 4 stride-2 stages, 112 x 112 in, 7 x 7 before ``fc``."""

        fc_scale = 7 * 7

        def __init__(self, layers=(3, 4, 14, 3), widths=(64, 128, 256, 512), num_features=512, stem=64):
            super().__init__()
            self.inplanes = stem
            self.conv1 = nn.Conv2d(3, stem, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(stem, eps=1e-05)
            self.prelu = nn.PReLU(stem)
            for j, (n, w) in enumerate(zip(layers, widths)):
                setattr(self, f"layer{j + 1}", self._make_layer(w, n))
            self.bn2 = nn.BatchNorm2d(widths[-1], eps=1e-05)
            self.dropout = nn.Dropout(p=0.0)
            self.fc = nn.Linear(widths[-1] * self.fc_scale, num_features)
            self.features = nn.BatchNorm1d(num_features, eps=1e-05)

        def _make_layer(self, planes, blocks):
            # every stage opens with stride 2, so its first block always has a projection shortcut (as iresnet.py)
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, 2, bias=False),
                                 nn.BatchNorm2d(planes, eps=1e-05))
            mods = [IBasicBlock(self.inplanes, planes, 2, down)]
            self.inplanes = planes
            mods += [IBasicBlock(planes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*mods)

        def forward(self, x):
            x = self.prelu(self.bn1(self.conv1(x)))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            x = self.dropout(torch.flatten(self.bn2(x), 1))
            return self.features(self.fc(x))

    return IResNet


def iresnet(layers=(3, 4, 14, 3), widths=(64, 128, 256, 512), num_features=512, stem=64):
    """An arcface_torch IResNet (``layers`` (3, 4, 14, 3): r50; (2, 2, 2, 2): r18; (3, 13, 30, 3): r100)."""
    return _iresnet_classes()(tuple(layers), tuple(widths), num_features, stem)


def iresnet_from_state_dict(sd: dict):
    """The IResNet a state dict describes (depths counted from ``layerN.M.*`` keys, widths from conv shapes)."""
    try:
        layers = tuple(1 + max(int(k.split(".")[1]) for k in sd if k.startswith(f"layer{j}.")) for j in range(1, 5))
        widths = tuple(int(sd[f"layer{j}.0.conv1.weight"].shape[0]) for j in range(1, 5))
        stem, nf = int(sd["conv1.weight"].shape[0]), int(sd["fc.weight"].shape[0])
    except (KeyError, ValueError) as e:
        raise ValueError(f"not an arcface_torch IResNet state dict ({type(e).__name__}: {e}; keys "
                         f"{sorted(sd)[:5]})") from None
    net = iresnet(layers, widths, nf, stem)
    net.load_state_dict(sd)
    return net.eval()


class TorchArcFace:
    """An IResNet run with torch: RGB crops (N, 112, 112, 3) uint8 -> (N, D) unit embeddings."""

    backend = "torch"

    def __init__(self, net, device: str = "cpu"):
        self.net, self.device = net.eval().to(device), device

    def __call__(self, crops: np.ndarray) -> np.ndarray:
        import torch

        x = torch.from_numpy(np.ascontiguousarray(crops, np.float32)).permute(0, 3, 1, 2)
        x = ((x / 255.0 - 0.5) / 0.5).to(self.device)
        with torch.inference_mode():
            e = self.net(x).float().cpu().numpy()
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)


class OnnxArcFace:
    """insightface's recognition ONNX run with onnxruntime, with its ``ArcFaceONNX`` preprocessing (RGB, (x - 127.5) /
    127.5, NCHW); embeddings L2-normalised (insightface's ``normed_embedding``)."""

    backend = "onnxruntime"

    def __init__(self, path: str, device: str = "cpu"):
        try:
            import onnxruntime as ort
        except ImportError:
            raise FeatureError("ArcFace from an .onnx file needs onnxruntime (optional): pip install onnxruntime "
                               "(or point WORLDGATE_ARCFACE at an arcface_torch .safetensors/.pth)") from None
        prov = ["CUDAExecutionProvider", "CPUExecutionProvider"] if str(device).startswith("cuda") else \
            ["CPUExecutionProvider"]
        prov = [p for p in prov if p in ort.get_available_providers()] or ["CPUExecutionProvider"]
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # deterministic and polite on shared cores
        self.sess = ort.InferenceSession(str(path), sess_options=opts, providers=prov)
        self.input = self.sess.get_inputs()[0].name

    def __call__(self, crops: np.ndarray) -> np.ndarray:
        x = ((np.asarray(crops, np.float32) - 127.5) / 127.5).transpose(0, 3, 1, 2)
        e = np.asarray(self.sess.run(None, {self.input: np.ascontiguousarray(x)})[0], np.float32)
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)


def load_arcface(path=None, device: str = "cpu"):
    """ArcFace from a local weights file (``.onnx`` with onnxruntime, else a torch IResNet state dict)."""
    p = arcface_path(path)
    if not p.is_file():
        raise FeatureError(f"ArcFace weights not found at {p}: {ARCFACE_FETCH}")
    if p.suffix == ".onnx":
        return OnnxArcFace(str(p), device)
    import torch

    if p.suffix == ".safetensors":
        from safetensors.torch import load_file

        sd = load_file(str(p))
    else:
        path = str(p)
        sd = torch.load(path, map_location="cpu", weights_only=True)
        sd = sd.get("state_dict", sd) if isinstance(sd, dict) else sd
    return TorchArcFace(iresnet_from_state_dict(sd), device)


# ---------------------------------------------------------------------------------------------- crops, identity
def face_crop(frame: np.ndarray, mask: np.ndarray, size: int = SIZE) -> np.ndarray | None:
    """A ``size`` x ``size`` RGB crop of the head of the person in ``mask`` (see the module docstring); None for an
    empty mask. Out-of-frame parts are edge-replicated."""
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
    side = max(2, min(x1 - x0, y1 - y0))
    s = round(side * (1 + 2 * FACE_MARGIN))
    cx, cy = (x0 + x1) / 2.0, y0 + side / 2.0
    a, b = round(cx - s / 2), round(cy - s / 2)
    H, W = frame.shape[:2]
    pad = max(0, -a, -b, a + s - W, b + s - H)
    f = cv2.copyMakeBorder(frame, pad, pad, pad, pad, cv2.BORDER_REPLICATE) if pad else frame
    crop = f[b + pad:b + pad + s, a + pad:a + pad + s]
    return cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA if s > size else cv2.INTER_LINEAR)


class FaceIdentity:
    """ArcFace embeddings of the faces of person masks: ``embed(frame, masks)`` -> one unit vector or None per mask.
    The model is loaded on first use from ``path`` (see :func:`arcface_path`)."""

    def __init__(self, model=None, path=None, device: str = "cpu"):
        self.model, self.path, self.device = model, path, device

    def _model(self):
        if self.model is None:
            self.model = load_arcface(self.path, self.device)
        return self.model

    def embed(self, frame: np.ndarray, masks: list) -> list:
        crops = [face_crop(frame, m) for m in masks]
        ok = [c for c in crops if c is not None]
        if not ok:
            return [None] * len(masks)
        e = iter(self._model()(np.stack(ok)))
        return [None if c is None else next(e) for c in crops]

    def config(self) -> dict:
        return {"model": str(arcface_path(self.path)) if self.model is None else type(self.model).__name__,
                "face_crop": FACE_CROP}


def identity_scores(ref: list, emb: np.ndarray | None) -> float:
    """clip(cos(mean of the V reference embeddings, the revisit's), 0, 1); NaN without a reference or an embedding."""
    if not ref or emb is None:
        return float("nan")
    r = np.mean(ref, axis=0)
    r = r / max(float(np.linalg.norm(r)), 1e-12)
    return float(np.clip(np.dot(r, emb), 0.0, 1.0))
