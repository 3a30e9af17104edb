"""ForgeWM (asdfo123/ForgeWM, Apache-2.0): the Matrix-Game 2.0 architecture (Wan2.1-1.3B I2V) retrained on open
GameFactory Minecraft data with Causal Forcing; per-frame keyboard and mouse, 352x640 at 12 fps.

Conventions, read at asdfo123/ForgeWM commit b0b06a6fd82099ffab318417c054788e1da01d2e:

- ``keyboard_condition`` [1, F, 6] with columns **[W, S, A, D, 0, 0]** (inference.py:36-48: forward 0, back 1,
  left 2, right 3; ``keyboard_dim_in: 6``, configs/stage3_dmd.yaml ``action_config``; the training data has 4 columns
  W/S/A/D, scripts/prepare_data.py:97-112, padded to 6 by utils/dataset.py:202-204). A/D strafe. Columns 4 and 5 are
  written 0.
- ``mouse_condition`` [1, F, 2] **[pitch, yaw]**: ``look_up`` = mouse[0] = +0.10, ``turn_right`` = mouse[1] = +0.10
  (inference.py:33, 49-56; the data's pitch sign is flipped to this convention, scripts/prepare_data.py:92-106). The
  training rows are GameFactory's raw ``pitch_delta`` / ``yaw_delta`` (prepare_data.py:105-106), whose unit this
  repository does not state, so every look maps to the inference palette's +-0.10 and the rate is a caveat.
- Frames: ``--num_frames`` L latent frames, F = 4 (L - 1) + 1 action rows and video frames (inference.py:187-188,
  270); causal blocks of ``num_frame_per_block: 3`` latents (configs/stage3_dmd.yaml), asserted
  ``num_frames % num_frame_per_block == 0`` (pipeline/causal_inference.py:109; ``independent_first_frame: false``,
  configs/default.yaml): L % 3 == 0, F = 4L - 3. Rolling window ``local_attn_size: 6`` latents, ``sink_size: 0``.
- Row timing: the action module pads 12 rows with row 0 and gives latent i the rows [4i - 12, 4i)
  (wan/modules/action_module.py:223-231), so row j first acts on frame j + 1: row j holds the command of time j / fps,
  and row 0 doubles as the padding.
- Size: the image is **stretched** to 352x640 (``Resize((height, width))``, inference.py:73-81; training frames were
  crop-resized, prepare_data.py:52-71, so a non-16:9 image is distorted: a caveat). No camera model (regime 1).
- fps: the writer is ``imageio.get_writer(..., fps=12)`` (inference.py:298).
- Seed: ``--seed`` (default 0, inference.py:191) seeds the noise (inference.py:117): passed.
- Weights: ``huggingface-cli download asdfo123/ForgeWM --local-dir ./ckpts`` (README "Download Models & Data"); the
  stage-3 (4-step DMD) generator is ``ckpts/stage3/model.pt``, passed as ``--checkpoint_path CKPT/stage3/model.pt``.
  The Matrix-Game 2.0 base (VAE, CLIP) is read from ``model_kwargs.model_name: ./ckpts/MG2-base``
  (configs/stage3_dmd.yaml), relative to the checkout (``bash scripts/download_models.sh`` puts it there).

Launcher defaults that touch control or output (inference.py:176-191) and what worldgate passes: ``--config_path``
configs/stage3_dmd.yaml (passed: 4-step DMD, ``denoising_step_list`` 1000/750/500/250), ``--num_frames`` 21 (the
plan's L), ``--height`` 352 / ``--width`` 640 (passed), ``--seed`` 0 (SEED), ``--action_type`` (replaced by the patch's
file). No caps or smoothing exist.

Integration B: ``inference.py`` builds actions only from a named ``--action_type`` (inference.py:36-68, 182-185). The
worldgate patch (:data:`PATCH`, marker ``worldgate-patch forgewm v1``) adds ``--actions NPZ`` (after ``--seed``,
inference.py:191) and, just before ``build_conditional_dict`` (inference.py:278), replaces ``make_action``'s tensors
(inference.py:272-276) with the file's ``keyboard_condition`` [F, 6] and ``mouse_condition`` [F, 2] as [1, F, dim]
tensors of the same dtype, through ``worldgate_inputs.py`` created beside ``inference.py``; a file whose row count is
not ``(num_frames - 1) * 4 + 1`` (inference.py:270) or whose widths differ from the config's ``keyboard_dim_in`` /
``mouse_dim_in`` is refused. Nothing else changes: the config, the image path and the writer are the script's.

Installing and weights: ``pip install -r requirements.txt`` then ``pip install flash-attn --no-build-isolation``
(README.md:89-90; the repository has no other requirement file, pyproject or environment file). The command reads
only ``stage3/model.pt`` of ``asdfo123/ForgeWM`` (README.md:100; ``weights_patterns``); the Matrix-Game 2.0 base
comes from ``Skywork/Matrix-Game-2.0`` through ``bash scripts/download_models.sh`` into the checkout's
``ckpts/MG2-base`` (scripts/download_models.sh:29-30, 61-76).

GPUs: one per case. The README runs inference on a single GPU only ("Inference (Single GPU)", README.md:106-115,
``CUDA_VISIBLE_DEVICES=0 python inference.py``); torchrun appears only for training (README.md:134-137), and
inference.py has no process group, sequence parallelism or FSDP (inference.py:194-196: one ``cuda`` device), so
``gpus>1`` is refused.

Output: ``--output_path OUT/<case>.mp4`` (the plan's ``output_video``, relative to OUT): ``imageio.get_writer(...,
fps=12)`` (inference.py:295-302) writes 640x352 frames (noise at height/8 x width/8, inference.py:118, decoded by the
Wan VAE), F = 4L - 3 of them for ``--num_frames L`` (``decode_to_pixel`` of L latents,
pipeline/causal_inference.py:310).
"""

