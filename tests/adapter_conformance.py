"""The conformance battery every adapter gets for free (diffusers-style tester mixin) is public, in
:mod:`worldgate.testing` (a plugin's tests use it too): subclass ``AdapterConformance`` in a test module, set
``adapter_name``, and the adapter's info and plan are checked for determinism, segment timing, intrinsics bookkeeping
and a write/read round trip of its native files. This module re-exports it for worldgate's own tests, with the gated
tests' checkout helper."""

from __future__ import annotations

from pathlib import Path

from worldgate.testing import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case

ARENA = Path(__file__).resolve().parents[1] / ".." / "shared" / "worldmark" / "arena_inputs"

__all__ = ["ARENA", "REAL_K", "REAL_SIZE", "AdapterConformance", "gated_checkout", "worldmark_case"]


def gated_checkout(var: str, commit: str):
    """The folder named by ``$var`` (a gated test's ``<MODEL>_CHECKOUT``) if it is a checkout at ``commit`` (a folder
    that is no git work tree is taken as an export of it); None otherwise, so the test skips."""
    import os
    import subprocess

    p = os.environ.get(var)
    if not p or not Path(p).is_dir():
        return None
    try:
        head = subprocess.run(["git", "-C", p, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return Path(p)
    if head.returncode == 0 and head.stdout.strip() != commit:
        return None
    return Path(p)
