"""Lazy registries: a name maps to ``"module:attribute"``, imported only when that name is asked for.

Every registry of worldgate (models, suites, benchmarks, features) is one of these, so listing names imports nothing
heavy and an unknown name answers with the closest known ones (lm-evaluation-harness ``lm_eval/api/registry.py``). It
lives in the bottom layer so that every layer above can use it without importing upward.

Out-of-tree plugins (docs/plugins.md): a registry made with ``group=`` also holds the entry points an installed
package declares in that ``importlib.metadata`` group (``[project.entry-points."worldgate.adapters"]``,
``NAME = "module:Object"``), as inspect_ai loads its extensions. They are read on the first lookup or listing (never
at ``import worldgate``), listed after the built-ins, and looked up like them. A plugin name that collides with a
built-in or with another package's is a :class:`PluginError` naming both distributions.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from difflib import get_close_matches
from importlib import metadata
from typing import Any, Iterable

#: the distribution that owns the built-in entries (named in collision errors)
BUILTIN = "worldgate"
#: a plugin entry's name: what the CLI takes after --model/--suite (bounded; no spaces, no path separators)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
#: ``module:attribute`` (dotted module, one attribute name)
TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
#: the entry-point groups worldgate reads (docs/plugins.md)
GROUPS = ("worldgate.adapters", "worldgate.suites", "worldgate.benchmarks", "worldgate.features")


class UnknownNameError(KeyError):
    """An unknown model, suite, benchmark, metric or parameter name; the message lists the closest known names."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


class PluginError(ValueError):
    """An installed plugin's entry point is unusable (a colliding name, a malformed target, a failed import); the
    message names the distributions involved and what to change."""


def did_you_mean(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    known = sorted(known)
    close = get_close_matches(str(name), known, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    return UnknownNameError(f"unknown {kind} {name!r}.{hint} Known {kind}s: {', '.join(known)}")


@dataclass(frozen=True)
class PluginEntry:
    """One entry point of an installed distribution: ``name = "target"`` in ``group``."""

    group: str
    name: str
    target: str
    dist: str

    def where(self) -> str:
        return f"{self.dist} ({self.group}: {self.name} = {self.target!r})"


def plugin_entries(group: str) -> list[PluginEntry]:
    """Every entry point of ``group`` in the installed distributions, sorted by (name, distribution); a malformed
    name or target is a PluginError naming its distribution."""
    out = []
    for ep in metadata.entry_points(group=group):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "an unknown distribution"
        e = PluginEntry(group, ep.name, ep.value.strip(), dist)
        if not NAME.fullmatch(e.name):
            raise PluginError(f"plugin {e.where()}: the name must match {NAME.pattern} (letters, digits, '.', '_', "
                              f"'+', '-'; at most 64 characters): rename it in {dist}'s pyproject.toml")
        if not TARGET.fullmatch(e.target):
            raise PluginError(f"plugin {e.where()}: the target must be 'module:Object' (e.g. "
                              f"'my_model.adapter:MyModel'): fix it in {dist}'s pyproject.toml")
        out.append(e)
    return sorted(set(out), key=lambda e: (e.name, e.dist, e.target))


class Registry:
    """``name -> "module:attribute"``; :meth:`get` imports on first use. ``group``: also the entry points of that
    ``importlib.metadata`` group (read once, on the first lookup or listing); ``prefix``: only the group's entries
    whose name starts with it, without it (the feature registries of one backend: ``learned.my_flow`` is the learned
    backend's ``my_flow``)."""

    def __init__(self, kind: str, entries: dict[str, str], unavailable: dict[str, str] | None = None,
                 group: str | None = None, prefix: str = ""):
        self.kind = kind
        self.builtin = dict(entries)
        #: names that are known but have no entry (e.g. models without public code): their line is the error
        self.unavailable = dict(unavailable or {})
        self.group = group
        self.prefix = prefix
        self._entries: dict[str, str] | None = None
        self._plugins: dict[str, PluginEntry] = {}

    @property
    def entries(self) -> dict[str, str]:
        """Built-ins (in their order), then plugins (by name): resolved on first use."""
        if self._entries is None:
            self._entries, self._plugins = self._resolve()
        return self._entries

    def _resolve(self) -> tuple[dict[str, str], dict[str, PluginEntry]]:
        entries, plugins = dict(self.builtin), {}
        if self.group is None:
            return entries, plugins
        for e in plugin_entries(self.group):
            if not e.name.startswith(self.prefix):
                continue
            name = e.name[len(self.prefix):]
            if not name:
                raise PluginError(f"plugin {e.where()}: names no {self.kind} after {self.prefix!r}")
            if name in plugins and plugins[name].target == e.target and plugins[name].dist == e.dist:
                continue  # the same distribution seen twice on the path
            if name in entries:
                first = plugins[name].where() if name in plugins else f"{BUILTIN} (built-in {entries[name]!r})"
                raise PluginError(
                    f"{self.kind} name {name!r} is declared by two packages: {first} and {e.where()}. Rename the "
                    f"entry point in {e.dist}'s pyproject.toml ([project.entry-points.\"{self.group}\"]) or uninstall "
                    "one of them")
            entries[name], plugins[name] = e.target, e
        return entries, plugins

    def refresh(self) -> None:
        """Read the installed plugins again at the next lookup (after installing or removing one in-process)."""
        self._entries, self._plugins = None, {}

    def origin(self, name: str) -> str:
        """The distribution that registers ``name``: ``worldgate`` for a built-in, else the plugin's."""
        if name not in self.entries:
            raise did_you_mean(self.kind, name, self.entries)
        return self._plugins[name].dist if name in self._plugins else BUILTIN

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
        plugin = self._plugins.get(name)
        if plugin is None:
            return getattr(importlib.import_module(module), attr)
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise PluginError(f"{self.kind} {name!r} of plugin {plugin.where()} does not load ({type(e).__name__}: "
                              f"{e}): reinstall {plugin.dist} or fix its entry point") from e


__all__ = ["BUILTIN", "GROUPS", "PluginEntry", "PluginError", "Registry", "UnknownNameError", "did_you_mean",
           "plugin_entries"]
