"""``worldgate new-adapter NAME --out DIR``: a pip-installable plugin skeleton for a new model (docs/plugins.md).

It writes a package that registers ``NAME`` through the ``worldgate.adapters`` entry point, an adapter whose TODOs
say what to read in the model's code (the questions of docs/adding-a-model.md), and tests that already run the
conformance battery of :mod:`worldgate.testing`. Its plan is a working default (the commanded poses at the declared
fps, one frame per 1/fps), so the battery passes before the first TODO is done; the runtime refuses until written.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from string import Template

#: a model name the skeleton can turn into a distribution, a module and a class name (bounded)
NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+){0,7}")
MAX_NAME = 48


class ScaffoldError(ValueError):
    """The skeleton cannot be written (a bad name, an --out that holds files); the message says what to change."""


def names(name: str) -> dict[str, str]:
    """``my-model`` -> distribution ``worldgate-my-model``, module ``worldgate_my_model``, class ``MyModel``."""
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise ScaffoldError(f"model name {str(name)[:60]!r}: use lower-case letters and digits in words joined by '-' "
                            f"or '_', starting with a letter, at most {MAX_NAME} characters (e.g. my-model)")
    words = re.split(r"[-_]", name)
    return {"name": name, "dist": "worldgate-" + "-".join(words), "module": "worldgate_" + "_".join(words),
            "cls": "".join(w[:1].upper() + w[1:] for w in words)}


PYPROJECT = Template('''\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "${dist}"
version = "0.1.0"
description = "worldgate adapter for ${name} (a worldgate plugin)"
requires-python = ">=3.10"
dependencies = ["worldgate"]

[project.optional-dependencies]
test = ["pytest>=7"]

# the entry point that makes `worldgate generate --model ${name}` find the adapter (docs/plugins.md); a name another
# installed package (or worldgate itself) already registers is refused, naming both packages
[project.entry-points."worldgate.adapters"]
"${name}" = "${module}.adapter:${cls}"

[tool.setuptools.packages.find]
where = ["src"]
''')

README = Template('''\
# ${dist}

A [worldgate](https://github.com/) plugin: the adapter of ${name}.

```bash
pip install -e '.[test]'            # registers the entry point: worldgate list models shows ${name}
pytest -q                           # worldgate's conformance battery on the adapter (worldgate.testing)
worldgate generate --model ${name} --suite worldmark --data ARENA --dry-run --limit 5   # native inputs only
```

Fill the TODOs of `src/${module}/adapter.py` in the order of worldgate's docs/adding-a-model.md: read the model's
code (not its README), cite every fact as `path:LINE` at a commit, then pin exact native values in golden tests.
''')

ADAPTER = Template('''\
"""${name}: worldgate adapter (a plugin skeleton written by `worldgate new-adapter ${name}`).

Read the code paths the model's entry point really runs (not its README) and record every fact here as
`path:LINE` at a commit (worldgate's docs/adding-a-model.md, "Read the repository"):

TODO(read) control: how does control get in (a file: npz/npy/json/txt; a CLI string; interactive only)?
TODO(read) keys: the keyboard vector order ([W,S,A,D] or [W,A,S,D]) and the mouse order ([pitch, yaw]?)
TODO(read) letters: do A/D strafe or yaw?
TODO(read) units: what is one control step (a frame, a latent of 4 frames, a 33-frame action, a caption line)?
TODO(read) signs: which sign is yaw right, which pitch up (check the pose integration, not the label)
TODO(read) poses: c2w or w2c, which axes, relative to frame 0, normalised translation?
TODO(read) frames: the frame-count rule (4k+1, 8k+1, whole chunks, ...)
TODO(read) fps: the fps the video writer uses (measure the written file), not the README's
TODO(read) intrinsics: regime 1 none, 2 fixed/derived, 3 estimated at runtime, 4 required (transformed)
TODO(read) resize: one aspect-ratio policy (crop, pad, stretch) for every case
TODO(read) chunks: first and later chunk length, KV window, sink, memory selection
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from worldgate.adapters import Adapter, AdapterError, AdapterInfo, Chunk, NativeInputs
from worldgate.adapters.base import horizontal_fov_deg, image_arg

NO_RUNTIME = "{name} has no runtime yet: write load() and rollout() in ${module}/adapter.py (use --dry-run until then)"
MAX_SIZE = 4096


class ${cls}(Adapter):
    info = AdapterInfo(
        name="${name}",
        version="0.1",  # bump when plan() changes: records name the version that planned them
        width=640, height=360,  # TODO(read): the native size
        fps=16.0, fps_source="TODO: writer|config (file:line)",  # TODO(read): the writer's fps
        chunk_frames=16, first_chunk_frames=16,  # TODO(read): the chunking
        duration_unit="frames",  # TODO(read): "latents (x4 frames)", "33-frame actions", ...
        control="poses",  # TODO(read): "keyboard+mouse", "text", "action-dsl", ...
        pose_convention="c2w OpenCV",  # TODO(read): the model's convention
        intrinsics_regime=1,  # TODO(read): 1-4
        aspect_policy="stretch",  # TODO(read): crop, pad or stretch
        repository="TODO: https://github.com/ORG/REPO at COMMIT",
        licence="TODO",
        integration="A",  # A its file/CLI surface, B a patch adds an input path, C import its pipeline class
    )
    #: the model args it takes are its constructor's (model.width=64 on the command line); unknown keys are refused
    MODEL_ARGS = ()

    def __init__(self, width: int | None = None, height: int | None = None):
        super().__init__(width=width, height=height)
        self.width, self.height = (self._size(v, d, k) for v, d, k in
                                   ((width, self.info.width, "width"), (height, self.info.height, "height")))

    @staticmethod
    def _size(value, default: int, key: str) -> int:
        v = default if value is None else value
        if isinstance(v, bool) or not isinstance(v, int) or not 16 <= v <= MAX_SIZE:
            raise AdapterError(f"${name}: {key} must be an integer in [16, {MAX_SIZE}], got {v!r:.40}")
        return v

    def plan(self, case) -> NativeInputs:
        """Pure, CPU-only, deterministic: the case's exact native inputs (no model is loaded here)."""
        traj, fps = case.trajectory, self.info.fps
        # TODO(frames): round to the model's frame rule, the same number of native units for every 20 s key; padding
        # goes at the end, holds the final pose and is said in caveats
        n = traj.n_frames(fps)
        # TODO(poses): convert the commanded OpenCV c2w poses into the model's control (keys, mouse, poses, text);
        # a motion it cannot express raises UnsupportedMotion, never a substitute
        c2w = traj.poses(fps, n)
        # TODO(intrinsics): regime 4 transforms the case's [fx, fy, cx, cy] through the model's resize/crop into
        # intrinsics["native"] (pixels of the plan's size) and records the transform
        case_fov = horizontal_fov_deg(case.intrinsics[0], case.image_size[0]) \\
            if case.intrinsics is not None and case.image_size is not None else None
        return NativeInputs(
            adapter=self.info.name, adapter_version=self.info.version, case_id=case.id,
            width=self.width, height=self.height, fps=fps, n_frames=n, segment_frames=traj.segment_frames(fps, n),
            arrays={"c2w": c2w.astype(np.float64)},
            # TODO(control): the exact files the model's entry point reads, and its command line (SEED: the seed)
            files={"poses.npy": c2w.astype(np.float64),
                   "command.txt": f"python inference.py --image {image_arg(case)} --poses poses.npy --seed SEED"},
            intrinsics={"regime": self.info.intrinsics_regime, "case": case.intrinsics,
                        "case_image_size": case.image_size, "case_hfov_deg": case_fov, "native_hfov_deg": None},
            prompt=case.prompt, prompt_source=case.prompt_source,
            extra={"image": case.image, "duration_s": traj.duration},
        )

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        # TODO(runtime): load the model (by Hugging Face id with local_files_only=True: a missing model is an
        # AdapterError naming the id and `hf download ...`), or subclass worldgate.adapters.repo.RepoAdapter
        raise AdapterError(NO_RUNTIME.format(name=self.info.name))

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0) -> Iterator[Chunk]:
        # TODO(runtime): yield Chunk(start, frames) with frames (T, height, width, 3) uint8, seeded by `seed`
        raise AdapterError(NO_RUNTIME.format(name=self.info.name))
