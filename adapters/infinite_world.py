"""Infinite-World (MeiGen-AI/Infinite-World, MIT): a Wan2.1-1.3B world model with pose-free hierarchical memory,
conditioned per frame on a move class and a view class; 81-frame chunks, written at 30 fps.

Conventions, read at MeiGen-AI/Infinite-World commit 272478ea793171c50e80042dc113f0beadcd50a2:

- Actions: a JSON list with one ``{"move": ..., "view": ...}`` per video frame (scripts/infworld_inference.py:95-102;
  assets/example_case/0001.json). ``move`` is one of ``no-op, go forward, go back, go left, go right`` and four
  forward/back + left/right pairs; ``view`` one of ``no-op, turn up, turn down, turn left, turn right`` and four
  up/down + left/right pairs (``MOVE_ACTION_MAP``, ``VIEW_ACTION_MAP``, infworld_inference.py:34-58; index 9
  "uncertain" is a training label, never written). W/S/A/D map to go forward/back/left/right (A/D translate: turning
  is the view channel), L/R/^/v to turn left/right/up/down. Classes carry no magnitude: speed and turn rate are the
  model's own (caveats).
- Frames: chunks of ``validation_data.num_frames: 81`` frames = 21 latents (configs/infworld_config.yaml:66-67;
  infworld_inference.py:321-324); each chunk re-encodes the whole video so far and appends 80 new frames
  (infworld_inference.py:327-370), so a run is 1 + 80 C frames for C chunks. Chunk k reads the action rows
  [80k, 80k + 81) (``curr_start = len(video) - 1``, infworld_inference.py:335-339): row j belongs to video frame j
  (frame 0 is the image), and rows past the list are padded with no-op (infworld_inference.py:341-346). worldgate
  writes row j = the command of time j / fps and every row after the trajectory explicitly as no-op.
- fps: ``save_silent_video(..., fps=30)`` (infworld_inference.py:380): 30 fps (a 20 s key is 600 frames).
- Size: the image's aspect (H/W) picks the nearest bucket of ``ASPECT_RATIO_627_F64``
  (infworld_inference.py:117-121, 189; infworld/configs/bucket_config.py:83-87), then resize-to-cover and centre
  crop (infworld_inference.py:68-80): the working size follows the case (3:2 -> 768x512, 16:9 -> 896x448,
  1:1 -> 640x640). No camera model (regime 1).
- Sampling: ``TEXT_CFG_SCALE = 5.0``, ``NUM_SAMPLING_STEPS = 30``, ``SHIFT = 7`` (infworld_inference.py:178-180)
  and the negative prompt (infworld_inference.py:195) are constants of the script, kept. The prompt is used
  (``prompts=[prompt]``, infworld_inference.py:362).
- Seed: ``GLOBAL_SEED = 42`` is a constant (infworld_inference.py:175-176); the patch makes it ``--seed``.
- Weights: ``hf download MeiGen-AI/Infinite-World`` into ``checkpoints/`` (README "Download checkpoints"):
  ``infinite_world_model.ckpt`` and ``models/{Wan2.1_VAE.pth, models_t5_umt5-xxl-enc-bf16.pth, google/umt5-xxl}``,
  paths fixed relative to the checkout in configs/infworld_config.yaml:9, 18-19, 59; the patch's ``--ckpt_dir``
  points them at ``ckpt``.

Launcher defaults that touch control or output, and what worldgate passes: ``NUM_CHUNKS = 13`` (1041 frames whatever
the actions, infworld_inference.py:181; passed: the plan's C), the prompt/image/action list ``prompts/demo.yaml``
(infworld_inference.py:188, 289-295; passed: cases.json), ``GLOBAL_SEED`` (SEED). No caps or smoothing exist.

Output: ``outputs/infworld-ckpt<step>-step30-cfg5.0/<task:04d>_<prompt[:30] with spaces as _>.mp4`` in the checkout
(infworld_inference.py:192, 230-234, 376-381), 30 fps, the bucket's W x H, 1 + 80 C frames (the image, then 80 new
frames per chunk: ``decoded_chunk[:, :, 1:]``, infworld_inference.py:319, 369-370). ``save_silent_video`` **appends**
to an existing file of that name (infworld/utils/data_utils.py:637-655), so a case re-run into the same folder would
stack the old and the new frames; the patch writes into ``$WORLDGATE_OUT`` when it is set and removes a stale file of
that name first, and the plan names the file (``plan.extra["output_video"]``, task 0) so the runner takes exactly it.

Multi-GPU: none for one case. infer_local.sh:22-30 launches ``torchrun --nproc_per_node=N``, but the script fixes
``context_parallel_size = 1`` (infworld_inference.py:154), so the N ranks are data-parallel over the prompt list
(``task_idx % dp_size != dp_rank``, infworld_inference.py:296): one case runs on one GPU whatever N is, and
``gpus>1`` is refused (spread cases over GPUs with accelerate launch instead).

Integration B: the script has no command-line arguments at all. worldgate's patch (:data:`PATCH`, applied by
``worldgate setup``) adds a worldgate-owned ``worldgate_inputs.py`` at the checkout root (``PROJECT_ROOT`` is on
``sys.path``, infworld_inference.py:24-25) and seven one-line calls into it in scripts/infworld_inference.py:
``--cases JSON`` (a list of ``{"prompt", "image", "actions"}`` rows read in place of prompts/demo.yaml's
``[prompt, image, action_json]`` triples), ``--num_chunks N``, ``--seed N`` (in place of ``GLOBAL_SEED`` before
``setup_seed``), ``--ckpt_dir DIR`` (the ``checkpoints/`` prefix of the config's paths), the output folder
``$WORLDGATE_OUT`` and the stale-file removal. Weights: ``ckpt`` is the folder holding ``infinite_world_model.ckpt``
and ``models/`` (the checkout's ``checkpoints/`` layout, README "Download checkpoints"); ``weights_patterns`` stays
empty because where those files sit inside the Hub repository (which also holds the code) is not stated in the code.
"""

