"""VGGT-Omega global memory (evaluate/features/models/vggt.py): parity with WorldMark's vggt_omega_global_c3.py, the checkout
loading path end to end against a fake checkout, and the missing-checkout message."""

import json
import math
import textwrap

import numpy as np
import pytest

from worldgate.evaluate.features.models import vggt as LV
from worldgate.evaluate.worldmark.geometry import vggt_global_memory


def _yaw(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([[math.cos(a), 0.0, math.sin(a)], [0.0, 1.0, 0.0], [-math.sin(a), 0.0, math.cos(a)]])


def _f32(**arrays) -> dict:
    return {k: np.asarray(v, np.float32) for k, v in arrays.items()}


def synthetic_predictions(case: int) -> dict:
    """Fixed VGGT-Omega-like predictions (float32): cameras looking at the world plane z = 5 (depth exact up to noise),
    world-to-camera [R | t] extrinsics and fov intrinsics with the principal point at the centre (as
    encoding_to_camera builds them)."""
    rng = np.random.default_rng(100 + case)
    if case == 2:  # no pair co-visible: frame k's depth is 5 (k+1)^2 under one camera (ratios outside 0.7-1.4)
        K, H, W = 6, 64, 96
        depth = np.stack([np.full((H, W), 5.0 * (k + 1) ** 2) for k in range(K)])
        extr = np.tile(np.hstack([np.eye(3), np.zeros((3, 1))]), (K, 1, 1))
        f = 80.0
        intr = np.tile(np.array([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1.0]]), (K, 1, 1))
        conf = rng.uniform(1.0, 3.0, (K, H, W))
        return _f32(depth=depth, conf=conf, extr=extr, intr=intr)
    # 0: consistent, 1% depth noise; 1: 8% noise and one frame's depth off; 3: wide yaw (pairs with < 5 points inside
    # are skipped, points behind a camera, rays that miss the plane give negative depth)
    K, H, W, step_x, yaw, noise = {0: (8, 96, 128, 0.15, 2.0, 0.01), 1: (7, 80, 112, 0.3, 7.0, 0.08),
                                   3: (6, 64, 96, 0.5, 25.0, 0.03)}[case]
    f = 0.9 * W
    Kmat = np.array([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1.0]])
    rows, cols = np.mgrid[0:H, 0:W]
    rays = np.stack([(cols - W / 2) / f, (rows - H / 2) / f, np.ones((H, W))], -1)  # camera rays with z = 1
    depth, extr = [], []
    for k in range(K):
        R = _yaw(yaw * k)  # world-to-camera rotation
        C = np.array([step_x * k, 0.05 * k, 0.1 * k])  # camera centre
        extr.append(np.hstack([R, (-R @ C)[:, None]]))
        d_world = rays @ R  # R^T r for every pixel (row vectors)
        s = (5.0 - C[2]) / d_world[..., 2]  # along the ray to z = 5; the camera depth is s (r_z = 1)
        depth.append(s * (1.0 + noise * rng.standard_normal((H, W))))
    depth = np.stack(depth)
    if case == 1:
        depth[3] *= 1.25  # one frame's depth off: its pairs fall partly outside the occlusion window
    conf = rng.uniform(0.5, 3.0, (K, H, W))
    intr = np.tile(Kmat, (K, 1, 1))
    return _f32(depth=depth, conf=conf, extr=np.stack(extr), intr=intr)


