"""Scale-out: `accelerate launch` with two CPU processes splits generate and evaluate with nothing done twice or lost,
one merged run folder, and the same records and scores as one process."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from worldgate.dist import rank_world
from worldgate.generate.records import list_records
from worldgate.generate.video import sha256_file

pytest.importorskip("accelerate")
ARGS = ["--model", "engine", "--suite", "worldmark-engine", "--limit", "6", "--no-progress", "model.width=64",
        "model.height=64", "model.threads=1", "trajectory.seconds=1"]


def _launch(tmp_path, *argv, procs=2):
    acc = Path(sys.executable).with_name("accelerate")
    if not acc.exists():
        pytest.skip("accelerate's launcher is not installed next to this python")
    env = dict(os.environ, HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1")
    env.pop("WORLD_SIZE", None)
    cmd = [str(acc), "launch", "--multi_gpu", "--num_processes", str(procs), "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "worldgate", *argv]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def _single(tmp_path, *argv):
    env = dict(os.environ, HOME=str(tmp_path / "home"))
    p = subprocess.run([sys.executable, "-m", "worldgate", *argv], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]


def test_rank_world_reads_the_launcher_env(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert rank_world() == (0, 1)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    assert rank_world() == (3, 4)
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(RuntimeError, match="inconsistent"):
        rank_world()


def test_two_processes_match_one(tmp_path):
    _launch(tmp_path, "generate", *ARGS, "--out", "two")
    _single(tmp_path, "generate", *ARGS, "--out", "one")
    two, one = tmp_path / "two", tmp_path / "one"
    jobs = [json.loads(ln) for ln in (two / "jobs.jsonl").read_text().splitlines()]
    assert sorted(j["case"] for j in jobs) == sorted(p.name for p in list_records(one))  # each case exactly once
    assert len({j["pid"] for j in jobs}) == 2  # really split over two processes
    for a, b in zip(list_records(one), list_records(two)):
        assert a.name == b.name
        assert sha256_file(a / "video.mp4") == sha256_file(b / "video.mp4"), a.name
    _launch(tmp_path, "evaluate", "two", "--no-progress")
    _single(tmp_path, "evaluate", "one", "--no-progress")
    r1 = json.loads((one / "results.json").read_text())
    r2 = json.loads((two / "results.json").read_text())
    assert r1["metrics"] == r2["metrics"] and r2["records"] == 6
    s1 = (one / "samples.jsonl").read_text().splitlines()
    s2 = (two / "samples.jsonl").read_text().splitlines()
    assert [json.loads(x)["scores"] for x in s1] == [json.loads(x)["scores"] for x in s2]
    # rank 0 scored from the cache the two shards filled
    assert r2["features"]["computed"] == 0 and r2["features"]["cached"] > 0
