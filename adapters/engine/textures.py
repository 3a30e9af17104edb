"""The Engine's texture kinds: which procedural texel pattern a voxel material is shaded with.

Plain constants, without numba, so that the world builders (:mod:`.world`) and the adapters that read them load
without the ray caster; :mod:`.shade` (numba) draws each kind.
"""

from __future__ import annotations

TK_NOISE, TK_BRICK, TK_PLANK, TK_GRASS, TK_PLAIN, TK_FACADE, TK_STRIPE, TK_LEAF = range(8)
