"""Measured judgments: the expected world ray cast from the commanded poses, and the video's pixels there."""

from __future__ import annotations

import cv2
import numpy as np

from worldgate.trajectories.multiworldbench.world import (
    EYE_M,
    Box,
    avatar_boxes,
    cast_boxes,
    cell_box,
    replay,
)

from .chroma import CLASS, CLASS_NAMES, N_MATERIALS, classify, frame_labels  # noqa: F401 (the measured path's API)
from .protocol import P_
from .record import TwoView


# ------------------------------------------------------------------------------------------------------ pixels
def eroded_mask(mask: np.ndarray) -> np.ndarray:
    if mask.sum() < 30:
        return mask
    e = cv2.erode(mask.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    return e if e.sum() >= 6 else mask


def grown_box_mask(mask: np.ndarray, grow: float, min_px: int = 3):
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    gx = max(min_px, int(round(grow * (x1 - x0 + 1))))
    gy = max(min_px, int(round(grow * (y1 - y0 + 1))))
    H, W = mask.shape
    out = np.zeros_like(mask)
    out[max(0, y0 - gy):min(H, y1 + gy + 1), max(0, x0 - gx):min(W, x1 + gx + 1)] = True
    return out


def expected_scene(tv: TwoView, viewer: str, f: int, only_cells=False):
    """Boxes of the expected world at frame f as ``viewer`` must see it: every block of the game state (shared rules)
    and the other player's avatar at its commanded pose."""
    state = replay(tv.spec["world"], tv.spec.get("interactions", []), f / tv.fps, fps=tv.fps)
    boxes = [cell_box(c, m, label=f"cell:{c[0]},{c[1]},{c[2]}") for c, m in sorted(state.items())]
    if not only_cells:
        other = "B" if viewer == "A" else "A"
        boxes += avatar_boxes(tv.poses[other][f], other)
    return state, boxes


def cast_view_now(tv: TwoView, viewer: str, f: int, boxes) -> np.ndarray:
    """Ray cast ``boxes`` from ``viewer``'s commanded pose at frame f: the index of the first box hit per pixel (-1:
    none). The only place the measured path calls :func:`cast_boxes`."""
    return cast_boxes(tv.K, tv.poses[viewer][f], tv.width, tv.height, boxes)[1]


def cast_view(tv: TwoView, viewer: str, f: int, boxes) -> np.ndarray:
    """:func:`cast_view_now`, served by the record's projection (a cached feature, see :mod:`.projection`) when one is
    attached: a rescore casts nothing."""
    proj = tv.projection
    return cast_view_now(tv, viewer, f, boxes) if proj is None else proj.cast(viewer, f, boxes)


#: the four cells beside a marked column (a block there is a misplaced one)
NEIGHBOURS = ((1, 0), (-1, 0), (0, 1), (0, -1))


def column_cells(state: dict, column) -> tuple[list, list]:
    """The cells of the marked column the game state fills, and the four at ground level beside it."""
    i, k = column
    exp = []
    while (i, len(exp), k) in state:
        exp.append((i, len(exp), k))
    return exp, [(i + di, 0, k + dk) for di, dk in NEIGHBOURS]


def probe_geometry(tv, viewer, f, boxes, cell, ground=False) -> tuple[np.ndarray, int]:
    """Where ``cell`` would be visible given everything expected in front of it (for a cell the game state leaves
    empty, only over pixels where nothing expected lies behind it), and how many pixels before that restriction.
    ``ground``: the cell's footprint on the ground. Geometry only: the same for any thresholds and any video."""
    label = f"cell:{cell[0]},{cell[1]},{cell[2]}"
    others = [b for b in boxes if b.label != label]
    if ground:
        probe = Box((cell[0] + 0.5, EYE_M - 0.01, cell[2] + 0.5), (0.5, 0.01, 0.5), (1, 0, 0), "probe")
    else:
        probe = Box((cell[0] + 0.5, EYE_M - (cell[1] + 0.5), cell[2] + 0.5), (0.5, 0.5, 0.5), (1, 0, 0), "probe")
    idx = cast_view(tv, viewer, f, others + [probe])
    mask = idx == len(others)
    full = int(mask.sum())
    if not ground and len(others) == len(boxes):
        # a cell the game state leaves empty: only where nothing expected lies behind it (2 px away from anything
        # expected, which bleeds into its edges) would a block there show
        behind = cast_view(tv, viewer, f, others)
        near = cv2.dilate((behind >= 0).astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        mask &= ~near
    return mask, full


def probe_cell(tv, viewer, f, boxes, cell, lab, P, ground=False) -> dict:
    """What the view shows where ``cell`` would be visible (:func:`probe_geometry`): the share of those pixels of
    each class. ``ground``: the cell's footprint on the ground (is the cross visible there)."""
    mask, full = probe_geometry(tv, viewer, f, boxes, cell, ground)
    area = int(mask.sum())
    if area < max(P_(P, "mwb_min_px"), 0.15 * full):
        return {"observable": False, "area": area}
    m = mask if ground else eroded_mask(mask)  # the mark's centre continues into its red arms: no edge to erode
    lv = lab[m]
    if lv.size:  # each class's share, counted at once: count / size, as np.mean of the class's mask gives it
        counts = np.bincount(lv + 1, minlength=len(CLASS_NAMES) + 1)[1:]  # -1 (no class) first
        frac = {n: float(counts[i] / lv.size) for i, n in enumerate(CLASS_NAMES)}
    else:
        frac = {n: float(np.mean(lv == i)) for i, n in enumerate(CLASS_NAMES)}
    mats = {n: frac[n] for n in CLASS_NAMES[:N_MATERIALS]}
    return {"observable": True, "area": area, "frac": frac, "any": float(sum(mats.values())),
            "material": max(mats, key=mats.get)}


def column_answers(tv: TwoView, viewer: str, f: int, lab: np.ndarray, column, op: str, P: dict) -> dict:
    """The state questions about the marked column in one view at frame f: success, count, location (and material
    for placements), each True/False, or None when the column cannot be seen there."""
    state, boxes = expected_scene(tv, viewer, f)
    i, k = column
    cells, beside = column_cells(state, column)
    exp = [state[c] for c in cells]
    n_exp = len(exp)
    pres, mats = [], []
    for j in range(n_exp + 1):
        pc = probe_cell(tv, viewer, f, boxes, (i, j, k), lab, P)
        if not pc["observable"]:
            if j < n_exp or j == 0:
                return {"evaluable": False, "why": f"cell level {j} of the marked column is not in view {viewer}"}
            break
        pres.append(pc["any"] >= P_(P, "mwb_present_frac"))
        mats.append(pc["material"])
    nb_present = []
    for cell in beside:
        pc = probe_cell(tv, viewer, f, boxes, cell, lab, P)
        if pc["observable"]:
            nb_present.append(pc["any"] >= P_(P, "mwb_present_frac"))
    count_ok = sum(pres) == n_exp and all(pres[:n_exp])
    out = {"evaluable": True, "expected": exp, "present": pres, "materials": mats, "neighbours": nb_present}
    if op == "place":
        out["success"] = bool(any(pres))
        out["count"] = bool(count_ok)
        out["location"] = bool(all(pres[:n_exp]) and n_exp > 0 and not any(nb_present))
        out["material"] = bool(n_exp > 0 and all(pres[j] and mats[j] == exp[j] for j in range(n_exp)))
    else:
        out["success"] = bool(len(pres) <= n_exp or not pres[n_exp])
        out["count"] = bool(count_ok)
        if n_exp:
            loc = all(pres[:n_exp])
        else:
            g = probe_cell(tv, viewer, f, boxes, (i, 0, k), lab, P, ground=True)
            loc = bool(g["observable"] and g["frac"]["cross"] >= P_(P, "mwb_cross_frac"))
        out["location"] = bool(loc and not any(nb_present))
    return out


QUESTIONS = {"place": ("success", "count", "location", "material"), "destroy": ("success", "count", "location")}


def majority(vals: list[bool]) -> bool:
    return sum(bool(v) for v in vals) * 2 > len(vals)


def view_verdicts(tv, feats, viewer, times_frames, column, op, P):
    """Per question: the view's majority answer over the frames; None when the column is out of view."""
    kf = feats[viewer]["keyframes"]
    per = {q: [] for q in QUESTIONS[op]}
    raw = []
    for f in times_frames:
        lab = frame_labels(kf, f, P)
        ans = column_answers(tv, viewer, f, lab, column, op, P)
        raw.append(ans)
        if not ans["evaluable"]:
            return None, ans["why"], raw
        for q in per:
            per[q].append(ans[q])
    return {q: majority(v) for q, v in per.items()}, None, raw
