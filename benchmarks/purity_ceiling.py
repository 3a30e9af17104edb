"""What WorldMark's direction purity gives a perfect mover on the Engine's demo scenes: the ceiling of the metric there.

    .venv/bin/python benchmarks/purity_ceiling.py [--limit N] [--out DIR]

Issue 30 asks Engine GT's direction purity (translation) to reach 95 on the demo and to find why it does not. Engine GT
renders exactly the commanded poses, so the only question is what the metric reads from a perfect motion. This script
rolls out the ``worldmark-engine`` suite as ``scripts/demo.sh`` does, then scores it twice with the same WorldMark code
(evaluate_run, classical backend):

- measured: the classical flow extractor (OpenCV DIS on the decoded video), what the demo reports;
- exact: the ``flow`` feature replaced by the true optical flow of every frame pair (i, i + 2), computed from the
  Engine's rendered z-depth, intrinsics and camera poses (each pixel back-projected and projected into the other
  camera; sky as points at infinity; the screen-locked third-person avatar still). Every other feature (poses, the
  parallax split) is as measured.

If exact flow reads what DIS reads, the estimator is not what costs the points: the metric itself does, on these
scenes. A pure strafe moves content horizontally, but WorldMark's purity counts the mean radial flow (``Srad``) as
off-axis motion, and a strafe past a scene whose inverse depth is not left-right symmetric has a non-zero mean radial
flow (a forward move has a non-zero mean horizontal flow for the same reason). The script prints, per translation
segment, the mean |Sx| and |Srad| behind each purity, so the cause can be read off.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np


def exact_flow(depth_a, c2w_a, c2w_b, k, still=None) -> np.ndarray:
    """(H, W, 2) optical flow of frame a's pixels into camera b, from a's z-depth (inf: sky, points at infinity),
    the two camera-to-world poses (OpenCV axes, as the Engine renders them) and intrinsics (fx, fy, cx, cy).
    ``still``: pixels that move with the camera (flow 0)."""
    H, W = depth_a.shape
    fx, fy, cx, cy = (float(x) for x in k)
    vv, uu = np.mgrid[0:H, 0:W].astype(np.float64)
    rays = np.stack([(uu - cx) / fx, (vv - cy) / fy, np.ones_like(uu)], -1)  # z = 1: t is the z-depth
    Ra, Ca = c2w_a[:3, :3], c2w_a[:3, 3]
    Rb, Cb = c2w_b[:3, :3], c2w_b[:3, 3]
    d = rays @ Ra.T  # world directions
    sky = ~np.isfinite(depth_a)
    t = np.where(sky, 0.0, depth_a.astype(np.float64))[..., None]
    P = np.where(sky[..., None], d, Ca + t * d - Cb)  # sky: a direction only (translation does not move it)
    Xc = P @ Rb  # into camera b: Rb^T (P - Cb)
    with np.errstate(divide="ignore", invalid="ignore"):
        u2 = fx * Xc[..., 0] / Xc[..., 2] + cx
        v2 = fy * Xc[..., 1] / Xc[..., 2] + cy
    flow = np.stack([u2 - uu, v2 - vv], -1)
    flow[~np.isfinite(flow).all(-1)] = 0.0  # behind camera b (never for the small steps of a pair)
    if still is not None:
        flow[still] = 0.0
    return flow.astype(np.float32)


def exact_flow_extractor():
    from worldgate.adapters import get_adapter
    from worldgate.adapters.engine.world import ID_AVATAR
    from worldgate.evaluate.features.core import Extractor
    from worldgate.evaluate.features.signals import PAIR_GAP, FlowSignals
    from worldgate.trajectories.suites import Case

    class ExactFlow(Extractor):
        """The ``flow`` feature from the Engine's own depth and poses (the case re-rendered, as generate did)."""

        name = "flow"
        version = "exact-engine-gt"
        backend = "classical"

        def needs_frame(self, i):  # the decoded frames are never looked at: the pool neither resizes nor queues them
            return False

        def start(self, rec):
            super().start(rec)
            case = Case.from_dict(rec.meta["case"], suite=rec.meta["case"].get("suite", "manifest"))
            eng = get_adapter("engine", width=rec.width, height=rec.height)
            eng.load()
            plan = eng.plan(case)
            self.c2w = eng.render_poses(plan)
            if self.c2w.shape != rec.poses.shape or not np.allclose(self.c2w, rec.poses, atol=1e-6):
                raise SystemExit(f"{rec.dir.name}: the case re-planned from meta.json does not give the record's "
                                 "poses.npy, so its depth would not be the video's: regenerate the run")
            self.k = plan.arrays["intrinsics"]
            self.depth, self.still = [], []
            for c in eng.rollout(plan, with_gt=True):
                self.depth += list(c.extra["depth"])
                self.still += list(c.extra["ids"] == ID_AVATAR)
            self.signals = FlowSignals()

        def update(self, i, frame):
            if i >= PAIR_GAP:
                a = i - PAIR_GAP
                self.signals.add(exact_flow(self.depth[a], self.c2w[a], self.c2w[i], self.k, self.still[a]))

        def finish(self):
            self.depth = self.still = None
            return self.signals.arrays()

    return ExactFlow()


