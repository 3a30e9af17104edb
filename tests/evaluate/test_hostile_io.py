"""Hostile inputs at the edges of import, export, report and the command line: paths from data stay inside their
folder, nothing is followed through a symbolic link out of a run or a delivery, a FIFO never hangs a command, hard
links never smuggle a file into a report, and every malformed input is one line naming the file and what is wrong."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from worldgate.cli import main
from worldgate.evaluate.report import ReportError, write_report
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.delivery_files import DeliveryError, InteropError
from worldgate.generate.interop import import_worldmark
from worldgate.generate.records import list_records
from worldgate.generate.runner import run_generate
from worldgate.generate.worldmark_export import export_worldmark

QUICK = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]
SECRET = b"TOP-SECRET outside the run\n"


@contextlib.contextmanager
def deadline(seconds=30):
    """A FIFO that is opened blocks for ever: fail the test instead of hanging the suite."""
    def fire(*_):
        raise TimeoutError(f"blocked for {seconds} s (a FIFO was opened?)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A scored two-case Engine run (64x64, 1 s): first-real-000_001 and first-style-001_002."""
    run = tmp_path_factory.mktemp("hostile-io") / "engine"
    assert run_generate("engine", "worldmark-engine", run, limit=2, overrides=QUICK, progress=False).exit_code == 0
    evaluate_run(run, progress=False)
    return run


@pytest.fixture
def secret(tmp_path):
    p = tmp_path / "outside" / "secret.txt"
    p.parent.mkdir()
    p.write_bytes(SECRET)
    return p


def _copy(run, tmp_path, name="run"):
    dst = tmp_path / name
    shutil.copytree(run, dst, symlinks=True)
    return dst


def _no_secret(*roots):
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for f in files:
                p = os.path.join(dirpath, f)
                if os.path.isfile(p) and not os.path.islink(p):
                    with open(p, "rb") as fh:
                        assert SECRET not in fh.read(), p


def _rows(dl):
    return [json.loads(x) for x in (dl / "manifest.jsonl").read_text().splitlines()]


