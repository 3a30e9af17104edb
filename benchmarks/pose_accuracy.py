"""Classical pose extractor against the camera the Engine actually rendered.

    .venv/bin/python benchmarks/pose_accuracy.py [--seconds 6] [--models engine,engine-drift,...]

Camera-following scores (rotation / translation RPE) compare the *estimated* camera with the *commanded* one; this
checks the estimator itself. It rolls out the validation protocol (WorldMark ids 1, 3, 5, 6, 7, 8, 9, 12, first- and
third-person, 256x256) with the Engine and every fault, whose rendered poses differ from the commanded ones by
construction (drift, stalls, lag, flipped yaw, leaked strafe), runs the classical ``poses`` extractor on each video
and compares every pair's relative pose (frames i -> i+2) with the rendered truth:

- rotation error: geodesic angle between estimated and true relative rotation, mean degrees per pair (and pairs off
  by more than 5 degrees: a twisted-pair or mistracked solution);
- baseline direction: for pairs where the essential model was chosen, the angle between the estimated and true
  translation direction, and how many point the wrong way (> 90 degrees).

No goal is attached: the numbers are the estimator's accuracy, quoted where its design is argued (classical.py).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def relative_truth(c2w: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair starts a = 0, gap, 2 gap, ... and the true (R, t) of x_b = R x_a + t for camera a -> camera b = a + gap."""
    a = np.arange(0, len(c2w) - gap, gap)
    Ra, Rb, Ca, Cb = c2w[a, :3, :3], c2w[a + gap, :3, :3], c2w[a, :3, 3], c2w[a + gap, :3, 3]
    return a, np.einsum("nji,njk->nik", Rb, Ra), np.einsum("nji,nj->ni", Rb, Ca - Cb)


def score_record(est: dict, true_c2w: np.ndarray) -> dict:
    from worldgate.evaluate.shared import rotation_angles

    gap = int(est["gap"])
    a, R_true, t_true = relative_truth(true_c2w, gap)
    a = a[a < len(est["R"])]
    R_true, t_true = R_true[: len(a)], t_true[: len(a)]
    err = np.degrees(rotation_angles(np.einsum("nji,njk->nik", R_true, est["R"][a])))
    t_est = est["t"][a]
    use = (np.linalg.norm(t_est, axis=1) > 0) & (np.linalg.norm(t_true, axis=1) > 1e-6)
    cos = np.einsum("ij,ij->i", t_est[use], t_true[use]) / (
        np.linalg.norm(t_est[use], axis=1) * np.linalg.norm(t_true[use], axis=1))
    ang = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    return {"rot_err_sum": float(err.sum()), "pairs": len(a), "gross": int((err > 5.0).sum()),
            "motion_sum": float(np.degrees(rotation_angles(R_true)).sum()),
            "t_err_sum": float(ang.sum()), "t_pairs": int(use.sum()), "t_flipped": int((ang > 90).sum())}


def main() -> int:
    from worldgate.adapters import get_adapter
    from worldgate.adapters.engine.faults import FAULT_TARGETS
    from worldgate.evaluate.features.geometry import PoseExtractor
    from worldgate.evaluate.features import FeatureCache, compute_features, open_record
    from worldgate.experiments.validate import validation_manifest
    from worldgate.generate.runner import run_generate
    from worldgate.trajectories.suites import Case

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=6.0, help="seconds per key of each trajectory")
    ap.add_argument("--models", default=",".join(["engine", *FAULT_TARGETS]))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    t0 = time.perf_counter()
    try:
        manifest = validation_manifest(tmp / "validation.jsonl", a.seconds)
        rows, total = [], {}
        for model in a.models.split(","):
            res = run_generate(model, str(manifest), tmp / model, overrides=["model.width=256", "model.height=256"],
                               progress=False)
            if res.failed:
                raise SystemExit(f"{model}: rollouts failed: {res.failed}")
            ad = get_adapter(model, width=256, height=256)
            acc: dict = {}
            for folder in sorted(p for p in (tmp / model).iterdir() if (p / "meta.json").is_file()):
                rec = open_record(folder)
                est = compute_features(rec, [PoseExtractor()], FeatureCache(tmp / ".f"))[0]["poses"]
                true = ad.render_poses(ad.plan(Case.from_dict(rec.meta["case"])))
                for k, v in score_record(est, true).items():
                    acc[k] = acc.get(k, 0) + v
            rows.append((model, acc))
            for k, v in acc.items():
                total[k] = total.get(k, 0) + v
        print(f"== classical poses ({PoseExtractor().key()}) against the rendered camera: validation protocol, "
              f"{a.seconds:g} s per key, 256x256 ==")
        print(f"{'model':16s} {'rot err deg/pair':>17s} {'(motion)':>9s} {'>5 deg':>7s} {'baseline err deg':>17s} "
              f"{'flipped':>12s}")
        for model, r in rows + [("all", total)]:
            print(f"{model:16s} {r['rot_err_sum'] / r['pairs']:17.3f} {r['motion_sum'] / r['pairs']:9.2f} "
                  f"{r['gross']:7d} {r['t_err_sum'] / max(r['t_pairs'], 1):17.1f} "
                  f"{r['t_flipped']:5d} of {r['t_pairs']:<5d}")
        print(f"({time.perf_counter() - t0:.0f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
