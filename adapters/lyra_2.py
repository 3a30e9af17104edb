"""Lyra 2.0 (nv-tlabs/lyra, Lyra-2/; code Apache-2.0, weights NVIDIA research licence): world-to-camera poses.

Conventions this adapter relies on, read at commit 9fffc9adc37004091ecf26ef03abfb3abdf4d59a (docs/probes/lyra-2.md;
CT = Lyra-2/lyra_2/_src/inference/lyra2_custom_traj_inference.py, AR = .../lyra2_ar_inference.py):

- ``--trajectory_path trajectory.npz`` with ``w2c`` (N, 4, 4) **world-to-camera**, ``intrinsics`` (N, 3, 3) pixel K,
  ``image_height`` / ``image_width`` the size K refers to (CT:69-86); K is used per frame and rescaled by
  (W / image_width, H / image_height) to the working size (CT:85-94); the image is stretched to 480x832
  (lyra2_zoomgs_inference.py:65-69). OpenCV camera axes (datasets/plucker_embed_corrupter.py:34-62).
- Translation is not normalised; its unit is the first frame's monocular depth (~metres) times ``--pose_scale``
  (default 1.1, CT:82-83, 138-139): this adapter writes metres and passes ``--pose_scale 1.0``.
- Frames: N = 1 + 80 k, asserted (AR:1472-1476); one pose per output frame; ``--fps 16`` is written and conditions
  the model (CT:493, 532-533). A 20 s key is 320 frames, so a K-key case is 1 + 320 K frames exactly.
- Captions: ``captions.json`` {frame index: caption}, each 80-frame step uses the latest one (CT:413-450).
- Output: ``--output_path`` (default ``inference/lyra2_custom_traj`` in the checkout, CT:130) -> OUT, so the video is
  ``OUT/<image stem>.mp4`` (CT:311-313, 530-534; README.md:118; ``plan.extra["output_video"]``), written by
  ``save_img_or_video(fps=--fps 16)`` (lyra_2/_ext/imaginaire/visualize/video.py:45-96), 832x480, N = 1 + 80 k
  frames. (In the checkout's default folder an existing ``<stem>.mp4`` makes the script skip the case, CT:314-316:
  two cases with the same image name would collide.)
- Several GPUs for one case: none that runs. The README runs one plain process (README.md:106-116; "Runtime on 1x H100",
  README.md:87). The script has ``--context_parallel_size`` (CT:141) but its branch starts with ``import
  imaginaire`` and ``imaginaire.utils.distributed.init()`` (CT:217-222), a top-level package this repository does not
  ship (its copy is ``lyra_2._ext.imaginaire``) nor list in requirements.txt; no README or script launches it. So
  ``gpus>1`` is refused.
- Setup: commit 9fffc9adc37004091ecf26ef03abfb3abdf4d59a, folder ``Lyra-2/``; ``requirements.txt``, installed
  ``--no-deps`` after torch 2.7.1 and a CUDA toolkit, plus MoGe, transformer_engine, flash-attn and the vendored
  vipe / depth_anything_3 packages (INSTALL.md:10-42). Weights: ``hf download nvidia/Lyra-2.0 --include
  "checkpoints/*" --local-dir .`` **inside the Lyra-2 folder** (README.md:44-52): the script reads
  ``checkpoints/model`` (``--checkpoint_dir`` default, CT:129) and the hard-coded relative
  ``checkpoints/text_encoder/negative_prompt.pt`` (CT:228-230), so the weights must sit in the checkout whatever
  ``ckpt`` says; the command does not read ``ckpt``.
"""

from __future__ import annotations

import os

import numpy as np

from .base import AdapterError, AdapterInfo, NativeInputs, horizontal_fov_deg, image_arg
from .repo import RepoAdapter, RepoSpec

H, W = 480, 832


