"""LingBot-World (robbyant/lingbot-world, Apache-2.0): camera poses in, ~480x832-area / 16 fps video out.

Conventions this adapter relies on, read at commit a43bec7f8091c83e9b30b16b912f6fc906236fa6 (docs/probes/lingbot-world.md):

- Control: ``--action_path DIR`` holding ``poses.npy`` [N, 4, 4] float32 camera-to-world in OpenCV axes and
  ``intrinsics.npy`` [N, 4] ``[fx, fy, cx, cy]`` (README.md:121-122; wan/image2video.py:314). Only intrinsics row 0
  is used (wan/image2video.py:385-395, 405). The cam checkpoint is selected by 'cam' in ``--ckpt_dir``
  (wan/image2video.py:98-101).
- Poses are made relative to frame 0, turned into frame-to-frame deltas and every translation is divided by the
  clip's largest step (wan/utils/cam_utils.py:59-72): absolute speed is lost, rotations are kept. Pure rotations must
  carry exactly zero translation (they do here: the unified integration is exact).
- Intrinsics are read as pixels of a 480x832 (HxW) image whatever the input image is, then scaled by W/832 and H/480
  to the working size (wan/image2video.py:387-394; wan/utils/cam_utils.py:120-151); the image is bicubic-stretched to
  the working size (wan/image2video.py:438-446). Regime 4: the case's ``[fx, fy, cx, cy]`` in original-image pixels
  are scaled by (832 / w0, 480 / h0).
- Working size: **not** 480x832. ``--size 480*832`` only sets ``max_area = 480 * 832`` (generate.py:341;
  wan/configs/__init__.py:26); the size follows the input image's aspect ratio ``a = h0 / w0``:
  ``lat_h = round(sqrt(max_area * a) // 8 // 2 * 2)``, ``lat_w = round(sqrt(max_area / a) // 8 // 2 * 2)``,
  ``h, w = 8 lat_h, 8 lat_w`` (wan/image2video.py:330-339; vae_stride (4, 8, 8), patch (1, 2, 2):
  wan/configs/wan_i2v_A14B.py:16, 19). 3:2 images run at 768x512, 16:9 at 832x464, 4:3 at 720x544, 1:1 at 624x624.
  ``working_size`` re-computes it; the plan's width/height are that size, and ``intrinsics`` records the K the model
  ends up with there (the stretch keeps the field of view, so poses and the written K are unaffected).
- Launcher/CLI defaults that touch control, and what worldgate passes: ``--size`` (max area; default 1280*720,
  generate.py:112-114) -> 480*832; ``--frame_num`` (default ``cfg.frame_num``, generate.py:89-90) -> the case's
  4k+1; ``--action_path`` -> the plan's folder (poses + intrinsics only, so the cam branch runs). No cap, smoothing or speed scale exists on the pose path: translation is
  max-normalised by the model itself (wan/utils/cam_utils.py:59-72), which no flag turns off.
- Frames: ``--frame_num`` must be 4k+1 (generate.py:122); poses are truncated to ((N-1)//4)*4+1
  (wan/image2video.py:315-317). The writer uses ``sample_fps = 16`` (generate.py:359-365; wan/configs/shared_config.py:17).
  A 20 s key is 320 frames; a case of K keys is 320 K + 1 frames (the extra frame is the conditioning image's pose).
- Chunking (generate_fast.py): 3 latent frames (12 video frames) per chunk, rolling KV cache with
  ``--local_attn_size`` / ``--sink_size`` (generate_fast.py:157-166, 276).
- Output: ``--save_file`` (generate.py:155-159; default None -> a prompt-and-time name in the working directory, i.e.
  the checkout, generate.py:350-356) -> ``OUT/video.mp4`` (``plan.extra["output_video"]``), written by rank 0 with
  imageio libx264 at ``cfg.sample_fps`` = 16 (generate.py:350-365; wan/utils/utils.py:90-119), the working size
  (w x h above), ``frame_num`` = the plan's n_frames (4k+1).
- Several GPUs for one case (``gpus=N``): the README's own launch is ``torchrun --nproc_per_node=8 generate.py ...
  --dit_fsdp --t5_fsdp --ulysses_size 8`` (README.md:128, 132, 136, 141, 145; run_act2cam.sh:1-9). ``--ulysses_size``
  must equal the world size (generate.py:287-288) and divide the 40 heads (generate.py:292-293;
  wan/configs/wan_i2v_A14B.py:23); the sequence is padded to a multiple of it (wan/image2video.py:341-343). So
  gpus=N in {1, 2, 4, 5, 8, 10, 20, 40} runs ``python -m torch.distributed.run --standalone --nproc_per_node=N
  generate.py ... --dit_fsdp --t5_fsdp --ulysses_size N``; any other N is refused. gpus=1 stays the plain
  ``python generate.py`` (one process: FSDP and Ulysses are refused there, generate.py:279-285).
- Setup: commit a43bec7f8091c83e9b30b16b912f6fc906236fa6, the repository root; ``requirements.txt`` (README.md:92; then
  flash-attn, README.md:96). Weights: ``hf download robbyant/lingbot-world-base-cam --local-dir
  CKPT/lingbot-world-base-cam`` (README.md:109): the command reads ``models_t5_umt5-xxl-enc-bf16.pth``,
  ``google/umt5-xxl/``, ``Wan2.1_VAE.pth`` and the ``high_noise_model/`` / ``low_noise_model/`` experts of that folder
  (wan/configs/wan_i2v_A14B.py:11-15, 29-30; wan/image2video.py:104-131). The folder name must contain "cam": it picks
  the control type (wan/image2video.py:98-101).
"""

