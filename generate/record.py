"""A record as one typed value, and the one function that opens and verifies it.

meta.json's fields are typed, versioned models (:class:`RecordMeta`, with the intrinsics block
:class:`~worldgate.adapters.base.PlanIntrinsics`, checked when the plan is made); records of an older format are
migrated on reading (:func:`migrate_meta`). :func:`open_record` is what every reader of a record goes through
(evaluate's features, MultiWorldBench's two views, the report, the experiments): it opens a record of one view or
several, checking before anything is decoded that every file it names lies inside the folder and is a regular file
(never a link, a FIFO or a device, never followed), that each view's poses are finite (F, 4, 4) and as many as its
achieved frames, and that every file it reads is the one meta.json recorded (its sha256). A record it refuses is a
:class:`~.record_files.RecordError` whose text starts with the record's folder name and says what to do.

Formats: 1 had no ``views`` (a two-view record said kind ``"rollout-2p"``); 2 added ``views`` and ``record_format``;
3 (:data:`RECORD_FORMAT`) writes ``intrinsics.native_size`` beside ``intrinsics.native`` (formats 1 and 2 gave native
in pixels of the requested size, which the migration says).
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from worldgate.adapters.base import IntrinsicsError, PlanIntrinsics
from worldgate.trajectories.suites import SuiteError, check_intrinsics

from .record_files import (
    ACTIONS, DYNAMIC, MAX_ARRAY_BYTES, MAX_JSON_BYTES, META, POSES, TARGETS, TRAJECTORY, VIDEO, RecordError,
    check_record_file, link_target, read_record_bytes, read_record_json, record_member, sha256_record_file,
)

RECORD_FORMAT = 3
#: the files of each view: one view, or the two players' views
ONE_VIEW = {"": {"video": VIDEO, "poses": POSES}}
TWO_VIEWS = {"A": {"video": "video_a.mp4", "poses": "poses_a.npy"}, "B": {"video": "video_b.mp4", "poses": "poses_b.npy"}}
LEGACY_KINDS = {"rollout-2p": "rollout"}  # format 1 named two-view records apart
#: the files a reader reads besides each view's video and poses and trajectory.json, verified where present
OPTIONAL_FILES = (TARGETS, DYNAMIC, ACTIONS)


def views_of(players: int) -> dict:
    return TWO_VIEWS if players == 2 else ONE_VIEW


def record_views(meta: dict) -> dict:
    """``{view: {"video", "poses"}}`` of a record from its meta.json (format 1 records included)."""
    v = meta.get("views")
    if isinstance(v, dict) and v and all(isinstance(x, dict) and "video" in x for x in v.values()):
        return v
    return TWO_VIEWS if meta.get("kind") == "rollout-2p" or meta.get("players") == ["A", "B"] else ONE_VIEW


def record_kind(meta: dict) -> str | None:
    k = meta.get("kind")
    return LEGACY_KINDS.get(k, k)


def read_meta_reason(folder: Path) -> tuple[dict | None, str | None]:
    """``(meta, None)`` for a record folder with a readable meta.json, else ``(None, why)``. A folder that is a
    symbolic link, or a meta.json that is a link, a FIFO, a device, larger than :data:`MAX_JSON_BYTES`, not UTF-8,
    not JSON or not a JSON object, is refused without being followed (nothing here can hang or exhaust memory)."""
    folder = Path(folder)
    try:
        if folder.is_symlink():
            return None, (f"the record folder is a symbolic link (to {link_target(folder)}): records are read only "
                          "from real folders inside the run")
        meta = read_record_json(folder / META)
    except FileNotFoundError:
        return None, "meta.json is missing"
    except RecordError as e:
        return None, str(e)
    except OSError as e:
        return None, f"meta.json could not be read ({e.strerror or e})"
    if not isinstance(meta, dict):
        return None, f"meta.json holds a JSON {type(meta).__name__}, not an object"
    return meta, None


def read_meta(folder: Path) -> dict | None:
    """A record's meta.json, or None where it is missing or refused (:func:`read_meta_reason` says why)."""
    return read_meta_reason(folder)[0]


