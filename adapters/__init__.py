"""Adapters: one file per world model, registered lazily by name.

:data:`MODELS` maps a name to ``"module:Class"``; nothing is imported until a model is asked for, so
``worldgate list models`` stays cheap. Unknown names get a did-you-mean error. Add a model with one file and one line
here (see docs/adding-a-model.md).
"""

from __future__ import annotations

from worldgate.trajectories.registry import Registry, UnknownNameError, did_you_mean

from .base import Adapter, AdapterError, AdapterInfo, Chunk, NativeInputs, UnsupportedMotion

_ENTRIES = {
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
    "engine-dissolve": "worldgate.adapters.engine.faults:DissolveEngine",
    "engine-freeze": "worldgate.adapters.engine.faults:FreezeEngine",
    "engine-reset": "worldgate.adapters.engine.faults:ResetEngine",
    # memory-limited Engine: reproduces only what its context (a policy's selection of chunks) showed
    "engine-memory": "worldgate.adapters.engine.memory:MemoryEngine",
    # two-player Engine (MultiWorldBench Engine GT) and its single-player baseline (private world per view)
    "engine-2p": "worldgate.adapters.engine.twoplayer:TwoPlayerEngine",
    "engine-2p-independent": "worldgate.adapters.engine.twoplayer:IndependentTwoPlayerEngine",
    "engine-2p-frozen": "worldgate.adapters.engine.twoplayer:FrozenTwoPlayerEngine",
    "engine-2p-leak": "worldgate.adapters.engine.twoplayer:LeakTwoPlayerEngine",
    # real models (plan proven by golden tests; runtimes drive the official repositories)
    "lingbot-world": "worldgate.adapters.lingbot_world:LingBotWorld",
    "lingbot-world-v2": "worldgate.adapters.lingbot_world_v2:LingBotWorldV2",
    "matrix-game-1": "worldgate.adapters.matrix_game_1:MatrixGame1",
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
    "forgewm": "worldgate.adapters.forgewm:ForgeWM",
    "abot-world": "worldgate.adapters.abot_world:ABotWorld",
    "infinite-world": "worldgate.adapters.infinite_world:InfiniteWorld",
    # two-player Minecraft model of MultiWorldBench and its single-player variant
    "solaris-mp": "worldgate.adapters.solaris:SolarisMP",
    "solaris-sp": "worldgate.adapters.solaris:SolarisSP",
}

#: models of the benchmarks with no adapter: listed by `worldgate list models`, never registered
KNOWN_UNAVAILABLE = {
    "alayaworld": "AlayaWorld: no public inference code found (2026-11)",
    "solaris": "Solaris (MultiWorldBench) is registered as solaris-mp (two players) and solaris-sp (single-player)",
    "gamma-world": "Gamma-World (multiplayer): no public inference code found (2026-11)",
}

#: built-ins, then the installed plugins' ``worldgate.adapters`` entry points (docs/plugins.md)
MODELS = Registry("model", _ENTRIES, unavailable=KNOWN_UNAVAILABLE, group="worldgate.adapters")


def get_adapter(name: str, **model_args) -> Adapter:
    return MODELS.get(name)(**model_args)


def get_info(name: str) -> AdapterInfo:
    return MODELS.get(name).info


def list_models() -> list[str]:
    return MODELS.names()


__all__ = [
    "Adapter", "AdapterError", "AdapterInfo", "Chunk", "NativeInputs", "UnsupportedMotion", "MODELS",
    "KNOWN_UNAVAILABLE", "get_adapter", "get_info", "list_models", "did_you_mean", "UnknownNameError",
]
