"""Matched navigation (§4.1): control isolation and coordination fairness of a record, from each view's classical
pose chain (start-relative responses over the case's idle and action intervals, scaled to metres per view)."""

from __future__ import annotations

import numpy as np

from worldgate.trajectories.multiworldbench.world import PlayerSchedule

from ..shared import estimated_trajectory, rotation_angles
from .protocol import P_, POSE_PATH, UNAVAILABLE_LEARNED_POSES, VIEWS, path_na, path_score
from .record import TwoView, frame_at

# ------------------------------------------------------------------------------------------------------ poses
NAV = ("control_isolation", "coordination_fairness")
CHANNELS = ("trans", "rot")


def pose_chain(P_feat: dict) -> dict:
    """The chained classical estimate of one view (c2w relative to its first frame, at frames 0, gap, 2 gap...) and
    which chain steps the estimator tracked."""
    est, frames = estimated_trajectory({"poses": P_feat})
    gap = int(P_feat.get("gap", 2))
    valid = np.asarray(P_feat["valid"], bool)[::gap][: len(frames) - 1]
    return {"est": est, "frames": np.asarray(frames), "valid": valid, "gap": gap,
            "trans_evidence": translation_evidence(P_feat, gap, len(frames) - 1) & valid}


#: a chain step turning by less than this (degrees) is still: its image shows no motion, so zero translation too
STILL_STEP_DEG = 0.05


def translation_evidence(P_feat: dict, gap: int, n: int) -> np.ndarray:
    """Per chain step, whether it measured translation: a step the estimator explained by rotation alone (its
    translation exactly 0, the rotation-only model) while the image turned has no translation evidence (the parallax
    was below what the tracks resolve: a strafe in front of a distant scene reads as a small yaw); a still step (no
    rotation either) is evidence of no translation. The paper's known-map PnP has metric points and no such case;
    fairness counts a translation response only on steps with evidence (V_{c,h}, §4.1)."""
    if "t" not in P_feat or "R" not in P_feat:
        return np.ones(n, bool)
    t = np.asarray(P_feat["t"], float)[::gap][:n].reshape(-1, 3)
    R = np.asarray(P_feat["R"], float)[::gap][:n].reshape(-1, 3, 3)
    turned = np.degrees(rotation_angles(R)) > STILL_STEP_DEG
    rot_only = np.linalg.norm(t, axis=1) == 0.0
    out = np.ones(n, bool)
    out[: len(t)] = ~(rot_only & turned)
    return out


def response(ch: dict, f0: int, f1: int, scale: float) -> dict | None:
    """A view's start-relative response over the frames [f0, f1] (§4.1 response features): rotations R_k and map
    positions p_k relative to the pose at f0 (translation in metres: the chain's units times ``scale``), the rotation
    path (accumulated angle, degrees) and the planar path length, and how many chain steps were tracked."""
    fr = ch["frames"]
    sel = np.nonzero((fr >= f0) & (fr <= f1))[0]
    if len(sel) < 2:
        return None
    E = ch["est"][sel]
    rel = np.einsum("ij,njk->nik", np.linalg.inv(E[0]), E)
    R, p = rel[:, :3, :3], scale * rel[:, :3, 3]
    steps = np.einsum("nji,njk->nik", R[:-1], R[1:])
    rot_path = float(np.degrees(rotation_angles(steps)).sum())
    planar = p[:, [0, 2]]
    trans_path = float(np.linalg.norm(np.diff(planar, axis=0), axis=1).sum())
    n_valid = int(ch["valid"][sel[:-1]].sum()) if sel[-1] <= len(ch["valid"]) else 0
    n_trans = int(ch["trans_evidence"][sel[:-1]].sum()) if sel[-1] <= len(ch["trans_evidence"]) else 0
    return {"R": R, "p": p, "path": {"rot": rot_path, "trans": trans_path}, "n_valid": n_valid, "n_trans": n_trans}


def _dist(h: str, a: dict, b: dict) -> float:
    """Mean over the common action offsets of d_h: Euclidean planar position distance (metres; the paper's
    translation features are planar) or geodesic angle (degrees)."""
    n = min(len(a["R"]), len(b["R"]))
    if h == "rot":
        return float(np.degrees(rotation_angles(np.einsum("nji,njk->nik", a["R"][:n], b["R"][:n]))).mean())
    return float(np.linalg.norm(a["p"][:n, [0, 2]] - b["p"][:n, [0, 2]], axis=1).mean())  # planar (map X, Z)


def _floor(h: str, P: dict) -> float:
    return P_(P, "mwb_rot_floor_deg") if h == "rot" else P_(P, "mwb_trans_floor_m")