# --- parity with WorldMark ----------------------------------------------------------------------------------------
# Golden numbers: WorldMark's own process() (AlayaLab/WorldMark 26f33a81, evaluation/worldmark/vggt_omega_global_c3.py,
# vg:33-94) run once from a scratch copy with torch's model, decord, wm_config and the vggt_omega modules replaced by
# fakes that return synthetic_predictions(case) (depth, depth_conf, encoding_to_camera's extrinsics/intrinsics), its
# printed record pinned here ("model"/"stem" dropped). vg:36-39's frame lists were pinned the same way, from the
# frames its fake VideoReader was asked for.
WORLDMARK_GLOBAL = {
    0: {"global_median_e": 0.01262, "global_mean_e": 0.01498, "global_score": 98.753, "covis_ratio": 0.709},
    1: {"global_median_e": 0.10915, "global_mean_e": 0.13644, "global_score": 90.159, "covis_ratio": 0.661},
    2: {"na": "no_covis"},
    3: {"global_median_e": 0.02622, "global_mean_e": 0.04185, "global_score": 97.445, "covis_ratio": 0.629},
}
WORLDMARK_FRAMES = {
    (128, 16.0): [0, 16, 32, 48, 64, 80, 96, 112],
    (40, 16.0): [0, 7, 15, 23, 31, 39],
    (5, 16.0): [0, 1, 2, 3, 4],
    (100, 0.0): [0, 16, 32, 48, 64, 80, 96],
    (300, 24.5): [0, 24, 48, 72, 96, 120, 144, 168, 192, 216, 240, 264, 288],
    (1, 16.0): [0],
    (97, 23.976): [0, 19, 38, 57, 76, 96],
    (2000, 30.0): [0, 30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 330, 360, 390, 420, 450, 480, 510, 540, 570, 600,
                   660, 690, 720, 750, 780, 810, 840, 870, 900, 930, 960, 990, 1020, 1050, 1080, 1110, 1140, 1170, 1200,
                   1230, 1260, 1320, 1350, 1380, 1410, 1440, 1470, 1500, 1530, 1560, 1590, 1620, 1650, 1680, 1710, 1740,
                   1770, 1800, 1830, 1860, 1890, 1920, 1980],
    (1100, 16.0): [0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 240, 256, 272, 288, 304, 320, 336, 352,
                   368, 384, 400, 416, 448, 464, 480, 496, 512, 528, 544, 560, 576, 592, 608, 624, 656, 672, 688, 704,
                   720, 736, 752, 768, 784, 800, 816, 832, 848, 880, 896, 912, 928, 944, 960, 976, 992, 1008, 1024,
                   1040, 1056, 1088],
}


@pytest.mark.parametrize("case", sorted(WORLDMARK_GLOBAL))
def test_global_from_predictions_equals_worldmark(case):
    assert LV.global_from_predictions(**synthetic_predictions(case)) == WORLDMARK_GLOBAL[case]


def test_pair_counts_and_skips():
    errs, covis, inside, skipped = LV.pair_errors(**synthetic_predictions(3))
    assert (covis, inside, skipped) == (44, 70, 22)  # 30 ordered pairs: 22 see < 5 grid points of the other
    # of the 8 left, 5 have >= 5 co-visible points (vg:85): their 35 points are the errors; the other 9 co-visible
    # points still count in covis_ratio (vg:84)
    assert (len(errs), sum(len(e) for e in errs)) == (5, 35)
    assert LV.pair_errors(**synthetic_predictions(2))[1:] == (0, 470, 0)  # inside, never co-visible


@pytest.mark.parametrize("case", sorted(WORLDMARK_GLOBAL))
def test_agrees_with_the_master_table_port(case):
    """evaluate/worldmark/master.py's c3 port (checked against WorldMark's archive by test_worldmark_parity) gives
    the same records on the same predictions."""
    from worldgate.evaluate.worldmark import master as W

    P = synthetic_predictions(case)
    errs, cov, tot = W.c3_errors(P["extr"], P["intr"], P["depth"], P["conf"])
    mine, cov2, tot2, _ = LV.pair_errors(**P)
    assert (cov, tot) == (cov2, tot2) and len(errs) == len(mine)
    assert all(np.array_equal(a, b) for a, b in zip(errs, mine))
    assert {k: v for k, v in W.c3_record("m", "s", errs, cov, tot).items() if k not in ("model", "stem")} \
        == LV.global_from_predictions(**P)
    assert LV.pick_frames(1100, 16.0) == W.c3_select_frames(1100, 16.0)


@pytest.mark.parametrize("nf,fps", sorted(WORLDMARK_FRAMES))
def test_pick_frames_equals_worldmark(nf, fps):
    picks = LV.pick_frames(nf, fps)
    assert picks == WORLDMARK_FRAMES[(nf, fps)]
    assert len(picks) <= LV.MAX_FRAMES


def test_global_memory_score_applies_tau():
    s = vggt_global_memory({"global_median_e": np.float64(0.05), "global_mean_e": np.float64(0.07),
                                "covis_ratio": np.float64(0.5), "pairs": np.int64(3), "points": np.int64(40),
                                "frame": np.arange(6)}, tau=0.05)
    assert s.value == pytest.approx(50.0) and s.detail["median_err"] == 0.05 and s.detail["pairs"] == 3
    none = vggt_global_memory({"global_median_e": np.float64(np.nan), "frame": np.arange(6)}, tau=0.05)
    assert none.value is None and "no_covis" in none.reason


