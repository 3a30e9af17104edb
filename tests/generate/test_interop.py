"""WorldMark delivery interop: export writes the official layout + manifest; re-import gives identical records; a
foreign delivery (videos only) imports with measured values and scores."""

import json
import shutil

import numpy as np
import pytest

from worldgate.cli import main
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.delivery_files import model_tag
from worldgate.generate.interop import InteropError, import_worldmark
from worldgate.generate.records import list_records
from worldgate.generate.runner import run_generate
from worldgate.generate.video import probe_video
from worldgate.generate.worldmark_export import export_worldmark

QUICK = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("interop") / "engine"
    res = run_generate("engine", "worldmark-engine", out, limit=6, overrides=QUICK, progress=False)
    assert res.exit_code == 0
    return out


def test_model_tag():
    assert model_tag("matrix-game-3.5") == "MATRIX_GAME_3_5" and model_tag("engine") == "ENGINE"


def test_export_layout_and_manifest(run, tmp_path):
    dl = tmp_path / "delivery"
    assert main(["export", str(run), "--format", "worldmark", "--out", str(dl)]) == 0
    vids = sorted(str(p.relative_to(dl)) for p in dl.glob("*/*/*/*.mp4"))
    # worldmark-engine cycles (first, real), (first, style), (third, real), (third, style) over action ids 1..6
    assert vids == ["real/first/ENGINE/000_001.mp4", "real/first/ENGINE/004_005.mp4", "real/third/ENGINE/002_003.mp4",
                    "style/first/ENGINE/001_002.mp4", "style/first/ENGINE/005_006.mp4", "style/third/ENGINE/003_004.mp4"]
    rows = [json.loads(ln) for ln in (dl / "manifest.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["action_id"] == 6)
    assert row["keys"] == "WS" and row["image"] == "005" and row["model"] == "ENGINE"
    info = probe_video(dl / row["video"])  # achieved is what the file holds
    assert (row["achieved"]["width"], row["achieved"]["frames"], row["achieved"]["measured"]) == (64, info.frames, True)
    assert row["segments"] == [{"keys": "W", "frames": [0, 16]}, {"keys": "S", "frames": [16, 32]}]
    assert row["prompt"]["source"].startswith("engine:scene-")


def test_export_then_import_gives_identical_records(run, tmp_path):
    dl = tmp_path / "delivery"
    export_worldmark(run, dl)
    back = tmp_path / "back"
    assert main(["import", str(dl), "--format", "worldmark", "--out", str(back)]) == 0
    a, b = list_records(run), list_records(back)
    assert [p.name for p in a] == [p.name for p in b] and len(a) == 6
    for ra, rb in zip(a, b):
        files = sorted(str(p.relative_to(ra)) for p in ra.rglob("*") if p.is_file())
        assert files == sorted(str(p.relative_to(rb)) for p in rb.rglob("*") if p.is_file())
        assert {"meta.json", "trajectory.json", "video.mp4", "poses.npy", "native/plan.json"} <= set(files)
        for name in files:
            assert (ra / name).read_bytes() == (rb / name).read_bytes(), f"{ra.name}/{name} differs"
    # importing again skips what is there
    r = import_worldmark(dl, back)
    assert len(r.skipped) == 6 and not r.imported


def test_tampered_video_is_refused(run, tmp_path):
    dl = tmp_path / "delivery"
    export_worldmark(run, dl)
    v = dl / "real/first/ENGINE/000_001.mp4"
    v.unlink()
    shutil.copy(dl / "real/first/ENGINE/004_005.mp4", v)
    r = import_worldmark(dl, tmp_path / "back")
    assert "sha256 mismatch" in r.failed["first-real-000_001"] and len(r.imported) == 5


def _foreign(run, dl, *tags, manifest=False):
    for t in tags:
        export_worldmark(run, dl, tag=t)
    shutil.rmtree(dl / "worldgate")
    if not manifest:
        (dl / "manifest.jsonl").unlink()
    return dl


def test_foreign_delivery_imports_and_scores(run, tmp_path):
    """Videos with no worldgate sidecar and no manifest: trajectory from the action id; each key covers its commanded
    20 s at the measured fps while the video lasts (these 2 s videos are far shorter than their 40 s command)."""
    dl = _foreign(run, tmp_path / "foreign", "OTHER")
    back = tmp_path / "back"
    r = import_worldmark(dl, back)
    assert not r.failed and len(r.imported) == 6 and r.models == ["OTHER"]
    rec = back / "OTHER-first-style-005_006"  # the case id carries the model
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["adapter"]["name"] == "other" and meta["achieved"]["frames"] == 32
    assert meta["key_boundaries"] == "commanded-duration-at-measured-fps"
    assert meta["commanded"] == {"seconds": 40.0, "frames": 640} and meta["case"]["tags"]["model"] == "OTHER"
    short = [c for c in meta["caveats"] if c.startswith("video shorter than its command")]
    assert short == [("video shorter than its command: 32 frames = 2.00 s at the measured 16 fps, commanded 40 s = "
                      "640 frames; key cut short: 0 (W): 32 of 320 frames; keys the video never reaches (no frames): "
                      "1 (S)")]
    tj = json.loads((rec / "trajectory.json").read_text())
    assert [s["frames"] for s in tj["segments"]] == [[0, 32], [32, 32]]
    poses = np.load(rec / "poses.npy")  # commanded poses at i / 16 s: forward all the way (S is never reached)
    assert poses.shape == (32, 4, 4) and np.all(np.diff(poses[:, 2, 3]) > 0)
    res = evaluate_run(back, progress=False)
    assert not res["errors"] and res["records"] == 6


def test_short_delivery_with_a_manifest_takes_its_key_boundaries(run, tmp_path):
    dl = _foreign(run, tmp_path / "foreign", "OTHER", manifest=True)
    back = tmp_path / "back"
    r = import_worldmark(dl, back)
    assert not r.failed and len(r.imported) == 6
    rec = back / "first-style-005_006"  # the manifest names the worldgate case id
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["key_boundaries"] == "manifest"
    assert ("video shorter than its command: 32 frames = 2.00 s at the measured 16 fps, commanded 40 s = 640 "
            "frames; key boundaries from the manifest") in meta["caveats"]
    tj = json.loads((rec / "trajectory.json").read_text())
    assert [s["frames"] for s in tj["segments"]] == [[0, 16], [16, 32]]
    poses = np.load(rec / "poses.npy")  # each key's 20 s stretched over its 16 frames: forward, then back
    assert poses[15, 2, 3] > poses[0, 2, 3] and poses[31, 2, 3] < poses[16, 2, 3]


def test_long_delivery_keys_at_the_measured_fps(tmp_path):
    """A 25-frame video at 1 fps for action 1 (W, commanded 20 s = 20 frames): W covers frames 0-19, the rest hold."""
    m = tmp_path / "cases.jsonl"
    m.write_text(json.dumps({"id": "first-real-000_001", "trajectory": "worldmark:1", "scene": {"seed": 1},
                             "tags": {"view": "first", "domain": "real", "image": 0, "action_id": 1}}) + "\n")
    run = tmp_path / "run"
    res = run_generate("engine", str(m), run, overrides=["model.width=64", "model.height=64", "model.threads=1",
                                                         "model.fps=1", "trajectory.seconds=25"], progress=False)
    assert res.exit_code == 0, res.failed
    dl = _foreign(run, tmp_path / "dl", "LONG")
    r = import_worldmark(dl, tmp_path / "back")
    assert not r.failed and r.imported == ["LONG-first-real-000_001"]
    rec = tmp_path / "back" / "LONG-first-real-000_001"
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["achieved"]["frames"] == 25 and meta["key_boundaries"] == "commanded-duration-at-measured-fps"
    assert ("video longer than its command: 25 frames = 25.00 s at the measured 1 fps, commanded 20 s = 20 frames; "
            "frames 20-24 (5.00 s) come after the last key and hold its final commanded pose") in meta["caveats"]
    tj = json.loads((rec / "trajectory.json").read_text())
    assert [s["frames"] for s in tj["segments"]] == [[0, 20]]
    poses = np.load(rec / "poses.npy")
    assert np.all(poses[20:] == poses[20]) and abs(poses[19, 2, 3]) < abs(poses[20, 2, 3])


def test_two_model_folders_import_every_video(run, tmp_path):
    """Two MODEL folders in one delivery: 12 videos, 12 records, each case id carrying its model; none skipped."""
    dl = _foreign(run, tmp_path / "two", "ALPHA", "BETA")
    back = tmp_path / "back"
    assert main(["import", str(dl), "--format", "worldmark", "--out", str(back)]) == 0
    names = [p.name for p in list_records(back)]
    assert len(names) == 12 and sum(n.startswith("ALPHA-") for n in names) == 6
    assert "BETA-third-style-003_004" in names and "ALPHA-third-style-003_004" in names
    for n in ("ALPHA-first-real-000_001", "BETA-first-real-000_001"):
        meta = json.loads((back / n / "meta.json").read_text())
        assert meta["adapter"]["name"] == n.split("-")[0].lower()
        assert meta["imported_from"].endswith(f"real/first/{n.split('-')[0]}/000_001.mp4")
    r = import_worldmark(dl, back)  # a second import resumes: everything is there
    assert len(r.skipped) == 12 and not r.imported and not r.failed and r.models == ["ALPHA", "BETA"]


def test_two_videos_for_one_case_id_is_an_error_not_a_skip(run, tmp_path):
    dl = tmp_path / "clash"
    export_worldmark(run, dl, tag="ALPHA")
    export_worldmark(run, dl, tag="BETA")  # its manifest (BETA's rows) replaces ALPHA's; the sidecar is shared
    rows = [json.loads(ln) for ln in (dl / "manifest.jsonl").read_text().splitlines()]
    clash = [dict(r, video=r["video"].replace("/BETA/", "/ALPHA/"), model="ALPHA") for r in rows]
    (dl / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in clash + rows))
    r = import_worldmark(dl, tmp_path / "back")
    assert len(r.imported) == 6 and len(r.failed) == 6
    why = r.failed["real/first/BETA/000_001.mp4"]
    assert "case id 'first-real-000_001' is already taken by real/first/ALPHA/000_001.mp4" in why


def test_unsafe_model_folder_is_refused(run, tmp_path):
    dl = _foreign(run, tmp_path / "bad", "OK")
    (dl / "real" / "first" / ".hidden").mkdir()
    shutil.copy(dl / "real/first/OK/000_001.mp4", dl / "real/first/.hidden/000_001.mp4")
    r = import_worldmark(dl, tmp_path / "back")
    assert len(r.imported) == 6 and "not a usable model tag" in r.failed["real/first/.hidden/000_001.mp4"]


def test_import_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        import_worldmark(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InteropError, match="no videos in the WorldMark layout"):
        import_worldmark(tmp_path / "empty", tmp_path / "out")
