"""MultiWorldBench on Engine scenes: two-player cases, their action schedules, the game rules and shared geometry.

Two players, A and B, act in one voxel world. Each player has a **schedule**: a list of segments, each holding one
move (W/A/S/D/idle) and one look (L/R/^/v/idle) for a duration, exactly as a single-player :class:`Trajectory`, plus an
optional **interaction** fired at the segment's start: ``place`` (with a material) or ``destroy``, aimed at a column
marked by a coloured cross on the ground (the block lands on top of what the player sees there), at explicit cells
(building a structure), or at a removable occluder (a stone wall).

The **game rules** are :func:`replay`: the world state at time t is the initial blocks plus every interaction up to
t. Interactions of one step are resolved against the state *before* the step (both players see the same empty
cross), then applied in player order A, B; a placement into an occupied cell fails (first writer wins), a destroy of
an empty column does nothing. With ``only="A"`` the replay sees A's interactions alone: the private world of a
single-player model (``engine-2p-independent``).

The **geometry** the Engine and the evaluator share lives here too: world cells (1 m cubes on the Engine's voxel
grid: cell ``(i, j, k)`` spans X in [i, i+1), Z in [k, k+1), level j above the ground), the avatar body of each player
(boxes in the player's colour, head in skin), and :func:`cast_boxes`, an analytic ray caster of boxes. The Engine draws
avatars with it; the evaluator uses it to say where the expected blocks, structures and avatars must appear in each
view (the reference of every measured judgment), from the case and the commanded poses alone.

The suite ``multiworldbench-engine`` holds the seven task suites at the paper's case counts with ``full=True``
(matched navigation 180, cross-view motion 20, shared-state interaction 120, persistence 50, building reveal 75,
concurrent placement 30, delayed cross-player revisit 20 = 495), and a 20-case subset that covers every task by
default. Each case carries its initial visibility label (mutual, one-way, none), computed from the commanded start
poses and checked against the layout it was built for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .core import Look, Move, Segment, Trajectory, camera_rotation
from .suites import ENGINE_IMAGE_SIZE, Case, SuiteError, engine_intrinsics

FPS = 16.0
EYE_M = 1.6  # first-person eye height; world Y is 0 at eye level and +Y points down (OpenCV)
HFOV_DEG = 66.0
ARENA_M = 9.0  # the cleared, flat arena around the crosses (procedural content keeps outside it)
PLAYERS = ("A", "B")

#: placeable materials (name -> linear RGB in [0, 1]); chosen far apart in chromaticity from each other, from the
#: ground, sky, skin and avatars, so a pixel's material can be measured from its colour
MATERIALS: dict[str, tuple[float, float, float]] = {
    "gold": (0.95, 0.78, 0.08),
    "diamond": (0.18, 0.88, 0.88),
    "lapis": (0.15, 0.25, 0.95),
    "amethyst": (0.70, 0.20, 0.95),
}
STONE = "stone"  # occluder walls (the Engine's stone: neutral grey, not a measured material)
CROSS_RGB = (0.92, 0.06, 0.06)
AVATAR_RGB = {"A": (0.95, 0.45, 0.05), "B": (0.95, 0.10, 0.72)}
SKIN_RGB = (0.86, 0.67, 0.53)

TASKS = ("matched_navigation", "cross_view_motion", "shared_state", "persistence", "building_reveal",
         "concurrent_placement", "delayed_revisit")
#: the paper's case counts (full=True)
TASK_COUNTS = {"matched_navigation": 180, "cross_view_motion": 20, "shared_state": 120, "persistence": 50,
               "building_reveal": 75, "concurrent_placement": 30, "delayed_revisit": 20}
#: the default subset (20 cases, every task)
SUBSET_COUNTS = {"matched_navigation": 6, "cross_view_motion": 2, "shared_state": 4, "persistence": 2,
                 "building_reveal": 2, "concurrent_placement": 2, "delayed_revisit": 2}
VISIBILITY = ("mutual", "one-way", "none")


# ------------------------------------------------------------------------------------------------------ schedules
@dataclass(frozen=True)
class PlayerSeg:
    """One segment of a player's schedule: a move and a look for ``seconds``, and an interaction fired at its start."""

    move: str = "idle"
    look: str = "idle"
    seconds: float = 1.0
    act: str | None = None  # "place" | "destroy"
    material: str | None = None  # placements
    column: tuple[int, int] | None = None  # the marked column (i, k): place on top / destroy the top block
    cells: tuple[tuple[int, int, int], ...] | None = None  # explicit cells (structures)
    occluder: str | None = None  # destroy a named occluder

    def __post_init__(self):
        Segment(Move(self.move), Look(self.look), self.seconds)  # validates move, look and duration
        if self.act not in (None, "place", "destroy"):
            raise SuiteError(f"interaction must be 'place' or 'destroy', got {self.act!r}")
        if self.act == "place" and self.material not in MATERIALS:
            raise SuiteError(f"place needs a material in {sorted(MATERIALS)}, got {self.material!r}")
        if self.act and sum(x is not None for x in (self.column, self.cells, self.occluder)) != 1:
            raise SuiteError("an interaction aims at exactly one of: column, cells, occluder")

    def to_dict(self) -> dict:
        d = {"move": self.move, "look": self.look, "seconds": float(self.seconds)}
        if self.act:
            d["act"] = self.act
            for k in ("material", "column", "cells", "occluder"):
                v = getattr(self, k)
                if v is not None:
                    d[k] = [list(c) for c in v] if k == "cells" else (list(v) if k == "column" else v)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PlayerSeg":
        cells = d.get("cells")
        return cls(d.get("move", "idle"), d.get("look", "idle"), float(d["seconds"]), d.get("act"), d.get("material"),
                   tuple(d["column"]) if d.get("column") is not None else None,
                   tuple(tuple(int(v) for v in c) for c in cells) if cells is not None else None, d.get("occluder"))


