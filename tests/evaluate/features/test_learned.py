"""Learned backends run their real code path offline: every model is built from a tiny config with random weights."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from worldgate.evaluate import shared
from worldgate.evaluate.worldmark import protocol as WP
from worldgate.evaluate.worldmark.flow_eval import parallax_fit
from worldgate.evaluate.worldmembench import camera as M_camera  # noqa: E402
from worldgate.evaluate.features import FeatureError  # noqa: E402
from worldgate.evaluate.features.appearance import LearnedAppearance  # noqa: E402
from worldgate.evaluate.features.depth import LearnedDepth  # noqa: E402
from worldgate.evaluate.features.flow import LearnedFlow  # noqa: E402
from worldgate.evaluate.features.quality import LearnedQuality  # noqa: E402
from worldgate.evaluate.runner import evaluate_run  # noqa: E402
from worldgate.generate.runner import run_generate  # noqa: E402


def tiny_models():
    from transformers import (CLIPVisionConfig, CLIPVisionModelWithProjection, DepthAnythingConfig,
                              DepthAnythingForDepthEstimation, Dinov2Config, Dinov2Model)

    torch.manual_seed(0)
    dino = Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=4,
                                    patch_size=14, image_size=224))
    depth = DepthAnythingForDepthEstimation(DepthAnythingConfig(
        backbone_config=Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                                     out_indices=[1, 2, 3, 4], reshape_hidden_states=False),
        reassemble_hidden_size=32, reassemble_factors=[4, 2, 1, 0.5], neck_hidden_sizes=[8, 16, 32, 64],
        fusion_hidden_size=16, head_hidden_size=8))
    clip = CLIPVisionModelWithProjection(CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                          num_attention_heads=2, patch_size=32, projection_dim=16))
    head = torch.nn.Linear(16, 1)
    return dino, depth, clip, head


def dino_processor():
    """facebook/dinov2-base's image processor (the PIL class; its Hub config as worldgate records it)."""
    from transformers import BitImageProcessorPil

    from worldgate.evaluate.features.models.loaders import DINOV2_PROCESSOR

    return BitImageProcessorPil(**DINOV2_PROCESSOR)


def clip_processor():
    from transformers import CLIPImageProcessorPil

    from worldgate.evaluate.features.models.loaders import CLIP_PROCESSOR

    return CLIPImageProcessorPil(**CLIP_PROCESSOR)


def tiny_extractors():
    dino, depth, clip, head = tiny_models()
    exs = [LearnedDepth(model=depth, size=98), LearnedAppearance(model=dino, processor=dino_processor(), transnet=False),
           LearnedQuality(clip=clip, head=head, imaging=False, processor=clip_processor())]
    try:
        from torchvision.models.optical_flow import raft_small

        exs.insert(0, LearnedFlow(model=raft_small(weights=None), iters=2))
    except Exception:  # torchvision absent: the flow comes from nowhere, and the test says so below
        pass
    return exs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("learned") / "engine"
    m = out.parent / "cases.jsonl"
    m.write_text(json.dumps({"id": "lr", "trajectory": "L2 R2", "scene": {"seed": 5}}) + "\n")
    assert run_generate("engine", str(m), out, overrides=["model.width=64", "model.height=64"], progress=False).exit_code == 0
    return out


def test_learned_backend_real_code_path(run):
    exs = tiny_extractors()
    r = evaluate_run(run, backend="learned", extractors=exs, progress=False)
    assert not r["errors"], r["errors"]
    row = json.loads((run / "samples.jsonl").read_text())
    keys = set(row["features"].values())
    assert {"depth@1-learned", "appearance@2-learned", "quality@2-learned"} <= keys
    s, why = row["scores"], row["unavailable"]
    assert 0.0 <= s["aesthetic_quality"] <= 1.0
    assert "VGGT" in why["global_memory"] and "DA3" in why["camera_rpe_rot"]
    assert "pyiqa" in why["imaging_quality"]
    if any(isinstance(e, LearnedFlow) for e in exs):
        assert s["local_memory"] is not None or "frozen" in why["local_memory"]
        assert np.isfinite([v for k, v in s.items() if k.startswith("direction") and v is not None]).all()
    # cached under the learned keys: rescoring computes nothing
    again = evaluate_run(run, backend="learned", extractors=tiny_extractors(), progress=False, rescore=True)
    assert again["features"]["computed"] == 0


