"""Hunyuan-GameCraft 1.0: one key + speed per 33-frame action at 24 fps; 20 s keys -> 15 actions; fixed intrinsics."""

import math

import numpy as np
import pytest

from adapter_conformance import (REAL_K, REAL_SIZE, AdapterConformance, gated_checkout, gated_plan, lift_functions,
                                 worldmark_case)
from worldgate.adapters import UnsupportedMotion, get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case


class TestHYGameCraftConformance(AdapterConformance):
    adapter_name = "hy-gamecraft"


@pytest.fixture
def gc():
    return get_adapter("hy-gamecraft")


def test_id1_forward_golden(gc):
    p = gc.plan(worldmark_case(1))
    # 20 s * 24 fps / 33 = 14.55 -> 15 actions = 495 frames; 28 m split evenly: 28/15 m per action
    assert p.extra["action_list"] == ["w"] * 15 and p.n_frames == 495 and p.segment_frames == [(0, 495)]
    np.testing.assert_allclose(p.arrays["speed"], [28 / 15] * 15, rtol=1e-15)
    v = 28 / 15
    w2c = p.arrays["w2c"]
    assert w2c.shape == (15, 33, 4, 4)
    # RealEstate10K rows: w2c translation -v*k/33 along z (the world moves back as the camera goes forward)
    np.testing.assert_allclose(w2c[0, :, 2, 3], -v * np.arange(33) / 33, atol=1e-12)
    assert p.arrays["c2w_plucker"][0, 32, 2, 3] == pytest.approx(10 * v * 32 / 33)  # x10 inside (SI:40-41)
    c2w = p.arrays["c2w"]
    assert c2w[33, 2, 3] == pytest.approx(v) and c2w[494, 2, 3] == pytest.approx(14 * v + v * 32 / 33)
    assert np.all(np.diff(c2w[:, 2, 3]) > 0) and not c2w[:, :2, 3].any()  # forward axis monotone during W
    cmd = p.files["command.txt"]
    assert "--action-list " + " ".join(["w"] * 15) + " --action-speed-list " + " ".join([repr(v)] * 15) in cmd
    assert "--image-start" in cmd and "--video-size 704 1216" in cmd


def test_command_uses_the_checkpoint_and_passes_control_defaults(gc, tmp_path):
    """ckpt is honoured (--ckpt and MODEL_BASE under it, as scripts/run_sample_batch_sp.sh:4-5 lays them out) and the
    frames per action are explicit (--sample-n-frames 33, hymm_sp/config.py:121)."""
    from worldgate.adapters.repo import command_argv

    p = gc.plan(worldmark_case(1))
    cmd = p.files["command.txt"]
    assert cmd.startswith("env MODEL_BASE=CKPT/stdmodels PYTHONPATH=. python -m torch.distributed.run ")
    assert "--ckpt CKPT/gamecraft_models/mp_rank_00_model_states.pt " in cmd and "weights/" not in cmd
    assert "--sample-n-frames 33 " in cmd and "--cfg-scale 2.0 " in cmd and "--save-path OUT" in cmd
    paths = {"python": "/py/bin/python", "ckpt": tmp_path / "w", "extra": {}}
    p.write(tmp_path / "native", seed=7)
    argv = command_argv(cmd, p.files, tmp_path / "native", paths, "/img/x.jpg", seed=7)
    assert argv[:4] == ["env", f"MODEL_BASE={tmp_path / 'w'}/stdmodels", "PYTHONPATH=.", "/py/bin/python"]
    assert argv[argv.index("--ckpt") + 1] == f"{tmp_path / 'w'}/gamecraft_models/mp_rank_00_model_states.pt"
    assert argv[argv.index("--save-path") + 1] == str(tmp_path / "out") and argv[argv.index("--seed") + 1] == "7"