def _response_floor(h: str, P: dict) -> float:
    return P_(P, "mwb_response_floor_deg") if h == "rot" else P_(P, "mwb_response_floor_m")


def _nav_na(reason: str) -> dict:
    return {m: path_na(reason, POSE_PATH) for m in NAV}


def repeatable(tv: TwoView, player: str) -> bool:
    """The commanded reference re-integrates from the record's action schedule (the record is self-consistent)."""
    try:
        sched = PlayerSchedule.from_dict(tv.actions["players"][player])
        again = sched.poses(tv.fps, tv.n_frames)
    except (KeyError, TypeError, ValueError):
        return False
    return bool(np.allclose(again, tv.poses[player], atol=1e-6))


def navigation_scores(tv, feats, backend, P) -> dict:
    """Control isolation and coordination fairness of one matched-navigation case (§4.1), both roles.

    Isolation, per target role r, channel h and partner condition c: ``e = 1/2 sum_j mean_k d_h(P_j^k, Q_c^k) /
    max(L_h(P_j), eps_h)`` with P_1, P_2 the role's reference repetitions (partner idle) and Q_c the treatment
    (the uncommanded channel divides by eps_h alone); case score ``100 min_{r,h,c} (1 - min(1, e))``. A commanded
    reference response at or below max(noise, response floor) scores 0; the references' cnATE must reach
    ``mwb_cnate_min`` (else unavailable); fewer than 3 tracked steps in the idle interval or in an action interval:
    unavailable (insufficient pose evidence)."""
    c = tv.spec["checks"]
    if backend != "classical":
        return _nav_na(UNAVAILABLE_LEARNED_POSES)
    if "trials" not in c:
        return _nav_na("not evaluable: the record predates the reference repetitions (regenerate the case)")
    for p in VIEWS:
        if not repeatable(tv, p):
            return _nav_na(f"not evaluable: player {p}'s commanded poses do not re-integrate from its action schedule")
    chains = {p: pose_chain(feats[p]["poses"]) for p in VIEWS}
    keys = {(p, tr[p]) for tr in c["trials"] for p in VIEWS if tr[p]}
    scales = {(p, k): view_scale(tv, c, chains[p], p, k, P) for p, k in sorted(keys)}
    n0, n1 = (frame_at(t, tv) for t in c["noise_s"])
    min_valid = int(P_(P, "mwb_min_valid_steps"))
    noise, gate = {}, {}
    for p in VIEWS:
        r = response(chains[p], n0, n1, scales.get((p, c["key"]), P_(P, "mwb_depth_scale_m")))
        if r is None or r["n_valid"] < min_valid:
            return _nav_na(f"unavailable: fewer than {min_valid} tracked pose steps in player {p}'s idle interval "
                           "(noise baseline)")
        noise[p] = r["path"]
        gate[p] = {h: max(noise[p][h], _response_floor(h, P)) for h in CHANNELS}
    resp = {}
    for i, tr in enumerate(c["trials"]):
        f0, f1 = (frame_at(t, tv) for t in tr["action_s"])
        for p in VIEWS:
            r = response(chains[p], f0, f1, scales.get((p, tr[p]), P_(P, "mwb_depth_scale_m")))
            if r is None or r["n_valid"] < min_valid:
                return _nav_na(f"unavailable: fewer than {min_valid} tracked pose steps in trial {i} of player {p} "
                               "(insufficient pose evidence)")
            resp[(i, p)] = r
    out = {"control_isolation": isolation_score(c, resp, gate, noise, P),
           "coordination_fairness": fairness_score(c, resp, gate, P)}
    for m in NAV:
        if out[m].detail is not None:
            out[m].detail["scale_m"] = {f"{p}/{k}": v for (p, k), v in scales.items()}
    return out


def view_scale(tv, c: dict, ch: dict, p: str, key: str, P: dict) -> float:
    """Metres per unit of a view's monocular chain for one action class: least squares of the chain's planar
    start-relative positions against the commanded ones over the trials where the view performs ``key`` (those with
    the partner idle when there are any). A monocular chain has no metric scale (the paper's PnP against the map has
    one), and its parallax-based step length depends on the scene depth and the motion; a key without commanded
    translation, or without estimated translation, takes ``mwb_depth_scale_m``."""
    if "trans" not in c["commanded"].get(key, ()):
        return P_(P, "mwb_depth_scale_m")
    own = [t for t in c["trials"] if t[p] == key]
    quiet = [t for t in own if not t["B" if p == "A" else "A"]]
    num = den = 0.0
    C = tv.poses[p]
    for tr in quiet or own:
        f0, f1 = (frame_at(t, tv) for t in tr["action_s"])
        r = response(ch, f0, f1, 1.0)
        if r is None:
            continue
        fr = ch["frames"][(ch["frames"] >= f0) & (ch["frames"] <= f1)]
        rel = np.einsum("ij,njk->nik", np.linalg.inv(C[f0]), C[fr])[:, :3, 3]
        e, g = r["p"][:, [0, 2]], rel[:, [0, 2]]
        num += float((e * g).sum())
        den += float((e * e).sum())
    if den <= 1e-12 or num <= 0:
        return P_(P, "mwb_depth_scale_m")
    return num / den


