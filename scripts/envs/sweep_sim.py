"""`scripts/envs/sweep.py --simulate`: the sweep's cells run on simulated clusters (SimGrid's SMPI,
scripts/envs/simulate.py) on this machine instead of being submitted to Slurm.

Per cell: 1 node -> preset node8 (with --tasks-per-node GPUs), N nodes -> fattree of N nodes;
the cell's link preset -> its simulated links (scripts/envs/sim_platform.py); the benchmark flags are
the job script's own (slurm/lib/run_bench.sh `suite_case_args`, with the cell's variables): its
gpu sizes with modeled compute at -F when -F is given, its cpu sizes with executed compute
otherwise. Results land in results/sim/sweeps/<UTC>/<job name>.h5 (or --sweep-dir).
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

from scripts import ROOT as REPO, module_command
from scripts.envs.sim_platform import LINKS


class SimSweepError(ValueError):
    """A cell that cannot be simulated (reported like the sweep's other bad input)."""


def platform_args(args: argparse.Namespace, cell) -> list[str]:
    if cell.link not in LINKS:
        raise SimSweepError(f"link preset {cell.link!r} has no simulated link "
                            f"(suite sim-platform --list)")
    if cell.nodes == 1:
        return ["--platform", "node8", "--gpus-per-node", str(args.tasks_per_node)]
    return ["--platform", "fattree", "--nodes", str(cell.nodes),
            "--gpus-per-node", str(args.tasks_per_node)]


def simulated_bw(args: argparse.Namespace, cell) -> float | None:
    """W for the model's prediction of a simulated cell: the link the group's traffic crosses
    (inside the node on one node, the GPUs' NICs across nodes)."""
    link = LINKS.get(cell.link)
    if link is None:
        return None
    return link.intra_bw if cell.nodes == 1 and not link.intra_via_nic else link.net_bw


def case_args(bench: str, mode: str, env: dict[str, str]) -> list[str]:
    """The job script's benchmark flags for this cell (slurm/lib/run_bench.sh)."""
    script = f'source "{REPO}/slurm/lib/run_bench.sh" && suite_case_args {bench} {mode}'
    proc = subprocess.run(["bash", "-c", script], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SimSweepError(proc.stderr.strip() or f"no flags for {bench} in {mode} mode")
    return proc.stdout.splitlines()


def simulate_command(args: argparse.Namespace, cell, name: str, out_dir: Path) -> list[str]:
    mode = "gpu" if args.flops else "cpu"
    env = {k: v for k, v in cell.env.items() if k not in ("SUITE_MODE", "TRANSPORT")}
    cmd = [*module_command("envs.simulate"), cell.bench.removesuffix("_layer"),
           *platform_args(args, cell), "--ranks", str(cell.ranks), "--link", cell.link,
           "--out", str(out_dir / f"{name}.h5")]
    if args.flops:
        cmd += ["--sim-flops", repr(args.flops)]
    return cmd + ["--", *case_args(cell.bench, mode, env)]


def plan(args: argparse.Namespace, cells, names: list[str], out_dir: Path) -> list[list[str]]:
    """One simulation command per cell (run by the sweep), after the line that announces them."""
    commands = [simulate_command(args, c, n, out_dir) for c, n in zip(cells, names)]
    print(f"\n{len(commands)} simulation(s) on this machine"
          f"{' (dry run: nothing runs)' if args.dry_run else ''}, "
          f"{'modeled compute at F = ' + format(args.flops, 'g') if args.flops else 'executed compute'}:")
    return commands
