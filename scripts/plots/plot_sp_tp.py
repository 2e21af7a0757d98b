"""Figures for the sp_tp layer mode (`mode="layer"`: one transformer layer, TP vs TP+SP, forward
cases and, with `pass="fwd_bwd"`, training-step cases).

- `<bench>_layer_time.png`: forward cases; per attention path, one bar per variant stacked
  compute + comm medians, with the step median and its p10-p90 range marked;
- `<bench>_layer_step.png`: training-step cases; per attention path, one bar per variant (and
  TP+SP overlap setting) stacked forward compute, forward comm, backward compute and backward
  exposed comm, with the step median and its p10-p90 range marked;
- `<bench>_layer_memory.png`: activation bytes per rank, measured vs predicted (METHODS.md),
  annotated with the relative error, and the backward's measured peak where a case has one;
- `<bench>_layer_ledger.png`: the activation ledger, bytes per saved tensor, once per
  configuration (a training step keeps the same ledger as its forward case).

`layer_figures` returns {file name: figure}; plot.py titles and saves them.
"""

from __future__ import annotations

from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from scripts.results.suite_results import Case, natural_key, step_times, warn

LAYER_NEEDS = ("variant", "attention")
VARIANTS = ("tp", "tp_sp")
ATTENTIONS = ("fused", "unfused")
# What tells two configurations apart (not the pass: the memory and ledger figures show one
# case per configuration, the time and step figures one pass each).
CONFIG_PARAMS = ("dtype", "s", "b", "h", "heads", "d_ff", "t", "causal", "dropout")
# The training step's stacked phases: (phase, legend label, alpha, hatch).
STEP_PHASES = (("fwd_compute", "fwd compute", 1.0, ""), ("fwd_comm", "fwd comm", 0.45, "//"),
               ("bwd_compute", "bwd compute", 0.75, ".."),
               ("bwd_comm", "bwd comm (exposed)", 0.3, "\\\\"))
LEDGER = ("ledger_name", "ledger_bytes")
MIB = 2.0**20

Title = Callable[[str], str]


def _ordered(values: set[str], known: tuple[str, ...]) -> list[str]:
    """The known values in their order, then any others by name."""
    return [v for v in known if v in values] + sorted(values - set(known))


def _sorted_cases(cases: list[Case]) -> list[Case]:
    """By attention path, then variant, then name (tp before tp_sp, fused before unfused)."""
    att = _ordered({str(c.attrs["attention"]) for c in cases}, ATTENTIONS)
    var = _ordered({str(c.attrs["variant"]) for c in cases}, VARIANTS)
    return sorted(cases, key=lambda c: (att.index(str(c.attrs["attention"])),
                                        var.index(str(c.attrs["variant"])),
                                        natural_key(c.name)))


def _labels(cases: list[Case], with_attention: bool = True) -> dict[Case, str]:
    """Variant (and attention path), plus the configuration parameters that differ between
    the cases; the case names where that does not tell them apart (e.g. repetitions)."""
    varying = [p for p in CONFIG_PARAMS if len({repr(c.attrs.get(p)) for c in cases}) > 1]
    full = {c: [str(c.attrs["variant"]), str(c.attrs["attention"])]
            + [f"{p}={c.attrs.get(p)}" for p in varying] for c in cases}
    if len({tuple(words) for words in full.values()}) < len(cases):
        return {c: c.name for c in cases}
    return {c: " ".join(w for i, w in enumerate(words) if with_attention or i != 1)
            for c, words in full.items()}


def _variant_colors(cases: list[Case]) -> dict[str, str]:
    names = _ordered({str(c.attrs["variant"]) for c in cases}, VARIANTS)
    return {v: f"C{i % 10}" for i, v in enumerate(names)}


def _phase_median(case: Case, phase: str) -> float | None:
    """`phase_<phase>_median_s`, else the median over iterations of the max over ranks."""
    value = case.attrs.get(f"phase_{phase}_median_s")
    if value is not None:
        return float(value)
    data = case.datasets.get(f"phase_{phase}_s")
    return None if data is None else float(np.median(step_times(data)))


