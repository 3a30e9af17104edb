"""DreamX-World-5B (AR): one JSON item with per-run key strings and frame weights; 0.075 units and 1.5 deg per frame,
frame 0's key absorbed, N = 4(L-1)+1 pixel frames with L % 3 == 0, 16 fps."""

import math

import numpy as np
import pytest

from adapter_conformance import (REAL_K, REAL_SIZE, AdapterConformance, gated_checkout, gated_plan, lift_functions,
                                 worldmark_case)
from worldgate.adapters import UnsupportedMotion, get_adapter
from worldgate.adapters.dreamx_world import segment_frames_rule
from worldgate.trajectories import Trajectory, library
from worldgate.trajectories.suites import Case


class TestDreamXWorldConformance(AdapterConformance):
    adapter_name = "dreamx-world"


@pytest.fixture
def dx():
    return get_adapter("dreamx-world")


def model_allocation(seq, weights, n):
    """The AR path's frame allocation (utils/trajectory_processor.py:869-881), written out by hand."""
    total, out, done = sum(weights), [], 0
    for i, (k, w) in enumerate(zip(seq, weights)):
        f = n - done if i == len(seq) - 1 else min(max(1, round(n * w / total)), n - done)
        out += [k] * f
        done += f
    return out


def lrud_case():
    return Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE, prompt="p")


def test_id1_forward_golden(dx):
    p = dx.plan(worldmark_case(1))
    item = p.files["dreamx_input.json"][0]
    # 320 steps + the conditioning frame: L = 81 latents (81 % 3 == 0), N = 4*80+1 = 321 pixel frames
    assert p.extra["num_output_frames"] == 81 and p.n_frames == 321 and p.segment_frames == [(0, 320)]
    assert item["action_seq"] == ["w"] and item["action_speed_list"] == [321]
    assert item["caption"] == "First-person view. A test scene." and item["image_path"] == "000.jpg"
    c2w = p.arrays["c2w"]
    # frame 0's step is absorbed by the relative-pose step: frame 1 is ONE step (0.075), frame 320 is 320 steps
    assert c2w[1, 2, 3] == pytest.approx(0.075) and c2w[320, 2, 3] == pytest.approx(24.0)
    np.testing.assert_allclose(c2w[:, 2, 3], 0.075 * np.arange(321), atol=1e-12)
    assert not c2w[:, :2, 3].any()
    assert "--num_output_frames 81 --fps 16" in p.files["command.txt"] and "--chunk_relative" in p.files["command.txt"]


def test_id6_allocation_off_by_one_golden(dx):
    p = dx.plan(worldmark_case(6))  # W20 S20
    item = p.files["dreamx_input.json"][0]
    # 640 steps -> L = 162 (161 is not a multiple of 3), N = 645; W gets 320 steps + the absorbed frame 0
    assert p.extra["num_output_frames"] == 162 and p.n_frames == 645
    assert item["action_seq"] == ["w", "s", " "] and item["action_speed_list"] == [321, 320, 4]
    assert p.segment_frames == [(0, 320), (320, 640)]
    keys = model_allocation(item["action_seq"], item["action_speed_list"], 645)
    assert keys == ["w"] * 321 + ["s"] * 320 + [" "] * 4 == list(p.arrays["frame_keys"])
    z = p.arrays["c2w"][:, 2, 3]
    assert z[320] == pytest.approx(24.0) and z[640] == pytest.approx(0.0, abs=1e-9)  # the W/S loop closes
    np.testing.assert_allclose(z[640:], 0.0, atol=1e-9)  # the tail holds
    # the naive weights [1, 1] would give 322 'w' frames (321 steps) and 323 's' steps: the loop would not close
    naive = model_allocation(["w", "s"], [1, 1], 645)
    assert naive.count("w") == 322 and naive.count("s") == 323


def test_id11_golden(dx):
    p = dx.plan(worldmark_case(11))  # W S W
    item = p.files["dreamx_input.json"][0]
    assert p.extra["num_output_frames"] == 243 and p.n_frames == 969  # 241 -> 243, 4*242+1
    assert item["action_seq"] == ["w", "s", "w", " "] and item["action_speed_list"] == [321, 320, 320, 8]
    assert p.segment_frames == [(0, 320), (320, 640), (640, 960)]
    z = p.arrays["c2w"][:, 2, 3]
    assert (z[320], z[640], z[960], z[968]) == pytest.approx((24.0, 0.0, 24.0, 24.0), abs=1e-9)
    assert sum(item["action_speed_list"]) == p.n_frames


