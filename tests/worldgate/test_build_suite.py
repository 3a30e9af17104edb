"""build-suite: WorldMark's arena layout and WorldMemBench's cases.jsonl from the user's images. The file-given path is
checked end to end against WorldMark's own arena (the rebuilt folder reads back as the same cases) and through
generate + evaluate; the model steps run their real code (a tiny random Qwen2.5-VL, a fake editor pipeline) and the
answer parsing, retries, resume and the filter are checked with exact values."""

import argparse
import hashlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from worldgate.build_suite import BuildError, build_suite
from worldgate.build_suite import filter as F
from worldgate.build_suite.cli import add_parser, cmd_build_suite
from worldgate.build_suite.given import GivenError
from worldgate.build_suite.models import ChatVLM, ImageEditor, select_actions
from worldgate.build_suite.parse import AnswerError, parse_action_ids
from worldgate.build_suite.prompts import PROMPT_DIR, PROMPT_NAMES, load_prompt
from worldgate.trajectories import library
from worldgate.trajectories.suites import manifest_suite
from worldgate.trajectories.worldmark import worldmark_suite
from testpaths import SHARED

ARENA = SHARED / "worldmark" / "arena_inputs"
needs_arena = pytest.mark.skipif(not (ARENA / "first_view" / "real_action.txt").is_file(),
                                 reason="WorldMark arena_inputs not present at ../shared/worldmark/arena_inputs")


def _cli(argv) -> int:
    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers(dest="cmd"))
    a = p.parse_args(["build-suite", *map(str, argv)])
    return cmd_build_suite(a)


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _signature(c) -> dict:
    """Everything a case carries except where its image lies: the image by content."""
    d = c.to_dict()
    d["image"] = _sha(c.image)
    return d


def _textured(seed: int, size=(128, 96)) -> Image.Image:
    """A scene-like image: a low-frequency layout (what the thumbnail embedding sees) plus fine detail (texture)."""
    import cv2

    r = np.random.default_rng(seed)
    out = []
    for sigma in (12.0, 1.0):
        a = cv2.GaussianBlur(r.random((size[1], size[0], 3)).astype(np.float32), (0, 0), sigma)
        out.append((a - a.min()) / (a.max() - a.min()))
    return Image.fromarray(((0.75 * out[0] + 0.25 * out[1]) * 255).astype(np.uint8))


# ------------------------------------------------------------------------------------------------ the prompts
def test_prompts_are_worldmarks_verbatim_and_the_library_matches_the_protocol():
    assert load_prompt("caption_scene") == ("Give a detailed text caption of this image. About 100 words, in one "
                                            "paragraph, not bullet points.")
    assert load_prompt("caption_character").endswith("describing only the appearance, in about 50 words.")
    edit = load_prompt("third_person_edit")
    assert edit.startswith("Add a full-body character standing on the ground in the lower middle of the frame")
    assert edit.endswith("Maintain the exact original resolution.")
    sel = load_prompt("select_actions")
    assert "the camera turning speed is 20–30 degrees per second" in sel
    assert sel.endswith("Output only the sequence numbers directly, and do not output your reasoning process. "
                        "For example: 1, 2, 3, 4, 5")
    rows = re.findall(r"^(\d+)\. (.+?): ", sel, flags=re.MULTILINE)
    assert [int(i) for i, _ in rows] == list(range(1, 16))
    for i, keys in rows:  # "W (20s) → S (20s)" is protocol id 6 "WS", and so on for all 15
        assert "".join(k.split(" (20s)")[0] for k in keys.split(" → ")) == library.WORLDMARK_PROTOCOL[int(i)]
    assert set(PROMPT_NAMES) == {p.stem for p in PROMPT_DIR.glob("*.txt")} - {"SOURCES"}


# ------------------------------------------------------------------------------------------------ parsing
@pytest.mark.parametrize("text, ids", [("1, 2, 3, 4, 5", [1, 2, 3, 4, 5]), (" 13,2,7, 9 ,15.\n", [2, 7, 9, 13, 15]),
                                       ("1, 6, 9, 11, 13", [1, 6, 9, 11, 13])])
def test_five_distinct_ids_parse(text, ids):
    assert parse_action_ids(text) == ids


@pytest.mark.parametrize("text, why", [("1, 2, 3, 4", "4 ids"), ("1, 2, 3, 4, 5, 6", "6 ids"),
                                       ("1, 2, 3, 4, 16", r"\[16\] .* outside 1-15"), ("0, 1, 2, 3, 4", "outside"),
                                       ("1, 2, 2, 3, 4", "repeated"), ("1 2 3 4 5", "not a comma-separated"),
                                       ("Sequences 1, 2, 3, 4, 5", "not a comma-separated"),
                                       ("[1, 2, 3, 4, 5]", "not a comma-separated"), ("", "not a comma-separated"),
                                       ("\u0661, 2, 3, 4, 5", "not a comma-separated"),  # an Arabic-Indic 1
                                       ("01, 2, 3, 4, 5", "not a comma-separated"), ("1, 2, 3, 4, 05", "not a comma")])
def test_anything_else_is_refused_with_the_reason(text, why):
    with pytest.raises(AnswerError, match=why):
        parse_action_ids(text)


class ScriptedVLM:
    """A chat VLM that answers from a script per prompt kind; records every call."""

    model_id = "scripted-vlm"

    def __init__(self, actions, caption="A wide street with trees."):
        self.actions, self.caption, self.calls = list(actions), caption, []

    def ask(self, image, prompt, max_new_tokens, sample=False, seed=0):
        self.calls.append({"prompt": prompt, "sample": sample, "seed": seed, "size": image.size})
        if prompt == load_prompt("select_actions"):
            return self.actions.pop(0)
        return self.caption


def test_action_selection_retries_once_then_fails_clearly():
    img = _textured(0)
    ok = select_actions(ScriptedVLM(["I would pick 1 and 2", "2, 5, 7, 10, 12"]), img)
    assert ok["value"] == [2, 5, 7, 10, 12] and ok["retried"] and len(ok["raw"]) == 2
    vlm = ScriptedVLM(["1, 2, 3", "1, 1, 2, 3, 4"])
    with pytest.raises(Exception, match=r"no valid answer after one retry: 3 ids .*; repeated ids") as e:
        select_actions(vlm, img)
    assert type(e.value).__name__ == "StepError"
    assert [c["sample"] for c in vlm.calls] == [False, True]  # the retry samples: greedy would repeat itself
    assert all(c["prompt"] == load_prompt("select_actions") for c in vlm.calls)  # verbatim, both times


