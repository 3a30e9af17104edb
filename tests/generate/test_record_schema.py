"""The typed record: meta.json's versioned model and its migration, the intrinsics shape checked when the plan is
made, and the one verifier (generate/record.py ``open_record``) every reader of one-view and two-view records uses.

Records are real Engine rollouts (48x48, one view and two views, written by the current writer);
records of the previous formats are made from them by writing meta.json as formats 1 and 2 wrote it, and a meta.json
written by format 2's writer is committed (tests/data/record_format2/meta.json)."""

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from worldgate.adapters import get_adapter
from worldgate.adapters.base import AdapterError, PlanIntrinsics, check_plan_intrinsics
from worldgate.evaluate.features import FeatureError
from worldgate.evaluate.features import open_record as open_one_view
from worldgate.evaluate.multiworldbench.record import open_two_view
from worldgate.generate.record import RECORD_FORMAT, migrate_meta, open_record, parse_meta
from worldgate.generate.record_files import META, RecordError
from worldgate.generate.records import RecordWriter
from worldgate.generate.runner import run_generate, write_rollout
from worldgate.trajectories.suites import load_suite
from testpaths import DATA

FORMAT2 = DATA / "record_format2" / "meta.json"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """{"one": a one-view record, "two": a two-view record} written by today's writer."""
    run = tmp_path_factory.mktemp("schema") / "run"
    one = get_adapter("engine", width=48, height=48)
    one.load()
    case = next(iter(load_suite("worldmark-engine")))
    case = dataclasses.replace(case, trajectory=case.trajectory.with_seconds(1.0))
    two = get_adapter("engine-2p", width=48, height=48)
    two.load()
    case2 = {c.id: c for c in load_suite("multiworldbench-engine")}["shared-state-000"]
    return {"one": write_rollout(run, case, one, one.plan(case), 0, {"model": "engine"}),
            "two": write_rollout(run, case2, two, two.plan(case2), 0, {"model": "engine-2p"})}


def _copy(records, kind, tmp_path) -> Path:
    dst = tmp_path / "run" / records[kind].name
    shutil.copytree(records[kind], dst)
    return dst


def _meta(folder: Path) -> dict:
    return json.loads((folder / META).read_text())


def _write_meta(folder: Path, meta: dict) -> None:
    (folder / META).write_text(json.dumps(meta))


def _as_format(meta: dict, fmt: int) -> dict:
    """meta.json as the writer of format ``fmt`` (1 or 2) wrote it."""
    m = dict(meta, intrinsics={k: v for k, v in meta["intrinsics"].items() if k != "native_size"}, record_format=fmt)
    if fmt == 1:
        two = list(m["views"]) == ["A", "B"]
        for k in ("views", "record_format", "players"):
            m.pop(k, None)
        if two:
            m["kind"] = "rollout-2p"
    return m


def test_the_writer_writes_the_current_format(records):
    for kind, folder in records.items():
        meta = _meta(folder)
        assert meta["record_format"] == RECORD_FORMAT == 3
        info = parse_meta(meta, strict=True)
        assert info.written_format == 3 and info.signed and info.complete
        assert info.intrinsics.native_size == (meta["requested"]["width"], meta["requested"]["height"])
        assert info.intrinsics.regime == 4 and len(info.intrinsics.native) == 4
        assert migrate_meta(meta) == meta  # a current meta.json migrates to itself


def test_a_format2_meta_written_by_the_previous_writer_migrates():
    meta = json.loads(FORMAT2.read_text())
    assert meta["record_format"] == 2 and "native_size" not in meta["intrinsics"]
    info = parse_meta(meta, "first-real-000_001")
    assert (info.written_format, info.record_format) == (2, 3)
    assert info.intrinsics.native == pytest.approx((73.91351826309997, 73.91351826309997, 47.5, 47.5))
    assert info.intrinsics.native_size == (96, 96) and info.intrinsics.regime == 4
    assert info.views == {"": {"video": "video.mp4", "poses": "poses.npy"}}
    assert info.achieved[""].frames == 64 and info.achieved[""].fps == 16.0
    assert info.signed and set(info.files) >= {"video.mp4", "poses.npy", "trajectory.json"}
    assert migrate_meta(meta)["intrinsics"]["native_size"] == [96, 96]
    assert meta["intrinsics"].get("native_size") is None  # the migration copies, never edits what it read


