"""benchmarks/learned_speed.py builds its tiny models with the tests' own helpers, found by module name as conftest.py
finds them. When tests/ was split into package folders it kept looking in tests/ alone, every tiny build became a
skipped row, and the benchmark timed nothing while exiting 0: each name it asks for must now be found, and a missing
one stops it."""

import importlib.machinery
import importlib.util
import re
import subprocess
import sys

import pytest
from testpaths import ROOT, helper_dirs

BENCH = ROOT / "benchmarks" / "learned_speed.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("learned_speed_under_test", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def test_every_helper_module_the_learned_benchmark_names_is_found_where_it_looks():
    names = sorted(set(re.findall(r'tests_module\("(\w+)"\)', BENCH.read_text())))
    assert {"test_learned", "test_learned_da3", "test_learned_qalign", "test_learned_targets",
            "test_learned_identity", "test_learned_vggt", "test_learned_searaft"} <= set(names)
    where = [str(d) for d in helper_dirs()]
    for name in names:
        spec = importlib.machinery.PathFinder.find_spec(name, where)
        assert spec is not None, name
        assert spec.origin.endswith(f"/{name}.py")


def test_a_helper_that_is_not_there_stops_the_benchmark(bench):
    with pytest.raises(bench.MissingHelper, match="test_no_such_helper.py"):
        bench.tests_module("test_no_such_helper")
    assert issubclass(bench.Skip, Exception) and not issubclass(bench.MissingHelper, bench.Skip)


def test_the_benchmark_finds_a_helper_from_a_plain_interpreter():
    # run as a user runs it: no conftest.py has put the test folders on sys.path
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import learned_speed as L; "
            "print(L.tests_module('test_learned_searaft').__file__)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("tests/evaluate/features/test_learned_searaft.py")
