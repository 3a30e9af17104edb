"""SANA-WM (diffusers 0.42.1 SanaWMPipeline): c2w poses in metres + original-image [fx, fy, cx, cy], 8k+1 frames at
16 fps; the poses agree with diffusers' own letter DSL; the runtime runs end to end on a tiny random pipeline."""

import json
import math

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import AdapterError, get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case

MODEL_ID = "Efficient-Large-Model/SANA-WM_bidirectional-diffusers"


class TestSanaWMConformance(AdapterConformance):
    adapter_name = "sana-wm"


@pytest.fixture
def sw():
    return get_adapter("sana-wm")


def _yaw_pitch_deg(c2w):
    """(yaw, pitch) of R = R_y(yaw) @ R_x(pitch): forward column = (sin y cos p, -sin p, cos y cos p)."""
    f = c2w[..., :3, 2]
    return np.degrees(np.arctan2(f[..., 0], f[..., 2])), np.degrees(np.arcsin(-f[..., 1]))


# --------------------------------------------------------------------------------------------------- goldens
def test_id1_forward_golden(sw):
    p = sw.plan(worldmark_case(1))
    c2w = p.files["c2w.npy"]
    # 20 s at 16 fps = 320 frames after the conditioning frame; 321 = 8*40 + 1 is already 8k+1
    assert p.n_frames == 321 and c2w.shape == (321, 4, 4) and c2w.dtype == np.float32
    assert p.segment_frames == [(0, 320)]
    np.testing.assert_allclose(c2w[:, 2, 3], np.arange(321) * 1.4 / 16, rtol=1e-6, atol=1e-5)  # +Z forward, metres
    assert c2w[320, 2, 3] == pytest.approx(28.0, abs=1e-5)
    assert not c2w[:, :2, 3].any()
    np.testing.assert_array_equal(c2w[:, :3, :3], np.broadcast_to(np.eye(3, dtype=np.float32), (321, 3, 3)))
    np.testing.assert_array_equal(c2w[0], np.eye(4, dtype=np.float32))  # relative to frame 0
    assert p.files["intrinsics.npy"].shape == (4,) and p.files["intrinsics.npy"].dtype == np.float32
    call = p.files["call.json"]
    assert call["num_frames"] == 321 and call["height"] == 704 and call["width"] == 1280 and call["fps"] == 16
    assert "num_frames=321" in p.files["command.txt"] and "c2w=np.load('c2w.npy')" in p.files["command.txt"]
    assert "action=" not in p.files["command.txt"]  # poses, never the letter DSL
    assert p.files["prompt.txt"] == "First-person view. A test scene." and p.prompt_source == "first_view/prompt_real.txt:1"


def test_id6_and_id11_goldens(sw):
    p = sw.plan(worldmark_case(6))  # W S
    z = p.files["c2w.npy"][:, 2, 3]
    assert p.n_frames == 641 and p.segment_frames == [(0, 320), (320, 640)]
    assert z[320] == pytest.approx(28.0, abs=1e-5) and z[640] == pytest.approx(0.0, abs=1e-5)
    assert z[480] == pytest.approx(14.0, abs=1e-5)
    p = sw.plan(worldmark_case(11))  # W S W
    z = p.files["c2w.npy"][:, 2, 3]
    assert p.n_frames == 961 and p.segment_frames == [(0, 320), (320, 640), (640, 960)]
    assert (z[320], z[640], z[960]) == pytest.approx((28.0, 0.0, 28.0), abs=1e-5)
    assert not any("rounded up" in c for c in p.caveats)  # 320 K + 1 is 8k+1: no padding for WorldMark


def test_lrud_golden(sw):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K, image_size=REAL_SIZE)
    p = sw.plan(c)
    # V2 L3.6 R3.6 U1.8 D1.8 H1 = 13.8 s -> 220.8 -> 221 frames after frame 0; 8*ceil(221/8)+1 = 225
    assert p.n_frames == 225
    assert p.segment_frames == [(0, 32), (32, 90), (90, 148), (148, 176), (176, 205), (205, 221)]
    assert any("222 frames rounded up to 225" in cv for cv in p.caveats)
    c2w = p.files["c2w.npy"].astype(float)
    yaw, pitch = _yaw_pitch_deg(c2w)
    assert yaw[90] == pytest.approx(-90 + 25 * (90 / 16 - 5.6), abs=1e-4)  # L: t=5.625 s, 0.025 s into R
    assert pitch[176] == pytest.approx(45.0, abs=1e-4) and yaw[176] == pytest.approx(0.0, abs=1e-4)
    np.testing.assert_allclose(c2w[176, :3, 2], [0, -math.sin(math.pi / 4), math.cos(math.pi / 4)], atol=1e-6)
    np.testing.assert_array_equal(c2w[221:], np.broadcast_to(c2w[221], (4, 4, 4)))  # the tail holds the final pose
    assert not c2w[:, :3, 3].any()  # a pure rotation carries exactly zero translation


