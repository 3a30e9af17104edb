"""``worldgate build-suite``: a benchmark suite from the user's own images (issue 19).

WorldMark (``--benchmark worldmark``) writes the official ``arena_inputs`` layout that ``--suite worldmark --data DIR``
reads; WorldMemBench (``--benchmark worldmembench``) writes a ``cases.jsonl`` with targets and dynamic checklists
(docs/worldmembench-cases.md). Every model step (captions, action selection, third-person composites, intrinsics) can
be given as a file instead, so the whole path runs with no model. See docs/build-suite.md.
"""

from .build import BuildError, BuildResult, build_suite

__all__ = ["BuildError", "BuildResult", "build_suite"]
