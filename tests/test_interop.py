"""WorldMark delivery interop: export writes the official layout + manifest; re-import gives identical records; a
foreign delivery (videos only) imports with measured values and scores."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from worldgate.cli import main
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.interop import InteropError, export_worldmark, import_worldmark, model_tag
from worldgate.generate.records import list_records
from worldgate.generate.runner import run_generate
from worldgate.generate.video import probe_video

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


def test_foreign_delivery_imports_and_scores(run, tmp_path):
    """Videos with no worldgate sidecar and no manifest: trajectory from the action id, keys split evenly."""
    dl = tmp_path / "foreign"
    export_worldmark(run, dl, tag="OTHER")
    shutil.rmtree(dl / "worldgate")
    (dl / "manifest.jsonl").unlink()
    back = tmp_path / "back"
    r = import_worldmark(dl, back)
    assert not r.failed and len(r.imported) == 6
    meta = json.loads((back / "first-style-005_006" / "meta.json").read_text())
    assert meta["adapter"]["name"] == "other" and meta["achieved"]["frames"] == 32
    tj = json.loads((back / "first-style-005_006" / "trajectory.json").read_text())
    assert [s["frames"] for s in tj["segments"]] == [[0, 16], [16, 32]]
    poses = np.load(back / "first-style-005_006" / "poses.npy")
    assert poses.shape == (32, 4, 4) and poses[15, 2, 3] > poses[0, 2, 3] and poses[31, 2, 3] < poses[16, 2, 3]
    res = evaluate_run(back, progress=False)
    assert not res["errors"] and res["records"] == 6


def test_import_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        import_worldmark(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InteropError, match="no videos in the WorldMark layout"):
        import_worldmark(tmp_path / "empty", tmp_path / "out")
