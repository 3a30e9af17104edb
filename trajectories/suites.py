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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import library
from .core import Trajectory, TrajectoryError, short_repr, unknown_key
from .registry import Registry

#: the keys of a case object (``Case.to_dict`` writes all of them)
CASE_KEYS = ("id", "suite", "trajectory", "prompt", "prompt_source", "image", "scene", "intrinsics", "image_size",
             "view", "tags", "targets", "dynamic")
CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

# Limits of a case (checked in Case, so every suite obeys them; errors name the constant)
MIN_IMAGE_SIDE = 16  # image_size: [width, height], integers in [MIN_IMAGE_SIDE, MAX_IMAGE_SIDE] pixels
MAX_IMAGE_SIDE = 16384
# intrinsics [fx, fy, cx, cy]: finite; with image_size, fx and fy in [FOCAL_MIN_RATIO, FOCAL_MAX_RATIO] x the larger
# image side (a horizontal FOV of about 169 deg down to 0.6 deg) and the principal point within one image size of the
# image (cx in [-width, 2 * width], cy in [-height, 2 * height]); without image_size, the same for the largest image
FOCAL_MIN_RATIO = 0.05
FOCAL_MAX_RATIO = 100.0
MAX_JSON_DEPTH = 32  # nesting of a manifest's JSON values (a case is a few levels deep)


class SuiteError(ValueError):
    """A suite could not be read; the message says what was expected and where to get it."""


def check_case_id(case_id: str) -> str:
    """Case ids become folder names: only [A-Za-z0-9_.-], not starting with a dot, no '..'."""
    if not isinstance(case_id, str) or not CASE_ID.fullmatch(case_id) or ".." in case_id:
        raise SuiteError(
            f"case id {short_repr(case_id, 60)} is not safe as a folder name: use 1-128 characters from "
            "[A-Za-z0-9_.-], "
            "starting with a letter or digit, without '..'"
        )
    return case_id


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_image_size(size, what: str = "case") -> tuple[int, int]:
    """``[width, height]``: two integers in [MIN_IMAGE_SIDE, MAX_IMAGE_SIDE]."""
    if not isinstance(size, (list, tuple)) or len(size) != 2 or not all(
            _is_int(v) and MIN_IMAGE_SIDE <= v <= MAX_IMAGE_SIDE for v in size):
        raise SuiteError(f"{what}: image_size must be [width, height], integers in [{MIN_IMAGE_SIDE}, "
                         f"{MAX_IMAGE_SIDE}] pixels (MIN_IMAGE_SIDE, MAX_IMAGE_SIDE), got {short_repr(size)}")
    return int(size[0]), int(size[1])