''')

INIT = Template('''\
"""worldgate plugin: the ${name} adapter (registered by the worldgate.adapters entry point in pyproject.toml)."""

from .adapter import ${cls}

__all__ = ["${cls}"]
''')

TESTS = Template('''\
"""worldgate's conformance battery on ${name} (worldgate.testing), then this model's own golden tests."""

import numpy as np

from worldgate.testing import AdapterConformance, worldmark_case

from ${module}.adapter import ${cls}


class Test${cls}Conformance(AdapterConformance):
    adapter_name = "${name}"  # found through this package's entry point: `pip install -e .` first
    # seconds per key of a real load() + rollout() (set it once the runtime runs on this machine)
    rollout_seconds = None


def test_registered_class():
    assert Test${cls}Conformance().make().__class__ is ${cls}


def test_plan_follows_the_trajectory():
    # TODO(golden): exact native values for WorldMark ids 1, 6 and 11 and the sign of yaw right, read from the
    # model's code (docs/adding-a-model.md, "Register and test")
    plan = ${cls}().plan(worldmark_case(1))
    assert plan.n_frames == plan.segment_frames[-1][1]
    assert np.isfinite(plan.arrays["c2w"]).all()
''')


def files_for(name: str) -> dict[str, str]:
    """The skeleton's files: relative path -> text."""
    n = names(name)
    return {
        "pyproject.toml": PYPROJECT.substitute(n),
        "README.md": README.substitute(n),
        f"src/{n['module']}/__init__.py": INIT.substitute(n),
        f"src/{n['module']}/adapter.py": ADAPTER.substitute(n),
        f"tests/test_{n['module']}.py": TESTS.substitute(n),
    }


def write_skeleton(name: str, out: str | Path) -> list[Path]:
    """Write the skeleton of ``name`` into ``out`` (a new or empty folder); returns the files written."""
    files = files_for(name)  # the name is checked before anything is written
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ScaffoldError(f"--out {out} exists and is not an empty folder: give a new folder (nothing is "
                            "overwritten)")
    written = []
    for rel, text in files.items():
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        written.append(p)
    return written


def cmd_new_adapter(a: argparse.Namespace) -> int:
    paths = write_skeleton(a.name, a.out)
    n = names(a.name)
    print(f"wrote the {n['dist']} plugin skeleton ({len(paths)} files) into {a.out}:")
    for p in paths:
        print(f"  {p}")
    print(f"next: pip install -e '{a.out}[test]' && pytest -q {a.out}  (the conformance battery), then fill the "
          f"TODOs of src/{n['module']}/adapter.py (docs/adding-a-model.md)")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("new-adapter", help="write a pip-installable plugin skeleton for a new model: pyproject with "
                                           "the entry point, an adapter with TODOs, tests running the battery")
    p.add_argument("name", help="the model's name (what --model takes), e.g. my-model")
    p.add_argument("--out", required=True, help="a new (or empty) folder for the package")
    p.set_defaults(fn=cmd_new_adapter)


__all__ = ["ScaffoldError", "add_parser", "cmd_new_adapter", "files_for", "names", "write_skeleton"]
