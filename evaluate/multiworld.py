"""MultiWorldBench: the ten capabilities of two-view records (see ../shared/METRICS.md), from records alone.

Every number says which **path** produced it:

- ``poses (classical)``: camera poses estimated from each player's video by the classical pose extractor of
  :mod:`.classical` (tracked corners, rotation-only vs essential-matrix model), cached per video in the run's feature
  cache; chained and compared with the commanded poses (control isolation, coordination fairness).
- ``measured``: a binary visual judgment measured from pixels, possible on Engine cases because the case says where
  everything must be: the expected world state (the game rules of :func:`~worldgate.trajectories.multiworld.replay`
  applied to the case's interactions) is ray cast from each player's commanded pose
  (:func:`~worldgate.trajectories.multiworld.cast_boxes`), which gives, per view and frame, the pixels where a block
  at the marked cross, a structure or the other player's avatar must appear; the video's pixels there are classified
  by chromaticity (shading-invariant) into the case's materials, the cross and the two avatar colours. Block present /
  count / material / location at the cross, structure silhouette and composition, avatar displacement, and colour
  histograms (style) are measured this way.
- ``vlm``: the same binary questions asked to a VLM judge with the prompts in ``prompts/multiworld/*.txt``. Used where
  pixels do not suffice (a record without Engine geometry) or when asked for (``judge=``); with no VLM backend
  configured the capability is reported **unavailable with the reason**, never filled in.

Capabilities (0-100, per case, then per run):

- **control isolation** (matched navigation): the target player's pose response e per channel (rotation: mean
  geodesic error / max(commanded rotation path, 10 deg); translation: mean position error after a least-squares scale
  fit / max(commanded path, 0.5 m)); eligible when the commanded reference is repeatable (re-integrating the record's
  action schedule reproduces its commanded poses) and estimable (enough tracked frame pairs). Run value:
  ``100 min over (target role, channel, partner condition) of (1 - min(1, mean e))``.
- **coordination fairness** (matched navigation, partner doing the same action): the two roles' estimated responses to
  the same command: (path distance + path-length difference) / max(mean length, 10 deg) for rotation (0.5 m for
  translation); ``100 (1 - min(1, d))``, the worse channel.
- **cross-view motion**: ``100 q_observer q_actor``: the observer sees the actor's avatar move as commanded
  (measured: avatar pixels before/after, displacement or size change against the projected commanded positions); the
  actor's own view moves as commanded (measured: WorldMark's flow template of the key, classical flow).
- **state synchronization** (shared-state interaction): place = mean of success, count, location, material; destroy =
  mean of success, count, location; a question counts when **both** views answer it as the game state says
  (majority over the final frames).
- **state persistence**: strict product of the operator's and the returning observer's answers (all of them true).
- **structural consistency** (building reveal): per view, the structure matches the reference (silhouette IoU and
  material composition) at frames 80/100/120 (majority); ``100 min(view A, view B)``.
- **spatial reasoning**: ``100 min(A_pred, A_GT) / max(A_pred, A_GT)`` with A the structure's visible area in
  pixels (measured vs ray cast), mean over views and frames.
- **race-condition consistency** (concurrent placement): ``100 1[sum over t in 60/80/100 of v_t a_t u_t >= 2]``:
  the block is visible in both views, both show the same material, and it is unique (one block, nothing beside it).
- **style consistency** (delayed revisit): ``100 (1 - JS)``, JS the base-2 Jensen-Shannon distance between the
  colour histograms of the first observer's view and the returning observer's view at the same pose 70 frames later.
- **ID consistency**: the landmark is the same after the 70-frame gap (measured: its silhouettes and materials in the
  two views agree).

Tracks (ours: the paper's grouping is not public): navigation (control isolation, coordination fairness, cross-view
motion), shared state (synchronization, persistence, race condition), structure (structural consistency, spatial
reasoning), revisit (style, ID). Overall: the mean of the ten capabilities (as ``worldgate report`` computes it).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .features import Extractor, FeatureCache, FeatureError, RecordView, compute_features
from .metrics import PARAMS, Score, estimated_trajectory, na, rotation_angles

CAPABILITIES = ["control_isolation", "coordination_fairness", "cross_view_motion", "state_synchronization",
                "state_persistence", "structural_consistency", "spatial_reasoning", "race_condition_consistency",
                "style_consistency", "id_consistency"]
TASK_OF = {"control_isolation": "matched_navigation", "coordination_fairness": "matched_navigation",
           "cross_view_motion": "cross_view_motion", "state_synchronization": "shared_state",
           "state_persistence": "persistence", "structural_consistency": "building_reveal",
           "spatial_reasoning": "building_reveal", "race_condition_consistency": "concurrent_placement",
           "style_consistency": "delayed_revisit", "id_consistency": "delayed_revisit"}
TRACKS = {"navigation": ["control_isolation", "coordination_fairness", "cross_view_motion"],
          "shared state": ["state_synchronization", "state_persistence", "race_condition_consistency"],
          "structure": ["structural_consistency", "spatial_reasoning"],
          "revisit": ["style_consistency", "id_consistency"]}
POSE_PATH = "poses (classical)"
KIND = "rollout-2p"
VIEWS = ("A", "B")
#: the binary visual judgments a VLM can answer instead of pixels (style and spatial reasoning are measurements)
JUDGED = {"cross_view_motion", "state_synchronization", "state_persistence", "structural_consistency",
          "race_condition_consistency", "id_consistency"}
UNAVAILABLE_LEARNED_POSES = "no packaged learned pose estimator (DA3 / ViPE); use --backend classical"


def P_(P: dict, name: str) -> float:
    return float(P.get(name, PARAMS[name]))


# ------------------------------------------------------------------------------------------------------ judge
class Judge:
    """The VLM judge interface of the binary judgments: ``ask(frames, prompt) -> str`` (the answer text), as
    :class:`worldgate.evaluate.judge.VLMJudge` (a transformers VLM loaded by HF id) implements it. Answers are parsed
    with :func:`worldgate.evaluate.judge.parse_yes_no`; an unparseable answer leaves the case unavailable (counted),
    never guessed."""

    name = "vlm"
    available = True
    reason = ""

    def ask(self, frames: list[np.ndarray], prompt: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError


class NoJudge(Judge):
    name = "none"
    available = False
    reason = ("no VLM judge backend configured (pass judge=worldgate.evaluate.judge.VLMJudge(model_id) to "
              "worldgate.evaluate.multiworld.score_folder; the questions are in prompts/multiworld/*.txt)")


class Unparsed(Exception):
    """A VLM answer that is neither yes nor no."""


def _ask(judge, prompt: str, frames: list[np.ndarray]) -> bool:
    from .judge import parse_yes_no

    ans = parse_yes_no(judge.ask(list(frames), prompt))
    if ans is None:
        raise Unparsed(" ".join(prompt.split())[-160:])
    return ans


def _judge_name(judge) -> str:
    return str(getattr(judge, "model_id", None) or getattr(judge, "name", None) or type(judge).__name__)


def load_prompt(name: str, **fields) -> str:
    """A MultiWorldBench judge prompt by name (``prompts/multiworld/<name>.txt``), with ``{field}`` s filled in."""
    from worldgate import prompts

    path = Path(prompts.__file__).resolve().parent / "multiworld" / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"no MultiWorldBench prompt {name!r} (expected {path})")
    text = path.read_text()
    return text.format(**fields) if fields else text


# ------------------------------------------------------------------------------------------------------ records
@dataclass
class TwoView:
    dir: Path
    meta: dict
    spec: dict  # the case's two_player dict: players, world, task, visibility, checks, interactions
    poses: dict  # "A"/"B" -> commanded c2w (F, 4, 4)
    views: dict  # "A"/"B" -> RecordView of that player's video
    actions: dict
    width: int
    height: int
    fps: float
    n_frames: int
    K: np.ndarray  # native intrinsics at the video's size

    @property
    def task(self) -> str:
        return self.spec.get("task", "")


def is_two_view(folder: Path) -> bool:
    try:
        return json.loads((Path(folder) / "meta.json").read_text()).get("kind") == KIND
    except (OSError, json.JSONDecodeError, AttributeError):
        return False


def open_two_view(folder: Path) -> TwoView:
    """A complete two-view record as the evaluator sees it; FeatureError with the reason otherwise."""
    from worldgate.generate.twoview import POSES, VIEWS as FILES
    from worldgate.generate.video import sha256_file

    folder = Path(folder)
    try:
        meta = json.loads((folder / "meta.json").read_text())
        actions = json.loads((folder / "actions.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise FeatureError(f"{folder.name}: unreadable meta.json/actions.json ({e})") from None
    spec = ((meta.get("case") or {}).get("two_player")) if isinstance(meta, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("players"), dict):
        raise FeatureError(f"{folder.name}: meta.json has no two-player case (case.two_player)")
    ach = meta.get("achieved") or {}
    views, poses = {}, {}
    for p in VIEWS:
        video = folder / FILES[p]
        if not video.is_file():
            raise FeatureError(f"{folder.name}: {FILES[p]} is missing")
        try:
            c2w = np.load(folder / POSES[p], allow_pickle=False)
        except (OSError, ValueError) as e:
            raise FeatureError(f"{folder.name}: unreadable {POSES[p]} ({e})") from None
        if c2w.dtype.kind != "f" or c2w.ndim != 3 or c2w.shape[1:] != (4, 4) or not np.isfinite(c2w).all():
            raise FeatureError(f"{folder.name}: {POSES[p]} must be finite float (F, 4, 4) poses, got {c2w.dtype} "
                               f"{c2w.shape}")
        a = ach.get(p) or {}
        try:
            w, h, fps, n = int(a["width"]), int(a["height"]), float(a["fps"]), int(a["frames"])
        except (KeyError, TypeError, ValueError):
            raise FeatureError(f"{folder.name}: meta.json lacks the achieved size/fps/frames of view {p}") from None
        vmeta = {"intrinsics": meta.get("intrinsics"), "requested": meta.get("requested", {}), "case": meta.get("case")}
        views[p] = RecordView(dir=folder, meta=vmeta, trajectory={"segments": []}, poses=c2w, video=video, width=w,
                              height=h, fps=fps, n_frames=n, content_hash=sha256_file(video))
        poses[p] = c2w
    a, b = views["A"], views["B"]
    if (a.width, a.height, a.n_frames) != (b.width, b.height, b.n_frames) or abs(a.fps - b.fps) > 1e-3:
        raise FeatureError(f"{folder.name}: the two views differ ({a.width}x{a.height}x{a.n_frames} @ {a.fps} vs "
                           f"{b.width}x{b.height}x{b.n_frames} @ {b.fps}): a step must give one frame per player")
    if len(poses["A"]) != a.n_frames or len(poses["B"]) != b.n_frames:
        raise FeatureError(f"{folder.name}: commanded poses ({len(poses['A'])}, {len(poses['B'])}) do not match "
                           f"the videos' {a.n_frames} frames")
    K = a.intrinsics
    if K is None:
        f = a.width / (2 * math.tan(math.radians(33.0)))
        K = np.array([f, f, (a.width - 1) / 2, (a.height - 1) / 2])
    return TwoView(folder, meta, spec, poses, views, actions, a.width, a.height, a.fps, a.n_frames, np.asarray(K, float))


# ------------------------------------------------------------------------------------------------------ features
class KeyFrames(Extractor):
    """The decoded frames a case's measured judgments look at (a handful per view), cached like any feature."""

    name = "keyframes"
    version = "1"
    backend = "measured"
    max_side = None

    def __init__(self, indices):
        self.indices = sorted({int(i) for i in indices})

    def key(self) -> str:
        h = hashlib.sha1(json.dumps(self.indices).encode()).hexdigest()[:10]
        return f"{self.name}@{self.version}.{h}-{self.backend}"

    def start(self, rec):
        super().start(rec)
        self.want, self.keep = set(self.indices), {}

    def update(self, i, frame):
        if i in self.want:
            self.keep[i] = np.array(frame, copy=True)

    def finish(self):
        idx = sorted(self.keep)
        frames = np.stack([self.keep[i] for i in idx]) if idx else np.zeros((0, 1, 1, 3), np.uint8)
        return {"index": np.asarray(idx, np.int64), "frames": frames}

    def config(self) -> dict:
        return dict(super().config(), what="decoded frames at the case's check times (measured judgments)")


