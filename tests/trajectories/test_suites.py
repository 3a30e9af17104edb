import json

import numpy as np
import pytest

from worldgate.adapters import UnknownNameError
from worldgate.trajectories.suites import Case, SuiteError, load_suite
from testpaths import SHARED

ARENA = SHARED / "worldmark" / "arena_inputs"
needs_arena = pytest.mark.skipif(not ARENA.is_dir(), reason="WorldMark arena_inputs not found at ../shared")


@needs_arena
def test_worldmark_reads_the_official_layout():
    cases = load_suite("worldmark", data=str(ARENA))
    assert len(cases) == 500
    assert len({c.id for c in cases}) == 500
    by = {}
    for c in cases:
        by.setdefault((c.tags["view"], c.tags["domain"]), []).append(c)
    assert sorted(by) == [("first", "real"), ("first", "style"), ("third", "real"), ("third", "style")]
    assert all(len(v) == 125 for v in by.values())
    c = next(c for c in cases if c.id == "first-real-000_011")
    # prompt verbatim by file:row, intrinsics from the .npy, actions from real_action.txt row 1
    rows = (ARENA / "first_view" / "prompt_real.txt").read_text().splitlines()
    assert c.prompt == rows[0] and c.prompt_source == "first_view/prompt_real.txt:1"
    k = np.load(ARENA / "first_view" / "real_intrinsics" / "000_intrinsics.npy")
    assert c.intrinsics == [float(v) for v in k]
    assert c.trajectory.to_text() == "W20 S20 W20"
    first_row = [int(a) for a in (ARENA / "first_view" / "real_action.txt").read_text().splitlines()[0].split(",")]
    assert sorted(x.tags["action_id"] for x in cases if x.id.startswith("first-real-000_")) == sorted(first_row)
    # third-view prompts are their own (never reused across views)
    t = next(x for x in cases if x.id.startswith("third-real-000_"))
    assert t.prompt.startswith("Third-person view.") and t.view == "third"
    style = [x for x in cases if x.tags["domain"] == "style"]
    assert {x.image_size for x in style} == {(1024, 1024)}


def test_worldmark_without_data_says_what_and_where(tmp_path):
    with pytest.raises(SuiteError, match="needs --data.*github.com/AlayaLab/WorldMark"):
        load_suite("worldmark")
    with pytest.raises(SuiteError, match="first_view/.*missing"):
        load_suite("worldmark", data=str(tmp_path))


def test_worldmark_engine_default_and_full():
    small = load_suite("worldmark-engine")
    assert len(small) == 15
    assert sorted(c.tags["action_id"] for c in small) == list(range(1, 16))
    assert {c.view for c in small} == {"first", "third"}
    assert {c.scene["palette"] for c in small} == {"realistic", "stylised"}
    full = load_suite("worldmark-engine", full=True)
    assert len(full) == 500 and len({c.id for c in full}) == 500
    assert all(c.image is None and c.scene for c in full)


def test_unknown_suite_did_you_mean():
    with pytest.raises(UnknownNameError, match="Did you mean 'worldmark-engine'"):
        load_suite("worldmark-engin")


def test_manifest_cases(tmp_path):
    rows = [{"id": "a1", "trajectory": "LRUD", "scene": {"seed": 3}, "prompt": "x"},
            {"id": "b2", "trajectory": {"text": "W2 R1"}, "scene": {"seed": 4}, "view": "third"}]
    p = tmp_path / "m.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    cases = load_suite(str(p))
    assert [c.id for c in cases] == ["a1", "b2"]
    assert cases[0].trajectory.name == "LRUD" and cases[1].trajectory.to_text() == "W2 R1"


@pytest.mark.parametrize("bad", ["../escape", "/abs", "a/b", ".hidden", "x..y", "", "a b"])
def test_case_ids_must_be_safe_folder_names(bad):
    with pytest.raises(SuiteError, match="not safe as a folder name"):
        Case(id=bad, suite="t", trajectory=None)


def test_manifest_errors_name_the_case(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps([{"id": "ok", "trajectory": "W2 Q1"}]))
    with pytest.raises(SuiteError, match="case 'ok'.*Q1"):
        load_suite(str(p))
    p.write_text(json.dumps([{"trajectory": "W2"}]))
    with pytest.raises(SuiteError, match="needs at least 'id'"):
        load_suite(str(p))


def test_unknown_case_and_trajectory_keys_are_errors_with_a_suggestion(tmp_path):
    """A typo in a manifest ("intrinsic", "sped_mps") would silently run the default intrinsics or speed."""
    import json as _json

    from worldgate.trajectories.suites import SuiteError, manifest_suite

    m = tmp_path / "m.jsonl"
    m.write_text(_json.dumps({"id": "a", "trajectory": "W1", "scene": {"seed": 1}, "intrinsic": [10, 10, 5, 5]}) + "\n")
    with pytest.raises(SuiteError, match="unknown key 'intrinsic' \\(did you mean 'intrinsics'\\?\\)"):
        manifest_suite(m)
    m.write_text(_json.dumps({"id": "a", "trajectory": {"text": "W1", "sped_mps": 3}}) + "\n")
    with pytest.raises(SuiteError, match="unknown trajectory key 'sped_mps' \\(did you mean 'speed_mps'\\?\\)"):
        manifest_suite(m)
    m.write_text(_json.dumps({"id": "a", "trajectory": {"text": "W1", "speed_mps": 3}, "tags": {"x": 1}}) + "\n")
    assert manifest_suite(m)[0].trajectory.speed == 3.0
