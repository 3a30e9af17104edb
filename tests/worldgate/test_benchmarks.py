"""Benchmarks keep working as the code moves under them (three had stopped: each test here fails on what broke it).

Benchmarks that build with the tests' own helpers find them by module name, as conftest.py does
(tests/testpaths.py: put_on_path). When tests/ was split into package folders, benchmarks/learned_speed.py kept looking
in tests/ alone, so every tiny build became a skipped row and it timed nothing while exiting 0, and
benchmarks/lingbot_context.py opened tests/test_lingbot_v2_context.py, which had moved: each helper must now be found
from a plain interpreter, and a missing one stops the learned benchmark. benchmarks/plan_speed.py plans with every
adapter on the cases it takes."""

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


@pytest.mark.parametrize("call, where", [
    ("import learned_speed as B; m = B.tests_module('test_learned_searaft')",
     "tests/evaluate/features/test_learned_searaft.py"),
    ("import lingbot_context as B; m = B._tests()", "tests/adapters/test_lingbot_v2_context.py"),
])
def test_the_benchmarks_find_their_helpers_from_a_plain_interpreter(call, where):
    # run as a user runs them: no conftest.py has put the test folders on sys.path
    code = f"import sys; sys.path.insert(0, 'benchmarks'); {call}; print(m.__file__)"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith(where)


def test_plan_speed_plans_with_every_adapter_on_the_cases_it_takes(capsys):
    # the two-player adapters refuse one-camera cases: the benchmark once stopped at solaris-mp's first WorldMark case
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import plan_speed
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from worldgate.adapters import get_info, list_models

    assert plan_speed.main(["--limit", "2", "--data", str(ROOT / "no-arena-here")]) == 0
    out = capsys.readouterr().out
    rows = {ln.split()[0]: ln.split()[1:3] for ln in out.splitlines() if ln and ln.split()[0] in list_models()}
    expected = {m for m in list_models() if get_info(m).integration != "engine"}
    assert set(rows) == expected and {m for m in expected if get_info(m).players == 2} == {"solaris-mp", "solaris-sp"}
    assert all(r == ["2", "0"] for r in rows.values()), rows  # two cases planned, none it cannot express
    assert "worldmark-engine --full (arena not found)" in out and "two-player adapters" in out


def _benchmark_flag_uses() -> dict[str, set[tuple[str, str]]]:
    """benchmark name -> {(flag, file:line)} of every `benchmarks/NAME.py --flag ...` in README.md, docs/*.md, the
    benchmarks' own docstrings and the shell scripts (continuation lines joined)."""
    srcs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").glob("*.py")),
            *sorted((ROOT / "benchmarks").glob("*.sh")), *sorted((ROOT / "scripts").glob("*.sh"))]
    # the command's words: the rest of the line up to a code span's end, a comment, a pipe or another command
    call = re.compile(r"benchmarks/([a-z_]+)\.py([^`#|;&]*?)(?=benchmarks/|[`#|;&]|$)")
    uses: dict[str, set[tuple[str, str]]] = {}
    for f in srcs:
        for n, line in enumerate(re.sub(r"\\\n\s*", " ", f.read_text()).splitlines(), 1):
            for m in call.finditer(line):
                uses.setdefault(m.group(1), set()).update(
                    (flag, f"{f.name}:{n}") for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", m.group(2)))
    return uses


def test_every_flag_the_docs_give_a_benchmark_is_one_it_takes():
    uses = _benchmark_flag_uses()
    assert len(uses) >= 10 and sum(map(len, uses.values())) >= 50
    assert ("--skip-memory", "evaluate_speed.py:3") in uses["evaluate_speed"]  # [--skip-memory] in its usage line
    wrong = []
    for name, flags in sorted(uses.items()):
        bench = ROOT / "benchmarks" / f"{name}.py"
        assert bench.is_file(), f"the docs name benchmarks/{name}.py, which is not there"
        shown = subprocess.run([sys.executable, str(bench), "--help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=120).stdout
        takes = set(re.findall(r"--[a-z][\w-]*", shown))
        assert "--help" in takes, (name, shown[-500:])
        wrong += [f"{where}: benchmarks/{name}.py {flag}" for flag, where in sorted(flags) if flag not in takes]
    assert not wrong, "\n".join(wrong)