# ---------------------------------------------------------------------------- (1) the file-given path, WorldMark
@needs_arena
def test_arena_files_rebuild_the_same_125_first_view_real_cases(tmp_path):
    fv = ARENA / "first_view"
    out = tmp_path / "S"
    rc = _cli([*sorted((fv / "real").glob("*.jpg")), "--out", out, "--captions", fv / "prompt_real.txt",
               "--actions", fv / "real_action.txt", "--intrinsics", fv / "real_intrinsics"])
    assert rc == 0
    orig = [c for c in worldmark_suite(ARENA) if c.view == "first" and c.tags["domain"] == "real"]
    new = worldmark_suite(out)
    assert len(orig) == len(new) == 125
    assert [_signature(c) for c in new] == [_signature(c) for c in orig]  # ids, prompts, trajectories, K, sizes
    assert (out / "first_view" / "prompt_real.txt").read_bytes() == (fv / "prompt_real.txt").read_bytes()
    assert (out / "first_view" / "real_action.txt").read_bytes() == (fv / "real_action.txt").read_bytes()
    log = [json.loads(x) for x in (out / "build" / "real" / "build_log.jsonl").read_text().splitlines()]
    assert len(log) == 25 and {e["status"] for e in log} == {"kept"}
    assert log[7]["steps"]["caption"]["source"].endswith("prompt_real.txt:8")
    assert log[7]["steps"]["intrinsics"]["source"].endswith("real_intrinsics/007_intrinsics.npy")
    t = [e["traversability"]["texture"] for e in log]
    assert min(t) >= F.PARAMS["traversability.texture_min"] + 0.15, min(t)  # every official image passes, margin
    d = [e["dedup"]["distance"] for e in log[1:]]
    assert min(d) > 4 * F.PARAMS["dedup.max_distance"], min(d)  # and none is a near-duplicate of another


@needs_arena
def test_third_view_given_with_its_intrinsics_rebuilds_both_views(tmp_path):
    fv, tv = ARENA / "first_view", ARENA / "third_view"
    for domain in ("style", "real"):  # two domains built into one folder, one after the other
        res = build_suite(sorted((fv / domain).glob("*.jpg")), tmp_path / "S", domain=domain,
                          captions=fv / f"prompt_{domain}.txt", actions=fv / f"{domain}_action.txt",
                          intrinsics=fv / f"{domain}_intrinsics", third_view=tv / domain,
                          third_intrinsics=tv / f"{domain}_intrinsics")
        assert res.exit_code == 0 and res.cases == 250
    new, orig = worldmark_suite(tmp_path / "S"), worldmark_suite(ARENA)
    assert len(new) == len(orig) == 500
    assert [_signature(c) for c in new] == [_signature(c) for c in orig]  # third-view prompts: the prefix swapped


@needs_arena
def test_third_view_without_its_intrinsics_takes_the_first_views_scaled(tmp_path):
    fv, tv = ARENA / "first_view", ARENA / "third_view"
    imgs = sorted((fv / "real").glob("*.jpg"))[:2]
    res = build_suite(imgs, tmp_path / "S", captions=io_rows(tmp_path, fv / "prompt_real.txt", 2),
                      actions=io_rows(tmp_path, fv / "real_action.txt", 2), intrinsics=fv / "real_intrinsics",
                      third_view=tv / "real")
    assert res.exit_code == 0
    (c,) = [c for c in worldmark_suite(tmp_path / "S") if c.id == "third-real-000_001"]
    k = np.load(fv / "real_intrinsics" / "000_intrinsics.npy").astype(float)
    s = (1264 / 1080, 848 / 720)  # arena third_view/real/000 is 1264x848, its first view 1080x720
    np.testing.assert_allclose(c.intrinsics, [k[0] * s[0], k[1] * s[1], (k[2] + .5) * s[0] - .5,
                                              (k[3] + .5) * s[1] - .5], rtol=1e-6)
    assert c.image_size == (1264, 848)


def io_rows(tmp_path, path, n) -> Path:
    """The first n rows of an arena file (row i = image i)."""
    out = tmp_path / f"head{n}-{path.name}"
    out.write_text("\n".join(path.read_text().splitlines()[:n]))
    return out


def test_given_files_that_do_not_fit_are_refused(tmp_path):
    imgs = []
    for i in range(3):
        imgs.append(tmp_path / f"{i:03d}.png")
        _textured(i).save(imgs[-1])
    (tmp_path / "caps.txt").write_text("one\ntwo\n")
    with pytest.raises(GivenError, match="has 2 rows for 3 images"):
        build_suite(imgs, tmp_path / "S", captions=tmp_path / "caps.txt")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n1, 2, 3, 4, 5\n1, 2, 3, 4\n")
    with pytest.raises(GivenError, match=r"act.txt, row 3: 4 ids"):
        build_suite(imgs, tmp_path / "S", actions=tmp_path / "act.txt")
    with pytest.raises(BuildError, match="--benchmark 'worldscore'"):
        build_suite(imgs, tmp_path / "S", benchmark="worldscore")
    (tmp_path / "caps.txt").write_text("a\nb\nc\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n" * 3)
    (tmp_path / "K.txt").write_text("100 100 63.5 47.5\n100 100 63.5\n100 100 63.5 47.5\n")
    res = build_suite(imgs, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                      intrinsics=tmp_path / "K.txt")
    assert res.exit_code == 1 and list(res.failed) == [str(imgs[1])]  # per image: the others are built
    assert "[fx, fy, cx, cy]" in res.failed[str(imgs[1])]
    assert len(worldmark_suite(tmp_path / "S")) == 10


