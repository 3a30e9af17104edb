"""SEA-RAFT flow (evaluate/features/models/searaft.py): WorldMark's preprocessing maths by hand, the checkout / config /
weights checks and their messages, the loading path against a fake checkout, and (gated on ``SEA_RAFT_CHECKOUT`` and
``WORLDMARK_CHECKOUT``) the real SEA-RAFT code with a tiny random config against WorldMark's own flow_eval.py."""

import argparse
import importlib.util
import json
import os
import sys
import textwrap
from pathlib import Path

import cv2
import numpy as np
import pytest

from worldgate.evaluate.features.models import searaft as LS
from worldgate.evaluate.features.flow import SeaRaftFlow
from worldgate.evaluate.features.signals import FlowSignals

ENV = (LS.ENV_PATH, LS.ENV_CKPT, LS.ENV_CFG)
#: the keys of SEA-RAFT's config/eval/spring-M.json that the model and the call read (values as published)
SPRING_M = {"use_var": True, "var_min": 0, "var_max": 10, "pretrain": "resnet34", "initial_dim": 64,
            "block_dims": [64, 128, 256], "radius": 4, "dim": 128, "num_blocks": 2, "iters": 4, "scale": -1}
#: a tiny random SEA-RAFT (about 0.1 M parameters)
TINY = {"initial_dim": 8, "block_dims": [8, 12, 16], "dim": 16, "radius": 2, "num_blocks": 1, "iters": 2,
        "pretrain": "resnet18"}


@pytest.fixture
def clean(monkeypatch, tmp_path):
    for k in ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty Hub cache
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    saved = list(sys.path)
    yield
    sys.path[:] = saved
    LS._MODELS.clear()
    LS._CHECKOUTS.clear()


# --- preprocessing maths ---------------------------------------------------------------------------------------------

def test_worldmark_sizes_padding_and_hud_by_hand():
    assert (LS.RH, LS.RW, LS.STEP) == (432, 640, 2)
    assert LS.model_input_hw(432, 640, -1) == (216, 320)  # spring-M: scale -1 (fe:49-50)
    assert LS.model_input_hw(432, 640, 0) == (432, 640)
    assert LS.model_input_hw(540, 960, -1) == (270, 480)
    assert LS.model_input_hw(433, 641, -1) == (216, 320)  # floor
    # InputPadder('sintel'): [left, right, top, bottom] to multiples of 8
    assert LS.sintel_padding(216, 320) == [0, 0, 0, 0]  # WorldMark's input needs none
    assert LS.sintel_padding(270, 480) == [0, 0, 1, 1]  # 270 -> 272
    assert LS.sintel_padding(100, 203) == [2, 3, 2, 2]  # 100 -> 104, 203 -> 208
    assert LS.sintel_padding(7, 9) == [3, 4, 0, 1]
    # SANA-WM-streaming's HUD (fe:25, 65): 432 * (1 - 0.18) = 354.24 -> row 354; 640 * 0.22 = 140.8 -> column 140
    assert LS.WORLDMARK_HUD["SANA-WM-streaming"] == (0.18, 0.22)
    assert LS.hud_box((0.18, 0.22)) == (354, 140)
    assert LS.hud_box((0.5, 0.5), 10, 20) == (5, 10)


def test_analysis_frame_is_fe_read():
    """Resizing the RGB frame equals fe:62-66 (resize the BGR frame, mask, convert), value for value."""
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (270, 500, 3), dtype=np.uint8)
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    for hud in (None, (0.18, 0.22)):
        im = cv2.resize(bgr, (640, 432))
        if hud:
            fh, fw = hud
            im[int(432 * (1 - fh)):, :int(640 * fw)] = 128
        want = cv2.cvtColor(im, cv2.COLOR_BGR2RGB)
        got = LS.analysis_frame(rgb, hud)
        assert got.shape == (432, 640, 3) and got.dtype == np.uint8
        assert np.array_equal(got, want)
    got = LS.analysis_frame(rgb, (0.18, 0.22))
    assert (got[354:, :140] == 128).all() and not (got[353, :140] == 128).all() and not (got[354:, 140] == 128).all()


