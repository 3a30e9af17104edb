"""WorldMark's global memory on the classical backend: the protocol's quantity (co-visible reprojection distance over
median depth, vg:33-94) from classical two-view geometry (``classical_geometry.GeometryExtractor``), so WorldMark's
tau (0.05, fm:90) applies unchanged.

Per video, e is the median over every match of every co-visible key-frame pair (vg:90-92 pools all pairs' points).
A pair the commanded camera keeps co-visible that cannot be matched or fitted is a failure and stays in the median:
it counts as ``global_unmatched_e`` (1.0: a point one median depth away from where it should be) with the weight of
a typical matched pair (the median match count of the video's matched pairs). A video that dissolves into a
featureless blur for most of its length therefore scores ~5, not ~99; one where no pair matches scores
100 / (1 + 1.0 / 0.05) = 4.8. Pairs the commanded camera turns away from each other are left out (vg:81, 85 skips
pairs without co-visible points).
"""

from __future__ import annotations

import numpy as np

from ..score import Score, na
from .params import PARAMS


def _weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(x, kind="stable")
    cw = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cw, 0.5 * cw[-1])])


def global_error(G: dict, P=PARAMS) -> tuple[float | None, dict]:
    """(the video's e, detail) from the geometry feature; e is None when no key-frame pair is co-visible."""
    failed = np.asarray(G.get("failed", np.zeros(0, bool)), bool)
    covis = np.asarray(G.get("covisible", np.ones(len(failed), bool)), bool)
    e = np.asarray(G.get("e", np.zeros(0)), float)
    pair = np.asarray(G.get("e_pair", np.zeros(0, int)), int)
    use = covis[pair] if len(pair) else np.zeros(0, bool)
    e = e[use]
    pair = pair[use]
    n_fail = int((failed & covis).sum())
    n_ok = int((~failed & covis).sum())
    detail = {"pairs": n_ok + n_fail, "unmatched_pairs": n_fail, "not_covisible": int((~covis).sum()),
              "matches": int(len(e))}
    if n_ok + n_fail == 0:
        return None, detail
    fail_e = float(P["global_unmatched_e"])
    if len(e) == 0:
        return fail_e, detail | {"median_err": fail_e}
    per_pair = np.bincount(pair)
    typical = float(np.median(per_pair[per_pair > 0]))
    x = np.concatenate([e, np.full(n_fail, fail_e)])
    w = np.concatenate([np.ones(len(e)), np.full(n_fail, typical)])
    med = _weighted_median(x, w)
    return med, detail | {"median_err": med}


def global_memory(feat, rec, backend: str = "classical", P=PARAMS) -> Score:
    """One video's global memory, 100 / (1 + e / tau) (fm:90 with one video's e)."""
    e, detail = global_error(feat["geometry"], P)
    if e is None:
        return na("no key-frame pair the commanded camera keeps co-visible")
    return Score(100.0 / (1.0 + e / P["global_tau"]), detail=detail)


def vggt_global_memory(G: dict, tau: float) -> Score:
    """One video's global memory from the ``vggt_global`` feature: 100 / (1 + e / tau) (fm:90 with one video's e),
    the detail named as the classical global memory's (``median_err``, ``pairs``)."""
    e = float(np.asarray(G.get("global_median_e", np.nan)).reshape(-1)[0]) if "global_median_e" in G else np.nan
    detail = {"frames": int(np.size(G.get("frame", ()))), "pairs": int(np.asarray(G.get("pairs", 0))),
              "points": int(np.asarray(G.get("points", 0))),
              "covis_ratio": float(np.asarray(G.get("covis_ratio", np.nan)))}
    if not np.isfinite(e):
        return na("VGGT-Omega: no frame pair has 5 co-visible points (WorldMark's no_covis, vg:88-89)")
    detail |= {"median_err": e, "mean_err": float(np.asarray(G.get("global_mean_e", np.nan)))}
    return Score(100.0 / (1.0 + e / tau), detail=detail)
