"""Feature framework: extractors with name, version and backend; one decode per record; an on-disk cache.

Frames are decoded once per record and streamed to every extractor that still has work to do (resized once per
analysis size, a few frames at a time, so nothing holds a long video at full size). Results are cached as ``.npz`` under
``<run>/.features/<inputs digest[:20]>/<name>@<version>-<backend>.npz``: the digest covers every input an extractor
reads (the video's content hash, the commanded poses, the intrinsics and the requested and achieved size, fps and
frames, the trajectory, targets.npz and dynamic.json), and the file name the extractor's name, version and backend, so
no estimator runs twice for one record, a record whose inputs differ (a copy with other intrinsics, say) is never
served another's features, and a changed extractor never serves stale numbers.

:func:`open_record` checks a record against its meta.json before anything reads it: a file that changed after the
record was written (its sha256 differs), a pose count that is not the achieved frame count, or a file that is a link,
a FIFO or a device is a :class:`FeatureError` (an error entry of that record; the others are still scored).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from worldgate.generate.record import RecordView  # noqa: F401  (what extractors see of a record: part of this API)
from worldgate.generate.record import open_record as verify_record
from worldgate.generate.records import (
    RecordError,
    check_record_file,
    sha256_record_file,
)
from worldgate.generate.video import read_frames

from .. import cache as feature_cache
from . import pool
from .pool import analysis_size  # noqa: F401 (analysis_size: API, re-exported by the package)


class FeatureError(RuntimeError):
    """A record's features could not be computed (unreadable video, too few frames, ...)."""


class MissingFeature(FeatureError):
    """``--rescore`` asked for a feature that is not cached."""


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

    # what the registry asks of every extractor class before the first record (metrics.extractors), as inspect_ai's
    # providers: each extractor says whether it runs here and names what it lacks with the command that gets it
    @classmethod
    def available(cls) -> bool:
        """Whether this extractor runs on this machine (False: not run; its metrics are unavailable with the reason
        their benchmark names)."""
        return True

    @classmethod
    def missing(cls) -> list[dict]:
        """The models or files it needs that are not here, each ``{"feature", "what", "source", "id", "licence",
        "fetch"}``: the registry names every feature's at once (models.catalogue.preflight)."""
        return []

    @classmethod
    def preflight(cls) -> None:
        """Raise, before the first record, an error naming each missing piece beyond model files (a checkout, a
        package, a port) with the command that gets it."""


class Choice:
    """A feature with several backends on one side (``learned``): the first whose ``available()`` holds runs, so a
    registry entry names the feature once and the choice is made where the backends live. Called like an extractor
    class (``Choice(...)(**kw)`` builds the chosen one)."""

    def __init__(self, name: str, *options: type[Extractor]):
        self.name, self.options = name, options

    def pick(self) -> type[Extractor]:
        return next((o for o in self.options if o.available()), self.options[-1])

    def available(self) -> bool:
        return any(o.available() for o in self.options)

    def missing(self) -> list[dict]:
        return self.pick().missing()

    def preflight(self) -> None:
        self.pick().preflight()

    def __call__(self, **kw) -> Extractor:
        return self.pick()(**kw)


