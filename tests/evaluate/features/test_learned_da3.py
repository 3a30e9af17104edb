"""Depth Anything 3 (PyPI depth-anything-3) through its real classes: a tiny network with random weights in the
package's own ``DepthAnything3`` API, run on CPU; skipped where the package is not installed."""

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("depth_anything_3")

from worldgate.evaluate.features.models import da3 as D
from worldgate.evaluate.features.camera_poses import DA3CameraPoses
from worldgate.evaluate.features.depth import DA3Depth
from worldgate.evaluate.features.memory_depth import DA3MemoryDepth
from worldgate.evaluate.features import FeatureCache, FeatureError, compute_features, open_record
from worldgate.evaluate.shared import estimated_trajectory

from suite_cases import engine_record


def tiny_api():
    """The package's ``DepthAnything3`` API around a tiny ``DepthAnything3Net`` (DINOv2 ViT of width 32 and depth 8,
    alternating local/global attention from block 2, DualDPT head, camera encoder/decoder), random weights."""
    cls, _ = D.import_api()
    from depth_anything_3.model.cam_dec import CameraDec
    from depth_anything_3.model.cam_enc import CameraEnc
    from depth_anything_3.model.da3 import DepthAnything3Net
    from depth_anything_3.model.dinov2.dinov2 import DinoV2
    from depth_anything_3.model.dinov2.vision_transformer import DinoVisionTransformer
    from depth_anything_3.model.dualdpt import DualDPT

    torch.manual_seed(0)
    w = 32
    bb = DinoV2(name="vits", out_layers=[1, 3, 5, 7], alt_start=2, qknorm_start=2, rope_start=2, cat_token=True)
    bb.pretrained = DinoVisionTransformer(img_size=518, patch_size=14, embed_dim=w, depth=8, num_heads=2, alt_start=2,
                                          qknorm_start=2, rope_start=2, cat_token=True)
    net = DepthAnything3Net(net=bb, head=DualDPT(dim_in=2 * w, output_dim=2, features=16, out_channels=[8, 16, 32, 32]),
                            cam_dec=CameraDec(dim_in=2 * w), cam_enc=CameraEnc(dim_out=w, num_heads=2))
    api = cls(model_name="da3-small")  # the API's own constructor (a preset), then the tiny network in its place
    api.model = net.eval()
    return api.eval()


@pytest.fixture(scope="module")
def api():
    return tiny_api()


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("da3")
    return {"lr": engine_record(root, "lr", "L2 R2", tags={"family": "environment"})}


def _seg(keys):
    look = {"L": "L", "R": "R"}
    return {"segments": [{"index": j, "move": "idle" if k in look else k, "look": look.get(k, "idle")}
                         for j, k in enumerate(keys)]}


def _yaw_poses(n, step_deg=3.0, speed=0.1):
    """c2w (n, 4, 4), OpenCV axes: frame 0 the identity, yawing right while moving forward and to the side."""
    out = np.tile(np.eye(4), (n, 1, 1))
    for i in range(n):
        a = np.radians(step_deg * i)
        out[i, :3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
        out[i, :3, 3] = [0.3 * speed * i, 0.01 * i, speed * i]
    return out


# --- the package's API on a tiny network -------------------------------------------------------------------------------

def test_api_imports_and_reports_how():
    ok, why = D.status()
    assert ok, why
    _, mode = D.import_api()
    assert mode == "full" or mode.startswith("export stubbed (no ")


def test_tiny_inference_gives_depth_and_cameras_at_worldmark_size(api):
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, (432, 640, 3), dtype=np.uint8) for _ in range(3)]  # 3: DA3 picks a reference view
    P = D.predict(api, frames)  # the API's defaults: 504 px longest side, sides rounded to multiples of 14
    assert P["depth"].shape == (3, 336, 504) and np.isfinite(P["depth"]).all() and (P["depth"] > 0).all()
    assert P["conf"].shape == (3, 336, 504)
    assert P["w2c"].shape == (3, 3, 4) and P["intrinsics"].shape == (3, 3, 3)
    R = P["w2c"][:, :3, :3]
    assert np.allclose(np.einsum("nji,njk->nik", R, R), np.eye(3), atol=1e-4)
    assert np.allclose(np.linalg.det(R), 1.0, atol=1e-4)
    assert np.allclose(P["intrinsics"][:, :2, 2], [252.0, 168.0])  # principal point at the processed image's centre
    small = D.predict(api, frames[:2], process_res=56)
    assert small["depth"].shape == (2, 42, 56)


