"""The ``multiworldbench-engine`` suite: MultiWorldBench's seven task suites on Engine scenes (two players).

Matched navigation 180, cross-view motion 20, shared-state interaction 120, persistence 50, building reveal 75,
concurrent placement 30, delayed cross-player revisit 20 = 495 cases with ``full=True``; a 20-case subset that covers
every task by default. Each case carries its initial visibility label (mutual, one-way, none), computed from the
commanded start poses and checked against the layout it was built for. The schedules, game rules and geometry the
cases are made of are in ``world.py``.
"""

from __future__ import annotations

import math

from ..suites import ENGINE_IMAGE_SIZE, Case, SuiteError, engine_intrinsics
from .world import (
    ARENA_M,
    FPS,
    HFOV_DEG,
    MATERIALS,
    PLAYERS,
    SUBSET_COUNTS,
    TASK_COUNTS,
    TASKS,
    VISIBILITY,
    PlayerSchedule,
    PlayerSeg,
    TwoPlayerCase,
    frame_of,
    sees,
    visibility_label,
)


def _scene(seed: int) -> dict:
    return {"seed": int(seed), "palette": "realistic"}


def _face(pos, target) -> float:
    """Yaw (degrees) that looks from map point pos to target."""
    return math.degrees(math.atan2(target[0] - pos[0], target[1] - pos[1]))


def _at(center, bearing_deg: float, dist: float):
    b = math.radians(bearing_deg)
    return (center[0] + dist * math.sin(b), center[1] + dist * math.cos(b))


#: layouts around a target point: (bearing offset of B from A seen from the target, distance of A, of B)
LAYOUTS = {"mutual": (180.0, 4.5, 4.5), "one-way": (120.0, 7.0, 3.0), "none": (90.0, 5.0, 5.0)}


def _layout(vis: str, target, rot: float, swap: bool = False, dists=None):
    """Start positions and yaws of A and B, both facing ``target``, in the visibility layout ``vis``; ``swap``
    exchanges the roles (for one-way: B sees A)."""
    phi, da, db = LAYOUTS[vis]
    if dists:
        da, db = dists
    pa = _at(target, rot, da)
    pb = _at(target, rot + phi, db)
    if swap:
        pa, pb = pb, pa
    return (pa, _face(pa, target)), (pb, _face(pb, target))


def _seg(move="idle", look="idle", seconds=1.0, **kw) -> PlayerSeg:
    return PlayerSeg(move, look, float(seconds), **kw)


def _hold(seconds) -> PlayerSeg:
    return PlayerSeg("idle", "idle", float(seconds))


def _pad(segs: list[PlayerSeg], total: float) -> list[PlayerSeg]:
    used = sum(s.seconds for s in segs)
    if total - used > 1e-9:
        segs = segs + [_hold(round(total - used, 6))]
    return segs


CROSS = (0, 0)  # the marked column
CROSS_C = (0.5, 0.5)  # its centre on the map
MOVE_KEYS = {"W": ("W", "idle"), "S": ("S", "idle"), "A": ("A", "idle"), "D": ("D", "idle"), "L": ("idle", "L"),
             "R": ("idle", "R")}
OTHER_ACTION = {"W": "R", "S": "L", "A": "W", "D": "S", "L": "D", "R": "A"}
MAT_NAMES = tuple(MATERIALS)


