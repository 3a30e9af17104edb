"""HY-WorldPlay: pose.json with one {extrinsic c2w, K} per latent (latent i = frame 4i), 24 fps, AR L % 4 == 0."""

import json
import math

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, gated_checkout, gated_plan, worldmark_case
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case


class TestHYWorldPlayConformance(AdapterConformance):
    adapter_name = "hy-worldplay"


@pytest.fixture
def wp():
    return get_adapter("hy-worldplay")


def _forward(c2w):
    return c2w[:, :3, 2]  # camera +z axis in the world


def test_id1_forward_golden(wp):
    p = wp.plan(worldmark_case(1))
    # 20 s at 24 fps = 480 frames = 120 latents; latent 120 carries frame 480 (the end pose) -> 121 latents,
    # rounded up to a multiple of 4 -> 124 latents, video_length 4*124-3 = 493
    assert p.n_frames == 493 and p.extra["latents"] == 124 and p.segment_frames == [(0, 480)]
    c2w = p.arrays["c2w"]
    assert c2w.shape == (124, 4, 4)
    # latent i is frame 4i, t = i/6 s, 1.4 m/s forward along +z: 0.2333... m per latent, then the final pose (28 m)
    expect = np.minimum(np.arange(124) * 1.4 / 6, 28.0)
    np.testing.assert_allclose(c2w[:, 2, 3], expect, atol=1e-12)
    assert not c2w[:, :2, 3].any()
    np.testing.assert_array_equal(c2w[:, :3, :3], np.broadcast_to(np.eye(3), (124, 3, 3)))
    assert np.all(np.diff(c2w[:121, 2, 3]) > 0)  # forward axis monotone during W
    # the model's own labels (W = 9) for latents 1..120, 0 for the first and the held tail
    assert p.arrays["action"].tolist() == [0] + [9] * 120 + [0] * 3
    np.testing.assert_array_equal(p.arrays["latent_frame"][:3], [0, 4, 8])
    cmd = p.files["command.txt"]
    for s in ("--video_length 493", "--model_type ar", "--pose pose.json", "--width 832", "--height 480"):
        assert s in cmd


def test_pose_json_schema_and_numeric_key_order(wp, tmp_path):
    p = wp.plan(worldmark_case(1))
    p.write(tmp_path)
    text = (tmp_path / "pose.json").read_text()
    d = json.loads(text)  # dicts keep the file's order, which is what the model iterates
    assert list(d) == [str(i) for i in range(124)]  # "10" must not come before "2"
    assert set(d["0"]) == {"extrinsic", "K"}
    np.testing.assert_array_equal(d["0"]["extrinsic"], np.eye(4))
    assert d["1"]["extrinsic"][2][3] == pytest.approx(1.4 * 4 / 24, abs=1e-15)
    assert d["123"]["extrinsic"][2][3] == pytest.approx(28.0, abs=1e-12)
    np.testing.assert_array_equal(np.array(d["57"]["extrinsic"]), p.arrays["c2w"][57])


def test_id6_and_id11_goldens(wp):
    p = wp.plan(worldmark_case(6))  # W S: 240 + 1 latents -> 244, 4*244-3 = 973 frames
    assert p.n_frames == 973 and p.extra["latents"] == 244 and p.segment_frames == [(0, 480), (480, 960)]
    c2w = p.arrays["c2w"]
    assert c2w[120, 2, 3] == pytest.approx(28.0) and abs(c2w[240, 2, 3]) < 1e-9  # S walks back to the start
    assert p.arrays["action"].tolist() == [0] + [9] * 120 + [18] * 120 + [0] * 3  # S = 18
    p = wp.plan(worldmark_case(11))  # W S W
    assert p.n_frames == 1453 and p.extra["latents"] == 364
    assert [b - a for a, b in p.segment_frames] == [480, 480, 480]
    assert p.extra["latents"] % 4 == 0 and p.n_frames == 4 * p.extra["latents"] - 3


