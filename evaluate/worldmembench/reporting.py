"""What WorldMemBench adds to a run's results (its ``analyses`` section) and the tables the report and ``evaluate``
print of it, one per group of METRICS.md (static memory, dynamic memory, quality, camera following)."""

from __future__ import annotations

from ..result_types import Open
from ..score import Table

#: group -> its metric ids, in table order (ids no run produced are left out of a table)
GROUPS = {
    "static memory": ("human_identity", "human_appearance", "object_appearance", "object_geometry",
                      "environment_visible", "depth_spearman", "spherical_reconstruction"),
    "dynamic memory": ("dynamic_p_start", "dynamic_conditional", "dynamic_score", "dynamic_return_progress",
                       "dynamic_persistence", "dynamic_final_state", "dynamic_causal", "dynamic_probe_score",
                       "dynamic_probe_p_start", "dynamic_probe_conditional"),
    "quality": ("imaging_quality", "aesthetic_quality"),
    "camera following": ("camera_rpe_trans", "camera_rpe_rot"),
}


class Analyses(Open):
    """results.json's ``analyses``: the per-revisit decay series and the paired / return-qualified analyses of
    worldmembench/static.py ``analyses``."""


def tables(metrics) -> tuple[Table, ...]:
    """One table per group; a metric of ``metrics`` no group lists gets a table of its own group, "other", so a new
    metric is never missing from the report."""
    listed = {m for ids in GROUPS.values() for m in ids}
    groups = dict(GROUPS)
    rest = tuple(m for m in metrics if m not in listed)
    if rest:
        groups["other"] = rest
    return tuple(Table(f"WorldMemBench — {g}", ids, file="worldmembench", csv=f"worldmembench-{g.replace(' ', '-')}")
                 for g, ids in groups.items())


def is_case(sample: dict, families) -> bool:
    return (sample.get("tags") or {}).get("family") in families


__all__ = ["GROUPS", "Analyses", "tables", "is_case"]