def test_stub_export_when_an_export_only_dependency_is_missing(monkeypatch):
    saved = {k: v for k, v in sys.modules.items() if k == "depth_anything_3" or k.startswith("depth_anything_3.")}
    api_saved = dict(D._API)
    try:
        for k in [k for k in saved if k == "depth_anything_3.api" or k.startswith("depth_anything_3.utils.export")]:
            del sys.modules[k]
        monkeypatch.setitem(sys.modules, "moviepy", None)  # import moviepy -> ModuleNotFoundError
        monkeypatch.setitem(sys.modules, "moviepy.editor", None)
        D._API.clear()
        cls, mode = D.import_api()
        assert mode == "export stubbed (no moviepy)" and cls.__name__ == "DepthAnything3"
        with pytest.raises(FeatureError, match="moviepy"):
            sys.modules["depth_anything_3.utils.export"].export(None, "glb", "x")
    finally:
        for k in [k for k in sys.modules if k == "depth_anything_3" or k.startswith("depth_anything_3.")]:
            if k not in saved:
                del sys.modules[k]
        sys.modules.update(saved)
        D._API.clear()
        D._API.update(api_saved)


def test_missing_weights_name_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "_MODELS", {})
    missing = str(tmp_path / "no" / "such" / "DA3")  # not a folder and not a valid Hub id: no network is tried
    with pytest.raises(FeatureError) as e:
        D.load_model(missing, "cpu")
    assert f"hf download {missing}" in str(e.value) and "DA3_MODEL" in str(e.value)
    assert "CC BY-NC 4.0" in str(e.value)
    assert D.fetch_command() == "hf download depth-anything/DA3-LARGE-1.1"
    assert not D.present(missing)


def test_model_loaded_once_per_process(monkeypatch, api):
    calls = []

    class Fake:
        @classmethod
        def from_pretrained(cls, mid):
            calls.append(mid)
            return api

    monkeypatch.setattr(D, "_MODELS", {})
    monkeypatch.setattr(D, "import_api", lambda: (Fake, "full"))
    monkeypatch.setenv("DA3_MODEL", "some/local-da3")
    a, b = D.load_model(device="cpu"), D.load_model(device="cpu")
    assert a is b is api and calls == ["some/local-da3"]


# --- poses -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gap", [1, 3])
def test_w2c_to_c2w_round_trip_and_the_chain_camera_following_reads(gap):
    from worldgate.evaluate.worldmembench.camera import camera_following

    dense = _yaw_poses(3 * 10 + 1)
    world = np.eye(4)
    world[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]  # DA3's world frame is another (its reference view's)
    world[:3, 3] = [2.0, -1.0, 0.5]
    c2w = world @ dense[::gap][: 10 + 1 if gap == 3 else None]
    w2c = np.linalg.inv(c2w)[:, :3, :4]  # what DA3 gives (OpenCV world-to-camera, 3 x 4)
    back = D.c2w_from_w2c(w2c)
    assert np.allclose(back, c2w, atol=1e-12)
    rows = D.chain_rows(back, gap)
    m = len(c2w) - 1
    assert len(rows["valid"]) == m * gap and rows["valid"].sum() == m and int(rows["gap"]) == gap
    est, frames = estimated_trajectory({"poses": rows})
    assert list(frames) == list(np.arange(m + 1) * gap)
    assert np.allclose(est, np.linalg.inv(c2w[0]) @ c2w, atol=1e-9)  # DA3's poses, relative to its first frame
    # scored against the commanded poses those estimates came from: no error at all
    s = camera_following({"camera_poses": rows}, {"poses": dense, "fps": 16.0, "trajectory": {}}, backend="learned")
    assert s["camera_rpe_rot"].value == pytest.approx(0.0, abs=1e-6)
    assert s["camera_rpe_trans"].value == pytest.approx(0.0, abs=1e-6)
    assert s["camera_rpe_rot"].detail["step_frames"] == gap


