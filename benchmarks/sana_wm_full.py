"""SANA-WM's real diffusers pipeline at native size with random weights: seconds per video and peak GPU memory.

    .venv/bin/python benchmarks/sana_wm_full.py --device cuda [--seconds 5] [--steps 4] [--dtype bf16]
    .venv/bin/python benchmarks/sana_wm_full.py --device meta --build-only     # the full configs, no memory

The components are the classes the released checkpoint loads (diffusers 0.42.1 ``SanaWMPipeline``), built at full
size from their own defaults, which are the release's (``SanaWMTransformer3DModel()``: 20 layers, hidden 2240,
2.66 B parameters; ``AutoencoderKLLTX2Video()`` with the 32x spatial / 8x temporal compression the pipeline expects;
a Gemma-2 2B text encoder, hidden 2304 = the transformer's ``caption_channels``). Nothing is downloaded: the
tokenizer is built in memory and every weight is random, so this measures time and memory, not images (neither
depends on the weights' values). The case is worldgate's own: ``adapters/sana_wm.py`` plans a ``W`` key at
704x1280 / 16 fps for ``--seconds`` (frames 8k+1), and the pipeline is called with the plan's c2w, intrinsics and
frame count by the adapter's own ``rollout`` (the pipeline adopted through ``load(pipeline=...)``). Printed: wall seconds for the
call, seconds per 20 s video (scaled by frames: the transformer's attention is linear in tokens, the VAE is
chunk-causal), and ``torch.cuda.max_memory_allocated``. ``benchmarks/gpu_smoke.sh`` runs it on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import time


def build(device: str, dtype):
    import torch
    from diffusers import (AutoencoderKLLTX2Video, FlowMatchEulerDiscreteScheduler, SanaWMPipeline,
                           SanaWMTransformer3DModel)
    from transformers import Gemma2Config, Gemma2Model, GemmaTokenizer

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4}
    for ch in [chr(c) for c in range(32, 127)] + ["\u2581"]:
        vocab.setdefault(ch, len(vocab))
    tok = GemmaTokenizer(vocab=vocab, merges=[])
    # google/gemma-2-2b's config.json (hidden 2304, 26 layers, 8 heads x 256, 4 KV heads, MLP 9216, vocab 256000)
    te_cfg = Gemma2Config(hidden_size=2304, num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                          head_dim=256, intermediate_size=9216, vocab_size=256000, max_position_embeddings=8192)
    with torch.device(device):
        te = Gemma2Model(te_cfg).to(dtype)
        vae = AutoencoderKLLTX2Video(spatial_compression_ratio=32, temporal_compression_ratio=8).to(dtype)
        tr = SanaWMTransformer3DModel().to(dtype)
    pipe = SanaWMPipeline(tokenizer=tok, text_encoder=te, vae=vae, transformer=tr,
                          scheduler=FlowMatchEulerDiscreteScheduler())
    pipe.set_progress_bar_config(disable=True)
    return pipe, {"text_encoder": te, "vae": vae, "transformer": tr}


def params_m(module) -> float:
    return sum(p.numel() for p in module.parameters()) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--seconds", type=float, default=5.0, help="video length planned (the adapter's 8k+1 frames)")
    ap.add_argument("--steps", type=int, default=4, help="denoising steps (time scales with them)")
    ap.add_argument("--build-only", action="store_true", help="build the full-size components and count them")
    a = ap.parse_args()
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    t0 = time.perf_counter()
    pipe, parts = build(a.device, dtype)
    row = {"device": a.device, "dtype": a.dtype, "build_s": round(time.perf_counter() - t0, 1),
           "params_M": {k: round(params_m(m), 1) for k, m in parts.items()}}
    if a.build_only or a.device == "meta":
        print(json.dumps(row))
        return 0
    from PIL import Image

    from worldgate.adapters import get_adapter
    from worldgate.trajectories.core import Trajectory
    from worldgate.trajectories.suites import Case

    img = Image.new("RGB", (1280, 720), (90, 120, 150))
    img.save("/tmp/worldgate-sana-smoke.png")
    case = Case(id="smoke", suite="smoke", trajectory=Trajectory.parse(f"W{a.seconds:g}"), prompt="A street.",
                image="/tmp/worldgate-sana-smoke.png", intrinsics=[1100.0, 1100.0, 640.0, 360.0], image_size=(1280, 720))
    adapter = get_adapter("sana-wm", num_inference_steps=a.steps)
    plan = adapter.plan(case)
    adapter.load(a.device, pipeline=pipe)
    if a.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with torch.inference_mode():
        (chunk,) = list(adapter.rollout(plan, seed=0))
    assert chunk.frames.shape == (plan.n_frames, plan.height, plan.width, 3), chunk.frames.shape
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    frames = plan.n_frames
    row.update(frames=frames, size=f"{plan.width}x{plan.height}", steps=a.steps, call_s=round(dt, 1),
               s_per_20s_video=round(dt * 321 / frames, 1),
               peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2) if a.device.startswith("cuda") else None)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