def _step_range(case: Case) -> tuple[float, float] | None:
    """(p10, p90) of the step time, from the attributes or the `time_s` dataset."""
    if "time_p10_s" in case.attrs and "time_p90_s" in case.attrs:
        return float(case.attrs["time_p10_s"]), float(case.attrs["time_p90_s"])
    if "time_s" in case.datasets:
        step = case.step_times()
        return float(np.percentile(step, 10)), float(np.percentile(step, 90))
    return None


def is_step(case: Case) -> bool:
    """A training-step case (forward then backward)."""
    return str(case.attrs.get("pass", "fwd")) == "fwd_bwd"


def _step_label(case: Case) -> str:
    """Variant, and for TP+SP the overlap setting of its backward."""
    overlap = case.attrs.get("bwd_overlap")
    if overlap is None:
        return str(case.attrs["variant"])
    return f"{case.attrs['variant']}\n{'overlap' if int(overlap) else 'no overlap'}"


def _bar_positions(cases: list[Case]) -> tuple[dict[Case, float], dict[str, float], float]:
    """x of each case's bar, grouped by attention path; the group centres; the bar width."""
    groups: dict[str, list[Case]] = {}
    for c in cases:
        groups.setdefault(str(c.attrs["attention"]), []).append(c)
    width = 0.8 / max(len(m) for m in groups.values())
    xs, centres = {}, {}
    for g, (attention, members) in enumerate(groups.items()):
        centres[attention] = g
        for i, c in enumerate(members):
            xs[c] = g + (i - (len(members) - 1) / 2) * width
    return xs, centres, width


def _finish_bars(ax: plt.Axes, centres: dict[str, float], label_y: float, colors: dict[str, str],
                 split: list[bool], phases: list[Patch], mark, ylabel: str, heading: str) -> None:
    """What both bar figures end with: each group's attention path under it (at label_y, in
    axes units); a legend of the variants' colours, the phases where some bar is split, the
    pale whole-step bar where some is not, and the step marker; the y label, grid and title."""
    below = blended_transform_factory(ax.transData, ax.transAxes)
    for attention, x in centres.items():
        ax.text(x, label_y, f"{attention} attention", transform=below, ha="center", va="top",
                fontweight="bold")
    handles = [Patch(color=col, label=v) for v, col in colors.items()]
    if any(split):
        handles += phases
    if not all(split):
        handles.append(Patch(color="grey", alpha=0.35, label="step, no phase split"))
    handles.append(mark)
    ax.legend(handles=handles, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(heading)


def _draw_time_bar(ax: plt.Axes, case: Case, x: float, width: float, color: str) -> bool:
    """Compute then comm stacked; a pale whole-step bar when a phase is missing."""
    compute, comm = _phase_median(case, "compute"), _phase_median(case, "comm")
    if compute is None or comm is None:
        ax.bar(x, case.median_s, width, color=color, alpha=0.35)
        return False
    ax.bar(x, compute, width, color=color, edgecolor="black", linewidth=0.5)
    ax.bar(x, comm, width, bottom=compute, color=color, alpha=0.45, hatch="//",
           edgecolor="black", linewidth=0.5)
    return True


def time_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Grouped bars per attention path: compute + comm medians, step median with p10-p90
    (forward cases)."""
    cases = _sorted_cases([c for c in cases if c.median_s is not None and not is_step(c)])
    if not cases:
        return None
    xs, centres, width = _bar_positions(cases)
    colors = _variant_colors(cases)
    labels = _labels(cases, with_attention=False)
    fig, ax = plt.subplots(figsize=(max(7, 1.3 * len(cases) + 3), 5.5))
    split = [_draw_time_bar(ax, c, xs[c], width, colors[str(c.attrs["variant"])])
             for c in cases]
    mark = _step_marks(ax, cases, xs)
    ax.set_xticks([xs[c] for c in cases], [labels[c] for c in cases], fontsize=8)
    phases = [Patch(facecolor="white", edgecolor="black", label="compute (median)"),
              Patch(facecolor="white", edgecolor="black", hatch="//", label="comm (median)")]
    _finish_bars(ax, centres, -0.1, colors, split, phases, mark,
                 "time per layer forward (s)\n(step = max over ranks)",
                 title("layer forward time, compute + comm"))
    return fig


def _step_marks(ax: plt.Axes, cases: list[Case], xs: dict[Case, float]):
    """The step median of each case with its p10-p90 range; the first marker (for a legend)."""
    marks = []
    for c in cases:
        spread = _step_range(c)
        yerr = None if spread is None else [[c.median_s - spread[0]], [spread[1] - c.median_s]]
        marks.append(ax.errorbar(xs[c], c.median_s, yerr=yerr, fmt="D", color="black",
                                 markersize=5, capsize=4, label="step median (p10-p90)"))
    return marks[0]


def step_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Training steps: grouped bars per attention path, forward and backward stacked (compute,
    comm; the backward's comm is what the overlap left exposed), step median with p10-p90."""
    cases = _sorted_cases([c for c in cases if c.median_s is not None and is_step(c)])
    if not cases:
        return None
    xs, centres, width = _bar_positions(cases)
    colors = _variant_colors(cases)
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(cases) + 3), 5.5))
    split = []
    for c in cases:
        values = [_phase_median(c, phase) for phase, *_ in STEP_PHASES]
        color = colors[str(c.attrs["variant"])]
        if any(v is None for v in values):
            ax.bar(xs[c], c.median_s, width, color=color, alpha=0.35)
            split.append(False)
            continue
        bottom = 0.0
        for value, (_, _, alpha, hatch) in zip(values, STEP_PHASES):
            ax.bar(xs[c], value, width, bottom=bottom, color=color, alpha=alpha, hatch=hatch,
                   edgecolor="black", linewidth=0.5)
            bottom += value
        split.append(True)
    mark = _step_marks(ax, cases, xs)
    ax.set_xticks([xs[c] for c in cases], [_step_label(c) for c in cases], fontsize=8)
    phases = [Patch(facecolor="lightgrey", alpha=alpha, hatch=hatch, edgecolor="black", label=label)
              for _, label, alpha, hatch in STEP_PHASES]
    _finish_bars(ax, centres, -0.13, colors, split, phases, mark,
                 "time per layer training step (s)\n(step = max over ranks)",
                 title("layer training step, forward + backward"))
    return fig


