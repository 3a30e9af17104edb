"""WorldMemBench targets located as the paper locates them (Object Memory paragraph: "specified by a mask in the
conditioning frame and located at each revisit using semantic object detection and video segmentation").

``TrackedTargets`` is the learned ``targets`` feature with the classical extractor's output arrays
(``evaluate/worldmembench/static.py: TargetExtractor.finish``), so the static metrics read it unchanged:

- **video segmentation**: SAM 2.1 video tracking (transformers ``Sam2VideoModel`` + ``Sam2VideoInferenceSession``,
  ``facebook/sam2.1-hiera-large``) prompted with the record's target masks at frame 0 (``targets.npz``), streamed
  frame by frame through the whole video (one decode), its frames put through ``Sam2VideoProcessor`` (resize to
  1024 x 1024, ImageNet normalisation; by hand with the same recipe where the processor cannot load, e.g. a torch
  build without torchvision). The per-frame masks are the low-resolution logits upsampled to the frame and
  thresholded at 0 (the processor's ``post_process_masks``); the tracker's presence is ``sigmoid(object_score_logits)``.
- **semantic detection**: GroundingDINO (``GroundingDinoForObjectDetection`` + its processor,
  ``IDEA-Research/grounding-dino-base``) on every departure and revisit frame, queried with the target's text
  (:func:`target_query`: "a person." for a human, the target's name for an object or event). Its confirmation of a
  tracked mask is the best score of a detection whose box overlaps the mask's box with IoU >= ``box_iou``.
- **observation score** of target u at frame t: ``min(presence, confirmation)`` (presence alone with
  ``detector=False``), on [0, 1], compared with ``memory_min_match`` exactly as the NCC score is: at each revisit R_k
  the frame with the best score is the observation (``frame``, ``score``); ``departure_score`` is the lowest score over
  D_k (the tracker's departure evidence).
- **appearance** (``cos``): DINOv2-base patch tokens pooled in the tracked mask (``LearnedTargets.embed``), the
  reference the mean over V's frames of the embeddings in the tracked masks, vs the revisit's observation.
- **geometry** (``iou``): IoU of the canonical silhouettes (crop - resize - centre, ``canonical``) of SAM2's mask at
  frame 0 (the prompt's own output) and at the observation.
- **identity** (extra arrays ``identity`` (U, K) and ``identity_model``, only with an ArcFace model: see
  ``evaluate/models/identity.py``): per human target, clip(cos(mean ArcFace embedding of the face crops over V, the
  observation's), 0, 1); NaN for other kinds and revisits without an observation.
"""

from __future__ import annotations

import re

import cv2
import numpy as np

from .boxes import bbox, box_iou, canonical, iou
from .models.catalogue import DINOV2_ID, GDINO_ID, SAM2_ID, load_or_explain
from .models.identity import FaceIdentity, arcface_present, identity_scores
from .models.loaders import IMAGENET_MEAN, IMAGENET_STD, require_torch, to_tensor
from .targets import LearnedTargets

#: the models the feature loads: (what, source, id, licence), as ``catalogue.MODELS_BY_FEATURE`` lists them
MODELS = [("target appearance (DINOv2-base in the tracked mask)", "hub", DINOV2_ID, "Apache-2.0"),
          ("target tracking (SAM 2.1 video, mask-prompted at frame 0)", "hub", SAM2_ID, "Apache-2.0"),
          ("target detection at departures and revisits (GroundingDINO)", "hub", GDINO_ID, "Apache-2.0")]
#: the files each Hub model needs besides config.json (for ``catalogue.HUB_FILES``)
HUB_FILES = {SAM2_ID: ("config.json", "preprocessor_config.json"),
             GDINO_ID: ("config.json", "preprocessor_config.json", "tokenizer_config.json")}
#: how many past frames' tracker outputs and frames a session keeps (SAM2 reads 7 memories and 16 object pointers)
KEEP_FRAMES = 32


