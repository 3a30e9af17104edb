"""Engine speed: frames per second at 256x256 on one core (colour + depth + instance ids), and the ratio of
``generate`` wall time to the time of only encoding the same frames to mp4.

    .venv/bin/python benchmarks/engine_speed.py [--seconds 20] [--size 256] [--repeats 3]

Goals: >= 150 fps on one core (issue 30; the foundation's was 60: a 20 s, 16 fps case in under 6 s) and generate <= 3x
encode-only. The render rate is also given in CPU seconds of this process: on a shared machine the wall clock counts
the other processes' turns, the CPU time only the Engine's. On a shared VM both swing by +-30 % from one minute to the
next (its host's load): each walk is timed ``--repeats`` times, round by round, and the best and the median are given.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from worldgate.adapters import get_adapter
from worldgate.generate.runner import run_generate
from worldgate.generate.video import VideoWriter
from worldgate.trajectories.library import worldmark
from worldgate.trajectories.suites import Case, engine_intrinsics


def engine_case(aid: int, seconds: float, view="first") -> Case:
    t = worldmark(aid)
    t = t.with_seconds(seconds)
    return Case(id=f"bench-{aid}", suite="bench", trajectory=t, scene={"seed": 1, "palette": "realistic"},
                intrinsics=engine_intrinsics(), image_size=(1024, 1024), view=view)


def render_fps(size: int, seconds: float, threads: int, repeats: int) -> dict:
    """Per walk, the (frames, wall s, CPU s) of each of ``repeats`` timed rollouts, taken round by round (every walk
    once, then again) so that all walks meet the same spells of machine load."""
    eng = get_adapter("engine", width=size, height=size, threads=threads)
    eng.load()
    plans = {f"{label}, {view}": eng.plan(engine_case(aid, seconds, view))
             for aid, label in ((1, "W (forward)"), (5, "R (yaw right)"), (13, "WRW")) for view in ("first", "third")}
    out = {k: [] for k in plans}
    for _ in range(repeats):
        for key, plan in plans.items():
            eng.world_for(plan)  # world building is per case, not per frame
            t0, c0 = time.perf_counter(), time.process_time()
            n = sum(len(c.frames) for c in eng.rollout(plan, with_gt=True))
            out[key].append((n, time.perf_counter() - t0, time.process_time() - c0))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3, help="timed rollouts of each walk (default 3)")
    a = ap.parse_args()

    print(f"== Engine render speed, {a.size}x{a.size}, one core (numba, 1 thread), colour + depth + ids; each walk "
          f"{a.repeats}x, round by round ==")
    best, med, cpu_best, slowest = [], [], [], float("inf")
    for label, runs in render_fps(a.size, a.seconds, threads=1, repeats=a.repeats).items():
        fps = [n / dt for n, dt, _ in runs]
        cpu = [n / dc for n, _, dc in runs]
        n = runs[0][0]
        best.append(max(fps))
        med.append(float(np.median(fps)))
        cpu_best.append(max(cpu))
        slowest = min(slowest, min(fps))
        print(f"  {label:22s} {n:5d} frames  best {n / max(fps):6.2f} s = {max(fps):7.1f} fps, median "
              f"{np.median(fps):7.1f} fps, slowest {min(fps):7.1f} fps  (best {max(cpu):7.1f} fps of CPU time)")
    print(f"  mean over the walks: best of {a.repeats} {np.mean(best):.1f} fps, median {np.mean(med):.1f} fps "
          f"(goal >= 150; the best run is the code's speed, as timeit takes it: this machine's load only slows a run "
          f"down); CPU time: best {np.mean(cpu_best):.1f} fps")
    print(f"  a {a.seconds:g} s case at 16 fps takes {a.seconds * 16 / slowest:.2f} s at the slowest run's rate (goal "
          f"< 6 s)")

    print("== generate wall time vs encode-only (same frames, same encoder settings) ==")
    tmp = Path(tempfile.mkdtemp())
    try:
        ov = [f"model.width={a.size}", f"model.height={a.size}", f"trajectory.seconds={a.seconds}"]
        run_generate("engine", "worldmark-engine", tmp / "warm", limit=1, overrides=ov + ["trajectory.seconds=0.5"],
                     progress=False)  # compile outside the timing
        ratios = []
        for rep in range(3):  # this machine is noisy: three runs, the median is the number
            t0 = time.perf_counter()
            res = run_generate("engine", "worldmark-engine", tmp / f"gen{rep}", limit=1, overrides=ov, progress=False)
            gen_s = time.perf_counter() - t0
            rec = tmp / f"gen{rep}" / res.done[0]
            frames = np.stack(list(__import__("worldgate.generate.video", fromlist=["read_frames"]).read_frames(rec / "video.mp4")))
            t0 = time.perf_counter()
            with VideoWriter(tmp / "enc.mp4", a.size, a.size, 16.0) as w:
                w.write(frames)
            enc_s = time.perf_counter() - t0
            ratios.append(gen_s / enc_s)
            print(f"  {len(frames)} frames: generate {gen_s:.2f} s (render+encode+probe+record), encode-only "
                  f"{enc_s:.2f} s, ratio {gen_s / enc_s:.2f}x")
        print(f"  median ratio {np.median(ratios):.2f}x (goal <= 3x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
