"""Yume 1.5 (stdstu12/YUME, 5B 720p; code Apache-2.0): text-only camera control, one caption line per 29-frame chunk.

Conventions this adapter relies on, read at commit 111c3fab7fb020d1e261a68be6ec78a3fecc8d5b (docs/probes/yume.md;
S5 = fastvideo/sample/sample_5b.py, WA = webapp_single_gpu.py):

- Entry point ``fastvideo/sample/sample_5b.py`` (scripts/inference/sample_5b.sh:7-21) in image mode: ``--jpg_dir`` (every
  image of the folder is a case, bilinearly **stretched** to 704x1280, S5:1273-1277, 738-745) and ``--caption_path``,
  one control caption per line; each line becomes ``line.rstrip('\\n') + response`` where ``response`` is the
  InternVL3-2B refinement of ``--prompt`` (S5:798-817). ``sample_num = len(caption)`` chunks (S5:820).
- Caption vocabulary of Yume 1.5 (the 5B model): ``First-person perspective.`` + a translation phrase (WA:648-658) + a
  rotation phrase (WA:660-670), each with its stationary ``(·)`` form, followed by the speed sentence ``Actual distance
  moved:<n> at 100 meters per second. Angular change rate (turn speed):<n>. View rotation speed:<n>.`` — the line
  layout (``". "`` separators, speed sentence, no trailing space) is caption_re.txt:1 (move) and caption_re.txt:7
  (pan), the file sample_5b.sh passes (sample_5b.sh:16). The numbers are those of the shipped lines: 4/0/0 for a
  move, 0/4/4 for a turn; there is no degrees-per-unit, so the commanded speed and turn rate are not matched.
  (The Yume 1.0 phrases ``Person moves forward (W).`` / ``Camera turns right (→).`` are built only for
  ``--video_root_dir`` mode, S5:628-654, and in Yume-1.0 training, fastvideo/dataset/t2v_datasets.py:393-418.)
- Move and rotation are independent sentences (WA:672-677; the data converter emits keys and mouse separately,
  decode_camera_controls_from_c2w_sequence.py:20-58), so walking while turning is expressible. Signs: ``→`` is a
  positive yaw about camera +Y and ``↑`` a positive rotation about +X in OpenCV axes (…:36-50), the trajectories'
  yaw-right / pitch-up.
- One chunk = 8 latents (S5:875-876) decoded on their own, ``video_cat = scale(vae, model_input[:, -8:])`` (S5:1052):
  the Wan2.2 VAE gives 1 + 4*7 = **29 frames** per chunk (wan23/modules/vae2_2.py:416-417, 839-857); ``[:, -32:]``
  does not pad (S5:1053). The writer is ``export_to_video(..., fps=16)`` (S5:1080), so a line is 29/16 = 1.8125 s.
  The output holds 29 frames per line; the conditioning image is not one of them.
- Caption timing: chunk 0 is conditioned on ``caption[0]`` (S5:901-906); after chunk k the next chunk gets
  ``caption[k]`` (S5:1083-1094). Chunk j >= 1 therefore reads line j-1, chunks 0 and 1 share line 0, and the last
  line is read (it counts a chunk) but never conditions one. This adapter writes line i = the caption of chunk i+1
  and repeats the final caption as the unused last line; the first segment lasts at least 2 chunks.
- Rounding rule (one for every segment): chunks = max(1, floor(seconds * 16 / 29 + 1/2)), the first segment at least 2.
  A 20 s key is 320 frames -> 11 chunks = 319 frames (19.94 s) for every key.
- No camera model: intrinsics are not used (regime 1).
- Pure pans: a segment that turns without moving says ``The camera's movement direction remains stationary (·).``
  (WA:657) with distance 0, while the shipped caption file's pan lines say ``The camera pushes forward (W).`` with
  ``Actual distance moved:0`` (caption_re.txt:7-11); the webapp itself drops both stationary sentences
  (WA:674-677). Which wording the model was trained on is not in the code: the plan's caveats say so.
- Launcher/CLI defaults that touch control, and what worldgate passes (scripts/inference/sample_5b.sh:7-21): no
  flag caps, smooths or scales a motion (text control: the numbers are in the caption lines);
  ``--num_euler_timesteps`` 100 (S5:1511) -> 4 as sample_5b.sh runs it; ``--rand_num_img`` -> 0.6 (sample_5b.sh);
  ``sample_num`` = caption lines (S5:820), so the caption file decides the length. Paths: the weights are read from
  ``./Yume-5B-720P`` in the checkout, hard-coded (S5:1146): ``load`` refuses a ``ckpt`` other than the weights
  found there, which the model would silently use instead (``ln -s CKPT REPO/Yume-5B-720P`` makes them agree); ``--video_output_dir`` (default None; sample_5b.sh ./outputs,
  S5:1376-1380, 1076-1080) -> the runner's OUT, so no video is picked out of the checkout.
- Output: ``OUT/<image stem>_<caption_ori>_<repeat>_<rank>_<chunk>.mp4`` (S5:821, 1074-1080), rewritten after every
  chunk with the whole video so far (the last one is the result; the runner's newest-mp4 pick finds it; the name
  holds the caption text, so it is not declared in the plan), ``export_to_video(fps=16)``, 1280x704 (the image is
  stretched, S5:1273-1277), 29 frames per caption line.
- Several GPUs for one case: none. sample_5b.sh launches 2 processes (scripts/inference/sample_5b.sh:7), but that is
  data parallel over the images of ``--jpg_dir``: rank r takes image ``(step - 1) * world_size + r``, clamped to
  the last (S5:782-785), with the DiT FSDP-sharded over the ranks (S5:1163-1246); ``--sp_size`` only creates groups
  (S5:1135, 1475-1478) that the 5B model never uses (``Yume.sp_size = 1``, wan23/textimage2video.py:161). One case on
  N processes would be generated N times, so ``gpus>1`` is refused. gpus=1 is a 1-process torchrun: the script reads
  ``LOCAL_RANK``/``RANK``/``WORLD_SIZE`` and joins NCCL unconditionally (S5:1124-1127); ``--standalone`` replaces
  the launcher's fixed ``--master_port 29717``, so two cases on one node do not collide.
- Setup: commit 111c3fab7fb020d1e261a68be6ec78a3fecc8d5b, the repository root; the README runs ``./env_setup.sh
  fastvideo`` then ``pip install -r requirements.txt`` (README.md:36-39). env_setup.sh installs torch 2.5.0 cu121,
  flash-attn 2.7.0.post2 and requirements-lint.txt, then ``pip install -e .`` (pyproject.toml: the ``fastvideo``,
  ``wan23`` and ``hyvideo`` packages the nested entry point imports). ``requirements`` lists the two pip steps,
  ``pyproject.toml`` then ``requirements.txt`` (which pins ``flash-attn==2.7.0.post2`` and ``torch==2.5.0+cu121``,
  requirements.txt:37, 148: pip needs the PyTorch cu121 index for the latter). Weights:
  ``stdstu123/Yume-5B-720P`` into ``./Yume-5B-720P`` of the checkout (README.md:81); the command reads its
  ``models_t5_umt5-xxl-enc-bf16.pth``, ``google/umt5-xxl/``, ``Wan2.2_VAE.pth`` (wan23/configs/wan_ti2v_5B.py:12-16;
  wan23/textimage2video.py:117-126) and the DiT ``config.json`` + ``diffusion_pytorch_model.safetensors``
  (textimage2video.py:156-157). Not runnable as shipped: the prompt refiner is loaded from the hard-coded
  ``/mnt/petrelfs/maoxiaofeng/Yume_v2_release/InternVL3-2B-Instruct`` (S5:1288-1294), which no checkout has.
"""