def target_query(kind: str, name: str = "") -> str:
    """GroundingDINO's text for a target: lower case, ending in "." (its caption convention). A human is "a person.";
    an object or event is its name without counters and separators ("red-mug-0" -> "red mug."), else "an object."."""
    if str(kind) == "human":
        return "a person."
    words = [w for w in re.split(r"[^a-z]+", str(name).lower()) if w and w not in (str(kind),)]
    return (" ".join(words) if words else "an object") + "."



class TrackedTargets(LearnedTargets):
    """The learned ``targets`` feature: SAM2 video tracking from the record's masks + GroundingDINO confirmation (see
    the module docstring). Models are given (tests: tiny configs) or loaded by Hub id / local path."""

    name = "targets"
    version = "3"
    backend = "learned"
    max_side = 256
    SEGMENTATION = "sam2"  # the same label as LearnedTargets: SAM2 silhouettes (here from the video tracker)

    def __init__(self, model=None, hf_id: str = DINOV2_ID, size: int = 224, device: str = "auto", tracker=None,
                 tracker_processor=None, sam_id: str = SAM2_ID, detector=None, detector_processor=None,
                 detector_id: str = GDINO_ID, box_iou: float = 0.5, det_batch: int = 8, identity=None,
                 arcface: str | None = None):
        super().__init__(model=model, hf_id=hf_id, size=size, device=device, sam_id=sam_id)
        self.tracker, self.tracker_processor = tracker, tracker_processor
        self.detector, self.detector_processor, self.detector_id = detector, detector_processor, detector_id
        self.box_iou, self.det_batch = float(box_iou), max(1, int(det_batch))
        # identity: a FaceIdentity, False (off), or None (on when ArcFace weights are on this machine)
        if identity is None:
            identity = FaceIdentity(path=arcface, device=self.device) if arcface_present(arcface) else False
        self.identity = identity

    # ------------------------------------------------------------------------------------------ models
    def _tracker(self):
        if self.tracker is None:
            from transformers import Sam2VideoModel

            self.tracker = load_or_explain("target tracking", self.sam_id, lambda: Sam2VideoModel.from_pretrained(self.sam_id))
        if self.tracker_processor is None:
            try:
                from transformers import Sam2VideoProcessor

                self.tracker_processor = Sam2VideoProcessor.from_pretrained(self.sam_id)
            except (ImportError, OSError, ValueError):  # no torchvision, or no processor files: the recipe by hand
                self.tracker_processor = False
        return self.tracker.eval().to(self.device)

    def _detector(self):
        if self.detector is None:
            from transformers import AutoProcessor, GroundingDinoForObjectDetection

            self.detector = load_or_explain("target detection", self.detector_id,
                                  lambda: GroundingDinoForObjectDetection.from_pretrained(self.detector_id))
            self.detector_processor = load_or_explain("target detection", self.detector_id,
                                            lambda: AutoProcessor.from_pretrained(self.detector_id))
        return self.detector.eval().to(self.device) if self.detector else None

    def _size(self) -> int:
        p = self.tracker_processor
        return int(p.target_size) if p else int(self.tracker.config.image_size)

    def _pixels(self, frame: np.ndarray):
        """SAM2's input for one frame: its processor's, else the same recipe by hand (resize to the square input,
        rescale 1/255, ImageNet normalisation)."""
        if not frame.flags.writeable:  # decoded frames may be read-only views; torch.from_numpy warns on those
            frame = frame.copy()
        if self.tracker_processor:
            return self.tracker_processor(images=frame, device=self.device, return_tensors="pt").pixel_values[0]
        S = self._size()
        return to_tensor(frame, (S, S), IMAGENET_MEAN, IMAGENET_STD, self.device)[0]

    # ------------------------------------------------------------------------------------------ the pass
    def start(self, rec):
        super().start(rec)
        self.session, self.pending = None, []
        self.face_ref: list = []
        self.sil0: list = []

    def _setup(self, frame):
        torch = require_torch()
        H, W = frame.shape[:2]
        self.masks = [cv2.resize(m.astype(np.uint8), (W, H), interpolation=cv2.INTER_NEAREST).astype(bool)
                      for m in self.targets["masks"]]
        names = self.targets.get("names")
        self.queries = [target_query(k, names[u] if names is not None and u < len(names) else "")
                        for u, k in enumerate(self.targets["kinds"])]
        self.live = [u for u, m in enumerate(self.masks) if m.any()]  # the targets the tracker follows
        self.boxes = [bbox(m) if m.any() else None for m in self.masks]
        self.v_emb = [[] for _ in self.masks]
        self.face_ref = [[] for _ in self.masks]
        self.humans = [str(k) == "human" for k in self.targets["kinds"]]
        model = self._tracker()
        if self.tracker_processor:
            self.session = self.tracker_processor.init_video_session(inference_device=self.device,
                                                                     dtype=torch.float32)
        else:
            from transformers import Sam2VideoInferenceSession

            self.session = Sam2VideoInferenceSession(inference_device=self.device, video_storage_device=self.device,
                                                     inference_state_device=self.device, dtype=torch.float32)
        self._model_ = model
        self.ref = True

    def _prompt(self, pixels):
        """Add the record's masks as the prompts of frame 0 (object id u + 1 for target u)."""
        torch = require_torch()
        ids = [u + 1 for u in self.live]
        masks = [self.masks[u] for u in self.live]
        if self.tracker_processor:
            self.tracker_processor.add_inputs_to_inference_session(self.session, frame_idx=0, obj_ids=ids,
                                                                   input_masks=masks)
            return
        S = self._size()  # the processor's process_new_mask_for_video_frame, by hand
        for oid, m in zip(ids, masks):
            idx = self.session.obj_id_to_idx(oid)
            t = torch.from_numpy(m.astype(np.float32))[None, None].to(self.device)
            t = (torch.nn.functional.interpolate(t, size=(S, S), mode="bilinear", align_corners=False,
                                                 antialias=True) >= 0.5).float()
            self.session.add_mask_inputs(idx, 0, t)
        self.session.obj_with_new_inputs = ids

    def track(self, i: int, frame: np.ndarray):
        """SAM2's masks (U, H, W) bool and presence (U,) of every target at frame ``i`` (frames in order from 0)."""
        torch = require_torch()
        H, W = frame.shape[:2]
        U = len(self.masks)
        masks, pres = np.zeros((U, H, W), bool), np.zeros(U)
        if not self.live:
            return masks, pres
        px = self._pixels(frame)
        if i == 0 or self.session.get_obj_num() == 0:
            self._prompt(px)
        with torch.inference_mode():
            out = self._model_(inference_session=self.session, frame=px, frame_idx=i)
            low = out.pred_masks.float()
            hi = torch.nn.functional.interpolate(low, size=(H, W), mode="bilinear", align_corners=False)
            m = (hi[:, 0] > 0).cpu().numpy()
            p = torch.sigmoid(out.object_score_logits.float().reshape(-1)).cpu().numpy()
        for j, oid in enumerate(out.object_ids):
            masks[oid - 1], pres[oid - 1] = m[j], p[j]
        self._prune(i)
        return masks, pres

    def _prune(self, i: int):
        """Drop the frames and non-conditioning outputs SAM2 no longer reads (a long video would otherwise keep every
        1024 x 1024 frame in memory)."""
        s = self.session
        for f in [f for f in (s.processed_frames or {}) if f < i]:
            del s.processed_frames[f]
        for d in s.output_dict_per_obj.values():
            nc = d["non_cond_frame_outputs"]
            for f in [f for f in nc if f < i - KEEP_FRAMES]:
                del nc[f]

    def detect(self, frames: list, masks: list) -> np.ndarray:
        """(N, U) GroundingDINO confirmation of each tracked mask in each frame: the best score of a detection of the
        target's query whose box has IoU >= ``box_iou`` with the mask's box (0: none, or an empty mask)."""
        torch = require_torch()
        from PIL import Image

        U = len(self.masks)
        conf = np.zeros((len(frames), U))
        det = self._detector()
        if det is None:
            return conf
        images = [Image.fromarray(np.ascontiguousarray(f)) for f in frames]
        sizes = [f.shape[:2] for f in frames]
        for q in sorted({self.queries[u] for u in self.live}):
            us = [u for u in self.live if self.queries[u] == q]
            inp = self.detector_processor(images=images, text=[q] * len(images), return_tensors="pt").to(self.device)
            with torch.inference_mode():
                out = det(**inp)
            res = self.detector_processor.post_process_grounded_object_detection(
                out, inp["input_ids"], threshold=0.0, text_threshold=0.0, target_sizes=sizes)
            for n, r in enumerate(res):
                boxes = r["boxes"].float().cpu().numpy()
                scores = r["scores"].float().cpu().numpy()
                for u in us:
                    if not masks[n][u].any():
                        continue
                    mb = bbox(masks[n][u])
                    ok = [float(s) for b, s in zip(boxes, scores) if box_iou(b, mb) >= self.box_iou]
                    conf[n, u] = max(ok, default=0.0)
        return conf

    def update(self, i, frame):
        if frame is None or self.targets is None or len(self.targets["masks"]) == 0:
            return
        if self.ref is None:
            self._setup(frame)
        masks, pres = self.track(i, frame)
        if i == 0:
            self.sil0 = [canonical(masks[u]) if masks[u].any() else None for u in range(len(self.masks))]
        if self.v_range[0] <= i < max(self.v_range[1], 1):
            for u, e in enumerate(self.embed(frame, list(masks))):
                if e is not None:
                    self.v_emb[u].append(e)
            if self.identity:
                hm = [masks[u] if self.humans[u] else np.zeros_like(masks[u]) for u in range(len(self.masks))]
                for u, e in enumerate(self.identity.embed(frame, hm)):
                    if e is not None:
                        self.face_ref[u].append(e)
        k, j = self._phase(i), self._departure(i)
        if k is None and j is None:
            return
        self.pending.append((i, frame, masks, pres, k, j))
        if len(self.pending) >= self.det_batch:
            self._flush()

    def _flush(self):
        if not self.pending:
            return
        items, self.pending = self.pending, []
        conf = self.detect([it[1] for it in items], [it[2] for it in items]) if self.detector is not False else None
        for n, (i, frame, masks, pres, k, j) in enumerate(items):
            for u in self.live:
                sc = float(pres[u]) if conf is None else float(min(pres[u], conf[n, u]))
                if not masks[u].any():
                    sc = 0.0
                if j is not None:
                    self.dep[(u, j)] = min(sc, self.dep.get((u, j), 2.0))
                if k is not None and sc > self.best.get((u, k), (-1.0,))[0]:
                    self.best[(u, k)] = (sc, i, frame.copy(), masks[u].copy())

    def finish(self):
        self._flush()
        if self.targets is None or self.ref is None:
            return super().finish()
        self.ident = np.full((len(self.masks), len(self.phases)), np.nan)
        out = self.scored_revisits()
        if self.identity:
            out["identity"] = self.ident
            out["identity_model"] = np.asarray("arcface", "U8")
        self.session = None
        return out

    def revisit_mask(self, u: int, found) -> np.ndarray:
        return found[3]  # the tracked mask at that frame

    def revisit_iou(self, u: int, img: np.ndarray, mask: np.ndarray) -> float:
        return iou(canonical(mask), self.sil0[u]) if self.sil0[u] is not None else 0.0

    def revisit_extra(self, u: int, k: int, img: np.ndarray, mask: np.ndarray) -> None:
        if self.identity and self.humans[u]:
            self.ident[u, k] = identity_scores(self.face_ref[u], self.identity.embed(img, [mask])[0])

    def config(self):
        c = {**super().config(), "detection": self.detector_id if self.detector is not False else "none (tracker only)",
             "tracking": self.sam_id, "box_iou": self.box_iou, "segmentation": self.sam_id}
        if self.identity:
            c["identity"] = self.identity.config()
        return c


__all__ = ["GDINO_ID", "HUB_FILES", "MODELS", "TrackedTargets", "target_query"]
