"""Engine GT's WorldMark direction purity on its own scenes and on mirror-symmetric ones (issue 30).

    .venv/bin/python benchmarks/purity_scenes.py [--size 256] [--limit 15]

Direction purity compares the mean flow on the commanded axis with the mean off it (METRICS.md): lateral and yaw
share |Sx|, forward is |Srad|. A perfect mover in a scene whose depth is not symmetric about its path still has a
mean horizontal flow when it walks forward and a radial one when it strafes, so Engine GT loses points that measure
the scene, not the mover. This rolls out the ``worldmark-engine`` demo (WorldMark's 15 action sequences) with Engine
GT twice — on the suite's scenes and with ``scene.mirror`` (the world mirror-symmetric about the start view's centre
plane) — scores both on the classical backend and prints purity per run, per key family and per segment.

No goal is attached here: the issue's goal (translation purity >= 95 on the demo) is read off the first table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.runner import run_generate
from worldgate.trajectories.suites import load_suite


def run(root: Path, mirror: bool, size: int, limit: int | None) -> dict:
    cases = load_suite("worldmark-engine")[:limit]
    manifest = root / f"cases-{'mirror' if mirror else 'plain'}.jsonl"
    rows = []
    for c in cases:
        d = c.to_dict()
        d["scene"] = dict(d["scene"], mirror=mirror)
        rows.append(json.dumps(d))
    manifest.write_text("\n".join(rows) + "\n")
    out = root / ("mirror" if mirror else "plain")
    t0 = time.perf_counter()
    res = run_generate("engine", str(manifest), out, overrides=[f"model.width={size}", f"model.height={size}"],
                       progress=False)
    if res.failed:
        raise SystemExit(f"rollouts failed: {res.failed}")
    r = evaluate_run(out, progress=False)
    segs = defaultdict(list)
    for line in (out / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        for g in s["detail"].get("direction_purity_trans", {}).get("segments", []):
            segs[g["family"]].append((s["case"], g["key"], g["purity"], g["lat"], g["fwd"]))
    return {"trans": r["metrics"]["direction_purity_trans"]["mean"], "rot": r["metrics"]["direction_purity_rot"]["mean"],
            "segments": segs, "seconds": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--limit", type=int, default=None, help="the first N demo cases (default: all 15)")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="purity-"))
    try:
        got = {m: run(root, m, a.size, a.limit) for m in (False, True)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"== Engine GT direction purity, worldmark-engine demo, {a.size}x{a.size}, classical ==")
    print("| scenes | purity (translation) | purity (rotation) | W/S segments (mean) | A/D segments (mean) |")
    print("|---|---|---|---|---|")
    for m, g in got.items():
        fam = {f: sum(x[2] for x in v) / len(v) if v else float("nan") for f, v in g["segments"].items()}
        print(f"| {'mirrored' if m else 'as the suite builds them'} | {g['trans']:.2f} | {g['rot']:.2f} | "
              f"{100 * fam.get('fwd', float('nan')):.1f} ({len(g['segments'].get('fwd', []))}) | "
              f"{100 * fam.get('lat', float('nan')):.1f} ({len(g['segments'].get('lat', []))}) |")
    print("\nper translation segment (purity: plain -> mirrored; the mirrored run's mean |Sx| share and |Srad|)")
    plain, mir = got[False]["segments"], got[True]["segments"]
    for f in ("fwd", "lat"):
        for p, q in zip(plain.get(f, []), mir.get(f, [])):
            print(f"  {q[0]:22s} {q[1]}  {p[2]:.3f} -> {q[2]:.3f}   lateral {q[3]:.2f}, forward {q[4]:.2f}")


if __name__ == "__main__":
    main()
