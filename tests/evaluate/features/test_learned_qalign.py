"""Q-Align (WorldMark's QA_q / QA_a) through pyiqa's mPLUG-Owl2 port: a tiny random model run through the real
modeling and scoring code, offline. Skipped where the port is not installed."""

import math
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
PORT = pytest.importorskip("pyiqa.archs.q_align.modeling_mplug_owl2", exc_type=ImportError)

from worldgate.evaluate.features.models import qalign as Q  # noqa: E402
from worldgate.evaluate.worldmark.master import qa_frame_indices  # noqa: E402

SIZE = 28  # the tiny vision tower's image size (2 x 2 patches of 14)


def tiny_tokenizer():
    """A LLaMA tokenizer (transformers 5, in memory) whose vocabulary holds the prompt's characters and the level
    words as single tokens, prepending <s> as transformers 4's LlamaTokenizer did."""
    from transformers import LlamaTokenizer

    words = list(Q.LEVELS) + ["quality", "aesthetics", "video", "image", "USER", "ASSISTANT"]
    text = Q.PROMPT.format(task="aesthetics quality", input="video image")
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    merges = []

    def add(t):
        vocab.setdefault(t, len(vocab))

    for ch in sorted(set(text.replace(" ", "\u2581") + "\u2581" + "".join(words))):
        add(ch)
    for w in words:
        cur = "\u2581" + w[0]
        add(cur)
        if ("\u2581", w[0]) not in merges:
            merges.append(("\u2581", w[0]))
        for ch in w[1:]:
            if (cur, ch) not in merges:
                merges.append((cur, ch))
            cur += ch
            add(cur)
    return LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True)


def tiny_processor():
    from transformers import CLIPImageProcessorPil

    return CLIPImageProcessorPil(size={"shortest_edge": SIZE}, crop_size={"height": SIZE, "width": SIZE},
                                 do_center_crop=True, resample=3, image_mean=[0.48145466, 0.4578275, 0.40821073],
                                 image_std=[0.26862954, 0.26130258, 0.27577711])


def tiny_config(vocab_size):
    from pyiqa.archs.q_align.configuration_mplug_owl2 import MPLUGOwl2Config

    vis = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=SIZE,
               patch_size=14)
    abstractor = dict(num_learnable_queries=4, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64, encoder_hidden_size=32, grid_size=2)
    return MPLUGOwl2Config(visual_config={"visual_model": vis, "visual_abstractor": abstractor},
                           vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512)


@pytest.fixture(scope="module")
def parts():
    tok = tiny_tokenizer()
    torch.manual_seed(0)
    net = Q.owl2_class()(tiny_config(len(tok))).eval()
    with torch.no_grad():  # random weights give near-uniform level logits: spread the head so scores differ
        net.lm_head.weight.mul_(50.0)
    return net, tok, tiny_processor()


def frames(n=3, h=20, w=36, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.randint(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(n)]


def test_level_score_is_the_probability_weighted_level():
    cases = {(0.0, 0.0, 0.0, 0.0, 0.0): 3.0, (40.0, 0.0, 0.0, 0.0, 0.0): 5.0, (0.0, 0.0, 0.0, 0.0, 40.0): 1.0}
    for lg, want in cases.items():
        s, p = Q.level_score(torch.tensor(lg, dtype=torch.float64))
        assert float(s) == pytest.approx(want, abs=1e-12) and float(p.sum()) == pytest.approx(1.0)
    lg = [math.log(4), math.log(3), math.log(2), math.log(1), -1e9]  # p = 0.4, 0.3, 0.2, 0.1, 0
    s, p = Q.level_score(torch.tensor(lg, dtype=torch.float64))
    assert p.numpy() == pytest.approx([0.4, 0.3, 0.2, 0.1, 0.0])
    assert float(s) == pytest.approx(0.4 * 5 + 0.3 * 4 + 0.2 * 3 + 0.1 * 2)  # 4.0
    batch = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0], [0.5, -1.0, 2.0, 0.0, 1.0]])
    e = np.exp(batch.numpy())
    want = (e / e.sum(1, keepdims=True)) @ np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    assert Q.level_score(batch)[0].numpy() == pytest.approx(want, rel=1e-6)
    half = Q.level_score(batch.half())[0]  # WorldMark's dtype (qa:22): computed in fp16 as the Hub code does
    assert half.dtype == torch.float16 and half.float().numpy() == pytest.approx(want, abs=1e-2)


def worldmark_indices(n, fps):
    """qa:25-28 on a video of n frames whose decoder reports fps: range(0, len(vr), max(1, int(round(fps or 16))))."""
    fps = fps or 16.0
    return list(range(0, n, max(1, int(round(fps)))))


@pytest.mark.parametrize("n,fps", [(81, 16.0), (50, 24.0), (121, 30.0), (40, 12.5), (40, 13.5), (33, 0.0),
                                   (33, None), (5, 0.4), (1, 16.0), (17, 8.2)])
def test_frame_picks_equal_worldmark(n, fps):
    want = worldmark_indices(n, fps)
    assert Q.pick_frames(n, fps) == want == qa_frame_indices(n, fps)
    ex = Q.QAlignFeature(scorer=object())
    ex.start(types.SimpleNamespace(fps=fps, n_frames=n))
    for i, f in enumerate(frames(n, 4, 4)):
        ex.update(i, f if ex.needs_frame(i) else None)
    assert ex.picked == want
    assert Q.pick_frames(81, 16.0) == [0, 16, 32, 48, 64, 80] and Q.frame_step(12.5) == 12 and Q.frame_step(0) == 16


