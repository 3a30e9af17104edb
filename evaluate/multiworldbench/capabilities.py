"""The ten capabilities per record: pose responses (navigation) and the measured or judged checks."""

from __future__ import annotations

import math

import numpy as np

from worldgate.trajectories.multiworldbench.world import PlayerSchedule

from ..shared import estimated_trajectory, rotation_angles
from .pixels import (
    CLASS,
    N_MATERIALS,
    QUESTIONS,
    _bbox,
    _cast,
    _erode,
    _majority,
    column_answers,
    expected_scene,
    frame_labels,
    probe_cell,
    view_verdicts,
)
from .protocol import P_, POSE_PATH, UNAVAILABLE_LEARNED_POSES, VIEWS, _na, _score
from .record import TwoView, _frame
from .vlm import (
    vlm_cross_view,
    vlm_id,
    vlm_persistence,
    vlm_race,
    vlm_state,
    vlm_structure,
)


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
    return {m: _na(reason, POSE_PATH) for m in NAV}


def repeatable(tv: TwoView, player: str) -> bool:
    """The commanded reference re-integrates from the record's action schedule (the record is self-consistent)."""
    try:
        sched = PlayerSchedule.from_dict(tv.actions["players"][player])
        again = sched.poses(tv.fps, tv.n_frames)
    except (KeyError, TypeError, ValueError):
        return False
    return bool(np.allclose(again, tv.poses[player], atol=1e-6))


# ------------------------------------------------------------------------------------------------------ capabilities
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
    n0, n1 = (_frame(t, tv) for t in c["noise_s"])
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
        f0, f1 = (_frame(t, tv) for t in tr["action_s"])
        for p in VIEWS:
            r = response(chains[p], f0, f1, scales.get((p, tr[p]), P_(P, "mwb_depth_scale_m")))
            if r is None or r["n_valid"] < min_valid:
                return _nav_na(f"unavailable: fewer than {min_valid} tracked pose steps in trial {i} of player {p} "
                               "(insufficient pose evidence)")
            resp[(i, p)] = r
    out = {"control_isolation": _isolation(c, resp, gate, noise, P),
           "coordination_fairness": _fairness(c, resp, gate, P)}
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
        f0, f1 = (_frame(t, tv) for t in tr["action_s"])
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


