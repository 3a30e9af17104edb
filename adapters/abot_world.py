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
  (scripts/inference.py:182-183; ``FRAMES_PER_BLOCK = 12``, config.py:47); the first block decodes to 9 frames
  including the reference image (``FIRST_BLOCK_FRAMES = 9``, config.py:48: the streaming TAEHV decoder drops
  ``frames_to_trim = 3`` startup frames of the first call only, wan/modules/taehv.py:209, 355-366). At
  ``VIDEO_FPS = 12`` (config.py:52) a block is 1 s.
- Timing: the block loop sets block b's key (``set_act``, scripts/inference.py:259-273) before it generates block b
  (``generate_next_block``, :274), and the key conditions only that block's latents (``act_context`` is the block's
  3 latents, causal_inference.py:284-298, 326-339). Block 0 (latents 0-2) decodes to frames 0-8, block 1 (latents
  3-5) to frames 9-20 (latent k >= 1 holds frames 4k-3..4k), so the first frame made under block 1's key is frame 9
  and the first commanded transition is **8 -> 9**. worldgate keeps block 0 idle and starts the trajectory at frame 8:
  the commanded poses hold the start pose for frames 0-8 and move from the 8 -> 9 transition on; segment k covers
  frames [8 + 12 a, 8 + 12 b) for its blocks [a, b), and the last frame (8 + 12 B for B blocks after block 0) holds
  the trajectory's end pose. Every later block is 12 frames and every 20 s key exactly 20 blocks; segment durations
  are rounded to whole blocks (the same count for equal segments; a caveat when a duration changes), and a segment
  shorter than half a block is refused.
- Size: the reference image is scaled to cover and centre-cropped to 1280x704 (``ImageOps.fit``,
  causal_inference.py:268-276; ``STREAM_WIDTH/HEIGHT``, config.py:31-32). No camera model (regime 1).
- fps: the writer is ``imageio.get_writer(fps=VIDEO_FPS)`` = 12 (scripts/inference.py:144-156; config.py:52);
  the README's "16 FPS" is generation speed, and the shipped demo actions are recorded at 16 fps
  (web_client/datasets/actions/default_action.json) and resampled per block (scripts/inference.py:62-100).
- Seed: fixed, not settable: ``set_seed(42)`` when the pipeline loads (web_client/pipeline_loader.py:75;
  utils/misc.py:6-22) seeds the block noise ``torch.randn`` (scripts/inference.py:249), and no argument changes it.
- Reference views: the model also conditions on five pre-generated views of the image (head/left/right/front/back)
  cached under ``outputs/ref_image_cache/<md5(image)[:16]>`` (scripts/inference.py:37-39, 209); when they are missing
  it runs with zero reference latents and a zero mask (causal_inference.py:202-210), as the web client does for any
  new image (web_client/inference.py:176-181). Case images have no cache: a caveat.
- Weights: ``hf download acvlab/ABot-World-0-5B-LF --local-dir ./checkpoints/ABot-World-0-5B-LF`` (README "Setup");
  the paths are fixed in configs/long_forcing_dmd.yaml:24, 31-32, 36 and configs/default_config.yaml:5-6, relative to
  the checkout, and no command-line argument takes them. The command reads ``config.json`` +
  ``diffusion_pytorch_model.safetensors`` (``CausalWanModel.from_pretrained(model_name)``, utils/wan_wrapper.py:549),
  ``models_t5_umt5-xxl-enc-bf16.pth`` and ``google/umt5-xxl/`` (utils/wan_wrapper.py:60-72), ``Wan2.2_VAE.pth`` (the
  ci2v encoder, causal_inference.py:55-58) and ``taew2_2.pth`` (the decoder, utils/wan_wrapper.py:388-393).

Launcher defaults that touch control or output (scripts/inference.py:347-393) and what worldgate passes:
``--fps-blocks`` 3600 (one hour; passed: the plan's block count), ``--action-mode`` repeat (cycles the list when it is
short; passed: fixed), ``--quant-type`` all (runs 15 quantisation variants; passed: fp8-per-token, the config's
``quant_type``, configs/default_config.yaml:2-3), ``--vae_type`` (config; passed: taew2_2, default_config.yaml:1),
``--phase`` both (passed), ``--action-json`` (unused: ``--action-list`` overrides it, scripts/inference.py:192-198).
No caps or smoothing exist.

