"""``worldgate import`` of a WorldMark results root: the tree ``worldgate export`` writes, imported back, gives one run
per MODEL labelled imported whose tables are final_master's on that tree (and worldgate's own numbers for every
column final_master computes with the same constants); with ``--videos`` the records' learned flow features are the
imported FLOW caches, under the key evaluate computes."""

import json
import shutil

import numpy as np
import pytest

from worldgate.cli import main
from worldgate.evaluate.features import FeatureCache, compute_features, open_record, scoring_view
from worldgate.evaluate.metrics import FEATURES, params
from worldgate.evaluate.report import write_report
from worldgate.evaluate.runner import format_table
from worldgate.evaluate.worldmark.benchmark import COLUMN
from worldgate.evaluate.worldmark.flow_eval import load_flow_cache, save_flow_cache
from worldgate.evaluate.worldmark.imported import flow_feature, import_worldmark_results, is_results_root
from worldgate.evaluate.worldmark.master import COLS, master_csv, master_rows, read_results_tree
from worldgate.evaluate.worldmark.protocol import protocol_record
from worldgate.generate.records import is_complete

SFX = "_real_first"


@pytest.fixture(scope="module")
def exported(worldmark_engine_run, tmp_path_factory):
    """The shared Engine run (conftest.py), scored (classical), exported as a WorldMark delivery with its results
    tree."""
    run, results = worldmark_engine_run
    out = tmp_path_factory.mktemp("wmimport") / "delivery"
    assert main(["export", str(run), "--format", "worldmark", "--out", str(out)]) == 0
    return run, results, out


def _read(p):
    return json.loads(p.read_text())


def test_results_root_round_trip(exported, tmp_path):
    run, ours, out = exported
    root = out / "results"
    assert is_results_root(root) and not is_results_root(out)
    dest = tmp_path / "imp"
    assert main(["import", str(root), "--out", str(dest)]) == 0
    irun = dest / "imported-ENGINE"
    res = _read(irun / "results.json")
    assert res["imported"]["format"] == "worldmark-results" and res["imported"]["from"] == str(root.resolve())
    assert res["imported"]["worldmark_commit"].startswith("26f33a8") and res["imported"]["videos"] is None
    assert res["records"] == 2 and res["config"]["backend"] == "learned" and _read(irun / "worldmark_import.json") == res
    # the table is final_master's on the tree (its own config), and the tree's own final_master CSV text
    flow, c1, c2, c3, qa = read_results_tree(str(root), SFX)
    fm = master_rows(flow, c1, c2, c3, qa)
    split = res["worldmark"]["splits"][SFX]
    for c in COLS:
        want = fm["ENGINE"][c]
        assert (split[c] is None and np.isnan(want)) or split[c] == pytest.approx(want, abs=1e-12), c
        assert res["worldmark"]["master"][SFX]["ENGINE"][c] == split[c]
    assert (dest / f"final_master{SFX}.csv").read_text() == master_csv(fm)
    # = worldgate's own numbers for every column final_master computes with worldgate's constants (Local's mutation
    # threshold is the classical backend's own in worldgate's table, 0.10 in final_master's)
    mine = ours["worldmark"]["splits"][SFX]
    for c in COLS:
        if c != "Local":
            assert split[c] == (None if mine[c] is None else pytest.approx(mine[c], abs=1e-9)), c
            mid = COLUMN[c]
            assert res["metrics"][mid]["mean"] == (None if ours["metrics"][mid]["mean"] is None else
                                                   pytest.approx(ours["metrics"][mid]["mean"], abs=1e-9)), c
    assert split["DA_t"] > 95 and split["Rev"] is not None and split["QA_q"] is None  # no Q-Align in the tree
    # per video: its own row, worldgate's per-record values, labelled
    samples = [json.loads(x) for x in (irun / "samples.jsonl").read_text().splitlines()]
    assert [s["case"] for s in samples] == ["ENGINE-first-real-000_001", "ENGINE-first-real-001_007"]
    theirs = {s["case"]: s for s in (json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines())}
    for s in samples:
        assert s["imported"] == res["imported"] and s["tags"]["split"] == SFX and s["tags"]["model"] == "ENGINE"
        o = theirs[s["case"].removeprefix("ENGINE-")]
        for c in ("DA_t", "DA_r", "MP_t", "MP_r", "MS_t", "MS_r", "RL_t", "RL_r", "Rev"):
            mid = COLUMN[c]
            assert s["scores"][mid] == (None if o["scores"][mid] is None else pytest.approx(o["scores"][mid])), (s, c)
    assert samples[0]["scores"]["revisit_memory"] is None and "round trip" in samples[0]["unavailable"]["revisit_memory"]
    assert samples[1]["scores"]["direction_accuracy_rot"] is not None
    assert samples[0]["scores"]["qalign_quality"] is None and "qalign" in samples[0]["unavailable"]["qalign_quality"]
    # beside worldgate's run in evaluate's table, and in a report, under its labelled name
    table = format_table([ours, res])
    assert table.splitlines()[0].split()[-2:] == ["run", "imported-ENGINE"]
    rep = tmp_path / "report"
    write_report([irun], rep)
    md = (rep / "worldmark.md").read_text()
    assert "| imported-ENGINE | 2 |" in md and f"{split['DA_t']:.1f}" in md
    # beside a worldgate run of another backend in one report, and in evaluate's leaderboard (no videos: not
    # re-scored, shown as imported)
    write_report([run, irun], tmp_path / "both")
    both = (tmp_path / "both" / "worldmark.md").read_text()
    assert "| run | 2 |" in both and "| imported-ENGINE | 2 |" in both
    lb = tmp_path / "lb"
    assert main(["evaluate", str(run), str(irun), "--rescore", "--out", str(lb)]) == 0
    board = (lb / "leaderboard.md").read_text()
    assert "imported-ENGINE: imported (worldmark-results), not re-scored" in board
    assert (lb / "leaderboard.csv").read_text().splitlines()[2].startswith("imported-ENGINE,2,")


