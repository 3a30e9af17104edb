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

Integration B: the script has no command-line arguments at all. The worldgate patch (marker ``--num_chunks``) adds
``--cases JSON`` (a list of ``{"prompt", "image", "actions"}`` rows read in place of prompts/demo.yaml's
``[prompt, image, action_json]`` triples), ``--num_chunks N``, ``--seed N`` and ``--ckpt_dir DIR`` (the
``checkpoints/`` prefix of the config's paths), and writes to ``$WORLDGATE_OUT`` when it is set.
"""

from __future__ import annotations

import json
import math

import numpy as np

from worldgate.trajectories.core import Look, Move

from .base import AdapterInfo, NativeInputs, horizontal_fov_deg
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
        hf_id="MeiGen-AI/Infinite-World", patches={"scripts/infworld_inference.py": "--num_chunks"},
        patch_doc="adapters/infinite_world.py (module docstring: --cases, --num_chunks, --seed, --ckpt_dir)")
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

    def plan(self, case) -> NativeInputs:
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
            extra={"num_chunks": C, "image": case.image, "working_size": [w, h]},
        )
