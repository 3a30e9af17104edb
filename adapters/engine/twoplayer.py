"""``engine-2p``: the two-player Engine (MultiWorldBench Engine GT) and ``engine-2p-independent``, its single-player
baseline.

``engine-2p`` keeps **one** voxel world and renders it from both players' commanded poses every step. The world is
a seeded Engine town (:mod:`.world`) with a cleared, flat arena around the case's marked columns: a coloured (red)
cross on the ground marks where blocks are placed or destroyed. Interactions follow the game rules of
:func:`worldgate.trajectories.multiworldbench.world.replay` (one block per 1 m cell; simultaneous placements resolve A first;
stone occluder walls are removable), and every edit is written into the voxel grid the instant it happens, so both
views show it from the next frame on. Each player sees the other's avatar (legs and torso in the player's colour,
head in skin) at its true 3-D position, drawn into the frame with a depth test against the world.

``engine-2p-independent`` renders each view from its **own private copy** of the world: a player's edits exist only
in its own copy (edits by A never appear in B's view and vice versa), and the partner's avatar stays frozen where the
partner started (a single-player model knows nothing of the other's actions) — the single-player baseline (like
Solaris SP) that shared-state capabilities must catch.

Faults: ``engine-2p-frozen`` (neither view ever moves or changes) and ``engine-2p-leak`` (each view also moves with
its partner's commanded motion), see :class:`FrozenTwoPlayerEngine` and :class:`LeakTwoPlayerEngine`.

Model args: as ``engine`` (``width``, ``height`` (256), ``fps`` (16), ``chunk``, ``fog_m``, ``threads``, ``sample``).
"""

from __future__ import annotations

import copy

import numpy as np

from worldgate.trajectories.multiworldbench.world import (
    CROSS_RGB,
    EYE_M,
    MATERIALS,
    STONE,
    TwoPlayerCase,
    avatar_boxes,
    cast_boxes,
    frame_of,
    replay,
)

from ..base import AdapterError, AdapterInfo, NativeInputs, horizontal_fov_deg
from ..twoplayer import TwoPlayerAdapter, step_table
from .adapter import EngineAdapter, transform_intrinsics_crop
from .textures import TK_NOISE, TK_PLAIN
from .world import M_GRASS, M_LEAVES, M_STONE, NX, NZ, TEXKIND, VS, B, G, block_bits, block_distance, build_world

PLAYERS = ("A", "B")


