"""Evoke: ViPE-style pose.npz (cam_c2w c2w OpenCV, per-frame 3x3 K px at 384x640), 24 fps, 36c-3 frames."""

import io
import json
import math

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, gated_checkout, gated_plan, worldmark_case
from worldgate.adapters import AdapterError, get_adapter
from worldgate.adapters.evoke import evoke_crop_resize
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case


class TestEvokeConformance(AdapterConformance):
    adapter_name = "evoke"


@pytest.fixture
def ev():
    return get_adapter("evoke")


def lrud_case():
    return Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE)


def test_id1_forward_golden(ev):
    p = ev.plan(worldmark_case(1))
    c2w = p.files["pose.npz"]["cam_c2w"]
    # 20 s at 24 fps = 480 frames + the end pose = 481 <= 36*14-3 = 501 (13 chunks give only 465)
    assert c2w.shape == (501, 4, 4) and c2w.dtype == np.float32 and p.n_frames == 501
    assert p.extra["num_chunks"] == 14 and "NUM_CHUNKS=14" in p.files["command.txt"]
    assert p.segment_frames == [(0, 480)]
    i = np.arange(501)
    np.testing.assert_allclose(c2w[:, 2, 3], np.float32(1.4) * np.minimum(i, 480) / 24, rtol=1e-6, atol=1e-6)
    assert c2w[480, 2, 3] == np.float32(28.0) and np.all(c2w[480:] == c2w[480])  # the tail holds the end pose
    assert np.all(c2w[:, :3, :3] == np.eye(3, dtype=np.float32)) and not c2w[:, :2, 3].any()
    assert np.all(np.diff(c2w[:481, 2, 3]) > 0)  # forward (+Z) strictly increases during W
    row = json.loads(p.files["cases.jsonl"])
    assert row == {"name": "t-001", "image_path": "000.jpg", "pose_path": "pose.npz",
                   "prompt": "First-person view. A test scene.", "pose_fps": 24,
                   "pose_source_resolution": [384, 640], "pose_type": "vipe"}


def test_ids_6_and_11_frame_counts(ev):
    p = ev.plan(worldmark_case(6))  # 960 + 1 -> 27 chunks -> 969 frames
    assert (p.n_frames, p.extra["num_chunks"]) == (969, 27) and p.segment_frames == [(0, 480), (480, 960)]
    c2w = p.arrays["cam_c2w"]
    assert np.isclose(c2w[480, 2, 3], 28.0) and np.isclose(c2w[960, 2, 3], 0.0, atol=1e-5)  # W then S back home
    p = ev.plan(worldmark_case(11))  # 1440 + 1 -> 41 chunks -> 1473 frames
    assert (p.n_frames, p.extra["num_chunks"]) == (1473, 41)
    assert p.segment_frames == [(0, 480), (480, 960), (960, 1440)]


def test_yaw_right_sign_and_zero_translation(ev):
    c2w = ev.plan(worldmark_case(5)).arrays["cam_c2w"]  # R at 25 deg/s
    # after 1 s (frame 24) the forward axis (column 2) has turned 25 deg towards +X: a right turn in OpenCV axes
    np.testing.assert_allclose(c2w[24, :3, 2], [math.sin(math.radians(25)), 0, math.cos(math.radians(25))], atol=1e-6)
    assert not c2w[:, :3, 3].any()  # exactly zero: a pure rotation must survive any max-normalisation
    yaw = np.unwrap(np.arctan2(c2w[:481, 0, 2], c2w[:481, 2, 2]))
    assert np.all(np.diff(yaw) > 0)
    c2w = ev.plan(worldmark_case(7)).arrays["cam_c2w"]  # L R: a flipped sign fails here
    assert c2w[24, 0, 2] < -0.4 and not c2w[:, :3, 3].any()