def isolation_score(c, resp, gate, noise, P):
    """Control isolation of one case from its trials' responses ``resp[(trial, player)]``, the motion gate and the
    idle noise (the formula in :func:`navigation_scores`)."""
    key, cmd = c["key"], c["commanded"]
    commanded = set(cmd[key])
    cnmin = P_(P, "mwb_cnate_min")
    per, worst, zero = {}, 1.0, []
    for role, tri in c["roles"].items():
        refs = [resp[(j, role)] for j in tri["ref"]]
        cn = {}
        for h in CHANNELS:
            den = max(refs[0]["path"][h], _floor(h, P)) if h in commanded else _floor(h, P)
            cn[h] = 1.0 - min(1.0, _dist(h, refs[0], refs[1]) / den)
        if min(cn.values()) < cnmin:
            return path_na(f"not eligible: player {role}'s reference repetitions are not consistent (cnATE "
                       f"{min(cn.values()):.2f} < {cnmin:g})", POSE_PATH)
        row = {"cnATE": cn, "reference_path": [r["path"] for r in refs], "noise": noise[role], "e": {}}
        for h in commanded:  # the response gate: a commanded reference response must clear max(noise, floor)
            for r in refs:
                if r["path"][h] <= gate[role][h]:
                    zero.append(f"{role}/{h}: reference response {r['path'][h]:.3g} <= max(noise, floor) "
                                f"{gate[role][h]:.3g}")
        if not commanded:  # the idle schedule: the only commanded motion is the partner's ("different" trial)
            o = c["other"]
            partner = "B" if role == "A" else "A"
            q = resp[(tri["different"], partner)]
            for h in cmd[o]:
                if q["path"][h] <= gate[partner][h]:
                    zero.append(f"{role}/idle: partner {partner}'s response to {o} {q['path'][h]:.3g} <= "
                                f"max(noise, floor) {gate[partner][h]:.3g}")
        for cond in ("idle", "same", "different"):
            q = resp[(tri[cond], role)]
            for h in CHANNELS:
                e = 0.5 * sum(_dist(h, r, q) / (max(r["path"][h], _floor(h, P)) if h in commanded else _floor(h, P))
                              for r in refs)
                row["e"][f"{h}/{cond}"] = e
                worst = min(worst, 1.0 - min(1.0, e))
        per[role] = row
    val = 0.0 if zero else 100.0 * worst
    return path_score(val, POSE_PATH, key=key, roles=per, gated=zero,
                  aggregation="100 min over (role, channel, condition) of (1 - min(1, e))")


def fairness_score(c, resp, gate, P):
    """Coordination fairness of one case: per action class, the worst paired (A, B) response agreement over the
    commanded channels with evidence (V_{c,h}); the mean over classes."""
    cmd = c["commanded"]
    min_valid = int(P_(P, "mwb_min_valid_steps"))
    classes, no_evidence = {}, []
    for name, pairs in c["pairs"].items():
        k = c["key"] if name == "k" else c["other"]
        H = cmd[k]
        if not H:  # an idle class commands no channel: inactive channels do not inflate the score
            continue
        rho = []
        for ta, tb in pairs:
            a, b = resp[(ta, "A")], resp[(tb, "B")]
            for h in H:
                if h == "trans" and min(a["n_trans"], b["n_trans"]) < min_valid:  # V_{c,h} = 0: no evidence
                    no_evidence.append(f"{k}/trans: trials {ta} (A) and {tb} (B) have {a['n_trans']} and "
                                       f"{b['n_trans']} steps with translation evidence (< {min_valid})")
                    continue
                la, lb = a["path"][h], b["path"][h]
                if la <= gate["A"][h] and lb <= gate["B"][h]:
                    rho.append(0.0)  # equal non-response scores 0
                    continue
                C = min(1.0, (_dist(h, a, b) + abs(la - lb)) / max(0.5 * (la + lb), _floor(h, P)))
                rho.append(1.0 - C)
        if rho:
            classes[k] = min(rho)
    if not classes:
        why = "; ".join(no_evidence) if no_evidence else "no action class of the case commands a channel"
        return path_na(f"not evaluable: {why}", POSE_PATH)
    return path_score(100.0 * float(np.mean(list(classes.values()))), POSE_PATH, classes=classes,
                  no_evidence=no_evidence or None)
