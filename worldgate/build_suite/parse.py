"""Strict parsing of action-selection answers: five distinct WorldMark ids from 1-15, nothing else, never a guess."""

from __future__ import annotations

import re

N_SELECTED = 5
ID_RANGE = range(1, 16)
#: one id as written: ASCII digits only, no leading zero ("01" and Unicode digits such as "١" are refused; "0" is read
#: so that it can be reported as outside 1-15)
ID_TOKEN = re.compile(r"0|[1-9][0-9]?")


class AnswerError(ValueError):
    """An answer (or a row of an action file) that is not five distinct ids 1-15 separated by commas."""


def parse_action_ids(text: str, n: int = N_SELECTED) -> list[int]:
    """``"1, 6, 9, 11, 13"`` -> ``[1, 6, 9, 11, 13]`` (ascending, as WorldMark's ``*_action.txt`` rows are).

    Accepted: ``n`` integers (ASCII digits, no leading zero) separated by commas, optional spaces, one optional final
    full stop. Refused with the reason: anything else (prose, brackets, other separators, "01", non-ASCII digits), an id
    outside 1-15, a repeated id, a wrong count."""
    if not isinstance(text, str):
        raise AnswerError(f"expected text, got {type(text).__name__}")
    shown = text.strip()[:120]
    body = text.strip().removesuffix(".")
    parts = [p.strip() for p in body.split(",")]
    if not body or not all(ID_TOKEN.fullmatch(p) for p in parts):
        raise AnswerError(f"not a comma-separated list of ids: {shown!r} (expected e.g. '1, 2, 3, 4, 5')")
    ids = [int(p) for p in parts]
    if len(ids) != n:
        raise AnswerError(f"{len(ids)} ids in {shown!r}, expected {n}")
    bad = [i for i in ids if i not in ID_RANGE]
    if bad:
        raise AnswerError(f"ids {bad} in {shown!r} are outside 1-15")
    if len(set(ids)) != n:
        raise AnswerError(f"repeated ids in {shown!r}: {n} distinct ids are needed")
    return sorted(ids)


def format_action_ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)
