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
def pose_track(P_feat: dict, cmd: np.ndarray) -> dict:
    """Chained classical estimate vs the commanded poses, both relative to the first frame (camera axes)."""
    est, frames = estimated_trajectory({"poses": P_feat})
    keep = frames < len(cmd)
    est, frames = est[keep], frames[keep]
    rel = np.einsum("ij,njk->nik", np.linalg.inv(cmd[0]), cmd[frames])
    valid = np.asarray(P_feat["valid"], bool)[:: int(P_feat.get("gap", 2))]
    return {"est": est, "frames": frames, "cmd": rel, "valid_frac": float(valid.mean()) if len(valid) else 0.0}


def _path_deg(R: np.ndarray) -> float:
    if len(R) < 2:
        return 0.0
    return float(np.degrees(rotation_angles(np.einsum("nji,njk->nik", R[:-1], R[1:]))).sum())


def _path_m(p: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum()) if len(p) > 1 else 0.0


def _scale(est_p: np.ndarray, cmd_p: np.ndarray, P: dict) -> float:
    """Monocular estimates have no scale: fitted by least squares to the commanded path when it moves, else the
    arena's typical scene depth (the classical chain steps by parallax/focal, i.e. in units of scene depth)."""
    if _path_m(cmd_p) >= P_(P, "mwb_trans_floor_m"):
        den = float((est_p * est_p).sum())
        return max(0.0, float((est_p * cmd_p).sum()) / den) if den > 1e-12 else 0.0
    return P_(P, "mwb_depth_scale_m")


def channel_errors(tr: dict, P: dict) -> dict:
    Rc, Re = tr["cmd"][:, :3, :3], tr["est"][:, :3, :3]
    rot_err = np.degrees(rotation_angles(np.einsum("nji,njk->nik", Rc, Re)))
    rot_path = _path_deg(Rc)
    pc, pe = tr["cmd"][:, :3, 3], tr["est"][:, :3, 3]
    s = _scale(pe, pc, P)
    L = _path_m(pc)
    e_rot = float(rot_err.mean()) / max(rot_path, P_(P, "mwb_rot_floor_deg"))
    e_trans = float(np.linalg.norm(s * pe - pc, axis=1).mean()) / max(L, P_(P, "mwb_trans_floor_m"))
    return {"rot": e_rot, "trans": e_trans, "rot_path_deg": rot_path, "path_m": L, "scale": s}


def repeatable(tv: TwoView, player: str) -> bool:
    """The commanded reference re-integrates from the record's action schedule (the repeatability check)."""
    try:
        sched = PlayerSchedule.from_dict(tv.actions["players"][player])
        again = sched.poses(tv.fps, tv.n_frames)
    except (KeyError, TypeError, ValueError):
        return False
    return bool(np.allclose(again, tv.poses[player], atol=1e-6))


# ------------------------------------------------------------------------------------------------------ capabilities
def navigation_scores(tv, feats, backend, P) -> dict:
    c = tv.spec["checks"]
    if backend != "classical":
        return {m: _na(UNAVAILABLE_LEARNED_POSES, POSE_PATH) for m in ("control_isolation", "coordination_fairness")}
    target, cond = c["target"], c["condition"]
    tracks, errs = {}, {}
    for p in VIEWS:
        if not repeatable(tv, p):
            return {m: _na(f"not eligible: player {p}'s commanded poses do not re-integrate from its action schedule "
                           "(repeatability check)", POSE_PATH) for m in ("control_isolation", "coordination_fairness")}
        tracks[p] = pose_track(feats[p]["poses"], tv.poses[p])
        errs[p] = channel_errors(tracks[p], P)
    out = {}
    vf = tracks[target]["valid_frac"]
    if vf < P_(P, "mwb_pose_valid_frac"):
        out["control_isolation"] = _na(f"not eligible: pose estimate of player {target} tracked only {vf:.0%} of frame "
                                       "pairs", POSE_PATH)
    else:
        e = errs[target]
        val = 100.0 * min(1.0 - min(1.0, e["rot"]), 1.0 - min(1.0, e["trans"]))
        out["control_isolation"] = _score(val, POSE_PATH, role=target, condition=cond, e_rot=e["rot"],
                                          e_trans=e["trans"], key=c["key"])
    if cond != "same":
        out["coordination_fairness"] = _na("not applicable: fairness compares two roles given the same command "
                                           "(partner condition 'same')", POSE_PATH)
        return out
    if min(tracks[p]["valid_frac"] for p in VIEWS) < P_(P, "mwb_pose_valid_frac"):
        out["coordination_fairness"] = _na("not eligible: too few tracked frame pairs in one of the views", POSE_PATH)
        return out
    ta, tb = tracks["A"], tracks["B"]
    n = min(len(ta["est"]), len(tb["est"]))
    Ra, Rb = ta["est"][:n, :3, :3], tb["est"][:n, :3, :3]
    dist = float(np.degrees(rotation_angles(np.einsum("nji,njk->nik", Ra, Rb))).mean())
    la, lb = _path_deg(Ra), _path_deg(Rb)
    d_rot = (dist + abs(la - lb)) / max(0.5 * (la + lb), P_(P, "mwb_rot_floor_deg"))
    pa = errs["A"]["scale"] * ta["est"][:n, :3, 3]
    pb = errs["B"]["scale"] * tb["est"][:n, :3, 3]
    dist_t = float(np.linalg.norm(pa - pb, axis=1).mean())
    ma, mb = _path_m(pa), _path_m(pb)
    d_tr = (dist_t + abs(ma - mb)) / max(0.5 * (ma + mb), P_(P, "mwb_trans_floor_m"))
    out["coordination_fairness"] = _score(100.0 * (1.0 - min(1.0, max(d_rot, d_tr))), POSE_PATH, d_rot=d_rot,
                                          d_trans=d_tr, key=c["key"])
    return out


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
    verdicts = {}
    for v in VIEWS:
        ans, why, _ = view_verdicts(tv, feats, v, frames, c["column"], c["op"], P)
        if ans is None:
            return {"state_synchronization": _na(why, "measured")}
        verdicts[v] = ans
    both = {q: bool(verdicts["A"][q] and verdicts["B"][q]) for q in QUESTIONS[c["op"]]}
    return {"state_synchronization": _score(100.0 * np.mean(list(both.values())), "measured", op=c["op"],
                                            answers=verdicts, both=both)}


