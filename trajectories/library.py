"""Named trajectories of the benchmarks. Names resolve by name, never by parsing their letters.

- ``worldmark:1`` .. ``worldmark:15`` — WorldMark's action protocol (arena_inputs/action_protocol.txt): each key is
  held for :data:`WORLDMARK_SECONDS_PER_KEY` seconds; keys W/S/A/D are moves, L/R are yaws.
- ``LR``, ``LRLR``, ``LRLRLR``, ``LRUD`` — WorldMemBench rotations (``U``/``D`` here are pitch up/down: this is why
  these are names and not text), and ``FRBL`` — its translation square Forward-Right-Backward-Left. Each starts with
  an initial hold V and ends with a final hold H; also reachable as ``worldmembench:LR`` etc.
"""

from __future__ import annotations

from difflib import get_close_matches

from .core import Look, Move, Segment, Trajectory, TrajectoryError, parse_segments, short_repr

WORLDMARK_SECONDS_PER_KEY = 20.0
WORLDMARK_FPS = 16.0

#: action id -> key sequence, as in WorldMark's arena_inputs/action_protocol.txt
WORLDMARK_PROTOCOL: dict[int, str] = {
    1: "W", 2: "S", 3: "A", 4: "D", 5: "R", 6: "WS", 7: "LR", 8: "AD", 9: "WR", 10: "SL",
    11: "WSW", 12: "LRL", 13: "WRW", 14: "ADA", 15: "WRS",
}
_WM_KEYS = {
    "W": (Move.FORWARD, Look.IDLE), "S": (Move.BACK, Look.IDLE), "A": (Move.STRAFE_LEFT, Look.IDLE),
    "D": (Move.STRAFE_RIGHT, Look.IDLE), "L": (Move.IDLE, Look.YAW_LEFT), "R": (Move.IDLE, Look.YAW_RIGHT),
}

# WorldMemBench rollout shape (V, D_i, R_i, H); amplitudes chosen so every departure is >= 30 degrees
WMB_HOLD_V = 2.0
WMB_HOLD_H = 1.0
WMB_YAW_DEG = 90.0
WMB_PITCH_DEG = 45.0
WMB_SIDE_SECONDS = 2.0
_WMB_LOOKS = {"L": Look.YAW_LEFT, "R": Look.YAW_RIGHT, "U": Look.PITCH_UP, "D": Look.PITCH_DOWN}


def worldmark(action_id: int, seconds_per_key: float = WORLDMARK_SECONDS_PER_KEY) -> Trajectory:
    try:
        keys = WORLDMARK_PROTOCOL[int(action_id)]
    except (KeyError, ValueError, TypeError):
        raise TrajectoryError(f"unknown WorldMark action id {short_repr(action_id, 40)}: valid ids are 1..15") from None
    segs = [Segment(*_WM_KEYS[k], seconds_per_key) for k in keys]
    return Trajectory(segs, name=f"worldmark:{int(action_id)}")


def worldmembench(name: str, yaw_rate: float = 25.0, pitch_rate: float = 25.0) -> Trajectory:
    name = name.upper()
    if name == "FRBL":
        sq = [Move.FORWARD, Move.STRAFE_RIGHT, Move.BACK, Move.STRAFE_LEFT]
        segs = [Segment(m, Look.IDLE, WMB_SIDE_SECONDS) for m in sq]
    elif name in ("LR", "LRLR", "LRLRLR", "LRUD"):
        segs = []
        for ch in name:
            lk = _WMB_LOOKS[ch]
            deg, rate = (WMB_PITCH_DEG, pitch_rate) if ch in "UD" else (WMB_YAW_DEG, yaw_rate)
            segs.append(Segment(Move.IDLE, lk, deg / rate))
    else:
        raise TrajectoryError(f"unknown WorldMemBench trajectory {short_repr(name, 40)}: expected one of "
                              f"{WORLDMEMBENCH_NAMES}")
    segs = [Segment(seconds=WMB_HOLD_V)] + segs + [Segment(seconds=WMB_HOLD_H)]
    return Trajectory(segs, yaw_rate=yaw_rate, pitch_rate=pitch_rate, name=name)


WORLDMEMBENCH_NAMES = ("LR", "LRLR", "LRLRLR", "LRUD", "FRBL")


def names() -> list[str]:
    return [f"worldmark:{i}" for i in WORLDMARK_PROTOCOL] + list(WORLDMEMBENCH_NAMES)


def describe() -> list[tuple[str, str]]:
    out = []
    for n in names():
        out.append((n, get(n).to_text()))
    return out


def get(name: str) -> Trajectory:
    """A named trajectory (``worldmark:6``, ``LRUD``, ``worldmembench:FRBL``)."""
    key = name.strip()
    low = key.lower()
    if low.startswith("worldmark:"):
        return worldmark(key.split(":", 1)[1])
    if low.startswith("worldmembench:"):
        return worldmembench(key.split(":", 1)[1])
    if key.upper() in WORLDMEMBENCH_NAMES:
        return worldmembench(key)
    raise KeyError(key)


def resolve(spec) -> Trajectory:
    """A Trajectory from a name, a text form, a dict (``{"name"|"text"|"segments": ...}``) or a Trajectory."""
    if isinstance(spec, Trajectory):
        return spec
    if isinstance(spec, dict):
        if spec.get("name") and not spec.get("segments") and not spec.get("text"):
            if not isinstance(spec["name"], str):  # a name is a string (a nested dict here would recurse)
                raise TrajectoryError(f"trajectory 'name' must be a string such as 'worldmark:6' or 'LRUD', got "
                                      f"{type(spec['name']).__name__}")
            return resolve(spec["name"])
        return Trajectory.from_dict(spec)
    if isinstance(spec, str):
        try:
            return get(spec)
        except KeyError:
            pass
        try:
            return Trajectory(parse_segments(spec))
        except TrajectoryError as e:
            close = get_close_matches(spec.strip(), names(), n=3) if len(spec) <= 64 else []
            hint = f" Did you mean the named trajectory {' or '.join(map(repr, close))}?" if close else ""
            raise TrajectoryError(f"{e}.{hint} Named trajectories: {', '.join(names())}") from None
    raise TrajectoryError(f"cannot make a trajectory from {type(spec).__name__}: give a name, text or dict")
