"""Link presets (slurm/link_presets.json): named environments for NCCL and Open MPI.

    link_presets.py --list                         names and what each one does
    link_presets.py net --transport nccl           NAME=value, one per line
    link_presets.py net --transport mpi --shell    `export NAME=value` lines for eval, plus
                                                   SUITE_LINK_ENV (what the results record)

An unknown preset or transport is an error (exit 2). No third-party imports: the Slurm driver
runs this with whatever python3 the compute node has.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from scripts import ROOT

PRESETS_FILE = ROOT / "slurm" / "link_presets.json"
TRANSPORTS = ("nccl", "mpi")


class PresetError(ValueError):
    """An unknown preset or transport, or a malformed presets file."""


def load_presets(path: Path = PRESETS_FILE) -> dict[str, dict]:
    """{name: {"description": str, "nccl": {VAR: value}, "mpi": {VAR: value}}}."""
    try:
        presets = json.loads(Path(path).read_text())["presets"]
    except (OSError, ValueError, KeyError) as err:
        raise PresetError(f"{path}: not a presets file ({err})") from err
    for name, preset in presets.items():
        for transport in TRANSPORTS:
            env = preset.get(transport)
            if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
                raise PresetError(f"{path}: preset {name!r} needs a {transport!r} map of strings")
    return presets


def resolve(name: str, transport: str, path: Path = PRESETS_FILE) -> dict[str, str]:
    """The variables of preset `name` for `transport`, sorted by name."""
    presets = load_presets(path)
    if name not in presets:
        raise PresetError(f"unknown link preset {name!r}; known: {', '.join(presets)}")
    if transport not in TRANSPORTS:
        raise PresetError(f"unknown transport {transport!r}; known: {', '.join(TRANSPORTS)}")
    return dict(sorted(presets[name][transport].items()))


def env_string(env: dict[str, str]) -> str:
    """`A=1 B=2`: the form stored in the results attribute `link_env` (empty for defaults)."""
    return " ".join(f"{k}={v}" for k, v in env.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", help="preset name (see --list)")
    parser.add_argument("--transport", default="nccl", help="nccl or mpi (default nccl)")
    parser.add_argument("--shell", action="store_true",
                        help="print `export` lines (and SUITE_LINK_ENV) for eval in a job script")
    parser.add_argument("--list", action="store_true", help="list the presets")
    parser.add_argument("--file", type=Path, default=PRESETS_FILE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if args.list:
            for name, preset in load_presets(args.file).items():
                print(f"{name:<10} {preset.get('description', '')}")
            return 0
        if not args.name:
            parser.error("give a preset name or --list")
        env = resolve(args.name, args.transport, args.file)
    except PresetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.shell:
        for key, value in env.items():
            print(f"export {key}={shlex.quote(value)}")
        print(f"export SUITE_LINK_ENV={shlex.quote(env_string(env))}")
    else:
        for key, value in env.items():
            print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
