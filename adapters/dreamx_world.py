"""DreamX-World-5B (AMAP-ML/DreamX-World, Apache-2.0): autoregressive key-string camera control, 704x1280 / 16 fps.

Conventions this adapter relies on, read at commit a1f4c6e5e45600718e5236955f2e0702e53fc275 (docs/probes/dreamx-world.md;
AR = inference_ar_forcing.py, TP = utils/trajectory_processor.py, PC = pipeline/pipeline_causal_camera.py):

- Model: the autoregressive DreamX-World-5B (``inference_ar_forcing.py``, long horizon, "up to 1-min, at 16 FPS",
  inference_README.md:110-111). The bidirectional 5B-Cam (inference_dreamx5b.py) stops at 7.5 s, too short for a 20 s key.
- Input: ``--data_path`` JSON list of ``{"image_path", "caption", "action_seq", "action_speed_list", "task_id"}``
  (AR:4-13, 273-277). Keys are lower-cased (AR:299) and tested by substring: ``w`` forward, ``s`` back, ``a`` left,
  ``d`` right, ``i`` tilt up, ``k`` tilt down, ``j`` pan left, ``l`` pan right; a string with no key letter (``" "``)
  stays still (TP:846-849, 893-900; inference_README.md:31-44).
- In the AR path ``action_speed_list`` is **not a speed**: entry i is a frame weight. Segment i gets
  ``max(1, round(N * w_i / sum(w)))`` of the N pixel frames and the last segment takes the remainder (TP:869-881).
  This adapter writes each weight as the exact frame count of its run with ``sum(w) == N``, so the rounding is exact
  (``N * w / N == w`` in floating point). The motion magnitude is fixed: ``speed=1.5`` is the default (TP:834) and
  the AR script passes none (AR:301-305), so every frame steps ``0.05 * 1.5 = 0.075`` units and ``1.5`` degrees
  (TP:887-888). A yaw or pitch rate above 1.5 deg/frame (24 deg/s at 16 fps) cannot be reached; lower rates are
  matched by pressing the look key on an evenly spread subset of the segment's frames (a caveat records either).
- Frame-to-action allocation (the off-by-one, resolved): the per-frame loop applies frame j's key *before* it stores
  frame j's pose (TP:902-940), so frame 0 already carries one step of the first action; the poses are then made
  relative to frame 0 (AR:59-71, 106-113). Frame 0's key is therefore absorbed: the transition from video frame j-1
  to j uses the key of frame j. This adapter writes frame 0 with the first command's key (one extra frame in the
  first run) and frame j >= 1 with the command active at time (j-1)/fps. (Naive weights [1, 1] over 645 frames give
  322 W frames but only 321 W steps, and 323 S steps: a W/S loop would not close.)
- Rotation: ``R <- R @ R_y(dyaw) @ R_x(dpitch)`` (local), ``l`` = +yaw (right), ``i`` = +pitch (up); translation is
  taken in the camera frame *after* this frame's rotation, ``p <- p + R @ (0.075 * local)`` (TP:105-116, 906-930);
  rows store w2c (TP:932-938). OpenCV axes (+X right, +Y down, +Z forward). So moves follow the pitched view and
  yaw turns about the camera's own up axis: a move or a yaw while the view is pitched has no exact key (raises).
- Frames: ``--num_output_frames`` L latents, L % 3 == 0 (PC:59-61; AR launcher comment inference_ar_forcing.sh:22),
  N = 4 (L - 1) + 1 pixel frames (AR:268). Latent 0 is the encoded image kept clean (AR:292-296; PC:151-152, 202);
  blocks of 3 latents (configs/dreamx-ar/causal_camera_forcing_5b.yaml:18): first chunk 9 frames, then 12. The
  camera is sampled at pixel frames 0, 1, 5, 9, ... (one per latent, AR:91-94), per chunk relative with
  ``--chunk_relative`` (AR:96-111; on in inference_ar_forcing.sh:30).
- fps: ``write_video(..., fps=args.fps)`` (AR:330), ``--fps`` default 16 (AR:158), launcher ``FPS=16``
  (inference_ar_forcing.sh:23). fps is not given to the model, only to the writer. (24 fps is the 5B-Cam's option.)
- Image: ``transforms.Resize((704, 1280))``, a stretch (AR:261-266); latents fixed at 44x80 (AR:295).
- Intrinsics regime 2: fixed normalised ``fx = 969.697/1920``, ``fy = 969.697/1080``, ``cx = cy = 0.5`` (AR:120-130);
  PRoPE uses only fx, fy (wan/modules/camera_prope.py:140-147). The ``fx=fy=0.8`` written into the 19-number rows
  (TP:835-838, 938) is never read by the AR path. The case's intrinsics are not used.
- KV cache: rolling window ``local_attn_size 12`` latents with ``sink_size 3``: the defaults of
  ``WanDiffusionCameraWrapper`` (utils/wan_wrapper.py:102-103), passed to ``CausalWanModel.from_config(path,
  local_attn_size=, sink_size=)`` (:116-117), where diffusers lets the keyword arguments win over the config.json's own
  15-16 (same values): editing config.json changes nothing. The YAML's ``model_kwargs`` reach the wrapper
  (pipeline/pipeline_causal_camera.py:14, 18-19), so a ``model_kwargs.local_attn_size`` / ``sink_size`` in the
  ``--config_path`` YAML sets them.

Context policies (``--context``, chunks = the model's 3-latent blocks: 9 frames, then 12). One block's self-attention
reads the first ``sink_size`` latents plus the last ``local_attn_size - sink_size`` latents of the cache, which holds
the block itself (wan/modules/causal_camera_model_2_2_prope_infinity.py:207-227); the cache is ``local_attn_size``
latents and evicts the oldest non-sink ones when full (:111-125; pipeline_causal_camera.py:256-260). So:
``sliding_window`` at budget B == ``local_attn_size 3(B+1)``, ``sink_size 3`` (block 0) or ``0`` with ``sink=False``;
``full_kv`` (or an unlimited budget) == ``local_attn_size L`` (the whole clip: never full, never rolls; ``-1`` would
allocate a fixed 18480-token = 21-latent cache, pipeline_causal_camera.py:256-260, too small past 7 blocks);
``fov`` is refused (the window is contiguous, :207-227; no retrieval code). The plan's ``--config_path`` then names
``dreamx_context.yaml``, derived at rollout time from the checkout's own causal_camera_forcing_5b.yaml with only the
two ``model_kwargs`` keys added, written beside a verbatim copy of its default_config.yaml (inference_ar_forcing.py:
241-244 loads that from the YAML's folder). RoPE is the model's own: window-relative once it rolls (:134-147). The
PRoPE camera branch has no cache (the pipeline's cache dicts have no ``prope_k``, pipeline_causal_camera.py:263-271;
model :433-445): it attends within the current block under every policy.

Launcher/CLI defaults that touch control, and what worldgate passes: the step sizes ``speed=1.5`` (TP:834: 0.075
units, 1.5 deg per frame) have no flag (the AR script passes none, AR:301-305), so the turn-rate cap of 24 deg/s
stays and is a caveat; ``--chunk_relative`` (store_true, off by default, AR:164; on in inference_ar_forcing.sh:30)
-> passed; ``--fps`` 16 (AR:158, writer only) -> 16; ``--num_output_frames`` 21 (AR:156) -> the case's L;
``--color_correction_strength`` 0.3 (AR:161) -> 1.0 as the launcher runs it (inference_ar_forcing.sh:27; not a control); ``--output_folder``
-> the runner's OUT; ``--model_name`` / ``--base_checkpoint_path`` -> under CKPT.

Output: ``OUT/<task_id>_<image parent folder>_<image stem>.mp4`` (AR:279-282; task_id is the case id), written once by
``torchvision.io.write_video(fps=16)`` (AR:330), 1280x704, N = 4 (L - 1) + 1 frames; a file already there is
skipped (AR:283-285), harmless in the runner's fresh OUT. Not declared in the plan (the parent folder is the image's
at run time): the runner's newest-mp4-in-OUT pick finds it.

Several GPUs for one case: none. The autoregressive launcher runs one plain ``python inference_ar_forcing.py`` on
``CUDA_DEVICES`` (inference_ar_forcing.sh:33-39) and the AR script has no distributed code; inference_README.md:127
says "If more than 1 gpu is given, sequence parallel will be activated", but only the bidirectional 5B-Cam script
has it (inference_dreamx5b.py with ``--ulysses_degree``/``--ring_degree`` under torchrun, inference_dreamx_5b.sh:
21-36; models/wan_transformer3d.py:743-744). ``gpus>1`` is refused.

Setup: commit a1f4c6e5e45600718e5236955f2e0702e53fc275, the repository root; ``requirements.txt`` (README.md:46).
Weights: the command reads ``CKPT/Wan2.2-TI2V-5B`` (``models_t5_umt5-xxl-enc-bf16.pth``, ``google/umt5-xxl/``,
``Wan2.2_VAE.pth``: AR:181-186; a ``Wan-AI/Wan2.2-TI2V-5B`` download) and ``CKPT/DreamX-World-5B/model.safetensors``
(``--base_checkpoint_path``, read with safetensors ``load_file``, AR:146, 201-206) of ``GD-ML/DreamX-World-5B``;
the model's config.json comes from the checkout (``--transformer_path ./configs/dreamx-ar/``, AR:188). Which file
of the Hub repository holds the weights is not in the code (the launcher's placeholder is ``/path/to/baseline.pt``, inference_ar_forcing.sh:16), so no
allow-pattern narrows the download.

Rounding rule: every segment gets ``floor(seconds * 16 + 0.5)`` frames (half up, per segment), so equal durations
get equal frames (a 20 s key is 320 frames, and L/R or U/D pairs of equal length close exactly); the case's segment
s covers output frames [A_s, A_s+1). The tail up to N holds still (``" "``).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import yaml

from worldgate.trajectories.core import Look, Move, rot_x, rot_y

from .base import AdapterError, AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg
from .repo import RepoAdapter, RepoSpec

H, W = 704, 1280
FPS = 16.0
SPEED = 1.5  # generate_trajectory_from_json default, not overridden by the AR script (TP:834; AR:301-305)
STEP_UNITS = SPEED * 0.05  # 0.075 units per frame (TP:887)
STEP_DEG = SPEED  # 1.5 degrees per frame (TP:888)
FX_NORM = 969.6969696969696 / 1920.0  # AR:121
FY_NORM = 969.6969696969696 / 1080.0  # AR:122
HOLD = " "
MOVE_KEY = {Move.FORWARD: "w", Move.BACK: "s", Move.STRAFE_LEFT: "a", Move.STRAFE_RIGHT: "d"}
LOOK_KEY = {Look.YAW_LEFT: "j", Look.YAW_RIGHT: "l", Look.PITCH_UP: "i", Look.PITCH_DOWN: "k"}
MOVE_LOCAL = {"w": (0.0, 0.0, 1.0), "s": (0.0, 0.0, -1.0), "a": (-1.0, 0.0, 0.0), "d": (1.0, 0.0, 0.0)}
BLOCK_LATENTS = 3  # num_frame_per_block (configs/dreamx-ar/causal_camera_forcing_5b.yaml:18): one worldgate chunk
CONFIG = "configs/dreamx-ar/causal_camera_forcing_5b.yaml"
CONFIG_FLAG = f"--config_path {CONFIG} "
CONTEXT_YAML = "dreamx_context.yaml"  # the derived --config_path, written at rollout time beside default_config.yaml
DEFAULT_CONFIG = "default_config.yaml"  # loaded from the --config_path's folder (inference_ar_forcing.py:241-244)


def segment_frames_rule(seconds: float) -> int:
    """Frames of one segment at 16 fps: round half up, per segment."""
    return int(math.floor(round(seconds * FPS, 9) + 0.5))


def latents_for(steps: int) -> int:
    """The smallest L with L % 3 == 0 and 4 (L - 1) + 1 >= steps + 1."""
    return 3 * math.ceil((math.ceil(steps / 4) + 1) / 3)


def integrate(keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """c2w relative to frame 0 and (yaw, pitch) degrees for per-frame keys, frame 0's key absorbed (TP:902-940)."""
    n = len(keys)
    c2w = np.tile(np.eye(4), (n, 1, 1))
    ang = np.zeros((n, 2))
    R, p = np.eye(3), np.zeros(3)
    yaw = pitch = 0
    for j in range(1, n):
        k = keys[j]
        dy = ("l" in k) - ("j" in k)
        dp = ("i" in k) - ("k" in k)
        if dy or dp:
            R = R @ (rot_y(math.radians(dy * STEP_DEG)) @ rot_x(math.radians(dp * STEP_DEG)))
        local = np.zeros(3)
        for key, v in MOVE_LOCAL.items():
            if key in k:
                local += np.asarray(v) * STEP_UNITS
        p = p + R @ local
        yaw, pitch = yaw + dy, pitch + dp
        c2w[j, :3, :3], c2w[j, :3, 3] = R, p
        ang[j] = yaw * STEP_DEG, pitch * STEP_DEG
    return c2w, ang