def test_several_models_one_run_each_and_final_masters_exclusions(exported, tmp_path):
    _, _, out = exported
    root = tmp_path / "results"
    shutil.copytree(out / "results", root)
    d = root / f"results_flow{SFX}"
    for f in sorted(d.glob("ENGINE__*.json")):  # the same videos as a second model, and as one final_master drops
        for other in ("HY-World", "Genie3"):
            r = _read(f)
            r["model"] = other
            (d / f.name.replace("ENGINE", other)).write_text(json.dumps(r))
    res = import_worldmark_results(root, tmp_path / "imp")
    assert sorted(res.runs) == ["ENGINE", "Genie3", "HY-World"]
    assert sorted(res.tables[SFX]) == ["ENGINE", "HY-World 1.5"]  # final_master's display name; Genie3 excluded
    hy = _read(res.runs["HY-World"] / "results.json")
    eng = _read(res.runs["ENGINE"] / "results.json")
    assert hy["imported"]["display_name"] == "HY-World 1.5" and hy["worldmark"]["model_in_master"] == {SFX: True}
    assert hy["metrics"]["direction_accuracy_trans"]["mean"] == eng["metrics"]["direction_accuracy_trans"]["mean"]
    assert hy["metrics"]["local_memory"]["mean"] is None  # no c1 entries for HY-World in the tree
    g = _read(res.runs["Genie3"] / "results.json")
    assert g["worldmark"]["model_in_master"] == {SFX: False} and g["metrics"]["motion_stability_rot"]["mean"] is not None
    table = _read(tmp_path / "imp" / "worldmark_master.json")
    assert table["excluded_by_final_master"] == ["Open-Oasis", "Genie3"] and "Genie3" not in table["splits"][SFX]


