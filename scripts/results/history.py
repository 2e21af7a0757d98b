"""Track a metric of each case (median step time by default) over many runs, ordered by
`created_utc`, one line per system (device names, world size, process group, link preset,
transport, backend, dtype: see baselines.py), marking the runs that the compare step flagged (a
`<run>.compare.json` verdict beside the results file, as slurm/lib/run_bench.sh leaves it).

A case name need not encode every parameter, so where a case's parameters change between runs
of one system its line splits per parameter set, labelled with the parameters that differ.
`--bench NAME` keeps the runs of one benchmark and skips the others with a warning.

`--plot OUT.png` draws one figure per system (OUT.png, or OUT_<system key>.png for each when
the runs span several): that system's runs on x, labelled with commit and date; one line per
case, labelled with the case (past 8 cases, one small panel per case, each titled with it and
on its own y scale); the compare step's regressions (red X) and failed checks (red square)
on the run where they happened; a dotted vertical where the software (MPI, NCCL, CUDA, cuDNN,
GEMM/BLAS) changed between two runs, the change written below. The text output names those
changes too.

`--html OUT.html` writes a page (self-contained: no script, nothing from the network) with, per
system, the runs (each linked to its results file and, where make run wrote one, its run's
page) and every case's trend as a small line over the runs, a red dot on each run whose compare
step flagged the case, a dashed line before each change point (change_points.py) with its size,
commits and environment changes listed beside, the cases flagged in some run first, then those
with change points."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from scripts.results.baselines import system_key
from scripts.results.change_points import series_steps
from scripts.results.fingerprint import foreign, missing_core
from scripts.results.index import shared_index
from scripts.results.suite_results import (ABSENT, CONFIG_KEYS, Results, cli_warnings, file_stem,
                                           find_result_files, natural_key, software_changes,
                                           software_versions, warn, warn_schema)

_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


def load_runs(inputs: list[str], include_partial: bool, bench: str | None = None,
              pattern: re.Pattern[str] | None = None) -> list[Results]:
    """Read every file (attributes only, through the results index: index.py) and sort by
    `created_utc`, then by path; with `bench`, the runs of other benchmarks are left out (one
    warning names them); with `pattern`, only the cases it matches are read. A file not
    readable as HDF5, or one of another program, is skipped with one warning line; one without
    an environment fingerprint is read with one."""
    runs = []
    others: dict[str, int] = {}
    files = find_result_files(inputs, include_partial)
    for path, res in shared_index().read_many(files, False, pattern.search if pattern else None):
        if isinstance(res, OSError):
            warn(f"{path}: not readable as HDF5 ({res}); skipped")
            continue
        if foreign(res):
            warn(f"{path}: an HDF5 file but no results file of the suite (no schema_version, "
                 "bench or case); skipped")
            continue
        warn_schema(res)
        if missing := missing_core(res):
            warn(f"{path}: no environment fingerprint ({', '.join(missing)} not recorded: an "
                 "older run?); read, its system named from what it records")
        if bench is not None and res.bench != bench:
            others[str(res.bench)] = others.get(str(res.bench), 0) + 1
            continue
        if res.created is None:
            warn(f"{path}: no valid created_utc; sorted first")
        runs.append(res)
    if others:
        listed = ", ".join(f"{n} of {b}" for b, n in sorted(others.items()))
        warn(f"skipped {sum(others.values())} run(s) of another bench than {bench} ({listed})")
    configs = {tuple(map(str, r.config().values())) for r in runs}
    if len(configs) > 1:
        warn(f"the runs mix {len(configs)} configurations ({'/'.join(CONFIG_KEYS)}); each "
             "system gets its own line, see the run list")
    return sorted(runs, key=lambda r: (r.created or _EPOCH, str(r.path)))


History = dict[str, list[tuple[int, float]]]


def compare_verdict(run: Results) -> dict | None:
    """The compare step's verdict left beside the run (`<stem>.compare.json`), if any."""
    if "verdict" not in run.memo:
        path = run.path.with_name(file_stem(run.path) + ".compare.json")
        try:
            run.memo["verdict"] = json.loads(path.read_text())
        except (OSError, ValueError):
            run.memo["verdict"] = None
    return run.memo["verdict"]


def flagged_cases(run: Results) -> set[str]:
    """Cases the compare step flagged in this run (regressions, failed checks, figures past
    their physical limits)."""
    verdict = compare_verdict(run) or {}
    invalid = {f["case"] for f in verdict.get("invalid", [])}
    if verdict.get("verdict") != "regression":
        return invalid
    return set(verdict.get("regressions", [])) | set(verdict.get("check_failures", [])) | invalid


