"""``generate``: plan and roll out every case of a suite with one model, writing one record per case.

Resumable (complete records are skipped, stale temporary folders removed), fault tolerant (a failing case is logged
to ``jobs.jsonl`` and the run goes on; the exit status says whether any case failed), and deterministic for a seed.
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf
from tqdm import tqdm

from worldgate import __version__
from worldgate.adapters import AdapterError, get_adapter
from worldgate.adapters.context import make_policy
from worldgate.trajectories.suites import load_suite

from .records import clean_stale_tmp, git_hash, is_complete, record_dir, write_plan, write_rollout

log = logging.getLogger("worldgate.generate")


@dataclass
class GenerateResult:
    out: Path
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def parse_overrides(items: list[str] | None) -> dict:
    """``key=value`` items into a nested dict (values typed by OmegaConf: ints, floats, bools, lists)."""
    items = list(items or [])
    for it in items:
        if "=" not in it or it.startswith("="):
            raise ValueError(f"override {it!r} is not key=value (e.g. model.width=128 suite.full=true trajectory.seconds=2)")
    return OmegaConf.to_container(OmegaConf.from_dotlist(items), resolve=True) if items else {}


def parse_model_args(text: str | None) -> dict:
    """``--model-args repo=PATH,width=128`` into a dict (values typed like overrides)."""
    if not text:
        return {}
    parts = [p for p in text.split(",") if p.strip()]
    return parse_overrides(parts)


def select_cases(cases, limit: int | None = None, shard: tuple[int, int] | None = None):
    if limit is not None:
        cases = cases[: max(0, int(limit))]
    if shard is not None:
        index, count = shard
        cases = cases[index::count]
    return cases


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
                 budget: int | None = None) -> GenerateResult:
    """``shard=(rank, world)``: this process's share of the cases (the CLI passes the launcher's, see dist.py)."""
    ov = parse_overrides(overrides)
    unknown = set(ov) - {"model", "suite", "trajectory", "context"}
    margs = dict(model_args or {})
    for k in sorted(unknown):  # bare key=value are model args (e.g. width=128)
        margs[k] = ov.pop(k)
    margs.update(ov.get("model", {}) or {})
    sargs = dict(ov.get("suite", {}) or {})
    if full:
        sargs["full"] = True
    traj_seconds = (ov.get("trajectory") or {}).get("seconds")
    adapter = get_adapter(model, **margs)  # unknown model -> did-you-mean, before anything is written
    policy = None
    if context is not None or ov.get("context"):
        policy = make_policy(context or "full_kv", budget, **(ov.get("context") or {}))
        why = adapter.context_support(policy.name)
        if why:
            raise AdapterError(why)
    elif budget is not None:
        raise ValueError("--budget needs --context full_kv|sliding_window|fov")
    cases = load_suite(suite, data=data, **sargs)
    cases = select_cases(cases, limit, shard)
    if traj_seconds is not None:
        for c in cases:
            c.trajectory = c.trajectory.with_seconds(float(traj_seconds))

    out = Path(out or Path("runs") / f"{model}-{suite}")
    out.mkdir(parents=True, exist_ok=True)
    result = GenerateResult(out=out)
    config = build_config(model, suite, margs, sargs, seed, dry_run, limit, traj_seconds, data)
    config["context"] = policy.describe() if policy is not None else None
    run_json = out / "run.json"
    if not run_json.exists():  # several processes may race here: write whole, rename into place
        tmp = out / f".run.json.{os.getpid()}"
        tmp.write_text(json.dumps(config, indent=2, sort_keys=True))
        os.replace(tmp, run_json)
    clean_stale_tmp(out)

    todo = []
    for c in cases:
        d = record_dir(out, c.id)
        if is_complete(d, "rollout") or (dry_run and is_complete(d, "plan")):
            result.skipped.append(c.id)
        else:
            todo.append(c)
    loaded = False
    bar = _progress(todo, progress, f"{model} {'plan' if dry_run else 'rollout'}")
    for case in bar:
        t0 = time.perf_counter()
        try:
            plan = adapter.plan(case)
            if dry_run:
                write_plan(out, case, adapter, plan, seed, config)
            else:
                if not loaded:
                    adapter.load(device=device)
                    loaded = True
                write_rollout(out, case, adapter, plan, seed, config, context=policy)
            result.done.append(case.id)
            _log_job(out, case.id, "ok", time.perf_counter() - t0)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one failing case never stops the run; it is logged with its reason
            msg = f"{type(e).__name__}: {e}"
            result.failed[case.id] = msg
            _log_job(out, case.id, "failed", time.perf_counter() - t0, msg, traceback.format_exc())
            log.error("case %s failed: %s", case.id, msg)
    return result


def _log_job(out: Path, case_id: str, status: str, seconds: float, error: str | None = None, tb: str | None = None):
    row = {"case": case_id, "status": status, "seconds": round(seconds, 3), "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "pid": os.getpid()}
    if error:
        row["error"] = error
        row["traceback"] = tb
    with open(out / "jobs.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


def _progress(items, enabled: bool, desc: str):
    if not enabled:
        return items
    return tqdm(items, desc=desc, unit="case")
