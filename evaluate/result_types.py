"""The value types of evaluate's results files (evaluate/results.py) and of the sections benchmarks add to them:
strict, finite numbers (a JSON number is never a string or a boolean, never NaN or Infinity, and an integer is at
most 2^53), counts, shares in [0, 1], and an object that checks its listed fields and keeps its other keys. Imports
nothing of worldgate, so a benchmark's section model can use them without importing the registry."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt

#: the largest integer a count, a size or a number in these files may hold
MAX_INT = 2 ** 53


def _finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{v} is not a finite number")
    if isinstance(v, int) and abs(v) > MAX_INT:
        raise ValueError(f"the integer {v:.3g} is out of range (more than 2^53)")
    return v


Number = Annotated[StrictInt | StrictFloat, AfterValidator(_finite)]
Count = Annotated[StrictInt, Field(ge=0), AfterValidator(_finite)]
Share = Annotated[StrictInt | StrictFloat, Field(ge=0, le=1)]
Seconds = Annotated[StrictInt | StrictFloat, Field(ge=0), AfterValidator(_finite)]


class Open(BaseModel):
    """An object whose listed fields are checked and whose other keys are kept as written."""
    model_config = ConfigDict(extra="allow")


__all__ = ["MAX_INT", "Number", "Count", "Share", "Seconds", "Open"]
