"""What MultiWorldBench adds to a run's results (its ``multiworld`` section: the paper's three tracks and the
overall) and the table the report and ``evaluate`` print of it (the ten capabilities, each track, the overall)."""

from __future__ import annotations

from pydantic import StrictStr

from ..result_types import Count, Number, Open
from ..score import Table, mean_of
from .protocol import CAPABILITIES, KIND, TRACKS


class Track(Open):
    mean: Number | None = None
    capabilities: list[StrictStr] = []
    available_mean: Number | None = None


class MultiWorldSection(Open):
    """results.json's ``multiworld``: each track's mean (None unless all its capabilities are available), the
    overall (the mean of all ten, None unless all are available) and the means of the available ones."""
    tracks: dict[str, Track] = {}
    overall: Number | None = None
    available_mean: Number | None = None
    available: Count = 0
    paths: dict[str, StrictStr | None] = {}


def _track(t: str):
    return lambda res: (((res.get("multiworld") or {}).get("tracks") or {}).get(t) or {}).get("mean")


def _overall(res: dict):
    return (res.get("multiworld") or {}).get("overall", mean_of(CAPABILITIES)(res))


TABLES = (Table("MultiWorldBench", tuple(CAPABILITIES), file="multiworldbench", csv="multiworldbench",
                columns={**{f"track: {t}": _track(t) for t in sorted(TRACKS)}, "overall": _overall}),)


def is_case(sample: dict) -> bool:
    """A MultiWorldBench case: a two-view record's sample line."""
    return sample.get("kind") == KIND


__all__ = ["MultiWorldSection", "Track", "TABLES", "is_case"]
