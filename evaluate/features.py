"""Feature framework: extractors with name, version and backend; one decode per record; an on-disk cache.

Frames are decoded once per record and streamed to every extractor that still has work to do (resized once per
analysis size, a few frames at a time, so nothing holds a long video at full size). Results are cached as ``.npz`` under
``<run>/.features/<video sha256[:20]>/<name>@<version>-<backend>.npz``: the key holds the record's content hash and
the extractor's name, version and backend, so no estimator runs twice for one record and a changed extractor never
serves stale numbers.
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from worldgate.generate.records import read_meta
from worldgate.generate.video import read_frames, sha256_file


class FeatureError(RuntimeError):
    """A record's features could not be computed (unreadable video, too few frames, ...)."""


class MissingFeature(FeatureError):
    """``--rescore`` asked for a feature that is not cached."""


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


class Extractor:
    """Base class: ``start`` -> ``update`` per frame (in order) -> ``finish`` returns arrays to cache."""

    name = "base"
    version = "1"
    backend = "classical"
    #: analysis size: frames are resized so the longer side is at most this (None: native)
    max_side: int | None = None

    def key(self) -> str:
        return f"{self.name}@{self.version}-{self.backend}"

    def start(self, rec: RecordView) -> None:
        self.rec = rec

    def update(self, i: int, frame: np.ndarray):  # pragma: no cover - interface
        """Take frame ``i``. May return a zero-argument callable: work that needs nothing but what it captured (a
        frame pair, say). The pool runs it on any free thread, possibly while later frames are updated; every such job
        has run before ``finish``. It keeps one of the extractor's queue places until it is done."""
        raise NotImplementedError

    def finish(self) -> dict[str, np.ndarray]:  # pragma: no cover - interface
        raise NotImplementedError

    def config(self) -> dict:
        return {"name": self.name, "version": self.version, "backend": self.backend, "max_side": self.max_side}


def analysis_size(w: int, h: int, max_side: int | None) -> tuple[int, int]:
    if not max_side or max(w, h) <= max_side:
        return w, h
    s = max_side / max(w, h)
    return max(2, int(round(w * s / 2)) * 2), max(2, int(round(h * s / 2)) * 2)


class FeatureCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, rec: RecordView, ex: Extractor) -> Path:
        return self.root / rec.content_hash[:20] / f"{ex.key()}.npz"

    def get(self, rec: RecordView, ex: Extractor) -> dict[str, np.ndarray] | None:
        p = self.path(rec, ex)
        if not p.is_file():
            return None
        try:
            with np.load(p, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError):
            return None  # a torn cache file is recomputed, never trusted

    def put(self, rec: RecordView, ex: Extractor, data: dict[str, np.ndarray]) -> None:
        p = self.path(rec, ex)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".tmp{os.getpid()}.npz")
        np.savez(tmp, **data)
        os.replace(tmp, p)
        info = p.parent / "record.json"
        if not info.exists():
            info.write_text(json.dumps({"record": str(rec.dir), "video_sha256": rec.content_hash}))