# ------------------------------------------------------------------------------------------------ typed meta.json
@dataclass(frozen=True)
class Measured:
    """Requested or achieved (measured from the written file) size, fps and frame count."""

    width: int
    height: int
    fps: float
    frames: int


@dataclass(frozen=True)
class FileEntry:
    """A file the record holds, as meta.json recorded it when the record was written."""

    bytes: int | None
    sha256: str | None


@dataclass(frozen=True)
class RecordMeta:
    """meta.json's fields as one typed, versioned value (the current format; older ones are migrated)."""

    record_format: int
    #: the format the file was written in (1 for a meta.json without ``record_format``)
    written_format: int
    kind: str | None
    case_id: str | None
    views: dict  # {view: {"video", "poses"}}
    requested: Measured | None
    achieved: dict  # {view: Measured}
    intrinsics: PlanIntrinsics | None
    files: dict  # {name: FileEntry}; empty for a record without hashes (written by hand or by hand-edited tools)
    complete: bool
    case: dict
    adapter: dict
    caveats: list

    @property
    def signed(self) -> bool:
        """Whether meta.json records the hash of every view's video (else nothing could be checked)."""
        return all((self.files.get(v["video"]) or FileEntry(None, None)).sha256 for v in self.views.values())


def written_format(meta: dict) -> int:
    f = meta.get("record_format")
    return f if isinstance(f, int) and not isinstance(f, bool) else 1


def migrate_meta(meta: dict) -> dict:
    """A copy of ``meta`` in the current format (:data:`RECORD_FORMAT`): format 1's views and two-view kind, and
    format 1 and 2's intrinsics (``native`` in pixels of the requested size: that size becomes ``native_size``).
    What it holds is otherwise left as written; a current one comes back equal."""
    out = dict(meta)
    was = written_format(meta)
    out["kind"] = record_kind(meta)
    out["views"] = record_views(meta)
    if out["views"] is TWO_VIEWS or list(out["views"]) == ["A", "B"]:
        out.setdefault("players", list(out["views"]))
    k, req = meta.get("intrinsics"), meta.get("requested")
    if was < 3 and isinstance(k, dict) and k.get("native") is not None and "native_size" not in k \
            and isinstance(req, dict) and _positive_ints(req.get("width"), req.get("height")):
        out["intrinsics"] = dict(k, native_size=[req["width"], req["height"]])
    out["record_format"] = RECORD_FORMAT
    return out


def _positive_ints(*v) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)


def _measured(d: dict, what: str, default_fps: float = 16.0, required: bool = False) -> Measured:
    if required and not all(k in d for k in ("width", "height", "fps", "frames")):
        raise KeyError(what)
    return Measured(int(d.get("width", 0)), int(d.get("height", 0)), float(d.get("fps", default_fps)),
                    int(d.get("frames", 0)))