from __future__ import annotations

import math

from worldgate.trajectories.core import Move

from .base import AdapterInfo, NativeInputs, horizontal_fov_deg, image_arg
from .keymouse import key_mouse_rows
from .patching import Edit, Patch
from .repo import RepoAdapter, RepoSpec

CAM_VALUE = 0.10  # inference.py:33
KEY_ORDER = (Move.FORWARD, Move.BACK, Move.STRAFE_LEFT, Move.STRAFE_RIGHT)  # [W, S, A, D, -, -]
FPS = 12.0
WIDTH, HEIGHT = 640, 352
COMMIT = "b0b06a6fd82099ffab318417c054788e1da01d2e"

#: worldgate's own module beside inference.py: the file input ``--actions`` reads
INPUTS_MODULE = '''\
"""worldgate's action input for ForgeWM\'s inference.py (``--actions NPZ``, added by worldgate's patch).

The file holds ``keyboard_condition`` [F, keyboard_dim] and ``mouse_condition`` [F, mouse_dim] float rows, one per video
frame, as worldgate's plan writes them. They replace ``make_action``'s tensors: the same [1, F, dim] shape and dtype.
"""

import numpy as np
import torch


def load_actions(path, mouse_like, keyboard_like):
    """``(mouse, keyboard)`` from ``path``, shaped and typed like ``make_action``'s ``mouse_like`` and
    ``keyboard_like``; a file that does not fit this run (rows or widths) is refused."""
    with np.load(path) as z:
        missing = {"keyboard_condition", "mouse_condition"} - set(z.files)
        if missing:
            raise ValueError(f"{path}: missing {sorted(missing)} (worldgate's actions.npz holds keyboard_condition "
                             "and mouse_condition)")
        keyboard = np.asarray(z["keyboard_condition"], dtype=np.float32)
        mouse = np.asarray(z["mouse_condition"], dtype=np.float32)
    for name, got, like in (("keyboard_condition", keyboard, keyboard_like), ("mouse_condition", mouse, mouse_like)):
        want = tuple(like.shape[1:])
        if got.shape != want:
            raise ValueError(f"{path}: {name} is {got.shape}, this run needs {want} (rows = (num_frames - 1) * 4 + 1 "
                             "for --num_frames latents; width = the config's action_config)")
        if not np.isfinite(got).all():
            raise ValueError(f"{path}: {name} holds non-finite values")
    return (torch.from_numpy(mouse).unsqueeze(0).to(mouse_like.dtype),
            torch.from_numpy(keyboard).unsqueeze(0).to(keyboard_like.dtype))
'''

