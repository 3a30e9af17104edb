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
import fnmatch
import inspect
import json
import logging
import math
import operator
import os
import re
import time
import traceback
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path

from omegaconf import OmegaConf
from tqdm import tqdm

from worldgate import __version__
from worldgate.adapters import MODELS, Adapter, AdapterError, get_adapter
from worldgate.adapters.base import check_plan_intrinsics
from worldgate.adapters.context import ContextPolicy, make_policy
from worldgate.trajectories.core import MAX_SEGMENT_SECONDS, MIN_SEGMENT_SECONDS, TrajectoryError, short_repr
from worldgate.trajectories.registry import did_you_mean
from worldgate.trajectories.suites import SUITES, SuiteError, check_depth, load_suite

import numpy as np

from .claims import claim_case, clean_stale_tmp
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


#: ``key=value`` overrides: a dotted name (``model.width``, ``trajectory.seconds``) and a value OmegaConf types
OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
MAX_OVERRIDE_CHARS = 4096  # one key=value item
SECTIONS = ("model", "suite", "trajectory", "context")  # model.K=V (or bare K=V), suite.K=V, trajectory.seconds, ...
TRAJECTORY_KEYS = ("seconds",)
MAX_SEED = 2**32 - 1  # --seed and suite.seed: integers in [0, MAX_SEED]
#: context.K=V: (low, high) of each numeric ContextPolicy field (Monte-Carlo points cost memory)
CONTEXT_LIMITS = {"recent": (0, 1000), "fov_h": (1e-3, 180.0), "fov_v": (1e-3, 180.0), "points": (1, 1_000_000),
                  "radius": (1e-3, 1e4), "gate": (1e-3, 1e4), "seed": (0, MAX_SEED)}
OVERRIDE_HELP = "e.g. model.width=128 suite.full=true trajectory.seconds=2"
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


#: YAML 1.1 reads these as numbers in other bases (0100 octal, 0x10, 0b11, 1:30 sexagesimal, 1_000): overrides are
#: decimal, so leading zeros are dropped and the others refused (quote the value to give a string)
_LEADING_ZEROS = re.compile(r"([+-]?)0+(\d+)")
_OTHER_BASES = re.compile(r"[+-]?(0[xXbBoO][0-9a-fA-F_]+|\d[\d_]*(:[0-5]?\d)+(\.\d*)?|\d+(_\d+)+(\.\d*)?)")


def _decimal(item):
    """``key=0100`` -> ``key=100`` (decimal); ``key=0x10`` and the like: ValueError (say it in decimal)."""
    if not isinstance(item, str) or "=" not in item:
        return item
    key, val = item.split("=", 1)
    if _OTHER_BASES.fullmatch(val.strip()):
        raise ValueError(f"override {short_repr(item, 60)}: {short_repr(val, 30)} is not a decimal number; write it in "
                         f"decimal, or quote it ({key}='{val}') to give a string")
    m = _LEADING_ZEROS.fullmatch(val.strip())
    return f"{key}={m.group(1)}{int(m.group(2), 10)}" if m else item


def parse_overrides(items: list[str] | None) -> dict:
    """``key=value`` items into a nested dict (values typed by OmegaConf: ints, floats, bools, lists; integers are
    always decimal, see :func:`_decimal`).

    Keys are dotted names; ``${...}`` interpolations are refused (they would read the environment). Any failure is a
    ``ValueError`` naming the item."""
    items = [_decimal(it) for it in (items or [])]
    for it in items:
        if not isinstance(it, str) or "=" not in it or it.startswith("="):
            raise ValueError(f"override {short_repr(it, 60)} is not key=value ({OVERRIDE_HELP})")
        key, val = it.split("=", 1)
        if len(it) > MAX_OVERRIDE_CHARS:
            raise ValueError(f"override {short_repr(it, 60)} is longer than {MAX_OVERRIDE_CHARS} characters "
                             "(MAX_OVERRIDE_CHARS)")
        if not OVERRIDE_KEY.fullmatch(key):
            raise ValueError(f"override {short_repr(it, 60)}: {short_repr(key, 40)} is not a dotted name of letters, "
                             f"digits and _ ({OVERRIDE_HELP})")
        if "${" in val:
            raise ValueError(f"override {short_repr(it, 60)}: ${{...}} interpolations are not supported; give the "
                             "value")
        try:  # OmegaConf / YAML raise their own types (and RecursionError on absurd nesting): all are input errors
            OmegaConf.from_dotlist([it])
        except Exception as e:  # noqa: BLE001  (see above)
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ValueError(f"override {short_repr(it, 60)}: cannot parse the value ({first})") from None
    if not items:
        return {}
    out = OmegaConf.to_container(OmegaConf.from_dotlist(items), resolve=True)
    try:
        check_depth(out, "overrides")
    except SuiteError as e:
        raise ValueError(str(e)) from None
    return out


