"""WorldMemBench as the runner sees it: its metric ids, thresholds, the features it reads, scoring and analyses."""

from __future__ import annotations

import functools

from ..score import Benchmark, Score, metric, na
from ..shared import quality_scores
from .camera import camera_following
from .dynamic import ASPECT_METRIC, dynamic_scores, judge_extractors
from .params import PARAMS
from .reporting import Analyses, is_case, tables
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
    # dynamic memory: the gated 8-question protocol answered by a VLM judge (evaluate --judge HF_ID) ...
    "dynamic_score": metric("Dynamic Memory (VLM judge)", B, "0-1", needs=("judge",)),
    "dynamic_p_start": metric("Dynamic Memory: p_start", B, "0-1", needs=("judge",)),
    "dynamic_conditional": metric("Dynamic Memory: conditional", B, "0-1", needs=("judge",)),
    "dynamic_return_progress": metric("Dynamic Memory: return progress", B, "0-1", needs=("judge",)),
    "dynamic_persistence": metric("Dynamic Memory: persistence/reset", B, "0-1", needs=("judge",)),
    "dynamic_final_state": metric("Dynamic Memory: final state", B, "0-1", needs=("judge",)),
    "dynamic_causal": metric("Dynamic Memory: causal/physical", B, "0-1", needs=("judge",)),
    # ... and by the measured state probe of Engine records: a proxy, reported under its own ids
    "dynamic_probe_score": metric("Dynamic Memory, measured probe (proxy)", B, "0-1", needs=("events",)),
    "dynamic_probe_p_start": metric("Dynamic Memory probe (proxy): p_start", B, "0-1", needs=("events",)),
    "dynamic_probe_conditional": metric("Dynamic Memory probe (proxy): conditional", B, "0-1", needs=("events",)),
}


#: the case family each metric is scored on (the paper scores Human metrics on the Human cases, ..., general quality on
#: the static cases); camera following and quality apply to every static family
FAMILY_OF = {"human_identity": ("human",), "human_appearance": ("human",), "object_appearance": ("object",),
             "object_geometry": ("object",), "environment_visible": ("environment",),
             "depth_spearman": ("environment",), "spherical_reconstruction": ("environment",),
             **{m: ("dynamic",) for m in ("dynamic_score", "dynamic_p_start", "dynamic_conditional",
                                          *ASPECT_METRIC.values(), "dynamic_probe_score", "dynamic_probe_p_start",
                                          "dynamic_probe_conditional")},
             "imaging_quality": ("human", "object", "environment"), "aesthetic_quality": ("human", "object", "environment"),
             "camera_rpe_trans": ("human", "object", "environment"), "camera_rpe_rot": ("human", "object", "environment")}
FAMILIES = ("human", "object", "environment", "dynamic")


def family_of(rec: dict) -> str | None:
    """A case's WorldMemBench family (``tags.family``); None for cases that do not say (every metric applies)."""
    f = (rec.get("tags") or {}).get("family")
    return f if f in FAMILIES else None


def score(feat: dict, rec: dict, backend: str, P: dict) -> dict[str, Score]:
    out = _score_all(feat, rec, backend, P)
    fam = family_of(rec)
    if fam is None:
        return out
    for mid, fams in FAMILY_OF.items():  # a metric of another family: not applicable here, never averaged in
        if fam not in fams:
            out[mid] = na(f"not applicable: a {'/'.join(fams) if len(fams) < 3 else 'static'}-family metric on a "
                          f"{fam}-family case")
    return out


def _score_all(feat: dict, rec: dict, backend: str, P: dict) -> dict[str, Score]:
    out: dict[str, Score] = {}
    if "quality" in feat:
        q = quality_scores(feat, rec, backend, P)
        out.update({k: q[k] for k in ("imaging_quality", "aesthetic_quality")})
    # camera following reads the adjacent chain (camera_poses) where it ran on this record, else the shared poses;
    # under --backend learned a record outside the families has neither (DA3's chain is inactive there)
    active = "camera_poses" in feat and "inactive" not in feat["camera_poses"]
    if "poses" in feat or active:
        out.update(camera_following(feat, rec, P, backend))
    # always: each dynamic metric says why it is missing (no items, no --judge, the probe's backend)
    out.update(dynamic_scores(feat, rec, rec.get("dir"), P))
    if "targets" in feat and "appearance" in feat:
        out.update(static_memory_scores(feat, rec, backend, P))
    return out


def finish(results: dict, samples: list[dict], wanted: set | None = None, **_) -> None:
    # per metric: a metric's per-revisit series exists only on its own family's cases (score() marks the others
    # not applicable and keeps no detail for them)
    results["analyses"] = analyses([s for s in samples if "error" not in s])
    # each metric's family coverage: the cases of its families, and how many of them it scored
    fam = [((s.get("tags") or {}).get("family"), s) for s in samples]
    for mid, fams in FAMILY_OF.items():
        m = results["metrics"].get(mid)
        if m is None:
            continue
        cases = [s for f, s in fam if f in fams]
        scored = [s for s in cases if (s.get("scores") or {}).get(mid) is not None]
        m["families"] = list(fams)
        m["family_coverage"] = {"cases": len(cases), "scored": len(scored),
                                "share": len(scored) / len(cases) if cases else None}


_NO_LEARNED_POSES = ("camera following under --backend learned runs DA3's poses (the paper's estimator), and "
                     "depth-anything-3 does not import here: pip install --no-deps depth-anything-3==0.1.1 "
                     "addict==2.4.0 einops==0.8.2 (weights: hf download depth-anything/DA3-LARGE-1.1, CC BY-NC 4.0); "
                     "or use --backend classical")
_PROBE_CLASSICAL = ("the measured probe (a proxy) runs under --backend classical; the judge metrics need --judge "
                    "HF_ID or --judge openai:MODEL@BASE_URL")
BENCHMARK = Benchmark(
    name="worldmembench", title="WorldMemBench", metrics=METRICS, params=PARAMS, views=1,
    extractors=("poses", "camera_poses", "appearance", "quality", "targets", "events", "memory_depth"), score=score,
    finish=finish,
    unavailable={"learned": {
        "camera_rpe_trans": _NO_LEARNED_POSES, "camera_rpe_rot": _NO_LEARNED_POSES,
        "dynamic_probe_score": _PROBE_CLASSICAL, "dynamic_probe_p_start": _PROBE_CLASSICAL,
        "dynamic_probe_conditional": _PROBE_CLASSICAL}},
)
#: what ``evaluate --judge HF_ID`` adds to a run's extractors: (model id, backend, device) -> [Extractor]; the runner
#: asks every benchmark for this (it names none)
BENCHMARK.judge = judge_extractors
#: the report's and evaluate's tables of WorldMemBench (its groups), the results section finish adds, its cases
BENCHMARK.report = tables(METRICS)
BENCHMARK.sections = {"analyses": Analyses}
BENCHMARK.owns = functools.partial(is_case, families=FAMILIES)
