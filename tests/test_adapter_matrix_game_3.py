"""Matrix-Game 3.0: keyboard [W,S,A,D,0,0] + mouse [pitch, yaw] per frame at 17 fps; F = 57 + 40 (iterations - 1);
the pipeline integrates the actions into poses itself (15 deg per mouse unit, 12.35 units = 0.1235 m per W frame)."""

import math

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import UnsupportedMotion, get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case

R_INIT = np.array([[0, 0, 1], [1, 0, 0], [0, -1, 0]], float)  # utils/cam_utils.py:583-587


class TestMatrixGame3Conformance(AdapterConformance):
    adapter_name = "matrix-game-3"


@pytest.fixture
def mg():
    return get_adapter("matrix-game-3")


def rel_forward(extr, i, j=0):
    """Camera j's view of camera i's forward axis (OpenCV: +x right, +y down, +z forward)."""
    return (extr[j, :3, :3].T @ extr[i, :3, :3])[:, 2]


def test_id1_forward_golden(mg):
    p = mg.plan(worldmark_case(1))
    kb, ms, ex = p.arrays["keyboard_cond"], p.arrays["mouse_cond"], p.arrays["extrinsics_all"]
    # 20 s x 17 fps = 340 action rows + the image frame = 341 <= 57 + 40*8 = 377 (9 iterations)
    assert p.n_frames == 377 and p.extra["num_iterations"] == 9 and p.fps == 17.0
    assert kb.shape == (377, 6) and ms.shape == (377, 2) and ex.shape == (377, 4, 4)
    assert p.segment_frames == [(0, 340)]
    np.testing.assert_array_equal(kb[:340], np.tile([1, 0, 0, 0, 0, 0], (340, 1)))  # W is column 0
    assert not kb[340:].any() and not ms.any()
    # W moves 12.35 units = 0.1235 m per frame along world +X (UE forward); the tail (no action) holds
    np.testing.assert_allclose(ex[:341, 0, 3], 0.1235 * np.arange(341), rtol=1e-5)
    assert not ex[:, 1:3, 3].any()
    np.testing.assert_array_equal(ex[376], ex[340])
    np.testing.assert_array_equal(ex[:, :3, :3], np.broadcast_to(R_INIT, (377, 3, 3)))
    assert np.all(np.diff(ex[:341, 0, 3]) > 0)  # forward axis monotone during W
    assert "--num_iterations 9" in p.files["command.txt"] and "--size 704*1280" in p.files["command.txt"]
    assert p.extra["new_frames_per_clip"] == [57] + [40] * 8 and p.extra["clip_windows"][1] == (41, 97)


def test_id6_and_id11_goldens(mg):
    p = mg.plan(worldmark_case(6))  # W S: 681 frames -> 57 + 40*16 = 697
    kb, ex = p.arrays["keyboard_cond"], p.arrays["extrinsics_all"]
    assert p.n_frames == 697 and p.segment_frames == [(0, 340), (340, 680)]
    assert kb[339].tolist() == [1, 0, 0, 0, 0, 0] and kb[340].tolist() == [0, 1, 0, 0, 0, 0]  # S is column 1
    assert ex[340, 0, 3] == pytest.approx(41.99, rel=1e-5) and abs(ex[680, 0, 3]) < 1e-3
    p = mg.plan(worldmark_case(11))  # W S W: 1021 frames -> 57 + 40*25 = 1057
    assert [b - a for a, b in p.segment_frames] == [340, 340, 340]
    assert p.n_frames == 1057 and p.extra["num_iterations"] == 26


def test_yaw_right_is_plus_mouse_column_1(mg):
    p = mg.plan(worldmark_case(5))  # R: 500 deg over 340 rows -> 500 / 340 / 15 per row
    ms, ex = p.arrays["mouse_cond"], p.arrays["extrinsics_all"]
    np.testing.assert_array_equal(ms[:340, 1], np.float32(500 / 5100))
    assert not ms[:, 0].any() and not ms[340:].any()
    assert not ex[:, :3, 3].any()  # pure rotation: translation exactly zero
    f = rel_forward(ex, 17)  # 17 frames x 1.4706 deg = 25 deg
    np.testing.assert_allclose(f, [math.sin(math.radians(25)), 0, math.cos(math.radians(25))], atol=1e-6)
    assert f[0] > 0.4  # right turn: forward -> +x; a flipped sign gives -0.42
    heading = np.unwrap([math.atan2(*rel_forward(ex, i)[[0, 2]]) for i in range(341)])
    assert np.all(np.diff(heading) > 0)  # yaw monotone
    ms = mg.plan(worldmark_case(7)).arrays["mouse_cond"]  # L R
    assert np.all(ms[0:340, 1] < 0) and np.all(ms[340:680, 1] > 0)


