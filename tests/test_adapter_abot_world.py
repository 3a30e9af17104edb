"""ABot-World-0: keys [W,A,S,D,I,J,K,L] per 12-frame block at 12 fps; block 0 (9 frames) held idle."""

import json

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import UnsupportedMotion, get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case


class TestABotWorldConformance(AdapterConformance):
    adapter_name = "abot-world"


@pytest.fixture
def ab():
    return get_adapter("abot-world")


def case_of(text: str) -> Case:
    return Case(id="t", suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE)


def test_w_for_2s_golden(ab):
    p = ab.plan(case_of("W2"))
    assert json.loads(p.files["action_list.json"]) == [[0] * 8, [1, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]
    assert p.n_frames == 9 + 24 and p.segment_frames == [(9, 33)] and p.extra["blocks"] == 3
    c2w = p.arrays["c2w"]
    assert c2w.shape == (33, 4, 4) and np.allclose(c2w[:10], np.eye(4))  # held through block 0, trajectory from 9
    assert c2w[10, 2, 3] > 0  # then forward (+Z)


def test_key_order_and_looks(ab):
    p = ab.plan(case_of("A+L1 D+R1 S+^1 v1"))
    assert json.loads(p.files["action_list.json"]) == [
        [0] * 8,
        [0, 1, 0, 0, 0, 1, 0, 0],  # A strafe-left + J yaw-left
        [0, 0, 0, 1, 0, 0, 0, 1],  # D strafe-right + L yaw-right
        [0, 0, 1, 0, 1, 0, 0, 0],  # S back + I pitch-up
        [0, 0, 0, 0, 0, 0, 1, 0],  # K pitch-down
    ]
    assert p.segment_frames == [(9, 21), (21, 33), (33, 45), (45, 57)]


def test_worldmark_keys_are_20_blocks_each(ab):
    p = ab.plan(worldmark_case(6))  # W S
    assert p.segment_frames == [(9, 249), (249, 489)] and p.extra["blocks"] == 41
    rows = json.loads(p.files["action_list.json"])
    assert rows[1:21] == [[1, 0, 0, 0, 0, 0, 0, 0]] * 20 and rows[21:] == [[0, 0, 1, 0, 0, 0, 0, 0]] * 20


def test_rounding_is_caveated_and_short_segments_refused(ab):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = ab.plan(c)
    durations = [s.seconds for s in c.trajectory.segments]
    want = [int(np.floor(d + 0.5)) for d in durations]
    assert [(b - a) // 12 for a, b in p.segment_frames] == want
    assert any("rounded" in x for x in p.caveats) == any(abs(w - d) > 1e-9 for w, d in zip(want, durations))
    with pytest.raises(UnsupportedMotion, match="at least 0.5 s"):
        ab.plan(case_of("W2 L0.25"))


def test_command_line(ab):
    cmd = ab.plan(worldmark_case(1)).files["command.txt"]
    assert cmd.split("  #")[0] == (
        "python scripts/inference.py --phase both --fps-blocks 21 --action-mode fixed --quant-type fp8-per-token "
        "--vae_type taew2_2 --action-list \"$(cat action_list.json)\" --image 000.jpg --ckpt_dir CKPT")
    assert "SEED" not in cmd and "torch.randn" in ab.info.no_seed