def persistence_scores(tv, feats, P, judge) -> dict:
    c = tv.spec["checks"]
    frames = [_frame(t, tv) for t in c["final_s"]]
    if judge is not None:
        return {"state_persistence": vlm_persistence(tv, judge, feats, c, frames)}
    q = {}
    for role in ("operator", "observer"):
        v = c[role]
        ans, why, _ = view_verdicts(tv, feats, v, frames, c["column"], c["op"], P)
        if ans is None:
            return {"state_persistence": _na(why, "measured")}
        q[role] = bool(all(ans.values()))
    return {"state_persistence": _score(100.0 * q["operator"] * q["observer"], "measured", q_operator=q["operator"],
                                        q_observer=q["observer"], op=c["op"])}


def race_scores(tv, feats, P, judge) -> dict:
    c = tv.spec["checks"]
    frames = [_frame(t, tv) for t in c["frames_s"]]
    if judge is not None:
        return {"race_condition_consistency": vlm_race(tv, judge, feats, c, frames)}
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
                 and vs["A"]["unique"] and vs["B"]["unique"])
        per.append({"frame": f, "consistent": r, **{v: vs[v] for v in VIEWS}})
        ok += r
    return {"race_condition_consistency": _score(100.0 * (ok >= 2), "measured", frames=per)}


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
    c = tv.spec["checks"]
    frames = [_frame(t, tv) for t in c["frames_s"]]
    ok_views, ratios, per = {}, [], []
    for v in VIEWS:
        goods = []
        for f in frames:
            gt, expcls, meas, lab = _structure_view(tv, feats, v, f, P)
            if gt.sum() < P_(P, "mwb_min_struct_px"):
                per.append({"view": v, "frame": f, "evaluable": False})
                continue
            inter, union = float((gt & meas).sum()), float((gt | meas).sum())
            iou = inter / union if union else 0.0
            g = _erode(gt)
            agree = float(np.mean(lab[g] == expcls[g]))
            good = iou >= P_(P, "mwb_iou") and agree >= P_(P, "mwb_material_agree")
            a_pred, a_gt = float(meas.sum()), float(gt.sum())
            ratio = min(a_pred, a_gt) / max(a_pred, a_gt)
            ratios.append(ratio)
            goods.append(good)
            per.append({"view": v, "frame": f, "iou": iou, "material_agree": agree, "area_pred": a_pred,
                        "area_gt": a_gt})
        if len(goods) < 2:
            why = f"the structure is not in view {v} at enough of the check frames"
            return {"structural_consistency": _na(why, "measured"), "spatial_reasoning": _na(why, "measured")}
        ok_views[v] = _majority(goods)
    out = {"spatial_reasoning": _score(100.0 * float(np.mean(ratios)), "measured", frames=per)}
    if judge is not None:
        out["structural_consistency"] = vlm_structure(tv, judge, feats, c, frames)
    else:
        out["structural_consistency"] = _score(100.0 * min(ok_views.values()), "measured", views=ok_views, frames=per)
    return out


def revisit_scores(tv, feats, P, judge) -> dict:
    from scipy.spatial.distance import jensenshannon

    c = tv.spec["checks"]
    first, ret = c["first"], c["returning"]
    f0 = _frame(c["first_s"], tv)
    f1 = min(f0 + int(c["gap_frames"]), tv.n_frames - 1)
    kf0, kf1 = feats[first]["keyframes"], feats[ret]["keyframes"]
    im0, im1 = kf0["frames"][list(kf0["index"]).index(f0)], kf1["frames"][list(kf1["index"]).index(f1)]

    def hist(im):
        q = (im // 32).astype(np.int64)
        h = np.bincount((q[..., 0] * 64 + q[..., 1] * 8 + q[..., 2]).ravel(), minlength=512).astype(float)
        return h / h.sum()
    js = float(jensenshannon(hist(im0), hist(im1), base=2))
    out = {"style_consistency": _score(100.0 * (1.0 - js), "measured", js_distance=js, frames=[f0, f1])}
    if judge is not None:
        out["id_consistency"] = vlm_id(tv, judge, c, im0, im1)
        return out
    gt0, _, m0, lab0 = _structure_view(tv, feats, first, f0, P)
    gt1, _, m1, lab1 = _structure_view(tv, feats, ret, f1, P)
    if gt0.sum() < P_(P, "mwb_min_struct_px") or gt1.sum() < P_(P, "mwb_min_struct_px"):
        out["id_consistency"] = _na("the landmark is not in both views at the revisit frames", "measured")
        return out
    union = m0 | m1
    iou = float((m0 & m1).sum()) / float(union.sum()) if union.any() else 0.0
    agree = float(np.mean(lab0[union] == lab1[union])) if union.any() else 0.0
    whole = m0.sum() >= 0.3 * gt0.sum() and m1.sum() >= 0.3 * gt1.sum()
    same = bool(whole and iou >= P_(P, "mwb_id_iou") and agree >= P_(P, "mwb_material_agree"))
    out["id_consistency"] = _score(100.0 * same, "measured", iou=iou, material_agree=agree, frames=[f0, f1])
    return out