def _frame(t: float, tv: TwoView) -> int:
    from worldgate.trajectories.multiworld import frame_of

    return int(min(max(frame_of(t, tv.fps), 0), tv.n_frames - 1))


def needed_frames(tv: TwoView) -> list[int]:
    c, task = tv.spec.get("checks", {}), tv.task
    times = []
    if task == "cross_view_motion":
        times = [c["before_s"], c["after_s"]]
    elif task in ("shared_state", "persistence"):
        times = list(c["final_s"])
    elif task in ("building_reveal", "concurrent_placement"):
        times = list(c["frames_s"])
    elif task == "delayed_revisit":
        f0 = _frame(c["first_s"], tv)
        return [f0, min(f0 + int(c["gap_frames"]), tv.n_frames - 1)]
    return [_frame(t, tv) for t in times]


def needs(tv: TwoView) -> dict:
    """Classical features per view: poses of both players (matched navigation), flow of the actor (cross-view)."""
    if tv.task == "matched_navigation":
        return {p: ["poses"] for p in VIEWS}
    if tv.task == "cross_view_motion":
        return {tv.spec["checks"]["actor"]: ["flow"]}
    return {}


def view_features(tv: TwoView, backend: str, cache: FeatureCache, rescore: bool, stats: dict) -> dict:
    """{view: {"keyframes": {...}, "poses"/"flow": {...}}} computed (one decode per view) or read from the cache."""
    from .classical import CLASSICAL

    frames = needed_frames(tv)
    out = {}
    for p in VIEWS:
        ex = [KeyFrames(frames)] if frames else []
        if backend == "classical":
            ex += [CLASSICAL[name]() for name in needs(tv).get(p, [])]
        if not ex:
            out[p] = {}
            continue
        feats, st = compute_features(tv.views[p], ex, cache, rescore=rescore)
        stats["computed"] += len(st["computed"])
        stats["cached"] += len(st["cached"])
        out[p] = feats
    return out


