#!/usr/bin/env python3
"""Integration scenarios for process groups (--tp) and the cluster attributes of a results file.

Usage like run_scenario.py: scenarios_groups.py SCENARIO --bin-dir DIR --mpiexec MPIRUN.
"""
from __future__ import annotations

import sys

import h5py
import numpy as np

import run_scenario
from run_scenario import Env, expect


def scenario_sp_tp_groups(env: Env) -> None:
    """4 ranks as two TP groups of 2: every case runs in both groups at once, bytes are those
    of a group of 2, step times still cover all 4 ranks, and the layer's SP check gathers over
    the group."""
    out = env.workdir / "groups.h5"
    link_env = "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"
    proc = env.mpirun(4, "sp_tp", "--mode", "all", "--tp", "2", "--sizes", "1K,64K", "--iters", "3",
                      "--warmup", "1", "--seq", "64", "--batch", "1", "--hidden", "256", "--heads", "4",
                      "--link", "net", "--out", str(out),
                      extra_env={"SUITE_LINK_ENV": link_env, "SLURM_JOB_NODELIST": "node[01-02]"})
    expect(proc.returncode == 0, "sp_tp --tp 2 failed", proc)
    with h5py.File(out) as f:
        a = f.attrs
        expect(a["world_size"] == 4, "world_size")
        expect(a["group_size"] == 2 and a["group_count"] == 2, f"group attrs {a['group_size']} {a['group_count']}")
        expect(a["group_layout"] == "consecutive", "group_layout")
        expect(a["link"] == "net" and a["link_env"] == link_env, f"link_env {a['link_env']!r}")
        expect(a["slurm_nodelist"] == "node[01-02]", "slurm_nodelist")
        cases = f["sp_tp"]
        expect(len(cases) == 8, f"expected 6 collective + 2 layer cases, got {list(cases)}")
        for name, g in cases.items():
            expect(g.attrs["check_passed"] == 1, f"{name}: check failed")
            expect(g.attrs["t"] == 2, f"{name}: t = {g.attrs['t']}, expected the group size 2")
            expect(g["time_s"].shape == (3, 4), f"{name}: time_s must hold all 4 ranks")
            if g.attrs["mode"] == "collectives":
                n = int(g.attrs["n_bytes"])  # 2 (t-1)/t n with t = 2
                expect(list(g["bytes_sent"][()]) == [n] * 4, f"{name}: bytes_sent {g['bytes_sent'][()]}")
                expect(g.attrs["pred_bytes_sent_per_rank"] == n, f"{name}: prediction")
            else:
                expect(g.attrs["layer_comm_bytes_per_rank"] == g.attrs["pred_layer_comm_bytes_per_rank"],
                       f"{name}: layer bytes")
            expect(np.all(g["time_s"][()] > 0), f"{name}: times")
    print("  ok: two groups of 2")

    for bad in ("3", "-1", "8"):
        proc = env.mpirun(4, "sp_tp", "--tp", bad, "--iters", "2", "--out", str(env.workdir / "bad.h5"),
                          timeout=60)
        expect(proc.returncode == 2, f"--tp {bad}: exit {proc.returncode}", proc)
        expect(proc.stderr.count("error:") == 1 and "--tp" in proc.stderr, f"--tp {bad}: message", proc)
        expect(not (env.workdir / "bad.h5").exists(), f"--tp {bad}: a results file was left", proc)
    print("  ok: bad --tp refused")


SCENARIOS = {"sp_tp_groups": scenario_sp_tp_groups}

if __name__ == "__main__":
    sys.exit(run_scenario.run_cli(SCENARIOS, __doc__))