def check_intrinsics(k, size: tuple[int, int] | None, what: str = "case") -> list[float]:
    """``[fx, fy, cx, cy]`` in pixels of an image of ``size``: finite, focal lengths within [FOCAL_MIN_RATIO,
    FOCAL_MAX_RATIO] x the larger image side, the principal point within one image size of the image."""
    if not isinstance(k, (list, tuple, np.ndarray)) or len(k) != 4 or not all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in k):
        raise SuiteError(f"{what}: intrinsics must be 4 numbers [fx, fy, cx, cy], got {short_repr(k)}")
    try:
        fx, fy, cx, cy = (float(v) for v in k)
    except OverflowError:
        raise SuiteError(f"{what}: intrinsics are out of range, got {short_repr(k)}") from None
    w, h = size if size is not None else (MAX_IMAGE_SIDE, MAX_IMAGE_SIDE)
    side = max(w, h) if size is not None else MIN_IMAGE_SIDE
    fmin, fmax = FOCAL_MIN_RATIO * side, FOCAL_MAX_RATIO * max(w, h)
    if not all(math.isfinite(v) for v in (fx, fy, cx, cy)):
        raise SuiteError(f"{what}: intrinsics must be finite numbers [fx, fy, cx, cy], got {short_repr(k)}")
    if not (fmin <= fx <= fmax and fmin <= fy <= fmax):
        ref = f"image_size {w}x{h}" if size is not None else "any image (no image_size given)"
        raise SuiteError(f"{what}: focal lengths fx, fy must be in [{fmin:g}, {fmax:g}] pixels for {ref} "
                         f"(FOCAL_MIN_RATIO = {FOCAL_MIN_RATIO:g} to FOCAL_MAX_RATIO = {FOCAL_MAX_RATIO:g} x the "
                         f"larger side), got fx={fx:g}, fy={fy:g}")
    if not (-w <= cx <= 2 * w and -h <= cy <= 2 * h):
        raise SuiteError(f"{what}: principal point ({cx:g}, {cy:g}) is more than one image size outside the "
                         f"{w}x{h} image (cx in [-width, 2 width], cy in [-height, 2 height])")
    return [fx, fy, cx, cy]


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
        if self.image_size is not None:
            self.image_size = check_image_size(self.image_size, f"case {self.id}")
        if self.intrinsics is not None:
            self.intrinsics = check_intrinsics(self.intrinsics, self.image_size, f"case {self.id}")

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
            raise SuiteError(f"case {short_repr(d.get('id', '?'), 60)} lacks {sorted(missing)}; a case needs at least "
                             "'id' and 'trajectory'")
        cid = d.get("id")
        check_case_id(cid)
        check_depth(d, f"case {cid!r}")
        why = unknown_key(d, CASE_KEYS, "key", "a case")
        if why:  # a typo ("intrinsic") would silently run the default
            raise SuiteError(f"case {cid!r}: {why}")
        try:
            traj = library.resolve(d["trajectory"])
        except TrajectoryError as e:
            raise SuiteError(f"case {cid!r}: {e}") from None

        def want(key, types, what):
            v = d.get(key)
            if v is not None and not isinstance(v, types):
                raise SuiteError(f"case {cid!r}: {key!r} must be {what}, got {type(v).__name__} {short_repr(v, 60)}")
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
                                 f"path) and optionally 'name', got {short_repr(t)}")
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
        if size is not None:
            size = check_image_size(size, f"case {cid!r}")
        k = want("intrinsics", (list, tuple), "[fx, fy, cx, cy]")
        if k is not None:
            k = check_intrinsics(k, size, f"case {cid!r}")
        return cls(
            id=cid, suite=d.get("suite") or suite, trajectory=traj, prompt=d.get("prompt") or "",
            prompt_source=d.get("prompt_source"), image=d.get("image"), scene=d.get("scene"),
            intrinsics=k, image_size=tuple(size) if size else None, view=d.get("view") or "first",
            tags=dict(d.get("tags") or {}), targets=targets, dynamic=dyn,
        )


def check_depth(value, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """JSON values nest at most ``limit`` (MAX_JSON_DEPTH) levels; checked without recursion."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            if depth > limit:
                raise SuiteError(f"{what}: JSON nested deeper than {limit} levels (MAX_JSON_DEPTH)")
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))


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
    if path.is_dir():
        raise SuiteError(f"manifest {str(path)!r} is a folder: give a .json (list of cases) or .jsonl (one case per "
                         "line) file")
    if not path.is_file():
        raise SuiteError(f"manifest {str(path)!r} not found: give a .json (list of cases) or .jsonl (one case per line)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SuiteError(f"manifest {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    jsonl = path.suffix == ".jsonl"
    rows, where, lines = [], "file", []
    try:
        if jsonl:
            for n, ln in enumerate(text.splitlines(), start=1):
                if ln.strip():
                    where = f"line {n}"
                    rows.append(json.loads(ln))
                    lines.append(n)
        else:
            rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise SuiteError(f"manifest {path}: not valid JSON ({where}: {e})") from None
    except RecursionError:
        raise SuiteError(f"manifest {path}: JSON nested too deeply ({where}); cases nest at most "
                         f"{MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH)") from None
    except ValueError as e:  # e.g. an integer longer than Python converts (sys.get_int_max_str_digits)
        raise SuiteError(f"manifest {path}: unreadable JSON value ({where}: {short_repr(e, 120)})") from None
    if isinstance(rows, dict):  # {"cases": [...]}, or a single case object
        rows = rows.get("cases", [rows])
    if not isinstance(rows, list):
        raise SuiteError(f"manifest {path}: expected a list of cases (or one case object), got {type(rows).__name__}")
    if not rows:
        raise SuiteError(f"manifest {path}: no cases; give at least one case object with 'id' and 'trajectory'")
    cases = []
    for n, r in enumerate(rows, start=1):
        try:
            cases.append(Case.from_dict(r, suite=path.stem))
        except SuiteError as e:
            at = f"line {lines[n - 1]}" if jsonl and isinstance(rows, list) and len(lines) == len(rows) else f"case {n}"
            raise SuiteError(f"manifest {path}, {at}: {e}") from None
    dup = sorted(i for i, c in Counter(c.id for c in cases).items() if c > 1)
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
}, group="worldgate.suites")  # and the installed plugins' suites (docs/plugins.md)
SUITE_HELP = {
    "worldmark": "WorldMark's official arena_inputs (500 cases; --data DIR, or fetched on first use)",
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
