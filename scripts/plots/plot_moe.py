"""Figures for the moe bench (one MoE layer per case and pass; docs/RESULTS_SCHEMA.md, moe).

A variant is a sweep point; with `--pass fwd,fwd_bwd` it has a forward case and a fwd_bwd case
(forward then backward, parameter `pass`), which route alike: the routing figures draw each
variant once (its forward case when there is one).

- `<bench>_expert_load.png`: copies per expert (first EP group) of each variant, accepted vs
  routed before drops, with the mean and the capacity when there is one;
- `<bench>_load_vs_skew.png`: max/mean expert load and drop rate against the skew knob (zipf
  alpha, hot factor), one line per capacity factor (uniform routing as dashed references);
- `<bench>_load_vs_cf.png`: the same two figures against the capacity factor, one line per
  skew setting (only when several capacity factors were run);
- `<bench>_phases.png`: median time of route, permute, dispatch, expert, combine per case, and
  for a fwd_bwd case its backward phases stacked above (hatched);
- `<bench>_passes.png`: forward and backward time per variant (when fwd_bwd cases exist): the
  forward case's step beside the fwd_bwd case's forward + backward, backward / forward written;
- `<bench>_ratio.png`: all-to-all / expert time, measured vs (F/W)((N_e-1)/N_e)/d_ff, and for
  the backward vs half of it;
- `<bench>_balance.png`: max/mean load per aux-loss-free balancing step (when recorded);
- `<bench>_overlap.png` (cases of `--overlap microbatch:M`): per case the M = 1 step, the
  pipelined step, the schedule's critical path and the compute X, the exposed all-to-all
  (step - X) written above; across several d_ff, the exposed all-to-all against d_ff with
  each d_ff* marked.

`moe_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

import math
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np

from scripts.results.suite_results import Case, natural_key, warn

MOE_NEEDS = ("skew", "capacity_factor")
PHASES = ("route", "permute", "dispatch", "expert", "combine")
BWD_PHASES = ("bwd_combine", "bwd_permute", "bwd_expert", "bwd_dispatch", "bwd_router")
FWD_BWD_SUFFIX = "_fwd_bwd"
KNOB = {"zipf": ("alpha", "zipf exponent alpha"), "hot": ("hot_factor", "hot factor M")}
MAX_LOAD_PANELS = 12

Title = Callable[[str], str]


def _num(case: Case, name: str, default: float = math.nan) -> float:
    value = case.attrs.get(name)
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _cf_label(cf: float) -> str:
    return "dropless" if not cf > 0 else f"CF {cf:g}"


def _skew_label(case: Case) -> str:
    skew = str(case.attrs["skew"])
    if skew in KNOB:
        name, _ = KNOB[skew]
        return f"{skew} {name}={_num(case, name):g}"
    return skew


def _short(case: Case) -> str:
    return f"{_skew_label(case)}, {_cf_label(_num(case, 'capacity_factor'))}"


def is_fwd_bwd(case: Case) -> bool:
    return case.params.get("pass", case.attrs.get("pass")) == "fwd_bwd"


def variant_key(case: Case) -> str:
    """The sweep point: the case name without the fwd_bwd pass's suffix."""
    return case.name.removesuffix(FWD_BWD_SUFFIX) if is_fwd_bwd(case) else case.name


def variants(cases: list[Case]) -> list[Case]:
    """One case per sweep point, in order: its forward case, else its fwd_bwd case."""
    chosen: dict[str, Case] = {}
    for c in cases:
        if variant_key(c) not in chosen or not is_fwd_bwd(c):
            chosen[variant_key(c)] = c
    return list(chosen.values())


