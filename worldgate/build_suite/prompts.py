"""WorldMark's suite-building prompts, verbatim (prompts/worldmark/build/, sources in its SOURCES.txt)."""

from __future__ import annotations

from pathlib import Path

from worldgate import prompts

PROMPT_DIR = Path(prompts.__file__).resolve().parent / "worldmark" / "build"
PROMPT_NAMES = ("caption_scene", "caption_character", "select_actions", "third_person_edit")


def load_prompt(name: str) -> str:
    if name not in PROMPT_NAMES:
        raise ValueError(f"unknown build prompt {name!r}; known: {', '.join(PROMPT_NAMES)}")
    return (PROMPT_DIR / f"{name}.txt").read_text(encoding="utf-8").removesuffix("\n")
