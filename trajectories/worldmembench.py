"""WorldMemBench's trajectories home: memory cases on Engine scenes (families x rotation loops and the square)."""

from __future__ import annotations

from . import library
from .suites import ENGINE_IMAGE_SIZE, Case, engine_intrinsics

WORLDMEMBENCH_FAMILIES = ("human", "object", "environment", "dynamic")
WORLDMEMBENCH_TRAJECTORIES = ("LR", "LRLR", "LRLRLR", "LRUD", "FRBL")


def worldmembench_engine_suite(full: bool = False, seed: int = 0, **_) -> list[Case]:
    """WorldMemBench-style memory cases on Engine scenes: families Human, Object, Environment, Dynamic (scene
    events that progress while out of view) x rotation loops LR, LRLR, LRLRLR, LRUD and the FRBL square.
    Default: one scene per family, 20 cases; ``full``: 5 scenes per family (100). A scene is rendered under every
    trajectory (the ``content`` tag names it), so the analyses compare trajectories on the same content, case pair by
    case pair (the cross-axis penalty pairs each content's LRLR and LRUD cases). Every Engine scene puts people,
    objects and events in the opening view (phase V), so each family has a target to remember."""
    cases = []
    for fi, fam in enumerate(WORLDMEMBENCH_FAMILIES):
        for ti, tname in enumerate(WORLDMEMBENCH_TRAJECTORIES):
            for rep in range(5 if full else 1):
                scene_seed = int(seed) * 1000 + 700 + 50 * fi + rep  # one scene per (family, rep): paired content
                traj = library.get(tname)
                cases.append(Case(
                    id=f"{fam}-{tname}-{rep:02d}", suite="worldmembench-engine", trajectory=traj,
                    prompt=f"First-person view. A procedural voxel town (Engine scene {scene_seed}).",
                    prompt_source=f"engine:scene-{scene_seed}",
                    scene={"seed": scene_seed, "palette": "realistic" if rep % 2 == 0 else "stylised",
                           "events": fam == "dynamic", **({"event_s": 8.0} if fam == "dynamic" else {})},
                    intrinsics=engine_intrinsics(), image_size=ENGINE_IMAGE_SIZE, view="first",
                    tags={"family": fam, "trajectory": tname, "rep": rep, "content": f"{fam}-{rep:02d}",
                          "axis": "cross" if tname == "LRUD" else "translation" if tname == "FRBL" else "yaw"}))
    return cases
