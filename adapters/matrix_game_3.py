"""Matrix-Game 3.0 (SkyworkAI/Matrix-Game, Matrix-Game-3/, Apache-2.0): per-frame keyboard + mouse, 704x1280 video.

Conventions this adapter relies on, read at Matrix-Game-3/ of commit 71c3cd7f741311f8100f6cf9cde942b6c1378d11 (fork
efiop/Matrix-Game, upstream commits only: the ``fetch`` snapshot of SkyworkAI/Matrix-Game stops at the 1.0 release,
f1bf6e6, and does not hold this commit; docs/probes/matrix-game-3.md). Paths below are relative to Matrix-Game-3/.

- Inputs per frame: ``keyboard_condition_all`` [1, F, 6] in the order **[W, S, A, D, 0, 0]** and
  ``mouse_condition_all`` [1, F, 2] in the order **[pitch, yaw]** (utils/utils.py:104-117; utils/conditions.py:73-75,
  93; pipeline/inference_interactive_pipeline.py:46-49). Labels: ``camera_up = [+0.1, 0]``, ``camera_r = [0, +0.1]``
  (utils/conditions.py:77-87), interactive key ``I`` = up = ``[+0.1, 0]`` and ``L`` = right = ``[0, +0.1]``
  (inference_interactive_pipeline.py:36-44); the overlay draws +pitch as the cursor moving up
  (utils/visualize.py:20-21, 35-40).
- The camera branch is not an input: the pipeline integrates the actions into poses itself
  (``compute_all_poses_from_actions`` + ``get_extrinsics``, utils/utils.py:14-36, 108-116) and builds Plücker rays
  from them (pipeline/inference_pipeline.py:446-462). Integration: state ``[x, y, z, pitch, yaw]`` from zeros, stored
  in float32 (utils/utils.py:20); row i of the actions moves frame i to frame i+1 (utils/utils.py:23-28);
  ``pitch += 15 * mouse[0]``, ``yaw += 15 * mouse[1]`` degrees, each ignored when |value| < 0.02
  (utils/utils.py:10-12, 49-53); yaw wrapped to [-180, 180] (:55-59); W/S/A/D move 12.35 units per frame along the
  average yaw, ``dx = cos*fwd - sin*right``, ``dy = sin*fwd + cos*right`` (:8, 62-91): an Unreal-style world (X
  forward, Y right, Z up). ``get_extrinsics``: ``R = Rz(yaw) Ry(pitch) Rx(roll)``, then ``R @ R_init`` whose columns
  send camera x -> +Y, y -> -Z, z -> +X (an OpenCV camera in that world), translation x 0.01 (units -> metres)
  (utils/cam_utils.py:563-591). This adapter re-computes that integration (``extrinsics_all``) so the goldens pin it.
- **Pitch sign trap.** ``Ry(pitch)`` sends the forward axis X to (cos p, 0, -sin p): with Z up, **+pitch tilts the
  integrated camera down** (camera frame: forward -> +y, image-down), although +mouse[0] is labelled "up" everywhere
  else in the code (see above). Yaw is consistent: +yaw turns forward towards +Y = right (camera +x). The adapter
  emits **U as +mouse[0]** by default (``pitch_sign=+1``, the labelled convention; ``--model-args pitch_sign=-1``
  emits U as -mouse[0], for when the GPU check below shows the video following the integrator) and lets the
  pipeline integrate it with its own function, as in
  the authors' demos: ``get_extrinsics`` takes UE-style ``[roll, pitch, yaw]`` + positions in centimetres, the format
  of engine-recorded data, so the training poses were very likely converted by the same function and the
  mirrored pitch is then consistent between training and inference (inference, not verifiable from code). Our own
  OpenCV poses are never substituted for the pipeline's. **Open question** (``PITCH_QUESTION``, shown in
  ``AdapterInfo.pose_convention`` / ``notes`` and in the caveats of every case that pitches): does the video tilt
  up for U? The GPU check (``PITCH_CHECK``): plan a 2 s ``U`` case, run it, and measure the mean vertical optical
  flow over frames 1-34 (or track the horizon row): the scene moving **down** in the frame (flow dy > 0) means the
  camera tilted up (the labels hold); moving up means the video follows the integrator (+mouse[0] = down), and U
  must then be emitted as -mouse[0].
- Frames: ``num_frames = 57 + 40 (num_iterations - 1)`` (pipeline/inference_pipeline.py:385-392; README.md:55):
  the first clip is 57 frames (15 latents), each later clip re-uses the last 4 latents and adds 10 latents = 40
  frames (:443-444, 606-607, 655). Frame 0 of the video is the conditioning image (latent 0 at timestep 0).
- fps: the writer is ``export_to_video(..., fps=17)`` (utils/visualize.py:167, called by
  pipeline/inference_pipeline.py:694 and pipeline/vae_worker.py:116); ``sample_fps = 16``
  (wan/configs/shared_config.py:17) is never read, README "40fps" is generation speed (README.md:15). A 20 s key is
  340 frames. The writer also draws key/mouse overlays on every frame (utils/visualize.py:157-164): the patch's
  ``--no_overlay`` (below) keeps the raw decoded frames.
- No action file is read: ``get_data`` draws random ``Bench_actions_universal`` actions (utils/utils.py:104) and
  ``--interactive`` reads one key pair per clip from stdin (inference_interactive_pipeline.py:31-65, 478-514).
  Integration B: a patch makes ``get_data`` return the arrays of ``actions.npz`` instead of the random ones; poses
  are then integrated by the unchanged code.
- Intrinsics (regime 2): fixed 90 degrees on both axes from the working size, ``fx = W/2, fy = H/2, cx = W/2,
  cy = H/2`` = [640, 352, 640, 352] at 704x1280 (utils/cam_utils.py:593-603; pipeline/inference_pipeline.py:410).
  The image is centre-cropped to the 704:1280 aspect and bicubic-resized (utils/transform.py:10-23, 133-149, 323-354).
- Launcher/CLI defaults that touch control, and what worldgate passes: none of generate.py's flags caps, smooths or
  scales the actions (generate.py:43-78); the mouse unit (15 deg, dead zone 0.02) and move step (12.35) are
  constants of utils/utils.py:8-12. ``--num_iterations`` 12 (generate.py:56) -> the case's count;
  ``--num_inference_steps`` 50 (:63) -> 3 as the README runs the distilled model (README.md:54); ``--size`` ->
  704*1280 (explicit); ``--interactive`` off (the patch's actions.npz instead); ``--output_dir`` ./output (:58) ->
  the runner's OUT.
- Context: no KV cache; each clip attends to the 4 previous latents plus 5 memory latents chosen by field-of-view
  overlap of the integrated poses (pipeline/inference_pipeline.py:419-422, 471-485; utils/cam_utils.py:298-363).

worldgate's patch (:data:`PATCH`, marker ``worldgate-patch matrix-game-3 v1``): generate.py gets ``--actions NPZ`` and
``--no_overlay`` (after ``--use_base_model``, generate.py:78) and hands both to ``worldgate_inputs.configure`` right
after ``args = _parse_args()`` (:192). In ``get_data``, right after the random ``Bench_actions_universal`` rows are
taken (utils/utils.py:104-106), ``worldgate_inputs.actions`` returns the file's ``keyboard_cond`` [F, 6] and
``mouse_cond`` [F, 2] as float32 tensors, the type ``combine_data`` gives (utils/conditions.py:5-8), for
``num_frames`` = 57 + 40 (num_iterations - 1) (pipeline/inference_pipeline.py:385-394); the unchanged code then
integrates the poses from them and casts them (utils/utils.py:108-117). A file whose rows are not ``num_frames`` is
refused. ``--no_overlay`` makes ``process_video`` (utils/visualize.py:146) write the decoded frames with its own
``export_to_video(..., fps=17)`` and draw nothing (through an environment variable, so the spawned async VAE worker,
pipeline/vae_worker.py:37-41, 116, sees it too). Nothing else changes.

Installing and weights: ``pip install -r requirements.txt`` plus FlashAttention (README.md:33-39; the folder has no
other requirement file). Under ``CKPT/Matrix-Game-3.0`` (the ``--ckpt_dir`` the command passes) the default run reads
``base_distilled_model/`` (pipeline/inference_pipeline.py:114-117; ``--use_base_model`` is not passed), the T5
``models_t5_umt5-xxl-enc-bf16.pth`` and tokenizer ``google/umt5-xxl`` (inference_pipeline.py:90-91;
wan/configs/config.py:9-10), ``MG-LightVAE_v2.pth`` (``--vae_type`` default mg_lightvae_v2, generate.py:70;
pipeline/vae_config.py:19-21) and ``Wan2.2_VAE.pth`` (its encoder, vae_config.py:28): ``weights_patterns``.

GPUs: the README runs ``torchrun --nproc_per_node=$NUM_GPUS generate.py --size 704*1280 --dit_fsdp --t5_fsdp ...``
(README.md:24, 54) and test.sh adds ``--ulysses_size`` = the process count (test.sh:11-13, 46-52); generate.py
refuses ``--ulysses_size`` other than the world size and turns FSDP off when it is 1 (generate.py:16-21, 101-118).
``gpus=N`` (``multi_gpu``) runs ``python -m torch.distributed.run --standalone --nproc_per_node=N generate.py`` and,
for N > 1, ``--dit_fsdp --t5_fsdp --ulysses_size N``; gpus=1 runs the same launcher with one process and no flags.

Output contract: ``process_video(..., f"{self.output_dir}/{save_name}.mp4", ...)`` (pipeline/inference_pipeline.py:
694-701; ``--output_dir OUT --save_name <case id>``): ``OUT/<case id>.mp4`` (``extra["output_video"]``), written by rank
0 only, at 17 fps (utils/visualize.py:167), 1280x704 frames (lat 44x80 from ``max_area`` 704*1280,
inference_pipeline.py:401-408), 57 + 40 (num_iterations - 1) frames (15 latents decoded in the first clip, the last 10
of each later one, :607, 644-655).
"""

