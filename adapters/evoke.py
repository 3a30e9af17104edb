"""Evoke (AlayaLab/Evoke, Apache-2.0; ViGeo depth backend CC-BY-NC-4.0): absolute c2w poses, 384x640 @ 24 fps.

Conventions this adapter relies on, read at commit 74d268516d95c8fceadd2378f91a73f9f187042b (docs/probes/evoke.md;
IS = scripts/inference/infer_single.py, IB = scripts/inference/infer_batch.py, EV = evoke/utils/ev_validation.py,
OP = evoke/dataset/evoke_data/operators.py, PE = evoke/pipelines/pipeline_evoke.py):

- Entry point ``MODE=i2v NUM_CHUNKS=c JSONL=cases.jsonl bash scripts/inference/infer_post_distill.sh`` (the shipped
  post-distilled model; infer_post_distill.sh:92-138). One jsonl row per case: ``image_path``, ``pose_path``,
  ``prompt``, ``pose_fps``, ``pose_source_resolution`` [H, W], ``pose_type`` (IB:369-381); row paths are relative to
  the Evoke checkout (IB:356). The prompt is used verbatim (IB:371-372).
- Pose file: ViPE-style ``.npz`` with ``cam_c2w`` [T, 4, 4] and ``intrinsics`` [T, 3, 3] pixels (EV:131-147);
  **camera-to-world, OpenCV** axes (evoke/modules/geometric_state/da3_cloud.py:37, 416; EV:334 "camera +Z forward"),
  absolute (the warp renders a persistent point cloud from them, PE:2556-2584). The poses are resampled to the
  hard-coded 24 fps by nearest index ``round(i * pose_fps / 24)`` (IS:637; EV:150-166): this adapter writes one pose
  per output frame at ``pose_fps`` 24, so the resampling is the identity. The track covers every output frame, so
  the extension mode past it (the launcher's ``relative_replay``, IB:249; passed as ``clamp`` here) never acts.
- Launcher defaults that touch control, and what this adapter passes (the launcher's own values would clamp every
  look to 10 degrees and 3 units per 36-frame chunk and low-pass the track, IB:245-246, 486-490; IS:1169-1207):
  ``CAP_MAX_DEG`` 10 -> 0, ``CAP_MAX_TRANS`` 3 -> 0 (0 skips the clamp, IS:1177), ``POSE_SMOOTH_WIN`` 5 -> 0
  (IS:1169), ``POSE_EXTEND_MODE`` relative_replay -> clamp, ``JOYSTICK_HUD`` auto -> off (it draws an overlay into
  the video, IB:209-211, 473), ``SEED`` 44 -> the rollout seed (IB:95, 426). Paths (``ckpt`` = the ``models``
  folder of ``hf download AlayaLab/Evoke --local-dir models`` + ViGeo in ``models/ViGeo1.1``, README.md:166-170):
  ``TRANSFORMER_PATH`` (launcher default models/evoke/stage3_post_distillation, infer_post_distill.sh:135) ->
  ``CKPT/evoke/stage3_post_distillation``, ``BASE_CKPT`` models/evoke-base (IB:81) -> ``CKPT/evoke-base``,
  ``VIGEO_WEIGHTS`` models/ViGeo1.1 (IB:173) -> ``CKPT/ViGeo1.1``. ``OUT_ROOT`` (launcher default
  ``output_evoke/infer/post_distill_$TAG`` in the checkout, infer_post_distill.sh:161, read from the environment)
  -> the runner's ``OUT`` (fresh per case: a stale ``geo_pred.mp4`` can never make the launcher skip the case,
  IB:410), and the plan names ``<case>/geo_pred.mp4`` (``extra["output_video"]``), so the per-chunk segment videos
  beside it are never taken. ``GPU_OFFSET`` (infer_post_distill.sh:201-205: one shard exports
  ``CUDA_VISIBLE_DEVICES=${GPU_OFFSET:-0}``) is set by the runner to the case's own device (``RepoSpec.device_env``),
  so under accelerate no case lands on GPU 0 of another. Left at the launcher's value, with a caveat: image-to-video chunk 0 rescales depth so its 90th-percentile parallax is 135 px
  (``GEO_CHUNK0_TARGET_DISP_PX``, da3_cloud.py:1737-1853; IS:1018), which is the model's own behaviour.
- Translation unit: in i2v the scene's median depth is set to 5 pose units (``depth_median`` scale mode, IB:175-197;
  IS:329). This adapter writes the trajectory's metres as pose units. The Plücker branch that max-normalises
  translation per chunk (evoke/modules/camera_control.py:110-124; OP:431-451) is off in every shipped recipe
  (configs/training/stage3_post_distillation.yaml:79; IB:202-208); pure rotations carry exactly zero translation
  anyway, so its ``max_norm > 0`` guard (OP:448) leaves them at zero.
- Intrinsics (regime 4): only frame 0's K is used (EV:170-173). Evoke maps K from ``pose_source_resolution`` to
  384x640 assuming resize-to-cover + centre crop (OP:499-536) while the i2v image is plainly **stretched** to 640x384
  (IS:1129-1131). This adapter stretches K itself (x 640/w0, y 384/h0) and declares ``pose_source_resolution``
  [384, 640], which makes Evoke's crop-resize the identity (scale 1, crop 0), so K and pixels agree. Evoke replaces a
  declared size when the principal point implies another on both axes (OP:454-496); such a case raises here.
- Frames: ``NUM_CHUNKS`` = c gives ``NUM_FRAMES`` = 33 c (IB:92-93) and 36 c - 3 output frames at 24 fps (36 per chunk,
  the clip cut to 4k+1 at its end: PE:3268-3272; scripts/inference/README.md:56-74); the pose track must cover
  (9 c - 1) * 4 + 1 = 36 c - 3 frames (IS:622-630). Chunk k reads the 33 poses [36 k, 36 k + 33) (PE:2542-2565).
  Rounding: the smallest c with 36 c - 3 >= n + 1 (n = frames of the trajectory at 24 fps); a 20 s key is 480 frames.
- Output: ``$OUT_ROOT/<name>/geo_pred.mp4`` (IB:240, 370, 404; infer_post_distill.sh:76-78), ``name`` = the row's
  ``name`` = the case id, ``OUT_ROOT`` = the runner's OUT (above), 640x384 at 24 fps, 36 c - 3 frames; per-chunk
  ``segments/segment_NNN_pred.mp4`` beside it.
- Several GPUs for one case: none. ``LOCAL_GPUS`` shards *cases* over GPUs, one ``infer_batch.py`` process per GPU
  (infer_post_distill.sh:59, 99-101, 201-236: "LOCAL_GPUS (shard by case)"); the student's Ulysses runtime
  (evoke/modules/student_sp.py) is training-only and the teacher example is "non-SP, single process"
  (scripts/inference/README.md:163-165). ``gpus>1`` is refused. With one shard the launcher pins
  ``CUDA_VISIBLE_DEVICES=${GPU_OFFSET:-0}`` (infer_post_distill.sh:201-206), an absolute index that overrides the
  device the runner gives the process.
- Setup: commit 74d268516d95c8fceadd2378f91a73f9f187042b, the repository root; torch 2.4.0 first, then
  ``requirements.txt`` (README.md:132-138; its diffusers is a development fork not on PyPI, README.md:140-141).
  Weights: ``hf download AlayaLab/Evoke --local-dir CKPT`` (README.md:166) - the command reads
  ``evoke/stage3_post_distillation/`` and ``evoke-base/`` of it (IB:81, 418; infer_post_distill.sh:135) - plus
  ``hf download pkqbajng/ViGeo --local-dir CKPT/ViGeo1.1`` (README.md:170), another repository.
"""

