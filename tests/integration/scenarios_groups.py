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


def scenario_groups_order(env: Env) -> None:
    """--order lays a standalone method's groups out as mesh lays out its axes: with the method's
    axis after dp, the TP groups of 2 on 4 ranks are {0, 2} and {1, 3}. The communicator's own
    ranks (MPI's translation to the job's) decide the recorded layout; each case still checks.
    One order a job: a list, an unknown axis are refused on every rank."""
    for bench, flags in (("sp_tp", ["--mode", "collectives", "--tp", "2", "--sizes", "1K"]),
                         ("ring_attention", ["--cp", "2", "--block", "64", "--heads", "2",
                                             "--head-dim", "64", "--dtype", "fp64"]),
                         ("ulysses", ["--cp", "2", "--seq-per-rank", "64", "--heads", "4",
                                      "--head-dim", "64", "--dtype", "fp64"])):
        for order, layout in (("tp,cp,ep,dp", "consecutive"), ("dp,tp,cp,ep", "order dp,tp,cp,ep")):
            out = env.workdir / f"{bench}_{order.replace(',', '')}.h5"
            proc = env.mpirun(4, bench, *flags, "--order", order, "--iters", "2", "--warmup", "1",
                              "--out", str(out))
            expect(proc.returncode == 0, f"{bench} --order {order} failed", proc)
            with h5py.File(out) as f:
                # ulysses makes its CP groups per case: its file's group is the job.
                want = "consecutive" if bench == "ulysses" else layout
                expect(f.attrs["group_layout"] == want,
                       f"{bench} --order {order}: group_layout {f.attrs['group_layout']!r}, want {want!r}")
                for name, g in f[bench].items():
                    expect(g.attrs["check_passed"] == 1, f"{bench} --order {order} {name}: check failed")
        print(f"  ok: {bench} in both orders")
    for bad, words in (("tp,cp,ep,dp/dp,tp,cp,ep", "one order"), ("tp,xx,ep,dp", "unknown axis")):
        out = env.workdir / "bad_order.h5"
        proc = env.mpirun(4, "sp_tp", "--tp", "2", "--order", bad, "--iters", "2", "--out", str(out),
                          timeout=60)
        expect(proc.returncode == 2, f"--order {bad}: exit {proc.returncode}", proc)
        expect(proc.stderr.count("error:") == 1 and "--order" in proc.stderr and words in proc.stderr,
               f"--order {bad}: message", proc)
        expect(not out.exists(), f"--order {bad}: a results file was left", proc)
    print("  ok: bad --order refused")


SCENARIOS = {"sp_tp_groups": scenario_sp_tp_groups, "groups_order": scenario_groups_order}

if __name__ == "__main__":
    sys.exit(run_scenario.run_cli(SCENARIOS, __doc__))
