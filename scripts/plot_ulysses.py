"""Figures for ulysses (docs/RESULTS_SCHEMA.md, section ulysses): where each method wins.

- `ulysses_phases_<causal|full>_s<s>.png`: per Ulysses degree u (1 = ring, N_c = Ulysses, between:
  hybrids), the step split into pack, all-to-all in, attention (with the ring part), all-to-all
  out and unpack (phase medians), with each case's bytes per rank written above its bar;
- `ulysses_time_<causal|full>.png`: step time against s, one line per u;
- `ulysses_bytes.png`: bytes sent per rank against s, measured (markers) and METHODS.md
  (dashed), one line per u.

`ulysses_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

from typing import Callable

import matplotlib.pyplot as plt
import numpy as np

from suite_results import Case

ULYSSES_NEEDS = ("u", "n_c", "s", "causal", "time_median_s", "bytes_sent_per_rank",
                 "pred_bytes_sent_per_rank")
PHASES = ("pack", "a2a_q", "a2a_k", "a2a_v", "attention", "a2a_out", "unpack")

Title = Callable[[str], str]


def _mask(causal: object) -> str:
    return "causal" if int(causal) else "full"


def _label(c: Case) -> str:
    u, n_c = int(c.attrs["u"]), int(c.attrs["n_c"])
    what = "ring" if u == 1 else "Ulysses" if u == n_c else "hybrid"
    layout = c.attrs.get("layout", "")
    return f"u={u} ({what}{', ' + str(layout) if u < n_c else ''}), N_c={n_c}"


def phases_figure(members: list[Case], what: str, title: Title) -> plt.Figure:
    members = sorted(members, key=lambda c: (int(c.attrs["n_c"]), int(c.attrs["u"]), str(c.attrs.get("layout"))))
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(members) + 2), 5))
    bottom = np.zeros(len(members))
    for phase in PHASES:
        values = np.array([float(c.attrs.get(f"phase_{phase}_median_s", 0.0) or 0.0) for c in members]) * 1e3
        ax.bar(range(len(members)), values, bottom=bottom, label=phase)
        bottom += values
    ax.scatter(range(len(members)), [c.attrs["time_median_s"] * 1e3 for c in members], color="black",
               zorder=3, label="step (max over ranks)")
    for i, c in enumerate(members):
        ax.annotate(f"{c.attrs['bytes_sent_per_rank'] / 1e6:.2f} MB", (i, max(bottom[i], c.attrs['time_median_s'] * 1e3)),
                    textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    ax.set_xticks(range(len(members)), [_label(c) for c in members], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("time (ms): phase medians")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(title(f"ulysses {what}: where the time goes, bytes per rank above"))
    return fig


def lines_figure(cases: list[Case], y: str, pred: str | None, ylabel: str, what: str,
                 title: Title) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(8, 5))
    by_label: dict[str, list[Case]] = {}
    for c in cases:
        by_label.setdefault(_label(c), []).append(c)
    for label, members in sorted(by_label.items()):
        members.sort(key=lambda c: c.attrs["s"])
        s = [c.attrs["s"] for c in members]
        line, = ax.plot(s, [c.attrs[y] for c in members], "o-", label=label)
        if pred:
            ax.plot(s, [c.attrs[pred] for c in members], "--", color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length s")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title(f"ulysses: {what}"))
    return fig


def ulysses_figures(cases: list[Case], title: Title) -> dict[str, plt.Figure]:
    figures: dict[str, plt.Figure] = {}
    groups: dict[tuple, list[Case]] = {}
    for c in cases:
        groups.setdefault((_mask(c.attrs["causal"]), int(c.attrs["s"])), []).append(c)
    for (mask, s), members in sorted(groups.items()):
        figures[f"ulysses_phases_{mask}_s{s}.png"] = phases_figure(members, f"{mask}, s={s}", title)
    for mask in sorted({_mask(c.attrs["causal"]) for c in cases}):
        members = [c for c in cases if _mask(c.attrs["causal"]) == mask]
        figures[f"ulysses_time_{mask}.png"] = lines_figure(
            members, "time_median_s", None, "median step time (s)", f"step time against s ({mask})", title)
    figures["ulysses_bytes.png"] = lines_figure(
        cases, "bytes_sent_per_rank", "pred_bytes_sent_per_rank", "bytes sent per rank per layer",
        "bytes per rank against s (dashed: METHODS.md)", title)
    return figures
