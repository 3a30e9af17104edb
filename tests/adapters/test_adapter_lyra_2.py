"""Lyra 2.0: trajectory.npz with world-to-camera poses, per-frame 3x3 K at 480x832, N = 1 + 80k frames."""

import io

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
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