from __future__ import annotations

import json
import math

import numpy as np

from worldgate.trajectories.core import Look, Move

from .base import AdapterInfo, NativeInputs, horizontal_fov_deg
from .patching import Edit, Patch
from .repo import RepoAdapter, RepoSpec

MOVE = {Move.IDLE: "no-op", Move.FORWARD: "go forward", Move.BACK: "go back", Move.STRAFE_LEFT: "go left",
        Move.STRAFE_RIGHT: "go right"}
VIEW = {Look.IDLE: "no-op", Look.PITCH_UP: "turn up", Look.PITCH_DOWN: "turn down", Look.YAW_LEFT: "turn left",
        Look.YAW_RIGHT: "turn right"}
#: infworld_inference.py:34-58 (class indices the model embeds)
MOVE_ACTION_MAP = {"no-op": 0, "go forward": 1, "go back": 2, "go left": 3, "go right": 4}
VIEW_ACTION_MAP = {"no-op": 0, "turn up": 1, "turn down": 2, "turn left": 3, "turn right": 4}
FPS = 30.0
CHUNK = 81  # frames per chunk, the first one shared with the video so far
NEW = CHUNK - 1
#: ASPECT_RATIO_627_F64 (infworld/configs/bucket_config.py:83-87): H/W -> [H, W]
BUCKETS = {0.26: (320, 1216), 0.38: (384, 1024), 0.50: (448, 896), 0.67: (512, 768), 0.82: (576, 704),
           1.00: (640, 640), 1.22: (704, 576), 1.50: (768, 512), 1.86: (832, 448), 2.00: (896, 448),
           2.50: (960, 384), 2.83: (1088, 384), 3.60: (1152, 320), 3.80: (1216, 320), 4.00: (1280, 320)}
COMMIT = "272478ea793171c50e80042dc113f0beadcd50a2"

