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

The suite itself (``multiworldbench/suite.py``) holds the seven task suites at the paper's case counts with ``full=True``
(matched navigation 180, cross-view motion 20, shared-state interaction 120, persistence 50, building reveal 75,
concurrent placement 30, delayed cross-player revisit 20 = 495), and a 20-case subset that covers every task by
default. Each case carries its initial visibility label (mutual, one-way, none), computed from the commanded start
poses and checked against the layout it was built for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core import Look, Move, Segment, Trajectory, camera_rotation
from ..suites import Case, SuiteError

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
SUBSET_COUNTS = {"matched_navigation": 5, "cross_view_motion": 2, "shared_state": 4, "persistence": 2,
                 "building_reveal": 3, "concurrent_placement": 2, "delayed_revisit": 2}
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


def _rowmat(a: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``a @ M`` for (..., 3) rows and a 3x3 M, summed in a fixed order without BLAS: BLAS's result may differ in the
    last bit with its thread count (which other code in the process may change), and one bit flips a box edge, so
    the same rollout would not render the same bytes."""
    return a[..., 0:1] * M[0] + a[..., 1:2] * M[1] + a[..., 2:3] * M[2]


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
        pc = _rowmat(_rowmat(corners, Rb.T) + np.asarray(b.center), w2c[:3, :3].T) + w2c[:3, 3]
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
    d_w = _rowmat(d_cam, c2w[:3, :3].T)
    o_w = c2w[:3, 3]
    sub_d, sub_i, sub_s = depth[y0:y1 + 1, x0:x1 + 1], index[y0:y1 + 1, x0:x1 + 1], shade[y0:y1 + 1, x0:x1 + 1]
    for bi, b in enumerate(boxes):
        cyaw, syaw = math.cos(b.yaw), math.sin(b.yaw)
        Rb = np.array([[cyaw, 0, syaw], [0, 1, 0], [-syaw, 0, cyaw]])  # box-to-world rotation (yaw about +Y)
        o = _rowmat(o_w - np.asarray(b.center), Rb)  # Rb^T (o_w - c)
        d = _rowmat(d_w, Rb)  # = (Rb^T d_w^T)^T
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