def segments(run: Path) -> dict:
    """(case, segment index) -> the translation segment's purity detail, from the run's samples."""
    from worldgate.evaluate.results import read_samples

    out = {}
    for row in read_samples(run):
        for s in ((row.detail or {}).get("direction_purity_trans") or {}).get("segments", []):
            out[(row.case, s["seg"])] = s
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None, help="only the first N cases of the suite")
    ap.add_argument("--out", default=None, help="keep the two scored runs here (default: a temporary folder)")
    ap.add_argument("--mirror", action="store_true", help="the suite's scenes made mirror-symmetric about the start "
                    "view's centre plane (scene.mirror; see benchmarks/purity_scenes.py)")
    a = ap.parse_args()

    from worldgate.evaluate.runner import evaluate_run, extractors_for
    from worldgate.generate.runner import run_generate

    tmp = Path(a.out) if a.out else Path(tempfile.mkdtemp())
    try:
        measured, exact = tmp / "measured", tmp / "exact"
        shutil.rmtree(measured, ignore_errors=True)
        shutil.rmtree(exact, ignore_errors=True)
        suite = "worldmark-engine"
        if a.mirror:
            from worldgate.trajectories.suites import load_suite

            suite = str(tmp / "cases-mirrored.jsonl")
            Path(suite).write_text("".join(json.dumps(dict(d, scene=dict(d["scene"], mirror=True))) + "\n"
                                           for d in (c.to_dict() for c in load_suite("worldmark-engine"))))
        run_generate("engine", suite, measured, limit=a.limit, progress=False)
        shutil.copytree(measured, exact, ignore=shutil.ignore_patterns(".features", "results*", "samples.jsonl"))
        wanted = {"direction_purity_trans", "direction_purity_rot", "direction_accuracy_trans"}
        r_meas = evaluate_run(measured, wanted, progress=False)
        exs = [ex for ex in extractors_for("classical") if ex.name != "flow"] + [exact_flow_extractor()]
        r_exact = evaluate_run(exact, wanted, progress=False, extractors=exs)
        sm, se = segments(measured), segments(exact)

        scenes = ", mirrored scenes" if a.mirror else ""
        print(f"== Engine GT direction purity on worldmark-engine (the demo's suite{scenes}), classical WorldMark "
              "code ==")
        print(f"{'':28s} {'measured (DIS)':>16s} {'exact flow (GT)':>16s}")
        for mid, label in (("direction_purity_trans", "purity (translation)"), ("direction_purity_rot",
                                                                               "purity (rotation)"),
                           ("direction_accuracy_trans", "accuracy (translation)")):
            mv, ev = r_meas["metrics"].get(mid, {}).get("mean"), r_exact["metrics"].get(mid, {}).get("mean")
            f = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
            print(f"  {label:26s} {f(mv):>16s} {f(ev):>16s}")
        print("per translation segment: purity measured -> exact; exact flow's mean |Sx| (lateral; for W/S half of"
              " it is counted as lateral, half as yaw) and mean |Srad| (forward)")
        by_key: dict[str, list] = {}
        for key in sorted(se):
            m, e = sm.get(key, {}), se[key]
            by_key.setdefault(e["key"], []).append((m.get("purity"), e["purity"]))
            off = e["lat"] + e["yaw"] if e["key"] in "WS" else e["fwd"] + e["yaw"]
            print(f"  {key[0]:22s} {e['key']}  {m.get('purity', float('nan')):.3f} -> {e['purity']:.3f}   "
                  f"lateral {e['lat']:.2f}  yaw {e['yaw']:.2f}  forward {e['fwd']:.2f}  (off-axis {off:.2f})")
        for k, v in sorted(by_key.items()):
            mv = [x for x, _ in v if x is not None]
            print(f"  {k}: {len(v)} segments, mean purity measured {np.mean(mv):.3f}, "
                  f"exact {np.mean([y for _, y in v]):.3f}")
        print("Exact flow is the ceiling: what it does not reach is lost by the metric on these scenes; the gap between"
              " the two columns is the flow estimate's.")
    finally:
        if not a.out:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
