"""WorldMark's thresholds in worldgate: only what WorldMark's code leaves to the backend, and the named options that
deviate from WorldMark's code (off by default). WorldMark's own constants are in flow_eval.FlowConfig,
consistency.MemoryConfig and master.MasterConfig, each with its file:line."""

from __future__ import annotations

PARAMS: dict[str, float] = {
    # the classical backend's own scales (its embedding is not DINOv2, its global error not VGGT-Omega's)
    "local_mutation_classical": 0.06,  # 1 - cos of the classical colour+texture embedding (WorldMark: 0.10 on DINOv2)
    "revisit_d_scale_classical": 0.2,  # revisit tau on that embedding (WorldMark: TAU_C 1.0 on DINOv2, cv:40)
    "hardcut_diff": 0.2,  # mean |frame difference| (fraction of full scale) that marks a hard cut (no TransNetV2)
    # global memory: WorldMark's tau (fm:90) on both backends (the classical geometry measures the same quantity)
    "global_tau": 0.05,
    # a co-visible key-frame pair that cannot be matched counts as this error (one median depth off): it is a
    # failure, not a dropped sample (WorldMark has no such pairs: VGGT-Omega reconstructs whatever it is given)
    "global_unmatched_e": 1.0,
    # WorldMark-protocol options: each is a deliberate deviation from WorldMark's code, off (0) by default
    "wm_time_base_real_fps": 0,  # 1: time constants on the record's fps (WorldMark: 16 fps whatever the video, fe:19)
    "wm_flow_full_scale": 0,  # 1: flow in full 640-wide pixels (WorldMark: SEA-RAFT's half-size values, fe:50-53)
}
