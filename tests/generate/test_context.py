"""Context policies (pure selections over chunk metadata) and engine-memory, the Engine that only reproduces what its
context held."""

import json

import numpy as np
import pytest

from worldgate.adapters import AdapterError
from worldgate.adapters.context import ContextPolicy, chunk_infos, fov_overlap
from worldgate.generate.records import list_records
from worldgate.generate.runner import run_generate
from worldgate.generate.video import read_frames
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory


def infos(traj, fps=16, chunk=16):
    return chunk_infos(traj.poses(fps), chunk)


def test_unlimited_budget_keeps_everything():
    ch = infos(library.get("LRLRLR"))
    for name in ("full_kv", "sliding_window", "fov"):
        p = ContextPolicy(name, budget=None)
        assert all(p.select(ch[:k], ch[k]) == list(range(k)) for k in range(len(ch)))


def test_sliding_window_is_sink_plus_recent():
    ch = infos(library.get("LRLR"))
    p = ContextPolicy("sliding_window", budget=3)
    assert p.select(ch[:10], ch[10]) == [0, 8, 9]
    assert ContextPolicy("sliding_window", budget=3, sink=False).select(ch[:10], ch[10]) == [7, 8, 9]
    assert p.select(ch[:2], ch[2]) == [0, 1]  # under budget: everything


def test_fov_equals_sliding_window_when_walking_forward():
    ch = infos(Trajectory.parse("W30"))
    fov, sw = ContextPolicy("fov", budget=4, recent=1), ContextPolicy("sliding_window", budget=4)
    for k in range(5, len(ch)):
        assert fov.select(ch[:k], ch[k]) == sw.select(ch[:k], ch[k])


def test_fov_retrieves_the_chunks_that_saw_the_returning_view():
    traj = library.get("LRLR")  # V hold 2 s, then L 90 deg, R back, L, R
    ch = infos(traj)
    P = traj.poses(16)
    yaw = np.degrees(np.arctan2(P[:, 0, 2], P[:, 2, 2]))
    k = next(c.index for c in ch if c.start > 16 * 2 + 57 + 57 + 20)  # during the second L, well past the first R
    sel = ContextPolicy("fov", budget=4, recent=1).select(ch[:k], ch[k])
    assert sel[0] == 0 and sel[-1] == k - 1  # sink and the most recent chunk
    target = yaw[ch[k].start:ch[k].stop].mean()
    retrieved = [c for c in sel[1:-1]]
    assert retrieved and all(abs(yaw[ch[c].start:ch[c].stop].mean() - target) < 35 for c in retrieved)
    # the sliding window keeps only recent chunks, none of the first L's
    assert ContextPolicy("sliding_window", budget=4).select(ch[:k], ch[k]) == [0, k - 3, k - 2, k - 1]


def test_fov_overlap_properties():
    p = ContextPolicy("fov", budget=2)
    I = np.eye(4)[None]
    turned = Trajectory.parse("R3.6").poses(16)[-1:]  # 90 deg right
    behind = Trajectory.parse("R7.2").poses(16)[-1:]  # 180 deg
    assert fov_overlap(I, I, p) == pytest.approx(1.0)
    assert fov_overlap(turned, I, p) == 0.0 and fov_overlap(behind, I, p) == 0.0  # 60 deg FOV: no overlap
    far = I.copy()
    far[0, 2, 3] = -20.0  # same direction, 20 m back: the gate (8 m) drops it
    assert fov_overlap(far, I, p) == 0.0
    assert fov_overlap(I, I, p) == fov_overlap(I, I, p)  # seeded: deterministic


def test_policy_errors():
    with pytest.raises(KeyError, match="Did you mean 'fov'"):
        ContextPolicy("fovv")
    with pytest.raises(ValueError, match="budget must be >= 1"):
        ContextPolicy("sliding_window", budget=0)


QUICK = ["model.width=64", "model.height=64", "model.threads=1", "model.chunk=4", "trajectory.seconds=1"]


@pytest.fixture(scope="module")
def lr_manifest(tmp_path_factory):
    m = tmp_path_factory.mktemp("ctx") / "cases.jsonl"
    m.write_text(json.dumps({"id": "lrlr", "trajectory": "LRLR", "scene": {"seed": 5}}) + "\n")
    return m


def _frames(run):
    (rec,) = list_records(run)
    return np.stack(list(read_frames(rec / "video.mp4"))), rec


def test_engine_memory_with_everything_held_is_engine_gt(lr_manifest, tmp_path):
    run_generate("engine", str(lr_manifest), tmp_path / "gt", overrides=QUICK, progress=False)
    gt, _ = _frames(tmp_path / "gt")
    for pol in ("full_kv", "sliding_window", "fov"):
        run_generate("engine-memory", str(lr_manifest), tmp_path / pol, overrides=QUICK, progress=False, context=pol)
        fr, rec = _frames(tmp_path / pol)
        assert np.array_equal(fr, gt), pol  # unlimited budget: identical rollouts, equal to Engine GT
        rows = [json.loads(x) for x in (rec / "context.jsonl").read_text().splitlines()]
        assert rows[3]["context"] == [0, 1, 2] and rows[3]["kv_bytes"] == 2 * 3 * 4 * 256 * 32 * 4


def test_engine_memory_forgets_outside_its_context(lr_manifest, tmp_path):
    run_generate("engine", str(lr_manifest), tmp_path / "gt", overrides=QUICK, progress=False)
    gt, _ = _frames(tmp_path / "gt")
    res = run_generate("engine-memory", str(lr_manifest), tmp_path / "sw", overrides=QUICK, progress=False,
                       context="sliding_window", budget=1)
    assert res.exit_code == 0
    fr, rec = _frames(tmp_path / "sw")
    rows = [json.loads(x) for x in (rec / "context.jsonl").read_text().splitlines()]
    assert all(r["context"] == ([0] if r["chunk"] else []) for r in rows)  # the sink only
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["context"]["name"] == "sliding_window" and meta["context"]["budget"] == 1
    assert np.array_equal(fr[:8], gt[:8])  # chunks 0-1: nothing forgotten yet
    diff = np.abs(fr.astype(int) - gt.astype(int)).mean(axis=(1, 2, 3))
    assert diff[-8:].max() > 2.0  # the last chunks return to places only forgotten chunks showed: re-invented


def test_context_needs_a_model_that_has_one(lr_manifest, tmp_path):
    with pytest.raises(AdapterError, match="cannot apply context policy 'fov'"):
        run_generate("engine", str(lr_manifest), tmp_path / "x", overrides=QUICK, progress=False, context="fov")
    with pytest.raises(ValueError, match="--budget needs --context"):
        run_generate("engine-memory", str(lr_manifest), tmp_path / "x", overrides=QUICK, progress=False, budget=2)