@dataclass
class PlayerSchedule:
    """A player's start pose on the map (X, Z metres; yaw degrees, right-positive) and its segments."""

    start: tuple[float, float]
    yaw_deg: float
    segments: list[PlayerSeg]
    speed: float = 1.4
    yaw_rate: float = 25.0

    def trajectory(self) -> Trajectory:
        return Trajectory([Segment(Move(s.move), Look(s.look), s.seconds) for s in self.segments], speed=self.speed,
                          yaw_rate=self.yaw_rate, pitch_rate=self.yaw_rate)

    @property
    def duration(self) -> float:
        return float(sum(s.seconds for s in self.segments))

    def start_pose(self) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = camera_rotation(math.radians(self.yaw_deg), 0.0)
        T[:3, 3] = [self.start[0], 0.0, self.start[1]]
        return T

    def poses(self, fps: float, n: int) -> np.ndarray:
        """Commanded camera-to-world poses on the map (F, 4, 4), OpenCV axes."""
        return np.einsum("ij,njk->nik", self.start_pose(), self.trajectory().poses(fps, n))

    def interactions(self, player: str) -> list[dict]:
        out, t = [], 0.0
        for s in self.segments:
            if s.act:
                a = {"t": round(t, 6), "player": player, "act": s.act}
                a.update({k: v for k, v in s.to_dict().items() if k in ("material", "column", "cells", "occluder")})
                out.append(a)
            t += s.seconds
        return out

    def to_dict(self) -> dict:
        return {"start": list(map(float, self.start)), "yaw_deg": float(self.yaw_deg), "speed_mps": self.speed,
                "yaw_dps": self.yaw_rate, "segments": [s.to_dict() for s in self.segments],
                "text": self.trajectory().to_text()}

    @classmethod
    def from_dict(cls, d: dict) -> "PlayerSchedule":
        return cls(tuple(d["start"]), float(d["yaw_deg"]), [PlayerSeg.from_dict(s) for s in d["segments"]],
                   float(d.get("speed_mps", 1.4)), float(d.get("yaw_dps", 25.0)))


def frame_of(t: float, fps: float) -> int:
    """The first frame whose time is at or after t (an interaction at t is visible from this frame on)."""
    return int(math.ceil(round(t * fps, 9)))


# ------------------------------------------------------------------------------------------------------ game rules
def initial_state(world: dict) -> dict[tuple[int, int, int], str]:
    state = {tuple(c[:3]): c[3] for c in world.get("blocks", [])}
    for cells in (world.get("occluders") or {}).values():
        for c in cells:
            state[tuple(c[:3])] = STONE
    return state


def _top(state, column) -> int:
    """Level of the top block of a column (-1: empty)."""
    i, k = column
    j = -1
    while (i, j + 1, k) in state:
        j += 1
    return j


def replay(world: dict, actions: list[dict], t: float, only: str | None = None, fps: float | None = None) -> dict:
    """World state {(i, j, k): material} after every interaction at time <= t (see the module docstring).

    ``fps`` snaps action times to frames (an action at t acts from frame ceil(t fps)), so rendering and evaluation
    agree on the frame an edit first shows. ``only`` keeps one player's interactions (a private world)."""
    state = initial_state(world)
    acts = [a for a in actions if only is None or a["player"] == only]
    key = (lambda a: frame_of(a["t"], fps)) if fps else (lambda a: a["t"])
    tt = frame_of(t, fps) if fps else t
    steps: dict = {}
    for a in acts:
        if key(a) <= tt + (0 if fps else 1e-9):
            steps.setdefault(key(a), []).append(a)
    for s in sorted(steps):
        group = sorted(steps[s], key=lambda a: PLAYERS.index(a["player"]))
        before = dict(state)
        targets = []
        for a in group:  # targets from what the player sees before the step
            if a.get("column") is not None:
                top = _top(before, a["column"])
                i, k = a["column"]
                targets.append([(i, top + 1, k)] if a["act"] == "place" else ([(i, top, k)] if top >= 0 else []))
            elif a.get("cells") is not None:
                targets.append([tuple(c) for c in a["cells"]])
            else:
                targets.append([tuple(c[:3]) for c in (world.get("occluders") or {}).get(a["occluder"], [])])
        for a, cells in zip(group, targets):
            for c in cells:
                if a["act"] == "place":
                    state.setdefault(c, a["material"])  # occupied: the placement fails
                else:
                    state.pop(c, None)
    return state