def test_id6_and_id11_goldens(gc):
    p = gc.plan(worldmark_case(6))  # W S
    assert p.extra["action_list"] == ["w"] * 15 + ["s"] * 15 and p.n_frames == 990
    assert p.segment_frames == [(0, 495), (495, 990)]
    assert p.arrays["c2w"][-1, 2, 3] == pytest.approx(28 / 15 / 33)  # 28 m out, then 28 m less the last 1/33 step
    p = gc.plan(worldmark_case(11))  # W S W: the same whole number of actions for every 20 s key
    assert [b - a for a, b in p.segment_frames] == [495, 495, 495] and p.extra["actions"] == 45
    assert p.extra["action_list"][14:16] == ["w", "s"] and p.extra["action_list"][29:31] == ["s", "w"]


def test_yaw_right_sign(gc):
    p = gc.plan(worldmark_case(5))  # R: 25 deg/s * 20 s = 500 deg over 15 actions
    assert p.extra["action_list"] == ["right_rot"] * 15
    assert p.extra["action_speed_list"][0] == pytest.approx(500 / 15)
    c = p.arrays["c2w_plucker"][0, 1]
    th = math.radians(500 / 15 / 33)
    np.testing.assert_allclose(c[:3, :3], [[math.cos(th), 0, math.sin(th)], [0, 1, 0], [-math.sin(th), 0, math.cos(th)]],
                               atol=1e-12)
    assert c[0, 2] > 0  # forward axis towards +x: yaw right (left_rot would give < 0)
    assert not p.arrays["c2w"][:, :3, 3].any()
    assert any("outside the README's 0-3 range" in x for x in p.caveats)
    p = gc.plan(worldmark_case(7))  # L R
    assert p.extra["action_list"] == ["left_rot"] * 15 + ["right_rot"] * 15
    fwd = p.arrays["c2w"][:, :3, 2]
    yaw = np.unwrap(np.arctan2(fwd[:, 0], fwd[:, 2]))
    assert np.all(np.diff(yaw[:496]) < 0) and np.all(np.diff(yaw[495:]) > 0)  # monotone in each key
    assert not p.arrays["c2w"][:, :3, 3].any()  # pure rotation: translation exactly zero


def test_lrud_pitch_only_during_u_and_d(gc):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = gc.plan(c)
    # V 2 s -> 1 action (1.45), L/R 3.6 s -> 3 (2.62), U/D 1.8 s -> 1 (1.31), H 1 s -> 1 (0.73); holds are w at 0
    assert p.extra["action_list"] == ["w", "left_rot", "left_rot", "left_rot", "right_rot", "right_rot", "right_rot",
                                      "up_rot", "down_rot", "w"]
    assert p.extra["action_speed_list"] == [0.0, 30.0, 30.0, 30.0, 30.0, 30.0, 30.0, 45.0, 45.0, 0.0]
    assert p.segment_frames == [(0, 33), (33, 132), (132, 231), (231, 264), (264, 297), (297, 330)]
    c2w = p.arrays["c2w"]
    assert not c2w[:, :3, 3].any()
    fwd = c2w[:, :3, 2]
    pitch = np.degrees(np.arcsin(-fwd[:, 1]))  # forward towards -y is up
    assert np.all(np.abs(pitch[:232]) < 1e-9) and np.all(np.abs(pitch[298:]) < 1e-9)
    assert np.all(np.diff(pitch[231:264]) > 0) and pitch[263] == pytest.approx(45 * 32 / 33)
    assert pitch[264] == pytest.approx(45.0) and np.all(np.diff(pitch[264:297]) < 0)
    assert np.all(np.abs(fwd[231:297, 0]) < 1e-9)  # no yaw during U/D (the view came back to yaw 0)
    np.testing.assert_array_equal(c2w[0], np.eye(4))


def test_combined_move_and_look_is_unsupported(gc):
    c = Case(id="wr", suite="t", trajectory=Trajectory.parse("W+R5"), image="x.jpg")
    with pytest.raises(UnsupportedMotion, match="segment 1"):
        gc.plan(c)


