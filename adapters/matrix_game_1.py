"""Matrix-Game 1.0 (SkyworkAI/Matrix-Game, MIT; later moved to the folder Matrix-Game-1/): 17B image-to-video
Minecraft model conditioned on per-frame keyboard and mouse, 1280x720 at 16 fps, one clip per call.

Conventions, read at SkyworkAI/Matrix-Game commit f1bf6e6b26e7db9db86865478e325080ce0fc8ce (the 1.0 release, code
at the repository root: ``inference_bench.py``, ``condtions.py``):

- ``keyboard_condition`` [F, 6] multi-hot in the order **[forward, back, left, right, jump, attack]**
  (condtions.py:51-54, 74-75) and ``mouse_condition`` [F, 2] in the order **[pitch, yaw]** (condtions.py:56-66):
  ``camera_up = [+0.05, 0]``, ``camera_r = [0, +0.05]``: + pitch looks up, + yaw turns right. W/S/A/D are
  forward/back/left/right (left/right strafe); jump and attack are written 0 (idle). The only magnitude in the code is
  ``CAM_VALUE = 0.05`` (condtions.py:56); no degrees per unit exist, so every commanded look maps to +-0.05 and the
  rate mismatch is a caveat.
- One row per video frame: F rows for ``video_length`` F (condtions.py:69, 75-76; inference_bench.py:253), F = 4k + 1
  (pipeline_matrixgame.py:353-358; motion_module.py:241). Row timing is decided by the action module's window:
  latent i (frames 4i-3 .. 4i) reads rows [4i - 12, 4i) after 12 zero rows of left padding
  (matrixgame/model_variants/matrixgame_dit_src/motion_module.py:252-255), so row j first acts on frame j + 1: row j
  holds the command of time j / fps, and the last row acts on no frame.
- Size: the image is centre-cropped to the aspect of ``--resolution`` (default [1280, 720], inference_bench.py:279)
  and resized (inference_bench.py:99-125, 162-168). No camera model (regime 1).
- fps: the writer is ``export_to_video(..., fps=args.fps)`` with ``--fps`` default 16 (tools/visualize.py:155-174;
  inference_bench.py:294).
- Seed: none can be given: ``generator=torch.Generator(device="cuda").manual_seed(42)`` is hard-coded
  (inference_bench.py:189).
- Length: the release generates and benchmarks 65-frame clips (inference_bench.py:253, condtions.py:69; README:
  ">= 80 GB for a single 65-frame video") and has no continuation: worldgate asks for one clip that covers the whole
  trajectory (``--video_length F``), which the pipeline accepts for any 4k + 1 but which is far past its 65 frames;
  ``max_frames=N`` (model arg) refuses longer cases instead.
- Weights (run_inference.sh:5-9): ``hf download Skywork/Matrix-Game`` → ``dit/``, the text encoder at the root,
  ``vae/``, ``assets/mouse.png``; all four paths are passed from ``ckpt``.

Launcher defaults that touch control or output (inference_bench.py:249-299) and what worldgate passes:
``--video_length`` 65 (the plan's F), ``--fps`` 16 (16), ``--resolution`` 1280 720 (1280 720), ``--num_pre_frames`` 5
(5: the conditioning image repeated as past frames, inference_bench.py:170-172), ``--guidance_scale`` 6 (6),
``--inference_steps`` 50 (50), ``--shift`` 15 (15), TeaCache ``--num_steps`` 50 and ``--rel_l1_thresh`` 0.075
(50, 0.075: step caching, inference_bench.py:88-97), ``--max_images`` 3 (1), ``--mouse_scale`` 0.1 and
``--mouse_rotation`` -20 (the drawn icon only). No smoothing or caps exist.

Integration B: ``inference_bench.py`` reads no action input — it loops over the 76 fixed benchmark conditions of
``Bench_actions_76()`` (inference_bench.py:226, 238-241) — and its writer ``process_video`` draws the pressed keys and a
mouse icon onto every frame (tools/visualize.py:155-174). The worldgate patch (marker ``--actions``) adds
``--actions NPZ`` (``keyboard_condition`` [F, 6], ``mouse_condition`` [F, 2]: one condition instead of the 76) and
``--no_overlay`` (write with the repository's own ``save_video``, tools/visualize.py:178-189, which draws nothing).
"""

from __future__ import annotations

import math

from worldgate.trajectories.core import Move

from .base import AdapterError, AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg
from .keymouse import key_mouse_rows
from .repo import RepoAdapter, RepoSpec

CAM_VALUE = 0.05  # condtions.py:56
KEY_ORDER = (Move.FORWARD, Move.BACK, Move.STRAFE_LEFT, Move.STRAFE_RIGHT)  # [forward, back, left, right, jump, attack]
FPS = 16.0
WIDTH, HEIGHT = 1280, 720
TRAINED_FRAMES = 65