def _isolation(c, resp, gate, noise, P):
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
            return _na(f"not eligible: player {role}'s reference repetitions are not consistent (cnATE "
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
    return _score(val, POSE_PATH, key=key, roles=per, gated=zero,
                  aggregation="100 min over (role, channel, condition) of (1 - min(1, e))")


def _fairness(c, resp, gate, P):
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
        return _na(f"not evaluable: {why}", POSE_PATH)
    return _score(100.0 * float(np.mean(list(classes.values()))), POSE_PATH, classes=classes,
                  no_evidence=no_evidence or None)


def _avatar_pixels(tv, feats, observer, actor, f, P):
    """Expected (mask of the actor's body at its commanded pose) and measured (pixels of the actor's colour)."""
    _, boxes = expected_scene(tv, observer, f)
    idx = _cast(tv, observer, f, boxes)
    body = np.zeros(idx.shape, bool)
    for bi, b in enumerate(boxes):
        if b.label == f"avatar:{actor}":
            body |= idx == bi
    kf = feats[observer]["keyframes"]
    lab = frame_labels(kf, f, P)
    return body, lab == CLASS[f"avatar:{actor}"]


def _centroid(m):
    ys, xs = np.nonzero(m)
    return np.array([xs.mean(), ys.mean()]) if len(xs) else None


def cross_view_scores(tv, feats, backend, P, judge) -> dict:
    c = tv.spec["checks"]
    actor, observer = c["actor"], c["observer"]
    f0, f1 = _frame(c["before_s"], tv), _frame(c["after_s"], tv)
    if judge is not None:
        return {"cross_view_motion": vlm_cross_view(tv, judge, feats, c, f0, f1)}
    e0, m0 = _avatar_pixels(tv, feats, observer, actor, f0, P)
    e1, m1 = _avatar_pixels(tv, feats, observer, actor, f1, P)
    if e0.sum() < P_(P, "mwb_min_px") or e1.sum() < P_(P, "mwb_min_px"):
        return {"cross_view_motion": _na(f"the actor {actor} is not in the observer's view at the check frames",
                                         "measured")}
    roi = _bbox(e0, 0.5, 4) | _bbox(e1, 0.5, 4)
    m0, m1 = m0 & roi, m1 & roi
    n0, n1, E0, E1 = int(m0.sum()), int(m1.sum()), int(e0.sum()), int(e1.sum())
    seen = n0 >= P_(P, "mwb_avatar_frac") * E0 and n1 >= P_(P, "mwb_avatar_frac") * E1
    ce0, ce1 = _centroid(e0), _centroid(e1)
    exp_d = ce1 - ce0
    moved = False
    detail = {"expected_px": E0, "expected_px_after": E1, "seen_px": n0, "seen_px_after": n1,
              "expected_shift": exp_d.tolist()}
    if seen:
        cm0, cm1 = _centroid(m0), _centroid(m1)
        got = cm1 - cm0
        detail["seen_shift"] = got.tolist()
        r_exp = math.sqrt(E1 / E0)
        if np.linalg.norm(exp_d) >= max(4.0, 0.5 * math.sqrt(E0)):
            moved = bool(np.linalg.norm(got - exp_d) <= P_(P, "mwb_motion_tol") * np.linalg.norm(exp_d))
        elif abs(math.log(r_exp)) >= math.log(1.2):
            r = math.sqrt(max(n1, 1) / max(n0, 1))
            moved = bool(abs(math.log(r / r_exp)) <= math.log(P_(P, "mwb_size_tol")))
            detail.update(size_ratio=r, expected_size_ratio=r_exp)
        else:
            return {"cross_view_motion": _na("the commanded motion barely changes the actor's image", "measured")}
    q_obs = bool(seen and moved)
    if backend != "classical":
        return {"cross_view_motion": _na("the actor half needs the classical flow (WorldMark's template); use "
                                         "--backend classical", "measured")}
    q_act, dir_, mag = actor_moves(tv, feats[actor]["flow"], c, P)
    return {"cross_view_motion": _score(100.0 * q_obs * q_act, "measured", q_observer=q_obs, q_actor=q_act,
                                        actor_direction=dir_, actor_flow=mag, **detail)}


#: WorldMark's flow templates: the image motion each key makes (channel, sign)
FLOW_TEMPLATE = {"W": ("srad", 1.0), "S": ("srad", -1.0), "A": ("sx", 1.0), "D": ("sx", -1.0), "L": ("sx", 1.0),
                 "R": ("sx", -1.0)}


def actor_moves(tv, F: dict, c: dict, P: dict):
    """The actor's own view moves as commanded: over the motion's frame pairs (i vs i+2), WorldMark's direction
    ``mean(sign ch) / mean|ch|`` of the key's flow channel reaches ``mwb_actor_dir`` with a mean flow of at least
    ``mwb_actor_min_flow`` (pixels of a 640-wide frame)."""
    ch, sign = FLOW_TEMPLATE[c["key"]]
    a, b = _frame(c["motion_s"][0], tv), _frame(c["motion_s"][1], tv)
    x = np.asarray(F[ch], float)[a:max(a + 1, b - int(F.get("gap", 2)))]
    if len(x) == 0:
        return False, 0.0, 0.0
    mag = float(np.mean(np.abs(x)))
    d = float(np.mean(sign * x) / (mag + 1e-9))
    return bool(d >= P_(P, "mwb_actor_dir") and mag >= P_(P, "mwb_actor_min_flow")), d, mag


def state_scores(tv, feats, P, judge) -> dict:
    c = tv.spec["checks"]
    frames = [_frame(t, tv) for t in c["final_s"]]
    if judge is not None:
        return {"state_synchronization": vlm_state(tv, judge, feats, c, frames)}
    verdicts, first = {}, {}
    for v in VIEWS:
        ans, why, _ = view_verdicts(tv, feats, v, frames, c["column"], c["op"], P)
        if ans is None:
            return {"state_synchronization": _na(why, "measured")}
        if c.get("before_s"):  # a two-step case: the first player's placement must show before the second acts
            mid, why, _ = view_verdicts(tv, feats, v, [_frame(t, tv) for t in c["before_s"]], c["column"], "place", P)
            first[v] = bool(mid is not None and mid["success"])
            if not first[v]:
                ans = {q: False for q in ans}
        verdicts[v] = ans
    both = {q: bool(verdicts["A"][q] and verdicts["B"][q]) for q in QUESTIONS[c["op"]]}
    return {"state_synchronization": _score(100.0 * np.mean(list(both.values())), "measured", op=c["op"],
                                            answers=verdicts, both=both, first_edit=first or None)}


def cross_visible(tv, feats, viewer, f, column, P) -> bool:
    """The marked cross and its centre target cell are visible in the view at frame f (the persistence zero rule):
    a block the state puts on the column shows there, or, on an empty column, the cross shows at its footprint."""
    lab = frame_labels(feats[viewer]["keyframes"], f, P)
    state, boxes = expected_scene(tv, viewer, f)
    i, k = column
    if (i, 0, k) in state:
        pc = probe_cell(tv, viewer, f, boxes, (i, 0, k), lab, P)
        return bool(pc["observable"] and pc["any"] >= P_(P, "mwb_present_frac"))
    g = probe_cell(tv, viewer, f, boxes, (i, 0, k), lab, P, ground=True)
    return bool(g["observable"] and g["frac"]["cross"] >= P_(P, "mwb_cross_frac"))


def persistence_scores(tv, feats, P, judge) -> dict:
    """Strict product of the operator's and the returning observer's answers (§4.2). For each of the two, the cross
    and its target cell must be visible in its before and after frames, otherwise its question is 0 (the paper's
    zero rule: the case stays in the aggregate); the run macro-averages placement and destruction."""
    c = tv.spec["checks"]
    frames = [_frame(t, tv) for t in c["final_s"]]
    if judge is not None:
        return {"state_persistence": vlm_persistence(tv, judge, feats, c, frames)}
    before = c.get("before_s") or {"operator": float(c.get("edit_s", 2.5)) - 0.25, "observer": 0.25}
    q, why = {}, {}
    for role in ("operator", "observer"):
        v = c[role]
        ans, reason, _ = view_verdicts(tv, feats, v, frames, c["column"], c["op"], P)
        if ans is None:
            q[role], why[role] = False, f"zero rule: {reason} (after frames)"
            continue
        if not cross_visible(tv, feats, v, _frame(before[role], tv), c["column"], P):
            q[role], why[role] = False, f"zero rule: the marked cross is not visible in view {v}'s before frame"
            continue
        q[role] = bool(all(ans.values()))
    return {"state_persistence": _score(100.0 * q["operator"] * q["observer"], "measured", q_operator=q["operator"],
                                        q_observer=q["observer"], op=c["op"], zero_rule=why or None)}


def race_scores(tv, feats, P, judge) -> dict:
    c = tv.spec["checks"]
    frames = [_frame(t, tv) for t in c["frames_s"]]
    if judge is not None:
        return {"race_condition_consistency": vlm_race(tv, judge, feats, c, frames)}
    intended = set(c.get("materials") or (tv.meta.get("case", {}).get("tags", {}) or {}).get("materials") or ())
    ok, per = 0, []
    for f in frames:
        vs = {}
        for v in VIEWS:
            kf = feats[v]["keyframes"]
            lab = frame_labels(kf, f, P)
            ans = column_answers(tv, v, f, lab, c["column"], "place", P)
            if not ans["evaluable"]:
                return {"race_condition_consistency": _na(ans["why"], "measured")}
            present = ans["present"]
            vs[v] = {"visible": bool(present[0]), "material": ans["materials"][0],
                     "unique": bool((len(present) < 2 or not present[1]) and not any(ans["neighbours"]))}
        r = bool(vs["A"]["visible"] and vs["B"]["visible"] and vs["A"]["material"] == vs["B"]["material"]
                 and vs["A"]["material"] in intended and vs["A"]["unique"] and vs["B"]["unique"])
        per.append({"frame": f, "consistent": r, **{v: vs[v] for v in VIEWS}})
        ok += r
    return {"race_condition_consistency": _score(100.0 * (ok >= 2), "measured", frames=per,
                                                 intended=sorted(intended))}


def _structure_view(tv, feats, viewer, f, P):
    """(gt mask, expected class per pixel, measured structure mask) of the case's structure in one view."""
    struct = {tuple(x[:3]): x[3] for x in tv.spec["world"].get("structure", [])}
    state, boxes = expected_scene(tv, viewer, f)
    idx = _cast(tv, viewer, f, boxes)
    gt = np.zeros(idx.shape, bool)
    expcls = np.full(idx.shape, -1, np.int16)
    for bi, b in enumerate(boxes):
        if b.label.startswith("cell:"):
            cell = tuple(int(v) for v in b.label[5:].split(","))
            if cell in struct and state.get(cell) == struct[cell]:
                m = idx == bi
                gt |= m
                expcls[m] = CLASS[struct[cell]]
    kf = feats[viewer]["keyframes"]
    lab = frame_labels(kf, f, P)
    roi = _bbox(gt, 0.25, 3)
    meas = (lab >= 0) & (lab < N_MATERIALS)
    if roi is not None:
        meas &= roi
    return gt, expcls, meas, lab


def structure_scores(tv, feats, P, judge) -> dict:
    """Structural consistency and spatial reasoning of a building-reveal case (§4.2). Revelation is their shared
    prerequisite (§3.3, §4.2): a view has revealed the structure when its measured silhouette overlaps the ray-cast
    one (IoU >= ``mwb_iou``) at a majority of the frames 80/100/120; a case where either view has not scores 0 on
    both. Structural: per view, majority of (IoU and material agreement); ``100 min(A, B)``. Spatial reasoning:
    ``100 min(A_pred, A_GT) / max(A_pred, A_GT)`` with A the revealed structure's area (measured structure pixels vs
    the ray cast), mean over views and frames."""
    c = tv.spec["checks"]
    frames = [_frame(t, tv) for t in c["frames_s"]]
    ok_views, revealed, ratios, per = {}, {}, [], []
    for v in VIEWS:
        goods, shows = [], []
        for f in frames:
            gt, expcls, meas, lab = _structure_view(tv, feats, v, f, P)
            if gt.sum() < P_(P, "mwb_min_struct_px"):
                per.append({"view": v, "frame": f, "evaluable": False})
                continue
            inter, union = float((gt & meas).sum()), float((gt | meas).sum())
            iou = inter / union if union else 0.0
            g = _erode(gt)
            agree = float(np.mean(lab[g] == expcls[g]))
            shows.append(iou >= P_(P, "mwb_iou"))
            goods.append(iou >= P_(P, "mwb_iou") and agree >= P_(P, "mwb_material_agree"))
            a_pred, a_gt = float((meas & _bbox(gt, 0.0, 1)).sum()) if gt.any() else 0.0, float(gt.sum())
            ratios.append(min(a_pred, a_gt) / max(a_pred, a_gt) if max(a_pred, a_gt) > 0 else 0.0)
            per.append({"view": v, "frame": f, "iou": iou, "material_agree": agree, "area_pred": a_pred,
                        "area_gt": a_gt})
        if len(goods) < 2:
            why = f"the structure is not in view {v} at enough of the check frames"
            return {"structural_consistency": _na(why, "measured"), "spatial_reasoning": _na(why, "measured")}
        ok_views[v] = _majority(goods)
        revealed[v] = _majority(shows)
    prereq = all(revealed.values())
    zero = None if prereq else "zero rule: the structure is not revealed in view " + \
        ", ".join(v for v in VIEWS if not revealed[v])
    out = {"spatial_reasoning": _score(100.0 * float(np.mean(ratios)) if prereq else 0.0, "measured", frames=per,
                                       revealed=revealed, zero_rule=zero)}
    if judge is not None:
        out["structural_consistency"] = vlm_structure(tv, judge, feats, c, frames)
    else:
        out["structural_consistency"] = _score(100.0 * min(ok_views.values()) if prereq else 0.0, "measured",
                                               views=ok_views, revealed=revealed, frames=per, zero_rule=zero)
    return out


def _landmark_evidence(tv, feats, viewer, f, P) -> dict:
    """The landmark in one evidence frame: its measured silhouette against the ray cast (IoU), the material
    agreement, and whether most of it shows."""
    gt, expcls, meas, lab = _structure_view(tv, feats, viewer, f, P)
    if gt.sum() < P_(P, "mwb_min_struct_px"):
        return {"frame": f, "view": viewer, "evaluable": False, "ok": False}
    union = gt | meas
    iou = float((gt & meas).sum()) / float(union.sum()) if union.any() else 0.0
    g = _erode(gt)
    agree = float(np.mean(lab[g] == expcls[g])) if g.any() else 0.0
    shown = float((meas & gt).sum()) / float(gt.sum())
    ok = bool(shown >= 0.5 and iou >= P_(P, "mwb_id_iou") and agree >= P_(P, "mwb_material_agree"))
    return {"frame": f, "view": viewer, "evaluable": True, "iou": iou, "material_agree": agree, "shown": shown,
            "ok": ok}


def revisit_scores(tv, feats, P, judge) -> dict:
    """Style and ID consistency of a delayed cross-player revisit (§4.3). The evidence pair: the first observer's
    frame (before it turns away) and the returning observer's frame once it has turned to the landmark, after the
    70-frame interval with the landmark outside both views. ID: the landmark shows in both evidence frames as the
    same building (each measured silhouette and material against the ray cast); missing or insufficient evidence
    fails (0, stays in the aggregate). Style: ``100 (1 - JS)`` of the two frames' 8x8x8 colour histograms, 0 when
    the landmark is missing from an evidence frame (worldgate's choice: the colour comparison is of the revisited
    region, which the return must show)."""
    from scipy.spatial.distance import jensenshannon

    c = tv.spec["checks"]
    first, ret = c["first"], c["returning"]
    f0 = _frame(c["first_s"], tv)
    f1 = _frame(c["return_s"], tv) if "return_s" in c else f0 + int(c["gap_frames"])
    f1 = min(f1, tv.n_frames - 1)
    kf0, kf1 = feats[first]["keyframes"], feats[ret]["keyframes"]
    im0, im1 = kf0["frames"][list(kf0["index"]).index(f0)], kf1["frames"][list(kf1["index"]).index(f1)]

    def hist(im):
        q = (im // 32).astype(np.int64)
        h = np.bincount((q[..., 0] * 64 + q[..., 1] * 8 + q[..., 2]).ravel(), minlength=512).astype(float)
        return h / h.sum()
    js = float(jensenshannon(hist(im0), hist(im1), base=2))
    ev = [_landmark_evidence(tv, feats, first, f0, P), _landmark_evidence(tv, feats, ret, f1, P)]
    present = all(e["evaluable"] and e["shown"] >= 0.3 and e["material_agree"] >= P_(P, "mwb_material_agree")
                  for e in ev)
    zero = None if present else "zero rule: the landmark is missing from an evidence frame"
    out = {"style_consistency": _score(100.0 * (1.0 - js) if present else 0.0, "measured", js_distance=js,
                                       frames=[f0, f1], zero_rule=zero)}
    if judge is not None:
        out["id_consistency"] = vlm_id(tv, judge, c, im0, im1)
        return out
    same = bool(all(e["ok"] for e in ev))
    out["id_consistency"] = _score(100.0 * same, "measured", evidence=ev, frames=[f0, f1],
                                   zero_rule=None if same else "missing or insufficient identity evidence: fails")
    return out