def _rel_err(case: Case) -> float:
    if "activation_rel_err" in case.attrs:
        return float(case.attrs["activation_rel_err"])
    pred = float(case.attrs["pred_activation_bytes"])
    return abs(float(case.attrs["activation_bytes"]) - pred) / pred if pred else float("nan")


def _config_key(case: Case) -> str:
    """The case name without its pass suffix: a forward case and its training steps share it."""
    name = case.name
    for suffix in ("_fwd_bwd_nooverlap", "_fwd_bwd"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def one_per_config(cases: list[Case]) -> list[Case]:
    """One case per configuration (the ledger does not depend on the pass or the overlap):
    a training step where there is one (it also has the backward's peak), its overlapped one
    first, else the forward case."""
    def rank(c: Case) -> tuple[int, int]:
        return (0 if is_step(c) else 1, 0 if int(c.attrs.get("bwd_overlap", 1)) else 1)
    chosen: dict[str, Case] = {}
    for c in cases:
        key = _config_key(c)
        if key not in chosen or rank(c) < rank(chosen[key]):
            chosen[key] = c
    return [c for c in cases if chosen.get(_config_key(c)) is c]


def memory_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """Measured vs predicted activation bytes per (variant, attention), error in %; beside
    them the backward's measured peak (ledger + working set) where a case has one."""
    needed = ("activation_bytes", "pred_activation_bytes")
    cases = one_per_config(_sorted_cases([c for c in cases if all(k in c.attrs for k in needed)]))
    if not cases:
        return None
    labels = _labels(cases)
    pos = np.arange(len(cases))
    measured = np.array([float(c.attrs["activation_bytes"]) for c in cases]) / MIB
    predicted = np.array([float(c.attrs["pred_activation_bytes"]) for c in cases]) / MIB
    peaks = [c.attrs.get("bwd_peak_bytes") for c in cases]
    with_peak = any(p is not None for p in peaks)
    width = 0.27 if with_peak else 0.4
    fig, ax = plt.subplots(figsize=(max(7, 1.3 * len(cases) + 3), 5))
    ax.bar(pos - width / 2 * (2 if with_peak else 1), measured, width=width,
           label="measured (ledger)")
    ax.bar(pos + (0 if with_peak else width / 2), predicted, width=width,
           label="predicted (METHODS.md)")
    if with_peak:
        ax.bar(pos + width, [np.nan if p is None else float(p) / MIB for p in peaks], width=width,
               label="backward peak (measured: ledger + working set)", color="C3", alpha=0.7)
    for x, top, c in zip(pos, np.maximum(measured, predicted), cases):
        ax.annotate(f"err {100 * _rel_err(c):.2f}%", (x, top), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(pos, [labels[c].replace(" ", "\n", 1) for c in cases], fontsize=8)
    ax.set_ylabel("memory per rank (MiB)" if with_peak else "activation memory per rank (MiB)")
    ax.margins(y=0.12)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title("activation memory, measured vs predicted"
                       + (", and the backward's peak" if with_peak else "")))
    return fig


def _ledger(case: Case) -> tuple[list[str], np.ndarray] | None:
    """(tensor names, bytes) of a case's ledger; None (with a warning) if absent or uneven."""
    if not all(k in case.datasets for k in LEDGER):
        warn(f"{case.key}: no {'/'.join(LEDGER)} datasets; left out of the ledger figure")
        return None
    names = [str(n) for n in case.datasets["ledger_name"]]
    sizes = np.asarray(case.datasets["ledger_bytes"], dtype=float).ravel()
    if len(names) != len(sizes):
        warn(f"{case.key}: {len(names)} ledger names but {len(sizes)} sizes;"
             " left out of the ledger figure")
        return None
    return names, sizes


def _tensor_colors(ledgers: list[tuple[list[str], np.ndarray]]) -> dict[str, tuple]:
    """One colour per tensor name, in layer order: a name that only some ledgers hold goes
    right after the name before it in the first ledger that holds it."""
    names: list[str] = []
    for ledger_names, _ in ledgers:
        previous = -1
        for n in ledger_names:
            if n not in names:
                names.insert(previous + 1, n)
            previous = names.index(n)
    cmap = plt.get_cmap("tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(names)}


def ledger_figure(cases: list[Case], title: Title) -> plt.Figure | None:
    """One stacked horizontal bar per case: bytes of each saved tensor, % of total inside."""
    found = [(c, led) for c in one_per_config(_sorted_cases(cases))
             if (led := _ledger(c)) is not None]
    if not found:
        return None
    labels = _labels([c for c, _ in found])
    colors = _tensor_colors([led for _, led in found])
    widest = max(float(sizes.sum()) for _, (_, sizes) in found) / MIB
    fig, ax = plt.subplots(figsize=(12, 0.7 * len(found) + 2.5))
    for y, (case, (names, sizes)) in enumerate(found):
        left, total = 0.0, float(sizes.sum())
        for name, size in zip(names, sizes / MIB):
            ax.barh(y, size, left=left, color=colors[name], edgecolor="white", linewidth=0.5)
            if widest and size / widest > 0.06:
                ax.text(left + size / 2, y, f"{100 * size * MIB / total:.0f}%", ha="center",
                        va="center", fontsize=7)
            left += size
    ax.set_yticks(range(len(found)), [labels[c] for c, _ in found], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("saved activation bytes per rank (MiB)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(handles=[Patch(color=col, label=n) for n, col in colors.items()], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1), title="saved tensor")
    ax.set_title(title("activation ledger: bytes per saved tensor"))
    return fig


def layer_figures(cases: list[Case], bench: str, title: Title) -> dict[str, plt.Figure]:
    """{file name: figure} for the layer cases (each must have variant and attention)."""
    builders = {"time": time_figure, "step": step_figure, "memory": memory_figure,
                "ledger": ledger_figure}
    figures = {}
    for what, build in builders.items():
        fig = build(cases, lambda text: title(f"{bench} layer: {text}"))
        if fig is not None:
            figures[f"{bench}_layer_{what}.png"] = fig
    return figures