def test_lrud_golden(dx):
    p = dx.plan(lrud_case())
    item = p.files["dreamx_input.json"][0]
    # V2 L3.6 R3.6 U1.8 D1.8 H1 at 16 fps, half up per segment: 32, 58, 58, 29, 29, 16 -> 222 steps, L = 57, N = 225
    assert p.segment_frames == [(0, 32), (32, 90), (90, 148), (148, 177), (177, 206), (206, 222)]
    assert item["action_seq"] == [" ", "j", "l", "i", "k", " "]
    assert item["action_speed_list"] == [33, 58, 58, 29, 29, 18] and p.n_frames == 225
    ang = p.arrays["yaw_pitch_deg"]
    assert ang[90].tolist() == [-87.0, 0.0] and ang[148].tolist() == [0.0, 0.0]  # 58 x 1.5 deg, not 90
    assert ang[177].tolist() == [0.0, 43.5] and ang[206].tolist() == [0.0, 0.0]
    assert not p.arrays["c2w"][:, :3, 3].any()
    assert sum("turn rate not matched" in c for c in p.caveats) == 4


def test_properties(dx):
    c2w = dx.plan(worldmark_case(1)).arrays["c2w"]
    assert np.all(np.diff(c2w[:321, 2, 3]) > 0)  # forward axis monotone during W
    p = dx.plan(worldmark_case(7))  # L R
    ang, c2w = p.arrays["yaw_pitch_deg"], p.arrays["c2w"]
    (l0, l1), (r0, r1) = p.segment_frames
    assert np.all(np.diff(ang[l0:l1 + 1, 0]) == -1.5) and np.all(np.diff(ang[r0:r1 + 1, 0]) == 1.5)
    assert not c2w[:, :3, 3].any() and not ang[:, 1].any()  # pure yaw: translation exactly zero, no pitch
    p = dx.plan(lrud_case())
    ang = p.arrays["yaw_pitch_deg"]
    (_, _), (l0, _), (_, r1), (u0, u1), (d0, d1), _ = p.segment_frames
    assert not ang[: u0 + 1, 1].any() and not ang[u0 + 1: d1 + 1, 0].any()  # pitch only during U/D
    assert np.all(np.diff(ang[u0:u1 + 1, 1]) == 1.5) and np.all(np.diff(ang[d0:d1 + 1, 1]) == -1.5)


def test_yaw_right_sign(dx):
    p = dx.plan(worldmark_case(5))  # R
    assert p.files["dreamx_input.json"][0]["action_seq"] == ["l"]  # l = pan right
    c2w = p.arrays["c2w"]
    # after 16 frames (24 deg) the camera's forward axis points towards +X: a right turn (fails if 'j' were emitted)
    assert c2w[16, 0, 2] == pytest.approx(math.sin(math.radians(24.0)))
    p = dx.plan(worldmark_case(7))  # L then R
    assert p.files["dreamx_input.json"][0]["action_seq"][:2] == ["j", "l"]
    assert p.arrays["c2w"][40, 0, 2] == pytest.approx(-math.sin(math.radians(60.0)))  # 60 deg left after 40 frames


def test_pitch_up_sign(dx):
    p = dx.plan(lrud_case())
    _, _, _, (u0, _), _, _ = p.segment_frames
    assert p.arrays["c2w"][u0 + 10, 1, 2] == pytest.approx(-math.sin(math.radians(15.0)))  # forward -> -Y: up