class _Builder:
    def __init__(self, seed: int):
        self.seed = int(seed)
        self.cases: list[TwoPlayerCase] = []

    def add(self, task: str, idx: int, vis_wanted: str | None, a: PlayerSchedule, b: PlayerSchedule, world: dict,
            checks: dict, tags: dict, prompt: str) -> None:
        scene_seed = self.seed * 1000 + 37 * TASKS.index(task) + idx
        world = dict(world, seed=scene_seed, palette="realistic", arena_m=ARENA_M)
        world.setdefault("crosses", [list(CROSS)])
        total = max(a.duration, b.duration)
        a.segments, b.segments = _pad(a.segments, total), _pad(b.segments, total)
        pa, pb = a.start_pose(), b.start_pose()
        vis = visibility_label(pa, pb)
        if vis_wanted is not None and vis != vis_wanted:
            raise SuiteError(f"{task}-{idx:03d}: layout built for {vis_wanted!r} visibility gives {vis!r}")
        cid = f"{task.replace('_', '-')}-{idx:03d}"
        self.cases.append(TwoPlayerCase(
            id=cid, suite="multiworldbench-engine", trajectory=a.trajectory(), prompt=prompt,
            prompt_source=f"engine:scene-{scene_seed}", scene=_scene(scene_seed),
            intrinsics=engine_intrinsics(HFOV_DEG), image_size=ENGINE_IMAGE_SIZE, view="first",
            tags=dict(tags, task=task, visibility=vis), players={"A": a, "B": b}, world=world, task=task,
            visibility=vis, checks=checks))


def _matched_navigation(bld: _Builder, n: int) -> None:
    conds, acts = ("idle", "same", "different"), ("W", "S", "A", "D", "L", "R")
    combos = [(c, r, k, rep) for c in conds for r in PLAYERS for k in acts for rep in range(5)]
    if n < len(combos):  # the subset: every condition, both roles, varied actions
        combos = [("idle", "A", "W", 0), ("idle", "B", "L", 0), ("same", "A", "R", 0), ("same", "B", "D", 0),
                  ("different", "A", "S", 0), ("different", "B", "A", 0)][:n]
    for idx, (cond, role, key, rep) in enumerate(combos):
        vis = VISIBILITY[(idx + rep) % 3]
        rot = (idx * 47.0) % 360
        # walking toward / away from the cross keeps both players on the arena
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot, dists=(5.5, 5.5) if vis != "one-way" else (7.0, 3.0))
        partner_key = {"idle": None, "same": key, "different": OTHER_ACTION[key]}[cond]
        keys = {role: key, ("B" if role == "A" else "A"): partner_key}

        def sched(k):
            act = [_seg(*MOVE_KEYS[k], 2.5)] if k else [_hold(2.5)]
            return [_hold(0.5)] + act + [_hold(0.5)]
        a = PlayerSchedule(pa, ya, sched(keys["A"]))
        b = PlayerSchedule(pb, yb, sched(keys["B"]))
        bld.add("matched_navigation", idx, vis, a, b, {}, {"condition": cond, "target": role, "key": key,
                                                         "partner_key": partner_key, "action_s": [0.5, 3.0]},
                {"condition": cond, "target": role, "key": key, "rep": rep},
                f"Two players in a voxel arena. Player {role} presses {key}; the partner "
                f"{'stays idle' if cond == 'idle' else 'does the same' if cond == 'same' else 'does ' + str(partner_key)}.")


