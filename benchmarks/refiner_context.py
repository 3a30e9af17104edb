"""Context policies on a real KV cache: SANA-WM's stage-2 refiner (diffusers SanaWMLTX2Refiner), random weights.

    .venv/bin/python benchmarks/refiner_context.py [--layers 4] [--heads 4] [--head-dim 64] [--latents 31]
                                                   [--height 8] [--width 14] [--budget 4] [--device cpu]

Runs ``worldgate.adapters.sana_wm.refine_with_context`` — upstream's chunk-causal loop with the history chosen by a
policy — over an LRLRLR camera path (90 degrees out and back, three times, 25 deg/s at 16 fps) with ``full_kv``,
``sliding_window`` and ``fov`` at one budget (in chunks: the sink latent frame, then blocks of 3), and prints wall
time, mean/peak history tokens and held K/V bytes per policy and the ratios to ``full_kv``. The default size is a
CPU-sized stand-in (real: 48 layers, 32 x 128 heads, 22 x 40 latent tokens per frame at 704 x 1280); pass the real
sizes on a GPU machine with ``--device cuda``. Weights are random: this measures the cache and attention cost the
policy controls, not image quality.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from lingbot_context import lrlr_poses as lrlrlr_poses  # the same yaw sweep (benchmarks/ beside this script)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--latents", type=int, default=31, help="latent frames (1 + 3k); pixel frames are 8 (n - 1) + 1")
    ap.add_argument("--height", type=int, default=8, help="latent height (pixels / 32)")
    ap.add_argument("--width", type=int, default=14, help="latent width (pixels / 32)")
    ap.add_argument("--channels", type=int, default=128, help="latent channels (LTX-2: 128)")
    ap.add_argument("--budget", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()

    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.models.transformers.transformer_sana_wm_refiner import SanaWMLTX2RefinerTransformer3DModel
    from diffusers.pipelines.sana_wm.refiner import SanaWMLTX2Refiner

    from worldgate.adapters.sana_wm import refine_with_context
    from worldgate.adapters.context import make_policy

    torch.manual_seed(0)
    dim = a.heads * a.head_dim
    tr = SanaWMLTX2RefinerTransformer3DModel(
        in_channels=a.channels, out_channels=a.channels, num_attention_heads=a.heads, attention_head_dim=a.head_dim,
        cross_attention_dim=dim, caption_channels=64, num_layers=a.layers, audio_in_channels=4, audio_out_channels=4,
        audio_num_attention_heads=1, audio_attention_head_dim=8, audio_cross_attention_dim=8).to(a.device).eval()
    ref = SanaWMLTX2Refiner(transformer=tr, connectors=None, tokenizer=None, text_encoder=None,
                            scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0))
    ref.set_progress_bar_config(disable=True)
    emb = torch.randn(1, 16, 64, device=a.device)
    mask = torch.ones(1, 16, dtype=torch.long, device=a.device)
    ref._encode_prompt = lambda prompt, device, dtype: (emb, mask)  # no Gemma-3 here: random text tokens
    z = torch.randn(1, a.channels, a.latents, a.height, a.width, device=a.device)
    c2w = lrlrlr_poses(8 * (a.latents - 1) + 1)
    print(f"refiner: {a.layers} layers, {a.heads}x{a.head_dim} heads, {a.height}x{a.width} tokens per latent frame, "
          f"{a.latents} latent frames ({8 * (a.latents - 1) + 1} pixel frames), budget {a.budget} chunks, {a.device}")
    rows = {}
    for name in ("full_kv", "sliding_window", "fov"):
        policy = make_policy(name, None if name == "full_kv" else a.budget)
        refine_with_context(ref, z[:, :, :4], "p", fps=16.0, c2w=c2w, policy=policy)  # warm-up
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        _, log = refine_with_context(ref, z, "p", fps=16.0, c2w=c2w, policy=policy,
                                     generator=torch.Generator(a.device).manual_seed(0))
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        toks = [r["history_tokens"] for r in log[1:]]
        kvb = [r["kv_bytes"] for r in log[1:]]
        rows[name] = (dt, float(np.mean(toks)), max(toks), max(kvb), log)
        print(f"  {name:15s} {dt:7.2f} s  history tokens mean {np.mean(toks):7.0f} peak {max(toks):6d}  "
              f"held K/V peak {max(kvb) / 2**20:7.1f} MiB  last chunk held {log[-1]['held']}")
    full = rows["full_kv"][0]
    for name in ("sliding_window", "fov"):
        print(f"  {name}/full_kv wall time {rows[name][0] / full:.2f}; peak held K/V "
              f"{rows[name][3] / rows['full_kv'][3]:.2f}")
    back = [r["held"] for r in rows["fov"][4][1:]]
    print(f"  fov held per chunk: {back}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