# ------------------------------------------------------------------------------------------------ the filter
def test_filter_drops_uniform_scenes_and_near_duplicates_and_logs_why(tmp_path):
    paths = []
    for name, im in [("a", _textured(1)), ("flat", Image.new("RGB", (128, 96), (120, 130, 140))), ("b", _textured(2))]:
        paths.append(tmp_path / f"{name}.png")
        im.save(paths[-1])
    b = io.BytesIO()
    _textured(1).resize((112, 84)).save(b, "JPEG", quality=75)  # a resized, recompressed copy of "a"
    (tmp_path / "a-copy.jpg").write_bytes(b.getvalue())
    paths.append(tmp_path / "a-copy.jpg")
    (tmp_path / "caps.txt").write_text("a\nflat\nb\ncopy\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n" * 4)
    (tmp_path / "K.txt").write_text("100 100 63.5 47.5\n" * 3 + "50 50 31.5 23.5\n")
    res = build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                      intrinsics=tmp_path / "K.txt")
    assert res.kept == [str(paths[0]), str(paths[2])] and res.exit_code == 0
    assert "too uniform: texture 0.000 < traversability.texture_min 0.4" in res.dropped[str(paths[1])]
    assert re.search(r"near-duplicate of .*a\.png: embedding distance 0\.0\d+ <= dedup\.max_distance 0\.05",
                     res.dropped[str(paths[3])])
    log = [json.loads(x) for x in res.log.read_text().splitlines()]
    assert [e["status"] for e in log] == ["kept", "dropped", "kept", "dropped"]
    assert log[0]["traversability"]["texture"] == 1.0 and log[1]["traversability"]["texture"] == 0.0
    assert [c.tags["image"] for c in worldmark_suite(tmp_path / "S")][::5] == [0, 1]  # renumbered 000, 001
    # the depth term, from a depth model (here a callable): a flat depth is "too enclosed"
    res = build_suite(paths[:1], tmp_path / "D", captions=io_rows(tmp_path, tmp_path / "caps.txt", 1),
                      actions=io_rows(tmp_path, tmp_path / "act.txt", 1), intrinsics=io_rows(tmp_path, tmp_path / "K.txt", 1),
                      depth_model=lambda im: np.full(im.size[::-1], 3.0))
    assert "too enclosed: depth_extent 0.000 < traversability.depth_extent_min 0.5" in res.dropped[str(paths[0])]
    ramp = np.tile(np.linspace(1.0, 20.0, 96)[:, None], (1, 128))
    assert F.depth_extent(ramp) == pytest.approx(np.log(np.percentile(ramp, 95) / np.percentile(ramp, 5)))
    assert F.traversability(_textured(1), ramp)["passed"]


# ------------------------------------------------------------------ (3) model steps: resume, retries, real VLM code
def _three(tmp_path, sizes=((128, 96), (96, 128), (128, 96))):
    paths = []
    for i, s in enumerate(sizes):
        paths.append(tmp_path / f"img{i}.png")
        _textured(10 + i, s).save(paths[-1])
    (tmp_path / "K.txt").write_text("".join(f"100 100 {(w - 1) / 2} {(h - 1) / 2}\n" for w, h in sizes))
    return paths


def test_model_steps_resume_per_image_and_a_bad_answer_fails_only_its_image(tmp_path):
    paths = _three(tmp_path)
    vlm = ScriptedVLM(["1, 2, 3, 4, 5", "nope", "also nope", "5, 7, 12, 1, 3"])
    res = build_suite(paths, tmp_path / "S", vlm=vlm, intrinsics=tmp_path / "K.txt")
    assert res.exit_code == 1 and list(res.failed) == [str(paths[1])]
    assert "no valid answer after one retry" in res.failed[str(paths[1])]
    assert len(vlm.calls) == 3 * 1 + 4  # three captions, actions: 1 + 2 (retried) + 1
    cases = worldmark_suite(tmp_path / "S")
    assert [c.tags["action_id"] for c in cases] == [1, 2, 3, 4, 5, 1, 3, 5, 7, 12]
    assert cases[0].prompt == "First-person view. A wide street with trees."
    again = ScriptedVLM(["2, 4, 6, 8, 10"])
    res = build_suite(paths, tmp_path / "S", vlm=again, intrinsics=tmp_path / "K.txt")
    assert res.exit_code == 0 and res.reused == 5  # 3 captions + 2 action answers from the cache
    assert [c["prompt"] == load_prompt("select_actions") for c in again.calls] == [True]  # only the failed one
    # with a third view, the composite's main character is captioned with WorldMark's second prompt (logged only)
    (tmp_path / "third").mkdir()
    for p in paths:
        _textured(30, Image.open(p).size).save(tmp_path / "third" / p.name)
    third = ScriptedVLM([], caption="A hiker in a red jacket.")
    res = build_suite(paths, tmp_path / "S", vlm=third, intrinsics=tmp_path / "K.txt", third_view=tmp_path / "third")
    assert [c["prompt"] for c in third.calls] == [load_prompt("caption_character")] * 2  # 2 distinct composites
    log = [json.loads(x) for x in res.log.read_text().splitlines()]
    assert log[2]["third"]["character_caption"] == "A hiker in a red jacket."
    assert next(c.prompt for c in worldmark_suite(tmp_path / "S") if c.view == "third") == (
        "Third-person view. A wide street with trees.")
    assert [c.tags["action_id"] for c in worldmark_suite(tmp_path / "S")][5:10] == [2, 4, 6, 8, 10]
    log = [json.loads(x) for x in res.log.read_text().splitlines()]
    assert log[0]["steps"]["actions"] == {"source": "model:scripted-vlm", "prompt": "worldmark/build/select_actions.txt",
                                          "raw": ["1, 2, 3, 4, 5"], "retried": False}


def test_tiny_qwen_runs_the_real_chat_path_and_never_guesses(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tokenizers")
    from test_judge_vlm import tiny_qwen

    model, proc = tiny_qwen()
    seen = []
    real = proc.apply_chat_template

    def spy(messages, **kw):
        seen.append(messages[0]["content"][1]["text"])
        return real(messages, **kw)

    proc.apply_chat_template = spy
    vlm = ChatVLM(model=model, processor=proc, max_new_tokens=12)
    paths = _three(tmp_path)[:1]
    out = [build_suite(paths, tmp_path / f"S{k}", vlm=vlm, intrinsics=io_rows(tmp_path, tmp_path / "K.txt", 1))
           for k in range(2)]
    assert seen[0] == load_prompt("caption_scene") and seen[1:3] == [load_prompt("select_actions")] * 2
    assert len(seen) == 6  # caption, selection + its retry; twice
    for res in out:  # random weights answer garbage: a per-image error quoting the problem, never a guess
        assert res.exit_code == 1 and "no valid answer after one retry" in res.failed[str(paths[0])]
    logs = [json.loads(r.log.read_text().splitlines()[0]) for r in out]
    assert logs[0]["error"] == logs[1]["error"]  # deterministic: same seed, same answers
    assert not (tmp_path / "S0" / "first_view" / "real_action.txt").read_text()


def test_editor_output_keeps_the_inputs_exact_resolution(tmp_path):
    class Pipe:  # a diffusers-like pipeline: records its call, returns an image at the size asked for
        vae_scale_factor = 8

        def __init__(self):
            self.calls = []

        def __call__(self, image, prompt, height, width, num_inference_steps, generator):
            self.calls.append((image.size, prompt, width, height))
            return type("Out", (), {"images": [_textured(5, (width, height))]})()

    pipe = Pipe()
    ed = ImageEditor(pipeline=pipe, steps=2)
    ed.model_id = "fake-editor"
    paths = _three(tmp_path, sizes=((130, 98), (128, 96), (100, 100)))
    (tmp_path / "caps.txt").write_text("x\ny\nz\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n" * 3)
    res = build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                      intrinsics=tmp_path / "K.txt", editor=ed)
    assert res.exit_code == 0 and res.cases == 30
    assert [c[2:] for c in pipe.calls] == [(128, 96), (128, 96), (96, 96)]  # multiples of 16 nearest the input
    assert all(c[1] == load_prompt("third_person_edit") for c in pipe.calls)
    third = [c for c in worldmark_suite(tmp_path / "S") if c.view == "third"]
    assert [c.image_size for c in third[::5]] == [(130, 98), (128, 96), (100, 100)]  # back to the exact input size
    assert third[0].prompt == "Third-person view. x"
    log = [json.loads(x) for x in res.log.read_text().splitlines()]
    assert [e["steps"]["third_view"]["resized_to_input"] for e in log] == [True, False, True]
    assert build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                       intrinsics=tmp_path / "K.txt", editor=ed).reused == 3 and len(pipe.calls) == 3  # resumed


