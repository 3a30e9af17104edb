"""``generate``: plan and roll out every case of a suite with one model, writing one record per case.

Resumable (complete records are skipped, stale temporary folders removed), fault tolerant (a failing case is logged
to ``jobs.jsonl`` and the run goes on; the exit status says whether any case failed), and deterministic for a seed.
Two exceptions to "the run goes on": a full disk stops the run at once (:class:`DiskFullError`: every other case
would fail the same way), and a case whose record folder is refused (a symbolic link) is reported and skipped.
Several generators may share one run folder: each case is claimed before it is written (``claims.claim_case``), so
none is written twice; a case claimed by a live other process is skipped here and said so.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import operator
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from worldgate import __version__
from worldgate.adapters import AdapterError, get_adapter
from worldgate.adapters.base import check_plan_intrinsics
from worldgate.adapters.context import make_policy
from worldgate.trajectories.core import TrajectoryError, short_repr
from worldgate.trajectories.suites import SuiteError, load_suite

import numpy as np

from .claims import claim_case, clean_stale_tmp
from .overrides import check_seed, split_overrides
from .record import views_of
from .records import RecordError, RecordWriter, git_hash, is_complete, record_dir, write_plan, write_record, write_record_file
from .video import VideoWriter, read_frames

log = logging.getLogger("worldgate.generate")


@dataclass
class GenerateResult:
    out: Path
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    #: cases a live other process was writing (its claim held): not written here, not failures
    claimed: dict[str, str] = field(default_factory=dict)
    #: cases whose record folder was refused (a symbolic link): also in ``failed``
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(OSError):
    """The disk under the run folder is full (ENOSPC or EDQUOT): the run stops, naming the folder. Its message is one
    line: what happened, where, and what to do."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:
        return self.strerror


