"""worldgate's patch to a Solaris checkout (solaris-wm/solaris; why each edit, in adapters/solaris.py's docstring,
"Integration B"): the edits to ``src/inference.py`` and the runners, and ``src/worldgate_inputs.py``, worldgate's own
module the patch adds, which turns one case's native files into the eval batch. Apart from adapters/solaris.py because
the patch is text written into the checkout, while the adapter plans the case and reads the video back.
"""

from __future__ import annotations

from .patching import Edit, Patch

#: worldgate's own module, created as src/worldgate_inputs.py (nothing in it is Solaris's code)
INPUTS_MODULE = '''\
"""worldgate's input for Solaris's src/inference.py (added by worldgate's patch; nothing here is Solaris's code).

``+worldgate.actions=NPZ`` holds ``keyboard`` (2, F, 23) and ``mouse`` (2, F, 2) float32 rows (players A, B = bot1,
bot2), already in the model's units (the mouse through ``CameraLinearConverterMatrixGame2``: degrees / 15, clipped to
+-20 degrees); ``+worldgate.first_frames=NPY`` holds each player's conditioning frame (2, H, W, 3) uint8. The case
becomes one eval batch of the shape the eval loader yields (``Batch(obs (1, F, 2, H, W, 3) uint8, act (1, F, 2, 25),
real_lengths (1,))``, src/data/dataset.py:295-327; the frame repeated F times as the "video"), in place of the fixed
eval datasets, and the runner's own ``run()`` generates and writes it. With ``+worldgate.independent=true`` the
single-player model is run once per player through its own evaluation rollout (``perform_bidirectional_rollout``, as
src/runners/trainer_sp.py:165-221 does) and written in the multiplayer runner's layout.
"""

import os
import sys

import numpy as np

EVAL_NAME = "worldgate"  # the eval folder: <device.output_dir>/<experiment_name>/worldgate/video_0_side_by_side.mp4
FPS = 20  # write_video(..., fps=20) (src/runners/base_mp_runner.py:344-346)
N_KEYS, N_MOUSE = 23, 2


class WorldgateInputs:
    """The native files of one worldgate case and what to do with them."""

    def __init__(self, actions, first_frames, independent):
        self.actions_path, self.first_frames_path, self.independent = actions, first_frames, independent
        with np.load(actions) as z:
            missing = {"keyboard", "mouse"} - set(z.files)
            if missing:
                raise ValueError(f"{actions}: missing {sorted(missing)} (worldgate's actions.npz holds keyboard and "
                                 "mouse)")
            self.keyboard = np.asarray(z["keyboard"], dtype=np.float32)
            self.mouse = np.asarray(z["mouse"], dtype=np.float32)
        self.first_frames = np.load(first_frames, allow_pickle=False)
        P, F = self.keyboard.shape[:2]
        if self.keyboard.shape != (P, F, N_KEYS) or self.mouse.shape != (P, F, N_MOUSE) or P != 2:
            raise ValueError(f"{actions}: keyboard {self.keyboard.shape} / mouse {self.mouse.shape}; expected "
                             f"(2, F, {N_KEYS}) / (2, F, {N_MOUSE}) for players A, B")
        if (F - 1) % 4:
            raise ValueError(f"{actions}: F = {F} rows; the Wan VAE needs F = 4L + 1")
        if not (np.isfinite(self.keyboard).all() and np.isfinite(self.mouse).all()):
            raise ValueError(f"{actions}: non-finite action values")
        ff = self.first_frames
        if ff.dtype != np.uint8 or ff.ndim != 4 or ff.shape[0] != P or ff.shape[3] != 3:
            raise ValueError(f"{first_frames}: {ff.dtype} {ff.shape}; expected (2, H, W, 3) uint8")
        self.n_frames = F

    # ------------------------------------------------------------------------------------------ before the runner
    @classmethod
    def from_cfg(cls, cfg):
        """None without ``+worldgate.actions``; else the inputs, with ``cfg`` readied for them: no eval dataset is
        read, and a GPU run sees one device (the runner splits its batch over every device it sees,
        src/runners/base_mp_runner.py:287-297; a case is one sample)."""
        wg = cfg.get("worldgate")
        if wg is None or wg.get("actions") is None:
            return None
        from omegaconf import open_dict

        unknown = set(wg.keys()) - {"actions", "first_frames", "independent"}
        if unknown:
            raise ValueError(f"unknown worldgate keys {sorted(unknown)} (actions, first_frames, independent)")
        if wg.get("first_frames") is None:
            raise ValueError("+worldgate.actions needs +worldgate.first_frames (each player's conditioning frame)")
        self = cls(str(wg.actions), str(wg.first_frames), bool(wg.get("independent", False)))
        params = cfg.model.network_config.params
        target = str(cfg.model.network_config.target)
        single = target.endswith(".SolarisSPModel")
        if self.independent != single:
            raise ValueError(f"+worldgate.independent={self.independent} does not fit model {target}: "
                             "independent=true runs the single-player model (model=single_player), false a "
                             "multiplayer one")
        ac = params.action_config
        if (int(ac.keyboard_dim_in), int(ac.mouse_dim_in)) != (N_KEYS, N_MOUSE):
            raise ValueError(f"the model takes {ac.keyboard_dim_in} keys and {ac.mouse_dim_in} mouse values; "
                             f"worldgate writes {N_KEYS} and {N_MOUSE}")
        if int(cfg.runner.num_frames_eval) != self.n_frames:
            raise ValueError(f"runner.num_frames_eval={cfg.runner.num_frames_eval} but {self.actions_path} holds "
                             f"{self.n_frames} frames")
        with open_dict(cfg):
            cfg.eval_datasets = {}  # BaseRunner builds no eval loader (src/runners/base_runner.py:159-166)
        if str(cfg.device.name) == "gpu":  # read when JAX starts its GPU backend (after this)
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            devices = [d.strip() for d in (visible or "").split(",") if d.strip()]
            if visible is None or len(devices) > 1:
                os.environ["CUDA_VISIBLE_DEVICES"] = devices[0] if devices else "0"
                print(f"worldgate: one case per GPU: CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']} "
                      f"(was {visible!r})", file=sys.stderr)
        return self

    # ------------------------------------------------------------------------------------------------ the batch
    def batch(self, player=None):
        """The eval batch the loader would yield (src/data/dataset.py:295-327): both players (multiplayer), or one
        (``player``: the single-player layout, obs (1, F, H, W, 3), act (1, F, 25))."""
        from src.data.batch import Batch

        F = self.n_frames
        act = np.concatenate([self.keyboard, self.mouse], axis=-1)  # (P, F, 25): keys, then cameraX, cameraY
        obs = np.repeat(self.first_frames[:, None], F, axis=1)  # (P, F, H, W, 3)
        if player is None:
            obs, act = obs.transpose(1, 0, 2, 3, 4)[None], act.transpose(1, 0, 2)[None]  # (1, F, P, ...)
        else:
            obs, act = obs[player][None], act[player][None]
        return Batch(np.ascontiguousarray(obs), np.ascontiguousarray(act, dtype=np.float32),
                     np.array([F], dtype=np.int32))

    # ------------------------------------------------------------------------------------------------ the run
    def run(self, inference):
        if self.independent:
            return self.run_independent(inference)
        # the runner's own eval loop (src/runners/inference.py:90-105) over one batch: _get_curr_batch splits it into
        # mouse and keyboard (src/runners/base_mp_runner.py:146-169), evaluate_mp generates and writes it
        inference.eval_dataloaders = {EVAL_NAME: {"dataloader": [self.batch()], "local_num_batches": 1}}
        return inference.run()

    def run_independent(self, inference):
        """The single-player model once per player, as its trainer evaluates it (src/runners/trainer_sp.py:67-89,
        165-221: batch, preprocessing, ``perform_bidirectional_rollout``), written as the multiplayer runner writes
        (ground truth | rollout along the width, players along the height, 20 fps: base_mp_runner.py:330-346)."""
        import jax
        import torch
        from flax import nnx
        from torchvision.io import write_video

        from src.models.utils import jax_to_torch
        from src.runners.trainer_sp import Trainer
        from src.utils import sharding as sharding_utils
        from src.utils.preprocessing_sp import wan_image_condition_preprocess
        from src.utils.rollout import change_tensor_range, perform_bidirectional_rollout

        if len(jax.devices()) != 1:
            raise RuntimeError(f"one case runs on one device; JAX sees {len(jax.devices())} (set CUDA_VISIBLE_DEVICES)")
        eval_dir = os.path.join(inference.eval_save_dir, EVAL_NAME)
        os.makedirs(eval_dir, exist_ok=True)
        tiles = []
        with inference.mesh:
            model = nnx.merge(inference.model_graph, inference.model_state)
            model.eval()
            graph, state = nnx.split(model)
            vae_graph, vae_state = nnx.split(inference.vae_model)
            clip_graph, clip_state = nnx.split(inference.clip_model)
            for p in range(self.first_frames.shape[0]):
                _, video, mouse, keyboard, _ = Trainer._get_curr_batch(inference, iter([self.batch(p)]))
                processed = wan_image_condition_preprocess(video, 352, 640)
                gt = change_tensor_range(processed, [-1, 1], [0, 255], dtype=jax.numpy.uint8)
                first = processed[:, 0].astype(jax.numpy.bfloat16)
                out = perform_bidirectional_rollout(
                    graph, state, vae_graph, vae_state, clip_graph, clip_state, first, mouse, keyboard,
                    video.shape[1], mesh=inference.mesh, left_action_padding=inference.left_action_padding,
                    num_denoising_steps=None)
                gt, out = (jax_to_torch(sharding_utils.get_local_slice_from_fsarray(x)) for x in (gt, out))
                tiles.append(torch.concatenate([gt, out], axis=3))  # (1, F, H, 2W, C)
        video = torch.concatenate(tiles, axis=2)  # players along the height: "b p f h w c -> b f (p h) w c"
        write_video(f"{eval_dir}/video_0_side_by_side.mp4", video[0], fps=FPS)


def restore_model_state(checkpointer, path, state):
    """``checkpointer.restore(path, state)`` (src/runners/inference.py:50-52). A stage-1 single-player checkpoint also
    holds the placeholder ``player_embed`` its trainer adds for the multiplayer model (src/runners/trainer_sp.py:23-63),
    which the single-player model's state lacks: it is restored beside that state and dropped."""
    try:
        saved = checkpointer.metadata(path)
        extra = set(saved.keys()) - set(state.keys())
    except (AttributeError, TypeError, KeyError):
        return checkpointer.restore(path, state)
    if not extra:
        return checkpointer.restore(path, state)
    if extra != {"player_embed"}:
        raise ValueError(f"{path} holds {sorted(extra)} beyond the model's state: is it this model's checkpoint?")
    import jax
    from flax import nnx

    n, dim = saved["player_embed"]["embedding"]["value"].shape
    _, placeholder = nnx.split(nnx.Embed(num_embeddings=n, features=dim, rngs=nnx.Rngs(params=jax.random.PRNGKey(12))))
    state["player_embed"] = placeholder
    restored = checkpointer.restore(path, state)
    del restored["player_embed"]
    del state["player_embed"]
    return restored
'''

