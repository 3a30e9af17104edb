"""The ``multiworldbench-engine`` suite: MultiWorldBench's seven task suites on Engine scenes (two players).

Matched navigation 180, cross-view motion 20, shared-state interaction 120, persistence 50, building reveal 75,
concurrent placement 30, delayed cross-player revisit 20 = 495 cases with ``full=True``; a 20-case subset that covers
every task by default. Each case carries its initial visibility label (mutual, one-way, none), computed from the
commanded start poses and checked against the layout it was built for. The schedules, game rules and geometry the
cases are made of are in ``world.py``.
"""

from __future__ import annotations

import math

from ..registry import did_you_mean
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
             "R": ("idle", "R"), "^": ("idle", "^"), "v": ("idle", "v"), "WL": ("W", "L"), "SR": ("S", "R"),
             "idle": ("idle", "idle")}
#: the ten matched-navigation schedules of the paper (§3.3): forward/backward, strafes, yaw, pitch, combined
#: translation + rotation, idle
NAV_SCHEDULES = ("W", "S", "A", "D", "L", "R", "^", "v", "WL", "idle")
#: each action's inverse: a trial undoes its action so the players stay on the arena and start every trial alike
INVERSE = {"W": "S", "S": "W", "A": "D", "D": "A", "L": "R", "R": "L", "^": "v", "v": "^", "WL": "SR", "SR": "WL",
           "idle": "idle"}
#: the partner's action in the "different" condition (and the action the idle schedule's partner takes)
OTHER_ACTION = {"W": "R", "S": "L", "A": "W", "D": "S", "L": "D", "R": "A", "^": "A", "v": "D", "WL": "D",
                "idle": "W"}
#: channels a key commands (the other channel of an action is its uncommanded one)
COMMANDED = {"W": ("trans",), "S": ("trans",), "A": ("trans",), "D": ("trans",), "L": ("rot",), "R": ("rot",),
             "^": ("rot",), "v": ("rot",), "WL": ("trans", "rot"), "SR": ("trans", "rot"), "idle": ()}
#: matched-navigation timing: an initial idle interval (the noise baseline), then trials of action, inverse, rest
NAV_IDLE_S, NAV_ACT_S, NAV_REST_S = 1.0, 0.75, 0.25
#: the trials of one case (A's key, B's key): "k" the schedule's key, "o" the partner's different action, None idle.
#: Per target role: two reference repetitions with the partner idle, then the treatments idle / same / different.
NAV_TRIALS = (("k", None), (None, "k"), ("k", None), (None, "k"), ("k", "k"), ("k", "o"), ("o", "k"), ("k", None),
              (None, "k"))
NAV_ROLES = {"A": {"ref": [0, 2], "idle": 7, "same": 4, "different": 5},
             "B": {"ref": [1, 3], "idle": 8, "same": 4, "different": 6}}
#: coordination fairness: per action class, the trials pairing A's and B's response to the same command (A, B)
NAV_PAIRS = {"k": [[0, 1], [2, 3], [4, 4]], "o": [[6, 5]]}
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


def _nav_schedule(keys: list[str | None]) -> list[PlayerSeg]:
    segs = [_hold(NAV_IDLE_S)]
    for k in keys:
        if k is None or k == "idle":
            segs.append(_hold(2 * NAV_ACT_S + NAV_REST_S))
        else:
            segs += [_seg(*MOVE_KEYS[k], NAV_ACT_S), _seg(*MOVE_KEYS[INVERSE[k]], NAV_ACT_S), _hold(NAV_REST_S)]
    return segs


def _matched_navigation(bld: _Builder, n: int) -> None:
    """Six scenes x three visibilities x the ten schedules (§3.3: 180). A case tests both players as the target: per
    role two reference repetitions of the schedule's key with the partner idle, then the treatments with the
    partner idle, doing the same key, doing a different key (``NAV_TRIALS``); every trial undoes its action."""
    combos = [(scene, vis, key) for scene in range(6) for vis in VISIBILITY for key in NAV_SCHEDULES]
    if n < len(combos):  # the subset: translation, yaw, pitch, combined, idle
        combos = [(0, "mutual", "W"), (1, "one-way", "L"), (2, "none", "^"), (3, "mutual", "WL"),
                  (4, "one-way", "idle")][:n]
    trial = 2 * NAV_ACT_S + NAV_REST_S
    for idx, (scene, vis, key) in enumerate(combos):
        rot = (idx * 47.0 + 61.0 * scene) % 360
        (pa, ya), (pb, yb) = _layout(vis, CROSS_C, rot, dists=(5.5, 5.5) if vis != "one-way" else (7.0, 3.0))
        other = OTHER_ACTION[key]
        resolve = {"k": key, "o": other, None: None}
        a = PlayerSchedule(pa, ya, _nav_schedule([resolve[t[0]] for t in NAV_TRIALS]))
        b = PlayerSchedule(pb, yb, _nav_schedule([resolve[t[1]] for t in NAV_TRIALS]))
        trials = []
        for i, (ka, kb) in enumerate(NAV_TRIALS):
            s0 = NAV_IDLE_S + i * trial
            trials.append({"A": resolve[ka], "B": resolve[kb], "action_s": [s0, s0 + NAV_ACT_S]})
        bld.add("matched_navigation", idx, vis, a, b, {},
                {"key": key, "other": other, "commanded": {key: list(COMMANDED[key]), other: list(COMMANDED[other])},
                 "noise_s": [0.0, NAV_IDLE_S], "trials": trials, "roles": NAV_ROLES, "pairs": NAV_PAIRS},
                {"schedule": key, "scene": scene},
                f"Two players in a voxel arena take turns on schedule {key}: each presses it twice with the partner "
                f"idle, then with the partner idle, doing the same, doing {other}.")


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
                 "op": "place" if var in ("place1", "place2") else "destroy", "final_s": [4.5, 4.7, 4.9],
                 **({"before_s": [2.5]} if var in ("place2", "destroy2") else {})},
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
                 "final_s": [7.6, 7.75, 7.9], "edit_s": 2.5, "before_s": {"operator": 2.25, "observer": 0.25}},
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
        combos = [("turn", "ell", 0), ("occluder", "tower", 1), ("static", "square", 2)][:n]
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
                {"column": list(CROSS), "frames_s": [3.75, 5.0, 6.25], "edit_s": 2.5, "materials": [ma, mb]},
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


