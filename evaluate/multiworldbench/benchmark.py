"""MultiWorldBench as the runner sees it: the ten capabilities of two-view records, thresholds, scoring, tracks."""

from __future__ import annotations

from ..score import Benchmark, metric
from .protocol import PARAMS
from .reporting import TABLES, MultiWorldSection, is_case
from .scoring import finish_results, format_tracks, score_folder

METRICS = {m: metric(n, "MultiWorldBench", needs=("two-view record",)) for m, n in (
    ("control_isolation", "Control Isolation"), ("coordination_fairness", "Coordination Fairness"),
    ("cross_view_motion", "Cross-View Motion"), ("state_synchronization", "State Synchronization"),
    ("state_persistence", "State Persistence"), ("structural_consistency", "Structural Consistency"),
    ("spatial_reasoning", "Spatial Reasoning"), ("race_condition_consistency", "Race-Condition Consistency"),
    ("style_consistency", "Style Consistency"), ("id_consistency", "ID Consistency"))}

BENCHMARK = Benchmark(name="multiworldbench", title="MultiWorldBench", metrics=METRICS, params=PARAMS, views=2,
                      score_folder=score_folder, finish=finish_results, summary=format_tracks)


def judge_extractors(judge, backend: str, device: str | None = None, check: bool = True) -> list:
    """``evaluate --judge SPEC``: MultiWorldBench asks its judge while scoring (``score_folder(judge=...)``; the
    judge caches its answers on disk), so it adds no feature; taking a judge is what makes the runner pass it."""
    return []


BENCHMARK.judge = judge_extractors
#: the report's and evaluate's table of MultiWorldBench, the results section finish adds, and its cases
BENCHMARK.report = TABLES
BENCHMARK.sections = {"multiworld": MultiWorldSection}
BENCHMARK.owns = is_case
