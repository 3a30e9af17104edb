"""One results schema (evaluate/results.py) and benchmarks that declare their report (issue 26 items 2 and 4, issue 28
item 6): the one writer refuses what no benchmark declared, the one reader names the file and field of every
violation, a toy benchmark registered for one test gets its table in the Markdown and HTML report and in evaluate's
printed table without any report code knowing it, and evaluate prints only the benchmarks whose cases a run holds."""

import json

import pytest

from worldgate.evaluate import metrics as M
from worldgate.evaluate.report import ReportError, write_report
from worldgate.evaluate.results import (SCHEMA_VERSION, ResultsError, encode, read_results, read_samples,
                                        write_results)
from worldgate.evaluate.runner import format_table
from worldgate.evaluate.score import Benchmark, Table, mean_of, metric


def _summary(mean, n=2, records=2):
    return {"mean": mean, "std": 0.0, "n": n, "coverage": n / records, "unavailable": {}, "ci": None}


def _results(run, metrics, records=2, **extra):
    return {"run": str(run), "metrics": metrics, "records": records, "errors": {}, "caveats": {},
            "backends": {"flow": {"backend": "classical", "key": "flow@4-classical"}},
            "config": {"backend": "classical", "params": {}, "run_config": None}, "features": {"computed": 0,
                                                                                               "cached": 0},
            "seconds": 1.5, "protocol": {"status": "complete", "differences": [], "settings": {}, "fingerprint": "f",
                                         "cases": records, "case_set": "c"}, **extra}


def _sample(case, scores, **tags):
    return {"case": case, "tags": tags, "scores": scores, "unavailable": {}, "detail": {}, "timing": None}


# ------------------------------------------------------------------------------------------------------ writer
def test_written_results_read_back_unchanged_with_their_version(tmp_path):
    res = _results(tmp_path, {"local_memory": _summary(71.25)})
    smp = [_sample("a", {"local_memory": 70.0}), _sample("b", {"local_memory": 72.5})]
    write_results(tmp_path, res, smp, history=True)
    back = read_results(tmp_path)
    assert back.schema_version == SCHEMA_VERSION == 1
    assert back.to_dict() == {**res, "schema_version": 1}  # every key and value as given, nothing coerced
    assert back.metrics["local_memory"].mean == 71.25 and back.records == 2
    assert [s.to_dict() for s in read_samples(tmp_path)] == smp
    hist = sorted((tmp_path / "results").iterdir())
    assert [p.name[:8] for p in hist] == ["results_", "samples_"]
    assert read_results(hist[0]).to_dict() == back.to_dict()  # a history file reads through the same reader


def test_writer_refuses_an_undeclared_section_and_a_malformed_value(tmp_path):
    with pytest.raises(ValueError, match=r"undeclared top-level keys \['my_table'\].*Benchmark.sections"):
        encode(_results(tmp_path, {}, my_table={"x": 1}), [])
    with pytest.raises(ResultsError, match=r'"records" is a JSON string, not an integer'):
        encode(_results(tmp_path, {}, records="2"), [])
    text, _ = encode(_results(tmp_path, {"local_memory": _summary(float("nan"))}), [])
    assert json.loads(text)["metrics"]["local_memory"]["mean"] is None  # non-finite is written as null
    assert not (tmp_path / "results.json").exists()


# ------------------------------------------------------------------------------------------------------ reader
@pytest.mark.parametrize("edit, expect", [
    ('"mean": Infinity', '"metrics"."local_memory"."mean" is Infinity, not a finite number'),
    ('"records": 1' + "0" * 40, '"records" is 1' + "0" * 36),
    ('"records": "two"', '"records" is a JSON string, not an integer'),
    ('"n": -1', '"metrics"."local_memory"."n" is -1, below its range\'s 0'),
    ('"coverage": 1.5', '"metrics"."local_memory"."coverage" is 1.5, above its range\'s 1'),
    ('"mean": 250.0', '"metrics"."local_memory"."mean" 250 is outside the metric\'s range 0-100'),
    ('"multiworld": {"tracks": {"t": {"mean": "x"}}}', '"multiworld"."tracks"."t"."mean" is a JSON string'),
    ('"records": 1' + "0" * 5000, "is not valid JSON (Exceeds the limit"),
])
def test_reader_names_the_file_and_the_field(tmp_path, edit, expect):
    key = edit.split(":")[0]
    base = {"run": "r", "records": 2, "metrics": {"local_memory": _summary(50.0)}}
    text = json.dumps(base)
    if key in ('"mean"', '"n"', '"coverage"'):
        text = text.replace(f'{key}: ' + json.dumps(base["metrics"]["local_memory"][key.strip('"')]), edit)
    elif key == '"records"':
        text = text.replace('"records": 2', edit)
    else:
        text = text[:-1] + ", " + edit + "}"
    (tmp_path / "results.json").write_text(text)
    with pytest.raises(ResultsError) as e:
        read_results(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "results.json") in msg and expect in msg and len(msg.splitlines()) == 1, msg


