"""Solaris (solaris-wm/solaris, JAX): the multiplayer Minecraft world model MultiWorldBench evaluates, two players.

``solaris-mp`` is Solaris itself (``SolarisMPModel``, ``multiplayer_method: multiplayer_attn``): both players'
frames are generated jointly, one latent at a time with a KV cache. ``solaris-sp`` is its single-player variant: the
stage-1 single-player model (``SolarisSPModel``, Matrix-Game 2.0 architecture with a 23-key keyboard) run once per
player, so neither view knows the other's actions (MultiWorldBench's single-player baseline, like
``engine-2p-independent``). Both take the same per-player action rows; both are two-view adapters (``players=2``).

Conventions, read at solaris-wm/solaris commit 0be45a858b540b4a15576368e97c52bf8e2aa4b8:

- Action vector per player and frame: 25 values in ``ACTION_KEYS`` order (src/data/minecraft.py:8-34): 23 keys
  ``inventory, ESC, hotbar.1..9, forward(11), back(12), left(13), right(14), jump, sneak, sprint, swapHands,
  attack(19), use(20), pickItem(21), drop(22)`` then ``cameraX, cameraY``. The runner splits the last two off as the
  mouse and the first 23 as the keyboard (src/runners/base_mp_runner.py:157-158); the model takes
  ``keyboard_dim_in: 23``, ``mouse_dim_in: 2`` (config/model/single_player.yaml:45, 47). W/S/A/D are
  forward/back/left/right: A/D **strafe** (minecraft.py:39-54, 245-252); every other key is written 0 (idle).
- Mouse: ``cameraX`` is the yaw delta, ``cameraY`` the pitch delta of the frame, in degrees (minecraft.py:289-299);
  **+yaw turns right, +pitch looks down** (vlm_eval/handlers/camera_utils.py:9-10). The model reads them through
  ``CameraLinearConverterMatrixGame2`` (config/model/single_player.yaml:2; src/data/dataset.py:20-24):
  ``clip(degrees, -20, 20) / 15`` (minecraft.py:133-151). So a commanded rate r deg/s is ``r / fps / 15`` per frame,
  exactly; a rate above 20 deg/frame (400 deg/s) would be clipped by the model's converter and is refused.
- Timing: ``left_action_padding: 11`` "to allow action i to influence frame i" (single_player.yaml:57) and the loader
  shifts frames by one "so that frame at t is influenced by action at t" (minecraft.py:210-211): row j is the action
  taken between frame j-1 and frame j. Row j holds the command of time (j-1)/fps; row 0 (the action before the
  conditioning frame) is idle. Latent i reads rows [4i-11, 4i] (src/utils/rollout.py:167-182).
- Frames: Wan VAE, 4x temporal compression (single_player.yaml:55): F = 4L + 1 video frames (the default
  ``num_frames_eval: 257``, config/runner/inference.yaml:4); frame 0 is the conditioning frame. One latent per causal
  step (rollout.py:202-277); local attention window 6 latents (single_player.yaml:69), 4 denoising steps
  ``[1000, 750, 500, 250]`` (rollout.py:190-194, the runner passes None: src/runners/inference.py:102).
- Size and fps: frames are centre-cropped and resized to 352x640 (base_mp_runner.py:190;
  src/utils/preprocessing_mp.py:6-40; the datasets' 360x640 letterbox, config/shared.yaml:5, is a loader step). The
  writer stacks ground truth | rollout along the width and the players along the height and writes **20 fps**
  (base_mp_runner.py:330-346): view A (player 0, ``Alpha``) is the top-right 352x640 tile, B the bottom-right one.
  Player order is the dataset's bot1, bot2 with ``shuffle_bots: false`` (config/shared.yaml:11; dataset.py:251-261).
- Seed: none reaches the rollout: its noise key is hard-coded ``jax.random.PRNGKey(0)`` (base_mp_runner.py:242);
  ``runner.params.base_seed`` (config/runner/base_runner.yaml:4) only seeds model initialisation
  (src/runners/base_runner.py:31-32).
- Weights: ``hf download nyu-visionx/solaris`` (README.md "Download pretrained model weights"): ``solaris.pt`` (the
  inference default, config/runner/inference.yaml:8), ``clip.pt`` and ``vae.pt`` in the same folder
  (base_runner.yaml:32-33). The single-player weights are stage 1's ``sp_bidirectional_pretrain_120000.pt`` (README
  "Stage 1"; loaded by config/runner/trainer_mp_bidirectional.yaml:9); whether the HF repo holds that file is not
  checked here.

Launcher defaults that touch control, and what worldgate passes: ``model.dataset_converters`` (the /15 mouse scale,
kept: it is the scale the model was trained with), ``shuffle_bots`` (false, passed), ``runner.num_frames_eval`` (257,
passed as the plan's F), ``device.pretrained_model_dir`` and ``runner.params.model_weights_path`` (passed: ``CKPT``),
``device.eval_num_samples`` (1, passed). No smoothing or caps exist beyond the converter's +-20 deg clip.

Integration B: ``src/inference.py`` reads only its fixed evaluation datasets (mp4 + Mineflayer JSON per bot, segments
from ``src/data/eval_ids/*.json``: src/data/batch_sampler.py:233-301). worldgate's patch (:data:`~.solaris_patch.PATCH`, marker
``worldgate-patch solaris v1``; both adapters) adds two Hydra keys, ``+worldgate.actions=NPZ`` (``keyboard`` (2, F, 23)
and ``mouse`` (2, F, 2) float32, players A, B, in the model's units) and ``+worldgate.first_frames=NPY`` ((2, H, W, 3)
uint8, each player's conditioning frame), read by ``src/worldgate_inputs.py`` (worldgate's own module):

- src/inference.py, after ``resolve_device_paths(cfg)`` (src/inference.py:16): the inputs are loaded and checked (F =
  4L + 1 rows, 23 + 2 columns = the config's ``keyboard_dim_in`` / ``mouse_dim_in``, F = ``runner.num_frames_eval``),
  ``cfg.eval_datasets`` is emptied so the runner reads no dataset (src/runners/base_runner.py:159-166), and a GPU run
  is given one device: the runner splits its batch over every device JAX sees (src/runners/base_mp_runner.py:287-297;
  README.md:45 "making sure ``device.eval_num_samples`` is divisible by it") and a case is one sample.
- src/inference.py, ``inference.run()`` (src/inference.py:33): the case becomes the one eval batch the loader would
  yield, ``Batch(obs (1, F, 2, H, W, 3) uint8, act (1, F, 2, 25), real_lengths [F])`` (src/data/batch.py:11-22,
  src/data/dataset.py:295-327; the frame repeated F times as the "video", act = 23 keys then cameraX, cameraY), set as
  the runner's only eval dataloader, and the runner's own ``run()`` evaluates it (src/runners/inference.py:90-105):
  ``_get_curr_batch`` splits the mouse and keyboard off (base_mp_runner.py:146-169) and ``evaluate_mp`` generates and
  writes it. The dataset converter is not applied again: worldgate's rows are already ``compress_mouse_linear``'s
  output (minecraft.py:133-151).
- solaris-sp: the stock runner reads ``network_config.params.multiplayer_method`` (base_mp_runner.py:144,
  src/runners/inference.py:53), which config/model/single_player.yaml lacks and ``SolarisSPModel`` does not accept as a
  parameter (src/models/singleplayer/world_model.py:498-520), so it cannot be given on the command line: the patch
  reads it with ``.get`` (None for the single-player model; the value is unchanged for Solaris). The stage-1
  checkpoint also holds the placeholder ``player_embed`` its trainer adds for the multiplayer model
  (src/runners/trainer_sp.py:23-63), which orbax refuses to restore into the single-player state (a tree-structure
  mismatch): the patch restores it beside that state and drops it (src/runners/inference.py:50-52). The stock
  ``evaluate_mp`` cannot run the single-player model (its KV cache has no player axis:
  src/models/singleplayer/world_model.py:920-925 vs rollout.py:269), so ``+worldgate.independent=true`` runs each
  player alone through the single-player model's own evaluation (``Trainer._get_curr_batch`` and
  ``perform_bidirectional_rollout``, src/runners/trainer_sp.py:67-89, 165-221; 10 denoising steps,
  src/utils/rollout.py:445) and writes the multiplayer layout at 20 fps.

Conditioning frames: a MultiWorldBench Engine case has no image, so the rollout renders each player's start view with
``engine-2p`` at 640x352 (a caveat: an Engine render, not Minecraft).

Installing: ``conda env create -f environment.yml`` (Python 3.10 only), ``pip install -r requirements_gpu.txt`` (it
includes requirements.txt and ``jax[cuda12]==0.6.2``), then ``pip install -e .`` (README.md:13-19): the entry point
imports ``src.*``, so the checkout itself must be installed (or on PYTHONPATH). Weights: ``hf download
nyu-visionx/solaris``; each ``*.pt`` is an orbax checkpoint folder (``ocp.StandardCheckpointer``,
src/runners/base_runner.py:71-73, 150), so ``weights_patterns`` names each folder.

GPUs: one per case. Solaris has no model-parallel inference: "This codebase doesn't implement FSDP and fully
replicates the optimizer/model states across all devices" (README.md:307), and several GPUs split the eval samples
(README.md:45, base_mp_runner.py:287-297), so ``gpus>1`` is refused.

Output: ``device.output_dir`` is worldgate's OUT, so the video is ``OUT/worldgate/worldgate/video_0_side_by_side.mp4``
(``eval_save_dir: ${device.output_dir}/${experiment_name}``, config/runner/base_runner.yaml:6; the eval folder
``worldgate``, base_runner.py:224; ``video_{i}_side_by_side.mp4``, base_mp_runner.py:344-346), the plan's
``output_video``: 20 fps, (2 x 352) x (2 x 640) = 704x1280 (ground truth | rollout, player 0 above player 1,
base_mp_runner.py:330-336), F frames (``n_frames_decode = video.shape[2]``, the batch's F: base_mp_runner.py:197,
226-228, 259-270).
"""