class TwoPlayerEngine(TwoPlayerAdapter, EngineAdapter):
    info = AdapterInfo(
        name="engine-2p", version="1.0", width=256, height=256, fps=16.0, fps_source="engine (exact)",
        chunk_frames=16, first_chunk_frames=16, duration_unit="frames",
        control="two players: move/look keys + place/destroy (material)", pose_convention="c2w OpenCV (absolute, metres)",
        intrinsics_regime=4, aspect_policy="crop", context_policies=(), hf_ids=(), repository="worldgate (built in)",
        licence="same as worldgate", integration="engine", image_conditioned=False, players=2,
        notes="two-player Engine GT: one shared voxel world, two views, avatars, block edits at a marked cross",
    )
    independent = False

    def __init__(self, threads: int = 1, **kw):
        # one core by default: a step renders two small views, where thread start-up costs more than it gains
        super().__init__(threads=threads, **kw)

    # ------------------------------------------------------------------------------------------------ plan
    def plan(self, case) -> NativeInputs:

        if not isinstance(case, TwoPlayerCase):
            raise AdapterError(f"{self.info.name} runs two-player cases (suite 'multiworldbench-engine'); case "
                               f"{case.id} of suite {case.suite!r} has one camera: run it with 'engine'")
        if case.trajectory.to_dict() != case.players["A"].trajectory().to_dict():
            raise AdapterError(f"{self.info.name}: case {case.id}'s trajectory was changed (trajectory.seconds?); "
                               "two-player schedules are timed to their interactions and cannot be rescaled")
        fps = self.fps
        n = frame_of(case.duration, fps)
        c2w = {p: case.players[p].poses(fps, n) for p in PLAYERS}
        size = (self.width, self.height)
        k, transform = transform_intrinsics_crop(case.intrinsics, case.image_size, size)
        case_fov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0])
        keep = [_disk(case.world.get("arena_m", 9.0))]
        for p in PLAYERS:
            fine = case.players[p].poses(fps * 4, frame_of(case.duration, fps * 4) + 1)
            keep.append(fine[:, [0, 2], 3])
        keepout = np.concatenate(keep).astype(np.float64)
        steps = step_table(case, fps, n)
        segs = {}
        for p in PLAYERS:
            traj = case.players[p].trajectory()
            segs[p] = [list(map(int, r)) for r in traj.segment_frames(fps, n)]
        actions = {
            "fps": fps, "n_frames": n,
            "players": {p: case.players[p].to_dict() for p in PLAYERS},
            "interactions": [dict(a, frame=frame_of(a["t"], fps)) for a in case.interactions()],
            "segment_frames": segs,
            "steps": steps,
        }
        arrays = {"c2w_a": c2w["A"], "c2w_b": c2w["B"], "intrinsics": np.asarray(k, np.float64),
                  "times": np.arange(n, dtype=np.float64) / fps, "keepout_xz": keepout}
        scene = dict(case.scene or {})
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=self.width,
            height=self.height, fps=fps, n_frames=n, segment_frames=[tuple(s) for s in segs["A"]], arrays=arrays,
            files={"poses_a.npy": c2w["A"], "poses_b.npy": c2w["B"], "intrinsics.npy": arrays["intrinsics"],
                   "actions.json": actions, "scene.json": {"scene": scene, "world": case.world}},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": case.image_size, "native": k,
                        "native_size": [self.width, self.height], "transform": transform, "case_hfov_deg": case_fov,
                        "native_hfov_deg": horizontal_fov_deg(k[0], self.width)},
            prompt=case.prompt, prompt_source=case.prompt_source,
            extra={"scene": scene, "world": case.world, "task": case.task, "visibility": case.visibility,
                   "duration_s": case.duration, "players": 2, "independent": self.independent},
        )

    # ------------------------------------------------------------------------------------------------ runtime
    def reset(self, plan: NativeInputs, seed: int = 0) -> None:

        self._compile_once()
        self.seed = int(seed)
        self.plan_ = plan
        spec = plan.extra["world"]
        scene = plan.extra["scene"]
        base = build_world(int(scene["seed"]), scene.get("palette", "realistic"), plan.arrays["keepout_xz"],
                           eye_height=_eye(), duration_hint=float(plan.extra["duration_s"]))
        base = _prepare_arena(base, spec)
        # one shared world, or a private copy per player
        self.worlds = {p: (_copy_world(base) if self.independent else base) for p in PLAYERS}
        self.states = {id(w): {} for w in self.worlds.values()}
        self.interactions = plan.files["actions.json"]["interactions"]
        self.c2w = {"A": plan.arrays["c2w_a"], "B": plan.arrays["c2w_b"]}
        #: the poses each view is rendered from (the commanded ones; a fault may move them)
        self.view_c2w = dict(self.c2w)

    def step(self, i: int, action_a: dict, action_b: dict) -> tuple[np.ndarray, np.ndarray]:

        plan = self.plan_
        t = float(plan.arrays["times"][i])
        spec = plan.extra["world"]
        done = set()
        for p, w in self.worlds.items():  # bring each world to the state of the game at this step
            if id(w) in done:
                continue
            done.add(id(w))
            want = replay(spec, self.interactions, t, only=p if self.independent else None, fps=plan.fps)
            _apply_state(w, self.states[id(w)], want)
            self.states[id(w)] = want
        k = plan.arrays["intrinsics"]
        out = []
        for p in PLAYERS:
            other = "B" if p == "A" else "A"
            rgb, depth, _ = self.render(self.worlds[p], self.view_c2w[p][i], k, t)
            # the partner's avatar: where the partner is (shared), or where it started (independent)
            pose = self.c2w[other][0 if self.independent else i]
            boxes = avatar_boxes(pose, other)
            bd, bi, bs = cast_boxes(k, self.view_c2w[p][i], self.width, self.height, boxes)
            m = bi >= 0
            m &= bd < depth
            if m.any():
                cols = np.array([b.rgb for b in boxes], np.float32)
                rgb[m] = np.clip(cols[bi[m]] * bs[m, None] * 255.0, 0, 255).astype(np.uint8)
            out.append(rgb)
        return out[0], out[1]


    def render(self, world, c2w, k, t, with_avatar=False, walk_phase=0.0, tint=None, out=None):
        """One view of ``world`` (as :meth:`EngineAdapter.render`, with the arena's extended materials)."""

        render_frame = self._kernel()
        H, W = self.height, self.width
        rgb, depth, ids = out if out is not None else (np.empty((H, W, 3), np.uint8), np.empty((H, W), np.float32),
                                                       np.empty((H, W), np.int32))
        state, tint = world.state_at(t)
        X, Y, Z = c2w[:3, 3]
        ox, oh, oz = X / VS + NX / 2, G + (world.eye_height - Y) / VS, Z / VS + NZ / 2
        render_frame(world.mat, world.inst, world.level, world.occ, world.bits, B, G, world.palette, world.texkind,
                     world.inst_mode, state, tint, np.ascontiguousarray(c2w[:3, :3], dtype=np.float64), ox, oh, oz, VS,
                     k[0], k[1], k[2] + 0.5, k[3] + 0.5, self.fog_m, 0.35 * self.fog_m, world.sky_top,
                     world.sky_horizon, world.clouds, rgb, depth, ids, self.sample)
        return rgb, depth, ids