def test_lrud_pitch_only_during_u_and_d(ev):
    p = ev.plan(lrud_case())
    c2w = p.arrays["cam_c2w"]
    (v0, v1), (l0, l1), (r0, r1), (u0, u1), (d0, d1), (h0, h1) = p.segment_frames
    # boundaries 2, 5.6, 9.2, 11, 12.8, 13.8 s at 24 fps, frames i with t0 <= i/24 < t1
    assert p.segment_frames == [(0, 48), (48, 135), (135, 221), (221, 264), (264, 308), (308, 332)]
    assert p.n_frames == 357  # 332 + 1 -> 10 chunks
    assert not c2w[:, :3, 3].any()
    fy = c2w[:, 1, 2]  # forward's Y component = -sin(pitch): zero until U starts (frame 220 is t = 9.17 s < 9.2 s)
    assert not fy[:u0].any() and np.all(np.diff(fy[u0 - 1:u1 + 1]) < 0) and np.all(np.diff(fy[d0:d1 + 1]) > 0)
    assert np.isclose(fy[u1], -math.sin(math.radians(45)), atol=1e-6) and not fy[d1:].any()
    yaw = np.arctan2(c2w[:, 0, 2], c2w[:, 2, 2])  # turns left (-X) during L; 0 again through U/D/H
    assert np.all(np.diff(yaw[l0:l1]) < 0) and np.allclose(yaw[u0:], 0.0, atol=1e-6)  # R brought it back to 0


def test_intrinsics_stretched_on_real_size(ev):
    p = ev.plan(worldmark_case(1))
    K = p.files["pose.npz"]["intrinsics"]
    fx, fy, cx, cy = REAL_K
    assert K.shape == (501, 3, 3) and K.dtype == np.float32 and np.all(K == K[0])
    # 1080x720 stretched to 640x384: x * 640/1080, y * 384/720
    np.testing.assert_allclose(K[0], [[472.14702, 0, 319.48053], [0, 427.00128, 191.52709], [0, 0, 1]], rtol=1e-6)
    t = p.intrinsics["transform"]
    assert t["scale_xy"] == [640 / 1080, 384 / 720] and t["declared_source_hw"] == [384, 640]
    # Evoke's own crop-resize at the declared 384x640 is the identity (scale 1, crop 0)
    np.testing.assert_allclose(t["evoke_crop_resize"], [K[0, 0, 0], K[0, 1, 1], K[0, 0, 2], K[0, 1, 2]], rtol=1e-6)
    assert math.isclose(p.intrinsics["native_hfov_deg"], p.intrinsics["case_hfov_deg"], rel_tol=1e-6)  # stretch keeps hfov


def test_the_crop_trap_this_avoids():
    # declaring the IB default 480x832 would crop-resize: s = max(0.8, 0.769) = 0.8, width 666, cx shifted by 13 px
    K = np.array([[500.0, 0, 416], [0, 500, 240], [0, 0, 1]])
    assert evoke_crop_resize(K, 480, 832) == [400.0, 400.0, 332.8 - 13.0, 192.0]
    # whereas the stretched image wants fx = 500 * 640/832 = 384.6: a 4 % focal and 13 px centre disagreement
    assert not math.isclose(evoke_crop_resize(K, 480, 832)[0], 500 * 640 / 832, rel_tol=0.01)


def test_off_centre_k_evoke_would_override_raises(ev):
    c = Case(id="odd", suite="t", trajectory=library.worldmark(1), image="x.jpg",
             intrinsics=[300.0, 300.0, 100.0, 60.0], image_size=(640, 384))
    with pytest.raises(AdapterError, match="operators.py:454-496"):
        ev.plan(c)


def test_pose_npz_round_trip(ev, tmp_path):
    p = ev.plan(worldmark_case(9))
    p.write(tmp_path)
    with np.load(tmp_path / "pose.npz", allow_pickle=False) as z:
        assert set(z.files) == {"cam_c2w", "intrinsics"}
        np.testing.assert_array_equal(z["cam_c2w"], p.arrays["cam_c2w"])
    assert json.loads((tmp_path / "cases.jsonl").read_text())["pose_path"] == "pose.npz"


