"""The metric framework: which benchmarks exist, what metrics and thresholds they declare, and scoring one record.

Each benchmark keeps its metrics and thresholds in its own home (``worldmark/``, ``worldmembench/``,
``multiworldbench/``) and declares them in a :class:`~worldgate.evaluate.score.Benchmark`; :data:`BENCHMARKS` finds them
lazily by name, like the models. A new benchmark adds its home and one line here and touches no runner. Features are
found the same way (:data:`FEATURES`): a benchmark names the features it reads, and every feature a record needs is
computed once (cached) whichever benchmarks read it.

Metrics are cheap pure functions of cached features. Every threshold is a named entry of a benchmark's ``PARAMS``
(merged in :func:`params`), so ``worldgate sweep`` re-scores from the cache with other settings. WorldMark scores are
on [0, 100]; WorldMemBench's on [0, 1] (camera following reports RPEs, lower is better); MultiWorldBench's on
[0, 100].
"""

from __future__ import annotations

import functools

from worldgate.trajectories.registry import PluginError, Registry, did_you_mean, plugin_entries

from . import shared
from .features.models.catalogue import preflight
from .score import Benchmark, Score, na

BENCHMARKS = Registry("benchmark", {
    "worldmark": "worldgate.evaluate.worldmark.benchmark:BENCHMARK",
    "worldmembench": "worldgate.evaluate.worldmembench.benchmark:BENCHMARK",
    "multiworldbench": "worldgate.evaluate.multiworldbench.benchmark:BENCHMARK",
}, group="worldgate.benchmarks")  # and the installed plugins' benchmarks, after these (docs/plugins.md)

#: a plugin's feature is the entry point ``BACKEND.NAME`` of this group (``learned.my_flow = "pkg.mod:MyFlow"``): it
#: joins that backend's registry as ``NAME`` and runs after the built-ins when a benchmark reads it (docs/plugins.md)
FEATURE_GROUP = "worldgate.features"
#: per backend, feature name -> extractor class (in the order extractors run); a benchmark names what it reads
FEATURES = {
    "classical": Registry("classical feature", {
        "flow": "worldgate.evaluate.features.flow:FlowExtractor",
        "poses": "worldgate.evaluate.features.geometry:PoseExtractor",
        "camera_poses": "worldgate.evaluate.features.camera_poses:AdjacentPoseExtractor",
        "appearance": "worldgate.evaluate.features.appearance:AppearanceExtractor",
        "quality": "worldgate.evaluate.features.quality:QualityExtractor",
        "geometry": "worldgate.evaluate.features.geometry:GeometryExtractor",
        "targets": "worldgate.evaluate.features.targets:TargetExtractor",
        "events": "worldgate.evaluate.features.events:EventExtractor",
    }, group=FEATURE_GROUP, prefix="classical."),
    "learned": Registry("learned feature", {
        "flow": "worldgate.evaluate.features.flow:learned_flow",  # SEA-RAFT where configured, else torchvision RAFT
        "depth": "worldgate.evaluate.features.depth:learned_depth",  # DA3 where it imports, else Depth Anything V2
        "camera_poses": "worldgate.evaluate.features.camera_poses:DA3CameraPoses",
        "appearance": "worldgate.evaluate.features.appearance:LearnedAppearance",
        "quality": "worldgate.evaluate.features.quality:LearnedQuality",
        "targets": "worldgate.evaluate.features.tracked_targets:TrackedTargets",
        "memory_depth": "worldgate.evaluate.features.memory_depth:learned_memory_depth",  # DA3, else DA-V2
        "vggt_global": "worldgate.evaluate.features.models.vggt:VGGTOmegaGlobal",
        "qalign": "worldgate.evaluate.features.models.qalign:QAlignFeature",
    }, group=FEATURE_GROUP, prefix="learned."),
}
ORDER = {"classical": ("flow", "poses", "camera_poses", "appearance", "quality", "geometry", "targets", "events"),
         "learned": ("flow", "depth", "camera_poses", "appearance", "quality", "targets", "memory_depth",
                     "vggt_global", "qalign")}


def check_feature_plugins() -> None:
    """A plugin feature whose name starts with no backend (``BACKEND.NAME``) is an error naming its package."""
    for e in plugin_entries(FEATURE_GROUP):
        if e.name.split(".")[0] not in FEATURES or "." not in e.name:
            raise PluginError(f"plugin feature {e.where()}: its name must be BACKEND.NAME with BACKEND one of "
                              f"{', '.join(FEATURES)} (e.g. learned.{e.name.split('.')[-1]}): rename it in {e.dist}'s "
                              "pyproject.toml")


