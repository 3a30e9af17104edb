"""Every metric is proven on Engine faults: GT scores high, each fault lowers its own metric by its stated margin,
unrelated metrics stay within tolerance (worldgate/experiments/validate.py states all three)."""

import inspect

from worldgate.adapters.engine.faults import FAULT_TARGETS, WMB_FAULT_TARGETS
from worldgate.experiments.validate import (CONTROL_MEMORY, WMB_DYNAMIC, WMB_FAULT_CASES, WMB_STATIC, check,
                                            check_worldmembench, markdown, run_validation,
                                            run_worldmembench_validation)


def test_each_fault_is_caught_by_its_metric(tmp_path):
    # MWB: test_multiworld_faults; WorldMemBench: test_worldmembench_faults_are_caught below
    res = run_validation(tmp_path / "validate", seconds=6.0, size=192, multiworld=False, worldmembench=False)
    failing = [c for c in res["checks"] if not c["ok"]]
    assert not failing, markdown(res)
    assert set(res["table"]) == {"engine", *FAULT_TARGETS}
    gt = res["table"]["engine"]
    assert all(gt[m] is not None for m in CONTROL_MEMORY)
    # the checks are real: a table where a fault does nothing fails them
    fake = {m: dict(gt) for m in res["table"]}
    assert not all(c["ok"] for c in check(fake))


def test_worldmembench_faults_are_caught(tmp_path):
    """`worldgate validate` covers WorldMemBench: the dynamic-memory faults (engine-freeze, engine-reset) lose the
    measured dynamic probe and the static-memory fault (engine-memory with a one-chunk context) loses human/object
    appearance and environment visible, each by its margin; Engine GT reaches its floor on every one of them."""
    # validate runs it by default (classical), at most at WMB_SIZE
    assert inspect.signature(run_validation).parameters["worldmembench"].default is True
    # every WorldMemBench fault has a check, on a dynamic and on the static memory metrics
    assert {"engine-freeze", "engine-reset"} <= set(WMB_FAULT_TARGETS) and set(WMB_FAULT_CASES) == set(WMB_FAULT_TARGETS)
    assert all(WMB_FAULT_TARGETS[f] for f in WMB_FAULT_TARGETS)
    covered = {m for t in WMB_FAULT_TARGETS.values() for m in t}
    assert "dynamic_probe_score" in covered and {"human_appearance", "object_appearance", "environment_visible"} <= covered

    res = run_worldmembench_validation(tmp_path / "wmb")
    table = res["table"]
    wm = {"table": table, "checks": res["checks"], "size": res["size"]}
    failing = [c for c in res["checks"] if not c["ok"]]
    assert not failing, failing
    assert set(table) == {"engine", *WMB_FAULT_TARGETS}
    gt = table["engine"]
    assert all(gt[m] is not None for m in WMB_STATIC + WMB_DYNAMIC), gt
    names = {c["check"] for c in res["checks"]}
    for f, targets in WMB_FAULT_TARGETS.items():
        for m, margin in targets.items():
            assert f"worldmembench {f} lowers {m} by >= {margin:g}" in names
    # the checks are real: a fault that does nothing fails them, and so does one missing from the table
    assert not all(c["ok"] for c in check_worldmembench({m: dict(gt) for m in table}))
    missing = check_worldmembench({m: v for m, v in table.items() if m != "engine-reset"})
    assert [c["ok"] for c in missing if "engine-reset" in c["check"]] == [False]
    # the section reaches the validation doc
    md = markdown({"table": {"engine": {}}, "checks": res["checks"], "seconds": 6.0, "size": 256,
                   "backend": "classical", "worldmembench": wm})
    assert "## WorldMemBench memory faults" in md and "engine-reset" in md
