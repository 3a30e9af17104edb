"""A user case's own record files: its target masks (put through the model's aspect-ratio policy into the produced
video's frame) and its dynamic-memory item, as records.py writes them into ``targets.npz`` and ``dynamic.json``."""

from __future__ import annotations


import cv2
import numpy as np
from PIL import Image


def transform_mask(mask: np.ndarray, policy: str, size: tuple[int, int]) -> np.ndarray:
    """A mask in the conditioning image's pixels, put through the model's aspect-ratio policy (``crop``: centre
    crop to the native aspect, then resize; ``pad``: letterbox; ``stretch``/other: resize) to the video's size."""
    W, H = size
    h, w = mask.shape
    m = mask.astype(np.uint8)
    if policy == "crop":
        if w / h > W / H:
            cw = int(round(h * W / H))
            m = m[:, (w - cw) // 2:(w - cw) // 2 + cw]
        else:
            ch = int(round(w * H / W))
            m = m[(h - ch) // 2:(h - ch) // 2 + ch]
    elif policy == "pad":
        if w / h > W / H:
            ph = int(round(w * H / W)) - h
            m = np.pad(m, ((ph // 2, ph - ph // 2), (0, 0)))
        else:
            pw = int(round(h * W / H)) - w
            m = np.pad(m, ((0, 0), (pw // 2, pw - pw // 2)))
    return cv2.resize(m, (W, H), interpolation=cv2.INTER_NEAREST).astype(bool)


def case_targets(case, policy: str, size: tuple[int, int]) -> dict:
    """targets.npz of a user case: its masks (PNG, non-zero = target) in the produced video's frame."""
    masks, kinds, names = [], [], []
    for i, t in enumerate(case.targets):
        with Image.open(t["mask"]) as im:
            m = np.asarray(im.convert("L")) > 0
        masks.append(transform_mask(m, policy, size))
        kinds.append(t["kind"])
        names.append(t.get("name") or f"{t['kind']}-{i}")
    return {"masks": np.asarray(masks, bool), "kinds": np.asarray(kinds, dtype="U8"),
            "names": np.asarray(names, dtype="U32"), "frame": np.asarray(0)}


def case_dynamic(case, plan) -> dict:
    """dynamic.json of a user case: its item (gate + 8 frozen questions) and the phases in the produced video."""
    d = case.dynamic
    target = int(d.get("target", 0))
    item = {"target": target, "name": d.get("name", f"event-{target}"), "kind": d.get("kind", "event"),
            "gate": d["gate"], "questions": [dict(q, id=i + 1) for i, q in enumerate(d["questions"])]}
    phases = [{"name": p.name, "frames": list(p.frame_range(plan.fps, plan.n_frames))} for p in case.trajectory.phases()]
    return {"events": [item], "phases": phases, "fps": plan.fps}


