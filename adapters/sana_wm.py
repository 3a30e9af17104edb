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
  the LTX-2 VAE maps latent frame 0 to pixel frame 0 and every later latent to 8 pixel frames (P:418). The separate
  stage-2 refiner (``SanaWMLTX2Refiner``, refiner.py) is not part of ``SanaWMPipeline`` and is not run here.
- The letter DSL, for reference only (the agreement test checks the poses against it): ``action_string_to_c2w``
  (CU:82-139), w/s forward/back, a/d strafe, j/l yaw (l = right), i/k pitch (i = up), 0.05 units and 1.2 degrees
  per frame, ``R_new = rot_y(yaw) @ R @ rot_x(pitch)`` (CU:114), moves in the yaw plane (CU:116-132).

Model args: ``model_id`` (default the diffusers repo), ``path`` (a local ``save_pretrained`` folder),
``width``/``height`` (1280/704), ``num_inference_steps`` (60), ``guidance_scale`` (5.0), ``negative_prompt`` (""),
``max_sequence_length`` (300), ``dtype`` (bfloat16 on CUDA, float32 on CPU). Weights are never downloaded by
``load``: missing weights raise an :class:`AdapterError` with the command that fetches them.
"""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from .base import Adapter, AdapterError, AdapterInfo, Chunk, NativeInputs, horizontal_fov_deg

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
        intrinsics_regime=4, aspect_policy="crop", context_policies=(),
        hf_ids=(MODEL_ID, "Efficient-Large-Model/SANA-WM_bidirectional"),
        repository="https://github.com/huggingface/diffusers (pipelines/sana_wm, 0.42.1); "
                   "https://github.com/NVlabs/Sana (inference_video_scripts)",
        licence="code Apache-2.0; weights: repo tag reported as apache-2.0 (unverified), LTX-2 VAE under LTX-2 terms",
        integration="C",
        notes="diffusers SanaWMPipeline stage 1 (bidirectional, no KV cache); the stage-2 refiner is not run",
    )
    FPS = FPS

    def __init__(self, model_id: str = MODEL_ID, path: str | None = None, width: int = W, height: int = H,
                 num_inference_steps: int = 60, guidance_scale: float = 5.0, negative_prompt: str = "",
                 max_sequence_length: int = 300, dtype: str | None = None, **model_args):
        if model_args:
            raise AdapterError(f"sana-wm: unknown model args {sorted(model_args)}; known: model_id, path, width, height, "
                               "num_inference_steps, guidance_scale, negative_prompt, max_sequence_length, dtype")
        width, height = int(width), int(height)
        if width % STRIDE_S or height % STRIDE_S or width < 64 or height < 64:
            raise AdapterError(f"sana-wm: width and height must be multiples of {STRIDE_S} and >= 64 (latents are "
                               f"H//32 x W//32, pipeline_sana_wm.py:418-420); got {width}x{height}")
        super().__init__(model_id=model_id, path=path, width=width, height=height,
                         num_inference_steps=int(num_inference_steps), guidance_scale=float(guidance_scale),
                         negative_prompt=str(negative_prompt), max_sequence_length=int(max_sequence_length),
                         dtype=dtype)
        self.width, self.height = width, height
        self.pipe = None  # a SanaWMPipeline; tests may set it (or pass load(pipeline=...)) instead of loading weights
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
            "stage 2 (SanaWMLTX2Refiner) is not run: frames are the stage-1 decode",
        ]
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
    def load(self, device: str = "cpu", dtype: str | None = None, pipeline=None) -> None:
        """Load the pipeline from ``path`` or the local Hugging Face cache (never downloads), or adopt ``pipeline``."""
        self.device = device
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

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0) -> Iterator[Chunk]:
        if self.pipe is None:
            raise AdapterError("sana-wm: call load() first (or set adapter.pipe / load(pipeline=...))")
        if context not in (None, "full", "full_kv"):
            raise AdapterError(f"sana-wm stage 1 has no context policy (one bidirectional call); got {context!r}")
        import torch
        from PIL import Image

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
            generator=torch.Generator("cpu").manual_seed(int(seed)), output_type="np",
        )
        frames = np.asarray(out.frames)  # (T, H, W, 3) float in [0, 1] (P:543-545)
        if frames.shape != (plan.n_frames, plan.height, plan.width, 3):
            raise AdapterError(f"sana-wm returned frames of shape {frames.shape}, expected "
                               f"({plan.n_frames}, {plan.height}, {plan.width}, 3)")
        frames = (np.clip(frames, 0.0, 1.0) * 255.0).round().astype(np.uint8)
        yield Chunk(start=0, frames=frames, extra={"seed": int(seed)})