#: the files of a one-view record that extractors read besides the video (optional ones: only where present)
INPUT_FILES = ("poses.npy", "trajectory.json", "targets.npz", "dynamic.json")
OPTIONAL_FILES = ("targets.npz", "dynamic.json")


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def inputs_digest(rec: RecordView, file_hashes: dict | None = None) -> str:
    """sha256 over everything an extractor may read of ``rec``: the video's content hash, the commanded poses, the
    trajectory, the intrinsics and the requested and achieved size/fps/frames of meta.json, and targets.npz and
    dynamic.json where present (``file_hashes``: their sha256 where known; else they are hashed from ``rec.dir``)."""
    if file_hashes is None:
        file_hashes = {}
        for name in OPTIONAL_FILES:
            try:
                if check_record_file(rec.dir / name, required=False):
                    file_hashes[name] = sha256_record_file(rec.dir / name)
            except (RecordError, OSError) as e:
                raise FeatureError(f"{rec.dir.name}: {e}") from None
    poses = np.ascontiguousarray(rec.poses)
    meta = rec.meta if isinstance(rec.meta, dict) else {}
    parts = {
        "video": rec.content_hash,
        "poses": _sha(f"{poses.dtype.str}{poses.shape}".encode() + poses.tobytes()),
        "trajectory": _sha(json.dumps(rec.trajectory, sort_keys=True, default=repr).encode()),
        "intrinsics": meta.get("intrinsics"),
        # read by extractors: the WorldMemBench family (camera poses run on the static families) and the model (the
        # HUD WorldMark greys for its model, models.da3.WM_HUD)
        "case_tags": (meta.get("case") or {}).get("tags") if isinstance(meta.get("case"), dict) else None,
        "model": meta.get("model"),
        "requested": meta.get("requested"),
        "achieved": [rec.width, rec.height, rec.fps, rec.n_frames],
        "files": {k: file_hashes.get(k) for k in OPTIONAL_FILES},
    }
    return _sha(json.dumps(parts, sort_keys=True, default=repr).encode())


class FeatureCache(feature_cache.FeatureCache):
    """The run's feature cache (evaluate/cache.py: each feature digest-checked on read, nothing under ``.features``
    followed through a link, every write atomic), keyed by :func:`inputs_digest`."""

    def __init__(self, root: Path):
        super().__init__(root, digest=inputs_digest)


def open_record(folder: Path) -> RecordView:
    """A complete one-view rollout record as extractors see it, opened and checked against its meta.json by the one
    verifier, :func:`worldgate.generate.record.open_record`; FeatureError with its reason otherwise (a file that is a
    link, a FIFO or a device, a file that changed after the record was written, a pose count that is not the achieved
    frame count, ...)."""
    folder = Path(folder)
    try:
        r = verify_record(folder, diagnose=_stream_diagnosis)
    except RecordError as e:
        raise FeatureError(str(e)) from None
    if not r.one_view:
        raise FeatureError(f"{folder.name}: a record of the views {', '.join(r.views)}, not one video: its benchmark's "
                           "reader scores it")
    v = r.views[""]
    rec = RecordView(folder, r.meta, r.trajectory, v.poses, v.video, v.width, v.height, v.fps, v.n_frames,
                     v.content_hash, caveats=list(r.caveats))
    rec.input_digest = inputs_digest(rec, r.file_hashes)
    return rec


def error_line(e: BaseException, limit: int = 200) -> str:
    """An exception in one line: its type and the first line of its message, at most ``limit`` characters of it."""
    first = str(e).splitlines()[0][:limit] if str(e) else ""
    return f"{type(e).__name__}: {first}"


