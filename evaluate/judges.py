"""The VLM judges of the benchmarks' binary questions (WorldMemBench's dynamic memory, MultiWorldBench's judged
capabilities), shared by both: the yes/no parser, frame packing, and two backends behind one cached front.

``evaluate --judge SPEC``:
- ``HF_ID`` or a local folder: a transformers vision-language model, loaded on first use from the local cache
  (``TransformersJudge``; no download is tried);
- ``openai:MODEL@BASE_URL``: any OpenAI-compatible chat endpoint (a vLLM server, an API), ``POST
  {BASE_URL}/chat/completions`` with the frames as base64 PNG data URLs (``OpenAIJudge``). The key, when the server
  wants one, is read from ``WORLDGATE_JUDGE_API_KEY`` or ``OPENAI_API_KEY`` and is never stored or written.

Every answer goes through :class:`CachedJudge`: cached on disk by (judge id, revision, prompt, the frames' digests),
so a rescore asks nothing; requests run on a few threads (``WORLDGATE_JUDGE_CONCURRENCY``), time out
(``WORLDGATE_JUDGE_TIMEOUT`` s) and are retried with exponential backoff on 429, 5xx and timeouts
(``WORLDGATE_JUDGE_RETRIES``, ``WORLDGATE_JUDGE_BACKOFF`` s). An answer is text; how an unreadable one counts is each
benchmark's rule (WorldMemBench: 0, a closed gate when it is the gate's; MultiWorldBench: the capability is
unavailable for that case), never a guess. docs/judges.md tells how to serve a judge with vLLM.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from PIL import Image

from worldgate.generate.provenance import resolved_revision

from .cache import CacheRefused, open_dir, write_file_at

#: the judge's token budget (WorldMemBench's appendix: max_tokens 4096); thinking models spend much of it first
MAX_TOKENS = 4096
KEY_ENV = ("WORLDGATE_JUDGE_API_KEY", "OPENAI_API_KEY")
#: what an unreadable answer counts as, per benchmark (said in results' judge provenance when one occurs)
UNPARSED_RULE = ("an answer that cannot be read as yes/no is never guessed: WorldMemBench scores it 0 (an unreadable "
                 "gate closes it: all 8 questions 0), MultiWorldBench marks that case's capability unavailable and "
                 "excludes it from the mean (paper section 4.1, cross-view motion; applied to every judged "
                 "capability), with its coverage")
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_SPEC = 500
MAX_REPLY = 1 << 20  # bytes of a reply body read; a larger one is malformed


# ------------------------------------------------------------------------------------------------------ parsing
_LEAD = re.compile(r"^\W*(yes|no|true|false|1|0)\b", re.I)
_STATED = re.compile(r"\banswer\s*(?:is|:)?\s*[\"']?(yes|no)\b", re.I)


def parse_yes_no(text: str | None) -> bool | None:
    """Robust binary answer parsing: the answer's first word (yes/no, true/false, 1/0) or an explicit "answer: yes"
    / "the answer is no". Anything else — both words, a stray "yes" inside other text, nothing — is unparseable
    (None): counted, never guessed."""
    if text is None:
        return None
    t = str(text).strip()
    if len(set(re.findall(r"\b(yes|no)\b", t.lower()))) == 2:  # "yes or no": ambiguous
        return None
    m = _LEAD.match(t) or _STATED.search(t)
    if not m:
        return None
    return m.group(1).lower() in ("yes", "true", "1")


# ------------------------------------------------------------------------------------------------------ frames
def frame_digest(frame: np.ndarray) -> str:
    """sha256 of a frame's pixels, shape and dtype: what the answer cache is keyed by."""
    a = np.ascontiguousarray(frame)
    h = hashlib.sha256(f"{a.shape}|{a.dtype}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def png_data_url(frame: np.ndarray) -> str:
    """A frame (H x W x 3 uint8 RGB) as a ``data:image/png;base64,...`` URL, as OpenAI-compatible servers take it."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(frame, np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def chat_content(frames: list[np.ndarray], prompt: str) -> list[dict]:
    """One user turn: the frames in order, then the prompt (the order both benchmarks' prompts are written for)."""
    return [{"type": "image_url", "image_url": {"url": png_data_url(f)}} for f in frames] + \
        [{"type": "text", "text": prompt}]


# ------------------------------------------------------------------------------------------------------ judges
class Judge:
    """A VLM judge: ``ask(frames, prompt) -> answer text`` (None when no answer came back); ``ask_many`` answers
    several independent questions (in order)."""

    name = "vlm"
    available = True
    reason = ""

    def ask(self, frames: list[np.ndarray], prompt: str) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def ask_many(self, questions: list[tuple[list[np.ndarray], str]]) -> list[str | None]:
        return [self.ask(list(f), p) for f, p in questions]


class JudgeMissingError(ValueError):
    """The ``--judge`` model is not on this machine, or the spec is malformed (a user error: one line)."""


class JudgeError(RuntimeError):
    """The judge server gave no usable answer after every retry (or refused the request)."""


class TransformersJudge(Judge):
    """A transformers vision-language model, loaded by HF id (``local_files_only``: weights must be in the cache),
    answering one prompt about a list of frames (greedy decoding, at most ``max_new_tokens``)."""

    def __init__(self, model_id: str | None = None, device: str = "cpu", model=None, processor=None,
                 max_new_tokens: int = MAX_TOKENS):
        self.model_id, self.device, self.max_new_tokens = model_id, device, max_new_tokens
        self.model, self.processor = model, processor
        if self.model is None:
            if not model_id:
                raise ValueError("a transformers judge needs a model id (e.g. Qwen/Qwen2.5-VL-7B-Instruct) or a model")
            try:
                from transformers import AutoModelForImageTextToText, AutoProcessor  # heavy, optional

                self.processor = AutoProcessor.from_pretrained(model_id, local_files_only=True)
                self.model = AutoModelForImageTextToText.from_pretrained(model_id, local_files_only=True).to(device)
            except (OSError, ValueError) as e:
                raise RuntimeError(f"VLM judge {model_id!r} is not in the Hugging Face cache: fetch it with "
                                   f"`hf download {model_id}` on a connected machine ({e})") from None
        self.model.eval()

    def ask(self, frames: list[np.ndarray], prompt: str) -> str:
        import torch  # heavy, optional

        content = [{"type": "image"} for _ in frames] + [{"type": "text", "text": prompt}]
        text = self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
        inputs = self.processor(text=[text], images=[Image.fromarray(f) for f in frames], return_tensors="pt")
        inputs = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in inputs.items()}
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        new = out[0, inputs["input_ids"].shape[1]:]
        return self.processor.batch_decode(new[None], skip_special_tokens=True)[0]


#: (model id, device) -> a loaded transformers judge: loaded once per process
LOADED: dict = {}


def load_local(model_id: str, device: str | None = None) -> Judge:
    if device is None:
        import torch  # heavy, optional

        device = "cuda" if torch.cuda.is_available() else "cpu"
    key = (model_id, device)
    if key not in LOADED:
        LOADED[key] = TransformersJudge(model_id, device=device)
    return LOADED[key]


def check_local(model_id: str) -> None:
    """Fail once, before the first record, when a transformers judge is neither a local model folder nor in the
    Hugging Face cache (no download is tried)."""
    if any(k[0] == model_id for k in LOADED):  # loaded in this process already
        return
    p = Path(model_id).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise JudgeMissingError(f"--judge {model_id}: the folder has no config.json (a transformers chat VLM "
                                    "saved with save_pretrained is expected)")
        return
    from huggingface_hub import try_to_load_from_cache  # optional (the learned extra), read-only: no network

    if not isinstance(try_to_load_from_cache(model_id, "config.json"), str):
        raise JudgeMissingError(f"--judge {model_id}: the VLM judge is not in the Hugging Face cache (no download "
                                f"is tried): fetch it with `hf download {model_id}` on a connected machine, give a "
                                "local model folder, or serve it and pass --judge openai:MODEL@URL; --rescore "
                                "re-scores replies already cached")


def _env_number(name: str, default: float, lo: float, hi: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        v = float(raw)
    except ValueError:
        raise JudgeMissingError(f"{name}={raw!r}: expected a number between {lo:g} and {hi:g}") from None
    if not lo <= v <= hi:
        raise JudgeMissingError(f"{name}={raw!r}: expected a number between {lo:g} and {hi:g}")
    return v


def parse_spec(spec: str) -> dict:
    """``openai:MODEL@BASE_URL`` -> {"backend": "openai", "model", "base_url", "host"}; anything else is a
    transformers model id or folder. A base URL with credentials, a query or a fragment is refused (a key goes in
    the environment, never in a spec that results record)."""
    if not isinstance(spec, str) or not spec.strip() or len(spec) > MAX_SPEC:
        raise JudgeMissingError(f"--judge {str(spec)[:80]!r}: expected a Hugging Face id, a model folder or "
                                f"openai:MODEL@BASE_URL (at most {MAX_SPEC} characters)")
    if not spec.startswith("openai:"):
        return {"backend": "transformers", "model": spec}
    model, sep, base = spec[len("openai:"):].partition("@")
    u = urlsplit(base)
    if not sep or not model.strip() or u.scheme not in ("http", "https") or not u.hostname:
        raise JudgeMissingError(f"--judge {spec!r}: expected openai:MODEL@BASE_URL, e.g. "
                                "openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1")
    if u.username or u.password or u.query or u.fragment:
        raise JudgeMissingError(f"--judge openai:{model}@...: the base URL must carry no credentials, query or "
                                f"fragment (results record it); put the key in {KEY_ENV[0]} or {KEY_ENV[1]}")
    return {"backend": "openai", "model": model.strip(), "base_url": base.rstrip("/"), "host": u.netloc}


class OpenAIJudge(Judge):
    """An OpenAI-compatible chat endpoint: one ``POST {base_url}/chat/completions`` per question (temperature 0,
    ``max_tokens``), retried with exponential backoff on 429, 5xx, timeouts and dropped connections; at most
    ``concurrency`` requests in flight. A 200 whose body has no answer text counts as unanswered (None, malformed);
    a refused request (400, 401, 404, ...) or exhausted retries raise :class:`JudgeError`, and every later question
    then fails at once with the same reason (no minutes of retries per record)."""

    def __init__(self, model: str, base_url: str, timeout: float = 120.0, retries: int = 4, backoff: float = 1.0,
                 concurrency: int = 4, max_tokens: int = MAX_TOKENS):
        import requests  # optional (the judge extra)
        import urllib3

        self.requests, self.urllib3_error = requests, urllib3.exceptions.HTTPError
        self.model, self.base_url, self.timeout, self.retries = model, base_url, timeout, int(retries)
        self.backoff, self.concurrency, self.max_tokens = backoff, int(concurrency), max_tokens
        self.slots = threading.BoundedSemaphore(self.concurrency)
        self.lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "malformed": 0}
        self.reported: set[str] = set()
        self.down: str | None = None
        self.session = requests.Session()
        pool = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=self.concurrency)
        self.session.mount("http://", pool)
        self.session.mount("https://", pool)

    def headers(self) -> dict:
        key = next((os.environ[k] for k in KEY_ENV if os.environ.get(k)), None)
        return {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}

    def ask(self, frames: list[np.ndarray], prompt: str) -> str | None:
        if self.down:
            raise JudgeError(self.down)
        body = {"model": self.model, "messages": [{"role": "user", "content": chat_content(frames, prompt)}],
                "max_tokens": self.max_tokens, "temperature": 0}
        url = f"{self.base_url}/chat/completions"
        why = ""
        for attempt in range(self.retries + 1):
            if attempt:
                with self.lock:
                    self.stats["retries"] += 1
                time.sleep(min(30.0, self.backoff * 2 ** (attempt - 1)))
            try:
                with self.slots:
                    with self.lock:
                        self.stats["requests"] += 1
                    with self.session.post(url, json=body, headers=self.headers(), timeout=self.timeout,
                                           stream=True) as r:
                        status, data = r.status_code, r.raw.read(MAX_REPLY + 1, decode_content=True)
            except (self.requests.RequestException, self.urllib3_error, OSError) as e:  # timeouts, dropped links
                why = f"{type(e).__name__} (timeout {self.timeout:g} s)"
                continue
            if status in RETRY_STATUS:
                why = f"HTTP {status}"
                continue
            if status != 200:
                said = data[:200].decode("utf-8", "replace")
                for k in KEY_ENV:  # a server that echoes the key must not put it into results
                    if os.environ.get(k):
                        said = said.replace(os.environ[k], "***")
                self.down = (f"judge {self.model} at {url} refused the request: HTTP {status} {said!r} (401/403: "
                             f"set {KEY_ENV[0]}; 404: check the base URL ends in /v1 and the model name the server "
                             "serves)")
                raise JudgeError(self.down)
            return self.answer(data)
        self.down = (f"judge {self.model} at {url}: no answer after {self.retries + 1} tries ({why}); is the server "
                     "up? (see docs/judges.md)")
        raise JudgeError(self.down)

    def answer(self, body: bytes) -> str | None:
        """The answer text of a chat completion body (at most ``MAX_REPLY`` bytes), None when it is not one."""
        try:
            data = json.loads(body) if len(body) <= MAX_REPLY else None
            msg = data["choices"][0]["message"]["content"]
            if isinstance(msg, list):  # content parts
                msg = "".join(p.get("text", "") for p in msg if isinstance(p, dict))
            if not isinstance(msg, str):
                raise TypeError(type(msg).__name__)
        except (ValueError, KeyError, IndexError, TypeError):
            with self.lock:
                self.stats["malformed"] += 1
            return None
        served = data.get("model") if isinstance(data, dict) else None
        if isinstance(served, str) and served:
            with self.lock:
                self.reported.add(served[:200])
        return msg[:MAX_REPLY]


