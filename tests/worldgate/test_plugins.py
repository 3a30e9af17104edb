"""Out-of-tree plugins (issue 28.1, docs/plugins.md): a skeleton written by ``worldgate new-adapter``, filled with a
trivial runtime, installed into a temporary environment (pip --target with this venv's setuptools, offline), is
listed by ``worldgate list models``, passes worldgate.testing through its own tests, and runs generate -> evaluate,
where a plugin benchmark installed beside it scores its record; entry points are read lazily; a colliding name is
refused naming both distributions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worldgate.adapters import MODELS
from worldgate.adapters.engine.adapter import EngineAdapter
from worldgate.cli import main
from worldgate.evaluate import metrics as M
from worldgate.trajectories.registry import PluginError, Registry
from worldgate.testing import check_adapter, check_info
from worldgate.trajectories.suites import SUITES

NAME = "toy-model"
#: a plugin benchmark and feature (module toy_bench, installed beside the plugin as the distribution lab-bench):
#: classical.toy_mean, each frame's mean, and a benchmark reading it and the built-in flow
TOY_BENCH = """\
import numpy as np

from worldgate.evaluate.features import Extractor
from worldgate.evaluate.score import Benchmark, Score, metric


class ToyMean(Extractor):
    name, version, backend, max_side = "toy_mean", "1", "classical", 32

    def start(self, rec):
        super().start(rec)
        self.means = []

    def update(self, i, frame):
        self.means.append(float(frame.mean()))

    def finish(self):
        return {"mean": np.asarray(self.means)}


def score(feats, rec, backend, P):
    return {"toy_flow": Score(float("flow" in feats)), "toy_frames": Score(float(len(feats["toy_mean"]["mean"])))}


TOY_BENCHMARK = Benchmark(name="toy", title="Toy", params={}, extractors=("flow", "toy_mean"), score=score,
                          metrics={"toy_flow": metric("Toy flow", "Toy", rng="0-1", needs=("flow",)),
                                   "toy_frames": metric("Toy frames", "Toy", rng=">=0", needs=("toy_mean",))})
"""
#: the trivial runtime the test writes into the skeleton: a seeded texture sliding one pixel per frame
ROLLOUT = """\
        rng = np.random.default_rng(seed)
        tex = rng.integers(0, 256, (plan.height, plan.width * 2, 3), dtype=np.uint8)
        yield Chunk(0, np.stack([np.roll(tex, -i, axis=1)[:, :plan.width] for i in range(plan.n_frames)]))
"""
RAISE = "        raise AdapterError(NO_RUNTIME.format(name=self.info.name))\n"


def env_with(site: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(skeleton folder, site folder it is installed into)."""
    root = tmp_path_factory.mktemp("plugin")
    pkg = root / "pkg"
    assert main(["new-adapter", NAME, "--out", str(pkg)]) == 0
    adapter = pkg / "src" / "worldgate_toy_model" / "adapter.py"
    src = adapter.read_text()
    assert src.count(RAISE) == 2 and src.count("\nTODO(read) ") == 11  # load() and rollout(); the eleven questions
    head, load_body, rest = src.partition(RAISE)
    adapter.write_text(head + "        return None\n" + rest.replace(RAISE, ROLLOUT))
    tests = pkg / "tests" / "test_worldgate_toy_model.py"
    tests.write_text(tests.read_text().replace("rollout_seconds = None", "rollout_seconds = 1.0"))
    site = root / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "--no-cache-dir", "--target", str(site), str(pkg)],
                       capture_output=True, text=True, timeout=300, env=env_with(site))
    assert r.returncode == 0, r.stderr[-2000:]
    (site / "toy_bench.py").write_text(TOY_BENCH)
    fake_dist(site, "lab-bench", "worldgate.benchmarks", {"toy": "toy_bench:TOY_BENCHMARK"},
              features={"classical.toy_mean": "toy_bench:ToyMean"})
    return pkg, site


