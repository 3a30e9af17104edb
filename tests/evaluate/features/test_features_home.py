"""The features home (issue 26.3): every registry entry answers the same three questions (available, missing,
preflight), a feature with several backends picks the first available one, the cache keys did not move with the
code, the learned extractors' default device follows the machine, and the shared box helpers give their values."""

import numpy as np
import pytest

from worldgate.evaluate import metrics as M
from worldgate.evaluate.features import Choice, Extractor
from worldgate.evaluate.features.boxes import bbox, box_iou, canonical, iou
from worldgate.evaluate.features.depth import DA3Depth, LearnedDepth, learned_depth
from worldgate.evaluate.features.models.da3 import DA3Extractor
from worldgate.evaluate.features.models.vggt import VGGTOmegaGlobal

#: the cache keys of the built-in extractors before the move (cached features must still be found after it)
CLASSICAL_KEYS = ["flow@4-classical", "poses@13-classical", "camera_poses@13.2-classical", "appearance@1-classical",
                  "quality@1-classical", "geometry@4-classical", "targets@9-classical", "events@6-classical"]


def test_every_feature_entry_answers_the_same_three_questions():
    for backend, reg in M.FEATURES.items():
        for name in reg.entries:
            c = reg.get(name)
            assert isinstance(c, Choice) or issubclass(c, Extractor), (backend, name)
            assert isinstance(c.available(), bool)
            assert isinstance(c.missing(), list)
            assert callable(c.preflight)


def test_classical_keys_unchanged():
    assert [e.key() for e in M.extractors("classical", check=False)] == CLASSICAL_KEYS


def test_choice_takes_the_first_available_backend(monkeypatch):
    monkeypatch.setattr(DA3Extractor, "available", classmethod(lambda cls: False))
    assert learned_depth.pick() is LearnedDepth and learned_depth.available()
    monkeypatch.setattr(DA3Extractor, "available", classmethod(lambda cls: True))
    assert learned_depth.pick() is DA3Depth
    assert type(learned_depth(model=object())).__name__ == "DA3Depth"
    assert Choice("x", DA3Depth, LearnedDepth).name == "x"


def test_the_registry_runs_only_what_is_available(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(VGGTOmegaGlobal, "available", classmethod(lambda cls: False))
    assert "vggt_global" not in [e.name for e in M.extractors("learned", check=False)]
    monkeypatch.setattr(VGGTOmegaGlobal, "available", classmethod(lambda cls: True))
    assert "vggt_global" in [e.name for e in M.extractors("learned", check=False)]


def test_auto_device_is_cpu_without_a_gpu():
    torch = pytest.importorskip("torch")
    from worldgate.evaluate.features.flow import LearnedFlow
    from worldgate.evaluate.features.models.loaders import resolve_device

    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto") == want and resolve_device(None) == want
    assert resolve_device("cuda:1") == "cuda:1"
    assert LearnedFlow(model=object()).device == want
    assert LearnedDepth(model=object()).device == want
    if not torch.cuda.is_available():
        assert want == "cpu"


def test_box_helpers():
    m = np.zeros((10, 10), bool)
    m[2:5, 3:8] = True
    assert bbox(m) == (3, 2, 8, 5)
    assert iou(m, m) == 1.0 and iou(m, np.zeros_like(m)) == 0.0
    half = m.copy()
    half[:, 6:] = False
    assert iou(m, half) == pytest.approx(9 / 15)
    assert box_iou((0, 0, 2, 2), (1, 1, 3, 3)) == pytest.approx(1 / 7)
    assert box_iou((0, 0, 1, 1), (2, 2, 3, 3)) == 0.0
    c = canonical(m, 12)
    assert c.shape == (12, 12) and c.any() and canonical(np.zeros_like(m), 12).sum() == 0
