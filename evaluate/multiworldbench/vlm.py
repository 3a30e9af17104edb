"""The VLM path of MultiWorldBench's binary judgments: the questions, their prompts and how answers count.

The judge is any :class:`worldgate.evaluate.judges.Judge` (``evaluate --judge SPEC``: a transformers VLM or an
OpenAI-compatible server, answers cached on disk). An answer that cannot be read as yes/no makes the capability
unavailable for that case, excluded from the mean with its coverage (paper §4.1, stated for cross-view motion and
applied to every judged capability here), never guessed; so does a judge that gives no answer (server down, an
uncached answer under --rescore), with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldgate import prompts

from ..judges import Judge, JudgeError, parse_yes_no
from ..score import Score
from .pixels import QUESTIONS, majority, expected_scene
from .protocol import VIEWS, path_na, path_score


# ------------------------------------------------------------------------------------------------------ judge
class NoJudge(Judge):
    name = "none"
    available = False
    reason = ("no VLM judge backend configured: evaluate --judge HF_ID or --judge openai:MODEL@BASE_URL (docs/judges.md; "
              "the questions are in prompts/multiworldbench/*.txt)")


class Unparsed(Exception):
    """A VLM answer that is neither yes nor no."""


def _ask(judge, prompt: str, frames: list[np.ndarray]) -> bool:
    return _ask_all(judge, [(prompt, frames)])[0]


def _ask_all(judge, questions: list[tuple[str, list[np.ndarray]]]) -> list[bool]:
    """Independent questions asked together (on the judge's threads where it has them), each answer read as yes/no;
    the first unreadable one raises :class:`Unparsed`."""
    ask_many = getattr(judge, "ask_many", None)
    if ask_many is not None:
        texts = ask_many([(list(f), p) for p, f in questions])
    else:
        texts = [judge.ask(list(f), p) for p, f in questions]
    out = [parse_yes_no(t) for t in texts]
    bad = [p for (p, _), a in zip(questions, out) if a is None]
    if bad:
        if hasattr(judge, "note_unparsed"):
            judge.note_unparsed(len(bad))
        raise Unparsed(" ".join(bad[0].split())[-160:])
    return out


def _judge_name(judge) -> str:
    return str(getattr(judge, "model_id", None) or getattr(judge, "name", None) or type(judge).__name__)


def load_prompt(name: str, **fields) -> str:
    """A MultiWorldBench judge prompt by name (``prompts/multiworldbench/<name>.txt``), with ``{field}`` s filled in."""
    path = Path(prompts.__file__).resolve().parent / "multiworldbench" / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"no MultiWorldBench prompt {name!r} (expected {path})")
    text = path.read_text()
    return text.format(**fields) if fields else text


# ------------------------------------------------------------------------------------------------------ vlm path
def _kf(feats, v, f):
    kf = feats[v]["keyframes"]
    return kf["frames"][list(kf["index"]).index(f)]


def _judge_or_na(judge, cap):
    if not getattr(judge, "available", True):
        return path_na(judge.reason, "vlm")
    return None


def _vlm(fn):
    """A VLM capability: unavailable (with the reason) without a judge or on an unparseable answer."""
    def wrapped(tv, judge, *a):
        s = _judge_or_na(judge, fn.__name__)
        if s:
            return s
        try:
            return fn(tv, judge, *a)
        except JudgeError as e:  # no answer came back: unavailable with the reason, never a score
            return path_na(f"the VLM judge gave no answer: {e}", "vlm")
        except Unparsed as e:
            out = path_na(f"the VLM judge's answer could not be parsed as yes/no (counted, never guessed): {e}", "vlm")
            out.detail["unparsed"] = 1
            return out
    wrapped.__name__ = fn.__name__
    return wrapped


@_vlm
def vlm_cross_view(tv, judge, feats, c, f0, f1) -> Score:
    colours = {"A": "orange", "B": "magenta"}
    obs, act = _ask_all(judge, [
        (load_prompt("cross_view_motion_observer", actor=c["actor"], colour=colours[c["actor"]], key=c["key"]),
         [_kf(feats, c["observer"], f0), _kf(feats, c["observer"], f1)]),
        (load_prompt("cross_view_motion_actor", key=c["key"]), [_kf(feats, c["actor"], f0), _kf(feats, c["actor"], f1)])])
    return path_score(100.0 * obs * act, "vlm", q_observer=obs, q_actor=act, judge=_judge_name(judge))


def _state_questions(c, tv, f):
    state, _ = expected_scene(tv, "A", f, only_cells=True)
    i, k = c["column"]
    exp = []
    while (i, len(exp), k) in state:
        exp.append(state[(i, len(exp), k)])
    return exp


@_vlm
def vlm_state(tv, judge, feats, c, frames) -> Score:
    exp = _state_questions(c, tv, frames[-1])
    qs = [(q, load_prompt(f"state_{q}", op=c["op"], count=len(exp), materials=", ".join(exp) or "none"), v)
          for q in QUESTIONS[c["op"]] for v in VIEWS]
    ans = _ask_all(judge, [(p, [_kf(feats, v, frames[-1])]) for _, p, v in qs])
    both = {q: all(a for (q2, _, _), a in zip(qs, ans) if q2 == q) for q in QUESTIONS[c["op"]]}
    return path_score(100.0 * np.mean(list(both.values())), "vlm", both=both, judge=_judge_name(judge))


@_vlm
def vlm_persistence(tv, judge, feats, c, frames) -> Score:
    exp = _state_questions(c, tv, frames[-1])
    prompt = load_prompt("persistence", op=c["op"], count=len(exp), materials=", ".join(exp) or "none")
    roles = ("operator", "observer")
    q = dict(zip(roles, _ask_all(judge, [(prompt, [_kf(feats, c[r], frames[-1])]) for r in roles])))
    return path_score(100.0 * q["operator"] * q["observer"], "vlm", q_operator=q["operator"], q_observer=q["observer"],
                  judge=_judge_name(judge))


@_vlm
def vlm_race(tv, judge, feats, c, frames) -> Score:
    prompt = load_prompt("race")
    ok = sum(_ask_all(judge, [(prompt, [_kf(feats, "A", f), _kf(feats, "B", f)]) for f in frames]))
    return path_score(100.0 * (ok >= 2), "vlm", consistent_frames=ok, judge=_judge_name(judge))


@_vlm
def vlm_structure(tv, judge, feats, c, frames) -> Score:
    cells = tv.spec["world"].get("structure", [])
    prompt = load_prompt("structure", n_blocks=len(cells), materials=", ".join(sorted({x[3] for x in cells})))
    ans = _ask_all(judge, [(prompt, [_kf(feats, v, f)]) for v in VIEWS for f in frames])
    views = {v: majority(ans[k * len(frames):(k + 1) * len(frames)]) for k, v in enumerate(VIEWS)}
    return path_score(100.0 * min(views.values()), "vlm", views=views, judge=_judge_name(judge))


@_vlm
def vlm_id(tv, judge, c, im0, im1) -> Score:
    same = _ask(judge, load_prompt("id_consistency", gap=c["gap_frames"]), [im0, im1])
    return path_score(100.0 * same, "vlm", judge=_judge_name(judge))