def test_learned_embeddings_are_unit_and_shaped(run):
    from worldgate.evaluate.features import FeatureCache, compute_features, open_record

    rec = open_record(run / "lr")
    dino, depth, *_ = tiny_models()
    feats, _ = compute_features(rec, [LearnedAppearance(model=dino, processor=dino_processor(), transnet=False),
                                      LearnedDepth(model=depth, size=98)],
                                FeatureCache(run / ".f2"))
    e = feats["appearance"]["emb"]
    assert e.shape[0] == rec.n_frames and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    d = feats["depth"]
    assert list(d["frame"]) == list(range(0, rec.n_frames, 16)) and d["disparity"].shape[1:] == (8, 8)
    assert np.isfinite(d["disparity"]).all()


def test_parallax_split_from_depth_recovers_translation_share():
    rng = np.random.default_rng(0)
    disp = rng.uniform(0.1, 1.0, (1, 8, 8)).astype(np.float32)
    n = 6
    grid = np.zeros((n, 8, 8, 2), np.float32)
    grid[:3, ..., 0] = -4.0 * disp[0]  # lateral translation: flow proportional to inverse depth
    grid[3:, ..., 0] = -3.0  # yaw: the same flow at every depth
    feat = {"flow": {"grid": grid}, "depth": {"frame": np.array([0]), "disparity": disp}}
    # WorldMark's fit u = a/Z + b (fe:207-223) on the samples of each segment's picked frames
    for keys, lat_p in (("AL", None),):
        raw, kind = WP.parallax(feat, list(keys), 6, 1.0)
        assert kind == "px_raw"
        px = parallax_fit(raw, list(keys))
        assert px[0]["p_trans"] > 0.95 and px[1]["p_trans"] < 0.05


def test_missing_weights_name_the_model_and_the_fix():
    ex = LearnedAppearance(hf_id="facebook/dinov2-base")
    with pytest.raises(FeatureError, match="hf download facebook/dinov2-base"):
        ex._model()


def test_musiq_imaging_through_pyiqa():
    """MUSIQ-SPAQ (pyiqa, optional: PolyForm-NC, installed --no-deps by .ci/run) on the real LearnedQuality path,
    built without its checkpoint: the imaging row is the metric's own output on the frame, rescaled 0..100 -> 0..1."""
    pyiqa = pytest.importorskip("pyiqa")
    torch.manual_seed(0)
    musiq = pyiqa.create_metric("musiq-spaq", device="cpu", pretrained=False)
    _, _, clip, head = tiny_models()
    ex = LearnedQuality(clip=clip, head=head, imaging=musiq, processor=clip_processor())

    class Rec:
        pass

    ex.start(Rec())
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (64, 96, 3), dtype=np.uint8) for _ in range(5)]
    for i, f in enumerate(frames):
        ex.update(i, f)
    out = ex.finish()
    assert list(out["frame"]) == [0, 4] and np.isfinite(out["imaging"]).all()
    with torch.inference_mode():
        want = float(musiq(torch.from_numpy(frames[4].astype(np.float32) / 255.0).permute(2, 0, 1)[None])) / 100.0
    assert out["imaging"][1] == pytest.approx(want, rel=1e-5)


# ---------------------------------------------------- WorldMemBench static memory under the learned backend
def test_spherical_score_properties():
    from worldgate.evaluate.worldmembench.static import spherical_score
    from worldgate.evaluate.metrics import params
    PARAMS = params()
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(0)
    K = np.array([[20.0, 0, 16], [0, 20.0, 16], [0, 0, 1]])
    d = rng.uniform(0.2, 1.0, (32, 32))
    I = np.eye(3)
    assert spherical_score(d, I, d, I, K, PARAMS) == pytest.approx(1.0)
    assert spherical_score(d, I, 3.0 * d, I, K, PARAMS) == pytest.approx(1.0)  # global scale is removed (delta)
    other = rng.uniform(0.2, 1.0, (32, 32))
    assert spherical_score(d, I, other, I, K, PARAMS) < 0.6  # a different surface
    R = Rotation.from_euler("y", 30, degrees=True).as_matrix()
    turned = spherical_score(d, I, d, R, K, PARAMS)
    assert turned < 0.7  # the same map seen 30 degrees off: bins miss and land on other surfaces