from __future__ import annotations

import math
from array import array

import numpy as np

from worldgate.trajectories.core import LOOK_RATE, Move

from .base import AdapterError, AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg, image_arg
from .patching import Edit, Patch
from .repo import RepoAdapter, RepoSpec, torchrun

W, H = 1280, 704
FPS = 17.0
FIRST_CLIP, CLIP_NEW = 57, 40
KEY_ORDER = (Move.FORWARD, Move.BACK, Move.STRAFE_LEFT, Move.STRAFE_RIGHT)  # [W, S, A, D] (+ 2 unused columns)
DEG_PER_UNIT = 15.0  # MOUSE_PITCH_SENSITIVITY = MOUSE_YAW_SENSITIVITY (utils/utils.py:10-11)
MOUSE_THRESHOLD = 0.02  # dead zone of the pose integration (utils/utils.py:12, 49-50)
WSAD_OFFSET = 12.35  # units per frame (utils/utils.py:8)
UNIT_TO_M = 0.01  # get_extrinsics scales translation by 0.01 (utils/cam_utils.py:590)
DEMO_MOUSE = 0.1  # CAM_VALUE of the built-in and interactive actions (utils/conditions.py:77)
#: camera axes in the integration world (columns: camera x -> +Y, y -> -Z, z -> +X) (utils/cam_utils.py:583-589)
R_INIT = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
PITCH_QUESTION = ("open: +mouse[0] is labelled 'camera_up' (utils/conditions.py:77-87), but the model's own pose "
                  "integration turns +mouse[0] into a camera tilting down (Ry sign, utils/cam_utils.py:576); which way "
                  "the video tilts is unverified without weights")
