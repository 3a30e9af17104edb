"""`worldgate report`: tables as the benchmarks print them (values from results.json, best/second/worst marks), plots,
and an HTML viewer checked in headless Chromium (loads without console errors, videos play in sync, the case
picker switches cases; a screenshot is left for a human)."""

import csv
import json
import shutil
import time
from pathlib import Path

import pytest

from worldgate.cli import main
from worldgate.evaluate.metrics import METRIC_INFO, WORLDMARK_COLUMNS
from worldgate.evaluate.report import ReportError, _rank_marks, revisit_decay, write_report
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.runner import run_generate

QUICK = ["model.width=96", "model.height=96", "model.threads=1", "trajectory.seconds=2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    m = root / "cases.jsonl"
    rows = [{"id": "ws", "trajectory": "worldmark:6", "scene": {"seed": 21}},
            {"id": "lrl", "trajectory": "worldmark:12", "scene": {"seed": 22}},
            {"id": "wr", "trajectory": "worldmark:9", "scene": {"seed": 23}, "view": "third"}]
    m.write_text("\n".join(json.dumps(r) for r in rows))
    out = []
    for model in ("engine", "engine-flipyaw", "engine-blur", "engine-memory"):
        d = root / model
        ctx = {"context": "sliding_window", "budget": 2} if model == "engine-memory" else {}
        assert run_generate(model, str(m), d, overrides=QUICK + ["model.chunk=8"] * bool(ctx), progress=False,
                            **ctx).exit_code == 0
        evaluate_run(d, progress=False)
        out.append(d)
    return out


def test_rank_marks():
    assert _rank_marks([3.0, 1.0, 2.0], True) == ["best", "worst", "second"]
    assert _rank_marks([3.0, 1.0, 2.0], False) == ["worst", "best", "second"]
    assert _rank_marks([3.0, None], True) == ["", ""]  # one value ranks nothing
    assert _rank_marks([3.0, 1.0], True) == ["best", "worst"]
    assert _rank_marks([100.0, 100.0, 50.0], True) == ["best", "best", "worst"]  # ties share a mark
    assert _rank_marks([100.0, 100.0], True) == ["", ""]  # all tied: nothing to mark


def test_revisit_decay_reads_per_trip_scores():
    r = {"samples": [{"detail": {"revisit_memory": {"per_trip": [90.0, 80.0, 60.0]}}},
                     {"detail": {"revisit_memory": {"per_trip": [70.0, 60.0]}}}, {"detail": {}}]}
    assert revisit_decay(r) == [80.0, 70.0, 60.0]


def test_tables_match_results_and_mark_ranks(runs, tmp_path):
    out = tmp_path / "rep"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    res = {r.name: json.loads((r / "results.json").read_text()) for r in runs}
    with open(out / "worldmark.csv") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    for row in rows[1:]:
        for m, cell in zip(header[2:], row[2:]):
            if m in WORLDMARK_COLUMNS and cell:
                assert float(cell) == pytest.approx(res[row[0]]["metrics"][m]["mean"], rel=1e-5)
    md = (out / "worldmark.md").read_text()
    # flipped yaw is the worst rotation direction accuracy; Engine GT the best
    line = {ln.split("|")[1].strip(): ln for ln in md.splitlines() if ln.startswith("| engine")}
    col = 3 + header[2:].index("direction_accuracy_rot")  # split("|"): "", model, records, metrics...
    assert line["engine-flipyaw"].split("|")[col].strip().endswith("▼")
    assert line["engine"].split("|")[col].strip().startswith("**")
    assert "WorldMemBench — camera following" in (out / "worldmembench.md").read_text()
    assert "no run has any of these metrics" in (out / "multiworldbench.md").read_text()
    for png in ("profile.png", "distributions.png", "context.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "index.html").read_text()
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    assert data["runs"] == [r.name for r in runs] and set(data["cases"]) == {"ws", "lrl", "wr"}
    lrl = data["cases"]["lrl"]
    assert [s["label"] for s in lrl["trajectory"]["segments"]] == ["L", "R", "L"]
    assert all((out / v["video"]).is_file() for v in lrl["runs"].values())


def test_report_refuses_unscored_and_mixed_runs(runs, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(ReportError, match="worldgate evaluate"):
        write_report([bare], tmp_path / "x")
    other = tmp_path / "learned-run"
    shutil.copytree(runs[0], other)
    r = json.loads((other / "results.json").read_text())
    for b in r["backends"].values():
        b["backend"] = "learned"
    (other / "results.json").write_text(json.dumps(r))
    with pytest.raises(ReportError, match="never mixed"):
        write_report([runs[0], other], tmp_path / "x")


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("Debian chromium + chromium-driver not installed (.ci/run installs them)")
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--autoplay-policy=no-user-gesture-required"):
        o.add_argument(a)
    o.binary_location = chromium
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(driver), options=o)
    d.set_window_size(1280, 1000)
    return d


def test_html_page_in_headless_chromium(runs, tmp_path):
    out = tmp_path / "rep"
    write_report(runs, out)
    d = _browser()
    try:
        d.get((out / "index.html").as_uri())
        js = "return [...document.querySelectorAll('video')].map(v => [v.readyState, v.currentTime, v.paused, v.src])"
        t0 = time.time()
        while time.time() - t0 < 20 and not all(v[0] >= 2 for v in d.execute_script(js)):
            time.sleep(0.2)
        vids = d.execute_script(js)
        assert len(vids) == 4 and all(v[0] >= 2 for v in vids), vids  # every model's video loaded
        d.find_element("id", "play").click()
        time.sleep(1.5)
        vids = d.execute_script(js)
        assert all(not v[2] and v[1] > 0.3 for v in vids), vids  # playing
        times = [v[1] for v in vids]
        assert max(times) - min(times) < 0.35  # in sync
        # the case picker switches every video and the score table
        first_src = vids[0][3]
        table0 = d.find_element("id", "scores").text
        d.execute_script("const s = document.getElementById('case'); s.value = 'ws'; s.dispatchEvent(new Event('change'))")
        time.sleep(0.5)
        vids = d.execute_script(js)
        assert all(v[3].endswith("/ws.mp4") for v in vids) and vids[0][3] != first_src
        assert d.find_element("id", "scores").text != table0
        assert [s.text for s in d.find_elements("css selector", "#phases text")][-2:] == ["W", "S"]
        d.save_screenshot(str(out / "screenshot.png"))
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        d.quit()
    assert (out / "screenshot.png").stat().st_size > 10_000
