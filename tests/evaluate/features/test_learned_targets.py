"""WorldMemBench targets located by SAM2 video tracking + GroundingDINO (evaluate/features/tracked_targets.py), offline: every
model is built from a tiny random config, saved with save_pretrained and loaded back by path through the extractor's
own loading code (the code that loads the Hub ids in production)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("torchvision")  # the SAM2 and GroundingDINO processors are torchvision-backed in transformers 5

from worldgate.evaluate.features import FeatureCache, compute_features, open_record
from worldgate.evaluate.features.tracked_targets import TrackedTargets, target_query
from worldgate.evaluate.worldmembench.params import PARAMS
from worldgate.evaluate.features.targets import TargetExtractor
from worldgate.evaluate.worldmembench.static import static_memory_scores
from worldgate.generate.runner import run_generate

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "a", "an", "person", "object", "crate", "barrel"]
SIDE = 256  # the tiny SAM2's square input (the real one: 1024)


def save_tiny_models(root):
    """Tiny DINOv2, SAM2-video (+ its processor) and GroundingDINO (+ processor, BERT tokenizer) under ``root``."""
    from transformers import (
        BertConfig,
        BertTokenizerFast,
        Dinov2Config,
        Dinov2Model,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        Sam2HieraDetConfig,
        Sam2ImageProcessor,
        Sam2VideoConfig,
        Sam2VideoMaskDecoderConfig,
        Sam2VideoModel,
        Sam2VideoProcessor,
        Sam2VideoPromptEncoderConfig,
        Sam2VideoVideoProcessor,
        Sam2VisionConfig,
        SwinConfig,
    )

    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=4, patch_size=14,
                             image_size=224)).save_pretrained(root / "dino")
    # SAM2 video (BACKENDS.md: memory encoder output 64, shared width 128, no global block opening a stage), at 256
    bb = Sam2HieraDetConfig(hidden_size=16, blocks_per_stage=[1, 1, 2, 1], embed_dim_per_stage=[16, 32, 64, 128],
                            num_attention_heads_per_stage=[1, 1, 2, 2], window_size_per_stage=[8, 4, 14, 7],
                            global_attention_blocks=[3], image_size=[SIDE, SIDE])
    sam = Sam2VideoModel(Sam2VideoConfig(
        vision_config=Sam2VisionConfig(backbone_config=bb, backbone_channel_list=[128, 64, 32, 16], fpn_hidden_size=128,
                                       backbone_feature_sizes=[[SIDE // 4] * 2, [SIDE // 8] * 2, [SIDE // 16] * 2]),
        prompt_encoder_config=Sam2VideoPromptEncoderConfig(hidden_size=128, image_size=SIDE),
        mask_decoder_config=Sam2VideoMaskDecoderConfig(hidden_size=128, mlp_dim=64, num_attention_heads=2,
                                                       iou_head_hidden_dim=32),
        image_size=SIDE, memory_attention_hidden_size=128, memory_attention_num_layers=1,
        memory_attention_feed_forward_hidden_size=64, memory_attention_rope_feat_sizes=[SIDE // 16] * 2,
        memory_encoder_hidden_size=128, memory_encoder_output_channels=64, mask_downsampler_embed_dim=128,
        memory_fuser_embed_dim=128, memory_fuser_intermediate_dim=64, memory_fuser_num_layers=1))
    sam.save_pretrained(root / "sam2")
    Sam2VideoProcessor(image_processor=Sam2ImageProcessor(size={"height": SIDE, "width": SIDE}),
                       video_processor=Sam2VideoVideoProcessor(size={"height": SIDE, "width": SIDE})
                       ).save_pretrained(root / "sam2")
    (root / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    tok = BertTokenizerFast(vocab_file=str(root / "vocab.txt"), do_lower_case=True)
    gd = GroundingDinoForObjectDetection(GroundingDinoConfig(
        backbone_config=SwinConfig(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=4,
                                   out_features=["stage2", "stage3", "stage4"]),
        text_config=BertConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64),
        d_model=32, encoder_layers=1, decoder_layers=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        encoder_attention_heads=2, decoder_attention_heads=2, num_queries=20, max_text_len=32, encoder_n_points=2,
        decoder_n_points=2))
    gd.save_pretrained(root / "gdino")
    GroundingDinoProcessor(image_processor=GroundingDinoImageProcessor(size={"shortest_edge": 96, "longest_edge": 160}),
                           tokenizer=tok).save_pretrained(root / "gdino")
    return {k: str(root / k) for k in ("dino", "sam2", "gdino")}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return save_tiny_models(tmp_path_factory.mktemp("tiny-models"))


def tracked(paths, **kw):
    """The feature as production builds it, pointed at the saved tiny models (nothing given pre-built)."""
    kw.setdefault("identity", False)
    return TrackedTargets(hf_id=paths["dino"], sam_id=paths["sam2"], detector_id=paths["gdino"], **kw)


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    from suite_cases import suite_case_manifest

    root = tmp_path_factory.mktemp("wmb-tracked")
    m = suite_case_manifest(root, "human-LR-00")  # two people and two objects in frame 0; V, D1, R1, H (80 frames)
    case = json.loads(m.read_text())
    case["tags"].pop("family")  # a case without a family gets every target kind (a Human case only its people)
    m.write_text(json.dumps(case) + "\n")
    assert run_generate("engine", str(m), root / "gt", overrides=["model.width=96", "model.height=96"],
                        progress=False).exit_code == 0
    return open_record(root / "gt" / "human-LR-00")


def test_target_queries_are_groundingdino_captions():
    assert target_query("human", "human-3") == "a person."
    assert target_query("object", "crate-5") == "crate."
    assert target_query("object", "red-mug_0") == "red mug."
    assert target_query("event", "") == "an object."


def test_mask_prompt_round_trips_through_the_session(paths):
    """The record's mask given at frame 0 comes back as SAM2's frame-0 mask (a mask prompt is SAM2's own output on
    its conditioning frame), with full presence; later frames are tracked, masks frame-sized; the real processors
    (torchvision-backed) were loaded from the saved folder."""
    from transformers import Sam2VideoProcessor

    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, (60, 80, 3), dtype=np.uint8) for _ in range(4)]
    m = np.zeros((2, 60, 80), bool)
    m[0, 10:40, 20:50] = True
    m[1, 30:55, 55:75] = True

    def run():
        ex = tracked(paths)
        ex.targets = {"masks": m, "kinds": np.asarray(["object", "human"]), "names": np.asarray(["crate-1", "p"])}
        ex.ref, ex.v_range, ex.phases, ex.departures = None, (0, 1), [], []
        ex._setup(frames[0])
        out = [ex.track(i, f) for i, f in enumerate(frames)]
        return ex, out, ex.detect(frames[1:3], [o[0] for o in out[1:3]])

    ex, out, conf = run()
    assert isinstance(ex.tracker_processor, Sam2VideoProcessor) and ex._size() == SIDE
    _, again, conf2 = run()  # a fresh session on the same frames: the same masks, presences and detections
    for (a, pa), (b, pb) in zip(out, again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(conf, conf2)
    assert conf.shape == (2, 2) and np.all((conf >= 0) & (conf <= 1))
    masks0, pres0 = out[0]
    for u in range(2):
        inter, union = (masks0[u] & m[u]).sum(), (masks0[u] | m[u]).sum()
        assert inter / union > 0.9, (u, inter / union)
    assert np.all(pres0 > 0.99)  # sigmoid of SAM2's "object present" logit on the prompted frame
    for masks, pres in out[1:]:
        assert masks.shape == (2, 60, 80) and masks.dtype == bool and np.all((0 <= pres) & (pres <= 1))
    assert len(ex.session.processed_frames) == 1  # old frames are dropped as the video streams through


def synthetic_run(ex, tmp_path):
    """Drive an extractor by hand over an 8-frame clip with phases V 0-2, D1 2-4, R1 4-7 and two targets (a drifting
    box and a still one): what compute_features does, without a video."""
    from types import SimpleNamespace

    m = np.zeros((2, 48, 64), bool)
    m[0, 8:24, 10:30] = True
    m[1, 28:44, 40:60] = True
    d = tmp_path / "rec"
    d.mkdir(exist_ok=True)
    np.savez(d / "targets.npz", masks=m, kinds=np.asarray(["human", "object"], "U8"),
             names=np.asarray(["human-1", "crate-2"], "U32"), frame=np.asarray(0))
    traj = {"n_frames": 8, "phases": [{"name": "V", "frames": [0, 2]}, {"name": "D1", "frames": [2, 4]},
                                      {"name": "R1", "frames": [4, 7]}]}
    ex.start(SimpleNamespace(dir=d, trajectory=traj, n_frames=8, fps=8.0))
    rng = np.random.default_rng(1)
    base = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    for i in range(8):
        f = base.copy()
        f[8:24, 10 + i:30 + i] = (200, 40, 40)  # the first target moves right one pixel a frame
        ex.update(i, f)
    return ex.finish()


def test_schema_equals_the_classical_extractor_and_is_deterministic(paths, tmp_path):
    classical = synthetic_run(TargetExtractor(), tmp_path)
    a = synthetic_run(tracked(paths), tmp_path)
    b = synthetic_run(tracked(paths), tmp_path)
    assert set(a) == set(classical)
    for k in classical:
        assert a[k].shape == classical[k].shape and a[k].dtype.kind == classical[k].dtype.kind, k
        np.testing.assert_array_equal(a[k], b[k])  # same inputs, same numbers
    assert a["score"].shape == (2, 1) and np.all((a["score"] >= 0) & (a["score"] <= 1))
    assert np.all((a["frame"] == -1) | ((a["frame"] >= 4) & (a["frame"] <= 7)))
    ex = tracked(paths, detector=False)  # tracker only: the score is SAM2's presence, and the config says so
    t = synthetic_run(ex, tmp_path)
    assert set(t) == set(classical) and ex.config()["detection"] == "none (tracker only)"
    assert np.all(t["frame"] >= 4)  # presence is positive wherever the mask is not empty: every revisit observed
    assert np.all((t["departure_score"] > 0) & (t["departure_score"] <= 1))


def test_engine_record_through_the_real_loading_code(paths, record, tmp_path):
    """A WorldMemBench Engine record (two people, two objects) through compute_features with every model loaded by
    path and ArcFace from a weights file the test writes (a tiny IResNet): the classical arrays plus the two identity
    arrays (people on [0, 1], objects NaN), frames inside R1, and the static metrics read the feature unchanged."""
    from safetensors.torch import save_file

    from worldgate.evaluate.features.models.identity import FaceIdentity, iresnet

    torch.manual_seed(0)
    net = iresnet(layers=(1, 1, 1, 1), widths=(8, 8, 16, 16), num_features=16, stem=8).eval()
    f = tmp_path / "arcface.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(f))
    ex = tracked(paths, identity=FaceIdentity(path=str(f)))
    T = compute_features(record, [ex], FeatureCache(tmp_path / "i"))[0]["targets"]
    classical = compute_features(record, [TargetExtractor()], FeatureCache(tmp_path / "c"))[0]["targets"]
    assert set(T) - {"identity", "identity_model"} == set(classical)
    for k in classical:
        assert T[k].shape == classical[k].shape and T[k].dtype.kind == classical[k].dtype.kind, k
    assert int(T["n_targets"]) == 4 and list(T["kinds"]) == ["human", "human", "object", "object"]
    assert list(T["phases"]) == ["R1"] and str(T["segmentation"]) == "sam2"
    r1 = next(p for p in record.trajectory["phases"] if p["name"] == "R1")["frames"]
    found = T["frame"] >= 0
    assert np.all((T["frame"][found] >= r1[0]) & (T["frame"][found] <= r1[1]))
    for k in ("score", "iou"):
        assert np.all((T[k] >= 0) & (T[k] <= 1)), k
    assert np.all(np.abs(T["cos"]) <= 1 + 1e-6)
    assert np.isfinite(T["departure_score"]).all()
    rec = {"trajectory": record.trajectory, "poses": record.poses}
    s = static_memory_scores({"targets": T}, rec, "learned", dict(PARAMS))
    for m in ("human_appearance", "object_appearance", "object_geometry"):
        assert s[m].value is not None and 0.0 <= s[m].value <= 1.0, (m, s[m])
    assert T["identity"].shape == (4, 1) and str(T["identity_model"]) == "arcface"
    seen = T["frame"][:2, 0] >= 0
    assert np.all((T["identity"][:2][seen] >= 0) & (T["identity"][:2][seen] <= 1))
    assert np.isnan(T["identity"][2:]).all()
    # human identity: the mean over the people and revisits of the ArcFace cosine, 0 where the person was not found
    ok = (T["score"][:2] >= PARAMS["memory_min_match"]) & np.isfinite(T["identity"][:2])
    want = float(np.mean(np.where(ok, np.clip(np.nan_to_num(T["identity"][:2]), 0, 1), 0)))
    assert s["human_identity"].value == pytest.approx(want) and s["human_identity"].detail["targets"] == 2
    no_id = {k: v for k, v in T.items() if k not in ("identity", "identity_model")}
    assert "ArcFace" in static_memory_scores({"targets": no_id}, rec, "learned", dict(PARAMS))["human_identity"].reason
    assert json.dumps(ex.config())  # the config (part of the cache key) is plain JSON