def test_yaw_right_sign_and_zero_translation(wp):
    p = wp.plan(worldmark_case(5))  # R: 25 deg/s -> 25*4/24 deg per latent about +y
    c2w = p.arrays["c2w"]
    assert not c2w[:, :3, 3].any()
    th = math.radians(25 / 6)
    np.testing.assert_allclose(c2w[1, :3, :3], [[math.cos(th), 0, math.sin(th)], [0, 1, 0], [-math.sin(th), 0, math.cos(th)]],
                               atol=1e-12)
    assert c2w[1, 0, 2] > 0  # forward axis turns towards +x: a right turn
    assert set(p.arrays["action"][1:121].tolist()) == {1}  # the model's "yaw right" label; left would be 2
    p = wp.plan(worldmark_case(7))  # L R
    yaw = np.degrees(np.arctan2(_forward(p.arrays["c2w"])[:, 0], _forward(p.arrays["c2w"])[:, 2]))
    yaw = np.degrees(np.unwrap(np.radians(yaw)))
    assert np.all(np.diff(yaw[:121]) < 0) and np.all(np.diff(yaw[120:241]) > 0)
    assert set(p.arrays["action"][1:121].tolist()) == {2} and set(p.arrays["action"][121:241].tolist()) == {1}
    assert not p.arrays["c2w"][:, :3, 3].any()


def test_lrud_pitch_only_during_u_and_d(wp):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = wp.plan(c)
    # 13.8 s -> 332 frames (331.2 rounded up) -> 83 + 1 latents -> 84, video_length 333
    assert p.n_frames == 333 and p.extra["latents"] == 84
    assert p.segment_frames == [(0, 48), (48, 135), (135, 221), (221, 264), (264, 308), (308, 332)]
    c2w = p.arrays["c2w"]
    assert not c2w[:, :3, 3].any()
    pitch = np.degrees(np.arcsin(-_forward(c2w)[:, 1]))  # forward towards -y is up
    t = np.arange(84) / 6  # latent i is at t = 4i/24
    in_ud = (t > 9.2) & (t <= 12.8 + 1e-9)
    assert np.all(np.abs(pitch[~in_ud]) < 1e-9)
    assert pitch[66] == pytest.approx(45.0) and np.all(np.diff(pitch[55:67]) > 0)  # U: t 9.2..11 up to 45 deg
    assert np.all(np.diff(pitch[66:77]) < 0) and abs(pitch[77]) < 1e-9  # D back to level at 12.8 s
    a = p.arrays["action"]
    assert set(a[57:67].tolist()) == {3} and set(a[67:77].tolist()) == {4}  # pitch up 3, down 4
    assert set(a[13:34].tolist()) == {2} and set(a[35:55].tolist()) == {1}


def test_intrinsics_crop_arithmetic_real_size(wp):
    p = wp.plan(worldmark_case(1))
    fx, fy, cx, cy = REAL_K
    # 1080x720 covers 832x480 with scale 832/1080: resized to 832 x round(554.67) = 555, centre crop top round(37.5) = 38
    K = p.arrays["K"]
    np.testing.assert_allclose(K, [[fx * 832 / 1080, 0, 416], [0, fy * 555 / 720, 240], [0, 0, 1]], rtol=1e-12)
    tf = p.intrinsics["transform"]
    assert tf["resize_to"] == [832, 555] and tf["crop_left_top"] == [0, 38] and tf["policy"] == "crop"
    np.testing.assert_allclose(tf["principal_point_after_crop"], [cx * 832 / 1080, cy * 555 / 720 - 38])
    # the model normalises fx / (2 cx) = fx / 832
    np.testing.assert_allclose(p.intrinsics["native_normalised"], [fx / 1080, fy * 555 / 720 / 480, 0.5, 0.5])
    assert p.intrinsics["native_hfov_deg"] == pytest.approx(p.intrinsics["case_hfov_deg"])  # no horizontal crop


def test_intrinsics_wide_image_is_cropped_horizontally(wp):
    k = [1000.0, 1000.0, 959.5, 539.5]
    p = wp.plan(worldmark_case(1, image_size=(1920, 1080), k=k))
    # scale 480/1080: resized to round(853.33) = 853 x 480, crop left round(10.5) = 10 (round half to even)
    tf = p.intrinsics["transform"]
    assert tf["resize_to"] == [853, 480] and tf["crop_left_top"] == [10, 0]
    np.testing.assert_allclose(p.arrays["K"][0, 0], 1000.0 * 853 / 1920)
    assert p.intrinsics["native_hfov_deg"] < p.intrinsics["case_hfov_deg"]  # the crop narrows the view


