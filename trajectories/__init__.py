"""Unified trajectories (two channels: move and look), commanded poses, phases, the named library and suites."""

from .core import (
    DEFAULT_FPS,
    DEFAULT_PITCH_DPS,
    DEFAULT_SPEED_MPS,
    DEFAULT_YAW_DPS,
    GRAMMAR,
    Look,
    Move,
    Phase,
    Segment,
    Trajectory,
    TrajectoryError,
    camera_rotation,
    parse_segments,
)
from .library import resolve

__all__ = [
    "DEFAULT_FPS", "DEFAULT_PITCH_DPS", "DEFAULT_SPEED_MPS", "DEFAULT_YAW_DPS", "GRAMMAR", "Look", "Move", "Phase",
    "Segment", "Trajectory", "TrajectoryError", "camera_rotation", "parse_segments", "resolve",
]