class IndependentTwoPlayerEngine(TwoPlayerEngine):
    info = AdapterInfo(**{
        **TwoPlayerEngine.info.to_dict(), "name": "engine-2p-independent", "version": "1.0", "context_policies": (),
        "hf_ids": (), "notes": "single-player baseline: each view from its own private world copy; the partner's "
                               "edits never appear and its avatar stays where it started",
    })
    independent = True


class FrozenTwoPlayerEngine(TwoPlayerEngine):
    """Fault ``engine-2p-frozen``: neither view ever moves or changes. Every step returns the two views of step 0
    (the world as it starts, both players at their start poses): no action of either player has any effect. It must
    score 0 on control isolation and coordination fairness (a commanded reference response at or below the noise
    and response floor scores 0; equal non-response scores 0) and fail every capability that needs an action."""

    info = AdapterInfo(**{
        **TwoPlayerEngine.info.to_dict(), "name": "engine-2p-frozen", "version": "1.0", "context_policies": (),
        "hf_ids": (), "notes": "fault: both views stay at their first frame (no action has any effect)",
    })

    def reset(self, plan: NativeInputs, seed: int = 0) -> None:
        super().reset(plan, seed)
        self._first = None

    def step(self, i: int, action_a: dict, action_b: dict) -> tuple[np.ndarray, np.ndarray]:
        if self._first is None:
            self._first = super().step(0, action_a, action_b)
        return self._first[0].copy(), self._first[1].copy()


def _matmul4(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, 4, 4) products summed elementwise in a fixed order, not through BLAS/LAPACK, whose last bit may depend on
    alignment and threads: the rendered poses, and so the video's bytes, are the same on every run."""
    return (a[:, :, 0:1] * b[:, 0:1, :] + a[:, :, 1:2] * b[:, 1:2, :]) + (a[:, :, 2:3] * b[:, 2:3, :]
                                                                        + a[:, :, 3:4] * b[:, 3:4, :])


class LeakTwoPlayerEngine(TwoPlayerEngine):
    """Fault ``engine-2p-leak``: a player's view also moves with its partner's actions. Each view is rendered from
    its commanded pose composed with the partner's commanded motion since the start, expressed in the view's own
    camera axes (``c2w_p(i) @ c2w_o(0)^-1 c2w_o(i)``): when B walks forward, A's view walks forward too. The world,
    the edits and the avatars (at their commanded poses) are the shared world's. It must lose control isolation (the
    treatments with an acting partner leave the references) while Engine GT keeps >= 90."""

    info = AdapterInfo(**{
        **TwoPlayerEngine.info.to_dict(), "name": "engine-2p-leak", "version": "1.0", "context_policies": (),
        "hf_ids": (), "notes": "fault: each view also moves with the partner's commanded motion (control leakage)",
    })

    def reset(self, plan: NativeInputs, seed: int = 0) -> None:
        super().reset(plan, seed)
        leak = {}
        for p in PLAYERS:
            o = np.asarray(self.c2w["B" if p == "A" else "A"], np.float64)
            inv0 = np.eye(4)  # the rigid inverse of the partner's first pose, exactly
            inv0[:3, :3] = o[0, :3, :3].T
            R0, t0 = o[0, :3, :3], o[0, :3, 3]
            inv0[:3, 3] = -(R0[0] * t0[0] + R0[1] * t0[1] + R0[2] * t0[2])  # -R^T t
            leak[p] = _matmul4(np.asarray(self.c2w[p], np.float64), _matmul4(np.broadcast_to(inv0, o.shape), o))
        self.view_c2w = leak


