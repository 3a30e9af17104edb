"""Matrix-Game 2.0: keyboard [W,S,A,D] and mouse [pitch, yaw] per frame at 12 fps, F = 4L-3 with L % 3 == 0."""

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case


class TestMatrixGame2Conformance(AdapterConformance):
    adapter_name = "matrix-game-2"


@pytest.fixture
def mg():
    return get_adapter("matrix-game-2")


def test_id1_forward_golden(mg):
    p = mg.plan(worldmark_case(1))
    kb, ms = p.arrays["keyboard_cond"], p.arrays["mouse_cond"]
    # 240 frames at 12 fps + the conditioning frame -> L = 63 latents (a multiple of 3), F = 4*63-3 = 249
    assert p.extra["num_output_frames"] == 63 and kb.shape == (249, 4) and ms.shape == (249, 2)
    # row j = the command of time j/12 (frame j -> j+1): rows 0..239 drive frames 1..240 (action_module.py:225, 341)
    assert p.segment_frames == [(0, 240)] and p.extra["row_timing"] == "aligned"
    np.testing.assert_array_equal(kb[:240], np.tile([1, 0, 0, 0], (240, 1)))  # W is column 0 of [W,S,A,D]
    assert not kb[240:].any() and not ms.any()
    cmd = p.files["command.txt"]
    assert "--pretrained_model_path CKPT " in cmd and "--output_folder OUT " in cmd and "--num_output_frames 63 " in cmd


def test_id6_and_id11_goldens(mg):
    p = mg.plan(worldmark_case(6))  # W S
    kb = p.arrays["keyboard_cond"]
    assert p.segment_frames == [(0, 240), (240, 480)]
    assert kb[239].tolist() == [1, 0, 0, 0] and kb[240].tolist() == [0, 1, 0, 0]  # S is column 1, from t = 20 s
    p = mg.plan(worldmark_case(11))  # W S W: same 240 frames for every key
    assert [b - a for a, b in p.segment_frames] == [240, 240, 240]
    assert (p.n_frames + 3) % 4 == 0 and ((p.n_frames + 3) // 4) % 3 == 0


def test_yaw_right_is_plus_mouse_column_1(mg):
    ms = mg.plan(worldmark_case(5)).arrays["mouse_cond"]  # R
    assert np.all(ms[0:240, 1] == np.float32(0.1)) and not ms[240:].any() and not ms[:, 0].any()
    ms = mg.plan(worldmark_case(7)).arrays["mouse_cond"]  # L R
    assert np.all(ms[0:240, 1] < 0) and np.all(ms[240:480, 1] > 0)  # a flipped sign would fail here


def test_lrud_pitch_only_during_u_and_d(mg):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = mg.plan(c)
    ms, kb = p.arrays["mouse_cond"], p.arrays["keyboard_cond"]
    (_, _), (l0, l1), (r0, r1), (u0, u1), (d0, d1), _ = p.segment_frames
    assert np.all(ms[u0:u1, 0] > 0) and np.all(ms[d0:d1, 0] < 0)  # U up, D down (pitch column 0)
    assert not ms[l0:r1, 0].any() and not ms[u0:d1, 1].any() and not kb.any()
    assert any("turn rate is not matched" in c for c in p.caveats)


def test_row_timing_lagged_reproduces_v0_1(mg):
    """``row_timing=lagged``: row j = the command of time (j-1)/12, row 0 copied from row 1 (the v0.1 plan)."""
    lag = get_adapter("matrix-game-2", row_timing="lagged").plan(worldmark_case(6))  # W S
    kb = lag.arrays["keyboard_cond"]
    assert lag.segment_frames == [(1, 241), (241, 481)] and lag.extra["row_timing"] == "lagged"
    assert kb[0].tolist() == kb[1].tolist() == [1, 0, 0, 0] and kb[240].tolist() == [1, 0, 0, 0]
    assert kb[241].tolist() == [0, 1, 0, 0] and not kb[481:].any()
    aligned = mg.plan(worldmark_case(6)).arrays["keyboard_cond"]
    np.testing.assert_array_equal(aligned[:480], kb[1:481])  # the same commands, one row earlier
    assert any("one frame late" in c for c in lag.caveats)
    assert any("decided by the action module's window" in c for c in mg.plan(worldmark_case(6)).caveats)


def test_unknown_row_timing_is_refused():
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match="row_timing"):
        get_adapter("matrix-game-2", row_timing="late").plan(worldmark_case(1))