def extractor_info() -> dict:
    from .classical import FlowExtractor, PoseExtractor

    kf = KeyFrames([])
    out = {ex.name: {"backend": ex.backend, "key": ex.key(), **ex.config()} for ex in (PoseExtractor(), FlowExtractor())}
    out["keyframes"] = {"backend": kf.backend, "key": f"{kf.name}@{kf.version}-{kf.backend}", **kf.config()}
    return out


# ------------------------------------------------------------------------------------------------------ pixels
def _class_table():
    from worldgate.trajectories.multiworld import AVATAR_RGB, CROSS_RGB, MATERIALS

    names = list(MATERIALS) + ["cross", "avatar:A", "avatar:B"]
    rgb = [MATERIALS[m] for m in MATERIALS] + [CROSS_RGB, AVATAR_RGB["A"], AVATAR_RGB["B"]]
    rgb = np.asarray(rgb, np.float64)
    return names, rgb[:, :2] / rgb.sum(1, keepdims=True)


CLASS_NAMES, _CHROMA = _class_table()
CLASS = {n: i for i, n in enumerate(CLASS_NAMES)}
N_MATERIALS = 4


def classify(frame: np.ndarray, P: dict) -> np.ndarray:
    """Per-pixel class index into :data:`CLASS_NAMES` (-1: none) by nearest chromaticity (r, g) / (r + g + b)
    within ``mwb_chroma_tol``; pixels darker than ``mwb_dark`` (mean of the channels, 0..1) are never classified."""
    f = frame.astype(np.float32)
    s = f.sum(-1)
    ch = f[..., :2] / np.maximum(s, 1.0)[..., None]
    d = np.linalg.norm(ch[..., None, :] - _CHROMA[None, None].astype(np.float32), axis=-1)
    lab = d.argmin(-1).astype(np.int16)
    ok = (d.min(-1) <= P_(P, "mwb_chroma_tol")) & (s >= 3 * 255 * P_(P, "mwb_dark"))
    lab[~ok] = -1
    return lab


