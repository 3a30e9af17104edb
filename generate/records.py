"""Rollout records: one folder per case, written to a temporary folder and renamed, so a record exists whole or not
at all.

A record folder holds::

    video.mp4          the rollout (H.264)
    poses.npy          commanded camera-to-world poses (F, 4, 4), OpenCV axes, at the produced video's frame times
    trajectory.json    segments and phases with their frame ranges in the produced video
    context.jsonl      (chunked models with a context policy) the chunk ids held in context for every chunk
    targets.npz        (when the case has targets) masks of the targets in the conditioning frame, their kinds
    native/            the exact native inputs of the model (plan.json, npz/npy/json/txt as its entry point reads)
    meta.json          requested vs achieved (measured from the file) size/fps/frames, seed, adapter, prompt
                       source, intrinsics regime and transform, git hash, resolved config; written last

``meta.json["kind"]`` is ``"rollout"`` for a rendered record and ``"plan"`` for a ``--dry-run`` one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from functools import lru_cache
from pathlib import Path

import numpy as np

from .video import VideoWriter, probe_video, sha256_file

TMP_PREFIX = ".tmp-"
RECORD_FORMAT = 1


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
    from worldgate import __version__

    return f"unknown (worldgate {__version__}, not a git checkout)"


def record_dir(run_dir: Path, case_id: str) -> Path:
    """The record folder of a case, guaranteed to lie inside ``run_dir``."""
    from worldgate.trajectories.suites import check_case_id

    check_case_id(case_id)
    run_dir = Path(run_dir).resolve()
    d = (run_dir / case_id).resolve()
    if d.parent != run_dir:
        raise ValueError(f"case id {case_id!r} would write outside the output folder {run_dir}")
    return d


def read_meta(folder: Path) -> dict | None:
    try:
        return json.loads((Path(folder) / "meta.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def is_complete(folder: Path, kind: str = "rollout") -> bool:
    meta = read_meta(folder)
    if not meta or meta.get("kind") != kind or not meta.get("complete"):
        return False
    if kind == "rollout":
        v = Path(folder) / "video.mp4"
        return v.is_file() and v.stat().st_size == meta.get("files", {}).get("video.mp4", {}).get("bytes", -1)
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_tmp(run_dir: Path) -> list[str]:
    """Remove temporary record folders left by killed runs (those whose process is gone)."""
    removed = []
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return removed
    for p in run_dir.iterdir():
        if p.is_dir() and p.name.startswith(TMP_PREFIX):
            try:
                pid = int(p.name.rsplit("-", 2)[-2])
            except (ValueError, IndexError):
                pid = -1
            if pid != os.getpid() and (pid < 0 or not _pid_alive(pid)):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p.name)
    return removed


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
        self.write_json("meta.json", meta)
        with open(self.path("meta.json"), "rb+") as f:
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


def trajectory_json(case, plan) -> dict:
    """Segments and phases of the case with their frame ranges in the produced video."""
    traj, fps, n = case.trajectory, plan.fps, plan.n_frames
    segs = []
    for i, (s, fr) in enumerate(zip(traj.segments, plan.segment_frames)):
        segs.append({"index": i, "move": s.move.value, "look": s.look.value, "seconds": s.seconds,
                     "frames": [int(fr[0]), int(fr[1])]})
    phases = [{"name": p.name, "start_s": p.start_s, "end_s": p.end_s, "segments": list(p.segments),
               "frames": list(p.frame_range(fps, n))} for p in traj.phases()]
    return {"fps": fps, "n_frames": n, "trajectory": traj.to_dict(), "segments": segs, "phases": phases}


def write_rollout(run_dir: Path, case, adapter, plan, seed: int, config: dict, context=None) -> Path:
    """Run the adapter's rollout for ``plan`` and write the whole record atomically."""
    t0 = time.perf_counter()
    rec = RecordWriter(run_dir, case.id)
    try:
        writer = None
        n = 0
        context_rows = []
        t_roll = time.perf_counter()
        for chunk in adapter.rollout(plan, context=context, seed=seed):
            frames = np.asarray(chunk.frames)
            if writer is None:
                writer = VideoWriter(rec.path("video.mp4"), frames.shape[2], frames.shape[1], plan.fps)
            if chunk.start != n:
                raise RuntimeError(f"{adapter.name}: chunk starts at frame {chunk.start}, expected {n}")
            writer.write(frames)
            n += len(frames)
            for name, content in (chunk.extra.get("files") or {}).items():  # e.g. targets.npz of the first frame
                _write_record_file(rec.path(name), name, content)
            if chunk.context_ids is not None:
                row = {"chunk": len(context_rows), "chunk_start": chunk.start, "frames": len(frames),
                       "context": [int(c) for c in chunk.context_ids]}
                if "kv_bytes" in chunk.extra:
                    row["kv_bytes"] = int(chunk.extra["kv_bytes"])
                context_rows.append(row)
        if writer is None:
            raise RuntimeError(f"{adapter.name}: rollout produced no frames for case {case.id}")
        writer.close()
        rollout_s = time.perf_counter() - t_roll
        achieved = probe_video(rec.path("video.mp4"))
        poses = plan.arrays.get("c2w")
        if poses is None or len(poses) != achieved.frames:
            poses = case.trajectory.poses(achieved.fps or plan.fps, achieved.frames)
        np.save(rec.path("poses.npy"), np.asarray(poses, np.float64), allow_pickle=False)
        rec.write_json("trajectory.json", trajectory_json(case, plan))
        if getattr(case, "targets", None) and not rec.path("targets.npz").exists():
            _write_record_file(rec.path("targets.npz"), "targets.npz",
                               case_targets(case, adapter.info.aspect_policy, (achieved.width, achieved.height)))
        if getattr(case, "dynamic", None) and not rec.path("dynamic.json").exists():
            rec.write_json("dynamic.json", case_dynamic(case, plan))
        if context_rows:
            rec.path("context.jsonl").write_text("".join(json.dumps(r) + "\n" for r in context_rows))
        plan.write(rec.path("native"))
        caveats = list(plan.caveats) + achieved_caveats(achieved, plan)
        meta = _base_meta("rollout", case, adapter, plan, seed, config)
        meta.update({
            "context": context.describe() if context is not None else None,
            "achieved": achieved.to_dict(),
            "caveats": caveats,
            "timing": {"rollout_s": rollout_s, "total_s": time.perf_counter() - t0},
        })
        return rec.commit(meta)
    except BaseException:
        try:
            if writer is not None:
                writer.close()
        except Exception:
            pass
        rec.abort()
        raise