def context_window(policy, latents: int) -> dict:
    """The model's own ``local_attn_size`` / ``sink_size`` (latents) that run ``policy`` over a clip of ``latents``."""
    sink = BLOCK_LATENTS if policy.sink else 0
    if policy.name == "full_kv" or policy.budget is None:
        return {"local_attn_size": int(latents), "sink_size": BLOCK_LATENTS}
    if policy.name != "sliding_window":
        raise AdapterError(f"dreamx-world cannot apply context policy {policy.name!r}")
    return {"local_attn_size": min(BLOCK_LATENTS * (int(policy.budget) + 1), int(latents)), "sink_size": sink}


def derive_config(text: str, window: dict) -> str:
    """The checkout's YAML with ``model_kwargs.local_attn_size`` / ``sink_size`` added (nothing else changes)."""
    before = yaml.safe_load(text) or {}
    mk = before.get("model_kwargs")
    if not isinstance(mk, dict) or set(window) & set(mk):
        raise AdapterError(f"dreamx-world: {CONFIG} has no model_kwargs block to extend (or it already sets "
                           f"{sorted(set(window) & set(mk or {}))}): the context policy cannot be put into it")
    lines = text.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.rstrip() == "model_kwargs:")
    nxt = next((ln for ln in lines[at + 1:] if ln.strip() and not ln.lstrip().startswith("#")), "  x")
    ind = nxt[:len(nxt) - len(nxt.lstrip())] or "  "
    add = "".join(f"{ind}{k}: {int(v)}\n" for k, v in window.items())
    out = "".join(lines[:at + 1]) + add + "".join(lines[at + 1:])
    after = yaml.safe_load(out)
    want = dict(before, model_kwargs={**mk, **{k: int(v) for k, v in window.items()}})
    if after != want:
        raise AdapterError(f"dreamx-world: adding {window} to {CONFIG}'s model_kwargs changed more than those keys")
    return out