# ------------------------------------------------------------------------------------------------------ geometry
@dataclass
class Box:
    """An oriented box: centre (X, Y, Z) metres, half sizes, yaw (radians), colour, and what it is."""

    center: tuple[float, float, float]
    half: tuple[float, float, float]
    rgb: tuple[float, float, float]
    label: str
    yaw: float = 0.0


def cell_center(cell) -> tuple[float, float, float]:
    i, j, k = cell
    return (i + 0.5, EYE_M - (j + 0.5), k + 0.5)


def cell_box(cell, material: str, label: str | None = None) -> Box:
    rgb = MATERIALS.get(material, (0.55, 0.55, 0.52))
    return Box(cell_center(cell), (0.5, 0.5, 0.5), rgb, label or f"cell:{cell[0]},{cell[1]},{cell[2]}")


def avatar_boxes(c2w: np.ndarray, player: str) -> list[Box]:
    """The body of ``player`` standing at camera pose ``c2w``: legs and torso in the player's colour (legs darker),
    head in skin. Feet on the ground below the eye, facing the camera's yaw."""
    X, _, Z = c2w[:3, 3]
    yaw = math.atan2(c2w[0, 2], c2w[2, 2])
    c = np.array(AVATAR_RGB[player])
    body = [((0.0, EYE_M - 0.4, 0.0), (0.22, 0.4, 0.13), tuple(0.6 * c), f"avatar:{player}"),
            ((0.0, EYE_M - 1.15, 0.0), (0.3, 0.35, 0.16), tuple(c), f"avatar:{player}"),
            ((0.0, EYE_M - 1.68, 0.0), (0.17, 0.18, 0.17), SKIN_RGB, f"head:{player}")]
    cy, sy = math.cos(yaw), math.sin(yaw)
    out = []
    for (dx, y, dz), half, rgb, label in body:
        out.append(Box((X + cy * dx + sy * dz, y, Z - sy * dx + cy * dz), half, rgb, label, yaw))
    return out


def cast_boxes(K, c2w: np.ndarray, width: int, height: int, boxes: list[Box]):
    """Analytic ray casting of boxes from a pinhole camera (K = [fx, fy, cx, cy], pixel centres at integer
    coordinates, the Engine's convention). Returns (z-depth (H, W) float32, inf where nothing is hit; index of the
    first box hit (H, W) int32, -1 where none; shade (H, W) float32 of the face hit)."""
    H, W = int(height), int(width)
    depth = np.full((H, W), np.inf, np.float32)
    index = np.full((H, W), -1, np.int32)
    shade = np.ones((H, W), np.float32)
    if not boxes:
        return depth, index, shade
    fx, fy, cx, cy = map(float, K)
    # cast only inside the boxes' screen bounding box (all of it when a box reaches behind the camera)
    w2c = np.linalg.inv(c2w)
    x0, y0, x1, y1 = W, H, -1, -1
    for b in boxes:
        cyaw, syaw = math.cos(b.yaw), math.sin(b.yaw)
        Rb = np.array([[cyaw, 0, syaw], [0, 1, 0], [-syaw, 0, cyaw]])
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * np.asarray(b.half)
        pc = (corners @ Rb.T + np.asarray(b.center)) @ w2c[:3, :3].T + w2c[:3, 3]
        if (pc[:, 2] <= 0.05).all():
            continue
        if (pc[:, 2] <= 0.05).any():
            x0, y0, x1, y1 = 0, 0, W - 1, H - 1
            break
        u_ = fx * pc[:, 0] / pc[:, 2] + cx
        v_ = fy * pc[:, 1] / pc[:, 2] + cy
        x0, x1 = min(x0, int(math.floor(u_.min())) - 1), max(x1, int(math.ceil(u_.max())) + 1)
        y0, y1 = min(y0, int(math.floor(v_.min())) - 1), max(y1, int(math.ceil(v_.max())) + 1)
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, W - 1), min(y1, H - 1)
    if x1 < x0 or y1 < y0:
        return depth, index, shade
    u = (np.arange(x0, x1 + 1) - cx) / fx
    v = (np.arange(y0, y1 + 1) - cy) / fy
    h_, w_ = len(v), len(u)
    d_cam = np.stack(np.broadcast_arrays(u[None, :], v[:, None], np.ones((h_, w_))), axis=-1)  # z = 1: t = z-depth
    d_w = d_cam @ c2w[:3, :3].T
    o_w = c2w[:3, 3]
    sub_d, sub_i, sub_s = depth[y0:y1 + 1, x0:x1 + 1], index[y0:y1 + 1, x0:x1 + 1], shade[y0:y1 + 1, x0:x1 + 1]
    for bi, b in enumerate(boxes):
        cyaw, syaw = math.cos(b.yaw), math.sin(b.yaw)
        Rb = np.array([[cyaw, 0, syaw], [0, 1, 0], [-syaw, 0, cyaw]])  # box-to-world rotation (yaw about +Y)
        o = Rb.T @ (o_w - np.asarray(b.center))
        d = d_w @ Rb  # = (Rb^T d_w^T)^T
        h = np.asarray(b.half)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / d
            t1 = (-h - o) * inv
            t2 = (h - o) * inv
        tlo = np.minimum(t1, t2)
        thi = np.maximum(t1, t2)
        tlo = np.where(np.isnan(tlo), -np.inf, tlo)
        thi = np.where(np.isnan(thi), np.inf, thi)
        tn = tlo.max(axis=-1)
        tf = thi.min(axis=-1)
        hit = (tf >= tn) & (tf > 1e-6) & (tn > 0.05) & (tn < sub_d)
        if not hit.any():
            continue
        face = tlo.argmax(axis=-1)
        sgn = np.take_along_axis(d, face[..., None], -1)[..., 0]
        sh = np.where(face == 1, np.where(sgn > 0, 1.0, 0.5), np.where(face == 0, 0.75, 0.88))
        sub_d[hit] = tn[hit]
        sub_i[hit] = bi
        sub_s[hit] = sh[hit]
    return depth, index, shade


