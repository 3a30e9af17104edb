"""WorldMark's visual quality columns (QA_q, QA_a) under ``--backend learned``: Q-Align (``q-future/one-align``).

WorldMark's ``evaluation/worldmark/qalign_batch.py`` (qa, AlayaLab/WorldMark) loads the Hub repository's own
mPLUG-Owl2 code (qa:17-23 ``AutoModelForCausalLM.from_pretrained(QALIGN_MODEL, trust_remote_code (on),
torch_dtype=float16)``, ``QALIGN_MODEL`` defaulting to ``q-future/one-align``, wc:37), which does not run on
transformers 5. It scores each video once per task in video mode:

- frames 0, step, 2 step, ... with step = ``round(fps)`` (16 where the decoder reports no fps; qa:25-28,
  ``master.qa_frame_indices``), each a full-size RGB PIL image;
- ``model.score([frames], task_="quality" | "aesthetics", input_="video")`` (qa:48-49): every frame padded to a square
  with the processor's mean colour and preprocessed by its CLIP image processor; the prompt
  ``USER: How would you rate the {task} of this video?\\n<|image|>\\nASSISTANT: The ... is`` with the frames' visual
  tokens (64 per frame) in place of ``<|image|>``; the score is the softmax over the next-token logits of
  ``excellent, good, fair, poor, bad`` (their first token after ``<s>``) weighted by 5, 4, 3, 2, 1 (1..5);
- the record ``{"qalign_quality": q, "qalign_aesthetic": a, "n_frames": ...}`` (qa:51); final_master maps the mean
  over a model's videos to ``100 (x - 1) / 4`` (fm:79, ``master.master_rows``).

Here the network is pyiqa 0.1.16's port of that code to transformers >= 5 (``pyiqa.archs.q_align``: the mPLUG-Owl2
vision encoder, visual abstractor and modality-adaptive LLaMA), built as a subclass whose constructor does not fetch
the tokenizer and image processor from the hard-coded Hub id (the port's does), so the checkpoint can be a Hub id or a
local folder (``QALIGN_MODEL``, WorldMark's variable). Two things of the port are mended per instance, not globally:
transformers 5.24 no longer has ``PreTrainedModel.invert_attention_mask``, which its visual abstractor calls; and its
``score`` casts inputs to fp16 whatever the model's dtype, so the scoring above is done by :class:`QAlignScorer`
(the same steps, in the model's dtype; bit-identical to the port's ``score`` in fp16, tested). pyiqa's own
``QAlign`` metric is not used: it scores images only (``input_ != "image"`` raises) and loads from the Hub id.

Importing the port changes transformers' LLaMA classes for the whole process (``replace_llama_modality_adaptive``:
LlamaAttention, LlamaDecoderLayer, LlamaModel.forward, LlamaForCausalLM.forward), so it is imported only when this
feature runs. The prompt is read from the checkpoint's own ``modeling_mplug_owl2.py`` when it is there (the code
WorldMark ran), else :data:`PROMPT`; the feature records which.

pyiqa is PolyForm-Noncommercial-1.0.0; its q_align files carry the Apache-2.0 headers of mPLUG-Owl2 / LLaVA.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import threading
import types
from pathlib import Path

import numpy as np

from ..core import Extractor, FeatureError

QALIGN_ID = "q-future/one-align"
ENV_MODEL = "QALIGN_MODEL"  # wc:37
PACKAGE, PACKAGE_VERSION = "pyiqa", "0.1.16"
PORT_MODULE = "pyiqa.archs.q_align.modeling_mplug_owl2"
PORT_FILE = "archs/q_align/modeling_mplug_owl2.py"
#: what the port imports beyond this environment: icecream (modeling_mplug_owl2.py:41, undeclared by pyiqa); the
#: checkpoint's tokenizer.model converts to a fast tokenizer through sentencepiece + protobuf when it has no
#: tokenizer.json
INSTALL = (f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION} && pip install icecream sentencepiece protobuf")
FETCH = f"hf download {QALIGN_ID}"
LICENCE = ("pyiqa: PolyForm-Noncommercial-1.0.0 (its q_align code: Apache-2.0 headers, mPLUG-Owl2/LLaVA); "
           "Q-Align: MIT (Q-Future/Q-Align); weights built on LLaMA-2 (Llama 2 Community License)")
#: (feature key, Q-Align task_) in WorldMark's order (qa:48-49); WorldMark's input_ is "video"
TASKS = (("quality", "quality"), ("aesthetic", "aesthetics"))
INPUT = "video"
LEVELS = ("excellent", "good", "fair", "poor", "bad")
LEVEL_WEIGHTS = (5.0, 4.0, 3.0, 2.0, 1.0)
#: the prompt of the port's ``score`` (task, input, task, input); the checkpoint's own file wins where present
PROMPT = "USER: How would you rate the {task} of this {input}?\n<|image|>\nASSISTANT: The {task} of the {input} is"
IMAGE_TOKEN = "<|image|>"
DEFAULT_FPS = 16.0  # qa:26: a video without an average fps is taken as 16 fps


class MissingQAlign(FeatureError, ValueError):
    """Q-Align's code or weights are not usable here (a user error: printed as one message)."""