from __future__ import annotations

import json
import math

import numpy as np

from .base import AdapterError, AdapterInfo, NativeInputs, horizontal_fov_deg
from .repo import RepoAdapter, RepoSpec

W, H = 640, 384
FPS = 24.0
CHUNK = 36
DEPTH_MEDIAN_TARGET = 5.0  # IB:197, IS:329


def evoke_source_resolution(K: np.ndarray, h_org: int, w_org: int) -> tuple[int, int]:
    """What OP:454-496 (resolve_intrinsic_source_resolution) makes of a declared size; raises where Evoke raises."""
    cx, cy = float(K[0, 2]), float(K[1, 2])
    h_inf = int(round(cy * 2)) if cy > 1 else None
    w_inf = int(round(cx * 2)) if cx > 1 else None
    if h_inf is not None and w_inf is not None:
        a_inf, a_dec = w_inf / h_inf, h_org / w_org
        if (w_inf > h_inf) != (w_org > h_org) and abs(a_inf - a_dec) <= 0.05 * a_dec:
            raise AdapterError(f"evoke would reject K: principal point implies {h_inf}x{w_inf}, a rotated frame")
    off_h = h_inf is not None and abs(h_org - h_inf) / max(h_inf, 1) > 0.1
    off_w = w_inf is not None and abs(w_org - w_inf) / max(w_inf, 1) > 0.1
    if off_h and off_w:
        s_h, s_w = h_inf / h_org, w_inf / w_org
        if abs(s_h - s_w) <= 0.05 * max(s_h, s_w):
            return h_inf, w_inf
    return h_org, w_org


