"""The keyboard + mouse action rows of the Matrix-Game family (Matrix-Game 1.0 and 2.0, ForgeWM, which copies
Matrix-Game 2.0's action module): one row per frame, a 0/1 column per held key and a mouse row ``[pitch, yaw]`` of a
constant magnitude whose sign is the look's direction (+pitch looks up, +yaw turns right). Each adapter states its
own key order, magnitude and which row a command lands in (its docstring cites the model's code)."""

from __future__ import annotations

import math

import numpy as np

from worldgate.trajectories.core import Look, Move

#: the move keys every one of these models has, in their common [W, S, A, D] column order
WSAD = (Move.FORWARD, Move.BACK, Move.STRAFE_LEFT, Move.STRAFE_RIGHT)
#: mouse column and sign of each look ([pitch, yaw])
MOUSE = {Look.PITCH_UP: (0, 1.0), Look.PITCH_DOWN: (0, -1.0), Look.YAW_RIGHT: (1, 1.0), Look.YAW_LEFT: (1, -1.0)}


def key_mouse_rows(traj, fps: float, n_rows: int, n_keys: int, cam_value: float, lag: int = 0,
                   key_order=WSAD) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """(keyboard (n_rows, n_keys), mouse (n_rows, 2), each segment's rows [a, b)): the command at time t fills row
    ``ceil(t * fps) + lag``; unused keys and rows stay 0 (idle)."""
    kb = np.zeros((n_rows, n_keys), np.float32)
    ms = np.zeros((n_rows, 2), np.float32)
    bounds = traj.boundaries()
    rows = []
    for s, t0, t1 in zip(traj.segments, bounds[:-1], bounds[1:]):
        a = lag + int(math.ceil(round(t0 * fps, 9)))  # rows of the commands at t in [t0, t1)
        b = lag + int(math.ceil(round(t1 * fps, 9)))
        rows.append((a, b))
        if s.move is not Move.IDLE:
            kb[a:b, key_order.index(s.move)] = 1.0
        if s.look in MOUSE:
            col, sign = MOUSE[s.look]
            ms[a:b, col] = sign * cam_value
    return kb, ms, rows