# --- the protocol ----------------------------------------------------------------------------------------------------

def frame_step(fps) -> int:
    """qa:26-27: ``max(1, int(round(fps)))``, fps 16 where the decoder reports none."""
    return max(1, int(round(float(fps or 0) or DEFAULT_FPS)))


def pick_frames(n_frames: int, fps) -> list[int]:
    """The frames Q-Align sees of a video of ``n_frames`` at ``fps`` (qa:28; equal to WorldMark's results-tree
    ``worldmark.master.qa_frame_indices``, tested)."""
    return list(range(0, int(n_frames), frame_step(fps)))


def level_score(level_logits):
    """Q-Align's score from the next-token logits of excellent, good, fair, poor, bad (..., 5): softmax, then the
    expectation of 5, 4, 3, 2, 1, in the logits' dtype (fp16 in WorldMark's run). Returns (score, probabilities)."""
    import torch

    p = torch.softmax(level_logits, -1)
    return p @ torch.tensor(LEVEL_WEIGHTS, dtype=level_logits.dtype, device=level_logits.device), p


_PROMPT_RE = re.compile(r'prompt\s*=\s*("(?:[^"\\]|\\.)*")\s*\.format\(([^)]*)\)')


def prompt_from_source(text: str) -> str | None:
    """The ``prompt = "...".format(task_, input_, ...)`` of a ``modeling_mplug_owl2.py``, as a template with
    ``{task}`` / ``{input}`` fields, or None where the file has no such line."""
    m = _PROMPT_RE.search(text)
    if not m:
        return None
    try:
        tmpl = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return None
    args = [a.strip() for a in m.group(2).split(",") if a.strip()]
    parts = tmpl.split("{}")
    if len(parts) != len(args) + 1 or not set(args) <= {"task_", "input_"} or "{" in "".join(parts):
        return None
    return parts[0] + "".join("{" + a[:-1] + "}" + p for a, p in zip(args, parts[1:]))


def checkpoint_file(source: str, name: str) -> Path | None:
    """A file of the checkpoint: in its folder, or in the local Hub cache (never the network)."""
    p = Path(source).expanduser()
    if p.is_dir():
        return p / name if (p / name).is_file() else None
    if is_path(source):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - the learned extra
        return None
    try:
        hit = try_to_load_from_cache(source, name)
    except ValueError:  # not a repo id (huggingface_hub's HFValidationError)
        return None
    return Path(hit) if isinstance(hit, str) else None


def is_path(source: str) -> bool:
    """Whether a checkpoint names a folder (absolute, relative or existing) rather than a Hub repo id."""
    p = Path(source).expanduser()
    return p.is_absolute() or source.startswith((".", "~")) or source.count("/") != 1 or p.exists()


def checkpoint_prompt(source: str) -> tuple[str, str]:
    """(template, where it came from): the checkpoint's own ``modeling_mplug_owl2.py`` prompt, else :data:`PROMPT`."""
    f = checkpoint_file(source, "modeling_mplug_owl2.py")
    if f is not None:
        t = prompt_from_source(f.read_text(errors="replace"))
        if t:
            return t, f"checkpoint {f.name}"
    return PROMPT, f"pyiqa {PACKAGE_VERSION} port (the checkpoint has no modeling_mplug_owl2.py here)"