#: worldgate's own module, created at the checkout root (on sys.path: infworld_inference.py:24-25)
INPUTS_PY = '''"""worldgate's inputs for Infinite-World's scripts/infworld_inference.py (worldgate's patch; not part of
Infinite-World, whose script takes no arguments).

--cases JSON     [{"prompt", "image", "actions"}, ...] in place of prompts/demo.yaml's [prompt, image, action_json]
--num_chunks N   in place of NUM_CHUNKS
--seed N         in place of GLOBAL_SEED (before setup_seed)
--ckpt_dir DIR   the weights folder in place of the config's checkpoints/ prefix
$WORLDGATE_OUT   when set, the output folder; a stale video of the same name is removed before it is written
                 (save_silent_video appends to an existing file)
"""
import argparse
import json
import os
import sys

CKPT_PREFIX = "checkpoints"
_ARGS = None


def _positive(text):
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be >= 1, not " + text)
    return n


def args():
    """The command line, parsed once (the stock script reads none: an unknown argument is an error)."""
    global _ARGS
    if _ARGS is None:
        ap = argparse.ArgumentParser(description="Infinite-World inference (worldgate inputs)")
        ap.add_argument("--cases", type=str, default=None, help="JSON list of {prompt, image, actions}")
        ap.add_argument("--num_chunks", type=_positive, default=None, help="chunks of 80 new frames")
        ap.add_argument("--seed", type=int, default=None, help="in place of GLOBAL_SEED")
        ap.add_argument("--ckpt_dir", type=str, default=None, help="the weights folder, in place of checkpoints/")
        _ARGS = ap.parse_args(sys.argv[1:])
        if _ARGS.ckpt_dir and not os.path.isdir(_ARGS.ckpt_dir):
            raise SystemExit("--ckpt_dir " + _ARGS.ckpt_dir + ": no such folder")
    return _ARGS


def active():
    a = args()
    return bool(a.cases or a.num_chunks or a.seed is not None or a.ckpt_dir or os.environ.get("WORLDGATE_OUT"))


def seed(default):
    a = args()
    return default if a.seed is None else a.seed


def num_chunks(default):
    a = args()
    return default if a.num_chunks is None else a.num_chunks


def rebase_checkpoints(config):
    """The config with every path under checkpoints/ moved under --ckpt_dir (in place)."""
    ckpt = args().ckpt_dir
    if not ckpt:
        return config
    from omegaconf import DictConfig, ListConfig
    ckpt = ckpt.rstrip("/")

    def walk(node):
        for k in (range(len(node)) if isinstance(node, (list, ListConfig)) else list(node.keys())):
            v = node[k]
            if isinstance(v, str) and v.startswith(CKPT_PREFIX + "/"):
                node[k] = ckpt + v[len(CKPT_PREFIX):]
            elif isinstance(v, (dict, list, DictConfig, ListConfig)):
                walk(v)

    walk(config)
    return config


def cases(default):
    """--cases as [prompt, image, action_json] triples (paths relative to the JSON file's folder), else default."""
    path = args().cases
    if not path:
        return default
    with open(path) as fh:
        rows = json.load(fh)
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for i, row in enumerate(rows):
        triple = [row["prompt"], os.path.join(base, row["image"]), os.path.join(base, row["actions"])]
        for p in triple[1:]:
            if not os.path.exists(p):
                raise SystemExit("--cases " + path + " row " + str(i) + ": no such file " + p)
        out.append(triple)
    return out


def output_dir(default):
    return os.environ.get("WORLDGATE_OUT") or default


def fresh(video_path):
    """Remove a stale video before save_silent_video, which would append to it (worldgate runs only)."""
    if active() and os.path.isfile(video_path):
        os.remove(video_path)
'''

ENTRY = "scripts/infworld_inference.py"
PATCH = Patch(
    model="infinite-world", version="1",
    summary="--cases JSON, --num_chunks N, --seed N, --ckpt_dir DIR (the config's checkpoints/ prefix); output in "
            "$WORLDGATE_OUT, a stale video removed first",
    flags=("--cases", "--num_chunks", "--seed", "--ckpt_dir"),
    edits=(
        Edit("worldgate_inputs.py", None, INPUTS_PY),
        Edit(ENTRY, "from infworld.utils.dataset_utils import is_vid, is_img\n", "import worldgate_inputs\n"),
        Edit(ENTRY, "GLOBAL_SEED = 42\n", "GLOBAL_SEED = worldgate_inputs.seed(GLOBAL_SEED)\n"),
        Edit(ENTRY, "NUM_CHUNKS = 13  # Number of video chunks to generate\n",
             "NUM_CHUNKS = worldgate_inputs.num_chunks(NUM_CHUNKS)\n"),
        Edit(ENTRY, "    args = OmegaConf.load(config_path)\n",
             "    args = worldgate_inputs.rebase_checkpoints(args)\n"),
        Edit(ENTRY, '    output_dir = os.path.join(OUTPUT_BASE, f"infworld-ckpt{ckpt_step}-step{NUM_SAMPLING_STEPS}'
                    '-cfg{TEXT_CFG_SCALE}")\n',
             "    output_dir = worldgate_inputs.output_dir(output_dir)\n"),
        Edit(ENTRY, "    target_prompts = OmegaConf.load(prompts_path).prompts\n",
             "    target_prompts = worldgate_inputs.cases(target_prompts)\n"),
        Edit(ENTRY, "        save_silent_video(video_buffer.to(local_rank), save_path, fps=30, quality=quality)\n",
             '        worldgate_inputs.fresh(save_path + ".mp4")\n', where="before"),
    ),
)


