"""The report's per-rollout signal plot data (issue 14 item 6): WorldMark's flow signals Sx and Srad read from the
record's cached flow feature, the commanded segments and switches, the channel each segment is scored on and
WorldMark's stable zones (flow_eval.stable_window on its 16 fps time base); and the CSV cells a spreadsheet would
evaluate (issue 16). The page itself is checked in headless Chromium by tests/evaluate/test_report.py."""

import csv
import json
import shutil

import numpy as np
import pytest

from worldgate.evaluate.cache import DIGEST_KEY, content_digest
from worldgate.evaluate.csv_cells import _csv_cell
from worldgate.evaluate.report import write_report
from worldgate.evaluate.worldmark.signals import MAX_TRACE_POINTS
from worldgate.evaluate.worldmark.signals import envelope as _envelope
from worldgate.evaluate.runner import evaluate_run
from worldgate.evaluate.worldmark.flow_eval import FlowConfig, stable_window
from worldgate.generate.runner import run_generate

# 24 fps on purpose: WorldMark's zones are on its 16 fps time base whatever the video, the playback on the real one
QUICK = ["model.width=96", "model.height=96", "model.threads=1", "model.fps=24", "trajectory.seconds=5"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("signals")
    m = root / "cases.jsonl"
    rows = [{"id": "ws", "trajectory": "worldmark:6", "scene": {"seed": 21}},
            {"id": "nocache", "trajectory": "worldmark:8", "scene": {"seed": 22}}]
    m.write_text("\n".join(json.dumps(r) for r in rows))
    d = root / "sig"
    assert run_generate("engine", str(m), d, overrides=QUICK, progress=False).exit_code == 0
    evaluate_run(d, progress=False)
    return d


def _cached_flow(run, case):
    """The flow feature evaluate cached for ``case``, found by the record path its cache folder names."""
    for info in (run / ".features").glob("*/record.json"):
        if json.loads(info.read_text())["record"] == str(run / case):
            (npz,) = info.parent.glob("flow@*.npz")
            with np.load(npz) as z:
                return {k: z[k] for k in z.files}, npz
    raise AssertionError(f"no cached features for {case}")


def _page_data(out):
    page = (out / "index.html").read_text()
    return json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])


@pytest.fixture(scope="module")
def report(run, tmp_path_factory):
    _, npz = _cached_flow(run, "nocache")
    npz.unlink()  # a record whose flow feature is not cached
    out = tmp_path_factory.mktemp("rep")
    write_report([run], out)
    return _page_data(out)


def test_signals_are_the_cached_flow_feature_on_worldmarks_scale(run, report):
    F, npz = _cached_flow(run, "ws")
    e = report["cases"]["ws"]["runs"]["sig"]
    S = e["signals"]
    assert e["signals_note"] == "" and S["feature"] == npz.stem == "flow@4-classical"
    n = 2 * 5 * 24 - 2  # frame i vs i + 2 over 240 frames
    assert len(F["sx"]) == n and S["n"] == n and S["gap"] == 2 and S["fps"] == 24.0
    for c in ("sx", "srad"):
        assert S[c]["i"] == list(range(n))
        # WorldMark scores SEA-RAFT's half-size flow: the cached 640-wide pixels halved (protocol.flow_cache)
        np.testing.assert_allclose(S[c]["v"], 0.5 * F[c].astype(float), atol=6e-5)
    assert S["scale"] == 0.5 and "half-size" in S["unit"]
    assert np.mean(S["srad"]["v"][:100]) > 0.2 > -0.2 > np.mean(S["srad"]["v"][-60:])  # W then S: out, then in


def test_stable_zones_switches_and_channels(report):
    S = report["cases"]["ws"]["runs"]["sig"]["signals"]
    n, tb = S["n"], S["time_base"]
    assert tb == 16.0  # WorldMark's time base, not the video's 24 fps
    dur = (n - 1) / 16.0
    segs = S["segments"]
    assert [g["key"] for g in segs] == ["W", "S"] and [g["label"] for g in segs] == ["W", "S"]
    assert [(g["channel"], g["sign"]) for g in segs] == [("srad", 1), ("srad", -1)]  # flow_eval.KEY_FLOW
    for j, g in enumerate(segs):
        a, b = stable_window(j, 2, dur, FlowConfig())
        assert g["zone_s"] == pytest.approx([a, b], abs=1e-12)
        assert g["zone"] == pytest.approx([a * 16, b * 16], abs=1e-9)  # samples: t * 16 on the flow timeline
    # 237 / 16 = 14.8125 s of WorldMark time: zones [0, 7.40625 - 1] and [7.40625 + 3, 14.8125]
    assert segs[0]["zone_s"] == pytest.approx([0.0, 6.40625]) and segs[1]["zone_s"] == pytest.approx([10.40625, 14.8125])
    assert [g["zone_n"] for g in segs] == [103, 71]  # samples 0..102 and 167..237
    assert [x for g in segs for x in g["span"]] == pytest.approx([0.0, 118.5, 118.5, 237.0])  # WorldMark's even split
    # the commanded switch, on the video's real time (frame 120 at 24 fps)
    assert [g["frames"] for g in segs] == [[0, 120], [120, 240]]
    assert S["switches"] == pytest.approx([5.0]) and S["why"] == ""


