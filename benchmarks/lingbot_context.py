"""Context policies inside LingBot-World v2's own causal loop: per-chunk time of FoV and Sliding Windows vs FullKV.

    LINGBOT_WORLD_V2_CHECKOUT=PATH PYTHONPATH=DEPS .venv/bin/python benchmarks/lingbot_context.py \
        [--chunks 12] [--budget 3] [--image 128] [--layers 2] [--dim 128] [--heads 4] [--repeat 3] [--threads 1]

PATH: robbyant/lingbot-world-v2 at 2648877f763a06cc743bcd919936da4d25f12e7b (checkout or ``git archive`` export);
DEPS: a folder with its einops, easydict and ftfy (``pip install --target DEPS einops easydict ftfy``).

Runs the checkout's own ``WanModelFast`` and ``WanI2VCausal._generate_causal_fast`` at a random CPU-sized
configuration (the tiny pipeline of tests/adapters/test_lingbot_v2_context.py: T5 output in the pipeline's prompt cache, a
pooling stand-in VAE, SDPA in place of the flash-attn kernels) through ``adapters/lingbot_v2_launcher.py``'s
``run_pipeline`` with ``full_kv``, ``sliding_window`` and ``fov`` at one budget (chunks, the sink included), over an
LRLR camera path (90 degrees out and back, twice). Prints, per policy: wall time per chunk (all chunks, and the
chunks after the budget is full, where the policies differ), attended history tokens, the policy's own selection time
(pose-only, computed once before generation), and the ratios to ``full_kv``. Each chunk's time is the span between the
first model forward of that chunk and of the next (a forward pre-hook), so it covers the model's 4 denoising steps
and its t=0 cache update; it is this process's CPU time (``--threads 1``, the default: robust to other load on the
machine), the median over ``--repeat`` interleaved runs. Weights are random: this measures the attention cost a policy controls, not image quality.
The cache is the model's full-length one under every policy (it is what a retrieval policy needs), so memory is
FullKV's; only what attention reads shrinks.
"""

from __future__ import annotations

import argparse
import importlib
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: this process's CPU time: with one thread it is what the chunk cost, whatever else the machine runs
CLOCK = time.process_time


def _tests():
    """tests/adapters/test_lingbot_v2_context.py, imported by name as the tests import it (its own imports, such as
    adapter_conformance and testpaths, live in tests/ too)."""
    import sys

    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    from testpaths import put_on_path

    put_on_path()
    return importlib.import_module("test_lingbot_v2_context")