from __future__ import annotations

import math

import numpy as np

from worldgate.trajectories.core import Look, Move

from .base import AdapterError, AdapterInfo, NativeInputs, UnsupportedMotion, horizontal_fov_deg
from .repo import RepoAdapter, RepoSpec, torchrun

W, H = 1280, 704
FPS = 16.0
LINE_FRAMES = 29  # 8 latents decoded alone: 1 + 4 * 7 frames

PREFIX = "First-person perspective."  # WA:673, caption_re.txt:1
MOVE_PHRASE = {  # WA:648-658
    Move.FORWARD: "The camera pushes forward (W).",
    Move.STRAFE_LEFT: "The camera moves to the left (A).",
    Move.BACK: "The camera pulls back (S).",
    Move.STRAFE_RIGHT: "The camera moves to the right (D).",
    Move.IDLE: "The camera's movement direction remains stationary (·).",
}
LOOK_PHRASE = {  # WA:660-670
    Look.YAW_RIGHT: "The camera pans to the right (→).",
    Look.YAW_LEFT: "The camera pans to the left (←).",
    Look.PITCH_UP: "The camera tilts up (↑).",
    Look.PITCH_DOWN: "The camera tilts down (↓).",
    Look.IDLE: "The rotation direction of the camera remains stationary (·).",
}
MOVE_DISTANCE = 4  # caption_re.txt:1 "Actual distance moved:4" while pushing forward
TURN_RATE = 4  # caption_re.txt:7 "Angular change rate (turn speed):4. View rotation speed:4." while panning


