"""HY-WorldPlay / HY-World 1.5 (Tencent-Hunyuan/HY-WorldPlay): one c2w pose and K per latent, 480x832 / 24 fps.

Conventions this adapter relies on, read at commit da2d0c26eb0edb647f56e164ffd966490eb75282 (docs/probes/hy-worldplay.md;
G = hyvideo/generate.py, P = hyvideo/pipelines/worldplay_video_pipeline.py):

- ``--pose pose.json``: a path ending in ``.json`` is loaded as a dict (G:189-195). Entries are taken in the file's
  key order (``list(pose_json.keys())``, G:203, 213), so the JSON is written with keys "0", "1", ... in numeric
  order (never key-sorted: "10" would come before "2"). One entry per **latent**: the count must equal
  ``(video_length - 1) // 4 + 1`` (G:203-208, 743). Entry ``{"extrinsic": c2w 4x4, "K": 3x3 pixels}``; the code
  inverts the extrinsic into the w2c "viewmats" the model reads (G:214-216; hyvideo/prope/camera_rope.py:146-150).
- Latent i carries the pose of video frame 4 i (latent 0 = frame 0), as in training
  (trainer/dataset/ar_camera_hunyuan_w_mem_dataset.py:501); so poses are sampled at t = 4 i / 24 s.
- Axes: OpenCV (x right, y down, z forward); yaw right = +angle about the camera y axis, pitch up = +angle about x
  (hyvideo/generate_custom_trajectory.py:5-12, 35-58; G:122-137) - the same as worldgate's poses, so the trajectory's
  c2w is written unchanged. No re-basing happens at inference (camera_center_normalization is defined at G:316-320
  but never called): pose "0" is the identity, as worldgate's frame 0 is.
- The discrete action label is derived from consecutive poses (G:227-281): translation direction within 60 deg of
  +z / -z / +x / -x (threshold 1e-4), euler 'xyz' angle > 0.05 deg; label = trans * 9 + rot (W 9, S 18, D 27, A 36;
  yaw right 1, left 2, pitch up 3, down 4). ``arrays["action"]`` reproduces it from the written poses as a check.
- Translation has no metric scale in the code: the string path moves 0.08 units and turns 3 deg per latent
  (G:80-82). This adapter writes the trajectory's metres unchanged (``pose_scale`` model arg, default 1.0), i.e.
  1.4 m/s -> 0.2333 per latent, 2.9x the string path's step; recorded as a caveat.
- Intrinsics (regime 4): K is normalised as fx / (2 cx), fy / (2 cy) (G:217-221), i.e. the image size is inferred
  from the principal point, and PRoPE then zeroes cx, cy (hyvideo/prope/camera_rope.py:136-143). The image is
  resized to cover ``--height 480 --width 832`` with scale max(832 / w, 480 / h), sizes ``int(round(.))``, LANCZOS,
  then ``CenterCrop((480, 832))`` (P:910-939; user height/width override the bucket at P:1696-1697 and reach
  P:1829-1831). So fx, fy are scaled by the integer resize ratios, the crop does not change them, and K is written
  with cx = 416, cy = 240 exactly (the principal-point offset the crop leaves cannot be expressed; recorded). The
  aspect policy is therefore **crop**. (The semantic vision encoder sees a bucket-size crop, P:760-768; it carries
  no geometry.)
- Frames: (video_length - 1) % 4 == 0 and latents % 4 == 0 (G:701-703); ``--model_type ar`` runs 4-latent chunks
  (G:764): the first chunk is 13 frames (the image's latent + 3), later ones 16. The writer is
  ``imageio.mimwrite(..., fps=24)`` (G:292). A 20 s key is 480 frames = 120 latents; a case of n frames gets the
  smallest L, a multiple of 4, with 4 (L - 1) >= n (the end pose lands on a latent), video_length = 4 L - 3; the
  tail latents hold the final pose. WorldMark keys are 120 latents each; K keys -> L = 120 K + 4.
- Memory: each AR chunk rebuilds its KV from 12 recent latents + the first chunk + FOV-retrieved 4-latent clips
  (P:1125-1133; hyvideo/utils/retrieval_context.py:216-314): context policy "fov".
- Output: ``--output_path OUT`` -> ``OUT/gen.mp4`` (G:774-797; ``plan.extra["output_video"]``; ``--sr false`` so no
  gen_sr.mp4), written by rank 0 with ``imageio.mimwrite(fps=24)`` (G:286-292), 832x480, video_length = 4L - 3 frames.
- Several GPUs for one case (``gpus=N``): the launcher is ``torchrun --nproc_per_node=$N_INFERENCE_GPU
  hyvideo/generate.py ...`` (run.sh:24-26, 50-66, 69-88; README.md:250 "Number of GPUs for parallel inference"); the
  sequence-parallel degree is the world size itself (``initialize_parallel_state(sp=WORLD_SIZE)``, G:38;
  hyvideo/commons/parallel_states.py:24-45), no other flag. Ulysses all-to-all splits the attention heads over the
  ranks and asserts ``heads % N == 0`` (hyvideo/utils/communications.py:64-69); the HunyuanVideo-1.5 transformer has
  16 heads (``heads_num`` of its transformer config.json, read from MODEL_PATH - not in this repository), so gpus=N in
  {1, 2, 4, 8, 16} (run.sh:25: "The maximum number recommended is 8"); other N are refused. gpus=1 is a 1-process
  torchrun: generate.py builds a CUDA device mesh at import (G:38; parallel_states.py:37-43), so it always needs the
  launcher's environment.
- Setup: commit da2d0c26eb0edb647f56e164ffd966490eb75282, the repository root; ``requirements.txt`` (README.md:129;
  attention kernels README.md:131-155 optional). Weights: the command reads ``--action_ckpt`` =
  ``tencent/HY-WorldPlay`` ``ar_model/diffusion_pytorch_model.safetensors`` (README.md:209, 233) given as
  ``ar_action_model_path=``, and ``--model_path`` = a HunyuanVideo-1.5 download (``tencent/HunyuanVideo-1.5``: vae,
  scheduler, transformer/480p_i2v, text encoders; README.md:169; download_models.py:61-245) given as
  ``model_path=``; ``ckpt`` is not read by the command.
"""

