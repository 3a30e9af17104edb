import math

import numpy as np
import pytest

from worldgate.trajectories import Look, Move, Segment, Trajectory, TrajectoryError, parse_segments, resolve
from worldgate.trajectories import library

FPS = 16.0


def yaw_pitch(T):
    """(yaw, pitch) in degrees from a c2w rotation R = R_y(yaw) R_x(pitch)."""
    f = T[:3, 2]  # forward axis in world
    return math.degrees(math.atan2(f[0], f[2])), math.degrees(math.asin(-f[1]))


def test_w_moves_monotonically_along_camera_z_without_rotation():
    P = library.worldmark(1).poses(FPS)
    assert P.shape == (320, 4, 4)
    np.testing.assert_array_equal(P[:, :3, :3], np.broadcast_to(np.eye(3), (320, 3, 3)))
    z = P[:, 2, 3]
    assert np.all(np.diff(z) > 0)
    np.testing.assert_allclose(np.diff(z), 1.4 / FPS, rtol=1e-12)
    assert np.all(P[:, 0, 3] == 0) and np.all(P[:, 1, 3] == 0)
    assert library.worldmark(1).pose_at(20.0)[2, 3] == pytest.approx(28.0)


def test_r_yaws_right_monotonically_with_exactly_zero_translation():
    P = library.worldmark(5).poses(FPS)
    assert np.all(P[:, :3, 3] == 0.0)  # exactly zero, not merely small
    yaw = np.unwrap(np.radians([yaw_pitch(T)[0] for T in P]))
    assert np.all(np.diff(yaw) > 0)  # right = positive yaw
    np.testing.assert_allclose(np.degrees(np.diff(yaw)), 25.0 / FPS, rtol=1e-9)
    pitch = [yaw_pitch(T)[1] for T in P]
    np.testing.assert_allclose(pitch, 0.0, atol=1e-12)


def test_yaw_right_sign_turns_forward_towards_plus_x():
    T = Trajectory.parse("R1").pose_at(1.0)
    forward = T[:3, 2]
    assert forward[0] > 0.4  # 25 degrees to the right: +X in OpenCV axes
    assert T[:3, 0][2] < 0  # the right axis swings towards -Z
    T = Trajectory.parse("L1").pose_at(1.0)
    assert T[:3, 2][0] < -0.4


def test_pitch_up_tilts_forward_towards_minus_y_and_never_moves():
    P = Trajectory.parse("^2").poses(FPS)
    assert np.all(P[:, :3, 3] == 0.0)
    fy = P[:, 1, 2]  # forward's Y component (Y is down)
    assert np.all(np.diff(fy) < 0)
    yaw = [yaw_pitch(T)[0] for T in P]
    np.testing.assert_allclose(yaw, 0.0, atol=1e-12)


@pytest.mark.parametrize("name", ["LRLR", "LRLRLR", "LR"])
def test_rotation_loops_return_to_start(name):
    t = library.get(name)
    np.testing.assert_allclose(t.pose_at(t.duration), np.eye(4), atol=1e-6)
    P = t.poses(FPS)
    assert np.all(P[:, :3, 3] == 0.0)
    # the final hold frames sit exactly at the start pose
    h = [p for p in t.phases() if p.name == "H"][0]
    a, b = h.frame_range(FPS, len(P))
    assert b > a
    np.testing.assert_allclose(P[a:b], np.broadcast_to(np.eye(4), (b - a, 4, 4)), atol=1e-6)


def test_frbl_square_closes():
    t = library.get("FRBL")
    np.testing.assert_allclose(t.pose_at(t.duration), np.eye(4), atol=1e-9)
    corners = [t.pose_at(b)[:3, 3] for b in t.boundaries()]
    side = 1.4 * library.WMB_SIDE_SECONDS
    np.testing.assert_allclose(corners[2], [0, 0, side], atol=1e-12)  # after V and F
    np.testing.assert_allclose(corners[3], [side, 0, side], atol=1e-12)  # after strafe right
    np.testing.assert_allclose(corners[4], [side, 0, 0], atol=1e-12)
    names = [p.name for p in t.phases()]
    assert names == ["V", "D1", "R1", "H"]
    assert [p.segments for p in t.phases()][1] == (1, 2, 3)


