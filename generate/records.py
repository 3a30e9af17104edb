"""The record format — its one owner: writing, reading, completeness, kinds and views.

A record is one folder per case, written to a temporary folder and renamed, so it exists whole or not at all. It has
one view (most models) or several (two-player models: views ``A`` and ``B``, frame i of both at the same step); the
views are the only difference. Every reader opens a record through :func:`.record.open_record` (files confined and
regular, sha256 against meta.json, pose counts; :func:`load_record` is it as a dict), and finds records through
:func:`is_complete` and :func:`candidate_records`; meta.json's typed, versioned model is :class:`.record.RecordMeta`,
and the file names are spelled once in :mod:`.record_files`. The model's rollout loop is ``generate.runner``'s
(``write_rollout``); this module writes the rest (:func:`write_record`). A record folder holds::

    video.mp4          the rollout (H.264); with two views video_a.mp4 and video_b.mp4
    poses.npy          commanded camera-to-world poses (F, 4, 4), OpenCV axes, at the produced video's frame times;
                       with two views poses_a.npy and poses_b.npy (both players on the shared map)
    trajectory.json    segments and phases with their frame ranges in the produced video (two views: each player's
                       segments, the task, visibility and checks)
    actions.json       (two views) both players' action schedules, interactions and the per-step action table
    context.jsonl      (chunked models with a context policy) the chunk ids held in context for every chunk
    targets.npz        (when the case has targets) masks of the targets in the conditioning frame, their kinds
    native/            the exact native inputs of the model (plan.json, npz/npy/json/txt as its entry point reads)
    meta.json          requested vs achieved (measured from the file) size/fps/frames, seed, adapter, prompt
                       source, intrinsics regime and transform, git hash, resolved config; written last

``meta.json["kind"]`` is ``"rollout"`` for a rendered record and ``"plan"`` for a ``--dry-run`` one;
``meta.json["views"]`` names each view's video and poses (records of format 1 had none: one view; two-view ones said
kind ``"rollout-2p"``); ``meta.json["record_format"]`` is 3 (:data:`.record.RECORD_FORMAT`), older ones are migrated
on reading (:func:`.record.migrate_meta`).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
import uuid
from functools import lru_cache
from pathlib import Path

import numpy as np

from worldgate import __version__
from worldgate.adapters.base import file_bytes
from worldgate.trajectories.suites import check_case_id

from .case_files import case_dynamic, case_targets, transform_mask  # noqa: F401  (part of the record API)
from .claims import CLAIM_PREFIX, CaseClaim, claim_case, clean_stale_tmp  # noqa: F401  (part of the record API)
from .provenance import environment
from .record import (  # noqa: F401  (part of the record API)
    LEGACY_KINDS, ONE_VIEW, RECORD_FORMAT, TWO_VIEWS, open_record, parse_meta, read_meta, read_meta_reason,
    record_kind, record_views, views_of,
)
from .record_files import (  # noqa: F401  (part of the record API)
    ACTIONS, CONTEXT, DYNAMIC, MAX_ARRAY_BYTES, MAX_JSON_BYTES, META, NATIVE, TARGETS, TMP_PREFIX, TRAJECTORY,
    RecordError, check_record_file, link_target, read_record_array, read_record_bytes, read_record_json,
    record_member, sha256_record_file,
)
from .video import probe_video, sha256_file


@lru_cache(maxsize=1)
def git_hash() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        h = out.stdout.strip()
        if out.returncode == 0 and h:
            dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return h + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return f"unknown (worldgate {__version__}, not a git checkout)"


def record_dir(run_dir: Path, case_id: str) -> Path:
    """The record folder of a case, guaranteed to lie inside ``run_dir``: a record folder that is a symbolic link
    is refused (:class:`RecordError` naming it), never followed or replaced."""
    check_case_id(case_id)
    run_dir = Path(run_dir).resolve()
    d = run_dir / case_id
    if d.parent != run_dir:
        raise ValueError(f"case id {case_id!r} would write outside the output folder {run_dir}")
    if d.is_symlink():
        raise RecordError(f"the record folder {d} is a symbolic link (to {link_target(d)}): records are written "
                          "only as real folders inside the run; remove the link (or move the folder it points to "
                          "into its place) and rerun")
    return d


def is_complete(folder: Path, kind: str = "rollout") -> bool:
    """A whole record of ``kind``: meta.json written last, and (rollouts) every view's video of the recorded size.
    A folder that is a symbolic link, or a video that is a link or not a regular file, is never complete."""
    meta = read_meta(folder)
    if not meta or record_kind(meta) != kind or not meta.get("complete"):
        return False
    if kind == "rollout":
        files = meta.get("files") or {}
        if not isinstance(files, dict):
            return False
        for v in record_views(meta).values():
            try:
                f = record_member(folder, v["video"])
                st = os.lstat(f)
            except (RecordError, OSError):
                return False
            entry = files.get(v["video"])
            if not stat.S_ISREG(st.st_mode) or not isinstance(entry, dict) or st.st_size != entry.get("bytes", -1):
                return False
    return True


def candidate_records(run: Path) -> list[Path]:
    """Every folder of a run that claims to be a rollout record, complete or not (``evaluate`` reports the broken
    ones with their reason instead of skipping them silently); a folder with a video or a meta.json but no readable
    meta.json counts, and so does a symbolic link to a folder (never read through: its readers refuse it)."""
    out = []
    for p in sorted(Path(run).iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_symlink():
            if p.is_dir():  # reported with the reason (read_meta_reason, open_record), never followed
                out.append(p)
            continue
        if not p.is_dir():
            continue
        meta = read_meta(p)
        if meta is None:
            if os.path.lexists(p / "video.mp4") or os.path.lexists(p / "meta.json"):
                out.append(p)
            continue
        if record_kind(meta) == "rollout":
            out.append(p)
    return out


class RecordWriter:
    """Writes one record into ``run_dir/.tmp-<case>-<pid>-<rand>`` and renames it into place on :meth:`commit`."""

    def __init__(self, run_dir: Path, case_id: str):
        self.final = record_dir(run_dir, case_id)
        self.tmp = self.final.parent / f"{TMP_PREFIX}{case_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.tmp.mkdir(parents=True)
        self.case_id = case_id

    def path(self, name: str) -> Path:
        return self.tmp / name

    def write_json(self, name: str, obj) -> None:
        self.path(name).write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default))

    def commit(self, meta: dict) -> Path:
        files = {}
        for p in sorted(self.tmp.rglob("*")):
            if p.is_file():
                rel = str(p.relative_to(self.tmp))
                files[rel] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        meta = dict(meta, files=files, complete=True, record_format=RECORD_FORMAT)
        parse_meta(meta, self.case_id, strict=True)  # a meta.json evaluate would refuse is never written
        self.write_json(META, meta)
        with open(self.path(META), "rb+") as f:
            os.fsync(f.fileno())
        if self.final.exists():  # an incomplete or dry-run record of the same case is replaced
            trash = self.final.parent / f"{TMP_PREFIX}old-{self.case_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            os.rename(self.final, trash)
            os.rename(self.tmp, self.final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(self.tmp, self.final)
        return self.final

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _phase_frames(phase, plan, fps: float, n: int) -> list[int]:
    """A phase's frames in the produced video: from its segments' frame ranges in the plan (which say where the model
    really puts them: ABot-World's first block, Matrix-Game 1.0's still latents, whole 33-frame actions), else from
    its times (identical for the Engine)."""
    segs = list(phase.segments)
    if segs and max(segs) < len(plan.segment_frames):
        return [int(plan.segment_frames[min(segs)][0]), int(plan.segment_frames[max(segs)][1])]
    return list(phase.frame_range(fps, n))


def trajectory_json(case, plan) -> dict:
    """Segments and phases of the case with their frame ranges in the produced video."""
    traj, fps, n = case.trajectory, plan.fps, plan.n_frames
    segs = []
    for i, (s, fr) in enumerate(zip(traj.segments, plan.segment_frames)):
        segs.append({"index": i, "move": s.move.value, "look": s.look.value, "seconds": s.seconds,
                     "frames": [int(fr[0]), int(fr[1])]})
    phases = [{"name": p.name, "start_s": p.start_s, "end_s": p.end_s, "segments": list(p.segments),
               "frames": _phase_frames(p, plan, fps, n)} for p in traj.phases()]
    return {"fps": fps, "n_frames": n, "trajectory": traj.to_dict(), "segments": segs, "phases": phases}


def trajectory_json_players(case, plan) -> dict:
    """Two views: both players' segments with their frame ranges in the produced videos, plus the task."""
    actions = plan.files[ACTIONS]
    players = {}
    for p, sched in case.players.items():
        segs = []
        for i, (s, fr) in enumerate(zip(sched.segments, actions["segment_frames"][p])):
            segs.append(dict(s.to_dict(), index=i, frames=[int(fr[0]), int(fr[1])]))
        players[p] = {"start": list(sched.start), "yaw_deg": sched.yaw_deg, "trajectory": sched.trajectory().to_dict(),
                      "segments": segs}
    return {"fps": plan.fps, "n_frames": plan.n_frames, "players": players, "task": case.task,
            "visibility": case.visibility, "checks": case.checks, "interactions": actions["interactions"]}


