"""The mesh benchmark on a simulated cluster, for the scripts that set its predictions beside
its runs (mesh_orders.py, plan_check.py): one run of `mesh` through simulate.py on SMPI's
`fattree`, its cases' attributes read back; and the rows those scripts write as CSV."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import h5py

from scripts import module_command

GPUS_PER_NODE = 8  # fattree's nodes


def simulate_mesh(*, nodes: int, ranks: int, link: str, sim_flops: float, build: Path | None,
                  mesh_flags: list[str], out: Path, bench: str = "mesh") -> list[dict]:
    """Every case's attributes of one simulated run of `bench` (mesh, or pipeline's block);
    exits with the run's last line when it fails."""
    cmd = [*module_command("envs.simulate"), bench, "--platform", "fattree",
           "--nodes", str(nodes), "--ranks", str(ranks), "--link", link, "--sim-flops", str(sim_flops),
           "--no-plot", "--out", str(out)]
    if build:
        cmd += ["--build", str(build)]
    proc = subprocess.run([*cmd, "--", *mesh_flags], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"error: {bench} on the simulated cluster failed (exit {proc.returncode})")
    with h5py.File(out) as f:
        return [{k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()}
                for g in f[bench].values()]


def write_rows(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
