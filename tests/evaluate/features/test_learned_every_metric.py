"""Every WorldMark and WorldMemBench metric is available under ``--backend learned``: each learned feature of the
registry (``metrics.FEATURES["learned"]``) built by its registered constructor from a tiny random-weight model,
loaded from files the test writes through the loader that reads the real weights wherever the extractor has one (a
Hub-style folder, a weights file, a checkout, an environment variable), and the VLM judge through
``evaluate --judge PATH``; two small Engine runs (a WorldMark-shaped one, and one case of each WorldMemBench family)
scored by ``evaluate_run``. Exceptions, each listed with the reason its unavailable text must give: the measured
dynamic probe (WorldMemBench's classical-only proxy, never learned by design), and WorldMark's revisit memory, whose
protocol skips a round trip the measured flow does not follow (a random-weight flow network's never does)."""

import json
import math
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")  # RAFT, and the SAM2 / GroundingDINO processors
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")
pytest.importorskip("depth_anything_3")  # DA3: WorldMark's parallax depth and WorldMemBench's camera poses
pyiqa = pytest.importorskip("pyiqa")  # MUSIQ (imaging quality) and the Q-Align port
pytest.importorskip("pyiqa.archs.q_align.modeling_mplug_owl2", exc_type=ImportError)

from suite_cases import suite_case_manifest
from test_judge_vlm import tiny_qwen
from test_learned import clip_processor, dino_processor, tiny_models
from test_learned_da3 import tiny_api
from test_learned_identity import tiny_net
from test_learned_qalign import tiny_config, tiny_processor, tiny_tokenizer
from test_learned_targets import save_tiny_models
from test_learned_vggt import write_checkout

from worldgate.evaluate.features.models import qalign as Q
from worldgate.evaluate.features.models import vggt as LV
from worldgate.evaluate.metrics import FEATURES, ORDER, metric_info
from worldgate.evaluate.runner import evaluate_run
from worldgate.evaluate.worldmark import benchmark as WM
from worldgate.evaluate.worldmembench import benchmark as WMB
from worldgate.evaluate.worldmembench import dynamic as J
from worldgate.generate.runner import run_generate

#: metrics the benchmark defines as never learned, each with the words its unavailable text must hold: WorldMemBench's
#: measured dynamic probe is a proxy of the Engine's ground truth that runs under --backend classical only (its
#: ``events`` feature has no learned counterpart by design; the paper's protocol is the VLM judge, scored here)
NEVER_LEARNED = {m: "runs under --backend classical"
                 for m in ("dynamic_probe_score", "dynamic_probe_p_start", "dynamic_probe_conditional")}
#: metrics whose protocol refuses what a random-weight model measures, each with the words of its unavailable text:
#: WorldMark's revisit memory scores a round trip only when the measured flow follows the commanded reversal
#: (cv:250-258: direction, response, gain and undershoot gates, ``failed_gate="skip"``); a random-weight RAFT's flow
#: does not follow the camera, so WorldMark skips the trip (with trained weights it is scored). Asserted as scored in
#: range, or refused by those gates and by nothing else (every learned feature was there)
GATED_BY_RANDOM_FLOW = {"revisit_memory": "trip skipped by WorldMark's gates"}
#: the WorldMark-shaped cases: action 7 (L R, a rotation round trip) and action 8 (A D, a lateral one), 2 s per key
WM_CASES = ("third-real-006_007", "third-style-007_008")
#: one case of each WorldMemBench family; the environment case is the FRBL square (camera following's translation
#: RPE needs a commanded translation), the others rotation loops; at 6 fps with 1.2 s segments (30 degree turns)
WMB_CASES = ("human-LR-00", "object-LR-00", "environment-FRBL-00", "dynamic-LR-00")
SIZE = ["model.width=64", "model.height=64"]
WMB_OVERRIDES = SIZE + ["model.fps=6", "trajectory.seconds=1.2"]
#: what the scripted judge model says (through its own generation config): a gate opened and eight answers
REPLY = "START: yes\n" + "\n".join(f"Q{k}: {'yes' if k % 2 else 'no'}" for k in range(1, 9))