def test_prompt_is_the_port_s_and_is_read_from_a_checkpoint_file():
    port_src = open(PORT.__file__, encoding="utf-8").read()
    assert Q.prompt_from_source(port_src) == Q.PROMPT
    assert Q.PROMPT.format(task="aesthetics", input="video") == (
        "USER: How would you rate the aesthetics of this video?\n<|image|>\nASSISTANT: The aesthetics of the video is")
    swapped = ('        prompt = "USER: How would you rate the {} of this {}?\\n<|image|>\\nASSISTANT: The {} of the '
               '{} is".format(task_, input_, input_, task_)\n')
    t = Q.prompt_from_source(swapped)
    assert t.format(task="quality", input="video").endswith("ASSISTANT: The video of the quality is")
    assert Q.prompt_from_source("x = 1\n") is None


def test_scorer_equals_the_port_score_in_fp16(parts):
    """QAlignScorer's steps are the Hub code's score(); in fp16 (the only dtype the port's score runs) both agree
    bit for bit, for both of WorldMark's tasks."""
    from PIL import Image

    net, tok, proc = parts
    half = Q.owl2_class()(net.config)
    half.load_state_dict(net.state_dict())
    half = half.half().eval()
    sc = Q.QAlignScorer(half, tok, proc)
    half.tokenizer, half.image_processor = tok, proc
    half.preferential_ids_ = [i[-1] for i in tok(list(Q.LEVELS))["input_ids"]]  # the port's level ids
    assert sc.level_ids == half.preferential_ids_ and len(set(sc.level_ids)) == 5
    fr = frames(3)
    for _, task in Q.TASKS:
        got = Q.level_score(sc.level_logits(fr, task))[0]
        ref = half.score([[Image.fromarray(f) for f in fr]], task_=task, input_="video")
        assert got.dtype == torch.float16 and torch.equal(got.reshape(-1), ref.reshape(-1))
        assert 1.0 <= float(got) <= 5.0


def test_feature_scores_worldmark_frames_through_the_model(parts):
    net, tok, proc = parts
    sc = Q.QAlignScorer(net, tok, proc)
    n, fps = 40, 12.5
    vid = frames(n, 18, 30, seed=3)
    ex = Q.QAlignFeature(scorer=sc)
    ex.start(types.SimpleNamespace(fps=fps, n_frames=n))
    for i, f in enumerate(vid):
        ex.update(i, f if ex.needs_frame(i) else None)
    out = ex.finish()
    assert out["frame"].tolist() == worldmark_indices(n, fps) == [0, 12, 24, 36] and int(out["n_frames"]) == 4
    picked = [vid[i] for i in worldmark_indices(n, fps)]
    for key, task in Q.TASKS:
        lg = sc.level_logits(picked, task).double()
        p = torch.softmax(lg, -1).numpy()
        assert out[f"probs_{key}"] == pytest.approx(p, rel=1e-5)
        assert float(out[f"qalign_{key}"]) == pytest.approx(float(p @ np.array(Q.LEVEL_WEIGHTS)), rel=1e-5)
        assert 1.0 < float(out[f"qalign_{key}"]) < 5.0
        assert str(out[f"prompt_{key}"]) == Q.PROMPT.format(task=task, input="video")
    assert float(out["qalign_quality"]) != float(out["qalign_aesthetic"])  # the task word reaches the model
    assert abs(sc.score(picked[:2], "quality")[0] - float(out["qalign_quality"])) > 1e-6  # every picked frame counts
    assert Q.qa_entry({"qalign": out}) == (float(out["qalign_quality"]), float(out["qalign_aesthetic"]), 4)


def test_loads_from_a_local_folder_with_its_own_prompt(parts, tmp_path, monkeypatch):
    """The checkpoint is a folder (QALIGN_MODEL), not the port's hard-coded Hub id; its modeling file's prompt wins."""
    net, tok, proc = parts
    net.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    proc.save_pretrained(tmp_path)
    src = open(PORT.__file__, encoding="utf-8").read().replace(".format(task_, input_, task_, input_)",
                                                               ".format(task_, input_, input_, task_)")
    (tmp_path / "modeling_mplug_owl2.py").write_text(src)
    monkeypatch.setenv(Q.ENV_MODEL, str(tmp_path))
    assert Q.configured() and Q.missing() == [] and Q.check() == str(tmp_path)
    sc = Q.load_scorer(device="cpu")
    assert sc is Q.load_scorer(str(tmp_path), "cpu")  # once per process
    assert sc.prompt_source.startswith("checkpoint") and sc.text("quality").endswith("The video of the quality is")
    assert next(sc.model.parameters()).dtype == torch.float32
    fr = frames(2, seed=5)
    ref = Q.QAlignScorer(net, tok, proc, prompt=sc.prompt)
    assert sc.score(fr, "aesthetics")[0] == pytest.approx(ref.score(fr, "aesthetics")[0], abs=1e-5)


def test_missing_pieces_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv(Q.ENV_MODEL, str(tmp_path / "nowhere"))
    miss = Q.missing()
    assert [m["fetch"] for m in miss] == [f"{Q.FETCH} --local-dir {tmp_path / 'nowhere'}"]
    with pytest.raises(Q.MissingQAlign, match="hf download q-future/one-align"):
        Q.check()
    with pytest.raises(Q.MissingQAlign, match="hf download"):
        Q.load_scorer(device="cpu")
    assert "Q-Align" in Q.unavailable_reason()
    monkeypatch.setattr(Q, "PORT_MODULE", "pyiqa_absent_for_test.q_align")
    monkeypatch.setattr(Q, "_CLASS", [])
    with pytest.raises(Q.MissingQAlign, match=r"pip install --no-deps pyiqa==0\.1\.16"):
        Q.owl2_class()
