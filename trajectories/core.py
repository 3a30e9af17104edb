"""Unified trajectories: two control channels, a text form, and integration to commanded poses.

A trajectory is a list of :class:`Segment` s. Every segment holds one **move** (W forward, A strafe-left, S back,
D strafe-right, or idle) and one **look** (yaw-left, yaw-right, pitch-up, pitch-down, or idle) for a duration in
seconds. Moves and looks live in different channels, so strafe-right (``D``) and pitch-down can never share a token.

Text form (grammar)::

    trajectory := segment (whitespace segment)*
    segment    := action duration
    action     := move | look | move "+" look | "_"          ("_" = hold: no move, no look)
    move       := "W" | "A" | "S" | "D"                      forward, strafe-left, back, strafe-right
    look       := "L" | "R" | "^" | "v"                      yaw-left, yaw-right, pitch-up, pitch-down
    duration   := positive decimal number of seconds        e.g. 20, 2.5, 0.25

Limits (named constants below): each segment lasts MIN_SEGMENT_SECONDS (0.1 ms) to MAX_SEGMENT_SECONDS (600 s), a
trajectory at most MAX_TRAJECTORY_SECONDS (3600 s) in at most MAX_SEGMENTS (1000) segments, speeds are finite and at
most MAX_SPEED_MPS (50 m/s) and MAX_TURN_DPS (720 deg/s).

Examples: ``"W20 R20"`` (forward 20 s, then yaw right 20 s), ``"_1 L3.6 R3.6 _1"``, ``"W+R5"`` (walk while turning).
Names of the library (``LRUD``, ``worldmark:6``) are resolved by name, never by parsing letters: see
:mod:`worldgate.trajectories.library`.

Poses are **camera-to-world** 4x4 matrices in OpenCV axes (+X right, +Y down, +Z forward); frame 0 is the identity.
The camera state is (position, yaw psi, pitch theta) with rotation ``R = R_y(psi) @ R_x(theta)``: positive yaw turns
the view to the right (forward -> +X), positive pitch tilts it up (forward -> -Y). Moves act in the horizontal
(yaw-only) frame, as in first-person games, so pitching never makes ``W`` climb.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from difflib import get_close_matches
from enum import Enum
from typing import Iterable, Sequence

import numpy as np

DEFAULT_SPEED_MPS = 1.4  # a walking pace, metres per second
DEFAULT_YAW_DPS = 25.0  # degrees per second
DEFAULT_PITCH_DPS = 25.0
DEFAULT_FPS = 16.0

# Limits of what a trajectory may ask for (checked where trajectories enter: the text form, dicts, with_seconds and
# the Trajectory constructor); each error names the limit. A real rollout is minutes long: these bounds keep a typo
# (``W100000``, ``speed_mps 1e308``) from running for hours or integrating to inf.
MIN_SEGMENT_SECONDS = 1e-4  # 0.1 ms: shorter is a typo (and can integrate to zero frames)
MAX_SEGMENT_SECONDS = 600.0  # 10 minutes per segment
MAX_TRAJECTORY_SECONDS = 3600.0  # 1 hour in all
MAX_SEGMENTS = 1000  # segments of one trajectory given as text or a list
MAX_SPEED_MPS = 50.0  # move speed, metres per second (a fast car)
MAX_TURN_DPS = 720.0  # yaw and pitch rates, degrees per second (two turns a second)

GRAMMAR = (
    "segment := action duration; action := move | look | move+look | _ ; "
    "move := W|A|S|D (forward, strafe-left, back, strafe-right); "
    "look := L|R|^|v (yaw-left, yaw-right, pitch-up, pitch-down); "
    f"duration := seconds in [{MIN_SEGMENT_SECONDS:g}, {MAX_SEGMENT_SECONDS:g}], e.g. 'W20 R20', 'W+R5', '_1'"
)


class TrajectoryError(ValueError):
    """A trajectory could not be parsed or built; the message names the bad part and the fix."""


class Move(str, Enum):
    IDLE = "idle"
    FORWARD = "W"
    STRAFE_LEFT = "A"
    BACK = "S"
    STRAFE_RIGHT = "D"


class Look(str, Enum):
    IDLE = "idle"
    YAW_LEFT = "L"
    YAW_RIGHT = "R"
    PITCH_UP = "^"
    PITCH_DOWN = "v"


# unit velocity of each move in the yaw frame (x right, z forward; y stays 0)
MOVE_DIR = {
    Move.IDLE: (0.0, 0.0, 0.0),
    Move.FORWARD: (0.0, 0.0, 1.0),
    Move.BACK: (0.0, 0.0, -1.0),
    Move.STRAFE_LEFT: (-1.0, 0.0, 0.0),
    Move.STRAFE_RIGHT: (1.0, 0.0, 0.0),
}
# (yaw sign, pitch sign) of each look
LOOK_RATE = {
    Look.IDLE: (0, 0),
    Look.YAW_LEFT: (-1, 0),
    Look.YAW_RIGHT: (1, 0),
    Look.PITCH_UP: (0, 1),
    Look.PITCH_DOWN: (0, -1),
}


@dataclass(frozen=True)
class Segment:
    move: Move = Move.IDLE
    look: Look = Look.IDLE
    seconds: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "move", Move(self.move))
        object.__setattr__(self, "look", Look(self.look))
        sec = self.seconds
        if not (isinstance(sec, (int, float, np.integer, np.floating)) and not isinstance(sec, bool)
                and math.isfinite(sec) and 0 < sec <= MAX_SEGMENT_SECONDS):
            raise TrajectoryError(f"segment duration must be a number of seconds in (0, {MAX_SEGMENT_SECONDS:g}] "
                                  f"(MAX_SEGMENT_SECONDS), got {short_repr(sec)}")

    @property
    def is_hold(self) -> bool:
        return self.move is Move.IDLE and self.look is Look.IDLE

    @property
    def token(self) -> str:
        """The segment's action in the text form (without duration)."""
        if self.is_hold:
            return "_"
        parts = [m.value for m in (self.move,) if m is not Move.IDLE] + [
            lk.value for lk in (self.look,) if lk is not Look.IDLE
        ]
        return "+".join(parts)

    def to_text(self) -> str:
        return f"{self.token}{_fmt_seconds(self.seconds)}"

    def to_dict(self) -> dict:
        return {"move": self.move.value, "look": self.look.value, "seconds": float(self.seconds)}

    @classmethod
    def from_dict(cls, d: dict) -> "Segment":
        try:
            if not isinstance(d, dict):
                raise TypeError(f"a segment is an object, got {type(d).__name__}")
            sec = d["seconds"]
            if isinstance(sec, bool) or not isinstance(sec, (int, float)):
                raise TypeError(f"'seconds' must be a number, got {type(sec).__name__}")
            seg = cls(Move(d.get("move", "idle")), Look(d.get("look", "idle")), float(sec))
        except (KeyError, ValueError, TypeError, OverflowError) as e:
            raise TrajectoryError(
                f"bad segment {short_repr(d)}: expected {{'move': one of {[m.value for m in Move]}, "
                f"'look': one of {[lk.value for lk in Look]}, 'seconds': in [{MIN_SEGMENT_SECONDS:g}, "
                f"{MAX_SEGMENT_SECONDS:g}]}} ({short_repr(e, 200)})"
            ) from None
        _check_edge_seconds(seg.seconds, f"segment {short_repr(d)}")
        return seg


