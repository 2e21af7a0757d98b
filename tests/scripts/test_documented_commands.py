"""Every command the README and docs/ show in a shell block runs as written.

A reader copies these lines. Each line that starts a suite command (`make`, `sbatch`,
`build/bin/...`, `scripts/...`, the tools' program `.venv/bin/suite COMMAND`, or
`python3 -m scripts COMMAND`) is checked the way it would fail a reader: the make target exists,
the job script exists and parses, the executable or sub-command starts and answers `--help`
(the line's own arguments may name files a fresh clone does not have yet), and every `--flag`
the line uses is one that `--help` lists. A script called without an interpreter must be
executable and start with a shebang. `suite`'s sub-commands run here as `python -m scripts`,
the same program as the one pyproject.toml installs into .venv (checked below too).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.cli import COMMANDS as SUB_COMMANDS

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("SUITE_BIN_DIR", REPO / "build" / "bin"))
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
INTERPRETERS = {".venv/bin/python", "python3", "python"}
SUITE = ".venv/bin/suite"
# Sub-commands whose words after `--` always go to one executable (plan-check: the planner's).
PASSES_ON_TO = {"mesh-orders": "mesh", "plan-check": "model"}


@dataclass(frozen=True)
class Documented:
    where: str  # file:line
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: {' '.join(self.words)}"


def shell_lines(path: Path) -> list[tuple[int, str]]:
    """The command lines of a file's ```sh blocks, continuations joined, comments dropped."""
    out: list[tuple[int, str]] = []
    in_block, pending, start = False, "", 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith("```"):
            in_block = line in ("```sh", "```bash", "```console") if not in_block else False
            continue
        if not in_block:
            continue
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if line:
            out.append((start, line))
    return out


def suite_commands() -> list[Documented]:
    commands = []
    for path in DOCS:
        for number, line in shell_lines(path):
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            # Leading VAR=value assignments (e.g. `SUITE_MODE=cpu sbatch ...`) set the environment.
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                words = words[1:]
            if not words:
                continue
            head = words[1] if words[0] in INTERPRETERS and len(words) > 1 else words[0]
            if head in ("make", "sbatch", SUITE) or words[1:3] == ["-m", "scripts"] \
                    or head.startswith(("scripts/", "build/bin/")):
                commands.append(Documented(f"{path.relative_to(REPO)}:{number}", tuple(words)))
    return commands


COMMANDS = suite_commands()


def flags_of(words: tuple[str, ...]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if re.match(r"^--[a-z][a-z0-9-]*$", w.split("=", 1)[0])]


def help_text(argv: list[str]) -> str:
    run = subprocess.run(argv + ["--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{' '.join(argv)} --help exited {run.returncode}: {run.stderr[-400:]}"
    return run.stdout + run.stderr


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([a-z][a-z-]*):", text, re.M))


def check_flags(cmd: Documented, words: tuple[str, ...], text: str) -> None:
    missing = [f for f in flags_of(words) if not re.search(re.escape(f) + r"(?![a-z0-9-])", text)]
    assert not missing, f"{cmd}: {', '.join(missing)} not in its --help"


def test_the_docs_show_commands() -> None:
    heads = {c.words[0] for c in COMMANDS}
    # A parser that silently found nothing would pass every check below.
    assert len(COMMANDS) >= 20 and {"make", "sbatch", SUITE} <= heads, [str(c) for c in COMMANDS]


def test_suite_is_the_program_the_package_installs() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"suite": "scripts.cli:main"}
    listing = help_text([sys.executable, "-m", "scripts"])
    assert all(re.search(rf"^  {name} +\S", listing, re.M) for name in SUB_COMMANDS), listing


@pytest.mark.parametrize("cmd", COMMANDS, ids=str)
def test_documented_command_runs(cmd: Documented) -> None:
    words = cmd.words
    if words[0] == "make":
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        unknown = sorted(set(targets) - make_targets())
        assert not unknown, f"{cmd}: no make target {unknown}"
        return
    if words[0] == "sbatch":
        job = next((w for w in words[1:] if w.endswith(".sbatch")), None)
        assert job and (REPO / job).is_file(), f"{cmd}: no job script"
        syntax = subprocess.run(["bash", "-n", str(REPO / job)], capture_output=True, text=True)
        assert syntax.returncode == 0, f"{cmd}: {syntax.stderr}"
        return
    if words[0] == SUITE or words[1:3] == ("-m", "scripts"):
        check_sub_command(cmd, words[1:] if words[0] == SUITE else words[3:])
        return
    interpreter = words[0] if words[0] in INTERPRETERS else None
    target = words[1] if interpreter else words[0]
    rest = words[2:] if interpreter else words[1:]
    if target.startswith("build/bin/"):
        binary = BIN_DIR / Path(target).name
        if not binary.exists():
            pytest.skip(f"{binary} not built")
        check_flags(cmd, rest, help_text([str(binary)]))
        return
    script = REPO / target
    assert script.is_file(), f"{cmd}: {target} does not exist"
    if interpreter is None:
        assert os.access(script, os.X_OK), f"{cmd}: {target} is not executable"
        assert script.read_text().startswith("#!"), f"{cmd}: {target} has no shebang"
    assert script.suffix != ".py", f"{cmd}: the tools run as `{SUITE} COMMAND`, not as files"
    # shell entry points (setup.sh, gpu_check.sh) do their work when run; existence is the check


def check_sub_command(cmd: Documented, words: tuple[str, ...]) -> None:
    """`suite NAME ARGS...`: NAME is one of its sub-commands, and ARGS' flags are NAME's (or,
    after `--`, those of the benchmark it starts)."""
    assert words and words[0] in SUB_COMMANDS, f"{cmd}: no suite command {words[:1]}"
    name, rest = words[0], words[1:]
    argv = [sys.executable, "-m", "scripts", name]
    # A sub-command's own sub-command (`baselines add DIR`) has a --help of its own.
    if rest and re.match(r"^[a-z][a-z-]*$", rest[0]) and not Path(REPO / rest[0]).exists():
        argv.append(rest[0])
    ours, passed_on = split_passed_on(rest)
    check_flags(cmd, ours, help_text(argv))
    launched = [i for i, w in enumerate(passed_on) if w.startswith("build/bin/")]
    if launched:
        # After `--`, a command line of its own (`-- mpirun -np 2 build/bin/ring_attention ...`).
        binary = BIN_DIR / Path(passed_on[launched[0]]).name
        if not binary.exists():
            pytest.skip(f"{binary} not built")
        check_flags(cmd, passed_on[launched[0] + 1 :], help_text([str(binary)]))
    elif passed_on and passed_on[0].startswith("--"):
        # After `--`: the flags of the benchmark the line names (simulate ring_attention ...),
        # or of the one the script always hands them to.
        named = [w for w in ours if (BIN_DIR / w).is_file()]
        binary = BIN_DIR / (named[0] if named else PASSES_ON_TO.get(name, "model"))
        if not binary.exists():
            pytest.skip(f"{binary} not built")
        check_flags(cmd, passed_on, help_text([str(binary)]))


def split_passed_on(words: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A script's own words, and those after `--` that it passes to a benchmark."""
    if "--" not in words:
        return words, ()
    i = words.index("--")
    return words[:i], words[i + 1 :]
