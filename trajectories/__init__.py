"""Unified trajectories (two channels: move and look), commanded poses, phases, the named library and suites."""

from .core import Phase, Trajectory, camera_rotation
from .segments import (
    DEFAULT_FPS,
    DEFAULT_PITCH_DPS,
    DEFAULT_SPEED_MPS,
    DEFAULT_YAW_DPS,
    GRAMMAR,
    Look,
    Move,
    Segment,
    TrajectoryError,
    parse_segments,
)
from .library import resolve

__all__ = [
    "DEFAULT_FPS", "DEFAULT_PITCH_DPS", "DEFAULT_SPEED_MPS", "DEFAULT_YAW_DPS", "GRAMMAR", "Look", "Move", "Phase",
    "Segment", "Trajectory", "TrajectoryError", "camera_rotation", "parse_segments", "resolve",
]
