"""The model steps of build-suite, each loaded by Hugging Face id from the local cache (``local_files_only``): a
transformers chat VLM for captions and action selection, a diffusers image-editing pipeline for third-person
composites, Depth Anything 3's camera head for intrinsics. Tests build each from tiny random configs."""

from __future__ import annotations

import numpy as np
from PIL import Image

from worldgate.evaluate.features.models import da3  # the evaluator's import of DA3 (export-only modules stubbed)

from .parse import AnswerError, format_action_ids, parse_action_ids
from .prompts import load_prompt

DEFAULT_VLM = "Qwen/Qwen2.5-VL-7B-Instruct"
DEFAULT_EDITOR = "Qwen/Qwen-Image-Edit"
DEFAULT_INTRINSICS = "depth-anything/DA3-LARGE-1.1"
CAPTION_TOKENS = 256
ACTION_TOKENS = 32


class StepError(RuntimeError):
    """A model step failed for one image (an answer that does not parse after the retry); the build goes on."""


class MissingModelError(FileNotFoundError):
    """A model step's weights (or package) are not on this machine: the message names the fetch command and the
    file that can replace the step (an input error: the CLI exits 2)."""


def _missing(what: str, model_id: str, e: Exception) -> MissingModelError:
    return MissingModelError(f"{what} {model_id!r} is not in the Hugging Face cache: fetch it with `hf download {model_id}` "
                        f"on a connected machine, or give this step as a file ({type(e).__name__}: {e})")


class ChatVLM:
    """A transformers image-text-to-text chat model (Qwen2.5-VL, Qwen3-VL, ...). ``ask(image, prompt)`` decodes
    greedily; ``ask(..., sample=True, seed=s)`` samples (the one retry after an unparseable answer)."""

    def __init__(self, model_id: str | None = None, device: str = "cpu", model=None, processor=None,
                 max_new_tokens: int | None = None):
        self.model_id, self.device = model_id or getattr(getattr(model, "config", None), "_name_or_path", "?"), device
        self.max_new_tokens = max_new_tokens  # a cap on every step's budget (tests; quick looks)
        self.model, self.processor = model, processor
        if self.model is None:
            try:
                from transformers import AutoModelForImageTextToText, AutoProcessor  # heavy, optional

                self.processor = AutoProcessor.from_pretrained(model_id, local_files_only=True)
                self.model = AutoModelForImageTextToText.from_pretrained(model_id, local_files_only=True).to(device)
            except (OSError, ValueError) as e:
                raise _missing("VLM", model_id, e) from None
        self.model.eval()

    def ask(self, image: Image.Image, prompt: str, max_new_tokens: int, sample: bool = False, seed: int = 0) -> str:
        import torch  # heavy, optional

        content = [{"type": "image"}, {"type": "text", "text": prompt}]
        text = self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
        inputs = self.processor(text=[text], images=[image.convert("RGB")], return_tensors="pt")
        inputs = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in inputs.items()}
        torch.manual_seed(seed)
        cap = max_new_tokens if self.max_new_tokens is None else min(max_new_tokens, self.max_new_tokens)
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=cap, do_sample=sample)
        new = out[0, inputs["input_ids"].shape[1]:]
        return self.processor.batch_decode(new[None], skip_special_tokens=True)[0]


def caption(vlm, image: Image.Image, prompt_name: str = "caption_scene", seed: int = 0) -> dict:
    """One caption with a WorldMark prompt, verbatim; whitespace collapsed to one line (a prompt file holds one row per
    image). An empty answer is retried once (sampled), then a StepError."""
    prompt = load_prompt(prompt_name)
    tries = []
    for attempt in range(2):
        raw = vlm.ask(image, prompt, CAPTION_TOKENS, sample=attempt > 0, seed=seed + attempt)
        tries.append(raw)
        text = " ".join(str(raw).split())
        if text:
            return {"value": text, "raw": tries}
    raise StepError(f"{prompt_name}: the VLM answered nothing twice ({tries!r})")


def ask_strictly(vlm, image: Image.Image, prompt: str, max_tokens: int, parse, refused, seed: int = 0):
    """Ask, parse strictly; an answer ``parse`` refuses (raising ``refused``) is asked once more, sampled (greedy
    decoding would repeat itself). Returns ``{"value", "raw": answers, "retried"}``, or ``(None, errors)`` when
    both answers were refused (the caller's StepError quotes them): never a repaired or guessed answer."""
    tries, errors = [], []
    for attempt in range(2):
        raw = vlm.ask(image, prompt, max_tokens, sample=attempt > 0, seed=seed + attempt)
        tries.append(raw)
        try:
            value = parse(str(raw))
        except refused as e:
            errors.append(str(e))
            continue
        return {"value": value, "raw": tries, "retried": attempt > 0}
    return None, errors


