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
  (matrixgame/model_variants/matrixgame_dit_src/motion_module.py:252-255 mouse, :295-297 keyboard), so row j first
  acts on frame j + 1: row j is the transition from frame j to j + 1, and the last row acts on no frame.
- **Frames 0-4 are the conditioning still, not generated** (``--num_pre_frames 5``). The image is stacked with 5
  copies of itself (inference_bench.py:170-172); ``prepare_latents`` encodes the image alone (latent 0) and the 5
  copies with the causal VAE (5 frames -> 2 latents), and in ``refiner`` mode puts those 2 latents, with mask 1, in
  the channel-concatenated condition of latents 0-1 (pipeline_matrixgame.py:455-461, 491-503:
  ``mask_concat[:, :, num_pre_frames:] = 0`` with ``num_pre_frames`` = 2 latents). Every step feeds the clean image
  latent as latent 0 (:928-935, ``num_pre`` = 1) and never updates it (:1009-1014). So latent 0 (frame 0) is the
  image and latent 1 (frames 1-4) is given as known: the image again. Rows 0-3, the newest rows of latent 1's window
  (transitions 0->1 .. 3->4), therefore fall on frames that cannot move; the first latent the model generates is
  latent 2 (frames 5-8), whose newest rows are 4-7. worldgate holds rows 0-3 idle (the still past frames did not
  move: an idle command agrees with them; the mouse and keyboard attention runs over all latents, motion_module.py:
  277-283, 320-326, so a motion command there would contradict the known frames) and shifts the trajectory by
  ``PRE_ROWS = 4``: the command of time t fills row ``4 + ceil(t * 16)``, so the first commanded transition is 4->5,
  one the model generates. The commanded poses (``c2w``) hold the start pose for frames 0-4 and reach the
  trajectory's pose of time k / 16 at frame 4 + k; segment frames are rows + 1; F = 1 + 4 ceil((n + 4) / 4) for n
  commanded frames (a 20 s key: 325 frames). Version 0.1 commanded motion from row 0 with no caveat: its first four
  rows were lost and its poses ran 4 frames (0.25 s) ahead of the video.
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
mouse icon onto every frame (tools/visualize.py:155-174). worldgate's patch (:data:`PATCH`, marker
``worldgate-patch matrix-game-1 v1``) adds, before ``--gpu_id`` (inference_bench.py:298), ``--actions NPZ`` and
``--no_overlay``. With ``--actions``, right after ``conditions = Bench_actions_76()`` (:226) the conditions become the
one condition of the file, ``{"action_name": <file stem>, "keyboard_condition": [F, 6], "mouse_condition": [F, 2]}``
(the dict ``_process_condition`` reads, :154-155, 204), through ``worldgate_inputs.py`` created beside
``inference_bench.py``; a file whose rows are not ``--video_length`` is refused. With ``--no_overlay``, just before
``process_video(`` (:208) the frames are written by the repository's own ``save_video`` (tools/visualize.py:178-189:
the same ``export_to_video(fps=args.fps)``, no drawing) instead. Everything else is the script's.

