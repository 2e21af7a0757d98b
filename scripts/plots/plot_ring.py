"""Figures for ring_attention (docs/RESULTS_SCHEMA.md, section ring_attention).

- `ring_sweep_<variant>_<layout>_<causal|full>.png`: overlapped, compute-only and transfer-only
  step times against the block size c, with the measured overlap bound c* marked: where the
  transfer line crosses under the compute line the ring hides its communication;
- `ring_sweep_<variant>_<layout>_<causal|full>_fwd_bwd.png` (`--pass fwd_bwd` cases): the same
  for the forward and the backward side by side, each with its own bound (c* and c*_bwd);
- `ring_rounds_<variant>_<causal|full>_c<c>[_bwd].png`: per rank and per round, the exact work
  (visible query-key pairs) and the idle time waiting for the round's block, one column per
  layout (contiguous vs zig-zag vs striped): the causal imbalance of the contiguous layout is
  visible even on a CPU. `_bwd`: the backward's rounds, the last being the partial sums' home
  hop.
- `ring_docs_balance_<variant>_<causal|full>_c<c>_<pass>.png` (packed documents, `--docs`): each
  rank's total work over the mean, one bar group per layout, with the efficiency the exact work
  predicts (mean / lockstep) and the one measured against the ideal.

`ring_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

from typing import Callable

import matplotlib.pyplot as plt
import numpy as np

from scripts.studies.ring_crossing import TOL, crossing
from scripts.results.suite_results import Case

RING_NEEDS = ("c", "layout", "variant", "causal", "time_median_s", "time_compute_only_median_s",
              "time_transfer_only_median_s")
LAYOUTS = ("contiguous", "zigzag", "striped")

Title = Callable[[str], str]


def _mask_name(causal: object) -> str:
    return "causal" if int(causal) else "full"


def _groups(cases: list[Case], keys: tuple[str, ...]) -> dict[tuple, list[Case]]:
    out: dict[tuple, list[Case]] = {}
    for c in cases:
        out.setdefault(tuple(c.attrs[k] for k in keys), []).append(c)
    return out


def _pass_of(case: Case) -> str:
    return str(case.attrs.get("pass", "fwd"))


def _sweep_axes(ax: plt.Axes, members: list[Case], prefix: str, star_key: str, star_name: str) -> None:
    """One pass's overlapped, compute-only and transfer-only times against c, its bound marked."""
    c = np.array([m.attrs["c"] for m in members], dtype=float)
    over = "time_median_s" if not prefix and _pass_of(members[0]) == "fwd" else prefix + "time_overlapped_median_s"
    ax.plot(c, [m.attrs.get(over, np.nan) for m in members], "o-", label="overlapped (the method)")
    ax.plot(c, [m.attrs[prefix + "time_compute_only_median_s"] for m in members], "s--", label="compute only")
    ax.plot(c, [m.attrs[prefix + "time_transfer_only_median_s"] for m in members], "^:", label="transfer only")
    stars = [float(m.attrs.get(star_key, np.nan)) for m in members]
    stars = [s for s in stars if np.isfinite(s) and s > 0]
    if stars:
        star = float(np.median(stars))
        ax.axvline(star, color="red", linestyle="--", label=f"{star_name} = {star:.0f} tokens (measured)")
    cross = crossing(c, [m.attrs.get(over, np.nan) for m in members],
                     [m.attrs[prefix + "time_compute_only_median_s"] for m in members])
    if cross is not None:  # scripts/studies/ring_crossing.py
        ax.axvline(cross, color="green", linestyle=":",
                   label=f"overlapped within {TOL:.0%} of compute: c = {cross:.0f}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("block size c (tokens per rank)")
    ax.set_ylabel("median time (s), max over ranks")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def sweep_figure(members: list[Case], label: str, title: Title) -> plt.Figure:
    members = sorted(members, key=lambda c: c.attrs["c"])
    if _pass_of(members[0]) == "fwd":
        fig, ax = plt.subplots(figsize=(8, 5))
        _sweep_axes(ax, members, "", "c_star_tokens", "c*")
        ax.set_title(title(f"ring_attention {label}: overlap against the block size"))
        return fig
    fig, (fwd, bwd) = plt.subplots(1, 2, figsize=(14, 5), sharey=True)
    _sweep_axes(fwd, members, "", "c_star_tokens", "c*")
    fwd.set_title("forward: c* = F/(gW) (x2 causal balanced) x e/2", fontsize=9)
    _sweep_axes(bwd, members, "bwd_", "bwd_c_star_tokens", "c*_bwd")
    bwd.set_title("backward: c*_bwd = (e + e_g) F_b/(5gW) (x2 causal balanced)", fontsize=9)
    fig.suptitle(title(f"ring_attention {label}, training step: forward and backward against c"))
    return fig


def rounds_figure(by_layout: dict[str, Case], label: str, title: Title, prefix: str = "") -> plt.Figure | None:
    layouts = [l for l in LAYOUTS if l in by_layout] + sorted(set(by_layout) - set(LAYOUTS))
    usable = [l for l in layouts if prefix + "round_work_pairs" in by_layout[l].datasets
              and prefix + "round_wait_s" in by_layout[l].datasets]
    if not usable:
        return None
    fig, axes = plt.subplots(2, len(usable), figsize=(4.5 * len(usable) + 1, 7), squeeze=False)
    work = {l: np.atleast_2d(np.asarray(by_layout[l].datasets[prefix + "round_work_pairs"], dtype=float))
            for l in usable}
    idle = {l: np.atleast_2d(np.asarray(by_layout[l].datasets[prefix + "round_wait_s"], dtype=float)) * 1e6
            for l in usable}
    # One colour scale per row, so the layouts compare at a glance.
    top = {0: max(float(w.max()) for w in work.values()), 1: max(float(i.max()) for i in idle.values())}
    for col, layout in enumerate(usable):
        for row, (data, what, cmap) in enumerate(((work[layout], "visible (q, k) pairs", "viridis"),
                                                   (idle[layout], "idle waiting for the block (us)", "magma"))):
            ax = axes[row][col]
            im = ax.imshow(data, aspect="auto", cmap=cmap, origin="upper", vmin=0, vmax=top[row] or 1)
            ax.set_xticks(range(data.shape[1]))
            ax.set_yticks(range(data.shape[0]))
            ax.set_xlabel("rank")
            ax.set_ylabel("round")
            ax.set_title(f"{layout}: {what}", fontsize=9)
            fig.colorbar(im, ax=ax)
    what = "backward (last round: the partial sums' home hop)" if prefix else "forward"
    fig.suptitle(title(f"ring_attention {label}: per-rank, per-round work and idle time, {what}"))
    return fig


def docs_balance_figure(by_layout: dict[str, Case], label: str, title: Title) -> plt.Figure | None:
    """Packed documents: each rank's total work over the mean, one bar group per layout, with the
    efficiency the work predicts (mean / lockstep) beside the one measured against the ideal."""
    usable = [l for l in by_layout if "round_work_pairs" in by_layout[l].datasets]
    if not usable:
        return None
    fig, ax = plt.subplots(figsize=(2.2 * len(usable) + 4, 4.5))
    width = 0.8 / len(usable)
    for i, layout in enumerate(usable):
        a = by_layout[layout].attrs
        total = np.atleast_2d(np.asarray(by_layout[layout].datasets["round_work_pairs"], dtype=float)).sum(axis=0)
        x = np.arange(total.size) + (i - (len(usable) - 1) / 2) * width
        pad = float(a.get("docs_padding_fraction", 0.0))
        # why the measured figure is what it is: balance x pair rate x exchange (they multiply to it)
        why = (f" = {float(a['eff_balance']):.2f} x {float(a['eff_pair_rate']):.2f} x {float(a['eff_exchange']):.2f}"
               if all(k in a for k in ("eff_balance", "eff_pair_rate", "eff_exchange")) else "")
        ax.bar(x, total / total.mean(), width,
               label=f"{layout}: predicted {float(a.get('pred_efficiency_lockstep', np.nan)):.2f}, measured "
                     f"{float(a.get('efficiency_vs_ideal_fwd', np.nan)):.2f}{why}"
                     + (f", padding {100 * pad:.1f}%" if pad else ""))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(total.size))
    ax.set_xlabel("rank")
    ax.set_ylabel("total work / mean (visible pairs)")
    ax.legend(fontsize=8, title="layout: efficiency (mean / lockstep), vs ideal = balance x pair rate x exchange",
              title_fontsize=8)
    docs = next(iter(by_layout.values())).attrs.get("docs", "")
    ax.set_title(title(f"ring_attention {label}, documents {docs}: per-rank work by layout"))
    return fig


