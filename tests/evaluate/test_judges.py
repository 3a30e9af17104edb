"""`evaluate --judge openai:MODEL@BASE_URL` against a local stub OpenAI-compatible server (127.0.0.1, port 0).

One small Engine run holds a WorldMemBench dynamic case and two MultiWorldBench cases (shared state, delayed
revisit); the stub answers yes to everything, so the judged scores are known in advance: WorldMemBench's gate opens
and each question scores 1 where its frozen answer is yes; MultiWorldBench's state synchronization and ID
consistency score 100. A second evaluate sends no request (answers and the judge feature are cached). The retry
paths (a slow reply, a 500, a refusal) and a malformed reply (each benchmark's unparsed rule) are checked on the
judge itself and on one cached record.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from worldgate.adapters import get_adapter
from worldgate.cli import main
from worldgate.evaluate import judges as JG
from worldgate.evaluate.features import FeatureCache
from worldgate.evaluate.multiworldbench.scoring import score_folder
from worldgate.evaluate.worldmembench.dynamic import judge_items, load_dynamic
from worldgate.generate.runner import run_generate, write_rollout
from worldgate.trajectories.suites import load_suite

from suite_cases import suite_case_manifest

SIZE = 64
KEY = "sk-test-never-written"
WMB_CASE, MWB_CASES = "dynamic-LR-00", ("shared-state-000", "delayed-revisit-000")


class Stub:
    """The server's script: ``mode`` is what the next replies are ("yes", "slow", "500", "malformed", "maybe",
    "401"); ``times`` how many replies keep that mode before it falls back to "yes"."""

    def __init__(self):
        self.requests, self.bodies, self.auth = 0, [], set()
        self.mode, self.times, self.lock = "yes", 0, threading.Lock()
        self.in_flight = self.most_in_flight = 0

    def next_mode(self) -> str:
        with self.lock:
            self.requests += 1
            if self.times <= 0:
                return "yes"
            self.times -= 1
            return self.mode


def _handler(stub: Stub):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            mode = stub.next_mode()
            stub.bodies.append(body)
            stub.auth.add(self.headers.get("Authorization"))
            if self.path != "/v1/chat/completions":
                return self.reply(404, b"{}")
            if mode == "slow":
                time.sleep(0.6)
            if mode == "busy":  # a short wait, counting how many requests are being served at once
                with stub.lock:
                    stub.in_flight += 1
                    stub.most_in_flight = max(stub.most_in_flight, stub.in_flight)
                time.sleep(0.1)
                with stub.lock:
                    stub.in_flight -= 1
            if mode in ("500", "401"):  # the 401 echoes the key it was sent, as a careless server might
                return self.reply(int(mode), json.dumps({"error": self.headers.get("Authorization")}).encode())
            if mode == "malformed":
                return self.reply(200, b"<html>not json")
            text = body["messages"][0]["content"][-1]["text"]
            if mode == "maybe":
                answer = "maybe"
            elif "START:" in text:  # WorldMemBench's checklist: the gate and eight answers, one per line
                answer = "\n".join(["START: yes"] + [f"Q{k}: yes" for k in range(1, 9)])
            else:
                answer = "Yes."
            self.reply(200, json.dumps({"model": "stub-served", "choices": [
                {"message": {"role": "assistant", "content": answer}}]}).encode())

        def reply(self, code, data):
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                pass
    return H


@pytest.fixture(scope="module")
def server():
    stub = Stub()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield stub, f"openai:stub@http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


@pytest.fixture(autouse=True)
def fast_env(monkeypatch):
    monkeypatch.setenv("WORLDGATE_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("WORLDGATE_JUDGE_TIMEOUT", "0.3")
    monkeypatch.setenv("WORLDGATE_JUDGE_BACKOFF", "0.01")
    monkeypatch.setenv("WORLDGATE_JUDGE_RETRIES", "2")


@pytest.fixture(scope="module")
def judged(tmp_path_factory, server):
    """The run, evaluated once with the stub as judge: (run, results, requests that evaluation sent)."""
    stub, spec = server
    root = tmp_path_factory.mktemp("judged")
    run = root / "engine"
    # the dynamic case at 1 s per key (80 frames: the hold, one departure and return, the final hold)
    assert run_generate("engine", str(suite_case_manifest(root, WMB_CASE)), run, progress=False, overrides=[
        f"model.width={SIZE}", f"model.height={SIZE}", "trajectory.seconds=1"]).exit_code == 0
    mwb = {c.id: c for c in load_suite("multiworldbench-engine")}
    a = get_adapter("engine-2p", width=SIZE, height=SIZE)
    a.load()
    for c in MWB_CASES:
        write_rollout(run, mwb[c], a, a.plan(mwb[c]), 0, {"model": "engine-2p"})
    mp = pytest.MonkeyPatch()
    for k, v in (("WORLDGATE_JUDGE_API_KEY", KEY), ("WORLDGATE_JUDGE_TIMEOUT", "5")):
        mp.setenv(k, v)
    before = stub.requests
    assert main(["evaluate", str(run), "--judge", spec, "--no-progress"]) == 0
    mp.undo()
    return run, json.loads((run / "results.json").read_text()), stub.requests - before


def _rows(run):
    return {s["case"]: s for s in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def test_the_stub_judges_both_benchmarks_with_the_scores_its_answers_imply(judged, server):
    stub, spec = server
    run, res, asked = judged
    M = res["metrics"]
    items = load_dynamic(run / WMB_CASE)["events"]
    # all yes: the gate opens, each question scores 1 where its frozen reference is yes
    want = float(np.mean([np.mean([q["answer"] is True for q in it["questions"]]) for it in items]))
    assert M["dynamic_score"]["mean"] == pytest.approx(want) and M["dynamic_p_start"]["mean"] == 1.0
    rows = _rows(run)
    assert rows[WMB_CASE]["detail"]["dynamic_score"]["model"] == spec
    for case, cap in (("shared-state-000", "state_synchronization"), ("delayed-revisit-000", "id_consistency")):
        assert rows[case]["scores"][cap] == 100.0 and rows[case]["paths"][cap] == "vlm", rows[case]
    # one checklist per WorldMemBench item; MultiWorldBench: 3 place questions x 2 views + 1 identity pair (or
    # 4 place questions); every request carries the frames as PNG data URLs before the text
    assert asked == len(stub.bodies[-asked:]) and asked >= len(items) + 2
    parts = stub.bodies[-1]["messages"][0]["content"]
    assert parts[-1]["type"] == "text" and all(p["image_url"]["url"].startswith("data:image/png;base64,")
                                                for p in parts[:-1]) and len(parts) >= 2
    assert stub.bodies[-1]["model"] == "stub" and stub.bodies[-1]["temperature"] == 0
    assert f"Bearer {KEY}" in stub.auth
    j = res["provenance"]["judge"]
    assert j["id"] == spec and j["backend"] == "openai" and j["served_model"] == ["stub-served"]
    assert j["host"] == spec.split("//")[1].split("/")[0] and j["answers"]["asked"] == asked
    assert j["caveats"] == [] and len(j["prompts_sha256"]) == 64
    assert KEY not in (run / "results.json").read_text() and KEY not in (run / "samples.jsonl").read_text()


def test_a_second_evaluate_sends_no_request(judged, server):
    stub, spec = server
    run, res, _ = judged
    before = stub.requests
    for extra in ([], ["--rescore"]):
        assert main(["evaluate", str(run), "--judge", spec, "--no-progress", *extra]) == 0
    assert stub.requests == before
    again = json.loads((run / "results.json").read_text())
    for m in ("dynamic_score", "state_synchronization", "id_consistency"):
        assert again["metrics"][m]["mean"] == res["metrics"][m]["mean"]
    assert again["provenance"]["judge"]["served_model"] == ["stub-served"]  # read back from the cached answers


def _frames(n=2, seed=0):
    return [np.random.default_rng(seed + k).integers(0, 255, (8, 8, 3), dtype=np.uint8) for k in range(n)]


@pytest.mark.parametrize("mode, retries", [("slow", 1), ("500", 1)])
def test_a_slow_reply_and_a_500_are_retried(server, tmp_path, mode, retries):
    stub, spec = server
    stub.mode, stub.times = mode, 1
    j = JG.open_judge(spec, tmp_path)
    t0 = time.perf_counter()
    assert j.ask(_frames(), f"is it {mode}?") == "Yes."
    assert j.backend.stats["retries"] == retries and j.backend.stats["requests"] == 2
    assert time.perf_counter() - t0 < 3
    n = stub.requests
    assert JG.open_judge(spec, tmp_path).ask(_frames(), f"is it {mode}?") == "Yes." and stub.requests == n  # cached


def test_a_refusal_stops_the_judge_and_the_capability_says_why(server, judged, tmp_path):
    stub, spec = server
    run = judged[0]
    stub.mode, stub.times = "401", 1
    j = JG.open_judge(spec, tmp_path)
    with pytest.raises(JG.JudgeError, match="HTTP 401.*WORLDGATE_JUDGE_API_KEY") as e:
        j.ask(_frames(seed=5), "refused?")
    assert KEY not in str(e.value) and "Bearer ***" in str(e.value)
    n = stub.requests
    row = score_folder(run / "shared-state-000", FeatureCache(run / ".features"), judge=j)  # fails at once
    assert stub.requests == n and row["scores"]["state_synchronization"] is None
    assert "gave no answer" in row["unavailable"]["state_synchronization"]


def test_a_malformed_reply_follows_each_papers_rule_and_is_a_caveat(server, judged, tmp_path):
    """A 200 that is not JSON is no answer (not cached: asked again next time); an answer that is not yes/no is
    never guessed: MultiWorldBench's capability is unavailable (§4.1), WorldMemBench's closed gate scores 0."""
    stub, spec = server
    run = judged[0]
    stub.mode, stub.times = "malformed", 1
    j = JG.open_judge(spec, tmp_path)
    assert j.ask(_frames(seed=9), "malformed?") is None and j.backend.stats["malformed"] == 1
    assert j.ask(_frames(seed=9), "malformed?") == "Yes."  # not cached: asked again
    stub.mode, stub.times = "maybe", 100
    try:
        row = score_folder(run / "shared-state-000", FeatureCache(run / ".features"), judge=j)
        dyn = load_dynamic(run / WMB_CASE)
        res = judge_items(j, _frames(3), [0, 1, 2], dyn, 16.0)
    finally:
        stub.times = 0
    assert row["scores"]["state_synchronization"] is None
    assert "could not be parsed" in row["unavailable"]["state_synchronization"]
    assert all(r["gate"] is None and r["overall"] == 0.0 for r in res) and res[0]["unparsed"] == 9
    p = j.provenance()
    assert p["answers"]["unparsed"] >= 1 + 9 * len(res) and "never guessed" in p["caveats"][0]
    assert p["answers"]["unanswered"] == 1  # the malformed 200


def test_specs_with_credentials_are_refused_and_the_key_is_never_recorded(tmp_path):
    for bad in ("openai:m@http://user:pw@host/v1", "openai:m@http://host/v1?key=x", "openai:@http://h/v1",
                "openai:m@ftp://h/v1", "openai:m"):
        with pytest.raises(JG.JudgeMissingError):
            JG.parse_spec(bad)
    s = JG.parse_spec("openai:Qwen/Qwen2.5-VL-7B-Instruct@https://api.example.org:8443/v1/")
    assert s == {"backend": "openai", "model": "Qwen/Qwen2.5-VL-7B-Instruct", "base_url": "https://api.example.org:8443/v1",
                 "host": "api.example.org:8443"}
    j = JG.open_judge("openai:m@http://127.0.0.1:9/v1", tmp_path)
    assert KEY not in json.dumps(j.provenance())


def test_a_linked_cache_folder_is_never_written_through(server, tmp_path):
    stub, spec = server
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "answers").symlink_to(elsewhere)
    j = JG.open_judge(spec, tmp_path / "run" / "answers")
    assert j.ask(_frames(seed=11), "linked?") == "Yes." and j.stats["cache_refused"] >= 1
    assert not any(elsewhere.iterdir())


def test_questions_go_out_together_within_the_concurrency_limit(server, tmp_path, monkeypatch):
    stub, spec = server
    monkeypatch.setenv("WORLDGATE_JUDGE_CONCURRENCY", "2")
    stub.mode, stub.times, stub.most_in_flight = "busy", 6, 0
    j = JG.open_judge(spec, tmp_path)
    qs = [(_frames(1, seed=20 + k), f"question {k}?") for k in range(6)]
    assert j.ask_many(qs) == ["Yes."] * 6 and stub.most_in_flight == 2
    assert j.stats["asked"] == 6 and j.ask_many(qs) == ["Yes."] * 6 and j.stats["cached"] == 6


def test_an_array_evaluate_asks_the_judge_on_its_tasks_and_publishes(judged, server, tmp_path, monkeypatch):
    """`evaluate --launcher local --judge ...`: the array task asks the judge for every record, one view or two (its
    answers and the judged features land in the run's cache; two-view records were not computed by the tasks at all
    and the cache-only scoring step made them errors), the scoring step reads them, and the scores equal a plain
    judged evaluate's; the publishing flags act after it as after a plain evaluate (they did nothing under
    --launcher)."""
    import shutil

    pytest.importorskip("submitit")
    stub, spec = server
    run0, res0, asked0 = judged
    run = tmp_path / "arr"
    run.mkdir()
    for case in (WMB_CASE, *MWB_CASES):  # the records alone: no cached feature, no cached answer
        shutil.copytree(run0 / case, run / case)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WORLDGATE_JUDGE_TIMEOUT", "5")
    before = stub.requests
    assert main(["evaluate", str(run), "--judge", spec, "--launcher", "local", "--tasks", "1", "--no-progress",
                 "--push-to-hub", "lab/judged"]) == 0
    assert stub.requests - before == asked0  # what the plain evaluate asked, sent by the task (scoring only reads)
    assert (run / ".features" / "judge-answers").is_dir()
    res = json.loads((run / "results.json").read_text())
    assert not res["errors"], res["errors"]
    for m in ("dynamic_score", "dynamic_p_start"):
        assert res["metrics"][m]["mean"] == pytest.approx(res0["metrics"][m]["mean"]), m
    rows = _rows(run)
    for case, cap in (("shared-state-000", "state_synchronization"), ("delayed-revisit-000", "id_consistency")):
        assert rows[case]["scores"][cap] == 100.0 and rows[case]["paths"][cap] == "vlm", rows[case]
    assert (tmp_path / "hub-staged" / "lab__judged" / "manifest.json").is_file()