def test_lower_rate_is_matched_by_spread_presses(dx):
    c = Case(id="slow", suite="t", trajectory=Trajectory.parse("R4", yaw_rate=12.0), image="x.jpg")
    p = dx.plan(c)
    item = p.files["dreamx_input.json"][0]
    # 64 frames, 48 deg = 32 presses of 1.5 deg on every second frame; frame 0 absorbed; L = 18, N = 69
    assert p.n_frames == 69 and p.arrays["yaw_pitch_deg"][64, 0] == 48.0
    assert item["action_seq"][:4] == [" ", "l", " ", "l"] and item["action_speed_list"][:3] == [2, 1, 1]
    assert model_allocation(item["action_seq"], item["action_speed_list"], 69) == list(p.arrays["frame_keys"])
    assert any("matched by pressing 'l' on 32 of 64 frames" in c for c in p.caveats)


def test_intrinsics_regime_2(dx):
    p = dx.plan(worldmark_case(1))
    K = p.intrinsics
    assert K["regime"] == 2 and K["native_size"] == [1280, 704]
    assert K["native_model"]["fx_norm"] == pytest.approx(969.6969696969696 / 1920)
    assert K["native_model"]["fy_norm"] == pytest.approx(969.6969696969696 / 1080)
    # the record's block is pixels of 1280x704 (what evaluate reads): fx = 969.7 * 1280 / 1920, fy = 969.7 * 704 / 1080
    np.testing.assert_allclose(K["native"], [969.6969696969696 * 2 / 3, 969.6969696969696 * 704 / 1080, 640, 352])
    assert K["case_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(REAL_SIZE[0] / (2 * REAL_K[0]))))  # 68.3
    assert K["native_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(960 / 969.6969696969696)))  # 89.4
    assert K["native_hfov_deg"] == pytest.approx(89.42, abs=0.01)


def test_rounding_rule():
    assert segment_frames_rule(20) == 320 and segment_frames_rule(3.6) == 58 and segment_frames_rule(1.8) == 29
    assert segment_frames_rule(1 / 32) == 1  # half up


@pytest.mark.parametrize("text", ["^2 W2", "^2 R2", "W+^2"])
def test_moves_and_yaw_while_pitched_are_unsupported(dx, text):
    c = Case(id="pitched", suite="t", trajectory=Trajectory.parse(text), image="x.jpg")
    with pytest.raises(UnsupportedMotion, match="segment"):
        dx.plan(c)


def test_pitch_back_to_level_then_move_is_fine(dx):
    c = Case(id="ok", suite="t", trajectory=Trajectory.parse("^2 v2 W2"), image="x.jpg")
    p = dx.plan(c)
    assert p.files["dreamx_input.json"][0]["action_seq"] == ["i", "k", "w", " "]


def test_turn_rate_cap_is_in_the_caveats_and_info(dx):
    """1.5 deg/frame at 16 fps tops out at 24 deg/s: a 25 deg/s 20 s key turns 480 deg, not 500 (TP:834, 887-888)."""
    from worldgate.adapters import get_info

    p = dx.plan(worldmark_case(5))  # R20
    assert p.arrays["yaw_pitch_deg"][320].tolist() == [480.0, 0.0]
    assert any("yaw 480 deg" in c and "24 deg/s" in c and "commanded 500 deg" in c for c in p.caveats)
    assert "24 deg/s" in get_info("dreamx-world").notes


# ------------------------------------------------------------------------------------------- gpus, setup, output
def test_gpus_1_is_the_launchers_plain_process():
    """inference_ar_forcing.sh:33-39 runs one plain `python inference_ar_forcing.py` on CUDA_DEVICES."""
    cmd = get_adapter("dreamx-world").plan(worldmark_case(1)).files["command.txt"]
    assert cmd.startswith("python inference_ar_forcing.py --config_path configs/dreamx-ar/causal_camera_forcing_5b.yaml ")
    assert cmd == get_adapter("dreamx-world", gpus=1).plan(worldmark_case(1)).files["command.txt"]
    assert "--output_folder OUT " in cmd and "torch.distributed" not in cmd and "ulysses" not in cmd


@pytest.mark.parametrize("n", [2, 8])
def test_gpus_above_1_are_refused(n):
    """Only the bidirectional 5B-Cam script has sequence parallelism (inference_dreamx_5b.sh:21-36); the AR one has no
    distributed code, whatever inference_README.md:127 says."""
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match=f"dreamx-world has no multi-GPU inference .* gpus={n}"):
        get_adapter("dreamx-world", gpus=n).plan(worldmark_case(1))


def test_repo_spec_pins_the_commit_and_the_weights_folder():
    import worldgate.adapters.dreamx_world as mod

    spec = mod.DreamXWorld.repo_spec
    assert spec.commit == "a1f4c6e5e45600718e5236955f2e0702e53fc275" and spec.commit in mod.__doc__
    assert spec.subdir == "" and spec.requirements == ("requirements.txt",)
    assert spec.weights_dir == "DreamX-World-5B" and spec.weights_patterns == ()  # the Hub file name is not in code
    cmd = get_adapter("dreamx-world").plan(worldmark_case(1)).files["command.txt"]
    assert f"--base_checkpoint_path CKPT/{spec.weights_dir}/model.safetensors " in cmd


# ------------------------------------------------------------------------------------------- context policies
def _ctx_plan(dx, policy, text="W20"):
    from worldgate.adapters.context import ContextPolicy

    case = Case(id="c", suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE, prompt="p")
    plan = dx.plan(case)
    return plan, dx.with_context(plan, ContextPolicy(*policy) if isinstance(policy, tuple) else policy)


@pytest.mark.parametrize("policy,window", [
    (("sliding_window", 3), {"local_attn_size": 12, "sink_size": 3}),  # the release's own 12 / 3
    (("sliding_window", 1), {"local_attn_size": 6, "sink_size": 3}),
    (("sliding_window", 5), {"local_attn_size": 18, "sink_size": 3}),
    (("full_kv", None), {"local_attn_size": 81, "sink_size": 3}),  # W20: 320 steps -> L = 81 latents
    (("sliding_window", None), {"local_attn_size": 81, "sink_size": 3}),  # unlimited == full_kv
    (("sliding_window", 40), {"local_attn_size": 81, "sink_size": 3}),  # a window past the clip: the whole clip
])
def test_context_dry_run_shows_the_models_own_window(dx, policy, window):
    plan, ctx = _ctx_plan(dx, policy)
    assert plan.extra["num_output_frames"] == 81
    assert "context.json" not in plan.files  # with_context works on a copy
    cmd = ctx.files["command.txt"]
    assert "--config_path dreamx_context.yaml " in cmd
    assert "configs/dreamx-ar/causal_camera_forcing_5b.yaml" not in cmd
    assert cmd.replace("--config_path dreamx_context.yaml", "--config_path configs/dreamx-ar/"
                       "causal_camera_forcing_5b.yaml") == plan.files["command.txt"]  # nothing else changes
    cj = ctx.files["context.json"]
    assert cj["model_kwargs"] == window and cj["name"] == policy[0] and cj["budget"] == policy[1]
    assert cj["config_path"] == "dreamx_context.yaml" and cj["latents"] == 81
    assert any(f"local_attn_size {window['local_attn_size']}, sink_size {window['sink_size']}" in c
               for c in ctx.caveats)


def test_sliding_window_without_sink_drops_the_sink(dx):
    from worldgate.adapters.context import ContextPolicy

    _, ctx = _ctx_plan(dx, ContextPolicy("sliding_window", 2, sink=False))
    assert ctx.files["context.json"]["model_kwargs"] == {"local_attn_size": 9, "sink_size": 0}
    assert any("the 2 most recent chunk(s)" in c for c in ctx.caveats)


def test_window_matches_the_policys_selection():
    """The model's window (sink latents + the last local_attn_size - sink latents, the block itself included,
    causal_camera_model_2_2_prope_infinity.py:207-227) holds exactly the chunks the policy selects."""
    from worldgate.adapters.context import ContextPolicy, chunk_infos
    from worldgate.adapters.dreamx_world import context_window

    L = 27
    chunks = chunk_infos(np.tile(np.eye(4), (4 * (L - 1) + 1, 1, 1)), 12, first=9)
    assert len(chunks) == L // 3
    for pol in [ContextPolicy("sliding_window", b, sink=s) for b in (1, 2, 3, 5, 20) for s in (True, False)] + \
            [ContextPolicy("full_kv")]:
        w = context_window(pol, L)
        for k in range(1, len(chunks)):
            end = 3 * (k + 1)  # latents in the cache once block k is written
            local = range(max(w["sink_size"], end - (w["local_attn_size"] - w["sink_size"])), end)
            seen = sorted({i // 3 for i in list(range(min(w["sink_size"], end))) + list(local)} - {k})
            assert seen == pol.select(chunks[:k], chunks[k]), (pol, k)


def test_fov_is_refused_with_the_reason(dx):
    why = dx.context_support("fov")
    assert "cannot apply context policy 'fov'" in why
    assert "causal_camera_model_2_2_prope_infinity.py:207-227" in why and "no retrieval code" in why
    assert dx.context_support("full_kv") is None and dx.context_support("sliding_window") is None
    assert dx.info.context_policies == ("full_kv", "sliding_window")
    from worldgate.adapters.base import AdapterError
    from worldgate.adapters.context import ContextPolicy

    with pytest.raises(AdapterError, match="'fov'"):
        _ctx_plan(dx, ContextPolicy("fov", 3))


FAKE_YAML = """model_kwargs:
  model_name: Wan2.2-TI2V-5B-Camera
  timestep_shift: 5.0
  model_root_path: ./  # Path containing wan_models/Wan2.2-TI2V-5B-Camera/ directory
  eprope: false

denoising_step_list:
- 1000
- 750
num_frame_per_block: 3
context_noise: 0.1
"""
FAKE_DEFAULT = "independent_first_frame: false\nwarp_denoising_step: false\ncontext_noise: 0.1\n"


def fake_checkout(root):
    d = root / "configs" / "dreamx-ar"
    d.mkdir(parents=True)
    (d / "causal_camera_forcing_5b.yaml").write_text(FAKE_YAML)
    (d / "default_config.yaml").write_text(FAKE_DEFAULT)
    return root


def test_rollout_derives_the_config_from_the_checkouts_own_yaml(dx, tmp_path, monkeypatch):
    import yaml

    import worldgate.adapters.repo as repo
    from worldgate.adapters.base import Chunk
    from worldgate.adapters.context import ContextPolicy

    checkout = fake_checkout(tmp_path / "checkout")
    seen = {}

    def fake_run(name, spec, paths, plan, seed=None):
        native = tmp_path / "native"
        plan.write(native, seed=seed)
        seen["argv"] = repo.command_argv(plan.files["command.txt"], plan.files, native, paths, plan.extra["image"],
                                         seed)
        seen["native"] = native
        yield Chunk(start=0, frames=None, video=tmp_path / "v.mp4", extra={})

    monkeypatch.setattr(repo, "run_checkout", fake_run)
    dx._paths = {"repo": checkout, "ckpt": tmp_path / "ckpt", "python": "python", "extra": {}}
    plan, _ = _ctx_plan(dx, ContextPolicy("sliding_window", 2))
    chunks = list(dx.rollout(plan, context=ContextPolicy("sliding_window", 2), seed=7))
    native = seen["native"]
    cfg = seen["argv"][seen["argv"].index("--config_path") + 1]
    assert cfg == str(native / "dreamx_context.yaml")
    derived = (native / "dreamx_context.yaml").read_text()
    want = yaml.safe_load(FAKE_YAML)
    want["model_kwargs"].update(local_attn_size=9, sink_size=3)
    assert yaml.safe_load(derived) == want  # only the two keys change
    assert derived.replace("  local_attn_size: 9\n  sink_size: 3\n", "") == FAKE_YAML
    assert (native / "default_config.yaml").read_text() == FAKE_DEFAULT  # beside it: loaded from its folder
    assert chunks[0].extra["files"]["dreamx_context.yaml"] == derived  # the record keeps the config that ran
    assert "context.json" not in plan.files and "dreamx_context.yaml" not in plan.files  # the plan is untouched


def test_derivation_refuses_a_yaml_that_already_sets_the_window(tmp_path):
    from worldgate.adapters.base import AdapterError
    from worldgate.adapters.dreamx_world import derive_config

    with pytest.raises(AdapterError, match="model_kwargs"):
        derive_config(FAKE_YAML.replace("  eprope: false\n", "  eprope: false\n  sink_size: 1\n"),
                      {"local_attn_size": 9, "sink_size": 3})
    with pytest.raises(AdapterError, match="model_kwargs"):
        derive_config("seed: 0\n", {"local_attn_size": 9, "sink_size": 3})


# --------------------------------------------------------------------------- the model's own trajectory (gated)

COMMIT = "a1f4c6e5e45600718e5236955f2e0702e53fc275"
DREAMX = gated_checkout("DREAMX_WORLD_CHECKOUT", COMMIT)


@pytest.mark.skipif(DREAMX is None, reason="set DREAMX_WORLD_CHECKOUT to a checkout of AMAP-ML/DreamX-World at "
                                           + COMMIT)
def test_the_checkouts_own_trajectory_builder_reads_the_plans_keys_and_weights(tmp_path):
    """The plan's dreamx_input.json through the AR script's own camera path (AR:268, 298-306): the keys lower-cased,
    zipped with the weights, utils/trajectory_processor.py's own generate_trajectory_from_json (the file imported as
    is) over 4 (L - 1) + 1 frames, its Camera rows, and get_relative_pose (lifted from inference_ar_forcing.py, which
    imports the pipeline) give exactly the plan's per-frame keys and its c2w relative to frame 0, and the look keys
    spread over a segment land on the commanded yaw and pitch at its end."""
    import importlib.util
    import json
    import sys

    pytest.importorskip("torch")
    pytest.importorskip("einops")
    spec = importlib.util.spec_from_file_location("dreamx_trajectory_processor_under_test",
                                                  DREAMX / "utils" / "trajectory_processor.py")
    tp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tp)
    ar = lift_functions(DREAMX / "inference_ar_forcing.py", ("get_relative_pose",), {"np": np})
    walk = "W1 R1 A1 L1 S1 ^0.5 v0.5 D1"
    plan, native, argv = gated_plan("dreamx-world", walk, tmp_path)
    L = int(argv[argv.index("--num_output_frames") + 1])
    num_pixel_frames = (L - 1) * 4 + 1  # AR:268
    [item] = json.loads((native / "dreamx_input.json").read_text())
    trajectory_spec = list(zip([a.lower() for a in item["action_seq"]], item["action_speed_list"]))  # AR:299-300
    _, cam_params_np, keys = tp.generate_trajectory_from_json(trajectory_spec=trajectory_spec,
                                                              num_frames=num_pixel_frames, return_cam_params=True)
    cams = [tp.Camera(cam_params_np[i].tolist()) for i in range(cam_params_np.shape[0])]
    rel = ar["get_relative_pose"](cams)  # frame 0 as the origin, as every chunk's poses are taken (AR:59-71)
    assert num_pixel_frames == plan.n_frames == len(cams) and L % 3 == 0
    assert keys == [k.lower() for k in plan.arrays["frame_keys"].tolist()]
    np.testing.assert_allclose(rel, plan.arrays["c2w"], rtol=0, atol=2e-5)
    assert len(set(keys)) >= 6 and sys.modules.get("dreamx_trajectory_processor_under_test") is None
    # each segment turns the model's camera by the commanded yaw or pitch to within half its 1.5-degree step, or by
    # what the plan's caveat for that segment says it reaches instead (its top rate is 24 deg/s at 16 fps; these
    # turns are commanded at 25). Frame j's pose is the commanded one at t = j / 16 s.
    commanded = Trajectory.parse(walk).poses(16.0, plan.n_frames)

    def yaw_pitch(c2w):
        return np.degrees([math.atan2(c2w[0, 2], c2w[2, 2]), math.asin(-c2w[1, 2])])

    short = 0
    for i, (a, b) in enumerate(plan.segment_frames):
        got, want = yaw_pitch(rel[b]) - yaw_pitch(rel[a]), yaw_pitch(commanded[b]) - yaw_pitch(commanded[a])
        if np.abs(got - want).max() <= 0.75 + 1e-6:
            continue
        k = int(np.argmax(np.abs(want)))
        said = [c for c in plan.caveats if c.startswith(f"segment {i + 1} (")]
        assert said and f"{abs(got[k]):.4g} deg" in said[0] and f"commanded {abs(want[k]):.4g} deg" in said[0], said
        short += 1
    assert short == 2  # R1, L1: 24 of the commanded 25 deg; ^0.5, v0.5 reach 12 of 12.5, within the half step