PITCH_CHECK = ("GPU check: render a 2 s U case and measure the mean vertical optical flow (or the horizon row) over "
               "frames 1-34: scene moving down in the frame = camera tilts up (labels hold, pitch_sign=+1); moving up "
               "= U must be -mouse[0] (pitch_sign=-1)")
#: pitch_sign=+1: U = +mouse[0] (the labels, the default); -1: U = -mouse[0] (the integrator's sign)
PITCH_SIGNS = {"+1": 1, "1": 1, "-1": -1}
COMMIT = "71c3cd7f741311f8100f6cf9cde942b6c1378d11"
CKPT_DIR = "CKPT/Matrix-Game-3.0"

#: worldgate's own module beside generate.py: the file input ``--actions`` and ``--no_overlay``
INPUTS_MODULE = '''"""worldgate's inputs for Matrix-Game 3.0's generate.py (``--actions NPZ``, ``--no_overlay``, added by
worldgate's patch).

``--actions``: the file holds ``keyboard_cond`` [F, 6] ([W, S, A, D, 0, 0]) and ``mouse_cond`` [F, 2] ([pitch, yaw])
float rows, one per video frame (F = 57 + 40 (num_iterations - 1)), as worldgate's plan writes them. ``get_data``
returns them in place of the random ``Bench_actions_universal`` rows, as the float32 tensors ``combine_data`` builds;
the pipeline integrates its poses from them as it would from its own.
``--no_overlay``: ``process_video`` writes the decoded frames without the key and mouse overlay (same writer and fps).
"""

import os

import numpy as np
import torch

#: the arrays of the file and their widths
WIDTHS = {"keyboard_cond": 6, "mouse_cond": 2}
#: set by configure, read by process_video (an environment variable: the spawned async VAE worker inherits it)
NO_OVERLAY_ENV = "WORLDGATE_NO_OVERLAY"
_actions = None


def configure(args):
    """Take ``--actions`` and ``--no_overlay`` from generate.py's arguments."""
    global _actions
    _actions = getattr(args, "actions", None) or None
    if getattr(args, "no_overlay", False):
        os.environ[NO_OVERLAY_ENV] = "1"
    else:
        os.environ.pop(NO_OVERLAY_ENV, None)


def actions(keyboard_condition_all, mouse_condition_all, num_frames):
    """The file's ``(keyboard, mouse)`` rows when ``--actions`` was given, else the script's own; a file that does not
    fit this run (rows, widths, non-finite values) is refused."""
    if not _actions:
        return keyboard_condition_all, mouse_condition_all
    with np.load(_actions, allow_pickle=False) as z:
        missing = sorted(set(WIDTHS) - set(z.files))
        if missing:
            raise ValueError(f"{_actions}: missing {missing} (worldgate's actions.npz holds keyboard_cond and "
                             "mouse_cond)")
        rows = {k: np.asarray(z[k], dtype=np.float32) for k in WIDTHS}
    for k, width in WIDTHS.items():
        if rows[k].shape != (num_frames, width):
            raise ValueError(f"{_actions}: {k} is {rows[k].shape}, this run needs {(num_frames, width)} (rows = "
                             "57 + 40 * (num_iterations - 1))")
        if not np.isfinite(rows[k]).all():
            raise ValueError(f"{_actions}: {k} holds non-finite values")
    return torch.from_numpy(rows["keyboard_cond"]), torch.from_numpy(rows["mouse_cond"])


def no_overlay():
    return os.environ.get(NO_OVERLAY_ENV) == "1"
'''

