"""WorldMark's trajectories home: the official ``arena_inputs`` suite and its 15-id protocol on Engine scenes.

- ``worldmark`` reads WorldMark's official ``arena_inputs`` layout from ``--data DIR`` (500 cases: {first, third}
  view x {real, style} domain x 25 images x their 5 action ids). Prompts are taken verbatim by ``file:row``, the
  intrinsics from the per-image ``.npy`` (original-image pixels).
- ``worldmark-engine`` runs the same 15-sequence protocol on Engine scenes (first- and third-person, a realistic and
  a stylised palette). It needs no data; by default a 15-case subset (every action id once), ``full=True`` gives
  500 cases in the same shape as the official suite.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image

from worldgate.data import DataError
from worldgate.data import ensure as ensure_data

from . import library
from .suites import ENGINE_IMAGE_SIZE, Case, SuiteError, engine_intrinsics

WORLDMARK_SOURCE = "https://github.com/AlayaLab/WorldMark (arena_inputs/, MIT licence)"


WORLDMARK_VIEWS = ("first", "third")
WORLDMARK_DOMAINS = ("real", "style")


def _require_worldmark_dir(data: str | Path | None) -> Path:
    expected = (
        "a WorldMark arena_inputs folder holding first_view/ and third_view/, each with {real,style}/NNN.jpg, "
        "{real,style}_intrinsics/NNN_intrinsics.npy, {real,style}_action.txt and prompt_{real,style}.txt"
    )
    if data is None:  # first use: WorldMark's arena_inputs at the pinned commit, from (or into) the user's cache
        try:
            data = ensure_data("worldmark")
        except DataError as e:
            raise SuiteError(f"suite 'worldmark' needs --data DIR ({expected}) or its data in the cache: {e}. The "
                             f"official inputs are published at {WORLDMARK_SOURCE}.") from None
    root = Path(data).resolve()  # absolute image paths: a rollout may run from another folder (repo checkouts)
    if (root / "arena_inputs").is_dir() and not (root / "first_view").is_dir():
        root = root / "arena_inputs"
    missing = [str(p.relative_to(root)) for v in WORLDMARK_VIEWS for p in (
        root / f"{v}_view" / "real_action.txt", root / f"{v}_view" / "style_action.txt",
        root / f"{v}_view" / "prompt_real.txt", root / f"{v}_view" / "prompt_style.txt",
    ) if not p.is_file()]
    if missing:
        raise SuiteError(f"--data {data}: not {expected} (missing {', '.join(missing[:4])}). "
                         f"The official inputs are published at {WORLDMARK_SOURCE}.")
    return root


def _image_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as im:
        return im.size


def worldmark_suite(data: str | Path | None = None, **_) -> list[Case]:
    root = _require_worldmark_dir(data)
    cases = []
    for view in WORLDMARK_VIEWS:
        vdir = root / f"{view}_view"
        for domain in WORLDMARK_DOMAINS:
            actions = (vdir / f"{domain}_action.txt").read_text().splitlines()
            prompts = (vdir / f"prompt_{domain}.txt").read_text().splitlines()
            actions = [a for a in actions if a.strip()]
            for img in range(len(actions)):
                ids = [int(a) for a in re.split(r"[,\s]+", actions[img].strip()) if a]
                image = vdir / domain / f"{img:03d}.jpg"
                if not image.is_file():
                    raise SuiteError(f"{image} is missing: the arena_inputs folder is incomplete ({WORLDMARK_SOURCE})")
                if img >= len(prompts):
                    raise SuiteError(f"{vdir / f'prompt_{domain}.txt'} has {len(prompts)} rows, image {img:03d} needs row {img + 1}")
                k = np.load(vdir / f"{domain}_intrinsics" / f"{img:03d}_intrinsics.npy", allow_pickle=False)
                size = _image_size(image)
                for aid in ids:
                    cases.append(Case(
                        id=f"{view}-{domain}-{img:03d}_{aid:03d}", suite="worldmark",
                        trajectory=library.worldmark(aid), prompt=prompts[img],
                        prompt_source=f"{view}_view/prompt_{domain}.txt:{img + 1}", image=str(image),
                        intrinsics=[float(v) for v in np.asarray(k).reshape(-1)], image_size=size, view=view,
                        tags={"view": view, "domain": domain, "image": img, "action_id": aid,
                              "keys": library.WORLDMARK_PROTOCOL[aid]},
                    ))
    return cases


def worldmark_engine_suite(full: bool = False, seed: int = 0, **_) -> list[Case]:
    """Engine scenes x the 15-id protocol. Default: 15 cases, one per action id, cycling view and palette."""
    cases = []
    palettes = {"real": "realistic", "style": "stylised"}
    if full:
        for view in WORLDMARK_VIEWS:
            for domain in WORLDMARK_DOMAINS:
                for img in range(25):
                    for j in range(5):
                        aid = (img * 5 + j + (3 if domain == "style" else 0)) % 15 + 1
                        cases.append(_engine_case(view, domain, palettes[domain], img, aid, seed))
    else:
        combos = [(v, d) for v in WORLDMARK_VIEWS for d in WORLDMARK_DOMAINS]
        for aid in range(1, 16):
            view, domain = combos[(aid - 1) % 4]
            cases.append(_engine_case(view, domain, palettes[domain], aid - 1, aid, seed))
    return cases


def _engine_case(view, domain, palette, img, aid, seed) -> Case:
    scene_seed = int(seed) * 1000 + (0 if view == "first" else 500) + (0 if domain == "real" else 250) + img
    keys = library.WORLDMARK_PROTOCOL[aid]
    return Case(
        id=f"{view}-{domain}-{img:03d}_{aid:03d}", suite="worldmark-engine", trajectory=library.worldmark(aid),
        prompt=f"{'First' if view == 'first' else 'Third'}-person view. A procedural {palette} voxel town "
               f"(Engine scene {scene_seed}).",
        prompt_source=f"engine:scene-{scene_seed}", scene={"seed": scene_seed, "palette": palette},
        intrinsics=engine_intrinsics(), image_size=ENGINE_IMAGE_SIZE, view=view,
        tags={"view": view, "domain": domain, "image": img, "action_id": aid, "keys": keys},
    )
