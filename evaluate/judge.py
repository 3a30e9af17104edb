"""WorldMemBench dynamic memory: does an event that was under way when the camera left keep going while unseen?

Protocol (../shared/METRICS.md): a judge sees the frames at stride 8 (first and last always), in order, with the phase
ranges; it first decides whether the event visibly starts during the initial hold (the gate), then answers 8 binary
questions whose reference answers are frozen (2 each: return progress, persistence/reset, final state,
causal/physical consistency). Gate closed -> all 8 score 0. Overall = mean of the 8; p_start (gate-open rate) and the
conditional score are reported too (Overall = p_start * S_cond). An answer that cannot be parsed is counted and
leaves the item unavailable, never guessed.

Two judges produce the answers, and every number says which one did:
- ``measured`` (Engine records, classical backend): a video-measured state probe. ``EventExtractor`` follows each
  event target's image region (from ``targets.npz``) on every frame, registered to the conditioning frame by phase
  correlation, and records how far it has changed from frame 0; the answers are read off that curve at the end of
  the initial hold, at each return to the starting view and at the last frame.
- ``vlm`` (any record): a vision-language model loaded by Hugging Face id through transformers
  (``VLMJudge``), asked with the prompts in ``prompts/dynamic_memory.txt``.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import cv2
import numpy as np

from .features import Extractor

STRIDE = 8
NOISE = 0.04  # region change (mean absolute difference, 0-1, after registration) below which nothing visibly changed
START = 0.08  # share of the event's full visible change reached during the initial hold: it visibly started
PROGRESS = 0.15  # share of the full change that counts as progress (or a step back)
JUMP = 0.5  # a change between consecutive views of the event larger than this share is a jump, not gradual
OTHER = 0.04  # registered residual of the rest of the view above its initial-hold level: something else changed
REGISTERED = 0.08  # residual of the rest of the view under which a frame shows the start view (its change counts)


def load_dynamic(folder: Path) -> dict | None:
    p = Path(folder) / "dynamic.json"
    try:
        return json.loads(p.read_text()) if p.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None


def sampled_frames(n: int, stride: int = STRIDE) -> list[int]:
    """The judge's frames: every ``stride``-th, the first and the last always."""
    if n <= 0:
        return []
    return sorted(set(range(0, n, stride)) | {n - 1})


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