def metric_value(case, metric: str) -> float | None:
    if metric == "time_median_s":
        return case.median_s
    value = case.attrs.get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def case_history(runs: list[Results], pattern: re.Pattern[str] | None,
                 metric: str = "time_median_s") -> History:
    """{`bench/case`: [(run index, metric)]} for the cases matching `pattern`."""
    table: History = {}
    for i, run in enumerate(runs):
        for key, case in run.cases.items():
            if pattern and not pattern.search(key):
                continue
            value = metric_value(case, metric)
            if value is not None:
                table.setdefault(key, []).append((i, value))
    return dict(sorted(table.items(), key=lambda kv: natural_key(kv[0])))


def by_system(runs: list[Results], key: str,
              points: list[tuple[int, float]]) -> dict[str, list[tuple[int, float]]]:
    """The points of case `key` split per system and, within a system, per parameter set (a
    name need not encode every parameter, e.g. ring_attention's omits n_c), in run order.

    Labels are the system key, followed where a system holds several parameter sets by the
    parameters that differ between them, e.g. `cpu_x4_loopback_mpi_cpu_fp32 [attn_choice=...]`.
    """
    def signature(i: int) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((n, repr(v)) for n, v in runs[i].cases[key].params.items()))

    split: dict[str, dict[tuple, list[tuple[int, float]]]] = {}
    for i, value in points:
        split.setdefault(system_key(runs[i]), {}).setdefault(signature(i), []).append((i, value))
    out: dict[str, list[tuple[int, float]]] = {}
    for system, sets in split.items():
        if len(sets) == 1:
            out[system] = next(iter(sets.values()))
            continue
        dicts = [dict(sig) for sig in sets]
        names = sorted({n for d in dicts for n in d}, key=natural_key)
        varying = [n for n in names if len({d.get(n, ABSENT) for d in dicts}) > 1]
        for params, series in zip(dicts, sets.values()):
            label = ", ".join(f"{n}={params.get(n, ABSENT)}" for n in varying)
            out[f"{system} [{label}]"] = series
    return out


def _run_label(run: Results) -> str:
    a = run.attrs
    flag = "" if run.complete else " (partial)"
    size, count = run.config_attr("group_size"), run.config_attr("group_count")
    group = "" if (size, count) == (a.get("world_size"), 1) else f" groups {size}x{count}"
    return (f"{a.get('bench', '?')}  {a.get('created_utc', '?')}  {a.get('git_commit', '?')}  "
            f"{a.get('backend', '?')}/{a.get('transport', '?')} {a.get('link', '?')} "
            f"x{a.get('world_size', '?')}{group}{flag}")


def print_history(runs: list[Results], table: History, metric: str = "time_median_s") -> None:
    """Per case and system, one line per run: time, commit, value, change vs the system's first
    run, and FLAGGED where the compare step flagged the case."""
    print("runs (oldest first):")
    last_of_system: dict[str, int] = {}
    for i, run in enumerate(runs):
        verdict = compare_verdict(run)
        note = f"  [compare: {verdict.get('verdict')}]" if verdict else ""
        print(f"  [{i}] {_run_label(run)}  {run.path}{note}")
        before = last_of_system.get(system_key(run))
        if before is not None:
            for change in software_changes(software_versions(runs[before]),
                                           software_versions(run)):
                print(f"        software changed since [{before}]: {change}")
        last_of_system[system_key(run)] = i
    unit = " s" if metric.endswith("_s") else ""
    for key, points in table.items():
        print(f"\n{key}")
        for system, series in by_system(runs, key, points).items():
            print(f"  system {system} ({metric})")
            first = series[0][1]
            for i, value in series:
                a = runs[i].attrs
                change = f"{value / first - 1:+.1%}" if first > 0 else ""
                flag = "  FLAGGED" if key in flagged_cases(runs[i]) else ""
                print(f"  [{i}] {a.get('created_utc', '?'):<25} "
                      f"{str(a.get('git_commit', '?')):<14} {value:.4g}{unit}  {change}{flag}")


MAX_LINES_PER_PANEL = 8  # more cases on one system: one small panel per case
MAX_TICK_LABELS = 40


def verdict_cases(run: Results) -> tuple[set[str], set[str]]:
    """(regressions, check failures) the compare step flagged in this run."""
    verdict = compare_verdict(run)
    if not verdict or verdict.get("verdict") != "regression":
        return set(), set()
    return set(verdict.get("regressions", [])), set(verdict.get("check_failures", []))


