#!/usr/bin/env python3
"""Integration scenarios for --attn-kernel (sp_tp layer mode, kernel_bench) on the CPU backend:
the kernel and library are recorded per case, and choices that cannot work here are refused
with exit 2 and no results file."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from run_scenario import Env, check_fingerprint, expect, proc_cpuinfo_flags
from run_scenario import run_cli

LAYER = ["--mode", "layer", "--seq", "32", "--hidden", "128", "--heads", "2", "--iters", "2"]


def scenario_layer_attn_kernel(env: Env) -> None:
    out = env.workdir / "layer.h5"
    proc = env.mpirun(2, "sp_tp", *LAYER, "--attention", "fused,unfused", "--attn-kernel", "suite",
                      "--out", str(out))
    expect(proc.returncode == 0, "layer run failed", proc)
    expect("cpu-tiled" in proc.stdout, "the layer table does not name the kernel", proc)
    with h5py.File(out) as f:
        for name, g in f["sp_tp"].items():
            expect(g.attrs["attn_choice"] == "suite", f"{name}: attn_choice")
            fused = g.attrs["attention"] == "fused"
            expect(g.attrs["attn_kernel"] == ("cpu-tiled" if fused else "unfused"), f"{name}: attn_kernel")
            # The CPU kernel's GEMMs are OpenBLAS's; the unfused path is the suite's composition.
            lib = str(g.attrs["attn_library"])
            expect(lib.startswith("OpenBLAS ") if fused else lib == "suite", f"{name}: attn_library {lib}")
            expect(g.attrs["attn_fallbacks"] == 0, f"{name}: attn_fallbacks")
    for bad, why in ((["--attn-kernel", "cudnn"], "needs --backend cuda"), (["--attn-kernel", "fast"], "fast")):
        out = env.workdir / "bad.h5"
        proc = env.mpirun(2, "sp_tp", *LAYER, *bad, "--out", str(out))
        expect(proc.returncode == 2, f"{bad}: exit {proc.returncode}, expected 2", proc)
        expect(why in proc.stdout + proc.stderr, f"{bad}: message does not say '{why}'", proc)
        expect(not out.exists() and not Path(str(out) + ".partial").exists(), f"{bad}: left a results file")


def scenario_kernel_bench_attn_kernel(env: Env) -> None:
    exe = str(env.bin_dir / "kernel_bench")
    proc = subprocess.run([exe, "--attn-kernel=bogus"], capture_output=True, text=True, timeout=60)
    expect(proc.returncode == 2 and "unknown kernel 'bogus'" in proc.stderr, "bogus kernel not refused", proc)
    proc = subprocess.run([exe, "--attn-kernel=suite,auto", "--benchmark_filter=attention_cpu/fp32/s512_a8_kv8_d64_full",
                           "--benchmark_min_time=0.01", f"--out={env.workdir / 'kb_list.h5'}"],
                          capture_output=True, text=True, timeout=120)
    expect(proc.returncode == 0 and "s512_a8_kv8_d64_full" in proc.stdout, "kernel_bench with a kernel list", proc)
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    expect("--attn-kernel=LIST" in proc.stdout, "--help does not explain --attn-kernel", proc)


def scenario_kernel_bench_results(env: Env) -> None:
    """kernel_bench writes the results contract: one case per run, its iteration times, the
    rate they give, the peak when one is known; bad input leaves no file."""
    exe = str(env.bin_dir / "kernel_bench")
    out = env.workdir / "kb.h5"
    proc = subprocess.run([exe, f"--out={out}", "--peak-gflops=1000", "--benchmark_min_time=0.01",
                           "--benchmark_filter=gemm_cpu/fp32/n256|attention_cpu/fp32/s512_a8_kv8_d64_causal",
                           "--benchmark_repetitions=2"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OPENBLAS_VERBOSE": "2"})
    expect(proc.returncode == 0 and f"results: {out} (4 cases)" in proc.stdout, "kernel_bench --out", proc)
    with h5py.File(out) as f:
        check_fingerprint(f, openblas_log=proc.stderr)
        expect(f.attrs["complete"] == 1 and f.attrs["bench"] == "kernel_bench", "file attributes")
        expect((f.attrs["world_size"], f.attrs["backend"]) == (1, "cpu"), "one CPU process")
        names = sorted(f["kernel_bench"])
        expect(names == ["attention_cpu_fp32_s512_a8_kv8_d64_causal", "attention_cpu_fp32_s512_a8_kv8_d64_causal_rep1",
                         "gemm_cpu_fp32_n256", "gemm_cpu_fp32_n256_rep1"], f"cases {names}")
        for name, g in f["kernel_bench"].items():
            a, t = g.attrs, g["time_s"][()]
            expect(t.shape == (a["iterations"], 1) and t.shape[0] > 0, f"{name}: time_s {t.shape}")
            expect(np.isclose(a["time_median_s"], np.median(t)), f"{name}: median is not of time_s")
            expect(np.isclose(a["flops_per_s"], a["FLOP_per_iter"] / t.mean(), rtol=1e-6),
                   f"{name}: the rate is not FLOP_per_iter over the mean iteration time")
            expect(a["peak_flops"] == 1e12 and np.isclose(a["frac_of_peak"], a["flops_per_s"] / 1e12),
                   f"{name}: peak")
            expect((a["op"], a["backend"], a["dtype"]) == (name.split("_")[0], "cpu", "fp32"), f"{name}: params")
        expect(f["kernel_bench/gemm_cpu_fp32_n256"].attrs["FLOP_per_iter"] == 2 * 256**3, "GEMM FLOPs")
    # Aggregates-only output still records every repetition.
    agg = env.workdir / "kb_agg.h5"
    proc = subprocess.run([exe, f"--out={agg}", "--benchmark_min_time=0.01", "--benchmark_filter=gemm_cpu/fp32/n256",
                           "--benchmark_repetitions=2", "--benchmark_report_aggregates_only=true"],
                          capture_output=True, text=True, timeout=120)
    expect(proc.returncode == 0 and "n256/manual_time_median" in proc.stdout, "aggregates-only run", proc)
    expect("n256/manual_time " not in proc.stdout, "aggregates-only still displays the repetitions", proc)
    with h5py.File(agg) as f:
        expect(sorted(f["kernel_bench"]) == ["gemm_cpu_fp32_n256", "gemm_cpu_fp32_n256_rep1"], "repetitions lost")
    # Listing names runs nothing and records nothing.
    listed = env.workdir / "kb_list_only.h5"
    proc = subprocess.run([exe, f"--out={listed}", "--benchmark_list_tests"], capture_output=True, text=True,
                          timeout=60)
    expect(proc.returncode == 0 and "gemm_cpu/fp32/n256" in proc.stdout and not listed.exists(), "listing", proc)
    bad = env.workdir / "kb_bad.h5"
    for args, why in ((["--benchmark_filter=no_such_case"], "no case ran"),
                      (["--peak-gflops=-5"], "positive number"), (["--peak-gflops=nan"], "positive number"),
                      (["--benchmark_repetitions=-1"], "integer >= 1")):
        proc = subprocess.run([exe, f"--out={bad}", *args], capture_output=True, text=True, timeout=60)
        expect(proc.returncode == 2 and why in proc.stderr, f"{args}: exit {proc.returncode}", proc)
        expect(not bad.exists() and not Path(str(bad) + ".partial").exists(), f"{args}: left a file")


def scenario_kernel_bench_blas_core(env: Env) -> None:
    """The OpenBLAS core a run records is the one OpenBLAS itself reports having started
    (OPENBLAS_VERBOSE=2 prints `Core: NAME` each time the library loads): the suite's choice by
    default, said once when it differs from the library's first pick; the library's own pick with
    SUITE_KEEP_BLAS_CORE=1; the user's with OPENBLAS_CORETYPE."""
    exe = str(env.bin_dir / "kernel_bench")

    def run(name: str, **extra: str) -> tuple[str, list[str], str]:
        out = env.workdir / f"kb_core_{name}.h5"
        run_env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "SUITE_KEEP_BLAS_CORE")}
        proc = subprocess.run([exe, f"--out={out}", "--benchmark_min_time=0.01",
                               "--benchmark_filter=gemm_cpu/fp32/n256"], capture_output=True, text=True,
                              timeout=60, env={**run_env, "OPENBLAS_VERBOSE": "2", **extra})
        expect(proc.returncode == 0, f"{name}: exit {proc.returncode}", proc)
        cores = [line.split(":", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("Core:")]
        with h5py.File(out) as f:
            check_fingerprint(f, openblas_log=proc.stderr)
            return str(f.attrs["blas_core"]), cores, proc.stderr

    core, cores, err = run("suite")
    picked = cores[0]
    expect(len(cores) in (1, 2), f"the library loaded {len(cores)} times: {cores}")
    notes = [line for line in err.splitlines() if "SUITE_KEEP_BLAS_CORE=1 keeps" in line]
    expect(len(notes) == len(cores) - 1, f"cores {cores}, notes {notes}")
    core, cores, err = run("kept", SUITE_KEEP_BLAS_CORE="1")
    expect(cores == [picked] and core == picked and "SUITE_KEEP_BLAS_CORE=1 keeps" not in err,
           f"kept: cores {cores}, blas_core {core}, the library's pick {picked}")
    if "pni" in proc_cpuinfo_flags():  # x86 with SSE3: Prescott runs anywhere
        core, cores, err = run("user", OPENBLAS_CORETYPE="Prescott")
        expect(cores == ["Prescott"] and core == "Prescott" and "SUITE_KEEP_BLAS_CORE=1 keeps" not in err,
               f"OPENBLAS_CORETYPE=Prescott: cores {cores}, blas_core {core}")


SCENARIOS = {
    "layer_attn_kernel": scenario_layer_attn_kernel,
    "kernel_bench_attn_kernel": scenario_kernel_bench_attn_kernel,
    "kernel_bench_results": scenario_kernel_bench_results,
    "kernel_bench_blas_core": scenario_kernel_bench_blas_core,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
