"""`worldgate report`: tables as the benchmarks print them (values from results.json, best/second/worst marks), plots,
and an HTML viewer checked in headless Chromium (loads without console errors, videos play in sync, the case
picker switches cases; a screenshot is left for a human)."""

import csv
import json
import shutil
import time

import pytest

from worldgate.cli import main
from worldgate.evaluate.metrics import WORLDMARK_COLUMNS
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
    # beside the table: the WorldMark scoring reproduced and its deviations, per run
    note = next(ln for ln in md.splitlines() if ln.startswith("- engine:"))
    assert "26f33a81" in note and "quirks as published" in note and "backend deviation" in note, note
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
        # under every rollout, its flow signals: both traces, the commanded segments L R L, two switches, a cursor
        plots = d.find_elements("css selector", ".cell svg.signals")
        assert len(plots) == 4
        assert [t.text for t in plots[0].find_elements("css selector", "text.seglabel")] == \
            ["L: Sx+", "R: Sx\u2212 (n/a)", "L: Sx+ (n/a)"]  # 2 s segments: only the first has a stable zone
        for sel in ("polyline.trace-sx", "polyline.trace-srad", "rect.zone", "polyline.scored"):
            assert len(plots[0].find_elements("css selector", sel)) == 1, sel
        assert len(plots[0].find_elements("css selector", "line.switch")) == 2
        cursor = "return [...document.querySelectorAll('svg.signals .cursor')].map(c => +c.getAttribute('x1'))"
        # the cursor follows the video's currentTime: 6 s of video over x = 34 .. 414 (viewBox units)
        for t in (1.5, 4.5):
            d.execute_script("for (const v of document.querySelectorAll('video')) v.currentTime = arguments[0]", t)
            time.sleep(0.5)
            assert d.execute_script(cursor) == pytest.approx([34 + 380 * t / 6] * 4, abs=0.5), t
        # a click on the plot seeks every video there
        d.execute_script("const s = document.querySelector('svg.signals'), r = s.getBoundingClientRect();"
                         "s.dispatchEvent(new MouseEvent('click', {clientX: r.left + r.width * (34 + 95) / 420,"
                         "clientY: r.top + r.height / 2, bubbles: true}))")
        time.sleep(0.5)
        assert [v[1] for v in d.execute_script(js)] == pytest.approx([1.5] * 4, abs=0.02)
        assert d.execute_script(cursor) == pytest.approx([34 + 95] * 4, abs=0.5)
        d.execute_script("for (const v of document.querySelectorAll('video')) v.currentTime = 0")
        time.sleep(0.3)
        d.find_element("id", "play").click()
        time.sleep(1.5)
        vids = d.execute_script(js)
        assert all(not v[2] and v[1] > 0.3 for v in vids), vids  # playing
        times = [v[1] for v in vids]
        assert max(times) - min(times) < 0.35  # in sync
        # while playing, each plot's cursor follows its video (requestAnimationFrame, not only timeupdate)
        pairs = d.execute_script("return [...document.querySelectorAll('.cell')].map(c => "
                                 "[+c.querySelector('.cursor').getAttribute('x1'), c.querySelector('video').currentTime])")
        assert all(x > 34 + 380 * 0.3 / 6 and x == pytest.approx(34 + 380 * t / 6, abs=4) for x, t in pairs), pairs
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


