import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from worldgate.cli import main
from worldgate.evaluate import shared
from worldgate.evaluate.metrics import worldmark_columns
from worldgate.evaluate import metrics as M
from worldgate.evaluate.worldmark import protocol as WP
from worldgate.evaluate.worldmembench import camera as M_camera
from worldgate.evaluate.runner import evaluate_run, extractors_for
from worldgate.generate.runner import run_generate

QUICK = ["model.width=128", "model.height=128", "trajectory.seconds=3"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "engine"
    m = out.parent / "cases.jsonl"
    rows = [{"id": "w", "trajectory": "worldmark:1", "scene": {"seed": 11}},
            {"id": "lr", "trajectory": "worldmark:7", "scene": {"seed": 12}},
            {"id": "ad", "trajectory": "worldmark:8", "scene": {"seed": 13}, "view": "third"}]
    m.write_text("\n".join(json.dumps(r) for r in rows))
    res = run_generate("engine", str(m), out, overrides=QUICK, progress=False)
    assert res.exit_code == 0
    return out


def test_evaluate_writes_results_and_samples(run):
    r = evaluate_run(run, progress=False)
    assert (run / "results.json").is_file() and (run / "samples.jsonl").is_file()
    res = json.loads((run / "results.json").read_text())
    for mid in worldmark_columns():
        assert mid in res["metrics"]
    assert res["backends"]["flow"]["backend"] == "classical" and res["git"] and res["versions"]["numpy"]
    assert res["config"]["params"]["local_mutation_classical"] == 0.06
    rows = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert [x["case"] for x in rows] == ["ad", "lr", "w"]
    by = {x["case"]: x for x in rows}
    # Engine GT goes where it is told
    assert by["w"]["scores"]["direction_accuracy_trans"] > 95
    assert by["lr"]["scores"]["direction_accuracy_rot"] > 95
    assert by["ad"]["scores"]["direction_accuracy_trans"] > 90
    assert by["lr"]["scores"]["revisit_memory"] > 90
    # not applicable is said, never invented
    assert by["w"]["scores"]["direction_accuracy_rot"] is None
    assert "no rotation segment" in by["w"]["unavailable"]["direction_accuracy_rot"]
    assert by["w"]["scores"]["aesthetic_quality"] is None
    assert res["metrics"]["direction_accuracy_rot"]["coverage"] == pytest.approx(1 / 3)


def test_rescore_is_served_from_cache_and_identical(run):
    a = evaluate_run(run, progress=False)
    first = (run / "samples.jsonl").read_text()
    b = evaluate_run(run, progress=False, rescore=True)
    assert b["features"]["computed"] == 0 and b["features"]["cached"] == 3 * len(extractors_for("classical"))
    assert (run / "samples.jsonl").read_text() == first
    assert a["metrics"] == b["metrics"]


def test_broken_videos_get_error_entries_and_the_rest_is_scored(run, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    shutil.rmtree(bad / ".features", ignore_errors=True)
    v = bad / "ad" / "video.mp4"
    v.write_bytes(v.read_bytes()[: v.stat().st_size // 3])  # truncated
    (bad / "lr" / "video.mp4").write_bytes(b"")  # empty
    shutil.copytree(bad / "w", bad / "z-corrupt")
    c = bad / "z-corrupt" / "video.mp4"
    data = bytearray(c.read_bytes())
    data[100:4000] = np.random.default_rng(0).integers(0, 256, 3900, dtype=np.uint8).tobytes()
    c.write_bytes(bytes(data))
    r = evaluate_run(bad, progress=False)
    assert set(r["errors"]) >= {"ad", "lr"}
    assert r["errors"]["lr"] == "lr: video.mp4 is empty (0 bytes)"  # never handed to the decoder
    rows = {json.loads(x)["case"]: json.loads(x) for x in (bad / "samples.jsonl").read_text().splitlines()}
    assert rows["w"]["scores"]["direction_accuracy_trans"] > 95
    assert r["metrics"]["direction_accuracy_trans"]["coverage"] < 1.0
    assert "record error" in r["metrics"]["local_memory"]["unavailable"]


def test_cli_evaluate_and_leaderboard(run, tmp_path, capsys):
    other = tmp_path / "engine-copy"
    shutil.copytree(run, other)
    assert main(["evaluate", str(run), str(other), "--no-progress", "--out", str(tmp_path / "lb")]) == 0
    out = capsys.readouterr().out
    assert "Direction Accuracy (translation)" in out and "Revisit Memory" in out
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "engine-copy" in md and "| run |" in md
    assert (tmp_path / "lb" / "leaderboard.csv").read_text().startswith("run,records,")
    assert main(["evaluate", str(run), "--metrics", "local_memroy", "--no-progress"]) == 2
    assert "Did you mean 'local_memory'" in capsys.readouterr().err


def test_worldmarks_options_are_shown_beside_the_table(run, capsys):
    """Under the table: the WorldMark commit reproduced and every deviation option that is on (or that none is),
    with the backend's perception deviations; the options are in results.json too."""
    from worldgate.evaluate.runner import run_evaluate

    assert run_evaluate([str(run)], progress=False) == 0
    out = capsys.readouterr().out
    assert "WorldMark's scoring at 26f33a81: its quirks as published (no deviation option on: " in out
    assert "backend deviation: flow: OpenCV DIS" in out
    assert run_evaluate([str(run)], rescore=True, progress=False, params={"wm_time_base_real_fps": 1}) == 0
    out = capsys.readouterr().out
    assert "options deviating from it: wm_time_base_real_fps=1 (time constants on the record's fps" in out
    res = json.loads((run / "results.json").read_text())
    assert res["worldmark"]["options"] == {"wm_time_base_real_fps": 1, "wm_flow_full_scale": 0}
    assert main(["evaluate", str(run), "--rescore", "--no-progress", "--param", "wm_flow_full_scale=1"]) == 0
    assert "options deviating from it: wm_flow_full_scale=1" in capsys.readouterr().out
    assert main(["evaluate", str(run), "--rescore", "--no-progress", "--param", "wm_flow_full=1"]) == 2
    assert "Did you mean 'wm_flow_full_scale'" in capsys.readouterr().err
    assert run_evaluate([str(run)], rescore=True, progress=False) == 0  # the module's later tests see the defaults


# ------------------------------------------------------------------------------ WorldMark's scoring on our features
def _feat(sx=None, srad=None, n=318):
    z = np.zeros(n)
    return {"flow": {"sx": np.asarray(sx if sx is not None else z, float), "sy": z.copy(),
                     "srad": np.asarray(srad if srad is not None else z, float), "speed": np.ones(n), "gap": 2},
            "poses": {"valid": np.zeros(n, bool), "trans_amp": z, "rot_amp": z, "gap": np.asarray(2)}}


def _rec(keys, n=320, fps=16.0):
    segs = [{"index": i, "move": k if k in "WSAD" else "idle", "look": k if k in "LR" else "idle"}
            for i, k in enumerate(keys)]
    return {"trajectory": {"segments": segs}, "fps": fps, "model": "m", "case": "c", "tags": {}}


def _flow(feat, keys, **P):
    rec, cache, why = WP.protocol_record(feat, _rec(keys), dict(M.params(), **P))
    assert rec is not None, why
    return rec, cache


def test_worldmark_direction_sign_and_halved_flow():
    rec, cache = _flow(_feat(srad=np.full(318, 2.0)), "W")
    assert rec["action_id"] == 1 and rec["M1"][0]["dir"] == 1.0 and rec["M1"][0]["dir_gated"] == 1.0
    assert cache["Srad"][0] == 1.0  # SEA-RAFT's half-size flow (fe:50-53): worldgate's 640-wide pixels halved
    assert _flow(_feat(srad=np.full(318, 2.0)), "W", wm_flow_full_scale=1)[1]["Srad"][0] == 2.0
    rec, _ = _flow(_feat(sx=np.full(318, -3.0)), "R")  # content moves left: turning right
    assert rec["action_id"] == 5 and rec["M1"][0]["dir"] == 1.0
    assert _flow(_feat(sx=np.full(318, -3.0)), "L")[0]["M1"][0]["dir"] == -1.0


def test_worldmark_do_nothing_scores_zero():
    """A frozen video: direction 0, stability 0 (g <= 1e-6, fe:121), latency 0 at the switch (no response, fe:155)."""
    rec, _ = _flow(_feat(), "WS")
    assert [s["dir"] for s in rec["M1"]] == [0.0, 0.0]
    assert [s["score"] for s in rec["M4"]] == [0.0, 0.0]
    assert [s["score"] for s in rec["M3"]] == [0.0] and rec["M3"][0]["note"] == "no_response"


def test_worldmark_time_base_is_16_fps_unless_asked():
    feat = _feat(srad=np.full(478, 2.0))
    rec24 = _rec("W", n=480, fps=24.0)
    P = M.params()
    assert WP.flow_cache(feat, rec24, P)[0]["tm"][16] == 1.0  # fe:19: 16 fps whatever the video
    assert WP.flow_cache(feat, rec24, dict(P, wm_time_base_real_fps=1))[0]["tm"][24] == 1.0


def test_worldmark_keys_outside_the_protocol_are_unavailable():
    rec = {"trajectory": {"segments": [{"index": 0, "move": "W", "look": "R"}]}, "fps": 16.0}
    cache, why = WP.flow_cache(_feat(), rec, M.params())
    assert cache is None and "single W/S/A/D moves and L/R looks" in why


def _px_poses(n, rows):
    """A pose feature of n pairs whose rows {f: (translational?, iv, u)} carry parallax samples."""
    valid, t = np.zeros(n, bool), np.zeros((n, 3))
    iv, u, pair = [], [], []
    for f, (moving, d, flow) in rows.items():
        valid[f] = True
        t[f] = [1.0, 0, 0] if moving else 0.0
        iv.append(np.asarray(d, float))
        u.append(np.asarray(flow, float))
        pair.append(np.full(len(d), f))
    return {"valid": valid, "t": t, "gap": np.asarray(2), "px_iv": np.concatenate(iv), "px_u": np.concatenate(u),
            "px_pair": np.concatenate(pair)}


def test_classical_parallax_samples_feed_worldmarks_fit():
    """The classical backend gives WorldMark's fit (fe:207-223) its samples: per picked frame the tracks of the pair
    starting there, inverse depth and horizontal flow, u halved to SEA-RAFT's scale."""
    from worldgate.evaluate.worldmark.flow_eval import parallax_fit
    rng = np.random.default_rng(3)
    d = rng.uniform(0.05, 0.5, 40)
    f = _feat(n=80)
    # a strafe: u = -30 / Z + 1 on every even pair; picks of one 82-frame segment: 20, 36, 52, 68 (fe:182-188)
    f["poses"] = _px_poses(80, {k: (True, d, -30.0 * d + 1.0) for k in range(0, 80, 2)})
    raw, kind = WP.parallax(f, ["A"], 82, 0.5)
    assert kind == "px_raw" and sorted(raw) == [0]
    assert len(raw[0][0]) == 4 * 38  # 1-99 % of 40 samples kept at each of the 4 picked frames
    fit = parallax_fit(raw, ["A"])[0]
    assert fit["a"] == -15.0 and fit["b_far"] == 0.5  # half-size flow: u/2 = -15 iv + 0.5
    spread = np.percentile(raw[0][0], 95) - np.percentile(raw[0][0], 5)
    assert fit["p_trans"] == round(15 * spread / (15 * spread + 0.5 + 1e-6), 3)
    # a pure turn: every pair rotation-only, points at infinity (iv = 0) -> no translation share
    f["poses"] = _px_poses(80, {k: (False, np.zeros(40), np.full(40, 6.0)) for k in range(0, 80, 2)})
    fit = parallax_fit(WP.parallax(f, ["R"], 82, 0.5)[0], ["R"])[0]
    assert fit["p_trans"] == 0.0 and fit["p_yaw"] == 1.0 and fit["b_far"] == 3.0


def test_imported_worldmark_cache_feeds_its_own_parallax_samples():
    """A flow feature imported from WorldMark's FLOW cache carries the fit's samples (px_iv_j, px_uu_j in 640-wide
    pixels): the protocol hands them to the fit on SEA-RAFT's half scale, without depth or grid."""
    f = _feat(n=80)
    f["flow"].update(px_segs=np.array([1]), px_iv_1=np.array([0.1, 0.2, 0.3]), px_uu_1=np.array([2.0, 4.0, 6.0]))
    raw, kind = WP.parallax(f, ["W", "A"], 82, 0.5)
    assert kind == "px_raw" and list(raw) == [1]
    np.testing.assert_array_equal(raw[1][1], [1.0, 2.0, 3.0])


def test_classical_parallax_outvotes_a_lone_translational_pair():
    """A pair the pose model calls translational inside a turn its neighbours call rotation-only has noise for depths:
    its points count as at infinity, like theirs."""
    from worldgate.evaluate.worldmark.flow_eval import parallax_fit
    rng = np.random.default_rng(4)
    rows = {k: (False, np.zeros(30), np.full(30, 6.0) + rng.normal(0, 0.1, 30)) for k in range(0, 80, 2)}
    d = rng.uniform(0.05, 0.5, 30)
    rows[20] = (True, d, 6.0 + 20 * d)  # picked frame 20, a misjudged pair
    f = _feat(n=80)
    f["poses"] = _px_poses(80, rows)
    raw, _ = WP.parallax(f, ["R"], 82, 0.5)
    assert not raw[0][0].any()
    assert parallax_fit(raw, ["R"])[0]["p_trans"] == 0.0


def test_classical_parallax_a_turns_majority_decides_its_motion_type():
    """A stretch of pairs called translational inside a turn (a third of its pairs, together: the local window alone
    would keep them) is outvoted by the segment: a turn whose pairs mostly need no translation has no parallax."""
    from worldgate.evaluate.worldmark.flow_eval import parallax_fit
    rng = np.random.default_rng(6)
    rows = {k: (False, np.zeros(30), np.full(30, 6.0) + rng.normal(0, 0.1, 30)) for k in range(0, 80, 2)}
    for k in range(14, 40, 2):  # 13 of 40 pairs, around the picks at 20 and 36
        d = rng.uniform(0.05, 0.5, 30)
        rows[k] = (True, d, 6.0 + 20 * d)
    f = _feat(n=80)
    f["poses"] = _px_poses(80, rows)
    raw, _ = WP.parallax(f, ["R"], 82, 0.5)
    assert not raw[0][0].any() and parallax_fit(raw, ["R"])[0]["p_yaw"] == 1.0
    # the same pairs in a strafe (most pairs translational) keep their depths
    rows = {k: (True, rng.uniform(0.05, 0.5, 30), None) for k in range(0, 80, 2)}
    rows = {k: (m, d, -30 * d + 1.0) for k, (m, d, _) in rows.items()}
    f["poses"] = _px_poses(80, rows)
    assert parallax_fit(WP.parallax(f, ["A"], 82, 0.5)[0], ["A"])[0]["p_trans"] > 0.9


def test_classical_pose_pairs_triangulate_inverse_depth():
    """PoseExtractor's parallax samples of a sideways step: inverse depth proportional to 1/Z of the true points
    (unit baseline), u their horizontal flow in 640-wide pixels."""
    from worldgate.evaluate.features.geometry import PoseExtractor
    rng = np.random.default_rng(5)
    K = np.array([[200.0, 0, 127.5], [0, 200.0, 127.5], [0, 0, 1]])
    X = np.c_[rng.uniform(-4, 4, 150), rng.uniform(-3, 3, 150), rng.uniform(3, 12, 150)]
    p0 = X[:, :2] / X[:, 2:] * 200 + 127.5
    Xb = X - np.array([0.3, 0, 0])  # camera b 0.3 m to the right
    p1 = Xb[:, :2] / Xb[:, 2:] * 200 + 127.5
    ex = PoseExtractor()
    ex.K, ex.Ki, ex.width = K, np.linalg.inv(K), 256
    row = ex._estimate(p0.astype(np.float32), p1.astype(np.float32))
    iv, u = row[-1]
    assert np.any(row[1]) and len(iv) >= 140
    # each sample's point: match by its flow (u = -0.3 * 200 / Z * 640 / 256)
    z_of_u = -0.3 * 200 * 2.5 / u
    np.testing.assert_allclose(iv * z_of_u, np.median(iv * z_of_u), rtol=2e-3)  # iv = baseline / Z
    assert np.median(iv * z_of_u) == pytest.approx(0.3, rel=2e-3)  # depth on a unit baseline is Z / 0.3


def test_global_memory_counts_unmatched_pairs_as_failures():
    """WorldMark's global quantity on the classical backend: the median over every match of every co-visible pair;
    a co-visible pair without matches is a failure weighed like a typical pair, never dropped (vg:90-92, fm:90)."""
    from worldgate.evaluate.worldmark.geometry import global_error, global_memory
    P = M.params()
    G = {"failed": np.array([False, False, True, True]), "covisible": np.array([True, True, True, False]),
         "e": np.array([0.001, 0.002, 0.003, 0.004, 0.005, 0.006]), "e_pair": np.array([0, 0, 0, 1, 1, 1])}
    e, det = global_error(G, P)
    # six samples weight 1 plus one failure (1.0) of weight 3 (a typical pair's matches): median of 9 is the 5th
    assert e == 0.005 and det == {"pairs": 3, "unmatched_pairs": 1, "not_covisible": 1, "matches": 6,
                                  "median_err": 0.005}
    assert global_memory({"geometry": G}, {}, "classical", P).value == pytest.approx(100 / (1 + 0.005 / 0.05))
    G2 = dict(G, failed=np.array([False, True, True, True]), covisible=np.ones(4, bool))
    assert global_error(G2, P)[0] == 1.0  # most pairs unmatched: the failures decide
    dissolved = {"failed": np.ones(5, bool), "covisible": np.ones(5, bool), "e": np.zeros(0), "e_pair": np.zeros(0)}
    assert global_memory({"geometry": dissolved}, {}, "classical", P).value == pytest.approx(100 / 21)
    turned = dict(dissolved, covisible=np.zeros(5, bool))
    assert global_memory({"geometry": turned}, {}, "classical", P).value is None


def test_rpe_translation_matches_evo():
    from evo.core import metrics as evo_metrics
    from evo.core.trajectory import PosePath3D
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(0)
    n = 40
    poses = []
    for _ in range(2):
        T = np.tile(np.eye(4), (n, 1, 1))
        T[:, :3, :3] = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.1, (n, 3)), 0)).as_matrix()
        T[:, :3, 3] = np.cumsum(rng.normal(0, 1.0, (n, 3)), 0)
        poses.append(T)
    rpe = evo_metrics.RPE(evo_metrics.PoseRelation.translation_part, delta=1, delta_unit=evo_metrics.Unit.frames)
    rpe.process_data((PosePath3D(poses_se3=list(poses[0])), PosePath3D(poses_se3=list(poses[1]))))
    np.testing.assert_allclose(M_camera.rpe_translation(poses[0], poses[1]), rpe.error, rtol=1e-12, atol=1e-12)
    assert np.all(M_camera.rpe_translation(poses[0], poses[0]) < 1e-12)


def test_estimated_trajectory_chains_relative_poses():
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(1)
    n = 12  # poses at frames 0, 2, ..., 22
    c2w = np.tile(np.eye(4), (n, 1, 1))
    c2w[:, :3, :3] = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.05, (n, 3)), 0)).as_matrix()
    c2w[:, :3, 3] = np.cumsum(rng.normal(0, 0.3, (n, 3)), 0)
    c2w = np.linalg.inv(c2w[0]) @ c2w  # the estimate starts at the identity
    rows = 2 * (n - 1)
    R, t = np.tile(np.eye(3), (rows, 1, 1)), np.zeros((rows, 3))
    flow = np.zeros(rows)
    for k in range(n - 1):  # x_b = R x_a + t for camera a = pose k, b = pose k + 1 (row 2k; odd rows unestimated)
        Ra, Ca, Rb, Cb = c2w[k, :3, :3], c2w[k, :3, 3], c2w[k + 1, :3, :3], c2w[k + 1, :3, 3]
        R[2 * k], t[2 * k] = Rb.T @ Ra, Rb.T @ (Ca - Cb) * 7.0  # any length: only the direction is kept
        flow[2 * k] = np.linalg.norm(Cb - Ca)  # the speed proxy, here the true step length
    valid = np.arange(rows) % 2 == 0
    feat = {"poses": {"R": R, "t": t, "valid": valid, "trans_flow": flow, "K": np.diag([1.0, 1.0, 1.0]),
                      "analysis_width": np.asarray(640), "gap": np.asarray(2)}}
    est, frames = shared.estimated_trajectory(feat)
    np.testing.assert_array_equal(frames, np.arange(0, 2 * n, 2))
    np.testing.assert_allclose(est, c2w, atol=1e-9)