def disk_full(e: BaseException) -> str | None:
    """What says the disk is full in ``e`` or its causes (an ``OSError`` with ENOSPC/EDQUOT, or a model's or
    encoder's message "No space left on device"), else None."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS:
            why = str(e.strerror or os.strerror(e.errno))
            return _one_line(f"{why}: {e.filename}" if e.filename else why)
        text = str(e)
        if any(p in text.lower() for p in ("no space left on device", "disk quota exceeded")):
            line = next(ln for ln in text.splitlines() if "no space left" in ln.lower() or "quota" in ln.lower())
            return _one_line(line)
        e = e.__cause__ or e.__context__
    return None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _disk_full_error(out: Path, what: str, why: str, left: int = 0) -> DiskFullError:
    rest = f"; stopped with {left} case(s) not tried" if left else ""
    return DiskFullError(f"no space left on device in {out}: {what} failed ({why}){rest}; free space there (or "
                         "give another --out) and rerun the same command: complete records are kept, no partial one is "
                         "left")


def check_limit(limit) -> int | None:
    if limit is None:
        return None
    try:
        n = operator.index(limit)
    except TypeError:
        n = 0
    if isinstance(limit, bool) or n < 1:
        raise ValueError(f"--limit must be an integer >= 1 (run the first K cases), got {short_repr(limit, 40)}")
    return n


def check_out(out: Path) -> Path:
    """The run folder: created if missing; an existing file there (or above it) is an error naming it."""
    for p in (out, *out.parents):
        if p.exists() and not p.is_dir():
            what = "is a file" if p == out else f"is below {p}, which is a file"
            raise ValueError(f"--out {out} {what}: give a folder (it is created if missing)")
    return out


def select_cases(cases, limit: int | None = None, shard: tuple[int, int] | None = None):
    if limit is not None:
        cases = cases[: max(0, int(limit))]
    if shard is not None:
        index, count = shard
        cases = cases[index::count]
    return cases


MAX_SEEDS = 100


def check_seeds(seeds) -> list[int] | None:
    """``--seeds 0,1,2``: distinct integers in [0, MAX_SEED], at most MAX_SEEDS of them (None: one seed, --seed)."""
    if seeds is None:
        return None
    if isinstance(seeds, str):
        seeds = [x for x in seeds.split(",") if x.strip()]
    out = []
    for x in seeds:
        if isinstance(x, bool) or not (isinstance(x, int) or (isinstance(x, str) and x.strip().isdigit())):
            raise ValueError(f"--seeds: {x!r} is not a whole number (e.g. --seeds 0,1,2)")
        out.append(check_seed(int(str(x).strip(), 10)))
    if not out or len(out) > MAX_SEEDS or len(set(out)) != len(out):
        raise ValueError(f"--seeds: 1 to {MAX_SEEDS} distinct seeds, got {seeds!r}")
    return out


def with_seeds(cases, seeds):
    """One case per case and seed (``<id>-seed<S>``, tags ``seed`` and ``seed_of``), or the cases as they are."""
    if not seeds:
        return cases
    return [dataclasses.replace(c, id=f"{c.id}-seed{s}", tags={**(c.tags or {}), "seed": s, "seed_of": c.id})
            for c in cases for s in seeds]


def case_set_digest(cases) -> str:
    """sha256 over every case of the suite as loaded: id, trajectory, prompt, image bytes, intrinsics, scene, tags
    (what a protocol fixes; two runs with the same digest ran the same case set)."""
    import hashlib

    h = hashlib.sha256()
    for c in cases:
        img = getattr(c, "image", None)
        try:
            img_sha = hashlib.sha256(Path(img).read_bytes()).hexdigest() if img else None
        except OSError:
            img_sha = f"unreadable:{img}"
        row = {"id": c.id, "trajectory": repr(getattr(c, "trajectory", None)), "prompt": getattr(c, "prompt", ""),
               "image": img_sha, "intrinsics": getattr(c, "intrinsics", None),
               "scene": getattr(c, "scene", None), "tags": getattr(c, "tags", None)}
        h.update(json.dumps(row, sort_keys=True, default=str).encode())
    return h.hexdigest()


def build_config(model: str, suite: str, model_args: dict, suite_args: dict, seed: int, dry_run: bool,
                 limit: int | None, trajectory_seconds: float | None, data: str | None) -> dict:
    return {
        "model": model, "model_args": model_args, "suite": suite, "suite_args": suite_args, "data": data,
        "seed": int(seed), "dry_run": bool(dry_run), "limit": limit, "trajectory_seconds": trajectory_seconds,
        "worldgate_version": __version__, "git": git_hash(),
    }


def run_generate(model: str, suite: str, out: str | Path | None = None, *, data: str | None = None,
                 limit: int | None = None, seed: int = 0, dry_run: bool = False, overrides: list[str] | None = None,
                 model_args: dict | None = None, full: bool = False, device: str = "cpu",
                 shard: tuple[int, int] | None = None, progress: bool = True, context: str | None = None,
                 budget: int | None = None, check_only: bool = False,
                 seeds: list[int] | None = None) -> GenerateResult:
    """``shard=(rank, world)``: this process's share of the cases (the CLI passes the launcher's, see dist.py).
    ``check_only``: check every argument and plan nothing (what a job-array launcher does before it submits).
    ``seeds``: one record per case and seed, ``<case>-seed<S>`` (tags ``seed`` and ``seed_of``), each rolled out with
    its own seed (``seed`` is then unused); resumable like any run.

    Every argument is checked before anything is written: unknown override keys (did-you-mean), out-of-range values,
    ``limit`` < 1, an empty suite and an ``out`` that is a file are errors."""
    margs, sargs, traj_seconds, cargs = split_overrides(model, suite, overrides, model_args)
    seed = check_seed(seed)
    limit = check_limit(limit)
    if full:
        sargs["full"] = True
    adapter = get_adapter(model, **margs)  # unknown model -> did-you-mean, before anything is written
    policy = None
    if context is not None or cargs:
        policy = make_policy(context or "full_kv", budget, **(cargs or {}))
        why = adapter.context_support(policy.name)
        if why:
            raise AdapterError(why)
    elif budget is not None:
        raise ValueError("--budget needs --context full_kv|sliding_window|fov")
    cases = load_suite(suite, data=data, **sargs)
    if not cases:
        raise SuiteError(f"suite {suite!r} has no cases")
    suite_cases, suite_digest = len(cases), case_set_digest(cases)
    seeds = check_seeds(seeds)
    cases = with_seeds(select_cases(cases, limit), seeds)
    cases = select_cases(cases, None, shard)
    if not cases:  # a launcher rank whose share is empty (fewer cases than processes)
        log.warning("no cases for shard %s of suite %s", shard, suite)
    if traj_seconds is not None:
        for c in cases:
            try:
                c.trajectory = c.trajectory.with_seconds(traj_seconds)
            except TrajectoryError as e:
                raise TrajectoryError(f"trajectory.seconds={traj_seconds:g}: case {c.id}: {e}") from None

    out = check_out(Path(out or Path("runs") / f"{model}-{suite}"))
    if check_only:
        return GenerateResult(out=out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = disk_full(e)
        if why:
            raise _disk_full_error(out, "creating the run folder", why) from None
        raise
    result = GenerateResult(out=out)
    config = build_config(model, suite, margs, sargs, seed, dry_run, limit, traj_seconds, data)
    config.update(suite_cases=suite_cases, suite_digest=suite_digest, seeds=seeds)
    config["context"] = policy.describe() if policy is not None else None
    run_json = out / "run.json"
    if not run_json.exists():  # several processes may race here: write whole, rename into place
        tmp = out / f".run.json.{os.getpid()}"
        try:
            tmp.write_text(json.dumps(config, indent=2, sort_keys=True))
            os.replace(tmp, run_json)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            why = disk_full(e)
            if why:
                raise _disk_full_error(out, "writing run.json", why) from None
            raise
    clean_stale_tmp(out)

    def done_already(d: Path) -> bool:
        return is_complete(d, "rollout") or (dry_run and is_complete(d, "plan"))

    def refuse(case_id: str, why: str) -> None:
        result.refused[case_id] = why
        result.failed[case_id] = f"refused: {why}"
        _log_job(out, case_id, "refused", 0.0, why)
        log.error("case %s refused: %s", case_id, why)

    todo = []
    for c in cases:
        try:
            d = record_dir(out, c.id)
        except RecordError as e:  # its record folder is a symbolic link: this case only
            refuse(c.id, str(e))
            continue
        if done_already(d):
            result.skipped.append(c.id)
        else:
            todo.append(c)
    loaded = False
    bar = _progress(todo, progress, f"{model} {'plan' if dry_run else 'rollout'}")
    for i, case in enumerate(bar):
        try:
            claim, owner = claim_case(out, case.id)
        except RecordError as e:
            refuse(case.id, str(e))
            continue
        except OSError as e:  # even an empty claim file needs room
            why = disk_full(e)
            if why:
                raise _disk_full_error(out, f"claiming case {case.id}", why, len(todo) - i) from None
            raise
        if claim is None:
            result.claimed[case.id] = owner
            log.warning("case %s is being written by %s into %s: skipped here (its record will be that process's); "
                        "rerun generate once it ends to pick up any case it left", case.id, owner, out)
            continue
        t0 = time.perf_counter()
        try:
            try:
                d = record_dir(out, case.id)
            except RecordError as e:  # it became a symbolic link meanwhile
                refuse(case.id, str(e))
                continue
            if done_already(d):  # another process finished it after this one listed the cases
                result.skipped.append(case.id)
                continue
            plan = adapter.plan(case)
            if policy is not None:
                plan = adapter.with_context(plan, policy)
            check_plan_intrinsics(plan)  # a plan evaluate would refuse is the adapter's defect, said here
            case_seed = int(case.tags["seed"]) if seeds else seed
            if dry_run:
                write_plan(out, case, adapter, plan, case_seed, config)
            else:
                if not loaded:
                    adapter.load(device=device)
                    loaded = True
                write_rollout(out, case, adapter, plan, case_seed, config, context=policy)
            result.done.append(case.id)
            _log_job(out, case.id, "ok", time.perf_counter() - t0)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one failing case never stops the run; it is logged with its reason
            msg = f"{type(e).__name__}: {e}"
            result.failed[case.id] = msg
            _log_job(out, case.id, "failed", time.perf_counter() - t0, msg, traceback.format_exc())
            why = disk_full(e)
            if why:  # every remaining case would fail the same way: stop, naming the folder
                raise _disk_full_error(out, f"writing the record of case {case.id}", why,
                                       len(todo) - i - 1) from None
            log.error("case %s failed: %s", case.id, msg)
        finally:
            claim.release()
    return result


def _log_job(out: Path, case_id: str, status: str, seconds: float, error: str | None = None, tb: str | None = None):
    row = {"case": case_id, "status": status, "seconds": round(seconds, 3), "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "pid": os.getpid()}
    if error:
        row["error"] = error
        row["traceback"] = tb
    line = (json.dumps(row) + "\n").encode()
    try:  # one write of the whole line (O_APPEND): lines of generators sharing the run never interleave
        fd = os.open(out / "jobs.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as e:
        if not disk_full(e):
            raise
        log.warning("jobs.jsonl in %s not written (%s): case %s %s", out, os.strerror(e.errno), case_id, status)


def _progress(items, enabled: bool, desc: str):
    if not enabled:
        return items
    return tqdm(items, desc=desc, unit="case")


def _frames_of(chunk) -> dict[str, np.ndarray]:
    """A chunk's frames per view; a runner's video file is read in batches (never whole into memory)."""
    if chunk.video is not None:
        return {"": chunk.video}
    if isinstance(chunk.frames, dict):
        return {k: np.asarray(v) for k, v in chunk.frames.items()}
    return {"": np.asarray(chunk.frames)}


def _batches(src, n: int = 64):
    if not isinstance(src, Path):
        yield src
        return
    buf = []
    for f in read_frames(src):
        buf.append(f)
        if len(buf) == n:
            yield np.stack(buf)
            buf = []
    if buf:
        yield np.stack(buf)


def _context_row(r: dict) -> dict:
    """A chunk row a model's own loop logged (one video), in the record's shape."""
    return {"chunk": int(r["chunk"]), "chunk_start": int(r["chunk_start"]), "frames": int(r["frames"]),
            "context": [int(c) for c in r["context"]],
            **({"kv_bytes": int(r["kv_bytes"])} if "kv_bytes" in r else {}),
            **({"history_tokens": int(r["history_tokens"])} if "history_tokens" in r else {})}


def write_rollout(run_dir: Path, case, adapter, plan, seed: int, config: dict, context=None) -> Path:
    """Run the adapter's rollout for ``plan``, streaming each view's frames into its video, and write the whole record
    (one view or several) atomically: the rest of the format is :func:`.records.write_record`'s."""
    t0 = time.perf_counter()
    views = views_of(adapter.info.players)
    rec = RecordWriter(run_dir, case.id)
    writers: dict[str, VideoWriter] = {}
    try:
        n = 0
        context_rows = []
        t_roll = time.perf_counter()
        for chunk in adapter.rollout(plan, context=context, seed=seed):
            if chunk.start != n:
                raise RuntimeError(f"{adapter.name}: chunk starts at frame {chunk.start}, expected {n}")
            got = _frames_of(chunk)
            if set(got) != set(views):
                raise RuntimeError(f"{adapter.name}: a chunk must give the views {sorted(views)}, got {sorted(got)}")
            lens = {}
            for v, src in got.items():
                lens[v] = 0
                for frames in _batches(src):
                    if v not in writers:
                        writers[v] = VideoWriter(rec.path(views[v]["video"]), frames.shape[2], frames.shape[1],
                                                 plan.fps)
                    writers[v].write(frames)
                    lens[v] += len(frames)
            if len(set(lens.values())) > 1:
                raise RuntimeError(f"{adapter.name}: a step must give one frame per view, got {lens}")
            n += next(iter(lens.values()))
            for name, content in (chunk.extra.get("files") or {}).items():  # e.g. targets.npz of the first frame
                write_record_file(rec.path(name), name, content)
            if chunk.context_ids is not None:
                row = {"chunk": len(context_rows), "chunk_start": chunk.start, "frames": n - chunk.start,
                       "context": [int(c) for c in chunk.context_ids]}
                if "kv_bytes" in chunk.extra:
                    row["kv_bytes"] = int(chunk.extra["kv_bytes"])
                context_rows.append(row)
            context_rows += [_context_row(r) for r in chunk.extra.get("context_rows") or ()]
        if not writers or n == 0:
            raise RuntimeError(f"{adapter.name}: rollout produced no frames for case {case.id}")
        for w in writers.values():
            w.close()
        rollout_s = time.perf_counter() - t_roll
        return write_record(rec, case, adapter, plan, seed, config, views, context, context_rows, t0, rollout_s)
    except BaseException:
        for w in writers.values():
            try:
                w.abort()
            except Exception:
                pass
        rec.abort()
        raise
