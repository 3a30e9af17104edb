"""Unified trajectories: a list of segments (:mod:`.segments`: two control channels and a text form) integrated to
commanded poses.

Poses are **camera-to-world** 4x4 matrices in OpenCV axes (+X right, +Y down, +Z forward); frame 0 is the identity.
The camera state is (position, yaw psi, pitch theta) with rotation ``R = R_y(psi) @ R_x(theta)``: positive yaw turns
the view to the right (forward -> +X), positive pitch tilts it up (forward -> -Y). Moves act in the horizontal
(yaw-only) frame, as in first-person games, so pitching never makes ``W`` climb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .segments import (  # noqa: F401  (Look, Move: the controls, imported from here by every caller)
                       DEFAULT_PITCH_DPS, DEFAULT_SPEED_MPS, DEFAULT_YAW_DPS, LOOK_RATE, MAX_SEGMENT_SECONDS,
                       MAX_SPEED_MPS, MAX_TRAJECTORY_SECONDS, MAX_TURN_DPS, MIN_SEGMENT_SECONDS, MOVE_DIR, Look, Move,
                       Segment, TrajectoryError, check_segment_count, parse_segments, short_repr, unknown_key)


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
        check_segment_count(len(segs), "trajectory 'segments'")
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
