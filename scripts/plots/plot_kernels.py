"""Figures for kernel_bench (the kernels' achieved FLOP/s; docs/RESULTS_SCHEMA.md, kernel_bench).

- `kernel_bench_rates.png`: achieved FLOP/s of every case (first repetition), one bar each,
  grouped by op, backend and dtype, with the device's peak as a line where it is known;
- `kernel_bench_attention_vs_s.png`: causal attention FLOP/s against the sequence length s,
  one line per kernel and head dimension (the F that ring attention's c >= F/W divides by W),
  when a case family was run at several s.

`kernel_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Callable

import matplotlib.pyplot as plt

from scripts.results.suite_results import Case, natural_key

KERNEL_NEEDS = ("op", "shape")
SHAPE = re.compile(r"s(\d+)_a(\d+)_kv(\d+)_d(\d+)_(causal|full)")

Title = Callable[[str], str]


def _num(case: Case, name: str) -> float:
    try:
        return float(case.attrs.get(name))
    except (TypeError, ValueError):
        return math.nan


def _label(case: Case) -> str:
    p = case.params
    kernel = case.attrs.get("attn_kernel") or p.get("kernel_choice")
    parts = [str(p.get("op")), str(p.get("backend")), str(p.get("dtype"))]
    if kernel:
        parts.append(str(kernel))
    return "/".join(parts) + " " + str(p.get("shape"))


def _rates_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    firsts = [c for c in cases if not re.search(r"_rep\d+$", c.name)]
    firsts = [c for c in firsts if math.isfinite(_num(c, "flops_per_s"))]
    if not firsts:
        return None
    firsts.sort(key=lambda c: natural_key(_label(c)))
    rates = [_num(c, "flops_per_s") for c in firsts]
    scale, unit = (1e12, "TFLOP/s") if max(rates) >= 1e12 else (1e9, "GFLOP/s")
    fig, ax = plt.subplots(figsize=(max(8.0, 0.35 * len(firsts) + 3), 5.5))
    xs = range(len(firsts))
    ax.bar(xs, [r / scale for r in rates], color="tab:blue", label="achieved")
    peaks = [_num(c, "peak_flops") / scale for c in firsts]
    if any(math.isfinite(p) and p > 0 for p in peaks):
        ax.scatter(xs, peaks, marker="_", s=300, color="tab:red", label="device peak")
    ax.set_xticks(list(xs), [_label(c) for c in firsts], rotation=70, ha="right", fontsize=7)
    ax.set_ylabel(unit)
    if max(rates) > 100 * min(r for r in rates if r > 0):
        ax.set_yscale("log")  # CPU and GPU cases, or fp32 beside bf16 tensor cores
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    ax.set_title(title("kernel_bench: achieved FLOP/s per case"))
    fig.tight_layout()
    return fig


def _sweep_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for c in cases:
        m = SHAPE.fullmatch(str(c.params.get("shape", "")))
        if c.params.get("op") != "attention" or not m or m.group(5) != "causal":
            continue
        if re.search(r"_rep\d+$", c.name):
            continue
        s, heads, kv, d = (int(m.group(i)) for i in range(1, 5))
        kernel = c.attrs.get("attn_kernel") or c.params.get("kernel_choice") or c.params.get("backend")
        key = f"{kernel} {c.params.get('dtype')} d={d} a={heads} kv={kv}"
        lines[key].append((s, _num(c, "flops_per_s") / 1e12))  # TFLOP/s: a GPU sweep
    lines = {k: sorted(v) for k, v in lines.items() if len({s for s, _ in v}) >= 3}
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(9, 5))
    for key in sorted(lines, key=natural_key):
        ax.plot(*zip(*lines[key]), marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length s (queries = keys)")
    ax.set_ylabel("TFLOP/s (causal, visible pairs counted)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title("kernel_bench: causal attention rate against s"))
    fig.tight_layout()
    return fig


def kernel_figures(cases: list[Case], title: Title) -> dict[str, plt.Figure]:
    figures = {}
    for name, fig in (("kernel_bench_rates.png", _rates_figure(cases, title)),
                      ("kernel_bench_attention_vs_s.png", _sweep_figure(cases, title))):
        if fig is not None:
            figures[name] = fig
    return figures