def decoder_reason(e: BaseException, limit: int = 200) -> str:
    """A decoder failure in one line for the console and results.json["errors"]: the exception's type and the last
    non-empty line of its message (imageio-ffmpeg appends ffmpeg's whole stderr, banner and build configuration
    included, and ffmpeg's last line is the reason), at most ``limit`` characters."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    last = lines[-1] if lines else ""
    if len(last) > limit:
        last = last[: limit - 3] + "..."
    return f"{type(e).__name__}: {last}" if last else type(e).__name__


def _stream_diagnosis(video: Path, width: int, height: int, fps: float) -> str | None:
    """What a swapped video holds, where it differs from meta.json (fps, size) or cannot be decoded at all."""
    vmeta: dict = {}
    gen = read_frames(video, meta_out=vmeta, decoder_threads=1)
    try:
        next(gen)
    except StopIteration:
        return "the video has no decodable frames"
    except Exception as e:  # any decoder failure is the diagnosis
        return f"the video could not be decoded ({decoder_reason(e)})"
    finally:
        gen.close()
    return _stream_mismatch(vmeta, width, height, fps)


def scoring_view(rec: RecordView) -> dict:
    """What a metric may read of a record besides its features: commanded trajectory and poses, fps, size, tags."""
    tags = (rec.meta.get("case") or {}).get("tags") or {}
    return {"trajectory": rec.trajectory, "fps": rec.fps, "poses": rec.poses, "dir": rec.dir, "case": rec.dir.name,
            "tags": tags, "model": (rec.meta.get("adapter") or {}).get("name"), "width": rec.width,
            "height": rec.height}


def _stream_mismatch(vmeta: dict, width: int, height: int, fps_meta: float) -> str | None:
    """Where the decoded stream differs from what meta.json says was measured (fps, size); None where it does not."""
    fps = float(vmeta.get("fps") or 0.0)
    if fps_meta and fps and abs(fps - fps_meta) > 0.01 * fps_meta:
        return (f"the video plays at {fps:g} fps but meta.json records {fps_meta:g} fps (re-encoded or wrong-fps "
                "video?): rewrite the record or fix its achieved fps")
    size = tuple(vmeta.get("source_size") or vmeta.get("size") or ())
    if width and height and size and size != (width, height):
        return f"the video is {size[0]}x{size[1]} but meta.json records {width}x{height}"
    return None


def _check_stream(rec: RecordView, vmeta: dict) -> None:
    """The decoded stream must be what meta.json says was measured: a wrong-fps or resized video is an error."""
    why = _stream_mismatch(vmeta, rec.width, rec.height, rec.fps)
    if why:
        raise FeatureError(f"{rec.dir.name}: {why}")


def compute_features(rec: RecordView, extractors: list[Extractor], cache: FeatureCache,
                     rescore: bool = False) -> tuple[dict[str, dict], dict]:
    """Cached features for every extractor; the video is decoded at most once, only if something is missing.

    Returns ({extractor name: arrays}, stats) with stats = {"computed": [...], "cached": [...], "decode_s", ...}.
    """
    out, todo = {}, []
    stats = {"computed": [], "cached": [], "seconds": {}}
    missing = []
    for ex in extractors:
        hit = cache.get(rec, ex)
        if hit is not None:
            out[ex.name] = hit
            stats["cached"].append(ex.key())
        elif rescore:
            missing.append(ex.key())
        else:
            todo.append(ex)
    if missing:
        # --rescore computes nothing: with some features cached (an imported WorldMark FLOW cache, say) the record
        # is scored from those and the metrics that read the others say they were not computed; with none, it is
        # an error
        if not out:
            raise MissingFeature(f"{rec.dir.name}: feature {missing[0]} is not cached; run evaluate without "
                                 "--rescore first")
        stats["missing"] = missing
    if not todo:
        return out, stats
    for ex in todo:
        ex.start(rec)
    t0 = time.perf_counter()
    n = 0
    # the extractors run on a pool of threads, one per usable core (OpenCV releases the GIL): each extractor sees
    # every frame in order at its analysis size (a size several extractors share is resized once per frame, see
    # pool.SharedFrame). OpenCV's own thread pool is off meanwhile: the extractors already keep every core busy, and a
    # nested pool only adds spinning and hand-offs; torch's intra-op threads are shared out the same way (cores per pool
    # thread), and every finish() below gets all cores back.
    n_threads = min(len(todo), pool.usable_cores())
    torch_threads = pool.torch_threads(max(1, pool.usable_cores() // n_threads))
    threads = pool.Pool(n_threads)
    workers = [pool.Worker(ex, threads) for ex in todo]
    vmeta: dict = {}
    cv_threads = pool.opencv_threads(pool.OPENCV_THREADS)
    try:
        # one decoding thread: the extractors keep the cores busy, and ffmpeg's frame threads only add hand-offs
        # (~10 % less decoder CPU for the same frames)
        for i, frame in enumerate(read_frames(rec.video, meta_out=vmeta, decoder_threads=1)):
            if i == 0:
                _check_stream(rec, vmeta)
            shared = pool.SharedFrame(frame)
            for w in workers:
                w.put(i, shared)
            n = i + 1
    except FeatureError:
        raise
    except (OSError, ValueError, RuntimeError) as e:
        raise FeatureError(f"{rec.dir.name}: video could not be decoded ({decoder_reason(e)})") from None
    finally:
        for w in workers:
            w.flush()
        threads.close()
        pool.opencv_threads(cv_threads)
        pool.torch_threads(torch_threads)
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
