"""The two-view adapter protocol (MultiWorldBench): one world, two players, one frame per player per step.

A two-player adapter is an :class:`~worldgate.adapters.base.Adapter` whose info says ``players=2``. Its ``plan(case)``
takes a :class:`~worldgate.trajectories.multiworldbench.world.TwoPlayerCase` and returns :class:`NativeInputs` whose ``files`` hold
``actions.json``: both players' schedules, their interactions, and the per-step action table ``steps`` (one row per
frame: ``{"A": action, "B": action}``, an action being ``{"move", "look"}`` plus, on the step it fires,
``"act": "place"|"destroy"`` with ``material`` and its aim: ``column``, ``cells`` or ``occluder``).

The runtime contract is step-wise, as a multiplayer world model is driven:

- ``reset(plan, seed)`` starts a rollout;
- ``step(i, action_a, action_b) -> (frame_a, frame_b)`` advances one step with both players' actions and returns one
  uint8 frame (H, W, 3) per player;
- ``rollout(plan, context, seed)`` (provided) runs every step and yields :class:`~worldgate.adapters.base.Chunk` s
  whose ``frames`` are ``{"A": ..., "B": ...}``, which ``generate`` writes as a record with two views
  (``generate/records.py``: ``video_a.mp4``, ``video_b.mp4``, both players' commanded poses and the action schedule).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from worldgate.trajectories.multiworldbench.world import PLAYERS, frame_of

from .base import Adapter, AdapterError, Chunk, NativeInputs


def step_table(case, fps: float, n: int) -> list[dict]:
    """Per-frame actions of both players: the held move and look of the segment containing t_i = i / fps, and the
    interactions that fire on this step (the first frame at or after their time)."""
    rows = [{p: {} for p in PLAYERS} for _ in range(n)]
    for p in PLAYERS:
        sched = case.players[p]
        b = np.concatenate([[0.0], np.cumsum([s.seconds for s in sched.segments])])
        for i in range(n):
            k = int(np.clip(np.searchsorted(b, i / fps + 1e-9, side="right") - 1, 0, len(sched.segments) - 1))
            rows[i][p] = {"move": sched.segments[k].move, "look": sched.segments[k].look}
        for a in sched.interactions(p):
            i = frame_of(a["t"], fps)
            if i < n:
                rows[i][p].update({k: v for k, v in a.items() if k not in ("t", "player")})
    return rows


class TwoPlayerAdapter(Adapter):
    """Base class of two-player adapters: subclasses implement ``plan``, ``reset`` and ``step``."""

    def reset(self, plan: NativeInputs, seed: int = 0) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def step(self, i: int, action_a: dict, action_b: dict) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    def chunk_frames(self) -> int:
        return int(getattr(self, "chunk", 16))

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0) -> Iterator[Chunk]:
        if context is not None:
            raise AdapterError(f"{self.info.name}: two-player rollouts take no context policy")
        steps = plan.files["actions.json"]["steps"]
        if len(steps) != plan.n_frames:
            raise AdapterError(f"{self.info.name}: the plan has {len(steps)} action steps for {plan.n_frames} frames")
        self.reset(plan, seed)
        T = self.chunk_frames()
        for start in range(0, plan.n_frames, T):
            stop = min(start + T, plan.n_frames)
            fa, fb = [], []
            for i in range(start, stop):
                a, b = self.step(i, steps[i]["A"], steps[i]["B"])
                fa.append(a)
                fb.append(b)
            yield Chunk(start=start, frames={"A": np.stack(fa), "B": np.stack(fb)})
