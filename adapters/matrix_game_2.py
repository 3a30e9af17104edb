"""Matrix-Game 2.0 (SkyworkAI/Matrix-Game, Matrix-Game-2/, MIT): per-frame keyboard and mouse, 352x640 video.

Conventions this adapter relies on, read at Matrix-Game-2/ of commit 3ceb3114b65ff2c70ce9c3d6cab207b340ebe650
(docs/probes/matrix-game-2.md):

- ``keyboard_cond`` [1, F, 4] multi-hot in the order **[W, S, A, D]** and ``mouse_cond`` [1, F, 2] in the order
  **[pitch, yaw]** (Matrix-Game-2/utils/conditions.py:73-87). One row per video frame (inference.py:113, 122, 130).
- Magnitude: ``CAM_VALUE = 0.1`` (utils/conditions.py:77); signs: ``camera_up = [+0.1, 0]``,
  ``camera_r = [0, +0.1]`` (utils/conditions.py:78-87; pipeline/causal_inference.py:20-29): + pitch is up, + yaw is
  right. No degrees-per-unit exists in the code: the model's turn rate cannot be set, so every commanded yaw or pitch
  rate maps to +-0.1 and the mismatch is recorded as a caveat.
- Frames: F = 4 L - 3 video frames for L latents, L a multiple of 3 (inference.py:113; causal_inference.py:200;
  configs/inference_yaml/inference_universal.yaml:15). Blocks of 3 latents: the first block is 9 frames, later
  ones 12 (causal_inference.py:117-121).
- fps: the writer uses ``export_to_video(..., fps=12)`` (utils/visualize.py:167, 186); the README's "25 fps" is a
  generation speed. 20 s keys are 240 frames; frame 0 is the conditioning image.
- No action file is read: ``inference.py`` draws random benchmark actions (inference.py:120-131). Integration B: a
  patch replaces ``conditional_dict['keyboard_cond' / 'mouse_cond']`` with the arrays of ``actions.npz``.
- No camera model (regime 1); image resize-cropped to 352x640 (inference.py:41-45, 99); rolling KV window of 6
  latents, no sink (configs/distilled_model/universal/config.json:42, 47).
- **Row timing, decided by the action module's window** (wan/modules/action_module.py:219-227 for the mouse,
  :335-344 for the keyboard): both conditions are front-padded with ``pad_t = 4 * windows_size = 12`` copies of row 0
  and latent i reads rows ``[4i - 12, 4i)`` of the unpadded sequence (:225/:227 and :341/:344, the slice end
  ``i * 4 + pad_t``). Latent i >= 1 holds video frames 4i-3 .. 4i, so its newest row is 4i-1, one before its last
  frame, and the final row 4(L-1) is never read while row 0 is (and pads the window). Row j is therefore the command
  that takes frame j to frame j+1: **row j = the command active at time j / 12**, the convention of Matrix-Game 3's
  integrator ("row i moves frame i to frame i+1", Matrix-Game-3/utils/utils.py:23-28), of Matrix-Game 1.0's same
  window (matrixgame/model_variants/matrixgame_dit_src/motion_module.py:252-255 at SkyworkAI/Matrix-Game f1bf6e6,
  zero-padded) and of Solaris's config, which changes MG2's left padding "from 12 to allow action i to influence
  frame i" (solaris-wm/solaris config/.../single_player.yaml:57, as reported in issue 18's work; not re-read here). Version 0.1 wrote the command of time (j-1)/12 into row j (one
  frame late); ``row_timing=lagged`` (``--model-args``) reproduces it for comparison, the default is ``aligned``.
  Training-data alignment is not in the public code: the window is the strongest evidence there is.
- Launcher/CLI defaults that touch control, and what worldgate passes: ``--num_output_frames`` 150 latents
  (inference.py:25) -> L of the case; ``--config_path`` default inference_universal.yaml (inference.py:21, mode
  universal = keyboard [W,S,A,D] + mouse) -> passed explicitly; the random ``Bench_actions_universal`` actions
  (inference.py:120-131) -> replaced by actions.npz through the patch. The mouse scale (``CAM_VALUE`` 0.1) is a
  constant of the action vocabulary, not an option. Paths: ``--pretrained_model_path`` (the VAE folder, default
  ``Matrix-Game-2.0`` in the checkout, inference.py:28) -> ``CKPT`` (the ``hf download Skywork/Matrix-Game-2.0``
  folder), ``--output_folder`` (default ``outputs/``, inference.py:24) -> the runner's ``OUT``.

Integration B, worldgate's patch (:data:`PATCH`, marker ``worldgate-patch matrix-game-2 v1``): ``--actions NPZ`` is
added after ``--pretrained_model_path`` (inference.py:28), and right after the script stores its own random
``keyboard_cond`` (inference.py:120-131, anchor ``conditional_dict['keyboard_cond'] = keyboard_condition``, :131) the
file's ``keyboard_cond`` [F, 4] and ``mouse_cond`` [F, 2] replace both entries of ``conditional_dict``, built exactly
as the script builds its own (``tensor.unsqueeze(0).to(device=self.device, dtype=self.weight_dtype)``, :122, :130),
through ``worldgate_inputs.py`` created beside ``inference.py``. The local ``keyboard_condition`` /
``mouse_condition`` are replaced too, so the overlay of ``demo_icon.mp4`` (:148-151, 157) draws the commanded keys. A
file whose rows are not ``(num_output_frames - 1) * 4 + 1`` (:113) or whose config mode is not ``universal`` (:95-96)
is refused. The random draw still happens first (it only consumes Python's ``random`` state, after the noise,
:110-112, 121), so nothing else the script does changes.

Installing and weights: ``pip install -r requirements.txt`` then ``python setup.py develop`` (README.md:31-34; the
folder has no other requirement file). The command reads, under ``CKPT`` (``hf download Skywork/Matrix-Game-2.0``,
README.md:41): ``base_distilled_model/base_distill.safetensors`` (``--checkpoint_path``, inference.py:66-69),
``Wan2.1_VAE.pth`` (inference.py:55; wan/vae/wanx_vae.py:42), the CLIP image encoder
``models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth`` and its tokenizer folder ``xlm-roberta-large/``
(wan/vae/wanx_vae.py:43-44): ``weights_patterns``.

GPUs: one per case. The README needs "at least 24 GB" on one GPU (README.md:20) and runs ``python inference.py``
(README.md:47-55); inference.py has no process group, sequence parallelism or FSDP (one ``torch.device("cuda")``,
inference.py:35), so ``gpus>1`` is refused.

Output contract: ``process_video(..., self.args.output_folder + '/demo.mp4', ..., process_icon=False)``
(inference.py:156) writes the raw frames as ``OUT/demo.mp4``; the next line writes ``OUT/demo_icon.mp4`` with the key
and mouse overlay (inference.py:157; utils/visualize.py:176-183), which would be the newest .mp4 under OUT, so the plan
names ``demo.mp4`` in ``extra["output_video"]``. Writer fps 12 (utils/visualize.py:167, 186), 640x352 frames (noise
44x80 latents, inference.py:110-112; the Wan VAE upsamples x8), F = 4L - 3 frames for ``--num_output_frames L``
(first block of 3 latents decodes to 9 frames, later blocks to 12: pipeline/causal_inference.py:351-353,
117-121).
"""