def test_feature_flow_is_the_field_doubled_and_fe_reads_half():
    """The feature holds the 640-wide flow (field x 2**-scale, exact); WorldMark's protocol halves it back."""
    H, W = 432, 640
    field = np.empty((2, H, W), np.float32)
    field[0], field[1] = 1.5, -0.25
    f = LS.feature_flow(field, -1)
    assert f.shape == (H, W, 2) and f.dtype == np.float32 and f.flags.c_contiguous
    assert (f[..., 0] == 3.0).all() and (f[..., 1] == -0.5).all()
    assert np.array_equal(LS.feature_flow(field, 0)[..., 0], field[0])
    rng = np.random.default_rng(2)
    field = rng.normal(0, 3, (2, H, W)).astype(np.float32)
    assert np.array_equal(LS.feature_flow(field, -1) / 2, np.moveaxis(field, 0, -1))  # a power of two: exact
    s = FlowSignals()
    s.add(LS.feature_flow(np.stack([np.full((H, W), 1.5, np.float32), np.full((H, W), -0.25, np.float32)]), -1))
    a = s.arrays()
    assert a["sx"][0] == 3.0 and a["sy"][0] == -0.5 and a["speed"][0] == pytest.approx(np.hypot(3.0, 0.5))
    assert int(a["gap"]) == 2


def test_radial_units_by_hand():
    rx, ry = LS.radial_units(4, 6)  # centre (3, 2)
    assert rx.shape == (4, 6) and rx[2, 3] == 0.0 and ry[2, 3] == 0.0  # the centre pixel: 0 / 1e-6
    assert rx[2, 5] == pytest.approx(1.0) and ry[0, 3] == pytest.approx(-1.0)
    assert rx[0, 0] == pytest.approx(-3 / np.hypot(3, 2)) and ry[0, 0] == pytest.approx(-2 / np.hypot(3, 2))
    field = np.zeros((2, 4, 6), np.float32)
    field[0] = 2.0
    sx, srad = LS.worldmark_signals(field, (rx, ry))
    assert sx == 2.0 and srad == pytest.approx(2.0 * rx.mean()) and srad < 0  # fe's grid is not symmetric


def test_make_args_is_parse_args(tmp_path):
    cfg = tmp_path / "spring-M.json"
    cfg.write_text(json.dumps({"name": "spring-M", **SPRING_M}))
    a = LS.make_args(cfg, device="cpu")
    assert {k: getattr(a, k) for k in SPRING_M} == SPRING_M
    assert (a.cfg, a.path, a.url, a.device) == (str(cfg), None, LS.HF_ID, "cpu")
    assert LS.model_input_hw(432, 640, a.scale) == (216, 320) and a.iters == 4


# --- checkout, config and weights checks -----------------------------------------------------------------------------

def test_resolve_defaults_and_overrides(clean, monkeypatch, tmp_path):
    assert LS.resolve() == (None, LS.HF_ID, None) and not LS.configured()
    assert LS.HF_ID == "MemorySlices/Tartan-C-T-TSKH-spring540x960-M"
    monkeypatch.setenv(LS.ENV_PATH, str(tmp_path / "SEA-RAFT"))
    assert LS.configured()
    assert LS.resolve() == (str(tmp_path / "SEA-RAFT"), LS.HF_ID, str(tmp_path / "SEA-RAFT/config/eval/spring-M.json"))
    monkeypatch.setenv(LS.ENV_CKPT, "/w/x.pth")
    monkeypatch.setenv(LS.ENV_CFG, "/c/other.json")
    assert LS.resolve() == (str(tmp_path / "SEA-RAFT"), "/w/x.pth", "/c/other.json")
    assert LS.resolve("/a", "/b", "/c") == ("/a", "/b", "/c")