# ------------------------------------------------------------------------------------------------ the tiny models
def _save_judge(root):
    """The tiny Qwen2.5-VL and its processor saved as a folder ``AutoProcessor`` / ``AutoModelForImageTextToText``
    load; its generation config biases greedy decoding along :data:`REPLY` then the end token (each token biased
    after the tokens before it, longer contexts more), so the real generate/decode/parse path yields that reply."""
    from transformers import Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    model, proc = tiny_qwen()
    full = Qwen2_5_VLProcessor(image_processor=proc.image_processor, tokenizer=proc.tokenizer,
                               video_processor=Qwen2VLVideoProcessor(), chat_template=proc.chat_template)
    tok = proc.tokenizer
    # the reply's tokens after the generation prompt's last tokens (the context the first ones are biased in)
    head = tok.encode("<|im_start|>assistant\n", add_special_tokens=False)
    ids = head + tok.encode(REPLY, add_special_tokens=False) + [tok.eos_token_id]
    bias = {}
    for k in range(len(head), len(ids)):
        for L in range(1, min(k + 1, 8) + 1):
            seq = tuple(ids[k - L + 1:k + 1])
            bias[seq] = max(bias.get(seq, 0.0), 40.0 * L)
    model.generation_config.sequence_bias = [[list(k), v] for k, v in bias.items()]  # the JSON-safe form
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(root)
    full.save_pretrained(root)
    return str(root)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Every tiny model written where its loader looks, and the environment that points the loaders at them."""
    from safetensors.torch import save_file

    from worldgate.evaluate.features.models.loaders import aesthetic_mlp

    root = tmp_path_factory.mktemp("tiny-every")
    paths = save_tiny_models(root)  # DINOv2, SAM2 video, GroundingDINO folders
    _, depth, clip, _ = tiny_models()
    dino_processor().save_pretrained(paths["dino"])
    depth.save_pretrained(root / "depth")
    clip.save_pretrained(root / "clip")
    clip_processor().save_pretrained(root / "clip")
    torch.manual_seed(0)
    head = aesthetic_mlp(clip.config.projection_dim)
    with torch.no_grad():
        head[-1].bias.fill_(5.5)  # the LAION head's 1..10 scale: mid-scale, so the [0, 1] value is not its clip
    aesthetic = root / "aesthetic.safetensors"
    save_file({f"layers.{k}": v.contiguous() for k, v in head.state_dict().items()}, str(aesthetic))
    arc = root / "arcface.safetensors"
    save_file({k: v.contiguous() for k, v in tiny_net().state_dict().items()}, str(arc))
    vggt = write_checkout(root / "vggt-omega")
    ckpt = root / "vggt.pt"
    torch.save({"step": torch.tensor(0.25), "bump": torch.tensor(0.6)}, ckpt)
    qa = root / "qalign"
    tok = tiny_tokenizer()
    torch.manual_seed(0)
    net = Q.owl2_class()(tiny_config(len(tok))).eval()
    with torch.no_grad():
        net.lm_head.weight.mul_(50.0)
    net.save_pretrained(qa)
    tok.save_pretrained(qa)
    tiny_processor().save_pretrained(qa)
    judge = _save_judge(root / "judge")
    env = {"VGGT_OMEGA_PATH": str(vggt), "VGGT_OMEGA_CKPT": str(ckpt), Q.ENV_MODEL: str(qa),
           "WORLDGATE_ARCFACE": str(arc)}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        yield {**paths, "depth": str(root / "depth"), "clip": str(root / "clip"),
               "head": str(aesthetic), "judge": judge, "da3": tiny_api()}
    for name in [m for m in sys.modules if m == "vggt_omega" or m.startswith("vggt_omega.")]:
        del sys.modules[name]
    LV._MODELS.clear()
    J._JUDGES.pop((judge, "cpu"), None)
    for key in [k for k in Q._SCORERS if k[0] == str(qa)]:
        del Q._SCORERS[key]


def tiny_raft():
    """torchvision's RAFT (the class raft_large / raft_small build) at a tiny width, random weights."""
    from torchvision.models.optical_flow.raft import ResidualBlock, _raft

    torch.manual_seed(0)
    return _raft(weights=None, progress=False, feature_encoder_layers=(4, 4, 8, 8, 32),
                 feature_encoder_block=ResidualBlock, feature_encoder_norm_layer=None,
                 context_encoder_layers=(4, 4, 8, 8, 32), context_encoder_block=ResidualBlock,
                 context_encoder_norm_layer=None, corr_block_num_levels=2, corr_block_radius=1,
                 motion_encoder_corr_layers=(16,), motion_encoder_flow_layers=(16, 8), motion_encoder_out_channels=14,
                 recurrent_block_hidden_state_size=16, recurrent_block_kernel_size=(3,), recurrent_block_padding=(1,),
                 flow_head_hidden_size=16, use_mask_predictor=False)