from __future__ import annotations

import math

from worldgate.trajectories.core import Move

from .base import AdapterError, AdapterInfo, NativeInputs, horizontal_fov_deg, image_arg
from .keymouse import key_mouse_rows
from .patching import Edit, Patch
from .repo import RepoAdapter, RepoSpec

CAM_VALUE = 0.1
ROW_TIMINGS = ("aligned", "lagged")  # row j = command at j/12 (decided by action_module.py:225, 341) / v0.1's (j-1)/12
KEY_ORDER = (Move.FORWARD, Move.BACK, Move.STRAFE_LEFT, Move.STRAFE_RIGHT)  # [W, S, A, D]
COMMIT = "3ceb3114b65ff2c70ce9c3d6cab207b340ebe650"
OUTPUT_VIDEO = "demo.mp4"  # inference.py:156 (no overlay); demo_icon.mp4 (:157) carries the key/mouse overlay

#: worldgate's own module beside inference.py: the file input ``--actions`` reads
INPUTS_MODULE = '''"""worldgate's action input for Matrix-Game 2.0's inference.py (``--actions NPZ``, added by worldgate's
patch).

The file holds ``keyboard_cond`` [F, 4] ([W, S, A, D]) and ``mouse_cond`` [F, 2] ([pitch, yaw]) float rows, one per
video frame (F = (num_output_frames - 1) * 4 + 1), as worldgate's plan writes them. They replace the random
``Bench_actions_universal`` rows of ``conditional_dict``, built the way the script builds its own:
``tensor.unsqueeze(0).to(device=device, dtype=dtype)``.
"""

import numpy as np
import torch

#: the arrays of the file and their widths (universal mode: keyboard [W, S, A, D], mouse [pitch, yaw])
WIDTHS = {"keyboard_cond": 4, "mouse_cond": 2}


def load_actions(path, num_frames, mode, device, dtype):
    """``(keyboard_cond, mouse_cond)`` [1, F, 4] / [1, F, 2] tensors from ``path``; a file that does not fit this run
    (mode, rows, widths, non-finite values) is refused."""
    if mode != "universal":
        raise ValueError(f"{path}: worldgate's actions are universal-mode rows (keyboard [W, S, A, D] + mouse "
                         f"[pitch, yaw]); this config's mode is {mode!r}: use "
                         "configs/inference_yaml/inference_universal.yaml")
    with np.load(path, allow_pickle=False) as z:
        missing = sorted(set(WIDTHS) - set(z.files))
        if missing:
            raise ValueError(f"{path}: missing {missing} (worldgate's actions.npz holds keyboard_cond and mouse_cond)")
        rows = {k: np.asarray(z[k], dtype=np.float32) for k in WIDTHS}
    for k, width in WIDTHS.items():
        if rows[k].shape != (num_frames, width):
            raise ValueError(f"{path}: {k} is {rows[k].shape}, this run needs {(num_frames, width)} (rows = "
                             "(num_output_frames - 1) * 4 + 1 for --num_output_frames latents)")
        if not np.isfinite(rows[k]).all():
            raise ValueError(f"{path}: {k} holds non-finite values")
    return tuple(torch.from_numpy(rows[k]).unsqueeze(0).to(device=device, dtype=dtype) for k in WIDTHS)
'''

