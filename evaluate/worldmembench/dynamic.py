"""WorldMemBench dynamic memory: does an event that was under way when the camera left keep going while unseen?

Protocol (the paper's Dynamic Memory paragraph and its judge appendix; docs/worldmembench.md): the judge sees the
frames at stride 8 (first and last always), in order, with the planned phase ranges, in one prompt per item; it first
decides whether the event visibly starts during the initial hold (the gate), then answers the 8 binary questions whose
reference answers are frozen (2 each: return progress, persistence/reset, final state, causal/physical consistency),
with up to 4096 new tokens. Gate closed (a "no", or a gate answer that cannot be read) -> all 8 score 0; gate open ->
1 per answer that matches its reference and 0 otherwise, an unparsed answer included (7 right + 1 unparsed = 0.875).
Overall = mean of the 8; each aspect = mean of its 2; p_start (gate-open rate) and the conditional score (over the
items whose gate opened) are reported too, so Overall = p_start * S_cond.

Two judges, never mixed under one metric id:
- ``vlm`` (``dynamic_score``, ``dynamic_p_start``, ``dynamic_conditional``, ``dynamic_<aspect>``): a vision-language
  model (``evaluate --judge HF_ID`` through transformers, or ``--judge openai:MODEL@BASE_URL``, a served one:
  ``worldgate.evaluate.judges``, docs/judges.md), run once per record as the cached feature ``judge``
  (``JudgeExtractor``) with the prompt ``prompts/worldmembench/dynamic_memory.txt``.
- ``measured (proxy)`` (``dynamic_probe_*``; Engine records, classical backend): a video-measured state probe.
  ``EventExtractor`` follows each event target's image region (from ``targets.npz``) on every frame, registered to
  the conditioning frame by a homography, and records how far it has changed from frame 0; the answers are read off
  that curve at the end of the initial hold, on both sides of the interval the target is out of view (the item's
  ``gap``), at each return to the starting view and at the last frame, and scored by the same gated rule.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from worldgate import prompts

from ..features import Extractor
from ..features.events import load_dynamic
from ..judges import LOADED as _JUDGES  # noqa: F401  (kept under its old name: tests and callers seed it)
from ..judges import JudgeMissingError  # noqa: F401  (re-exported: the CLI and tests catch it here)
from ..judges import MAX_TOKENS, CachedJudge, TransformersJudge, load_local, open_judge, parse_yes_no
from ..judges import check_local as check_judge
from ..score import Score, na
from .params import PARAMS
from .static import revisit_frames

STRIDE = 8


def sampled_frames(n: int, stride: int = STRIDE) -> list[int]:
    """The judge's frames: every ``stride``-th, the first and the last always."""
    if n <= 0:
        return []
    return sorted(set(range(0, n, stride)) | {n - 1})


def _at(curve: np.ndarray, frame: int, window: int = 2) -> float | None:
    """The region's change around ``frame`` (median over a few frames where it is in view), None if never in view."""
    a, b = max(0, frame - window), min(len(curve), frame + window + 1)
    v = curve[a:b]
    v = v[np.isfinite(v)]
    return float(np.median(v)) if len(v) else None


