"""WorldMemBench dynamic memory: answer parsing, the judge's frame sampling, the gated protocol, the measured state
probe on synthetic curves, and Engine GT vs an Engine whose events restart when unseen."""

import json

import numpy as np
import pytest

from worldgate.evaluate.worldmembench.dynamic import (build_prompt, measured_answers, parse_checklist, parse_yes_no,
                                                      sampled_frames, score_items)
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.runner import run_generate

from suite_cases import suite_case_manifest


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


def test_gated_rule_scores_every_mismatch_zero_unparsed_included():
    s = score_items(False, [True] * 8, ITEM)
    assert s["overall"] == 0.0 and s["per_question"] == [0.0] * 8
    s = score_items(False, [None] * 8, ITEM, asked=False)  # a clean "no" gate: nothing else was asked
    assert s["unparsed"] == 0 and s["overall"] == 0.0
    s = score_items(None, [True, True, False, False, True, True, True, False], ITEM)  # unreadable gate: closed
    assert s["overall"] == 0.0 and s["unparsed"] == 1 and s["gate"] is None
    right = [q["answer"] for q in ITEM["questions"]]
    s = score_items(True, right[:3] + [None] + right[4:], ITEM)  # 7 right + 1 unparsed (the paper's 0.875)
    assert s["unparsed"] == 1 and s["per_question"][3] == 0.0 and s["overall"] == 0.875
    assert s["aspects"] == {"return_progress": 1.0, "persistence": 0.5, "final_state": 1.0, "causal": 1.0}
    s = score_items(True, right[:6] + [not right[6], right[7]], ITEM)  # one wrong causal answer
    assert s["overall"] == 0.875 and s["aspects"]["causal"] == 0.5 and s["unparsed"] == 0


def test_parse_checklist_reads_gate_and_eight_labelled_answers():
    text = "<think>Q1: no, wait</think>START: yes\nQ1: Yes\nQ2: no.\n**Q3:** no\nQ4 - no\nQ5: yes, still red\nQ6) yes\nQ7: yes"
    gate, ans = parse_checklist(text)
    assert gate is True and ans == [True, False, False, False, True, True, True, None]  # Q8 missing: unparsed
    gate, ans = parse_checklist("START: no\nQ1: yes\nQ1: no")  # a label answered both ways is unparsed
    assert gate is False and ans[0] is None
    assert parse_checklist("I cannot tell.") == (None, [None] * 8) and parse_checklist(None) == (None, [None] * 8)


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
    assert gt["answers"][3] is False  # a single return: no later return can be less changed
    gt["answers"][7] = rs["answers"][7] = False  # "anything else changed" comes from the rest of the view
    g, r = score_items(gt["gate"], gt["answers"], ITEM), score_items(rs["gate"], rs["answers"], ITEM)
    assert g["overall"] == 1.0 and r["overall"] <= g["overall"] - 2 / 8


def test_one_prompt_per_item_carries_phases_gate_and_all_questions():
    item = {"gate": {"text": "Does it start?"}, "questions": [{"text": f"Is it {k}?"} for k in range(8)]}
    p = build_prompt(item, PHASES, [0, 8, 163], 16.0)
    assert "V = frames 0-31" in p and "H = frames 148-163" in p and "3 frames" in p and "0, 8, 163" in p
    assert "START: Does it start?" in p and all(f"Q{k + 1}: Is it {k}?" in p for k in range(8))
    assert p.index("START: Does it start?") < p.index("Q1: Is it 0?") and "exactly 9 lines" in p