#: worldgate's patch: ``--actions NPZ`` in place of the random benchmark actions (module docstring)
PATCH = Patch(
    model="matrix-game-2", version="1",
    edits=(
        Edit("inference.py",
             '    parser.add_argument("--pretrained_model_path", type=str, default="Matrix-Game-2.0", help="Path to '
             'the VAE model folder")\n',
             '    parser.add_argument("--actions", type=str, default=None,\n'
             '                        help="worldgate: .npz of keyboard_cond [F, 4] and mouse_cond [F, 2] rows, used in "\n'
             '                             "place of the random benchmark actions")\n'),
        Edit("inference.py", "        conditional_dict['keyboard_cond'] = keyboard_condition\n",
             "        if getattr(self.args, 'actions', None):\n"
             "            from worldgate_inputs import load_actions\n"
             "\n"
             "            keyboard_condition, mouse_condition = load_actions(self.args.actions, num_frames, mode,\n"
             "                                                               self.device, self.weight_dtype)\n"
             "            conditional_dict['keyboard_cond'] = keyboard_condition\n"
             "            conditional_dict['mouse_cond'] = mouse_condition\n"),
        Edit("worldgate_inputs.py", None, INPUTS_MODULE),
    ),
    summary="--actions NPZ: keyboard_cond [F, 4] and mouse_cond [F, 2] replace the random benchmark actions",
    flags=("--actions",),
)


