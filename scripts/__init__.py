"""The suite's Python tools: results and their verdicts (results/), figures (plots/), the
clusters a benchmark runs on besides this machine's mpirun: simulated, shaped, emulated
(envs/), the planner's calibration and check (planner/), the studies behind the docs' tables
(studies/) and the PyTorch references of a GPU check (peers/). `suite --help` (scripts/cli.py)
lists the commands; each module also runs as `python -m scripts.<folder>.<module>`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A tool that starts another (`python -m scripts.envs.simulate`) hands it this package the way
# this process found it: installed, or the checkout on PYTHONPATH or in the working directory.
if str(ROOT) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)


def module_command(module: str, python: str = sys.executable) -> list[str]:
    """The command line that runs the suite's `module` ("envs.simulate") as a program."""
    return [python, "-m", f"scripts.{module}"]