#: worldgate's patch: ``--actions NPZ`` for get_data, ``--no_overlay`` for the writer (module docstring)
PATCH = Patch(
    model="matrix-game-3", version="1",
    edits=(
        Edit("generate.py",
             '    parser.add_argument("--use_base_model", action="store_true", help="Enable base model inference.")\n',
             '    parser.add_argument("--actions", type=str, default=None,\n'
             '                        help="worldgate: .npz of keyboard_cond [F, 6] and mouse_cond [F, 2] rows, used by "\n'
             '                             "get_data in place of the random benchmark actions")\n'
             '    parser.add_argument("--no_overlay", action="store_true",\n'
             '                        help="worldgate: write the decoded frames without the key/mouse overlay")\n'),
        Edit("generate.py", "    args = _parse_args()\n",
             "    import worldgate_inputs\n"
             "\n"
             "    worldgate_inputs.configure(args)\n"),
        Edit("utils/utils.py", "    mouse_condition_all = actions['mouse_condition']\n",
             "    import worldgate_inputs\n"
             "\n"
             "    keyboard_condition_all, mouse_condition_all = worldgate_inputs.actions(keyboard_condition_all,\n"
             "                                                                          mouse_condition_all, num_frames)\n"),
        Edit("utils/visualize.py",
             "def process_video(input_video, output_video, config, mouse_icon_path, mouse_scale=1.0, mouse_rotation=0, "
             "default_frame_res=(704, 1280)):\n",
             "    import worldgate_inputs\n"
             "\n"
             "    if worldgate_inputs.no_overlay():\n"
             "        export_to_video([frame / 255 for frame in input_video], output_video, fps=17)\n"
             "        return\n"),
        Edit("worldgate_inputs.py", None, INPUTS_MODULE),
    ),
    summary="--actions NPZ: get_data returns keyboard_cond [F, 6] / mouse_cond [F, 2] in place of the random actions; "
            "--no_overlay: the writer draws no keys or mouse",
    flags=("--actions", "--no_overlay"),
)