from __future__ import annotations

import dataclasses
import math

import imageio_ffmpeg
import numpy as np

from worldgate.trajectories.core import Look, Move
from worldgate.trajectories.multiworldbench.world import PLAYERS, TwoPlayerCase, frame_of

from .base import AdapterError, AdapterInfo, Chunk, NativeInputs, UnsupportedMotion
from .engine.twoplayer import TwoPlayerEngine
from .repo import RepoAdapter, RepoSpec, run_checkout
from .solaris_patch import PATCH
from .twoplayer import step_table

#: src/data/minecraft.py:8-34 (the last two are the mouse)
ACTION_KEYS = ("inventory", "ESC", "hotbar.1", "hotbar.2", "hotbar.3", "hotbar.4", "hotbar.5", "hotbar.6",
               "hotbar.7", "hotbar.8", "hotbar.9", "forward", "back", "left", "right", "jump", "sneak", "sprint",
               "swapHands", "attack", "use", "pickItem", "drop", "cameraX", "cameraY")
N_KEYS = 23
KEY_OF_MOVE = {Move.FORWARD: 11, Move.BACK: 12, Move.STRAFE_LEFT: 13, Move.STRAFE_RIGHT: 14}
ATTACK, USE = 19, 20  # LMB (mine / destroy), RMB (place_block): minecraft.py:266-282
MOUSE_SCALE = 1.0 / 15  # compress_mouse_linear: degrees / 15 (minecraft.py:148)
MOUSE_MAX_DEG = 20.0  # compress_mouse_linear clips to +-20 degrees per frame (minecraft.py:149-150)
MOUSE_TRAINED_DEG = 6.0  # "the maximum conditioning value is 0.4 ... clip the input to 6 degrees?" (minecraft.py:138-139)
FPS = 20.0  # write_video(..., fps=20) (base_mp_runner.py:344-346)
WIDTH, HEIGHT = 640, 352  # wan_image_condition_preprocess(video, 352, 640) (base_mp_runner.py:190)
COMMIT = "0be45a858b540b4a15576368e97c52bf8e2aa4b8"
#: where the entry point writes the case's video, relative to OUT (= device.output_dir): module docstring, "Output"
OUTPUT_VIDEO = "worldgate/worldgate/video_0_side_by_side.mp4"