def every_extractor(t) -> list:
    """One extractor per learned feature, each the registry's own constructor with a tiny model: given in memory
    where the loader has no file form (RAFT, DA3, MUSIQ), loaded from the tiny files by path otherwise."""
    from worldgate.evaluate.features.depth import DA3Depth
    from worldgate.evaluate.features.memory_depth import DA3MemoryDepth

    F = FEATURES["learned"]
    torch.manual_seed(0)
    musiq = pyiqa.create_metric("musiq-spaq", device="cpu", pretrained=False, num_layers=1, hidden_size=32,
                                mlp_dim=64, num_heads=2, longer_side_lengths=[64])
    with torch.no_grad():  # MUSIQ-SPAQ's MOS is on 0..100: centre the random head's output there
        musiq.net.head.bias.fill_(50.0)
    made = {
        "flow": F.get("flow")(model=tiny_raft(), iters=2),
        "depth": F.get("depth")(model=t["da3"], process_res=56),
        "camera_poses": F.get("camera_poses")(model=t["da3"], process_res=56),
        "appearance": F.get("appearance")(hf_id=t["dino"], transnet=False),
        "quality": F.get("quality")(hf_id=t["clip"], head_path=t["head"], imaging=musiq),
        "targets": F.get("targets")(hf_id=t["dino"], sam_id=t["sam2"], detector_id=t["gdino"]),  # ArcFace: env
        "memory_depth": F.get("memory_depth")(model=t["da3"], process_res=56),
        "vggt_global": F.get("vggt_global")(device="cpu", image_resolution=64),  # the checkout: env
        "qalign": F.get("qalign")(device="cpu"),  # the checkpoint folder: QALIGN_MODEL
    }
    # where DA3 imports, WorldMark's depth is DA3's call and WorldMemBench's revisit depth DA3's too
    assert isinstance(made["depth"], DA3Depth) and isinstance(made["memory_depth"], DA3MemoryDepth)
    assert list(made) == [f for f in ORDER["learned"]] and set(made) == set(F.entries)
    return list(made.values())


def _generate(root, suite, cases, overrides):
    root.mkdir()
    out = root / suite
    m = suite_case_manifest(root, *cases, suite=suite)
    assert run_generate("engine", str(m), out, overrides=overrides, progress=False).exit_code == 0
    return out


@pytest.fixture(scope="module")
def scored(tiny, tmp_path_factory):
    """(results, samples) of both runs under --backend learned with every tiny extractor and the tiny judge."""
    root = tmp_path_factory.mktemp("every-metric")
    runs = [_generate(root / "wm", "worldmark-engine", WM_CASES, SIZE + ["trajectory.seconds=2"]),
            _generate(root / "wmb", "worldmembench-engine", WMB_CASES, WMB_OVERRIDES)]
    # evaluate runs one extractor per core; torch's own pool on top oversubscribes a small machine (its spinning
    # workers make a loaded 2-core runner many times slower), so the tiny models run on one thread each. Set after
    # generating: the Engine's numba resets OpenMP's thread count
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = []
    try:
        for run in runs:
            res = evaluate_run(run, backend="learned", extractors=every_extractor(tiny), judge=tiny["judge"],
                               judge_device="cpu", progress=False)
            assert not res["errors"], res["errors"]
            out.append((res, [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]))
    finally:
        torch.set_num_threads(n_threads)
    return out