from __future__ import annotations

import json
import math

import numpy as np

from .base import AdapterError, AdapterInfo, NativeInputs, horizontal_fov_deg, image_arg
from .repo import RepoAdapter, RepoSpec, torchrun

H, W = 480, 832
FPS = 24.0
FRAMES_PER_LATENT = 4
HEADS = 16  # heads_num of the HunyuanVideo-1.5 transformer config (MODEL_PATH/transformer/480p_i2v/config.json)
#: gpus=N Ulysses can split the heads over (hyvideo/utils/communications.py:64-69)
SP_SIZES = tuple(n for n in range(1, HEADS + 1) if HEADS % n == 0)
# one-hot [a, b, c, d] -> index (G:41-51): single 1..4, pairs 5..8
_MAPPING = {(0, 0, 0, 0): 0, (1, 0, 0, 0): 1, (0, 1, 0, 0): 2, (0, 0, 1, 0): 3, (0, 0, 0, 1): 4,
            (1, 0, 1, 0): 5, (1, 0, 0, 1): 6, (0, 1, 1, 0): 7, (0, 1, 0, 1): 8}


def crop_transform(w0: int, h0: int) -> dict:
    """The model's resize-to-cover + centre crop to 832x480 (P:919-935; torchvision CenterCrop rounds the offset)."""
    s = max(W / w0, H / h0)
    rw, rh = int(round(w0 * s)), int(round(h0 * s))
    left, top = int(round((rw - W) / 2.0)), int(round((rh - H) / 2.0))
    return {"policy": "crop", "resize_to": [rw, rh], "scale_xy": [rw / w0, rh / h0], "crop_left_top": [left, top]}