def parse_meta(meta: dict, name: str = "", default_fps: float = 16.0, strict: bool = False) -> RecordMeta:
    """The typed :class:`RecordMeta` of a meta.json (migrated first); :class:`RecordError` starting with ``name``
    (the record's folder name) naming the field that is wrong. ``strict`` (the writer): the intrinsics block must
    be the current shape (a regime; ``native_size`` beside ``native``)."""
    pre = f"{name}: " if name else ""
    m = migrate_meta(meta)
    for key in ("case", "adapter", "achieved", "requested", "intrinsics", "files"):
        if m.get(key) is not None and not isinstance(m[key], dict):
            raise RecordError(f"{pre}meta.json's {key!r} is a JSON {type(m[key]).__name__}, not an object: "
                              "regenerate the record")
    case = m.get("case") or {}
    tags = case.get("tags")
    if tags is not None and not isinstance(tags, dict):
        raise RecordError(f"{pre}meta.json's case.tags is a JSON {type(tags).__name__}, not an object")
    views = m["views"]
    req = m.get("requested") or {}
    size = (req.get("width"), req.get("height"))
    intr = None
    if m.get("intrinsics") is not None:
        try:
            intr = _intrinsics(m["intrinsics"], size if _positive_ints(*size) else None, strict)
        except IntrinsicsError as e:
            raise RecordError(f"{pre}{e}") from None
    try:
        ach = m.get("achieved") or {}
        if list(views) == [""]:
            achieved = {"": _measured(ach, "", default_fps)}
        else:
            achieved = {}
            for v in views:
                try:
                    achieved[v] = _measured(ach.get(v) or {}, v, default_fps, required=m.get("kind") != "plan")
                except (KeyError, TypeError, ValueError):
                    raise RecordError(f"{pre}meta.json lacks the achieved size/fps/frames of view {v}") from None
        files = {}
        for f, e in (m.get("files") or {}).items():
            e = e or {}
            if not isinstance(e, dict) or not (e.get("sha256") is None or isinstance(e["sha256"], str)):
                raise TypeError("files.<name>.sha256 must be strings")
            files[f] = FileEntry(e.get("bytes"), e.get("sha256"))
        requested = _measured(req, "requested", default_fps) if req else None
    except RecordError:
        raise
    except (AttributeError, TypeError, ValueError, OverflowError) as e:
        raise RecordError(f"{pre}malformed meta.json ({type(e).__name__}: {e})") from None
    for a in achieved.values():
        if not (np.isfinite(a.fps) and a.fps > 0) or a.frames < 0 or a.width < 0 or a.height < 0:
            raise RecordError(f"{pre}meta.json achieved values are invalid (fps={a.fps}, frames={a.frames}, "
                              f"size={a.width}x{a.height})")
    r = requested  # read by the intrinsics' scaling and the report: a negative size flips them (issue 29.5)
    if r is not None and (not (np.isfinite(r.fps) and r.fps > 0) or min(r.frames, r.width, r.height) < 0):
        raise RecordError(f"{pre}meta.json requested values are invalid (fps={r.fps}, frames={r.frames}, "
                          f"size={r.width}x{r.height}): regenerate the record")
    return RecordMeta(m["record_format"], written_format(meta), m.get("kind"), m.get("case_id"), views, requested,
                      achieved, intr, files, bool(m.get("complete")), case, m.get("adapter") or {},
                      list(m["caveats"]) if isinstance(m.get("caveats"), list) else [])


def _intrinsics(block: dict, size, strict: bool) -> PlanIntrinsics:
    """The typed block: the writer's is the current shape in full; a reader checks the camera as every format wrote
    it (``native`` in pixels of ``native_size``, else of the requested size where that is known)."""
    if strict:
        return PlanIntrinsics.parse(block, "meta.json intrinsics", size)
    nsize = block.get("native_size")
    nsize = tuple(nsize) if isinstance(nsize, (list, tuple)) and _positive_ints(*nsize) and len(nsize) == 2 else None
    native = block.get("native")
    if native is not None:
        try:
            native = tuple(check_intrinsics(list(native) if isinstance(native, tuple) else native, nsize or size,
                                            "meta.json intrinsics.native"))
        except SuiteError as e:
            raise IntrinsicsError(str(e)) from None
    regime = block.get("regime")
    return PlanIntrinsics(regime if _positive_ints(regime) else None, native, nsize, block.get("native_model"),
                          block.get("native_model_units"),
                          {k: v for k, v in block.items() if k not in PlanIntrinsics.TYPED})


