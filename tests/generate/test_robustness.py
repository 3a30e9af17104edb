"""Robustness: a kill-and-resume soak, property-based fuzzing (1,000 inputs each) of trajectory text, suite manifests,
plans and record metadata with only clear errors allowed, evaluate on broken videos, and no unsafe deserialisation."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from processes import run_and_kill
from worldgate.adapters import AdapterError, get_adapter, list_models
from worldgate.evaluate.features import FeatureError, open_record
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.records import list_records, load_record
from worldgate.generate.runner import run_generate
from worldgate.generate.video import VideoWriter, probe_video
from worldgate.trajectories.core import Trajectory, TrajectoryError
from worldgate.trajectories.suites import Case, SuiteError, manifest_suite
from testpaths import ROOT

FUZZ = settings(max_examples=1000, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
QUICK = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]


# ------------------------------------------------------------------------------------------------------------ soak
def test_soak_random_kills_then_resume(tmp_path):
    """Kill `generate` with SIGKILL at 10 random moments, resume: every case complete exactly once, none truncated."""
    out = tmp_path / "soak"
    cmd = [sys.executable, "-m", "worldgate", "generate", "--model", "engine", "--suite", "worldmark-engine",
           "--limit", "6", "--out", str(out), "--no-progress", *QUICK]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    rng = np.random.default_rng(7)
    for _ in range(10):
        at = float(rng.uniform(0.3, 2.5))
        run_and_kill(cmd, env, lambda elapsed, at=at: elapsed >= at)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    recs = list_records(out)
    assert len(recs) == 6
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(x.name for x in recs)  # no leftovers
    for rec in recs:
        meta = load_record(rec)["meta"]
        assert probe_video(rec / "video.mp4").frames == meta["achieved"]["frames"] == meta["requested"]["frames"]


# ------------------------------------------------------------------------------------------------------------ fuzz
VALID = st.builds(lambda m, l, s: f"{m}{'+' + l if m and l else l}{s}",
                  st.sampled_from(["", "W", "A", "S", "D", "_"]), st.sampled_from(["", "L", "R", "^", "v"]),
                  st.sampled_from(["1", "2.5", "0.0001", "20", "3"]))
JUNK = st.one_of(st.builds(lambda t, s: t + s, VALID, st.sampled_from(["", "-1", "0", "nan", "inf", "1e9", "x"])),
                 st.text(alphabet="WASDLR^v_+-.0123456789 eE,;xyz\t", max_size=6))


def _texts():
    """Mostly grammatical sequences, half of them with one corrupted token, plus free text."""
    corrupt = st.tuples(st.lists(VALID, min_size=1, max_size=6), st.none() | JUNK, st.integers(0, 6))
    return corrupt.map(lambda t: " ".join(t[0][:t[2]] + ([t[1]] if t[1] is not None else []) + t[0][t[2]:])) \
        | st.text(max_size=30)


@FUZZ
@given(_texts())
def test_fuzz_trajectory_text(text):
    try:
        t = Trajectory.parse(text)
    except TrajectoryError as e:
        assert str(e) and len(str(e)) < 2000
        return
    assert t.duration > 0 and np.isfinite(t.duration)
    P = t.poses(4.0, min(t.n_frames(4.0), 400))
    assert np.isfinite(P).all()
    assert Trajectory.parse(t.to_text()).to_dict() == t.to_dict()  # what parses round-trips


JSONV = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=8)
ROW = st.fixed_dictionaries({}, optional={
    "id": st.text(max_size=10) | st.integers(), "trajectory": st.sampled_from(["W1", "worldmark:3", "LRUD", "Q", ""]) | JSONV,
    "prompt": JSONV, "image": JSONV, "intrinsics": JSONV, "image_size": JSONV, "view": st.sampled_from(["first", "x"]) | JSONV,
    "tags": JSONV, "scene": JSONV})


@FUZZ
@given(st.lists(ROW, max_size=4) | JSONV, st.booleans())
def test_fuzz_suite_manifest(tmp_path, rows, jsonl):
    p = tmp_path / ("m.jsonl" if jsonl else "m.json")
    if jsonl and isinstance(rows, list):
        p.write_text("\n".join(json.dumps(r) for r in rows))
    else:
        p.write_text(json.dumps(rows))
    try:
        cases = manifest_suite(p)
    except SuiteError as e:
        assert str(e)
        return
    for c in cases:
        assert isinstance(c, Case) and c.trajectory.duration > 0


REAL = [m for m in list_models() if not m.startswith("engine")]


@FUZZ
@given(st.sampled_from(REAL), st.lists(st.builds(lambda m, l, s: f"{m}{'+' + l if m and l else l}{s}",
                                                  st.sampled_from(["", "W", "A", "S", "D", "_"]),
                                                  st.sampled_from(["", "L", "R", "^", "v"]),
                                                  st.sampled_from(["0.5", "1", "2", "3.25"])), min_size=1, max_size=4),
       st.integers(320, 2000), st.integers(240, 1400), st.floats(0.3, 2.0))
def test_fuzz_plans(model, tokens, w, h, ffac):
    tokens = [t if t[0] not in "0123456789" else "_" + t for t in tokens]
    try:
        traj = Trajectory.parse(" ".join(tokens))
    except TrajectoryError:
        return
    f = ffac * w
    case = Case(id="fz", suite="fuzz", trajectory=traj, prompt="p", image="x.jpg", intrinsics=[f, f, w / 2, h / 2],
                image_size=(w, h))
    try:
        plan = get_adapter(model).plan(case)
    except AdapterError as e:  # includes UnsupportedMotion: a clear refusal
        assert str(e)
        return
    assert plan.n_frames > 0 and plan.fps > 0
    for k, a in plan.arrays.items():
        assert np.isfinite(a).all() if a.dtype.kind == "f" else True, k
    segs = plan.segment_frames
    assert all(0 <= a <= b <= plan.n_frames for a, b in segs)
    json.dumps(plan.describe())  # the description is JSON


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzzrec") / "run"
    assert run_generate("engine", "worldmark-engine", out, limit=1, overrides=QUICK, progress=False).exit_code == 0
    return list_records(out)[0]


@FUZZ
@given(JSONV | st.fixed_dictionaries({"kind": st.just("rollout")}, optional={
    "achieved": JSONV | st.fixed_dictionaries({}, optional={"fps": JSONV, "width": JSONV, "height": JSONV, "frames": JSONV}),
    "files": JSONV, "caveats": JSONV, "case": JSONV, "intrinsics": JSONV, "requested": JSONV}))
def test_fuzz_record_metadata(record, tmp_path, meta):
    d = tmp_path / "rec"
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(record, d)
    (d / "meta.json").write_text(json.dumps(meta))
    try:
        rec = open_record(d)
    except FeatureError as e:
        assert d.name in str(e)
        return
    assert rec.fps > 0 and rec.n_frames >= 0


# ------------------------------------------------------------------------------------------------ broken videos
def test_evaluate_broken_videos_scores_the_rest(record, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("good", "nan", "wrongfps", "zero", "trunc"):
        shutil.copytree(record, run / name)
    P = np.load(run / "nan" / "poses.npy")
    P[3] = np.nan
    np.save(run / "nan" / "poses.npy", P)
    frames = np.zeros((16, 64, 64, 3), np.uint8)
    w = VideoWriter(run / "wrongfps" / "video.mp4", 64, 64, 8.0)  # meta says 16 fps
    w.write(frames)
    w.close()
    (run / "zero" / "video.mp4").write_bytes(b"")
    v = run / "trunc" / "video.mp4"
    v.write_bytes(v.read_bytes()[:300])
    r = evaluate_run(run, progress=False)
    err = r["errors"]
    assert set(err) == {"nan", "wrongfps", "zero", "trunc"}
    assert "NaN" in err["nan"] and "8 fps but meta.json records 16" in err["wrongfps"]
    rows = {json.loads(x)["case"]: json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()}
    assert rows["good"]["scores"]["direction_accuracy_trans"] > 95


# ------------------------------------------------------------------------------------------------ safe loading
UNSAFE = [
    (re.compile(r"allow_pickle\s*=\s*True"), "np.load(allow_pickle=True)"),
    (re.compile(r"^\s*import pickle|pickle\.loads?\("), "pickle"),
    (re.compile(r"torch\.load\((?![^)]*weights_only\s*=\s*True)"), "torch.load without weights_only=True"),
    (re.compile(r"yaml\.load\((?![^)]*SafeLoader)"), "yaml.load without SafeLoader (use yaml.safe_load)"),
    (re.compile(r"yaml\.unsafe_load|trust_remote_code\s*=\s*True"), "unsafe load"),
]


def test_no_unsafe_deserialisation_in_the_package():
    bad = []
    for folder in ("adapters", "evaluate", "generate", "trajectories", "prompts", "worldgate"):
        for f in (ROOT / folder).rglob("*.py"):
            for i, line in enumerate(f.read_text().splitlines(), 1):
                for pat, what in UNSAFE:
                    if pat.search(line):
                        bad.append(f"{f.relative_to(ROOT)}:{i}: {what}")
    assert not bad, bad
