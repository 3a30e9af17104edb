"""SANA-WM (diffusers ``SanaWMPipeline``; code Apache-2.0): camera-to-world poses + pixel intrinsics, 704x1280 video.

Conventions this adapter relies on, read in the diffusers **0.42.1** wheel (docs/probes/sana-wm.md; P =
``diffusers/pipelines/sana_wm/pipeline_sana_wm.py``, CU = ``.../sana_wm/cam_utils.py``, IP = ``.../image_processor.py``):

- Call: ``SanaWMPipeline(image, prompt, *, c2w=..., intrinsics=..., height, width, num_frames, fps,
  num_inference_steps, guidance_scale, negative_prompt, generator, max_sequence_length, output_type)`` (P:459-485).
  Exactly one of ``c2w`` / ``action`` (P:350-351); this adapter passes **poses**, never the letter DSL (whose letters
  changed between SANA releases, docs/probes/sana-wm.md section 3). ``image`` must be a PIL image: nothing in the
  pipeline opens a path (P:552, IP:45-67, CU:177), so ``rollout`` opens ``case.image``. One video per call, no seed
  argument: the ``generator`` decides the noise (P:422-427).
- Poses: ``c2w`` (F, 4, 4), cast to float32 (P:353-355, 379), OpenCV camera-to-world, +X right, +Y down, +Z
  forward (CU:91-92). They are made relative to frame 0 (``inverse(c2w[0]) @ c2w[1:]``, frame 0 := I, CU:275-278);
  translation is **not** normalised (CU:254-307 and CU:193-240 scale nothing; only ray directions are unit, CU:235).
  The trajectory's poses already start at the identity; their translation is in **metres** (the release was trained
  on metric-scale poses, docs/probes/sana-wm.md section 1), passed unscaled.
- Frames: ``num_frames = min(num_frames, len(c2w))`` then snapped to the nearest 8k+1, ties up, capped by the number
  of poses (P:381-383, CU:310-321). This adapter passes F = 8k+1 poses and ``num_frames=F``, so nothing is snapped.
- Intrinsics (regime 4): ``[fx, fy, cx, cy]`` in **original-image pixels** (P:356-363, 498-500), broadcast to every
  frame (P:391-392). The pipeline resizes the image aspect-preserving with ``scale = max(H/h, W/w)``,
  ``rw = max(W, round(w*scale))``, ``rh = max(H, round(h*scale))`` (LANCZOS) and centre-crops at
  ``left = (rw-W)//2``, ``top = (rh-H)//2`` (CU:171-185); K follows as ``fx*rw/w``, ``cx*rw/w - left``, ``fy*rh/h``,
  ``cy*rh/h - top`` (CU:147-163, IP:64-66), then is divided by 32 into latent units (CU:280-283). The adapter passes
  the case's K untouched and records the crop-pixel K computed with the same arithmetic.
- Size: 704x1280 by default, "fixed for the public model" (P:467-468, 501-504; CU:31-32); latents are H//32 x W//32
  (P:418-420) with no divisibility check, so width/height must be multiples of 32.
- fps: the pipeline's ``fps`` is accepted and unused by stage 1 (P:470 and the docstring P:507 are its only uses);
  upstream writes and trains at 16 fps (docs/probes/sana-wm.md section 3). The writer here (generate) uses 16 fps.
- Time: stage 1 is one bidirectional call over the whole clip, with no KV cache (docs/probes/sana-wm.md section 6);
  the LTX-2 VAE maps latent frame 0 to pixel frame 0 and every later latent to 8 pixel frames (P:418).
- Stage 2 (``SanaWMLTX2Refiner``, RF = ``.../sana_wm/refiner.py``; not part of ``SanaWMPipeline``, loaded only with
  ``refiner=DIR``) is chunk-causal: a pre-RoPE sink of ``sink_size`` latent frames (RF:209-222), then blocks of
  ``block_size`` latent frames (RF:118-121, canonical 1 and 3), each denoised in 3 Euler steps against
  ``[sink + history + block]`` K/V and then captured post-RoPE into the history (RF:225-330), the history trimmed to
  the last ``kv_max_frames - sink_size`` latent frames (RF:333-340; canonical 11). That history is the one real KV
  cache a context policy can drive here: ``refine_with_context`` runs the same loop with the held chunks chosen by a
  :class:`~worldgate.adapters.context.ContextPolicy` (chunk 0 = the sink, chunk k = block k) instead of the trim.
- The letter DSL, for reference only (the agreement test checks the poses against it): ``action_string_to_c2w``
  (CU:82-139), w/s forward/back, a/d strafe, j/l yaw (l = right), i/k pitch (i = up), 0.05 units and 1.2 degrees
  per frame, ``R_new = rot_y(yaw) @ R @ rot_x(pitch)`` (CU:114), moves in the yaw plane (CU:116-132).

Model args: ``model_id`` (default the diffusers repo), ``path`` (a local ``save_pretrained`` folder), ``refiner``
(a local ``SanaWMLTX2Refiner.save_pretrained`` folder: runs stage 2, and ``--context`` policies act on its cache),
``width``/``height`` (1280/704), ``num_inference_steps`` (60), ``guidance_scale`` (5.0), ``negative_prompt`` (""),
``max_sequence_length`` (300), ``dtype`` (bfloat16 on CUDA, float32 on CPU). Weights are never downloaded by
``load``: missing weights raise an :class:`AdapterError` with the command that fetches them.
"""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np
from PIL import Image

