"""Lyra 2.0: trajectory.npz with world-to-camera poses, per-frame 3x3 K at 480x832, N = 1 + 80k frames."""

import io

import numpy as np
import pytest

from adapter_conformance import (REAL_K, REAL_SIZE, AdapterConformance, gated_checkout, gated_plan, lift_functions,
                                 worldmark_case)
from worldgate.adapters import get_adapter


class TestLyra2Conformance(AdapterConformance):
    adapter_name = "lyra-2"


@pytest.fixture
def ly():
    return get_adapter("lyra-2")


def test_id1_forward_is_world_to_camera(ly):
    p = ly.plan(worldmark_case(1))
    w2c = p.files["trajectory.npz"]["w2c"]
    assert w2c.shape == (321, 4, 4) and w2c.dtype == np.float32  # 1 + 80*4
    # the camera moves +Z in the world, so the world moves -Z in the camera: w2c translation is -v*i
    np.testing.assert_allclose(w2c[:, 2, 3], -np.arange(321) * 1.4 / 16, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.linalg.inv(w2c[100].astype(float)), p.arrays["c2w"][100], atol=1e-5)
    assert "--num_frames 321" in p.files["command.txt"] and "--pose_scale 1.0" in p.files["command.txt"]


def test_ids_6_11_frame_counts(ly):
    assert ly.plan(worldmark_case(6)).n_frames == 641 and ly.plan(worldmark_case(11)).n_frames == 961


def test_yaw_right_sign(ly):
    w2c = ly.plan(worldmark_case(5)).files["trajectory.npz"]["w2c"].astype(float)
    c2w = np.linalg.inv(w2c)
    assert c2w[16, 0, 2] > 0.4  # after 1 s (25 deg) the camera's forward axis points towards +X: a right turn
    assert not w2c[:, :3, 3].any()


def test_intrinsics_3x3_at_480x832(ly):
    p = ly.plan(worldmark_case(1))
    K = p.files["trajectory.npz"]["intrinsics"]
    fx, fy, cx, cy = REAL_K
    w0, h0 = REAL_SIZE
    np.testing.assert_allclose(K[0], [[fx * 832 / w0, 0, cx * 832 / w0], [0, fy * 480 / h0, cy * 480 / h0], [0, 0, 1]],
                               rtol=1e-6)
    assert int(p.files["trajectory.npz"]["image_height"]) == 480


def test_npz_round_trip(ly, tmp_path):
    p = ly.plan(worldmark_case(7))
    p.write(tmp_path)
    with np.load(tmp_path / "trajectory.npz", allow_pickle=False) as z:
        assert set(z.files) == {"w2c", "intrinsics", "image_height", "image_width"}
        np.testing.assert_array_equal(z["w2c"], p.files["trajectory.npz"]["w2c"])


# ------------------------------------------------------------------------------------------- gpus, setup, output
def test_gpus_1_is_the_readmes_plain_process_writing_into_out(ly):
    """README.md:108-116 runs one plain `python -m lyra_2...`; --output_path OUT (default inference/lyra2_custom_traj
    in the checkout, lyra2_custom_traj_inference.py:130) so the video is OUT/<image stem>.mp4 (:311-313)."""
    for a in (ly, get_adapter("lyra-2", gpus=1)):
        p = a.plan(worldmark_case(1))
        cmd = p.files["command.txt"]
        assert cmd.startswith("python -m lyra_2._src.inference.lyra2_custom_traj_inference --experiment lyra2 ")
        assert cmd.endswith(" --seed SEED --output_path OUT\n") and "context_parallel" not in cmd
        assert p.extra["output_video"] == "000.mp4"


@pytest.mark.parametrize("n", [2, 8])
def test_gpus_above_1_are_refused(n):
    """--context_parallel_size exists (lyra2_custom_traj_inference.py:141) but its branch imports a top-level
    `imaginaire` the repository does not ship (:217-222); no README or script launches it."""
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match=f"lyra-2 has no multi-GPU inference .* gpus={n}"):
        get_adapter("lyra-2", gpus=n).plan(worldmark_case(1))


