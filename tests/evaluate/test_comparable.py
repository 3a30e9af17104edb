"""Numbers you can compare: protocol status, mixed-protocol refusal, seeds, provenance, history, compare."""

import json

import numpy as np
import pytest

from worldgate.cli import main
from worldgate.evaluate.runner import evaluate_run, write_leaderboard
from worldgate.generate.provenance import models_of, resolved_revision
from worldgate.generate.runner import run_generate

CASES = [{"id": f"c{i}", "trajectory": t, "scene": {"seed": i + 1, "palette": "realistic"},
          "tags": {"view": "first", "domain": "real", "image": i, "action_id": a}}
         for i, (t, a) in enumerate([("W2", 1), ("L1.5 R1.5", 7), ("W1.5 S1.5", 6)])]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A complete run of a 3-case suite at the Engine's own size, a --limit 2 trajectory.seconds=1 run of it, and a
    run with two seeds per case; each scored."""
    root = tmp_path_factory.mktemp("comparable")
    m = root / "cases.jsonl"
    m.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    out = {}
    for name, kw in (("complete", {}), ("partial", {"limit": 2, "overrides": ["trajectory.seconds=1"]}),
                     ("seeds", {"seeds": [0, 1], "overrides": ["model.width=128", "model.height=128"]})):
        res = run_generate("engine", str(m), root / name, progress=False, **kw)
        assert res.exit_code == 0, res.failed
        out[name] = (root / name, evaluate_run(root / name, progress=False))
    return out


def test_a_limited_shortened_run_is_partial_with_both_reasons(runs):
    _, full = runs["complete"]
    assert full["protocol"]["status"] == "complete" and full["protocol"]["differences"] == []
    assert full["protocol"]["cases"] == full["protocol"]["expected_cases"] == 3
    _, part = runs["partial"]
    p = part["protocol"]
    assert p["status"] == "partial"
    assert any(d.startswith("--limit 2: the first 2 of 3 cases") for d in p["differences"]), p["differences"]
    assert any(d.startswith("trajectory.seconds=1") for d in p["differences"]), p["differences"]
    assert p["fingerprint"] != full["protocol"]["fingerprint"]


def test_leaderboard_refuses_mixed_protocols_unless_allowed_and_marks_them(runs, tmp_path, capsys):
    (a, ra), (b, rb) = runs["complete"], runs["partial"]
    with pytest.raises(ValueError, match="cannot be ranked side by side.*--allow-mixed"):
        write_leaderboard([ra, rb], tmp_path / "lb")
    csv, md = write_leaderboard([ra, rb], tmp_path / "lb", allow_mixed=True)
    text = md.read_text()
    assert "† mixed protocols" in text and "| complete |" in text and "| partial |" in text
    assert "†" in text.split("\n")[2] and "protocol: partial (--limit 2" in text
    # from the command line: refused (exit 2, the reason named), then allowed
    assert main(["evaluate", str(a), str(b), "--rescore", "--no-progress", "--out", str(tmp_path / "cli")]) == 2
    assert "cannot be ranked side by side" in capsys.readouterr().err
    assert main(["evaluate", str(a), str(b), "--rescore", "--no-progress", "--out", str(tmp_path / "cli"),
                 "--allow-mixed"]) == 0
    out = capsys.readouterr().out
    assert "complete: protocol: complete (3 cases)" in out and "partial: protocol: partial (--limit 2" in out


def test_every_aggregate_has_an_interval(runs):
    _, full = runs["complete"]
    m = full["metrics"]
    scored = [k for k, v in m.items() if v["n"] >= 2]
    assert scored and all(m[k]["ci"] is not None for k in scored)
    for k in scored:
        ci = m[k]["ci"]
        assert ci["low"] <= ci["high"] and ci["level"] == 0.95 and ci["resamples"] >= 0 and ci["method"]
    # seeded: a rescore gives the same intervals
    again = evaluate_run(runs["complete"][0], rescore=True, progress=False, write=False)
    assert {k: again["metrics"][k]["ci"] for k in scored} == {k: m[k]["ci"] for k in scored}


def test_seeds_are_averaged_per_case_with_their_spread(runs):
    run, res = runs["seeds"]
    assert sorted(p.name for p in run.iterdir() if p.is_dir() and not p.name.startswith((".", "results"))) == [
        "c0-seed0", "c0-seed1", "c1-seed0", "c1-seed1", "c2-seed0", "c2-seed1"]
    metas = [json.loads((run / f"c1-seed{s}" / "meta.json").read_text()) for s in (0, 1)]
    assert [m["seed"] for m in metas] == [0, 1] and metas[0]["case"]["tags"]["seed_of"] == "c1"
    seeded = {k: v for k, v in res["metrics"].items() if v.get("seeds")}
    assert seeded, "no metric reports its seeds"
    assert all(v["seeds"]["seeds_per_case"] == 2 for v in seeded.values())
    several = {k: v for k, v in seeded.items() if v["seeds"]["cases"] >= 2}
    assert several, seeded
    for v in several.values():
        assert v["seeds"]["between_seed_sd"] is not None
        assert "two-stage" in v["ci"]["method"] or "over seeds together" in v["ci"]["method"], v["ci"]["method"]
    assert res["protocol"]["seeds"] == [0, 1] and res["protocol"]["cases"] == 3


def test_provenance_in_results_and_every_record(runs):
    run, res = runs["complete"]
    prov = res["provenance"]
    for key in ("date_utc", "host_cpu", "gpu", "gpu_count", "cuda", "driver", "cudnn", "versions", "worldgate",
                "models"):
        assert key in prov, key
    assert {"torch", "numpy", "worldgate"} <= set(prov["versions"]) and "dirty" in prov["worldgate"]
    assert prov["date_utc"].endswith("Z") and prov["gpu_count"] == 0
    meta = json.loads((run / "c0" / "meta.json").read_text())
    assert meta["provenance"]["host_cpu"] == prov["host_cpu"] and meta["model_source"] is None  # the Engine


def test_history_keeps_every_evaluation(runs, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs["complete"][0], run)
    before = sorted((run / "results").glob("results_*.json"))
    evaluate_run(run, rescore=True, progress=False)
    after = sorted((run / "results").glob("results_*.json"), key=lambda p: p.stat().st_mtime_ns)
    assert len(after) == len(before) + 1
    latest = json.loads((run / "results.json").read_text())
    assert json.loads(after[-1].read_text()) == latest
    assert after[-1].with_name(after[-1].name.replace("results_", "samples_").replace(".json", ".jsonl")).is_file()


def test_compare_runs_and_history_files(runs, capsys):
    a = runs["complete"][0]
    hist = sorted((a / "results").glob("results_*.json"))[0]
    assert main(["compare", str(a), str(hist)]) == 0
    out = capsys.readouterr().out
    assert "B - A" in out and "different at 0.05" in out and "**\\***" not in out  # a run against itself


def test_a_learned_models_revision_is_the_snapshot_the_loader_opens(tmp_path, monkeypatch):
    """A tiny model saved into a Hub-style cache: the recorded revision is the snapshot transformers loads."""
    torch = pytest.importorskip("torch")
    from transformers import Dinov2Config, Dinov2Model

    sha = "0123456789abcdef0123456789abcdef01234567"
    cache = tmp_path / "hub"
    snap = cache / "models--tiny-org--tiny-dino" / "snapshots" / sha
    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                             patch_size=14)).save_pretrained(snap)
    (cache / "models--tiny-org--tiny-dino" / "refs").mkdir()
    (cache / "models--tiny-org--tiny-dino" / "refs" / "main").write_text(sha)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # (huggingface_hub reads HF_HUB_CACHE when it is imported: the loader is given the same folder explicitly)
    loaded = Dinov2Model.from_pretrained("tiny-org/tiny-dino", local_files_only=True, cache_dir=cache)
    assert resolved_revision("tiny-org/tiny-dino") == {"id": "tiny-org/tiny-dino", "revision": sha,
                                                       "source": "hub cache refs/main"}
    assert models_of({"appearance": {"model": "tiny-org/tiny-dino"}})["tiny-org/tiny-dino"]["revision"] == sha
    assert resolved_revision(str(snap))["revision"] == sha  # a snapshot folder given by path
    ref = Dinov2Model.from_pretrained(snap)
    for p, q in zip(loaded.parameters(), ref.parameters()):
        assert torch.equal(p, q)
    assert resolved_revision("not-cached/model")["revision"] is None


def test_report_refuses_mixed_runs_and_says_how_often_each_ranks_first(runs, tmp_path):
    from worldgate.evaluate.report import ReportError, write_report

    (a, _), (b, _), (c, _) = runs["complete"], runs["partial"], runs["seeds"]
    with pytest.raises(ReportError, match="cannot be ranked side by side"):
        write_report([a, b], tmp_path / "r1")
    assert not (tmp_path / "r1").exists()  # refused before anything is written
    written = write_report([a, b, c], tmp_path / "r2", allow_mixed=True)
    text = (tmp_path / "r2" / written["comparability"]).read_text()
    assert "Mixed protocols (--allow-mixed)" in text and "protocol: partial (--limit 2" in text
    assert "How often each run ranks first" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "%" in ln]
    assert rows and all(abs(sum(int(x.strip().rstrip("%")) for x in r.split("|")[2:-1]) - 100) <= 2 for r in rows)
    assert "model.width: None -> 128" not in text  # provenance lines, not settings, are listed as differences


def test_the_judges_revision_and_prompt_digest_are_recorded():
    from worldgate.evaluate.runner import judge_provenance

    j = judge_provenance("Qwen/Qwen2.5-VL-7B-Instruct")
    assert j["id"] == "Qwen/Qwen2.5-VL-7B-Instruct" and len(j["prompts_sha256"]) == 64
    assert "worldmembench/dynamic_memory.txt" in j["prompts"] and "multiworldbench/race.txt" in j["prompts"]
    assert j["revision"]["revision"] is None  # not in this machine's Hub cache: said, never guessed
    assert judge_provenance("Qwen/Qwen2.5-VL-7B-Instruct")["prompts_sha256"] == j["prompts_sha256"]
