"""The VLM judge runs its real code path offline: a tiny random Qwen2.5-VL (tokenizer trained in memory, tiny vision
and text towers) answers through ``VLMJudge.ask`` / ``judge_record``, and every number comes from ``score_items``."""

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
    text = J.prompt_template() + " user assistant yes no"
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


def _judge(qwen, steer: str | None = None):
    """The judge over the shared tiny model; ``steer`` biases greedy decoding toward one token (through the model's
    own generation config, so the real generate/decode path still produces the text)."""
    model, proc = qwen
    model.generation_config.sequence_bias = None
    if steer is not None:
        tid = proc.tokenizer.encode(steer, add_special_tokens=False)
        assert len(tid) == 1, (steer, tid)
        model.generation_config.sequence_bias = {tuple(tid): 100.0}
    return J.VLMJudge(model=model, processor=proc)


def _frames(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (56, 56, 3), dtype=np.uint8) for _ in range(n)]


PHASES = [{"name": "V", "frames": [0, 5]}, {"name": "D1", "frames": [5, 10]}, {"name": "R1", "frames": [10, 15]},
          {"name": "H", "frames": [15, 20]}]
REFS = (True, True, False, False, True, True, True, False)
DYN = {"phases": PHASES, "events": [{
    "name": "tower", "kind": "grow", "target": 0,
    "gate": {"text": "Does the tower visibly start growing during V?", "answer": True},
    "questions": [{"text": f"Question {k}: did the tower keep growing?", "answer": a} for k, a in enumerate(REFS)],
}]}


def test_ask_feeds_every_frame_to_the_model_and_returns_text(qwen, monkeypatch):
    judge = _judge(qwen)
    seen = {}
    generate = judge.model.generate

    def spy(**kw):
        seen.update(kw)
        return generate(**kw)

    monkeypatch.setattr(judge.model, "generate", spy)
    idx = [0, 8, 16]
    prompt = J.build_prompt(DYN["events"][0]["gate"]["text"], PHASES, idx, 16.0)
    out = judge.ask(_frames(3), prompt)
    assert isinstance(out, str)
    grid = seen["image_grid_thw"]
    assert grid.shape == (3, 3) and seen["pixel_values"].shape[0] == int(grid.prod(-1).sum())
    n_pad = int((seen["input_ids"] == judge.model.config.image_token_id).sum())
    assert n_pad == int(grid.prod(-1).sum()) // 4  # the processor expanded one placeholder per merged patch
    text = judge.processor.tokenizer.decode(seen["input_ids"][0])
    assert "Question: Does the tower visibly start growing during V?" in text and text.endswith("assistant\n")
    assert seen["max_new_tokens"] == judge.max_new_tokens and seen["do_sample"] is False
    # deterministic: the same frames and prompt give the same answer
    assert judge.ask(_frames(3), prompt) == out


def _record(judge, monkeypatch, n_frames=20):
    """judge_record with every raw answer and every parse recorded."""
    asked, parsed = [], []
    ask, parse = judge.ask, J.parse_yes_no

    def ask_spy(frames, prompt):
        asked.append((len(frames), prompt, ask(frames, prompt)))
        return asked[-1][2]

    def parse_spy(text):
        parsed.append(text)
        return parse(text)

    monkeypatch.setattr(judge, "ask", ask_spy)
    monkeypatch.setattr(J, "parse_yes_no", parse_spy)
    out = judge.judge_record(_frames(n_frames, seed=1), DYN, fps=16.0)
    return out, asked, parsed


@pytest.mark.parametrize("steer", [None, "Answer", " yes", " no"])
def test_judge_record_scores_through_the_gated_protocol(qwen, monkeypatch, steer):
    judge = _judge(qwen, steer)
    out, asked, parsed = _record(judge, monkeypatch)
    assert len(out) == 1 and out[0]["name"] == "tower" and out[0]["judge"] == "vlm"
    assert parsed == [a[2] for a in asked]  # every answer went through parse_yes_no, once, in order
    idx = J.sampled_frames(20)
    assert all(n == len(idx) for n, _, _ in asked)  # stride 8, first and last: 4 frames
    assert "V = frames 0-4" in asked[0][1] and "Question: Does the tower" in asked[0][1]
    gate = J.parse_yes_no(asked[0][2])
    if not gate:  # closed gate: the 8 questions are not asked and all score 0; unparseable: the item is unavailable
        assert len(asked) == 1
        want = J.score_items(gate, [None] * 8, DYN["events"][0], asked=False)
        if gate is False:
            assert out[0]["gate"] is False and out[0]["overall"] == 0.0 and out[0]["per_question"] == [0.0] * 8
        else:
            assert out[0]["gate"] is None and out[0]["overall"] is None and out[0]["unparsed"] == 1
    else:
        assert len(asked) == 9 and [p for _, p, _ in asked[1:]] == [
            J.build_prompt(q["text"], PHASES, idx, 16.0) for q in DYN["events"][0]["questions"]]
        want = J.score_items(gate, [J.parse_yes_no(a) for _, _, a in asked[1:]], DYN["events"][0])
    assert {k: out[0][k] for k in want} == want
    if steer == "Answer":  # an unparseable gate leaves the item unavailable (counted, not scored)
        assert gate is None and out[0]["unparsed"] == 1 and out[0]["overall"] is None
    elif steer == " no":
        assert gate is False and out[0]["overall"] == 0.0 and out[0]["unparsed"] == 0
    elif steer == " yes":  # every answer "yes": the score is the share of frozen references that are yes
        assert gate is True and out[0]["per_question"] == [float(r) for r in REFS]
        assert out[0]["overall"] == pytest.approx(np.mean(REFS)) and out[0]["unparsed"] == 0


def test_uncached_model_names_the_download_command():
    with pytest.raises(RuntimeError, match="hf download org/not-cached"):
        J.VLMJudge(model_id="org/not-cached")
