"""Matrix-Game 3.5 (Riemann-Dynamics/Matrix-Game-3.5, Apache-2.0): metric c2w poses + intrinsics, 704x1280 / 16 fps.

Conventions this adapter relies on, read at commit fa6d2b628ac9b0f1657dc24689536d74bfeb51da
(docs/probes/matrix-game-3.5.md):

- Camera file ``--camera camera.npz``: ``extrinsics_c2w`` (N, 4, 4) camera-to-world and ``intrinsics`` (N, 4)
  ``[fx, fy, cx, cy]`` "in pixels of the anchor image" (infer.py:16-22, 97-129; README.md:175-179), read by both
  entry points (infer_distilled.py:136-141 calls infer.build_input_workspace). The loader inverts c2w to w2c
  (diffsynth/core/data/unified_dataset.py:2035-2050); camera axes are OpenCV (x right, y down, z forward;
  frustum/frustum_handler.py:458). Translation is metric (README.md:176): Patch memory registers frames with
  Depth-Anything-3 metric depth (README.md:89-90). The distilled PRoPE compresses the w2c translation with ``logd4``
  (configs/infer_distilled.yaml:28; diffsynth/pipelines/wan_video.py:3155-3156), which is not translation-invariant,
  so pose 0 is the identity (the trajectory's own frame 0).
- Frames: pose 0 is the anchor; block k generates 21 latents = 84 frames from poses [1 + 84k, 84 (k + 1)]
  (infer.py:29-31; unified_dataset.py:3653-3669); the output is the anchor latent plus 21 latents per block =
  1 + 84 K frames (examples/wanvideo/pipeline/mosaic/causal_inference.py:108-157;
  samples/distilled/suburban_street_6blocks/README.md:17-19 "505 camera poses (1 + 84 x 6) ... 505-frame"). The
  "80 frames per block" of infer.py:29 / README.md:145 is stale. Output frame i shows pose i. Poses past the end
  are clamped to the last one (unified_dataset.py:3684-3690); a file shorter than 86 poses is padded (infer.py:48,
  132-140).
- fps: the writer is ``_write_video(fps=16)`` (examples/wanvideo/pipeline/mosaic/video_io.py:5, 17-18; used at
  causal_inference.py:157); the bundled trajectories are 16 fps (samples/first_person/cases.json:11). A 20 s key is
  320 frames.
- Intrinsics (regime 4): the dataset keeps only ``fx / cx`` and ``fy / cy`` and re-centres the principal point at
  the working size 1280x704 (``normalize_and_scale_intrinsics``, unified_dataset.py:1474-1510, called with
  H_img=704, W_img=1280 at :3633-3638); PRoPE then uses ``fx / 1280``, ``fy / 704`` (wan_video.py:3157-3164). The
  anchor image is centre-cropped to at most 704x1280 and bilinear-resized to 704x1280 (unified_dataset.py:167-202):
  images larger than 1280x704 are cropped (narrower view), smaller ones stretched. The model itself does not
  account for that crop, so this adapter writes K **in pixels of the 704x1280 working frame**, principal point at its
  centre: ``[fx * sx, fy * sy, 640, 352]`` with ``sx = 1280 / crop_w``, ``sy = 704 / crop_h``. Only the ratios are
  read, so the model then sees exactly the normalised focal of the image it generates from.
- Prompt: ``--prompt-file`` (infer.py:157-171; infer_distilled.py:33-36).
- Variants (``variant=`` model argument): ``distilled`` (default; infer_distilled.py, 3-step causal, rolling KV of
  1 + 6 chunks of 3 latents with an advancing anchor, pose-nearest dynamic context and projection-IoU mosaic memory;
  configs/infer_distilled.yaml:11-38; examples/wanvideo/pipeline/mosaic/causal_rollout.py:185-230). ``num_blocks``
  is only settable in the YAML config (infer_distilled.py:122, 138; distilled_config.py:14-55, 111-130: unset keys
  take the dataclass defaults, equal to configs/infer_distilled.yaml), so the plan writes ``distilled.yaml``
  (``profile`` model argument: ``standard`` or ``sink-anchor-context``, distilled_config.py:11, 140-146). The
  checkpoint is first-person only (README.md:99). ``base`` (infer.py, 25 steps, CFG 5, ``--num-blocks``,
  first- and third-person checkpoints); its result.mp4 has the frame index drawn on every frame
  (examples/wanvideo/pipeline/mosaic/validation.py:2196-2199; video_io.py:1458-1482).
- Output: distilled ``--output OUT/result.mp4`` (an .mp4 path, infer_distilled.py:43, 64-65); base ``--output OUT
  --name <case id>`` -> ``OUT/<first|third>_person/<case id>/result.mp4`` beside ``memory_visualization.mp4``
  (infer.py:255-258, 361-380). Both are declared in ``plan.extra["output_video"]`` (the base folder holds two mp4s).
  ``_write_video(fps=16)``, 1280x704, 1 + 84 K frames.
- Several GPUs for one case: none. "One NVIDIA GPU" (README.md:36); both entry points launch their worker through
  ``accelerate launch`` with one process (configs/accelerate_inference_1gpu.yaml: ``num_processes: 1``,
  ``distributed_type: 'NO'``, infer_distilled.py:21, 94-100; ``--num_processes 1``, infer.py:304-307). ``gpus>1`` is
  refused.
- Setup: commit fa6d2b628ac9b0f1657dc24689536d74bfeb51da, the repository root; torch (cu128) then
  ``requirements.txt`` (README.md:52-59). Weights (README.md:74-91, ``ckpt`` = its ``checkpoints/`` folder): the
  distilled command reads ``first-person.safetensors`` of ``RiemannDynamics/Matrix-Game-3.5-Distilled`` downloaded
  to ``CKPT/Matrix-Game-3.5-Distilled`` (README.md:81; the README's ``distilled-first-person.safetensors`` is a
  symlink to it, :82), base ``CKPT/Matrix-Game-3.5-Base/<first|third>-person.safetensors`` (:76-78), both with
  ``CKPT/Wan2.2-TI2V-5B`` and ``CKPT/DA3NESTED-GIANT-LARGE-1.1`` (:87, 90; other repositories).
- Context policies (``--context``; a worldgate chunk here is an 84-frame block, the first 85 with the anchor): the
  distilled rolling KV cache is trimmed after every 3-latent model chunk to ``1 + (context_chunks - 1) * 3`` latents,
  keeping an *advancing* boundary anchor (the last latent of the oldest evicted chunk), absolute RoPE kept
  (examples/wanvideo/pipeline/mosaic/causal_rollout.py:185-230, 338-356, 2160-2171; ``context_chunks``
  configs/infer_distilled.yaml:14, distilled_config.py:26, causal_config.py:96). ``full_kv`` (any budget is moot) is
  ``context_chunks: 7 * num_blocks`` (every model chunk of the clip: the cache never trims before the last chunk) with
  ``dynamic_context: false`` (the pose-nearest context latent would re-add a copy of an earlier frame the full cache
  already holds; causal_config.py:101), written into ``distilled.yaml``. ``sliding_window`` is refused: the window
  slides by 3-latent chunks inside each block, so no setting holds whole earlier blocks, and it keeps no chunk-0 sink
  (the fixed-anchor switch ``causal_validation_fixed_initial_anchor`` is hard-set off, causal_config.py:124, and the
  YAML refuses unknown keys, distilled_config.py:118-121). ``fov`` is refused: the model's dynamic context ranks by
  camera distance/rotation among ``context_pose_pool_size`` candidates, not by view overlap. ``variant=base`` has no
  causal cache (one bidirectional pass per block): every policy is refused.
"""

