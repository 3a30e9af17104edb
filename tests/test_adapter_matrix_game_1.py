"""Matrix-Game 1.0: keyboard [forward, back, left, right, jump, attack] and mouse [pitch, yaw] (+-0.05) per frame at
16 fps, one clip of F = 4k + 1 frames, row j = the command of time j / fps."""

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import AdapterError, UnsupportedMotion, get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case


class TestMatrixGame1Conformance(AdapterConformance):
    adapter_name = "matrix-game-1"


@pytest.fixture
def mg():
    return get_adapter("matrix-game-1")


def case_of(text: str, cid="t") -> Case:
    return Case(id=cid, suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE)


def test_w_for_2s_golden(mg):
    c = case_of("W2")
    p = mg.plan(c)
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    # 32 frames at 16 fps after the conditioning frame: F = 33 = 4*8 + 1; rows 0..31 hold W (row j acts on frame j+1)
    assert p.n_frames == 33 and kb.shape == (33, 6) and ms.shape == (33, 2)
    assert p.segment_frames == [(1, 33)]
    np.testing.assert_array_equal(kb[:32], np.tile([1, 0, 0, 0, 0, 0], (32, 1)))
    assert not kb[32].any() and not ms.any()
    assert p.extra["video_length"] == 33 and not any("one clip of" in c for c in p.caveats)


def test_id1_forward_and_id6_back(mg):
    p = mg.plan(worldmark_case(1))
    assert p.n_frames == 321 and p.segment_frames == [(1, 321)]
    assert p.arrays["keyboard_condition"][:320, 0].all() and not p.arrays["keyboard_condition"][320].any()
    p = mg.plan(worldmark_case(6))  # W S
    kb = p.arrays["keyboard_condition"]
    assert p.segment_frames == [(1, 321), (321, 641)]
    assert kb[319].tolist() == [1, 0, 0, 0, 0, 0] and kb[320].tolist() == [0, 1, 0, 0, 0, 0]
    assert not kb[:, 4:].any()  # jump and attack idle
    assert any("one clip of 641 frames" in c for c in p.caveats)


def test_yaw_signs(mg):
    ms = mg.plan(worldmark_case(5)).arrays["mouse_condition"]  # R
    assert np.all(ms[:320, 1] == np.float32(0.05)) and not ms[:, 0].any() and not ms[320:].any()
    ms = mg.plan(worldmark_case(7)).arrays["mouse_condition"]  # L R
    assert np.all(ms[:320, 1] == np.float32(-0.05)) and np.all(ms[320:640, 1] == np.float32(0.05))


def test_lrud_pitch_up_is_plus_column_0(mg):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = mg.plan(c)
    ms, kb = p.arrays["mouse_condition"], p.arrays["keyboard_condition"]
    (_, _), (l0, l1), (r0, r1), (u0, u1), (d0, d1), _ = p.segment_frames
    # segment frames are rows + 1: rows [u0 - 1, u1 - 1) carry U
    assert np.all(ms[u0 - 1:u1 - 1, 0] == np.float32(0.05)) and np.all(ms[d0 - 1:d1 - 1, 0] == np.float32(-0.05))
    assert np.all(ms[l0 - 1:l1 - 1, 1] < 0) and np.all(ms[r0 - 1:r1 - 1, 1] > 0)
    assert not ms[l0 - 1:r1 - 1, 0].any() and not ms[u0 - 1:d1 - 1, 1].any() and not kb.any()


def test_combined_move_and_look(mg):
    p = mg.plan(case_of("D+L1"))
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    assert p.n_frames == 17 and kb[:16].tolist() == [[0, 0, 0, 1, 0, 0]] * 16 and ms[:16].tolist() == [[0, float(np.float32(-0.05))]] * 16
    assert not kb[16].any() and not ms[16].any()


def test_command_line_ckpt_and_no_seed(mg):
    cmd = mg.plan(worldmark_case(1)).files["command.txt"]
    assert cmd.split("  #")[0] == (
        "python inference_bench.py --image_path IMAGE_DIR --output_path OUT --video_length 321 --fps 16 "
        "--resolution 1280 720 --num_pre_frames 5 --guidance_scale 6 --inference_steps 50 --shift 15 --num_steps 50 "
        "--rel_l1_thresh 0.075 --max_images 1 --dit_path CKPT/dit --textenc_path CKPT --vae_path CKPT/vae "
        "--mouse_icon_path CKPT/assets/mouse.png --mouse_scale 0.1 --mouse_rotation -20 --bfloat16 "
        "--actions actions.npz --no_overlay")
    assert "SEED" not in cmd and "manual_seed(42)" in mg.info.no_seed


def test_max_frames_refuses_long_cases():
    mg = get_adapter("matrix-game-1", max_frames=65)
    with pytest.raises(UnsupportedMotion, match="needs 321 frames"):
        mg.plan(worldmark_case(1))
    with pytest.raises(AdapterError, match="4k \\+ 1"):
        get_adapter("matrix-game-1", max_frames=64)