def open_record(folder: Path) -> RecordView:
    """A complete rollout record as extractors see it; raises FeatureError with the reason otherwise."""
    folder = Path(folder)
    meta = read_meta(folder)
    if not isinstance(meta, dict):
        raise FeatureError(f"{folder.name}: no readable meta.json")
    video = folder / "video.mp4"
    if not video.is_file():
        raise FeatureError(f"{folder.name}: video.mp4 is missing")
    try:
        traj = json.loads((folder / "trajectory.json").read_text())
        poses = np.load(folder / "poses.npy", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise FeatureError(f"{folder.name}: unreadable trajectory.json/poses.npy ({e})") from None
    if not isinstance(traj, dict) or not isinstance(traj.get("segments"), list):
        raise FeatureError(f"{folder.name}: trajectory.json is not a worldgate trajectory (no segment list)")
    if poses.dtype.kind != "f" or poses.ndim != 3 or poses.shape[1:] != (4, 4) or not np.isfinite(poses).all():
        raise FeatureError(f"{folder.name}: poses.npy must be finite float (F, 4, 4) camera-to-world poses, got "
                           f"{poses.dtype} {poses.shape}{'' if poses.dtype.kind != 'f' or np.isfinite(poses).all() else ' with NaN/inf'}")
    try:
        ach = meta.get("achieved") or {}
        sha = ((meta.get("files") or {}).get("video.mp4") or {}).get("sha256")
        width, height = int(ach.get("width", 0)), int(ach.get("height", 0))
        fps, frames = float(ach.get("fps", traj.get("fps", 16.0))), int(ach.get("frames", 0))
    except (AttributeError, TypeError, ValueError) as e:
        raise FeatureError(f"{folder.name}: malformed meta.json ({type(e).__name__}: {e})") from None
    if not (np.isfinite(fps) and fps > 0) or frames < 0 or width < 0 or height < 0:
        raise FeatureError(f"{folder.name}: meta.json achieved values are invalid (fps={fps}, frames={frames}, "
                           f"size={width}x{height})")
    actual = sha256_file(video)
    if sha and sha != actual:
        meta = dict(meta, caveats=list(meta.get("caveats") or []) + ["video.mp4 changed after the record was written"])
    return RecordView(folder, meta, traj, poses, video, width, height, fps, frames, actual)


def scoring_view(rec: RecordView) -> dict:
    """What a metric may read of a record besides its features: commanded trajectory and poses, fps, size, tags."""
    tags = (rec.meta.get("case") or {}).get("tags") or {}
    return {"trajectory": rec.trajectory, "fps": rec.fps, "poses": rec.poses, "dir": rec.dir, "case": rec.dir.name,
            "tags": tags, "model": (rec.meta.get("adapter") or {}).get("name"), "width": rec.width,
            "height": rec.height}


def _check_stream(rec: RecordView, vmeta: dict) -> None:
    """The decoded stream must be what meta.json says was measured: a wrong-fps or resized video is an error."""
    fps = float(vmeta.get("fps") or 0.0)
    if rec.fps and fps and abs(fps - rec.fps) > 0.01 * rec.fps:
        raise FeatureError(f"{rec.dir.name}: the video plays at {fps:g} fps but meta.json records {rec.fps:g} fps "
                           f"(re-encoded or wrong-fps video?): rewrite the record or fix its achieved fps")
    size = tuple(vmeta.get("source_size") or vmeta.get("size") or ())
    if rec.width and rec.height and size and size != (rec.width, rec.height):
        raise FeatureError(f"{rec.dir.name}: the video is {size[0]}x{size[1]} but meta.json records "
                           f"{rec.width}x{rec.height}")


def compute_features(rec: RecordView, extractors: list[Extractor], cache: FeatureCache,
                     rescore: bool = False) -> tuple[dict[str, dict], dict]:
    """Cached features for every extractor; the video is decoded at most once, only if something is missing.

    Returns ({extractor name: arrays}, stats) with stats = {"computed": [...], "cached": [...], "decode_s", ...}.
    """
    out, todo = {}, []
    stats = {"computed": [], "cached": [], "seconds": {}}
    for ex in extractors:
        hit = cache.get(rec, ex)
        if hit is not None:
            out[ex.name] = hit
            stats["cached"].append(ex.key())
        elif rescore:
            raise MissingFeature(f"{rec.dir.name}: feature {ex.key()} is not cached; run evaluate without --rescore first")
        else:
            todo.append(ex)
    if not todo:
        return out, stats
    for ex in todo:
        ex.start(rec)
    t0 = time.perf_counter()
    n = 0
    # the extractors run on a pool of threads, one per usable core (OpenCV releases the GIL): each extractor sees
    # every frame in order at its analysis size (a size several extractors share is resized once per frame, see
    # _Frame). OpenCV's own thread pool is off meanwhile: the extractors already keep every core busy, and a nested
    # pool only adds spinning and hand-offs.
    pool = _Pool(min(len(todo), _usable_cores()))
    workers = [_Worker(ex, pool) for ex in todo]
    vmeta: dict = {}
    cv_threads = _opencv_threads(_OPENCV_THREADS)
    try:
        # one decoding thread: the extractors keep the cores busy, and ffmpeg's frame threads only add hand-offs
        # (~10 % less decoder CPU for the same frames)
        for i, frame in enumerate(read_frames(rec.video, meta_out=vmeta, decoder_threads=1)):
            if i == 0:
                _check_stream(rec, vmeta)
            shared = _Frame(frame)
            for w in workers:
                w.put(i, shared)
            n = i + 1
    except FeatureError:
        raise
    except (OSError, ValueError, RuntimeError) as e:
        raise FeatureError(f"{rec.dir.name}: video could not be decoded ({type(e).__name__}: {e})") from None
    finally:
        for w in workers:
            w.flush()
        pool.close()
        _opencv_threads(cv_threads)
    for w in workers:
        if w.error is not None:
            raise FeatureError(f"{rec.dir.name}: extractor {w.ex.key()} failed: {type(w.error).__name__}: {w.error}")
    if n < 4:
        raise FeatureError(f"{rec.dir.name}: video has {n} decodable frames; at least 4 are needed")
    if rec.n_frames and n != rec.n_frames:
        raise FeatureError(f"{rec.dir.name}: decoded {n} frames but meta.json records {rec.n_frames} (truncated video?)")
    stats["decode_and_extract_s"] = time.perf_counter() - t0
    for w in workers:
        ex = w.ex
        t1 = time.perf_counter()
        data = ex.finish()
        # the extractor's own work: CPU time on resizing + update (on whichever pool thread), and finish
        stats["seconds"][ex.key()] = w.busy + time.perf_counter() - t1
        cache.put(rec, ex, data)
        out[ex.name] = data
        stats["computed"].append(ex.key())
    return out, stats


#: OpenCV threads while extractors run (None: leave OpenCV's setting alone)
_OPENCV_THREADS: int | None = 1


def _opencv_threads(n: int | None) -> int | None:
    """Set OpenCV's thread count; returns the previous one (None when nothing was changed)."""
    if n is None:
        return None
    prev = cv2.getNumThreads()
    if prev != n:
        cv2.setNumThreads(n)
    return prev


class _Frame:
    """One decoded frame, shared by the workers: a resized copy is made once per analysis size, by the first worker
    that asks for it (nothing is kept beyond the frame's life in the queues)."""

    __slots__ = ("full", "sized", "lock")

    def __init__(self, full: np.ndarray):
        self.full, self.sized, self.lock = full, {}, threading.Lock()

    def at(self, size: tuple[int, int]) -> np.ndarray:
        if size == (self.full.shape[1], self.full.shape[0]):
            return self.full
        with self.lock:
            f = self.sized.get(size)
            if f is None:
                f = self.sized[size] = _resize(self.full, size)
        return f


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class _Pool:
    """Threads that run the extractors' frames: an extractor is on at most one thread at a time (so it sees its frames
    one by one, in order), but no thread is tied to one extractor. With as many threads as cores, no core idles while
    some extractor has frames waiting, and no more threads contend for the GIL and the cores than can run (a thread
    per extractor switched context about 3x as often and spent ~8 % more CPU on a 2-core machine)."""

    BATCH = 4  # frames an extractor handles per turn before its thread serves the next extractor in line

    def __init__(self, n_threads: int):
        self.cv = threading.Condition()
        self.ready: "collections.deque[_Worker]" = collections.deque()  # extractors with frames and no thread
        self.closing = False
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(max(1, n_threads))]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        while True:
            with self.cv:
                while not self.ready and not self.closing:
                    self.cv.wait()
                if not self.ready:
                    return
                w = self.ready.popleft()
            w.drain(self.BATCH)

    def close(self) -> None:
        """Wait until every queued frame is handled, then end the threads."""
        with self.cv:
            self.closing = True
            self.cv.notify_all()
        for t in self.threads:
            t.join()


