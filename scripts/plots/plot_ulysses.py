"""Figures for ulysses (docs/RESULTS_SCHEMA.md, section ulysses): where each method wins.

- `ulysses_phases_<causal|full>_s<s>.png`: per Ulysses degree u (1 = ring, N_c = Ulysses, between:
  hybrids), the step split into pack, all-to-all in, attention (with the ring part), all-to-all
  out and unpack (phase medians), with each case's bytes per rank written above its bar;
- `ulysses_time_<causal|full>.png`: step time against s, one line per u;
- `ulysses_bytes.png`: bytes sent per rank against s, measured (markers) and METHODS.md
  (dashed), one line per u;
- with `--pass fwd_bwd` cases: `ulysses_phases_<causal|full>_s<s>_fwd_bwd.png` stacks the
  backward's phases (dO's all-to-all, attention backward, dQ/dK/dV back) on the forward's,
  their step times get their own lines, and `ulysses_bytes_bwd.png` shows the backward's bytes
  against the prediction.

`ulysses_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from scripts.results.suite_results import Case

ULYSSES_NEEDS = ("u", "n_c", "s", "causal", "time_median_s", "bytes_sent_per_rank",
                 "pred_bytes_sent_per_rank")
PHASES = ("pack", "a2a_q", "a2a_k", "a2a_v", "attention", "a2a_out", "unpack")
BWD_PHASES = ("bwd_pack", "bwd_a2a_do", "bwd_attention", "bwd_cast", "bwd_a2a_dq", "bwd_a2a_dk",
              "bwd_a2a_dv", "bwd_unpack")

Title = Callable[[str], str]


def _mask(causal: object) -> str:
    return "causal" if int(causal) else "full"


def _pass(c: Case) -> str:
    return str(c.attrs.get("pass", "fwd"))


def _step_bytes(c: Case) -> float:
    """Bytes per rank of the case's whole pass list: a training step adds its backward's."""
    fwd = float(c.attrs["bytes_sent_per_rank"])
    return fwd + float(c.attrs.get("bwd_bytes_sent_per_rank", 0.0) or 0.0) if _pass(c) == "fwd_bwd" else fwd


def _label(c: Case) -> str:
    u, n_c = int(c.attrs["u"]), int(c.attrs["n_c"])
    what = "ring" if u == 1 else "Ulysses" if u == n_c else "hybrid"
    layout = c.attrs.get("layout", "")
    step = ", fwd+bwd" if _pass(c) == "fwd_bwd" else ""
    return f"u={u} ({what}{', ' + str(layout) if u < n_c else ''}), N_c={n_c}{step}"


def phases_figure(members: list[Case], what: str, title: Title) -> plt.Figure:
    members = sorted(members, key=lambda c: (int(c.attrs["n_c"]), int(c.attrs["u"]), str(c.attrs.get("layout"))))
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(members) + 2) + 2, 5), layout="constrained")
    bottom = np.zeros(len(members))
    phases = PHASES + (BWD_PHASES if any(_pass(c) == "fwd_bwd" for c in members) else ())
    colours = plt.get_cmap("tab20").colors  # one colour per phase, forward and backward
    for i, phase in enumerate(phases):
        values = np.array([float(c.attrs.get(f"phase_{phase}_median_s", 0.0) or 0.0) for c in members]) * 1e3
        ax.bar(range(len(members)), values, bottom=bottom, label=phase, color=colours[i % len(colours)])
        bottom += values
    ax.scatter(range(len(members)), [c.attrs["time_median_s"] * 1e3 for c in members], color="black",
               zorder=3, label="step (max over ranks)")
    for i, c in enumerate(members):
        ax.annotate(f"{_step_bytes(c) / 1e6:.2f} MB", (i, max(bottom[i], c.attrs['time_median_s'] * 1e3)),
                    textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    ax.set_xticks(range(len(members)), [_label(c) for c in members], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("time (ms): phase medians")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
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
    handles, _ = ax.get_legend_handles_labels()
    if pred:  # each line's prediction: dashed, in its colour
        handles.append(Line2D([], [], color="grey", linestyle="--", label="predicted (dashed)"))
    ax.legend(handles=handles, fontsize=8)
    ax.set_title(title(f"ulysses: {what}"))
    return fig


def ulysses_figures(cases: list[Case], title: Title) -> dict[str, plt.Figure]:
    figures: dict[str, plt.Figure] = {}
    groups: dict[tuple, list[Case]] = {}
    for c in cases:
        groups.setdefault((_mask(c.attrs["causal"]), int(c.attrs["s"]), _pass(c)), []).append(c)
    for (mask, s, pass_), members in sorted(groups.items()):
        suffix = "" if pass_ == "fwd" else "_fwd_bwd"
        what = f"{mask}, s={s}" + ("" if pass_ == "fwd" else ", forward + backward")
        figures[f"ulysses_phases_{mask}_s{s}{suffix}.png"] = phases_figure(members, what, title)
    for mask in sorted({_mask(c.attrs["causal"]) for c in cases}):
        members = [c for c in cases if _mask(c.attrs["causal"]) == mask]
        figures[f"ulysses_time_{mask}.png"] = lines_figure(
            members, "time_median_s", None, "median step time (s)", f"step time against s ({mask})", title)
    forward = [c for c in cases if _pass(c) == "fwd"] or cases
    figures["ulysses_bytes.png"] = lines_figure(
        forward, "bytes_sent_per_rank", "pred_bytes_sent_per_rank", "bytes sent per rank per layer",
        "bytes per rank against s (dashed: METHODS.md)", title)
    backward = [c for c in cases if _pass(c) == "fwd_bwd" and "bwd_bytes_sent_per_rank" in c.attrs]
    if backward:
        figures["ulysses_bytes_bwd.png"] = lines_figure(
            backward, "bwd_bytes_sent_per_rank", "pred_bwd_bytes_sent_per_rank",
            "backward bytes sent per rank per layer", "backward bytes per rank against s (dashed: prediction)",
            title)
    return figures
