"""The CPU backend's GEMM and attention rates beside numpy's single-thread SGEMM, on the OpenBLAS
core the library picks itself and on the one the suite runs it on, in one run.

    suite blas-core-rates [--bin build/bin] [--rounds 3]

Each round runs numpy's SGEMM (n = 1024, one thread, its own OpenBLAS), then kernel_bench's
fp32 cases gemm_cpu n = 1024 and attention_cpu twice: with SUITE_KEEP_BLAS_CORE=1 (the core
the linked OpenBLAS picks) and without (the suite's choice for this CPU's flags). Each rate is
in FLOP per second of the process's CPU time (on an idle host its wall-clock rate, which
kernel_bench records; on a shared one, what a neighbour's time slices do not change), the best
of the rounds; the table gives each against numpy's. The target on the CPU backend: GEMM at
least 0.9x numpy's, attention at least 0.5x.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py

GEMM_N = 1024
CASES = f"^gemm_cpu/fp32/n{GEMM_N}/|^attention_cpu/fp32/"
NUMPY_SGEMM = f"""
import time, numpy as np
n = {GEMM_N}
a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
a @ b
best = 0.0
for _ in range(3):
    t0, k = time.process_time(), 0
    while time.process_time() - t0 < 0.3:
        a @ b
        k += 1
    best = max(best, 2 * n**3 * k / (time.process_time() - t0))
blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
print(best, "numpy", np.__version__, blas.get("name", "?"), blas.get("version", "?"))
"""
TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
SETUPS = {"library's pick": {"SUITE_KEEP_BLAS_CORE": "1"}, "suite's choice": {"SUITE_KEEP_BLAS_CORE": "0"}}


def numpy_sgemm() -> tuple[float, str]:
    """numpy's single-thread SGEMM rate (FLOP/s) and what it runs on."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", NUMPY_SGEMM], env=env, capture_output=True, text=True,
                         check=True).stdout.split(maxsplit=1)
    return float(out[0]), out[1].strip()


def kernel_bench(bin_dir: Path, env: dict[str, str], out: Path) -> tuple[str, dict[str, float]]:
    """The OpenBLAS core kernel_bench ran on (its results file) and the rate of each case in FLOP
    per second of the process's CPU time (Google Benchmark's JSON)."""
    run_env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"} | env
    report = subprocess.run([str(bin_dir / "kernel_bench"), f"--out={out}", f"--benchmark_filter={CASES}",
                             "--benchmark_min_time=0.3", "--benchmark_format=json"], env=run_env, check=True,
                            capture_output=True, text=True).stdout
    rates = {}
    for b in json.loads(report)["benchmarks"]:
        name = b["run_name"].removesuffix("/manual_time").replace("/", "_")
        rates[name] = b["FLOP_per_iter"] / (b["cpu_time"] * TIME_UNIT_S[b["time_unit"]])
    with h5py.File(out) as f:
        return str(f.attrs["blas_core"]), rates


def measure(bin_dir: Path, rounds: int) -> tuple[tuple[float, str], dict[str, tuple[str, dict[str, float]]]]:
    """Best of `rounds` interleaved rounds: numpy's SGEMM, and kernel_bench's cases per setup."""
    numpy_best, numpy_lib = 0.0, ""
    runs: dict[str, tuple[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            rate, numpy_lib = numpy_sgemm()
            numpy_best = max(numpy_best, rate)
            for setup, env in SETUPS.items():
                core, rates = kernel_bench(bin_dir, env, Path(tmp) / f"{r}_{len(runs)}.h5")
                best = runs.get(setup, (core, {}))[1]
                runs[setup] = (core, {k: max(v, best.get(k, 0.0)) for k, v in rates.items()})
    return (numpy_best, numpy_lib), runs


def table(numpy_rate: float, numpy_lib: str, runs: dict[str, tuple[str, dict[str, float]]]) -> str:
    """numpy's rate, then one row per setup and case: the core, the rate, the rate over numpy's."""
    lines = [f"numpy single-thread SGEMM n={GEMM_N}: {numpy_rate / 1e9:.1f} GFLOP/s ({numpy_lib})", "",
             f"{'kernel_bench case':<44} {'OpenBLAS core':<26} {'GFLOP/s':>8} {'x numpy':>8}"]
    for setup, (core, rates) in runs.items():
        for name in sorted(rates, key=lambda n: (not n.startswith("gemm"), n)):
            lines.append(f"{name:<44} {core + ' (' + setup + ')':<26} {rates[name] / 1e9:>8.1f} "
                         f"{rates[name] / numpy_rate:>8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", type=Path, default=Path("build/bin"), help="the build's executables")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each rate is the best of them")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        print(f"error: --rounds {args.rounds}: needs at least 1", file=sys.stderr)
        return 2
    (numpy_rate, numpy_lib), runs = measure(args.bin, args.rounds)
    print(table(numpy_rate, numpy_lib, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
