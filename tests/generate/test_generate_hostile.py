"""generate under faults and hostile run folders: a full disk stops the run naming the folder, two generators on one
folder never write a case twice, a record JSON with an absurd integer is a clear error, and a symlinked record folder
is refused on resume while the other cases go on."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest

from worldgate import cli
from worldgate.generate import records, runner
from worldgate.generate.records import (
    CLAIM_PREFIX,
    RecordError,
    claim_case,
    is_complete,
    list_records,
    load_record,
    read_meta_reason,
    read_record_json,
)
from worldgate.generate.runner import DiskFullError, run_generate
from worldgate.generate.video import EncoderError, VideoWriter, sha256_file
from worldgate.trajectories.suites import load_suite

QUICK = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]
IDS = [c.id for c in load_suite("worldmark-engine")]
ENV = dict(os.environ, PYTHONUNBUFFERED="1")


def _jobs(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "jobs.jsonl").read_text().splitlines()]


def _leftovers(out: Path) -> list[str]:
    """Temporary record folders and claim files left in a run."""
    return sorted(p.name for p in out.iterdir() if p.name.startswith((".tmp-", CLAIM_PREFIX, ".run.json.")))


# ------------------------------------------------------------------------------------------------------ full disk
@pytest.fixture
def full_video(monkeypatch, tmp_path):
    """Every record video goes to /dev/full (through a .mp4 link, so ffmpeg picks the mp4 muxer): the real encoder
    meets a real ENOSPC. Returns the list of videos that were started."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    link = tmp_path / "full.mp4"
    link.symlink_to("/dev/full")
    started = []

    class FullWriter(VideoWriter):
        def __init__(self, path, *a, **kw):
            started.append(Path(path))
            super().__init__(link, *a, **kw)

    monkeypatch.setattr(runner, "VideoWriter", FullWriter)  # the rollout loop writes the videos
    return started


def test_encoder_disk_full_is_enospc_naming_the_file(full_video, tmp_path):
    w = runner.VideoWriter(tmp_path / "v.mp4", 64, 64, 16.0)
    with pytest.raises(OSError) as e:
        for i in range(40):
            w.write(np.full((4, 64, 64, 3), i, np.uint8))
        w.close()
    assert e.value.errno == errno.ENOSPC
    assert "no space left on device" in str(e.value).lower() and str(tmp_path / "full.mp4") in str(e.value)


def test_disk_full_in_the_encoder_stops_the_run(full_video, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(DiskFullError) as e:
        run_generate("engine", "worldmark-engine", out, limit=4, overrides=QUICK, progress=False)
    msg = str(e.value)
    assert msg.startswith(f"no space left on device in {out}: writing the record of case {IDS[0]} failed")
    assert "video encoder" in msg and "not a readable video" not in msg and "3 case(s) not tried" in msg
    assert "\n" not in msg and e.value.errno == errno.ENOSPC
    assert len(full_video) == 1  # the remaining cases were never tried
    assert [(j["case"], j["status"]) for j in _jobs(out)] == [(IDS[0], "failed")]
    assert list_records(out) == [] and not (out / IDS[0]).exists() and _leftovers(out) == []


def _enospc(name):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)


def test_disk_full_writing_poses_keeps_complete_records_only(monkeypatch, tmp_path):
    """The first case is written whole; np.save of the second's poses meets a full disk: the run stops there."""
    real_save, calls = np.save, []

    def save(path, *a, **kw):
        if isinstance(path, (str, Path)) and Path(path).name == "poses.npy":
            calls.append(Path(path))
            if len(calls) == 2:
                raise _enospc(str(path))
        return real_save(path, *a, **kw)

    monkeypatch.setattr(records.np, "save", save)
    out = tmp_path / "run"
    with pytest.raises(DiskFullError) as e:
        run_generate("engine", "worldmark-engine", out, limit=4, overrides=QUICK, progress=False)
    assert f"case {IDS[1]} failed (No space left on device: {out.resolve()}/.tmp-{IDS[1]}-" in str(e.value)
    assert "poses.npy" in str(e.value) and "2 case(s) not tried" in str(e.value)
    assert len(calls) == 2
    assert [p.name for p in list_records(out)] == [IDS[0]]
    assert load_record(out / IDS[0])["poses"].shape == (load_record(out / IDS[0])["meta"]["achieved"]["frames"], 4, 4)
    assert not (out / IDS[1]).exists() and _leftovers(out) == []
    assert [(j["case"], j["status"]) for j in _jobs(out)] == [(IDS[0], "ok"), (IDS[1], "failed")]


