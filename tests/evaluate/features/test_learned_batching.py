"""The learned backend's work is done once: one decode per record feeds every learned extractor, model calls are
batched (sized to the device's memory, a fixed batch on CPU) with the same results as frame by frame, and DA3 runs
once on an Environment record where both camera poses and revisit depth need it. Tiny random models, no DA3 package
needed (a stand-in model counts DA3's calls)."""

from types import SimpleNamespace

import cv2
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_learned import clip_processor, dino_processor, tiny_models  # noqa: E402
from suite_cases import engine_record  # noqa: E402

from worldgate.evaluate.features import core as F  # noqa: E402
from worldgate.evaluate.features.appearance import LearnedAppearance  # noqa: E402
from worldgate.evaluate.features.depth import LearnedDepth  # noqa: E402
from worldgate.evaluate.features.memory_depth import LearnedMemoryDepth  # noqa: E402
from worldgate.evaluate.features.models.loaders import CPU_BATCH, MAX_BATCH, batch_for  # noqa: E402
from worldgate.evaluate.features.quality import LearnedQuality  # noqa: E402
from worldgate.evaluate.features.models import da3 as D  # noqa: E402
from worldgate.evaluate.features.camera_poses import DA3CameraPoses  # noqa: E402
from worldgate.evaluate.features.memory_depth import DA3MemoryDepth  # noqa: E402
from worldgate.evaluate.features import shared_views as SV  # noqa: E402
from worldgate.evaluate.features import FeatureCache, compute_features, open_record  # noqa: E402
from worldgate.evaluate.features.targets import memory_depth_frames  # noqa: E402


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """An Environment record with a revisit (L R L: R1 returns to the start), 3 s at 16 fps, 64 x 48."""
    return engine_record(tmp_path_factory.mktemp("batching"), "lrl", "L1 R1 L1", tags={"family": "environment"})


@pytest.fixture
def count_decodes(monkeypatch):
    calls = []
    real = F.read_frames

    def counting(*a, **k):
        calls.append(a[0] if a else k.get("path"))
        return real(*a, **k)

    monkeypatch.setattr(F, "read_frames", counting)
    return calls


def test_batch_size_follows_the_device():
    assert batch_for("flow", "cpu") == CPU_BATCH["flow"] == 8
    assert batch_for("appearance", None) == 16
    assert batch_for("depth", "cuda", given=3) == 3 and batch_for("depth", "cpu", given=0) == 1
    # on a GPU: half its free memory over the per-item need, between 1 and MAX_BATCH
    assert batch_for("flow", "cuda:0", free_bytes=8 << 30) == 8  # 4 GiB / 512 MiB
    assert batch_for("appearance", "cuda", free_bytes=80 << 30) == MAX_BATCH
    assert batch_for("depth", "cuda", free_bytes=100 << 20) == 1
    ex = LearnedDepth(model=object(), device="cpu")
    assert ex.given_batch is None and ex.batch_size == 8


def _learned_set(batch):
    """The learned.py extractors that batch frames, on the tests' tiny models (RAFT's batched pairs:
    test_learned_models.test_batched_depth_and_flow_equal_frame_by_frame, too slow to repeat here)."""
    dino, depth, clip, head = tiny_models()
    return [LearnedDepth(model=depth, size=98, batch_size=batch),
            LearnedAppearance(model=dino, processor=dino_processor(), transnet=False, batch_size=batch),
            LearnedQuality(clip=clip, head=head, imaging=False, processor=clip_processor(), batch_size=batch),
            LearnedMemoryDepth(model=depth, size=98, batch_size=batch)]