def load_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """One panel per case: accepted and routed copies per expert of the first EP group."""
    with_load = [c for c in cases if "expert_load" in c.datasets]
    if not with_load:
        return None
    if len(with_load) > MAX_LOAD_PANELS:
        warn(f"expert loads: {len(with_load)} cases, drawing the first {MAX_LOAD_PANELS}")
        with_load = with_load[:MAX_LOAD_PANELS]
    cols = min(3, len(with_load))
    rows = math.ceil(len(with_load) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols + 1, 3.2 * rows + 1), squeeze=False)
    for ax, case in zip(axes.ravel(), with_load):
        # [groups, E], written 1-D when there is one group.
        kept = np.asarray(case.datasets["expert_load"], dtype=float)
        experts = int(_num(case, "experts", 0))
        kept = kept.reshape(-1, experts) if experts > 0 else np.atleast_2d(kept)
        first = kept[0]
        x = np.arange(first.size)
        routed = case.datasets.get("expert_load_routed")
        if routed is not None:
            r = np.asarray(routed, dtype=float).reshape(kept.shape)[0]
            ax.bar(x, r, color="lightgrey", edgecolor="grey", label="routed")
        ax.bar(x, first, width=0.6, color="C0", label="accepted")
        ax.axhline(first.mean(), color="black", linestyle=":", linewidth=1, label="mean")
        cap = _num(case, "capacity", -1)
        if cap >= 0:
            ax.axhline(cap, color="red", linestyle="--", linewidth=1, label="capacity")
        ax.set_title(_short(case), fontsize=9)
        ax.set_xlabel("expert")
        ax.set_ylabel("copies")
    for ax in axes.ravel()[len(with_load):]:
        ax.set_visible(False)
    axes.ravel()[0].legend(fontsize=7)
    fig.suptitle(title("copies per expert (first EP group)"), fontsize=10)
    return fig


def _finish(fig: plt.Figure, ax: plt.Axes, text: str) -> plt.Figure:
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    ax.set_title(text)
    return fig


def _load_panels(fig_title: str, title: Title, columns: list[str]) -> tuple[plt.Figure, np.ndarray]:
    fig, axes = plt.subplots(2, len(columns), figsize=(5.5 * len(columns) + 1, 7.5),
                             squeeze=False)
    fig.suptitle(title(fig_title), fontsize=10)
    for j in range(len(columns)):
        axes[0, j].set_ylabel("max / mean expert load")
        axes[1, j].set_ylabel("dropped copies (%)")
        for i in range(2):
            axes[i, j].grid(True, alpha=0.3)
    return fig, axes


def skew_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Max/mean load and drop rate against alpha (zipf) and M (hot), a line per CF."""
    kinds = [k for k in KNOB if any(c.attrs["skew"] == k for c in cases)]
    if not kinds:
        return None
    cfs = sorted({_num(c, "capacity_factor") for c in cases})
    fig, axes = _load_panels("expert load and drops against skew", title, kinds)
    for j, kind in enumerate(kinds):
        name, label = KNOB[kind]
        for n, cf in enumerate(cfs):
            members = sorted((c for c in cases if c.attrs["skew"] == kind
                              and _num(c, "capacity_factor") == cf), key=lambda c: _num(c, name))
            if not members:
                continue
            x = [_num(c, name) for c in members]
            axes[0, j].plot(x, [_num(c, "expert_load_max_over_mean") for c in members], marker="o",
                            color=f"C{n}", label=_cf_label(cf))
            axes[1, j].plot(x, [100 * _num(c, "drop_rate", 0) for c in members], marker="o",
                            color=f"C{n}", label=_cf_label(cf))
            for c in cases:
                if c.attrs["skew"] == "none" and _num(c, "capacity_factor") == cf:
                    axes[0, j].axhline(_num(c, "expert_load_max_over_mean"), color=f"C{n}",
                                       linestyle="--", linewidth=0.8)
                    axes[1, j].axhline(100 * _num(c, "drop_rate", 0), color=f"C{n}",
                                       linestyle="--", linewidth=0.8)
        axes[0, j].set_title(f"{kind} (dashed: uniform routing)", fontsize=9)
        axes[1, j].set_xlabel(label)
        axes[0, j].legend(fontsize=8)
    return fig


def cf_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Max/mean load and drop rate against the capacity factor, a line per skew setting."""
    cfs = sorted({_num(c, "capacity_factor") for c in cases})
    if len(cfs) < 2:
        return None
    fig, axes = _load_panels("expert load and drops against the capacity factor", title, ["cf"])
    lines: dict[str, list[Case]] = {}
    for c in cases:
        lines.setdefault(_skew_label(c), []).append(c)
    for n, (label, members) in enumerate(sorted(lines.items(), key=lambda kv: natural_key(kv[0]))):
        members.sort(key=lambda c: _num(c, "capacity_factor"))
        x = [_num(c, "capacity_factor") for c in members]
        axes[0, 0].plot(x, [_num(c, "expert_load_max_over_mean") for c in members], marker="o",
                        color=f"C{n % 10}", label=label)
        axes[1, 0].plot(x, [100 * _num(c, "drop_rate", 0) for c in members], marker="o",
                        color=f"C{n % 10}", label=label)
    axes[1, 0].set_xlabel("capacity factor (0 = dropless)")
    axes[0, 0].legend(fontsize=8)
    return fig


