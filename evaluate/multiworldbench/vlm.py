"""The VLM path of MultiWorldBench's binary judgments: the judge interface, its prompts and the questions."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldgate import prompts

from ..score import Score
from ..worldmembench.dynamic import parse_yes_no
from .pixels import QUESTIONS, _majority, expected_scene
from .protocol import VIEWS, _na, _score


# ------------------------------------------------------------------------------------------------------ judge
class Judge:
    """The VLM judge interface of the binary judgments: ``ask(frames, prompt) -> str`` (the answer text), as
    :class:`worldgate.evaluate.worldmembench.dynamic.VLMJudge` (a transformers VLM loaded by HF id) implements it. Answers are parsed
    with :func:`worldgate.evaluate.worldmembench.dynamic.parse_yes_no`; an unparseable answer leaves the case unavailable (counted),
    never guessed."""

    name = "vlm"
    available = True
    reason = ""

    def ask(self, frames: list[np.ndarray], prompt: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError


class NoJudge(Judge):
    name = "none"
    available = False
    reason = ("no VLM judge backend configured (pass judge=worldgate.evaluate.worldmembench.dynamic.VLMJudge(model_id) to "
              "worldgate.evaluate.multiworldbench.scoring.score_folder; the questions are in prompts/multiworldbench/*.txt)")


class Unparsed(Exception):
    """A VLM answer that is neither yes nor no."""


def _ask(judge, prompt: str, frames: list[np.ndarray]) -> bool:
    ans = parse_yes_no(judge.ask(list(frames), prompt))
    if ans is None:
        raise Unparsed(" ".join(prompt.split())[-160:])
    return ans


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
        return _na(judge.reason, "vlm")
    return None


def _vlm(fn):
    """A VLM capability: unavailable (with the reason) without a judge or on an unparseable answer."""
    def wrapped(tv, judge, *a):
        s = _judge_or_na(judge, fn.__name__)
        if s:
            return s
        try:
            return fn(tv, judge, *a)
        except Unparsed as e:
            out = _na(f"the VLM judge's answer could not be parsed as yes/no (counted, never guessed): {e}", "vlm")
            out.detail["unparsed"] = 1
            return out
    wrapped.__name__ = fn.__name__
    return wrapped


@_vlm
def vlm_cross_view(tv, judge, feats, c, f0, f1) -> Score:
    colours = {"A": "orange", "B": "magenta"}
    obs = _ask(judge, load_prompt("cross_view_motion_observer", actor=c["actor"], colour=colours[c["actor"]],
                                  key=c["key"]), [_kf(feats, c["observer"], f0), _kf(feats, c["observer"], f1)])
    act = _ask(judge, load_prompt("cross_view_motion_actor", key=c["key"]),
               [_kf(feats, c["actor"], f0), _kf(feats, c["actor"], f1)])
    return _score(100.0 * obs * act, "vlm", q_observer=obs, q_actor=act, judge=_judge_name(judge))


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
    both = {}
    for q in QUESTIONS[c["op"]]:
        prompt = load_prompt(f"state_{q}", op=c["op"], count=len(exp), materials=", ".join(exp) or "none")
        both[q] = all([_ask(judge, prompt, [_kf(feats, v, frames[-1])]) for v in VIEWS])
    return _score(100.0 * np.mean(list(both.values())), "vlm", both=both, judge=_judge_name(judge))


@_vlm
def vlm_persistence(tv, judge, feats, c, frames) -> Score:
    exp = _state_questions(c, tv, frames[-1])
    prompt = load_prompt("persistence", op=c["op"], count=len(exp), materials=", ".join(exp) or "none")
    q = {r: _ask(judge, prompt, [_kf(feats, c[r], frames[-1])]) for r in ("operator", "observer")}
    return _score(100.0 * q["operator"] * q["observer"], "vlm", q_operator=q["operator"], q_observer=q["observer"],
                  judge=_judge_name(judge))


@_vlm
def vlm_race(tv, judge, feats, c, frames) -> Score:
    prompt = load_prompt("race")
    ok = sum(_ask(judge, prompt, [_kf(feats, "A", f), _kf(feats, "B", f)]) for f in frames)
    return _score(100.0 * (ok >= 2), "vlm", consistent_frames=ok, judge=_judge_name(judge))


@_vlm
def vlm_structure(tv, judge, feats, c, frames) -> Score:
    cells = tv.spec["world"].get("structure", [])
    prompt = load_prompt("structure", n_blocks=len(cells), materials=", ".join(sorted({x[3] for x in cells})))
    views = {v: _majority([_ask(judge, prompt, [_kf(feats, v, f)]) for f in frames]) for v in VIEWS}
    return _score(100.0 * min(views.values()), "vlm", views=views, judge=_judge_name(judge))


@_vlm
def vlm_id(tv, judge, c, im0, im1) -> Score:
    same = _ask(judge, load_prompt("id_consistency", gap=c["gap_frames"]), [im0, im1])
    return _score(100.0 * same, "vlm", judge=_judge_name(judge))