# ------------------------------------------------------------ (2) WorldMemBench: build -> generate -> evaluate
CATS = ("return_progress", "persistence", "final_state", "causal")


def _memory_inputs(tmp_path):
    d = tmp_path / "in"
    (d / "masks").mkdir(parents=True)
    kinds = {"kitchen": "object", "street": "human", "garden": "event"}
    paths = []
    for i, name in enumerate(kinds):
        a = np.asarray(_textured(20 + i)).copy()
        a[30:60, 40:80] = [200, 30, 30]
        Image.fromarray(a).save(d / f"{name}.png")
        m = np.zeros((96, 128), np.uint8)
        m[30:60, 40:80] = 255
        Image.fromarray(m).save(d / "masks" / f"{name}.png")
        paths.append(d / f"{name}.png")
    (d / "targets.json").write_text(json.dumps(
        {n: [{"name": "box", "kind": k, "mask": f"masks/{n}.png"}] for n, k in kinds.items()}))
    item = {"target": "box", "kind": "grow", "gate": {"text": "Does the box start to grow during the hold?",
                                                      "answer": True},
            "questions": [{"category": c, "text": f"{c} question {j}?", "answer": j == 0} for c in CATS
                          for j in range(2)]}
    (d / "checklists.json").write_text(json.dumps({"garden.png": item}))
    (d / "captions.txt").write_text("A kitchen.\nA street.\nA garden.\n")
    (d / "K.txt").write_text("100 100 63.5 47.5\n" * 3)
    return d, paths