def test_videos_become_records_whose_flow_is_the_imported_cache(exported, tmp_path):
    _, _, out = exported
    root = tmp_path / "results"
    shutil.copytree(out / "results", root)
    cdir = root / f"results_flow{SFX}" / "cache"
    c = load_flow_cache(str(cdir / "ENGINE__001_007.npz"))  # give the LR video parallax samples (a depth backend's)
    rng = np.random.default_rng(0)
    iv = rng.uniform(0.1, 1.0, 50)
    c["px_raw"] = {0: (iv, 3.0 * iv + 0.5), 1: (iv[:40], -2.0 * iv[:40] - 0.25)}
    save_flow_cache(c, str(cdir / "ENGINE__001_007.npz"))
    dest = tmp_path / "imp"
    assert main(["import", str(root), "--out", str(dest), "--videos", str(out)]) == 0
    irun = dest / "imported-ENGINE"
    fl = FEATURES["learned"].get("flow")()
    samples = {s["case"]: s for s in (json.loads(x) for x in (irun / "samples.jsonl").read_text().splitlines())}
    P = params()
    for stem in ("000_001", "001_007"):
        cid = f"ENGINE-first-real-{stem}"
        folder = irun / cid
        assert is_complete(folder)
        meta = _read(folder / "meta.json")
        assert meta["imported"]["format"] == "worldmark-results" and meta["case"]["tags"]["model"] == "ENGINE"
        assert meta["key_boundaries"] == "commanded-duration-at-measured-fps" and any(
            x.startswith("video shorter than its command") for x in meta["caveats"])
        rec = open_record(folder)
        assert samples[cid]["features"] == {"flow": "flow@1-learned"} and samples[cid]["video_sha256"] == rec.content_hash
        # evaluate's own lookup (the key it computes from the record's inputs) finds it: nothing is computed
        feats, st = compute_features(rec, [fl], FeatureCache(irun / ".features"), rescore=True)
        assert st["cached"] == ["flow@1-learned"] and not st["computed"]
        F = feats["flow"]
        cache = load_flow_cache(str(cdir / f"ENGINE__{stem}.npz"))
        assert np.array_equal(F["sx"] * 0.5, cache["Sx"]) and np.array_equal(F["srad"] * 0.5, cache["Srad"])
        assert len(F["sx"]) == rec.n_frames - 2 and F["grid"].shape == (0, 8, 8, 2) and np.isnan(F["speed"]).all()
        # WorldMark's scoring on that feature gives the imported per-segment values (latency, stability: no parallax)
        frec, _, why = protocol_record({"flow": F, "depth": {"frame": np.zeros(0, int), "disparity": np.zeros((0, 8, 8))}},
                                       scoring_view(rec), P)
        want = _read(root / f"results_flow{SFX}" / f"ENGINE__{stem}.json")
        assert not why and frec["M3"] == want["M3"] and frec["M4"] == want["M4"]
        if stem == "000_001":
            assert frec["M1"] == want["M1"] and frec["M2"] == want["M2"]
    F = FeatureCache(irun / ".features").get(open_record(irun / "ENGINE-first-real-001_007"), fl)
    assert list(F["px_segs"]) == [0, 1] and np.array_equal(F["px_iv_0"], iv)
    assert np.array_equal(F["px_uu_1"] * 0.5, -2.0 * iv[:40] - 0.25)
    # importing again resumes: the records are kept, the table is the same
    before = (irun / "samples.jsonl").read_text()
    r = import_worldmark_results(root, dest, videos=out)
    assert r.records == {"ENGINE": 2} and r.flow_features == 2 and (irun / "samples.jsonl").read_text() == before


def test_worldmarks_flat_video_layout_and_mismatched_caches(exported, tmp_path):
    """VIDEO_ROOT/{MODEL}/{stem}.mp4 (one split); a FLOW cache that is not the video's is not used, with the reason."""
    _, _, out = exported
    root = tmp_path / "results"
    shutil.copytree(out / "results", root)
    cdir = root / f"results_flow{SFX}" / "cache"
    c = load_flow_cache(str(cdir / "ENGINE__000_001.npz"))
    c.update(tm=c["tm"][:-5], Sx=c["Sx"][:-5], Srad=c["Srad"][:-5])
    save_flow_cache(c, str(cdir / "ENGINE__000_001.npz"))
    vids = tmp_path / "videos" / "ENGINE"
    vids.mkdir(parents=True)
    shutil.copy(out / "real/first/ENGINE/000_001.mp4", vids / "000_001.mp4")  # 001_007's video is missing
    r = import_worldmark_results(root, tmp_path / "imp", videos=tmp_path / "videos")
    assert r.records == {"ENGINE": 1} and r.flow_features == 0 and r.missing_videos == [f"ENGINE{SFX}/001_007"]
    s = [json.loads(x) for x in (r.runs["ENGINE"] / "samples.jsonl").read_text().splitlines()]
    assert "holds 89 flow samples but the video has 96 frames" in s[0]["flow_feature"]
    assert "no video real/first/ENGINE/001_007.mp4" in s[1]["unavailable_video"]


def test_import_dispatch_and_errors(exported, tmp_path, capsys):
    _, _, out = exported
    assert main(["import", str(out), "--out", str(tmp_path / "d"), "--videos", str(out)]) == 2
    assert "--videos is for a WorldMark results root" in capsys.readouterr().err
    assert main(["import", str(out), "--out", str(tmp_path / "d")]) == 0  # the delivery path as before
    assert "from 1 MODEL folder(s) (ENGINE): one run, case ids {MODEL}-{view}-{domain}" in capsys.readouterr().out
    (tmp_path / "empty" / "results_flow_real_first").mkdir(parents=True)
    assert main(["import", str(tmp_path / "empty"), "--out", str(tmp_path / "e")]) == 2
    assert "no per-video results_flow" in capsys.readouterr().err
    feat = flow_feature({"Sx": np.ones(4), "Srad": np.zeros(4), "px_raw": {}, "action": 1})
    assert feat["sx"].tolist() == [2.0] * 4 and feat["px_segs"].tolist() == []