# ---------------------------------------------------------------------------------------------------- world edits
M_CROSS = 27
MWB_MATERIAL_IDS = {"gold": 28, "diamond": 29, "lapis": 30, "amethyst": 31}


def _eye() -> float:

    return EYE_M


def _disk(radius: float, step: float = 0.5) -> np.ndarray:
    r = np.arange(-radius, radius + 1e-9, step)
    X, Z = np.meshgrid(r, r, indexing="ij")
    m = X**2 + Z**2 <= radius**2
    return np.stack([X[m] + 0.5, Z[m] + 0.5], axis=1)  # centred on the cross column (0.5, 0.5)


def _prepare_arena(world, spec: dict):
    """Extend the palette with the MultiWorldBench materials, lay grass on the arena and paint the crosses."""


    pal = np.ones((32, 3), np.float32)
    pal[: len(world.palette)] = world.palette
    pal[M_CROSS] = CROSS_RGB
    for name, mid in MWB_MATERIAL_IDS.items():
        pal[mid] = MATERIALS[name]
    tex = np.zeros(32, np.int8)
    tex[: len(TEXKIND)] = TEXKIND
    tex[M_CROSS] = TK_PLAIN
    for mid in MWB_MATERIAL_IDS.values():
        tex[mid] = TK_NOISE
    n = len(world.inst_mode)
    inst_mode = np.concatenate([world.inst_mode, np.zeros(2, np.int8)])
    inst_tint = np.concatenate([world.inst_tint, np.ones((2, 3), np.float32)])
    w = copy.copy(world)
    w.palette, w.inst_mode, w.inst_tint = pal, inst_mode, inst_tint
    w.mat = world.mat.copy()
    w.texkind = tex
    w.id_block, w.id_stone = n, n + 1
    R = float(spec.get("arena_m", 9.0))
    xs = np.arange(NX)
    X = (xs - NX / 2 + 0.5) * VS
    d2 = (X[:, None] - 0.5) ** 2 + (X[None, :] - 0.5) ** 2
    top = w.mat[:, G - 1, :]
    # a 1 m checkerboard of two grasses: block-sized ground tiles give near-field corners (parallax) in every view
    cells = ((xs // 4)[:, None] + (xs // 4)[None, :]) % 2 == 0
    top[d2 <= R * R] = M_GRASS
    top[(d2 <= R * R) & cells] = M_LEAVES
    for i, k in spec.get("crosses", []):
        x0, z0 = 4 * i + NX // 2, 4 * k + NZ // 2
        for xa, xb, za, zb in ((x0, x0 + 4, z0, z0 + 4), (x0 - 4, x0 + 8, z0 + 1, z0 + 3), (x0 + 1, x0 + 3, z0 - 4, z0 + 8)):
            top[np.ix_(np.arange(xa, xb) % NX, np.arange(za, zb) % NZ)] = M_CROSS
    w.mat[:, G - 1, :] = top
    return w


def _copy_world(w):
    c = copy.copy(w)
    for name in ("mat", "inst", "level", "occ", "bits"):
        setattr(c, name, getattr(w, name).copy())
    return c


def _apply_state(w, have: dict, want: dict) -> None:
    """Write the difference between two world states (cell -> material) into the voxel grid."""


    changed = False
    for cell in set(have) | set(want):
        if have.get(cell) == want.get(cell):
            continue
        i, j, k = cell
        x0, h0, z0 = (4 * i + NX // 2) % NX, G + 4 * j, (4 * k + NZ // 2) % NZ
        if h0 + 4 > w.mat.shape[1] or h0 < G:
            raise AdapterError(f"cell {cell} is outside the Engine's world height")
        m = want.get(cell)
        if m is None:
            w.mat[x0:x0 + 4, h0:h0 + 4, z0:z0 + 4] = 0
            w.inst[x0:x0 + 4, h0:h0 + 4, z0:z0 + 4] = 0
        else:
            w.mat[x0:x0 + 4, h0:h0 + 4, z0:z0 + 4] = M_STONE if m == STONE else MWB_MATERIAL_IDS[m]
            w.inst[x0:x0 + 4, h0:h0 + 4, z0:z0 + 4] = w.id_stone if m == STONE else w.id_block
        blk = (w.mat[x0:x0 + 4, h0:h0 + 4, z0:z0 + 4] != 0)[None, None, None]
        w.bits[x0 // B, h0 // B, z0 // B] = block_bits(blk)[0, 0, 0]
        changed = True
    if changed:
        w.occ = block_distance(w.bits != 0)
