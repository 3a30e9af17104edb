"""The Engine: a CPU world model with ground truth, behind the same adapter contract as a real model.

``engine`` renders exactly what is commanded (Engine GT): a seeded voxel world (see :mod:`.world`) seen from the
case's commanded camera-to-world poses at the native fps, with the case's intrinsics transformed to the native
size (regime 4, centre-crop to the native aspect). Third-person cases draw an avatar in the lower middle of the
frame. Scenes come from the case's ``scene`` spec (``seed``, ``palette``, ``events``, ``event_s``, and ``mirror``: a
world mirror-symmetric about the start view's centre plane, see :func:`.world._mirror_half`); an image-conditioned
case is refused, because the Engine renders its own scenes.

Model args (``--model-args`` / ``key=value``): ``width``, ``height`` (default 256), ``fps`` (16), ``chunk`` (frames
per chunk, 16), ``fog_m`` (view distance, 28 m), ``threads`` (0: all cores, 1: one), ``sample`` (ray grid in pixels,
4; 1 traces every pixel). Limits (constants below, named in each error): width and height even integers in
[ENGINE_MIN_SIDE, ENGINE_MAX_SIDE] = [16, 4096]; fps in [ENGINE_MIN_FPS, ENGINE_MAX_FPS] = [1, 120]; chunk in [1,
ENGINE_MAX_CHUNK]; fog_m finite in (0, ENGINE_MAX_FOG_M]; threads in [0, ENGINE_MAX_THREADS]; sample a power of two
in [1, ENGINE_MAX_SAMPLE]. Unknown model args are errors with a did-you-mean (``MODEL_ARGS``: none beyond the
constructor's parameters).
"""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.registry import did_you_mean

from ..base import Adapter, AdapterError, AdapterInfo, Chunk, NativeInputs, horizontal_fov_deg
from .avatar import draw_avatar
from .world import ID_AVATAR, NX, NZ, TEXKIND, VS, B, G, build_world

# bounds of the Engine's model args (see the module docstring)
ENGINE_MIN_SIDE, ENGINE_MAX_SIDE = 16, 4096  # width, height: even pixels (video encoders need even sides)
ENGINE_MIN_FPS, ENGINE_MAX_FPS = 1.0, 120.0
ENGINE_MAX_CHUNK = 1024  # frames per chunk
ENGINE_MAX_FOG_M = 10_000.0  # view distance, metres
ENGINE_MAX_THREADS = 1024
ENGINE_MAX_SAMPLE = 64  # ray grid, pixels
ENGINE_MAX_SCENE_SEED = 2**32 - 1  # a case's scene {"seed": ...}


def _arg(name: str, value, kind: type, lo, hi, limits: str):
    """``value`` as ``kind`` (int: integral numbers only; float: finite) within [lo, hi] (lo None: (0, hi]), else an
    AdapterError that names the arg, its range and the constants that bound it."""
    rng = f"in [{lo:g}, {hi:g}]" if lo is not None else f"in (0, {hi:g}]"
    what = "an integer" if kind is int else "a finite number"
    shown = repr(value) if isinstance(value, (int, float, str)) else type(value).__name__
    err = AdapterError(f"engine: {name} must be {what} {rng} ({limits}), got {shown[:40]}")
    if isinstance(value, (bool, np.bool_)):
        raise err
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        raise err from None
    if not math.isfinite(f) or (kind is int and f != int(f)) or not (lo <= f <= hi if lo is not None else 0 < f <= hi):
        raise err
    return int(f) if kind is int else f


def _init_params(cls) -> set[str]:
    """Keyword parameters of every ``__init__`` along ``cls``'s MRO down to EngineAdapter (subclasses add theirs)."""
    import inspect

    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            names |= {p for p in inspect.signature(vars(klass)["__init__"]).parameters
                      if p not in ("self", "kw", "kwargs", "model_args")}
        if klass is EngineAdapter:
            break
    return names