def test_pose_scale_model_arg():
    p = get_adapter("hy-worldplay", pose_scale=0.5).plan(worldmark_case(1))
    assert p.arrays["c2w"][6, 2, 3] == pytest.approx(0.5 * 1.4)


# ------------------------------------------------------------------------------------------- gpus=N, setup, output
ARGS = ("hyvideo/generate.py --prompt \"$(cat prompt.txt)\" --image_path 000.jpg --resolution 480p --aspect_ratio 16:9 "
        "--video_length 493 --seed SEED --rewrite false --sr false --pose pose.json --output_path OUT --model_path "
        "MODEL_PATH --action_ckpt AR_ACTION_MODEL_PATH --few_step false --width 832 --height 480 --model_type ar\n")


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_gpus_n_is_torchrun_with_n_processes(n):
    """run.sh:69-88: torchrun --nproc_per_node=$N_INFERENCE_GPU hyvideo/generate.py ...; the sequence-parallel degree
    is the world size itself (hyvideo/generate.py:38), so the process count is the only flag. gpus=1 is a 1-process
    torchrun too: generate.py builds its device mesh at import (hyvideo/commons/parallel_states.py:37-43)."""
    cmd = get_adapter("hy-worldplay", gpus=n).plan(worldmark_case(1)).files["command.txt"]
    assert cmd == f"python -m torch.distributed.run --standalone --nproc_per_node={n} " + ARGS
    assert "--master_port" not in cmd and "--sp" not in cmd and "ulysses" not in cmd


@pytest.mark.parametrize("n", [3, 5, 6, 12, 32])
def test_gpus_the_16_heads_cannot_split_are_refused(n):
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match=r"gpus=%d cannot run: .* 16 attention heads .*one of 1, 2, 4, 8, 16" % n):
        get_adapter("hy-worldplay", gpus=n).plan(worldmark_case(1))


def test_output_and_setup():
    from worldgate.adapters.hy_worldplay import HYWorldPlay
    import worldgate.adapters.hy_worldplay as mod

    p = get_adapter("hy-worldplay").plan(worldmark_case(1))
    assert p.extra["output_video"] == "gen.mp4" and "--sr false" in p.files["command.txt"]  # G:777, 794 (no SR)
    spec = HYWorldPlay.repo_spec
    assert spec.commit == "da2d0c26eb0edb647f56e164ffd966490eb75282" and spec.commit in mod.__doc__
    assert spec.subdir == "" and spec.requirements == ("requirements.txt",) and spec.weights_patterns == ("ar_model/*",)
    assert "hyvideo/generate.py:38" in HYWorldPlay.multi_gpu


def test_context_policies_are_refused_with_the_reason_cited():
    """Its FoV retrieval is fixed at the pipeline's call site: no flag chooses a policy, and the refusal says where."""
    why = get_adapter("hy-worldplay").context_support("fov")
    assert "no context policy can be chosen from outside" in why and "worldplay_video_pipeline.py:1125-1133" in why


# --------------------------------------------------------------------------- the model's own entry point (gated)

COMMIT = "da2d0c26eb0edb647f56e164ffd966490eb75282"