# ------------------------------------------------------------------------------------------------ properties
def test_forward_monotone_during_w(sw):
    z = sw.plan(worldmark_case(13)).files["c2w.npy"][:, 2, 3]  # W R W
    assert np.all(np.diff(z[:321]) > 0)


def test_yaw_monotone_translation_zero_during_lr(sw):
    p = sw.plan(worldmark_case(7))  # L R
    c2w = p.files["c2w.npy"].astype(float)
    yaw, pitch = _yaw_pitch_deg(c2w)
    assert not c2w[:, :3, 3].any()
    uw = np.degrees(np.unwrap(np.radians(yaw)))
    assert np.all(np.diff(uw[:321]) < 0) and np.all(np.diff(uw[320:641]) > 0)
    np.testing.assert_allclose(pitch, 0.0, atol=1e-5)


def test_pitch_only_during_u_and_d(sw):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K, image_size=REAL_SIZE)
    c2w = sw.plan(c).files["c2w.npy"].astype(float)
    yaw, pitch = _yaw_pitch_deg(c2w)
    np.testing.assert_allclose(pitch[:148], 0.0, atol=1e-5)  # frames before U (frame 147 is t=9.1875 < 9.2)
    assert np.all(np.diff(pitch[147:177]) > 0) and np.all(np.diff(pitch[176:206]) < 0)
    np.testing.assert_allclose(pitch[205:], 0.0, atol=1e-4)  # back to level after D (t=12.8 s, frame 204.8)
    np.testing.assert_allclose(yaw[148:], 0.0, atol=1e-4)


def test_yaw_right_sign(sw):
    c2w = sw.plan(worldmark_case(5)).files["c2w.npy"]  # R
    # after 1 s at 25 deg/s the forward axis points to +X (a right turn); a yaw-left plan gives -0.4226 here
    assert c2w[16, 0, 2] == pytest.approx(math.sin(math.radians(25)), abs=1e-6)
    assert not c2w[:, :3, 3].any()