def _commanded(case, plan, view: str, frames: int, fps: float):
    """The commanded poses of a view at the produced video's frame times (re-integrated when the model wrote
    another number of frames than planned) and the caveat saying so."""
    key = "c2w" if view == "" else f"c2w_{view.lower()}"
    poses = plan.arrays.get(key)
    if poses is not None and len(poses) == frames:
        return poses, None
    traj = case.trajectory if view == "" else case.players[view]
    note = None if poses is None or view == "" else (
        f"view {view}: achieved {frames} frames, commanded poses for {len(poses)}; poses re-integrated at the "
        "achieved frame times")
    return traj.poses(fps, frames), note


def write_record(rec: "RecordWriter", case, adapter, plan, seed: int, config: dict, views: dict, context,
                 context_rows: list, t0: float, rollout_s: float) -> Path:
    """The rest of a rollout record once its videos are written and closed (``generate.runner.write_rollout`` runs the
    model into them): each view's commanded poses, the trajectory (and actions), targets, dynamic events, context
    rows, the native inputs and meta.json, then the rename into place."""
    achieved = {v: probe_video(rec.path(views[v]["video"])) for v in views}
    caveats = list(plan.caveats)
    for v, a in achieved.items():
        poses, note = _commanded(case, plan, v, a.frames, a.fps or plan.fps)
        np.save(rec.path(views[v]["poses"]), np.asarray(poses, np.float64), allow_pickle=False)
        caveats += ([note] if note else []) + achieved_caveats(a, plan, prefix=f"view {v}: " if v else "")
    if views is TWO_VIEWS:
        rec.write_json(ACTIONS, plan.files[ACTIONS])
        rec.write_json(TRAJECTORY, trajectory_json_players(case, plan))
    else:
        rec.write_json(TRAJECTORY, trajectory_json(case, plan))
        a = achieved[""]
        if getattr(case, "targets", None) and not rec.path(TARGETS).exists():
            write_record_file(rec.path(TARGETS), TARGETS, case_targets(case, adapter.info.aspect_policy,
                                                                      (a.width, a.height)))
        if getattr(case, "dynamic", None) and not rec.path(DYNAMIC).exists():
            rec.write_json(DYNAMIC, case_dynamic(case, plan))
    if context_rows:
        rec.path(CONTEXT).write_text("".join(json.dumps(r) + "\n" for r in context_rows))
    plan.write(rec.path(NATIVE), seed=None if adapter.info.no_seed else seed)
    meta = _base_meta("rollout", case, adapter, plan, seed, config, views)
    meta.update({
        "context": context.describe() if context is not None else None,
        "achieved": achieved[""].to_dict() if views is ONE_VIEW else {v: a.to_dict() for v, a in achieved.items()},
        "caveats": caveats,
        "timing": {"rollout_s": rollout_s, "total_s": time.perf_counter() - t0},
    })
    return rec.commit(meta)


