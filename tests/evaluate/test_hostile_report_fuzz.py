"""Report inputs, property-tested (issue 29, item 6): a results.json (and samples.jsonl) holding any JSON value in any
field, huge integers, NaN, Infinity, a string where a number belongs, gives either the report's tables or
``ReportError`` lines each naming the file and the field, never another exception."""

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worldgate.evaluate.report import ReportError, comparability, load_run
from worldgate.evaluate.report_tables import declared, page_tables, table
from worldgate.evaluate.results import write_results


def _summary(mean):
    return {"mean": mean, "std": 0.0, "n": 1, "coverage": 1.0, "unavailable": {}, "ci": None}


def _results(run):
    return {"run": str(run), "metrics": {"local_memory": _summary(50.0), "direction_accuracy_trans": _summary(70.0)},
            "records": 1, "errors": {}, "caveats": {},
            "backends": {"flow": {"backend": "classical", "key": "flow@4-classical"}},
            "config": {"backend": "classical", "params": {}, "run_config": None},
            "features": {"computed": 0, "cached": 0}, "seconds": 1.5,
            "protocol": {"status": "complete", "differences": [], "settings": {}, "fingerprint": "f", "cases": 1,
                         "case_set": "c"}}


SAMPLE = {"case": "c1", "tags": {"domain": "real"}, "scores": {"local_memory": 50.0}, "unavailable": {},
          "detail": {}, "timing": None}
# a value of any JSON kind, with the numbers that broke the report: huge integers, NaN, Infinity, 1e300
SCALARS = (st.none() | st.booleans() | st.integers() | st.sampled_from([10 ** 40, -(10 ** 300), 2 ** 53 + 1]) |
           st.floats() | st.sampled_from([1e300, -1e300]) | st.text(max_size=6))
JSON = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                    max_leaves=6)
FIELDS = [("run",), ("records",), ("seconds",), ("errors",), ("caveats",), ("metrics",), ("metrics", "local_memory"),
          ("metrics", "local_memory", "mean"), ("metrics", "local_memory", "std"), ("metrics", "local_memory", "n"),
          ("metrics", "local_memory", "coverage"), ("metrics", "local_memory", "ci"),
          ("metrics", "direction_accuracy_trans", "mean"), ("backends",), ("backends", "flow", "backend"),
          ("config",), ("config", "params"), ("features", "computed"), ("protocol",), ("protocol", "status"),
          ("protocol", "differences"), ("protocol", "cases"), ("schema_version",), ("imported",), ("provenance",)]
SFIELDS = [("case",), ("tags",), ("scores",), ("scores", "local_memory"), ("unavailable",), ("detail",), ("timing",)]


def _put(d, path, v):
    for k in path[:-1]:
        if not isinstance(d.get(k), dict):
            return
        d = d[k]
    d[path[-1]] = v


@settings(max_examples=1000, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(range(len(FIELDS) + len(SFIELDS))), JSON), min_size=1, max_size=3))
def test_any_value_in_results_gives_tables_or_lines_naming_file_and_field(tmp_path_factory, edits):
    run = tmp_path_factory.mktemp("fz") / "run"
    run.mkdir()
    write_results(run, _results(run), [SAMPLE], history=False)
    res, smp = json.loads((run / "results.json").read_text()), copy.deepcopy(SAMPLE)
    for i, v in edits:
        if i < len(FIELDS):
            _put(res, FIELDS[i], v)
        else:
            _put(smp, SFIELDS[i - len(FIELDS)], v)
    try:
        (run / "results.json").write_text(json.dumps(res))  # NaN and Infinity as Python's json writes them
        (run / "samples.jsonl").write_text(json.dumps(smp) + "\n")
    except ValueError:  # an integer too long for json to write
        return
    try:
        r = load_run(run)
    except ReportError as e:
        lines = [ln for ln in str(e).splitlines() if not ln.startswith(("(", "... and"))]
        assert lines and all(str(run / "results.json") in ln or str(run / "samples.jsonl") in ln or
                             "results.json" in ln or "samples.jsonl" in ln for ln in lines), str(e)
        return
    comparability([r], allow_mixed=False)
    for t in declared():
        table([r], t)
    page_tables([r])