def sees(c2w: np.ndarray, point, hfov_deg: float = HFOV_DEG) -> float:
    """Angle (degrees) between the camera's forward axis and the direction to a map point (X, Z), horizontally."""
    fwd = c2w[:3, 2]
    d = np.array([point[0] - c2w[0, 3], point[1] - c2w[2, 3]])
    f = np.array([fwd[0], fwd[2]])
    cosang = float(np.dot(d, f) / (np.linalg.norm(d) * np.linalg.norm(f) + 1e-12))
    return math.degrees(math.acos(max(-1.0, min(1.0, cosang))))


def visibility_label(pose_a: np.ndarray, pose_b: np.ndarray, inside: float = 28.0, outside: float = 38.0) -> str:
    """mutual / one-way / none from the start poses (a player sees the other when the other's body is within the
    horizontal field of view); ambiguous layouts (near the edge of the view) raise."""
    ang_ab = sees(pose_a, (pose_b[0, 3], pose_b[2, 3]))
    ang_ba = sees(pose_b, (pose_a[0, 3], pose_a[2, 3]))
    for ang in (ang_ab, ang_ba):
        if inside < ang < outside:
            raise SuiteError(f"ambiguous visibility layout: a player sees the other at {ang:.1f} deg from its axis")
    a, b = ang_ab <= inside, ang_ba <= inside
    return "mutual" if a and b else ("one-way" if a or b else "none")


# ------------------------------------------------------------------------------------------------------ cases
@dataclass
class TwoPlayerCase(Case):
    """A MultiWorldBench case: ``trajectory`` is player A's (single-player tooling sees a valid case); the two
    schedules, the world spec (crosses, initial blocks, occluders, structure), the task, its visibility label and the
    checks the evaluator runs are in ``players`` / ``world`` / ``task`` / ``visibility`` / ``checks``."""

    players: dict = field(default_factory=dict)  # "A"/"B" -> PlayerSchedule
    world: dict = field(default_factory=dict)
    task: str = ""
    visibility: str = ""
    checks: dict = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return max(p.duration for p in self.players.values())

    def interactions(self) -> list[dict]:
        acts = [a for p in PLAYERS for a in self.players[p].interactions(p)]
        return sorted(acts, key=lambda a: (a["t"], PLAYERS.index(a["player"])))

    def two_player_dict(self) -> dict:
        return {"players": {p: s.to_dict() for p, s in self.players.items()}, "world": self.world, "task": self.task,
                "visibility": self.visibility, "checks": self.checks, "interactions": self.interactions(),
                "duration_s": self.duration}

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["two_player"] = self.two_player_dict()
        return d


def _scene(seed: int) -> dict:
    return {"seed": int(seed), "palette": "realistic"}


def _face(pos, target) -> float:
    """Yaw (degrees) that looks from map point pos to target."""
    return math.degrees(math.atan2(target[0] - pos[0], target[1] - pos[1]))


def _at(center, bearing_deg: float, dist: float):
    b = math.radians(bearing_deg)
    return (center[0] + dist * math.sin(b), center[1] + dist * math.cos(b))


#: layouts around a target point: (bearing offset of B from A seen from the target, distance of A, of B)
LAYOUTS = {"mutual": (180.0, 4.5, 4.5), "one-way": (120.0, 7.0, 3.0), "none": (90.0, 5.0, 5.0)}


def _layout(vis: str, target, rot: float, swap: bool = False, dists=None):
    """Start positions and yaws of A and B, both facing ``target``, in the visibility layout ``vis``; ``swap``
    exchanges the roles (for one-way: B sees A)."""
    phi, da, db = LAYOUTS[vis]
    if dists:
        da, db = dists
    pa = _at(target, rot, da)
    pb = _at(target, rot + phi, db)
    if swap:
        pa, pb = pb, pa
    return (pa, _face(pa, target)), (pb, _face(pb, target))


def _seg(move="idle", look="idle", seconds=1.0, **kw) -> PlayerSeg:
    return PlayerSeg(move, look, float(seconds), **kw)


def _hold(seconds) -> PlayerSeg:
    return PlayerSeg("idle", "idle", float(seconds))


def _pad(segs: list[PlayerSeg], total: float) -> list[PlayerSeg]:
    used = sum(s.seconds for s in segs)
    if total - used > 1e-9:
        segs = segs + [_hold(round(total - used, 6))]
    return segs


