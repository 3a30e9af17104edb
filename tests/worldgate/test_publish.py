"""Publishing (worldgate/publish.py): `--push-to-hub` with HF_HUB_OFFLINE=1 stages what it would upload with a
manifest of sizes and sha256; online it sends those files in one commit (a recording HfApi here); `--log wandb` with
WANDB_MODE=offline writes wandb's offline run folder, read back here record by record."""

import hashlib
import json
import struct
import sys
import types
from pathlib import Path

import pytest

from worldgate import publish
from worldgate.cli import main


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_report_push_offline_stages_files_and_manifest(worldmark_engine_run, tmp_path, monkeypatch, capsys):
    run, res = worldmark_engine_run
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    report = tmp_path / "report"
    assert main(["report", str(run), "--out", str(report), "--push-to-hub", "lab/worldgate-results",
                 "--with-videos"]) == 0
    out = capsys.readouterr().out
    staged = Path("hub-staged") / "lab__worldgate-results"
    assert f"not uploaded to lab/worldgate-results; staged in {staged}" in out
    m = json.loads((staged / "manifest.json").read_text())
    assert m["repo_id"] == "lab/worldgate-results" and m["repo_type"] == "dataset" and m["uploaded"] is False
    paths = [f["path"] for f in m["files"]]
    videos = sorted(p.relative_to(run).as_posix() for p in run.glob("*/video*.mp4"))
    assert len(videos) == 2  # the fixture's two records
    reported = sorted(f"report/{p.relative_to(report).as_posix()}" for p in report.rglob("*") if p.is_file())
    assert "report/index.html" in reported or any(p.endswith(".html") for p in reported)
    assert sorted(paths) == sorted([f"runs/{run.name}/results.json", f"runs/{run.name}/samples.jsonl",
                                    *(f"runs/{run.name}/{v}" for v in videos), *reported])
    for f in m["files"]:  # every staged file is the original, byte for byte, with its size and digest
        src = run / f["path"].split("/", 2)[2] if f["path"].startswith("runs/") else report / f["path"][7:]
        assert (f["size"], f["sha256"]) == (src.stat().st_size, _sha(src)) == \
               ((staged / "files" / f["path"]).stat().st_size, _sha(staged / "files" / f["path"]))
    assert m["bytes"] == sum(f["size"] for f in m["files"])
    # without --with-videos no video goes up, neither the records' nor the report's copies under media/
    plain = [u.path_in_repo for u in publish.collect([run], report=report)]
    assert any(p.endswith(".mp4") for p in reported) and not any(p.endswith(".mp4") for p in plain)
    assert sorted(plain) == sorted(p for p in paths if not p.endswith(".mp4"))
    # evaluate's push: results and samples only
    assert [u.path_in_repo for u in publish.collect([run])] == [f"runs/{run.name}/results.json",
                                                              f"runs/{run.name}/samples.jsonl"]


def test_push_online_is_one_commit_with_the_hub_client(worldmark_engine_run, monkeypatch):
    run, _ = worldmark_engine_run
    calls = []

    class FakeApi:  # stands in for huggingface_hub.HfApi: what worldgate asks of it, nothing sent
        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id, kw))

        def create_commit(self, repo_id, operations, **kw):
            calls.append(("create_commit", repo_id, [(o.path_in_repo, o.path_or_fileobj) for o in operations], kw))
            return types.SimpleNamespace(commit_url=f"https://hub.example/{repo_id}/commit/1")

    import huggingface_hub
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(publish, "hub_offline", lambda: False)
    r = publish.push_to_hub("lab/wg", publish.collect([run]), private=True)
    assert r == {"url": "https://hub.example/lab/wg/commit/1"}
    assert calls[0] == ("create_repo", "lab/wg", {"repo_type": "dataset", "private": True, "exist_ok": True})
    assert calls[1][2] == [(f"runs/{run.name}/results.json", str(run / "results.json")),
                           (f"runs/{run.name}/samples.jsonl", str(run / "samples.jsonl"))]
    assert calls[1][3]["repo_type"] == "dataset" and "token" not in calls[1][3]  # the client's own credentials


