"""The projection: the expected world ray cast from the commanded poses, a cached feature of a two-view record.

The measured judgments compare a view's pixels with where the expected world must appear (the game state replayed
from the case's interactions, and the other player's avatar at its commanded pose): ray casts of boxes
(:func:`~worldgate.trajectories.multiworldbench.world.cast_boxes`) from each player's commanded pose. Those depend on
the record's commanded inputs alone, never on its videos or on the thresholds, so they are computed once, on the first
evaluation, and cached like any feature: ``--rescore`` reads them and casts nothing (a cast it lacks is a
:class:`~worldgate.evaluate.features.MissingFeature`, never computed).

**Key.** ``projection@<VERSION>.<digest[:16]>-measured.npz`` in the cache folder of view A's video, the digest a sha256
of :data:`VERSION`, the world module's source (it owns the casting and the game rules, and is edited in another
layer), the case's two-player spec (players, world, interactions, checks), both commanded pose arrays (dtype, shape and
bytes), the intrinsics, the frame size, the frame rate (the game rules snap interactions to frames) and the frame
count: a change to any of them is another key, so a stale cast is never served. The full digest is stored and checked.

**Content.** Every cast that any scoring of the record may ask for, whatever the thresholds (they decide how far up a
column is probed) and with or without a VLM judge: for each view and each of the case's key frames
(:func:`~.record.needed_frames`), the whole expected scene, and for the column tasks every probe
:func:`~.pixels.column_answers` can make (each level of the marked column and the one above it, the four cells beside
it, the cross's footprint). Each is the index map of the first box hit (int32, as cast), keyed by a hash of (view,
frame, the boxes' geometry) and stored zlib-compressed. A cast the scoring asks for beyond those (it would be a gap in
this enumeration) is cast and added to the cache on a first evaluation, so that the rescore after it still finds it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import zlib
from pathlib import Path

import numpy as np

from worldgate.trajectories.multiworldbench import world

from ..features import FeatureCache, MissingFeature
from .pixels import cast_view, cast_view_now, column_cells, expected_scene, probe_geometry
from .protocol import VIEWS
from .record import TwoView, needed_frames

#: bump when the geometry the casts are made of changes here (expected_scene, probe_geometry in pixels.py); the world
#: module's own changes are in the key already
VERSION = "1"
#: the tasks whose judgments probe the cells of a marked column (pixels.column_answers)
COLUMN_TASKS = ("shared_state", "persistence", "concurrent_placement")


@functools.lru_cache(maxsize=1)
def _world_source() -> bytes:
    try:
        return hashlib.sha256(Path(world.__file__).read_bytes()).digest()
    except (OSError, TypeError):  # no source beside the module: its name (VERSION must then be bumped by hand)
        return world.__name__.encode()


def projection_digest(tv: TwoView) -> str:
    """Content hash of everything a record's casts depend on (see the module's docstring)."""
    h = hashlib.sha256(f"worldgate multiworldbench projection {VERSION}\0".encode())
    h.update(_world_source())
    h.update(json.dumps(tv.spec, sort_keys=True, default=repr).encode())
    for name, a in [(p, tv.poses[p]) for p in VIEWS] + [("K", tv.K)]:
        a = np.ascontiguousarray(a)
        h.update(f"\0{name} {a.dtype.str} {a.shape}\0".encode())
        h.update(a.tobytes())
    h.update(f"\0{int(tv.width)}x{int(tv.height)} {float(tv.fps)!r} fps {int(tv.n_frames)} frames".encode())
    return h.hexdigest()


def cast_key(viewer: str, f: int, boxes) -> str:
    """One cast of a record: the view, the frame (its commanded pose) and every box's geometry, exactly (what a cast's
    index map depends on beyond the record's digest; colours do not matter)."""
    g = np.array([(*b.center, *b.half, b.yaw) for b in boxes], np.float64)
    h = hashlib.blake2b(f"{viewer} {int(f)} {len(boxes)}\0".encode(), digest_size=16)
    h.update(g.tobytes())
    return h.hexdigest()