# --- WorldMark's depth -------------------------------------------------------------------------------------------------

def test_picks_equal_worldmarks():
    # fe:182-188 by hand: LR over 160 frames -> segments of 80, every 16th frame in [0.25, 0.9] of each
    assert D.worldmark_picks(_seg("LR"), 160) == [(0, 20), (0, 36), (0, 52), (0, 68),
                                                 (1, 100), (1, 116), (1, 132), (1, 148)]
    # WRW over 96: only R (segment 1) is picked; range(40, 60, 16) has 2 frames < 3 -> linspace(40, 60, 3)
    assert D.worldmark_picks(_seg("WRW"), 96) == [(1, 40), (1, 50), (1, 60)]
    # the last segment stops at N - step - 1 (fe:185): A over 20 frames -> [5, min(18, 17)) -> linspace(5, 17, 3)
    assert D.worldmark_picks(_seg("A"), 20) == [(0, 5), (0, 11), (0, 17)]
    assert D.worldmark_picks({"segments": [{"index": 0, "move": "W", "look": "L"}]}, 96) is None


def test_picks_equal_the_protocols():
    from worldgate.evaluate.worldmark import protocol as WP

    rng = np.random.default_rng(3)
    for _ in range(300):
        keys = list(rng.choice(list("WSADLR"), size=int(rng.integers(1, 5))))
        n = int(rng.integers(8, 700))
        traj = _seg(keys)
        assert D.worldmark_keys(traj) == WP.record_keys(traj)[0]
        for j in range(len(keys)):
            assert D.segment_picks(j, len(keys), n) == WP._picks(j, len(keys), n)
    bad = {"segments": [{"index": 0, "move": "W", "look": "R"}]}
    assert D.worldmark_keys(bad) is None and WP.record_keys(bad)[0] is None
    assert D.worldmark_keys({"segments": []}) is None and WP.record_keys({"segments": []})[0] is None


def test_worldmark_frame_and_inverse_depth_grid():
    f = np.full((48, 64, 3), 200, np.uint8)
    im = D.worldmark_frame(f)
    assert im.shape == (432, 640, 3) and (im == 200).all()
    hud = D.worldmark_frame(f, "SANA-WM-streaming")  # fe:25 + fe:_read: bottom 18 % of the left 22 % greyed
    assert (hud[int(432 * 0.82):, :int(640 * 0.22)] == 128).all() and (hud[:int(432 * 0.82) - 1] == 200).all()
    d = np.full((2, 336, 504), 2.0, np.float32)
    d[1, :42, :63] = 0.0  # fe:199 clips at 1e-3: inverse depth 1000 in the first cell
    g = D.inverse_depth_grid(d)
    assert g.shape == (2, 8, 8) and np.allclose(g[0], 0.5)
    assert g[1, 0, 0] == pytest.approx(1000.0) and np.allclose(g[1].ravel()[1:], 0.5)