def test_new_adapter_refuses_bad_names_and_full_folders(tmp_path, capsys):
    assert main(["new-adapter", "My Model", "--out", str(tmp_path / "a")]) == 2
    assert "lower-case letters" in capsys.readouterr().err and not (tmp_path / "a").exists()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("x")
    assert main(["new-adapter", "ok-model", "--out", str(tmp_path / "b")]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["keep.txt"]


def test_skeleton_declares_its_entry_point(installed):
    pkg, site = installed
    assert '"toy-model" = "worldgate_toy_model.adapter:ToyModel"' in (pkg / "pyproject.toml").read_text()
    eps = next(site.glob("worldgate_toy_model-*.dist-info")) / "entry_points.txt"
    assert eps.read_text().split() == ["[worldgate.adapters]", "toy-model", "=", "worldgate_toy_model.adapter:ToyModel"]
    assert NAME not in MODELS  # not installed in this process's environment


SCRIPT = """
import json, sys
from importlib import metadata
calls = []
real = metadata.entry_points
metadata.entry_points = lambda **kw: calls.append(kw) or real(**kw)
import worldgate, worldgate.adapters, worldgate.evaluate.metrics, worldgate.trajectories.suites
lazy = len([c for c in calls if c.get("group", "").startswith("worldgate.")])  # read at first lookup, not at import
from worldgate.cli import main
print("@@LIST"); sys.stdout.flush()
rc_list = main(["list", "models"])
print("@@GEN"); sys.stdout.flush()
rc_gen = main(["generate", "--model", "toy-model", "--suite", "worldmark-engine", "--limit", "1", "--out", sys.argv[1],
               "--no-progress", "trajectory.seconds=1", "model.width=64", "model.height=64"])
rc_eval = main(["evaluate", sys.argv[1], "--no-progress"])
from worldgate.adapters import MODELS
from worldgate.evaluate.metrics import BENCHMARKS
print("@@END", json.dumps({"lazy": lazy, "rc": [rc_list, rc_gen, rc_eval], "origin": MODELS.origin("toy-model"),
                          "benchmarks": [(n, BENCHMARKS.origin(n)) for n in BENCHMARKS.entries]}))
"""


def test_installed_plugin_is_listed_conforms_and_runs(installed, tmp_path):
    pkg, site = installed
    env = env_with(site)
    battery = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                                str(pkg / "tests")], cwd=pkg, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    run = tmp_path / "run"
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(run)], capture_output=True, text=True, timeout=300,
                       env=env, cwd=tmp_path)
    out, _ = battery.communicate(timeout=300)
    assert battery.returncode == 0 and "10 passed" in out, out[-3000:]  # the battery's 9 tests (rollout too) + 2 own
    assert "@@END" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
    end = json.loads(r.stdout.split("@@END", 1)[1])
    assert end == {"lazy": 0, "rc": [0, 0, 0], "origin": "worldgate-toy-model",
                   "benchmarks": [["worldmark", "worldgate"], ["worldmembench", "worldgate"],
                                  ["multiworldbench", "worldgate"], ["toy", "lab-bench"]]}, r.stderr[-3000:]
    listing = r.stdout.split("@@LIST", 1)[1].split("@@GEN", 1)[0]
    assert [ln.split()[0] for ln in listing.splitlines() if ln.startswith(NAME)] == [NAME]
    (case,) = [p for p in run.iterdir() if (p / "meta.json").is_file()]
    meta = json.loads((case / "meta.json").read_text())
    assert meta["adapter"]["name"] == NAME and meta["achieved"]["frames"] == meta["requested"]["frames"]
    assert (meta["achieved"]["width"], meta["achieved"]["height"]) == (64, 64)
    (row,) = [json.loads(ln) for ln in (run / "samples.jsonl").read_text().splitlines()]
    assert row["adapter"] == NAME and "error" not in row, row.get("error")
    # the plugin benchmark scored the plugin model's record, from a built-in feature and its plugin feature
    assert row["scores"]["toy_flow"] == 1.0 and row["scores"]["toy_frames"] == meta["achieved"]["frames"] > 0
    assert row["features"]["toy_mean"] == "toy_mean@1-classical"
    assert row["scores"]["direction_accuracy_trans"] is not None  # and the built-ins did
    assert (run / "results.json").is_file()


# ------------------------------------------------------------------------------------- registry over entry points
def fake_dist(site: Path, dist: str, group: str, entries: dict[str, str], features: dict | None = None) -> None:
    """An installed distribution as importlib.metadata reads it: METADATA and entry_points.txt (``features``: also
    entries of worldgate.features)."""
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    text = f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items())
    if features:
        text += "[worldgate.features]\n" + "".join(f"{k} = {v}\n" for k, v in features.items())
    (info / "entry_points.txt").write_text(text)


def test_collision_with_a_builtin_names_both_packages(tmp_path, monkeypatch):
    fake_dist(tmp_path, "acme-engine", "worldgate.adapters", {"engine": "acme.engine:Engine"})
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("model", MODELS.builtin, group="worldgate.adapters")  # built lazily: nothing read yet
    with pytest.raises(PluginError) as e:
        reg.names()
    msg = str(e.value)
    assert "model name 'engine' is declared by two packages" in msg
    assert "worldgate (built-in 'worldgate.adapters.engine.adapter:EngineAdapter')" in msg and "acme-engine" in msg