def parse_model_args(text: str | None) -> dict:
    """``--model-args repo=PATH,width=128`` into a dict (values typed like overrides)."""
    if not text:
        return {}
    parts = [p for p in text.split(",") if p.strip()]
    return parse_overrides(parts)


# ------------------------------------------------------------------------------------------- override validation
def accepted_model_args(cls) -> tuple[set[str], tuple[str, ...]] | None:
    """The model args an adapter class takes: ``(names, patterns)``, or None when it takes any key.

    An adapter opts in to checked model args with a class attribute ``MODEL_ARGS`` (extra names or ``fnmatch``
    patterns such as ``"*_path"``, beyond its constructor's parameters; ``()`` for none). Its names are then the
    keyword parameters of every ``__init__`` along its MRO, down to the first that takes no ``**kwargs``, plus
    ``MODEL_ARGS``. Adapters without ``MODEL_ARGS`` read ``self.model_args`` freely
    (``Adapter.__init__(**model_args)``), so their keys cannot be known here and are not checked."""
    extra = getattr(cls, "MODEL_ARGS", None)
    if extra is None:
        return None
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass in (Adapter, object) or "__init__" not in vars(klass):
            continue
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names |= {p.name for p in params if p.name != "self" and p.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            break
    return names | {e for e in extra if "*" not in e}, tuple(e for e in extra if "*" in e)


def suite_parameters(suite: str) -> dict[str, inspect.Parameter]:
    """The ``suite.K=V`` a suite takes: its function's named parameters (``data`` comes from --data); a manifest
    file given as the suite takes none."""
    if suite.endswith((".json", ".jsonl")):
        return {}
    fn = SUITES.get(suite)  # unknown suite -> did-you-mean
    return {n: p for n, p in inspect.signature(fn).parameters.items()
            if n != "data" and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def _dotted(section: str, key: str, value) -> str:
    """``section.key`` plus the first nested key of a dict value (``trajectroy`` -> ``trajectroy.seconds``)."""
    name = f"{section}.{key}" if section else key
    while isinstance(value, dict) and value:
        k, value = next(iter(value.items()))
        name += f".{k}"
    return name


def _unknown(kind: str, given: str, known) -> Exception:
    return did_you_mean(kind, given, sorted(known))


def _check_typed(what: str, value, default):
    """A value for a parameter whose default is a bool, int, float or str must have that type (ints for floats)."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        want = "true or false"
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "an integer"
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
        want = "a finite number"
    elif isinstance(default, str):
        ok = isinstance(value, str)
        want = "a string"
    else:
        return value
    if not ok:
        raise ValueError(f"{what} must be {want}, got {short_repr(value, 60)}")
    return value


def _check_range(what: str, value, lo, hi, const: str) -> None:
    if not (lo <= value <= hi):
        raise ValueError(f"{what} must be in [{lo:g}, {hi:g}] ({const}), got {short_repr(value, 40)}")


def split_overrides(model: str, suite: str, overrides: list[str] | None, model_args: dict | None = None):
    """Parse and check ``key=value`` overrides (see :func:`parse_overrides`) for ``model`` on ``suite``: returns
    ``(model_args, suite_args, trajectory_seconds, context_args)``. Bare ``K=V`` are model args. Unknown keys are
    errors with a did-you-mean (:class:`~worldgate.trajectories.registry.UnknownNameError`); bad values are
    ``ValueError`` s naming the key and its limit."""
    ov = parse_overrides(overrides)
    for sec in SECTIONS:
        if sec in ov and not isinstance(ov[sec], dict):
            example = {"model": "model.width=128", "suite": "suite.full=true", "trajectory": "trajectory.seconds=2",
                       "context": "context.sink=false"}[sec]
            raise ValueError(f"override '{sec}={short_repr(ov[sec], 40)}': {sec} takes keys, e.g. {example}")
    cls = MODELS.get(model)  # unknown model -> did-you-mean, before anything else
    margs = dict(model_args or {})
    bare = {k: ov[k] for k in ov if k not in SECTIONS}
    margs.update(bare)
    margs.update(ov.get("model") or {})
    sargs = dict(ov.get("suite") or {})
    traj = dict(ov.get("trajectory") or {})
    cargs = ov.get("context")
    cargs = None if cargs is None else dict(cargs)

    suite_params = suite_parameters(suite)
    ctx_fields = {f.name: f.default for f in dataclasses.fields(ContextPolicy) if f.name not in ("name", "budget")}
    known_all = ([f"suite.{k}" for k in suite_params] + [f"trajectory.{k}" for k in TRAJECTORY_KEYS]
                 + [f"context.{k}" for k in ctx_fields])
    accepted = accepted_model_args(cls)
    if accepted is not None:
        names, patterns = accepted
        for k, v in margs.items():
            if k in names or any(fnmatch.fnmatchcase(k, p) for p in patterns):
                continue
            if k in (ov.get("model") or {}):
                raise _unknown(f"{model} model arg", _dotted("model", k, v),
                               [f"model.{n}" for n in names] + list(patterns))
            if k in bare:  # a bare K=V: a model arg, or a misspelt section
                raise _unknown("override", _dotted("", k, v), [*names, *patterns, *known_all])
            raise _unknown(f"{model} model arg", k, [*names, *patterns])  # from --model-args
    else:  # the adapter takes any key: still catch a misspelt section given as a bare key (trajectroy.seconds=2)
        for k, v in bare.items():
            if isinstance(v, dict) and get_close_matches(k, SECTIONS, n=1, cutoff=0.75):
                raise _unknown("override", _dotted("", k, v), known_all)
    for k, v in sargs.items():
        if k not in suite_params:
            if not suite_params:
                raise ValueError(f"override suite.{k}: suite {suite!r} takes no suite.K=V overrides")
            raise _unknown(f"{suite} suite arg", _dotted("suite", k, v), [f"suite.{n}" for n in suite_params])
        default = suite_params[k].default
        _check_typed(f"suite.{k}", v, None if default is inspect.Parameter.empty else default)
        if k == "seed":
            _check_range("suite.seed", v, 0, MAX_SEED, "MAX_SEED")
    for k, v in traj.items():
        if k not in TRAJECTORY_KEYS:
            raise _unknown("trajectory override", _dotted("trajectory", k, v),
                           [f"trajectory.{n}" for n in TRAJECTORY_KEYS])
    seconds = traj.get("seconds")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or \
                not MIN_SEGMENT_SECONDS <= seconds <= MAX_SEGMENT_SECONDS:
            raise ValueError(f"trajectory.seconds must be a number in [{MIN_SEGMENT_SECONDS:g}, "
                             f"{MAX_SEGMENT_SECONDS:g}] seconds (MIN_SEGMENT_SECONDS, MAX_SEGMENT_SECONDS), got "
                             f"{short_repr(seconds, 40)}")
        seconds = float(seconds)
    for k, v in (cargs or {}).items():
        if k not in ctx_fields:
            hint = " (the budget is --budget)" if k == "budget" else ""
            err = _unknown("context override", _dotted("context", k, v), [f"context.{n}" for n in ctx_fields])
            raise type(err)(f"{err}{hint}")
        _check_typed(f"context.{k}", v, ctx_fields[k])
        if k in CONTEXT_LIMITS:
            _check_range(f"context.{k}", v, *CONTEXT_LIMITS[k], "CONTEXT_LIMITS")
    return margs, sargs, seconds, cargs


def check_seed(seed) -> int:
    """``--seed``: an integer in [0, MAX_SEED]."""
    why = f"--seed must be an integer in [0, {MAX_SEED}] (MAX_SEED), got {short_repr(seed, 40)}"
    try:
        s = operator.index(seed)
    except TypeError:
        raise ValueError(why) from None
    if isinstance(seed, bool) or not 0 <= s <= MAX_SEED:
        raise ValueError(why)
    return s


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