CROSS = (0, 0)  # the marked column
CROSS_C = (0.5, 0.5)  # its centre on the map
MOVE_KEYS = {"W": ("W", "idle"), "S": ("S", "idle"), "A": ("A", "idle"), "D": ("D", "idle"), "L": ("idle", "L"),
             "R": ("idle", "R")}
OTHER_ACTION = {"W": "R", "S": "L", "A": "W", "D": "S", "L": "D", "R": "A"}
MAT_NAMES = tuple(MATERIALS)


class _Builder:
    def __init__(self, seed: int):
        self.seed = int(seed)
        self.cases: list[TwoPlayerCase] = []

    def add(self, task: str, idx: int, vis_wanted: str | None, a: PlayerSchedule, b: PlayerSchedule, world: dict,
            checks: dict, tags: dict, prompt: str) -> None:
        scene_seed = self.seed * 1000 + 37 * TASKS.index(task) + idx
        world = dict(world, seed=scene_seed, palette="realistic", arena_m=ARENA_M)
        world.setdefault("crosses", [list(CROSS)])
        total = max(a.duration, b.duration)
        a.segments, b.segments = _pad(a.segments, total), _pad(b.segments, total)
        pa, pb = a.start_pose(), b.start_pose()
        vis = visibility_label(pa, pb)
        if vis_wanted is not None and vis != vis_wanted:
            raise SuiteError(f"{task}-{idx:03d}: layout built for {vis_wanted!r} visibility gives {vis!r}")
        cid = f"{task.replace('_', '-')}-{idx:03d}"
        self.cases.append(TwoPlayerCase(
            id=cid, suite="multiworldbench-engine", trajectory=a.trajectory(), prompt=prompt,
            prompt_source=f"engine:scene-{scene_seed}", scene=_scene(scene_seed),
            intrinsics=engine_intrinsics(HFOV_DEG), image_size=ENGINE_IMAGE_SIZE, view="first",
            tags=dict(tags, task=task, visibility=vis), players={"A": a, "B": b}, world=world, task=task,
            visibility=vis, checks=checks))


def _matched_navigation(bld: _Builder, n: int) -> None:
    conds, acts = ("idle", "same", "different"), ("W", "S", "A", "D", "L", "R")
    combos = [(c, r, k, rep) for c in conds for r in PLAYERS for k in acts for rep in range(5)]
    if n < len(combos):  # the subset: every condition, both roles, varied actions
        combos = [("idle", "A", "W", 0), ("idle", "B", "L", 0), ("same", "A", "R", 0), ("same", "B", "D", 0),
                  ("different", "A", "S", 0), ("different", "B", "A", 0)][:n]
    for idx, (cond, role, key, rep) in enumerate(combos):
        vis = VISIBILITY[(idx + rep) % 3]
        rot = (idx * 47.0) % 360
        # walking toward / away from the cross keeps both players on the arena
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot, dists=(5.5, 5.5) if vis != "one-way" else (7.0, 3.0))
        partner_key = {"idle": None, "same": key, "different": OTHER_ACTION[key]}[cond]
        keys = {role: key, ("B" if role == "A" else "A"): partner_key}

        def sched(k):
            act = [_seg(*MOVE_KEYS[k], 2.5)] if k else [_hold(2.5)]
            return [_hold(0.5)] + act + [_hold(0.5)]
        a = PlayerSchedule(pa, ya, sched(keys["A"]))
        b = PlayerSchedule(pb, yb, sched(keys["B"]))
        bld.add("matched_navigation", idx, vis, a, b, {}, {"condition": cond, "target": role, "key": key,
                                                         "partner_key": partner_key, "action_s": [0.5, 3.0]},
                {"condition": cond, "target": role, "key": key, "rep": rep},
                f"Two players in a voxel arena. Player {role} presses {key}; the partner "
                f"{'stays idle' if cond == 'idle' else 'does the same' if cond == 'same' else 'does ' + str(partner_key)}.")


