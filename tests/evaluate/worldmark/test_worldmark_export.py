"""WorldMark's results tree written from a scored run: the files final_master.py reads, in its formats, whose
table (read back with the same code final_master runs, proven by the parity tests) is the run's own WorldMark row."""

import os
import subprocess
import sys

import numpy as np
import pytest

from worldgate.cli import main
from worldgate.evaluate.worldmark.flow_eval import load_flow_cache
from worldgate.evaluate.worldmark.master import COLS, master_rows, read_results_tree

@pytest.fixture(scope="module")
def scored(worldmark_engine_run):
    return worldmark_engine_run  # conftest.py: the W and LR Engine run, scored


def test_export_writes_the_tree_final_master_reads(scored, tmp_path):
    run, results = scored
    out = tmp_path / "delivery"
    assert main(["export", str(run), "--format", "worldmark", "--out", str(out)]) == 0
    root = out / "results"
    flow, c1, c2, c3, qa = read_results_tree(str(root), "_real_first")
    assert sorted(r["stem"] for r in flow) == ["000_001", "001_007"] and {r["model"] for r in flow} == {"ENGINE"}
    assert set(c1) == {"ENGINE__000_001", "ENGINE__001_007"} and set(c2) == {"ENGINE__001_007"}
    assert qa == {}  # no Q-Align measured, so none written
    # the classical two-view geometry measures WorldMark's global quantity: written in vg's format (vg:91-92)
    assert set(c3) == {"ENGINE__000_001", "ENGINE__001_007"}
    assert all(0 <= e["global_median_e"] < 0.01 and e["model"] == "ENGINE" for e in c3.values())
    cache = load_flow_cache(str(root / "results_flow_real_first" / "cache" / "ENGINE__000_001.npz"))
    assert cache["keys"] == ["W"] and cache["action"] == 1 and np.isclose(cache["tm"][16], 1.0)  # 16 fps time base
    rows = master_rows(flow, c1, c2, c3, qa)
    csv = (root / "results_quality_real_first" / "worldgate_master.csv").read_text().splitlines()
    assert csv[0] == "model," + ",".join(COLS)
    ours = results["worldmark"]["splits"]["_real_first"]
    for col, v in zip(COLS, csv[1].split(",")[1:]):
        if v:
            assert float(v) == pytest.approx(rows["ENGINE"][col], abs=5e-5)
            assert ours[col] == pytest.approx(float(v), abs=5e-5)
        else:
            assert ours[col] is None
    assert ours["DA_t"] > 95 and ours["Rev"] is not None and ours["Global"] > 80


def test_run_metrics_are_the_pooled_worldmark_row(scored):
    _, results = scored
    row = results["worldmark"]["run"]
    assert results["worldmark"]["commit"].startswith("26f33a8")
    assert results["metrics"]["direction_accuracy_trans"]["mean"] == pytest.approx(row["DA_t"])
    assert results["metrics"]["revisit_memory"]["mean"] == pytest.approx(row["Rev"])
    assert "per_record_mean" in results["metrics"]["direction_accuracy_trans"]
    assert results["metrics"]["qalign_quality"]["mean"] is None


FM = os.path.join(os.environ.get("WORLDMARK_CHECKOUT", "/nonexistent"), "evaluation", "worldmark", "final_master.py")


@pytest.mark.skipif(not os.path.exists(FM), reason="set WORLDMARK_CHECKOUT to a WorldMark checkout to run its final_master.py")
def test_worldmarks_final_master_prints_our_table(scored, tmp_path):
    """WorldMark's own final_master.py on the tree `worldgate export` writes prints worldgate's row (to 0.01) in every
    column both have, Local included (the classical C1 distances are stored on WorldMark's scale)."""
    run, results = scored
    out = tmp_path / "delivery"
    assert main(["export", str(run), "--format", "worldmark", "--out", str(out)]) == 0
    env = dict(os.environ, WORLDMARK_RESULTS=str(out / "results"), EVAL_SUFFIX="_real_first")
    subprocess.run([sys.executable, "final_master.py"], cwd=os.path.dirname(FM), env=env, capture_output=True,
                   text=True, check=True)
    theirs = (out / "results" / "results_quality_real_first" / "final_master.csv").read_text().splitlines()
    head, row = theirs[0].split(","), theirs[1].split(",")
    ours = results["worldmark"]["splits"]["_real_first"]
    compared = 0
    for col, v in zip(head[1:], row[1:]):
        if col not in ours:
            continue
        if v in ("", "nan"):
            assert ours[col] is None, col
        else:
            assert ours[col] == pytest.approx(float(v), abs=0.01), col
            compared += 1
    assert compared == 10  # the action columns (no switch in a W-only video: RL_t empty on both), Local, Global, Rev


def test_classical_local_distances_are_stored_on_worldmarks_scale():
    """A classical C1 distance between the classical threshold (0.06) and WorldMark's (0.10) is a mutation for
    worldgate's table; the stored distance must make final_master's own rule (fm:48-64, threshold 0.10 on the
    4-place rounded distances) say the same, or its Local would differ from worldgate's (it did: 87.5 vs 75.0)."""
    from worldgate.evaluate import metrics as M
    from worldgate.evaluate.worldmark.benchmark import memory_config, table_config
    from worldgate.evaluate.worldmark.consistency import c1_local, c1_sample_indices
    from worldgate.evaluate.worldmark.master import MasterConfig, local_score

    P = M.params()
    n = 200
    Sx, Srad = np.ones(n), np.zeros(n)
    idx = c1_sample_indices(Sx, Srad, 10.0)
    theta = np.arccos(1 - 0.08)  # 1 - cos = 0.08 between consecutive samples
    ang = np.zeros(n)
    for k, i in enumerate(idx):
        ang[i:] = k * theta
    emb = np.stack([np.cos(ang), np.sin(ang)], 1)
    c1 = c1_local(Sx, Srad, 10.0, n, emb, cfg=memory_config("classical", P))
    assert c1["mut_rate"] == 1.0 and min(c1["pmean_dists"]) > 0.10
    assert local_score([c1], MasterConfig()) == local_score([c1], table_config("classical", P)) == 0.0
    dino = c1_local(Sx, Srad, 10.0, n, emb, cfg=memory_config("learned", P))  # on DINOv2's scale 0.08 is no mutation
    assert dino["pmean_dists"][0] == 0.08 and local_score([dino], MasterConfig()) == 100.0
