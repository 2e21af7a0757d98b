#!/usr/bin/env python3
"""Integration scenarios of `moe --overlap microbatch:M` (CPU backend), one per ctest test.

The micro-batched pipeline must compute what one batch computes: with --save-tensors, the
output, the input gradient, the router's and every local expert's weight gradients and the
gates' gradients of each `_mb<M>` case equal those of the `none` case on the same tokens
(fp64, 1e-12 of the largest value), and the dispatch and combine bytes each rank handed to the
transport equal M = 1's exactly. Both cases are also checked by the benchmark against its host
double reference (check_passed). Bad --overlap values are refused before any case runs.

sim_moe_overlap_crossing runs the SMPI build (--bin-dir: build-sim/bin, `make sim`; skipped
without it) through scripts/studies/moe_overlap_crossing.py: modeled compute, so its verdicts
are the same on any host.
"""
from __future__ import annotations

import csv
import math
import subprocess

import h5py
import numpy as np

from run_scenario import Env, expect, expect_refused, run_cli
from scenarios_moe import model_lines
from scripts import module_command
from scripts.studies.moe_overlap_crossing import Point

SKIP = 77
# (link, F): an NVLink-class and an InfiniBand-class node of 8 (W = 450 and 50 GB/s), F chosen
# so that d_ff* is about 1000 on both; d_ff from d_ff*/4 to 4 d_ff*.
CROSSING_PLATFORMS = (("nvlink", "5e14"), ("ib", "5e13"))
CROSSING_D_FF = "256,512,1024,1536,2048,4096"

SMALL = ["--tokens", "64", "--hidden", "16", "--ffn-hidden", "32", "--iters", "2", "--warmup", "1",
         "--backend", "cpu", "--dtype", "fp64", "--pass", "fwd_bwd", "--save-tensors"]
COMPARED = ("output", "grad_input", "grad_router", "grad_w1", "grad_w2", "grad_gate")
EXCHANGES = ("dispatch_bytes", "combine_bytes", "bwd_dispatch_bytes", "bwd_combine_bytes")  # per rank


def run(env: Env, ranks: int, name: str, *args: str) -> h5py.File:
    out = env.workdir / f"{name}.h5"
    proc = env.mpirun(ranks, "moe", *SMALL, *args, "--out", str(out))
    expect(proc.returncode == 0, f"moe {name} failed", proc)
    return h5py.File(out)


def compare_to_m1(f: h5py.File, microbatches: list[int]) -> None:
    groups = f["moe"]
    for name in groups:
        if "_mb" in name:
            continue
        base = groups[name]
        expect(base.attrs["check_passed"] == 1, f"{name}: check_passed")
        for m in microbatches:
            mb_name = name.replace("_fwd_bwd", f"_mb{m}_fwd_bwd")
            expect(mb_name in groups, f"{mb_name} missing from {list(groups)}")
            g = groups[mb_name]
            expect(g.attrs["check_passed"] == 1, f"{mb_name}: check_passed {g.attrs['check_passed']}")
            expect(g.attrs["microbatches"] == m, f"{mb_name}: microbatches attr")
            for key in COMPARED:
                want, got = base[f"tensor_{key}"][()], g[f"tensor_{key}"][()]
                expect(want.shape == got.shape, f"{mb_name}: {key} shape {got.shape} != {want.shape}")
                err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
                expect(err <= 1e-12, f"{mb_name}: {key} differs from M = 1's by {err:.3g}")
            for table in EXCHANGES:
                want, got = base[table][()], g[table][()]
                expect(np.array_equal(got, want), f"{mb_name}: {table} {got.tolist()} != M = 1's {want.tolist()}")
            expect(g.attrs["bytes_match"] == 1, f"{mb_name}: bytes != implied by the routing")
            drops = g["drops_per_microbatch"][()].ravel()
            expect(drops.shape == (m,) and not drops.any(), f"{mb_name}: dropless drops {drops}")
            a = g.attrs
            expect(a["overlap_a2a_s"] > 0 and a["overlap_compute_s"] > 0 and a["pred_step_s"] > 0,
                   f"{mb_name}: overlap figures")
            expect(np.isclose(a["exposed_a2a_s"], a["time_median_s"] - a["overlap_compute_s"]),
                   f"{mb_name}: exposed a2a is not the step minus the compute")
            print(f"  ok: {mb_name} equals M = 1")


def scenario_equal(env: Env) -> None:
    """Flat dispatch, 4 ranks, skewed routing: M = 2 and 4 equal M = 1."""
    with run(env, 4, "overlap_flat", "--experts", "8", "--skew", "zipf",
             "--overlap", "none,microbatch:2,microbatch:4") as f:
        compare_to_m1(f, [2, 4])


def scenario_nodes(env: Env) -> None:
    """Hierarchical dispatch (2 nodes of 2), node-limited routing and redundant experts: M = 4
    equals M = 1."""
    with run(env, 4, "overlap_nodes", "--experts", "8", "--ranks-per-node", "2",
             "--dispatch", "flat,hierarchical", "--max-nodes-per-token", "1",
             "--overlap", "none,microbatch:4") as f:
        compare_to_m1(f, [4])
    with run(env, 4, "overlap_red", "--experts", "8", "--skew", "zipf", "--balance-steps", "2",
             "--redundant-experts", "4", "--overlap", "none,microbatch:4") as f:
        compare_to_m1(f, [4])


