"""results.json and samples.jsonl: their typed, versioned models, the one writer and the one reader.

``evaluate`` (runner.py), ``import`` (worldmark/imported.py) write a run's results through :func:`write_results`;
``report``, ``compare`` and ``worldgate.load_results`` read them through :func:`read_results` / :func:`read_samples`.
The format is documented in docs/results-format.md (as lm-evaluation-harness documents its ``result_schema.py`` and
inspect_ai its ``EvalLog``).

Shape: :class:`Results` holds the fields every run has (metrics, config, backends, provenance, protocol, ...); a
benchmark adds its run-level section (WorldMark's master table under ``worldmark``, MultiWorldBench's tracks under
``multiworld``, WorldMemBench's ``analyses``) only through the field it declares (``Benchmark.section``, with the
pydantic model that checks it): the writer refuses any other top-level key. Each samples.jsonl line is a
:class:`Sample`.

Reading checks the types, that every number is finite and in range (a count is not negative, a coverage lies in
[0, 1], a mean lies in its metric's declared range) and that no integer is absurdly large; every violation is one
line naming the file and the field (``ResultsError``), never an internal error.
"""

from __future__ import annotations

import errno
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

from worldgate.generate.outputs import OutputFolder
from worldgate.generate.record_files import RecordError, read_regular_text

from .metrics import benchmarks, metric_info
from .result_types import MAX_INT, Count, Number, Open, Seconds, Share

#: the version of the format this worldgate writes (results.json's ``schema_version``); files without one are
#: version 0 (written before the field existed, same shape) and still read
SCHEMA_VERSION = 1
#: the most bytes read of a run's results.json or samples.jsonl
MAX_RESULTS_BYTES = 1 << 30
#: how many violations one error lists (the rest are counted)
MAX_LINES = 20
#: what every error says to do
_RERUN = "rewrite it with `worldgate evaluate {run}`"


class ResultsError(ValueError):
    """A results.json or samples.jsonl that is not evaluate's: one line per violation, each naming the file and
    the field."""


class Interval(Open):
    low: Number | None = None
    high: Number | None = None
    method: StrictStr | None = None


class MetricSummary(Open):
    """One metric over a run: its mean (None: unavailable for every record), spread, coverage and why not."""
    mean: Number | None = None
    std: Number | None = None
    n: Count = 0
    coverage: Share = 0.0
    unavailable: dict[str, Count] = {}
    ci: Interval | None = None
    seeds: dict[str, Any] | None = None
    per_record_mean: Number | None = None
    aggregation: StrictStr | None = None
    families: list[StrictStr] | None = None
    family_coverage: dict[str, Any] | None = None


class BackendInfo(Open):
    """One feature's extractor: its backend (classical, learned), cache key, model and version."""
    backend: StrictStr
    key: StrictStr | None = None


class RunConfig(Open):
    context: dict[str, Any] | None = None


class Config(Open):
    """How the run was scored: backend, metrics asked for, --rescore, every threshold, the run's run.json, judge."""
    backend: StrictStr | None = None
    metrics: StrictStr | list[StrictStr] | None = None
    rescore: StrictBool | None = None
    params: dict[str, Number | StrictStr | None] | None = None
    run_config: RunConfig | None = None
    judge: StrictStr | None = None


class FeatureStats(Open):
    computed: Count = 0
    cached: Count = 0


class Protocol(Open):
    """The protocol a run was scored under (protocol.run_protocol): the fields the report and leaderboard read."""
    status: StrictStr
    differences: list[StrictStr]
    settings: dict[str, Any]
    fingerprint: StrictStr
    cases: Count
    case_set: StrictStr


class Results(BaseModel):
    """results.json. ``metrics``: id -> :class:`MetricSummary`; the benchmarks' declared sections are kept as extra
    fields, each checked by its benchmark's model (``sections()``)."""
    model_config = ConfigDict(extra="allow")

    schema_version: Count = 0
    run: StrictStr = ""
    metrics: dict[str, MetricSummary | None] = {}
    config: Config | None = None
    backends: dict[str, BackendInfo] = {}
    versions: dict[str, StrictStr] = {}
    git: StrictStr | None = None
    records: Count = 0
    protocol: Protocol | None = None
    provenance: dict[str, Any] | None = None
    errors: dict[str, StrictStr] = {}
    caveats: dict[str, list[StrictStr]] = {}
    features: FeatureStats | None = None
    seconds: Seconds | None = None
    #: a run `worldgate import` made from a benchmark's own results: where from, in which format
    imported: dict[str, Any] | None = None

    def to_dict(self) -> dict:
        """The results as written (every field and section, JSON types)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def section(self, name: str):
        """A benchmark's declared section (a dict as written), or None."""
        return (self.model_extra or {}).get(name)