THIRD_PERSON_EYE_M = 2.2
FIRST_PERSON_EYE_M = 1.6
AVATAR_DEPTH_M = 2.5


def transform_intrinsics_crop(k, src_size, dst_size) -> tuple[list[float], dict]:
    """Centre-crop the source image to the destination aspect, then scale: returns native [fx, fy, cx, cy] and the
    transform (crop box in source pixels, scale). Pixel-centre convention: a pixel's centre is at integer coords."""
    fx, fy, cx, cy = map(float, k)
    sw, sh = src_size
    dw, dh = dst_size
    if sw / sh > dw / dh:  # source wider: crop width
        cw, ch = sh * dw / dh, float(sh)
    else:
        cw, ch = float(sw), sw * dh / dw
    x0, y0 = (sw - cw) / 2, (sh - ch) / 2
    s = dw / cw
    # pixel centres: u_dst + 0.5 = s * (u_src + 0.5 - x0)
    out = [fx * s, fy * s, (cx + 0.5 - x0) * s - 0.5, (cy + 0.5 - y0) * s - 0.5]
    return out, {"policy": "crop", "crop_xywh": [x0, y0, cw, ch], "scale": s, "src_size": [sw, sh], "dst_size": [dw, dh]}


class EngineAdapter(Adapter):
    info = AdapterInfo(
        name="engine", version="1.0", width=256, height=256, fps=16.0, fps_source="engine (exact)",
        chunk_frames=16, first_chunk_frames=16, duration_unit="frames", control="poses",
        pose_convention="c2w OpenCV (absolute, metres)", intrinsics_regime=4, aspect_policy="crop",
        context_policies=(), hf_ids=(), repository="worldgate (built in)", licence="same as worldgate",
        integration="engine", image_conditioned=False,
        notes="CPU voxel world with ground truth: renders exactly the commanded poses",
    )

    #: model args beyond the constructor's parameters: none (generate checks keys against this, see runner.py)
    MODEL_ARGS: tuple[str, ...] = ()

    def __init__(self, width: int = 256, height: int = 256, fps: float = 16.0, chunk: int = 16, fog_m: float = 28.0,
                 threads: int = 0, sample: int = 4, **model_args):
        if model_args:  # a subclass takes its own args before calling here: anything left is unknown
            k = min(model_args)
            raise did_you_mean(f"{self.info.name} model arg", k, _init_params(type(self)))
        side = "ENGINE_MIN_SIDE, ENGINE_MAX_SIDE"
        width = _arg("width", width, int, ENGINE_MIN_SIDE, ENGINE_MAX_SIDE, side)
        height = _arg("height", height, int, ENGINE_MIN_SIDE, ENGINE_MAX_SIDE, side)
        if width % 2 or height % 2:
            raise AdapterError(f"engine: width and height must be even (video encoders need even sides), got "
                               f"{width}x{height}")
        fps = _arg("fps", fps, float, ENGINE_MIN_FPS, ENGINE_MAX_FPS, "ENGINE_MIN_FPS, ENGINE_MAX_FPS")
        chunk = _arg("chunk", chunk, int, 1, ENGINE_MAX_CHUNK, "ENGINE_MAX_CHUNK")
        fog_m = _arg("fog_m", fog_m, float, None, ENGINE_MAX_FOG_M, "ENGINE_MAX_FOG_M")
        super().__init__(width=width, height=height, fps=fps, chunk=chunk, fog_m=fog_m)
        self.threads = _arg("threads", threads, int, 0, ENGINE_MAX_THREADS, "ENGINE_MAX_THREADS")  # 1: one core; 0: all
        # ray grid in pixels (a power of two); 1 traces every pixel
        self.sample = _arg("sample", sample, int, 1, ENGINE_MAX_SAMPLE, "ENGINE_MAX_SAMPLE")
        if self.sample & (self.sample - 1):
            raise AdapterError(f"engine: sample must be a power of two in [1, {ENGINE_MAX_SAMPLE}] "
                               f"(ENGINE_MAX_SAMPLE), got {sample}")
        self.width, self.height, self.fps, self.chunk, self.fog_m = width, height, fps, chunk, fog_m
        self._worlds: dict = {}

    # ------------------------------------------------------------------------------------------------ plan
    def plan(self, case) -> NativeInputs:
        if case.image is not None or case.scene is None:
            raise AdapterError(
                f"engine renders its own scenes and cannot be conditioned on an image (case {case.id} of suite "
                f"{case.suite!r}); run an Engine suite such as 'worldmark-engine' instead"
            )
        seed = case.scene.get("seed") if isinstance(case.scene, dict) else None
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= ENGINE_MAX_SCENE_SEED:
            raise AdapterError(f"engine: case {case.id}'s scene needs a 'seed', an integer in [0, "
                               f"{ENGINE_MAX_SCENE_SEED}] (ENGINE_MAX_SCENE_SEED), got {seed!r:.40}")
        traj, fps = case.trajectory, self.fps
        n = traj.n_frames(fps)
        poses = traj.poses(fps, n)
        size = (self.width, self.height)
        if case.intrinsics is not None and case.image_size is not None:
            k, transform = transform_intrinsics_crop(case.intrinsics, case.image_size, size)
            case_fov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0])
        else:
            f = self.width / (2 * math.tan(math.radians(66.0) / 2))
            k, transform, case_fov = [f, f, (self.width - 1) / 2, (self.height - 1) / 2], {"policy": "default 66 deg"}, None
        # the path (and what the world must keep clear of) in world X, Z
        fine = traj.poses(fps * 4, traj.n_frames(fps * 4))
        arrays = {
            "c2w": poses.astype(np.float64),
            "intrinsics": np.asarray(k, np.float64),
            "times": np.arange(n, dtype=np.float64) / fps,
            "keepout_xz": np.concatenate([fine[:, :3, 3], poses[-1:, :3, 3]])[:, [0, 2]].astype(np.float64),
        }
        scene = dict(case.scene)
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=self.width,
            height=self.height, fps=fps, n_frames=n, segment_frames=traj.segment_frames(fps, n), arrays=arrays,
            files={"poses.npy": arrays["c2w"], "intrinsics.npy": arrays["intrinsics"],
                   "scene.json": {"scene": scene, "view": case.view}},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": case.image_size, "native": k,
                        "native_size": [self.width, self.height], "transform": transform, "case_hfov_deg": case_fov,
                        "native_hfov_deg": horizontal_fov_deg(k[0], self.width)},
            prompt=case.prompt, prompt_source=case.prompt_source,
            extra={"scene": scene, "view": case.view, "duration_s": traj.duration, "trajectory": traj.to_dict(),
                   **({"family": case.tags["family"]} if isinstance(case.tags.get("family"), str) else {})},
        )

    # ------------------------------------------------------------------------------------------------ runtime
    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self._compile_once()  # compiles or loads the cached ray caster

    def _kernel(self):
        from . import render  # deferred: numba (~0.3 s) loads at the first rollout, not on `worldgate list models`

        if self.threads == 1:
            return render.render_frame
        if self.threads > 1:
            import numba  # deferred: see render above

            numba.set_num_threads(min(self.threads, numba.config.NUMBA_NUM_THREADS))
        return render.render_frame_parallel

    def _compile_once(self):
        render_frame = self._kernel()
        if getattr(render_frame, "_worldgate_warm", False):
            return
        mat = np.zeros((8, 8, 8), np.uint8)
        z = np.zeros((8, 8, 8), np.uint16)
        lv = np.zeros((8, 8, 8), np.uint8)
        occ = np.zeros((2, 2, 2), np.uint8)
        render_frame(mat, z, lv, occ, np.zeros((2, 2, 2), np.uint64), B, 2, np.ones((2, 3), np.float32), np.zeros(2, np.int8), np.zeros(2, np.int8),
                     np.zeros(2, np.float32), np.ones((2, 3), np.float32), np.eye(3), 4.0, 4.0, 4.0, 0.25, 4.0, 4.0,
                     2.0, 2.0, 5.0, 1.0, np.ones(3), np.ones(3), np.zeros((4, 4), np.float32), np.zeros((4, 4, 3), np.uint8),
                     np.zeros((4, 4), np.float32), np.zeros((4, 4), np.int32), self.sample)
        render_frame._worldgate_warm = True

    def world_for(self, plan: NativeInputs, keepout: np.ndarray | None = None):
        scene = plan.extra["scene"]
        eye = THIRD_PERSON_EYE_M if plan.extra.get("view") == "third" else FIRST_PERSON_EYE_M
        keepout = plan.arrays["keepout_xz"] if keepout is None else keepout
        events = bool(scene.get("events", True))
        event_s = scene.get("event_s")
        mirror = bool(scene.get("mirror", False))
        key = (int(scene["seed"]), scene.get("palette", "realistic"), eye, keepout.tobytes(), events, event_s, mirror)
        if key not in self._worlds:
            self._worlds.clear()  # one world at a time: a case resets all state
            self._worlds[key] = build_world(int(scene["seed"]), scene.get("palette", "realistic"), keepout,
                                            eye_height=eye, duration_hint=float(plan.extra.get("duration_s", 20.0)),
                                            events=events, event_s=None if event_s is None else float(event_s),
                                            mirror=mirror)
        return self._worlds[key]

    def render(self, world, c2w: np.ndarray, k, t: float, with_avatar: bool = False, walk_phase: float = 0.0,
               tint: np.ndarray | None = None, out: tuple | None = None):
        """Render one frame: (rgb uint8 HxWx3, z-depth float32 HxW (inf = sky), instance ids int32 HxW), into ``out``
        (three such arrays, e.g. slices of a chunk's arrays) when given, else into new arrays."""
        render_frame = self._kernel()
        H, W = self.height, self.width
        rgb, depth, ids = out if out is not None else (np.empty((H, W, 3), np.uint8), np.empty((H, W), np.float32),
                                                       np.empty((H, W), np.int32))
        state, event_tint = self.event_state(world, t)
        tint = event_tint if tint is None else tint * event_tint
        X, Y, Z = c2w[:3, 3]
        ox, oh, oz = X / VS + NX / 2, G + (world.eye_height - Y) / VS, Z / VS + NZ / 2
        render_frame(world.mat, world.inst, world.level, world.occ, world.bits, B, G, world.palette, TEXKIND, world.inst_mode,
                     state, tint, np.ascontiguousarray(c2w[:3, :3], dtype=np.float64), ox, oh, oz, VS,
                     k[0], k[1], k[2] + 0.5, k[3] + 0.5, self.fog_m, 0.35 * self.fog_m, world.sky_top,
                     world.sky_horizon, world.clouds, rgb, depth, ids, self.sample)
        if with_avatar:
            draw_avatar(rgb, depth, ids, walk_phase, ID_AVATAR, AVATAR_DEPTH_M)
        return rgb, depth, ids

    def event_state(self, world, t: float):
        """Per-instance (state, tint) of the scene's events at time t (Engine GT: the world's own clock)."""
        return world.state_at(t)

    # hooks for Engine variants (faults, memory-limited engines): what is rendered may differ from what was asked
    def render_poses(self, plan: NativeInputs) -> np.ndarray:
        """Camera-to-world poses actually rendered (Engine GT: exactly the commanded ones)."""
        return plan.arrays["c2w"]

    def frame_tint(self, world, i: int, t: float, last_ids: np.ndarray | None) -> np.ndarray | None:
        return None

    def post_frame(self, i: int, rgb: np.ndarray) -> np.ndarray:
        return rgb

    TARGET_KINDS = ("human", "object", "event")
    #: the targets a WorldMemBench case of each family gives with its conditioning frame (the paper's Human cases
    #: name people, Object cases objects, Dynamic cases their event; Environment cases none); a case without a
    #: family gets every kind
    FAMILY_TARGET_KINDS = {"human": ("human",), "object": ("object",), "environment": (), "dynamic": ("event",)}
    TARGET_MIN_AREA = 0.004  # share of the frame a target must cover in the conditioning frame
    TARGETS_PER_KIND = 2

    @staticmethod
    def _memory_case(plan: NativeInputs) -> bool:
        """Memory targets are given for trajectories that open with a hold (phase V: the reference to remember);
        dynamic items only for scenes made for them (``event_s``: events that visibly start during V)."""
        return any(p.name == "V" for p in Trajectory.from_dict(plan.extra["trajectory"]).phases())

    def target_masks(self, world, ids: np.ndarray, kinds_wanted: tuple[str, ...] | None = None) -> dict:
        """WorldMemBench-style targets: masks of the largest people, objects and event entities visible in the
        conditioning frame (frame 0), as a benchmark gives them with its conditioning image (``kinds_wanted``: the
        case family's kinds, default all). Evaluation finds them again at revisits from the video alone."""
        H, W = ids.shape
        masks, kinds, names, iids = [], [], [], []
        for kind in (self.TARGET_KINDS if kinds_wanted is None else kinds_wanted):
            cands = []
            for e in world.entities:
                if e.kind != kind:
                    continue
                m = ids == e.iid
                area = int(m.sum())
                ys, xs = np.nonzero(m)
                if area < self.TARGET_MIN_AREA * H * W or xs.min() == 0 or ys.min() == 0 or \
                        xs.max() == W - 1 or ys.max() == H - 1:  # cut by the frame edge: not a whole target
                    continue
                cands.append((area, e.iid, e.name, m))
            for area, iid, name, m in sorted(cands, key=lambda c: (-c[0], c[1]))[: self.TARGETS_PER_KIND]:
                masks.append(m)
                kinds.append(kind)
                names.append(name)
                iids.append(iid)
        return {"masks": np.asarray(masks, bool).reshape(-1, H, W), "kinds": np.asarray(kinds, dtype="U8"),
                "names": np.asarray(names, dtype="U32"), "frame": np.asarray(0)}

    # chunk hooks (engine-memory): what the model holds in context while it generates a chunk
    def begin_rollout(self, plan: NativeInputs, c2w: np.ndarray, world, context) -> None:
        if context is not None and context.name not in self.info.context_policies:
            raise AdapterError(f"{self.info.name} has no context cache to apply policy {context.name!r} to; "
                               f"models that do: engine-memory and adapters listing it in `worldgate list models`")

    def begin_chunk(self, index: int, start: int, stop: int) -> None:
        pass

    def end_frame(self, i: int, rgb: np.ndarray, ids: np.ndarray) -> None:
        pass

    def end_chunk(self, index: int, frames: np.ndarray) -> tuple[list[int] | None, dict]:
        return None, {}

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0, with_gt: bool = False) -> Iterator[Chunk]:
        self._compile_once()
        self.seed = int(seed)
        c2w = self.render_poses(plan)
        world = self.world_for(plan, None if c2w is plan.arrays["c2w"] else _keepout(c2w))
        self.begin_rollout(plan, c2w, world, context)
        k, times = plan.arrays["intrinsics"], plan.arrays["times"]
        third = plan.extra.get("view") == "third"
        walked = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(c2w[:, :3, 3], axis=0), axis=1))])
        H, W = self.height, self.width
        # each frame is rendered straight into its chunk's arrays (no copy, no stack); without GT, depth and ids go
        # to one pair of arrays reused frame after frame (what end_frame and frame_tint read is the frame just made)
        scratch = None if with_gt else (np.empty((H, W), np.float32), np.empty((H, W), np.int32))
        ids = None
        for index, start in enumerate(range(0, plan.n_frames, self.chunk)):
            stop = min(start + self.chunk, plan.n_frames)
            self.begin_chunk(index, start, stop)
            frames = np.empty((stop - start, H, W, 3), np.uint8)
            if with_gt:
                depths, idss = np.empty((stop - start, H, W), np.float32), np.empty((stop - start, H, W), np.int32)
            for i in range(start, stop):
                t = float(times[i])
                j = i - start
                out = (frames[j], depths[j], idss[j]) if with_gt else (frames[j], *scratch)
                rgb, depth, ids = self.render(world, c2w[i], k, t, third, walked[i] / 0.7,
                                              self.frame_tint(world, i, t, ids), out=out)
                shown = self.post_frame(i, rgb)
                if shown is not out[0]:  # a fault's new picture, or a variant's own arrays
                    frames[j] = shown
                if i == 0:
                    self._first_ids, self._first_depth = ids.copy(), depth.copy()
                self.end_frame(i, frames[j], ids)
                if with_gt and depth is not out[1]:
                    depths[j], idss[j] = depth, ids
            extra = {"depth": depths, "ids": idss} if with_gt else {}
            if index == 0 and self._memory_case(plan):  # WorldMemBench-style: an initial hold V to remember
                targets = self.target_masks(world, self._first_ids,
                                            self.FAMILY_TARGET_KINDS.get(plan.extra.get("family")))
                extra["files"] = {"targets.npz": targets}
                dyn = dynamic_questions(world, targets, plan, self._first_depth) \
                    if plan.extra["scene"].get("event_s") else {}
                if dyn.get("events"):
                    extra["files"]["dynamic.json"] = dyn
            ctx, cextra = self.end_chunk(index, frames)
            yield Chunk(start=start, frames=frames, context_ids=ctx, extra={**extra, **cextra})