#: delayed revisit timing (seconds at 16 fps): the first observer's evidence frame, its turn away, the steps that
#: clear the first observer's spot for the returning one, the 70-frame idle interval with the landmark outside both
#: views, the returning observer's turn and its evidence frame
REVISIT_FIRST_S, REVISIT_TURN_S, REVISIT_STEP_S, REVISIT_GAP_FRAMES = 1.25, 2.0, 1.5, 70


def _delayed_revisit(bld: _Builder, n: int) -> None:
    """Ten scene configurations (five landmarks x the side the first observer steps to) and their role swaps (§3.3:
    20 directional cases). The first observer builds the landmark, sees it (its evidence frame), turns away and steps
    aside; the returning observer, facing away, backs into the first observer's spot; both idle 70 frames with the
    landmark outside both views; then the returning observer turns to it and sees it from the first observer's
    evidence pose (its evidence frame)."""
    combos = [(first, side, lm) for first in PLAYERS for side in (1, -1) for lm in LANDMARKS]
    if n < len(combos):
        combos = [("A", 1, "gate"), ("B", -1, "pillar")][:n]
    t_away = REVISIT_FIRST_S + 0.25  # the first observer turns away 0.25 s after its evidence frame
    t_step = t_away + REVISIT_TURN_S  # ... then steps aside, then the returning observer backs in
    t_idle0 = t_step + 2 * REVISIT_STEP_S
    t_idle1 = t_idle0 + REVISIT_GAP_FRAMES / FPS
    t_ret = t_idle1 + REVISIT_TURN_S + 0.125  # the returning observer's evidence frame, once turned
    total = t_ret + 0.5
    speed = 1.4
    for idx, (first, side, lm) in enumerate(combos):
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
        f = (math.sin(math.radians(yaw0)), math.cos(math.radians(yaw0)))
        back = speed * REVISIT_STEP_S
        p_ret = (p0[0] - back * f[0], p0[1] - back * f[1])
        # the first observer builds the landmark (one interaction per material), sees it, turns away, steps aside
        first_segs = []
        for m in dict.fromkeys(c[3] for c in cells):
            first_segs.append(_seg(seconds=0.25, act="place", material=m,
                                   cells=tuple(tuple(c[:3]) for c in cells if c[3] == m)))
        used = 0.25 * len(first_segs)
        turn = "R" if side > 0 else "L"
        first_segs += [_hold(t_away - used), _seg("idle", turn, REVISIT_TURN_S),
                       _seg("D" if side > 0 else "A", "idle", REVISIT_STEP_S), _hold(total - t_step - REVISIT_STEP_S)]
        # the returning observer waits behind, facing away, backs into the spot, idles, turns to the landmark
        ret_segs = [_hold(t_step + REVISIT_STEP_S), _seg("S", "idle", REVISIT_STEP_S), _hold(t_idle1 - t_idle0),
                    _seg("idle", turn, REVISIT_TURN_S), _hold(total - t_idle1 - REVISIT_TURN_S)]
        sch = {first: PlayerSchedule(p0, yaw0, first_segs, yaw_rate=90.0, speed=speed),
               ret: PlayerSchedule(p_ret, yaw0 + 180.0, ret_segs, yaw_rate=90.0, speed=speed)}
        bld.add("delayed_revisit", idx, None, sch["A"], sch["B"], {"blocks": [], "structure": cells},
                {"first": first, "returning": ret, "first_s": REVISIT_FIRST_S, "return_s": t_ret,
                 "idle_s": [t_idle0, t_idle1], "gap_frames": REVISIT_GAP_FRAMES, "landmark": lm},
                {"first": first, "side": side, "landmark": lm},
                f"Player {first} builds a {lm}, looks at it, turns away and steps aside; player {ret} takes its spot; "
                f"after 70 idle frames with the {lm} outside both views player {ret} turns to it.")


def multiworldbench_engine_suite(full: bool = False, seed: int = 0, task: str = "", **_) -> list[Case]:
    """The seven MultiWorldBench task suites on Engine scenes (495 cases with ``full``; 20 by default); ``task``:
    only the cases of these tasks (comma-separated, e.g. ``suite.task=matched_navigation``), ids unchanged."""
    wanted = [t.strip() for t in str(task).split(",") if t.strip()]
    for t in wanted:
        if t not in TASKS:
            raise did_you_mean("multiworldbench-engine task (suite.task)", t, TASKS)
    cases = _build(full, seed)
    return [c for c in cases if c.task in wanted] if wanted else cases


def _build(full: bool, seed: int) -> list[Case]:
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