def caption(move: Move, look: Look) -> str:
    """The control caption of one chunk, laid out as caption_re.txt:1 / :7."""
    try:
        mp, lp = MOVE_PHRASE[Move(move)], LOOK_PHRASE[Look(look)]
    except (KeyError, ValueError):
        raise UnsupportedMotion(f"yume has no caption for move {move!r} / look {look!r}; it can say "
                                f"{sorted(m.value for m in MOVE_PHRASE)} and {sorted(lk.value for lk in LOOK_PHRASE)}") from None
    d = MOVE_DISTANCE if move is not Move.IDLE else 0
    r = TURN_RATE if look is not Look.IDLE else 0
    return (f"{PREFIX} {mp} {lp} Actual distance moved:{d} at 100 meters per second. "
            f"Angular change rate (turn speed):{r}. View rotation speed:{r}.")


def chunks_for(seconds: float) -> int:
    """Chunks (caption lines' worth of video) for a segment: round half up of seconds * 16 / 29, at least 1."""
    return max(1, int(math.floor(round(seconds * FPS / LINE_FRAMES, 9) + 0.5)))


class Yume(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/stdstu12/YUME",
        entry="fastvideo/sample/sample_5b.py",
        hf_id="stdstu123/Yume-5B-720P",
        commit="111c3fab7fb020d1e261a68be6ec78a3fecc8d5b", subdir="", requirements=("pyproject.toml", "requirements.txt"),
        weights_patterns=("models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*", "Wan2.2_VAE.pth", "config.json",
                          "diffusion_pytorch_model.safetensors"),
    )
    #: none: sample_5b.sh's 2 processes split the images of --jpg_dir (sample_5b.py:782-785), not one case
    multi_gpu = ""
    info = AdapterInfo(
        name="yume", version="0.1", width=W, height=H, fps=FPS,
        fps_source="writer: export_to_video(fps=16) (sample_5b.py:1080); wan_ti2v_5B sample_fps=24 is not used",
        chunk_frames=LINE_FRAMES, first_chunk_frames=LINE_FRAMES,
        duration_unit="caption lines (29 frames = 8 latents each; line 1 drives chunks 0 and 1, the last line is unused)",
        control="text", pose_convention="none", intrinsics_regime=1, aspect_policy="stretch", context_policies=(),
        hf_ids=("stdstu123/Yume-5B-720P",), repository="https://github.com/stdstu12/YUME",
        licence="code Apache-2.0 (LICENSE); the model card's licence is not stated in the repository",
        integration="A",
        notes="--caption_path caption.txt; full history with multi-rate spatial compression "
              "(wan23/modules/model.py:588-721), no knob to restrict it; prompt refined by InternVL3-2B",
        no_seed="sample_5b.py parses --seed but never uses it (set_seed is commented out, sample_5b.py:1137-1140); "
                "wan_i2v.generate draws its seed from unseeded random (wan23/textimage2video.py:348, 456)",
    )
    FPS = FPS
    CKPT_IN_REPO = "Yume-5B-720P"  # ckpt_dir = "./Yume-5B-720P", relative to the working directory (S5:1146)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        super().load(device, dtype)
        link = self._paths["repo"] / self.CKPT_IN_REPO
        # where the checkout has no ./Yume-5B-720P the model stops with its own error; where it has one that is not
        # ckpt, the model would silently run those weights instead
        if link.exists() and link.resolve() != self._paths["ckpt"]:
            raise AdapterError(
                f"yume reads its weights from ./{self.CKPT_IN_REPO} of the checkout, hard-coded "
                f"(fastvideo/sample/sample_5b.py:1146), not from ckpt={self._paths['ckpt']}: link them there "
                f"(`ln -s {self._paths['ckpt']} {self._paths['repo'] / self.CKPT_IN_REPO}`) or pass "
                f"ckpt={self._paths['repo'] / self.CKPT_IN_REPO}")

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        per_seg = [chunks_for(s.seconds) for s in traj.segments]
        per_seg[0] = max(2, per_seg[0])  # chunks 0 and 1 read the same line (S5:901-906, 1083-1094)
        wanted, seg_of_chunk = [], []  # the caption each chunk should see
        for i, (s, k) in enumerate(zip(traj.segments, per_seg)):
            wanted += [caption(s.move, s.look)] * k
            seg_of_chunk += [i] * k
        n = len(wanted)
        lines = wanted[1:] + [wanted[-1]]  # line i drives chunk i+1; line 0 also drives chunk 0; last line unused
        line_of_chunk = np.array([0] + list(range(n - 1)), np.int32)
        assert all(lines[j] == wanted[c] for c, j in enumerate(line_of_chunk))
        starts = np.concatenate([[0], np.cumsum(per_seg)]) * LINE_FRAMES
        segs = [(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]
        caveats = [
            "text control: the commanded speed and turn rate are not matched; the speed numbers are the shipped "
            "example's (4 for a move, 4/4 for a turn, caption_re.txt:1,7)",
            f"durations are whole 29-frame chunks at 16 fps (1.8125 s): {n} chunks = {n * LINE_FRAMES} frames for "
            f"{traj.duration:g} s commanded",
            "the caption file's last line is read but conditions no chunk (sample_5b.py:1083-1094); it repeats the "
            "final caption",
            "the prompt is refined by InternVL3-2B and appended to every caption line (sample_5b.py:798-817): the "
            "scene text the model sees is not verbatim",
            "the image is stretched to 704x1280 (sample_5b.py:738-745) whatever its aspect",
        ]
        if per_seg[0] != chunks_for(traj.segments[0].seconds):
            caveats.append(f"the first segment lasts 2 chunks, not {chunks_for(traj.segments[0].seconds)}, because "
                           "chunks 0 and 1 share the first caption line")
        if any(s.move is not Move.IDLE and s.look is not Look.IDLE for s in traj.segments):
            caveats.append("walk+turn segments are one move sentence plus one rotation sentence (webapp_single_gpu.py:"
                           "672-677); their speed numbers are 4/4/4")
        if any(s.move is Move.IDLE and s.look is not Look.IDLE for s in traj.segments):
            caveats.append("turn-only segments say 'The camera's movement direction remains stationary (·).' with "
                           "distance 0 (webapp_single_gpu.py:657), while the shipped caption file's pan lines say "
                           "'The camera pushes forward (W).' with distance 0 (caption_re.txt:7-11): which wording "
                           "the model was trained on is not settled by the code")
        if any(s.look in (Look.PITCH_UP, Look.PITCH_DOWN) for s in traj.segments):
            caveats.append("no shipped caption line tilts; pitch lines reuse the pan numbers (0/4/4)")
        hfov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) if case.intrinsics and case.image_size else None
        cmd = torchrun(self.gpus(), "fastvideo/sample/sample_5b.py "  # gpus>1 refused (multi_gpu "")
               "--gradient_checkpointing --train_batch_size 1 --max_sample_steps 600000 --mixed_precision bf16 "
               "--allow_tf32 --video_output_dir OUT --caption_path caption.txt --test_data_dir ./val "
               "--num_euler_timesteps 4 --rand_num_img 0.6 --jpg_dir IMAGE_DIR --prompt \"$(cat prompt.txt)\"") + (
               "  # IMAGE_DIR holds only the case image; weights in ./Yume-5B-720P (sample_5b.py:1146), checked by load")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=FPS, n_frames=n * LINE_FRAMES, segment_frames=segs,
            arrays={"line_of_chunk": line_of_chunk, "segment_of_chunk": np.array(seg_of_chunk, np.int32),
                    "chunks_per_segment": np.array(per_seg, np.int32)},
            files={"caption.txt": "\n".join(lines) + "\n", "prompt.txt": case.prompt, "command.txt": cmd + "\n"},
            intrinsics={"regime": 1, "case": case.intrinsics, "case_hfov_deg": hfov, "native_hfov_deg": None,
                        "note": "text control: the model has no camera model"},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"lines": n, "frames_per_line": LINE_FRAMES, "image": case.image},
        )