def measured_answers(curve: np.ndarray, item: dict, phases: list[dict], return_frames: list[int],
                     P: dict = PARAMS) -> dict:
    """The gate and the 8 answers read off a region-change curve. The curve is normalised by the largest change the
    video shows for this event (its changed look), so one set of thresholds serves a tower, a wall and a lamp;
    None where the region was not observable."""
    v = next((p for p in phases if p["name"] == "V"), None)
    v_end = (v["frames"][1] - 1) if v else 0
    n = len(curve)
    finite = np.sort(curve[np.isfinite(curve)])
    top = float(np.median(finite[-5:])) if len(finite) else 0.0  # the changed look, robust to a stray frame
    if top < P["dyn_noise"]:  # the event never visibly changes anywhere in the video
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
    jump = bool(len(steps) and np.max(np.abs(steps)) > P["dyn_jump"])
    first = rets[0] if rets else None
    gate = None if r_v is None or r_0 is None else bool(r_v - r_0 > P["dyn_start"])
    known = [x for x in rets if x is not None]
    gap = item.get("gap")
    if gap:  # the frozen question asks about the out-of-view interval: the last view before vs the first after
        r_leave, r_enter = _seen_near(r, int(gap[0]), -1), _seen_near(r, int(gap[1]), +1)
        q2 = None if r_leave is None or r_enter is None else bool(r_enter - r_leave > P["dyn_progress"])
    else:
        r_leave = r_enter = None
        q2 = None if first is None or r_v is None else bool(first - r_v > P["dyn_progress"])  # changed further since V
    ans = [
        None if first is None else bool(first > 0.3),  # changed at the first return
        q2,
        None if first is None else bool(first < P["dyn_progress"]),  # back to its first look (reset)
        # a later return less changed than an earlier one: with a single return there is none (no)
        bool(any(b < a - P["dyn_progress"] for a, b in zip(known[:-1], known[1:]))) if len(known) >= 2
        else (False if len(rets) < 2 else None),
        None if r_last is None else bool(r_last > 0.3),  # still changed at the end
        None if r_last is None or not known else bool(r_last > 0.7 and abs(r_last - known[-1]) < P["dyn_progress"]),
        not jump,  # gradual
        None,  # anything else changed: from the rest of the view (dynamic_scores)
    ]
    return {"gate": gate, "answers": ans, "curve_at": {"max_change": top, "v_end": r_v, "returns": rets,
                                                       "last": r_last, "leave": r_leave, "enter": r_enter}}


def _seen_near(curve: np.ndarray, frame: int, direction: int, reach: int = 8, window: int = 2) -> float | None:
    """The curve at the first frame from ``frame`` (going ``direction``, at most ``reach`` frames) where it was
    measured: the median over ``window`` frames further the same way, never across the gap."""
    n = len(curve)
    for d in range(reach + 1):
        f = frame + direction * d
        if not 0 <= f < n:
            return None
        if np.isfinite(curve[f]):
            a, b = sorted((f, f + direction * window))
            v = curve[max(0, a):min(n, b + 1)]
            v = v[np.isfinite(v)]
            return float(np.median(v))
    return None


#: the paper's four aspects (two questions each), in checklist order
ASPECTS = ("return_progress", "persistence", "final_state", "causal")
ASPECT_METRIC = {a: f"dynamic_{a}" for a in ASPECTS}
JUDGE_METRICS = ("dynamic_score", "dynamic_p_start", "dynamic_conditional") + tuple(ASPECT_METRIC.values())
PROBE_METRICS = ("dynamic_probe_score", "dynamic_probe_p_start", "dynamic_probe_conditional")