def _port():
    try:
        return importlib.import_module(PORT_MODULE)
    except ImportError as e:
        raise MissingQAlign(
            f"WorldMark's QA_q / QA_a under --backend learned run Q-Align through pyiqa {PACKAGE_VERSION}'s port of "
            f"mPLUG-Owl2, which does not import here ({type(e).__name__}: {e}); install it next to transformers 5 "
            f"without its heavy requirements: {INSTALL}") from None


def _invert_attention_mask(self, mask):
    """transformers 4's ``ModuleUtilsMixin.invert_attention_mask`` (removed in transformers 5): 1 -> 0, 0 -> min."""
    import torch

    ext = mask[:, None, :, :] if mask.dim() == 3 else mask[:, None, None, :]
    ext = ext.to(dtype=self.dtype)
    return (1.0 - ext) * torch.finfo(self.dtype).min


_CLASS: list = []


def owl2_class():
    """The port's ``MPLUGOwl2LlamaForCausalLM`` with a constructor that builds the network only (the port's also
    loads the tokenizer and image processor from ``q-future/one-align`` on the Hub); built once."""
    if _CLASS:
        return _CLASS[0]
    M = _port()
    import torch
    from transformers import LlamaForCausalLM

    class QAlignOwl2(M.MPLUGOwl2LlamaForCausalLM):
        def __init__(self, config):
            super(LlamaForCausalLM, self).__init__(config)  # as the port: LlamaPreTrainedModel's constructor
            self.model = M.MPLUGOwl2LlamaModel(config)
            self.lm_head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)
            abstractor = self.model.visual_abstractor
            if not hasattr(abstractor, "invert_attention_mask"):
                abstractor.invert_attention_mask = types.MethodType(_invert_attention_mask, abstractor)
            self.post_init()

    _CLASS.append(QAlignOwl2)
    return QAlignOwl2


class QAlignScorer:
    """Q-Align's ``score(videos, task_, input_="video")`` (the port's modeling_mplug_owl2.py:281-305, the Hub code
    WorldMark runs) over one video: expand to square in the processor's mean colour, CLIP preprocessing, the prompt
    with one ``<|image|>`` for all frames, the level logits of the last position, :func:`level_score`."""

    def __init__(self, model, tokenizer, processor, prompt: str = PROMPT, prompt_source: str = "default",
                 source: str = ""):
        self.model, self.tokenizer, self.processor = model.eval(), tokenizer, processor
        self.prompt, self.prompt_source, self.source = prompt, prompt_source, source
        bos = tokenizer.bos_token_id
        ids = tokenizer(list(LEVELS))["input_ids"]
        if bos is None or any(len(i) < 2 or i[0] != bos for i in ids):
            raise MissingQAlign("Q-Align's tokenizer must prepend <s> as transformers 4's LlamaTokenizer did (the "
                                "level ids are the token after it, and the prompt starts with it); load it with "
                                "add_bos_token=True")
        self.level_ids = [i[1] for i in ids]  # upstream: [id_[1] for id_ in tokenizer(LEVELS)["input_ids"]]
        self._lock = threading.Lock()

    def text(self, task: str, input_: str = INPUT) -> str:
        return self.prompt.format(task=task, input=input_)

    def input_ids(self, task: str, input_: str = INPUT):
        M = _port()
        return M.tokenizer_image_token(self.text(task, input_), self.tokenizer, M.IMAGE_TOKEN_INDEX,
                                       return_tensors="pt")

    def pixels(self, frames):
        """(T, 3, S, S) pixel values of uint8 RGB frames (or PIL images), in the model's dtype."""
        from PIL import Image

        M = _port()
        bg = tuple(int(x * 255) for x in self.processor.image_mean)
        pil = [f if isinstance(f, Image.Image) else Image.fromarray(np.ascontiguousarray(f)) for f in frames]
        x = self.processor.preprocess([M.expand2square(im, bg) for im in pil], return_tensors="pt")["pixel_values"]
        return x.to(device=self.model.device, dtype=self.model.dtype)

    def level_logits(self, frames, task: str, input_: str = INPUT):
        """The next-token logits of excellent .. bad after the prompt with the video (5,)."""
        import torch

        if not len(frames):
            raise FeatureError("Q-Align needs at least one frame")
        ids = self.input_ids(task, input_).unsqueeze(0).to(self.model.device)
        x = self.pixels(frames)
        with self._lock, torch.inference_mode():
            out = self.model(ids, images=[x])["logits"][:, -1, self.level_ids]
        return out[0]

    def score(self, frames, task: str, input_: str = INPUT) -> tuple[float, np.ndarray]:
        """(score on 1..5, level probabilities excellent .. bad)."""
        s, p = level_score(self.level_logits(frames, task, input_))
        return float(s), p.float().cpu().numpy().astype(np.float64)


