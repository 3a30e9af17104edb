"""Every writer confined (issue 29, item 2): generate/outputs.py writes into an output folder without following a link
at any component, replaces atomically, refuses a target that is a link, and cleans a reused folder of its own previous
outputs only."""

import json
import os

import pytest

from worldgate.generate.outputs import MANIFEST, OutputError, OutputFolder, write_text


@pytest.fixture
def secret(tmp_path):
    p = tmp_path / "outside" / "secret.txt"
    p.parent.mkdir()
    p.write_text("keep")
    return p


def test_writes_land_inside_atomically_and_leave_no_temporary(tmp_path):
    o = OutputFolder(tmp_path / "out")
    o.write_text("a/b/c.txt", "one")
    o.write_text("a/b/c.txt", "two")
    assert (tmp_path / "out/a/b/c.txt").read_text() == "two"
    assert os.listdir(tmp_path / "out/a/b") == ["c.txt"]
    for bad in ("../x", "/etc/x", "a/../../x", "", "a/./b"):
        with pytest.raises(OutputError, match="not a file name inside"):
            o.write_text(bad, "x")


def test_a_planted_link_is_refused_at_every_component(tmp_path, secret):
    out = tmp_path / "out"
    out.mkdir()
    (out / "index.html").symlink_to(secret)
    with pytest.raises(OutputError, match=r"index.html is a symbolic link \(to .*secret.txt\)"):
        write_text(out, "index.html", "<html>")
    assert secret.read_text() == "keep"
    (out / "cases").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(OutputError, match="cases is a symbolic link .*not a real folder"):
        write_text(out, "cases/x.html", "x")
    assert os.listdir(secret.parent) == ["secret.txt"]
    # a link replaced, not followed, where the writer owns the folder (export)
    OutputFolder(out, replace_links=True).write_text("index.html", "new")
    assert not (out / "index.html").is_symlink() and secret.read_text() == "keep"
    os.mkfifo(out / "fifo")
    with pytest.raises(OutputError, match="a FIFO, not a regular file"):
        write_text(out, "fifo", "x")


def test_an_interrupted_write_keeps_the_previous_file(tmp_path):
    o = OutputFolder(tmp_path)
    o.write_text("results.json", "old")

    def half(f):
        f.write(b"ne")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        o.write("results.json", half)
    assert (tmp_path / "results.json").read_text() == "old" and sorted(os.listdir(tmp_path)) == ["results.json"]


def test_a_reused_folder_is_cleaned_of_its_own_previous_outputs_only(tmp_path, secret):
    out = tmp_path / "rep"
    o = OutputFolder(out, tag="report")
    for rel in ("index.html", "cases/a.html", "cases/b.html"):
        o.write_text(rel, rel)
    o.finish()
    (out / "notes.txt").write_text("the user's own")
    other = OutputFolder(out, tag="leaderboard")
    other.write_text("board.md", "x")
    other.finish()
    o2 = OutputFolder(out, tag="report")
    o2.write_text("index.html", "v2")
    o2.write_text("cases/a.html", "v2")
    assert o2.finish() == ["cases/b.html"]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == \
        [MANIFEST, "board.md", "cases/a.html", "index.html", "notes.txt"]
    # a manifest edited to name files outside the folder removes nothing there
    m = json.loads((out / MANIFEST).read_text())
    m["report"] += ["../outside/secret.txt", str(secret), "cases/../../outside/secret.txt"]
    (out / MANIFEST).write_text(json.dumps(m))
    OutputFolder(out, tag="report").finish()
    assert secret.read_text() == "keep" and (out / "notes.txt").exists()
    (out / MANIFEST).write_text("{not json")
    assert OutputFolder(out, tag="report").finish() == []
