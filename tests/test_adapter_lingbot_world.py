"""LingBot-World: exact native inputs (poses.npy + intrinsics.npy at 480x832 units, 4k+1 frames, 16 fps)."""

import math

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case


class TestLingBotConformance(AdapterConformance):
    adapter_name = "lingbot-world"


@pytest.fixture
def lb():
    return get_adapter("lingbot-world")


def test_id1_forward_golden(lb):
    p = lb.plan(worldmark_case(1))
    P = p.files["action/poses.npy"]
    assert P.dtype == np.float32 and P.shape == (321, 4, 4)  # 20 s at 16 fps + the conditioning frame: 4*80+1
    np.testing.assert_array_equal(P[:, :3, :3], np.broadcast_to(np.eye(3, dtype=np.float32), (321, 3, 3)))
    np.testing.assert_allclose(P[:, 2, 3], np.arange(321) * 1.4 / 16, rtol=1e-6)  # +Z forward, monotone
    assert np.all(np.diff(P[:, 2, 3]) > 0) and not P[:, 0, 3].any() and not P[:, 1, 3].any()
    assert p.segment_frames == [(0, 320)] and p.extra["frame_num"] == 321


def test_id6_and_id11_goldens(lb):
    p = lb.plan(worldmark_case(6))  # W then S: out and back
    P = p.files["action/poses.npy"]
    assert P.shape == (641, 4, 4) and p.segment_frames == [(0, 320), (320, 640)]
    assert P[320, 2, 3] == pytest.approx(28.0) and P[640, 2, 3] == pytest.approx(0.0, abs=1e-5)
    p = lb.plan(worldmark_case(11))  # W S W
    P = p.files["action/poses.npy"]
    assert P.shape == (961, 4, 4) and (961 - 1) % 4 == 0
    assert P[960, 2, 3] == pytest.approx(28.0, rel=1e-6)


def test_yaw_is_exact_and_translation_exactly_zero(lb):
    P = lb.plan(worldmark_case(5)).files["action/poses.npy"]  # R
    assert not P[:, :3, 3].any()  # the model max-normalises translation: pure rotation must carry none at all
    yaw = np.unwrap(np.arctan2(P[:, 0, 2], P[:, 2, 2]).astype(float))
    assert np.all(np.diff(yaw) > 0)  # sign test: yaw-right turns the forward axis towards +X (R_y(+theta))
    np.testing.assert_allclose(np.degrees(yaw[16]), 25.0, atol=1e-4)


def test_lrud_pitch_only_during_u_and_d(lb):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = lb.plan(c)
    P = p.files["action/poses.npy"]
    segs = p.segment_frames  # V, L, R, U, D, H
    pitch = np.degrees(np.arcsin(-P[:, 1, 2].astype(float)))
    a, b = segs[3]
    assert np.all(np.diff(pitch[a:b + 1]) > 0)  # U: pitch up (forward towards -Y)
    assert np.allclose(pitch[: segs[3][0]], 0, atol=1e-4)  # no pitch during V, L, R
    assert pitch[segs[4][1]] == pytest.approx(0.0, abs=1e-4)  # back through pitch
    assert not P[:, :3, 3].any()


def test_intrinsics_are_scaled_to_480x832_units(lb):
    p = lb.plan(worldmark_case(1))
    K = p.files["action/intrinsics.npy"]
    assert K.shape == (321, 4) and K.dtype == np.float32
    fx, fy, cx, cy = REAL_K
    w0, h0 = REAL_SIZE
    np.testing.assert_allclose(K[0], [fx * 832 / w0, fy * 480 / h0, cx * 832 / w0, cy * 480 / h0], rtol=1e-6)
    # the field of view the model sees equals the case's (the stretch keeps it)
    assert p.intrinsics["native_hfov_deg"] == pytest.approx(p.intrinsics["case_hfov_deg"], abs=1e-4)
    assert p.intrinsics["case_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(w0 / (2 * fx))))


def test_without_intrinsics_fails_loudly(lb):
    from worldgate.adapters import AdapterError

    c = Case(id="noK", suite="t", trajectory=library.worldmark(1), image="x.jpg")
    with pytest.raises(AdapterError, match="regime 4"):
        lb.plan(c)


@pytest.mark.parametrize("size,working", [((1536, 1024), (768, 512)), ((1920, 1080), (832, 464)),
                                          ((1024, 1024), (624, 624)), ((1024, 768), (720, 544))])
@pytest.mark.parametrize("name", ["lingbot-world", "lingbot-world-v2"])
def test_working_size_follows_the_image_aspect(name, size, working):
    """--size 480*832 is an area: wan/image2video.py:330-339 (v2 :488-497) picks the working size from the image's
    aspect ratio (3:2 -> 768x512, 16:9 -> 832x464, 1:1 -> 624x624, 4:3 -> 720x544)."""
    from worldgate.adapters.lingbot_world import working_size

    assert working_size(*size) == working
    w0, h0 = size
    fx = 0.8 * w0
    c = Case(id="ar", suite="t", trajectory=library.worldmark(1), image="x.jpg",
             intrinsics=[fx, fx, w0 / 2, h0 / 2], image_size=size)
    p = get_adapter(name).plan(c)
    assert (p.width, p.height) == working and p.extra["working_size"] == list(working)
    assert p.intrinsics["working_size"] == list(working) and p.intrinsics["native_size"] == [832, 480]
    K = p.files["action/intrinsics.npy"][0]  # the file stays in 480x832 units (what the model reads)
    np.testing.assert_allclose(K, [fx * 832 / w0, fx * 480 / h0, 416, 240], rtol=1e-6)
    ww, wh = working
    np.testing.assert_allclose(p.intrinsics["working"], [fx * ww / w0, fx * wh / h0, ww / 2, wh / 2], rtol=1e-6)
    assert p.intrinsics["native_hfov_deg"] == pytest.approx(p.intrinsics["case_hfov_deg"], abs=1e-4)
    assert any(f"runs at {ww}x{wh}, not 832x480" in cv for cv in p.caveats)
    assert "--size 480*832" in p.files["command.txt"]



def test_working_size_at_the_extreme_aspects():
    """Cases allow sides of 16..16384 px: even 1024:1 keeps one 16-pixel latent row (no zero-size video)."""
    from worldgate.adapters.lingbot_world import working_size

    assert working_size(16384, 16) == (20208, 16) and working_size(16, 16384) == (16, 20208)