def test_repo_spec_pins_the_commit_folder_and_weights():
    import worldgate.adapters.lyra_2 as mod

    spec = mod.Lyra2.repo_spec
    assert spec.commit == "9fffc9adc37004091ecf26ef03abfb3abdf4d59a" and spec.commit in mod.__doc__
    assert spec.subdir == "Lyra-2" and spec.requirements == ("requirements.txt",)
    assert spec.weights_patterns == ("checkpoints/*",) and spec.weights_dir == ""  # README.md:51, in the checkout
    assert mod.Lyra2.multi_gpu == ""


# --------------------------------------------------------------------------- the model's own readers (gated)

COMMIT = "9fffc9adc37004091ecf26ef03abfb3abdf4d59a"
LYRA = gated_checkout("LYRA_CHECKOUT", COMMIT)  # the repository root (the adapter's subdir is Lyra-2/)


@pytest.mark.skipif(LYRA is None, reason="set LYRA_CHECKOUT to a checkout of nv-tlabs/lyra at " + COMMIT)
def test_the_checkouts_own_parser_and_trajectory_loader_read_the_plan(tmp_path, monkeypatch):
    """lyra2_custom_traj_inference.py's own parse_arguments, _apply_dmd_defaults and load_trajectory (lifted from the
    file: the module imports the model stack, and its main is inline under __main__), called as its main calls them
    (CT:207-208, 276, 320): every flag of the plan's command parses, the loader reads trajectory.npz at the target
    480x832 with --pose_scale into exactly the plan's w2c (the inverse of the commanded c2w) and K, N = 1 + 80 k
    frames as AR asserts, one caption at frame 0, and the video path its loop writes is OUT/<image stem>.mp4."""
    import argparse
    import json
    import os
    import sys

    torch = pytest.importorskip("torch")

    script = LYRA / "Lyra-2" / "lyra_2" / "_src" / "inference" / "lyra2_custom_traj_inference.py"
    ns = lift_functions(script, ("load_trajectory", "parse_arguments", "_apply_dmd_defaults"),
                        {"np": np, "torch": torch, "argparse": argparse, "log": None})
    plan, native, argv = gated_plan("lyra-2", "A+L1 W2 S+^1 v1 D+R1", tmp_path)
    assert argv[:3] == ["py", "-m", "lyra_2._src.inference.lyra2_custom_traj_inference"]
    monkeypatch.setattr(sys, "argv", ["lyra2_custom_traj_inference.py", *argv[3:]])
    args = ns["parse_arguments"]()
    ns["_apply_dmd_defaults"](args)  # --use_dmd is not given: nothing changes (its log is never reached)
    assert (args.experiment, args.fps, args.pose_scale, args.seed, args.resolution) == ("lyra2", 16, 1.0, 11, "480,832")
    assert args.num_frames == plan.n_frames and (plan.n_frames - 1) % 80 == 0 and not args.use_dmd
    assert args.input_image_path == "/data/img 000.jpg" and args.context_parallel_size == 1
    target_h, target_w = [int(x) for x in args.resolution.split(",")]  # CT:276
    w2c, K = ns["load_trajectory"](args.trajectory_path, int(args.num_frames), target_hw=(target_h, target_w),
                                   pose_scale=args.pose_scale)
    assert w2c.shape == (plan.n_frames, 4, 4) and w2c.dtype == torch.float32
    np.testing.assert_array_equal(w2c.numpy(), plan.arrays["w2c"])
    np.testing.assert_allclose(w2c.numpy(), np.linalg.inv(plan.arrays["c2w"]), rtol=0, atol=1e-5)
    fx, fy, cx, cy = plan.intrinsics["native"]
    np.testing.assert_array_equal(K.numpy(), np.broadcast_to(np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]],
                                                                      np.float32), (plan.n_frames, 3, 3)))
    with open(args.captions_path) as f:
        assert json.load(f) == {"0": "A test scene."}
    stem = os.path.splitext(os.path.basename(args.input_image_path))[0]  # CT:311-313
    assert os.path.join(args.output_path, f"{stem}.mp4") == str(tmp_path / "out" / plan.extra["output_video"])
