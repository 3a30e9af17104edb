"""The Python API (docs/python-api.md): roll out, score and read results without the command line.

``worldgate.generate(...)``, ``worldgate.evaluate(...)`` and ``worldgate.load_results(...)`` are these functions
(``import worldgate`` imports none of their modules until one is called). They take the command line's arguments
as keywords and return typed results: :class:`~worldgate.generate.runner.GenerateResult` (which cases were written,
skipped, failed) and :class:`~worldgate.evaluate.results.Results` (results.json as evaluate writes it, read back
and checked by its one reader).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from worldgate.evaluate.results import Results, Sample, read_results, read_samples
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.runner import GenerateResult, run_generate

#: the most overrides one call takes (the CLI's are bounded per item by generate)
MAX_OVERRIDES = 256


def as_overrides(overrides: Mapping[str, object] | Iterable[str] | None) -> list[str] | None:
    """``{"trajectory.seconds": 1}`` or ``["trajectory.seconds=1"]`` as the CLI's ``key=value`` items."""
    if overrides is None:
        return None
    if isinstance(overrides, str):
        raise TypeError(f"overrides must be a mapping or a list of 'key=value' strings, not the string "
                        f"{overrides[:60]!r} (write [{overrides[:60]!r}])")
    items = [f"{k}={_value(v)}" for k, v in overrides.items()] if isinstance(overrides, Mapping) else list(overrides)
    if len(items) > MAX_OVERRIDES:
        raise ValueError(f"{len(items)} overrides: at most {MAX_OVERRIDES}")
    for it in items:
        if not isinstance(it, str):
            raise TypeError(f"override {it!r:.60}: give 'key=value' strings or a mapping")
    return items


def _value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def generate(model: str, suite: str, out: str | Path | None = None, *, data: str | Path | None = None,
             limit: int | None = None, seed: int = 0, seeds: Iterable[int] | None = None, dry_run: bool = False,
             overrides: Mapping[str, object] | Iterable[str] | None = None, model_args: Mapping | None = None,
             full: bool = False, device: str = "cpu", context: str | None = None, budget: int | None = None,
             progress: bool = True) -> GenerateResult:
    """``worldgate generate``: roll out ``suite`` with ``model`` into the run folder ``out`` (default
    ``runs/MODEL-SUITE``), one record per case; resumes a run already there. ``overrides`` are the command line's
    ``key=value`` items (``model.width``, ``suite.K``, ``trajectory.seconds``, ``context.K``) as a mapping or a list;
    an unknown key is an error with a did-you-mean. ``model_args``: the adapter's keyword arguments (``--model-args``).
    Every argument is checked before anything is written."""
    return run_generate(model, suite, out, data=None if data is None else str(data), limit=limit, seed=seed,
                        dry_run=dry_run, overrides=as_overrides(overrides),
                        model_args=dict(model_args) if model_args else None, full=full, device=device,
                        progress=progress, context=context, budget=budget,
                        seeds=None if seeds is None else [int(s) for s in seeds])


def evaluate(run: str | Path | GenerateResult, *, metrics: Iterable[str] | None = None, backend: str = "classical",
             rescore: bool = False, params: Mapping[str, float] | None = None, judge: str | None = None,
             judge_device: str | None = None, progress: bool = True) -> Results:
    """``worldgate evaluate RUN``: score the run's records (``run``: its folder, or what :func:`generate`
    returned), write results.json and samples.jsonl into it and return the results as written (typed, checked).
    ``metrics``: metric ids (default: all); ``params``: benchmark thresholds (``--param``); ``rescore``: from cached
    features only; ``judge``: the VLM judge (``--judge``)."""
    folder = Path(run.out if isinstance(run, GenerateResult) else run)
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",")]
    wanted = {m for m in metrics if m} if metrics is not None else None
    if wanted is not None and not wanted:
        raise ValueError("metrics names no metric: give metric ids (worldgate list metrics), or None for all")
    evaluate_run(folder, wanted, backend, rescore, params=dict(params) if params else None, progress=progress,
                 judge=judge, judge_device=judge_device)
    return read_results(folder)


def load_results(path: str | Path) -> Results:
    """A scored run's results.json (``path``: the run folder or the file), typed and checked: ``.metrics[id].mean``,
    ``.records``, ``.protocol``, a benchmark's section through ``.section(name)``."""
    return read_results(path)


def load_samples(path: str | Path) -> list[Sample]:
    """A scored run's samples.jsonl: one :class:`~worldgate.evaluate.results.Sample` per record (``.scores``,
    ``.unavailable`` with each reason, ``.error``)."""
    return read_samples(path)


__all__ = ["GenerateResult", "Results", "Sample", "as_overrides", "evaluate", "generate", "load_results", "load_samples"]