def software_steps(runs: list[Results], indices: list[int]) -> list[tuple[int, list[str]]]:
    """(position in `indices`, changes) where a run's software differs from the run before it."""
    steps = []
    for pos in range(1, len(indices)):
        before, after = (software_versions(runs[indices[p]]) for p in (pos - 1, pos))
        changes = software_changes(before, after)
        if changes:
            steps.append((pos, changes))
    return steps


def _run_tick(run: Results, two_lines: bool) -> str:
    commit = str(run.attrs.get("git_commit", "?"))[:10]
    when = run.created.strftime("%Y-%m-%d %H:%M") if run.created else "?"
    return f"{commit}\n{when}" if two_lines else f"{commit}  {when}"


def _scale(metric: str, values: list[float]) -> tuple[float, str]:
    """Divisor and axis label: times in s, ms or us by their size, other metrics as named."""
    if metric != "time_median_s":
        return 1.0, metric
    top = max(values) if values else 1.0
    for div, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if top >= div:
            return div, f"median step time ({unit})"
    return 1e-9, "median step time (ns)"


def _draw_line(ax, xs: list[int], ys: list[float], label: str, style: int,
               regress: list[bool], failed: list[bool]) -> None:
    line, = ax.plot(xs, ys, marker="osD^v<>p"[style % 8], markersize=5, linewidth=1.4,
                    label=label, color=f"C{style % 10}")
    bad = [(x, y) for x, y, r in zip(xs, ys, regress) if r]
    if bad:
        ax.scatter(*zip(*bad), marker="X", s=140, color="red", zorder=5,
                   label="_regression")
    fail = [(x, y) for x, y, f in zip(xs, ys, failed) if f]
    if fail:
        ax.scatter(*zip(*fail), marker="s", s=160, facecolors="none", edgecolors="red",
                   linewidths=1.8, zorder=5, label="_check")


def _finish_y(ax, ys: list[float], min_span: float = 0.0) -> None:
    """Log scale when the values span more than 20x; else linear, spanning at least
    `min_span` x their median, so run-to-run noise does not fill a case's panel."""
    positive = [y for y in ys if y > 0]
    if positive and len(positive) == len(ys) and max(positive) > 20 * min(positive):
        ax.set_yscale("log")
    elif ys and min_span > 0:
        mid, low, high = float(np.median(ys)), min(ys), max(ys)
        half = max((high - low) / 2 * 1.15, abs(mid) * min_span / 2)
        centre = (high + low) / 2
        ax.set_ylim(centre - half, centre + half)
    ax.grid(True, which="both", alpha=0.3)


