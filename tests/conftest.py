import sys
from pathlib import Path

# shared test helpers (the adapter conformance mixin, testpaths) live beside the tests; test modules in the package
# folders import each other's tiny-model builders by name (test_judge_vlm's tiny_qwen, test_conformance's fakes), so
# every test folder is on the path whichever file is collected first
_TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(_TESTS))
from testpaths import helper_dirs  # noqa: E402

for _d in helper_dirs():
    sys.path.insert(0, str(_d))

import json  # noqa: E402

import pytest  # noqa: E402

#: a WorldMark-protocol Engine run shared by the export and import tests: W (action 1) and LR (action 7: a revisit
#: round trip), 6 s per key, 128x128, in the split _real_first
WORLDMARK_CASES = [
    {"id": "first-real-000_001", "trajectory": "worldmark:1", "scene": {"seed": 1, "palette": "realistic"},
     "tags": {"view": "first", "domain": "real", "image": 0, "action_id": 1}},
    {"id": "first-real-001_007", "trajectory": "worldmark:7", "scene": {"seed": 2, "palette": "realistic"},
     "tags": {"view": "first", "domain": "real", "image": 1, "action_id": 7}},
]


@pytest.fixture(scope="session")
def worldmark_engine_run(tmp_path_factory):
    """(run folder, its results) of the shared WorldMark Engine run, scored once on the classical backend; tests
    read it and write elsewhere."""
    from worldgate.evaluate.runner import evaluate_run
    from worldgate.generate.runner import run_generate

    root = tmp_path_factory.mktemp("wmengine")
    m = root / "cases.jsonl"
    k = [776.0, 776.0, 511.5, 511.5]
    m.write_text("".join(json.dumps(dict(c, intrinsics=k, image_size=[1024, 1024])) + "\n" for c in WORLDMARK_CASES))
    run = root / "run"
    res = run_generate("engine", str(m), run, overrides=["model.width=128", "model.height=128",
                                                         "trajectory.seconds=6"], progress=False)
    assert res.exit_code == 0, res.failed
    return run, evaluate_run(run, progress=False)



#: the longest test files, longest first (seconds of a whole suite run on 2 cores, pytest --durations): scripts/test.sh
#: runs pytest-xdist with --dist loadfile (a file's module fixtures are built once, on one worker) in this order, so
#: the long files start at once, one per worker, and the short ones fill in around them instead of one worker
#: running a long file alone at the end
LONG_FIRST = (
    "tests/worldgate/test_validation.py",  # Engine-fault validation: ten rollouts and evaluations (~4 min)
    "tests/worldgate/test_end_to_end.py",
    "tests/adapters/test_conformance.py",
    "tests/evaluate/worldmembench/test_memory.py",
    "tests/generate/test_robustness.py",
    "tests/evaluate/features/test_learned_targets.py",
    "tests/evaluate/multiworldbench/test_multiworld.py",
    "tests/evaluate/features/test_learned_every_metric.py",
    "tests/worldgate/test_cluster.py",
    "tests/evaluate/test_report.py",
    "tests/generate/test_tampering.py",
    "tests/worldgate/test_dist.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.nodeid.split("::", 1)[0]
        return LONG_FIRST.index(path) if path in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order