@pytest.fixture(scope="module")
def wmb_run(tmp_path_factory):
    from suite_cases import suite_case_manifest

    root = tmp_path_factory.mktemp("wmb-learned")
    m = suite_case_manifest(root, "object-LR-00")
    # without its family tag every static metric applies (the learned code path of each one is what is tested here)
    rows = [json.loads(x) for x in m.read_text().splitlines()]
    for r in rows:
        r["tags"].pop("family", None)
    m.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = root / "gt"
    assert run_generate("engine", str(m), out, overrides=["model.width=96", "model.height=96"],
                        progress=False).exit_code == 0
    return out


def tiny_sam2():
    """Sam2Model (transformers) from a tiny config: 4-stage Hiera, FPN and mask decoder at width 32."""
    from transformers import (Sam2Config, Sam2HieraDetConfig, Sam2MaskDecoderConfig, Sam2Model,
                              Sam2PromptEncoderConfig, Sam2VisionConfig)

    torch.manual_seed(0)
    bb = Sam2HieraDetConfig(hidden_size=16, blocks_per_stage=[1, 1, 2, 1], embed_dim_per_stage=[16, 32, 64, 128],
                            num_attention_heads_per_stage=[1, 1, 2, 2], window_size_per_stage=[8, 4, 14, 7],
                            global_attention_blocks=[3])
    return Sam2Model(Sam2Config(
        vision_config=Sam2VisionConfig(backbone_config=bb, backbone_channel_list=[128, 64, 32, 16], fpn_hidden_size=32),
        prompt_encoder_config=Sam2PromptEncoderConfig(hidden_size=32),
        mask_decoder_config=Sam2MaskDecoderConfig(hidden_size=32, mlp_dim=64, num_attention_heads=2,
                                                  iou_head_hidden_dim=32)))


def test_static_memory_learned_path(wmb_run):
    """DINOv2 in the masks, SAM2 silhouettes and Depth Anything at the revisit frames, through the real extractor code
    (tiny random models): every static metric but identity is scored on [0, 1]; identity is said unavailable."""
    from worldgate.evaluate.features.memory_depth import LearnedMemoryDepth
    from worldgate.evaluate.features.targets import LearnedTargets

    dino, depth, *_ = tiny_models()
    exs = [LearnedAppearance(model=dino, processor=dino_processor(), transnet=False),
           LearnedTargets(model=dino, segmenter=tiny_sam2()),
           LearnedMemoryDepth(model=depth, size=98)]
    r = evaluate_run(wmb_run, backend="learned", extractors=exs, progress=False)
    assert not r["errors"], r["errors"]
    row = json.loads((wmb_run / "samples.jsonl").read_text())
    assert {"targets@2-learned", "memory_depth@1-learned"} <= set(row["features"].values())
    s, why = row["scores"], row["unavailable"]
    for m in ("human_appearance", "object_appearance", "object_geometry", "depth_spearman",
              "spherical_reconstruction"):
        assert s[m] is not None and 0.0 <= s[m] <= 1.0, (m, s.get(m), why.get(m))
    # the return frame is chosen by estimated orientation (the paper: DA3 poses), which this backend does not have
    assert (s["environment_visible"] is not None and 0.0 <= s["environment_visible"] <= 1.0) or \
        "pose" in why["environment_visible"]
    assert "ArcFace" in why["human_identity"]
    from worldgate.evaluate.features import FeatureCache, open_record

    rec = open_record(wmb_run / "object-LR-00")
    D = FeatureCache(wmb_run / ".features").get(rec, LearnedMemoryDepth(model=depth))
    ph = [p for p in rec.trajectory["phases"] if p["name"] == "R1"][0]["frames"]
    assert D["frame"][0] == 0 and ph[1] in D["frame"]  # the arrival frame of R1 has depth
    assert D["depth"].shape[1:] == (32, 32) and np.isfinite(D["depth"]).all()


