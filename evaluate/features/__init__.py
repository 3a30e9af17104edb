"""Features: one module per feature holding its backends (flow, poses and geometry, camera_poses, appearance, quality,
depth, memory_depth, targets, events; VGGT-Omega's global memory and Q-Align in their model modules), the framework
they run in (core: the extractor base, one decode per record, the cache; pool: the threads), the signals and box
helpers several features share, and the heavy model code beside them (models/: DA3, SEA-RAFT, VGGT-Omega, Q-Align,
ArcFace, the Hub model catalogue and loaders). The registry of features is ``metrics.FEATURES``."""

from .core import (
    INPUT_FILES,
    OPTIONAL_FILES,
    Choice,
    Extractor,
    FeatureCache,
    FeatureError,
    MissingFeature,
    RecordView,
    analysis_size,
    compute_features,
    decoder_reason,
    inputs_digest,
    open_record,
    scoring_view,
    verify_record,
)

__all__ = ["INPUT_FILES", "OPTIONAL_FILES", "Choice", "Extractor", "FeatureCache", "FeatureError", "MissingFeature",
           "RecordView", "analysis_size", "compute_features", "decoder_reason", "inputs_digest", "open_record",
           "scoring_view", "verify_record"]