# ------------------------------------------------------------------------------------------------ intrinsics
def test_intrinsics_crop_arithmetic_real_size(sw):
    p = sw.plan(worldmark_case(1))
    fx, fy, cx, cy = REAL_K
    # 1080x720: scale = max(704/720, 1280/1080) = 1280/1080 -> resized 1280 x round(853.33) = 853, crop top (853-704)//2
    np.testing.assert_allclose(p.intrinsics["native"],
                               [fx * 1280 / 1080, fy * 853 / 720, cx * 1280 / 1080, cy * 853 / 720 - 74], rtol=1e-12)
    np.testing.assert_allclose(p.intrinsics["native"], [944.294044, 948.521073, 638.961067, 351.449507], atol=1e-5)
    t = p.intrinsics["transform"]
    assert t["resized_size"] == [1280, 853] and t["crop_left_top"] == [0, 74] and t["policy"] == "crop"
    np.testing.assert_array_equal(p.files["intrinsics.npy"], np.asarray(REAL_K, np.float32))  # the model gets original px
    assert p.intrinsics["case_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(1080 / (2 * fx))))
    assert p.intrinsics["native_hfov_deg"] == pytest.approx(p.intrinsics["case_hfov_deg"])  # width is not cropped here


@pytest.mark.parametrize("size,k,expect,crop", [
    # wider than 16:9: scale = 704/800 = 0.88 -> 1760x704, crop left 240
    ((2000, 800), [1000.0, 1000.0, 1000.0, 400.0], [880.0, 880.0, 640.0, 352.0], [240, 0]),
    # square stylised image: scale = 1.25 -> 1280x1280, crop top 288
    ((1024, 1024), [700.0, 700.0, 512.0, 512.0], [875.0, 875.0, 640.0, 352.0], [0, 288]),
])
def test_intrinsics_crop_both_axes(sw, size, k, expect, crop):
    c = Case(id="k", suite="t", trajectory=library.worldmark(1), image="x.jpg", intrinsics=k, image_size=size)
    p = sw.plan(c)
    np.testing.assert_allclose(p.intrinsics["native"], expect, rtol=1e-12)
    assert p.intrinsics["transform"]["crop_left_top"] == crop


def test_missing_intrinsics_and_bad_size_are_refused(sw):
    c = Case(id="nok", suite="t", trajectory=library.worldmark(1), image="x.jpg")
    with pytest.raises(AdapterError, match="intrinsics"):
        sw.plan(c)
    with pytest.raises(AdapterError, match="multiples of 32"):
        get_adapter("sana-wm", width=100)
    with pytest.raises(AdapterError, match="unknown model args"):
        get_adapter("sana-wm", widht=64)


# ------------------------------------------------------------- agreement with diffusers' own camera utilities
def _dsl_case(text):
    traj = Trajectory.parse(text, speed=0.05 * 16, yaw_rate=1.2 * 16, pitch_rate=1.2 * 16)  # the DSL's per-frame steps
    return Case(id="dsl", suite="t", trajectory=traj, image="x.jpg", intrinsics=REAL_K, image_size=REAL_SIZE)


def test_plan_agrees_with_diffusers_action_dsl(sw):
    cam = pytest.importorskip("diffusers.pipelines.sana_wm.cam_utils")
    # W forward, yaw right, pitch up, strafe right: 16 frames each, in our grammar and in the pipeline's DSL
    ours = sw.plan(_dsl_case("W1 R1 ^1 D1")).files["c2w.npy"]
    theirs = cam.action_string_to_c2w("w-16,l-16,i-16,d-16")  # cam_utils.py:82-139
    assert ours.shape == theirs.shape == (65, 4, 4)
    rel_o = np.linalg.inv(ours[:-1].astype(float)) @ ours[1:].astype(float)  # per-frame motion in the camera frame
    rel_t = np.linalg.inv(theirs[:-1].astype(float)) @ theirs[1:].astype(float)
    for (a, b), axis, name in [((0, 16), 2, "W: +Z forward"), ((48, 64), 0, "D: +X right")]:
        for rel in (rel_o, rel_t):
            t = rel[a:b, :3, 3]
            assert np.all(t[:, axis] > 0.049), name
            assert np.all(np.abs(np.delete(t, axis, axis=1)) < 1e-5), name
    for rel in (rel_o, rel_t):
        # yaw right: about the camera's Y axis, forward -> +X; pitch up: about camera X, forward -> -Y
        assert np.all(rel[16:32, 0, 2] > 0) and np.all(np.abs(rel[16:32, 1, 2]) < 1e-6)
        assert np.all(rel[32:48, 1, 2] < 0) and np.all(np.abs(rel[32:48, 0, 2]) < 1e-6)
        ang = np.degrees(np.arccos(np.clip((np.trace(rel[16:48, :3, :3], axis1=1, axis2=2) - 1) / 2, -1, 1)))
        np.testing.assert_allclose(ang, 1.2, atol=2e-3)  # same rate: 1.2 deg per frame
    np.testing.assert_allclose(rel_o, rel_t, atol=2e-5)
    np.testing.assert_allclose(ours, theirs, atol=5e-5)  # the same poses, so the model sees the same input


def test_pipeline_keeps_every_planned_frame_and_crops_like_the_plan(sw):
    pytest.importorskip("diffusers")
    from types import SimpleNamespace

    from PIL import Image
    from diffusers import SanaWMPipeline
    from diffusers.pipelines.sana_wm import cam_utils as cam

    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K, image_size=REAL_SIZE)
    p = sw.plan(c)
    fake = SimpleNamespace(vae_temporal_compression_ratio=8)
    c2w, intr = SanaWMPipeline.prepare_camera_trajectory(fake, p.files["c2w.npy"], None, p.files["intrinsics.npy"],
                                                         p.extra["num_frames"])  # pipeline_sana_wm.py:365-401
    assert c2w.shape == (225, 4, 4) and intr.shape == (225, 4)
    np.testing.assert_array_equal(c2w, p.files["c2w.npy"])
    _, src, resized, off = cam.resize_and_center_crop(Image.new("RGB", REAL_SIZE), 704, 1280)  # cam_utils.py:171-185
    k = cam.transform_intrinsics_for_crop(np.asarray(REAL_K, np.float64), src, resized, off)
    np.testing.assert_allclose(p.intrinsics["native"], k, rtol=1e-12)


