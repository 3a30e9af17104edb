"""ArcFace for WorldMemBench Human Identity (evaluate/features/models/identity.py), offline: tiny IResNet weights files the test
writes (safetensors, .pth, and an ONNX export run with onnxruntime where that optional package is installed)."""

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from worldgate.evaluate.features import FeatureError
from worldgate.evaluate.features.models.identity import (
    ARCFACE_URL,
    FaceIdentity,
    TorchArcFace,
    arcface_present,
    face_crop,
    identity_scores,
    iresnet,
    load_arcface,
)

HAS_ORT = importlib.util.find_spec("onnxruntime") is not None


def tiny_net():
    torch.manual_seed(0)
    net = iresnet(layers=(1, 2, 1, 1), widths=(8, 8, 16, 16), num_features=16, stem=8).eval()
    with torch.no_grad():  # non-trivial batch-norm statistics, so eval mode differs from a fresh net
        for mod in net.modules():
            if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    return net


def crops(n=3, seed=0):
    return np.random.default_rng(seed).integers(0, 255, (n, 112, 112, 3), dtype=np.uint8)


def test_the_r50_layout_is_arcface_torchs():
    """The default network has arcface_torch iresnet50's key names and sizes (43.6 M parameters, fc 25088 -> 512)."""
    net = iresnet()
    sd = net.state_dict()
    assert sd["fc.weight"].shape == (512, 512 * 7 * 7) and sd["conv1.weight"].shape == (64, 3, 3, 3)
    assert "layer3.13.conv2.weight" in sd and "layer3.14.conv2.weight" not in sd
    assert "layer1.0.downsample.0.weight" in sd and sd["features.running_var"].shape == (512,)
    n = sum(p.numel() for p in net.parameters())
    assert 43.5e6 < n < 43.7e6, n


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_weights_file_round_trip(tmp_path, suffix):
    net = tiny_net()
    f = tmp_path / f"arcface{suffix}"
    sd = {k: v.contiguous() for k, v in net.state_dict().items()}
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(sd, str(f))
    else:
        torch.save(sd, f)
    assert arcface_present(str(f))
    model = load_arcface(str(f))
    assert isinstance(model, TorchArcFace)
    x = crops()
    e = model(x)
    assert e.shape == (3, 16) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(e, model(x))  # deterministic
    with torch.inference_mode():  # the file's network is the written one: same outputs as the original
        ref = net((torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2) / 255.0 - 0.5) / 0.5).numpy()
    np.testing.assert_allclose(e, ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=1e-5)


def test_missing_weights_name_the_fetch(tmp_path):
    assert not arcface_present(str(tmp_path / "none.onnx"))
    with pytest.raises(FeatureError, match="buffalo_l"):
        load_arcface(str(tmp_path / "none.onnx"))
    assert "buffalo_l.zip" in ARCFACE_URL


def test_onnx_export_runs_with_onnxruntime_like_torch(tmp_path):
    """The same network exported to ONNX (what insightface ships) gives the torch embeddings through onnxruntime,
    with insightface's (x - 127.5) / 127.5 preprocessing; without onnxruntime the error says how to install it."""
    net = tiny_net()
    f = tmp_path / "w600k_tiny.onnx"
    if not HAS_ORT:  # the optional runtime is named with its install command
        f.write_bytes(b"not read")
        with pytest.raises(FeatureError, match="pip install onnxruntime"):
            load_arcface(str(f))
        assert not arcface_present(str(f))
        f.unlink()
    try:
        torch.onnx.export(net, torch.zeros(1, 3, 112, 112), str(f), input_names=["input.1"], dynamo=False,
                          dynamic_axes={"input.1": {0: "n"}})
    except (ImportError, RuntimeError) as e:  # the exporter needs the onnx package (optional, absent here)
        pytest.skip(f"torch.onnx.export unavailable here: {type(e).__name__}: {e}")
    if not HAS_ORT:
        pytest.skip("onnxruntime is not installed (optional); the torch path above ran the same network")
    onnx_model = load_arcface(str(f))
    x = crops(4, seed=2)
    e = onnx_model(x)
    t = TorchArcFace(net)(x)
    assert e.shape == (4, 16)
    np.testing.assert_allclose(e, t, atol=1e-4)
    np.testing.assert_array_equal(e, onnx_model(x))


def test_face_crop_is_the_top_square_of_the_person_box():
    frame = np.zeros((100, 80, 3), np.uint8)
    frame[:, :] = (0, 0, 255)
    frame[10:30, 20:40] = (255, 0, 0)  # the head: the top 20 x 20 of a 20 x 60 person
    mask = np.zeros((100, 80), bool)
    mask[10:70, 20:40] = True
    c = face_crop(frame, mask)
    assert c.shape == (112, 112, 3) and c.dtype == np.uint8
    red = (c[..., 0] > 200) & (c[..., 2] < 50)
    assert 0.6 < red.mean() < 0.8  # the 20 px head in a 24 px crop (10 % margin each side)
    assert face_crop(frame, np.zeros_like(mask)) is None
    edge = np.zeros_like(mask)
    edge[0:30, 0:10] = True  # at the frame corner: padded by replication, still 112 x 112
    assert face_crop(frame, edge).shape == (112, 112, 3)


def test_identity_of_the_same_face_is_one_and_empty_is_nan(tmp_path):
    ident = FaceIdentity(model=TorchArcFace(tiny_net()))
    frame = np.random.default_rng(3).integers(0, 255, (96, 96, 3), dtype=np.uint8)
    m = np.zeros((96, 96), bool)
    m[10:80, 30:60] = True
    other = np.zeros_like(m)
    other[5:90, 0:20] = True
    e, none, o = ident.embed(frame, [m, np.zeros_like(m), other])
    assert none is None and e.shape == (16,)
    assert identity_scores([e, e], e) == pytest.approx(1.0, abs=1e-6)
    v = identity_scores([e], o)
    assert 0.0 <= v < 1.0
    assert np.isnan(identity_scores([], e)) and np.isnan(identity_scores([e], None))
    assert ident.config()["face_crop"].startswith("top square")
