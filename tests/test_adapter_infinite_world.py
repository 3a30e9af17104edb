"""Infinite-World: one {move, view} class pair per frame at 30 fps, 1 + 80 C frames, size by aspect bucket."""

import json

import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import get_adapter
from worldgate.adapters.infinite_world import working_size
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case


class TestInfiniteWorldConformance(AdapterConformance):
    adapter_name = "infinite-world"


@pytest.fixture
def iw():
    return get_adapter("infinite-world")


def case_of(text: str, size=REAL_SIZE) -> Case:
    return Case(id="t", suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=size, prompt="A street.")


def test_w_for_2s_golden(iw):
    p = iw.plan(case_of("W2"))
    rows = json.loads(p.files["actions.json"])
    # 60 frames at 30 fps: one chunk, 81 frames; rows 0..59 forward, 60..80 no-op
    assert p.n_frames == 81 and p.extra["num_chunks"] == 1 and len(rows) == 81
    assert rows[:60] == [{"move": "go forward", "view": "no-op"}] * 60
    assert rows[60:] == [{"move": "no-op", "view": "no-op"}] * 21
    assert p.segment_frames == [(0, 60)] and p.arrays["move"][:60].tolist() == [1] * 60


def test_looks_and_combined(iw):
    rows = json.loads(iw.plan(case_of("A+L1 D+R1 ^1 S+v1")).files["actions.json"])
    assert rows[0] == {"move": "go left", "view": "turn left"} and rows[29] == rows[0]
    assert rows[30] == {"move": "go right", "view": "turn right"}
    assert rows[60] == {"move": "no-op", "view": "turn up"}
    assert rows[90] == {"move": "go back", "view": "turn down"} and rows[119] == rows[90]
    assert rows[120] == {"move": "no-op", "view": "no-op"}


def test_worldmark_id6_and_chunks(iw):
    p = iw.plan(worldmark_case(6))  # W20 S20: 1200 frames -> 15 chunks, 1201 frames
    assert p.n_frames == 1201 and p.extra["num_chunks"] == 15 and p.segment_frames == [(0, 600), (600, 1200)]
    rows = json.loads(p.files["actions.json"])
    assert rows[599]["move"] == "go forward" and rows[600]["move"] == "go back" and rows[1200]["move"] == "no-op"


def test_working_size_follows_the_aspect(iw):
    assert working_size((1080, 720)) == (768, 512)  # 3:2 -> bucket 0.67
    assert working_size((1920, 1080)) == (896, 448)  # 16:9 -> bucket 0.50
    assert working_size((1024, 1024)) == (640, 640)
    assert working_size((1024, 768)) == (704, 576)  # 0.75 -> bucket 0.82
    p = iw.plan(case_of("W1", size=(1024, 1024)))
    assert (p.width, p.height) == (640, 640)


def test_command_line_and_cases_file(iw, tmp_path):
    p = iw.plan(worldmark_case(1))
    assert p.files["command.txt"].split("  #")[0] == (
        "python scripts/infworld_inference.py --cases cases.json --num_chunks 8 --seed SEED --ckpt_dir CKPT")
    assert p.files["cases.json"] == [{"prompt": "First-person view. A test scene.", "image": "000.jpg",
                                      "actions": "actions.json"}]
    p.write(tmp_path, seed=5)
    assert "--seed 5 " in (tmp_path / "command.txt").read_text()
