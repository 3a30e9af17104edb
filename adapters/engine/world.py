"""Seeded procedural voxel worlds for the Engine: terrain, buildings, trees, objects, human figures, events, sky.

A world is built from ``(seed, palette, keep-out path)``: structures keep clear of the camera's commanded path, so
the Engine never walks through a wall, while still standing close enough to give strong parallax. Everything is
deterministic in the seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from .textures import TK_BRICK, TK_FACADE, TK_GRASS, TK_LEAF, TK_NOISE, TK_PLAIN, TK_PLANK, TK_STRIPE

VS = 0.25  # metres per voxel
NX = NZ = 256  # 64 m x 64 m, wrapping
NH = 64  # 16 m tall
B = 4  # coarse block edge (voxels)
G = 8  # ground surface height (voxels); a multiple of B: the slab below it is solid everywhere

# instance ids with fixed meaning
ID_SKY = 0
ID_GROUND = 1
ID_AVATAR = 65535

# material ids
(M_EMPTY, M_GRASS, M_DIRT, M_PATH, M_BRICK, M_CONCRETE, M_WOOD, M_ROOF, M_TRUNK, M_LEAVES, M_SKIN, M_SHIRT1,
 M_SHIRT2, M_SHIRT3, M_SHIRT4, M_PANTS1, M_PANTS2, M_HAIR, M_CRATE, M_METAL1, M_METAL2, M_METAL3, M_STONE,
 M_LAMP, M_GLOW, M_PAINT1, M_PAINT2) = range(27)
N_MAT = 27

TEXKIND = np.zeros(N_MAT, np.int8)
for _m, _k in {
    M_GRASS: TK_GRASS, M_DIRT: TK_NOISE, M_PATH: TK_NOISE, M_BRICK: TK_BRICK, M_CONCRETE: TK_FACADE, M_WOOD: TK_PLANK,
    M_ROOF: TK_STRIPE, M_TRUNK: TK_PLANK, M_LEAVES: TK_LEAF, M_SKIN: TK_PLAIN, M_SHIRT1: TK_STRIPE, M_SHIRT2: TK_NOISE,
    M_SHIRT3: TK_PLAIN, M_SHIRT4: TK_STRIPE, M_PANTS1: TK_NOISE, M_PANTS2: TK_NOISE, M_HAIR: TK_NOISE,
    M_CRATE: TK_PLANK, M_METAL1: TK_NOISE, M_METAL2: TK_NOISE, M_METAL3: TK_STRIPE, M_STONE: TK_BRICK,
    M_LAMP: TK_PLAIN, M_GLOW: TK_PLAIN, M_PAINT1: TK_STRIPE, M_PAINT2: TK_NOISE,
}.items():
    TEXKIND[_m] = _k

PALETTES: dict[str, dict] = {
    # natural colours
    "realistic": {
        "sky_top": (0.36, 0.55, 0.85), "sky_horizon": (0.78, 0.84, 0.9),
        "mat": {
            M_GRASS: (0.33, 0.52, 0.22), M_DIRT: (0.45, 0.34, 0.22), M_PATH: (0.5, 0.49, 0.47), M_BRICK: (0.62, 0.3, 0.22),
            M_CONCRETE: (0.72, 0.7, 0.66), M_WOOD: (0.6, 0.45, 0.28), M_ROOF: (0.35, 0.2, 0.17), M_TRUNK: (0.4, 0.28, 0.17),
            M_LEAVES: (0.22, 0.45, 0.16), M_SKIN: (0.86, 0.67, 0.53), M_SHIRT1: (0.2, 0.3, 0.6), M_SHIRT2: (0.75, 0.18, 0.15),
            M_SHIRT3: (0.9, 0.88, 0.82), M_SHIRT4: (0.2, 0.5, 0.3), M_PANTS1: (0.18, 0.2, 0.3), M_PANTS2: (0.35, 0.3, 0.25),
            M_HAIR: (0.2, 0.13, 0.08), M_CRATE: (0.7, 0.55, 0.3), M_METAL1: (0.75, 0.1, 0.1), M_METAL2: (0.15, 0.3, 0.7),
            M_METAL3: (0.85, 0.75, 0.15), M_STONE: (0.55, 0.55, 0.52), M_LAMP: (0.3, 0.3, 0.32), M_GLOW: (1.0, 0.95, 0.7),
            M_PAINT1: (0.9, 0.5, 0.1), M_PAINT2: (0.5, 0.2, 0.6),
        },
    },
    # saturated, toy-like colours (WorldMark's "style" domain)
    "stylised": {
        "sky_top": (0.55, 0.35, 0.85), "sky_horizon": (1.0, 0.75, 0.6),
        "mat": {
            M_GRASS: (0.45, 0.9, 0.35), M_DIRT: (0.85, 0.55, 0.3), M_PATH: (0.95, 0.85, 0.55), M_BRICK: (0.95, 0.35, 0.55),
            M_CONCRETE: (0.55, 0.85, 0.95), M_WOOD: (1.0, 0.7, 0.3), M_ROOF: (0.3, 0.3, 0.9), M_TRUNK: (0.7, 0.4, 0.2),
            M_LEAVES: (0.2, 0.85, 0.55), M_SKIN: (1.0, 0.8, 0.65), M_SHIRT1: (1.0, 0.2, 0.3), M_SHIRT2: (0.2, 0.4, 1.0),
            M_SHIRT3: (1.0, 0.95, 0.2), M_SHIRT4: (0.6, 0.2, 0.95), M_PANTS1: (0.1, 0.1, 0.4), M_PANTS2: (0.2, 0.6, 0.5),
            M_HAIR: (0.5, 0.15, 0.05), M_CRATE: (1.0, 0.55, 0.1), M_METAL1: (1.0, 0.1, 0.5), M_METAL2: (0.1, 0.8, 1.0),
            M_METAL3: (1.0, 1.0, 0.2), M_STONE: (0.75, 0.65, 0.95), M_LAMP: (0.3, 0.2, 0.5), M_GLOW: (1.0, 1.0, 0.5),
            M_PAINT1: (1.0, 0.4, 0.0), M_PAINT2: (0.4, 1.0, 0.2),
        },
    },
}
PALETTE_ALIASES = {"real": "realistic", "style": "stylised", "stylized": "stylised"}


@dataclass
class Entity:
    """A placed thing with its own instance id; ``kind`` in {building, tree, object, human, event}."""

    iid: int
    kind: str
    name: str
    center_m: tuple[float, float, float]  # world metres (X, Y, Z) of its base centre
    size_vox: tuple[int, int, int]
    extra: dict = field(default_factory=dict)


@dataclass
class Event:
    """A state that changes with time, in or out of view: ``grow``/``vanish`` (levels) or ``recolor`` (tint)."""

    iid: int
    kind: str
    t_start: float
    t_end: float
    levels: int = 0
    tint_from: tuple[float, float, float] = (1.0, 1.0, 1.0)
    tint_to: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def progress(self, t: float) -> float:
        if t <= self.t_start:
            return 0.0
        if t >= self.t_end:
            return 1.0
        return (t - self.t_start) / (self.t_end - self.t_start)

    def to_dict(self) -> dict:
        return {"iid": self.iid, "kind": self.kind, "t_start": self.t_start, "t_end": self.t_end, "levels": self.levels}


@dataclass
class World:
    seed: int
    palette_name: str
    mat: np.ndarray
    inst: np.ndarray
    level: np.ndarray
    occ: np.ndarray
    bits: np.ndarray
    clouds: np.ndarray
    palette: np.ndarray
    inst_mode: np.ndarray
    inst_tint: np.ndarray
    sky_top: np.ndarray
    sky_horizon: np.ndarray
    entities: list[Entity]
    events: list[Event]
    eye_height: float

    def state_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Per-instance (state, tint) arrays at time t (seconds since the rollout began)."""
        state = np.full(len(self.inst_mode), 1e9, np.float32)
        tint = self.inst_tint.copy()
        for ev in self.events:
            p = ev.progress(t)
            if ev.kind in ("grow", "vanish"):
                state[ev.iid] = p * ev.levels
            elif ev.kind == "recolor":
                tint[ev.iid] = (1 - p) * np.asarray(ev.tint_from) + p * np.asarray(ev.tint_to)
        return state, tint

    def summary(self) -> dict:
        return {
            "seed": self.seed, "palette": self.palette_name, "voxel_m": VS, "grid": [NX, NH, NZ],
            "entities": [{"iid": e.iid, "kind": e.kind, "name": e.name, "center_m": list(e.center_m)} for e in self.entities],
            "events": [e.to_dict() for e in self.events],
        }