class Timing(Open):
    rollout_s: Number | None = None


class Sample(Open):
    """One samples.jsonl line: one record's scores (None: unavailable, with the reason), details, the features it
    was scored from and the video's digest; or ``error`` where it could not be scored."""
    case: StrictStr
    tags: dict[str, Any] | None = None
    adapter: StrictStr | None = None
    timing: Timing | None = None
    context: dict[str, Any] | None = None
    scores: dict[str, Number | None] | None = None
    unavailable: dict[str, StrictStr | None] | None = None
    detail: dict[str, Any] | None = None
    features: dict[str, StrictStr] | None = None
    caveats: list[StrictStr] | None = None
    error: StrictStr | None = None
    video_sha256: StrictStr | dict[str, StrictStr | None] | None = None  # two-view records: one per view

    def to_dict(self) -> dict:
        return self.model_dump(mode="json", exclude_unset=True)


FIELDS = frozenset(Results.model_fields)


def sections() -> dict[str, type[BaseModel] | None]:
    """Top-level section name -> the model that checks it, of every registered benchmark (``Benchmark.section``)."""
    out: dict[str, type[BaseModel] | None] = {}
    for b in benchmarks():
        for name, model in (b.sections or {}).items():
            if name in FIELDS or name in out:
                raise ValueError(f"benchmark {b.name!r} declares the results section {name!r}, which is already "
                                 "a field of results.json or another benchmark's section: choose another name")
            out[name] = model
    return out


# ------------------------------------------------------------------------------------------------------ messages
def _kind(v) -> str:
    return "null" if v is None else {dict: "object", list: "list", str: "string", bool: "boolean", int: "integer",
                                     float: "number"}.get(type(v), type(v).__name__)


def _where(loc) -> str:
    return ".".join(json.dumps(str(x)) if isinstance(x, str) else f"[{x}]" for x in loc).replace(".[", "[")


_KINDS = {"dict_type": "an object", "list_type": "a list", "string_type": "a string", "bool_type": "a boolean",
          "int_type": "an integer", "float_type": "a number", "model_type": "an object"}


def _lines(e: ValidationError, where: str, prefix: tuple = ()) -> list[str]:
    out: list[str] = []
    typed: dict[str, int] = {}
    for err in e.errors():
        loc = [x for x in err["loc"] if not (isinstance(x, str) and (x.startswith(("function-after", "constrained"))
                                                                      or x in ("int", "float", "str")))]
        # a union's alternatives each report; keep the path of the value, not of the alternative
        loc = [x for x in loc if x not in ("StrictInt", "StrictFloat", "StrictStr", "MetricSummary", "Interval",
                                           "list[str]", "json-or-python[json=int,python=int]")]
        loc = [*prefix, *loc]
        field = _where(loc) if loc else ""
        got = err.get("input")
        kind = _KINDS.get(err["type"])
        if kind:
            msg = f"is a JSON {_kind(got)}, not {kind}"
        elif err["type"] == "missing":
            msg = "is missing"
        elif err["type"] in ("greater_than_equal", "less_than_equal"):
            bound = err["ctx"].get("ge", err["ctx"].get("le"))
            msg = f"is {_short(got)}, {'below' if 'ge' in err['ctx'] else 'above'} its range's {bound}"
        else:
            msg = f"{err['msg'].removeprefix('Value error, ')} (got {_short(got)})"
        if kind and field in typed:  # a union's alternatives each report: one line says what the field must be
            i = typed[field]
            if err["type"] == "float_type":
                out[i] = f"{where}: {field} is a JSON {_kind(got)}, not a number" if field else out[i]
            continue
        if kind:
            typed[field] = len(out)
        out.append(f"{where}: {field} {msg}" if field else f"{where}: {msg}")
    return list(dict.fromkeys(out))


def _numbers(x, loc=(), out=None) -> list:
    """(path, value) of every non-finite float and every integer beyond MAX_INT anywhere in ``x``."""
    out = [] if out is None else out
    if isinstance(x, dict):
        for k, v in x.items():
            _numbers(v, (*loc, k), out)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _numbers(v, (*loc, i), out)
    elif isinstance(x, float) and not math.isfinite(x) or isinstance(x, int) and not isinstance(x, bool) \
            and abs(x) > MAX_INT:
        out.append((loc, x))
    return out


