"""``key=value`` overrides of ``generate`` (``--override`` / ``--model-args``): parsed as OmegaConf types them, in
decimal, then split into the model's, the suite's, the trajectory's and the context policy's arguments, each checked
against what that side accepts (unknown keys get a did-you-mean, numbers their bounds), before any case runs. Apart
from generate/runner.py because it is the command line's grammar; the runner plans and rolls out the cases.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import inspect
import math
import operator
import re
from difflib import get_close_matches

from omegaconf import OmegaConf

from worldgate.adapters import MODELS, Adapter
from worldgate.adapters.context import ContextPolicy
from worldgate.trajectories.core import MAX_SEGMENT_SECONDS, MIN_SEGMENT_SECONDS, short_repr
from worldgate.trajectories.registry import did_you_mean
from worldgate.trajectories.suites import SUITES, SuiteError, check_depth

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