def scenario_capacity(env: Env) -> None:
    """Under a capacity factor each micro-batch drops against its share: drops are counted per
    micro-batch and the bytes are still those the routing implies."""
    with run(env, 4, "overlap_cf", "--experts", "8", "--skew", "zipf", "--capacity-factor", "1.0",
             "--overlap", "microbatch:4") as f:
        for name, g in f["moe"].items():
            expect(g.attrs["bytes_match"] == 1, f"{name}: bytes != implied")
            drops = g["drops_per_microbatch"][()].ravel()
            expect(drops.shape == (4,) and drops.sum() == g.attrs["dropped_copies"] and drops.sum() > 0,
                   f"{name}: drops per micro-batch {drops} against {g.attrs['dropped_copies']}")


def scenario_crossing_printed(env: Env) -> None:
    """The results' d_ff* is METHODS 4's (F/W)(N_e-1)/N_e x e/2 (/1.5 SwiGLU) of the run's own F
    and W, and `model --section moe` prints the same for them."""
    with run(env, 2, "overlap_dff", "--experts", "4", "--overlap", "microbatch:2") as f:
        for name, g in f["moe"].items():
            a = g.attrs
            F, W = a["calib_flops_per_s"], a["calib_bytes_per_s"]
            want = F / W * (2 - 1) / 2 * 8 / 2 / 1.5  # fp64 rows, SwiGLU
            expect(math.isclose(a["pred_d_ff_star"], want, rel_tol=1e-12), f"{name}: d_ff* {a['pred_d_ff_star']} != {want}")
            printed = model_lines(env, "--section", "moe", "--experts", "4", "--ep", "2", "--swiglu",
                                  "--dtype", "fp64", "--flops", repr(float(F)), "--bw", repr(float(W)))
            got = printed["overlap crossing d_ff* (experts hide the all-to-all above)"]
            expect(math.isclose(got, want, rel_tol=1e-5), f"model prints d_ff* {got}, the run {want}")
            print(f"  ok: {name}: d_ff* {want:.1f}")


def scenario_sim_crossing(env: Env) -> None:
    """M = 4 on 8 simulated ranks, a d_ff sweep per platform: at every point the step within 5%
    of the critical path of the schedule run; the exposed all-to-all (step - X) at most
    min(A, X)/M (+5%) at every d_ff >= 1.5 d_ff* and above A - X at every d_ff <= d_ff*/1.5,
    d_ff* = (F/W)(N_e-1)/N_e of the run's own F and W; both sides of d_ff* in the sweep."""
    if not (env.bin_dir / "moe").exists():
        print(f"SKIP: {env.bin_dir / 'moe'} is not built (make sim builds the SMPI variant)")
        raise SystemExit(SKIP)
    for link, flops in CROSSING_PLATFORMS:
        out = env.workdir / f"crossing_{link}.csv"
        cmd = [*module_command("studies.moe_overlap_crossing"), "--link", link, "--sim-flops", flops,
               "--tokens", "4096", "--d-ff", CROSSING_D_FF, "--build", str(env.bin_dir.parent), "--csv", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=env.workdir)
        print(proc.stdout[-3000:])
        expect(proc.returncode == 0, "moe_overlap_crossing failed", proc)
        with out.open() as f:
            points = [Point(int(r["d_ff"]), *(float(r[k]) for k in ("a2a_s", "compute_s", "step_s", "pred_step_s",
                                                                    "d_ff_star", "step_m1_s")),
                            int(r["microbatches"])) for r in csv.DictReader(f)]
        star = points[0].d_ff_star
        # Each point's own calibration (the same links and F: within a percent) gives its d_ff*.
        expect(all(math.isclose(p.d_ff_star, star, rel_tol=0.01) for p in points),
               f"{link}: d_ff* {[round(p.d_ff_star) for p in points]} differs between points")
        expect(min(p.d_ff for p in points) <= star / 1.5 and max(p.d_ff for p in points) >= 1.5 * star,
               f"{link}: the sweep does not cross d_ff* = {star:.0f}")
        for p in points:
            bad = p.verdicts()
            expect(not bad, f"{link}, d_ff {p.d_ff}: {'; '.join(bad)}")
            expect(p.step_s < p.step_m1_s, f"{link}, d_ff {p.d_ff}: M = 4 no faster than M = 1")
        print(f"  ok: {link}: every point within its bounds, d_ff* = {star:.0f}")


def scenario_bad_input(env: Env) -> None:
    base = ["--tokens", "8", "--hidden", "8", "--ffn-hidden", "8", "--experts", "8"]
    expect_refused(env, "moe", {
        "M = 0": (base + ["--overlap", "microbatch:0"], "--overlap: 'microbatch:0'"),
        "M not a number": (base + ["--overlap", "microbatch:abc"], "--overlap: 'microbatch:abc'"),
        "unknown kind": (base + ["--overlap", "pipeline"], "--overlap: 'pipeline'"),
        "M above T": (base + ["--overlap", "microbatch:16"], "microbatch:16 is more micro-batches than the rank's 8"),
        "M not dividing T": (base + ["--overlap", "none,microbatch:3"], "microbatch:3 does not divide the rank's 8"),
        "a2a mode": (base + ["--mode", "a2a", "--overlap", "microbatch:2"], "--overlap microbatch:2"),
    })


SCENARIOS = {
    "moe_overlap_equal": scenario_equal,
    "moe_overlap_nodes": scenario_nodes,
    "moe_overlap_capacity": scenario_capacity,
    "moe_overlap_crossing_printed": scenario_crossing_printed,
    "moe_overlap_bad_input": scenario_bad_input,
    "sim_moe_overlap_crossing": scenario_sim_crossing,
}


def main() -> None:
    run_cli(SCENARIOS, __doc__)


if __name__ == "__main__":
    main()