class Lyra2(RepoAdapter):
    repo_spec = RepoSpec(clone="https://github.com/nv-tlabs/lyra (folder Lyra-2/)",
                         entry="lyra_2/_src/inference/lyra2_custom_traj_inference.py", hf_id="nvidia/Lyra-2.0",
                         commit="9fffc9adc37004091ecf26ef03abfb3abdf4d59a", subdir="Lyra-2",
                         requirements=("requirements.txt",), weights_patterns=("checkpoints/*",))
    #: none: one process (README.md:106-116); the --context_parallel_size branch imports a package the repository
    #: does not ship (lyra2_custom_traj_inference.py:217-222)
    multi_gpu = ""
    info = AdapterInfo(
        name="lyra-2", version="0.1", width=W, height=H, fps=16.0,
        fps_source="--fps 16: written by save_img_or_video and given to the model (CT:493, 532-533)",
        chunk_frames=80, first_chunk_frames=81, duration_unit="frames (1+80k)", control="poses",
        pose_convention="w2c OpenCV, metres (first-frame depth units) x --pose_scale", intrinsics_regime=4,
        aspect_policy="stretch", context_policies=(), hf_ids=("nvidia/Lyra-2.0",),
        repository="https://github.com/nv-tlabs/lyra (Lyra-2/)",
        licence="code Apache-2.0; weights NVIDIA Internal Scientific Research and Development Model License",
        integration="A", notes="FramePack history + 3D retrieval cache (no transformer KV cache)",
    )
    FPS = 16.0

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        n = traj.n_frames(self.FPS)
        N = 1 + 80 * -(-n // 80)  # the smallest 1 + 80 k >= n + 1
        c2w = traj.poses(self.FPS, N)  # padding frames hold the final pose
        w2c = np.linalg.inv(c2w).astype(np.float32)
        if case.intrinsics is None or case.image_size is None:
            raise AdapterError(f"lyra-2 needs the case's intrinsics and image size (regime 4); case {case.id} has none")
        fx, fy, cx, cy = case.intrinsics
        w0, h0 = case.image_size
        sx, sy = W / w0, H / h0  # the model stretches the image and scales K the same way (CT:85-94)
        K = np.array([[fx * sx, 0, cx * sx], [0, fy * sy, cy * sy], [0, 0, 1]], np.float32)
        Ks = np.repeat(K[None], N, axis=0)
        traj_npz = {"w2c": w2c, "intrinsics": Ks, "image_height": np.asarray(H), "image_width": np.asarray(W)}
        caveats = ["translation is in metres and relies on the model's first-frame depth being metric (MoGe/DA3)"]
        if N != n + 1:
            caveats.append(f"{n + 1} frames rounded up to {N} (1+80k): the tail holds the final pose")
        self.gpus()  # gpus>1 is refused: no working multi-GPU inference in the official code
        cmd = (f"python -m lyra_2._src.inference.lyra2_custom_traj_inference --experiment lyra2 "
               f"--input_image_path {image_arg(case)} --trajectory_path trajectory.npz --captions_path "
               f"captions.json --num_frames {N} --fps 16 --resolution 480,832 --pose_scale 1.0 --seed SEED "
               f"--output_path OUT")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=self.FPS, n_frames=N, segment_frames=traj.segment_frames(self.FPS, n),
            arrays={"w2c": w2c, "intrinsics": Ks, "c2w": c2w},
            files={"trajectory.npz": traj_npz, "captions.json": {"0": case.prompt}, "command.txt": cmd + "\n"},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": list(case.image_size),
                        "native": [float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2])],
                        "native_size": [W, H], "transform": {"policy": "stretch", "scale_xy": [sx, sy]},
                        "case_hfov_deg": horizontal_fov_deg(fx, w0), "native_hfov_deg": horizontal_fov_deg(float(K[0, 0]), W)},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_frames": N, "pose_scale": 1.0, "image": case.image,
                   **({"output_video": os.path.splitext(os.path.basename(case.image))[0] + ".mp4"}
                      if case.image else {})},
        )