@pytest.mark.parametrize("fmt", [1, 2])
@pytest.mark.parametrize("kind", ["one", "two"])
def test_records_of_the_previous_formats_open(records, kind, fmt, tmp_path):
    folder = _copy(records, kind, tmp_path)
    now = open_record(records[kind])
    _write_meta(folder, _as_format(_meta(folder), fmt))
    old = open_record(folder)
    assert old.info.written_format == fmt and old.info.record_format == RECORD_FORMAT
    assert list(old.views) == list(now.views) == (["A", "B"] if kind == "two" else [""])
    assert {v: x.content_hash for v, x in old.views.items()} == {v: x.content_hash for v, x in now.views.items()}
    assert old.info.intrinsics.native == now.info.intrinsics.native
    assert old.info.intrinsics.native_size == now.info.intrinsics.native_size
    if kind == "one":
        rv = open_one_view(folder)
        assert rv.n_frames == len(rv.poses) > 0 and rv.intrinsics is not None
    else:
        tv = open_two_view(folder)
        assert tv.n_frames == len(tv.poses["A"]) == len(tv.poses["B"]) > 0 and tv.task == "shared_state"


@pytest.mark.parametrize("bad, field", [
    ({"native": [50.0, 50.0, 24.0]}, "intrinsics.native: intrinsics must be 4 numbers"),
    ({"native": [-50.0, 50.0, 24.0, 24.0]}, "intrinsics.native: focal lengths"),
    ({"native": [50.0, 50.0, 500.0, 24.0]}, "intrinsics.native: principal point"),
    ({"native_size": None}, "intrinsics.native_size: missing"),
    ({"native_size": [96, 96]}, "intrinsics.native_size: 96x96 is not the plan's size 48x48"),
    ({"regime": 7}, "intrinsics.regime: must be 1, 2, 3 or 4"),
])
def test_malformed_plan_intrinsics_fail_at_plan_time_naming_the_adapter_and_the_field(bad, field):
    a = get_adapter("engine", width=48, height=48)
    case = next(iter(load_suite("worldmark-engine")))
    plan = a.plan(case)
    good = check_plan_intrinsics(plan)
    assert isinstance(good, PlanIntrinsics) and good.native_size == (48, 48)
    plan.intrinsics = {k: v for k, v in dict(plan.intrinsics, **bad).items() if v is not None}
    with pytest.raises(AdapterError) as e:
        check_plan_intrinsics(plan)
    assert f"engine plan of {case.id}: {field}" in str(e.value)


def test_a_two_view_dry_run_record_is_written_and_typed(tmp_path):
    res = run_generate("engine-2p", "multiworldbench-engine", tmp_path / "plan", limit=1, dry_run=True,
                       overrides=["model.width=48", "model.height=48"], progress=False)
    assert res.exit_code == 0, res.failed
    info = parse_meta(_meta(tmp_path / "plan" / res.done[0]), strict=True)
    assert info.kind == "plan" and list(info.views) == ["A", "B"] and info.intrinsics.native_size == (48, 48)


def test_the_writer_refuses_a_meta_json_evaluate_would_refuse(tmp_path):
    w = RecordWriter(tmp_path / "run", "c0")
    with pytest.raises(RecordError, match="intrinsics.native_size: missing"):
        w.commit({"kind": "plan", "case_id": "c0", "intrinsics": {"regime": 4, "native": [40.0, 40.0, 24.0, 24.0]},
                  "requested": {"width": 48, "height": 48, "fps": 16.0, "frames": 8}})
    assert not (tmp_path / "run" / "c0").exists()


def _tamper_sha(folder: Path, poses: str) -> str:
    t = json.loads((folder / "trajectory.json").read_text())
    t["edited"] = True
    (folder / "trajectory.json").write_text(json.dumps(t))
    return "trajectory.json changed after the record was written"


def _tamper_link(folder: Path, poses: str) -> str:
    video = "video.mp4" if poses == "poses.npy" else "video_a.mp4"
    os.replace(folder / video, folder.parent / "elsewhere.mp4")
    os.symlink(folder.parent / "elsewhere.mp4", folder / video)
    return f"{video} is a symbolic link"


def _tamper_missing(folder: Path, poses: str) -> str:
    (folder / poses).unlink()
    return f"{poses} is missing"


def _tamper_count(folder: Path, poses: str) -> str:
    p = np.load(folder / poses)
    np.save(folder / poses, p[:-1])
    return f"{poses} holds {len(p) - 1} commanded poses but meta.json records {len(p)} achieved frames"


@pytest.mark.parametrize("tamper", [_tamper_sha, _tamper_link, _tamper_missing, _tamper_count])
@pytest.mark.parametrize("kind", ["one", "two"])
def test_the_one_verifier_refuses_tampered_records_of_one_or_two_views(records, kind, tamper, tmp_path):
    folder = _copy(records, kind, tmp_path)
    want = f"{folder.name}: " + tamper(folder, "poses.npy" if kind == "one" else "poses_b.npy")
    with pytest.raises(RecordError) as e:
        open_record(folder)
    assert str(e.value).startswith(want)
    reader = open_one_view if kind == "one" else open_two_view
    with pytest.raises(FeatureError) as e2:  # evaluate's readers say the same, through the same function
        reader(folder)
    assert str(e2.value).startswith(want)
