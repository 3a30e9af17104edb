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
"""

from __future__ import annotations

import math

import numpy as np

from .base import AdapterError, AdapterInfo, NativeInputs, horizontal_fov_deg, image_arg
from .repo import RepoAdapter, RepoSpec

WORK_W, WORK_H = 832, 480  # the pixel units intrinsics.npy is read in (wan/image2video.py:387-394)
MAX_AREA = 480 * 832  # MAX_AREA_CONFIGS['480*832'] (wan/configs/__init__.py:26), given by --size 480*832
VAE_STRIDE, PATCH = 8, 2  # wan/configs/wan_i2v_A14B.py:16, 19


def working_size(w0: int, h0: int, max_area: int = MAX_AREA) -> tuple[int, int]:
    """(w, h) the model really generates at for a w0 x h0 image: wan/image2video.py:330-339 (v2: :488-497), with
    numpy's float floor-divisions as there."""
    a = h0 / w0
    lat_h = round(np.sqrt(max_area * a) // VAE_STRIDE // PATCH * PATCH)
    lat_w = round(np.sqrt(max_area / a) // VAE_STRIDE // PATCH * PATCH)
    return int(lat_w * VAE_STRIDE), int(lat_h * VAE_STRIDE)


class LingBotWorld(RepoAdapter):
    # ckpt=FOLDER holding the checkpoint folder named by CKPT (the command passes --ckpt_dir CKPT/<name>)
    repo_spec = RepoSpec(clone="https://github.com/robbyant/lingbot-world", entry="generate.py",
                         hf_id="robbyant/lingbot-world-base-cam")
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
        cmd = self.command(case, F)
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=ww, height=wh,
            fps=self.FPS, n_frames=F, segment_frames=seg,
            arrays={"c2w": poses.astype(np.float64), "intrinsics": intr},
            files={"action/poses.npy": poses, "action/intrinsics.npy": intr, "prompt.txt": case.prompt,
                   "command.txt": cmd + "\n"},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": list(case.image_size),
                        "native": k.tolist(), "native_units": f"pixels of {WORK_W}x{WORK_H} (what intrinsics.npy holds)",
                        "native_size": [WORK_W, WORK_H], "working_size": [ww, wh], "working": kw,
                        "transform": {"policy": "stretch", "scale_xy": [sx, sy],
                                      "working_scale_xy": [ww / w0, wh / h0], "max_area": MAX_AREA},
                        "case_hfov_deg": horizontal_fov_deg(fx, w0), "native_hfov_deg": horizontal_fov_deg(kw[0], ww)},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"frame_num": F, "keys_frames": 320, "image": case.image, "working_size": [ww, wh]},
        )

    def command(self, case, F: int) -> str:
        return (f"python generate.py --task i2v-A14B --size 480*832 --ckpt_dir CKPT/{self.CKPT} "
                f"--image {image_arg(case)} --action_path ACTION_DIR --frame_num {F} --base_seed SEED "
                f"--prompt \"$(cat prompt.txt)\"")