def action_labels(c2w: np.ndarray) -> np.ndarray:
    """The model's per-latent action label from consecutive c2w (G:227-281), latent 0 is 0 (batched over latents)."""
    out = np.zeros(len(c2w), np.int64)
    if len(c2w) < 2:
        return out
    rel = np.linalg.inv(c2w[:-1]) @ c2w[1:]
    t = rel[:, :3, 3]
    nrm = np.linalg.norm(t, axis=1)
    moving = nrm > 1e-4
    ang = np.degrees(np.arccos(np.clip(t / np.where(moving, nrm, 1.0)[:, None], -1.0, 1.0)))
    fwd, back = moving & (ang[:, 2] < 60), moving & ~(ang[:, 2] < 60) & (ang[:, 2] > 120)
    right, left = moving & (ang[:, 0] < 60), moving & ~(ang[:, 0] < 60) & (ang[:, 0] > 120)
    R = rel[:, :3, :3]  # extrinsic 'xyz' euler: R = Rz(c) Ry(b) Rx(a)
    ax = np.degrees(np.arctan2(R[:, 2, 1], R[:, 2, 2]))
    by = np.degrees(np.arcsin(np.clip(-R[:, 2, 0], -1.0, 1.0)))
    yr, yl = by > 5e-2, by < -5e-2
    pu, pd = ax > 5e-2, ax < -5e-2
    for i in range(len(rel)):
        tr = (int(fwd[i]), int(back[i]), int(right[i]), int(left[i]))
        rot = (int(yr[i]), int(yl[i]), int(pu[i]), int(pd[i]))
        out[i + 1] = _MAPPING[tr] * 9 + _MAPPING[rot]
    return out


