"""Context policies at one budget on engine-memory (goals from the memory issue):

    .venv/bin/python benchmarks/context_policies.py [--budget 3] [--size 256] [--limit 3]

On LRLRLR cases of the worldmembench-engine suite: ``fov`` beats ``sliding_window`` on revisit memory by a clear
margin, is within 0.05 (on a 0-1 scale) of ``full_kv``, and its rollout takes <= 0.8x the time of ``full_kv``.
Prints the compare-context table and the ratios for WorldMark's revisit memory and WorldMemBench's static memory.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=3)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--sink", action="store_true", help="keep the first chunk in every policy (default: no sink, so "
                    "the initial view is only remembered if the policy retrieves it)")
    ap.add_argument("--out")
    a = ap.parse_args()
    from worldgate.experiments.context import compare_context
    from worldgate.trajectories.suites import load_suite

    cases = [c.to_dict() for c in load_suite("worldmembench-engine") if c.tags["trajectory"] == "LRLRLR"][: a.limit]
    out = Path(a.out or tempfile.mkdtemp(prefix="wg-context-"))
    out.mkdir(parents=True, exist_ok=True)
    m = out / "lrlrlr.jsonl"
    m.write_text("".join(json.dumps(c) + "\n" for c in cases))
    r = compare_context("engine-memory", str(m), ["full_kv", "sliding_window", "fov"], a.budget, out,
                        overrides=[f"model.width={a.size}", f"model.height={a.size}",
                                   f"context.sink={'true' if a.sink else 'false'}"])
    print(r["markdown"])
    rows = {x["policy"]: x for x in r["rows"]}
    f, s, k = rows["fov"], rows["sliding_window"], rows["full_kv"]
    print(f"{len(cases)} LRLRLR cases at {a.size}x{a.size}, budget {a.budget} chunks, sink {'on' if a.sink else 'off'}")
    for metric, scale in (("revisit_memory", 100.0), ("human_appearance", 1.0), ("object_appearance", 1.0),
                          ("environment_visible", 1.0)):
        if f[metric] is None or s[metric] is None or k[metric] is None:
            print(f"{metric}: n/a")
            continue
        margin, gap = (f[metric] - s[metric]) / scale, (k[metric] - f[metric]) / scale
        print(f"{metric:20s} fov - sliding_window {margin:+.3f}   full_kv - fov {gap:+.3f} (goal <= 0.05: "
              f"{'OK' if gap <= 0.05 else 'MISSED'})")
    t = f["rollout_s"] / k["rollout_s"]
    print(f"fov / full_kv rollout time: {t:.2f} (goal <= 0.8): {'OK' if t <= 0.8 else 'MISSED'}")
    print(f"peak KV MiB full_kv / fov:  {k['peak_kv_mib']:.1f} / {f['peak_kv_mib']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
