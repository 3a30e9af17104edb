"""The measured or judged capabilities per record: cross-view motion, state synchronization and persistence, race
condition, structure (structural consistency, spatial reasoning) and the revisit (style, ID); the navigation pair is in
:mod:`.navigation`."""

from __future__ import annotations

import math

import numpy as np

from .pixels import (
    CLASS,
    N_MATERIALS,
    QUESTIONS,
    cast_view,
    column_answers,
    eroded_mask,
    expected_scene,
    frame_labels,
    grown_box_mask,
    majority,
    probe_cell,
    view_verdicts,
)
from .protocol import P_, VIEWS, path_na, path_score
from .record import frame_at
from .vlm import (
    vlm_cross_view,
    vlm_id,
    vlm_persistence,
    vlm_race,
    vlm_state,
    vlm_structure,
)


def _avatar_pixels(tv, feats, observer, actor, f, P):
    """Expected (mask of the actor's body at its commanded pose) and measured (pixels of the actor's colour)."""
    _, boxes = expected_scene(tv, observer, f)
    idx = cast_view(tv, observer, f, boxes)
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
    f0, f1 = frame_at(c["before_s"], tv), frame_at(c["after_s"], tv)
    if judge is not None:
        return {"cross_view_motion": vlm_cross_view(tv, judge, feats, c, f0, f1)}
    e0, m0 = _avatar_pixels(tv, feats, observer, actor, f0, P)
    e1, m1 = _avatar_pixels(tv, feats, observer, actor, f1, P)
    if e0.sum() < P_(P, "mwb_min_px") or e1.sum() < P_(P, "mwb_min_px"):
        return {"cross_view_motion": path_na(f"the actor {actor} is not in the observer's view at the check frames",
                                         "measured")}
    roi = grown_box_mask(e0, 0.5, 4) | grown_box_mask(e1, 0.5, 4)
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
            return {"cross_view_motion": path_na("the commanded motion barely changes the actor's image", "measured")}
    q_obs = bool(seen and moved)
    if backend != "classical":
        return {"cross_view_motion": path_na("the actor half needs the classical flow (WorldMark's template); use "
                                         "--backend classical", "measured")}
    q_act, dir_, mag = actor_moves(tv, feats[actor]["flow"], c, P)
    return {"cross_view_motion": path_score(100.0 * q_obs * q_act, "measured", q_observer=q_obs, q_actor=q_act,
                                        actor_direction=dir_, actor_flow=mag, **detail)}


#: WorldMark's flow templates: the image motion each key makes (channel, sign)
FLOW_TEMPLATE = {"W": ("srad", 1.0), "S": ("srad", -1.0), "A": ("sx", 1.0), "D": ("sx", -1.0), "L": ("sx", 1.0),
                 "R": ("sx", -1.0)}


def actor_moves(tv, F: dict, c: dict, P: dict):
    """The actor's own view moves as commanded: over the motion's frame pairs (i vs i+2), WorldMark's direction
    ``mean(sign ch) / mean|ch|`` of the key's flow channel reaches ``mwb_actor_dir`` with a mean flow of at least
    ``mwb_actor_min_flow`` (pixels of a 640-wide frame)."""
    ch, sign = FLOW_TEMPLATE[c["key"]]
    a, b = frame_at(c["motion_s"][0], tv), frame_at(c["motion_s"][1], tv)
    x = np.asarray(F[ch], float)[a:max(a + 1, b - int(F.get("gap", 2)))]
    if len(x) == 0:
        return False, 0.0, 0.0
    mag = float(np.mean(np.abs(x)))
    d = float(np.mean(sign * x) / (mag + 1e-9))
    return bool(d >= P_(P, "mwb_actor_dir") and mag >= P_(P, "mwb_actor_min_flow")), d, mag


