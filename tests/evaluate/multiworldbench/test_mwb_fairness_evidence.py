"""Coordination fairness counts a translation response only on chain steps that measured translation (V_{c,h}, §4.1).

Engine GT lost half of a matched-navigation case (fairness 49.8, run mean 87.5 on `--limit 24`): player B strafed in
front of a distant scene, the classical estimator explained each step by rotation alone (translation exactly 0, a
0.5 deg yaw), and the strafe class scored rho = 0 against A's measured 1.09 m. A rotation-only step that turned has no
translation evidence; a still step (no rotation either: the frozen model) is evidence of no translation, so equal
non-response still scores 0.
"""

from __future__ import annotations

import numpy as np

from worldgate.evaluate.multiworldbench.navigation import STILL_STEP_DEG, fairness_score, translation_evidence
from worldgate.evaluate.multiworldbench.protocol import PARAMS


def _yaw(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])


def test_translation_evidence_per_step():
    # rows of the pose feature (gap 2: the even rows are the chain's steps)
    R = np.stack([_yaw(0.5), np.eye(3), np.eye(3), np.eye(3), _yaw(0.5), np.eye(3), _yaw(STILL_STEP_DEG / 2),
                  np.eye(3)])
    t = np.zeros((8, 3))
    t[2] = [1.0, 0, 0]  # essential model: translation direction measured
    ev = translation_evidence({"R": R, "t": t}, 2, 4)
    # turned by rotation alone: none; measured translation: yes; rotation alone but unmoved; still: yes
    assert ev.tolist() == [False, True, False, True]
    assert translation_evidence({"valid": [True] * 4}, 2, 2).tolist() == [True, True]  # no rows: not judged here


def _resp(rot_deg: float, trans_m: float, n_trans: int) -> dict:
    n = 7
    R = np.stack([_yaw(rot_deg * k / (n - 1)) for k in range(n)])
    p = np.zeros((n, 3))
    p[:, 0] = np.linspace(0, trans_m, n)
    return {"R": R, "p": p, "path": {"rot": rot_deg, "trans": trans_m}, "n_valid": 6, "n_trans": n_trans}


CASE = {"key": "^", "other": "A", "commanded": {"^": ["rot"], "A": ["trans"]},
        "pairs": {"k": [[0, 1]], "o": [[6, 5]]}}
GATE = {p: {"rot": 5.0, "trans": 0.25} for p in "AB"}


def test_unmeasured_strafe_is_left_out_not_scored_zero():
    resp = {(0, "A"): _resp(18.7, 0, 0), (1, "B"): _resp(18.7, 0, 0),
            (6, "A"): _resp(0.07, 1.09, 6), (5, "B"): _resp(2.97, 0.0, 0)}  # B's strafe read as a 3 deg yaw
    s = fairness_score(CASE, resp, GATE, PARAMS)
    assert s.value > 99.0 and set(s.detail["classes"]) == {"^"}
    assert "A/trans" in s.detail["no_evidence"][0]
    resp[(5, "B")] = _resp(0.0, 1.09, 6)  # the same strafe, measured: compared as before
    s = fairness_score(CASE, resp, GATE, PARAMS)
    assert set(s.detail["classes"]) == {"^", "A"} and s.value > 99.0
    resp[(5, "B")] = _resp(0.0, 0.3, 6)  # measured, but a third of A's: unfair
    assert fairness_score(CASE, resp, GATE, PARAMS).detail["classes"]["A"] < 0.5


def test_still_views_keep_the_equal_non_response_zero():
    still = {k: _resp(0.0, 0.0, 6) for k in ((0, "A"), (1, "B"), (6, "A"), (5, "B"))}
    s = fairness_score(CASE, still, GATE, PARAMS)
    assert s.value == 0.0 and s.detail["classes"] == {"^": 0.0, "A": 0.0}
    # no class with evidence at all: unavailable, with the reason
    blind = {**still, (6, "A"): _resp(0.0, 1.0, 0)}
    only_trans = {**CASE, "pairs": {"o": [[6, 5]]}}
    s = fairness_score(only_trans, blind, GATE, PARAMS)
    assert s.value is None and "translation evidence" in s.reason