def test_one_decode_feeds_every_learned_extractor_and_batches_equal_frame_by_frame(env, tmp_path, count_decodes):
    rec = open_record(env)
    one, st1 = compute_features(rec, _learned_set(1), FeatureCache(tmp_path / "b1"))
    assert count_decodes == [rec.video]  # the whole set: one decode of the record
    many, st = compute_features(open_record(env), _learned_set(None), FeatureCache(tmp_path / "bn"))
    assert len(count_decodes) == 2 and len(st["computed"]) == len(st1["computed"]) == 4
    n = rec.n_frames
    assert len(many["appearance"]["emb"]) == n and len(many["quality"]["frame"]) == len(range(0, n, 4))
    assert list(many["memory_depth"]["frame"]) == sorted(memory_depth_frames(rec, 4))
    for name, arrays in one.items():
        for k, a in arrays.items():
            b = many[name][k]
            if np.asarray(a).dtype.kind in "fc":
                assert np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True), (name, k)
            else:
                assert np.array_equal(a, b), (name, k)
    # the batches were real: the record's frames went through DINOv2 in calls of 16
    assert many["appearance"]["emb"].shape[0] > 2 * CPU_BATCH["appearance"]
    assert np.isfinite(many["appearance"]["emb"]).all() and np.isfinite(many["memory_depth"]["depth"]).all()


class FakeDA3:
    """DA3's ``inference`` API, counted: each view's depth depends on its pixels and on how many views the call has
    (the views see each other), poses are a yaw per view index."""

    def __init__(self):
        self.calls = []

    def inference(self, imgs, process_res=None, process_res_method=None):
        x = np.stack([np.asarray(im, np.float32).mean(axis=2) for im in imgs])
        n = len(imgs)
        self.calls.append(n)
        w2c = np.zeros((n, 3, 4))
        for k in range(n):
            a = 0.01 * k + x[k].mean() * 1e-4
            w2c[k, :3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
        K = np.tile(np.eye(3), (n, 1, 1))
        return SimpleNamespace(depth=1.0 + x / 255.0 + 0.1 * n, conf=np.ones_like(x), extrinsics=w2c, intrinsics=K)


def _small(frame):  # stands in for the API's boundary resize (the package is not needed here)
    return cv2.resize(np.ascontiguousarray(frame), (32, 24), interpolation=cv2.INTER_AREA)


class Poses(DA3CameraPoses):
    _resize = staticmethod(_small)


class MemDepth(DA3MemoryDepth):
    _resize = staticmethod(_small)


def test_da3_runs_once_for_camera_poses_and_revisit_depth(env, tmp_path, count_decodes):
    model = FakeDA3()
    both, _ = compute_features(open_record(env), [Poses(model=model), MemDepth(model=model)],
                               FeatureCache(tmp_path / "both"))
    rec = open_record(env)
    assert model.calls == [rec.n_frames] and len(count_decodes) == 1  # one DA3 call, one decode
    assert SV.held() == 0  # the pass's shared frames are let go
    alone_p, _ = compute_features(open_record(env), [Poses(model=model)], FeatureCache(tmp_path / "p"))
    alone_m, _ = compute_features(open_record(env), [MemDepth(model=model)], FeatureCache(tmp_path / "m"))
    assert model.calls == [rec.n_frames] * 3
    for k in alone_p["camera_poses"]:  # each feature is what it is alone: the shared call changes no number
        assert np.array_equal(both["camera_poses"][k], alone_p["camera_poses"][k]), k
    for k in alone_m["memory_depth"]:
        assert np.array_equal(both["memory_depth"][k], alone_m["memory_depth"][k]), k
    picks = sorted(memory_depth_frames(rec, 4))
    frames = [_small(f) for f in F.read_frames(rec.video)]
    want = model.inference(frames).depth[picks]
    G = DA3MemoryDepth.GRID
    want = np.stack([cv2.resize(1.0 / d, (G, G), interpolation=cv2.INTER_AREA) for d in want.astype(np.float64)])
    assert list(both["memory_depth"]["frame"]) == picks and np.allclose(both["memory_depth"]["depth"], want)
    assert len(both["camera_poses"]["c2w"]) == rec.n_frames


def test_da3_revisit_depth_outside_the_pose_families_is_its_own_call(env, tmp_path):
    rec = open_record(env)
    rec.meta["case"]["tags"] = {}  # no WorldMemBench family: camera poses inactive, the depth at the picks alone
    model = FakeDA3()
    out, _ = compute_features(rec, [Poses(model=model), MemDepth(model=model)], FeatureCache(tmp_path / "x"))
    picks = sorted(memory_depth_frames(rec, 4))
    assert "inactive" in out["camera_poses"] and model.calls == [len(picks)]
    assert list(out["memory_depth"]["frame"]) == picks