def benchmarks() -> list[Benchmark]:
    return [BENCHMARKS.get(n) for n in BENCHMARKS.entries]  # registry order: the order of every table


@functools.lru_cache(maxsize=1)
def metric_info() -> dict[str, dict]:
    """Every metric of every benchmark: id -> name, benchmark, range, higher_is_better, needs."""
    out: dict[str, dict] = {}
    owner: dict[str, str] = {}
    for n in BENCHMARKS.entries:
        for mid, info in BENCHMARKS.get(n).metrics.items():
            if mid in out:  # a plugin's benchmark reusing an id: both packages named
                raise PluginError(f"metric id {mid!r} is declared by two benchmarks: {owner[mid]} and {n} (package "
                                  f"{BENCHMARKS.origin(n)}): a plugin's metric ids must be its own")
            out[mid], owner[mid] = info, f"{n} (package {BENCHMARKS.origin(n)})"
    return out


@functools.lru_cache(maxsize=1)
def _params() -> dict[str, float]:
    out = dict(shared.PARAMS)
    for b in benchmarks():
        for k, v in b.params.items():
            if k in out and out[k] != v:
                raise ValueError(f"threshold {k!r} is declared twice with different values")
            out[k] = v
    return out


def params(overrides: dict | None = None) -> dict[str, float]:
    """Every benchmark's thresholds, with ``overrides`` (unknown names get a did-you-mean error)."""
    P = dict(_params())
    for k in sorted(overrides or ()):
        if k not in P:
            raise did_you_mean("parameter", k, P)
    P.update(overrides or {})
    return P


def worldmark_columns() -> list[str]:
    return list(BENCHMARKS.get("worldmark").metrics)


def extractors(backend: str, views: int = 1, check: bool = True) -> list:
    """One extractor per feature the benchmarks of ``views``-view records read under ``backend``, in run order;
    ``check``: the installed feature plugins' names and every model and checkout they load are checked first (off
    for ``--rescore``, which loads none and reads only the cache: the plugin scan alone was ~6 ms of a ~30 ms
    rescore, reading every installed distribution's entry points)."""
    if backend not in FEATURES:
        raise did_you_mean("backend", backend, FEATURES)
    if check:
        check_feature_plugins()
    wanted = {f for b in benchmarks() if b.views == views for f in (b.extractors or ())}
    order = ORDER[backend] + tuple(f for f in FEATURES[backend].entries if f not in ORDER[backend])  # plugins last
    names = [f for f in order if f in wanted and f in FEATURES[backend]]
    # each extractor says whether it runs here (an unavailable one is not run: its metrics say why and what to get)
    chosen = [c for c in (FEATURES[backend].get(f) for f in names) if getattr(c, "available", lambda: True)()]
    if check:  # before the first record: each one's own checks (checkouts, ports, packages), then every missing model
        for c in chosen:  # of every feature at once
            getattr(c, "preflight", lambda: None)()
        preflight([m for c in chosen for m in getattr(c, "missing", list)()])
    return [c() for c in chosen]


def score_record(feat: dict, rec: dict, backend: str, wanted: set[str] | None = None, P=None) -> dict[str, Score]:
    """Every one-view benchmark's metrics for one record; a metric whose features were not computed is unavailable
    with the reason (the backend's own, where it has no honest model for it)."""
    P = params() if P is None else P
    out: dict[str, Score] = {}
    for b in benchmarks():
        if b.views != 1:
            continue
        got = b.score(feat, rec, backend, P)
        for mid, info in b.metrics.items():
            out[mid] = got.get(mid) or na(b.unavailable.get(backend, {}).get(mid, f"features {info['needs']} not computed"))
    if wanted:
        out = {k: v for k, v in out.items() if k in wanted}
    return out


def __getattr__(name: str):
    """``METRIC_INFO``, ``PARAMS`` and ``WORLDMARK_COLUMNS`` are built from the benchmarks on first use."""
    if name == "METRIC_INFO":
        return metric_info()
    if name == "PARAMS":
        return _params()
    if name == "WORLDMARK_COLUMNS":
        return worldmark_columns()
    raise AttributeError(name)


__all__ = ["BENCHMARKS", "FEATURES", "Score", "na", "benchmarks", "metric_info", "params", "extractors",
           "score_record", "worldmark_columns"]