# ------------------------------------------------------------------------------------------------ the open record
@dataclass
class RecordView:
    """What extractors may see of a record: the video's measured properties and the *commanded* inputs only."""

    dir: Path
    meta: dict
    trajectory: dict
    poses: np.ndarray  # commanded c2w (F, 4, 4)
    video: Path
    width: int
    height: int
    fps: float
    n_frames: int
    content_hash: str
    #: digest of every input an extractor reads (:func:`inputs_digest`); computed on first use where not given
    input_digest: str = ""
    #: what could not be checked about the record (carried into its sample row and results.json)
    caveats: list = field(default_factory=list)

    @property
    def intrinsics(self) -> np.ndarray | None:
        """Native intrinsics [fx, fy, cx, cy] at the video's size, where the plan recorded them."""
        k = (self.meta.get("intrinsics") or {}).get("native")
        if k is None:
            return None
        k = np.asarray(k, float)
        req = self.meta.get("requested", {})
        if req.get("width") and req["width"] != self.width:  # scale to the achieved size
            s = self.width / req["width"]
            k = k * s
        return k


@dataclass
class View:
    """One view of an opened record: its video (sha256 checked), commanded poses and achieved size/fps/frames."""

    name: str  # "" for a one-view record, else the player ("A", "B")
    video: Path
    poses: np.ndarray  # commanded c2w (F, 4, 4)
    width: int
    height: int
    fps: float
    n_frames: int
    content_hash: str  # the video's sha256


@dataclass
class Record:
    """A record, opened and verified by :func:`open_record`: ``meta`` as written (the raw dict), ``info`` its typed
    current-format model, ``views`` one :class:`View` per view, and the sha256 of every other file read."""

    dir: Path
    meta: dict
    info: RecordMeta
    trajectory: dict
    views: dict  # {view: View}
    actions: dict | None = None
    file_hashes: dict = field(default_factory=dict)  # {file name: sha256} of the files read besides the videos
    #: what could not be checked about the record (carried into its sample row and results.json)
    caveats: list = field(default_factory=list)

    @property
    def one_view(self) -> bool:
        return list(self.views) == [""]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def changed_message(name: str, file: str, actual: str, want: str, diag: str | None = None) -> str:
    return (f"{name}: {diag + '; ' if diag else ''}{file} changed after the record was written (its sha256 is "
            f"{actual[:12]}..., meta.json records {want[:12]}...): a record whose files changed cannot be trusted; "
            f"regenerate the record or restore the original {file}")


def _check_poses(name: str, file: str, poses) -> None:
    if not isinstance(poses, np.ndarray) or poses.dtype.kind != "f" or poses.ndim != 3 or poses.shape[1:] != (4, 4) \
            or not np.isfinite(poses).all():
        kind = getattr(poses, "dtype", type(poses).__name__)
        finite = not isinstance(poses, np.ndarray) or poses.dtype.kind != "f" or np.isfinite(poses).all()
        raise RecordError(f"{name}: {file} must be finite float (F, 4, 4) camera-to-world poses, got "
                          f"{kind} {getattr(poses, 'shape', '')}{'' if finite else ' with NaN/inf'}")