from __future__ import annotations

import math

import numpy as np

from .base import AdapterError, AdapterInfo, NativeInputs, horizontal_fov_deg, image_arg
from .repo import RepoAdapter, RepoSpec, torchrun

WORK_W, WORK_H = 832, 480  # the pixel units intrinsics.npy is read in (wan/image2video.py:387-394)
MAX_AREA = 480 * 832  # MAX_AREA_CONFIGS['480*832'] (wan/configs/__init__.py:26), given by --size 480*832
VAE_STRIDE, PATCH = 8, 2  # wan/configs/wan_i2v_A14B.py:16, 19
NUM_HEADS = 40  # i2v_A14B.num_heads (wan/configs/wan_i2v_A14B.py:23; v2 the same file, :23)
#: gpus=N the model's Ulysses attention accepts: N == world size and 40 % N == 0 (generate.py:287-293; v2 :261-263)
ULYSSES_SIZES = tuple(n for n in range(1, NUM_HEADS + 1) if NUM_HEADS % n == 0)
OUTPUT_VIDEO = "video.mp4"  # --save_file OUT/video.mp4 (generate.py:155-159; v2 :128-132)


def working_size(w0: int, h0: int, max_area: int = MAX_AREA) -> tuple[int, int]:
    """(w, h) the model really generates at for a w0 x h0 image: wan/image2video.py:330-339 (v2: :488-497), with
    numpy's float floor-divisions as there."""
    a = h0 / w0
    lat_h = round(np.sqrt(max_area * a) // VAE_STRIDE // PATCH * PATCH)
    lat_w = round(np.sqrt(max_area / a) // VAE_STRIDE // PATCH * PATCH)
    return int(lat_w * VAE_STRIDE), int(lat_h * VAE_STRIDE)


class LingBotWorld(RepoAdapter):
    # ckpt=FOLDER holding the checkpoint folder named by CKPT (the command passes --ckpt_dir CKPT/<name>)
    repo_spec = RepoSpec(
        clone="https://github.com/robbyant/lingbot-world", entry="generate.py", hf_id="robbyant/lingbot-world-base-cam",
        commit="a43bec7f8091c83e9b30b16b912f6fc906236fa6", subdir="", requirements=("requirements.txt",),
        weights_dir="lingbot-world-base-cam",
        weights_patterns=("models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*", "Wan2.1_VAE.pth",
                          "high_noise_model/*", "low_noise_model/*"))
    multi_gpu = ("torchrun --nproc_per_node=N generate.py ... --dit_fsdp --t5_fsdp --ulysses_size N (README.md:128, "
                 "run_act2cam.sh:1-9); N must divide the 40 heads (generate.py:287-293)")
    info = AdapterInfo(
        name="lingbot-world", version="0.2", width=832, height=480, fps=16.0,
        fps_source="writer: save_video(fps=cfg.sample_fps=16) (generate.py:359-365)",
        chunk_frames=12, first_chunk_frames=12, duration_unit="frames (4k+1)", control="poses",
        pose_convention="c2w OpenCV; relative to frame 0, translation max-normalised inside the model",
        intrinsics_regime=4, aspect_policy="stretch", context_policies=("full_kv", "sliding_window"),
        hf_ids=("robbyant/lingbot-world-base-cam", "robbyant/lingbot-world-fast"),
        repository="https://github.com/robbyant/lingbot-world", licence="Apache-2.0", integration="A",
        notes="--action_path with poses.npy + intrinsics.npy; absolute speed is not controllable (max-norm); the size "
              "shown is the max area: the working size follows the image's aspect (768x512 at 3:2, 624x624 at 1:1, "
              "wan/image2video.py:330-339), recorded per case in the plan",
    )
    FPS = 16.0
    FRAME_RULE = "4k+1"
    CKPT = "lingbot-world-base-cam"

    def frame_count(self, n: int) -> int:
        """Video frames for n commanded frames after the conditioning one: the smallest 4k+1 >= n + 1."""
        return 4 * math.ceil(n / 4) + 1

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        n = traj.n_frames(self.FPS)
        F = self.frame_count(n)
        caveats = ["translation is normalised to unit largest step inside the model: absolute speed is lost, "
                   "the speed profile within the clip is kept"]
        if F != n + 1:
            caveats.append(f"{n + 1} frames rounded up to {F} ({self.FRAME_RULE}): the last {F - n - 1} frames hold "
                           "the final pose")
        poses = traj.poses(self.FPS, F).astype(np.float32)  # padding frames hold the final pose
        if case.intrinsics is None or case.image_size is None:
            raise AdapterError(f"lingbot-world needs the case's intrinsics and image size (regime 4); case {case.id} has none")
        fx, fy, cx, cy = case.intrinsics
        w0, h0 = case.image_size
        sx, sy = WORK_W / w0, WORK_H / h0
        k = np.array([fx * sx, fy * sy, cx * sx, cy * sy], np.float32)
        intr = np.repeat(k[None], F, axis=0)
        ww, wh = working_size(w0, h0)
        kw = [float(k[0]) * ww / WORK_W, float(k[1]) * wh / WORK_H, float(k[2]) * ww / WORK_W,
              float(k[3]) * wh / WORK_H]  # get_Ks_transformed(480, 832 -> h, w) (wan/utils/cam_utils.py:120-151)
        if (ww, wh) != (WORK_W, WORK_H):
            caveats.append(f"the {w0}x{h0} image runs at {ww}x{wh}, not {WORK_W}x{WORK_H}: the working size follows "
                           f"the image's aspect within the 480*832 area (wan/image2video.py:330-339); the image is "
                           f"stretched by ({ww / w0:.4f}, {wh / h0:.4f}) and K follows it")
        seg = [(int(a), int(b)) for a, b in traj.segment_frames(self.FPS, n)]
        cmd = self.command(case, F)  # refuses a gpus=N the model's Ulysses attention cannot split
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=ww, height=wh,
            fps=self.FPS, n_frames=F, segment_frames=seg,
            arrays={"c2w": poses.astype(np.float64), "intrinsics": intr},
            files={"action/poses.npy": poses, "action/intrinsics.npy": intr, "prompt.txt": case.prompt,
                   "command.txt": cmd + "\n"},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": list(case.image_size),
                        "native": kw, "native_size": [ww, wh], "native_model": k.tolist(),
                        "native_model_units": f"pixels of {WORK_W}x{WORK_H} (what intrinsics.npy holds)",
                        "working_size": [ww, wh], "working": kw,
                        "transform": {"policy": "stretch", "scale_xy": [sx, sy],
                                      "working_scale_xy": [ww / w0, wh / h0], "max_area": MAX_AREA},
                        "case_hfov_deg": horizontal_fov_deg(fx, w0), "native_hfov_deg": horizontal_fov_deg(kw[0], ww)},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"frame_num": F, "keys_frames": 320, "image": case.image, "working_size": [ww, wh],
                   "output_video": OUTPUT_VIDEO},
        )

    def launch(self, args: str) -> str:
        """``generate.py ARGS`` as the README launches it for ``gpus=N``: one plain process, or torchrun with N
        processes and FSDP + Ulysses over N (README.md:128; v2 README.md:108, run_fast.sh:9-21)."""
        n = self.gpus()
        if n not in ULYSSES_SIZES:
            raise AdapterError(f"{self.info.name}: gpus={n} cannot run: --ulysses_size must equal the number of "
                               f"processes and divide the model's {NUM_HEADS} attention heads (generate.py "
                               f"asserts both); use gpus= one of {', '.join(map(str, ULYSSES_SIZES))}")
        if n == 1:
            return f"python generate.py {args}"
        return torchrun(n, f"generate.py {args} --dit_fsdp --t5_fsdp --ulysses_size {n}")

    def command(self, case, F: int) -> str:
        return self.launch(f"--task i2v-A14B --size 480*832 --ckpt_dir CKPT/{self.CKPT} --image {image_arg(case)} "
                           f"--action_path ACTION_DIR --frame_num {F} --base_seed SEED --save_file OUT/{OUTPUT_VIDEO} "
                           f"--prompt \"$(cat prompt.txt)\"")
