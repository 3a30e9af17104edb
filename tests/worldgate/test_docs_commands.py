"""Every `worldgate ...` command that README.md and docs/*.md show in a code block parses with the CLI as written:
its subcommand, its flags and their arguments (a synopsis's optional `[--flag ARG]` groups are parsed too, the first
of `a|b` alternatives standing for the choice). A command a newcomer copies should not die on a renamed flag."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

import pytest

from testpaths import ROOT
from worldgate.cli import build_parser

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?:\S*/)?worldgate\s+(.*)$")  # worldgate ..., .venv/bin/worldgate ...


def documented_commands() -> list[tuple[str, list[str]]]:
    """(file:line, argv) of each `worldgate` command in a fenced code block; continuation lines joined, comments cut,
    a synopsis's brackets opened; an excerpt (a bare `...` standing for the rest of a command) is left out."""
    out = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        fenced, i = False, 0
        while i < len(lines):
            s = lines[i].strip()
            if s.startswith("```"):
                fenced = not fenced
            elif fenced and (m := COMMAND.match(s)):
                where, cmd = f"{doc.name}:{i + 1}", m.group(1)
                while cmd.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].strip()
                cmd = re.sub(r"\s+#.*$", "", cmd)
                argv = [_choice(t) for t in shlex.split(cmd.replace("[", " ").replace("]", " "))]
                if "..." not in argv:
                    out.append((where, [t.removesuffix("...") for t in argv]))
            i += 1
    return out


def _choice(token: str) -> str:
    """`worldmark|worldmembench` (a synopsis's choice) -> `worldmark`; other tokens as they are."""
    return token.split("|")[0] if re.fullmatch(r"[a-z0-9_-]+(\|[a-z0-9_-]+)+", token) else token


COMMANDS = documented_commands()


def test_the_docs_show_the_commands_of_every_subcommand():
    assert len(COMMANDS) >= 55
    shown = {argv[0] for _, argv in COMMANDS}
    assert {"generate", "evaluate", "compare", "validate", "setup", "doctor", "build-suite", "import"} <= shown


@pytest.mark.parametrize("where, argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_a_documented_command_parses(where, argv):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as e:
        if e.code:
            pytest.fail(f"{where}: worldgate {shlex.join(argv)}\n{err.getvalue().strip()}")


def test_a_renamed_flag_is_caught():
    argv = next(argv for _, argv in COMMANDS if argv[0] == "evaluate" and "--rescore" in argv)
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        build_parser().parse_args([("--re-score" if t == "--rescore" else t) for t in argv])