def test_reader_lists_every_violation_one_line_each(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"records": -1, "seconds": "slow", "errors": {"a": 3}}))
    with pytest.raises(ResultsError) as e:
        read_results(tmp_path)
    lines = str(e.value).splitlines()
    assert len(lines) == 4 and all(ln.startswith(str(tmp_path / "results.json")) for ln in lines[:3]), lines
    assert sorted(ln.split(": ", 1)[1] for ln in lines[:3]) == [
        '"errors"."a" is a JSON integer, not a string', '"records" is -1, below its range\'s 0',
        '"seconds" is a JSON string, not a number'], lines
    (tmp_path / "samples.jsonl").write_text('{"case": "a", "scores": {"m": "high"}}\n')
    with pytest.raises(ResultsError, match=r'samples.jsonl line 1: "scores"."m" is a JSON string, not a number'):
        read_samples(tmp_path)


# ------------------------------------------------------------------------------------------ a toy benchmark
TOY = Benchmark(name="toybench", title="ToyBench", metrics={"toy_sharpness": metric("Toy Sharpness", "ToyBench")},
                params={}, score=lambda feat, rec, backend, P: {},
                report=(Table("ToyBench", ("toy_sharpness",), file="toybench",
                              columns={"toy overall": mean_of(("toy_sharpness",))}),),
                owns=lambda s: (s.get("tags") or {}).get("toy") is True)


@pytest.fixture
def toy_registered(monkeypatch):
    """TOY registered beside the built-in benchmarks for this test only."""
    monkeypatch.setattr(M.BENCHMARKS, "builtin", {**M.BENCHMARKS.builtin, "toybench": f"{__name__}:TOY"})
    M.BENCHMARKS.refresh()
    M.metric_info.cache_clear()
    yield
    monkeypatch.undo()
    M.BENCHMARKS.refresh()
    M.metric_info.cache_clear()


def _toy_run(root, name, value):
    run = root / name
    run.mkdir()
    write_results(run, _results(run, {"toy_sharpness": _summary(value)}),
                  [_sample(c, {"toy_sharpness": value}, toy=True) for c in ("c1", "c2")],
                  history=False)
    return run


def test_a_toy_benchmark_gets_its_table_without_report_code(toy_registered, tmp_path):
    runs = [_toy_run(tmp_path, "alpha", 81.25), _toy_run(tmp_path, "beta", 42.0)]
    out = tmp_path / "rep"
    written = write_report(runs, out)
    assert written["toybench"] == "toybench.md"
    md = (out / "toybench.md").read_text()
    assert "### ToyBench" in md and "| model | records | Toy Sharpness | toy overall |" in md, md
    assert "| alpha | 2 | **81.2** | 81.250 |" in md and "| beta | 2 | 42.0 ▼ | 42.000 |" in md, md
    assert (out / "toybench.csv").read_text().splitlines()[1:] == ["alpha,2,81.25,81.25", "beta,2,42,42"]
    page = (out / "index.html").read_text()
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    toy = [t for t in data["tables"] if t["title"] == "ToyBench"]
    assert toy and toy[0]["columns"] == ["model", "records", "Toy Sharpness", "toy overall"]
    assert [(r["run"], r["cells"], r["marks"]) for r in toy[0]["rows"]] == [
        ("alpha", ["81.2", "81.250"], ["best", ""]), ("beta", ["42.0", "42.000"], ["worst", ""])]
    # evaluate's table: the toy run holds only ToyBench's cases, so no other benchmark's rows are printed
    res = [json.loads((r / "results.json").read_text()) for r in runs]
    table = format_table(res, [[s.to_dict() for s in read_samples(r)] for r in runs])
    assert table.splitlines()[1].startswith("Toy Sharpness") and "81.2" in table.splitlines()[1], table
    assert "Direction Accuracy" not in table and "Imaging Quality" not in table


def test_without_the_toy_its_section_is_refused_and_its_table_gone(tmp_path):
    with pytest.raises(ValueError, match="undeclared top-level keys"):
        encode(_results(tmp_path, {}, toybench={"x": 1}), [])
    run = tmp_path / "r"
    run.mkdir()
    write_results(run, _results(run, {}), [], history=False)
    assert "toybench" not in write_report([run], tmp_path / "rep")


def test_evaluate_prints_only_the_benchmarks_whose_cases_the_run_holds(tmp_path):
    ms = {"direction_accuracy_trans": _summary(60.0), "imaging_quality": _summary(0.5),
          "control_isolation": _summary(None, n=0)}
    res = [_results(tmp_path / "wm", ms)]
    wm = format_table(res, [[_sample("a", {}, domain="real", view="first")]])
    assert "Direction Accuracy (translation)" in wm and "Imaging Quality" not in wm and "Control Isolation" not in wm
    wmb = format_table(res, [[_sample("a", {}, family="human")]])
    assert "Imaging Quality" in wmb and "Direction Accuracy" not in wmb, wmb
    assert "Imaging Quality" in format_table(res)  # without samples: every metric the results hold


def test_report_error_names_the_field(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    write_results(run, _results(run, {"local_memory": _summary(50.0)}), [], history=False)
    p = run / "results.json"
    p.write_text(p.read_text().replace('"seconds": 1.5', '"seconds": -3'))
    with pytest.raises(ReportError, match=r'results.json: "seconds" is -3, below its range\'s 0'):
        write_report([run], tmp_path / "rep")