def num_iterations_for(n_frames_after_image: int) -> int:
    """Smallest num_iterations whose 57 + 40 (k - 1) frames hold the image frame plus n commanded frames."""
    return 1 + max(0, math.ceil((n_frames_after_image + 1 - FIRST_CLIP) / CLIP_NEW))


def integrate_actions(keyboard: np.ndarray, mouse: np.ndarray) -> np.ndarray:
    """The pipeline's pose integration: (F, 5) [x, y, z, pitch, yaw] states, float32 as stored (utils/utils.py:14-93).

    Sequential like upstream; every state is rounded to float32 as upstream stores it (``array('f')`` does the
    rounding), so the result is bit-identical to the numpy version at a fraction of the time."""
    F = len(keyboard)
    st = array("f", bytes(4 * 5 * F))
    kb = np.asarray(keyboard, np.float64)[:, :4].tolist()
    ms = np.asarray(mouse, np.float64).tolist()
    for i in range(F - 1):
        j = 5 * i
        x, y, z, pitch, yaw = st[j], st[j + 1], st[j + 2], st[j + 3], st[j + 4]
        w, s, a, d = kb[i]
        mp, my = ms[i]
        new_pitch = pitch + (DEG_PER_UNIT * mp if abs(mp) >= MOUSE_THRESHOLD else 0.0)
        new_yaw = yaw + (DEG_PER_UNIT * my if abs(my) >= MOUSE_THRESHOLD else 0.0)
        while new_yaw > 180:
            new_yaw -= 360
        while new_yaw < -180:
            new_yaw += 360
        fwd = WSAD_OFFSET if (w > 0.5 and s < 0.5) else (-WSAD_OFFSET if (s > 0.5 and w < 0.5) else 0.0)
        right = WSAD_OFFSET if (d > 0.5 and a < 0.5) else (-WSAD_OFFSET if (a > 0.5 and d < 0.5) else 0.0)
        if abs(fwd) > 0.1 and abs(right) > 0.1:
            fwd, right = math.copysign(8.73, fwd), math.copysign(8.73, right)  # DIAGONAL_OFFSET (utils/utils.py:9)
        avg = math.radians((yaw + new_yaw) / 2.0)
        c, sn = math.cos(avg), math.sin(avg)
        st[j + 5:j + 10] = array("f", (x + c * fwd - sn * right, y + sn * fwd + c * right, z, new_pitch, new_yaw))
    return np.frombuffer(st, np.float32).reshape(F, 5).copy()