from __future__ import annotations

import math
import shlex

import numpy as np

from .base import AdapterError, AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg, image_arg
from .repo import RepoAdapter, RepoSpec

W, H = 1280, 704
FPS = 16.0
BLOCK = 84  # frames per block: 21 latents x 4
#: the shared weights under ckpt (README.md:87-100). The tokenizer is named too: its default lookup is the checkout's
#: own checkpoints/ (infer.py:55, 61-63, 73-84), never --wan-dir, so with weights anywhere else both entry points stop
#: with "umt5-xxl tokenizer directory not found" (seen running infer_distilled.py --dry-run at fa6d2b6)
DEPS = ("--wan-dir CKPT/Wan2.2-TI2V-5B --tokenizer-dir CKPT/Wan2.2-TI2V-5B/google/umt5-xxl "
        "--da3-dir CKPT/DA3NESTED-GIANT-LARGE-1.1")
PROFILES = ("standard", "sink-anchor-context")  # distilled_config.py:11 (hiar-sde needs hiar_scales)


def crop_resize(w0: int, h0: int) -> dict:
    """The anchor image path (unified_dataset.py:167-202): centre crop to at most 1280x704, then resize to 1280x704."""
    cw, ch = min(w0, W), min(h0, H)
    left, top = max((w0 - cw) // 2, 0), max((h0 - ch) // 2, 0)
    return {"crop": {"left": left, "top": top, "width": cw, "height": ch}, "scale_xy": [W / cw, H / ch]}


class MatrixGame35(RepoAdapter):
    MODEL_ARGS = RepoAdapter.MODEL_ARGS + ("variant", "profile")  # read by plan (issue 29.5: other keys are refused)
    repo_spec = RepoSpec(
        clone="https://github.com/Riemann-Dynamics/Matrix-Game-3.5",
        entry="infer_distilled.py",
        hf_id="RiemannDynamics/Matrix-Game-3.5-Distilled",
        commit="fa6d2b628ac9b0f1657dc24689536d74bfeb51da", subdir="", requirements=("requirements.txt",),
        weights_dir="Matrix-Game-3.5-Distilled", weights_patterns=("first-person.safetensors",),
    )
    #: none: one GPU (README.md:36); accelerate launch, 1 process (infer_distilled.py:94-100, infer.py:304-307)
    multi_gpu = ""
    info = AdapterInfo(
        name="matrix-game-3.5", version="0.2", width=W, height=H, fps=FPS,
        fps_source="writer: _write_video(fps=16) (examples/wanvideo/pipeline/mosaic/video_io.py:5; "
                   "causal_inference.py:157)",
        chunk_frames=BLOCK, first_chunk_frames=1 + BLOCK, duration_unit="blocks of 84 frames (1 + 84 K poses)",
        control="poses", pose_convention="c2w OpenCV, metres, pose 0 = identity (the anchor)", intrinsics_regime=4,
        aspect_policy="crop+stretch", context_policies=("full_kv",),
        hf_ids=("RiemannDynamics/Matrix-Game-3.5-Distilled", "RiemannDynamics/Matrix-Game-3.5-Base",
                "Wan-AI/Wan2.2-TI2V-5B", "depth-anything/DA3NESTED-GIANT-LARGE-1.1"),
        repository="https://github.com/Riemann-Dynamics/Matrix-Game-3.5", licence="Apache-2.0", integration="A",
        notes="distilled: rolling KV window (profile standard) or fixed anchor sink (sink-anchor-context), "
              "pose-nearest dynamic context + projection-IoU mosaic memory; base: bidirectional per block; "
              "--context full_kv (distilled) sets context_chunks 7K and dynamic_context false in distilled.yaml; "
              "sliding_window and fov are refused (no exact setting)",
    )
    FPS = FPS

    def plan(self, case) -> NativeInputs:
        variant = self.model_args.get("variant", "distilled")
        profile = self.model_args.get("profile", "standard")
        if variant not in ("distilled", "base"):
            raise AdapterError(f"matrix-game-3.5: variant must be 'distilled' or 'base', got {variant!r}")
        if profile not in PROFILES:
            raise AdapterError(f"matrix-game-3.5: profile must be one of {PROFILES}, got {profile!r}")
        self.gpus()  # gpus>1 is refused: one process on one GPU
        if case.intrinsics is None or case.image_size is None:
            raise AdapterError(f"matrix-game-3.5 needs the case's intrinsics and image size (regime 4); "
                               f"case {case.id} has none")
        traj = case.trajectory
        n = traj.n_frames(self.FPS)
        if n < 1:
            raise UnsupportedMotion(f"case {case.id}: the trajectory is shorter than one frame at 16 fps")
        blocks = math.ceil(n / BLOCK)  # the smallest K with 1 + 84 K >= n + 1
        N = 1 + BLOCK * blocks
        c2w = traj.poses(self.FPS, N).astype(np.float32)  # frames past the end hold the final pose
        fx, fy, cx, cy = case.intrinsics
        w0, h0 = case.image_size
        tr = crop_resize(w0, h0)
        sx, sy = tr["scale_xy"]
        left, top = tr["crop"]["left"], tr["crop"]["top"]
        k = np.array([fx * sx, fy * sy, W / 2, H / 2], np.float32)
        intr = np.repeat(k[None], N, axis=0)
        pp = [(cx - left) * sx, (cy - top) * sy]  # the case's principal point in the working frame
        caveats = ["translation is in metres: the model registers frames with Depth-Anything-3 metric depth, so "
                   "the scene scale is the depth model's"]
        if max(abs(pp[0] - W / 2), abs(pp[1] - H / 2)) >= 0.005:
            caveats.append(f"principal point offset ({pp[0] - W / 2:+.2f}, {pp[1] - H / 2:+.2f}) px at 1280x704 is "
                           "dropped: the model re-centres it (unified_dataset.py:1489-1503)")
        if N != n + 1:
            caveats.append(f"{n + 1} frames rounded up to {N} (1 + 84 K): the last {N - n - 1} frames hold the "
                           "final pose")
        if tr["crop"]["width"] < w0 or tr["crop"]["height"] < h0:
            caveats.append(f"the {w0}x{h0} image is centre-cropped to {tr['crop']['width']}x{tr['crop']['height']} "
                           "before resizing: the model sees a narrower view (intrinsics follow the crop)")
        if sx != sy:
            caveats.append(f"the image is stretched by ({sx:.4f}, {sy:.4f}) to 1280x704 (no aspect-preserving "
                           "resize upstream)")
        files = {"camera.npz": {"extrinsics_c2w": c2w, "intrinsics": intr}, "prompt.txt": case.prompt}
        if variant == "distilled":
            if case.view == "third":
                caveats.append("third-person case run with the first-person distilled checkpoint (the only "
                               "distilled one); variant=base uses the third-person checkpoint")
            # infer_distilled.py takes its seed from the config only (distilled_config.py:20, 111-130; default 3407)
            files["distilled.yaml"] = f"profile: {profile}\nnum_blocks: {blocks}\nseed: SEED\n"
            cmd = (f"python infer_distilled.py --config distilled.yaml --checkpoint "
                   f"CKPT/Matrix-Game-3.5-Distilled/first-person.safetensors {DEPS} --image {image_arg(case)} "
                   f"--camera camera.npz --camera-convention c2w --prompt-file prompt.txt --output OUT/result.mp4")
        else:
            caveats.append("base result.mp4 carries the frame index drawn top-left on every frame "
                           "(validation.py:2198): crop it or read the raw history before scoring")
            cmd = (f"python infer.py --person {case.view} --ckpt "
                   f"CKPT/Matrix-Game-3.5-Base/{case.view}-person.safetensors {DEPS} "
                   f"--image {image_arg(case)} --camera camera.npz --camera-convention c2w --prompt-file prompt.txt "
                   f"--num-blocks {blocks} --seed SEED --output OUT --name {shlex.quote(case.id)}")
        files["command.txt"] = cmd + "\n"
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=self.FPS, n_frames=N, segment_frames=[(int(a), int(b)) for a, b in traj.segment_frames(self.FPS, n)],
            arrays={"extrinsics_c2w": c2w, "intrinsics": intr}, files=files,
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": [w0, h0],
                        "native": k.tolist(), "native_size": [W, H],
                        "transform": {"policy": "centre crop to at most 1280x704, then resize to 1280x704",
                                      **tr, "principal_point": "set to the working-frame centre (the model keeps "
                                      "only fx/cx, fy/cy)", "case_principal_point_native": pp},
                        "case_hfov_deg": horizontal_fov_deg(fx, w0), "native_hfov_deg": horizontal_fov_deg(float(k[0]), W),
                        "native_vfov_deg": horizontal_fov_deg(float(k[1]), H)},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"variant": variant, "profile": profile if variant == "distilled" else None, "num_blocks": blocks,
                   "image": case.image, "view": case.view,
                   "seed_files": ["distilled.yaml"] if variant == "distilled" else [],
                   # base: OUT/<first|third>_person/<name>/result.mp4 beside memory_visualization.mp4 (infer.py:256-258)
                   "output_video": ("result.mp4" if variant == "distilled"
                                    else f"{case.view}_person/{case.id}/result.mp4")},
        )


    # ------------------------------------------------------------------------------------ context policies
    def context_support(self, name: str) -> str | None:
        """full_kv on the distilled path (its own ``context_chunks``); sliding_window, fov and the base path: no."""
        if self.model_args.get("variant", "distilled") == "base":
            return ("matrix-game-3.5 variant=base runs each 84-frame block as one bidirectional pass (infer.py) "
                    f"with no causal KV cache to bound: context policy {name!r} cannot be applied (drop --context, "
                    "or use the distilled variant for full_kv)")
        if name in self.info.context_policies:
            return None
        if name == "sliding_window":
            return ("matrix-game-3.5 cannot apply context policy 'sliding_window' exactly: its rolling KV window is "
                    "counted in 3-latent model chunks and slides after each of them, inside the 84-frame blocks that "
                    "are worldgate's chunks here, and keeps an advancing boundary anchor instead of a chunk-0 sink "
                    "(examples/wanvideo/pipeline/mosaic/causal_rollout.py:185-230, 2166-2171); the fixed-anchor switch "
                    "is hard-set off (causal_config.py:124) and the YAML refuses other keys (distilled_config.py:"
                    "118-121) (it supports: full_kv)")
        if name == "fov":
            return ("matrix-game-3.5 cannot apply context policy 'fov': its only retrieval is the dynamic context's "
                    "pose-nearest latent (camera distance + rotation among context_pose_pool_size candidates, "
                    "configs/infer_distilled.yaml:19-24; causal_memory.py:618-756), not field-of-view overlap, "
                    "beside a fixed recency window (it supports: full_kv)")
        return super().context_support(name)

    def with_context(self, plan, policy):
        """The distilled plan under ``full_kv``: ``context_chunks`` = every model chunk of the clip and
        ``dynamic_context: false`` appended to ``distilled.yaml``, the policy in ``context.json``."""
        if policy is None:
            return plan
        plan = self.context_copy(plan, policy)
        blocks = int(plan.extra["num_blocks"])
        chunks = blocks * (21 // 3)  # latent_window_size / chunk_size per block (configs/infer_distilled.yaml:11-13)
        keys = {"context_chunks": chunks, "dynamic_context": False}
        yml = plan.files["distilled.yaml"]
        if any(f"\n{k}:" in "\n" + yml for k in keys):
            raise AdapterError(f"matrix-game-3.5: distilled.yaml already sets one of {sorted(keys)}")
        plan.files["distilled.yaml"] = yml + f"context_chunks: {chunks}\ndynamic_context: false\n"
        desc = policy.describe()
        plan.files["context.json"] = {
            **desc, "distilled_yaml": keys, "model_chunks": chunks, "model_chunk_latents": 3,
            "source": "configs/infer_distilled.yaml:14, 19; causal_config.py:96, 101; "
                      "examples/wanvideo/pipeline/mosaic/causal_rollout.py:185-230, 338-356, 2166-2171"}
        plan.extra["context"] = {**desc, "distilled_yaml": keys}
        plan.caveats.append(
            f"context policy full_kv: context_chunks {chunks} (all {blocks} x 7 model chunks; the release runs 7) and "
            "dynamic_context false in distilled.yaml, so the rolling cache never trims and holds each earlier chunk "
            "once, at absolute RoPE positions; the projection-IoU mosaic memory (a reprojection of earlier frames, "
            "a separate input) stays on")
        return plan

    def rollout(self, plan, context=None, seed: int = 0):
        if context is None:
            yield from super().rollout(plan, None, seed)
            return
        why = self.context_support(getattr(context, "name", str(context)))
        if why:
            raise AdapterError(why)
        yield from super().rollout(self.planned_for(plan, context), None, seed)