# --- a fake VGGT-Omega checkout: the real loading path --------------------------------------------------------------
FAKE_MODELS = '''
import torch

BUILT = []
SEEN = {}


class VGGTOmega(torch.nn.Module):
    """Tiny stand-in: depth, confidence and pose encoding from two weights; records the images it was given."""

    def __init__(self):
        super().__init__()
        BUILT.append(1)
        self.step = torch.nn.Parameter(torch.zeros(()))
        self.bump = torch.nn.Parameter(torch.zeros(()))

    def forward(self, images):
        if images.dim() == 4:
            images = images.unsqueeze(0)
        SEEN["shape"], SEEN["mean"] = tuple(images.shape), float(images.mean())
        B, K, _, H, W = images.shape
        rows = torch.arange(H, dtype=torch.float32).view(H, 1)
        cols = torch.arange(W, dtype=torch.float32).view(1, W)
        base = 4.0 + self.bump * torch.sin(cols / 7.0) * torch.cos(rows / 5.0)
        k = torch.arange(K, dtype=torch.float32).view(K, 1, 1)
        depth = base[None] * (1.0 + 0.02 * k)
        conf = 1.0 + 0.5 * (torch.sin(rows * cols / 13.0) + 1.0) + 0.0 * k
        pose = torch.zeros(B, K, 9)
        pose[..., 0] = self.step * k.view(1, K)
        pose[..., 6] = 1.0  # identity quaternion (x, y, z, w)
        pose[..., 7], pose[..., 8] = 1.0, 1.2  # fov_h, fov_w (radians)
        return {"images": images, "pose_enc": pose, "depth": depth[None, ..., None].expand(B, K, H, W, 1),
                "depth_conf": conf[None].expand(B, K, H, W)}
'''
FAKE_LOAD_FN = '''
import numpy as np
import torch
from PIL import Image


def load_and_preprocess_images(image_path_list, mode="balanced", image_resolution=512, patch_size=16):
    out = []
    for p in image_path_list:
        with Image.open(p) as im:
            im = im.convert("RGB")
            w, h = im.size
            nh = max(patch_size, int(round(h * image_resolution / w / patch_size)) * patch_size)
            im = im.resize((image_resolution, nh), Image.Resampling.BICUBIC)
            out.append(torch.from_numpy(np.asarray(im, np.float32) / 255.0).permute(2, 0, 1))
    return torch.stack(out)
'''
FAKE_POSE_ENC = '''
import torch


def encoding_to_camera(pose_encoding, image_size_hw, build_intrinsics=True):
    T, q = pose_encoding[..., :3], pose_encoding[..., 3:7]
    x, y, z, w = q.unbind(-1)
    R = torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                     2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                     2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1).view(*q.shape[:-1], 3, 3)
    H, W = image_size_hw
    K = torch.zeros(pose_encoding.shape[:2] + (3, 3))
    K[..., 0, 0] = (W / 2.0) / torch.tan(pose_encoding[..., 8] / 2.0)
    K[..., 1, 1] = (H / 2.0) / torch.tan(pose_encoding[..., 7] / 2.0)
    K[..., 0, 2], K[..., 1, 2], K[..., 2, 2] = W / 2, H / 2, 1.0
    return torch.cat([R, T[..., None]], -1), K
'''


def write_checkout(root, models=FAKE_MODELS):
    pkg = root / "vggt_omega"
    (pkg / "models").mkdir(parents=True)
    (pkg / "utils").mkdir()
    (pkg / "__init__.py").write_text("from .models import VGGTOmega\n")
    (pkg / "models" / "__init__.py").write_text(textwrap.dedent(models))
    (pkg / "utils" / "__init__.py").write_text("")
    (pkg / "utils" / "load_fn.py").write_text(FAKE_LOAD_FN)
    (pkg / "utils" / "pose_enc.py").write_text(FAKE_POSE_ENC)
    return root


@pytest.fixture
def clean_imports(monkeypatch):
    import sys

    saved = list(sys.path)
    yield
    sys.path[:] = saved
    for name in [m for m in sys.modules if m == "vggt_omega" or m.startswith("vggt_omega.")]:
        del sys.modules[name]
    LV._MODELS.clear()


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    from worldgate.generate.runner import run_generate

    out = tmp_path_factory.mktemp("vggt") / "engine"
    m = out.parent / "cases.jsonl"
    m.write_text(json.dumps({"id": "vg", "trajectory": "L2 R2", "scene": {"seed": 5}}) + "\n")
    assert run_generate("engine", str(m), out, overrides=["model.width=64", "model.height=48"],
                        progress=False).exit_code == 0
    return out / "vg"


