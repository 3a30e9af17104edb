"""Hunyuan-GameCraft 1.0 (Tencent-Hunyuan/Hunyuan-GameCraft-1.0): one key + speed per 33-frame action, 704x1216 / 24 fps.

Conventions this adapter relies on, read at commit 07afcd4c7c5c6ba90108cf1493c312f7a51b79ac
(docs/probes/hy-gamecraft.md; SB = hymm_sp/sample_batch.py, SI = hymm_sp/sample_inference.py):

- Control is the CLI only: ``--action-list`` keys and ``--action-speed-list`` floats of equal length
  (hymm_sp/config.py:35-36; README.md:121-123). Keys: w forward, s backward, a left, d right, left_rot, right_rot,
  up_rot, down_rot (SI:18). One key per generated segment of 33 frames (SB:242-271; SI:516-527); there is no
  combined key and no idle key. A hold is written as ``w`` with speed 0, which builds 33 identity poses exactly.
- Speed = the total motion of one action: translation in "m" or rotation in degrees, spread linearly over 33 steps
  (SI:108-182, called with duration 33 at SI:211-221); the pose rows are identity + the steps and rows 0..32 are
  used (SI:227-236, 311-318, 516-522), so row k sits at k/33 of the value; translation is multiplied by 10 before
  the Plucker rays (SI:27-43, 341-343). Each action restarts at the identity (SI:215-218): poses never accumulate
  across actions; continuity comes from the previous segment's latents (hybrid history).
- Rows are RealEstate10K-style ``[idx, fx, fy, cx, cy, 0, 0, w2c 3x4]`` (SI:227-251). Net effect in OpenCV camera
  axes (verified by re-deriving SI:126-201): w -> c2w +z, s -> -z, d -> +x, a -> -x; right_rot turns the view to
  +x (yaw right), left_rot to -x; up_rot to -y (pitch up), down_rot to +y. ``arrays["w2c"]`` holds those rows per
  action, ``arrays["c2w_plucker"]`` the relative c2w the rays use (translation x10), ``arrays["c2w"]`` the chained
  per-frame c2w in metres that the actions command (an action continues from where the previous one ended).
- Intrinsics (regime 2): fixed normalised [0.50505, 0.8979, 0.5, 0.5] (SI:219), scaled by the working size
  (SI:332-339) -> fx 614.1 px, fy 632.1 px at 1216x704, HFOV 89.4 deg. The case's intrinsics are not used.
- Image: CropResize to cover 704x1216 (sizes ``int(h * s), int(w * s)``, bilinear) + CenterCrop (SB:23-60, 137-143);
  aspect policy crop.
- Frames and time: with ``--image-start`` each action adds 33 frames (first segment: 10 latents, the image latent
  dropped, 9 decoded; later: 18 latents, the 9 new ones decoded; diffusion/pipelines/pipeline_hunyuan_video_game.py:
  885-886, 913-933, 1089-1108). The writer uses ``save_videos_grid(..., fps=24)`` (SB:294); the README's "25FPS"
  (README.md:123) is not what is written. A 20 s key is 480 frames = 14.55 actions.
- Rounding rule: a segment of s seconds gets ``max(1, floor(24 s / 33 + 1/2))`` actions (nearest, halves up): every
  20 s key gets 15 actions = 495 frames (20.625 s). The segment's whole commanded motion (metres or degrees) is split
  evenly over its actions, so loops close exactly; the per-second rate is off by the time stretch (caveat).
- History: only the previous 33-frame segment (SB:255, 273-275): context policy "sliding_window".
- Launcher/CLI defaults that touch control, and what worldgate passes (hymm_sp/config.py): ``--sample-n-frames`` 33
  (config.py:121, the frames per action, SB:257) -> 33, explicit; ``--action-speed-list`` has no default, no clamp and
  no scale besides the x10 inside (SI:40-41) -> the per-action totals above; ``--use-csv-pose`` / ``--pose`` / ``--add-button``
  off (config.py:33-34, 37) -> not passed, so the key path builds the poses; ``--cfg-scale`` 7.5 (config.py:139) ->
  2.0 and ``--infer-steps`` 100 (:123) -> 50 as the launcher runs it (scripts/run_sample_batch_sp.sh:17, 22);
  ``--image-start`` passed. Paths: ``--ckpt`` -> ``CKPT/gamecraft_models/mp_rank_00_model_states.pt`` and
  ``MODEL_BASE`` (the VAE and text encoders, hymm_sp/constants.py:36-52) -> ``CKPT/stdmodels``, with ``ckpt`` = the
  ``weights`` folder of the launcher (run_sample_batch_sp.sh:4-5); ``PYTHONPATH=.`` as the launcher sets it (:3);
  ``--save-path`` -> the runner's OUT. torchrun is run as ``python -m torch.distributed.run`` so the ``python``
  model argument picks the interpreter.
- Output: rank 0 rewrites ``OUT/<image stem>.mp4`` after every action (``os.path.basename(image).split('.')[0]``,
  SB:278-294; ``plan.extra["output_video"]``), ``save_videos_grid(fps=24)``, 1216x704, 33 frames per action.
- Several GPUs for one case (``gpus=N``): ``torchrun --nnodes=1 --nproc_per_node=8 --master_port 29605
  hymm_sp/sample_batch.py ...`` (README.md:119-135; scripts/run_sample_batch_sp.sh:10); the sequence-parallel degree
  is the world size itself (``initialize_distributed`` -> ``initialize_sequence_parallel_state(world_size)``,
  hymm_sp/modules/parallel_states.py:82-93), no other flag. Ulysses splits the 24 heads (hymm_sp/modules/models.py:
  689-695; parallel_states.py:110-121) and the video tokens, which must divide evenly (models.py:593-597): 44 x 76
  tokens per latent at 704x1216 times 10 latents (first action, RoPE of 37 frames) or 18 (later ones, 69 frames;
  hymm_sp/sample_inference.py:611-615). So gpus=N in {1, 2, 4, 8}; others are refused. gpus=1 is a 1-process
  torchrun as the README's single-GPU run (README.md:209): sample_batch.py always initialises NCCL from the
  launcher's environment (parallel_states.py:82-91). ``--standalone`` replaces the launcher's fixed
  ``--master_port 29605``.
- Setup: commit 07afcd4c7c5c6ba90108cf1493c312f7a51b79ac, the repository root; ``requirements.txt`` (README.md:98;
  then flash-attention, README.md:101). Weights: ``hf download tencent/Hunyuan-GameCraft-1.0 --local-dir CKPT``
  (weights/README.md:34-39, into the launcher's ``weights`` folder); the command reads
  ``gamecraft_models/mp_rank_00_model_states.pt`` and ``stdmodels/`` (vae_3d/hyvae, llava-llama-3-8b-v1_1-transformers,
  openai_clip-vit-large-patch14: hymm_sp/constants.py:36-52).
"""