def select_actions(vlm, image: Image.Image, seed: int = 0) -> dict:
    """WorldMark's action-selection prompt, verbatim; the answer must be five distinct ids 1-15 ("1, 2, 3, 4, 5").
    Anything else is retried once (sampled: greedy decoding would repeat itself), then a StepError with both answers."""
    got = ask_strictly(vlm, image, load_prompt("select_actions"), ACTION_TOKENS, parse_action_ids, AnswerError, seed)
    if isinstance(got, dict):
        return got
    raise StepError(f"action selection: no valid answer after one retry: {'; '.join(got[1])} (expected five distinct "
                    f"ids from 1-15 as '{format_action_ids([1, 2, 3, 4, 5])}')")


def model_label(x) -> str:
    """What the build log records for a model step given as an object: its ``model_id``, else ``custom``."""
    return getattr(x, "model_id", None) or "custom"


def _edit_size(size: tuple[int, int], multiple: int) -> tuple[int, int]:
    w, h = size
    return max(multiple, round(w / multiple) * multiple), max(multiple, round(h / multiple) * multiple)


class ImageEditor:
    """A diffusers image-editing pipeline (Qwen-Image-Edit, FLUX.1 Kontext, ...) loaded by id. ``edit`` runs it with
    WorldMark's third-person edit prompt at the input's resolution (rounded to the pipeline's size multiple where it
    needs one, then resized back, so the output is always the input's exact width x height; the log says which)."""

    def __init__(self, model_id: str | None = None, device: str = "cpu", pipeline=None, steps: int = 28,
                 size_multiple: int | None = None):
        self.model_id, self.device, self.steps = model_id, device, steps
        self.pipe = pipeline
        if self.pipe is None:
            try:
                from diffusers import DiffusionPipeline  # heavy, optional

                self.pipe = DiffusionPipeline.from_pretrained(model_id, local_files_only=True).to(device)
            except (OSError, ValueError) as e:
                raise _missing("image editor", model_id, e) from None
        vsf = getattr(self.pipe, "vae_scale_factor", 8)
        self.multiple = size_multiple or int(vsf) * 2

    def edit(self, image: Image.Image, seed: int = 0) -> dict:
        import torch  # heavy, optional

        size = image.size
        w, h = _edit_size(size, self.multiple)
        g = torch.Generator("cpu").manual_seed(seed)
        out = self.pipe(image=image.convert("RGB"), prompt=load_prompt("third_person_edit"), height=h, width=w,
                        num_inference_steps=self.steps, generator=g).images[0]
        produced = out.size
        if produced != size:
            out = out.resize(size, Image.Resampling.LANCZOS)
        return {"image": out, "produced": list(produced), "resized": produced != size}


class DA3Intrinsics:
    """Per-image intrinsics from Depth Anything 3's camera head (PyPI ``depth-anything-3``; imported as the evaluator
    imports it, ``evaluate/features/models/da3.py: import_api``, which stands in for the export-only modules such as moviepy),
    loaded by id from local files only and scaled from the model's processed resolution back to original-image pixels.
    ``model_id`` is what the build log records: the id loaded, or ``given:<class>`` for a model object passed in."""

    def __init__(self, model_id: str | None = None, device: str = "cpu", model=None):
        self.device, self.model = device, model
        self.model_id = model_id or (DEFAULT_INTRINSICS if model is None else f"given:{type(model).__name__}")
        if self.model is None:
            try:
                cls, _ = da3.import_api()
            except ImportError as e:
                raise MissingModelError(
                    f"intrinsics estimation needs Depth Anything 3, whose API does not import here ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:120] if str(e) else ''}): `{da3.INSTALL_CMD}`, or give "
                    "--intrinsics") from None
            try:
                self.model = cls.from_pretrained(self.model_id, local_files_only=True).to(device).eval()
            except Exception as e:  # noqa: BLE001 - huggingface_hub's offline/missing errors are several classes
                raise _missing("intrinsics model", self.model_id, e) from None

    def estimate(self, image: Image.Image) -> list[float]:
        pred = self.model.inference([np.asarray(image.convert("RGB"))])
        k = np.asarray(pred.intrinsics)[0]
        ph, pw = np.asarray(pred.processed_images).shape[1:3]
        sx, sy = image.size[0] / pw, image.size[1] / ph
        return [float(k[0, 0] * sx), float(k[1, 1] * sy), float((k[0, 2] + 0.5) * sx - 0.5),
                float((k[1, 2] + 0.5) * sy - 0.5)]
