"""WorldMemBench dynamic memory: answer parsing, the judge's frame sampling, the gated protocol, the measured state
probe on synthetic curves, and Engine GT vs an Engine whose events restart when unseen."""

import json

import numpy as np
import pytest

from worldgate.evaluate.judge import build_prompt, measured_answers, parse_yes_no, sampled_frames, score_items
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.runner import run_generate
from worldgate.trajectories.suites import load_suite


@pytest.mark.parametrize("text,want", [("Yes", True), (" yes.", True), ("No, it did not", False), ("TRUE", True),
                                       ("0", False), ("The answer is yes", True), ("Answer: no", False),
                                       ("yes or no", None), ("", None), ("maybe", None), (None, None),
                                       ("nuserframes yes", None)])
def test_parse_yes_no(text, want):
    assert parse_yes_no(text) is want


def test_sampled_frames_keep_first_and_last():
    assert sampled_frames(20) == [0, 8, 16, 19]
    assert sampled_frames(17) == [0, 8, 16]
    assert sampled_frames(0) == []


ITEM = {"questions": [{"answer": a} for a in (True, True, False, False, True, True, True, False)]}


def test_gate_closed_scores_zero_and_unparsed_is_counted():
    s = score_items(False, [True] * 8, ITEM)
    assert s["overall"] == 0.0 and s["per_question"] == [0.0] * 8
    s = score_items(False, [None] * 8, ITEM, asked=False)  # a clean "no" gate: nothing else was asked
    assert s["unparsed"] == 0 and s["overall"] == 0.0
    s = score_items(None, [None] * 8, ITEM, asked=False)  # the gate answer itself could not be parsed
    assert s["overall"] is None and s["unparsed"] == 1
    s = score_items(True, [True, True, False, None, True, False, True, False], ITEM)
    assert s["unparsed"] == 1 and s["per_question"][3] is None
    assert s["overall"] == pytest.approx(6 / 7)  # 7 answered, 6 match the frozen references


PHASES = [{"name": "V", "frames": [0, 32]}, {"name": "D1", "frames": [32, 90]}, {"name": "R1", "frames": [90, 148]},
          {"name": "H", "frames": [148, 164]}]


def _curve(kind):
    t = np.arange(164) / 16.0
    p = np.clip((t - 0.5) / 8.0, 0, 1)  # an event from 0.5 s to 8.5 s
    if kind == "reset":  # restarted when it came back into view at frame 120
        p = np.where(np.arange(164) >= 120, np.clip((t - 7.5) / 8.0, 0, 1), p)
    c = 0.3 * p
    c[45:120] = np.nan  # out of view while away
    return c


def test_measured_probe_reads_progress_and_reset():
    gt = measured_answers(_curve("gt"), ITEM, PHASES, [147])
    assert gt["gate"] is True
    assert gt["answers"][:3] == [True, True, False] and gt["answers"][4:7] == [True, True, True]
    rs = measured_answers(_curve("reset"), ITEM, PHASES, [147])
    assert rs["answers"][1] is False  # no further along at the return than at the end of the hold
    g, r = score_items(gt["gate"], gt["answers"], ITEM), score_items(rs["gate"], rs["answers"], ITEM)
    assert g["overall"] == 1.0 and r["overall"] <= g["overall"] - 2 / 7


def test_prompt_carries_phases_and_question():
    p = build_prompt("Is it blue?", PHASES, [0, 8, 163], 16.0)
    assert "V = frames 0-31" in p and "Question: Is it blue?" in p and "3 frames" in p


def test_engine_gt_beats_events_that_restart_when_unseen(tmp_path):
    cases = [c.to_dict() for c in load_suite("worldmembench-engine") if c.id in ("dynamic-LR-00", "dynamic-LRUD-00")]
    m = tmp_path / "cases.jsonl"
    m.write_text("".join(json.dumps(c) + "\n" for c in cases))
    res = {}
    for model in ("engine", "engine-reset"):
        assert run_generate(model, str(m), tmp_path / model, overrides=["model.width=160", "model.height=160"],
                            progress=False).exit_code == 0
        res[model] = evaluate_run(tmp_path / model, progress=False)["metrics"]
    gt, rs = res["engine"], res["engine-reset"]
    assert gt["dynamic_p_start"]["mean"] == 1.0  # every event visibly starts during the initial hold
    assert gt["dynamic_score"]["mean"] > 0.7
    assert rs["dynamic_score"]["mean"] < gt["dynamic_score"]["mean"] - 0.15
    rec = json.loads((tmp_path / "engine" / "dynamic-LR-00" / "dynamic.json").read_text())
    assert len(rec["events"][0]["questions"]) == 8 and rec["events"][0]["gate"]["answer"] is True
