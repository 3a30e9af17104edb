"""WorldMemBench's thresholds: every one a name ``worldgate sweep --param`` can change."""

from __future__ import annotations

PARAMS: dict[str, float] = {
    # static memory: normalised cross-correlation below which a revisit has no valid observation
    "memory_min_match": 0.35,
    "memory_depth_max_gap": 4,  # frames between a revisit frame and the nearest frame with depth (learned)
    "spherical_bins": 24,  # elevation bins of the spherical grid (azimuth has twice as many)
    "spherical_log_tol": 0.2231,  # log(1.25): a common bin whose ranges differ by 25 % (after delta) scores 0
    # dynamic memory, measured probe: region change (mean absolute difference, 0-1, after registration) ...
    "dyn_noise": 0.04,  # ... below which nothing visibly changed
    "dyn_start": 0.08,  # share of the event's full visible change reached during the initial hold: it visibly started
    "dyn_progress": 0.15,  # share of the full change that counts as progress (or a step back)
    "dyn_jump": 0.5,  # a change between consecutive views larger than this share is a jump, not gradual
    "dyn_other": 0.04,  # registered residual of the rest of the view above its initial-hold level: something else changed
    "dyn_registered": 0.08,  # residual of the rest of the view under which a frame shows the start view
}
