#!/usr/bin/env python3
"""Bytes on the wire (scripts/envs/wire_bytes.py): what Open MPI's own monitoring says each rank sent,
against the formula where the algorithm is known (the ring's point-to-point exchange: every
byte to the next rank; all-to-all: each block once) and against the payload elsewhere (the
library chooses the all-reduce's algorithm). One ctest test per scenario, CPU backend.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from scripts import module_command
from run_scenario import Env, expect, run_cli

# The harness's own per-step bookkeeping on the wire (an 8-byte all-reduce of the step time,
# a barrier), which the library counts beside the case's traffic.
BOOKKEEPING = 256


def measure(env: Env, path: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([*module_command("envs.wire_bytes"), str(path), "--mpirun", env.mpiexec, *extra],
                          capture_output=True, text=True, timeout=600)
    print(proc.stdout + proc.stderr)
    expect(proc.returncode == 0, "wire_bytes.py failed", proc)
    return proc


def measured_run(env: Env, ranks: int, binary: str, out: Path, *args: str) -> None:
    """Runs `binary` on the CPU backend into `out`, then adds what each rank put on the wire."""
    proc = env.mpirun(ranks, binary, "--backend", "cpu", *args, "--out", str(out))
    expect(proc.returncode == 0, f"{binary} failed", proc)
    measure(env, out)


def expect_wire_is_payload(g) -> None:
    """A case whose algorithm sends each byte once: the wire carried the payload (and the
    harness's bookkeeping)."""
    payload, wire = g["bytes_sent"][()], g["wire_bytes_sent"][()]
    expect(np.all(np.abs(wire - payload) <= BOOKKEEPING), f"wire {wire} != payload {payload}")


def scenario_collectives(env: Env) -> None:
    """All-reduce and reduce-scatter + all-gather at a latency-bound and a bandwidth-bound size:
    never below the bandwidth-optimal 2 (t-1)/t n, and recorded per peer."""
    out = env.workdir / "sp.h5"
    measured_run(env, 4, "sp_tp", out, "--sizes", "1K,1M", "--activation-case", "0", "--iters", "3")
    with h5py.File(out) as f:
        for name, g in f["sp_tp"].items():
            a = g.attrs
            n, t = int(a["n_bytes"]), 4
            optimal = 2 * (t - 1) / t * n
            wire = g["wire_bytes_sent"][()]
            expect(wire.shape == (4,) and g["wire_bytes_to_peer"].shape == (4, 4), f"{name}: shapes")
            expect(np.all(wire >= optimal - 1), f"{name}: {wire} on the wire, below the optimal {optimal}")
            expect(np.all(np.diag(g["wire_bytes_to_peer"][()]) == 0), f"{name}: bytes to itself")
            expect(a["wire_bytes_sent_per_rank"] == wire.max() and "monitoring" in a["wire_method"],
                   f"{name}: attributes")
            expect(a["wire_monitoring_time_ratio"] > 0, f"{name}: monitoring cost not recorded")
    plots = env.workdir / "plots"
    proc = subprocess.run([*module_command("plots.plot"), str(out), "--out", str(plots)], capture_output=True, text=True)
    expect(proc.returncode == 0 and (plots / "sp_tp_wire.png").exists(), f"no wire figure: {proc.stderr}")


def scenario_ring_exchange(env: Env) -> None:
    """The ring's exchange is point to point: what the library sent equals the payload, and all
    of it goes to the next rank."""
    out = env.workdir / "ring.h5"
    measured_run(env, 4, "ring_attention", out, "--block", "64", "--layout", "zigzag", "--iters", "3")
    with h5py.File(out) as f:
        (g,) = f["ring_attention"].values()
        expect_wire_is_payload(g)
        to_peer = g["wire_bytes_to_peer"][()]
        for r in range(4):
            nxt = to_peer[r, (r + 1) % 4]
            expect(to_peer[r].sum() - nxt <= BOOKKEEPING, f"rank {r} sent {to_peer[r]}: not all to rank {(r + 1) % 4}")


def scenario_all_to_all(env: Env) -> None:
    """Plain Ulysses: its all-to-alls send each block once: wire = payload."""
    out = env.workdir / "uly.h5"
    measured_run(env, 4, "ulysses", out, "--seq", "256", "--ulysses-degree", "4", "--iters", "3")
    with h5py.File(out) as f:
        (g,) = f["ulysses"].values()
        expect_wire_is_payload(g)


def scenario_not_open_mpi(env: Env) -> None:
    """An MPI without these counters: each case says so, and no figure is made up."""
    out = env.workdir / "sp.h5"
    proc = env.mpirun(2, "sp_tp", "--backend", "cpu", "--sizes", "1K", "--activation-case", "0",
                      "--iters", "2", "--out", str(out))
    expect(proc.returncode == 0, "sp_tp failed", proc)
    fake = env.workdir / "mpirun_other"
    fake.write_text("#!/bin/sh\necho 'HYDRA build details: MPICH 4.1'\n")
    fake.chmod(0o755)
    proc = subprocess.run([*module_command("envs.wire_bytes"), str(out), "--mpirun", str(fake)],
                          capture_output=True, text=True, timeout=60)
    expect(proc.returncode == 0, "wire_bytes.py failed on another MPI", proc)
    with h5py.File(out) as f:
        for name, g in f["sp_tp"].items():
            expect("not Open MPI" in g.attrs["wire_note"] and "wire_bytes_sent" not in g, f"{name}: {dict(g.attrs)}")


SCENARIOS = {
    "wire_collectives": scenario_collectives,
    "wire_ring_exchange": scenario_ring_exchange,
    "wire_all_to_all": scenario_all_to_all,
    "wire_not_open_mpi": scenario_not_open_mpi,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
