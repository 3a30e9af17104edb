"""LingBot-World v2: v1's files, but F = 16m-3 so no 4-latent chunk truncation squeezes the trajectory."""

import numpy as np
import pytest

from adapter_conformance import AdapterConformance, worldmark_case
from test_adapter_lingbot_world import _checkout, own_generate, plan_argv
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


# ------------------------------------------------------------------------------------------- gpus=N, setup, output
@pytest.mark.parametrize("n", [2, 4, 5, 8, 10, 20, 40])
def test_gpus_n_is_the_readmes_torchrun_with_fsdp_and_ulysses_n(n):
    """README.md:108 / run_fast.sh:9-21: torchrun --nproc_per_node=8 generate.py ... --dit_fsdp --t5_fsdp
    --ulysses_size 8 ... --local_attn_size 18 --sink_size 6; N must divide the 40 heads (generate.py:261-263)."""
    cmd = get_adapter("lingbot-world-v2", gpus=n).plan(worldmark_case(1)).files["command.txt"]
    assert cmd == (f"python -m torch.distributed.run --standalone --nproc_per_node={n} generate.py --size 480*832 "
                   "--ckpt_dir CKPT/lingbot-world-v2-14b-causal-fast --image 000.jpg --action_path ACTION_DIR "
                   "--frame_num 333 --chunk_size 4 --local_attn_size 18 --sink_size 6 --base_seed SEED --save_dir OUT "
                   "--save_file OUT/video.mp4 --prompt \"$(cat prompt.txt)\" "
                   f"--dit_fsdp --t5_fsdp --ulysses_size {n}\n")


def test_gpus_1_is_one_plain_process_and_others_are_refused(lb2):
    from worldgate.adapters import AdapterError

    cmd = lb2.plan(worldmark_case(1)).files["command.txt"]
    assert cmd.startswith("python generate.py --size 480*832 ") and "--ulysses_size" not in cmd and "fsdp" not in cmd
    assert cmd == get_adapter("lingbot-world-v2", gpus="1").plan(worldmark_case(1)).files["command.txt"]
    with pytest.raises(AdapterError, match="gpus=3 cannot run"):
        get_adapter("lingbot-world-v2", gpus=3).plan(worldmark_case(1))


def test_repo_spec_pins_the_commit_and_the_weights_the_command_reads():
    import worldgate.adapters.lingbot_world_v2 as mod

    spec = mod.LingBotWorldV2.repo_spec
    assert spec.commit == "2648877f763a06cc743bcd919936da4d25f12e7b" and spec.commit in mod.__doc__
    assert spec.subdir == "" and spec.requirements == ("requirements.txt",)
    assert spec.weights_dir == "lingbot-world-v2-14b-causal-fast" == mod.LingBotWorldV2.CKPT
    assert spec.weights_patterns == ("models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*", "Wan2.1_VAE.pth",
                                     "transformers/*")
    assert lb2_output() == "video.mp4"


def lb2_output():
    return get_adapter("lingbot-world-v2").plan(worldmark_case(1)).extra["output_video"]


LINGBOT_V2 = _checkout("LINGBOT_WORLD_V2_CHECKOUT", "2648877f763a06cc743bcd919936da4d25f12e7b")


@pytest.mark.skipif(LINGBOT_V2 is None, reason="set LINGBOT_WORLD_V2_CHECKOUT to a checkout of "
                                               "robbyant/lingbot-world-v2 at 2648877f763a06cc743bcd919936da4d25f12e7b")
@pytest.mark.parametrize("n", [1, 8])
def test_the_checkouts_own_parser_takes_the_gpus_n_command(n, tmp_path, monkeypatch):
    """v2's generate.py argparse + validation read the gpus=N command as its README runs it (Ulysses N, FSDP, window
    18 with a sink of 6, chunks of 4) and its config's 40 heads split over N (generate.py:261-263)."""
    launcher, argv, plan, native = plan_argv("lingbot-world-v2", n, tmp_path)
    gen, args = own_generate(LINGBOT_V2, argv, monkeypatch)
    assert launcher == (["py"] if n == 1 else ["py", "-m", "torch.distributed.run", "--standalone",
                                               f"--nproc_per_node={n}"])
    assert (args.ulysses_size, args.dit_fsdp, args.t5_fsdp) == ((1, False, False) if n == 1 else (n, True, True))
    assert gen.WAN_CONFIGS[args.task].num_heads == 40 and 40 % args.ulysses_size == 0
    assert (args.infer_mode, args.chunk_size, args.local_attn_size, args.sink_size) == ("causal_fast", 4, 18, 6)
    assert args.max_attention_size is None and args.size == "480*832"
    assert args.action_path == str(native / "action") and args.frame_num == plan.n_frames == 973
    assert ((args.frame_num - 1) // 4 + 1) % args.chunk_size == 0  # whole chunks: no squeeze (image2video.py:498-500)
    assert args.ckpt_dir == str(tmp_path / "w" / "lingbot-world-v2-14b-causal-fast") and args.base_seed == 11
    assert args.save_dir == str(tmp_path / "out") and args.save_file == str(tmp_path / "out" / "video.mp4")
    assert args.prompt == "A test scene." and args.image == "/data/img 000.jpg"