def test_lrud_returns_through_pitch():
    t = library.get("LRUD")
    names = [p.name for p in t.phases()]
    assert names == ["V", "D1", "R1", "D2", "R2", "H"]
    b = t.boundaries()
    top = t.pose_at(b[4])  # after V, L, R, U: pitched up 45 degrees
    assert yaw_pitch(top)[1] == pytest.approx(45.0)
    assert yaw_pitch(top)[0] == pytest.approx(0.0, abs=1e-9)
    left = t.pose_at(b[2])
    assert yaw_pitch(left)[0] == pytest.approx(-90.0)
    np.testing.assert_allclose(t.pose_at(t.duration), np.eye(4), atol=1e-6)
    assert np.all(t.poses(FPS)[:, :3, 3] == 0.0)


def test_worldmark_protocol_ids_and_timing():
    assert len(library.WORLDMARK_PROTOCOL) == 15
    t = library.worldmark(11)  # WSW
    assert [s.move for s in t.segments] == [Move.FORWARD, Move.BACK, Move.FORWARD]
    assert t.duration == 60.0 and t.n_frames(16) == 960
    assert t.segment_frames(16) == [(0, 320), (320, 640), (640, 960)]
    assert [p.name for p in t.phases()] == ["D1", "R1", "D2"]
    t = library.worldmark(6)  # WS
    np.testing.assert_allclose(t.pose_at(40.0), np.eye(4), atol=1e-9)
    t = library.worldmark(9)  # WR: yaw, not strafe
    assert t.segments[1] == Segment(Move.IDLE, Look.YAW_RIGHT, 20.0)
    with pytest.raises(TrajectoryError, match="1..15"):
        library.worldmark(16)


def test_walking_while_turning_is_an_exact_arc():
    t = Trajectory.parse("W+R14.4")  # 360 degrees at 25 deg/s: a full circle back to the start
    np.testing.assert_allclose(t.pose_at(14.4)[:3, 3], 0.0, atol=1e-9)
    r = 1.4 / math.radians(25.0)
    mid = t.pose_at(7.2)[:3, 3]
    np.testing.assert_allclose(mid, [2 * r, 0, 0], atol=1e-9)  # turning right: circle centred at +X


def test_text_round_trip_and_grammar():
    text = "_1 W20 R2.5 W+L3 ^1.25 v1.25 A0.5 D0.5 S1"
    segs = parse_segments(text)
    assert Trajectory(segs).to_text() == text
    assert segs[4].look is Look.PITCH_UP and segs[5].look is Look.PITCH_DOWN
    assert segs[7].move is Move.STRAFE_RIGHT and segs[7].look is Look.IDLE  # D is strafe, never pitch


@pytest.mark.parametrize("text,bad", [("W20 X3", "X3"), ("W20 R", "'R'"), ("W+A2", "W+A2"), ("U2", "U2"),
                                      ("w2", "w2"), ("W0", "W0"), ("W+R+^2", "W+R+^2")])
def test_malformed_text_names_the_token_and_grammar(text, bad):
    with pytest.raises(TrajectoryError) as e:
        parse_segments(text)
    assert bad in str(e.value) and "Grammar" in str(e.value)


def test_names_resolve_by_name_not_letters():
    t = resolve("LRUD")
    assert [s.look for s in t.segments[1:5]] == [Look.YAW_LEFT, Look.YAW_RIGHT, Look.PITCH_UP, Look.PITCH_DOWN]
    assert all(s.move is Move.IDLE for s in t.segments)  # 'D' here is pitch-down, not strafe
    assert resolve("worldmark:7").segments[0].look is Look.YAW_LEFT
    with pytest.raises(TrajectoryError, match="LRUD"):
        resolve("LRDU")  # a near miss gets a did-you-mean


def test_poses_are_rigid_transforms():
    for name in library.names():
        P = library.get(name).poses(4.0)
        R = P[:, :3, :3]
        np.testing.assert_allclose(R @ R.transpose(0, 2, 1), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)
        np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)


def test_frames_past_the_end_hold_the_final_pose():
    t = Trajectory.parse("W1")
    P = t.poses(16, 24)  # 8 padding frames
    np.testing.assert_array_equal(P[16:], np.broadcast_to(t.pose_at(1.0), (8, 4, 4)))
    assert P[15, 2, 3] < P[16, 2, 3] == pytest.approx(1.4)