def weights_patterns(*checkpoints: str) -> tuple[str, ...]:
    """allow_patterns for orbax checkpoint folders (a plain file of the name is matched too)."""
    return tuple(p for c in checkpoints for p in (c, f"{c}/*"))


def player_rows(traj, fps: float, F: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """One player's keyboard (F, 23) and mouse (F, 2) rows: row j holds the command of time (j-1)/fps."""
    kb = np.zeros((F, N_KEYS), np.float32)
    ms = np.zeros((F, 2), np.float32)
    yaw = traj.yaw_rate / fps  # degrees per frame
    pitch = traj.pitch_rate / fps
    looks = {s.look for s in traj.segments}
    for what, deg, keys in (("yaw_rate", yaw, {Look.YAW_LEFT, Look.YAW_RIGHT}),
                            ("pitch_rate", pitch, {Look.PITCH_UP, Look.PITCH_DOWN})):
        if looks & keys and deg > MOUSE_MAX_DEG:
            raise UnsupportedMotion(
                f"solaris: {what} {getattr(traj, what):g} deg/s is {deg:g} deg per frame at {fps:g} fps; the "
                f"model's mouse converter clips at {MOUSE_MAX_DEG:g} deg per frame (src/data/minecraft.py:149-150): "
                f"lower the turn rate to at most {MOUSE_MAX_DEG * fps:g} deg/s")
    bounds = traj.boundaries()
    segs = []
    for s, t0, t1 in zip(traj.segments, bounds[:-1], bounds[1:]):
        a = 1 + int(math.ceil(round(t0 * fps, 9)))
        b = min(F, 1 + int(math.ceil(round(t1 * fps, 9))))
        segs.append((a, b))
        if s.move is not Move.IDLE:
            kb[a:b, KEY_OF_MOVE[s.move]] = 1.0
        if s.look is Look.YAW_RIGHT:
            ms[a:b, 0] = yaw * MOUSE_SCALE
        elif s.look is Look.YAW_LEFT:
            ms[a:b, 0] = -yaw * MOUSE_SCALE
        elif s.look is Look.PITCH_DOWN:
            ms[a:b, 1] = pitch * MOUSE_SCALE
        elif s.look is Look.PITCH_UP:
            ms[a:b, 1] = -pitch * MOUSE_SCALE
    return kb, ms, segs


class SolarisMP(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/solaris-wm/solaris", entry="src/inference.py", hf_id="nyu-visionx/solaris",
        patch=PATCH, patch_doc="adapters/solaris_patch.py (PATCH: +worldgate.actions / +worldgate.first_frames)",
        commit=COMMIT, subdir="", weights_patterns=weights_patterns("solaris.pt", "clip.pt", "vae.pt"),
        requirements=("requirements_gpu.txt",))
    info = AdapterInfo(
        name="solaris-mp", version="0.1", width=WIDTH, height=HEIGHT, fps=FPS,
        fps_source="writer: write_video(fps=20) (src/runners/base_mp_runner.py:344-346)",
        chunk_frames=4, first_chunk_frames=1, duration_unit="frames (F = 4L + 1: Wan VAE latents)",
        control="two players: keyboard 23 keys + mouse [yaw, pitch] deg/15 per frame (Minecraft)",
        pose_convention="none", intrinsics_regime=1, aspect_policy="crop", context_policies=(),
        hf_ids=("nyu-visionx/solaris",), repository="https://github.com/solaris-wm/solaris", licence="Apache-2.0",
        integration="B", image_conditioned=False, players=2,
        no_seed="its rollout noise key is hard-coded jax.random.PRNGKey(0) (src/runners/base_mp_runner.py:242)",
        notes="JAX, >= 48 GB GPU; joint two-player generation (multiplayer_attn), causal with a 6-latent KV window "
              "(local_attn_size, config/model/single_player.yaml:69); a patch adds the action/first-frame input",
    )
    FPS = FPS
    weights = "solaris.pt"
    model_config = "solaris"
    independent = False
    #: no multi-GPU inference of one case: README.md:307 (no FSDP, fully replicated), README.md:45 (GPUs split samples)
    multi_gpu = ""

    def __init__(self, **model_args):
        super().__init__(**model_args)
        self._cases: dict[str, TwoPlayerCase] = {}

    # ------------------------------------------------------------------------------------------------ plan
    def plan(self, case) -> NativeInputs:
        if not isinstance(case, TwoPlayerCase):
            raise AdapterError(f"{self.info.name} runs two-player cases (suite 'multiworldbench-engine'); case "
                               f"{case.id} of suite {case.suite!r} has one camera")
        self.gpus()  # gpus>1 is refused: one case is one sample on one device
        fps = self.FPS
        n = int(math.ceil(round(case.duration * fps, 9)))  # frames after the conditioning frame
        L = int(math.ceil(n / 4))
        F = 4 * L + 1
        kb = np.zeros((2, F, N_KEYS), np.float32)
        ms = np.zeros((2, F, 2), np.float32)
        segs = {}
        for k, p in enumerate(PLAYERS):
            kb[k], ms[k], segs[p] = player_rows(case.players[p].trajectory(), fps, F)
        caveats = [
            "move speed is Minecraft's own walking speed: the commanded speed is not matched",
            "conditioning frames are engine-2p renders of each player's start view (not Minecraft frames)",
            "the prompt is not used by Solaris (image and action conditioning only)",
            "field of view is Minecraft's (no camera model): the case's intrinsics are not used",
        ]
        for p in PLAYERS:
            t = case.players[p].trajectory()
            looks = {s.look for s in t.segments}
            for what, rate, keys in (("yaw", t.yaw_rate, {Look.YAW_LEFT, Look.YAW_RIGHT}),
                                     ("pitch", t.pitch_rate, {Look.PITCH_UP, Look.PITCH_DOWN})):
                if looks & keys and rate / fps > MOUSE_TRAINED_DEG:
                    caveats.append(f"player {p}: {what} {rate / fps:g} deg per frame is beyond the 6 deg/frame the "
                                   "code names as the conditioning maximum (src/data/minecraft.py:138-139)")
        # interactions: place -> use (RMB), destroy -> attack (LMB), on the row of the step they fire
        acts = []
        for a in case.interactions():
            j = 1 + int(math.ceil(round(a["t"] * fps, 9)))
            if j >= F:
                continue
            col = USE if a["act"] == "place" else ATTACK
            kb[PLAYERS.index(a["player"]), j, col] = 1.0
            acts.append({"player": a["player"], "act": a["act"], "row": j, "key": ACTION_KEYS[col]})
            if a["act"] == "place":
                caveats.append(f"player {a['player']} places {a['material']} at t={a['t']:g} s as 'use' (row {j}): "
                               "Solaris has no material channel, it places whatever item is held, where the "
                               "crosshair points")
            else:
                caveats.append(f"player {a['player']} destroys at t={a['t']:g} s as one frame of 'attack' (row {j}), "
                               "aimed by the crosshair, not at the marked column")
        if F - 1 > n:
            caveats.append(f"{F - 1 - n} trailing frames (to reach F = 4L + 1) carry no command")
        c2w = {p: case.players[p].poses(fps, F) for p in PLAYERS}
        steps = step_table(case, fps, F)  # the two-view protocol's table (t_i = i / fps), as engine-2p writes it
        actions = {
            "fps": fps, "n_frames": F, "players": {p: case.players[p].to_dict() for p in PLAYERS},
            "interactions": [dict(a, frame=frame_of(a["t"], fps)) for a in case.interactions()],
            "segment_frames": {p: [list(map(int, s)) for s in segs[p]] for p in PLAYERS}, "steps": steps,
            "native_interactions": acts,
        }
        cmd = (f"python src/inference.py experiment_name=worldgate device=gpu model={self.model_config} "
               f"device.eval_num_samples=1 device.pretrained_model_dir=CKPT "
               f"runner.params.model_weights_path=CKPT/{self.weights} runner.num_frames_eval={F} shuffle_bots=false "
               "'device.output_dir=${oc.env:WORLDGATE_OUT}' +worldgate.actions=actions.npz "
               "+worldgate.first_frames=first_frames.npy"
               + (" +worldgate.independent=true" if self.independent else "")
               + "  # +worldgate.* keys are added by the worldgate patch; first_frames.npy is written at rollout")
        self._cases[case.id] = case
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=WIDTH, height=HEIGHT,
            fps=fps, n_frames=F, segment_frames=[tuple(s) for s in segs["A"]],
            arrays={"keyboard": kb, "mouse": ms, "c2w_a": c2w["A"], "c2w_b": c2w["B"]},
            files={"actions.npz": {"keyboard": kb, "mouse": ms}, "actions.json": actions, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": None, "native_hfov_deg": None,
                        "note": "no camera model: Minecraft's field of view"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"latents": L, "players": 2, "independent": self.independent, "player_order": list(PLAYERS),
                   "action_keys": list(ACTION_KEYS), "rollout_files": ["first_frames.npy"],
                   "output_video": OUTPUT_VIDEO},
        )

    # ------------------------------------------------------------------------------------------------ runtime
    def first_frames(self, plan: NativeInputs) -> np.ndarray:
        """Each player's start view (2, 352, 640, 3) uint8, rendered by engine-2p from the planned case."""
        case = self._cases.get(plan.case_id)
        if case is None:
            raise AdapterError(f"{self.info.name}: case {plan.case_id} was not planned by this adapter instance; "
                               "plan it first (generate does)")
        eng = TwoPlayerEngine(width=WIDTH, height=HEIGHT)
        ep = eng.plan(case)
        eng.reset(ep, 0)
        steps = ep.files["actions.json"]["steps"]
        return np.stack(eng.step(0, steps[0]["A"], steps[0]["B"]))

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0):
        if context is not None:
            raise AdapterError(self.context_support(getattr(context, "name", str(context))))
        if self._paths is None:
            self.load()
        frames0 = self.first_frames(plan)
        run = dataclasses.replace(plan, files=dict(plan.files, **{"first_frames.npy": frames0}))
        for chunk in run_checkout(self.info.name, self.repo_spec, self._paths, run, None):
            views = split_views(chunk.video, plan.n_frames)
            yield Chunk(start=0, frames=views, extra={"source_video": str(chunk.video), "argv": chunk.extra["argv"]})