def test_command_turns_the_launcher_caps_and_smoothing_off(ev, tmp_path):
    """infer_batch.py's defaults would clamp every look to 10 deg and 3 units per chunk and smooth the track
    (infer_batch.py:245-246, 486-490): the command passes them as 0 (0 skips the clamp, infer_single.py:1169, 1177)."""
    from worldgate.adapters.repo import command_argv

    p = ev.plan(worldmark_case(1))
    cmd = p.files["command.txt"].split(" #", 1)[0].split()
    assert cmd[0] == "env" and cmd[-2:] == ["bash", "scripts/inference/infer_post_distill.sh"]
    env = dict(t.split("=", 1) for t in cmd[1:-2])
    assert env == {"MODE": "i2v", "NUM_CHUNKS": "14", "MAX_CASES": "1", "JSONL": "cases.jsonl", "SEED": "SEED",
                   "CAP_MAX_DEG": "0", "CAP_MAX_TRANS": "0", "POSE_SMOOTH_WIN": "0", "POSE_EXTEND_MODE": "clamp",
                   "JOYSTICK_HUD": "off", "TRANSFORMER_PATH": "CKPT/evoke/stage3_post_distillation",
                   "BASE_CKPT": "CKPT/evoke-base", "VIGEO_WEIGHTS": "CKPT/ViGeo1.1", "OUT_ROOT": "OUT"}
    p.write(tmp_path / "native", seed=5)
    argv = command_argv(p.files["command.txt"], p.files, tmp_path / "native",
                        {"python": "python", "ckpt": tmp_path / "models", "extra": {}}, None, seed=5)
    assert "CAP_MAX_DEG=0" in argv and "CAP_MAX_TRANS=0" in argv and "POSE_SMOOTH_WIN=0" in argv and "SEED=5" in argv
    assert f"TRANSFORMER_PATH={tmp_path / 'models'}/evoke/stage3_post_distillation" in argv
    assert f"JSONL={tmp_path / 'native' / 'cases.jsonl'}" in argv


# ------------------------------------------------------------------------------------------- gpus, setup, output
def test_gpus_1_is_the_launcher_with_one_shard():
    cmd = get_adapter("evoke").plan(worldmark_case(1)).files["command.txt"]
    assert cmd == get_adapter("evoke", gpus="1").plan(worldmark_case(1)).files["command.txt"]
    assert "bash scripts/inference/infer_post_distill.sh" in cmd and "LOCAL_GPUS" not in cmd and "torch" not in cmd


@pytest.mark.parametrize("n", [2, 4])
def test_gpus_above_1_are_refused(n):
    """LOCAL_GPUS shards cases over GPUs, one process per GPU (infer_post_distill.sh:59, 99-101, 201-236): there is
    no way to run one case on several."""
    with pytest.raises(AdapterError, match=f"evoke has no multi-GPU inference .* gpus={n}"):
        get_adapter("evoke", gpus=n).plan(worldmark_case(1))


def test_repo_spec_pins_the_commit_and_the_weights_the_command_reads():
    import worldgate.adapters.evoke as mod

    spec = mod.Evoke.repo_spec
    assert spec.commit == "74d268516d95c8fceadd2378f91a73f9f187042b" and spec.commit in mod.__doc__
    assert spec.subdir == "" and spec.requirements == ("requirements.txt",) and spec.weights_dir == ""
    assert spec.weights_patterns == ("evoke/stage3_post_distillation/*", "evoke-base/*")
    cmd = get_adapter("evoke").plan(worldmark_case(1)).files["command.txt"]
    assert "TRANSFORMER_PATH=CKPT/evoke/stage3_post_distillation " in cmd and "BASE_CKPT=CKPT/evoke-base " in cmd


def test_output_lands_in_out_under_its_declared_name_and_gpu_offset_follows_the_case(tmp_path, monkeypatch):
    """OUT_ROOT=OUT reaches the launcher as the case's fresh output folder; the plan names <case>/geo_pred.mp4
    (never a segments/segment_NNN_pred.mp4); GPU_OFFSET is this case's own device (the launcher exports
    CUDA_VISIBLE_DEVICES=${GPU_OFFSET:-0}, infer_post_distill.sh:201-205)."""
    from worldgate.adapters.repo import child_env, command_argv

    plan = get_adapter("evoke").plan(worldmark_case(1))
    assert plan.extra["output_video"] == "t-001/geo_pred.mp4"
    native = tmp_path / "native"
    argv = command_argv(plan.files["command.txt"], plan.files, native, {"python": "py", "ckpt": tmp_path / "w",
                                                                         "extra": {}}, "000.jpg")
    assert f"OUT_ROOT={tmp_path / 'out'}" in argv
    env = child_env(1, tmp_path / "out", {"WORLD_SIZE": "4", "LOCAL_RANK": "2", "CUDA_VISIBLE_DEVICES": "4,5,6,7",
                                          "RANK": "2", "MASTER_PORT": "29500"})
    assert env["CUDA_VISIBLE_DEVICES"] == "6" and "RANK" not in env and "MASTER_PORT" not in env
    assert get_adapter("evoke").repo_spec.device_env == "GPU_OFFSET"