def ring_figures(cases: list[Case], title: Title) -> dict[str, plt.Figure]:
    figures: dict[str, plt.Figure] = {}
    keys = ("pass", "variant", "layout", "causal")
    for c in cases:
        c.attrs.setdefault("pass", "fwd")  # files from before --pass
    for (pass_, variant, layout, causal), members in sorted(_groups(cases, keys).items()):
        label = f"{variant}, {layout}, {_mask_name(causal)}"
        suffix = "" if pass_ == "fwd" else "_fwd_bwd"
        figures[f"ring_sweep_{variant}_{layout}_{_mask_name(causal)}{suffix}.png"] = sweep_figure(members, label, title)
    for (pass_, variant, causal, c), members in sorted(_groups(cases, ("pass", "variant", "causal", "c")).items()):
        if variant != "ring":
            continue
        by_layout = {str(m.attrs["layout"]): m for m in members}
        if any("docs" in m.attrs for m in members):
            fig = docs_balance_figure(by_layout, f"{variant}, {_mask_name(causal)}, c={c}", title)
            if fig is not None:
                figures[f"ring_docs_balance_{variant}_{_mask_name(causal)}_c{c}_{pass_}.png"] = fig
        for prefix in ("",) if pass_ == "fwd" else ("", "bwd_"):
            fig = rounds_figure(by_layout, f"{variant}, {_mask_name(causal)}, c={c}", title, prefix)
            if fig is not None:
                name = f"ring_rounds_{variant}_{_mask_name(causal)}_c{c}"
                name += "" if pass_ == "fwd" else ("_fwd_bwd" if not prefix else "_bwd")
                figures[name + ".png"] = fig
    return figures