def test_disk_full_writing_meta_json_leaves_no_record(monkeypatch, tmp_path):
    real = records.RecordWriter.write_json

    def write_json(self, name, obj):
        if name == "meta.json":
            raise _enospc(str(self.path(name)))
        return real(self, name, obj)

    monkeypatch.setattr(records.RecordWriter, "write_json", write_json)
    out = tmp_path / "run"
    with pytest.raises(DiskFullError, match=r"^no space left on device in .*meta\.json\); stopped with 1 case"):
        run_generate("engine", "worldmark-engine", out, limit=2, overrides=QUICK, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["jobs.jsonl", "run.json"]


def test_disk_full_through_the_cli(full_video, tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli.main(["generate", "--model", "engine", "--suite", "worldmark-engine", "--limit", "3", "--out", str(out),
                   "--no-progress", *QUICK])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == cli.EXIT_INPUT == 2
    assert len(err) == 1 and err[0].startswith(f"error: no space left on device in {out}: ")
    assert "free space there" in err[0] and "2 case(s) not tried" in err[0]
    assert len(full_video) == 1 and list_records(out) == []


def test_disk_full_taking_a_claim_stops_the_run(monkeypatch, tmp_path):
    def no_room(run_dir, case_id):
        raise _enospc(str(Path(run_dir) / f"{CLAIM_PREFIX}{case_id}"))

    monkeypatch.setattr(runner, "claim_case", no_room)
    out = tmp_path / "run"
    with pytest.raises(DiskFullError) as e:
        run_generate("engine", "worldmark-engine", out, limit=2, overrides=QUICK, progress=False)
    assert str(e.value).startswith(f"no space left on device in {out}: claiming case {IDS[0]} failed (No space left "
                                   f"on device: {out}/{CLAIM_PREFIX}{IDS[0]}); stopped with 2 case(s) not tried;")
    assert list_records(out) == []


def test_disk_full_writing_jobs_log_does_not_mask_the_error(monkeypatch, full_video, tmp_path):
    real_open = os.open

    def no_room_for_logs(path, flags, *a):
        if str(path).endswith("jobs.jsonl"):
            raise _enospc(str(path))
        return real_open(path, flags, *a)

    monkeypatch.setattr(os, "open", no_room_for_logs)
    with pytest.raises(DiskFullError, match="video encoder"):
        run_generate("engine", "worldmark-engine", tmp_path / "run", limit=2, overrides=QUICK, progress=False)


def test_encoder_failure_other_than_disk_names_the_file(tmp_path):
    bad = tmp_path / "missing-folder" / "v.mp4"
    w = VideoWriter(bad, 64, 64, 16.0)
    with pytest.raises(EncoderError) as e:
        for i in range(40):
            w.write(np.full((4, 64, 64, 3), i, np.uint8))
        w.close()
    assert str(bad) in str(e.value) and "exit status" in str(e.value)


def test_video_writer_bytes_match_imageio_ffmpeg(tmp_path):
    """VideoWriter runs ffmpeg itself (to check its exit status) with imageio_ffmpeg's command (and one encoder
    thread): same bytes."""
    frames = np.random.default_rng(3).integers(0, 255, (12, 48, 80, 3), dtype=np.uint8)
    for fps in (16.0, 24000 / 1001):
        w = VideoWriter(tmp_path / "ours.mp4", 80, 48, fps)
        w.write(frames)
        w.close()
        gen = imageio_ffmpeg.write_frames(str(tmp_path / "ref.mp4"), (80, 48), fps=float(fps), codec="libx264",
                                          pix_fmt_out="yuv420p", quality=None, macro_block_size=2,
                                          output_params=["-crf", "18", "-preset", "medium", "-threads", "1"], ffmpeg_log_level="error")
        gen.send(None)
        for f in frames:
            gen.send(np.ascontiguousarray(f))
        gen.close()
        assert sha256_file(tmp_path / "ours.mp4") == sha256_file(tmp_path / "ref.mp4")


# ------------------------------------------------------------------------------------------ concurrent generators
HOLDER = """
import sys, time
from worldgate.generate.records import claim_case
claims = [claim_case(sys.argv[1], cid) for cid in sys.argv[2:]]
assert all(c is not None for c, _ in claims), claims
print("held", flush=True)
sys.stdin.read()
"""


def test_a_case_claimed_by_a_live_process_is_skipped_then_reclaimed_when_it_dies(tmp_path, caplog):
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), IDS[0]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "held"
        claim, owner = claim_case(out, IDS[0])
        assert claim is None and owner.startswith(f"process {holder.pid} on ")
        caplog.set_level("WARNING", "worldgate.generate")
        r = run_generate("engine", "worldmark-engine", out, limit=3, overrides=QUICK, progress=False)
        assert r.exit_code == 0 and r.done == IDS[1:3] and list(r.claimed) == [IDS[0]]
        assert f"case {IDS[0]} is being written by process {holder.pid} on " in caplog.text
        assert not (out / IDS[0]).exists()
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # dies holding the claim: its file stays, its lock goes
        holder.wait()
    assert (out / f"{CLAIM_PREFIX}{IDS[0]}").exists()
    r = run_generate("engine", "worldmark-engine", out, limit=3, overrides=QUICK, progress=False)
    assert r.done == [IDS[0]] and r.claimed == {} and sorted(r.skipped) == sorted(IDS[1:3])
    assert [p.name for p in list_records(out)] == sorted(IDS[:3]) and _leftovers(out) == []


def test_a_stale_claim_file_is_taken_and_removed(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / f"{CLAIM_PREFIX}{IDS[0]}").write_text(json.dumps({"pid": 999999999, "host": "x", "since": "then"}))
    claim, owner = claim_case(out, IDS[0])
    assert owner is None and claim is not None
    assert json.loads((out / f"{CLAIM_PREFIX}{IDS[0]}").read_text())["pid"] == os.getpid()
    again, owner = claim_case(out, IDS[0])  # held: by this very process, through another descriptor
    assert again is None and owner.startswith(f"process {os.getpid()} on ")
    claim.release()
    assert _leftovers(out) == []


def test_two_concurrent_generators_render_each_case_once(tmp_path):
    out = tmp_path / "run"
    n = 8
    cmd = [sys.executable, "-m", "worldgate", "generate", "--model", "engine", "--suite", "worldmark-engine",
           "--limit", str(n), "--out", str(out), "--no-progress", *QUICK]
    procs = [subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    res = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for stdout, stderr, rc in res:
        assert rc == 0, stderr
    rendered = [j["case"] for j in _jobs(out) if j["status"] == "ok"]
    assert sorted(rendered) == sorted(IDS[:n])  # every case exactly once over both processes
    assert {j["status"] for j in _jobs(out)} == {"ok"}
    generated = [int(stdout.split()[1].rstrip(",")) for stdout, _, _ in res]
    assert sum(generated) == n
    assert [p.name for p in list_records(out)] == sorted(IDS[:n]) and _leftovers(out) == []
    assert all(is_complete(out / cid) for cid in IDS[:n])
    for _, stderr, _ in res:  # a case the other process held is said so, never rendered
        for line in stderr.splitlines():
            assert "is being written by process" in line, line


# ------------------------------------------------------------------------------------------- hostile record JSON
def test_giant_integer_in_a_record_json_is_a_record_error(tmp_path):
    p = tmp_path / "meta.json"
    p.write_text('{"kind": "rollout", "seed": 1' + "0" * 5000 + "}")
    with pytest.raises(RecordError) as e:
        read_record_json(p)
    assert str(e.value).startswith("meta.json holds a number too long to be a record's value (Exceeds the limit")
    assert "rewrite the record" in str(e.value) and "\n" not in str(e.value)
    meta, why = read_meta_reason(tmp_path)
    assert meta is None and why == str(e.value)


def test_resume_over_a_giant_integer_meta_rewrites_that_record(tmp_path):
    out = tmp_path / "run"
    assert run_generate("engine", "worldmark-engine", out, limit=2, overrides=QUICK, progress=False).exit_code == 0
    (out / IDS[0] / "meta.json").write_text('{"kind": "rollout", "complete": true, "seed": ' + "9" * 5000 + "}")
    assert not is_complete(out / IDS[0])
    with pytest.raises(FileNotFoundError, match="meta.json holds a number too long"):
        load_record(out / IDS[0])
    r = run_generate("engine", "worldmark-engine", out, limit=2, overrides=QUICK, progress=False)
    assert r.done == [IDS[0]] and r.skipped == [IDS[1]] and r.exit_code == 0
    assert load_record(out / IDS[0])["meta"]["seed"] == 0


# --------------------------------------------------------------------------------------- symlinked record folders
def test_resume_refuses_a_symlinked_record_folder_and_goes_on(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_generate("engine", "worldmark-engine", out, limit=2, overrides=QUICK, progress=False).exit_code == 0
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(out / IDS[0]), elsewhere)
    (out / IDS[0]).symlink_to(elsewhere, target_is_directory=True)
    before = {p.name: sha256_file(p) for p in elsewhere.iterdir() if p.is_file()}

    r = run_generate("engine", "worldmark-engine", out, limit=3, overrides=QUICK, progress=False)
    assert list(r.refused) == [IDS[0]] and r.done == [IDS[2]] and r.skipped == [IDS[1]] and r.exit_code == 1
    why = r.refused[IDS[0]]
    assert why.startswith(f"the record folder {out.resolve() / IDS[0]} is a symbolic link (to {elsewhere})")
    assert "remove the link" in why and r.failed[IDS[0]] == f"refused: {why}"
    assert {p.name: sha256_file(p) for p in elsewhere.iterdir() if p.is_file()} == before  # never written through
    assert (out / IDS[0]).is_symlink()
    assert ("refused", why) == [(j["status"], j.get("error")) for j in _jobs(out) if j["case"] == IDS[0]][-1]

    rc = cli.main(["generate", "--model", "engine", "--suite", "worldmark-engine", "--limit", "3", "--out", str(out),
                   "--no-progress", *QUICK])
    cap = capsys.readouterr()
    assert rc == 1 and "generated 0, skipped 2 complete, failed 1" in cap.out
    assert f"FAILED {IDS[0]}: refused: the record folder {out.resolve() / IDS[0]} is a symbolic link" in cap.err


def test_a_symlink_to_a_record_inside_the_run_is_refused_too(tmp_path):
    out = tmp_path / "run"
    assert run_generate("engine", "worldmark-engine", out, limit=1, overrides=QUICK, progress=False).exit_code == 0
    (out / IDS[1]).symlink_to(out / IDS[0], target_is_directory=True)
    r = run_generate("engine", "worldmark-engine", out, limit=2, overrides=QUICK, progress=False)
    assert list(r.refused) == [IDS[1]] and r.skipped == [IDS[0]]
    with pytest.raises(RecordError, match="is a symbolic link"):
        records.RecordWriter(out, IDS[1])
