"""worldgate: a model-adapter gateway, rollout generator and evaluator for interactive video world models."""

__version__ = "0.1.0"
