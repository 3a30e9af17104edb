"""Where the tests stand: the repository, the tests folder, its data, and ../shared beside the checkout (the team's
shared inputs, e.g. WorldMark's arena_inputs; tests that need it skip where it is absent)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
SHARED = ROOT.parent / "shared"