def test_pose_extractor_follows_the_rendered_camera_under_drift(tmp_path):
    """Relative poses against those engine-drift actually rendered (sideways drift under an LR yaw loop): each pair's
    rotation within a fraction of a degree and the baseline's sign right in >= 90 % of pairs. cv2.recoverPose's
    triangulated vote, used before, picked E's twisted rotation here (a 180-degree error) and, with 6 s keys, flipped
    27 of 73 baselines."""
    from worldgate.adapters import get_adapter
    from worldgate.evaluate.features.geometry import PoseExtractor
    from worldgate.evaluate.features import FeatureCache, compute_features, open_record
    from worldgate.experiments.validate import validation_manifest
    from worldgate.trajectories.suites import Case

    full = validation_manifest(tmp_path / "all.jsonl", 3.0).read_text().splitlines()
    m = tmp_path / "lr.jsonl"
    m.write_text(next(r for r in full if json.loads(r)["id"] == "first-007") + "\n")
    res = run_generate("engine-drift", str(m), tmp_path / "run", overrides=["model.width=256", "model.height=256"],
                       progress=False)
    assert res.exit_code == 0
    rec = open_record(tmp_path / "run" / "first-007")
    P = compute_features(rec, [PoseExtractor()], FeatureCache(tmp_path / "f"))[0]["poses"]
    ad = get_adapter("engine-drift", width=256, height=256)
    true = ad.render_poses(ad.plan(Case.from_dict(rec.meta["case"])))
    a = np.arange(0, len(true) - 2, 2)
    Ra, Rb, Ca, Cb = true[a, :3, :3], true[a + 2, :3, :3], true[a, :3, 3], true[a + 2, :3, 3]
    R_true = np.einsum("nji,njk->nik", Rb, Ra)  # camera a -> camera b
    t_true = np.einsum("nji,nj->ni", Rb, Ca - Cb)
    err = np.degrees(shared.rotation_angles(np.einsum("nji,njk->nik", R_true, P["R"][a])))
    assert err.mean() < 0.3 and err.max() < 2.0, (err.mean(), err.max())
    est = np.linalg.norm(P["t"][a], axis=1) > 0
    assert est.sum() >= len(a) // 2  # the drift's translation is seen in most pairs
    cos = np.einsum("ij,ij->i", P["t"][a][est], t_true[est]) / np.linalg.norm(t_true[est], axis=1)
    assert (cos < 0).mean() <= 0.1, f"{(cos < 0).sum()} of {est.sum()} baselines point the wrong way"


