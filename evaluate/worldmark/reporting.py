"""What WorldMark adds to a run's results (its ``worldmark`` section) and the table the report and ``evaluate``
print of it (the master table's columns with their overall)."""

from __future__ import annotations

from pydantic import StrictStr

from ..result_types import Number, Open
from ..score import Table, mean_of


class WorldMarkSection(Open):
    """results.json's ``worldmark``: WorldMark's master table per split (``_{domain}_{view}``) and over the run,
    per model where a run holds several, the deviation options and the backend's perception deviations."""
    commit: StrictStr | None = None
    columns: list[StrictStr] = []
    splits: dict[str, dict[str, Number | None]] = {}
    run: dict[str, Number | None] = {}
    models: dict[str, dict[str, dict[str, Number | None]]] | None = None
    mixed_models: list[StrictStr] | None = None
    master: dict[str, dict[str, dict[str, Number | None]]] | None = None
    model_in_master: dict[str, bool] | None = None
    options: dict[str, Number | None] = {}
    backend_deviations: list[StrictStr] = []


def is_case(sample: dict) -> bool:
    """A WorldMark case: a one-view record that is no WorldMemBench case (no ``family`` tag)."""
    return not (sample.get("tags") or {}).get("family") and sample.get("kind") is None


def tables(metrics, notes) -> tuple[Table, ...]:
    return (Table("WorldMark", tuple(metrics), file="worldmark", csv="worldmark",
                  columns={"overall": mean_of(metrics)}, notes=notes, profile=True),)


__all__ = ["WorldMarkSection", "is_case", "tables"]
