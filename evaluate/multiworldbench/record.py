"""Two-view records as MultiWorldBench's evaluator sees them, and the features it reads from them."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worldgate.generate.record import open_record, read_meta, record_views
from worldgate.generate.record_files import RecordError
from worldgate.trajectories.multiworldbench.world import frame_of

from ..features.flow import FlowExtractor
from ..features.geometry import PoseExtractor
from ..features import (
    Extractor,
    FeatureCache,
    FeatureError,
    RecordView,
    compute_features,
)
from .chroma import nearest_classes
from .protocol import VIEWS


# ------------------------------------------------------------------------------------------------------ records
@dataclass
class TwoView:
    dir: Path
    meta: dict
    spec: dict  # the case's two_player dict: players, world, task, visibility, checks, interactions
    poses: dict  # "A"/"B" -> commanded c2w (F, 4, 4)
    views: dict  # "A"/"B" -> RecordView of that player's video
    actions: dict
    width: int
    height: int
    fps: float
    n_frames: int
    K: np.ndarray  # native intrinsics at the video's size
    #: the cached ray casts of the expected world (:class:`.projection.Projection`), attached by the scoring; None:
    #: cast on demand
    projection: object = None

    @property
    def task(self) -> str:
        return self.spec.get("task", "")


def is_two_view(folder: Path) -> bool:
    """A record with the two players' views (the record module says which views a record has)."""
    meta = read_meta(folder)
    return bool(meta) and list(record_views(meta)) == list(VIEWS)


def open_two_view(folder: Path) -> TwoView:
    """A complete two-view record as the evaluator sees it, opened and checked against its meta.json by the one
    verifier (:func:`worldgate.generate.record.open_record`: files inside the folder and regular, sha256, pose
    counts); FeatureError with the reason otherwise."""
    folder = Path(folder)
    try:
        rec = open_record(folder)
    except RecordError as e:
        raise FeatureError(str(e)) from None
    meta = rec.meta
    if list(rec.views) != list(VIEWS):
        raise FeatureError(f"{folder.name}: not a two-view record (views {list(rec.views)})")
    if rec.actions is None:
        raise FeatureError(f"{folder.name}: actions.json is missing")
    spec = (meta.get("case") or {}).get("two_player")
    if not isinstance(spec, dict) or not isinstance(spec.get("players"), dict):
        raise FeatureError(f"{folder.name}: meta.json has no two-player case (case.two_player)")
    vmeta = {"intrinsics": meta.get("intrinsics"), "requested": meta.get("requested", {}), "case": meta.get("case")}
    views = {p: RecordView(dir=folder, meta=vmeta, trajectory={"segments": []}, poses=v.poses, video=v.video,
                           width=v.width, height=v.height, fps=v.fps, n_frames=v.n_frames,
                           content_hash=v.content_hash) for p, v in rec.views.items()}
    poses = {p: v.poses for p, v in rec.views.items()}
    a, b = views["A"], views["B"]
    if (a.width, a.height, a.n_frames) != (b.width, b.height, b.n_frames) or abs(a.fps - b.fps) > 1e-3:
        raise FeatureError(f"{folder.name}: the two views differ ({a.width}x{a.height}x{a.n_frames} @ {a.fps} vs "
                           f"{b.width}x{b.height}x{b.n_frames} @ {b.fps}): a step must give one frame per player")
    K = a.intrinsics
    if K is None:
        f = a.width / (2 * math.tan(math.radians(33.0)))
        K = np.array([f, f, (a.width - 1) / 2, (a.height - 1) / 2])
    return TwoView(folder, meta, spec, poses, views, rec.actions, a.width, a.height, a.fps, a.n_frames,
                   np.asarray(K, float))


