"""The classical stand-in for WorldMark's global memory: per video, the median Sampson error of ORB matches under
the two-view geometry of frames 1 s apart (focal-normalised; ``classical_geometry.GeometryExtractor``). WorldMark runs
VGGT-Omega here (co-visible 3-D distances over median depth, vg:33-94); this is not that quantity, which is why its
tau is the backend's own (``global_e_scale_classical``) and results.json lists it among the backend's deviations."""

from __future__ import annotations

import numpy as np

from ..score import Score, na
from .params import PARAMS


def global_memory(feat, rec, backend: str = "classical", P=PARAMS) -> Score:
    e = feat["geometry"]["err"]
    e = e[np.isfinite(e)]
    if len(e) == 0:
        return na("no frame pair at 1 fps with enough matches to fit two-view geometry")
    med = float(np.median(e))
    return Score(100.0 / (1.0 + med / P[f"global_e_scale_{backend}"]), detail={"median_err": med, "pairs": int(len(e))})