def question_aspects(item: dict) -> list[str]:
    """Each question's aspect: its ``category`` where it names one of ASPECTS, else by position (two per aspect, in
    checklist order: questions 1-2 return progress, 3-4 persistence/reset, 5-6 final state, 7-8 causal/physical)."""
    out = []
    for k, q in enumerate(item["questions"]):
        c = str(q.get("category", ""))
        out.append(c if c in ASPECTS else ASPECTS[min(k // 2, len(ASPECTS) - 1)])
    return out


def score_items(gate: bool | None, answers: list[bool | None], item: dict, asked: bool = True) -> dict:
    """Gated protocol (the paper's dynamic memory): the gate is open only on a clear "yes" to the event-start
    question; closed (a "no", or an answer that cannot be parsed) -> all 8 score 0. Gate open -> 1 per answer that
    matches the frozen reference, 0 otherwise: a wrong, unparsed or unanswerable answer (None) scores 0, so 7 right +
    1 unparsed is 0.875. Overall = mean of the 8 gated scores; each aspect = mean of its two. ``unparsed`` counts the
    answers that could not be read (the gate's included); ``asked``: whether the 8 questions were put at all."""
    refs = [q["answer"] for q in item["questions"]]
    answers = list(answers) + [None] * (len(refs) - len(answers))
    unparsed = int(gate is None) + (sum(a is None for a in answers[:len(refs)]) if asked else 0)
    per = [float(gate is True and a is not None and a == r) for a, r in zip(answers, refs)]
    asp = question_aspects(item)
    sub = {a: float(np.mean([p for p, x in zip(per, asp) if x == a])) for a in ASPECTS if a in asp}
    return {"gate": gate, "per_question": per, "overall": float(np.mean(per)) if per else 0.0, "aspects": sub,
            "unparsed": unparsed}


def _aggregate(results: list[dict], label: dict, ids: tuple[str, ...], aspects: bool) -> dict:
    """A record's dynamic scores from its items' gated results: overall, p_start (gate open on a clear yes), the
    conditional score (items whose gate opened) and, for the judge, the four aspect scores."""
    overall, score_id, p_id, cond_id = [r["overall"] for r in results], ids[0], ids[1], ids[2]
    opened = [r for r in results if r["gate"] is True]
    out = {score_id: Score(float(np.mean(overall)), detail={**label, "items": results}),
           p_id: Score(float(np.mean([r["gate"] is True for r in results])), detail=label),
           cond_id: Score(float(np.mean([r["overall"] for r in opened])), detail=label) if opened
           else na("no item's event visibly started (the gate is closed on every item)")}
    if aspects:
        for a, mid in ASPECT_METRIC.items():
            v = [r["aspects"][a] for r in results if a in r["aspects"]]
            out[mid] = Score(float(np.mean(v)), detail=label) if v else na(f"no {a} question in this record's items")
    return out


def dynamic_scores(feat: dict, rec: dict, folder: Path | None, P: dict) -> dict:
    """Dynamic memory of one record: the VLM judge's gated checklist (the paper's protocol: ``dynamic_score``,
    ``dynamic_p_start``, ``dynamic_conditional`` and the four aspects), when ``evaluate --judge HF_ID`` ran it, and
    the measured state probe (``dynamic_probe_*``, Engine records, classical backend): a proxy, never mixed in."""
    dyn = load_dynamic(folder) if folder is not None else None
    if not dyn or not dyn.get("events"):
        r = "no dynamic-memory items in this record (dynamic.json: events with frozen questions)"
        return {m: na(r) for m in JUDGE_METRICS + PROBE_METRICS}
    out = judge_scores(feat.get("judge"), dyn)
    out.update(probe_scores(feat, rec, dyn, P))
    return out


def judge_scores(J: dict | None, dyn: dict) -> dict:
    """The VLM judge's scores from its cached answers (``JudgeExtractor``), through ``score_items``."""
    if J is None:
        r = ("needs a VLM judge: evaluate --judge HF_ID or --judge openai:MODEL@BASE_URL (the paper's protocol; "
             "the measured probe is reported separately as dynamic_probe_*, a proxy)")
        return {m: na(r) for m in JUDGE_METRICS}
    gates, answers, raw = J["gate"], J["answers"], J["raw"]
    if len(gates) != len(dyn["events"]):
        r = f"the judge answered {len(gates)} items but dynamic.json has {len(dyn['events'])}"
        return {m: na(r) for m in JUDGE_METRICS}
    results = []
    for k, item in enumerate(dyn["events"]):
        g = _tri(gates[k])
        ans = [_tri(a) for a in answers[k][:len(item["questions"])]]
        results.append({**score_items(g, ans, item), "name": item["name"], "answers": ans, "raw": str(raw[k])})
    label = {"judge": "vlm", "model": str(J["model"]), "frames": [int(f) for f in J["frames"]]}
    return _aggregate(results, label, JUDGE_METRICS, aspects=True)


def _tri(v) -> bool | None:
    v = int(v)
    return None if v < 0 else bool(v)


def probe_scores(feat: dict, rec: dict, dyn: dict, P: dict) -> dict:
    """The measured state probe's answers (``EventExtractor``), scored by the same gated rule: a proxy."""
    E = feat.get("events")
    if E is None or E["change"].size == 0:
        r = "the events feature was not computed (the measured probe runs under --backend classical)"
        return {m: na(r) for m in PROBE_METRICS}
    revs = revisit_frames(feat, rec)
    ret_frames = [r["frame"] for r in revs]
    other = _other_change(E, dyn, ret_frames, P)
    rest = E.get("rest")
    ok = np.isfinite(rest) & (rest < P["dyn_registered"]) if rest is not None and len(rest) else None
    results = []
    for item, curve in zip(dyn["events"], E["change"]):
        if ok is not None and len(ok) == len(curve):  # only views that register onto the start view count
            curve = np.where(ok, curve, np.nan)
        m = measured_answers(curve, item, dyn["phases"], ret_frames, P)
        m["answers"][7] = other
        results.append({**score_items(m["gate"], m["answers"], item), "name": item["name"], "answers": m["answers"],
                        "curve_at": m["curve_at"]})
    return _aggregate(results, {"judge": "measured (proxy)"}, PROBE_METRICS, aspects=False)


def _other_change(E, dyn, ret_frames, P: dict) -> bool | None:
    """Did the starting view change elsewhere than in the event regions? The registered residual of the rest of
    the view at the first return, against the same residual during the initial hold (compression noise)."""
    rest = E.get("rest")
    if rest is None or not len(rest) or not ret_frames:
        return None
    v = next((p for p in dyn["phases"] if p["name"] == "V"), None)
    base = _at(rest, (v["frames"][1] - 1) if v else 1, 1)
    at = _at(rest, ret_frames[0])
    return None if base is None or at is None else bool(at - base > P["dyn_other"])


# ---------------------------------------------------------------------------------------------------- vlm judge
#: the checklist prompt, one per item (the paper's Appendix D template is not in the text given to the project: this
#: is worldgate's wording of its protocol, docs/worldmembench.md)
def prompt_template() -> str:
    """The judge's one prompt per item (prompts/worldmembench/dynamic_memory.txt): frames, phase ranges, the gate and
    the eight questions, with the answer format parse_checklist reads."""
    return (Path(prompts.__file__).resolve().parent / "worldmembench" / "dynamic_memory.txt").read_text()


def phase_ranges(phases: list[dict]) -> str:
    return "; ".join(f"{p['name']} = frames {p['frames'][0]}-{max(p['frames'][0], p['frames'][1] - 1)}"
                     for p in phases)


def build_prompt(item: dict, phases: list[dict], frames: list[int], fps: float) -> str:
    """One item's single prompt: the frames' indices, the planned phase ranges, the event-start question (the gate)
    and the eight checklist questions, with the answer format ``parse_checklist`` reads."""
    qs = "\n".join(f"Q{k + 1}: {q['text']}" for k, q in enumerate(item["questions"]))
    fmt = "\n".join(["START: yes or no"] + [f"Q{k + 1}: yes or no" for k in range(len(item["questions"]))])
    return prompt_template().format(n_images=len(frames), frames=", ".join(map(str, frames)), fps=f"{fps:g}",
                                    phases=phase_ranges(phases), gate=item["gate"]["text"], questions=qs,
                                    n_lines=len(item["questions"]) + 1, answer_format=fmt)


_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_LINE = re.compile(r"^[\s*#>-]*(START|Q\s*[1-9])\s*[:.)\-]\s*(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_checklist(text: str | None, n_questions: int = 8) -> tuple[bool | None, list[bool | None]]:
    """The gate and the answers of one checklist reply: per label (``START``, ``Q1`` .. ``Qn``) the yes/no its line
    starts with (``parse_yes_no``), outside any ``<think>`` block. A label that is missing, whose answer cannot be
    read, or that is answered twice differently is None (unparsed: it scores 0)."""
    if text is None:
        return None, [None] * n_questions
    body = _THINK.sub("", str(text))
    got: dict[str, set] = {}
    for lab, rest in _LINE.findall(body):
        key = re.sub(r"\s", "", lab).upper()
        got.setdefault(key, set()).add(parse_yes_no(rest))

    def one(key):
        v = got.get(key, set())
        return next(iter(v)) if len(v) == 1 else None

    return one("START"), [one(f"Q{k + 1}") for k in range(n_questions)]


class VLMJudge(TransformersJudge):
    """A transformers VLM (``worldgate.evaluate.judges.TransformersJudge``) that also answers a record's checklist
    items in one call (``judge_record``)."""

    def judge_record(self, frames_all: list[np.ndarray], dyn: dict, fps: float) -> list[dict]:
        """Every item of a record, one prompt each: the frames at stride 8 (first and last), gate and 8 answers."""
        idx = sampled_frames(len(frames_all))
        return self.judge_frames([frames_all[i] for i in idx], idx, dyn, fps)

    def judge_frames(self, frames: list[np.ndarray], idx: list[int], dyn: dict, fps: float) -> list[dict]:
        return judge_items(self, frames, idx, dyn, fps)


def judge_items(judge, frames: list[np.ndarray], idx: list[int], dyn: dict, fps: float) -> list[dict]:
    """Every item of a record asked of ``judge`` (any ``worldgate.evaluate.judges.Judge``: its questions go out
    together, on the judge's threads), each reply parsed and scored by the gated rule."""
    items = dyn["events"]
    prompts_ = [build_prompt(item, dyn["phases"], idx, fps) for item in items]
    ask_many = getattr(judge, "ask_many", None)  # a bare ask(frames, prompt) judge is asked in turn
    raws = ask_many([(frames, p) for p in prompts_]) if ask_many else [judge.ask(frames, p) for p in prompts_]
    out = []
    for item, raw in zip(items, raws):
        gate, answers = parse_checklist(raw, len(item["questions"]))
        out.append({**score_items(gate, answers, item), "name": item["name"], "judge": "vlm",
                    "raw": "" if raw is None else raw, "answers": answers})
    n = sum(r["unparsed"] for r in out)
    if n and hasattr(judge, "note_unparsed"):
        judge.note_unparsed(n)
    return out


load_judge = load_local  # (model id, device) -> the transformers judge, loaded once per process


class JudgeExtractor(Extractor):
    """The VLM judge as a cached feature: collects the frames at stride 8 (first and last) at their native size and,
    per dynamic item, asks the checklist prompt once; caches the raw replies, the gate and the 8 answers (1 yes, 0
    no, -1 unparsed). Keyed by the judge's model id (``judge@V-<id>``), so another judge is another feature and
    ``--rescore`` re-scores cached replies. Its ``backend`` is the run's: the judge is the same model under both."""

    name = "judge"
    version = "1"
    max_side = None

    def __init__(self, model_id: str, backend: str = "classical", device: str | None = None, judge=None):
        self.model_id, self.backend, self.device, self._judge = model_id, backend, device, judge

    def key(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "--", self.model_id)
        if len(slug) > 96:  # a long spec (openai:MODEL@URL): bounded, still one key per judge
            slug = f"{slug[:72]}-{hashlib.sha256(self.model_id.encode()).hexdigest()[:16]}"
        return f"{self.name}@{self.version}-{slug}"

    def config(self) -> dict:
        return {**super().config(), "model": self.model_id, "max_new_tokens": MAX_TOKENS, "stride": STRIDE}

    def start(self, rec):
        super().start(rec)
        self.dyn = load_dynamic(rec.dir)
        self.idx = set(sampled_frames(rec.n_frames)) if rec.n_frames else set()
        self.frames: dict[int, np.ndarray] = {}
        self.last = (-1, None)

    def needs_frame(self, i):
        return bool(self.dyn and self.dyn.get("events"))

    def update(self, i, frame):
        if frame is None:
            return
        if i in self.idx:
            self.frames[i] = frame
        self.last = (i, frame)  # the last frame is always judged, whatever meta.json says the count is

    def finish(self):
        items = (self.dyn or {}).get("events") or []
        if self.last[0] >= 0:
            self.frames[self.last[0]] = self.last[1]
        idx = sorted(i for i in self.frames if i <= self.last[0])
        base = {"model": np.asarray(self.model_id), "frames": np.asarray(idx, np.int32)}
        if not items or not idx:
            return {**base, "gate": np.zeros(0, np.int8), "answers": np.zeros((0, 8), np.int8),
                    "raw": np.zeros(0, "U1")}
        judge = self._judge or open_judge(self.model_id, None, self.device, check=False)
        res = judge_items(judge, [self.frames[i] for i in idx], idx, self.dyn, float(self.rec.fps))
        n = max(len(it["questions"]) for it in items)

        def code(v):
            return -1 if v is None else int(bool(v))

        ans = np.full((len(res), n), -1, np.int8)
        for k, r in enumerate(res):
            ans[k, :len(r["answers"])] = [code(a) for a in r["answers"]]
        return {**base, "gate": np.asarray([code(r["gate"]) for r in res], np.int8), "answers": ans,
                "raw": np.asarray([r["raw"] for r in res])}


def judge_extractors(judge, backend: str, device: str | None = None, check: bool = True) -> list[Extractor]:
    """What ``evaluate --judge SPEC`` adds to a run's extractors (the runner asks each benchmark for its own):
    ``judge`` is the run's :class:`worldgate.evaluate.judges.CachedJudge` (or a spec, opened here); ``check``: a
    transformers judge must be on this machine (not needed for ``--rescore``, which reads cached replies)."""
    if not isinstance(judge, CachedJudge):
        judge = open_judge(str(judge), None, device, check=check)
    elif check and judge.spec["backend"] == "transformers":
        check_judge(judge.spec["model"])
    return [JudgeExtractor(judge.id, backend=backend, device=device, judge=judge)]
