"""ABot-World-0 (amap-cvlab/ABot-World, Apache-2.0): a causal Wan2.2-5B world model driven by eight binary keys,
one key state per 12-frame block, 704x1280 written at 12 fps.

Conventions, read at amap-cvlab/ABot-World commit e260168d3faa9407d741fa37c11f3eb335a4228f:

- Keys: **[W, A, S, D, I, J, K, L]** (web_client/config.py:59; pipeline/causal_inference.py:291-292), binary, one
  state per block: ``set_act`` broadcasts the 8 values over the block's latents (causal_inference.py:284-298).
  Conflict pairs W/S "forward/back", A/D "left/right", I/K "up/down", J/L "left/right" (config.py:60-65); the HUD
  groups I/J/K/L as the view keys ("视角") with I on top and J, K, L below (web_client/key_hud_ijkl.html:1-4). So W/S
  move, A/D strafe, I/K pitch up/down, J/L yaw left/right. No magnitude exists: the turn rate and speed are the
  model's own (caveats).
- Blocks: ``num_frame_per_block: 3`` latents (configs/long_forcing_dmd.yaml:18) x 4 frames = 12 frames per block
  (scripts/inference.py:182-183; ``FRAMES_PER_BLOCK = 12``), the first block decodes to 9 frames including the
  reference image (``FIRST_BLOCK_FRAMES = 9``, config.py:47-48). At ``VIDEO_FPS = 12`` (config.py:52) a block is
  1 s. worldgate keeps block 0 (frames 0-8) idle and starts the trajectory at block 1 (frame 9), so every later
  block is 12 frames and every 20 s key is exactly 20 blocks; segment durations are rounded to whole blocks (the
  same count for equal segments; a caveat when a duration changes), and a segment shorter than half a block is
  refused. The commanded poses in the plan hold the start pose for frames 0-8.
- Size: the reference image is scaled to cover and centre-cropped to 1280x704 (``ImageOps.fit``,
  causal_inference.py:269-276; ``STREAM_WIDTH/HEIGHT``, config.py:31-32). No camera model (regime 1).
- fps: the writer is ``imageio.get_writer(fps=VIDEO_FPS)`` = 12 (scripts/inference.py:144-156; config.py:52);
  the README's "16 FPS" is generation speed, and the shipped demo actions are recorded at 16 fps
  (web_client/datasets/actions/default_action.json) and resampled per block (scripts/inference.py:62-100).
- Seed: none: the block noise is ``torch.randn`` with no generator or seed (scripts/inference.py:249).
- Weights: ``hf download acvlab/ABot-World-0-5B-LF --local-dir ./checkpoints/ABot-World-0-5B-LF`` (README "Setup");
  the paths are fixed in configs/long_forcing_dmd.yaml:24, 31-36 and configs/default_config.yaml:5-6, relative to
  the checkout, and no command-line argument takes them: the patch's ``--ckpt_dir`` (below) points those paths at
  ``ckpt`` (same file names), so the weights given are the weights used.

Launcher defaults that touch control or output (scripts/inference.py:347-393) and what worldgate passes:
``--fps-blocks`` 3600 (one hour; passed: the plan's block count), ``--action-mode`` repeat (cycles the list when it is
short; passed: fixed), ``--quant-type`` all (runs 15 quantisation variants; passed: fp8-per-token, the config's
``quant_type``, configs/default_config.yaml:2-3), ``--vae_type`` (config; passed: taew2_2, default_config.yaml:1),
``--phase`` both (passed), ``--action-json`` (unused: ``--action-list`` overrides it, scripts/inference.py:192-198).
No caps or smoothing exist.

Integration B: the script conditions on a fixed reference image (``BENCH_REF_IMAGE``, scripts/inference.py:36-39,
188) and a fixed prompt ``"| unknown |"`` (scripts/inference.py:187: ``--prompt`` is parsed but never used). The
worldgate patch (marker ``--image``) adds ``--image PATH`` in place of ``BENCH_REF_IMAGE`` (and keys the reference
cache of scripts/inference.py:38-39 by that image) and ``--ckpt_dir DIR``, which replaces the
``checkpoints/ABot-World-0-5B-LF`` prefix of every weight path of the two configs. The prompt stays the script's (a
caveat).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from worldgate.trajectories.core import Look, Move, Segment, Trajectory

from .base import AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg, image_arg
from .repo import RepoAdapter, RepoSpec

KEY_ORDER = ("W", "A", "S", "D", "I", "J", "K", "L")  # web_client/config.py:59
KEY_OF_MOVE = {Move.FORWARD: 0, Move.STRAFE_LEFT: 1, Move.BACK: 2, Move.STRAFE_RIGHT: 3}
KEY_OF_LOOK = {Look.PITCH_UP: 4, Look.YAW_LEFT: 5, Look.PITCH_DOWN: 6, Look.YAW_RIGHT: 7}
FPS = 12.0
BLOCK = 12  # frames per block after the first
FIRST = 9  # frames of block 0, the reference image included
WIDTH, HEIGHT = 1280, 704
CKPT_DIR = "checkpoints/ABot-World-0-5B-LF"


class ABotWorld(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/amap-cvlab/ABot-World", entry="scripts/inference.py",
        hf_id="acvlab/ABot-World-0-5B-LF", patches={"scripts/inference.py": "--image"},
        patch_doc="adapters/abot_world.py (module docstring: --image PATH replaces BENCH_REF_IMAGE)")
    info = AdapterInfo(
        name="abot-world", version="0.1", width=WIDTH, height=HEIGHT, fps=FPS,
        fps_source="writer: imageio fps=VIDEO_FPS=12 (scripts/inference.py:144-156; web_client/config.py:52)",
        chunk_frames=BLOCK, first_chunk_frames=FIRST, duration_unit="blocks of 12 frames (1 s); block 0 = 9 frames",
        control="keys [W,A,S,D,I,J,K,L] per 12-frame block (I/K pitch, J/L yaw)", pose_convention="none",
        intrinsics_regime=1, aspect_policy="crop", context_policies=(),
        hf_ids=("acvlab/ABot-World-0-5B-LF",), repository="https://github.com/amap-cvlab/ABot-World",
        licence="Apache-2.0", integration="B",
        no_seed="its block noise is torch.randn without a seed or generator (scripts/inference.py:249)",
        notes="a patch adds --image and --ckpt_dir (upstream: a fixed image and config-relative weights); the "
              "script ignores --prompt; fp8-per-token quantisation as configured",
    )
    FPS = FPS

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        blocks, segs, kept = [], [], []
        caveats = []
        for i, s in enumerate(traj.segments):
            k = int(math.floor(s.seconds + 0.5))  # whole 1-s blocks (round half up)
            if k < 1:
                raise UnsupportedMotion(f"abot-world: segment {i + 1} ({s.to_text()}) lasts {s.seconds:g} s; the model "
                                        "takes one key state per 12-frame block (1 s at 12 fps): segments need at "
                                        "least 0.5 s")
            if abs(k - s.seconds) > 1e-9:
                caveats.append(f"segment {i + 1} ({s.to_text()}) rounded to {k} blocks = {k} s (one key state per "
                               "1-s block)")
            row = [0] * 8
            if s.move is not Move.IDLE:
                row[KEY_OF_MOVE[s.move]] = 1
            if s.look is not Look.IDLE:
                row[KEY_OF_LOOK[s.look]] = 1
            a = FIRST + BLOCK * len(blocks)
            blocks += [row] * k
            segs.append((a, FIRST + BLOCK * len(blocks)))
            kept.append(Segment(s.move, s.look, float(k)))
        rows = [[0] * 8] + blocks  # block 0: the conditioning block, held idle
        n = FIRST + BLOCK * len(blocks)
        timed = Trajectory(kept, speed=traj.speed, yaw_rate=traj.yaw_rate, pitch_rate=traj.pitch_rate)
        c2w = np.concatenate([np.broadcast_to(np.eye(4), (FIRST, 4, 4)), timed.poses(self.FPS, n - FIRST)])
        caveats += [f"block 0 (frames 0-{FIRST - 1}, the reference image and 8 generated frames) is held idle: the "
                    f"trajectory starts at frame {FIRST}",
                    "key control only: turn rate and move speed are the model's own, the commanded ones are not "
                    "matched",
                    "the prompt is not used: scripts/inference.py:187 fixes it to '| unknown |'",
                    "no seed: the noise is drawn unseeded (scripts/inference.py:249); runs are not reproducible"]
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        action_list = json.dumps(rows, separators=(",", ":"))
        cmd = (f"python scripts/inference.py --phase both --fps-blocks {len(rows)} --action-mode fixed "
               "--quant-type fp8-per-token --vae_type taew2_2 --action-list \"$(cat action_list.json)\" "
               f"--image {image_arg(case)} --ckpt_dir CKPT  # --image and --ckpt_dir are added by the worldgate patch")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=WIDTH, height=HEIGHT,
            fps=self.FPS, n_frames=n, segment_frames=segs,
            arrays={"block_keys": np.asarray(rows, np.int8), "c2w": c2w},
            files={"action_list.json": action_list, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": None,
                        "note": "no camera model: the model's field of view is not defined"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"blocks": len(rows), "key_order": list(KEY_ORDER), "image": case.image,
                   "ckpt_dir": str(Path(CKPT_DIR))},
        )