def test_learned_extractors_share_torchs_threads_out_by_pool_thread(run, tmp_path, monkeypatch):
    """Learned extractors infer in update() on the pool's threads: torch's intra-op threads are cores per pool thread
    meanwhile (no oversubscription with two models at once), and the caller's count comes back afterwards."""
    torch = pytest.importorskip("torch")
    from worldgate.evaluate import features as F
    from worldgate.evaluate.features import pool
    from worldgate.evaluate.features import Extractor

    class Probe(Extractor):
        version = "1"

        def __init__(self, name):
            self.name, self.seen = name, set()

        def start(self, rec):
            pass

        def update(self, i, frame):
            self.seen.add(torch.get_num_threads())

        def finish(self):
            return {"n": np.asarray(len(self.seen))}

    monkeypatch.setattr(pool, "usable_cores", lambda: 6)
    before = torch.get_num_threads()
    torch.set_num_threads(5)  # a caller's own count, neither the machine's nor the pass's
    try:
        rec = F.open_record(next(p for p in sorted(run.iterdir()) if (p / "meta.json").exists()))
        exs = [Probe("probe_a"), Probe("probe_b")]
        F.compute_features(rec, exs, F.FeatureCache(tmp_path / "f"))
        assert exs[0].seen == exs[1].seen == {3}  # 6 cores over 2 pool threads
        assert torch.get_num_threads() == 5
    finally:
        torch.set_num_threads(before)
