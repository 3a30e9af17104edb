"""CSV tables a spreadsheet opens safely: quoted by the csv module, and a cell that would run as a formula (a run
or case name starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) neutralised (OWASP's CSV
injection advice). Used by the report's tables and evaluate's leaderboard."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _csv_cell(v) -> str:
    """A cell a spreadsheet shows as text: one that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
    return (a run or case name, say) gets a leading single quote, so it is never evaluated as a formula (OWASP's CSV
    injection advice); a plain number is kept as it is."""
    s = str(v)
    if s[:1] in ("=", "+", "-", "@", "\t", "\r") and not _NUMBER.fullmatch(s):
        return "'" + s
    return s


def csv_text(rows) -> str:
    """The CSV text of ``rows``, quoted, each formula-looking cell neutralised (for a confined writer to write)."""
    buf = io.StringIO()
    csv.writer(buf).writerows([[_csv_cell(c) for c in row] for row in rows])
    return buf.getvalue()


def write_csv(path: Path, rows):
    path.write_text(csv_text(rows))