from __future__ import annotations

import math
import os

import numpy as np

from worldgate.trajectories.core import Look, Move, rot_x, rot_y

from .base import AdapterError, AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg, image_arg
from .repo import RepoAdapter, RepoSpec, torchrun

H, W = 704, 1216
FPS = 24.0
ACTION_FRAMES = 33
INTRINSIC = (0.50505, 0.8979, 0.5, 0.5)  # normalised fx, fy, cx, cy (SI:219)
MOVE_KEY = {Move.FORWARD: "w", Move.BACK: "s", Move.STRAFE_LEFT: "a", Move.STRAFE_RIGHT: "d"}
LOOK_KEY = {Look.YAW_LEFT: "left_rot", Look.YAW_RIGHT: "right_rot", Look.PITCH_UP: "up_rot", Look.PITCH_DOWN: "down_rot"}
README_SPEED_RANGE = (0.0, 3.0)  # README.md:121
#: gpus=N the Ulysses split accepts: 24 heads (models.py:689-695) and 3344 * 10 / 3344 * 18 video tokens (models.py:596)
SP_SIZES = (1, 2, 4, 8)


def actions_for(seconds: float) -> int:
    """The rounding rule: nearest whole number of 33-frame actions (halves up), at least one."""
    return max(1, int(math.floor(round(seconds * FPS / ACTION_FRAMES, 9) + 0.5)))


def local_c2w(key: str, value: float, frac: float) -> np.ndarray:
    """c2w (OpenCV) of an action's pose row at fraction ``frac`` of its value, relative to the action's start, metres."""
    T = np.eye(4)
    a = frac * value
    if key in ("w", "s"):
        T[2, 3] = a if key == "w" else -a
    elif key in ("a", "d"):
        T[0, 3] = a if key == "d" else -a
    elif key in ("left_rot", "right_rot"):
        T[:3, :3] = rot_y(math.radians(a if key == "right_rot" else -a))
    elif key in ("up_rot", "down_rot"):
        T[:3, :3] = rot_x(math.radians(a if key == "up_rot" else -a))
    else:  # pragma: no cover - keys come from MOVE_KEY / LOOK_KEY
        raise ValueError(key)
    return T


