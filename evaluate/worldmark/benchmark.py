"""WorldMark as the runner sees it: its thirteen-odd metric ids, thresholds, the features it reads, and scoring."""

from __future__ import annotations

from ..score import Benchmark, Score, metric
from ..shared import quality_scores
from .action import worldmark_action
from .memory import global_memory, local_memory, revisit_memory
from .params import PARAMS

METRICS: dict[str, dict] = {}
for _s, _n in (("trans", "translation"), ("rot", "rotation")):
    METRICS[f"direction_accuracy_{_s}"] = metric(f"Direction Accuracy ({_n})", "WorldMark", needs=("flow", "poses"))
    METRICS[f"direction_purity_{_s}"] = metric(f"Direction Purity ({_n})", "WorldMark", needs=("flow", "poses"))
    METRICS[f"motion_stability_{_s}"] = metric(f"Motion Stability ({_n})", "WorldMark", needs=("flow",))
    METRICS[f"response_latency_{_s}"] = metric(f"Response Latency ({_n})", "WorldMark", needs=("flow",))
METRICS.update({
    "local_memory": metric("Local Memory", "WorldMark", needs=("flow", "appearance")),
    "revisit_memory": metric("Revisit Memory", "WorldMark", needs=("flow", "appearance", "poses")),
    "global_memory": metric("Global Memory", "WorldMark", needs=("geometry",)),
    "visual_quality": metric("Visual Quality", "WorldMark", needs=("quality",)),
})


def score(feat: dict, rec: dict, backend: str, P: dict) -> dict[str, Score]:
    out: dict[str, Score] = {}
    if "flow" in feat and ("poses" in feat or "depth" in feat):
        out.update(worldmark_action(feat, rec, P))
    if "flow" in feat and "appearance" in feat:
        out["local_memory"] = local_memory(feat, rec, backend, P)
        out["revisit_memory"] = revisit_memory(feat, rec, backend, P)
    if "geometry" in feat:
        out["global_memory"] = global_memory(feat, rec, backend, P)
    if "quality" in feat:
        out["visual_quality"] = quality_scores(feat, rec, backend, P)["visual_quality"]
    return out


BENCHMARK = Benchmark(
    name="worldmark", title="WorldMark", metrics=METRICS, params=PARAMS, views=1,
    extractors=("flow", "depth", "poses", "appearance", "quality", "geometry"), score=score,
    unavailable={"learned": {
        "global_memory": "no packaged feed-forward reconstruction (VGGT) backend; use --backend classical"}},
)
