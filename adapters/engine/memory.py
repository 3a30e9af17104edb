"""``engine-memory``: an Engine whose frames can only reproduce scene content held in its context.

It generates chunk by chunk (``chunk`` frames, 16 by default). While it generates chunk k it holds the chunks a
context policy selects (``generate --context full_kv|sliding_window|fov --budget N``; unlimited ``full_kv`` by
default) plus the chunk itself. Every scene entity (building, tree, object, person) it draws looks the way it looked
in the most recent held chunk that showed it. An entity that an earlier chunk showed but no held chunk did is
*invented again*: it comes back with its last look moved one step further along a colour direction of its own
(seeded by the rollout seed and the entity), so a forgotten place returns different, and more so each time it is
forgotten. Entities nobody has seen yet are drawn as the world has them, so
with everything held (unlimited budget) the rollout is frame-for-frame Engine GT.

Its cost grows with the context it attends to: every frame attends (softmax(QK^T)V, float32) from its own tokens
(a 16 x 16 grid of patch colours lifted to ``dim`` features by a fixed random projection) to the keys and values of
every held chunk's frames. That work is done for real, so policy wall times are measured, not modelled; the KV bytes
held are reported per chunk.
"""

from __future__ import annotations

import numpy as np

from worldgate.adapters.context import ContextPolicy, chunk_infos, kv_bytes

from ..base import AdapterError, AdapterInfo
from .adapter import EngineAdapter
from .world import ID_AVATAR

GRID = 16  # tokens per frame = GRID * GRID


class MemoryEngine(EngineAdapter):
    info = AdapterInfo(**{
        **EngineAdapter.info.to_dict(), "name": "engine-memory", "version": "1.0",
        "context_policies": ("full_kv", "sliding_window", "fov"), "hf_ids": (),
        "notes": "memory-limited Engine: only content shown by held chunks is reproduced; the rest is re-invented",
    })

    MAX_DIM = 1024  # token features: the K/V store is (frames x 256 tokens x dim) float32

    def __init__(self, dim: int = 32, **kw):
        super().__init__(**kw)
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= self.MAX_DIM:
            raise AdapterError(f"engine-memory: model.dim must be an integer in [1, {self.MAX_DIM}] (token features), "
                               f"got {dim!r}")
        self.dim = int(dim)
        self.model_args["dim"] = self.dim
        rng = np.random.default_rng(1234)
        self._proj = rng.normal(size=(5, self.dim)).astype(np.float32) / np.sqrt(5)

    # -------------------------------------------------------------------------------------------- chunk hooks
    def begin_rollout(self, plan, c2w, world, context) -> None:
        super().begin_rollout(plan, c2w, world, context)
        self.policy = context if context is not None else ContextPolicy("full_kv")
        self.infos = chunk_infos(c2w, self.chunk)
        n = len(world.inst_mode)
        self.n_inst = n
        self.seen = []  # per chunk: bool (n,) entities it showed
        self.tints = []  # per chunk: (n, 3) how it showed them
        self.ever = np.zeros(n, bool)
        self.kv = []  # per chunk: (frames * GRID^2, dim) tokens (keys = values)
        self.tint = None

    def begin_chunk(self, index, start, stop) -> None:
        held = self.policy.select(self.infos[:index], self.infos[index])
        self.held = held
        n = self.n_inst
        tint = np.ones((n, 3), np.float32)
        have = np.zeros(n, bool)
        for c in sorted(held, reverse=True):  # the most recent held chunk that showed an entity decides its look
            new = self.seen[c] & ~have
            tint[new] = self.tints[c][new]
            have |= new
        forgotten = self.ever & ~have
        forgotten[:2] = False  # ground and sky are not entities
        if ID_AVATAR < n:
            forgotten[ID_AVATAR] = False
        for iid in np.flatnonzero(forgotten):
            # re-invented from its last look anywhere, moved one more step along the entity's own colour direction:
            # each forgetting drifts it further from the truth (monotonically, so memory decays revisit by revisit)
            last = next(self.tints[c][iid] for c in range(index - 1, -1, -1) if self.seen[c][iid])
            tint[iid] = np.clip(last * self._drift(iid), 0.15, 4.0)
        self.tint = tint
        self.cur_seen = np.zeros(n, bool)
        self.cur_kv = []
        self.ctx_keys = np.concatenate([self.kv[c] for c in held]) if held else np.zeros((0, self.dim), np.float32)
        self._attn = []

    DRIFT = 0.2  # log-colour distance one re-invention moves an entity

    def _drift(self, iid: int) -> np.ndarray:
        """The per-channel factor of one re-invention of entity ``iid``: exp(DRIFT * d), d a unit direction in log
        RGB with no grey component (a hue change, not only brightness), fixed per rollout seed and entity."""
        rng = np.random.default_rng([self.seed, int(iid)])
        d = rng.normal(size=3)
        d -= d.mean()
        d /= max(float(np.linalg.norm(d)), 1e-6)
        return np.exp(self.DRIFT * d).astype(np.float32)

    def frame_tint(self, world, i, t, last_ids):
        return self.tint

    def end_frame(self, i, rgb, ids) -> None:
        vis = np.unique(ids)
        vis = vis[(vis >= 0) & (vis < self.n_inst)]
        self.cur_seen[vis] = True
        tok = self._tokens(rgb)
        keys = np.concatenate([self.ctx_keys, *self.cur_kv]) if self.cur_kv else self.ctx_keys
        if len(keys):
            s = tok @ keys.T / np.float32(np.sqrt(self.dim))
            s -= s.max(axis=1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=1, keepdims=True)
            out = s @ keys
            self._attn.append(float(np.abs(out - tok).mean()))
        self.cur_kv.append(tok)

    def end_chunk(self, index, frames):
        self.seen.append(self.cur_seen)
        self.tints.append(self.tint)
        self.ever |= self.cur_seen
        self.kv.append(np.concatenate(self.cur_kv))
        held_frames = sum(self.infos[c].stop - self.infos[c].start for c in self.held)
        extra = {"kv_bytes": kv_bytes(1, held_frames * GRID * GRID, self.dim),
                 "attn_residual": float(np.mean(self._attn)) if self._attn else None}
        return list(self.held), extra

    def _tokens(self, rgb: np.ndarray) -> np.ndarray:
        H, W = rgb.shape[:2]
        g = rgb[: H - H % GRID, : W - W % GRID].reshape(GRID, H // GRID, GRID, W // GRID, 3).mean(axis=(1, 3))
        yy, xx = np.mgrid[0:GRID, 0:GRID] / GRID
        feat = np.concatenate([g.reshape(-1, 3) / 255.0, yy.reshape(-1, 1), xx.reshape(-1, 1)], axis=1)
        return (feat.astype(np.float32) @ self._proj).astype(np.float32)
