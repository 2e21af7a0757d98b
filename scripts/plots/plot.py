"""Write PNG figures for every bench in one results file (docs/RESULTS_SCHEMA.md).

Known benches get their own figures (sp_tp, harness_overhead, ring_attention, ulysses, moe,
mesh, pipeline, kernel_bench); any other bench gets a generic
chart of the median step time per case and one measured-vs-predicted chart per `pred_<x>`.
sp_tp files may hold collectives cases (`mode` missing or `collectives`) and layer cases
(`mode="layer"`, figures in plot_sp_tp.py); each mode is plotted on its own.
One per-rank box plot of a chosen case shows stragglers.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.legend_handler import HandlerTuple  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from scripts.plots.plot_kernels import KERNEL_NEEDS, kernel_figures  # noqa: E402
from scripts.plots.plot_mesh import MESH_NEEDS, mesh_figures  # noqa: E402
from scripts.plots.plot_moe import MOE_NEEDS, moe_figures  # noqa: E402
from scripts.plots.plot_pipeline import PIPELINE_NEEDS, pipeline_figures  # noqa: E402
from scripts.plots.plot_ring import RING_NEEDS, ring_figures  # noqa: E402
from scripts.plots.plot_sp_tp import LAYER_NEEDS, layer_figures  # noqa: E402
from scripts.plots.plot_ulysses import ULYSSES_NEEDS, ulysses_figures  # noqa: E402
from scripts.results.suite_results import (Case, Results, cli_warnings, file_stem,  # noqa: E402
                                           read_results, warn)

OP_LABELS = {"allreduce": "all-reduce", "rs_ag": "reduce-scatter + all-gather"}
OVERHEAD_LIMIT = 1.05


TITLE_WIDTH = 80  # characters of a title line on the 8-inch figures


def _title(res: Results, what: str) -> str:
    """`what`, then the run's description wrapped at its ` | ` separators so it fits."""
    lines = [""]
    for part in res.describe().split(" | "):
        joined = f"{lines[-1]} | {part}" if lines[-1] else part
        if lines[-1] and len(joined) > TITLE_WIDTH:
            lines.append(part)
        else:
            lines[-1] = joined
    return "\n".join([what, *lines])


def _save(fig: plt.Figure, path: Path, written: list[Path]) -> None:
    if fig.get_layout_engine() is None:  # figures made with layout="constrained" keep theirs
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)


LABEL_FIRST = ("op", "s", "b", "h")  # the op names a line first, then an activation case's size


def _series(cases: list[Case], x_param: str) -> dict[str, list[Case]]:
    """Group cases into lines: one per combination of the parameters (other than x) that vary,
    labelled op first (sp_tp's activation-sized case says so)."""
    names = sorted({p for c in cases for p in c.params if p != x_param},
                   key=lambda p: (LABEL_FIRST.index(p) if p in LABEL_FIRST else len(LABEL_FIRST), p))
    varying = [p for p in names
               if p == "op" or len({repr(c.params.get(p)) for c in cases}) > 1]
    groups: dict[str, list[Case]] = {}
    for case in cases:
        parts = []
        for p in varying:
            value = case.params.get(p)
            if value is None:  # e.g. the sweep cases have no s, b, h: only the activation case does
                continue
            parts.append(OP_LABELS.get(value, str(value)) if p == "op" else f"{p}={value}")
        if case.bench == "sp_tp" and "s" in case.params and len(parts) > 1:
            parts[1:] = [f"activation case {' '.join(parts[1:])}"]
        groups.setdefault(", ".join(parts) or case.bench, []).append(case)
    for members in groups.values():
        members.sort(key=lambda c: c.attrs[x_param])
    return groups


def _usable(cases: list[Case], needed: tuple[str, ...]) -> list[Case]:
    usable = []
    for c in cases:
        if all(k in c.attrs for k in needed):
            usable.append(c)
        else:
            warn(f"{c.key}: lacks one of {needed}; left out of the plot")
    return usable


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _log2_x(ax: plt.Axes, label: str = "message size (bytes)") -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel(label)
    ax.grid(True, which="both", alpha=0.3)