def transform_mask(mask: np.ndarray, policy: str, size: tuple[int, int]) -> np.ndarray:
    """A mask in the conditioning image's pixels, put through the model's aspect-ratio policy (``crop``: centre
    crop to the native aspect, then resize; ``pad``: letterbox; ``stretch``/other: resize) to the video's size."""
    import cv2

    W, H = size
    h, w = mask.shape
    m = mask.astype(np.uint8)
    if policy == "crop":
        if w / h > W / H:
            cw = int(round(h * W / H))
            m = m[:, (w - cw) // 2:(w - cw) // 2 + cw]
        else:
            ch = int(round(w * H / W))
            m = m[(h - ch) // 2:(h - ch) // 2 + ch]
    elif policy == "pad":
        if w / h > W / H:
            ph = int(round(w * H / W)) - h
            m = np.pad(m, ((ph // 2, ph - ph // 2), (0, 0)))
        else:
            pw = int(round(h * W / H)) - w
            m = np.pad(m, ((0, 0), (pw // 2, pw - pw // 2)))
    return cv2.resize(m, (W, H), interpolation=cv2.INTER_NEAREST).astype(bool)


def case_targets(case, policy: str, size: tuple[int, int]) -> dict:
    """targets.npz of a user case: its masks (PNG, non-zero = target) in the produced video's frame."""
    from PIL import Image

    masks, kinds, names = [], [], []
    for i, t in enumerate(case.targets):
        with Image.open(t["mask"]) as im:
            m = np.asarray(im.convert("L")) > 0
        masks.append(transform_mask(m, policy, size))
        kinds.append(t["kind"])
        names.append(t.get("name") or f"{t['kind']}-{i}")
    return {"masks": np.asarray(masks, bool), "kinds": np.asarray(kinds, dtype="U8"),
            "names": np.asarray(names, dtype="U32"), "frame": np.asarray(0)}


def case_dynamic(case, plan) -> dict:
    """dynamic.json of a user case: its item (gate + 8 frozen questions) and the phases in the produced video."""
    d = case.dynamic
    target = int(d.get("target", 0))
    item = {"target": target, "name": d.get("name", f"event-{target}"), "kind": d.get("kind", "event"),
            "gate": d["gate"], "questions": [dict(q, id=i + 1) for i, q in enumerate(d["questions"])]}
    phases = [{"name": p.name, "frames": list(p.frame_range(plan.fps, plan.n_frames))} for p in case.trajectory.phases()]
    return {"events": [item], "phases": phases, "fps": plan.fps}


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


def _write_record_file(path: Path, name: str, content) -> None:
    from worldgate.adapters.base import _file_bytes

    if path.name in ("video.mp4", "meta.json", "poses.npy", "trajectory.json") or ".." in Path(name).parts:
        raise ValueError(f"an adapter may not write record file {name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_file_bytes(name, content))


def write_plan(run_dir: Path, case, adapter, plan, seed: int, config: dict) -> Path:
    """``--dry-run``: write only the native inputs (and their description) as a ``plan`` record."""
    rec = RecordWriter(run_dir, case.id)
    try:
        plan.write(rec.path("native"))
        rec.write_json("trajectory.json", trajectory_json(case, plan))
        np.save(rec.path("poses.npy"), case.trajectory.poses(plan.fps, plan.n_frames), allow_pickle=False)
        meta = _base_meta("plan", case, adapter, plan, seed, config)
        meta["caveats"] = list(plan.caveats)
        return rec.commit(meta)
    except BaseException:
        rec.abort()
        raise


def _base_meta(kind, case, adapter, plan, seed, config) -> dict:
    from worldgate import __version__

    return {
        "kind": kind,
        "case_id": case.id,
        "suite": case.suite,
        "case": case.to_dict(),
        "adapter": {"name": adapter.info.name, "version": adapter.info.version, "info": adapter.info.to_dict()},
        "requested": {"width": plan.width, "height": plan.height, "fps": plan.fps, "frames": plan.n_frames},
        "seed": int(seed),
        "prompt": plan.prompt,
        "prompt_source": plan.prompt_source,
        "intrinsics": plan.intrinsics,
        "plan_fingerprint": plan.fingerprint(),
        "worldgate_version": __version__,
        "git": git_hash(),
        "config": config,
    }


def load_record(folder: Path) -> dict:
    """meta + commanded poses + trajectory description of a complete record (what ``evaluate`` reads)."""
    folder = Path(folder)
    meta = read_meta(folder)
    if meta is None:
        raise FileNotFoundError(f"{folder} is not a record (no readable meta.json)")
    out = {"meta": meta, "dir": folder}
    out["trajectory"] = json.loads((folder / "trajectory.json").read_text())
    out["poses"] = np.load(folder / "poses.npy", allow_pickle=False)
    return out


def list_records(run_dir: Path, kind: str = "rollout") -> list[Path]:
    run_dir = Path(run_dir)
    return sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.name.startswith(".") and is_complete(p, kind))