Output: ``outputs/profile_bench/<%Y%m%d_%H%M%S>/<quant_type>/<quant_type>.mp4`` in the checkout
(scripts/inference.py:403-408, 322-324; ``OUTPUT_DIR``, config.py:51), libx264 at 12 fps, 1280x704, 9 + 12 B frames
for 1 + B blocks (block 0: 9 frames). Two cases started in the same second in one checkout would share that folder,
so the patch writes the run folder to ``$WORLDGATE_OUT`` when it is set: the video is
``$WORLDGATE_OUT/fp8-per-token/fp8-per-token.mp4`` (``plan.extra["output_video"]``).

Multi-GPU: none. The README runs it on "a single desktop GPU" and the script has no distributed code (one
``torch.device("cuda")``, web_client/pipeline_loader.py:74): ``gpus>1`` is refused.

Integration B: the script conditions on a fixed reference image (``BENCH_REF_IMAGE``, scripts/inference.py:36-39,
188) and a fixed prompt ``"| unknown |"`` (scripts/inference.py:187: ``--prompt`` is parsed but never used).
worldgate's patch (:data:`PATCH`, applied by ``worldgate setup``) adds a worldgate-owned ``worldgate_inputs.py`` at the
checkout root and five one-line calls into it in scripts/inference.py (two around its ``ap.parse_args()``) plus one
in web_client/pipeline_loader.py:
``--image PATH`` in place of ``BENCH_REF_IMAGE`` (the reference cache keyed by that image exactly as
scripts/inference.py:38-39 keys its own), ``--ckpt_dir DIR`` in place of the ``checkpoints/ABot-World-0-5B-LF``
prefix of every weight path of the merged configs (web_client/pipeline_loader.py:81-83), and the run folder in
``$WORLDGATE_OUT``. The prompt stays the script's (a caveat).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from worldgate.trajectories.core import Look, Move, Segment, Trajectory

from .base import AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg, image_arg
from .patching import Edit, Patch
from .repo import RepoAdapter, RepoSpec

KEY_ORDER = ("W", "A", "S", "D", "I", "J", "K", "L")  # web_client/config.py:59
KEY_OF_MOVE = {Move.FORWARD: 0, Move.STRAFE_LEFT: 1, Move.BACK: 2, Move.STRAFE_RIGHT: 3}
KEY_OF_LOOK = {Look.PITCH_UP: 4, Look.YAW_LEFT: 5, Look.PITCH_DOWN: 6, Look.YAW_RIGHT: 7}
FPS = 12.0
BLOCK = 12  # frames per block after the first
FIRST = 9  # frames of block 0, the reference image included
LEAD = FIRST - 1  # frame 8: block 1's key drives the 8 -> 9 transition on (scripts/inference.py:259-274)
WIDTH, HEIGHT = 1280, 704
CKPT_DIR = "checkpoints/ABot-World-0-5B-LF"
QUANT = "fp8-per-token"  # configs/default_config.yaml:3
COMMIT = "e260168d3faa9407d741fa37c11f3eb335a4228f"