EVENT_WORDS = {  # what a judge is told about each Engine event, and its final state
    "grow": ("the thin tower that grows upward", "grown to its full height"),
    "vanish": ("the wall that disappears from the top down", "disappeared completely"),
    "recolor": ("the lamp whose light changes colour", "turned blue"),
}


IN_VIEW = 0.5  # share of a target's frame-0 pixels that must project inside the frame for it to be in view


def target_visibility(mask: np.ndarray, depth0: np.ndarray, c2w: np.ndarray, k) -> np.ndarray:
    """Per frame, the share of a frame-0 target's pixels (back-projected with frame 0's depth) that the commanded
    camera of that frame sees inside its image: geometry only, so it does not depend on what a model renders (a
    vanishing wall is still "in view" where it stood)."""
    fx, fy, cx, cy = np.asarray(k, np.float64)
    H, W = mask.shape
    vs, us = np.nonzero(mask)
    z = depth0[vs, us].astype(np.float64)
    ok = np.isfinite(z)
    vs, us, z = vs[ok], us[ok], z[ok]
    if len(z) == 0:
        return np.zeros(len(c2w))
    pc = np.stack([(us - cx) / fx * z, (vs - cy) / fy * z, z], 1)  # the renderer's pixel centres (render: cx + 0.5)
    pw = pc @ c2w[0][:3, :3].T + c2w[0][:3, 3]
    out = np.empty(len(c2w))
    for i, T in enumerate(c2w):
        q = (pw - T[:3, 3]) @ T[:3, :3]
        front = q[:, 2] > 1e-6
        zz = np.where(front, q[:, 2], 1.0)
        u, v = fx * q[:, 0] / zz + cx, fy * q[:, 1] / zz + cy
        out[i] = float(np.mean(front & (u >= 0) & (u < W) & (v >= 0) & (v < H)))
    return out


