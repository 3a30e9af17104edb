"""MultiWorldBench's protocol constants: capabilities, their tasks, the three tracks, and the thresholds."""

from __future__ import annotations

from ..score import Score, na

PARAMS: dict[str, float] = {
    "mwb_chroma_tol": 0.06,  # a pixel belongs to a material / the cross / an avatar within this chromaticity distance
    "mwb_dark": 0.12,  # pixels darker than this (mean channel, 0..1) are never classified
    "mwb_min_px": 6,  # fewer expected pixels: not observable in that view
    "mwb_min_struct_px": 20,
    "mwb_present_frac": 0.5,  # share of a cell's pixels in block materials that makes the block present
    "mwb_cross_frac": 0.2,  # share of the marked footprint showing the cross after a destroy
    "mwb_iou": 0.5,  # structure silhouette IoU with the reference
    "mwb_material_agree": 0.6,  # share of the structure's pixels in the expected material
    "mwb_id_iou": 0.6,  # landmark silhouette IoU between the first and the returning view
    "mwb_avatar_frac": 0.3,  # share of the expected avatar pixels that must show the avatar's colour
    "mwb_motion_tol": 0.4,  # avatar displacement error / expected displacement
    "mwb_size_tol": 1.3,  # avatar apparent-size ratio tolerance (motion along the line of sight)
    "mwb_rot_floor_deg": 10.0,  # path-length floors of the pose errors
    "mwb_trans_floor_m": 0.5,
    "mwb_depth_scale_m": 6.0,  # metres per unit of the classical chain for a view without a translation trial
    "mwb_response_floor_deg": 5.0,  # response floors of the motion gate (a reference response at or below
    "mwb_response_floor_m": 0.25,  # max(noise, floor) scores 0; the paper gives no value: half the denominator floors)
    "mwb_cnate_min": 0.6,  # repeated-reference consistency (cnATE) that makes isolation eligible (§4.1)
    "mwb_min_valid_steps": 3,  # tracked pose steps an idle or action interval needs (§4.1: three valid offsets)
    "mwb_actor_dir": 0.5,  # WorldMark direction of the actor's own flow that shows it moved as commanded
    "mwb_actor_min_flow": 0.5,  # ... with at least this mean flow (pixels of a 640-wide frame)
}

CAPABILITIES = ["control_isolation", "coordination_fairness", "cross_view_motion", "state_synchronization",
                "state_persistence", "structural_consistency", "spatial_reasoning", "race_condition_consistency",
                "style_consistency", "id_consistency"]
TASK_OF = {"control_isolation": "matched_navigation", "coordination_fairness": "matched_navigation",
           "cross_view_motion": "cross_view_motion", "state_synchronization": "shared_state",
           "state_persistence": "persistence", "structural_consistency": "building_reveal",
           "spatial_reasoning": "building_reveal", "race_condition_consistency": "concurrent_placement",
           "style_consistency": "delayed_revisit", "id_consistency": "delayed_revisit"}
#: the paper's three tracks (§1, §5.1: three navigation, five shared-world, two revisit metrics)
TRACKS = {"navigation": ["control_isolation", "coordination_fairness", "cross_view_motion"],
          "shared world": ["state_synchronization", "state_persistence", "structural_consistency", "spatial_reasoning",
                           "race_condition_consistency"],
          "revisit": ["style_consistency", "id_consistency"]}
POSE_PATH = "poses (classical)"
KIND = "rollout-2p"
VIEWS = ("A", "B")
#: the binary visual judgments a VLM can answer instead of pixels (style and spatial reasoning are measurements)
JUDGED = {"cross_view_motion", "state_synchronization", "state_persistence", "structural_consistency",
          "race_condition_consistency", "id_consistency"}
UNAVAILABLE_LEARNED_POSES = "no packaged learned pose estimator (DA3 / ViPE); use --backend classical"


def P_(P: dict, name: str) -> float:
    return float(P.get(name, PARAMS[name]))


def path_score(value, path, **detail) -> Score:
    return Score(None if value is None else float(value), None, dict(detail, path=path))


def path_na(reason, path) -> Score:
    s = na(reason)
    s.detail = {"path": path}
    return s