def extrinsics_from_states(states: np.ndarray) -> np.ndarray:
    """``get_extrinsics`` (utils/cam_utils.py:563-591): c2w (F, 4, 4) float64, camera axes OpenCV, world UE-style."""
    s = states.astype(np.float64)
    p, q = np.radians(s[:, 3]), np.radians(s[:, 4])
    cq, sq, cp, sp = np.cos(q), np.sin(q), np.cos(p), np.sin(p)
    n = len(s)
    Rz = np.zeros((n, 3, 3))
    Rz[:, 0, 0], Rz[:, 0, 1], Rz[:, 1, 0], Rz[:, 1, 1], Rz[:, 2, 2] = cq, -sq, sq, cq, 1.0
    Ry = np.zeros((n, 3, 3))
    Ry[:, 0, 0], Ry[:, 0, 2], Ry[:, 1, 1], Ry[:, 2, 0], Ry[:, 2, 2] = cp, sp, 1.0, -sp, cp
    out = np.tile(np.eye(4), (n, 1, 1))
    out[:, :3, :3] = Rz @ Ry @ R_INIT  # roll = 0, so Rx = I
    out[:, :3, 3] = s[:, :3] * UNIT_TO_M
    return out


def center_crop_box(w0: int, h0: int) -> tuple[int, int, int, int]:
    """``center_crop_th_tw(th=704, tw=1280)`` (utils/transform.py:133-149): (top, left, height, width)."""
    tr = H / W
    if h0 / w0 > tr:
        new_h, new_w = int(w0 * tr), w0
    else:
        new_h, new_w = h0, int(h0 / tr)
    return int(round((h0 - new_h) / 2.0)), int(round((w0 - new_w) / 2.0)), new_h, new_w