def test_depth_feature_is_worldmarks_call_in_learneddepths_format(records, tmp_path, api):
    from worldgate.evaluate.worldmark import protocol as WP
    from worldgate.generate.video import read_frames

    rec = open_record(records["lr"])
    ex = DA3Depth(model=api, process_res=140)  # 504 (the API's default) is held in the test above; 140 is quicker
    assert ex.key() == "depth@da3-1-learned"
    feats, _ = compute_features(rec, [ex], FeatureCache(tmp_path / ".features"))
    F = feats["depth"]
    picks = [i for _, i in D.worldmark_picks(rec.trajectory, rec.n_frames)]
    assert list(F["frame"]) == picks and len(picks) >= 6
    assert F["disparity"].shape == (len(picks), 8, 8) and tuple(F["image_hw"]) == (98, 140)
    # the same numbers as one inference call on WorldMark's 640 x 432 frames
    frames = [f for i, f in enumerate(read_frames(rec.video)) if i in set(picks)]
    want = D.inverse_depth_grid(D.predict(api, [D.worldmark_frame(frames[sorted(set(picks)).index(i)])
                                                for i in picks], process_res=140)["depth"])
    assert np.allclose(F["disparity"], want, rtol=1e-5)
    # the protocol reads it unchanged: samples for both lateral/yaw segments
    grid = np.zeros((rec.n_frames - 2, 8, 8, 2), np.float32)
    raw, kind = WP.parallax({"depth": F, "flow": {"grid": grid}}, ["L", "R"], rec.n_frames, 0.5)
    assert kind == "px_raw" and sorted(raw) == [0, 1] and all(len(iv) > 0 for iv, _ in raw.values())


def test_depth_feature_skips_records_worldmark_does_not_score(tmp_path, records):
    class NoCall:
        def inference(self, *a, **k):
            raise AssertionError("DA3 must not run")

    rec = open_record(records["lr"])
    rec.trajectory = {"segments": [{"index": 0, "move": "W", "look": "L"}]}
    ex = DA3Depth(model=NoCall())
    ex.start(rec)
    assert not any(ex.needs_frame(i) for i in range(rec.n_frames))
    out = ex.finish()
    assert out["frame"].shape == (0,) and out["disparity"].shape == (0, 8, 8)


# --- WorldMemBench's camera poses ---------------------------------------------------------------------------------------

def test_camera_poses_feature_every_frame(records, tmp_path, api):
    from worldgate.evaluate.worldmembench.camera import camera_following

    rec = open_record(records["lr"])
    ex = DA3CameraPoses(model=api, process_res=56)
    feats, _ = compute_features(rec, [ex], FeatureCache(tmp_path / ".features"))
    C = feats["camera_poses"]
    n = rec.n_frames
    assert list(C["frame"]) == list(range(n)) and int(C["gap"]) == 1 and len(C["valid"]) == n - 1
    assert C["c2w"].shape == (n, 4, 4) and C["intrinsics"].shape == (n, 3, 3) and tuple(C["image_hw"]) == (42, 56)
    assert str(C["estimator"]) == "DA3 (a given model)"
    est, frames = estimated_trajectory({"poses": C})
    assert list(frames) == list(range(n))
    assert np.allclose(est, np.linalg.inv(C["c2w"][0]) @ C["c2w"], atol=1e-6)
    s = camera_following(feats, {"poses": rec.poses, "fps": rec.fps, "trajectory": rec.trajectory})
    assert np.isfinite(s["camera_rpe_rot"].value) and s["camera_rpe_rot"].detail["steps"] == n - 1


