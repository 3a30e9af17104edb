"""A WorldMark results root read as a typed, bounded schema (issue 29, item 3): what ``worldgate import ROOT`` takes
from ``results_flow{sfx}/*.json`` and the consistency, C3 and Q-Align shards before anything is computed from it.

- Every folder the importer reads (``results_flow{sfx}``, its ``cache``, ``results_consistency{sfx}``,
  ``results_c3_vggt{sfx}``, ``results_quality{sfx}``) must be a real folder: a link is refused, never followed out of
  the root; every file a regular file (read without following a link, bounded: ``read_record_json``).
- A flow file is one JSON object (a list or a number is reported, not skipped); a shard an object of objects.
- Every field final_master reads is typed and bounded: model and stem strings (not lists or numbers), integers
  within 2^53 (an action within 0..10^6), finite numbers (no NaN, Infinity or 1e400), each in its range (direction
  accuracy in [-1, 1], purity and C1 distances in [0, 1] / [0, 2], C2 in [0, 100], the C3 median error in
  [0, 10^6], Q-Align scores in [1, 5]).

Each violation is one line naming the file and the field (evaluate/results.py's wording), and the import is refused
with them all (:class:`ResultsRootError`), never an internal error and never a number scored without a note.
"""

from __future__ import annotations

import glob
import json
import os
import stat
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

from worldgate.generate.record_files import RecordError, read_record_json

from ..result_types import MAX_INT, Number
from ..results import violation_lines
from .master import RESULTS_JSON_BYTES, result_dirs

MAX_LINES = 20
Name = Annotated[StrictStr, Field(min_length=1, max_length=256)]
Action = Annotated[StrictInt, Field(ge=0, le=10 ** 6)]
Frame = Annotated[StrictInt, Field(ge=0, le=10 ** 7)]
Direction = Annotated[Number, Field(ge=-1.0, le=1.0)]
Unit = Annotated[Number, Field(ge=0.0, le=1.0)]
CosDist = Annotated[Number, Field(ge=0.0, le=2.0)]
NonNeg = Annotated[Number, Field(ge=0.0, le=1e6)]  # a relative error: 1e300 is no measurement
Mark = Annotated[Number, Field(ge=1.0, le=5.0)]


class ResultsRootError(ValueError):
    """A results root that is not WorldMark's schema: one line per violation, naming the file and field."""


class _Obj(BaseModel):
    model_config = ConfigDict(extra="allow")


class Segment(_Obj):
    key: StrictStr | None = None
    new: StrictStr | None = None
    family: StrictStr | None = None
    dir: Direction | None = None
    dir_gated: Direction | None = None
    purity: Unit = None  # type: ignore[assignment]  (absent, or a number: final_master indexes it)
    score: Number = None  # type: ignore[assignment]  final_master keeps only the scores in [0, 1] itself (fm:17-18)


class FlowRecord(_Obj):
    model: Name
    stem: Name
    action: Action | None = None
    M1: list[Segment] = []
    M2: list[Segment] = []
    M3: list[Segment] = []
    M4: list[Segment] = []


class C1Value(_Obj):
    pmean_dists: list[CosDist] | None = None
    idx: list[Frame] = []  # a null would be indexed
    cut_frames: list[Frame] | None = None


class C1Entry(_Obj):
    model: Name
    C1: C1Value = None  # type: ignore[assignment]  (absent, or an object: never null)


class C2Value(_Obj):
    C2: Annotated[Number, Field(ge=0.0, le=100.0)] | None = None

    @model_validator(mode="after")
    def _value_or_skipped(self):
        extra = self.model_extra or {}
        if "C2" not in self.model_fields_set and not (extra.get("na_scope") or extra.get("not_evaluable")):
            raise ValueError("holds no C2 value and is not marked na_scope or not_evaluable")
        return self


class C2Entry(_Obj):
    model: Name
    action: Action
    C2: C2Value


class C3Entry(_Obj):
    model: Name
    global_median_e: NonNeg = None  # type: ignore[assignment]  (absent, or a number)


class QAEntry(_Obj):
    model: Name
    qalign_quality: Mark
    qalign_aesthetic: Mark


