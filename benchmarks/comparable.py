"""What intervals and comparisons cost, and how many cases a benchmark needs to see a difference.

    .venv/bin/python benchmarks/comparable.py [--work runs/bench-comparable] [--size 128] [--seconds 3]   # default: the demo's run

Makes the demo's 15 Engine WorldMark cases (``bash scripts/demo.sh``: the Engine's own size, 20 s keys; smaller with
``--size`` / ``--seconds``) with Engine GT and with engine-drift (once; reused from ``--work``),
scores both, then times, in this process and interleaved over ``--repeats`` runs:

- a rescore of the GT run from its cache (``evaluate --rescore``: what every interval rides on);
- the intervals of every aggregate (``aggregate``'s bootstrap per metric, and WorldMark's cluster bootstrap per
  action column), computed on the run's own sample rows;
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
    ap.add_argument("--size", type=int, default=0, help="Engine frame size (0: the demo's, the Engine's default)")
    ap.add_argument("--seconds", type=float, default=0.0, help="seconds per key (0: the demo's, 20 s)")
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
        ov = ([f"model.width={a.size}", f"model.height={a.size}"] if a.size else []) + \
            ([f"trajectory.seconds={a.seconds:g}"] if a.seconds else [])
        run_generate(model, "worldmark-engine", out, progress=False, overrides=ov)
        if not (out / "results.json").exists():
            runner.evaluate_run(out, progress=False)
        runs[model] = out
    gt, drift = runs["engine"], runs["engine-drift"]

    def rescore():
        t0 = time.perf_counter()
        runner.evaluate_run(gt, rescore=True, progress=False, write=False)
        return time.perf_counter() - t0

    import json

    samples = [json.loads(x) for x in (gt / "samples.jsonl").read_text().splitlines() if x.strip()]

    def intervals_once():
        """Every interval a rescore of this run computes: one per metric over its records, and WorldMark's cluster
        bootstrap of each action column."""
        t0 = time.perf_counter()
        for m in metric_info():
            uncertainty.interval([(s.get("scores") or {}).get(m) for s in samples])
        for m in ("direction_accuracy_trans", "direction_purity_trans", "motion_stability_trans",
                  "response_latency_trans", "direction_accuracy_rot", "direction_purity_rot",
                  "motion_stability_rot", "response_latency_rot"):
            segs = [(s["scores"][m], len(((s.get("detail") or {}).get(m) or {}).get("segments") or ()))
                    for s in samples if (s.get("scores") or {}).get(m) is not None]
            uncertainty.cluster_interval([v * n for v, n in segs], [n for _, n in segs])
        return time.perf_counter() - t0

    def compare_once():
        t0 = time.perf_counter()
        compare(gt, drift)
        return time.perf_counter() - t0

    rescore()  # warm caches and imports
    resc, boots, cmp = [], [], []
    for _ in range(a.repeats):
        resc.append(rescore())
        boots.append(intervals_once())
        cmp.append(compare_once())
    r0, boot, c = statistics.median(resc), statistics.median(boots), statistics.median(cmp)
    print(f"rescore (15 records, intervals included): {r0:.3f} s")
    print(f"intervals: {boot:.4f} s = {100 * boot / r0:.1f} % of a rescore")
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