def to_grid_xz(X: np.ndarray | float, Z: np.ndarray | float):
    return np.asarray(X) / VS + NX / 2, np.asarray(Z) / VS + NZ / 2


def _periodic_noise(rng: np.random.Generator, n_terms: int = 6) -> np.ndarray:
    xs = np.arange(NX)[:, None] * (2 * np.pi / NX)
    zs = np.arange(NZ)[None, :] * (2 * np.pi / NZ)
    out = np.zeros((NX, NZ))
    for _ in range(n_terms):
        kx, kz = rng.integers(1, 5, size=2)
        ph = rng.uniform(0, 2 * np.pi)
        out += np.sin(kx * xs + kz * zs + ph) / (kx + kz)
    out -= out.min()
    return out / max(out.max(), 1e-9)


class _Builder:
    def __init__(self, seed: int, palette: str, keepout_xz: np.ndarray | None, eye_height: float):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.palette_name = PALETTE_ALIASES.get(palette, palette)
        if self.palette_name not in PALETTES:
            raise ValueError(f"unknown Engine palette {palette!r}: expected one of {sorted(PALETTES)}")
        self.mat = np.zeros((NX, NH, NZ), np.uint8)
        self.inst = np.zeros((NX, NH, NZ), np.uint16)
        self.level = np.zeros((NX, NH, NZ), np.uint8)
        self.taken = np.zeros((NX, NZ), bool)
        self.entities: list[Entity] = []
        self.events: list[Event] = []
        self.modes: dict[int, int] = {}
        self.next_id = 2
        self.eye_height = eye_height
        # distance (voxels) from every column to the commanded path
        path = np.zeros((NX, NZ), bool)
        if keepout_xz is not None and len(keepout_xz):
            gx, gz = to_grid_xz(keepout_xz[:, 0], keepout_xz[:, 1])
            path[np.mod(np.round(gx).astype(int), NX), np.mod(np.round(gz).astype(int), NZ)] = True
        else:
            path[NX // 2, NZ // 2] = True
        self.path_dist = ndimage.distance_transform_edt(~path)

    def new_id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def free(self, x0: int, z0: int, w: int, d: int, clearance: float) -> bool:
        xs = np.arange(x0, x0 + w) % NX
        zs = np.arange(z0, z0 + d) % NZ
        block = np.ix_(xs, zs)
        return bool(not self.taken[block].any() and self.path_dist[block].min() > clearance)

    def put(self, x, h, z, m, iid, level=0):
        x = np.asarray(x) % NX
        z = np.asarray(z) % NZ
        self.mat[x, h, z] = m
        self.inst[x, h, z] = iid
        self.level[x, h, z] = level

    def box(self, x0, h0, z0, w, hh, d, m, iid):
        xs = np.arange(x0, x0 + w) % NX
        zs = np.arange(z0, z0 + d) % NZ
        self.mat[np.ix_(xs, np.arange(h0, h0 + hh), zs)] = m
        self.inst[np.ix_(xs, np.arange(h0, h0 + hh), zs)] = iid

    def mark(self, x0, z0, w, d, margin=1):
        xs = np.arange(x0 - margin, x0 + w + margin) % NX
        zs = np.arange(z0 - margin, z0 + d + margin) % NZ
        self.taken[np.ix_(xs, zs)] = True

    def center_m(self, x0, h0, z0, w, d):
        return (float((x0 + w / 2 - NX / 2) * VS), float(self.eye_height - (h0 - G) * VS), float((z0 + d / 2 - NZ / 2) * VS))


def _terrain(b: _Builder):
    hills = _periodic_noise(b.rng) * 14
    ramp = np.clip((b.path_dist - 10) / 40, 0, 1)
    height = (G + np.round(hills * ramp)).astype(int)
    hs = np.arange(NH)[None, :, None]
    solid = hs < height[:, None, :]
    b.mat[solid] = M_DIRT
    b.inst[solid] = ID_GROUND
    top = hs == (height[:, None, :] - 1)
    surface = np.where(b.path_dist <= 4, M_PATH, M_GRASS).astype(np.uint8)
    b.mat[top] = np.broadcast_to(surface[:, None, :], top.shape)[top]
    b.ground_height = height


def block_distance(occupied: np.ndarray, cap: int = 16) -> np.ndarray:
    """Chebyshev distance (blocks) from every coarse block to the nearest occupied one, wrapping in x and z."""
    p = cap
    tiled = np.pad(~occupied, ((p, p), (0, 0), (p, p)), mode="wrap")
    d = ndimage.distance_transform_cdt(tiled, metric="chessboard")[p:-p, :, p:-p]
    return np.ascontiguousarray(np.minimum(d, cap).astype(np.uint8))


def cloud_texture(seed: int, n: int = 256) -> np.ndarray:
    """A periodic two-octave value-noise texture (n x n, float32 in [0, 1]) for the sky; n a power of two (the
    renderer wraps texel indices with a mask)."""
    assert n > 0 and n & (n - 1) == 0, "the cloud texture's side must be a power of two"
    rng = np.random.default_rng(seed + 911)
    out = np.zeros((n, n), np.float32)
    for cells, w in ((8, 0.65), (26, 0.35)):
        g = rng.random((cells, cells))
        x = np.arange(n) * cells / n
        i0 = np.floor(x).astype(int)
        f = x - i0
        f = f * f * (3 - 2 * f)
        i1 = (i0 + 1) % cells
        rows = g[i0] * (1 - f)[:, None] + g[i1] * f[:, None]
        out += (w * (rows[:, i0] * (1 - f)[None, :] + rows[:, i1] * f[None, :])).astype(np.float32)
    return out


def block_fields(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ray caster's coarse distance map and block bits (see render._trace_pixels) of a voxel grid, over
    everything above the ground slab (the slab h < G is hit analytically)."""
    above = mat != 0
    above[:, :G, :] = False
    n = [d // B for d in mat.shape]
    blocks = above.reshape(n[0], B, n[1], B, n[2], B).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(block_distance(blocks.any(axis=(3, 4, 5)))), block_bits(blocks)


def block_bits(blocks: np.ndarray) -> np.ndarray:
    """(NBX, NBH, NBZ, 4, 4, 4) bools -> (NBX, NBH, NBZ) uint64, bit 16*lx + 4*lh + lz set where a voxel is."""
    assert B == 4, "the uint64 block masks need 4x4x4 blocks"
    flat = blocks.reshape(*blocks.shape[:3], 64).astype(np.uint64)
    weights = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))
    return np.ascontiguousarray((flat * weights).sum(axis=-1, dtype=np.uint64))


def _building(b: _Builder, x0, z0, w, d, hh):
    iid = b.new_id()
    gh = int(b.ground_height[np.ix_(np.arange(x0, x0 + w) % NX, np.arange(z0, z0 + d) % NZ)].min())
    wall = b.rng.choice([M_BRICK, M_CONCRETE, M_WOOD, M_STONE])
    b.box(x0, gh, z0, w, hh, d, wall, iid)
    b.box(x0, gh + hh, z0, w, 2, d, M_ROOF, iid)
    b.mark(x0, z0, w, d)
    b.entities.append(Entity(iid, "building", f"building-{iid}", b.center_m(x0, gh, z0, w, d), (w, hh + 2, d)))


def _tree(b: _Builder, x0, z0):
    iid = b.new_id()
    gh = int(b.ground_height[x0 % NX, z0 % NZ])
    th = int(b.rng.integers(8, 14))
    b.box(x0, gh, z0, 1, th, 1, M_TRUNK, iid)
    r = int(b.rng.integers(3, 6))
    c = np.arange(-r, r + 1)
    X, Y, Z = np.meshgrid(c, c, c, indexing="ij")
    ball = X**2 + Y**2 + Z**2 <= r * r + 1
    xs, ys, zs = X[ball] + x0, Y[ball] + gh + th + r - 1, Z[ball] + z0
    keep = ys < NH
    b.put(xs[keep], ys[keep], zs[keep], M_LEAVES, iid)
    b.mark(x0 - r, z0 - r, 2 * r + 1, 2 * r + 1, margin=0)
    b.entities.append(Entity(iid, "tree", f"tree-{iid}", b.center_m(x0, gh, z0, 1, 1), (2 * r + 1, th + 2 * r, 2 * r + 1)))


def _object(b: _Builder, x0, z0, kind: str):
    iid = b.new_id()
    gh = int(b.ground_height[x0 % NX, z0 % NZ])
    if kind == "crate":
        s = int(b.rng.integers(3, 5))
        b.box(x0, gh, z0, s, s, s, M_CRATE, iid)
        size = (s, s, s)
    elif kind == "barrel":
        m = b.rng.choice([M_METAL1, M_METAL2, M_METAL3])
        c = np.arange(-2, 3)
        X, Z = np.meshgrid(c, c, indexing="ij")
        disk = X**2 + Z**2 <= 4
        for h in range(gh, gh + 5):
            b.put(X[disk] + x0 + 2, h, Z[disk] + z0 + 2, m, iid)
        size = (5, 5, 5)
    elif kind == "car":
        m = b.rng.choice([M_METAL1, M_METAL2, M_METAL3, M_PAINT1, M_PAINT2])
        w, d = (7, 16) if b.rng.random() < 0.5 else (16, 7)
        b.box(x0, gh + 1, z0, w, 3, d, m, iid)
        if w < d:
            b.box(x0 + 1, gh + 4, z0 + 4, w - 2, 2, d - 8, M_CONCRETE, iid)
        else:
            b.box(x0 + 4, gh + 4, z0 + 1, w - 8, 2, d - 2, M_CONCRETE, iid)
        for dx, dz in ((0, 1), (w - 1, 1), (0, d - 2), (w - 1, d - 2)) if w < d else ((1, 0), (1, d - 1), (w - 2, 0), (w - 2, d - 1)):
            b.put(x0 + dx, gh, z0 + dz, M_PANTS1, iid)
        size = (w, 6, d)
    else:  # bench / sign
        b.box(x0, gh + 2, z0, 6, 1, 2, M_WOOD, iid)
        b.box(x0, gh, z0, 1, 2, 2, M_LAMP, iid)
        b.box(x0 + 5, gh, z0, 1, 2, 2, M_LAMP, iid)
        size = (6, 3, 2)
    b.mark(x0, z0, size[0], size[2])
    b.entities.append(Entity(iid, "object", f"{kind}-{iid}", b.center_m(x0, gh, z0, size[0], size[2]), size))


def _human(b: _Builder, x0, z0, facing_x: bool):
    """A 2-voxel-wide, 8-voxel-tall (2 m) figure: legs, torso, arms, head with hair; random clothes."""
    iid = b.new_id()
    gh = int(b.ground_height[x0 % NX, z0 % NZ])
    shirt = int(b.rng.choice([M_SHIRT1, M_SHIRT2, M_SHIRT3, M_SHIRT4]))
    pants = int(b.rng.choice([M_PANTS1, M_PANTS2]))

    def P(i, h, m):  # i along the figure's width
        if facing_x:
            b.put(x0, gh + h, z0 + i, m, iid)
        else:
            b.put(x0 + i, gh + h, z0, m, iid)

    for h in range(0, 3):
        P(1, h, pants)
        P(2, h, pants)
    for h in range(3, 6):
        P(1, h, shirt)
        P(2, h, shirt)
        P(0, h, shirt if h > 3 else M_SKIN)
        P(3, h, shirt if h > 3 else M_SKIN)
    P(1, 6, M_SKIN)
    P(2, 6, M_SKIN)
    P(1, 7, M_HAIR)
    P(2, 7, M_HAIR)
    w, d = (1, 4) if facing_x else (4, 1)
    b.mark(x0, z0, w, d)
    b.entities.append(Entity(iid, "human", f"human-{iid}", b.center_m(x0, gh, z0, w, d), (w, 8, d),
                             {"shirt": shirt, "pants": pants}))


def _events(b: _Builder, spots: list[tuple[int, int]], duration_hint: float, event_s: float | None = None):
    """A growing tower, a vanishing wall and a lamp that changes colour, near the start view. ``event_s`` (dynamic
    memory scenes): each starts within the first 0.8 s — visibly during the initial hold — and lasts that long."""
    kinds = ["grow", "vanish", "recolor"]
    for (x0, z0), kind in zip(spots, kinds):
        iid = b.new_id()
        gh = int(b.ground_height[x0 % NX, z0 % NZ])
        u = float(b.rng.uniform(0.5, 1.5))
        if event_s is None:
            t0, t1 = u, u + max(2.0, 0.5 * duration_hint)
        else:
            t0 = 0.3 + 0.5 * (u - 0.5)
            t1 = t0 + float(event_s)
        if kind == "grow":
            for lv in range(10):
                b.put(np.array([x0, x0 + 1, x0, x0 + 1]), gh + lv, np.array([z0, z0, z0 + 1, z0 + 1]), M_PAINT1, iid, level=lv + 1)
            b.modes[iid] = 1
            b.events.append(Event(iid, "grow", t0, t1, levels=10))
            size = (2, 10, 2)
        elif kind == "vanish":
            for lv in range(8):
                b.put(np.arange(x0, x0 + 4), gh + lv, np.full(4, z0), M_PAINT2, iid, level=8 - lv)
            b.modes[iid] = 2
            b.events.append(Event(iid, "vanish", t0, t1, levels=8))
            size = (4, 8, 1)
        else:
            b.box(x0, gh, z0, 1, 6, 1, M_LAMP, iid)
            b.box(x0 - 1, gh + 6, z0 - 1, 3, 2, 3, M_GLOW, iid)
            b.events.append(Event(iid, "recolor", t0, t1, tint_from=(1.0, 1.0, 1.0), tint_to=(0.25, 0.45, 1.0)))
            size = (3, 8, 3)
        b.mark(x0 - 1, z0 - 1, size[0] + 1, size[2] + 1, margin=0)
        b.entities.append(Entity(iid, "event", f"{kind}-{iid}", b.center_m(x0, gh, z0, size[0], size[2]), size, {"event": kind}))


def _mirror_half(b: _Builder) -> None:
    """Make the world mirror-symmetric about X = 0 (grid x = NX / 2, the start camera's plane): the half X > 0 becomes
    the mirror image of the half X < 0 (voxel x -> NX - 1 - x). WorldMark's direction purity compares the mean flow
    on the commanded axis with the mean off it; in a scene whose depth is not symmetric about the path, a perfect
    forward walk has a mean horizontal flow of 5-15 % of its radial flow, and a perfect strafe a radial one: the
    metric then reads the scene, not the mover. Measured on the worldmark-engine demo (benchmarks/purity_scenes.py):
    Engine GT's W/S segments 91.2 -> 94.8, strafes 93.0 -> 93.1 (a strafe leaves the plane within seconds), translation
    purity 91.8 -> 94.2; off by default (the suites' scenes and goldens are unchanged). A twin keeps its original's instance id (and events: both progress
    together); the entity list holds every entity left in the kept half and its twin (``extra["mirror_of"]``)."""
    h = NX // 2
    for a in (b.mat, b.inst, b.level):
        a[h:] = a[h - 1::-1]
    present = set(np.unique(b.inst[:h]).tolist())
    kept = [e for e in b.entities if e.iid in present]
    twins = [Entity(e.iid, e.kind, f"{e.name}-mirrored", (-e.center_m[0], e.center_m[1], e.center_m[2]), e.size_vox,
                    dict(e.extra, mirror_of=e.name)) for e in kept]
    b.entities = kept + twins
    b.events = [ev for ev in b.events if ev.iid in present]


def build_world(seed: int, palette: str = "realistic", keepout_xz: np.ndarray | None = None,
                eye_height: float = 1.6, duration_hint: float = 20.0, clearance_m: float = 1.5,
                events: bool = True, event_s: float | None = None, mirror: bool = False) -> World:
    """Build a world; ``keepout_xz`` are (N, 2) world (X, Z) metres the camera passes through. ``mirror``: the
    world is mirror-symmetric about the plane X = 0 (the start view's vertical centre line; see
    :func:`_mirror_half`), and the keep-out path is kept clear on both sides."""
    if mirror and keepout_xz is not None and len(keepout_xz):
        keepout_xz = np.concatenate([keepout_xz, keepout_xz * np.array([-1.0, 1.0])])
    b = _Builder(int(seed), palette, keepout_xz, eye_height)
    rng = b.rng
    clear = clearance_m / VS
    _terrain(b)
    cx, cz = NX // 2, NZ // 2
    # things in the opening view (ahead, off the path): humans, objects and events for memory tests
    anchors = []
    for _ in range(400):
        if len(anchors) >= 9:
            break
        dist = rng.uniform(12, 40)  # 3..10 m
        ang = rng.uniform(-0.55, 0.55)
        x0, z0 = int(cx + dist * np.sin(ang)), int(cz + dist * np.cos(ang))
        if b.free(x0 - 1, z0 - 1, 6, 6, clear):
            anchors.append((x0, z0))
            b.mark(x0 - 1, z0 - 1, 6, 6, margin=0)
    b.taken[:] = False
    for i, (x0, z0) in enumerate(anchors[:3]):
        _human(b, x0, z0, facing_x=bool(rng.random() < 0.3))
    for i, (x0, z0) in enumerate(anchors[3:6]):
        _object(b, x0, z0, ["crate", "barrel", "bench"][i % 3])
    if events:  # scenes for static memory leave them out: a growing pillar may hide a target at its revisit
        _events(b, anchors[6:9], duration_hint, event_s)

    def scatter(n, w, d, fn, tries=60):
        for _ in range(n):
            for _ in range(tries):
                x0, z0 = int(rng.integers(0, NX)), int(rng.integers(0, NZ))
                if b.free(x0 - 1, z0 - 1, w + 2, d + 2, clear):
                    fn(x0, z0)
                    break

    for _ in range(22):
        w, d, hh = int(rng.integers(12, 32)), int(rng.integers(12, 32)), int(rng.integers(12, 44))
        scatter(1, w, d, lambda x0, z0: _building(b, x0, z0, w, d, hh))
    scatter(30, 11, 11, lambda x0, z0: _tree(b, x0 + 5, z0 + 5))
    for kind in ["crate", "barrel", "car", "bench"] * 8:
        scatter(1, 16, 16, lambda x0, z0, k=kind: _object(b, x0, z0, k))
    scatter(12, 4, 4, lambda x0, z0: _human(b, x0, z0, facing_x=bool(rng.random() < 0.5)))
    if mirror:
        _mirror_half(b)

    pal = PALETTES[b.palette_name]
    palette = np.ones((N_MAT, 3), np.float32)
    for m, c in pal["mat"].items():
        palette[m] = c
    n_inst = b.next_id
    inst_mode = np.zeros(max(n_inst, 2), np.int8)
    for iid, mode in b.modes.items():
        inst_mode[iid] = mode
    inst_tint = np.ones((len(inst_mode), 3), np.float32)
    occ, bits = block_fields(b.mat)
    return World(int(seed), b.palette_name, b.mat, b.inst, b.level, occ, bits,
                 cloud_texture(int(seed)), palette, inst_mode,
                 inst_tint, np.asarray(pal["sky_top"], np.float64), np.asarray(pal["sky_horizon"], np.float64),
                 b.entities, b.events, eye_height)
