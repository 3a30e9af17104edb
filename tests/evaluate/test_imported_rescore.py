"""An imported WorldMark results root with its videos is re-scored by ``evaluate --backend learned --rescore`` from
the imported FLOW caches alone: no model is loaded or needed (the flow carries WorldMark's own parallax samples), the
action columns are WorldMark's per-segment values, and the features that are not cached are named in a caveat."""

import json
import shutil

import pytest

from worldgate.cli import main

pytest.importorskip("torch")  # the learned registry builds its extractors (nothing is loaded)

SFX = "_real_first"
ACTION = ("direction_accuracy_trans,direction_accuracy_rot,direction_purity_trans,direction_purity_rot,"
          "motion_stability_trans,motion_stability_rot,response_latency_trans,response_latency_rot")


@pytest.fixture(scope="module")
def exported(worldmark_engine_run, tmp_path_factory):
    run, _ = worldmark_engine_run
    out = tmp_path_factory.mktemp("imp-rescore") / "delivery"
    assert main(["export", str(run), "--format", "worldmark", "--out", str(out)]) == 0
    return run, out


def test_learned_rescore_of_imported_videos_needs_no_model(exported, tmp_path, monkeypatch, capsys):
    run, out = exported
    for var, sub in (("HF_HOME", "hf"), ("HF_HUB_CACHE", "hf/hub"), ("TORCH_HOME", "torch")):
        monkeypatch.setenv(var, str(tmp_path / "empty" / sub))  # no model anywhere
    dest = tmp_path / "imp"
    shutil.copytree(out / "results", tmp_path / "results")
    assert main(["import", str(tmp_path / "results"), "--out", str(dest), "--videos", str(out)]) == 0
    irun = dest / "imported-ENGINE"
    capsys.readouterr()
    assert main(["evaluate", str(irun), "--backend", "learned", "--rescore", "--metrics", ACTION,
                 "--no-progress"]) == 0
    res = json.loads((irun / "results.json").read_text())
    assert not res["errors"]
    assert res["metrics"]["direction_accuracy_trans"]["mean"] is not None
    assert res["metrics"]["motion_stability_rot"]["n"] >= 1
    cav = next(iter(res["caveats"].values()))[0]
    assert cav.startswith("--rescore: features not cached") and "depth@" in cav and "flow@" not in cav