class DreamXWorld(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/AMAP-ML/DreamX-World",
        entry="inference_ar_forcing.py",
        hf_id="GD-ML/DreamX-World-5B",
        commit="a1f4c6e5e45600718e5236955f2e0702e53fc275", subdir="", requirements=("requirements.txt",),
        weights_dir="DreamX-World-5B",
    )
    #: none: the AR launcher is one plain process (inference_ar_forcing.sh:32-39); only the 5B-Cam script has SP
    multi_gpu = ""
    info = AdapterInfo(
        name="dreamx-world", version="0.1", width=W, height=H, fps=FPS,
        fps_source="writer: write_video(fps=args.fps), --fps 16 (inference_ar_forcing.py:158, 330; "
                   "inference_ar_forcing.sh:23); fps is not an input of the model",
        chunk_frames=12, first_chunk_frames=9,
        duration_unit="pixel frames (one key string per frame, run-length weights); L latents, L % 3 == 0, "
                      "N = 4(L-1)+1",
        control="action-dsl: action_seq key strings (wsad move, ij kl look) + action_speed_list frame weights",
        pose_convention="w2c rows (CameraCtrl 19 numbers) built inside the model from the keys; OpenCV axes, "
                        "relative to frame 0, per-chunk relative with --chunk_relative",
        intrinsics_regime=2, aspect_policy="stretch", context_policies=("full_kv", "sliding_window"),
        hf_ids=("GD-ML/DreamX-World-5B", "Wan-AI/Wan2.2-TI2V-5B"),
        repository="https://github.com/AMAP-ML/DreamX-World", licence="Apache-2.0", integration="A",
        notes="autoregressive 5B (inference_ar_forcing.py); fixed 0.075 units and 1.5 deg per frame, so turns top "
              "out at 24 deg/s (a 25 deg/s key turns 480 deg in 20 s, not 500; caveated per segment); rolling KV "
              "12 latents + 3 sink latents; --context full_kv|sliding_window --budget N sets the model's own "
              "model_kwargs local_attn_size / sink_size in a YAML derived from the checkout's (fov refused); the "
              "5B-Cam (<= 7.5 s) is not used",
    )
    FPS = FPS

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        bounds = traj.boundaries()
        keys: list[str] = []  # keys[j] drives the transition from video frame j to j + 1
        segs, caveats = [], []
        pitch_steps = 0
        for i, s in enumerate(traj.segments):
            f = segment_frames_rule(s.seconds)
            a = len(keys)
            segs.append((a, a + f))
            if f == 0:
                continue
            _, _, pitch0 = traj.state_at(float(bounds[i]))
            yaw_look = s.look in (Look.YAW_LEFT, Look.YAW_RIGHT)
            pitch_look = s.look in (Look.PITCH_UP, Look.PITCH_DOWN)
            level = abs(pitch0) < 1e-9 and pitch_steps == 0
            if (s.move is not Move.IDLE and (pitch_look or not level)) or (yaw_look and not level):
                raise UnsupportedMotion(
                    f"dreamx-world cannot express case {case.id} segment {i + 1} ({s.to_text()}): the view is pitched "
                    f"there (or the segment pitches while moving). DreamX moves along the pitched view and yaws about "
                    f"the camera's own up axis (utils/trajectory_processor.py:916-930), so a level move or a "
                    f"world-vertical yaw has no key while pitched. It can move (w/s/a/d) and yaw (j/l) while the "
                    f"view is level, and pitch (i/k) at any time without moving.")
            mk = MOVE_KEY.get(s.move, "")
            look = [False] * f
            if s.look is not Look.IDLE:
                rate = traj.yaw_rate if yaw_look else traj.pitch_rate
                want = rate * s.seconds / STEP_DEG
                k = min(f, int(math.floor(round(want, 9) + 0.5)))
                look = [(m + 1) * k // f > m * k // f for m in range(f)]  # k presses spread evenly over f frames
                got = k * STEP_DEG
                kind = "yaw" if yaw_look else "pitch"
                if k < want - 1e-9 and k == f:
                    caveats.append(
                        f"segment {i + 1} ({s.to_text()}): {kind} {got:g} deg (model max 1.5 deg/frame = "
                        f"{STEP_DEG * FPS:g} deg/s at 16 fps) instead of the commanded {rate * s.seconds:g} deg "
                        f"({rate:g} deg/s): turn rate not matched")
                elif k < f:
                    caveats.append(
                        f"segment {i + 1} ({s.to_text()}): {kind} rate {rate:g} deg/s matched by pressing "
                        f"'{LOOK_KEY[s.look]}' on {k} of {f} frames ({got:g} deg)")
                if pitch_look:
                    pitch_steps += k if s.look is Look.PITCH_UP else -k
            for m in range(f):
                kk = mk + (LOOK_KEY[s.look] if look[m] else "")
                keys.append(kk or HOLD)
        n = len(keys)
        L = latents_for(n)
        N = 4 * (L - 1) + 1
        frame_keys = [keys[0] if keys else HOLD] + keys + [HOLD] * (N - 1 - n)
        seq, weights = [], []
        for k in frame_keys:  # run-length encode: weight = exact frame count, sum = N
            if seq and seq[-1] == k:
                weights[-1] += 1
            else:
                seq.append(k)
                weights.append(1)
        c2w, ang = integrate(frame_keys)

        exact = traj.n_frames(FPS)
        if any(abs(s.seconds * FPS - segment_frames_rule(s.seconds)) > 1e-9 for s in traj.segments):
            caveats.append(f"segment durations rounded to whole 16 fps frames (half up, per segment): {n} frames for "
                           f"{traj.duration:g} s ({exact} at the exact boundaries)")
        if N - 1 > n:
            caveats.append(f"{N - 1 - n} trailing frames (to reach 4(L-1)+1 with L % 3 == 0, L = {L}) hold still")
        if any(s.move is not Move.IDLE for s in traj.segments):
            caveats.append(f"move speed is the model's fixed {STEP_UNITS:g} units/frame ({STEP_UNITS * FPS:g} units/s at "
                           f"16 fps; utils/trajectory_processor.py:834, 887) in the model's own unscaled units: the "
                           f"commanded {traj.speed:g} m/s is not matched")
        caveats.append("action_speed_list holds frame weights (the AR path's meaning), not speeds; frame 0's key is "
                       "absorbed by the relative-pose step, so the first run is one frame longer")
        caveats.append("the model sees the camera only at pixel frames 0, 1, 5, 9, ... (one pose per latent)")
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        native_hfov = math.degrees(2 * math.atan(1 / (2 * FX_NORM)))
        caveats.append(f"field of view is fixed in the model (HFOV {native_hfov:.1f} deg); the case's "
                       f"{'%.1f deg' % hfov if hfov is not None else 'FOV'} is not conveyed")
        if case.image_size:
            caveats.append(f"the image is stretched from {case.image_size[0]}x{case.image_size[1]} to {W}x{H}")

        item = {"image_path": case.image or "IMAGE", "caption": case.prompt, "action_seq": seq,
                "action_speed_list": weights, "task_id": case.id}
        self.gpus()  # gpus>1 is refused: the autoregressive script has no multi-GPU inference
        cmd = (f"python inference_ar_forcing.py --config_path configs/dreamx-ar/causal_camera_forcing_5b.yaml "
               f"--model_name CKPT/Wan2.2-TI2V-5B --transformer_path ./configs/dreamx-ar/ "
               f"--base_checkpoint_path CKPT/DreamX-World-5B/model.safetensors --data_path dreamx_input.json "
               f"--output_folder OUT --num_output_frames {L} --fps 16 --seed SEED --color_correction_strength 1.0 "
               f"--chunk_relative")
        lat = np.array([0] + [1 + 4 * i for i in range(L - 1)], np.int64)
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=FPS, n_frames=N, segment_frames=segs,
            arrays={"c2w": c2w, "yaw_pitch_deg": ang, "frame_keys": np.array(frame_keys, dtype="<U4"),
                    "latent_pixel_frames": lat},
            files={"dreamx_input.json": [item], "command.txt": cmd + "\n"},
            intrinsics={"regime": 2, "case": case.intrinsics,
                        "case_image_size": list(case.image_size) if case.image_size else None,
                        "native": [FX_NORM * W, FY_NORM * H, W / 2, H / 2], "native_units": f"pixels of {W}x{H}",
                        "native_model": {"fx_norm": FX_NORM, "fy_norm": FY_NORM, "cx": 0.5, "cy": 0.5},
                        "native_model_units": "fractions of width/height (inference_ar_forcing.py:120-130)",
                        "native_size": [W, H], "case_hfov_deg": hfov, "native_hfov_deg": native_hfov,
                        "native_vfov_deg": math.degrees(2 * math.atan(1 / (2 * FY_NORM))),
                        "note": "fixed in code (inference_ar_forcing.py:120-130); the case's intrinsics are unused"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_output_frames": L, "pixel_frames": N, "steps": n, "image": case.image,
                   "step_units": STEP_UNITS, "step_deg": STEP_DEG, "first_key_absorbed": True},
        )


    # ------------------------------------------------------------------------------------ context policies
    def context_support(self, name: str) -> str | None:
        """full_kv and sliding_window: the model's own window (``model_kwargs``) expresses them exactly; fov no."""
        if name in self.info.context_policies:
            return None
        if name == "fov":
            return ("dreamx-world cannot apply context policy 'fov': its self-attention reads the sink latents plus "
                    "one contiguous run of the most recent latents (wan/modules/causal_camera_model_2_2_prope_"
                    "infinity.py:207-227; eviction oldest-first, :111-125) and the checkout has no retrieval code, "
                    "so no setting keeps earlier chunks chosen by view overlap (it supports: full_kv, "
                    "sliding_window)")
        return super().context_support(name)

    def with_context(self, plan, policy):
        """The plan under ``policy``: ``--config_path dreamx_context.yaml`` (derived at rollout time from the
        checkout's YAML with the model's own ``model_kwargs.local_attn_size`` / ``sink_size``), the values and
        their derivation in ``context.json``."""
        if policy is None:
            return plan
        plan = self.context_copy(plan, policy)
        cmd = plan.files["command.txt"]
        if CONFIG_FLAG not in cmd:
            raise AdapterError(f"dreamx-world: the plan's command has no {CONFIG_FLAG.strip()!r} to replace")
        L = int(plan.extra["num_output_frames"])
        window = context_window(policy, L)
        plan.files["command.txt"] = cmd.replace(CONFIG_FLAG, f"--config_path {CONTEXT_YAML} ", 1)
        desc = policy.describe()
        plan.files["context.json"] = {
            **desc, "model_kwargs": window, "window_unit": f"latents ({BLOCK_LATENTS} per chunk)",
            "latents": L, "config_path": CONTEXT_YAML,
            "derived_from": f"{CONFIG} of the checkout, model_kwargs.local_attn_size / sink_size added at rollout "
                            f"time; {DEFAULT_CONFIG} copied beside it (inference_ar_forcing.py:241-244)",
            "source": "pipeline/pipeline_causal_camera.py:14-19, 256-260; utils/wan_wrapper.py:96-117; "
                      "wan/modules/causal_camera_model_2_2_prope_infinity.py:111-147, 207-227"}
        plan.extra["context"] = {**desc, "model_kwargs": window}
        budget = "none" if policy.budget is None else str(int(policy.budget))
        if window["local_attn_size"] >= L:
            held = "every earlier chunk (the cache spans the whole clip and never rolls)"
        elif window["sink_size"]:
            held = f"chunk 0 (the sink) and the {int(policy.budget) - 1} most recent chunk(s)"
        else:
            held = f"the {int(policy.budget)} most recent chunk(s)"
        plan.caveats.append(
            f"context policy {policy.name} at budget {budget} chunks ({BLOCK_LATENTS} latents each) is the model's own "
            f"window: model_kwargs local_attn_size {window['local_attn_size']}, sink_size {window['sink_size']} "
            f"(the release runs 12 / 3) in {CONTEXT_YAML}, derived from the checkout's {CONFIG} at rollout time; "
            f"each chunk attends to itself and {held}; keys are re-RoPE'd at window-relative positions once the "
            "cache rolls (the model's own scheme); the PRoPE camera branch sees only the current chunk")
        return plan

    def derived_files(self, plan, repo: Path) -> dict:
        """The ``--config_path`` files the context plan names, made from the checkout's own YAML."""
        window = plan.files["context.json"]["model_kwargs"]
        src = Path(repo) / CONFIG
        if not src.is_file() or not (src.parent / DEFAULT_CONFIG).is_file():
            raise AdapterError(f"dreamx-world: the checkout has no {CONFIG} (with {DEFAULT_CONFIG} beside it) to "
                               f"derive the context config from ({repo})")
        return {CONTEXT_YAML: derive_config(src.read_text(), window),
                DEFAULT_CONFIG: (src.parent / DEFAULT_CONFIG).read_text()}

    def rollout(self, plan, context=None, seed: int = 0):
        if context is None:
            yield from super().rollout(plan, None, seed)
            return
        plan = self.planned_for(plan, context)
        if self._paths is None:
            self.load()
        plan = copy.deepcopy(plan)
        derived = self.derived_files(plan, self._paths["repo"])
        plan.files.update(derived)
        for chunk in super().rollout(plan, None, seed):
            chunk.extra.setdefault("files", {})[CONTEXT_YAML] = derived[CONTEXT_YAML]  # the config that ran
            yield chunk
