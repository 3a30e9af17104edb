"""``generate|evaluate --launcher slurm|local``: cases spread over a job array through submitit.

The run folder is shared by every task (a cluster file system for Slurm). Task ``i`` of ``n`` takes the cases ``i``,
``i + n``, ... (``generate``'s ``shard``, as under ``accelerate launch``), so no case is done twice or lost; records are
renamed into place whole, so a task that dies leaves no partial record and resubmitting the same command (any number
of tasks) skips every complete record. ``evaluate`` fills the feature cache in the array's tasks, then the submitting
process scores every record from that cache (``--rescore``: cheap, no model), so one ``results.json`` is written.

``--launcher local`` runs the same array on this machine through submitit's ``LocalExecutor`` (one process per task),
for a single machine and for tests. ``--slurm KEY=VALUE`` (repeatable) sets the Slurm request: ``partition``,
``gpus`` (per task; default the model's ``gpus=`` or 1 for generate, 1 for evaluate), ``cpus``, ``mem`` (GB, e.g.
``mem=64`` or ``mem=64G``), ``time`` (minutes, or ``HH:MM:SS``), ``account``, ``qos``, ``constraint``, ``parallelism``
(array tasks running at once), ``nodes`` is always 1 (one case at a time per task). Failed tasks are appended to the
run's ``jobs.jsonl`` with their log paths (``<run>/.jobs/<job id>_<task>_log.err``).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from worldgate.evaluate.runner import precompute_shard
from worldgate.generate.runner import check_out, run_generate

LAUNCHERS = ("local", "slurm")
SLURM_KEYS = ("partition", "gpus", "cpus", "mem", "time", "account", "qos", "constraint", "parallelism")
DEFAULT_TASKS = {"local": 2, "slurm": 16}
MAX_TASKS = 10_000
DEFAULT_TIME_MIN = 24 * 60
INSTALL = "pip install 'submitit>=1.5' (or pip install 'worldgate[cluster]')"


class LaunchError(ValueError):
    """A launcher option is wrong or submitit is missing: the message says which and what to give."""


def parse_slurm(items: list[str] | None) -> dict:
    """``--slurm KEY=VALUE`` items into a dict; unknown keys get a did-you-mean, values are checked."""
    from difflib import get_close_matches

    out = {}
    for it in items or ():
        key, sep, value = str(it).partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise LaunchError(f"--slurm {it!r}: expected KEY=VALUE (keys: {', '.join(SLURM_KEYS)})")
        if key not in SLURM_KEYS:
            near = get_close_matches(key, SLURM_KEYS, n=1)
            raise LaunchError(f"--slurm {key}: unknown key{f' (did you mean {near[0]!r}?)' if near else ''}; "
                              f"keys: {', '.join(SLURM_KEYS)}")
        if key in ("gpus", "cpus", "parallelism"):
            if not value.isdigit() or not 0 <= int(value) <= 4096:
                raise LaunchError(f"--slurm {key}={value!r}: a whole number in [0, 4096]")
            out[key] = int(value)
        elif key == "mem":
            m = re.fullmatch(r"(\d{1,6})\s*[gG][bB]?|(\d{1,6})", value)
            if not m:
                raise LaunchError(f"--slurm mem={value!r}: gigabytes, e.g. mem=64 or mem=64G")
            out[key] = int(m.group(1) or m.group(2))
        elif key == "time":
            out[key] = _minutes(value)
        else:
            if not re.fullmatch(r"[A-Za-z0-9_.,:|&@+\-]{1,200}", value):
                raise LaunchError(f"--slurm {key}={value!r}: letters, digits and _.,:|&@+- only")
            out[key] = value
    return out


def _minutes(value: str) -> int:
    if value.isdigit():
        m = int(value)
    else:
        parts = value.split(":")
        if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
            raise LaunchError(f"--slurm time={value!r}: minutes, or HH:MM:SS")
        h, mnt, s = ([0] * (3 - len(parts)) + [int(p) for p in parts])
        m = h * 60 + mnt + (1 if s else 0)
    if not 1 <= m <= 60 * 24 * 365:
        raise LaunchError(f"--slurm time={value!r}: between 1 minute and a year")
    return m


def check_tasks(tasks: int | None, launcher: str) -> int:
    if launcher not in LAUNCHERS:
        raise LaunchError(f"--launcher {launcher!r}: one of {', '.join(LAUNCHERS)}")
    n = DEFAULT_TASKS[launcher] if tasks is None else tasks
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TASKS:
        raise LaunchError(f"--tasks {tasks!r}: a whole number in [1, {MAX_TASKS}]")
    return n


def executor(launcher: str, folder: Path, slurm: dict, gpus: int, name: str):
    """A submitit executor writing its logs under ``folder``."""
    try:
        import submitit
    except ImportError:
        raise LaunchError(f"--launcher {launcher} needs submitit: {INSTALL}") from None
    folder.mkdir(parents=True, exist_ok=True)
    if launcher == "local":
        if slurm:
            raise LaunchError(f"--slurm {', '.join(sorted(slurm))}: Slurm options need --launcher slurm")
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=DEFAULT_TIME_MIN)
        return ex
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
    params = {"timeout_min": slurm.get("time", DEFAULT_TIME_MIN), "nodes": 1, "tasks_per_node": 1,
              "gpus_per_node": slurm.get("gpus", gpus), "name": name}
    for key, param in (("partition", "slurm_partition"), ("cpus", "cpus_per_task"), ("mem", "mem_gb"),
                       ("account", "slurm_account"), ("qos", "slurm_qos"), ("constraint", "slurm_constraint"),
                       ("parallelism", "slurm_array_parallelism")):
        if key in slurm:
            params[param] = slurm[key]
    ex.update_parameters(**params)
    return ex


# ------------------------------------------------------------------------------------------ the tasks themselves
def generate_task(kwargs: dict, rank: int, world: int) -> dict:
    """One array task of ``generate``: this task's share of the cases (run on the cluster node)."""
    res = run_generate(**kwargs, shard=(rank, world), progress=False)
    return {"done": res.done, "skipped": res.skipped, "failed": res.failed, "claimed": res.claimed}