#: worldgate's patch: ``--actions NPZ`` in place of ``--action_type``'s palette (module docstring)
PATCH = Patch(
    model="forgewm", version="1",
    edits=(
        Edit("inference.py", '    parser.add_argument("--seed", type=int, default=0)\n',
             '    parser.add_argument("--actions", type=str, default="",\n'
             '                        help="worldgate: .npz of keyboard_condition [F, 6] and mouse_condition [F, 2] "\n'
             '                             "rows, used in place of --action_type")\n'),
        Edit("inference.py", "    conditional_dict = build_conditional_dict(\n",
             "    if args.actions:\n"
             "        from worldgate_inputs import load_actions\n"
             "\n"
             "        mouse_cond, keyboard_cond = load_actions(args.actions, mouse_cond, keyboard_cond)\n"
             "\n", where="before"),
        Edit("worldgate_inputs.py", None, INPUTS_MODULE),
    ),
    summary="--actions NPZ: keyboard_condition [F, 6] and mouse_condition [F, 2] replace make_action's palette",
    flags=("--actions",),
)


class ForgeWM(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/asdfo123/ForgeWM", entry="inference.py", hf_id="asdfo123/ForgeWM",
        patch=PATCH, patch_doc="adapters/forgewm.py (PATCH: --actions NPZ replaces make_action)", commit=COMMIT,
        subdir="", weights_patterns=("stage3/model.pt",), requirements=("requirements.txt",))
    info = AdapterInfo(
        name="forgewm", version="0.1", width=WIDTH, height=HEIGHT, fps=FPS,
        fps_source="writer: imageio.get_writer(fps=12) (inference.py:298)",
        chunk_frames=12, first_chunk_frames=9, duration_unit="frames (4L-3, L latents a multiple of 3)",
        control="keyboard [W,S,A,D,-,-] + mouse [pitch,yaw] per frame (Minecraft)", pose_convention="none",
        intrinsics_regime=1, aspect_policy="stretch", context_policies=("sliding_window",),
        hf_ids=("asdfo123/ForgeWM", "Skywork/Matrix-Game-2.0"), repository="https://github.com/asdfo123/ForgeWM",
        licence="Apache-2.0", integration="B",
        notes="Matrix-Game 2.0 architecture on GameFactory data, 4-step DMD; a patch loads actions.npz in place of "
              "--action_type; mouse magnitude fixed at 0.10",
    )
    FPS = FPS
    multi_gpu = ""  # single-GPU inference only (README.md:106-115); torchrun is for training (README.md:134-137)

    def plan(self, case) -> NativeInputs:
        self.gpus()  # gpus>1 is refused: no multi-GPU inference in the official code
        traj = case.trajectory
        n = traj.n_frames(self.FPS)  # frames after the conditioning frame
        L = 3 * math.ceil((n + 4) / 12)  # smallest multiple of 3 with 4L - 3 >= n + 1
        F = 4 * L - 3
        kb, ms, rows = key_mouse_rows(traj, self.FPS, F, 6, CAM_VALUE, key_order=KEY_ORDER)
        segs = [(a + 1, b + 1) for a, b in rows]  # row j acts first on frame j + 1 (action_module.py:223-231)
        caveats = ["mouse magnitude is the inference palette's 0.10 per frame (inference.py:33): the commanded turn "
                   "rate is not matched",
                   "move speed is the model's own: the commanded speed is not matched",
                   "the prompt is not used by ForgeWM (image and action conditioning only)"]
        if case.image_size and abs(case.image_size[0] / case.image_size[1] - WIDTH / HEIGHT) > 1e-3:
            caveats.append(f"the {case.image_size[0]}x{case.image_size[1]} image is stretched to {WIDTH}x{HEIGHT} "
                           "(inference.py:73-81), not cropped as the training frames were")
        if F - 1 > n:
            caveats.append(f"{F - 1 - n} trailing frames (to reach 4L-3 with L % 3 == 0) carry no command")
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        cmd = (f"python inference.py --config_path configs/stage3_dmd.yaml --checkpoint_path CKPT/stage3/model.pt "
               f"--image_path {image_arg(case)} --num_frames {L} --height {HEIGHT} --width {WIDTH} --seed SEED "
               f"--output_path OUT/{case.id}.mp4 --actions actions.npz  "
               "# --actions is added by the worldgate patch")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=WIDTH, height=HEIGHT,
            fps=self.FPS, n_frames=F, segment_frames=segs,
            arrays={"keyboard_condition": kb, "mouse_condition": ms},
            files={"actions.npz": {"keyboard_condition": kb, "mouse_condition": ms}, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": None,
                        "note": "no camera model: the model's field of view is not defined"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_frames": L, "image": case.image, "output_video": f"{case.id}.mp4"},
        )