def _range_ok(value, rng: str) -> bool:
    lo, hi = {"0-100": (0.0, 100.0), "0-1": (0.0, 1.0), ">=0": (0.0, math.inf)}[rng]
    return value is not None and math.isfinite(value) and lo - 1e-9 <= value <= hi + 1e-9


def test_every_learned_feature_ran_under_its_learned_key(scored):
    for res, samples in scored:
        for s in samples:
            keys = s["features"]
            assert set(keys) == set(FEATURES["learned"].entries) | {"judge"}, keys
            assert all(v.endswith("-learned") for k, v in keys.items() if k != "judge"), keys


def test_the_scores_come_from_the_learned_models(scored, tiny):
    """The metrics that name their model say it is the learned one: DA3's poses for camera following, ArcFace for
    identity, MUSIQ for imaging, VGGT-Omega's reconstruction for global memory, Q-Align's five level probabilities,
    and the judge folder's own replies for dynamic memory (its gate opened, so the conditional score exists)."""
    detail = {}
    for _, samples in scored:
        for s in samples:
            for mid, d in s["detail"].items():
                if s["scores"].get(mid) is not None:
                    detail.setdefault(mid, d)
    assert all(detail[m]["estimator"].startswith("DA3") for m in ("camera_rpe_rot", "camera_rpe_trans"))
    assert detail["human_identity"]["model"] == "arcface"
    assert detail["imaging_quality"]["model"].startswith("MUSIQ")
    assert detail["global_memory"]["pairs"] > 0 and "median_err" in detail["global_memory"]
    assert len(detail["qalign_quality"]["level_probs"]) == 5 and 1.0 <= detail["qalign_quality"]["qalign"] <= 5.0
    assert detail["dynamic_score"]["judge"] == "vlm" and detail["dynamic_score"]["model"] == tiny["judge"]
    assert all(it["raw"] == REPLY and it["unparsed"] == 0 for it in detail["dynamic_score"]["items"])


@pytest.mark.parametrize("bench", ["worldmark", "worldmembench"])
def test_every_metric_is_scored_under_the_learned_backend(scored, bench):
    """Each metric of the benchmark has a finite value in its range in some record of the runs or in the pooled
    results; the never-learned ones are unavailable everywhere, saying why."""
    metrics = (WM if bench == "worldmark" else WMB).METRICS
    info = metric_info()
    missing = {}
    for mid in metrics:
        rng = info[mid]["range"]
        records = [s["scores"].get(mid) for _, samples in scored for s in samples]
        pooled = [res["metrics"].get(mid, {}).get("mean") for res, _ in scored]
        why = sorted({r for res, _ in scored for r in res["metrics"].get(mid, {}).get("unavailable", [])})
        if mid in NEVER_LEARNED:  # unavailable everywhere; on the dynamic case (its family) for this reason
            assert all(v is None for v in records + pooled), mid
            dyn = [s["unavailable"][mid] for _, samples in scored for s in samples
                   if (s.get("tags") or {}).get("family") == "dynamic"]
            assert dyn and all(NEVER_LEARNED[mid] in r for r in dyn), (mid, dyn)
            continue
        assert all(v is None or _range_ok(v, rng) for v in records + pooled), (mid, records, pooled)
        if mid in GATED_BY_RANDOM_FLOW and not any(_range_ok(v, rng) for v in records + pooled):
            trips = [s["unavailable"][mid] for s in scored[0][1]]  # both WorldMark cases are round trips
            assert len(trips) == len(WM_CASES) and all(GATED_BY_RANDOM_FLOW[mid] in r for r in trips), (mid, trips)
            continue
        if not any(_range_ok(v, rng) for v in records + pooled):
            missing[mid] = why
    assert not missing, missing
    assert set(NEVER_LEARNED) <= set(WMB.METRICS) and \
        all(NEVER_LEARNED[m] in WMB.BENCHMARK.unavailable["learned"][m] for m in NEVER_LEARNED)