#: worldgate's own module, created at the checkout root (importable from scripts/inference.py:15-17 and
#: web_client/pipeline_loader.py:10-13, which both put the root on sys.path)
INPUTS_PY = '''"""worldgate's inputs for ABot-World's scripts/inference.py (worldgate's patch; not part of ABot-World).

--image PATH     the reference image in place of BENCH_REF_IMAGE; its reference-view cache is keyed by this image
                 as scripts/inference.py keys BENCH_REF_IMAGE's: outputs/ref_image_cache/<md5(image)[:16]>
--ckpt_dir DIR   the weights folder in place of the configs' checkpoints/ABot-World-0-5B-LF prefix
$WORLDGATE_OUT   when set, the run folder in place of outputs/profile_bench/<timestamp>
"""
import hashlib
import os
from pathlib import Path

CKPT_PREFIX = "checkpoints/ABot-World-0-5B-LF"
CKPT_DIR = None  # set by configure() from --ckpt_dir


def add_arguments(ap):
    ap.add_argument("--image", type=str, default=None,
                    help="(worldgate) the reference image, in place of BENCH_REF_IMAGE")
    ap.add_argument("--ckpt_dir", type=str, default=None,
                    help="(worldgate) the weights folder, in place of " + CKPT_PREFIX)


def configure(args):
    global CKPT_DIR
    image = getattr(args, "image", None)
    if image and not Path(image).is_file():
        raise SystemExit("--image " + image + ": no such file")
    ckpt = getattr(args, "ckpt_dir", None)
    if ckpt:
        if not Path(ckpt).is_dir():
            raise SystemExit("--ckpt_dir " + ckpt + ": no such folder")
        CKPT_DIR = str(ckpt).rstrip("/")


def reference(args, ref_image_path, ref_cache_dir, root):
    """(reference image, reference-view cache folder): --image and the cache keyed by its bytes, else the script's."""
    image = getattr(args, "image", None)
    if not image:
        return ref_image_path, ref_cache_dir
    digest = hashlib.md5(Path(image).read_bytes()).hexdigest()[:16]
    return image, str(Path(root) / "outputs" / "ref_image_cache" / digest)


def rebase_checkpoints(config):
    """The merged config with every path under checkpoints/ABot-World-0-5B-LF moved under --ckpt_dir (in place)."""
    if CKPT_DIR is None:
        return config
    from omegaconf import DictConfig, ListConfig

    def walk(node):
        for k in (range(len(node)) if isinstance(node, (list, ListConfig)) else list(node.keys())):
            v = node[k]
            if isinstance(v, str) and (v == CKPT_PREFIX or v.startswith(CKPT_PREFIX + "/")):
                node[k] = CKPT_DIR + v[len(CKPT_PREFIX):]
            elif isinstance(v, (dict, list, DictConfig, ListConfig)):
                walk(v)

    walk(config)
    return config


def run_dir(default):
    """$WORLDGATE_OUT when set (one case per folder), else the script's timestamped folder."""
    out = os.environ.get("WORLDGATE_OUT")
    return Path(out) if out else default
'''

PATCH = Patch(
    model="abot-world", version="1",
    summary="--image PATH (in place of BENCH_REF_IMAGE, reference cache keyed by it), --ckpt_dir DIR (the configs' "
            "checkpoints/ABot-World-0-5B-LF prefix), run folder in $WORLDGATE_OUT",
    flags=("--image", "--ckpt_dir"),
    edits=(
        Edit("worldgate_inputs.py", None, INPUTS_PY),
        Edit("scripts/inference.py",
             "from web_client.pipeline_loader import _init_lock, _get_pipeline_cached, decode_block_to_frames, "
             "get_pipeline\n",
             "import worldgate_inputs\n"),
        Edit("scripts/inference.py", "    _ref_cache_dir = BENCH_REF_IMAGE_CACHE_DIR\n",
             "    _ref_image_path, _ref_cache_dir = worldgate_inputs.reference(args, _ref_image_path, _ref_cache_dir, "
             "_ROOT)\n"),
        Edit("scripts/inference.py", "    args = ap.parse_args()\n",  # the flags around the script's own parse
             "    worldgate_inputs.add_arguments(ap)\n"
             "    args = ap.parse_args()\n"
             "    worldgate_inputs.configure(args)\n",
             where="replace"),
        Edit("scripts/inference.py",
             '    run_dir = OUTPUT_DIR / "profile_bench" / datetime.now().strftime("%Y%m%d_%H%M%S")\n',
             "    run_dir = worldgate_inputs.run_dir(run_dir)\n"),
        Edit("web_client/pipeline_loader.py", "    config = OmegaConf.merge(default_config, config)\n",
             "    import worldgate_inputs\n    config = worldgate_inputs.rebase_checkpoints(config)\n"),
    ),
)


