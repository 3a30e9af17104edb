"""Two-view records (MultiWorldBench): one folder per case, written whole or not at all, like single-view records.

A two-view record folder holds::

    video_a.mp4, video_b.mp4   player A's and player B's views (H.264), frame i of both at the same step
    poses_a.npy, poses_b.npy   both players' commanded camera-to-world poses (F, 4, 4) on the shared map, OpenCV axes
    actions.json               both players' action schedules (segments: move, look, seconds, and the interaction
                               fired at a segment's start: place with a material / destroy, aimed at a marked column,
                               cells or an occluder), the interactions with the frame each acts from, and the
                               per-step action table (one row per frame: {"A": action, "B": action})
    trajectory.json            fps, frames, each player's segments with their frame ranges, task, visibility, checks
    native/                    the model's exact native inputs (plan.json + files)
    meta.json                  kind "rollout-2p"; requested vs achieved (measured from each written file) size, fps and
                               frames per view; seed, adapter, prompt source, intrinsics, git hash, config; written last
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .records import RecordWriter, _base_meta, achieved_caveats, read_meta
from .video import VideoWriter, probe_video

KIND = "rollout-2p"
VIEWS = {"A": "video_a.mp4", "B": "video_b.mp4"}
POSES = {"A": "poses_a.npy", "B": "poses_b.npy"}


def is_two_view(folder: Path) -> bool:
    meta = read_meta(folder)
    return bool(meta) and meta.get("kind") == KIND


def is_complete_2p(folder: Path) -> bool:
    meta = read_meta(folder)
    if not meta or meta.get("kind") != KIND or not meta.get("complete"):
        return False
    files = meta.get("files", {})
    for name in VIEWS.values():
        v = Path(folder) / name
        if not v.is_file() or v.stat().st_size != files.get(name, {}).get("bytes", -1):
            return False
    return True


def trajectory_json_2p(case, plan) -> dict:
    """Both players' segments with their frame ranges in the produced videos, plus the task description."""
    actions = plan.files["actions.json"]
    players = {}
    for p, sched in case.players.items():
        segs = []
        for i, (s, fr) in enumerate(zip(sched.segments, actions["segment_frames"][p])):
            segs.append(dict(s.to_dict(), index=i, frames=[int(fr[0]), int(fr[1])]))
        players[p] = {"start": list(sched.start), "yaw_deg": sched.yaw_deg, "trajectory": sched.trajectory().to_dict(),
                      "segments": segs}
    return {"fps": plan.fps, "n_frames": plan.n_frames, "players": players, "task": case.task,
            "visibility": case.visibility, "checks": case.checks, "interactions": actions["interactions"]}


def write_rollout_2p(run_dir: Path, case, adapter, plan, seed: int, config: dict, context=None) -> Path:
    """Run a two-player adapter's rollout for ``plan`` and write the two-view record atomically."""
    t0 = time.perf_counter()
    rec = RecordWriter(run_dir, case.id)
    writers: dict = {}
    try:
        n = 0
        t_roll = time.perf_counter()
        for chunk in adapter.rollout(plan, context=context, seed=seed):
            if chunk.start != n:
                raise RuntimeError(f"{adapter.name}: chunk starts at frame {chunk.start}, expected {n}")
            lens = {p: len(chunk.frames[p]) for p in VIEWS}
            if lens["A"] != lens["B"]:
                raise RuntimeError(f"{adapter.name}: a step must give one frame per player, got {lens}")
            for p, name in VIEWS.items():
                frames = np.asarray(chunk.frames[p])
                if p not in writers:
                    writers[p] = VideoWriter(rec.path(name), frames.shape[2], frames.shape[1], plan.fps)
                writers[p].write(frames)
            n += lens["A"]
        if not writers:
            raise RuntimeError(f"{adapter.name}: rollout produced no frames for case {case.id}")
        for w in writers.values():
            w.close()
        rollout_s = time.perf_counter() - t_roll
        achieved = {p: probe_video(rec.path(name)) for p, name in VIEWS.items()}
        caveats = list(plan.caveats)
        for p, key in (("A", "c2w_a"), ("B", "c2w_b")):
            poses = plan.arrays[key]
            a = achieved[p]
            if len(poses) != a.frames:
                caveats.append(f"view {p}: achieved {a.frames} frames, commanded poses for {len(poses)}; poses "
                               "re-integrated at the achieved frame times")
                poses = case.players[p].poses(a.fps or plan.fps, a.frames)
            np.save(rec.path(POSES[p]), np.asarray(poses, np.float64), allow_pickle=False)
            caveats += achieved_caveats(a, plan, prefix=f"view {p}: ")
        rec.write_json("actions.json", plan.files["actions.json"])
        rec.write_json("trajectory.json", trajectory_json_2p(case, plan))
        plan.write(rec.path("native"))
        meta = _base_meta(KIND, case, adapter, plan, seed, config)
        meta.update({
            "players": ["A", "B"],
            "views": {p: {"video": VIEWS[p], "poses": POSES[p]} for p in VIEWS},
            "achieved": {p: achieved[p].to_dict() for p in VIEWS},
            "caveats": caveats,
            "timing": {"rollout_s": rollout_s, "total_s": time.perf_counter() - t0},
        })
        return rec.commit(meta)
    except BaseException:
        for w in writers.values():
            try:
                w.close()
            except Exception:
                pass
        rec.abort()
        raise


def write_plan_2p(run_dir: Path, case, adapter, plan, seed: int, config: dict) -> Path:
    """``--dry-run`` for a two-player adapter: the native inputs, both commanded pose sets and the action schedule."""
    rec = RecordWriter(run_dir, case.id)
    try:
        plan.write(rec.path("native"))
        rec.write_json("actions.json", plan.files["actions.json"])
        rec.write_json("trajectory.json", trajectory_json_2p(case, plan))
        for p, key in (("A", "c2w_a"), ("B", "c2w_b")):
            np.save(rec.path(POSES[p]), np.asarray(plan.arrays[key], np.float64), allow_pickle=False)
        meta = _base_meta("plan", case, adapter, plan, seed, config)
        meta.update({"players": ["A", "B"], "caveats": list(plan.caveats)})
        return rec.commit(meta)
    except BaseException:
        rec.abort()
        raise


def load_record_2p(folder: Path) -> dict:
    """meta, actions, trajectory and both commanded pose sets of a complete two-view record."""
    folder = Path(folder)
    meta = read_meta(folder)
    if meta is None or meta.get("kind") != KIND:
        raise FileNotFoundError(f"{folder} is not a two-view record (meta.json kind {KIND!r})")
    return {"meta": meta, "dir": folder,
            "actions": json.loads((folder / "actions.json").read_text()),
            "trajectory": json.loads((folder / "trajectory.json").read_text()),
            "poses": {p: np.load(folder / POSES[p], allow_pickle=False) for p in VIEWS}}