def state_scores(tv, feats, P, judge) -> dict:
    c = tv.spec["checks"]
    frames = [frame_at(t, tv) for t in c["final_s"]]
    if judge is not None:
        return {"state_synchronization": vlm_state(tv, judge, feats, c, frames)}
    verdicts, first = {}, {}
    for v in VIEWS:
        ans, why, _ = view_verdicts(tv, feats, v, frames, c["column"], c["op"], P)
        if ans is None:
            return {"state_synchronization": path_na(why, "measured")}
        if c.get("before_s"):  # a two-step case: the first player's placement must show before the second acts
            mid, why, _ = view_verdicts(tv, feats, v, [frame_at(t, tv) for t in c["before_s"]], c["column"], "place", P)
            first[v] = bool(mid is not None and mid["success"])
            if not first[v]:
                ans = {q: False for q in ans}
        verdicts[v] = ans
    both = {q: bool(verdicts["A"][q] and verdicts["B"][q]) for q in QUESTIONS[c["op"]]}
    return {"state_synchronization": path_score(100.0 * np.mean(list(both.values())), "measured", op=c["op"],
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
    frames = [frame_at(t, tv) for t in c["final_s"]]
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
        if not cross_visible(tv, feats, v, frame_at(before[role], tv), c["column"], P):
            q[role], why[role] = False, f"zero rule: the marked cross is not visible in view {v}'s before frame"
            continue
        q[role] = bool(all(ans.values()))
    return {"state_persistence": path_score(100.0 * q["operator"] * q["observer"], "measured", q_operator=q["operator"],
                                        q_observer=q["observer"], op=c["op"], zero_rule=why or None)}


def race_scores(tv, feats, P, judge) -> dict:
    c = tv.spec["checks"]
    frames = [frame_at(t, tv) for t in c["frames_s"]]
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
                return {"race_condition_consistency": path_na(ans["why"], "measured")}
            present = ans["present"]
            vs[v] = {"visible": bool(present[0]), "material": ans["materials"][0],
                     "unique": bool((len(present) < 2 or not present[1]) and not any(ans["neighbours"]))}
        r = bool(vs["A"]["visible"] and vs["B"]["visible"] and vs["A"]["material"] == vs["B"]["material"]
                 and vs["A"]["material"] in intended and vs["A"]["unique"] and vs["B"]["unique"])
        per.append({"frame": f, "consistent": r, **{v: vs[v] for v in VIEWS}})
        ok += r
    return {"race_condition_consistency": path_score(100.0 * (ok >= 2), "measured", frames=per,
                                                 intended=sorted(intended))}


def _structure_view(tv, feats, viewer, f, P):
    """(gt mask, expected class per pixel, measured structure mask) of the case's structure in one view."""
    struct = {tuple(x[:3]): x[3] for x in tv.spec["world"].get("structure", [])}
    state, boxes = expected_scene(tv, viewer, f)
    idx = cast_view(tv, viewer, f, boxes)
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
    roi = grown_box_mask(gt, 0.25, 3)
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
    frames = [frame_at(t, tv) for t in c["frames_s"]]
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
            g = eroded_mask(gt)
            agree = float(np.mean(lab[g] == expcls[g]))
            shows.append(iou >= P_(P, "mwb_iou"))
            goods.append(iou >= P_(P, "mwb_iou") and agree >= P_(P, "mwb_material_agree"))
            a_pred, a_gt = float((meas & grown_box_mask(gt, 0.0, 1)).sum()) if gt.any() else 0.0, float(gt.sum())
            ratios.append(min(a_pred, a_gt) / max(a_pred, a_gt) if max(a_pred, a_gt) > 0 else 0.0)
            per.append({"view": v, "frame": f, "iou": iou, "material_agree": agree, "area_pred": a_pred,
                        "area_gt": a_gt})
        if len(goods) < 2:
            why = f"the structure is not in view {v} at enough of the check frames"
            return {"structural_consistency": path_na(why, "measured"), "spatial_reasoning": path_na(why, "measured")}
        ok_views[v] = majority(goods)
        revealed[v] = majority(shows)
    prereq = all(revealed.values())
    zero = None if prereq else "zero rule: the structure is not revealed in view " + \
        ", ".join(v for v in VIEWS if not revealed[v])
    out = {"spatial_reasoning": path_score(100.0 * float(np.mean(ratios)) if prereq else 0.0, "measured", frames=per,
                                       revealed=revealed, zero_rule=zero)}
    if judge is not None:
        out["structural_consistency"] = vlm_structure(tv, judge, feats, c, frames)
    else:
        out["structural_consistency"] = path_score(100.0 * min(ok_views.values()) if prereq else 0.0, "measured",
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
    g = eroded_mask(gt)
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
    f0 = frame_at(c["first_s"], tv)
    f1 = frame_at(c["return_s"], tv) if "return_s" in c else f0 + int(c["gap_frames"])
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
    out = {"style_consistency": path_score(100.0 * (1.0 - js) if present else 0.0, "measured", js_distance=js,
                                       frames=[f0, f1], zero_rule=zero)}
    if judge is not None:
        out["id_consistency"] = vlm_id(tv, judge, c, im0, im1)
        return out
    same = bool(all(e["ok"] for e in ev))
    out["id_consistency"] = path_score(100.0 * same, "measured", evidence=ev, frames=[f0, f1],
                                   zero_rule=None if same else "missing or insufficient identity evidence: fails")
    return out
