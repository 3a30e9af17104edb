"""worldgate's own patches to a model's official code: anchored edits, applied by ``worldgate setup``.

A patch only lets control in (AlayaLab/WorldMark output_spec §6, "patch discipline"): it adds a file input that builds
the same control object the model's script builds from its own defaults, and changes nothing the model does with it.
A :class:`Patch` is a list of :class:`Edit`\\ s, each anchored on a short piece of the model's file that must occur
exactly once (so an edit never lands in the wrong place, and a checkout at another commit is refused with the anchor
named), or a new file of worldgate's own code beside the model's (``anchor=None``). Every edit's text carries the
patch's marker line (``# worldgate-patch <model> v<version>``), which is how ``load`` and ``doctor`` tell a patched
checkout from an unpatched one, and how applying twice changes nothing.

No model code is shipped: an anchor is one or a few lines, and everything inserted is worldgate's.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: the largest file an edit reads (model scripts are a few hundred KB at most)
MAX_PATCHED_FILE_BYTES = 8 << 20


class PatchError(RuntimeError):
    """A patch could not be applied: the message names the file, the anchor and what to do."""


@dataclass(frozen=True)
class Edit:
    """One change to one file of the checkout (``file`` is relative to the model's folder in the checkout).

    ``where``: ``"after"`` inserts ``text`` after the anchor, ``"before"`` before it, ``"replace"`` replaces it.
    ``anchor=None`` creates ``file`` with ``text`` (worldgate's own module beside the model's)."""

    file: str
    anchor: str | None
    text: str
    where: str = "after"

    def __post_init__(self):
        if self.where not in ("after", "before", "replace"):
            raise ValueError(f"Edit.where must be after, before or replace, not {self.where!r}")
        if Path(self.file).is_absolute() or ".." in Path(self.file).parts:
            raise ValueError(f"Edit.file must be a path inside the checkout, not {self.file!r}")


@dataclass(frozen=True)
class Patch:
    model: str
    version: str
    edits: tuple[Edit, ...]
    #: what the patch adds, in one line (shown by doctor and setup)
    summary: str = ""
    #: the flags it adds to the entry point (documentation; the adapter's command passes them)
    flags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def marker(self) -> str:
        return f"worldgate-patch {self.model} v{self.version}"

    def files(self) -> list[str]:
        return sorted({e.file for e in self.edits})

    def markers(self) -> dict[str, str]:
        """file -> the marker each patched file holds once the patch is applied."""
        return {f: self.marker for f in self.files()}

    def missing(self, root: str | Path) -> list[str]:
        """The patched files of ``root`` that do not hold this patch's marker (empty: applied)."""
        root = Path(root)
        out = []
        for f in self.files():
            p = root / f
            try:
                text = _read(p)
            except (OSError, PatchError):
                out.append(f)
                continue
            if self.marker not in text:
                out.append(f)
        return out

    def apply_text(self, file: str, text: str | None) -> str:
        """``text`` (the file's content, None if it does not exist) with this patch's edits to ``file`` applied."""
        for e in (e for e in self.edits if e.file == file):
            body = _stamp(e.text, self.marker)
            if e.anchor is None:
                if text is not None and self.marker not in text:
                    raise PatchError(f"{file} already exists and is not worldgate's: the patch creates it; remove it "
                                     "or check the checkout's commit")
                text = body
                continue
            if text is None:
                raise PatchError(f"{file} is missing from the checkout: is it a checkout of the model at the pinned "
                                 "commit?")
            n = text.count(e.anchor)
            if n != 1:
                first = e.anchor.strip().splitlines()[0] if e.anchor.strip() else e.anchor
                raise PatchError(f"{file}: the patch's anchor {first!r} occurs {n} times (it must occur once): the "
                                 "checkout is not at the commit the patch was written for; `git -C CHECKOUT checkout "
                                 "COMMIT` (worldgate doctor --model NAME prints it), or apply the edit by hand")
            i = text.index(e.anchor)
            j = i + len(e.anchor)
            if e.where == "after":
                text = text[:j] + body + text[j:]
            elif e.where == "before":
                text = text[:i] + body + text[i:]
            else:
                text = text[:i] + body + text[j:]
        return text

    def apply(self, root: str | Path) -> list[str]:
        """Apply to the checkout folder ``root``; returns the files changed (empty: already applied). Each file is
        replaced atomically, and nothing is written unless every edit of every file found its anchor, so a
        checkout at another commit is left untouched."""
        root = Path(root)
        todo = {}
        for f in self.files():  # every file's new text first: a missing anchor anywhere writes nothing at all
            p = root / f
            old = _read(p) if p.exists() or p.is_symlink() else None
            if old is not None and self.marker in old:
                continue
            todo[f] = self.apply_text(f, old)
        for f, new in todo.items():
            _write_atomic(root / f, new)
        return list(todo)


def _stamp(text: str, marker: str) -> str:
    """``text`` with the marker as a comment on its first line (Python and shell files alike)."""
    if marker in text:
        return text
    lead = text[: len(text) - len(text.lstrip("\n"))]
    rest = text[len(lead):]
    indent = rest[: len(rest) - len(rest.lstrip(" "))]
    return f"{lead}{indent}# {marker}\n{rest}"


def _read(p: Path) -> str:
    if p.is_symlink() or not p.is_file():
        raise PatchError(f"{p} is not a regular file of the checkout")
    if p.stat().st_size > MAX_PATCHED_FILE_BYTES:
        raise PatchError(f"{p} is larger than {MAX_PATCHED_FILE_BYTES} bytes: not a model script")
    return p.read_text(encoding="utf-8")


def _write_atomic(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    mode = p.stat().st_mode & 0o7777 if p.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
