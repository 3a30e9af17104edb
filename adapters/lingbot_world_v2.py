"""LingBot-World v2 (robbyant/lingbot-world-v2, CC BY-NC-SA 4.0): the causal-fast 14B model, poses only.

Same input files and conventions as v1 (see adapters/lingbot_world.py), read at commit
2648877f763a06cc743bcd919936da4d25f12e7b (docs/probes/lingbot-world-v2.md):

- ``--action_path`` is required and holds ``poses.npy`` [N, 4, 4] c2w OpenCV and ``intrinsics.npy`` [N, 4] in
  480x832 pixels, row 0 used (wan/image2video.py:477-482, 551-561); no keyboard or DSL input exists (wasd_action is
  None: wan/image2video.py:577); translation is max-normalised (wan/utils/cam_utils.py:56-75).
- Frames: latents are truncated to a multiple of ``--chunk_size`` (default 4) *after* the poses were resampled over
  the requested length (wan/image2video.py:498-500, 563-571), which squeezes the trajectory in time unless
  ``(F - 1) // 4 + 1`` is a multiple of 4, i.e. F = 16 m - 3 (317, 333, ...). This adapter always asks for such an F,
  so the poses land on the frames they were planned for; the tail frames hold the final pose.
- Writer fps 16 (generate.py:292-298); recommended window ``--local_attn_size 18 --sink_size 6`` (README.md:108).
- Working size: as v1, ``--size`` is an area and "the aspect ratio of the output video will follow that of the input
  image" (generate.py:80-85; wan/image2video.py:488-497, the same formula as v1's): 768x512 for 3:2, 832x464 for
  16:9, 624x624 for 1:1. The plan reports that size (``working_size`` of adapters/lingbot_world.py).
- Launcher/CLI defaults that touch control, and what worldgate passes: ``--size`` 1280*720 (generate.py:80-85) ->
  480*832; ``--chunk_size`` 4 (generate.py:93-96) -> 4 (explicit, the frame rule depends on it);
  ``--local_attn_size`` -1 / ``--sink_size`` 0 (generate.py:163-172) -> 18 / 6 as the README runs it;
  ``--frame_num`` -> 16m-3. No cap, smoothing or speed scale exists on the pose path (translation max-normalised by
  the model itself, wan/utils/cam_utils.py:56-75).
- Output: ``--save_dir`` (default ``output`` in the checkout, generate.py:178-182) -> OUT and ``--save_file`` ->
  ``OUT/video.mp4`` (generate.py:128-132, 282-298; ``plan.extra["output_video"]``), rank 0, imageio libx264 at 16 fps
  (wan/utils/utils.py), the working size, n_frames = 16m-3 frames (``F = (lat_f - 1) * 4 + 1`` after the chunk
  truncation, wan/image2video.py:498-500).
- Several GPUs for one case (``gpus=N``): ``torchrun --nproc_per_node=8 generate.py ... --dit_fsdp --t5_fsdp
  --ulysses_size 8 ... --local_attn_size 18 --sink_size 6`` (README.md:106-108; run_fast.sh:9-21). ``--ulysses_size``
  must equal the world size and divide the 40 heads (generate.py:261-263; wan/configs/wan_i2v_A14B.py:23); the
  causal SP forward pads the chunk's tokens to a multiple of it (wan/distributed/sequence_parallel.py:309-316) and
  each rank's KV cache holds 40 / N heads (wan/image2video.py:624-626). gpus=N in {1, 2, 4, 5, 8, 10, 20, 40};
  gpus=1 is the plain ``python generate.py`` (FSDP/Ulysses are refused in one process, generate.py:253-259).
- Setup: commit 2648877f763a06cc743bcd919936da4d25f12e7b, the repository root; ``requirements.txt`` (README.md:72;
  flash-attn, README.md:76). Weights: ``hf download robbyant/lingbot-world-v2-14b-causal-fast --local-dir
  CKPT/lingbot-world-v2-14b-causal-fast`` (README.md:88); the command reads ``models_t5_umt5-xxl-enc-bf16.pth``,
  ``google/umt5-xxl/``, ``Wan2.1_VAE.pth`` and ``transformers/`` (the causal-fast DiT) of it
  (wan/configs/wan_i2v_A14B.py:11-15, 30; wan/image2video.py:110-132).
- The causal loop's KV cache (which chunks each chunk's self-attention sees, and where an outside policy could choose
  them): docs/probes/lingbot-world-v2.md section 8.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .base import AdapterError, AdapterInfo, image_arg
from .lingbot_world import OUTPUT_VIDEO, LingBotWorld
from .repo import RepoSpec

SCRIPT = "generate.py "  # the entry point in the command, replaced by the launcher under a context policy
LAUNCHER = "LINGBOT_V2_LAUNCHER_PATH"  # the launcher's path, filled by load() (a placeholder: the plan stays portable)
WINDOW = " --local_attn_size 18 --sink_size 6"  # the README's window (README.md:108), off under a policy
CONTEXT_LOG = "context.jsonl"  # what the launcher writes into OUT: the chunks each chunk held


class LingBotWorldV2(LingBotWorld):
    repo_spec = RepoSpec(
        clone="https://github.com/robbyant/lingbot-world-v2", entry="generate.py",
        hf_id="robbyant/lingbot-world-v2-14b-causal-fast", commit="2648877f763a06cc743bcd919936da4d25f12e7b",
        subdir="", requirements=("requirements.txt",), weights_dir="lingbot-world-v2-14b-causal-fast",
        weights_patterns=("models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*", "Wan2.1_VAE.pth", "transformers/*"))
    multi_gpu = ("torchrun --nproc_per_node=N generate.py ... --dit_fsdp --t5_fsdp --ulysses_size N (README.md:108, "
                 "run_fast.sh:9-21); N must divide the 40 heads (generate.py:261-263)")
    info = AdapterInfo(
        name="lingbot-world-v2", version="0.2", width=832, height=480, fps=16.0,
        fps_source="writer: save_video(fps=cfg.sample_fps=16) (generate.py:292-298)",
        chunk_frames=16, first_chunk_frames=13, duration_unit="frames (16m-3: whole 4-latent chunks)",
        control="poses", pose_convention="c2w OpenCV; relative to frame 0, translation max-normalised inside the model",
        intrinsics_regime=4, aspect_policy="stretch", context_policies=("full_kv", "sliding_window", "fov"),
        hf_ids=("robbyant/lingbot-world-v2-14b-causal-fast",), repository="https://github.com/robbyant/lingbot-world-v2",
        licence="CC BY-NC-SA 4.0", integration="A",
        notes="causal-fast only; --local_attn_size 18 --sink_size 6 as the README runs it; --context full_kv|"
              "sliding_window|fov --budget N runs worldgate's launcher (adapters/lingbot_v2_launcher.py): the model's "
              "own causal loop, the policy choosing the chunks each chunk's self-attention sees; the size shown is the max "
              "area: the working size follows the image's aspect (768x512 at 3:2, 624x624 at 1:1, "
              "wan/image2video.py:488-497), recorded per case in the plan",
    )
    FRAME_RULE = "16m-3, whole 4-latent chunks"
    CKPT = "lingbot-world-v2-14b-causal-fast"

    def frame_count(self, n: int) -> int:
        """The smallest 16 m - 3 >= n + 1 (whole chunks of 4 latents, so no resampling squeeze)."""
        return 16 * math.ceil((n + 4) / 16) - 3

    def command(self, case, F: int) -> str:
        return self.launch(f"--size 480*832 --ckpt_dir CKPT/{self.CKPT} --image {image_arg(case)} "
                           f"--action_path ACTION_DIR --frame_num {F} --chunk_size 4 --local_attn_size 18 "
                           f"--sink_size 6 --base_seed SEED --save_dir OUT --save_file OUT/{OUTPUT_VIDEO} "
                           f"--prompt \"$(cat prompt.txt)\"")

    # ------------------------------------------------------------------------------------ context policies
    def context_support(self, name: str) -> str | None:
        """Every worldgate policy: the launcher puts it into the model's own causal loop."""
        return None if name in self.info.context_policies else super().context_support(name)

    def with_context(self, plan, policy):
        """The plan run under ``policy`` at its budget: worldgate's launcher (adapters/lingbot_v2_launcher.py) in
        place of ``generate.py`` with the same arguments, the model's global cache (``--local_attn_size -1
        --sink_size 0``, generate.py's defaults, passed explicitly: the policy is the only window), and the policy in
        ``context.json``; the launcher logs the chunks each chunk held to ``OUT/context.jsonl``."""
        if policy is None:
            return plan
        plan = self.context_copy(plan, policy)
        cmd = plan.files["command.txt"]
        if WINDOW not in cmd or SCRIPT not in cmd:
            raise AdapterError(f"{self.info.name}: the plan's command has no {SCRIPT!r} with the README window to "
                               f"replace ({cmd.strip()[:120]}...)")
        budget = "none" if policy.budget is None else str(int(policy.budget))
        cmd = cmd.replace(SCRIPT, f"{LAUNCHER} ", 1).replace(WINDOW, " --local_attn_size -1 --sink_size 0")
        cmd = cmd.rstrip("\n") + (f" --context-policy {policy.name} --context-budget {budget} --context-json "
                                  f"context.json --context-log OUT/{CONTEXT_LOG}\n")
        plan.files["command.txt"] = cmd
        plan.files["context.json"] = policy.describe()
        plan.extra["context"] = policy.describe()
        plan.caveats.append(f"context policy {policy.name} at budget {budget} chunks (4 latents, 16 frames each; the "
                            "sink is chunk 0) decides which earlier chunks each chunk's self-attention sees, through "
                            "worldgate's launcher around the model's own causal loop; the README's 18/6 window is "
                            "off. The cache itself stays full length (FullKV's memory); the policy bounds what "
                            "attention reads")
        return plan

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        super().load(device, dtype)
        self._paths["extra"][LAUNCHER.lower()] = str(Path(__file__).with_name("lingbot_v2_launcher.py"))

    def rollout(self, plan, context=None, seed: int = 0):
        if context is None:
            yield from super().rollout(plan, None, seed)
            return
        for chunk in super().rollout(self.planned_for(plan, context), None, seed):
            log = chunk.video.parent / CONTEXT_LOG
            if not log.is_file():
                raise AdapterError(f"{self.info.name}: the launcher wrote no {CONTEXT_LOG} beside {chunk.video.name}: "
                                   "it did not run the policy")
            rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
            chunk.extra["context_rows"] = [{"chunk": int(r["chunk"]), "chunk_start": int(r["chunk_start"]),
                                            "frames": int(r["chunk_stop"]) - int(r["chunk_start"]),
                                            "context": [int(c) for c in r["context"]],
                                            "history_tokens": int(r.get("history_tokens", 0))} for r in rows]
            yield chunk