class HYWorldPlay(RepoAdapter):
    MODEL_ARGS = RepoAdapter.MODEL_ARGS + ("pose_scale",)  # read by plan (issue 29.5: other keys are refused)
    repo_spec = RepoSpec(
        clone="https://github.com/Tencent-Hunyuan/HY-WorldPlay",
        entry="hyvideo/generate.py",
        hf_id="tencent/HY-WorldPlay",
        commit="da2d0c26eb0edb647f56e164ffd966490eb75282", subdir="", requirements=("requirements.txt",),
        weights_patterns=("ar_model/*",),
    )
    context_note = ('its retrieval is fixed at the call site (memory_frames=20, temporal_context_size=12, '
                    'pred_latent_size=4: worldplay_video_pipeline.py:1125-1133, 1330-1338; every earlier latent while '
                    'there are <= 20, then the first chunk, the 12 latest and FoV-ranked 4-latent clips, '
                    'retrieval_context.py:239-306), and no flag of hyvideo/generate.py:830-1057 sets it')
    multi_gpu = ("torchrun --nproc_per_node=N hyvideo/generate.py ... (run.sh:24-26, 69-88); sequence parallel over "
                 "the world size (hyvideo/generate.py:38); N must divide the 16 heads "
                 "(hyvideo/utils/communications.py:64-69)")
    info = AdapterInfo(
        name="hy-worldplay", version="0.1", width=W, height=H, fps=FPS,
        fps_source="writer: imageio.mimwrite(fps=24) (hyvideo/generate.py:292); README '24 FPS'",
        chunk_frames=16, first_chunk_frames=13, duration_unit="latents (x4 frames), AR: latents % 4 == 0, 4L-3 frames",
        control="poses (JSON per latent: extrinsic c2w + K)",
        pose_convention="c2w OpenCV per latent (w2c inside), latent 0 identity, metres x pose_scale (no metric scale)",
        intrinsics_regime=4, aspect_policy="crop", context_policies=("fov",),
        hf_ids=("tencent/HY-WorldPlay", "tencent/HunyuanVideo-1.5"),
        repository="https://github.com/Tencent-Hunyuan/HY-WorldPlay",
        licence="Tencent HY-WorldPlay Community License (excludes EU, UK, South Korea)", integration="A",
        notes="--model_type ar (4-latent chunks); pose.json key order is the latent order; K must be centred",
    )
    FPS = FPS

    def latent_count(self, n: int) -> int:
        """The smallest multiple of 4, L, with 4 (L - 1) >= n (latent L - 1 carries frame n, the end pose)."""
        return 4 * math.ceil((math.ceil(n / FRAMES_PER_LATENT) + 1) / 4)

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        n = traj.n_frames(self.FPS)
        L = self.latent_count(n)
        F = 4 * L - 3
        scale = float(self.model_args.get("pose_scale", 1.0))
        c2w = traj.poses(self.FPS / FRAMES_PER_LATENT, L)  # latent i <- frame 4 i (t = 4 i / 24); tail holds
        c2w[:, :3, 3] *= scale
        if case.intrinsics is None or case.image_size is None:
            raise AdapterError(f"hy-worldplay needs the case's intrinsics and image size (regime 4); case {case.id} has "
                               "none")
        fx, fy, cx, cy = (float(v) for v in case.intrinsics)
        w0, h0 = case.image_size
        tf = crop_transform(w0, h0)
        sx, sy = tf["scale_xy"]
        left, top = tf["crop_left_top"]
        nfx, nfy = fx * sx, fy * sy
        pp = [cx * sx - left, cy * sy - top]  # where the case's principal point lands after the crop
        K = np.array([[nfx, 0.0, W / 2], [0.0, nfy, H / 2], [0.0, 0.0, 1.0]])
        # one line per latent, keys in numeric order (the model reads the file's key order; never sort_keys)
        pose_text = "{\n" + ",\n".join(
            f'"{i}": ' + json.dumps({"extrinsic": c2w[i].tolist(), "K": K.tolist()}) for i in range(L)) + "\n}\n"
        caveats = [
            f"translation is written in the trajectory's metres x pose_scale {scale:g} ({scale * traj.speed * 4 / 24:.4g} "
            "per latent at the trajectory speed); the model has no metric scale and its string path moves 0.08 "
            "units and turns 3 deg per latent",
            f"principal point after the crop is ({pp[0]:.2f}, {pp[1]:.2f}) px; K is written centred at (416, 240) "
            "because the model infers the image size from it and PRoPE ignores cx, cy",
        ]
        if 4 * (L - 1) != n:
            caveats.append(f"{n + 1} frames rounded up to {F} (4L-3, L = {L} a multiple of 4): the last "
                           f"{L - 1 - math.ceil(n / 4)} latents hold the final pose")
        gpus = self.gpus()
        if gpus not in SP_SIZES:
            raise AdapterError(f"hy-worldplay: gpus={gpus} cannot run: its sequence parallel over all processes splits "
                               f"the transformer's {HEADS} attention heads evenly (hyvideo/utils/communications.py:"
                               f"64-69); use gpus= one of {', '.join(map(str, SP_SIZES))}")
        cmd = torchrun(gpus, f"hyvideo/generate.py --prompt \"$(cat prompt.txt)\" --image_path "
                       f"{image_arg(case)} --resolution 480p --aspect_ratio 16:9 --video_length {F} --seed SEED "
                       f"--rewrite false --sr false --pose pose.json --output_path OUT --model_path MODEL_PATH "
                       f"--action_ckpt AR_ACTION_MODEL_PATH --few_step false --width {W} --height {H} --model_type ar")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=self.FPS, n_frames=F, segment_frames=[(int(a), int(b)) for a, b in traj.segment_frames(self.FPS, n)],
            arrays={"c2w": c2w, "K": K, "latent_frame": np.arange(L, dtype=np.int64) * 4, "action": action_labels(c2w)},
            files={"pose.json": pose_text, "prompt.txt": case.prompt, "command.txt": cmd + "\n"},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": list(case.image_size),
                        "native": [nfx, nfy, W / 2, H / 2], "native_size": [W, H],
                        "native_normalised": [nfx / W, nfy / H, 0.5, 0.5],
                        "transform": {**tf, "principal_point_after_crop": pp, "principal_point_written": [W / 2, H / 2]},
                        "case_hfov_deg": horizontal_fov_deg(fx, w0), "native_hfov_deg": horizontal_fov_deg(nfx, W)},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"latents": L, "video_length": F, "model_type": "ar", "pose_scale": scale, "image": case.image,
                   "output_video": "gen.mp4"},
        )