class MatrixGame3(RepoAdapter):
    MODEL_ARGS = RepoAdapter.MODEL_ARGS + ("pitch_sign",)  # read by plan (issue 29.5: other keys are refused)
    repo_spec = RepoSpec(
        clone="https://github.com/SkyworkAI/Matrix-Game (folder Matrix-Game-3/)",
        entry="generate.py",
        hf_id="Skywork/Matrix-Game-3.0",
        patch=PATCH, commit=COMMIT, subdir="Matrix-Game-3",
        patch_doc="adapters/matrix_game_3.py (PATCH: --actions NPZ for get_data, --no_overlay); "
                  "docs/probes/matrix-game-3.md",
        weights_patterns=tuple(f"Matrix-Game-3.0/{f}" for f in (
            "base_distilled_model/*", "models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*", "MG-LightVAE_v2.pth",
            "Wan2.2_VAE.pth")),
        requirements=("requirements.txt",),
    )
    info = AdapterInfo(
        name="matrix-game-3", version="0.2", width=W, height=H, fps=FPS,
        fps_source="writer: export_to_video(fps=17) (utils/visualize.py:167); config sample_fps=16 is unused; "
                   "README 40fps is generation speed",
        chunk_frames=CLIP_NEW, first_chunk_frames=FIRST_CLIP,
        duration_unit="frames (57 + 40 (num_iterations - 1))",
        control="keyboard [W,S,A,D,0,0] + mouse [pitch,yaw] per frame; Plücker rays from the pipeline's own "
                "integration of those actions",
        pose_convention="none as input; integrated inside: c2w, OpenCV camera in a UE world (X fwd, Y right, Z up), "
                        "0.1235 m/frame, 15 deg per mouse unit; PITCH SIGN OPEN: +mouse[0] is labelled up but "
                        "integrates to a camera tilting down (utils/cam_utils.py:576)",
        intrinsics_regime=2, aspect_policy="crop", context_policies=("sliding_window", "fov"),
        hf_ids=("Skywork/Matrix-Game-3.0",), repository="https://github.com/SkyworkAI/Matrix-Game (Matrix-Game-3/)",
        licence="Apache-2.0", integration="B",
        notes="no action-file input upstream: a patch makes get_data return actions.npz and writes without the "
              "key/mouse overlay (--no_overlay); memory = 5 latents by FOV overlap, no KV cache; "
              f"pitch: {PITCH_QUESTION}; model arg pitch_sign=+1 (default: U = +mouse[0]) or -1; {PITCH_CHECK}",
    )
    FPS = FPS
    context_note = ('it has no KV cache: each clip is one bidirectional 56-frame forward '
                    '(pipeline/inference_pipeline.py:385-387) whose memory is a hard-coded max_mem_f = 5 latents chosen '
                    'by FoV overlap (:420, 475-481; utils/cam_utils.py:298-363), and no flag of generate.py:43-78 touches'
                    ' it')
    multi_gpu = ("torchrun --nproc_per_node=N generate.py --dit_fsdp --t5_fsdp --ulysses_size N (README.md:24, 54; "
                 "test.sh:11-13, 46-52; generate.py:16-21, 101-118)")

    def pitch_sign(self) -> int:
        v = self.model_args.get("pitch_sign", "+1")
        key = str(v).strip() if not isinstance(v, bool) else ""
        if key not in PITCH_SIGNS:
            raise AdapterError(f"matrix-game-3: pitch_sign must be +1 (U = +mouse[0], the labelled 'camera_up') or -1 "
                               f"(U = -mouse[0]), got {v!r}")
        return PITCH_SIGNS[key]

    def plan(self, case) -> NativeInputs:
        sign = self.pitch_sign()
        gpus = self.gpus()
        traj = case.trajectory
        n = traj.n_frames(self.FPS)  # frames after the conditioning frame
        iters = num_iterations_for(n)
        F = FIRST_CLIP + CLIP_NEW * (iters - 1)
        segs = [(int(a), int(b)) for a, b in traj.segment_frames(self.FPS, n)]
        kb = np.zeros((F, 6), np.float32)
        ms = np.zeros((F, 2), np.float32)
        seg_mouse = []
        for k, (s, (a, b)) in enumerate(zip(traj.segments, segs)):
            where = f"case {case.id}, segment {k + 1} ({s.to_text()})"
            if b <= a:
                if not s.is_hold:
                    raise UnsupportedMotion(f"{where}: shorter than one frame at {self.FPS:g} fps; Matrix-Game 3.0 "
                                            "takes one action row per output frame")
                seg_mouse.append([0.0, 0.0])
                continue
            if s.move is not Move.IDLE:
                kb[a:b, KEY_ORDER.index(s.move)] = 1.0
            # one mouse value per segment: the segment's commanded angle change spread over its rows, in the
            # pipeline's unit of 15 degrees per frame (so every segment ends exactly on its commanded angle)
            ys, ps = LOOK_RATE[s.look]
            d_yaw, d_pitch = ys * traj.yaw_rate * s.seconds, sign * ps * traj.pitch_rate * s.seconds
            m = [d_pitch / ((b - a) * DEG_PER_UNIT), d_yaw / ((b - a) * DEG_PER_UNIT)]  # [pitch, yaw]
            for v, axis in zip(m, ("pitch", "yaw")):
                if v != 0.0 and abs(v) < MOUSE_THRESHOLD:
                    raise UnsupportedMotion(
                        f"{where}: {axis} rate {abs(v) * DEG_PER_UNIT * self.FPS:.3g} deg/s is below the pipeline's "
                        f"dead zone (|mouse| >= {MOUSE_THRESHOLD} = {MOUSE_THRESHOLD * DEG_PER_UNIT * self.FPS:.3g} "
                        "deg/s at 17 fps); the pose branch would not turn")
            ms[a:b] = np.asarray(m, np.float32)
            seg_mouse.append([float(np.float32(m[0])), float(np.float32(m[1]))])
        states = integrate_actions(kb, ms)
        extr = extrinsics_from_states(states)
        caveats = [
            "move speed is the model's fixed 12.35 units = 0.1235 m per frame (2.10 m/s at 17 fps); the commanded "
            f"{traj.speed:g} m/s is not matched, and Plücker translation is unit-normalised per clip anyway",
            "mouse values are the commanded angle per frame / 15 deg (the pipeline's unit); the model's own "
            f"benchmark and interactive actions use +-{DEMO_MOUSE} (1.5 deg/frame)",
            "mouse and keyboard are cast to bfloat16 for the action branch (utils/utils.py:117); the pose "
            "integration uses the float32 values",
        ]
        if any(ms[:, 0]):
            caveats.append(f"pitch sign {PITCH_QUESTION}: this plan emits U as {'+' if sign > 0 else '-'}mouse[0] "
                           f"(pitch_sign={sign:+d}; --model-args pitch_sign={-sign:+d} emits the other sign) "
                           f"({PITCH_CHECK})")
        if F - 1 > n:
            caveats.append(f"{F - 1 - n} trailing frames (to reach 57 + 40k) carry no action: the camera holds")
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        intr = {"regime": 2, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": 90.0,
                "native_vfov_deg": 90.0, "native": [W / 2, H / 2, W / 2, H / 2], "native_size": [W, H],
                "note": "fixed 90 deg on both axes from the working size (utils/cam_utils.py:593-603): "
                        "anisotropic at 16:9; the case intrinsics are not used"}
        if case.image_size:
            top, left, ch, cw = center_crop_box(*case.image_size)
            intr["crop"] = {"top": top, "left": left, "height": ch, "width": cw, "then": "bicubic resize to 704x1280"}
            if case.intrinsics:
                intr["case_hfov_after_crop_deg"] = horizontal_fov_deg(case.intrinsics[0], cw)
        sp = f" --dit_fsdp --t5_fsdp --ulysses_size {gpus}" if gpus > 1 else ""  # README.md:54; test.sh:46-47
        cmd = torchrun(gpus, (
            f"generate.py --size 704*1280{sp} --ckpt_dir {CKPT_DIR} --image {image_arg(case)} "
            f"--prompt \"$(cat prompt.txt)\" --num_iterations {iters} --num_inference_steps 3 --seed SEED "
            f"--save_name {case.id} --output_dir OUT --actions actions.npz --no_overlay  "
            "# --actions and --no_overlay are added by the worldgate patch"))
        clips = [(0, FIRST_CLIP)] + [(FIRST_CLIP + CLIP_NEW * k - 56, FIRST_CLIP + CLIP_NEW * k) for k in range(1, iters)]
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=self.FPS, n_frames=F, segment_frames=segs,
            arrays={"keyboard_cond": kb, "mouse_cond": ms, "extrinsics_all": extr},
            files={"actions.npz": {"keyboard_cond": kb, "mouse_cond": ms}, "prompt.txt": case.prompt,
                   "command.txt": cmd + "\n"},
            intrinsics=intr, prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_iterations": iters, "image": case.image, "segment_mouse_pitch_yaw": seg_mouse,
                   "pitch_sign": sign, "gpus": gpus, "output_video": f"{case.id}.mp4",
                   "clip_windows": clips, "new_frames_per_clip": [FIRST_CLIP] + [CLIP_NEW] * (iters - 1),
                   "extrinsics_all": "re-computed pipeline integration (utils/utils.py:14-116), not an input"},
        )