def test_collision_between_two_plugins_names_both(tmp_path, monkeypatch):
    fake_dist(tmp_path, "lab-one", "worldgate.suites", {"twin": "lab_one.suites:twin"})
    fake_dist(tmp_path, "lab-two", "worldgate.suites", {"twin": "lab_two.suites:twin"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"suite name 'twin' is declared by two packages: lab-one .* and lab-two"):
        Registry("suite", {}, group="worldgate.suites").get("twin")


def test_plugin_suite_benchmark_and_feature_are_found(tmp_path, monkeypatch):
    fake_dist(tmp_path, "lab-suite", "worldgate.suites", {"my-cases": "worldgate.trajectories.suites:manifest_suite"})
    fake_dist(tmp_path, "lab-feat", "worldgate.features", {"learned.my_flow": "worldgate.evaluate.features.flow:FlowExtractor",
                                                           "classical.my_depth": "lab_feat.mod:Missing"})
    monkeypatch.syspath_prepend(str(tmp_path))
    suites = Registry("suite", {"manifest": "worldgate.trajectories.suites:manifest_suite"}, group="worldgate.suites")
    assert suites.names() == ["manifest", "my-cases"] and suites.origin("my-cases") == "lab-suite"
    assert suites.get("my-cases") is suites.get("manifest") and suites.origin("manifest") == "worldgate"
    learned = Registry("learned feature", {"flow": "x:y"}, group="worldgate.features", prefix="learned.")
    assert list(learned.entries) == ["flow", "my_flow"]  # built-ins first, then the backend's plugins
    classical = Registry("classical feature", {}, group="worldgate.features", prefix="classical.")
    with pytest.raises(PluginError, match=r"classical feature 'my_depth' of plugin lab-feat .* does not load"):
        classical.get("my_depth")
    M.check_feature_plugins()  # both name a backend
    fake_dist(tmp_path, "lab-bad", "worldgate.features", {"flowish": "lab_bad:F"})
    with pytest.raises(PluginError, match=r"lab-bad .* must be BACKEND.NAME with BACKEND one of classical, learned"):
        M.check_feature_plugins()


def test_malformed_target_is_refused_naming_the_package(tmp_path, monkeypatch):
    fake_dist(tmp_path, "lab-typo", "worldgate.benchmarks", {"mybench": "lab_typo.bench.BENCHMARK"})
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("benchmark", {}, group="worldgate.benchmarks")
    with pytest.raises(PluginError, match=r"lab-typo .*the target must be 'module:Object'"):
        list(reg.entries)


def test_builtin_registries_read_their_groups():
    assert MODELS.group == "worldgate.adapters" and M.BENCHMARKS.group == "worldgate.benchmarks"
    assert SUITES.group == "worldgate.suites"
    assert {b: r.prefix for b, r in M.FEATURES.items()} == {"classical": "classical.", "learned": "learned."}


def test_a_plugin_benchmark_reusing_a_metric_id_names_both_packages(tmp_path, monkeypatch):
    fake_dist(tmp_path, "lab-copy", "worldgate.benchmarks", {"copy": "worldgate.evaluate.worldmark.benchmark:BENCHMARK"})
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        M.BENCHMARKS.refresh()
        M.metric_info.cache_clear()
        assert list(M.BENCHMARKS.entries)[-1] == "copy" and M.BENCHMARKS.origin("copy") == "lab-copy"
        with pytest.raises(PluginError, match=r"metric id 'direction_accuracy_trans' is declared by two benchmarks: "
                                              r"worldmark \(package worldgate\) and copy \(package lab-copy\)"):
            M.metric_info()
    finally:
        monkeypatch.undo()
        M.BENCHMARKS.refresh()
        M.metric_info.cache_clear()
    assert "copy" not in M.BENCHMARKS and "direction_accuracy_trans" in M.metric_info()


def test_check_adapter_runs_the_battery_without_pytest(tmp_path):
    # (the rollout check runs in the installed plugin's own battery above: rollout_seconds = 1.0)
    done = check_adapter("engine", model_args={"width": 64, "height": 64}, folder=tmp_path / "a", scene=True)
    assert done == ["info", "deterministic", "key timing", "intrinsics", "round trip"]
    assert json.loads((tmp_path / "a" / "plan.json").read_text())["case_id"] == "t-007"

    class Restless(EngineAdapter):  # a plan that differs between two calls: not pure
        calls = 0

        def plan(self, case):
            p = super().plan(case)
            Restless.calls += 1
            p.extra["call"] = Restless.calls
            return p

    with pytest.raises(AssertionError, match="two plans of the same case differ"):
        check_adapter(cls=Restless, folder=tmp_path / "b", scene=True)
    with pytest.raises(AssertionError, match="info.name 'engine' is not the registered name 'engine-memory'"):
        check_info(Restless(), "engine-memory")
