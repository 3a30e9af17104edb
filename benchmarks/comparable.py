"""What intervals and comparisons cost, and how many cases a benchmark needs to see a difference.

    .venv/bin/python benchmarks/comparable.py [--work runs/bench-comparable] [--size 128] [--seconds 3]

Makes the demo's 15 Engine WorldMark cases with Engine GT and with engine-drift (once; reused from ``--work``),
scores both, then times, in this process and interleaved over ``--repeats`` runs:

- a rescore of the GT run from its cache (``evaluate --rescore``: what every interval rides on);
- the intervals of every aggregate (``aggregate``'s bootstrap, and WorldMark's cluster bootstrap in ``finish``),
  measured as the rescore with intervals minus the rescore with the interval functions replaced by no-ops;
- ``worldgate compare GT drift`` (paired bootstrap per metric, Holm).

It prints each cost and its ratio to the rescore (the goal: bootstrap + compare <= 10 % of a rescore), then, per
metric, the spread of the paired GT - drift differences and the number of cases that detects a 2-point difference
(0-100 metrics) or a 0.02 one (0-1 metrics) with 80 % power at 5 % (two-sided): n = ((z_a + z_b) sd / delta)^2, the
figures docs/comparing-runs.md quotes. The Engine renders deterministically, so its seed-to-seed spread is 0: the
case-to-case spread is what these counts measure.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="runs/bench-comparable")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    from worldgate.evaluate import runner, uncertainty
    from worldgate.evaluate.metrics import metric_info
    from worldgate.experiments.compare import compare
    from worldgate.generate.runner import run_generate

    work = Path(a.work)
    runs = {}
    for model in ("engine", "engine-drift"):
        out = work / model
        run_generate(model, "worldmark-engine", out, progress=False,
                     overrides=[f"model.width={a.size}", f"model.height={a.size}", f"trajectory.seconds={a.seconds:g}"])
        if not (out / "results.json").exists():
            runner.evaluate_run(out, progress=False)
        runs[model] = out
    gt, drift = runs["engine"], runs["engine-drift"]

    def rescore():
        t0 = time.perf_counter()
        runner.evaluate_run(gt, rescore=True, progress=False, write=False)
        return time.perf_counter() - t0

    def without_intervals():
        saved = (uncertainty.interval, uncertainty.seeds_interval, uncertainty.cluster_interval)
        uncertainty.interval = uncertainty.seeds_interval = lambda *x, **k: None
        import worldgate.evaluate.worldmark.benchmark as wmb

        saved_wm, wmb.cluster_interval = wmb.cluster_interval, lambda *x, **k: None
        try:
            return rescore()
        finally:
            uncertainty.interval, uncertainty.seeds_interval, uncertainty.cluster_interval = saved
            wmb.cluster_interval = saved_wm

    def compare_once():
        t0 = time.perf_counter()
        compare(gt, drift)
        return time.perf_counter() - t0

    rescore()  # warm caches and imports
    with_ci, no_ci, cmp = [], [], []
    for _ in range(a.repeats):
        with_ci.append(rescore())
        no_ci.append(without_intervals())
        cmp.append(compare_once())
    r, r0, c = statistics.median(with_ci), statistics.median(no_ci), statistics.median(cmp)
    boot = max(0.0, r - r0)
    print(f"rescore (15 records, intervals on): {r:.3f} s; without intervals {r0:.3f} s")
    print(f"intervals: {boot:.3f} s = {100 * boot / r0:.1f} % of a rescore")
    print(f"compare GT vs drift: {c:.3f} s = {100 * c / r0:.1f} % of a rescore")
    print(f"bootstrap + compare: {100 * (boot + c) / r0:.1f} % of a rescore (goal <= 10 %)")
    res = compare(gt, drift)
    info = metric_info()
    z = uncertainty.Z_ALPHA + uncertainty.Z_POWER
    print("\nmetric | cases | sd of paired differences | delta | cases to detect delta (80 % power, 5 %)")
    for row in res["rows"]:
        delta = 2.0 if info[row["metric"]]["range"] == "0-100" else 0.02
        need = math.ceil((z * row["sd_diff"] / delta) ** 2) if row["sd_diff"] > 0 else 0
        print(f"{row['name']} | {row['n']} | {row['sd_diff']:.3g} | {delta:g} | {need}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