# ------------------------------------------------------------------------------------------------------ features
class KeyFrames(Extractor):
    """The decoded frames a case's measured judgments look at (a handful per view), cached like any feature, with
    each pixel's nearest chromaticity class (:func:`~.chroma.nearest_classes`; the scoring thresholds it)."""

    name = "keyframes"
    version = "2"  # 2: + near (the nearest chromaticity classes)
    backend = "measured"
    max_side = None

    def __init__(self, indices):
        self.indices = sorted({int(i) for i in indices})

    def key(self) -> str:
        h = hashlib.sha1(json.dumps(self.indices).encode()).hexdigest()[:10]
        return f"{self.name}@{self.version}.{h}-{self.backend}"

    def start(self, rec):
        super().start(rec)
        self.want, self.keep = set(self.indices), {}

    def update(self, i, frame):
        if i in self.want:
            self.keep[i] = np.array(frame, copy=True)

    def finish(self):
        idx = sorted(self.keep)
        frames = np.stack([self.keep[i] for i in idx]) if idx else np.zeros((0, 1, 1, 3), np.uint8)
        return {"index": np.asarray(idx, np.int64), "frames": frames, **nearest_classes(frames)}

    def config(self) -> dict:
        return dict(super().config(), what="decoded frames at the case's check times (measured judgments) and each "
                                           "pixel's nearest chromaticity class")


def frame_at(t: float, tv: TwoView) -> int:
    return int(min(max(frame_of(t, tv.fps), 0), tv.n_frames - 1))


def needed_frames(tv: TwoView) -> list[int]:
    c, task = tv.spec.get("checks", {}), tv.task
    times = []
    if task == "cross_view_motion":
        times = [c["before_s"], c["after_s"]]
    elif task == "shared_state":  # the final frames (and the intermediate state of a two-step case)
        times = sorted(set(list(c["final_s"]) + list(c.get("before_s") or [])))
    elif task == "persistence":  # the after frames, and each role's before frame (the cross-visibility zero rule)
        before = c.get("before_s") or {"operator": float(c.get("edit_s", 2.5)) - 0.25, "observer": 0.25}
        times = sorted(set(list(c["final_s"]) + list(before.values())))
    elif task in ("building_reveal", "concurrent_placement"):
        times = list(c["frames_s"])
    elif task == "delayed_revisit":
        f0 = frame_at(c["first_s"], tv)
        f1 = frame_at(c["return_s"], tv) if "return_s" in c else f0 + int(c["gap_frames"])
        return [f0, min(f1, tv.n_frames - 1)]
    return [frame_at(t, tv) for t in times]


def needs(tv: TwoView) -> dict:
    """Classical features per view: poses of both players (matched navigation), flow of the actor (cross-view)."""
    if tv.task == "matched_navigation":
        return {p: ["poses"] for p in VIEWS}
    if tv.task == "cross_view_motion":
        return {tv.spec["checks"]["actor"]: ["flow"]}
    return {}


def view_features(tv: TwoView, backend: str, cache: FeatureCache, rescore: bool, stats: dict) -> dict:
    """{view: {"keyframes": {...}, "poses"/"flow": {...}}} computed (one decode per view) or read from the cache."""
    frames = needed_frames(tv)
    out = {}
    for p in VIEWS:
        ex = [KeyFrames(frames)] if frames else []
        if backend == "classical":
            ex += [{"poses": PoseExtractor, "flow": FlowExtractor}[name]() for name in needs(tv).get(p, [])]
        if not ex:
            out[p] = {}
            continue
        feats, st = compute_features(tv.views[p], ex, cache, rescore=rescore)
        stats["computed"] += len(st["computed"])
        stats["cached"] += len(st["cached"])
        out[p] = feats
    return out


def extractor_info() -> dict:
    kf = KeyFrames([])
    out = {ex.name: {"backend": ex.backend, "key": ex.key(), **ex.config()} for ex in (PoseExtractor(), FlowExtractor())}
    out["keyframes"] = {"backend": kf.backend, "key": f"{kf.name}@{kf.version}-{kf.backend}", **kf.config()}
    return out