def unknown_key(d: dict, allowed: Sequence[str], what: str, owner: str) -> str | None:
    """The error text for the first key of ``d`` not in ``allowed`` (with a did-you-mean), or None."""
    unknown = sorted(str(k) for k in d if k not in allowed)
    if not unknown:
        return None
    close = get_close_matches(unknown[0], allowed, n=1, cutoff=0.5)
    return (f"unknown {what} {short_repr(unknown[0], 40)}" + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; {owner} takes {', '.join(allowed)}")


def short_repr(x, n: int = 80) -> str:
    """A one-line, bounded repr of user input for error messages (never recurses without bound)."""
    try:
        r = repr(x) if not isinstance(x, BaseException) else str(x)
    except (RecursionError, ValueError):  # deeply nested, or an int too long to print
        r = f"<{type(x).__name__}>"
    r = r.replace("\n", "\\n").replace("\r", "\\r")
    return r if len(r) <= n else r[: n - 3] + "..."


def _check_edge_seconds(seconds: float, what: str) -> None:
    """The lower bound of a segment duration, checked where durations enter (text, dicts, ``with_seconds``), not in
    the Segment constructor: derived schedules (an Engine fault's stall windows) may cut finer."""
    if seconds < MIN_SEGMENT_SECONDS:
        raise TrajectoryError(f"{what}: a segment lasts at least MIN_SEGMENT_SECONDS = {MIN_SEGMENT_SECONDS:g} s, "
                              f"got {seconds!r}")


def _check_edge_count(n: int, what: str) -> None:
    if n > MAX_SEGMENTS:
        raise TrajectoryError(f"{what} has {n} segments: at most MAX_SEGMENTS = {MAX_SEGMENTS}")


def _fmt_seconds(s: float) -> str:
    return f"{s:g}" if float(s) == round(float(s), 6) else repr(float(s))


_MOVES = {m.value: m for m in Move if m is not Move.IDLE}
_LOOKS = {lk.value: lk for lk in Look if lk is not Look.IDLE}
MAX_TOKEN_CHARS = 64  # one token of the text form ("W+R2.5"); longer is not a segment
_TOKEN = re.compile(r"^(?P<action>[^0-9.]+?)(?P<dur>[0-9]*\.?[0-9]+)$")


def parse_segments(text: str) -> list[Segment]:
    """Parse the text form (see module docstring). Errors name the bad token, its position and the grammar."""
    if not isinstance(text, str) or not text.strip():
        raise TrajectoryError(f"empty trajectory text; expected e.g. 'W20 R20'. Grammar: {GRAMMAR}")
    tokens = text.split()
    _check_edge_count(len(tokens), "trajectory text")
    segments = []
    for i, tok in enumerate(tokens, start=1):
        m = _TOKEN.match(tok) if len(tok) <= MAX_TOKEN_CHARS else None
        if not m:
            raise TrajectoryError(
                f"bad token {short_repr(tok, 40)} (token {i} of {short_repr(text, 60)}): needs an action followed by "
                f"seconds (at most {MAX_TOKEN_CHARS} characters). Grammar: {GRAMMAR}"
            )
        action, dur = m.group("action"), float(m.group("dur"))
        if not (MIN_SEGMENT_SECONDS <= dur <= MAX_SEGMENT_SECONDS):
            raise TrajectoryError(
                f"bad token {tok!r} (token {i}): duration must be in [{MIN_SEGMENT_SECONDS:g}, "
                f"{MAX_SEGMENT_SECONDS:g}] seconds (MIN_SEGMENT_SECONDS, MAX_SEGMENT_SECONDS). Grammar: {GRAMMAR}")
        move, look = Move.IDLE, Look.IDLE
        if action != "_":
            parts = action.split("+")
            if len(parts) > 2 or any(not p for p in parts):
                raise TrajectoryError(f"bad token {tok!r} (token {i}): at most one move and one look. Grammar: {GRAMMAR}")
            for p in parts:
                if p in _MOVES and move is Move.IDLE:
                    move = _MOVES[p]
                elif p in _LOOKS and look is Look.IDLE:
                    look = _LOOKS[p]
                else:
                    hint = ""
                    if p in ("U", "P"):
                        hint = " (pitch-up is '^'; 'U' is not a token)"
                    elif p.lower() in ("w", "a", "s", "d", "l", "r") and p not in _MOVES and p not in _LOOKS:
                        hint = f" (tokens are case-sensitive: did you mean {p.upper()!r}?)"
                    raise TrajectoryError(f"bad token {tok!r} (token {i}): unknown or repeated action {p!r}{hint}. "
                                          f"Grammar: {GRAMMAR}")
        segments.append(Segment(move, look, dur))
    return segments


# --------------------------------------------------------------------------------------------------------- rotations
def rot_y(psi: float) -> np.ndarray:
    c, s = math.cos(psi), math.sin(psi)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_x(theta: float) -> np.ndarray:
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def camera_rotation(yaw: float, pitch: float) -> np.ndarray:
    """c2w rotation for yaw (right-positive) and pitch (up-positive), radians, OpenCV axes."""
    return rot_y(yaw) @ rot_x(pitch)


@dataclass(frozen=True)
class Phase:
    """A labelled span of the rollout: ``V`` initial hold, ``D1``.. departures, ``R1``.. revisits, ``H`` final hold."""

    name: str
    start_s: float
    end_s: float
    segments: tuple[int, ...]

    def frame_range(self, fps: float, n_frames: int) -> tuple[int, int]:
        return _frames_in(self.start_s, self.end_s, fps, n_frames)


def _frames_in(t0: float, t1: float, fps: float, n_frames: int) -> tuple[int, int]:
    """Frames i with t0 <= i/fps < t1 (half-open), clipped to the video. Exact for times on the frame grid."""
    a = int(math.ceil(round(t0 * fps, 9)))
    b = int(math.ceil(round(t1 * fps, 9)))
    return max(0, min(a, n_frames)), max(0, min(b, n_frames))


#: the keys of a trajectory dict (``Trajectory.to_dict`` writes all of them)
TRAJECTORY_KEYS = ("name", "text", "segments", "speed_mps", "yaw_dps", "pitch_dps")


@dataclass
class Trajectory:
    """Segments + speeds; integrates to per-frame commanded camera-to-world poses."""

    segments: list[Segment]
    speed: float = DEFAULT_SPEED_MPS
    yaw_rate: float = DEFAULT_YAW_DPS
    pitch_rate: float = DEFAULT_PITCH_DPS
    name: str | None = None
    phase_labels: Sequence[str] | None = field(default=None)

    def __post_init__(self):
        if not self.segments:
            raise TrajectoryError("a trajectory needs at least one segment")
        self.segments = [s if isinstance(s, Segment) else Segment.from_dict(s) for s in self.segments]
        for nm, v, top, const in (("speed (speed_mps)", self.speed, MAX_SPEED_MPS, "MAX_SPEED_MPS"),
                                  ("yaw_rate (yaw_dps)", self.yaw_rate, MAX_TURN_DPS, "MAX_TURN_DPS"),
                                  ("pitch_rate (pitch_dps)", self.pitch_rate, MAX_TURN_DPS, "MAX_TURN_DPS")):
            if not (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                    and math.isfinite(v) and 0 <= v <= top):
                raise TrajectoryError(f"{nm} must be a finite number in [0, {top:g}] ({const}), got {short_repr(v)}")
        total = self.duration
        if total > MAX_TRAJECTORY_SECONDS:
            raise TrajectoryError(f"trajectory lasts {total:g} s: at most MAX_TRAJECTORY_SECONDS = "
                                  f"{MAX_TRAJECTORY_SECONDS:g} s in all")

    # ---------------------------------------------------------------- text / dict
    @classmethod
    def parse(cls, text: str, **kw) -> "Trajectory":
        return cls(parse_segments(text), **kw)

    def to_text(self) -> str:
        return " ".join(s.to_text() for s in self.segments)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "text": self.to_text(),
            "segments": [s.to_dict() for s in self.segments],
            "speed_mps": self.speed,
            "yaw_dps": self.yaw_rate,
            "pitch_dps": self.pitch_rate,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Trajectory":
        if not isinstance(d, dict):
            raise TrajectoryError(f"a trajectory dict is an object, got {type(d).__name__}")
        why = unknown_key(d, TRAJECTORY_KEYS, "trajectory key", "a trajectory dict")
        if why:  # a typo ("sped_mps") would silently run the default
            raise TrajectoryError(why)
        segs = d.get("segments")
        if segs is None:
            if not isinstance(d.get("text"), str):
                raise TrajectoryError(f"trajectory dict needs 'segments' (a list) or 'text' (a string), "
                                      f"got keys {short_repr(sorted(map(str, d)))}")
            segs = parse_segments(d["text"])
        if not isinstance(segs, list) or not all(isinstance(s, (dict, Segment)) for s in segs):
            raise TrajectoryError("trajectory 'segments' must be a list of {'move', 'look', 'seconds'} objects")
        _check_edge_count(len(segs), "trajectory 'segments'")
        name = d.get("name")
        rates = {}
        for k, key, default in (("speed", "speed_mps", DEFAULT_SPEED_MPS), ("yaw_rate", "yaw_dps", DEFAULT_YAW_DPS),
                                ("pitch_rate", "pitch_dps", DEFAULT_PITCH_DPS)):
            v = d.get(key, default)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TrajectoryError(f"trajectory {key!r} must be a number, got {type(v).__name__} {short_repr(v)}")
            try:
                rates[k] = float(v)
            except OverflowError:
                raise TrajectoryError(f"trajectory {key!r} is out of range, got {short_repr(v)}") from None
        return cls([Segment.from_dict(s) if isinstance(s, dict) else s for s in segs], **rates,
                   name=name if isinstance(name, str) else None)

    def with_seconds(self, seconds: float) -> "Trajectory":
        """The same actions with every non-hold segment lasting ``seconds`` (for quick runs and tests)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.integer, np.floating)) or \
                not (math.isfinite(seconds) and MIN_SEGMENT_SECONDS <= seconds <= MAX_SEGMENT_SECONDS):
            raise TrajectoryError(f"seconds per segment must be a number in [{MIN_SEGMENT_SECONDS:g}, "
                                  f"{MAX_SEGMENT_SECONDS:g}] (MIN_SEGMENT_SECONDS, MAX_SEGMENT_SECONDS), "
                                  f"got {short_repr(seconds)}")
        segs = [s if s.is_hold else Segment(s.move, s.look, float(seconds)) for s in self.segments]
        return Trajectory(segs, self.speed, self.yaw_rate, self.pitch_rate, self.name)

    # ---------------------------------------------------------------- timing
    @property
    def duration(self) -> float:
        return float(sum(s.seconds for s in self.segments))

    def boundaries(self) -> np.ndarray:
        """Cumulative segment boundaries in seconds, length len(segments)+1, starting at 0."""
        return np.concatenate([[0.0], np.cumsum([s.seconds for s in self.segments])])

    def n_frames(self, fps: float) -> int:
        """Frames i/fps for 0 <= i/fps < duration (the end pose is reached at t = duration, one frame later)."""
        return int(math.ceil(round(self.duration * _check_fps(fps), 9)))

    def segment_frames(self, fps: float, n_frames: int | None = None) -> list[tuple[int, int]]:
        n = self.n_frames(fps) if n_frames is None else n_frames
        b = self.boundaries()
        return [_frames_in(b[i], b[i + 1], fps, n) for i in range(len(self.segments))]

    # ---------------------------------------------------------------- integration
    def _states(self) -> list[tuple[np.ndarray, float, float]]:
        """(position, yaw, pitch) at each segment boundary."""
        p, yaw, pitch = np.zeros(3), 0.0, 0.0
        out = [(p.copy(), yaw, pitch)]
        for s in self.segments:
            p, yaw, pitch = self._advance(s, p, yaw, pitch, s.seconds)
            out.append((p.copy(), yaw, pitch))
        return out

    def _rates(self, s: Segment) -> tuple[np.ndarray, float, float]:
        ys, ps = LOOK_RATE[s.look]
        v = np.asarray(MOVE_DIR[s.move]) * self.speed
        return v, ys * math.radians(self.yaw_rate), ps * math.radians(self.pitch_rate)

    def _advance(self, s: Segment, p: np.ndarray, yaw: float, pitch: float, dt: float):
        v, wy, wp = self._rates(s)
        if np.any(v):
            vx, vz = v[0], v[2]
            if wy == 0.0:
                c, sn = math.cos(yaw), math.sin(yaw)
                dx, dz = dt * (c * vx + sn * vz), dt * (-sn * vx + c * vz)
            else:
                # exact integral of R_y(yaw + wy*t) @ v over [0, dt] (walking while turning draws an arc)
                a0, a1 = yaw, yaw + wy * dt
                si = (math.sin(a1) - math.sin(a0)) / wy  # integral of cos
                ci = (math.cos(a0) - math.cos(a1)) / wy  # integral of sin
                dx, dz = si * vx + ci * vz, -ci * vx + si * vz
            p = p + np.array([dx, 0.0, dz])
        return p, yaw + wy * dt, pitch + wp * dt

    def state_at(self, t: float, _states=None) -> tuple[np.ndarray, float, float]:
        """(position, yaw, pitch) at time t; times past the end hold the final pose (a model's padding frames)."""
        states = self._states() if _states is None else _states
        b = self.boundaries()
        t = min(max(float(t), 0.0), float(b[-1]))
        k = int(np.clip(np.searchsorted(b, t, side="right") - 1, 0, len(self.segments) - 1))
        p, yaw, pitch = states[k]
        return self._advance(self.segments[k], p, yaw, pitch, t - b[k])

    def pose_at(self, t: float) -> np.ndarray:
        p, yaw, pitch = self.state_at(t)
        T = np.eye(4)
        T[:3, :3] = camera_rotation(yaw, pitch)
        T[:3, 3] = p
        return T

    def _states_at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised :meth:`state_at`: positions (n, 3), yaw (n,), pitch (n,) at ``times`` (same formulas)."""
        states = self._states()
        b = self.boundaries()
        t = np.clip(np.asarray(times, float), 0.0, float(b[-1]))
        k = np.clip(np.searchsorted(b, t, side="right") - 1, 0, len(self.segments) - 1)
        pos = np.zeros((len(t), 3))
        yaw = np.zeros(len(t))
        pitch = np.zeros(len(t))
        for j in np.unique(k):
            m = k == j
            dt = t[m] - b[j]
            p0, y0, q0 = states[j]
            v, wy, wp = self._rates(self.segments[j])
            pos[m] = p0
            if np.any(v):
                vx, vz = v[0], v[2]
                if wy == 0.0:
                    c, sn = math.cos(y0), math.sin(y0)
                    pos[m, 0] = p0[0] + dt * (c * vx + sn * vz)
                    pos[m, 2] = p0[2] + dt * (-sn * vx + c * vz)
                else:
                    a1 = y0 + wy * dt
                    si = (np.sin(a1) - math.sin(y0)) / wy
                    ci = (math.cos(y0) - np.cos(a1)) / wy
                    pos[m, 0] = p0[0] + (si * vx + ci * vz)
                    pos[m, 2] = p0[2] + (-ci * vx + si * vz)
            yaw[m] = y0 + wy * dt
            pitch[m] = q0 + wp * dt
        return pos, yaw, pitch

    def poses(self, fps: float, n_frames: int | None = None) -> np.ndarray:
        """Commanded c2w poses (F, 4, 4) float64 at t_i = i / fps (frames past the end hold the final pose)."""
        n = self.n_frames(fps) if n_frames is None else n_frames
        pos, yaw, pitch = self._states_at(np.arange(n) / _check_fps(fps))
        cy, sy, cp, sp = np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch)
        out = np.zeros((n, 4, 4))
        out[:, 3, 3] = 1.0
        # R_y(yaw) @ R_x(pitch), written out (camera_rotation)
        out[:, 0, 0], out[:, 0, 1], out[:, 0, 2] = cy, sy * sp, sy * cp
        out[:, 1, 1], out[:, 1, 2] = cp, -sp
        out[:, 2, 0], out[:, 2, 1], out[:, 2, 2] = -sy, cy * sp, cy * cp
        out[:, :3, 3] = pos
        return out

    def angles(self, fps: float, n_frames: int | None = None) -> np.ndarray:
        """Commanded (yaw, pitch) in degrees per frame, unwrapped (yaw can pass 360)."""
        n = self.n_frames(fps) if n_frames is None else n_frames
        _, yaw, pitch = self._states_at(np.arange(n) / _check_fps(fps))
        return np.degrees(np.stack([yaw, pitch], axis=1))

    # ---------------------------------------------------------------- phases
    def phases(self, tol: float = 1e-6) -> list[Phase]:
        """Initial hold V, departures D_i, revisits R_i and final hold H.

        A revisit R_k is a segment that ends back at the start pose (position and orientation within ``tol``)
        after having left it; the moving segments since the previous return (or V) form departure D_k. Moving
        segments after the last return form a departure without a revisit. Labels can be overridden with
        ``phase_labels`` (one per segment) by the named library.
        """
        segs, b, states = self.segments, self.boundaries(), self._states()
        labels: list[str | None] = [None] * len(segs)
        if self.phase_labels is not None:
            if len(self.phase_labels) != len(segs):
                raise TrajectoryError(f"phase_labels has {len(self.phase_labels)} entries for {len(segs)} segments")
            labels = list(self.phase_labels)
        else:
            i0 = 0
            while i0 < len(segs) and segs[i0].is_hold:
                labels[i0] = "V"
                i0 += 1
            i1 = len(segs)
            while i1 > i0 and segs[i1 - 1].is_hold:
                labels[i1 - 1] = "H"
                i1 -= 1
            p0, y0, q0 = states[0]
            k, pending = 1, []
            for i in range(i0, i1):
                p, y, q = states[i + 1]
                at_start = np.linalg.norm(p - p0) <= tol and abs(y - y0) <= tol and abs(q - q0) <= tol
                if at_start and pending:
                    for j in pending:
                        labels[j] = f"D{k}"
                    labels[i] = f"R{k}"
                    k, pending = k + 1, []
                else:
                    pending.append(i)
            for j in pending:
                labels[j] = f"D{k}"
        phases: list[Phase] = []
        for i, lab in enumerate(labels):
            if phases and phases[-1].name == lab:
                last = phases[-1]
                phases[-1] = Phase(lab, last.start_s, float(b[i + 1]), last.segments + (i,))
            else:
                phases.append(Phase(str(lab), float(b[i]), float(b[i + 1]), (i,)))
        return phases


def _check_fps(fps) -> float:
    """A frame rate must be a finite number > 0 (each model bounds its own range, e.g. the Engine's fps)."""
    try:
        f = float(fps)
    except (TypeError, ValueError, OverflowError):
        f = float("nan")
    if isinstance(fps, bool) or not (math.isfinite(f) and f > 0):
        raise TrajectoryError(f"fps must be a finite number > 0, got {short_repr(fps)}")
    return f


def concat(trajs: Iterable[Trajectory]) -> Trajectory:
    trajs = list(trajs)
    segs = [s for t in trajs for s in t.segments]
    t0 = trajs[0]
    return Trajectory(segs, t0.speed, t0.yaw_rate, t0.pitch_rate)