def evaluate_task(runs: list[str], backend: str, rank: int, world: int, judge: str | None = None,
                  judge_device: str | None = None) -> dict:
    """One array task of ``evaluate``: fill the feature cache for this task's share of every run's records (and,
    with ``judge``, ask the judge for them: on a cluster the VLM runs on the tasks' GPUs)."""
    return {"computed": sum(precompute_shard(Path(r), backend, rank, world, judge=judge, judge_device=judge_device)
                            for r in runs)}


# ------------------------------------------------------------------------------------------------- submitting
def _log_paths(job) -> dict:
    try:
        return {"stdout": str(job.paths.stdout), "stderr": str(job.paths.stderr)}
    except Exception:  # noqa: BLE001 - a path that cannot be formed is not a reason to lose the failure
        return {}


def _append_jobs(out: Path, rows: list[dict]) -> None:
    if not rows:
        return
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "jobs.jsonl", "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def submit(fn, arg_lists: list[list], out: Path, launcher: str, slurm: dict, gpus: int, name: str,
           wait: bool = True, echo=print) -> tuple[list[dict | None], list[dict]]:
    """Submit ``fn`` as a job array (one task per item of ``arg_lists``); with ``wait``, return each task's result
    (None for a failed one) and the failures (appended to ``out/jobs.jsonl``)."""
    ex = executor(launcher, out / ".jobs", slurm, gpus, name)
    jobs = ex.map_array(fn, *zip(*arg_lists))
    ids = [str(j.job_id) for j in jobs]
    (out / ".jobs" / "submitted.json").write_text(json.dumps(
        {"launcher": launcher, "tasks": len(jobs), "job_ids": ids, "slurm": slurm, "submitted": time.time()},
        indent=2))
    echo(f"submitted {len(jobs)} {launcher} task(s) ({ids[0]}{' ...' if len(ids) > 1 else ''}); logs in "
         f"{out / '.jobs'}")
    if not wait:
        return [None] * len(jobs), []
    results, failures = [], []
    for i, job in enumerate(jobs):
        try:
            results.append(job.result())
        except Exception as e:  # noqa: BLE001 - submitit raises the task's own error, or its death
            results.append(None)
            msg = " ".join(str(e).split())
            failures.append({"task": i, "of": len(jobs), "job_id": str(job.job_id), "status": "task failed",
                             "launcher": launcher, "error": msg[-2000:], "log": _log_paths(job),
                             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    _append_jobs(out, failures)
    return results, failures


def launch_generate(kwargs: dict, launcher: str, tasks: int | None, slurm: dict, wait: bool = True,
                    echo=print, task=generate_task) -> int:
    """``generate`` over a job array; the exit status is 1 when a task or a case failed."""
    n = check_tasks(tasks, launcher)
    out = check_out(Path(kwargs["out"]))
    out.mkdir(parents=True, exist_ok=True)
    gpus = _gpus_of(kwargs.get("model_args") or {})
    results, failures = submit(task, [[kwargs, i, n] for i in range(n)], out, launcher, slurm, gpus,
                               f"worldgate-generate-{kwargs['model']}", wait=wait, echo=echo)
    if not wait:
        echo(f"not waiting: rerun the same command once the array ends to pick up what failed (complete records "
             "are skipped)")
        return 0
    done = sum(len(r["done"]) for r in results if r)
    skipped = sum(len(r["skipped"]) for r in results if r)
    failed = {c: e for r in results if r for c, e in r["failed"].items()}
    echo(f"generated {done}, skipped {skipped} complete, failed {len(failed)} case(s), {len(failures)} of {n} "
         f"task(s) failed -> {out}")
    for f in failures:
        echo(f"  TASK {f['task']} ({f['job_id']}) FAILED: {f['error'][-300:]}; log {f['log'].get('stderr', '?')}")
    for cid, err in failed.items():
        echo(f"  FAILED {cid}: {err}")
    if failures or failed:
        echo(f"  details in {out / 'jobs.jsonl'}; rerun the same command to finish the run")
    return 1 if failures or failed else 0


def launch_evaluate(runs: list[str], backend: str, launcher: str, tasks: int | None, slurm: dict,
                    score, echo=print, judge: str | None = None, judge_device: str | None = None) -> int:
    """Features (and the judge's answers) over a job array, then ``score()`` here (it must run with
    ``rescore=True``: it reads the cache the tasks filled)."""
    n = check_tasks(tasks, launcher)
    out = Path(runs[0])
    _, failures = submit(evaluate_task, [[list(runs), backend, i, n, judge, judge_device] for i in range(n)], out,
                         launcher, slurm,
                         slurm.get("gpus", 1) if launcher == "slurm" else 1, "worldgate-evaluate", echo=echo)
    for f in failures:
        echo(f"  TASK {f['task']} ({f['job_id']}) FAILED: {f['error'][-300:]}; log {f['log'].get('stderr', '?')}")
    rc = score()
    return rc or (1 if failures else 0)


def _gpus_of(model_args: dict) -> int:
    v = model_args.get("gpus", 1)
    try:
        return max(1, int(str(v), 10))
    except ValueError:
        return 1


__all__ = ["LAUNCHERS", "LaunchError", "SLURM_KEYS", "check_tasks", "launch_evaluate", "launch_generate",
           "parse_slurm", "submit"]


def add_launcher_args(p, wait: bool = True) -> None:
    """``--launcher``, ``--tasks``, ``--slurm`` (and for generate ``--no-wait``) on a command's parser."""
    p.add_argument("--launcher", choices=LAUNCHERS,
                   help="spread the cases over a job array: slurm (through submitit) or local (processes here); "
                        "the run folder must be on a file system every task sees")
    p.add_argument("--tasks", type=int, help=f"array tasks (default {DEFAULT_TASKS['slurm']} for slurm, "
                                             f"{DEFAULT_TASKS['local']} for local); each takes every N-th case")
    p.add_argument("--slurm", action="append", default=[], metavar="KEY=VALUE",
                   help=f"Slurm request, repeatable: {', '.join(SLURM_KEYS)} (e.g. --slurm partition=gpu "
                        "--slurm gpus=8 --slurm time=12:00:00)")
    if wait:
        p.add_argument("--no-wait", action="store_true", help="submit and return (rerun the same command later: "
                                                              "complete records are skipped)")