# --- the checkpoint --------------------------------------------------------------------------------------------------

def source(model: str | None = None) -> str:
    """The checkpoint: the argument, else ``QALIGN_MODEL`` (read now), else ``q-future/one-align``."""
    return str(model) if model else os.environ.get(ENV_MODEL) or QALIGN_ID


def _module_present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def port_present() -> bool:
    """pyiqa with its q_align port, and icecream, importable (checked without importing pyiqa)."""
    spec = importlib.util.find_spec(PACKAGE) if _module_present(PACKAGE) else None
    return bool(spec and spec.origin and (Path(spec.origin).parent / PORT_FILE).is_file()
                and _module_present("icecream"))


def weights_present(model: str | None = None) -> bool:
    return checkpoint_file(source(model), "config.json") is not None


def missing(model: str | None = None) -> list[dict]:
    """What the ``qalign`` feature lacks here, as ``catalogue.missing_models`` rows; empty when it can run."""
    src = source(model)

    def row(what, mid, fetch):
        return {"feature": "qalign", "what": what, "source": "pypi" if fetch == INSTALL else "hub", "id": mid,
                "licence": LICENCE, "fetch": fetch}

    out = []
    if not port_present():
        out.append(row(f"Q-Align code: pyiqa {PACKAGE_VERSION}'s mPLUG-Owl2 port + icecream", PACKAGE, INSTALL))
    if checkpoint_file(src, "config.json") is None:
        where = f"{ENV_MODEL}={src} (no config.json there)" if is_path(src) else src
        out.append(row("Q-Align weights (mPLUG-Owl2, WorldMark qa:17-23)", where,
                       FETCH if src == QALIGN_ID else f"{FETCH} --local-dir {src}"))
    elif checkpoint_file(src, "tokenizer.json") is None and not (
            _module_present("sentencepiece") and _module_present("google.protobuf")):
        out.append(row("Q-Align tokenizer: tokenizer.model needs sentencepiece + protobuf (no tokenizer.json)",
                       "sentencepiece", INSTALL))
    return out


def configured() -> bool:
    """Whether the ``qalign`` feature should run: ``QALIGN_MODEL`` is set (then a missing piece is an error), or the
    port is installed and the weights are in the local cache."""
    return bool(os.environ.get(ENV_MODEL)) or (port_present() and weights_present())


def unavailable_reason(model: str | None = None) -> str:
    miss = missing(model)
    if not miss:
        return "Q-Align was not run"
    return ("Q-Align (q-future/one-align, WorldMark qa:17-51) is not set up: "
            + "; ".join(f"{m['what']}: {m['fetch']}" for m in miss))


def check(model: str | None = None) -> str:
    """Fail once, before any record, naming every missing piece with its command; returns the checkpoint."""
    miss = missing(model)
    if miss:
        raise MissingQAlign("WorldMark's QA_q / QA_a under --backend learned need Q-Align:\n"
                            + "\n".join(f"  {m['what']}: {m['id']}\n    -> {m['fetch']}" for m in miss)
                            + f"\n(unset {ENV_MODEL} to report the two columns unavailable instead)")
    return source(model)


