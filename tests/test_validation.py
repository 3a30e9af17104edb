"""Every metric is proven on Engine faults: GT scores high, each fault lowers its own metric by its stated margin,
unrelated metrics stay within tolerance (worldgate/experiments/validate.py states all three)."""

from worldgate.experiments.validate import CONTROL_MEMORY, check, markdown, run_validation
from worldgate.adapters.engine.faults import FAULT_TARGETS


def test_each_fault_is_caught_by_its_metric(tmp_path):
    res = run_validation(tmp_path / "validate", seconds=6.0, size=192, multiworld=False)  # MWB: test_multiworld_faults
    failing = [c for c in res["checks"] if not c["ok"]]
    assert not failing, markdown(res)
    assert set(res["table"]) == {"engine", *FAULT_TARGETS}
    gt = res["table"]["engine"]
    assert all(gt[m] is not None for m in CONTROL_MEMORY)
    # the checks are real: a table where a fault does nothing fails them
    fake = {m: dict(gt) for m in res["table"]}
    assert not all(c["ok"] for c in check(fake))