def test_extractor_runs_the_checkout_end_to_end(tmp_path, record, clean_imports, monkeypatch):
    torch = pytest.importorskip("torch")
    from worldgate.evaluate.features import FeatureCache, compute_features, open_record

    repo = write_checkout(tmp_path / "vggt-omega")
    ckpt = tmp_path / "model.pt"
    torch.save({"step": torch.tensor(0.25), "bump": torch.tensor(0.6)}, ckpt)
    monkeypatch.setenv("VGGT_OMEGA_PATH", str(repo))
    monkeypatch.setenv("VGGT_OMEGA_CKPT", str(ckpt))
    rec = open_record(record)
    ex = LV.VGGTOmegaGlobal()
    assert ex.key() == "vggt_global@1-learned"
    feats, _ = compute_features(rec, [ex], FeatureCache(tmp_path / ".features"))
    G = feats["vggt_global"]
    picks = LV.pick_frames(rec.n_frames, rec.fps)
    assert list(G["frame"]) == picks and len(picks) >= LV.MIN_FRAMES
    fake = __import__("sys").modules["vggt_omega.models"]
    # the checkout's own preprocessing at 512 px saw every picked frame, with the video's content
    assert fake.SEEN["shape"] == (1, len(picks), 3, 384, 512) and 0.02 < fake.SEEN["mean"] < 0.98
    assert tuple(G["image_hw"]) == (384, 512)
    # the same numbers as the predictions the checkpoint's model makes, through global_from_predictions
    fns = LV.import_checkout(repo)
    model = fns["VGGTOmega"]()
    model.load_state_dict(torch.load(ckpt))
    with torch.inference_mode():
        pred = model(torch.zeros(len(picks), 3, 384, 512))
        extr, intr = fns["encoding_to_camera"](pred["pose_enc"], pred["images"].shape[-2:])
    want = LV.global_from_predictions(pred["depth"][0, ..., 0].numpy(), pred["depth_conf"][0].numpy(),
                                      extr[0].numpy(), intr[0].numpy())
    assert want["global_median_e"] > 0.001
    for k in ("global_median_e", "global_mean_e", "global_score", "covis_ratio"):
        assert float(G[k]) == want[k]
    assert int(G["pairs"]) > 0 and int(G["points"]) > 0
    s = vggt_global_memory(G, tau=0.05)
    assert s.value == pytest.approx(100.0 / (1.0 + want["global_median_e"] / 0.05))
    # the model stays loaded across records (a fresh extractor, a fresh cache: no second build); other weights
    # give other numbers
    assert ex.device == ("cuda" if torch.cuda.is_available() else "cpu")
    n_built = len(fake.BUILT)
    again, _ = compute_features(rec, [LV.VGGTOmegaGlobal()], FeatureCache(tmp_path / ".f1"))
    assert len(fake.BUILT) == n_built and float(again["vggt_global"]["global_median_e"]) == want["global_median_e"]
    ckpt2 = tmp_path / "model2.pt"
    torch.save({"step": torch.tensor(0.05), "bump": torch.tensor(0.6)}, ckpt2)
    G2, _ = compute_features(rec, [LV.VGGTOmegaGlobal(ckpt=ckpt2)], FeatureCache(tmp_path / ".f2"))
    assert len(fake.BUILT) == n_built + 1
    assert float(G2["vggt_global"]["global_median_e"]) != float(G["global_median_e"])


