import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from processes import run_and_kill
from worldgate.cli import main
from worldgate.generate.records import is_complete, list_records, load_record
from worldgate.generate.runner import run_generate
from worldgate.generate.video import probe_video, read_frames

QUICK = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]


def gen(out, limit=3, **kw):
    return run_generate("engine", "worldmark-engine", out, limit=limit, overrides=QUICK, progress=False, **kw)


def frames_of(rec):
    return np.stack(list(read_frames(Path(rec) / "video.mp4")))


def test_generate_writes_complete_records_and_resumes(tmp_path):
    out = tmp_path / "run"
    res = gen(out)
    assert res.exit_code == 0 and len(res.done) == 3
    recs = list_records(out)
    assert [r.name for r in recs] == sorted(res.done)
    r = load_record(recs[0])
    meta = r["meta"]
    assert meta["kind"] == "rollout" and meta["complete"]
    assert meta["achieved"]["frames"] == meta["requested"]["frames"] == len(r["poses"])
    assert meta["achieved"]["width"] == 64 and meta["achieved"]["fps"] == 16.0
    assert meta["intrinsics"]["regime"] == 4 and "transform" in meta["intrinsics"]
    assert meta["prompt_source"].startswith("engine:scene-")
    assert meta["config"]["model_args"]["width"] == 64 and meta["git"]
    assert meta["files"]["video.mp4"]["bytes"] == (recs[0] / "video.mp4").stat().st_size
    assert (recs[0] / "native" / "plan.json").is_file() and (recs[0] / "native" / "poses.npy").is_file()
    tj = r["trajectory"]
    assert tj["segments"][0]["frames"][0] == 0 and tj["segments"][-1]["frames"][1] == meta["achieved"]["frames"]
    # the same command again renders nothing
    again = gen(out)
    assert again.done == [] and sorted(again.skipped) == sorted(res.done)
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]
    rows = [json.loads(x) for x in (out / "jobs.jsonl").read_text().splitlines()]
    assert [x["status"] for x in rows] == ["ok"] * 3


def test_same_seed_identical_frames(tmp_path):
    a, b = gen(tmp_path / "a", limit=1, seed=5), gen(tmp_path / "b", limit=1, seed=5)
    fa, fb = frames_of(tmp_path / "a" / a.done[0]), frames_of(tmp_path / "b" / b.done[0])
    assert fa.shape[0] == 16
    np.testing.assert_array_equal(fa, fb)


def test_failing_case_is_logged_and_the_run_goes_on(tmp_path):
    m = tmp_path / "m.jsonl"
    rows = [{"id": "good", "trajectory": "W1", "scene": {"seed": 1}},
            {"id": "bad", "trajectory": "W1", "image": "photo.jpg"},
            {"id": "good2", "trajectory": "R1", "scene": {"seed": 2}}]
    m.write_text("\n".join(json.dumps(r) for r in rows))
    res = run_generate("engine", str(m), tmp_path / "run", overrides=QUICK, progress=False)
    assert res.exit_code == 1 and sorted(res.done) == ["good", "good2"] and list(res.failed) == ["bad"]
    assert "renders its own scenes" in res.failed["bad"]
    log = [json.loads(x) for x in (tmp_path / "run" / "jobs.jsonl").read_text().splitlines()]
    assert {x["case"]: x["status"] for x in log} == {"good": "ok", "bad": "failed", "good2": "ok"}
    assert not (tmp_path / "run" / "bad").exists()


def test_dry_run_writes_plans_only(tmp_path):
    res = run_generate("engine", "worldmark-engine", tmp_path / "p", limit=2, dry_run=True, overrides=QUICK,
                       progress=False)
    assert res.exit_code == 0
    d = tmp_path / "p" / res.done[0]
    assert not (d / "video.mp4").exists()
    assert is_complete(d, "plan") and not is_complete(d, "rollout")
    plan = json.loads((d / "native" / "plan.json").read_text())
    assert plan["n_frames"] == 16 and plan["arrays"]["c2w"]["shape"] == [16, 4, 4]
    P = np.load(d / "native" / "poses.npy")
    assert P.shape == (16, 4, 4)
    # a real run afterwards replaces the plan records with rollouts
    res2 = gen(tmp_path / "p", limit=2)
    assert sorted(res2.done) == sorted(res.done) and is_complete(d, "rollout")


def test_kill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "k"
    cmd = [sys.executable, "-m", "worldgate", "generate", "--model", "engine", "--suite", "worldmark-engine",
           "--limit", "4", "--out", str(out), "--no-progress", *QUICK]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # kill right after a record lands, then at fixed delays that fall inside rendering or encoding
    for kill_after, delay in ((1, 0.0), (2, 0.15), (None, 1.3), (None, 1.9)):
        def when(elapsed, kill_after=kill_after, delay=delay):
            if kill_after is None:
                return elapsed >= delay
            if out.exists() and len(list_records(out)) >= kill_after:
                time.sleep(delay)
                return True
            return False

        run_and_kill(cmd, env, when)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    recs = list_records(out)
    assert len(recs) == 4
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]
    for rec in recs:
        meta = load_record(rec)["meta"]
        info = probe_video(rec / "video.mp4")
        assert info.frames == meta["achieved"]["frames"] == 16  # nothing truncated
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(r.name for r in recs)


def test_cli_errors_are_helpful(capsys):
    assert main(["generate", "--model", "engin", "--suite", "worldmark-engine", "--dry-run"]) == 2
    assert "Did you mean 'engine'" in capsys.readouterr().err
    assert main(["generate", "--model", "engine", "--suite", "worldmark", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "needs --data" in err and "AlayaLab/WorldMark" in err
    assert main(["generate", "--model", "engine", "--suite", "worldmark-engine", "--dry-run", "oops"]) == 2
    assert "key=value" in capsys.readouterr().err


def test_case_id_cannot_escape_the_output_folder(tmp_path):
    from worldgate.generate.records import record_dir

    with pytest.raises(ValueError):
        record_dir(tmp_path, "../x")
    assert record_dir(tmp_path, "ok.1").parent == tmp_path.resolve()


def test_list_commands(capsys):
    assert main(["list", "models", "--wide"]) == 0  # the full table (the default fits 100 columns: test_list_tables)
    out = capsys.readouterr().out
    assert "engine" in out and "K regime" in out and "Solaris" in out
    assert main(["list", "trajectories"]) == 0
    out = capsys.readouterr().out
    assert "worldmark:15" in out and "LRUD" in out and "grammar" in out