class MatrixGame2(RepoAdapter):
    MODEL_ARGS = RepoAdapter.MODEL_ARGS + ("row_timing",)  # read by plan (issue 29.5: other keys are refused)
    repo_spec = RepoSpec(
        clone="https://github.com/SkyworkAI/Matrix-Game (folder Matrix-Game-2/)", entry="inference.py",
        hf_id="Skywork/Matrix-Game-2.0", patch=PATCH, commit=COMMIT, subdir="Matrix-Game-2",
        patch_doc="adapters/matrix_game_2.py (PATCH: --actions NPZ loads keyboard_cond/mouse_cond into "
                  "conditional_dict); docs/probes/matrix-game-2.md",
        weights_patterns=("base_distilled_model/base_distill.safetensors", "Wan2.1_VAE.pth",
                          "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth", "xlm-roberta-large/*"),
        requirements=("requirements.txt",))
    info = AdapterInfo(
        name="matrix-game-2", version="0.3", width=640, height=352, fps=12.0,
        fps_source="writer: export_to_video(fps=12) (utils/visualize.py:167,186); README 25 fps is generation speed",
        chunk_frames=12, first_chunk_frames=9, duration_unit="frames (4L-3, L latents a multiple of 3)",
        control="keyboard [W,S,A,D] + mouse [pitch,yaw] per frame", pose_convention="none",
        intrinsics_regime=1, aspect_policy="crop", context_policies=("sliding_window",),
        hf_ids=("Skywork/Matrix-Game-2.0",), repository="https://github.com/SkyworkAI/Matrix-Game (Matrix-Game-2/)",
        licence="MIT", integration="B",
        notes="no action-file input upstream: a patch loads actions.npz into conditional_dict; mouse magnitude fixed; "
              "row j = command at j/12 (action_module.py:225, 341: latent i reads rows [4i-12, 4i)); "
              "model arg row_timing=lagged gives v0.1's (j-1)/12",
    )
    FPS = 12.0
    multi_gpu = ""  # one GPU per case: README.md:20, 47-55; inference.py:35 (no process group, SP or FSDP)

    def plan(self, case) -> NativeInputs:
        self.gpus()  # gpus>1 is refused: no multi-GPU inference in the official code
        timing = self.model_args.get("row_timing", "aligned")
        if timing not in ROW_TIMINGS:
            raise AdapterError(f"matrix-game-2: row_timing must be one of {ROW_TIMINGS}, got {timing!r}")
        lag = 1 if timing == "lagged" else 0
        traj = case.trajectory
        n = traj.n_frames(self.FPS)  # frames after the conditioning frame
        L = 3 * math.ceil((n + 4) / 12)  # smallest multiple of 3 with 4L - 3 >= n + 1
        F = 4 * L - 3
        kb, ms, segs = key_mouse_rows(traj, self.FPS, F, 4, CAM_VALUE, lag=lag, key_order=KEY_ORDER)
        if lag:
            kb[0], ms[0] = kb[1], ms[1]  # row 0 (the conditioning frame) is the padding source: the first command
        caveats = ["mouse magnitude is the model's constant 0.1 per frame: the commanded turn rate is not matched",
                   "move speed is the model's own: the commanded speed is not matched",
                   "the prompt is not used by Matrix-Game 2.0 (image-only conditioning)",
                   "row j carries the command of time j/12 (the transition from frame j to j+1), decided by the action "
                   "module's window (wan/modules/action_module.py:225, 341: latent i reads rows [4i-12, 4i)); the "
                   "training data's own alignment is not public" if not lag else
                   "row_timing=lagged: row j carries the command of time (j-1)/12 (v0.1); the action module's window "
                   "(action_module.py:225, 341) suggests j/12, i.e. this is one frame late"]
        if F - 1 > n:
            caveats.append(f"{F - 1 - n} trailing frames (to reach 4L-3 with L % 3 == 0) carry no command")
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        cmd = (f"python inference.py --config_path configs/inference_yaml/inference_universal.yaml --checkpoint_path "
               f"CKPT/base_distilled_model/base_distill.safetensors --img_path {image_arg(case)} "
               f"--num_output_frames {L} --seed SEED --pretrained_model_path CKPT --output_folder OUT "
               f"--actions actions.npz  # --actions is added by the worldgate patch")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=640, height=352,
            fps=self.FPS, n_frames=F, segment_frames=segs, arrays={"keyboard_cond": kb, "mouse_cond": ms},
            files={"actions.npz": {"keyboard_cond": kb, "mouse_cond": ms}, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": None,
                        "note": "no camera model: the model's field of view is not defined"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_output_frames": L, "image": case.image, "row_timing": timing, "output_video": OUTPUT_VIDEO},
        )