def test_lrud_pitch_only_during_u_and_d_and_the_sign_trap(mg):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = mg.plan(c)
    ms, kb, ex = p.arrays["mouse_cond"], p.arrays["keyboard_cond"], p.arrays["extrinsics_all"]
    # boundaries 0, 2, 5.6, 9.2, 11, 12.8, 13.8 s at 17 fps, ceil: 0, 34, 96, 157, 187, 218, 235
    assert p.segment_frames == [(0, 34), (34, 96), (96, 157), (157, 187), (187, 218), (218, 235)]
    assert p.n_frames == 257  # 236 <= 57 + 40*5
    # per segment: commanded degrees / rows / 15
    np.testing.assert_array_equal(ms[34:96, 1], np.float32(-90 / (62 * 15)))
    np.testing.assert_array_equal(ms[96:157, 1], np.float32(90 / (61 * 15)))
    np.testing.assert_array_equal(ms[157:187, 0], np.float32(0.1))  # U = +pitch column 0, the labelled "up"
    np.testing.assert_array_equal(ms[187:218, 0], np.float32(-45 / (31 * 15)))
    assert not ms[:157, 0].any() and not ms[218:, 0].any() and not ms[157:218, 1].any() and not kb.any()
    assert not ex[:, :3, 3].any()
    np.testing.assert_allclose(rel_forward(ex, 157), [0, 0, 1], atol=1e-5)  # L then R returns
    # the trap, as the code integrates it: after U (+45 deg) the camera's forward points to +y = image-DOWN
    s = math.sqrt(0.5)
    np.testing.assert_allclose(rel_forward(ex, 187), [0, s, s], atol=1e-5)
    np.testing.assert_allclose(rel_forward(ex, 218), [0, 0, 1], atol=1e-5)
    assert sum("pitch sign open" in c and "cam_utils.py:576" in c and "GPU check" in c for c in p.caveats) == 1


def test_pitch_question_is_where_a_user_sees_it(mg):
    """The open pitch sign is in the info `list models` prints (pose_convention) and its notes, with the GPU check;
    a case that pitches carries it as a caveat, a case without pitch does not."""
    from worldgate.adapters import get_info

    info = get_info("matrix-game-3")
    assert "PITCH SIGN OPEN" in info.pose_convention and "cam_utils.py:576" in info.pose_convention
    assert "GPU check" in info.notes and "2 s U case" in info.notes
    up = Case(id="u2", suite="t", trajectory=library.resolve("^2"), image="x.jpg", intrinsics=REAL_K,
              image_size=REAL_SIZE)
    assert any("pitch sign open" in c and "vertical optical flow" in c for c in mg.plan(up).caveats)
    assert not any("pitch sign" in c for c in mg.plan(worldmark_case(5)).caveats)  # R: no pitch, no caveat


def test_mouse_below_dead_zone_is_refused(mg):
    slow = Case(id="slow", suite="t", trajectory=Trajectory.parse("R2", yaw_rate=3.0), image="x.jpg")
    with pytest.raises(UnsupportedMotion, match="dead zone"):
        mg.plan(slow)  # 3 deg/s at 17 fps = 0.0118 < 0.02 mouse units


def test_intrinsics_fixed_90_deg(mg):
    K = mg.plan(worldmark_case(1)).intrinsics
    assert K["regime"] == 2 and K["native"] == [640.0, 352.0, 640.0, 352.0] and K["native_hfov_deg"] == 90.0
    assert K["case_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(540 / 796.7481)))
    # 1080x720 is wider than 704/1280 in height: crop height int(1080 * 0.55) = 594, top round(126/2) = 63
    assert K["crop"] == {"top": 63, "left": 0, "height": 594, "width": 1080, "then": "bicubic resize to 704x1280"}