def evoke_crop_resize(K: np.ndarray, h_org: int, w_org: int, h_t: int = H, w_t: int = W) -> list[float]:
    """OP:499-536 (transform_intrinsic_for_crop_resize): [fx, fy, cx, cy] at the target size, pixel K."""
    fx, fy, cx, cy = float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2])
    s = max(h_t / h_org, w_t / w_org)
    h_r, w_r = round(h_org * s), round(w_org * s)
    return [fx * s, fy * s, cx * s - (w_r - w_t) / 2.0, cy * s - (h_r - h_t) / 2.0]


class Evoke(RepoAdapter):
    repo_spec = RepoSpec(
        clone="https://github.com/AlayaLab/Evoke",
        entry="scripts/inference/infer_post_distill.sh",
        hf_id="AlayaLab/Evoke",
        commit="74d268516d95c8fceadd2378f91a73f9f187042b", subdir="", requirements=("requirements.txt",),
        weights_patterns=("evoke/stage3_post_distillation/*", "evoke-base/*"), device_env="GPU_OFFSET",
    )
    #: none: LOCAL_GPUS shards cases, one process per GPU (infer_post_distill.sh:59, 99-101)
    multi_gpu = ""
    info = AdapterInfo(
        name="evoke", version="0.1", width=W, height=H, fps=FPS,
        fps_source="writer: --fps 24 (infer_single.py:150; infer_post_distill.sh:138); pose target fps hard-coded 24 "
                   "(infer_single.py:637)",
        chunk_frames=CHUNK, first_chunk_frames=CHUNK - 3,
        duration_unit="chunks (NUM_CHUNKS=c -> 36c-3 frames); one pose per output frame", control="poses",
        pose_convention="c2w OpenCV, absolute; translation in pose units, scene median depth = 5 units (i2v)",
        intrinsics_regime=4, aspect_policy="stretch", context_policies=(),
        hf_ids=("AlayaLab/Evoke", "pkqbajng/ViGeo"), repository="https://github.com/AlayaLab/Evoke",
        licence="Apache-2.0 (README.md:251-253); ViGeo/DA3 depth backends CC-BY-NC-4.0 (README.md:179-180)",
        integration="A",
        notes="shipped stage3_post_distillation model, i2v is zero-shot (trained on v2v, infer_post_distill.sh:112-116); "
              "history tiers [16,2,1] + point-cloud world state, no KV cache (RESTRICT=0)",
    )
    FPS = FPS

    def plan(self, case) -> NativeInputs:
        traj = case.trajectory
        n = traj.n_frames(FPS)
        chunks = math.ceil((n + 1 + 3) / CHUNK)  # smallest c with 36 c - 3 >= n + 1
        F = CHUNK * chunks - 3
        c2w = traj.poses(FPS, F)  # padding frames hold the final pose
        cam_c2w = c2w.astype(np.float32)
        if case.intrinsics is None or case.image_size is None:
            raise AdapterError(f"evoke needs the case's intrinsics and image size (regime 4); case {case.id} has none")
        fx, fy, cx, cy = (float(v) for v in case.intrinsics)
        w0, h0 = case.image_size
        sx, sy = W / w0, H / h0  # the image is stretched to 640x384 (IS:1129-1131); K follows it
        K = np.array([[fx * sx, 0, cx * sx], [0, fy * sy, cy * sy], [0, 0, 1]], np.float32)
        src = evoke_source_resolution(K, H, W)
        if src != (H, W):
            raise AdapterError(
                f"case {case.id}: evoke would read K as calibrated at {src[0]}x{src[1]} (its principal point), not "
                f"the declared {H}x{W} (operators.py:454-496), and crop-resize it; this K cannot be passed faithfully")
        k_model = evoke_crop_resize(K, H, W)  # identity: scale 1, no crop
        Ks = np.repeat(K[None], F, axis=0)
        row = {"name": case.id, "image_path": case.image or "IMAGE", "pose_path": "pose.npz", "prompt": case.prompt,
               "pose_fps": int(FPS), "pose_source_resolution": [H, W], "pose_type": "vipe"}
        caveats = [
            f"translation is written in metres as pose units; Evoke sets the scene's median depth to "
            f"{DEPTH_MEDIAN_TARGET:g} units (depth_median, infer_batch.py:187-197), so metres hold only if the "
            "scene's median depth is about 5 m",
            "the image is stretched to 640x384; K is stretched the same way and declared at 384x640 so Evoke's "
            "crop-resize K transform (operators.py:499-536) is the identity",
            "only frame 0's K is used (ev_validation.py:170-173)",
            "each chunk reads the 33 poses [36k, 36k+33) (pipeline_evoke.py:2542-2565): poses 36k+33..36k+35 are not read",
            "i2v is zero-shot for the shipped model (trained on v2v conditioning, infer_post_distill.sh:112-116)",
        ]
        if F != n + 1:
            caveats.append(f"{n + 1} frames rounded up to {F} (36c-3, {chunks} chunks): the last {F - n - 1} frames "
                           "hold the final pose")
        caveats.append("image-to-video chunk 0 rescales depth so its 90th-percentile parallax is 135 px "
                       "(GEO_CHUNK0_TARGET_DISP_PX, da3_cloud.py:1737-1853): the first chunk's translation scale is "
                       "the model's, not the trajectory's")
        self.gpus()  # gpus>1 is refused: the launcher spreads cases over GPUs, never one case
        cmd = (f"env MODE=i2v NUM_CHUNKS={chunks} MAX_CASES=1 JSONL=cases.jsonl SEED=SEED CAP_MAX_DEG=0 "
               f"CAP_MAX_TRANS=0 POSE_SMOOTH_WIN=0 POSE_EXTEND_MODE=clamp JOYSTICK_HUD=off "
               f"TRANSFORMER_PATH=CKPT/evoke/stage3_post_distillation BASE_CKPT=CKPT/evoke-base "
               f"VIGEO_WEIGHTS=CKPT/ViGeo1.1 OUT_ROOT=OUT "
               f"bash scripts/inference/infer_post_distill.sh  # cases.jsonl paths are relative to the Evoke checkout")
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id, width=W, height=H,
            fps=FPS, n_frames=F, segment_frames=traj.segment_frames(FPS, n),
            arrays={"cam_c2w": cam_c2w, "intrinsics": Ks},
            files={"pose.npz": {"cam_c2w": cam_c2w, "intrinsics": Ks}, "cases.jsonl": json.dumps(row) + "\n",
                   "command.txt": cmd + "\n"},
            intrinsics={"regime": 4, "case": case.intrinsics, "case_image_size": list(case.image_size),
                        "native": [float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2])],
                        "native_size": [W, H],
                        "transform": {"policy": "stretch", "scale_xy": [sx, sy], "declared_source_hw": [H, W],
                                      "evoke_crop_resize": k_model},
                        "case_hfov_deg": horizontal_fov_deg(fx, w0),
                        "native_hfov_deg": horizontal_fov_deg(float(K[0, 0]), W)},
            prompt=case.prompt, prompt_source=case.prompt_source, caveats=caveats,
            extra={"num_chunks": chunks, "pose_fps": int(FPS), "pose_source_resolution": [H, W],
                   "output_video": f"{case.id}/geo_pred.mp4",
                   "depth_median_target": DEPTH_MEDIAN_TARGET, "image": case.image},
        )
