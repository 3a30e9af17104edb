"""WorldMemBench as the runner sees it: its metric ids, thresholds, the features it reads, scoring and analyses."""

from __future__ import annotations

from ..score import Benchmark, Score, metric
from ..shared import quality_scores
from .camera import camera_following
from .dynamic import dynamic_scores
from .params import PARAMS
from .static import analyses, static_memory_scores

B = "WorldMemBench"
METRICS: dict[str, dict] = {
    "imaging_quality": metric("Imaging Quality", B, "0-1", needs=("quality",)),
    "aesthetic_quality": metric("Aesthetic Quality", B, "0-1", needs=("quality",)),
    "camera_rpe_trans": metric("Camera following: translation RPE", B, ">=0", higher=False, needs=("poses",)),
    "camera_rpe_rot": metric("Camera following: rotation RPE", B, ">=0", higher=False, needs=("poses",)),
    # static memory: fixed reference from phase V, every revisit R_k counts
    "human_identity": metric("Human Identity", B, "0-1", needs=("faces",)),
    "human_appearance": metric("Human Appearance", B, "0-1", needs=("targets", "poses")),
    "object_appearance": metric("Object Appearance", B, "0-1", needs=("targets", "poses")),
    "object_geometry": metric("Object Geometry", B, "0-1", needs=("targets", "poses")),
    "environment_visible": metric("Environment Visible", B, "0-1", needs=("appearance", "poses")),
    "depth_spearman": metric("Environment Depth Spearman", B, "0-1", needs=("memory_depth",)),
    "spherical_reconstruction": metric("Environment Spherical Reconstruction", B, "0-1", needs=("memory_depth",)),
    # dynamic memory: gated 8-question protocol; measured probe or a VLM judge
    "dynamic_score": metric("Dynamic Memory", B, "0-1", needs=("events",)),
    "dynamic_p_start": metric("Dynamic Memory: p_start", B, "0-1", needs=("events",)),
    "dynamic_conditional": metric("Dynamic Memory: conditional", B, "0-1", needs=("events",)),
}


def score(feat: dict, rec: dict, backend: str, P: dict) -> dict[str, Score]:
    out: dict[str, Score] = {}
    if "quality" in feat:
        q = quality_scores(feat, rec, backend, P)
        out.update({k: q[k] for k in ("imaging_quality", "aesthetic_quality")})
    if "poses" in feat:
        out.update(camera_following(feat, rec, P))
    if "events" in feat:
        out.update(dynamic_scores(feat, rec, rec.get("dir"), P))
    if "targets" in feat and "appearance" in feat:
        out.update(static_memory_scores(feat, rec, backend, P))
    return out


def finish(results: dict, samples: list[dict], wanted: set | None = None, **_) -> None:
    results["analyses"] = analyses([s for s in samples if "error" not in s])


BENCHMARK = Benchmark(
    name="worldmembench", title="WorldMemBench", metrics=METRICS, params=PARAMS, views=1,
    extractors=("poses", "appearance", "quality", "targets", "events", "memory_depth"), score=score, finish=finish,
    unavailable={"learned": {
        "camera_rpe_trans": "no packaged learned pose estimator (DA3 / ViPE); use --backend classical",
        "camera_rpe_rot": "no packaged learned pose estimator (DA3 / ViPE); use --backend classical"}},
)