def test_a_record_without_cached_flow_gets_a_note(report):
    e = report["cases"]["nocache"]["runs"]["sig"]
    assert e["signals"] is None and e["video"]
    assert e["signals_note"].startswith("no flow feature (flow@4-classical) is cached for this record")


def test_full_scale_option_and_an_unreadable_record(run, tmp_path):
    other = tmp_path / "full"
    shutil.copytree(run, other)
    r = json.loads((other / "results.json").read_text())
    r["config"]["params"]["wm_flow_full_scale"] = 1
    (other / "results.json").write_text(json.dumps(r))
    tj = json.loads((other / "ws" / "trajectory.json").read_text())
    (other / "nocache" / "trajectory.json").write_text(json.dumps(tj))  # changed after the record was written
    write_report([other], tmp_path / "rep")
    data = _page_data(tmp_path / "rep")
    S = data["cases"]["ws"]["runs"]["full"]["signals"]
    F, _ = _cached_flow(run, "ws")
    assert S["scale"] == 1.0 and S["unit"] == "px of a 640-wide frame"
    np.testing.assert_allclose(S["sx"]["v"], F["sx"].astype(float), atol=6e-5)
    e = data["cases"]["nocache"]["runs"]["full"]
    assert e["signals"] is None and "trajectory.json changed after the record was written" in e["signals_note"]


def test_a_linked_or_malformed_cache_file_is_a_note(run, tmp_path, caplog):
    other = tmp_path / "odd"
    shutil.copytree(run, other)
    ws = other / _cached_flow(run, "ws")[1].relative_to(run)  # record.json names the original record's path
    outside = tmp_path / "outside.npz"
    shutil.copy(ws, outside)
    ws.unlink()
    ws.symlink_to(outside)  # a cache file linked out of the run
    for info in (other / ".features").glob("*/record.json"):
        if json.loads(info.read_text())["record"] == str(run / "nocache"):
            bad = {"sx": np.zeros((5, 2)), "srad": np.zeros((5, 2)), "gap": np.array(2)}  # carrying a valid digest
            inputs = json.loads(info.read_text())["inputs_sha256"]
            bad[DIGEST_KEY] = np.array(content_digest(inputs, "flow@4-classical", bad))
            np.savez(info.parent / "flow@4-classical.npz", **bad)
    with caplog.at_level("WARNING", logger="worldgate.report"):
        write_report([other], tmp_path / "rep")
    data = _page_data(tmp_path / "rep")
    assert data["cases"]["ws"]["runs"]["odd"]["signals"] is None
    assert "link or not a regular file" in data["cases"]["ws"]["runs"]["odd"]["signals_note"] and str(ws) in caplog.text
    e = data["cases"]["nocache"]["runs"]["odd"]
    assert e["signals"] is None and "not two 1-D numeric arrays" in e["signals_note"]


def test_envelope_bounds_a_ten_minute_trace_and_keeps_its_extremes():
    n = 10 * 60 * 16
    rng = np.random.default_rng(0)
    v = rng.normal(size=n)
    v[4321], v[777] = 50.0, -40.0
    v[100:300] = np.nan
    t = _envelope(v)
    assert len(t["i"]) == len(t["v"]) <= MAX_TRACE_POINTS and len(t["i"]) > MAX_TRACE_POINTS - 50
    assert t["i"] == sorted(set(t["i"])) and t["i"][0] == 0 and t["i"][-1] == n - 1
    assert max(x for x in t["v"] if x is not None) == 50.0 and min(x for x in t["v"] if x is not None) == -40.0
    assert None in t["v"]  # an all-NaN stretch stays a gap, not a made-up value
    assert all(t["v"][k] == round(v[i], 4) for k, i in enumerate(t["i"]) if np.isfinite(v[i]))
    short = _envelope(np.array([1.23456, -2.0, np.inf]))
    assert short == {"i": [0, 1, 2], "v": [1.2346, -2.0, None]}


def test_csv_cells_that_a_spreadsheet_would_evaluate_are_quoted(run, tmp_path):
    for bad in ("=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tx", "\rx", "=HYPERLINK(\"http://x\")", "-", "-inf"):
        assert _csv_cell(bad) == "'" + bad
    for ok in ("-0.5", "+3", "-1e-05", "12.5", ".5", "engine", "", "a=b", "model"):
        assert _csv_cell(ok) == ok
    evil = tmp_path / "=1+2"
    shutil.copytree(run, evil)
    out = tmp_path / "rep"
    write_report([evil], out)
    for name in ("worldmark.csv", "multiworldbench.csv", "worldmembench-camera-following.csv"):
        with open(out / name, newline="") as f:
            rows = list(csv.reader(f))
        assert rows[1][0] == "'=1+2", name
        assert all(not c or c[0] not in "=+-@\t\r" or float(c) is not None for row in rows[1:] for c in row[1:])