@pytest.mark.parametrize("argv, why", [
    (["--push-to-hub", "not a repo"], "not a repository id"),
    (["--push-to-hub", "noowner"], "give OWNER/NAME"),
    (["--with-videos"], "--with-videos goes with --push-to-hub"),
])
def test_bad_options_fail_before_any_work(worldmark_engine_run, tmp_path, capsys, argv, why):
    run, _ = worldmark_engine_run
    assert main(["report", str(run), "--out", str(tmp_path / "r"), *argv]) == 2
    assert why in capsys.readouterr().err and not (tmp_path / "r").exists()


def _wandb_records(path: Path) -> list:
    """The records of a .wandb file: a 7-byte header (':W&B', magic, version), then LevelDB's log format (32 KiB
    blocks; each chunk a 7-byte header crc32c, length, type 1 full / 2 first / 3 middle / 4 last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    b, pos, out, part = path.read_bytes(), 7, [], b""
    assert b[:4] == b":W&B"
    while pos + 7 <= len(b):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", b[pos:pos + 7])
        chunk, pos = b[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0:
            continue
        part = chunk if kind in (1, 2) else part + chunk
        if kind in (1, 4):
            r = pb.Record()
            r.ParseFromString(part)
            out.append(r)
    return out


def test_log_wandb_offline_writes_the_offline_run(worldmark_engine_run, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    run, res = worldmark_engine_run
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (line,) = publish.log_runs("wandb", [run], project="wg-test")  # what `evaluate/report --log wandb` call
    (f,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    assert line.startswith(f"wandb: {run.name}: {len(publish.summary(res))} numbers -> {f.parent}")
    recs = _wandb_records(f)
    kinds = [r.WhichOneof("record_type") for r in recs]
    assert kinds[:2] == ["header", "run"], kinds
    (r_run,) = [r.run for r in recs if r.WhichOneof("record_type") == "run"]
    assert r_run.project == "wg-test" and r_run.display_name == run.name
    history = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
               for r in recs if r.WhichOneof("record_type") == "history" for i in r.history.item}
    want = publish.summary(res)
    assert len(want) > 3 and {k: history[k] for k in want} == pytest.approx(want)
    config = {i.key: json.loads(i.value_json) for i in r_run.config.update}  # with the run record, or later
    config.update({i.key: json.loads(i.value_json) for r in recs if r.WhichOneof("record_type") == "config"
                   for i in r.config.update})
    assert config["backend"] == res["config"]["backend"] and config["run"] == str(run)
    assert "exit" in kinds  # the run was finished


def test_log_trackio_calls_its_client(worldmark_engine_run, monkeypatch):
    """trackio is not installed here (it pulls gradio): its documented calls on a stand-in module, and the error
    that names the extra when it is absent."""
    run, res = worldmark_engine_run
    monkeypatch.setitem(sys.modules, "trackio", None)
    with pytest.raises(publish.PublishError, match=r"--log trackio needs the trackio package: pip install"):
        publish.log_runs("trackio", [run])
    calls = []
    stub = types.SimpleNamespace(init=lambda **kw: calls.append(("init", kw)), log=lambda d: calls.append(("log", d)),
                                 finish=lambda: calls.append(("finish",)))
    monkeypatch.setitem(sys.modules, "trackio", stub)
    publish.log_runs("trackio", [run], project="p")
    assert [c[0] for c in calls] == ["init", "log", "finish"]
    assert calls[0][1]["project"] == "p" and calls[0][1]["name"] == run.name
    assert calls[1][1] == publish.summary(res)


def test_evaluate_push_offline_stages_the_fresh_results(worldmark_engine_run, tmp_path, monkeypatch, capsys):
    import shutil

    run, _ = worldmark_engine_run
    copy = tmp_path / "wm-run"
    shutil.copytree(run, copy, symlinks=True)  # evaluate rewrites results.json: a copy, scored from its cache
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["evaluate", str(copy), "--rescore", "--no-progress", "--push-to-hub", "lab/wg"]) == 0
    assert "staged in hub-staged/lab__wg with manifest.json" in capsys.readouterr().out
    m = json.loads((tmp_path / "hub-staged" / "lab__wg" / "manifest.json").read_text())
    assert [(f["path"], f["sha256"]) for f in m["files"]] == [
        ("runs/wm-run/results.json", _sha(copy / "results.json")),
        ("runs/wm-run/samples.jsonl", _sha(copy / "samples.jsonl"))]
