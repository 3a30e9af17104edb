"""WorldMark's thresholds: every one a name ``worldgate sweep --param`` can change."""

from __future__ import annotations

PARAMS: dict[str, float] = {
    # shared
    "smooth_s": 0.3,  # speed smoothing window
    # motion stability
    "stab_baseline_pct": 70.0,
    "stab_sustain_frac": 0.4,
    "stab_recover_frac": 0.5,
    "stab_hiccup_min_s": 0.3,
    "stab_hr_scale": 0.5,
    "stab_decay_window_s": 3.0,
    "stab_decay_ref": 0.7,
    # response latency
    "lat_vref_pct": 75.0,
    "lat_noresponse_frac": 0.1,
    "lat_thresh_frac": 0.5,
    # local memory
    "local_step_s": 0.5,
    "local_min_samples": 5,
    "local_mutation_classical": 0.06,  # 1 - cos of the classical colour+texture embedding
    "local_mutation_learned": 0.10,  # 1 - cos of pooled DINOv2 tokens (WorldMark)
    "hardcut_diff": 0.2,  # mean |frame difference| (fraction of full scale) that marks a hard cut
    "hardcut_exclude_s": 0.5,
    # revisit memory
    "revisit_dir_gate": 0.3,
    "revisit_sym_gate": 0.5,
    "revisit_coverage_gate": 0.3,
    "revisit_min_turn_deg": 15.0,
    "revisit_pairs": 10,
    "revisit_min_gap_s": 2.0,
    "revisit_tol_px": 30.0,
    "revisit_d_scale_classical": 0.2,
    "revisit_d_scale_learned": 1.0,
    # global memory: WorldMark's 0.05 is for VGGT's cross-frame error; the classical stand-in (median Sampson error
    # of ORB matches, focal-normalised) has a noise floor of ~0.5 px on a clean rigid world, so its scale is 0.1
    "global_e_scale_learned": 0.05,
    "global_e_scale_classical": 0.1,
}