def system_figure(runs: list[Results], system: str,
                  lines: list[tuple[str, str, list[tuple[int, float]]]], metric: str):
    """One figure for one system: its runs on x (commit and date), one line per case labelled
    with the case (one panel per case, titled with it, past MAX_LINES_PER_PANEL cases), the
    compare step's regressions (red X) and failed checks (red square) where they happened,
    and dotted verticals where the software changed between two runs (named below)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    indices = sorted({i for _, _, series in lines for i, _ in series})
    pos = {i: p for p, i in enumerate(indices)}
    div, ylabel = _scale(metric, [v for _, _, series in lines for _, v in series])
    benches = {key.split("/")[0] for key, _, _ in lines}
    labels = [(key.split("/", 1)[1] if len(benches) == 1 else key) + (f" {params}" if params else "")
              for key, params, _ in lines]
    small = len(lines) > MAX_LINES_PER_PANEL
    two_lines = len(indices) <= 12
    run_width = 1.0 if two_lines else 0.35
    if small:
        cols = min(4, math.ceil(math.sqrt(len(lines))))
        rows = math.ceil(len(lines) / cols)
        width = max(3.2, run_width * len(indices) + 1.2)
        fig, axes = plt.subplots(rows, cols, figsize=(width * cols + 1, 2.6 * rows + 2.4),
                                 sharex=True, squeeze=False)
        panels = list(axes.ravel())
        for ax in panels[len(lines):]:
            ax.set_visible(False)
    else:
        fig, ax = plt.subplots(figsize=(max(8.0, run_width * len(indices) + 6), 5.5))
        panels = [ax] * len(lines)
    marks = {"regression": False, "check": False}
    for n, ((key, _, series), label) in enumerate(zip(lines, labels)):
        ax = panels[n]
        flagged = [verdict_cases(runs[i]) for i, _ in series]
        regress = [key in r for r, _ in flagged]
        failed = [key in f for _, f in flagged]
        marks["regression"] |= any(regress)
        marks["check"] |= any(failed)
        ys = [v / div for _, v in series]
        _draw_line(ax, [pos[i] for i, _ in series], ys, label, 0 if small else n, regress, failed)
        if small:
            ax.set_title(label, fontsize=8)
            _finish_y(ax, ys, min_span=0.2)
    if not small:
        _finish_y(panels[0], [v / div for _, _, series in lines for _, v in series])
    steps = software_steps(runs, indices)
    for ax in set(panels):
        for p, _ in steps:
            ax.axvline(p - 0.5, color="grey", linestyle=":", linewidth=1.2)
    ticks = list(range(len(indices)))
    every = max(1, math.ceil(len(ticks) / MAX_TICK_LABELS))
    tick_labels = [_run_tick(runs[i], two_lines) if p % every == 0 else ""
                   for p, i in enumerate(indices)]
    if small:  # a panel above an empty slot of the last row shows the run labels itself
        for n in range(len(lines), rows * cols):
            axes.ravel()[n - cols].tick_params(labelbottom=True)
    for ax in [ax for ax in set(panels) if ax.get_visible()]:
        ax.set_xticks(ticks)
        ax.set_xticklabels(tick_labels, fontsize=7, rotation=0 if two_lines else 60,
                           ha="center" if two_lines else "right")
        ax.set_xlim(-0.5, len(indices) - 0.5)
    if small:
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel, fontsize=8)
        for col in range(cols):  # the lowest panel of each column
            lowest = max(n for n in range(col, len(lines), cols))
            axes.ravel()[lowest].set_xlabel("run: commit, date (UTC)", fontsize=8)
    else:
        panels[0].set_ylabel(ylabel)
        panels[0].set_xlabel("run: commit, date (UTC), oldest first")
    handles = []
    if marks["regression"]:
        handles.append(Line2D([], [], marker="X", color="red", linestyle="none", markersize=10,
                              label="regression (compare step)"))
    if marks["check"]:
        handles.append(Line2D([], [], marker="s", markerfacecolor="none", color="red",
                              linestyle="none", markersize=10, label="check failed (compare step)"))
    if steps:
        handles.append(Line2D([], [], color="grey", linestyle=":", label="software changed"))
    if small:
        if handles:
            fig.legend(handles=handles, loc="upper right", fontsize=8)
    else:
        case_handles, _ = panels[0].get_legend_handles_labels()
        panels[0].legend(handles=case_handles + handles, fontsize=8, loc="upper left",
                         bbox_to_anchor=(1.01, 1.0), title="case" if len(lines) > 1 else None)
    first, last = runs[indices[0]].attrs.get("created_utc", "?"), runs[indices[-1]].attrs.get(
        "created_utc", "?")
    what = ylabel if metric != "time_median_s" else "median step time"
    days = str(first)[:10] if str(first)[:10] == str(last)[:10] else \
        f"{str(first)[:10]} to {str(last)[:10]}"
    title = f"{system}\n{what} of {len(lines)} case(s) over {len(indices)} run(s), {days}"
    if small:
        title += " (one panel per case, each its own y scale)"
    notes = [f"software changed before {_run_tick(runs[indices[p]], False)}: {'; '.join(c)}"
             for p, c in steps]
    fig.suptitle(title, fontsize=10)
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.03 * len(notes), 1, 1))
    return fig


def history_figures(runs: list[Results], table: History, metric: str = "time_median_s"):
    """{system key: figure} (see system_figure), systems in the order their first case meets
    them."""
    per_system: dict[str, list[tuple[str, str, list[tuple[int, float]]]]] = {}
    for key, points in table.items():
        for label, series in by_system(runs, key, points).items():
            system = system_key(runs[series[0][0]])
            per_system.setdefault(system, []).append((key, label[len(system):].strip(), series))
    return {system: system_figure(runs, system, lines, metric)
            for system, lines in per_system.items()}


def plot_history(runs: list[Results], table: History, out: Path,
                 metric: str = "time_median_s") -> list[Path]:
    """One PNG per system: `out`, or `<stem>_<system key><suffix>` beside it when the runs
    span several systems. Returns the files written."""
    import matplotlib.pyplot as plt

    figures = history_figures(runs, table, metric)
    written = []
    for system, fig in figures.items():
        path = out if len(figures) == 1 else out.with_name(f"{out.stem}_{system}{out.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
        print(f"\n{path}")
    return written


def _link(target: Path, page: Path) -> str:
    """`target` relative to the page's folder (the page opens from disk)."""
    return Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix()


