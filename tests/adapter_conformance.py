"""The conformance battery every adapter gets for free (diffusers-style tester mixin) is public, in
:mod:`worldgate.testing` (a plugin's tests use it too): subclass ``AdapterConformance`` in a test module, set
``adapter_name``, and the adapter's info and plan are checked for determinism, segment timing, intrinsics bookkeeping
and a write/read round trip of its native files. This module re-exports it for worldgate's own tests, with the gated
tests' checkout helper."""

from __future__ import annotations

from pathlib import Path

from worldgate.testing import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case

ARENA = Path(__file__).resolve().parents[1] / ".." / "shared" / "worldmark" / "arena_inputs"

__all__ = ["ARENA", "REAL_K", "REAL_SIZE", "AdapterConformance", "gated_checkout", "gated_plan", "lift_functions",
           "worldmark_case"]


def gated_plan(name: str, walk, tmp_path, image: str = "/data/img 000.jpg", ckpt=None, extra=None, seed: int = 11,
               **model_args):
    """What a gated test hands the model's own code: ``(plan, native, argv)`` for a case walking ``walk`` (a
    Trajectory, or its text; the real arena intrinsics and size, prompt "A test scene.") with the native files written to ``tmp_path/native`` and the
    command line as the runner makes it (paths absolute, ``python`` -> "py", CKPT -> ``ckpt``, OUT ->
    ``tmp_path/out``, the rollout seed in)."""
    from worldgate.adapters import get_adapter
    from worldgate.adapters.repo import command_argv
    from worldgate.trajectories import Trajectory
    from worldgate.trajectories.suites import Case

    traj = Trajectory.parse(walk) if isinstance(walk, str) else walk
    case = Case(id="gated", suite="t", trajectory=traj, image=image, prompt="A test scene.",
                intrinsics=REAL_K, image_size=REAL_SIZE)
    plan = get_adapter(name, **model_args).plan(case)
    native = Path(tmp_path) / "native"
    plan.write(native, seed=seed)
    paths = {"python": "py", "ckpt": ckpt or Path(tmp_path) / "w", "extra": extra or {}}
    return plan, native, command_argv(plan.files["command.txt"], plan.files, native, paths, image, seed)


def lift_functions(path, names, ns: dict, as_class: str | None = None) -> dict:
    """The definitions ``names`` of a checkout's source file as written (functions with their decorators, classes,
    and ``NAME = ...`` constants), compiled into ``ns`` in the order given without running the file's own imports (a
    model's module often imports its whole training stack); with ``as_class``, methods gathered onto a bare class of
    that name. ``ns`` supplies the names they use (np, torch, ...); returns it. A name the file does not define is an
    AssertionError."""
    import ast
    import textwrap

    src = Path(path).read_text()
    lines = src.splitlines()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name, first = node.name, min([node.lineno] + [d.lineno for d in node.decorator_list])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, first = node.targets[0].id, node.lineno
        else:
            continue
        if name in names and name not in found:
            found[name] = textwrap.dedent("\n".join(lines[first - 1: node.end_lineno]))
    assert set(found) == set(names), f"{path} defines none of {sorted(set(names) - set(found))}"
    if as_class:
        code = f"class {as_class}:\n" + "\n".join(textwrap.indent(found[n], "    ") for n in names) + "\n"
    else:
        code = "\n\n".join(found[n] for n in names) + "\n"
    exec(compile(code, str(path), "exec"), ns)
    return ns


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
