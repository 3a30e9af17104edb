"""The ``quality`` feature, every 4th frame.

- classical (``QualityExtractor``): Laplacian-variance sharpness, Immerkaer noise sigma, Hasler-Suesstrunk
  colourfulness;
- learned (``LearnedQuality``): CLIP ViT-L/14 image embeds + the LAION aesthetic MLP and, with pyiqa, MUSIQ-SPAQ.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from .core import Extractor
from .models.catalogue import CLIP_ID, PROCESSORS, HubModels, load_or_explain, shared_model
from .models.loaders import (
    AESTHETIC_HEAD_FILE,
    AESTHETIC_HEAD_ID,
    batch_for,
    load_head_file,
    processor_pixels,
    require_torch,
    resolve_device,
)
from .signals import to_gray


class QualityExtractor(Extractor):
    name = "quality"
    version = "1"
    backend = "classical"
    max_side = 512
    STRIDE = 4  # WorldMemBench scores quality on every 4th frame

    def start(self, rec):
        super().start(rec)
        self.rows = {"frame": [], "sharpness": [], "noise": [], "colourfulness": []}

    def needs_frame(self, i):
        return i % self.STRIDE == 0

    def update(self, i, frame):
        if i % self.STRIDE:
            return
        g = to_gray(frame).astype(np.float32)
        s = 256.0 / max(g.shape)  # sharpness at a fixed reference scale
        lap = cv2.Laplacian(cv2.resize(g, None, fx=s, fy=s, interpolation=cv2.INTER_AREA) if s < 1 else g, cv2.CV_32F)
        kernel = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float32)
        conv = cv2.filter2D(g, cv2.CV_32F, kernel)
        noise = math.sqrt(math.pi / 2) * float(np.abs(conv[1:-1, 1:-1]).mean()) / 6.0  # Immerkaer (1996)
        f = frame.astype(np.float32)
        rg = f[..., 0] - f[..., 1]
        yb = 0.5 * (f[..., 0] + f[..., 1]) - f[..., 2]
        colourful = float(math.hypot(rg.std(), yb.std()) + 0.3 * math.hypot(rg.mean(), yb.mean()))
        self.rows["frame"].append(i)
        self.rows["sharpness"].append(float(lap.var()))
        self.rows["noise"].append(noise)
        self.rows["colourfulness"].append(colourful)

    def finish(self):
        return {k: np.asarray(v, np.float64) for k, v in self.rows.items()}


class LearnedQuality(HubModels, Extractor):
    """Every 4th frame: CLIP ViT-L/14 image embeds (through its image processor: resize 224, centre-crop 224) +
    the LAION aesthetic predictor (1..10 -> [0, 1]) and, with pyiqa, MUSIQ-SPAQ imaging; frames batched."""

    name = "quality"
    version = "2"
    backend = "learned"
    max_side = 512
    STRIDE = 4

    def __init__(self, clip=None, head=None, hf_id: str = CLIP_ID, head_path: str | None = None, imaging=None,
                 device: str = "auto", processor=None, head_id: str = AESTHETIC_HEAD_ID, batch_size: int | None = None):
        self.clip, self.head, self.hf_id, self.head_path, self.imaging = clip, head, hf_id, head_path, imaging
        self.device = resolve_device(device)
        self.processor, self.head_id, self.given_batch = processor, head_id, batch_size
        self.batch_size = batch_for(self.name, self.device, batch_size, free_bytes=0)  # resolved again at start

    def _head(self):
        if self.head_path:
            return load_head_file(self.head_path)

        def fetch():
            from huggingface_hub import hf_hub_download

            return load_head_file(hf_hub_download(self.head_id, AESTHETIC_HEAD_FILE))

        return load_or_explain("aesthetic head", self.head_id, fetch)

    def _models(self):
        if self.clip is None:
            from transformers import CLIPVisionModelWithProjection

            self.clip = load_or_explain("aesthetic", self.hf_id, lambda: CLIPVisionModelWithProjection.from_pretrained(self.hf_id))
        if self.head is None:
            self.head = self._head()
        if self.imaging is None:
            try:
                import pyiqa

                self.imaging = pyiqa.create_metric("musiq-spaq", device=self.device)
            except ImportError:
                self.imaging = False
        return self.clip.eval().to(self.device), self.head.eval().to(self.device)

    def _pixels(self, frames):
        if self.processor is None:
            self.processor = shared_model("aesthetic", PROCESSORS[CLIP_ID], self.hf_id)
        return processor_pixels(self.processor, frames)

    def start(self, rec):
        super().start(rec)
        self.batch_size = batch_for(self.name, self.device, self.given_batch)
        self.rows = {"frame": [], "aesthetic": [], "imaging": []}
        self.todo = []

    def _run(self):
        if not self.todo:
            return
        torch = require_torch()
        clip, head = self._models()
        x = self._pixels(self.todo).to(self.device)
        with torch.inference_mode():
            e = torch.nn.functional.normalize(clip(pixel_values=x).image_embeds.float(), dim=-1)
            a = head(e)[:, 0].float().cpu().numpy()
        self.rows["aesthetic"].extend(float(np.clip((v - 1.0) / 9.0, 0.0, 1.0)) for v in a)  # LAION scale 1..10
        for frame in self.todo:
            if self.imaging:
                t = torch.from_numpy(frame.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
                with torch.inference_mode():
                    self.rows["imaging"].append(float(self.imaging(t)) / 100.0)  # MUSIQ-SPAQ is on 0..100
            else:
                self.rows["imaging"].append(math.nan)
        self.todo = []

    def update(self, i, frame):
        if i % self.STRIDE:
            return
        self.rows["frame"].append(i)
        self.todo.append(frame)
        if len(self.todo) >= self.batch_size:
            self._run()

    def finish(self):
        self._run()
        return {k: np.asarray(v, np.float64) for k, v in self.rows.items()}