def output_name(prompt: str, task: int = 0) -> str:
    """The file the script writes for a task, relative to its output folder (infworld_inference.py:376-381)."""
    return f"{task:04d}_{prompt[:30].replace(' ', '_')}.mp4"


def working_size(image_size) -> tuple[int, int]:
    """(width, height) the model works at for an image of ``image_size`` = (width, height): the nearest bucket by
    H/W, the first listed on a tie (``sorted(..., key=abs(key - ratio))[0]``, infworld_inference.py:117-119)."""
    if not image_size:
        return BUCKETS[0.50][1], BUCKETS[0.50][0]
    ratio = image_size[1] / image_size[0]
    key = sorted(BUCKETS, key=lambda k: abs(k - ratio))[0]
    h, w = BUCKETS[key]
    return w, h


class InfiniteWorld(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/MeiGen-AI/Infinite-World", entry="scripts/infworld_inference.py",
        hf_id="MeiGen-AI/Infinite-World", commit=COMMIT, subdir="", patch=PATCH,
        patch_doc="adapters/infinite_world.py (PATCH: --cases, --num_chunks, --seed, --ckpt_dir, $WORLDGATE_OUT; "
                  "applied by worldgate setup)",
        requirements=("requirements.txt",))
    info = AdapterInfo(
        name="infinite-world", version="0.1", width=896, height=448, fps=FPS,
        fps_source="writer: save_silent_video(fps=30) (scripts/infworld_inference.py:380)",
        chunk_frames=NEW, first_chunk_frames=CHUNK, duration_unit="chunks of 80 new frames (1 + 80 C)",
        control="per frame: move class (go forward/back/left/right) + view class (turn up/down/left/right)",
        pose_convention="none", intrinsics_regime=1, aspect_policy="crop", context_policies=(),
        hf_ids=("MeiGen-AI/Infinite-World",), repository="https://github.com/MeiGen-AI/Infinite-World",
        licence="MIT (README; the repository has no LICENSE file)", integration="B",
        notes="working size follows the image's aspect (ASPECT_RATIO_627_F64 buckets; 896x448 listed for 16:9); "
              "a patch adds command-line inputs (the script has none)",
    )
    FPS = FPS
    #: one case on one GPU: torchrun in infer_local.sh:22-30 is data-parallel over prompts (context_parallel_size = 1,
    #: infworld_inference.py:154, 296)
    multi_gpu = ""

    def plan(self, case) -> NativeInputs:
        self.gpus()  # gpus>1 is refused: the official code has no multi-GPU run of one case
        traj = case.trajectory
        n = traj.n_frames(self.FPS)  # frames after the conditioning frame
        C = max(1, int(math.ceil(n / NEW)))
        F = 1 + NEW * C
        move = ["no-op"] * F
        view = ["no-op"] * F
        bounds = traj.boundaries()
        segs = []
        for s, t0, t1 in zip(traj.segments, bounds[:-1], bounds[1:]):
            a = int(math.ceil(round(t0 * self.FPS, 9)))  # rows (= frames) of the times in [t0, t1)
            b = int(math.ceil(round(t1 * self.FPS, 9)))
            segs.append((a, b))
            move[a:b] = [MOVE[s.move]] * (b - a)
            view[a:b] = [VIEW[s.look]] * (b - a)
        rows = [{"move": m, "view": v} for m, v in zip(move, view)]
        w, h = working_size(case.image_size)
        caveats = ["action classes carry no magnitude: move speed and turn rate are the model's own, the commanded "
                   "ones are not matched"]
        if F - 1 > n:
            caveats.append(f"{F - 1 - n} trailing frames (to fill the last 80-frame chunk) are no-op")
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        cases = [{"prompt": case.prompt, "image": case.image or "IMAGE", "actions": "actions.json"}]
        cmd = (f"python scripts/infworld_inference.py --cases cases.json --num_chunks {C} --seed SEED "
               "--ckpt_dir CKPT  # every argument is added by the worldgate patch")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=w, height=h,
            fps=self.FPS, n_frames=F, segment_frames=segs,
            arrays={"move": np.array([MOVE_ACTION_MAP[m] for m in move], np.int64),
                    "view": np.array([VIEW_ACTION_MAP[v] for v in view], np.int64)},
            files={"actions.json": json.dumps(rows, indent=1), "cases.json": cases, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": None,
                        "note": "no camera model: the model's field of view is not defined"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_chunks": C, "image": case.image, "working_size": [w, h],
                   # task 0 of cases.json, written into $WORLDGATE_OUT by the patched script
                   "output_video": output_name(case.prompt or "")},
        )
