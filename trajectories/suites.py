"""Suites: manifests of cases (id, reference image or Engine scene, prompt, trajectory, intrinsics, tags).

Each benchmark keeps its suites in its own home (``worldmark.py``, ``worldmembench.py``, ``multiworldbench/``),
found through :data:`SUITES`, a lazy registry like the models'; a new benchmark adds its module and a line here.
- ``manifest`` (or a path ending in ``.json``/``.jsonl``) reads user cases: one JSON object per case with keys
  ``id``, ``trajectory`` (name, text or segments), optional ``image``, ``scene``, ``prompt``, ``intrinsics``,
  ``image_size``, ``view``, ``tags``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import library
from .core import Trajectory, TrajectoryError
from .registry import Registry

CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class SuiteError(ValueError):
    """A suite could not be read; the message says what was expected and where to get it."""


def check_case_id(case_id: str) -> str:
    """Case ids become folder names: only [A-Za-z0-9_.-], not starting with a dot, no '..'."""
    if not isinstance(case_id, str) or not CASE_ID.fullmatch(case_id) or ".." in case_id:
        raise SuiteError(
            f"case id {case_id!r} is not safe as a folder name: use 1-128 characters from [A-Za-z0-9_.-], "
            "starting with a letter or digit, without '..'"
        )
    return case_id


@dataclass
class Case:
    id: str
    suite: str
    trajectory: Trajectory
    prompt: str = ""
    prompt_source: str | None = None
    image: str | None = None  # reference image path (image-conditioned suites)
    scene: dict | None = None  # Engine scene spec: {"seed", "palette", ...}
    intrinsics: list[float] | None = None  # [fx, fy, cx, cy] in original-image pixels
    image_size: tuple[int, int] | None = None  # (width, height) of the original image
    view: str = "first"  # "first" | "third"
    tags: dict[str, Any] = field(default_factory=dict)
    # WorldMemBench-style targets: [{"name", "kind": human|object|event, "mask": PNG path in the image's pixels}]
    targets: list[dict] | None = None
    # dynamic-memory item: {"gate": {"text", "answer"}, "questions": [{"category", "text", "answer"} x 8], "target"}
    dynamic: dict | None = None

    def __post_init__(self):
        check_case_id(self.id)
        if self.view not in ("first", "third"):
            raise SuiteError(f"case {self.id}: view must be 'first' or 'third', got {self.view!r}")
        if self.intrinsics is not None:
            k = np.asarray(self.intrinsics, dtype=float).reshape(-1)
            if k.shape != (4,) or not np.all(np.isfinite(k)) or k[0] <= 0 or k[1] <= 0:
                raise SuiteError(f"case {self.id}: intrinsics must be [fx, fy, cx, cy] with fx, fy > 0, got {self.intrinsics!r}")
            self.intrinsics = [float(v) for v in k]

    @property
    def hfov_deg(self) -> float | None:
        if self.intrinsics is None or self.image_size is None:
            return None
        return math.degrees(2 * math.atan(self.image_size[0] / (2 * self.intrinsics[0])))

    def to_dict(self) -> dict:
        return {
            "id": self.id, "suite": self.suite, "trajectory": self.trajectory.to_dict(), "prompt": self.prompt,
            "prompt_source": self.prompt_source, "image": self.image, "scene": self.scene,
            "intrinsics": self.intrinsics, "image_size": list(self.image_size) if self.image_size else None,
            "view": self.view, "tags": self.tags, **({"targets": self.targets} if self.targets else {}),
            **({"dynamic": self.dynamic} if self.dynamic else {}),
        }

    @classmethod
    def from_dict(cls, d: dict, suite: str = "manifest") -> "Case":
        if not isinstance(d, dict):
            raise SuiteError(f"a case must be a JSON object, got {type(d).__name__}")
        missing = {"id", "trajectory"} - set(d)
        if missing:
            raise SuiteError(f"case {d.get('id', '?')!r} lacks {sorted(missing)}; a case needs at least 'id' and 'trajectory'")
        try:
            traj = library.resolve(d["trajectory"])
        except TrajectoryError as e:
            raise SuiteError(f"case {d.get('id')!r}: {e}") from None
        cid = d.get("id")

        def want(key, types, what):
            v = d.get(key)
            if v is not None and not isinstance(v, types):
                raise SuiteError(f"case {cid!r}: {key!r} must be {what}, got {type(v).__name__} {v!r:.60}")
            return v

        want("prompt", str, "a string")
        want("prompt_source", str, "a string")
        want("image", str, "a path string")
        want("scene", dict, "an object (e.g. {\"seed\": 3})")
        want("tags", dict, "an object")
        targets = want("targets", list, "a list of {name, kind, mask}")
        for t in targets or []:
            if not isinstance(t, dict) or not isinstance(t.get("mask"), str) or \
                    t.get("kind") not in ("human", "object", "event") or not isinstance(t.get("name", ""), str):
                raise SuiteError(f"case {cid!r}: each target needs 'kind' (human, object or event), 'mask' (a PNG "
                                 f"path) and optionally 'name', got {t!r:.80}")
        dyn = want("dynamic", dict, "an object {gate, questions}")
        if dyn is not None:
            qs = dyn.get("questions")
            if not isinstance(dyn.get("gate"), dict) or not isinstance(qs, list) or len(qs) != 8 or not all(
                    isinstance(q, dict) and isinstance(q.get("text"), str) and isinstance(q.get("answer"), bool)
                    for q in qs):
                raise SuiteError(f"case {cid!r}: 'dynamic' needs a 'gate' {{text, answer}} and 8 'questions' "
                                 f"{{category, text, answer (true/false)}}")
        want("view", str, "'first' or 'third'")
        want("suite", str, "a string")
        size = want("image_size", (list, tuple), "[width, height]")
        if size is not None and (len(size) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                                             for v in size)):
            raise SuiteError(f"case {cid!r}: image_size must be [width, height] in pixels, got {size!r}")
        k = want("intrinsics", (list, tuple), "[fx, fy, cx, cy]")
        if k is not None and not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in k):
            raise SuiteError(f"case {cid!r}: intrinsics must be 4 numbers [fx, fy, cx, cy], got {k!r}")
        return cls(
            id=cid, suite=d.get("suite") or suite, trajectory=traj, prompt=d.get("prompt") or "",
            prompt_source=d.get("prompt_source"), image=d.get("image"), scene=d.get("scene"),
            intrinsics=k, image_size=tuple(size) if size else None, view=d.get("view") or "first",
            tags=dict(d.get("tags") or {}), targets=targets, dynamic=dyn,
        )


# ------------------------------------------------------------------------------------------------ engine cases
ENGINE_IMAGE_SIZE = (1024, 1024)  # the virtual "original image" of Engine cases
ENGINE_HFOV_DEG = 66.0  # WorldMark's median horizontal FOV (real domain)


def engine_intrinsics(hfov_deg: float = ENGINE_HFOV_DEG, size=ENGINE_IMAGE_SIZE) -> list[float]:
    w, h = size
    f = w / (2 * math.tan(math.radians(hfov_deg) / 2))
    return [f, f, (w - 1) / 2, (h - 1) / 2]


# -------------------------------------------------------------------------------------------------------- manifests
def manifest_suite(path: str | Path | None = None, data: str | Path | None = None, **_) -> list[Case]:
    path = Path(path or data or "")
    if not path.is_file():
        raise SuiteError(f"manifest {str(path)!r} not found: give a .json (list of cases) or .jsonl (one case per line)")
    text = path.read_text()
    try:
        rows = [json.loads(ln) for ln in text.splitlines() if ln.strip()] if path.suffix == ".jsonl" else json.loads(text)
    except json.JSONDecodeError as e:
        raise SuiteError(f"manifest {path}: not valid JSON ({e})") from None
    if isinstance(rows, dict):
        rows = rows.get("cases", [])
    if not isinstance(rows, list):
        raise SuiteError(f"manifest {path}: expected a list of cases")
    cases = [Case.from_dict(r, suite=path.stem) for r in rows]
    ids = [c.id for c in cases]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise SuiteError(f"manifest {path}: duplicate case ids {dup[:5]}")
    for c in cases:  # relative image and mask paths are relative to the manifest
        if c.image and not Path(c.image).is_absolute():
            c.image = str((path.parent / c.image).resolve())
        for t in c.targets or []:
            if not Path(t["mask"]).is_absolute():
                t["mask"] = str((path.parent / t["mask"]).resolve())
    return cases


SUITES = Registry("suite", {
    "worldmark": "worldgate.trajectories.worldmark:worldmark_suite",
    "worldmark-engine": "worldgate.trajectories.worldmark:worldmark_engine_suite",
    "worldmembench-engine": "worldgate.trajectories.worldmembench:worldmembench_engine_suite",
    "multiworldbench-engine": "worldgate.trajectories.multiworldbench.suite:multiworldbench_engine_suite",
    "manifest": "worldgate.trajectories.suites:manifest_suite",
})
SUITE_HELP = {
    "worldmark": "WorldMark's official arena_inputs (500 cases; needs --data DIR)",
    "worldmark-engine": "WorldMark's 15-id protocol on Engine scenes (15 cases; full=true for 500)",
    "manifest": "user cases from a .json/.jsonl file (--data FILE)",
    "worldmembench-engine": "WorldMemBench families x LR/LRLR/LRLRLR/LRUD/FRBL on Engine scenes (20; full=true 100)",
    "multiworldbench-engine": "MultiWorldBench: 7 two-player task suites on Engine scenes (20; full=true 495)",
}


def load_suite(name: str, **kwargs) -> list[Case]:
    if name.endswith((".json", ".jsonl")):
        return manifest_suite(name)
    cases = SUITES.get(name)(**kwargs)
    seen = set()
    for c in cases:
        if c.id in seen:
            raise SuiteError(f"suite {name}: duplicate case id {c.id}")
        seen.add(c.id)
    return cases