# ------------------------------------------------------------------------------------ hostile runs (report security)
TINY = ["trajectory.seconds=1", "model.width=64", "model.height=64", "model.threads=1"]
RUN_XSS = 'run"><img src=x onerror="window.__pwned=1">'
CASE_XSS = "case<img src=x onerror=window.__pwned=2>"  # no "/": a case id names a folder
PHASE_XSS = '<img src=x onerror="window.__pwned=3">'
SEG_XSS = "<svg onload=window.__pwned=4>"
PROMPT_XSS = '</script><script>window.__pwned=5</script><img src=x onerror="window.__pwned=6"> __DATA__ __TITLE__'
ERROR_XSS = "<img src=x onerror=window.__pwned=7>"
TAG_XSS = "<b onmouseover=window.__pwned=8>tag</b>"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A scored two-case Engine run (64x64, 1 s): the clean base the hostile runs are made from."""
    d = tmp_path_factory.mktemp("tiny") / "tiny"
    assert run_generate("engine", "worldmark-engine", d, limit=2, overrides=TINY, progress=False).exit_code == 0
    evaluate_run(d, progress=False)
    return d


def _samples(run):
    return [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines() if x.strip()]


def _write_samples(run, samples):
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))


@pytest.fixture(scope="module")
def hostile(tiny, tmp_path_factory):
    """The tiny run re-labelled with markup everywhere the page shows data: the run folder's name, a case id (written
    past the suite loader, which would refuse it), a phase name, a segment label, the prompt, an error and a tag."""
    run = tmp_path_factory.mktemp("hostile") / RUN_XSS
    shutil.copytree(tiny, run)
    samples = _samples(run)
    first, second = samples[0]["case"], samples[1]["case"]
    (run / first).rename(run / CASE_XSS)
    samples[0]["case"] = CASE_XSS
    samples[0]["tags"]["domain"] = TAG_XSS
    samples[1]["error"] = ERROR_XSS
    _write_samples(run, samples)
    for cid in (CASE_XSS, second):
        meta = json.loads((run / cid / "meta.json").read_text())
        meta["case"]["prompt"] = PROMPT_XSS
        meta["case_id"] = meta["case"]["id"] = cid
        (run / cid / "meta.json").write_text(json.dumps(meta))
        tj = json.loads((run / cid / "trajectory.json").read_text())
        tj["phases"][0]["name"] = PHASE_XSS
        tj["segments"][0]["move"] = SEG_XSS
        (run / cid / "trajectory.json").write_text(json.dumps(tj))
    return run, [CASE_XSS, second]


def _page_data(page: str) -> dict:
    return json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])


def test_hostile_names_are_escaped_in_index_html(hostile, tmp_path):
    run, cases = hostile
    out = tmp_path / "rep"
    write_report([run], out)
    page = (out / "index.html").read_text()
    # no markup from the data: the page's own two scripts and no image, svg or bold from a payload
    assert page.count("<script") == 2 and page.count("</script>") == 2
    for raw in ("<img", "<svg onload", "<b ", "onerror=\"window", "__DATA__", "__TITLE__"):
        assert raw not in page.replace(" __DATA__ __TITLE__", ""), raw  # the prompt's tokens are escaped JSON text
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in page  # the run name in <title> and <h2>
    assert "\\u003c/script\\u003e" in page  # the prompt's </script> cannot close the data block
    # ... and the embedded JSON reads back to exactly what the run holds
    data = _page_data(page)
    assert data["runs"] == [RUN_XSS] and sorted(data["cases"]) == sorted(cases)
    c = data["cases"][CASE_XSS]
    assert c["prompt"] == PROMPT_XSS and c["tags"]["domain"] == TAG_XSS
    assert c["trajectory"]["phases"][0]["name"] == PHASE_XSS
    assert c["trajectory"]["segments"][0]["label"] == SEG_XSS
    assert data["cases"][cases[1]]["runs"][RUN_XSS]["error"] == ERROR_XSS
    # media names are plain file names (no markup, no URL-special characters) and the videos are there
    for e in (v["runs"][RUN_XSS] for v in data["cases"].values()):
        assert e["video"] and all(ch not in e["video"] for ch in '<>"#?% ') and (out / e["video"]).is_file()
    # the markdown tables carry HTML (<u>) and are escaped too
    md = (out / "worldmark.md").read_text()
    assert "<img" not in md and "&lt;img src=x" in md
    # a page written twice never rescans data for its placeholders
    write_report([run], out)
    assert _page_data((out / "index.html").read_text()) == data


def test_hostile_names_never_execute_in_headless_chromium(hostile, tmp_path):
    """The payloads are shown as text and nothing runs, on the page as written (with its Content-Security-Policy)
    and on the same page with the policy removed, so the escaping alone is what is checked there."""
    run, cases = hostile
    out = tmp_path / "rep"
    write_report([run], out)
    page = (out / "index.html").read_text()
    assert page.count('http-equiv="Content-Security-Policy"') == 1
    bare = "\n".join(ln for ln in page.splitlines() if "Content-Security-Policy" not in ln)
    (out / "no-csp.html").write_text(bare)
    d = _browser()
    try:
        for name in ("index.html", "no-csp.html"):
            d.get((out / name).as_uri())
            time.sleep(0.3)
            assert d.execute_script("return document.title") == "worldgate report: " + RUN_XSS
            assert [o.text for o in d.find_elements("css selector", "#case option")] == sorted(cases)
            for cid in sorted(cases):
                d.execute_script("const s = document.getElementById('case'); s.value = arguments[0];"
                                 "s.dispatchEvent(new Event('change'))", cid)
                time.sleep(0.3)
                d.find_element("id", "play").click()
                time.sleep(0.3)
                d.find_element("id", "play").click()
                assert d.find_element("css selector", ".cell h3").text == RUN_XSS
                assert d.find_elements("css selector", "#scores th")[1].text == RUN_XSS
                assert d.find_element("id", "prompt").text == "prompt: " + PROMPT_XSS
                assert [t.text for t in d.find_elements("css selector", "#phases text")][:2] == [PHASE_XSS, SEG_XSS]
                assert len(d.find_elements("css selector", "video")) == 1
                if cid == CASE_XSS:
                    assert TAG_XSS in d.find_element("id", "tags").text
                else:
                    assert d.find_element("css selector", ".cell .err").text == ERROR_XSS
                state = d.execute_script(
                    "return [typeof window.__pwned, document.scripts.length, document.querySelectorAll("
                    "'img, b, svg svg, [onerror], [onload], [onmouseover]').length]")
                assert state == ["undefined", 2, 0], (name, cid, state)  # nothing ran, no element from a payload
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        d.quit()


def test_report_media_never_follow_links_out_of_a_run(tiny, tmp_path, caplog):
    """A record video linked to a file outside the run, a video linked inside the run, a record folder that is a link
    and a case id that is a path: each is skipped with a warning naming it, and nothing of theirs reaches the report."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET outside the run\n")
    outside = tmp_path / "outside-record"
    run = tmp_path / "linky"
    shutil.copytree(tiny, run)
    samples = _samples(run)
    a, b = samples[0]["case"], samples[1]["case"]
    shutil.copytree(run / b, outside)
    shutil.copy(run / a / "video.mp4", tmp_path / "a-video.mp4")
    (run / a / "video.mp4").unlink()
    (run / a / "video.mp4").symlink_to(secret)  # a video linked to a text file outside the run
    shutil.rmtree(run / b)
    (run / b).symlink_to(outside, target_is_directory=True)  # a record folder linked out of the run
    (run / "inside").mkdir()
    shutil.copy(outside / "video.mp4", run / "inside" / "video.mp4")
    (run / "inside" / "trajectory.json").symlink_to(outside / "trajectory.json")
    (run / "inside" / "poses.npy").symlink_to(outside / "poses.npy")
    dotdot = dict(samples[1], case="../outside-record")  # a case id that is a path out of the run
    linked = dict(samples[1], case="inside")
    _write_samples(run, samples + [dotdot, linked])
    out = tmp_path / "rep"
    with caplog.at_level("WARNING", logger="worldgate.report"):
        write_report([run], out)
    text = caplog.text
    assert str(run / a / "video.mp4") in text and str(run / b) in text and "'../outside-record'" in text
    assert str(run / "inside" / "trajectory.json") in text and str(run / "inside" / "poses.npy") in text
    data = _page_data((out / "index.html").read_text())
    ea = data["cases"][a]["runs"]["linky"]
    assert ea["video"] is None and any("video.mp4 skipped" in n for n in ea["notes"])
    assert data["cases"][b]["runs"]["linky"]["video"] is None and data["cases"][b]["trajectory"] is None
    assert data["cases"]["../outside-record"]["runs"]["linky"]["video"] is None
    inside = data["cases"]["inside"]
    assert inside["runs"]["linky"]["video"] and inside["trajectory"] is None  # a real file is fine, links are not
    media = [p for p in (out / "media").rglob("*") if p.is_file()]
    assert len(media) == 1 and not any(p.is_symlink() for p in (out / "media").rglob("*"))
    for p in out.rglob("*"):
        if p.is_file():
            assert b"TOP-SECRET" not in p.read_bytes(), p
    # a later report replaces what media/ held (a planted link, a stale video) instead of keeping it
    (run / a / "video.mp4").unlink()
    shutil.copy(tmp_path / "a-video.mp4", run / a / "video.mp4")  # the record's own video (meta.json's sha256)
    dst = out / data["cases"]["inside"]["runs"]["linky"]["video"]
    stale = dst.parent / f"{a}.mp4"
    stale.symlink_to(secret)
    write_report([run], out)
    assert not stale.is_symlink() and stale.read_bytes() == (run / a / "video.mp4").read_bytes()
