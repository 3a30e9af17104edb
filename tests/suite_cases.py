"""Test helpers: one case of a built-in suite as a one-line manifest, to generate it on its own; one small Engine
record from a trajectory."""

import json
from pathlib import Path


def suite_case_manifest(folder: Path, *case_ids: str, suite: str = "worldmembench-engine") -> Path:
    from worldgate.trajectories.suites import load_suite

    cases = {c.id: c for c in load_suite(suite)}
    m = Path(folder) / "cases.jsonl"
    m.write_text("".join(json.dumps(cases[i].to_dict()) + "\n" for i in case_ids))
    return m


def engine_record(root: Path, name: str, trajectory: str, tags: dict | None = None, w: int = 64, h: int = 48) -> Path:
    """Generate one Engine case (scene seed 5) at ``w`` x ``h`` into ``root/run-NAME``; the record's folder."""
    from worldgate.generate.runner import run_generate

    m = Path(root) / f"{name}.jsonl"
    case = {"id": name, "trajectory": trajectory, "scene": {"seed": 5}}
    if tags:
        case["tags"] = tags
    m.write_text(json.dumps(case) + "\n")
    out = Path(root) / f"run-{name}"
    assert run_generate("engine", str(m), out, overrides=[f"model.width={w}", f"model.height={h}"],
                        progress=False).exit_code == 0
    return out / name
