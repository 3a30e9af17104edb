"""WorldMemBench protocol pieces on synthetic inputs: camera following accumulated over adjacent frames, Environment
Visible refusing a return frame not chosen by estimated orientation, and the Engine suite's paired content."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from worldgate.evaluate.worldmembench.camera import camera_following
from worldgate.evaluate.worldmembench.params import PARAMS
from worldgate.evaluate.worldmembench.static import static_memory_scores

PHASES = [{"name": "V", "frames": [0, 2]}, {"name": "D1", "frames": [2, 6]}, {"name": "R1", "frames": [6, 10]},
          {"name": "H", "frames": [10, 11]}]
TRAJ = {"n_frames": 11, "phases": PHASES, "segments": [{"look": "idle"}, {"look": "left"}, {"look": "right"}]}
YAW = np.array([0, 0, 0, 3, 6, 9, 12, 9, 6, 3, 0], float)  # degrees: out 12 (arriving at frame 6) and back


def _c2w(yaw):
    P = np.repeat(np.eye(4)[None], len(yaw), axis=0)
    P[:, :3, :3] = Rotation.from_euler("y", np.asarray(yaw)[:, None], degrees=True).as_matrix()
    return P


def _pose_feature(yaw, gain=1.0, gap=1):
    """A pose feature (PoseExtractor's layout) whose frame j -> j+gap rotations turn ``gain`` times the commanded."""
    n = len(yaw) - gap
    R = np.stack([Rotation.from_euler("y", gain * (yaw[j + gap] - yaw[j]), degrees=True).as_matrix().T
                  for j in range(n)])
    valid = np.array([j % gap == 0 for j in range(n)])
    return {"R": R, "t": np.zeros((n, 3)), "valid": valid, "trans_flow": np.zeros(n), "K": np.eye(3),
            "analysis_width": np.asarray(256), "gap": np.asarray(gap)}


def test_rotation_rpe_is_accumulated_error_over_accumulated_commanded_angle():
    rec = {"poses": _c2w(YAW), "fps": 16.0, "trajectory": TRAJ}
    out = camera_following({"camera_poses": _pose_feature(YAW, gain=1.1)}, rec)
    # every adjacent step turns 10 % too far: sum of errors 0.1 * 24 deg over the 24 deg commanded
    s = out["camera_rpe_rot"]
    assert s.value == pytest.approx(0.1, abs=1e-5)
    assert s.detail["accumulated_error_deg"] == pytest.approx(2.4, abs=1e-3) and s.detail["target_deg"] == pytest.approx(24.0)
    assert s.detail["step_frames"] == 1 and s.detail["steps"] == 10 and s.detail["estimator"] == "classical (camera_poses)"
    assert s.detail["per_revisit"] == [pytest.approx(0.1, abs=1e-5)]  # one departure-and-revisit cycle, D1 + R1
    assert out["camera_rpe_trans"].value is None and "no translation" in out["camera_rpe_trans"].reason
    exact = camera_following({"camera_poses": _pose_feature(YAW)}, rec)["camera_rpe_rot"]
    assert exact.value == pytest.approx(0.0, abs=1e-5)
    # only the shared 2-frame pose feature: the same sums over its steps, and the detail says so
    two = camera_following({"poses": _pose_feature(YAW, gain=1.1, gap=2)}, rec)["camera_rpe_rot"]
    assert two.detail["step_frames"] == 2 and two.detail["estimator"] == "classical (poses)"
    assert two.value == pytest.approx(0.1, abs=1e-5)
    # a translating path: classical poses give no translation RPE (they do not resolve it per adjacent step)
    moving = _c2w(YAW)
    moving[:, 2, 3] = np.linspace(0.0, 1.0, len(YAW))
    tr = camera_following({"camera_poses": _pose_feature(YAW)}, {**rec, "poses": moving})["camera_rpe_trans"]
    assert tr.value is None and "learned pose estimator" in tr.reason


def test_environment_visible_needs_the_estimated_orientation():
    emb = np.tile(np.eye(4)[:1], (11, 1))
    rec = {"trajectory": TRAJ, "poses": _c2w(YAW), "fps": 16.0}
    got = static_memory_scores({"appearance": {"emb": emb}}, rec, "learned", PARAMS)  # no pose feature at all
    v = got["environment_visible"]
    assert v.value is None and "no pose estimate" in v.reason and "--backend classical" in v.reason
    assert "depth-anything-3" in v.reason  # what would make it run under --backend learned
    with_poses = static_memory_scores({"appearance": {"emb": emb}, "poses": _pose_feature(YAW, gap=2)}, rec,
                                      "classical", PARAMS)["environment_visible"]
    assert with_poses.value == pytest.approx(1.0) and with_poses.detail["revisits"][0]["by"] == "orientation"
    assert with_poses.detail["revisits"][0]["frame"] == 10 and with_poses.detail["revisits"][0]["departure_deg"] \
        == pytest.approx(12.0)
    # --backend learned: no shared pose feature, DA3's frame t -> t+1 chain (camera_poses) chooses the frame
    da3 = static_memory_scores({"appearance": {"emb": emb}, "camera_poses": _pose_feature(YAW)}, rec, "learned",
                               PARAMS)["environment_visible"]
    assert da3.value == pytest.approx(1.0) and da3.detail["revisits"][0]["by"] == "orientation"
    assert da3.detail["revisits"][0]["frame"] == 10 and da3.detail["revisits"][0]["departure_deg"] \
        == pytest.approx(12.0)
    inactive = static_memory_scores({"appearance": {"emb": emb}, "camera_poses": {"inactive": np.asarray(True)}},
                                    rec, "learned", PARAMS)["environment_visible"]
    assert inactive.value is None and "depth-anything-3" in inactive.reason
    bad = _pose_feature(YAW, gap=2)
    bad["valid"][:] = False  # a pose chain with no estimated pair: the reason names the share
    why = static_memory_scores({"appearance": {"emb": emb}, "poses": bad}, rec, "classical", PARAMS)
    assert why["environment_visible"].value is None and "0% of its frame pairs" in why["environment_visible"].reason
    square = dict(TRAJ, segments=[{"look": "idle"}, {"look": "idle"}])  # a translation loop returns by position
    sq = static_memory_scores({"appearance": {"emb": emb}}, dict(rec, trajectory=square), "learned", PARAMS)
    assert sq["environment_visible"].value == pytest.approx(1.0)
    assert sq["environment_visible"].detail["revisits"][0]["by"] == "arrival (translation loop)"


def test_engine_suite_renders_each_content_under_every_trajectory():
    from worldgate.trajectories.worldmembench import worldmembench_engine_suite

    cases = worldmembench_engine_suite(full=True)
    by = {}
    for c in cases:
        by.setdefault(c.tags["content"], {})[c.tags["trajectory"]] = c.scene["seed"]
    assert len(cases) == 100 and len(by) == 20
    assert all(len(t) == 5 and len(set(t.values())) == 1 for t in by.values())  # one scene per content
    assert len({next(iter(t.values())) for t in by.values()}) == 20


def test_translation_rpe_alignment_equals_evos_trajectory_align():
    """The accumulated translation RPE aligns the estimate as evo's PoseTrajectory3D.align(correct_scale=True) does
    (Umeyama on positions, then every pose), computed on arrays."""
    from evo.core.trajectory import PoseTrajectory3D
    from scipy.spatial.transform import Rotation

    from worldgate.evaluate.worldmembench.camera import _rpe_trans, rpe_translation

    rng = np.random.default_rng(0)
    n = 50

    def traj():
        T = np.tile(np.eye(4), (n, 1, 1))
        T[:, :3, :3] = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.05, (n, 3)), 0)).as_matrix()
        T[:, :3, 3] = np.cumsum(rng.normal(0, 1.0, (n, 3)), 0)
        return T

    cmd, est = traj(), traj()
    L = np.linalg.norm(np.diff(cmd[:, :3, 3], axis=0), axis=1).sum()
    ref = cmd.copy()
    ref[:, :3, 3] /= L
    ts = np.arange(n) / 16.0
    tr, te = PoseTrajectory3D(poses_se3=list(ref), timestamps=ts), PoseTrajectory3D(poses_se3=list(est), timestamps=ts)
    te.align(tr, correct_scale=True)
    want = rpe_translation(np.asarray(tr.poses_se3), np.asarray(te.poses_se3)).sum()
    assert _rpe_trans(est, cmd, L, np.arange(n), 16.0) == pytest.approx(want, rel=1e-12)