def test_engine_gt_beats_events_that_restart_when_unseen(tmp_path):
    m = suite_case_manifest(tmp_path, "dynamic-LR-00", "dynamic-LRUD-00")
    res = {}
    for model in ("engine", "engine-reset", "engine-freeze"):
        assert run_generate(model, str(m), tmp_path / model, overrides=["model.width=160", "model.height=160"],
                            progress=False).exit_code == 0
        res[model] = evaluate_run(tmp_path / model, progress=False)["metrics"]
    gt, rs, fz = res["engine"], res["engine-reset"], res["engine-freeze"]
    assert gt["dynamic_probe_p_start"]["mean"] == 1.0  # every event visibly starts during the initial hold
    # 0.9375: each case's vanish item gets the out-of-view question wrong (its visible change while unseen, 13-14 %
    # of the full change, is under dyn_progress), and under the paper's rule that miss now scores 0 in the mean of 8
    assert gt["dynamic_probe_score"]["mean"] >= 0.93
    assert rs["dynamic_probe_score"]["mean"] < gt["dynamic_probe_score"]["mean"] - 0.15
    # an event that pauses while out of view gets the out-of-view question wrong (1 of 8 per item)
    assert fz["dynamic_probe_score"]["mean"] <= gt["dynamic_probe_score"]["mean"] - 0.06
    # without --judge the paper's (VLM) dynamic memory is unavailable and says how to get it, never the probe's number
    assert gt["dynamic_score"]["mean"] is None and any("--judge" in r for r in gt["dynamic_score"]["unavailable"])
    rec = json.loads((tmp_path / "engine" / "dynamic-LR-00" / "dynamic.json").read_text())
    ev = rec["events"][0]
    assert len(ev["questions"]) == 8 and ev["gate"]["answer"] is True
    leave, enter = ev["gap"]  # the commanded camera loses the target after the hold and finds it on the way back
    v_end = next(p["frames"][1] for p in rec["phases"] if p["name"] == "V")
    r1 = next(p["frames"] for p in rec["phases"] if p["name"] == "R1")
    assert v_end <= leave < enter <= r1[1] and "out of view" in ev["questions"][1]["text"] or \
        "turned away" in ev["questions"][1]["text"]


def test_target_visibility_follows_the_commanded_yaw():
    from scipy.spatial.transform import Rotation

    from worldgate.adapters.engine.adapter import first_gap, target_visibility

    H = W = 64
    k = (40.0, 40.0, 31.5, 31.5)  # hfov = 2 atan(32 / 40) = 77 degrees
    mask = np.zeros((H, W), bool)
    mask[28:36, 28:36] = True  # a target straight ahead, 10 m away
    depth0 = np.full((H, W), 10.0)
    yaw = np.r_[np.zeros(5), np.linspace(0, -90, 31), np.linspace(-90, 0, 31)]
    c2w = np.repeat(np.eye(4)[None], len(yaw), axis=0)
    c2w[:, :3, :3] = Rotation.from_euler("y", yaw[:, None], degrees=True).as_matrix()
    vis = target_visibility(mask, depth0, c2w, k)
    assert vis[:5].tolist() == [1.0] * 5 and vis.min() == 0.0
    half = np.degrees(np.arctan(32 / 40))  # leaves the view once turned past half the horizontal FOV
    assert np.all(vis[np.abs(yaw) < half - 4] == 1.0) and np.all(vis[np.abs(yaw) > half + 4] == 0.0)
    leave, enter = first_gap(vis, 5)
    # in view while at least half of it is: until its centre crosses the frame edge (its half width is ~6 degrees)
    assert abs(abs(yaw[leave]) - half) < 4 and abs(abs(yaw[enter]) - half) < 4 and 5 < leave < 36 < enter
    assert first_gap(np.ones(10), 0) is None


def test_measured_probe_reads_the_out_of_view_interval():
    item = dict(ITEM, gap=[60, 120])
    n = 164
    t = np.arange(n, dtype=float)
    running = np.clip((t - 10) / 140, 0, 1)  # keeps going while unseen
    paused = np.where(t < 60, running, np.where(t < 120, running[60], np.clip(running[60] + (t - 120) / 140, 0, 1)))
    for curve in (running, paused):
        curve[61:120] = np.nan  # out of view
    on = measured_answers(running * 0.3, item, PHASES, [147])
    off = measured_answers(paused * 0.3, item, PHASES, [147])
    assert on["answers"][1] is True and off["answers"][1] is False
    assert on["curve_at"]["enter"] - on["curve_at"]["leave"] > 0.3
