"""Figures for pipeline (docs/BENCHMARKS.md, section pipeline): one Gantt chart per case,
`pipeline_gantt_<case>.png`: ranks over the step's time, each op a bar (forward, input gradient,
weight gradient, or the whole backward) labelled with its micro-batch, the idle time shaded (the
bubble), and the measured bubble beside the critical path's and the closed form's in the title.

`pipeline_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

import re
from typing import Callable

import matplotlib.pyplot as plt

from scripts.plots.timeline import idle_gaps, spans
from scripts.results.suite_results import Case

PIPELINE_NEEDS = ("bubble_s", "pred_bubble_s")
COLORS = {"F": "tab:blue", "B": "tab:orange", "W": "tab:green", "BW": "tab:red"}
LABELS = {"F": "F forward", "B": "B input gradient", "W": "W weight gradients", "BW": "BW whole backward"}
MAX_LABELLED_OPS = 400  # beyond this the micro-batch numbers would not fit their bars

Title = Callable[[str], str]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def gantt_figure(c: Case, title: Title) -> plt.Figure | None:
    ops = spans(c)
    if not ops:
        return None
    ranks = sorted({s.rank for s in ops})
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.6 * len(ranks)), layout="constrained")
    scale = 1e3  # milliseconds
    for rank, gaps in idle_gaps(ops).items():
        for a, b in gaps:
            ax.broken_barh([(a * scale, (b - a) * scale)], (rank - 0.4, 0.8), facecolors="0.85",
                           hatch="//", edgecolor="0.6", linewidth=0)
    for s in ops:
        ax.broken_barh([(s.start_s * scale, (s.end_s - s.start_s) * scale)], (s.rank - 0.4, 0.8),
                       facecolors=COLORS.get(s.kind, "tab:gray"), edgecolor="white", linewidth=0.5)
        if len(ops) <= MAX_LABELLED_OPS:
            ax.text((s.start_s + s.end_s) / 2 * scale, s.rank, str(s.microbatch), ha="center", va="center",
                    fontsize=6, color="white")
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("time in the step (ms)")
    kinds = [k for k in COLORS if any(s.kind == k for s in ops)]
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[k]) for k in kinds]
    handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="0.85", hatch="//", edgecolor="0.6"))
    ax.legend(handles, [LABELS[k] for k in kinds] + ["idle (bubble)"], loc="upper center",
              bbox_to_anchor=(0.5, -0.25), ncol=len(handles), fontsize=8)
    a = c.attrs
    ax.set_title(title(f"pipeline {c.name}: bubble {1e3 * a['bubble_s']:.2f} ms measured, "
                       f"{1e3 * a['pred_bubble_s']:.2f} ms critical path, "
                       f"{1e3 * a.get('pred_closed_bubble_s', float('nan')):.2f} ms closed form"))
    return fig


def pipeline_figures(cases: list[Case], title: Title) -> dict[str, plt.Figure]:
    figures: dict[str, plt.Figure] = {}
    for c in cases:
        fig = gantt_figure(c, title)
        if fig is not None:
            figures[f"pipeline_gantt_{_safe(c.name)}.png"] = fig
    return figures
