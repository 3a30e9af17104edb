"""Readers for the steps a user gives as files instead of running a model: WorldMark's own arena files are accepted
as they are (``prompt_{domain}.txt`` one row per image, ``{domain}_action.txt``, a ``{domain}_intrinsics/`` folder of
``NNN_intrinsics.npy``), plus a third-view folder, WorldMemBench targets and checklists as JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from PIL import Image

from worldgate.trajectories.suites import SuiteError, check_intrinsics

from .parse import AnswerError, parse_action_ids

VIEW_PREFIX = {"first": "First-person view.", "third": "Third-person view."}
IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
TARGET_KINDS = ("human", "object", "event")
#: WorldMemBench's dynamic checklist: 8 questions, two per aspect (WorldMemBench §3, dynamic memory)
CHECKLIST_CATEGORIES = ("return_progress", "persistence", "final_state", "causal")
#: a target's name becomes part of its mask's file name (``masks/{stem}-{name}.png``): one safe pattern, unique per image
TARGET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class GivenError(ValueError):
    """A file given for a step is not what that step needs; the message names the file, row and what was expected."""


def read_rows(path: str | Path, n: int, what: str) -> list[str]:
    """One row per image, in the order the images were given (WorldMark's ``prompt_*.txt`` / ``*_action.txt``)."""
    p = Path(path)
    if not p.is_file():
        raise GivenError(f"{what} file {p} not found")
    rows = p.read_text(encoding="utf-8").splitlines()
    while rows and not rows[-1].strip():
        rows.pop()
    if len(rows) != n:
        raise GivenError(f"{what} file {p} has {len(rows)} rows for {n} images: give one row per image, in the order "
                         "the images are given")
    blank = [i + 1 for i, r in enumerate(rows) if not r.strip()]
    if blank:
        raise GivenError(f"{what} file {p}: row {blank[0]} is empty (one row per image)")
    return rows


def scene_caption(row: str) -> str:
    """A caption without its view prefix (WorldMark's rows start "First-person view." / "Third-person view.")."""
    s = " ".join(row.split())
    for prefix in VIEW_PREFIX.values():
        if s.startswith(prefix):
            return s[len(prefix):].lstrip()
    return s


def view_caption(scene: str, view: str) -> str:
    """The row WorldMark writes for a view: its prefix, one space, the scene caption (first and third view rows of
    the official arena differ only in this prefix)."""
    return f"{VIEW_PREFIX[view]} {scene}"


def action_rows(path: str | Path, n: int) -> list[list[int]]:
    out = []
    for i, row in enumerate(read_rows(path, n, "--actions")):
        try:
            out.append(parse_action_ids(row))
        except AnswerError as e:
            raise GivenError(f"--actions {path}, row {i + 1}: {e}") from None
    return out


def _as_k(a, what: str) -> list[float]:
    a = np.asarray(a, np.float64)
    if a.shape == (3, 3):
        a = np.array([a[0, 0], a[1, 1], a[0, 2], a[1, 2]])
    if a.shape != (4,):
        raise GivenError(f"{what}: intrinsics must be [fx, fy, cx, cy] or a 3x3 K, got shape {a.shape}")
    return [float(v) for v in a]


def _stem_match(folder: Path, stem: str, index: int, suffixes: tuple[str, ...]) -> Path | None:
    for name in (stem, f"{index:03d}"):
        for suf in suffixes:
            p = folder / f"{name}{suf}"
            if p.is_file():
                return p
    return None


def intrinsics_for(source: str | Path, image: Path, index: int, n: int, size: tuple[int, int]) -> tuple[list[float], str]:
    """An image's [fx, fy, cx, cy] (original-image pixels) from ``--intrinsics``: a folder of ``{stem}_intrinsics.npy``
    (WorldMark's ``{domain}_intrinsics/``; ``NNN_intrinsics.npy`` by position also matches), a ``.npy`` of shape
    (N, 4) or (N, 3, 3), or a text file with one ``fx fy cx cy`` row per image. Returns (K, source)."""
    src = Path(source)
    if src.is_dir():
        p = _stem_match(src, f"{image.stem}_intrinsics", -1, (".npy",)) or src / f"{index:03d}_intrinsics.npy"
        if not p.is_file():
            raise GivenError(f"--intrinsics {src}: no {image.stem}_intrinsics.npy or {index:03d}_intrinsics.npy for "
                             f"{image.name}")
        k, where = _as_k(np.load(p, allow_pickle=False), str(p)), f"file:{p}"
    elif src.suffix == ".npy":
        a = np.load(src, allow_pickle=False)
        if a.shape[0] != n:
            raise GivenError(f"--intrinsics {src} holds {a.shape[0]} intrinsics for {n} images")
        k, where = _as_k(a[index], f"{src}[{index}]"), f"file:{src}:{index}"
    elif src.is_file():
        rows = read_rows(src, n, "--intrinsics")
        try:
            vals = [float(v) for v in rows[index].replace(",", " ").split()]
        except ValueError:
            raise GivenError(f"--intrinsics {src}, row {index + 1}: not numbers: {rows[index][:80]!r}") from None
        k, where = _as_k(vals, f"{src}, row {index + 1}"), f"file:{src}:{index + 1}"
    else:
        raise GivenError(f"--intrinsics {src} not found: give a folder of NNN_intrinsics.npy, an (N,4) .npy or a text "
                         "file with one 'fx fy cx cy' row per image")
    try:
        return check_intrinsics(k, size, f"image {image.name}"), where
    except SuiteError as e:
        raise GivenError(f"--intrinsics {where}: {e}") from None


def third_view_for(folder: str | Path, image: Path, index: int) -> Path:
    """The user's third-person counterpart of an image: ``{stem}.*`` (or ``NNN.*`` by position) in the folder."""
    src = Path(folder)
    if not src.is_dir():
        raise GivenError(f"--third-view {src} is not a folder of images named like the first-view images")
    p = _stem_match(src, image.stem, index, IMAGE_EXTS)
    if p is None:
        raise GivenError(f"--third-view {src}: no {image.stem}.* (or {index:03d}.*) for {image.name}")
    return p


def load_json(path: str | Path, what: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise GivenError(f"{what} file {p} not found")
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise GivenError(f"{what} {p}: not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise GivenError(f"{what} {p}: expected an object keyed by image file name or stem")
    return d


def entry(d: dict, image: Path):
    for key in (image.name, image.stem):
        if key in d:
            return d[key]
    return None


def targets_for(path: str | Path, image: Path, size: tuple[int, int]) -> list[dict] | None:
    """``--targets FILE.json``: ``{"<image name or stem>": [{"name", "kind": human|object|event, "mask": PNG}]}``,
    mask paths relative to the JSON file; each mask must be the image's size and non-zero somewhere."""
    base = Path(path).parent
    ts = entry(load_json(path, "--targets"), image)
    if ts is None:
        return None
    if not isinstance(ts, list) or not ts:
        raise GivenError(f"--targets {path}, {image.name}: expected a non-empty list of targets")
    out = []
    for row, t in enumerate(ts, 1):
        if not isinstance(t, dict) or not {"name", "kind", "mask"} <= set(t):
            raise GivenError(f"--targets {path}, {image.name}: each target needs 'name', 'kind' and 'mask'")
        check_target(t, [o["name"] for o in out], f"--targets {path}, {image.name}, target {row}")
        m = Path(t["mask"])
        m = m if m.is_absolute() else base / m
        if not m.is_file():
            raise GivenError(f"--targets {path}, {image.name}: mask {m} not found")
        with Image.open(m) as im:
            if im.size != tuple(size):
                raise GivenError(f"--targets {path}, {image.name}: mask {m.name} is {im.size[0]}x{im.size[1]}, the "
                                 f"image is {size[0]}x{size[1]} (masks are in the image's pixels)")
            if not np.asarray(im.convert("L")).any():
                raise GivenError(f"--targets {path}, {image.name}: mask {m.name} is empty")
        out.append({"name": t["name"], "kind": t["kind"], "mask": m,
                    **({"event": t["event"]} if t.get("event") else {})})
    return out


def check_target(t: dict, earlier: list[str], where: str) -> None:
    """A target's ``name`` (one safe pattern: it names the mask file; unique within its image), its ``kind`` and its
    optional ``event`` (the event a checklist is generated about, for an ``event`` target)."""
    name = t.get("name")
    if not isinstance(name, str) or not TARGET_NAME.fullmatch(name):
        raise GivenError(f"{where}: name {name!r} must be 1-64 characters from [A-Za-z0-9_-], starting with a letter "
                         "or digit (it names the mask file), e.g. 'red-cup'")
    if name in earlier:
        raise GivenError(f"{where}: name {name!r} is used twice in this image: give each target its own name "
                         "(e.g. 'box-1', 'box-2')")
    if t.get("kind") not in TARGET_KINDS:
        raise GivenError(f"{where}: kind {t.get('kind')!r} is not one of {TARGET_KINDS}")
    if "event" in t and not (isinstance(t["event"], str) and t["event"].strip()):
        raise GivenError(f"{where}: 'event' must be a non-empty text (the event the checklist is about)")


def check_checklist(item, where: str) -> dict:
    """A WorldMemBench dynamic item: a gate and exactly 8 binary questions with frozen answers, two per aspect."""
    if not isinstance(item, dict):
        raise GivenError(f"{where}: a checklist is an object with 'gate' and 'questions'")
    gate, qs = item.get("gate"), item.get("questions")
    if not (isinstance(gate, dict) and isinstance(gate.get("text"), str) and isinstance(gate.get("answer"), bool)):
        raise GivenError(f"{where}: 'gate' needs 'text' and a boolean 'answer'")
    if not isinstance(qs, list) or len(qs) != 8:
        raise GivenError(f"{where}: exactly 8 questions are needed (2 per aspect), got "
                         f"{len(qs) if isinstance(qs, list) else type(qs).__name__}")
    for q in qs:
        if not (isinstance(q, dict) and isinstance(q.get("text"), str) and isinstance(q.get("answer"), bool)
                and q.get("category") in CHECKLIST_CATEGORIES):
            raise GivenError(f"{where}: each question needs 'category' in {CHECKLIST_CATEGORIES}, 'text' and a boolean "
                             "'answer'")
    counts = {c: sum(q["category"] == c for q in qs) for c in CHECKLIST_CATEGORIES}
    if set(counts.values()) != {2}:
        raise GivenError(f"{where}: two questions per aspect are needed, got {counts}")
    return item


def checklist_for(path: str | Path, image: Path) -> dict | None:
    """``--checklists FILE.json``: ``{"<image name or stem>": {"name", "kind", "target": <target name or index>,
    "gate": {...}, "questions": [8 x {"category", "text", "answer"}]}}``."""
    item = entry(load_json(path, "--checklists"), image)
    return None if item is None else check_checklist(item, f"--checklists {path}, {image.name}")