def _cross_view_motion(bld: _Builder, n: int) -> None:
    for idx in range(n):
        actor = PLAYERS[idx % 2]
        key = ("A", "D", "W", "S")[(idx // 2) % 4]
        vis = ("mutual", "one-way")[(idx // 8) % 2]
        rot = (idx * 53.0) % 360
        observer = "B" if actor == "A" else "A"
        if vis == "mutual":  # face to face across the cross, 6 m apart
            (pa, ya), (pb, yb) = _layout("mutual", CROSS_C, rot, dists=(3.0, 3.0))
        else:  # the observer (far) sees the actor (near); the actor does not see the observer
            (pa, ya), (pb, yb) = _layout("one-way", CROSS_C, rot, swap=(observer == "B"), dists=(7.0, 3.0))
        secs = 1.5 if key in "AD" else 2.0
        poses = {"A": (pa, ya), "B": (pb, yb)}
        sched = {actor: [_hold(1.0), _seg(*MOVE_KEYS[key], secs), _hold(1.5)], observer: [_hold(1.0 + secs + 1.5)]}
        a = PlayerSchedule(poses["A"][0], poses["A"][1], sched["A"])
        b = PlayerSchedule(poses["B"][0], poses["B"][1], sched["B"])
        # the actor must stay in the observer's view: flip a strafe that would leave it
        obs, act = (a, b) if observer == "A" else (b, a)
        end = act.poses(FPS, frame_of(act.duration, FPS))[-1]
        if sees(obs.start_pose(), (end[0, 3], end[2, 3])) > 26.0 and key in "AD":
            key = "D" if key == "A" else "A"
            act.segments[1] = _seg(*MOVE_KEYS[key], secs)
        bld.add("cross_view_motion", idx, None if vis == "one-way" else vis, a, b, {},
                {"actor": actor, "observer": observer, "key": key, "before_s": 0.75, "after_s": 1.0 + secs + 1.0,
                 "motion_s": [1.0, 1.0 + secs]},
                {"actor": actor, "key": key},
                f"Player {actor} presses {key} while player {observer} watches.")


def _shared_state(bld: _Builder, n: int) -> None:
    variants = ("place1", "destroy1", "place2", "destroy2")
    combos = [(v, r, vis, m) for v in variants for r in PLAYERS for vis in VISIBILITY for m in range(5)]
    if n < len(combos):
        combos = [("place1", "A", "mutual", 0), ("destroy1", "B", "none", 1), ("place2", "A", "one-way", 2),
                  ("destroy2", "B", "mutual", 3)][:n]
    for idx, (var, first, vis, mi) in enumerate(combos):
        rot = (idx * 29.0) % 360
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot)
        second = "B" if first == "A" else "A"
        m1, m2 = MAT_NAMES[mi % 4], MAT_NAMES[(mi + 1 + mi // 4) % 4]
        blocks = []
        acts = {"A": [], "B": []}
        if var == "place1":
            acts[first] = [(1.5, dict(act="place", material=m1, column=CROSS))]
        elif var == "destroy1":
            blocks = [[CROSS[0], 0, CROSS[1], m1]]
            acts[first] = [(1.5, dict(act="destroy", column=CROSS))]
        elif var == "place2":  # the second player stacks on the first player's block
            acts[first] = [(1.5, dict(act="place", material=m1, column=CROSS))]
            acts[second] = [(3.0, dict(act="place", material=m2, column=CROSS))]
        else:  # the first places, the second destroys it
            acts[first] = [(1.5, dict(act="place", material=m1, column=CROSS))]
            acts[second] = [(3.0, dict(act="destroy", column=CROSS))]

        def sched(evs):
            segs, t = [], 0.0
            for at, kw in evs:
                segs.append(_hold(at - t))
                segs.append(_seg(seconds=0.25, **kw))
                t = at + 0.25
            return segs + [_hold(5.0 - t)]
        a, b = PlayerSchedule(pa, ya, sched(acts["A"])), PlayerSchedule(pb, yb, sched(acts["B"]))
        world = {"blocks": blocks}
        bld.add("shared_state", idx, vis, a, b, world,
                {"variant": var, "column": list(CROSS), "active": [first] + ([second] if var in ("place2", "destroy2") else []),
                 "op": "place" if var in ("place1", "place2") else "destroy", "final_s": [4.5, 4.7, 4.9]},
                {"variant": var, "first": first, "material": m1},
                f"Player {first} {'places ' + m1 if 'place' in var or var == 'destroy2' else 'destroys the block'} "
                f"at the red cross{'; then player ' + second + (' stacks ' + m2 if var == 'place2' else ' destroys it') if var in ('place2', 'destroy2') else ''}.")


def _persistence(bld: _Builder, n: int) -> None:
    combos = [(r, m, vis, op) for r in PLAYERS for m in range(5) for vis, op in
              zip(("mutual", "one-way", "none", "mutual", "none"), ("place", "place", "place", "destroy", "destroy"))]
    if n < len(combos):
        combos = [("A", 0, "mutual", "place"), ("B", 1, "none", "destroy")][:n]
    for idx, (op_player, mi, vis, op) in enumerate(combos):
        rot = (idx * 41.0) % 360
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot)
        observer = "B" if op_player == "A" else "A"
        mat = MAT_NAMES[mi % 4]
        blocks = [[CROSS[0], 0, CROSS[1], MAT_NAMES[(mi + 2) % 4]]] if op == "destroy" else []
        act = dict(act="place", material=mat, column=CROSS) if op == "place" else dict(act="destroy", column=CROSS)
        # the operator edits while the observer looks away, then looks away and back itself
        op_segs = [_hold(2.5), _seg(seconds=0.25, **act), _seg("idle", "L", 2.0), _hold(0.5), _seg("idle", "R", 2.0),
                   _hold(0.75)]
        obs_segs = [_hold(0.5), _seg("idle", "L", 3.0), _hold(1.0), _seg("idle", "R", 3.0), _hold(0.5)]
        sch = {op_player: PlayerSchedule((0, 0), 0, op_segs, yaw_rate=45.0),
               observer: PlayerSchedule((0, 0), 0, obs_segs, yaw_rate=60.0)}
        sch["A"].start, sch["A"].yaw_deg = pa, ya
        sch["B"].start, sch["B"].yaw_deg = pb, yb
        bld.add("persistence", idx, vis, sch["A"], sch["B"], {"blocks": blocks},
                {"operator": op_player, "observer": observer, "op": op, "column": list(CROSS),
                 "final_s": [7.6, 7.75, 7.9], "edit_s": 2.5},
                {"operator": op_player, "op": op, "material": mat},
                f"Player {op_player} {'places ' + mat if op == 'place' else 'destroys the block'} at the red cross while "
                f"player {observer} looks away; both look back.")


#: structures (cells relative to the build site, level j) — towers, lines, L, square, stairs
SHAPES = {
    "tower": [(0, 0, 0), (0, 1, 0), (0, 2, 0)],
    "line": [(-1, 0, 0), (0, 0, 0), (1, 0, 0)],
    "ell": [(-1, 0, 0), (0, 0, 0), (1, 0, 0), (1, 1, 0)],
    "square": [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)],
    "stairs": [(-1, 0, 0), (0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0)],
}


def _building_reveal(bld: _Builder, n: int) -> None:
    variants, shapes = ("turn", "occluder", "static"), tuple(SHAPES)
    combos = [(v, s, rep) for v in variants for s in shapes for rep in range(5)]
    if n < len(combos):
        combos = [("turn", "ell", 0), ("occluder", "tower", 1)][:n]
    site = (0, 0)
    for idx, (var, shape, rep) in enumerate(combos):
        builder = PLAYERS[rep % 2]
        revealer = "B" if builder == "A" else "A"
        rot = (idx * 67.0) % 360
        target = (site[0] + 0.5, site[1] + 0.5)
        mats = (MAT_NAMES[rep % 4], MAT_NAMES[(rep + 1) % 4])
        # the structure lies across the builder's view: rotate its cells to the layout (multiples of 90 degrees)
        q = int(round(rot / 90.0)) % 4
        cells = []
        for n_, (di, dj, dk) in enumerate(SHAPES[shape]):
            ri, rk = [(di, dk), (dk, -di), (-di, -dk), (-dk, di)][q]
            cells.append([site[0] + ri, dj, site[1] + rk, mats[n_ % 2]])
        # builder 5.5 m and revealer 6.5 m from the site, 90 degrees apart: neither sees the other
        p_bu = _at(target, rot, 5.5)
        p_rv = _at(target, rot + 90.0, 6.5)
        y_bu, y_rv = _face(p_bu, target), _face(p_rv, target)
        occluders, blocks = {}, []
        if var in ("occluder", "static"):  # a stone wall 3 wide, 3 high between the revealer and the site
            mid = _at(target, rot + 90.0, 3.0)
            bearing = math.radians(rot + 90.0)
            along = (abs(math.cos(bearing)) > abs(math.sin(bearing)))  # wall across the line of sight
            ci, ck = int(math.floor(mid[0])), int(math.floor(mid[1]))
            wall = [[ci + (d if along else 0), j, ck + (0 if along else d)] for d in (-1, 0, 1, 2) for j in range(3)]
            if along:
                wall += [[ci - 2, j, ck] for j in range(3)]
            else:
                wall += [[ci, j, ck - 2] for j in range(3)]
            occluders = {"wall": wall}
        bu_segs, t = [], 0.0
        if var == "static":
            blocks = cells
            bu_segs.append(_hold(1.0))
            t = 1.0
        else:
            for c in cells:  # one block every 0.5 s from t = 0.5
                bu_segs.append(_hold(0.25))
                bu_segs.append(_seg(seconds=0.25, act="place", material=c[3], cells=(tuple(c[:3]),)))
                t += 0.5
        if var == "turn":  # the revealer looks away while the structure is built, then turns to it
            y_rv0 = y_rv + 180.0
            rv_segs = [_hold(2.75), _seg("idle", "R", 2.0), _hold(3.25)]
            bu_segs.append(_hold(8.0 - t))
        else:  # the builder removes the wall at 3.5 s
            y_rv0 = y_rv
            rv_segs = [_hold(8.0)]
            bu_segs += [_hold(3.5 - t), _seg(seconds=0.25, act="destroy", occluder="wall"), _hold(4.25)]
        sch = {builder: PlayerSchedule(p_bu, y_bu, bu_segs), revealer: PlayerSchedule(p_rv, y_rv0, rv_segs,
                                                                                        yaw_rate=90.0)}
        bld.add("building_reveal", idx, "none", sch["A"], sch["B"],
                {"blocks": blocks, "occluders": occluders, "structure": cells},
                {"variant": var, "builder": builder, "revealer": revealer, "frames_s": [5.0, 6.25, 7.5],
                 "shape": shape},
                {"variant": var, "shape": shape, "builder": builder},
                f"Player {builder} {'builds' if var != 'static' else 'stands by'} a {shape} of {'/'.join(mats)} blocks; "
                f"player {revealer} {'turns to look' if var == 'turn' else 'sees it once the wall is removed'}.")


def _concurrent(bld: _Builder, n: int) -> None:
    pairs = [(a, b) for a in MAT_NAMES for b in MAT_NAMES if a != b][:10]
    combos = [(vis, pr) for vis in VISIBILITY for pr in pairs]
    if n < len(combos):
        combos = [("mutual", pairs[0]), ("none", pairs[5])][:n]
    for idx, (vis, (ma, mb)) in enumerate(combos):
        rot = (idx * 31.0) % 360
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot)
        seg = lambda m: [_hold(2.5), _seg(seconds=0.25, act="place", material=m, column=CROSS), _hold(5.25)]
        a, b = PlayerSchedule(pa, ya, seg(ma)), PlayerSchedule(pb, yb, seg(mb))
        bld.add("concurrent_placement", idx, vis, a, b, {},
                {"column": list(CROSS), "frames_s": [3.75, 5.0, 6.25], "edit_s": 2.5},
                {"materials": [ma, mb]},
                f"Both players place a block at the red cross in the same step: A {ma}, B {mb}.")


#: landmarks for the delayed revisit (cells relative to the landmark site)
LANDMARKS = {
    "gate": [(-1, 0, 0, "lapis"), (-1, 1, 0, "lapis"), (1, 0, 0, "lapis"), (1, 1, 0, "lapis"), (-1, 2, 0, "gold"),
             (0, 2, 0, "gold"), (1, 2, 0, "gold")],
    "pillar": [(0, 0, 0, "amethyst"), (0, 1, 0, "amethyst"), (0, 2, 0, "diamond"), (0, 3, 0, "diamond")],
    "wall": [(d, j, 0, "diamond" if (d + j) % 2 else "lapis") for d in (-1, 0, 1) for j in (0, 1)],
    "stair": [(-1, 0, 0, "gold"), (0, 0, 0, "gold"), (0, 1, 0, "amethyst"), (1, 0, 0, "gold"), (1, 1, 0, "amethyst"),
              (1, 2, 0, "lapis")],
    "hut": [(-1, 0, 0, "amethyst"), (1, 0, 0, "amethyst"), (-1, 1, 0, "lapis"), (0, 1, 0, "lapis"), (1, 1, 0, "lapis")],
}


def _delayed_revisit(bld: _Builder, n: int) -> None:
    combos = [(first, start, lm) for first in PLAYERS for start in ("behind", "behind-away") for lm in LANDMARKS]
    if n < len(combos):
        combos = [("A", "behind", "gate"), ("B", "behind-away", "pillar")][:n]
    for idx, (first, start, lm) in enumerate(combos):
        ret = "B" if first == "A" else "A"
        rot = (idx * 71.0) % 360
        site = (0, 0)
        q = int(round(rot / 90.0)) % 4  # landmarks face the viewer: the facade runs across the line of sight
        cells = []
        for di, dj, dk, m in LANDMARKS[lm]:
            ri, rk = [(di, dk), (dk, -di), (-di, -dk), (-dk, di)][q]
            cells.append([site[0] + ri, dj, site[1] + rk, m])
        yaw0 = 180.0 + 90.0 * q  # look at the facade head-on
        target = (site[0] + 0.5, site[1] + 0.5)
        p0 = _at(target, yaw0 + 180.0, 6.0)
        p0 = (p0[0], p0[1])
        f = (math.sin(math.radians(yaw0)), math.cos(math.radians(yaw0)))
        back = (p0[0] - 2.8 * f[0], p0[1] - 2.8 * f[1])
        # the first observer looks at the landmark, then steps aside (2.8 m to the right) and stays there
        first_segs = [_hold(0.75), _seg("D", "idle", 2.0), _hold(5.25)]
        if start == "behind":  # the returning observer waits behind, then walks to the first observer's spot
            ret_sched = PlayerSchedule(back, yaw0, [_hold(2.75), _seg("W", "idle", 2.0), _hold(3.25)])
        else:  # ... facing away first: turns around, then walks
            ret_sched = PlayerSchedule(back, yaw0 + 180.0, [_hold(0.75), _seg("idle", "R", 2.0), _seg("W", "idle", 2.0),
                                                             _hold(3.25)], yaw_rate=90.0)
        sch = {first: PlayerSchedule(p0, yaw0, first_segs), ret: ret_sched}
        bld.add("delayed_revisit", idx, None, sch["A"], sch["B"], {"blocks": cells, "structure": cells},
                {"first": first, "returning": ret, "first_s": 0.5, "gap_frames": 70, "landmark": lm},
                {"first": first, "start": start, "landmark": lm},
                f"Player {first} looks at a {lm}; 70 frames later player {ret} stands where {first} stood and looks again.")


def multiworldbench_engine_suite(full: bool = False, seed: int = 0, **_) -> list[Case]:
    """The seven MultiWorldBench task suites on Engine scenes (495 cases with ``full``; 20 by default)."""
    counts = TASK_COUNTS if full else SUBSET_COUNTS
    bld = _Builder(seed)
    for task, fn in (("matched_navigation", _matched_navigation), ("cross_view_motion", _cross_view_motion),
                     ("shared_state", _shared_state), ("persistence", _persistence),
                     ("building_reveal", _building_reveal), ("concurrent_placement", _concurrent),
                     ("delayed_revisit", _delayed_revisit)):
        fn(bld, counts[task])
    if full:
        got = {t: sum(c.task == t for c in bld.cases) for t in TASKS}
        if got != TASK_COUNTS:
            raise SuiteError(f"multiworldbench-engine: built {got}, expected {TASK_COUNTS}")
    # the default subset interleaves the tasks, so --limit K still covers as many tasks as it can
    if not full:
        by = {t: [c for c in bld.cases if c.task == t] for t in TASKS}
        order = []
        while any(by.values()):
            for t in TASKS:
                if by[t]:
                    order.append(by[t].pop(0))
        return order
    return bld.cases