from worldgate.adapters.context import ChunkInfo

from .base import Adapter, AdapterError, AdapterInfo, Chunk, NativeInputs, horizontal_fov_deg

REFINER_SINK, REFINER_BLOCK = 1, 3  # stage 2's canonical sink and block, in latent frames (RF:118-121)

H, W = 704, 1280  # CU:31-32
FPS = 16.0
STRIDE_T, STRIDE_S = 8, 32  # LTX-2 VAE temporal / spatial compression (P:187-192)
MODEL_ID = "Efficient-Large-Model/SANA-WM_bidirectional-diffusers"  # P:114
DSL_SPEED, DSL_DEG = 0.05, 1.2  # the letter DSL's step per frame (CU:34-35), for the caveats only


def crop_transform(k, src_size, width: int = W, height: int = H) -> tuple[list[float], dict]:
    """The pipeline's resize + centre crop (CU:171-185) applied to ``[fx, fy, cx, cy]`` (CU:147-163)."""
    fx, fy, cx, cy = map(float, k)
    w0, h0 = int(src_size[0]), int(src_size[1])
    scale = max(height / h0, width / w0)
    rw = max(width, int(round(w0 * scale)))
    rh = max(height, int(round(h0 * scale)))
    left, top = (rw - width) // 2, (rh - height) // 2
    sx, sy = rw / w0, rh / h0
    native = [fx * sx, fy * sy, cx * sx - left, cy * sy - top]
    return native, {"policy": "crop", "resize": "aspect-preserving, scale = max(H/h, W/w), LANCZOS",
                    "resized_size": [rw, rh], "crop_left_top": [left, top], "scale_xy": [sx, sy],
                    "src_size": [w0, h0], "dst_size": [width, height],
                    "passed_to_model": "original-image pixels; the pipeline applies this transform itself"}


def latent_to_pixel(t0: int, t1: int) -> tuple[int, int]:
    """Pixel frames [p0, p1) of latent frames [t0, t1): latent 0 is pixel 0, latent t >= 1 pixels 8(t-1)+1 .. 8t
    (P:418)."""
    def px(t):
        return 0 if t <= 0 else STRIDE_T * (t - 1) + 1
    return px(t0), px(t1)