class ABotWorld(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/amap-cvlab/ABot-World", entry="scripts/inference.py",
        hf_id="acvlab/ABot-World-0-5B-LF", commit=COMMIT, subdir="", patch=PATCH,
        patch_doc="adapters/abot_world.py (PATCH: --image, --ckpt_dir, $WORLDGATE_OUT; applied by worldgate setup)",
        weights_patterns=("config.json", "diffusion_pytorch_model.safetensors", "models_t5_umt5-xxl-enc-bf16.pth",
                          "google/umt5-xxl/*", "Wan2.2_VAE.pth", "taew2_2.pth"),
        requirements=("requirements.txt",))
    info = AdapterInfo(
        name="abot-world", version="0.2", width=WIDTH, height=HEIGHT, fps=FPS,
        fps_source="writer: imageio fps=VIDEO_FPS=12 (scripts/inference.py:144-156; web_client/config.py:52)",
        chunk_frames=BLOCK, first_chunk_frames=FIRST, duration_unit="blocks of 12 frames (1 s); block 0 = 9 frames",
        control="keys [W,A,S,D,I,J,K,L] per 12-frame block (I/K pitch, J/L yaw)", pose_convention="none",
        intrinsics_regime=1, aspect_policy="crop", context_policies=(),
        hf_ids=("acvlab/ABot-World-0-5B-LF",), repository="https://github.com/amap-cvlab/ABot-World",
        licence="Apache-2.0", integration="B",
        no_seed="the seed is fixed: set_seed(42) at pipeline load (web_client/pipeline_loader.py:75) seeds the "
                "torch.randn block noise (scripts/inference.py:249); no argument sets it",
        notes="a patch adds --image and --ckpt_dir (upstream: a fixed image and config-relative weights); the "
              "script ignores --prompt; fp8-per-token quantisation as configured",
    )
    FPS = FPS
    multi_gpu = ""  # one GPU: no distributed code (web_client/pipeline_loader.py:74); README: "a single desktop GPU"

    def plan(self, case) -> NativeInputs:
        self.gpus()  # gpus>1 is refused: no multi-GPU inference in the official code
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
            a = LEAD + BLOCK * len(blocks)  # block b >= 1 drives transitions 8 + 12 (b - 1) ... 8 + 12 b
            blocks += [row] * k
            segs.append((a, LEAD + BLOCK * len(blocks)))
            kept.append(Segment(s.move, s.look, float(k)))
        rows = [[0] * 8] + blocks  # block 0: the conditioning block, held idle
        n = FIRST + BLOCK * len(blocks)
        timed = Trajectory(kept, speed=traj.speed, yaw_rate=traj.yaw_rate, pitch_rate=traj.pitch_rate)
        # frames 0..7 hold the start pose; frame 8 + i is the commanded pose at t = i / 12 s (8 -> 9 is block 1's)
        c2w = np.concatenate([np.broadcast_to(np.eye(4), (LEAD, 4, 4)), timed.poses(self.FPS, n - LEAD)])
        caveats += [f"block 0 (frames 0-{FIRST - 1}, the reference image and 8 generated frames) is held idle: block "
                    f"1's key drives the {LEAD}->{FIRST} transition on, so the trajectory starts at frame {LEAD}",
                    "key control only: turn rate and move speed are the model's own, the commanded ones are not "
                    "matched",
                    "the prompt is not used: scripts/inference.py:187 fixes it to '| unknown |'",
                    "the case image has no pre-generated reference views (outputs/ref_image_cache/<md5>): the model "
                    "runs with zero reference latents, as the web client does for a new image",
                    "the seed is fixed at 42 (web_client/pipeline_loader.py:75): worldgate's seed is not used"]
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        action_list = json.dumps(rows, separators=(",", ":"))
        cmd = (f"python scripts/inference.py --phase both --fps-blocks {len(rows)} --action-mode fixed "
               f"--quant-type {QUANT} --vae_type taew2_2 --action-list \"$(cat action_list.json)\" "
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
                   "ckpt_dir": str(Path(CKPT_DIR)), "first_commanded_frame": LEAD,
                   # the patched script's run folder is $WORLDGATE_OUT (scripts/inference.py:403, 408, 322)
                   "output_video": f"{QUANT}/{QUANT}.mp4"},
        )
