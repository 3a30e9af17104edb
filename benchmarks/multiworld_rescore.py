"""MultiWorldBench --rescore speed: the casts of the expected world are a cached feature (the projection).

    .venv/bin/python benchmarks/multiworld_rescore.py [--size 96] [--limit 7] [--repeats 7] [--goal 5]

Goal (issue: metrics are cheap again for MultiWorldBench): ``evaluate --rescore`` of a 7-record engine-2p
MultiWorldBench run takes <= 5 % of its first evaluation, as WorldMark's does (benchmarks/evaluate_speed.py), with
bit-identical samples and not one ray cast (``cast_boxes`` call). Generates the run (``--limit 7``: one case per
task), times the first evaluation (a fresh feature cache each time) and --rescore, ``--repeats`` of each, and compares
best to best. Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def count_casts():
    """Count the ray casts the measured path makes (pixels calls cast_boxes, imported by name, at one place)."""
    from worldgate.evaluate.multiworldbench import pixels

    calls = [0]
    real = pixels.cast_boxes

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    pixels.cast_boxes = counted
    return calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=96, help="frame width and height of the generated run")
    ap.add_argument("--limit", type=int, default=7, help="cases of the multiworldbench-engine suite (7: every task)")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs of each side; the best of each is compared")
    ap.add_argument("--goal", type=float, default=5.0, help="rescore / first evaluation, percent")
    ap.add_argument("--keep", type=Path, help="generate (or reuse) the run here instead of a temporary folder")
    a = ap.parse_args()

    from worldgate.evaluate.runner import evaluate_run
    from worldgate.generate.runner import run_generate

    tmp = Path(tempfile.mkdtemp())
    run = a.keep or tmp / "run"
    try:
        t0 = time.perf_counter()
        res = run_generate("engine-2p", "multiworldbench-engine", run, limit=a.limit, progress=False,
                           overrides=[f"model.width={a.size}", f"model.height={a.size}"])
        if res.exit_code:
            print(f"generate failed: {res.failed}")
            return 1
        print(f"== MultiWorldBench, engine-2p, {a.limit} records at {a.size}x{a.size} (generated in "
              f"{time.perf_counter() - t0:.1f} s; {os.cpu_count()} cores) ==")
        casts = count_casts()
        firsts, first_casts, s1, same = [], [], None, True
        for _ in range(a.repeats):
            shutil.rmtree(run / ".features", ignore_errors=True)
            casts[0] = 0
            t0 = time.perf_counter()
            r = evaluate_run(run, progress=False)
            firsts.append(time.perf_counter() - t0)
            first_casts.append(casts[0])
            s = (run / "samples.jsonl").read_text()
            same &= s1 is None or s == s1
            s1 = s
        computed = r["features"]["computed"]
        rescores, re_casts = [], 0
        for _ in range(a.repeats):
            casts[0] = 0
            t0 = time.perf_counter()
            r = evaluate_run(run, progress=False, rescore=True)
            rescores.append(time.perf_counter() - t0)
            re_casts += casts[0]
            same &= (run / "samples.jsonl").read_text() == s1 and r["features"]["computed"] == 0
        errors = r["errors"]
        t_first, t_re = min(firsts), min(rescores)
        ratio = 100.0 * t_re / t_first
        print(f"  first evaluation {t_first:.3f} s (best of {a.repeats}; {computed} features computed, "
              f"{first_casts[-1]} ray casts; runs {', '.join(f'{t:.2f}' for t in firsts)})")
        print(f"  --rescore        {t_re:.3f} s (best of {a.repeats}; {re_casts} ray casts in all; runs "
              f"{', '.join(f'{t:.3f}' for t in rescores)})")
        print(f"  rescore / first evaluation = {ratio:.2f} % (goal <= {a.goal:g} %); bit-identical samples every "
              f"time: {same}; record errors: {errors or 'none'}; load average {os.getloadavg()[0]:.1f}")
        ok = ratio <= a.goal and same and re_casts == 0 and not errors
        print("  goal met" if ok else "  GOAL MISSED")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
