#!/usr/bin/env python3
"""Track a metric of each case (median step time by default) over many runs, ordered by
`created_utc`, one line per system (device names, world size, process group, link preset,
transport, backend, dtype: see baselines.py), marking the runs that the compare step flagged (a
`<run>.compare.json` verdict beside the results file, as slurm/lib/run_bench.sh leaves it).

A case name need not encode every parameter, so where a case's parameters change between runs
of one system its line splits per parameter set, labelled with the parameters that differ.
`--bench NAME` keeps the runs of one benchmark and skips the others with a warning."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import system_key  # noqa: E402
from suite_results import (ABSENT, CONFIG_KEYS, Results, cli_warnings, file_stem,  # noqa: E402
                           find_result_files, natural_key, read_results, warn)

_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


def load_runs(inputs: list[str], include_partial: bool,
              bench: str | None = None) -> list[Results]:
    """Read every file (attributes only) and sort by `created_utc`, then by path; with `bench`,
    the runs of other benchmarks are left out (one warning names them)."""
    runs = []
    others: dict[str, int] = {}
    for path in find_result_files(inputs, include_partial):
        try:
            res = read_results(path, load_datasets=False)
        except OSError as err:
            warn(f"{path}: not readable as HDF5 ({err}); skipped")
            continue
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
    path = run.path.with_name(file_stem(run.path) + ".compare.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def flagged_cases(run: Results) -> set[str]:
    """Cases the compare step flagged in this run (regressions and failed checks)."""
    verdict = compare_verdict(run)
    if not verdict or verdict.get("verdict") != "regression":
        return set()
    return set(verdict.get("regressions", [])) | set(verdict.get("check_failures", []))


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
    for i, run in enumerate(runs):
        verdict = compare_verdict(run)
        note = f"  [compare: {verdict.get('verdict')}]" if verdict else ""
        print(f"  [{i}] {_run_label(run)}  {run.path}{note}")
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


def plot_history(runs: list[Results], table: History, out: Path,
                 metric: str = "time_median_s") -> None:
    """One line per case and system over runs (x labelled by commit and date); runs the
    compare step flagged for the case are marked with a red cross."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(7, 0.6 * len(runs) + 3), 5))
    systems = {system_key(r) for r in runs}
    flag_label = "flagged by compare"
    for key, points in table.items():
        for system, series in by_system(runs, key, points).items():
            if len(systems) > 1:
                label = f"{key} [{system}]"
            else:  # one system: name only the parameters of a split line, if any
                label = f"{key}{system[len(next(iter(systems))):]}"
            ax.plot([i for i, _ in series], [m for _, m in series], marker="o", label=label)
            bad = [(i, m) for i, m in series if key in flagged_cases(runs[i])]
            if bad:
                ax.scatter([i for i, _ in bad], [m for _, m in bad], marker="x", s=120,
                           color="red", zorder=5, label=flag_label)
                flag_label = "_nolegend_"
    labels = [f"{str(r.attrs.get('git_commit', '?'))[:10]}\n"
              f"{str(r.attrs.get('created_utc', '?'))[:10]}" for r in runs]
    ax.set_xticks(range(len(runs)), labels, fontsize=7)
    if all(m > 0 for pts in table.values() for _, m in pts):
        ax.set_yscale("log")
    ax.set_ylabel("median step time (s)" if metric == "time_median_s" else metric)
    ax.set_xlabel("run (oldest first)")
    ax.grid(True, which="both", alpha=0.3)
    if len(table) * len(systems) <= 12:
        ax.legend(fontsize=7)
    ax.set_title(f"{metric} over {len(runs)} runs, {len(systems)} system(s)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"\n{out}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Print (and optionally plot) each case's median step time over many runs, "
                    "oldest run first by created_utc.")
    parser.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR",
                        help="results files, or directories searched recursively for *.h5")
    parser.add_argument("--case", default=None, metavar="REGEX",
                        help="only cases whose <bench>/<case> name matches this regular "
                             "expression (re.search)")
    parser.add_argument("--metric", default="time_median_s",
                        help="case attribute to track (default time_median_s; e.g. busbw_GBps)")
    parser.add_argument("--plot", type=Path, default=None, metavar="OUT.png",
                        help="also write a PNG of the median step time per case over runs")
    parser.add_argument("--bench", default=None, metavar="NAME",
                        help="only runs of this benchmark (the file attribute `bench`); files "
                             "of others are skipped with a warning")
    parser.add_argument("--include-partial", action="store_true",
                        help="in directories, also read *.h5.partial files (runs that did "
                             "not finish); files named explicitly are always read")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
    runs = load_runs(args.inputs, args.include_partial, args.bench)
    if not runs:
        what = f" of bench {args.bench}" if args.bench else ""
        print(f"error: no results files{what} found", file=sys.stderr)
        return 1
    table = case_history(runs, pattern, args.metric)
    if not table:
        print("error: no case matches", file=sys.stderr)
        return 1
    print_history(runs, table, args.metric)
    if args.plot:
        plot_history(runs, table, args.plot, args.metric)
    return 0


if __name__ == "__main__":
    sys.exit(main())
