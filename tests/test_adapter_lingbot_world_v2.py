"""LingBot-World v2: v1's files, but F = 16m-3 so no 4-latent chunk truncation squeezes the trajectory."""

import numpy as np
import pytest

from adapter_conformance import AdapterConformance, worldmark_case
from worldgate.adapters import get_adapter


class TestLingBotV2Conformance(AdapterConformance):
    adapter_name = "lingbot-world-v2"


@pytest.fixture
def lb2():
    return get_adapter("lingbot-world-v2")


@pytest.mark.parametrize("aid,frames", [(1, 333), (6, 653), (11, 973)])
def test_frame_counts_are_whole_chunks(lb2, aid, frames):
    p = lb2.plan(worldmark_case(aid))
    P = p.files["action/poses.npy"]
    assert p.n_frames == frames and P.shape == (frames, 4, 4)
    lat = (frames - 1) // 4 + 1
    assert lat % 4 == 0  # the model's chunk truncation keeps every latent: poses stay on their frames
    n = 320 * len(p.segment_frames)
    np.testing.assert_array_equal(P[n:], np.broadcast_to(P[n], (frames - n, 4, 4)))  # the tail holds the end pose
    assert "--frame_num %d" % frames in p.files["command.txt"]


def test_poses_match_v1_on_the_shared_frames(lb2):
    v1 = get_adapter("lingbot-world").plan(worldmark_case(7)).files["action/poses.npy"]
    v2 = lb2.plan(worldmark_case(7)).files["action/poses.npy"]
    np.testing.assert_array_equal(v1, v2[: len(v1)])
    np.testing.assert_array_equal(lb2.plan(worldmark_case(7)).files["action/intrinsics.npy"][0],
                                  get_adapter("lingbot-world").plan(worldmark_case(7)).files["action/intrinsics.npy"][0])