def _erode(mask: np.ndarray) -> np.ndarray:
    import cv2

    if mask.sum() < 30:
        return mask
    e = cv2.erode(mask.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    return e if e.sum() >= 6 else mask


def _bbox(mask: np.ndarray, grow: float, min_px: int = 3):
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
    from worldgate.trajectories.multiworld import avatar_boxes, cell_box, replay

    state = replay(tv.spec["world"], tv.spec.get("interactions", []), f / tv.fps, fps=tv.fps)
    boxes = [cell_box(c, m, label=f"cell:{c[0]},{c[1]},{c[2]}") for c, m in sorted(state.items())]
    if not only_cells:
        other = "B" if viewer == "A" else "A"
        boxes += avatar_boxes(tv.poses[other][f], other)
    return state, boxes


def _cast(tv: TwoView, viewer: str, f: int, boxes):
    from worldgate.trajectories.multiworld import cast_boxes

    return cast_boxes(tv.K, tv.poses[viewer][f], tv.width, tv.height, boxes)


def probe_cell(tv, viewer, f, boxes, cell, lab, P, ground=False) -> dict:
    """What the view shows where ``cell`` would be visible (given everything expected in front of it; for a cell the
    game state leaves empty, only over pixels where nothing expected lies behind it): the share of those pixels of
    each class. ``ground``: the cell's footprint on the ground (is the cross visible there)."""
    from worldgate.trajectories.multiworld import EYE_M, Box

    label = f"cell:{cell[0]},{cell[1]},{cell[2]}"
    others = [b for b in boxes if b.label != label]
    if ground:
        probe = Box((cell[0] + 0.5, EYE_M - 0.01, cell[2] + 0.5), (0.5, 0.01, 0.5), (1, 0, 0), "probe")
    else:
        probe = Box((cell[0] + 0.5, EYE_M - (cell[1] + 0.5), cell[2] + 0.5), (0.5, 0.5, 0.5), (1, 0, 0), "probe")
    _, idx, _ = _cast(tv, viewer, f, others + [probe])
    mask = idx == len(others)
    full = int(mask.sum())
    if not ground and len(others) == len(boxes):
        # a cell the game state leaves empty: only where nothing expected lies behind it (2 px away from anything
        # expected, which bleeds into its edges) would a block there show
        import cv2

        _, behind, _ = _cast(tv, viewer, f, others)
        near = cv2.dilate((behind >= 0).astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        mask &= ~near
    area = int(mask.sum())
    if area < max(P_(P, "mwb_min_px"), 0.15 * full):
        return {"observable": False, "area": area}
    m = mask if ground else _erode(mask)  # the mark's centre continues into its red arms: no edge to erode
    lv = lab[m]
    frac = {n: float(np.mean(lv == i)) for i, n in enumerate(CLASS_NAMES)}
    mats = {n: frac[n] for n in CLASS_NAMES[:N_MATERIALS]}
    return {"observable": True, "area": area, "frac": frac, "any": float(sum(mats.values())),
            "material": max(mats, key=mats.get)}


def column_answers(tv: TwoView, viewer: str, f: int, lab: np.ndarray, column, op: str, P: dict) -> dict:
    """The state questions about the marked column in one view at frame f: success, count, location (and material
    for placements), each True/False, or None when the column cannot be seen there."""
    state, boxes = expected_scene(tv, viewer, f)
    i, k = column
    exp = []
    while (i, len(exp), k) in state:
        exp.append(state[(i, len(exp), k)])
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
    for di, dk in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        pc = probe_cell(tv, viewer, f, boxes, (i + di, 0, k + dk), lab, P)
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


def _majority(vals: list[bool]) -> bool:
    return sum(bool(v) for v in vals) * 2 > len(vals)


def view_verdicts(tv, feats, viewer, times_frames, column, op, P):
    """Per question: the view's majority answer over the frames; None when the column is out of view."""
    kf = feats[viewer]["keyframes"]
    idx = list(kf["index"])
    per = {q: [] for q in QUESTIONS[op]}
    raw = []
    for f in times_frames:
        lab = classify(kf["frames"][idx.index(f)], P)
        ans = column_answers(tv, viewer, f, lab, column, op, P)
        raw.append(ans)
        if not ans["evaluable"]:
            return None, ans["why"], raw
        for q in per:
            per[q].append(ans[q])
    return {q: _majority(v) for q, v in per.items()}, None, raw


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
    from worldgate.trajectories.multiworld import PlayerSchedule

    try:
        sched = PlayerSchedule.from_dict(tv.actions["players"][player])
        again = sched.poses(tv.fps, tv.n_frames)
    except (KeyError, TypeError, ValueError):
        return False
    return bool(np.allclose(again, tv.poses[player], atol=1e-6))


# ------------------------------------------------------------------------------------------------------ capabilities
def _score(value, path, **detail) -> Score:
    return Score(None if value is None else float(value), None, dict(detail, path=path))


def _na(reason, path) -> Score:
    s = na(reason)
    s.detail = {"path": path}
    return s


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
    _, idx, _ = _cast(tv, observer, f, boxes)
    body = np.zeros(idx.shape, bool)
    for bi, b in enumerate(boxes):
        if b.label == f"avatar:{actor}":
            body |= idx == bi
    kf = feats[observer]["keyframes"]
    lab = classify(kf["frames"][list(kf["index"]).index(f)], P)
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
            lab = classify(kf["frames"][list(kf["index"]).index(f)], P)
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
    _, idx, _ = _cast(tv, viewer, f, boxes)
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
    lab = classify(kf["frames"][list(kf["index"]).index(f)], P)
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


# ------------------------------------------------------------------------------------------------------ vlm path
def _kf(feats, v, f):
    kf = feats[v]["keyframes"]
    return kf["frames"][list(kf["index"]).index(f)]


def _judge_or_na(judge, cap):
    if not getattr(judge, "available", True):
        return _na(judge.reason, "vlm")
    return None


def _vlm(fn):
    """A VLM capability: unavailable (with the reason) without a judge or on an unparseable answer."""
    def wrapped(tv, judge, *a):
        s = _judge_or_na(judge, fn.__name__)
        if s:
            return s
        try:
            return fn(tv, judge, *a)
        except Unparsed as e:
            out = _na(f"the VLM judge's answer could not be parsed as yes/no (counted, never guessed): {e}", "vlm")
            out.detail["unparsed"] = 1
            return out
    wrapped.__name__ = fn.__name__
    return wrapped


@_vlm
def vlm_cross_view(tv, judge, feats, c, f0, f1) -> Score:
    colours = {"A": "orange", "B": "magenta"}
    obs = _ask(judge, load_prompt("cross_view_motion_observer", actor=c["actor"], colour=colours[c["actor"]],
                                  key=c["key"]), [_kf(feats, c["observer"], f0), _kf(feats, c["observer"], f1)])
    act = _ask(judge, load_prompt("cross_view_motion_actor", key=c["key"]),
               [_kf(feats, c["actor"], f0), _kf(feats, c["actor"], f1)])
    return _score(100.0 * obs * act, "vlm", q_observer=obs, q_actor=act, judge=_judge_name(judge))


def _state_questions(c, tv, f):
    state, _ = expected_scene(tv, "A", f, only_cells=True)
    i, k = c["column"]
    exp = []
    while (i, len(exp), k) in state:
        exp.append(state[(i, len(exp), k)])
    return exp


@_vlm
def vlm_state(tv, judge, feats, c, frames) -> Score:
    exp = _state_questions(c, tv, frames[-1])
    both = {}
    for q in QUESTIONS[c["op"]]:
        prompt = load_prompt(f"state_{q}", op=c["op"], count=len(exp), materials=", ".join(exp) or "none")
        both[q] = all([_ask(judge, prompt, [_kf(feats, v, frames[-1])]) for v in VIEWS])
    return _score(100.0 * np.mean(list(both.values())), "vlm", both=both, judge=_judge_name(judge))


@_vlm
def vlm_persistence(tv, judge, feats, c, frames) -> Score:
    exp = _state_questions(c, tv, frames[-1])
    prompt = load_prompt("persistence", op=c["op"], count=len(exp), materials=", ".join(exp) or "none")
    q = {r: _ask(judge, prompt, [_kf(feats, c[r], frames[-1])]) for r in ("operator", "observer")}
    return _score(100.0 * q["operator"] * q["observer"], "vlm", q_operator=q["operator"], q_observer=q["observer"],
                  judge=_judge_name(judge))


@_vlm
def vlm_race(tv, judge, feats, c, frames) -> Score:
    prompt = load_prompt("race")
    ok = sum(_ask(judge, prompt, [_kf(feats, "A", f), _kf(feats, "B", f)]) for f in frames)
    return _score(100.0 * (ok >= 2), "vlm", consistent_frames=ok, judge=_judge_name(judge))


@_vlm
def vlm_structure(tv, judge, feats, c, frames) -> Score:
    cells = tv.spec["world"].get("structure", [])
    prompt = load_prompt("structure", n_blocks=len(cells), materials=", ".join(sorted({x[3] for x in cells})))
    views = {v: _majority([_ask(judge, prompt, [_kf(feats, v, f)]) for f in frames]) for v in VIEWS}
    return _score(100.0 * min(views.values()), "vlm", views=views, judge=_judge_name(judge))


@_vlm
def vlm_id(tv, judge, c, im0, im1) -> Score:
    same = _ask(judge, load_prompt("id_consistency", gap=c["gap_frames"]), [im0, im1])
    return _score(100.0 * same, "vlm", judge=_judge_name(judge))


# ------------------------------------------------------------------------------------------------------ records
def measurable(tv: TwoView) -> bool:
    """Engine cases carry the geometry the measured path needs (the world spec with cells and the crosses)."""
    w = tv.spec.get("world")
    return isinstance(w, dict) and "seed" in w and tv.meta.get("intrinsics", {}).get("native") is not None


def score_two_view(tv: TwoView, feats: dict, backend: str, P: dict, judge: Judge | None = None) -> dict:
    """{capability: Score} for one record: the capabilities of its task; the others are not applicable."""
    task = tv.task
    j = judge if judge is not None else (None if measurable(tv) else NoJudge())
    if task == "matched_navigation":
        out = navigation_scores(tv, feats, backend, P)
    elif task == "cross_view_motion":
        out = cross_view_scores(tv, feats, backend, P, j)
    elif task == "shared_state":
        out = state_scores(tv, feats, P, j)
    elif task == "persistence":
        out = persistence_scores(tv, feats, P, j)
    elif task == "building_reveal":
        out = structure_scores(tv, feats, P, j)
    elif task == "concurrent_placement":
        out = race_scores(tv, feats, P, j)
    elif task == "delayed_revisit":
        out = revisit_scores(tv, feats, P, j)
    else:
        raise FeatureError(f"{tv.dir.name}: unknown MultiWorldBench task {task!r}")
    for m in CAPABILITIES:
        if m not in out:
            out[m] = na(f"not applicable: a {TASK_OF[m].replace('_', ' ')} capability ({task.replace('_', ' ')} case)")
    return out


def score_folder(folder: Path, cache: FeatureCache, backend: str = "classical", wanted: set | None = None,
                 P: dict | None = None, rescore: bool = False, stats: dict | None = None,
                 judge: Judge | None = None) -> dict:
    """One samples.jsonl row for a two-view record (an error entry with the reason when it cannot be scored)."""
    P = dict(PARAMS, **(P or {}))
    stats = stats if stats is not None else {"computed": 0, "cached": 0}
    row = {"case": Path(folder).name, "kind": KIND}
    try:
        tv = open_two_view(folder)
        feats = view_features(tv, backend, cache, rescore, stats)
        scores = score_two_view(tv, feats, backend, P, judge)
        if wanted:
            scores = {k: v for k, v in scores.items() if k in wanted}
        row.update({
            "video_sha256": {p: tv.views[p].content_hash for p in VIEWS},
            "tags": tv.meta.get("case", {}).get("tags", {}),
            "task": tv.task,
            "visibility": tv.spec.get("visibility"),
            "adapter": tv.meta.get("adapter", {}).get("name"),
            "timing": tv.meta.get("timing"),
            "scores": {k: s.value for k, s in scores.items()},
            "unavailable": {k: s.reason for k, s in scores.items() if s.value is None},
            "detail": {k: s.detail for k, s in scores.items() if s.detail},
            "paths": {k: (s.detail or {}).get("path") for k, s in scores.items() if (s.detail or {}).get("path")},
        })
    except FeatureError as e:
        row["error"] = str(e)
    except Exception as e:  # a bug in one record's scoring must not hide the others; it is reported in full
        row["error"] = f"{type(e).__name__}: {e}"
    return row


# ------------------------------------------------------------------------------------------------------ aggregate
def aggregate(samples: list[dict], wanted: set | None = None) -> dict:
    """Run-level capabilities from two-view sample rows: means over the applicable cases, control isolation as the
    minimum over (target role, channel, partner condition) groups of the mean error."""
    n = len(samples)
    out = {}
    for m in CAPABILITIES:
        if wanted and m not in wanted:
            continue
        vals, reasons, paths = [], {}, set()
        for s in samples:
            if "error" in s:
                reasons["record error"] = reasons.get("record error", 0) + 1
                continue
            v = (s.get("scores") or {}).get(m)
            if v is None:
                r = (s.get("unavailable") or {}).get(m)
                if r:
                    reasons[r] = reasons.get(r, 0) + 1
                continue
            vals.append(v)
            p = (s.get("paths") or {}).get(m)
            if p:
                paths.add(p)
        entry = {"mean": float(np.mean(vals)) if vals else None, "std": float(np.std(vals)) if vals else None,
                 "n": len(vals), "coverage": len(vals) / n if n else 0.0, "unavailable": reasons,
                 "applicable": sum(1 for s in samples if s.get("task") == TASK_OF[m]),
                 "path": ",".join(sorted(paths)) if paths else None, "aggregation": "mean over cases"}
        if m == "control_isolation" and vals:
            groups: dict = {}
            for s in samples:
                d = (s.get("detail") or {}).get(m) or {}
                if (s.get("scores") or {}).get(m) is None or "e_rot" not in d:
                    continue
                for ch in ("rot", "trans"):
                    groups.setdefault(f"{d['role']}/{ch}/{d['condition']}", []).append(d[f"e_{ch}"])
            gvals = {g: 100.0 * (1.0 - min(1.0, float(np.mean(e)))) for g, e in sorted(groups.items())}
            entry.update(mean=min(gvals.values()), groups=gvals, per_case_mean=float(np.mean(vals)),
                         aggregation="100 min over (target role, channel, partner condition) of (1 - min(1, mean e))")
        out[m] = entry
    return out


def tracks(metrics: dict) -> dict:
    def mean(ids):
        v = [metrics[m]["mean"] for m in ids if m in metrics and metrics[m]["mean"] is not None]
        return float(np.mean(v)) if v else None

    return {"tracks": {t: {"mean": mean(ids), "capabilities": ids} for t, ids in TRACKS.items()},
            "overall": mean(CAPABILITIES),
            "available": sum(1 for m in CAPABILITIES if m in metrics and metrics[m]["mean"] is not None),
            "paths": {m: metrics[m].get("path") for m in CAPABILITIES if m in metrics}}


def finish_results(results: dict, samples: list[dict], wanted: set | None = None) -> None:
    """Put the MultiWorldBench capabilities, tracks and overall into a run's results (in place). A run without
    two-view records keeps no MultiWorldBench rows; a run of only two-view records keeps no single-view rows."""
    two = [s for s in samples if s.get("kind") == KIND]
    one = [s for s in samples if s.get("kind") != KIND]
    if not two:
        for m in CAPABILITIES:
            results["metrics"].pop(m, None)
        return
    results["metrics"].update(aggregate(samples, wanted))
    if not one:
        for m in list(results["metrics"]):
            if m not in CAPABILITIES:
                results["metrics"].pop(m)
        results["backends"] = extractor_info()
    results["multiworld"] = tracks(results["metrics"])


def format_tracks(results: dict) -> str:
    mw = results.get("multiworld")
    if not mw:
        return ""
    cells = [f"{t} {v['mean']:.1f}" if v["mean"] is not None else f"{t} n/a" for t, v in mw["tracks"].items()]
    ov = "n/a" if mw["overall"] is None else f"{mw['overall']:.1f}"
    return f"MultiWorldBench tracks: {'; '.join(cells)}; overall {ov} ({mw['available']}/10 capabilities)"