def test_weights_resolution(clean, tmp_path):
    f = tmp_path / "w.pth"
    f.write_bytes(b"x")
    assert LS.weights_kind(str(f)) == "file" and LS.weights_file(str(f)) == f
    d = tmp_path / "d"
    d.mkdir()
    assert LS.weights_kind(str(d)) == "dir" and LS.weights_file(str(d)) is None
    (d / "pytorch_model.bin").write_bytes(b"x")
    assert LS.weights_file(str(d)) == d / "pytorch_model.bin"
    (d / "model.safetensors").write_bytes(b"x")
    assert LS.weights_file(str(d)) == d / "model.safetensors"  # from_pretrained's order
    assert LS.weights_kind(LS.HF_ID) == "hub" and LS.weights_file(LS.HF_ID) is None  # the empty cache
    for absent in (str(tmp_path / "nope"), "./w.pth", "a/b/c", "model.safetensors", "~/x"):
        assert LS.weights_kind(absent) == "absent" and LS.weights_file(absent) is None
    # a Hub id in the local cache (the layout hf download writes)
    snap = tmp_path / "hf" / "hub" / "models--MemorySlices--Tartan-C-T-TSKH-spring540x960-M"
    (snap / "refs").mkdir(parents=True)
    (snap / "refs" / "main").write_text("abc123")
    (snap / "snapshots" / "abc123").mkdir(parents=True)
    (snap / "snapshots" / "abc123" / "model.safetensors").write_bytes(b"x")
    assert LS.weights_file(LS.HF_ID) == snap / "snapshots" / "abc123" / "model.safetensors"


def test_missing_pieces_are_named_with_commands(clean, tmp_path):
    rows = LS.missing()
    assert [r["id"] for r in rows] == ["$SEA_RAFT_PATH (not set)",
                                       f"{LS.HF_ID} (SEA_RAFT_CKPT not set: WorldMark's model)"]
    assert rows[0]["fetch"] == ("git clone https://github.com/princeton-vl/SEA-RAFT; "
                                "then export SEA_RAFT_PATH=$PWD/SEA-RAFT")
    assert rows[1]["fetch"].startswith(f"hf download {LS.HF_ID}") and rows[1]["source"] == "hub"
    assert all(r["feature"] == "flow" and "BSD-3-Clause" in r["licence"] for r in rows)
    with pytest.raises(LS.MissingSeaRaft) as e:
        LS.check()
    msg = str(e.value)
    for s in ("SEA_RAFT_PATH", "SEA_RAFT_CKPT", "git clone https://github.com/princeton-vl/SEA-RAFT",
              f"hf download {LS.HF_ID}", "unset SEA_RAFT_PATH", "--backend classical"):
        assert s in msg
    assert isinstance(e.value, ValueError)
    # no such folder; an empty folder (every module named, and the default config unreadable); a folder of weights
    # without a weights file
    assert "(no such folder)" in LS.missing(tmp_path / "nope", str(tmp_path))[0]["id"]
    gone = LS.missing(tmp_path / "nope", str(tmp_path / "gone.pth"))[1]
    assert gone["id"] == f"SEA_RAFT_CKPT={tmp_path / 'gone.pth'} (no such file or folder)"
    assert gone["fetch"].startswith(f"hf download {LS.HF_ID} --local-dir WEIGHTS")
    (tmp_path / "empty").mkdir()
    (tmp_path / "wdir").mkdir()
    what = LS.missing(tmp_path / "empty", tmp_path / "wdir")
    assert len(what) == 3
    for name in ("raft.RAFT (core/raft.py)", "extractor.ResNetFPN (core/extractor.py)",
                 "utils.utils.InputPadder (core/utils/utils.py)"):
        assert name in what[0]["what"]
    assert "config does not read (FileNotFoundError" in what[1]["what"]
    assert "holds none of model.safetensors, pytorch_model.bin" in what[2]["what"]
    assert what[2]["fetch"] == f"hf download {LS.HF_ID} --local-dir {tmp_path / 'wdir'}"
    # the extractor fails at its first record, before any frame
    with pytest.raises(LS.MissingSeaRaft, match="SEA_RAFT_PATH"):
        SeaRaftFlow().start(None)