class _Worker:
    """One extractor's queue of frames (at most ``depth`` waiting; the decoder waits beyond that), run on a _Pool.

    An extractor may define ``needs_frame(i) -> bool``: where it returns False, ``update(i, None)`` is called (in
    order, with the next frame it needs, or at the end) and the frame is neither resized for it nor holds a queue
    place nor wakes a thread (an extractor that samples every n-th frame pays nothing for the others)."""

    def __init__(self, ex: Extractor, pool: _Pool, depth: int = 8):
        self.ex, self.pool, self.error, self.size, self.busy = ex, pool, None, None, 0.0
        self.needs = getattr(ex, "needs_frame", None)
        self.pending: "collections.deque[tuple[int, _Frame]]" = collections.deque()
        self.scheduled = False  # in the pool's line or on a thread
        self.space = threading.Semaphore(depth)
        self.lock = threading.Lock()

    def put(self, i: int, frame: _Frame) -> None:
        if self.error is not None:
            return
        if self.needs is not None and not self.needs(i):
            with self.pool.cv:  # no place, no wake-up: it rides along with the next frame (or flush)
                self.pending.append((i, None))
            return
        self.space.acquire()
        with self.pool.cv:
            self.pending.append((i, frame))
            self._schedule()

    def flush(self) -> None:
        """After the last frame: make sure skipped frames still waiting are handed over."""
        with self.pool.cv:
            if self.pending:
                self._schedule()

    def _schedule(self) -> None:  # with pool.cv held
        if not self.scheduled:
            self.scheduled = True
            self.pool.ready.append(self)
            self.pool.cv.notify()

    def drain(self, batch: int) -> None:
        """Handle up to ``batch`` needed frames in order (skipped ones on the way), then go back in line if more are
        waiting."""
        cv = self.pool.cv
        done = 0
        while done < batch:
            with cv:
                if not self.pending:
                    self.scheduled = False
                    return
                i, frame = self.pending.popleft()
            if frame is None:  # a frame this extractor does not need (see put)
                self._update(i, None)
                continue
            done += 1
            job = self._update(i, frame)
            if job is None:
                self.space.release()
            else:  # the place is freed when the job is done
                with cv:
                    self.pool.ready.append(_Job(job, self))
                    cv.notify()
        with cv:
            if self.pending:
                self.pool.ready.append(self)
                cv.notify()
            else:
                self.scheduled = False

    def _update(self, i: int, frame: _Frame):
        if self.error is not None:
            return None
        t0 = time.thread_time()
        job = None
        try:
            if frame is None:
                job = self.ex.update(i, None)
            else:
                if self.size is None:
                    self.size = analysis_size(frame.full.shape[1], frame.full.shape[0], self.ex.max_side)
                job = self.ex.update(i, frame.at(self.size))
        except Exception as e:  # reported by compute_features with the extractor's name
            self.error = e
        self.add_busy(time.thread_time() - t0)
        return job if callable(job) else None

    def add_busy(self, dt: float) -> None:
        with self.lock:
            self.busy += dt


class _Job:
    """A callable an extractor's update returned, in the pool's line like a worker (see Extractor.update)."""

    __slots__ = ("fn", "worker")

    def __init__(self, fn, worker: _Worker):
        self.fn, self.worker = fn, worker

    def drain(self, batch: int) -> None:
        w = self.worker
        t0 = time.thread_time()
        try:
            if w.error is None:
                self.fn()
        except Exception as e:  # reported by compute_features with the extractor's name
            w.error = e
        w.add_busy(time.thread_time() - t0)
        w.space.release()


def _resize(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA)