def achieved_caveats(achieved, plan, prefix: str = "") -> list[str]:
    """What the written file holds where it differs from what was requested (frames, fps, size)."""
    out = []
    if achieved.frames != plan.n_frames:
        out.append(f"{prefix}achieved {achieved.frames} frames, requested {plan.n_frames}")
    if abs(achieved.fps - plan.fps) > 1e-3:
        out.append(f"{prefix}achieved {achieved.fps} fps, requested {plan.fps}")
    if (achieved.width, achieved.height) != (plan.width, plan.height):
        out.append(f"{prefix}achieved {achieved.width}x{achieved.height}, requested {plan.width}x{plan.height}")
    return out


def write_record_file(path: Path, name: str, content) -> None:
    """An adapter's own record file (e.g. targets.npz of the first frame): never one of the format's files."""
    reserved = {META, TRAJECTORY, ACTIONS} | {f for v in (*ONE_VIEW.values(), *TWO_VIEWS.values())
                                                                   for f in v.values()}
    if path.name in reserved or Path(name).is_absolute() or ".." in Path(name).parts:
        raise ValueError(f"an adapter may not write record file {name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(file_bytes(name, content))


def write_plan(run_dir: Path, case, adapter, plan, seed: int, config: dict) -> Path:
    """``--dry-run``: write only the native inputs (command.txt with the run's seed), their description and the
    commanded poses as a ``plan`` record."""
    views = views_of(adapter.info.players)
    rec = RecordWriter(run_dir, case.id)
    try:
        plan.write(rec.path(NATIVE), seed=None if adapter.info.no_seed else seed)
        if views is TWO_VIEWS:
            rec.write_json(ACTIONS, plan.files[ACTIONS])
            rec.write_json(TRAJECTORY, trajectory_json_players(case, plan))
        else:
            rec.write_json(TRAJECTORY, trajectory_json(case, plan))
        for v in views:
            poses = plan.arrays.get(f"c2w_{v.lower()}") if v else None
            if poses is None:
                poses = case.trajectory.poses(plan.fps, plan.n_frames)
            np.save(rec.path(views[v]["poses"]), np.asarray(poses, np.float64), allow_pickle=False)
        meta = _base_meta("plan", case, adapter, plan, seed, config, views)
        meta["caveats"] = list(plan.caveats)
        return rec.commit(meta)
    except BaseException:
        rec.abort()
        raise


def _base_meta(kind, case, adapter, plan, seed, config, views) -> dict:
    no_seed = adapter.info.no_seed
    meta = {
        "kind": kind,
        "case_id": case.id,
        "suite": case.suite,
        "case": case.to_dict(),
        "adapter": {"name": adapter.info.name, "version": adapter.info.version, "info": adapter.info.to_dict()},
        "requested": {"width": plan.width, "height": plan.height, "fps": plan.fps, "frames": plan.n_frames},
        "seed": None if no_seed else int(seed),
        "prompt": plan.prompt,
        "prompt_source": plan.prompt_source,
        "intrinsics": plan.intrinsics,
        "plan_fingerprint": plan.fingerprint(),
        "worldgate_version": __version__,
        "git": git_hash(),
        "config": config,
        "views": views,
        "provenance": environment(),
        "model_source": adapter.provenance(),
    }
    if no_seed:
        meta["seed_note"] = f"{adapter.info.name} takes no seed: {no_seed}"
    if views is TWO_VIEWS:
        meta["players"] = list(views)
    return meta


def load_record(folder: Path) -> dict:
    """meta, trajectory and commanded poses of a complete record, verified by :func:`.record.open_record` (the one
    reader): ``poses`` is the (F, 4, 4) array of a one-view record, ``{view: array}`` with several views (then
    ``actions`` holds the schedules too). FileNotFoundError where there is no readable meta.json, else RecordError."""
    folder = Path(folder)
    meta, why = read_meta_reason(folder)
    if meta is None:
        raise FileNotFoundError(f"{folder} is not a record (no readable meta.json: {why})")
    r = open_record(folder)
    out = {"meta": r.meta, "dir": folder, "views": r.info.views, "trajectory": r.trajectory, "record": r}
    out["poses"] = r.views[""].poses if r.one_view else {v: x.poses for v, x in r.views.items()}
    if r.actions is not None:
        out["actions"] = r.actions
    return out


def list_records(run_dir: Path, kind: str = "rollout") -> list[Path]:
    """Complete records of ``kind`` in a run (one view or several); a folder that is a symbolic link is not one."""
    run_dir = Path(run_dir)
    return sorted(p for p in run_dir.iterdir()
                  if not p.name.startswith(".") and not p.is_symlink() and p.is_dir() and is_complete(p, kind))