# ---------------------------------------------------------------------------------------- runtime (tiny, CPU)
def tiny_pipeline():
    """A random SanaWMPipeline with the real component classes and strides (BACKENDS.md, diffusers 0.42.1)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from transformers import Gemma2Config, Gemma2Model, GemmaTokenizer
    from diffusers import (AutoencoderKLLTX2Video, FlowMatchEulerDiscreteScheduler, SanaWMPipeline,
                           SanaWMTransformer3DModel)

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4}
    for ch in [chr(c) for c in range(32, 127)] + ["\u2581"]:
        vocab.setdefault(ch, len(vocab))
    tok = GemmaTokenizer(vocab=vocab, merges=[])
    torch.manual_seed(0)
    te = Gemma2Model(Gemma2Config(head_dim=16, hidden_size=16, intermediate_size=16, max_position_embeddings=2048,
                                  num_attention_heads=2, num_hidden_layers=1, num_key_value_heads=1,
                                  vocab_size=len(tok)))
    vae = AutoencoderKLLTX2Video(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16, 32, 32),
                                 decoder_block_out_channels=(8, 16, 32), layers_per_block=(1, 1, 1, 1, 1),
                                 decoder_layers_per_block=(1, 1, 1, 1), spatial_compression_ratio=32,
                                 temporal_compression_ratio=8)
    tr = SanaWMTransformer3DModel(in_channels=4, num_layers=2, hidden_size=32, num_attention_heads=2, softmax_every_n=2,
                                  linear_head_dim=16, caption_channels=16, mlp_ratio=2.0,
                                  chunk_plucker_channels=6 * 8, chunk_plucker_post_attn_blocks=2)
    pipe = SanaWMPipeline(tokenizer=tok, text_encoder=te, vae=vae, transformer=tr,
                          scheduler=FlowMatchEulerDiscreteScheduler())
    pipe.set_progress_bar_config(disable=True)
    return pipe


TINY = {"width": 64, "height": 64, "num_inference_steps": 2, "max_sequence_length": 16}


@pytest.fixture(scope="module")
def tiny():
    return tiny_pipeline()


@pytest.fixture
def image_case(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    path = tmp_path / "img.png"
    Image.fromarray(rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)).save(path)
    return Case(id="tiny", suite="t", trajectory=Trajectory.parse("W0.25 R0.25"), prompt="A street.", image=str(path),
                intrinsics=[70.0, 70.0, 40.0, 30.0], image_size=(80, 60))


class _Spy:
    def __init__(self, pipe):
        self.pipe, self.calls = pipe, []

    def to(self, device):
        self.pipe.to(device)
        return self

    def __call__(self, *args, **kw):
        self.calls.append((args, kw))
        return self.pipe(*args, **kw)


def test_rollout_calls_the_pipeline_with_the_poses(tiny, image_case):
    a = get_adapter("sana-wm", **TINY)
    spy = _Spy(tiny)
    a.load("cpu", pipeline=spy)
    plan = a.plan(image_case)
    assert plan.n_frames == 9  # 8 frames after the conditioning frame -> 9 = 8*1 + 1
    chunks = list(a.rollout(plan, seed=0))
    assert len(chunks) == 1 and chunks[0].start == 0
    f = chunks[0].frames
    assert f.shape == (9, 64, 64, 3) and f.dtype == np.uint8
    (args, kw), = spy.calls
    assert args[0].size == (80, 60) and args[1] == "A street." and "action" not in kw
    np.testing.assert_array_equal(kw["c2w"], plan.files["c2w.npy"])
    np.testing.assert_array_equal(kw["intrinsics"], np.asarray([70.0, 70.0, 40.0, 30.0], np.float32))
    assert (kw["num_frames"], kw["height"], kw["width"], kw["num_inference_steps"]) == (9, 64, 64, 2)
    again = next(a.rollout(plan, seed=0)).frames
    np.testing.assert_array_equal(again, f)  # deterministic for a seed
    assert not np.array_equal(next(a.rollout(plan, seed=1)).frames, f)


def test_rollout_refuses_an_image_of_another_size(tiny, image_case):
    a = get_adapter("sana-wm", **TINY)
    a.pipe = tiny
    image_case.image_size = (160, 120)
    with pytest.raises(AdapterError, match="intrinsics refer to 160x120"):
        next(a.rollout(a.plan(image_case)))


def test_missing_weights_name_the_hf_id_and_never_download():
    with pytest.raises(AdapterError, match="hf download worldgate-test/absent-model"):
        get_adapter("sana-wm", model_id="worldgate-test/absent-model").load("cpu")  # local_files_only: no network
    with pytest.raises(AdapterError, match=f"hf download {MODEL_ID}") as e:
        get_adapter("sana-wm", path="/nonexistent/sana-wm").load("cpu")
    assert "/nonexistent/sana-wm" in str(e.value)


def test_generate_end_to_end_from_a_saved_tiny_pipeline(tiny, image_case, tmp_path):
    from worldgate.generate.runner import run_generate

    weights = tmp_path / "tiny-sana-wm"
    tiny.save_pretrained(weights)
    manifest = tmp_path / "cases.jsonl"
    manifest.write_text(json.dumps({"id": image_case.id, "trajectory": "W0.25 R0.25", "prompt": image_case.prompt,
                                    "image": image_case.image, "intrinsics": image_case.intrinsics,
                                    "image_size": list(image_case.image_size)}) + "\n")
    out = tmp_path / "run"
    res = run_generate("sana-wm", str(manifest), out, model_args=dict(TINY, path=str(weights)), progress=False)
    assert res.exit_code == 0, res.failed
    meta = json.loads((out / "tiny" / "meta.json").read_text())
    assert meta["achieved"]["frames"] == 9 and meta["achieved"]["width"] == 64 and meta["achieved"]["fps"] == 16
    assert (out / "tiny" / "native" / "c2w.npy").is_file() and (out / "tiny" / "native" / "command.txt").is_file()
    assert np.load(out / "tiny" / "poses.npy").shape == (9, 4, 4)


# ------------------------------------------------------------- stage 2: the refiner's KV cache driven by a policy
def tiny_refiner(latent_channels: int = 4):
    """A random SanaWMLTX2Refiner with every real component class of diffusers 0.42.1: Gemma-3 (text + a tiny SigLIP
    tower), the LTX-2 text connectors and the refiner transformer, plus a tokenizer built in memory."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, GemmaTokenizer,
                              SiglipVisionConfig)
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.models.transformers.transformer_sana_wm_refiner import SanaWMLTX2RefinerTransformer3DModel
    from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors
    from diffusers.pipelines.sana_wm.refiner import SanaWMLTX2Refiner

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4, "<start_of_image>": 5, "<end_of_image>": 6,
             "<image_soft_token>": 7}
    for ch in [chr(c) for c in range(32, 127)] + ["\u2581"]:
        vocab.setdefault(ch, len(vocab))
    tok = GemmaTokenizer(vocab=vocab, merges=[])
    torch.manual_seed(0)
    te = Gemma3ForConditionalGeneration(Gemma3Config(
        text_config=Gemma3TextConfig(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     num_key_value_heads=1, head_dim=8, vocab_size=len(tok),
                                     max_position_embeddings=256),
        vision_config=SiglipVisionConfig(hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, image_size=28, patch_size=14),
        mm_tokens_per_image=4, boi_token_index=5, eoi_token_index=6, image_token_index=7))
    # connectors: (layers + 1) x 16 text features -> 16 (both connectors work at caption_channels)
    con = LTX2TextConnectors(caption_channels=16, text_proj_in_factor=2, video_connector_num_attention_heads=2,
                             video_connector_attention_head_dim=8, video_connector_num_layers=1,
                             video_connector_num_learnable_registers=4, audio_connector_num_attention_heads=2,
                             audio_connector_attention_head_dim=8, audio_connector_num_layers=1,
                             audio_connector_num_learnable_registers=4, video_hidden_dim=16, audio_hidden_dim=8,
                             connector_rope_base_seq_len=64)
    tr = SanaWMLTX2RefinerTransformer3DModel(
        in_channels=latent_channels, out_channels=latent_channels, num_attention_heads=2, attention_head_dim=8,
        cross_attention_dim=16, caption_channels=16, num_layers=2, audio_in_channels=4, audio_out_channels=4,
        audio_num_attention_heads=1, audio_attention_head_dim=8, audio_cross_attention_dim=8)
    ref = SanaWMLTX2Refiner(transformer=tr, connectors=con, tokenizer=tok, text_encoder=te,
                            scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0), text_max_sequence_length=16)
    ref.set_progress_bar_config(disable=True)
    return ref