# --- a fake checkout: the loading path without SEA-RAFT ---------------------------------------------------------------

FAKE_RAFT = '''
import torch
import torch.nn as nn
from extractor import ResNetFPN
from utils.utils import InputPadder
from layer import HELPER
BUILT = []


class RAFT(nn.Module):
    def __init__(self, args):
        super().__init__()
        BUILT.append(args)
        self.args = args
        self.fnet = ResNetFPN(args, init_weight=True)
        self.gain = nn.Parameter(torch.zeros(()))
        self.bn = nn.BatchNorm2d(2)

    def forward(self, image1, image2, iters=None, test_mode=False):
        self.seen = (tuple(image1.shape), iters, test_mode, float(image1.min()), float(image1.max()))
        flow = (image2 - image1)[:, :2] * self.gain + self.fnet.w
        return {"flow": [flow * 0, flow], "final": flow}
'''
FAKE_EXTRACTOR = '''
import torch
import torch.nn as nn
INITS = []


class ResNetFPN(nn.Module):
    def __init__(self, args, input_dim=3, init_weight=False):
        super().__init__()
        INITS.append(init_weight)
        self.w = nn.Parameter(torch.zeros(()))
        if init_weight:
            raise RuntimeError("would download torchvision's ImageNet ResNet")
'''


def write_checkout(root, raft=FAKE_RAFT, cfg=None):
    (root / "core" / "utils").mkdir(parents=True)
    (root / "core" / "raft.py").write_text(textwrap.dedent(raft))
    (root / "core" / "extractor.py").write_text(FAKE_EXTRACTOR)
    (root / "core" / "layer.py").write_text("HELPER = 1\n")
    (root / "core" / "utils" / "__init__.py").write_text("")
    (root / "core" / "utils" / "utils.py").write_text("class InputPadder:\n    pass\n")
    (root / "config" / "eval").mkdir(parents=True)
    (root / "config" / "eval" / "spring-M.json").write_text(json.dumps(cfg or {"name": "spring-M", **SPRING_M}))
    return root


def test_checkout_imports_in_isolation(clean, tmp_path):
    import types

    repo = write_checkout(tmp_path / "SEA-RAFT")
    other = types.ModuleType("utils")  # somebody else's top-level `utils`
    sys.modules["utils"] = other
    path0 = list(sys.path)
    try:
        fns = LS.import_checkout(repo)
        assert sys.modules["utils"] is other and "raft" not in sys.modules and "layer" not in sys.modules
        assert sys.path == path0
        assert Path(fns["RAFT"].forward.__code__.co_filename) == (repo / "core" / "raft.py").resolve()
        assert LS.import_checkout(repo) is fns  # once per process
    finally:
        sys.modules.pop("utils", None)
    only = LS.missing(repo, "someone/absent-model")  # the checkout and its config are fine: only the weights
    assert len(only) == 1 and only[0]["source"] == "hub" and "not in the local Hub cache" in only[0]["what"]
    broken = write_checkout(tmp_path / "broken", raft="import no_such_dependency_xyz\nclass RAFT: pass\n")
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"x")
    what = LS.missing(broken, f)
    assert len(what) == 1 and "does not import (ModuleNotFoundError" in what[0]["what"]
    assert "no_such_dependency_xyz" in what[0]["what"] and what[0]["fetch"] == LS.DEPS_CMD
    bad_cfg = tmp_path / "bad.json"
    bad_cfg.write_text(json.dumps({"scale": -1}))
    what = LS.missing(repo, f, bad_cfg)
    assert len(what) == 1 and what[0]["what"].startswith("SEA-RAFT config lacks iters, dim, radius")


