"""Adapters: one file per world model, registered lazily by name.

The registry maps a name to ``"module:Class"``; nothing is imported until a model is asked for, so
``worldgate list models`` stays cheap. Unknown names get a did-you-mean error. Add a model with one file and one line
here (see docs/adding-a-model.md).
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches

from .base import Adapter, AdapterError, AdapterInfo, Chunk, NativeInputs, UnsupportedMotion

MODELS: dict[str, str] = {
    "engine": "worldgate.adapters.engine.adapter:EngineAdapter",
    # Engine faults: one known defect each, to prove each metric catches its own fault
    "engine-drift": "worldgate.adapters.engine.faults:DriftEngine",
    "engine-stall": "worldgate.adapters.engine.faults:StallEngine",
    "engine-lag": "worldgate.adapters.engine.faults:LagEngine",
    "engine-flipyaw": "worldgate.adapters.engine.faults:FlipYawEngine",
    "engine-leak": "worldgate.adapters.engine.faults:LeakEngine",
    "engine-flicker": "worldgate.adapters.engine.faults:FlickerEngine",
    "engine-forget": "worldgate.adapters.engine.faults:ForgetEngine",
    "engine-blur": "worldgate.adapters.engine.faults:BlurEngine",
    "engine-freeze": "worldgate.adapters.engine.faults:FreezeEngine",
    "engine-reset": "worldgate.adapters.engine.faults:ResetEngine",
    # memory-limited Engine: reproduces only what its context (a policy's selection of chunks) showed
    "engine-memory": "worldgate.adapters.engine.memory:MemoryEngine",
    # two-player Engine (MultiWorldBench Engine GT) and its single-player baseline (private world per view)
    "engine-2p": "worldgate.adapters.engine.twoplayer:TwoPlayerEngine",
    "engine-2p-independent": "worldgate.adapters.engine.twoplayer:IndependentTwoPlayerEngine",
    # real models (plan proven by golden tests; runtimes drive the official repositories)
    "lingbot-world": "worldgate.adapters.lingbot_world:LingBotWorld",
    "lingbot-world-v2": "worldgate.adapters.lingbot_world_v2:LingBotWorldV2",
    "matrix-game-2": "worldgate.adapters.matrix_game_2:MatrixGame2",
    "lyra-2": "worldgate.adapters.lyra_2:Lyra2",
    "sana-wm": "worldgate.adapters.sana_wm:SanaWM",
    "matrix-game-3": "worldgate.adapters.matrix_game_3:MatrixGame3",
    "matrix-game-3.5": "worldgate.adapters.matrix_game_3_5:MatrixGame35",
    "hy-worldplay": "worldgate.adapters.hy_worldplay:HYWorldPlay",
    "hy-gamecraft": "worldgate.adapters.hy_gamecraft:HYGameCraft",
    "yume": "worldgate.adapters.yume:Yume",
    "dreamx-world": "worldgate.adapters.dreamx_world:DreamXWorld",
    "evoke": "worldgate.adapters.evoke:Evoke",
}

#: models of the benchmarks with no public code: listed in the docs, never registered
KNOWN_UNAVAILABLE = {
    "alayaworld": "AlayaWorld: no public inference code found (2026-11)",
    "solaris": "Solaris (multiplayer): no public inference code found (2026-11)",
    "gamma-world": "Gamma-World (multiplayer): no public inference code found (2026-11)",
}


class UnknownNameError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


def did_you_mean(kind: str, name: str, known) -> UnknownNameError:
    known = sorted(known)
    close = get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    return UnknownNameError(f"unknown {kind} {name!r}.{hint} Known {kind}s: {', '.join(known)}")


def _load_class(name: str):
    if name not in MODELS:
        if name.lower() in KNOWN_UNAVAILABLE:
            raise UnknownNameError(f"{KNOWN_UNAVAILABLE[name.lower()]}; it has no adapter.")
        raise did_you_mean("model", name, MODELS)
    module, cls = MODELS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def get_adapter(name: str, **model_args) -> Adapter:
    return _load_class(name)(**model_args)


def get_info(name: str) -> AdapterInfo:
    return _load_class(name).info


def list_models() -> list[str]:
    return sorted(MODELS)


__all__ = [
    "Adapter", "AdapterError", "AdapterInfo", "Chunk", "NativeInputs", "UnsupportedMotion", "MODELS",
    "get_adapter", "get_info", "list_models", "did_you_mean", "UnknownNameError",
]
