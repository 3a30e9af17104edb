"""What a metric returns, and what a benchmark declares.

A metric returns a :class:`Score`: a value, or ``None`` with the reason it is unavailable (not applicable, not
evaluable, or no honest backend), never a made-up number. A :class:`Benchmark` is one benchmark's evaluate home as the
runner sees it: its metrics (id -> display name, range, direction, the features it needs), its thresholds (PARAMS,
every one a name ``worldgate sweep`` can change), which records it scores (by their number of views), and how.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Score:
    value: float | None
    reason: str | None = None
    detail: dict | None = None

    def to_dict(self):
        d = {"value": self.value}
        if self.reason:
            d["reason"] = self.reason
        if self.detail:
            d["detail"] = self.detail
        return d


def na(reason: str) -> Score:
    return Score(None, reason)


def metric(name: str, benchmark: str, rng: str = "0-100", higher: bool = True, needs: tuple = ()) -> dict:
    """One metric's declaration: display name, benchmark, range, whether higher is better, the features it needs."""
    return {"name": name, "benchmark": benchmark, "range": rng, "higher_is_better": higher, "needs": tuple(needs)}


@dataclass
class Benchmark:
    """One benchmark's evaluate home.

    One-view benchmarks give ``extractors(backend)`` (their features; shared ones are computed once per record) and
    ``score(feats, rec, backend, P) -> {metric: Score}``; benchmarks of multi-view records give
    ``score_folder(folder, cache, backend, wanted, P, rescore, stats) -> samples row``. ``finish(results, samples,
    wanted)`` adds run-level results (analyses, tracks) in place."""

    name: str
    title: str
    metrics: dict[str, dict]
    params: dict[str, float]
    views: int = 1
    extractors: Callable | None = None
    score: Callable | None = None
    score_folder: Callable | None = None
    #: (feats, rec, backend, P) -> what ``finish`` needs of a record beyond its sample line (kept in memory only)
    collect: Callable | None = None
    #: (results, samples, wanted, collected=..., backend=..., P=...) -> None
    finish: Callable | None = None
    summary: Callable | None = None  # results -> a line printed under the table (or "")
    #: per backend, metrics it cannot measure honestly and why (reported, never filled from another backend)
    unavailable: dict[str, dict[str, str]] = field(default_factory=dict)
    #: (model_id, backend, device) -> [Extractor]: the benchmark's VLM judge as cached features (evaluate --judge)
    judge: Callable | None = None
    #: the top-level results.json sections ``finish`` adds: name -> the pydantic model that checks it (or None);
    #: evaluate/results.py refuses any other key
    sections: dict[str, type | None] = field(default_factory=dict)
    #: the tables the report and ``evaluate`` print of this benchmark, in order (:class:`Table`)
    report: tuple = ()
    #: sample line -> whether the record is one of this benchmark's cases (``evaluate`` prints the tables of the
    #: benchmarks whose cases the run holds); None: a case of every benchmark
    owns: Callable | None = None
    #: (run, record folder, sample, results) -> (what the HTML report plots under the rollout, or None; why not)
    signals: Callable | None = None


@dataclass
class Table:
    """One table of a benchmark's report (as an lm-eval group: a title, the metrics it lists, aggregates).

    ``file``: the Markdown file it goes into (``{file}.md``; tables of one file follow each other), ``csv``: its CSV
    (``{csv}.csv``); ``columns``: extra columns after the metrics, label -> (results dict -> number or None), e.g. a
    track's or the overall mean; ``notes``: results dict -> lines printed under the table for that run;
    ``profile``: the table is drawn as the report's capability profile (profile.png, its metrics on 0-100)."""

    title: str
    metrics: tuple[str, ...]
    file: str
    csv: str | None = None
    columns: dict[str, Callable] = field(default_factory=dict)
    notes: Callable | None = None
    profile: bool = False


def mean_of(ids) -> Callable:
    """A :class:`Table` column: the mean of the run-level means of ``ids`` that are available (None if none is)."""
    ids = tuple(ids)

    def col(results: dict):
        ms = results.get("metrics") or {}
        vs = [ms[m]["mean"] for m in ids if isinstance(ms.get(m), dict) and ms[m].get("mean") is not None]
        return sum(vs) / len(vs) if vs else None

    return col


__all__ = ["Score", "na", "metric", "Benchmark", "Table", "mean_of"]
