"""Planning speed: every single-camera adapter plans all 500 WorldMark cases (goal: < 10 s in total, all adapters
together); the two-player adapters (``players == 2``: Solaris), which refuse one-camera cases, plan the full
``multiworldbench-engine`` suite instead, timed on a line of their own.

    .venv/bin/python benchmarks/plan_speed.py [--data ../shared/worldmark/arena_inputs] [--limit N]

Uses the real arena inputs when present (real image sizes and intrinsics), else the 500-case Engine suite with
arena-like image sizes. Plans are built in memory (``plan``) and fingerprinted, which hashes every native array, so
the time includes everything ``generate --dry-run`` computes except writing files.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from worldgate.adapters import UnsupportedMotion, get_adapter, get_info, list_models


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "worldmark" / "arena_inputs"))
    ap.add_argument("--limit", type=int, default=None, help="the first N cases of each suite (a smoke run; the goal is "
                    "for all of them)")
    a = ap.parse_args(argv)
    from worldgate.trajectories.suites import load_suite

    if Path(a.data).is_dir():
        cases = load_suite("worldmark", data=a.data)
        src = f"WorldMark arena inputs ({a.data})"
    else:
        cases = load_suite("worldmark-engine", full=True)
        for c in cases:
            c.image = "000.jpg"
        src = "worldmark-engine --full (arena not found)"
    cases = cases[: a.limit]
    models = [m for m in list_models() if get_info(m).integration != "engine"]
    single = [m for m in models if get_info(m).players == 1]
    pairs = [m for m in models if get_info(m).players != 1]
    print(f"{len(cases)} cases from {src}; {len(single)} single-camera adapters")
    rows = [plan_all(m, cases) for m in single]
    total = sum(r[3] for r in rows)
    show(rows)
    if a.limit is None:
        print(f"total {total:.2f} s for {len(single)} x {len(cases)} plans (goal < 10 s): "
              f"{'OK' if total < 10 else 'MISSED'}; ratio to goal {total / 10:.2f}")
    else:
        print(f"total {total:.2f} s for {len(single)} x {len(cases)} plans (--limit: the goal is for every case)")
    if pairs:
        two = load_suite("multiworldbench-engine", full=True)[: a.limit]
        print(f"two-player adapters ({', '.join(pairs)}) on {len(two)} multiworldbench-engine cases (--full):")
        rows = [plan_all(m, two) for m in pairs]
        show(rows)
        print(f"total {sum(r[3] for r in rows):.2f} s for {len(pairs)} x {len(two)} plans")
    return 0


def plan_all(model: str, cases: list) -> tuple[str, int, int, float]:
    """(model, cases planned, cases it cannot express, seconds) of planning and fingerprinting every case."""
    ad = get_adapter(model)
    t0 = time.perf_counter()
    ok = unsupported = 0
    for c in cases:
        try:
            ad.plan(c).fingerprint()
            ok += 1
        except UnsupportedMotion:
            unsupported += 1
    return model, ok, unsupported, time.perf_counter() - t0


def show(rows: list) -> None:
    w = max(len(r[0]) for r in rows)
    print(f"{'adapter'.ljust(w)}  planned  unsupported  seconds")
    for m, ok, un, dt in rows:
        print(f"{m.ljust(w)}  {ok:7d}  {un:11d}  {dt:7.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