def plot_sp_tp_collectives(res: Results, bench: str, cases: list[Case], out: Path,
                           written: list[Path]) -> bool:
    """Step time, busbw and measured-vs-predicted bytes vs message size, by op."""
    cases = _usable(cases, ("op", "n_bytes", "time_median_s"))
    if not cases:
        return False
    groups = _series(cases, "n_bytes")

    fig, ax = plt.subplots(figsize=(8, 5))
    band = False
    for label, members in groups.items():
        x = [c.attrs["n_bytes"] for c in members]
        med = [c.attrs["time_median_s"] for c in members]
        line, = ax.plot(x, med, marker="o", label=label)
        if all("time_p10_s" in c.attrs and "time_p90_s" in c.attrs for c in members):
            ax.fill_between(x, [c.attrs["time_p10_s"] for c in members],
                            [c.attrs["time_p90_s"] for c in members],
                            color=line.get_color(), alpha=0.2)
            band = True
    _log2_x(ax)
    ax.set_yscale("log")
    ax.set_ylabel("step time, max over ranks (s)")
    handles, _ = ax.get_legend_handles_labels()
    if band:
        handles.append(Patch(color="grey", alpha=0.3, label="p10-p90 band"))
    ax.legend(handles=handles, title="median of each", fontsize=9)
    ax.set_title(_title(res, f"{bench}: step time"))
    _save(fig, out / f"{bench}_time.png", written)

    bw = [c for c in cases if "busbw_GBps" in c.attrs]
    if bw:
        fig, ax = plt.subplots(figsize=(8, 5))
        for label, members in _series(bw, "n_bytes").items():
            ax.plot([c.attrs["n_bytes"] for c in members],
                    [c.attrs["busbw_GBps"] for c in members], marker="o", label=label)
        _log2_x(ax)
        ax.set_ylabel("bus bandwidth (GB/s, from median step time)")
        ax.legend()
        ax.set_title(_title(res, f"{bench}: bus bandwidth"))
        _save(fig, out / f"{bench}_busbw.png", written)

    key = "bytes_sent_per_rank"
    pb = [c for c in cases if key in c.attrs and f"pred_{key}" in c.attrs]
    if pb:
        fig, ax = plt.subplots(figsize=(8, 5))
        handles, labels = [], []
        for i, (label, members) in enumerate(_series(pb, "n_bytes").items()):
            x = [c.attrs["n_bytes"] for c in members]
            line, = ax.plot(x, [c.attrs[f"pred_{key}"] for c in members], linestyle="--",
                            linewidth=1)
            # distinct, hollow markers: equal predictions (all-reduce = rs + ag) still show both
            dots, = ax.plot(x, [c.attrs[key] for c in members], marker="osD^v"[i % 5],
                            linestyle="none", markersize=9 - 2 * (i % 3),
                            markerfacecolor="none", color=line.get_color())
            handles.append((dots, line))  # one legend entry: marker measured, dashes predicted
            labels.append(label)
        _log2_x(ax)
        ax.set_yscale("log", base=2)
        ax.set_ylabel("bytes sent per rank per step")
        ax.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=None)},
                  title="marker: measured, dashes: predicted", fontsize=9)
        ax.set_title(_title(res, f"{bench}: measured vs predicted bytes"))
        _save(fig, out / f"{bench}_bytes.png", written)

    # What the MPI library really sent (scripts/envs/wire_bytes.py), over the bandwidth-optimal
    # 2(t-1)/t n: 1 for a ring or recursive-halving algorithm, above where it sends more.
    wire = [c for c in pb if "wire_bytes_sent_per_rank" in c.attrs]
    if wire:
        fig, ax = plt.subplots(figsize=(8, 5))
        for label, members in _series(wire, "n_bytes").items():
            ax.plot([c.attrs["n_bytes"] for c in members],
                    [c.attrs["wire_bytes_sent_per_rank"] / c.attrs[f"pred_{key}"] for c in members],
                    "o-", label=label)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="2(t-1)/t n (bandwidth-optimal)")
        _log2_x(ax)
        ax.set_ylabel("bytes on the wire / 2(t-1)/t n (max over ranks)")
        ax.legend(title="counted by the MPI library (Open MPI monitoring)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(_title(res, f"{bench}: bytes on the wire against the formula"))
        _save(fig, out / f"{bench}_wire.png", written)
    return True


def plot_sp_tp_layer(res: Results, bench: str, cases: list[Case], out: Path,
                     written: list[Path]) -> bool:
    """Layer time (compute + comm), activation memory vs prediction, activation ledger."""
    figures = layer_figures(_usable(cases, LAYER_NEEDS), bench, lambda what: _title(res, what))
    for name, fig in figures.items():
        _save(fig, out / name, written)
    return bool(figures)


SP_TP_MODES = {"collectives": plot_sp_tp_collectives, "layer": plot_sp_tp_layer}


def plot_sp_tp(res: Results, bench: str, out: Path, written: list[Path]) -> bool:
    """Each mode's cases get their mode's figures; a mode whose cases cannot be drawn (or an
    unknown mode) falls back to the generic charts for those cases alone."""
    by_mode: dict[str, list[Case]] = {}
    for case in res.cases_of(bench):
        by_mode.setdefault(str(case.attrs.get("mode", "collectives")), []).append(case)
    for mode, cases in by_mode.items():
        plotter = SP_TP_MODES.get(mode)
        if plotter is not None and plotter(res, bench, cases, out, written):
            continue
        why = "unknown mode" if plotter is None else "cases lack the attributes its figures need"
        warn(f"{bench}, mode {mode!r}: {why}; falling back to the generic charts")
        prefix = bench if mode == "collectives" else f"{bench}_{_safe(mode)}"
        plot_generic(res, bench, out, written, cases=cases, prefix=prefix)
    return True


def plot_harness_overhead(res: Results, bench: str, out: Path, written: list[Path]) -> bool:
    """Suite time / plain MPI time vs message size, with the 1.05 limit."""
    cases = _usable(res.cases_of(bench), ("n_bytes", "ratio"))
    if not cases:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, members in _series(cases, "n_bytes").items():
        ax.plot([c.attrs["n_bytes"] for c in members], [c.attrs["ratio"] for c in members],
                marker="o", label=label)
    ax.axhline(OVERHEAD_LIMIT, color="red", linestyle="--", label=f"limit {OVERHEAD_LIMIT}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    _log2_x(ax)
    ax.set_ylabel("suite time / plain MPI time")
    ax.legend()
    ax.set_title(_title(res, f"{bench}: harness overhead"))
    _save(fig, out / f"{bench}_ratio.png", written)
    return True


def plot_generic(res: Results, bench: str, out: Path, written: list[Path],
                 cases: list[Case] | None = None, prefix: str | None = None) -> bool:
    """Median step time per case, and every pred_<x> / <x> pair as grouped bars.

    `cases` (default: all of the bench's) and the file name `prefix` (default: the bench)
    let a bench fall back for some of its cases only.
    """
    cases = res.cases_of(bench) if cases is None else cases
    prefix = prefix or bench
    timed = [c for c in cases if c.median_s is not None]
    if not timed:
        warn(f"{bench}: no case has time_median_s or time_s; nothing to plot")
    else:
        fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(timed) + 2), 5))
        ax.bar(range(len(timed)), [c.median_s for c in timed])
        ax.set_xticks(range(len(timed)), [c.name for c in timed], rotation=60, ha="right",
                      fontsize=8)
        ax.set_ylabel("median step time (s)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_title(_title(res, f"{bench}: median step time per case"))
        _save(fig, out / f"{prefix}_time_median.png", written)

    figures = sorted({x for c in cases for x in c.predictions()})
    for x in figures:
        with_x = [c for c in cases if x in c.predictions()]
        measured = [float(c.predictions()[x][0]) for c in with_x]
        predicted = [float(c.predictions()[x][1]) for c in with_x]
        pos = np.arange(len(with_x))
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(with_x) + 2), 5))
        ax.bar(pos - 0.2, measured, width=0.4, label="measured")
        ax.bar(pos + 0.2, predicted, width=0.4, label="predicted")
        ax.set_xticks(pos, [c.name for c in with_x], rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(x)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend()
        ax.set_title(_title(res, f"{bench}: {x}, measured vs predicted"))
        _save(fig, out / f"{prefix}_pred_{_safe(x)}.png", written)
    return bool(timed) or bool(figures)


def _figures_plotter(make: Callable[[list[Case], Callable[[str], str]], dict[str, plt.Figure]],
                     needs: tuple[str, ...], doc: str) -> Callable[[Results, str, Path, list[Path]], bool]:
    """A bench's plotter from its figure module: the cases that have `needs`, titled and saved."""
    def plot(res: Results, bench: str, out: Path, written: list[Path]) -> bool:
        figures = make(_usable(res.cases_of(bench), needs), lambda what: _title(res, what))
        for name, fig in figures.items():
            _save(fig, out / name, written)
        return bool(figures)
    plot.__doc__ = doc
    return plot


plot_ring_attention = _figures_plotter(
    ring_figures, RING_NEEDS, "Block-size sweep against c*, and per-rank per-round work and idle heatmaps.")
plot_ulysses = _figures_plotter(
    ulysses_figures, ULYSSES_NEEDS, "Phases per Ulysses degree, step time and bytes against s.")
plot_moe = _figures_plotter(
    lambda cases, title: moe_figures(cases, "moe", title), MOE_NEEDS,
    "Expert loads, load and drops against skew and CF, phases, time ratio (plot_moe.py).")
plot_mesh = _figures_plotter(
    mesh_figures, MESH_NEEDS, "Time per axis and rank, memory per rank beside the formula (plot_mesh.py).")
plot_pipeline = _figures_plotter(
    pipeline_figures, PIPELINE_NEEDS, "A Gantt chart per case: ranks over time, the bubble shaded (plot_pipeline.py).")
plot_kernel_bench = _figures_plotter(
    kernel_figures, KERNEL_NEEDS,
    "Achieved FLOP/s per case beside the peak, attention rate against s (plot_kernels.py).")


PLOTTERS: dict[str, Callable[[Results, str, Path, list[Path]], bool]] = {
    "ulysses": plot_ulysses,
    "sp_tp": plot_sp_tp,
    "ring_attention": plot_ring_attention,
    "harness_overhead": plot_harness_overhead,
    "moe": plot_moe,
    "kernel_bench": plot_kernel_bench,
    "mesh": plot_mesh,
    "pipeline": plot_pipeline,
}


def _rank_spread(case: Case) -> float:
    """Relative spread of the per-rank median times: how much one rank stands out."""
    per_rank = np.median(np.asarray(case.datasets["time_s"], dtype=float), axis=0)
    mid = float(np.median(per_rank))
    return float(per_rank.max() - per_rank.min()) / mid if mid > 0 else 0.0


def choose_rank_case(res: Results, wanted: str | None) -> Case | None:
    """The case named `wanted` (`bench/case` or `case`), else the widest spread over ranks."""
    cases = [c for c in res.cases.values()
             if np.asarray(c.datasets.get("time_s", [])).ndim == 2]
    if wanted:
        for c in res.cases.values():
            if wanted in (c.key, c.name):
                if c in cases:
                    return c
                raise SystemExit(f"error: case {wanted!r} has no [iterations, ranks] time_s")
        raise SystemExit(f"error: no case {wanted!r} in {res.path}; "
                         f"cases: {', '.join(sorted(res.cases))}")
    return max(cases, key=_rank_spread) if cases else None


def plot_per_rank(res: Results, case: Case, out: Path, written: list[Path]) -> None:
    """Box plot of each rank's own times over the iterations of one case."""
    times = np.asarray(case.datasets["time_s"], dtype=float)
    n_ranks = times.shape[1]
    hosts = res.ranks.get("hostname", [])
    labels = [f"{r}\n{hosts[r]}" if len(hosts) == n_ranks and n_ranks <= 16 else str(r)
              for r in range(n_ranks)]
    fig, ax = plt.subplots(figsize=(max(8, 0.4 * n_ranks + 2), 5))
    ax.boxplot([times[:, r] for r in range(n_ranks)], showfliers=True)
    ax.set_xticks(range(1, n_ranks + 1), labels, fontsize=7 if n_ranks > 16 else 9)
    ax.set_xlabel("rank")
    ax.set_ylabel("rank's own time per iteration (s)\n(step time = max over ranks)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(_title(res, f"{case.key}: per-rank times"))
    _save(fig, out / f"per_rank_{case.bench}_{_safe(case.name)}.png", written)


def make_plots(path: Path, out: Path, rank_case: str | None = None) -> list[Path]:
    """Write every figure for one file into `out`; return the paths written."""
    res = read_results(path)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if not res.cases:
        warn(f"{path}: no cases in the file; nothing to plot")
        return written
    for bench in res.benches():
        plotter = PLOTTERS.get(bench, plot_generic)
        if not plotter(res, bench, out, written) and plotter is not plot_generic:
            warn(f"{bench}: cases lack the attributes its figures need;"
                          " falling back to the generic charts")
            plot_generic(res, bench, out, written)
    case = choose_rank_case(res, rank_case)
    # One rank (kernel_bench, a one-rank run) has no spread to show unless asked for.
    if case is not None and (rank_case or np.asarray(case.datasets["time_s"]).shape[1] > 1):
        plot_per_rank(res, case, out, written)
    return written


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Write PNG figures for every bench in a results file "
                    "(sp_tp collectives and layer modes, harness_overhead, or a generic chart for "
                    "any other bench).")
    parser.add_argument("file", type=Path, help="results file (FILE.h5 or FILE.h5.partial)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for the PNGs (created if missing); default: "
                             "<file name without .h5>_plots/ beside the file")
    parser.add_argument("--rank-case", default=None, metavar="NAME",
                        help="case for the per-rank box plot, as <bench>/<case> or <case>; "
                             "default: the case whose ranks' median times differ the most")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli_warnings()
    if not args.file.exists():
        print(f"error: {args.file} does not exist", file=sys.stderr)
        return 2
    out = args.out or args.file.parent / f"{file_stem(args.file)}_plots"
    written = make_plots(args.file, out, args.rank_case)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
