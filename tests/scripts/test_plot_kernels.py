"""plot.py / plot_kernels.py on synthetic kernel_bench files written like
bench/kernel_bench/kernel_results.cpp: the rate bars (with the device peak where known) and the
causal attention rate against s."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

from scripts.plots.plot import make_plots  # noqa: E402
from scripts.plots.plot_kernels import kernel_figures  # noqa: E402
from scripts.results.suite_results import read_results  # noqa: E402
from synthetic_results import rank_times  # noqa: E402


def kernel_case(op: str, shape: str, rate: float, kernel: str | None = None,
                peak: float | None = None, rep: int = 0) -> dict[str, Any]:
    params = {"op": op, "backend": "cuda", "dtype": "bf16", "shape": shape}
    if kernel:
        params["kernel_choice"] = kernel
    attrs: dict[str, Any] = {"flops_per_s": rate, "FLOP_per_iter": 1e12, "check_passed": -1}
    if kernel:
        attrs["attn_kernel"] = kernel
    if peak:
        attrs.update(peak_flops=peak, frac_of_peak=rate / peak, impossible=int(rate > peak))
    name = "_".join([f"{op}_cuda_bf16", *([kernel] if kernel else []), shape])
    return {"name": name + (f"_rep{rep}" if rep else ""), "params": params, "attrs": attrs,
            "time_s": rank_times(1e12 / rate, world_size=1)}


def sweep(kernel: str, top: float) -> list[dict[str, Any]]:
    return [kernel_case("attention", f"s{s}_a16_kv16_d128_causal", top * s / (s + 2048), kernel,
                        peak=989e12) for s in (1024, 2048, 4096, 8192)]


def test_rates_and_sweep(results_writer, tmp_path):
    cases = [kernel_case("gemm", "n4096", 650e12, peak=989e12),
             kernel_case("gemm", "n4096", 640e12, peak=989e12, rep=1),
             *sweep("cudnn", 600e12), *sweep("suite-flash", 250e12)]
    path = results_writer("kb.h5", "kernel_bench", cases, world_size=1,
                          file_attrs={"backend": "cuda", "world_size": 1})
    figures = kernel_figures(list(read_results(path).cases.values()), lambda t: t)
    assert set(figures) == {"kernel_bench_rates.png", "kernel_bench_attention_vs_s.png"}
    bars = figures["kernel_bench_rates.png"].axes[0]
    # One bar per case, repetitions left out; rates in TFLOP/s; the peak drawn beside them.
    heights = sorted(round(p.get_height()) for p in bars.patches)
    assert len(heights) == 9 and 650 in heights and 640 not in heights
    assert bars.get_ylabel() == "TFLOP/s" and bars.collections  # the peak markers
    lines = figures["kernel_bench_attention_vs_s.png"].axes[0].get_lines()
    assert sorted(l.get_label().split()[0] for l in lines) == ["cudnn", "suite-flash"]
    cudnn = next(l for l in lines if l.get_label().startswith("cudnn"))
    assert list(cudnn.get_xdata()) == [1024, 2048, 4096, 8192]
    assert np.allclose(cudnn.get_ydata()[-1], 600 * 8192 / (8192 + 2048))
    written = {p.name for p in make_plots(path, tmp_path / "plots")}
    assert written == {"kernel_bench_rates.png", "kernel_bench_attention_vs_s.png"}


def test_cpu_rates_in_gflops_without_peak_or_sweep(results_writer):
    cases = [kernel_case("gemm", "n256", 30e9), kernel_case("attention", "s512_a8_kv8_d64_full", 14e9)]
    path = results_writer("kb.h5", "kernel_bench", cases, world_size=1)
    figures = kernel_figures(list(read_results(path).cases.values()), lambda t: t)
    assert set(figures) == {"kernel_bench_rates.png"}
    ax = figures["kernel_bench_rates.png"].axes[0]
    assert ax.get_ylabel() == "GFLOP/s" and not ax.collections and ax.get_yscale() == "linear"