def first_gap(vis: np.ndarray, after: int) -> list[int] | None:
    """[leave, enter]: the last frame in view before the first frame out of view at or after ``after``, and the first
    frame in view again after it (None when the target never leaves the view, or never comes back)."""
    seen = vis >= IN_VIEW
    out = np.flatnonzero(~seen[after:])
    if len(out) == 0:
        return None
    first_out = after + int(out[0])
    back = np.flatnonzero(seen[first_out:])
    if len(back) == 0 or first_out == 0:
        return None
    return [first_out - 1, first_out + int(back[0])]


def dynamic_questions(world, targets: dict, plan: NativeInputs, depth0: np.ndarray | None = None) -> dict:
    """WorldMemBench-style dynamic memory items for the event targets of the conditioning frame: a start gate and 8
    binary questions (2 each: return progress, persistence/reset, final state, causal/physical consistency) whose
    reference answers are frozen from the world's own event schedule and the commanded phases. Where the commanded
    camera loses the target from view (``target_visibility``, needs frame 0's depth), the second return-progress
    question asks whether it changed while out of view, between the last view before and the first view after
    (the item's ``gap`` frames): what an event that pauses when unseen gets wrong."""
    traj = Trajectory.from_dict(plan.extra["trajectory"])
    phases = traj.phases()
    t_v = next((p.end_s for p in phases if p.name == "V"), 0.0)
    rets = [p.end_s for p in phases if p.name.startswith("R")]
    t_end = traj.duration
    by_iid = {e.iid: e for e in world.events}
    ent = {e.name: e for e in world.entities}
    items = []
    for u, (kind, name) in enumerate(zip(targets["kinds"], targets["names"])):
        e = ent.get(str(name))
        if str(kind) != "event" or e is None or e.iid not in by_iid or not rets:
            continue
        ev = by_iid[e.iid]
        thing, final = EVENT_WORDS[ev.kind]
        p = ev.progress
        gap = None
        if depth0 is not None:
            v_end = next((ph.frame_range(plan.fps, plan.n_frames)[1] for ph in phases if ph.name == "V"), 0)
            vis = target_visibility(targets["masks"][u], depth0, plan.arrays["c2w"], plan.arrays["intrinsics"])
            gap = first_gap(vis, v_end)
        times = plan.arrays["times"]
        q2 = ("return_progress", f"Has {thing} changed further between the end of the initial hold and the first "
                                 f"return?", p(rets[0]) - p(t_v) > 0.1)
        if gap is not None:
            q2 = ("return_progress", f"Between the last view of {thing} before the camera turned away from it and "
                                     f"the first view of it afterwards, did it change?",
                  p(float(times[gap[1]])) - p(float(times[gap[0]])) > 0.1)
        q = [
            ("return_progress", f"At the first return to the starting view, has {thing} changed compared with the "
                                f"first frame?", p(rets[0]) > 0.1),
            q2,
            ("persistence", f"At the first return, does {thing} look exactly as it did in the first frame (as if "
                            f"it had been reset)?", p(rets[0]) < 0.05),
            ("persistence", f"At a later return, is {thing} less changed than at an earlier return?", False),
            ("final_state", f"In the last frame, is {thing} still changed compared with the first frame?",
             p(t_end) > 0.1),
            ("final_state", f"In the last frame, has {thing} {final}?", p(t_end) >= 0.999),
            ("causal", f"Does {thing} change gradually, without jumping between consecutive views of it?", True),
            ("causal", f"Does anything else in the starting view change together with {thing}?", False),
        ]
        items.append({"target": u, "name": str(name), "kind": ev.kind, "t_start": ev.t_start, "t_end": ev.t_end,
                      "gap": gap,
                      "gate": {"text": f"During the initial hold (before the camera moves), does {thing} visibly "
                                       f"start to change?", "answer": bool(p(t_v) > 0.05)},
                      "questions": [{"id": i + 1, "category": c, "text": txt, "answer": bool(a)}
                                    for i, (c, txt, a) in enumerate(q)]})
    return {"events": items, "phases": [{"name": ph.name, "frames": list(ph.frame_range(plan.fps, plan.n_frames))}
                                        for ph in phases], "fps": plan.fps}


def _keepout(c2w: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(c2w[:, :3, 3][:, [0, 2]], dtype=np.float64)

