"""ForgeWM: keyboard [W,S,A,D,0,0] and mouse [pitch, yaw] (+-0.10) per frame at 12 fps, F = 4L-3 with L % 3 == 0,
row j = the command of time j / fps."""

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case

V = float(np.float32(0.1))


class TestForgeWMConformance(AdapterConformance):
    adapter_name = "forgewm"


@pytest.fixture
def fw():
    return get_adapter("forgewm")


def case_of(text: str, cid="t", size=REAL_SIZE) -> Case:
    return Case(id=cid, suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=size)


def test_w_for_2s_golden(fw):
    p = fw.plan(case_of("W2"))
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    # 24 frames at 12 fps + the conditioning frame: L = 9 latents (a multiple of 3), F = 4*9-3 = 33
    assert p.extra["num_frames"] == 9 and p.n_frames == 33 and kb.shape == (33, 6) and ms.shape == (33, 2)
    assert p.segment_frames == [(1, 25)]
    np.testing.assert_array_equal(kb[:24], np.tile([1, 0, 0, 0, 0, 0], (24, 1)))  # rows 0..23: row j -> frame j+1
    assert not kb[24:].any() and not ms.any()
    assert any("8 trailing frames" in c for c in p.caveats)


def test_id1_and_id6(fw):
    p = fw.plan(worldmark_case(1))  # 240 frames: L = 63, F = 249
    assert p.extra["num_frames"] == 63 and p.n_frames == 249 and p.segment_frames == [(1, 241)]
    p = fw.plan(worldmark_case(6))  # W S
    kb = p.arrays["keyboard_condition"]
    assert p.segment_frames == [(1, 241), (241, 481)]
    assert kb[239].tolist() == [1, 0, 0, 0, 0, 0] and kb[240].tolist() == [0, 1, 0, 0, 0, 0]


def test_yaw_and_pitch_signs(fw):
    ms = fw.plan(worldmark_case(7)).arrays["mouse_condition"]  # L R
    assert ms[:240].tolist() == [[0.0, -V]] * 240 and ms[240:480].tolist() == [[0.0, V]] * 240
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = fw.plan(c)
    ms = p.arrays["mouse_condition"]
    (_, _), _, _, (u0, u1), (d0, d1), _ = p.segment_frames
    assert np.all(ms[u0 - 1:u1 - 1, 0] == np.float32(0.1)) and np.all(ms[d0 - 1:d1 - 1, 0] == np.float32(-0.1))
    assert not ms[u0 - 1:d1 - 1, 1].any()


def test_combined_strafe_and_turn(fw):
    p = fw.plan(case_of("A+R1"))
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    assert kb[:12].tolist() == [[0, 0, 1, 0, 0, 0]] * 12 and ms[:12].tolist() == [[0.0, V]] * 12
    assert not kb[12:].any() and not ms[12:].any()


def test_command_line_ckpt_seed_and_stretch_caveat(fw, tmp_path):
    p = fw.plan(worldmark_case(1))
    assert p.files["command.txt"].split("  #")[0] == (
        "python inference.py --config_path configs/stage3_dmd.yaml --checkpoint_path CKPT/stage3/model.pt "
        "--image_path 000.jpg --num_frames 63 --height 352 --width 640 --seed SEED "
        "--output_path output/worldgate/t-001.mp4 --actions actions.npz")
    assert any("stretched to 640x352" in c for c in p.caveats)  # 1080x720 is 3:2
    p.write(tmp_path, seed=7)
    assert "--seed 7 " in (tmp_path / "command.txt").read_text()