#: worldgate's patch to the checkout (adapters/solaris.py's docstring, "Integration B"); the same for solaris-mp and solaris-sp
PATCH = Patch(
    model="solaris", version="1",
    edits=(
        Edit("src/inference.py", "    resolve_device_paths(cfg)\n",
             "    from src.worldgate_inputs import WorldgateInputs\n"
             "\n"
             "    worldgate = WorldgateInputs.from_cfg(cfg)  # None unless +worldgate.actions is given\n"),
        Edit("src/inference.py", "    inference.run()\n",
             "    if worldgate is not None:\n"
             "        worldgate.run(inference)\n"
             "    else:\n"
             "        inference.run()\n", where="replace"),
        Edit("src/runners/base_mp_runner.py",
             "        self.multiplayer_method = self.network_config.params.multiplayer_method\n",
             "        self.multiplayer_method = self.network_config.params.get(\"multiplayer_method\")\n",
             where="replace"),
        Edit("src/runners/inference.py",
             "        self.model_state = self.pretrained_checkpointer.restore(\n"
             "            model_weights_path, model_state\n"
             "        )\n"
             "        self.multiplayer_method = self.network_config.params.multiplayer_method\n",
             "        from src.worldgate_inputs import restore_model_state\n"
             "\n"
             "        self.model_state = restore_model_state(\n"
             "            self.pretrained_checkpointer, model_weights_path, model_state\n"
             "        )\n"
             "        self.multiplayer_method = self.network_config.params.get(\"multiplayer_method\")\n",
             where="replace"),
        Edit("src/worldgate_inputs.py", None, INPUTS_MODULE),
    ),
    summary="+worldgate.actions / +worldgate.first_frames (and +worldgate.independent for the single-player model): "
            "one case as the eval batch, in place of the fixed eval datasets",
    flags=("+worldgate.actions", "+worldgate.first_frames", "+worldgate.independent"),
)
