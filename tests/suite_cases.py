"""Test helper: one case of a built-in suite as a one-line manifest, to generate it on its own."""

import json
from pathlib import Path


def suite_case_manifest(folder: Path, *case_ids: str, suite: str = "worldmembench-engine") -> Path:
    from worldgate.trajectories.suites import load_suite

    cases = {c.id: c for c in load_suite(suite)}
    m = Path(folder) / "cases.jsonl"
    m.write_text("".join(json.dumps(cases[i].to_dict()) + "\n" for i in case_ids))
    return m