def _number_lines(data, where: str) -> list[str]:
    return [f"{where}: {_where(loc) or 'the value'} is {_short(v)}, not a finite number of at most 2^53"
            for loc, v in _numbers(data)]


def _short(v) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    s = json.dumps(v) if isinstance(v, (str, int, float, bool, type(None))) and not (
        isinstance(v, float) and not math.isfinite(v)) else (str(v) if isinstance(v, float) else f"a JSON {_kind(v)}")
    return s if len(s) <= 40 else s[:37] + "..."


def violation_lines(e: ValidationError, where: str, prefix: tuple = ()) -> list[str]:
    """Each violation of a pydantic ValidationError as one line ``where: "field" is ...`` (the results files' style;
    other readers of JSON, such as the WorldMark results-root importer, word theirs the same)."""
    return _lines(e, where, prefix)


def _raise(lines: list[str], hint: str) -> None:
    more = len(lines) - MAX_LINES
    body = lines[:MAX_LINES] + ([f"... and {more} more"] if more > 0 else [])
    if len(body) == 1:
        raise ResultsError(f"{body[0]}: {hint}")
    raise ResultsError("\n".join(body) + f"\n({hint})")


def _range_lines(res: Results, where: str) -> list[str]:
    """Each metric's mean inside its declared range (0-100, 0-1, >=0) where the metric is registered."""
    out = []
    info = metric_info()
    for m, a in res.metrics.items():
        rng = info.get(m, {}).get("range")
        if a is None or a.mean is None or rng is None:
            continue
        lo, hi = {"0-100": (0, 100), "0-1": (0, 1), ">=0": (0, math.inf)}.get(rng, (-math.inf, math.inf))
        if not lo - 1e-9 <= a.mean <= hi + 1e-9:
            out.append(f'{where}: "metrics"."{m}"."mean" {a.mean:g} is outside the metric\'s range {rng}')
    return out


# -------------------------------------------------------------------------------------------------------- models
def results_model(data, where: str, hint: str = "not evaluate's results.json") -> Results:
    """``data`` (parsed JSON) as :class:`Results`, or :class:`ResultsError` listing every violation."""
    res = _validated(Results, data, f"{where}: holds a JSON {_kind(data)}, not an object", where, hint)
    lines = _range_lines(res, where)
    for name, model in sections().items():
        if model is not None and name in (res.model_extra or {}):
            try:
                model.model_validate(res.model_extra[name])
            except ValidationError as e:
                lines += _lines(e, where, (name,))
    if lines:
        _raise(lines, hint)
    return res


def sample_model(data, where: str, hint: str = "not evaluate's samples.jsonl") -> Sample:
    return _validated(Sample, data, f"{where} holds a JSON {_kind(data)}, not a sample object", where, hint)


def _validated(model, data, not_object: str, where: str, hint: str):
    """``data`` as ``model``, or :class:`ResultsError`: ``not_object`` when it is no JSON object, else one line per
    number out of bounds, else pydantic's violations as one line each."""
    if not isinstance(data, dict):
        _raise([not_object], hint)
    bad = _number_lines(data, where)
    if bad:
        _raise(bad, hint)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        _raise(_lines(e, where), hint)