def test_intrinsics_fixed_regime2_real_size(gc):
    p = gc.plan(worldmark_case(1))
    K = p.intrinsics
    assert K["regime"] == 2 and K["native_model"] == [0.50505, 0.8979, 0.5, 0.5]  # the model's normalised units
    np.testing.assert_allclose(K["native"], [0.50505 * 1216, 0.8979 * 704, 608, 352])  # pixels, what evaluate reads
    assert K["native_px"] == K["native"]
    assert K["native_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(0.5 / 0.50505)))  # 89.42
    assert K["case_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(1080 / 2 / REAL_K[0])))
    # 1080x720 covers 1216x704 with scale 1216/1080 -> 1216 x 810: no horizontal crop, the FOV is kept
    assert K["case_hfov_after_crop_deg"] == pytest.approx(K["case_hfov_deg"])
    p = gc.plan(worldmark_case(1, image_size=(1920, 1080), k=[1000.0, 1000.0, 959.5, 539.5]))
    # scale 704/1080 -> int(1251.6) = 1251 wide, 1216 kept: visible width 1216/1251 of the original
    assert p.intrinsics["case_hfov_after_crop_deg"] == pytest.approx(
        math.degrees(2 * math.atan(608 / (1000.0 * 1251 / 1920))))


# ------------------------------------------------------------------------------------------- gpus=N, setup, output
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_gpus_n_is_torchrun_with_n_processes(n):
    """README.md:119-135 / scripts/run_sample_batch_sp.sh:10: torchrun --nnodes=1 --nproc_per_node=8 --master_port
    29605 hymm_sp/sample_batch.py ...; sequence parallel over the world size (parallel_states.py:82-93), no other
    flag; --standalone replaces the fixed port. gpus=1 is the README's 1-process torchrun (README.md:209)."""
    cmd = get_adapter("hy-gamecraft", gpus=n).plan(worldmark_case(1)).files["command.txt"]
    assert cmd.startswith("env MODEL_BASE=CKPT/stdmodels PYTHONPATH=. python -m torch.distributed.run --standalone "
                          f"--nproc_per_node={n} hymm_sp/sample_batch.py --image-path 000.jpg ")
    assert "--master_port" not in cmd and "--nnodes" not in cmd and cmd.endswith(" --save-path OUT\n")


@pytest.mark.parametrize("n", [3, 6, 12, 16, 24])
def test_gpus_that_cannot_split_heads_and_tokens_evenly_are_refused(n):
    """24 heads (models.py:689-695) and 44 x 76 tokens x 10 or 18 latents (models.py:596; sample_inference.py:611-615):
    3, 6, 12, 24 divide the heads but not 10 x 3344 tokens; 16 divides neither."""
    from worldgate.adapters import AdapterError

    assert all((10 * 44 * 76) % k == 0 and (18 * 44 * 76) % k == 0 and 24 % k == 0 for k in (1, 2, 4, 8))
    with pytest.raises(AdapterError, match=r"gpus=%d cannot run: .*one of 1, 2, 4, 8$" % n):
        get_adapter("hy-gamecraft", gpus=n).plan(worldmark_case(1))


def test_output_and_setup():
    import worldgate.adapters.hy_gamecraft as mod

    p = get_adapter("hy-gamecraft").plan(worldmark_case(1))  # image 000.jpg -> OUT/000.mp4 (SB:292-293)
    assert p.extra["output_video"] == "000.mp4"
    c = Case(id="dots", suite="t", trajectory=library.worldmark(1), image="/a/b/scene.v2.png", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    assert get_adapter("hy-gamecraft").plan(c).extra["output_video"] == "scene.mp4"  # basename.split('.')[0]
    spec = mod.HYGameCraft.repo_spec
    assert spec.commit == "07afcd4c7c5c6ba90108cf1493c312f7a51b79ac" and spec.commit in mod.__doc__
    assert spec.subdir == "" and spec.requirements == ("requirements.txt",)
    assert spec.weights_patterns == ("gamecraft_models/mp_rank_00_model_states.pt", "stdmodels/*")


# --------------------------------------------------------------------------- the model's own code (gated)

COMMIT = "07afcd4c7c5c6ba90108cf1493c312f7a51b79ac"
GAMECRAFT = gated_checkout("HY_GAMECRAFT_CHECKOUT", COMMIT)


@pytest.mark.skipif(GAMECRAFT is None, reason="set HY_GAMECRAFT_CHECKOUT to a checkout of Tencent-Hunyuan/"
                                              "Hunyuan-GameCraft-1.0 at " + COMMIT)
def test_the_checkouts_own_parser_and_pose_builder_read_the_plans_actions(tmp_path, monkeypatch):
    """hymm_sp/config.py's own parse_args (its sanity check included) takes the plan's command, and the pose path the
    sampler runs for each action (SI:516-527: ActionToPoseFromID(key, value=speed), its first 33 rows, Camera and
    get_relative_pose as GetPoseEmbedsFromPoses calls them, SI:311-352; lifted from sample_inference.py, whose module
    imports the diffusion stack) gives exactly the plan's per-action w2c and the x10 relative c2w its rays use."""
    import sys

    pytest.importorskip("torch")

    walk = "W1.4 R1.4 A1.4 S1.4 L1.4 D1.4 ^1.4 v1.4"
    plan, native, argv = gated_plan("hy-gamecraft", walk, tmp_path)
    entry = argv.index("hymm_sp/sample_batch.py")
    assert argv[:entry] == ["env", f"MODEL_BASE={tmp_path / 'w'}/stdmodels", "PYTHONPATH=.", "py", "-m",
                            "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
    monkeypatch.syspath_prepend(str(GAMECRAFT))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "argv", argv[entry:])
    try:
        from hymm_sp.config import parse_args

        args = parse_args()
    finally:  # the checkout's package must not serve another test
        for name in [n for n in sys.modules if n == "hymm_sp" or n.startswith("hymm_sp.")]:
            sys.modules.pop(name)
    keys, speeds = plan.arrays["action"].tolist(), plan.arrays["speed"].tolist()
    assert args.action_list == keys and args.action_speed_list == speeds
    assert set(keys) == {"w", "s", "a", "d", "left_rot", "right_rot", "up_rot", "down_rot"}
    assert (args.sample_n_frames, args.video_size, args.cfg_scale, args.infer_steps, args.seed) == \
        (33, [704, 1216], 2.0, 50, 11)
    assert args.image_start and not args.use_csv_pose and args.pose is None and not args.add_button
    assert args.save_path == str(tmp_path / "out") and args.image_path == "/data/img 000.jpg"
    assert args.ckpt == str(tmp_path / "w" / "gamecraft_models" / "mp_rank_00_model_states.pt")

    si = lift_functions(GAMECRAFT / "hymm_sp" / "sample_inference.py",
                        ("ACTION_DICT", "generate_motion_segment", "euler_to_quaternion",
                         "quaternion_to_rotation_matrix", "ActionToPoseFromID", "Camera", "get_relative_pose"),
                        {"np": np, "math": math})
    for k, (key, speed) in enumerate(zip(keys, speeds)):
        rows = si["ActionToPoseFromID"](key, value=speed)[:33]  # start index 0, 33 frames (SI:521-527, 316-319)
        cams = [si["Camera"]([float(x) for x in r.split(" ")]) for r in rows]
        np.testing.assert_allclose(np.array([c.w2c_mat for c in cams]), plan.arrays["w2c"][k], rtol=0, atol=1e-12)
        np.testing.assert_allclose(si["get_relative_pose"](cams), plan.arrays["c2w_plucker"][k], rtol=0, atol=1e-5)
        assert [float(x) for x in rows[1].split(" ")[1:5]] == list(plan.arrays["intrinsics"])
    # and the motion is the commanded one: each action's whole move or turn (the model's row 33, one action's end)
    # chained from action to action lands on the commanded camera at each segment's end (one action per 1.4 s
    # segment here; t = 1.4 j s is frame 14 j at 10 fps). Moves come before the pitch: a move while pitched goes
    # along the pitched view axis in GameCraft, off the trajectory's horizontal plane (the plan's caveat)
    commanded = Trajectory.parse(walk).poses(10.0, 14 * len(keys) + 1)
    pose = np.eye(4)
    for j, (key, speed) in enumerate(zip(keys, speeds)):
        end = si["Camera"]([float(x) for x in si["ActionToPoseFromID"](key, value=speed)[33].split(" ")])
        pose = pose @ end.c2w_mat
        np.testing.assert_allclose(pose, commanded[14 * (j + 1)], rtol=0, atol=1e-9, err_msg=f"after action {j} {key}")