def html_systems(runs: list[Results], table: History, page: Path) -> list[dict]:
    """Per system: its runs (label, links, verdict) and its cases' series, flagged cases
    first, for history_page.html.j2."""
    systems: dict[str, dict] = {}
    for key, points in table.items():
        for label, series in by_system(runs, key, points).items():
            system = system_key(runs[series[0][0]])
            entry = systems.setdefault(system, {"key": system, "runs": set(), "cases": []})
            entry["runs"].update(i for i, _ in series)
            marked = [key in flagged_cases(runs[i]) for i, _ in series]
            values = [v for _, v in series]
            steps = series_steps(runs, key, label, series)
            at = {i: p for p, (i, _) in enumerate(series)}
            entry["cases"].append({
                "case": key, "params": label[len(system):].strip(), "series": values,
                "marked": marked, "flagged_runs": [i for (i, _), m in zip(series, marked) if m],
                "steps": [{"run": s.after, "position": at[s.after], "text": s.detail(runs)}
                          for s in steps],
                "first": values[0], "last": values[-1],
                "change": values[-1] / values[0] - 1 if values[0] > 0 else None})
    out = []
    for entry in systems.values():
        run_rows = []
        for i in sorted(entry["runs"]):
            run = runs[i]
            index = run.path.parent / "index.html"
            verdict = compare_verdict(run)
            run_rows.append({"index": i, "label": _run_label(run),
                             "file": _link(run.path, page), "name": str(run.path),
                             "page": _link(index, page) if index.exists() else None,
                             "verdict": verdict.get("verdict") if verdict else None})
        cases = sorted(entry["cases"], key=lambda c: (not c["flagged_runs"], not c["steps"]))
        out.append({"key": entry["key"], "runs": run_rows, "cases": cases})
    return out


def write_html(runs: list[Results], table: History, out: Path,
               metric: str = "time_median_s") -> Path:
    """The history page (see the module's docstring); returns its path."""
    from scripts.results.page_render import render

    out.parent.mkdir(parents=True, exist_ok=True)
    systems = html_systems(runs, table, out)
    out.write_text(render("history_page.html.j2", title=f"History of {len(runs)} run(s)",
                          metric=metric, timed=metric.endswith("_s"), systems=systems))
    return out


def add_selection_args(parser: argparse.ArgumentParser) -> None:
    """The runs and cases a history reads (history_of): inputs, --case, --metric, --bench,
    --include-partial; history and change-points share them."""
    parser.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR",
                        help="results files, or directories searched recursively for *.h5")
    parser.add_argument("--case", default=None, metavar="REGEX",
                        help="only cases whose <bench>/<case> name matches this regular "
                             "expression (re.search)")
    parser.add_argument("--metric", default="time_median_s",
                        help="case attribute to track (default time_median_s; e.g. busbw_GBps)")
    parser.add_argument("--bench", default=None, metavar="NAME",
                        help="only runs of this benchmark (the file attribute `bench`); files "
                             "of others are skipped with a warning")
    parser.add_argument("--include-partial", action="store_true",
                        help="in directories, also read *.h5.partial files (runs that did "
                             "not finish); files named explicitly are always read")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Print (and optionally plot) each case's median step time over many runs, "
                    "oldest run first by created_utc.")
    add_selection_args(parser)
    parser.add_argument("--plot", type=Path, default=None, metavar="OUT.png",
                        help="also draw the metric per case over runs: OUT.png, or one "
                             "OUT_<system>.png per system when the runs span several")
    parser.add_argument("--html", type=Path, default=None, metavar="OUT.html",
                        help="also write a page: per system its runs and every case's trend "
                             "with the compare step's regressions marked")
    return parser.parse_args(argv)


def history_of(args: argparse.Namespace) -> tuple[list[Results], History] | int:
    """The runs and case table that the command line asks for (add_selection_args), or the
    exit status after an error line; warnings print as `warning: ...` lines."""
    cli_warnings()
    try:
        pattern = re.compile(args.case) if args.case else None
    except re.error as err:
        print(f"error: bad --case regex: {err}", file=sys.stderr)
        return 2
    missing = [p for p in args.inputs if not Path(p).exists()]
    if missing:
        print(f"error: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    runs = load_runs(args.inputs, args.include_partial, args.bench, pattern)
    if not runs:
        what = f" of bench {args.bench}" if args.bench else ""
        print(f"error: no results files{what} found", file=sys.stderr)
        return 1
    table = case_history(runs, pattern, args.metric)
    if not table:
        print("error: no case matches", file=sys.stderr)
        return 1
    return runs, table


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    found = history_of(args)
    if isinstance(found, int):
        return found
    runs, table = found
    print_history(runs, table, args.metric)
    if args.plot:
        plot_history(runs, table, args.plot, args.metric)
    if args.html:
        print(f"\n{write_html(runs, table, args.html, args.metric)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