def phases_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Stacked median phase times per case (each the median over steps of the slowest rank);
    a fwd_bwd case's backward phases hatched above its forward ones."""
    timed = [c for c in cases if any(f"phase_{p}_median_s" in c.attrs for p in PHASES)]
    if not timed:
        return None
    fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(timed) + 3), 5.5))
    x = np.arange(len(timed))
    bottom = np.zeros(len(timed))
    for p in PHASES + BWD_PHASES:
        v = np.array([_num(c, f"phase_{p}_median_s", 0) for c in timed])
        if not v.any():
            continue
        backward = p in BWD_PHASES
        # A backward phase takes the colour of the forward phase it differentiates.
        like = PHASES.index({"bwd_router": "route"}.get(p, p.removeprefix("bwd_")))
        ax.bar(x, v, bottom=bottom, color=f"C{like}", label=p, hatch="//" if backward else None,
               edgecolor="white" if backward else None)
        bottom += v
    ax.plot(x, [c.median_s or 0 for c in timed], "kD", markersize=5, label="step median")
    labels = [_short(c) + (" fwd+bwd" if is_fwd_bwd(c) else "") for c in timed]
    ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("time per layer step (s)\n(each phase: median of the slowest rank)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title("MoE layer phases (hatched: backward)"))
    return fig


def passes_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Per variant: the forward case's step time, and the fwd_bwd case's forward and backward
    (stacked, its step median as a marker), with backward / forward written above."""
    steps = {variant_key(c): c for c in cases if is_fwd_bwd(c)}
    if not steps:
        return None
    forward = {c.name: c for c in cases if not is_fwd_bwd(c)}
    keys = [k for k in (variant_key(c) for c in variants(cases)) if k in steps]
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(keys) + 3), 5.5))
    x = np.arange(len(keys))
    width = 0.38
    fwd_only = [(forward[k].median_s or 0) if k in forward else 0 for k in keys]
    if any(fwd_only):
        ax.bar(x - width / 2, fwd_only, width, color="C0", alpha=0.5, label="fwd case: step")
    f = np.array([_num(steps[k], "phase_forward_median_s", 0) for k in keys])
    b = np.array([_num(steps[k], "phase_backward_median_s", 0) for k in keys])
    ax.bar(x + width / 2, f, width, color="C0", label="fwd_bwd case: forward")
    ax.bar(x + width / 2, b, width, bottom=f, color="C3", label="fwd_bwd case: backward")
    ax.plot(x + width / 2, [steps[k].median_s or 0 for k in keys], "kD", markersize=5,
            label="fwd_bwd step median")
    for i, k in enumerate(keys):
        ratio = _num(steps[k], "bwd_over_fwd_time")
        if math.isfinite(ratio):
            ax.annotate(f"bwd/fwd {ratio:.2f}", (x[i] + width / 2, f[i] + b[i]), ha="center",
                        va="bottom", fontsize=7)
    ax.set_xticks(x, [_short(steps[k]) for k in keys], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("time per layer (s), median of the slowest rank")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title("forward and backward per variant"))
    return fig


def ratio_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Measured all-to-all / expert time against the METHODS.md prediction, per case; the
    backward of fwd_bwd cases (the same bytes over twice the FLOPs) as open markers."""
    points = []  # (case, measured, predicted, backward): the forward once per variant
    sources = [(c, "", False) for c in variants(cases)] + [(c, "bwd_", True) for c in cases if is_fwd_bwd(c)]
    for c, prefix, backward in sources:
        meas, pred = _num(c, f"{prefix}a2a_expert_ratio", 0), _num(c, f"pred_{prefix}a2a_expert_ratio", 0)
        if meas > 0 and pred > 0:
            points.append((c, meas, pred, backward))
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 6))
    meas = np.array([p[1] for p in points])
    pred = np.array([p[2] for p in points])
    colors = {variant_key(c): f"C{i % 10}" for i, c in enumerate(variants(cases))}
    for c, m, p, backward in points:
        color = colors[variant_key(c)]
        style = {"facecolors": "none", "edgecolors": color} if backward else {"color": color}
        ax.scatter(p, m, label=_short(c) + (" (backward)" if backward else ""), **style)
    lo, hi = min(meas.min(), pred.min()) / 2, max(meas.max(), pred.max()) * 2
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", label="measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted (F/W)((N_e-1)/N_e)/d_ff (x e/2; /1.5 SwiGLU; /2 backward)")
    ax.set_ylabel("measured (dispatch + combine) / expert time")
    return _finish(fig, ax, title("all-to-all / expert time"))