def split_views(video, n_frames: int | None = None) -> dict[str, np.ndarray]:
    """The two rollout views of Solaris's side-by-side video: ground truth | rollout along the width, player 0 above
    player 1 (src/runners/base_mp_runner.py:330-336)."""
    gen = imageio_ffmpeg.read_frames(str(video), pix_fmt="rgb24")
    w, h = gen.__next__()["size"]
    if w % 2 or h % 2:
        raise AdapterError(f"solaris: {video} is {w}x{h}; expected [ground truth | rollout] x [player 0; player 1]")
    a, b = [], []
    for buf in gen:
        f = np.frombuffer(buf, np.uint8).reshape(h, w, 3)
        a.append(f[: h // 2, w // 2:])
        b.append(f[h // 2:, w // 2:])
    if not a:
        raise AdapterError(f"solaris: {video} holds no frames")
    return {"A": np.stack(a), "B": np.stack(b)}


class SolarisSP(SolarisMP):
    repo_spec = dataclasses.replace(
        SolarisMP.repo_spec,
        weights_patterns=weights_patterns("sp_bidirectional_pretrain_120000.pt", "clip.pt", "vae.pt"))
    info = AdapterInfo(**{
        **SolarisMP.info.to_dict(), "name": "solaris-sp", "context_policies": (), "hf_ids": ("nyu-visionx/solaris",),
        "control": "per player, independently: keyboard 23 keys + mouse [yaw, pitch] deg/15 per frame (Minecraft)",
        "notes": "single-player baseline: the stage-1 SolarisSPModel (config/model/single_player.yaml) run once per "
                 "player; bidirectional (config/runner/trainer_sp.yaml:7), trained on 33-frame clips "
                 "(config/train.yaml:11); weights sp_bidirectional_pretrain_120000.pt (README stage 1)",
    })
    weights = "sp_bidirectional_pretrain_120000.pt"
    model_config = "single_player"
    independent = True

    def plan(self, case) -> NativeInputs:
        p = super().plan(case)
        p.caveats += ["single-player model: each view is generated alone; the partner's actions and edits never "
                      "reach it",
                      "the single-player model is bidirectional and was trained on 33-frame clips "
                      "(config/train.yaml:11); longer clips are out of its training range"]
        return p


__all__ = ["ACTION_KEYS", "SolarisMP", "SolarisSP", "player_rows", "split_views"]
