"""Context policies: which earlier chunks a chunked world model may attend to when it generates the next chunk.

A policy is a pure, deterministic selection over chunk metadata (frame range and commanded camera-to-world poses),
under one budget unit — **chunks** — with an optional sink (the first chunk, which holds the conditioning frame) and
a window of recent chunks:

``full_kv``         every earlier chunk (no budget);
``sliding_window``  the sink plus the most recent chunks, ``budget`` in all;
``fov``             the sink, ``recent`` most recent chunks, and the rest of the budget filled with earlier chunks
                    ranked by field-of-view overlap with the chunk about to be generated (HY-WorldPlay's retrieval,
                    hyvideo/utils/retrieval_context.py:142-314 at da2d0c2: Monte-Carlo points in a sphere around the
                    new camera, tested against both cameras' horizontal/vertical FOV, with a distance gate to the
                    earlier camera; overlap = |in both| / |in new|). Ties go to the more recent chunk.

With ``budget=None`` (unlimited) every policy keeps every earlier chunk, so rollouts are identical. Adapters whose
models cache chunk history take the policy as ``rollout(plan, context=policy)`` and report the ids they held per
chunk (``Chunk.context_ids``); ``generate`` chooses the policy, passes it in and writes the held ids to
``context.jsonl``. Policies live with the adapters that apply them, so no adapter imports ``generate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from worldgate.trajectories.registry import did_you_mean

POLICIES = ("full_kv", "sliding_window", "fov")


@dataclass(frozen=True)
class ChunkInfo:
    index: int
    start: int  # first frame (inclusive)
    stop: int  # last frame (exclusive)
    c2w: np.ndarray = field(repr=False, compare=False)  # (stop - start, 4, 4) commanded poses of its frames


def chunk_infos(c2w: np.ndarray, chunk: int, first: int | None = None) -> list[ChunkInfo]:
    """Split a rollout's poses into chunks: ``first`` frames (default ``chunk``), then ``chunk`` each."""
    first = chunk if first is None else first
    out, start, k = [], 0, 0
    while start < len(c2w):
        stop = min(len(c2w), start + (first if k == 0 else chunk))
        out.append(ChunkInfo(k, start, stop, c2w[start:stop]))
        start, k = stop, k + 1
    return out


@dataclass
class ContextPolicy:
    name: str = "full_kv"
    budget: int | None = None  # chunks held in context (None: unlimited)
    sink: bool = True  # always keep chunk 0 (the conditioning frame's chunk)
    recent: int = 1  # fov: most recent chunks always kept
    fov_h: float = 60.0  # fov: degrees (HY-WorldPlay's call site: 60 x 35)
    fov_v: float = 35.0
    points: int = 4096  # fov: Monte-Carlo points
    radius: float = 8.0  # fov: sphere radius around the new camera (metres)
    gate: float = 8.0  # fov: points farther than this from the earlier camera do not count for it
    seed: int = 0

    def __post_init__(self):
        if self.name not in POLICIES:
            raise did_you_mean("context policy", self.name, POLICIES)
        if self.budget is not None and int(self.budget) < 1:
            raise ValueError(f"context budget must be >= 1 chunk (or unlimited), got {self.budget}")
        if self.name == "fov" and self.budget is not None and self.budget < int(self.sink) + self.recent:
            raise ValueError(f"fov: budget {self.budget} cannot hold the sink and {self.recent} recent chunk(s)")

    def describe(self) -> dict:
        d = {"name": self.name, "budget": self.budget, "unit": "chunks", "sink": self.sink}
        if self.name == "fov":
            d.update(recent=self.recent, fov_h=self.fov_h, fov_v=self.fov_v, points=self.points, radius=self.radius,
                     gate=self.gate, seed=self.seed)
        return d

    def select(self, history: list[ChunkInfo], upcoming: ChunkInfo) -> list[int]:
        """Indices of the earlier chunks held in context while ``upcoming`` is generated (sorted)."""
        ids = [c.index for c in history]
        if self.name == "full_kv" or self.budget is None or len(ids) <= self.budget:
            return ids
        keep: list[int] = [ids[0]] if self.sink else []
        rest = [i for i in ids if i not in keep]
        if self.name == "sliding_window":
            n = self.budget - len(keep)
            return sorted(keep + (rest[-n:] if n > 0 else []))
        recent = rest[-self.recent:] if self.recent > 0 else []
        keep += recent
        cand = [c for c in history if c.index not in keep]
        slots = self.budget - len(keep)
        if slots > 0 and cand:
            scores = [fov_overlap(c.c2w, upcoming.c2w, self) for c in cand]
            order = sorted(range(len(cand)), key=lambda j: (-scores[j], -cand[j].index))
            keep += [cand[j].index for j in order[:slots]]
        return sorted(keep)


def _representatives(c2w: np.ndarray) -> np.ndarray:
    n = len(c2w)
    return c2w[sorted({0, n // 2, n - 1})]


def _sphere_points(n: int, radius: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return d * radius * rng.random(n)[:, None] ** (1.0 / 3.0)


def _in_fov(points_w: np.ndarray, c2w: np.ndarray, fov_h: float, fov_v: float) -> np.ndarray:
    """Points inside the camera's horizontal and vertical FOV (OpenCV axes: z forward, x right, y down)."""
    R, t = c2w[:3, :3], c2w[:3, 3]
    p = (points_w - t) @ R  # world -> camera
    az = np.degrees(np.arctan2(p[:, 0], p[:, 2]))
    el = np.degrees(np.arctan2(-p[:, 1], np.hypot(p[:, 0], p[:, 2])))
    return (p[:, 2] > 0) & (np.abs(az) <= fov_h / 2) & (np.abs(el) <= fov_v / 2)


def fov_overlap(hist_c2w: np.ndarray, new_c2w: np.ndarray, p: ContextPolicy) -> float:
    """Mean over representative frame pairs of |in new FOV and in earlier FOV within the gate| / |in new FOV|."""
    base = _sphere_points(p.points, p.radius, p.seed)
    vals = []
    for q in _representatives(new_c2w):
        pts = base + q[:3, 3]
        in_q = _in_fov(pts, q, p.fov_h, p.fov_v)
        nq = int(in_q.sum())
        for h in _representatives(hist_c2w):
            if nq == 0:
                vals.append(0.0)
                continue
            near = np.linalg.norm(pts - h[:3, 3], axis=1) <= p.gate
            vals.append(float((in_q & near & _in_fov(pts, h, p.fov_h, p.fov_v)).sum()) / nq)
    return float(np.mean(vals)) if vals else 0.0


def make_policy(name: str | None, budget: int | None = None, **kw) -> ContextPolicy | None:
    if name is None:
        return None
    return ContextPolicy(name=name, budget=None if budget is None else int(budget), **kw)


def kv_bytes(n_chunks: int, tokens_per_chunk: int, dim: int, bytes_per: int = 4) -> int:
    """Keys + values held for ``n_chunks`` chunks."""
    return 2 * n_chunks * tokens_per_chunk * dim * bytes_per


__all__ = ["POLICIES", "ChunkInfo", "ContextPolicy", "chunk_infos", "fov_overlap", "make_policy", "kv_bytes"]