# ------------------------------------------------------------------------------------------- measured judge
class EventExtractor(Extractor):
    """Per event target and frame: how far its region differs from frame 0 (0..1), after registering the frame to
    frame 0 by phase correlation (a shift of more than a third of the frame means the region is out of view: NaN)."""

    name = "events"
    version = "4"
    backend = "classical"
    max_side = 192

    def start(self, rec):
        super().start(rec)
        from .memory import load_targets

        self.targets = load_targets(rec.dir)
        self.dyn = load_dynamic(rec.dir)
        self.ref = None
        self.rows: list[list[float]] = []
        self.rest: list[float] = []
        self.shift: list[tuple[float, float]] = []

    def _setup(self, frame):
        H, W = frame.shape[:2]
        self.win = cv2.createHanningWindow((W, H - H // 3), cv2.CV_32F)
        self.ref = frame.astype(np.float32)
        self.boxes = []
        for item in self.dyn["events"]:
            m = cv2.resize(self.targets["masks"][item["target"]].astype(np.uint8), (W, H),
                           interpolation=cv2.INTER_NEAREST).astype(bool)
            ys, xs = np.nonzero(m)
            x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
            if item["kind"] == "grow":  # the tower grows upward: watch the space above it too
                y0 = max(0, y0 - 3 * (y1 - y0))
            gx, gy = max(2, (x1 - x0) // 4), max(2, (y1 - y0) // 4)
            self.boxes.append((max(0, x0 - gx), max(0, y0 - gy), min(W, x1 + gx), min(H, y1 + gy)))
        self.keep = np.ones((H, W), bool)
        for x0, y0, x1, y1 in self.boxes:
            self.keep[y0:y1, x0:x1] = False
        self.keep[: H // 3] = False  # the sky drifts (clouds): judge the ground and the things on it
        self.gray0 = self._reg_view(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32))

    def _reg_view(self, g):
        """What registration looks at: the lower two thirds (no drifting sky), event boxes flattened (their change
        must not pull the alignment)."""
        H = g.shape[0]
        g = g.copy()
        fill = float(g[self.keep].mean()) if self.keep.any() else float(g.mean())
        for x0, y0, x1, y1 in self.boxes:
            g[y0:y1, x0:x1] = fill
        return np.ascontiguousarray(g[H // 3:])

    def needs_frame(self, i):
        return self.targets is not None and bool(self.dyn and self.dyn.get("events"))

    def update(self, i, frame):
        if frame is None or self.targets is None or not self.dyn or not self.dyn.get("events"):
            return
        if self.ref is None:
            self._setup(frame)
        H, W = frame.shape[:2]
        g = self._reg_view(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32))
        (dx, dy), _ = cv2.phaseCorrelate(self.gray0, g, self.win)
        self.shift.append((dx, dy))
        row = []
        for x0, y0, x1, y1 in self.boxes:
            sx0, sy0 = int(round(x0 + dx)), int(round(y0 + dy))
            sx1, sy1 = sx0 + (x1 - x0), sy0 + (y1 - y0)
            if abs(dx) > W / 3 or abs(dy) > H / 3 or sx0 < 0 or sy0 < 0 or sx1 > W or sy1 > H:
                row.append(np.nan)
                continue
            a = self.ref[y0:y1, x0:x1]
            b = frame[sy0:sy1, sx0:sx1].astype(np.float32)
            px = np.abs(a - b).mean(axis=2).ravel()  # the changing part of a box (a lamp's glow) is small:
            k = max(1, len(px) // 5)                 # the mean of its most changed fifth
            row.append(float(np.partition(px, len(px) - k)[-k:].mean() / 255.0))
        self.rows.append(row)
        # the rest of the view (outside every event box), registered the same way
        ix, iy = int(round(dx)), int(round(dy))
        if abs(ix) > W / 3 or abs(iy) > H / 3:
            self.rest.append(np.nan)
            return
        a = self.ref[max(0, -iy):H - max(0, iy), max(0, -ix):W - max(0, ix)]
        b = frame[max(0, iy):H - max(0, -iy), max(0, ix):W - max(0, -ix)].astype(np.float32)
        keep = self.keep[max(0, -iy):H - max(0, iy), max(0, -ix):W - max(0, ix)]
        self.rest.append(float(np.abs(a - b)[keep].mean() / 255.0) if keep.any() else np.nan)

    def finish(self):
        if not self.rows:
            return {"change": np.zeros((0, 0)), "shift": np.zeros((0, 2)), "rest": np.zeros(0)}
        return {"change": np.asarray(self.rows, np.float64).T, "shift": np.asarray(self.shift, np.float64),
                "rest": np.asarray(self.rest, np.float64)}


def _at(curve: np.ndarray, frame: int, window: int = 2) -> float | None:
    """The region's change around ``frame`` (median over a few frames where it is in view), None if never in view."""
    a, b = max(0, frame - window), min(len(curve), frame + window + 1)
    v = curve[a:b]
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) else None


def measured_answers(curve: np.ndarray, item: dict, phases: list[dict], return_frames: list[int]) -> dict:
    """The gate and the 8 answers read off a region-change curve. The curve is normalised by the largest change the
    video shows for this event (its changed look), so one set of thresholds serves a tower, a wall and a lamp;
    None where the region was not observable."""
    v = next((p for p in phases if p["name"] == "V"), None)
    v_end = (v["frames"][1] - 1) if v else 0
    n = len(curve)
    finite = np.sort(curve[np.isfinite(curve)])
    top = float(np.median(finite[-5:])) if len(finite) else 0.0  # the changed look, robust to a stray frame
    if top < NOISE:  # the event never visibly changes anywhere in the video
        r = np.zeros_like(curve)
        r[~np.isfinite(curve)] = np.nan
    else:
        r = curve / top
    r_v, r_0 = _at(r, v_end, 1), _at(r, 1, 1)
    rets = [_at(r, f) for f in return_frames]
    r_last = _at(r, n - 1)
    seen = r[sampled_frames(n)]
    steps = np.diff(seen)  # between consecutive sampled frames that both show the event (not across an absence)
    steps = steps[np.isfinite(steps)]
    jump = bool(len(steps) and np.max(np.abs(steps)) > JUMP)
    first = rets[0] if rets else None
    gate = None if r_v is None or r_0 is None else bool(r_v - r_0 > START)
    known = [x for x in rets if x is not None]
    ans = [
        None if first is None else bool(first > 0.3),  # changed at the first return
        None if first is None or r_v is None else bool(first - r_v > PROGRESS),  # changed further while unseen
        None if first is None else bool(first < PROGRESS),  # back to its first look (reset)
        bool(any(b < a - PROGRESS for a, b in zip(known[:-1], known[1:]))) if len(known) >= 2 else None,
        None if r_last is None else bool(r_last > 0.3),  # still changed at the end
        None if r_last is None or not known else bool(r_last > 0.7 and abs(r_last - known[-1]) < PROGRESS),
        not jump,  # gradual
        None,  # anything else changed: from the rest of the view (dynamic_scores)
    ]
    return {"gate": gate, "answers": ans, "curve_at": {"max_change": top, "v_end": r_v, "returns": rets,
                                                       "last": r_last}}


def score_items(gate: bool | None, answers: list[bool | None], item: dict, asked: bool = True) -> dict:
    """Gated protocol: gate closed -> all 8 score 0; gate open -> 1 per answer matching the frozen reference.
    An unparseable gate leaves the whole item unavailable; unparseable answers leave their question unscored. Both
    are counted (``unparsed``), never guessed. ``asked``: whether the 8 questions were put at all."""
    refs = [q["answer"] for q in item["questions"]]
    if gate is None:
        return {"gate": None, "per_question": [None] * len(refs), "overall": None,
                "unparsed": 1 + (sum(a is None for a in answers) if asked else 0)}
    if not gate:
        return {"gate": False, "per_question": [0.0] * len(refs), "overall": 0.0,
                "unparsed": sum(a is None for a in answers) if asked else 0}
    per = [None if a is None else float(a == r) for a, r in zip(answers, refs)]
    vals = [p for p in per if p is not None]
    return {"gate": True, "per_question": per, "overall": float(np.mean(vals)) if vals else None,
            "unparsed": sum(a is None for a in answers)}


def dynamic_scores(feat: dict, rec: dict, folder: Path | None, P: dict) -> dict:
    """Dynamic memory of one record via the measured judge: overall (gated), p_start and the conditional score."""
    from .memory import revisit_frames
    from .metrics import Score, na

    dyn = load_dynamic(folder) if folder is not None else None
    E = feat.get("events")
    if not dyn or not dyn.get("events"):
        r = "no dynamic-memory items in this record (dynamic.json: events with frozen questions)"
        return {m: na(r) for m in ("dynamic_score", "dynamic_p_start", "dynamic_conditional")}
    if E is None or E["change"].size == 0:
        r = "the events feature was not computed"
        return {m: na(r) for m in ("dynamic_score", "dynamic_p_start", "dynamic_conditional")}
    revs = revisit_frames(feat, rec)
    ret_frames = [r["frame"] for r in revs]
    other = _other_change(E, dyn, ret_frames)
    rest = E.get("rest")
    ok = np.isfinite(rest) & (rest < REGISTERED) if rest is not None and len(rest) else None
    results = []
    for item, curve in zip(dyn["events"], E["change"]):
        if ok is not None and len(ok) == len(curve):  # only views that register onto the start view count
            curve = np.where(ok, curve, np.nan)
        m = measured_answers(curve, item, dyn["phases"], ret_frames)
        m["answers"][7] = other
        results.append({**score_items(m["gate"], m["answers"], item), "name": item["name"],
                        "curve_at": m["curve_at"]})
    overall = [r["overall"] for r in results if r["overall"] is not None]
    gates = [r["gate"] for r in results if r["gate"] is not None]
    cond = [r["overall"] for r in results if r["gate"] and r["overall"] is not None]
    detail = {"judge": "measured", "items": results}
    out = {
        "dynamic_score": Score(float(np.mean(overall)), detail=detail) if overall else na("no answerable item"),
        "dynamic_p_start": Score(float(np.mean(gates)), detail={"judge": "measured"}) if gates
        else na("no item's start could be judged"),
        "dynamic_conditional": Score(float(np.mean(cond)), detail={"judge": "measured"}) if cond
        else na("no item passed the start gate"),
    }
    return out


def _other_change(E, dyn, ret_frames) -> bool | None:
    """Did the starting view change elsewhere than in the event regions? The registered residual of the rest of
    the view at the first return, against the same residual during the initial hold (compression noise)."""
    rest = E.get("rest")
    if rest is None or not len(rest) or not ret_frames:
        return None
    v = next((p for p in dyn["phases"] if p["name"] == "V"), None)
    base = _at(rest, (v["frames"][1] - 1) if v else 1, 1)
    at = _at(rest, ret_frames[0])
    return None if base is None or at is None else bool(at - base > OTHER)


# ---------------------------------------------------------------------------------------------------- vlm judge
def prompt_template() -> str:
    return resources.files("worldgate.prompts").joinpath("dynamic_memory.txt").read_text()


def build_prompt(question: str, phases: list[dict], frames: list[int], fps: float) -> str:
    ph = "; ".join(f"{p['name']} = frames {p['frames'][0]}-{max(p['frames'][0], p['frames'][1] - 1)}" for p in phases)
    return prompt_template().format(n_images=len(frames), frames=", ".join(map(str, frames)), fps=f"{fps:g}",
                                    phases=ph, question=question)


class VLMJudge:
    """A transformers vision-language model, loaded by HF id (``local_files_only``: weights must be in the cache),
    answering one yes/no question about a list of frames."""

    def __init__(self, model_id: str | None = None, device: str = "cpu", model=None, processor=None,
                 max_new_tokens: int = 6):
        self.model_id, self.device, self.max_new_tokens = model_id, device, max_new_tokens
        self.model, self.processor = model, processor
        if self.model is None:
            if not model_id:
                raise ValueError("VLMJudge needs a model id (e.g. Qwen/Qwen2.5-VL-7B-Instruct) or a model")
            try:
                from transformers import AutoModelForImageTextToText, AutoProcessor

                self.processor = AutoProcessor.from_pretrained(model_id, local_files_only=True)
                self.model = AutoModelForImageTextToText.from_pretrained(model_id, local_files_only=True).to(device)
            except (OSError, ValueError) as e:
                raise RuntimeError(f"VLM judge {model_id!r} is not in the Hugging Face cache: fetch it with "
                                   f"`hf download {model_id}` on a connected machine ({e})") from None
        self.model.eval()

    def ask(self, frames: list[np.ndarray], prompt: str) -> str:
        import torch
        from PIL import Image

        content = [{"type": "image"} for _ in frames] + [{"type": "text", "text": prompt}]
        text = self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
        inputs = self.processor(text=[text], images=[Image.fromarray(f) for f in frames], return_tensors="pt")
        inputs = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in inputs.items()}
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        new = out[0, inputs["input_ids"].shape[1]:]
        return self.processor.batch_decode(new[None], skip_special_tokens=True)[0]

    def judge_record(self, frames_all: list[np.ndarray], dyn: dict, fps: float) -> list[dict]:
        idx = sampled_frames(len(frames_all))
        frames = [frames_all[i] for i in idx]
        out = []
        for item in dyn["events"]:
            gate = parse_yes_no(self.ask(frames, build_prompt(item["gate"]["text"], dyn["phases"], idx, fps)))
            answers = [parse_yes_no(self.ask(frames, build_prompt(q["text"], dyn["phases"], idx, fps)))
                       for q in item["questions"]] if gate else [None] * len(item["questions"])
            out.append({**score_items(gate, answers, item, asked=bool(gate)), "name": item["name"], "judge": "vlm"})
        return out