# -------------------------------------------------------------------------------------------------------- writer
def clean(x):
    """``x`` as plain JSON values: numpy scalars as Python ones, non-finite numbers as null, tuples as lists."""
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all, confined to its folder (generate/outputs.OutputFolder: a temporary file
    beside it, then a rename; a ``path`` that is a link planted in the folder is refused, never written through): a
    full disk left a truncated results.json in place of the last good one."""
    path = Path(path)
    try:
        OutputFolder(path.parent, create=False).write_text(path.name, text)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise OSError(e.errno, f"no space left on device writing {path.name} in {path.parent} (the previous "
                                   f"{path.name}, if any, is kept): free some space and run evaluate again") from None
        raise


def encode(results: dict, samples: list[dict]) -> tuple[str, str]:
    """(results.json text, samples.jsonl text), checked against the schema: a key no benchmark declared, or a value
    of the wrong type, is a bug of whoever built ``results``, and nothing is written."""
    data = clean({**results, "schema_version": SCHEMA_VERSION})
    free = sorted(set(data) - FIELDS - set(sections()))
    if free:
        raise ValueError(f"results hold undeclared top-level keys {free}: a benchmark adds its section through "
                         "Benchmark.sections (name -> model), never free keys")
    run = data.get("run", "")
    results_model(data, f"{run}/results.json", "a bug: evaluate built results that are not its schema")
    rows = [clean(s) for s in samples]
    for n, s in enumerate(rows, 1):
        sample_model(s, f"{run}/samples.jsonl line {n}", "a bug: evaluate built a sample that is not its schema")
    return (json.dumps(data, indent=2, sort_keys=True),
            "".join(json.dumps(s, sort_keys=True) + "\n" for s in rows))


def write_results(run: Path, results: dict, samples: list[dict], history: bool = True,
                  also: tuple[str, ...] = ()) -> str:
    """Write ``run``/results.json and samples.jsonl (each whole or not at all), checked first (:func:`encode`);
    ``history``: also keep this evaluation as results/results_{UTC stamp}.json (+ samples); ``also``: further names
    in ``run`` that get the results text (an import's worldmark_import.json). Returns the results text."""
    run = Path(run)
    text, lines = encode(results, samples)
    for name, body in (("samples.jsonl", lines), ("results.json", text), *((n, text) for n in also)):
        write_atomic(run / name, body)  # a results.json planted as a link in the run is refused, never followed
    hist = run / "results"
    if history and not hist.is_symlink():
        out = OutputFolder(run, create=False)
        out.folder("results")  # a real folder (a link or a file there is an OutputError naming it)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        name, k = stamp, 1
        while os.path.lexists(hist / f"results_{name}.json"):  # two evaluations within one second
            k += 1
            name = f"{stamp}-{k}"
        out.write_text(f"results/samples_{name}.jsonl", lines)
        out.write_text(f"results/results_{name}.json", text)
    return text


# -------------------------------------------------------------------------------------------------------- reader
def _text(path: Path, hint: str) -> str | None:
    try:
        return read_regular_text(path, MAX_RESULTS_BYTES)
    except FileNotFoundError:
        return None
    except RecordError as e:  # only the regular files evaluate wrote are read
        raise ResultsError(f"{e}: {hint}") from None


def _parse(text: str, where: str, hint: str):
    try:  # NaN / Infinity parse as floats, reported by the models with their field
        return json.loads(text)
    except RecursionError:
        raise ResultsError(f"{where} is nested too deeply to be evaluate's output: {hint}") from None
    except ValueError as e:  # JSONDecodeError (truncated, not JSON), an integer of more than 4300 digits
        msg = f"{e.msg} at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else \
            (str(e).splitlines() or [type(e).__name__])[0]
        raise ResultsError(f"{where} is not valid JSON ({msg}): {hint}") from None


def _paths(path: Path) -> tuple[Path, Path]:
    """(run folder, results file) of a run folder, its results.json or one of its results/results_<UTC>.json."""
    path = Path(path)
    if path.is_dir() or path.suffix != ".json":
        return path, path / "results.json"
    return (path.parent.parent if path.parent.name == "results" else path.parent), path


def read_results(path: str | Path) -> Results:
    """A run's results.json (``path``: the run folder or the file), read as regular UTF-8 JSON of at most
    MAX_RESULTS_BYTES and checked (:func:`results_model`); :class:`ResultsError` naming the file and each field that
    is wrong (one violation a line), and when there is none."""
    run, p = _paths(path)
    hint = _RERUN.format(run=run)
    text = _text(p, hint)
    if text is None:
        raise ResultsError(f"{run} has no {p.name}: score it first with `worldgate evaluate {run}`")
    return results_model(_parse(text, str(p), hint), str(p), f"not evaluate's results.json; {hint}")


def read_samples(path: str | Path) -> list[Sample]:
    """A run's samples.jsonl (``path``: the run folder or the file), every line checked (:func:`sample_model`); an
    absent file is no sample."""
    path = Path(path)
    run = path if path.is_dir() else path.parent
    p = run / "samples.jsonl" if path.is_dir() else path
    run = run.parent if run.name == "results" and not path.is_dir() else run
    hint = _RERUN.format(run=run)
    text = _text(p, hint)
    out = []
    for n, line in enumerate((text or "").splitlines(), 1):
        if line.strip():
            where = f"{p} line {n}"
            out.append(sample_model(_parse(line, where, hint), where, hint))
    return out


__all__ = ["SCHEMA_VERSION", "Open", "Number", "Count", "Share", "Seconds", "MAX_RESULTS_BYTES", "ResultsError",
           "Results", "Sample", "MetricSummary", "BackendInfo", "Config", "Interval", "FeatureStats", "Timing", "sections", "results_model", "sample_model",
           "clean", "encode", "violation_lines", "write_atomic", "write_results", "read_results", "read_samples"]