def test_missing_checkout_names_env_vars_and_commands(tmp_path, monkeypatch, clean_imports):
    monkeypatch.delenv("VGGT_OMEGA_PATH", raising=False)
    monkeypatch.delenv("VGGT_OMEGA_CKPT", raising=False)
    with pytest.raises(LV.MissingVGGTOmega) as e:
        LV.check()
    msg = str(e.value)
    assert "VGGT_OMEGA_PATH" in msg and "VGGT_OMEGA_CKPT" in msg
    assert "git clone https://github.com/facebookresearch/vggt-omega" in msg
    assert "hf download facebook/VGGT-Omega vggt_omega_1b_512.pt" in msg and "--backend classical" in msg
    rows = LV.missing()
    assert [r["id"] for r in rows] == ["$VGGT_OMEGA_PATH (not set)", "$VGGT_OMEGA_CKPT (not set)"]
    assert all(r["source"] == "checkout" and r["feature"] == "vggt_global" for r in rows)
    # a folder that is not a checkout: the three modules are named
    (tmp_path / "empty").mkdir()
    what = LV.missing(tmp_path / "empty", tmp_path / "none.pt")
    assert len(what) == 2
    for name in ("vggt_omega.models.VGGTOmega", "vggt_omega.utils.load_fn.load_and_preprocess_images",
                 "vggt_omega.utils.pose_enc.encoding_to_camera"):
        assert name in what[0]["what"]
    assert "no such file" in what[1]["id"]
    # a checkout whose dependencies are missing: the import error and the install command
    broken = write_checkout(tmp_path / "broken", models="import no_such_dependency_xyz\nVGGTOmega = None\n")
    (tmp_path / "w.pt").write_bytes(b"x")
    what = LV.missing(broken, tmp_path / "w.pt")
    assert len(what) == 1 and "no_such_dependency_xyz" in what[0]["what"]
    assert what[0]["fetch"] == LV.DEPS_CMD and "pip install" in LV.DEPS_CMD
    # the extractor fails at its first record, before any frame is read
    with pytest.raises(LV.MissingVGGTOmega, match="VGGT_OMEGA_PATH"):
        LV.VGGTOmegaGlobal().start(None)


def test_wrong_weights_are_named(tmp_path, clean_imports):
    torch = pytest.importorskip("torch")
    repo = write_checkout(tmp_path / "vggt-omega")
    ckpt = tmp_path / "other.pt"
    torch.save({"something_else": torch.zeros(2)}, ckpt)
    assert LV.missing(repo, ckpt) == []
    with pytest.raises(LV.MissingVGGTOmega, match="cannot load the VGGT-Omega weights"):
        LV.load_model(repo, ckpt, "cpu")


def test_unknown_frame_count_picks_after_the_last_frame(tmp_path, clean_imports, monkeypatch):
    """A record whose meta.json does not give the frame count: every frame is written, the picks made at the end."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    repo = write_checkout(tmp_path / "vggt-omega")
    ckpt = tmp_path / "model.pt"
    torch.save({"step": torch.tensor(0.25), "bump": torch.tensor(0.6)}, ckpt)
    ex = LV.VGGTOmegaGlobal(path=repo, ckpt=ckpt, image_resolution=64)
    ex.start(SimpleNamespace(n_frames=0, fps=16.0))
    rng = np.random.default_rng(0)
    for i in range(40):
        assert ex.needs_frame(i)
        ex.update(i, rng.integers(0, 255, (24, 32, 3), dtype=np.uint8))
    work = ex.work
    G = ex.finish()
    assert list(G["frame"]) == WORLDMARK_FRAMES[(40, 16.0)] and tuple(G["image_hw"]) == (48, 64)
    assert np.isfinite(G["global_median_e"]) and not work.exists()  # the PNGs are gone


def test_worldmark_global_memory_reads_vggt_omega_when_configured(monkeypatch):
    """Under --backend learned, WorldMark's global memory is VGGT-Omega's e (vg:90-92) through WorldMark's tau, in the
    record's own score and in the split table; without a configured checkout the feature is not run and the metric
    says what to set."""
    from worldgate.evaluate import metrics as M
    from worldgate.evaluate.worldmark import benchmark as WB

    monkeypatch.delenv("VGGT_OMEGA_PATH", raising=False)
    monkeypatch.setattr("worldgate.evaluate.metrics.preflight", lambda names: None)
    names = [e.name for e in M.extractors("learned")]
    assert "vggt_global" not in names
    assert "VGGT_OMEGA_PATH" in WB.BENCHMARK.unavailable["learned"]["global_memory"]
    feat = {"vggt_global": {"global_median_e": np.asarray(0.01), "global_mean_e": np.asarray(0.02)}, "flow": {},
            "depth": {}}
    rec = {"trajectory": {"segments": []}, "fps": 16.0, "model": "m", "case": "c", "tags": {}}
    got = WB.score(feat, rec, "learned", M.params())
    assert got["global_memory"].value == pytest.approx(100 / (1 + 0.01 / 0.05))
    assert WB._inputs(feat, rec, "learned", M.params())["global_e"] == 0.01
    none = {"vggt_global": {"global_median_e": np.asarray(np.nan)}, "flow": {}, "depth": {}}
    assert WB._inputs(none, rec, "learned", M.params())["global_e"] is None  # no_covis: no c3 entry (fm:218)