def balance_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    with_history = [c for c in cases if "balance_max_over_mean" in c.datasets]
    if not with_history:
        return None
    fig, ax = plt.subplots(figsize=(7, 5))
    for i, c in enumerate(with_history):
        h = np.asarray(c.datasets["balance_max_over_mean"], dtype=float).ravel()
        ax.plot(np.arange(h.size), h, marker="o", color=f"C{i % 10}", label=_short(c))
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.set_xlabel("balancing step (last: the timed steps' routing)")
    ax.set_ylabel("max / mean expert load (routed)")
    return _finish(fig, ax, title("aux-loss-free balancing"))


def overlap_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    overlapped = [c for c in cases if _num(c, "microbatches", 1) > 1]
    if not overlapped:
        return None
    if len({_num(c, "d_ff") for c in overlapped}) > 1:  # a d_ff sweep: the crossing
        fig, ax = plt.subplots(figsize=(7, 5))
        by_ff = sorted(overlapped, key=lambda c: _num(c, "d_ff"))
        ff = [_num(c, "d_ff") for c in by_ff]
        ax.plot(ff, [_num(c, "exposed_a2a_s") * 1e6 for c in by_ff], "o-", label="exposed all-to-all (step - X)")
        ax.plot(ff, [_num(c, "pred_exposed_a2a_s") * 1e6 for c in by_ff], "x--", label="critical path - X")
        for star in sorted({round(_num(c, "pred_d_ff_star")) for c in by_ff if _num(c, "pred_d_ff_star") > 0}):
            ax.axvline(star, color="k", linestyle=":", linewidth=1, label=f"d_ff* = {star}")
        ax.set_xscale("log")
        ax.set_xlabel("d_ff")
        ax.set_ylabel("us per step")
        return _finish(fig, ax, title("exposed all-to-all against d_ff"))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(overlapped)), 5))
    bars = (("step_m1_s", "M = 1 step"), ("time_median_s", "pipelined step"),
            ("pred_step_s", "critical path (pred)"), ("overlap_compute_s", "compute X"))
    x = np.arange(len(overlapped))
    width = 0.8 / len(bars)
    for i, (attr, label) in enumerate(bars):
        ax.bar(x + i * width, [_num(c, attr, 0) * 1e6 for c in overlapped], width, label=label, color=f"C{i}")
    for j, c in enumerate(overlapped):
        ax.annotate(f"exposed {_num(c, 'exposed_a2a_s') * 1e6:.0f} us", (x[j] + 0.4, _num(c, "step_m1_s", 0) * 1e6),
                    ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x + 0.4, [f"M={_num(c, 'microbatches'):g}, {_short(c)}" for c in overlapped], fontsize=7)
    ax.set_ylabel("us per step")
    return _finish(fig, ax, title("all-to-all behind another micro-batch"))


def moe_figures(cases: list[Case], bench: str, title: Title) -> dict[str, plt.Figure]:
    """Every figure the cases allow, keyed by file name (routing figures: one case a variant)."""
    routing = variants(cases)
    makers = {"expert_load": (load_figure, routing), "load_vs_skew": (skew_figure, routing),
              "load_vs_cf": (cf_figure, routing), "phases": (phases_figure, cases),
              "passes": (passes_figure, cases), "ratio": (ratio_figure, cases),
              "balance": (balance_figure, routing), "overlap": (overlap_figure, cases)}
    figures = {}
    for name, (make, which) in makers.items():
        fig = make(which, lambda what: title(f"{bench}: {what}"))
        if fig is not None:
            figures[f"{bench}_{name}.png"] = fig
    return figures