# ------------------------------------------------------------------------------------------------------ cache
class CachedJudge(Judge):
    """The judge every benchmark is given: answers from the disk cache (``cache_dir``, one small JSON file per
    (judge id, revision, prompt, frame digests)) or from the backend, on a few threads. ``offline`` (``--rescore``):
    only cached answers; an uncached question raises :class:`JudgeError` naming it."""

    def __init__(self, spec: str, cache_dir: Path | None = None, device: str | None = None, offline: bool = False):
        self.spec = parse_spec(spec)
        self.id = self.model_id = self.name = spec
        self.device, self.offline = device, offline
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.backend: Judge | None = None
        self.lock = threading.Lock()
        self.stats = {"asked": 0, "cached": 0, "unparsed": 0, "unanswered": 0, "cache_refused": 0}
        self.served: set[str] = set()
        if self.spec["backend"] == "openai":
            self.revision = None
            self.concurrency = int(_env_number("WORLDGATE_JUDGE_CONCURRENCY", 4, 1, 64))
            self.options = {"timeout": _env_number("WORLDGATE_JUDGE_TIMEOUT", 120.0, 0.01, 3600),
                            "retries": int(_env_number("WORLDGATE_JUDGE_RETRIES", 4, 0, 20)),
                            "backoff": _env_number("WORLDGATE_JUDGE_BACKOFF", 1.0, 0.0, 60),
                            "concurrency": self.concurrency}
        else:
            self.revision = (resolved_revision(spec) or {}).get("revision")
            self.concurrency = 1  # one model on one device: questions in turn

    def open_backend(self) -> Judge:
        with self.lock:
            if self.backend is None:
                if self.spec["backend"] == "openai":
                    self.backend = OpenAIJudge(self.spec["model"], self.spec["base_url"], **self.options)
                else:
                    self.backend = load_local(self.spec["model"], self.device)
            return self.backend

    def key(self, frames: list[np.ndarray], prompt: str) -> str:
        h = hashlib.sha256(json.dumps([self.id, self.revision, prompt, [frame_digest(f) for f in frames]]).encode())
        return h.hexdigest()

    def folder(self, key: str, create: bool) -> int | None:
        """A descriptor of the answer's folder ``<cache_dir>/<key[:2]>``, opened from ``cache_dir``'s grandparent
        one real folder at a time (a link there is refused: :class:`CacheRefused`); None where it does not exist."""
        if self.cache_dir is None:
            return None
        names = [self.cache_dir.parent.name, self.cache_dir.name, key[:2]]
        fd = os.open(self.cache_dir.parent.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            for n in names:
                nxt = open_dir(fd, n, create)
                os.close(fd)
                fd = nxt
        except FileNotFoundError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def cached(self, key: str) -> dict | None:
        try:
            fd = self.folder(key, create=False)
            if fd is None:
                return None
            try:
                f = os.open(f"{key}.json", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
            finally:
                os.close(fd)
            with os.fdopen(f, "rb") as fh:
                got = json.loads(fh.read(2 * MAX_REPLY))
        except CacheRefused:
            self.refused()
            return None
        except (OSError, ValueError):
            return None
        return got if isinstance(got, dict) and isinstance(got.get("answer"), str) else None

    def store(self, key: str, prompt: str, answer: str, served: list[str]) -> None:
        data = json.dumps({"judge": self.id, "revision": self.revision, "served_model": served,
                           "prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(), "answer": answer}).encode()
        try:
            fd = self.folder(key, create=True)
            if fd is None:
                return
            try:
                write_file_at(fd, f"{key}.json", lambda f: f.write(data))
            finally:
                os.close(fd)
        except CacheRefused:
            self.refused()

    def refused(self) -> None:
        with self.lock:
            self.stats["cache_refused"] += 1

    def ask(self, frames: list[np.ndarray], prompt: str) -> str | None:
        return self.ask_many([(frames, prompt)])[0]

    def ask_many(self, questions: list[tuple[list[np.ndarray], str]]) -> list[str | None]:
        keys = [self.key(list(f), p) for f, p in questions]
        out: list[str | None] = [None] * len(questions)
        todo = []
        for k, key in enumerate(keys):
            hit = self.cached(key)
            if hit is not None:
                out[k] = hit["answer"]
                self.served_from_cache(hit)
            else:
                todo.append(k)
        with self.lock:
            self.stats["cached"] += len(questions) - len(todo)
        if todo and self.offline:
            raise JudgeError(f"--rescore: {len(todo)} judge answer(s) of {self.id} are not cached (evaluate without "
                             "--rescore asks the judge)")
        if todo:
            backend = self.open_backend()

            def one(k):
                f, p = questions[k]
                return backend.ask(list(f), p)

            if self.concurrency > 1 and len(todo) > 1:
                with ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo))) as pool:
                    answers = list(pool.map(one, todo))
            else:
                answers = [one(k) for k in todo]
            served = sorted(getattr(backend, "reported", ()))
            for k, a in zip(todo, answers):
                out[k] = a
                if a is not None:  # an unanswered (malformed) reply is asked again next time
                    self.store(keys[k], questions[k][1], a, served)
            with self.lock:
                self.stats["asked"] += len(todo)
                self.stats["unanswered"] += sum(a is None for a in answers)
        return out

    def note_unparsed(self, n: int = 1) -> None:
        """A benchmark could not read ``n`` answers (its own format: one word, or a checklist of lines)."""
        with self.lock:
            self.stats["unparsed"] += int(n)

    def served_from_cache(self, hit: dict) -> None:
        s = hit.get("served_model")
        if isinstance(s, list):
            with self.lock:
                self.served |= {str(x)[:200] for x in s[:8]}

    def provenance(self) -> dict:
        """Who judged (never a key): the spec's id, its backend, the revision or the model name the server reported,
        the host, and the counts (asked, cached, retries, unparsed) with the caveat an unreadable answer brings."""
        b = self.backend
        served = sorted(set(getattr(b, "reported", ())) | self.served)
        out = {"id": self.id, "backend": self.spec["backend"], "model": self.spec["model"],
               "revision": resolved_revision(self.id) if self.spec["backend"] == "transformers" else None,
               **({"host": self.spec["host"], "served_model": served} if self.spec["backend"] == "openai" else {}),
               "answers": dict(self.stats, **{k: v for k, v in (getattr(b, "stats", None) or {}).items()}),
               "unparsed_rule": UNPARSED_RULE}
        n = self.stats["unparsed"]
        out["caveats"] = ([f"{n} judge answer(s) could not be read as yes/no "
                           f"({self.stats['unanswered']} of them malformed or empty replies): {UNPARSED_RULE}"]
                          if n else [])
        return out


def open_judge(spec: str, cache_dir: Path | None = None, device: str | None = None, check: bool = True,
               offline: bool = False) -> CachedJudge:
    """The judge of ``evaluate --judge SPEC``; ``check``: a transformers judge must be on this machine (fails before
    the first record); ``offline``: answers only from ``cache_dir`` (``--rescore``)."""
    j = CachedJudge(spec, cache_dir, device, offline)
    if check and j.spec["backend"] == "transformers":
        check_local(j.spec["model"])
    if j.spec["backend"] == "openai" and importlib.util.find_spec("requests") is None:
        raise JudgeMissingError("--judge openai:...: needs the requests package (pip install 'worldgate[judge]')")
    return j
