"""evaluate speed and memory (classical backend).

    .venv/bin/python benchmarks/evaluate_speed.py [--skip-memory]

Goals (issue 30): the full WorldMark metric set on a 20 s, 256x256 record takes <= 3x the time of only decoding
that video; --rescore of a run takes <= 2 % of its first evaluation and gives bit-identical numbers; evaluating a
60 s, 704x1280, 16 fps video peaks under 2 GiB (frames are streamed and resized per extractor).

Each ratio is printed twice: in wall time (what a user waits on an idle machine) and in CPU time (user + system of
this process and of the ffmpeg decoder it waited for): on a machine shared with other work the wall ratio follows
the load (a process with more busy threads gets a larger share of the cores), the CPU ratio does not.

Last, the floor under the first evaluation while OpenCV's calls stay as the golden tests fix them: ffmpeg's decoding
CPU plus the CPU inside OpenCV's calls, over the usable cores; what lies between that floor and the measured ratio is
numpy, the interpreter and the pool's hand-offs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


REPEATS = 7  # timed runs of decode and first evaluation (interleaved), then of rescore; the best of each is compared


def cpu_s() -> float:
    """User + system seconds of this process and of the children it has waited for (ffmpeg's decoder)."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


CPU: list = []  # (what, CPU s) of each timed call, in order


def timed(what: str, fn):
    c0, t0 = cpu_s(), time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    CPU.append((what, cpu_s() - c0))
    return dt, out


def decode_only(video: Path) -> float:
    from worldgate.generate.video import read_frames

    dt, n = timed("decode", lambda: sum(1 for _ in read_frames(video)))
    assert n > 0
    return dt


def speed(tmp: Path) -> None:
    from worldgate.evaluate.features import FeatureCache, compute_features, open_record
    from worldgate.evaluate.metrics import METRIC_INFO, WORLDMARK_COLUMNS
    from worldgate.evaluate.runner import evaluate_run, extractors_for
    from worldgate.generate.runner import run_generate

    m = tmp / "cases.jsonl"
    m.write_text(json.dumps({"id": "wr", "trajectory": "W10 R10", "scene": {"seed": 3}}) + "\n")
    run_generate("engine", str(m), tmp / "run", progress=False)
    video = tmp / "run" / "wr" / "video.mp4"
    # the goal's metric set: the WorldMark metrics and the features they need (not the WorldMemBench extras)
    wm = set(WORLDMARK_COLUMNS)
    wm_needs = {f for mid in wm for f in METRIC_INFO[mid]["needs"]}

    def wm_extractors():
        return [ex for ex in extractors_for("classical") if ex.name in wm_needs]

    def first_evaluation(what="wm", **kw) -> tuple[float, dict]:
        shutil.rmtree(tmp / "run" / ".features", ignore_errors=True)
        return timed(what, lambda: evaluate_run(tmp / "run", progress=False, **kw))

    # the first evaluation of the record (nothing cached) against decoding it, timed alike: REPEATS of each,
    # interleaved (decode, evaluate, ...) so that all meet the same machine load, and compared best to best. Only the
    # first evaluation pays the one-time module imports (OpenCV, evo, ...), as only the first decode pays its own.
    decs, runs, runs_all = [], [], []
    for _ in range(REPEATS):
        decs.append(decode_only(video))
        runs.append(first_evaluation(metrics=wm, extractors=wm_extractors())[0])
        t, first = first_evaluation("all")
        runs_all.append(t)
    dec, t_first, t_all = min(decs), min(runs), min(runs_all)
    s1 = (tmp / "run" / "samples.jsonl").read_text()
    res, same = [], True  # rescores timed like the first evaluations: the best of REPEATS
    for _ in range(REPEATS):
        res.append(timed("rescore", lambda: evaluate_run(tmp / "run", progress=False, rescore=True))[0])
        same &= (tmp / "run" / "samples.jsonl").read_text() == s1
    t_re = min(res)
    cpu = {k: [c for w, c in CPU if w == k] for k in ("decode", "wm", "all", "rescore")}
    med = {k: float(np.median(v[1:] if len(v) > 2 else v)) for k, v in cpu.items()}  # the first pays the imports
    print(f"== full WorldMark metric set ({len(wm)} metrics; features {', '.join(sorted(wm_needs))}), classical, "
          f"20 s 256x256 (320 frames) ==")
    print(f"  decode only {dec:.2f} s; first evaluate {t_first:.2f} s -> ratio {t_first / dec:.2f}x (goal <= 3x; "
          f"best of {REPEATS} each)")
    print(f"  CPU: decode {med['decode']:.2f} s, first evaluate {med['wm']:.2f} s -> ratio "
          f"{med['wm'] / med['decode']:.2f}x (medians of the runs after the first; on free cores the extractors' "
          f"threads run beside the decoder, so the wall ratio can fall to about this over the cores used)")
    print(f"  runs (decode / evaluate s): {', '.join(f'{d:.2f}/{t:.2f}' for d, t in zip(decs, runs))}; median paired "
          f"ratio {float(np.median(np.divide(runs, decs))):.2f}x; the first (with the one-time imports) "
          f"{runs[0] / dec:.2f}x of the best decode; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"== every metric (WorldMark + WorldMemBench), {first['features']['computed']} features computed ==")
    print(f"  first evaluate {t_all:.2f} s -> {t_all / dec:.2f}x decode; --rescore {t_re:.3f} s -> "
          f"{100 * t_re / t_all:.2f} % of the first evaluation (goal <= 2 %; best of {REPEATS} each); bit-identical "
          f"samples every time: {same}")
    print(f"  CPU: first evaluate {med['all']:.2f} s, --rescore {med['rescore']:.3f} s -> "
          f"{100 * med['rescore'] / med['all']:.2f} % (medians)")
    # where the time goes (untimed above): each extractor's own CPU seconds (update + finish, on its thread)
    _, st = compute_features(open_record(tmp / "run" / "wr"), extractors_for("classical"), FeatureCache(tmp / "f2"))
    per = ", ".join(f"{k.split('@')[0]} {v:.2f}" for k, v in sorted(st["seconds"].items(), key=lambda kv: -kv[1]))
    print(f"  extractor CPU s: {per} (sum {sum(st['seconds'].values()):.2f}); decode + extract wall "
          f"{st['decode_and_extract_s']:.2f} s")
    busy = float(np.median(np.divide(cpu["wm"], runs)[1:]))  # cores busy during a first evaluation (after the first)
    opencv_floor(tmp / "run" / "wr", wm_extractors(), dec, busy)


def opencv_floor(rec_dir: Path, extractors: list, dec_wall: float, busy: float) -> None:
    """The least wall time any first evaluation of the record can take while OpenCV's calls stay as the golden tests
    fix them: ffmpeg's own decoding CPU (one thread, as evaluate decodes) plus the CPU spent inside OpenCV's calls
    (each WorldMark extractor fed every frame on one thread, as the pool feeds it: a size several share is resized
    once per frame; best of 3 passes, under cProfile, whose per-call cost is noise beside these calls), spread
    perfectly over the usable cores with nothing else (no numpy, no interpreter, no hand-offs)."""
    import cProfile
    import pstats

    import cv2

    from worldgate.evaluate.features import open_record
    from worldgate.evaluate.features.pool import SharedFrame, analysis_size, usable_cores
    from worldgate.generate.video import read_frames

    def is_opencv(fn: str) -> bool:  # cProfile names cv2's functions '<resize>', their methods "<method 'calc' of 'cv2..."
        return "of 'cv2." in fn or (fn.startswith("<") and fn[1:-1].isidentifier() and hasattr(cv2, fn[1:-1]))

    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    raw = list(read_frames(rec_dir / "video.mp4", decoder_threads=1))
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ffmpeg = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    prev = cv2.getNumThreads()
    cv2.setNumThreads(1)  # as the pool runs them
    passes = []
    try:
        for _ in range(3):
            frames = [SharedFrame(f) for f in raw]  # fresh per pass: each pass resizes a shared size once
            calls: dict = {}
            total = 0.0
            for ex in extractors:
                ex.start(open_record(rec_dir))
                size, needs = None, getattr(ex, "needs_frame", None)
                prof = cProfile.Profile()
                t0 = time.thread_time()
                prof.enable()
                for i, f in enumerate(frames):
                    if needs is not None and not needs(i):
                        job = ex.update(i, None)
                    else:
                        size = size or analysis_size(f.full.shape[1], f.full.shape[0], ex.max_side)
                        job = ex.update(i, f.at(size))
                    if callable(job):
                        job()
                ex.finish()
                prof.disable()
                total += time.thread_time() - t0
                for (_, _, fn), (_, _, tt, _, _) in pstats.Stats(prof).stats.items():
                    if is_opencv(fn):
                        calls[fn] = calls.get(fn, 0.0) + tt
            passes.append((sum(calls.values()), total, calls))
    finally:
        cv2.setNumThreads(prev)
    opencv, total, calls = min(passes, key=lambda p: p[0])

    def short(fn: str) -> str:  # "<method 'calc' of 'cv2.DenseOpticalFlow' objects>" -> "DenseOpticalFlow.calc"
        if "of 'cv2." in fn:
            method, cls = fn.split("'")[1], fn.split("'")[3]
            return f"{cls.removeprefix('cv2.')}.{method}"
        return fn[1:-1]

    top = ", ".join(f"{short(fn)} {t:.3f}" for fn, t in sorted(calls.items(), key=lambda kv: -kv[1])[:6])
    cores = usable_cores()
    floor = (ffmpeg + opencv) / cores
    print("== the floor OpenCV's calls set (each WorldMark extractor alone on one thread, best of 3) ==")
    print(f"  inside OpenCV's calls {opencv:.2f} s of the extractors' {total:.2f} s CPU ({top}); ffmpeg's decoding "
          f"(one thread) {ffmpeg:.2f} s CPU")
    print(f"  on {cores} usable cores no first evaluation can take less than ({ffmpeg:.2f} + {opencv:.2f}) / {cores} = "
          f"{floor:.2f} s wall = {floor / dec_wall:.2f}x decode while those calls stay as the goldens fix them (the "
          f"first evaluations above kept {busy:.2f} cores busy)")


def write_big_record(folder: Path, seconds: float = 60.0, size=(1280, 704), fps: float = 16.0) -> None:
    """A 60 s 704x1280 record: a textured panorama panned right (a yaw), written like generate does."""
    from worldgate.generate.records import trajectory_json
    from worldgate.generate.video import VideoWriter, probe_video
    from worldgate.trajectories import Trajectory
    from worldgate.trajectories.suites import Case

    folder.mkdir(parents=True)
    w, h = size
    n = int(seconds * fps)
    rng = np.random.default_rng(0)
    pano = rng.integers(0, 256, (h // 8, (w + n * 4) // 8 + 2, 3), dtype=np.uint8)
    pano = np.repeat(np.repeat(pano, 8, 0), 8, 1)[:h]
    with VideoWriter(folder / "video.mp4", w, h, fps, preset="ultrafast") as vw:
        for i in range(n):
            vw.write(np.ascontiguousarray(pano[:, i * 4: i * 4 + w]))
    traj = Trajectory.parse(f"R{seconds:g}")
    case = Case(id=folder.name, suite="bench", trajectory=traj, scene={"seed": 0})

    class P:  # the bits of a plan that trajectory_json reads
        pass

    plan = P()
    plan.fps, plan.n_frames, plan.segment_frames = fps, n, traj.segment_frames(fps, n)
    (folder / "trajectory.json").write_text(json.dumps(trajectory_json(case, plan)))
    np.save(folder / "poses.npy", traj.poses(fps, n))
    info = probe_video(folder / "video.mp4")
    meta = {"kind": "rollout", "complete": True, "achieved": info.to_dict(), "requested": info.to_dict(),
            "case": case.to_dict(), "intrinsics": {}, "files": {}}
    (folder / "meta.json").write_text(json.dumps(meta))


def memory(tmp: Path) -> None:
    run = tmp / "big"
    t0 = time.perf_counter()
    write_big_record(run / "pan")
    print(f"== memory: 60 s 704x1280 16 fps record written in {time.perf_counter() - t0:.1f} s ==")
    code = ("import resource, sys, time; from worldgate.evaluate.runner import evaluate_run; t=time.perf_counter(); "
            f"r = evaluate_run(__import__('pathlib').Path({str(run)!r}), progress=False); "
            "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, r['errors'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    secs, rss_kb = float(out[0]), int(out[1])
    print(f"  evaluate took {secs:.1f} s, peak RSS {rss_kb / 1024:.0f} MiB = {rss_kb / 1024 / 2048:.2f} of the 2 GiB goal"
          f" (the frames alone would be {960 * 704 * 1280 * 3 / 2**30:.2f} GiB)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-memory", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    try:
        speed(tmp)
        if not a.skip_memory:
            memory(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