def open_record(folder: Path, diagnose: Callable[[Path, int, int, float], str | None] | None = None) -> Record:
    """A record of one view or several, checked against its meta.json before anything reads it (see the module
    text); :class:`RecordError` with the reason otherwise, starting with the folder's name. ``diagnose(video, width,
    height, fps)``, where given, says what a video whose sha256 differs holds instead (a decoder's reading)."""
    folder = Path(folder)
    name = folder.name
    if folder.is_symlink():
        raise RecordError(f"{name}: the record folder is a symbolic link; records are read only from real folders "
                          "inside the run (copy the record in instead)")
    meta, why = read_meta_reason(folder)
    if meta is None:
        raise RecordError(f"{name}: no readable meta.json ({why})")
    views = record_views(meta)
    present = {}
    try:
        files = {f: True for v in views.values() for f in (v["video"], v.get("poses", ""))}
        files[TRAJECTORY] = True
        files.update({f: False for f in OPTIONAL_FILES})
        for f, required in files.items():
            present[f] = check_record_file(record_member(folder, f), required=required)
    except (RecordError, FileNotFoundError) as e:
        raise RecordError(f"{name}: {e}") from None
    for v in views.values():  # never handed to a decoder: an empty file is a missing video
        if (folder / v["video"]).stat().st_size == 0:
            raise RecordError(f"{name}: {v['video']} is empty (0 bytes)")
    raw, poses = {}, {}
    try:
        for v, f in views.items():
            raw[f["poses"]] = read_record_bytes(folder / f["poses"], MAX_ARRAY_BYTES)
        raw[TRAJECTORY] = read_record_bytes(folder / TRAJECTORY, MAX_JSON_BYTES)
        if present[ACTIONS]:
            raw[ACTIONS] = read_record_bytes(folder / ACTIONS, MAX_JSON_BYTES)
    except RecordError as e:
        raise RecordError(f"{name}: {e}") from None
    what = f"{TRAJECTORY}/{'/'.join(f['poses'] for f in views.values())}"
    try:
        traj = json.loads(raw[TRAJECTORY].decode("utf-8"))
        actions = json.loads(raw[ACTIONS].decode("utf-8")) if ACTIONS in raw else None
        for v, f in views.items():
            poses[v] = np.load(io.BytesIO(raw[f["poses"]]), allow_pickle=False)
    except (OSError, ValueError, EOFError, RecursionError) as e:
        raise RecordError(f"{name}: unreadable {what} ({type(e).__name__}: {e})") from None
    if list(views) == [""] and (not isinstance(traj, dict) or not isinstance(traj.get("segments"), list)):
        raise RecordError(f"{name}: trajectory.json is not a worldgate trajectory (no segment list)")
    if not isinstance(traj, dict):
        raise RecordError(f"{name}: trajectory.json is not a worldgate trajectory (not an object)")
    for v, f in views.items():
        _check_poses(name, f["poses"], poses[v])
    info = parse_meta(meta, name, float(traj.get("fps", 16.0)) if isinstance(traj.get("fps", 16.0), (int, float))
                      else 16.0)
    for v, f in views.items():
        frames = info.achieved[v].frames
        if frames and len(poses[v]) != frames:
            raise RecordError(f"{name}: {f['poses']} holds {len(poses[v])} commanded poses but meta.json records "
                              f"{frames} achieved frames (one pose per frame): regenerate the record or restore its "
                              f"{f['poses']}")
    # every file meta.json recorded must still be the one written (a record whose files changed after writing
    # cannot be trusted): the inputs first, the videos last (their message says what a swapped video holds)
    hashes = {f: _sha(b) for f, b in raw.items()}
    try:
        for f in OPTIONAL_FILES:
            if present[f] and f not in hashes:
                hashes[f] = sha256_record_file(folder / f)
        actual = {v: sha256_record_file(folder / f["video"]) for v, f in views.items()}
    except (RecordError, OSError) as e:
        raise RecordError(f"{name}: {e}") from None
    recorded = {f: e.sha256 for f, e in info.files.items()}
    signed = info.signed
    for f in [v["poses"] for v in views.values()] + [TRAJECTORY, *OPTIONAL_FILES]:
        want = recorded.get(f)
        if want and not present.get(f, True):
            raise RecordError(f"{name}: {f} is missing but meta.json records it: regenerate the record or restore "
                              f"its {f}")
        if want and hashes.get(f) != want:
            raise RecordError(changed_message(name, f, hashes[f], want))
        if signed and f in OPTIONAL_FILES and present[f] and not want:
            raise RecordError(f"{name}: {f} is not one of the files meta.json records (added after the record was "
                              "written?): remove it or regenerate the record")
    out = {}
    for v, f in views.items():
        a, want = info.achieved[v], recorded.get(f["video"])
        if want and actual[v] != want:
            diag = diagnose(folder / f["video"], a.width, a.height, a.fps) if diagnose else None
            raise RecordError(changed_message(name, f["video"], actual[v], want, diag))
        out[v] = View(v, folder / f["video"], poses[v], a.width, a.height, a.fps, a.frames, actual[v])
    rec = Record(folder, meta, info, traj, out, actions, hashes)
    if not signed:
        rec.caveats.append("meta.json records no file hashes (written by hand or by an older worldgate): the video "
                           "and inputs could not be checked against the record")
    return rec
