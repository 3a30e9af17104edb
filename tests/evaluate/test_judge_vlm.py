"""The VLM judge runs its real code path offline: a tiny random Qwen2.5-VL (tokenizer trained in memory, tiny vision
and text towers) answers through ``VLMJudge.ask`` / ``judge_record``, and every number comes from ``score_items``."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from worldgate.evaluate.worldmembench import dynamic as J  # noqa: E402

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
           "<|video_pad|>"]
CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
        "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
        "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_qwen():
    """A random Qwen2.5-VL small enough for CPU, and its processor (no video processor: images only)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (PreTrainedTokenizerFast, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration,
                              Qwen2_5_VLProcessor)
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = J.prompt_template() + " user assistant yes no START Q1 Q2 Q3 Q4 Q5 Q6 Q7 Q8"
    tok.train_from_iterator([text] * 4, trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    T = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    T.chat_template = CHAT
    ids = {t: T.convert_tokens_to_ids(t) for t in SPECIAL}

    class Processor(Qwen2_5_VLProcessor):  # the stock class insists on a video processor
        def check_argument_for_proper_class(self, name, arg):
            if name == "video_processor" and arg is None:
                return None
            return super().check_argument_for_proper_class(name, arg)

    images = Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=56 * 56, patch_size=14, merge_size=2,
                                      temporal_patch_size=2)
    proc = Processor(image_processor=images, tokenizer=T, video_processor=None, chat_template=CHAT)
    cfg = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(T), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 2, 4]},
                         bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                           fullatt_block_indexes=[1]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    torch.manual_seed(0)
    return Qwen2_5_VLForConditionalGeneration(cfg), proc


@pytest.fixture(scope="module")
def qwen():
    return tiny_qwen()


def _judge(qwen, steer: str | None = None, max_new_tokens: int = 16):
    """The judge over the shared tiny model; ``steer`` biases greedy decoding toward one token (through the model's
    own generation config, so the real generate/decode path still produces the text). Tests cap the reply's length
    (the protocol's 4096 is the default, checked below)."""
    model, proc = qwen
    model.generation_config.sequence_bias = None
    if steer is not None:
        tid = proc.tokenizer.encode(steer, add_special_tokens=False)
        assert len(tid) == 1, (steer, tid)
        model.generation_config.sequence_bias = {tuple(tid): 100.0}
    return J.VLMJudge(model=model, processor=proc, max_new_tokens=max_new_tokens)


def _frames(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (56, 56, 3), dtype=np.uint8) for _ in range(n)]


PHASES = [{"name": "V", "frames": [0, 5]}, {"name": "D1", "frames": [5, 10]}, {"name": "R1", "frames": [10, 15]},
          {"name": "H", "frames": [15, 20]}]
REFS = (True, True, False, False, True, True, True, False)
ITEM = {"name": "tower", "kind": "grow", "target": 0,
        "gate": {"text": "Does the tower visibly start growing during V?", "answer": True},
        "questions": [{"text": f"Question {k}: did the tower keep growing?", "answer": a} for k, a in enumerate(REFS)]}
DYN = {"phases": PHASES, "events": [ITEM]}


def test_ask_feeds_every_frame_to_the_model_and_returns_text(qwen, monkeypatch):
    judge = _judge(qwen)
    assert J.VLMJudge(model=qwen[0], processor=qwen[1]).max_new_tokens == 4096  # the paper's max_tokens
    seen = {}
    generate = judge.model.generate

    def spy(**kw):
        seen.update(kw)
        return generate(**kw)

    monkeypatch.setattr(judge.model, "generate", spy)
    idx = [0, 8, 16]
    prompt = J.build_prompt(ITEM, PHASES, idx, 16.0)
    out = judge.ask(_frames(3), prompt)
    assert isinstance(out, str)
    grid = seen["image_grid_thw"]
    assert grid.shape == (3, 3) and seen["pixel_values"].shape[0] == int(grid.prod(-1).sum())
    n_pad = int((seen["input_ids"] == judge.model.config.image_token_id).sum())
    assert n_pad == int(grid.prod(-1).sum()) // 4  # the processor expanded one placeholder per merged patch
    text = judge.processor.tokenizer.decode(seen["input_ids"][0])
    assert "START: Does the tower visibly start growing during V?" in text and text.endswith("assistant\n")
    assert "Q8: Question 7: did the tower keep growing?" in text
    assert seen["max_new_tokens"] == judge.max_new_tokens and seen["do_sample"] is False
    # deterministic: the same frames and prompt give the same answer
    assert judge.ask(_frames(3), prompt) == out


@pytest.mark.parametrize("steer", [None, " yes"])
def test_judge_record_asks_one_prompt_per_item_and_scores_what_it_parses(qwen, monkeypatch, steer):
    """One generate per item (gate and 8 answers together); a reply without the labelled lines (a random model's,
    or " yes yes ...") is unparsed throughout: the gate is closed and the item scores 0, never dropped."""
    judge = _judge(qwen, steer)
    asked = []
    ask = judge.ask

    def ask_spy(frames, prompt):
        asked.append((len(frames), prompt, ask(frames, prompt)))
        return asked[-1][2]

    monkeypatch.setattr(judge, "ask", ask_spy)
    out = judge.judge_record(_frames(20, seed=1), DYN, fps=16.0)
    idx = J.sampled_frames(20)
    assert len(asked) == 1 and asked[0][0] == len(idx) == 4  # stride 8, first and last
    assert asked[0][1] == J.build_prompt(ITEM, PHASES, idx, 16.0) and "V = frames 0-4" in asked[0][1]
    gate, answers = J.parse_checklist(asked[0][2])
    assert (out[0]["gate"], out[0]["answers"]) == (gate, answers) and out[0]["raw"] == asked[0][2]
    assert gate is None and answers == [None] * 8  # nothing a random tiny model says has the labelled lines
    assert out[0]["overall"] == 0.0 and out[0]["per_question"] == [0.0] * 8 and out[0]["unparsed"] == 9
    if steer == " yes":
        assert asked[0][2].split() == ["yes"] * len(asked[0][2].split()) and len(asked[0][2].split()) >= 8