def test_camera_poses_max_views_and_inactive_families(records, tmp_path, api):
    rec = open_record(records["lr"])
    ex = DA3CameraPoses(model=api, process_res=56, max_views=8)
    feats, _ = compute_features(rec, [ex], FeatureCache(tmp_path / ".f1"))
    C = feats["camera_poses"]
    gap = -(-rec.n_frames // 8)
    assert int(C["gap"]) == gap and list(C["frame"]) == list(range(0, rec.n_frames, gap))
    _, frames = estimated_trajectory({"poses": C})
    assert list(frames) == list(C["frame"])
    plain = open_record(records["lr"])  # no WorldMemBench family: not run (like AdjacentPoseExtractor)
    plain.meta["case"]["tags"] = {}
    feats, _ = compute_features(plain, [DA3CameraPoses(model=api, process_res=56)], FeatureCache(tmp_path / ".f2"))
    assert "inactive" in feats["camera_poses"]



# --- WorldMemBench's revisit depth ---------------------------------------------------------------------------------------

def test_memory_depth_feature_is_one_da3_call_in_learnedmemorydepths_format(tmp_path, api):
    """Frame 0 and the revisit frames LearnedMemoryDepth picks, one inference call, 1 / depth on the 32 x 32 grid
    with the record's intrinsics there; the static scorer reads it and the registry picks it where DA3 imports."""
    import cv2

    from worldgate.evaluate import metrics as M
    from worldgate.evaluate.features.geometry import analysis_K
    from worldgate.evaluate.features.targets import memory_depth_frames
    from worldgate.evaluate.worldmembench.static import depth_memory_scores
    from worldgate.generate.video import read_frames

    rec = open_record(engine_record(tmp_path, "lrl", "L2 R2 L2", tags={"family": "environment"}))
    calls = []

    class Counting:
        def inference(self, imgs, **k):
            calls.append(len(imgs))
            return api.inference(imgs, **k)

    ex = DA3MemoryDepth(model=Counting(), process_res=56)
    assert ex.key() == "memory_depth@da3-2-learned"
    F = compute_features(rec, [ex], FeatureCache(tmp_path / ".features"))[0]["memory_depth"]
    picks = sorted(memory_depth_frames(rec, 4))
    # an Environment record: the depth at the picks of DA3's every-frame call (the one its camera poses come from)
    assert picks[0] == 0 and len(picks) > 3 and list(F["frame"]) == picks and calls == [rec.n_frames]
    assert F["depth"].shape == (len(picks), 32, 32) and np.isfinite(F["depth"]).all() and (F["depth"] > 0).all()
    w, h = 64, 48
    assert np.allclose(F["K"], np.diag([32 / w, 32 / h, 1.0]) @ analysis_K(rec, w, h))
    frames = list(read_frames(rec.video))
    depth = D.predict(api, [ex._resize(f) for f in frames], 56)["depth"][picks]
    inv = 1.0 / np.clip(depth.astype(np.float64), 1e-3, None)
    want = np.stack([cv2.resize(d, (32, 32), interpolation=cv2.INTER_AREA) for d in inv])
    assert np.allclose(F["depth"], want, rtol=1e-5)
    revs = [{"phase": "R1", "frame": picks[-1], "return_err_deg": 0.0, "departure_deg": 60.0, "by": "test"}]
    s = depth_memory_scores(F, revs, {}, {"trajectory": rec.trajectory, "poses": rec.poses}, M.params())
    assert 0.0 <= s["depth_spearman"].value <= 1.0 and 0.0 <= s["spherical_reconstruction"].value <= 1.0
    assert s["depth_spearman"].detail["model"] == "a given model"
    assert type(M.FEATURES["learned"].get("memory_depth")()).__name__ == "DA3MemoryDepth"
    # a Human-family case (no depth metric reads it) and a record without revisits: no call, empty arrays
    human = open_record(engine_record(tmp_path, "lrl-h", "L2 R2 L2", tags={"family": "human"}))
    assert memory_depth_frames(human, 4) == set()
    calls.clear()
    out = compute_features(human, [DA3MemoryDepth(model=Counting())], FeatureCache(tmp_path / ".f1"))[0]
    assert calls == [] and out["memory_depth"]["frame"].shape == (0,)
    plain = open_record(engine_record(tmp_path, "w", "W2", tags={"family": "environment"}))
    calls.clear()
    out = compute_features(plain, [DA3MemoryDepth(model=Counting())], FeatureCache(tmp_path / ".f2"))[0]
    assert calls == [] and out["memory_depth"]["frame"].shape == (0,) and out["memory_depth"]["depth"].shape == (0, 32, 32)