class HYGameCraft(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/Tencent-Hunyuan/Hunyuan-GameCraft-1.0",
        entry="hymm_sp/sample_batch.py",
        hf_id="tencent/Hunyuan-GameCraft-1.0",
        commit="07afcd4c7c5c6ba90108cf1493c312f7a51b79ac", subdir="", requirements=("requirements.txt",),
        weights_patterns=("gamecraft_models/mp_rank_00_model_states.pt", "stdmodels/*"),
    )
    multi_gpu = ("torchrun --nnodes=1 --nproc_per_node=N hymm_sp/sample_batch.py ... (README.md:119-135, "
                 "scripts/run_sample_batch_sp.sh:10); sequence parallel over the world size "
                 "(hymm_sp/modules/parallel_states.py:82-93); N in 1, 2, 4, 8 (models.py:596, 689-695)")
    info = AdapterInfo(
        name="hy-gamecraft", version="0.1", width=W, height=H, fps=FPS,
        fps_source="writer: save_videos_grid(fps=24) (hymm_sp/sample_batch.py:294); README '25FPS' is not written",
        chunk_frames=ACTION_FRAMES, first_chunk_frames=ACTION_FRAMES, duration_unit="33-frame actions",
        control="--action-list keys {w,s,a,d,left_rot,right_rot,up_rot,down_rot} + --action-speed-list, one per 33 frames",
        pose_convention="w2c RealEstate10K rows built inside from (key, speed); each action restarts at identity; "
                        "translation x10 for the rays",
        intrinsics_regime=2, aspect_policy="crop", context_policies=("sliding_window",),
        hf_ids=("tencent/Hunyuan-GameCraft-1.0",), repository="https://github.com/Tencent-Hunyuan/Hunyuan-GameCraft-1.0",
        licence="Tencent Hunyuan Community License (excludes EU, UK, South Korea)", integration="A",
        notes="speed = metres or degrees per 33-frame action (README range 0-3); no idle key (hold = w at speed 0); "
              "--seed 0 means a random seed to GameCraft (sample_batch.py:134), so a rollout refuses seed 0",
    )
    FPS = FPS

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0):
        if int(seed) == 0:  # `args.seed if args.seed else random...` (hymm_sp/sample_batch.py:134)
            raise AdapterError("hy-gamecraft: seed 0 is a random seed to GameCraft (hymm_sp/sample_batch.py:134) and "
                               "would not reproduce; pass --seed N with N != 0")
        yield from super().rollout(plan, context, seed)

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        keys: list[str] = []
        speeds: list[float] = []
        segs: list[tuple[int, int]] = []
        caveats: list[str] = []
        a0 = 0
        pitch_deg = 0.0
        for i, s in enumerate(traj.segments):
            if s.move is not Move.IDLE and s.look is not Look.IDLE:
                raise UnsupportedMotion(
                    f"hy-gamecraft cannot express segment {i + 1} ({s.to_text()}) of case {case.id}: it takes one key "
                    "per 33-frame action (w, s, a, d, left_rot, right_rot, up_rot, down_rot), never a move and a "
                    "look together; split the segment into alternating moves and looks")
            n_act = actions_for(s.seconds)
            if s.move is not Move.IDLE:
                key, total = MOVE_KEY[s.move], traj.speed * s.seconds
                if abs(pitch_deg) > 1e-9:
                    caveats.append(f"segment {i + 1} moves while pitched {pitch_deg:g} deg: GameCraft moves along the "
                                   "pitched view axis, the trajectory in the horizontal plane")
            elif s.look is not Look.IDLE:
                key = LOOK_KEY[s.look]
                rate = traj.pitch_rate if s.look in (Look.PITCH_UP, Look.PITCH_DOWN) else traj.yaw_rate
                total = rate * s.seconds
                if s.look is Look.PITCH_UP:
                    pitch_deg += total
                elif s.look is Look.PITCH_DOWN:
                    pitch_deg -= total
            else:
                key, total = "w", 0.0
            v = total / n_act
            keys += [key] * n_act
            speeds += [v] * n_act
            segs.append((ACTION_FRAMES * a0, ACTION_FRAMES * (a0 + n_act)))
            a0 += n_act
            native_s = n_act * ACTION_FRAMES / FPS
            if abs(native_s - s.seconds) > 1e-9:
                caveats.append(f"segment {i + 1} ({s.to_text()}): {s.seconds:g} s -> {n_act} actions = "
                               f"{n_act * ACTION_FRAMES} frames = {native_s:g} s at 24 fps; its whole motion is kept, "
                               f"so its rate is {s.seconds / native_s:.4g}x the commanded one")
            if not README_SPEED_RANGE[0] <= v <= README_SPEED_RANGE[1]:
                caveats.append(f"segment {i + 1} ({s.to_text()}): speed {v:.6g} "
                               f"{'deg' if key.endswith('rot') else 'm'} per action is outside the README's 0-3 range "
                               "(the code accepts it; no clamp)")
        A = len(keys)
        F = ACTION_FRAMES * A
        frac = np.arange(ACTION_FRAMES) / ACTION_FRAMES
        local = np.array([[local_c2w(k, v, f) for f in frac] for k, v in zip(keys, speeds)])  # (A, 33, 4, 4)
        w2c = np.linalg.inv(local)
        plucker = local.copy()
        plucker[..., :3, 3] *= 10.0  # SI:40-41
        c2w = np.zeros((F, 4, 4))
        start = np.eye(4)
        for j, (k, v) in enumerate(zip(keys, speeds)):
            c2w[ACTION_FRAMES * j:ACTION_FRAMES * (j + 1)] = start @ local[j]
            start = start @ local_c2w(k, v, 1.0)
        caveats += [
            "translation unit is the code's 'm' (x10 inside); the model's metric scale is unknown",
            "each action restarts its poses at the identity; continuity across actions relies on the model's history",
            "intrinsics are the model's fixed normalised [0.50505, 0.8979, 0.5, 0.5] (HFOV 89.4 deg at 1216x704); the "
            "case's camera cannot be passed",
        ]
        fx, fy, cx, cy = INTRINSIC
        hfov = vis_hfov = None
        if case.intrinsics and case.image_size:
            w0, h0 = case.image_size
            hfov = horizontal_fov_deg(case.intrinsics[0], w0)
            s = max(W / w0, H / h0)
            rw = int(w0 * s)  # CropResize floors (SB:57)
            vis_hfov = horizontal_fov_deg(case.intrinsics[0] * rw / w0, W)
        speed_txt = " ".join(repr(float(v)) for v in speeds)
        gpus = self.gpus()
        if gpus not in SP_SIZES:
            raise AdapterError(f"hy-gamecraft: gpus={gpus} cannot run: its sequence parallel over all processes must "
                               f"split the 24 attention heads and the 10- and 18-latent video token sequences evenly "
                               f"(hymm_sp/modules/models.py:596); use gpus= one of {', '.join(map(str, SP_SIZES))}")
        cmd = "env MODEL_BASE=CKPT/stdmodels PYTHONPATH=. " + torchrun(gpus, (
               f"hymm_sp/sample_batch.py --image-path {image_arg(case)} "
               f"--prompt \"$(cat prompt.txt)\" --add-pos-prompt \"Realistic, High-quality.\" --add-neg-prompt "
               f"\"overexposed, low quality, deformation, a poor composition, bad hands, bad teeth, bad eyes, bad limbs, "
               f"distortion, blurring, text, subtitles, static, picture, black border.\" --ckpt "
               f"CKPT/gamecraft_models/mp_rank_00_model_states.pt --video-size {H} {W} --sample-n-frames {ACTION_FRAMES} "
               f"--cfg-scale 2.0 --image-start "
               f"--action-list {' '.join(keys)} --action-speed-list {speed_txt} --seed SEED --infer-steps 50 "
               f"--flow-shift-eval-video 5.0 --save-path OUT"))
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=self.FPS, n_frames=F, segment_frames=segs,
            arrays={"action": np.array(keys), "speed": np.array(speeds, np.float64), "w2c": w2c,
                    "c2w_plucker": plucker, "c2w": c2w, "intrinsics": np.array(INTRINSIC)},
            files={"prompt.txt": case.prompt, "command.txt": cmd + "\n"},
            intrinsics={"regime": 2, "case": case.intrinsics, "case_hfov_deg": hfov,
                        "native": [fx * W, fy * H, cx * W, cy * H], "native_units": f"pixels of {W}x{H}",
                        "native_model": list(INTRINSIC), "native_model_units": "fractions of width/height (SI:219)",
                        "native_px": [fx * W, fy * H, cx * W, cy * H], "native_size": [W, H],
                        "native_hfov_deg": horizontal_fov_deg(fx * W, W),
                        "case_hfov_after_crop_deg": vis_hfov},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"actions": A, "action_list": keys, "action_speed_list": speeds, "image": case.image,
                   **({"output_video": os.path.basename(case.image).split(".")[0] + ".mp4"} if case.image else {})},
        )