class Projection:
    """A record's casts: served from what was stored, else cast and stored (or, ``frozen`` for a rescore, refused).

    Keyed and versioned like an :class:`~worldgate.evaluate.features.Extractor`, so the run's
    :class:`~worldgate.evaluate.features.FeatureCache` stores it; it reads the record's commanded inputs, never a
    video frame."""

    name = "projection"
    version = VERSION
    backend = "measured"

    def __init__(self, tv: TwoView, frozen: bool = False):
        self.tv, self.frozen, self.digest = tv, frozen, projection_digest(tv)
        self.shape = (int(tv.height), int(tv.width))
        self.stored: dict[str, bytes] = {}  # cast key -> zlib-compressed int32 index map
        self.added = 0  # casts made since the cache was last written
        self.casts = 0  # casts made by this object (cast_boxes calls)
        self._at, self._maps = None, {}  # decoded maps of the (view, frame) asked last (a probe reuses its scene)

    def key(self) -> str:
        return f"{self.name}@{self.version}.{self.digest[:16]}-{self.backend}"

    def cast(self, viewer: str, f: int, boxes) -> np.ndarray:
        """The index map of the first box hit per pixel (-1: none), as :func:`~.pixels.cast_view_now` gives it;
        read-only."""
        k = cast_key(viewer, f, boxes)
        if self._at != (viewer, f):
            self._at, self._maps = (viewer, f), {}
        m = self._maps.get(k)
        if m is not None:
            return m
        z = self.stored.get(k)
        if z is not None:
            m = np.frombuffer(zlib.decompress(z), np.int32).reshape(self.shape)
        elif self.frozen:
            raise MissingFeature(f"{self.tv.dir.name}: the cached {self.key()} lacks a cast of view {viewer} at frame "
                                 f"{f} ({len(boxes)} boxes); run evaluate without --rescore first")
        else:
            m = np.ascontiguousarray(cast_view_now(self.tv, viewer, f, boxes), np.int32)
            self.stored[k] = zlib.compress(m.tobytes(), 1)
            self.added += 1
            self.casts += 1
        m.setflags(write=False)  # shared by every caller asking for this cast
        self._maps[k] = m
        return m

    def arrays(self) -> dict[str, np.ndarray]:
        keys = sorted(self.stored)
        blobs = [self.stored[k] for k in keys]
        return {"digest": np.array(self.digest), "shape": np.array(self.shape, np.int64),
                "keys": np.array(keys, dtype="U32"), "offsets": np.cumsum([0] + [len(b) for b in blobs], dtype=np.int64),
                "blob": np.frombuffer(b"".join(blobs), np.uint8)}

    def load(self, data: dict[str, np.ndarray]) -> bool:
        """Take what the cache holds; False when it is not this record's projection (or is malformed)."""
        try:
            if str(data["digest"]) != self.digest or tuple(int(x) for x in data["shape"]) != self.shape:
                return False
            keys, off, blob = data["keys"], data["offsets"], data["blob"]
            if len(off) != len(keys) + 1 or (len(keys) and int(off[-1]) != len(blob)):
                return False
            self.stored = {str(k): blob[off[i]:off[i + 1]].tobytes() for i, k in enumerate(keys)}
        except (KeyError, TypeError, ValueError):
            return False
        return True

    @classmethod
    def config(cls) -> dict:
        return {"name": cls.name, "version": cls.version, "backend": cls.backend, "max_side": None,
                "what": "the expected world ray cast from the commanded poses (index maps of every cast the measured "
                        "judgments make), keyed by a hash of the spec, both pose arrays, K, size and fps"}


def project(tv: TwoView, proj: Projection) -> None:
    """Make in ``proj`` every cast a scoring of ``tv`` may ask for (see the module's docstring)."""
    column = (tv.spec.get("checks") or {}).get("column") if tv.task in COLUMN_TASKS else None
    before, tv.projection = tv.projection, proj
    try:
        for v in VIEWS:
            for f in needed_frames(tv):
                state, boxes = expected_scene(tv, v, f)
                cast_view(tv, v, f, boxes)  # the scene: avatars, structures, and what lies behind an empty cell
                if column is None:
                    continue
                i, k = column
                cells, beside = column_cells(state, column)
                for cell in cells + [(i, len(cells), k)] + beside:
                    probe_geometry(tv, v, f, boxes, cell)
                if not cells:  # after a destroy: is the cross visible on the ground
                    probe_geometry(tv, v, f, boxes, (i, 0, k), ground=True)
    finally:
        tv.projection = before


def attach_projection(tv: TwoView, cache: FeatureCache, rescore: bool, stats: dict,
                      complete: bool = True) -> Projection | None:
    """Attach the record's projection to ``tv``: read from the cache, or (not on a rescore) computed and cached.
    ``complete``: cast everything up front (:func:`project`); else only what the scoring asks for is cast (a record
    without the Engine's geometry, of which the measured path casts little). None for a case with no key frames."""
    if not needed_frames(tv):
        return None  # nothing of it is measured from pixels (matched navigation)
    proj = Projection(tv, frozen=rescore)
    rec = tv.views[VIEWS[0]]
    hit = cache.get(rec, proj)
    if hit is not None and proj.load(hit):
        stats["cached"] += 1
    elif rescore:
        raise MissingFeature(f"{tv.dir.name}: feature {proj.key()} is not cached; run evaluate without --rescore first")
    else:
        if complete:
            project(tv, proj)
        cache.put(rec, proj, proj.arrays())
        proj.added = 0
        stats["computed"] += 1
    tv.projection = proj
    return proj


def save_projection(tv: TwoView, cache: FeatureCache) -> None:
    """After scoring: cache the casts the scoring added to the projection (none where :func:`project` made them all)."""
    proj = tv.projection
    if proj is not None and proj.added:
        cache.put(tv.views[VIEWS[0]], proj, proj.arrays())
        proj.added = 0


def projection_info() -> dict:
    p = Projection
    return {"backend": p.backend, "key": f"{p.name}@{p.version}-{p.backend}", **p.config()}