def test_worldmembench_suite_from_three_images_generates_and_evaluates(tmp_path):
    pytest.importorskip("diffusers")
    from test_adapter_sana_wm import tiny_pipeline

    from worldgate.evaluate.runner import evaluate_run
    from worldgate.generate.runner import run_generate

    d, paths = _memory_inputs(tmp_path)
    rc = _cli([*paths, "--out", tmp_path / "S", "--benchmark", "worldmembench", "--captions", d / "captions.txt",
               "--intrinsics", d / "K.txt", "--targets", d / "targets.json", "--checklists", d / "checklists.json",
               "--trajectories", "LR"])
    assert rc == 0
    rows = [json.loads(x) for x in (tmp_path / "S" / "cases.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["kitchen-LR", "street-LR", "garden-LR"]
    assert [r["tags"]["family"] for r in rows] == ["object", "human", "dynamic"]
    assert rows[2]["dynamic"]["target"] == 0 and rows[2]["dynamic"]["name"] == "box"
    assert [q["answer"] for q in rows[2]["dynamic"]["questions"]] == [True, False] * 4
    cases = manifest_suite(tmp_path / "S" / "cases.jsonl")
    assert cases[0].image == str((tmp_path / "S" / "images" / "kitchen.png").resolve())
    assert Path(cases[1].targets[0]["mask"]).is_file() and cases[1].prompt == "First-person view. A street."
    weights = tmp_path / "tiny-sana-wm"
    tiny_pipeline().save_pretrained(weights)
    res = run_generate("sana-wm", str(tmp_path / "S" / "cases.jsonl"), tmp_path / "run",
                       model_args={"width": 96, "height": 96, "num_inference_steps": 1, "max_sequence_length": 16,
                                   "path": str(weights)}, overrides=["trajectory.seconds=0.5"], progress=False)
    assert res.exit_code == 0, res.failed
    assert (tmp_path / "run" / "garden-LR" / "dynamic.json").is_file()
    assert (tmp_path / "run" / "kitchen-LR" / "targets.npz").is_file()
    ev = evaluate_run(tmp_path / "run", progress=False)
    m = ev["metrics"]
    assert m["object_appearance"]["n"] == 1 and m["human_appearance"]["n"] == 1  # one case each family
    assert m["dynamic_probe_score"]["n"] == 1 and 0.0 <= m["dynamic_probe_score"]["mean"] <= 1.0
    assert 0.0 <= m["object_appearance"]["mean"] <= 1.0


def test_worldmembench_checklists_are_checked(tmp_path):
    d, paths = _memory_inputs(tmp_path)
    bad = json.loads((d / "checklists.json").read_text())
    bad["garden.png"]["questions"] = bad["garden.png"]["questions"][:7]
    (d / "bad.json").write_text(json.dumps(bad))
    res = build_suite(paths, tmp_path / "S", "worldmembench", captions=d / "captions.txt", intrinsics=d / "K.txt",
                      targets=d / "targets.json", checklists=d / "bad.json")
    assert res.exit_code == 1 and "exactly 8 questions are needed (2 per aspect), got 7" in res.failed[str(paths[2])]
    bad["garden.png"]["questions"] = [dict(q, category="causal") for q in json.loads(
        (d / "checklists.json").read_text())["garden.png"]["questions"]]
    (d / "bad.json").write_text(json.dumps(bad))
    res = build_suite(paths, tmp_path / "S", "worldmembench", captions=d / "captions.txt", intrinsics=d / "K.txt",
                      targets=d / "targets.json", checklists=d / "bad.json")
    assert "two questions per aspect are needed" in res.failed[str(paths[2])]
    bad = json.loads((d / "checklists.json").read_text())
    bad["garden.png"]["target"] = "kettle"
    (d / "bad.json").write_text(json.dumps(bad))
    res = build_suite(paths, tmp_path / "S", "worldmembench", captions=d / "captions.txt", intrinsics=d / "K.txt",
                      targets=d / "targets.json", checklists=d / "bad.json")
    assert res.failed == {str(paths[2]): "garden.png: the checklist's target 'kettle' is not one of its targets ['box']"}
    assert [c.id for c in manifest_suite(tmp_path / "S" / "cases.jsonl")] == ["kitchen-LRLR", "street-LRLR"]


def test_a_missing_model_names_the_fetch_command_and_the_file_that_replaces_it(tmp_path):
    from worldgate.build_suite.models import MissingModelError

    paths = _three(tmp_path)[:1]
    with pytest.raises(MissingModelError, match=r"hf download worldgate-test/absent-vlm.*or give this step as a file"):
        build_suite(paths, tmp_path / "S", vlm="worldgate-test/absent-vlm", intrinsics=tmp_path / "K.txt")
    (tmp_path / "caps.txt").write_text("x\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n")
    with pytest.raises(MissingModelError, match="hf download worldgate-test/absent-editor"):
        build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                    intrinsics=io_rows(tmp_path, tmp_path / "K.txt", 1), editor="worldgate-test/absent-editor")
    assert issubclass(MissingModelError, OSError)  # the CLI's input-error class: exit 2, one line


def tiny_qwen_image_edit():
    """A random QwenImageEditPipeline (diffusers 0.42.1) with the real component classes: the tiny Qwen2.5-VL of the
    judge tests as its text encoder, a 3-level Qwen-Image VAE (scale 8, as the real one), a 2-layer transformer."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    pytest.importorskip("tokenizers")
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImageEditPipeline,
        QwenImageTransformer2DModel,
    )
    from test_judge_vlm import tiny_qwen

    te, proc = tiny_qwen()
    torch.manual_seed(0)
    z = 4
    vae = AutoencoderKLQwenImage(base_dim=z * 6, z_dim=z, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
                                 temperal_downsample=[False, True, True], latents_mean=[0.0] * z, latents_std=[1.0] * z)
    tr = QwenImageTransformer2DModel(patch_size=2, in_channels=z * 4, out_channels=z, num_layers=2,
                                     attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                     guidance_embeds=False, axes_dims_rope=(8, 4, 4))
    pipe = QwenImageEditPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=te,
                                 tokenizer=proc.tokenizer, processor=proc, transformer=tr)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def test_tiny_qwen_image_edit_makes_the_third_view_at_the_exact_input_size(tmp_path):
    pipe = tiny_qwen_image_edit()
    calls = []

    class Spy:  # the real pipeline runs; the spy only records what it was asked
        vae_scale_factor = pipe.vae_scale_factor

        def __call__(self, **kw):
            calls.append({k: kw[k] for k in ("prompt", "height", "width", "num_inference_steps")})
            out = pipe(**kw)
            calls[-1]["produced"] = out.images[0].size
            return out

    ed = ImageEditor(pipeline=Spy(), steps=1)
    ed.model_id = "tiny-qwen-image-edit"
    paths = _three(tmp_path, sizes=((130, 98),))
    (tmp_path / "caps.txt").write_text("A street.\n")
    (tmp_path / "act.txt").write_text("1, 5, 7, 9, 13\n")
    res = build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                      intrinsics=tmp_path / "K.txt", editor=ed, seed=3)
    assert res.exit_code == 0, res.failed
    assert calls == [{"prompt": load_prompt("third_person_edit"), "height": 96, "width": 128,
                      "num_inference_steps": 1, "produced": (128, 96)}]
    (third,) = [c for c in worldmark_suite(tmp_path / "S") if c.view == "third"][:1]
    with Image.open(third.image) as im:
        assert im.size == (130, 98) and third.image_size == (130, 98)
    assert third.intrinsics == [100.0, 100.0, 64.5, 48.5]  # the same frame, the same camera
    log = json.loads(res.log.read_text().splitlines()[0])["steps"]["third_view"]
    assert log["source"] == "model:tiny-qwen-image-edit" and log["produced"] == [128, 96] and log["resized_to_input"]


def test_estimated_intrinsics_come_back_in_original_image_pixels(tmp_path):
    from worldgate.build_suite.models import DA3Intrinsics

    class FakeDA3:  # DA3's prediction: K at its processed resolution (here half the input's)
        def __init__(self):
            self.calls = 0

        def inference(self, images):
            self.calls += 1
            h, w = images[0].shape[:2]
            pred = type("P", (), {})()
            pred.processed_images = np.zeros((1, h // 2, w // 2, 3), np.uint8)
            pred.intrinsics = np.array([[[40.0, 0, (w // 2 - 1) / 2], [0, 41.0, (h // 2 - 1) / 2], [0, 0, 1]]])
            return pred

    est = DA3Intrinsics(model=FakeDA3())
    paths = _three(tmp_path)[:2]
    (tmp_path / "caps.txt").write_text("x\ny\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n" * 2)
    res = build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                      intrinsics_model=est)
    assert res.exit_code == 0
    ks = [c.intrinsics for c in worldmark_suite(tmp_path / "S")][::5]
    assert ks == [[80.0, 82.0, 63.5, 47.5], [80.0, 82.0, 47.5, 63.5]]  # the centre maps to the centre: (W-1)/2
    log = json.loads(res.log.read_text().splitlines()[0])["steps"]["intrinsics"]
    assert log["estimator"] == "DA3 camera head"
    build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                intrinsics_model=est)
    assert est.model.calls == 2  # resumed: estimated once per image



# ------------------------------------------------------------------ audit of issue 19: the gaps and bugs it found
def test_estimated_intrinsics_log_the_model_that_ran_not_the_default_id(tmp_path):
    from worldgate.build_suite.models import DEFAULT_INTRINSICS, DA3Intrinsics

    class Given:
        def inference(self, images):
            h, w = images[0].shape[:2]
            pred = type("P", (), {})()
            pred.processed_images = np.zeros((1, h, w, 3), np.uint8)
            pred.intrinsics = np.array([[[50.0, 0, (w - 1) / 2], [0, 50.0, (h - 1) / 2], [0, 0, 1]]])
            return pred

    paths = _three(tmp_path)[:1]
    (tmp_path / "caps.txt").write_text("x\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n")
    res = build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                      intrinsics_model=DA3Intrinsics(model=Given()))
    log = json.loads(res.log.read_text().splitlines()[0])["steps"]["intrinsics"]
    assert log["source"] == "model:given:Given" and DEFAULT_INTRINSICS not in log["source"]
    assert json.loads((res.log.parent / "build.json").read_text())["models"]["intrinsics"] == "given:Given"


def test_da3_intrinsics_load_through_the_evaluators_import_and_run_the_real_network(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("depth_anything_3")
    from test_learned_da3 import tiny_api

    from worldgate.build_suite.models import DA3Intrinsics, MissingModelError

    # the package imports here (its export-only modules stubbed, as the evaluator does): an absent id is named as
    # absent weights with the fetch command, not as a missing package
    with pytest.raises(MissingModelError, match=r"hf download .*absent-da3") as e:
        DA3Intrinsics(model_id=str(tmp_path / "absent-da3"))
    assert "needs Depth Anything 3" not in str(e.value)
    est = DA3Intrinsics(model=tiny_api())
    img = _textured(3, (130, 98))
    k = est.estimate(img)
    assert len(k) == 4 and all(np.isfinite(k)) and k[0] > 0 and k[1] > 0
    assert est.estimate(img) == k  # deterministic
    paths = _three(tmp_path)[:1]
    (tmp_path / "caps.txt").write_text("x\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n")
    res = build_suite(paths, tmp_path / "S", captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt",
                      intrinsics_model=est)
    assert res.exit_code == 0, res.failed
    assert json.loads(res.log.read_text().splitlines()[0])["steps"]["intrinsics"]["source"] == (
        "model:given:DepthAnything3")


@needs_arena
def test_a_rebuild_without_third_view_leaves_no_stale_third_view(tmp_path):
    fv, tv = ARENA / "first_view", ARENA / "third_view"
    imgs = sorted((fv / "real").glob("*.jpg"))[:2]
    kw = {"captions": io_rows(tmp_path, fv / "prompt_real.txt", 2), "actions": io_rows(tmp_path, fv / "real_action.txt", 2),
              "intrinsics": fv / "real_intrinsics"}
    assert build_suite(imgs, tmp_path / "S", third_view=tv / "real", **kw).cases == 20
    assert {c.view for c in worldmark_suite(tmp_path / "S")} == {"first", "third"}
    res = build_suite(imgs[:1], tmp_path / "S", **kw | {"captions": io_rows(tmp_path, fv / "prompt_real.txt", 1),
                                                        "actions": io_rows(tmp_path, fv / "real_action.txt", 1)})
    assert res.exit_code == 0 and res.cases == 5
    cases = worldmark_suite(tmp_path / "S")
    assert [c.view for c in cases] == ["first"] * 5
    assert not list((tmp_path / "S" / "third_view" / "real").glob("*.jpg"))
    assert not list((tmp_path / "S" / "third_view" / "real_intrinsics").glob("*.npy"))


def test_a_rebuild_without_third_view_empties_the_built_third_view(tmp_path):
    paths = _three(tmp_path)[:2]
    (tmp_path / "third").mkdir()
    for p in paths:
        _textured(31, Image.open(p).size).save(tmp_path / "third" / p.name)
    (tmp_path / "caps.txt").write_text("x\ny\n")
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n" * 2)
    kw = {"captions": tmp_path / "caps.txt", "actions": tmp_path / "act.txt", "intrinsics": io_rows(tmp_path, tmp_path / "K.txt", 2)}
    assert build_suite(paths, tmp_path / "S", third_view=tmp_path / "third", **kw).cases == 20
    assert build_suite(paths, tmp_path / "S", **kw).cases == 10
    assert {c.view for c in worldmark_suite(tmp_path / "S")} == {"first"}
    assert not list((tmp_path / "S" / "third_view" / "real").glob("*.jpg"))
    assert (tmp_path / "S" / "third_view" / "prompt_real.txt").read_text() == ""


def test_target_names_are_one_safe_pattern_and_unique_per_image(tmp_path):
    d, paths = _memory_inputs(tmp_path)
    tg = json.loads((d / "targets.json").read_text())
    kw = {"captions": d / "captions.txt", "intrinsics": d / "K.txt", "checklists": d / "checklists.json",
              "trajectories": ("LR",)}
    tg["kitchen"].append({"name": "box", "kind": "human", "mask": "masks/street.png"})  # the same name twice
    tg["street"][0]["name"] = "red cup/left"  # a '/' would make a path of the mask's file name
    (d / "bad.json").write_text(json.dumps(tg))
    res = build_suite(paths, tmp_path / "S", "worldmembench", targets=d / "bad.json", **kw)
    assert res.exit_code == 1 and list(res.failed) == [str(paths[0]), str(paths[1])]
    assert res.failed[str(paths[0])] == (f"--targets {d / 'bad.json'}, kitchen.png, target 2: name 'box' is used twice "
                                         "in this image: give each target its own name (e.g. 'box-1', 'box-2')")
    assert "street.png, target 1: name 'red cup/left' must be 1-64 characters from [A-Za-z0-9_-]" in res.failed[
        str(paths[1])]
    assert [c.id for c in manifest_suite(tmp_path / "S" / "cases.jsonl")] == ["garden-LR"]
    assert not list((tmp_path / "S").rglob("left*"))
    # masks lie per image: a name with '-' cannot collide with another image's stem
    res = build_suite(paths, tmp_path / "S", "worldmembench", targets=d / "targets.json", **kw)
    assert res.exit_code == 0
    assert sorted(str(p.relative_to(tmp_path / "S")) for p in (tmp_path / "S" / "masks").rglob("*.png")) == [
        "masks/garden/box.png", "masks/kitchen/box.png", "masks/street/box.png"]


def test_duplicate_trajectories_are_refused_up_front(tmp_path):
    d, paths = _memory_inputs(tmp_path)
    with pytest.raises(BuildError, match=r"--trajectories names 'LR' twice"):
        _cli([*paths, "--out", tmp_path / "S", "--benchmark", "worldmembench", "--captions", d / "captions.txt",
              "--intrinsics", d / "K.txt", "--trajectories", "LR,LR"])
    assert not (tmp_path / "S").exists()
    res = build_suite(paths, tmp_path / "S", "worldmembench", captions=d / "captions.txt", intrinsics=d / "K.txt",
                      trajectories=("LR", "LRLR"))
    assert len(manifest_suite(tmp_path / "S" / "cases.jsonl")) == 6 == res.cases


def test_every_given_file_is_found_before_any_model_loads(tmp_path):
    d, paths = _memory_inputs(tmp_path)

    def no_model(_):
        raise AssertionError("a model ran before the given files were checked")

    for key, flag in [("targets", "--targets"), ("checklists", "--checklists"), ("target_queries", "--target-queries"),
                      ("intrinsics", "--intrinsics")]:
        kw = {"intrinsics": d / "K.txt", key: tmp_path / "absent.json"}
        with pytest.raises(GivenError, match=f"{flag} .*absent.json not found"):
            build_suite(paths, tmp_path / "S", "worldmembench", vlm="worldgate-test/absent-vlm", depth_model=no_model,
                        **kw)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(GivenError, match="--targets .*broken.json: not valid JSON"):
        build_suite(paths, tmp_path / "S", "worldmembench", vlm="worldgate-test/absent-vlm", depth_model=no_model,
                    targets=tmp_path / "broken.json")
    for key in ("third_view", "third_intrinsics"):
        with pytest.raises(GivenError, match="--third-"):
            build_suite(paths, tmp_path / "S", vlm="worldgate-test/absent-vlm", depth_model=no_model,
                        **{key: tmp_path / "absent"})



# ------------------------------------------------------- WorldMemBench targets from a text query: GroundingDINO + SAM2
@pytest.fixture(scope="module")
def tiny_target_models(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")  # the SAM2 and GroundingDINO processors
    pytest.importorskip("tokenizers")
    from test_learned_targets import save_tiny_models

    return save_tiny_models(tmp_path_factory.mktemp("tiny-target-models"))


def test_target_masks_from_text_queries_are_written_like_given_masks(tmp_path, tiny_target_models):
    from worldgate.build_suite.targets import TextTargets

    m = tiny_target_models
    d, paths = _memory_inputs(tmp_path)
    paths = paths[:2]
    (d / "caps2.txt").write_text("A kitchen.\nA street.\n")
    (d / "K2.txt").write_text("100 100 63.5 47.5\n" * 2)
    (d / "queries.json").write_text(json.dumps({
        "kitchen.png": [{"name": "crate", "kind": "object", "query": "a crate"},
                        {"name": "barrel-1", "kind": "object", "query": "A barrel"}],
        "street": [{"name": "walker", "kind": "human", "query": "a person"}]}))
    argv = [*paths, "--benchmark", "worldmembench", "--captions", d / "caps2.txt", "--intrinsics", d / "K2.txt",
            "--target-queries", d / "queries.json", "--detector", m["gdino"], "--segmenter", m["sam2"],
            "--trajectories", "LR"]
    assert _cli([*argv, "--out", tmp_path / "S"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "S" / "cases.jsonl").read_text().splitlines()]
    assert [r["tags"]["family"] for r in rows] == ["object", "human"]
    assert rows[0]["targets"] == [{"name": "crate", "kind": "object", "mask": "masks/kitchen/crate.png"},
                                  {"name": "barrel-1", "kind": "object", "mask": "masks/kitchen/barrel-1.png"}]
    for c in manifest_suite(tmp_path / "S" / "cases.jsonl"):  # the loader reads it; masks in the image's pixels
        for t in c.targets:
            with Image.open(t["mask"]) as im:
                a = np.asarray(im)
                assert im.size == tuple(c.image_size) and a.any() and set(np.unique(a)) <= {0, 255}
    log = [json.loads(x) for x in (tmp_path / "S" / "build" / "worldmembench" / "build_log.jsonl").read_text()
           .splitlines()]
    st = log[0]["steps"]["targets"]
    assert st["source"] == f"model:{m['gdino']}+{m['sam2']}" and st["queries"] == ["a crate", "A barrel"]
    assert len(st["found"]) == 2 and all(0.35 <= f["score"] <= 1 for f in st["found"])
    models = json.loads((tmp_path / "S" / "build" / "worldmembench" / "build.json").read_text())["models"]
    assert models["detector"] == m["gdino"] and models["segmenter"] == m["sam2"]
    # deterministic: a fresh build elsewhere writes the same masks
    assert _cli([*argv, "--out", tmp_path / "S2"]) == 0
    for f in (tmp_path / "S" / "masks").rglob("*.png"):
        assert f.read_bytes() == (tmp_path / "S2" / f.relative_to(tmp_path / "S")).read_bytes()

    # resumed per image: a rerun takes the masks from the cache and loads no model
    class Unloadable(TextTargets):
        def detector(self):
            raise AssertionError("the detector loaded on a resumed build")

    res = build_suite(paths, tmp_path / "S", "worldmembench", captions=d / "caps2.txt", intrinsics=d / "K2.txt",
                      target_queries=d / "queries.json", trajectories=("LR",),
                      detector=Unloadable(m["gdino"], m["sam2"]))
    assert res.exit_code == 0 and res.reused == 2
    # no box above the threshold: a clear per-image error, never a guessed mask
    res = build_suite(paths, tmp_path / "S3", "worldmembench", captions=d / "caps2.txt", intrinsics=d / "K2.txt",
                      target_queries=d / "queries.json", trajectories=("LR",), detector=m["gdino"],
                      segmenter=m["sam2"], detect_threshold=1.01)
    assert res.exit_code == 1 and sorted(res.failed) == sorted(map(str, paths)) and not res.kept
    assert res.failed[str(paths[1])].startswith("no detection of 'a person.' scores >= 1.01")
    assert not list((tmp_path / "S3" / "masks").rglob("*.png"))


def test_target_queries_are_checked_and_absent_models_are_named(tmp_path):
    d, paths = _memory_inputs(tmp_path)
    kw = {"captions": d / "captions.txt", "intrinsics": d / "K.txt", "trajectories": ("LR",)}
    (d / "q.json").write_text(json.dumps({"kitchen.png": [{"name": "a/b", "kind": "object", "query": "a cup"}],
                                          "street.png": [{"name": "p", "kind": "person", "query": "a person"}],
                                          "garden.png": [{"name": "p", "kind": "object"}]}))
    res = build_suite(paths, tmp_path / "S", "worldmembench", target_queries=d / "q.json", **kw)
    f = res.failed
    assert "--target-queries" in f[str(paths[0])] and "kitchen.png, target 1: name 'a/b' must be" in f[str(paths[0])]
    assert "street.png, target 1: kind 'person' is not one of ('human', 'object', 'event')" in f[str(paths[1])]
    assert "garden.png, target 1: each target needs 'name', 'kind' (human|object|event) and 'query'" in f[str(paths[2])]
    from worldgate.build_suite.models import MissingModelError

    (d / "q.json").write_text(json.dumps({"kitchen.png": [{"name": "cup", "kind": "object", "query": "a cup"}]}))
    with pytest.raises(MissingModelError, match=r"hf download worldgate-test/absent-gdino.*--targets"):
        build_suite(paths, tmp_path / "S", "worldmembench", target_queries=d / "q.json",
                    detector="worldgate-test/absent-gdino", **kw)


# ------------------------------------------------------------------ WorldMemBench checklists generated by the VLM
def _checklist_answer(**over) -> dict:
    d = {"kind": "boil", "initial_state": "A pot on a lit stove.", "action": "The water starts to boil.",
         "next_state": "The pot boils over.",
         "gate": {"text": "During the initial hold, do bubbles start to rise in the pot?", "answer": True},
         "questions": [{"category": c, "text": f"{c} question {j}?", "answer": j == 0} for c in CATS for j in range(2)]}
    d.update(over)
    return d


def test_checklist_answers_parse_strictly():
    from worldgate.build_suite.checklist import ChecklistAnswerError, parse_checklist

    good = _checklist_answer()
    assert parse_checklist(json.dumps(good)) == good
    assert parse_checklist("```json\n" + json.dumps(good, indent=1) + "\n```") == good  # one fenced object
    bad = [("Here it is: " + json.dumps(good), "not one JSON object"),
           (json.dumps(good) + "\n" + json.dumps(good), "not one JSON object"),
           (json.dumps([good]), "expected a JSON object"),
           (json.dumps({**good, "note": "x"}), r"unexpected \['note'\]"),
           (json.dumps({k: v for k, v in good.items() if k != "next_state"}), r"missing \['next_state'\]"),
           (json.dumps(_checklist_answer(kind=" ")), "'kind' must be a non-empty text"),
           (json.dumps(_checklist_answer(questions=good["questions"][:7])), "exactly 8 questions"),
           (json.dumps(_checklist_answer(questions=[dict(q, answer="yes") for q in good["questions"]])),
            "a boolean 'answer'"),
           (json.dumps(_checklist_answer(gate={"text": "Starts?", "answer": "true"})), "'gate' needs"),
           (json.dumps(_checklist_answer(questions=[dict(q, category="causal") for q in good["questions"]])),
            "two questions per aspect"),
           (json.dumps(_checklist_answer(questions=[dict(q, why="x") for q in good["questions"]])),
            "each question exactly"),
           (json.dumps(_checklist_answer(questions=[dict(q, text="") for q in good["questions"]])), "text is empty")]
    for text, why in bad:
        with pytest.raises(ChecklistAnswerError, match=why):
            parse_checklist(text)


class ChecklistVLM(ScriptedVLM):
    """Captions as ScriptedVLM; checklist answers from a script."""

    def __init__(self, checklists):
        super().__init__([])
        self.checklists = list(checklists)

    def ask(self, image, prompt, max_new_tokens, sample=False, seed=0):
        if "gate question" in prompt:
            self.calls.append({"prompt": prompt, "sample": sample, "seed": seed})
            return self.checklists.pop(0)
        return super().ask(image, prompt, max_new_tokens, sample, seed)


def test_checklists_are_generated_for_event_targets_retried_once_and_resumed(tmp_path):
    from worldgate.build_suite.checklist import load_template

    d, paths = _memory_inputs(tmp_path)
    tg = json.loads((d / "targets.json").read_text())
    tg["garden"][0]["event"] = "the water in the pot starts to boil"
    (d / "targets.json").write_text(json.dumps(tg))
    kw = {"captions": d / "captions.txt", "intrinsics": d / "K.txt", "targets": d / "targets.json", "trajectories": ("LR",)}
    vlm = ChecklistVLM(["I think the pot boils.", json.dumps(_checklist_answer())])
    res = build_suite(paths, tmp_path / "S", "worldmembench", vlm=vlm, **kw)
    assert res.exit_code == 0, res.failed
    assert [c["sample"] for c in vlm.calls] == [False, True]  # only the event image; the retry samples
    assert "The event target is: box." in vlm.calls[0]["prompt"]
    assert "The event: the water in the pot starts to boil" in vlm.calls[0]["prompt"]
    assert vlm.calls[0]["prompt"].startswith(load_template().split("{target}")[0])
    rows = [json.loads(x) for x in (tmp_path / "S" / "cases.jsonl").read_text().splitlines()]
    dyn = rows[2]["dynamic"]
    assert rows[2]["tags"]["family"] == "dynamic" and dyn["target"] == 0 and dyn["name"] == "box"
    assert dyn["kind"] == "boil" and dyn["next_state"] == "The pot boils over."
    assert [q["answer"] for q in dyn["questions"]] == [True, False] * 4  # frozen into the file
    assert manifest_suite(tmp_path / "S" / "cases.jsonl")[2].dynamic["gate"]["answer"] is True
    st = json.loads(res.log.read_text().splitlines()[2])["steps"]["checklist"]
    assert st["source"] == "model:scripted-vlm" and st["retried"] and len(st["raw"]) == 2
    assert st["prompt"] == "worldmembench/build/generate_checklist.txt"
    again = ChecklistVLM([])
    assert build_suite(paths, tmp_path / "S", "worldmembench", vlm=again, **kw).exit_code == 0
    assert again.calls == []  # resumed from the cache
    # two unparseable answers: that image fails with both reasons, the others are built
    bad = ChecklistVLM(['{"kind": "boil"}', "yes"])
    res = build_suite(paths, tmp_path / "S2", "worldmembench", vlm=bad, seed=1, **kw)
    assert res.exit_code == 1 and list(res.failed) == [str(paths[2])]
    assert re.match(r"checklist for 'box': no valid answer after one retry: keys must be exactly .*; not one JSON "
                    r"object", res.failed[str(paths[2])])
    assert [c.id for c in manifest_suite(tmp_path / "S2" / "cases.jsonl")] == ["kitchen-LR", "street-LR"]


def test_tiny_qwen_generates_checklists_through_the_real_chat_path(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("tokenizers")
    from test_judge_vlm import tiny_qwen

    d, paths = _memory_inputs(tmp_path)
    paths = paths[2:]
    (d / "caps1.txt").write_text("A garden.\n")
    (d / "K1.txt").write_text("100 100 63.5 47.5\n")
    kw = {"captions": d / "caps1.txt", "intrinsics": d / "K1.txt", "targets": d / "targets.json", "trajectories": ("LR",)}
    model, proc = tiny_qwen()
    vlm = ChatVLM(model=model, processor=proc, max_new_tokens=8)
    out = [build_suite(paths, tmp_path / f"G{k}", "worldmembench", vlm=vlm, **kw) for k in range(2)]
    for res in out:  # random weights answer garbage: a per-image error, never a guessed checklist
        assert res.exit_code == 1 and "no valid answer after one retry" in res.failed[str(paths[0])]
    assert out[0].failed == out[1].failed  # deterministic
    # the same real chat path (template, processor, decode), with generate steered to a valid answer
    answer = proc.tokenizer(json.dumps(_checklist_answer()), return_tensors="pt")["input_ids"]
    real = model.generate

    def steered(**inputs):
        real(**inputs)  # the real call runs; its tokens are replaced by the scripted answer
        return torch.cat([inputs["input_ids"], answer], dim=1)

    model.generate = steered
    res = build_suite(paths, tmp_path / "S", "worldmembench", vlm=vlm, **kw)
    assert res.exit_code == 0, res.failed
    (row,) = [json.loads(x) for x in (tmp_path / "S" / "cases.jsonl").read_text().splitlines()]
    assert row["dynamic"]["questions"] == _checklist_answer()["questions"] and row["dynamic"]["target"] == 0
