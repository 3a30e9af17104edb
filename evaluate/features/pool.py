"""The thread pool that runs extractors over one decode of a record: every extractor sees every frame in order at
its analysis size (a size several extractors share is resized once per frame), on as many threads as usable cores,
with OpenCV's own pool off meanwhile (see core.compute_features)."""

from __future__ import annotations

import collections
import os
import sys
import threading
import time

import cv2
import numpy as np

def analysis_size(w: int, h: int, max_side: int | None) -> tuple[int, int]:
    if not max_side or max(w, h) <= max_side:
        return w, h
    s = max_side / max(w, h)
    return max(2, int(round(w * s / 2)) * 2), max(2, int(round(h * s / 2)) * 2)


#: OpenCV threads while extractors run (None: leave OpenCV's setting alone)
OPENCV_THREADS: int | None = 1


def opencv_threads(n: int | None) -> int | None:
    """Set OpenCV's thread count; returns the previous one (None when nothing was changed)."""
    if n is None:
        return None
    prev = cv2.getNumThreads()
    if prev != n:
        cv2.setNumThreads(n)
    return prev


class SharedFrame:
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


def torch_threads(n: int | None) -> int | None:
    """Set torch's intra-op thread count when torch is already imported (a classical evaluation never imports it);
    returns the previous count, or None when nothing was changed. Learned extractors run their inference in
    ``update`` on the pool's threads: with one thread per core each, a pass with two models asked for twice the cores
    (one tiny learned model's call on a loaded 2-core box: 22.3 s at two torch threads, 11.5 s at one). A pool
    thread reads the count when it first runs an op, so this is set before the pool's threads start."""
    torch = sys.modules.get("torch")
    if n is None or torch is None:
        return None
    prev = torch.get_num_threads()
    torch.set_num_threads(n)  # even when equal: a new thread reads the count set last, not this thread's
    return prev


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Pool:
    """Threads that run the extractors' frames: an extractor is on at most one thread at a time (so it sees its frames
    one by one, in order), but no thread is tied to one extractor. With as many threads as cores, no core idles while
    some extractor has frames waiting, and no more threads contend for the GIL and the cores than can run (a thread
    per extractor switched context about 3x as often and spent ~8 % more CPU on a 2-core machine)."""

    BATCH = 4  # frames an extractor handles per turn before its thread serves the next extractor in line

    def __init__(self, n_threads: int):
        self.cv = threading.Condition()
        self.ready: "collections.deque[Worker]" = collections.deque()  # extractors with frames and no thread
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


class Worker:
    """One extractor's queue of frames (at most ``depth`` waiting; the decoder waits beyond that), run on a Pool.

    An extractor may define ``needs_frame(i) -> bool``: where it returns False, ``update(i, None)`` is called (in
    order, with the next frame it needs, or at the end) and the frame is neither resized for it nor holds a queue
    place nor wakes a thread (an extractor that samples every n-th frame pays nothing for the others)."""

    def __init__(self, ex, pool: Pool, depth: int = 8):
        self.ex, self.pool, self.error, self.size, self.busy = ex, pool, None, None, 0.0
        self.needs = getattr(ex, "needs_frame", None)
        self.pending: "collections.deque[tuple[int, SharedFrame]]" = collections.deque()
        self.scheduled = False  # in the pool's line or on a thread
        self.space = threading.Semaphore(depth)
        self.lock = threading.Lock()

    def put(self, i: int, frame: SharedFrame) -> None:
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

    def _update(self, i: int, frame: SharedFrame):
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

    def __init__(self, fn, worker: Worker):
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
