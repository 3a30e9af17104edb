"""Lazy registries: a name maps to ``"module:attribute"``, imported only when that name is asked for.

Every registry of worldgate (models, suites, benchmarks) is one of these, so listing names imports nothing heavy and
an unknown name answers with the closest known ones (lm-evaluation-harness ``lm_eval/api/registry.py``). It lives in
the bottom layer so that every layer above can use it without importing upward.
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from typing import Any, Iterable


class UnknownNameError(KeyError):
    """An unknown model, suite, benchmark, metric or parameter name; the message lists the closest known names."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


def did_you_mean(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    known = sorted(known)
    close = get_close_matches(str(name), known, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    return UnknownNameError(f"unknown {kind} {name!r}.{hint} Known {kind}s: {', '.join(known)}")


class Registry:
    """``name -> "module:attribute"``; :meth:`get` imports on first use."""

    def __init__(self, kind: str, entries: dict[str, str], unavailable: dict[str, str] | None = None):
        self.kind = kind
        self.entries = dict(entries)
        #: names that are known but have no entry (e.g. models without public code): their line is the error
        self.unavailable = dict(unavailable or {})

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self):
        return iter(sorted(self.entries))

    def names(self) -> list[str]:
        return sorted(self.entries)

    def get(self, name: str) -> Any:
        if name not in self.entries:
            if str(name).lower() in self.unavailable:
                raise UnknownNameError(f"{self.unavailable[str(name).lower()]}; it has no {self.kind} entry.")
            raise did_you_mean(self.kind, name, self.entries)
        module, attr = self.entries[name].split(":")
        return getattr(importlib.import_module(module), attr)


__all__ = ["Registry", "UnknownNameError", "did_you_mean"]