def refiner_chunks(n_latent: int, sink_size: int = REFINER_SINK, block_size: int = REFINER_BLOCK) -> list:
    """Stage 2's chunks as latent-frame ranges: chunk 0 the sink [0, sink_size), then blocks of ``block_size``
    (RF:225-226)."""
    out, t = [(0, sink_size)], sink_size
    while t < n_latent:
        out.append((t, min(t + block_size, n_latent)))
        t += block_size
    return out


def refine_with_context(refiner, sana_latent, prompt: str, *, fps: float, c2w: np.ndarray, policy=None,
                        sink_size: int = REFINER_SINK, block_size: int = REFINER_BLOCK, sigmas=None, generator=None,
                        on_block=None):
    """SANA-WM stage 2 with its KV history chosen by a context policy.

    The loop is diffusers' ``SanaWMLTX2Refiner.__call__`` (RF:112-342, 0.42.1) step for step — the sink captured
    pre-RoPE at sigma 0, each block started at the flow-matching endpoint with one noise draw, 3 Euler steps with the
    cache injected, then its post-RoPE K/V captured under the same prefix — with one change: before each block the
    layer caches are given the sink (when the policy holds chunk 0) and the history of exactly the chunks
    ``policy.select(earlier chunks, this chunk)`` returns, in chunk order, instead of the last ``kv_max_frames``
    frames. Each chunk's K/V is kept from its capture, so a chunk dropped once can be selected again (retrieval). The
    sink's RoPE offset is computed as upstream from the number of held history frames (RF:232). With
    ``sliding_window`` and budget B this is upstream with ``kv_max_frames = sink_size + (B - 1) * block_size``
    exactly, and ``full_kv`` is upstream without a trim (tests).

    ``c2w``: the commanded pixel-frame poses (the policy ranks chunks by them). ``on_block(k, held, kv_cache,
    chunk_kv)`` is called after block k's denoising and capture, with the cache as it was used. Returns (latents, log)
    with log one row per chunk: chunk, latent and pixel frames, held ids, history tokens.
    """
    import torch
    from diffusers.models.transformers.transformer_sana_wm_refiner import SanaWMRefinerKVCache
    from diffusers.pipelines.sana_wm.refiner import STAGE_2_DISTILLED_SIGMA_VALUES, _pack_latents, _unpack_latents
    from diffusers.utils.torch_utils import randn_tensor

    tr = refiner.transformer
    cfg = tr.config
    device = refiner._execution_device
    dtype = next(tr.parameters()).dtype
    sigmas = tuple(sigmas or STAGE_2_DISTILLED_SIGMA_VALUES)
    if generator is None:
        generator = torch.Generator(device=device).manual_seed(42)  # upstream's default (RF:166)
    refiner.scheduler.set_timesteps(sigmas=list(sigmas[:-1]), device=device)
    sigmas_t = refiner.scheduler.sigmas.to(device=device, dtype=torch.float32)
    sigma_max = float(sigmas_t[0])
    prompt_embeds, prompt_mask = refiner._encode_prompt(prompt, device=device, dtype=dtype)
    z = sana_latent.to(device=device, dtype=dtype)
    latents = z.clone()
    batch, _, n_lat, height, width = z.shape
    if n_lat <= sink_size:
        raise AdapterError(f"sana-wm stage 2: the latent has {n_lat} frames but the sink takes {sink_size}")
    spans = refiner_chunks(n_lat, sink_size, block_size)
    px = [latent_to_pixel(a, b) for a, b in spans]
    if px[-1][1] > len(c2w):
        raise AdapterError(f"sana-wm stage 2: {len(c2w)} poses for {px[-1][1]} pixel frames")
    infos = [ChunkInfo(k, p0, p1, np.asarray(c2w[p0:p1])) for k, (p0, p1) in enumerate(px)]
    tokens_per_frame = (height // cfg.patch_size) * (width // cfg.patch_size) // cfg.patch_size_t
    n_layers = len(tr.transformer_blocks)
    kv = SanaWMRefinerKVCache(n_layers)

    def forward(block, positions, mode, sigma=None):
        tokens = _pack_latents(block, patch_size=cfg.patch_size, patch_size_t=cfg.patch_size_t)
        t = torch.full((batch, tokens.shape[1]), 0.0 if sigma is None else sigma * float(cfg.timestep_scale_multiplier),
                       dtype=torch.float32, device=device)
        rope = tr.build_rotary_emb_for_absolute_positions(batch_size=batch, frame_positions=positions, height=height,
                                                          width=width, device=device, fps=float(fps))
        out = tr(hidden_states=tokens, encoder_hidden_states=prompt_embeds, timestep=t, video_rotary_emb=rope,
                 encoder_attention_mask=prompt_mask, kv_cache=kv, kv_cache_mode=mode, return_dict=False)[0]
        return tokens, out

    with torch.no_grad():
        forward(z[:, :, :sink_size].contiguous(), list(range(sink_size)), "capture_pre_rope")  # RF:209-222
        sink = [kv.get(i).get_captured_pre_rope() for i in range(n_layers)]
        chunk_kv: dict[int, list] = {}  # chunk id -> per layer post-RoPE (k, v)
        log = [{"chunk": 0, "latent": list(spans[0]), "pixels": list(px[0]), "held": [], "history_tokens": 0}]
        for k in range(1, len(spans)):
            t0, t1 = spans[k]
            held = sorted(policy.select(infos[:k], infos[k])) if policy is not None else list(range(k))
            hist = [c for c in held if c != 0]
            held_bytes = 0
            for i in range(n_layers):
                lc = kv.get(i)
                sk, sv = sink[i]
                if 0 not in held:  # an empty sink is no sink (get_sink returns None)
                    sk, sv = sk[:, :0], sv[:, :0]
                lc.store_sink(sk, sv)
                if hist:
                    lc.store_history(torch.cat([chunk_kv[c][i][0] for c in hist], dim=1),
                                     torch.cat([chunk_kv[c][i][1] for c in hist], dim=1))
                else:
                    lc.store_history(sink[i][0][:, :0], sink[i][1][:, :0])
                held_bytes += sum(x.numel() * x.element_size() for x in (sk, sv, lc.history_k, lc.history_v))
            hist_frames = sum(spans[c][1] - spans[c][0] for c in hist)
            off = t0 - hist_frames - sink_size  # RF:232
            kv.sink_pe = tr.build_rotary_emb_for_absolute_positions(
                batch_size=batch, frame_positions=list(range(off, off + sink_size)), height=height, width=width,
                device=device, fps=float(fps))
            clean = z[:, :, t0:t1]
            noise = randn_tensor(clean.shape, generator=generator, device=device, dtype=dtype)
            block = ((1.0 - sigma_max) * clean.float() + sigma_max * noise.float()).to(dtype)
            refiner.scheduler.set_timesteps(sigmas=[float(x) for x in sigmas_t[:-1]], device=device)
            positions = list(range(t0, t1))
            for j, t in enumerate(refiner.scheduler.timesteps):  # RF:251-306
                sigma = float(sigmas_t[j].item())
                tokens, v = forward(block, positions, "inject", sigma)
                x0 = _unpack_latents((tokens.float() - v.float() * torch.full(
                    (batch, tokens.shape[1], 1), sigma, dtype=torch.float32, device=device)).to(dtype),
                    num_frames=t1 - t0, height=height, width=width, patch_size=cfg.patch_size,
                    patch_size_t=cfg.patch_size_t)
                if sigma <= 1.0e-6:
                    block = x0.to(dtype)
                else:
                    vel = (block.float() - x0.float()) / sigma
                    block = refiner.scheduler.step(vel, t, block.float(), return_dict=False)[0].to(dtype)
            forward(block, positions, "inject_and_capture_post_rope")  # RF:308-330
            chunk_kv[k] = [kv.get(i).get_captured_post_rope() for i in range(n_layers)]
            if on_block is not None:
                on_block(k, held, kv, chunk_kv)
            latents[:, :, t0:t1] = block
            log.append({"chunk": k, "latent": [t0, t1], "pixels": list(px[k]), "held": held,
                        "history_tokens": hist_frames * tokens_per_frame, "sink": 0 in held, "kv_bytes": held_bytes})
    return latents, log


class SanaWM(Adapter):
    info = AdapterInfo(
        name="sana-wm", version="0.1", width=W, height=H, fps=FPS,
        fps_source="writer: generate writes 16 fps, upstream's fps (probe section 3); the pipeline's fps argument "
                   "is unused by stage 1 (pipeline_sana_wm.py:470, 507)",
        chunk_frames=8, first_chunk_frames=1,
        duration_unit="frames (8k+1): latent frame 0 is 1 frame, each later latent 8 (pipeline_sana_wm.py:418); "
                      "the whole clip is one bidirectional call",
        control="poses (c2w + intrinsics), not the letter DSL",
        pose_convention="c2w OpenCV, relative to frame 0, metres, not normalised (cam_utils.py:254-307)",
        intrinsics_regime=4, aspect_policy="crop", context_policies=("full_kv", "sliding_window", "fov"),
        hf_ids=(MODEL_ID, "Efficient-Large-Model/SANA-WM_bidirectional"),
        repository="https://github.com/huggingface/diffusers (pipelines/sana_wm, 0.42.1); "
                   "https://github.com/NVlabs/Sana (inference_video_scripts)",
        licence="code Apache-2.0; weights: repo tag reported as apache-2.0 (unverified), LTX-2 VAE under LTX-2 terms",
        integration="C",
        notes="diffusers SanaWMPipeline stage 1 (bidirectional, no KV cache); with refiner=DIR also the chunk-causal "
              "stage-2 refiner, whose KV cache holds the chunks a context policy selects (chunk = 1 sink latent frame, "
              "then 3-latent blocks)",
    )
    FPS = FPS

    def __init__(self, model_id: str = MODEL_ID, path: str | None = None, width: int = W, height: int = H,
                 num_inference_steps: int = 60, guidance_scale: float = 5.0, negative_prompt: str = "",
                 max_sequence_length: int = 300, dtype: str | None = None, refiner: str | None = None, **model_args):
        if model_args:
            raise AdapterError(f"sana-wm: unknown model args {sorted(model_args)}; known: model_id, path, width, height, "
                               "num_inference_steps, guidance_scale, negative_prompt, max_sequence_length, dtype, "
                               "refiner")
        width, height = int(width), int(height)
        if width % STRIDE_S or height % STRIDE_S or width < 64 or height < 64:
            raise AdapterError(f"sana-wm: width and height must be multiples of {STRIDE_S} and >= 64 (latents are "
                               f"H//32 x W//32, pipeline_sana_wm.py:418-420); got {width}x{height}")
        super().__init__(model_id=model_id, path=path, width=width, height=height,
                         num_inference_steps=int(num_inference_steps), guidance_scale=float(guidance_scale),
                         negative_prompt=str(negative_prompt), max_sequence_length=int(max_sequence_length),
                         dtype=dtype, refiner=refiner)
        self.width, self.height = width, height
        self.pipe = None  # a SanaWMPipeline; tests may set it (or pass load(pipeline=...)) instead of loading weights
        self.refiner = None  # a SanaWMLTX2Refiner (stage 2), from refiner=DIR or load(refiner=...)
        self.device = "cpu"

    # ------------------------------------------------------------------------------------------------ plan
    @staticmethod
    def frame_count(n: int) -> int:
        """Video frames for n commanded frames after the conditioning one: the smallest 8k+1 >= n + 1."""
        return STRIDE_T * math.ceil(n / STRIDE_T) + 1

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        if case.intrinsics is None or case.image_size is None:
            raise AdapterError(f"sana-wm needs the case's intrinsics and image size (regime 4: the pipeline refuses "
                               f"to run without intrinsics, pipeline_sana_wm.py:356-363); case {case.id} has none")
        n = traj.n_frames(self.FPS)
        F = self.frame_count(n)
        c2w = traj.poses(self.FPS, F)  # frame 0 is the identity; padding frames hold the final pose
        c2w32 = c2w.astype(np.float32)  # what the pipeline computes in (pipeline_sana_wm.py:379)
        k_case = np.asarray(case.intrinsics, np.float32)
        w0, h0 = case.image_size
        native, transform = crop_transform(case.intrinsics, case.image_size, self.width, self.height)
        a = self.model_args
        call = {"model_id": a["model_id"], "path": a["path"], "image": case.image, "prompt_file": "prompt.txt",
                "c2w": "c2w.npy", "intrinsics": "intrinsics.npy", "height": self.height, "width": self.width,
                "num_frames": F, "fps": int(self.FPS), "num_inference_steps": a["num_inference_steps"],
                "guidance_scale": a["guidance_scale"], "negative_prompt": a["negative_prompt"],
                "max_sequence_length": a["max_sequence_length"], "output_type": "np",
                "generator": "torch.Generator('cpu').manual_seed(seed)"}
        step = traj.speed / self.FPS
        caveats = [
            f"translation is in metres, passed unscaled ({step:.4g} m per frame at {traj.speed:g} m/s; the letter DSL "
            f"steps {DSL_SPEED} units per frame): the model was trained on metric-scale poses, but the scene scale of "
            "the image is the model's own guess",
            f"turn rate is carried exactly by the poses ({traj.yaw_rate / self.FPS:.4g} deg per frame yaw, "
            f"{traj.pitch_rate / self.FPS:.4g} pitch; the letter DSL turns {DSL_DEG} deg per frame)",
            f"the whole clip ({F} frames) is one bidirectional stage-1 call: the pipeline's default is 161 frames and "
            "quality and memory at longer clips are not verified here",
        ]
        if a["refiner"]:
            caveats.append(f"stage 2 (SanaWMLTX2Refiner from {a['refiner']}) refines the stage-1 latents chunk by "
                           f"chunk; frame 0 keeps the stage-1 decode of the sink, as upstream never refines the sink")
        else:
            caveats.append("stage 2 (SanaWMLTX2Refiner) is not run: frames are the stage-1 decode")
        if F != n + 1:
            caveats.append(f"{n + 1} frames rounded up to {F} (8k+1): the last {F - n - 1} frames hold the final pose")
        if (self.width, self.height) != (W, H):
            caveats.append(f"{self.width}x{self.height} is not the trained 1280x704 (pipeline_sana_wm.py:501-504)")
        cmd = self.command(case, call)
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=self.width,
            height=self.height, fps=self.FPS, n_frames=F, segment_frames=traj.segment_frames(self.FPS, n),
            arrays={"c2w": c2w, "intrinsics": k_case, "intrinsics_native": np.asarray(native, np.float64)},
            files={"c2w.npy": c2w32, "intrinsics.npy": k_case, "prompt.txt": case.prompt, "call.json": call,
                   "command.txt": cmd},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": [int(w0), int(h0)],
                        "native": native, "native_size": [self.width, self.height], "transform": transform,
                        "case_hfov_deg": horizontal_fov_deg(case.intrinsics[0], w0),
                        "native_hfov_deg": horizontal_fov_deg(native[0], self.width)},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_frames": F, "image": case.image, "call": call},
        )

    @staticmethod
    def command(case, call: dict) -> str:
        src = call["path"] or call["model_id"]
        return (
            "python - <<'EOF'\n"
            "import numpy as np, torch\n"
            "from PIL import Image\n"
            "from diffusers import SanaWMPipeline\n"
            "from diffusers.utils import export_to_video\n"
            "SEED = 0  # worldgate generate --seed\n"
            f"pipe = SanaWMPipeline.from_pretrained({src!r}, dtype=torch.bfloat16).to('cuda')\n"
            f"out = pipe(Image.open({(case.image or 'IMAGE')!r}).convert('RGB'), open('prompt.txt').read(),\n"
            f"           c2w=np.load('c2w.npy'), intrinsics=np.load('intrinsics.npy'), height={call['height']},\n"
            f"           width={call['width']}, num_frames={call['num_frames']}, fps={call['fps']},\n"
            f"           num_inference_steps={call['num_inference_steps']}, guidance_scale={call['guidance_scale']},\n"
            f"           negative_prompt={call['negative_prompt']!r}, "
            f"max_sequence_length={call['max_sequence_length']},\n"
            "           generator=torch.Generator('cpu').manual_seed(SEED))\n"
            f"export_to_video(out.frames, 'video.mp4', fps={call['fps']})\n"
            "EOF\n"
        )

    # ------------------------------------------------------------------------------------------------ runtime
    def load(self, device: str = "cpu", dtype: str | None = None, pipeline=None, refiner=None) -> None:
        """Load the pipeline from ``path`` or the local Hugging Face cache (never downloads), or adopt ``pipeline``;
        likewise stage 2 from ``refiner=DIR`` (model arg) or adopt ``refiner``."""
        self.device = device
        if refiner is not None:
            self.refiner = refiner
        if self.refiner is None and self.model_args["refiner"]:
            self.refiner = self._load_refiner(self.model_args["refiner"], dtype)
        if self.refiner is not None:
            self.refiner.to(device)
        if pipeline is not None:
            self.pipe = pipeline
        if self.pipe is not None:  # injected (tests): keep its dtype, only place it
            self.pipe.to(device)
            return
        try:
            import torch
            from diffusers import SanaWMPipeline
        except ImportError as e:
            raise AdapterError(f"sana-wm needs diffusers>=0.42.1 with SanaWMPipeline ({e}); install it with "
                               "pip install 'worldgate[sana]'") from None
        dtype = dtype or self.model_args["dtype"] or ("bfloat16" if str(device).startswith("cuda") else "float32")
        torch_dtype = getattr(torch, str(dtype).replace("torch.", ""), None)
        if not isinstance(torch_dtype, torch.dtype):
            raise AdapterError(f"sana-wm: unknown dtype {dtype!r}; use bfloat16, float16 or float32")
        path, model_id = self.model_args["path"], self.model_args["model_id"]
        src = path or model_id
        try:
            self.pipe = SanaWMPipeline.from_pretrained(src, dtype=torch_dtype, local_files_only=True)
        except (OSError, ValueError) as e:  # offline cache miss, or not a folder
            where = f"the folder {path!r}" if path else f"the local Hugging Face cache ({model_id})"
            raise AdapterError(
                f"sana-wm: no SANA-WM weights in {where} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). "
                f"Fetch them with: hf download {model_id} (huggingface_hub >= 1; older: huggingface-cli download), or pass "
                f"path=DIR to a SanaWMPipeline.save_pretrained folder. worldgate never downloads weights itself."
            ) from None
        self.pipe.to(device)

    def _load_refiner(self, path: str, dtype: str | None):
        try:
            import torch
            from diffusers.pipelines.sana_wm.refiner import SanaWMLTX2Refiner
        except ImportError as e:
            raise AdapterError(f"sana-wm stage 2 needs diffusers>=0.42.1 with SanaWMLTX2Refiner ({e}); install it with "
                               "pip install 'worldgate[sana]'") from None
        name = dtype or self.model_args["dtype"] or "float32"
        try:
            return SanaWMLTX2Refiner.from_pretrained(path, dtype=getattr(torch, str(name).replace("torch.", "")),
                                                     local_files_only=True)
        except (OSError, ValueError) as e:
            raise AdapterError(f"sana-wm: refiner={path!r} is not a SanaWMLTX2Refiner.save_pretrained folder "
                               f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). Build it from the "
                               f"SANA-WM stage-2 release (refiner transformer, LTX-2 connectors, Gemma-3) and save it "
                               f"there; worldgate never downloads weights itself.") from None

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0) -> Iterator[Chunk]:
        if self.pipe is None:
            raise AdapterError("sana-wm: call load() first (or set adapter.pipe / load(pipeline=...))")
        policy = None if context in (None, "full", "full_kv") else context
        if policy is not None and self.refiner is None:
            raise AdapterError(f"sana-wm: a context policy ({getattr(policy, 'name', policy)!r}) acts on the stage-2 "
                               f"refiner's KV cache, and no refiner is loaded (stage 1 is one bidirectional call): "
                               f"pass --model-args refiner=DIR")
        import torch

        call = plan.extra["call"]
        image_path = plan.extra.get("image")
        if not image_path:
            raise AdapterError(f"sana-wm is image-conditioned: case {plan.case_id} has no image")
        with Image.open(image_path) as im:
            image = im.convert("RGB")
        expect = tuple(plan.intrinsics["case_image_size"])
        if image.size != expect:
            raise AdapterError(f"case {plan.case_id}: image {image_path} is {image.size[0]}x{image.size[1]} but its "
                               f"intrinsics refer to {expect[0]}x{expect[1]}")
        out = self.pipe(
            image, plan.prompt, c2w=plan.files["c2w.npy"], intrinsics=plan.files["intrinsics.npy"],
            height=call["height"], width=call["width"], num_frames=call["num_frames"], fps=call["fps"],
            num_inference_steps=call["num_inference_steps"], guidance_scale=call["guidance_scale"],
            negative_prompt=call["negative_prompt"], max_sequence_length=call["max_sequence_length"],
            generator=torch.Generator("cpu").manual_seed(int(seed)), output_type="np" if self.refiner is None else "latent",
        )
        log = None
        if self.refiner is None:
            frames = np.asarray(out.frames)  # (T, H, W, 3) float in [0, 1] (P:543-545)
        else:  # stage 2 over the stage-1 latent (P:642-646), decoded as stage 1 decodes (P:648-654)
            gen = torch.Generator("cpu").manual_seed(int(seed))
            if policy is None:  # upstream's own recipe and trim (kv_max_frames 11)
                lat = self.refiner(out.latent, plan.prompt, fps=float(plan.fps), generator=gen, output_type="latent")
            else:
                lat, log = refine_with_context(self.refiner, out.latent, plan.prompt, fps=float(plan.fps),
                                               c2w=plan.arrays["c2w"], policy=policy, generator=gen)
            with torch.no_grad():
                decoded = self.pipe._decode_latents(lat)
                frames = np.asarray(self.pipe.video_processor.postprocess_video(decoded, output_type="np")[0])
        if frames.shape != (plan.n_frames, plan.height, plan.width, 3):
            raise AdapterError(f"sana-wm returned frames of shape {frames.shape}, expected "
                               f"({plan.n_frames}, {plan.height}, {plan.width}, 3)")
        frames = (np.clip(frames, 0.0, 1.0) * 255.0).round().astype(np.uint8)
        if log is None:
            yield Chunk(start=0, frames=frames, extra={"seed": int(seed)})
            return
        for row in log:  # one chunk per stage-2 chunk, with the ids its cache held
            p0, p1 = row["pixels"]
            extra = {"seed": int(seed), "latent_frames": row["latent"], "history_tokens": row["history_tokens"],
                     "kv_bytes": row.get("kv_bytes", 0)}
            yield Chunk(start=p0, frames=frames[p0:p1], context_ids=row["held"], extra=extra)