def _yaw_poses(yaw_deg):
    from scipy.spatial.transform import Rotation

    out = np.repeat(np.eye(4)[None], len(yaw_deg), axis=0)
    out[:, :3, :3] = Rotation.from_euler("y", np.asarray(yaw_deg)[:, None], degrees=True).as_matrix()
    return out


def _lrlr_poses(n_pixels: int):
    """Pixel-frame poses that turn left 90 degrees and back, twice."""
    t = np.arange(n_pixels)
    period = n_pixels / 2
    return _yaw_poses(-90 * (1 - np.abs((t % period) / (period / 2) - 1)))


@pytest.fixture(scope="module")
def refiner():
    return tiny_refiner()


def _z(n_lat=11):
    import torch

    return torch.randn(1, 4, n_lat, 2, 3, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("budget", [2, 3])
def test_sliding_window_is_upstream_refiner_with_its_trim(refiner, budget):
    import torch
    from worldgate.adapters.sana_wm import refine_with_context
    from worldgate.adapters.context import make_policy

    z = _z()
    c2w = _lrlr_poses(8 * (z.shape[2] - 1) + 1)
    ours, log = refine_with_context(refiner, z, "p", fps=16.0, c2w=c2w, policy=make_policy("sliding_window", budget),
                                    generator=torch.Generator().manual_seed(5))
    theirs = refiner(z, "p", fps=16.0, kv_max_frames=1 + 3 * (budget - 1), generator=torch.Generator().manual_seed(5),
                     output_type="latent")
    assert torch.equal(ours, theirs)  # bit for bit: the same loop, the same cache contents
    assert [r["held"] for r in log][1:] == [[0], [0, 1], [0, 1, 2], [0, 2, 3]][:1] + \
        [sorted({0, *range(max(1, k - budget + 1), k)}) for k in range(2, 5)]
    assert not torch.equal(theirs, refiner(z, "p", fps=16.0, kv_max_frames=1 + 3 * budget,
                                           generator=torch.Generator().manual_seed(5), output_type="latent"))


def test_full_kv_is_upstream_refiner_without_a_trim(refiner):
    import torch
    from worldgate.adapters.sana_wm import refine_with_context
    from worldgate.adapters.context import make_policy

    z = _z()
    c2w = _lrlr_poses(8 * (z.shape[2] - 1) + 1)
    ours, log = refine_with_context(refiner, z, "p", fps=16.0, c2w=c2w, policy=make_policy("full_kv"),
                                    generator=torch.Generator().manual_seed(5))
    theirs = refiner(z, "p", fps=16.0, kv_max_frames=10**6, generator=torch.Generator().manual_seed(5),
                     output_type="latent")
    assert torch.equal(ours, theirs)
    assert log[-1]["held"] == [0, 1, 2, 3] and log[-1]["history_tokens"] == 9 * 6  # 9 latent frames x 2x3 tokens


def test_fov_cache_holds_exactly_the_selected_chunks(refiner):
    import torch
    from worldgate.adapters.sana_wm import refine_with_context, refiner_chunks, latent_to_pixel
    from worldgate.adapters.context import ChunkInfo, make_policy

    z = _z(14)  # sink + blocks of 3: chunks 0..5 (the last holds one latent frame); pixel chunks start 1, 25, 49, ...
    c2w = _yaw_poses(np.interp(np.arange(105), [0, 25, 49, 73, 97, 104], [0, -60, -150, -180, 0, 0]))
    policy = make_policy("fov", 3)  # sink, the most recent chunk, one retrieved by view overlap
    spans = refiner_chunks(z.shape[2])
    infos = [ChunkInfo(k, *latent_to_pixel(*sp), c2w[slice(*latent_to_pixel(*sp))]) for k, sp in enumerate(spans)]
    seen = []

    def check(k, held, kv, chunk_kv):
        assert held == sorted(policy.select(infos[:k], infos[k]))
        hist = [c for c in held if c != 0]
        for layer in range(len(kv)):
            lc = kv.get(layer)
            assert (lc.get_sink() is not None) == (0 in held)
            h = lc.get_history()
            if not hist:
                assert h is None
                continue
            # the cache the block attended to is the captured K/V of exactly those chunks, in order, nothing else
            assert torch.equal(h[0], torch.cat([chunk_kv[c][layer][0] for c in hist], dim=1))
            assert torch.equal(h[1], torch.cat([chunk_kv[c][layer][1] for c in hist], dim=1))
            assert h[0].shape[1] == sum(spans[c][1] - spans[c][0] for c in hist) * 2 * 3
        seen.append(held)

    _, log = refine_with_context(refiner, z, "p", fps=16.0, c2w=c2w, policy=policy, on_block=check,
                                 generator=torch.Generator().manual_seed(5))
    assert len(seen) == len(spans) - 1 and [r["held"] for r in log[1:]] == seen
    assert all(len(h) <= 3 for h in seen)
    # back at the start view, retrieval holds chunk 1 (which saw it), not chunk 3 (the one a window would keep)
    assert seen[-1] == [0, 1, 4]


def test_rollout_with_refiner_writes_the_held_chunks(tiny, refiner, image_case):
    from worldgate.adapters.context import make_policy

    a = get_adapter("sana-wm", **TINY)
    a.load("cpu", pipeline=tiny, refiner=refiner)
    image_case.trajectory = Trajectory.parse("L1 R1")  # 32 commanded frames -> 33 pixel frames, 5 latent frames
    plan = a.plan(image_case)
    chunks = list(a.rollout(plan, context=make_policy("sliding_window", 2), seed=0))
    assert [c.start for c in chunks] == [0, 1, 25] and sum(len(c.frames) for c in chunks) == plan.n_frames == 33
    assert [c.context_ids for c in chunks] == [[], [0], [0, 1]]
    assert chunks[2].extra["kv_bytes"] > chunks[1].extra["kv_bytes"] > 0
    b = get_adapter("sana-wm", **TINY)
    b.pipe = tiny
    with pytest.raises(AdapterError, match="refiner=DIR"):
        next(b.rollout(plan, context=make_policy("fov", 3)))


def test_generate_with_a_saved_refiner_and_a_context_policy(tiny, refiner, image_case, tmp_path):
    """The user's path: save_pretrained folders for both stages, `generate --context fov --budget 2`."""
    from worldgate.generate.runner import run_generate

    tiny.save_pretrained(tmp_path / "stage1")
    refiner.save_pretrained(tmp_path / "stage2")
    manifest = tmp_path / "cases.jsonl"
    manifest.write_text(json.dumps({"id": image_case.id, "trajectory": "L1 R1", "prompt": image_case.prompt,
                                    "image": image_case.image, "intrinsics": image_case.intrinsics,
                                    "image_size": list(image_case.image_size)}) + "\n")
    out = tmp_path / "run"
    res = run_generate("sana-wm", str(manifest), out, progress=False, context="fov", budget=2,
                       model_args=dict(TINY, path=str(tmp_path / "stage1"), refiner=str(tmp_path / "stage2")))
    assert res.exit_code == 0, res.failed
    rows = [json.loads(x) for x in (out / "tiny" / "context.jsonl").read_text().splitlines()]
    assert [r["chunk_start"] for r in rows] == [0, 1, 25] and [r["frames"] for r in rows] == [1, 24, 8]
    assert [r["context"] for r in rows] == [[], [0], [0, 1]] and rows[2]["kv_bytes"] > rows[1]["kv_bytes"]
    meta = json.loads((out / "tiny" / "meta.json").read_text())
    assert meta["achieved"]["frames"] == 33
    assert any("SanaWMLTX2Refiner" in c for c in meta.get("caveats", meta.get("plan", {}).get("caveats", [])))
    with pytest.raises(AdapterError, match="not a SanaWMLTX2Refiner"):
        get_adapter("sana-wm", **TINY, refiner=str(tmp_path / "missing")).load("cpu", pipeline=tiny)