_SCORERS: dict = {}  # (checkpoint, device, dtype) -> QAlignScorer: loaded once per process
_SCORERS_LOCK = threading.Lock()


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_scorer(model: str | None = None, device: str | None = None, dtype=None) -> QAlignScorer:
    """Q-Align from a Hub id or folder: the network (the port's classes), its LLaMA tokenizer (``<s>`` prepended, as
    WorldMark's transformers 4 did) and CLIP image processor (the PIL class), fp16 on CUDA as WorldMark (qa:22),
    fp32 on CPU; loaded once per (checkpoint, device, dtype)."""
    import torch

    src = source(model)
    device = device or default_device()
    dtype = dtype or (torch.float16 if str(device).startswith("cuda") else torch.float32)
    key = (src, str(device), str(dtype))
    with _SCORERS_LOCK:
        if key not in _SCORERS:
            check(src)
            cls = owl2_class()
            from transformers import CLIPImageProcessorPil, LlamaTokenizer

            try:
                net = cls.from_pretrained(src, dtype=dtype)
                tok = LlamaTokenizer.from_pretrained(src, add_bos_token=True)
                proc = CLIPImageProcessorPil.from_pretrained(src)
            except (OSError, ValueError, ImportError) as e:
                raise MissingQAlign(
                    f"cannot load Q-Align from {src!r} ({type(e).__name__}: {str(e).splitlines()[0][:200]}); fetch it "
                    f"on a connected machine ({FETCH}) into this HF cache, or set {ENV_MODEL} to a local copy; the "
                    f"code: {INSTALL}") from None
            prompt, where = checkpoint_prompt(src)
            _SCORERS[key] = QAlignScorer(net.to(device), tok, proc, prompt, where, src)
        return _SCORERS[key]


# --- the feature -----------------------------------------------------------------------------------------------------

class QAlignFeature(Extractor):
    """Q-Align quality and aesthetics of the record's video as WorldMark computes them (qa:25-51): the
    :func:`pick_frames` frames at their decoded size, one video-mode score per task."""

    name = "qalign"
    version = "1"
    backend = "learned"
    max_side = None  # native frames: WorldMark hands decord's full frames to the processor (qa:28)

    @classmethod
    def available(cls) -> bool:
        """Where pyiqa's port and the weights are here, or QALIGN_MODEL names a checkpoint (then a missing piece is an
        error, before the first record); else WorldMark's QA_q / QA_a are unavailable with what to install."""
        return configured()

    @classmethod
    def preflight(cls) -> None:
        check()

    def __init__(self, scorer: QAlignScorer | None = None, model: str | None = None, device: str | None = None,
                 dtype=None):
        self.scorer, self.model, self.device, self.dtype = scorer, model, device, dtype

    def _scorer(self) -> QAlignScorer:
        if self.scorer is None:
            self.scorer = load_scorer(self.model, self.device, self.dtype)
        return self.scorer

    def start(self, rec):
        super().start(rec)
        self.step = frame_step(rec.fps)
        self.frames, self.picked = [], []

    def needs_frame(self, i):
        return i % self.step == 0

    def update(self, i, frame):
        if frame is None or i % self.step:
            return
        self.picked.append(i)
        self.frames.append(np.ascontiguousarray(frame))

    def finish(self):
        if not self.frames:
            raise FeatureError("Q-Align: the video gave no frame")
        s = self._scorer()
        out = {"frame": np.asarray(self.picked, np.int32), "n_frames": np.int64(len(self.frames))}
        for key, task in TASKS:
            v, p = s.score(self.frames, task, INPUT)
            out[f"qalign_{key}"] = np.float64(v)
            out[f"probs_{key}"] = p
            out[f"prompt_{key}"] = np.asarray(s.text(task, INPUT))
        out["prompt_source"] = np.asarray(s.prompt_source)
        self.frames = []
        return out

    def config(self):
        return {**super().config(), "model": source(self.model), "code": f"{PACKAGE} {PACKAGE_VERSION} q_align port",
                "tasks": [t for _, t in TASKS], "input": INPUT, "levels": list(LEVELS)}


def qa_entry(feat: dict) -> tuple[float, float, int] | None:
    """(quality, aesthetic on 1..5, frames) of a record's ``qalign`` feature, WorldMark's qa:51 fields."""
    Q = feat.get("qalign")
    if not Q or "qalign_quality" not in Q:
        return None
    return (float(np.asarray(Q["qalign_quality"])), float(np.asarray(Q["qalign_aesthetic"])),
            int(np.asarray(Q.get("n_frames", np.size(Q.get("frame", ()))))))


__all__ = ["ENV_MODEL", "INSTALL", "LEVELS", "LEVEL_WEIGHTS", "MissingQAlign", "PROMPT", "QALIGN_ID", "QAlignFeature",
           "QAlignScorer", "TASKS", "check", "checkpoint_prompt", "configured", "frame_step", "level_score",
           "load_scorer", "missing", "owl2_class", "pick_frames", "prompt_from_source", "qa_entry",
           "unavailable_reason"]
