"""Checks of a model repository the user points at (a checkout named by an environment variable), shared by the
learned extractors that run a model from its own code (VGGT-Omega, SEA-RAFT): the folder, the files and names it must
hold, and whether it imports. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path


def checkout_problems(repo: Path | None, name: str, used: str, env: str, clone: str, modules: dict, repo_url: str,
                      clone_cmd: str, deps_cmd: str, import_checkout=None) -> list[tuple[str, str, str]]:
    """(what is wrong, id, the command that mends it) for the checkout ``repo`` of ``name`` (``used``: what for;
    None: ``env`` not set): no such folder,
    a module file lacking the name it must define (``modules``: module -> (relative file, name)), or — with
    ``import_checkout`` — the checkout failing to import (its last error line)."""
    if repo is None:
        return [(f"{name} checkout ({used})", f"${env} (not set)", clone)]
    if not repo.is_dir():
        return [(f"{name} checkout ({used})", f"{env}={repo} (no such folder)", clone)]
    absent = []
    for mod, (rel, defined) in modules.items():
        f = repo / rel
        if not f.is_file() or defined not in f.read_text(errors="replace"):
            absent.append(f"{mod}.{defined} ({rel})")
    if absent:
        return [(f"{name} checkout lacks " + ", ".join(absent), f"{env}={repo}",
                 f"is it a checkout of {repo_url}? `git -C {repo} pull`, or {clone_cmd}")]
    if import_checkout is not None:
        try:
            import_checkout(repo)
        except Exception as e:  # noqa: BLE001 - any import failure of the user's checkout is what to report
            last = (str(e).strip().splitlines() or [""])[-1][:200]
            return [(f"{name} checkout does not import ({type(e).__name__}: {last})", f"{env}={repo}",
                     deps_cmd)]
    return []