class MatrixGame1(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/SkyworkAI/Matrix-Game (the 1.0 release; folder Matrix-Game-1/ in later commits)",
        entry="inference_bench.py", hf_id="Skywork/Matrix-Game", patches={"inference_bench.py": "--actions"},
        patch_doc="adapters/matrix_game_1.py (module docstring: --actions NPZ, --no_overlay)")
    info = AdapterInfo(
        name="matrix-game-1", version="0.1", width=WIDTH, height=HEIGHT, fps=FPS,
        fps_source="writer: export_to_video(fps=args.fps), --fps 16 (tools/visualize.py:155-174; inference_bench.py:294)",
        chunk_frames=0, first_chunk_frames=0, duration_unit="frames (one clip, F = 4k + 1; trained on 65)",
        control="keyboard [forward,back,left,right,jump,attack] + mouse [pitch,yaw] per frame (Minecraft)",
        pose_convention="none", intrinsics_regime=1, aspect_policy="crop", context_policies=(),
        hf_ids=("Skywork/Matrix-Game",), repository="https://github.com/SkyworkAI/Matrix-Game (Matrix-Game-1/)",
        licence="MIT", integration="B",
        no_seed="its generator is hard-coded torch.Generator('cuda').manual_seed(42) (inference_bench.py:189)",
        notes="17B, >= 80 GB for 65 frames; one bidirectional clip, no continuation; a patch adds the action input "
              "and writes without the key/mouse overlay; mouse magnitude fixed at 0.05",
    )
    FPS = FPS

    def __init__(self, max_frames: int | None = None, **model_args):
        super().__init__(**model_args)
        self.max_frames = None if max_frames is None else int(max_frames)
        if self.max_frames is not None and (self.max_frames < 5 or (self.max_frames - 1) % 4):
            raise AdapterError(f"matrix-game-1: max_frames must be 4k + 1 and at least 5, got {max_frames}")

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        n = traj.n_frames(self.FPS)  # frames after the conditioning frame
        F = 1 + 4 * int(math.ceil(n / 4))
        if self.max_frames is not None and F > self.max_frames:
            raise UnsupportedMotion(
                f"matrix-game-1: case {case.id} needs {F} frames ({traj.duration:g} s at {self.FPS:g} fps) in one "
                f"clip; max_frames={self.max_frames} (the release makes {TRAINED_FRAMES}-frame clips and has no "
                "continuation): shorten the trajectory or raise max_frames")
        kb, ms, rows = key_mouse_rows(traj, self.FPS, F, 6, CAM_VALUE, key_order=KEY_ORDER)
        segs = [(a + 1, b + 1) for a, b in rows]  # row j acts first on frame j + 1 (motion_module.py:252-255)
        caveats = ["mouse magnitude is the benchmark constant 0.05 per frame (condtions.py:56): the commanded turn "
                   "rate is not matched",
                   "move speed is Minecraft's own: the commanded speed is not matched",
                   "the prompt is not used by Matrix-Game 1.0 (the image is the semantic condition)",
                   "no seed: the generator is hard-coded to manual_seed(42) (inference_bench.py:189)"]
        if F > TRAINED_FRAMES:
            caveats.append(f"one clip of {F} frames: the release generates {TRAINED_FRAMES}-frame clips "
                           "(inference_bench.py:253) and needs >= 80 GB for those; longer clips are out of its range")
        if F - 1 > n:
            caveats.append(f"{F - 1 - n} trailing frames (to reach 4k + 1) carry no command")
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        cmd = (f"python inference_bench.py --image_path IMAGE_DIR --output_path OUT --video_length {F} "
               f"--fps {int(self.FPS)} --resolution {WIDTH} {HEIGHT} --num_pre_frames 5 --guidance_scale 6 "
               "--inference_steps 50 --shift 15 --num_steps 50 --rel_l1_thresh 0.075 --max_images 1 "
               "--dit_path CKPT/dit --textenc_path CKPT --vae_path CKPT/vae "
               "--mouse_icon_path CKPT/assets/mouse.png --mouse_scale 0.1 --mouse_rotation -20 --bfloat16 "
               "--actions actions.npz --no_overlay  # --actions and --no_overlay are added by the worldgate patch")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=WIDTH, height=HEIGHT,
            fps=self.FPS, n_frames=F, segment_frames=segs,
            arrays={"keyboard_condition": kb, "mouse_condition": ms},
            files={"actions.npz": {"keyboard_condition": kb, "mouse_condition": ms}, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": None,
                        "note": "no camera model: the model's field of view is not defined"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"video_length": F, "image": case.image},
        )
