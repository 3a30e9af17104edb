"""WorldMemBench target masks from a text query (issue 19): GroundingDINO finds the query's best box in the image,
SAM2 cuts the mask out of that box. Both are transformers models loaded by Hugging Face id (or a local folder) from
the local cache only, with the evaluator's defaults (``evaluate/features/models/catalogue.py``: ``GDINO_ID``, ``SAM2_ID``).

``--target-queries FILE.json``: ``{"<image name or stem>": [{"name", "kind": human|object|event, "query"[, "event"]}]}``
(``query`` is GroundingDINO's text, e.g. "a red cup"; ``event`` only for an event target: what its checklist is
about). No box scoring at least the threshold -> a per-image error, never a guessed mask."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from worldgate.evaluate.features.models.catalogue import GDINO_ID, SAM2_ID

from . import given as G
from .models import MissingModelError, StepError

#: GroundingDINO's usual box threshold (its demo's ``box_threshold``); ``--detect-threshold`` overrides it
DETECT_THRESHOLD = 0.35
TEXT_THRESHOLD = 0.25  # GroundingDINO's usual text threshold (it only decides the label words, not the boxes)


def default_ids() -> tuple[str, str]:
    """(detector, segmenter): the evaluator's GroundingDINO and SAM 2.1 ids."""
    return GDINO_ID, SAM2_ID


def query_text(query: str) -> str:
    """GroundingDINO's caption convention: lower case, ending in "." ("A red cup" -> "a red cup.")."""
    q = " ".join(str(query).lower().split()).rstrip(".")
    return q + "."


def queries_for(path: str | Path, image: Path) -> list[dict] | None:
    """An image's rows of ``--target-queries``, checked (names as ``--targets`` names: one safe pattern, unique)."""
    rows = G.entry(G.load_json(path, "--target-queries"), image)
    if rows is None:
        return None
    if not isinstance(rows, list) or not rows:
        raise G.GivenError(f"--target-queries {path}, {image.name}: expected a non-empty list of "
                           "{name, kind, query}")
    out = []
    for row, t in enumerate(rows, 1):
        where = f"--target-queries {path}, {image.name}, target {row}"
        if not isinstance(t, dict) or not {"name", "kind", "query"} <= set(t):
            raise G.GivenError(f"{where}: each target needs 'name', 'kind' ({'|'.join(G.TARGET_KINDS)}) and 'query'")
        G.check_target(t, [o["name"] for o in out], where)
        if not isinstance(t["query"], str) or not t["query"].strip():
            raise G.GivenError(f"{where}: 'query' must be a non-empty text (what GroundingDINO looks for)")
        out.append({"name": t["name"], "kind": t["kind"], "query": t["query"].strip(),
                    **({"event": t["event"]} if t.get("event") else {})})
    return out


def _torch():
    import torch  # heavy, optional

    return torch


class TextTargets:
    """GroundingDINO (``GroundingDinoForObjectDetection`` + its processor) and SAM2 (``Sam2Model`` + ``Sam2Processor``,
    box-prompted, the best of its three masks by predicted IoU), loaded by id with ``local_files_only=True``."""

    def __init__(self, detector_id: str | None = None, segmenter_id: str | None = None, device: str = "cpu",
                 threshold: float = DETECT_THRESHOLD):
        d, s = default_ids()
        self.detector_id, self.segmenter_id = detector_id or d, segmenter_id or s
        self.device, self.threshold = device, float(threshold)
        self._det = self._seg = None

    def _load(self, what: str, model_id: str, fn):
        try:
            return fn()
        except (OSError, ValueError, ImportError) as e:
            raise MissingModelError(
                f"{what} {model_id!r} is not in the Hugging Face cache: fetch it with `hf download {model_id}` on a "
                f"connected machine, or give the masks as a file (--targets) ({type(e).__name__}: "
                f"{str(e).splitlines()[0][:160] if str(e) else ''})") from None

    def detector(self):
        if self._det is None:
            from transformers import AutoProcessor, GroundingDinoForObjectDetection

            mid = self.detector_id
            model = self._load("detector", mid, lambda: GroundingDinoForObjectDetection.from_pretrained(
                mid, local_files_only=True))
            proc = self._load("detector", mid, lambda: AutoProcessor.from_pretrained(mid, local_files_only=True))
            self._det = (model.eval().to(self.device), proc)
        return self._det

    def segmenter(self):
        if self._seg is None:
            from transformers import Sam2Model, Sam2Processor

            mid = self.segmenter_id
            model = self._load("segmenter", mid, lambda: Sam2Model.from_pretrained(mid, local_files_only=True))
            proc = self._load("segmenter", mid, lambda: Sam2Processor.from_pretrained(mid, local_files_only=True))
            self._seg = (model.eval().to(self.device), proc)
        return self._seg

    def detect(self, image: Image.Image, query: str) -> tuple[list[float], float]:
        """The best box ``[x0, y0, x1, y1]`` (image pixels) of ``query`` and its score; a StepError when no box
        scores at least the threshold."""
        torch = _torch()
        model, proc = self.detector()
        text = query_text(query)
        inp = proc(images=image.convert("RGB"), text=text, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = model(**inp)
        res = proc.post_process_grounded_object_detection(
            out, inp["input_ids"], threshold=self.threshold, text_threshold=TEXT_THRESHOLD,
            target_sizes=[image.size[::-1]])[0]
        scores = res["scores"].float().cpu().numpy()
        if not len(scores):
            raise StepError(f"no detection of {text!r} scores >= {self.threshold} ({self.detector_id}): give a "
                            "query that names what is in the image, lower --detect-threshold, or give the mask "
                            "with --targets")
        best = int(np.argmax(scores))
        box = [float(v) for v in res["boxes"][best].float().cpu().numpy()]
        return box, float(scores[best])

    def segment(self, image: Image.Image, box: list[float]) -> np.ndarray:
        """SAM2's mask (H, W) bool of the thing in ``box``: of its three masks, the best by predicted IoU."""
        torch = _torch()
        model, proc = self.segmenter()
        inp = proc(images=image.convert("RGB"), input_boxes=[[box]], return_tensors="pt").to(self.device)
        with torch.inference_mode():
            out = model(**inp, multimask_output=True)
        masks = proc.post_process_masks(out.pred_masks.cpu(), inp["original_sizes"].cpu())[0]  # (1, 3, H, W)
        best = int(out.iou_scores[0, 0].argmax())
        return np.asarray(masks[0, best].numpy(), bool)

    def masks(self, image: Image.Image, rows: list[dict]) -> list[dict]:
        """Per query row: its box, score and mask (H, W) bool; a StepError for no detection or an empty mask."""
        out = []
        for t in rows:
            box, score = self.detect(image, t["query"])
            m = self.segment(image, box)
            if m.shape != image.size[::-1]:
                raise StepError(f"target {t['name']!r}: SAM2 returned a {m.shape[1]}x{m.shape[0]} mask for a "
                                f"{image.size[0]}x{image.size[1]} image")
            if not m.any():
                raise StepError(f"target {t['name']!r}: SAM2 ({self.segmenter_id}) returned an empty mask for the "
                                f"box {[round(v, 1) for v in box]} of {query_text(t['query'])!r}: give the mask "
                                "with --targets")
            out.append({"box": box, "score": score, "mask": m})
        return out


def save_mask(mask: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    Image.fromarray(mask.astype(np.uint8) * 255).save(tmp)
    tmp.replace(path)