# --------------------------------------------------------------------------- the model's own pose loader (gated)

COMMIT = "74d268516d95c8fceadd2378f91a73f9f187042b"
EVOKE = gated_checkout("EVOKE_CHECKOUT", COMMIT)


@pytest.mark.skipif(EVOKE is None, reason="set EVOKE_CHECKOUT to a checkout of AlayaLab/Evoke at " + COMMIT)
def test_the_checkouts_own_pose_loader_reads_the_plans_track_and_k(tmp_path, monkeypatch):
    """The plan's cases.jsonl row and pose.npz through evoke/utils/ev_validation.py's own load_pose_for_v2v, called
    as infer_single.py calls it (IS:621-642) with what infer_batch.py passes for NUM_CHUNKS=c (IB:93, 369-372, 425-430:
    33 c frames, ref_seconds 0, the row's pose_fps and pose_source_resolution): the frames it asks for are exactly the
    plan's 36 c - 3 poses, each the plan's c2w, and its own source-resolution check and crop-resize K transform
    (operators.py, imported as is) leave the plan's 640x384 K unchanged."""
    import json
    import sys
    import types

    pytest.importorskip("torch")
    pytest.importorskip("torchvision")

    for pkg in ("evoke", "evoke.utils", "evoke.dataset", "evoke.dataset.evoke_data"):  # bare: no __init__ runs
        m = types.ModuleType(pkg)
        m.__path__ = [str(EVOKE / pkg.replace(".", "/"))]
        monkeypatch.setitem(sys.modules, pkg, m)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        from evoke.utils.ev_validation import load_pose_for_v2v
    finally:
        for name in ("evoke.utils.ev_validation", "evoke.dataset.evoke_data.operators"):
            monkeypatch.delitem(sys.modules, name, raising=False)

    plan, native, argv = gated_plan("evoke", "W1 R1 A+L1 S1 ^1 v1 D1", tmp_path)
    env = dict(a.split("=", 1) for a in argv[1:argv.index("bash")])
    assert (env["MODE"], env["CAP_MAX_DEG"], env["CAP_MAX_TRANS"], env["POSE_SMOOTH_WIN"], env["POSE_EXTEND_MODE"]) \
        == ("i2v", "0", "0", "0", "clamp")
    [row] = [json.loads(line) for line in (native / "cases.jsonl").read_text().splitlines()]
    num_frames = 33 * int(env["NUM_CHUNKS"])  # IB:93
    window_pix = (9 - 1) * 4 + 1  # IS:623-630: 9 latents a window, ref_seconds 0 in i2v
    num_secs = max(1, (num_frames + window_pix - 1) // window_pix)
    pose_frames = (num_secs * 9 - 1) * 4 + 1
    Ks, c2ws = load_pose_for_v2v(
        str(native / row["pose_path"]), target_height=384, target_width=640,
        source_resolution=tuple(int(x) for x in row["pose_source_resolution"]), pose_type=row["pose_type"],
        num_target_frames=pose_frames, target_fps=24, source_fps=int(row.get("pose_fps", 24)), start_seconds=0.0,
        pose_extend_mode=env["POSE_EXTEND_MODE"])
    assert pose_frames == plan.n_frames == len(plan.arrays["cam_c2w"]) == 36 * int(env["NUM_CHUNKS"]) - 3
    np.testing.assert_array_equal(c2ws.numpy(), plan.arrays["cam_c2w"].astype(np.float32))
    np.testing.assert_allclose(Ks.numpy(), plan.intrinsics["native"], rtol=1e-6)
