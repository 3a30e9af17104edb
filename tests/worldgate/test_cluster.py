"""``--launcher local|slurm``: cases spread over a submitit job array into one run folder (worldgate/cluster.py)."""

import json
import os
from pathlib import Path

import pytest

from worldgate.cli import main
from worldgate.cluster import LaunchError, check_tasks, launch_generate, parse_slurm
from worldgate.generate.runner import run_generate
from worldgate.generate.video import sha256_file
from testpaths import TESTS

pytest.importorskip("submitit")

OV = ["model.width=64", "model.height=64", "trajectory.seconds=1"]
KW = dict(model="engine", suite="worldmark-engine", limit=10, overrides=OV)


def digests(run: Path) -> dict:
    return {p.parent.name: sha256_file(p) for p in sorted(run.glob("*/video.mp4"))}


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain") / "run"
    res = run_generate(out=out, progress=False, **KW)
    assert res.exit_code == 0 and len(res.done) == 10
    return out


def test_local_array_writes_the_records_of_a_plain_run(plain_run, tmp_path, capsys):
    """10 Engine cases in 2 local tasks: the same 10 records, byte for byte, as one process writes."""
    out = tmp_path / "array"
    rc = main(["generate", "--model", "engine", "--suite", "worldmark-engine", "--limit", "10", *OV, "--launcher",
               "local", "--tasks", "2", "--out", str(out)])
    assert rc == 0, capsys.readouterr()
    assert len(digests(plain_run)) == 10
    assert digests(out) == digests(plain_run)
    sub = json.loads((out / ".jobs" / "submitted.json").read_text())
    assert sub["launcher"] == "local" and sub["tasks"] == 2 and len(sub["job_ids"]) == 2
    assert "generated 10, skipped 0 complete, failed 0" in capsys.readouterr().out


def test_a_task_killed_midway_is_finished_by_resubmitting(plain_run, tmp_path, monkeypatch):
    """Task 1 dies while writing its second case: the run is short of records, the failed task is in jobs.jsonl
    with its log; the same command again completes the run, skipping every complete record."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    from processes import task_killed_on_second_case

    out = tmp_path / "run"
    kw = dict(KW, out=str(out), limit=6)
    lines = []
    rc = launch_generate(kw, "local", 2, {}, echo=lines.append, task=task_killed_on_second_case)
    assert rc == 1
    first = digests(out)
    assert 3 <= len(first) < 6  # task 0 wrote its 3, task 1 one before it died
    rows = [json.loads(x) for x in (out / "jobs.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r.get("status") == "task failed"]
    assert [r["task"] for r in failed] == [1] and failed[0]["log"]["stderr"].endswith("_log.err")
    assert Path(failed[0]["log"]["stderr"]).is_file()
    assert any("TASK 1" in ln for ln in lines)

    lines.clear()
    assert launch_generate(kw, "local", 2, {}, echo=lines.append) == 0
    plain = digests(plain_run)
    assert digests(out) == {k: plain[k] for k in digests(out)} and len(digests(out)) == 6  # the plain run's first 6
    summary = next(ln for ln in lines if ln.startswith("generated"))
    assert summary.startswith(f"generated {6 - len(first)}, skipped {len(first)} complete, failed 0")


def test_slurm_options_are_checked():
    assert parse_slurm(["partition=gpu", "gpus=8", "time=12:30:00", "mem=64G", "account=lab", "qos=high"]) == {
        "partition": "gpu", "gpus": 8, "time": 750, "mem": 64, "account": "lab", "qos": "high"}
    assert parse_slurm(["time=90"])["time"] == 90
    with pytest.raises(LaunchError, match="did you mean 'partition'"):
        parse_slurm(["partiton=gpu"])
    with pytest.raises(LaunchError, match="gigabytes"):
        parse_slurm(["mem=lots"])
    with pytest.raises(LaunchError, match="letters, digits"):
        parse_slurm(["partition=gpu;rm -rf /"])
    with pytest.raises(LaunchError, match="HH:MM:SS"):
        parse_slurm(["time=soon"])
    with pytest.raises(LaunchError, match="need --launcher slurm"):
        launch_generate(dict(KW, out="/tmp/never"), "local", 1, {"partition": "gpu"})
    assert check_tasks(None, "slurm") == 16 and check_tasks(3, "local") == 3
    with pytest.raises(LaunchError, match="--tasks"):
        check_tasks(0, "local")


def test_slurm_executor_gets_the_request(tmp_path, monkeypatch):
    """The Slurm request reaches submitit as its own parameters (no cluster here: the executor is only built)."""
    import submitit

    from worldgate.cluster import executor

    seen = {}
    monkeypatch.setattr(submitit.AutoExecutor, "update_parameters", lambda self, **kw: seen.update(kw))
    monkeypatch.setattr(submitit.AutoExecutor, "__init__", lambda self, folder, cluster=None: seen.update(
        folder=str(folder), cluster=cluster))
    executor("slurm", tmp_path / ".jobs", parse_slurm(["partition=h200", "time=60", "cpus=16", "parallelism=4"]),
             gpus=8, name="worldgate-generate-lingbot-world")
    assert seen == {"folder": str(tmp_path / ".jobs"), "cluster": "slurm", "timeout_min": 60, "nodes": 1,
                    "tasks_per_node": 1, "gpus_per_node": 8, "name": "worldgate-generate-lingbot-world",
                    "slurm_partition": "h200", "cpus_per_task": 16, "slurm_array_parallelism": 4}


def test_bad_arguments_are_refused_before_anything_is_submitted(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["generate", "--model", "engnie", "--suite", "worldmark-engine", "--launcher", "local",
                 "--out", str(out)]) == 2
    assert "Did you mean" in capsys.readouterr().err and not out.exists()


def test_evaluate_over_an_array_equals_a_plain_evaluate(plain_run, tmp_path):
    """Features in 2 local tasks, then the scores from the cache: the same samples as one process computes."""
    import shutil

    a, b = tmp_path / "a", tmp_path / "b"
    keep = sorted(p.name for p in plain_run.iterdir() if (p / "meta.json").is_file())[:4]  # 4 records: 2 per task
    for d in (a, b):
        shutil.copytree(plain_run, d, ignore=lambda src, names: [n for n in names if src == str(plain_run)
                                                                  and (Path(src) / n / "meta.json").is_file()
                                                                  and n not in keep])
    assert main(["evaluate", str(a), "--no-progress", "--metrics", "direction_accuracy_rot"]) == 0
    assert main(["evaluate", str(b), "--no-progress", "--metrics", "direction_accuracy_rot", "--launcher", "local",
                 "--tasks", "2"]) == 0

    def scores(run):
        return sorted(json.dumps({k: v for k, v in json.loads(x).items() if k in ("id", "case", "scores",
                                                                                      "metrics")}, sort_keys=True)
                      for x in (run / "samples.jsonl").read_text().splitlines())

    assert scores(a) == scores(b)