def _reply(prompt: str, dyn: dict, unparsed: int = 3) -> str:
    """A checklist reply to ``prompt`` that opens the gate and answers every question of its item as its frozen
    reference, except question ``unparsed`` (1-based), answered with something that is not yes or no."""
    item = next(it for it in dyn["events"] if it["gate"]["text"] in prompt)
    lines = ["START: yes"] + [f"Q{k + 1}: " + ("it is hard to say" if k + 1 == unparsed else
                                              "yes" if q["answer"] else "no") for k, q in enumerate(item["questions"])]
    return "\n".join(lines)


def test_evaluate_judge_scores_dynamic_cases_through_the_cached_feature(qwen, tmp_path, monkeypatch):
    """`evaluate --judge HF_ID` end to end on an Engine dynamic case: the runner adds the judge feature, the tiny model
    sees the record's stride-8 frames through the real generate path, and the (scripted) checklist reply that has
    7 answers right and 1 unparsed scores 0.875, with the four aspects; the reply is cached (a rescore asks
    nothing); a Dynamic-family record carries no static score."""
    from suite_cases import suite_case_manifest
    from worldgate.evaluate.runner import evaluate_run
    from worldgate.generate.runner import run_generate

    m = suite_case_manifest(tmp_path, "dynamic-LRLRLR-00")
    run = tmp_path / "engine"
    assert run_generate("engine", str(m), run, overrides=["model.width=96", "model.height=96"],
                        progress=False).exit_code == 0
    dyn = json.loads((run / "dynamic-LRLRLR-00" / "dynamic.json").read_text())
    n_items = len(dyn["events"])
    assert n_items >= 1
    judge = _judge(qwen, max_new_tokens=4)
    asked = []
    ask = judge.ask

    def scripted(frames, prompt):
        asked.append((len(frames), ask(frames, prompt)))  # the real model sees the frames; its text is replaced
        return _reply(prompt, dyn, unparsed=4)

    monkeypatch.setattr(judge, "ask", scripted)
    monkeypatch.setitem(J._JUDGES, ("tiny/judge", "cpu"), judge)
    res = evaluate_run(run, judge="tiny/judge", judge_device="cpu", progress=False)
    n = json.loads((run / "dynamic-LRLRLR-00" / "meta.json").read_text())["achieved"]["frames"]
    assert len(asked) == n_items and all(k == len(J.sampled_frames(n)) for k, _ in asked)
    M = res["metrics"]
    assert M["dynamic_score"]["mean"] == pytest.approx(0.875) and M["dynamic_p_start"]["mean"] == 1.0
    assert M["dynamic_conditional"]["mean"] == pytest.approx(0.875)
    assert M["dynamic_persistence"]["mean"] == 0.5  # question 4 (persistence) is the unparsed one
    for a in ("return_progress", "final_state", "causal"):
        assert M[f"dynamic_{a}"]["mean"] == 1.0
    assert M["dynamic_score"]["family_coverage"] == {"cases": 1, "scored": 1, "share": 1.0}
    assert res["config"]["judge"] == "tiny/judge"
    row = json.loads((run / "samples.jsonl").read_text())
    assert row["features"]["judge"] == "judge@1-tiny--judge"
    d = row["detail"]["dynamic_score"]
    assert d["judge"] == "vlm" and d["model"] == "tiny/judge" and d["items"][0]["unparsed"] == 1
    assert row["scores"]["dynamic_probe_score"] is not None  # the probe stays, under its own (proxy) ids
    for mid in ("human_appearance", "object_appearance", "environment_visible", "imaging_quality", "camera_rpe_rot"):
        assert row["scores"][mid] is None and "not applicable" in row["unavailable"][mid]
    asked.clear()
    again = evaluate_run(run, judge="tiny/judge", judge_device="cpu", rescore=True, progress=False)
    assert not asked and again["metrics"]["dynamic_score"]["mean"] == pytest.approx(0.875)


def test_uncached_model_names_the_download_command():
    with pytest.raises(RuntimeError, match="hf download org/not-cached"):
        J.VLMJudge(model_id="org/not-cached")


def test_an_uncached_judge_fails_before_the_first_record(tmp_path, monkeypatch, capsys):
    """`evaluate --judge ID` with ID neither cached nor a folder: one error naming the fetch command, before any
    record is read (it used to fail every Dynamic record, one model load each, and lose the measured probe)."""
    from worldgate.cli import main
    from worldgate.evaluate.runner import evaluate_run

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    run = tmp_path / "run"
    run.mkdir()  # no record at all: the check comes first
    with pytest.raises(J.JudgeMissingError, match="hf download org/not-cached"):
        evaluate_run(run, judge="org/not-cached", progress=False)
    (tmp_path / "nocfg").mkdir()
    with pytest.raises(J.JudgeMissingError, match="no config.json"):
        J.check_judge(str(tmp_path / "nocfg"))
    assert main(["evaluate", str(run), "--judge", "org/not-cached", "--no-progress"]) == 2
    assert "hf download org/not-cached" in capsys.readouterr().err
    assert not (run / "results.json").exists()
