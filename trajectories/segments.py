"""A trajectory's segments: the two control channels (move, look), the limits of what a segment may ask for, and the
text form.

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
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from difflib import get_close_matches
from enum import Enum
from typing import Sequence

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


def check_segment_count(n: int, what: str) -> None:
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
    check_segment_count(len(tokens), "trajectory text")
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