Installing and weights: ``pip install -r requirements.txt`` (the root's only requirement file at this commit), then
apex and FlashAttention-3 by hand (README.md:58-62). ``weights_patterns`` stays empty: the text encoder is loaded from
the root of the download (``--textenc_path CKPT``, matrixgame/encoder_variants/matrixgame_i2v.py:583-620 ->
``from_pretrained`` of the folder), whose file names the code does not list; besides it the command reads ``dit/``
(inference_bench.py:71), ``vae/`` (``pytorch_model.pt`` + config, matrixgame/vae_variants/matrixgame_vae.py:29-35) and
``assets/mouse.png`` (only for the overlay).

GPUs: one per case. The release runs ``python inference_bench.py`` on one GPU ("≥80GB of GPU memory for a single
65-frame video", README.md:70-73; run_inference.sh:14-22) and has no process group or sequence parallelism at this
commit, so ``gpus>1`` is refused. (Later commits add ``Matrix-Game-1/parallel_infer.py`` and ``run_2gpu.sh``,
``torchrun --nproc_per_node=2 --standalone parallel_infer.py --ulysses-degree 2 --ring-degree 1``, a different entry
point with other flags, first in 8ed02bd; not this adapter's.) ``--gpu_id`` (default "0") sets
``CUDA_VISIBLE_DEVICES`` only after ``torch.cuda.is_available()`` has initialised CUDA (inference_bench.py:298-299,
309-310), so the devices the runner gives the process stand.

Output contract: ``OUT/<image stem>_<action_name>.mp4`` (inference_bench.py:204-206), with the patch
``OUT/<image stem>_actions.mp4`` (``extra["output_video"]``; the runner's IMAGE_DIR holds the case image under its own
name); fps ``--fps`` 16 (tools/visualize.py:174, 189); frames 1280x720 (``--resolution``, the image crop-resized,
inference_bench.py:162-168); F frames for ``--video_length F`` (the pipeline decodes all (F - 1) / 4 + 1 latents and
trims nothing, pipeline_matrixgame.py:839-844, 1038-1090). ``_load_images`` globs only ``*.png``, ``*.jpg``,
``*.jpeg`` (inference_bench.py:137-143): a case image of another extension is not found.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from worldgate.trajectories.core import Move

from .base import AdapterError, AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg
from .keymouse import key_mouse_rows
from .patching import Edit, Patch
from .repo import RepoAdapter, RepoSpec

CAM_VALUE = 0.05  # condtions.py:56
KEY_ORDER = (Move.FORWARD, Move.BACK, Move.STRAFE_LEFT, Move.STRAFE_RIGHT)  # [forward, back, left, right, jump, attack]
FPS = 16.0
WIDTH, HEIGHT = 1280, 720
TRAINED_FRAMES = 65
#: rows 0-3 reach only latent 1 (frames 1-4), which --num_pre_frames 5 gives as known (module docstring): held idle
PRE_ROWS = 4
COMMIT = "f1bf6e6b26e7db9db86865478e325080ce0fc8ce"

#: worldgate's own module beside inference_bench.py: the file input ``--actions`` reads
INPUTS_MODULE = '''"""worldgate's action input for Matrix-Game 1.0's inference_bench.py (``--actions NPZ``, added by
worldgate's patch).

The file holds ``keyboard_condition`` [F, 6] ([forward, back, left, right, jump, attack]) and ``mouse_condition``
[F, 2] ([pitch, yaw]) float rows, one per video frame, as worldgate's plan writes them. They become the one condition
the script generates, in the form ``Bench_actions_76()`` gives its 76 (condtions.py:97-101): a dict with
``action_name``, ``keyboard_condition`` and ``mouse_condition`` row lists.
"""

import os

import numpy as np

#: the arrays of the file and their widths
WIDTHS = {"keyboard_condition": 6, "mouse_condition": 2}


def load_conditions(path, video_length):
    """``[condition]`` from ``path``, named after the file (the video is ``<image>_<name>.mp4``); a file whose rows
    are not ``video_length`` (or whose widths differ) is refused."""
    with np.load(path, allow_pickle=False) as z:
        missing = sorted(set(WIDTHS) - set(z.files))
        if missing:
            raise ValueError(f"{path}: missing {missing} (worldgate's actions.npz holds keyboard_condition and "
                             "mouse_condition)")
        rows = {k: np.asarray(z[k], dtype=np.float32) for k in WIDTHS}
    for k, width in WIDTHS.items():
        if rows[k].shape != (video_length, width):
            raise ValueError(f"{path}: {k} is {rows[k].shape}, this run needs {(video_length, width)} (one row per "
                             "frame of --video_length)")
        if not np.isfinite(rows[k]).all():
            raise ValueError(f"{path}: {k} holds non-finite values")
    name = os.path.splitext(os.path.basename(path))[0]
    return [{"action_name": name, **{k: v.tolist() for k, v in rows.items()}}]
'''

#: worldgate's patch: ``--actions NPZ`` in place of the 76 benchmark conditions, ``--no_overlay`` (module docstring)
PATCH = Patch(
    model="matrix-game-1", version="1",
    edits=(
        Edit("inference_bench.py", '    parser.add_argument("--gpu_id", type=str, default="0",\n',
             '    parser.add_argument("--actions", type=str, default=None,\n'
             '                        help="worldgate: .npz of keyboard_condition [F, 6] and mouse_condition [F, 2] "\n'
             '                             "rows: the one condition generated, in place of Bench_actions_76()")\n'
             '    parser.add_argument("--no_overlay", action="store_true",\n'
             '                        help="worldgate: write the frames with tools.visualize.save_video (no keys or "\n'
             '                             "mouse icon drawn)")\n', where="before"),
        Edit("inference_bench.py", "        conditions = Bench_actions_76()\n",
             "        if getattr(self.args, 'actions', None):\n"
             "            from worldgate_inputs import load_conditions\n"
             "\n"
             "            conditions = load_conditions(self.args.actions, self.args.video_length)\n"),
        Edit("inference_bench.py", "        process_video(\n            img_tensors,\n",
             "        if getattr(self.args, 'no_overlay', False):\n"
             "            from tools.visualize import save_video\n"
             "\n"
             "            save_video(img_tensors, output_path, fps=self.args.fps)\n"
             "            return\n", where="before"),
        Edit("worldgate_inputs.py", None, INPUTS_MODULE),
    ),
    summary="--actions NPZ: keyboard_condition [F, 6] and mouse_condition [F, 2] are the one condition generated; "
            "--no_overlay: written by save_video, nothing drawn",
    flags=("--actions", "--no_overlay"),
)


class MatrixGame1(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/SkyworkAI/Matrix-Game (the 1.0 release; folder Matrix-Game-1/ in later commits)",
        entry="inference_bench.py", hf_id="Skywork/Matrix-Game", patch=PATCH, commit=COMMIT, subdir="",
        patch_doc="adapters/matrix_game_1.py (PATCH: --actions NPZ, --no_overlay); docs/probes/matrix-game-1.md",
        weights_patterns=(), requirements=("requirements.txt",))
    info = AdapterInfo(
        name="matrix-game-1", version="0.2", width=WIDTH, height=HEIGHT, fps=FPS,
        fps_source="writer: export_to_video(fps=args.fps), --fps 16 (tools/visualize.py:155-174; inference_bench.py:294)",
        chunk_frames=0, first_chunk_frames=0, duration_unit="frames (one clip, F = 4k + 1; trained on 65)",
        control="keyboard [forward,back,left,right,jump,attack] + mouse [pitch,yaw] per frame (Minecraft)",
        pose_convention="none", intrinsics_regime=1, aspect_policy="crop", context_policies=(),
        hf_ids=("Skywork/Matrix-Game",), repository="https://github.com/SkyworkAI/Matrix-Game (Matrix-Game-1/)",
        licence="MIT", integration="B",
        no_seed="its generator is hard-coded torch.Generator('cuda').manual_seed(42) (inference_bench.py:189)",
        notes="17B, >= 80 GB for 65 frames; one bidirectional clip, no continuation; a patch adds the action input "
              "and writes without the key/mouse overlay; mouse magnitude fixed at 0.05; frames 0-4 are the "
              "conditioning still (--num_pre_frames 5): command rows 0-3 idle, the trajectory starts at frame 4",
    )
    FPS = FPS
    multi_gpu = ""  # one GPU per case at this commit: README.md:70-73, run_inference.sh:14-22 (no process group)

    def __init__(self, max_frames: int | None = None, **model_args):
        super().__init__(**model_args)
        self.max_frames = None if max_frames is None else int(max_frames)
        if self.max_frames is not None and (self.max_frames < 5 or (self.max_frames - 1) % 4):
            raise AdapterError(f"matrix-game-1: max_frames must be 4k + 1 and at least 5, got {max_frames}")

    def plan(self, case) -> NativeInputs:
        self.gpus()  # gpus>1 is refused: no multi-GPU inference at the pinned commit
        traj = case.trajectory
        n = traj.n_frames(self.FPS)  # commanded frames after the start
        F = 1 + 4 * int(math.ceil((n + PRE_ROWS) / 4))  # rows PRE_ROWS .. PRE_ROWS + n - 1 carry the trajectory
        if self.max_frames is not None and F > self.max_frames:
            raise UnsupportedMotion(
                f"matrix-game-1: case {case.id} needs {F} frames ({traj.duration:g} s at {self.FPS:g} fps) in one "
                f"clip; max_frames={self.max_frames} (the release makes {TRAINED_FRAMES}-frame clips and has no "
                "continuation): shorten the trajectory or raise max_frames")
        # the command of time t fills row PRE_ROWS + ceil(t * fps); rows 0-3 (frames 0-4: the known still) stay idle
        kb, ms, rows = key_mouse_rows(traj, self.FPS, F, 6, CAM_VALUE, lag=PRE_ROWS, key_order=KEY_ORDER)
        segs = [(a + 1, b + 1) for a, b in rows]  # row j acts first on frame j + 1 (motion_module.py:252-255)
        c2w = np.concatenate([np.broadcast_to(np.eye(4), (PRE_ROWS, 4, 4)), traj.poses(self.FPS, F - PRE_ROWS)])
        caveats = [f"frames 0-{PRE_ROWS} are the conditioning image (--num_pre_frames 5 encodes it as the known "
                   "latents 0-1, pipeline_matrixgame.py:455-503, 928-935): command rows 0-3 are held idle and the "
                   f"trajectory starts at frame {PRE_ROWS} (first commanded transition {PRE_ROWS}->{PRE_ROWS + 1}); "
                   f"the commanded poses hold the start pose until frame {PRE_ROWS}",
                   "mouse magnitude is the benchmark constant 0.05 per frame (condtions.py:56): the commanded turn "
                   "rate is not matched",
                   "move speed is Minecraft's own: the commanded speed is not matched",
                   "the prompt is not used by Matrix-Game 1.0 (the image is the semantic condition)",
                   "no seed: the generator is hard-coded to manual_seed(42) (inference_bench.py:189)"]
        if F > TRAINED_FRAMES:
            caveats.append(f"one clip of {F} frames: the release generates {TRAINED_FRAMES}-frame clips "
                           "(inference_bench.py:253) and needs >= 80 GB for those; longer clips are out of its range")
        if F - 1 > n + PRE_ROWS:
            caveats.append(f"{F - 1 - n - PRE_ROWS} trailing frames (to reach 4k + 1) carry no command")
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
            arrays={"keyboard_condition": kb, "mouse_condition": ms, "c2w": c2w},
            files={"actions.npz": {"keyboard_condition": kb, "mouse_condition": ms}, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": None,
                        "note": "no camera model: the model's field of view is not defined"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"video_length": F, "image": case.image, "pre_rows": PRE_ROWS,
                   "output_video": f"{Path(case.image).stem}_actions.mp4" if case.image else None},
        )
