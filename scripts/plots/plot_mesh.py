"""Figures for mesh (docs/RESULTS_SCHEMA.md, section mesh): where the step's time goes per axis
and what each rank holds.

- `mesh_axes_<case>.png`: per rank, the step split into its axes' phases (median over the
  iterations): TP's collectives (the layer's blocking all-gathers and reduce-scatters and the
  gradients' TP sums), CP's attention (with the ring's transfers, or Ulysses' all-to-alls), EP's
  dispatch and combine, the gradient sums over DP x CP and the expert copies, and the rest
  (GEMMs, LayerNorms, residuals);
- `mesh_memory.png`: per case, the layer's activation ledger measured beside METHODS.md 6's
  formula, with the weights and the CP method's own buffers, per rank (largest rank).

`mesh_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

import re
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np

from scripts.results.suite_results import Case

MESH_NEEDS = ("tp", "cp", "dp", "time_median_s", "ledger_bytes", "pred_ledger_bytes")
AXIS_PHASES = {
    "TP collectives": ("fwd_comm", "bwd_comm", "grad_sum_tp"),
    "CP attention": ("cp_attention", "bwd_cp_attention", "pack", "a2a_q", "a2a_k", "a2a_v", "attention",
                     "a2a_out", "unpack", "bwd_pack", "bwd_a2a_do", "bwd_attention", "bwd_cast",
                     "bwd_a2a_dq", "bwd_a2a_dk", "bwd_a2a_dv", "bwd_unpack"),
    "EP dispatch + combine": ("dispatch", "combine", "bwd_combine", "bwd_dispatch"),
    "gradient sums (DP x CP, experts)": ("grad_sum_dense", "grad_sum_expert"),
}

Title = Callable[[str], str]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def _per_rank(c: Case, phase: str) -> np.ndarray | None:
    data = c.datasets.get(f"phase_{phase}_s")
    if data is None:
        return None
    return np.median(np.asarray(data, dtype=float), axis=0)


def axes_figure(c: Case, title: Title) -> plt.Figure | None:
    times = c.datasets.get("time_s")
    if times is None:
        return None
    step = np.median(np.asarray(times, dtype=float), axis=0)
    ranks = np.arange(step.size)
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * step.size + 3), 5), layout="constrained")
    bottom = np.zeros(step.size)
    for label, phases in AXIS_PHASES.items():
        parts = [v for v in (_per_rank(c, p) for p in phases) if v is not None]
        if not parts:
            continue
        value = np.sum(parts, axis=0)
        ax.bar(ranks, value, bottom=bottom, label=label)
        bottom += value
    ax.bar(ranks, np.maximum(step - bottom, 0), bottom=bottom, label="the rest (GEMMs, token-wise)",
           color="lightgrey")
    ax.set_xticks(ranks)
    ax.set_xlabel("rank")
    ax.set_ylabel("the rank's own step time, median (s)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    a = c.attrs
    ax.set_title(title(f"mesh tp{a['tp']} x cp{a['cp']} x dp{a['dp']} ({a.get('order')}, "
                       f"{a.get('cp_method')}, {a.get('pass')}): time per axis and rank"), fontsize=9)
    return fig


def memory_figure(cases: list[Case], title: Title) -> plt.Figure:
    pos = np.arange(len(cases))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(cases) + 3), 5), layout="constrained")
    ledger = [float(c.attrs["ledger_bytes"]) / 2**20 for c in cases]
    pred = [float(c.attrs["pred_ledger_bytes"]) / 2**20 for c in cases]
    weights = [float(c.attrs.get("weight_bytes", 0)) / 2**20 for c in cases]
    method = [float(c.attrs.get("cp_method_bytes", 0)) / 2**20 for c in cases]
    ax.bar(pos - 0.25, ledger, width=0.25, label="activation ledger (measured)")
    ax.bar(pos, weights, width=0.25, label="weights")
    ax.bar(pos + 0.25, method, width=0.25, label="CP method's buffers")
    ax.scatter(pos - 0.25, pred, marker="_", s=400, color="black", zorder=3, label="ledger, METHODS.md 6")
    ax.set_xticks(pos, [f"tp{c.attrs['tp']} cp{c.attrs['cp']} dp{c.attrs['dp']}\n{c.attrs.get('pass')}"
                        for c in cases], fontsize=8)
    ax.set_ylabel("MiB per rank")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(title("mesh: memory per rank beside the formula"), fontsize=9)
    return fig


def mesh_figures(cases: list[Case], title: Title) -> dict[str, plt.Figure]:
    figures: dict[str, plt.Figure] = {}
    for c in cases:
        fig = axes_figure(c, title)
        if fig is not None:
            figures[f"mesh_axes_{_safe(c.name)}.png"] = fig
    if cases:
        figures["mesh_memory.png"] = memory_figure(cases, title)
    return figures