def _write_rows(dl, rows):
    (dl / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


# ------------------------------------------------------------------------------------------------ 1. sidecar paths
def test_import_sidecar_path_outside_the_delivery_is_refused(scored, tmp_path, secret):
    """A manifest row whose worldgate.sidecar is absolute or climbs out with '..' fails its video with a reason;
    nothing of the folder it names is copied."""
    dl = tmp_path / "dl"
    export_worldmark(scored, dl)
    rows = _rows(dl)
    shutil.copy(dl / rows[0]["worldgate"]["sidecar"] / "meta.json", secret.parent / "meta.json")
    rows[0]["worldgate"]["sidecar"] = str(secret.parent)  # absolute
    rows[1]["worldgate"]["sidecar"] = "../outside"  # escaping
    _write_rows(dl, rows)
    back = tmp_path / "back"
    r = import_worldmark(dl, back)
    assert not r.imported and len(r.failed) == 2
    for row in rows:
        why = r.failed[row["video"]]
        assert "outside the delivery" in why and repr(row["worldgate"]["sidecar"]) in why, why
    _no_secret(back)


def test_import_sidecar_links_and_special_files_are_refused(scored, tmp_path, secret):
    """A sidecar holding a link to a file, a link to a folder (/etc), a FIFO, or a sidecar folder that is itself a
    link: each record fails naming the entry; nothing is followed or copied, nothing hangs."""
    dl = tmp_path / "dl"
    export_worldmark(scored, dl)
    a, b = sorted(p.name for p in list_records(scored))
    (dl / "worldgate" / a / "linked.txt").symlink_to(secret)
    (dl / "worldgate" / a / "native" / "etcdir").symlink_to(secret.parent, target_is_directory=True)
    os.mkfifo(dl / "worldgate" / b / "native" / "pipe.json")
    back = tmp_path / "back"
    with deadline():
        r = import_worldmark(dl, back)
    assert not r.imported
    assert "symbolic link" in r.failed[a] and f"{a}/" in r.failed[a], r.failed[a]
    assert "FIFO" in r.failed[b] and "pipe.json" in r.failed[b], r.failed[b]
    _no_secret(back)
    # the sidecar folder itself a link to a copy outside the delivery
    outside = tmp_path / "outside-side"
    shutil.move(str(dl / "worldgate" / b), outside)
    (outside / "native" / "pipe.json").unlink()
    (dl / "worldgate" / b).symlink_to(outside, target_is_directory=True)
    r = import_worldmark(dl, tmp_path / "back2")
    assert b not in r.imported and "symbolic link" in r.failed[_video(scored, b)]


def _video(run, cid):
    """The delivery path of a record's video."""
    t = json.loads((run / cid / "meta.json").read_text())["case"]["tags"]
    return f"{t['domain']}/{t['view']}/ENGINE/{int(t['image']):03d}_{int(t['action_id']):03d}.mp4"


# ------------------------------------------------------------------------------------------- 2. videos, manifest
def _foreign(run, dl, tag="OTHER"):
    export_worldmark(run, dl, tag=tag)
    shutil.rmtree(dl / "worldgate")
    (dl / "manifest.jsonl").unlink()
    return dl


def test_import_refuses_fifo_and_linked_videos(scored, tmp_path, secret):
    dl = _foreign(scored, tmp_path / "dl")
    vids = sorted(dl.glob("*/*/OTHER/*.mp4"))
    assert len(vids) == 2
    outside_video = tmp_path / "outside" / "v.mp4"
    shutil.copy(vids[1], outside_video)
    vids[0].unlink()
    os.mkfifo(vids[0])
    vids[1].unlink()
    vids[1].symlink_to(outside_video)
    with deadline():
        r = import_worldmark(dl, tmp_path / "back")
    rel0, rel1 = (v.relative_to(dl).as_posix() for v in vids)
    assert not r.imported
    assert rel0 in r.failed[rel0] and "FIFO" in r.failed[rel0], r.failed
    assert rel1 in r.failed[rel1] and "symbolic link" in r.failed[rel1], r.failed
    # a MODEL folder that is a link to a folder outside the delivery is not followed either
    dl2 = _foreign(scored, tmp_path / "dl2")
    shutil.move(str(dl2 / "real" / "first" / "OTHER"), tmp_path / "elsewhere")
    (dl2 / "real" / "first" / "OTHER").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    r = import_worldmark(dl2, tmp_path / "back2")
    assert r.imported == ["OTHER-first-style-001_002"] and "symbolic link" in r.failed["real/first/OTHER"]


def test_import_fifo_or_broken_manifest_is_an_error(scored, tmp_path):
    dl = _foreign(scored, tmp_path / "dl")
    os.mkfifo(dl / "manifest.jsonl")
    with deadline(), pytest.raises(InteropError, match=r"manifest\.jsonl is a FIFO, not a regular file"):
        import_worldmark(dl, tmp_path / "back")
    (dl / "manifest.jsonl").unlink()
    (dl / "manifest.jsonl").write_text('{"video": "real/first/OTHER/000_001.mp4"}\n{"video": \n')
    with pytest.raises(InteropError, match=r"manifest\.jsonl line 2 is not valid JSON"):
        import_worldmark(dl, tmp_path / "back")
    (dl / "manifest.jsonl").write_bytes(b'{"video": "\xff"}\n')
    with pytest.raises(InteropError, match=r"manifest\.jsonl is not UTF-8"):
        import_worldmark(dl, tmp_path / "back")
    (dl / "manifest.jsonl").write_text('[1]\n')
    assert main(["import", str(dl), "--out", str(tmp_path / "back")]) == 2


# ------------------------------------------------------------------------------------------------ 3. report media
def test_report_refuses_hard_linked_media_and_copies_its_own(scored, tmp_path, secret):
    """A record video hard-linked to a text file is not published (its sha256 is not the record's); the report's
    media are copies (one link each), so editing them never edits the run; a video with other hard links and no
    recorded sha256 is refused too."""
    run = _copy(scored, tmp_path)
    a, b = sorted(p.name for p in list_records(run))
    (run / a / "video.mp4").unlink()
    os.link(secret, run / a / "video.mp4")
    out = tmp_path / "rep"
    t0 = time.perf_counter()
    write_report([run], out)
    took = time.perf_counter() - t0
    _no_secret(out)
    data = json.loads((out / "index.html").read_text().split('type="application/json">')[1].split("</script>")[0])
    ea, eb = data["cases"][a]["runs"]["run"], data["cases"][b]["runs"]["run"]
    assert ea["video"] is None and any("not the record's video" in n for n in ea["notes"]), ea["notes"]
    media = out / eb["video"]
    assert media.is_file() and os.stat(media).st_nlink == 1 and os.stat(run / b / "video.mp4").st_nlink == 1
    media.write_bytes(b"edited")
    assert (run / b / "video.mp4").read_bytes() != b"edited"
    assert took < 30, took  # copying and hashing the media keeps the report quick
    # no sha256 recorded and another hard link: refused
    meta = json.loads((run / b / "meta.json").read_text())
    del meta["files"]["video.mp4"]["sha256"]
    (run / b / "meta.json").write_text(json.dumps(meta))
    os.link(run / b / "video.mp4", tmp_path / "other-link.mp4")
    write_report([run], tmp_path / "rep2")
    data = json.loads((tmp_path / "rep2" / "index.html").read_text().split('type="application/json">')[1]
                      .split("</script>")[0])
    eb = data["cases"][b]["runs"]["run"]
    assert eb["video"] is None and any("hard links" in n for n in eb["notes"]), eb["notes"]


# ----------------------------------------------------------------------------------------------------- 4. export
def test_export_refuses_a_linked_native_folder(scored, tmp_path, secret):
    run = _copy(scored, tmp_path)
    a, b = sorted(p.name for p in list_records(run))
    shutil.rmtree(run / a / "native")
    (run / a / "native").symlink_to(secret.parent, target_is_directory=True)
    dl = tmp_path / "dl"
    r = export_worldmark(run, dl)
    assert r.exported == [b] and "native" in r.skipped[a] and "symbolic link" in r.skipped[a], r.skipped
    _no_secret(dl)


def test_export_never_writes_through_a_linked_delivery_folder(scored, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for sub in ("real", "worldgate"):
        dl = tmp_path / f"dl-{sub}"
        dl.mkdir()
        (dl / sub).symlink_to(elsewhere, target_is_directory=True)
        with pytest.raises(DeliveryError, match=rf"dl-{sub}/{sub} is a symbolic link"):
            export_worldmark(scored, dl)
        assert not any(elsewhere.iterdir())
    # a planted link where a video or the manifest goes is replaced, not written through
    dl = tmp_path / "dl"
    export_worldmark(scored, dl)
    target = tmp_path / "target.txt"
    target.write_text("keep")
    v = next(dl.glob("real/first/ENGINE/*.mp4"))
    for p in (v, dl / "manifest.jsonl"):
        p.unlink()
        p.symlink_to(target)
    export_worldmark(scored, dl)
    assert target.read_text() == "keep" and not v.is_symlink() and not (dl / "manifest.jsonl").is_symlink()
    # the results tree is never written through a link either
    (dl / "results").symlink_to(elsewhere, target_is_directory=True)
    assert main(["export", str(scored), "--out", str(dl)]) == 2
    assert not any(elsewhere.iterdir())


def test_export_without_cached_features_is_a_user_error(scored, tmp_path, capsys):
    run = _copy(scored, tmp_path)
    shutil.rmtree(run / ".features")
    assert main(["export", str(run), "--out", str(tmp_path / "dl")]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and f"worldgate evaluate {run}" in err and len(err.strip().splitlines()) == 1


def test_export_skips_fifo_meta_and_trajectory_with_their_reason(scored, tmp_path, capsys):
    run = _copy(scored, tmp_path)
    a, b = sorted(p.name for p in list_records(run))
    (run / a / "meta.json").unlink()
    os.mkfifo(run / a / "meta.json")
    (run / b / "trajectory.json").unlink()
    os.mkfifo(run / b / "trajectory.json")
    with deadline():
        rc = main(["export", str(run), "--out", str(tmp_path / "dl")])
    out = capsys.readouterr().out
    assert rc == 1 and "exported 0 records" in out and "(2 skipped)" in out, out
    assert f"skipped {a}: meta.json is a FIFO" in out and f"skipped {b}: trajectory.json is a FIFO" in out, out


# ------------------------------------------------------------------------------------------------ 5. report input
def _report_err(run, tmp_path, capsys):
    with deadline():
        rc = main(["report", str(run), "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert rc == 2 and "internal error" not in err and len(err.strip().splitlines()) == 1, (rc, err)
    return err


@pytest.mark.parametrize("case, expect", [
    ("results-list", "results.json: holds a JSON list, not an object"),
    ("metrics-list", 'results.json: "metrics" is a JSON list'),
    ("samples-list", "samples.jsonl line 1 holds a JSON list, not a sample object"),
    ("results-truncated", "results.json is not valid JSON"),
    ("samples-not-utf8", "samples.jsonl is not UTF-8 text"),
    ("results-fifo", "results.json is a FIFO, not a regular file"),
])
def test_report_input_errors_name_the_file(scored, tmp_path, capsys, case, expect):
    run = _copy(scored, tmp_path)
    res, smp = run / "results.json", run / "samples.jsonl"
    if case == "results-list":
        res.write_text("[1, 2]")
    elif case == "metrics-list":
        res.write_text(json.dumps(dict(json.loads(res.read_text()), metrics=[1])))
    elif case == "samples-list":
        smp.write_text("[1]\n" + smp.read_text())
    elif case == "results-truncated":
        res.write_text(res.read_text()[:100])
    elif case == "samples-not-utf8":
        smp.write_bytes(b"\xff\xfe" + smp.read_bytes())
    elif case == "results-fifo":
        res.unlink()
        os.mkfifo(res)
    err = _report_err(run, tmp_path, capsys)
    assert str(run) in err and expect in err, err
    if case != "results-fifo":
        with pytest.raises(ReportError):
            write_report([run], tmp_path / "rep2")


# ----------------------------------------------------------------------------------------------- 8. --out a file
@pytest.mark.parametrize("cmd", ["evaluate", "report", "import", "export"])
def test_out_that_is_a_file_is_refused_up_front(scored, tmp_path, capsys, cmd):
    run = _copy(scored, tmp_path)
    if cmd == "evaluate":  # nothing is scored before the refusal
        (run / "results.json").unlink()
    src = run
    if cmd == "import":
        src = tmp_path / "dl"
        export_worldmark(scored, src)
    afile = tmp_path / "afile"
    afile.write_text("x")
    t0 = time.perf_counter()
    rc = main([cmd, str(src), "--out", str(afile)])
    err = capsys.readouterr().err
    assert rc == 2 and f"--out {afile} is a file: give a folder" in err, err
    assert "Errno" not in err and afile.read_text() == "x"
    if cmd == "evaluate":
        assert not (run / "results.json").exists() and time.perf_counter() - t0 < 10


# ------------------------------------------------------------------------------------------------- 9. broken pipe
def test_broken_pipe_ends_quietly(tmp_path):
    """`worldgate ... | head -1`: the reader leaves before the output is written; no "Broken pipe" error, exit 141."""
    env = dict(os.environ, HOME=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "worldgate", "list", "trajectories"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # the reader is gone before the command prints
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and "Broken pipe" not in err and not err.strip(), err


# ------------------------------------------------------------------------------------------- 10. MODEL upper case
def test_lower_case_model_folder_is_refused_with_the_spec(scored, tmp_path):
    dl = _foreign(scored, tmp_path / "dl", tag="ENGINE")
    for domain in ("real", "style"):
        (dl / domain / "first" / "ENGINE").rename(dl / domain / "first" / "engine")
    r = import_worldmark(dl, tmp_path / "back")
    assert not r.imported and len(r.failed) == 2
    why = next(iter(r.failed.values()))
    assert "MODEL folder 'engine' is not upper case" in why and "rename the folder to 'ENGINE'" in why, why


# ------------------------------------------------------------------------- results root: --videos stay inside
def test_results_root_videos_are_not_followed_through_links(scored, tmp_path):
    """``import ROOT --videos V``: a MODEL folder of V that is a link (out of V), or a video that is a FIFO, is not a
    video of the root (reported missing), never followed or opened."""
    from worldgate.evaluate.worldmark.imported import import_worldmark_results

    dl = tmp_path / "dl"
    assert main(["export", str(scored), "--out", str(dl)]) == 0
    shutil.move(str(dl / "real" / "first" / "ENGINE"), tmp_path / "elsewhere")
    (dl / "real" / "first" / "ENGINE").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    fifo = next((dl / "style" / "first" / "ENGINE").glob("*.mp4"))
    fifo.unlink()
    os.mkfifo(fifo)
    with deadline():
        r = import_worldmark_results(dl / "results", tmp_path / "imp", videos=dl)
    assert r.records["ENGINE"] == 0 and len(r.missing_videos) == 2, (r.records, r.missing_videos)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_a_fifo_in_a_results_root_is_an_error_not_a_hang(tmp_path):
    """read_results_tree reads regular files only, bounded: a FIFO shard (or a link to /dev/zero) in a WorldMark
    results root hung `worldgate import`; a shard that is a JSON list is named too."""
    import subprocess
    import sys

    from worldgate.evaluate.worldmark.master import read_results_tree, result_dirs

    d = result_dirs(str(tmp_path), "_real_first")
    for k in ("flow", "consistency", "c3", "quality"):
        os.makedirs(d[k], exist_ok=True)
    os.mkfifo(os.path.join(d["consistency"], "c1c2_v2_c1new_shard0of1.json"))
    code = ("import sys\nfrom worldgate.evaluate.worldmark.master import read_results_tree\n"
            "try:\n    read_results_tree(sys.argv[1], '_real_first')\nexcept ValueError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert "c1c2_v2_c1new_shard0of1.json" in r.stdout and "FIFO" in r.stdout, (r.stdout, r.stderr)
    os.unlink(os.path.join(d["consistency"], "c1c2_v2_c1new_shard0of1.json"))
    with open(os.path.join(d["c3"], "omega_c3_1s_shard0of1.json"), "w") as f:
        f.write("[1, 2]")
    with pytest.raises(ValueError, match="a JSON list, not an object"):
        read_results_tree(str(tmp_path), "_real_first")