def _own_entry(root, monkeypatch, calls: dict):
    """hyvideo/generate.py of the checkout, as ``python hyvideo/generate.py`` imports it, with only what needs a GPU
    machine or is not installed stood in: the pipeline (records its call, returns a small float video), the
    parallel and inference state, ``torch.cuda.set_device`` (generate.py:39, at import), loguru, and moviepy (the
    keyboard overlay, which a pose file never reaches). pose_to_input, main's argument parser, generate_video and
    save_video (imageio's ffmpeg writer) are the checkout's own code."""
    import importlib.util
    import sys
    import types

    import torch

    class Pipeline:
        @classmethod
        def create_pipeline(cls, **kw):
            calls["create"] = kw
            return cls()

        def __call__(self, **kw):
            calls["call"] = kw
            return types.SimpleNamespace(videos=torch.full((1, 3, kw["video_length"], 48, 80), 0.5))

    def stub(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
        return m

    stub("hyvideo").__path__ = [str(root / "hyvideo")]  # a bare package: its real submodules load from the checkout
    stub("hyvideo.pipelines")
    stub("hyvideo.pipelines.worldplay_video_pipeline", HunyuanVideo_1_5_Pipeline=Pipeline)
    stub("hyvideo.commons")
    stub("hyvideo.commons.parallel_states", initialize_parallel_state=lambda sp: calls.setdefault("sp", sp))
    stub("hyvideo.commons.infer_state", initialize_infer_state=lambda args: None)
    stub("loguru", logger=types.SimpleNamespace(log=lambda level, msg: calls.setdefault("log", []).append(msg)))
    stub("moviepy")
    stub("moviepy.editor", VideoFileClip=None, VideoClip=None)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.setdefault("device", device))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    before = set(sys.modules)
    try:
        spec = importlib.util.spec_from_file_location("hy_worldplay_generate_under_test", root / "hyvideo" / "generate.py")
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
    finally:  # the checkout's own submodules must not serve another test's imports
        for name in set(sys.modules) - before:
            if name.startswith("hyvideo"):
                sys.modules.pop(name, None)
    return gen


HYWP = gated_checkout("HY_WORLDPLAY_CHECKOUT", COMMIT)


@pytest.mark.skipif(HYWP is None, reason="set HY_WORLDPLAY_CHECKOUT to a checkout of Tencent-Hunyuan/HY-WorldPlay at "
                                         + COMMIT)
def test_the_checkouts_own_entry_point_reads_the_plans_poses_intrinsics_and_actions(tmp_path, monkeypatch):
    """The plan's command run through hyvideo/generate.py's own main(): its parser takes every flag, pose_to_input
    (G:173-283) reads pose.json into exactly the w2c the plan means, normalises K to the plan's native_normalised,
    derives the plan's action labels, and its latent-count asserts (G:203-208, 701-703) hold; the pipeline is called
    with the plan's size, frames, AR chunks, image, prompt and seed, and save_video writes OUT/gen.mp4 at 24 fps."""
    pytest.importorskip("einops")  # imported by generate.py (save_video)
    from worldgate.generate.video import probe_video

    plan, native, argv = gated_plan("hy-worldplay", "A+L1 W2 S+^1 v1 D+R1", tmp_path,
                                    extra={"model_path": tmp_path / "hv15", "ar_action_model_path": tmp_path / "ar"})
    entry = argv.index("hyvideo/generate.py")
    assert argv[:entry] == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
    calls: dict = {}
    gen = _own_entry(HYWP, monkeypatch, calls)
    monkeypatch.setattr("sys.argv", argv[entry:])
    monkeypatch.chdir(HYWP)
    gen.main()

    kw, made = calls["call"], calls["create"]
    L = plan.extra["latents"]
    assert kw["video_length"] == plan.n_frames == 4 * L - 3 and L % 4 == 0
    np.testing.assert_array_equal(kw["viewmats"][0].numpy(), np.linalg.inv(plan.arrays["c2w"]))
    Ks = kw["Ks"][0].numpy()
    fx, fy, cx, cy = plan.intrinsics["native_normalised"]
    np.testing.assert_allclose(Ks, np.broadcast_to([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], (L, 3, 3)), rtol=1e-15)
    assert kw["action"][0].tolist() == plan.arrays["action"].tolist()
    assert len(set(plan.arrays["action"].tolist())) >= 5  # the walk exercises moves, turns and their pairs
    assert (kw["user_height"], kw["user_width"], kw["model_type"], kw["chunk_latent_frames"]) == (480, 832, "ar", 4)
    assert kw["reference_image"] == "/data/img 000.jpg" and kw["prompt"] == "A test scene." and kw["seed"] == 11
    assert not kw["enable_sr"] and not kw["few_step"] and not kw["prompt_rewrite"]
    assert made["pretrained_model_name_or_path"] == str(tmp_path / "hv15")
    assert made["action_ckpt"] == str(tmp_path / "ar") and made["transformer_version"] == "480p_i2v"
    assert calls["sp"] == 1 and calls["device"] == 0
    video = tmp_path / "out" / plan.extra["output_video"]
    info = probe_video(video)
    assert (info.fps, info.frames) == (plan.fps, plan.n_frames) == (24.0, 4 * L - 3)