def lrlr_poses(n: int, fps: float = 16.0, rate: float = 25.0) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    leg = 90.0 / rate * fps
    phase = (np.arange(n) / leg) % 2
    yaw = -90.0 * np.where(phase < 1, phase, 2 - phase)
    out = np.repeat(np.eye(4)[None], n, axis=0)
    out[:, :3, :3] = Rotation.from_euler("y", yaw[:, None], degrees=True).as_matrix()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkout", default=os.environ.get("LINGBOT_WORLD_V2_CHECKOUT"))
    ap.add_argument("--chunks", type=int, default=12, help="chunks of 4 latents (16 m - 3 frames)")
    ap.add_argument("--budget", type=int, default=3)
    ap.add_argument("--image", type=int, default=128, help="square image side (multiple of 16); tokens per latent "
                                                            "frame = (side / 16)^2")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="runs per policy; the per-chunk median is reported")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of this process's CPU time")
    a = ap.parse_args()
    global CLOCK
    if a.wall or a.threads != 1:
        CLOCK = time.perf_counter
    if not a.checkout:
        ap.error("pass --checkout or set LINGBOT_WORLD_V2_CHECKOUT")
    import torch
    from PIL import Image

    from worldgate.adapters import lingbot_v2_launcher as L
    from worldgate.adapters.context import make_policy

    torch.set_num_threads(a.threads)
    T = _tests()
    m = import_model_or_exit(T, Path(a.checkout))
    m.mf.attention = T.cpu_attention
    m.mf.flash_attention = lambda q, k, v, k_lens=None, **kw: T.cpu_attention(q, k, v)
    state = T.tiny_pipeline(m, layers=a.layers, dim=a.dim, heads=a.heads).model.state_dict()

    import tempfile

    work = Path(tempfile.mkdtemp(prefix="lingbot-context-"))
    F = 16 * a.chunks - 3
    act = T.write_action(work / "action", lrlr_poses(F))
    img = Image.fromarray((np.random.default_rng(0).random((a.image, a.image, 3)) * 255).astype(np.uint8))
    gen = dict(max_area=a.image * a.image, shift=10.0, seed=3, offload_model=False)
    tok = (a.image // 16) ** 2
    print(f"LingBot-World v2 causal-fast loop ({Path(a.checkout).resolve()}), random weights: {a.layers} layers, "
          f"dim {a.dim}, {a.heads} heads, {a.image}x{a.image} image = {tok} tokens per latent frame, "
          f"{4 * tok} per chunk, {a.chunks} chunks ({F} frames), budget {a.budget} chunks, CPU x{a.threads}, "
          f"{'wall' if CLOCK is time.perf_counter else 'CPU'} time, median of {max(1, a.repeat)}")

    def run(name, budget):
        p = T.tiny_pipeline(m, state=state, layers=a.layers, dim=a.dim, heads=a.heads)
        marks = []

        def pre(mod, args, kwargs):
            k = kwargs["current_start"] // (4 * kwargs["frame_seqlen"])
            if not marks or marks[-1][0] != k:
                marks.append((k, CLOCK()))

        h = p.model.register_forward_pre_hook(pre, with_kwargs=True)
        try:
            _, rows = L.run_pipeline(p, make_policy(name, budget), prompt=T.PROMPT, img=img, action_path=act,
                                     chunk_size=4, frame_num=F, **gen)
        finally:
            h.remove()
        end = CLOCK()
        times = [b[1] - a_[1] for a_, b in zip(marks, marks[1:])] + [end - marks[-1][1]]
        return np.array(times), rows

    infos, _ = L.plan_chunks(np.load(act / "poses.npy"), F, 4)
    names = ("full_kv", "sliding_window", "fov")
    budgets = {n: None if n == "full_kv" else a.budget for n in names}
    sel = {}
    for name in names:
        t0 = CLOCK()
        L.select_all(make_policy(name, budgets[name]), infos)
        sel[name] = CLOCK() - t0
        run(name, budgets[name])  # warm-up
    results = {n: [] for n in names}
    for _ in range(max(1, a.repeat)):  # interleaved, so a change in machine load hits every policy alike
        for name in names:
            results[name].append(run(name, budgets[name]))
    rows_out = {}
    for name in names:
        per = np.median(np.stack([r[0] for r in results[name]]), axis=0)
        rows = results[name][-1][1]
        hist = np.array([r["history_tokens"] for r in rows])
        late = slice(a.budget + 1, None)
        rows_out[name] = (per, hist, sel[name], rows)
        print(f"  {name:15s} per chunk {per.mean() * 1e3:8.1f} ms (after the budget fills: "
              f"{per[late].mean() * 1e3:8.1f} ms)  history tokens mean {hist.mean():7.0f} last {hist[-1]:6d}  "
              f"selection {sel[name] * 1e3 / a.chunks:6.1f} ms/chunk")
    full = rows_out["full_kv"][0]
    for name in ("sliding_window", "fov"):
        per = rows_out[name][0]
        print(f"  {name}/full_kv per-chunk time {per.mean() / full.mean():.2f} (after the budget fills "
              f"{per[a.budget + 1:].mean() / full[a.budget + 1:].mean():.2f}; last chunk {per[-1] / full[-1]:.2f})")
    print(f"  per-chunk ms  full_kv {np.round(full * 1e3).astype(int).tolist()}")
    for name in ("sliding_window", "fov"):
        print(f"  per-chunk ms  {name} {np.round(rows_out[name][0] * 1e3).astype(int).tolist()}")
    print(f"  fov held per chunk: {[r['context'] for r in rows_out['fov'][3]]}")
    return 0


def import_model_or_exit(T, checkout: Path):
    try:
        return T.import_model(checkout)
    except BaseException as e:  # pytest.skip raises its own exception type
        if type(e).__name__ in ("Skipped", "OutcomeException"):
            raise SystemExit(f"lingbot_context: {e}") from None
        raise


if __name__ == "__main__":
    raise SystemExit(main())
