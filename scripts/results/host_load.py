"""Run a benchmark command and record how busy the machine was with other work meanwhile.

    suite host-load --out results/<stamp>/sp_tp.h5 -- mpirun -np 4 build/bin/sp_tp ...

A time measured while other processes took some of the cores is slower for that reason alone
(on a 2-core machine, a compiler beside a 4-rank run made cases 2 to 13 times slower), so the
verdict of a run against its baseline (run_verdict.py) needs to know. The machine's busy CPU
time (/proc/stat) less the command's own (its process tree's, from getrusage) over the command's
wall time is the number of cores that other processes used: written into the results file as
the file attributes `host_other_cores` and `host_cores` (this machine's cores) once the command
has ended and the file is complete. Linux only (elsewhere nothing is written); one host (a run
over several hosts sees only this one's load). The exit status is the command's.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from scripts.results.suite_results import add_file_attrs

PROC_STAT = Path("/proc/stat")


def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (all cores; /proc/stat's user,
    nice, system, irq, softirq and steal), None where there is no /proc/stat."""
    try:
        fields = PROC_STAT.read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """User and system CPU of every finished child (and their children, once waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def other_cores(busy: float, own: float, wall: float) -> float:
    """Cores other processes used on average: the machine's busy CPU seconds less the
    command's own, over the wall time (never below 0: the two clocks tick apart)."""
    return max(0.0, busy - own) / wall


def run_measured(command: list[str]) -> tuple[int, float | None]:
    """Runs `command`; returns its exit status and the cores other processes used meanwhile."""
    busy0, own0, t0 = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic()
    rc = subprocess.call(command)
    busy1, own1, wall = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic() - t0
    if busy0 is None or busy1 is None or wall <= 0:
        return rc, None
    return rc, other_cores(busy1 - busy0, own1 - own0, wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True,
                        help="the results file the command writes (attributes added to it)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command and its flags")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    rc, other = run_measured(command)
    if other is not None and args.out.exists():
        add_file_attrs(args.out, {"host_other_cores": round(other, 3),
                                  "host_cores": os.cpu_count() or 0})
    return rc


if __name__ == "__main__":
    sys.exit(main())
