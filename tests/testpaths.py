"""Where the tests stand: the repository, the tests folder, its data, and ../shared beside the checkout (the team's
shared inputs, e.g. WorldMark's arena_inputs; tests that need it skip where it is absent)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
SHARED = ROOT.parent / "shared"


def helper_dirs() -> list[Path]:
    """tests/ and every folder of it that holds test modules, deepest name first: test modules import each other's
    tiny-model builders by name (test_learned's tiny_models, test_judge_vlm's tiny_qwen), so conftest.py puts all of
    these on sys.path, and so do the benchmarks that build with the same helpers (:func:`put_on_path`)."""
    return sorted({p.parent for p in TESTS.rglob("test_*.py")} | {TESTS}, reverse=True)


def put_on_path() -> None:
    """Put tests/ and its test folders on sys.path as conftest.py does, for a benchmark that imports a test module by
    name (benchmarks/learned_speed.py, benchmarks/lingbot_context.py): a path into tests/ breaks when a test moves."""
    import sys

    for d in helper_dirs():
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