def test_load_model_without_imagenet_init_and_strict_weights(clean, tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    repo = write_checkout(tmp_path / "SEA-RAFT")
    cfg = repo / LS.CFG_REL
    wdir = tmp_path / "weights"
    wdir.mkdir()
    sd = {"fnet.w": torch.tensor(0.5), "gain": torch.tensor(2.0), "bn.weight": torch.ones(2), "bn.bias": torch.zeros(2),
          "bn.running_mean": torch.zeros(2), "bn.running_var": torch.ones(2)}  # no num_batches_tracked: tolerated
    save_file(sd, str(wdir / "model.safetensors"))
    assert LS.missing(repo, wdir) == []
    paths = LS.check(repo, wdir)
    assert paths == {"repo": repo.resolve(), "ckpt": str(wdir), "cfg": cfg.resolve()}
    model, args = LS.load_model(repo, cfg, str(wdir), "cpu")
    ext = sys.modules.get("extractor")
    assert ext is None  # imported in isolation
    assert not model.training and float(model.gain) == 2.0 and float(model.fnet.w) == 0.5
    assert (args.scale, args.iters, args.path, args.url, args.device) == (-1, 4, str(wdir), LS.HF_ID, "cpu")
    assert LS.load_model(repo, cfg, str(wdir), "cpu")[0] is model  # once per process
    # the fake ResNetFPN raises on init_weight=True: it was built with it off, and is restored afterwards
    fns = LS.import_checkout(repo)
    with pytest.raises(RuntimeError, match="download"):
        fns["RAFT"](argparse.Namespace(**SPRING_M))
    # a checkpoint that does not cover the model, or is not a checkpoint
    torch.save({"gain": torch.tensor(1.0)}, tmp_path / "part.pth")
    with pytest.raises(LS.MissingSeaRaft, match=r"cannot load the SEA-RAFT weights .*missing \['fnet.w'"):
        LS.load_model(repo, cfg, str(tmp_path / "part.pth"), "cpu")
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(LS.MissingSeaRaft, match="cannot load the SEA-RAFT weights"):
        LS.load_model(repo, cfg, str(tmp_path / "junk.safetensors"), "cpu")
    # a wrapped torch checkpoint with a DataParallel prefix
    torch.save({"state_dict": {"module." + k: v for k, v in sd.items()}}, tmp_path / "wrapped.pth")
    assert set(LS.read_state_dict(tmp_path / "wrapped.pth")) == set(sd)


def test_extractor_feeds_fe_inputs_and_writes_flow_signals(clean, tmp_path):
    """With a model whose flow is known: the model sees fe's inputs (216x320, 0..255 floats, iters, test_mode), the
    feature is FlowSignals of the field x 2 for pairs (i, i+2)."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    class Const(torch.nn.Module):
        def forward(self, image1, image2, iters=None, test_mode=False):
            self.seen = getattr(self, "seen", []) + [(image1.clone(), image2.clone(), iters, test_mode)]
            N, _, H, W = image1.shape
            flow = torch.stack([torch.full((N, H, W), 1.25), torch.full((N, H, W), -0.5)], 1)
            return {"flow": [flow * 0, flow]}

    model, args = Const(), argparse.Namespace(scale=-1, iters=4)
    ex = SeaRaftFlow(model=model, args=args, device="cpu")
    assert ex.key() == "flow@searaft-1-learned" and ex.max_side is None
    ex.start(None)
    rng = np.random.default_rng(3)
    frames = [rng.integers(0, 256, (180, 320, 3), dtype=np.uint8) for _ in range(5)]
    for i, f in enumerate(frames):
        ex.update(i, f)
    out = ex.finish()
    assert len(model.seen) == 3 and all(s[2:] == (4, True) for s in model.seen)
    i1, i2 = model.seen[1][:2]
    want = F.interpolate(torch.tensor(LS.analysis_frame(frames[1]), dtype=torch.float32).permute(2, 0, 1)[None],
                         scale_factor=0.5, mode="bilinear", align_corners=False)
    assert tuple(i1.shape) == (1, 3, 216, 320) and torch.equal(i1, want) and float(i1.max()) > 200
    assert torch.equal(i2, F.interpolate(torch.tensor(LS.analysis_frame(frames[3]), dtype=torch.float32)
                                         .permute(2, 0, 1)[None], scale_factor=0.5, mode="bilinear",
                                         align_corners=False))
    assert set(out) == {"sx", "sy", "srad", "speed", "grid", "gap", "wm_sx", "wm_srad"}  # LearnedFlow's + fe's own
    assert list(out["wm_sx"]) == [1.25] * 3  # fe's half-size Sx
    rx, ry = LS.radial_units()
    assert out["wm_srad"][0] == pytest.approx(float((1.25 * rx - 0.5 * ry).mean()), abs=1e-12)
    assert list(out["sx"]) == [2.5] * 3 and list(out["sy"]) == [-1.0] * 3 and int(out["gap"]) == 2
    assert out["grid"].shape == (3, 8, 8, 2) and np.allclose(out["grid"][..., 0], 2.5)
    cfg = ex.config()
    assert cfg["size"] == [432, 640] and cfg["scale"] == -1 and cfg["iters"] == 4 and cfg["step"] == 2
    # batched pairs: the same signals here (a constant model); the default is fe's one pair per call
    ex2 = SeaRaftFlow(model=Const(), args=args, device="cpu", batch_size=2, hud=(0.18, 0.22))
    ex2.start(None)
    for i, f in enumerate(frames):
        ex2.update(i, f)
    assert list(ex2.finish()["sx"]) == [2.5] * 3 and ex2.config()["hud"] == [0.18, 0.22]


# --- the real SEA-RAFT code against WorldMark's flow_eval.py ----------------------------------------------------------

def _checkouts():
    sr, wm = os.environ.get("SEA_RAFT_CHECKOUT"), os.environ.get("WORLDMARK_CHECKOUT")
    if not sr or not wm:
        pytest.skip("set SEA_RAFT_CHECKOUT (a princeton-vl/SEA-RAFT checkout) and WORLDMARK_CHECKOUT "
                    "(AlayaLab/WorldMark)")
    sr, wm = Path(sr).expanduser(), Path(wm).expanduser()
    fe = wm / "evaluation" / "worldmark" / "flow_eval.py"
    if not (sr / "core" / "raft.py").is_file() or not fe.is_file():
        pytest.skip(f"not checkouts: {sr}/core/raft.py, {fe}")
    return sr, fe


def _import_flow_eval(fe: Path, searaft: Path, monkeypatch):
    """WorldMark's flow_eval.py as it imports (wm_config from its folder, SEARAFT_CFG naming the checkout's spring
    config); sys.path and the modules it adds are put back by the fixture / monkeypatch."""
    monkeypatch.setenv("SEARAFT_CFG", str(searaft / LS.CFG_REL))
    monkeypatch.setattr(sys, "path", [str(fe.parent)] + list(sys.path))
    for n in ("wm_config", "protocol"):
        monkeypatch.delitem(sys.modules, n, raising=False)
    spec = importlib.util.spec_from_file_location("worldmark_flow_eval", fe)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for n in ("wm_config", "protocol"):
        sys.modules.pop(n, None)
    return mod


def _video(path: Path, n=5, h=300, w=500):
    """A lossless clip of a smooth random texture panning right and zooming slightly."""
    rng = np.random.default_rng(7)
    base = cv2.GaussianBlur(rng.integers(0, 256, (h + 80, w + 80, 3), dtype=np.uint8), (0, 0), 3)
    base = cv2.normalize(base, None, 0, 255, cv2.NORM_MINMAX)
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"FFV1"), 16, (w, h))
    assert wr.isOpened()
    for i in range(n):
        s = 1.0 + 0.01 * i
        M = np.float32([[s, 0, 40 - 3 * i], [0, s, 40]])
        wr.write(cv2.warpAffine(base, M, (w, h), borderMode=cv2.BORDER_REFLECT))
    wr.release()
    return path


def _decode(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    out = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        out.append(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))
    cap.release()
    return out


def test_real_searaft_equals_worldmark_flow_eval(clean, tmp_path, monkeypatch, capsys, request):
    torch = pytest.importorskip("torch")
    n_threads = torch.get_num_threads()  # one thread: fast and steady on a shared machine (both sides alike)
    torch.set_num_threads(1)
    request.addfinalizer(lambda: torch.set_num_threads(n_threads))
    pytest.importorskip("scipy")
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file

    sr, fe_path = _checkouts()
    # a tiny random config on the checkout's spring-M config (its scale and the rest kept)
    spring = json.loads((sr / LS.CFG_REL).read_text())
    assert {k: spring[k] for k in SPRING_M} == SPRING_M
    cfg = tmp_path / "tiny-spring-M.json"
    cfg.write_text(json.dumps({**spring, **TINY}))
    fns = LS.import_checkout(sr)
    torch.manual_seed(0)
    built = LS.build_model(fns, LS.make_args(cfg, device="cpu"))  # no ImageNet download
    g = torch.Generator().manual_seed(1)
    for m in built.modules():  # non-trivial BatchNorm statistics (bn3 is also downsample.1: set per module)
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
            m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
    sd = {k: v.clone().contiguous() for k, v in built.state_dict().items()}
    wdir = tmp_path / "tiny-weights"
    wdir.mkdir()
    save_file(sd, str(wdir / "model.safetensors"))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model, args = LS.load_model(sr, cfg, str(wdir), dev)  # the production loading path
    msd = model.state_dict()
    assert [k for k, v in sd.items() if not torch.equal(msd[k].cpu(), v)] == []

    # WorldMark's own code: flow_eval.py imported as is; only its model loading is replaced (fe:30-43 loads when
    # _RAFT is None), with its args from the checkout's own config.parser as fe:34-38 builds them
    fe = _import_flow_eval(fe_path, sr, monkeypatch)
    spec = importlib.util.spec_from_file_location("searaft_config_parser", sr / "config" / "parser.py")
    parser_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parser_mod)
    p = argparse.ArgumentParser()
    p.add_argument("--cfg"), p.add_argument("--path", default=None)
    p.add_argument("--url", default=LS.HF_ID), p.add_argument("--device", default="cuda")
    monkeypatch.setattr(sys, "argv", ["x", "--cfg", str(cfg)])
    wm_args = parser_mod.parse_args(p)
    ours = vars(LS.make_args(cfg, device="cuda"))
    assert {k: v for k, v in vars(wm_args).items()} == ours  # make_args is fe's Namespace
    monkeypatch.setattr(fe, "_RAFT", model)
    monkeypatch.setattr(fe, "_RARGS", wm_args)
    monkeypatch.setattr(fe, "_DA3", object())
    if dev == "cpu":  # fe:48 moves its inputs with .cuda(): on a machine without CUDA that move is the identity
        monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)

    fe_flows = []  # what fe's _flow returns inside compute_signals, recorded (a spy: nothing else changes)
    fe_flow = fe._flow
    monkeypatch.setattr(fe, "_flow", lambda im1, im2: fe_flows.append(fe_flow(im1, im2)) or fe_flows[-1])
    video = _video(tmp_path / "clip.avi")
    frames = _decode(video)
    for hud_model in ("x", "SANA-WM-streaming"):
        hud = fe.HUD.get(hud_model)
        assert hud == LS.WORLDMARK_HUD.get(hud_model)
        fe_flows.clear()
        S = fe.compute_signals(str(video), hud_model)  # fe:68-80 on the clip
        fr = fe._read(str(video), hud_model)
        assert all(np.array_equal(a, LS.analysis_frame(b, hud)) for a, b in zip(fr, frames))
        ex = SeaRaftFlow(model=model, args=args, device=dev, hud=hud)
        ex.start(None)
        seen = []
        add = ex.signals.add
        ex.signals.add = lambda f, seen=seen, add=add: (seen.append(f.copy()), add(f))
        for i, f in enumerate(frames):
            ex.update(i, f)
        out = ex.finish()
        assert len(seen) == S["N"] - S["step"] == len(out["sx"]) == len(fe_flows) == 3
        worst = 0.0
        for i, f in enumerate(seen):
            u, v = fe_flows[i]  # fe's flow of the pair (fr[i], fr[i + 2])
            assert np.abs(u).max() > 0.01
            assert np.array_equal(f[..., 0] / 2, u) and np.array_equal(f[..., 1] / 2, v)  # exactly
            # and so fe's signals from our flows are fe's own, bit for bit
            assert (f[..., 0] / 2).mean() == S["Sx"][i]
            assert ((f[..., 0] / 2) * S["rx"] + (f[..., 1] / 2) * S["ry"]).mean() == S["Srad"][i]
            assert out["wm_sx"][i] == S["Sx"][i] and out["wm_srad"][i] == S["Srad"][i]
            worst = max(worst, abs(out["sx"][i] / 2 - S["Sx"][i]), abs(out["srad"][i] / 2 - S["Srad"][i]))
        with capsys.disabled():
            print(f"\n[searaft {hud_model}] device={dev} pairs={len(seen)}"
                  f" flow |u|max={np.abs(seen[0][..., 0]).max():.4f}"
                  f" fe Sx={np.round(S['Sx'], 5).tolist()} Srad={np.round(S['Srad'], 5).tolist()}"
                  f" FlowSignals/2 sx={np.round(out['sx'] / 2, 5).tolist()}"
                  f" srad={np.round(out['srad'] / 2, 5).tolist()}"
                  f" max|FlowSignals/2 - fe|={worst:.2e} wm_sx/wm_srad == fe: exact")

    # the whole worldgate path on an Engine record (imageio-ffmpeg decode -> the feature pool -> the extractor)
    # against fe.compute_signals on the record's mp4 (cv2 decode)
    from worldgate.evaluate.features import FeatureCache, compute_features, open_record
    from worldgate.generate.runner import run_generate

    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "sr", "trajectory": "L0.5", "scene": {"seed": 5}}) + "\n")
    assert run_generate("engine", str(cases), tmp_path / "run", overrides=["model.width=96", "model.height=64"],
                        progress=False).exit_code == 0
    rec = open_record(tmp_path / "run" / "sr")
    feats, _ = compute_features(rec, [SeaRaftFlow(model=model, args=args, device=dev)],
                                FeatureCache(tmp_path / "fc"))
    got = feats["flow"]
    # the pass gives torch cores // pool threads intra-op threads (features.compute_features; one extractor here):
    # WorldMark's side runs with the same count, since CPU sums follow it
    from worldgate.evaluate import features as F
    from worldgate.evaluate.features import pool

    torch.set_num_threads(pool.usable_cores())
    S = fe.compute_signals(str(rec.video), "x")
    assert len(got["wm_sx"]) == len(S["Sx"]) == rec.n_frames - 2
    assert np.array_equal(got["wm_sx"], S["Sx"]) and np.array_equal(got["wm_srad"], S["Srad"])
    with capsys.disabled():
        print(f"[searaft record] {rec.width}x{rec.height} {rec.n_frames} frames: fe Sx={np.round(S['Sx'], 5).tolist()}"
              f" == wm_sx; FlowSignals/2 sx={np.round(got['sx'] / 2, 5).tolist()}")