def _real_folder(p: str) -> bool:
    """Whether ``p`` is a real folder (absent: False); a link or anything else there is a :class:`ResultsRootError`."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        return True
    what = f"a symbolic link (to {os.readlink(p)})" if stat.S_ISLNK(st.st_mode) else "not a folder"
    raise ResultsRootError(f"{p} is {what}: a results root's folders are read only when they are real folders "
                           "inside it (a link is never followed out of the root); copy the results in instead")


def _load(f: str):
    try:
        return read_record_json(Path(f), RESULTS_JSON_BYTES)
    except (RecordError, OSError) as e:
        raise ResultsRootError(f"results root file {f}: {e}") from None


def _huge(v, loc: tuple = ()) -> tuple | None:
    """Where ``v`` holds an integer beyond 2^53 (pydantic overflows on one of hundreds of digits), or None."""
    if isinstance(v, int) and not isinstance(v, bool):
        return loc if abs(v) > MAX_INT else None
    items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
    for k, x in items:
        if (got := _huge(x, (*loc, k))) is not None:
            return got
    return None


def _field(loc: tuple) -> str:
    return "".join(f"[{x}]" if isinstance(x, int) else ("." if i else "") + json.dumps(str(x))
                   for i, x in enumerate(loc))


def _check(model: type[BaseModel], value, where: str, prefix: tuple, lines: list[str]) -> bool:
    try:
        loc = _huge(value, prefix)
    except RecursionError:
        loc = None
    if loc is not None:
        v = value
        for k in loc[len(prefix):]:
            v = v[k]
        lines.append(f"{where}: {_field(loc) or 'the file'} is an integer of {len(str(abs(v)))} digits, out of range "
                     "(more than 2^53)")
        return False
    try:
        model.model_validate(value)
    except ValidationError as e:
        lines.extend(violation_lines(e, where, prefix))
        return False
    except (RecursionError, OverflowError, TypeError, ValueError) as e:  # nesting beyond what can be checked
        lines.append(f"{where}: {'.'.join(map(str, prefix)) or 'the file'} cannot be checked ({type(e).__name__})")
        return False
    return True


def _shards(pattern: str, model: type[BaseModel], lines: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in glob.glob(pattern):  # glob order, as final_master merges them (fm:21-37)
        v = _load(f)
        if not isinstance(v, dict):
            lines.append(f"{f}: a JSON {type(v).__name__}, not an object of entries as WorldMark writes")
            continue
        for key, entry in v.items():
            _check(model, entry, f, (key,), lines)
        out.update(v)
    return out


def read_checked_tree(root, suffix: str) -> tuple[list[dict], dict, dict, dict, dict]:
    """What ``master.read_results_tree`` reads for one split (flow records, c1, c2, c3, qalign), with links refused at
    every level and every value checked; :class:`ResultsRootError` listing each violation (file and field)."""
    d = result_dirs(str(root), suffix)
    for k in ("flow", "flow_cache", "consistency", "c3", "quality"):
        _real_folder(d[k])
    lines: list[str] = []
    flow = []
    for f in glob.glob(f"{d['flow']}/*.json"):
        v = _load(f)
        if not isinstance(v, dict):
            lines.append(f"{f}: a JSON {type(v).__name__}, not an object (one video's flow record) as WorldMark "
                         "writes")
        elif _check(FlowRecord, v, f, (), lines):
            flow.append(v)
    c1 = _shards(f"{d['consistency']}/c1c2_v2_c1new_shard*.json", C1Entry, lines)
    c2 = _shards(f"{d['consistency']}/c1c2_v2_c2fix_shard*.json", C2Entry, lines)
    c3 = _shards(f"{d['c3']}/omega_c3_1s_shard*.json", C3Entry, lines)
    qa = _shards(f"{d['quality']}/qalign_shard*.json", QAEntry, lines)
    if lines:
        more = len(lines) - MAX_LINES
        raise ResultsRootError("\n".join(lines[:MAX_LINES] + ([f"... and {more} more"] if more > 0 else [])) +
                               f"\n(the results root {root} is not WorldMark's schema: fix or remove these files, "
                               "then import again)")
    return flow, c1, c2, c3, qa


__all__ = ["ResultsRootError", "read_checked_tree", "FlowRecord", "C1Entry", "C2Entry", "C3Entry", "QAEntry"]
