"""Every writer confined, wired in (issue 29, item 2): evaluate's results.json / samples.jsonl / history, the
leaderboard of ``evaluate ... --out`` and every file of ``report --out`` go through generate/outputs.OutputFolder, so
nothing is written through a link planted in the output folder, and a reused report folder is cleaned of the files an
earlier report wrote there (a run no longer in it), and only of those."""

import json

import pytest

from worldgate.evaluate.report import write_report
from worldgate.evaluate.results import read_results, write_results
from worldgate.evaluate.runner import write_leaderboard
from worldgate.generate.outputs import MANIFEST


def _summary(mean, n=1, records=1):
    return {"mean": mean, "std": 0.0, "n": n, "coverage": n / records, "unavailable": {}, "ci": None}


def _results(run, value):
    return {"run": str(run), "metrics": {"local_memory": _summary(value)}, "records": 1, "errors": {},
            "caveats": {}, "backends": {"flow": {"backend": "classical", "key": "flow@4-classical"}},
            "config": {"backend": "classical", "params": {}, "run_config": None},
            "features": {"computed": 0, "cached": 0}, "seconds": 1.5,
            "protocol": {"status": "complete", "differences": [], "settings": {}, "fingerprint": "f", "cases": 1,
                         "case_set": "c"}}


def _run(root, name, value, video=b"not really a video"):
    """A scored run of one case whose record folder holds a video the report copies into media/."""
    run = root / name
    (run / "c1").mkdir(parents=True)
    (run / "c1" / "video.mp4").write_bytes(video)
    sample = {"case": "c1", "tags": {}, "scores": {"local_memory": value}, "unavailable": {}, "detail": {},
              "timing": None}
    write_results(run, _results(run, value), [sample], history=False)
    return run


@pytest.fixture
def secret(tmp_path):
    p = tmp_path / "outside" / "secret.txt"
    p.parent.mkdir()
    p.write_text("keep")
    return p


def test_report_never_writes_through_a_link_planted_in_its_folder(tmp_path, secret):
    run = _run(tmp_path, "alpha", 50.0)
    out = tmp_path / "rep"
    out.mkdir()
    for name in ("index.html", "comparability.md", "worldmark.md"):
        (out / name).symlink_to(secret)
    written = write_report([run], out)
    assert secret.read_text() == "keep"  # the target is never written
    for name, start in (("index.html", "<!doctype html>"), ("comparability.md", "# Comparability")):
        assert not (out / name).is_symlink() and (out / name).read_text().startswith(start), name
    assert "index.html" in written.values() and (out / "media/00-alpha/c1.mp4").read_bytes() == b"not really a video"


def test_report_refuses_a_media_folder_that_is_a_link(tmp_path, secret):
    run = _run(tmp_path, "alpha", 50.0)
    out = tmp_path / "rep"
    out.mkdir()
    (out / "media").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(OSError, match=r"media is a symbolic link .*not a real folder"):
        write_report([run], out)
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret.txt"]  # nothing copied out of the folder


def test_reused_report_folder_loses_a_dropped_runs_files_and_keeps_the_users(tmp_path):
    a, b = _run(tmp_path, "alpha", 50.0), _run(tmp_path, "beta", 60.0, video=b"beta's video")
    out = tmp_path / "rep"
    write_report([a, b], out)
    stale = out / "media/01-beta/c1.mp4"
    assert stale.read_bytes() == b"beta's video"
    (out / "my-notes.md").write_text("mine")
    (out / "media/01-beta/mine.txt").write_text("also mine")
    write_report([a], out)
    assert not stale.exists()  # the page's video of a run no longer in the report is gone
    assert (out / "my-notes.md").read_text() == "mine" and (out / "media/01-beta/mine.txt").read_text() == "also mine"
    listed = json.loads((out / MANIFEST).read_text())["report"]
    assert "media/00-alpha/c1.mp4" in listed and "index.html" in listed and "media/01-beta/c1.mp4" not in listed
    assert "beta" not in (out / "index.html").read_text()


def test_leaderboard_refuses_a_planted_link_and_writes_nothing_through_it(tmp_path, secret):
    a, b = _run(tmp_path, "alpha", 50.0), _run(tmp_path, "beta", 60.0)
    res = [read_results(a).to_dict(), read_results(b).to_dict()]
    out = tmp_path / "lb"
    out.mkdir()
    (out / "leaderboard.csv").symlink_to(secret)
    with pytest.raises(OSError, match=r"leaderboard.csv is a symbolic link"):
        write_leaderboard(res, out)
    assert secret.read_text() == "keep"
    (out / "leaderboard.csv").unlink()
    (out / "leaderboard.md").symlink_to(secret)
    with pytest.raises(OSError, match=r"leaderboard.md is a symbolic link"):
        write_leaderboard(res, out)
    assert secret.read_text() == "keep"
    (out / "leaderboard.md").unlink()
    csv, md = write_leaderboard(res, out)
    assert "alpha" in csv.read_text() and "| beta | 1 | complete |" in md.read_text()


def test_results_never_written_through_links_in_the_run(tmp_path, secret):
    run = _run(tmp_path, "alpha", 50.0)
    (run / "results.json").unlink()
    (run / "results.json").symlink_to(secret)
    with pytest.raises(OSError, match=r"results.json is a symbolic link"):
        write_results(run, _results(run, 51.0), [], history=False)
    assert secret.read_text() == "keep"
    (run / "results.json").unlink()
    (run / "results").symlink_to(secret.parent, target_is_directory=True)  # the history folder: skipped, not followed
    write_results(run, _results(run, 52.0), [], history=True)
    assert read_results(run).to_dict()["metrics"]["local_memory"]["mean"] == 52.0
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret.txt"]