def _cross_view_motion(bld: _Builder, n: int) -> None:
    for idx in range(n):
        actor = PLAYERS[idx % 2]
        key = ("A", "D", "W", "S")[(idx // 2) % 4]
        vis = ("mutual", "one-way")[(idx // 8) % 2]
        rot = (idx * 53.0) % 360
        observer = "B" if actor == "A" else "A"
        if vis == "mutual":  # face to face across the cross, 6 m apart
            (pa, ya), (pb, yb) = _layout("mutual", CROSS_C, rot, dists=(3.0, 3.0))
        else:  # the observer (far) sees the actor (near); the actor does not see the observer
            (pa, ya), (pb, yb) = _layout("one-way", CROSS_C, rot, swap=(observer == "B"), dists=(7.0, 3.0))
        secs = 1.5 if key in "AD" else 2.0
        poses = {"A": (pa, ya), "B": (pb, yb)}
        sched = {actor: [_hold(1.0), _seg(*MOVE_KEYS[key], secs), _hold(1.5)], observer: [_hold(1.0 + secs + 1.5)]}
        a = PlayerSchedule(poses["A"][0], poses["A"][1], sched["A"])
        b = PlayerSchedule(poses["B"][0], poses["B"][1], sched["B"])
        # the actor must stay in the observer's view: flip a strafe that would leave it
        obs, act = (a, b) if observer == "A" else (b, a)
        end = act.poses(FPS, frame_of(act.duration, FPS))[-1]
        if sees(obs.start_pose(), (end[0, 3], end[2, 3])) > 26.0 and key in "AD":
            key = "D" if key == "A" else "A"
            act.segments[1] = _seg(*MOVE_KEYS[key], secs)
        bld.add("cross_view_motion", idx, None if vis == "one-way" else vis, a, b, {},
                {"actor": actor, "observer": observer, "key": key, "before_s": 0.75, "after_s": 1.0 + secs + 1.0,
                 "motion_s": [1.0, 1.0 + secs]},
                {"actor": actor, "key": key},
                f"Player {actor} presses {key} while player {observer} watches.")


def _shared_state(bld: _Builder, n: int) -> None:
    variants = ("place1", "destroy1", "place2", "destroy2")
    combos = [(v, r, vis, m) for v in variants for r in PLAYERS for vis in VISIBILITY for m in range(5)]
    if n < len(combos):
        combos = [("place1", "A", "mutual", 0), ("destroy1", "B", "none", 1), ("place2", "A", "one-way", 2),
                  ("destroy2", "B", "mutual", 3)][:n]
    for idx, (var, first, vis, mi) in enumerate(combos):
        rot = (idx * 29.0) % 360
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot)
        second = "B" if first == "A" else "A"
        m1, m2 = MAT_NAMES[mi % 4], MAT_NAMES[(mi + 1 + mi // 4) % 4]
        blocks = []
        acts = {"A": [], "B": []}
        if var == "place1":
            acts[first] = [(1.5, dict(act="place", material=m1, column=CROSS))]
        elif var == "destroy1":
            blocks = [[CROSS[0], 0, CROSS[1], m1]]
            acts[first] = [(1.5, dict(act="destroy", column=CROSS))]
        elif var == "place2":  # the second player stacks on the first player's block
            acts[first] = [(1.5, dict(act="place", material=m1, column=CROSS))]
            acts[second] = [(3.0, dict(act="place", material=m2, column=CROSS))]
        else:  # the first places, the second destroys it
            acts[first] = [(1.5, dict(act="place", material=m1, column=CROSS))]
            acts[second] = [(3.0, dict(act="destroy", column=CROSS))]

        def sched(evs):
            segs, t = [], 0.0
            for at, kw in evs:
                segs.append(_hold(at - t))
                segs.append(_seg(seconds=0.25, **kw))
                t = at + 0.25
            return segs + [_hold(5.0 - t)]
        a, b = PlayerSchedule(pa, ya, sched(acts["A"])), PlayerSchedule(pb, yb, sched(acts["B"]))
        world = {"blocks": blocks}
        bld.add("shared_state", idx, vis, a, b, world,
                {"variant": var, "column": list(CROSS), "active": [first] + ([second] if var in ("place2", "destroy2") else []),
                 "op": "place" if var in ("place1", "place2") else "destroy", "final_s": [4.5, 4.7, 4.9]},
                {"variant": var, "first": first, "material": m1},
                f"Player {first} {'places ' + m1 if 'place' in var or var == 'destroy2' else 'destroys the block'} "
                f"at the red cross{'; then player ' + second + (' stacks ' + m2 if var == 'place2' else ' destroys it') if var in ('place2', 'destroy2') else ''}.")


def _persistence(bld: _Builder, n: int) -> None:
    combos = [(r, m, vis, op) for r in PLAYERS for m in range(5) for vis, op in
              zip(("mutual", "one-way", "none", "mutual", "none"), ("place", "place", "place", "destroy", "destroy"))]
    if n < len(combos):
        combos = [("A", 0, "mutual", "place"), ("B", 1, "none", "destroy")][:n]
    for idx, (op_player, mi, vis, op) in enumerate(combos):
        rot = (idx * 41.0) % 360
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot)
        observer = "B" if op_player == "A" else "A"
        mat = MAT_NAMES[mi % 4]
        blocks = [[CROSS[0], 0, CROSS[1], MAT_NAMES[(mi + 2) % 4]]] if op == "destroy" else []
        act = dict(act="place", material=mat, column=CROSS) if op == "place" else dict(act="destroy", column=CROSS)
        # the operator edits while the observer looks away, then looks away and back itself
        op_segs = [_hold(2.5), _seg(seconds=0.25, **act), _seg("idle", "L", 2.0), _hold(0.5), _seg("idle", "R", 2.0),
                   _hold(0.75)]
        obs_segs = [_hold(0.5), _seg("idle", "L", 3.0), _hold(1.0), _seg("idle", "R", 3.0), _hold(0.5)]
        sch = {op_player: PlayerSchedule((0, 0), 0, op_segs, yaw_rate=45.0),
               observer: PlayerSchedule((0, 0), 0, obs_segs, yaw_rate=60.0)}
        sch["A"].start, sch["A"].yaw_deg = pa, ya
        sch["B"].start, sch["B"].yaw_deg = pb, yb
        bld.add("persistence", idx, vis, sch["A"], sch["B"], {"blocks": blocks},
                {"operator": op_player, "observer": observer, "op": op, "column": list(CROSS),
                 "final_s": [7.6, 7.75, 7.9], "edit_s": 2.5},
                {"operator": op_player, "op": op, "material": mat},
                f"Player {op_player} {'places ' + mat if op == 'place' else 'destroys the block'} at the red cross while "
                f"player {observer} looks away; both look back.")


#: structures (cells relative to the build site, level j) — towers, lines, L, square, stairs
SHAPES = {
    "tower": [(0, 0, 0), (0, 1, 0), (0, 2, 0)],
    "line": [(-1, 0, 0), (0, 0, 0), (1, 0, 0)],
    "ell": [(-1, 0, 0), (0, 0, 0), (1, 0, 0), (1, 1, 0)],
    "square": [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)],
    "stairs": [(-1, 0, 0), (0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0)],
}


def _building_reveal(bld: _Builder, n: int) -> None:
    variants, shapes = ("turn", "occluder", "static"), tuple(SHAPES)
    combos = [(v, s, rep) for v in variants for s in shapes for rep in range(5)]
    if n < len(combos):
        combos = [("turn", "ell", 0), ("occluder", "tower", 1)][:n]
    site = (0, 0)
    for idx, (var, shape, rep) in enumerate(combos):
        builder = PLAYERS[rep % 2]
        revealer = "B" if builder == "A" else "A"
        rot = (idx * 67.0) % 360
        target = (site[0] + 0.5, site[1] + 0.5)
        mats = (MAT_NAMES[rep % 4], MAT_NAMES[(rep + 1) % 4])
        # the structure lies across the builder's view: rotate its cells to the layout (multiples of 90 degrees)
        q = int(round(rot / 90.0)) % 4
        cells = []
        for n_, (di, dj, dk) in enumerate(SHAPES[shape]):
            ri, rk = [(di, dk), (dk, -di), (-di, -dk), (-dk, di)][q]
            cells.append([site[0] + ri, dj, site[1] + rk, mats[n_ % 2]])
        # builder 5.5 m and revealer 6.5 m from the site, 90 degrees apart: neither sees the other
        p_bu = _at(target, rot, 5.5)
        p_rv = _at(target, rot + 90.0, 6.5)
        y_bu, y_rv = _face(p_bu, target), _face(p_rv, target)
        occluders, blocks = {}, []
        if var in ("occluder", "static"):  # a stone wall 3 wide, 3 high between the revealer and the site
            mid = _at(target, rot + 90.0, 3.0)
            bearing = math.radians(rot + 90.0)
            along = (abs(math.cos(bearing)) > abs(math.sin(bearing)))  # wall across the line of sight
            ci, ck = int(math.floor(mid[0])), int(math.floor(mid[1]))
            wall = [[ci + (d if along else 0), j, ck + (0 if along else d)] for d in (-1, 0, 1, 2) for j in range(3)]
            if along:
                wall += [[ci - 2, j, ck] for j in range(3)]
            else:
                wall += [[ci, j, ck - 2] for j in range(3)]
            occluders = {"wall": wall}
        bu_segs, t = [], 0.0
        if var == "static":
            blocks = cells
            bu_segs.append(_hold(1.0))
            t = 1.0
        else:
            for c in cells:  # one block every 0.5 s from t = 0.5
                bu_segs.append(_hold(0.25))
                bu_segs.append(_seg(seconds=0.25, act="place", material=c[3], cells=(tuple(c[:3]),)))
                t += 0.5
        if var == "turn":  # the revealer looks away while the structure is built, then turns to it
            y_rv0 = y_rv + 180.0
            rv_segs = [_hold(2.75), _seg("idle", "R", 2.0), _hold(3.25)]
            bu_segs.append(_hold(8.0 - t))
        else:  # the builder removes the wall at 3.5 s
            y_rv0 = y_rv
            rv_segs = [_hold(8.0)]
            bu_segs += [_hold(3.5 - t), _seg(seconds=0.25, act="destroy", occluder="wall"), _hold(4.25)]
        sch = {builder: PlayerSchedule(p_bu, y_bu, bu_segs), revealer: PlayerSchedule(p_rv, y_rv0, rv_segs,
                                                                                        yaw_rate=90.0)}
        bld.add("building_reveal", idx, "none", sch["A"], sch["B"],
                {"blocks": blocks, "occluders": occluders, "structure": cells},
                {"variant": var, "builder": builder, "revealer": revealer, "frames_s": [5.0, 6.25, 7.5],
                 "shape": shape},
                {"variant": var, "shape": shape, "builder": builder},
                f"Player {builder} {'builds' if var != 'static' else 'stands by'} a {shape} of {'/'.join(mats)} blocks; "
                f"player {revealer} {'turns to look' if var == 'turn' else 'sees it once the wall is removed'}.")


def _concurrent(bld: _Builder, n: int) -> None:
    pairs = [(a, b) for a in MAT_NAMES for b in MAT_NAMES if a != b][:10]
    combos = [(vis, pr) for vis in VISIBILITY for pr in pairs]
    if n < len(combos):
        combos = [("mutual", pairs[0]), ("none", pairs[5])][:n]
    for idx, (vis, (ma, mb)) in enumerate(combos):
        rot = (idx * 31.0) % 360
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot)
        seg = lambda m: [_hold(2.5), _seg(seconds=0.25, act="place", material=m, column=CROSS), _hold(5.25)]
        a, b = PlayerSchedule(pa, ya, seg(ma)), PlayerSchedule(pb, yb, seg(mb))
        bld.add("concurrent_placement", idx, vis, a, b, {},
                {"column": list(CROSS), "frames_s": [3.75, 5.0, 6.25], "edit_s": 2.5},
                {"materials": [ma, mb]},
                f"Both players place a block at the red cross in the same step: A {ma}, B {mb}.")


#: landmarks for the delayed revisit (cells relative to the landmark site)
LANDMARKS = {
    "gate": [(-1, 0, 0, "lapis"), (-1, 1, 0, "lapis"), (1, 0, 0, "lapis"), (1, 1, 0, "lapis"), (-1, 2, 0, "gold"),
             (0, 2, 0, "gold"), (1, 2, 0, "gold")],
    "pillar": [(0, 0, 0, "amethyst"), (0, 1, 0, "amethyst"), (0, 2, 0, "diamond"), (0, 3, 0, "diamond")],
    "wall": [(d, j, 0, "diamond" if (d + j) % 2 else "lapis") for d in (-1, 0, 1) for j in (0, 1)],
    "stair": [(-1, 0, 0, "gold"), (0, 0, 0, "gold"), (0, 1, 0, "amethyst"), (1, 0, 0, "gold"), (1, 1, 0, "amethyst"),
              (1, 2, 0, "lapis")],
    "hut": [(-1, 0, 0, "amethyst"), (1, 0, 0, "amethyst"), (-1, 1, 0, "lapis"), (0, 1, 0, "lapis"), (1, 1, 0, "lapis")],
}


def _delayed_revisit(bld: _Builder, n: int) -> None:
    combos = [(first, start, lm) for first in PLAYERS for start in ("behind", "behind-away") for lm in LANDMARKS]
    if n < len(combos):
        combos = [("A", "behind", "gate"), ("B", "behind-away", "pillar")][:n]
    for idx, (first, start, lm) in enumerate(combos):
        ret = "B" if first == "A" else "A"
        rot = (idx * 71.0) % 360
        site = (0, 0)
        q = int(round(rot / 90.0)) % 4  # landmarks face the viewer: the facade runs across the line of sight
        cells = []
        for di, dj, dk, m in LANDMARKS[lm]:
            ri, rk = [(di, dk), (dk, -di), (-di, -dk), (-dk, di)][q]
            cells.append([site[0] + ri, dj, site[1] + rk, m])
        yaw0 = 180.0 + 90.0 * q  # look at the facade head-on
        target = (site[0] + 0.5, site[1] + 0.5)
        p0 = _at(target, yaw0 + 180.0, 6.0)
        p0 = (p0[0], p0[1])
        f = (math.sin(math.radians(yaw0)), math.cos(math.radians(yaw0)))
        back = (p0[0] - 2.8 * f[0], p0[1] - 2.8 * f[1])
        # the first observer looks at the landmark, then steps aside (2.8 m to the right) and stays there
        first_segs = [_hold(0.75), _seg("D", "idle", 2.0), _hold(5.25)]
        if start == "behind":  # the returning observer waits behind, then walks to the first observer's spot
            ret_sched = PlayerSchedule(back, yaw0, [_hold(2.75), _seg("W", "idle", 2.0), _hold(3.25)])
        else:  # ... facing away first: turns around, then walks
            ret_sched = PlayerSchedule(back, yaw0 + 180.0, [_hold(0.75), _seg("idle", "R", 2.0), _seg("W", "idle", 2.0),
                                                             _hold(3.25)], yaw_rate=90.0)
        sch = {first: PlayerSchedule(p0, yaw0, first_segs), ret: ret_sched}
        bld.add("delayed_revisit", idx, None, sch["A"], sch["B"], {"blocks": cells, "structure": cells},
                {"first": first, "returning": ret, "first_s": 0.5, "gap_frames": 70, "landmark": lm},
                {"first": first, "start": start, "landmark": lm},
                f"Player {first} looks at a {lm}; 70 frames later player {ret} stands where {first} stood and looks again.")


def multiworldbench_engine_suite(full: bool = False, seed: int = 0, **_) -> list[Case]:
    """The seven MultiWorldBench task suites on Engine scenes (495 cases with ``full``; 20 by default)."""
    counts = TASK_COUNTS if full else SUBSET_COUNTS
    bld = _Builder(seed)
    for task, fn in (("matched_navigation", _matched_navigation), ("cross_view_motion", _cross_view_motion),
                     ("shared_state", _shared_state), ("persistence", _persistence),
                     ("building_reveal", _building_reveal), ("concurrent_placement", _concurrent),
                     ("delayed_revisit", _delayed_revisit)):
        fn(bld, counts[task])
    if full:
        got = {t: sum(c.task == t for c in bld.cases) for t in TASKS}
        if got != TASK_COUNTS:
            raise SuiteError(f"multiworldbench-engine: built {got}, expected {TASK_COUNTS}")
    # the default subset interleaves the tasks, so --limit K still covers as many tasks as it can
    if not full:
        by = {t: [c for c in bld.cases if c.task == t] for t in TASKS}
        order = []
        while any(by.values()):
            for t in TASKS:
                if by[t]:
                    order.append(by[t].pop(0))
        return order
    return bld.cases