def test_sam2_segment_is_box_prompted_and_frame_sized():
    from worldgate.evaluate.features.targets import LearnedTargets

    ex = LearnedTargets(model=None, segmenter=tiny_sam2())
    frame = np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8)
    mask = np.zeros((60, 80), bool)
    mask[20:40, 30:50] = True
    a = ex.segment(frame, mask)
    assert a.shape == (60, 80) and a.dtype == bool
    assert np.array_equal(a, ex.segment(frame, mask))  # deterministic


def test_a_model_two_features_use_is_loaded_once(monkeypatch):
    """Appearance and targets both run DINOv2, depth and memory-depth both Depth Anything: one copy each."""
    from transformers import DepthAnythingForDepthEstimation, Dinov2Model

    from worldgate.evaluate.features.models import catalogue
    from worldgate.evaluate.features.models.catalogue import DEPTH_ID, DINOV2_ID
    from worldgate.evaluate.features.memory_depth import LearnedMemoryDepth
    from worldgate.evaluate.features.targets import LearnedTargets

    dino, depth, *_ = tiny_models()
    calls = []

    def fake(model):
        def from_pretrained(hf_id, **kw):
            calls.append(hf_id)
            return model
        return from_pretrained

    monkeypatch.setattr(catalogue, "_SHARED", {})
    monkeypatch.setattr(Dinov2Model, "from_pretrained", fake(dino))
    monkeypatch.setattr(DepthAnythingForDepthEstimation, "from_pretrained", fake(depth))
    assert LearnedAppearance()._model() is LearnedTargets()._model() is dino
    assert LearnedDepth()._model() is LearnedMemoryDepth().depth._model() is depth
    assert sorted(calls) == sorted([DINOV2_ID, DEPTH_ID])


def test_missing_models_fail_in_seconds_naming_each_with_its_fetch_command(tmp_path, monkeypatch, capsys):
    """With no weights and no network, `evaluate --backend learned` fails before the first record, exits non-zero,
    and names every model it needs with the command that fetches it (no per-record retries)."""
    import time

    from worldgate.cli import main
    from worldgate.evaluate.features.models.catalogue import models_by_feature
    from worldgate.generate.runner import run_generate

    run = tmp_path / "run"
    assert run_generate("engine", "worldmark-engine", run, limit=2, progress=False,
                        overrides=["model.width=64", "model.height=64", "trajectory.seconds=1"]).exit_code == 0
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf" / "hub"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-torch"))
    t0 = time.perf_counter()
    assert main(["evaluate", str(run), "--backend", "learned", "--no-progress"]) != 0
    assert time.perf_counter() - t0 < 30
    err = capsys.readouterr().err
    for models in models_by_feature().values():  # as this machine runs them (DA3 for both depths where it imports)
        for _, source, mid, _ in models:
            assert mid in err
    assert "hf download facebook/dinov2-base" in err and "Raft_Large_Weights" in err
    assert not (run / "results.json").exists()  # nothing was scored, nothing claims to be


def test_doctor_lists_every_model_with_source_licence_and_fetch_command(tmp_path, monkeypatch, capsys):
    from worldgate.cli import main

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf" / "hub"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-torch"))
    assert main(["doctor", "--backend", "learned"]) == 1  # nothing is in these caches
    out = capsys.readouterr().out
    for name in ("SEA-RAFT", "Depth Anything 3", "DINOv2" if "DINOv2" in out else "facebook/dinov2-base", "TransNetV2",
                 "VGGT-Omega", "Q-Align", "MUSIQ", "LAION aesthetic", "ArcFace", "GroundingDINO", "ViPE"):
        assert name in out, name
    assert "hf download facebook/dinov2-base" in out and "CC BY-NC 4.0" in out and "missing" in out
